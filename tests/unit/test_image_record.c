/* test_image_record.c - the IMAGE record (nb_image_record.h): header written
 * from an nb_image_info and parsed back, the layouts of the tools that write
 * it, every check on a bad record, unknown keys kept aside, the array
 * accessors, and a record whose payload is not there. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_error.h"
#include "nb_image_record.h"
#include "nb_plan.h"
#include "nb_stream.h"
#include "nb_util.h"
#include "tap.h"

#define W 6
#define H 4
#define N (W * H)

/* Lines of text as TAP comments. */
static void show(const char *what, const char *text)
{
    printf("#   %s:\n", what);
    for (const char *l = text; l && *l;) {
        const char *e = strchr(l, '\n');
        int n = e ? (int)(e - l) : (int)strlen(l);
        printf("#     %.*s\n", n, l);
        l += n + (e != NULL);
    }
}

static int contains(const char *hay, const char *needle) { return hay && needle && strstr(hay, needle) != NULL; }

/* An image with every key set, the awkward values included. */
static void full_info(nb_image_info *im)
{
    nb_image_info_init(im);
    im->frame = 2, im->has.frame = 1;
    im->nframes = 5, im->has.nframes = 1;
    im->panel = 0, im->has.panel = 1;
    im->fpixels = W, im->spixels = H;
    snprintf(im->units, sizeof im->units, "photons");
    snprintf(im->precision, sizeof im->precision, "double");
    im->phi_start = 0.1 + 0.2, im->has.phi_start = 1;
    im->phi_range = 1.0 / 3.0, im->has.phi_range = 1;
    snprintf(im->rendered_by, sizeof im->rendered_by, "nb-sim 9.9.9");
    im->render_seconds = 1e-7, im->has.render_seconds = 1;
    snprintf(im->render_path, sizeof im->render_path, "cuda-fast");
    im->kernel_seconds = 2.5e-4, im->has.kernel_seconds = 1;
    im->max_I = 154.65255737304688, im->has.max_I = 1;
    im->max_I_x = 0.0032500000000000003, im->has.max_I_x = 1;
    im->max_I_y = -0.0, im->has.max_I_y = 1;
    im->mean = 5.932813969724102, im->has.mean = 1;
    im->rms = 20.594157973501314, im->has.rms = 1;
    im->rmsd = 19.72086369841519, im->has.rmsd = 1;
    im->solid_angle = 0.004091799402885954, im->has.solid_angle = 1;
    snprintf(im->imported_from, sizeof im->imported_from, "dir with spaces/frame=1.img");
    snprintf(im->math, sizeof im->math, "--add bg.nbs; --scale 2 --add-scaled -0.5 'air; 2.nbs'");
    im->counts_bits = 32, im->has.counts_bits = 1;
    im->counts_adc = 40, im->has.counts_adc = 1;
    im->counts_gain = 2.5, im->has.counts_gain = 1;
    im->noise_seed = 9007199254740993LL, im->has.noise_seed = 1;
    im->noise_photons = 24448, im->has.noise_photons = 1;
    im->noise_overloads = 3, im->has.noise_overloads = 1;
}

/* A record: the keys of `parts_before`, the arrays (pixels, and counts when
 * with_counts), then the keys of `parts_after`. */
static void build(const nb_image_info *im, unsigned parts_before, unsigned parts_after, int with_counts,
                  nb_record *rec)
{
    float *px;
    int32_t *counts;
    nb_image_record_init(rec);
    if (parts_before && nb_image_put_header(im, rec, parts_before)) printf("#   put_header: %s\n", nb_error_message());
    if (nb_image_add_pixels(rec, N, NULL, &px)) printf("#   add_pixels: %s\n", nb_error_message());
    for (int i = 0; i < N; i++) px[i] = 0.5f * (float)i;
    if (with_counts) {
        if (nb_image_add_counts(rec, N, NULL, &counts)) printf("#   add_counts: %s\n", nb_error_message());
        for (int i = 0; i < N; i++) counts[i] = 40 + i;
    }
    if (parts_after && nb_image_put_header(im, rec, parts_after)) printf("#   put_header: %s\n", nb_error_message());
}

/* Serialise and read back, as a tool downstream would get it. */
static int through_stream(const nb_record *rec, nb_record *got)
{
    unsigned char *buf;
    size_t len;
    nb_reader *r;
    int eof = 0;
    memset(got, 0, sizeof *got);
    if (nb_record_serialize(rec, &buf, &len)) return 0;
    /* a stream needs its END */
    nb_record end;
    nb_record_init(&end, "END");
    nb_hdr_set_long(&end, "RECORDS", 1);
    unsigned char *ebuf;
    size_t elen;
    int okay = !nb_record_serialize(&end, &ebuf, &elen);
    nb_record_free(&end);
    unsigned char *all = malloc(len + elen);
    memcpy(all, buf, len);
    if (okay) memcpy(all + len, ebuf, elen);
    okay = okay && !nb_reader_open_mem(&r, all, len + elen, "test");
    if (okay) {
        okay = !nb_reader_next(r, got, &eof) && !eof;
        nb_reader_close(r);
    }
    free(buf);
    free(ebuf);
    free(all);
    return okay;
}

static int same_info(const nb_image_info *a, const nb_image_info *b)
{
    int bad = 0;
#define SAME(m)                                                   \
    if (memcmp(&a->m, &b->m, sizeof a->m)) {                      \
        printf("#   %s differs\n", #m);                           \
        bad++;                                                    \
    }
    SAME(frame) SAME(nframes) SAME(panel) SAME(fpixels) SAME(spixels) SAME(units) SAME(grad_of) SAME(precision)
    SAME(phi_start) SAME(phi_range) SAME(rendered_by) SAME(render_seconds) SAME(render_path) SAME(kernel_seconds)
    SAME(max_I) SAME(max_I_x) SAME(max_I_y) SAME(mean) SAME(rms) SAME(rmsd) SAME(solid_angle)
    SAME(imported_from) SAME(math) SAME(counts_bits) SAME(counts_adc) SAME(counts_gain) SAME(noise_seed)
    SAME(noise_photons) SAME(noise_overloads) SAME(has)
#undef SAME
    return bad == 0;
}

static void test_round_trip(void)
{
    nb_image_info im, back;
    nb_record rec, got;
    full_info(&im);
    build(&im, NB_IMAGE_FRAME_KEYS, NB_IMAGE_COUNT_KEYS, 1, &rec);
    ok(through_stream(&rec, &got), "an IMAGE record with every key goes through a stream");
    nb_status st = nb_image_from_record(&got, &back);
    ok(st == NB_OK, "... and parses back: %s", st ? nb_error_message() : "ok");
    ok(same_info(&im, &back), "every key reads back bit for bit (doubles, a 2^53+1 seed, -0, text with spaces)");
    ok(back.npixels == N && back.has_counts && back.pixels_offset == 0 && back.counts_offset == N * 4,
       "the arrays: %zu pixels at %llu, counts at %llu", back.npixels, (unsigned long long)back.pixels_offset,
       (unsigned long long)back.counts_offset);
    ok(back.extra == NULL && back.extra_counts == NULL, "no unknown keys");
    const float *px;
    const int32_t *counts;
    size_t n = 0, nc = 0;
    ok(nb_image_pixels(&got, &back, &px, &n) == NB_OK && n == N && px[7] == 3.5f, "the pixels accessor");
    ok(nb_image_counts(&got, &back, &counts, &nc) == NB_OK && nc == N && counts[7] == 47, "the counts accessor");

    /* written again from what was read: the same header */
    nb_record again;
    build(&back, NB_IMAGE_FRAME_KEYS, NB_IMAGE_COUNT_KEYS, 1, &again);
    ok(!strcmp(again.header, rec.header), "rewritten from the parsed keys: the same header, byte for byte");
    nb_record_free(&again);
    nb_image_info_free(&back);
    nb_record_free(&got);
    nb_record_free(&rec);
}

/* A derivative (nb-sim --grad): GRAD_OF and its unit read back, no counts. */
static void test_derivative(void)
{
    nb_image_info im, back;
    nb_record rec, got;
    nb_image_info_init(&im);
    im.fpixels = W, im.spixels = H;
    snprintf(im.units, sizeof im.units, "photons/(photons/m^2)");
    snprintf(im.grad_of, sizeof im.grad_of, "fluence");
    build(&im, NB_IMAGE_FRAME_KEYS, 0, 0, &rec);
    ok(through_stream(&rec, &got), "a derivative record goes through a stream");
    nb_status st = nb_image_from_record(&got, &back);
    ok(st == NB_OK && nb_image_is_grad(&back) && !strcmp(back.grad_of, "fluence") &&
           !strcmp(back.units, "photons/(photons/m^2)"),
       "GRAD_OF and its unit read back: %s", st ? nb_error_message() : back.grad_of);
    nb_image_info_free(&back);
    full_info(&im);
    ok(!nb_image_is_grad(&im), "an image is no derivative");
    nb_record_free(&got);
    nb_record_free(&rec);
}

/* The documented key order, and the layouts of nb-sim, nb-noise and
 * nb-convert --import (whose streams are kept byte for byte). */
static void test_layouts(void)
{
    nb_image_info im;
    nb_record rec;
    full_info(&im);
    build(&im, NB_IMAGE_FRAME_KEYS, NB_IMAGE_COUNT_KEYS, 1, &rec);
    const char *noise_layout =
        "\nFRAME=2\nNFRAMES=5\nPANEL=0\nFPIXELS=6\nSPIXELS=4\nUNITS=photons\nPRECISION=double\n"
        "PHI_START=0.30000000000000004\nPHI_RANGE=0.3333333333333333\nRENDERED_BY=nb-sim 9.9.9\n"
        "RENDER_SECONDS=1e-07\nRENDER_PATH=cuda-fast\nKERNEL_SECONDS=0.00025\n"
        "MAX_I=154.65255737304688\nMAX_I_X=0.0032500000000000003\nMAX_I_Y=-0\nMEAN=5.932813969724102\n"
        "RMS=20.594157973501314\nRMSD=19.72086369841519\nSOLID_ANGLE=0.004091799402885954\n"
        "IMPORTED_FROM=dir with spaces/frame=1.img\n"
        "MATH=--add bg.nbs; --scale 2 --add-scaled -0.5 'air; 2.nbs'\n"
        "ARRAY.pixels=f32 24 0\nARRAY.counts=i32 24 96\n"
        "COUNTS_BITS=32\nCOUNTS_ADC=40\nCOUNTS_GAIN=2.5\nNOISE_SEED=9007199254740993\nNOISE_PHOTONS=24448\n"
        "NOISE_OVERLOADS=3\n";
    ok(!strcmp(rec.header, noise_layout), "frame keys, arrays, counts keys: the documented order (nb-noise)");
    if (strcmp(rec.header, noise_layout)) show("got", rec.header);
    nb_record_free(&rec);

    /* nb-sim: the pixels first, then every key; no counts keys when absent */
    nb_image_info sim;
    nb_image_info_init(&sim);
    sim.frame = 0, sim.has.frame = 1, sim.nframes = 1, sim.has.nframes = 1, sim.has.panel = 1;
    sim.fpixels = W, sim.spixels = H;
    snprintf(sim.units, sizeof sim.units, "photons");
    sim.max_I = 1, sim.has.max_I = 1;
    build(&sim, 0, NB_IMAGE_ALL_KEYS, 0, &rec);
    ok(!strcmp(rec.header, "\nARRAY.pixels=f32 24 0\nFRAME=0\nNFRAMES=1\nPANEL=0\nFPIXELS=6\nSPIXELS=4\n"
                           "UNITS=photons\nMAX_I=1\n"),
       "pixels, then the keys present (nb-sim)");
    nb_record_free(&rec);

    /* nb-convert --import of an SMV: arrays, counts keys, frame keys */
    nb_image_info imp;
    nb_image_info_init(&imp);
    imp.has.frame = 1, imp.has.panel = 1, imp.fpixels = W, imp.spixels = H;
    snprintf(imp.units, sizeof imp.units, "photons");
    snprintf(imp.imported_from, sizeof imp.imported_from, "a.img");
    imp.counts_bits = 16, imp.has.counts_bits = 1, imp.counts_adc = 40, imp.has.counts_adc = 1;
    nb_image_record_init(&rec);
    nb_image_add_pixels(&rec, N, NULL, NULL);
    nb_image_add_counts(&rec, N, NULL, NULL);
    nb_image_put_header(&imp, &rec, NB_IMAGE_COUNT_KEYS);
    nb_image_put_header(&imp, &rec, NB_IMAGE_FRAME_KEYS);
    ok(!strcmp(rec.header, "\nARRAY.pixels=f32 24 0\nARRAY.counts=i32 24 96\nCOUNTS_BITS=16\nCOUNTS_ADC=40\n"
                           "FRAME=0\nPANEL=0\nFPIXELS=6\nSPIXELS=4\nUNITS=photons\nIMPORTED_FROM=a.img\n"),
       "the parts in either order (nb-convert --import of an SMV)");
    /* putting a part again replaces its lines in place */
    imp.counts_adc = 12;
    nb_image_put_header(&imp, &rec, NB_IMAGE_COUNT_KEYS);
    ok(contains(rec.header, "\nCOUNTS_ADC=12\nFRAME=0\n") && !contains(rec.header, "COUNTS_ADC=40"),
       "a part put again replaces its values where they are");
    nb_record_free(&rec);
}

/* A good record to corrupt: frame keys, pixels, counts, counts keys. */
static void good_record(nb_record *rec)
{
    nb_image_info im;
    full_info(&im);
    build(&im, NB_IMAGE_FRAME_KEYS, NB_IMAGE_COUNT_KEYS, 1, rec);
}

static void drop_key(nb_record *rec, const char *key)
{
    size_t klen = strlen(key);
    for (char *line = rec->header; line && *line;) {
        char *next = strchr(line, '\n');
        next = next ? next + 1 : line + strlen(line);
        if (!strncmp(line, key, klen) && line[klen] == '=') {
            memmove(line, next, strlen(next) + 1);
            rec->header_len = strlen(rec->header);
            return;
        }
        line = next;
    }
}

static void test_checks(void)
{
    struct {
        const char *key, *value; /* value NULL: the key removed */
        const char *named;       /* what the message must name */
        const char *what;
    } cases[] = {
        {"FPIXELS", NULL, "missing key FPIXELS", "no FPIXELS"},
        {"SPIXELS", NULL, "missing key SPIXELS", "no SPIXELS"},
        {"FPIXELS", "0", "FPIXELS x SPIXELS = 0 x 4", "FPIXELS=0"},
        {"SPIXELS", "-4", "FPIXELS x SPIXELS = 6 x -4", "SPIXELS negative"},
        {"FPIXELS", "7", "24 pixels but FPIXELS x SPIXELS = 7 x 4", "FPIXELS that disagrees with the pixels"},
        {"FPIXELS", "99999999999", "FPIXELS x SPIXELS", "FPIXELS beyond an int"},
        {"FPIXELS", "6.0", "FPIXELS", "a fractional FPIXELS"},
        {"SPIXELS", "four", "SPIXELS", "a word for SPIXELS"},
        {"ARRAY.pixels", NULL, "missing array pixels", "no pixels array"},
        {"ARRAY.pixels", "f64 12 0", "array pixels is f64, expected f32", "pixels of the wrong dtype"},
        {"ARRAY.pixels", "f32 24 4096", "outside", "pixels outside the payload"},
        {"ARRAY.pixels", "f32 24", "bad array entry", "a malformed array entry"},
        {"ARRAY.counts", "u16 24 96", "array counts is u16, expected i32", "counts of the wrong dtype"},
        {"ARRAY.counts", "i32 12 96", "counts array has the wrong size", "counts of the wrong size"},
        {"FRAME", "-1", "FRAME", "a negative FRAME"},
        {"FRAME", "1x", "FRAME", "a malformed FRAME"},
        {"FRAME", "5", "FRAME=5 is not a frame of NFRAMES=5", "FRAME beyond NFRAMES"},
        {"NFRAMES", "0", "NFRAMES", "NFRAMES=0"},
        {"PANEL", "1", "PANEL", "a panel other than 0"},
        {"PHI_START", "nan", "PHI_START is not a finite number", "PHI_START=nan"},
        {"PHI_RANGE", "-inf", "PHI_RANGE", "PHI_RANGE=-inf"},
        {"PHI_RANGE", "", "PHI_RANGE", "an empty PHI_RANGE"},
        {"MAX_I", "big", "MAX_I", "a malformed MAX_I"},
        {"RMSD", "1 2", "RMSD", "two numbers for RMSD"},
        {"UNITS", "photons-per-pixel-per-frame-in-the-series", "UNITS is too long", "a UNITS too long for its field"},
        {"GRAD_OF", "cell/a", "GRAD_OF is not a name", "a GRAD_OF that is not a name"},
        {"GRAD_OF", "distance", "GRAD_OF marks a derivative, which has no counts", "a derivative with counts"},
        {"COUNTS_BITS", "12", "COUNTS_BITS must be 16 or 32", "COUNTS_BITS=12"},
        {"COUNTS_BITS", "99999999999", "COUNTS_BITS", "COUNTS_BITS beyond an int"},
        {"COUNTS_ADC", "inf", "COUNTS_ADC", "COUNTS_ADC=inf"},
        {"COUNTS_GAIN", "x", "COUNTS_GAIN", "a malformed COUNTS_GAIN"},
        {"NOISE_SEED", "12x", "NOISE_SEED", "a malformed NOISE_SEED"},
        {"NOISE_OVERLOADS", "-2", "NOISE_OVERLOADS", "negative NOISE_OVERLOADS"},
    };
    nb_record good;
    good_record(&good);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        nb_record r;
        nb_image_info im;
        through_stream(&good, &r);
        if (cases[i].value) nb_hdr_set(&r, cases[i].key, cases[i].value);
        else drop_key(&r, cases[i].key);
        /* an unknown key too: it must not survive a failure */
        nb_hdr_set(&r, "SOMETHING_NEW", "1");
        nb_status st = nb_image_from_record(&r, &im);
        ok(st == NB_ERR_DATA && contains(nb_error_message(), cases[i].named) &&
               contains(nb_error_message(), "IMAGE record"),
           "%s refused: %s", cases[i].what, st ? nb_error_message() : "accepted");
        ok(im.extra == NULL && im.extra_counts == NULL && !im.has.frame && im.fpixels == 0,
           "... and the half-read keys were freed");
        nb_record_free(&r);
    }

    /* optional keys may all be absent: only the sizes and the pixels are needed */
    {
        nb_record r;
        nb_image_info im;
        nb_image_record_init(&r);
        nb_image_add_pixels(&r, N, NULL, NULL);
        nb_hdr_set_long(&r, "FPIXELS", W);
        nb_hdr_set_long(&r, "SPIXELS", H);
        nb_status st = nb_image_from_record(&r, &im);
        ok(st == NB_OK && im.frame == 0 && !im.has.frame && im.counts_bits == 16 && !im.has_counts &&
               im.units[0] == 0,
           "a record with FPIXELS, SPIXELS and pixels alone is an image (FRAME 0, no counts): %s",
           st ? nb_error_message() : "ok");
        const int32_t *c;
        ok(nb_image_counts(&r, &im, &c, NULL) == NB_ERR_DATA && contains(nb_error_message(), "missing array counts"),
           "... whose counts accessor says there are none: %s", nb_error_message());
        nb_image_info_free(&im);
        nb_record_free(&r);
    }

    /* not an IMAGE record */
    {
        nb_record r;
        nb_image_info im;
        through_stream(&good, &r);
        snprintf(r.type, sizeof r.type, "PLAN");
        nb_status st = nb_image_from_record(&r, &im);
        ok(st == NB_ERR_DATA && contains(nb_error_message(), "expected an IMAGE record, got PLAN"),
           "a PLAN record is not an image: %s", nb_error_message());
        nb_record_free(&r);
    }
    nb_record_free(&good);
}

static void test_unknown_keys(void)
{
    nb_record good, r, again;
    nb_image_info im;
    good_record(&good);
    through_stream(&good, &r);
    nb_hdr_set(&r, "DETECTOR_NAME", "pilatus=6M");
    nb_hdr_set(&r, "COUNTS_ORIGIN", "simulated");
    nb_hdr_set(&r, "NOISE_MODEL", "poisson");
    nb_hdr_set(&r, "ARRAY.mask", "u8 8 0");
    nb_hdr_set(&r, "LOWERCASE_later", "x y z");
    nb_status st = nb_image_from_record(&r, &im);
    ok(st == NB_OK, "unknown keys (and an unknown array) are ignored: %s", st ? nb_error_message() : "ok");
    ok(im.extra && !strcmp(im.extra, "DETECTOR_NAME=pilatus=6M\nLOWERCASE_later=x y z\n"),
       "... kept with the frame's keys, in order");
    ok(im.extra_counts && !strcmp(im.extra_counts, "COUNTS_ORIGIN=simulated\nNOISE_MODEL=poisson\n"),
       "... the unknown COUNTS_* and NOISE_* keys with the counts");

    /* written again: after the known keys of their part */
    build(&im, NB_IMAGE_FRAME_KEYS, NB_IMAGE_COUNT_KEYS, 1, &again);
    ok(contains(again.header, "MATH=--add bg.nbs; --scale 2 --add-scaled -0.5 'air; 2.nbs'\n"
                              "DETECTOR_NAME=pilatus=6M\nLOWERCASE_later=x y z\nARRAY.pixels=") &&
           contains(again.header, "NOISE_OVERLOADS=3\nCOUNTS_ORIGIN=simulated\nNOISE_MODEL=poisson\n") &&
           !contains(again.header, "ARRAY.mask"),
       "a rewrite keeps them after the known keys of their part (not the array it cannot carry)");
    nb_record_free(&again);

    /* nb-noise replaces the counts: their keys, known and unknown, go */
    nb_image_drop_counts(&im);
    ok(!im.has.counts_bits && !im.has.counts_adc && !im.has.noise_seed && !im.has.noise_overloads &&
           !im.has_counts && im.extra_counts == NULL && im.extra != NULL && im.has.max_I,
       "nb_image_drop_counts forgets the counts' keys only");
    build(&im, NB_IMAGE_ALL_KEYS, 0, 0, &again);
    ok(!contains(again.header, "COUNTS_") && !contains(again.header, "NOISE_") &&
           contains(again.header, "DETECTOR_NAME=pilatus=6M"),
       "... and a record written from it has none of them");
    nb_record_free(&again);
    nb_image_info_free(&im);
    nb_record_free(&r);
    nb_record_free(&good);
}

static void test_writer_refuses(void)
{
    nb_image_info im;
    nb_record rec;
    full_info(&im);
    snprintf(im.imported_from, sizeof im.imported_from, "two\nlines");
    nb_image_record_init(&rec);
    nb_status st = nb_image_put_header(&im, &rec, NB_IMAGE_ALL_KEYS);
    ok(st == NB_ERR_DATA && contains(nb_error_message(), "IMPORTED_FROM contains a newline"),
       "a text value with a newline is refused: %s", nb_error_message());
    nb_record_free(&rec);
    full_info(&im);
    memset(im.units, 'x', sizeof im.units);
    nb_image_record_init(&rec);
    st = nb_image_put_header(&im, &rec, NB_IMAGE_ALL_KEYS);
    ok(st == NB_ERR_DATA && contains(nb_error_message(), "UNITS is too long"),
       "a text field without its terminator is refused: %s", nb_error_message());
    nb_record_free(&rec);
}

/* The payload not there (a payload hook's first call, a payload not kept):
 * the keys parse, the arrays' places are known, the accessors refuse. */
static void test_without_payload(void)
{
    nb_record good, hdr;
    nb_image_info im;
    good_record(&good);
    memset(&hdr, 0, sizeof hdr);
    memcpy(hdr.type, good.type, sizeof hdr.type);
    hdr.header = good.header;
    hdr.header_len = good.header_len;
    hdr.payload_len = good.payload_len;
    nb_status st = nb_image_from_record(&hdr, &im);
    ok(st == NB_OK && im.pixels_offset == 0 && im.has_counts && im.counts_offset == N * 4 && im.has.rmsd,
       "a record whose payload is not there parses from its header: %s", st ? nb_error_message() : "ok");
    const float *px;
    st = nb_image_pixels(&hdr, &im, &px, NULL);
    ok(st == NB_ERR_DATA && contains(nb_error_message(), "not kept"), "... its pixels accessor refuses: %s",
       nb_error_message());
    nb_image_info_free(&im);
    /* a header claiming more than the payload's length */
    hdr.payload_len = 16;
    st = nb_image_from_record(&hdr, &im);
    ok(st == NB_ERR_DATA && contains(nb_error_message(), "outside the 16-byte payload"),
       "... and arrays beyond the payload's length are refused: %s", nb_error_message());
    nb_record_free(&good);
}

static void test_accessors_and_plan(void)
{
    nb_record rec;
    nb_image_info im;
    good_record(&rec);
    nb_status st = nb_image_from_record(&rec, &im);
    ok(st == NB_OK, "the good record parses");
    const float *px;
    size_t n = 0;
    ok(nb_image_pixels(&rec, NULL, &px, &n) == NB_OK && n == N && (const void *)px == rec.payload,
       "nb_image_pixels without keys: any length, pointing into the payload (no copy)");
    nb_image_info other = im;
    other.npixels = N + 1;
    ok(nb_image_pixels(&rec, &other, &px, NULL) == NB_ERR_DATA &&
           contains(nb_error_message(), "pixels array has 24 values but FPIXELS x SPIXELS is 25"),
       "nb_image_pixels checks the length against the keys: %s", nb_error_message());
    const int32_t *c;
    ok(nb_image_counts(&rec, &other, &c, NULL) == NB_ERR_DATA && contains(nb_error_message(), "counts array"),
       "nb_image_counts too: %s", nb_error_message());

    nb_plan plan;
    nb_plan_init(&plan);
    if (nb_plan_set_panels(&plan, 1) != NB_OK) return;
    plan.panels[0].fpixels = W, plan.panels[0].spixels = H;
    ok(nb_image_check_plan(&im, &plan) == NB_OK, "an image of its plan's size belongs to it");
    plan.panels[0].spixels = H + 1;
    st = nb_image_check_plan(&im, &plan);
    ok(st == NB_ERR_DATA && contains(nb_error_message(), "IMAGE record is 6 x 4 pixels but its plan says 6 x 5"),
       "one of another size does not: %s", nb_error_message());
    st = nb_image_check_plan(&im, NULL);
    ok(st == NB_ERR_DATA && contains(nb_error_message(), "an IMAGE record came before any PLAN record"),
       "and without a plan: %s", nb_error_message());
    st = nb_image_none("in.nbs");
    ok(st == NB_ERR_DATA && !strcmp(nb_error_message(), "in.nbs: the stream holds no IMAGE record (run nb-sim first)"),
       "the message of a stream without images: %s", nb_error_message());
    nb_plan_free(&plan);
    nb_image_info_free(&im);
    nb_record_free(&rec);
}

int main(void)
{
    nb_set_tool_name("test_image_record");
    nb_set_verbosity(-1);
    test_round_trip();
    test_derivative();
    test_layouts();
    test_checks();
    test_unknown_keys();
    test_writer_refuses();
    test_without_payload();
    test_accessors_and_plan();
    return tap_done();
}
