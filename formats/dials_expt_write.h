/* dials_expt_write.h - the simulated truth as a DIALS experiment list
 * (.expt JSON, dxtbx's serialisation), written by nb-convert -o model.expt.
 *
 * One experiment: the beam (wavelength, polarization fraction and normal of
 * the simulation), the detector with every panel (pedestal and trusted range
 * as dxtbx reads them from the images beside it), for a rotation series
 * (OSC > 0) a single-axis goniometer and a scan of images 1..NFRAMES from
 * PHI0 by OSC, and the crystal (real-space a, b, c at spindle angle 0, space
 * group P 1; a still's as its one frame saw it), all in DIALS's laboratory
 * frame (nb_dials_frame).  The image set names the images written beside
 * it, when there are such (one panel, CBF or SMV): a template with '#' for
 * a series, the one file for a still; else the list has no image set, a
 * model to compare with and nothing more. */
#ifndef NB_FORMAT_DIALS_EXPT_WRITE_H
#define NB_FORMAT_DIALS_EXPT_WRITE_H

#include "nb_error.h"
#include "nb_plan.h"

typedef struct nb_expt_images {
    const char *path;   /* the images: a '#' template (series) or a file, absolute; NULL: none */
    double pedestal;    /* their ADC offset as dxtbx reads it: SMV's ADC_OFFSET, 0 for a CBF */
    double overload;    /* the counter's maximum, offset included */
} nb_expt_images;

/* R (row-major) that takes the plan's laboratory frame onto DIALS's: the
 * beam's propagation direction onto -z, the spindle (made perpendicular to
 * the beam) onto +x.  An error when the spindle is along the beam. */
nb_status nb_dials_frame(const nb_plan *p, double R[3][3]);

/* The plan's (or a panel view's) detector, spindle and polarization normal
 * in DIALS's frame, as model.expt states them, into m's lab fields (m->lab
 * 1); m->lab 0 when there is no DIALS frame (the spindle along the beam). */
struct nb_image_meta;
void nb_dials_image_geometry(const nb_plan *p, struct nb_image_meta *m);

nb_status nb_dials_expt_write(const char *path, const nb_plan *p, const nb_expt_images *img);

#endif
