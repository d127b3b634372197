/* nb_fit_output.c - what nb-fit's dataset fit came to: every process's
 * frames' rows gathered, the refined plan (the shared detector or panels
 * moved, every fitted frame's crystal, failed frames marked), the report
 * on standard error and where the time went, and the cell --F-out states. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_fit_ds.h"
#include "nb_spectra.h"
#include "nb_util.h"



nb_status ds_gather(ds *d, double **out)
{
    double *g;
    nb_status st = nb_calloc((void **)&g, (size_t)d->nframes * G_WIDTH, sizeof *g, "the frames' results");
    if (st) return st;
    for (long i = 0; i < d->nframes; i++) {
        if (!ds_mine(d, i)) continue;
        const ds_frame *fr = &d->fr[i];
        double *row = g + i * G_WIDTH;
        row[G_FAILED] = fr->failed, row[G_RATIO] = fr->deviance_ratio;
        row[G_SPOTS] = fr->predicted_spots, row[G_EXPLAINED] = fr->explained_spots, row[G_FEW] = fr->few;
        row[G_STRONG] = fr->strong_spots, row[G_STRONG_PREDICTED] = fr->strong_predicted, row[G_CC] = fr->spot_cc;
        row[G_PIXELS] = (double)fr->npix;
        row[G_CAPPED] = fr->capped;
        row[G_NOSPOTS] = fr->no_spots;
        for (int j = 0; j < d->L.kp; j++) row[G_VALUES + j] = fr->p[j];
        if (fr->failed || ds_frame_sigmas(d, fr, row + G_SIGMAS))
            for (int j = 0; j < d->L.kp; j++) row[G_SIGMAS + j] = 0.0;
    }
    if ((st = ds_sum(d, g, (size_t)d->nframes * G_WIDTH))) free(g);
    else *out = g;
    return st;
}

/* A still's spikes kept by the refined plan (whose frames are frame
 * crystals, no longer draws): as its frames' spectra (nb_spectra.h), each
 * scaled to its frame's refined wavelength. */
static nb_status spikes_as_spectra(const nb_plan *start, nb_plan *out)
{
    int *counts;
    double *all;
    size_t total = 0;
    nb_status st = nb_calloc((void **)&counts, (size_t)start->nframes, sizeof *counts, "the frames' spectra");
    if (st) return st;
    if ((st = nb_calloc((void **)&all, 2 * (size_t)start->nframes * (size_t)start->stills.spikes, sizeof *all,
                        "the frames' spectra"))) {
        free(counts);
        return st;
    }
    for (long f = 0; f < start->nframes && !st; f++) {
        double *pairs;
        if ((st = nb_plan_frame_spectrum_pairs(start, f, &pairs, &counts[f]))) break;
        memcpy(all + 2 * total, pairs, 2 * (size_t)counts[f] * sizeof *pairs);
        total += (size_t)counts[f];
        free(pairs);
    }
    if (!st) st = nb_plan_set_frame_spectra(out, counts, all);
    free(counts);
    free(all);
    return st;
}

/* The refined plan: the start (copied through its record) with the shared
 * detector moved and every fitted frame's crystal; failed frames keep their
 * start, marked. */
nb_status ds_refined_plan(ds *d, const double *g, nb_plan *out, int *failed)
{
    nb_record rec;
    nb_status st = nb_plan_to_record(d->start, &rec);
    if (!st) st = nb_plan_from_record(&rec, out);
    nb_record_free(&rec);
    if (st) return st;
    double val0[DS_KINDS];
    ds_values(d, &d->fr[0], NULL, d->z, val0);
    static const int moves[3] = {K_DISTANCE, K_XBEAM, K_YBEAM};
    for (int a = 0; a < 3 && !st; a++) { /* the table's setters: the headers' beam centre kept in the convention */
        nb_param p;
        if (d->L.where_z[moves[a]] >= 0 && !(st = nb_param_lookup(ds_kind_name(&d->L, moves[a]), &p)))
            st = nb_param_set(out, &p, val0[moves[a]]);
    }
    for (int i = 0; i < out->npanels && d->L.npv && !st; i++) { /* each panel as its values place it */
        nb_panel q;
        ds_panel_at(d, val0, i, &q);
        memcpy(out->panels[i].pix0, q.pix0, sizeof q.pix0);
        memcpy(out->panels[i].fdet, q.fdet, sizeof q.fdet);
        memcpy(out->panels[i].sdet, q.sdet, sizeof q.sdet);
        memcpy(out->panels[i].odet, q.odet, sizeof q.odet);
    }
    if (d->L.npv) nb_plan_derive_detector(out);
    if (st) {
        nb_plan_free(out);
        return st;
    }
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
        if (!ds_in_range(d, i)) continue;
        if (row[G_FAILED] != DS_FAIL_NONE) {
            fc[i].status = NB_FRAME_FAILED;
            ++*failed;
            continue;
        }
        double val[DS_KINDS], abc[3][3];
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
    if (!st && d->start->stills.on && d->start->stills.spikes > 0) st = spikes_as_spectra(d->start, out);
    free(fc);
    free(mosaic);
    return st;
}

/* stderr: the shared values, each frame's failure, a summary. */
void ds_report(const ds *d, const double *g, const double *zsigma, int failed)
{
    if (ds_rank(d) != 0 || nb_verbosity() < 0) return;
    for (int j = 0; j < d->L.kz; j++) {
        const int k = d->L.kind[d->L.kp + j];
        fprintf(stderr, "%s = %.10g \u00b1 %.3g%s%s\n", ds_kind_name(&d->L, k), d->z[j], zsigma[j],
                ds_kind_unit(&d->L, k)[0] ? " " : "", ds_kind_unit(&d->L, k));
    }
    long fitted = 0;
    for (long i = 0; i < d->nframes; i++) {
        const double *row = g + i * G_WIDTH;
        if (!ds_in_range(d, i)) continue;
        fitted++;
        if (row[G_CAPPED] && row[G_FAILED] == DS_FAIL_NONE)
            fprintf(stderr, "nb-fit: frame %ld: stopped at --iterations %d before it converged\n", i + 1,
                    d->o->iterations);
        if (row[G_NOSPOTS] && row[G_FAILED] == DS_FAIL_NONE)
            fprintf(stderr, "nb-fit: frame %ld: no spots, predicted or observed: it adds nothing\n", i + 1);
        if (row[G_FAILED] == DS_FAIL_NONE) {
            if (nb_verbosity() > 0) {
                fprintf(stderr, "frame %ld:", i + 1);
                for (int j = 0; j < d->L.kp; j++)
                    fprintf(stderr, " %s = %.6g \u00b1 %.2g", ds_kind_name(&d->L, d->L.kind[j]), row[G_VALUES + j],
                            row[G_SIGMAS + j]);
                fprintf(stderr, " (%.0f pixels, deviance ratio %.3f, %.0f of %.0f spots)\n", row[G_PIXELS],
                        row[G_RATIO], row[G_EXPLAINED], row[G_SPOTS]);
            }
            continue;
        }
        char why[256];
        ds_row_why(d, row, why, sizeof why);
        fprintf(stderr, "nb-fit: frame %ld failed: %s; its start is kept\n", i + 1, why);
    }
    fprintf(stderr, "nb-fit: %ld frame%s fitted, %d failed\n", fitted, fitted == 1 ? "" : "s", failed);
}

/* -v: where the time went (this process's frames; rank 0 says), and what no
 * clock counts (finding regions, verdicts, the settings' scores, the joint
 * stage's sums, writing): the wall clock since t_begin less the clocks. */
void ds_report_clocks(const ds *d, double t_begin)
{
    static const char *what[T_CLOCKS] = {
        [T_READ] = "reading images", [T_PREDICT] = "renders to predict regions",
        [T_STEP] = "renders of values", [T_GRAD] = "renders with derivatives",
        [T_NORMAL] = "likelihoods and normal equations", [T_SOLVE] = "solves",
        [T_GLOBAL] = "the global stage", [T_F] = "structure factors (their sums)"};
    if (ds_rank(d) != 0 || nb_verbosity() < 1) return;
    double counted = 0;
    for (int c = 0; c < T_CLOCKS; c++) {
        if (d->clock_n[c]) nb_info("time: %-34s %8.2f s (%ld)", what[c], d->clock_s[c], d->clock_n[c]);
        counted += d->clock_s[c];
    }
    const double wall = nb_now() - t_begin;
    nb_info("time: %-34s %8.2f s", "the rest", wall > counted ? wall - counted : 0.0);
    nb_info("time: %-34s %8.2f s", "the dataset fit in all", wall);
}

/* --F-out's cell: the shared one where it is refined, else the mean of the
 * passing frames' (each as refined, or as it started); says which. */
void ds_F_out_cell(ds *d, const double *g, double cell[6], char *says, size_t size)
{
    double sum[6] = {0};
    long n = 0;
    int shared = 0;
    for (int k = K_CELL_A; k <= K_CELL_GAMMA; k++) shared |= d->L.where_z[k] >= 0;
    for (long i = 0; i < d->nframes; i++) {
        const double *row = g + i * G_WIDTH;
        if (!ds_in_range(d, i) || row[G_FAILED] != DS_FAIL_NONE) continue;
        double val[DS_KINDS];
        ds_values(d, &d->fr[i], row + G_VALUES, d->z, val);
        for (int j = 0; j < 6; j++) sum[j] += val[K_CELL_A + j];
        n++;
    }
    for (int j = 0; j < 6; j++) cell[j] = n ? sum[j] / n : d->start->unit_cell[j];
    if (shared)
        snprintf(says, size, "nb-fit: the cell is the refined shared cell %.4f %.4f %.4f %.3f %.3f %.3f", cell[0], cell[1],
                 cell[2], cell[3], cell[4], cell[5]);
    else
        snprintf(says, size, "nb-fit: the cell is the mean of %ld frames' cells %.4f %.4f %.4f %.3f %.3f %.3f", n,
                 cell[0], cell[1], cell[2], cell[3], cell[4], cell[5]);
}

