/* nb_sim_fast.h - the fast CPU kernel's setup and its per-ISA entry points. */
#ifndef NB_SIM_FAST_H
#define NB_SIM_FAST_H

#include "nb_physics.h"
#include "nb_util.h"

/* pixels per group of SIMD lanes (one AVX-512 register of floats) */
#define NB_FAST_LANES 16

enum nb_fmode { NB_FMODE_DEFAULT = 0, NB_FMODE_NEAREST = 1, NB_FMODE_TRICUBIC = 2 };

typedef struct nb_fast_setup {
    nb_kparams kp;          /* the same parameters as the double path */
    void *pairs;            /* per (source, cell): A = cell/lambda (9), hi = A.i (3), doubles */
    float *src_i, *src_E, *src_B; /* per source: incident direction, its E and B polarization axes */
    float *src_inv2lambda;  /* 1/(2 lambda), 1/m */
    float dmin;             /* m, 0 = off */
    float a_star[3], b_star[3], c_star[3];
    float *Fgrid;           /* float copy of the F grid, padded */
    int fmode;
    int cheb;               /* N a, b, c whole numbers <= NB_CHEB_MAX_N: Chebyshev grating factor */
} nb_fast_setup;

/* Up to this N the grating factor is cheaper as U_{N-1}(cos pi d) than as a
 * ratio of sines (and as accurate: the recurrence is stable for |cos| <= 1). */
#define NB_CHEB_MAX_N 16

typedef void (*nb_fast_kernel)(const nb_fast_setup *fs, float *image, double *row_omega, int *tripped,
                               nb_progress *prog);

void nb_render_fast_generic(const nb_fast_setup *fs, float *image, double *row_omega, int *tripped, nb_progress *prog);
void nb_render_fast_avx2(const nb_fast_setup *fs, float *image, double *row_omega, int *tripped, nb_progress *prog);
void nb_render_fast_avx512(const nb_fast_setup *fs, float *image, double *row_omega, int *tripped, nb_progress *prog);

#endif
