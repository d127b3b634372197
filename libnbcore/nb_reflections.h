/* nb_reflections.h - which reflection a frame's photons belong to: the
 * bookkeeping behind nb-convert's truth.jsonl (docs/physics.md 16.3).
 *
 * The rule: every pixel's photons go to the Miller index nearest to the
 * scattering vector at the pixel's centre (front face of the sensor), for the
 * frame's crystal at mid-frame (a rotation frame's spindle at PHI0 + OSC/2,
 * a still's shot as nb_plan_frame_view gives it; the unrotated mosaic
 * domain) and the frame's mean wavelength along the plan's beam direction.
 * Per reflection and panel: the photons, and their centroid in pixels with
 * the first pixel's centre at (0.5, 0.5), DIALS's convention. */
#ifndef NB_REFLECTIONS_H
#define NB_REFLECTIONS_H

#include <stddef.h>

#include "nb_error.h"
#include "nb_plan.h"

typedef struct nb_reflection {
    int h, k, l, panel;
    double photons;     /* sum over its pixels */
    double x, y;        /* photon-weighted centroid, pixels (first pixel's centre 0.5) */
} nb_reflection;

typedef struct nb_reflection_list {
    nb_reflection *r;   /* sorted by panel, h, k, l */
    size_t n;
} nb_reflection_list;

/* The real-space cell vectors (m) of the plan's crystal turned to spindle
 * angle phi as the kernels turn it (exactly 0: the cell as it is). */
void nb_plan_cell_at(const nb_plan *p, double phi, double abc[3][3]);
/* The spindle angle at the middle of a frame's view (nb_plan_frame_view). */
double nb_plan_mid_phi(const nb_plan *frame_view);
/* The mean wavelength (m) of a view's sources. */
double nb_plan_mean_lambda(const nb_plan *frame_view);

/* The reflections of a frame's photons (every panel's, as an IMAGE record
 * holds them) whose photons exceed min_photons, for the frame's view (its
 * sources the frame's: nb_plan_frame_sources).  A curved detector is
 * refused (NB_ERR_UNSUPPORTED). */
nb_status nb_reflections_collect(const nb_plan *frame_view, const float *photons, double min_photons,
                                 nb_reflection_list *out);
void nb_reflection_list_free(nb_reflection_list *l);

#endif
