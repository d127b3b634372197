/* nb_pool.h - an ordered pool of writer threads: jobs handed over in order
 * are done on one to NB_POOL_MAX_WORKERS threads and given back in the same
 * order, the first failure in that order the pool's.  nb-sim writes its
 * frames on one (a frame into the pipe while the next renders); nb-convert
 * writes a series' files on several. */
#ifndef NB_POOL_H
#define NB_POOL_H

#include <pthread.h>

#include "nb_error.h"

#define NB_POOL_MAX_WORKERS 4

/* The pool's part of a job: the first member of the caller's job struct */
typedef struct nb_pool_job {
    struct nb_pool_job *next;
    int done;
    nb_status st;  /* the job's outcome, and its message (a worker's own) */
    char msg[1024];
} nb_pool_job;

typedef struct nb_pool_ops {
    /* On a worker: do the job, or (skip: an earlier job failed) only undo
     * what it holds.  *scratch is the worker's own, kept from job to job
     * (NULL at first). */
    nb_status (*run)(nb_pool_job *job, int skip, void **scratch, void *ctx);
    /* On the thread that hands the jobs over, in their order: the job is
     * done with (run or not); free it. */
    void (*release)(nb_pool_job *job, void *ctx);
    /* On a worker as it stops: its scratch (NULL: free()) */
    void (*scratch_free)(void *scratch);
    /* On the handing thread, before it waits for room (NULL: none) */
    void (*before_wait)(void *ctx);
    void *ctx;
} nb_pool_ops;

typedef struct nb_pool {
    int workers; /* started; 0: none (the caller does the jobs itself) */
    pthread_t th[NB_POOL_MAX_WORKERS];
    pthread_mutex_t mu;
    pthread_cond_t cv;
    nb_pool_job *head, *tail; /* handed over and not given back, in order */
    nb_pool_job *next_job;    /* the first not taken by a worker */
    int held, most;           /* jobs handed over and not given back; the most at once */
    int failed;               /* a job failed: the later ones are skipped */
    int quit;
    nb_pool_ops ops;
} nb_pool;

/* Start up to `workers` threads (at most NB_POOL_MAX_WORKERS), with at most
 * `most` jobs held at once (at least 1).  Returns the number started: 0 when
 * none could be (the caller then does its jobs itself). */
int nb_pool_start(nb_pool *P, int workers, int most, const nb_pool_ops *ops);

/* Hand job j over once fewer than `most` are held, giving back the finished
 * ones first.  j is the pool's whatever happens: on an earlier job's
 * failure it is released unrun, and that failure returned (its message set
 * on this thread). */
nb_status nb_pool_submit(nb_pool *P, nb_pool_job *j);

/* Give back the finished jobs at the head (with wait_all, every job, waiting
 * for them): the first failure among them, its message set here. */
nb_status nb_pool_collect(nb_pool *P, int wait_all);

/* Every job given back, then the threads stopped: the first failure (NB_OK
 * for a pool that never started). */
nb_status nb_pool_stop(nb_pool *P);

#endif
