/* test_hkl.c - structure factors: HKL text files, the Fdump.bin cache (byte for
 * byte against files the reference program wrote), the HKL record, and the
 * nearest-neighbour and tricubic lookups.
 *
 * tests/data/small.Fdump.bin, small.F0.Fdump.bin and interp.Fdump.bin were
 * written by the reference nanoBragg for tests/golden/inputs/small.hkl with
 * -default_F 10 and 0, and for interp.hkl with no -default_F (see the
 * commands in tests/data/README). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hkl.h"
#include "nb_error.h"
#include "nb_hkl.h"
#include "nb_physics.h"
#include "nb_stream.h"
#include "nb_util.h"
#include "tap.h"

#define SMALL_HKL "tests/golden/inputs/small.hkl"
#define INTERP_HKL "tests/golden/inputs/interp.hkl"
#define SMALL_DUMP "tests/data/small.Fdump.bin"
#define SMALL_DUMP0 "tests/data/small.F0.Fdump.bin"
#define INTERP_DUMP "tests/data/interp.Fdump.bin"

static char tmpdir[256];

static int contains(const char *hay, const char *needle) { return hay && needle && strstr(hay, needle) != NULL; }

static const char *tmp_path(const char *name)
{
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

static const char *write_tmp(const char *name, const void *data, size_t n)
{
    const char *p = tmp_path(name);
    FILE *fp = fopen(p, "wb");
    if (!fp) {
        perror(p);
        exit(1);
    }
    fwrite(data, 1, n, fp);
    fclose(fp);
    return p;
}

static const char *write_text(const char *name, const char *text) { return write_tmp(name, text, strlen(text)); }

static int slurp(const char *path, unsigned char **data, size_t *n)
{
    char *d;
    if (nb_read_file(path, &d, n) != NB_OK) return 0;
    *data = (unsigned char *)d;
    return 1;
}

static double F_at(const nb_hkl *h, int hh, int kk, int ll) { return h->F[nb_hkl_index(h, hh, kk, ll)]; }

static int same_grid(const nb_hkl *a, const nb_hkl *b)
{
    if (a->h_min != b->h_min || a->h_max != b->h_max || a->k_min != b->k_min || a->k_max != b->k_max ||
        a->l_min != b->l_min || a->l_max != b->l_max || !a->F || !b->F)
        return 0;
    size_t n = (size_t)(a->h_max - a->h_min + 1) * (size_t)(a->k_max - a->k_min + 1) * (size_t)(a->l_max - a->l_min + 1);
    return memcmp(a->F, b->F, n * sizeof(double)) == 0;
}

/* ---- text files --------------------------------------------------------------- */

static void test_text(void)
{
    nb_hkl h;
    nb_status st = nb_hkl_read_text(SMALL_HKL, 10.0, &h);
    ok(st == NB_OK, "read %s: %s", SMALL_HKL, st ? nb_error_message() : "ok");
    if (!st) {
        ok(h.h_min == -1 && h.h_max == 2 && h.k_min == -1 && h.k_max == 2 && h.l_min == 0 && h.l_max == 1,
           "index box h -1..2 k -1..2 l 0..1");
        ok(h.hkls == 9, "9 reflections (hkls = %ld)", h.hkls);
        ok(h.default_F == 10.0, "default_F kept");
        ok(F_at(&h, 0, 0, 0) == 100 && F_at(&h, 2, 0, 0) == 80 && F_at(&h, -1, -1, 0) == 42 && F_at(&h, 1, 0, 1) == 20,
           "listed reflections");
        ok(F_at(&h, 0, 0, 1) == 10 && F_at(&h, 2, 2, 1) == 10 && F_at(&h, -1, 2, 0) == 10,
           "missing grid points are prefilled with default_F");
        ok(h.source && contains(h.source, "small.hkl"), "the source names the file");
    }
    nb_hkl_free(&h);
    ok(h.F == NULL && h.source == NULL, "nb_hkl_free clears");

    st = nb_hkl_read_text(SMALL_HKL, 0.0, &h);
    ok(st == NB_OK && F_at(&h, 0, 0, 1) == 0 && F_at(&h, 0, 0, 0) == 100, "default_F 0 leaves missing points at 0");
    nb_hkl_free(&h);

    /* comments, blank lines, extra columns, negative indices, duplicates,
     * CRLF line ends, tabs and commas, no final newline */
    const char *text = "# a comment line\n"
                       "! an XDS-style comment\n"
                       "\n"
                       "   \t  \n"
                       "  # an indented comment\n"
                       "1 2 3 10.5 0.3 45.0\n"
                       "-1\t-2\t-3\t7\r\n"
                       "0,0,0,1e2\n"
                       "1 2 3 99    sigma phase whatever\n"
                       "-2 0 1 -5.25\n"
                       "0 0 -4 3";
    const char *path = write_text("comments.hkl", text);
    st = nb_hkl_read_text(path, 1.5, &h);
    ok(st == NB_OK, "comments, blanks, extra columns, CRLF, tabs, commas: %s", st ? nb_error_message() : "ok");
    if (!st) {
        ok(h.hkls == 6, "6 data lines counted (%ld)", h.hkls);
        ok(h.h_min == -2 && h.h_max == 1 && h.k_min == -2 && h.k_max == 2 && h.l_min == -4 && h.l_max == 3,
           "box from negative indices h -2..1 k -2..2 l -4..3");
        ok(F_at(&h, 1, 2, 3) == 99, "a duplicate: the last one wins");
        ok(F_at(&h, -1, -2, -3) == 7 && F_at(&h, 0, 0, 0) == 100 && F_at(&h, -2, 0, 1) == -5.25 &&
               F_at(&h, 0, 0, -4) == 3,
           "negative indices, commas and a last line without newline");
        ok(F_at(&h, 1, 1, 1) == 1.5 && F_at(&h, -2, -2, -4) == 1.5, "prefill with default_F 1.5");
    }
    nb_hkl_free(&h);

    /* errors */
    struct {
        const char *name, *text, *msg;
    } bad[] = {
        {"empty.hkl", "", "no reflections"},
        {"comments_only.hkl", "# nothing\n! here\n\n", "no reflections"},
        {"nonint.hkl", "0 0 0 1\n1.5 0 0 10\n", "line 2"},
        {"nonint2.hkl", "0 0 0 1\n1 0 2.0001 10\n", "Miller index"},
        {"nan.hkl", "0 0 0 1\n1 0 0 nan\n", "line 2"},
        {"inf.hkl", "0 0 0 inf\n", "finite"},
        {"ninf.hkl", "0 0 0 -inf\n", "line 1"},
        {"header.hkl", "h k l F\n0 0 0 1\n", "line 1"},
        {"short.hkl", "0 0 0 1\n1 2 3\n", "line 2"},
        {"word.hkl", "0 0 0 1\n1 2 3 F\n", "line 2"},
        {"glued.hkl", "0 0 0 1\n1 2 3 4x\n", "line 2"},
        {"huge_index.hkl", "0 0 0 1\n3000000000 0 0 1\n", "line 2"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        path = write_text(bad[i].name, bad[i].text);
        st = nb_hkl_read_text(path, 0.0, &h);
        ok(st == NB_ERR_DATA && contains(nb_error_message(), bad[i].msg) && contains(nb_error_message(), bad[i].name),
           "%s refused: %s", bad[i].name, st ? nb_error_message() : "accepted");
        ok(h.F == NULL, "... leaving no grid");
        nb_hkl_free(&h);
    }
    /* binary garbage, with and without NUL bytes */
    const unsigned char garbage[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R', 0xff};
    path = write_tmp("garbage.hkl", garbage, sizeof garbage);
    st = nb_hkl_read_text(path, 0.0, &h);
    ok(st == NB_ERR_DATA && contains(nb_error_message(), "garbage.hkl"), "binary garbage refused: %s",
       nb_error_message());
    nb_hkl_free(&h);
    const unsigned char garbage2[] = {0xde, 0xad, 0xbe, 0xef, 0x01, 0x02, 0x03, '\n', 0xfe, 0xfd};
    path = write_tmp("garbage2.hkl", garbage2, sizeof garbage2);
    st = nb_hkl_read_text(path, 0.0, &h);
    ok(st == NB_ERR_DATA && contains(nb_error_message(), "garbage2.hkl"), "binary garbage without NULs refused: %s",
       nb_error_message());
    nb_hkl_free(&h);
    /* an Fdump file given as -hkl */
    st = nb_hkl_read_text(SMALL_DUMP, 0.0, &h);
    ok(st == NB_ERR_DATA, "an Fdump.bin read as text is refused: %s", nb_error_message());
    nb_hkl_free(&h);
    /* a missing file */
    path = tmp_path("no_such_file.hkl");
    st = nb_hkl_read_text(path, 0.0, &h);
    ok(st == NB_ERR_IO && contains(nb_error_message(), "no_such_file.hkl") &&
           contains(nb_error_message(), "No such file"),
       "a missing file: %s", nb_error_message());
    nb_hkl_free(&h);
    /* an index box too large to allocate is refused with its size */
    path = write_text("wide.hkl", "-400000 -400000 0 1\n400000 400000 0 1\n");
    st = nb_hkl_read_text(path, 0.0, &h);
    ok(st != NB_OK && contains(nb_error_message(), "wide.hkl") && contains(nb_error_message(), "iB"),
       "an absurd index box is refused with the memory it needs: %s", nb_error_message());
    ok(h.F == NULL, "... leaving no grid");
    nb_hkl_free(&h);
}

/* ---- Fdump.bin ------------------------------------------------------------------ */

static void compare_dump(const char *hkl, double default_F, const char *ref)
{
    nb_hkl h;
    unsigned char *mine = NULL, *theirs = NULL;
    size_t nm = 0, nt = 0;
    if (access(ref, R_OK) != 0) {
        skip("reference file missing", "Fdump of %s (default_F %g) equals %s", hkl, default_F, ref);
        return;
    }
    nb_status st = nb_hkl_read_text(hkl, default_F, &h);
    const char *out = tmp_path("Fdump.bin");
    if (!st) st = nb_hkl_write_fdump(&h, out);
    ok(st == NB_OK, "write an Fdump for %s (default_F %g): %s", hkl, default_F, st ? nb_error_message() : "ok");
    int same = !st && slurp(out, &mine, &nm) && slurp(ref, &theirs, &nt) && nm == nt && memcmp(mine, theirs, nm) == 0;
    if (!same && mine && theirs) {
        size_t i = 0;
        while (i < nm && i < nt && mine[i] == theirs[i]) i++;
        printf("#   %zu vs %zu bytes, first difference at byte %zu\n", nm, nt, i);
    }
    ok(same, "Fdump of %s (default_F %g) equals the reference's byte for byte (%zu bytes)", hkl, default_F, nt);
    free(mine);
    free(theirs);
    nb_hkl_free(&h);
}

static void test_fdump(void)
{
    compare_dump(SMALL_HKL, 10.0, SMALL_DUMP);
    compare_dump(SMALL_HKL, 0.0, SMALL_DUMP0);
    compare_dump(INTERP_HKL, 0.0, INTERP_DUMP);

    /* reading the reference's dump gives the text file's grid */
    nb_hkl text, dump;
    nb_hkl_read_text(SMALL_HKL, 10.0, &text);
    nb_status st = nb_hkl_read_fdump(SMALL_DUMP, 10.0, &dump);
    ok(st == NB_OK, "read the reference's Fdump: %s", st ? nb_error_message() : "ok");
    if (!st) {
        ok(same_grid(&text, &dump), "the dump holds the text file's grid (default_F prefill included)");
        ok(dump.hkls == 4 * 4 * 2, "hkls = product of the ranges (%ld)", dump.hkls);
        ok(dump.default_F == 10.0 && dump.source && contains(dump.source, "small.Fdump.bin"),
           "default_F and source set");
    }
    nb_hkl_free(&dump);
    /* the dump keeps the prefill it was written with, whatever default_F now */
    st = nb_hkl_read_fdump(SMALL_DUMP, 0.0, &dump);
    ok(st == NB_OK && F_at(&dump, 0, 0, 1) == 10 && dump.default_F == 0,
       "a dump written with -default_F 10 still holds 10 at missing points");
    nb_hkl_free(&dump);
    nb_hkl_free(&text);
    nb_hkl_read_text(INTERP_HKL, 0.0, &text);
    st = nb_hkl_read_fdump(INTERP_DUMP, 0.0, &dump);
    ok(st == NB_OK && same_grid(&text, &dump) && dump.hkls == 13 * 13 * 13,
       "interp.hkl: the reference's dump equals the text grid (13^3 points)");
    nb_hkl_free(&dump);
    nb_hkl_free(&text);

    /* our own dump reads back */
    nb_hkl_read_text(SMALL_HKL, 10.0, &text);
    const char *mine = tmp_path("mine.Fdump.bin");
    nb_hkl_write_fdump(&text, mine);
    st = nb_hkl_read_fdump(mine, 10.0, &dump);
    ok(st == NB_OK && same_grid(&text, &dump), "write then read an Fdump");
    nb_hkl_free(&dump);

    /* damaged dumps */
    unsigned char *data;
    size_t n;
    if (slurp(SMALL_DUMP, &data, &n)) {
        unsigned char *buf = malloc(n + 16);
        const char *p;
        memcpy(buf, data, n);
        p = write_tmp("trunc.bin", buf, n - 1);
        st = nb_hkl_read_fdump(p, 0, &dump);
        ok(st == NB_ERR_DATA && contains(nb_error_message(), "truncated") && contains(nb_error_message(), "trunc.bin"),
           "a truncated dump: %s", nb_error_message());
        ok(dump.F == NULL, "... leaving no grid");
        nb_hkl_free(&dump);
        p = write_tmp("trunc2.bin", buf, 20);
        st = nb_hkl_read_fdump(p, 0, &dump);
        ok(st == NB_ERR_DATA, "a dump cut inside the first row: %s", nb_error_message());
        nb_hkl_free(&dump);
        p = write_tmp("headonly.bin", buf, 15);
        st = nb_hkl_read_fdump(p, 0, &dump);
        ok(st == NB_ERR_DATA, "a dump of just its header line: %s", nb_error_message());
        nb_hkl_free(&dump);
        p = write_tmp("cuthead.bin", buf, 8);
        st = nb_hkl_read_fdump(p, 0, &dump);
        ok(st == NB_ERR_DATA, "a dump cut inside its header line: %s", nb_error_message());
        nb_hkl_free(&dump);
        memcpy(buf + n, "\0\0\0\0\0\0\0\0", 8);
        p = write_tmp("padded.bin", buf, n + 8);
        st = nb_hkl_read_fdump(p, 0, &dump);
        ok(st == NB_ERR_DATA && contains(nb_error_message(), "padded.bin"), "a padded dump: %s", nb_error_message());
        nb_hkl_free(&dump);
        p = write_tmp("padded1.bin", buf, n + 1);
        st = nb_hkl_read_fdump(p, 0, &dump);
        ok(st == NB_ERR_DATA, "a dump one byte too long: %s", nb_error_message());
        nb_hkl_free(&dump);
        /* a NaN among the values */
        memcpy(buf, data, n);
        double nan_value = NAN;
        memcpy(buf + 15, &nan_value, sizeof nan_value);
        p = write_tmp("nan.bin", buf, n);
        st = nb_hkl_read_fdump(p, 0, &dump);
        ok(st == NB_ERR_DATA && contains(nb_error_message(), "finite"), "a NaN in a dump: %s", nb_error_message());
        nb_hkl_free(&dump);
        /* a header that claims another box */
        memcpy(buf, data, n);
        buf[0] = '-', buf[1] = '2'; /* "-2 2 -1 2 0 1" */
        p = write_tmp("otherbox.bin", buf, n);
        st = nb_hkl_read_fdump(p, 0, &dump);
        ok(st == NB_ERR_DATA, "a header that disagrees with the size: %s", nb_error_message());
        nb_hkl_free(&dump);
        /* header without the form feed, or with extra words */
        const char *nf = "-1 2 -1 2 0 1\n";
        p = write_tmp("noff.bin", nf, strlen(nf));
        st = nb_hkl_read_fdump(p, 0, &dump);
        ok(st == NB_ERR_DATA && contains(nb_error_message(), "not an Fdump"), "no form feed: %s", nb_error_message());
        nb_hkl_free(&dump);
        const char *five = "-1 2 -1 2 0\n\f";
        p = write_tmp("five.bin", five, strlen(five));
        st = nb_hkl_read_fdump(p, 0, &dump);
        ok(st == NB_ERR_DATA, "five numbers in the header: %s", nb_error_message());
        nb_hkl_free(&dump);
        const char *seven = "-1 2 -1 2 0 1 7\n\f";
        p = write_tmp("seven.bin", seven, strlen(seven));
        st = nb_hkl_read_fdump(p, 0, &dump);
        ok(st == NB_ERR_DATA, "seven numbers in the header: %s", nb_error_message());
        nb_hkl_free(&dump);
        const char *inverted = "2 -1 -1 2 0 1\n\f";
        p = write_tmp("inverted.bin", inverted, strlen(inverted));
        st = nb_hkl_read_fdump(p, 0, &dump);
        ok(st == NB_ERR_DATA, "an inverted range: %s", nb_error_message());
        nb_hkl_free(&dump);
        const char *absurd = "-2000000000 2000000000 -2000000000 2000000000 0 1\n\f";
        p = write_tmp("absurd.bin", absurd, strlen(absurd));
        st = nb_hkl_read_fdump(p, 0, &dump);
        ok(st != NB_OK && dump.F == NULL, "an absurd box in the header is refused, not allocated: %s",
           nb_error_message());
        nb_hkl_free(&dump);
        free(buf);
        free(data);
    } else {
        skip("reference file missing", "damaged dumps");
    }
    /* garbage, text, empty, missing */
    const char *p = write_text("text.bin", "0 0 0 100\n1 0 0 50\n");
    st = nb_hkl_read_fdump(p, 0, &dump);
    ok(st == NB_ERR_DATA && contains(nb_error_message(), "text.bin"), "an HKL text file as a dump: %s",
       nb_error_message());
    nb_hkl_free(&dump);
    const unsigned char junk[64] = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, '\n', '\f'};
    p = write_tmp("junk.bin", junk, sizeof junk);
    st = nb_hkl_read_fdump(p, 0, &dump);
    ok(st == NB_ERR_DATA, "binary garbage as a dump: %s", nb_error_message());
    nb_hkl_free(&dump);
    p = write_tmp("empty.bin", "", 0);
    st = nb_hkl_read_fdump(p, 0, &dump);
    ok(st == NB_ERR_DATA, "an empty dump: %s", nb_error_message());
    nb_hkl_free(&dump);
    st = nb_hkl_read_fdump(tmp_path("missing.bin"), 0, &dump);
    ok(st == NB_ERR_IO && contains(nb_error_message(), "missing.bin"), "a missing dump: %s", nb_error_message());
    nb_hkl_free(&dump);
    /* no grid to write */
    nb_hkl empty;
    nb_hkl_init(&empty);
    st = nb_hkl_write_fdump(&empty, tmp_path("none.bin"));
    ok(st != NB_OK && access(tmp_path("none.bin"), F_OK) != 0, "writing a dump without a grid fails, no file left");
    nb_hkl_free(&text);
}

/* ---- the HKL record --------------------------------------------------------------- */

static nb_status record_trip(const nb_record *in, nb_hkl *out)
{
    unsigned char *buf;
    size_t len;
    nb_reader *r;
    nb_record got;
    int eof;
    nb_status st = nb_record_serialize(in, &buf, &len);
    if (st) return st;
    memset(&got, 0, sizeof got);
    nb_reader_open_mem(&r, buf, len, "hkl");
    st = nb_reader_next(r, &got, &eof);
    nb_reader_close(r);
    free(buf);
    if (!st) st = nb_hkl_from_record(&got, out);
    else nb_hkl_init(out);
    nb_record_free(&got);
    return st;
}

static void test_record(void)
{
    nb_hkl h, back;
    nb_record rec;
    nb_hkl_read_text(INTERP_HKL, 2.5, &h);
    ok(nb_hkl_to_record(&h, &rec) == NB_OK && nb_record_is(&rec, "HKL"), "grid to an HKL record");
    nb_status st = record_trip(&rec, &back);
    ok(st == NB_OK, "HKL record through a stream and back: %s", st ? nb_error_message() : "ok");
    ok(st == NB_OK && same_grid(&h, &back) && back.hkls == h.hkls && back.default_F == 2.5 && back.source &&
           !strcmp(back.source, h.source),
       "ranges, F values (bit for bit), hkls, default_F and source survive");
    nb_hkl_free(&back);

    /* corruptions */
    struct {
        const char *key, *value, *what;
    } bad[] = {
        {"H_RANGE", "-6 7", "a range that disagrees with the F array"},
        {"H_RANGE", "6 -6", "an inverted range"},
        {"K_RANGE", "-6", "a range with one number"},
        {"L_RANGE", "-6.5 6", "a fractional range"},
        {"L_RANGE", "-600000000 600000000", "an absurd range"},
        {"HKLS", "many", "a malformed HKLS"},
        {"DEFAULT_F", "nan", "DEFAULT_F nan"},
        {"ARRAY.F", "f32 2197 0", "F of the wrong dtype"},
        {"ARRAY.F", "f64 2198 0", "F longer than the payload"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        nb_record r;
        nb_hkl_to_record(&h, &r);
        nb_hdr_set(&r, bad[i].key, bad[i].value);
        st = record_trip(&r, &back);
        ok(st == NB_ERR_DATA || st == NB_ERR_NOMEM, "%s is refused: %s", bad[i].what, st ? nb_error_message() : "accepted");
        ok(back.F == NULL, "... leaving no grid");
        nb_hkl_free(&back);
        nb_record_free(&r);
    }
    {
        nb_record r;
        nb_hkl_to_record(&h, &r);
        ((double *)r.payload)[100] = INFINITY;
        st = record_trip(&r, &back);
        ok(st == NB_ERR_DATA && contains(nb_error_message(), "finite"), "an infinite F is refused: %s",
           nb_error_message());
        nb_hkl_free(&back);
        nb_record_free(&r);
    }
    nb_record_free(&rec);
    nb_hkl_free(&h);

    /* no grid: default_F only */
    nb_hkl none;
    nb_hkl_init(&none);
    none.default_F = 100;
    ok(nb_hkl_to_record(&none, &rec) == NB_OK && !nb_record_has_array(&rec, "F"), "a grid-less HKL record");
    st = record_trip(&rec, &back);
    ok(st == NB_OK && back.F == NULL && back.hkls == 0 && back.default_F == 100 && back.source == NULL,
       "reads back without a grid, default_F 100, no source");
    nb_fgrid g = nb_hkl_grid(&back);
    ok(g.hkls == 0 && g.F == NULL && nb_F_nearest(&g, 0, 0, 0) == 100 && nb_F_nearest(&g, 5, -3, 2) == 100,
       "without a grid every F is default_F");
    nb_hkl_free(&back);
    nb_hdr_set_long(&rec, "HKLS", 5);
    st = record_trip(&rec, &back);
    ok(st == NB_ERR_DATA && contains(nb_error_message(), "HKLS"), "HKLS=5 without an F array: %s",
       nb_error_message());
    nb_hkl_free(&back);
    nb_record_free(&rec);
    nb_record_init(&rec, "HKL");
    nb_hdr_set(&rec, "HKLS", "0");
    st = record_trip(&rec, &back);
    ok(st == NB_ERR_DATA && contains(nb_error_message(), "DEFAULT_F"), "missing DEFAULT_F: %s", nb_error_message());
    nb_hkl_free(&back);
    nb_record_free(&rec);
}

/* ---- grid and lookups ---------------------------------------------------------------- */

static double poly(double h, double k, double l)
{
    /* of degree <= 3 in each index: tricubic interpolation is exact */
    return 3 + 2 * h - 0.5 * k + 0.25 * l + 0.1 * h * h * k - 0.3 * k * l * l + 0.05 * h * h * h + 0.02 * h * k * l -
           0.01 * l * l * l + 0.004 * h * h * h * k * k * k * l * l * l;
}

static void test_lookup(void)
{
    nb_hkl h;
    nb_hkl_init(&h);
    nb_status st = nb_hkl_alloc(&h, -5, 5, -4, 6, -5, 3, 0.0);
    ok(st == NB_OK && h.F, "allocate an 11 x 11 x 9 grid");
    if (st) return;
    /* index order: h slowest, l fastest */
    ok(nb_hkl_index(&h, -5, -4, -5) == 0 && nb_hkl_index(&h, -5, -4, -4) == 1 && nb_hkl_index(&h, -5, -3, -5) == 9 &&
           nb_hkl_index(&h, -4, -4, -5) == 99 && nb_hkl_index(&h, 5, 6, 3) == 11 * 11 * 9 - 1,
       "nb_hkl_index: h slowest, l fastest");
    for (int a = -5; a <= 5; a++)
        for (int b = -4; b <= 6; b++)
            for (int c = -5; c <= 3; c++) h.F[nb_hkl_index(&h, a, b, c)] = poly(a, b, c);
    h.hkls = 11 * 11 * 9;
    h.default_F = -1;
    nb_fgrid g = nb_hkl_grid(&h);
    ok(g.h_min == -5 && g.h_max == 5 && g.k_min == -4 && g.k_max == 6 && g.l_min == -5 && g.l_max == 3 &&
           g.h_range == 11 && g.k_range == 11 && g.l_range == 9 && g.F == h.F && g.hkls == h.hkls &&
           g.default_F == -1,
       "nb_hkl_grid describes the grid");
    ok(nb_fgrid_at(&g, 2, -3, 1) == poly(2, -3, 1), "nb_fgrid_at reads the grid");
    ok(nb_F_nearest(&g, 2, -3, 1) == poly(2, -3, 1) && nb_F_nearest(&g, -5, -4, -5) == poly(-5, -4, -5) &&
           nb_F_nearest(&g, 5, 6, 3) == poly(5, 6, 3),
       "nearest neighbour inside the box (corners included)");
    ok(nb_F_nearest(&g, 6, 0, 0) == -1 && nb_F_nearest(&g, -6, 0, 0) == -1 && nb_F_nearest(&g, 0, 7, 0) == -1 &&
           nb_F_nearest(&g, 0, -5, 0) == -1 && nb_F_nearest(&g, 0, 0, 4) == -1 && nb_F_nearest(&g, 0, 0, -6) == -1,
       "nearest neighbour outside the box is default_F");

    /* tricubic reproduces the cubic polynomial at fractional points */
    double maxerr = 0;
    int tested = 0;
    for (double a = -3; a <= 3; a += 0.37)
        for (double b = -2; b <= 4; b += 0.41)
            for (double c = -3; c <= 1; c += 0.29) {
                if (!nb_tricubic_safe(&g, a, b, c)) continue;
                double want = poly(a, b, c), got = nb_F_tricubic(&g, a, b, c);
                double err = fabs(got - want) / fmax(1.0, fabs(want));
                if (err > maxerr) maxerr = err;
                tested++;
            }
    ok(tested > 1000 && maxerr < 1e-11, "tricubic is exact for a cubic polynomial at %d fractional points (max rel err %g)",
       tested, maxerr);
    near(nb_F_tricubic(&g, 1.5, 2.25, -0.75), poly(1.5, 2.25, -0.75), 1e-12, "tricubic at (1.5, 2.25, -0.75)");
    near(nb_F_tricubic(&g, 1, 2, -1), poly(1, 2, -1), 1e-12, "tricubic at a grid point gives the grid value");
    /* the Lagrange helper */
    const double xa[4] = {-1, 0, 1, 2}, ya[4] = {1, 0, 1, 8}; /* the cubic through 4 points */
    double y = nb_polint(xa, ya, 0.5);
    double want = 0;
    for (int i = 0; i < 4; i++) {
        double t = ya[i];
        for (int j = 0; j < 4; j++)
            if (j != i) t *= (0.5 - xa[j]) / (xa[i] - xa[j]);
        want += t;
    }
    near(y, want, 1e-15, "polint is the Lagrange cubic");

    /* safe-region boundaries: h_min + 2 <= h <= h_max - 2, same for k, l */
    ok(nb_tricubic_safe(&g, -3, 0, 0) && nb_tricubic_safe(&g, 3, 0, 0), "h = h_min + 2 and h_max - 2 are safe");
    ok(!nb_tricubic_safe(&g, -3.0001, 0, 0) && !nb_tricubic_safe(&g, 3.0001, 0, 0), "just beyond them is not");
    ok(nb_tricubic_safe(&g, 0, -2, 0) && nb_tricubic_safe(&g, 0, 4, 0) && !nb_tricubic_safe(&g, 0, -2.001, 0) &&
           !nb_tricubic_safe(&g, 0, 4.001, 0),
       "k boundaries -2 and 4");
    ok(nb_tricubic_safe(&g, 0, 0, -3) && nb_tricubic_safe(&g, 0, 0, 1) && !nb_tricubic_safe(&g, 0, 0, -3.001) &&
           !nb_tricubic_safe(&g, 0, 0, 1.001),
       "l boundaries -3 and 1");
    near(nb_F_tricubic(&g, 3, 4, 1), poly(3, 4, 1), 1e-12, "tricubic at the upper safe corner reads inside the grid");
    near(nb_F_tricubic(&g, -3, -2, -3), poly(-3, -2, -3), 1e-12, "tricubic at the lower safe corner");

    /* nb_hkl_alloc refusals */
    nb_hkl big;
    nb_hkl_init(&big);
    st = nb_hkl_alloc(&big, -100000, 100000, -100000, 100000, 0, 10, 0);
    ok(st == NB_ERR_NOMEM && big.F == NULL && contains(nb_error_message(), "iB"),
       "an absurd box is refused with its size: %s", nb_error_message());
    st = nb_hkl_alloc(&big, 3, 2, 0, 0, 0, 0, 0);
    ok(st == NB_ERR_DATA && big.F == NULL, "an empty range is refused: %s", nb_error_message());
    st = nb_hkl_alloc(&big, -2147483647 - 1, 2147483647, 0, 0, 0, 0, 0);
    ok(st != NB_OK && big.F == NULL, "the full int range is refused: %s", nb_error_message());
    st = nb_hkl_alloc(&big, 0, 0, 0, 0, 0, 0, 7.5);
    ok(st == NB_OK && big.F && big.F[0] == 7.5, "a 1-point box filled with 7.5");
    nb_hkl_free(&big);
    nb_hkl_free(&h);
}

/* F values read back bit for bit as strtod reads them: the reader's fast
 * decimal path and its strtod fallback (exponents, long mantissas, hex) */
static void test_text_numbers(void)
{
    static const char *fixed[] = {"0", "-0", "+5", "1.", ".5", "-.25", "0.1", "0.3", "2.675", "123.456789",
                                  "9007199254740992", "9007199254740993", "0.9007199254740993",
                                  "1234567890123456789", "12345678901234567890", "0.0000000000000000000001",
                                  "0.00000000000000000000001", "1e2", "1E-3", "-2.5e+1", "0x1p4", "100000",
                                  "3.14159265358979323846", "000012.5000", "1.7976931348623157e308"};
    enum { NRANDOM = 3000 };
    const int n = (int)(sizeof fixed / sizeof fixed[0]) + NRANDOM;
    char (*vals)[64] = calloc((size_t)n, sizeof *vals);
    size_t cap = (size_t)n * 64, len = 0;
    char *text = malloc(cap);
    if (!vals || !text) {
        ok(0, "memory for the number test");
        free(vals), free(text);
        return;
    }
    unsigned long long x = 88172645463325252ULL; /* xorshift: the same numbers every run */
    for (int i = 0; i < n; i++) {
        if (i < (int)(sizeof fixed / sizeof fixed[0])) {
            snprintf(vals[i], sizeof vals[i], "%s", fixed[i]);
        } else {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            int intdigits = (int)(x % 9), fracdigits = (int)((x >> 8) % 15);
            unsigned long long a = (x >> 16) % 1000000000ULL, b = (x >> 20) % 1000000000000000ULL;
            char ip[16], fp[24];
            snprintf(ip, sizeof ip, "%0*llu", intdigits, intdigits ? a % (unsigned long long)pow(10, intdigits) : 0);
            snprintf(fp, sizeof fp, "%015llu", b);
            fp[fracdigits] = '\0';
            snprintf(vals[i], sizeof vals[i], "%s%s%s%s", (x >> 60) & 1 ? "-" : "", intdigits ? ip : "",
                     fracdigits || !intdigits ? "." : "", fracdigits || !intdigits ? (fracdigits ? fp : "5") : "");
        }
        /* one reflection per value, h = i */
        len += (size_t)snprintf(text + len, cap - len, "%d 0 0 %s\n", i, vals[i]);
    }
    const char *path = write_text("numbers.hkl", text);
    nb_hkl h;
    nb_status st = nb_hkl_read_text(path, 0.0, &h);
    ok(st == NB_OK, "%d numbers read: %s", n, st ? nb_error_message() : "ok");
    int mismatches = 0, first_bad = -1;
    for (int i = 0; !st && i < n; i++) {
        double want = strtod(vals[i], NULL), got = F_at(&h, i, 0, 0);
        if (memcmp(&want, &got, sizeof want) != 0) {
            if (first_bad < 0) first_bad = i;
            mismatches++;
        }
    }
    ok(!st && mismatches == 0, "every F bit for bit as strtod reads it (%d differ; first '%s')", mismatches,
       first_bad >= 0 ? vals[first_bad] : "-");
    nb_hkl_free(&h);
    free(vals), free(text);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/nb-test-hkl-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    nb_set_tool_name("test_hkl");
    nb_set_verbosity(-1);
    test_text();
    test_text_numbers();
    test_fdump();
    test_record();
    test_lookup();
    int rc = tap_done();
    /* clean the scratch directory */
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return rc;
}
