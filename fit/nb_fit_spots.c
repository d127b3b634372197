/* nb_fit_spots.c - nb-fit --spots FILE.refl (and nb.h's dataset fit's
 * spots): the spots DIALS found
 * (dials.find_spots' strong.refl, dials.index's indexed.refl) tied to the
 * plan's frames by their experiments' identifiers, for the dataset fit to
 * use in place of its own spot finding (nb_fit_dataset.h, nb_fit_given_spots).
 *
 * A row's experiment (the id column) names an identifier (the table's
 * map); the plan's frame of that identifier is the frame the spot is on:
 * each of a list of stills has its own, as nb-geom -expt keeps them, or as
 * nb-convert names the experiments of a plan made from flags
 * (nb_expt_identifier).  The frames of a sweep share one: there the spot's
 * image (the centroid's z, DIALS's index of the image from the sweep's
 * first, whose image_range nb-geom -expt counts from) picks the frame.
 * Rows of no experiment (id -1: spots dials.index did not index) and of
 * experiments the plan does not have are left out and counted; a table
 * none of whose spots is on the plan's frames is refused, as is a spot
 * outside its panel. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dials_expt_write.h"
#include "dials_refl.h"
#include "nb_fit_dataset.h"
#include "nb_plan.h"
#include "nb_util.h"

/* The plan's frames sorted by identifier, to find an experiment's frames */
typedef struct frame_name {
    char id[256];
    long frame;
} frame_name;

static int cmp_frame_name(const void *a, const void *b)
{
    const frame_name *x = a, *y = b;
    const int c = strcmp(x->id, y->id);
    return c ? c : (x->frame > y->frame) - (x->frame < y->frame);
}

/* An experiment of the table (its key, the id column's value, and its
 * identifier) and its frames in the plan: the first and how many (0: none
 * of the plan's) */
typedef struct experiment_frames {
    int key;
    const char *id;
    long first, count;
} experiment_frames;

static int cmp_key(const void *a, const void *b)
{
    const int x = ((const experiment_frames *)a)->key, y = ((const experiment_frames *)b)->key;
    return (x > y) - (x < y);
}

/* Each of the table's experiments' frames in the plan, sorted by key for
 * the rows to find theirs.  A sweep's frames are consecutive; an
 * identifier on frames that are not (a list naming two stills alike) is
 * refused: its spots could be on either. */
static nb_status experiments_frames(const nb_refl_table *t, const nb_plan *plan, const char *name,
                                    experiment_frames *out)
{
    char run_id[NB_EXPT_RUN_ID];
    frame_name *names;
    nb_status st = nb_expt_run_id(plan, run_id);
    if (!st) st = nb_calloc((void **)&names, (size_t)plan->nframes + 1, sizeof *names, "the frames' identifiers");
    if (st) return st;
    for (long i = 0; i < plan->nframes; i++) {
        nb_expt_identifier(plan, run_id, i, names[i].id, sizeof names[i].id);
        names[i].frame = i;
    }
    qsort(names, (size_t)plan->nframes, sizeof *names, cmp_frame_name);
    for (size_t k = 0; k < t->nids && !st; k++) {
        frame_name key;
        snprintf(key.id, sizeof key.id, "%s", t->id_text[k]);
        key.frame = -1;
        size_t lo = 0, hi = (size_t)plan->nframes; /* the first name not below key */
        while (lo < hi) {
            const size_t mid = lo + (hi - lo) / 2;
            if (cmp_frame_name(&names[mid], &key) < 0) lo = mid + 1;
            else hi = mid;
        }
        out[k].key = t->id_key[k], out[k].id = t->id_text[k], out[k].first = -1, out[k].count = 0;
        for (size_t j = lo; j < (size_t)plan->nframes && !strcmp(names[j].id, t->id_text[k]); j++) {
            if (out[k].count && names[j].frame != out[k].first + out[k].count)
                st = nb_error_set(NB_ERR_DATA, "'%s': experiment '%s' is the plan's frames %ld and %ld, not one "
                                  "still or one sweep", name, t->id_text[k], out[k].first + 1, names[j].frame + 1);
            if (!out[k].count) out[k].first = names[j].frame;
            out[k].count++;
        }
    }
    free(names);
    qsort(out, t->nids, sizeof *out, cmp_key);
    return st;
}

/* Row r's frame: -1 for none of the plan's (*other set) or none at all (*unindexed) */
static nb_status row_frame(const nb_refl_table *t, const experiment_frames *ef, size_t r, const char *name,
                           long *frame, long *unindexed, long *other)
{
    *frame = -1;
    if (t->id[r] < 0) return ++*unindexed, NB_OK;
    const experiment_frames key = {.key = t->id[r]};
    const experiment_frames *e = bsearch(&key, ef, t->nids, sizeof *ef, cmp_key);
    if (!e || e->count == 0) return ++*other, NB_OK;
    if (e->count == 1) return *frame = e->first, NB_OK;
    const double z = floor(t->xyz[3 * r + 2]);
    if (!(z >= 0 && z < e->count))
        return nb_error_set(NB_ERR_DATA, "'%s': row %zu: image %g is not one of experiment '%s''s %ld frames", name,
                            r + 1, t->xyz[3 * r + 2], e->id, e->count);
    *frame = e->first + (long)z;
    return NB_OK;
}

/* Row r as a spot of the plan: its panel and centroid checked, its box (or
 * 5 x 5 pixels around the centroid where the table has none) */
static nb_status row_spot(const nb_refl_table *t, const nb_plan *plan, size_t r, const char *name, nb_fit_spot *sp)
{
    const int panels = nb_plan_npanels(plan);
    if (t->panel[r] >= panels)
        return nb_error_set(NB_ERR_DATA, "'%s': row %zu: panel %d, the plan has %d", name, r + 1, t->panel[r], panels);
    int fp, spx;
    size_t off;
    nb_plan_panel_dims(plan, t->panel[r], &fp, &spx, &off);
    const double f = t->xyz[3 * r], s = t->xyz[3 * r + 1];
    if (!(f >= 0 && f <= fp && s >= 0 && s <= spx))
        return nb_error_set(NB_ERR_DATA, "'%s': row %zu: the centroid (%g, %g) is outside panel %d's %d x %d pixels",
                            name, r + 1, f, s, t->panel[r], fp, spx);
    sp->panel = t->panel[r], sp->f = (float)f, sp->s = (float)s;
    if (t->bbox) {
        const int *b = t->bbox + 6 * r;
        sp->f0 = b[0], sp->f1 = b[1] - 1, sp->s0 = b[2], sp->s1 = b[3] - 1;
    } else {
        sp->f0 = (int)floor(f) - 2, sp->f1 = (int)floor(f) + 2, sp->s0 = (int)floor(s) - 2, sp->s1 = (int)floor(s) + 2;
    }
    /* a box that misses the panel, or is empty, shrinks to the centroid's pixel */
    if (sp->f1 < sp->f0 || sp->s1 < sp->s0 || sp->f1 < 0 || sp->s1 < 0 || sp->f0 >= fp || sp->s0 >= spx)
        sp->f0 = sp->f1 = (int)fmin(floor(f), fp - 1), sp->s0 = sp->s1 = (int)fmin(floor(s), spx - 1);
    return NB_OK;
}

/* The table's identifiers and the plan's first frames', for the message of a table that matches none */
static nb_status no_match(const nb_refl_table *t, const nb_plan *plan, const char *name)
{
    char run_id[NB_EXPT_RUN_ID], plan_id[256] = "";
    if (!nb_expt_run_id(plan, run_id)) nb_expt_identifier(plan, run_id, 0, plan_id, sizeof plan_id);
    return nb_error_set(NB_ERR_DATA, "'%s': none of its spots is of an experiment of the plan (the table's %zu "
                 "identifiers%s%s%s; the plan's first frame's '%s')", name, t->nids, t->nids ? ", '" : "",
                 t->nids ? t->id_text[0] : "", t->nids ? "' first" : "", plan_id);
}

/* The rows on the plan's frames into out, frame by frame */
static nb_status gather(const nb_refl_table *t, const nb_plan *plan, const experiment_frames *ef, const char *name,
                        nb_fit_given_spots *out)
{
    long unindexed = 0, other = 0, frame;
    long *of_row = malloc((t->nrows + 1) * sizeof *of_row);
    nb_status st = of_row ? NB_OK : nb_error_set(NB_ERR_NOMEM, "out of memory for the spots");
    if (!st) st = nb_calloc((void **)&out->first, (size_t)plan->nframes + 2, sizeof *out->first, "the spots");
    for (size_t r = 0; r < t->nrows && !st; r++)
        if (!(st = row_frame(t, ef, r, name, &frame, &unindexed, &other)) && (of_row[r] = frame) >= 0)
            out->first[frame + 2]++;
    const size_t taken = st ? 0 : t->nrows - (size_t)unindexed - (size_t)other;
    if (!st && taken == 0) st = no_match(t, plan, name);
    if (!st) st = nb_calloc((void **)&out->spot, taken, sizeof *out->spot, "the spots");
    for (long i = 0; i < plan->nframes && !st; i++) out->first[i + 2] += out->first[i + 1];
    /* first[i + 1] is now where frame i's spots begin; each row moves it on */
    for (size_t r = 0; r < t->nrows && !st; r++)
        if (of_row && of_row[r] >= 0) st = row_spot(t, plan, r, name, &out->spot[out->first[of_row[r] + 1]++]);
    out->nframes = plan->nframes;
    if (!st)
        nb_info("'%s': %zu spots: %zu on the plan's %d frames, %ld of no experiment (not indexed), %ld of other "
                "experiments", name, t->nrows, taken, plan->nframes, unindexed, other);
    free(of_row);
    return st;
}

nb_status nb_fit_spots_read(const char *path, const nb_plan *plan, nb_fit_given_spots *out)
{
    nb_refl_table t;
    experiment_frames *ef = NULL;
    memset(out, 0, sizeof *out);
    nb_status st = nb_refl_read(path, &t);
    if (!st && t.nids == 0)
        st = nb_error_set(NB_ERR_DATA, "'%s': the table names no experiments (no identifiers): its spots cannot be "
                                       "tied to the plan's frames", path);
    if (!st) st = nb_calloc((void **)&ef, t.nids, sizeof *ef, "the table's experiments");
    if (!st) st = experiments_frames(&t, plan, path, ef);
    if (!st) st = gather(&t, plan, ef, path, out);
    free(ef);
    nb_refl_free(&t);
    if (st) nb_fit_spots_free(out);
    return st;
}

void nb_fit_spots_free(nb_fit_given_spots *g)
{
    free(g->first), free(g->spot);
    memset(g, 0, sizeof *g);
}
