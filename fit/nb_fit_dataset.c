/* nb_fit_dataset.c - nb-fit's dataset fit, its stages in order:
 *   1. each frame's start (its crystal as the plan gives it) and regions
 *      around its spots (nb_fit_roi.c);
 *   2. the global stage from a far start (nb_fit_global.c), then the regions
 *      again around the spots it predicts;
 *   3. each frame's own parameters and planes, the shared ones fixed:
 *      least squares, then Poisson, Levenberg-Marquardt (the regions
 *      predicted once more between);
 *   4. the verdict of each frame (nb_fit_frame.c);
 *   5. the shared parameters with every frame's jointly over the frames that
 *      passed (the frames' parameters and planes eliminated: a sum over
 *      frames of Schur complements, summed over the processes), then 3 and 4
 *      again;
 *   6. the structure factors over the frames that passed (nb_fit_F.c).
 * Frames are split over processes (nb_par.h); what one process finds of its
 * frames is summed into every process's arrays (the others hold zeros), so
 * that any number of processes gives the same sums in the same order. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_fit_ds.h"
#include "nb_fit_ds_integrate.h"
#include "nb_spectra.h"
#include "nb_util.h"
#include "nb_vec.h"



static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The detector's moves per mm of distance, Xbeam and Ybeam: the table's
 * setters on a copy of the start (each a translation of every panel). */
static nb_status detector_axes(ds *d)
{
    static const int kinds[3] = {K_DISTANCE, K_XBEAM, K_YBEAM};
    nb_status st = NB_OK;
    for (int a = 0; a < 3 && !st; a++) {
        nb_param p;
        nb_plan moved;
        if ((st = nb_param_lookup(ds_kind_name(&d->L, kinds[a]), &p)) || (st = nb_param_get(d->start, &p, &d->zstart[kinds[a]])))
            break;
        if ((st = nb_param_plan_copy(d->start, &moved))) break;
        st = nb_param_set(&moved, &p, d->zstart[kinds[a]] + 1.0);
        for (int j = 0; j < 3 && !st; j++) d->det_axis[a][j] = moved.panels[0].pix0[j] - d->start->panels[0].pix0[j];
        nb_param_plan_free(&moved);
    }
    return st;
}

void ds_detector_shift(const ds *d, const double mm[3], double shift[3])
{
    for (int j = 0; j < 3; j++) shift[j] = mm[0] * d->det_axis[0][j] + mm[1] * d->det_axis[1][j] + mm[2] * d->det_axis[2][j];
}

/* The shared values' start: the plan's detector, and for a crystal's value
 * the median over the frames' starts (frames of one crystal form). */
static nb_status shared_start(ds *d)
{
    nb_status st = detector_axes(d);
    if (st) return st;
    d->zstart[K_SCALE] = 1.0;
    double *v = malloc((size_t)d->nframes * sizeof *v);
    if (!v) return nb_error_set(NB_ERR_NOMEM, "out of memory");
    for (int k = K_CELL_A; k <= K_MOSAIC; k++) {
        if (d->L.where_z[k] < 0) continue;
        long n = 0;
        for (long i = 0; i < d->nframes; i++) {
            double val[DS_KINDS];
            if (!ds_in_range(d, i)) continue;
            ds_values(d, &d->fr[i], NULL, NULL, val);
            v[n++] = val[k];
        }
        qsort(v, (size_t)n, sizeof *v, cmp_double);
        d->zstart[k] = n ? v[n / 2] : 0.0;
    }
    free(v);
    for (int j = 0; j < d->L.kz; j++) d->z[j] = d->zstart[d->L.kind[d->L.kp + j]];
    return NB_OK;
}

/* Frame fr's regions at its current values: its observed image read again,
 * the model rendered whole. */
static nb_status predict_regions(ds *d, ds_frame *fr)
{
    nb_fit_observed ob;
    memset(&ob, 0, sizeof ob);
    const long slot = d->o->frame_first ? fr->index - (d->o->frame_first - 1) : fr->index;
    const double t0 = nb_now();
    nb_status st = d->o->observed(d->o->observed_ctx, fr->index, slot, &ob);
    if (!st) st = nb_fit_leave_out_unrendered(d->start, d->hkl, &ob);
    ds_clock(d, T_READ, t0);
    /* with --refine-F, every reflection's spot where a flat F puts it: the
     * regions are the same whatever F the start holds (a start of refined F
     * would leave the weak reflections without pixels to be measured on) */
    const nb_hkl *F = d->hkl;
    if (d->o->refine_F) ds_set_hkl(d, &d->flat);
    if (!st) st = ds_render(d, fr, fr->p, d->z, 0, 1);
    if (d->o->refine_F) ds_set_hkl(d, F);
    if (!st) st = ds_regions(d, fr, &ob);
    free(ob.y), free(ob.use);
    return st;
}

/* What the quadratic model of the frame's -log L (its normal equations,
 * undamped) expects a step to gain: dv on its values and the shared ones
 * (v = [p | z]), dbg on its planes. */
double ds_predicted_gain(const ds *d, const ds_frame *fr, const double *dv, const double *dbg)
{
    const int k = d->L.kp + d->L.kz;
    double lin = 0.0, quad = 0.0;
    for (int a = 0; a < k; a++) {
        lin += fr->g[a] * dv[a];
        for (int c = 0; c < k; c++) quad += dv[a] * fr->H[a * DS_MAX + c] * dv[c];
    }
    for (int r = 0; r < fr->nregions; r++) {
        const double *Hb = fr->Hbb + 9 * r, *Hv = fr->Hbv + 3 * (size_t)k * r, *b = dbg + 3 * r;
        for (int q = 0; q < 3; q++) {
            lin += fr->gb[3 * r + q] * b[q];
            for (int c = 0; c < 3; c++) quad += b[q] * Hb[3 * q + c] * b[c];
            for (int a = 0; a < k; a++) quad += 2.0 * b[q] * Hv[q * k + a] * dv[a];
        }
    }
    return -(lin + 0.5 * quad);
}

/* The iterations end when the next step is expected to gain less than
 * this, or an accepted one gained less: a hundredth per frame fitted (a
 * step of a tenth of a sigma gains 0.005), and what the single-precision
 * model's rounding makes of -log L. */
nb_lm_settings ds_lm_settings(int iterations, long frames)
{
    return nb_lm_defaults(iterations, 0.01 * (double)frames, 1e-8);
}

/* One frame's own values and planes as nb_lm_run's state: the trial's
 * values and planes, and the frame's equations kept while the trial's are
 * computed. */
typedef struct frame_state {
    ds *d;
    ds_frame *fr;
    int loss;
    double p_t[DS_MAX];
    double *bg_t, *dbg;
    ds_ne_saved saved;
} frame_state;

static nb_status frame_propose(void *ctx, double lambda, double *predicted)
{
    frame_state *s = ctx;
    ds_frame *fr = s->fr;
    const int kp = s->d->L.kp;
    double dp[DS_MAX], dv[DS_MAX] = {0};
    const double t0 = nb_now();
    nb_status st = ds_frame_step(s->d, fr, lambda, NULL, dp, s->dbg);
    ds_clock(s->d, T_SOLVE, t0);
    if (st) return st;
    memcpy(dv, dp, (size_t)kp * sizeof *dp);
    for (int j = 0; j < kp; j++) s->p_t[j] = fr->p[j] + dp[j];
    for (int j = 0; j < 3 * fr->nregions; j++) s->bg_t[j] = fr->bg[j] + s->dbg[j];
    ds_planes_project(s->bg_t, fr->nregions);
    /* the gain of the step as taken: the planes as projected */
    for (int j = 0; j < 3 * fr->nregions; j++) s->dbg[j] = s->bg_t[j] - fr->bg[j];
    *predicted = ds_predicted_gain(s->d, fr, dv, s->dbg);
    return NB_OK;
}

static nb_status frame_evaluate(void *ctx, double *f_trial)
{
    frame_state *s = ctx;
    nb_status st = ds_ne_save(s->d, s->fr, &s->saved);
    if (st) return st;
    nb_status ts = ds_render(s->d, s->fr, s->p_t, s->d->z, 1, 0);
    const double t0 = nb_now();
    *f_trial = ts ? INFINITY : ds_likelihood(s->d, s->fr, s->p_t, s->d->z, s->bg_t, s->loss, 1);
    ds_clock(s->d, T_NORMAL, t0);
    return NB_OK;
}

static nb_status frame_accept(void *ctx, double *f)
{
    frame_state *s = ctx;
    memcpy(s->fr->p, s->p_t, sizeof s->fr->p);
    ds_copy(s->fr->bg, s->bg_t, 3 * (size_t)s->fr->nregions * sizeof *s->bg_t);
    (void)f; /* the trial's equations are the frame's (ds_likelihood wrote them) */
    return NB_OK;
}

static nb_status frame_reject(void *ctx, int last, double *f)
{
    frame_state *s = ctx;
    (void)last;
    ds_ne_restore(s->d, s->fr, &s->saved);
    *f = s->fr->nll;
    return NB_OK;
}

/* Levenberg-Marquardt on frame fr's own values and planes, the shared ones
 * fixed; fr->capped when --iterations ended it. */
static nb_status frame_fit(ds *d, ds_frame *fr, int loss, int iterations)
{
    static const nb_lm_ops ops = {.propose = frame_propose, .evaluate = frame_evaluate, .accept = frame_accept,
                                  .reject = frame_reject};
    const int kp = d->L.kp;
    frame_state s = {.d = d, .fr = fr, .loss = loss, .saved = {.cap = 0}};
    s.dbg = malloc(3 * (size_t)(fr->nregions + 1) * sizeof *s.dbg);
    s.bg_t = malloc(3 * (size_t)(fr->nregions + 1) * sizeof *s.bg_t);
    nb_status st = s.dbg && s.bg_t ? NB_OK : nb_error_set(NB_ERR_NOMEM, "out of memory");
    if (!st) st = ds_render(d, fr, fr->p, d->z, 1, 0);
    double t0 = nb_now();
    if (!st) ds_likelihood(d, fr, fr->p, d->z, fr->bg, loss, 1);
    ds_clock(d, T_NORMAL, t0);
    const nb_lm_settings set = ds_lm_settings(iterations, 1);
    nb_lm_result res = {0};
    if (!st) st = nb_lm_run(&ops, &s, &set, fr->nll, &res);
    fr->capped = !st && !res.converged && iterations >= d->o->iterations; /* a stage's own shorter cap is no cap */
    if (!st) {
        char values[512];
        int at = 0;
        for (int j = 0; j < kp && at < (int)sizeof values - 64; j++)
            at += snprintf(values + at, sizeof values - (size_t)at, " %s %.6g", ds_kind_name(&d->L, d->L.kind[j]), fr->p[j]);
        nb_info("frame %ld: %s %.10g on %zu pixels in %d regions after %d iterations%s:%s", fr->index + 1,
                loss == NB_FIT_LSQ ? "RSS/2" : "-log L", fr->nll, fr->npix, fr->nregions, res.iterations,
                fr->capped ? " (the cap)" : "", values);
    }
    free(s.dbg), free(s.bg_t);
    ds_ne_free(&s.saved);
    return st;
}

/* Stage 3 on one frame: least squares (lsq_first: at most 10 iterations,
 * the way into the Poisson likelihood's basin), then Poisson; the regions
 * predicted again, Poisson again.  Before a joint stage (brief) the
 * Poisson passes stop at 5 iterations: the joint stage moves every frame
 * with the shared values, and a frame fitted to convergence against shared
 * values still wrong is fitted again there.  A frame whose system is
 * singular is failed (its start kept), not the run. */
static nb_status frame_pixels(ds *d, ds_frame *fr, int predict_first, int lsq_first, int brief)
{
    const int poisson = d->o->loss == NB_FIT_POISSON;
    const int most = brief && d->o->iterations > 5 ? 5 : d->o->iterations;
    nb_status st = predict_first ? predict_regions(d, fr) : NB_OK;
    if (!st && lsq_first) st = frame_fit(d, fr, NB_FIT_LSQ, d->o->iterations < 10 ? d->o->iterations : 10);
    if (!st && poisson) st = frame_fit(d, fr, NB_FIT_POISSON, most);
    if (!st) st = predict_regions(d, fr);
    if (!st && poisson && !brief) st = frame_fit(d, fr, NB_FIT_POISSON, most);
    if (st == NB_ERR_DATA) {
        nb_info("frame %ld: %s", fr->index + 1, nb_error_message());
        fr->failed = DS_FAIL_FIT;
        st = NB_OK;
    }
    return st;
}

/* Stage 3 on every frame of this process. */
static nb_status frames_fit(ds *d, int predict_first, int lsq_first, int brief)
{
    nb_status st = NB_OK;
    for (long i = 0; i < d->nframes && !st; i++)
        if (ds_mine(d, i) && d->fr[i].failed != DS_FAIL_FIT) st = frame_pixels(d, &d->fr[i], predict_first, lsq_first, brief);
    return st;
}

/* How much of the verdict a stage judges: before the shared values are
 * refined the deviance is not judged (a shared cell still wrong leaves every
 * frame's pixels off, and the joint stage is what mends it); before the
 * structure factors are, neither are the spots explained (a flat start's
 * spots are not the crystal's): only a frame without spots fails then. */
enum judge { JUDGE_SPOTS, JUDGE_EXPLAINED, JUDGE_ALL };

/* Stage 4 on one frame: its verdict at its values, as much as `judge` says. */
static nb_status verdict_one(ds *d, ds_frame *fr, enum judge judge)
{
    nb_status st = ds_render(d, fr, fr->p, d->z, 0, 0);
    if (!st) st = ds_verdict(d, fr);
    if (st) return st;
    if (judge < JUDGE_ALL && fr->failed == DS_FAIL_DEVIANCE) fr->failed = DS_FAIL_NONE;
    if (judge < JUDGE_EXPLAINED && fr->failed == DS_FAIL_UNEXPLAINED) fr->failed = DS_FAIL_NONE;
    nb_info("frame %ld: deviance ratio %.3f, %d of %d predicted spots explained, %d of %d strong observed ones "
            "predicted, the spots' photons correlate %.3f over %d", fr->index + 1, fr->deviance_ratio,
            fr->explained_spots, fr->predicted_spots, fr->strong_predicted, fr->strong_spots, fr->spot_cc, fr->few);
    return NB_OK;
}

/* Stage 4: the verdict of each frame that passes so far (one that failed
 * keeps failing until it is fitted again: the fallback, the second chance). */
static nb_status verdicts(ds *d, enum judge judge)
{
    nb_status st = NB_OK;
    for (long i = 0; i < d->nframes && !st; i++)
        if (ds_joins(d, i)) st = verdict_one(d, &d->fr[i], judge);
    return st;
}

/* The global stage's fallback: a frame it moved whose fit failed (or whose
 * start stood out of chance as well) is fitted again from its start, alone,
 * the shared values as they are; of two passing fits the one of the lower
 * deviance ratio is kept, and the frame fails only when both fail.  The
 * moved fit is kept aside whole (its values, regions and planes). */
static nb_status fallbacks(ds *d, enum judge judge)
{
    nb_status st = NB_OK;
    for (long i = 0; i < d->nframes && !st; i++) {
        ds_frame *fr = &d->fr[i];
        if (!ds_mine(d, i) || !fr->moved || fr->retried || (!fr->failed && !fr->start_plausible)) continue;
        ds_frame moved = *fr;
        ds_regions_detach(fr);
        fr->retried = 1, fr->failed = DS_FAIL_NONE;
        memcpy(fr->p, fr->p_start, sizeof fr->p);
        st = frame_pixels(d, fr, 1, 1, 0);
        if (!st && fr->failed != DS_FAIL_FIT) st = verdict_one(d, fr, judge);
        if (st) {
            ds_regions_free(&moved);
            break;
        }
        const int keep_start = !fr->failed && (moved.failed || fr->deviance_ratio < moved.deviance_ratio);
        nb_info("frame %ld: fitted again from its start: %s (deviance ratio %.3f against %.3f moved%s)", i + 1,
                keep_start ? "kept" : fr->failed && moved.failed ? "both fits failed" : "the move's fit kept",
                fr->deviance_ratio, moved.deviance_ratio,
                moved.failed ? ", which failed" : "");
        if (keep_start) {
            ds_regions_free(&moved);
            fr->moved = 0;
        } else {
            ds_regions_free(fr);
            moved.retried = 1;
            *fr = moved;
        }
    }
    return st;
}

/* A second chance, after the joint stage: a frame that failed while the
 * shared values were still wrong (a detector 10 mm off, a cell 3 % long
 * leave few spots where a frame's search looked for them) is searched and
 * fitted again from its start, at the shared values as the frames that
 * passed refined them; *back: how many pass now, over every process. */
static nb_status second_chance(ds *d, int global, enum judge judge, long *back)
{
    double n = 0.0;
    nb_status st = NB_OK;
    for (long i = 0; i < d->nframes && !st; i++) {
        ds_frame *fr = &d->fr[i];
        if (!ds_mine(d, i) || fr->failed == DS_FAIL_NONE) continue;
        fr->failed = DS_FAIL_NONE;
        memcpy(fr->p, fr->p_start, sizeof fr->p);
        if (global) st = predict_regions(d, fr);
        if (!st && global) st = ds_global_frame(d, fr);
        if (!st) st = frame_pixels(d, fr, 1, 1, 0);
        if (!st && fr->failed != DS_FAIL_FIT) st = verdict_one(d, fr, judge);
        if (!st && !fr->failed) {
            nb_info("frame %ld: fitted again at the shared values refined: it passes", i + 1);
            n++;
        }
    }
    st = ds_agree(d, st);
    if (!st) st = ds_sum(d, &n, 1);
    *back = (long)n;
    return st;
}

/* The settings of each frame's lattice tried (nb_fit_settings.c): a frame
 * that takes another is fitted again from it and judged; *taken: how many,
 * over every process. */
static nb_status settings_stage(ds *d, enum judge judge, long *taken)
{
    unsigned char *switched = calloc((size_t)d->nframes + 1, 1);
    if (!switched) return nb_error_set(NB_ERR_NOMEM, "out of memory");
    nb_status st = ds_agree(d, ds_resolve_settings(d, switched));
    double n = 0.0;
    for (long i = 0; i < d->nframes && !st; i++) {
        ds_frame *fr = &d->fr[i];
        if (!switched[i]) continue;
        n++;
        st = frame_pixels(d, fr, 1, 1, 0);
        if (!st && fr->failed != DS_FAIL_FIT) st = verdict_one(d, fr, judge);
    }
    free(switched);
    st = ds_agree(d, st);
    if (!st) st = ds_sum(d, &n, 1);
    *taken = (long)n;
    return st;
}

int ds_joins(const ds *d, long i) { return ds_mine(d, i) && d->fr[i].failed == DS_FAIL_NONE; }

/* The frames' normal equations at their values (for the joint stage): the
 * summed -log L over every process. */
static nb_status joint_equations(ds *d, double *total)
{
    nb_status st = NB_OK;
    *total = 0.0;
    for (long i = 0; i < d->nframes && !st; i++) {
        if (!ds_joins(d, i)) continue;
        if (!(st = ds_render(d, &d->fr[i], d->fr[i].p, d->z, 1, 0))) {
            const double t0 = nb_now();
            *total += ds_likelihood(d, &d->fr[i], d->fr[i].p, d->z, d->fr[i].bg, NB_FIT_POISSON, 1);
            ds_clock(d, T_NORMAL, t0);
        }
    }
    st = ds_agree(d, st);
    if (!st) st = ds_sum(d, total, 1);
    return st;
}

nb_status ds_drop_singular(ds *d, double lambda, long *dropped)
{
    double n = 0.0;
    for (long i = 0; i < d->nframes; i++) {
        ds_frame *fr = &d->fr[i];
        if (!ds_joins(d, i) || ds_frame_solvable(d, fr, lambda)) continue;
        nb_info("frame %ld: its parameters are not independent on its pixels (a singular system): it leaves the joint "
                "stage", i + 1);
        fr->failed = DS_FAIL_FIT;
        n++;
    }
    nb_status st = ds_sum(d, &n, 1);
    *dropped = (long)n;
    return st;
}

/* The joint step's shared part: dz from the frames' Schur complements. */
nb_status ds_joint_dz(ds *d, double lambda, double *dz)
{
    const int kz = d->L.kz;
    double S[DS_MAX * DS_MAX + DS_MAX];
    memset(S, 0, sizeof S);
    nb_status st = NB_OK;
    for (long i = 0; i < d->nframes && !st; i++)
        if (ds_joins(d, i)) st = ds_frame_schur(d, &d->fr[i], lambda, S, S + kz * kz);
    st = ds_agree(d, st);
    if (!st) st = ds_sum(d, S, (size_t)(kz * kz + kz));
    if (st) return st;
    double rhs[DS_MAX];
    for (int a = 0; a < kz; a++) rhs[a] = -S[kz * kz + a];
    ds_gauge_hold(d, S, rhs);
    if (!nb_fit_solve(kz, S, kz, rhs, dz))
        return nb_error_set(NB_ERR_DATA, "the shared parameters are not independent on these frames (a singular "
                                         "system)");
    return NB_OK;
}

typedef struct trial {
    double p[DS_MAX];
    double *bg;
} trial;

/* The joint stage as nb_lm_run's state: each frame's trial values and
 * planes, the shared ones'. */
typedef struct joint_state {
    ds *d;
    trial *t;
    double z_t[DS_MAX];
} joint_state;

/* Before a step: the frames that cannot take one at lambda leave the stage
 * (their equations no longer in the sums). */
static nb_status joint_prepare(void *ctx, double lambda, double *total)
{
    joint_state *s = ctx;
    long dropped = 0;
    nb_status st = ds_drop_singular(s->d, lambda, &dropped);
    if (!st && dropped) st = joint_equations(s->d, total);
    return st;
}

/* The joint step: the shared values' dz, every passing frame's values and
 * planes by back-substitution; *pred what their normal equations expect it
 * to gain (every process's frames). */
static nb_status joint_propose(void *ctx, double lambda, double *pred)
{
    joint_state *s = ctx;
    ds *d = s->d;
    trial *t = s->t;
    const int kp = d->L.kp, kz = d->L.kz;
    double dz[DS_MAX];
    nb_status st = ds_joint_dz(d, lambda, dz);
    if (st) return st;
    for (int j = 0; j < kz; j++) s->z_t[j] = d->z[j] + dz[j];
    double gain = 0.0;
    for (long i = 0; i < d->nframes && !st; i++) {
        ds_frame *fr = &d->fr[i];
        if (!ds_joins(d, i)) continue;
        double dp[DS_MAX], dv[DS_MAX], *dbg_taken;
        free(t[i].bg);
        t[i].bg = malloc(3 * (size_t)(fr->nregions + 1) * sizeof(double));
        dbg_taken = malloc(3 * (size_t)(fr->nregions + 1) * sizeof(double));
        if (!t[i].bg || !dbg_taken) {
            free(dbg_taken);
            st = nb_error_set(NB_ERR_NOMEM, "out of memory");
            break;
        }
        const double t0 = nb_now();
        st = ds_frame_step(d, fr, lambda, dz, dp, t[i].bg);
        ds_clock(d, T_SOLVE, t0);
        if (st) {
            free(dbg_taken);
            break;
        }
        memcpy(dv, dp, (size_t)kp * sizeof *dv), memcpy(dv + kp, dz, (size_t)kz * sizeof *dv);
        for (int j = 0; j < kp; j++) t[i].p[j] = fr->p[j] + dp[j];
        for (int j = 0; j < 3 * fr->nregions; j++) t[i].bg[j] += fr->bg[j];
        ds_planes_project(t[i].bg, fr->nregions);
        for (int j = 0; j < 3 * fr->nregions; j++) dbg_taken[j] = t[i].bg[j] - fr->bg[j];
        gain += ds_predicted_gain(d, fr, dv, dbg_taken); /* the planes as projected */
        free(dbg_taken);
    }
    st = ds_agree(d, st);
    if (!st) st = ds_sum(d, &gain, 1);
    *pred = gain;
    return st;
}

/* Every passing frame rendered at its trial, with derivatives (their
 * normal equations are the next step's when the trial is taken): the summed
 * -log L. */
static nb_status joint_evaluate(void *ctx, double *total_t)
{
    joint_state *s = ctx;
    ds *d = s->d;
    double total = 0.0;
    for (long i = 0; i < d->nframes; i++) {
        ds_frame *fr = &d->fr[i];
        if (!ds_joins(d, i)) continue;
        if (!ds_render(d, fr, s->t[i].p, s->z_t, 1, 0)) {
            const double t0 = nb_now();
            total += ds_likelihood(d, fr, s->t[i].p, s->z_t, s->t[i].bg, NB_FIT_POISSON, 1);
            ds_clock(d, T_NORMAL, t0);
        } else total = INFINITY;
    }
    nb_status st = ds_agree(d, NB_OK);
    if (!st) st = ds_sum(d, &total, 1);
    *total_t = total;
    return st;
}

static nb_status joint_accept(void *ctx, double *total)
{
    joint_state *s = ctx;
    ds *d = s->d;
    (void)total; /* the trial's equations are the frames' now */
    memcpy(d->z, s->z_t, sizeof d->z);
    for (long i = 0; i < d->nframes; i++)
        if (ds_joins(d, i)) {
            memcpy(d->fr[i].p, s->t[i].p, sizeof s->t[i].p);
            ds_copy(d->fr[i].bg, s->t[i].bg, 3 * (size_t)d->fr[i].nregions * sizeof(double));
        }
    return NB_OK;
}

/* A refused trial renders the frames again where they were: their
 * equations were overwritten by the trial's. */
static nb_status joint_reject(void *ctx, int last, double *total)
{
    joint_state *s = ctx;
    return last ? NB_OK : joint_equations(s->d, total);
}

static void joint_trace(void *ctx, const nb_lm_trace *t)
{
    const joint_state *s = ctx;
    if (ds_rank(s->d) == 0)
        nb_info("joint iteration %d: -log L = %.12g, trial %.12g (expected %.4g less), lambda %.1e", t->iteration, t->f,
                t->f_trial, t->predicted, t->lambda);
}

/* Stage 5: Levenberg-Marquardt on the shared values with every passing
 * frame's. */
static nb_status joint_fit(ds *d)
{
    static const nb_lm_ops ops = {.prepare = joint_prepare, .propose = joint_propose, .evaluate = joint_evaluate,
                                  .accept = joint_accept, .reject = joint_reject, .trace = joint_trace};
    joint_state s = {.d = d, .t = calloc((size_t)d->nframes, sizeof *s.t)};
    if (!s.t) return nb_error_set(NB_ERR_NOMEM, "out of memory");
    double total;
    nb_status st = joint_equations(d, &total);
    const nb_lm_settings set = ds_lm_settings(d->o->iterations, d->nframes + 1);
    nb_lm_result res = {0};
    if (!st) st = nb_lm_run(&ops, &s, &set, total, &res);
    for (long i = 0; i < d->nframes; i++) {
        if (ds_joins(d, i)) d->fr[i].capped = !st && !res.converged;
        free(s.t[i].bg);
    }
    free(s.t);
    return st;
}

/* The shared values' sigmas: the inverse of the frames' summed Schur
 * complements at the end (every process's frames), marginal over every
 * frame's values; their covariance kept (d->Sinv) for the frames' sigmas,
 * marginal over them. */
static nb_status shared_sigmas(ds *d, double *sigma)
{
    const int kz = d->L.kz;
    double total, S[DS_MAX * DS_MAX + DS_MAX];
    memset(S, 0, sizeof S);
    nb_status st = joint_equations(d, &total);
    for (long i = 0; i < d->nframes && !st; i++)
        if (ds_joins(d, i)) st = ds_frame_schur(d, &d->fr[i], 0.0, S, S + kz * kz);
    st = ds_agree(d, st);
    if (!st) st = ds_sum(d, S, (size_t)(kz * kz + kz));
    d->have_Sinv = !st;
    if (!st) ds_gauge_hold(d, S, NULL);
    for (int j = 0; j < kz && !st; j++) {
        double unit[DS_MAX] = {0}, col[DS_MAX];
        unit[j] = 1.0;
        if (!nb_fit_solve(kz, S, kz, unit, col)) {
            sigma[j] = NAN;
            d->have_Sinv = 0;
            continue;
        }
        sigma[j] = sqrt(fabs(col[j]));
        for (int a = 0; a < kz; a++) d->Sinv[a * kz + j] = col[a];
    }
    return st;
}

/* Does the fit refine anything the model's image depends on (beyond the
 * scale, which F's rounds refine with F)? */
static int refines_geometry(const ds *d)
{
    for (int j = 0; j < d->L.kp + d->L.kz; j++)
        if (d->L.kind[j] != K_SCALE) return 1;
    return 0;
}

/* Stage 6: the structure factors over the frames that pass: F's own rounds
 * from the start's (flat) F, then, where the fit refines the image's
 * geometry, everything with F jointly (nb_fit_joint.c); then the whole
 * verdict with them, and F again without the frames it fails.  d->hkl is
 * the refined F after it. */
static nb_status structure_factors(ds *d, nb_hkl *refined)
{
    const nb_hkl *start_F = d->hkl;
    const int geometry = refines_geometry(d);
    nb_status st = NB_OK;
    for (int pass = 0; pass < 2 && !st; pass++) {
        ds_set_hkl(d, start_F);
        nb_hkl_free(refined);
        nb_hkl_init(refined);
        if ((st = ds_refine_F(d, refined, pass > 0))) break;
        ds_set_hkl(d, refined);
        if (geometry && (st = ds_joint_F(d, refined))) break;
        long failed_before = 0, failed_after = 0;
        for (long i = 0; i < d->nframes; i++) failed_before += ds_mine(d, i) && d->fr[i].failed;
        st = ds_agree(d, verdicts(d, JUDGE_ALL));
        for (long i = 0; i < d->nframes; i++) failed_after += ds_mine(d, i) && d->fr[i].failed;
        double more = (double)(failed_after - failed_before);
        if (!st) st = ds_sum(d, &more, 1);
        if (st || !(more > 0)) break;
    }
    return st;
}

/* ---- the run ------------------------------------------------------------------- */

/* The rms of the structure factors the plan gives (its grid's, else its
 * default): a flat F at it predicts spots where F does, on average. */
static double rms_F(const nb_hkl *hkl)
{
    if (!hkl->F) return hkl->default_F;
    const size_t n = (size_t)(hkl->h_max - hkl->h_min + 1) * (hkl->k_max - hkl->k_min + 1) * (hkl->l_max - hkl->l_min + 1);
    double sum = 0.0;
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (hkl->F[i] > 0) sum += hkl->F[i] * hkl->F[i], m++;
    return m ? sqrt(sum / m) : hkl->default_F;
}

static nb_status ds_open(ds *d, const nb_plan *start, const nb_hkl *hkl, const nb_fit_ds_settings *o, nb_engine *engine,
                         const nb_fit_reduction *red)
{
    memset(d, 0, sizeof *d);
    d->start = start, d->hkl = hkl, d->o = o, d->engine = engine, d->red = red ? red : &nb_fit_single_process;
    d->rendered.frame = -1;
    d->nframes = start->nframes;
    d->path = o->precision_given && o->precision ? NB_GRAD_DOUBLE : NB_GRAD_FAST;
    d->total_pixels = nb_plan_total_pixels(start);
    nb_status st = ds_layout_parse(o->refine, o->refine_frame, o->refine_F, &d->L);
    if (st) return st;
    if ((d->L.where_p[K_MOSAIC] >= 0 || d->L.where_z[K_MOSAIC] >= 0) && !nb_plan_mosaic_rescalable(start))
        return nb_error_set(NB_ERR_USAGE, "option %s: mosaic: the plan has no mosaic domains to spread (make it "
                                          "with nb-geom -mosaic DEG -mosaic_domains N: the fit scales their angles)",
                            d->L.where_p[K_MOSAIC] >= 0 ? "--refine-frame" : "--refine");
    const long want = o->frame_first ? o->frame_last - o->frame_first + 1 : start->nframes;
    if (o->frame_first && o->frame_last > start->nframes)
        return nb_error_set(NB_ERR_USAGE, "option --frames: the plan has %d frames", start->nframes);
    if (o->nobserved != want)
        return nb_error_set(NB_ERR_USAGE, "%ld frame%s to fit but %ld observed image%s given", want,
                            want == 1 ? "" : "s", o->nobserved, o->nobserved == 1 ? "" : "s");
    if (o->spots && o->spots->nframes != start->nframes)
        return nb_error_set(NB_ERR_USAGE, "the spots given are for %ld frames, the plan has %d", o->spots->nframes,
                            start->nframes);
    if ((st = nb_calloc((void **)&d->fr, (size_t)d->nframes, sizeof *d->fr, "the frames")) ||
        (st = nb_calloc((void **)&d->image, d->total_pixels, sizeof *d->image, "the model")) ||
        (st = nb_calloc((void **)&d->masks, (size_t)nb_plan_npanels(start), sizeof *d->masks, "the masks")))
        return st;
    if (!st) st = ds_panels_open(d);
    for (int j = 0; j < d->L.kp + d->L.kz && !st; j++) {
        const int kind = d->L.kind[j], axis = ds_panel_kind(kind) ? d->L.pv_axis[kind - K_COUNT] : -1;
        if (axis >= 0 && !d->panel_grads[axis])
            st = nb_calloc((void **)&d->panel_grads[axis], d->total_pixels, sizeof(float), "the derivatives");
        if (axis >= 0) d->grads[j] = d->panel_grads[axis];
        else if (!st) st = nb_calloc((void **)&d->grads[j], d->total_pixels, sizeof(float), "the derivatives");
    }
    for (int p = 0; p < nb_plan_npanels(start) && !st; p++) {
        int fp, sp;
        nb_plan_panel_dims(start, p, &fp, &sp, NULL);
        st = nb_calloc((void **)&d->masks[p], (size_t)fp * sp, 1, "the masks");
    }
    for (long i = 0; i < d->nframes && !st; i++) d->fr[i].index = i;
    nb_hkl_init(&d->flat);
    d->flat.default_F = rms_F(hkl);
    /* every frame's start on every process (the shared values' medians) */
    for (long i = 0; i < d->nframes && !st; i++) st = ds_frame_start(d, &d->fr[i]);
    if (!st) st = shared_start(d);
    for (long i = 0; i < d->nframes && !st; i++) st = ds_frame_start(d, &d->fr[i]);
    for (long i = 0; i < d->nframes && !st; i++) memcpy(d->fr[i].p_start, d->fr[i].p, sizeof d->fr[i].p);
    return st;
}

static void ds_close(ds *d)
{
    ds_F_free(d); /* the frames' reflections with it */
    for (long i = 0; d->fr && i < d->nframes; i++) ds_regions_free(&d->fr[i]);
    free(d->fr);
    free(d->image);
    for (int j = 0; j < d->L.kp + d->L.kz; j++)
        if (!ds_panel_kind(d->L.kind[j])) free(d->grads[j]);
    for (int a = 0; a < PA_COUNT; a++) free(d->panel_grads[a]);
    free(d->panel_end);
    for (int p = 0; d->masks && p < nb_plan_npanels(d->start); p++) free(d->masks[p]);
    free(d->masks);
}

/* The regions of every frame in the joint stage, predicted at its values. */
static nb_status predict_joining(ds *d)
{
    nb_status st = NB_OK;
    for (long i = 0; i < d->nframes && !st; i++)
        if (ds_joins(d, i)) st = predict_regions(d, &d->fr[i]);
    return ds_agree(d, st);
}

nb_status nb_fit_dataset_run(const nb_plan *start, const nb_hkl *hkl, const nb_fit_ds_settings *o, nb_engine *engine,
                         const nb_fit_reduction *red, nb_plan *out, nb_hkl *refined, nb_fit_F_table *F_table,
                         nb_fit_ds_result *res, int *failed)
{
    ds d;
    double *g = NULL;
    const double t_begin = nb_now();
    nb_status st = ds_open(&d, start, hkl, o, engine, red);
    for (long i = 0; i < d.nframes && !st; i++)
        if (ds_mine(&d, i)) st = predict_regions(&d, &d.fr[i]);
    st = ds_agree(&d, st);
    const int turns = d.L.where_p[K_ROT_X] >= 0 || d.L.where_p[K_ROT_Y] >= 0 || d.L.where_p[K_ROT_Z] >= 0;
    const int moves = d.L.where_z[K_DISTANCE] >= 0 || d.L.where_z[K_XBEAM] >= 0 || d.L.where_z[K_YBEAM] >= 0;
    const int global = o->global == NB_FIT_GLOBAL_ON || (o->global == NB_FIT_GLOBAL_AUTO && (turns || moves));
    if (!st && global) st = ds_agree(&d, ds_global(&d));
    if (!st && d.L.kp + d.L.kz) st = ds_agree(&d, frames_fit(&d, global, 1, d.L.kz > 0));
    const enum judge before_F = o->refine_F ? JUDGE_SPOTS : JUDGE_ALL;
    const enum judge first = o->refine_F ? JUDGE_SPOTS : d.L.kz ? JUDGE_EXPLAINED : JUDGE_ALL;
    if (!st) st = ds_agree(&d, verdicts(&d, first));
    if (!st && global) st = ds_agree(&d, fallbacks(&d, first));
    if (!st && d.L.kz) {
        long back = 0;
        st = joint_fit(&d);
        if (!st) st = predict_joining(&d);
        if (!st) st = joint_fit(&d);
        if (!st) st = ds_agree(&d, verdicts(&d, before_F));
        if (!st && global) st = ds_agree(&d, fallbacks(&d, before_F));
        if (!st) st = second_chance(&d, global, before_F, &back);
        if (!st && back) st = joint_fit(&d);
        if (!st && back) st = ds_agree(&d, verdicts(&d, before_F));
    }
    long taken = 0;
    if (!st && d.L.kp) st = settings_stage(&d, before_F, &taken);
    if (!st && taken && d.L.kz) st = joint_fit(&d);
    if (!st && taken && d.L.kz) st = ds_agree(&d, verdicts(&d, before_F));
    if (!st && o->refine_F) st = structure_factors(&d, refined);
    if (!st && o->integrated) st = ds_integrate(&d, o->integrated);
    double zsigma[DS_MAX];
    for (int j = 0; j < DS_MAX; j++) zsigma[j] = NAN;
    if (!st && d.L.kz) st = shared_sigmas(&d, zsigma);
    if (!st) st = ds_gather(&d, &g);
    if (!st) st = ds_refined_plan(&d, g, out, failed);
    if (!st && o->refine_F && F_table && ds_rank(&d) == 0) {
        double cell[6];
        char says[200];
        ds_F_out_cell(&d, g, cell, says, sizeof says);
        st = ds_F_table(&d, cell, says, F_table);
    }
    if (!st && res) st = ds_result(&d, g, zsigma, res);
    if (!st) ds_report(&d, g, zsigma, *failed);
    if (!st) ds_report_clocks(&d, t_begin);
    free(g);
    ds_close(&d);
    return st;
}
