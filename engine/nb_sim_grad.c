/* nb-sim --grad: the derivatives of a rendered image with respect to the
 * plan's named parameters (nb_sim_grad.h says how: the plan's part from the
 * plans the parameter's setter makes around its value, nb_params.c; the
 * pixel's part exact in dual numbers). */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "nb_engine.h"
#include "nb_sim_fast.h"
#include "nb_sim_grad.h"

/* ---- the names ------------------------------------------------------------- */

nb_status nb_grad_list_parse(const char *list, nb_grad_list *out)
{
    memset(out, 0, sizeof *out);
    size_t most = 1;
    for (const char *c = list; *c; c++) most += *c == ',';
    nb_status st = nb_calloc((void **)&out->param, most, sizeof *out->param, "parameter names");
    if (st) return st;
    const char *p = list;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char name[64];
        if (len == 0 || len >= sizeof name) {
            st = nb_error_set(NB_ERR_USAGE, "expected parameter names separated by commas, got '%s'", list);
            break;
        }
        memcpy(name, p, len);
        name[len] = 0;
        if ((st = nb_param_lookup(name, &out->param[out->n]))) break;
        for (int i = 0; i < out->n && !st; i++)
            if (!strcmp(out->param[i].name, name)) st = nb_error_set(NB_ERR_USAGE, "'%s' is named twice", name);
        if (st) break;
        out->n++;
        if (!comma) break;
        p = comma + 1;
    }
    if (st) nb_grad_list_free(out);
    return st;
}

void nb_grad_list_free(nb_grad_list *l)
{
    free(l->param);
    memset(l, 0, sizeof *l);
}

/* ---- the plans around the plan --------------------------------------------- */

nb_status nb_grad_values(const nb_plan *plan, const nb_grad_list *names, double *values)
{
    nb_status st = NB_OK;
    for (int j = 0; j < names->n && !st; j++) st = nb_param_get(plan, &names->param[j], &values[j]);
    return st;
}

/* Set names' values on P, in the table's order (a crystal reshaped before it
 * turns, the detector moved before it rotates: what nb-geom does). */
static nb_status set_in_order(nb_plan *P, const nb_grad_list *names, const double *values)
{
    nb_status st = NB_OK;
    int done[NB_GRAD_MAX_NAMES] = {0};
    for (int k = 0; k < names->n && !st; k++) {
        int next = -1;
        for (int j = 0; j < names->n; j++)
            if (!done[j] && (next < 0 || nb_param_order(&names->param[j]) < nb_param_order(&names->param[next])))
                next = j;
        done[next] = 1;
        st = nb_param_set(P, &names->param[next], values[next]);
    }
    return st;
}

nb_status nb_grad_plan_at(const nb_plan *plan, const nb_grad_list *names, const double *values, nb_plan *out)
{
    if (names->n > NB_GRAD_MAX_NAMES)
        return nb_error_set(NB_ERR_USAGE, "at most %d parameters at once", NB_GRAD_MAX_NAMES);
    nb_status st = nb_plan_copy(plan, out);
    if (!st && (st = set_in_order(out, names, values))) nb_plan_free(out);
    return st;
}

/* The five plans of one name: its value moved by 0, -2h, -h, +h, +2h. */
static nb_status name_plans(const nb_param *p, const nb_plan *plan, double *step, nb_plan out[NB_GRAD_STENCIL])
{
    double v = 0.0;
    nb_status st = nb_param_get(plan, p, &v);
    if (st) return st;
    const double h = nb_param_step(p, v);
    const int offsets[NB_GRAD_STENCIL] = {0, -2, -1, 1, 2};
    *step = h;
    for (int j = 0; j < NB_GRAD_STENCIL && !st; j++)
        if (!(st = nb_param_plan_copy(plan, &out[j])) && (st = nb_param_set(&out[j], p, v + offsets[j] * h)))
            nb_param_plan_free(&out[j]);
    if (st)
        for (int j = 0; j < NB_GRAD_STENCIL; j++) nb_param_plan_free(&out[j]);
    return st;
}

nb_status nb_grad_plans_build(const nb_plan *plan, const nb_grad_list *names, nb_grad_plans *out)
{
    memset(out, 0, sizeof *out);
    nb_status st = NB_OK;
    if (!(st = nb_calloc((void **)&out->names.param, (size_t)names->n + 1, sizeof *out->names.param, "derivatives")) &&
        !(st = nb_calloc((void **)&out->step, (size_t)names->n + 1, sizeof *out->step, "derivatives")))
        st = nb_calloc((void **)&out->plans, (size_t)names->n + 1, sizeof *out->plans, "the derivatives' plans");
    for (int i = 0; i < names->n && !st; i++) {
        out->names.param[i] = names->param[i];
        st = name_plans(&names->param[i], plan, &out->step[i], out->plans[i]);
        if (st) st = nb_error_prefix(st, "derivative of %s", names->param[i].name);
        else out->names.n++;
    }
    if (st) nb_grad_plans_free(out);
    return st;
}

void nb_grad_plans_free(nb_grad_plans *g)
{
    for (int i = 0; g->plans && i < g->names.n; i++)
        for (int j = 0; j < NB_GRAD_STENCIL; j++) nb_param_plan_free(&g->plans[i][j]);
    free(g->plans);
    free(g->step);
    nb_grad_list_free(&g->names);
    memset(g, 0, sizeof *g);
}

/* ---- the kernel inputs and their tangents ----------------------------------- */

/* The fields of nb_kparams that the dual pixel follows (nb_kdual's), and the
 * others, which no name may move: the tables' by their follow column
 * (nb_fields.h), then what nb_sim_setup_build works out. */
#define FOLLOWED(f, n) {#f, offsetof(nb_kparams, f), offsetof(nb_kdual, f), n}
#define TABLE_FOLLOWED(key, kind, m, follow, what) NB_FIELD_IF_FOLLOWED_##follow(FOLLOWED(m, NB_FIELD_COUNT_##kind), )
static const struct followed {
    const char *name;
    size_t kp, kd;
    int n;
} followed[] = {
    NB_PANEL_FIELDS(TABLE_FOLLOWED) NB_PLAN_KERNEL_FIELDS(TABLE_FOLLOWED)
    FOLLOWED(a_star, 3), FOLLOWED(b_star, 3), FOLLOWED(c_star, 3), FOLLOWED(I_bg, 1),
};
#define FIXED(f, n) {#f, offsetof(nb_kparams, f), n}
#define TABLE_FIXED_AS(want, kind, m, follow) \
    NB_FIELD_IF_FIXED_##follow(NB_FIELD_IF_##want##_##kind(FIXED(m, NB_FIELD_COUNT_##kind), ))
#define TABLE_FIXED_DOUBLE(key, kind, m, follow, what) TABLE_FIXED_AS(DOUBLE, kind, m, follow)
#define TABLE_FIXED_INT(key, kind, m, follow, what) TABLE_FIXED_AS(INT, kind, m, follow)
static const struct fixed {
    const char *name;
    size_t kp;
    int n;
} fixed_doubles[] = {
    NB_PANEL_FIELDS(TABLE_FIXED_DOUBLE) NB_PLAN_KERNEL_FIELDS(TABLE_FIXED_DOUBLE)
    FIXED(subpixel_size, 1), FIXED(r_e_sqr, 1), FIXED(steps, 1),
}, fixed_ints[] = {
    NB_PANEL_FIELDS(TABLE_FIXED_INT) NB_PLAN_KERNEL_FIELDS(TABLE_FIXED_INT)
    FIXED(nsources, 1), FIXED(ncells, 1), FIXED(shape, 1), FIXED(interpolate, 1),
};
#define COUNT(a) ((int)(sizeof a / sizeof a[0]))

static const double *kp_doubles(const nb_kparams *kp, size_t off) { return (const double *)((const char *)kp + off); }

/* The followed values of kp in one array (the fixed fields, then the sources'
 * directions and wavelengths, then the cells); its length. */
static size_t flat_len(const nb_kparams *kp)
{
    size_t n = 0;
    for (int i = 0; i < COUNT(followed); i++) n += (size_t)followed[i].n;
    return n + 4 * (size_t)kp->nsources + 9 * (size_t)kp->ncells;
}

static void flat_get(const nb_kparams *kp, double *out)
{
    for (int i = 0; i < COUNT(followed); i++)
        for (int j = 0; j < followed[i].n; j++) *out++ = kp_doubles(kp, followed[i].kp)[j];
    for (int i = 0; i < 3 * kp->nsources; i++) *out++ = kp->src_incident[i];
    for (int i = 0; i < kp->nsources; i++) *out++ = kp->src_lambda[i];
    for (int i = 0; i < 9 * kp->ncells; i++) *out++ = kp->cells[i];
}

/* The name of the followed value at flat index i (for messages). */
static const char *flat_name(const nb_kparams *kp, size_t i)
{
    for (int f = 0; f < COUNT(followed); f++) {
        if (i < (size_t)followed[f].n) return followed[f].name;
        i -= (size_t)followed[f].n;
    }
    if (i < 4 * (size_t)kp->nsources) return "the sources";
    return "the crystal's orientation";
}

/* Does `moved` differ from `base` in a field the derivatives do not follow? */
static const char *fixed_field_moved(const nb_kparams *base, const nb_kparams *moved)
{
    for (int i = 0; i < COUNT(fixed_doubles); i++)
        for (int j = 0; j < fixed_doubles[i].n; j++) {
            double a = kp_doubles(base, fixed_doubles[i].kp)[j], b = kp_doubles(moved, fixed_doubles[i].kp)[j];
            if (fabs(a - b) > 1e-12 * fmax(fabs(a), fabs(b))) return fixed_doubles[i].name;
        }
    for (int i = 0; i < COUNT(fixed_ints); i++)
        if (*(const int *)((const char *)base + fixed_ints[i].kp) !=
            *(const int *)((const char *)moved + fixed_ints[i].kp))
            return fixed_ints[i].name;
    return NULL;
}

/* The kernel inputs of frame/panel of each plan of name i's stencil, as
 * flat arrays of n values (vals[j] for stencil point j). */
static nb_status stencil_values(const nb_grad_plans *g, int i, long frame, int panel, const nb_kparams *base,
                                const nb_hkl *hkl, size_t n, double *vals[NB_GRAD_STENCIL])
{
    const char *name = g->names.param[i].name;
    for (int j = 0; j < NB_GRAD_STENCIL; j++) {
        nb_plan frame_plan, view;
        nb_sim_setup setup;
        nb_source *own;
        /* the frame's own sources (a shot's spectrum), as the image's render
         * has them: the stencil moves every channel with the plan's field */
        nb_status st = nb_engine_frame(&g->plans[i][j], frame, &frame_plan, &own);
        nb_plan_panel_view(&frame_plan, panel, &view);
        if (!st) st = nb_sim_setup_build(&view, hkl, &setup);
        free(own);
        if (st) return nb_error_prefix(st, "derivative of %s", name);
        const char *moved = fixed_field_moved(base, &setup.kp);
        if (!moved && flat_len(&setup.kp) != n) moved = "the sources or the crystal's domains";
        if (!moved) flat_get(&setup.kp, vals[j]);
        nb_sim_setup_free(&setup);
        if (moved)
            return nb_error_set(NB_ERR_USAGE, "derivative of %s: moving it changes %s, which the derivatives do "
                                              "not follow", name, moved);
    }
    return NB_OK;
}

/* The tangents of name i: the five-point central difference of the stencil's
 * values, after checking that the parameter set to its value gives the plan. */
static nb_status name_tangents(const nb_grad_plans *g, int i, int panel, const double *base_vals, size_t n,
                               double *vals[NB_GRAD_STENCIL], const nb_kparams *base, double *tangent)
{
    const nb_param *p = &g->names.param[i];
    for (size_t k = 0; k < n; k++) {
        double a = base_vals[k], b = vals[0][k];
        if (fabs(a - b) > 1e-9 * fmax(fmax(fabs(a), fabs(b)), 1e-300) && fabs(a - b) > 1e-15)
            return nb_error_set(NB_ERR_USAGE, "derivative of %s: the plan with %s set to its own value is not the "
                                              "plan (%s differs)", p->name, p->name, flat_name(base, k));
    }
    const double h = g->step[i];
    int moves = 0;
    for (size_t k = 0; k < n; k++) {
        tangent[k] = (vals[1][k] - 8.0 * vals[2][k] + 8.0 * vals[3][k] - vals[4][k]) / (12.0 * h);
        if (vals[1][k] != vals[4][k]) moves = 1;
    }
    /* another panel's parameter leaves this panel as it is */
    if (!moves && !(nb_param_scope_of(p) == NB_PARAM_PANEL && p->panel != panel))
        return nb_error_set(NB_ERR_USAGE, "derivative of %s: it does not change this plan's image (another "
                                          "setting decides what it would: a still's drawn N or fluence ...)",
                            p->name);
    return NB_OK;
}

/* nb_kdual from the flat values and tangents. */
static nb_status kdual_fill(const nb_kparams *base, const double *val, double *const *tan, int count,
                            nb_kdual_store *out)
{
    size_t n = flat_len(base), k = 0;
    nb_dual *all;
    nb_status st = nb_calloc((void **)&all, n, sizeof *all, "derivative inputs");
    if (st) return st;
    for (size_t i = 0; i < n; i++) {
        all[i] = nb_dual_c(val[i]);
        for (int j = 0; j < count; j++) all[i].d[j] = tan[j][i];
    }
    for (int f = 0; f < COUNT(followed); f++) {
        nb_dual *dst = (nb_dual *)((char *)&out->k + followed[f].kd);
        for (int j = 0; j < followed[f].n; j++) dst[j] = all[k++];
    }
    out->storage = all;
    out->k.src_incident = all + k;
    out->k.src_lambda = all + k + 3 * (size_t)base->nsources;
    out->k.cells = all + k + 4 * (size_t)base->nsources;
    return NB_OK;
}

nb_status nb_grad_kdual_build(const nb_grad_plans *g, int first, int count, long frame, int panel,
                              const nb_kparams *base, const nb_hkl *hkl, nb_kdual_store *out)
{
    memset(out, 0, sizeof *out);
    const size_t n = flat_len(base);
    double *store = NULL;
    /* base values, NB_GRAD_STENCIL stencil arrays, count tangents */
    nb_status st = nb_calloc((void **)&store, n, (size_t)(1 + NB_GRAD_STENCIL + count) * sizeof(double),
                             "derivative stencil");
    if (st) return st;
    double *base_vals = store, *vals[NB_GRAD_STENCIL], *tan[NB_DUAL_N];
    for (int j = 0; j < NB_GRAD_STENCIL; j++) vals[j] = store + n * (size_t)(1 + j);
    for (int j = 0; j < count; j++) tan[j] = store + n * (size_t)(1 + NB_GRAD_STENCIL + j);
    flat_get(base, base_vals);
    for (int j = 0; j < count && !st; j++) {
        st = stencil_values(g, first + j, frame, panel, base, hkl, n, vals);
        if (!st) st = name_tangents(g, first + j, panel, base_vals, n, vals, base, tan[j]);
    }
    if (!st) st = kdual_fill(base, base_vals, tan, count, out);
    free(store);
    return st;
}

void nb_kdual_store_free(nb_kdual_store *s)
{
    free(s->storage);
    memset(s, 0, sizeof *s);
}

/* ---- the render ------------------------------------------------------------ */

/* Row s: its pixels and derivatives, in float and (wide) in double, each
 * where asked; returns the row's solid-angle sum. */
static double grad_row(const nb_kparams *kp, const nb_kdual *k, int nd, int s, float *image, float **grads,
                       const nb_wide_out *wide, int *tripped)
{
    double omega = 0.0;
    for (int f = 0; f < kp->fpixels; f++) {
        if (!nb_pixel_rendered(kp, f, s)) continue;
        int trip = 0;
        nb_dual v = nb_pixel_grad(kp, k, f, s, &omega, &trip);
        *tripped |= trip;
        const size_t at = (size_t)s * kp->fpixels + f;
        if (image) image[at] = (float)v.v;
        for (int j = 0; grads && j < nd; j++) grads[j][at] = (float)v.d[j];
        if (wide && wide->image) wide->image[at] = v.v;
        for (int j = 0; wide && wide->grads && j < nd; j++) wide->grads[j][at] = v.d[j];
    }
    return omega;
}

nb_status nb_render_cpu_grad(const nb_kparams *kp, const nb_kdual *k, int nd, float *image, float **grads,
                             nb_render_result *res, nb_progress *prog)
{
    double *row_omega;
    nb_status st = nb_calloc((void **)&row_omega, (size_t)kp->spixels, sizeof(double), "row sums");
    if (st) return st;
    int tripped = 0;
    double t0 = nb_now();
    const size_t npix = (size_t)kp->fpixels * kp->spixels;
    const nb_wide_out *wide = res->wide;
    if (image) memset(image, 0, npix * sizeof(float));
    for (int j = 0; grads && j < nd; j++) memset(grads[j], 0, npix * sizeof(float));
    if (wide && wide->image) memset(wide->image, 0, npix * sizeof(double));
    for (int j = 0; wide && wide->grads && j < nd; j++) memset(wide->grads[j], 0, npix * sizeof(double));
#pragma omp parallel for schedule(dynamic, 1) reduction(| : tripped)
    for (int s = 0; s < kp->spixels; s++) {
        int trip = 0;
        row_omega[s] = grad_row(kp, k, nd, s, image, grads, wide, &trip);
        tripped |= trip;
        if (prog) nb_progress_add(prog, 1);
    }
    res->omega_sum = 0.0;
    for (int s = 0; s < kp->spixels; s++) res->omega_sum += row_omega[s];
    res->tripped = tripped;
    res->row_stats_filled = 0;
    res->seconds = nb_now() - t0;
    free(row_omega);
    return NB_OK;
}

/* ---- the fast path's tangents ---------------------------------------------- */

/* Does any of the first nd tangents of the n unit vectors' components x
 * move them?  (The stencil's plans are resolved afresh: a direction that
 * stays put can differ in its last bits, tangents of 1e-14.) */
static int moves(const nb_dual *x, size_t n, int nd)
{
    for (size_t i = 0; i < n; i++)
        for (int j = 0; j < nd; j++)
            if (fabs(x[i].d[j]) > 1e-9) return 1;
    return 0;
}

static void tangents_f(const nb_dual *x, int n, float out[][NB_DUAL_N])
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < NB_DUAL_N; j++) out[i][j] = (float)x[i].d[j];
}

/* the most a thread's slow-step slots take (nb_fgrad) */
#define SLOW_SLOTS_BYTES (256u << 10)
/* a thread's scratch apart from others' data: two cache lines (x86's
 * spatial prefetcher fetches lines in pairs) */
#define SCRATCH_ALIGN 128u

/* the threads a fast pass may run on: a thread's scratch each */
static int fgrad_threads(void)
{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

/* The tangent j of A = abc / lambda, component (v, i), of source s and cell c */
static double dA_of(const nb_kparams *kp, const nb_kdual *k, int s, int c, int v, int i, int j)
{
    const double lambda = kp->src_lambda[s], dl = k->src_lambda[s].d[j];
    return k->cells[9 * c + 3 * v + i].d[j] / lambda - kp->cells[9 * c + 3 * v + i] * dl / (lambda * lambda);
}

/* Per pair, the tangents of A.fdet, A.sdet, A.odet and A.pix0 (nb_fgrad's
 * dAaxes): A dX + dA X, in double, from the pairs' A and their tangents dA. */
static void pair_axes_tangents(const nb_fparams *fp, const nb_kdual *k, float *out)
{
    const nb_kparams *kp = &fp->kp;
    const double *axes[4] = {kp->fdet, kp->sdet, kp->odet, kp->pix0};
    const nb_dual *daxes[4] = {k->fdet, k->sdet, k->odet, k->pix0};
    for (int s = 0; s < kp->nsources; s++)
        for (int c = 0; c < kp->ncells; c++) {
            const size_t p = (size_t)s * kp->ncells + c;
            const double *A = fp->pairs[p].A;
            for (int x = 0; x < 4; x++)
                for (int v = 0; v < 3; v++)
                    for (int j = 0; j < NB_DUAL_N; j++) {
                        double d = 0.0;
                        for (int i = 0; i < 3; i++)
                            d += A[3 * v + i] * daxes[x][i].d[j] + dA_of(kp, k, s, c, v, i, j) * axes[x][i];
                        out[((p * 4 + x) * 3 + v) * NB_DUAL_N + j] = (float)d;
                    }
        }
}

/* nb_sim_grad.h */
nb_status nb_fgrad_build(const nb_fparams *fp, const nb_kdual *k, int nd, nb_fgrad *out, float **storage)
{
    const nb_kparams *kp = &fp->kp;
    memset(out, 0, sizeof *out);
    *storage = NULL;
    if (moves(k->src_incident, 3 * (size_t)kp->nsources, nd))
        return nb_error_set(NB_ERR_UNSUPPORTED, "--grad on the fast path: the sources' directions move, which the "
                                                "fast path does not follow; use -precision double");
    out->nd = nd;
    tangents_f(k->fdet, 3, out->dfdet), tangents_f(k->sdet, 3, out->dsdet);
    tangents_f(k->odet, 3, out->dodet), tangents_f(k->pix0, 3, out->dpix0);
    tangents_f(k->a_star, 3, out->dstar[0]), tangents_f(k->b_star, 3, out->dstar[1]);
    tangents_f(k->c_star, 3, out->dstar[2]);
    tangents_f(k->beam, 3, out->dbeam);
    const nb_dual N[3] = {k->Na, k->Nb, k->Nc};
    tangents_f(N, 3, out->dN);
    for (int j = 0; j < NB_DUAL_N; j++) {
        out->dclose[j] = (float)k->close_distance.d[j];
        out->ddistance[j] = (float)k->distance.d[j];
        out->dscale[j] = (float)(kp->r_e_sqr * k->fluence.d[j] / kp->steps);
        out->dI_bg[j] = (float)k->I_bg.d[j];
    }
    const size_t npairs = (size_t)kp->nsources * kp->ncells, threads = (size_t)fgrad_threads();
    const size_t steps = (size_t)kp->thicksteps * kp->oversample;
    /* a slot per slow step while a thread's slots stay small (in cache) */
    out->slow_slots = steps > 1 && steps * npairs * 3 * NB_DUAL_N * sizeof(float) <= SLOW_SLOTS_BYTES ? (int)steps : 1;
    float *dA, *dhi;
    /* Per pair: dA 9, dhi 3, dAaxes 12 (read by every thread); per thread, slot and pair: the slow
     * step's 3, which the thread writes at each slow step.  Each thread's part starts on a
     * block of SCRATCH_ALIGN bytes of its own: 96 bytes a thread (one pair, one slot) shared a
     * cache line with the next thread's and with the read-only tables, and the lines went back
     * and forth between the cores at every group of pixels (the AVX2 product of 4 names at
     * 1024^2 on 2 threads: 5.1 ms, or 8-12 ms when the two threads ran on separate cores). */
    const size_t align = SCRATCH_ALIGN / sizeof(float);
    const size_t tables = npairs * 24 * NB_DUAL_N;
    out->slow_stride = (npairs * 3 * NB_DUAL_N * (size_t)out->slow_slots + align - 1) / align * align;
    nb_status st = nb_calloc((void **)storage, tables + align + (align - 1) + threads * out->slow_stride, sizeof(float),
                             "the pairs' tangents");
    if (st) return st;
    dA = *storage, dhi = *storage + npairs * 9 * NB_DUAL_N;
    out->dAaxes = dhi + npairs * 3 * NB_DUAL_N;
    /* a block past the tables, then the next boundary */
    const uintptr_t after = (uintptr_t)(*storage + tables + align);
    out->slow_scratch = (float *)((after + SCRATCH_ALIGN - 1) / SCRATCH_ALIGN * SCRATCH_ALIGN);
    /* A = abc / lambda per (source, cell); A.i with i the source's direction (fixed) */
    for (int s = 0; s < kp->nsources; s++) {
        const double *inc = kp->src_incident + 3 * s;
        for (int c = 0; c < kp->ncells; c++) {
            const size_t p = (size_t)s * kp->ncells + c;
            for (int j = 0; j < NB_DUAL_N; j++) {
                for (int v = 0; v < 3; v++) {
                    double dhv = 0.0;
                    for (int i = 0; i < 3; i++) {
                        const double d = dA_of(kp, k, s, c, v, i, j);
                        dA[(p * 9 + 3 * v + i) * NB_DUAL_N + j] = (float)d;
                        dhv += d * inc[i];
                    }
                    dhi[(p * 3 + v) * NB_DUAL_N + j] = (float)dhv;
                }
            }
        }
    }
    out->dA = dA, out->dhi = dhi;
    pair_axes_tangents(fp, k, (float *)out->dAaxes);
    return NB_OK;
}

/* The fast path's image and derivatives on the GPU (cuda) or the CPU: the
 * fast parameters and the tangents built here for either.  weights (the CPU
 * only; NULL: the derivative images): in place of grads, their product with
 * the weights added to sums[0 .. nd-1], the rows' sums in row order. */
static nb_status render_fast_grad(const nb_kparams *kp, const nb_kdual *k, int nd, nb_cuda *cuda, float *image,
                                  float **grads, const double *weights, double *sums, nb_render_result *res,
                                  nb_progress *prog)
{
    nb_fparams fp;
    nb_fgrad fg;
    float *storage = NULL;
    double *row_omega = NULL, *row_sums = NULL;
    nb_status st = nb_fparams_build(kp, &fp);
    if (st) return st;
    if (!(st = nb_fgrad_build(&fp, k, nd, &fg, &storage)) && cuda) {
        st = nb_render_cuda_fast_grad(cuda, &fp, &fg, nd, image, grads, res);
    } else if (!st && !(st = nb_calloc((void **)&row_omega, (size_t)kp->spixels, sizeof(double), "row sums")) &&
               !(weights && (st = nb_calloc((void **)&row_sums, (size_t)kp->spixels * nd, sizeof(double),
                                            "the rows' products")))) {
        int tripped = 0;
        double t0 = nb_now();
        fg.weights = weights, fg.row_sums = row_sums;
        nb_pick_fast_grad_kernel()(&fp, &fg, image, grads, row_omega, &tripped, prog);
        res->seconds = nb_now() - t0;
        res->tripped = tripped;
        res->row_stats_filled = 0;
        res->omega_sum = 0.0;
        for (int s = 0; s < kp->spixels; s++) res->omega_sum += row_omega[s];
        for (int s = 0; weights && s < kp->spixels; s++)
            for (int j = 0; j < nd; j++) sums[j] += row_sums[(size_t)s * nd + j];
    }
    free(row_sums);
    free(row_omega);
    free(storage);
    nb_fparams_free(&fp);
    return st;
}

nb_status nb_render_cpu_fast_grad(const nb_kparams *kp, const nb_kdual *k, int nd, float *image, float **grads,
                                  nb_render_result *res, nb_progress *prog)
{
    return render_fast_grad(kp, k, nd, NULL, image, grads, NULL, NULL, res, prog);
}

/* sum of w[p] x g[p] (or wg[p]) over n pixels, in double: fixed blocks
 * added in parallel, their sums then in block order (the same total on any
 * thread count). */
#define VJP_BLOCK 4096
static double weighed_sum(const double *w, const float *g, const double *wg, size_t n, double *block_sums)
{
    const long blocks = (long)((n + VJP_BLOCK - 1) / VJP_BLOCK);
#pragma omp parallel for schedule(static)
    for (long b = 0; b < blocks; b++) {
        const size_t first = (size_t)b * VJP_BLOCK, last = first + VJP_BLOCK < n ? first + VJP_BLOCK : n;
        double sum = 0.0;
        if (wg)
            for (size_t p = first; p < last; p++) sum += w[p] * wg[p];
        else
            for (size_t p = first; p < last; p++) sum += w[p] * (double)g[p];
        block_sums[b] = sum;
    }
    double total = 0.0;
    for (long b = 0; b < blocks; b++) total += block_sums[b];
    return total;
}

/* res->vjp on a path that renders derivative images (the double path, the
 * GPU): into the caller's scratch (floats, or the double path's doubles with
 * res->wide), then weighed. */
static nb_status weigh_grads(const nb_grad_plans *g, nb_grad_path path, long frame, int panel, const nb_kparams *kp,
                             const nb_hkl *hkl, nb_cuda *cuda, float *image, nb_render_result *res, nb_progress *prog)
{
    const nb_vjp_io *vjp = res->vjp;
    const nb_wide_out *wide = res->wide;
    const int nd = g->names.n;
    const size_t npix = (size_t)kp->fpixels * kp->spixels;
    const size_t bytes = npix * (size_t)nd * (wide ? sizeof(double) : sizeof(float));
    nb_status st = NB_OK;
    if (bytes > *vjp->scratch_bytes) {
        free(*vjp->scratch);
        *vjp->scratch = NULL, *vjp->scratch_bytes = 0;
        if (!(st = nb_calloc(vjp->scratch, bytes, 1, "the derivatives of a panel"))) *vjp->scratch_bytes = bytes;
    }
    double *block_sums = NULL;
    if (!st) st = nb_calloc((void **)&block_sums, npix / VJP_BLOCK + 1, sizeof(double), "the product's sums");
    float *fg[NB_GRAD_MAX_NAMES];
    double *wg[NB_GRAD_MAX_NAMES];
    for (int j = 0; !st && j < nd; j++) {
        fg[j] = (float *)*vjp->scratch + (size_t)j * npix;
        wg[j] = (double *)*vjp->scratch + (size_t)j * npix;
    }
    const nb_wide_out wide_grads = {wide ? wide->image : NULL, wg};
    res->vjp = NULL, res->wide = wide ? &wide_grads : NULL;
    if (!st) st = nb_render_grads(g, path, frame, panel, kp, hkl, cuda, image, wide ? NULL : fg, res, prog);
    res->vjp = vjp, res->wide = wide;
    for (int j = 0; !st && j < nd; j++)
        vjp->sums[j] += weighed_sum(vjp->weights, fg[j], wide ? wg[j] : NULL, npix, block_sums);
    free(block_sums);
    return st;
}

/* ---- the fast path's product in one adjoint sweep ---------------------------- */

/* What the adjoint sweep (engine/nb_fast_adjoint.inc) covers: a flat
 * detector without -oversample_* flags.  A curved detector's rotations and
 * the flags' running products are the tangent passes'. */
static int fast_adjoint_supports(const nb_kparams *kp)
{
    return !kp->curved_detector && !kp->oversample_thick && !kp->oversample_polar && !kp->oversample_omega;
}

/* Up to this many names a pass of tangents costs about as much as the
 * sweep (1024^2, 2 threads, medians: 1 name 4.2 against 4.6 ms on AVX-512,
 * 6.7 against 7.4 on AVX2; 4 names 4.4 against 4.7 and 8.3 against 8.3);
 * beyond, the passes add up and the sweep stays (18 names: 55.7 against
 * 4.5 ms, 104 against 6.9). */
#define FAST_ADJOINT_MIN_NAMES 5

/* Whether the CPU's fast product goes by the adjoint sweep: where it covers
 * the plan, from FAST_ADJOINT_MIN_NAMES names, or as NB_VJP says: adjoint
 * (wherever it covers the plan) or tangents (never), to compare the two
 * (docs/physics.md 14.5).  Another value of NB_VJP is an error. */
static nb_status vjp_by_adjoint(const nb_kparams *kp, int names, int *out)
{
    const char *how = getenv("NB_VJP");
    *out = 0;
    if (how && *how && strcmp(how, "adjoint") && strcmp(how, "tangents"))
        return nb_error_set(NB_ERR_USAGE, "NB_VJP=%s: expected adjoint or tangents", how);
    if (!fast_adjoint_supports(kp) || (how && !strcmp(how, "tangents"))) return NB_OK;
    *out = (how && !strcmp(how, "adjoint")) || names >= FAST_ADJOINT_MIN_NAMES;
    return NB_OK;
}

/* The fast path's product with the weights on the CPU, in one sweep: every
 * pass's tangent tables first (NB_DUAL_N names each), then the sweep, whose
 * rows' sums are added in row order (the same on any thread count). */
static nb_status render_fast_adjoint(const nb_grad_plans *g, long frame, int panel, const nb_kparams *kp,
                                     const nb_hkl *hkl, float *image, nb_render_result *res, nb_progress *prog)
{
    enum { MAX_PASSES = (NB_GRAD_MAX_NAMES + NB_DUAL_N - 1) / NB_DUAL_N };
    const int n = g->names.n, npasses = (n + NB_DUAL_N - 1) / NB_DUAL_N;
    nb_fgrad pass[MAX_PASSES];
    float *storage[MAX_PASSES] = {NULL};
    double *row_omega = NULL, *row_sums = NULL;
    const double t0 = nb_now();
    nb_fparams fp;
    nb_status st = nb_fparams_build(kp, &fp);
    if (st) return st;
    for (int q = 0; q < npasses && !st; q++) {
        const int first = q * NB_DUAL_N, count = n - first < NB_DUAL_N ? n - first : NB_DUAL_N;
        nb_kdual_store ks;
        st = nb_grad_kdual_build(g, first, count, frame, panel, kp, hkl, &ks);
        if (!st) st = nb_fgrad_build(&fp, &ks.k, count, &pass[q], &storage[q]);
        nb_kdual_store_free(&ks);
    }
    if (!st) st = nb_calloc((void **)&row_omega, (size_t)kp->spixels, sizeof(double), "row sums");
    if (!st) st = nb_calloc((void **)&row_sums, (size_t)kp->spixels * n, sizeof(double), "the rows' products");
    if (!st) {
        const nb_fadj job = {pass, npasses, n, res->vjp->weights, row_sums};
        int tripped = 0;
        if (nb_pick_fast_adjoint_kernel()(&fp, &job, image, row_omega, &tripped, prog))
            st = nb_error_set(NB_ERR_NOMEM, "out of memory for the adjoint sweep's sums");
        res->tripped = tripped;
        res->row_stats_filled = 0;
        res->omega_sum = 0.0;
        for (int s = 0; !st && s < kp->spixels; s++) res->omega_sum += row_omega[s];
        for (int s = 0; !st && s < kp->spixels; s++)
            for (int j = 0; j < n; j++) res->vjp->sums[j] += row_sums[(size_t)s * n + j];
    }
    res->seconds = nb_now() - t0, res->kernel_seconds = res->transfer_seconds = 0.0;
    free(row_sums);
    free(row_omega);
    for (int q = 0; q < npasses; q++) free(storage[q]);
    nb_fparams_free(&fp);
    return st;
}

/* The names a pass carries: the CPU's fast variant's choice for flat rows
 * (a curved detector's are in the NB_DUAL_N instantiation alone), else
 * NB_DUAL_N. */
static int names_a_pass(nb_grad_path path, const nb_kparams *kp, const nb_cuda *cuda)
{
    return path == NB_GRAD_FAST && !cuda && !kp->curved_detector ? nb_fast_grad_names_a_pass() : NB_DUAL_N;
}

nb_status nb_render_grads(const nb_grad_plans *g, nb_grad_path path, long frame, int panel, const nb_kparams *kp,
                          const nb_hkl *hkl, nb_cuda *cuda, float *image, float **grads, nb_render_result *res,
                          nb_progress *prog)
{
    const nb_wide_out *wide = res->wide;
    if (wide && (path == NB_GRAD_FAST || cuda))
        return nb_error_set(NB_ERR_UNSUPPORTED, "pixels in double come from the double path on the CPU, not the %s",
                            cuda ? "GPU" : "fast path");
    if (res->vjp && (path != NB_GRAD_FAST || cuda)) /* the CPU's fast rows weigh as they go; others so */
        return weigh_grads(g, path, frame, panel, kp, hkl, cuda, image, res, prog);
    nb_status st = NB_OK;
    int by_adjoint = 0;
    if (res->vjp && !wide && path == NB_GRAD_FAST && !cuda && (st = vjp_by_adjoint(kp, g->names.n, &by_adjoint)))
        return st;
    if (by_adjoint) return render_fast_adjoint(g, frame, panel, kp, hkl, image, res, prog);
    const int n = g->names.n;
    double seconds = 0.0, kernel_seconds = 0.0, transfer_seconds = 0.0; /* over the passes */
    const int per_pass = names_a_pass(path, kp, cuda);
    for (int first = 0; first < n && !st; first += per_pass) {
        const int count = n - first < per_pass ? n - first : per_pass;
        float *pass_image = first == 0 ? image : NULL; /* the image once, with the first pass */
        nb_wide_out pass_wide = {NULL, NULL};
        if (wide) pass_wide.image = first == 0 ? wide->image : NULL, pass_wide.grads = wide->grads ? wide->grads + first : NULL;
        res->wide = wide ? &pass_wide : NULL;
        nb_kdual_store ks;
        st = nb_grad_kdual_build(g, first, count, frame, panel, kp, hkl, &ks);
        nb_progress *pass_prog = first ? NULL : prog;
        if (!st && path == NB_GRAD_FAST)
            st = render_fast_grad(kp, &ks.k, count, cuda, pass_image, grads ? grads + first : NULL,
                                  res->vjp ? res->vjp->weights : NULL, res->vjp ? res->vjp->sums + first : NULL, res,
                                  pass_prog);
        else if (!st && cuda) st = nb_render_cuda_grad(cuda, kp, &ks.k, count, pass_image, grads + first, res);
        else if (!st) st = nb_render_cpu_grad(kp, &ks.k, count, pass_image, grads ? grads + first : NULL, res, pass_prog);
        nb_kdual_store_free(&ks);
        seconds += res->seconds, kernel_seconds += res->kernel_seconds, transfer_seconds += res->transfer_seconds;
    }
    res->wide = wide;
    res->seconds = seconds, res->kernel_seconds = kernel_seconds, res->transfer_seconds = transfer_seconds;
    return st;
}
