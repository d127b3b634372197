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

NB_DUAL_INLINE nb_dual nb_dual_c(double v)
{
    nb_dual r;
    r.v = v;
    for (int i = 0; i < NB_DUAL_N; i++) r.d[i] = 0.0;
    return r;
}

/* r = s * a for a constant s */
NB_DUAL_INLINE nb_dual nb_dual_scale(double s, nb_dual a)
{
    nb_dual r;
    r.v = s * a.v;
    for (int i = 0; i < NB_DUAL_N; i++) r.d[i] = s * a.d[i];
    return r;
}

NB_DUAL_INLINE nb_dual nb_dual_add(nb_dual a, nb_dual b)
{
    nb_dual r;
    r.v = a.v + b.v;
    for (int i = 0; i < NB_DUAL_N; i++) r.d[i] = a.d[i] + b.d[i];
    return r;
}

NB_DUAL_INLINE nb_dual nb_dual_sub(nb_dual a, nb_dual b)
{
    nb_dual r;
    r.v = a.v - b.v;
    for (int i = 0; i < NB_DUAL_N; i++) r.d[i] = a.d[i] - b.d[i];
    return r;
}

NB_DUAL_INLINE nb_dual nb_dual_neg(nb_dual a) { return nb_dual_scale(-1.0, a); }

NB_DUAL_INLINE nb_dual nb_dual_mul(nb_dual a, nb_dual b)
{
    nb_dual r;
    r.v = a.v * b.v;
    for (int i = 0; i < NB_DUAL_N; i++) r.d[i] = a.d[i] * b.v + a.v * b.d[i];
    return r;
}

NB_DUAL_INLINE nb_dual nb_dual_div(nb_dual a, nb_dual b)
{
    nb_dual r;
    r.v = a.v / b.v;
    for (int i = 0; i < NB_DUAL_N; i++) r.d[i] = (a.d[i] - r.v * b.d[i]) / b.v;
    return r;
}

/* f(a) with f(a.v) = fv, f'(a.v) = slope */
NB_DUAL_INLINE nb_dual nb_dual_chain(nb_dual a, double fv, double slope)
{
    nb_dual r;
    r.v = fv;
    for (int i = 0; i < NB_DUAL_N; i++) r.d[i] = slope * a.d[i];
    return r;
}

NB_DUAL_INLINE nb_dual nb_dual_sqrt(nb_dual a)
{
    double s = sqrt(a.v);
    return nb_dual_chain(a, s, s > 0.0 ? 0.5 / s : 0.0);
}

NB_DUAL_INLINE nb_dual nb_dual_sin(nb_dual a) { return nb_dual_chain(a, sin(a.v), cos(a.v)); }
NB_DUAL_INLINE nb_dual nb_dual_cos(nb_dual a) { return nb_dual_chain(a, cos(a.v), -sin(a.v)); }

NB_DUAL_INLINE nb_dual nb_dual_exp(nb_dual a)
{
    double e = exp(a.v);
    return nb_dual_chain(a, e, e);
}

NB_DUAL_INLINE nb_dual nb_dual_atan2(nb_dual y, nb_dual x)
{
    nb_dual r;
    double r2 = x.v * x.v + y.v * y.v;
    r.v = atan2(y.v, x.v);
    for (int i = 0; i < NB_DUAL_N; i++) r.d[i] = r2 > 0.0 ? (x.v * y.d[i] - y.v * x.d[i]) / r2 : 0.0;
    return r;
}

#endif
