/* par-check: nb-fit's parallel layer (tools/nb_par.c) run as a program, alone
 * or under mpirun, so that tests/cli/mpi.bats can check it on real processes.
 *
 *   par-check [--fail-rank R[,R...]] [--bytes N]
 *   par-check --built-with-mpi      prints "yes" or "no" (the build had mpicc)
 *
 * Each process checks, then agrees with the others (nb_par_agree) before the
 * next step, as nb-fit does:
 *   - it sees as many processes as mpirun says it started (OMPI_COMM_WORLD_SIZE);
 *   - nb_par_sum of rank-dependent vectors (a short one and one of 2^17 numbers)
 *     gives every rank the exact sums;
 *   - nb_par_owns, for 0..12, 101 and 1000 frames: every frame has exactly one
 *     owner, the owners' ranks rise with the frame (contiguous blocks in rank
 *     order) and the blocks' sizes differ by at most one;
 *   - with --fail-rank, those ranks fail on purpose ("a deliberate failure on
 *     process R of S") and every rank must come back from nb_par_agree with the
 *     lowest one's status and message; each then says its message and exits 1.
 * On success every rank writes "rank R of S ok" on standard output, or with
 * --bytes N the N bytes (7 i + 3) mod 256: only rank 0's reach mpirun's (the
 * others' standard output is /dev/null), and binary data passes unchanged.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_error.h"
#include "nb_par.h"

/* Element i of rank r's vector, and the sum over `size` ranks (exact in doubles) */
static double term(int rank, size_t i) { return (rank + 1) * (double)(i + 1) + 0.25 * rank; }
static double total(int size, size_t i)
{
    return (double)(i + 1) * size * (size + 1) / 2 + 0.25 * size * (size - 1) / 2;
}

static nb_status check_size(const nb_par *p)
{
    const char *v = getenv("OMPI_COMM_WORLD_SIZE");
    if (v && atoi(v) != p->size)
        return nb_error_set(NB_ERR_DATA, "mpirun started %s processes but nb_par sees %d", v, p->size);
    if (p->rank < 0 || p->rank >= p->size)
        return nb_error_set(NB_ERR_DATA, "rank %d is not one of %d", p->rank, p->size);
    return NB_OK;
}

static nb_status check_sum(const nb_par *p, size_t n)
{
    double *v = malloc(n * sizeof *v);
    if (!v) return nb_error_set(NB_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) v[i] = term(p->rank, i);
    nb_status st = nb_par_sum(p, v, n);
    for (size_t i = 0; i < n && st == NB_OK; i++)
        if (v[i] != total(p->size, i))
            st = nb_error_set(NB_ERR_DATA, "sum of %zu numbers: element %zu is %.17g, not %.17g", n, i, v[i],
                              total(p->size, i));
    free(v);
    return st;
}

/* Every frame of nframes owned once, in rank order, by blocks of sizes that
 * differ by at most one: each frame's owners (how many, their ranks + 1) and
 * each rank's count of frames, summed over the ranks */
static nb_status check_owns(const nb_par *p, long nframes)
{
    size_t n = 2 * (size_t)nframes + (size_t)p->size;
    double *v = calloc(n, sizeof *v);
    if (!v) return nb_error_set(NB_ERR_NOMEM, "out of memory");
    double *owners = v, *owner = v + nframes, *count = v + 2 * nframes;
    for (long f = 0; f < nframes; f++)
        if (nb_par_owns(p, f, nframes)) {
            owners[f] = 1;
            owner[f] = p->rank + 1;
            count[p->rank]++;
        }
    nb_status st = nb_par_owns(p, -1, nframes) || nb_par_owns(p, nframes, nframes)
                       ? nb_error_set(NB_ERR_DATA, "%ld frames: a frame outside them is owned", nframes)
                       : nb_par_sum(p, v, n);
    for (long f = 0; f < nframes && st == NB_OK; f++) {
        if (owners[f] != 1)
            st = nb_error_set(NB_ERR_DATA, "%ld frames: frame %ld has %g owners", nframes, f, owners[f]);
        else if (f > 0 && owner[f] < owner[f - 1])
            st = nb_error_set(NB_ERR_DATA, "%ld frames: frame %ld is rank %g's, after rank %g's", nframes, f,
                              owner[f] - 1, owner[f - 1] - 1);
    }
    double least = (double)nframes, most = 0;
    for (int r = 0; r < p->size; r++) {
        if (count[r] < least) least = count[r];
        if (count[r] > most) most = count[r];
    }
    if (st == NB_OK && most - least > 1)
        st = nb_error_set(NB_ERR_DATA, "%ld frames: blocks of %g and %g frames", nframes, least, most);
    free(v);
    return st;
}

static int failing(const char *list, int rank)
{
    for (const char *s = list; s && *s;) {
        char *end;
        long r = strtol(s, &end, 10);
        if (end == s) return 0;
        if (r == rank) return 1;
        s = *end == ',' ? end + 1 : end;
    }
    return 0;
}

/* the outcome every rank agreed on */
static void step(nb_par *p, nb_status st)
{
    /* on failure every rank says why and exits: the exit finalises MPI (nb_par.h) */
    nb_exit_on_error(nb_par_agree(p, st));
}

int main(int argc, char **argv)
{
    nb_set_tool_name("par-check");
    const char *fail = NULL;
    long bytes = -1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--built-with-mpi")) {
#ifdef NB_HAVE_MPI
            puts("yes");
#else
            puts("no");
#endif
            return 0;
        } else if (!strcmp(argv[i], "--fail-rank") && i + 1 < argc) {
            fail = argv[++i];
        } else if (!strcmp(argv[i], "--bytes") && i + 1 < argc) {
            bytes = atol(argv[++i]);
        } else {
            fprintf(stderr, "usage: par-check [--fail-rank R[,R...]] [--bytes N] | --built-with-mpi\n");
            return 2;
        }
    }
    nb_par p;
    nb_exit_on_error(nb_par_init(&p, &argc, &argv));
    step(&p, check_size(&p));
    step(&p, check_sum(&p, 5));
    step(&p, check_sum(&p, (size_t)1 << 17));
    nb_status st = NB_OK;
    for (long n = 0; n <= 12 && st == NB_OK; n++) st = check_owns(&p, n);
    if (st == NB_OK) st = check_owns(&p, 101);
    if (st == NB_OK) st = check_owns(&p, 1000);
    step(&p, st);
    if (fail) {
        st = failing(fail, p.rank) ? nb_error_set(NB_ERR_DATA, "a deliberate failure on process %d of %d", p.rank,
                                                  p.size)
                                   : NB_OK;
        st = nb_par_agree(&p, st);
        /* a rank that failed on purpose fails whatever agree says; the others
         * must have heard of it when any rank of those asked for is there */
        int any = 0;
        for (int r = 0; r < p.size; r++) any |= failing(fail, r);
        if (st == NB_OK && any)
            st = nb_error_set(NB_ERR_DATA, "nb_par_agree returned success although a process failed");
        nb_exit_on_error(st);
    }
    if (bytes >= 0)
        for (long i = 0; i < bytes; i++) putchar((int)((7 * i + 3) % 256));
    else
        printf("rank %d of %d ok\n", p.rank, p.size);
    if (fflush(stdout) != 0) return 1;
    nb_par_finalize(&p);
    return 0;
}
