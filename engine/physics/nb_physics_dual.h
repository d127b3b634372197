/* nb_physics_dual.h - the double pixel in dual numbers: the image and its
 * derivatives with respect to up to NB_DUAL_N parameters in one pass.
 *
 * nb_pixel_double.inc's terms instantiated for nb_dual (the pixel model of
 * nb_pixel.inc, once more).  The inputs the derivatives follow are an
 * nb_kdual: the fields of nb_kparams that a parameter of nb-sim --grad can
 * move (the detector's vectors and distances, the sources, the rotated cells,
 * the reciprocal cell, the crystal size, the fluence and the water
 * background), each a value and its derivatives (engine/nb_sim_grad.c works
 * them out from the plan).  Every other field of nb_kparams is a constant.
 * Host and CUDA device code.
 *
 * (The fast path's derivatives are the fast family's terms with their
 * slopes: engine/nb_fast_grad.inc on the CPU, nb_physics_fgrad.h one pixel
 * at a time on a GPU.)
 */
#ifndef NB_PHYSICS_DUAL_H
#define NB_PHYSICS_DUAL_H

#include "nb_dual.h"
#include "nb_physics.h"

/* nb_kparams' followed fields, as duals (same names, same units): the rows of nb_fields.h's
 * tables whose follow column says FOLLOWED, and what nb_sim_setup_build
 * works out from followed fields of the plan */
#define NB_KDUAL_FIELD_nb_dual(key, kind, member, follow, what) \
    NB_FIELD_IF_FOLLOWED_##follow(nb_dual member NB_FIELD_ARRAY_##kind;)
#define NB_KDUAL_FIELDS(T)                                                                                            \
    NB_PANEL_FIELDS(NB_KDUAL_FIELD_##T)       /* the tables' FOLLOWED rows (nb_fields.h) */                           \
    NB_PLAN_KERNEL_FIELDS(NB_KDUAL_FIELD_##T)                                                                         \
    T a_star[3], b_star[3], c_star[3];                                                                                \
    T I_bg;                                                                                                           \
    const T *src_incident; /* 3 per source */                                                                         \
    const T *src_lambda;   /* per source */                                                                           \
    const T *cells;        /* 9 per (phi step, mosaic domain) */
typedef struct nb_kdual {
    NB_KDUAL_FIELDS(nb_dual)
} nb_kdual;

/* The grating factor of nb_sincg_hkl with its derivatives in h and N.  The
 * value is nb_sincg's, sin(N X)/sin(X) at X = pi h (whole N: the reference's
 * form) or X = pi (h - h0) (fractional N), and so is d/dh, by the same sines
 * and their cosines.  d/dN is that of the reduced form, pi d cos(N X)/sin(X)
 * with d = h - h0 (for whole N the unreduced form's own would count the h0
 * whole turns: a crystal of N cells at every lattice point is what moves).
 * Within 1e-4 of a peak, where the difference of nearly equal terms would
 * lose its digits, the series of the reduced form. */
NB_DUAL_INLINE nb_dual nb_dual_sincg_hkl(nb_dual h, int h0, nb_dual N, int reduced)
{
    const double n = N.v, d = h.v - h0;
    const double X = reduced ? M_PI * d : M_PI * h.v;
    double dv_dh, dv_dN;
    nb_dual r;
    if (fabs(n * M_PI * d) < 1e-4) {
        r.v = nb_sincg_hkl(h.v, h0, n, reduced);
        const double sign = r.v < 0.0 ? -1.0 : 1.0;
        dv_dh = sign * M_PI * (-n * (n * n - 1.0) * M_PI * d / 3.0);
        dv_dN = sign;
    } else {
        const double s1 = sin(X * n), s0 = sin(X), c1 = cos(X * n), c0 = cos(X);
        r.v = s1 / s0; /* nb_sincg(X, n), X != 0 here */
        dv_dh = M_PI * (n * c1 * s0 - s1 * c0) / (s0 * s0);
        dv_dN = M_PI * d * c1 / s0;
    }
    for (int i = 0; i < NB_DUAL_N; i++) r.d[i] = dv_dh * h.d[i] + dv_dN * N.d[i];
    return r;
}

/* The sphere's transform 3 (sin x / x - cos x) / x^2 (nb_sinc3), with its
 * series near 0. */
NB_DUAL_INLINE nb_dual nb_dual_sinc3(nb_dual a)
{
    const double x = a.v;
    double slope;
    if (fabs(x) < 1e-3) {
        slope = -x / 5.0 + x * x * x / 70.0;
    } else {
        const double f = nb_sinc3(x);
        const double du = (x * cos(x) - sin(x)) / (x * x) + sin(x);
        slope = 3.0 * du / (x * x) - 2.0 * f / x;
    }
    return nb_dual_chain(a, nb_sinc3(x), slope);
}

/* every operation inlined: the duals stay in registers, not in struct copies */
#define DR_INLINE NB_DUAL_INLINE
#define DR_PX_INLINE DR_INLINE
#define PX_FN(name) nb_gpx_##name
#define DRF(name) nb_gd_##name
#define DR nb_dual
#define DR_KIN nb_kdual
#define DR_C(x) nb_dual_c(x)
#define DR_V(a) ((a).v)
#define DR_ADD(a, b) nb_dual_add(a, b)
#define DR_SUB(a, b) nb_dual_sub(a, b)
#define DR_MUL(a, b) nb_dual_mul(a, b)
#define DR_DIV(a, b) nb_dual_div(a, b)
#define DR_NEG(a) nb_dual_neg(a)
#define DR_SCALE(s, a) nb_dual_scale(s, a)
#define DR_SQRT(a) nb_dual_sqrt(a)
#define DR_SIN(a) nb_dual_sin(a)
#define DR_COS(a) nb_dual_cos(a)
#define DR_EXP(a) nb_dual_exp(a)
#define DR_ATAN2(y, x) nb_dual_atan2(y, x)
#define DR_SINCG(h, h0, N, reduced) nb_dual_sincg_hkl(h, h0, N, reduced)
#define DR_SINC3(x) nb_dual_sinc3(x)
#define PX_SPLAT(x) nb_dual_c(x)
#define PX_ADD(a, b) nb_dual_add(a, b)
#define PX_MUL(a, b) nb_dual_mul(a, b)
#define PX_IS_ZERO(a) PX_IS((a).v == 0.0)
#include "nb_pixel_double.inc"

/* One pixel and its derivatives: the value is nb_pixel_double()'s, bit for
 * bit; d[i] is its derivative with respect to parameter i of k.  Adds the
 * pixel's solid angles to *omega_sum; sets *tripped as nb_pixel_double. */
NB_DUAL_INLINE nb_dual nb_pixel_grad(const nb_kparams *p, const nb_kdual *k, int fpixel, int spixel,
                                    double *omega_sum, int *tripped)
{
    nb_gpx_ctx c = {p, k, fpixel, spixel, omega_sum, tripped, NULL};
    const nb_pixel_opts general = {0, 0, 0};
    nb_gpx_rules rules = nb_gpx_rules_of(p, general);
    rules.I0 = k->I_bg; /* the water background depends on the fluence */
    return nb_gpx_collect(&c, general, &rules, -1).value;
}

#endif
