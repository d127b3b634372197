/* nb_noise.c - detector counting for nb-noise: nanoBragg's Poisson noise image
 * and, opt-in, the effects of its noisify program (flicker, calibration,
 * point-spread function, gain, ADC, read-out), in noisify's order.  The model
 * and its formulas: docs/physics.md 11. */
#include "nb_noise.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nb_deviates.h"
#include "nb_image.h"
#include "nb_tuning.h"
#include "nb_util.h"

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

void nb_noise_defaults(nb_noise_params *p)
{
    memset(p, 0, sizeof *p);
    p->calib_seed = 123456789;
    p->adc = 40.0;
    p->photon_scale = 1.0;
    p->gain = 1.0;
    p->bits = 16;
    p->psf_fwhm_pixels = 0.46; /* 46 um at 0.1 mm pixels; callers set it from the pixel size */
    p->roi_xmin = p->roi_ymin = 0;
    p->roi_xmax = p->roi_ymax = 2147483647;
}

/* Images of fewer pixels are counted (and blurred) on one thread (about a
 * millisecond of work: less than waking a second thread in a busy pipe costs) */
#define PARALLEL_PIXELS ((size_t)1 << 15)

/* ---- point-spread functions (noisify's analytic pixel integrals) -------- */

/* Cumulative 2D Gaussian of unit integral and unit FWHM, from the origin. */
static double gauss_integ(double x, double y)
{
    return 0.125 * (erf(2 * x * sqrt(log(2))) * erf(y * sqrt(log(16))) * sqrt(log(16) / log(2)));
}

static double gauss_pixel(double x, double y, double fwhm)
{
    double pix = 1.0 / fwhm;
    x /= fwhm;
    y /= fwhm;
    return gauss_integ(x + pix / 2., y + pix / 2.) - gauss_integ(x + pix / 2., y - pix / 2.) -
           gauss_integ(x - pix / 2., y + pix / 2.) + gauss_integ(x - pix / 2., y - pix / 2.);
}

/* Fiber-optic taper PSF g/(2 pi) (g^2 + r^2)^(-3/2), integrated from the origin. */
static double fiber_integ(double x, double y, double g)
{
    return atan((x * y) / (g * sqrt(g * g + x * x + y * y))) / 2.0 / M_PI;
}

static double fiber_pixel(double x, double y, double g)
{
    double pix = 1.0;
    return fiber_integ(x + pix / 2., y + pix / 2., g) - fiber_integ(x + pix / 2., y - pix / 2., g) -
           fiber_integ(x - pix / 2., y + pix / 2., g) + fiber_integ(x - pix / 2., y - pix / 2., g);
}

/* Radius beyond which a pixel's lost photons fall below a tenth of its
 * Poisson noise (noisify's rule). */
static int auto_radius(int type, double I, double fwhm, double g, int global)
{
    double lost = sqrt(I) / 10.0;
    double r;
    if (type == NB_PSF_GAUSS)
        r = global ? 1 + ceil(sqrt(-log(lost / I) / log(4) / 2) * fwhm) : 1 + ceil(sqrt(-log(lost / I) / log(16)) * fwhm);
    else
        r = 1 + ceil(g * (I / lost));
    return r > 1e6 ? 1000000 : (int)r;
}

/* The kernel of the largest radius, (2 radius + 1)^2 pixel integrals, zero
 * outside the disc */
static nb_status psf_kernel(int type, double fwhm_pixels, double g, int radius, double **kernel_out)
{
    const int ksize = 2 * radius + 1;
    double *kernel;
    nb_status st = nb_calloc((void **)&kernel, (size_t)ksize * (size_t)ksize, sizeof(double), "the PSF kernel");
    if (st) return st;
    for (int dy = -radius; dy <= radius; ++dy)
        for (int dx = -radius; dx <= radius; ++dx) {
            if ((double)dx * dx + (double)dy * dy > (double)radius * radius) continue;
            size_t k = (size_t)ksize * (ksize / 2 + dy) + ksize / 2 + dx;
            kernel[k] = type == NB_PSF_GAUSS ? gauss_pixel(dx, dy, fwhm_pixels) : fiber_pixel(dx, dy, g);
        }
    *kernel_out = kernel;
    return NB_OK;
}

/* How a PSF spreads the photons: its kernel, built for the largest radius */
typedef struct psf_spread {
    int type, user_radius, radius, maxwidth;
    double fwhm, g;
    const double *kernel;
} psf_spread;

/* Each pixel's radius (0 for a pixel without photons), and each row's
 * photons beyond those radii, summed in pixel order */
static void psf_radii_row(const psf_spread *ps, const float *in, int width, int y, int *radii, double *row_lost)
{
    double lost = 0.0;
    for (int x = 0; x < width; x++) {
        const size_t i = (size_t)y * (size_t)width + (size_t)x;
        const double I = in[i];
        if (!(I > 0.0)) {
            radii[i] = 0;
            continue;
        }
        int r = ps->user_radius != 0 ? ps->user_radius : auto_radius(ps->type, I, ps->fwhm, ps->g, 0);
        if (r == 0) r = 1;
        if (r > ps->maxwidth) r = ps->maxwidth;
        if (r > ps->radius) r = ps->radius; /* the kernel was built for the largest radius */
        radii[i] = r;
        if (ps->type == NB_PSF_GAUSS) {
            double rr = (double)r / ps->fwhm;
            lost += I * exp(-log(16) * rr * rr);
        } else {
            lost += I * ps->g / sqrt(ps->g * ps->g + (double)r * r);
        }
    }
    *row_lost = lost;
}

/* The photons of every pixel within reach of rows y_lo .. y_hi - 1 spread
 * into those rows only, the pixels taken in order: each output pixel gets
 * its sums in the order of one pass over the whole image, whoever owns the
 * rows beside it (so the image is the same on any thread count). */
static void psf_spread_rows(const psf_spread *ps, const float *in, const int *radii, int width, int height, int y_lo,
                            int y_hi, float *out)
{
    const int ksize = 2 * ps->radius + 1;
    const int src_lo = y_lo - ps->radius < 0 ? 0 : y_lo - ps->radius;
    const int src_hi = y_hi + ps->radius > height ? height : y_hi + ps->radius;
    for (int y0 = src_lo; y0 < src_hi; y0++)
        for (int x0 = 0; x0 < width; x0++) {
            const size_t i = (size_t)y0 * (size_t)width + (size_t)x0;
            const int r = radii[i];
            if (r == 0) continue;
            /* its rows within reach and within the band, its columns within
             * reach and on the detector: photons falling off the detector
             * are lost (the reference's bounds test let them wrap into the
             * next row) */
            const int dy_lo = y_lo - y0 > -r ? y_lo - y0 : -r, dy_hi = y_hi - 1 - y0 < r ? y_hi - 1 - y0 : r;
            const int dx_lo = -x0 > -r ? -x0 : -r, dx_hi = width - 1 - x0 < r ? width - 1 - x0 : r;
            for (int dx = dx_lo; dx <= dx_hi; ++dx)
                for (int dy = dy_lo; dy <= dy_hi; ++dy) {
                    size_t k = (size_t)ksize * (ksize / 2 + dy) + ksize / 2 + dx;
                    if (ps->kernel[k] == 0.0) continue;
                    if ((double)dx * dx + (double)dy * dy > (double)r * r) continue;
                    out[(size_t)(y0 + dy) * width + x0 + dx] += in[i] * ps->kernel[k];
                }
        }
}

/* Rows of the output a thread takes at a time: every band looks at the
 * pixels up to a radius above and below it, so a band of twice the radius
 * (16 rows at least) looks at each pixel about twice */
static int psf_band_rows(int radius) { return 2 * radius > 16 ? 2 * radius : 16; }

nb_status nb_apply_psf(const float *in, float *out, int width, int height, int type, double fwhm_pixels,
                       int user_radius, double *lost_photons)
{
    size_t pixels = (size_t)width * (size_t)height;
    psf_spread ps = {type, user_radius, user_radius, width > height ? width : height, fwhm_pixels, 0.0, NULL};
    ps.g = fwhm_pixels * 0.652383013252053; /* fwhm = 2 sqrt(2^(2/3) - 1) g (half maximum at r^2 = (2^(2/3) - 1) g^2) */
    *lost_photons = 0.0;
    if (fwhm_pixels <= 0.0 || type == NB_PSF_NONE) {
        memcpy(out, in, pixels * sizeof(float));
        return NB_OK;
    }
    memset(out, 0, pixels * sizeof(float));
    const int many = pixels >= PARALLEL_PIXELS;
    if (ps.radius <= 0) {
        float max_I = 0.0f;
#pragma omp parallel for reduction(max : max_I) if (many)
        for (size_t i = 0; i < pixels; i++)
            if (max_I < in[i]) max_I = in[i];
        if (max_I <= 0.0f) {
            nb_warn("no photons: PSF skipped");
            return NB_OK;
        }
        ps.radius = auto_radius(type, max_I, fwhm_pixels, ps.g, 1);
        nb_info("  auto-selected psf_radius = %d pixels", ps.radius);
        if (ps.radius == 0) ps.radius = 1;
    }
    if (ps.radius > ps.maxwidth) ps.radius = ps.maxwidth;
    double *kernel = NULL, *row_lost = NULL;
    int *radii = NULL;
    nb_status st = psf_kernel(type, fwhm_pixels, ps.g, ps.radius, &kernel);
    if (!st) st = nb_alloc_large((void **)&radii, pixels, sizeof *radii, "the PSF's radii");
    if (!st) st = nb_calloc((void **)&row_lost, (size_t)height, sizeof *row_lost, "the PSF's rows");
    if (st) {
        free(kernel);
        free(radii);
        return st;
    }
    ps.kernel = kernel;
#pragma omp parallel for schedule(dynamic, 16) if (many)
    for (int y = 0; y < height; y++) psf_radii_row(&ps, in, width, y, radii, &row_lost[y]);
    const int band = psf_band_rows(ps.radius);
#pragma omp parallel for schedule(dynamic, 1) if (many)
    for (int y = 0; y < height; y += band)
        psf_spread_rows(&ps, in, radii, width, height, y, y + band < height ? y + band : height, out);
    /* photons beyond each radius are added back uniformly */
    double total_lost = 0.0;
    for (int y = 0; y < height; y++) total_lost += row_lost[y];
    const double per_pixel = total_lost / (double)pixels;
#pragma omp parallel for if (many)
    for (size_t i = 0; i < pixels; i++) out[i] += per_pixel;
    *lost_photons = total_lost;
    free(kernel);
    free(radii);
    free(row_lost);
    return NB_OK;
}

/* ---- the counting chain --------------------------------------------------- */

/* With the Philox generator, a row's pixels' first blocks of the streams it
 * draws from, made for the whole row at once (nb_philox_blocks) */
typedef struct row_draws {
    uint32_t *words[NB_NOISE_STREAMS][4]; /* pixel first + k's word j in words[stream][j][k]; NULL: not made */
    size_t first;
    uint32_t *store;
} row_draws;

/* The blocks of row y (width pixels) for the streams p uses in the pass
 * (poisson: the Poisson pass, else the counting after the PSF) */
static nb_status row_draws_make(const nb_noise_params *p, int poisson, int width, int y, row_draws *rd)
{
    memset(rd, 0, sizeof *rd);
    const int want[NB_NOISE_STREAMS] = {poisson, poisson && p->flicker > 0.0, poisson && p->calibration > 0.0,
                                        !poisson && p->readout > 0.0};
    int n = 0;
    for (int s = 0; s < NB_NOISE_STREAMS; s++) n += want[s];
    nb_status st = nb_alloc_large((void **)&rd->store, (size_t)n * 4 * (size_t)width, sizeof *rd->store, "a row's draws");
    if (st) return st;
    rd->first = (size_t)y * (size_t)width;
    uint32_t *at = rd->store;
    for (int s = 0; s < NB_NOISE_STREAMS; s++) {
        if (!want[s]) continue;
        for (int j = 0; j < 4; j++, at += width) rd->words[s][j] = at;
        nb_philox_blocks(nb_noise_stream_key(p, s), (uint32_t)s, 0, rd->first, (size_t)width, rd->words[s]);
    }
    return NB_OK;
}

/* r to the start of pixel i's stream, its block 0 from its row's (rd) */
static void at_stream(const nb_noise_params *p, nb_ctr_rng *r, const row_draws *rd, int stream, size_t i)
{
    const size_t k = i - rd->first;
    const uint32_t block0[4] = {rd->words[stream][0][k], rd->words[stream][1][k], rd->words[stream][2][k],
                                rd->words[stream][3][k]};
    nb_ctr_at(r, nb_noise_stream_key(p, stream), (uint32_t)stream, (uint64_t)i, block0);
}

/* the chain on the reference's generator: one sequence, the seeds advanced */
#define CT_FN(name) ref_##name
#define CT_QUAL static inline
#define CT_STATE nb_rng
#define CT_PARAMS , int64_t *seed, int64_t *calib_seed
#define CT_ARGS , seed, calib_seed
/* nothing to do in one sequence; calib_seed is named because the counting
 * (to_counts) takes it but has no use of it */
#define CT_AT(stream, i) ((void)(calib_seed))
#define CT_GAUSS(which) nb_gaussdev(r, which)
#define CT_POISSON(xm) nb_poidev(r, xm, seed)
#include "nb_noise_pixel.inc"

/* the chain on Philox's generator, each pixel's block 0 of a stream made with
 * its row's (tools/nb_noise_cuda.cu instantiates it with none made) */
#define CT_FN(name) ctr_##name
#define CT_QUAL static inline
#define CT_STATE nb_ctr_rng
#define CT_PARAMS , const row_draws *rd
#define CT_ARGS , rd
#define CT_AT(stream, i) at_stream(p, r, rd, stream, i)
#define CT_GAUSS(which) nb_ctr_gaussdev(r)
#define CT_POISSON(xm) nb_ctr_poidev(r, xm)
#include "nb_noise_pixel.inc"

/* A pass over the image in row-major order on the reference's generator;
 * returns the Poisson photons' sum */
static double ref_pass(const nb_noise_params *p, const nb_noise_pass *ps, nb_rng *rng, int64_t *seed,
                       int64_t *calib_seed, int height, long *overloads)
{
    double sum = 0.0;
    for (int y = 0; y < height; y++)
        for (int x = 0; x < ps->width; x++) sum += ref_pass_pixel(p, ps, rng, seed, calib_seed, x, y, overloads);
    return sum;
}

/* Row y of a pass on Philox's generator; returns the Poisson photons' sum */
static nb_status ctr_pass_row(const nb_noise_params *p, const nb_noise_pass *ps, int y, long *overloads, double *sum)
{
    row_draws rd;
    nb_status st = row_draws_make(p, ps->poisson, ps->width, y, &rd);
    if (st) return st;
    nb_ctr_rng r;
    nb_ctr_init(&r);
    double row_sum = 0.0;
    for (int x = 0; x < ps->width; x++) row_sum += ctr_pass_pixel(p, ps, &r, &rd, x, y, overloads);
    free(rd.store);
    *sum = row_sum;
    return NB_OK;
}

/* A pass over the whole image: on the device, if any; with the reference's
 * generator in one sequence; with Philox's, the rows on every thread, the
 * rows' sums added in row order, so that the sum, as the counts, is the same
 * on any thread count. */
static nb_status run_pass(const nb_noise_device *dev, const nb_noise_params *p, const nb_noise_pass *ps, nb_rng *rng,
                          int64_t *seed, int64_t *calib_seed, int height, long *overloads, double *sum)
{
    long over = 0;
    if (dev) return dev->run(dev->ctx, p, ps, height, overloads, sum);
    if (p->rng != NB_NOISE_RNG_PHILOX) {
        *sum = ref_pass(p, ps, rng, seed, calib_seed, height, &over);
        *overloads += over;
        return NB_OK;
    }
    double *row_sum;
    nb_status st = nb_calloc((void **)&row_sum, (size_t)height, sizeof *row_sum, "the rows' photons");
    if (st) return st;
    int failed = 0;
#pragma omp parallel for schedule(dynamic, 16) reduction(+ : over) reduction(| : failed) \
    if ((size_t)ps->width * height >= PARALLEL_PIXELS)
    for (int y = 0; y < height; y++) {
        long row_over = 0;
        if (ctr_pass_row(p, ps, y, &row_over, &row_sum[y])) failed = 1;
        over += row_over;
    }
    *sum = 0.0;
    for (int y = 0; y < height; y++) *sum += row_sum[y];
    *overloads += over;
    free(row_sum);
    return failed ? nb_error_set(NB_ERR_NOMEM, "out of memory for a row's draws") : NB_OK;
}

nb_status nb_noise_frame(const nb_noise_params *p, nb_rng *rng, const float *photons_in, int width, int height,
                         int32_t *counts, nb_noise_result *res)
{
    return nb_noise_frame_on(NULL, p, rng, photons_in, width, height, counts, res);
}

nb_status nb_noise_frame_on(const nb_noise_device *dev, const nb_noise_params *p, nb_rng *rng,
                            const float *photons_in, int width, int height, int32_t *counts, nb_noise_result *res)
{
    size_t pixels = (size_t)width * (size_t)height;
    float *photons = NULL, *blurred = NULL;
    nb_status st;
    int64_t seed = p->seed, calib_seed = p->calib_seed;
    memset(res, 0, sizeof *res);
    if (p->bits != 16 && p->bits != 32) return nb_error_set(NB_ERR_USAGE, "-bits must be 16 or 32, not %d", p->bits);
    if (dev && p->rng != NB_NOISE_RNG_PHILOX)
        return nb_error_set(NB_ERR_USAGE, "counting on a GPU needs --rng philox: nanoBragg's generator is one "
                                          "sequence in the pixels' order");
    /* a vector test of the exponents, blocks on every thread (nb_image.h) */
    const size_t bad = nb_first_nonfinite(photons_in, pixels);
    if (bad < pixels)
        return nb_error_set(NB_ERR_DATA, "the image holds a non-finite value at pixel %zu (fast %zu, slow %zu)", bad,
                            bad % (size_t)width, bad / (size_t)width);
    const int psf = p->psf != NB_PSF_NONE && p->psf_fwhm_pixels > 0.0;
    long overloads = 0;
    double sum = 0.0;
    if (!psf && p->readout <= 0.0) {
        /* one pass, no photon image: a 4096^2 frame's 64 MiB less to fault in and zero */
        const nb_noise_pass direct = {1, photons_in, NULL, counts, width};
        st = run_pass(dev, p, &direct, rng, &seed, &calib_seed, height, &overloads, &sum);
        res->photons = sum;
        res->overloads = overloads;
        return st;
    }
    /* not zeroed: a pass writes every pixel of its output (nb_noise_pixel.inc) */
    if ((st = nb_alloc_large((void **)&photons, pixels, sizeof(float), "the photon image"))) return st;
    const nb_noise_pass poisson = {1, photons_in, photons, NULL, width};
    if ((st = run_pass(dev, p, &poisson, rng, &seed, &calib_seed, height, &overloads, &sum))) {
        free(photons);
        return st;
    }

    if (psf) {
        nb_info("%.0f photons on noise image before PSF", sum);
        /* not zeroed: nb_apply_psf does */
        if ((st = nb_alloc_large((void **)&blurred, pixels, sizeof(float), "the blurred image"))) {
            free(photons);
            return st;
        }
        st = nb_apply_psf(photons, blurred, width, height, p->psf, p->psf_fwhm_pixels, p->psf_radius,
                          &res->lost_photons);
        free(photons);
        if (st) {
            free(blurred);
            return st;
        }
        photons = blurred;
        sum = 0.0;
        for (size_t i = 0; i < pixels; i++) sum += photons[i];
    }

    /* gain, ADC offset, read-out noise, and the counter's range */
    const nb_noise_pass counting = {0, photons, NULL, counts, width};
    double unused;
    st = run_pass(dev, p, &counting, rng, &seed, &calib_seed, height, &overloads, &unused);
    free(photons);
    if (st) return st;
    res->photons = sum;
    res->overloads = overloads;
    return NB_OK;
}
