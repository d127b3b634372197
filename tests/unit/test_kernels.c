/* The kernels against each other, on the host:
 *  - the SIMD fast kernel (every instruction set this CPU has) against the
 *    scalar fast pixel nb_pixel_fast() - the code the CUDA backend runs;
 *  - both against the reference-faithful double pixel nb_pixel_double().
 * Small detectors exercising every feature: shapes, oversampling and its
 * flags, absorption layers, curved detector, point pixel, dmin, Kahn
 * polarization, sources, mosaic domains, phi steps, nearest and tricubic F. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hkl.h"
#include "nb_geometry.h"
#include "nb_hkl.h"
#include "nb_options.h"
#include "nb_crc32.h"
#include "nb_sim.h"
#include "plan_words.h"
#include "tap.h"

typedef struct config {
    const char *name;
    const char *args;
    const char *hkl; /* relative to tests/golden/inputs, or NULL */
} config;

static const config configs[] = {
    {"seed", "-default_F 100 -cell 100 100 100 90 90 90 -lambda 6.2 -N 5 -distance 100 -detpixels 48", NULL},
    {"triclinic misset, N 7", "-default_F 100 -cell 70 80 90 75 85 95 -misset 10 5 3 -N 7 -lambda 1 -distance 100 "
                              "-detpixels 40 -pixel 0.5", NULL},
    {"N 20 (sines, not Chebyshev)", "-default_F 100 -cell 100 100 100 90 90 90 -lambda 1 -N 20 -distance 200 "
                                    "-detpixels 40 -pixel 0.3 -oversample 1", NULL},
    {"round", "-default_F 100 -cell 70 80 90 75 85 95 -misset 10 5 3 -N 5 -lambda 1 -distance 100 -detpixels 40 "
              "-pixel 0.5 -round_xtal -fudge 1.2", NULL},
    {"gauss", "-default_F 100 -cell 70 80 90 75 85 95 -misset 10 5 3 -N 5 -lambda 1 -distance 100 -detpixels 40 "
              "-pixel 0.5 -gauss_xtal", NULL},
    {"tophat", "-default_F 100 -cell 70 80 90 75 85 95 -misset 10 5 3 -N 5 -lambda 1 -distance 100 -detpixels 40 "
               "-pixel 0.5 -tophat_spots -fudge 0.8", NULL},
    {"oversample flags, Kahn", "-default_F 100 -cell 100 100 100 90 90 90 -lambda 1 -N 5 -distance 60 -detpixels 32 "
                               "-pixel 0.6 -oversample 3 -oversample_omega -oversample_polar -polar 0.8", NULL},
    {"absorption layers, 2theta", "-default_F 100 -cell 100 100 100 90 90 90 -lambda 1 -N 5 -distance 80 "
                                  "-detpixels 40 -pixel 0.5 -detector_abs 320 -detector_thick 450 -thicksteps 3 "
                                  "-twotheta 10", NULL},
    {"absorption per sub-pixel", "-default_F 100 -cell 100 100 100 90 90 90 -lambda 1 -N 5 -distance 80 "
                                 "-detpixels 32 -pixel 0.6 -detector_abs 320 -detector_thick 450 -thicksteps 3 "
                                 "-oversample 2 -oversample_thick", NULL},
    {"curved detector", "-default_F 100 -cell 100 100 100 90 90 90 -lambda 1 -N 5 -distance 50 -detpixels 40 "
                        "-pixel 0.8 -curved_det 1", NULL},
    {"point pixel, water", "-default_F 100 -cell 100 100 100 90 90 90 -lambda 1 -N 5 -distance 50 -detpixels 40 "
                           "-pixel 0.8 -point_pixel -water 5 -fluence 1e24", NULL},
    {"dmin", "-default_F 100 -cell 50 50 50 90 90 90 -lambda 1 -N 5 -distance 60 -detpixels 40 -pixel 1.2 -dmin 3",
     NULL},
    {"sources and mosaic", "-default_F 100 -cell 70 80 90 75 85 95 -misset 10 5 3 -N 5 -lambda 1 -distance 100 "
                           "-detpixels 32 -pixel 0.8 -divergence 0.8 -divsteps 3 -dispersion 0.5 -dispsteps 3 "
                           "-mosaic 0.5 -mosaic_dom 4 -mosaic_seed 7",
     NULL},
    {"phi steps, xds", "-xds -default_F 100 -cell 80 80 80 90 90 90 -lambda 1 -N 4 -distance 120 -detpixels 40 "
                       "-pixel 0.8 -ORGX 18 -ORGY 22 -phi 10 -osc 2 -phisteps 3", NULL},
    {"nearest F", "-cell 100 100 100 90 90 90 -lambda 6.2 -N 5 -distance 100 -detpixels 40 -pixel 0.4 -default_F 10",
     "small.hkl"},
    {"tricubic F", "-cell 20 20 20 90 90 90 -lambda 1 -N 2 -distance 100 -detpixels 32 -pixel 0.8 -oversample 1",
     "interp.hkl"},
    /* coarse pixels: a group of lanes spans more neighbourhoods than the
     * kernel reads by broadcast, so the gathered remainder is used too */
    {"tricubic F, coarse", "-cell 20 20 20 90 90 90 -lambda 1 -N 2 -distance 100 -detpixels 24 -pixel 2.5 "
                           "-oversample 1", "interp.hkl"},
    {"ROI", "-default_F 100 -cell 100 100 100 90 90 90 -lambda 6.2 -N 5 -distance 100 -detpixels 64 -pixel 0.3 "
            "-roi 5 50 3 40", NULL},
    {"ROI and mask", "-default_F 100 -cell 100 100 100 90 90 90 -lambda 6.2 -N 5 -distance 100 -detpixels 64 "
                     "-pixel 0.3 -roi 2 60 1 62", NULL},
};

/* The reference's statistics loops as it writes them: one sequential pass for
 * max (first pixel strictly greater), sum and sum of squares over rendered
 * pixels, a second one for the deviations over all ROI pixels. */
static void reference_stats(const float *img, const nb_plan *p, nb_stats *st)
{
    double max_I = 0.0, sum = 0.0, sumsqr = 0.0, sumd = 0.0;
    long n = 0, n2 = 0, arg = -1;
    for (int s = 0; s < p->panels[0].spixels; s++)
        for (int f = 0; f < p->panels[0].fpixels; f++) {
            size_t i = (size_t)s * p->panels[0].fpixels + f;
            if (f < p->panels[0].roi_xmin || f > p->panels[0].roi_xmax || s < p->panels[0].roi_ymin ||
                s > p->panels[0].roi_ymax)
                continue;
            if (p->panels[0].mask && !p->panels[0].mask[i]) continue;
            float v = img[i];
            if (v > max_I) max_I = v, arg = (long)i;
            sum += v;
            sumsqr += v * v;
            ++n;
        }
    double avg = sum / (n > 0 ? n : 1);
    st->rms = sqrt(sumsqr / ((n > 1 ? n : 2) - 1));
    for (int s = 0; s < p->panels[0].spixels; s++)
        for (int f = 0; f < p->panels[0].fpixels; f++) {
            if (f < p->panels[0].roi_xmin || f > p->panels[0].roi_xmax || s < p->panels[0].roi_ymin ||
                s > p->panels[0].roi_ymax)
                continue;
            double d = img[(size_t)s * p->panels[0].fpixels + f] - avg;
            sumd += d * d;
            ++n2;
        }
    st->rmsd = sqrt(sumd / ((n2 > 1 ? n2 : 2) - 1));
    st->mean = avg, st->max_I = max_I, st->max_index = arg, st->rendered = n;
}

/* every row's CRC in pc is that of the row's bytes in img */
static int rows_crc_ok(const nb_payload_crc *pc, const float *img)
{
    for (size_t y = 0; y < pc->pieces; y++)
        if (pc->crc[y] != nb_crc32_update(0, (const unsigned char *)img + y * pc->piece_len, pc->piece_len)) return 0;
    return pc->pieces > 0;
}

static void check_stats(const char *what, const nb_stats *got, const nb_stats *want)
{
    double dm = fabs(got->mean - want->mean) / (fabs(want->mean) + 1e-300);
    double dr = fabs(got->rms - want->rms) / (fabs(want->rms) + 1e-300);
    double dd = fabs(got->rmsd - want->rmsd) / (fabs(want->rmsd) + 1e-300);
    ok(got->max_I == want->max_I && got->max_index == want->max_index && got->rendered == want->rendered &&
           dm < 1e-12 && dr < 1e-12 && dd < 1e-10,
       "%s: statistics as the reference's loops (max %g at %ld, %ld pixels; mean, rms, rmsd within %.1e %.1e %.1e)",
       what, got->max_I, got->max_index, got->rendered, dm, dr, dd);
}

static void compare(const char *what, const float *ref, const float *test, size_t n, double corr_min,
                    double rel_max)
{
    double sa = 0, sb = 0, saa = 0, sbb = 0, sab = 0, maxa = 0, maxd = 0;
    for (size_t i = 0; i < n; i++) {
        double x = ref[i], y = test[i];
        sa += x, sb += y, saa += x * x, sbb += y * y, sab += x * y;
        if (fabs(x) > maxa) maxa = fabs(x);
        if (fabs(x - y) > maxd) maxd = fabs(x - y);
    }
    double va = saa - sa * sa / n, vb = sbb - sb * sb / n;
    double corr = va > 0 && vb > 0 ? (sab - sa * sb / n) / sqrt(va * vb) : (va == vb ? 1 : 0);
    double rel = maxa > 0 ? maxd / maxa : maxd;
    ok(corr >= corr_min && rel <= rel_max && maxa > 0, "%s: corr %.9f, max |diff| %.2e of max (gate %.0e)", what,
       corr, rel, rel_max);
}

/* The pixels as the CUDA kernel computes them, on the host: the pixel for
 * the plan's nb_fast_opts_of (the same bits as nb_pixel_fast), and the
 * pixel with the Miller index by offset from one reference per
 * NB_OFFSET_SPAN pixels of a row (a warp), against the scalar fast pixel. */
static void check_gpu_pixels(const char *name, const nb_fparams *fp, const nb_plan *plan, const float *scalar,
                             double omega_scalar, int tripped_scalar)
{
    const nb_pixel_opts o = nb_fast_opts_of(fp);
    const size_t n = (size_t)plan->panels[0].fpixels * plan->panels[0].spixels,
                 npairs = (size_t)fp->kp.nsources * fp->kp.ncells;
    float *opts = calloc(n, sizeof(float)), *offset = calloc(n, sizeof(float));
    nb_offset_ref *ref = calloc(npairs, sizeof *ref);
    double omega_opts = 0, omega_offset = 0;
    int tripped_opts = 0, tripped_offset = 0;
    for (int s = 0; s < plan->panels[0].spixels; s++)
        for (int f0 = 0; f0 < plan->panels[0].fpixels; f0 += NB_OFFSET_SPAN) {
            double d0[3];
            int mid = f0 + NB_OFFSET_SPAN / 2 < plan->panels[0].fpixels ? f0 + NB_OFFSET_SPAN / 2
                                                                        : plan->panels[0].fpixels - 1;
            nb_offset_direction(fp, mid, s, d0);
            for (size_t p = 0; p < npairs; p++) nb_offset_reference(fp, d0, p, &ref[p]);
            for (int f = f0; f < f0 + NB_OFFSET_SPAN && f < plan->panels[0].fpixels; f++) {
                if (!nb_pixel_rendered(&fp->kp, f, s)) continue;
                opts[(size_t)s * plan->panels[0].fpixels + f] =
                    nb_pixel_fast_opts(fp, o, f, s, &omega_opts, &tripped_opts);
                offset[(size_t)s * plan->panels[0].fpixels + f] =
                    nb_pixel_offset(fp, o, fp->pair_A4, ref, d0, f, s, &omega_offset, &tripped_offset);
            }
        }
    ok(memcmp(opts, scalar, n * sizeof(float)) == 0 && omega_opts == omega_scalar && tripped_opts == tripped_scalar,
       "  the pixel for its options (simple %d, one step %d, one pair %d): the scalar fast pixel's bits", o.simple,
       o.one_step, o.one_pair);
    /* within its reach, the offset's rounding stays near the fast pixel's own;
     * beyond it (where the CUDA kernel takes the index in double) it is
     * still within the fast path's gate */
    char what[160];
    const int within = fp->offset_reach <= NB_OFFSET_REACH_MAX;
    snprintf(what, sizeof what, "  %s: index by offset (reach %.3g, %s) vs the scalar fast pixel", name,
             fp->offset_reach, within ? "taken on the GPU" : "not taken");
    compare(what, scalar, offset, n, within ? 0.9999999 : 0.99999, within ? 2e-5 : 2e-3);
    ok(omega_offset == omega_scalar && tripped_offset == tripped_scalar,
       "  index by offset: the same solid angles and tricubic fallback report");
    free(opts), free(offset), free(ref);
}

/* A shape the kernels do not know is refused before rendering, and every
 * kernel's lattice factor gives NaN for it: never a silent top-hat. */
static void check_unknown_shape(void)
{
    nb_plan plan;
    nb_hkl hkl;
    nb_sim_setup setup;
    nb_hkl_init(&hkl);
    if (build_plan(
            "-default_F 100 -cell 100 100 100 90 90 90 -lambda 6.2 -N 5 -distance 100 -detpixels 8 -tophat_spots",
            &plan) != NB_OK) {
        ok(0, "unknown shape: plan resolves (%s)", nb_error_message());
        return;
    }
    hkl.default_F = plan.default_F;
    plan.shape = NB_SHAPE_TOPHAT + 1;
    ok(nb_sim_setup_build(&plan, &hkl, &setup) == NB_ERR_DATA && strstr(nb_error_message(), "crystal shape"),
       "unknown shape: the setup refuses it (%s)", nb_error_message());
    plan.shape = NB_SHAPE_TOPHAT;
    if (nb_sim_setup_build(&plan, &hkl, &setup) != NB_OK) {
        ok(0, "unknown shape: the top-hat setup builds (%s)", nb_error_message());
        nb_plan_free(&plan);
        return;
    }
    nb_fparams fp;
    ok(nb_fparams_build(&setup.kp, &fp) == NB_OK, "unknown shape: fast parameters build");
    double omega = 0.0;
    int tripped = 0;
    ok(!isnan(nb_pixel_double(&setup.kp, 4, 4, &omega, &tripped, NULL)) &&
           !isnan(nb_pixel_fast(&fp, 4, 4, &omega, &tripped)),
       "unknown shape: a top-hat pixel is a number in both paths");
    setup.kp.shape = fp.kp.shape = NB_SHAPE_TOPHAT + 1;
    ok(isnan(nb_pixel_double(&setup.kp, 4, 4, &omega, &tripped, NULL)), "unknown shape: the double pixel is NaN");
    ok(isnan(nb_pixel_fast(&fp, 4, 4, &omega, &tripped)), "unknown shape: the fast pixel is NaN");
    nb_fparams_free(&fp);
    nb_sim_setup_free(&setup);
    nb_plan_free(&plan);
}

int main(void)
{
    nb_set_verbosity(-1);
    for (size_t c = 0; c < sizeof configs / sizeof configs[0]; c++) {
        const config *cf = &configs[c];
        nb_plan plan;
        nb_hkl hkl;
        nb_sim_setup setup;
        nb_hkl_init(&hkl);
        if (build_plan(cf->args, &plan) != NB_OK) {
            ok(0, "%s: plan resolves (%s)", cf->name, nb_error_message());
            continue;
        }
        if (strcmp(cf->name, "ROI and mask") == 0) {
            /* a mask with holes, including the brightest region */
            plan.panels[0].mask = malloc((size_t)plan.panels[0].fpixels * plan.panels[0].spixels);
            for (int i = 0; i < plan.panels[0].fpixels * plan.panels[0].spixels; i++)
                plan.panels[0].mask[i] =
                    (i % 7 != 3) && !(i / plan.panels[0].fpixels > 28 && i / plan.panels[0].fpixels < 36);
        }
        hkl.default_F = plan.default_F;
        if (cf->hkl) {
            char path[256];
            snprintf(path, sizeof path, "tests/golden/inputs/%s", cf->hkl);
            if (nb_hkl_read_text(path, plan.default_F, &hkl) != NB_OK) {
                ok(0, "%s: %s", cf->name, nb_error_message());
                nb_plan_free(&plan);
                continue;
            }
        }
        if (nb_sim_setup_build(&plan, &hkl, &setup) != NB_OK) {
            ok(0, "%s: setup (%s)", cf->name, nb_error_message());
            continue;
        }
        size_t n = (size_t)plan.panels[0].fpixels * plan.panels[0].spixels;
        float *dbl = calloc(n, sizeof(float)), *scalar = calloc(n, sizeof(float)), *simd = calloc(n, sizeof(float));
        nb_render_result res = {0};
        nb_row_stats *rows = calloc((size_t)plan.panels[0].spixels, sizeof *rows);
        nb_stats want, have;
        nb_payload_crc row_crc;
        if (nb_payload_crc_init(&row_crc, 0, (size_t)plan.panels[0].fpixels * sizeof(float),
                                (size_t)plan.panels[0].spixels)) {
            ok(0, "%s: nb_payload_crc_init", cf->name);
            continue;
        }
        res.row_stats = rows;
        res.row_crc = &row_crc;
        ok(nb_render_cpu_double(&setup.kp, dbl, &res, NULL) == NB_OK, "%s: double path renders", cf->name);
        ok(rows_crc_ok(&row_crc, dbl), "  double path: each row's CRC-32 for the stream, taken as it was rendered");
        reference_stats(dbl, &plan, &want);
        nb_stats_from_rows(rows, plan.panels[0].spixels, &have);
        check_stats("  double path, per-row", &have, &want);
        nb_roi roi = {plan.panels[0].roi_xmin, plan.panels[0].roi_xmax, plan.panels[0].roi_ymin,
                      plan.panels[0].roi_ymax};
        ok(res.row_stats_filled && nb_image_stats(dbl, plan.panels[0].fpixels, plan.panels[0].spixels, roi,
                                                  plan.panels[0].mask, &have) == NB_OK,
           "  nb_image_stats runs");
        check_stats("  nb_image_stats", &have, &want);

        /* the scalar fast pixel, as the CUDA kernel runs it */
        nb_fparams fp;
        ok(nb_fparams_build(&setup.kp, &fp) == NB_OK, "%s: fast parameters build", cf->name);
        double omega_scalar = 0;
        int tripped = 0;
        for (int s = 0; s < plan.panels[0].spixels; s++)
            for (int f = 0; f < plan.panels[0].fpixels; f++) {
                int in = f >= plan.panels[0].roi_xmin && f <= plan.panels[0].roi_xmax && s >= plan.panels[0].roi_ymin &&
                         s <= plan.panels[0].roi_ymax &&
                         (!plan.panels[0].mask || plan.panels[0].mask[(size_t)s * plan.panels[0].fpixels + f]);
                scalar[(size_t)s * plan.panels[0].fpixels + f] =
                    in ? nb_pixel_fast(&fp, f, s, &omega_scalar, &tripped) : 0;
            }
        compare("  scalar fast pixel vs double", dbl, scalar, n, 0.99999, 2e-3);
        check_gpu_pixels(cf->name, &fp, &plan, scalar, omega_scalar, tripped);
        nb_fparams_free(&fp);

        /* every SIMD variant this CPU can run */
        const char *variants[] = {"generic", "avx2", "avx512"};
        for (int v = 0; v < 3; v++) {
            setenv("NB_SIMD", variants[v], 1);
            if (v == 2) unsetenv("NB_SIMD");
            const char *got = nb_fast_variant();
            if (strcmp(got, variants[v]) != 0) {
                skip("this CPU lacks it, or the build (make NB_AVX512=1)", "%s: SIMD %s", cf->name, variants[v]);
                continue;
            }
            memset(simd, 0, n * sizeof(float));
            nb_render_result r2 = {0};
            memset(rows, 0xff, (size_t)plan.panels[0].spixels * sizeof *rows);
            r2.row_stats = rows;
            r2.row_crc = &row_crc;
            memset(row_crc.crc, 0, row_crc.pieces * sizeof *row_crc.crc);
            ok(nb_render_cpu_fast(&setup.kp, simd, &r2, NULL) == NB_OK, "%s: SIMD %s renders", cf->name, got);
            ok(rows_crc_ok(&row_crc, simd), "  SIMD %s: each row's CRC-32 for the stream", got);
            reference_stats(simd, &plan, &want);
            nb_stats_from_rows(rows, plan.panels[0].spixels, &have);
            check_stats("  SIMD per-row", &have, &want);
            char what[128];
            snprintf(what, sizeof what, "  SIMD %s vs the scalar fast pixel", got);
            compare(what, scalar, simd, n, 0.9999999, 1e-5);
            near(r2.omega_sum, omega_scalar, 1e-5, "  SIMD %s: the same solid-angle sum (%g vs %g)", got,
                 r2.omega_sum, omega_scalar);
            ok(r2.tripped == tripped, "  SIMD %s: the same tricubic fallback report (%d)", got, r2.tripped);
            /* a -dmin that cuts nothing takes the kernel's general instantiation:
             * the same bits (-dmin leaves the pixels it does not cut unchanged) */
            if (setup.kp.dmin <= 0.0) {
                nb_kparams kp_cut = setup.kp;
                kp_cut.dmin = 1e-20;
                float *cut = calloc(n, sizeof(float));
                nb_render_result r3 = {0};
                ok(nb_render_cpu_fast(&kp_cut, cut, &r3, NULL) == NB_OK &&
                       memcmp(cut, simd, n * sizeof(float)) == 0,
                   "  SIMD %s: a -dmin that cuts nothing renders the same bits", got);
                free(cut);
            }
        }
        unsetenv("NB_SIMD");
        free(dbl), free(scalar), free(simd), free(rows);
        nb_payload_crc_free(&row_crc);
        nb_sim_setup_free(&setup);
        nb_hkl_free(&hkl);
        nb_plan_free(&plan);
    }
    check_unknown_shape();
    return tap_done();
}
