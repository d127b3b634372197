/* nb_amorphous_render.h - an amorphous sample's scatter on one panel of a
 * plan (nb-amorphous): the pixel, which sums F^2 times that evaluation's own
 * polarization, solid angle, capture fraction and source weight over sensor
 * layers, sub-pixels and sources, then scales the sum by r_e^2 fluence
 * molecules / steps (docs/physics.md section 17), and the panel rendered
 * with it.  Its geometry is the plan's, through the double pixel's terms
 * (engine/physics/nb_physics.h: nb_dpx_subpixel, _omega, _capture, _source,
 * _polarization), never a copy of them; the table, its curve and the sample
 * are the core's (libnbcore/nb_amorphous.h). */
#ifndef NB_AMORPHOUS_RENDER_H
#define NB_AMORPHOUS_RENDER_H

#include "nb_amorphous.h"
#include "nb_error.h"
#include "nb_physics.h"
#include "nb_plan.h"

/* What the pixel reads besides the kernels' parameters. */
typedef struct nb_amorphous_params {
    const nb_kparams *kp;            /* the panel, beam, sources (nb_sim_setup_beam) */
    const nb_amorphous_curve *curve;
    const double *weight;            /* per source: its term's factor */
    double molecules;
    double steps;                    /* sources x oversample^2 */
    int fmap;                        /* the pixel is F of its last evaluation (nonBragg's -Fmap) */
    int *walk;                       /* NULL, or the walk's state (nb_amorphous_F): a table that is
                                        not increasing, rendered pixel after pixel in order */
} nb_amorphous_params;

/* Pixel (fpixel, spixel) of the panel, in photons (or F with fmap); adds its
 * sub-pixels' solid angles to *omega_sum. */
double nb_amorphous_pixel(const nb_amorphous_params *a, int fpixel, int spixel, double *omega_sum);

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
