/* test_refl.c - DIALS's reflection tables read (formats/dials_refl.c) and
 * the msgpack under them (formats/msgpack.c): tables built here as DIALS
 * lays them out, their rows read back; every item kind passed over; every
 * shorter prefix of a table, and each refusal, an error, never a crash.
 * And written (formats/dials_refl_write.c): a table read back by the
 * reader, msgpack's integers in every width read back as written. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dials_refl.h"
#include "msgpack.h"
#include "nb_error.h"
#include "tap.h"

/* ---- a msgpack writer, enough for the tables ---- */
typedef struct buf {
    unsigned char b[8192];
    size_t n;
} buf;

static void put(buf *o, const void *p, size_t n) { memcpy(o->b + o->n, p, n), o->n += n; }
static void byte(buf *o, unsigned v) { o->b[o->n++] = (unsigned char)v; }
static void be(buf *o, uint64_t v, int n)
{
    for (int k = n - 1; k >= 0; k--) byte(o, (unsigned)(v >> (8 * k)) & 0xff);
}
static void str(buf *o, const char *s)
{
    const size_t n = strlen(s);
    if (n < 32) byte(o, 0xa0 | (unsigned)n);
    else byte(o, 0xd9), byte(o, (unsigned)n);
    put(o, s, n);
}
static void uint_(buf *o, uint64_t v)
{
    if (v < 128) byte(o, (unsigned)v);
    else byte(o, 0xce), be(o, v, 4);
}
static void arr(buf *o, unsigned n) { byte(o, 0x90 | n); }
static void map(buf *o, unsigned n) { byte(o, 0x80 | n); }
static void bin(buf *o, const void *p, size_t n)
{
    byte(o, 0xc5), be(o, n, 2);
    put(o, p, n);
}
static void le(unsigned char *p, uint64_t v, int n)
{
    for (int k = 0; k < n; k++) p[k] = (unsigned char)(v >> (8 * k));
}

/* A column ["type", [rows, blob]] */
static void column(buf *o, const char *name, const char *type, size_t rows, const unsigned char *blob, size_t n)
{
    str(o, name);
    arr(o, 2), str(o, type), arr(o, 2), uint_(o, rows), bin(o, blob, n);
}

enum { OMIT_NONE, OMIT_XYZ, WRONG_TYPE, SHORT_ROWS, VERSION_2, NO_ROWS };

/* Three rows: experiments 0, 1 and -1, panels 0, 1, 0; beside them an
 * extra column and keys of every other msgpack kind, to be passed over */
static void table(buf *o, int how)
{
    unsigned char ids[12], panels[24], xyz[72], bbox[72], extra[8];
    const int32_t id[3] = {0, 1, -1};
    for (int r = 0; r < 3; r++) {
        le(ids + 4 * r, (uint32_t)id[r], 4), le(panels + 8 * r, (uint64_t)(r == 1), 8);
        for (int k = 0; k < 3; k++) {
            double v = 10.0 * r + k + 0.25;
            uint64_t u;
            memcpy(&u, &v, sizeof u);
            le(xyz + 24 * r + 8 * k, u, 8);
        }
        for (int k = 0; k < 6; k++) le(bbox + 24 * r + 4 * k, (uint32_t)(r * 10 + k), 4);
    }
    memset(extra, 7, sizeof extra);
    o->n = 0;
    arr(o, 3), str(o, "dials::af::reflection_table"), uint_(o, how == VERSION_2 ? 2 : 1);
    map(o, how == NO_ROWS ? 4 : 5);
    str(o, "identifiers"), map(o, 2), uint_(o, 0), str(o, "first-experiment"), uint_(o, 1), str(o, "second");
    if (how != NO_ROWS) str(o, "nrows"), uint_(o, 3);
    /* kinds to pass over: nil, bools, floats, negative ints, ext, nested arrays and maps */
    str(o, "other"), arr(o, 9), byte(o, 0xc0), byte(o, 0xc2), byte(o, 0xc3), byte(o, 0xcb), be(o, 0, 8),
        byte(o, 0xd0), byte(o, 0x80), byte(o, 0xd4), byte(o, 1), byte(o, 2), arr(o, 1), map(o, 1), str(o, "k"),
        byte(o, 0xff), byte(o, 0xca), be(o, 0, 4), byte(o, 0xd9), byte(o, 1), byte(o, 'x');
    str(o, "more"), byte(o, 0xc7), byte(o, 2), byte(o, 5), byte(o, 1), byte(o, 2);
    str(o, "data"), map(o, how == OMIT_XYZ ? 4 : 5);
    column(o, "id", "int", 3, ids, sizeof ids);
    column(o, "panel", how == WRONG_TYPE ? "int" : "std::size_t", 3, panels, how == WRONG_TYPE ? 12 : sizeof panels);
    if (how != OMIT_XYZ) column(o, "xyzobs.px.value", "vec3<double>", 3, xyz, sizeof xyz);
    column(o, "bbox", "int6", how == SHORT_ROWS ? 2 : 3, bbox, how == SHORT_ROWS ? 48 : sizeof bbox);
    column(o, "intensity.sum.value", "double", 1, extra, sizeof extra);
}

static void msgpack_items(void)
{
    const unsigned char ints[] = {0xff, 0xd0, 0x80, 0xd1, 0x80, 0x00, 0xcd, 0xff, 0xff, 0xd3, 0x80, 0, 0, 0, 0, 0, 0, 0};
    nb_mp m = {ints, ints + sizeof ints};
    nb_mp_item it;
    ok(!nb_mp_next(&m, &it) && it.type == NB_MP_INT && it.i == -1, "negative fixint -1");
    ok(!nb_mp_next(&m, &it) && it.i == -128, "int8 -128");
    ok(!nb_mp_next(&m, &it) && it.i == -32768, "int16 -32768");
    ok(!nb_mp_next(&m, &it) && it.i == 65535, "uint16 65535");
    ok(!nb_mp_next(&m, &it) && it.i == INT64_MIN, "int64 INT64_MIN");
    ok(nb_mp_next(&m, &it), "the end of the buffer is an error");
    const unsigned char big[] = {0xcf, 0xff, 0, 0, 0, 0, 0, 0, 0}, unused[] = {0xc1};
    nb_mp b = {big, big + sizeof big}, u = {unused, unused + 1};
    ok(nb_mp_next(&b, &it), "a uint64 above INT64_MAX is refused");
    ok(nb_mp_next(&u, &it), "0xc1 (never used) is refused");
    /* an array claiming more items than bytes left, and nesting past the limit */
    const unsigned char liar[] = {0xdd, 0x7f, 0xff, 0xff, 0xff, 0x01};
    nb_mp l = {liar, liar + sizeof liar};
    ok(nb_mp_skip(&l), "an array of more items than bytes is refused");
    unsigned char deep[64];
    memset(deep, 0x91, sizeof deep);
    nb_mp d = {deep, deep + sizeof deep};
    ok(nb_mp_skip(&d), "arrays nested %zu deep are refused", sizeof deep);
}

static void rows_read(void)
{
    buf o;
    nb_refl_table t;
    table(&o, OMIT_NONE);
    nb_status st = nb_refl_parse(o.b, o.n, "t.refl", &t);
    ok(!st, "a table of three rows is read (%s)", st ? nb_error_message() : "");
    ok(t.nrows == 3 && t.nids == 2, "3 rows, 2 identifiers");
    ok(t.id[0] == 0 && t.id[1] == 1 && t.id[2] == -1, "the rows' experiments 0 1 -1");
    ok(t.panel[0] == 0 && t.panel[1] == 1 && t.panel[2] == 0, "the rows' panels 0 1 0");
    ok(t.xyz[3 * 1 + 0] == 10.25 && t.xyz[3 * 2 + 2] == 22.25, "the centroids as written");
    ok(t.bbox && t.bbox[6 * 2 + 3] == 23, "the boxes as written");
    ok(nb_refl_identifier(&t, 1) && !strcmp(nb_refl_identifier(&t, 1), "second"), "experiment 1 is 'second'");
    ok(!nb_refl_identifier(&t, 2), "experiment 2 has no identifier");
    nb_refl_free(&t);
    size_t refused = 0;
    for (size_t n = 0; n < o.n; n++) {
        refused += nb_refl_parse(o.b, n, "t.refl", &t) != NB_OK;
        nb_refl_free(&t);
    }
    ok(refused == o.n, "every shorter prefix of the table is refused (%zu of %zu)", refused, o.n);
}

static void refusals(void)
{
    static const struct { int how; const char *says; } cases[] = {
        {OMIT_XYZ, "no column 'xyzobs.px.value'"},
        {WRONG_TYPE, "column 'panel' (the rows' panels) is of type 'int', not std::size_t"},
        {SHORT_ROWS, "column 'bbox' holds 2 rows, the table 3"},
        {VERSION_2, "version other than 1"},
        {NO_ROWS, "no nrows"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        buf o;
        nb_refl_table t;
        table(&o, cases[c].how);
        const nb_status st = nb_refl_parse(o.b, o.n, "t.refl", &t);
        ok(st == NB_ERR_DATA && strstr(nb_error_message(), cases[c].says), "refused: %s (%s)", cases[c].says,
           st ? nb_error_message() : "read");
        nb_refl_free(&t);
    }
    const unsigned char cbf[] = "###CBF: VERSION 1.5";
    nb_refl_table t;
    ok(nb_refl_parse(cbf, sizeof cbf - 1, "x.cbf", &t) == NB_ERR_DATA &&
           strstr(nb_error_message(), "'x.cbf': not a DIALS reflection table"),
       "a CBF is not a table (%s)", nb_error_message());
    nb_refl_free(&t);
    ok(nb_refl_read("/nonexistent/strong.refl", &t) != NB_OK && strstr(nb_error_message(), "strong.refl"),
       "a missing file is named (%s)", nb_error_message());
    nb_refl_free(&t);
}

/* Integers of every width, strings and maps written, read back. */
static void msgpack_written(void)
{
    static const int64_t v[] = {0, 127, 128, 255, 256, 65535, 65536, 4294967295LL, 4294967296LL, -1, -32, -33,
                                -128, -129, -32768, -32769, -2147483648LL, -2147483649LL, INT64_MIN};
    const size_t n = sizeof v / sizeof v[0];
    char *bytes = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&bytes, &len);
    nb_mp_put_array(fp, n);
    for (size_t k = 0; k < n; k++) nb_mp_put_int(fp, v[k]);
    char long_str[300];
    memset(long_str, 'x', sizeof long_str - 1), long_str[sizeof long_str - 1] = 0;
    nb_mp_put_map(fp, 17);
    for (int k = 0; k < 17; k++) nb_mp_put_str(fp, k ? "key" : long_str), nb_mp_put_bin(fp, long_str, 200);
    fclose(fp);
    nb_mp m = {(const unsigned char *)bytes, (const unsigned char *)bytes + len};
    nb_mp_item it;
    ok(!nb_mp_next(&m, &it) && it.type == NB_MP_ARRAY && it.n == n, "an array of %zu written", n);
    size_t same = 0;
    for (size_t k = 0; k < n; k++) same += !nb_mp_next(&m, &it) && it.type == NB_MP_INT && it.i == v[k];
    ok(same == n, "every integer read back as written (%zu of %zu)", same, n);
    ok(!nb_mp_next(&m, &it) && it.type == NB_MP_MAP && it.n == 17, "a map of 17 pairs (map16)");
    ok(!nb_mp_next(&m, &it) && it.type == NB_MP_STR && it.n == 299, "a string of 299 bytes (str16)");
    ok(!nb_mp_next(&m, &it) && it.type == NB_MP_BIN && it.n == 200, "a blob of 200 bytes (bin8)");
    free(bytes);
}

/* A table written and read back by our reader. */
static void table_written(void)
{
    const int id[3] = {0, 1, -1}, key[2] = {0, 1}, hkl[3][3] = {{1, 2, 3}, {-1, 0, 2}, {0, 0, -7}};
    const int bbox[3][6] = {{0, 1, 2, 3, 0, 1}, {4, 5, 6, 7, 0, 1}, {8, 9, 10, 23, 0, 1}};
    const uint64_t panel[3] = {0, 1, 0};
    const double xyz[3][3] = {{1.5, 2.5, 0}, {10.25, 3, 0}, {7, 8, 22.25}}, I[3] = {1e3, -2.5, 0.125};
    const unsigned char entering[3] = {0, 1, 0};
    const char *text[2] = {"first", "second"};
    const nb_refl_column cols[] = {
        {"bbox", NB_REFL_INT6, bbox}, {"entering", NB_REFL_BOOL, entering}, {"id", NB_REFL_INT, id},
        {"intensity.sum.value", NB_REFL_DOUBLE, I}, {"miller_index", NB_REFL_MILLER, hkl},
        {"panel", NB_REFL_SIZE, panel}, {"xyzobs.px.value", NB_REFL_VEC3, xyz}};
    char path[] = "/tmp/test_refl_XXXXXX";
    const int fd = mkstemp(path);
    ok(fd >= 0, "a temporary file");
    if (fd < 0) return;
    close(fd);
    nb_status st = nb_refl_write(path, 3, cols, sizeof cols / sizeof cols[0], key, text, 2);
    ok(!st, "a table of three rows written (%s)", st ? nb_error_message() : "");
    nb_refl_table t;
    st = nb_refl_read(path, &t);
    ok(!st, "and read back (%s)", st ? nb_error_message() : "");
    ok(!st && t.nrows == 3 && t.nids == 2, "3 rows, 2 identifiers");
    ok(!st && t.id[0] == 0 && t.id[1] == 1 && t.id[2] == -1, "the rows' experiments 0 1 -1");
    ok(!st && t.panel[1] == 1 && t.panel[2] == 0, "the rows' panels");
    ok(!st && t.xyz[3 * 1 + 0] == 10.25 && t.xyz[3 * 2 + 2] == 22.25, "the centroids as written");
    ok(!st && t.bbox && t.bbox[6 * 2 + 3] == 23, "the boxes as written");
    ok(!st && nb_refl_identifier(&t, 1) && !strcmp(nb_refl_identifier(&t, 1), "second"), "experiment 1 is 'second'");
    nb_refl_free(&t);
    ok(nb_refl_write("/nonexistent/dir/x.refl", 3, cols, 1, key, text, 2) == NB_ERR_IO &&
           strstr(nb_error_message(), "x.refl"),
       "an unwritable path is named (%s)", nb_error_message());
    unlink(path);
}

int main(void)
{
    msgpack_items();
    rows_read();
    refusals();
    msgpack_written();
    table_written();
    return tap_done();
}
