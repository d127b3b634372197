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

#include "nb_cli.h"
#include "nb_fit_ds.h"
#include "nb_util.h"

static int in_range(const ds *d, long i)
{
    return !d->o->frame_first || (i + 1 >= d->o->frame_first && i + 1 <= d->o->frame_last);
}

/* Frame i is fitted here: in --frames and this process's. */
static int mine(const ds *d, long i) { return in_range(d, i) && ds_owned(d, i); }

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The shared values' start: the plan's detector, and for a crystal's value
 * the median over the frames' starts (frames of one crystal form). */
static nb_status shared_start(ds *d)
{
    const nb_plan *P = d->start;
    d->zstart[K_DISTANCE] = P->distance * 1e3;
    d->zstart[K_XBEAM] = P->Fbeam * 1e3, d->zstart[K_YBEAM] = P->Sbeam * 1e3;
    d->zstart[K_SCALE] = 1.0;
    double *v = malloc((size_t)d->nframes * sizeof *v);
    if (!v) return nb_error_set(NB_ERR_NOMEM, "out of memory");
    for (int k = K_CELL_A; k <= K_MOSAIC; k++) {
        if (d->L.where_z[k] < 0) continue;
        long n = 0;
        for (long i = 0; i < d->nframes; i++) {
            double val[K_COUNT];
            if (!in_range(d, i)) continue;
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
    observed ob;
    memset(&ob, 0, sizeof ob);
    const long slot = d->o->frame_first ? fr->index - (d->o->frame_first - 1) : fr->index;
    nb_status st = nb_fit_observed_read(d->o->observed[slot], d->o, d->start, fr->index, &ob);
    if (!st) st = nb_fit_leave_out_unrendered(d->start, d->hkl, &ob);
    if (!st) st = ds_render(d, fr, fr->p, d->z, 0, 1);
    if (!st) st = ds_regions(d, fr, &ob);
    nb_fit_observed_free(&ob);
    return st;
}

/* Has an accepted step ended the iterations?  When it moved no parameter by
 * a hundredth of its sigma (1 / sqrt of its information: the planes'
 * slopes, which a background of 0 leaves free to creep, are not asked), or
 * gained less than the single-precision model's rounding makes of -log L
 * (a part in 1e7 of it; a sigma's move gains a half). */
static int converged(const double *step, const double *H, int k, double gain, double nll)
{
    int small = 1;
    for (int j = 0; j < k && small; j++) small = fabs(step[j]) * sqrt(fmax(H[j * DS_MAX + j], 0.0)) < 0.01;
    return small || gain < 1e-3 + 2e-7 * fabs(nll);
}

/* Levenberg-Marquardt on frame fr's own values and planes, the shared ones fixed. */
static nb_status frame_fit(ds *d, ds_frame *fr, int loss, int iterations)
{
    const int kp = d->L.kp;
    double *dbg = malloc(3 * (size_t)(fr->nregions + 1) * sizeof *dbg);
    double *bg_t = malloc(3 * (size_t)(fr->nregions + 1) * sizeof *bg_t);
    nb_status st = dbg && bg_t ? NB_OK : nb_error_set(NB_ERR_NOMEM, "out of memory");
    if (!st) st = ds_render(d, fr, fr->p, d->z, 1, 0);
    if (!st) ds_likelihood(d, fr, fr->p, d->z, fr->bg, loss, 1);
    double lambda = 1e-3;
    int it = 0;
    for (; it < iterations && !st; it++) {
        double dp[DS_MAX], p_t[DS_MAX];
        if ((st = ds_frame_step(d, fr, lambda, NULL, dp, dbg))) break;
        for (int j = 0; j < kp; j++) p_t[j] = fr->p[j] + dp[j];
        for (int j = 0; j < 3 * fr->nregions; j++) bg_t[j] = fr->bg[j] + dbg[j];
        ds_planes_project(bg_t, fr->nregions);
        nb_status ts = ds_render(d, fr, p_t, d->z, 0, 0);
        const double nll_t = ts ? INFINITY : ds_likelihood(d, fr, p_t, d->z, bg_t, loss, 0);
        if (!(nll_t < fr->nll)) {
            lambda *= 10.0;
            if (lambda > 1e8) break;
            continue;
        }
        const double gain = fr->nll - nll_t;
        double H[DS_MAX * DS_MAX];
        memcpy(H, fr->H, sizeof H);
        memcpy(fr->p, p_t, sizeof fr->p);
        memcpy(fr->bg, bg_t, 3 * (size_t)fr->nregions * sizeof *bg_t);
        if ((st = ds_render(d, fr, fr->p, d->z, 1, 0))) break;
        ds_likelihood(d, fr, fr->p, d->z, fr->bg, loss, 1);
        lambda = fmax(lambda / 10.0, 1e-9);
        if (converged(dp, H, kp, gain, fr->nll)) break;
    }
    if (!st) {
        char values[512];
        int at = 0;
        for (int j = 0; j < kp && at < (int)sizeof values - 64; j++)
            at += snprintf(values + at, sizeof values - (size_t)at, " %s %.6g", ds_kind_name(d->L.kind[j]), fr->p[j]);
        nb_info("frame %ld: %s %.10g on %zu pixels in %d regions after %d iterations:%s", fr->index + 1,
                loss == NB_FIT_LSQ ? "RSS/2" : "-log L", fr->nll, fr->npix, fr->nregions, it, values);
    }
    free(dbg), free(bg_t);
    return st;
}

/* Stage 3 on every frame of this process: least squares (lsq_first: at
 * most 10 iterations, the way into the Poisson likelihood's basin), then
 * Poisson; the regions predicted again, Poisson again.  A frame whose system is
 * singular is failed (its start kept), not the run. */
static nb_status frames_fit(ds *d, int predict_first, int lsq_first)
{
    nb_status st = NB_OK;
    for (long i = 0; i < d->nframes && !st; i++) {
        ds_frame *fr = &d->fr[i];
        if (!mine(d, i) || fr->failed == DS_FAIL_FIT) continue;
        if (predict_first) st = predict_regions(d, fr);
        if (!st && lsq_first) st = frame_fit(d, fr, NB_FIT_LSQ, d->o->iterations < 10 ? d->o->iterations : 10);
        if (!st && d->o->loss == NB_FIT_POISSON) st = frame_fit(d, fr, NB_FIT_POISSON, d->o->iterations);
        if (!st) st = predict_regions(d, fr);
        if (!st && d->o->loss == NB_FIT_POISSON) st = frame_fit(d, fr, NB_FIT_POISSON, d->o->iterations);
        if (st == NB_ERR_DATA) {
            nb_info("frame %ld: %s", i + 1, nb_error_message());
            fr->failed = DS_FAIL_FIT;
            st = NB_OK;
        }
    }
    return st;
}

/* How much of the verdict a stage judges: before the shared values are
 * refined the deviance is not judged (a shared cell still wrong leaves every
 * frame's pixels off, and the joint stage is what mends it); before the
 * structure factors are, neither are the spots explained (a flat start's
 * spots are not the crystal's): only a frame without spots fails then. */
enum judge { JUDGE_SPOTS, JUDGE_EXPLAINED, JUDGE_ALL };

/* Stage 4: each frame's verdict at its values, as much as `judge` says. */
static nb_status verdicts(ds *d, enum judge judge)
{
    nb_status st = NB_OK;
    for (long i = 0; i < d->nframes && !st; i++) {
        ds_frame *fr = &d->fr[i];
        if (!mine(d, i) || fr->failed == DS_FAIL_FIT) continue;
        if (!(st = ds_render(d, fr, fr->p, d->z, 0, 0))) st = ds_verdict(d, fr);
        if (!st && judge < JUDGE_ALL && fr->failed == DS_FAIL_DEVIANCE) fr->failed = DS_FAIL_NONE;
        if (!st && judge < JUDGE_EXPLAINED && fr->failed == DS_FAIL_UNEXPLAINED) fr->failed = DS_FAIL_NONE;
        if (!st)
            nb_info("frame %ld: deviance ratio %.3f, %d of %d predicted spots explained", i + 1, fr->deviance_ratio,
                    fr->explained_spots, fr->predicted_spots);
    }
    return st;
}

static int joins(const ds *d, long i) { return mine(d, i) && d->fr[i].failed == DS_FAIL_NONE; }

/* The frames' normal equations at their values (for the joint stage): the
 * summed -log L over every process. */
static nb_status joint_equations(ds *d, double *total)
{
    nb_status st = NB_OK;
    *total = 0.0;
    for (long i = 0; i < d->nframes && !st; i++) {
        if (!joins(d, i)) continue;
        if (!(st = ds_render(d, &d->fr[i], d->fr[i].p, d->z, 1, 0)))
            *total += ds_likelihood(d, &d->fr[i], d->fr[i].p, d->z, d->fr[i].bg, NB_FIT_POISSON, 1);
    }
    st = nb_par_agree(d->par, st);
    if (!st) st = nb_par_sum(d->par, total, 1);
    return st;
}

/* The joint step's shared part: dz from the frames' Schur complements. */
static nb_status joint_dz(ds *d, double lambda, double *dz, double *info)
{
    const int kz = d->L.kz;
    double S[DS_MAX * DS_MAX + DS_MAX];
    memset(S, 0, sizeof S);
    nb_status st = NB_OK;
    for (long i = 0; i < d->nframes && !st; i++)
        if (joins(d, i)) st = ds_frame_schur(d, &d->fr[i], lambda, S, S + kz * kz);
    st = nb_par_agree(d->par, st);
    if (!st) st = nb_par_sum(d->par, S, (size_t)(kz * kz + kz));
    if (st) return st;
    double rhs[DS_MAX];
    for (int a = 0; a < kz; a++) rhs[a] = -S[kz * kz + a], info[a] = S[a * kz + a] / (1.0 + lambda);
    if (!nb_fit_solve(kz, S, kz, rhs, dz))
        return nb_error_set(NB_ERR_DATA, "the shared parameters are not independent on these frames (a singular "
                                         "system)");
    return NB_OK;
}

typedef struct trial {
    double p[DS_MAX];
    double *bg;
} trial;

/* Stage 5: Levenberg-Marquardt on the shared values with every passing frame's. */
static nb_status joint_fit(ds *d)
{
    const int kz = d->L.kz;
    trial *t = calloc((size_t)d->nframes, sizeof *t);
    if (!t) return nb_error_set(NB_ERR_NOMEM, "out of memory");
    double total, lambda = 1e-3;
    nb_status st = joint_equations(d, &total);
    for (int it = 0; it < d->o->iterations && !st; it++) {
        double dz[DS_MAX], z_t[DS_MAX], joint_info[DS_MAX], total_t = 0.0;
        if ((st = joint_dz(d, lambda, dz, joint_info))) break;
        for (int j = 0; j < kz; j++) z_t[j] = d->z[j] + dz[j];
        for (long i = 0; i < d->nframes && !st; i++) {
            ds_frame *fr = &d->fr[i];
            if (!joins(d, i)) continue;
            double dp[DS_MAX];
            free(t[i].bg);
            if (!(t[i].bg = malloc(3 * (size_t)(fr->nregions + 1) * sizeof(double))))
                st = nb_error_set(NB_ERR_NOMEM, "out of memory");
            if (!st) st = ds_frame_step(d, fr, lambda, dz, dp, t[i].bg);
            for (int j = 0; j < d->L.kp && !st; j++) t[i].p[j] = fr->p[j] + dp[j];
            for (int j = 0; j < 3 * fr->nregions && !st; j++) t[i].bg[j] += fr->bg[j];
            if (!st) ds_planes_project(t[i].bg, fr->nregions);
            if (!st && !ds_render(d, fr, t[i].p, z_t, 0, 0))
                total_t += ds_likelihood(d, fr, t[i].p, z_t, t[i].bg, NB_FIT_POISSON, 0);
            else if (!st) total_t = INFINITY;
        }
        st = nb_par_agree(d->par, st);
        if (!st) st = nb_par_sum(d->par, &total_t, 1);
        if (st) break;
        if (d->par->rank == 0)
            nb_info("joint iteration %d: -log L = %.12g, trial %.12g, lambda %.1e", it, total, total_t, lambda);
        if (!(total_t < total)) {
            lambda *= 10.0;
            if (lambda > 1e8) break;
            continue;
        }
        const double gain = total - total_t;
        double Hz[DS_MAX * DS_MAX];
        memset(Hz, 0, sizeof Hz);
        for (int a = 0; a < kz; a++) Hz[a * DS_MAX + a] = joint_info[a];
        memcpy(d->z, z_t, sizeof d->z);
        for (long i = 0; i < d->nframes; i++)
            if (joins(d, i)) {
                memcpy(d->fr[i].p, t[i].p, sizeof t[i].p);
                memcpy(d->fr[i].bg, t[i].bg, 3 * (size_t)d->fr[i].nregions * sizeof(double));
            }
        if ((st = joint_equations(d, &total))) break;
        lambda = fmax(lambda / 10.0, 1e-9);
        if (converged(dz, Hz, kz, gain, total)) break;
    }
    for (long i = 0; i < d->nframes; i++) free(t[i].bg);
    free(t);
    return st;
}

/* Stage 6: the structure factors over the frames that pass, then the whole
 * verdict with them; frames it fails are left out and F refined again. */
static nb_status refine_F(ds *d, nb_hkl *refined)
{
    const nb_hkl *start_F = d->hkl;
    nb_status st = NB_OK;
    for (int pass = 0; pass < 2 && !st; pass++) {
        long failed_before = 0, failed_after = 0;
        for (long i = 0; i < d->nframes; i++) failed_before += mine(d, i) && d->fr[i].failed;
        nb_hkl_free(refined);
        nb_hkl_init(refined);
        d->hkl = start_F;
        if ((st = ds_refine_F(d, refined))) break;
        d->hkl = refined; /* the verdict's model is the refined F's */
        st = nb_par_agree(d->par, verdicts(d, JUDGE_ALL));
        for (long i = 0; i < d->nframes; i++) failed_after += mine(d, i) && d->fr[i].failed;
        double more = (double)(failed_after - failed_before);
        if (!st) st = nb_par_sum(d->par, &more, 1);
        if (!st && !(more > 0)) break;
    }
    d->hkl = start_F;
    return st;
}

/* ---- the run ------------------------------------------------------------------- */

static nb_status ds_open(ds *d, const nb_plan *start, const nb_hkl *hkl, const fit_opts *o, nb_engine *engine,
                         const nb_par *par)
{
    memset(d, 0, sizeof *d);
    d->start = start, d->hkl = hkl, d->o = o, d->engine = engine, d->par = par;
    d->nframes = start->nframes;
    d->path = o->precision_given && o->precision ? NB_GRAD_DOUBLE : NB_GRAD_FAST;
    d->total_pixels = nb_plan_total_pixels(start);
    nb_status st = ds_layout_parse(o->refine, o->refine_frame, o->refine_F, &d->L);
    if (st) return st;
    if (start->stills.on && start->stills.spikes > 0)
        return nb_error_set(NB_ERR_UNSUPPORTED, "fitting stills with a per-shot spectrum (-stills_bandwidth) is not "
                                                "supported");
    if (o->residual)
        return nb_error_set(NB_ERR_USAGE, "option --residual: a dataset fit writes no residual image (it compares "
                                          "the spots' regions alone); render the refined plan (nb-fit ... | "
                                          "nb-sim) and subtract it (nb-math)");
    if ((d->L.where_p[K_MOSAIC] >= 0 || d->L.where_z[K_MOSAIC] >= 0) && !nb_plan_mosaic_rescalable(start))
        return nb_error_set(NB_ERR_USAGE, "option %s: mosaic: the plan has no mosaic domains to spread (make it "
                                          "with nb-geom -mosaic DEG -mosaic_domains N: the fit scales their angles)",
                            d->L.where_p[K_MOSAIC] >= 0 ? "--refine-frame" : "--refine");
    const long want = o->frame_first ? o->frame_last - o->frame_first + 1 : start->nframes;
    if (o->frame_first && o->frame_last > start->nframes)
        return nb_error_set(NB_ERR_USAGE, "option --frames: the plan has %d frames", start->nframes);
    if (o->nobserved != want)
        return nb_error_set(NB_ERR_USAGE, "%ld frame%s to fit but %d observed image%s given", want,
                            want == 1 ? "" : "s", o->nobserved, o->nobserved == 1 ? "" : "s");
    if ((st = nb_calloc((void **)&d->fr, (size_t)d->nframes, sizeof *d->fr, "the frames")) ||
        (st = nb_calloc((void **)&d->image, d->total_pixels, sizeof *d->image, "the model")) ||
        (st = nb_calloc((void **)&d->masks, (size_t)nb_plan_npanels(start), sizeof *d->masks, "the masks")))
        return st;
    for (int j = 0; j < d->L.kp + d->L.kz && !st; j++)
        st = nb_calloc((void **)&d->grads[j], d->total_pixels, sizeof(float), "the derivatives");
    for (int p = 0; p < nb_plan_npanels(start) && !st; p++) {
        int fp, sp;
        nb_plan_panel_dims(start, p, &fp, &sp, NULL);
        st = nb_calloc((void **)&d->masks[p], (size_t)fp * sp, 1, "the masks");
    }
    for (long i = 0; i < d->nframes && !st; i++) d->fr[i].index = i;
    /* every frame's start on every process (the shared values' medians) */
    for (long i = 0; i < d->nframes && !st; i++) st = ds_frame_start(d, &d->fr[i]);
    if (!st) st = shared_start(d);
    for (long i = 0; i < d->nframes && !st; i++) st = ds_frame_start(d, &d->fr[i]);
    return st;
}

static void ds_close(ds *d)
{
    for (long i = 0; d->fr && i < d->nframes; i++) ds_regions_free(&d->fr[i]);
    free(d->fr);
    free(d->image);
    for (int j = 0; j < DS_MAX; j++) free(d->grads[j]);
    for (int p = 0; d->masks && p < nb_plan_npanels(d->start); p++) free(d->masks[p]);
    free(d->masks);
}

/* What each frame came to, on every process: failed code, the verdict's
 * figures, its values. */
enum { G_FAILED, G_RATIO, G_SPOTS, G_EXPLAINED, G_PIXELS, G_VALUES, G_SIGMAS = G_VALUES + DS_MAX, G_WIDTH = G_SIGMAS + DS_MAX };

static nb_status gather(ds *d, double **out)
{
    double *g;
    nb_status st = nb_calloc((void **)&g, (size_t)d->nframes * G_WIDTH, sizeof *g, "the frames' results");
    if (st) return st;
    for (long i = 0; i < d->nframes; i++) {
        if (!mine(d, i)) continue;
        const ds_frame *fr = &d->fr[i];
        double *row = g + i * G_WIDTH;
        row[G_FAILED] = fr->failed, row[G_RATIO] = fr->deviance_ratio;
        row[G_SPOTS] = fr->predicted_spots, row[G_EXPLAINED] = fr->explained_spots;
        row[G_PIXELS] = (double)fr->npix;
        for (int j = 0; j < d->L.kp; j++) row[G_VALUES + j] = fr->p[j];
        if (fr->failed || ds_frame_sigmas(d, fr, row + G_SIGMAS))
            for (int j = 0; j < d->L.kp; j++) row[G_SIGMAS + j] = 0.0;
    }
    if ((st = nb_par_sum(d->par, g, (size_t)d->nframes * G_WIDTH))) free(g);
    else *out = g;
    return st;
}

/* The refined plan: the start (copied through its record) with the shared
 * detector moved and every fitted frame's crystal; failed frames keep their
 * start, marked. */
static nb_status refined_plan(ds *d, const double *g, nb_plan *out, int *failed)
{
    nb_record rec;
    nb_status st = nb_plan_to_record(d->start, &rec);
    if (!st) st = nb_plan_from_record(&rec, out);
    nb_record_free(&rec);
    if (st) return st;
    double val0[K_COUNT];
    ds_values(d, &d->fr[0], NULL, d->z, val0);
    const nb_panel *p0 = &out->panels[0];
    double shift[3];
    for (int j = 0; j < 3; j++)
        shift[j] = 1e-3 * ((val0[K_DISTANCE] - d->zstart[K_DISTANCE]) * p0->odet[j] -
                           (val0[K_XBEAM] - d->zstart[K_XBEAM]) * p0->fdet[j] -
                           (val0[K_YBEAM] - d->zstart[K_YBEAM]) * p0->sdet[j]);
    for (int p = 0; p < out->npanels; p++)
        for (int j = 0; j < 3; j++) out->panels[p].pix0[j] += shift[j];
    nb_plan_derive_detector(out);
    if (d->space_group_hall[0]) { /* what F was refined in: nb-convert -o fit.expt says so */
        free(out->space_group);
        out->space_group = nb_xstrdup(d->space_group_hall);
    }
    nb_frame_crystal *fc;
    double *mosaic = NULL;
    const int spreads = d->L.where_p[K_MOSAIC] >= 0 || d->L.where_z[K_MOSAIC] >= 0;
    if ((st = nb_calloc((void **)&fc, (size_t)d->nframes, sizeof *fc, "the frames' crystals"))) return st;
    if (spreads && (st = nb_calloc((void **)&mosaic, (size_t)d->nframes, sizeof *mosaic, "the frames' spreads"))) {
        free(fc);
        return st;
    }
    *failed = 0;
    for (long i = 0; i < d->nframes; i++) {
        const ds_frame *fr = &d->fr[i];
        const double *row = g + i * G_WIDTH;
        fc[i] = fr->start;
        if (mosaic) mosaic[i] = fr->mosaic0 * M_PI / 180.0;
        if (!in_range(d, i)) continue;
        if (row[G_FAILED] != DS_FAIL_NONE) {
            fc[i].status = NB_FRAME_FAILED;
            ++*failed;
            continue;
        }
        double val[K_COUNT], abc[3][3];
        ds_values(d, fr, row + G_VALUES, d->z, val);
        ds_crystal(fr, val, abc);
        memcpy(fc[i].a, abc[0], sizeof fc[i].a), memcpy(fc[i].b, abc[1], sizeof fc[i].b);
        memcpy(fc[i].c, abc[2], sizeof fc[i].c);
        fc[i].Na = val[K_NA], fc[i].Nb = val[K_NB], fc[i].Nc = val[K_NC];
        fc[i].fluence = fr->start.fluence * val[K_SCALE];
        fc[i].lambda = val[K_LAMBDA] * 1e-10;
        fc[i].status = 0;
        if (mosaic) mosaic[i] = fabs(val[K_MOSAIC]) * M_PI / 180.0;
    }
    out->stills.on = 0;
    st = nb_plan_set_frame_crystals(out, fc);
    if (!st && mosaic) st = nb_plan_set_frame_mosaic(out, mosaic);
    free(fc);
    free(mosaic);
    return st;
}

/* The shared values' sigmas: the inverse of the frames' summed Schur
 * complements at the end (every process's frames). */
static nb_status shared_sigmas(ds *d, double *sigma)
{
    const int kz = d->L.kz;
    double total, S[DS_MAX * DS_MAX + DS_MAX];
    memset(S, 0, sizeof S);
    nb_status st = joint_equations(d, &total);
    for (long i = 0; i < d->nframes && !st; i++)
        if (joins(d, i)) st = ds_frame_schur(d, &d->fr[i], 0.0, S, S + kz * kz);
    st = nb_par_agree(d->par, st);
    if (!st) st = nb_par_sum(d->par, S, (size_t)(kz * kz + kz));
    for (int j = 0; j < kz && !st; j++) {
        double unit[DS_MAX] = {0}, col[DS_MAX];
        unit[j] = 1.0;
        sigma[j] = nb_fit_solve(kz, S, kz, unit, col) ? sqrt(fabs(col[j])) : NAN;
    }
    return st;
}

/* stderr: the shared values, each frame's failure, a summary. */
static void report(const ds *d, const double *g, const double *zsigma, int failed)
{
    if (d->par->rank != 0 || nb_verbosity() < 0) return;
    for (int j = 0; j < d->L.kz; j++) {
        const int k = d->L.kind[d->L.kp + j];
        fprintf(stderr, "%s = %.10g \u00b1 %.3g%s%s\n", ds_kind_name(k), d->z[j], zsigma[j], ds_kind_unit(k)[0] ? " " : "",
                ds_kind_unit(k));
    }
    long fitted = 0;
    for (long i = 0; i < d->nframes; i++) {
        const double *row = g + i * G_WIDTH;
        if (!in_range(d, i)) continue;
        fitted++;
        if (row[G_FAILED] == DS_FAIL_NONE) {
            if (nb_verbosity() > 0) {
                fprintf(stderr, "frame %ld:", i + 1);
                for (int j = 0; j < d->L.kp; j++)
                    fprintf(stderr, " %s = %.6g \u00b1 %.2g", ds_kind_name(d->L.kind[j]), row[G_VALUES + j],
                            row[G_SIGMAS + j]);
                fprintf(stderr, " (%.0f pixels, deviance ratio %.3f, %.0f of %.0f spots)\n", row[G_PIXELS],
                        row[G_RATIO], row[G_EXPLAINED], row[G_SPOTS]);
            }
            continue;
        }
        char why[256];
        ds_why(d, (int)row[G_FAILED], row[G_RATIO], (int)row[G_SPOTS], (int)row[G_EXPLAINED], why, sizeof why);
        fprintf(stderr, "nb-fit: frame %ld failed: %s; its start is kept\n", i + 1, why);
    }
    fprintf(stderr, "nb-fit: %ld frame%s fitted, %d failed\n", fitted, fitted == 1 ? "" : "s", failed);
}

nb_status nb_fit_dataset(const nb_plan *start, const nb_hkl *hkl, const fit_opts *o, nb_engine *engine,
                         const nb_par *par, nb_plan *out, nb_hkl *refined, int *failed)
{
    ds d;
    double *g = NULL;
    nb_status st = ds_open(&d, start, hkl, o, engine, par);
    for (long i = 0; i < d.nframes && !st; i++)
        if (mine(&d, i)) st = predict_regions(&d, &d.fr[i]);
    st = nb_par_agree(par, st);
    const int turns = d.L.where_p[K_ROT_X] >= 0 || d.L.where_p[K_ROT_Y] >= 0 || d.L.where_p[K_ROT_Z] >= 0;
    const int moves = d.L.where_z[K_DISTANCE] >= 0 || d.L.where_z[K_XBEAM] >= 0 || d.L.where_z[K_YBEAM] >= 0;
    const int global = o->global == NB_FIT_GLOBAL_ON || (o->global == NB_FIT_GLOBAL_AUTO && (turns || moves));
    if (!st && global) st = nb_par_agree(par, ds_global(&d));
    if (!st && d.L.kp + d.L.kz) st = nb_par_agree(par, frames_fit(&d, global, 1));
    const enum judge before_F = o->refine_F ? JUDGE_SPOTS : JUDGE_ALL;
    const enum judge first = o->refine_F ? JUDGE_SPOTS : d.L.kz ? JUDGE_EXPLAINED : JUDGE_ALL;
    if (!st) st = nb_par_agree(par, verdicts(&d, first));
    if (!st && d.L.kz) {
        st = joint_fit(&d);
        if (!st) st = nb_par_agree(par, frames_fit(&d, 0, 0));
        if (!st) st = nb_par_agree(par, verdicts(&d, before_F));
    }
    if (!st && o->refine_F) st = refine_F(&d, refined);
    double zsigma[DS_MAX];
    for (int j = 0; j < DS_MAX; j++) zsigma[j] = NAN;
    if (!st && d.L.kz) st = shared_sigmas(&d, zsigma);
    if (!st) st = gather(&d, &g);
    if (!st) st = refined_plan(&d, g, out, failed);
    if (!st) report(&d, g, zsigma, *failed);
    free(g);
    ds_close(&d);
    return st;
}
