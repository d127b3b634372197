/* nb_par.c - nb-fit's processes: the frames split over the ranks mpirun
 * started, the shared sums reduced over them, and one outcome for all (a
 * rank's failure told to every rank, so that none waits in a collective for
 * a rank that has given up).  Built with MPI (-DNB_HAVE_MPI, where mpicc was
 * found) it joins mpirun's processes; otherwise, or when mpirun did not start
 * the program, it is a single process, rank 0 of 1, and never touches MPI.
 */
#include "nb_par.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef NB_HAVE_MPI
#include <mpi.h>
#endif

/* The variables a launcher sets in each process it starts: Open MPI's mpirun
 * (OMPI_COMM_WORLD_*), a PMIx launcher (Open MPI 4 and 5, srun --mpi=pmix)
 * and a PMI one (MPICH's hydra, srun --mpi=pmi2).  Slurm's own SLURM_PROCID
 * is not one: a plain batch job has it too, and is a single process. */
static const char *const launcher_vars[] = {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "PMIX_RANK",
                                            "PMI_RANK", "PMI_SIZE"};

/* The name of the first launcher variable set, or NULL */
static const char *launched_by(void)
{
    for (size_t i = 0; i < sizeof launcher_vars / sizeof *launcher_vars; i++)
        if (getenv(launcher_vars[i])) return launcher_vars[i];
    return NULL;
}

#ifndef NB_HAVE_MPI
/* The number of processes the launcher says it started; -1 when it does not say */
static long launched_size(void)
{
    const char *names[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        const char *v = getenv(names[i]);
        char *end;
        if (!v || !*v) continue;
        long n = strtol(v, &end, 10);
        if (*end == '\0' && n >= 1) return n;
    }
    return -1;
}
#endif

static void single(nb_par *p)
{
    p->rank = 0;
    p->size = 1;
    p->mpi = 0;
}

#ifdef NB_HAVE_MPI
/* MPI is initialised and not yet finalised */
static int mpi_live;
/* The last nb_par_agree failed: every rank knows, and each will exit */
static int agreed_failure;

/* At the exit after an agreed failure (main's nb_exit_on_error, which has
 * printed this rank's message by then): wait for every rank to get here,
 * then finalise.  mpirun stops the whole job when the first rank exits
 * with a failure; waiting first means that no rank is stopped before it has
 * said why.  An exit without an agreed failure (a rank that failed alone)
 * does not wait: the others may be in a collective it will never join, and
 * mpirun ends them when it sees this one go. */
static void finalize_at_exit(void)
{
    if (!mpi_live || !agreed_failure) return;
    fflush(stdout);
    fflush(stderr);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    mpi_live = 0;
}

/* Only rank 0 writes the stream: the others' standard output goes nowhere
 * (mpirun merges every rank's into its own) */
static nb_status quiet_stdout(void)
{
    fflush(stdout);
    int fd = open("/dev/null", O_WRONLY);
    if (fd < 0 || dup2(fd, STDOUT_FILENO) < 0) {
        if (fd >= 0) close(fd);
        return nb_error_set(NB_ERR_IO, "cannot send a secondary process's standard output to /dev/null");
    }
    close(fd);
    return NB_OK;
}

/* An MPI call's failure (the world's error handler returns them) as a status */
static nb_status mpi_failed(int rc, const char *what)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "MPI error %d", rc);
    return nb_error_set(NB_ERR_IO, "%s: %s", what, text);
}

static nb_status join_mpi(nb_par *p, int *argc, char ***argv)
{
    int provided = 0;
    /* only the main thread calls MPI: OpenMP's threads compute between the calls */
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        return nb_error_set(NB_ERR_IO, "cannot join the processes mpirun started (MPI_Init failed)");
    p->mpi = mpi_live = 1;
    atexit(finalize_at_exit);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rc = MPI_Comm_rank(MPI_COMM_WORLD, &p->rank);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_size(MPI_COMM_WORLD, &p->size);
    if (rc != MPI_SUCCESS) return mpi_failed(rc, "cannot tell this process's rank");
    return p->rank == 0 ? NB_OK : quiet_stdout();
}
#endif

nb_status nb_par_init(nb_par *p, int *argc, char ***argv)
{
    single(p);
    const char *var = launched_by();
    if (!var) return NB_OK;
#ifdef NB_HAVE_MPI
    return join_mpi(p, argc, argv);
#else
    (void)argc;
    (void)argv;
    /* mpirun -n 1: one process, whose answer is the single process's */
    if (launched_size() == 1) return NB_OK;
    return nb_error_set(NB_ERR_UNSUPPORTED,
                        "started by mpirun (%s is set) but built without MPI (mpicc was not found when it "
                        "was built): run it as one process, or build it again with Open MPI's mpicc "
                        "(Debian: libopenmpi-dev)", var);
#endif
}

nb_status nb_par_sum(const nb_par *p, double *buf, size_t n)
{
#ifdef NB_HAVE_MPI
    if (!p->mpi || p->size < 2) return NB_OK;
    /* MPI counts are ints: a longer vector in pieces */
    for (size_t at = 0; at < n;) {
        size_t m = n - at < (size_t)INT_MAX ? n - at : (size_t)INT_MAX;
        int rc = MPI_Allreduce(MPI_IN_PLACE, buf + at, (int)m, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS) return mpi_failed(rc, "summing over the processes");
        at += m;
    }
#else
    (void)p;
    (void)buf;
    (void)n;
#endif
    return NB_OK;
}

#ifdef NB_HAVE_MPI
/* What the first failing rank tells the others: its status and message, and
 * for a failure upstream (an ABORT record) the stage and its exit status */
struct failure {
    int status, upstream_status;
    char tool[64];
    char message[4096];
};

static nb_status agree_mpi(const nb_par *p, nb_status st)
{
    int mine = st != NB_OK ? p->rank : p->size, first = p->size;
    agreed_failure = 0;
    int rc = MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) return mpi_failed(rc, "agreeing with the other processes");
    if (first >= p->size) return NB_OK;
    static struct failure f;
    memset(&f, 0, sizeof f);
    if (p->rank == first) {
        f.status = (int)st;
        f.upstream_status = nb_upstream_status();
        snprintf(f.tool, sizeof f.tool, "%s", nb_upstream_tool());
        snprintf(f.message, sizeof f.message, "%s", nb_error_message());
    }
    rc = MPI_Bcast(&f, (int)sizeof f, MPI_BYTE, first, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) return mpi_failed(rc, "hearing how another process failed");
    agreed_failure = 1;
    if (p->rank == first) return st;
    f.tool[sizeof f.tool - 1] = f.message[sizeof f.message - 1] = '\0';
    /* a failure upstream keeps its stage's exit status here too; told, not quiet:
     * this process's input is not where that stage said why */
    if (f.status == NB_ERR_UPSTREAM)
        return nb_error_upstream(f.tool, f.upstream_status, 0, "process %d: %.4000s", first, f.message);
    return nb_error_set((nb_status)f.status, "process %d: %.4000s", first, f.message);
}
#endif

nb_status nb_par_agree(const nb_par *p, nb_status st)
{
#ifdef NB_HAVE_MPI
    if (p->mpi && p->size > 1) return agree_mpi(p, st);
#else
    (void)p;
#endif
    return st;
}

int nb_par_owns(const nb_par *p, long frame, long nframes)
{
    long long size = p->size > 0 ? p->size : 1, rank = p->rank;
    if (frame < 0 || frame >= nframes) return 0;
    long long lo = rank * nframes / size, hi = (rank + 1) * nframes / size;
    return frame >= lo && frame < hi;
}

void nb_par_finalize(nb_par *p)
{
#ifdef NB_HAVE_MPI
    if (p->mpi && mpi_live) MPI_Finalize();
    mpi_live = 0;
#endif
    p->mpi = 0;
}

void nb_par_abort(const nb_par *p, int code)
{
#ifdef NB_HAVE_MPI
    if (p->mpi) {
        fflush(stdout);
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, code);
    }
#else
    (void)p;
    (void)code;
#endif
}
