/* nb_fit.h - nb-fit's parts around libnb's fit (fit/): the options, the
 * observed images read from files, the space group resolved, --F-out
 * written (docs/architecture.md, "Refining a dataset"). */
#ifndef NB_FIT_H
#define NB_FIT_H

#include <stddef.h>

#include "nb_engine.h"
#include "nb_hkl.h"
#include "nb_fit_dataset.h"
#include "nb_fit_plan.h"
#include "nb_fit_reduce.h"
#include "nb_plan.h"

#define NB_FIT_MAX_OBSERVED 100000

typedef struct fit_opts {
    nb_fit_ds_settings ds;    /* the fit's own settings (--refine, --loss, --iterations, --global ...) */
    const char **observed;   /* --observed FILE, once per frame */
    int nobserved, observed_cap;
    char *observed_names;    /* one --observed with a run of '#': the frames' names it made (owned), or NULL */
    const char *F_out;        /* --F-out FILE */
    const char *space_group;  /* --space-group NAME */
    double adc, gain, overload;
    int have_adc, have_gain, have_overload;
    int device;               /* --device: an nb_engine_device (default the CPU) */
    const char *residual;     /* --residual FILE */
    const char *spots;        /* --spots FILE.refl */
    const char *integrated;   /* --integrated FILE.refl */
    const char *integrated_mtz; /* --integrated-mtz FILE.mtz */
} fit_opts;

nb_status nb_fit_observed_read(const char *path, const fit_opts *o, const nb_plan *plan, long frame, nb_fit_observed *ob);
void nb_fit_observed_free(nb_fit_observed *ob);

/* The observed frames as the dataset fit asks for them (an
 * nb_fit_observed_fn; ctx: an nb_fit_files) */
typedef struct nb_fit_files {
    const fit_opts *o;
    const nb_plan *plan;
} nb_fit_files;
nb_status nb_fit_observed_frame(void *ctx, long frame, long slot, nb_fit_observed *ob);
/* What reading them kept (which frames' files were read once) */
void nb_fit_files_free(void);

/* --space-group (a name, a Hall symbol, or an MTZ file whose symmetry it
 * takes), else the plan's SPACE_GROUP (an experiment list's), else P 1:
 * the operators the dataset fit's --refine-F merges by (nb_fit_files.c). */
nb_status nb_fit_space_group(const char *given, const nb_plan *start, nb_fit_symmetry *sym);

/* --F-out FILE: h k l F sigma multiplicity (P 1: with the Friedel mates), or
 * an .mtz name: MTZ columns H K L F SIGF N (nb_fit_files.c). */
nb_status nb_fit_write_F(const char *path, const nb_fit_F_table *t);

/* --integrated FILE.refl: the intensities measured as DIALS's integrated
 * reflection table, its experiments named as nb-convert names those of the
 * refined plan (nb_fit_integrated.c). */
nb_status nb_fit_write_integrated(const char *path, const nb_plan *plan, const nb_fit_integrated *r);

/* --integrated-mtz FILE.mtz: the same rows as an unmerged MTZ, one batch a
 * frame (its number the frame's from 1), the indices in the asymmetric unit
 * of spacegroup with M/ISYM (nb_fit_integrated_mtz.c). */
nb_status nb_fit_write_integrated_mtz(const char *path, const nb_plan *plan, const char *spacegroup,
                                      const nb_fit_integrated *r);

#endif
