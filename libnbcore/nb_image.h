/* nb_image.h - the reference's derived images: the noiseless integer image
 * and the 8-bit preview, with its automatic scales. */
#ifndef NB_IMAGE_H
#define NB_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "nb_error.h"

typedef struct nb_roi {
    int xmin, xmax, ymin, ymax; /* inclusive */
} nb_roi;

/* intfile_scale <= 0: 55000 / max_I (1 when max_I <= 0), as the reference. */
double nb_int_scale(double requested, double max_I);
/* pgm_scale <= 0: the int scale, or 250 / (5 rmsd) whenever rmsd > 0. */
double nb_pgm_scale(double requested, double int_scale, double rmsd);

/* v = photons * scale + adc, clipped to 0..65535, rounded as floorf(v + 0.5);
 * 0 outside the ROI (masked pixels inside it get the ADC offset). */
void nb_int_image(const float *img, int width, int height, nb_roi roi, double scale, double adc, int32_t *out);
/* The same for rows y0 .. y0 + ny - 1 of the image, into out[ny * width]. */
void nb_int_image_rows(const float *img, int width, int y0, int ny, nb_roi roi, double scale, double adc,
                       int32_t *out);
/* nb_int_image_rows as the 16-bit values of an SMV file, for the ny rows at
 * `rows` (rows y0 .. y0 + ny - 1 of the image), after checking that every
 * pixel of those rows is finite: returns the offset from the first pixel of
 * the first that is NaN or infinite (out then partly filled), or ny * width
 * when all are. */
size_t nb_int16_image_rows_checked(const float *rows, int width, int y0, int ny, nb_roi roi, double scale,
                                   double adc, uint16_t *out);
/* bytes = min(255, photons * scale) truncated (0 for negatives); 0 outside the ROI. */
void nb_pgm_bytes(const float *img, int width, int height, nb_roi roi, double scale, uint8_t *out);

/* The index of the first pixel that is NaN or infinite, n when none is. */
size_t nb_first_nonfinite(const float *img, size_t n);

/* Statistics as the reference computes them, in its pixel order: max (strictly
 * greater wins), sum, mean and rms over rendered pixels (ROI and mask), rmsd
 * around that mean over all ROI pixels (masked ones included). */
typedef struct nb_image_stats {
    double max_I;
    long max_index;     /* -1 when no pixel exceeded 0 */
    double mean, rms, rmsd;
    long rendered;
} nb_stats;

nb_status nb_image_stats(const float *img, int width, int height, nb_roi roi, const unsigned char *mask,
                         nb_stats *out);

/* The same in two steps, so that a renderer can take a row's figures while
 * the row is still in cache: per row, then combined in row order. */
typedef struct nb_row_stats {
    double sum, sumsq, max; /* rendered pixels (ROI and mask) */
    long arg, n;            /* first index holding max (-1: none above 0), count */
    double sum_all, m2_all; /* ROI pixels, masked ones included: sum, sum of (v - row mean)^2 */
    long n_all;
} nb_row_stats;
void nb_row_stats_compute(const float *row, int width, int y, nb_roi roi, const unsigned char *mask_row,
                          nb_row_stats *rs);
void nb_stats_from_rows(const nb_row_stats *rows, int height, nb_stats *out);

#endif
