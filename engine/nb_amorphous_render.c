/* nb_amorphous_render.c - an amorphous sample's scatter on one panel
 * (nb-amorphous): nonBragg's pixel (docs/physics.md section 17), over the
 * panel's rows on the CPU's threads, in double precision, with the kernels'
 * parameters of the plan's detector, beam and sources (nb_sim_setup_beam).
 * The pixel's geometry (sub-pixel position, solid angle, capture fraction,
 * scattering vector, polarization) is the double pixel's terms of
 * nb_physics.h, called in nonBragg's order; only the sum is nonBragg's own:
 * each (layer, sub-pixel, source) adds F^2 times its own factors, where
 * nanoBragg's pixel keeps the first sub-pixel's (docs/physics.md 8.1). */
#include "nb_amorphous_render.h"

#include <stdlib.h>
#include <string.h>

#include "nb_sim.h"
#include "nb_util.h"

double nb_amorphous_pixel(const nb_amorphous_params *a, int fpixel, int spixel, double *omega_sum)
{
    const nb_kparams *kp = a->kp;
    int tripped = 0;
    nb_dpx_ctx c = {kp, kp, fpixel, spixel, omega_sum, &tripped, NULL};
    const int os = kp->oversample;
    double I = 0.0, F = 0.0;
    for (int t = 0; t < kp->thicksteps; t++)
        for (int subS = 0; subS < os; subS++)
            for (int subF = 0; subF < os; subF++) {
                nb_dpx_geo g;
                nb_dpx_subpixel(&c, t, subS, subF, &g);
                const double omega = nb_dpx_omega(&c, &g);
                nb_dpx_add_omega(&c, omega, 1);
                const double capture = kp->thick > 0.0 ? nb_dpx_capture(&c, &g, t) : 1.0;
                for (int src = 0; src < kp->nsources; src++) {
                    nb_dpx_src sv;
                    nb_dpx_source(&c, &g, src, &sv);
                    const double stol = 0.5 * nb_norm(sv.scattering);
                    F = nb_amorphous_F(a->curve, stol, a->walk);
                    /* a negative F gives negative photons, as the reference's */
                    const double sign = F < 0.0 ? -1.0 : 1.0;
                    /* the polarization renormalises g's direction for the
                     * next source, as the reference's does */
                    const double polar = kp->nopolar ? 1.0 : nb_dpx_polarization(&c, &g, &sv, src);
                    I += sign * F * F * polar * omega * a->weight[src] * capture;
                }
            }
    if (a->fmap) return F;
    return I * kp->r_e_sqr * kp->fluence * a->molecules / a->steps;
}

nb_status nb_render_amorphous(const nb_plan *plan, const nb_amorphous_job *job, float *image,
                              nb_amorphous_result *res)
{
    nb_sim_setup setup;
    double *row_omega = NULL, *weight = NULL;
    nb_status st = nb_sim_setup_beam(plan, &setup);
    if (st) return st;
    const nb_kparams *kp = &setup.kp;
    if ((st = nb_calloc((void **)&row_omega, (size_t)kp->spixels, sizeof(double), "row sums")) ||
        (st = nb_calloc((void **)&weight, (size_t)plan->nsources, sizeof(double), "source weights")))
        goto done;
    /* each source's factor: its weight as the plan gives it (nonBragg's), or
     * its share of the fluence (weight / mean weight) */
    double mean = 0.0;
    for (int i = 0; i < plan->nsources; i++) mean += plan->sources[i].weight;
    mean /= plan->nsources;
    if (!job->absolute_weights && !(mean > 0)) {
        st = nb_error_set(NB_ERR_DATA, "the sources' weights add up to %g: no share of the fluence to give them",
                          mean * plan->nsources);
        goto done;
    }
    for (int i = 0; i < plan->nsources; i++)
        weight[i] = job->absolute_weights ? plan->sources[i].weight : plan->sources[i].weight / mean;
    /* a table that does not increase: the reference's walk, whose state
     * goes from pixel to pixel in its order, on one thread */
    const nb_amorphous_params a = {kp,
                                   job->curve,
                                   weight,
                                   job->molecules,
                                   (double)plan->nsources * plan->oversample * plan->oversample,
                                   job->fmap,
                                   job->curve->increasing ? NULL : job->walk};
    const int threads = a.walk ? 1 : 0;
    double t0 = nb_now();
#pragma omp parallel for schedule(dynamic, 1) if (!threads)
    for (int s = 0; s < kp->spixels; s++) {
        double omega = 0.0;
        float *row = image + (size_t)s * kp->fpixels;
        memset(row, 0, (size_t)kp->fpixels * sizeof(float));
        for (int f = 0; f < kp->fpixels; f++)
            if (nb_pixel_rendered(kp, f, s)) row[f] = (float)nb_amorphous_pixel(&a, f, s, &omega);
        row_omega[s] = omega;
    }
    /* row sums added in row order: the same total on any thread count */
    res->omega_sum = 0.0;
    for (int s = 0; s < kp->spixels; s++) res->omega_sum += row_omega[s];
    res->steps = a.steps;
    res->seconds = nb_now() - t0;
done:
    free(weight);
    free(row_omega);
    nb_sim_setup_free(&setup);
    return st;
}
