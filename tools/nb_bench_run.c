/* nb_bench_run.c - nb-bench's runs: our pipeline (nb-geom | nb-hkl |
 * nb-sim | nb-convert, nb-sim's own render time read from its -v log), the
 * drop-in, and the reference with and without -roi 0 0 0 0 (its render time
 * is the difference), each in a fresh run directory with OMP_NUM_THREADS of
 * the thread count; a configuration's repetitions interleaved across the
 * thread counts, and summarised (median, minimum, maximum). */
#include "nb_bench.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nb_cli.h"
#include "nb_util.h"

extern char **environ;

/* ---- one run of each kind ------------------------------------------------- */

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
char *config_flags(const bench_ctx *c, const bench_config *cfg)
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

const char *ours_stage_names[4] = {"nb-geom", "nb-hkl", "nb-sim", "nb-convert"};

void build_ours(const bench_ctx *c, const bench_config *cfg, int threads, stage s[4])
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

void build_single(const bench_ctx *c, const bench_config *cfg, single_run kind, stage *s)
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

double ratio(double num, double den) { return isfinite(num) && isfinite(den) && den > 0 ? num / den : NAN; }

int largest_stage(const long rss[4])
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

nb_status bench_config_runs(bench_ctx *c, const bench_config *cfg, result *res)
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
