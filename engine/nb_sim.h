/* nb_sim.h - nb-sim's kernels: the plan and F grid in, a float image out. */
#ifndef NB_SIM_H
#define NB_SIM_H

#include "nb_error.h"
#include "nb_hkl.h"
#include "nb_image.h"
#include "nb_physics.h"
#include "nb_plan.h"
#include "nb_stream.h"
#include "nb_tuning.h"
#include "nb_util.h"

/* Everything the kernels need, with the storage behind kp's pointers. */
typedef struct nb_sim_setup {
    nb_kparams kp;
    double *cells;        /* 9 per (phi step, mosaic domain) */
    double *src_incident; /* 3 per source */
    double *src_lambda;
} nb_sim_setup;

/* The kernels' panel fields from a panel, by the panel table (every row). */
void nb_kparams_set_panel(nb_kparams *dst, const nb_panel *src);

/* Hoist what does not depend on the pixel: rotated cells per (phi, domain),
 * source directions and wavelengths, normalisation, the water background.
 * A plan without a crystal (nb_plan_has_crystal) is refused. */
nb_status nb_sim_setup_build(const nb_plan *plan, const nb_hkl *hkl, nb_sim_setup *s);
/* Its first part alone, what any pixel of the plan needs: the panel's and
 * the plan's fields, r_e^2, the sources' directions and wavelengths (the
 * amorphous pixel's parameters, which need no crystal). */
nb_status nb_sim_setup_beam(const nb_plan *plan, nb_sim_setup *s);
/* (plan: a one-panel plan, nb_plan_panel_view; its first panel is rendered) */
void nb_sim_setup_free(nb_sim_setup *s);

/* The structure factors of a plan that no HKL record followed: its
 * -default_F, or an error saying what is missing (nb-hkl, or any F). */
nb_status nb_sim_plan_F(const nb_plan *plan, nb_hkl *hkl);

/* The double path's pixels in double, as they are before the float image
 * rounds them (nb.h's nb_render_frame_double): where they go, NULL where
 * not wanted.  The CPU's double kernels write them; others refuse them. */
typedef struct nb_wide_out {
    double *image;
    double **grads;     /* one buffer per derivative */
} nb_wide_out;

/* A vector-Jacobian product (nb.h's nb_render_frame_vjp) in place of
 * derivative images: sums[j] += the sum over the panel's pixels of
 * weights[pixel] x the derivative by name j, in double.  The fast path on
 * the CPU forms it in its rows; the other paths render the derivatives into
 * *scratch first (grown to *scratch_bytes as needed, kept by the caller for
 * the next call) and weigh them in fixed blocks.  Either sum is the same on
 * any thread count. */
typedef struct nb_vjp_io {
    const double *weights;
    double *sums;
    void **scratch;
    size_t *scratch_bytes;
} nb_vjp_io;

typedef struct nb_render_result {
    double omega_sum;   /* sum of solid angles of all evaluated sub-pixels */
    int tripped;        /* a tricubic neighbourhood left the grid somewhere */
    double seconds;     /* the whole render call (uploads and copies included) */
    double kernel_seconds; /* the kernel alone (the CUDA backend; 0 on the CPU) */
    double transfer_seconds; /* its host-device copies, on the GPU's clock (0 on the CPU) */
    nb_row_stats *row_stats; /* in: spixels entries for each row's statistics, or NULL */
    nb_payload_crc *row_crc; /* in: one piece per row, for the stream writer's CRC, or NULL */
    int row_stats_filled;    /* out: the renderer filled them and row_crc (the CPU kernels do, row by row) */
    const nb_wide_out *wide; /* in: the double path's pixels in double too (image NULL: only so), or NULL */
    const nb_vjp_io *vjp;    /* in: the derivatives' product with weights in place of their images, or NULL
                              * (nb_render_grads; with wide, of the double path's doubles) */
} nb_render_result;

/* Reference-faithful double precision on the CPU (OpenMP over rows).  The
 * image (fpixels*spixels) is written in full: 0 outside the ROI and mask;
 * with res->wide, its image in double too (image may then be NULL). */
nb_status nb_render_cpu_double(const nb_kparams *kp, float *image, nb_render_result *res, nb_progress *prog);

/* The fast path's parameters: nb_kparams plus the per (source, cell) and per
 * source constants and a float F grid, allocated here (nb_fparams_free). */
nb_status nb_fparams_build(const nb_kparams *kp, nb_fparams *fp);
void nb_fparams_free(nb_fparams *fp);

/* The fast single-precision path (nb_sim_fast.c), vectorised for the best
 * instruction set this CPU has (AVX-512, AVX2+FMA, or baseline). */
nb_status nb_render_cpu_fast(const nb_kparams *kp, float *image, nb_render_result *res, nb_progress *prog);
/* Which variant nb_render_cpu_fast would run here: "avx512", "avx2" or "generic"
 * (NB_SIMD=avx2|generic in the environment forces a lower one). */
const char *nb_fast_variant(void);

#endif
