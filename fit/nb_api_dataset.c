/* nb_api_dataset.c - nb.h's dataset fit (nb_fit_dataset_renderer): the
 * caller's arrays as the dataset fit's observed frames (nb_fit_dataset.h),
 * its sum as the reduction, its operators as the space group, its DIALS
 * table's spots as the observed spots; what each
 * frame came to kept for nb_fit_dataset_value and _verdict. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb.h"
#include "nb_api.h"
#include "nb_api_fit.h"
#include "nb_fit_dataset.h"
#include "nb_util.h"

struct nb_fit_dataset {
    nb_fit_ds_result res;
};

void nb_fit_dataset_settings_init(nb_fit_dataset_settings *s)
{
    if (!s) return;
    memset(s, 0, sizeof *s);
    s->size = sizeof *s;
    s->loss = NB_FIT_LOSS_POISSON;
    s->iterations = 50;
    s->processes = 1;
}

/* The caller's settings over the defaults: the fields its size holds. */
static nb_status settings_read(const nb_fit_dataset_settings *given, nb_fit_dataset_settings *s)
{
    nb_fit_dataset_settings_init(s);
    if (!given) return nb_error_set(NB_ERR_USAGE, "nb_fit_dataset_renderer: no settings (what to refine)");
    nb_status st = nb_api_sized("nb_fit_dataset_renderer", s, sizeof *s, given);
    if (!st) st = nb_api_fit_common("nb_fit_dataset_renderer", s->loss, s->iterations, s->rank, s->processes, s->sum);
    if (st) return st;
    if (s->symmetry && (s->nops < 1 || s->nops > NB_FIT_MAX_OPS))
        return nb_error_set(NB_ERR_USAGE, "nb_fit_dataset_renderer: %d symmetry operators (1 to %d)", s->nops,
                            NB_FIT_MAX_OPS);
    if (!(s->refine && *s->refine) && !(s->refine_frame && *s->refine_frame) && !s->refine_F)
        return nb_error_set(NB_ERR_USAGE, "nb_fit_dataset_renderer: nothing to refine (refine, refine_frame, refine_F)");
    return NB_OK;
}

/* The caller's images as the fit's observed frames */
typedef struct arrays {
    const nb_fit_image *images;
    size_t npix;
} arrays;

static nb_status arrays_frame(void *ctx, long frame, long slot, nb_fit_observed *ob)
{
    const arrays *a = ctx;
    (void)slot;
    if (!a->images[frame].pixels)
        return nb_error_set(NB_ERR_USAGE, "nb_fit_dataset_renderer: frame %ld has no pixels in the process that fits it",
                            frame);
    return nb_api_observed_from(&a->images[frame], frame, a->npix, ob);
}

static void symmetry_from(const nb_fit_dataset_settings *s, nb_fit_symmetry *sym)
{
    memset(sym, 0, sizeof *sym);
    sym->nops = s->nops;
    for (int o = 0; o < s->nops; o++)
        for (int i = 0; i < 9; i++) sym->R[o][i / 3][i % 3] = s->symmetry[9 * o + i];
    snprintf(sym->spacegroup, sizeof sym->spacegroup, "%d operators (the caller's)", s->nops);
}

/* The fit on r's plan and F; r takes the refined plan (and F) */
static nb_status fit(nb_renderer *r, const nb_fit_image *images, const nb_fit_dataset_settings *s, nb_fit_dataset *f)
{
    arrays a = {images, nb_plan_total_pixels(&r->plan)};
    nb_api_sum sum = {s->sum, s->sum_ctx};
    const nb_fit_reduction red = {.rank = s->rank, .size = s->processes, .ctx = &sum, .sum = nb_api_sum_values,
                                  .agree = nb_api_agree};
    nb_fit_symmetry *sym = NULL;
    nb_fit_ds_settings o;
    nb_fit_ds_defaults(&o);
    o.refine = s->refine && *s->refine ? s->refine : NULL;
    o.refine_frame = s->refine_frame && *s->refine_frame ? s->refine_frame : NULL;
    o.refine_F = s->refine_F;
    o.loss = s->loss == NB_FIT_LOSS_LSQ ? NB_FIT_LSQ : NB_FIT_POISSON;
    o.iterations = s->iterations;
    o.precision_given = 1; /* the renderer's model */
    o.precision = (r->precision >= 0 ? r->precision : r->plan.precision_double) == 1;
    o.nobserved = r->plan.nframes, o.observed = arrays_frame, o.observed_ctx = &a;
    nb_status st = s->symmetry ? nb_calloc((void **)&sym, 1, sizeof *sym, "the space group") : NB_OK;
    if (sym) symmetry_from(s, sym);
    o.symmetry = sym;
    nb_fit_given_spots given;
    memset(&given, 0, sizeof given);
    if (!st && s->spots && !(st = nb_fit_spots_read(s->spots, &r->plan, &given))) o.spots = &given;
    nb_plan refined;
    nb_hkl refined_F;
    int failed = 0;
    nb_hkl_init(&refined_F);
    if (!st) st = nb_fit_dataset_run(&r->plan, &r->hkl, &o, r->engine, s->processes > 1 ? &red : NULL, &refined,
                                 &refined_F, NULL, &f->res, &failed);
    nb_fit_spots_free(&given);
    free(sym);
    if (st) {
        nb_hkl_free(&refined_F);
        return st;
    }
    nb_plan_free(&r->plan);
    r->plan = refined;
    if (refined_F.hkls > 0) {
        nb_hkl_free(&r->hkl);
        r->hkl = refined_F;
    } else nb_hkl_free(&refined_F);
    if (r->have_grad_plans) nb_grad_plans_free(&r->grad_plans); /* the old plan's */
    r->have_grad_plans = 0;
    return NB_OK;
}

int nb_fit_dataset_renderer(nb_renderer *r, const nb_fit_image *images, const nb_fit_dataset_settings *settings,
                            nb_fit_dataset **out)
{
    if (!r || !images || !out)
        return nb_error_set(NB_ERR_USAGE, "nb_fit_dataset_renderer: a NULL renderer, images or result");
    *out = NULL;
    if (!r->have_F)
        return nb_error_set(NB_ERR_USAGE, "nb_fit_dataset_renderer: no structure factors yet (nb_renderer_set_F)");
    nb_fit_dataset_settings s;
    nb_fit_dataset *f = NULL;
    nb_status st = settings_read(settings, &s);
    if (!st) st = nb_calloc((void **)&f, 1, sizeof *f, "the fit's result");
    if (!st) st = fit(r, images, &s, f);
    if (st) {
        free(f);
        return nb_api_result(st);
    }
    *out = f;
    return NB_RESULT_OK;
}

int nb_fit_dataset_value(const nb_fit_dataset *f, long frame, const char *name, double *value, double *sigma)
{
    if (!f || !name) return nb_error_set(NB_ERR_USAGE, "nb_fit_dataset_value: a NULL result or name");
    const nb_fit_ds_result *r = &f->res;
    if (frame < -1 || frame >= r->nframes)
        return nb_error_set(NB_ERR_USAGE, "nb_fit_dataset_value: frame %ld of %ld", frame, r->nframes);
    const int k = frame < 0 ? r->kz : r->kp;
    for (int j = 0; j < k; j++) {
        if (strcmp(frame < 0 ? r->shared_name[j] : r->frame_name[j], name)) continue;
        if (value) *value = frame < 0 ? r->shared[j] : r->values[frame * r->kp + j];
        if (sigma) *sigma = frame < 0 ? r->shared_sigma[j] : r->sigmas[frame * r->kp + j];
        return NB_RESULT_OK;
    }
    return nb_error_set(NB_ERR_USAGE, "nb_fit_dataset_value: '%s' is not a%s value refined", name,
                        frame < 0 ? " shared" : " frame's own");
}

int nb_fit_dataset_verdict(const nb_fit_dataset *f, long frame, const char **why)
{
    if (!f || frame < 0 || frame >= f->res.nframes) {
        nb_error_set(NB_ERR_USAGE, "nb_fit_dataset_verdict: no result or frame %ld", frame);
        return -1;
    }
    if (f->res.failed[frame] < 0) {
        nb_error_set(NB_ERR_USAGE, "nb_fit_dataset_verdict: frame %ld was not fitted", frame);
        return -1;
    }
    if (why) *why = f->res.why[frame];
    return f->res.failed[frame] != 0;
}

void nb_fit_dataset_free(nb_fit_dataset *f)
{
    if (!f) return;
    nb_fit_ds_result_free(&f->res);
    free(f);
}
