/* nb_image.h - the reference's derived images: the noiseless integer image
 * and the 8-bit preview, with its automatic scales. */
#ifndef NB_IMAGE_H
#define NB_IMAGE_H

#include <stdint.h>

typedef struct nb_roi {
    int xmin, xmax, ymin, ymax; /* inclusive */
} nb_roi;

/* intfile_scale <= 0: 55000 / max_I (1 when max_I <= 0), as the reference. */
double nb_int_scale(double requested, double max_I);
/* pgm_scale <= 0: the int scale, or 250 / (5 rmsd) whenever rmsd > 0. */
double nb_pgm_scale(double requested, double int_scale, double rmsd);

/* v = photons * scale + adc, clipped to 0..65535, rounded as floorf(v + 0.5);
 * 0 outside the ROI (masked pixels inside it get the ADC offset). */
void nb_int_image(const float *img, int width, int height, nb_roi roi, double scale, double adc, uint16_t *out);
/* bytes = min(255, photons * scale) truncated (0 for negatives); 0 outside the ROI. */
void nb_pgm_bytes(const float *img, int width, int height, nb_roi roi, double scale, uint8_t *out);

/* Statistics as the reference computes them, in its pixel order: max (strictly
 * greater wins), sum, mean and rms over rendered pixels (ROI and mask), rmsd
 * around that mean over all ROI pixels (masked ones included). */
typedef struct nb_image_stats {
    double max_I;
    long max_index;     /* -1 when no pixel exceeded 0 */
    double mean, rms, rmsd;
    long rendered;
} nb_stats;

void nb_image_stats(const float *img, int width, int height, nb_roi roi, const unsigned char *mask,
                    nb_stats *out);

#endif
