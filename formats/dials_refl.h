/* dials_refl.h - DIALS's reflection tables (.refl: what dials.find_spots,
 * dials.index and dials.refine write) read for their spots: each row's
 * experiment, panel, centroid and box (dials_refl.c).
 *
 * The file is msgpack: ["dials::af::reflection_table", 1, {"identifiers":
 * {id: "text"}, "nrows": N, "data": {"column": ["type", [N, blob]]}}], each
 * column's blob N values little-endian.  The columns read: id (int: the
 * row's experiment, its identifier in "identifiers"; -1: none, as
 * dials.index leaves the spots it did not index), panel (std::size_t),
 * xyzobs.px.value (vec3<double>: fast and slow pixels from the panel's
 * corner, a pixel's centre at +0.5, and the image's index from the
 * imageset's first, also + 0.5), bbox (int6: x0 x1 y0 y1 z0 z1, the ends
 * past the last pixel; optional).  Every other column is passed over. */
#ifndef NB_FORMAT_DIALS_REFL_H
#define NB_FORMAT_DIALS_REFL_H

#include <stddef.h>
#include <stdint.h>

#include "nb_error.h"

typedef struct nb_refl_table {
    size_t nrows;
    size_t nids;          /* the identifiers map: experiment id_key[k] is named id_text[k] */
    int *id_key;
    char **id_text;
    int *id;              /* nrows: the row's experiment (-1: none) */
    int *panel;           /* nrows */
    double *xyz;          /* 3 nrows: xyzobs.px.value */
    int *bbox;            /* 6 nrows, or NULL when the table has no bbox column */
} nb_refl_table;

/* The table of file path into *t (free with nb_refl_free, also after a
 * failure).  Refused, naming the file: what is not a reflection table, a
 * version other than 1, a missing column of id, panel and xyzobs.px.value
 * or one of another type, a column whose rows are not the table's, an
 * identifier that is not text. */
nb_status nb_refl_read(const char *path, nb_refl_table *t);
/* The same from n bytes in memory (`name` for messages). */
nb_status nb_refl_parse(const unsigned char *bytes, size_t n, const char *name, nb_refl_table *t);
void nb_refl_free(nb_refl_table *t);

/* The identifier of experiment id, or NULL when the map has none. */
const char *nb_refl_identifier(const nb_refl_table *t, int id);

/* ---- writing (dials_refl_write.c): a table as DIALS writes one ---- */

/* A column's type, its name in the file and its row: int (int32), bool
 * (one byte), std::size_t (uint64: panel, flags), double, vec3<double>
 * (3 doubles), cctbx::miller::index<> (3 int32), int6 (6 int32: bbox). */
typedef enum nb_refl_type {
    NB_REFL_INT, NB_REFL_BOOL, NB_REFL_SIZE, NB_REFL_DOUBLE, NB_REFL_VEC3, NB_REFL_MILLER, NB_REFL_INT6
} nb_refl_type;

/* A column to write: data holds nrows rows of its type, as C lays them out
 * (int, unsigned char, uint64_t, double, double[3], int[3], int[6]). */
typedef struct nb_refl_column {
    const char *name;
    nb_refl_type type;
    const void *data;
} nb_refl_column;

/* The table of nrows rows and ncols columns, with the identifiers map
 * (experiment id_key[k] named id_text[k], nids of them), to path: under a
 * temporary name renamed into place (no partial file on a failure), every
 * blob little-endian whatever the machine. */
nb_status nb_refl_write(const char *path, size_t nrows, const nb_refl_column *cols, size_t ncols, const int *id_key,
                        const char *const *id_text, size_t nids);

#endif
