/* nb_bench_report.c - what nb-bench reports: the table (ours, the drop-in
 * and the reference per configuration and thread count, the GPU's times,
 * the thread scaling, the derivatives' cost) and the same as JSON, with how
 * each figure is measured. */
#include "nb_bench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nb_util.h"

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

void print_table(FILE *fp, const bench_ctx *c, const result *r, int n)
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

/* The document's opening: the tool, the machine, the options, and how each
 * figure is measured ("method"), up to the results' array. */
static void json_preamble(FILE *fp, const bench_ctx *c, const result *r, int n, const char *cmdline)
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
}

/* One result's configuration and our pipeline's figures ("ours"). */
static void json_ours(FILE *fp, const bench_ctx *c, const result *x, int first)
{
    const bench_opts *o = c->o;
    stage s[4];
    build_ours(c, x->cfg, x->threads, s);
    char *ours_cmd = stage_command(s, 4, " | ");
    fprintf(fp, "%s\n    {\n      \"config\": ", first ? "" : ",");
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
}

/* The drop-in's and the reference's figures, and the ratios ref / ours. */
static void json_single_runs(FILE *fp, const bench_ctx *c, const result *x)
{
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
}

/* The thread scaling from the same configuration at the fewest threads. */
static void json_scaling(FILE *fp, const result *r, int n, int i)
{
    const result *x = &r[i];
    int base = scaling_base(r, n, i);
    if (base < 0) return;
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

void write_json(FILE *fp, const bench_ctx *c, const result *r, int n, const char *cmdline)
{
    json_preamble(fp, c, r, n, cmdline);
    for (int i = 0; i < n; i++) {
        json_ours(fp, c, &r[i], i == 0);
        json_single_runs(fp, c, &r[i]);
        json_scaling(fp, r, n, i);
        fputs("\n    }", fp);
    }
    fputs("\n  ]\n}\n", fp);
}
