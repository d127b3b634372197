/* nb-bench: wall time, render time, throughput and peak memory of our pipeline
 * on named configurations, optionally against a reference nanoBragg binary. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nb_cli.h"
#include "nb_options.h"
#include "nb_stream.h"
#include "nb_util.h"

extern char **environ;

static const nb_opt_table table;

static const nb_tool_info tool = {
    "nb-bench",
    NB_BENCH,
    "[--ref PATH] [--dropin] [--device cpu|cuda] [--dir DIR] [--reps N] [--config NAME ...] [--threads LIST]\n"
    "       [--json FILE] [--list]",
    "benchmark the nb pipeline on named configurations, optionally against a reference nanoBragg",
    "nb-bench runs each configuration (--list shows them with their nanoBragg flags) through\n"
    "  nb-geom FLAGS | nb-hkl | nb-sim --threads T -v --device D | nb-convert -o float.bin -o int.img\n"
    "and, with --ref PATH, through\n"
    "  PATH -nonoise -nopgm -floatfile float.bin -intfile int.img FLAGS\n"
    "with --dropin, through the drop-in exactly as a user runs it in place of the reference\n"
    "  nanobragg -nonoise -nopgm -floatfile float.bin -intfile int.img FLAGS\n"
    "each run in a fresh temporary directory (under --dir DIR, else $TMPDIR, else /tmp) with\n"
    "OMP_NUM_THREADS=T, interleaved: ours, drop-in, ref, ref -roi 0 0 0 0 at each thread count\n"
    "in turn, then the next repetition.  For each\n"
    "configuration and thread count it reports the median, minimum and maximum wall time of\n"
    "the whole process (first fork to last exit), the render time, the throughput (pixels /\n"
    "median render time), the peak memory (largest max RSS of any stage, over the\n"
    "repetitions) and the ratios ref/ours; with several thread counts, the thread scaling too\n"
    "(median at the fewest / median at more).\n"
    "Our render time is nb-sim's own measurement, the time it logs with -v.  The\n"
    "reference does not print one: it is estimated as its median whole-process time minus the\n"
    "median time of the same command with -roi 0 0 0 0 (one pixel rendered, the same set-up\n"
    "and file writing).  With --device cuda nb-sim renders on the GPU, and the table adds\n"
    "the GPU's kernel time and the time of its host-device copies (both on the GPU's clock,\n"
    "as nb-sim -v logs them) beside the render and whole-process times; the JSON names the\n"
    "GPU, its driver and the CUDA versions.  The stages are found beside nb-bench.  See\n"
    "bench/README.md.",
    &table,
    "  nb-bench --config seed-1024 --reps 3\n"
    "  nb-bench --ref /path/to/nanoBragg --threads 1,2 --json bench/results.json\n"
    "  nb-bench --ref /path/to/nanoBragg --dropin --config seed-4096 --dir /dev/shm\n"
    "  nb-bench --device cuda --threads 16 --json bench/results/gpu.json\n",
    NULL,
};

/* ---- configurations ------------------------------------------------------- */

/* Flags are single words separated by single spaces; @HKL@ stands for the
 * P1.hkl of the golden test inputs. */
#define SEED_FLAGS "-default_F 100 -cell 100 100 100 90 90 90 -lambda 6.2 -N 5 -distance 100 -detpixels "
typedef struct bench_config {
    const char *name;
    const char *flags;
    const char *sim_flags; /* more for nb-sim (our pipeline only), or NULL */
} bench_config;

/* the derivative configurations: one model (1024^2, 4 domains, 2x2 sub-pixels),
 * the image alone on the fast and the double path, and with k derivatives on
 * each (deriv-k: the fast path's, deriv-double-k: the double path's) */
#define DERIV_FLAGS                                                                                                  \
    "-default_F 100 -cell 70 80 90 88 95 91 -misset 10 5 3 -lambda 1 -N 8 -distance 150 -detpixels 1024 "         \
    "-pixel 0.1 -mosaic 0.2 -mosaic_domains 4 -oversample 2"

static const bench_config configs[] = {
    {"seed-256", SEED_FLAGS "256", NULL},
    {"seed-512", SEED_FLAGS "512", NULL},
    {"seed-1024", SEED_FLAGS "1024", NULL},
    {"seed-2048", SEED_FLAGS "2048", NULL},
    {"seed-4096", SEED_FLAGS "4096", NULL},
    {"mosaic", SEED_FLAGS "1024 -mosaic 0.5 -mosaic_domains 20 -phi 0.1 -osc 1 -phisteps 5", NULL},
    /* 13 divergence directions (a 5 x 5 grid cut to a disc) x 5 wavelengths = 65 sources */
    {"sources", "-default_F 100 -cell 100 100 100 90 90 90 -lambda 1 -N 5 -distance 100 -detpixels 1024 "
                "-divergence 0.3 -divsteps 5 -dispersion 0.5 -dispsteps 5", NULL},
    {"oversample", SEED_FLAGS "1024 -oversample 3 -detector_thick 450 -detector_abs 320 -thicksteps 3", NULL},
    /* 600 mm keeps every tricubic neighbourhood inside P1.hkl's +-14 grid
     * (|h| <= 11 at the corners), so the reference keeps interpolating */
    {"tricubic", "-hkl @HKL@ -cell 70 80 90 75 85 95 -misset 10 5 3 -lambda 1.0 -N 2 -distance 600 "
                 "-detpixels 1024 -pixel 0.1 -interpolate -mosaic 0.3 -mosaic_domains 10", NULL},
    {"deriv-image", DERIV_FLAGS, NULL},
    {"deriv-image-double", DERIV_FLAGS, "-precision double"},
#define DERIV_NAMES_1 "distance"
#define DERIV_NAMES_3 "distance,Xbeam,Ybeam"
#define DERIV_NAMES_8 "distance,Xbeam,Ybeam,misset_x,misset_y,misset_z,cell_a,mosaic"
    {"deriv-1", DERIV_FLAGS, "-precision single --grad " DERIV_NAMES_1},
    {"deriv-3", DERIV_FLAGS, "-precision single --grad " DERIV_NAMES_3},
    {"deriv-8", DERIV_FLAGS, "-precision single --grad " DERIV_NAMES_8},
    {"deriv-double-1", DERIV_FLAGS, "-precision double --grad " DERIV_NAMES_1},
    {"deriv-double-3", DERIV_FLAGS, "-precision double --grad " DERIV_NAMES_3},
    {"deriv-double-8", DERIV_FLAGS, "-precision double --grad " DERIV_NAMES_8},
};
#define NCONFIGS ((int)(sizeof configs / sizeof configs[0]))
#define MAX_THREAD_COUNTS 64

/* ---- argument vectors ------------------------------------------------------ */

typedef struct arglist {
    char **v; /* NULL-terminated */
    int n, cap;
} arglist;

static void args_push(arglist *a, const char *s)
{
    if (a->n + 2 > a->cap) {
        a->cap = a->cap ? 2 * a->cap : 32;
        a->v = realloc(a->v, (size_t)a->cap * sizeof *a->v);
        if (!a->v) nb_exit_on_error(nb_error_set(NB_ERR_NOMEM, "out of memory"));
    }
    a->v[a->n++] = nb_xstrdup(s);
    a->v[a->n] = NULL;
}

/* Append a configuration's flags, word by word. */
static void args_push_flags(arglist *a, const char *flags, const char *hkl)
{
    char *copy = nb_xstrdup(flags), *save = NULL;
    for (char *w = strtok_r(copy, " ", &save); w; w = strtok_r(NULL, " ", &save))
        args_push(a, strcmp(w, "@HKL@") ? w : hkl);
    free(copy);
}

static void args_free(arglist *a)
{
    for (int i = 0; i < a->n; i++) free(a->v[i]);
    free(a->v);
    memset(a, 0, sizeof *a);
}

/* "dir/name", malloc'ed. */
static char *path_join(const char *dir, const char *name)
{
    nb_strbuf sb;
    nb_strbuf_init(&sb);
    nb_strbuf_printf(&sb, "%s/%s", dir, name);
    return nb_strbuf_take(&sb);
}

/* ---- options --------------------------------------------------------------- */

typedef struct bench_opts {
    char *ref; /* resolved path, or NULL */
    int reps;
    int configs[NCONFIGS], nconfigs; /* indices into configs[] */
    int threads[MAX_THREAD_COUNTS], nthreads;
    const char *json;
    int list;
    int dropin;  /* also time the drop-in */
    int device;  /* nb-sim's --device: DEVICE_CPU or DEVICE_CUDA */
    char *dir;   /* where the run directories go (resolved), or NULL */
    const char *output; /* -o FILE: the table's, or NULL */
} bench_opts;

/* --config NAME[,NAME...] */
static nb_status add_configs(const nb_opt_args *a)
{
    bench_opts *o = a->dest;
    const char *list = a->vals[0];
    char *copy = nb_xstrdup(list), *save = NULL;
    nb_status st = NB_OK;
    int names = 0;
    for (char *name = strtok_r(copy, ",", &save); name && !st; name = strtok_r(NULL, ",", &save), names++) {
        int found = 0;
        for (int c = 0; c < NCONFIGS; c++)
            if (!strcmp(name, configs[c].name) || !strcmp(name, "all")) {
                found = 1;
                int seen = 0;
                for (int k = 0; k < o->nconfigs; k++) seen |= o->configs[k] == c;
                if (!seen) o->configs[o->nconfigs++] = c;
            }
        if (!found)
            st = nb_error_set(NB_ERR_USAGE, "unknown configuration '%s' ('nb-bench --list' shows them)", name);
    }
    if (!st && !names) st = nb_error_set(NB_ERR_USAGE, "option --config needs a configuration name");
    free(copy);
    return st;
}

/* --threads N[,N...] */
static nb_status parse_threads(const nb_opt_args *a)
{
    bench_opts *o = a->dest;
    const char *list = a->vals[0];
    char *copy = nb_xstrdup(list), *save = NULL;
    nb_status st = NB_OK;
    o->nthreads = 0;
    for (char *w = strtok_r(copy, ",", &save); w && !st; w = strtok_r(NULL, ",", &save)) {
        int t;
        if ((st = nb_parse_int(w, &t, "option --threads"))) break;
        if (t < 1 || t > 4096)
            st = nb_error_set(NB_ERR_USAGE, "option --threads: %d is not a sensible thread count", t);
        else if (o->nthreads == MAX_THREAD_COUNTS)
            st = nb_error_set(NB_ERR_USAGE, "option --threads: at most %d counts", MAX_THREAD_COUNTS);
        else
            o->threads[o->nthreads++] = t;
    }
    if (!st && o->nthreads == 0) st = nb_error_set(NB_ERR_USAGE, "option --threads needs a list such as 1,2");
    free(copy);
    return st;
}

static nb_status check_ref(const nb_opt_args *a)
{
    bench_opts *o = a->dest;
    const char *path = a->vals[0];
    struct stat sb;
    char *full = realpath(path, NULL);
    if (!full) return nb_error_set(NB_ERR_USAGE, "option --ref: cannot use '%s': %s", path, strerror(errno));
    if (stat(full, &sb) != 0 || !S_ISREG(sb.st_mode) || access(full, X_OK) != 0) {
        free(full);
        return nb_error_set(NB_ERR_USAGE, "option --ref: '%s' is not an executable file", path);
    }
    free(o->ref);
    o->ref = full;
    return NB_OK;
}

static nb_status check_dir(const nb_opt_args *a)
{
    bench_opts *o = a->dest;
    const char *path = a->vals[0];
    struct stat sb;
    char *full = realpath(path, NULL);
    if (!full) return nb_error_set(NB_ERR_USAGE, "option --dir: cannot use '%s': %s", path, strerror(errno));
    if (stat(full, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        free(full);
        return nb_error_set(NB_ERR_USAGE, "option --dir: '%s' is not a directory", path);
    }
    free(o->dir);
    o->dir = full;
    return NB_OK;
}

static nb_status check_reps(const nb_opt_args *a)
{
    bench_opts *o = a->dest;
    nb_status st = nb_parse_int(a->vals[0], &o->reps, "option --reps");
    if (!st && (o->reps < 1 || o->reps > 10000))
        st = nb_error_set(NB_ERR_USAGE, "option --reps: %d is not a sensible repetition count", o->reps);
    return st;
}

enum { DEVICE_CPU, DEVICE_CUDA };
/* indexed by the value: devices[o->device].word is the word nb-sim takes */
static const nb_opt_choice devices[] = {{"cpu", DEVICE_CPU}, {"cuda", DEVICE_CUDA}, {NULL, 0}};

/* nb-bench owns no nanoBragg flag (table owner 0): a flag of another tool is
 * an unknown option here */
#define BO(f) NB_AT(bench_opts, f)
#define OWN(name, metavar, help, ...) {NB_OPT_LOCAL, name, 1, metavar, help, .needs = "a value", __VA_ARGS__}
static const nb_opt rows[] = {
    OWN("--ref", "PATH", "also run this reference nanoBragg binary", .type = NB_OPT_CALLBACK, .fn = check_ref),
    {NB_OPT_LOCAL, "--dropin", 0, "",
     "also run the drop-in (pipelines/nanobragg) with the reference's\n"
     "command line",
     .type = NB_OPT_SET, .sets = {{BO(dropin), 1}}},
    {NB_OPT_LOCAL, "--device", 1, "cpu|cuda",
     "where nb-sim renders (default cpu); cuda adds the GPU's kernel\n"
     "and copy times to the table",
     .type = NB_OPT_CHOICE, .at = {BO(device)}, .choices = devices, .expected = "cpu or cuda"},
    OWN("--dir", "DIR", "make the run directories in DIR (a tmpfs or a disk, say)", .type = NB_OPT_CALLBACK,
        .fn = check_dir),
    OWN("--reps", "N", "repetitions of each run (default 5)", .type = NB_OPT_CALLBACK, .fn = check_reps),
    OWN("--config", "NAME", "run this configuration (repeatable, or NAME,NAME...; default: all)",
        .type = NB_OPT_CALLBACK, .fn = add_configs),
    OWN("--threads", "LIST", "thread counts to run, comma-separated (default 2)", .type = NB_OPT_CALLBACK,
        .fn = parse_threads),
    OWN("--json", "FILE", "also write the results as JSON ('-': standard output)", .type = NB_OPT_STRING,
        .at = {BO(json)}),
    {NB_OPT_LOCAL, "--list", 0, "", "print the configurations with their flags, and exit", .type = NB_OPT_SET,
     .sets = {{BO(list), 1}}},
    {NB_OPT_LOCAL, "-o", 1, "FILE",
     "write the table to FILE (default: standard output; standard\n"
     "error when the JSON goes to standard output)",
     .needs = "a file name", .type = NB_OPT_STRING, .at = {BO(output)}},
    {NB_OPT_LOCAL, "--output", 1, "FILE", NULL, .needs = "a file name", .type = NB_OPT_STRING, .at = {BO(output)}},
};
#undef BO
#undef OWN
static const nb_opt_table table = {0, rows, (int)(sizeof rows / sizeof rows[0])};

static nb_status parse(int argc, char **argv, bench_opts *o, nb_std_opts *std)
{
    o->reps = 5;
    o->threads[0] = 2;
    o->nthreads = 1;
    nb_status st = nb_tool_parse(&tool, std, o, argc, argv);
    if (st) return st;
    if (o->output) std->output = o->output;
    if (o->nconfigs == 0)
        for (int c = 0; c < NCONFIGS; c++) o->configs[o->nconfigs++] = c;
    return NB_OK;
}

/* ---- running processes ----------------------------------------------------- */

typedef struct stage {
    const char *name; /* also the name of its .out/.err files in the run directory */
    arglist args;
    pid_t pid;
    int status;   /* from wait4 */
    long rss_kib; /* ru_maxrss */
} stage;

/* The command as a shell would read it. */
static char *stage_command(const stage *s, int n, const char *sep)
{
    nb_strbuf sb;
    nb_strbuf_init(&sb);
    for (int k = 0; k < n; k++) {
        char *c = nb_join_args(s[k].args.n, s[k].args.v);
        nb_strbuf_printf(&sb, "%s%s", k ? sep : "", c);
        free(c);
    }
    return nb_strbuf_take(&sb);
}

/* The last few lines of a stage's standard error, indented. */
static void append_stderr_tail(nb_strbuf *sb, const char *dir, const char *name)
{
    char errf[256], *path, *text = NULL;
    size_t len = 0;
    snprintf(errf, sizeof errf, "%s.err", name);
    path = path_join(dir, errf);
    nb_status st = nb_read_file(path, &text, &len);
    free(path);
    if (st != NB_OK || len == 0) {
        nb_strbuf_append(sb, "\n  (nothing on standard error)");
        free(text);
        return;
    }
    while (len && text[len - 1] == '\n') text[--len] = '\0';
    const char *start = text + len;
    for (int lines = 0; start > text && lines < 12; start--)
        if (start[-1] == '\n' && ++lines == 12) break;
    for (const char *p = start; *p;) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        nb_strbuf_append(sb, "\n  ");
        nb_strbuf_appendn(sb, p, n);
        p += n + (nl != NULL);
    }
    free(text);
}

/* The failure of a finished chain of stages: the first stage that failed for
 * a reason of its own (a broken pipe follows a later stage's failure). */
static nb_status chain_failure(const stage *s, int n, const char *dir)
{
    int culprit = -1;
    for (int k = 0; k < n && culprit < 0; k++)
        if (s[k].status && !(WIFSIGNALED(s[k].status) && WTERMSIG(s[k].status) == SIGPIPE)) culprit = k;
    for (int k = 0; k < n && culprit < 0; k++)
        if (s[k].status) culprit = k;
    if (culprit < 0) return NB_OK;
    const stage *c = &s[culprit];
    nb_strbuf sb;
    nb_strbuf_init(&sb);
    char *cmd = stage_command(s, n, " | ");
    if (WIFEXITED(c->status))
        nb_strbuf_printf(&sb, "run failed: %s exited with status %d", c->name, WEXITSTATUS(c->status));
    else
        nb_strbuf_printf(&sb, "run failed: %s was killed by signal %d (%s)", c->name, WTERMSIG(c->status),
                         strsignal(WTERMSIG(c->status)));
    nb_strbuf_printf(&sb, "\n  command: %s\n  its standard error ends:", cmd);
    append_stderr_tail(&sb, dir, c->name);
    nb_status st = nb_error_set(NB_ERR_DATA, "%s", sb.data);
    free(cmd);
    nb_strbuf_free(&sb);
    return st;
}

/* Run the stages as one pipeline in `dir` with the environment `envp` and
 * wait for all of them.  Standard input of the first is /dev/null, standard
 * output of the last goes to <name>.out, every standard error to <name>.err. */
static nb_status run_chain(stage *s, int n, const char *dir, char **envp)
{
    int prev_read = -1, spawned = 0, err = 0;
    const char *failed_name = NULL;
    for (int k = 0; k < n; k++) {
        int p[2] = {-1, -1};
        if (k + 1 < n && pipe2(p, O_CLOEXEC) != 0) {
            err = errno;
            failed_name = s[k].name;
            break;
        }
        char out[256], errf[256];
        snprintf(out, sizeof out, "%s.out", s[k].name);
        snprintf(errf, sizeof errf, "%s.err", s[k].name);
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addchdir_np(&fa, dir);
        if (prev_read >= 0) posix_spawn_file_actions_adddup2(&fa, prev_read, STDIN_FILENO);
        else posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
        if (p[1] >= 0) posix_spawn_file_actions_adddup2(&fa, p[1], STDOUT_FILENO);
        else posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, errf, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        err = posix_spawn(&s[k].pid, s[k].args.v[0], &fa, NULL, s[k].args.v, envp);
        posix_spawn_file_actions_destroy(&fa);
        if (prev_read >= 0) close(prev_read);
        if (p[1] >= 0) close(p[1]);
        prev_read = p[0];
        if (err) {
            failed_name = s[k].name;
            break;
        }
        spawned++;
    }
    if (prev_read >= 0) close(prev_read);
    /* the stages already started see end of input or a broken pipe and end */
    for (int k = 0; k < spawned; k++) {
        struct rusage ru;
        while (wait4(s[k].pid, &s[k].status, 0, &ru) < 0)
            if (errno != EINTR) return nb_error_set(NB_ERR_IO, "waiting for %s: %s", s[k].name, strerror(errno));
        s[k].rss_kib = ru.ru_maxrss;
    }
    if (failed_name)
        return nb_error_set(NB_ERR_IO, "cannot run %s ('%s'): %s", failed_name, s[spawned].args.v[0], strerror(err));
    return chain_failure(s, n, dir);
}

/* ---- temporary directories -------------------------------------------------- */

static nb_status make_dir(char *templ)
{
    if (!mkdtemp(templ)) return nb_error_set(NB_ERR_IO, "cannot create a directory '%s': %s", templ, strerror(errno));
    return NB_OK;
}

/* Remove a directory of plain files (what one run leaves). */
static void remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char *path = path_join(dir, e->d_name);
        unlink(path);
        free(path);
    }
    closedir(d);
    rmdir(dir);
}

/* ---- one run of each kind ------------------------------------------------- */

typedef struct bench_ctx {
    const bench_opts *o;
    char *bindir; /* where nb-bench and the stages live */
    char *dropin; /* the drop-in script */
    char *hkl;    /* the golden P1.hkl */
    char *topdir; /* the temporary directory of this benchmark */
    char **envp;  /* environ with OMP_NUM_THREADS of the runs */
    char omp[32];
} bench_ctx;

static void set_threads_env(bench_ctx *c, int threads)
{
    int n = 0;
    for (char **e = environ; *e; e++) n++;
    free(c->envp);
    c->envp = malloc((size_t)(n + 2) * sizeof *c->envp);
    if (!c->envp) nb_exit_on_error(nb_error_set(NB_ERR_NOMEM, "out of memory"));
    snprintf(c->omp, sizeof c->omp, "OMP_NUM_THREADS=%d", threads);
    int k = 0;
    for (char **e = environ; *e; e++)
        if (strncmp(*e, "OMP_NUM_THREADS=", 16)) c->envp[k++] = *e;
    c->envp[k++] = c->omp;
    c->envp[k] = NULL;
}

/* A configuration's flags as one shell-quoted string. */
static char *config_flags(const bench_ctx *c, const bench_config *cfg)
{
    arglist a;
    memset(&a, 0, sizeof a);
    args_push_flags(&a, cfg->flags, c->hkl);
    char *flags = nb_join_args(a.n, a.v);
    args_free(&a);
    return flags;
}

typedef struct ours_run {
    double whole, render;
    double gpu_kernel, gpu_copies; /* the GPU's, summed over nb-sim's renders (--device cuda) */
    char gpu[160];         /* what nb-sim said it rendered on */
    long rss[4]; /* per stage */
    long pixels;
    char kernel[32]; /* RENDER_PATH */
} ours_run;

static const char *ours_stage_names[4] = {"nb-geom", "nb-hkl", "nb-sim", "nb-convert"};

static void build_ours(const bench_ctx *c, const bench_config *cfg, int threads, stage s[4])
{
    char t[16];
    memset(s, 0, 4 * sizeof *s);
    for (int k = 0; k < 4; k++) {
        s[k].name = ours_stage_names[k];
        char *path = path_join(c->bindir, s[k].name);
        args_push(&s[k].args, path);
        free(path);
    }
    args_push_flags(&s[0].args, cfg->flags, c->hkl);
    snprintf(t, sizeof t, "%d", threads);
    /* -v: nb-sim logs its render time and kernel (read back from nb-sim.err) */
    const char *sim[] = {"--threads", t, "-v", "--device", devices[c->o->device].word};
    const char *conv[] = {"-o", "float.bin", "-o", "int.img"};
    for (size_t k = 0; k < sizeof sim / sizeof *sim; k++) args_push(&s[2].args, sim[k]);
    if (cfg->sim_flags) args_push_flags(&s[2].args, cfg->sim_flags, c->hkl);
    for (size_t k = 0; k < sizeof conv / sizeof *conv; k++) args_push(&s[3].args, conv[k]);
}

/* One program with the reference's command line: the reference (with -roi 0 0
 * 0 0 when roi is set) or the drop-in. */
typedef enum { RUN_REF, RUN_REF_ROI, RUN_DROPIN } single_run;

static void build_single(const bench_ctx *c, const bench_config *cfg, single_run kind, stage *s)
{
    const char *fixed[] = {"-nonoise", "-nopgm", "-floatfile", "float.bin", "-intfile", "int.img"};
    const int roi = kind == RUN_REF_ROI;
    memset(s, 0, sizeof *s);
    s->name = kind == RUN_DROPIN ? "nanobragg" : "reference";
    args_push(&s->args, kind == RUN_DROPIN ? c->dropin : c->o->ref);
    for (size_t k = 0; k < sizeof fixed / sizeof *fixed; k++) args_push(&s->args, fixed[k]);
    args_push_flags(&s->args, cfg->flags, c->hkl);
    if (roi) args_push_flags(&s->args, "-roi 0 0 0 0", NULL);
}

/* nb-sim's own render time and kernel, from the line it logs with -v:
 * "rendered W x H pixels in T s (N steps per pixel, PATH path)"; on a GPU
 * also "rendering on GPU" and, per render, "  GPU kernel K ms, copies C ms". */
static nb_status read_render(const char *dir, ours_run *r)
{
    char *path = path_join(dir, "nb-sim.err");
    FILE *fp = fopen(path, "r");
    nb_status st = NB_OK;
    if (!fp) {
        st = nb_error_set(NB_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
        free(path);
        return st;
    }
    char line[1024];
    int found = 0;
    while (fgets(line, sizeof line, fp)) {
        int fp_px, sp_px, steps;
        double secs;
        char kernel[32];
        double kernel_ms, copy_ms;
        if (sscanf(line, "  GPU kernel %lf ms, copies %lf ms", &kernel_ms, &copy_ms) == 2) {
            r->gpu_kernel += kernel_ms * 1e-3, r->gpu_copies += copy_ms * 1e-3;
            continue;
        }
        if (!strncmp(line, "rendering on ", 13)) {
            snprintf(r->gpu, sizeof r->gpu, "%.*s", (int)sizeof r->gpu - 1, line + 13);
            r->gpu[strcspn(r->gpu, "\n")] = '\0';
            continue;
        }
        if (!found && sscanf(line, "rendered %d x %d pixels in %lf s (%d steps per pixel, %31s path)", &fp_px,
                             &sp_px, &secs, &steps, kernel) == 5) {
            found = 1;
            r->render = secs;
            r->pixels = (long)fp_px * sp_px;
            snprintf(r->kernel, sizeof r->kernel, "%s", kernel);
        }
    }
    fclose(fp);
    if (!found) st = nb_error_set(NB_ERR_DATA, "'%s' has no 'rendered ... in T s' line from nb-sim -v", path);
    free(path);
    return st;
}

/* A fresh directory for one run (malloc'ed in *dir). */
static nb_status new_run_dir(const bench_ctx *c, char **dir)
{
    *dir = path_join(c->topdir, "run.XXXXXX");
    nb_status st = make_dir(*dir);
    if (st) {
        free(*dir);
        *dir = NULL;
    }
    return st;
}

static nb_status run_ours(const bench_ctx *c, const bench_config *cfg, int threads, ours_run *r)
{
    char *dir;
    stage s[4];
    nb_status st = new_run_dir(c, &dir);
    if (st) return st;
    build_ours(c, cfg, threads, s);
    if (nb_verbosity() > 0) {
        char *cmd = stage_command(s, 4, " | ");
        nb_info("  ours: %s", cmd);
        free(cmd);
    }
    double t0 = nb_now();
    st = run_chain(s, 4, dir, c->envp);
    r->whole = nb_now() - t0;
    for (int k = 0; k < 4; k++) r->rss[k] = s[k].rss_kib;
    if (!st) st = read_render(dir, r);
    for (int k = 0; k < 4; k++) args_free(&s[k].args);
    remove_dir(dir);
    free(dir);
    return st;
}

static nb_status run_single(const bench_ctx *c, const bench_config *cfg, single_run kind, double *whole, long *rss)
{
    char *dir;
    stage s;
    nb_status st = new_run_dir(c, &dir);
    if (st) return st;
    build_single(c, cfg, kind, &s);
    if (nb_verbosity() > 0) {
        char *cmd = stage_command(&s, 1, "");
        nb_info("  %s: %s", kind == RUN_DROPIN ? "drop-in" : "ref", cmd);
        free(cmd);
    }
    double t0 = nb_now();
    st = run_chain(&s, 1, dir, c->envp);
    *whole = nb_now() - t0;
    *rss = s.rss_kib;
    args_free(&s.args);
    remove_dir(dir);
    free(dir);
    return st;
}

/* ---- results ----------------------------------------------------------------- */

typedef struct stat3 {
    double median, min, max;
} stat3;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static stat3 summarize(const double *v, int n)
{
    double *s = malloc((size_t)n * sizeof *s);
    stat3 r = {NAN, NAN, NAN};
    if (!s) return r;
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    r.min = s[0], r.max = s[n - 1];
    r.median = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    free(s);
    return r;
}

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

static double ratio(double num, double den) { return isfinite(num) && isfinite(den) && den > 0 ? num / den : NAN; }

static int largest_stage(const long rss[4])
{
    int k = 0;
    for (int j = 1; j < 4; j++)
        if (rss[j] > rss[k]) k = j;
    return k;
}

/* One configuration at every thread count: each repetition runs the thread
 * counts in turn (ours, drop-in, ref, ref set-up at each), so that the thread
 * scaling, like the ratios, compares runs made at the same time. */
enum { SERIES_OURS, SERIES_RENDER, SERIES_KERNEL, SERIES_COPIES, SERIES_DROPIN, SERIES_REF, SERIES_REF_ROI, NSERIES };

static nb_status bench_one_rep(bench_ctx *c, const bench_config *cfg, int threads, int rep, double *v, int n,
                               result *r)
{
    const bench_opts *o = c->o;
    ours_run run;
    memset(&run, 0, sizeof run);
    nb_status st = run_ours(c, cfg, threads, &run);
    if (st) return st;
    v[SERIES_OURS * n + rep] = run.whole, v[SERIES_RENDER * n + rep] = run.render;
    v[SERIES_KERNEL * n + rep] = run.gpu_kernel, v[SERIES_COPIES * n + rep] = run.gpu_copies;
    if (run.gpu[0]) snprintf(r->gpu, sizeof r->gpu, "%s", run.gpu);
    r->pixels = run.pixels;
    snprintf(r->kernel, sizeof r->kernel, "%s", run.kernel);
    for (int k = 0; k < 4; k++)
        if (run.rss[k] > r->ours_rss[k]) r->ours_rss[k] = run.rss[k];
    nb_info("  ours %.3f s (render %.3f s)", run.whole, run.render);
    long rss = 0, roi_rss = 0;
    if (o->dropin) {
        double *w = &v[SERIES_DROPIN * n + rep];
        if ((st = run_single(c, cfg, RUN_DROPIN, w, &rss))) return st;
        if (rss > r->dropin_rss) r->dropin_rss = rss;
        nb_info("  drop-in %.3f s", *w);
    }
    if (!o->ref) return NB_OK;
    double *rw = &v[SERIES_REF * n + rep], *rs = &v[SERIES_REF_ROI * n + rep];
    if ((st = run_single(c, cfg, RUN_REF, rw, &rss)) || (st = run_single(c, cfg, RUN_REF_ROI, rs, &roi_rss))) return st;
    if (rss > r->ref_rss) r->ref_rss = rss;
    nb_info("  ref %.3f s, with -roi 0 0 0 0 %.3f s", *rw, *rs);
    return NB_OK;
}

static nb_status bench_config_runs(bench_ctx *c, const bench_config *cfg, result *res)
{
    const bench_opts *o = c->o;
    const int n = o->reps, nt = o->nthreads;
    double *v = calloc((size_t)NSERIES * n * nt, sizeof *v);
    if (!v) return nb_error_set(NB_ERR_NOMEM, "out of memory");
    nb_status st = NB_OK;
    for (int t = 0; t < nt; t++) {
        memset(&res[t], 0, sizeof res[t]);
        res[t].cfg = cfg;
        res[t].threads = o->threads[t];
        res[t].have_ref = o->ref != NULL;
        res[t].have_dropin = o->dropin;
    }
    for (int rep = 0; rep < n && !st; rep++)
        for (int t = 0; t < nt && !st; t++) {
            const int threads = o->threads[t];
            nb_info("%s, %d thread%s, repetition %d/%d", cfg->name, threads, threads == 1 ? "" : "s", rep + 1, n);
            set_threads_env(c, threads);
            st = bench_one_rep(c, cfg, threads, rep, v + (size_t)NSERIES * n * t, n, &res[t]);
        }
    for (int t = 0; t < nt && !st; t++) {
        const double *vt = v + (size_t)NSERIES * n * t;
        result *r = &res[t];
        r->ours_whole = summarize(vt + SERIES_OURS * n, n);
        r->ours_render = summarize(vt + SERIES_RENDER * n, n);
        r->gpu_kernel = summarize(vt + SERIES_KERNEL * n, n);
        r->gpu_copies = summarize(vt + SERIES_COPIES * n, n);
        if (o->dropin) r->dropin_whole = summarize(vt + SERIES_DROPIN * n, n);
        if (o->ref) {
            r->ref_whole = summarize(vt + SERIES_REF * n, n);
            r->ref_setup = summarize(vt + SERIES_REF_ROI * n, n);
            double est = r->ref_whole.median - r->ref_setup.median;
            r->ref_render = est > 0 ? est : NAN;
        }
    }
    free(v);
    return st;
}

/* ---- the table -------------------------------------------------------------- */

static void fmt_num(char *buf, size_t size, const char *fmt, double v)
{
    if (isfinite(v)) snprintf(buf, size, fmt, v);
    else snprintf(buf, size, "n/a");
}

/* Seconds as milliseconds with about four significant digits. */
static void fmt_ms(char *buf, size_t size, double seconds)
{
    double ms = 1e3 * seconds;
    fmt_num(buf, size, ms < 10 ? "%.2f" : ms < 1000 ? "%.1f" : "%.0f", ms);
}

/* "median (min-max)" in milliseconds. */
static void fmt_stat(char *buf, size_t size, stat3 s)
{
    char med[32], lo[32], hi[32];
    fmt_ms(med, sizeof med, s.median);
    fmt_ms(lo, sizeof lo, s.min);
    fmt_ms(hi, sizeof hi, s.max);
    snprintf(buf, size, "%s (%s-%s)", med, lo, hi);
}

/* One row of the table, without trailing blanks. */
static void print_row(FILE *fp, const char *config, const char *thr, const char *run, const char *whole,
                      const char *render, const char *tput, const char *mem, const char *kernel, const char *rat_r,
                      const char *rat_w)
{
    char line[512];
    snprintf(line, sizeof line, "%-18s %3s  %-4s  %-22s  %-22s  %8s  %8s  %-11s  %8s  %7s", config, thr, run, whole,
             render, tput, mem, kernel, rat_r, rat_w);
    size_t n = strlen(line);
    while (n && line[n - 1] == ' ') line[--n] = '\0';
    fprintf(fp, "%s\n", line);
}

/* The run of the same configuration at the fewest threads, when that is fewer
 * than r[i]'s (the base of its thread scaling), or -1. */
static int scaling_base(const result *r, int n, int i)
{
    int base = -1;
    for (int j = 0; j < n; j++)
        if (r[j].cfg == r[i].cfg && r[j].threads < r[i].threads && (base < 0 || r[j].threads < r[base].threads))
            base = j;
    return base;
}

/* The result of configuration `name` at `threads`, or NULL. */
static const result *find_result(const result *r, int n, const char *name, int threads)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(r[i].cfg->name, name) && r[i].threads == threads) return &r[i];
    return NULL;
}

/* Derivatives: each deriv-k's render time over the image's alone (same run,
 * same threads): the fast path's (deriv-k) over the fast image's (the gate
 * is 1 + 0.5 k) and over the double image's; the double path's
 * (deriv-double-k) over the double image's. */
static void print_deriv_ratios(FILE *fp, const result *r, int n)
{
    int any = 0;
    for (int i = 0; i < n; i++) {
        int k, fast = 1;
        if (sscanf(r[i].cfg->name, "deriv-double-%d", &k) == 1) fast = 0;
        else if (sscanf(r[i].cfg->name, "deriv-%d", &k) != 1) continue;
        const result *img = fast ? find_result(r, n, "deriv-image", r[i].threads) : NULL;
        const result *dbl = find_result(r, n, "deriv-image-double", r[i].threads);
        if (!img && !dbl) continue;
        if (!any++)
            fprintf(fp, "\nDerivatives: render time of the image and k derivatives / of the image alone\n"
                        "(deriv-k on the fast path, deriv-double-k on the double path).\n"
                        "%-18s %3s  %16s  %9s  %17s\n", "config", "thr", "/ fast image", "(1+0.5k)", "/ double image");
        char a[32], b[32], gate[32];
        fmt_num(a, sizeof a, "%.2f", img ? ratio(r[i].ours_render.median, img->ours_render.median) : NAN);
        fmt_num(b, sizeof b, "%.2f", dbl ? ratio(r[i].ours_render.median, dbl->ours_render.median) : NAN);
        fmt_num(gate, sizeof gate, "%.1f", fast ? 1.0 + 0.5 * k : NAN);
        fprintf(fp, "%-18s %3d  %16s  %9s  %17s\n", r[i].cfg->name, r[i].threads, a, gate, b);
    }
}

/* Thread scaling: the median at the fewest threads over the median at more. */
static void print_scaling(FILE *fp, const bench_ctx *c, const result *r, int n)
{
    int any = 0;
    for (int i = 0; i < n; i++) {
        int b = scaling_base(r, n, i);
        if (b < 0) continue;
        if (!any++) {
            fputs("\nThread scaling: median time at the fewest threads / median time at more (1.00: none).\n", fp);
            fprintf(fp, "%-18s %4s  %3s  %11s  %10s%s%s\n", "config", "from", "to", "ours render", "ours whole",
                    c->o->dropin ? "  drop whole" : "", c->o->ref ? "  ref render   ref whole" : "");
        }
        char v[4][32];
        fmt_num(v[0], sizeof v[0], "%.2f", ratio(r[b].ours_render.median, r[i].ours_render.median));
        fmt_num(v[1], sizeof v[1], "%.2f", ratio(r[b].ours_whole.median, r[i].ours_whole.median));
        fprintf(fp, "%-18s %4d  %3d  %11s  %10s", r[i].cfg->name, r[b].threads, r[i].threads, v[0], v[1]);
        if (r[i].have_dropin) {
            char d[32];
            fmt_num(d, sizeof d, "%.2f", ratio(r[b].dropin_whole.median, r[i].dropin_whole.median));
            fprintf(fp, "  %10s", d);
        }
        if (r[i].have_ref && r[b].have_ref) {
            fmt_num(v[2], sizeof v[2], "%.2f", ratio(r[b].ref_render, r[i].ref_render));
            fmt_num(v[3], sizeof v[3], "%.2f", ratio(r[b].ref_whole.median, r[i].ref_whole.median));
            fprintf(fp, "  %10s  %10s", v[2], v[3]);
        }
        fputc('\n', fp);
    }
}

/* The NVIDIA driver's version ("580.159.04"), from the kernel module's
 * /proc file: the first word of its first line made of digits and dots. */
static void nvidia_driver(char *buf, size_t size)
{
    char line[512];
    FILE *fp = fopen("/proc/driver/nvidia/version", "r");
    snprintf(buf, size, "unknown");
    if (!fp) return;
    if (fgets(line, sizeof line, fp))
        for (char *w = strtok(line, " \t\n"); w; w = strtok(NULL, " \t\n"))
            if (strchr(w, '.') && strspn(w, "0123456789.") == strlen(w)) {
                snprintf(buf, size, "%s", w);
                break;
            }
    fclose(fp);
}

/* What nb-sim said it rendered on (the first run's that said it). */
static const char *gpu_name(const result *r, int n)
{
    for (int i = 0; i < n; i++)
        if (r[i].gpu[0]) return r[i].gpu;
    return "unknown";
}

/* --device cuda: the GPU's kernel and copy times beside the render and whole times. */
static void print_gpu(FILE *fp, const bench_ctx *c, const result *r, int n)
{
    if (c->o->device != DEVICE_CUDA) return;
    char driver[64];
    nvidia_driver(driver, sizeof driver);
    fprintf(fp, "\nGPU: %s; NVIDIA driver %s.\n"
                "kernel, copies: the GPU's kernel time and its host-device copies (uploads of what changed\n"
                "since the last frame, the image back), on the GPU's clock, as nb-sim -v logs them.\n",
            gpu_name(r, n), driver);
    fprintf(fp, "%-18s %3s  %-22s  %-22s  %-22s  %s\n", "config", "thr", "kernel ms", "copies ms", "render ms",
            "whole ms");
    for (int i = 0; i < n; i++) {
        char k[128], cp[128], rd[128], wh[128];
        fmt_stat(k, sizeof k, r[i].gpu_kernel);
        fmt_stat(cp, sizeof cp, r[i].gpu_copies);
        fmt_stat(rd, sizeof rd, r[i].ours_render);
        fmt_stat(wh, sizeof wh, r[i].ours_whole);
        fprintf(fp, "%-18s %3d  %-22s  %-22s  %-22s  %s\n", r[i].cfg->name, r[i].threads, k, cp, rd, wh);
    }
}

static void print_table(FILE *fp, const bench_ctx *c, const result *r, int n)
{
    const bench_opts *o = c->o;
    fprintf(fp, "nb-bench %s: %d repetition%s of each run%s.\n", NB_VERSION, o->reps, o->reps == 1 ? "" : "s",
            o->ref ? (o->dropin ? ", interleaved: ours, drop-in, ref, ref -roi 0 0 0 0 at each thread count"
                                : ", interleaved: ours, ref, ref -roi 0 0 0 0 at each thread count")
            : o->dropin ? ", interleaved: ours, drop-in at each thread count"
            : o->nthreads > 1 ? ", interleaved: each thread count in turn" : "");
    fprintf(fp, "Times in ms, median (min-max); whole = first fork to last exit.  Mpx/s = detector pixels /\n"
                "median render time.  Peak MiB = largest max RSS of any stage over the repetitions.\n");
    if (o->dropin)
        fprintf(fp, "drop = the drop-in %s, run with the reference's command line.\n", c->dropin);
    if (o->ref)
        fprintf(fp, "ref = %s; its render time is estimated as median whole - median whole\n"
                    "with -roi 0 0 0 0 (one pixel rendered).  render x, whole x: ref time / our time.\n",
                o->ref);
    if (o->dir) fprintf(fp, "Run directories in %s.\n", o->dir);
    fputc('\n', fp);
    char thr[16];
    print_row(fp, "config", "thr", "run", "whole ms", "render ms", "Mpx/s", "peak MiB", "kernel",
              o->ref ? "render x" : "", o->ref ? "whole x" : "");
    for (int i = 0; i < n; i++) {
        char whole[128], render[128], tput[32], mem[32];
        fmt_stat(whole, sizeof whole, r[i].ours_whole);
        fmt_stat(render, sizeof render, r[i].ours_render);
        fmt_num(tput, sizeof tput, "%.2f", ratio(r[i].pixels * 1e-6, r[i].ours_render.median));
        fmt_num(mem, sizeof mem, "%.1f", r[i].ours_rss[largest_stage(r[i].ours_rss)] / 1024.0);
        snprintf(thr, sizeof thr, "%d", r[i].threads);
        print_row(fp, r[i].cfg->name, thr, "ours", whole, render, tput, mem, r[i].kernel, "", "");
        char rat_r[32], rat_w[32];
        if (r[i].have_dropin) {
            fmt_stat(whole, sizeof whole, r[i].dropin_whole);
            fmt_num(mem, sizeof mem, "%.1f", r[i].dropin_rss / 1024.0);
            fmt_num(rat_w, sizeof rat_w, "%.2f", ratio(r[i].ref_whole.median, r[i].dropin_whole.median));
            print_row(fp, "", "", "drop", whole, "", "", mem, "", "", r[i].have_ref ? rat_w : "");
        }
        if (!r[i].have_ref) continue;
        fmt_stat(whole, sizeof whole, r[i].ref_whole);
        fmt_ms(render, sizeof render, r[i].ref_render);
        if (isfinite(r[i].ref_render)) strcat(render, " (estimate)");
        fmt_num(tput, sizeof tput, "%.2f", ratio(r[i].pixels * 1e-6, r[i].ref_render));
        fmt_num(mem, sizeof mem, "%.1f", r[i].ref_rss / 1024.0);
        fmt_num(rat_r, sizeof rat_r, "%.2f", ratio(r[i].ref_render, r[i].ours_render.median));
        fmt_num(rat_w, sizeof rat_w, "%.2f", ratio(r[i].ref_whole.median, r[i].ours_whole.median));
        print_row(fp, "", "", "ref", whole, render, tput, mem, "", rat_r, rat_w);
    }
    print_gpu(fp, c, r, n);
    print_scaling(fp, c, r, n);
    print_deriv_ratios(fp, r, n);
}

/* ---- JSON ------------------------------------------------------------------- */

static void json_str(FILE *fp, const char *s)
{
    fputc('"', fp);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(fp, "\\%c", *p);
        else if (*p == '\n') fputs("\\n", fp);
        else if (*p < 0x20) fprintf(fp, "\\u%04x", *p);
        else fputc(*p, fp);
    }
    fputc('"', fp);
}

static void json_num(FILE *fp, double v)
{
    if (isfinite(v)) fprintf(fp, "%.9g", v);
    else fputs("null", fp);
}

static void json_stat(FILE *fp, const char *key, stat3 s)
{
    fprintf(fp, "\"%s\": {\"median\": ", key);
    json_num(fp, s.median);
    fputs(", \"min\": ", fp);
    json_num(fp, s.min);
    fputs(", \"max\": ", fp);
    json_num(fp, s.max);
    fputs("}", fp);
}

/* ",\n  "key": {"command": ..., "whole_s": ...": the opening of a one-program
 * run's object (the drop-in's or the reference's), left open. */
static void json_single_open(FILE *fp, const bench_ctx *c, const bench_config *cfg, single_run kind,
                             const char *key, stat3 whole)
{
    stage s;
    build_single(c, cfg, kind, &s);
    char *cmd = stage_command(&s, 1, "");
    fprintf(fp, ",\n      \"%s\": {\n        \"command\": ", key);
    json_str(fp, cmd);
    fputs(",\n        ", fp);
    json_stat(fp, "whole_s", whole);
    args_free(&s.args);
    free(cmd);
}

static void write_json(FILE *fp, const bench_ctx *c, const result *r, int n, const char *cmdline)
{
    const bench_opts *o = c->o;
    char when[64];
    time_t now = time(NULL);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    fprintf(fp, "{\n  \"tool\": \"nb-bench\",\n  \"version\": ");
    json_str(fp, NB_VERSION);
    fprintf(fp, ",\n  \"date\": \"%s\",\n  \"command\": ", when);
    json_str(fp, cmdline);
    fprintf(fp, ",\n  \"cpus_online\": %ld,\n  \"reps\": %d,\n  \"ref\": ", sysconf(_SC_NPROCESSORS_ONLN), o->reps);
    if (o->ref) json_str(fp, o->ref);
    else fputs("null", fp);
    fprintf(fp, ",\n  \"device\": \"%s\"", devices[o->device].word);
    if (o->device == DEVICE_CUDA) {
        char driver[64];
        nvidia_driver(driver, sizeof driver);
        fputs(",\n  \"gpu\": {\"name\": ", fp);
        json_str(fp, gpu_name(r, n));
        fputs(", \"nvidia_driver\": ", fp);
        json_str(fp, driver);
        fputs("}", fp);
    }
    fputs(",\n  \"method\": {\n"
          "    \"order\": \"per repetition, at each thread count in turn: ours, then the drop-in, then ref, then "
          "ref with -roi 0 0 0 0 (interleaved)\",\n"
          "    \"whole\": \"wall time from the first fork to the last exit, each run in a fresh temporary "
          "directory\",\n",
          fp);
    fputs("    \"run_directories\": ", fp);
    json_str(fp, o->dir ? o->dir : "$TMPDIR or /tmp");
    fputs(",\n"
          "    \"ours\": \"nb-geom FLAGS | nb-hkl | nb-sim --threads T -v --device D | nb-convert -o float.bin -o "
          "int.img\",\n"
          "    \"ours_render\": \"nb-sim's own measurement (the render time it logs with -v)\",\n"
          "    \"gpu_kernel\": \"--device cuda: the GPU's kernel time, CUDA events, summed over nb-sim's renders\",\n"
          "    \"gpu_copies\": \"--device cuda: the GPU's host-device copies (uploads, the image back), CUDA "
          "events\",\n"
          "    \"dropin\": \"DROPIN -nonoise -nopgm -floatfile float.bin -intfile int.img FLAGS (with --dropin)\",\n"
          "    \"ref\": \"REF -nonoise -nopgm -floatfile float.bin -intfile int.img FLAGS\",\n"
          "    \"ref_render\": \"estimate: median whole time minus median whole time of the same command with -roi "
          "0 0 0 0 (one pixel rendered)\",\n"
          "    \"threads\": \"OMP_NUM_THREADS=T for every process, and --threads T for nb-sim\",\n"
          "    \"mpixel_per_s\": \"detector pixels / median render time / 1e6\",\n"
          "    \"peak_rss_kib\": \"largest ru_maxrss (wait4) over the repetitions; for ours, of the largest "
          "stage\",\n"
          "    \"scaling\": \"median time at from_threads (the fewest measured for the configuration) / median "
          "time at threads\"\n"
          "  },\n  \"results\": [",
          fp);
    for (int i = 0; i < n; i++) {
        const result *x = &r[i];
        stage s[4];
        build_ours(c, x->cfg, x->threads, s);
        char *ours_cmd = stage_command(s, 4, " | ");
        fprintf(fp, "%s\n    {\n      \"config\": ", i ? "," : "");
        json_str(fp, x->cfg->name);
        fputs(",\n      \"flags\": ", fp);
        char *flags = config_flags(c, x->cfg);
        json_str(fp, flags);
        free(flags);
        fprintf(fp, ",\n      \"threads\": %d,\n      \"pixels\": %ld,\n      \"ours\": {\n        \"command\": ",
                x->threads, x->pixels);
        nb_strbuf cmd;
        nb_strbuf_init(&cmd);
        nb_strbuf_printf(&cmd, "%s", ours_cmd);
        json_str(fp, cmd.data);
        nb_strbuf_free(&cmd);
        fputs(",\n        ", fp);
        json_stat(fp, "whole_s", x->ours_whole);
        fputs(",\n        ", fp);
        json_stat(fp, "render_s", x->ours_render);
        if (o->device == DEVICE_CUDA) {
            fputs(",\n        ", fp);
            json_stat(fp, "gpu_kernel_s", x->gpu_kernel);
            fputs(",\n        ", fp);
            json_stat(fp, "gpu_copies_s", x->gpu_copies);
        }
        fputs(",\n        \"mpixel_per_s\": ", fp);
        json_num(fp, ratio(x->pixels * 1e-6, x->ours_render.median));
        int big = largest_stage(x->ours_rss);
        fprintf(fp, ",\n        \"peak_rss_kib\": %ld,\n        \"peak_rss_stage\": \"%s\",\n"
                    "        \"stage_peak_rss_kib\": {",
                x->ours_rss[big], ours_stage_names[big]);
        for (int k = 0; k < 4; k++) fprintf(fp, "%s\"%s\": %ld", k ? ", " : "", ours_stage_names[k], x->ours_rss[k]);
        fputs("},\n        \"render_path\": ", fp);
        json_str(fp, x->kernel);
        fputs("\n      }", fp);
        for (int k = 0; k < 4; k++) args_free(&s[k].args);
        free(ours_cmd);
        if (x->have_dropin) {
            json_single_open(fp, c, x->cfg, RUN_DROPIN, "dropin", x->dropin_whole);
            fprintf(fp, ",\n        \"peak_rss_kib\": %ld\n      }", x->dropin_rss);
        }
        if (x->have_ref) {
            json_single_open(fp, c, x->cfg, RUN_REF, "ref", x->ref_whole);
            fputs(",\n        ", fp);
            json_stat(fp, "setup_s", x->ref_setup);
            fputs(",\n        \"render_s_estimate\": ", fp);
            json_num(fp, x->ref_render);
            fputs(",\n        \"mpixel_per_s\": ", fp);
            json_num(fp, ratio(x->pixels * 1e-6, x->ref_render));
            fprintf(fp, ",\n        \"peak_rss_kib\": %ld\n      },\n      \"ratio_ref_over_ours\": {\"render\": ",
                    x->ref_rss);
            json_num(fp, ratio(x->ref_render, x->ours_render.median));
            fputs(", \"whole\": ", fp);
            json_num(fp, ratio(x->ref_whole.median, x->ours_whole.median));
            if (x->have_dropin) {
                fputs(", \"dropin_whole\": ", fp);
                json_num(fp, ratio(x->ref_whole.median, x->dropin_whole.median));
            }
            fputs("}", fp);
        }
        int base = scaling_base(r, n, i);
        if (base >= 0) {
            const result *y = &r[base];
            fprintf(fp, ",\n      \"scaling\": {\"from_threads\": %d, \"ours_render\": ", y->threads);
            json_num(fp, ratio(y->ours_render.median, x->ours_render.median));
            fputs(", \"ours_whole\": ", fp);
            json_num(fp, ratio(y->ours_whole.median, x->ours_whole.median));
            if (x->have_dropin && y->have_dropin) {
                fputs(", \"dropin_whole\": ", fp);
                json_num(fp, ratio(y->dropin_whole.median, x->dropin_whole.median));
            }
            if (x->have_ref && y->have_ref) {
                fputs(", \"ref_render\": ", fp);
                json_num(fp, ratio(y->ref_render, x->ref_render));
                fputs(", \"ref_whole\": ", fp);
                json_num(fp, ratio(y->ref_whole.median, x->ref_whole.median));
            }
            fputs("}", fp);
        }
        fputs("\n    }", fp);
    }
    fputs("\n  ]\n}\n", fp);
}

/* ---- main ---------------------------------------------------------------------- */

/* The directory of this executable (the stages live beside it) and the golden
 * P1.hkl of the source tree it was built in. */
static nb_status locate(bench_ctx *c, const char *argv0)
{
    char *self = realpath("/proc/self/exe", NULL);
    if (!self) self = realpath(argv0, NULL);
    if (!self) return nb_error_set(NB_ERR_IO, "cannot find the directory of nb-bench: %s", strerror(errno));
    *strrchr(self, '/') = '\0';
    c->bindir = self;
    c->hkl = path_join(self, "../tests/golden/inputs/P1.hkl");
    /* the drop-in: installed beside the tools, or in the source tree's pipelines/ */
    c->dropin = path_join(self, "nanobragg");
    if (access(c->dropin, X_OK) != 0) {
        free(c->dropin);
        c->dropin = path_join(self, "../pipelines/nanobragg");
    }
    char *dropin = realpath(c->dropin, NULL);
    if (dropin) {
        free(c->dropin);
        c->dropin = dropin;
    }
    char *hkl = realpath(c->hkl, NULL);
    if (hkl) {
        free(c->hkl);
        c->hkl = hkl;
    }
    return NB_OK;
}

static nb_status check_inputs(const bench_ctx *c)
{
    for (int k = 0; k < 4; k++) {
        char *path = path_join(c->bindir, ours_stage_names[k]);
        nb_status st = NB_OK;
        if (access(path, X_OK) != 0)
            st = nb_error_set(NB_ERR_IO, "cannot run '%s' (the stages are looked for beside nb-bench): %s", path,
                              strerror(errno));
        free(path);
        if (st) return st;
    }
    if (c->o->dropin && access(c->dropin, X_OK) != 0)
        return nb_error_set(NB_ERR_IO, "cannot run the drop-in '%s' (looked for beside nb-bench and in "
                                       "../pipelines): %s", c->dropin, strerror(errno));
    for (int i = 0; i < c->o->nconfigs; i++)
        if (strstr(configs[c->o->configs[i]].flags, "@HKL@") && access(c->hkl, R_OK) != 0)
            return nb_error_set(NB_ERR_IO, "configuration %s needs '%s': %s", configs[c->o->configs[i]].name, c->hkl,
                                strerror(errno));
    return NB_OK;
}

/* An output file (path "-": standard output), kept from the children; none
 * when path is NULL. */
static nb_status open_output(nb_outfile **of, const char *path)
{
    *of = NULL;
    if (!path) return NB_OK;
    nb_status st = nb_outfile_open(of, path, 1);
    if (!st && nb_outfile_fp(*of) != stdout) fcntl(fileno(nb_outfile_fp(*of)), F_SETFD, FD_CLOEXEC);
    return st;
}

static void list_configs(const bench_ctx *c)
{
    for (int i = 0; i < NCONFIGS; i++) {
        char *flags = config_flags(c, &configs[i]);
        printf("%-18s %s%s%s\n", configs[i].name, flags, configs[i].sim_flags ? "  | nb-sim " : "",
               configs[i].sim_flags ? configs[i].sim_flags : "");
        free(flags);
    }
}

int main(int argc, char **argv)
{
    nb_std_opts std;
    bench_opts o;
    bench_ctx c;
    memset(&o, 0, sizeof o);
    memset(&c, 0, sizeof c);
    nb_set_tool_name(tool.name);
    nb_std_opts_init(&std);
    nb_exit_on_error(parse(argc, argv, &o, &std));
    nb_exit_on_error(nb_std_apply(&std));
    c.o = &o;
    nb_exit_on_error(locate(&c, argv[0]));
    if (o.list) {
        list_configs(&c);
        free(c.bindir);
        free(c.dropin);
        free(c.hkl);
        return 0;
    }
    nb_exit_on_error(check_inputs(&c));

    /* open the outputs first, so an unwritable path fails before the runs */
    nb_outfile *table = NULL, *json = NULL;
    nb_exit_on_error(open_output(&table, std.output));
    nb_exit_on_error(open_output(&json, o.json));
    const char *tmp = getenv("TMPDIR");
    c.topdir = path_join(o.dir ? o.dir : tmp && *tmp ? tmp : "/tmp", "nb-bench.XXXXXX");
    nb_status st = make_dir(c.topdir);
    int have_topdir = !st;

    int nres = o.nconfigs * o.nthreads, done = 0;
    result *res = calloc((size_t)nres, sizeof *res);
    if (!st && !res) st = nb_error_set(NB_ERR_NOMEM, "out of memory");
    for (int i = 0; i < o.nconfigs && !st; i++) {
        if ((st = bench_config_runs(&c, &configs[o.configs[i]], &res[done]))) break;
        for (int t = 0; t < o.nthreads; t++) {
            const result *r = &res[done++];
            if (nb_verbosity() >= 0) {
                fprintf(stderr, "%s: %s, %d thread%s: ours %.1f ms (render %.1f ms)", tool.name, r->cfg->name,
                        r->threads, r->threads == 1 ? "" : "s", 1e3 * r->ours_whole.median,
                        1e3 * r->ours_render.median);
                if (r->have_dropin) fprintf(stderr, ", drop-in %.1f ms", 1e3 * r->dropin_whole.median);
                if (r->have_ref) fprintf(stderr, ", ref %.1f ms", 1e3 * r->ref_whole.median);
                fputc('\n', stderr);
            }
        }
    }
    if (have_topdir) rmdir(c.topdir);

    if (!st) {
        /* the table goes to standard error when the JSON takes standard output */
        int json_on_stdout = json && nb_outfile_fp(json) == stdout;
        FILE *fp = json_on_stdout && nb_outfile_fp(table) == stdout ? stderr : nb_outfile_fp(table);
        print_table(fp, &c, res, done);
        if (o.json) {
            char *cmdline = nb_join_args(argc, argv);
            write_json(nb_outfile_fp(json), &c, res, done, cmdline);
            free(cmdline);
        }
        st = nb_outfile_commit(table);
        table = NULL;
        if (!st) st = nb_outfile_commit(json);
        json = NULL;
    }
    nb_outfile_abort(table);
    nb_outfile_abort(json);
    free(res);
    free(c.envp);
    free(c.bindir);
    free(c.dropin);
    free(c.hkl);
    free(c.topdir);
    free(o.ref);
    free(o.dir);
    nb_exit_on_error(st);
    return 0;
}
