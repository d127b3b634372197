/* nb_noise.c - detector counting for nb-noise: nanoBragg's Poisson noise image
 * and, opt-in, the effects of its noisify program (flicker, calibration,
 * point-spread function, gain, ADC, read-out), in noisify's order.  The model
 * and its formulas: docs/physics.md 11. */
#include "nb_noise.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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

static int in_roi(const nb_noise_params *p, int x, int y)
{
    return x >= p->roi_xmin && x <= p->roi_xmax && y >= p->roi_ymin && y <= p->roi_ymax;
}

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

nb_status nb_apply_psf(const float *in, float *out, int width, int height, int type, double fwhm_pixels,
                       int user_radius, double *lost_photons)
{
    size_t pixels = (size_t)width * (size_t)height;
    double g = fwhm_pixels * 0.652383013252053; /* fwhm = 2 sqrt(2^(2/3) - 1) g (half maximum at r^2 = (2^(2/3) - 1) g^2) */
    *lost_photons = 0.0;
    if (fwhm_pixels <= 0.0 || type == NB_PSF_NONE) {
        memcpy(out, in, pixels * sizeof(float));
        return NB_OK;
    }
    memset(out, 0, pixels * sizeof(float));
    int radius = user_radius;
    if (radius <= 0) {
        double max_I = 0.0;
        for (size_t i = 0; i < pixels; i++)
            if (max_I < in[i]) max_I = in[i];
        if (max_I <= 0.0) {
            nb_warn("no photons: PSF skipped");
            return NB_OK;
        }
        radius = auto_radius(type, max_I, fwhm_pixels, g, 1);
        nb_info("  auto-selected psf_radius = %d pixels", radius);
        if (radius == 0) radius = 1;
    }
    int maxwidth = width > height ? width : height;
    if (radius > maxwidth) radius = maxwidth;
    int ksize = 2 * radius + 1;
    double *kernel;
    nb_status st = nb_calloc((void **)&kernel, (size_t)ksize * (size_t)ksize, sizeof(double), "the PSF kernel");
    if (st) return st;
    for (int dy = -radius; dy <= radius; ++dy)
        for (int dx = -radius; dx <= radius; ++dx) {
            if ((double)dx * dx + (double)dy * dy > (double)radius * radius) continue;
            size_t k = (size_t)ksize * (ksize / 2 + dy) + ksize / 2 + dx;
            kernel[k] = type == NB_PSF_GAUSS ? gauss_pixel(dx, dy, fwhm_pixels) : fiber_pixel(dx, dy, g);
        }
    double total_lost = 0.0;
    for (size_t i = 0; i < pixels; i++) {
        if (!(in[i] > 0.0)) continue;
        int x0 = (int)(i % (size_t)width), y0 = (int)(i / (size_t)width);
        int r = user_radius != 0 ? user_radius : auto_radius(type, in[i], fwhm_pixels, g, 0);
        if (r == 0) r = 1;
        if (r > maxwidth) r = maxwidth;
        if (r > radius) r = radius; /* the kernel was built for the largest radius */
        if (type == NB_PSF_GAUSS) {
            double rr = (double)r / fwhm_pixels;
            total_lost += in[i] * exp(-log(16) * rr * rr);
        } else {
            total_lost += in[i] * g / sqrt(g * g + (double)r * r);
        }
        for (int dx = -r; dx <= r; ++dx)
            for (int dy = -r; dy <= r; ++dy) {
                size_t k = (size_t)ksize * (ksize / 2 + dy) + ksize / 2 + dx;
                if (kernel[k] == 0.0) continue;
                if ((double)dx * dx + (double)dy * dy > (double)r * r) continue;
                int x = x0 + dx, y = y0 + dy;
                /* photons falling off the detector are lost (the reference's
                 * bounds test let them wrap into the next row) */
                if (x < 0 || x >= width || y < 0 || y >= height) continue;
                out[(size_t)y * width + x] += in[i] * kernel[k];
            }
    }
    /* photons beyond each radius are added back uniformly */
    double per_pixel = total_lost / (double)pixels;
    for (size_t i = 0; i < pixels; i++) out[i] += per_pixel;
    *lost_photons = total_lost;
    free(kernel);
    return NB_OK;
}

/* ---- the counting chain --------------------------------------------------- */

/* photons (after the PSF, if any) -> the counter's reading: gain, ADC
 * offset, read-out noise (readout > 0: a deviate from rng), the range */
static int32_t to_counts(const nb_noise_params *p, nb_rng *rng, int64_t *seed, float photons, long *overloads)
{
    double adu = photons * p->gain + p->adc;
    if (p->readout > 0.0) adu += p->readout * nb_gaussdev(rng, seed);
    if (adu > 2147483647.0) {
        adu = 2147483647.0;
        if (p->bits == 32) ++*overloads;
    }
    if (p->bits == 16 && adu > 65535.0) {
        adu = 65535.0;
        ++*overloads;
    }
    /* truncation, as the reference's integer conversion; counters do not go negative */
    return adu < 0.0 ? 0 : (int32_t)adu;
}

/* Poisson counting, with flicker and calibration error before it, of the
 * ROI's pixels in row-major order: into photons[], or (photons NULL) straight
 * to counts, when nothing between the two draws from the generator (no PSF,
 * no read-out noise) and the same deviates come in the same order.  Returns
 * the photons' sum. */
static double poisson_pass(const nb_noise_params *p, nb_rng *rng, int64_t *seed, int64_t *calib_seed,
                           const float *photons_in, int width, int height, float *photons, int32_t *counts,
                           long *overloads)
{
    double sum = 0.0;
    for (int y = 0; y < height; y++)
        for (int x = 0; x < width; x++) {
            size_t i = (size_t)y * width + x;
            if (!in_roi(p, x, y)) {
                if (!photons) counts[i] = 0;
                continue;
            }
            /* photons on the requested scale, kept in single precision as the reference does */
            float scaled = p->photon_scale == 1.0 ? photons_in[i] : (float)(p->photon_scale * photons_in[i]);
            double photons0 = scaled;
            if (p->flicker > 0.0) photons0 *= (1.0 + p->flicker * nb_gaussdev(rng, seed));
            if (p->calibration > 0.0) photons0 *= (1.0 + p->calibration * nb_gaussdev(rng, calib_seed));
            float n = nb_poidev(rng, (float)photons0, seed);
            sum += n;
            if (photons) photons[i] = n;
            else counts[i] = to_counts(p, rng, seed, n, overloads);
        }
    return sum;
}

nb_status nb_noise_frame(const nb_noise_params *p, nb_rng *rng, const float *photons_in, int width, int height,
                         int32_t *counts, nb_noise_result *res)
{
    size_t pixels = (size_t)width * (size_t)height;
    float *photons = NULL, *blurred = NULL;
    nb_status st;
    int64_t seed = p->seed, calib_seed = p->calib_seed;
    memset(res, 0, sizeof *res);
    if (p->bits != 16 && p->bits != 32) return nb_error_set(NB_ERR_USAGE, "-bits must be 16 or 32, not %d", p->bits);
    for (size_t i = 0; i < pixels; i++)
        if (!isfinite(photons_in[i]))
            return nb_error_set(NB_ERR_DATA, "the image holds a non-finite value at pixel %zu (fast %zu, slow %zu)", i,
                                i % (size_t)width, i / (size_t)width);
    const int psf = p->psf != NB_PSF_NONE && p->psf_fwhm_pixels > 0.0;
    long overloads = 0;
    if (!psf && p->readout <= 0.0) {
        /* one pass, no photon image: a 4096^2 frame's 64 MiB less to fault in and zero */
        res->photons = poisson_pass(p, rng, &seed, &calib_seed, photons_in, width, height, NULL, counts, &overloads);
        res->overloads = overloads;
        return NB_OK;
    }
    if ((st = nb_calloc((void **)&photons, pixels, sizeof(float), "the photon image"))) return st;
    double sum = poisson_pass(p, rng, &seed, &calib_seed, photons_in, width, height, photons, NULL, NULL);

    if (psf) {
        nb_info("%.0f photons on noise image before PSF", sum);
        if ((st = nb_calloc((void **)&blurred, pixels, sizeof(float), "the blurred image"))) {
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
    for (int y = 0; y < height; y++)
        for (int x = 0; x < width; x++) {
            size_t i = (size_t)y * width + x;
            counts[i] = in_roi(p, x, y) ? to_counts(p, rng, &seed, photons[i], &overloads) : 0;
        }
    free(photons);
    res->photons = sum;
    res->overloads = overloads;
    return NB_OK;
}
