/* xds_inp.h - XDS.INP for a rotation series, from the plan. */
#ifndef NB_FORMAT_XDS_INP_H
#define NB_FORMAT_XDS_INP_H

#include "nb_error.h"
#include "nb_plan.h"

enum nb_xds_detector { NB_XDS_PILATUS, NB_XDS_ADSC }; /* CBF images, SMV images */

/* Write XDS.INP for frames 1 .. plan->nframes named by template_q (the
 * images' name with '?' for the frame number's digits).  A detector of
 * several panels is described as the stacked image (below), one SEGMENT=
 * block per panel. */
nb_status nb_xds_inp_write(const char *path, const nb_plan *p, const char *template_q, int detector_kind,
                           int overload);

/* A detector of several panels as one image for XDS: the panels one after
 * another along the slow axis, panel i from row nb_xds_stack_row(p, i) and
 * column 0, in an image of nx x ny pixels (nx the widest panel's width; the
 * columns right of a narrower panel belong to no segment).  An error when
 * the panels' pixel sizes differ. */
int nb_xds_stack_row(const nb_plan *p, int i);
nb_status nb_xds_stack_dims(const nb_plan *p, int *nx, int *ny);

#endif
