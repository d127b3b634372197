/* xds_inp.h - XDS.INP for a rotation series, from the plan. */
#ifndef NB_FORMAT_XDS_INP_H
#define NB_FORMAT_XDS_INP_H

#include "nb_error.h"
#include "nb_plan.h"

enum nb_xds_detector { NB_XDS_PILATUS, NB_XDS_ADSC }; /* CBF images, SMV images */

/* Write XDS.INP for frames 1 .. plan->nframes named by template_q (the
 * images' name with '?' for the frame number's digits). */
nb_status nb_xds_inp_write(const char *path, const nb_plan *p, const char *template_q, int detector_kind,
                           int overload);

#endif
