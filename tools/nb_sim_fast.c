/* nb-sim's fast CPU kernel: one fused pass per pixel, SIMD lanes across
 * pixels, OpenMP over rows.
 *
 * A group of W neighbouring pixels of a row is one set of vectors (GCC
 * vector extensions): W = 16 floats, one register, with AVX-512; 8 with
 * AVX2; 4 with the generic SSE2 build.  This file is compiled once per
 * instruction set with NB_FAST_NAME naming the entry point; nb_sim_cpu.c picks one at run time.  The physics
 * after the Miller index is nb_fastmath.inc, the same source the scalar
 * (host test and CUDA) instantiation in nb_physics.h is built from.
 *
 * Precision: on a flat detector the Miller indices at the centre of each
 * group are double, and the lanes' offsets from them single precision from
 * exact differences (render_row_impl); on a curved one every lane's index is
 * double.  From the fractional index on (lattice factor, structure factor,
 * polarization, solid angle, absorption, accumulation) single precision.
 * The order of the loops and the "first value" rules of the reference (solid
 * angle and polarization from the first sub-pixel, capture fraction of the
 * last layer) are kept, as are the -oversample_* multiplications.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
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
    /* the reference's test: h_min + 2 <= h <= h_max - 2 on the fractional h */
    vf hh = __builtin_convertvector(ih, vf) + dh, kk = __builtin_convertvector(ik, vf) + dk,
       ll = __builtin_convertvector(il, vf) + dl;
    vi safe = (hh >= (float)(g->h_min + 2)) & (hh <= (float)(g->h_max - 2)) & (kk >= (float)(g->k_min + 2)) &
              (kk <= (float)(g->k_max - 2)) & (ll >= (float)(g->l_min + 2)) & (ll <= (float)(g->l_max - 2));
    if (any_lane(~safe & keep)) *trip = 1;
    if (!any_lane(safe)) return F;
    /* floor and the position within the cell, from the nearest index */
    vi neg_h = dh < 0.0f, neg_k = dk < 0.0f, neg_l = dl < 0.0f; /* -1 where the floor is one below */
    vf wh[4], wk[4], wl[4];
    vx_cubic_weights(dh + self(neg_h, splat(1.0f), splat(0.0f)), wh);
    vx_cubic_weights(dk + self(neg_k, splat(1.0f), splat(0.0f)), wk);
    vx_cubic_weights(dl + self(neg_l, splat(1.0f), splat(0.0f)), wl);
    vi base = ((ih + neg_h - 1 - g->h_min) * g->k_range + (ik + neg_k - 1 - g->k_min)) * g->l_range +
              (il + neg_l - 1 - g->l_min);
    base &= safe; /* lanes outside the grid read the (padded) start */
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
        const float *F0 = Fg + b0;
        vf part = splat(0.0f);
        for (int a = 0; a < 4; a++)
            for (int b = 0; b < 4; b++) {
                const float *r = F0 + (a * g->k_range + b) * g->l_range;
                vf sl = wl[0] * r[0] + wl[1] * r[1] + wl[2] * r[2] + wl[3] * r[3];
                part += wh[a] * wk[b] * sl;
            }
        sum = self(mine, part, sum);
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

/* The groups' centres for a chunk of a row: what render_row_impl would
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

/* One group of up to W pixels of row s_row, starting at fast index f0.
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
INL void render_row_impl(const nb_fparams *fs_shared, int s_row, float *restrict row, vd *omega_acc, int *tripped,
                         const int curved, const int simple, const int one_step, const int one_pair, const int full)
{
    /* a private copy: the image's float stores cannot alias it, so what the
     * compiler loads once stays loaded across the row */
    const nb_fparams fs_copy = *fs_shared, *fs = &fs_copy;
    const nb_kparams *kp = &fs->kp;
    /* one_step: one sub-pixel and one layer, known to the compiler */
    const int os = one_step ? 1 : kp->oversample, nthick = one_step ? 1 : kp->thicksteps;
    /* one_pair: one source and one cell */
    const int nsources = one_pair ? 1 : kp->nsources, ncells = one_pair ? 1 : kp->ncells;
    const double sub = kp->subpixel_size;
    const vi os_thick = maskall(kp->oversample_thick), os_polar = maskall(kp->oversample_polar);
    const vi os_omega = maskall(kp->oversample_omega);
    const int any_os = simple ? 0 : kp->oversample_thick || kp->oversample_polar || kp->oversample_omega;
    const float kahn = (float)kp->kahn_factor;
    const int with_thickness = simple ? 0 : kp->thick != 0.0, with_dmin = simple ? 0 : fs->dmin > 0.0f;
    const int fmode = simple ? NB_FMODE_DEFAULT : fs->fmode;
    const float Na = (float)kp->Na, Nb = (float)kp->Nb, Nc = (float)kp->Nc, fudge = (float)kp->fudge;
    /* whether the first sub-pixel evaluates the polarization: not with
     * -nopolar, unless -oversample_polar (the reference's rule) */
    const int first_polar = !kp->nopolar || kp->oversample_polar;
    const int cube_n = kp->shape == NB_SHAPE_SQUARE && fs->cheb && Na == Nb && Nb == Nc ? (int)Na : 0;
    const vi water_zero = maskall(kp->water_size == 0.0);
    const float pix2_close = (float)(kp->pixel_size * kp->pixel_size * kp->close_distance);
    const double ff = kp->fdet[0] * kp->fdet[0] + kp->fdet[1] * kp->fdet[1] + kp->fdet[2] * kp->fdet[2];
    /* the lanes' distances from the group's centre, along the fast axis */
    const double centre = (W - 1) / 2.0;
    const vf df = tof((tod(lane_index) - centre) * (sub * os));
    const float scale = (float)(kp->r_e_sqr * kp->fluence / kp->steps);
    /* series: the lanes' 1/r from a series in e = (r_f^2 - r_c^2) / r_c^2
     * (cheaper than square root and reciprocal estimates) where |e| <= 0.03
     * on the whole detector, so that six terms leave an error below 5e-12 of
     * 1/r_c.  r >= the distance to the detector plane, less its thickness;
     * |r_f^2 - r_c^2| <= 2 r_c |df| + df^2. */
    const double r_min = fabs(kp->close_distance) - fabs(kp->thick);
    const double q = r_min > 0.0 ? (W - 1) / 2.0 * kp->pixel_size / r_min : 1.0;
    const int series = !curved && 2.0 * q + q * q <= 0.03;
    /* the row's parts, per layer and slow sub-step (t os + subS): computed
     * once per row, used by the tables and by every group */
    const int nparts = nthick * os;
    const int parts_tabled = !curved && nparts <= TABLE_STEPS;
    row_part parts[one_step ? 1 : TABLE_STEPS];
    if (parts_tabled)
        for (int t = 0; t < nthick; t++)
            for (int subS = 0; subS < os; subS++) parts[t * os + subS] = row_part_at(kp, s_row, t * kp->thickstep, subS);
    /* the solid angles: summed in float over a block of groups, the blocks in
     * double (a local: a store through omega_acc could alias kp's doubles) */
    vd omega_sum = *omega_acc;
    vf omega_block = splat(0.0f);
    int groups_in_block = 0;
    /* tabled (flat): the groups' centres are done ahead, a chunk of the row
     * at a time, in vectors of doubles - no scalar square root and division
     * at the head of each group's chain */
    const int steps = nthick * os * os;
    const int tabled = !curved && steps <= TABLE_STEPS;
    pos_table pos[one_step ? 1 : TABLE_STEPS];
    pair_table pair[one_pair && !one_step ? TABLE_STEPS : 1];
    for (int c0 = 0; c0 < kp->fpixels; c0 += TABLE_GROUPS * W) {
    const int groups = (kp->fpixels - c0 + W - 1) / W < TABLE_GROUPS ? (kp->fpixels - c0 + W - 1) / W : TABLE_GROUPS;
    if (tabled) {
        for (int t = 0, k = 0; t < nthick; t++)
            for (int subS = 0; subS < os; subS++) {
                const row_part rp = parts[t * os + subS];
                for (int subF = 0; subF < os; subF++, k++) {
                    fill_pos_table(&pos[k], kp, c0, centre, ff, &rp, os, subF);
                    if (one_pair)
                        fill_pair_table(&pair[k], &pos[k], fs->pairs, &rp, t * kp->thickstep, fmode != NB_FMODE_DEFAULT);
                }
            }
    }
    for (int g = 0; g < groups; g++) {
    const int f0 = c0 + g * W;
    const int n = full ? W : kp->fpixels - f0 < W ? kp->fpixels - f0 : W;
    float *out = row + f0;
    /* which lanes are pixels to render (full: every lane of every group) */
    vi live;
    if (full) {
        live = maskall(1);
    } else if (!kp->mask && f0 >= kp->roi_xmin && f0 + n - 1 <= kp->roi_xmax) {
        live = lane_index < (float)n; /* the usual case: all inside the ROI */
    } else {
        int livei[W];
        for (int j = 0; j < W; j++) {
            int f = f0 + j;
            int on = j < n && f >= kp->roi_xmin && f <= kp->roi_xmax &&
                     (!kp->mask || kp->mask[(size_t)s_row * kp->fpixels + f]);
            livei[j] = on ? -1 : 0;
        }
        memcpy(&live, livei, sizeof live);
        if (!any_lane(live)) {
            memset(out, 0, (size_t)n * sizeof(float));
            continue;
        }
    }

    vf I = splat((float)kp->I_bg);
    vf polar = splat(kp->nopolar ? 1.0f : 0.0f);
    vf omega = splat(0.0f), capture = splat(0.0f);

    for (int t = 0; t < nthick; t++) {
        const double Odet = t * kp->thickstep;
        capture = splat(with_thickness ? 0.0f : 1.0f);
        for (int subS = 0; subS < os; subS++) {
            const row_part rp = parts_tabled ? parts[t * os + subS] : row_part_at(kp, s_row, Odet, subS);
            const double Sdet = rp.Sdet, Cx = rp.Cx, Cy = rp.Cy, Cz = rp.Cz, cc = rp.cc, fc = rp.fc;
            for (int subF = 0; subF < os; subF++) {
                /* ---- the sub-pixel's position and direction ---- */
                const double Fc = sub * ((f0 + centre) * os + subF) + sub / 2.0; /* the group's centre */
                vd px, py, pz, inv;
                vf invf, dxf = splat(0.0f), dyf = splat(0.0f), dzf = splat(0.0f), dfi = splat(0.0f),
                   dinv = splat(0.0f), Ff_flat = splat(0.0f);
                double invc = 0.0;
                if (curved) {
                    vd Fdet = sub * ((tod(lane_index) + f0) * os + subF) + sub / 2.0;
                    px = Fdet * kp->fdet[0] + Cx, py = Fdet * kp->fdet[1] + Cy, pz = Fdet * kp->fdet[2] + Cz;
                    for (int j = 0; j < W; j++) {
                        double v[3], nv[3], q[3] = {px[j], py[j], pz[j]};
                        for (int i = 0; i < 3; i++) v[i] = kp->distance * kp->beam[i];
                        nb_rotate_axis(v, nv, kp->sdet, q[1] / kp->distance);
                        nb_rotate_axis(nv, q, kp->fdet, q[2] / kp->distance);
                        px[j] = q[0], py[j] = q[1], pz[j] = q[2];
                    }
                    vd r2 = px * px + py * py + pz * pz;
                    /* 1/r: single-precision estimate, one Newton step in double (1e-10) */
                    inv = tod(rsqrt_est(tof(r2)));
                    inv = inv * (1.5 - 0.5 * r2 * inv * inv);
                    invf = tof(inv);
                    dxf = tof(px * inv), dyf = tof(py * inv), dzf = tof(pz * inv);
                } else {
                    /* the centre in double; the lanes as small offsets from it */
                    float r2c_f, rc_f, invc_f, invc2_f, slope_f, Fc_f;
                    if (tabled) {
                        const pos_table *pt = &pos[one_step ? 0 : (t * os + subS) * os + subF];
                        r2c_f = pt->r2c[g], rc_f = pt->rc[g], invc_f = pt->invc[g], invc2_f = pt->invc2[g];
                        slope_f = pt->slope[g], Fc_f = pt->Fc[g];
                        invc = pt->invc_d[g];
                    } else {
                        const double r2c = (Fc * ff + fc) * Fc + cc, rc = sqrt(r2c);
                        invc = 1.0 / rc;
                        r2c_f = (float)r2c, rc_f = (float)rc, invc_f = (float)invc, invc2_f = (float)(invc * invc);
                        slope_f = (float)(2.0 * ff * Fc + fc), Fc_f = (float)Fc;
                    }
                    const vf dr2 = df * (slope_f + (float)ff * df); /* r_f^2 - r_c^2 */
                    if (series) {
                        /* 1/r_f - 1/r_c = (1/r_c) ((1 + e)^(-1/2) - 1), e = dr2 / r_c^2 small */
                        const vf e = dr2 * invc2_f;
                        dinv = (e * invc_f) * (-0.5f + e * (0.375f + e * (-0.3125f + e * (0.2734375f +
                                                            e * (-0.24609375f + e * 0.2255859375f)))));
                    } else {
                        /* 1/r_f - 1/r_c = -dr2 / (r_f r_c (r_f + r_c)) */
                        const vf r2f = r2c_f + dr2;
                        invf = rsqrt_est(r2f);
                        dinv = -dr2 * invf * invc_f * rcp_est(r2f * invf + rc_f);
                    }
                    invf = invc_f + dinv; /* 1/r_f, from the exact difference */
                    dfi = df * invf;
                    const vf Ff = Fc_f + df;
                    Ff_flat = Ff; /* the direction's components by flat_dot */
                    (void)px, (void)py, (void)pz, (void)inv;
                }
                {
                    vf om = kp->point_pixel ? invf * invf : pix2_close * invf * invf * invf;
                    /* with one sub-pixel, the first is the only value */
                    omega = one_step ? om : self((omega == 0.0f) | os_omega, om, omega);
                    omega_block += self(live, omega, splat(0.0f));
                    if (++groups_in_block == 16) {
                        omega_sum += tod(omega_block);
                        omega_block = splat(0.0f);
                        groups_in_block = 0;
                    }
                }
                /* fraction absorbed in this layer, at this obliquity; without
                 * -oversample_thick only the last layer's first value is used
                 * (the others are overwritten), so only it is computed */
                if (with_thickness &&
                    (kp->oversample_thick || (t == nthick - 1 && any_lane(live & (capture == 0.0f))))) {
                    vf rho = curved ? dxf * (float)kp->odet[0] + dyf * (float)kp->odet[1] + dzf * (float)kp->odet[2]
                                    : flat_dot(Ff_flat, invf, kp->fdet, Cx, Cy, Cz, kp->odet[0], kp->odet[1], kp->odet[2]);
                    vf mu_over = (float)(kp->thickstep * kp->mu) / rho;
                    vf cap = vx_expf(-(float)t * mu_over) - vx_expf(-(float)(t + 1) * mu_over);
                    capture = self((capture == 0.0f) | os_thick, cap, capture);
                }

                for (int src = 0; src < nsources; src++) {
                    const float *si = fs->src_i + 3 * src;
                    vf c2t = curved ? dxf * si[0] + dyf * si[1] + dzf * si[2]
                                    : flat_dot(Ff_flat, invf, kp->fdet, Cx, Cy, Cz, si[0], si[1], si[2]);
                    vi ok = live;
                    if (with_dmin) {
                        vf stol = vx_sqrtf(2.0f - 2.0f * c2t) * fs->src_inv2lambda[src];
                        ok &= ~((stol > 0.0f) & (fs->dmin * stol > 0.5f));
                        if (!any_lane(ok)) continue;
                    }
                    /* the polarization where it is still to be computed */
                    vi need = ok & ((polar == 0.0f) | os_polar);
                    /* with one sub-pixel, the first source evaluates it on every lane that is
                     * rendered (first_polar) */
                    if (one_step && src == 0) need = first_polar ? ok : maskall(0);
                    if (one_step && src == 0 ? first_polar : any_lane(need)) {
                        const float *sE = fs->src_E + 3 * src, *sB = fs->src_B + 3 * src;
                        vf dE = splat(0.0f), dB = splat(0.0f);
                        if (kahn != 0.0f) {
                            dE = curved ? dxf * sE[0] + dyf * sE[1] + dzf * sE[2]
                                        : flat_dot(Ff_flat, invf, kp->fdet, Cx, Cy, Cz, sE[0], sE[1], sE[2]);
                            dB = curved ? dxf * sB[0] + dyf * sB[1] + dzf * sB[2]
                                        : flat_dot(Ff_flat, invf, kp->fdet, Cx, Cy, Cz, sB[0], sB[1], sB[2]);
                        }
                        polar = self(need, vx_polar(kahn, c2t, dE, dB), polar);
                    }
                    const vf mult = any_os ? self(os_thick, capture, splat(1.0f)) * self(os_polar, polar, splat(1.0f)) *
                                                 self(os_omega, omega, splat(1.0f))
                                           : splat(1.0f);
                    const vi accept_base = ok;

                    const nb_pair *pc = fs->pairs + (size_t)src * kp->ncells;
                    for (int cell = 0; cell < ncells; cell++, pc++) {
                        vf dh, dk, dl;
                        vi ih, ik, il;
                        if (curved) {
                            /* Miller indices in double: (A.pos)/|pos| - A.i; fractional parts in single */
                            vd h = (pc->A[0] * px + pc->A[1] * py + pc->A[2] * pz) * inv - pc->hi[0];
                            vd k = (pc->A[3] * px + pc->A[4] * py + pc->A[5] * pz) * inv - pc->hi[1];
                            vd l = (pc->A[6] * px + pc->A[7] * py + pc->A[8] * pz) * inv - pc->hi[2];
                            vd h0 = rintd(h), k0 = rintd(k), l0 = rintd(l);
                            dh = tof(h - h0), dk = tof(k - k0), dl = tof(l - l0);
                            ih = __builtin_convertvector(h0, vi), ik = __builtin_convertvector(k0, vi);
                            il = __builtin_convertvector(l0, vi);
                        } else {
                            /* the centre's indices in double, whole parts off; the lanes' offsets in single */
                            float frac[3], P_f[3];
                            int whole[3];
                            if (tabled && one_pair) {
                                const pair_table *pr = &pair[one_step ? 0 : (t * os + subS) * os + subF];
                                for (int i = 0; i < 3; i++)
                                    frac[i] = pr->frac[i][g], P_f[i] = pr->P[i][g], whole[i] = pr->whole[i][g];
                            } else {
                                for (int i = 0; i < 3; i++) {
                                    /* associated as fill_pair_table does: the same bits */
                                    const double P = Fc * pc->Af[i] + (Sdet * pc->As[i] + Odet * pc->Ao[i] + pc->Ap[i]);
                                    const double c = P * invc - pc->hi[i], r = rint(c);
                                    frac[i] = (float)(c - r), P_f[i] = (float)P;
                                    whole[i] = fmode != NB_FMODE_DEFAULT ? (int)r : 0;
                                }
                            }
                            dh = frac[0] + (float)pc->Af[0] * dfi + P_f[0] * dinv;
                            dk = frac[1] + (float)pc->Af[1] * dfi + P_f[1] * dinv;
                            dl = frac[2] + (float)pc->Af[2] * dfi + P_f[2] * dinv;
                            const vf rh = rintf_v(dh), rk = rintf_v(dk), rl = rintf_v(dl);
                            dh -= rh, dk -= rk, dl -= rl;
                            if (fmode != NB_FMODE_DEFAULT) {
                                ih = whole[0] + __builtin_convertvector(rh, vi);
                                ik = whole[1] + __builtin_convertvector(rk, vi);
                                il = whole[2] + __builtin_convertvector(rl, vi);
                            } else {
                                ih = ik = il = (vi){0};
                            }
                        }
                        const vf F_latt = lattice_here(fs, cube_n, dh, dk, dl, Na, Nb, Nc, fudge);
                        vf F_cell = splat((float)kp->F.default_F);
                        if (fmode != NB_FMODE_DEFAULT)
                            F_cell = structure_factor(fs, ih, ik, il, dh, dk, dl, accept_base, tripped);
                        vf term = F_cell * F_cell * F_latt * F_latt;
                        /* rounded before it is added, in every instantiation: a plan renders
                         * to the same bits whichever runs it (a fused multiply-add here in
                         * one and not in another would differ in the last place - and
                         * -dmin must leave the pixels it does not cut unchanged) */
                        no_contract(&term);
                        /* the reference skips zero lattice terms unless there is water; in
                         * the simple path adding one changes nothing (F is the finite default) */
                        const vi accept = accept_base & ~((F_latt == 0.0f) & water_zero);
                        if (any_os) I = self(accept, (I + term) * mult, I);
                        else if (simple) I += term; /* dead lanes are cleared at the end */
                        else I += self(accept, term, splat(0.0f));
                    }
                }
            }
        }
    }
    vf val = scale * I;
    if (!simple) {
        val *= self(os_thick, splat(1.0f), capture);
        val *= self(os_polar, splat(1.0f), polar);
        val *= self(os_omega, splat(1.0f), omega);
    } else {
        /* the same order as above (capture is 1 here): a plan renders to
         * the same bits whichever instantiation runs it */
        val *= polar;
        val *= omega;
    }
    if (!full) val = self(live, val, splat(0.0f));
    if (n >= W) memcpy(out, &val, sizeof val);
    else memcpy(out, &val, (size_t)n * sizeof(float));
    }
    }
    *omega_acc = omega_sum + tod(omega_block);
}

/* the pixel-steps below which the render runs on one thread */
#define NB_PARALLEL_WORK (1 << 21)

/* The instantiations: curved detectors; flat ones in general; flat ones
 * without the oversampling flags, absorption, dmin or an F table ("simple",
 * where the compiler drops those branches and keeps more in registers); and,
 * of those, one sub-pixel and layer, one source and cell, and rows rendered
 * whole - constants the compiler folds.  All give the same bits (the lattice
 * term is rounded before it is added). */
static void render_row(const nb_fparams *fs, int s_row, float *row, vd *omega_acc, int *tripped)
{
    const nb_kparams *kp = &fs->kp;
    const int simple = !kp->oversample_thick && !kp->oversample_polar && !kp->oversample_omega && kp->thick == 0.0 &&
                       fs->dmin <= 0.0f && fs->fmode == NB_FMODE_DEFAULT && isfinite(kp->F.default_F);
    const int one_step = kp->oversample == 1 && kp->thicksteps == 1, one_pair = kp->nsources == 1 && kp->ncells == 1;
    /* full: every pixel of the row is rendered, in whole groups */
    const int full = !kp->mask && kp->roi_xmin <= 0 && kp->roi_xmax >= kp->fpixels - 1 && kp->fpixels % W == 0;
    if (kp->curved_detector) render_row_impl(fs, s_row, row, omega_acc, tripped, 1, 0, 0, 0, 0);
    else if (simple && one_step && one_pair && full) render_row_impl(fs, s_row, row, omega_acc, tripped, 0, 1, 1, 1, 1);
    else if (simple && one_step && one_pair) render_row_impl(fs, s_row, row, omega_acc, tripped, 0, 1, 1, 1, 0);
    else if (simple && one_step && full) render_row_impl(fs, s_row, row, omega_acc, tripped, 0, 1, 1, 0, 1);
    else if (simple && one_step) render_row_impl(fs, s_row, row, omega_acc, tripped, 0, 1, 1, 0, 0);
    else if (simple && one_pair) render_row_impl(fs, s_row, row, omega_acc, tripped, 0, 1, 0, 1, 0);
    else if (simple) render_row_impl(fs, s_row, row, omega_acc, tripped, 0, 1, 0, 0, 0);
    else if (one_pair) render_row_impl(fs, s_row, row, omega_acc, tripped, 0, 0, 0, 1, 0);
    else render_row_impl(fs, s_row, row, omega_acc, tripped, 0, 0, 0, 0, 0);
}

void NB_FAST_NAME(const nb_fparams *fs, float *image, double *row_omega, nb_row_stats *row_stats,
                  nb_payload_crc *row_crc, int *tripped_out,
                  nb_progress *prog)
{
    const nb_kparams *kp = &fs->kp;
    const nb_roi roi = {kp->roi_xmin, kp->roi_xmax, kp->roi_ymin, kp->roi_ymax};
    int tripped = 0;
    /* a small render (a few milliseconds of work) stays on one
     * thread: in a pipe whose other stages are starting up, waiting for a
     * second thread to be scheduled costs more than the work */
    const double work = (double)kp->fpixels * kp->spixels * (kp->steps > 0 ? kp->steps : 1);
#pragma omp parallel for schedule(dynamic, 1) reduction(| : tripped) if (work >= NB_PARALLEL_WORK)
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
