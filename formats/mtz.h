/* mtz.h - structure factors from an MTZ file, read by CCP4's own library
 * (cmtzlib), for nb-hkl -hkl FILE.mtz; a file's symmetry, and refined
 * amplitudes written as MTZ, for nb-fit --refine-F. */
#ifndef NB_FORMAT_MTZ_H
#define NB_FORMAT_MTZ_H

#include "nb_error.h"
#include "sf_expand.h"

/* The column chosen by the -column rule (nb_sf_choose; column NULL: none
 * given), the file's symmetry operators, its crystal's cell: into d, ready
 * for nb_sf_expand.  Intensities (J, K) become amplitudes by nb_sf_amplitude;
 * values the file marks missing are counted (d->unread), not read. */
nb_status nb_mtz_read(const char *path, const char *column, nb_sf_data *d);

/* The symmetry of an MTZ file alone (its operators, space group name, Hall
 * symbol where syminfo.lib knows the name, and its first crystal's cell):
 * nb-fit --space-group FILE.mtz. */
nb_status nb_mtz_symmetry(const char *path, nb_sf_data *d);

/* Amplitudes to write: n reflections, each h k l with F, sigma(F) and the
 * number of shots that measured it. */
typedef struct nb_mtz_amplitudes {
    const char *spacegroup;   /* a name or Hall symbol CCP4's syminfo.lib knows */
    double cell[6];           /* A, degrees */
    double lambda;            /* A */
    size_t n;
    const int (*hkl)[3];
    const double *F, *sigF, *multiplicity;
    const char *history;      /* a line for the file's history (NULL: none) */
} nb_mtz_amplitudes;

/* An MTZ file of columns H K L F SIGF (type Q) N (type I, the
 * multiplicity), the indices moved into CCP4's asymmetric unit, the space
 * group's symmetry in the header; written under a temporary name and
 * renamed into place (no partial file on a failure). */
nb_status nb_mtz_write_amplitudes(const char *path, const nb_mtz_amplitudes *a);

#endif
