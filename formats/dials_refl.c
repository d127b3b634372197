/* dials_refl.c - DIALS's reflection tables read for their spots
 * (dials_refl.h): the msgpack walked with msgpack.c, the columns wanted
 * found by name and type, their blobs decoded little-endian (as DIALS
 * writes them on every machine it runs on) into arrays of their own, so the
 * file's buffer can go at once.  A table holds megabytes of shoeboxes
 * beside the few columns read: those are passed over, never decoded. */
#include "dials_refl.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "msgpack.h"
#include "nb_util.h"

/* A column wanted: its name, its type as DIALS names it, the bytes of a row */
typedef struct column {
    const char *name, *type, *what;
    size_t row_bytes;
    int required;
    const unsigned char *blob; /* found: its rows */
    size_t rows;
    int found;
} column;

enum { COL_ID, COL_PANEL, COL_XYZ, COL_BBOX, NCOLS };

static nb_status bad(const char *name, const char *what)
{
    return nb_error_set(NB_ERR_DATA, "'%s': %s", name, what);
}

static nb_status truncated(const char *name)
{
    return bad(name, "not a DIALS reflection table (its msgpack ends early or is not msgpack)");
}

static int32_t le_i32(const unsigned char *p) { return (int32_t)(uint32_t)nb_load_le(p, 4); }

/* "identifiers": {int: "text"} into the table */
static nb_status read_identifiers(nb_mp *m, const nb_mp_item *map, const char *name, nb_refl_table *t)
{
    if (map->type != NB_MP_MAP) return bad(name, "its identifiers are not a map of experiments to text");
    if (map->n > (size_t)(m->end - m->p)) return truncated(name);
    nb_status st = nb_calloc((void **)&t->id_key, map->n + 1, sizeof *t->id_key, "the table's identifiers");
    if (!st) st = nb_calloc((void **)&t->id_text, map->n + 1, sizeof *t->id_text, "the table's identifiers");
    for (size_t k = 0; k < map->n && !st; k++) {
        nb_mp_item key, text;
        if (nb_mp_next(m, &key) || nb_mp_next(m, &text)) return truncated(name);
        if (key.type != NB_MP_INT || key.i < INT_MIN || key.i > INT_MAX || text.type != NB_MP_STR)
            return bad(name, "its identifiers are not a map of experiments (integers) to text");
        if (memchr(text.bytes, 0, text.n) || text.n == 0)
            return bad(name, "an experiment's identifier is empty or holds a NUL byte");
        char *s = malloc(text.n + 1);
        if (!s) return nb_error_set(NB_ERR_NOMEM, "out of memory for the table's identifiers");
        memcpy(s, text.bytes, text.n), s[text.n] = 0;
        t->id_key[t->nids] = (int)key.i, t->id_text[t->nids++] = s;
    }
    return st;
}

/* One column of "data": ["type", [rows, blob]] kept when it is wanted */
static nb_status read_column(nb_mp *m, const nb_mp_item *key, column *cols, const char *name)
{
    column *c = NULL;
    for (int k = 0; k < NCOLS; k++)
        if (nb_mp_is_str(key, cols[k].name)) c = &cols[k];
    if (!c) return nb_mp_skip(m) ? truncated(name) : NB_OK;
    nb_mp_item outer, type, inner, rows, blob;
    if (nb_mp_next(m, &outer)) return truncated(name);
    if (outer.type != NB_MP_ARRAY || outer.n != 2 || nb_mp_next(m, &type) || type.type != NB_MP_STR ||
        nb_mp_next(m, &inner) || inner.type != NB_MP_ARRAY || inner.n != 2 || nb_mp_next(m, &rows) ||
        rows.type != NB_MP_INT || rows.i < 0 || nb_mp_next(m, &blob) || blob.type != NB_MP_BIN)
        return nb_error_set(NB_ERR_DATA, "'%s': column '%s' is not [type, [rows, data]]", name, c->name);
    if (!nb_mp_is_str(&type, c->type))
        return nb_error_set(NB_ERR_DATA, "'%s': column '%s' (%s) is of type '%.*s', not %s", name, c->name, c->what,
                            (int)(type.n > 40 ? 40 : type.n), (const char *)type.bytes, c->type);
    if ((uint64_t)rows.i > blob.n / c->row_bytes || blob.n != (size_t)rows.i * c->row_bytes)
        return nb_error_set(NB_ERR_DATA, "'%s': column '%s' says %lld rows but holds %zu bytes (%zu a row)", name,
                            c->name, (long long)rows.i, blob.n, c->row_bytes);
    c->blob = blob.bytes, c->rows = (size_t)rows.i, c->found = 1;
    return NB_OK;
}

/* The columns' blobs into the table's arrays */
static nb_status decode_columns(const column *cols, const char *name, nb_refl_table *t)
{
    const size_t n = t->nrows;
    nb_status st = nb_calloc((void **)&t->id, n + 1, sizeof *t->id, "the table's rows");
    if (!st) st = nb_calloc((void **)&t->panel, n + 1, sizeof *t->panel, "the table's rows");
    if (!st) st = nb_calloc((void **)&t->xyz, 3 * n + 1, sizeof *t->xyz, "the table's rows");
    if (!st && cols[COL_BBOX].found) st = nb_calloc((void **)&t->bbox, 6 * n + 1, sizeof *t->bbox, "the table's rows");
    for (size_t r = 0; r < n && !st; r++) {
        t->id[r] = le_i32(cols[COL_ID].blob + 4 * r);
        const uint64_t panel = nb_load_le(cols[COL_PANEL].blob + 8 * r, 8);
        if (panel > INT_MAX) return nb_error_set(NB_ERR_DATA, "'%s': row %zu: panel %llu", name, r, (unsigned long long)panel);
        t->panel[r] = (int)panel;
        for (int k = 0; k < 3; k++) {
            const uint64_t u = nb_load_le(cols[COL_XYZ].blob + 24 * r + 8 * k, 8);
            memcpy(&t->xyz[3 * r + k], &u, sizeof u);
        }
        for (int k = 0; t->bbox && k < 6; k++) t->bbox[6 * r + k] = le_i32(cols[COL_BBOX].blob + 24 * r + 4 * k);
    }
    return st;
}

/* The table's map: its identifiers, rows and columns, in any order */
static nb_status read_table_map(nb_mp *m, const nb_mp_item *map, column *cols, const char *name, nb_refl_table *t,
                                int *have_rows)
{
    nb_status st = NB_OK;
    for (size_t k = 0; k < map->n && !st; k++) {
        nb_mp_item key, v;
        if (nb_mp_next(m, &key)) return truncated(name);
        if (nb_mp_is_str(&key, "identifiers")) {
            if (t->id_text) return bad(name, "it has two identifiers maps");
            if (nb_mp_next(m, &v)) return truncated(name);
            st = read_identifiers(m, &v, name, t);
        } else if (nb_mp_is_str(&key, "nrows")) {
            if (nb_mp_next(m, &v)) return truncated(name);
            if (v.type != NB_MP_INT || v.i < 0) return bad(name, "its nrows is not a count");
            t->nrows = (size_t)v.i, *have_rows = 1;
        } else if (nb_mp_is_str(&key, "data")) {
            if (nb_mp_next(m, &v)) return truncated(name);
            if (v.type != NB_MP_MAP) return bad(name, "its data is not a map of columns");
            for (size_t c = 0; c < v.n && !st; c++) {
                nb_mp_item col;
                if (nb_mp_next(m, &col)) return truncated(name);
                if (col.type != NB_MP_STR) return bad(name, "a column's name is not text");
                st = read_column(m, &col, cols, name);
            }
        } else if (nb_mp_skip(m)) {
            return truncated(name);
        }
    }
    return st;
}

nb_status nb_refl_parse(const unsigned char *bytes, size_t n, const char *name, nb_refl_table *t)
{
    memset(t, 0, sizeof *t);
    column cols[NCOLS] = {
        [COL_ID] = {"id", "int", "the rows' experiments", 4, 1, NULL, 0, 0},
        [COL_PANEL] = {"panel", "std::size_t", "the rows' panels", 8, 1, NULL, 0, 0},
        [COL_XYZ] = {"xyzobs.px.value", "vec3<double>", "the spots' centroids", 24, 1, NULL, 0, 0},
        [COL_BBOX] = {"bbox", "int6", "the spots' boxes", 24, 0, NULL, 0, 0},
    };
    nb_mp m = {bytes, bytes + n};
    nb_mp_item top, tag, version, map;
    if (nb_mp_next(&m, &top) || top.type != NB_MP_ARRAY || top.n != 3 || nb_mp_next(&m, &tag) ||
        !nb_mp_is_str(&tag, "dials::af::reflection_table"))
        return bad(name, "not a DIALS reflection table (msgpack [\"dials::af::reflection_table\", version, table])");
    if (nb_mp_next(&m, &version) || version.type != NB_MP_INT || version.i != 1)
        return bad(name, "a DIALS reflection table of a version other than 1");
    if (nb_mp_next(&m, &map) || map.type != NB_MP_MAP) return truncated(name);
    int have_rows = 0;
    nb_status st = read_table_map(&m, &map, cols, name, t, &have_rows);
    if (!st && !have_rows) st = bad(name, "the table has no nrows");
    for (int k = 0; k < NCOLS && !st; k++) {
        if (!cols[k].found && cols[k].required)
            st = nb_error_set(NB_ERR_DATA, "'%s': the table has no column '%s' (%s)", name, cols[k].name, cols[k].what);
        else if (cols[k].found && cols[k].rows != t->nrows)
            st = nb_error_set(NB_ERR_DATA, "'%s': column '%s' holds %zu rows, the table %zu", name, cols[k].name,
                              cols[k].rows, t->nrows);
    }
    if (!st) st = decode_columns(cols, name, t);
    return st;
}

nb_status nb_refl_read(const char *path, nb_refl_table *t)
{
    char *data = NULL;
    size_t len = 0;
    memset(t, 0, sizeof *t);
    nb_status st = nb_read_file(path, &data, &len);
    if (!st) st = nb_refl_parse((const unsigned char *)data, len, path, t);
    free(data);
    return st;
}

void nb_refl_free(nb_refl_table *t)
{
    for (size_t k = 0; t->id_text && k < t->nids; k++) free(t->id_text[k]);
    free(t->id_key), free(t->id_text), free(t->id), free(t->panel), free(t->xyz), free(t->bbox);
    memset(t, 0, sizeof *t);
}

const char *nb_refl_identifier(const nb_refl_table *t, int id)
{
    for (size_t k = 0; k < t->nids; k++)
        if (t->id_key[k] == id) return t->id_text[k];
    return NULL;
}
