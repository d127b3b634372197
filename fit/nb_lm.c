/* nb_lm.c - the fit's one Levenberg-Marquardt loop (nb_lm.h): damping,
 * the stops and the order of the caller's callbacks. */
#include <math.h>
#include <stddef.h>

#include "nb_lm.h"

nb_lm_settings nb_lm_defaults(int max_iterations, double tol_abs, double tol_rel)
{
    return (nb_lm_settings){.max_iterations = max_iterations, .lambda_start = 1e-3, .lambda_min = 1e-9,
                            .lambda_max = 1e8, .tol_abs = tol_abs, .tol_rel = tol_rel};
}

/* A gain too small to go on for: what rounding makes of f, or less than
 * the fit cares about. */
static int negligible(const nb_lm_settings *s, double gain, double f)
{
    return gain < s->tol_abs + s->tol_rel * fabs(f);
}

nb_status nb_lm_run(const nb_lm_ops *ops, void *ctx, const nb_lm_settings *s, double f, nb_lm_result *out)
{
    nb_status st = NB_OK;
    double lambda = s->lambda_start;
    int it = 0, done = 0;
    for (; it < s->max_iterations && !st && !done; it++) {
        double predicted = NAN, f_trial = INFINITY;
        if (ops->prepare && (st = ops->prepare(ctx, lambda, &f))) break;
        if ((st = ops->propose(ctx, lambda, &predicted))) break;
        if (negligible(s, predicted, f)) { /* NAN: not judged */
            done = 1;
            break;
        }
        if ((st = ops->evaluate(ctx, &f_trial))) break;
        if (ops->trace) ops->trace(ctx, &(nb_lm_trace){it, f, f_trial, predicted, lambda});
        if (!(f_trial < f)) { /* no better, or refused by the model: a shorter step */
            lambda *= 10.0;
            done = lambda > s->lambda_max; /* no step down from here: the minimum, to rounding */
            st = ops->reject(ctx, done, &f);
            continue;
        }
        const double gain = f - f_trial;
        f = f_trial;
        if ((st = ops->accept(ctx, &f))) break;
        lambda = fmax(lambda / 10.0, s->lambda_min);
        done = negligible(s, gain, f);
    }
    if (out) *out = (nb_lm_result){.iterations = it, .converged = done, .f = f};
    return st;
}

#define SOLVE_MAX 64

int nb_fit_solve(int k, const double *A, int stride, const double *b, double *x)
{
    double M[SOLVE_MAX][SOLVE_MAX + 1];
    if (k > SOLVE_MAX) return 0;
    for (int i = 0; i < k; i++) {
        for (int j = 0; j < k; j++) M[i][j] = A[i * stride + j];
        M[i][k] = b[i];
    }
    for (int c = 0; c < k; c++) {
        int piv = c;
        for (int r = c + 1; r < k; r++)
            if (fabs(M[r][c]) > fabs(M[piv][c])) piv = r;
        if (!(fabs(M[piv][c]) > 0.0)) return 0;
        for (int j = 0; j <= k; j++) {
            double t = M[c][j];
            M[c][j] = M[piv][j], M[piv][j] = t;
        }
        for (int r = c + 1; r < k; r++) {
            double f = M[r][c] / M[c][c];
            for (int j = c; j <= k; j++) M[r][j] -= f * M[c][j];
        }
    }
    for (int i = k - 1; i >= 0; i--) {
        double v = M[i][k];
        for (int j = i + 1; j < k; j++) v -= M[i][j] * x[j];
        x[i] = v / M[i][i];
    }
    return 1;
}
