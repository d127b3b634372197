/* nb_fit_reduce.h - how a fit spread over many processes sums its
 * equations: the caller's reduction.
 *
 * A dataset's frames are independent given the shared values and F: each
 * process fits a contiguous block of them (nb_fit_owns) and the fit sums
 * its gradients, normal equations and counts over the processes (sum) and
 * makes them agree on success or on the first failure (agree) before each
 * collective step.  The fit never calls MPI itself: nb-fit hands it its
 * processes (tools/nb_par.c); a library caller hands it its own, or none
 * (NULL: a single process). */
#ifndef NB_FIT_REDUCE_H
#define NB_FIT_REDUCE_H

#include <stddef.h>

#include "nb_error.h"

typedef struct nb_fit_reduction {
    int rank, size;           /* this process, of how many */
    void *ctx;                /* the caller's, handed to sum and agree */
    /* buf[0..n) summed element-wise over the processes, in place, every one getting the sum */
    nb_status (*sum)(void *ctx, double *buf, size_t n);
    /* NB_OK when every process's st is; else every process gets the first failing one's error and message */
    nb_status (*agree)(void *ctx, nb_status st);
} nb_fit_reduction;

/* A single process: rank 0 of 1, sums and agreements of itself. */
extern const nb_fit_reduction nb_fit_single_process;

/* Frame `frame` of nframes is this process's: contiguous blocks,
 * frames [r n / size, (r + 1) n / size). */
int nb_fit_owns(const nb_fit_reduction *red, long frame, long nframes);

static inline nb_status nb_fit_sum(const nb_fit_reduction *red, double *buf, size_t n)
{
    return red->sum ? red->sum(red->ctx, buf, n) : NB_OK;
}

static inline nb_status nb_fit_agree(const nb_fit_reduction *red, nb_status st)
{
    return red->agree ? red->agree(red->ctx, st) : st;
}

#endif
