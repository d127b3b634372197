/* nb_fit_plan.h - the fit of one plan's parameters, shared by every frame,
 * to observed images in memory: least squares, then (for the Poisson loss)
 * the Poisson likelihood, each by the one Levenberg-Marquardt loop
 * (nb_lm.h) on the named parameters' derivatives (nb_params.h), with
 * sigmas from the inverse Fisher information.  Frames may be spread over
 * processes: each process gives its own frames' images and the fit sums
 * the equations by the caller's reduction (nb_fit_reduce.h).  nb-fit
 * (without --refine-frame or --refine-F) and nb.h's nb_fit_renderer are
 * command line and files, or arrays, around it. */
#ifndef NB_FIT_PLAN_H
#define NB_FIT_PLAN_H

#include <stddef.h>

#include "nb_engine.h"
#include "nb_fit_likelihood.h"
#include "nb_fit_reduce.h"
#include "nb_hkl.h"
#include "nb_plan.h"
#include "nb_sim_grad.h"

#define NB_FIT_PLAN_MAX (NB_GRAD_MAX_NAMES + 1)

/* One observed frame: photons per pixel (every panel, an IMAGE's layout),
 * and which pixels count.  y NULL: a frame another process fits. */
typedef struct nb_fit_observed {
    double *y;
    unsigned char *use;
} nb_fit_observed;

typedef struct nb_fit_plan_settings {
    int loss;                     /* enum nb_fit_loss: the last stage's; least squares always first */
    int iterations;               /* each stage's at most */
    nb_grad_path path;            /* the model's pixel: the double path or the fast one */
    const nb_fit_reduction *red;  /* the processes; NULL: this one alone */
    float **residual;             /* NULL, or per frame of this process: observed - model at the end on the
                                   * pixels used, 0 elsewhere (the caller's buffers, the plan's pixels each) */
} nb_fit_plan_settings;

typedef struct nb_fit_plan_result {
    int k;                                /* parameters refined, in the order of the list */
    char name[NB_FIT_PLAN_MAX][48];       /* their names */
    char unit[NB_FIT_PLAN_MAX][24];       /* their units ("" for the scale) */
    double value[NB_FIT_PLAN_MAX], sigma[NB_FIT_PLAN_MAX];
    double nll;                           /* the last stage's -log L (Poisson) or RSS/2, over every process */
    long pixels;                          /* pixels used, over every process */
    int iterations;                       /* the last stage's */
    int converged;                        /* 0: the last stage stopped at its iterations */
} nb_fit_plan_result;

/* Fit the parameters of `refine` (a comma list of the table's names, and
 * 'scale': a factor on every frame's photons, refined into the fluence) from
 * start's values to obs (start->nframes entries, each this process's or
 * not).  The plan's unrendered pixels (ROI, masks) are left out of obs's
 * use.  out: the refined plan; res: the values and sigmas. */
nb_status nb_fit_plan(nb_engine *engine, const nb_plan *start, const nb_hkl *hkl, const char *refine,
                      nb_fit_observed *obs, const nb_fit_plan_settings *s, nb_plan *out, nb_fit_plan_result *res);

/* Frame `frame` of the plan rendered into image (every panel, an IMAGE's
 * layout) by the path's pixel: the fit's model, without derivatives. */
nb_status nb_fit_render_frame(nb_engine *engine, const nb_plan *plan, const nb_hkl *hkl, nb_grad_path path, long frame,
                              float *image);

/* The plan's ROI and masks out of ob->use (the pixels the plan does not render). */
nb_status nb_fit_leave_out_unrendered(const nb_plan *plan, const nb_hkl *hkl, nb_fit_observed *ob);

#endif
