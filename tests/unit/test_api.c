/* test_api.c - the engine's public API (engine/nb.h): a renderer from a
 * stream's bytes and from the structures agree; regions are the panel's
 * pixels; derivatives are nb_render_grads'; every misuse is a code and a
 * message, never an exit.  (The bytes against nb-sim's: tests/cli/library.bats.) */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nb.h"
#include "nb_args.h"
#include "nb_geometry.h"
#include "nb_plan.h"
#include "nb_stream.h"
#include "nb_util.h"
#include "plan_words.h"
#include "tap.h"

/* A stream of the PLAN record (and its END), as nb-geom writes it. */
static nb_status plan_bytes(const nb_plan *plan, unsigned char **buf, size_t *len)
{
    char path[] = "/tmp/test_api.XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return nb_error_set(NB_ERR_IO, "mkstemp failed");
    close(fd);
    nb_record rec;
    nb_writer *w = NULL;
    nb_status st = nb_plan_to_record(plan, &rec);
    if (!st) st = nb_writer_open(&w, path);
    if (!st) st = nb_writer_put(w, &rec);
    if (!st) st = nb_writer_end(w);
    if (!st) st = nb_writer_close(w);
    nb_record_free(&rec);
    FILE *fp = st ? NULL : fopen(path, "rb");
    if (fp) {
        fseek(fp, 0, SEEK_END);
        *len = (size_t)ftell(fp);
        rewind(fp);
        *buf = malloc(*len);
        if (!*buf || fread(*buf, 1, *len, fp) != *len) st = nb_error_set(NB_ERR_IO, "cannot read %s back", path);
        fclose(fp);
    }
    unlink(path);
    return st;
}

static int same_floats(const float *a, const float *b, size_t n)
{
    return memcmp(a, b, n * sizeof *a) == 0;
}

static void regions_are_the_panels_pixels(nb_renderer *r, const float *image, int fp, int sp)
{
    /* two regions, one at the panel's edge, one overlapping it */
    const nb_region g[3] = {{0, 0, 0, 7, 5}, {0, fp - 9, sp - 4, 9, 4}, {0, 3, 2, 10, 6}};
    float out[7 * 5 + 9 * 4 + 10 * 6];
    ok(nb_render_regions(r, 0, g, 3, out) == NB_RESULT_OK, "three regions render (%s)", nb_last_error());
    int same = 1;
    size_t at = 0;
    for (int k = 0; k < 3; k++)
        for (int y = 0; y < g[k].slow_count; y++)
            for (int x = 0; x < g[k].fast_count; x++, at++)
                same &= out[at] == image[(size_t)(g[k].slow + y) * fp + g[k].fast + x];
    ok(same, "each region's pixels are the panel's own, bit for bit");
    const nb_region outside = {0, fp - 2, 0, 3, 1}, no_panel = {1, 0, 0, 1, 1};
    ok(nb_render_regions(r, 0, &outside, 1, out) == NB_RESULT_USAGE, "a region past the panel's edge: usage");
    ok(strstr(nb_last_error(), "not inside panel 0") != NULL, "  says so: %s", nb_last_error());
    ok(nb_render_regions(r, 0, &no_panel, 1, out) == NB_RESULT_USAGE, "a region on a panel that is not there: usage");
    ok(nb_render_regions(r, 0, g, 0, NULL) == NB_RESULT_OK, "no region: nothing to do");
    /* the regions' render narrows its own copy of the panel's ROI and mask,
     * never the plan's (a view shares the plan's panels) */
    float *again = calloc((size_t)fp * sp, sizeof *again);
    ok(again && nb_render_frame(r, 0, again) == NB_RESULT_OK && same_floats(again, image, (size_t)fp * sp),
       "after the regions, the whole panel renders as before, bit for bit");
    free(again);
}

int main(void)
{
    nb_set_verbosity(-1);
    nb_plan plan;
    nb_plan_init(&plan);
    nb_status st = build_plan("-cell 70 80 90 80 95 100 -misset 10 20 30 -lambda 1 -N 5 -mosaic 0.5 "
                              "-mosaic_domains 3 -distance 100 -detpixels 48 -pixel 0.4 -default_F 100 -oversample 1 "
                              "-osc 0.5 -nframes 2",
                              &plan);
    ok(!st, "the plan resolves (%s)", st ? nb_error_message() : "");
    if (st) return tap_done();
    unsigned char *bytes = NULL;
    size_t len = 0;
    ok(!plan_bytes(&plan, &bytes, &len), "its PLAN record serialises");

    nb_render_config c;
    nb_render_config_init(&c);
    ok(c.device == NB_DEVICE_CPU && c.precision == NB_PRECISION_PLAN && c.threads == 0, "the defaults: CPU, plan's");
    nb_renderer *a = NULL, *b = NULL;
    ok(nb_renderer_from_stream(bytes, len, &c, &a) == NB_RESULT_OK, "a renderer from the stream's bytes (%s)", nb_last_error());
    ok(nb_renderer_from_plan(&plan, NULL, &c, &b) == NB_RESULT_OK, "a renderer from the structures");
    if (!a || !b) return tap_done();
    int fp = 0, sp = 0;
    ok(nb_renderer_frames(a) == 2 && nb_renderer_panels(a) == 1, "two frames, one panel");
    ok(nb_renderer_panel_size(a, 0, &fp, &sp) == NB_RESULT_OK && fp == 48 && sp == 48, "48 x 48 pixels");
    const size_t n = nb_renderer_pixels(a);
    float *ia = calloc(n, sizeof *ia), *ib = calloc(n, sizeof *ib), *i1 = calloc(n, sizeof *i1);
    ok(nb_render_frame(a, 0, ia) == NB_RESULT_OK && nb_render_frame(b, 0, ib) == NB_RESULT_OK, "both render frame 0");
    ok(same_floats(ia, ib, n), "the same pixels, bit for bit");
    float peak = 0;
    for (size_t i = 0; i < n; i++) peak = ia[i] > peak ? ia[i] : peak;
    ok(peak > 0, "the image has photons (max %g)", peak);
    ok(nb_render_panel(a, 1, 0, i1) == NB_RESULT_OK && !same_floats(ia, i1, n), "frame 1 is another image");
    regions_are_the_panels_pixels(a, ia, fp, sp);

    /* derivatives: d/d distance by the API, against a central difference of two renders */
    ok(nb_renderer_set_derivatives(a, "distance,nonsense") == NB_RESULT_USAGE, "an unknown name: usage");
    ok(nb_renderer_set_derivatives(a, "distance") == NB_RESULT_OK && nb_renderer_derivatives(a) == 1,
       "one derivative named");
    float *g = calloc(n, sizeof *g), *ig = calloc(n, sizeof *ig);
    float *grads[1] = {g};
    ok(nb_render_frame_grad(a, 0, ig, grads) == NB_RESULT_OK, "the image and d/d distance (%s)", nb_last_error());
    double gsum = 0;
    for (size_t i = 0; i < n; i++) gsum += fabs(g[i]);
    ok(gsum > 0, "the derivative is not zero");
    ok(nb_render_frame_grad(a, 0, NULL, grads) == NB_RESULT_OK, "the derivative without the image");

    /* misuse */
    ok(nb_render_frame(a, 2, ia) == NB_RESULT_USAGE, "frame 2 of 2: usage");
    ok(strstr(nb_last_error(), "frame 2") != NULL, "  says which: %s", nb_last_error());
    ok(nb_render_panel(a, 0, 1, ia) == NB_RESULT_USAGE, "panel 1 of 1: usage");
    ok(nb_render_frame(a, 0, NULL) == NB_RESULT_USAGE, "no buffer: usage");
    nb_renderer *bad = NULL;
    ok(nb_renderer_from_stream("garbage", 7, &c, &bad) == NB_RESULT_DATA && !bad, "bytes that are no stream: data");
    c.device = (nb_device_choice)7;
    ok(nb_renderer_from_stream(bytes, len, &c, &bad) == NB_RESULT_USAGE && !bad, "an unknown device: usage");
    ok(strlen(nb_version()) > 0, "a version: %s", nb_version());

    nb_renderer_free(a);
    nb_renderer_free(b);
    free(ia), free(ib), free(i1), free(g), free(ig);
    free(bytes);
    nb_plan_free(&plan);
    return tap_done();
}
