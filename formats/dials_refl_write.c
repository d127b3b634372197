/* dials_refl_write.c - DIALS's reflection tables written (dials_refl.h):
 * ["dials::af::reflection_table", 1, {"identifiers": {id: "text"},
 * "nrows": N, "data": {"column": ["type", [N, blob]]}}], as DIALS's own
 * reflection_table.as_file lays it out, so that dials.scale, dials.merge
 * and our reader (dials_refl.c) take it.  Each blob is built little-endian
 * value by value (DIALS's files are so on every machine), one column at a
 * time, so a table costs one column's bytes beside the caller's arrays. */
#include "dials_refl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msgpack.h"
#include "nb_util.h"

static const struct {
    const char *name;
    int values;     /* per row */
    int bytes;      /* per value */
} types[] = {
    [NB_REFL_INT] = {"int", 1, 4},
    [NB_REFL_BOOL] = {"bool", 1, 1},
    [NB_REFL_SIZE] = {"std::size_t", 1, 8},
    [NB_REFL_DOUBLE] = {"double", 1, 8},
    [NB_REFL_VEC3] = {"vec3<double>", 3, 8},
    [NB_REFL_MILLER] = {"cctbx::miller::index<>", 3, 4},
    [NB_REFL_INT6] = {"int6", 6, 4},
};

static void store_le(unsigned char *p, uint64_t v, int n)
{
    for (int k = 0; k < n; k++) p[k] = (unsigned char)(v >> (8 * k));
}

/* value j of the column's data as the bits to store */
static uint64_t bits(const nb_refl_column *c, size_t j)
{
    switch (c->type) {
    case NB_REFL_BOOL: return ((const unsigned char *)c->data)[j] ? 1 : 0;
    case NB_REFL_SIZE: return ((const uint64_t *)c->data)[j];
    case NB_REFL_DOUBLE:
    case NB_REFL_VEC3: {
        uint64_t u;
        memcpy(&u, (const double *)c->data + j, sizeof u);
        return u;
    }
    default: return (uint64_t)(uint32_t)((const int *)c->data)[j];
    }
}

static nb_status put_column(FILE *fp, const nb_refl_column *c, size_t nrows, unsigned char *blob)
{
    if ((unsigned)c->type >= sizeof types / sizeof types[0] || !c->name || !c->name[0] || (!c->data && nrows))
        return nb_error_set(NB_ERR_USAGE, "a reflection table's column without a name, a type or rows");
    const size_t values = nrows * (size_t)types[c->type].values;
    for (size_t j = 0; j < values; j++) store_le(blob + j * (size_t)types[c->type].bytes, bits(c, j), types[c->type].bytes);
    nb_mp_put_str(fp, c->name);
    nb_mp_put_array(fp, 2);
    nb_mp_put_str(fp, types[c->type].name);
    nb_mp_put_array(fp, 2);
    nb_mp_put_int(fp, (int64_t)nrows);
    nb_mp_put_bin(fp, blob, values * (size_t)types[c->type].bytes);
    return NB_OK;
}

nb_status nb_refl_write(const char *path, size_t nrows, const nb_refl_column *cols, size_t ncols, const int *id_key,
                        const char *const *id_text, size_t nids)
{
    if (nrows > UINT32_MAX / 48)
        return nb_error_set(NB_ERR_USAGE, "cannot write '%s': %zu rows are more than a table's blob can hold", path,
                            nrows);
    unsigned char *blob;
    nb_status st = nb_calloc((void **)&blob, nrows ? nrows : 1, 48, "a reflection table's column");
    if (st) return st;
    nb_outfile *of = NULL;
    if ((st = nb_outfile_open(&of, path, 1))) {
        free(blob);
        return st;
    }
    FILE *fp = nb_outfile_fp(of);
    nb_mp_put_array(fp, 3);
    nb_mp_put_str(fp, "dials::af::reflection_table");
    nb_mp_put_int(fp, 1);
    nb_mp_put_map(fp, 3);
    nb_mp_put_str(fp, "identifiers");
    nb_mp_put_map(fp, nids);
    for (size_t k = 0; k < nids; k++) nb_mp_put_int(fp, id_key[k]), nb_mp_put_str(fp, id_text[k]);
    nb_mp_put_str(fp, "nrows");
    nb_mp_put_int(fp, (int64_t)nrows);
    nb_mp_put_str(fp, "data");
    nb_mp_put_map(fp, ncols);
    for (size_t c = 0; c < ncols && !st; c++) st = put_column(fp, &cols[c], nrows, blob);
    free(blob);
    if (st) {
        nb_outfile_abort(of);
        return st;
    }
    return nb_outfile_commit(of);
}
