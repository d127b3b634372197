/* abi_v1.c - a program of nb 0.1.0's API, compiled against that nb.h
 * (tests/abi/nb_v1.h, a verbatim copy) and run against today's libnb.so
 * (tests/cli/api.bats): every one of API 1's 17 functions and
 * nb_render_config's layout must keep working for it.  An nb stream (PLAN,
 * HKL) on standard input; frame 0's photons on standard output (nb-sim's
 * image); every other check said on standard error, any failure exit 1. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_v1.h"

#if NB_API_VERSION != 1
#error "compiled against API 1's header only"
#endif

_Static_assert(sizeof(nb_render_config) == 3 * sizeof(int), "API 1's nb_render_config");
_Static_assert(offsetof(nb_render_config, threads) == 2 * sizeof(int), "API 1's nb_render_config");
_Static_assert(sizeof(nb_region) == 5 * sizeof(int), "API 1's nb_region");

static int failures;

static void check(int ok, const char *what)
{
    fprintf(stderr, "%s: %s\n", ok ? "ok" : "FAILED", what);
    if (!ok) {
        fprintf(stderr, "  (nb_last_error: %s)\n", nb_last_error());
        failures++;
    }
}

static unsigned char *read_all(FILE *fp, size_t *size)
{
    size_t cap = 1 << 16, n = 0;
    unsigned char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, fp);
        if (n < cap) break;
        unsigned char *bigger = realloc(buf, cap *= 2);
        if (!bigger) free(buf);
        buf = bigger;
    }
    *size = n;
    return buf;
}

/* panel 0's pixels by nb_render_panel, a rectangle of them by
 * nb_render_regions, the frame's and its derivative by nb_render_frame_grad:
 * each the frame's own pixels */
static void check_parts(nb_renderer *r, const float *image)
{
    int fast = 0, slow = 0;
    check(nb_renderer_panel_size(r, 0, &fast, &slow) == NB_RESULT_OK && fast > 4 && slow > 3, "panel 0's size");
    float *panel = malloc((size_t)fast * slow * sizeof *panel);
    check(panel && nb_render_panel(r, 0, 0, panel) == NB_RESULT_OK, "nb_render_panel");
    check(panel && !memcmp(panel, image, (size_t)fast * slow * sizeof *panel), "  panel 0 is the frame's");
    const nb_region g = {0, 1, 2, 3, 2};
    float part[6];
    check(nb_render_regions(r, 0, &g, 1, part) == NB_RESULT_OK, "nb_render_regions");
    int same = 1;
    for (int y = 0; y < 2; y++)
        for (int x = 0; x < 3; x++) same &= part[y * 3 + x] == image[(size_t)(2 + y) * fast + 1 + x];
    check(same, "  the region's pixels are the frame's");
    size_t n = nb_renderer_pixels(r);
    float *again = malloc(n * sizeof *again), *grad = malloc(n * sizeof *grad);
    float *grads[1] = {grad};
    check(nb_renderer_set_derivatives(r, "distance") == NB_RESULT_OK && nb_renderer_derivatives(r) == 1,
          "nb_renderer_set_derivatives, nb_renderer_derivatives");
    check(again && grad && nb_render_frame_grad(r, 0, again, grads) == NB_RESULT_OK, "nb_render_frame_grad");
    check(nb_renderer_set_derivatives(r, "no_such_name") == NB_RESULT_USAGE, "  an unknown name: usage");
    check(nb_renderer_set_derivatives(r, NULL) == NB_RESULT_OK && nb_renderer_derivatives(r) == 0, "  none");
    free(panel);
    free(again);
    free(grad);
}

int main(void)
{
    nb_set_log_level(-1);
    check(nb_version() && strchr(nb_version(), '.') != NULL, "nb_version");
    size_t size = 0;
    unsigned char *bytes = read_all(stdin, &size);
    nb_render_config c;
    memset(&c, 0xff, sizeof c);
    nb_render_config_init(&c);
    check(c.device == NB_DEVICE_CPU && c.precision == NB_PRECISION_PLAN && c.threads == 0, "nb_render_config_init");
    c.threads = 2;
    nb_renderer *r = NULL;
    check(bytes && nb_renderer_from_stream(bytes, size, &c, &r) == NB_RESULT_OK && r, "nb_renderer_from_stream");
    free(bytes);
    if (!r) return 1;
    check(nb_renderer_frames(r) == 1 && nb_renderer_panels(r) == 1, "nb_renderer_frames, nb_renderer_panels");
    size_t n = nb_renderer_pixels(r);
    float *image = malloc(n * sizeof *image);
    check(image && nb_render_frame(r, 0, image) == NB_RESULT_OK, "nb_render_frame");
    check(nb_render_frame(r, 1, image) == NB_RESULT_USAGE && strstr(nb_last_error(), "frame 1"),
          "  frame 1 of 1: usage, said");
    if (image) check_parts(r, image);
    nb_renderer *none = (nb_renderer *)&c;
    check(nb_renderer_from_plan(NULL, NULL, &c, &none) == NB_RESULT_USAGE && none == NULL,
          "nb_renderer_from_plan without a plan: usage, no renderer");
    c.device = (nb_device_choice)7;
    check(nb_renderer_from_stream("x", 1, &c, &none) != NB_RESULT_OK && none == NULL, "a bad stream: refused");
    if (image && fwrite(image, sizeof *image, n, stdout) != n) failures++;
    free(image);
    nb_renderer_free(r);
    nb_renderer_free(NULL);
    return failures ? 1 : 0;
}
