/* test_api_v2.c - the public API's second part (engine/nb.h, "API 2"),
 * through nb.h alone as a program sees it: the version, named options and
 * their refusals, plans and renderers from nb-geom's flags, structure
 * factors from arrays, detector counts, the plan's named parameters, the
 * fit on arrays; every misuse a code and a message,
 * factors from arrays, detector counts, the plan's named parameters, image
 * files read and written (nb_image_read, nb_image_write); every misuse a code and a message,
 * never an exit.  (Against the tools' bytes: tests/cli/api.bats.) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nb.h"
#include "tap.h"

#define NFLAGS(a) ((int)(sizeof a / sizeof a[0]))

static const char *const flags[] = {"-cell", "70", "80", "90", "80", "95", "100", "-misset", "10", "20", "30",
                                    "-lambda", "1", "-N", "5", "-distance", "100", "-detpixels", "40", "-pixel",
                                    "0.4", "-oversample", "1", "-seed", "3", "-osc", "0.5", "-nframes", "2",
                                    "-default_F", "100", "-roi", "2", "37", "1", "38"};
/* the same without -default_F */
static const char *const no_F[] = {"-cell", "70", "80", "90", "80", "95", "100", "-lambda", "1", "-N", "5",
                                   "-detpixels", "40", "-pixel", "0.4", "-oversample", "1", "-seed", "3"};

static int same_floats(const float *a, const float *b, size_t n)
{
    return memcmp(a, b, n * sizeof *a) == 0;
}

static int has(const char *what)
{
    return strstr(nb_last_error(), what) != NULL;
}

static void version(void)
{
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", NB_VERSION_MAJOR, NB_VERSION_MINOR, NB_VERSION_PATCH);
    ok(nb_version_number() == NB_VERSION_NUMBER, "nb_version_number is nb.h's: %d", nb_version_number());
    ok(!strcmp(nb_version(), want), "nb_version %s is NB_VERSION_MAJOR.MINOR.PATCH (%s)", nb_version(), want);
    ok(NB_VERSION_CHECK(), "NB_VERSION_CHECK: this library runs this header's programs");
    ok(NB_API_VERSION >= 2, "NB_API_VERSION %d", NB_API_VERSION);
}

static void options(void)
{
    nb_options *r = nb_options_new(NB_OPTIONS_RENDER), *n = nb_options_new(NB_OPTIONS_NOISE);
    ok(r && n, "render and noise options");
    ok(nb_options_new((nb_options_kind)9) == NULL && has("no kind 9"), "an unknown kind: none, said");
    ok(nb_options_set_int(r, "threads", 4) == NB_RESULT_OK, "threads 4");
    ok(nb_options_set_int(r, "threads", -1) == NB_RESULT_USAGE && has("threads -1"), "threads -1: usage, said");
    ok(nb_options_set_string(r, "device", "cuda") == NB_RESULT_OK, "device \"cuda\"");
    ok(nb_options_set_int(r, "device", NB_DEVICE_AUTO) == NB_RESULT_OK, "device NB_DEVICE_AUTO");
    ok(nb_options_set_int(r, "device", 3) == NB_RESULT_USAGE, "device 3: usage");
    ok(nb_options_set_string(r, "device", "gpu") == NB_RESULT_USAGE && has("cpu, cuda or auto"),
       "device \"gpu\": usage, the choices said: %s", nb_last_error());
    ok(nb_options_set_string(r, "precision", "double") == NB_RESULT_OK, "precision \"double\"");
    ok(nb_options_set_string(r, "threads", "2") == NB_RESULT_OK, "threads \"2\" (a number as text)");
    ok(nb_options_set_string(r, "threads", "2x") == NB_RESULT_USAGE, "threads \"2x\": usage");
    ok(nb_options_set_double(r, "threads", 2.0) == NB_RESULT_USAGE && has("integer"), "threads as a double: usage");
    ok(nb_options_set_int(r, "colour", 1) == NB_RESULT_USAGE && has("'colour'") && has("device, precision, threads"),
       "an unknown name: usage, the names known said: %s", nb_last_error());
    ok(nb_options_set_int(r, "seed", 1) == NB_RESULT_USAGE && has("render option 'seed'"),
       "a noise name in render options: usage");
    ok(nb_options_set_int(NULL, "threads", 1) == NB_RESULT_USAGE, "no options: usage");
    ok(nb_options_set_int(r, NULL, 1) == NB_RESULT_USAGE, "no name: usage");
    ok(nb_options_set_string(r, "device", NULL) == NB_RESULT_USAGE, "no value: usage");

    ok(nb_options_set_int(n, "bits", 32) == NB_RESULT_OK, "bits 32");
    ok(nb_options_set_int(n, "bits", 24) == NB_RESULT_USAGE && has("16 or 32"), "bits 24: usage, said");
    ok(nb_options_set_string(n, "seed", "-12") == NB_RESULT_OK, "seed \"-12\"");
    ok(nb_options_set_string(n, "seed", "abc") == NB_RESULT_USAGE, "seed \"abc\": usage");
    ok(nb_options_set_double(n, "adc", -5) == NB_RESULT_OK, "adc -5 (any finite offset)");
    ok(nb_options_set_double(n, "adc", NAN) == NB_RESULT_USAGE, "adc NaN: usage");
    ok(nb_options_set_double(n, "gain", -1) == NB_RESULT_USAGE, "gain -1: usage");
    ok(nb_options_set_int(n, "gain", 2) == NB_RESULT_OK, "gain 2 by nb_options_set_int");
    ok(nb_options_set_double(n, "fluence", 0) == NB_RESULT_USAGE, "fluence 0: usage");
    ok(nb_options_set_string(n, "psf", "gauss") == NB_RESULT_OK, "psf \"gauss\"");
    ok(nb_options_set_double(n, "psf", 1) == NB_RESULT_USAGE && has("a choice"), "psf as a double: usage");
    ok(nb_options_set_int(n, "psf_radius", 100001) == NB_RESULT_USAGE, "psf_radius 100001: usage");
    ok(nb_options_set_string(n, "rng", "philox") == NB_RESULT_OK, "rng \"philox\"");
    ok(nb_options_set_string(n, "threads", "1") == NB_RESULT_USAGE && has("noise option 'threads'"),
       "a render name in noise options: usage");
    nb_options_free(r);
    nb_options_free(n);
    nb_options_free(NULL);
    nb_free(NULL);
}

/* A renderer from the flags, and one from the stream of the same flags:
 * the same image */
static nb_renderer *from_flags(float **image)
{
    nb_renderer *a = NULL, *b = NULL;
    void *bytes = NULL;
    size_t size = 0;
    ok(nb_renderer_from_args(NFLAGS(flags), flags, NULL, &a) == NB_RESULT_OK, "a renderer from nb-geom's flags (%s)",
       nb_last_error());
    ok(nb_plan_stream_from_args(NFLAGS(flags), flags, &bytes, &size) == NB_RESULT_OK && size > 0,
       "the flags' stream: %zu bytes", size);
    ok(bytes && nb_renderer_from_stream(bytes, size, NULL, &b) == NB_RESULT_OK, "a renderer from it");
    nb_free(bytes);
    if (!a || !b) exit(tap_done());
    ok(nb_renderer_frames(a) == 2 && nb_renderer_panels(a) == 1 && nb_renderer_pixels(a) == 1600,
       "two frames of 40 x 40 pixels");
    const size_t n = nb_renderer_pixels(a);
    float *ia = calloc(n, sizeof *ia), *ib = calloc(n, sizeof *ib);
    ok(nb_render_frame(a, 1, ia) == NB_RESULT_OK && nb_render_frame(b, 1, ib) == NB_RESULT_OK, "both render frame 1");
    ok(same_floats(ia, ib, n), "the same pixels, bit for bit");
    ok(nb_render_frame(a, 0, ia) == NB_RESULT_OK, "frame 0");
    float peak = 0;
    for (size_t i = 0; i < n; i++) peak = ia[i] > peak ? ia[i] : peak;
    ok(peak > 0 && ia[0] == 0.0f, "photons in the ROI (max %g), none outside", peak);
    /* derivatives of the plan the flags made (its parameters move it) */
    float *g = calloc(n, sizeof *g), *grads[1] = {g};
    ok(nb_renderer_set_derivatives(a, "distance") == NB_RESULT_OK &&
           nb_render_frame_grad(a, 0, NULL, grads) == NB_RESULT_OK,
       "d/d distance of a renderer from flags (%s)", nb_last_error());
    nb_renderer_set_derivatives(a, NULL);
    free(g);
    free(ib);
    nb_renderer_free(b);
    *image = ia;
    return a;
}

static void flag_refusals(void)
{
    nb_renderer *r = (nb_renderer *)&r;
    void *bytes = &bytes;
    size_t size = 1;
    const char *unknown[] = {"-cell", "100", "-nope"}, *img[] = {"-img", "x.img"}, *hkl[] = {"-hkl", "x.hkl"};
    const char *tool[] = {"-o", "x.nbs"}, *null_arg[] = {"-cell", NULL};
    ok(nb_renderer_from_args(3, unknown, NULL, &r) == NB_RESULT_USAGE && !r && has("'-nope'"),
       "an unknown flag: usage, said, no renderer: %s", nb_last_error());
    ok(nb_plan_stream_from_args(3, unknown, &bytes, &size) == NB_RESULT_USAGE && !bytes && !size,
       "the same for a stream: no bytes");
    ok(nb_renderer_from_args(2, tool, NULL, &r) == NB_RESULT_USAGE, "nb-geom's own -o: usage");
    ok(nb_plan_stream_from_args(2, img, &bytes, &size) == NB_RESULT_IO && has("x.img") && !bytes,
       "-img of a file that is not there: read as nb-geom reads it, an I/O error naming it: %s", nb_last_error());
    const char *panels[] = {"-cell", "100", "100", "100", "90", "90", "90", "-panels", "x.txt"};
    ok(nb_plan_stream_from_args(NFLAGS(panels), panels, &bytes, &size) != NB_RESULT_OK && has("x.txt"),
       "-panels of a file no reader takes: refused, named: %s", nb_last_error());
    ok(nb_renderer_from_args(2, hkl, NULL, &r) == NB_RESULT_UNSUPPORTED && has("-hkl") && has("nb_renderer_set_F"),
       "-hkl for a renderer: unsupported, the arrays suggested");
    ok(nb_plan_stream_from_args(1, NULL, &bytes, &size) == NB_RESULT_USAGE, "argc 1, no argv: usage");
    ok(nb_plan_stream_from_args(2, null_arg, &bytes, &size) == NB_RESULT_USAGE && has("argv[1]"),
       "a NULL flag: usage, said");
    ok(nb_plan_stream_from_args(0, NULL, NULL, &size) == NB_RESULT_USAGE, "no place for the bytes: usage");
    ok(nb_renderer_from_args(0, NULL, NULL, NULL) == NB_RESULT_USAGE, "no place for the renderer: usage");
    ok(nb_renderer_from_args(0, NULL, NULL, &r) == NB_RESULT_USAGE && has("no crystal"),
       "no flags: nb-geom's own refusal (%s)", nb_last_error());
    nb_options *noise = nb_options_new(NB_OPTIONS_NOISE);
    ok(nb_renderer_from_args(NFLAGS(flags), flags, noise, &r) == NB_RESULT_USAGE && has("noise options"),
       "noise options for a renderer: usage, said");
    nb_options_free(noise);
}

/* Image files through the format registry: a frame written and read back,
 * and every misuse a code and a message */
static void image_files(nb_renderer *a, float *image)
{
    char dir[] = "/tmp/test_api_v2.XXXXXX", bin[64], smv[64], png[64];
    if (!mkdtemp(dir)) {
        ok(0, "a temporary folder");
        return;
    }
    snprintf(bin, sizeof bin, "%s/f.bin", dir);
    snprintf(smv, sizeof smv, "%s/f.img", dir);
    snprintf(png, sizeof png, "%s/f.png", dir);
    nb_image_data w, got;
    nb_image_data_init(&w);
    nb_image_data_init(&got);
    w.width = 40, w.height = 40, w.pixels = 1600, w.photons = image;
    ok(nb_image_write(bin, NULL, &w, a, 0) == NB_RESULT_OK, "raw float written: %s", nb_last_error());
    ok(nb_image_read(bin, a, 0, &got) == NB_RESULT_OK && !got.is_counts && got.pixels == 1600 && got.width == 40 &&
           !strcmp(got.format, "bin") && same_floats(got.photons, image, 1600) && !got.untrusted,
       "read back: the photons, bit for bit");
    nb_image_data_free(&got);
    ok(!got.photons && got.size == sizeof got, "freed: empty again");
    ok(nb_image_write(smv, "img", &w, a, 1) == NB_RESULT_OK, "SMV of frame 1 written: %s", nb_last_error());
    ok(nb_image_read(smv, a, 0, &got) == NB_RESULT_OK && got.is_counts && got.bits == 16 && got.offset == 40 &&
           got.offset_stated && got.gain == 1 && got.overload == 65535 && got.counts && got.untrusted,
       "read back: the int image's 16-bit counts, the file's offset 40");
    nb_image_data_free(&got);
    ok(nb_image_write(png, NULL, &w, a, 0) == NB_RESULT_OK, "a PNG written");

    /* reading's refusals: image emptied, a message */
    nb_image_data bad;
    nb_image_data_init(&bad);
    bad.size = 8;
    ok(nb_image_read(bin, a, 0, &bad) == NB_RESULT_USAGE && has("nb_image_data_init"), "a size not the structure's");
    ok(nb_image_read(bin, a, 0, NULL) == NB_RESULT_USAGE, "no image: usage");
    ok(nb_image_read(NULL, a, 0, &got) == NB_RESULT_USAGE && has("no path"), "no path: usage");
    ok(nb_image_read(bin, a, -1, &got) == NB_RESULT_USAGE && has("negative"), "a negative frame: usage");
    ok(nb_image_read(smv, a, 1, &got) == NB_RESULT_USAGE && has("out of range") && !got.counts,
       "frame 1 of an SMV: usage, said: %s", nb_last_error());
    ok(nb_image_read(png, NULL, 0, &got) == NB_RESULT_USAGE && has("write-only"), "a PNG: write-only, said");
    ok(nb_image_read("x.jpg", NULL, 0, &got) == NB_RESULT_USAGE && has("'.jpg'"), "an unknown suffix: usage");
    ok(nb_image_read("/nonexistent/x.img", NULL, 0, &got) == NB_RESULT_IO && !got.counts,
       "a file that is not there: I/O, said: %s", nb_last_error());
    ok(nb_image_read(bin, NULL, 0, &got) == NB_RESULT_OK && got.width == 1600 && got.height == 1,
       "raw float without a renderer: every pixel, one row");
    nb_image_data_free(&got);
    nb_image_data_free(NULL);

    /* writing's */
    ok(nb_image_write(NULL, "bin", &w, a, 0) == NB_RESULT_USAGE && has("no path"), "write: no path");
    ok(nb_image_write(bin, "bin", NULL, a, 0) == NB_RESULT_USAGE, "write: no image");
    ok(nb_image_write(bin, "jpeg", &w, a, 0) == NB_RESULT_USAGE && has("unknown format 'jpeg'"), "an unknown format");
    ok(nb_image_write("x.jpg", NULL, &w, a, 0) == NB_RESULT_USAGE && has("suffix"), "an unknown suffix");
    ok(nb_image_write("x.nxs", NULL, &w, a, 0) == NB_RESULT_USAGE && has("one image at a time"),
       "NXmx: not one image");
    ok(nb_image_write(bin, NULL, &w, a, 2) == NB_RESULT_USAGE && has("out of range"), "frame 2 of 2: usage");
    w.width = 20;
    ok(nb_image_write(smv, NULL, &w, a, 0) == NB_RESULT_USAGE, "20 x 40 for a 40 x 40 detector: usage (%s)",
       nb_last_error());
    w.width = 40, w.photons = NULL;
    ok(nb_image_write(smv, NULL, &w, a, 0) == NB_RESULT_USAGE && has("no photons"), "no pixels: usage");
    w.photons = image;
    ok(nb_image_write("/nonexistent/f.img", NULL, &w, a, 0) == NB_RESULT_IO, "a folder that is not there: I/O (%s)",
       nb_last_error());
    remove(bin), remove(smv), remove(png), rmdir(dir);
}

/* Structure factors from arrays (P1, nb-hkl's grid), and a renderer that
 * waits for them */
static void structure_factors(nb_renderer *a, const float *image)
{
    const size_t n = nb_renderer_pixels(a);
    float *got = calloc(n, sizeof *got);
    enum { BOX = 21 * 21 * 21 };
    int *h = malloc(BOX * sizeof *h), *k = malloc(BOX * sizeof *k), *l = malloc(BOX * sizeof *l);
    double *F = malloc(BOX * sizeof *F);
    size_t m = 0;
    for (int i = -10; i <= 10; i++)
        for (int j = -10; j <= 10; j++)
            for (int q = -10; q <= 10; q++, m++) h[m] = i, k[m] = j, l[m] = q, F[m] = 100.0;
    /* within rounding: on this rotation the engine's path for a grid and
     * its path for -default_F alone differ in the last bits, nb-hkl's grid
     * as much (tests/cli/api.bats holds nb_renderer_set_F to nb-hkl's bytes) */
    ok(nb_renderer_set_F(a, h, k, l, F, 1) == NB_RESULT_OK, "one reflection at -default_F's value");
    int same = nb_render_frame(a, 0, got) == NB_RESULT_OK;
    for (size_t i = 0; i < n; i++) same &= fabsf(got[i] - image[i]) <= 1e-6f * image[i];
    ok(same, "  the -default_F image");
    for (size_t i = 0; i < m; i++) F[i] = 200.0;
    ok(nb_renderer_set_F(a, h, k, l, F, m) == NB_RESULT_OK, "%zu reflections of twice the F", m);
    int four = nb_render_frame(a, 0, got) == NB_RESULT_OK;
    for (size_t i = 0; i < n; i++) four &= fabsf(got[i] - 4 * image[i]) <= 1e-5f * 4 * image[i];
    ok(four, "  four times the photons");
    F[0] = NAN;
    ok(nb_renderer_set_F(a, h, k, l, F, m) == NB_RESULT_USAGE && has("reflection 0"), "a NaN F: usage, said");
    F[0] = 200.0, h[1] = 2000000;
    ok(nb_renderer_set_F(a, h, k, l, F, m) == NB_RESULT_USAGE && has("2000000"), "an index of 2000000: usage");
    ok(nb_renderer_set_F(a, h, k, l, F, 0) == NB_RESULT_USAGE, "no reflections: usage");
    ok(nb_renderer_set_F(a, h, NULL, l, F, m) == NB_RESULT_USAGE, "no k: usage");
    ok(nb_renderer_set_F(NULL, h, k, l, F, m) == NB_RESULT_USAGE, "no renderer: usage");
    float *kept = calloc(n, sizeof *kept);
    int still = nb_render_frame(a, 0, kept) == NB_RESULT_OK;
    for (size_t i = 0; i < n; i++) still &= kept[i] == got[i];
    ok(still, "  after the refusals the renderer keeps its F");
    free(kept);

    /* without -default_F: the stream's renderer of API 1 is refused, the others wait */
    nb_renderer *w = NULL;
    void *bytes = NULL;
    size_t size = 0;
    ok(nb_plan_stream_from_args(NFLAGS(no_F), no_F, &bytes, &size) == NB_RESULT_OK, "a plan without -default_F");
    ok(nb_renderer_from_stream(bytes, size, NULL, &w) == NB_RESULT_USAGE && !w, "  nb_renderer_from_stream: usage");
    ok(nb_renderer_from_stream_opts(bytes, size, NULL, &w) == NB_RESULT_OK && w, "  nb_renderer_from_stream_opts: a renderer");
    ok(nb_render_frame(w, 0, got) == NB_RESULT_USAGE && has("nb_renderer_set_F"),
       "  that renders only with F: %s", nb_last_error());
    h[1] = 0;
    ok(nb_renderer_set_F(w, h, k, l, F, m) == NB_RESULT_OK && nb_render_frame(w, 0, got) == NB_RESULT_OK,
       "  given them, it renders");
    nb_renderer_free(w);
    w = NULL;
    ok(nb_renderer_from_args(NFLAGS(no_F), no_F, NULL, &w) == NB_RESULT_OK && nb_render_frame(w, 0, got) ==
       NB_RESULT_USAGE, "nb_renderer_from_args without -default_F waits for them too");
    nb_renderer_free(w);
    nb_free(bytes);
    free(h), free(k), free(l), free(F), free(got);
}

/* Detector counts of a renderer's frames and of an image */
static void noise(nb_renderer *a, const float *image)
{
    const size_t n = nb_renderer_pixels(a);
    int32_t *c0 = calloc(n, sizeof *c0), *c1 = calloc(n, sizeof *c1), *ci = calloc(n, sizeof *ci);
    nb_options *o = nb_options_new(NB_OPTIONS_NOISE);
    ok(nb_renderer_noise_frame(a, 0, image, NULL, c0) == NB_RESULT_OK, "frame 0's counts, the plan's seed (%s)",
       nb_last_error());
    ok(nb_renderer_noise_frame(a, 0, image, NULL, c1) == NB_RESULT_OK && !memcmp(c0, c1, n * sizeof *c0),
       "  again: the same counts (the renderer's generator untouched)");
    ok(c0[0] == 0 && c0[2 + 40] == 40, "  0 outside the ROI, the ADC offset (40) where no photon is: %d %d", c0[0],
       c0[42]);
    ok(nb_renderer_noise_frame(a, 1, image, NULL, c1) == NB_RESULT_OK && memcmp(c0, c1, n * sizeof *c0),
       "  frame 1's seed is another");
    nb_options_set_int(o, "seed", 3);
    ok(nb_renderer_noise_frame(a, 0, image, o, c1) == NB_RESULT_OK && !memcmp(c0, c1, n * sizeof *c0),
       "  \"seed\" 3: the plan's -seed 3, the same counts");
    nb_options_set_int(o, "seed", 11);
    ok(nb_renderer_noise_frame(a, 0, image, o, c1) == NB_RESULT_OK && memcmp(c0, c1, n * sizeof *c0),
       "  \"seed\" 11: others");
    /* an image is counted as frame 0 of a one-panel plan without an ROI */
    nb_renderer *whole = NULL;
    float *full = calloc(n, sizeof *full);
    ok(nb_renderer_from_args(NFLAGS(flags) - 5, flags, NULL, &whole) == NB_RESULT_OK &&
           nb_render_frame(whole, 0, full) == NB_RESULT_OK &&
           nb_renderer_noise_frame(whole, 0, full, o, c1) == NB_RESULT_OK,
       "the plan without its -roi: frame 0 counted, seed 11");
    ok(nb_noise_image(full, 40, 40, o, ci) == NB_RESULT_OK && !memcmp(c1, ci, n * sizeof *ci),
       "  nb_noise_image of its photons, seed 11: the same counts");
    nb_renderer_free(whole);
    free(full);
    nb_options_set_string(o, "rng", "philox");
    nb_options_set_string(o, "psf", "gauss");
    nb_options_set_int(o, "bits", 32);
    ok(nb_renderer_noise_frame(a, 0, image, o, c1) == NB_RESULT_OK, "philox, a Gaussian PSF, 32 bits (%s)",
       nb_last_error());
    ok(nb_noise_image(image, 40, 40, o, ci) == NB_RESULT_OK, "  and for an image");
    nb_options *fresh = nb_options_new(NB_OPTIONS_NOISE), *render = nb_options_new(NB_OPTIONS_RENDER);
    ok(nb_noise_image(image, 40, 40, fresh, ci) == NB_RESULT_USAGE && has("no seed"), "an image without a seed: usage");
    nb_options_set_double(fresh, "fluence", 1e24);
    nb_options_set_int(fresh, "seed", 1);
    ok(nb_noise_image(image, 40, 40, fresh, ci) == NB_RESULT_USAGE && has("fluence"), "an image's fluence: usage");
    ok(nb_renderer_noise_frame(a, 0, image, fresh, ci) == NB_RESULT_OK, "  a frame's: rescaled");
    nb_options_set_double(o, "pixel_size", 0.2);
    ok(nb_renderer_noise_frame(a, 0, image, o, ci) == NB_RESULT_USAGE && has("pixel_size"),
       "a frame's pixel_size: usage");
    ok(nb_renderer_noise_frame(a, 0, image, render, ci) == NB_RESULT_USAGE, "render options for noise: usage");
    ok(nb_renderer_noise_frame(a, 2, image, NULL, ci) == NB_RESULT_USAGE && has("frame 2"), "frame 2 of 2: usage");
    ok(nb_renderer_noise_frame(a, 0, NULL, NULL, ci) == NB_RESULT_USAGE, "no photons: usage");
    ok(nb_renderer_noise_frame(NULL, 0, image, NULL, ci) == NB_RESULT_USAGE, "no renderer: usage");
    ok(nb_noise_image(image, 0, 40, o, ci) == NB_RESULT_USAGE, "an image of 0 x 40: usage");
    float *bad = malloc(n * sizeof *bad);
    memcpy(bad, image, n * sizeof *bad);
    bad[5 * 40 + 7] = NAN;
    ok(nb_renderer_noise_frame(a, 0, bad, NULL, ci) == NB_RESULT_DATA && has("fast 7, slow 5"),
       "a NaN photon: data, its pixel said: %s", nb_last_error());
    free(bad);
    nb_options_free(o), nb_options_free(fresh), nb_options_free(render);
    free(c0), free(c1), free(ci);
}

/* The plan's named parameters: listed, read, set, refused. */
static void parameters(void)
{
    nb_renderer *r = NULL;
    double v = 0.0;
    ok(nb_parameter_count() >= 32, "the table lists %d parameters", nb_parameter_count());
    int found = 0;
    for (int i = 0; i < nb_parameter_count(); i++) found += !strcmp(nb_parameter_name(i), "panel<i>_rot_normal");
    ok(found == 1 && nb_parameter_name(-1) == NULL && nb_parameter_name(nb_parameter_count()) == NULL,
       "a panel's names are listed as panel<i>_..., nothing beyond the table");
    ok(nb_parameter_unit("distance") && !strcmp(nb_parameter_unit("distance"), "mm") &&
           !strcmp(nb_parameter_unit("panel2_rot_fast"), "degree"), "units by name");
    ok(nb_parameter_unit("colour") == NULL && has("unknown parameter 'colour'"), "an unknown name: %s",
       nb_last_error());
    if (nb_renderer_from_args(NFLAGS(flags), flags, NULL, &r)) {
        ok(0, "a renderer for the parameters: %s", nb_last_error());
        return;
    }
    ok(nb_renderer_get_parameter(r, "distance", &v) == NB_RESULT_OK && fabs(v - 100.0) < 1e-9, "distance reads %g mm",
       v);
    ok(nb_renderer_set_parameter(r, "distance", 120.0) == NB_RESULT_OK &&
           nb_renderer_get_parameter(r, "distance", &v) == NB_RESULT_OK && fabs(v - 120.0) < 1e-9,
       "set to 120 mm, it reads %g", v);
    ok(nb_renderer_set_parameter(r, "panel1_shift_fast", 0.1) == NB_RESULT_USAGE && has("the detector has 1 panel") &&
           nb_renderer_get_parameter(r, "distance", &v) == NB_RESULT_OK && fabs(v - 120.0) < 1e-9,
       "a panel it lacks is refused, the plan as it was: %s", nb_last_error());
    ok(nb_renderer_get_parameter(r, "mosaic", &v) == NB_RESULT_USAGE && has("no mosaic spread"),
       "the mosaic of a plan without a spread: %s", nb_last_error());
    ok(nb_renderer_set_parameter(r, "cell_a", NAN) == NB_RESULT_USAGE, "a value that is not finite is refused");
    ok(nb_renderer_get_parameter(NULL, "distance", &v) == NB_RESULT_USAGE &&
           nb_renderer_get_parameter(r, NULL, &v) == NB_RESULT_USAGE &&
           nb_renderer_set_parameter(NULL, "distance", 1.0) == NB_RESULT_USAGE,
       "NULL renderer or name: usage");
    nb_renderer_free(r);
}

/* nb_fit_renderer: a distance 0.3 mm off found again from noise-free
 * frames; the renderer's plan moved to it; every misuse a code and a
 * message, the plan kept. */
static void fit_arrays(void)
{
    nb_renderer *truth = NULL, *r = NULL;
    ok(!nb_renderer_from_args(NFLAGS(flags), flags, NULL, &truth) && !nb_renderer_from_args(NFLAGS(flags), flags, NULL, &r),
       "two renderers from flags");
    if (!truth || !r) return;
    const size_t n = nb_renderer_pixels(truth);
    float *obs = malloc(2 * n * sizeof *obs);
    ok(obs && !nb_render_frame(truth, 0, obs) && !nb_render_frame(truth, 1, obs + n), "the observed frames rendered");
    ok(!nb_renderer_set_parameter(r, "distance", 100.3), "the start 0.3 mm off");
    nb_fit_image im[2] = {{obs, NULL, 0, 0, 0}, {obs + n, NULL, 0, 0, 0}};
    const char *const names[] = {"distance", "scale"};
    double v[2] = {0, 0}, sg[2] = {0, 0}, d = 0;
    nb_fit_result res = {.size = sizeof res};
    const int fitted = nb_fit_renderer(r, names, 2, im, NULL, v, sg, &res);
    ok(fitted == NB_RESULT_OK, "fitted (%s)", fitted ? nb_last_error() : "ok");
    ok(fabs(v[0] - 100.0) < 1e-3 && fabs(v[1] - 1.0) < 1e-3 && sg[0] > 0, "distance %.6f, scale %.6f, sigma %.2g", v[0],
       v[1], sg[0]);
    const int got = nb_renderer_get_parameter(r, "distance", &d);
    /* to rounding: the setter moves the detector in metres, the getter measures it back in mm */
    ok(!got && fabs(d - v[0]) <= 1e-9 * fabs(v[0]), "the renderer's plan is the fit's: %.9f (fitted %.9f)", d, v[0]);
    const double fitted_distance = d;
    ok(res.pixels > 0 && res.iterations > 0 && res.converged, "%ld pixels, %d iterations, converged", res.pixels,
       res.iterations);
    const char *const unknown[] = {"distance", "wavelength"}, *const twice[] = {"Xbeam", "Xbeam"};
    ok(nb_fit_renderer(r, unknown, 2, im, NULL, v, sg, NULL) == NB_RESULT_USAGE && has("unknown parameter 'wavelength'"),
       "an unknown name: usage, said");
    ok(nb_fit_renderer(r, twice, 2, im, NULL, v, sg, NULL) == NB_RESULT_USAGE && has("named twice"), "a name twice");
    ok(nb_fit_renderer(NULL, names, 2, im, NULL, v, sg, NULL) == NB_RESULT_USAGE, "no renderer: usage");
    ok(nb_fit_renderer(r, names, 0, im, NULL, v, sg, NULL) == NB_RESULT_USAGE, "no name: usage");
    ok(nb_fit_renderer(r, names, 2, NULL, NULL, v, sg, NULL) == NB_RESULT_USAGE, "no images: usage");
    nb_fit_image one[2] = {{obs, NULL, 0, 0, 0}, {NULL, NULL, 0, 0, 0}};
    ok(nb_fit_renderer(r, names, 2, one, NULL, v, sg, NULL) == NB_RESULT_USAGE && has("frame 1 has no pixels"),
       "a frame without pixels in one process: usage, said");
    nb_fit_settings s;
    nb_fit_settings_init(&s);
    s.processes = 2;
    ok(nb_fit_renderer(r, names, 2, im, &s, v, sg, NULL) == NB_RESULT_USAGE && has("no sum"),
       "two processes without a sum: usage, said");
    nb_fit_settings_init(&s);
    s.size = sizeof s + 8;
    ok(nb_fit_renderer(r, names, 2, im, &s, v, sg, NULL) == NB_RESULT_USAGE && has("size"), "settings too big: usage");
    nb_fit_settings_init(&s);
    s.iterations = 0;
    ok(nb_fit_renderer(r, names, 2, im, &s, v, sg, NULL) == NB_RESULT_USAGE && has("iterations 0"), "0 iterations");
    nb_fit_image bad[2] = {{obs, NULL, -1, 0, 0}, {obs + n, NULL, 0, 0, 0}};
    ok(nb_fit_renderer(r, names, 2, bad, NULL, v, sg, NULL) == NB_RESULT_USAGE && has("gain -1"), "a gain of -1");
    unsigned char *none = calloc(n, 1);
    nb_fit_image masked[2] = {{obs, none, 0, 0, 0}, {obs + n, NULL, 0, 0, 0}};
    ok(none && nb_fit_renderer(r, names, 2, masked, NULL, v, sg, NULL) == NB_RESULT_USAGE &&
           has("every pixel is left out"), "a frame masked whole: usage, said");
    const char *const mosaic[] = {"mosaic"};
    ok(nb_fit_renderer(r, mosaic, 1, im, NULL, v, sg, NULL) != NB_RESULT_OK, "the mosaic of a plan without a spread");
    d = 0;
    ok(!nb_renderer_get_parameter(r, "distance", &d) && d == fitted_distance, "the plan kept after the refusals");
    free(none), free(obs);
    nb_renderer_free(truth), nb_renderer_free(r);
}

/* nb_fit_dataset_renderer's refusals: every misuse a code and a message */
static void fit_dataset_refusals(void)
{
    nb_renderer *r = NULL;
    ok(!nb_renderer_from_args(NFLAGS(flags), flags, NULL, &r), "a renderer from flags");
    if (!r) return;
    const size_t n = nb_renderer_pixels(r);
    float *obs = calloc(2 * n, sizeof *obs);
    nb_fit_image im[2] = {{obs, NULL, 0, 0, 0}, {obs + n, NULL, 0, 0, 0}};
    nb_fit_dataset_settings s;
    nb_fit_dataset_settings_init(&s);
    nb_fit_dataset *f = NULL;
    ok(nb_fit_dataset_renderer(r, im, &s, &f) == NB_RESULT_USAGE && has("nothing to refine") && !f,
       "nothing to refine: usage, said");
    s.refine_frame = "misset_x";
    ok(nb_fit_dataset_renderer(r, im, &s, &f) == NB_RESULT_USAGE && has("misset_x"), "misset_x per frame: usage, said");
    s.refine_frame = "rot_x";
    ok(nb_fit_dataset_renderer(r, NULL, &s, &f) == NB_RESULT_USAGE, "no images: usage");
    ok(nb_fit_dataset_renderer(r, im, NULL, &f) == NB_RESULT_USAGE && has("no settings"), "no settings: usage");
    s.symmetry = NULL, s.nops = 0, s.processes = 2;
    ok(nb_fit_dataset_renderer(r, im, &s, &f) == NB_RESULT_USAGE && has("no sum"), "two processes, no sum: usage");
    nb_fit_dataset_settings_init(&s);
    s.refine_frame = "rot_x";
    const int ops[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
    s.symmetry = ops, s.nops = 0;
    ok(nb_fit_dataset_renderer(r, im, &s, &f) == NB_RESULT_USAGE && has("symmetry operators"), "0 operators: usage");
    nb_fit_dataset_settings_init(&s);
    s.refine_frame = "scale", s.spots = "/nonexistent/strong.refl";
    ok(nb_fit_dataset_renderer(r, im, &s, &f) == NB_RESULT_IO && has("cannot open '/nonexistent/strong.refl'") && !f,
       "a missing spots table: I/O, named (%s)", nb_last_error());
    ok(nb_fit_dataset_value(NULL, 0, "rot_x", NULL, NULL) == NB_RESULT_USAGE, "no result: usage");
    ok(nb_fit_dataset_verdict(NULL, 0, NULL) == -1, "no result: no verdict");
    nb_fit_dataset_free(NULL);
    free(obs);
    nb_renderer_free(r);
}

int main(void)
{
    nb_set_log_level(-1);
    version();
    options();
    float *image = NULL;
    nb_renderer *a = from_flags(&image);
    flag_refusals();
    image_files(a, image);
    noise(a, image);
    structure_factors(a, image);
    parameters();
    fit_arrays();
    fit_dataset_refusals();
    ok(nb_renderer_frames(NULL) == 0 && nb_renderer_pixels(NULL) == 0, "no renderer: no frames, no pixels");
    ok(nb_render_frame(NULL, 0, image) == NB_RESULT_USAGE, "no renderer: usage");
    nb_renderer_free(a);
    free(image);
    return tap_done();
}
