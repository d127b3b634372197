/* nb_noise_plan.h - a frame of a plan's detector counted as nb-noise counts
 * it: each panel on its own, over its ROI, its PSF never crossing into
 * another; shared by nb-noise and libnb's nb_renderer_noise_frame
 * (engine/nb.h), so that a program's counts are the tool's. */
#ifndef NB_NOISE_PLAN_H
#define NB_NOISE_PLAN_H

#include <stdint.h>

#include "nb_error.h"
#include "nb_noise.h"
#include "nb_plan.h"
#include "nb_rng.h"

/* The counts of frame `frame` (0-based) of `plan` from its photons (every
 * panel's, in panel order, as an IMAGE record holds them) into counts (as
 * many int32, every one written).  p: the frame's settings, its seed already
 * the frame's (nb_frame_seed) and its ROI ignored (each panel's own is
 * used); psf_fwhm_um: the PSF's width, made pixels by each panel's pixel
 * size.  Panel 0 draws from p's seeds and, in frame 0, continues `rng` (the
 * plan's generator state, as the reference's noise image follows its mosaic
 * draws); panel i > 0 from seeds derived from (seed, i) and (calib_seed, i)
 * on a fresh generator, so that panel 0 is what a one-panel detector gets.
 * dev: where the passes run (NULL: the CPU).  res: the panels' sums. */
nb_status nb_noise_plan_frame(const nb_plan *plan, const nb_noise_params *p, double psf_fwhm_um, long frame,
                              nb_rng *rng, const nb_noise_device *dev, const float *photons, int32_t *counts,
                              nb_noise_result *res);

#endif
