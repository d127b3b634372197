/* nb_pool.c - an ordered pool of writer threads (nb_pool.h).  Workers take
 * the jobs in the order they were handed over; the handing thread gives
 * them back in that order, so a failure is reported as the first failing
 * job's whatever the timing: every job before it was done to its end, and
 * every job after it is only undone (run with skip), none started after the
 * failure is known. */
#include "nb_pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *pool_worker(void *arg)
{
    nb_pool *P = arg;
    void *scratch = NULL;
    pthread_mutex_lock(&P->mu);
    for (;;) {
        while (!P->next_job && !P->quit) pthread_cond_wait(&P->cv, &P->mu);
        nb_pool_job *j = P->next_job;
        if (!j) break;
        P->next_job = j->next;
        const int skip = P->failed;
        pthread_mutex_unlock(&P->mu);
        nb_status st = P->ops.run(j, skip, &scratch, P->ops.ctx);
        pthread_mutex_lock(&P->mu);
        j->st = st, j->done = 1;
        if (st) {
            snprintf(j->msg, sizeof j->msg, "%s", nb_error_message());
            P->failed = 1;
        }
        pthread_cond_broadcast(&P->cv);
    }
    pthread_mutex_unlock(&P->mu);
    if (P->ops.scratch_free) P->ops.scratch_free(scratch);
    else free(scratch);
    return NULL;
}

int nb_pool_start(nb_pool *P, int workers, int most, const nb_pool_ops *ops)
{
    memset(P, 0, sizeof *P);
    P->ops = *ops;
    P->most = most < 1 ? 1 : most;
    if (workers > NB_POOL_MAX_WORKERS) workers = NB_POOL_MAX_WORKERS;
    if (workers < 1 || pthread_mutex_init(&P->mu, NULL)) return 0;
    if (pthread_cond_init(&P->cv, NULL)) {
        pthread_mutex_destroy(&P->mu);
        return 0;
    }
    while (P->workers < workers && !pthread_create(&P->th[P->workers], NULL, pool_worker, P)) P->workers++;
    if (!P->workers) {
        pthread_cond_destroy(&P->cv);
        pthread_mutex_destroy(&P->mu);
    }
    return P->workers;
}

nb_status nb_pool_collect(nb_pool *P, int wait_all)
{
    nb_status st = NB_OK;
    if (!P->workers) return NB_OK;
    pthread_mutex_lock(&P->mu);
    /* after a failure every later job is waited for: they finish at once */
    while (P->head && (P->head->done || wait_all || st)) {
        nb_pool_job *j = P->head;
        if (!j->done) {
            pthread_cond_wait(&P->cv, &P->mu);
            continue;
        }
        P->head = j->next;
        if (!P->head) P->tail = NULL;
        P->held--;
        pthread_mutex_unlock(&P->mu);
        if (j->st && !st) st = nb_error_set(j->st, "%s", j->msg);
        P->ops.release(j, P->ops.ctx);
        pthread_mutex_lock(&P->mu);
    }
    pthread_mutex_unlock(&P->mu);
    return st;
}

nb_status nb_pool_submit(nb_pool *P, nb_pool_job *j)
{
    nb_status st = nb_pool_collect(P, 0);
    int warned = 0;
    pthread_mutex_lock(&P->mu);
    /* the head's state is read under the lock before each wait: a job that
     * finished while the lock was let go is not waited for */
    while (!st && P->held >= P->most) {
        if (P->head->done) {
            pthread_mutex_unlock(&P->mu);
            st = nb_pool_collect(P, 0);
            pthread_mutex_lock(&P->mu);
        } else if (!warned && P->ops.before_wait) {
            pthread_mutex_unlock(&P->mu);
            P->ops.before_wait(P->ops.ctx);
            pthread_mutex_lock(&P->mu);
            warned = 1;
        } else {
            pthread_cond_wait(&P->cv, &P->mu);
        }
    }
    if (!st) {
        j->next = NULL, j->done = 0, j->st = NB_OK;
        if (P->tail) P->tail->next = j;
        else P->head = j;
        P->tail = j;
        if (!P->next_job) P->next_job = j;
        P->held++;
        pthread_cond_broadcast(&P->cv);
    }
    pthread_mutex_unlock(&P->mu);
    if (st) P->ops.release(j, P->ops.ctx); /* nb_pool_collect waited for every job after the failure */
    return st;
}

nb_status nb_pool_stop(nb_pool *P)
{
    if (!P->workers) return NB_OK;
    nb_status st = nb_pool_collect(P, 1);
    pthread_mutex_lock(&P->mu);
    P->quit = 1;
    pthread_cond_broadcast(&P->cv);
    pthread_mutex_unlock(&P->mu);
    for (int i = 0; i < P->workers; i++) pthread_join(P->th[i], NULL);
    pthread_cond_destroy(&P->cv);
    pthread_mutex_destroy(&P->mu);
    P->workers = 0;
    return st;
}
