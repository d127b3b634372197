/* nb_fit_integrate.h - intensities measured on each frame a dataset fit
 * passes (nb_fit_integrate.c; nb-fit --integrated): the
 * result, part of the fit's interface (nb_fit_dataset.h includes this;
 * fit/'s own parts are in nb_fit_ds_integrate.h). */
#ifndef NB_FIT_INTEGRATE_H
#define NB_FIT_INTEGRATE_H

#include <stddef.h>

/* One reflection measured on one frame.  sum: its photons over its pixels
 * less the background planes (the partial reflection this still records),
 * sum_var their counts' variance; prf and prf_var: the profile-fitted
 * estimate of the full reflection (the frame's photons of it by the
 * model's profile, over the partiality); partiality: its lattice photons
 * on the frame over those of the frame's best-excited reflection (so in
 * (0, 1]); model: the model's photons of it on the frame (scale x F^2 x
 * lattice); xyzcal, xyzobs: fast and slow pixels from its panel's corner
 * (a pixel's centre at +0.5), the model's and the observed photons'
 * centroids; s1: the diffracted beam towards xyzcal, 1/A, the plan's
 * laboratory frame; d: its spacing,
 * A; bbox: x0 x1 y0 y1 of its pixels (ends past the last). */
typedef struct nb_fit_refl {
    long frame;
    int panel;
    int hkl[3];
    int npix;
    double sum, sum_var, prf, prf_var, partiality, model, background;
    double xyzcal[2], xyzobs[2], s1[3], d;
    int bbox[4];
} nb_fit_refl;

/* Every process's rows, frame by frame, into the caller's (rank 0's are
 * whole; free with nb_fit_integrated_free). */
typedef struct nb_fit_integrated {
    size_t n;
    nb_fit_refl *row;
} nb_fit_integrated;
void nb_fit_integrated_free(nb_fit_integrated *r);

#endif
