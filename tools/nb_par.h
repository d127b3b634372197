/* nb_par.h - nb-fit across processes (Open MPI), or a single process.
 *
 * Frames are independent given the shared parameters and F: `mpirun -n K
 * nb-fit ...` gives each process (rank) a contiguous block of the frames
 * (nb_par_owns), sums the shared gradients and normal equations over the
 * processes (nb_par_sum) and makes every process agree on success or on the
 * first failure (nb_par_agree) before each collective step.  Rank 0 alone
 * writes the stream: the others' standard output is /dev/null from
 * nb_par_init on (mpirun gathers every rank's standard output into its own,
 * so that a stray write, or the ABORT record nb_exit_on_error leaves, would
 * otherwise land in the middle of rank 0's stream).  Built without MPI
 * (no mpicc when it was built, docs/architecture.md "nb-fit across
 * processes") every call is that of a single process.
 */
#ifndef NB_PAR_H
#define NB_PAR_H

#include <stddef.h>

#include "nb_error.h"

typedef struct nb_par { int rank, size; int mpi; /* 1: MPI_Init was called */ } nb_par;

/* Join the processes mpirun started (MPI_Init) when the program was built with MPI (NB_HAVE_MPI) and
 * its environment says mpirun started it (OMPI_COMM_WORLD_SIZE, PMIX_RANK, PMI_RANK ...); else a
 * single process, rank 0 of 1, and MPI is never initialised (so that nb-fit run plainly as root
 * never meets Open MPI's refusal). Started by mpirun but built without MPI: an error saying so
 * (NB_ERR_UNSUPPORTED; mpirun -n 1, one process by its environment, runs as a single one). */
nb_status nb_par_init(nb_par *p, int *argc, char ***argv);

/* Sum buf[0..n) element-wise over the processes, in place; every rank gets the sum (MPI_Allreduce, MPI_SUM).
 * A single process: nothing. */
nb_status nb_par_sum(const nb_par *p, double *buf, size_t n);

/* Every rank's status together: NB_OK when every rank's st is NB_OK; else every rank returns the error
 * of the lowest failing rank, with that rank's message (nb_error's text, broadcast), prefixed
 * "process K: " when K != this rank. Called at the points where ranks must agree before going on
 * (so that one rank's failure never leaves the others waiting in a collective).
 * On its failure main exits at once, nb_exit_on_error(st) without nb_par_finalize: the exit waits
 * for every rank's (their messages said) and finalises, as mpirun stops the job at the first rank
 * to exit with a failure.  A rank that exits on a failure the others did not agree to (nb_par_abort,
 * or a plain exit) does not wait: mpirun then ends the others. */
nb_status nb_par_agree(const nb_par *p, nb_status st);

/* Frame `frame` of nframes is this rank's: contiguous blocks, frames [r*n/size, (r+1)*n/size). */
int nb_par_owns(const nb_par *p, long frame, long nframes);

/* Before main's successful end (a rank that ends without it fails the job, mpirun says) */
void nb_par_finalize(nb_par *p);   /* MPI_Finalize when initialised */

/* A failure after which the others cannot go on: MPI_Abort(code) when MPI, else nothing (main exits) */
void nb_par_abort(const nb_par *p, int code);

#endif
