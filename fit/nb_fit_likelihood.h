/* nb_fit_likelihood.h - the fit's one likelihood: a pixel's term of
 * -log L given its observed photons y and its model's mean mu, the
 * derivative of that term by mu, its Fisher weight and its deviance.
 *
 * Poisson: -log L = mu - y log mu (the terms free of mu left out), d/dmu
 * = 1 - y / mu, Fisher weight 1 / mu.  Least squares (the way into the
 * Poisson basin from far, where a photon on a pixel the model leaves empty
 * weighs log 0): RSS / 2 = (y - mu)^2 / 2, d/dmu = mu - y, weight 1.  Every
 * stage of the fit (one plan; a frame's values and planes; the dataset's
 * shared values; F) sums these over its pixels. */
#ifndef NB_FIT_LIKELIHOOD_H
#define NB_FIT_LIKELIHOOD_H

#include <math.h>

enum nb_fit_loss { NB_FIT_POISSON, NB_FIT_LSQ };

/* photons: the least mean a model pixel is given (log 0 is no likelihood) */
#define NB_FIT_MU_FLOOR 1e-4

/* the pixel's term of -log L (Poisson) or RSS / 2 */
static inline double nb_fit_nll(int loss, double y, double mu)
{
    return loss == NB_FIT_POISSON ? mu - (y > 0 ? y * log(mu) : 0.0) : 0.5 * (y - mu) * (y - mu);
}

/* d(term)/d mu */
static inline double nb_fit_dnll_dmu(int loss, double y, double mu)
{
    return loss == NB_FIT_POISSON ? 1.0 - y / mu : mu - y;
}

/* the Fisher information of mu, per unit of (d mu)^2 (Gauss-Newton's weight) */
static inline double nb_fit_weight(int loss, double mu)
{
    return loss == NB_FIT_POISSON ? 1.0 / mu : 1.0;
}

/* The Poisson deviance of the pixel, 2 (y log(y / mu) - (y - mu)): twice
 * -log L above the saturated model's (mu = y); 2 mu where y is 0. */
static inline double nb_fit_deviance(double y, double mu)
{
    return y > 0 ? 2.0 * (y * log(y / mu) - (y - mu)) : 2.0 * mu;
}

#endif
