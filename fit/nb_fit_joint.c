/* nb_fit_joint.c - the frames' values, the shared ones and the structure
 * factors refined together (nb-fit --refine-F with --refine-frame or
 * --refine): the stage after F's own rounds (nb_fit_F.c) have taken F from
 * its flat start.
 *
 * Why jointly: a still's spot is a partial reflection, so its photons fix
 * the product of its F and of where the crystal's orientation puts the
 * reflection against the Ewald sphere; a reflection seen on few stills has
 * its F and the stills' orientations nearly one unknown.  Refining them in
 * turn (F with the orientations fixed, then the orientations with F
 * fixed) moves along that valley by a fraction of the way each turn, and the
 * sigmas of one set with the other fixed are too small by as much.  Here
 * every step is the Gauss-Newton step of the whole problem with the
 * frames' coupling through shared reflections left out of the matrix (a
 * block-Jacobi preconditioner, which Levenberg-Marquardt's accept-or-refuse
 * keeps honest): each frame's system has its reflections' I eliminated with
 * their information over every frame (nb_fit_frame.c, marginal_over_F),
 * the shared values solve the frames' Schur complements as in the joint
 * stage, each frame's values follow by back-substitution, and each I by
 *   dI = -(g_I + sum over frames of v . dv) / D,
 * D and g_I its information and gradient over every frame.  The trial is
 * rendered with the moved F; it stops when the next step is expected to
 * gain less than a hundredth per frame.  The reported sigmas are then the
 * inverse of those marginal systems (each frame's values over F and its
 * planes; the shared ones over every frame's and F), and F's over the
 * frames' values (D less what each frame's values take of it). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_fit_ds.h"
#include "nb_util.h"

/* Every joining frame rendered with derivatives at (p, z) under F = hkl,
 * its normal equations (and its reflections' couplings); the summed -log L
 * (the prior's term included) and I's information and gradient over every
 * frame into d->Fset. */
static nb_status equations(ds *d, const double (*p)[DS_MAX], double *const *bg, const double *z, const double *I,
                           const nb_hkl *hkl, double *total)
{
    ds_Fset *F = &d->Fset;
    const long n = F->n;
    double *acc = calloc(2 * (size_t)n + 1, sizeof *acc);
    if (!acc) return nb_error_set(NB_ERR_NOMEM, "out of memory");
    ds_set_hkl(d, hkl);
    nb_status st = NB_OK;
    for (long i = 0; i < d->nframes && !st; i++) {
        ds_frame *fr = &d->fr[i];
        if (!ds_joins(d, i)) continue;
        if ((st = ds_render(d, fr, p[i], z, 1, 0))) break;
        const double t0 = nb_now();
        acc[2 * n] += ds_likelihood(d, fr, p[i], z, bg[i], NB_FIT_POISSON, 1);
        ds_clock(d, T_NORMAL, t0);
        const ds_frefl *x = fr->fref;
        for (int sl = 0; x && sl < x->nslots; sl++) acc[x->m[sl]] += x->DI[sl], acc[n + x->m[sl]] += x->gI[sl];
    }
    st = ds_agree(d, st);
    if (!st) st = ds_sum(d, acc, 2 * (size_t)n + 1);
    if (!st) {
        *total = acc[2 * n];
        for (long m = 0; m < n; m++) {
            F->D[m] = acc[m], F->g[m] = acc[n + m] + F->prior[m];
            *total += F->prior[m] * I[m]; /* the Wilson prior, -log of exp(-I/S) */
        }
    }
    free(acc);
    return st;
}

/* The step's I part: dI = -(g + sum over frames of v . dv) / (D (1 + lambda)),
 * and *pred (the whole step's expected gain) with the frames' parts. */
static nb_status step_I(ds *d, double **dv, double **dbg, double lambda, double *dI, double *pred)
{
    const ds_Fset *F = &d->Fset;
    const int k = d->L.kp + d->L.kz;
    double *vd = calloc((size_t)F->n + 1, sizeof *vd);
    if (!vd) return nb_error_set(NB_ERR_NOMEM, "out of memory");
    double frames_gain = 0.0;
    for (long i = 0; i < d->nframes; i++) {
        if (!ds_joins(d, i)) continue;
        const ds_frefl *x = d->fr[i].fref;
        for (int sl = 0; x && sl < x->nslots; sl++) {
            double s = 0.0;
            for (int a = 0; a < k; a++) s += x->v[(size_t)sl * k + a] * dv[i][a];
            vd[x->m[sl]] += s;
        }
        frames_gain += ds_predicted_gain(d, &d->fr[i], dv[i], dbg[i]);
    }
    vd[F->n] = frames_gain;
    nb_status st = ds_sum(d, vd, (size_t)F->n + 1);
    if (st) {
        free(vd);
        return st;
    }
    /* the whole quadratic model's gain: the frames' own, I's, and their coupling */
    double gain = vd[F->n];
    for (long m = 0; m < F->n; m++) {
        dI[m] = F->D[m] > 0 ? -(F->g[m] + vd[m]) / (F->D[m] * (1.0 + lambda)) : 0.0;
        gain -= F->g[m] * dI[m] + 0.5 * F->D[m] * dI[m] * dI[m] + vd[m] * dI[m];
    }
    *pred = gain;
    free(vd);
    return NB_OK;
}

/* The frames' values, planes and shared values of one step. */
typedef struct jstate {
    double (*p)[DS_MAX];
    double **bg;
    double z[DS_MAX];
    double *I;
    nb_hkl hkl;
} jstate;

static void jstate_free(jstate *s, long nframes)
{
    for (long i = 0; s->bg && i < nframes; i++) free(s->bg[i]);
    free(s->p), free(s->bg), free(s->I);
    nb_hkl_free(&s->hkl);
}

static nb_status jstate_alloc(ds *d, jstate *s)
{
    memset(s, 0, sizeof *s);
    nb_hkl_init(&s->hkl);
    s->p = calloc((size_t)d->nframes, sizeof *s->p);
    s->bg = calloc((size_t)d->nframes, sizeof *s->bg);
    s->I = calloc((size_t)d->Fset.n + 1, sizeof *s->I);
    if (!s->p || !s->bg || !s->I) return nb_error_set(NB_ERR_NOMEM, "out of memory");
    for (long i = 0; i < d->nframes; i++)
        if (!(s->bg[i] = calloc(3 * (size_t)d->fr[i].nregions + 3, sizeof(double))))
            return nb_error_set(NB_ERR_NOMEM, "out of memory");
    return NB_OK;
}

/* The trial: every frame's step (dz shared, its own by back-substitution),
 * I's; its values into t (I kept above a tenth of itself, as F's rounds). */
static nb_status trial_step(ds *d, double lambda, jstate *t, double *pred)
{
    const int kp = d->L.kp, kz = d->L.kz;
    double dz[DS_MAX] = {0};
    double **dv = calloc((size_t)d->nframes, sizeof *dv), **dbg = calloc((size_t)d->nframes, sizeof *dbg);
    double *dI = calloc((size_t)d->Fset.n + 1, sizeof *dI);
    nb_status st = dv && dbg && dI ? NB_OK : nb_error_set(NB_ERR_NOMEM, "out of memory");
    d->Fset.lambda = lambda;
    if (!st && kz) st = ds_joint_dz(d, lambda, dz);
    for (long i = 0; i < d->nframes && !st; i++) {
        ds_frame *fr = &d->fr[i];
        if (!ds_joins(d, i)) continue;
        dv[i] = calloc(DS_MAX, sizeof **dv), dbg[i] = calloc(3 * (size_t)fr->nregions + 3, sizeof **dbg);
        if (!dv[i] || !dbg[i]) {
            st = nb_error_set(NB_ERR_NOMEM, "out of memory");
            break;
        }
        double dp[DS_MAX];
        const double t0 = nb_now();
        st = ds_frame_step(d, fr, lambda, kz ? dz : NULL, dp, dbg[i]);
        ds_clock(d, T_SOLVE, t0);
        memcpy(dv[i], dp, (size_t)kp * sizeof *dp), memcpy(dv[i] + kp, dz, (size_t)kz * sizeof *dz);
        for (int j = 0; j < kp; j++) t->p[i][j] = fr->p[j] + dp[j];
        for (int j = 0; j < 3 * fr->nregions; j++) t->bg[i][j] = fr->bg[j] + dbg[i][j];
        ds_planes_project(t->bg[i], fr->nregions);
        for (int j = 0; j < 3 * fr->nregions; j++) dbg[i][j] = t->bg[i][j] - fr->bg[j];
    }
    st = ds_agree(d, st);
    if (!st) st = step_I(d, dv, dbg, lambda, dI, pred);
    for (int j = 0; j < kz; j++) t->z[j] = d->z[j] + dz[j];
    for (long m = 0; m < d->Fset.n && !st; m++) t->I[m] = fmax(d->Fset.I[m] + dI[m], 0.1 * d->Fset.I[m]);
    for (long i = 0; dv && dbg && i < d->nframes; i++) free(dv[i]), free(dbg[i]);
    free(dv), free(dbg), free(dI);
    nb_hkl_free(&t->hkl);
    nb_hkl_init(&t->hkl);
    if (!st) st = ds_F_hkl(d, t->I, &t->hkl);
    return st;
}

/* The state at the frames' values as they are. */
static void current(ds *d, jstate *c)
{
    for (long i = 0; i < d->nframes; i++) {
        memcpy(c->p[i], d->fr[i].p, sizeof c->p[i]);
        ds_copy(c->bg[i], d->fr[i].bg, 3 * (size_t)d->fr[i].nregions * sizeof(double));
    }
    memcpy(c->z, d->z, sizeof c->z);
    ds_copy(c->I, d->Fset.I, (size_t)d->Fset.n * sizeof *c->I);
}

/* The frames' scales to a mean of 1, the I the other way (the product is
 * what the pixels fix: a direction of no information, which the steps,
 * blind to the frames' coupling, would otherwise leave where it drifted). */
static nb_status gauge(ds *d)
{
    const int js = d->L.where_p[K_SCALE];
    if (js < 0) return NB_OK;
    double m[2] = {0, 0};
    for (long i = 0; i < d->nframes; i++)
        if (ds_joins(d, i)) m[0] += d->fr[i].p[js], m[1] += 1;
    nb_status st = ds_sum(d, m, 2);
    if (st || !(m[0] > 0)) return st;
    const double c = m[0] / m[1];
    for (long i = 0; i < d->nframes; i++)
        if (ds_joins(d, i)) d->fr[i].p[js] /= c;
    for (long k = 0; k < d->Fset.n; k++) d->Fset.I[k] *= c;
    return NB_OK;
}

/* What the frames' own values take of each I's information: the sum over
 * the frames of v^T Hr^-1 v, Hr the frame's reduced system with F fixed
 * (each frame alone: the sigma of F marginal over the values of the frames
 * that measured it). */
static nb_status values_share(ds *d)
{
    ds_Fset *F = &d->Fset;
    const int k = d->L.kp;
    memset(F->Dcorr, 0, (size_t)F->n * sizeof *F->Dcorr);
    F->on = 0;
    nb_status st = NB_OK;
    for (long i = 0; i < d->nframes && k; i++) {
        const ds_frame *fr = &d->fr[i];
        const ds_frefl *x = fr->fref;
        double Hr[DS_MAX * DS_MAX], gr[DS_MAX];
        if (!ds_joins(d, i) || !x || ds_frame_reduced(d, fr, Hr, gr)) continue;
        for (int sl = 0; sl < x->nslots; sl++) {
            const double *v = x->v + (size_t)sl * (d->L.kp + d->L.kz);
            double y[DS_MAX];
            if (!nb_fit_solve(k, Hr, DS_MAX, v, y)) continue;
            double q = 0.0;
            for (int a = 0; a < k; a++) q += v[a] * y[a];
            F->Dcorr[x->m[sl]] += q;
        }
    }
    F->on = 1;
    if (!st) st = ds_sum(d, F->Dcorr, (size_t)F->n);
    return st;
}

/* The joint refinement with F as nb_lm_run's state: the state as it is
 * (cur) and the trial (t), each with its I and their HKL. */
typedef struct jF_state {
    ds *d;
    jstate cur, t;
} jF_state;

static nb_status jF_prepare(void *ctx, double lambda, double *total)
{
    jF_state *s = ctx;
    long dropped = 0;
    s->d->Fset.lambda = lambda;
    nb_status st = ds_drop_singular(s->d, lambda, &dropped);
    if (!st && dropped) st = equations(s->d, s->cur.p, s->cur.bg, s->cur.z, s->cur.I, &s->cur.hkl, total);
    return st;
}

static nb_status jF_propose(void *ctx, double lambda, double *pred)
{
    jF_state *s = ctx;
    return trial_step(s->d, lambda, &s->t, pred);
}

static nb_status jF_evaluate(void *ctx, double *total_t)
{
    jF_state *s = ctx;
    return equations(s->d, s->t.p, s->t.bg, s->t.z, s->t.I, &s->t.hkl, total_t);
}

static nb_status jF_accept(void *ctx, double *total)
{
    jF_state *s = ctx;
    ds *d = s->d;
    (void)total; /* the trial's equations are the frames' now */
    for (long i = 0; i < d->nframes; i++)
        if (ds_joins(d, i)) {
            memcpy(d->fr[i].p, s->t.p[i], sizeof s->t.p[i]);
            ds_copy(d->fr[i].bg, s->t.bg[i], 3 * (size_t)d->fr[i].nregions * sizeof(double));
        }
    memcpy(d->z, s->t.z, sizeof d->z);
    ds_copy(d->Fset.I, s->t.I, (size_t)d->Fset.n * sizeof *s->t.I);
    const jstate swap = s->cur;
    s->cur = s->t, s->t = swap;
    return NB_OK;
}

static nb_status jF_reject(void *ctx, int last, double *total)
{
    jF_state *s = ctx;
    return last ? NB_OK : equations(s->d, s->cur.p, s->cur.bg, s->cur.z, s->cur.I, &s->cur.hkl, total);
}

static void jF_trace(void *ctx, const nb_lm_trace *t)
{
    const jF_state *s = ctx;
    if (ds_rank(s->d) == 0)
        nb_info("joint iteration %d with F: -log L = %.12g, trial %.12g (expected %.4g less), lambda %.1e", t->iteration,
                t->f, t->f_trial, t->predicted, t->lambda);
}

nb_status ds_joint_F(ds *d, nb_hkl *refined)
{
    static const nb_lm_ops ops = {.prepare = jF_prepare, .propose = jF_propose, .evaluate = jF_evaluate,
                                  .accept = jF_accept, .reject = jF_reject, .trace = jF_trace};
    jF_state s = {.d = d};
    jstate *const cur = &s.cur;
    nb_status st = jstate_alloc(d, &s.cur);
    if (!st) st = jstate_alloc(d, &s.t);
    double total = 0.0;
    d->Fset.on = 1;
    if (!st) {
        current(d, cur);
        st = ds_F_hkl(d, cur->I, &cur->hkl);
    }
    if (!st) st = equations(d, cur->p, cur->bg, cur->z, cur->I, &cur->hkl, &total);
    const nb_lm_settings set = ds_lm_settings(d->o->iterations, d->nframes + 1);
    nb_lm_result res = {0};
    if (!st) st = nb_lm_run(&ops, &s, &set, total, &res);
    const int it = res.iterations, done = res.converged;
    if (!st && ds_rank(d) == 0)
        nb_info("joint refinement with F: %d iterations%s", it, done ? "" : " (the cap)");
    for (long i = 0; i < d->nframes && !st; i++)
        if (ds_joins(d, i)) d->fr[i].capped = !done;
    /* the scales' gauge, then the equations at the end (the sigmas') */
    if (!st) st = gauge(d);
    if (!st) {
        current(d, cur);
        nb_hkl_free(&cur->hkl);
        nb_hkl_init(&cur->hkl);
        st = ds_F_hkl(d, cur->I, &cur->hkl);
    }
    d->Fset.lambda = 0.0;
    if (!st) st = equations(d, cur->p, cur->bg, cur->z, cur->I, &cur->hkl, &total);
    if (!st) st = values_share(d);
    if (!st) {
        nb_hkl_free(refined);
        *refined = cur->hkl;
        nb_hkl_init(&cur->hkl);
        ds_set_hkl(d, refined);
        ds_F_commit(d);
    }
    jstate_free(&s.cur, d->nframes);
    jstate_free(&s.t, d->nframes);
    return st;
}
