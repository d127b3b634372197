/* nb_sim_fast_grad.c - the fast CPU kernel's derivatives (nb-sim --grad on
 * the fast path): the image pass's pixel model (nb_fast_lanes.inc) in lanes
 * carrying tangents, instantiated for 1, 3, 4 and NB_DUAL_N tangents
 * (nb_fast_grad.inc).
 *
 * Compiled once per instruction set with NB_FAST_GRAD_NAME naming the entry
 * point; a translation unit of its own so that the image pass and this, most
 * of the kernel's compile time, build in parallel.
 */
#include "nb_fast_lanes.inc"

/* ---- the derivatives of this kernel (nb-sim --grad on the fast path) ------ */

#ifndef NB_FAST_GRAD_NAME
#error "NB_FAST_GRAD_NAME names this instruction set's entry point"
#endif
#include "nb_physics_dual.h" /* a curved detector's positions: the double path's rotations in duals */
#define FG_K 1
#define FG_SUFFIX _k1
#include "nb_fast_grad.inc"
#define FG_K 3
#define FG_SUFFIX _k3
#include "nb_fast_grad.inc"
#define FG_K 4
#define FG_SUFFIX _k4
#include "nb_fast_grad.inc"
#define FG_K NB_DUAL_N
#define FG_SUFFIX _kmax
#include "nb_fast_grad.inc"

/* a pass of nd names in the smallest instantiation that holds them: the
 * tangents' cost is per tangent carried (three names, the detector's
 * distance and beam centre, in 4 lanes of tangents took 9 % longer than in
 * 3: 1024^2 with mosaic and sub-pixels, 55.9 against 51.2 ms) */
void NB_FAST_GRAD_NAME(const nb_fparams *fs, const nb_fgrad *fg, float *image, float **grads, double *row_omega,
                       int *tripped, nb_progress *prog)
{
    if (fg->nd <= 1) grad_rows_k1(fs, fg, image, grads, row_omega, tripped, prog);
    else if (fg->nd <= 3) grad_rows_k3(fs, fg, image, grads, row_omega, tripped, prog);
    else if (fg->nd <= 4) grad_rows_k4(fs, fg, image, grads, row_omega, tripped, prog);
    else grad_rows_kmax(fs, fg, image, grads, row_omega, tripped, prog);
}
