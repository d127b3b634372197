/* nb_fit_integrated.c - nb-fit --integrated FILE.refl: the intensities the
 * dataset fit measured (fit/nb_fit_integrate.h) written as DIALS's
 * integrated reflection table, the columns dials.ssx_integrate writes and
 * dials.scale and dials.merge read, its experiments named as nb-convert -o
 * fit.expt names the refined stream's (nb_expt_identifier), so that
 * `dials.scale fit.expt integrated.refl` pairs them row by row. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dials_expt_write.h"
#include "dials_refl.h"
#include "nb_fit.h"
#include "nb_util.h"

/* DIALS's flags (dials/array_family/flex_ext.py): predicted, integrated by
 * summation and by profile fitting */
#define FLAG_PREDICTED 1u
#define FLAG_INTEGRATED_SUM 256u
#define FLAG_INTEGRATED_PRF 512u

enum { C_MILLER, C_ID, C_PANEL, C_FLAGS, C_ISUM, C_VSUM, C_IPRF, C_VPRF, C_PART, C_D, C_S1, C_XYZCAL, C_XYZCAL_MM,
       C_XYZOBS, C_BBOX, C_BG, C_QE, C_LP, C_ENTERING, C_IMAGESET, C_MODEL, NCOL };

/* The columns' arrays, one allocation each. */
typedef struct cols {
    int (*miller)[3], *id, (*bbox)[6];
    uint64_t *panel, *flags;
    double *isum, *vsum, *iprf, *vprf, *part, *d, *bg, *one, *model;
    double (*s1)[3], (*xyzcal)[3], (*xyzcal_mm)[3], (*xyzobs)[3];
    unsigned char *entering;
} cols;

static void cols_free(cols *c)
{
    free(c->miller), free(c->id), free(c->bbox), free(c->panel), free(c->flags), free(c->isum), free(c->vsum);
    free(c->iprf), free(c->vprf), free(c->part), free(c->d), free(c->bg), free(c->one), free(c->model);
    free(c->s1), free(c->xyzcal), free(c->xyzcal_mm), free(c->xyzobs), free(c->entering);
}

static nb_status cols_alloc(cols *c, size_t n)
{
    memset(c, 0, sizeof *c);
    const size_t m = n ? n : 1;
    const char *what = "the integrated table";
    void **d1[] = {(void **)&c->isum, (void **)&c->vsum, (void **)&c->iprf, (void **)&c->vprf, (void **)&c->part,
                   (void **)&c->d, (void **)&c->bg, (void **)&c->one, (void **)&c->model};
    void **d3[] = {(void **)&c->s1, (void **)&c->xyzcal, (void **)&c->xyzcal_mm, (void **)&c->xyzobs};
    nb_status st = nb_calloc((void **)&c->miller, m, sizeof *c->miller, what);
    if (!st) st = nb_calloc((void **)&c->id, m, sizeof *c->id, what);
    if (!st) st = nb_calloc((void **)&c->bbox, m, sizeof *c->bbox, what);
    if (!st) st = nb_calloc((void **)&c->panel, m, sizeof *c->panel, what);
    if (!st) st = nb_calloc((void **)&c->flags, m, sizeof *c->flags, what);
    if (!st) st = nb_calloc((void **)&c->entering, m, 1, what);
    for (size_t k = 0; k < sizeof d1 / sizeof d1[0] && !st; k++) st = nb_calloc(d1[k], m, sizeof(double), what);
    for (size_t k = 0; k < sizeof d3 / sizeof d3[0] && !st; k++) st = nb_calloc(d3[k], m, 3 * sizeof(double), what);
    return st;
}

static void cols_fill(cols *c, const nb_plan *plan, const double R[3][3], const nb_fit_integrated *r)
{
    for (size_t k = 0; k < r->n; k++) {
        const nb_fit_refl *x = &r->row[k];
        const double mm = plan->panels[x->panel].pixel_size * 1e3;
        memcpy(c->miller[k], x->hkl, sizeof x->hkl);
        c->id[k] = (int)x->frame, c->panel[k] = (uint64_t)x->panel;
        c->flags[k] = FLAG_PREDICTED | FLAG_INTEGRATED_SUM | FLAG_INTEGRATED_PRF;
        c->isum[k] = x->sum, c->vsum[k] = x->sum_var, c->iprf[k] = x->prf, c->vprf[k] = x->prf_var;
        c->part[k] = x->partiality, c->d[k] = x->d, c->bg[k] = x->background, c->one[k] = 1.0;
        c->model[k] = x->model;
        for (int i = 0; i < 3; i++) c->s1[k][i] = R[i][0] * x->s1[0] + R[i][1] * x->s1[1] + R[i][2] * x->s1[2];
        c->xyzcal[k][0] = x->xyzcal[0], c->xyzcal[k][1] = x->xyzcal[1], c->xyzcal[k][2] = 0.0;
        c->xyzcal_mm[k][0] = x->xyzcal[0] * mm, c->xyzcal_mm[k][1] = x->xyzcal[1] * mm, c->xyzcal_mm[k][2] = 0.0;
        c->xyzobs[k][0] = x->xyzobs[0], c->xyzobs[k][1] = x->xyzobs[1], c->xyzobs[k][2] = 0.0;
        for (int j = 0; j < 4; j++) c->bbox[k][j] = x->bbox[j];
        c->bbox[k][4] = 0, c->bbox[k][5] = 1;
    }
}

/* Every frame's identifier, as nb-convert names the refined stream's experiments. */
static nb_status identifiers(const nb_plan *plan, int **key, char ***text)
{
    char run_id[NB_EXPT_RUN_ID];
    const size_t n = (size_t)plan->nframes;
    nb_status st = nb_expt_run_id(plan, run_id);
    if (!st) st = nb_calloc((void **)key, n ? n : 1, sizeof **key, "the identifiers");
    if (!st) st = nb_calloc((void **)text, n ? n : 1, sizeof **text, "the identifiers");
    for (size_t i = 0; i < n && !st; i++) {
        char id[256];
        nb_expt_identifier(plan, run_id, (long)i, id, sizeof id);
        (*key)[i] = (int)i;
        if (!((*text)[i] = strdup(id))) st = nb_error_set(NB_ERR_NOMEM, "out of memory for the identifiers");
    }
    return st;
}

nb_status nb_fit_write_integrated(const char *path, const nb_plan *plan, const nb_fit_integrated *r)
{
    cols c;
    int *key = NULL;
    char **text = NULL;
    double R[3][3];
    nb_status st = nb_dials_frame(plan, R); /* s1 in DIALS's laboratory frame, as the experiments' */
    if (!st) st = cols_alloc(&c, r->n);
    else memset(&c, 0, sizeof c);
    if (!st) st = identifiers(plan, &key, &text);
    if (!st) {
        cols_fill(&c, plan, (const double(*)[3])R, r);
        const nb_refl_column col[NCOL] = {
            [C_MILLER] = {"miller_index", NB_REFL_MILLER, c.miller},
            [C_ID] = {"id", NB_REFL_INT, c.id},
            [C_PANEL] = {"panel", NB_REFL_SIZE, c.panel},
            [C_FLAGS] = {"flags", NB_REFL_SIZE, c.flags},
            [C_ISUM] = {"intensity.sum.value", NB_REFL_DOUBLE, c.isum},
            [C_VSUM] = {"intensity.sum.variance", NB_REFL_DOUBLE, c.vsum},
            [C_IPRF] = {"intensity.prf.value", NB_REFL_DOUBLE, c.iprf},
            [C_VPRF] = {"intensity.prf.variance", NB_REFL_DOUBLE, c.vprf},
            [C_PART] = {"partiality", NB_REFL_DOUBLE, c.part},
            [C_D] = {"d", NB_REFL_DOUBLE, c.d},
            [C_S1] = {"s1", NB_REFL_VEC3, c.s1},
            [C_XYZCAL] = {"xyzcal.px", NB_REFL_VEC3, c.xyzcal},
            [C_XYZCAL_MM] = {"xyzcal.mm", NB_REFL_VEC3, c.xyzcal_mm},
            [C_XYZOBS] = {"xyzobs.px.value", NB_REFL_VEC3, c.xyzobs},
            [C_BBOX] = {"bbox", NB_REFL_INT6, c.bbox},
            [C_BG] = {"background.sum.value", NB_REFL_DOUBLE, c.bg},
            [C_QE] = {"qe", NB_REFL_DOUBLE, c.one},
            [C_LP] = {"lp", NB_REFL_DOUBLE, c.one},
            [C_ENTERING] = {"entering", NB_REFL_BOOL, c.entering},
            [C_IMAGESET] = {"imageset_id", NB_REFL_INT, c.id},
            [C_MODEL] = {"nb.model_photons", NB_REFL_DOUBLE, c.model},
        };
        st = nb_refl_write(path, r->n, col, NCOL, key, (const char *const *)text, (size_t)plan->nframes);
    }
    for (long i = 0; text && i < plan->nframes; i++) free(text[i]);
    free(text);
    free(key);
    cols_free(&c);
    return st ? nb_error_prefix(st, "--integrated") : NB_OK;
}
