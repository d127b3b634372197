/* truth_jsonl.c - the ground truth of every frame as one JSON object per
 * line (nb-convert -o truth.jsonl), for testing indexers and training models
 * on simulated data: what the frame's crystal, beam and reflections were.
 * The frame is the one nb-sim rendered: nb_plan_frame_view and
 * nb_plan_frame_sources of the same plan (a still's IMAGE keys are checked
 * against it); the crystal goes into DIALS's frame through nb_dials_frame,
 * the mapping model.expt uses.  Format: docs/stream-format.md. */
#include "truth_jsonl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dials_expt_write.h"
#include "frame_write.h"
#include "json.h"
#include "nb_reflections.h"
#include "nb_stills.h"
#include "nb_util.h"

struct nb_truth {
    nb_outfile *of;
    double min_photons;
    char run_id[NB_EXPT_RUN_ID]; /* the series plan's, for the identifiers ("": not yet) */
};

nb_status nb_truth_open(nb_truth **out, const char *path, double min_photons)
{
    nb_truth *t;
    *out = NULL;
    nb_status st = nb_calloc((void **)&t, 1, sizeof *t, "the truth file");
    if (st) return st;
    t->min_photons = min_photons;
    if ((st = nb_outfile_open(&t->of, path, 1))) {
        free(t);
        return st;
    }
    *out = t;
    return NB_OK;
}

static void cross3(const double a[3], const double b[3], double out[3])
{
    out[0] = a[1] * b[2] - a[2] * b[1];
    out[1] = a[2] * b[0] - a[0] * b[2];
    out[2] = a[0] * b[1] - a[1] * b[0];
}

/* A (row-major, 1/Angstrom): the reciprocal vectors of the frame's cell at
 * mid-frame, in DIALS's frame, as its columns */
static nb_status setting_matrix(const nb_plan *view, double A[9])
{
    double R[3][3], abc[3][3], d[3][3], star[3][3];
    nb_status st = nb_dials_frame(view, R);
    if (st) return st;
    nb_plan_cell_at(view, nb_plan_mid_phi(view), abc);
    for (int v = 0; v < 3; v++)
        for (int i = 0; i < 3; i++)
            d[v][i] = 1e10 * (R[i][0] * abc[v][0] + R[i][1] * abc[v][1] + R[i][2] * abc[v][2]);
    double bc[3];
    cross3(d[1], d[2], bc);
    double volume = d[0][0] * bc[0] + d[0][1] * bc[1] + d[0][2] * bc[2];
    if (!(fabs(volume) > 0)) return nb_error_set(NB_ERR_DATA, "the plan's cell has no volume");
    for (int v = 0; v < 3; v++) {
        cross3(d[(v + 1) % 3], d[(v + 2) % 3], star[v]);
        for (int i = 0; i < 3; i++) A[3 * i + v] = star[v][i] / volume;
    }
    return NB_OK;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* "spectrum": [[wavelength A, weight], ...] over the frame's sources, equal
 * wavelengths together, weights their share of the sources */
static nb_status put_spectrum(FILE *fp, const nb_plan *view)
{
    double *l;
    nb_status st = nb_calloc((void **)&l, (size_t)view->nsources, sizeof *l, "the spectrum");
    if (st) return st;
    for (int i = 0; i < view->nsources; i++) l[i] = view->sources[i].lambda * 1e10;
    qsort(l, (size_t)view->nsources, sizeof *l, cmp_double);
    fprintf(fp, "\"spectrum\": [");
    for (int i = 0, first = 1; i < view->nsources;) {
        int j = i;
        while (j < view->nsources && l[j] == l[i]) j++;
        fprintf(fp, "%s[%.17g, %.10g]", first ? "" : ", ", l[i], (double)(j - i) / view->nsources);
        first = 0, i = j;
    }
    fprintf(fp, "], ");
    free(l);
    return NB_OK;
}

/* A still's IMAGE keys against the plan's shot: a stream spliced from
 * another plan would otherwise get the wrong truth */
static nb_status check_shot(const nb_plan *series, const nb_image_info *im)
{
    if (!series->stills.on) return NB_OK;
    nb_still_shot shot;
    nb_still_draw(series, im->frame, &shot);
    int bad = im->has.still_fluence && im->still_fluence != shot.fluence;
    for (int i = 0; i < 9 && im->has.still_rotation; i++) bad |= im->still_rotation[i] != shot.U[i];
    if (bad)
        return nb_error_set(NB_ERR_DATA, "IMAGE record of frame %ld: its STILL_ROTATION or STILL_FLUENCE is not the "
                                         "plan's shot (an image of another plan?)",
                            im->frame + 1);
    return NB_OK;
}

static void put_frame_keys(FILE *fp, const nb_plan *series, const nb_plan *view, long frame, const double A[9],
                           const char *run_id)
{
    /* the experiment's identifier, as model.expt names it (nb_expt_identifier) */
    char id[256];
    nb_strbuf sb;
    nb_strbuf_init(&sb);
    nb_expt_identifier(series, run_id, frame, id, sizeof id);
    nb_json_write_string(&sb, id);
    fprintf(fp, "{\"frame\": %ld, \"kind\": \"%s\", \"identifier\": %s, \"A\": [", frame + 1,
            series->stills.on ? "still" : "rotation", sb.data);
    nb_strbuf_free(&sb);
    for (int i = 0; i < 9; i++) fprintf(fp, "%s%.17g", i ? ", " : "", A[i] + 0.0);
    fprintf(fp, "], \"cell\": [");
    for (int i = 0; i < 6; i++) fprintf(fp, "%s%.10g", i ? ", " : "", view->unit_cell[i]);
    fprintf(fp, "], \"phi_deg\": %.17g, \"osc_deg\": %.17g, ", nb_plan_mid_phi(view) * 180.0 / M_PI,
            view->osc * 180.0 / M_PI);
    fprintf(fp, "\"wavelength\": %.17g, ", nb_plan_mean_lambda(view) * 1e10);
}

nb_status nb_truth_frame(nb_truth *t, const nb_plan *series, const nb_image_info *im, const float *photons)
{
    nb_plan view;
    nb_source *src = NULL;
    int nsrc = 0;
    double A[9];
    nb_reflection_list refl = {NULL, 0};
    nb_status st = check_shot(series, im);
    if (st) return st;
    nb_plan_frame_view(series, im->frame, &view);
    if ((st = nb_plan_frame_sources(series, im->frame, &src, &nsrc))) return st;
    if (src) view.sources = src, view.nsources = nsrc;
    if (!(st = setting_matrix(&view, A))) st = nb_reflections_collect(&view, photons, t->min_photons, &refl);
    if (!st && !t->run_id[0]) st = nb_expt_run_id(series, t->run_id);
    FILE *fp = nb_outfile_fp(t->of);
    if (!st) {
        put_frame_keys(fp, series, &view, im->frame, A, t->run_id);
        st = put_spectrum(fp, &view);
    }
    if (!st) {
        fprintf(fp, "\"fluence\": %.17g, \"N\": [%.17g, %.17g, %.17g], \"min_photons\": %.17g, \"reflections\": [",
                view.fluence, view.Na, view.Nb, view.Nc, t->min_photons);
        for (size_t i = 0; i < refl.n; i++) {
            const nb_reflection *r = &refl.r[i];
            fprintf(fp, "%s[%d, %d, %d, %d, %.6f, %.6f, %.9g]", i ? ", " : "", r->h, r->k, r->l, r->panel, r->x, r->y,
                    r->photons);
        }
        fprintf(fp, "]}\n");
        if (ferror(fp)) st = nb_error_set(NB_ERR_IO, "cannot write '%s'", nb_outfile_path(t->of));
    }
    nb_reflection_list_free(&refl);
    free(src);
    return st;
}

nb_status nb_truth_commit(nb_truth *t)
{
    nb_status st = nb_outfile_commit(t->of);
    free(t);
    return st;
}

void nb_truth_abort(nb_truth *t)
{
    if (!t) return;
    nb_outfile_abort(t->of);
    free(t);
}

/* ---- the registry's run writer ------------------------------------------------ */

/* The frame's line, the file opened at the run's first image */
static nb_status truth_frame(void **file, const char *path, const nb_frame *fr, const nb_write_opts *o)
{
    nb_truth *t = *file;
    nb_status st;
    if (!t) {
        if ((st = nb_truth_open(&t, path, o->truth_min_photons))) return st;
        *file = t;
        nb_info("writing %s", path);
    }
    st = nb_truth_frame(t, fr->plan, fr->im, fr->photons);
    return st ? nb_error_prefix(st, "'%s'", path) : NB_OK;
}

static nb_status truth_commit(void *file) { return nb_truth_commit(file); }
static void truth_abort(void *file) { nb_truth_abort(file); }

/* not made from a plan alone, nor joined (shards' lines: cat) */
const nb_run_writer nb_truth_run_writer = {truth_frame, NULL, truth_commit, truth_abort, NULL, NULL, NULL, NULL};
