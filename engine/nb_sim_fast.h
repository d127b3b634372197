/* nb_sim_fast.h - the fast CPU kernel's per-instruction-set entry points.
 * The parameters (nb_fparams) and the scalar pixel (nb_pixel_fast) live in
 * nb_physics.h, shared with the CUDA backend. */
#ifndef NB_SIM_FAST_H
#define NB_SIM_FAST_H

#include "nb_dual.h"
#include "nb_image.h"
#include "nb_physics.h"
#include "nb_physics_fgrad.h" /* nb_fgrad: the tangents the derivatives follow */
#include "nb_stream.h"
#include "nb_util.h"

/* row_stats and row_crc: each row's statistics and its CRC-32 for the stream
 * writer, taken while the row is in cache (either may be NULL) */
typedef void (*nb_fast_kernel)(const nb_fparams *fp, float *image, double *row_omega, nb_row_stats *row_stats,
                               nb_payload_crc *row_crc, int *tripped, nb_progress *prog);

void nb_render_fast_generic(const nb_fparams *fp, float *image, double *row_omega, nb_row_stats *row_stats,
                            nb_payload_crc *row_crc, int *tripped, nb_progress *prog);
void nb_render_fast_avx2(const nb_fparams *fp, float *image, double *row_omega, nb_row_stats *row_stats,
                         nb_payload_crc *row_crc, int *tripped, nb_progress *prog);
void nb_render_fast_avx512(const nb_fparams *fp, float *image, double *row_omega, nb_row_stats *row_stats,
                           nb_payload_crc *row_crc, int *tripped, nb_progress *prog);


/* The image (NULL: not wanted) and its derivatives grads[0 .. fg->nd - 1],
 * the fast kernel's pixel model in lanes carrying tangents. */
typedef void (*nb_fast_grad_kernel)(const nb_fparams *fp, const nb_fgrad *fg, float *image, float **grads,
                                    double *row_omega, int *tripped, nb_progress *prog);
/* the variant nb_fast_variant names */
nb_fast_grad_kernel nb_pick_fast_grad_kernel(void);
/* The names a pass of that variant's flat rows carries at most: 4 on AVX2,
 * else NB_DUAL_N (nb_sim_cpu.c says why). */
int nb_fast_grad_names_a_pass(void);
void nb_render_fast_grad_generic(const nb_fparams *fp, const nb_fgrad *fg, float *image, float **grads,
                                 double *row_omega, int *tripped, nb_progress *prog);
void nb_render_fast_grad_avx2(const nb_fparams *fp, const nb_fgrad *fg, float *image, float **grads,
                              double *row_omega, int *tripped, nb_progress *prog);
void nb_render_fast_grad_avx512(const nb_fparams *fp, const nb_fgrad *fg, float *image, float **grads,
                                double *row_omega, int *tripped, nb_progress *prog);

/* The vector-Jacobian product in one sweep (nb_fast_adjoint.inc): for each
 * row s, row_sums[s nd + j] = the row's sum over its pixels of weight x dI/d
 * name j, the names' tangents in passes of NB_DUAL_N (pass[q] holds names
 * q NB_DUAL_N ..; weights and row_sums of nb_fgrad unused).  Flat
 * detectors without -oversample_* flags (fast_adjoint_supports, nb_sim_grad.c). */
typedef struct nb_fadj {
    const nb_fgrad *pass;
    int npasses, nd;
    const double *weights; /* the panel's pixels */
    double *row_sums;      /* spixels x nd */
} nb_fadj;
/* The image too (NULL: not wanted); 0, or -1 where its scratch could not be had. */
typedef int (*nb_fast_adjoint_kernel)(const nb_fparams *fp, const nb_fadj *job, float *image, double *row_omega,
                                      int *tripped, nb_progress *prog);
nb_fast_adjoint_kernel nb_pick_fast_adjoint_kernel(void);
int nb_render_fast_adjoint_generic(const nb_fparams *fp, const nb_fadj *job, float *image, double *row_omega,
                                   int *tripped, nb_progress *prog);
int nb_render_fast_adjoint_avx2(const nb_fparams *fp, const nb_fadj *job, float *image, double *row_omega,
                                int *tripped, nb_progress *prog);
int nb_render_fast_adjoint_avx512(const nb_fparams *fp, const nb_fadj *job, float *image, double *row_omega,
                                  int *tripped, nb_progress *prog);

#endif
