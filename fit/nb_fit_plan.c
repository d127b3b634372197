/* nb_fit_plan.c - the fit of one plan's parameters to observed images in
 * memory (nb_fit_plan.h): the model and its derivatives rendered by the
 * engine, the one likelihood summed over this process's frames and the
 * caller's reduction, the one Levenberg-Marquardt loop, the sigmas. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_fit_plan.h"
#include "nb_lm.h"
#include "nb_params.h"
#include "nb_util.h"

#define MAX_PARAMS NB_FIT_PLAN_MAX

/* The parameters: the names of nb-sim --grad, then (when refined) the scale. */
typedef struct params {
    nb_grad_list names;
    int with_scale;
    int k;                  /* names.n + with_scale */
    double x[MAX_PARAMS];   /* values, in the flags' units; the scale last */
} params;

/* The model of every frame at x: photons per pixel (mu, the scale applied)
 * and, with grads, d mu / d x_j. */
typedef struct model {
    float **image;              /* per frame */
    float **grad[MAX_PARAMS];   /* per parameter, per frame (NULL: not rendered) */
} model;

/* What is fitted to what: the start, its observed frames (this process's
 * have their pixels), how the model is rendered and summed. */
typedef struct problem {
    nb_engine *engine;
    const nb_plan *start;
    const nb_hkl *hkl;
    const nb_fit_observed *obs;
    size_t npix;
    nb_grad_path path;            /* the model's pixel */
    int iterations;
    const nb_fit_reduction *red;  /* never NULL */
} problem;

/* Frame f is this process's to render and sum */
static int own(const problem *pb, long f) { return pb->obs[f].y != NULL; }

/* One panel of a frame, into the panel's place in image (and grads), by the
 * path's pixel. */
static nb_status render_panel(nb_engine *engine, const nb_plan *plan, const nb_hkl *hkl, const nb_grad_plans *gp, nb_grad_path path,
                              long frame, int panel, float *image, float **grads)
{
    nb_plan frame_plan, view;
    nb_source *shot_sources = NULL;
    nb_panel_done done;
    nb_status st = nb_engine_frame(plan, frame, &frame_plan, &shot_sources);
    if (st) return st;
    nb_plan_panel_view(&frame_plan, panel, &view);
    const nb_panel_job job = {path == NB_GRAD_DOUBLE, gp, frame, panel, grads, NULL, NULL, NULL, 0, NULL, NULL};
    st = nb_engine_render_panel(engine, &view, hkl, &job, image, &done);
    nb_panel_done_free(&done);
    free(shot_sources);
    return st;
}

/* A frame, panel after panel (an IMAGE's layout). */
static nb_status render_frame(nb_engine *engine, const nb_plan *plan, const nb_hkl *hkl, const nb_grad_plans *gp, nb_grad_path path,
                              long frame, float *image, float **grads, int ngrads)
{
    nb_status st = NB_OK;
    for (int i = 0; i < nb_plan_npanels(plan) && !st; i++) {
        size_t off;
        float *g[NB_GRAD_MAX_NAMES];
        nb_plan_panel_dims(plan, i, NULL, NULL, &off);
        for (int j = 0; j < ngrads; j++) g[j] = grads[j] ? grads[j] + off : NULL;
        st = render_panel(engine, plan, hkl, gp, path, frame, i, image + off, g);
    }
    return st;
}

nb_status nb_fit_render_frame(nb_engine *engine, const nb_plan *plan, const nb_hkl *hkl, nb_grad_path path, long frame,
                              float *image)
{
    return render_frame(engine, plan, hkl, NULL, path, frame, image, NULL, 0);
}

/* Render this process's frames of the model at p (with their derivatives when grads). */
static nb_status model_eval(const problem *pb, const params *p, int grads, model *m)
{
    nb_grad_plans gp;
    nb_plan at;
    nb_status st = nb_grad_plan_at(pb->start, &p->names, p->x, &at);
    if (st) return st;
    if (grads && (st = nb_grad_plans_build(&at, &p->names, &gp))) {
        nb_plan_free(&at);
        return st;
    }
    for (long f = 0; f < pb->start->nframes && !st; f++) {
        if (!own(pb, f)) continue;
        float *g[NB_GRAD_MAX_NAMES];
        for (int j = 0; j < p->names.n; j++) g[j] = grads ? m->grad[j][f] : NULL;
        st = render_frame(pb->engine, &at, pb->hkl, grads ? &gp : NULL, pb->path, f, m->image[f], g, p->names.n);
    }
    if (grads) nb_grad_plans_free(&gp);
    nb_plan_free(&at);
    return st;
}

typedef struct normal_eq {
    double nll;                       /* -log L (Poisson) or RSS/2 */
    double g[MAX_PARAMS];             /* its gradient */
    double H[MAX_PARAMS][MAX_PARAMS]; /* Fisher information (Gauss-Newton) */
    long n;                           /* pixels used */
} normal_eq;

/* -log L at the model (mu = scale I + a trace of background), and with
 * grads its gradient and Fisher matrix: this process's frames. */
static void likelihood(const problem *pb, const params *p, const model *m, int loss, int grads, normal_eq *e)
{
    const double s = p->with_scale ? p->x[p->k - 1] : 1.0;
    memset(e, 0, sizeof *e);
    double d[MAX_PARAMS];
    for (long f = 0; f < pb->start->nframes; f++)
        for (size_t i = 0; own(pb, f) && i < pb->npix; i++) {
            const nb_fit_observed *ob = &pb->obs[f];
            if (!ob->use[i]) continue;
            const double I = m->image[f][i], y = ob->y[i], mu = s * I + NB_FIT_MU_FLOOR;
            e->n++;
            e->nll += nb_fit_nll(loss, y, mu);
            if (!grads) continue;
            for (int j = 0; j < p->names.n; j++) d[j] = s * m->grad[j][f][i];
            if (p->with_scale) d[p->k - 1] = I;
            const double r = nb_fit_dnll_dmu(loss, y, mu), w = nb_fit_weight(loss, mu);
            for (int a = 0; a < p->k; a++) {
                e->g[a] += r * d[a];
                for (int b = 0; b <= a; b++) e->H[a][b] += w * d[a] * d[b];
            }
        }
    for (int a = 0; a < p->k; a++)
        for (int b = 0; b < a; b++) e->H[b][a] = e->H[a][b];
}

/* Every process's status together, then (with grads) their equations
 * summed: every process takes the same steps.  A single process sums
 * nothing. */
static nb_status equations_sum(const problem *pb, const params *p, nb_status st, int grads, normal_eq *e)
{
    st = nb_fit_agree(pb->red, st);
    if (st || !pb->red->sum) return st;
    const int k = p->k;
    double buf[2 + MAX_PARAMS + MAX_PARAMS * MAX_PARAMS];
    size_t n = 0;
    buf[n++] = e->nll, buf[n++] = (double)e->n;
    for (int a = 0; a < k && grads; a++) buf[n++] = e->g[a];
    for (int a = 0; a < k && grads; a++)
        for (int b = 0; b < k; b++) buf[n++] = e->H[a][b];
    if ((st = nb_fit_sum(pb->red, buf, n))) return st;
    n = 0;
    e->nll = buf[n++], e->n = (long)buf[n++];
    for (int a = 0; a < k && grads; a++) e->g[a] = buf[n++];
    for (int a = 0; a < k && grads; a++)
        for (int b = 0; b < k; b++) e->H[a][b] = buf[n++];
    return NB_OK;
}

/* ---- Levenberg-Marquardt ----------------------------------------------------------- */

/* The model's buffers for this process's frames, and its derivatives' when grads. */
static nb_status model_alloc(const problem *pb, model *m, const params *p, int grads)
{
    const long nframes = pb->start->nframes;
    const size_t npix = pb->npix;
    nb_status st = nb_calloc((void **)&m->image, (size_t)nframes, sizeof *m->image, "the model");
    for (long f = 0; f < nframes && !st; f++)
        if (own(pb, f)) st = nb_calloc((void **)&m->image[f], npix, sizeof(float), "the model");
    for (int j = 0; j < (grads ? p->names.n : 0) && !st; j++) {
        st = nb_calloc((void **)&m->grad[j], (size_t)nframes, sizeof *m->grad[j], "the derivatives");
        for (long f = 0; f < nframes && !st; f++)
            if (own(pb, f)) st = nb_calloc((void **)&m->grad[j][f], npix, sizeof(float), "the derivatives");
    }
    return st;
}

static void model_free(model *m, long nframes)
{
    for (long f = 0; m->image && f < nframes; f++) free(m->image[f]);
    free(m->image);
    for (int j = 0; j < MAX_PARAMS; j++) {
        for (long f = 0; m->grad[j] && f < nframes; f++) free(m->grad[j][f]);
        free(m->grad[j]);
    }
    memset(m, 0, sizeof *m);
}

static const char *param_name(const params *p, int j)
{
    return j < p->names.n ? nb_param_name(&p->names.param[j]) : "scale";
}

/* The step of damping lambda: (H + lambda diag H) dx = -g. */
static nb_status lm_step(const params *p, const normal_eq *e, double lambda, double *dx)
{
    double A[MAX_PARAMS][MAX_PARAMS], b[MAX_PARAMS];
    for (int a = 0; a < p->k; a++) {
        if (!(e->H[a][a] > 0.0))
            return nb_error_set(NB_ERR_DATA, "%s does not change the model on any pixel used: it cannot be refined "
                                             "from these images", param_name(p, a));
        for (int c = 0; c < p->k; c++) A[a][c] = e->H[a][c];
        A[a][a] *= 1.0 + lambda;
        b[a] = -e->g[a];
    }
    if (!nb_fit_solve(p->k, &A[0][0], MAX_PARAMS, b, dx))
        return nb_error_set(NB_ERR_DATA, "the parameters are not independent on these images (a singular system)");
    return NB_OK;
}

/* One plan's refinement as nb_lm_run's state: the values and their
 * normal equations, the trial's values and model. */
typedef struct refinement {
    const problem *pb;
    int loss;
    params *p, next;
    model *m, *trial;
    normal_eq *e;
} refinement;

static nb_status refinement_propose(void *ctx, double lambda, double *predicted)
{
    refinement *r = ctx;
    double dx[MAX_PARAMS];
    nb_status st = lm_step(r->p, r->e, lambda, dx);
    r->next = *r->p;
    for (int j = 0; j < r->p->k && !st; j++) r->next.x[j] = r->p->x[j] + dx[j];
    *predicted = NAN; /* every step is tried */
    return st;
}

static nb_status refinement_evaluate(void *ctx, double *f_trial)
{
    refinement *r = ctx;
    normal_eq te = {.nll = 0};
    nb_status ts = model_eval(r->pb, &r->next, 0, r->trial);
    if (!ts) likelihood(r->pb, &r->next, r->trial, r->loss, 0, &te);
    /* a trial the plan refuses (a negative distance ...) on any process: INFINITY, for every process */
    if (equations_sum(r->pb, &r->next, ts, 0, &te)) return NB_OK;
    *f_trial = te.nll;
    return NB_OK;
}

/* The values and their derivatives' equations at p */
static nb_status refinement_equations(refinement *r)
{
    nb_status st = model_eval(r->pb, r->p, 1, r->m);
    if (!st) likelihood(r->pb, r->p, r->m, r->loss, 1, r->e);
    return equations_sum(r->pb, r->p, st, 1, r->e);
}

static nb_status refinement_accept(void *ctx, double *f)
{
    refinement *r = ctx;
    *r->p = r->next;
    nb_status st = refinement_equations(r);
    *f = r->e->nll;
    return st;
}

static nb_status refinement_reject(void *ctx, int last, double *f)
{
    (void)ctx, (void)last, (void)f;
    return NB_OK; /* the state's equations were not touched */
}

static void refinement_trace(void *ctx, const nb_lm_trace *t)
{
    const refinement *r = ctx;
    if (r->pb->red->rank != 0) return;
    nb_info("%s iteration %d: %s = %.12g on %ld pixels, lambda %.1e", r->loss == NB_FIT_LSQ ? "least-squares" : "Poisson",
            t->iteration, r->loss == NB_FIT_LSQ ? "RSS/2" : "-log L", t->f, r->e->n, t->lambda);
}

/* Iterate from p->x to the least -log L of `loss`; e: the normal equations
 * there.  A step is taken while it gains 1e-10 of -log L (and 1e-9). */
static nb_status refine(const problem *pb, int loss, params *p, model *m, model *trial, normal_eq *e,
                        nb_lm_result *result)
{
    static const nb_lm_ops ops = {.propose = refinement_propose, .evaluate = refinement_evaluate,
                                  .accept = refinement_accept, .reject = refinement_reject, .trace = refinement_trace};
    refinement r = {.pb = pb, .loss = loss, .p = p, .m = m, .trial = trial, .e = e};
    nb_status st = refinement_equations(&r);
    nb_lm_settings s = nb_lm_defaults(pb->iterations, 1e-9, 1e-10);
    s.lambda_max = 1e10;
    if (!st) st = nb_lm_run(&ops, &r, &s, e->nll, result);
    if (!st && pb->red->rank == 0) nb_info("%s: %s = %.12g on %ld pixels", loss == NB_FIT_LSQ ? "least squares" : "Poisson",
                     loss == NB_FIT_LSQ ? "RSS/2" : "-log L", e->nll, e->n);
    return st;
}

/* Sigmas from the inverse Fisher information (least squares: scaled by the
 * residual variance). */
static nb_status sigmas(const params *p, const normal_eq *e, int loss, double *sigma)
{
    double H[MAX_PARAMS][MAX_PARAMS];
    memcpy(H, e->H, sizeof H);
    const double var = loss == NB_FIT_LSQ && e->n > p->k ? 2.0 * e->nll / (double)(e->n - p->k) : 1.0;
    for (int j = 0; j < p->k; j++) {
        double unit[MAX_PARAMS] = {0}, col[MAX_PARAMS];
        unit[j] = 1.0;
        if (!nb_fit_solve(p->k, &H[0][0], MAX_PARAMS, unit, col)) return nb_error_set(NB_ERR_DATA, "the Fisher information is singular");
        sigma[j] = sqrt(fabs(col[j]) * var);
    }
    return NB_OK;
}

/* ---- parameters in, plan out ------------------------------------------------------- */

/* --refine LIST: the names of nb-sim --grad, and 'scale' (anywhere in the list) */
static nb_status params_parse(const char *list, const nb_plan *start, params *p)
{
    memset(p, 0, sizeof *p);
    /* the names but 'scale' into a buffer of their own: sprintf from the
     * tokens into the string they lie in overlaps (undefined; with
     * _FORTIFY_SOURCE, Ubuntu's default, the first name was lost) */
    char *tokens = nb_xstrdup(list), *names = nb_xstrdup(list), *out = names;
    *out = '\0';
    for (char *tok = strtok(tokens, ","); tok; tok = strtok(NULL, ","))
        if (!strcmp(tok, "scale")) p->with_scale = 1;
        else out += sprintf(out, "%s%s", out == names ? "" : ",", tok);
    free(tokens);
    nb_status st = NB_OK;
    if (out == names && !p->with_scale) st = nb_error_set(NB_ERR_USAGE, "option --refine: no names in '%s'", list);
    if (!st && out != names) st = nb_grad_list_parse(names, &p->names);
    free(names);
    if (st) return nb_error_prefix(st, "--refine");
    for (int j = 0; j < p->names.n && p->with_scale; j++)
        if (!strcmp(nb_param_name(&p->names.param[j]), "fluence"))
            st = nb_error_set(NB_ERR_USAGE, "--refine: 'scale' and 'fluence' are one parameter: name one of them");
    if (!st && p->names.n) st = nb_grad_values(start, &p->names, p->x);
    p->k = p->names.n + p->with_scale;
    if (p->with_scale) p->x[p->k - 1] = 1.0;
    return st;
}

/* The refined plan: the names at their values, the scale into the fluence. */
static nb_status refined_plan(const nb_plan *start, const params *p, nb_plan *out)
{
    if (!p->with_scale) return nb_grad_plan_at(start, &p->names, p->x, out);
    nb_grad_list with = {0, NULL};
    double x[MAX_PARAMS];
    nb_status st = nb_grad_list_parse("scale", &with);
    if (st) return st;
    const nb_param scale = with.param[0];
    nb_grad_list_free(&with);
    if ((st = nb_calloc((void **)&with.param, (size_t)p->names.n + 1, sizeof *with.param, "parameters"))) return st;
    for (int j = 0; j < p->names.n; j++) with.param[j] = p->names.param[j], x[j] = p->x[j];
    with.param[p->names.n] = scale;
    x[p->names.n] = p->x[p->k - 1];
    with.n = p->names.n + 1;
    st = nb_grad_plan_at(start, &with, x, out);
    nb_grad_list_free(&with);
    return st;
}

nb_status nb_fit_leave_out_unrendered(const nb_plan *plan, const nb_hkl *hkl, nb_fit_observed *ob)
{
    nb_status st = NB_OK;
    for (int p = 0; p < nb_plan_npanels(plan) && !st; p++) {
        nb_plan view;
        nb_sim_setup setup;
        size_t off;
        nb_plan_panel_view(plan, p, &view);
        nb_plan_panel_dims(plan, p, NULL, NULL, &off);
        if ((st = nb_sim_setup_build(&view, hkl, &setup))) break;
        for (int y = 0; y < view.panels[0].spixels; y++)
            for (int x = 0; x < view.panels[0].fpixels; x++)
                if (!nb_pixel_rendered(&setup.kp, x, y)) ob->use[off + (size_t)y * view.panels[0].fpixels + x] = 0;
        nb_sim_setup_free(&setup);
    }
    return st;
}

/* observed - model photons on the pixels used (0 elsewhere), this process's frames */
static void residuals(const problem *pb, const params *p, const model *m, float **out)
{
    const double s = p->with_scale ? p->x[p->k - 1] : 1.0;
    for (long f = 0; f < pb->start->nframes; f++)
        for (size_t i = 0; own(pb, f) && out[f] && i < pb->npix; i++)
            out[f][i] = pb->obs[f].use[i] ? (float)(pb->obs[f].y[i] - s * m->image[f][i]) : 0.0f;
}

static void result_fill(const params *p, const double *sigma, const normal_eq *e, const nb_lm_result *lm,
                        nb_fit_plan_result *res)
{
    memset(res, 0, sizeof *res);
    res->k = p->k;
    for (int j = 0; j < p->k; j++) {
        snprintf(res->name[j], sizeof res->name[j], "%s", param_name(p, j));
        snprintf(res->unit[j], sizeof res->unit[j], "%s", j < p->names.n ? nb_param_unit(&p->names.param[j]) : "");
        res->value[j] = p->x[j], res->sigma[j] = sigma[j];
    }
    res->nll = e->nll, res->pixels = e->n;
    res->iterations = lm->iterations, res->converged = lm->converged;
}

nb_status nb_fit_plan(nb_engine *engine, const nb_plan *start, const nb_hkl *hkl, const char *refine_list,
                      nb_fit_observed *obs, const nb_fit_plan_settings *s, nb_plan *out, nb_fit_plan_result *res)
{
    params p;
    model m, trial;
    normal_eq e;
    nb_lm_result lm = {0};
    double sigma[MAX_PARAMS];
    memset(&m, 0, sizeof m);
    memset(&trial, 0, sizeof trial);
    const problem pb = {engine, start, hkl, obs, nb_plan_total_pixels(start), s->path, s->iterations,
                        s->red ? s->red : &nb_fit_single_process};
    nb_status st = params_parse(refine_list, start, &p);
    for (long f = 0; f < start->nframes && !st; f++)
        if (own(&pb, f)) st = nb_fit_leave_out_unrendered(start, hkl, &obs[f]);
    if (!st) st = model_alloc(&pb, &m, &p, 1);
    if (!st) st = model_alloc(&pb, &trial, &p, 0);
    st = nb_fit_agree(pb.red, st);
    /* least squares first: far from the optimum the Poisson likelihood has
     * many local minima (a photon where the model has none weighs log 0),
     * the squares one wide basin */
    if (!st) st = refine(&pb, NB_FIT_LSQ, &p, &m, &trial, &e, &lm);
    if (!st && s->loss == NB_FIT_POISSON) st = refine(&pb, NB_FIT_POISSON, &p, &m, &trial, &e, &lm);
    if (!st) st = sigmas(&p, &e, s->loss, sigma);
    if (!st) result_fill(&p, sigma, &e, &lm, res);
    if (!st && s->residual) residuals(&pb, &p, &m, s->residual);
    if (!st) st = refined_plan(start, &p, out);
    model_free(&m, start->nframes);
    model_free(&trial, start->nframes);
    nb_grad_list_free(&p.names);
    return st;
}
