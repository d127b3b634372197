/* nb_bench.h - what nb-bench's parts share: the configurations, the options,
 * a benchmark's context, the processes it runs and the results it keeps.
 *
 *   nb-bench.c          the command line, finding the stages, main()
 *   nb_bench_configs.c  the named configurations, and the data they read
 *   nb_bench_proc.c     argument vectors, a chain of processes run and
 *                       waited for, run directories
 *   nb_bench_run.c      one run of ours, of the drop-in and of the
 *                       reference; a configuration's repetitions summarised
 *   nb_bench_report.c   the table and the JSON
 */
#ifndef NB_BENCH_H
#define NB_BENCH_H

#include <stdio.h>
#include <sys/types.h>

#include "nb_error.h"
#include "nb_options.h"

/* ---- configurations (nb_bench_configs.c) -------------------------------- */

/* Flags are single words separated by single spaces; @HKL@ stands for the
 * P1.hkl the configurations read (bench_find_data). */
typedef struct bench_config {
    const char *name;
    const char *flags;
    const char *sim_flags; /* more for nb-sim (our pipeline only), or NULL */
} bench_config;

#define MAX_CONFIGS 64 /* room in bench_opts; nb_bench_configs.c checks its table fits */
extern const bench_config configs[];
extern const int config_count; /* entries of configs[] */

/* The file the configurations' @HKL@ names, looked for in $NB_DATADIR, then
 * in share/nb beside the executable's directory (an installed nb: bindir/
 * ../share/nb/bench/P1.hkl), then in the source tree the executable was
 * built in (bindir/../tests/golden/inputs/P1.hkl).  Returns the first found
 * (absolute, malloc'ed), else NULL with *where (malloc'ed) naming where it
 * looked, for the message of a configuration that needs it. */
char *bench_find_hkl(const char *bindir, char **where);

/* ---- options (nb-bench.c) ------------------------------------------------ */

#define MAX_THREAD_COUNTS 64
enum { DEVICE_CPU, DEVICE_CUDA };
/* indexed by the value: devices[o->device].word is the word nb-sim takes */
extern const nb_opt_choice devices[];

typedef struct bench_opts {
    char *ref; /* resolved path, or NULL */
    int reps;
    int configs[MAX_CONFIGS], nconfigs; /* indices into configs[] */
    int threads[MAX_THREAD_COUNTS], nthreads;
    const char *json;
    int list;
    int dropin;  /* also time the drop-in */
    int device;  /* nb-sim's --device: DEVICE_CPU or DEVICE_CUDA */
    char *dir;   /* where the run directories go (resolved), or NULL */
    const char *output; /* -o FILE: the table's, or NULL */
} bench_opts;

typedef struct bench_ctx {
    const bench_opts *o;
    char *bindir; /* where nb-bench and the stages live */
    char *dropin; /* the drop-in script */
    char *hkl;    /* the configurations' P1.hkl, or NULL: not found (hkl_where says where it was looked for) */
    char *hkl_where;
    char *topdir; /* the temporary directory of this benchmark */
    char **envp;  /* environ with OMP_NUM_THREADS of the runs */
    char omp[32];
} bench_ctx;

/* ---- processes (nb_bench_proc.c) ----------------------------------------- */

typedef struct arglist {
    char **v; /* NULL-terminated */
    int n, cap;
} arglist;

void args_push(arglist *a, const char *s);
/* Append a configuration's flags, word by word (@HKL@ as hkl, when not NULL). */
void args_push_flags(arglist *a, const char *flags, const char *hkl);
void args_free(arglist *a);
/* "dir/name", malloc'ed. */
char *path_join(const char *dir, const char *name);

typedef struct stage {
    const char *name; /* also the name of its .out/.err files in the run directory */
    arglist args;
    pid_t pid;
    int status;   /* from wait4 */
    long rss_kib; /* ru_maxrss */
} stage;

/* The command as a shell would read it (the stages joined by sep). */
char *stage_command(const stage *s, int n, const char *sep);
/* Run the stages as one pipeline in `dir` with the environment `envp` and
 * wait for all of them.  Standard input of the first is /dev/null, standard
 * output of the last goes to <name>.out, every standard error to <name>.err. */
nb_status run_chain(stage *s, int n, const char *dir, char **envp);
/* mkdtemp, with a message */
nb_status make_dir(char *templ);
/* Remove a directory of plain files (what one run leaves). */
void remove_dir(const char *dir);

/* ---- runs and results (nb_bench_run.c) ----------------------------------- */

extern const char *ours_stage_names[4];

/* One program with the reference's command line: the reference (with -roi 0 0
 * 0 0 for RUN_REF_ROI) or the drop-in. */
typedef enum { RUN_REF, RUN_REF_ROI, RUN_DROPIN } single_run;

/* the stages of our pipeline, and of a one-program run, for a configuration */
void build_ours(const bench_ctx *c, const bench_config *cfg, int threads, stage s[4]);
void build_single(const bench_ctx *c, const bench_config *cfg, single_run kind, stage *s);
/* A configuration's flags as one shell-quoted string. */
char *config_flags(const bench_ctx *c, const bench_config *cfg);

typedef struct stat3 {
    double median, min, max;
} stat3;

/* A configuration at one thread count, over the repetitions. */
typedef struct result {
    const bench_config *cfg;
    int threads;
    long pixels;
    char kernel[32];
    stat3 ours_whole, ours_render;
    stat3 gpu_kernel, gpu_copies; /* --device cuda */
    char gpu[160];
    long ours_rss[4];
    int have_dropin;
    stat3 dropin_whole;
    long dropin_rss;
    int have_ref;
    stat3 ref_whole, ref_setup;
    double ref_render; /* estimate; NAN when not positive */
    long ref_rss;
} result;

/* One configuration at every thread count (res[o->nthreads]): each
 * repetition runs the thread counts in turn. */
nb_status bench_config_runs(bench_ctx *c, const bench_config *cfg, result *res);
/* num / den, NAN unless both are finite and den > 0 */
double ratio(double num, double den);
/* the stage with the largest peak memory */
int largest_stage(const long rss[4]);

/* ---- reports (nb_bench_report.c) ----------------------------------------- */

void print_table(FILE *fp, const bench_ctx *c, const result *r, int n);
void write_json(FILE *fp, const bench_ctx *c, const result *r, int n, const char *cmdline);

#endif
