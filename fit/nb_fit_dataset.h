/* nb_fit_dataset.h - the dataset fit: per-frame and shared values over
 * many frames, regions around the spots with a background plane each, a
 * global stage, a verdict per frame, structure factors from every pixel
 * (docs/architecture.md, "Refining a dataset"; docs/physics.md 15.1).
 *
 * The fit takes its observed frames from the caller (a callback that fills
 * a frame's photons and the pixels that count: nb-fit reads image files),
 * its space group's operators from the caller (nb-fit resolves names and
 * MTZ files with CCP4's library), its processes as a reduction (nb-fit's
 * MPI), and gives the refined plan, the refined F and, for the caller to
 * write, F's table (--F-out).  It prints -v's log and the verdicts on
 * standard error, as nb-fit's. */
#ifndef NB_FIT_DATASET_H
#define NB_FIT_DATASET_H

#include <stddef.h>

#include "nb_engine.h"
#include "nb_fit_integrate.h"
#include "nb_fit_plan.h"
#include "nb_fit_reduce.h"
#include "nb_hkl.h"
#include "nb_plan.h"

enum nb_fit_global { NB_FIT_GLOBAL_AUTO, NB_FIT_GLOBAL_ON, NB_FIT_GLOBAL_OFF };

#define NB_FIT_MAX_OPS 192

/* A space group's operators as the fit uses them: an index goes to h R. */
typedef struct nb_fit_symmetry {
    int nops;
    int R[NB_FIT_MAX_OPS][3][3];
    char spacegroup[64];
    char hall[64];            /* its Hall symbol where known, else "" */
} nb_fit_symmetry;

/* Observed frame `frame` of the plan (slot: its place among the images
 * given, counted from the first frame fitted) into ob: ob->y (photons) and
 * ob->use (the pixels that count), the plan's pixels each, allocated by the
 * callback with malloc (the fit frees them).  Called again at each
 * prediction of the frame's regions. */
typedef nb_status (*nb_fit_observed_fn)(void *ctx, long frame, long slot, nb_fit_observed *ob);

/* Spots found by another program (nb-fit --spots: DIALS's reflection
 * table), in place of the fit's own: a spot's panel, centroid (pixels from
 * the panel's corner, a pixel's centre at +0.5) and box (inclusive, in the
 * panel); the frames' spots one after another, frame i's spot[first[i]]
 * .. spot[first[i + 1] - 1], i over the plan's frames. */
typedef struct nb_fit_spot {
    int panel;
    float f, s;
    int f0, f1, s0, s1;
} nb_fit_spot;
typedef struct nb_fit_given_spots {
    long nframes;
    size_t *first;            /* nframes + 1 */
    nb_fit_spot *spot;
} nb_fit_given_spots;
/* DIALS's reflection table at path (dials.find_spots', dials.index's:
 * formats/dials_refl.h) as the plan's frames' spots, tied to them by their
 * experiments' identifiers (nb_fit_spots.c: nb-fit --spots, nb.h's
 * nb_fit_dataset_settings.spots); free with nb_fit_spots_free (also after a
 * failure). */
nb_status nb_fit_spots_read(const char *path, const nb_plan *plan, nb_fit_given_spots *out);
void nb_fit_spots_free(nb_fit_given_spots *g);

typedef struct nb_fit_ds_settings {
    const char *refine;       /* shared by every frame (a comma list of the fit's names) */
    const char *refine_frame; /* each frame its own */
    int refine_F;             /* structure factors from every pixel */
    int loss;                 /* enum nb_fit_loss */
    int iterations;
    int precision;            /* 1: the double path's model; 0: the fast path's */
    int precision_given;      /* 0: the fast path (the dataset fit's default) */
    double roi_radius;        /* pixels around a spot */
    double spot_photons;      /* a model pixel of this many photons is in a spot */
    int global;               /* enum nb_fit_global */
    double global_range;      /* the turns searched, degrees */
    double global_distance;   /* the distances searched, +- mm */
    double global_beam;       /* the beam centres searched, +- mm */
    double max_deviance;      /* deviance over its expectation, per pixel */
    double min_explained;     /* predicted spots the observed image shows */
    long frame_first, frame_last; /* 1-based, inclusive; 0 0: every frame */
    double F_prior;           /* the Wilson prior's weight (0: none) */
    long nobserved;           /* frames with an observed image, from the first fitted */
    nb_fit_observed_fn observed;
    void *observed_ctx;
    const nb_fit_symmetry *symmetry; /* refine_F's space group (NULL: P 1) */
    const nb_fit_given_spots *spots; /* the observed spots given (NULL: the fit finds them) */
    nb_fit_integrated *integrated;   /* the passing frames' intensities go here (NULL: none measured;
                                      * nb_fit_integrate.h) */
} nb_fit_ds_settings;

/* nb-fit's defaults (its man page states them): 50 iterations, regions of
 * 3 pixels around spots of 0.5 photons, the global stage when turns or the
 * detector are refined (4 degrees, 15 mm, 1 mm), a verdict at a deviance
 * ratio of 1.5 and half the spots explained, the Wilson prior's weight 1. */
static inline void nb_fit_ds_defaults(nb_fit_ds_settings *s)
{
    *s = (nb_fit_ds_settings){.iterations = 50, .precision = 1, .roi_radius = 3.0, .spot_photons = 0.5,
                              .global = NB_FIT_GLOBAL_AUTO, .global_range = 4.0, .global_distance = 15.0,
                              .global_beam = 1.0, .max_deviance = 1.5, .min_explained = 0.5, .F_prior = 1.0};
}

/* The refined F as --F-out writes them: the asymmetric unit's reflections
 * measured (h k l, F, sigma, multiplicity), the space group, the cell (the
 * refined shared one, else the passing frames' mean; cell_says which) and
 * the wavelength.  p1: the Friedel mates are not merged in the table. */
typedef struct nb_fit_F_table {
    size_t n;
    int (*hkl)[3];
    double *F, *sigF, *mult;
    int p1;
    char spacegroup[64];
    double cell[6];
    char cell_says[200];
    double lambda;            /* Angstrom */
} nb_fit_F_table;
void nb_fit_F_table_free(nb_fit_F_table *t);

#define NB_FIT_DS_NAMES 18   /* the kinds a frame can have */
#define NB_FIT_DS_SHARED 66  /* the shared values a fit can have (the kinds and 48 panel values) */

/* What the fit came to, every process's frames: each frame's own values
 * and sigmas (their names, units), its verdict (0: passed) and why it
 * failed; the shared values and sigmas. */
typedef struct nb_fit_ds_result {
    long nframes;
    int kp, kz;
    char frame_name[NB_FIT_DS_NAMES][32], shared_name[NB_FIT_DS_SHARED][32];
    const char *frame_unit[NB_FIT_DS_NAMES], *shared_unit[NB_FIT_DS_SHARED];
    double *values, *sigmas;  /* nframes x kp */
    int *failed;              /* per frame: 0 passed, else the verdict's code; -1 not fitted (outside the range) */
    char (*why)[256];         /* per frame: why it failed ("" when it passed) */
    double shared[NB_FIT_DS_SHARED], shared_sigma[NB_FIT_DS_SHARED];
} nb_fit_ds_result;
void nb_fit_ds_result_free(nb_fit_ds_result *r);

/* The dataset fit (per-frame values, shared ones, or F; or a plan of
 * per-frame crystals): the refined plan into *out; with refine_F the
 * refined structure factors into *refined_F (else left empty) and, when
 * F_table is not NULL, their table (rank 0); when res is not NULL, what
 * each frame came to (every process).  *failed_frames: how many frames the
 * verdict failed (their start values kept, marked in the plan). */
nb_status nb_fit_dataset_run(const nb_plan *start, const nb_hkl *hkl, const nb_fit_ds_settings *o, nb_engine *engine,
                         const nb_fit_reduction *red, nb_plan *out, nb_hkl *refined_F, nb_fit_F_table *F_table,
                         nb_fit_ds_result *res, int *failed_frames);

/* refine_F from a plan without structure factors: a flat F at the level
 * the observed pixels ask for (their photons above each panel's median over
 * the model's with every F = 1, summed over the frames fitted and the
 * processes) into hkl->default_F. */
nb_status nb_fit_flat_F(const nb_plan *plan, const nb_fit_ds_settings *o, nb_engine *engine,
                        const nb_fit_reduction *red, nb_hkl *hkl);

/* The median of ob's used pixels off..off+n (a panel's; a sample of at most
 * 65536): the background where spots are sparse (nb_fit_roi.c). */
double nb_fit_panel_median(const nb_fit_observed *ob, size_t off, size_t n);

#endif
