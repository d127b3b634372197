/* test_pool.c - nb_pool, the ordered pool of writer threads: jobs given back
 * in the order they were handed over, whatever order they finish in; the
 * first failure in that order reported with its own message however the
 * workers' timing falls; every job released once; the jobs held bounded;
 * the waiting hook and each worker's scratch. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nb_pool.h"
#include "tap.h"

enum { MAXJOBS = 64 };

typedef struct job {
    nb_pool_job base;
    int id;
    int sleep_us; /* how long its run takes */
    int fail;     /* its run fails */
} job;

/* what the runs and releases did, for the checks */
typedef struct record {
    pthread_mutex_t mu;
    int ran[MAXJOBS], skipped[MAXJOBS], released[MAXJOBS];
    int release_order[MAXJOBS], nreleased;
    int submitted, most_held; /* handed over, and the most held at once (submitted - released) */
    int waits;                /* before_wait calls */
    int scratch_made, scratch_freed;
} record;

static record rec;

static void pause_us(int us)
{
    struct timespec t = {0, (long)us * 1000};
    nanosleep(&t, NULL);
}

static nb_status run_job(nb_pool_job *base, int skip, void **scratch, void *ctx)
{
    (void)ctx;
    job *j = (job *)base;
    if (!*scratch) {
        *scratch = malloc(16);
        pthread_mutex_lock(&rec.mu);
        rec.scratch_made++;
        pthread_mutex_unlock(&rec.mu);
    }
    pthread_mutex_lock(&rec.mu);
    (skip ? rec.skipped : rec.ran)[j->id]++;
    int held = rec.submitted - rec.nreleased;
    if (held > rec.most_held) rec.most_held = held;
    pthread_mutex_unlock(&rec.mu);
    if (skip) return NB_OK;
    pause_us(j->sleep_us);
    return j->fail ? nb_error_set(NB_ERR_IO, "job %d failed", j->id) : NB_OK;
}

static void release_job(nb_pool_job *base, void *ctx)
{
    (void)ctx;
    job *j = (job *)base;
    pthread_mutex_lock(&rec.mu);
    rec.released[j->id]++;
    rec.release_order[rec.nreleased++] = j->id;
    pthread_mutex_unlock(&rec.mu);
    free(j);
}

static void free_scratch(void *p)
{
    pthread_mutex_lock(&rec.mu);
    rec.scratch_freed += p != NULL;
    pthread_mutex_unlock(&rec.mu);
    free(p);
}

static void waiting(void *ctx)
{
    (void)ctx;
    rec.waits++; /* on the handing thread only */
}

/* n jobs through a pool of `workers` holding `most`; job i sleeps
 * sleeps[i % nsleeps] us and fails when fails[i] (fails may be NULL).
 * Returns the pool's outcome: the first failing submit's, else the stop's. */
static nb_status run_pool(int workers, int most, int n, const int *sleeps, int nsleeps, const int *fails)
{
    memset(&rec, 0, sizeof rec);
    pthread_mutex_init(&rec.mu, NULL);
    nb_pool P;
    const nb_pool_ops ops = {run_job, release_job, free_scratch, waiting, NULL};
    if (nb_pool_start(&P, workers, most, &ops) != workers) return NB_ERR_NOMEM;
    nb_status st = NB_OK;
    for (int i = 0; i < n && !st; i++) {
        job *j = calloc(1, sizeof *j);
        j->id = i, j->sleep_us = sleeps[i % nsleeps], j->fail = fails ? fails[i] : 0;
        st = nb_pool_submit(&P, &j->base);
        /* counted once in the pool: a run's count of those held is then never above the pool's */
        pthread_mutex_lock(&rec.mu);
        rec.submitted++;
        pthread_mutex_unlock(&rec.mu);
    }
    nb_status stop = nb_pool_stop(&P);
    pthread_mutex_destroy(&rec.mu);
    return st ? st : stop;
}

static int in_order(int n)
{
    int good = rec.nreleased == n;
    for (int i = 0; i < rec.nreleased && good; i++) good = rec.release_order[i] == i && rec.released[i] == 1;
    return good;
}

static void test_order(void)
{
    static const int even[] = {200};
    nb_status st = run_pool(1, 2, 20, even, 1, NULL);
    int once = 1;
    for (int i = 0; i < 20; i++) once &= rec.ran[i] == 1 && !rec.skipped[i];
    ok(st == NB_OK && in_order(20) && once && rec.most_held <= 2,
       "one worker: 20 jobs run once each, given back in order, at most 2 held (%d)", rec.most_held);
    ok(rec.scratch_made == 1 && rec.scratch_freed == 1, "one worker: its scratch made once and freed (%d, %d)",
       rec.scratch_made, rec.scratch_freed);
    /* uneven runs on three workers: they finish out of order */
    static const int uneven[] = {3000, 100, 1500, 50, 700};
    st = run_pool(3, 4, 40, uneven, 5, NULL);
    once = 1;
    for (int i = 0; i < 40; i++) once &= rec.ran[i] == 1 && !rec.skipped[i];
    ok(st == NB_OK && in_order(40) && once && rec.most_held <= 4,
       "three workers, uneven runs: 40 jobs run once each, given back in order, at most 4 held (%d)", rec.most_held);
    ok(rec.scratch_made == rec.scratch_freed && rec.scratch_made >= 1 && rec.scratch_made <= 3,
       "three workers: each one's scratch freed (%d made, %d freed)", rec.scratch_made, rec.scratch_freed);
    ok(rec.waits > 0, "the waiting hook ran before the handing thread waited (%d times)", rec.waits);
}

static void test_failure(void)
{
    /* job 7 fails slowly, job 9 fails at once: whichever finishes first,
     * the pool's failure is job 7's, with its own message */
    static const int sleeps[] = {300, 300, 300, 300, 300, 300, 300, 8000, 300, 0, 300, 300};
    int fails[MAXJOBS] = {0};
    fails[7] = fails[9] = 1;
    for (int workers = 1; workers <= 3; workers++) {
        nb_status st = run_pool(workers, workers + 1, 30, sleeps, 12, fails);
        int before = 1, after_ok = 1;
        for (int i = 0; i < 7; i++) before &= rec.ran[i] == 1;
        /* a job after the failure is run only if a worker took it before the failure was known */
        for (int i = 8; i < 30; i++) after_ok &= rec.ran[i] + rec.skipped[i] <= 1;
        int released_once = 1;
        for (int i = 0; i < rec.nreleased; i++) released_once &= rec.released[rec.release_order[i]] == 1;
        ok(st == NB_ERR_IO && !strcmp(nb_error_message(), "job 7 failed") && before && after_ok && released_once &&
               rec.release_order[7] == 7,
           "%d worker(s): the first failure in order is reported (%s), every job before it run, each released once",
           workers, nb_error_message());
        ok(rec.nreleased == rec.submitted, "%d worker(s): every job handed over released (%d of %d)", workers,
           rec.nreleased, rec.submitted);
        if (workers == 1) /* one worker takes job 8 after job 7 failed */
            ok(rec.skipped[8] == 1 && rec.ran[8] == 0, "1 worker: the job after the failure is skipped, not run");
    }
}

static void test_none(void)
{
    nb_pool P;
    const nb_pool_ops ops = {run_job, release_job, NULL, NULL, NULL};
    ok(nb_pool_start(&P, 0, 1, &ops) == 0 && P.workers == 0 && nb_pool_stop(&P) == NB_OK,
       "no workers asked for: none started, and stopping it is a no-op");
    ok(nb_pool_start(&P, 99, 1, &ops) == NB_POOL_MAX_WORKERS && nb_pool_stop(&P) == NB_OK,
       "at most NB_POOL_MAX_WORKERS workers (%d)", NB_POOL_MAX_WORKERS);
}

int main(void)
{
    test_order();
    test_failure();
    test_none();
    return tap_done();
}
