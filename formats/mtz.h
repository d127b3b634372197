/* mtz.h - structure factors from an MTZ file, read by CCP4's own library
 * (cmtzlib), for nb-hkl -hkl FILE.mtz. */
#ifndef NB_FORMAT_MTZ_H
#define NB_FORMAT_MTZ_H

#include "nb_error.h"
#include "sf_expand.h"

/* The column chosen by the -column rule (nb_sf_choose; column NULL: none
 * given), the file's symmetry operators, its crystal's cell: into d, ready
 * for nb_sf_expand.  Intensities (J, K) become amplitudes by nb_sf_amplitude;
 * values the file marks missing are counted (d->unread), not read. */
nb_status nb_mtz_read(const char *path, const char *column, nb_sf_data *d);

#endif
