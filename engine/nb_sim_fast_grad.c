/* nb_sim_fast_grad.c - the fast CPU kernel's derivatives (nb-sim --grad on
 * the fast path): the image pass's pixel model (nb_fast_lanes.inc) in lanes
 * carrying tangents, instantiated for 4 and NB_DUAL_N tangents
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

/* The instantiations, which are most of the build's time (each row kind of
 * each tangent count is a function the compiler optimises whole: 6-7 s of
 * CPU apiece).  A vector instruction set's: 4 and NB_DUAL_N tangents, each
 * with the flat rows' specialisations, curved detectors in the NB_DUAL_N
 * one.  Fewer tangents than lanes cost little (three names, the detector's
 * distance and beam centre, in 4 lanes of tangents took 9 % longer than in
 * 3: 1024^2 with mosaic and sub-pixels, 55.9 against 51.2 ms; one in 4,
 * 1.5x a pass of its own), against a build that has to stay short.  The
 * portable fallback beside x86's variants (NB_FAST_GRAD_LEAN): NB_DUAL_N
 * tangents alone, curved and flat rows. */
#ifdef NB_FAST_GRAD_LEAN
#define FG_K NB_DUAL_N
#define FG_SUFFIX _kmax
#define FG_ROWS FG_ROWS_PLAIN
#include "nb_fast_grad.inc"
#else
#define FG_K 4
#define FG_SUFFIX _k4
#define FG_ROWS FG_ROWS_FLAT
#include "nb_fast_grad.inc"
#define FG_K NB_DUAL_N
#define FG_SUFFIX _kmax
#define FG_ROWS FG_ROWS_ALL
#include "nb_fast_grad.inc"
#endif

/* a pass of nd names in the smallest instantiation that holds them (a
 * curved detector's in the one that has its rows) */
void NB_FAST_GRAD_NAME(const nb_fparams *fs, const nb_fgrad *fg, float *image, float **grads, double *row_omega,
                       int *tripped, nb_progress *prog)
{
#ifndef NB_FAST_GRAD_LEAN
    if (fg->nd <= 4 && !fs->kp.curved_detector) {
        grad_rows_k4(fs, fg, image, grads, row_omega, tripped, prog);
        return;
    }
#endif
    grad_rows_kmax(fs, fg, image, grads, row_omega, tripped, prog);
}
