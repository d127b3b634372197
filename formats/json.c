/* json.c - a recursive-descent JSON parser (RFC 8259) for the detector files
 * of nb-geom -panels and the experiment lists nb-convert --join joins: small
 * files read whole, so a tree of values is simplest.  Depth is limited, so a
 * hostile file cannot exhaust the stack.  And the writer of such a tree. */
#include "json.h"

#include <stdlib.h>
#include <string.h>

#include "nb_util.h"

#define MAX_DEPTH 64

typedef struct parser {
    const char *p, *end, *start;
    const char *name;
} parser;

static nb_status fail(const parser *ps, const char *what)
{
    int line = 1;
    for (const char *c = ps->start; c < ps->p && c < ps->end; c++) line += *c == '\n';
    return nb_error_set(NB_ERR_DATA, "'%s': JSON error at line %d: %s", ps->name, line, what);
}

static void skip_ws(parser *ps)
{
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')) ps->p++;
}

static nb_status parse_value(parser *ps, nb_json *v, int depth);

/* Four hex digits at p (before end) as a code unit: 0, or -1 when not. */
static int hex4(const char *p, const char *end, unsigned *out)
{
    unsigned v = 0;
    if (end - p < 4) return -1;
    for (int i = 0; i < 4; i++) {
        const char c = p[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + (unsigned)d;
    }
    *out = v;
    return 0;
}

/* A \u escape (the "\u" read already) as UTF-8: a surrogate pair is one
 * character; a lone surrogate or U+0000 (which a C string cannot hold) is
 * refused */
static nb_status parse_unicode(parser *ps, nb_strbuf *sb)
{
    unsigned cp, lo;
    if (hex4(ps->p, ps->end, &cp)) return fail(ps, "bad \\u escape in a string");
    ps->p += 4;
    if (cp >= 0xD800 && cp <= 0xDBFF) {
        if (ps->end - ps->p < 6 || ps->p[0] != '\\' || ps->p[1] != 'u' || hex4(ps->p + 2, ps->end, &lo) ||
            lo < 0xDC00 || lo > 0xDFFF)
            return fail(ps, "a lone surrogate in a \\u escape");
        ps->p += 6;
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
    } else if ((cp >= 0xDC00 && cp <= 0xDFFF) || cp == 0) {
        return fail(ps, cp ? "a lone surrogate in a \\u escape" : "\\u0000 in a string");
    }
    char u[4];
    int n;
    if (cp < 0x80) u[0] = (char)cp, n = 1;
    else if (cp < 0x800) u[0] = (char)(0xC0 | cp >> 6), u[1] = (char)(0x80 | (cp & 0x3F)), n = 2;
    else if (cp < 0x10000)
        u[0] = (char)(0xE0 | cp >> 12), u[1] = (char)(0x80 | ((cp >> 6) & 0x3F)), u[2] = (char)(0x80 | (cp & 0x3F)), n = 3;
    else
        u[0] = (char)(0xF0 | cp >> 18), u[1] = (char)(0x80 | ((cp >> 12) & 0x3F)),
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3F)), u[3] = (char)(0x80 | (cp & 0x3F)), n = 4;
    nb_strbuf_appendn(sb, u, (size_t)n);
    return NB_OK;
}

static nb_status parse_string(parser *ps, char **out)
{
    nb_strbuf sb;
    nb_strbuf_init(&sb);
    nb_strbuf_append(&sb, ""); /* "" when empty, never NULL */
    ps->p++; /* the opening quote */
    while (ps->p < ps->end && *ps->p != '"') {
        char c = *ps->p++;
        if ((unsigned char)c < 0x20) {
            nb_strbuf_free(&sb);
            return fail(ps, "control character in a string");
        }
        if (c == '\\') {
            if (ps->p >= ps->end) break;
            char e = *ps->p++;
            const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
            const char *k = strchr(from, e);
            if (e == 'u') {
                nb_status st = parse_unicode(ps, &sb);
                if (st) {
                    nb_strbuf_free(&sb);
                    return st;
                }
                continue;
            }
            if (k && e) c = to[k - from];
            else {
                nb_strbuf_free(&sb);
                return fail(ps, "bad escape in a string");
            }
        }
        nb_strbuf_appendn(&sb, &c, 1);
    }
    if (ps->p >= ps->end) {
        nb_strbuf_free(&sb);
        return fail(ps, "unterminated string");
    }
    ps->p++;
    *out = nb_strbuf_take(&sb);
    return NB_OK;
}

/* An array's or object's members, appended one at a time. */
static nb_status add_member(nb_json *v, char *key)
{
    size_t n = v->count + 1;
    nb_json *items = realloc(v->items, n * sizeof *items);
    if (!items) return nb_error_set(NB_ERR_NOMEM, "out of memory reading JSON");
    v->items = items;
    memset(&items[n - 1], 0, sizeof *items);
    if (v->type == NB_JSON_OBJECT) {
        char **keys = realloc(v->keys, n * sizeof *keys);
        if (!keys) return nb_error_set(NB_ERR_NOMEM, "out of memory reading JSON");
        v->keys = keys;
        keys[n - 1] = key;
    }
    v->count = n;
    return NB_OK;
}

static nb_status parse_container(parser *ps, nb_json *v, int depth)
{
    char close = *ps->p == '[' ? ']' : '}';
    v->type = close == ']' ? NB_JSON_ARRAY : NB_JSON_OBJECT;
    ps->p++;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == close) {
        ps->p++;
        return NB_OK;
    }
    for (;;) {
        nb_status st;
        char *key = NULL;
        skip_ws(ps);
        if (v->type == NB_JSON_OBJECT) {
            if (ps->p >= ps->end || *ps->p != '"') return fail(ps, "expected a key");
            if ((st = parse_string(ps, &key))) return st;
            skip_ws(ps);
            if (ps->p >= ps->end || *ps->p != ':') {
                free(key);
                return fail(ps, "expected ':'");
            }
            ps->p++;
        }
        if ((st = add_member(v, key))) {
            free(key);
            return st;
        }
        if ((st = parse_value(ps, &v->items[v->count - 1], depth + 1))) return st;
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            continue;
        }
        if (ps->p < ps->end && *ps->p == close) {
            ps->p++;
            return NB_OK;
        }
        return fail(ps, close == ']' ? "expected ',' or ']'" : "expected ',' or '}'");
    }
}

static nb_status parse_value(parser *ps, nb_json *v, int depth)
{
    if (depth > MAX_DEPTH) return fail(ps, "nested too deeply");
    skip_ws(ps);
    if (ps->p >= ps->end) return fail(ps, "unexpected end of file");
    char c = *ps->p;
    if (c == '[' || c == '{') return parse_container(ps, v, depth);
    if (c == '"') {
        v->type = NB_JSON_STRING;
        return parse_string(ps, &v->string);
    }
    static const struct { const char *word; nb_json_type type; double value; } words[] = {
        {"true", NB_JSON_BOOL, 1}, {"false", NB_JSON_BOOL, 0}, {"null", NB_JSON_NULL, 0}};
    for (size_t i = 0; i < 3; i++) {
        size_t n = strlen(words[i].word);
        if ((size_t)(ps->end - ps->p) >= n && !memcmp(ps->p, words[i].word, n)) {
            v->type = words[i].type, v->number = words[i].value;
            ps->p += n;
            return NB_OK;
        }
    }
    /* a number: strtod on a bounded copy (the text need not end in a NUL) */
    char buf[64];
    size_t n = 0;
    while (ps->p + n < ps->end && n < sizeof buf - 1 && strchr("+-0123456789.eE", ps->p[n])) n++;
    memcpy(buf, ps->p, n);
    buf[n] = '\0';
    char *end;
    v->number = strtod(buf, &end);
    if (n == 0 || end != buf + n) return fail(ps, "expected a value");
    v->type = NB_JSON_NUMBER;
    ps->p += n;
    return NB_OK;
}

nb_status nb_json_parse(const char *text, size_t len, const char *name, nb_json *out)
{
    parser ps = {text, text + len, text, name};
    memset(out, 0, sizeof *out);
    nb_status st = parse_value(&ps, out, 0);
    if (!st) {
        skip_ws(&ps);
        if (ps.p != ps.end) st = fail(&ps, "text after the JSON value");
    }
    if (st) nb_json_free(out);
    return st;
}

void nb_json_free(nb_json *v)
{
    for (size_t i = 0; i < v->count; i++) {
        nb_json_free(&v->items[i]);
        if (v->keys) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->string);
    memset(v, 0, sizeof *v);
}

const nb_json *nb_json_get(const nb_json *v, const char *key)
{
    if (!v || v->type != NB_JSON_OBJECT) return NULL;
    for (size_t i = 0; i < v->count; i++)
        if (!strcmp(v->keys[i], key)) return &v->items[i];
    return NULL;
}

const nb_json *nb_json_at(const nb_json *v, size_t i)
{
    return v && v->type == NB_JSON_ARRAY && i < v->count ? &v->items[i] : NULL;
}

int nb_json_numbers(const nb_json *v, double *out, size_t n)
{
    if (!v || v->type != NB_JSON_ARRAY || v->count != n) return -1;
    for (size_t i = 0; i < n; i++) {
        if (v->items[i].type != NB_JSON_NUMBER) return -1;
        out[i] = v->items[i].number;
    }
    return 0;
}

static void write_string(nb_strbuf *sb, const char *s)
{
    nb_strbuf_append(sb, "\"");
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\') nb_strbuf_printf(sb, "\\%c", *c);
        else if (*c < 32) nb_strbuf_printf(sb, "\\u%04x", *c);
        else nb_strbuf_appendn(sb, (const char *)c, 1);
    }
    nb_strbuf_append(sb, "\"");
}

void nb_json_write_string(nb_strbuf *sb, const char *s) { write_string(sb, s ? s : ""); }

void nb_json_write(nb_strbuf *sb, const nb_json *v)
{
    switch (v->type) {
    case NB_JSON_NULL: nb_strbuf_append(sb, "null"); break;
    case NB_JSON_BOOL: nb_strbuf_append(sb, v->number ? "true" : "false"); break;
    case NB_JSON_NUMBER: nb_strbuf_printf(sb, "%.17g", v->number + 0.0); break;
    case NB_JSON_STRING: write_string(sb, v->string); break;
    case NB_JSON_ARRAY:
    case NB_JSON_OBJECT:
        nb_strbuf_append(sb, v->type == NB_JSON_ARRAY ? "[" : "{");
        for (size_t i = 0; i < v->count; i++) {
            if (i) nb_strbuf_append(sb, ", ");
            if (v->type == NB_JSON_OBJECT) {
                write_string(sb, v->keys[i]);
                nb_strbuf_append(sb, ": ");
            }
            nb_json_write(sb, &v->items[i]);
        }
        nb_strbuf_append(sb, v->type == NB_JSON_ARRAY ? "]" : "}");
        break;
    }
}
