/* stol.c - the reader of amorphous tables (nonBragg's .stol files): two
 * numeric columns, x (sin(theta)/lambda, or 4 sin(theta)/lambda or Q as the
 * flag that names the file says) and F of one molecule, in nonBragg's
 * delimiters; comments, blank lines and extra columns skipped (stol.h). */
#include "stol.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nb_util.h"

static int is_delimiter(char c) { return c == ' ' || c == '\t' || c == ',' || c == ';' || c == ':' || c == '!' || c == '\r'; }

/* The length of the word at p (up to a delimiter or end). */
static size_t word_length(const char *p, const char *end)
{
    size_t n = 0;
    while (p + n < end && !is_delimiter(p[n])) n++;
    return n;
}

/* One number at *p (strtod), which must end at a delimiter or the line's
 * end; *p moves past it and the delimiters after it. */
static int take_number(const char **p, const char *end, double *v)
{
    char buf[128];
    size_t n = word_length(*p, end);
    if (n == 0 || n >= sizeof buf) return 0;
    memcpy(buf, *p, n);
    buf[n] = '\0';
    char *stop;
    *v = strtod(buf, &stop);
    if (*stop != '\0' || !isfinite(*v)) return 0;
    *p += n;
    while (*p < end && is_delimiter(**p)) (*p)++;
    return 1;
}

/* A growing table's room for one more row. */
static nb_status room(nb_stol_table *t, int *cap)
{
    if (t->n < *cap) return NB_OK;
    if (*cap >= INT_MAX / 2) return nb_error_set(NB_ERR_DATA, "more than %d rows", *cap);
    int c = *cap ? 2 * *cap : 256;
    double *x = realloc(t->x, (size_t)c * sizeof *x);
    if (x) t->x = x;
    double *F = realloc(t->F, (size_t)c * sizeof *F);
    if (F) t->F = F;
    int *line = realloc(t->line, (size_t)c * sizeof *line);
    if (line) t->line = line;
    if (!x || !F || !line) return nb_error_set(NB_ERR_NOMEM, "out of memory for the table");
    *cap = c;
    return NB_OK;
}

nb_status nb_stol_parse(const char *text, size_t len, const char *name, nb_stol_table *out)
{
    nb_stol_table t = {0, NULL, NULL, NULL};
    int cap = 0, lineno = 0;
    nb_status st = NB_OK;
    const char *p = text, *stop = text + len;
    while (p < stop && !st) {
        const char *eol = memchr(p, '\n', (size_t)(stop - p));
        if (!eol) eol = stop;
        lineno++;
        const char *q = p;
        while (q < eol && is_delimiter(*q)) q++;
        p = eol + 1;
        if (q == eol || *q == '#') continue;
        if (memchr(q, '\0', (size_t)(eol - q))) {
            st = nb_error_set(NB_ERR_DATA, "'%s' line %d: a NUL byte (not a text table)", name, lineno);
            break;
        }
        double x, F = NAN;
        if (!take_number(&q, eol, &x)) {
            int w = (int)word_length(q, eol);
            st = nb_error_set(NB_ERR_DATA, "'%s' line %d: '%.*s' is not a number (columns: sin(theta)/lambda, F)",
                              name, lineno, w < 40 ? w : 40, q);
            break;
        }
        if (q < eol && *q != '#' && !take_number(&q, eol, &F)) {
            int w = (int)word_length(q, eol);
            st = nb_error_set(NB_ERR_DATA, "'%s' line %d: F '%.*s' is not a number", name, lineno, w < 40 ? w : 40, q);
            break;
        }
        if ((st = room(&t, &cap))) break;
        t.x[t.n] = x, t.F[t.n] = F, t.line[t.n] = lineno;
        t.n++;
    }
    if (!st && t.n == 0) st = nb_error_set(NB_ERR_DATA, "'%s': no data in the table", name);
    if (st) {
        nb_stol_table_free(&t);
        return st;
    }
    *out = t;
    return NB_OK;
}

nb_status nb_stol_read(const char *path, nb_stol_table *out)
{
    char *text;
    size_t len;
    nb_status st = nb_read_file(path, &text, &len);
    if (st) return st;
    st = nb_stol_parse(text, len, path, out);
    free(text);
    return st;
}
