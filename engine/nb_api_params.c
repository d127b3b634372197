/* nb_api_params.c - the public API's named parameters (nb.h): the table of
 * engine/nb_params.c listed, read and set on a renderer's plan. */
#include <stdlib.h>

#include "nb_api.h"
#include "nb_params.h"

int nb_parameter_count(void)
{
    return nb_param_rows();
}

const char *nb_parameter_name(int i)
{
    return nb_param_row_listed(i);
}

const char *nb_parameter_unit(const char *name)
{
    nb_param p;
    if (!name) {
        nb_error_set(NB_ERR_USAGE, "nb_parameter_unit: no name");
        return NULL;
    }
    return nb_param_lookup(name, &p) ? NULL : nb_param_unit(&p);
}

int nb_renderer_get_parameter(const nb_renderer *r, const char *name, double *value)
{
    if (!r || !name || !value)
        return nb_error_set(NB_ERR_USAGE, "nb_renderer_get_parameter: a NULL renderer, name or value");
    nb_param p;
    nb_status st = nb_param_lookup(name, &p);
    return nb_api_result(st ? st : nb_param_get(&r->plan, &p, value));
}

int nb_renderer_set_parameter(nb_renderer *r, const char *name, double value)
{
    if (!r || !name) return nb_error_set(NB_ERR_USAGE, "nb_renderer_set_parameter: a NULL renderer or name");
    nb_param p;
    nb_plan moved;
    nb_status st = nb_param_lookup(name, &p);
    /* on a copy: a setter that fails leaves the renderer's plan as it was */
    if (!st) st = nb_plan_copy(&r->plan, &moved);
    if (st) return nb_api_result(st);
    if ((st = nb_param_set(&moved, &p, value))) {
        nb_plan_free(&moved);
        return nb_api_result(st);
    }
    nb_plan_free(&r->plan);
    r->plan = moved;
    /* the derivatives' plans were the old plan's */
    if (r->have_grad_plans) nb_grad_plans_free(&r->grad_plans);
    r->have_grad_plans = 0;
    return NB_RESULT_OK;
}
