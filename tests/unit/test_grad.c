/* Unit tests of nb-sim --grad's derivatives (engine/nb_sim_grad.c and the
 * dual pixel of engine/physics/nb_physics_dual.h): on configurations covering
 * mosaic, oversampling with -oversample_omega/polar/thick, divergence and
 * dispersion, a curved detector, tilted and two-theta detectors, absorption
 * layers, tricubic F and the round and Gaussian crystals, the derivative of
 * every name agrees with a five-point central difference of the double
 * path's pixels (correlation >= 0.99999, norms within 1e-4), and the dual
 * pixel's value is the double path's, bit for bit.  The fast path's
 * derivatives (nb_render_cpu_fast_grad) agree with a five-point difference
 * of the fast path's images (correlation >= 0.999, norms within 1 %), and
 * its image is the fast kernel's; the GPU's fast derivatives
 * (nb_pixel_fast_grad: the same terms and slopes one pixel at a time, host
 * and device code, run here on the host) agree with the CPU's. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nb_geometry.h"
#include "nb_sim_grad.h"
#include "plan_words.h"
#include "tap.h"

#define diag(...) (printf("#   "), printf(__VA_ARGS__), printf("\n"))

#define BASE_NAMES                                                                                                   \
    "distance,Xbeam,Ybeam,detector_rotx,detector_roty,detector_rotz,twotheta,cell_a,cell_b,cell_c,cell_alpha,"       \
    "cell_beta,cell_gamma,misset_x,misset_y,misset_z,Na,Nb,Nc,lambda,fluence"
/* the parameters of no nb-geom flag: turns of the crystal, the image's
 * scale, the one panel's moves */
#define PLAN_NAMES                                                                                                   \
    "rot_x,rot_y,rot_z,scale,panel0_shift_fast,panel0_shift_slow,panel0_shift_normal,panel0_rot_fast,"              \
    "panel0_rot_slow,panel0_rot_normal"
#define CRYSTAL "-cell 40 50 60 88 95 91 -misset 10 20 30 -lambda 1.0 -N 4 -default_F 100 -oversample 1 "
#define DETECTOR "-distance 60 -detpixels 20 -pixel 1.2 "

static const struct config {
    const char *what, *args, *names;
    int grid;  /* a smooth F grid and -interpolate */
    int vs_double; /* the fast path's derivatives are compared with the double path's, not with a
                      difference of float images: where F_latt jumps at half-integer indices (the
                      Gaussian crystal of a skew cell: a step float images resolve crosses jumps), and
                      where the pattern is too sharp for that step (large cell, N 8 on 4 mm pixels:
                      the five-point difference at 0.1 mm is off by 5 %; at 0.02 mm it agrees) */
} configs[] = {
    {"mosaic", CRYSTAL DETECTOR "-mosaic 0.8 -mosaic_domains 3 -mosaic_seed 7", BASE_NAMES ",mosaic", 0, 0},
    {"oversampled with -oversample_omega/polar/thick",
     CRYSTAL DETECTOR "-oversample 2 -oversample_omega -oversample_polar -oversample_thick -detector_thick 300 "
                      "-detector_abs 200 -detector_thicksteps 2",
     BASE_NAMES, 0, 0},
    {"divergence and dispersion",
     CRYSTAL DETECTOR "-hdivrange 0.2 -vdivrange 0.2 -hdivstep 0.1 -vdivstep 0.1 -dispersion 2 -dispsteps 3",
     BASE_NAMES, 0, 0},
    {"curved detector", CRYSTAL "-curved_det " DETECTOR, BASE_NAMES, 0, 0},
    {"tilted detector", CRYSTAL DETECTOR "-detector_rotx 3 -detector_roty -4 -detector_rotz 5", BASE_NAMES, 0, 0},
    {"two-theta detector", CRYSTAL DETECTOR "-twotheta 12", BASE_NAMES, 0, 0},
    {"absorption layers", CRYSTAL DETECTOR "-detector_thick 200 -detector_abs 300 -detector_thicksteps 3", BASE_NAMES,
     0, 0},
    {"tricubic F", CRYSTAL DETECTOR "-interpolate", BASE_NAMES, 1, 0},
    {"round crystal, Kahn polarization", CRYSTAL DETECTOR "-round_xtal -polar 0.9", BASE_NAMES, 0, 0},
    {"Gaussian crystal, xds convention", CRYSTAL DETECTOR "-gauss_xtal -xds", BASE_NAMES, 0, 1},
    {"the plan's own parameters, tilted detector", CRYSTAL DETECTOR "-detector_rotx 3 -detector_roty -4 -twotheta 7",
     PLAN_NAMES, 0, 0},
    {"the plan's own parameters, dials convention", CRYSTAL DETECTOR "-dials -detector_rotz 5 -mosaic 0.5 "
     "-mosaic_domains 2", PLAN_NAMES ",mosaic,distance,Xbeam,Ybeam", 0, 0},
    {"larger cell, N 8, to 35 degrees (the speed benchmark's crystal)",
     "-cell 70 80 90 88 95 91 -misset 10 5 3 -lambda 1 -N 8 -default_F 100 -distance 150 -detpixels 48 -pixel 4 "
     "-mosaic 0.2 -mosaic_domains 4 -oversample 2",
     "distance,Xbeam,Ybeam,misset_x,misset_y,misset_z,cell_a,cell_gamma,mosaic,lambda", 0, 1},
    /* the cube's grating slope: one polynomial up to N 10, the recurrence above */
    {"N 10, the largest cube whose slope is one polynomial",
     "-cell 40 50 60 88 95 91 -misset 10 20 30 -lambda 1.0 -N 10 -default_F 100 -oversample 2 " DETECTOR
     "-mosaic 0.3 -mosaic_domains 2",
     "distance,Xbeam,misset_y,cell_b,Na,mosaic", 0, 1},
    {"N 12, a cube whose slope is the recurrence's",
     "-cell 40 50 60 88 95 91 -misset 10 20 30 -lambda 1.0 -N 12 -default_F 100 -oversample 2 " DETECTOR
     "-mosaic 0.3 -mosaic_domains 2",
     "distance,Xbeam,misset_y,cell_b,Na,mosaic", 0, 1},
};

/* F = a polynomial of degree <= 3 in each index: tricubic interpolation
 * reproduces it, so F is smooth between grid points too */
static void smooth_grid(nb_hkl *hkl)
{
    nb_hkl_alloc(hkl, -30, 30, -30, 30, -30, 30, 0.0);
    for (int h = -30; h <= 30; h++)
        for (int k = -30; k <= 30; k++)
            for (int l = -30; l <= 30; l++)
                hkl->F[nb_hkl_index(hkl, h, k, l)] = 200.0 + 3.0 * h - 2.0 * k + l + 0.2 * h * k + 0.05 * l * l;
    hkl->hkls = 61L * 61 * 61;
}

/* The double path's pixels of a plan (one frame, one panel). */
static double *double_pixels(const nb_plan *plan, const nb_hkl *hkl)
{
    nb_sim_setup s;
    if (nb_sim_setup_build(plan, hkl, &s)) return NULL;
    const nb_kparams *kp = &s.kp;
    double *px = calloc((size_t)kp->fpixels * kp->spixels, sizeof *px);
    for (int y = 0; y < kp->spixels; y++)
        for (int x = 0; x < kp->fpixels; x++) {
            double omega = 0;
            int trip = 0;
            px[(size_t)y * kp->fpixels + x] = nb_pixel_double(kp, x, y, &omega, &trip, NULL);
        }
    nb_sim_setup_free(&s);
    return px;
}

/* The fast path's pixels of a plan (one frame, one panel), as doubles. */
static double *fast_pixels(const nb_plan *plan, const nb_hkl *hkl)
{
    nb_sim_setup s;
    if (nb_sim_setup_build(plan, hkl, &s)) return NULL;
    const size_t n = (size_t)s.kp.fpixels * s.kp.spixels;
    float *img = calloc(n, sizeof *img);
    double *px = calloc(n, sizeof *px);
    nb_render_result res;
    memset(&res, 0, sizeof res);
    if (nb_render_cpu_fast(&s.kp, img, &res, NULL)) {
        free(px);
        px = NULL;
    }
    for (size_t i = 0; px && i < n; i++) px[i] = img[i];
    free(img);
    nb_sim_setup_free(&s);
    return px;
}

typedef double *(*pixels_fn)(const nb_plan *plan, const nb_hkl *hkl);

/* d pixel / d name by a five-point central difference of whole renders */
static double *finite_difference_of(pixels_fn render, const nb_plan *plan, const nb_hkl *hkl, const nb_param *p,
                                    double h, size_t n)
{
    const double w[4] = {1.0, -8.0, 8.0, -1.0};
    const int off[4] = {-2, -1, 1, 2};
    double *fd = calloc(n, sizeof *fd);
    for (int j = 0; j < 4; j++) {
        nb_plan moved;
        double v = 0.0;
        if (nb_plan_copy(plan, &moved)) {
            free(fd);
            return NULL;
        }
        if (nb_param_get(&moved, p, &v) || nb_param_set(&moved, p, v + off[j] * h)) {
            nb_plan_free(&moved);
            free(fd);
            return NULL;
        }
        double *px = render(&moved, hkl);
        nb_plan_free(&moved);
        if (!px) {
            free(fd);
            return NULL;
        }
        for (size_t i = 0; i < n; i++) fd[i] += w[j] * px[i] / (12.0 * h);
        free(px);
    }
    return fd;
}

static double *finite_difference(const nb_plan *plan, const nb_hkl *hkl, const nb_param *p, double h, size_t n)
{
    return finite_difference_of(double_pixels, plan, hkl, p, h, n);
}

/* correlation and norm ratio of a and b */
static void compare(const double *a, const double *b, size_t n, double *corr, double *norm_ratio, double *norm_a)
{
    double sa = 0, sb = 0, saa = 0, sbb = 0, sab = 0;
    for (size_t i = 0; i < n; i++) {
        sa += a[i], sb += b[i];
        saa += a[i] * a[i], sbb += b[i] * b[i], sab += a[i] * b[i];
    }
    double va = saa - sa * sa / n, vb = sbb - sb * sb / n;
    *corr = va > 0 && vb > 0 ? (sab - sa * sb / n) / sqrt(va * vb) : 0.0;
    *norm_ratio = sqrt(saa / sbb);
    *norm_a = sqrt(saa);
}

static void agree(const char *config, const char *name, const double *dual, const double *fd, size_t n)
{
    double corr, norm_ratio, norm;
    compare(dual, fd, n, &corr, &norm_ratio, &norm);
    ok(corr >= 0.99999 && fabs(norm_ratio - 1.0) <= 1e-4 && norm > 0,
       "%s: d/d%s agrees with the finite difference (corr %.9f, norm ratio %.7f)", config, name, corr, norm_ratio);
}

/* The duals of one pass over names [first, first + count) of the plan. */
static int dual_pass(const nb_grad_plans *g, int first, int count, const nb_plan *plan, const nb_hkl *hkl,
                     double **grads, double *value_diff, float *image_check, float **grad_check)
{
    nb_sim_setup s;
    nb_kdual_store ks;
    if (nb_sim_setup_build(plan, hkl, &s)) return -1;
    const nb_kparams *kp = &s.kp;
    nb_status st = nb_grad_kdual_build(g, first, count, 0, 0, kp, hkl, &ks);
    if (st) {
        diag("%s", nb_error_message());
        nb_sim_setup_free(&s);
        return -1;
    }
    *value_diff = 0;
    for (int y = 0; y < kp->spixels; y++)
        for (int x = 0; x < kp->fpixels; x++) {
            double omega = 0, omega2 = 0;
            int trip = 0;
            nb_dual v = nb_pixel_grad(kp, &ks.k, x, y, &omega, &trip);
            double want = nb_pixel_double(kp, x, y, &omega2, &trip, NULL);
            if (v.v != want) *value_diff += 1;
            for (int j = 0; j < count; j++) grads[first + j][(size_t)y * kp->fpixels + x] = v.d[j];
        }
    if (image_check) {
        nb_render_result res;
        memset(&res, 0, sizeof res);
        nb_render_cpu_grad(kp, &ks.k, count, image_check, grad_check, &res, NULL);
    }
    nb_kdual_store_free(&ks);
    nb_sim_setup_free(&s);
    return 0;
}

/* The step of a difference of float images: 10x the double path's, and at
 * least 0.01 degree (a rotation at 0 has a step of 1e-4 degree). */
static double fast_step(const nb_grad_plans *g, int j)
{
    const double h = 10.0 * g->step[j];
    return !strcmp(nb_param_unit(&g->names.param[j]), "degree") && h < 0.01 ? 0.01 : h;
}

/* Each name's fast derivative in passes of 1, 3 and 4 names (in the
 * instantiation for 4 tangents, lanes left over; the last pass of a size may
 * hold fewer) is what it is in the passes of all (of up to 8). */
static void check_fast_passes(const nb_grad_plans *g, const nb_kparams *kp, const nb_hkl *hkl, float *const *fgrads,
                             size_t n, const char *what)
{
    static const int sizes[] = {1, 3, 4};
    float *part[4];
    double worst = 0;
    int worst_size = 1;
    nb_status st = NB_OK;
    for (int t = 0; t < 4; t++) part[t] = calloc(n, sizeof(float));
    for (int z = 0; z < 3 && !st; z++)
        for (int first = 0; first < g->names.n && !st; first += sizes[z]) {
            const int count = g->names.n - first < sizes[z] ? g->names.n - first : sizes[z];
            nb_kdual_store ks;
            nb_render_result res;
            memset(&res, 0, sizeof res);
            st = nb_grad_kdual_build(g, first, count, 0, 0, kp, hkl, &ks);
            if (!st) st = nb_render_cpu_fast_grad(kp, &ks.k, count, NULL, part, &res, NULL);
            nb_kdual_store_free(&ks);
            for (int t = 0; t < count && !st; t++) {
                const float *all = fgrads[first + t];
                double scale = 0, w = 0;
                for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs(all[i]));
                for (size_t i = 0; i < n; i++) w = fmax(w, fabs(part[t][i] - all[i]) / scale);
                if (w > worst) worst = w, worst_size = sizes[z];
            }
        }
    ok(st == NB_OK && worst <= 1e-6, "%s: fast path: each derivative in passes of 1, 3 and 4 names agrees with its "
       "value in a pass of all (worst difference %.1e of its largest, in passes of %d)", what, worst, worst_size);
    for (int t = 0; t < 4; t++) free(part[t]);
}

/* The GPU's fast-path derivatives (nb_pixel_fast_grad: the fast family's
 * terms and slopes one pixel a thread) evaluated here on the host, against
 * the CPU's fast path (image, fgrads), which chains the same slopes in SIMD
 * lanes: correlation >= 0.99999 and norms within 1e-4 for the image and
 * every derivative (the geometry's tangents are formed apart, in single
 * precision). */
static void check_fgrad(const struct config *c, const nb_grad_plans *g, const nb_kparams *kp, const nb_hkl *hkl,
                        const float *image, float *const *fgrads, size_t n)
{
    double *got = calloc(n * (1 + (size_t)g->names.n), sizeof *got), *want = calloc(n, sizeof *want);
    nb_fparams fp;
    nb_status st = nb_fparams_build(kp, &fp);
    const int built = st == NB_OK;
    for (int first = 0; first < g->names.n && !st; first += NB_DUAL_N) {
        const int count = g->names.n - first < NB_DUAL_N ? g->names.n - first : NB_DUAL_N;
        nb_kdual_store ks;
        nb_fgrad fg;
        float *storage = NULL;
        st = nb_grad_kdual_build(g, first, count, 0, 0, kp, hkl, &ks);
        if (!st) st = nb_fgrad_build(&fp, &ks.k, count, &fg, &storage);
        for (int y = 0; y < kp->spixels && !st; y++)
            for (int x = 0; x < kp->fpixels; x++) {
                double omega = 0;
                int trip = 0;
                if (!nb_pixel_rendered(kp, x, y)) continue;
                const size_t at = (size_t)y * kp->fpixels + x;
                nb_fdual v = nb_pixel_fast_grad(&fp, &fg, x, y, &omega, &trip);
                got[at] = v.v;
                for (int j = 0; j < count; j++) got[(size_t)(1 + first + j) * n + at] = v.d[j];
            }
        free(storage);
        nb_kdual_store_free(&ks);
    }
    if (built) nb_fparams_free(&fp);
    double worst_corr = 1, worst_ratio = 0;
    const char *corr_at = "the image", *ratio_at = "the image";
    for (int j = -1; j < g->names.n && !st; j++) {
        const float *ref = j < 0 ? image : fgrads[j];
        const char *what = j < 0 ? "the image" : nb_param_name(&g->names.param[j]);
        double corr, ratio, norm;
        for (size_t i = 0; i < n; i++) want[i] = ref[i];
        compare(got + (size_t)(1 + j) * n, want, n, &corr, &ratio, &norm);
        if (corr < worst_corr) worst_corr = corr, corr_at = what;
        if (fabs(ratio - 1.0) > worst_ratio) worst_ratio = fabs(ratio - 1.0), ratio_at = what;
    }
    ok(st == NB_OK && worst_corr >= 0.99999 && worst_ratio <= 1e-4,
       "%s: the GPU's fast-path derivatives (nb_pixel_fast_grad, on the host) agree with the CPU's fast path "
       "(worst corr %.9f, %s; worst norm ratio off by %.1e, %s)%s%s", c->what, worst_corr, corr_at, worst_ratio, ratio_at,
       st ? ": " : "", st ? nb_error_message() : "");
    free(got);
    free(want);
}

/* The fast path: its derivatives against differences of its images (or,
 * for c->vs_double, the double path's derivatives dgrads), its image the
 * kernel's. */
static void check_fast(const struct config *c, const nb_plan *plan, const nb_hkl *hkl, const nb_grad_list *names,
                       const nb_grad_plans *g, double *const *dgrads)
{
    nb_sim_setup s;
    if (!ok(nb_sim_setup_build(plan, hkl, &s) == NB_OK, "%s: fast path: the plan sets up", c->what)) return;
    const size_t n = (size_t)s.kp.fpixels * s.kp.spixels;
    float *image = calloc(n, sizeof *image), *fgrads[NB_GRAD_MAX_NAMES];
    double *grad = calloc(n, sizeof *grad);
    for (int j = 0; j < names->n; j++) fgrads[j] = calloc(n, sizeof(float));
    nb_render_result res;
    memset(&res, 0, sizeof res);
    nb_status st = nb_render_grads(g, NB_GRAD_FAST, 0, 0, &s.kp, hkl, NULL, image, fgrads, &res, NULL);
    if (ok(st == NB_OK, "%s: fast path: the derivatives render (%s)", c->what, st ? nb_error_message() : "ok")) {
        double *want = fast_pixels(plan, hkl), worst = 0;
        for (size_t i = 0; want && i < n; i++)
            worst = fmax(worst, fabs(image[i] - want[i]) / fmax(fabs(want[i]), 1e-30));
        ok(want && worst <= 1e-6, "%s: fast path: the image is the fast kernel's (worst relative difference %.1e)",
           c->what, worst);
        free(want);
        check_fast_passes(g, &s.kp, hkl, fgrads, n, c->what);
        check_fgrad(c, g, &s.kp, hkl, image, fgrads, n);
        for (int j = 0; j < names->n; j++) {
            const nb_param *p = &names->param[j];
            double *fd = c->vs_double ? NULL : finite_difference_of(fast_pixels, plan, hkl, p, fast_step(g, j), n);
            double corr, ratio, norm;
            if (!ok(c->vs_double || fd != NULL, "%s: fast path: the difference of %s renders", c->what,
                    nb_param_name(p)))
                continue;
            for (size_t i = 0; i < n; i++) grad[i] = fgrads[j][i];
            compare(grad, c->vs_double ? dgrads[j] : fd, n, &corr, &ratio, &norm);
            ok(corr >= 0.999 && fabs(ratio - 1.0) <= 0.01 && norm > 0,
               "%s: fast path: d/d%s agrees with the %s (corr %.6f, norm ratio %.5f)", c->what,
               nb_param_name(p), c->vs_double ? "double path's" : "difference of fast images", corr, ratio);
            free(fd);
        }
    }
    for (int j = 0; j < names->n; j++) free(fgrads[j]);
    free(grad);
    free(image);
    nb_sim_setup_free(&s);
}

static void check_config(const struct config *c)
{
    nb_plan plan;
    nb_hkl hkl;
    nb_grad_list names;
    nb_grad_plans g;
    nb_hkl_init(&hkl);
    if (!ok(build_plan(c->args, &plan) == NB_OK, "%s: the plan resolves", c->what)) return;
    if (c->grid) smooth_grid(&hkl);
    hkl.default_F = plan.default_F;
    nb_status st = nb_grad_list_parse(c->names, &names);
    if (!st) st = nb_grad_plans_build(&plan, &names, &g);
    if (!ok(st == NB_OK, "%s: the plans around it resolve for every name", c->what)) {
        diag("%s", nb_error_message());
        nb_plan_free(&plan);
        nb_hkl_free(&hkl);
        return;
    }
    const size_t n = (size_t)plan.panels[0].fpixels * plan.panels[0].spixels;
    double *grads[NB_GRAD_MAX_NAMES];
    float *image = calloc(n, sizeof *image), *fgrads[NB_DUAL_N];
    for (int j = 0; j < names.n; j++) grads[j] = calloc(n, sizeof(double));
    for (int j = 0; j < NB_DUAL_N; j++) fgrads[j] = calloc(n, sizeof(float));
    double value_diff = 0;
    int fail = 0;
    for (int first = 0; first < names.n && !fail; first += NB_DUAL_N) {
        int count = names.n - first < NB_DUAL_N ? names.n - first : NB_DUAL_N;
        double diff = 0;
        fail = dual_pass(&g, first, count, &plan, &hkl, grads, &diff, first == 0 ? image : NULL, fgrads);
        value_diff += diff;
        if (first == 0 && !fail) {
            int same = 1;
            for (size_t i = 0; i < n; i++)
                for (int j = 0; j < count; j++) same &= fgrads[j][i] == (float)grads[j][i];
            ok(same, "%s: nb_render_cpu_grad writes the duals' derivatives", c->what);
        }
    }
    ok(!fail && value_diff == 0, "%s: the dual pixel's value is the double pixel's, bit for bit (%g differ)", c->what,
       value_diff);
    for (int j = 0; j < names.n && !fail; j++) {
        const nb_param *p = &names.param[j];
        double *fd = finite_difference(&plan, &hkl, p, g.step[j] / 10.0, n);
        if (!ok(fd != NULL, "%s: the finite difference of %s renders", c->what, nb_param_name(p))) continue;
        agree(c->what, nb_param_name(p), grads[j], fd, n);
        free(fd);
    }
    if (!fail) check_fast(c, &plan, &hkl, &names, &g, grads);
    for (int j = 0; j < names.n; j++) free(grads[j]);
    for (int j = 0; j < NB_DUAL_N; j++) free(fgrads[j]);
    free(image);
    nb_grad_plans_free(&g);
    nb_grad_list_free(&names);
    nb_hkl_free(&hkl);
    nb_plan_free(&plan);
}

/* The dual primitives against central differences of their values. */
static void check_primitives(void)
{
    const double hs[] = {0.0, 0.013, -0.21, 2.37, -3.49, 7.0 + 1e-9};
    const double Ns[] = {4.0, 5.0, 4.6};
    double worst = 0;
    for (size_t a = 0; a < sizeof hs / sizeof hs[0]; a++)
        for (size_t b = 0; b < sizeof Ns / sizeof Ns[0]; b++) {
            nb_dual h = nb_dual_c(hs[a]), N = nb_dual_c(Ns[b]);
            h.d[0] = 1.0, N.d[1] = 1.0;
            int h0 = (int)ceil(hs[a] - 0.5);
            const int frac = Ns[b] != floor(Ns[b]);
            nb_dual r = nb_dual_sincg_hkl(h, h0, N, frac);
            /* the reduced factor g(pi (h - h0)), signed as the value (for
             * whole N the value's own form loses digits near whole h) */
            const double e = 1e-5, x = M_PI * (hs[a] - h0);
            double sign = nb_sincg_hkl(hs[a], h0, Ns[b], frac) * nb_sincg(x, Ns[b]) < 0 ? -1.0 : 1.0;
            double dh = sign * (nb_sincg(x + M_PI * e, Ns[b]) - nb_sincg(x - M_PI * e, Ns[b])) / (2 * e);
            double dN = sign * (nb_sincg(x, Ns[b] + e) - nb_sincg(x, Ns[b] - e)) / (2 * e);
            worst = fmax(worst, fabs(r.d[0] - dh) / fmax(1.0, fabs(dh)));
            worst = fmax(worst, fabs(r.d[1] - dN) / fmax(1.0, fabs(dN)));
            if (r.v != nb_sincg_hkl(hs[a], h0, Ns[b], frac)) worst = INFINITY;
        }
    ok(worst < 1e-6, "sincg's dual: value exact, derivatives in h and N as finite differences (worst %.1e)", worst);
    worst = 0;
    for (double x = 0.0; x < 9.0; x += 0.37) {
        nb_dual a = nb_dual_c(x);
        a.d[0] = 1.0;
        double e = 1e-6, want = (nb_sinc3(x + e) - nb_sinc3(fabs(x - e))) / (2 * e);
        worst = fmax(worst, fabs(nb_dual_sinc3(a).d[0] - want));
    }
    ok(worst < 1e-7, "sinc3's dual: its slope as a finite difference (worst %.1e)", worst);
}

/* Names that do not apply are errors saying why. */
static void check_refusals(void)
{
    nb_plan plan;
    nb_grad_list names;
    nb_grad_plans g;
    const struct {
        const char *args, *names, *why;
    } cases[] = {
        {CRYSTAL DETECTOR, "mosaic", "no mosaic spread"},
        {CRYSTAL DETECTOR, "panel1_shift_fast", "the detector has 1 panel"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (build_plan(cases[i].args, &plan)) {
            ok(0, "refusal case %zu resolves", i);
            continue;
        }
        nb_status st = nb_grad_list_parse(cases[i].names, &names);
        if (!st) st = nb_grad_plans_build(&plan, &names, &g);
        if (!st) {
            nb_sim_setup s;
            nb_kdual_store ks;
            nb_hkl hkl;
            nb_hkl_init(&hkl);
            hkl.default_F = plan.default_F;
            nb_sim_setup_build(&plan, &hkl, &s);
            st = nb_grad_kdual_build(&g, 0, names.n, 0, 0, &s.kp, &hkl, &ks);
            if (!st) nb_kdual_store_free(&ks);
            nb_sim_setup_free(&s);
            nb_grad_plans_free(&g);
        }
        ok(st != NB_OK && strstr(nb_error_message(), cases[i].why), "--grad %s is refused: %s", cases[i].names,
           st ? nb_error_message() : "(accepted)");
        nb_grad_list_free(&names);
        nb_plan_free(&plan);
    }
    /* commands the old derivatives (which resolved COMMAND again with flags
     * appended) could not take: a -misset_seed at the end, a last -curved_det */
    const char *quirks[] = {CRYSTAL DETECTOR "-curved_det", CRYSTAL DETECTOR "-misset_seed 5"};
    for (size_t i = 0; i < 2; i++) {
        nb_status st = build_plan(quirks[i], &plan);
        if (st) {
            ok(0, "quirk case %zu resolves", i);
            continue;
        }
        nb_hkl hkl;
        nb_hkl_init(&hkl);
        hkl.default_F = 100;
        nb_sim_setup s;
        nb_kdual_store ks;
        if (!(st = nb_grad_list_parse("distance,misset_x", &names)) && !(st = nb_grad_plans_build(&plan, &names, &g))) {
            if (!(st = nb_sim_setup_build(&plan, &hkl, &s))) {
                if (!(st = nb_grad_kdual_build(&g, 0, names.n, 0, 0, &s.kp, &hkl, &ks))) nb_kdual_store_free(&ks);
                nb_sim_setup_free(&s);
            }
            nb_grad_plans_free(&g);
        }
        nb_grad_list_free(&names);
        ok(st == NB_OK, "a command ending in '%s' is differentiated: %s",
           i == 0 ? "-curved_det" : "-misset_seed 5", st ? nb_error_message() : "ok");
        nb_plan_free(&plan);
    }
    ok(nb_grad_list_parse("distance,nonsense", &names) == NB_ERR_USAGE && strstr(nb_error_message(), "nonsense"),
       "an unknown name is a usage error naming it: %s", nb_error_message());
    ok(nb_grad_list_parse("Na,Na", &names) == NB_ERR_USAGE, "a name given twice is a usage error");
    ok(nb_grad_list_parse("panel03_shift_fast", &names) == NB_ERR_USAGE, "a panel's name is written one way");
}

int main(void)
{
    nb_set_verbosity(-1);
    check_primitives();
    check_refusals();
    for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++) check_config(&configs[i]);
    return tap_done();
}
