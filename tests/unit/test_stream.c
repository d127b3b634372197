/* test_stream.c - the nb stream: records, headers, arrays, reader and writer,
 * and the reader's refusal of truncated, corrupted or foreign input. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "nb_crc32.h"
#include "nb_error.h"
#include "nb_stream.h"
#include "nb_tuning.h"
#include "nb_util.h"
#include "tap.h"

/* ---- helpers ------------------------------------------------------------ */

typedef struct bytes {
    unsigned char *p;
    size_t n;
} bytes;

static void bytes_append(bytes *b, const unsigned char *p, size_t n)
{
    b->p = realloc(b->p, b->n + n + 1);
    if (!b->p) abort();
    memcpy(b->p + b->n, p, n);
    b->n += n;
}

static void bytes_append_record(bytes *b, const nb_record *rec)
{
    unsigned char *buf;
    size_t len;
    if (nb_record_serialize(rec, &buf, &len) != NB_OK) abort();
    bytes_append(b, buf, len);
    free(buf);
}

static void bytes_append_end(bytes *b, long n)
{
    nb_record end;
    nb_record_init(&end, "END");
    nb_hdr_set_long(&end, "RECORDS", n);
    bytes_append_record(b, &end);
    nb_record_free(&end);
}

/* Read a whole buffer; returns the status of the first failure or NB_OK at a
 * clean end.  *nrec counts records returned (END included); types[] receives
 * their types when given. */
static nb_status read_all(const unsigned char *buf, size_t len, int *nrec, char types[][NB_TYPE_LEN + 1], int maxt)
{
    nb_reader *r;
    nb_record rec;
    int eof = 0, n = 0;
    if (nrec) *nrec = 0;
    nb_status st = nb_reader_open_mem(&r, buf, len, "test");
    if (st) return st;
    memset(&rec, 0, sizeof rec);
    for (;;) {
        st = nb_reader_next(r, &rec, &eof);
        if (st || eof) break;
        if (types && n < maxt) snprintf(types[n], NB_TYPE_LEN + 1, "%s", rec.type);
        n++;
        if (n > 1000) { /* would be a reader bug: never loop forever */
            st = NB_ERR_DATA;
            break;
        }
    }
    nb_record_free(&rec);
    nb_reader_close(r);
    if (nrec) *nrec = n;
    return st;
}

static int contains(const char *hay, const char *needle) { return hay && strstr(hay, needle) != NULL; }

static char tmpdir[256];

static void make_tmpdir(void)
{
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/nb-test-stream-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        exit(1);
    }
}

/* The directory and what the tests left in it (streams they read back last):
 * a run leaves nothing behind in TMPDIR */
static void remove_tmpdir(void)
{
    DIR *d = opendir(tmpdir);
    if (d) {
        struct dirent *e;
        char path[512];
        while ((e = readdir(d)) != NULL) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            snprintf(path, sizeof path, "%s/%s", tmpdir, e->d_name);
            unlink(path);
        }
        closedir(d);
    }
    ok(rmdir(tmpdir) == 0, "the test's temporary directory is removed (%s)", tmpdir);
}

static int read_whole(const char *path, bytes *out)
{
    FILE *fp = fopen(path, "rb");
    unsigned char chunk[4096];
    size_t n;
    out->p = NULL;
    out->n = 0;
    if (!fp) return 0;
    while ((n = fread(chunk, 1, sizeof chunk, fp)) > 0) bytes_append(out, chunk, n);
    fclose(fp);
    return 1;
}

/* The 3-record stream used for the truncation and bit-flip sweeps:
 * a PLAN-like record with arrays, an unknown record type, END. */
static void build_stream3(bytes *b)
{
    nb_record plan, foo;
    void *stored;
    nb_record_init(&plan, "PLAN");
    nb_hdr_set(&plan, "COMMAND", "nb-geom -cell 100 100 100 90 90 90");
    nb_hdr_set_long(&plan, "FPIXELS", 4);
    nb_hdr_set_double(&plan, "PIXEL_SIZE", 1e-4);
    double v[3] = {0.1, 0.05125, -0.05125};
    nb_hdr_set_vec3(&plan, "PIX0", v);
    double src[10] = {1, 0, 0, 1, 1e-10, -1, 0.5, 0.25, 0.5, 6.2e-10};
    nb_record_add_array(&plan, "sources", NB_F64, 10, src, NULL);
    unsigned char mask[7] = {1, 0, 1, 1, 0, 1, 1};
    nb_record_add_array(&plan, "mask", NB_U8, 7, mask, NULL);
    int32_t ints[3] = {-5, 7, 2147483647};
    nb_record_add_array(&plan, "ints", NB_I32, 3, ints, NULL);
    nb_record_add_array(&plan, "zeros", NB_F32, 5, NULL, &stored);
    bytes_append_record(b, &plan);
    nb_record_free(&plan);

    nb_record_init(&foo, "FOO");
    nb_hdr_set(&foo, "WHATEVER", "something else entirely");
    foo.payload = malloc(13);
    memcpy(foo.payload, "\x00\x01\x02opaque\xff\xfe\n\r", 13);
    foo.payload_len = 13;
    foo.payload_cap = 13;
    bytes_append_record(b, &foo);
    nb_record_free(&foo);
    bytes_append_end(b, 2);
}

/* ---- tests ---------------------------------------------------------------- */

static void test_header_values(void)
{
    nb_record rec;
    nb_record_init(&rec, "TEST");
    const double dv[] = {0.1,
                         1.0 / 3.0,
                         -1e-300,
                         5e-324,
                         DBL_MIN,
                         DBL_MAX,
                         -DBL_MAX,
                         M_PI,
                         6.02214179e23,
                         125932015286227086360700780544.0,
                         -0.0,
                         0.0,
                         1.0000000000000002,
                         0.30000000000000004,
                         123456789012345678.0,
                         -2.5e-10,
                         HUGE_VAL,
                         -HUGE_VAL};
    const int nd = (int)(sizeof dv / sizeof dv[0]);
    char key[32];
    for (int i = 0; i < nd; i++) {
        snprintf(key, sizeof key, "D%d", i);
        nb_hdr_set_double(&rec, key, dv[i]);
    }
    nb_hdr_set_long(&rec, "LMAX", LONG_MAX);
    nb_hdr_set_long(&rec, "LMIN", LONG_MIN);
    nb_hdr_set_long(&rec, "INT", -42);
    double v3[3] = {1.0 / 7.0, -0.0, 1e-310};
    nb_hdr_set_vec3(&rec, "VEC", v3);
    nb_hdr_set(&rec, "STR", "a value with spaces, = signs and 'quotes'");
    nb_hdr_set(&rec, "EMPTY", "");
    nb_hdr_set(&rec, "AB", "ab");
    nb_hdr_set(&rec, "A", "a");
    nb_hdr_setf(&rec, "FMT", "%d-%s", 7, "x");

    /* through serialize + memory reader */
    bytes b = {0};
    bytes_append_record(&b, &rec);
    bytes_append_end(&b, 1);
    nb_reader *r;
    nb_record got;
    int eof;
    memset(&got, 0, sizeof got);
    ok(nb_reader_open_mem(&r, b.p, b.n, "mem") == NB_OK, "open a memory reader");
    ok(nb_reader_next(r, &got, &eof) == NB_OK && !eof, "read back the record");
    ok(strcmp(got.type, "TEST") == 0, "type survives");
    ok(got.header_len == rec.header_len && memcmp(got.header, rec.header, rec.header_len) == 0,
       "header bytes survive unchanged");
    int all = 1;
    for (int i = 0; i < nd; i++) {
        double x = 12345;
        snprintf(key, sizeof key, "D%d", i);
        if (nb_hdr_get_double(&got, key, &x) != NB_OK || memcmp(&x, &dv[i], sizeof x) != 0) {
            printf("# double %s = %.17g came back as %.17g\n", key, dv[i], x);
            all = 0;
        }
    }
    ok(all, "%d doubles round-trip bit for bit (incl. -0, denormals, DBL_MAX, inf)", nd);
    long l = 0;
    ok(nb_hdr_get_long(&got, "LMAX", &l) == NB_OK && l == LONG_MAX, "LONG_MAX round-trips");
    ok(nb_hdr_get_long(&got, "LMIN", &l) == NB_OK && l == LONG_MIN, "LONG_MIN round-trips");
    int iv = 0;
    ok(nb_hdr_get_int(&got, "INT", &iv) == NB_OK && iv == -42, "int round-trips");
    ok(nb_hdr_get_int(&got, "LMAX", &iv) == NB_ERR_DATA && contains(nb_error_message(), "LMAX"),
       "int getter refuses an out-of-range long: %s", nb_error_message());
    double w3[3] = {0, 0, 0};
    ok(nb_hdr_get_vec3(&got, "VEC", w3) == NB_OK && memcmp(w3, v3, sizeof w3) == 0, "vec3 round-trips exactly");
    char *s = NULL;
    ok(nb_hdr_get_str(&got, "STR", &s) == NB_OK && s && strcmp(s, "a value with spaces, = signs and 'quotes'") == 0,
       "string round-trips");
    free(s);
    ok(nb_hdr_get_str(&got, "EMPTY", &s) == NB_OK && s && s[0] == '\0', "empty string value round-trips");
    free(s);
    ok(nb_hdr_get_str(&got, "A", &s) == NB_OK && s && strcmp(s, "a") == 0, "key A is not confused with key AB");
    free(s);
    ok(nb_hdr_get_str(&got, "FMT", &s) == NB_OK && s && strcmp(s, "7-x") == 0, "nb_hdr_setf formats");
    free(s);
    ok(nb_reader_next(r, &got, &eof) == NB_OK && !eof && nb_record_is(&got, "END"), "END record is returned");
    ok(nb_reader_next(r, &got, &eof) == NB_OK && eof, "then a clean end of stream");
    nb_reader_close(r);
    nb_record_free(&got);
    free(b.p);

    /* replacing a key keeps its place and does not duplicate it */
    nb_record t;
    nb_record_init(&t, "T");
    nb_hdr_set(&t, "K1", "one");
    nb_hdr_set(&t, "K2", "two");
    nb_hdr_set(&t, "K3", "three");
    nb_hdr_set(&t, "K2", "TWO!");
    ok(strcmp(t.header, "\nK1=one\nK2=TWO!\nK3=three\n") == 0, "setting an existing key replaces it in place");
    ok(t.header_len == strlen(t.header), "header_len follows the text");
    size_t len = 0;
    const char *f = nb_hdr_find(&t, "K3", &len);
    ok(f && len == 5 && strncmp(f, "three", 5) == 0, "nb_hdr_find gives the value and its length");
    ok(nb_hdr_find(&t, "K", NULL) == NULL && !nb_hdr_has(&t, "K") && !nb_hdr_has(&t, "1"),
       "a key prefix or infix is not a key");
    ok(nb_hdr_has(&t, "K1"), "nb_hdr_has finds a key");

    /* getters reject missing keys and malformed numbers */
    double d;
    ok(nb_hdr_get_double(&t, "MISSING", &d) == NB_ERR_DATA && contains(nb_error_message(), "MISSING") &&
           contains(nb_error_message(), "missing"),
       "missing double key: %s", nb_error_message());
    ok(nb_hdr_get_long(&t, "MISSING", &l) == NB_ERR_DATA && contains(nb_error_message(), "MISSING"),
       "missing long key: %s", nb_error_message());
    ok(nb_hdr_get_str(&t, "MISSING", &s) == NB_ERR_DATA && s == NULL && contains(nb_error_message(), "MISSING"),
       "missing string key: %s", nb_error_message());
    ok(nb_hdr_get_vec3(&t, "MISSING", w3) == NB_ERR_DATA, "missing vec3 key");
    const char *bad_doubles[] = {"", "abc", "1.5x", "1 2", "--1", "1e", ". "};
    for (size_t i = 0; i < sizeof bad_doubles / sizeof bad_doubles[0]; i++) {
        nb_hdr_set(&t, "BAD", bad_doubles[i]);
        ok(nb_hdr_get_double(&t, "BAD", &d) == NB_ERR_DATA && contains(nb_error_message(), "BAD"),
           "double '%s' is refused: %s", bad_doubles[i], nb_error_message());
    }
    const char *bad_longs[] = {"", "12abc", "1.5", "1e3", "99999999999999999999999", "0x", "x"};
    for (size_t i = 0; i < sizeof bad_longs / sizeof bad_longs[0]; i++) {
        nb_hdr_set(&t, "BADL", bad_longs[i]);
        ok(nb_hdr_get_long(&t, "BADL", &l) == NB_ERR_DATA && contains(nb_error_message(), "BADL"),
           "long '%s' is refused: %s", bad_longs[i], nb_error_message());
    }
    const char *bad_vecs[] = {"1 2", "1 2 3 4", "1 2 x", "1,2,3", ""};
    for (size_t i = 0; i < sizeof bad_vecs / sizeof bad_vecs[0]; i++) {
        nb_hdr_set(&t, "BADV", bad_vecs[i]);
        ok(nb_hdr_get_vec3(&t, "BADV", w3) == NB_ERR_DATA && contains(nb_error_message(), "BADV"),
           "vec3 '%s' is refused: %s", bad_vecs[i], nb_error_message());
    }
    nb_record_free(&t);
    nb_record_free(&rec);
}

static void test_arrays(void)
{
    nb_record rec;
    nb_record_init(&rec, "ARR");
    float f32[5] = {1.5f, -2.25f, 3e-38f, FLT_MAX, -0.0f};
    double f64[4] = {M_PI, -1e300, 5e-324, 1.0 / 3.0};
    uint8_t u8[3] = {0, 127, 255};
    uint16_t u16[5] = {0, 1, 65535, 256, 4242};
    uint32_t u32[3] = {0, 4294967295u, 123456789u};
    int32_t i32[4] = {-2147483647 - 1, 2147483647, -1, 0};
    /* odd sizes in between so that alignment padding is needed */
    ok(nb_record_add_array(&rec, "u8", NB_U8, 3, u8, NULL) == NB_OK, "add u8[3]");
    ok(nb_record_add_array(&rec, "f64", NB_F64, 4, f64, NULL) == NB_OK, "add f64[4]");
    ok(nb_record_add_array(&rec, "u16", NB_U16, 5, u16, NULL) == NB_OK, "add u16[5]");
    ok(nb_record_add_array(&rec, "f32", NB_F32, 5, f32, NULL) == NB_OK, "add f32[5]");
    ok(nb_record_add_array(&rec, "u32", NB_U32, 3, u32, NULL) == NB_OK, "add u32[3]");
    ok(nb_record_add_array(&rec, "i32", NB_I32, 4, i32, NULL) == NB_OK, "add i32[4]");
    ok(nb_record_add_array(&rec, "empty", NB_F64, 0, NULL, NULL) == NB_OK, "add an empty array");
    void *stored = NULL;
    ok(nb_record_add_array(&rec, "filled", NB_F64, 3, NULL, &stored) == NB_OK && stored, "add a zero-filled array");
    if (stored) {
        ok(((double *)stored)[0] == 0 && ((double *)stored)[2] == 0, "NULL data is zero-filled");
        ((double *)stored)[1] = 42.0; /* fill in place */
    }
    ok(nb_dtype_size(NB_F32) == 4 && nb_dtype_size(NB_F64) == 8 && nb_dtype_size(NB_U8) == 1 &&
           nb_dtype_size(NB_U16) == 2 && nb_dtype_size(NB_U32) == 4 && nb_dtype_size(NB_I32) == 4,
       "dtype sizes");
    ok(strcmp(nb_dtype_name(NB_F32), "f32") == 0 && strcmp(nb_dtype_name(NB_I32), "i32") == 0 &&
           strcmp(nb_dtype_name(NB_U16), "u16") == 0,
       "dtype names");

    bytes b = {0};
    bytes_append_record(&b, &rec);
    bytes_append_end(&b, 1);
    nb_reader *r;
    nb_record got;
    int eof;
    memset(&got, 0, sizeof got);
    nb_reader_open_mem(&r, b.p, b.n, "arrays");
    ok(nb_reader_next(r, &got, &eof) == NB_OK && !eof, "read the array record");
    ok(got.payload_len == rec.payload_len && memcmp(got.payload, rec.payload, rec.payload_len) == 0,
       "payload survives byte for byte");

    struct {
        const char *name;
        nb_dtype t;
        const void *data;
        size_t n;
    } want[] = {{"u8", NB_U8, u8, 3},     {"f64", NB_F64, f64, 4}, {"u16", NB_U16, u16, 5},
                {"f32", NB_F32, f32, 5},  {"u32", NB_U32, u32, 3}, {"i32", NB_I32, i32, 4},
                {"empty", NB_F64, NULL, 0}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const void *data = NULL;
        size_t count = 99;
        nb_status st = nb_record_get_array(&got, want[i].name, want[i].t, &data, &count);
        size_t off = data ? (size_t)((const unsigned char *)data - got.payload) : 0;
        ok(st == NB_OK && count == want[i].n && (want[i].n == 0 || memcmp(data, want[i].data, want[i].n *
                                                                            nb_dtype_size(want[i].t)) == 0),
           "%s array round-trips", want[i].name);
        ok(st == NB_OK && off % 8 == 0, "%s array is 8-byte aligned in the payload (offset %zu)", want[i].name, off);
    }
    const void *data;
    size_t count;
    ok(nb_record_get_array(&got, "filled", NB_F64, &data, &count) == NB_OK && count == 3 &&
           ((const double *)data)[1] == 42.0,
       "array filled in place through the returned pointer");
    ok(nb_record_has_array(&got, "f32") && !nb_record_has_array(&got, "f3") && !nb_record_has_array(&got, "nope"),
       "nb_record_has_array");

    /* wrong dtype */
    ok(nb_record_get_array(&got, "f32", NB_F64, &data, &count) == NB_ERR_DATA &&
           contains(nb_error_message(), "f32") && contains(nb_error_message(), "f64"),
       "wrong dtype refused: %s", nb_error_message());
    ok(nb_record_get_array(&got, "u32", NB_I32, &data, &count) == NB_ERR_DATA, "u32 is not i32");
    ok(nb_record_get_array(&got, "nope", NB_F64, &data, &count) == NB_ERR_DATA &&
           contains(nb_error_message(), "nope"),
       "missing array refused: %s", nb_error_message());

    /* hand-made descriptors: out of bounds, misaligned, malformed */
    nb_record bad;
    nb_record_init(&bad, "BAD");
    nb_record_add_array(&bad, "x", NB_F64, 4, f64, NULL); /* payload of 32 bytes */
    struct {
        const char *entry;
        nb_dtype t;
        const char *why;
    } cases[] = {
        {"f64 5 0", NB_F64, "count past the end"},
        {"f64 4 8", NB_F64, "offset + count past the end"},
        {"f64 1 32", NB_F64, "offset at the end"},
        {"f64 1 40", NB_F64, "offset beyond the end"},
        {"f64 1 4", NB_F64, "misaligned offset"},
        {"f32 1 12", NB_F32, "misaligned f32 offset"},
        {"u8 1 33", NB_U8, "u8 offset beyond the end"},
        {"f64 -1 0", NB_F64, "negative count"},
        {"f64 1 -8", NB_F64, "negative offset"},
        {"f64 18446744073709551615 0", NB_F64, "huge count"},
        {"f64 2305843009213693952 0", NB_F64, "count whose byte size wraps"},
        {"f64 1 18446744073709551608", NB_F64, "huge aligned offset"},
        {"f64 1", NB_F64, "missing offset"},
        {"f64 1 0 extra", NB_F64, "trailing junk"},
        {"f64 x 0", NB_F64, "non-numeric count"},
        {"", NB_F64, "empty descriptor"},
        {"c128 1 0", NB_F64, "unknown dtype"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        nb_hdr_set(&bad, "ARRAY.y", cases[i].entry);
        data = NULL;
        nb_status st = nb_record_get_array(&bad, "y", cases[i].t, &data, &count);
        ok(st == NB_ERR_DATA, "array entry '%s' (%s) refused: %s", cases[i].entry, cases[i].why,
           st ? nb_error_message() : "accepted!");
    }
    nb_hdr_set(&bad, "ARRAY.y", "f64 3 8");
    ok(nb_record_get_array(&bad, "y", NB_F64, &data, &count) == NB_OK && count == 3 &&
           ((const double *)data)[0] == f64[1],
       "a hand-made in-bounds descriptor is accepted");
    nb_hdr_set(&bad, "ARRAY.y", "f64 0 32");
    ok(nb_record_get_array(&bad, "y", NB_F64, &data, &count) == NB_OK && count == 0,
       "an empty array at the very end is accepted");
    nb_record_free(&bad);

    nb_reader_close(r);
    nb_record_free(&got);
    nb_record_free(&rec);
    free(b.p);
}

static void test_writer_file(void)
{
    char path[512], other[512];
    snprintf(path, sizeof path, "%s/w.nbs", tmpdir);
    nb_writer *w;
    nb_record a, foo;
    nb_record_init(&a, "PLAN");
    nb_hdr_set_double(&a, "X", 0.1);
    double arr[3] = {1, 2, 3};
    nb_record_add_array(&a, "v", NB_F64, 3, arr, NULL);
    nb_record_init(&foo, "FOO");
    nb_hdr_set(&foo, "OPAQUE", "yes");
    uint8_t blob[5] = {9, 8, 7, 6, 5};
    nb_record_add_array(&foo, "blob", NB_U8, 5, blob, NULL);

    ok(nb_writer_open(&w, path) == NB_OK, "open a writer on a file");
    struct stat sb;
    ok(stat(path, &sb) != 0, "the file does not exist under its name before close");
    ok(nb_writer_put(w, &a) == NB_OK && nb_writer_put(w, &foo) == NB_OK, "put two records");
    ok(nb_writer_end(w) == NB_OK, "end the first segment");
    ok(nb_writer_put(w, &foo) == NB_OK, "put a record in a second segment");
    /* putting an END record ends the segment with the writer's own count */
    nb_record fake_end;
    nb_record_init(&fake_end, "END");
    nb_hdr_set_long(&fake_end, "RECORDS", 77);
    ok(nb_writer_put(w, &fake_end) == NB_OK, "put an END record");
    nb_record_free(&fake_end);
    ok(nb_writer_close(w) == NB_OK, "close (commit) the writer");
    ok(stat(path, &sb) == 0, "the file exists after close");

    /* the file equals the serialized records */
    bytes want = {0}, have = {0};
    bytes_append_record(&want, &a);
    bytes_append_record(&want, &foo);
    bytes_append_end(&want, 2);
    bytes_append_record(&want, &foo);
    bytes_append_end(&want, 1);
    ok(read_whole(path, &have) && have.n == want.n && memcmp(have.p, want.p, want.n) == 0,
       "writer output equals nb_record_serialize output (%zu bytes)", want.n);

    /* and reads back through a file reader */
    nb_reader *r;
    nb_record got;
    int eof = 0, n = 0, ends = 0;
    memset(&got, 0, sizeof got);
    ok(nb_reader_open(&r, path) == NB_OK, "open a file reader");
    ok(strcmp(nb_reader_name(r), path) == 0, "the reader is named after the file");
    nb_status st;
    int foo_ok = 1;
    while ((st = nb_reader_next(r, &got, &eof)) == NB_OK && !eof) {
        n++;
        if (nb_record_is(&got, "END")) {
            ends++;
            continue;
        }
        if (nb_record_is(&got, "FOO")) {
            foo_ok &= got.header_len == foo.header_len && memcmp(got.header, foo.header, foo.header_len) == 0 &&
                      got.payload_len == foo.payload_len &&
                      memcmp(got.payload, foo.payload, (size_t)foo.payload_len) == 0;
        }
    }
    ok(st == NB_OK && eof && n == 5 && ends == 2, "two segments read back (%d records, %d END)", n, ends);
    ok(foo_ok, "the unknown FOO record comes back unchanged");
    nb_reader_close(r);
    nb_record_free(&got);

    /* pass-through: read the file and write every record again */
    snprintf(other, sizeof other, "%s/copy.nbs", tmpdir);
    nb_writer *w2;
    nb_reader_open(&r, path);
    memset(&got, 0, sizeof got);
    ok(nb_writer_open(&w2, other) == NB_OK, "open a second writer");
    while ((st = nb_reader_next(r, &got, &eof)) == NB_OK && !eof) {
        if (nb_writer_put(w2, &got) != NB_OK) break;
    }
    nb_reader_close(r);
    nb_record_free(&got);
    ok(nb_writer_close(w2) == NB_OK, "close the copy");
    bytes copy = {0};
    ok(read_whole(other, &copy) && copy.n == have.n && memcmp(copy.p, have.p, have.n) == 0,
       "records (unknown type and END included) are re-written identically");
    free(copy.p);

    /* aborting leaves no file behind */
    char aborted[512];
    snprintf(aborted, sizeof aborted, "%s/aborted.nbs", tmpdir);
    ok(nb_writer_open(&w, aborted) == NB_OK && nb_writer_put(w, &a) == NB_OK, "write into an aborted writer");
    nb_writer_abort(w);
    ok(stat(aborted, &sb) != 0, "an aborted writer leaves no file");

    /* a missing file is an I/O error naming it */
    char missing[512];
    snprintf(missing, sizeof missing, "%s/no/such/file.nbs", tmpdir);
    ok(nb_reader_open(&r, missing) == NB_ERR_IO && contains(nb_error_message(), missing),
       "missing input file: %s", nb_error_message());
    ok(nb_writer_open(&w, missing) != NB_OK, "a writer into a missing directory fails: %s", nb_error_message());

    remove(path);
    remove(other);
    free(want.p);
    free(have.p);
    nb_record_free(&a);
    nb_record_free(&foo);
}

typedef struct pipe_sink {
    int fd;
    bytes got;
} pipe_sink;

static void *drain_pipe(void *arg)
{
    pipe_sink *ps = arg;
    unsigned char buf[65536];
    ssize_t k;
    while ((k = read(ps->fd, buf, sizeof buf)) > 0) {
        unsigned char *q = realloc(ps->got.p, ps->got.n + (size_t)k);
        if (!q) break;
        memcpy(q + ps->got.n, buf, (size_t)k);
        ps->got.p = q, ps->got.n += (size_t)k;
    }
    return NULL;
}

/* nb_writer_put_consume: into a pipe the payload's pages are handed over
 * (and dropped here), with the caller's payload CRC or without; the reader
 * gets the same record either way, and a wrong CRC is the one written. */
static void test_put_consume(void)
{
    const size_t n = (size_t)3 << 20, width = 3072; /* 12 MiB of floats: above the size that is spliced */
    nb_record rec;
    float *px;
    unsigned char *tail;
    nb_record_init(&rec, "IMAGE");
    nb_hdr_set_long(&rec, "FPIXELS", 3);
    /* bytes before and after the pixels, which the writer checksums itself */
    if (nb_record_add_array(&rec, "head", NB_U8, 5, "abcde", NULL) ||
        nb_record_add_array(&rec, "pixels", NB_F32, n, NULL, (void **)&px) ||
        nb_record_add_array(&rec, "tail", NB_U8, 3, "xyz", (void **)&tail)) {
        ok(0, "allocate a 12 MiB record");
        return;
    }
    for (size_t i = 0; i < n; i++) px[i] = (float)(i % 1000003) * 0.25f;
    unsigned char *copy = malloc((size_t)rec.payload_len);
    memcpy(copy, rec.payload, (size_t)rec.payload_len);
    /* the pixels' rows' CRCs, as a producer takes them */
    nb_payload_crc crc;
    if (nb_payload_crc_init(&crc, (uint64_t)((unsigned char *)px - rec.payload), width * sizeof(float), n / width)) {
        ok(0, "nb_payload_crc_init");
        return;
    }
    for (size_t y = 0; y < n / width; y++) nb_payload_crc_take(&crc, y, px + y * width);
    ok(crc.offset == 8 && tail >= (unsigned char *)(px + n), "the pixels lie between two other arrays (offset %llu)",
       (unsigned long long)crc.offset);

    int pfd[2];
    pipe_sink sink = {0};
    pthread_t th;
    int ready = pipe(pfd) == 0;
    sink.fd = ready ? pfd[0] : -1;
    ready = ready && pthread_create(&th, NULL, drain_pipe, &sink) == 0;
    nb_status st = NB_ERR_IO;
    if (ready) {
        /* standard output is the pipe meanwhile: no TAP lines until it is back */
        fflush(stdout);
        int saved = dup(1);
        dup2(pfd[1], 1);
        close(pfd[1]);
        nb_writer *w;
        st = nb_writer_open(&w, "-");
        if (!st) st = nb_writer_put_consume(w, &rec, &crc);
        if (!st) st = nb_writer_end(w);
        if (!st) st = nb_writer_close(w);
        fflush(stdout);
        dup2(saved, 1);
        close(saved);
        pthread_join(th, NULL);
        close(pfd[0]);
    }
    ok(st == NB_OK, "put_consume into a pipe: %s", st ? nb_error_message() : "written");
    nb_reader *r;
    nb_record back;
    int eof = 0;
    memset(&back, 0, sizeof back);
    st = nb_reader_open_mem(&r, sink.got.p, sink.got.n, "pipe");
    if (!st) st = nb_reader_next(r, &back, &eof);
    ok(!st && !eof && back.payload_len == rec.payload_len && !memcmp(back.payload, copy, (size_t)rec.payload_len),
       "the reader gets the record whole, its CRC-32 checked");
    nb_record_free(&back);
    if (!st) nb_reader_close(r);
#ifdef __linux__
    /* the whole pages were handed to the pipe and dropped here */
    size_t zero_floats = 0;
    for (size_t i = 0; i < n; i++) zero_floats += px[i] == 0.0f;
    ok(zero_floats > n - 2048, "the payload's pages were handed over (%zu of %zu floats now read as 0)", zero_floats,
       n);
#endif
    /* into a file (no splicing): the caller's CRCs are the ones written */
    memcpy(rec.payload, copy, (size_t)rec.payload_len);
    char path[512];
    snprintf(path, sizeof path, "%s/consume.nbs", tmpdir);
    for (int wrong = 0; wrong < 2; wrong++) {
        nb_writer *w;
        crc.crc[17] ^= (uint32_t)wrong;
        st = nb_writer_open(&w, path);
        if (!st) st = nb_writer_put_consume(w, &rec, &crc);
        if (!st) st = nb_writer_end(w);
        if (!st) st = nb_writer_close(w);
        nb_status rst = st;
        if (!rst) rst = nb_reader_open(&r, path);
        if (!rst) {
            rst = nb_reader_next(r, &back, &eof);
            nb_record_free(&back);
            nb_reader_close(r);
        }
        if (wrong)
            ok(rst == NB_ERR_DATA && strstr(nb_error_message(), "CRC"), "a wrong piece's CRC is written: %s",
               nb_error_message());
        else
            ok(!st && !rst, "the right pieces' CRCs read back");
    }
    /* pieces that do not fit in the payload are refused, before anything is written */
    crc.pieces++;
    nb_writer *w;
    st = nb_writer_open(&w, path);
    if (!st) {
        st = nb_writer_put_consume(w, &rec, &crc);
        nb_writer_abort(w);
    }
    ok(st == NB_ERR_USAGE && strstr(nb_error_message(), "outside the"), "CRCs of pieces outside the payload: %s",
       nb_error_message());
    nb_payload_crc_free(&crc);
    ok(crc.crc == NULL && crc.pieces == 0, "nb_payload_crc_free leaves it empty");
    free(copy);
    free(sink.got.p);
    nb_record_free(&rec);
}

/* ---- a reader that goes away ---------------------------------------------- */
/* Each case runs in a child, whose standard output is a pipe without a reader
 * (its signal state and stdio are then its own); the parent sees how it ended. */

static char closed_temp[512]; /* a registered temporary file the cases leave or remove */

static void stdout_into_closed_pipe(void)
{
    int pfd[2];
    if (pipe(pfd) != 0) _exit(90);
    close(pfd[0]);
    dup2(pfd[1], 1);
    close(pfd[1]);
}

static void set_sigpipe(void (*handler)(int), int block)
{
    signal(SIGPIPE, handler);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    sigprocmask(block ? SIG_BLOCK : SIG_UNBLOCK, &set, NULL);
}

/* ignored SIGPIPE: a small record, then a spliced 6 MiB one, fail with
 * NB_ERR_PIPE (exit 0), anything else exits 10 + the status.  6 MiB and the
 * CRC given: no OpenMP in this child of a process that has its threads. */
static void case_epipe_status(void)
{
    set_sigpipe(SIG_IGN, 0);
    stdout_into_closed_pipe();
    nb_record rec;
    float *px;
    nb_writer *w;
    nb_record_init(&rec, "PLAN");
    nb_status st = nb_writer_open(&w, "-");
    if (!st) st = nb_writer_put(w, &rec);
    if (!st) st = nb_writer_end(w);
    nb_record_free(&rec);
    if (st != NB_ERR_PIPE) _exit(10 + (int)st);
    clearerr(stdout);
    nb_record_init(&rec, "IMAGE");
    if (nb_record_add_array(&rec, "pixels", NB_F32, (size_t)3 << 19, NULL, (void **)&px)) _exit(91);
    memset(px, 0, (size_t)6 << 20);
    uint32_t zeros_crc = nb_crc32_update(0, px, (size_t)6 << 20);
    nb_payload_crc crc = {0, (size_t)6 << 20, 1, &zeros_crc};
    st = nb_writer_put_consume(w, &rec, &crc);
    _exit(st == NB_ERR_PIPE ? 0 : 20 + (int)st);
}

/* ignored and blocked by the parent, as a tool may inherit it: the start-up
 * call makes the write kill the process */
static void case_quiet_after_ignored_and_blocked(void)
{
    set_sigpipe(SIG_IGN, 1);
    nb_closed_output_is_quiet();
    stdout_into_closed_pipe();
    ssize_t k = write(1, "x", 1);
    _exit(k < 0 ? 30 : 31);
}

/* with a temporary file registered (the cleanup handler installed), the
 * start-up call again leaves that handler: the write removes the file and
 * the process dies of SIGPIPE */
static void case_cleanup_on_sigpipe(void)
{
    nb_closed_output_is_quiet();
    nb_temp_register(closed_temp);
    nb_closed_output_is_quiet();
    stdout_into_closed_pipe();
    ssize_t k = write(1, "x", 1);
    _exit(k < 0 ? 40 : 41);
}

/* the fallback: main()'s nb_exit_on_error(NB_ERR_PIPE) with SIGPIPE ignored
 * and blocked prints nothing, removes the temporary file, dies of SIGPIPE */
static void case_exit_on_pipe_error(void)
{
    set_sigpipe(SIG_IGN, 1);
    nb_temp_register(closed_temp);
    nb_exit_on_error(nb_error_set(NB_ERR_PIPE, "cannot write standard output: the reader closed the pipe"));
    _exit(50);
}

/* Wait for the child pid: its exit status, or 1000 + the signal that ended it;
 * its standard error, left in the file `path` (removed), into `err` (up to
 * size - 1 bytes; without its final newlines when one_line is set). */
static int child_ended(pid_t pid, const char *path, char *err, size_t size, int one_line)
{
    int ws = 0;
    if (pid < 0 || waitpid(pid, &ws, 0) != pid) return -1;
    err[0] = '\0';
    FILE *fp = fopen(path, "r");
    if (fp) {
        size_t n = fread(err, 1, size - 1, fp);
        while (one_line && n && err[n - 1] == '\n') n--; /* one TAP line */
        err[n] = '\0';
        fclose(fp);
    }
    remove(path);
    return WIFSIGNALED(ws) ? 1000 + WTERMSIG(ws) : WEXITSTATUS(ws);
}

/* how a child running fn ended: its exit status, or 1000 + the signal; its
 * standard error into `err` (up to size - 1 bytes) */
static int in_child(void (*fn)(void), char *err, size_t size)
{
    char path[600];
    snprintf(path, sizeof path, "%s/child.err", tmpdir);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) dup2(fd, 2);
        fn();
        _exit(99);
    }
    return child_ended(pid, path, err, size, 0);
}

static int make_closed_temp(void)
{
    snprintf(closed_temp, sizeof closed_temp, "%s/.pending.tmp", tmpdir);
    FILE *fp = fopen(closed_temp, "w");
    return fp && fclose(fp) == 0;
}

static void test_closed_pipe(void)
{
    char err[256];
    struct stat stt;
    ok(nb_exit_code(NB_ERR_PIPE) == 128 + SIGPIPE, "NB_ERR_PIPE's exit code is a shell's for SIGPIPE (141)");
    nb_status st = nb_write_error("-", EPIPE);
    ok(st == NB_ERR_PIPE, "a write meeting EPIPE is NB_ERR_PIPE: %s", nb_error_message());
    st = nb_write_error("out.bin", ENOSPC);
    ok(st == NB_ERR_IO && contains(nb_error_message(), "cannot write 'out.bin': No space left on device"),
       "any other write error is NB_ERR_IO, named: %s", nb_error_message());

    int how = in_child(case_epipe_status, err, sizeof err);
    ok(how == 0, "SIGPIPE ignored: the writer returns NB_ERR_PIPE, record and spliced payload alike (%d)", how);
    how = in_child(case_quiet_after_ignored_and_blocked, err, sizeof err);
    ok(how == 1000 + SIGPIPE, "SIGPIPE ignored and blocked by the parent: after nb_closed_output_is_quiet() the "
                              "write kills the process (%d)", how);
    ok(make_closed_temp(), "a temporary file to clean up");
    how = in_child(case_cleanup_on_sigpipe, err, sizeof err);
    ok(how == 1000 + SIGPIPE && stat(closed_temp, &stt) != 0,
       "with a temporary registered, SIGPIPE removes it and kills the process (%d)", how);
    ok(make_closed_temp(), "a temporary file to clean up");
    how = in_child(case_exit_on_pipe_error, err, sizeof err);
    ok(how == 1000 + SIGPIPE, "nb_exit_on_error(NB_ERR_PIPE), SIGPIPE ignored and blocked: killed by SIGPIPE (%d)",
       how);
    ok(err[0] == '\0', "... printing nothing ('%s')", err);
    ok(stat(closed_temp, &stt) != 0, "... and the temporary file is removed");
    remove(closed_temp);
}

/* A payload consumer that asks for the pieces (kept or not) and puts them
 * back together, checking how they are cut and that each was prepared. */
typedef struct piece_probe {
    nb_payload_use use;
    uint64_t first;
    size_t unit;
    unsigned char *copy; /* the payload, from the pieces */
    uint64_t next;       /* where the next piece should start */
    uint64_t len;        /* the payload's length */
    size_t piece_size;   /* from the reader */
    int begins, pieces, misplaced, too_big;
    /* the prepare step: what it found in each slot, checked by piece() */
    int prepared, prepare_mismatch;
    uint64_t slot_off[NB_READER_SLOTS];
    uint32_t slot_crc[NB_READER_SLOTS];
} piece_probe;

static void probe_prepare(void *ctx, const nb_payload_piece *pc)
{
    piece_probe *d = ctx;
    d->prepared++; /* one reading thread at a time: no race with piece() on this counter */
    d->slot_off[pc->slot] = pc->offset;
    d->slot_crc[pc->slot] = nb_crc32_update(0, pc->data, pc->len);
}

static nb_status probe_begin(void *ctx, const nb_record *rec, nb_payload_how *how)
{
    piece_probe *d = ctx;
    if (!nb_record_is(rec, "IMAGE")) return NB_OK;
    d->begins++;
    d->copy = realloc(d->copy, (size_t)rec->payload_len);
    d->next = 0, d->len = rec->payload_len, d->piece_size = how->piece_size;
    if (how->use != NB_PAYLOAD_KEEP || rec->payload) d->misplaced++; /* the default, and no payload yet */
    how->use = d->use, how->first = d->first, how->unit = d->unit, how->prepare = probe_prepare;
    return NB_OK;
}

static nb_status probe_piece(void *ctx, const nb_payload_piece *pc)
{
    piece_probe *d = ctx;
    int slot = pc->slot;
    uint64_t off = pc->offset, end = off + pc->len;
    size_t len = pc->len;
    if (slot < 0 || slot >= NB_READER_SLOTS || d->slot_off[slot] != off ||
        d->slot_crc[slot] != nb_crc32_update(0, pc->data, len) || slot != d->pieces % NB_READER_SLOTS)
        d->prepare_mismatch++;
    /* in order; none straddles `first`; from `first` on, whole units (but the last) */
    if (off != d->next || (off >= d->first && (off - d->first) % d->unit != 0) ||
        (off < d->first && end > d->first) || (off >= d->first && len % d->unit && end != d->len))
        d->misplaced++;
    d->too_big += len > (d->unit > d->piece_size ? d->unit : d->piece_size);
    memcpy(d->copy + off, pc->data, len);
    d->next = end;
    d->pieces++;
    return NB_OK;
}

/* The first record of the file at path, read on `threads` threads by a
 * reader with the probe as its consumer */
static nb_status read_probed(const char *path, int threads, piece_probe *d, nb_record *got, nb_reader **r)
{
#ifdef _OPENMP
    omp_set_num_threads(threads);
#else
    (void)threads;
#endif
    int eof = 0;
    memset(got, 0, sizeof *got);
    nb_status st = nb_reader_open(r, path);
    if (st) return st;
    nb_payload_consumer c = {probe_begin, probe_piece, d};
    nb_reader_set_consumer(*r, &c);
    return nb_reader_next(*r, got, &eof);
}

/* The payload consumer: the payload comes in pieces cut as asked, each
 * prepared first, on one thread or two, kept or not; a damaged record is
 * still refused. */
static void test_payload_consumer(void)
{
    enum { W = 1000, H = 1500 }; /* 6 MB of pixels: read ahead on a second thread when allowed */
    nb_record rec;
    nb_record_init(&rec, "IMAGE");
    uint8_t pre[100];
    for (int i = 0; i < 100; i++) pre[i] = (uint8_t)(i * 7);
    float *px;
    nb_record_add_array(&rec, "pre", NB_U8, sizeof pre, pre, NULL);
    if (nb_record_add_array(&rec, "pixels", NB_F32, (size_t)W * H, NULL, (void **)&px)) {
        ok(0, "allocate the record");
        return;
    }
    for (size_t i = 0; i < (size_t)W * H; i++) px[i] = (float)i;
    uint64_t pix_off = 0;
    nb_status found = nb_record_array_offset(&rec, "pixels", NB_F32, &pix_off, NULL);
    ok(found == NB_OK && pix_off == 104,
       "nb_record_array_offset: the pixels at byte %llu", (unsigned long long)pix_off);
    char path[512];
    snprintf(path, sizeof path, "%s/drop.nbs", tmpdir);
    nb_writer *w;
    nb_status st = nb_writer_open(&w, path);
    if (!st) st = nb_writer_put(w, &rec);
    if (!st) st = nb_writer_end(w);
    if (!st) st = nb_writer_close(w);
    ok(st == NB_OK, "write a stream with a 6 MB image");
    const nb_payload_use uses[2] = {NB_PAYLOAD_SHOW_ONLY, NB_PAYLOAD_KEEP_AND_SHOW};
    for (int u = 0; u < 2; u++)
        for (int threads = 1; threads <= 2; threads++) {
            const char *how = u ? "kept and shown" : "shown only", *th = threads > 1 ? "s" : "";
            piece_probe d;
            memset(&d, 0, sizeof d);
            d.use = uses[u], d.first = pix_off, d.unit = W * sizeof(float);
            nb_record got;
            nb_reader *r = NULL;
            st = read_probed(path, threads, &d, &got, &r);
            ok(!st && d.begins == 1 && d.pieces > 6 && !d.misplaced && !d.too_big && d.next == rec.payload_len &&
                   !memcmp(d.copy, rec.payload, (size_t)rec.payload_len),
               "%s, %d thread%s: the payload in %d pieces of at most %zu bytes, in order, rows whole, as written",
               how, threads, th, d.pieces, d.piece_size);
            ok(d.prepared == d.pieces && !d.prepare_mismatch,
               "%s, %d thread%s: each piece prepared in its slot (i %% %d) before piece() (%d calls)", how, threads,
               th, NB_READER_SLOTS, d.prepared);
            const void *any = NULL;
            if (u == 0)
                ok(!st && got.payload == NULL && got.payload_len == rec.payload_len &&
                       nb_record_get_array(&got, "pixels", NB_F32, &any, NULL) == NB_ERR_DATA &&
                       strstr(nb_error_message(), "not kept"),
                   "%s, %d thread%s: the record comes back without its payload (%s)", how, threads, th,
                   nb_error_message());
            else
                ok(!st && got.payload_len == rec.payload_len && !memcmp(got.payload, rec.payload, rec.payload_len),
                   "%s, %d thread%s: the record comes back with its payload", how, threads, th);
            nb_record_free(&got);
            if (r) nb_reader_close(r);
            free(d.copy);
        }
    /* a damaged payload fails its CRC, a short one is truncated, either way */
    bytes b = {0};
    read_whole(path, &b);
    const char *what[2] = {"CRC-32", "truncated"};
    for (int threads = 1; threads <= 2; threads++)
        for (int k = 0; k < 2; k++) {
            char bad[512];
            snprintf(bad, sizeof bad, "%s/drop-bad.nbs", tmpdir);
            FILE *f = fopen(bad, "wb");
            unsigned char keep = b.p[b.n / 2];
            if (k == 0) b.p[b.n / 2] ^= 0x40;
            if (f) fwrite(b.p, 1, k == 0 ? b.n : b.n / 2, f), fclose(f);
            b.p[b.n / 2] = keep;
            piece_probe d;
            memset(&d, 0, sizeof d);
            d.use = NB_PAYLOAD_SHOW_ONLY, d.first = pix_off, d.unit = W * sizeof(float);
            nb_record got;
            nb_reader *r = NULL;
            st = read_probed(bad, threads, &d, &got, &r);
            ok(st == NB_ERR_DATA && strstr(nb_error_message(), what[k]), "%d thread%s, %s: %s", threads,
               threads > 1 ? "s" : "", k ? "cut in half" : "a flipped bit", nb_error_message());
            nb_record_free(&got);
            if (r) nb_reader_close(r);
            free(d.copy);
        }
    /* a consumer that asks for pieces without a piece function is refused */
    nb_reader *r = NULL;
    nb_record got;
    int eof = 0;
    memset(&got, 0, sizeof got);
    piece_probe d;
    memset(&d, 0, sizeof d);
    d.use = NB_PAYLOAD_KEEP_AND_SHOW, d.unit = 4;
    nb_payload_consumer c = {probe_begin, NULL, &d};
    st = nb_reader_open(&r, path);
    if (!st) {
        nb_reader_set_consumer(r, &c);
        st = nb_reader_next(r, &got, &eof);
    }
    ok(st == NB_ERR_USAGE && strstr(nb_error_message(), "without a piece function"), "a consumer without piece(): %s",
       nb_error_message());
    /* and without a consumer (removed again) the record comes back whole */
    nb_record_free(&got);
    if (r) nb_reader_close(r);
    st = nb_reader_open(&r, path);
    if (!st) {
        nb_reader_set_consumer(r, &c);
        nb_reader_set_consumer(r, NULL);
        st = nb_reader_next(r, &got, &eof);
    }
    ok(!st && got.payload && !memcmp(got.payload, rec.payload, rec.payload_len) && d.begins == 1,
       "nb_reader_set_consumer(NULL): no consumer, the record whole");
    nb_record_free(&got);
    if (r) nb_reader_close(r);
    free(d.copy);
#ifdef _OPENMP
    omp_set_num_threads(2);
#endif
    free(b.p);
    nb_record_free(&rec);
}

static void test_segments_and_errors(void)
{
    nb_record a, b2, c;
    nb_record_init(&a, "PLAN");
    nb_hdr_set(&a, "K", "1");
    nb_record_init(&b2, "HKL");
    nb_hdr_set(&b2, "K", "2");
    nb_record_init(&c, "IMAGE");
    nb_record_add_array(&c, "pixels", NB_F32, 16, NULL, NULL);
    char types[16][NB_TYPE_LEN + 1];
    int n = 0;

    /* two concatenated segments */
    bytes s = {0};
    bytes_append_record(&s, &a);
    bytes_append_end(&s, 1);
    bytes_append_record(&s, &b2);
    bytes_append_record(&s, &c);
    bytes_append_end(&s, 2);
    nb_status st = read_all(s.p, s.n, &n, types, 16);
    ok(st == NB_OK && n == 5, "concatenated segments read fine (%d records)", n);
    ok(n == 5 && !strcmp(types[0], "PLAN") && !strcmp(types[1], "END") && !strcmp(types[2], "HKL") &&
           !strcmp(types[3], "IMAGE") && !strcmp(types[4], "END"),
       "records come in order with both END records");
    /* a segment of no records but END */
    bytes e = {0};
    bytes_append_end(&e, 0);
    ok(read_all(e.p, e.n, &n, NULL, 0) == NB_OK && n == 1, "a stream of just END (0 records) is valid");
    bytes_append(&e, s.p, s.n);
    ok(read_all(e.p, e.n, &n, NULL, 0) == NB_OK && n == 6, "END-only segment followed by more segments");
    free(e.p);

    /* END count mismatches */
    bytes m = {0};
    bytes_append_record(&m, &a);
    bytes_append_end(&m, 2);
    ok(read_all(m.p, m.n, &n, NULL, 0) == NB_ERR_DATA && contains(nb_error_message(), "END"),
       "END says 2 but 1 record: %s", nb_error_message());
    free(m.p);
    m = (bytes){0};
    bytes_append_record(&m, &a);
    bytes_append_record(&m, &b2);
    bytes_append_end(&m, 1);
    ok(read_all(m.p, m.n, &n, NULL, 0) == NB_ERR_DATA, "END says 1 but 2 records: %s", nb_error_message());
    free(m.p);
    m = (bytes){0};
    bytes_append_record(&m, &a);
    bytes_append_end(&m, 1);
    bytes_append_record(&m, &b2);
    bytes_append_end(&m, 2); /* counts records across segments: wrong */
    ok(read_all(m.p, m.n, &n, NULL, 0) == NB_ERR_DATA, "END counting across a segment boundary is refused: %s",
       nb_error_message());
    free(m.p);
    /* END without RECORDS, or with a malformed count */
    m = (bytes){0};
    nb_record badend;
    nb_record_init(&badend, "END");
    bytes_append_record(&m, &badend);
    ok(read_all(m.p, m.n, &n, NULL, 0) == NB_ERR_DATA && contains(nb_error_message(), "RECORDS"),
       "END without RECORDS: %s", nb_error_message());
    free(m.p);
    m = (bytes){0};
    nb_hdr_set(&badend, "RECORDS", "zero");
    bytes_append_record(&m, &badend);
    ok(read_all(m.p, m.n, &n, NULL, 0) == NB_ERR_DATA && contains(nb_error_message(), "RECORDS"),
       "END with RECORDS=zero: %s", nb_error_message());
    free(m.p);
    nb_record_free(&badend);

    /* empty, garbage, no END */
    unsigned char empty[1] = {0};
    ok(read_all(empty, 0, &n, NULL, 0) == NB_ERR_DATA && contains(nb_error_message(), "empty"),
       "empty input: %s", nb_error_message());
    const char *garbage = "P1 hkl file\n0 0 0 100\n1 0 0 20\n this is not a stream at all, not even close....\n";
    ok(read_all((const unsigned char *)garbage, strlen(garbage), &n, NULL, 0) == NB_ERR_DATA &&
           contains(nb_error_message(), "not an nb stream"),
       "garbage input: %s", nb_error_message());
    ok(read_all((const unsigned char *)"\x89NB", 3, &n, NULL, 0) == NB_ERR_DATA, "3 bytes of magic: %s",
       nb_error_message());
    ok(read_all((const unsigned char *)"x", 1, &n, NULL, 0) == NB_ERR_DATA, "a single byte: %s", nb_error_message());
    /* an nb stream mangled by a CRLF translation */
    {
        bytes crlf = {0};
        const unsigned char mangled[] = "\x89NBS\r\r\n\x1a\n";
        bytes_append(&crlf, mangled, 9);
        bytes_append(&crlf, s.p + 8, s.n - 8);
        ok(read_all(crlf.p, crlf.n, &n, NULL, 0) == NB_ERR_DATA, "CRLF-mangled magic: %s", nb_error_message());
        free(crlf.p);
    }
    bytes t = {0};
    bytes_append_record(&t, &a);
    bytes_append_record(&t, &b2);
    ok(read_all(t.p, t.n, &n, NULL, 0) == NB_ERR_DATA && contains(nb_error_message(), "truncated") && n == 2,
       "records without END: %s", nb_error_message());
    /* a full segment then an unterminated one */
    bytes u = {0};
    bytes_append(&u, s.p, s.n);
    bytes_append_record(&u, &a);
    ok(read_all(u.p, u.n, &n, NULL, 0) == NB_ERR_DATA && contains(nb_error_message(), "truncated"),
       "a second segment without END: %s", nb_error_message());
    free(u.p);
    /* trailing garbage after a valid stream */
    u = (bytes){0};
    bytes_append(&u, s.p, s.n);
    bytes_append(&u, (const unsigned char *)"junk", 4);
    ok(read_all(u.p, u.n, &n, NULL, 0) == NB_ERR_DATA && contains(nb_error_message(), "magic"),
       "trailing junk after END: %s", nb_error_message());
    free(u.p);
    /* trailing zero bytes (a padded file) */
    u = (bytes){0};
    bytes_append(&u, s.p, s.n);
    bytes_append(&u, (const unsigned char *)"\0\0\0\0\0\0\0\0", 8);
    ok(read_all(u.p, u.n, &n, NULL, 0) == NB_ERR_DATA, "trailing NUL padding after END: %s", nb_error_message());
    free(u.p);

    /* a wrong version, with a CRC that is otherwise right */
    {
        bytes v = {0};
        bytes_append_record(&v, &a);
        bytes_append_end(&v, 1);
        v.p[8] = 2; /* version 2 */
        size_t rec_len = 32 + a.header_len + (size_t)a.payload_len;
        uint32_t crc = (uint32_t)crc32(crc32(0L, Z_NULL, 0), v.p, (uInt)rec_len);
        for (int i = 0; i < 4; i++) v.p[rec_len + i] = (unsigned char)(crc >> (8 * i));
        ok(read_all(v.p, v.n, &n, NULL, 0) == NB_ERR_DATA && contains(nb_error_message(), "version") &&
               contains(nb_error_message(), "2"),
           "version 2 is refused with a message about the version: %s", nb_error_message());
        v.p[8] = 0;
        v.p[11] = 1; /* version 2^24 + ... */
        ok(read_all(v.p, v.n, &n, NULL, 0) == NB_ERR_DATA && contains(nb_error_message(), "version"),
           "a huge version is refused: %s", nb_error_message());
        free(v.p);
    }

    /* a record with a corrupt CRC field only */
    {
        bytes v = {0};
        bytes_append_record(&v, &a);
        bytes_append_end(&v, 1);
        size_t rec_len = 32 + a.header_len + (size_t)a.payload_len;
        v.p[rec_len] ^= 0x01;
        ok(read_all(v.p, v.n, &n, NULL, 0) == NB_ERR_DATA && contains(nb_error_message(), "CRC"),
           "a CRC mismatch: %s", nb_error_message());
        free(v.p);
    }

    /* a huge payload length (with a matching CRC) is refused, not allocated */
    {
        bytes v = {0};
        bytes_append_record(&v, &a);
        uint64_t huge = (uint64_t)1 << 62;
        for (int i = 0; i < 8; i++) v.p[24 + i] = (unsigned char)(huge >> (8 * i));
        ok(read_all(v.p, v.n, &n, NULL, 0) == NB_ERR_DATA && contains(nb_error_message(), "payload"),
           "a 4 EiB payload claim: %s", nb_error_message());
        for (int i = 0; i < 8; i++) v.p[24 + i] = 0;
        v.p[20] = 0xff, v.p[21] = 0xff, v.p[22] = 0xff, v.p[23] = 0x7f; /* 2 GiB header */
        ok(read_all(v.p, v.n, &n, NULL, 0) == NB_ERR_DATA && contains(nb_error_message(), "header"),
           "a 2 GiB header claim: %s", nb_error_message());
        free(v.p);
    }

    /* type field rules: 8 characters is the maximum, and survives */
    {
        nb_record eight;
        nb_record_init(&eight, "ABCDEFGH");
        nb_hdr_set(&eight, "K", "v");
        bytes v = {0};
        bytes_append_record(&v, &eight);
        bytes_append_end(&v, 1);
        ok(read_all(v.p, v.n, &n, types, 16) == NB_OK && n == 2 && strcmp(types[0], "ABCDEFGH") == 0,
           "an 8-character record type round-trips");
        v.p[12] = ' '; /* a space in the type */
        ok(read_all(v.p, v.n, &n, NULL, 0) == NB_ERR_DATA, "a type with a space is refused");
        v.p[12] = 'A';
        v.p[14] = '\0'; /* "AB\0DEFGH": text after the NUL padding */
        ok(read_all(v.p, v.n, &n, NULL, 0) == NB_ERR_DATA && contains(nb_error_message(), "type"),
           "text after the type's NUL padding is refused: %s", nb_error_message());
        memset(v.p + 12, 0, 8);
        ok(read_all(v.p, v.n, &n, NULL, 0) == NB_ERR_DATA && contains(nb_error_message(), "type"),
           "an empty type is refused: %s", nb_error_message());
        free(v.p);
        nb_record_free(&eight);
    }
    /* a record without a type cannot be written */
    {
        nb_record none;
        nb_record_init(&none, "");
        unsigned char *buf = NULL;
        size_t len = 0;
        ok(nb_record_serialize(&none, &buf, &len) != NB_OK && buf == NULL, "a record without a type is refused");
        nb_record_free(&none);
    }
    /* a header with a NUL byte inside is refused by the reader */
    {
        nb_record z;
        nb_record_init(&z, "ZED");
        nb_hdr_set(&z, "K", "abc");
        z.header[3] = '\0'; /* "K=a\0c\n" */
        bytes v = {0};
        bytes_append_record(&v, &z);
        bytes_append_end(&v, 1);
        ok(read_all(v.p, v.n, &n, NULL, 0) == NB_ERR_DATA && contains(nb_error_message(), "NUL"),
           "a NUL byte in a header: %s", nb_error_message());
        free(v.p);
        nb_record_free(&z);
    }

    free(s.p);
    free(t.p);
    nb_record_free(&a);
    nb_record_free(&b2);
    nb_record_free(&c);
}

static void test_truncation_sweep(void)
{
    bytes s = {0};
    build_stream3(&s);
    int n = 0;
    char types[4][NB_TYPE_LEN + 1];
    ok(read_all(s.p, s.n, &n, types, 4) == NB_OK && n == 3 && !strcmp(types[0], "PLAN") &&
           !strcmp(types[1], "FOO") && !strcmp(types[2], "END"),
       "the full 3-record stream (%zu bytes) reads", s.n);
    int bad = 0, first_bad = -1;
    int truncated_msgs = 0;
    for (size_t len = 0; len < s.n; len++) {
        /* a private copy of exactly len bytes, so that a reader overrun
         * would be caught by a memory checker */
        unsigned char *cut = malloc(len ? len : 1);
        memcpy(cut, s.p, len);
        nb_status st = read_all(cut, len, &n, NULL, 0);
        if (st == NB_OK) {
            bad++;
            if (first_bad < 0) first_bad = (int)len;
        } else if (contains(nb_error_message(), "truncated") || contains(nb_error_message(), "empty")) {
            truncated_msgs++;
        }
        free(cut);
    }
    ok(bad == 0, "every one of the %zu truncations is an error (%d accepted, first at %d)", s.n, bad, first_bad);
    ok(truncated_msgs == (int)s.n, "every truncation says 'truncated' (or 'empty' at 0 bytes): %d of %zu",
       truncated_msgs, s.n);
    /* spot checks of the message for a cut inside each part */
    size_t cut_at[] = {5, 20, 40};
    for (size_t i = 0; i < 3; i++) {
        read_all(s.p, cut_at[i], &n, NULL, 0);
        ok(contains(nb_error_message(), "truncated"), "cut at byte %zu: %s", cut_at[i], nb_error_message());
    }
    read_all(s.p, s.n - 1, &n, NULL, 0);
    ok(contains(nb_error_message(), "END") || contains(nb_error_message(), "checksum"),
       "cut one byte short: %s", nb_error_message());
    free(s.p);
}

static void test_bitflip_sweep(void)
{
    bytes s = {0};
    build_stream3(&s);
    unsigned char *copy = malloc(s.n);
    long flips = 0, accepted = 0;
    long first_bad = -1;
    nb_set_verbosity(-1);
    for (size_t byte = 0; byte < s.n; byte++) {
        for (int bit = 0; bit < 8; bit++) {
            memcpy(copy, s.p, s.n);
            copy[byte] ^= (unsigned char)(1u << bit);
            int n;
            nb_status st = read_all(copy, s.n, &n, NULL, 0);
            flips++;
            if (st == NB_OK) {
                accepted++;
                if (first_bad < 0) first_bad = (long)(byte * 8 + (size_t)bit);
            }
        }
    }
    nb_set_verbosity(0);
    ok(accepted == 0, "every one of the %ld single-bit flips is detected (%ld accepted, first at bit %ld)", flips,
       accepted, first_bad);
    /* and two-bit flips in the same byte of the header, as a sample */
    long acc2 = 0;
    for (size_t byte = 32; byte < 64 && byte < s.n; byte++) {
        memcpy(copy, s.p, s.n);
        copy[byte] ^= 0x21;
        int n;
        if (read_all(copy, s.n, &n, NULL, 0) == NB_OK) acc2++;
    }
    ok(acc2 == 0, "two-bit flips in the first header bytes are detected");
    free(copy);
    free(s.p);
}

static void test_unknown_passthrough_mem(void)
{
    /* a FOO record as some other program would write it: arbitrary header
     * text (no KEY=VALUE structure) and an unaligned opaque payload */
    nb_record foo;
    nb_record_init(&foo, "FOO");
    free(foo.header);
    foo.header = nb_xstrdup("free text, no keys\nline two = maybe\n");
    foo.header_len = strlen(foo.header);
    foo.payload = malloc(7);
    memcpy(foo.payload, "\x01\x02\x03\x04\x05\x06\x07", 7);
    foo.payload_len = 7;
    foo.payload_cap = 7;
    bytes s = {0};
    bytes_append_record(&s, &foo);
    bytes_append_end(&s, 1);

    nb_reader *r;
    nb_record got;
    int eof;
    memset(&got, 0, sizeof got);
    nb_reader_open_mem(&r, s.p, s.n, "foo");
    ok(nb_reader_next(r, &got, &eof) == NB_OK && !eof && nb_record_is(&got, "FOO"), "the reader returns FOO");
    ok(got.header_len == foo.header_len && memcmp(got.header, foo.header, foo.header_len) == 0 &&
           got.payload_len == 7 && memcmp(got.payload, foo.payload, 7) == 0,
       "FOO's header and payload come back unchanged");
    unsigned char *buf;
    size_t len;
    ok(nb_record_serialize(&got, &buf, &len) == NB_OK && len == s.n - (32 + 11 + 4) && memcmp(buf, s.p, len) == 0,
       "re-serialising FOO gives the identical bytes");
    free(buf);
    nb_reader_close(r);
    nb_record_free(&got);
    nb_record_free(&foo);
    free(s.p);
}

/* ---- the ABORT record ------------------------------------------------------ */

static void bytes_append_abort(bytes *b, const char *tool, const char *status)
{
    nb_record ab;
    nb_record_init(&ab, "ABORT");
    if (tool) nb_hdr_set(&ab, "TOOL", tool);
    if (status) nb_hdr_set(&ab, "STATUS", status);
    bytes_append_record(b, &ab);
    nb_record_free(&ab);
}

/* a FOO record of `payload` zero bytes */
static void make_foo(nb_record *rec, size_t payload)
{
    nb_record_init(rec, "FOO");
    nb_hdr_set(rec, "K", "v");
    if (payload && nb_record_add_array(rec, "zeros", NB_U8, payload, NULL, NULL)) _exit(91);
}

/* The child cases below run with standard output a pipe (in_child_piped).
 * Each starts as a fresh tool would, with standard output not yet said to
 * carry a stream: this process may have opened a writer on it. */

/* a record, then a failure: the record and an ABORT of this tool, status 1 */
static void case_abort_after_record(void)
{
    nb_record rec;
    nb_writer *w;
    nb_set_tool_name("test-tool");
    nb_stream_to_stdout(0);
    make_foo(&rec, 10);
    if (nb_writer_open(&w, "-") || nb_writer_put(w, &rec)) _exit(60);
    nb_exit_on_error(nb_error_set(NB_ERR_DATA, "it went wrong"));
    _exit(61);
}

/* declared before any writer (a command-line error): an ABORT alone, status 2 */
static void case_abort_declared(void)
{
    nb_set_tool_name("test-tool");
    nb_stream_to_stdout(0);
    nb_stream_to_stdout(1);
    nb_exit_on_error(nb_error_set(NB_ERR_USAGE, "a bad flag"));
    _exit(62);
}

/* standard output not declared a stream (a sink, nb-bench): nothing on it */
static void case_abort_undeclared(void)
{
    nb_set_tool_name("test-tool");
    nb_stream_to_stdout(0);
    nb_exit_on_error(nb_error_set(NB_ERR_IO, "cannot open it"));
    _exit(63);
}

/* declared, then sent elsewhere (-o FILE): nothing on standard output */
static void case_abort_withdrawn(void)
{
    nb_set_tool_name("test-tool");
    nb_stream_to_stdout(1);
    nb_stream_to_stdout(0);
    nb_exit_on_error(nb_error_set(NB_ERR_IO, "cannot open it"));
    _exit(64);
}

/* an input that ends in an ABORT of nb-geom (a saved stream, so the reader
 * says where it ends): the same ABORT handed on, and nb-geom's status */
static void case_abort_forwarded(void)
{
    bytes in = {0};
    nb_record rec, got;
    nb_reader *r;
    nb_writer *w;
    int eof = 0;
    nb_set_tool_name("test-tool");
    nb_stream_to_stdout(0);
    make_foo(&rec, 3);
    bytes_append_record(&in, &rec);
    bytes_append_abort(&in, "nb-geom", "2");
    memset(&got, 0, sizeof got);
    if (nb_writer_open(&w, "-") || nb_reader_open_mem(&r, in.p, in.n, "saved.nbs")) _exit(65);
    nb_status st;
    while (!(st = nb_reader_next(r, &got, &eof)) && !eof)
        if (nb_writer_put(w, &got)) _exit(66);
    nb_exit_on_error(st);
    _exit(67);
}

/* a record half-written when the tool fails (a non-blocking pipe that is
 * full): no ABORT after it, even once the FILE's error is cleared and the
 * rest of its buffer goes out - the next stage must see the truncation */
static int abort_sync_fd = -1;
static void case_abort_mid_record(void)
{
    nb_record small, big;
    nb_writer *w;
    nb_set_tool_name("test-tool");
    nb_stream_to_stdout(0);
    make_foo(&small, 10);
    /* beyond the widest pipe buffer (1 MiB), below the payloads whose CRC is
     * taken on OpenMP threads (none in this child of a process that has its
     * threads) */
    make_foo(&big, (size_t)4 << 20);
    int fl = fcntl(1, F_GETFL);
    if (nb_writer_open(&w, "-") || nb_writer_put(w, &small)) _exit(68);
    fcntl(1, F_SETFL, fl | O_NONBLOCK);
    nb_status st = nb_writer_put(w, &big);
    if (st != NB_ERR_IO) _exit(69);
    fcntl(1, F_SETFL, fl);
    clearerr(stdout);
    if (write(abort_sync_fd, "x", 1) != 1) _exit(70); /* the parent now reads */
    nb_exit_on_error(st);
    _exit(71);
}

/* Like in_child, with standard output a pipe whose bytes end up in *out.
 * sync: the parent waits for a byte on a second pipe (abort_sync_fd in the
 * child) before it reads, so the child can fill the pipe first. */
static int in_child_piped(void (*fn)(void), char *err, size_t size, bytes *out, int sync)
{
    char path[600];
    int p[2], s[2] = {-1, -1};
    out->p = NULL, out->n = 0;
    snprintf(path, sizeof path, "%s/child.err", tmpdir);
    if (pipe(p) != 0 || (sync && pipe(s) != 0)) return -1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) dup2(fd, 2);
        dup2(p[1], 1);
        close(p[0]), close(p[1]);
        if (sync) close(s[0]), abort_sync_fd = s[1];
        fn();
        _exit(99);
    }
    close(p[1]);
    if (sync) {
        char c;
        close(s[1]);
        if (read(s[0], &c, 1) != 1) c = 0;
        close(s[0]);
    }
    unsigned char chunk[65536];
    ssize_t k;
    while ((k = read(p[0], chunk, sizeof chunk)) > 0) bytes_append(out, chunk, (size_t)k);
    close(p[0]);
    return child_ended(pid, path, err, size, 1);
}

/* whether buf holds the bytes s (binary-safe) */
static int holds(const bytes *b, const char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; b->p && i + n <= b->n; i++)
        if (memcmp(b->p + i, s, n) == 0) return 1;
    return 0;
}

/* Read the stream in b: the status it ends with, the records before (*n)
 * and their types. */
static nb_status read_to_abort(const bytes *b, char types[][NB_TYPE_LEN + 1], int *n)
{
    return read_all(b->p, b->n, n, types, 8);
}

static void test_abort_read(void)
{
    char types[8][NB_TYPE_LEN + 1];
    int n;
    nb_record foo;
    make_foo(&foo, 5);

    bytes s = {0};
    bytes_append_record(&s, &foo);
    bytes_append_abort(&s, "nb-geom", "2");
    nb_status st = read_to_abort(&s, types, &n);
    ok(st == NB_ERR_UPSTREAM && n == 1 && !strcmp(types[0], "FOO"),
       "a record, then ABORT: the record, then NB_ERR_UPSTREAM (%d, %d records)", (int)st, n);
    ok(!strcmp(nb_upstream_tool(), "nb-geom") && nb_upstream_status() == 2, "... naming nb-geom and status 2 (%s %d)",
       nb_upstream_tool(), nb_upstream_status());
    ok(nb_exit_code(st) == 2, "nb_exit_code(NB_ERR_UPSTREAM) is the upstream status (%d)", nb_exit_code(st));
    ok(contains(nb_error_message(), "test: the stream ends where nb-geom failed (status 2)"),
       "the message names the input, the tool and its status: %s", nb_error_message());

    /* asked again after the ABORT: the same answer, nothing read beyond it */
    bytes_append_end(&s, 1);
    nb_reader *r;
    nb_record got;
    int eof = 0;
    memset(&got, 0, sizeof got);
    nb_reader_open_mem(&r, s.p, s.n, "again");
    (void)nb_reader_next(r, &got, &eof);
    st = nb_reader_next(r, &got, &eof);
    nb_status st2 = nb_reader_next(r, &got, &eof);
    ok(st == NB_ERR_UPSTREAM && st2 == NB_ERR_UPSTREAM && !eof, "the stream ends at the ABORT: a later call gives "
                                                               "NB_ERR_UPSTREAM again, never the END after it");
    nb_record_free(&got);
    nb_reader_close(r);
    free(s.p);

    s = (bytes){0};
    bytes_append_abort(&s, "nb-sim", "1");
    st = read_to_abort(&s, types, &n);
    ok(st == NB_ERR_UPSTREAM && n == 0 && nb_exit_code(st) == 1 && !strcmp(nb_upstream_tool(), "nb-sim"),
       "an ABORT alone (the first stage failed before writing): NB_ERR_UPSTREAM, not 'empty stream' (%s)",
       nb_error_message());
    free(s.p);

    static const struct {
        const char *tool, *status, *msg;
    } bad[] = {
        {NULL, "2", "missing key TOOL"},      {"nb-geom", NULL, "missing key STATUS"},
        {"nb-geom", "0", "STATUS=0"},         {"nb-geom", "256", "STATUS=256"},
        {"nb-geom", "-1", "STATUS=-1"},       {"nb-geom", "two", "STATUS"},
        {"", "2", "bad value for TOOL"},      {"nb\033[2Jgeom", "2", "bad value for TOOL"},
        {"a-name-much-longer-than-any-tool-would-ever-have-it-is-refused-here", "2", "bad value for TOOL"},
    };
    int refused = 0;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        s = (bytes){0};
        bytes_append_abort(&s, bad[i].tool, bad[i].status);
        st = read_to_abort(&s, types, &n);
        if (st == NB_ERR_DATA && contains(nb_error_message(), "ABORT record") && contains(nb_error_message(), bad[i].msg))
            refused++;
        else
            printf("# ABORT %s %s: %d %s\n", bad[i].tool ? bad[i].tool : "-", bad[i].status ? bad[i].status : "-",
                   (int)st, nb_error_message());
        free(s.p);
    }
    ok(refused == (int)(sizeof bad / sizeof bad[0]),
       "an ABORT without a printable TOOL or a STATUS in 1..255 is a corrupt stream (NB_ERR_DATA)");
    nb_record_free(&foo);
}

static void test_abort_write(void)
{
    char err[512], types[8][NB_TYPE_LEN + 1];
    int n;
    bytes out;
    nb_status st;

    int how = in_child_piped(case_abort_after_record, err, sizeof err, &out, 0);
    ok(how == 1 && contains(err, "test-tool: it went wrong"), "a failing tool says why and exits 1 (%d: %s)", how, err);
    st = read_to_abort(&out, types, &n);
    ok(st == NB_ERR_UPSTREAM && n == 1 && !strcmp(types[0], "FOO") && !strcmp(nb_upstream_tool(), "test-tool") &&
           nb_exit_code(st) == 1,
       "... its record, then an ABORT with TOOL=test-tool STATUS=1 on the pipe (%d, %d records: %s)", (int)st, n,
       nb_error_message());
    free(out.p);

    how = in_child_piped(case_abort_declared, err, sizeof err, &out, 0);
    st = read_to_abort(&out, types, &n);
    ok(how == 2 && st == NB_ERR_UPSTREAM && n == 0 && nb_exit_code(st) == 2,
       "a usage error before the writer opens, stdout declared a stream: an ABORT alone, status 2 (%d, %d)", how,
       (int)st);
    free(out.p);

    how = in_child_piped(case_abort_undeclared, err, sizeof err, &out, 0);
    ok(how == 1 && out.n == 0, "stdout not a stream of this tool: nothing written on it (%d, %zu bytes)", how, out.n);
    free(out.p);
    how = in_child_piped(case_abort_withdrawn, err, sizeof err, &out, 0);
    ok(how == 1 && out.n == 0, "declared, then withdrawn (-o FILE): nothing on stdout (%d, %zu bytes)", how, out.n);
    free(out.p);

    how = in_child_piped(case_abort_forwarded, err, sizeof err, &out, 0);
    ok(how == 2 && contains(err, "test-tool: saved.nbs: the stream ends where nb-geom failed (status 2)"),
       "an ABORT read from a saved stream: one line naming the input and nb-geom, nb-geom's status (%d: %s)", how,
       err);
    st = read_to_abort(&out, types, &n);
    ok(st == NB_ERR_UPSTREAM && n == 1 && !strcmp(nb_upstream_tool(), "nb-geom") && nb_exit_code(st) == 2,
       "... handed on: the record, then an ABORT of nb-geom, status 2 (%d, %d: %s)", (int)st, n, nb_error_message());
    free(out.p);

    how = in_child_piped(case_abort_mid_record, err, sizeof err, &out, 1);
    st = read_to_abort(&out, types, &n);
    ok(how == 1 && !holds(&out, "ABORT") && !holds(&out, "TOOL="),
       "a record half-written when the tool fails: no ABORT after it (%d, %zu bytes)", how, out.n);
    ok(st == NB_ERR_DATA && contains(nb_error_message(), "truncated stream"),
       "... the reader reports the truncated stream: %s", nb_error_message());
    free(out.p);
}

/* nb_crc32_update equals zlib's crc32 for every length and alignment, in
 * one call or in pieces (the accelerated paths fold 256, 64 and 16 bytes at a
 * time and hand the rest to zlib). */
static void test_crc32(void)
{
    enum { N = 70000 };
    unsigned char *buf = malloc(N);
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < N; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        buf[i] = (unsigned char)x;
    }
    int bad = 0, checked = 0;
    const size_t lens[] = {0,   1,   15,  16,   17,   63,   64,   65,    79,    80,   127, 128,
                           129, 255, 256, 257,  271,  319,  320,  511,   512,   575,  1000, 4095,
                           4096, 4111, 16384, 65536, 69990};
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
        for (size_t off = 0; off < 9; off++) {
            size_t n = lens[li];
            if (off + n > N) continue;
            uint32_t want = (uint32_t)crc32(0L, buf + off, (uInt)n);
            uint32_t got = nb_crc32_update(0, buf + off, n);
            /* continued from a previous value, in two uneven pieces */
            uint32_t seed = (uint32_t)crc32(0L, (const Bytef *)"nb", 2);
            uint32_t want2 = (uint32_t)crc32(seed, buf + off, (uInt)n);
            uint32_t got2 = nb_crc32_update(nb_crc32_update(seed, buf + off, n / 3), buf + off + n / 3, n - n / 3);
            bad += got != want || got2 != want2;
            checked++;
        }
    ok(bad == 0, "nb_crc32_update equals zlib's crc32 in %d cases (lengths 0..69990, offsets 0..8, pieces); "
                 "carry-less multiply %s",
       checked,
       nb_crc32_accelerated() == 2 ? "in use, 512 bits wide" : nb_crc32_accelerated() ? "in use" : "not available");
    /* the check value of the CRC-32 catalogue */
    ok(nb_crc32_update(0, "123456789", 9) == 0xCBF43926u, "CRC-32 of '123456789' is 0xCBF43926");
    /* joined from pieces: equal lengths with one operator, and others */
    int joined_bad = 0;
    const uint64_t plens[] = {1, 16, 1000, 16384};
    for (size_t li = 0; li < sizeof plens / sizeof plens[0]; li++) {
        size_t len = (size_t)plens[li], count = N / len < 4 ? N / len : 4;
        uint32_t op = nb_crc32_combine_gen(len), crc = nb_crc32_update(0, buf, len);
        for (size_t i = 1; i < count; i++) crc = nb_crc32_combine_op(crc, nb_crc32_update(0, buf + i * len, len), op);
        joined_bad += crc != (uint32_t)crc32(0L, buf, (uInt)(count * len));
        joined_bad += nb_crc32_combine_op(nb_crc32_update(0, buf, 7), nb_crc32_update(0, buf + 7, len),
                                          nb_crc32_combine_gen(len)) != (uint32_t)crc32(0L, buf, (uInt)(7 + len));
    }
    ok(joined_bad == 0, "nb_crc32_combine_gen/op join CRCs of pieces as zlib's crc32 of the whole");
    unsigned char zeros[256] = {0};
    ok(nb_crc32_update(0, zeros, sizeof zeros) == (uint32_t)crc32(0L, zeros, sizeof zeros), "256 zero bytes");
    free(buf);
}

/* pages of [p, p + len) resident in memory */
static size_t resident_pages(const void *p, size_t len)
{
    unsigned char vec[4096];
    size_t n = len / 4096, count = 0;
    if (n > sizeof vec || mincore((void *)p, len, vec) != 0) return (size_t)-1;
    for (size_t i = 0; i < n; i++) count += vec[i] & 1;
    return count;
}

/* nb_fault_rows_ahead: the thread starting a huge page's worth of rows
 * faults in the next block, and the first row's thread its own as well */
static void test_fault_rows_ahead(void)
{
    const size_t row_bytes = 16384, block = (2u << 20) / row_bytes, rows = 4 * block, bytes = rows * row_bytes;
    const size_t block_pages = block * row_bytes / 4096;
    /* fresh pages of its own (a heap, or a sanitizer's, may hand back used
     * ones), laid out as nb_malloc_large lays out an image */
    const size_t huge = 2u << 20, map_len = bytes + huge;
    unsigned char *map = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ok(map != MAP_FAILED, "fault ahead: an image-sized mapping");
    if (map == MAP_FAILED) return;
    unsigned char *img = (unsigned char *)(((uintptr_t)map + huge - 1) & ~(uintptr_t)(huge - 1));
    (void)madvise(img, bytes, MADV_HUGEPAGE);
    if (madvise(img, 4096, 23 /* MADV_POPULATE_WRITE */) != 0 || resident_pages(img, bytes) == (size_t)-1) {
        skip("the kernel has no MADV_POPULATE_WRITE or mincore", "nb_fault_rows_ahead");
        munmap(map, map_len);
        return;
    }
    img[3 * block * row_bytes + 5] = 42; /* block 3 touched, by its own thread */
    /* as the render calls it: from a team of threads (here the main one of two) */
    int team = 0;
#pragma omp parallel num_threads(2)
#pragma omp master
    {
        team = omp_get_num_threads();
        if (team == 2) {
            nb_fault_rows_ahead(img, row_bytes, (int)rows, 1);
            ok(resident_pages(img + 1 * block * row_bytes, block * row_bytes) == 0 &&
                   resident_pages(img + 2 * block * row_bytes, block * row_bytes) == 0,
               "fault ahead: a row inside a block faults nothing in");
            nb_fault_rows_ahead(img, row_bytes, (int)rows, 0);
            ok(resident_pages(img, 2 * block * row_bytes) == 2 * block_pages,
               "fault ahead: row 0 faults in blocks 0 and 1");
            ok(resident_pages(img + 2 * block * row_bytes, block * row_bytes) == 0, "fault ahead: block 2 not yet");
            nb_fault_rows_ahead(img, row_bytes, (int)rows, (int)block);
            ok(resident_pages(img + 2 * block * row_bytes, block * row_bytes) == block_pages,
               "fault ahead: the start of block 1 faults in block 2");
            ok(img[2 * block * row_bytes] == 0 && img[bytes - 1] == 0, "fault ahead: fresh pages read as zeros");
            nb_fault_rows_ahead(img, row_bytes, (int)rows, (int)(2 * block));
            ok(img[3 * block * row_bytes + 5] == 42, "fault ahead: pages already written keep what they hold");
            nb_fault_rows_ahead(img, row_bytes, (int)rows, (int)(3 * block)); /* the last block: nothing past the end */
            ok(resident_pages(img, bytes) == 4 * block_pages, "fault ahead: the whole image resident");
        }
    }
    if (team != 2) skip("no team of two OpenMP threads here", "nb_fault_rows_ahead from a team");
    /* one thread faults nothing ahead: a fresh mapping stays as it is */
    unsigned char *map1 = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map1 != MAP_FAILED) {
        unsigned char *img1 = (unsigned char *)(((uintptr_t)map1 + huge - 1) & ~(uintptr_t)(huge - 1));
        nb_fault_rows_ahead(img1, row_bytes, (int)rows, 0);
        nb_fault_rows_ahead(img1, row_bytes, (int)rows, (int)block);
        ok(resident_pages(img1, bytes) == 0, "fault ahead: a single thread faults nothing ahead");
        munmap(map1, map_len);
    }
    munmap(map, map_len);
}

/* nb_reader_recycle: a payload buffer given back serves a later payload of
 * about its size (at most twice smaller), with that payload's bytes; one too
 * small or too large is not used; at most NB_READER_SPARES are kept. */
static void test_recycle(void)
{
    const size_t sizes[] = {(size_t)3 << 19, (size_t)3 << 19, (size_t)4 << 20, (size_t)1 << 19, (size_t)3 << 19};
    enum { NREC = sizeof sizes / sizeof sizes[0] };
    bytes b = {0};
    for (int i = 0; i < NREC; i++) {
        nb_record rec;
        nb_record_init(&rec, "BLOB");
        void *data = NULL;
        if (nb_record_add_array(&rec, "v", NB_U8, sizes[i], NULL, &data) || !data) abort();
        memset(data, 'a' + i, sizes[i]);
        bytes_append_record(&b, &rec);
        nb_record_free(&rec);
    }
    bytes_append_end(&b, NREC);
    nb_reader *r;
    nb_record got;
    int eof;
    memset(&got, 0, sizeof got);
    unsigned char *seen[NREC];
    int right = 1;
    nb_reader_open_mem(&r, b.p, b.n, "recycled");
    for (int i = 0; i < NREC; i++) {
        const void *v = NULL;
        size_t n = 0;
        nb_status st = nb_reader_next(r, &got, &eof);
        st = st ? st : nb_record_get_array(&got, "v", NB_U8, &v, &n);
        seen[i] = got.payload;
        for (size_t k = 0; !st && k < n; k++) right &= ((const unsigned char *)v)[k] == 'a' + i;
        right &= st == NB_OK && n == sizes[i];
        nb_reader_recycle(r, &got);
        right &= got.payload == NULL;
    }
    ok(right, "recycled payload buffers hold each record's own bytes");
    ok(seen[1] == seen[0], "a payload of the same size takes the buffer given back");
    ok(seen[2] != seen[1], "a payload larger than the buffers given back gets a new one");
    ok(seen[3] != seen[1] && seen[3] != seen[2], "a payload under half a buffer's size gets a new one");
    ok(seen[4] == seen[1], "the earlier buffer serves a later payload of its size");
    ok(nb_reader_next(r, &got, &eof) == NB_OK && nb_record_is(&got, "END"), "the END follows");
    nb_record_free(&got);
    nb_reader_close(r);
    free(b.p);
}

/* A reservation: the arrays added after it neither move the payload nor
 * grow it; one too large is refused, and the record is as it was. */
static void test_reserve(void)
{
    nb_record rec;
    nb_record_init(&rec, "RES");
    const uint8_t u8[3] = {1, 2, 3};
    ok(nb_record_add_array(&rec, "u8", NB_U8, 3, u8, NULL) == NB_OK, "reserve: a first small array");
    const size_t before = (size_t)rec.payload_len;
    const size_t floats = 100000, ints = 100001; /* odd: the second array needs padding */
    ok(nb_record_reserve(&rec, floats * 4 + ints * 4 + 16) == NB_OK, "reserve: room for two large arrays");
    const unsigned char *payload = rec.payload;
    const size_t cap = rec.payload_cap;
    ok(cap == before + floats * 4 + ints * 4 + 16, "reserve: just the room asked for (%zu)", cap);
    void *f = NULL, *i = NULL;
    ok(nb_record_add_array(&rec, "f", NB_F32, floats, NULL, &f) == NB_OK &&
           nb_record_add_array(&rec, "i", NB_I32, ints, NB_ARRAY_UNINITIALISED, &i) == NB_OK,
       "reserve: the two arrays added");
    ok(rec.payload == payload && rec.payload_cap == cap, "reserve: the payload neither moved nor grew");
    ok(f && ((float *)f)[floats - 1] == 0.0f && rec.payload[0] == 1 && rec.payload[2] == 3,
       "reserve: the first array kept, the zero-filled one zero");
    const size_t len = (size_t)rec.payload_len;
    ok(nb_record_reserve(&rec, SIZE_MAX - 8) == NB_ERR_NOMEM && strstr(nb_error_message(), "too large"),
       "reserve: too much is refused (%s)", nb_error_message());
    ok(rec.payload == payload && rec.payload_cap == cap && (size_t)rec.payload_len == len,
       "reserve: a refused one leaves the record as it was");
    nb_record_free(&rec);
}

int main(void)
{
    make_tmpdir();
    test_crc32();
    test_header_values();
    test_arrays();
    test_reserve();
    test_recycle();
    test_writer_file();
    test_put_consume();
    test_closed_pipe();
    test_payload_consumer();
    test_fault_rows_ahead();
    test_segments_and_errors();
    test_unknown_passthrough_mem();
    test_abort_read();
    test_abort_write();
    test_truncation_sweep();
    test_bitflip_sweep();
    remove_tmpdir();
    return tap_done();
}
