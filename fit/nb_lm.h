/* nb_lm.h - the fit's one Levenberg-Marquardt loop.
 *
 * Every refinement nb fits (one plan's parameters; a frame's own values and
 * background planes; a dataset's shared values with every frame's; the same
 * jointly with F) is this loop over its own state: the caller's callbacks
 * make the damped step and its expected gain, evaluate the objective
 * (-log L, or RSS/2) at the trial, and take or refuse it.  The loop owns
 * the damping (lambda from lambda_start, down by 10 after a step taken, up
 * by 10 after one refused), the stops (an expected or taken gain below
 * tol_abs + tol_rel |f|; lambda past lambda_max: the minimum, to rounding;
 * max_iterations) and nothing else: what a state is, how it is rendered and
 * summed over processes is the caller's. */
#ifndef NB_LM_H
#define NB_LM_H

#include "nb_error.h"

/* One iteration as -v reports it: after its trial was evaluated. */
typedef struct nb_lm_trace {
    int iteration;
    double f, f_trial, predicted, lambda;
} nb_lm_trace;

typedef struct nb_lm_ops {
    /* Before each step (optional): the system at lambda may change (a
     * caller drops what cannot take a step), *f with it. */
    nb_status (*prepare)(void *ctx, double lambda, double *f);
    /* The step damped by lambda into the caller's trial; *predicted: the gain
     * its normal equations expect (NAN: not judged, the trial is evaluated). */
    nb_status (*propose)(void *ctx, double lambda, double *predicted);
    /* The objective at the trial; INFINITY for a trial the model refuses. */
    nb_status (*evaluate)(void *ctx, double *f_trial);
    /* The trial is the state now; *f (the trial's on entry) may be recomputed
     * with the state's equations. */
    nb_status (*accept)(void *ctx, double *f);
    /* The trial refused: the state's equations back.  last: no step follows
     * (the caller may skip work only a next step would use); *f may be
     * recomputed. */
    nb_status (*reject)(void *ctx, int last, double *f);
    /* A line of -v per iteration (optional). */
    void (*trace)(void *ctx, const nb_lm_trace *t);
} nb_lm_ops;

typedef struct nb_lm_settings {
    int max_iterations;
    double lambda_start;  /* the first step's damping */
    double lambda_min;    /* a taken step's damping goes no lower */
    double lambda_max;    /* refusals that raise it past this end the loop (converged) */
    double tol_abs, tol_rel; /* converged: a gain below tol_abs + tol_rel |f| */
} nb_lm_settings;

/* The settings every stage of the fit starts from: lambda 1e-3, 1e-9 at
 * the least, 1e8 at the most; the tolerance the caller's. */
nb_lm_settings nb_lm_defaults(int max_iterations, double tol_abs, double tol_rel);

typedef struct nb_lm_result {
    int iterations;       /* steps tried */
    int converged;        /* 0: max_iterations ended it */
    double f;             /* the objective at the state it ended in */
} nb_lm_result;

/* Iterate from the caller's state, whose objective is f (its equations
 * ready for propose).  The first error of a callback ends the loop and is
 * returned; the state is then the last taken. */
nb_status nb_lm_run(const nb_lm_ops *ops, void *ctx, const nb_lm_settings *s, double f, nb_lm_result *out);

/* Solve A x = b (k x k, k <= 64, row stride `stride`, partial pivoting;
 * A and b are kept): the steps' and the sigmas' linear systems.  0 when
 * singular. */
int nb_fit_solve(int k, const double *A, int stride, const double *b, double *x);

#endif
