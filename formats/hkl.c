/* hkl.c - structure-factor files: "h k l F" text as the reference reads it
 * (docs/deviations.md 2.1) and the Fdump.bin cache it writes and reads back
 * on a later run without -hkl (2.2). */
#include "hkl.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_util.h"

typedef struct refl {
    int h, k, l;
    double F;
} refl;

/* A number as strtod reads it.  The plain decimals of HKL files (at most 19
 * digits, no exponent) take Clinger's fast path: the digits as an exact
 * integer m < 2^53 divided by an exact power of ten 10^k, k <= 22, is the
 * correctly rounded value, bit for bit strtod's.  Anything else goes to
 * strtod.  (strtod was 60% of reading a 24,000-line file.) */
static double parse_number(const char *p, char **end)
{
    static const double pow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                   1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    const char *q = p;
    int negative = *q == '-';
    if (*q == '-' || *q == '+') q++;
    uint64_t m = 0;
    int digits = 0, frac = 0;
    for (; *q >= '0' && *q <= '9'; q++, digits++) m = m * 10 + (uint64_t)(*q - '0');
    if (*q == '.')
        for (q++; *q >= '0' && *q <= '9'; q++, digits++, frac++) m = m * 10 + (uint64_t)(*q - '0');
    /* no digits (inf, nan, garbage), too many, an exponent or a hex prefix
     * (or arithmetic in extended precision, which would round twice): strtod */
    if (FLT_EVAL_METHOD != 0 || digits == 0 || digits > 19 || m > ((uint64_t)1 << 53) || frac > 22 || *q == 'e' || *q == 'E' || *q == 'x' ||
        *q == 'X' || *q == 'p' || *q == 'P')
        return strtod(p, end);
    *end = (char *)q;
    double v = (double)m / pow10[frac];
    return negative ? -v : v;
}

/* Parse one data line: *is_data 1 for a reflection, 0 for a line to skip. */
static nb_status parse_line(const char *path, int lineno, char *line, refl *r, int *is_data)
{
    char *p = line + strspn(line, " \t\r");
    double v[4];
    *is_data = 0;
    if (*p == '\0' || *p == '#' || *p == '!') return NB_OK;
    for (int i = 0; i < 4; i++) {
        char *end;
        v[i] = parse_number(p, &end);
        if (end == p || (*end && !strchr(" \t\r,", *end)))
            return nb_error_set(NB_ERR_DATA, "'%s' line %d: expected 'h k l F', %s", path, lineno,
                                i == 0 ? "found text (comment lines start with '#')" : "found too few numbers");
        if (!isfinite(v[i]))
            return nb_error_set(NB_ERR_DATA, "'%s' line %d: column %d is not a finite number", path, lineno, i + 1);
        p = end + strspn(end, " \t\r,");
    }
    for (int i = 0; i < 3; i++)
        if (v[i] != floor(v[i]) || fabs(v[i]) > 1000000)
            return nb_error_set(NB_ERR_DATA, "'%s' line %d: Miller index %g is not a (reasonable) integer", path,
                                lineno, v[i]);
    r->h = (int)v[0];
    r->k = (int)v[1];
    r->l = (int)v[2];
    r->F = v[3];
    *is_data = 1;
    return NB_OK;
}

nb_status nb_hkl_read_text(const char *path, double default_F, nb_hkl *out)
{
    char *text;
    size_t len;
    nb_status st;
    nb_hkl_init(out);
    if ((st = nb_read_file(path, &text, &len))) return st;
    if (memchr(text, '\0', len)) {
        free(text);
        return nb_error_set(NB_ERR_DATA, "'%s' is not a text file of 'h k l F' lines", path);
    }
    /* the reflections in file order (a later line for the same index
     * wins), then the index box, then the grid */
    refl *list = NULL;
    size_t count = 0, cap = 0;
    int lineno = 0;
    char *cursor = text, *line;
    while ((line = strsep(&cursor, "\n")) != NULL) {
        refl r;
        int is_data;
        lineno++;
        if ((st = parse_line(path, lineno, line, &r, &is_data))) break;
        if (!is_data) continue;
        if (count == cap) {
            cap = cap ? 2 * cap : 4096;
            refl *grown = realloc(list, cap * sizeof *list);
            if (!grown) {
                st = nb_error_set(NB_ERR_NOMEM, "'%s': out of memory for %zu reflections", path, cap);
                break;
            }
            list = grown;
        }
        list[count++] = r;
    }
    free(text);
    if (!st && count == 0) st = nb_error_set(NB_ERR_DATA, "'%s': no reflections (expected lines 'h k l F')", path);
    if (st) {
        free(list);
        return st;
    }
    int hmin = list[0].h, hmax = list[0].h, kmin = list[0].k, kmax = list[0].k, lmin = list[0].l, lmax = list[0].l;
    for (size_t i = 1; i < count; i++) {
        if (list[i].h < hmin) hmin = list[i].h;
        if (list[i].h > hmax) hmax = list[i].h;
        if (list[i].k < kmin) kmin = list[i].k;
        if (list[i].k > kmax) kmax = list[i].k;
        if (list[i].l < lmin) lmin = list[i].l;
        if (list[i].l > lmax) lmax = list[i].l;
    }
    if ((st = nb_hkl_alloc(out, hmin, hmax, kmin, kmax, lmin, lmax, default_F))) {
        free(list);
        return nb_error_prefix(st, "'%s'", path);
    }
    for (size_t i = 0; i < count; i++) out->F[nb_hkl_index(out, list[i].h, list[i].k, list[i].l)] = list[i].F;
    free(list);
    out->hkls = (long)count;
    out->default_F = default_F;
    out->source = nb_xstrdup(path);
    return NB_OK;
}

nb_status nb_hkl_write_fdump(const nb_hkl *h, const char *path)
{
    nb_outfile *of;
    nb_status st;
    if (!h->F) return nb_error_set(NB_ERR_DATA, "no structure-factor grid to write to '%s'", path);
    if ((st = nb_outfile_open(&of, path, 0))) return st;
    FILE *fp = nb_outfile_fp(of);
    int hr = h->h_max - h->h_min + 1, kr = h->k_max - h->k_min + 1, lr = h->l_max - h->l_min + 1;
    fprintf(fp, "%d %d %d %d %d %d\n\f", h->h_min, h->h_max, h->k_min, h->k_max, h->l_min, h->l_max);
    double *row = calloc((size_t)lr + 1, sizeof(double));
    if (!row) {
        nb_outfile_abort(of);
        return nb_error_set(NB_ERR_NOMEM, "out of memory");
    }
    /* one spare slab per axis, as the reference's grid has */
    for (int i = 0; i <= hr; i++)
        for (int j = 0; j <= kr; j++) {
            memset(row, 0, ((size_t)lr + 1) * sizeof(double));
            if (i < hr && j < kr) memcpy(row, h->F + nb_hkl_index(h, h->h_min + i, h->k_min + j, h->l_min), (size_t)lr * sizeof(double));
            fwrite(row, sizeof(double), (size_t)lr + 1, fp);
        }
    free(row);
    return nb_outfile_commit(of);
}

nb_status nb_hkl_read_fdump(const char *path, double default_F, nb_hkl *out)
{
    char *data;
    size_t len;
    nb_status st;
    int r[6];
    nb_hkl_init(out);
    if ((st = nb_read_file(path, &data, &len))) return st;
    /* the text line ends at the first "\n\f" */
    char *ff = NULL;
    for (size_t i = 0; i + 1 < len && i < 256; i++)
        if (data[i] == '\n' && data[i + 1] == '\f') {
            ff = data + i;
            break;
        }
    char extra;
    if (!ff) goto bad;
    *ff = '\0';
    if (sscanf(data, "%d %d %d %d %d %d %c", &r[0], &r[1], &r[2], &r[3], &r[4], &r[5], &extra) != 6) goto bad;
    if ((st = nb_hkl_alloc(out, r[0], r[1], r[2], r[3], r[4], r[5], 0.0))) {
        free(data);
        return nb_error_prefix(st, "'%s'", path);
    }
    size_t hr = (size_t)(r[1] - r[0] + 1), kr = (size_t)(r[3] - r[2] + 1), lr = (size_t)(r[5] - r[4] + 1);
    size_t offset = (size_t)(ff - data) + 2;
    size_t want = (hr + 1) * (kr + 1) * (lr + 1) * sizeof(double);
    if (len - offset != want) {
        nb_hkl_free(out);
        free(data);
        return nb_error_set(NB_ERR_DATA, "'%s': Fdump holds %zu bytes of F values, its header needs %zu%s", path,
                            len - offset, want, len - offset < want ? " (truncated)" : "");
    }
    const unsigned char *p = (const unsigned char *)data + offset;
    for (size_t i = 0; i < hr; i++)
        for (size_t j = 0; j < kr; j++) {
            const unsigned char *row = p + ((i * (kr + 1) + j) * (lr + 1)) * sizeof(double);
            memcpy(out->F + nb_hkl_index(out, r[0] + (int)i, r[2] + (int)j, r[4]), row, lr * sizeof(double));
        }
    free(data);
    for (size_t i = 0; i < hr * kr * lr; i++)
        if (!isfinite(out->F[i])) {
            nb_hkl_free(out);
            return nb_error_set(NB_ERR_DATA, "'%s': Fdump holds a non-finite F value", path);
        }
    out->hkls = (long)(hr * kr * lr);
    out->default_F = default_F;
    out->source = nb_xstrdup(path);
    return NB_OK;
bad:
    free(data);
    return nb_error_set(NB_ERR_DATA, "'%s' is not an Fdump file (no 'h_min h_max k_min k_max l_min l_max' line)",
                        path);
}
