/* crystfel_geom.h - a CrystFEL geometry file (.geom) from the plan. */
#ifndef NB_FORMAT_CRYSTFEL_GEOM_H
#define NB_FORMAT_CRYSTFEL_GEOM_H

#include "nb_error.h"
#include "nb_plan.h"

/* Write the plan's detector as CrystFEL panels p0, p1 ... (one per panel,
 * stacked along the slow axis as in the raw float file: panels of one width
 * and pixel size only). */
nb_status nb_crystfel_geom_write(const char *path, const nb_plan *p, int max_adu, double adu_per_photon);

#endif
