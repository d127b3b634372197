/* nb_sim_fast_adjoint.c - the fast CPU kernel's vector-Jacobian product in
 * one sweep (reverse mode, nb_fast_adjoint.inc): the sum over pixels of
 * weight x derivative for every name at the cost of a few images, where the
 * tangent passes (nb_sim_fast_grad.c) cost an image or so per name.
 *
 * Compiled once per instruction set with NB_FAST_ADJ_NAME naming the entry
 * point; a translation unit of its own, built beside the image pass and the
 * tangent passes.
 */
#include "nb_fast_lanes.inc"

#ifndef NB_FAST_ADJ_NAME
#error "NB_FAST_ADJ_NAME names this instruction set's entry point"
#endif

#include "nb_fast_adjoint.inc"

/* a thread's scratch apart from the others' (two cache lines) */
#define AJ_SCRATCH_ALIGN 128u

int NB_FAST_ADJ_NAME(const nb_fparams *fs, const nb_fadj *job, float *image, double *row_omega, int *tripped_out,
                     nb_progress *prog)
{
    const nb_kparams *kp = &fs->kp;
    const size_t npairs = (size_t)kp->nsources * kp->ncells;
    const size_t bytes = npairs * AJ_PAIR * (2 * sizeof(vf) + sizeof(vd));
    const size_t stride = (bytes + AJ_SCRATCH_ALIGN - 1) / AJ_SCRATCH_ALIGN * AJ_SCRATCH_ALIGN;
    char *scratch = aligned_alloc(AJ_SCRATCH_ALIGN, stride * (size_t)rows_max_threads());
    if (!scratch) return -1;
    int tripped = 0;
    const double work = (double)kp->fpixels * kp->spixels * (kp->steps > 0 ? kp->steps : 1) * 4;
#pragma omp parallel for schedule(dynamic, 1) reduction(| : tripped) if (work >= (double)nb_parallel_min())
    for (int s = 0; s < kp->spixels; s++) {
        vd omega = tod(splat(0.0f));
        const size_t off = (size_t)s * kp->fpixels;
        if (s < kp->roi_ymin || s > kp->roi_ymax) {
            if (image) memset(image + off, 0, (size_t)kp->fpixels * sizeof(float));
            for (int j = 0; j < job->nd; j++) job->row_sums[(size_t)s * job->nd + j] = 0.0;
        } else {
            aj_row(fs, job, s, image ? image + off : NULL, &omega, &tripped, scratch + (size_t)rows_thread_num() * stride);
        }
        row_omega[s] = lanes_sum(omega);
        if (prog) nb_progress_add(prog, 1);
    }
    free(scratch);
    *tripped_out = tripped;
    return 0;
}
