/* nb_physics.h - the per-pixel physics of nanoBragg, in one place.
 *
 * Every function here is inline and marked NB_HD, so the same source compiles
 * for the host (the CPU kernels, the unit tests) and for a CUDA device.  What
 * a pixel collects is nb_pixel.inc, the one pixel model; this header holds
 * the terms it is instantiated with for the reference-faithful double pixel
 * nb_pixel_double() (the model every other backend is checked against), the
 * single-precision scalar pixel nb_pixel_fast() (nb_pixel_fast_opts() for a
 * plan's nb_pixel_opts), and the same with the Miller index by offset from a
 * reference, nb_pixel_offset() (the CUDA kernel's where the crystal allows).
 *
 * The double pixel's terms are nb_pixel_double.inc, instantiated here for
 * double and in nb_physics_dual.h for the dual numbers of the derivatives.
 * The order of floating-point operations follows nanoBragg.c so that the
 * double path reproduces its images to rounding (see docs/physics.md for the
 * formulas and docs/deviations.md for where we differ on purpose).
 */
#ifndef NB_PHYSICS_H
#define NB_PHYSICS_H

#include <math.h>
#include <stddef.h>
#include <string.h>

#include "nb_constants.h"
#include "nb_fgrid.h"
#include "nb_hd.h"
#include "nb_fields.h"

/* The kernels render these shapes and no other: a plan with another is refused
 * before rendering, and the lattice factors give NaN for it (never a
 * silent top-hat). */
NB_HD int nb_shape_known(int shape) { return shape >= NB_SHAPE_SQUARE && shape <= NB_SHAPE_TOPHAT; }

/* ---- lattice and shape transforms --------------------------------------- */

/* Fourier transform of a grating of N slits: sin(Nx)/sin(x). */
NB_HD double nb_sincg(double x, double N)
{
    if (x == 0.0) return N;
    return sin(x * N) / sin(x);
}

/* Fourier transform of a sphere. */
NB_HD double nb_sinc3(double x)
{
    if (x == 0.0) return 1.0;
    return 3.0 * (sin(x) / x - cos(x)) / (x * x);
}

/* The grating factor of N cells at fractional index h (nearest whole index
 * h0).  For whole N this is the reference's sin(N pi h)/sin(pi h); for a
 * fractional N (an nb extension, docs/deviations.md; `reduced`, known per
 * plan: nb_kparams.frac_N) it is taken in the reduced index h - h0, so that
 * every reciprocal lattice point has the same peak (for whole N the two
 * agree up to the sign, which F_latt^2 drops). */
NB_HD double nb_sincg_hkl(double h, int h0, double N, int reduced)
{
    return reduced ? nb_sincg(M_PI * (h - h0), N) : nb_sincg(M_PI * h, N);
}

/* ---- structure factors -------------------------------------------------- */

NB_HD double nb_fgrid_at(const nb_fgrid *g, int h, int k, int l)
{
    return g->F[((long)(h - g->h_min) * g->k_range + (k - g->k_min)) * g->l_range + (l - g->l_min)];
}

/* Nearest-neighbour structure factor: grid value inside the box, else default_F. */
NB_HD double nb_F_nearest(const nb_fgrid *g, int h0, int k0, int l0)
{
    if (g->hkls && h0 <= g->h_max && h0 >= g->h_min && k0 <= g->k_max && k0 >= g->k_min && l0 <= g->l_max &&
        l0 >= g->l_min)
        return nb_fgrid_at(g, h0, k0, l0);
    return g->default_F;
}

/* Is the 4x4x4 neighbourhood of the fractional index inside the grid?
 * (the reference's test, on the fractional h) */
NB_HD int nb_tricubic_safe(const nb_fgrid *g, double h, double k, double l)
{
    return !(((h - g->h_min + 3) > g->h_range) || (h - 2 < g->h_min) || ((k - g->k_min + 3) > g->k_range) ||
             (k - 2 < g->k_min) || ((l - g->l_min + 3) > g->l_range) || (l - 2 < g->l_min));
}

/* ---- the fast path: single precision where it is safe ------------------- *
 * Miller indices are computed in double (nb-sim's fast kernel does that);
 * everything downstream of the fractional index is single precision, in the
 * functions of nb_fastmath.inc, instantiated here for a plain float
 * (nb_sinpi, nb_lattice, nb_polar ...) and in nb_sim_fast.c for SIMD vectors. */

/* Round a double to nearest without libm: exact for |x| < 2^51. */
NB_HD double nb_rint(double x)
{
    const double magic = 6755399441055744.0; /* 1.5 * 2^52 */
    return x >= 0.0 ? (x + magic) - magic : (x - magic) + magic;
}

NB_HD float nb_bits_as_float(int i)
{
    union {
        int i;
        float f;
    } u;
    u.i = i;
    return u.f;
}

NB_HD int nb_float_bits(float f)
{
    union {
        int i;
        float f;
    } u;
    u.f = f;
    return u.i;
}

#define NB_FN(name) nb_##name
#define NBF float
#define NBI int
#define NB_SELF(m, a, b) ((m) ? (a) : (b))
#define NB_NOT(m) (!(m))
#define NB_F2I(x) ((int)(x))
#define NB_I2F(i) ((float)(i))
#define NB_BITSF(i) nb_bits_as_float(i)
#define NB_FBITS(x) nb_float_bits(x)
#define NB_KEEP(x) ((void)0) /* nothing contracts: C11 and nvcc --fmad=false */
#define NB_MASKI(m) (-(m))
#define NB_GATHER(p, i) ((p)[i])
#define NB_SPLAT(x) ((float)(x))
#define NB_UNROLL_CUBE 0 /* the CUDA kernel's code stays small */
#define NB_INLINE NB_HD
#include "nb_fastmath.inc"
#undef NB_FN
#undef NBF
#undef NBI
#undef NB_SELF
#undef NB_NOT
#undef NB_F2I
#undef NB_I2F
#undef NB_BITSF
#undef NB_FBITS
#undef NB_KEEP
#undef NB_MASKI
#undef NB_GATHER
#undef NB_UNROLL_CUBE
#undef NB_SPLAT
#undef NB_INLINE

/* ---- the pixel ---------------------------------------------------------- */

/* Everything one pixel needs, flattened for both backends.  Lengths in metres,
 * wavelengths in metres, angles in radians; the reciprocal vectors used by the
 * Gaussian and top-hat shapes are in 1/Angstrom, as in the reference. */
typedef struct nb_kparams {
    /* the panel rendered: its fields by the panel table (nb_fields.h),
     * filled by nb_kparams_set_panel */
    NB_PANEL_FIELDS(NB_FIELD_DECLARE)
    const unsigned char *mask;                  /* NULL, or 0 = skip pixel */
    /* the plan's, as it is (the same table's other half; distances: the
     * panel's, derived by nb_plan_panel_view) */
    NB_PLAN_KERNEL_FIELDS(NB_FIELD_DECLARE)
    /* worked out from the plan by nb_sim_setup_build */
    double subpixel_size;
    int nsources;
    const double *src_incident; /* 3 per source: unit propagation direction */
    const double *src_lambda;   /* metres */
    int ncells;                 /* phi steps x mosaic domains */
    const double *cells;        /* 9 per (phi, domain): a, b, c in metres */
    double a_star[3], b_star[3], c_star[3];
    int frac_N[3];              /* N along a, b, c is fractional (nb_sincg_hkl's reduced form) */
    int shape;
    double I_bg;
    double r_e_sqr, steps;
    int interpolate;
    nb_fgrid F;
} nb_kparams;

/* Is pixel (f, s) rendered: inside the ROI and not masked? (else it is 0) */
NB_HD int nb_pixel_rendered(const nb_kparams *kp, int f, int s)
{
    if (f < kp->roi_xmin || f > kp->roi_xmax || s < kp->roi_ymin || s > kp->roi_ymax) return 0;
    if (kp->mask && kp->mask[(size_t)s * kp->fpixels + f] == 0) return 0;
    return 1;
}

/* Diagnostics of one evaluated pixel, for -printout. */
typedef struct nb_pixel_trace {
    double pos[3];      /* last subpixel position, m */
    double stol;        /* last evaluated sin(theta)/lambda, 1/m */
    double h, k, l;
    int h0, k0, l0;
    double F_cell, F_latt, I, polar, omega, capture;
    double cell[9];     /* last a, b, c used, m */
} nb_pixel_trace;

/* ---- the reference-faithful double pixel: nb_pixel.inc's terms in double,
 * in the reference's order of operations ------------------------------- */

#define PX_FN(name) nb_dpx_##name
#define DRF(name) nb_##name
#define DR double
#define DR_KIN nb_kparams
#define DR_C(x) ((double)(x))
#define DR_V(a) (a)
#define DR_ADD(a, b) ((a) + (b))
#define DR_SUB(a, b) ((a) - (b))
#define DR_MUL(a, b) ((a) * (b))
#define DR_DIV(a, b) ((a) / (b))
#define DR_NEG(a) (-(a))
#define DR_SCALE(s, a) ((s) * (a))
#define DR_SQRT(a) sqrt(a)
#define DR_SIN(a) sin(a)
#define DR_COS(a) cos(a)
#define DR_EXP(a) exp(a)
#define DR_ATAN2(y, x) atan2(y, x)
#define DR_SINCG(h, h0, N, reduced) nb_sincg_hkl(h, h0, N, reduced)
#define DR_SINC3(x) nb_sinc3(x)
#include "nb_pixel_double.inc"

/* Render one pixel in double precision, exactly as the reference's pixel loop
 * does (for pixels inside the ROI and the mask).  Returns the photons/pixel;
 * adds this pixel's solid angles to *omega_sum; sets *tripped when a tricubic
 * neighbourhood left the grid (that evaluation then used the nearest
 * neighbour: docs/deviations.md). */
NB_HD double nb_pixel_double(const nb_kparams *p, int fpixel, int spixel, double *omega_sum, int *tripped,
                             nb_pixel_trace *trace)
{
    if (trace) memset(trace, 0, sizeof *trace);
    nb_dpx_ctx c = {p, p, fpixel, spixel, omega_sum, tripped, trace};
    const nb_pixel_opts general = {0, 0, 0};
    const nb_dpx_rules rules = nb_dpx_rules_of(p, general);
    nb_dpx_sums f = nb_dpx_collect(&c, general, &rules, -1);
    if (trace) {
        trace->I = f.I;
        trace->polar = f.polar;
        trace->omega = f.omega;
        trace->capture = f.capture;
        for (int i = 0; i < 9; i++) trace->cell[i] = p->ncells ? p->cells[9 * (p->ncells - 1) + i] : 0.0;
    }
    return f.value;
}

/* ---- the fast pixel -------------------------------------------------------- */

enum nb_fmode { NB_FMODE_DEFAULT = 0, NB_FMODE_NEAREST = 1, NB_FMODE_TRICUBIC = 2 };

/* Up to this N the grating factor is cheaper as U_{N-1}(cos pi d) than as a
 * ratio of sines (and as accurate: the recurrence is stable for |cos| <= 1). */
#define NB_CHEB_MAX_N 16

/* Per (source, cell): A = cell vectors / lambda (rows a, b, c), hi = A.i, and
 * A times the detector's fast, slow, normal axes and origin (on a flat
 * detector A.pos is then linear in the sub-pixel's Fdet, Sdet, Odet). */
typedef struct nb_pair {
    double A[9];
    double hi[3];
    double Af[3], As[3], Ao[3], Ap[3];
} nb_pair;

/* What the fast path needs beyond nb_kparams (built by nb_fparams_build in
 * nb-sim, copied to the device by the CUDA backend). */
typedef struct nb_fparams {
    nb_kparams kp;
    const nb_pair *pairs;           /* nsources x ncells, source-major */
    const float *src_i, *src_E, *src_B; /* per source: incident direction, its E and B polarization axes */
    const float *src_inv2lambda;    /* 1/(2 lambda), 1/m */
    float dmin;                     /* m, 0 = off */
    float a_star[3], b_star[3], c_star[3];
    const float *Fgrid;             /* float copy of the F grid, padded for 4x4x4 reads */
    int fmode;                      /* enum nb_fmode */
    int cheb;                       /* N a, b, c whole and <= NB_CHEB_MAX_N */
    int na, nb, nc;                 /* N a, b, c as whole numbers (with cheb) */
    /* the pixel's constants in single precision, converted once */
    float pix2_close, kahn, thickstep_mu, scale, Na_f, Nb_f, Nc_f, fudge_f, odet_f[3], default_F;
    /* For the Miller index by offset (nb_pixel_offset): per (source, cell),
     * A in single precision, a row of 4 (the 4th 0) per index; and how far
     * an index can move between a ray and its reference, times the largest N
     * (offset_reach: what sets the offset's rounding error). */
    const float *pair_A4;
    double offset_reach;
} nb_fparams;

/* ---- the fast pixel in plain scalar code: nb_pixel.inc's terms as the
 * SIMD kernel computes them (nb_sim_fast.c), one pixel at a time: the host
 * tests' and the CUDA kernel's ------------------------------------------- */

typedef struct nb_fpx_ctx {
    const nb_fparams *fp;
    const nb_kparams *kp;
    int fpixel, spixel;
    double *omega_sum;
    int *tripped;
    double C[3]; /* the current layer's and slow sub-step's part of the position */
    int fmode;   /* fp->fmode, or a constant the compiler folds (nb_pixel_opts.simple) */
    /* the pixel's constants in single precision, converted once */
    float pix2_close, kahn, thickstep_mu, scale, Na, Nb, Nc, fudge, odet[3];
    nb_fshape shape; /* the crystal's, for the lattice factor */
    int cube_n;      /* the usual cube's N in the Chebyshev form, else 0 */
} nb_fpx_ctx;
typedef struct nb_fpx_geo {
    double pos[3], inv; /* the position, 1/r in double */
    float invf, d[3];   /* 1/r, the direction */
} nb_fpx_geo;
typedef struct nb_fpx_src {
    float c2t;
} nb_fpx_src;
typedef struct nb_fpx_idx {
    float dh, dk, dl;
    int ih, ik, il;
} nb_fpx_idx;


NB_HD void nb_fpx_ctx_init(nb_fpx_ctx *c, const nb_fparams *fp, int fpixel, int spixel, double *omega_sum,
                           int *tripped)
{
    c->fp = fp, c->kp = &fp->kp;
    c->fpixel = fpixel, c->spixel = spixel;
    c->omega_sum = omega_sum, c->tripped = tripped;
    c->C[0] = c->C[1] = c->C[2] = 0.0;
    c->fmode = fp->fmode;
    c->pix2_close = fp->pix2_close, c->kahn = fp->kahn, c->thickstep_mu = fp->thickstep_mu, c->scale = fp->scale;
    c->Na = fp->Na_f, c->Nb = fp->Nb_f, c->Nc = fp->Nc_f, c->fudge = fp->fudge_f;
    for (int i = 0; i < 3; i++) c->odet[i] = fp->odet_f[i];
    c->shape.shape = fp->kp.shape, c->shape.cheb = fp->cheb;
    c->shape.n[0] = fp->na, c->shape.n[1] = fp->nb, c->shape.n[2] = fp->nc;
    c->shape.N[0] = c->Na, c->shape.N[1] = c->Nb, c->shape.N[2] = c->Nc, c->shape.fudge = c->fudge;
    for (int i = 0; i < 3; i++)
        c->shape.star[0][i] = fp->a_star[i], c->shape.star[1][i] = fp->b_star[i], c->shape.star[2][i] = fp->c_star[i];
    c->cube_n = fp->kp.shape == NB_SHAPE_SQUARE && fp->cheb && fp->na == fp->nb && fp->nb == fp->nc ? fp->na : 0;
}

NB_HD void nb_fpx_slow_step(nb_fpx_ctx *c, int t, int subS)
{
    const nb_kparams *kp = c->kp;
    const double Odet = t * kp->thickstep, sub = kp->subpixel_size;
    const double Sdet = sub * ((double)c->spixel * kp->oversample + subS) + sub / 2.0;
    for (int i = 0; i < 3; i++) c->C[i] = Sdet * kp->sdet[i] + Odet * kp->odet[i] + kp->pix0[i];
}

NB_HD void nb_fpx_subpixel(nb_fpx_ctx *c, int t, int subS, int subF, nb_fpx_geo *g)
{
    (void)t, (void)subS;
    const nb_kparams *kp = c->kp;
    const double sub = kp->subpixel_size;
    const double Fdet = sub * ((double)c->fpixel * kp->oversample + subF) + sub / 2.0;
    for (int i = 0; i < 3; i++) g->pos[i] = Fdet * kp->fdet[i] + c->C[i];
    if (kp->curved_detector) {
        double v[3], nv[3];
        for (int i = 0; i < 3; i++) v[i] = kp->distance * kp->beam[i];
        nb_rotate_axis(v, nv, kp->sdet, g->pos[1] / kp->distance);
        nb_rotate_axis(nv, g->pos, kp->fdet, g->pos[2] / kp->distance);
    }
    const double r2 = g->pos[0] * g->pos[0] + g->pos[1] * g->pos[1] + g->pos[2] * g->pos[2];
    /* 1/r: a single-precision estimate refined by a Newton step in double */
    double inv = (double)nb_rsqrtf2((float)r2);
    g->inv = inv * (1.5 - 0.5 * r2 * inv * inv);
    g->invf = (float)g->inv;
    for (int i = 0; i < 3; i++) g->d[i] = (float)g->pos[i] * g->invf;
}

NB_HD float nb_fpx_omega(nb_fpx_ctx *c, const nb_fpx_geo *g)
{
    return nb_omega(g->invf, c->pix2_close, c->kp->point_pixel);
}

NB_HD void nb_fpx_add_omega(nb_fpx_ctx *c, float omega, int live)
{
    (void)live;
    *c->omega_sum += omega;
}

NB_HD float nb_fpx_along(const nb_fpx_geo *g, const float v[3]) { return g->d[0] * v[0] + g->d[1] * v[1] + g->d[2] * v[2]; }

NB_HD float nb_fpx_capture(nb_fpx_ctx *c, const nb_fpx_geo *g, int t)
{
    return nb_capture(nb_fpx_along(g, c->odet), c->thickstep_mu, t);
}

NB_HD int nb_fpx_source(nb_fpx_ctx *c, const nb_fpx_geo *g, int src, nb_fpx_src *sv)
{
    sv->c2t = nb_fpx_along(g, c->fp->src_i + 3 * src);
    if (c->fp->dmin <= 0.0f) return -1;
    return -nb_within_dmin(sv->c2t, c->fp->src_inv2lambda[src], c->fp->dmin);
}

NB_HD float nb_fpx_polarization(nb_fpx_ctx *c, nb_fpx_geo *g, nb_fpx_src *sv, int src)
{
    float dE = 0.0f, dB = 0.0f;
    if (c->kahn != 0.0f) {
        dE = nb_fpx_along(g, c->fp->src_E + 3 * src);
        dB = nb_fpx_along(g, c->fp->src_B + 3 * src);
    }
    return nb_polar(c->kahn, sv->c2t, dE, dB);
}

NB_HD void nb_fpx_index(nb_fpx_ctx *c, const nb_fpx_geo *g, const nb_fpx_src *sv, int src, int cell, nb_fpx_idx *x)
{
    (void)sv;
    const nb_pair *pc = c->fp->pairs + (size_t)src * c->kp->ncells + cell;
    double hkl[3], whole[3];
    float frac[3];
    for (int i = 0; i < 3; i++) {
        hkl[i] = (pc->A[3 * i] * g->pos[0] + pc->A[3 * i + 1] * g->pos[1] + pc->A[3 * i + 2] * g->pos[2]) * g->inv -
                 pc->hi[i];
        whole[i] = nb_rint(hkl[i]);
        frac[i] = (float)(hkl[i] - whole[i]);
    }
    x->dh = frac[0], x->dk = frac[1], x->dl = frac[2];
    x->ih = (int)whole[0], x->ik = (int)whole[1], x->il = (int)whole[2];
}

NB_HD float nb_fpx_lattice(nb_fpx_ctx *c, const nb_fpx_idx *x)
{
    /* the Chebyshev cube with the whole N of the parameters, not unrolled
     * (NB_UNROLL_CUBE 0: the CUDA kernel's code stays small) */
    return nb_lattice(&c->shape, c->cube_n, x->dh, x->dk, x->dl);
}

/* F_cell: the default, the nearest grid value, or tricubic where the 4x4x4
 * neighbourhood is inside the grid (the nearest value elsewhere). */
NB_HD float nb_fpx_structure(nb_fpx_ctx *c, const nb_fpx_idx *x, int accept)
{
    (void)accept;
    const nb_fparams *fp = c->fp;
    const nb_fgrid *g = &c->kp->F;
    if (c->fmode == NB_FMODE_DEFAULT) return fp->default_F;
    const float F_cell = nb_fgrid_nearest(g, fp->Fgrid, fp->default_F, x->ih, x->ik, x->il);
    if (c->fmode != NB_FMODE_TRICUBIC) return F_cell;
    int base;
    float pos[3], wh[4], wk[4], wl[4];
    if (!nb_tricubic_site(g, x->ih, x->ik, x->il, x->dh, x->dk, x->dl, &base, pos)) {
        *c->tripped = 1;
        return F_cell;
    }
    nb_cubic_weights(pos[0], wh);
    nb_cubic_weights(pos[1], wk);
    nb_cubic_weights(pos[2], wl);
    return nb_tricubic_block(fp->Fgrid + base, g->k_range, g->l_range, wh, wk, wl);
}

NB_HD float nb_fpx_term(nb_fpx_ctx *c, float F_cell, float F_latt)
{
    (void)c;
    return F_cell * F_cell * F_latt * F_latt;
}

NB_HD float nb_fpx_scale(nb_fpx_ctx *c, float I) { return c->scale * I; }

#define PX_FN(name) nb_fpx_##name
#define PX_REAL float
#include "nb_pixel_scalar.inc"

/* One pixel on the fast path, in plain scalar code: the SIMD kernel's terms
 * (nb_sim_fast.c) for one pixel, for the pixels `o` describes (inlined, the
 * options fold; every `o` that holds gives the same bits).  Returns
 * photons/pixel; adds the evaluated solid angles to *omega_sum; sets
 * *tripped where a tricubic neighbourhood left the grid. */
NB_HD float nb_pixel_fast_opts(const nb_fparams *fp, const nb_pixel_opts o, int fpixel, int spixel, double *omega_sum,
                               int *tripped)
{
    nb_fpx_ctx c;
    nb_fpx_ctx_init(&c, fp, fpixel, spixel, omega_sum, tripped);
    if (o.simple) c.fmode = NB_FMODE_DEFAULT;
    const nb_fpx_rules rules = nb_fpx_rules_of(&fp->kp, o);
    return nb_fpx_collect(&c, o, &rules, -1).value;
}

/* The same for any pixel (the host tests' general case). */
NB_HD float nb_pixel_fast(const nb_fparams *fp, int fpixel, int spixel, double *omega_sum, int *tripped)
{
    const nb_pixel_opts general = {0, 0, 0};
    return nb_pixel_fast_opts(fp, general, fpixel, spixel, omega_sum, tripped);
}

/* What the fast kernels may assume of every pixel of a plan (nb_pixel_opts):
 * the CPU's SIMD kernel and the CUDA kernel instantiate the pixel for it. */
NB_HD nb_pixel_opts nb_fast_opts_of(const nb_fparams *fp)
{
    const nb_kparams *kp = &fp->kp;
    nb_pixel_opts o;
    o.simple = !kp->oversample_thick && !kp->oversample_polar && !kp->oversample_omega && kp->thick == 0.0 &&
               fp->dmin <= 0.0f && fp->fmode == NB_FMODE_DEFAULT && isfinite(kp->F.default_F);
    o.one_step = kp->oversample == 1 && kp->thicksteps == 1;
    o.one_pair = kp->nsources == 1 && kp->ncells == 1;
    return o;
}

/* ---- the fast pixel with the Miller index by offset ----------------------
 * nb_pixel_fast()'s terms but the index: the fractional index of a (source,
 * cell) is taken, in single precision, as a reference's plus A times the
 * ray's offset from the reference direction.  The reference (one direction
 * d0, and per (source, cell) H0 = A d0 - A i split into its whole part and
 * its fraction, in double) is shared by NB_OFFSET_SPAN neighbouring pixels:
 * a warp of the CUDA kernel.  A d0 is large (cell / lambda) and the offset
 * small (the span's angle), so the index keeps its digits without the nine
 * double multiply-adds per term of nb_fpx_index; the rounding error grows
 * with the span's angle, |A| and N (fparams.offset_reach), and the CUDA
 * backend takes this path only where it is below NB_OFFSET_REACH_MAX
 * (docs/architecture.md, section 8, "The kernels"). */

/* the pixels that share one reference: a warp */
#define NB_OFFSET_SPAN 32
/* The largest reach (N |A| times the largest angle between a ray and its
 * reference) for which the CUDA kernel takes the index by offset: there the
 * offset's rounding moves a pixel by at most a few 1e-7 of the brightest,
 * the fast path's own error (tests/unit/test_kernels.c: at most 8e-7 at
 * reaches up to 17; up to 8.8e-6 at reaches of 36 to 136). */
#define NB_OFFSET_REACH_MAX 32.0

/* A (source, cell)'s reference: H0's fraction and whole part */
typedef struct nb_offset_ref {
    float frac[4]; /* the 4th unused: 16-byte loads */
    int whole[4];
} nb_offset_ref;

typedef struct nb_opx_ctx {
    nb_fpx_ctx f;
    const float *A4;           /* the pairs' A, rows of 4 */
    const nb_offset_ref *ref;  /* the pairs' references */
    double d0[3];              /* the reference direction */
} nb_opx_ctx;
typedef struct nb_opx_geo {
    nb_fpx_geo f;
    float e[3]; /* the direction minus d0 */
} nb_opx_geo;
typedef nb_fpx_src nb_opx_src;
typedef nb_fpx_idx nb_opx_idx;

/* The reference direction: that of pixel (fpixel, spixel)'s first sub-pixel
 * (in the first layer), as nb_fpx_subpixel computes it, in double. */
NB_HD void nb_offset_direction(const nb_fparams *fp, int fpixel, int spixel, double d0[3])
{
    nb_fpx_ctx c;
    nb_fpx_geo g;
    nb_fpx_ctx_init(&c, fp, fpixel, spixel, NULL, NULL);
    nb_fpx_slow_step(&c, 0, 0);
    nb_fpx_subpixel(&c, 0, 0, 0, &g);
    for (int i = 0; i < 3; i++) d0[i] = g.pos[i] * g.inv;
}

/* Pair p's reference for the direction d0. */
NB_HD void nb_offset_reference(const nb_fparams *fp, const double d0[3], size_t p, nb_offset_ref *r)
{
    const nb_pair *pc = fp->pairs + p;
    for (int i = 0; i < 3; i++) {
        const double H = pc->A[3 * i] * d0[0] + pc->A[3 * i + 1] * d0[1] + pc->A[3 * i + 2] * d0[2] - pc->hi[i];
        const double whole = nb_rint(H);
        r->frac[i] = (float)(H - whole);
        r->whole[i] = (int)whole;
    }
    r->frac[3] = 0.0f, r->whole[3] = 0;
}

NB_HD void nb_opx_slow_step(nb_opx_ctx *c, int t, int subS) { nb_fpx_slow_step(&c->f, t, subS); }

NB_HD void nb_opx_subpixel(nb_opx_ctx *c, int t, int subS, int subF, nb_opx_geo *g)
{
    nb_fpx_subpixel(&c->f, t, subS, subF, &g->f);
    for (int i = 0; i < 3; i++) g->e[i] = (float)(g->f.pos[i] * g->f.inv - c->d0[i]);
}

NB_HD float nb_opx_omega(nb_opx_ctx *c, const nb_opx_geo *g) { return nb_fpx_omega(&c->f, &g->f); }
NB_HD void nb_opx_add_omega(nb_opx_ctx *c, float omega, int live) { nb_fpx_add_omega(&c->f, omega, live); }
NB_HD float nb_opx_capture(nb_opx_ctx *c, const nb_opx_geo *g, int t) { return nb_fpx_capture(&c->f, &g->f, t); }
NB_HD int nb_opx_source(nb_opx_ctx *c, const nb_opx_geo *g, int src, nb_opx_src *sv)
{
    return nb_fpx_source(&c->f, &g->f, src, sv);
}
NB_HD float nb_opx_polarization(nb_opx_ctx *c, nb_opx_geo *g, nb_opx_src *sv, int src)
{
    return nb_fpx_polarization(&c->f, &g->f, sv, src);
}

/* Round to nearest for |x| < 2^22, and the whole number as an int from the
 * sum's low bits (no conversion instruction). */
NB_HD float nb_round_whole(float x, int *whole)
{
    const float magic = 12582912.0f; /* 1.5 * 2^23 */
    const float big = x + magic;
    *whole = nb_float_bits(big) - nb_float_bits(magic);
    return big - magic;
}

NB_HD void nb_opx_index(nb_opx_ctx *c, const nb_opx_geo *g, const nb_opx_src *sv, int src, int cell, nb_opx_idx *x)
{
    (void)sv;
    const int p = src * c->f.kp->ncells + cell; /* the references of a block fit in 48 KiB */
    const float *A = c->A4 + 12 * p;
    const nb_offset_ref *r = c->ref + p;
    float frac[3];
    int whole[3];
    for (int i = 0; i < 3; i++) {
        const float h = r->frac[i] + A[4 * i] * g->e[0] + A[4 * i + 1] * g->e[1] + A[4 * i + 2] * g->e[2];
        frac[i] = h - nb_round_whole(h, &whole[i]);
    }
    x->dh = frac[0], x->dk = frac[1], x->dl = frac[2];
    x->ih = r->whole[0] + whole[0], x->ik = r->whole[1] + whole[1], x->il = r->whole[2] + whole[2];
}

NB_HD float nb_opx_lattice(nb_opx_ctx *c, const nb_opx_idx *x) { return nb_fpx_lattice(&c->f, x); }

NB_HD float nb_opx_structure(nb_opx_ctx *c, const nb_opx_idx *x, int accept)
{
    return nb_fpx_structure(&c->f, x, accept);
}
NB_HD float nb_opx_term(nb_opx_ctx *c, float F_cell, float F_latt) { return nb_fpx_term(&c->f, F_cell, F_latt); }
NB_HD float nb_opx_scale(nb_opx_ctx *c, float I) { return nb_fpx_scale(&c->f, I); }

#define PX_FN(name) nb_opx_##name
#define PX_REAL float
#include "nb_pixel_scalar.inc"

/* One pixel on the fast path with the index by offset, for the pixels `o`
 * describes (nb_fast_opts_of; inlined, so that the compiler folds them): A4
 * and ref the pairs' (fp->pair_A4 or a copy; nb_offset_reference for the
 * direction d0).  Otherwise as nb_pixel_fast. */
NB_HD float nb_pixel_offset(const nb_fparams *fp, const nb_pixel_opts o, const float *A4, const nb_offset_ref *ref,
                            const double d0[3], int fpixel, int spixel, double *omega_sum, int *tripped)
{
    nb_opx_ctx c;
    nb_fpx_ctx_init(&c.f, fp, fpixel, spixel, omega_sum, tripped);
    if (o.simple) c.f.fmode = NB_FMODE_DEFAULT;
    c.A4 = A4, c.ref = ref;
    for (int i = 0; i < 3; i++) c.d0[i] = d0[i];
    const nb_opx_rules rules = nb_opx_rules_of(&fp->kp, o);
    return nb_opx_collect(&c, o, &rules, -1).value;
}


#endif
