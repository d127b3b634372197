/* nb_physics_fgrad.h - the fast family's pixel with its derivatives, one
 * pixel at a time: nb-sim --grad on the fast path on a GPU, where a thread
 * renders a pixel (and the host tests, which run the same source).
 *
 * nb_pixel.inc instantiated once more, in single-precision duals (nb_fdual:
 * a value and NB_DUAL_N tangents).  Each term takes its value from the fast
 * family's scalar term (nb_fpx_*, nb_physics.h: the image is the fast
 * path's) and its tangents from the slopes that the fast family's one
 * definition of the term gives beside the value (nb_fastmath.inc: solid
 * angle, polarization without atan2, capture fraction; nb_fast_shapes.inc:
 * every crystal's lattice factor; nb_fast_structure.inc: the tricubic F),
 * chained with the tangents of their arguments, as the CPU's SIMD tangent
 * kernel (engine/nb_fast_grad.inc) chains them: the same formula on both
 * backends.  What differs is the geometry's tangents, and says why: the
 * CPU forms them from the row-linear A.pos of its lane groups and
 * per-thread tables of a row's slow steps; a thread of one pixel has
 * neither and forms du = (dpos - u (u.dpos)) / |pos| and dh = dA.u + A.du -
 * d(A.i) directly (a curved detector's positions: the double path's
 * rotations in dual numbers, as the CPU's).
 *
 * The tangents' inputs are an nb_fgrad, built by nb_fgrad_build
 * (engine/nb_sim_grad.c) from the double path's nb_kdual; this pixel reads
 * its per-value tangents and the per-pair dA and dhi (not the CPU's row
 * tables dAaxes and slow_scratch).  Host and CUDA device code.
 */
#ifndef NB_PHYSICS_FGRAD_H
#define NB_PHYSICS_FGRAD_H

#include <stddef.h>

#include "nb_dual.h"
#include "nb_physics.h"
#include "nb_physics_dual.h"

/* The tangents the fast path's derivatives follow, with respect to up to
 * NB_DUAL_N parameters: the detector's axes and origin, the sources'
 * per-(source, cell) constants, the reciprocal cell, the crystal size, the
 * fluence and the water background; every other input is fixed.  Single
 * precision, as the fast kernels' values. */
typedef struct nb_fgrad {
    int nd; /* tangents in use; the others are 0 */
    float dfdet[3][NB_DUAL_N], dsdet[3][NB_DUAL_N], dodet[3][NB_DUAL_N], dpix0[3][NB_DUAL_N];
    float dclose[NB_DUAL_N];       /* of the close distance, m */
    float ddistance[NB_DUAL_N], dbeam[3][NB_DUAL_N]; /* a curved detector's sphere */
    float dstar[3][3][NB_DUAL_N];  /* of a*, b*, c* (1/Angstrom) */
    float dN[3][NB_DUAL_N];        /* of Na, Nb, Nc */
    float dscale[NB_DUAL_N];       /* of r_e^2 fluence / steps */
    float dI_bg[NB_DUAL_N];        /* of the water background */
    /* per (source, cell) pair: of A (9) and A.i (3), NB_DUAL_N each */
    const float *dA, *dhi;
    /* The CPU kernel's row tables (NULL for the one-pixel form): per pair, of
     * A.fdet, A.sdet, A.odet and A.pix0 (4 x 3, NB_DUAL_N each): on a flat
     * detector the tangent of A.pos is then dAf F + dAs S + dAo O + dAp, as the
     * image's A.pos is Af F + As S + Ao O + Ap (nb_pair) */
    const float *dAaxes;
    /* room for each thread's per-slow-step parts of that, dAs S + dAo O + dAp (3 x
     * NB_DUAL_N per pair and slot): slow_scratch + thread * slow_stride; slow_slots, 1
     * or a slot for each of a row's slow steps (layers x slow sub-steps) where they fit */
    float *slow_scratch;
    size_t slow_stride;
    int slow_slots;
    /* The CPU kernel's vector-Jacobian product (nb_render_frame_vjp), formed in
     * the rows in place of derivative images (NULL: the images are written):
     * weights, the panel's pixels; row_sums, spixels x nd, each row's sum over
     * its pixels, in their order, of weight x derivative (the same on any
     * thread count: the caller adds the rows in order) */
    const double *weights;
    double *row_sums;
} nb_fgrad;

/* ---- the terms (nb_pixel.inc), prefix nb_fgx_ ---------------------------- */

typedef struct nb_fgx_ctx {
    nb_fpx_ctx x;          /* the fast scalar pixel's context: the values */
    const nb_fgrad *fg;
    /* the slow step's offsets (m) along sdet and odet.  Its part of the
     * position's tangent, dpix0 + S dsdet + O dodet, is formed again at each
     * sub-pixel (nb_fgx_subpixel), not kept here: 24 floats held through the
     * sub-pixels, sources and cells made the GPU kernel's peak spill */
    float S, O;
    float pix2;             /* pixel_size^2 */
    int moves_any_N;        /* a tangent moves Na, Nb or Nc */
    int moves_star;         /* a tangent moves a*, b* or c* (the Gaussian's slopes in them) */
} nb_fgx_ctx;
typedef struct nb_fgx_geo {
    nb_fpx_geo g;
    float du[3][NB_DUAL_N]; /* the direction's tangents */
    float dinvf[NB_DUAL_N]; /* 1/|pos|'s */
} nb_fgx_geo;
typedef struct nb_fgx_src {
    nb_fpx_src s;
} nb_fgx_src;
typedef struct nb_fgx_idx {
    nb_fpx_idx x;
    float dd[3][NB_DUAL_N]; /* the fractional indices' tangents */
} nb_fgx_idx;

NB_DUAL_INLINE float nb_fgx_along(const float u[3], const float v[3]) { return u[0] * v[0] + u[1] * v[1] + u[2] * v[2]; }

/* tangent j of the direction's component along a fixed v */
NB_DUAL_INLINE float nb_fgx_du_along(const nb_fgx_geo *g, const float v[3], int j)
{
    return g->du[0][j] * v[0] + g->du[1][j] * v[1] + g->du[2][j] * v[2];
}

NB_DUAL_INLINE void nb_fgx_slow_step(nb_fgx_ctx *c, int t, int subS)
{
    nb_fpx_slow_step(&c->x, t, subS);
    const nb_kparams *kp = c->x.kp;
    const double sub = kp->subpixel_size;
    c->S = (float)(sub * ((double)c->x.spixel * kp->oversample + subS) + sub / 2.0);
    c->O = (float)(t * kp->thickstep);
}

/* nb_pixel_double.inc's vector helpers in nb_hdual: the double path's
 * rotation (nb_hd_rotate_axis) for nb_curved_tangents */
#define DR_VECTORS_ONLY
#define DR_INLINE NB_DUAL_INLINE
#define DRF(name) nb_hd_##name
#define DR nb_hdual
#define DR_C(x) nb_hdual_c(x)
#define DR_V(a) ((a).v)
#define DR_ADD(a, b) nb_hdual_add(a, b)
#define DR_SUB(a, b) nb_hdual_sub(a, b)
#define DR_MUL(a, b) nb_hdual_mul(a, b)
#define DR_DIV(a, b) nb_hdual_div(a, b)
#define DR_NEG(a) nb_hdual_neg(a)
#define DR_SQRT(a) nb_hdual_sqrt(a)
#define DR_SIN(a) nb_hdual_sin(a)
#define DR_COS(a) nb_hdual_cos(a)
#include "nb_pixel_double.inc"

/* nb_curved_tangents for its tangents j0 .. j0 + n - 1 (n <= NB_HDUAL_N):
 * the values once more, these tangents alone */
NB_DUAL_INLINE void nb_curved_half(const nb_kparams *kp, const nb_fgrad *fg, double F, const double C[3],
                                   const float *dC, int dC_stride, int j0, int n, float *u,
                                   float du[3][NB_DUAL_N], float dinv[NB_DUAL_N])
{
    nb_hdual fdet[3], sdet[3], v[3], nv[3], pos[3], q[3];
    nb_hdual distance = nb_hdual_c(kp->distance);
    for (int j = 0; j < n; j++) distance.d[j] = fg->ddistance[j0 + j];
    for (int i = 0; i < 3; i++) {
        nb_hdual beam = nb_hdual_c(kp->beam[i]);
        fdet[i] = nb_hdual_c(kp->fdet[i]), sdet[i] = nb_hdual_c(kp->sdet[i]);
        q[i] = nb_hdual_c(F * kp->fdet[i] + C[i]);
        for (int j = 0; j < n; j++) {
            const int jj = j0 + j;
            beam.d[j] = fg->dbeam[i][jj], fdet[i].d[j] = fg->dfdet[i][jj], sdet[i].d[j] = fg->dsdet[i][jj];
            q[i].d[j] = dC[i * dC_stride + jj] + F * fg->dfdet[i][jj];
        }
        v[i] = nb_hdual_mul(distance, beam);
    }
    nb_hd_rotate_axis(v, nv, sdet, nb_hdual_div(q[1], distance));
    nb_hd_rotate_axis(nv, pos, fdet, nb_hdual_div(q[2], distance));
    const double r = sqrt(pos[0].v * pos[0].v + pos[1].v * pos[1].v + pos[2].v * pos[2].v), inv = 1.0 / r;
    for (int j = 0; j < n; j++) {
        double qd = 0.0; /* u . dpos */
        for (int i = 0; i < 3; i++) qd += pos[i].v * inv * pos[i].d[j];
        for (int i = 0; i < 3; i++) du[i][j0 + j] = (float)((pos[i].d[j] - pos[i].v * inv * qd) * inv);
        dinv[j0 + j] = (float)(-qd * inv * inv);
    }
    if (u)
        for (int i = 0; i < 3; i++) u[i] = (float)(pos[i].v * inv);
}

/* A curved detector's point at fast offset F (m) beside the row's part C,
 * whose k <= NB_DUAL_N tangents are dC (component i's at dC + i *
 * dC_stride): on the sphere as the double path rotates it
 * (nb_pixel_double.inc), in dual numbers; the direction u (NULL: not
 * wanted), its tangents du and those of 1/|pos|, dinv.  The CPU's lanes
 * (engine/nb_fast_grad.inc) call it lane by lane, a GPU thread once a
 * sub-pixel.  Half the tangents at a time (nb_hdual), the values worked out
 * for each half: the same numbers as all 8 in nb_dual, whose rotations took
 * some 240 registers of a GPU thread (the two halves, some 160) and made
 * the fast derivative kernel spill. */
NB_DUAL_INLINE void nb_curved_tangents(const nb_kparams *kp, const nb_fgrad *fg, double F, const double C[3],
                                       const float *dC, int dC_stride, int k, float *u, float du[3][NB_DUAL_N],
                                       float dinv[NB_DUAL_N])
{
    /* two calls, not a loop: a GPU thread's indices must be constants, or
     * fg and the tangents go to local memory */
    nb_curved_half(kp, fg, F, C, dC, dC_stride, 0, k < NB_HDUAL_N ? k : NB_HDUAL_N, u, du, dinv);
    if (k > NB_HDUAL_N) nb_curved_half(kp, fg, F, C, dC, dC_stride, NB_HDUAL_N, k - NB_HDUAL_N, NULL, du, dinv);
}

NB_DUAL_INLINE void nb_fgx_subpixel(nb_fgx_ctx *c, int t, int subS, int subF, nb_fgx_geo *g)
{
    nb_fpx_subpixel(&c->x, t, subS, subF, &g->g);
    const nb_kparams *kp = c->x.kp;
    const nb_fgrad *fg = c->fg;
    const double sub = kp->subpixel_size;
    const double Fd = sub * ((double)c->x.fpixel * kp->oversample + subF) + sub / 2.0;
    float dC[3][NB_DUAL_N]; /* the slow step's part of the position's tangent (see nb_fgx_ctx) */
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < NB_DUAL_N; j++)
            dC[i][j] = fg->dpix0[i][j] + c->S * fg->dsdet[i][j] + c->O * fg->dodet[i][j];
    if (kp->curved_detector) {
        nb_curved_tangents(kp, fg, Fd, c->x.C, &dC[0][0], NB_DUAL_N, NB_DUAL_N, NULL, g->du, g->dinvf);
        return;
    }
    const float F = (float)Fd, invf = g->g.invf;
    const float *u = g->g.d;
    for (int j = 0; j < NB_DUAL_N; j++) {
        float dpos[3];
        for (int i = 0; i < 3; i++) dpos[i] = dC[i][j] + F * fg->dfdet[i][j];
        const float q = nb_fgx_along(u, dpos); /* u . dpos = d|pos| */
        for (int i = 0; i < 3; i++) g->du[i][j] = (dpos[i] - u[i] * q) * invf;
        g->dinvf[j] = -q * invf * invf;
    }
}

NB_DUAL_INLINE nb_fdual nb_fgx_omega(nb_fgx_ctx *c, const nb_fgx_geo *g)
{
    nb_fdual r;
    r.v = nb_fpx_omega(&c->x, &g->g);
    float by_inv, by_close;
    const int point = c->x.kp->point_pixel;
    nb_omega_slopes(g->g.invf, c->x.pix2_close, c->pix2, point, &by_inv, &by_close);
    for (int j = 0; j < NB_DUAL_N; j++) r.d[j] = (point ? 0.0f : by_close * c->fg->dclose[j]) + by_inv * g->dinvf[j];
    return r;
}

NB_DUAL_INLINE void nb_fgx_add_omega(nb_fgx_ctx *c, nb_fdual omega, int live) { nb_fpx_add_omega(&c->x, omega.v, live); }

NB_DUAL_INLINE nb_fdual nb_fgx_capture(nb_fgx_ctx *c, const nb_fgx_geo *g, int t)
{
    nb_fdual r;
    r.v = nb_fpx_capture(&c->x, &g->g, t);
    const float rho = nb_fgx_along(g->g.d, c->x.odet);
    const float slope = nb_capture_slope(rho, c->x.thickstep_mu, t);
    for (int j = 0; j < NB_DUAL_N; j++) {
        const float dodet[3] = {c->fg->dodet[0][j], c->fg->dodet[1][j], c->fg->dodet[2][j]};
        r.d[j] = slope * (nb_fgx_du_along(g, c->x.odet, j) + nb_fgx_along(g->g.d, dodet));
    }
    return r;
}

NB_DUAL_INLINE int nb_fgx_source(nb_fgx_ctx *c, const nb_fgx_geo *g, int src, nb_fgx_src *sv)
{
    return nb_fpx_source(&c->x, &g->g, src, &sv->s);
}

/* The sources do not move on the fast path (nb_fgrad_build refuses it):
 * cos 2theta moves with the direction alone. */
NB_DUAL_INLINE nb_fdual nb_fgx_polarization(nb_fgx_ctx *c, nb_fgx_geo *g, nb_fgx_src *sv, int src)
{
    nb_fdual r;
    r.v = nb_fpx_polarization(&c->x, &g->g, &sv->s, src);
    const float *si = c->x.fp->src_i + 3 * src, *sE = c->x.fp->src_E + 3 * src, *sB = c->x.fp->src_B + 3 * src;
    const float kahn = c->x.kahn;
    float by_c2t, by_psi, psi_e, psi_b;
    nb_polar_slopes(kahn, sv->s.c2t, nb_fgx_along(g->g.d, sE), nb_fgx_along(g->g.d, sB), &by_c2t, &by_psi, &psi_e,
                    &psi_b);
    for (int j = 0; j < NB_DUAL_N; j++) {
        r.d[j] = by_c2t * nb_fgx_du_along(g, si, j);
        if (kahn != 0.0f) r.d[j] += by_psi * (psi_e * nb_fgx_du_along(g, sE, j) + psi_b * nb_fgx_du_along(g, sB, j));
    }
    return r;
}

/* h = A.u - A.i: dh = dA.u + A.du - d(A.i) */
NB_DUAL_INLINE void nb_fgx_index(nb_fgx_ctx *c, const nb_fgx_geo *g, const nb_fgx_src *sv, int src, int cell,
                                 nb_fgx_idx *x)
{
    nb_fpx_index(&c->x, &g->g, &sv->s, src, cell, &x->x);
    const size_t p = (size_t)src * c->x.kp->ncells + cell;
    const double *A = c->x.fp->pairs[p].A;
    const float *dA = c->fg->dA + p * 9 * NB_DUAL_N, *dhi = c->fg->dhi + p * 3 * NB_DUAL_N;
    const float *u = g->g.d;
    for (int v = 0; v < 3; v++) {
        const float Av[3] = {(float)A[3 * v], (float)A[3 * v + 1], (float)A[3 * v + 2]};
        const float *dAv = dA + 3 * v * NB_DUAL_N;
        for (int j = 0; j < NB_DUAL_N; j++)
            x->dd[v][j] = dAv[j] * u[0] + dAv[NB_DUAL_N + j] * u[1] + dAv[2 * NB_DUAL_N + j] * u[2] +
                          nb_fgx_du_along(g, Av, j) - dhi[v * NB_DUAL_N + j];
    }
}

/* the lattice factor's value and slopes from the one definition of the
 * shapes (nb_lattice_slopes), times the tangents of the fractional indices,
 * N and the reciprocal axes */
NB_DUAL_INLINE nb_fdual nb_fgx_lattice(nb_fgx_ctx *c, const nb_fgx_idx *x)
{
    const nb_fgrad *fg = c->fg;
    const int star = c->moves_star && c->x.shape.shape == NB_SHAPE_GAUSS;
    const int want = NB_WANT_D | (c->moves_any_N ? NB_WANT_N : 0) | (star ? NB_WANT_STAR : 0);
    const float d[3] = {x->x.dh, x->x.dk, x->x.dl};
    float by_d[3], by_N[3] = {0.0f, 0.0f, 0.0f}, by_star[3][3] = {{0.0f}};
    nb_fdual r;
    r.v = nb_lattice_slopes(&c->x.shape, c->x.cube_n, d, want, by_d, by_N, by_star);
    for (int j = 0; j < NB_DUAL_N; j++) {
        float t = by_d[0] * x->dd[0][j] + by_d[1] * x->dd[1][j] + by_d[2] * x->dd[2][j];
        if (c->moves_any_N) t += by_N[0] * fg->dN[0][j] + by_N[1] * fg->dN[1][j] + by_N[2] * fg->dN[2][j];
        if (star)
            for (int v = 0; v < 3; v++)
                t += by_star[v][0] * fg->dstar[v][0][j] + by_star[v][1] * fg->dstar[v][1][j] +
                     by_star[v][2] * fg->dstar[v][2][j];
        r.d[j] = t;
    }
    return r;
}

/* tricubic F by its weights' slopes; the nearest F is piecewise constant */
NB_DUAL_INLINE nb_fdual nb_fgx_structure(nb_fgx_ctx *c, const nb_fgx_idx *x, int accept)
{
    nb_fdual r = nb_fdual_c(nb_fpx_structure(&c->x, &x->x, accept));
    if (c->x.fmode != NB_FMODE_TRICUBIC) return r;
    const nb_fgrid *gr = &c->x.kp->F;
    int base;
    float pos[3], slope[3];
    if (!nb_tricubic_site(gr, x->x.ih, x->x.ik, x->x.il, x->x.dh, x->x.dk, x->x.dl, &base, pos)) return r;
    nb_tricubic_slopes(c->x.fp->Fgrid, base, gr->k_range, gr->l_range, pos, slope);
    for (int j = 0; j < NB_DUAL_N; j++) r.d[j] = slope[0] * x->dd[0][j] + slope[1] * x->dd[1][j] + slope[2] * x->dd[2][j];
    return r;
}

NB_DUAL_INLINE nb_fdual nb_fgx_term(nb_fgx_ctx *c, nb_fdual F_cell, nb_fdual F_latt)
{
    nb_fdual r;
    r.v = nb_fpx_term(&c->x, F_cell.v, F_latt.v);
    const float twice = 2.0f * F_cell.v * F_latt.v;
    for (int j = 0; j < NB_DUAL_N; j++) r.d[j] = twice * (F_latt.v * F_cell.d[j] + F_cell.v * F_latt.d[j]);
    return r;
}

NB_DUAL_INLINE nb_fdual nb_fgx_scale(nb_fgx_ctx *c, nb_fdual I)
{
    nb_fdual r;
    r.v = nb_fpx_scale(&c->x, I.v);
    for (int j = 0; j < NB_DUAL_N; j++) r.d[j] = c->x.scale * I.d[j] + c->fg->dscale[j] * I.v;
    return r;
}

#define PX_FN(name) nb_fgx_##name
#define PX_INLINE NB_DUAL_INLINE
#define PX_REAL nb_fdual
#define PX_SPLAT(x) nb_fdual_c((float)(x))
#define PX_ADD(a, b) nb_fdual_add(a, b)
#define PX_MUL(a, b) nb_fdual_mul(a, b)
#define PX_IS_ZERO(a) PX_IS((a).v == 0.0f)
#include "nb_pixel_scalar.inc"

/* One pixel on the fast path and its derivatives: the value is
 * nb_pixel_fast()'s; d[j] its derivative with respect to parameter j of fg.
 * Adds the pixel's solid angles to *omega_sum; sets *tripped where a
 * tricubic neighbourhood left the grid. */
NB_DUAL_INLINE nb_fdual nb_pixel_fast_grad(const nb_fparams *fp, const nb_fgrad *fg, int fpixel, int spixel,
                                          double *omega_sum, int *tripped)
{
    nb_fgx_ctx c;
    nb_fpx_ctx_init(&c.x, fp, fpixel, spixel, omega_sum, tripped);
    c.fg = fg;
    c.pix2 = (float)(fp->kp.pixel_size * fp->kp.pixel_size);
    c.moves_any_N = c.moves_star = 0;
    for (int v = 0; v < 3; v++)
        for (int j = 0; j < NB_DUAL_N; j++) {
            c.moves_any_N |= fg->dN[v][j] != 0.0f;
            for (int i = 0; i < 3; i++) c.moves_star |= fg->dstar[v][i][j] != 0.0f;
        }
    const nb_pixel_opts general = {0, 0, 0};
    nb_fgx_rules rules = nb_fgx_rules_of(&fp->kp, general);
    for (int j = 0; j < NB_DUAL_N; j++) rules.I0.d[j] = fg->dI_bg[j]; /* the water background follows the fluence */
    return nb_fgx_collect(&c, general, &rules, -1).value;
}

#endif
