/* nb-sim's fast CPU kernel: one fused pass per pixel, SIMD lanes across
 * pixels, OpenMP over rows.
 *
 * A group of W neighbouring pixels of a row is one set of vectors (GCC
 * vector extensions): W = 16 floats, one register, with AVX-512; 8 with
 * AVX2; 4 with the generic SSE2 build.  This file is compiled once per
 * instruction set with NB_FAST_NAME naming the entry point; nb_sim_cpu.c
 * picks one at run time.  What a pixel collects is nb_pixel.inc, the one
 * pixel model, instantiated here with terms for W lanes (vx_px_*); the
 * physics after the Miller index is nb_fastmath.inc, the same source the
 * scalar (host test and CUDA) instantiation in nb_physics.h is built from.
 *
 * Precision: on a flat detector the Miller indices at the centre of each
 * group are double, and the lanes' offsets from them single precision from
 * exact differences (vx_px_index); on a curved one every lane's index is
 * double.  From the fractional index on (lattice factor, structure factor,
 * polarization, solid angle, absorption, accumulation) single precision.
 * The order of the loops and the "first value" rules of the reference (solid
 * angle and polarization from the first sub-pixel, capture fraction of the
 * last layer) are kept, as are the -oversample_* multiplications.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

#include "nb_sim.h"
#include "nb_sim_fast.h"

#ifndef NB_FAST_NAME
#define NB_FAST_NAME nb_render_fast_generic
#endif

/* lanes per group: one native register of floats (AVX-512 16, AVX2 8,
 * SSE 4), so that float compares and selects stay in vector registers;
 * doubles take two registers */
#ifndef NB_FAST_W
#define NB_FAST_W 4
#endif
#define W NB_FAST_W
#if W != 4 && W != 8 && W != 16 && W != 32
#error "NB_FAST_W must be 4, 8, 16 or 32"
#endif
/* the native register's floats: the hardware estimates work on W / NW of them */
#if defined(__AVX512F__) && W % 16 == 0
#define NW 16
typedef __m512 vfn;
typedef __m512i vin;
#elif defined(__AVX2__) && W % 8 == 0
#define NW 8
typedef __m256 vfn;
typedef __m256i vin;
#else
#define NW 0
#endif

typedef float vf __attribute__((vector_size(4 * W)));
typedef int vi __attribute__((vector_size(4 * W)));
typedef double vd __attribute__((vector_size(8 * W)));

#define NB_FN(name) vx_##name
#define NBF vf
#define NBI vi
#define NB_SELF(m, a, b) ((vf)(((vi)(a) & (m)) | ((vi)(b) & ~(m))))
#define NB_NOT(m) (~(m))
#define NB_F2I(x) __builtin_convertvector((x), vi)
#define NB_I2F(i) __builtin_convertvector((i), vf)
#define NB_BITSF(i) ((vf)(i))
#define NB_FBITS(x) ((vi)(x))
#define NB_INLINE static inline __attribute__((always_inline))
#include "nb_fastmath.inc"

#define INL static inline __attribute__((always_inline))

/* the row statistics, compiled for this instruction set */
#define NB_ROW_STATS_NAME row_stats_here
#define NB_ROW_STATS_LINKAGE static
#include "nb_rowstats.inc"

INL vf splat(float x) { return (vf){0} + x; }
/* an optimisation barrier: *x is rounded as computed, not fused into what uses it */
INL void no_contract(vf *x)
{
#if NW == 16 && W == 16
    __asm__("" : "+v"(*x)); /* one zmm register */
#elif W * 4 <= 32 && (NW == 8 || W == 4)
    __asm__("" : "+x"(*x)); /* one xmm or ymm register */
#else
    __asm__("" : "+m"(*x));
#endif
}
INL vi maskall(int on) { return (vi){0} + (on ? -1 : 0); }
INL vf self(vi m, vf a, vf b) { return (vf)(((vi)a & m) | ((vi)b & ~m)); }
INL vf tof(vd x) { return __builtin_convertvector(x, vf); }
INL vd tod(vf x) { return __builtin_convertvector(x, vd); }

/* round to nearest (ties to even), exact for |x| < 2^51: adding 1.5 * 2^52
 * leaves no fraction bits, for either sign (no compare: double-vector
 * compares are not native on every target) */
INL vd rintd(vd x)
{
    const double magic = 6755399441055744.0;
    return (x + magic) - magic;
}

INL int any_lane(vi m)
{
    unsigned long long q[W / 2];
    memcpy(q, &m, sizeof q);
    unsigned long long a = 0;
    for (int j = 0; j < W / 2; j++) a |= q[j];
    return a != 0;
}

#if W == 32
static const vf lane_index = {0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15,
                              16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31};
#elif W == 16
static const vf lane_index = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
#elif W == 8
static const vf lane_index = {0, 1, 2, 3, 4, 5, 6, 7};
#else
static const vf lane_index = {0, 1, 2, 3};
#endif

/* Apply a native-width operation to each register of a W-lane vector. */
#define PER_REG(T_OUT, x, OP)                                                                                         \
    ({                                                                                                                \
        T_OUT r_;                                                                                                     \
        for (int c_ = 0; c_ < W / NW; c_++) {                                                                         \
            __typeof__(x) x_ = (x);                                                                                   \
            vfn in_;                                                                                                  \
            memcpy(&in_, (const char *)&x_ + c_ * sizeof in_, sizeof in_);                                            \
            vfn out_ = OP(in_);                                                                                       \
            memcpy((char *)&r_ + c_ * sizeof out_, &out_, sizeof out_);                                               \
        }                                                                                                             \
        r_;                                                                                                           \
    })

/* base[idx] for each lane (idx in range on every lane) */
INL vf gather(const float *base, vi idx)
{
#if NW == 16
    vf r;
    for (int c = 0; c < W / NW; c++) {
        vin ic;
        memcpy(&ic, (const char *)&idx + c * sizeof ic, sizeof ic);
        __m512 g = _mm512_i32gather_ps(ic, base, 4);
        memcpy((char *)&r + c * sizeof g, &g, sizeof g);
    }
    return r;
#elif NW == 8
    vf r;
    for (int c = 0; c < W / NW; c++) {
        vin ic;
        memcpy(&ic, (const char *)&idx + c * sizeof ic, sizeof ic);
        __m256 g = _mm256_i32gather_ps(base, ic, 4);
        memcpy((char *)&r + c * sizeof g, &g, sizeof g);
    }
    return r;
#else
    vf r;
    for (int j = 0; j < W; j++) r[j] = base[idx[j]];
    return r;
#endif
}

/* 1/sqrt(x) to about 1e-5: the hardware estimate where there is one
 * (AVX-512 14 bits, AVX 12 bits, one Newton step), else the bit-level
 * estimate with two Newton steps.  Short latency matters: it heads the
 * dependency chain of every sub-pixel. */
INL vf rsqrt_est(vf x)
{
#if NW == 16
    vf y = PER_REG(vf, x, _mm512_rsqrt14_ps);
    return y * (1.5f - 0.5f * x * y * y);
#elif NW == 8
    vf y = PER_REG(vf, x, _mm256_rsqrt_ps);
    return y * (1.5f - 0.5f * x * y * y);
#else
    return vx_rsqrtf2(x);
#endif
}



/* neighbourhoods of a group read by broadcast before the rest is gathered */
#define NB_TRICUBIC_SETS 4

/* Where the tricubic interpolation of the lanes reads: returns the lanes
 * whose 4x4x4 neighbourhood is inside the grid, the reference's test
 * h_min + 2 <= h <= h_max - 2 on the fractional h (the others: base 0, a
 * valid read); base, the neighbourhood's first node; x, the positions within
 * the cell along h, k, l (floor from the nearest index).  ih.. are the
 * nearest indices, dh.. the fractional parts h - ih in [-1/2, 1/2]. */
INL vi tricubic_site(const nb_fgrid *g, vi ih, vi ik, vi il, vf dh, vf dk, vf dl, vi *base, vf x[3])
{
    vf hh = __builtin_convertvector(ih, vf) + dh, kk = __builtin_convertvector(ik, vf) + dk,
       ll = __builtin_convertvector(il, vf) + dl;
    vi safe = (hh >= (float)(g->h_min + 2)) & (hh <= (float)(g->h_max - 2)) & (kk >= (float)(g->k_min + 2)) &
              (kk <= (float)(g->k_max - 2)) & (ll >= (float)(g->l_min + 2)) & (ll <= (float)(g->l_max - 2));
    vi neg_h = dh < 0.0f, neg_k = dk < 0.0f, neg_l = dl < 0.0f; /* -1 where the floor is one below */
    x[0] = dh + self(neg_h, splat(1.0f), splat(0.0f));
    x[1] = dk + self(neg_k, splat(1.0f), splat(0.0f));
    x[2] = dl + self(neg_l, splat(1.0f), splat(0.0f));
    *base = (((ih + neg_h - 1 - g->h_min) * g->k_range + (ik + neg_k - 1 - g->k_min)) * g->l_range +
             (il + neg_l - 1 - g->l_min)) & safe;
    return safe;
}

/* The structure factor for the lanes: nearest neighbour, or tricubic where
 * the 4x4x4 neighbourhood is inside the grid, with the nearest neighbour as
 * the fallback (docs/deviations.md).  ih.. are the nearest indices, dh.. the
 * fractional parts h - ih in [-1/2, 1/2]. */
INL vf structure_factor(const nb_fparams *fs, vi ih, vi ik, vi il, vf dh, vf dk, vf dl, vi keep, int *trip)
{
    const nb_fgrid *g = &fs->kp.F;
    const float *Fg = fs->Fgrid;
    vi inside = (ih >= g->h_min) & (ih <= g->h_max) & (ik >= g->k_min) & (ik <= g->k_max) & (il >= g->l_min) &
                (il <= g->l_max);
    vi idx = ((ih - g->h_min) * g->k_range + (ik - g->k_min)) * g->l_range + (il - g->l_min);
    vf F = self(inside, gather(Fg, idx & inside), splat((float)g->default_F));
    if (fs->fmode != NB_FMODE_TRICUBIC) return F;
    vi base;
    vf x[3], wh[4], wk[4], wl[4];
    const vi safe = tricubic_site(g, ih, ik, il, dh, dk, dl, &base, x);
    if (any_lane(~safe & keep)) *trip = 1;
    if (!any_lane(safe)) return F;
    vx_cubic_weights(x[0], wh);
    vx_cubic_weights(x[1], wk);
    vx_cubic_weights(x[2], wl);
    vf sum = splat(0.0f);
    /* Neighbouring pixels usually share their 4x4x4 neighbourhood: the lanes
     * are taken a neighbourhood at a time (up to NB_TRICUBIC_SETS of them),
     * its 64 values broadcast - far cheaper than 64 gathers; lanes left over
     * are gathered.  Every lane gets the same sums either way. */
    vi unread = safe; /* lanes whose neighbourhood is not read yet */
    for (int sets = 0; sets < NB_TRICUBIC_SETS && any_lane(unread); sets++) {
        int first = 0;
        while (!unread[first]) first++;
        const int b0 = base[first];
        const vi mine = unread & (base == b0);
        sum = self(mine, vx_tricubic_block(Fg + b0, g->k_range, g->l_range, wh, wk, wl), sum);
        unread &= ~mine;
    }
    if (any_lane(unread)) {
        vf part = splat(0.0f);
        for (int a = 0; a < 4; a++)
            for (int b = 0; b < 4; b++) {
                vi row = base + (a * g->k_range + b) * g->l_range;
                vf sl = wl[0] * gather(Fg, row) + wl[1] * gather(Fg, row + 1) + wl[2] * gather(Fg, row + 2) +
                        wl[3] * gather(Fg, row + 3);
                part += wh[a] * wk[b] * sl;
            }
        sum = self(unread, part, sum);
    }
    return self(safe, sum, F);
}

/* round to nearest in single precision (ties to even; |x| < 2^22) */
#define RINT512(v) _mm512_roundscale_ps((v), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define RINT256(v) _mm256_round_ps((v), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
INL vf rintf_v(vf x)
{
#if NW == 16
    return PER_REG(vf, x, RINT512);
#elif NW == 8
    return PER_REG(vf, x, RINT256);
#else
    return vx_rintf(x);
#endif
}

/* 1/x to about 1e-7 (estimate, one Newton step) */
INL vf rcp_est(vf x)
{
#if NW == 16
    vf y = PER_REG(vf, x, _mm512_rcp14_ps);
#elif NW == 8
    vf y = PER_REG(vf, x, _mm256_rcp_ps);
    y = y * (2.0f - x * y);
#else
    vf y = 1.0f / x;
    return y;
#endif
    return y * (2.0f - x * y);
}

/* The lattice factor; for the usual cube of N <= NB_CHEB_MAX_N cells a side
 * (cube_n = N, else 0) with N a constant, so that the Chebyshev recurrence
 * is unrolled (one well-predicted branch per group). */
INL vf lattice_here(const nb_fparams *fs, int cube_n, vf dh, vf dk, vf dl, float Na, float Nb, float Nc, float fudge)
{
#define NB_CUBE(n)                                                                                                    \
    case n:                                                                                                           \
        return vx_lattice(NB_SHAPE_SQUARE, 1, dh, dk, dl, n, n, n, fudge, fs->a_star, fs->b_star, fs->c_star);
    switch (cube_n) {
        NB_CUBE(1) NB_CUBE(2) NB_CUBE(3) NB_CUBE(4) NB_CUBE(5) NB_CUBE(6) NB_CUBE(7) NB_CUBE(8)
        NB_CUBE(9) NB_CUBE(10) NB_CUBE(11) NB_CUBE(12) NB_CUBE(13) NB_CUBE(14) NB_CUBE(15) NB_CUBE(16)
    default:
        return vx_lattice(fs->kp.shape, fs->cheb, dh, dk, dl, Na, Nb, Nc, fudge, fs->a_star, fs->b_star, fs->c_star);
    }
#undef NB_CUBE
}

/* The diffracted direction's component along v on a flat detector: with the
 * position C + Fdet f (C the row's part), (Ff (f.v) + C.v) / r - two
 * operations per lane instead of the direction's three components. */
INL vf flat_dot(vf Ff, vf invf, const double fdet[3], double Cx, double Cy, double Cz, double v0, double v1, double v2)
{
    return (Ff * (float)(fdet[0] * v0 + fdet[1] * v1 + fdet[2] * v2) + (float)(Cx * v0 + Cy * v1 + Cz * v2)) * invf;
}

/* The part of a sub-pixel's position common to a row (one slow sub-step
 * and layer): Sdet, the position without its fast component, and the two
 * coefficients of |pos|^2 as a polynomial in Fdet. */
typedef struct row_part {
    double Sdet, Cx, Cy, Cz, cc, fc;
} row_part;

INL row_part row_part_at(const nb_kparams *kp, int s_row, double Odet, int subS)
{
    row_part r;
    const double sub = kp->subpixel_size;
    r.Sdet = sub * ((double)s_row * kp->oversample + subS) + sub / 2.0;
    r.Cx = r.Sdet * kp->sdet[0] + Odet * kp->odet[0] + kp->pix0[0];
    r.Cy = r.Sdet * kp->sdet[1] + Odet * kp->odet[1] + kp->pix0[1];
    r.Cz = r.Sdet * kp->sdet[2] + Odet * kp->odet[2] + kp->pix0[2];
    r.cc = r.Cx * r.Cx + r.Cy * r.Cy + r.Cz * r.Cz;
    r.fc = 2.0 * (kp->fdet[0] * r.Cx + kp->fdet[1] * r.Cy + kp->fdet[2] * r.Cz);
    return r;
}

/* The groups' centres for a chunk of a row: what vx_flat_subpixel would
 * compute per group and sub-pixel step in scalar double, done here for
 * TABLE_GROUPS groups at a time in double vectors - a table per step (layer,
 * slow and fast sub-pixel), up to TABLE_STEPS of them.  With one (source,
 * cell) pair, a table of the centre's Miller indices per step too. */
#define TABLE_GROUPS 32
#define TABLE_STEPS 64
typedef struct pos_table {
    float r2c[TABLE_GROUPS], rc[TABLE_GROUPS], invc[TABLE_GROUPS], invc2[TABLE_GROUPS], slope[TABLE_GROUPS];
    float Fc[TABLE_GROUPS];
    double invc_d[TABLE_GROUPS], Fc_d[TABLE_GROUPS];
} pos_table;
typedef struct pair_table {
    float frac[3][TABLE_GROUPS], P[3][TABLE_GROUPS];
    int whole[3][TABLE_GROUPS];
} pair_table;

INL void fill_pos_table(pos_table *tab, const nb_kparams *kp, int c0, double centre, double ff, const row_part *rp,
                        int os, int subF)
{
    const double sub = kp->subpixel_size, fc = rp->fc, cc = rp->cc;
#pragma omp simd
    for (int g = 0; g < TABLE_GROUPS; g++) {
        const double Fc = sub * ((c0 + g * W + centre) * os + subF) + sub / 2.0;
        const double r2c = (Fc * ff + fc) * Fc + cc, rc = sqrt(r2c), invc = 1.0 / rc;
        tab->r2c[g] = (float)r2c, tab->rc[g] = (float)rc, tab->invc[g] = (float)invc;
        tab->invc2[g] = (float)(invc * invc);
        tab->slope[g] = (float)(2.0 * ff * Fc + fc), tab->Fc[g] = (float)Fc;
        tab->invc_d[g] = invc, tab->Fc_d[g] = Fc;
    }
}

INL void fill_pair_table(pair_table *tab, const pos_table *pos, const nb_pair *pc, const row_part *rp, double Odet,
                         int need_whole)
{
    for (int i = 0; i < 3; i++) {
        const double Af = pc->Af[i], base = rp->Sdet * pc->As[i] + Odet * pc->Ao[i] + pc->Ap[i], hi = pc->hi[i];
#pragma omp simd
        for (int g = 0; g < TABLE_GROUPS; g++) {
            const double P = pos->Fc_d[g] * Af + base;
            const double c = P * pos->invc_d[g] - hi, r = rint(c);
            tab->frac[i][g] = (float)(c - r), tab->P[i][g] = (float)P;
            /* the whole index only for an F table (it is in range there: the lane is
             * inside the grid or falls back) */
            tab->whole[i][g] = need_whole ? (int)r : 0;
        }
    }
}

/* ---- the pixel model's terms for W lanes (nb_pixel.inc) ----------------- *
 *
 * The Miller index of a flat detector's pixel is h = (A.pos)/|pos| - A.i,
 * with A.pos linear along the row.  It is split at the group's centre c:
 * h(c) is computed in double (one scalar per index and (source, cell)), its
 * whole part taken off, and the offset h(f) - h(c) of each lane in single
 * precision from exact differences,
 *     h(f) - h(c) = A_f df / r_f + (A.pos_c) (1/r_f - 1/r_c),
 *     1/r_f - 1/r_c = -(r_f^2 - r_c^2) / (r_f r_c (r_f + r_c)),
 * where df, the lane's distance from the centre, and r_f^2 - r_c^2 (a
 * polynomial in df) are small numbers known to single precision.  The
 * fractional index so found is good to a few 1e-8 whatever the size of h,
 * at a fraction of the cost of double lanes.  A curved detector's positions
 * are not linear along the row: there every lane's index is computed in
 * double. */

/* What a row's groups share, and where the group now rendered is. */
typedef struct vx_px_ctx {
    const nb_fparams *fs;
    const nb_kparams *kp;
    int curved, tabled, parts_tabled, pair_tabled, series, with_dmin, fmode, cube_n;
    int s_row, os, nthick;
    float Na, Nb, Nc, fudge, kahn, pix2_close, scale;
    double sub, ff, centre;
    vf df;                     /* the lanes' distances from the group's centre, along the fast axis */
    const row_part *parts;     /* per layer and slow sub-step, when parts_tabled */
    const pos_table *pos;      /* per step, for the chunk, when tabled */
    const pair_table *pair;    /* per step, for the chunk, when pair_tabled */
    row_part rp;               /* the current layer and slow sub-step */
    double Odet;
    int step0;                 /* (t os + subS) os: the tables' index of subF = 0 */
    int g, f0;                 /* the group: its place in the chunk, its first pixel */
    vd omega_sum;              /* the solid angles: summed in float over a block of */
    vf omega_block;            /* 16 evaluations, the blocks in double */
    int in_block;
    int *tripped;
} vx_px_ctx;

typedef struct vx_px_geo {
    vd px, py, pz, inv;        /* curved: the lanes' positions and 1/r in double */
    vf invf, dxf, dyf, dzf;    /* 1/r; curved: the direction */
    vf dfi, dinv, Ff;          /* flat: df / r, 1/r_f - 1/r_c, the lanes' Fdet */
    double Fc, invc;           /* flat: the group's centre */
    int step;
} vx_px_geo;
typedef struct vx_px_src {
    vf c2t;
} vx_px_src;
typedef struct vx_px_idx {
    vf dh, dk, dl; /* fractional parts */
    vi ih, ik, il; /* nearest whole indices (with an F table) */
    vf H[3];       /* flat: the indices plus A.i, (A.pos)/|pos| (for the derivatives; unused by the image) */
} vx_px_idx;

/* the component along v of the sub-pixel's direction */
INL vf vx_along(const vx_px_ctx *c, const vx_px_geo *g, double v0, double v1, double v2)
{
    if (c->curved) return g->dxf * (float)v0 + g->dyf * (float)v1 + g->dzf * (float)v2;
    return flat_dot(g->Ff, g->invf, c->kp->fdet, c->rp.Cx, c->rp.Cy, c->rp.Cz, v0, v1, v2);
}

INL void vx_px_slow_step(vx_px_ctx *c, int t, int subS)
{
    c->Odet = t * c->kp->thickstep;
    c->rp = c->parts_tabled ? c->parts[t * c->os + subS] : row_part_at(c->kp, c->s_row, c->Odet, subS);
    c->step0 = (t * c->os + subS) * c->os;
}

/* a curved detector: every lane's position rotated onto the sphere, in double */
INL void vx_curved_subpixel(const vx_px_ctx *c, int subF, vx_px_geo *g)
{
    const nb_kparams *kp = c->kp;
    vd Fdet = c->sub * ((tod(lane_index) + c->f0) * c->os + subF) + c->sub / 2.0;
    g->px = Fdet * kp->fdet[0] + c->rp.Cx, g->py = Fdet * kp->fdet[1] + c->rp.Cy;
    g->pz = Fdet * kp->fdet[2] + c->rp.Cz;
    for (int j = 0; j < W; j++) {
        double v[3], nv[3], q[3] = {g->px[j], g->py[j], g->pz[j]};
        for (int i = 0; i < 3; i++) v[i] = kp->distance * kp->beam[i];
        nb_rotate_axis(v, nv, kp->sdet, q[1] / kp->distance);
        nb_rotate_axis(nv, q, kp->fdet, q[2] / kp->distance);
        g->px[j] = q[0], g->py[j] = q[1], g->pz[j] = q[2];
    }
    vd r2 = g->px * g->px + g->py * g->py + g->pz * g->pz;
    /* 1/r: single-precision estimate, one Newton step in double (1e-10) */
    vd inv = tod(rsqrt_est(tof(r2)));
    g->inv = inv * (1.5 - 0.5 * r2 * inv * inv);
    g->invf = tof(g->inv);
    g->dxf = tof(g->px * g->inv), g->dyf = tof(g->py * g->inv), g->dzf = tof(g->pz * g->inv);
}

/* a flat detector: the group's centre in double, the lanes as small offsets from it */
INL void vx_flat_subpixel(const vx_px_ctx *c, int subF, vx_px_geo *g)
{
    float r2c_f, rc_f, invc_f, invc2_f, slope_f, Fc_f;
    g->Fc = c->sub * ((c->f0 + c->centre) * c->os + subF) + c->sub / 2.0;
    if (c->tabled) {
        const pos_table *pt = &c->pos[g->step];
        r2c_f = pt->r2c[c->g], rc_f = pt->rc[c->g], invc_f = pt->invc[c->g], invc2_f = pt->invc2[c->g];
        slope_f = pt->slope[c->g], Fc_f = pt->Fc[c->g];
        g->invc = pt->invc_d[c->g];
    } else {
        const double Fc = g->Fc, r2c = (Fc * c->ff + c->rp.fc) * Fc + c->rp.cc, rc = sqrt(r2c);
        g->invc = 1.0 / rc;
        r2c_f = (float)r2c, rc_f = (float)rc, invc_f = (float)g->invc, invc2_f = (float)(g->invc * g->invc);
        slope_f = (float)(2.0 * c->ff * Fc + c->rp.fc), Fc_f = (float)Fc;
    }
    const vf df = c->df;
    const vf dr2 = df * (slope_f + (float)c->ff * df); /* r_f^2 - r_c^2 */
    if (c->series) {
        /* 1/r_f - 1/r_c = (1/r_c) ((1 + e)^(-1/2) - 1), e = dr2 / r_c^2 small */
        const vf e = dr2 * invc2_f;
        g->dinv = (e * invc_f) *
                  (-0.5f + e * (0.375f + e * (-0.3125f + e * (0.2734375f + e * (-0.24609375f + e * 0.2255859375f)))));
    } else {
        /* 1/r_f - 1/r_c = -dr2 / (r_f r_c (r_f + r_c)) */
        const vf r2f = r2c_f + dr2;
        const vf invf = rsqrt_est(r2f);
        g->dinv = -dr2 * invf * invc_f * rcp_est(r2f * invf + rc_f);
    }
    g->invf = invc_f + g->dinv; /* 1/r_f, from the exact difference */
    g->dfi = df * g->invf;
    g->Ff = Fc_f + df; /* the direction's components by flat_dot */
}

INL void vx_px_subpixel(vx_px_ctx *c, int t, int subS, int subF, vx_px_geo *g)
{
    (void)t, (void)subS;
    g->step = c->step0 + subF;
    if (c->curved) vx_curved_subpixel(c, subF, g);
    else vx_flat_subpixel(c, subF, g);
}

INL vf vx_px_omega(vx_px_ctx *c, const vx_px_geo *g)
{
    return c->kp->point_pixel ? g->invf * g->invf : c->pix2_close * g->invf * g->invf * g->invf;
}

INL void vx_px_add_omega(vx_px_ctx *c, vf omega, vi live)
{
    c->omega_block += self(live, omega, splat(0.0f));
    if (++c->in_block == 16) {
        c->omega_sum += tod(c->omega_block);
        c->omega_block = splat(0.0f);
        c->in_block = 0;
    }
}

INL vf vx_px_capture(vx_px_ctx *c, const vx_px_geo *g, int t)
{
    const nb_kparams *kp = c->kp;
    const vf rho = vx_along(c, g, kp->odet[0], kp->odet[1], kp->odet[2]);
    return vx_capture(rho, (float)(kp->thickstep * kp->mu), t);
}

INL vi vx_px_source(vx_px_ctx *c, const vx_px_geo *g, int src, vx_px_src *sv)
{
    const float *si = c->fs->src_i + 3 * src;
    sv->c2t = vx_along(c, g, si[0], si[1], si[2]);
    if (!c->with_dmin) return maskall(1);
    return vx_within_dmin(sv->c2t, c->fs->src_inv2lambda[src], c->fs->dmin);
}

INL vf vx_px_polarization(vx_px_ctx *c, vx_px_geo *g, vx_px_src *sv, int src)
{
    vf dE = splat(0.0f), dB = splat(0.0f);
    if (c->kahn != 0.0f) {
        const float *sE = c->fs->src_E + 3 * src, *sB = c->fs->src_B + 3 * src;
        dE = vx_along(c, g, sE[0], sE[1], sE[2]);
        dB = vx_along(c, g, sB[0], sB[1], sB[2]);
    }
    return vx_polar(c->kahn, sv->c2t, dE, dB);
}

INL void vx_px_index(vx_px_ctx *c, const vx_px_geo *g, const vx_px_src *sv, int src, int cell, vx_px_idx *x)
{
    (void)sv;
    const nb_pair *pc = c->fs->pairs + (size_t)src * c->kp->ncells + cell;
    if (c->curved) {
        /* Miller indices in double: (A.pos)/|pos| - A.i; fractional parts in single */
        vd h = (pc->A[0] * g->px + pc->A[1] * g->py + pc->A[2] * g->pz) * g->inv - pc->hi[0];
        vd k = (pc->A[3] * g->px + pc->A[4] * g->py + pc->A[5] * g->pz) * g->inv - pc->hi[1];
        vd l = (pc->A[6] * g->px + pc->A[7] * g->py + pc->A[8] * g->pz) * g->inv - pc->hi[2];
        vd h0 = rintd(h), k0 = rintd(k), l0 = rintd(l);
        x->dh = tof(h - h0), x->dk = tof(k - k0), x->dl = tof(l - l0);
        x->ih = __builtin_convertvector(h0, vi), x->ik = __builtin_convertvector(k0, vi);
        x->il = __builtin_convertvector(l0, vi);
        return;
    }
    /* the centre's indices in double, whole parts off; the lanes' offsets in single */
    float frac[3], P_f[3];
    int whole[3];
    if (c->pair_tabled) {
        const pair_table *pr = &c->pair[g->step];
        for (int i = 0; i < 3; i++) frac[i] = pr->frac[i][c->g], P_f[i] = pr->P[i][c->g], whole[i] = pr->whole[i][c->g];
    } else {
        for (int i = 0; i < 3; i++) {
            /* associated as fill_pair_table does: the same bits */
            const double P = g->Fc * pc->Af[i] + (c->rp.Sdet * pc->As[i] + c->Odet * pc->Ao[i] + pc->Ap[i]);
            const double cen = P * g->invc - pc->hi[i], r = rint(cen);
            frac[i] = (float)(cen - r), P_f[i] = (float)P;
            whole[i] = c->fmode != NB_FMODE_DEFAULT ? (int)r : 0;
        }
    }
    vf dh = frac[0] + (float)pc->Af[0] * g->dfi + P_f[0] * g->dinv;
    vf dk = frac[1] + (float)pc->Af[1] * g->dfi + P_f[1] * g->dinv;
    vf dl = frac[2] + (float)pc->Af[2] * g->dfi + P_f[2] * g->dinv;
    /* (A.pos)/|pos| = P_c / r_c + the lanes' offsets: dead code for the image */
    const float invc_f = (float)g->invc;
    x->H[0] = dh + (P_f[0] * invc_f - frac[0]);
    x->H[1] = dk + (P_f[1] * invc_f - frac[1]);
    x->H[2] = dl + (P_f[2] * invc_f - frac[2]);
    const vf rh = rintf_v(dh), rk = rintf_v(dk), rl = rintf_v(dl);
    x->dh = dh - rh, x->dk = dk - rk, x->dl = dl - rl;
    if (c->fmode != NB_FMODE_DEFAULT) {
        x->ih = whole[0] + __builtin_convertvector(rh, vi);
        x->ik = whole[1] + __builtin_convertvector(rk, vi);
        x->il = whole[2] + __builtin_convertvector(rl, vi);
    } else {
        x->ih = x->ik = x->il = (vi){0};
    }
}

INL vf vx_px_lattice(vx_px_ctx *c, const vx_px_idx *x)
{
    return lattice_here(c->fs, c->cube_n, x->dh, x->dk, x->dl, c->Na, c->Nb, c->Nc, c->fudge);
}

INL vf vx_px_structure(vx_px_ctx *c, const vx_px_idx *x, vi accept)
{
    if (c->fmode == NB_FMODE_DEFAULT) return splat((float)c->kp->F.default_F);
    return structure_factor(c->fs, x->ih, x->ik, x->il, x->dh, x->dk, x->dl, accept, c->tripped);
}

INL vf vx_px_term(vx_px_ctx *c, vf F_cell, vf F_latt)
{
    (void)c;
    vf term = F_cell * F_cell * F_latt * F_latt;
    /* rounded before it is added, in every instantiation: a plan renders
     * to the same bits whichever runs it (a fused multiply-add here in
     * one and not in another would differ in the last place - and
     * -dmin must leave the pixels it does not cut unchanged) */
    no_contract(&term);
    return term;
}

INL vf vx_px_scale(vx_px_ctx *c, vf I) { return c->scale * I; }

#define PX_FN(name) vx_px_##name
#define PX_INLINE INL
#define PX_REAL vf
#define PX_LANES W
#define PX_MASK vi
#define PX_IS(cond) (cond)
#define PX_ALL(on) maskall(on)
#define PX_SEL(m, a, b) self((m), (a), (b))
#define PX_ANY(m) any_lane(m)
#define PX_SPLAT(x) splat((float)(x))
#include "nb_pixel.inc"

/* ---- rows ---------------------------------------------------------------- */

/* What the compiler may assume of a row's pixels (see render_row). */
typedef struct row_kind {
    int curved;        /* a curved detector (else flat: the centre-offset index) */
    nb_pixel_opts px;  /* one step, one pair, simple */
    int full;          /* every pixel of the row rendered, in whole groups */
} row_kind;

/* The row's constants, in the context its groups share. */
INL void row_context(vx_px_ctx *c, const nb_fparams *fs, int s_row, const row_kind k, int *tripped)
{
    const nb_kparams *kp = &fs->kp;
    /* every field set (no memset: the compiler keeps the fields in registers) */
    c->fs = fs, c->kp = kp, c->s_row = s_row, c->tripped = tripped;
    c->parts = NULL, c->pos = NULL, c->pair = NULL;
    c->Odet = 0.0, c->step0 = 0, c->g = 0, c->f0 = 0, c->in_block = 0;
    c->curved = k.curved;
    /* one_step: one sub-pixel and one layer, known to the compiler */
    c->os = k.px.one_step ? 1 : kp->oversample;
    c->nthick = k.px.one_step ? 1 : kp->thicksteps;
    const int nthick = c->nthick;
    c->with_dmin = k.px.simple ? 0 : fs->dmin > 0.0f;
    c->fmode = k.px.simple ? NB_FMODE_DEFAULT : fs->fmode;
    c->Na = (float)kp->Na, c->Nb = (float)kp->Nb, c->Nc = (float)kp->Nc, c->fudge = (float)kp->fudge;
    c->kahn = (float)kp->kahn_factor;
    c->cube_n = kp->shape == NB_SHAPE_SQUARE && fs->cheb && c->Na == c->Nb && c->Nb == c->Nc ? (int)c->Na : 0;
    c->pix2_close = (float)(kp->pixel_size * kp->pixel_size * kp->close_distance);
    c->scale = (float)(kp->r_e_sqr * kp->fluence / kp->steps);
    c->sub = kp->subpixel_size;
    c->ff = kp->fdet[0] * kp->fdet[0] + kp->fdet[1] * kp->fdet[1] + kp->fdet[2] * kp->fdet[2];
    c->centre = (W - 1) / 2.0;
    c->df = tof((tod(lane_index) - c->centre) * (c->sub * c->os));
    /* series: the lanes' 1/r from a series in e = (r_f^2 - r_c^2) / r_c^2
     * (cheaper than square root and reciprocal estimates) where |e| <= 0.03
     * on the whole detector, so that six terms leave an error below 5e-12 of
     * 1/r_c.  r >= the distance to the detector plane, less its thickness;
     * |r_f^2 - r_c^2| <= 2 r_c |df| + df^2. */
    const double r_min = fabs(kp->close_distance) - fabs(kp->thick);
    const double q = r_min > 0.0 ? (W - 1) / 2.0 * kp->pixel_size / r_min : 1.0;
    c->series = !k.curved && 2.0 * q + q * q <= 0.03;
    c->parts_tabled = !k.curved && nthick * c->os <= TABLE_STEPS;
    c->tabled = !k.curved && nthick * c->os * c->os <= TABLE_STEPS;
    c->pair_tabled = c->tabled && k.px.one_pair;
    c->omega_sum = tod(splat(0.0f));
    c->omega_block = splat(0.0f);
}

/* The tables of a chunk of TABLE_GROUPS groups starting at pixel c0. */
INL void fill_tables(const vx_px_ctx *c, pos_table *pos, pair_table *pair, int c0)
{
    for (int t = 0, k = 0; t < c->nthick; t++)
        for (int subS = 0; subS < c->os; subS++) {
            const row_part rp = c->parts[t * c->os + subS];
            for (int subF = 0; subF < c->os; subF++, k++) {
                fill_pos_table(&pos[k], c->kp, c0, c->centre, c->ff, &rp, c->os, subF);
                if (c->pair_tabled)
                    fill_pair_table(&pair[k], &pos[k], c->fs->pairs, &rp, t * c->kp->thickstep,
                                    c->fmode != NB_FMODE_DEFAULT);
            }
        }
}

/* Which lanes of the group of n pixels at f0 are rendered; 0 when none is. */
INL int group_live(const nb_kparams *kp, int s_row, int f0, int n, int full, vi *live)
{
    if (full) {
        *live = maskall(1);
        return 1;
    }
    if (!kp->mask && f0 >= kp->roi_xmin && f0 + n - 1 <= kp->roi_xmax) {
        *live = lane_index < (float)n; /* the usual case: all inside the ROI */
        return 1;
    }
    int livei[W];
    for (int j = 0; j < W; j++) {
        int f = f0 + j;
        int on = j < n && f >= kp->roi_xmin && f <= kp->roi_xmax && (!kp->mask || kp->mask[(size_t)s_row * kp->fpixels + f]);
        livei[j] = on ? -1 : 0;
    }
    memcpy(live, livei, sizeof *live);
    return any_lane(*live);
}

/* Row s_row, a group of W pixels at a time, a chunk of groups' tables at a time. */
INL void render_row_impl(const nb_fparams *fs_shared, int s_row, float *restrict row, vd *omega_acc, int *tripped,
                         const row_kind k)
{
    /* a private copy: the image's float stores cannot alias it, so what the
     * compiler loads once stays loaded across the row */
    const nb_fparams fs_copy = *fs_shared, *fs = &fs_copy;
    const nb_kparams *kp = &fs->kp;
    vx_px_ctx c;
    row_context(&c, fs, s_row, k, tripped);
    c.omega_sum = *omega_acc;
    /* the row's parts, per layer and slow sub-step (t os + subS): computed
     * once per row, used by the tables and by every group */
    row_part parts[k.px.one_step ? 1 : TABLE_STEPS];
    if (c.parts_tabled)
        for (int t = 0; t < c.nthick; t++)
            for (int subS = 0; subS < c.os; subS++)
                parts[t * c.os + subS] = row_part_at(kp, s_row, t * kp->thickstep, subS);
    /* tabled (flat): the groups' centres are done ahead, a chunk of the row
     * at a time, in vectors of doubles - no scalar square root and division
     * at the head of each group's chain */
    pos_table pos[k.px.one_step ? 1 : TABLE_STEPS];
    pair_table pair[k.px.one_pair && !k.px.one_step ? TABLE_STEPS : 1];
    c.parts = parts, c.pos = pos, c.pair = pair;
    const vx_px_rules rules = vx_px_rules_of(kp, k.px);
    for (int c0 = 0; c0 < kp->fpixels; c0 += TABLE_GROUPS * W) {
        const int left = (kp->fpixels - c0 + W - 1) / W, groups = left < TABLE_GROUPS ? left : TABLE_GROUPS;
        if (c.tabled) fill_tables(&c, pos, pair, c0);
        for (int g = 0; g < groups; g++) {
            const int f0 = c0 + g * W;
            const int n = k.full ? W : kp->fpixels - f0 < W ? kp->fpixels - f0 : W;
            float *out = row + f0;
            vi live;
            if (!group_live(kp, s_row, f0, n, k.full, &live)) {
                memset(out, 0, (size_t)n * sizeof(float));
                continue;
            }
            c.g = g, c.f0 = f0;
            vf val = vx_px_collect(&c, k.px, &rules, live).value;
            if (!k.full) val = self(live, val, splat(0.0f));
            if (n >= W) memcpy(out, &val, sizeof val);
            else memcpy(out, &val, (size_t)n * sizeof(float));
        }
    }
    *omega_acc = c.omega_sum + tod(c.omega_block);
}

/* The instantiations: curved detectors; flat ones in general; flat ones
 * without the oversampling flags, absorption, dmin or an F table ("simple",
 * where the compiler drops those branches and keeps more in registers); and,
 * of those, one sub-pixel and layer, one source and cell, and rows rendered
 * whole - constants the compiler folds.  All give the same bits (the lattice
 * term is rounded before it is added). */
static void render_row(const nb_fparams *fs, int s_row, float *row, vd *omega_acc, int *tripped)
{
    const nb_kparams *kp = &fs->kp;
    const nb_pixel_opts o = nb_fast_opts_of(fs);
    const int simple = o.simple, one_step = o.one_step, one_pair = o.one_pair;
    /* full: every pixel of the row is rendered, in whole groups */
    const int full = !kp->mask && kp->roi_xmin <= 0 && kp->roi_xmax >= kp->fpixels - 1 && kp->fpixels % W == 0;
#define RENDER(...) render_row_impl(fs, s_row, row, omega_acc, tripped, (row_kind){__VA_ARGS__})
    if (kp->curved_detector) RENDER(.curved = 1);
    else if (simple && one_step && one_pair && full) RENDER(.px = {.simple = 1, .one_step = 1, .one_pair = 1}, .full = 1);
    else if (simple && one_step && one_pair) RENDER(.px = {.simple = 1, .one_step = 1, .one_pair = 1});
    else if (simple && one_step && full) RENDER(.px = {.simple = 1, .one_step = 1}, .full = 1);
    else if (simple && one_step) RENDER(.px = {.simple = 1, .one_step = 1});
    else if (simple && one_pair) RENDER(.px = {.simple = 1, .one_pair = 1});
    else if (simple) RENDER(.px = {.simple = 1});
    else if (one_pair) RENDER(.px = {.one_pair = 1});
    else RENDER(.curved = 0);
#undef RENDER
}

void NB_FAST_NAME(const nb_fparams *fs, float *image, double *row_omega, nb_row_stats *row_stats,
                  nb_payload_crc *row_crc, int *tripped_out,
                  nb_progress *prog)
{
    const nb_kparams *kp = &fs->kp;
    const nb_roi roi = {kp->roi_xmin, kp->roi_xmax, kp->roi_ymin, kp->roi_ymax};
    int tripped = 0;
    /* a small render (a few milliseconds of work: pixel-steps) stays on one
     * thread, as every pass does (nb_tuning.h) */
    const double work = (double)kp->fpixels * kp->spixels * (kp->steps > 0 ? kp->steps : 1);
#pragma omp parallel for schedule(dynamic, 1) reduction(| : tripped) if (work >= (double)NB_PARALLEL_MIN)
    for (int s = 0; s < kp->spixels; s++) {
        vd omega = tod(splat(0.0f));
        float *row = image + (size_t)s * kp->fpixels;
        nb_fault_rows_ahead(image, (size_t)kp->fpixels * sizeof(float), kp->spixels, s);
        if (s < kp->roi_ymin || s > kp->roi_ymax) {
            memset(row, 0, (size_t)kp->fpixels * sizeof(float));
        } else {
            render_row(fs, s, row, &omega, &tripped);
        }
        double osum = 0.0;
        for (int j = 0; j < W; j++) osum += omega[j];
        row_omega[s] = osum;
        /* the row's statistics while it is still in cache */
        if (row_stats)
            row_stats_here(row, kp->fpixels, s, roi, kp->mask ? kp->mask + (size_t)s * kp->fpixels : NULL,
                           &row_stats[s]);
        if (row_crc) nb_payload_crc_take(row_crc, (size_t)s, row);
        if (prog) nb_progress_add(prog, 1);
    }
    *tripped_out = tripped;
}

/* ---- the derivatives of this kernel (nb-sim --grad on the fast path) ------ */

#ifdef NB_FAST_GRAD_NAME
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
#endif
