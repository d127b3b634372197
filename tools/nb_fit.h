/* nb_fit.h - nb-fit's parts: the options, the observed images, and the
 * dataset fit (per-frame and shared parameters over many frames, regions
 * around the spots with a background plane each, a global stage, a verdict
 * per frame, structure factors from every pixel; docs/architecture.md,
 * "Refining a dataset"). */
#ifndef NB_FIT_H
#define NB_FIT_H

#include <stddef.h>

#include "nb_engine.h"
#include "nb_hkl.h"
#include "nb_fit_plan.h"
#include "nb_fit_reduce.h"
#include "nb_plan.h"

#define NB_FIT_MAX_OBSERVED 100000

enum nb_fit_global { NB_FIT_GLOBAL_AUTO, NB_FIT_GLOBAL_ON, NB_FIT_GLOBAL_OFF };

typedef struct fit_opts {
    const char **observed;   /* --observed FILE, once per frame */
    int nobserved, observed_cap;
    char *observed_names;    /* one --observed with a run of '#': the frames' names it made (owned), or NULL */
    const char *refine;       /* --refine LIST: shared by every frame */
    const char *refine_frame; /* --refine-frame LIST: each frame its own */
    int refine_F;             /* --refine-F */
    const char *F_out;        /* --F-out FILE */
    const char *space_group;  /* --space-group NAME */
    int loss;                 /* enum nb_fit_loss */
    double adc, gain, overload;
    int have_adc, have_gain, have_overload;
    int iterations;
    int device;               /* --device: an nb_engine_device (default the CPU) */
    const char *residual;     /* --residual FILE */
    int precision;            /* 1: the double path's model; 0: the fast path's */
    int precision_given;
    double roi_radius;        /* --roi-radius PX: pixels around a spot */
    double spot_photons;      /* --spot-photons P: a model pixel of this many photons is in a spot */
    int global;               /* --global: enum nb_fit_global */
    double global_range;      /* --global-range DEG: the turns searched */
    double global_distance;   /* --global-distance MM: the distances searched, +-  */
    double global_beam;       /* --global-beam MM: the beam centres searched, +- */
    double max_deviance;      /* --max-deviance R: deviance over its expectation, per pixel */
    double min_explained;     /* --min-explained F: predicted spots the observed image shows */
    long frame_first, frame_last; /* --frames A:B (1-based, inclusive); 0 0: every frame */
    double F_prior;           /* --F-prior W: the Wilson prior's weight (0: none) */
} fit_opts;

nb_status nb_fit_observed_read(const char *path, const fit_opts *o, const nb_plan *plan, long frame, nb_fit_observed *ob);
void nb_fit_observed_free(nb_fit_observed *ob);

/* The median of ob's used pixels off..off+n (a panel's; a sample of at most
 * 65536): the background where spots are sparse (nb_fit_roi.c). */
double nb_fit_panel_median(const nb_fit_observed *ob, size_t off, size_t n);


/* The dataset fit (--refine-frame, --refine-F, or a plan of per-frame
 * crystals): the refined plan into *out, with --refine-F the refined
 * structure factors into *refined_F (else it is left empty).  *failed_frames: how many frames
 * the verdict failed (their start values kept, marked in the plan). */
nb_status nb_fit_dataset(const nb_plan *start, const nb_hkl *hkl, const fit_opts *o, nb_engine *engine,
                         const nb_fit_reduction *red, nb_plan *out, nb_hkl *refined_F, int *failed_frames);

#endif
