/* nb_noise.h - detector counting: photons/pixel in, integer counts out.
 *
 * The default reproduces nanoBragg's noise image: for every ROI pixel in
 * row-major order, n = poidev(photons) with the reference's generator, then
 * counts = n + adc, clipped at 65535 (an overload) and truncated.  The
 * effects of the reference's noisify program are opt-in and applied in its
 * order: photon scale, flicker, calibration error, Poisson, point-spread
 * function, gain, ADC offset, read-out noise, clipping to 16 or 32 bits.
 */
#ifndef NB_NOISE_H
#define NB_NOISE_H

#include <stdint.h>

#include "nb_error.h"
#include "nb_hd.h"
#include "nb_rng.h"

enum nb_psf_type { NB_PSF_NONE = 0, NB_PSF_GAUSS, NB_PSF_FIBER };

/* Where the deviates come from: the reference's generator, one sequence in
 * the pixels' order (nanoBragg's and noisify's numbers); or Philox4x32-10
 * (nb_rng.h), each pixel's deviates a function of (seed, pixel) alone, so
 * that the pixels are counted on every thread (nb-noise --rng philox) with
 * the same counts for any thread count: other numbers, the same
 * distributions (the same Poisson and Gaussian algorithms draw on it). */
enum nb_noise_rng { NB_NOISE_RNG_REFERENCE = 0, NB_NOISE_RNG_PHILOX };

typedef struct nb_noise_params {
    int64_t seed;           /* as the reference stores it (negated) */
    int64_t calib_seed;     /* default +123456789 (noisify: not negated) */
    double adc;             /* ADC offset, counts */
    double photon_scale;    /* 1 = photons as given */
    double flicker;         /* fraction, 0 = off */
    double calibration;     /* fraction, 0 = off */
    double readout;         /* ADU, 0 = off */
    double gain;            /* ADU per photon */
    int psf;                /* enum nb_psf_type */
    double psf_fwhm_pixels;
    int psf_radius;         /* pixels, 0 = automatic */
    int bits;               /* 16 or 32 */
    int rng;                /* enum nb_noise_rng */
    int roi_xmin, roi_xmax, roi_ymin, roi_ymax; /* inclusive; pixels outside get 0 */
} nb_noise_params;

typedef struct nb_noise_result {
    double photons;         /* sum of the Poisson photons (after the PSF when one is applied) */
    long overloads;
    double lost_photons;    /* PSF photons spread back uniformly */
} nb_noise_result;

void nb_noise_defaults(nb_noise_params *p);

/* ---- a pixel's counting, for the host and a CUDA device -------------------- */

/* Philox's streams of a pixel, one per use, so that turning an effect on
 * leaves the others' deviates as they were */
enum nb_noise_stream { NB_STREAM_POISSON, NB_STREAM_FLICKER, NB_STREAM_CALIBRATION, NB_STREAM_READOUT, NB_NOISE_STREAMS };

/* A stream's key: the calibration error's pattern is the calibration seed's */
NB_HD int64_t nb_noise_stream_key(const nb_noise_params *p, int stream)
{
    return stream == NB_STREAM_CALIBRATION ? p->calib_seed : p->seed;
}

NB_HD int nb_noise_in_roi(const nb_noise_params *p, int x, int y)
{
    return x >= p->roi_xmin && x <= p->roi_xmax && y >= p->roi_ymin && y <= p->roi_ymax;
}

/* A pass over the ROI's pixels (nb_noise_pixel.inc counts one): the Poisson
 * pass (flicker, calibration error, Poisson deviate) from `in` into
 * photons[], or (photons NULL) straight to counts, when nothing between the
 * two draws from the generator (no PSF, no read-out noise) and the same
 * deviates come in the same order; or the counting of the photons `in` after
 * the PSF (gain, ADC offset, read-out noise) into counts. */
typedef struct nb_noise_pass {
    int poisson;        /* the Poisson pass, else the counting after the PSF */
    const float *in;
    float *photons;     /* the Poisson pass's photons; NULL: straight to counts */
    int32_t *counts;    /* NULL: none made in this pass */
    int width;
} nb_noise_pass;

/* Where a frame's passes run: the CPU, or `run` (nb-noise's CUDA backend),
 * which counts a pass's rows [0, height) on Philox's generator as the CPU
 * would, pixel for pixel, and gives the Poisson photons' sum and the
 * overloads.  The point-spread function stays on the CPU, between the
 * Poisson pass and the counting. */
typedef struct nb_noise_device {
    nb_status (*run)(void *ctx, const nb_noise_params *p, const nb_noise_pass *pass, int height, long *overloads,
                     double *sum);
    void *ctx;
} nb_noise_device;


/* Count one frame.  `rng` carries the generator state (the plan's for the
 * first frame, so a seed that does not re-initialise it continues the
 * reference's shared table).  counts: width*height int32, every one written
 * (0 outside the ROI), so they need not be initialised. */
nb_status nb_noise_frame(const nb_noise_params *p, nb_rng *rng, const float *photons, int width, int height,
                         int32_t *counts, nb_noise_result *res);
/* The same with the passes on dev (NULL: the CPU), which needs Philox's
 * generator (NB_ERR_USAGE otherwise: the reference's is one sequence) */
nb_status nb_noise_frame_on(const nb_noise_device *dev, const nb_noise_params *p, nb_rng *rng, const float *photons,
                            int width, int height, int32_t *counts, nb_noise_result *res);

/* Blur an image with the Gaussian or fiber PSF as noisify does (pixel-
 * integrated kernel, automatic radius from each pixel's intensity, photons
 * beyond the radius spread uniformly), with correct edge handling. */
nb_status nb_apply_psf(const float *in, float *out, int width, int height, int type, double fwhm_pixels,
                       int user_radius, double *lost_photons);

#endif
