/* nb-bench: wall time, render time, throughput and peak memory of our pipeline
 * on named configurations, optionally against a reference nanoBragg binary.
 * This file: the command line, where the stages, the drop-in and the data
 * are found, and main(); the parts are named in nb_bench.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nb_bench.h"
#include "nb_cli.h"
#include "nb_options.h"
#include "nb_util.h"

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
    "GPU, its driver and the CUDA versions.  The stages are found beside nb-bench; the P1.hkl\n"
    "of the tricubic configuration in $NB_DATADIR/bench, else in ../share/nb/bench beside\n"
    "nb-bench (an installed nb), else in the source tree (tests/golden/inputs).  See\n"
    "bench/README.md.",
    &table,
    "  nb-bench --config seed-1024 --reps 3\n"
    "  nb-bench --ref /path/to/nanoBragg --threads 1,2 --json bench/results.json\n"
    "  nb-bench --ref /path/to/nanoBragg --dropin --config seed-4096 --dir /dev/shm\n"
    "  nb-bench --device cuda --threads 16 --json bench/results/gpu.json\n",
    NULL,
    NULL, /* no exit status of its own */
};

/* ---- options --------------------------------------------------------------- */

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
        for (int c = 0; c < config_count; c++)
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

const nb_opt_choice devices[] = {{"cpu", DEVICE_CPU}, {"cuda", DEVICE_CUDA}, {NULL, 0}};

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
        for (int c = 0; c < config_count; c++) o->configs[o->nconfigs++] = c;
    return NB_OK;
}

/* ---- main ---------------------------------------------------------------------- */

/* The directory of this executable (the stages live beside it), the drop-in
 * and the configurations' data (bench_find_hkl: an installed share/nb, or
 * the source tree the executable was built in). */
static nb_status locate(bench_ctx *c, const char *argv0)
{
    char *self = realpath("/proc/self/exe", NULL);
    if (!self) self = realpath(argv0, NULL);
    if (!self) return nb_error_set(NB_ERR_IO, "cannot find the directory of nb-bench: %s", strerror(errno));
    *strrchr(self, '/') = '\0';
    c->bindir = self;
    c->hkl = bench_find_hkl(self, &c->hkl_where);
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
        if (strstr(configs[c->o->configs[i]].flags, "@HKL@") && !c->hkl)
            return nb_error_set(NB_ERR_IO, "configuration %s needs P1.hkl, looked for as %s",
                                configs[c->o->configs[i]].name, c->hkl_where);
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
    for (int i = 0; i < config_count; i++) {
        char *flags = config_flags(c, &configs[i]);
        printf("%-18s %s%s%s\n", configs[i].name, flags, configs[i].sim_flags ? "  | nb-sim " : "",
               configs[i].sim_flags ? configs[i].sim_flags : "");
        free(flags);
    }
    if (!c->hkl) nb_warn("@HKL@ (P1.hkl) was not found: looked for as %s", c->hkl_where);
}

/* what locate() found */
static void free_located(bench_ctx *c)
{
    free(c->bindir);
    free(c->dropin);
    free(c->hkl);
    free(c->hkl_where);
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
        free_located(&c);
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
    free_located(&c);
    free(c.topdir);
    free(o.ref);
    free(o.dir);
    nb_exit_on_error(st);
    return 0;
}
