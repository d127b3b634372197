/* nb_amorphous_render.c - an amorphous sample's scatter on one panel
 * (nb-amorphous): the pixel of nb_amorphous.c over the panel's rows on the
 * CPU's threads, in double precision, with the kernels' parameters of the
 * plan's detector, beam and sources (nb_sim_setup_beam). */
#include "nb_amorphous_render.h"

#include <stdlib.h>
#include <string.h>

#include "nb_sim.h"
#include "nb_util.h"

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
