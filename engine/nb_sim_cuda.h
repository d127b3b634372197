/* nb_sim_cuda.h - nb-sim's CUDA backend (built when nvcc is found).
 *
 * The physics is nb_physics.h's: nb_pixel_double() for -precision double and,
 * for the default path, nb_pixel_fast_opts() or nb_pixel_offset() (the
 * Miller index in double, or by offset from a warp's reference), one thread
 * per pixel, and
 * nb_physics_dual.h's nb_pixel_grad() (double) and nb_physics_fgrad.h's
 * nb_pixel_fast_grad() (the fast path) for derivatives.  Only launch,
 * memory and reduction code is CUDA-specific.  The plan's arrays (sources,
 * rotated cells, the F grid, the mask) stay on the device across frames of
 * the same plan; each frame's image comes back through a pinned buffer. */
#ifndef NB_SIM_CUDA_H
#define NB_SIM_CUDA_H

#include "nb_physics_fgrad.h"
#include "nb_sim.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nb_cuda nb_cuda;

/* Set the CUDA environment nb-sim renders best in (where the user has not
 * set it): before any thread starts, since it changes the environment, and
 * before nb_cuda_open, which reads it. */
void nb_cuda_environment(void);

/* Open the first CUDA device; NB_ERR_UNSUPPORTED with the reason (no driver,
 * no device, a build without CUDA) when there is none.  desc receives e.g.
 * "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs)". */
nb_status nb_cuda_open(nb_cuda **ctx, char *desc, size_t desc_size);
void nb_cuda_close(nb_cuda *ctx);

/* Render one frame: uploads what changed since the last call (by pointer and
 * size), runs the double or fast kernel, copies the image back. */
nb_status nb_render_cuda(nb_cuda *ctx, const nb_kparams *kp, int use_double, float *image, nb_render_result *res);

/* Render one frame and its derivatives on the double path in dual numbers
 * (nb_pixel_grad): k's values and nd (<= NB_DUAL_N) derivatives, the image
 * (NULL: not wanted) and grads[0 .. nd-1] back as nb_render_cpu_grad gives
 * them. */
nb_status nb_render_cuda_grad(nb_cuda *ctx, const nb_kparams *kp, const nb_kdual *k, int nd, float *image,
                              float **grads, nb_render_result *res);

/* The same on the fast path (nb_pixel_fast_grad: the fast family's terms
 * and their slopes, as the CPU's fast derivatives): fp, the plan's fast
 * parameters (nb_fparams_build), and fg, the tangents (nb_fgrad_build), on
 * the host; uploaded here. */
nb_status nb_render_cuda_fast_grad(nb_cuda *ctx, const nb_fparams *fp, const nb_fgrad *fg, int nd, float *image,
                                   float **grads, nb_render_result *res);

/* 1 when this binary has the CUDA backend compiled in. */
int nb_cuda_compiled(void);

#ifdef __cplusplus
}
#endif

#endif
