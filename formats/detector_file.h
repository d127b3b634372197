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

/* A DIALS experiment list for nb-geom -expt: every experiment's crystal
 * and wavelength, the one detector and beam direction they share (refused
 * otherwise, naming the experiments), a sweep's scan; stills are a list
 * whose scans are absent or of one image without oscillation.  The hook
 * nb-geom gives nb_request_apply_scanned (and nb-sim, nb-fit the engine's
 * --grad). */
nb_status nb_experiment_list_read(const char *path, nb_experiment_list *out);

/* The readers themselves; `name` names the file in messages. */
nb_status nb_dials_expt_parse(const char *text, size_t len, const char *name, nb_detector_file *out);
nb_status nb_crystfel_geom_parse(const char *text, const char *name, nb_detector_file *out);

#endif
