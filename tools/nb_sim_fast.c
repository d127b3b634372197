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
 * Precision: positions, the diffracted direction and the Miller indices are
 * double; from the fractional index on (lattice factor, structure factor,
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
#if W != 4 && W != 8 && W != 16
#error "NB_FAST_W must be 4, 8 or 16"
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

INL vf splat(float x) { return (vf){0} + x; }
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

#if W == 16
static const vf lane_index = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
#elif W == 8
static const vf lane_index = {0, 1, 2, 3, 4, 5, 6, 7};
#else
static const vf lane_index = {0, 1, 2, 3};
#endif

/* base[idx] for each lane (idx in range on every lane) */
INL vf gather(const float *base, vi idx)
{
#if defined(__AVX512F__) && W == 16
    return (vf)_mm512_i32gather_ps((__m512i)idx, base, 4);
#elif defined(__AVX2__) && W == 8
    return (vf)_mm256_i32gather_ps(base, (__m256i)idx, 4);
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
#if defined(__AVX512F__) && W == 16
    vf y = (vf)_mm512_rsqrt14_ps((__m512)x);
    return y * (1.5f - 0.5f * x * y * y);
#elif defined(__AVX__) && W == 8
    vf y = (vf)_mm256_rsqrt_ps((__m256)x);
    return y * (1.5f - 0.5f * x * y * y);
#else
    return vx_rsqrtf2(x);
#endif
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
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++) {
            vi row = base + (a * g->k_range + b) * g->l_range;
            vf sl = wl[0] * gather(Fg, row) + wl[1] * gather(Fg, row + 1) + wl[2] * gather(Fg, row + 2) +
                    wl[3] * gather(Fg, row + 3);
            sum += wh[a] * wk[b] * sl;
        }
    return self(safe, sum, F);
}

/* One group of up to W pixels of row s_row starting at fast index f0. */
/* Groups rendered together: their independent dependency chains sit side by
 * side in the instruction stream, which keeps the vector units busy (one
 * group alone is a long chain of dependent operations). */
#define G 1
#define EACH _Pragma("GCC unroll 4") for (int g = 0; g < G; g++)

/* G groups of up to W pixels of row s_row, starting at fast index f0; n
 * pixels in all (the last groups of a row may be partial or empty). */
INL void render_groups_impl(const nb_fparams *fs, int s_row, int f0, int n, float *out, vd *omega_acc,
                            int *tripped, const int curved)
{
    const nb_kparams *kp = &fs->kp;
    const int os = kp->oversample;
    const double sub = kp->subpixel_size;

    /* which lanes are pixels to render */
    vi live[G];
    if (!kp->mask && f0 >= kp->roi_xmin && f0 + n - 1 <= kp->roi_xmax) {
        EACH live[g] = lane_index < (float)(n - g * W); /* the usual case: all inside the ROI */
    } else {
        int any = 0;
        EACH {
            int livei[W];
            for (int j = 0; j < W; j++) {
                int f = f0 + g * W + j;
                int on = g * W + j < n && f >= kp->roi_xmin && f <= kp->roi_xmax &&
                         (!kp->mask || kp->mask[(size_t)s_row * kp->fpixels + f]);
                livei[j] = on ? -1 : 0;
            }
            memcpy(&live[g], livei, sizeof live[g]);
            any |= any_lane(live[g]);
        }
        if (!any) {
            memset(out, 0, (size_t)n * sizeof(float));
            return;
        }
    }

    const vi os_thick = maskall(kp->oversample_thick), os_polar = maskall(kp->oversample_polar);
    const vi os_omega = maskall(kp->oversample_omega);
    const int any_os = kp->oversample_thick || kp->oversample_polar || kp->oversample_omega;
    const float kahn = (float)kp->kahn_factor;
    const int with_thickness = kp->thick != 0.0, with_dmin = fs->dmin > 0.0f;
    const float Na = (float)kp->Na, Nb = (float)kp->Nb, Nc = (float)kp->Nc, fudge = (float)kp->fudge;
    const vi water_zero = maskall(kp->water_size == 0.0);
    const float pix2_close = (float)(kp->pixel_size * kp->pixel_size * kp->close_distance);
    const vd lane = tod(lane_index);

    vf I[G], polar[G], omega[G], capture[G];
    EACH {
        I[g] = splat((float)kp->I_bg);
        polar[g] = splat(kp->nopolar ? 1.0f : 0.0f);
        omega[g] = capture[g] = splat(0.0f);
    }

    for (int t = 0; t < kp->thicksteps; t++) {
        const double Odet = t * kp->thickstep;
        EACH capture[g] = splat(with_thickness ? 0.0f : 1.0f);
        for (int subS = 0; subS < os; subS++) {
            const double Sdet = sub * ((double)s_row * os + subS) + sub / 2.0;
            /* the part of the position common to the row */
            const double Cx = Sdet * kp->sdet[0] + Odet * kp->odet[0] + kp->pix0[0];
            const double Cy = Sdet * kp->sdet[1] + Odet * kp->odet[1] + kp->pix0[1];
            const double Cz = Sdet * kp->sdet[2] + Odet * kp->odet[2] + kp->pix0[2];
            const double cc = Cx * Cx + Cy * Cy + Cz * Cz;
            const double fc = 2.0 * (kp->fdet[0] * Cx + kp->fdet[1] * Cy + kp->fdet[2] * Cz);
            const double ff = kp->fdet[0] * kp->fdet[0] + kp->fdet[1] * kp->fdet[1] + kp->fdet[2] * kp->fdet[2];
            for (int subF = 0; subF < os; subF++) {
                /* ---- the sub-pixel's position and direction ---- */
                vd Fdet[G], px[G], py[G], pz[G], r2[G], inv[G];
                vf invf[G], dxf[G], dyf[G], dzf[G];
                EACH Fdet[g] = sub * ((lane + (f0 + g * W)) * os + subF) + sub / 2.0;
                if (curved) {
                    EACH {
                        px[g] = Fdet[g] * kp->fdet[0] + Cx, py[g] = Fdet[g] * kp->fdet[1] + Cy;
                        pz[g] = Fdet[g] * kp->fdet[2] + Cz;
                        for (int j = 0; j < W; j++) {
                            double v[3], nv[3], q[3] = {px[g][j], py[g][j], pz[g][j]};
                            for (int i = 0; i < 3; i++) v[i] = kp->distance * kp->beam[i];
                            nb_rotate_axis(v, nv, kp->sdet, q[1] / kp->distance);
                            nb_rotate_axis(nv, q, kp->fdet, q[2] / kp->distance);
                            px[g][j] = q[0], py[g][j] = q[1], pz[g][j] = q[2];
                        }
                        r2[g] = px[g] * px[g] + py[g] * py[g] + pz[g] * pz[g];
                    }
                } else {
                    EACH r2[g] = (Fdet[g] * ff + fc) * Fdet[g] + cc; /* |pos|^2, a quadratic in Fdet */
                }
                /* 1/r: single-precision estimate (1e-5), one Newton step in double (1e-10) */
                EACH inv[g] = tod(rsqrt_est(tof(r2[g])));
                EACH inv[g] = inv[g] * (1.5 - 0.5 * r2[g] * inv[g] * inv[g]);
                EACH {
                    invf[g] = tof(inv[g]);
                    vf om = kp->point_pixel ? invf[g] * invf[g] : pix2_close * invf[g] * invf[g] * invf[g];
                    omega[g] = self((omega[g] == 0.0f) | os_omega, om, omega[g]);
                    *omega_acc += tod(self(live[g], omega[g], splat(0.0f))); /* summed in double */
                }
                /* the unit direction in single precision, for the angle-dependent factors */
                if (curved) {
                    EACH dxf[g] = tof(px[g] * inv[g]), dyf[g] = tof(py[g] * inv[g]), dzf[g] = tof(pz[g] * inv[g]);
                } else {
                    EACH {
                        vf Ff = tof(Fdet[g]);
                        dxf[g] = (Ff * (float)kp->fdet[0] + (float)Cx) * invf[g];
                        dyf[g] = (Ff * (float)kp->fdet[1] + (float)Cy) * invf[g];
                        dzf[g] = (Ff * (float)kp->fdet[2] + (float)Cz) * invf[g];
                    }
                }
                if (with_thickness) {
                    /* fraction absorbed in this layer, at this obliquity */
                    EACH {
                        vf rho = dxf[g] * (float)kp->odet[0] + dyf[g] * (float)kp->odet[1] + dzf[g] * (float)kp->odet[2];
                        vf mu_over = (float)(kp->thickstep * kp->mu) / rho;
                        vf cap = vx_expf(-(float)t * mu_over) - vx_expf(-(float)(t + 1) * mu_over);
                        capture[g] = self((capture[g] == 0.0f) | os_thick, cap, capture[g]);
                    }
                }

                for (int src = 0; src < kp->nsources; src++) {
                    const float *si = fs->src_i + 3 * src;
                    vi ok[G], need[G];
                    vf c2t[G];
                    int any_need = 0, any_ok = 0;
                    EACH {
                        c2t[g] = dxf[g] * si[0] + dyf[g] * si[1] + dzf[g] * si[2];
                        ok[g] = live[g];
                        if (with_dmin) {
                            vf stol = vx_sqrtf(2.0f - 2.0f * c2t[g]) * fs->src_inv2lambda[src];
                            ok[g] &= ~((stol > 0.0f) & (fs->dmin * stol > 0.5f));
                        }
                        /* the polarization where it is still to be computed */
                        need[g] = ok[g] & ((polar[g] == 0.0f) | os_polar);
                        any_need |= any_lane(need[g]);
                        any_ok |= any_lane(ok[g]);
                    }
                    if (any_need) {
                        const float *sE = fs->src_E + 3 * src, *sB = fs->src_B + 3 * src;
                        EACH {
                            vf dE = splat(0.0f), dB = splat(0.0f);
                            if (kahn != 0.0f) {
                                dE = dxf[g] * sE[0] + dyf[g] * sE[1] + dzf[g] * sE[2];
                                dB = dxf[g] * sB[0] + dyf[g] * sB[1] + dzf[g] * sB[2];
                            }
                            polar[g] = self(need[g], vx_polar(kahn, c2t[g], dE, dB), polar[g]);
                        }
                    }
                    if (!any_ok) continue;
                    vf mult[G];
                    EACH mult[g] = any_os ? self(os_thick, capture[g], splat(1.0f)) * self(os_polar, polar[g], splat(1.0f)) *
                                               self(os_omega, omega[g], splat(1.0f))
                                         : splat(1.0f);

                    const nb_pair *pc = fs->pairs + (size_t)src * kp->ncells;
                    for (int cell = 0; cell < kp->ncells; cell++, pc++) {
                        /* Miller indices in double: (A.pos)/|pos| - A.i; fractional parts in single */
                        vd h[G], k[G], l[G], h0[G], k0[G], l0[G];
                        vf dh[G], dk[G], dl[G], F_latt[G], F_cell[G];
                        if (curved) {
                            EACH {
                                h[g] = (pc->A[0] * px[g] + pc->A[1] * py[g] + pc->A[2] * pz[g]) * inv[g] - pc->hi[0];
                                k[g] = (pc->A[3] * px[g] + pc->A[4] * py[g] + pc->A[5] * pz[g]) * inv[g] - pc->hi[1];
                                l[g] = (pc->A[6] * px[g] + pc->A[7] * py[g] + pc->A[8] * pz[g]) * inv[g] - pc->hi[2];
                            }
                        } else {
                            const double Hh = Sdet * pc->As[0] + Odet * pc->Ao[0] + pc->Ap[0];
                            const double Hk = Sdet * pc->As[1] + Odet * pc->Ao[1] + pc->Ap[1];
                            const double Hl = Sdet * pc->As[2] + Odet * pc->Ao[2] + pc->Ap[2];
                            EACH {
                                h[g] = (Fdet[g] * pc->Af[0] + Hh) * inv[g] - pc->hi[0];
                                k[g] = (Fdet[g] * pc->Af[1] + Hk) * inv[g] - pc->hi[1];
                                l[g] = (Fdet[g] * pc->Af[2] + Hl) * inv[g] - pc->hi[2];
                            }
                        }
                        EACH h0[g] = rintd(h[g]), k0[g] = rintd(k[g]), l0[g] = rintd(l[g]);
                        EACH dh[g] = tof(h[g] - h0[g]), dk[g] = tof(k[g] - k0[g]), dl[g] = tof(l[g] - l0[g]);
                        EACH F_latt[g] = vx_lattice(kp->shape, fs->cheb, dh[g], dk[g], dl[g], Na, Nb, Nc, fudge,
                                                    fs->a_star, fs->b_star, fs->c_star);
                        EACH F_cell[g] = splat((float)kp->F.default_F);
                        if (fs->fmode != NB_FMODE_DEFAULT)
                            EACH F_cell[g] = structure_factor(fs, __builtin_convertvector(h0[g], vi),
                                                              __builtin_convertvector(k0[g], vi),
                                                              __builtin_convertvector(l0[g], vi), dh[g], dk[g], dl[g],
                                                              ok[g], tripped);
                        EACH {
                            vf term = F_cell[g] * F_cell[g] * F_latt[g] * F_latt[g];
                            /* the reference skips zero lattice terms unless there is water */
                            vi accept = ok[g] & ~((F_latt[g] == 0.0f) & water_zero);
                            if (any_os) I[g] = self(accept, (I[g] + term) * mult[g], I[g]);
                            else I[g] += self(accept, term, splat(0.0f));
                        }
                    }
                }
            }
        }
    }
    const float scale = (float)(kp->r_e_sqr * kp->fluence / kp->steps);
    EACH {
        vf val = scale * I[g];
        val *= self(os_thick, splat(1.0f), capture[g]);
        val *= self(os_polar, splat(1.0f), polar[g]);
        val *= self(os_omega, splat(1.0f), omega[g]);
        val = self(live[g], val, splat(0.0f));
        int m = n - g * W;
        if (m >= W) memcpy(out + g * W, &val, sizeof val);
        else if (m > 0) memcpy(out + g * W, &val, (size_t)m * sizeof(float));
    }
}

/* flat and curved detectors: two instantiations */
static void render_groups(const nb_fparams *fs, int s_row, int f0, int n, float *out, vd *omega_acc, int *tripped)
{
    if (fs->kp.curved_detector) render_groups_impl(fs, s_row, f0, n, out, omega_acc, tripped, 1);
    else render_groups_impl(fs, s_row, f0, n, out, omega_acc, tripped, 0);
}

void NB_FAST_NAME(const nb_fparams *fs, float *image, double *row_omega, int *tripped_out, nb_progress *prog)
{
    const nb_kparams *kp = &fs->kp;
    int tripped = 0;
#pragma omp parallel for schedule(dynamic, 1) reduction(| : tripped)
    for (int s = 0; s < kp->spixels; s++) {
        vd omega = tod(splat(0.0f));
        float *row = image + (size_t)s * kp->fpixels;
        if (s < kp->roi_ymin || s > kp->roi_ymax) {
            memset(row, 0, (size_t)kp->fpixels * sizeof(float));
        } else {
            for (int f0 = 0; f0 < kp->fpixels; f0 += G * W) {
                int n = kp->fpixels - f0 < G * W ? kp->fpixels - f0 : G * W;
                render_groups(fs, s, f0, n, row + f0, &omega, &tripped);
            }
        }
        double osum = 0.0;
        for (int j = 0; j < W; j++) osum += omega[j];
        row_omega[s] = osum;
        if (prog) nb_progress_add(prog, 1);
    }
    *tripped_out = tripped;
}
