/* nb_sim_fast.h - the fast CPU kernel's per-instruction-set entry points.
 * The parameters (nb_fparams) and the scalar pixel (nb_pixel_fast) live in
 * nb_physics.h, shared with the CUDA backend. */
#ifndef NB_SIM_FAST_H
#define NB_SIM_FAST_H

#include "nb_dual.h"
#include "nb_image.h"
#include "nb_physics.h"
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

/* The tangents the fast kernel's derivatives follow (nb-sim --grad on the
 * fast path), with respect to up to NB_DUAL_N parameters: the detector's axes
 * and origin, the sources' per-(source, cell) constants, the reciprocal cell,
 * the crystal size, the fluence and the water background.  Built by
 * nb_fgrad_build (nb_sim_cpu.c) from the double path's nb_kdual; every other
 * input is fixed.  Single precision, as the kernel's lanes. */
typedef struct nb_fgrad {
    int nd; /* tangents in use; the others are 0 */
    float dfdet[3][NB_DUAL_N], dsdet[3][NB_DUAL_N], dodet[3][NB_DUAL_N], dpix0[3][NB_DUAL_N];
    float dclose[NB_DUAL_N];       /* of the close distance, m */
    float ddistance[NB_DUAL_N], dbeam[3][NB_DUAL_N]; /* a curved detector's sphere */
    float dstar[3][3][NB_DUAL_N];  /* of a*, b*, c* (1/Angstrom) */
    float dN[3][NB_DUAL_N];        /* of Na, Nb, Nc */
    float dscale[NB_DUAL_N];       /* of r_e^2 fluence / steps */
    float dI_bg[NB_DUAL_N];        /* of the water background */
    const float *dA, *dhi;         /* per (source, cell) pair: of A (9) and A.i (3), NB_DUAL_N each */
    /* per pair, of A.fdet, A.sdet, A.odet and A.pix0 (4 x 3, NB_DUAL_N each): on a flat
     * detector the tangent of A.pos is then dAf F + dAs S + dAo O + dAp, as the image's
     * A.pos is Af F + As S + Ao O + Ap (nb_pair) */
    const float *dAaxes;
    /* room for each thread's per-slow-step parts of that, dAs S + dAo O + dAp (3 x
     * NB_DUAL_N per pair and slot): slow_scratch + thread * slow_stride; slow_slots, 1
     * or a slot for each of a row's slow steps (layers x slow sub-steps) where they fit */
    float *slow_scratch;
    size_t slow_stride;
    int slow_slots;
} nb_fgrad;

/* The image (NULL: not wanted) and its derivatives grads[0 .. fg->nd - 1],
 * the fast kernel's pixel model in lanes carrying tangents. */
typedef void (*nb_fast_grad_kernel)(const nb_fparams *fp, const nb_fgrad *fg, float *image, float **grads,
                                    double *row_omega, int *tripped, nb_progress *prog);
/* the variant nb_fast_variant names */
nb_fast_grad_kernel nb_pick_fast_grad_kernel(void);
void nb_render_fast_grad_generic(const nb_fparams *fp, const nb_fgrad *fg, float *image, float **grads,
                                 double *row_omega, int *tripped, nb_progress *prog);
void nb_render_fast_grad_avx2(const nb_fparams *fp, const nb_fgrad *fg, float *image, float **grads,
                              double *row_omega, int *tripped, nb_progress *prog);
void nb_render_fast_grad_avx512(const nb_fparams *fp, const nb_fgrad *fg, float *image, float **grads,
                                double *row_omega, int *tripped, nb_progress *prog);

#endif
