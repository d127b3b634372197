/* detector_file.h - the detector files nb-geom -panels reads: a DIALS
 * experiment list (.expt, .json) or a CrystFEL geometry (.geom), each into
 * panels in the file's own laboratory frame (libnbcore places them in the
 * plan's: nb_plan_place_panels). */
#ifndef NB_FORMAT_DETECTOR_FILE_H
#define NB_FORMAT_DETECTOR_FILE_H

#include "nb_error.h"
#include "nb_geometry.h"

/* By the name's extension: .expt/.json DIALS, .geom CrystFEL; anything else
 * is refused.  The hook nb-geom gives nb_request_apply_scanned. */
nb_status nb_detector_file_read(const char *path, nb_detector_file *out);

/* The readers themselves; `name` names the file in messages. */
nb_status nb_dials_expt_parse(const char *text, size_t len, const char *name, nb_detector_file *out);
nb_status nb_crystfel_geom_parse(const char *text, const char *name, nb_detector_file *out);

#endif
