/* nb_hkl_model.h - nb-hkl -model: structure factors computed from an atomic model
 * (PDB or mmCIF) by gemmi's sfcalc, the field's program for it, run as a
 * child process (tools/nb_hkl_model.c; docs/architecture.md section 14). */
#ifndef NB_HKL_MODEL_H
#define NB_HKL_MODEL_H

#include "nb_plan.h"
#include "sf_expand.h"

/* What -model asks for. */
typedef struct nb_model_request {
    const char *path;       /* the model: PDB or mmCIF */
    double dmin;            /* A; 0: the plan's DMIN, else the detector's (nb_detector_dmin) */
    double ksol, bsol;      /* the bulk solvent's k_sol (e/A^3) and B_sol (A^2) */
    int solvent;            /* with a bulk solvent (-ksol or -bsol given) */
    int fprime;             /* f' of every element at the plan's wavelength */
} nb_model_request;

/* gemmi's defaults for the bulk solvent, used for the one of -ksol and -bsol
 * not given */
#define NB_MODEL_KSOL 0.35
#define NB_MODEL_BSOL 46.0

/* What was done, for the log. */
typedef struct nb_model_run {
    double dmin;            /* A: the resolution F was computed to */
    const char *dmin_from;  /* where that came from: "-dmin", "the plan's -dmin", "the detector" */
    double lambda;          /* A: the wavelength of f' (0: none) */
} nb_model_run;

/* The highest resolution (A) at which a pixel of the plan's detector can
 * take F from an index: the smallest d = lambda / |s + s0| over the panels'
 * edges (both faces of a sensor; the foot of each source's backward ray on a
 * flat panel) and every source (every shot's, for stills with spikes), less
 * half the reciprocal cell's longest diagonal (two with -interpolate), so
 * that the nearest index of every pixel's scattering vector (and the
 * interpolation's neighbours) is inside.  0 when there is no detector. */
double nb_detector_dmin(const nb_plan *plan);

/* Compute the model's structure factors to the resolution of `rq` (or the
 * plan's) with gemmi sfcalc into a temporary MTZ, and read its FC column into
 * d (nb_mtz_read), ready for nb_sf_expand.  Errors: the model cannot be read
 * (NB_ERR_IO), gemmi is not installed (NB_ERR_UNSUPPORTED, naming it and its
 * Debian package; $NB_GEMMI names another program), gemmi fails on it
 * (NB_ERR_DATA, with what gemmi said). */
nb_status nb_model_structure_factors(const nb_plan *plan, const nb_model_request *rq, nb_sf_data *d,
                                     nb_model_run *run);

#endif
