/* sf_cif.c - a small CIF reader for mmCIF structure-factor files: tokens
 * (bare words, 'quoted', "quoted", ;text fields;, # comments), the first
 * data block with a _refln loop, its items picked by the -column rule
 * (sf_expand.c), the _cell.* values and the space group's name, whose
 * operators CCP4's csymlib gives (ccp4.c).  Not a general CIF library: save
 * frames, global_ and CIF 2 lists are not read. */
#include "sf_cif.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccp4.h"
#include "nb_util.h"

typedef struct tok {
    const char *s;
    int len, quoted;
} tok;

typedef struct lexer {
    const char *start, *p, *end, *path;
    int line;
} lexer;

/* The next token: 0 at the end, -1 on an unterminated quote or text field. */
static int next(lexer *lx, tok *t)
{
    for (;;) {
        while (lx->p < lx->end && isspace((unsigned char)*lx->p)) lx->line += *lx->p++ == '\n';
        if (lx->p >= lx->end) return 0;
        if (*lx->p != '#') break;
        while (lx->p < lx->end && *lx->p != '\n') lx->p++;
    }
    const char *s = lx->p;
    int bol = s == lx->start || s[-1] == '\n';
    if (*s == ';' && bol) { /* a text field: to the next line starting with ';' */
        const char *q = s + 1;
        while (q < lx->end && !(q[0] == ';' && q[-1] == '\n')) lx->line += *q++ == '\n';
        if (q >= lx->end) return -1;
        *t = (tok){s + 1, (int)(q - s - 1), 1};
        lx->p = q + 1;
        return 1;
    }
    if (*s == '\'' || *s == '"') { /* ends at the same quote before white space */
        const char *q = s + 1;
        while (q < lx->end && !(*q == *s && (q + 1 == lx->end || isspace((unsigned char)q[1])))) {
            if (*q == '\n') return -1;
            q++;
        }
        if (q >= lx->end) return -1;
        *t = (tok){s + 1, (int)(q - s - 1), 1};
        lx->p = q + 1;
        return 1;
    }
    const char *q = s;
    while (q < lx->end && !isspace((unsigned char)*q)) q++;
    *t = (tok){s, (int)(q - s), 0};
    lx->p = q;
    return 1;
}

static int is_word(const tok *t, const char *w)
{
    size_t n = strlen(w);
    return !t->quoted && (size_t)t->len >= n && !strncasecmp(t->s, w, n);
}

static int is_reserved(const tok *t)
{
    return !t->quoted && (t->s[0] == '_' || is_word(t, "loop_") || is_word(t, "data_") || is_word(t, "save_") ||
                          is_word(t, "global_") || is_word(t, "stop_"));
}

static int name_is(const tok *t, const char *name)
{
    return !t->quoted && (size_t)t->len == strlen(name) && !strncasecmp(t->s, name, (size_t)t->len);
}

/* what the reader keeps of the file */
typedef struct cif_doc {
    tok *names, *values; /* the _refln loop */
    int nnames;
    size_t nvalues, cap;
    double cell[6];
    int have_cell[6];
    char spacegroup[64];
} cif_doc;

static void take_pair(cif_doc *doc, const tok *name, const tok *value)
{
    static const char *cell[] = {"_cell.length_a", "_cell.length_b", "_cell.length_c",
                                 "_cell.angle_alpha", "_cell.angle_beta", "_cell.angle_gamma"};
    for (int i = 0; i < 6; i++)
        if (name_is(name, cell[i])) {
            char buf[64];
            snprintf(buf, sizeof buf, "%.*s", value->len < 63 ? value->len : 63, value->s);
            char *end;
            doc->cell[i] = strtod(buf, &end);
            doc->have_cell[i] = end != buf && isfinite(doc->cell[i]) && doc->cell[i] > 0;
        }
    if (name_is(name, "_symmetry.space_group_name_H-M") ||
        (name_is(name, "_space_group.name_H-M_alt") && !doc->spacegroup[0]))
        snprintf(doc->spacegroup, sizeof doc->spacegroup, "%.*s", value->len < 63 ? value->len : 63, value->s);
}

/* A loop: its names, then its values up to the next reserved word (left in
 * *t, *have set).  The first _refln loop is kept. */
static nb_status read_loop(lexer *lx, cif_doc *doc, tok *t, int *have)
{
    tok names[256];
    int n = 0, r;
    while ((r = next(lx, t)) > 0 && !t->quoted && t->s[0] == '_') {
        if (n == 256) return nb_error_set(NB_ERR_DATA, "'%s' line %d: a loop of more than 256 items", lx->path, lx->line);
        names[n++] = *t;
    }
    if (r < 0) return nb_error_set(NB_ERR_DATA, "'%s' line %d: an unterminated quote", lx->path, lx->line);
    int keep = n > 0 && !doc->names && names[0].len > 7 && !strncasecmp(names[0].s, "_refln.", 7);
    size_t count = 0;
    for (*have = r; *have > 0 && !is_reserved(t); *have = next(lx, t), count++) {
        if (!keep) continue;
        if (doc->nvalues == doc->cap) {
            size_t cap = doc->cap ? 2 * doc->cap : 65536;
            tok *grown = realloc(doc->values, cap * sizeof *grown);
            if (!grown) return nb_error_set(NB_ERR_NOMEM, "'%s': out of memory for its _refln loop", lx->path);
            doc->values = grown, doc->cap = cap;
        }
        doc->values[doc->nvalues++] = *t;
    }
    if (*have < 0) return nb_error_set(NB_ERR_DATA, "'%s' line %d: an unterminated quote", lx->path, lx->line);
    if (n && count % (size_t)n)
        return nb_error_set(NB_ERR_DATA, "'%s' line %d: a loop of %d items holds %zu values, not a multiple",
                            lx->path, lx->line, n, count);
    if (keep) {
        if (!(doc->names = malloc((size_t)n * sizeof *names)))
            return nb_error_set(NB_ERR_NOMEM, "out of memory");
        memcpy(doc->names, names, (size_t)n * sizeof *names);
        doc->nnames = n;
    }
    return NB_OK;
}

/* The first data block with a _refln loop, its cell and space group. */
static nb_status read_doc(const char *path, const char *text, size_t len, cif_doc *doc)
{
    lexer lx = {text, text, text + len, path, 1};
    tok t, value;
    int have = next(&lx, &t);
    nb_status st;
    while (have > 0) {
        if (is_word(&t, "data_")) {
            if (doc->names) break;
            memset(doc->cell, 0, sizeof doc->cell);
            memset(doc->have_cell, 0, sizeof doc->have_cell);
            doc->spacegroup[0] = '\0';
        } else if (is_word(&t, "loop_") && t.len == 5) {
            if ((st = read_loop(&lx, doc, &t, &have))) return st;
            continue;
        } else if (!t.quoted && t.s[0] == '_') {
            int r = next(&lx, &value);
            if (r <= 0) return nb_error_set(NB_ERR_DATA, "'%s' line %d: %.*s has no value", path, lx.line, t.len, t.s);
            take_pair(doc, &t, &value);
        }
        have = next(&lx, &t);
    }
    if (have < 0) return nb_error_set(NB_ERR_DATA, "'%s' line %d: an unterminated quote", path, lx.line);
    if (!doc->names) return nb_error_set(NB_ERR_DATA, "'%s': no _refln loop (not an mmCIF reflection file)", path);
    return NB_OK;
}

static char item_type(const char *item)
{
    static const struct {
        const char *name;
        char type;
    } items[] = {{"f_meas_au", 'F'},        {"f_meas", 'F'},          {"f_calc", 'F'},
                 {"f_calc_au", 'F'},        {"intensity_meas", 'J'},  {"intensity_calc", 'J'},
                 {"f_squared_meas", 'J'},   {"f_squared_calc", 'J'},  {"pdbx_f_plus", 'G'},
                 {"pdbx_f_minus", 'G'},     {"pdbx_i_plus", 'K'},     {"pdbx_i_minus", 'K'}};
    for (size_t i = 0; i < sizeof items / sizeof items[0]; i++)
        if (!strcmp(item, items[i].name)) return items[i].type;
    return 0;
}

/* a value: '?' or '.' missing (*missing), else a number with an optional
 * standard uncertainty "12.3(4)" */
static int number(const tok *t, double *v, int *missing)
{
    char buf[64], *end;
    *missing = !t->quoted && t->len == 1 && (t->s[0] == '?' || t->s[0] == '.');
    if (*missing) return 1;
    if (t->len >= 63) return 0;
    snprintf(buf, sizeof buf, "%.*s", t->len, t->s);
    *v = strtod(buf, &end);
    if (*end == '(') end += strcspn(end, ")") + (end[strcspn(end, ")")] ? 1 : 0);
    return end != buf && *end == '\0' && isfinite(*v);
}

/* the loop's items -column may name (lowercased, without "_refln.") */
typedef struct cif_cols {
    char names[256][72];
    int at[256]; /* the item's position in the loop */
    nb_sf_col list[256];
    int n, hkl[3];
} cif_cols;

static nb_status columns(const char *path, const cif_doc *doc, cif_cols *c)
{
    static const char *index[] = {"index_h", "index_k", "index_l"};
    c->n = 0;
    c->hkl[0] = c->hkl[1] = c->hkl[2] = -1;
    for (int i = 0; i < doc->nnames; i++) {
        char item[72];
        const tok *t = &doc->names[i];
        if (t->len <= 7 || strncasecmp(t->s, "_refln.", 7)) continue;
        int len = t->len - 7 < 71 ? t->len - 7 : 71;
        for (int j = 0; j < len; j++) item[j] = (char)tolower((unsigned char)t->s[7 + j]);
        item[len] = '\0';
        for (int a = 0; a < 3; a++)
            if (!strcmp(item, index[a])) c->hkl[a] = i;
        char type = item_type(item);
        if (!type) continue;
        strcpy(c->names[c->n], item);
        c->list[c->n] = (nb_sf_col){c->names[c->n], type};
        c->at[c->n++] = i;
    }
    if (c->hkl[0] < 0 || c->hkl[1] < 0 || c->hkl[2] < 0)
        return nb_error_set(NB_ERR_DATA, "'%s': the _refln loop has no _refln.index_h, index_k, index_l", path);
    return NB_OK;
}

static nb_status take_values(const char *path, const cif_doc *doc, const cif_cols *c, const nb_sf_pick *p,
                             nb_sf_data *d)
{
    size_t rows = doc->nvalues / (size_t)doc->nnames;
    for (size_t r = 0; r < rows; r++) {
        const tok *row = doc->values + r * (size_t)doc->nnames;
        int h[3], missing;
        double v;
        for (int a = 0; a < 3; a++) {
            if (!number(&row[c->hkl[a]], &v, &missing) || missing || v != nearbyint(v) || fabs(v) > 1e6)
                return nb_error_set(NB_ERR_DATA, "'%s': _refln row %zu: the Miller index '%.*s' is not an integer",
                                    path, r + 1, row[c->hkl[a]].len, row[c->hkl[a]].s);
            h[a] = (int)v;
        }
        for (int half = 0; half < (p->minus >= 0 ? 2 : 1); half++) {
            const tok *t = &row[c->at[half ? p->minus : p->plus]];
            if (!number(t, &v, &missing))
                return nb_error_set(NB_ERR_DATA, "'%s': _refln row %zu: '%.*s' is not a number", path, r + 1, t->len,
                                    t->s);
            if (missing) {
                d->unread++;
                continue;
            }
            if (d->type == 'J' || d->type == 'K') v = nb_sf_amplitude(v);
            char part = p->minus < 0 ? 0 : half ? '-' : '+';
            nb_status st = nb_sf_add(d, h[0], h[1], h[2], part, v);
            if (st) return st;
        }
    }
    return NB_OK;
}

static nb_status parse(const char *path, const char *text, size_t len, const char *column, nb_sf_data *d,
                       cif_doc *doc)
{
    nb_status st = read_doc(path, text, len, doc);
    if (st) return st;
    cif_cols *c = malloc(sizeof *c);
    if (!c) return nb_error_set(NB_ERR_NOMEM, "out of memory");
    char want[80];
    nb_sf_pick p;
    if (column) { /* items compare in lower case, without their category */
        const char *w = strncasecmp(column, "_refln.", 7) ? column : column + 7;
        size_t n = strlen(w) < sizeof want - 1 ? strlen(w) : sizeof want - 1;
        for (size_t i = 0; i < n; i++) want[i] = (char)tolower((unsigned char)w[i]);
        want[n] = '\0';
    }
    if (!(st = columns(path, doc, c)) && !(st = nb_sf_choose(path, c->list, c->n, column ? want : NULL, &p))) {
        d->type = p.type;
        const char *what = p.type == 'F' ? "amplitudes" : p.type == 'J' ? "intensities: F = sqrt(max(I, 0))"
                           : p.type == 'G' ? "anomalous amplitudes F(+),F(-)"
                                           : "anomalous intensities I(+),I(-): F = sqrt(max(I, 0))";
        if (p.minus < 0)
            snprintf(d->column, sizeof d->column, "item _refln.%s (%s)", c->names[p.plus], what);
        else
            snprintf(d->column, sizeof d->column, "items _refln.%s,%s (%s)", c->names[p.plus], c->names[p.minus],
                     what);
        st = take_values(path, doc, c, &p, d);
    }
    free(c);
    int cells = 0;
    for (int i = 0; i < 6; i++) cells += doc->have_cell[i], d->cell[i] = doc->cell[i];
    d->have_cell = cells == 6;
    return st;
}

nb_status nb_sf_cif_parse(const char *path, const char *text, size_t len, const char *column, nb_sf_data *d,
                          char *spacegroup)
{
    cif_doc doc;
    memset(&doc, 0, sizeof doc);
    nb_sf_data_init(d);
    nb_status st = parse(path, text, len, column, d, &doc);
    snprintf(spacegroup, 64, "%s", doc.spacegroup);
    free(doc.names);
    free(doc.values);
    if (st) nb_sf_data_free(d);
    return st;
}

nb_status nb_sf_cif_read(const char *path, const char *column, nb_sf_data *d)
{
    char *text, name[64];
    size_t len;
    nb_status st = nb_read_file(path, &text, &len);
    if (st) return st;
    st = nb_sf_cif_parse(path, text, len, column, d, name);
    free(text);
    if (!st && !name[0])
        st = nb_error_set(NB_ERR_DATA, "'%s': no space group (_symmetry.space_group_name_H-M or "
                          "_space_group.name_H-M_alt)", path);
    if (!st) st = nb_ccp4_spacegroup(path, name, d);
    if (st) nb_sf_data_free(d);
    return st;
}
