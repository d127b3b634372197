/* nb_amorphous_render.h - an amorphous sample's scatter on one panel of a
 * plan (nb-amorphous; the pixel: libnbcore/nb_amorphous.h). */
#ifndef NB_AMORPHOUS_RENDER_H
#define NB_AMORPHOUS_RENDER_H

#include "nb_amorphous.h"
#include "nb_error.h"
#include "nb_plan.h"

typedef struct nb_amorphous_job {
    const nb_amorphous_curve *curve;
    double molecules;     /* of the illuminated sample (nb_amorphous_sample_resolve) */
    int absolute_weights; /* each source's term times its weight as the plan gives it (nonBragg's
                             rule); 0: times its share of the fluence, weight / mean weight */
    int fmap;             /* each pixel F of its last evaluation (nonBragg's -Fmap) */
    int *walk;            /* the interpolation's walk on a table that does not increase
                             (nb_amorphous_F), carried from panel to panel; 0 at first */
} nb_amorphous_job;

typedef struct nb_amorphous_result {
    double omega_sum; /* the solid angles of every sub-pixel (and sensor layer) evaluated */
    double steps;     /* sources x oversample^2: what the pixel divides by */
    double seconds;
} nb_amorphous_result;

/* Render panel 0 of plan (a one-panel view, nb_plan_panel_view) into image
 * (fpixels x spixels, written in full: 0 outside the ROI and the mask), on
 * the CPU's OpenMP threads (one, in the reference's pixel order, for a
 * table that does not increase), in double precision. */
nb_status nb_render_amorphous(const nb_plan *plan, const nb_amorphous_job *job, float *image,
                              nb_amorphous_result *res);

#endif
