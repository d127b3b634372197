/* nb-sim: render the plan into images of photons per pixel. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_cli.h"
#include "nb_hkl.h"
#include "nb_image.h"
#include "nb_image_record.h"
#include "nb_options.h"
#include "nb_plan.h"
#include "nb_pool.h"
#include "nb_stills.h"
#include "nb_sim.h"
#include "nb_engine.h"
#include "detector_file.h"
#include "smv.h"
#include "nb_stream.h"
#include "nb_tuning.h"
#include "nb_util.h"

static void print_backends(FILE *fp);
static const nb_opt_table table;

static const nb_tool_info tool = {
    "nb-sim",
    NB_SIM,
    "[OPTIONS] [STREAM]",
    "render a plan into images of absolute photons per pixel",
    "nb-sim reads an nb stream (a PLAN record, usually followed by the HKL record of nb-hkl)\n"
    "and writes it through, adding one IMAGE record of float32 photons/pixel after each plan\n"
    "(one per frame of a rotation series, nb-geom -nframes, rendered one at a time).\n"
    "The kernel sums, for every pixel, sub-pixels x detector layers x sources x phi steps x\n"
    "mosaic domains, as nanoBragg does.  The default is the fast path: Miller indices in double\n"
    "where they need it,\n"
    "everything after them in single precision, SIMD lanes across pixels (AVX-512, AVX2 or\n"
    "baseline, chosen at run time; NB_SIMD=avx2|generic forces a lower one) and OpenMP threads\n"
    "over rows.  -precision double is the reference-faithful path.  --device cuda renders on the\n"
    "GPU (the same physics source; its fast kernel takes the Miller index by offset from a\n"
    "reference per 32 pixels where the crystal allows it, -v says which, NB_CUDA_INDEX=double|offset\n"
    "forces either; one stream renders, so nb-sim sets CUDA_DEVICE_MAX_CONNECTIONS=1 unless it\n"
    "is set, and -v says how long CUDA took to start).  Statistics of the image (max and where,\n"
    "mean, rms, rmsd)\n"
    "go to standard error as the reference prints them; its \"solid angle subtended by detector\"\n"
    "is, as the reference's, the detector's divided by sources x phi steps x mosaic domains (over\n"
    "sensor layers): -v prints the detector's.  A frame of a series (-nframes N) prints one line,\n"
    "\"frame i/N: max_I = ...\" (with -v the reference's lines under \"frame i/N\"), and the series\n"
    "a summary: frames rendered, the detector's solid angle, the brightest frame.  On a terminal\n"
    "the progress bar says \"rendering frame i/N\", one bar and ETA for the whole run.\n"
    "--grad LIST adds after each image its derivatives with respect to the plan's named\n"
    "parameters (one IMAGE record each, GRAD_OF=name), exact in the pixel: dual numbers through\n"
    "the pixel of the path that renders the image (the fast path's, or with -precision double\n"
    "the double path's).  A parameter moves the plan itself, however it was made (nanoBragg's\n"
    "flags, -expt, -panels, -img): docs/physics.md 14 says what each moves.",
    &table,
    "  nb-geom -cell 100 100 100 90 90 90 -lambda 6.2 -N 5 -default_F 100 | nb-sim | nb-convert -o img.bin\n"
    "  nb-sim --threads 2 -precision double -o rendered.nbs plan.nbs\n"
    "  nb-geom ... -osc 1 -nframes 90 -o sweep.nbs; nb-sim --shard 2/3 -o part2.nbs sweep.nbs\n"
    "  nb-sim --grad distance,Xbeam,Ybeam plan.nbs | nb-convert --grad distance -o ddistance.bin\n",
    print_backends,
    NULL, /* no exit status of its own */
};

static void print_backends(FILE *fp)
{
    fprintf(fp, "backends: cpu (fast path: %s; double path)%s\n", nb_fast_variant(),
            nb_cuda_compiled() ? ", cuda (sm_80, sm_90, PTX)" : "");
}

enum device { DEV_AUTO, DEV_CPU, DEV_CUDA };

/* The CUDA context, opened at the first render that wants it. */
static nb_engine *engine; /* the run's device */

typedef struct sim_opts {
    int device;    /* enum device */
    int precision; /* -1: from the plan */
    int printout, printout_f, printout_s, have_printout;
    int progress;  /* -1: from the plan */
    int frame_first, frame_last; /* --frames, 1-based inclusive; 0: all */
    int shard_k, shard_m;        /* --shard K/M; 0: none */
    nb_grad_list grad;           /* --grad: the derivatives to render (n = 0: none) */
} sim_opts;

/* The derivatives of one frame: the plans around the plan, and per name
 * the whole detector's pixels (in their records' payloads). */
typedef struct grad_job {
    const nb_grad_plans *plans;
    long frame;
    float **pixels; /* per name, every panel's pixels */
} grad_job;

/* The reference's -printout lines for one pixel, on stderr. */
static void print_pixel(const nb_kparams *kp, const nb_plan *plan, int f, int s, float value)
{
    nb_pixel_trace tr;
    double omega = 0;
    int trip = 0;
    nb_pixel_double(kp, f, s, &omega, &trip, &tr);
    double twotheta = atan2(sqrt(tr.pos[1] * tr.pos[1] + tr.pos[2] * tr.pos[2]), tr.pos[0]);
    double test = sin(twotheta / 2.0) / (plan->lambda0 * 1e10);
    fprintf(stderr, "%4d %4d : stol = %g or %g\n", f, s, tr.stol, test);
    fprintf(stderr, "at %g %g %g\n", tr.pos[0], tr.pos[1], tr.pos[2]);
    fprintf(stderr, "hkl= %f %f %f  hkl0= %d %d %d\n", tr.h, tr.k, tr.l, tr.h0, tr.k0, tr.l0);
    fprintf(stderr, " F_cell=%g  F_latt=%g   I = %g\n", tr.F_cell, tr.F_latt, tr.I);
    fprintf(stderr, "I/steps %15.10g\n", tr.I / kp->steps);
    fprintf(stderr, "polar   %15.10g\n", tr.polar);
    fprintf(stderr, "omega   %15.10g\n", tr.omega);
    fprintf(stderr, "capfrac %15.10g\n", tr.capture);
    fprintf(stderr, "pixel   %15.10g\n", value);
    fprintf(stderr, "real-space cell vectors (Angstrom):\n");
    fprintf(stderr, "     %-10s  %-10s  %-10s\n", "a", "b", "c");
    for (int i = 0; i < 3; i++)
        fprintf(stderr, "%c: %11.8f %11.8f %11.8f\n", "XYZ"[i], tr.cell[i] * 1e10, tr.cell[3 + i] * 1e10,
                tr.cell[6 + i] * 1e10);
}

/* Statistics exactly as the reference computes them (in its pixel order),
 * into the IMAGE record's keys. */
static nb_status image_stats(const nb_kparams *kp, const float *img, const nb_render_result *res, nb_image_info *im)
{
    nb_stats st;
    nb_roi roi = {kp->roi_xmin, kp->roi_xmax, kp->roi_ymin, kp->roi_ymax};
    if (res->row_stats_filled) {
        nb_stats_from_rows(res->row_stats, kp->spixels, &st);
    } else {
        nb_status s = nb_image_stats(img, kp->fpixels, kp->spixels, roi, kp->mask, &st);
        if (s) return s;
    }
    double omega_sum = res->omega_sum;
    double max_x = 0.0, max_y = 0.0;
    if (st.max_index >= 0) {
        /* the reference records the position of the pixel's last sub-pixel */
        int os = kp->oversample;
        long f = st.max_index % kp->fpixels, s = st.max_index / kp->fpixels;
        max_x = kp->subpixel_size * (f * os + os - 1) + kp->subpixel_size / 2.0;
        max_y = kp->subpixel_size * (s * os + os - 1) + kp->subpixel_size / 2.0;
    }
    double omega = omega_sum / kp->steps;
    im->max_I = st.max_I, im->max_I_x = max_x, im->max_I_y = max_y;
    im->mean = st.mean, im->rms = st.rms, im->rmsd = st.rmsd;
    im->solid_angle = omega;
    im->has.max_I = im->has.max_I_x = im->has.max_I_y = im->has.mean = im->has.rms = im->has.rmsd = 1;
    im->has.solid_angle = 1;
    return NB_OK;
}

/* What a series' summary line reports: its frames' statistics so far. */
typedef struct series_summary {
    long frames;
    double seconds, solid_angle, max_I, mean_sum; /* solid_angle: the detector's */
    long max_frame; /* 0-based */
    /* the progress bar's: when the run began, its first frame and how many */
    double t0;
    long first, count;
} series_summary;

/* A frame's statistics on stderr (not with -q).  One image: the reference's
 * three lines, as it prints them.  A frame of a series: one line, "frame i/N:
 * ...", or with -v "frame i/N" and the reference's three lines. */
static void print_stats(const nb_image_info *im, long frame, int nframes)
{
    if (nb_verbosity() < 0) return;
    if (nframes > 1 && nb_verbosity() == 0) {
        fprintf(stderr, "frame %ld/%d: max_I = %g  at %g %g, mean= %g rms= %g rmsd= %g\n", frame + 1, nframes,
                im->max_I, im->max_I_x, im->max_I_y, im->mean, im->rms, im->rmsd);
        return;
    }
    if (nframes > 1) fprintf(stderr, "frame %ld/%d\n", frame + 1, nframes);
    fprintf(stderr, "solid angle subtended by detector = %g steradian ( %g%% sphere)\n", im->solid_angle,
            100 * im->solid_angle / 4 / M_PI);
    fprintf(stderr, "max_I = %g  at %g %g\n", im->max_I, im->max_I_x, im->max_I_y);
    fprintf(stderr, "mean= %g rms= %g rmsd= %g\n", im->mean, im->rms, im->rmsd);
}

/* The series' last line: how many frames, the figure every frame shares
 * (the detector's solid angle, not divided as the per-frame figure is) and
 * the brightest frame. */
static void print_summary(const series_summary *sum, int nframes)
{
    if (nb_verbosity() < 0 || nframes < 2 || sum->frames == 0) return;
    fprintf(stderr, "%ld of %d frames rendered in %.3g s: the detector subtends %g steradian (%g%% sphere), "
            "max_I = %g in frame %ld, mean of the frames' means = %g\n", sum->frames, nframes, sum->seconds,
            sum->solid_angle, 100 * sum->solid_angle / 4 / M_PI, sum->max_I, sum->max_frame + 1,
            sum->mean_sum / (double)sum->frames);
}

/* A still's shot into the IMAGE keys (STILL_*): what this frame was rendered
 * with, drawn again by the one function the frame view used. */
static nb_status still_keys(const nb_plan *series, long frame, nb_image_info *im)
{
    nb_still_shot shot;
    nb_still_draw(series, frame, &shot);
    memcpy(im->still_rotation, shot.U, sizeof shot.U);
    im->has.still_rotation = 1;
    im->still_Na = shot.Na, im->still_Nb = shot.Nb, im->still_Nc = shot.Nc;
    im->has.still_Na = im->has.still_Nb = im->has.still_Nc = 1;
    im->still_fluence = shot.fluence, im->has.still_fluence = 1;
    if (shot.spikes == 0) return NB_OK;
    nb_status st = nb_calloc((void **)&im->still_spectrum, (size_t)shot.spikes, sizeof(double), "the spectrum");
    if (st) return st;
    for (int k = 0; k < shot.spikes; k++) im->still_spectrum[k] = series->lambda0 * (1.0 + shot.spike[k]);
    im->still_spikes = shot.spikes;
    return NB_OK;
}

/* Frame `frame` of the plan into an IMAGE record, panel after panel.  With
 * one panel the renderer takes the CRC-32 of each row of its pixels into
 * row_crc (freed by the caller in any case), and *row_crc_taken says it took
 * them all; with several the writer takes the payload's CRC itself.  Its
 * statistics are printed and added to *sum. */
static nb_status render(const nb_plan *series, const nb_hkl *hkl, const sim_opts *o, const nb_grad_plans *gp,
                        long frame, nb_record *out, nb_record *grads, nb_payload_crc *row_crc, int *row_crc_taken,
                        series_summary *sum);

/* The frames this run renders, [*first, *last] 0-based, from --frames and
 * --shard; an empty range (a shard with no frames) is allowed. */
static nb_status frame_range(const sim_opts *o, int nframes, long *first, long *last)
{
    long a = 0, b = nframes - 1;
    if (o->frame_first) {
        if (o->frame_first > nframes || o->frame_last > nframes)
            return nb_error_set(NB_ERR_USAGE, "--frames %d:%d: the plan has %d frame%s", o->frame_first,
                                o->frame_last, nframes, nframes == 1 ? "" : "s");
        a = o->frame_first - 1, b = o->frame_last - 1;
    }
    if (o->shard_m) {
        /* contiguous blocks whose sizes differ by at most one */
        long n = b - a + 1, k = o->shard_k - 1, m = o->shard_m;
        long lo = a + k * n / m, hi = a + (k + 1) * n / m - 1;
        a = lo, b = hi;
    }
    *first = a, *last = b;
    return NB_OK;
}

/* A rendered frame: its IMAGE, its derivatives, its rows' CRC-32s. */
typedef struct out_frame {
    nb_record img;
    nb_record grads[NB_GRAD_MAX_NAMES]; /* the first ng used; held here, so that a frame is
                                           handed over by one copy */
    nb_payload_crc row_crc;
    int taken; /* the renderer took every row's CRC */
} out_frame;

/* The frames' writer (nb_pool, one worker): a thread that writes frame i
 * (into the pipe to the next stage, or a file) while this one renders frame
 * i+1.  Two frames are held at most (one being written, one waiting), so
 * memory holds three images whatever the length of the series. */
typedef struct frame_job {
    nb_pool_job base; /* the pool's part: first */
    out_frame fr;
} frame_job;

typedef struct frame_writer {
    nb_writer *w;
    int ng;
    nb_pool pool;
} frame_writer;

static void out_frame_free(out_frame *fr, int ng)
{
    for (int j = 0; j < ng; j++) nb_record_free(&fr->grads[j]);
    nb_payload_crc_free(&fr->row_crc);
    nb_record_free(&fr->img);
}

/* Write one frame: the IMAGE, then each derivative after it. */
static nb_status write_frame(nb_writer *w, out_frame *fr, int ng)
{
    nb_status st = nb_writer_put_consume(w, &fr->img, fr->taken ? &fr->row_crc : NULL);
    for (int j = 0; j < ng && !st; j++) st = nb_writer_put(w, &fr->grads[j]);
    return st;
}

/* On the writer: the frame written (unless an earlier one failed), its
 * images freed at once */
static nb_status frame_job_write(nb_pool_job *base, int skip, void **scratch, void *ctx)
{
    (void)scratch;
    frame_writer *fw = ctx;
    frame_job *j = (frame_job *)base;
    nb_status st = skip ? NB_OK : write_frame(fw->w, &j->fr, fw->ng);
    out_frame_free(&j->fr, fw->ng);
    return st;
}

static void frame_job_release(nb_pool_job *base, void *ctx)
{
    frame_writer *fw = ctx;
    frame_job *j = (frame_job *)base;
    out_frame_free(&j->fr, fw->ng);
    free(j);
}

/* Before this thread waits for the writer: the render's idle OpenMP threads
 * (the CPU's, one a core, or a GPU frame's few copying threads,
 * nb_sim_cuda.cu's FINISH_THREADS) would spin meanwhile, taking cores from
 * the stages that read the pipe (only the thread that owns them can let them
 * go).  A GPU series into nb-noise on 16 cores (an H200's host), 100 frames
 * of 1024^2 to /dev/null: 2.9-3.0 s with the copying threads kept, 1.6 s with
 * them let go; into nb-convert alone, where nb-sim waits too, no slower. */
static void frame_writer_waits(void *ctx)
{
    (void)ctx;
    nb_threads_release_idle();
}

/* Hand a rendered frame to the writer, or (no writer) write it here; the
 * frame is handed over whatever happens. */
static nb_status frame_writer_put(frame_writer *fw, out_frame *fr)
{
    if (!fw->pool.workers) {
        nb_status st = write_frame(fw->w, fr, fw->ng);
        out_frame_free(fr, fw->ng);
        return st;
    }
    frame_job *j = calloc(1, sizeof *j);
    if (!j) {
        out_frame_free(fr, fw->ng);
        return nb_error_set(NB_ERR_NOMEM, "out of memory");
    }
    j->fr = *fr;
    return nb_pool_submit(&fw->pool, &j->base);
}

/* Every frame of the plan this run renders, each IMAGE handed to the writer
 * as soon as it is done (written in order, by a thread of its own, while
 * the next renders). */
static nb_status render_series(const nb_plan *plan, const nb_hkl *hkl, const sim_opts *o, nb_writer *w)
{
    long first = 0, last = -1;
    nb_status st = frame_range(o, plan->nframes, &first, &last);
    if (st) return st;
    if (plan->nframes > 1)
        nb_info("frames %ld to %ld of %d", first + 1, last + 1, plan->nframes);
    nb_grad_plans gp;
    const int ng = o->grad.n;
    memset(&gp, 0, sizeof gp);
    if (ng && first <= last) st = nb_grad_plans_build(plan, &o->grad, &gp);
    if (st) return st;
    frame_writer fw;
    memset(&fw, 0, sizeof fw);
    fw.w = w, fw.ng = ng;
    /* one frame is written on this thread: there is nothing to overlap, and
     * the writer lets the render's idle OpenMP threads go before it writes
     * (nb_writer_put_consume), which only the thread that owns them can do */
    const nb_pool_ops ops = {frame_job_write, frame_job_release, NULL, frame_writer_waits, &fw};
    if (last > first) nb_pool_start(&fw.pool, 1, 2, &ops);
    series_summary sum;
    memset(&sum, 0, sizeof sum);
    sum.t0 = nb_now(), sum.first = first, sum.count = last - first + 1;
    for (long f = first; f <= last && !st; f++) {
        out_frame fr;
        memset(fr.grads, 0, sizeof fr.grads);
        st = render(plan, hkl, o, ng ? &gp : NULL, f, &fr.img, fr.grads, &fr.row_crc, &fr.taken, &sum);
        if (st) out_frame_free(&fr, ng);
        else st = frame_writer_put(&fw, &fr);
    }
    if (fw.pool.workers) {
        nb_threads_release_idle(); /* no frame follows: this thread only waits for the writer now */
        nb_status wst = nb_pool_stop(&fw.pool);
        if (!st) st = wst;
    }
    if (ng) nb_grad_plans_free(&gp);
    if (!st) print_summary(&sum, plan->nframes);
    return st;
}

/* "K/M", 1 <= K <= M; or "slurm": K and M from a Slurm job array */
static nb_status parse_shard(const char *v, int *k, int *m)
{
    if (!strcmp(v, "slurm")) {
        const char *id = getenv("SLURM_ARRAY_TASK_ID"), *lo = getenv("SLURM_ARRAY_TASK_MIN"),
                   *count = getenv("SLURM_ARRAY_TASK_COUNT");
        if (!id || !count)
            return nb_error_set(NB_ERR_USAGE, "--shard slurm: not in a Slurm job array (SLURM_ARRAY_TASK_ID and "
                                              "SLURM_ARRAY_TASK_COUNT are not set)");
        int i, n, min = 0;
        nb_status st = nb_parse_int(id, &i, "SLURM_ARRAY_TASK_ID");
        if (!st) st = nb_parse_int(count, &n, "SLURM_ARRAY_TASK_COUNT");
        if (!st && lo) st = nb_parse_int(lo, &min, "SLURM_ARRAY_TASK_MIN");
        if (st) return st;
        *k = i - min + 1, *m = n;
    } else {
        char *slash = strchr(v, '/');
        char first[32];
        size_t n = slash ? (size_t)(slash - v) : 0;
        if (!slash || n == 0 || n >= sizeof first)
            return nb_error_set(NB_ERR_USAGE, "option --shard: expected K/M (e.g. 2/3) or 'slurm', got '%s'", v);
        memcpy(first, v, n);
        first[n] = 0;
        nb_status st = nb_parse_int(first, k, "option --shard");
        if (!st) st = nb_parse_int(slash + 1, m, "option --shard");
        if (st) return st;
    }
    if (*m < 1 || *k < 1 || *k > *m)
        return nb_error_set(NB_ERR_USAGE, "option --shard %s: expected 1 <= K <= M, got K = %d, M = %d", v, *k, *m);
    return NB_OK;
}

static nb_status apply_frames(const nb_opt_args *a)
{
    sim_opts *o = a->dest;
    return nb_parse_frames(a->vals[0], &o->frame_first, &o->frame_last);
}

static nb_status apply_grad(const nb_opt_args *a)
{
    sim_opts *o = a->dest;
    nb_grad_list_free(&o->grad);
    return nb_grad_list_parse(a->vals[0], &o->grad);
}

static nb_status apply_shard(const nb_opt_args *a)
{
    sim_opts *o = a->dest;
    return parse_shard(a->vals[0], &o->shard_k, &o->shard_m);
}

static const nb_opt_choice devices[] = {{"cpu", DEV_CPU}, {"cuda", DEV_CUDA}, {"auto", DEV_AUTO}, {NULL, 0}};
static const nb_opt_choice precisions[] = {{"double", 1}, {"single", 0}, {NULL, 0}};

/* each flag overrides the plan's request (have_printout: -printout was given) */
#define SO(f) NB_AT(sim_opts, f)
static const nb_opt rows[] = {
    {FL_PRECISION, .type = NB_OPT_CHOICE, .at = {SO(precision)}, .choices = precisions,
     .expected = "'single' or 'double'"},
    {FL_PRINTOUT, .type = NB_OPT_SET, .sets = {{SO(printout), 1}, {SO(have_printout), 1}}},
    {FL_PRINTOUT_PIXEL, .type = NB_OPT_INTS, .at = {SO(printout_f), SO(printout_s)},
     .sets = {{SO(printout), 1}, {SO(have_printout), 1}}},
    {FL_PROGRESS, .type = NB_OPT_SET, .sets = {{SO(progress), 1}}},
    {FL_NOPROGRESS, .type = NB_OPT_SET, .sets = {{SO(progress), 0}}},
    {NB_OPT_LOCAL, "--device", 1, "cpu|cuda|auto",
     "where to render (default auto: CUDA when this build has it and a\n"
     "GPU is present, else the CPU); --version lists the backends",
     .type = NB_OPT_CHOICE, .at = {SO(device)}, .choices = devices, .expected = "cpu, cuda or auto"},
    {NB_OPT_LOCAL, "--frames", 1, "A:B",
     "render frames A to B of a series only (1-based, inclusive: the\n"
     "frames of files _000A .. _000B)",
     .needs = "a value", .type = NB_OPT_CALLBACK, .fn = apply_frames},
    {NB_OPT_LOCAL, "--shard", 1, "K/M",
     "render the K-th of M near-equal contiguous blocks of frames\n"
     "(1 <= K <= M); '--shard slurm' takes K and M from a Slurm job\n"
     "array (SLURM_ARRAY_TASK_ID, _MIN, _COUNT).  Any split gives the\n"
     "same frames, bit for bit, and the shards' streams joined with\n"
     "cat are one valid stream",
     .needs = "a value", .type = NB_OPT_CALLBACK, .fn = apply_shard},
    {NB_OPT_LOCAL, "--grad", 1, "LIST",
     "after each image, its derivative with respect to each named\n"
     "parameter (comma-separated), one IMAGE record each with GRAD_OF=name\n"
     "and UNITS=photons/unit: distance, Xbeam, Ybeam (mm), detector_rotx,\n"
     "detector_roty, detector_rotz, twotheta, cell_alpha, cell_beta,\n"
     "cell_gamma, misset_x, misset_y, misset_z (-misset's angles), rot_x,\n"
     "rot_y, rot_z (turns of the crystal about the lab's axes), mosaic\n"
     "(degree), cell_a, cell_b, cell_c, lambda (Angstrom), Na, Nb, Nc\n"
     "(cell), fluence (photons/m^2), scale (1), and each panel's\n"
     "panel<i>_shift_fast, _shift_slow, _shift_normal (mm), panel<i>_rot_fast,\n"
     "_rot_slow, _rot_normal (degree).  The derivatives of the image's\n"
     "path: the fast path (default) or, with -precision double, the double\n"
     "path (CPU or GPU, as --device)",
     .needs = "a value", .type = NB_OPT_CALLBACK, .fn = apply_grad},
};
#undef SO
static const nb_opt_table table = {NB_SIM, rows, (int)(sizeof rows / sizeof rows[0])};

/* What rendering one panel gave: the engine's account, and the caller's
 * place for it in the run's progress bar. */
typedef struct panel_render {
    nb_panel_done done;
    double omega_per_detector; /* the reference's solid-angle figure times this: the detector's */
    long frame;                /* 0-based, set by the caller: the progress bar's label */
    double t0, base, span;     /* set by the caller: the bar's part of the run (nb_progress_start_part) */
} panel_render;

/* The reference's -printout lines of the panel's pixels (every one, or the
 * -printout_pixel's) inside its ROI and mask. */
static void print_panel(const sim_opts *o, const nb_plan *plan, const nb_kparams *kp, const float *img)
{
    int pf = o->have_printout ? o->printout_f : plan->printout_fpixel;
    int ps = o->have_printout ? o->printout_s : plan->printout_spixel;
    const nb_panel *q = &plan->panels[0];
    for (int s = 0; s < q->spixels; s++)
        for (int f = 0; f < q->fpixels; f++) {
            if (pf >= 0 && !(f == pf && s == ps)) continue; /* the reference: f < 0 means every pixel */
            if (f < q->roi_xmin || f > q->roi_xmax || s < q->roi_ymin || s > q->roi_ymax) continue;
            if (q->mask && !q->mask[(size_t)s * q->fpixels + f]) continue;
            print_pixel(kp, plan, f, s, img[(size_t)s * q->fpixels + f]);
        }
}

/* Render one panel (plan is a one-panel plan, nb_plan_panel_view) into img
 * through the engine, with the reference's -printout lines (and, with gj,
 * its derivatives); pr->done.res.row_stats holds the rows' statistics
 * (filled here when the backend did not).  row_crc: NULL, or where the
 * renderer takes its rows' CRC-32s (a detector of one panel). */
static nb_status render_panel(const nb_plan *plan, const nb_hkl *hkl, const sim_opts *o, const grad_job *gj, int panel,
                              size_t offset, float *img, panel_render *pr, nb_payload_crc *row_crc)
{
    nb_status st;
    nb_progress prog;
    int progress = o->progress >= 0 ? o->progress : plan->progress;
    const int printout = o->have_printout ? o->printout : plan->printout;
    char label[64] = "rendering";
    if (plan->nframes > 1) snprintf(label, sizeof label, "rendering frame %ld/%d", pr->frame + 1, plan->nframes);
    nb_progress_start_part(&prog, label, plan->panels[0].spixels, progress && !printout, pr->t0, pr->base, pr->span);
    nb_row_stats *row_stats;
    if ((st = nb_calloc((void **)&row_stats, (size_t)plan->panels[0].spixels, sizeof *row_stats, "row statistics")))
        return st;
    /* faulted in here rather than a page at a time by the render's threads */
    nb_prefault(row_stats, (size_t)plan->panels[0].spixels * sizeof *row_stats);
    float *out[NB_GRAD_MAX_NAMES];
    for (int j = 0; gj && j < gj->plans->names.n; j++) out[j] = gj->pixels[j] + offset;
    const nb_panel_job job = {o->precision, gj ? gj->plans : NULL, gj ? gj->frame : 0, panel, out, &prog,
                              row_crc, row_stats, printout, NULL, NULL};
    st = nb_engine_render_panel(engine, plan, hkl, &job, img, &pr->done);
    pr->done.res.row_stats = row_stats;
    /* a renderer that reports no rows (the GPU's) still moves the bar on */
    if (!st && prog.done < prog.total) nb_progress_add(&prog, prog.total - prog.done);
    nb_progress_finish(&prog);
    if (st) {
        nb_panel_done_free(&pr->done);
        return st;
    }
    const nb_render_result *res = &pr->done.res;
    if (res->tripped)
        nb_warn("tricubic interpolation left the F grid for some pixels; those evaluations used the nearest "
                "neighbour (the reference would switch interpolation off for the rest of the image)");
    nb_info("rendered %d x %d pixels in %.6f s (%d steps per pixel, %s path)", plan->panels[0].fpixels,
            plan->panels[0].spixels, res->seconds, (int)pr->done.steps, pr->done.path);
    if (pr->done.use_cuda)
        nb_info("  GPU kernel %.3f ms, copies %.3f ms", res->kernel_seconds * 1e3, res->transfer_seconds * 1e3);
    if (printout) print_panel(o, plan, &pr->done.setup.kp, img);
    nb_panel_done_free(&pr->done);
    /* its sum is over sub-pixels x sensor layers; it is divided by every step */
    pr->omega_per_detector = (double)plan->nsources * plan->phisteps * plan->mosaic_domains /
                             (pr->done.thicksteps > 1 ? pr->done.thicksteps : 1);
    return NB_OK;
}

/* The statistics of a detector of several panels (the reference's figures
 * over all their pixels; the maximum's position is on its panel, from that
 * panel's PIX0): rows of every panel, in panel order. */
static void panels_stats(const nb_plan *plan, float *img, panel_render *pr, nb_image_info *im)
{
    int np = nb_plan_npanels(plan);
    double omega = 0.0, max_I = 0.0, max_x = 0.0, max_y = 0.0;
    double sum = 0, sumsq = 0, sum_all = 0;
    long n = 0, n_all = 0;
    /* first pass: sums; the largest pixel (the first panel holding it) */
    for (int i = 0; i < np; i++) {
        nb_plan v;
        size_t off;
        nb_plan_panel_view(plan, i, &v);
        nb_plan_panel_dims(plan, i, NULL, NULL, &off);
        nb_roi roi = {v.panels[0].roi_xmin, v.panels[0].roi_xmax, v.panels[0].roi_ymin, v.panels[0].roi_ymax};
        nb_row_stats *rows = pr[i].done.res.row_stats;
        for (int y = 0; y < v.panels[0].spixels; y++) {
            if (!pr[i].done.res.row_stats_filled)
                nb_row_stats_compute(img + off + (size_t)y * v.panels[0].fpixels, v.panels[0].fpixels, y, roi,
                                     v.panels[0].mask ? v.panels[0].mask + (size_t)y * v.panels[0].fpixels : NULL,
                                     &rows[y]);
            sum += rows[y].sum, sumsq += rows[y].sumsq, n += rows[y].n;
            sum_all += rows[y].sum_all, n_all += rows[y].n_all;
            if (rows[y].max > max_I) {
                int os = pr[i].done.oversample;
                long f = rows[y].arg % v.panels[0].fpixels, s = rows[y].arg / v.panels[0].fpixels;
                max_I = rows[y].max;
                max_x = pr[i].done.subpixel_size * (f * os + os - 1) + pr[i].done.subpixel_size / 2.0;
                max_y = pr[i].done.subpixel_size * (s * os + os - 1) + pr[i].done.subpixel_size / 2.0;
            }
        }
        omega += pr[i].done.res.omega_sum / pr[i].done.steps;
    }
    double mean = sum / (n > 0 ? n : 1);
    /* second: the deviations around that mean, over every ROI pixel */
    double dev = 0.0;
    for (int i = 0; i < np; i++) {
        nb_plan v;
        nb_plan_panel_view(plan, i, &v);
        const nb_row_stats *rows = pr[i].done.res.row_stats;
        for (int y = 0; y < v.panels[0].spixels; y++) {
            if (rows[y].n_all == 0) continue;
            double d = rows[y].sum_all / rows[y].n_all - mean;
            dev += rows[y].m2_all + rows[y].n_all * d * d;
        }
    }
    im->max_I = max_I, im->max_I_x = max_x, im->max_I_y = max_y;
    im->mean = mean;
    im->rms = sqrt(sumsq / ((n > 1 ? n : 2) - 1));
    im->rmsd = sqrt(dev / ((n_all > 1 ? n_all : 2) - 1));
    im->solid_angle = omega;
    im->has.max_I = im->has.max_I_x = im->has.max_I_y = im->has.mean = im->has.rms = im->has.rmsd = 1;
    im->has.solid_angle = 1;
}

/* The reference's "solid angle subtended by detector" is its solid-angle sum
 * divided by every step, so sources x phi steps x mosaic domains (over
 * sensor layers) too: -v says what the detector subtends (deviations.md 1.3),
 * which this returns. */
static double report_solid_angle(const panel_render *pr, int np)
{
    double omega = 0.0, factor = 1.0;
    for (int i = 0; i < np; i++) {
        omega += pr[i].done.res.omega_sum / pr[i].done.steps * pr[i].omega_per_detector;
        if (pr[i].omega_per_detector != 1.0) factor = pr[i].omega_per_detector;
    }
    if (factor != 1.0)
        nb_info("the detector subtends %g steradian (%g%% sphere); the \"solid angle subtended by detector\" "
                "figure, as the reference prints it, is that divided by sources x phi steps x mosaic domains / "
                "sensor layers = %g",
                omega, 100 * omega / 4 / M_PI, factor);
    return omega;
}

/* The derivative records of a frame (nb-sim --grad), pixels to come: the
 * frame's keys, GRAD_OF and the unit; gj->pixels where their pixels go. */
static nb_status grad_records(const nb_plan *plan, const nb_grad_plans *gp, long frame, nb_record *grads, grad_job *gj)
{
    nb_status st = NB_OK;
    for (int j = 0; j < gp->names.n && !st; j++) {
        nb_image_info im;
        nb_image_info_init(&im);
        nb_image_record_init(&grads[j]);
        st = nb_image_add_pixels(&grads[j], nb_plan_total_pixels(plan), NB_ARRAY_UNINITIALISED, &gj->pixels[j]);
        im.frame = frame, im.has.frame = 1;
        im.nframes = plan->nframes, im.has.nframes = 1;
        im.panel = 0, im.has.panel = 1;
        im.fpixels = plan->panels[0].fpixels, im.spixels = plan->panels[0].spixels;
        if (!st) st = nb_image_set_panels(&im, plan);
        snprintf(im.units, sizeof im.units, "photons/%s", nb_param_unit(&gp->names.param[j]));
        snprintf(im.grad_of, sizeof im.grad_of, "%s", nb_param_name(&gp->names.param[j]));
        im.phi_start = plan->phi0, im.has.phi_start = 1;
        im.phi_range = plan->osc, im.has.phi_range = 1;
        snprintf(im.rendered_by, sizeof im.rendered_by, "nb-sim %s", NB_VERSION);
        if (!st) st = nb_image_put_header(&im, &grads[j], NB_IMAGE_ALL_KEYS);
        nb_image_info_free(&im);
    }
    gj->plans = gp;
    gj->frame = frame;
    return st;
}

/* Frame `frame` of the plan into an IMAGE record, panel after panel.  With
 * one panel the renderer takes the CRC-32 of each row of its pixels into
 * row_crc (freed by the caller in any case), and *row_crc_taken says it took
 * them all; with several the writer takes the payload's CRC itself. */
static nb_status render(const nb_plan *series, const nb_hkl *hkl, const sim_opts *o, const nb_grad_plans *gp,
                        long frame, nb_record *out, nb_record *grads, nb_payload_crc *row_crc, int *row_crc_taken,
                        series_summary *sum)
{
    nb_plan frame_plan;
    nb_source *shot_sources = NULL; /* a still's spectrum: the frame's own sources */
    const nb_plan *plan = &frame_plan;
    nb_status st;
    panel_render *pr;
    float *img;
    memset(row_crc, 0, sizeof *row_crc);
    *row_crc_taken = 0;
    nb_image_record_init(out);
    if ((st = nb_engine_frame(series, frame, &frame_plan, &shot_sources))) return st;
    const int np = nb_plan_npanels(plan);
    st = nb_image_add_pixels(out, nb_plan_total_pixels(plan), NB_ARRAY_UNINITIALISED, &img);
    /* the pixels' rows, where they lie in the payload (adding the keys does not move it) */
    if (!st && np == 1)
        st = nb_payload_crc_init(row_crc, (uint64_t)((unsigned char *)img - out->payload),
                                 (size_t)plan->panels[0].fpixels * sizeof(float), (size_t)plan->panels[0].spixels);
    if (st) {
        free(shot_sources);
        return st;
    }
    float *grad_pixels[NB_GRAD_MAX_NAMES];
    grad_job job = {NULL, frame, grad_pixels};
    if (!st && gp) st = grad_records(plan, gp, frame, grads, &job);
    if (!st) st = nb_calloc((void **)&pr, (size_t)np, sizeof *pr, "panel renders");
    if (st) {
        free(shot_sources);
        return st;
    }
    /* each panel with the kernels as they are: its own geometry in nb_kparams */
    double seconds = 0.0, kernel_seconds = 0.0;
    for (int i = 0; i < np && !st; i++) {
        nb_plan v;
        size_t off;
        nb_plan_panel_view(plan, i, &v);
        nb_plan_panel_dims(plan, i, NULL, NULL, &off);
        if (np > 1) nb_info("panel %d of %d", i, np);
        pr[i].frame = frame;
        /* the bar runs over the whole run: this panel's share of its frame's pixels */
        double all = (double)nb_plan_total_pixels(plan), before = (double)off,
               n = (double)v.panels[0].fpixels * v.panels[0].spixels;
        double count = sum->count > 0 ? (double)sum->count : 1.0;
        pr[i].t0 = sum->t0;
        pr[i].base = ((double)(frame - sum->first) + before / all) / count;
        pr[i].span = n / all / count;
        st = render_panel(&v, hkl, o, gp ? &job : NULL, i, off, img + off, &pr[i], np == 1 ? row_crc : NULL);
        seconds += pr[i].done.res.seconds, kernel_seconds += pr[i].done.res.kernel_seconds;
    }

    nb_image_info im;
    nb_image_info_init(&im);
    if (!st) {
        int use_cuda = pr[0].done.use_cuda, use_double = pr[0].done.use_double;
        im.frame = frame, im.has.frame = 1;
        im.nframes = plan->nframes, im.has.nframes = 1;
        im.panel = 0, im.has.panel = 1;
        im.fpixels = plan->panels[0].fpixels, im.spixels = plan->panels[0].spixels;
        st = nb_image_set_panels(&im, plan);
        snprintf(im.units, sizeof im.units, "photons");
        snprintf(im.precision, sizeof im.precision, "%s", use_double ? "double" : "single");
        im.phi_start = plan->phi0, im.has.phi_start = 1;
        im.phi_range = plan->osc, im.has.phi_range = 1;
        snprintf(im.rendered_by, sizeof im.rendered_by, "nb-sim %s", NB_VERSION);
        im.render_seconds = seconds, im.has.render_seconds = 1;
        snprintf(im.render_path, sizeof im.render_path, "%s", pr[0].done.path);
        im.kernel_seconds = kernel_seconds, im.has.kernel_seconds = use_cuda;
        if (series->stills.on) st = still_keys(series, frame, &im);
    }
    if (!st && np == 1) {
        nb_kparams kp; /* what image_stats reads of the one panel */
        memset(&kp, 0, sizeof kp);
        nb_kparams_set_panel(&kp, &plan->panels[0]);
        kp.oversample = pr[0].done.oversample, kp.subpixel_size = pr[0].done.subpixel_size, kp.steps = pr[0].done.steps;
        st = image_stats(&kp, img, &pr[0].done.res, &im);
        *row_crc_taken = pr[0].done.res.row_stats_filled;
    } else if (!st) {
        panels_stats(plan, img, pr, &im);
    }
    if (!st) {
        print_stats(&im, frame, plan->nframes);
        sum->solid_angle = report_solid_angle(pr, np);
        if (sum->frames == 0 || im.max_I > sum->max_I) sum->max_I = im.max_I, sum->max_frame = frame;
        sum->frames++, sum->seconds += seconds, sum->mean_sum += im.mean;
    }
    if (!st) st = nb_image_put_header(&im, out, NB_IMAGE_ALL_KEYS);
    /* the derivatives came from the kernel that rendered the image */
    for (int j = 0; gp && !st && j < gp->names.n; j++) {
        nb_hdr_set(&grads[j], "RENDER_PATH", pr[0].done.path);
        nb_hdr_set(&grads[j], "PRECISION", pr[0].done.use_double ? "double" : "single");
    }
    nb_image_info_free(&im);
    for (int i = 0; i < np; i++) free(pr[i].done.res.row_stats);
    free(pr);
    free(shot_sources);
    return st;
}

int main(int argc, char **argv)
{
    nb_std_opts opts;
    sim_opts o = {DEV_AUTO, -1, 0, -1, -1, 0, -1, 0, 0, 0, 0, {0, NULL}};
    nb_status st = NB_OK;

    nb_set_tool_name(tool.name);
    nb_std_opts_init(&opts);
    /* its stream goes to standard output unless -o says otherwise: a failure
     * from here on leaves an ABORT record on the pipe to the next stage */
    nb_stream_to_stdout(1);
    nb_exit_on_error(nb_tool_parse(&tool, &opts, &o, argc, argv));
    nb_exit_on_error(nb_std_apply(&opts));
    nb_stream_to_stdout(!strcmp(opts.output, "-"));
    if (o.device != DEV_CPU) nb_cuda_environment(); /* before the reader's and writer's threads */
    const nb_engine_device devices_of[] = {[DEV_AUTO] = NB_ENGINE_AUTO, [DEV_CPU] = NB_ENGINE_CPU,
                                           [DEV_CUDA] = NB_ENGINE_CUDA};
    nb_exit_on_error(nb_engine_open(&engine, devices_of[o.device]));

    nb_reader *r = NULL;
    nb_writer *w = NULL;
    nb_record rec;
    nb_plan plan;
    nb_hkl hkl;
    int have_plan = 0, have_hkl = 0, eof = 0;
    memset(&rec, 0, sizeof rec);
    nb_hkl_init(&hkl);
    st = nb_reader_open(&r, opts.input);
    if (!st) st = nb_writer_open(&w, opts.output);
    /* A plan is rendered when its HKL record arrives, or at the next plan or
     * segment end when there is none (a -default_F plan needs no nb-hkl). */
    while (!st) {
        st = nb_reader_next(r, &rec, &eof);
        if (st) break;
        int flush = eof || nb_record_is(&rec, "END") || nb_record_is(&rec, "PLAN");
        if (have_plan && flush && !have_hkl) {
            st = nb_sim_plan_F(&plan, &hkl);
            if (!st) st = render_series(&plan, &hkl, &o, w);
            nb_plan_free(&plan);
            have_plan = 0;
            if (st) break;
        }
        if (eof) break;
        if (nb_record_is(&rec, "END")) {
            st = nb_writer_end(w);
            continue;
        }
        if (nb_record_is(&rec, "IMAGE") && have_plan) {
            nb_warn("dropping an IMAGE record already in the stream: this plan is rendered again");
            continue;
        }
        if ((st = nb_writer_put(w, &rec))) break;
        if (nb_record_is(&rec, "PLAN")) {
            if ((st = nb_plan_from_record(&rec, &plan))) break;
            have_plan = 1;
            have_hkl = 0;
        } else if (nb_record_is(&rec, "HKL") && have_plan) {
            nb_hkl_free(&hkl);
            if ((st = nb_hkl_from_record(&rec, &hkl))) break;
            have_hkl = 1;
            st = render_series(&plan, &hkl, &o, w);
            nb_plan_free(&plan);
            nb_hkl_free(&hkl);
            have_plan = 0;
        }
    }
    if (have_plan) nb_plan_free(&plan);
    nb_engine_close(engine);
    nb_grad_list_free(&o.grad);
    nb_hkl_free(&hkl);
    nb_record_free(&rec);
    nb_reader_close(r);
    if (!st) st = nb_writer_close(w);
    else if (w) nb_writer_abort(w);
    nb_exit_on_error(st);
    return 0;
}
