/* json.c - a recursive-descent JSON parser (RFC 8259) for the detector files
 * of nb-geom -panels: small files read whole, so a tree of values is
 * simplest.  Depth is limited, so a hostile file cannot exhaust the stack. */
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

static nb_status parse_string(parser *ps, char **out)
{
    nb_strbuf sb;
    nb_strbuf_init(&sb);
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
            if (e == 'u') nb_strbuf_append(&sb, "\\u"); /* kept as written */
            else if (k && e) c = to[k - from];
            else {
                nb_strbuf_free(&sb);
                return fail(ps, "bad escape in a string");
            }
            if (e == 'u') continue;
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
