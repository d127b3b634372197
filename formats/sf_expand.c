/* sf_expand.c - the part the structure-factor files of the field (MTZ,
 * mmCIF) share: which kind a file is (by its first bytes), the -column rule,
 * and the expansion of an asymmetric unit's values by the space group's
 * operators to every P1 index with its Friedel mate, or F(+) and F(-) apart,
 * into the dense grid of the HKL record.  Values are copied, never
 * recomputed.  No CCP4 here: the readers give the operators as matrices. */
#include "sf_expand.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_util.h"

nb_status nb_sf_detect(const char *path, nb_sf_format *fmt)
{
    char buf[4096];
    *fmt = NB_SF_TEXT;
    if (!strcmp(path, "-")) return NB_OK; /* standard input: the text list, as before */
    FILE *fp = fopen(path, "rb");
    if (!fp) return nb_error_set(NB_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    size_t n = fread(buf, 1, sizeof buf - 1, fp);
    fclose(fp);
    buf[n] = '\0';
    *fmt = NB_SF_TEXT;
    if (n >= 4 && !memcmp(buf, "MTZ ", 4)) {
        *fmt = NB_SF_MTZ;
        return NB_OK;
    }
    /* the first token of a CIF is its first data block's name, after blank
     * lines and comments (a '#\#CIF_2.0' magic line included) */
    const char *p = buf;
    for (;;) {
        p += strspn(p, " \t\r\n");
        if (*p != '#') break;
        p = strchr(p, '\n');
        if (!p) return NB_OK;
    }
    if (!strncasecmp(p, "data_", 5)) *fmt = NB_SF_CIF;
    return NB_OK;
}

const char *nb_sf_format_name(nb_sf_format fmt)
{
    return fmt == NB_SF_MTZ ? "MTZ" : fmt == NB_SF_CIF ? "mmCIF" : "'h k l F' text";
}

/* ---- the -column rule ----------------------------------------------------- */

static int is_half(char type) { return type == 'G' || type == 'K'; }

/* The partner of an anomalous column by its name: NAME(+) <-> NAME(-),
 * NAME_plus <-> NAME_minus; -1 if none. */
static int partner(const nb_sf_col *cols, int ncols, int i)
{
    static const char *pairs[][2] = {{"(+)", "(-)"}, {"_plus", "_minus"}, {"PLUS", "MINUS"}};
    const char *name = cols[i].name;
    size_t len = strlen(name);
    for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++)
        for (int s = 0; s < 2; s++) {
            size_t sl = strlen(pairs[p][s]);
            if (len < sl || strcmp(name + len - sl, pairs[p][s])) continue;
            char other[256];
            snprintf(other, sizeof other, "%.*s%s", (int)(len - sl), name, pairs[p][!s]);
            for (int j = 0; j < ncols; j++)
                if (j != i && cols[j].type == cols[i].type && !strcmp(cols[j].name, other)) return j;
        }
    return -1;
}

/* The pair with column i as its F(+) or F(-) half, in *pick. */
static int pair_of(const nb_sf_col *cols, int ncols, int i, nb_sf_pick *pick)
{
    int j = partner(cols, ncols, i);
    if (j < 0) return 0;
    const char *n = cols[i].name;
    size_t len = strlen(n);
    int i_is_plus = (len >= 3 && !strcmp(n + len - 3, "(+)")) || (len >= 5 && !strcmp(n + len - 5, "_plus")) ||
                    (len >= 4 && !strcmp(n + len - 4, "PLUS"));
    pick->plus = i_is_plus ? i : j;
    pick->minus = i_is_plus ? j : i;
    pick->type = cols[i].type;
    return 1;
}

/* "FP (F), FC (F), I (J), F(+),F(-) (G pair)" */
static void list_candidates(const nb_sf_col *cols, int ncols, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < ncols && used + 1 < size; i++) {
        nb_sf_pick p;
        const char *sep = used ? ", " : "";
        if (!is_half(cols[i].type))
            used += (size_t)snprintf(buf + used, size - used, "%s%s (%c)", sep, cols[i].name, cols[i].type);
        else if (!pair_of(cols, ncols, i, &p))
            used += (size_t)snprintf(buf + used, size - used, "%s%s (%c, its partner unknown: name the pair "
                                     "as PLUS,MINUS)", sep, cols[i].name, cols[i].type);
        else if (p.plus == i)
            used += (size_t)snprintf(buf + used, size - used, "%s%s,%s (%c pair)", sep, cols[p.plus].name,
                                     cols[p.minus].name, cols[i].type);
    }
    if (used >= size && size > 4) strcpy(buf + size - 4, "...");
}

static int find_col(const nb_sf_col *cols, int ncols, const char *name)
{
    for (int i = 0; i < ncols; i++)
        if (!strcmp(cols[i].name, name)) return i;
    return -1;
}

/* "PLUS,MINUS": two anomalous columns of one type */
static nb_status choose_pair(const char *path, const nb_sf_col *cols, int ncols, const char *want, nb_sf_pick *pick,
                             const char *cands)
{
    char a[256];
    const char *comma = strchr(want, ',');
    snprintf(a, sizeof a, "%.*s", (int)(comma - want), want);
    int i = find_col(cols, ncols, a), j = find_col(cols, ncols, comma + 1);
    if (i < 0 || j < 0)
        return nb_error_set(NB_ERR_USAGE, "-column %s: '%s' has no column '%s' (its columns: %s)", want, path,
                            i < 0 ? a : comma + 1, cands);
    if (!is_half(cols[i].type) || cols[j].type != cols[i].type || i == j)
        return nb_error_set(NB_ERR_USAGE,
                            "-column %s: a pair is two anomalous columns of one type (G: F(+),F(-); K: I(+),I(-)); "
                            "'%s' has %s (%c) and %s (%c)", want, path, a, cols[i].type, comma + 1, cols[j].type);
    pick->plus = i, pick->minus = j, pick->type = cols[i].type;
    return NB_OK;
}

nb_status nb_sf_choose(const char *path, const nb_sf_col *cols, int ncols, const char *want, nb_sf_pick *pick)
{
    char cands[1024];
    list_candidates(cols, ncols, cands, sizeof cands);
    if (ncols == 0) return nb_error_set(NB_ERR_DATA, "'%s' has no amplitude or intensity column", path);
    pick->minus = -1;
    if (!want) {
        int n = 0;
        for (int i = 0; i < ncols; i++)
            if (cols[i].type == 'F') n++, pick->plus = i, pick->type = 'F';
        if (n == 1) return NB_OK;
        return nb_error_set(NB_ERR_USAGE, "'%s' has %s amplitude column (type F): choose with -column LABEL "
                            "among %s", path, n ? "more than one" : "no", cands);
    }
    if (strchr(want, ',')) return choose_pair(path, cols, ncols, want, pick, cands);
    int i = find_col(cols, ncols, want);
    if (i >= 0 && !is_half(cols[i].type)) {
        pick->plus = i, pick->type = cols[i].type;
        return NB_OK;
    }
    if (i >= 0 && pair_of(cols, ncols, i, pick)) return NB_OK;
    if (i >= 0)
        return nb_error_set(NB_ERR_USAGE, "-column %s: an anomalous column without a partner by name; give the "
                            "pair as -column PLUS,MINUS (%s)", want, cands);
    /* the stem of a pair: F for F(+),F(-) */
    static const char *plus[] = {"(+)", "_plus", "PLUS"};
    for (size_t s = 0; s < sizeof plus / sizeof plus[0]; s++) {
        char name[256];
        snprintf(name, sizeof name, "%s%s", want, plus[s]);
        if ((i = find_col(cols, ncols, name)) >= 0 && is_half(cols[i].type) && pair_of(cols, ncols, i, pick))
            return NB_OK;
    }
    return nb_error_set(NB_ERR_USAGE, "-column %s: '%s' has no such column (its columns: %s)", want, path, cands);
}

/* ---- the reflections and operators --------------------------------------- */

void nb_sf_data_init(nb_sf_data *d) { memset(d, 0, sizeof *d); }

void nb_sf_data_free(nb_sf_data *d)
{
    free(d->refl);
    nb_sf_data_init(d);
}

nb_status nb_sf_add(nb_sf_data *d, int h, int k, int l, char part, double F)
{
    if (d->n == d->cap) {
        size_t cap = d->cap ? 2 * d->cap : 4096;
        nb_sf_refl *grown = realloc(d->refl, cap * sizeof *grown);
        if (!grown) return nb_error_set(NB_ERR_NOMEM, "out of memory for %zu reflections", cap);
        d->refl = grown, d->cap = cap;
    }
    d->refl[d->n++] = (nb_sf_refl){h, k, l, part, F};
    return NB_OK;
}

nb_status nb_sf_add_op(nb_sf_data *d, const double R[3][3], const double t[3])
{
    if (d->nops == NB_SF_MAX_OPS) return nb_error_set(NB_ERR_DATA, "more than %d symmetry operators", NB_SF_MAX_OPS);
    nb_sf_op *op = &d->ops[d->nops];
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 3; j++) {
            if (R[i][j] != nearbyint(R[i][j]) || fabs(R[i][j]) > 1)
                return nb_error_set(NB_ERR_DATA, "a symmetry operator's matrix holds %g, not -1, 0 or 1", R[i][j]);
            op->R[i][j] = (int)R[i][j];
        }
        op->t[i] = t[i];
    }
    d->nops++;
    return NB_OK;
}

double nb_sf_amplitude(double I) { return I > 0 ? sqrt(I) : 0.0; }

/* ---- expansion ---------------------------------------------------------- */

/* h' = h R, negated for the other hand */
static void apply(const nb_sf_op *op, const int h[3], int sign, int out[3])
{
    for (int j = 0; j < 3; j++) out[j] = sign * (h[0] * op->R[0][j] + h[1] * op->R[1][j] + h[2] * op->R[2][j]);
}

/* The P1 indices a value goes to; returns their count (with repeats). */
static int orbit(const nb_sf_data *d, const nb_sf_refl *r, int out[][3])
{
    int h[3] = {r->h, r->k, r->l}, n = 0;
    for (int i = 0; i < d->nops; i++) {
        apply(&d->ops[i], h, r->part == '-' ? -1 : 1, out[n++]);
        if (r->part == 0) apply(&d->ops[i], h, -1, out[n++]);
    }
    return n;
}

static int is_centric(const nb_sf_data *d, const int h[3])
{
    for (int i = 0; i < d->nops; i++) {
        int o[3];
        apply(&d->ops[i], h, 1, o);
        if (o[0] == -h[0] && o[1] == -h[1] && o[2] == -h[2]) return 1;
    }
    return 0;
}

/* absent: an operator keeps h and shifts its phase (h.t not an integer) */
static int is_sysabs(const nb_sf_data *d, const int h[3])
{
    for (int i = 0; i < d->nops; i++) {
        int o[3];
        apply(&d->ops[i], h, 1, o);
        if (o[0] != h[0] || o[1] != h[1] || o[2] != h[2]) continue;
        double ht = h[0] * d->ops[i].t[0] + h[1] * d->ops[i].t[1] + h[2] * d->ops[i].t[2];
        if (fabs(ht - nearbyint(ht)) > 1e-4) return 1;
    }
    return 0;
}

/* 1/d^2 = h G* h, G* the inverse of the cell's metric G */
static int reciprocal_metric(const double cell[6], double gs[3][3])
{
    double rad = M_PI / 180, a = cell[0], b = cell[1], c = cell[2];
    double ca = cos(cell[3] * rad), cb = cos(cell[4] * rad), cg = cos(cell[5] * rad);
    double g[3][3] = {{a * a, a * b * cg, a * c * cb}, {a * b * cg, b * b, b * c * ca}, {a * c * cb, b * c * ca, c * c}};
    double det = g[0][0] * (g[1][1] * g[2][2] - g[1][2] * g[2][1]) - g[0][1] * (g[1][0] * g[2][2] - g[1][2] * g[2][0]) +
                 g[0][2] * (g[1][0] * g[2][1] - g[1][1] * g[2][0]);
    if (!(det > 0) || !isfinite(det)) return 0;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            int i1 = (j + 1) % 3, i2 = (j + 2) % 3, j1 = (i + 1) % 3, j2 = (i + 2) % 3;
            gs[i][j] = (g[i1][j1] * g[i2][j2] - g[i1][j2] * g[i2][j1]) / det;
        }
    return 1;
}

static double inv_d2(double gs[3][3], int h, int k, int l)
{
    double v[3] = {h, k, l}, s = 0;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) s += v[i] * gs[i][j] * v[j];
    return s;
}

/* Grid points no value reached inside the file's resolution (the whole box
 * without a cell), neither 0 0 0 nor absent by symmetry. */
static long count_missing(const nb_sf_data *d, const nb_hkl *g, const int32_t *owner, double s2max, nb_sf_stats *st)
{
    double gs[3][3];
    int have = d->have_cell && reciprocal_metric(d->cell, gs);
    long missing = 0;
    st->d_min = have && s2max > 0 ? 1 / sqrt(s2max) : 0;
    for (int h = g->h_min; h <= g->h_max; h++)
        for (int k = g->k_min; k <= g->k_max; k++)
            for (int l = g->l_min; l <= g->l_max; l++) {
                if (owner[nb_hkl_index(g, h, k, l)] || (!h && !k && !l)) continue;
                /* on the limit's sphere itself programs' d_min tests round
                 * either way: only the indices inside it count */
                if (have && inv_d2(gs, h, k, l) >= s2max * (1 - 1e-9)) continue;
                int v[3] = {h, k, l};
                if (!is_sysabs(d, v)) missing++;
            }
    return missing;
}

/* the P1 box of every value's indices, and the file's resolution (1/d^2) */
static void index_box(const nb_sf_data *d, int box[6], double *s2max)
{
    int o[2 * NB_SF_MAX_OPS][3];
    double gs[3][3];
    int have = d->have_cell && reciprocal_metric(d->cell, gs);
    *s2max = 0;
    box[0] = box[2] = box[4] = INT32_MAX;
    box[1] = box[3] = box[5] = INT32_MIN;
    for (size_t i = 0; i < d->n; i++) {
        int n = orbit(d, &d->refl[i], o);
        for (int m = 0; m < n; m++)
            for (int a = 0; a < 3; a++) {
                if (o[m][a] < box[2 * a]) box[2 * a] = o[m][a];
                if (o[m][a] > box[2 * a + 1]) box[2 * a + 1] = o[m][a];
            }
        if (have) {
            double s2 = inv_d2(gs, d->refl[i].h, d->refl[i].k, d->refl[i].l);
            if (s2 > *s2max) *s2max = s2;
        }
    }
}

nb_status nb_sf_expand(const nb_sf_data *d, const char *path, double default_F, nb_hkl *out, nb_sf_stats *st)
{
    int o[2 * NB_SF_MAX_OPS][3];
    int box[6];
    double s2max;
    nb_status s;
    memset(st, 0, sizeof *st);
    nb_hkl_init(out);
    if (d->n == 0) return nb_error_set(NB_ERR_DATA, "'%s': no reflections with a value in %s", path, d->column);
    if (d->nops == 0) return nb_error_set(NB_ERR_DATA, "'%s': no symmetry operators", path);
    index_box(d, box, &s2max);
    if ((s = nb_hkl_alloc(out, box[0], box[1], box[2], box[3], box[4], box[5], default_F)))
        return nb_error_prefix(s, "'%s'", path);
    size_t cells = (size_t)(box[1] - box[0] + 1) * (size_t)(box[3] - box[2] + 1) * (size_t)(box[5] - box[4] + 1);
    int32_t *owner;
    if ((s = nb_calloc((void **)&owner, cells, sizeof *owner, "the structure-factor grid's bookkeeping"))) {
        nb_hkl_free(out);
        return s;
    }
    for (size_t i = 0; i < d->n; i++) {
        const nb_sf_refl *r = &d->refl[i];
        int h[3] = {r->h, r->k, r->l};
        /* a centric reflection's two hands are one reflection: F(+) */
        if (r->part == '-' && is_centric(d, h)) {
            st->centric_minus++;
            continue;
        }
        st->read++;
        int n = orbit(d, r, o);
        for (int m = 0; m < n; m++) {
            size_t at = nb_hkl_index(out, o[m][0], o[m][1], o[m][2]);
            if (owner[at] && owner[at] != (int32_t)(i + 1) && out->F[at] != r->F) st->conflicts++;
            if (!owner[at]) st->p1++;
            out->F[at] = r->F;
            owner[at] = (int32_t)(i + 1);
        }
    }
    st->missing = count_missing(d, out, owner, s2max, st);
    free(owner);
    out->hkls = st->p1;
    out->default_F = default_F;
    out->source = nb_xstrdup(path);
    return NB_OK;
}
