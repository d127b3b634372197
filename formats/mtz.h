/* mtz.h - structure factors from an MTZ file, read by CCP4's own library
 * (cmtzlib), for nb-hkl -hkl FILE.mtz; a file's symmetry, and refined
 * amplitudes written as MTZ, for nb-fit --refine-F; measured intensities
 * written as an unmerged MTZ (one batch a frame), for nb-fit
 * --integrated-mtz. */
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

/* Whether this build writes MTZ files (1: it has CCP4's library) */
int nb_mtz_available(void);

/* One batch of an unmerged file: a frame's crystal as CCP4's batch header
 * (cmtzlib's MTZBAT) states it, in the Cambridge laboratory frame (x along
 * the beam, z along the rotation axis: for stills DIALS's x) */
typedef struct nb_mtz_batch {
    int number;               /* from 1 */
    double cell[6];           /* A, degrees */
    double umat[9];           /* Mosflm's U (UB = U B), column after column as MTZ keeps it */
    double lambda;            /* A */
    double distance;          /* mm, the sample to the (first) panel's plane */
    double mosaic;            /* degrees (0: not stated) */
    int pixels[2];            /* the (first) panel's pixels, fast and slow */
} nb_mtz_batch;

/* A column beside H K L M/ISYM BATCH: its label, its MTZ type (J, Q, R,
 * ...) and its n values */
typedef struct nb_mtz_column {
    const char *label;
    const char *type;
    const float *value;
} nb_mtz_column;

/* Unmerged intensities: n rows, each an original (unmerged) index and the
 * batch that measured it, and the columns' values */
typedef struct nb_mtz_unmerged {
    const char *spacegroup;   /* a name or Hall symbol CCP4's syminfo.lib knows */
    double cell[6];           /* the dataset's (A, degrees) */
    double lambda;            /* A */
    const char *title, *history;
    size_t nbatch;
    const nb_mtz_batch *batch;
    size_t n;
    const int (*hkl)[3];      /* as measured */
    const int *batchno;       /* each row's batch number (one of batch[]'s) */
    int ncol;
    const nb_mtz_column *col;
} nb_mtz_unmerged;

/* An unmerged MTZ file as CCP4's programs (pointless, aimless) read one:
 * H K L the index moved into CCP4's asymmetric unit, M/ISYM 256 M + ISYM
 * (M 0: every row a whole reflection; ISYM 2k - 1 for I+ and 2k for I-, k
 * the symmetry operator that moved it), BATCH, then u->col; a batch header
 * per batch, the dataset's cell and wavelength, the space group's
 * symmetry.  Written under a temporary name and renamed into place. */
nb_status nb_mtz_write_unmerged(const char *path, const nb_mtz_unmerged *u);

#endif
