/* nb_dual.h - forward-mode dual numbers: a value and its derivatives with
 * respect to up to NB_DUAL_N parameters at once.
 *
 * The derivative images of nb-sim --grad are the pixel model (nb_pixel.inc,
 * with the double path's terms of nb_pixel_double.inc) evaluated in these
 * numbers: every operation carries the value exactly as double arithmetic
 * computes it (the same operation on the values, so the value part of a
 * rendered dual is the double path's pixel, bit for bit) and the
 * derivatives by the chain rule.  Host and CUDA device code.
 *
 * The operations are written once (nb_dual_ops.inc) for three types:
 * nb_dual in double (the double path's derivatives), nb_fdual in single
 * precision (the fast path's derivatives on a GPU, nb_physics_fgrad.h) and
 * nb_hdual, double with half the tangents (a curved detector's rotations
 * on the fast path, nb_curved_tangents, taken in two halves).
 *
 * Where a function's derivative is infinite or undefined at a point the
 * model meets, the value chosen is the one the composed function needs:
 * sqrt at 0 has derivative 0 (it only ever takes the root of a sum of
 * squares whose own derivative is 0 there, and the round crystal's sinc3 is
 * flat at 0); the grating factor sin(Nx)/sin(x) is differentiated in the
 * reduced variable (docs/physics.md, section 14).
 */
#ifndef NB_DUAL_H
#define NB_DUAL_H

#include <math.h>

#ifdef __CUDACC__
#define NB_DUAL_INLINE __host__ __device__ static __forceinline__
#else
#define NB_DUAL_INLINE static inline __attribute__((always_inline))
#endif

/* derivatives carried per pass: nb-sim --grad renders in passes of this many names */
#define NB_DUAL_N 8

typedef struct nb_dual {
    double v;
    double d[NB_DUAL_N];
} nb_dual;

typedef struct nb_fdual {
    float v;
    float d[NB_DUAL_N];
} nb_fdual;

/* Half a pass's tangents in double: what a curved detector's rotations
 * carry at a time (nb_curved_tangents, to fit a GPU thread's registers).
 * Each tangent's arithmetic is the same in any width (tangent i of a
 * result reads tangent i of the operands, and the values), so two halves
 * give nb_dual's numbers, bit for bit. */
#define NB_HDUAL_N (NB_DUAL_N / 2)
typedef struct nb_hdual {
    double v;
    double d[NB_HDUAL_N];
} nb_hdual;

#define DU nb_dual
#define DU_REAL double
#define DU_N NB_DUAL_N
#define DUF(name) nb_dual_##name
#define DU_MATH(fn) fn
#include "nb_dual_ops.inc"

#define DU nb_fdual
#define DU_REAL float
#define DU_N NB_DUAL_N
#define DUF(name) nb_fdual_##name
#define DU_MATH(fn) fn##f
#include "nb_dual_ops.inc"

#define DU nb_hdual
#define DU_REAL double
#define DU_N NB_HDUAL_N
#define DUF(name) nb_hdual_##name
#define DU_MATH(fn) fn
#include "nb_dual_ops.inc"

#endif
