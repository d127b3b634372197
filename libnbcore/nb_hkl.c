/* nb_hkl.c - the dense F(hkl) grid: allocation and lookup, the HKL record that
 * carries it down the pipe (nb-hkl writes it, nb-sim reads it), and the grid
 * the kernels index (nb_hkl_grid).  Layout and keys: docs/stream-format.md. */
#include "nb_hkl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nb_util.h"

void nb_hkl_init(nb_hkl *h) { memset(h, 0, sizeof *h); }

void nb_hkl_free(nb_hkl *h)
{
    free(h->F);
    free(h->source);
    nb_hkl_init(h);
}

nb_status nb_hkl_alloc(nb_hkl *h, int h_min, int h_max, int k_min, int k_max, int l_min, int l_max, double fill)
{
    double nh = (double)h_max - h_min + 1, nk = (double)k_max - k_min + 1, nl = (double)l_max - l_min + 1;
    if (nh < 1 || nk < 1 || nl < 1)
        return nb_error_set(NB_ERR_DATA, "empty Miller index range h %d..%d k %d..%d l %d..%d", h_min, h_max, k_min,
                            k_max, l_min, l_max);
    double bytes = nh * nk * nl * sizeof(double);
    if (bytes > (double)nb_memory_limit() || nh > 1e6 || nk > 1e6 || nl > 1e6) {
        char b[64], m[64];
        nb_format_bytes(bytes, b, sizeof b);
        nb_format_bytes((double)nb_memory_limit(), m, sizeof m);
        return nb_error_set(NB_ERR_NOMEM,
                            "Miller indices h %d..%d k %d..%d l %d..%d would need a %s grid, more than the %s "
                            "this machine allows; refusing",
                            h_min, h_max, k_min, k_max, l_min, l_max, b, m);
    }
    size_t n = (size_t)nh * (size_t)nk * (size_t)nl;
    free(h->F);
    nb_status st = nb_calloc((void **)&h->F, n, sizeof(double), "the structure-factor grid");
    if (st) return st;
    if (fill != 0.0)
        for (size_t i = 0; i < n; i++) h->F[i] = fill;
    h->h_min = h_min, h->h_max = h_max, h->k_min = k_min, h->k_max = k_max, h->l_min = l_min, h->l_max = l_max;
    return NB_OK;
}

size_t nb_hkl_index(const nb_hkl *h, int hh, int kk, int ll)
{
    size_t nk = (size_t)(h->k_max - h->k_min + 1), nl = (size_t)(h->l_max - h->l_min + 1);
    return ((size_t)(hh - h->h_min) * nk + (size_t)(kk - h->k_min)) * nl + (size_t)(ll - h->l_min);
}

nb_status nb_hkl_to_record(const nb_hkl *h, nb_record *rec)
{
    nb_record_init(rec, "HKL");
    nb_hdr_set_long(rec, "HKLS", h->hkls);
    nb_hdr_set_double(rec, "DEFAULT_F", h->default_F);
    if (h->source) nb_hdr_set(rec, "SOURCE", h->source);
    if (!h->F) return NB_OK;
    nb_hdr_setf(rec, "H_RANGE", "%d %d", h->h_min, h->h_max);
    nb_hdr_setf(rec, "K_RANGE", "%d %d", h->k_min, h->k_max);
    nb_hdr_setf(rec, "L_RANGE", "%d %d", h->l_min, h->l_max);
    size_t n = (size_t)(h->h_max - h->h_min + 1) * (size_t)(h->k_max - h->k_min + 1) * (size_t)(h->l_max - h->l_min + 1);
    return nb_record_add_array(rec, "F", NB_F64, n, h->F, NULL);
}

static nb_status get_range(const nb_record *rec, const char *key, int *lo, int *hi)
{
    double v[2];
    char *s;
    nb_status st = nb_hdr_get_str(rec, key, &s);
    if (st) return st;
    int n = sscanf(s, "%lf %lf", &v[0], &v[1]);
    free(s);
    if (n != 2 || v[0] != floor(v[0]) || v[1] != floor(v[1]) || fabs(v[0]) > 1e7 || fabs(v[1]) > 1e7 || v[1] < v[0])
        return nb_error_set(NB_ERR_DATA, "HKL record: bad %s", key);
    *lo = (int)v[0];
    *hi = (int)v[1];
    return NB_OK;
}

nb_status nb_hkl_from_record(const nb_record *rec, nb_hkl *h)
{
    nb_status st;
    nb_hkl_init(h);
    if ((st = nb_hdr_get_long(rec, "HKLS", &h->hkls))) return st;
    if ((st = nb_hdr_get_double(rec, "DEFAULT_F", &h->default_F))) return st;
    if (!isfinite(h->default_F)) return nb_error_set(NB_ERR_DATA, "HKL record: DEFAULT_F is not finite");
    if (nb_hdr_has(rec, "SOURCE") && (st = nb_hdr_get_str(rec, "SOURCE", &h->source))) return st;
    if (!nb_record_has_array(rec, "F")) {
        if (h->hkls != 0) return nb_error_set(NB_ERR_DATA, "HKL record: HKLS=%ld but no F array", h->hkls);
        return NB_OK;
    }
    int r[6];
    if ((st = get_range(rec, "H_RANGE", &r[0], &r[1])) || (st = get_range(rec, "K_RANGE", &r[2], &r[3])) ||
        (st = get_range(rec, "L_RANGE", &r[4], &r[5])))
        goto fail;
    const void *data;
    size_t count;
    if ((st = nb_record_get_array(rec, "F", NB_F64, &data, &count))) goto fail;
    if ((st = nb_hkl_alloc(h, r[0], r[1], r[2], r[3], r[4], r[5], 0.0))) goto fail;
    size_t n = (size_t)(r[1] - r[0] + 1) * (size_t)(r[3] - r[2] + 1) * (size_t)(r[5] - r[4] + 1);
    if (count != n) {
        st = nb_error_set(NB_ERR_DATA, "HKL record: F array has %zu values, the index ranges need %zu", count, n);
        goto fail;
    }
    memcpy(h->F, data, n * sizeof(double));
    for (size_t i = 0; i < n; i++)
        if (!isfinite(h->F[i])) {
            st = nb_error_set(NB_ERR_DATA, "HKL record: F array holds a non-finite value");
            goto fail;
        }
    return NB_OK;
fail:
    nb_hkl_free(h);
    return st;
}

nb_fgrid nb_hkl_grid(const nb_hkl *h)
{
    nb_fgrid g;
    memset(&g, 0, sizeof g);
    g.default_F = h->default_F;
    g.hkls = h->F ? h->hkls : 0;
    if (h->F) {
        g.h_min = h->h_min, g.h_max = h->h_max, g.k_min = h->k_min, g.k_max = h->k_max;
        g.l_min = h->l_min, g.l_max = h->l_max;
        g.h_range = h->h_max - h->h_min + 1;
        g.k_range = h->k_max - h->k_min + 1;
        g.l_range = h->l_max - h->l_min + 1;
        g.F = h->F;
    }
    return g;
}
