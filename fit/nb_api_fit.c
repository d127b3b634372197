/* nb_api_fit.c - nb.h's fit (nb_fit_renderer): a renderer's named
 * parameters refined to the caller's images in memory by libnb's fit
 * (nb_fit_plan.h), the caller's sum as the reduction over processes.  The
 * arrays are checked and turned into photons here, by the rule nb.h states;
 * nothing is read from a file and nothing exits. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb.h"
#include "nb_api.h"
#include "nb_api_fit.h"
#include "nb_fit_plan.h"
#include "nb_params.h"
#include "nb_util.h"

void nb_fit_settings_init(nb_fit_settings *s)
{
    if (!s) return;
    memset(s, 0, sizeof *s);
    s->size = sizeof *s;
    s->loss = NB_FIT_LOSS_POISSON;
    s->iterations = 50;
    s->processes = 1;
}

nb_status nb_api_sized(const char *who, void *dst, size_t dst_size, const void *given)
{
    size_t given_size;
    memcpy(&given_size, given, sizeof given_size);
    if (given_size < sizeof given_size || given_size > dst_size)
        return nb_error_set(NB_ERR_USAGE, "%s: settings of size %zu: this libnb knows %zu bytes of them (set size to "
                                          "their sizeof, or call the settings' _init)", who, given_size, dst_size);
    memcpy(dst, given, given_size);
    memcpy(dst, &dst_size, sizeof dst_size);
    return NB_OK;
}

nb_status nb_api_fit_common(const char *who, nb_fit_loss_choice loss, int iterations, int rank, int processes,
                            nb_fit_sum_fn sum)
{
    if (loss != NB_FIT_LOSS_POISSON && loss != NB_FIT_LOSS_LSQ)
        return nb_error_set(NB_ERR_USAGE, "%s: loss %d is neither NB_FIT_LOSS_POISSON nor NB_FIT_LOSS_LSQ", who,
                            (int)loss);
    if (iterations < 1) return nb_error_set(NB_ERR_USAGE, "%s: iterations %d: at least 1", who, iterations);
    if (processes < 1 || rank < 0 || rank >= processes)
        return nb_error_set(NB_ERR_USAGE, "%s: process %d of %d", who, rank, processes);
    if (processes > 1 && !sum)
        return nb_error_set(NB_ERR_USAGE, "%s: %d processes and no sum over them", who, processes);
    return NB_OK;
}

/* The caller's settings over the defaults: the fields its size holds. */
static nb_status settings_read(const nb_fit_settings *given, nb_fit_settings *s)
{
    nb_fit_settings_init(s);
    if (!given) return NB_OK;
    nb_status st = nb_api_sized("nb_fit_renderer", s, sizeof *s, given);
    return st ? st : nb_api_fit_common("nb_fit_renderer", s->loss, s->iterations, s->rank, s->processes, s->sum);
}

/* The names as the fit's list (comma-separated), each checked: a table
 * name or 'scale', given once. */
static nb_status names_list(const char *const *names, int n, char **list)
{
    size_t len = 1;
    for (int i = 0; i < n; i++) {
        nb_param p;
        if (!names[i]) return nb_error_set(NB_ERR_USAGE, "nb_fit_renderer: name %d is NULL", i);
        if (strchr(names[i], ',') || (strcmp(names[i], "scale") && nb_param_lookup(names[i], &p)))
            return nb_error_set(NB_ERR_USAGE, "nb_fit_renderer: unknown parameter '%s' (nb_parameter_name lists them)",
                                names[i]);
        for (int j = 0; j < i; j++)
            if (!strcmp(names[i], names[j]))
                return nb_error_set(NB_ERR_USAGE, "nb_fit_renderer: '%s' is named twice", names[i]);
        len += strlen(names[i]) + 1;
    }
    nb_status st = nb_calloc((void **)list, len, 1, "the names");
    for (int i = 0; i < n && !st; i++) strcat(strcat(*list, i ? "," : ""), names[i]);
    return st;
}

nb_status nb_api_observed_from(const nb_fit_image *im, long frame, size_t n, nb_fit_observed *ob)
{
    if (!(im->gain >= 0 && isfinite(im->gain)) || !isfinite(im->offset) || !(im->overload >= 0))
        return nb_error_set(NB_ERR_USAGE, "nb_fit_renderer: frame %ld: gain %g, offset %g, overload %g (a gain >= 0, "
                                          "a finite offset, an overload >= 0)", frame, im->gain, im->offset, im->overload);
    nb_status st = nb_calloc((void **)&ob->y, n, sizeof *ob->y, "the observed image");
    if (!st) st = nb_calloc((void **)&ob->use, n, 1, "the observed image");
    const int counts = im->gain > 0;
    size_t used = 0;
    for (size_t i = 0; i < n && !st; i++) {
        const double v = im->pixels[i];
        const int left_out = !isfinite(v) || (im->mask && !im->mask[i]) || (im->overload > 0 && v >= im->overload) ||
                             (counts && v < 0);
        ob->y[i] = counts ? (v - im->offset) / im->gain : v;
        ob->use[i] = !left_out;
        used += !left_out;
    }
    if (!st && !used) st = nb_error_set(NB_ERR_USAGE, "nb_fit_renderer: frame %ld: every pixel is left out", frame);
    return st;
}

nb_status nb_api_sum_values(void *ctx, double *buf, size_t n)
{
    const nb_api_sum *a = ctx;
    return a->sum(a->ctx, buf, n) ? nb_error_set(NB_ERR_DATA, "nb_fit_renderer: the caller's sum failed") : NB_OK;
}

nb_status nb_api_agree(void *ctx, nb_status st)
{
    double failed = st ? 1.0 : 0.0;
    nb_status ss = nb_api_sum_values(ctx, &failed, 1);
    if (st || ss) return st ? st : ss;
    return failed > 0 ? nb_error_set(NB_ERR_DATA, "nb_fit_renderer: another process's fit failed") : NB_OK;
}

/* The fit's values and sigmas in the caller's order ('scale' is the fit's last). */
static nb_status values_out(const nb_fit_plan_result *res, const char *const *names, int n, double *values,
                            double *sigmas)
{
    for (int i = 0; i < n; i++) {
        int j = 0;
        while (j < res->k && strcmp(res->name[j], names[i])) j++;
        if (j == res->k) return nb_error_set(NB_ERR_DATA, "nb_fit_renderer: the fit lost '%s'", names[i]);
        if (values) values[i] = res->value[j];
        if (sigmas) sigmas[i] = res->sigma[j];
    }
    return NB_OK;
}

static nb_status fit_observed(nb_renderer *r, const char *list, nb_fit_observed *obs, const nb_fit_settings *s,
                              nb_fit_plan_result *res)
{
    nb_api_sum sum = {s->sum, s->sum_ctx};
    const nb_fit_reduction red = {.rank = s->rank, .size = s->processes, .ctx = &sum, .sum = nb_api_sum_values,
                                  .agree = nb_api_agree};
    const int use_double = (r->precision >= 0 ? r->precision : r->plan.precision_double) == 1;
    const nb_fit_plan_settings ps = {.loss = s->loss == NB_FIT_LOSS_LSQ ? NB_FIT_LSQ : NB_FIT_POISSON,
                                     .iterations = s->iterations, .path = use_double ? NB_GRAD_DOUBLE : NB_GRAD_FAST,
                                     .red = s->processes > 1 ? &red : NULL};
    nb_plan refined;
    nb_status st = nb_fit_plan(r->engine, &r->plan, &r->hkl, list, obs, &ps, &refined, res);
    if (st) return st;
    nb_plan_free(&r->plan);
    r->plan = refined;
    if (r->have_grad_plans) nb_grad_plans_free(&r->grad_plans); /* the old plan's */
    r->have_grad_plans = 0;
    return NB_OK;
}

int nb_fit_renderer(nb_renderer *r, const char *const *names, int n, const nb_fit_image *images,
                    const nb_fit_settings *settings, double *values, double *sigmas, nb_fit_result *result)
{
    if (!r || !names || !images || n < 1)
        return nb_error_set(NB_ERR_USAGE, "nb_fit_renderer: a NULL renderer, names or images, or no name");
    if (result && (result->size < sizeof result->size || result->size > sizeof *result))
        return nb_error_set(NB_ERR_USAGE, "nb_fit_renderer: a result of size %zu (set size to sizeof (nb_fit_result))",
                            result->size);
    if (!r->have_F) return nb_error_set(NB_ERR_USAGE, "nb_fit_renderer: no structure factors yet (nb_renderer_set_F)");
    nb_fit_settings s;
    char *list = NULL;
    nb_fit_observed *obs = NULL;
    nb_fit_plan_result res;
    const long nframes = r->plan.nframes;
    const size_t npix = nb_plan_total_pixels(&r->plan);
    nb_status st = settings_read(settings, &s);
    if (!st) st = names_list(names, n, &list);
    if (!st) st = nb_calloc((void **)&obs, (size_t)nframes, sizeof *obs, "the observed images");
    for (long f = 0; f < nframes && !st; f++) {
        if (images[f].pixels) st = nb_api_observed_from(&images[f], f, npix, &obs[f]);
        else if (s.processes == 1)
            st = nb_error_set(NB_ERR_USAGE, "nb_fit_renderer: frame %ld has no pixels (one process fits every frame)", f);
    }
    if (!st) st = fit_observed(r, list, obs, &s, &res);
    if (!st) st = values_out(&res, names, n, values, sigmas);
    if (!st && result) {
        const nb_fit_result full = {.size = sizeof full, .nll = res.nll, .pixels = res.pixels,
                                    .iterations = res.iterations, .converged = res.converged};
        const size_t size = result->size;
        memcpy(result, &full, size);
        result->size = size;
    }
    for (long f = 0; obs && f < nframes; f++) free(obs[f].y), free(obs[f].use);
    free(obs), free(list);
    return nb_api_result(st);
}
