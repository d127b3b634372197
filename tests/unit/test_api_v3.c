/* test_api_v3.c - the public API's third part (engine/nb.h, "API 3"), through
 * nb.h alone as a program sees it: a renderer's options reset, the double
 * path's pixels and derivatives in double, and the vector-Jacobian product;
 * each against API 1's float renders, every misuse a code and a message.
 * (The Python package over them: tests/python.) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb.h"
#include "tap.h"

#define NFLAGS(a) ((int)(sizeof a / sizeof a[0]))
#define NAMES "distance,Xbeam,misset_y,cell_b,mosaic,lambda,Na,cell_gamma,Ybeam" /* 9: two dual passes */
enum { NNAMES = 9 };

/* triclinic, misset, mosaic; two frames of a rotation; an ROI */
static const char *const flags[] = {"-cell", "70", "80", "90", "80", "95", "100", "-misset", "10", "20", "30",
                                    "-lambda", "1", "-N", "5", "-mosaic", "0.5", "-mosaic_domains", "3",
                                    "-distance", "100", "-detpixels_x", "24", "-detpixels_y", "20", "-pixel",
                                    "0.4", "-oversample", "1", "-seed", "3", "-osc", "0.5", "-nframes", "2",
                                    "-default_F", "100", "-roi", "2", "21", "1", "18"};

static int has(const char *what)
{
    return strstr(nb_last_error(), what) != NULL;
}

static nb_renderer *make(const char *precision)
{
    nb_options *o = nb_options_new(NB_OPTIONS_RENDER);
    nb_options_set_string(o, "precision", precision);
    nb_renderer *r = NULL;
    int st = nb_renderer_from_args(NFLAGS(flags), flags, o, &r);
    nb_options_free(o);
    ok(st == NB_RESULT_OK, "a renderer of precision %s (%s)", precision, st ? nb_last_error() : "ok");
    return r;
}

/* The double path's pixels in double round to its float render (r's precision
 * double); derivatives likewise. */
static void doubles(nb_renderer *r, size_t n)
{
    float *f = calloc(n, sizeof *f), *fg[NNAMES];
    double *d = calloc(n, sizeof *d), *dg[NNAMES];
    for (int j = 0; j < NNAMES; j++) fg[j] = calloc(n, sizeof(float)), dg[j] = calloc(n, sizeof(double));
    ok(nb_renderer_set_derivatives(r, NAMES) == NB_RESULT_OK, "nine derivatives");
    for (long frame = 0; frame < 2; frame++) {
        ok(nb_render_frame_double(r, frame, d) == NB_RESULT_OK, "frame %ld in double", frame);
        ok(nb_render_frame(r, frame, f) == NB_RESULT_OK, "frame %ld in float", frame);
        size_t differ = 0, wider = 0;
        for (size_t p = 0; p < n; p++) differ += (float)d[p] != f[p], wider += d[p] != (double)f[p];
        ok(differ == 0, "frame %ld: the doubles round to the float image (%zu differ)", frame, differ);
        ok(wider > n / 4, "frame %ld: they carry more than float's bits (%zu of %zu)", frame, wider, n);
        ok(nb_render_frame_grad_double(r, frame, d, dg) == NB_RESULT_OK, "frame %ld: derivatives in double", frame);
        ok(nb_render_frame_grad(r, frame, f, fg) == NB_RESULT_OK, "frame %ld: derivatives in float", frame);
        for (int j = 0; j < NNAMES; j++) {
            size_t bad = 0;
            for (size_t p = 0; p < n; p++) bad += (float)dg[j][p] != fg[j][p];
            ok(bad == 0, "frame %ld, derivative %d: the doubles round to the floats (%zu differ)", frame, j, bad);
        }
        size_t bad = 0;
        for (size_t p = 0; p < n; p++) bad += (float)d[p] != f[p];
        ok(bad == 0, "frame %ld: the image beside them too", frame);
    }
    for (int j = 0; j < NNAMES; j++) free(fg[j]), free(dg[j]);
    free(f);
    free(d);
}

/* vjp[j] = sum w x dI/dp_j, for the double path in double and the renderer's own in float. */
static void products(nb_renderer *r, size_t n)
{
    double *w = calloc(n, sizeof *w), *dg[NNAMES], vjp[NNAMES], again[NNAMES];
    float *fg[NNAMES];
    for (size_t p = 0; p < n; p++) w[p] = sin(0.37 * (double)p) + 0.25;
    for (int j = 0; j < NNAMES; j++) fg[j] = calloc(n, sizeof(float)), dg[j] = calloc(n, sizeof(double));
    ok(nb_renderer_set_derivatives(r, NAMES) == NB_RESULT_OK, "nine derivatives on the fast renderer");
    ok(nb_render_frame_grad_double(r, 1, NULL, dg) == NB_RESULT_OK, "frame 1: derivatives in double, no image");
    ok(nb_render_frame_vjp(r, 1, NB_PRECISION_DOUBLE, w, vjp) == NB_RESULT_OK, "frame 1: the product, double");
    for (int j = 0; j < NNAMES; j++) {
        double want = 0.0;
        for (size_t p = 0; p < n; p++) want += w[p] * dg[j][p];
        near(vjp[j], want, 1e-12, "derivative %d: the product is the weighed sum (%.17g, %.17g)", j, vjp[j], want);
    }
    ok(nb_render_frame_grad(r, 1, NULL, fg) == NB_RESULT_OK, "frame 1: derivatives in float");
    /* the tangent passes: the derivative images' own floats, weighed in the rows */
    setenv("NB_VJP", "tangents", 1);
    ok(nb_render_frame_vjp(r, 1, NB_PRECISION_PLAN, w, vjp) == NB_RESULT_OK, "frame 1: the product, the renderer's");
    for (int j = 0; j < NNAMES; j++) {
        double want = 0.0;
        for (size_t p = 0; p < n; p++) want += w[p] * (double)fg[j][p];
        near(vjp[j], want, 1e-12, "derivative %d: the float product is the floats' sum in double", j);
    }
    /* the adjoint sweep (nine names: the default): the same sum to float's rounding of its terms */
    unsetenv("NB_VJP");
    ok(nb_render_frame_vjp(r, 1, NB_PRECISION_PLAN, w, vjp) == NB_RESULT_OK, "frame 1: the product by the sweep");
    for (int j = 0; j < NNAMES; j++) {
        double want = 0.0, size = 0.0;
        for (size_t p = 0; p < n; p++) want += w[p] * (double)fg[j][p], size += fabs(w[p] * (double)fg[j][p]);
        ok(fabs(vjp[j] - want) <= 1e-5 * size, "derivative %d: the sweep's product is the floats' sum (%.9g, %.9g, of %.3g)",
           j, vjp[j], want, size);
    }
    setenv("NB_VJP", "both", 1);
    ok(nb_render_frame_vjp(r, 1, NB_PRECISION_PLAN, w, vjp) == NB_RESULT_USAGE && has("NB_VJP=both"),
       "NB_VJP=both: usage, said: %s", nb_last_error());
    unsetenv("NB_VJP");
    nb_options *one = nb_options_new(NB_OPTIONS_RENDER), *two = nb_options_new(NB_OPTIONS_RENDER);
    nb_options_set_int(one, "threads", 1);
    nb_options_set_int(two, "threads", 2);
    ok(nb_renderer_set_options(r, one) == NB_RESULT_OK, "one thread");
    nb_render_frame_vjp(r, 1, NB_PRECISION_DOUBLE, w, vjp);
    ok(nb_renderer_set_options(r, two) == NB_RESULT_OK, "two threads");
    nb_render_frame_vjp(r, 1, NB_PRECISION_DOUBLE, w, again);
    ok(!memcmp(vjp, again, sizeof vjp), "the product is the same on one thread and two");
    /* the fast path forms it in its rows, which the threads share out */
    ok(nb_renderer_set_options(r, one) == NB_RESULT_OK, "one thread again");
    nb_render_frame_vjp(r, 1, NB_PRECISION_FAST, w, vjp);
    ok(nb_renderer_set_options(r, two) == NB_RESULT_OK, "two threads again");
    nb_render_frame_vjp(r, 1, NB_PRECISION_FAST, w, again);
    ok(!memcmp(vjp, again, sizeof vjp), "the fast path's product is the same on one thread and two (the sweep)");
    setenv("NB_VJP", "tangents", 1);
    ok(nb_renderer_set_options(r, one) == NB_RESULT_OK, "one thread, the tangent passes");
    nb_render_frame_vjp(r, 1, NB_PRECISION_FAST, w, vjp);
    ok(nb_renderer_set_options(r, two) == NB_RESULT_OK, "two threads, the tangent passes");
    nb_render_frame_vjp(r, 1, NB_PRECISION_FAST, w, again);
    unsetenv("NB_VJP");
    ok(!memcmp(vjp, again, sizeof vjp), "the tangent passes' product is the same on one thread and two");
    nb_options_free(one);
    nb_options_free(two);
    for (int j = 0; j < NNAMES; j++) free(fg[j]), free(dg[j]);
    free(w);
}

/* nb_renderer_set_options: the precision switches the path of nb_render_frame. */
static void options_reset(nb_renderer *fast, nb_renderer *dbl, size_t n)
{
    float *a = calloc(n, sizeof *a), *b = calloc(n, sizeof *b);
    nb_options *o = nb_options_new(NB_OPTIONS_RENDER);
    nb_options_set_string(o, "precision", "double");
    nb_render_frame(dbl, 0, b);
    ok(nb_renderer_set_options(fast, o) == NB_RESULT_OK, "precision double, set on a fast renderer");
    nb_render_frame(fast, 0, a);
    ok(!memcmp(a, b, n * sizeof *a), "it renders the double renderer's image");
    ok(nb_renderer_set_options(fast, NULL) == NB_RESULT_OK, "NULL: the defaults again");
    nb_render_frame(fast, 0, a);
    ok(memcmp(a, b, n * sizeof *a) != 0, "the plan's precision again: the fast path's image");
    nb_options *noise = nb_options_new(NB_OPTIONS_NOISE);
    ok(nb_renderer_set_options(fast, noise) == NB_RESULT_USAGE && has("noise options"),
       "noise options: usage, said: %s", nb_last_error());
    ok(nb_renderer_set_options(NULL, o) == NB_RESULT_USAGE, "no renderer: usage");
    nb_options_free(noise);
    nb_options_free(o);
    free(a);
    free(b);
}

static void refusals(nb_renderer *r, size_t n)
{
    double *d = calloc(n, sizeof *d), vjp[NNAMES];
    double *none[NNAMES] = {NULL};
    ok(nb_render_frame_double(r, 2, d) == NB_RESULT_USAGE && has("frame 2"), "frame 2 of 2: usage, said");
    ok(nb_render_frame_double(r, 0, NULL) == NB_RESULT_USAGE && has("no buffer"), "no buffer: usage, said");
    ok(nb_render_frame_grad_double(r, 0, d, none) == NB_RESULT_USAGE && has("derivative 0"),
       "no derivative buffers: usage, said: %s", nb_last_error());
    ok(nb_render_frame_vjp(r, 0, NB_PRECISION_DOUBLE, NULL, vjp) == NB_RESULT_USAGE && has("no weights"),
       "no weights: usage, said");
    ok(nb_render_frame_vjp(r, 0, (nb_precision_choice)7, d, vjp) == NB_RESULT_USAGE && has("precision 7"),
       "precision 7: usage, said");
    nb_renderer_set_derivatives(r, NULL);
    ok(nb_render_frame_vjp(r, 0, NB_PRECISION_DOUBLE, d, vjp) == NB_RESULT_USAGE && has("no derivatives named"),
       "no derivatives named: usage, said: %s", nb_last_error());
    nb_options *o = nb_options_new(NB_OPTIONS_RENDER);
    nb_options_set_string(o, "device", "cuda");
    if (nb_renderer_set_options(r, o) == NB_RESULT_OK && nb_render_frame(r, 0, (float *)d) == NB_RESULT_OK) {
        ok(nb_render_frame_double(r, 0, d) == NB_RESULT_UNSUPPORTED && has("on the CPU"),
           "on a GPU: pixels in double unsupported, said: %s", nb_last_error());
    } else {
        ok(strlen(nb_last_error()) > 0, "no GPU here: device cuda refused at the render, said: %s", nb_last_error());
    }
    nb_options_free(o);
    free(d);
}

int main(void)
{
    nb_set_log_level(-1);
    ok(NB_API_VERSION >= 3, "NB_API_VERSION %d", NB_API_VERSION);
    nb_renderer *fast = make("plan"), *dbl = make("double");
    if (!fast || !dbl) return tap_done();
    const size_t n = nb_renderer_pixels(fast);
    doubles(dbl, n);
    products(fast, n);
    options_reset(fast, dbl, n);
    refusals(dbl, n);
    nb_renderer_free(fast);
    nb_renderer_free(dbl);
    return tap_done();
}
