/* nb-noise: detector counts from photons, with the reference's generator or,
 * on every thread or a GPU, the counter-based one. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_cli.h"
#include "nb_image_record.h"
#include "nb_noise.h"
#include "nb_noise_cuda.h"
#include "nb_noise_plan.h"
#include "nb_options.h"
#include "nb_plan.h"
#include "nb_rng.h"
#include "nb_stream.h"
#include "nb_util.h"

enum device { DEV_CPU, DEV_CUDA, DEV_AUTO };

static void print_backends(FILE *fp);

typedef struct noise_opts {
    nb_noise_params p;
    int device; /* enum device */
    int have_seed, have_adc, nonoise, have_fluence;
    int64_t seed;
    double adc, fluence, psf_fwhm_um;
} noise_opts;

/* noisify's integer settings and what each allows: -bits 16|32 (the two
 * counter depths), -psf_radius 0..100000 pixels (0: automatic) */
static nb_status apply_noise_int(const nb_opt_args *a)
{
    noise_opts *o = a->dest;
    int bits = a->opt->id == FL_BITS, *v = bits ? &o->p.bits : &o->p.psf_radius;
    char what[64];
    snprintf(what, sizeof what, "option %s", a->name);
    nb_status st = nb_parse_int(a->vals[0], v, what);
    if (st) return st;
    if (bits && *v != 16 && *v != 32) return nb_error_set(NB_ERR_USAGE, "option -bits: 16 or 32, not %s", a->vals[0]);
    if (!bits && (*v < 0 || *v > 100000))
        return nb_error_set(NB_ERR_USAGE, "option -psf_radius: %s pixels is not sensible", a->vals[0]);
    return NB_OK;
}

/* -fluence: not negative (the row's check), and then not zero either: the
 * photons are rescaled by its ratio to the plan's */
static nb_status apply_fluence(const nb_opt_args *a)
{
    noise_opts *o = a->dest;
    double x;
    nb_status st = nb_opt_number(a->opt, a->name, a->vals[0], &x);
    if (st) return st;
    if (x <= 0) return nb_error_set(NB_ERR_USAGE, "option -fluence must be positive");
    o->fluence = x;
    return NB_OK;
}

static const nb_opt_choice devices[] = {{"cpu", DEV_CPU}, {"cuda", DEV_CUDA}, {"auto", DEV_AUTO}, {NULL, 0}};

static const nb_opt_choice rngs[] = {{"reference", NB_NOISE_RNG_REFERENCE}, {"philox", NB_NOISE_RNG_PHILOX}, {NULL, 0}};

static const nb_opt_choice psfs[] = {
    {"gauss", NB_PSF_GAUSS}, {"gaussian", NB_PSF_GAUSS}, {"fiber", NB_PSF_FIBER}, {"fibre", NB_PSF_FIBER}, {NULL, 0}};

/* each flag overrides the plan's request: have_* says it was given; noisify's
 * fractions, widths and scales are never negative */
#define NO(f) NB_AT(noise_opts, f)
#define EFFECT(id, f) {id, .type = NB_OPT_DOUBLE, .at = {NO(f)}, .check = NB_CHECK_NONNEG}
static const nb_opt rows[] = {
    {FL_SEED, .type = NB_OPT_SEED, .at = {NO(seed)}, .sets = {{NO(have_seed), 1}}},
    {FL_CALIB_SEED, .type = NB_OPT_SEED, .at = {NO(p.calib_seed)}},
    {FL_NONOISE, .type = NB_OPT_SET, .sets = {{NO(nonoise), 1}}},
    {FL_ADC, .type = NB_OPT_DOUBLE, .at = {NO(adc)}, .sets = {{NO(have_adc), 1}}},
    {FL_BITS, .type = NB_OPT_CALLBACK, .fn = apply_noise_int},
    {FL_PSF, .type = NB_OPT_CHOICE, .at = {NO(p.psf)}, .choices = psfs, .expected = "'gauss' or 'fiber'"},
    {FL_PSF_RADIUS, .type = NB_OPT_CALLBACK, .fn = apply_noise_int},
    EFFECT(FL_FLICKER, p.flicker),
    EFFECT(FL_CALIBRATION, p.calibration),
    EFFECT(FL_READOUT, p.readout),
    EFFECT(FL_GAIN, p.gain),
    EFFECT(FL_PSF_FWHM, psf_fwhm_um),
    EFFECT(FL_PHOTON_SCALE, p.photon_scale),
    {FL_NOISE_FLUENCE, .type = NB_OPT_CALLBACK, .check = NB_CHECK_NONNEG, .fn = apply_fluence,
     .sets = {{NO(have_fluence), 1}}},
    {NB_OPT_LOCAL, "--rng", 1, "reference|philox",
     "where the deviates come from: nanoBragg's generator, one sequence in\n"
     "the pixels' order (reference, the default); or Philox4x32-10, each\n"
     "pixel's deviates a function of (seed, frame, pixel) alone, counted on\n"
     "every thread with the same counts for any thread count (an nb\n"
     "extension: other numbers, the same distributions)",
     .needs = "a name", .type = NB_OPT_CHOICE, .at = {NO(p.rng)}, .choices = rngs,
     .expected = "'reference' or 'philox'"},
    {NB_OPT_LOCAL, "--device", 1, "cpu|cuda|auto",
     "where to count (default auto): auto counts on the GPU when this\n"
     "build has CUDA, a GPU is present and the generator is Philox's, else\n"
     "on the CPU, the same counts either way; cuda on the GPU or not at all\n"
     "(needs --rng philox; a PSF is spread on the CPU); cpu on the CPU.\n"
     "--version lists the backends",
     .needs = "a name", .type = NB_OPT_CHOICE, .at = {NO(device)}, .choices = devices,
     .expected = "cpu, cuda or auto"},
};
#undef NO
#undef EFFECT
static const nb_opt_table table = {NB_NOISE, rows, (int)(sizeof rows / sizeof rows[0])};

static const nb_tool_info tool = {
    "nb-noise",
    NB_NOISE,
    "[OPTIONS] [STREAM]",
    "add detector counts (Poisson noise and detector effects) to rendered images",
    "nb-noise reads an nb stream and, to every IMAGE record of photons/pixel, adds an array of\n"
    "detector counts; the photons pass through, so one stream carries both.  By default the\n"
    "counts are nanoBragg's noise image: Poisson deviates from its generator in its pixel\n"
    "order over the ROI, plus the ADC offset, clipped at 65535 - the same seed and the same\n"
    "float image give the same counts.  The seed comes from -seed or the plan; a plan's seed\n"
    "that nb-geom drew from the clock (no -seed) is logged on stderr (not with -q); frame i of a\n"
    "series uses a seed derived from (seed, i).  Each panel of a detector of several panels\n"
    "(nb-geom -panels) is counted on its own, over its ROI, its PSF never crossing into another:\n"
    "panel 0 as a one-panel detector, panel j from seeds derived from (seed, j) and\n"
    "(-calib_seed, j).  The effects of nanoBragg's noisify program\n"
    "are opt-in: -flicker, -calibration, -readout, -gain, -psf, -bits, -scale, -fluence.\n"
    "--rng philox draws every deviate from a counter-based generator instead (an nb extension,\n"
    "docs/physics.md 11.5): other numbers with the same distributions, counted on every\n"
    "thread, the same counts for any thread count, and on a GPU where there is one (--device),\n"
    "each pixel as the CPU counts it.",
    &table,
    "  nb-geom ... | nb-hkl | nb-sim | nb-noise -seed 7 | nb-convert -o noisy.img\n"
    "  nb-noise -seed 2 -readout 3 -psf gauss -psf_fwhm 100 < rendered.nbs | nb-convert -o frame.cbf\n"
    "  nb-sim --device cuda sweep.nbs | nb-noise --rng philox | nb-convert -o s_#.img\n",
    print_backends,
    NULL, /* no exit status of its own */
};

static void print_backends(FILE *fp)
{
    fprintf(fp, "backends: cpu%s\n", nb_noise_cuda_compiled() ? ", cuda (sm_80, sm_90, PTX; --rng philox)" : "");
}

/* Whether a GPU may count: asked for (cuda, auto) and Philox's generator,
 * whose deviates each pixel draws alone (the reference's is one sequence). */
static int may_count_on_gpu(const noise_opts *o)
{
    return o->device != DEV_CPU && o->p.rng == NB_NOISE_RNG_PHILOX;
}

/* The GPU that counts (--device cuda, or auto where there is one), opened
 * at the first frame to count; NULL: the CPU counts. */
static nb_noise_cuda *cuda;
static int cuda_tried;

/* Where a frame is counted: *dev, the GPU, when asked (an error if there is
 * none) or when 'auto' finds one for Philox's generator; NULL, the CPU. */
static nb_status pick_device(const noise_opts *o, nb_noise_device *gpu, const nb_noise_device **dev)
{
    *dev = NULL;
    if (!may_count_on_gpu(o)) return NB_OK;
    if (!cuda_tried) {
        char desc[256] = "";
        cuda_tried = 1;
        const double t0 = nb_now();
        nb_status st = nb_noise_cuda_open(&cuda, desc, sizeof desc);
        if (st) {
            if (o->device == DEV_CUDA) return nb_error_prefix(st, "--device cuda");
            /* 'auto' on a machine without a GPU counts on the CPU; -v says why */
            if (nb_noise_cuda_compiled()) nb_info("%s; counting on the CPU", nb_error_message());
        } else {
            nb_info("counting on %s", desc);
            nb_info("  CUDA started in %.0f ms", (nb_now() - t0) * 1e3);
        }
    }
    if (cuda) {
        *gpu = nb_noise_cuda_device(cuda);
        *dev = gpu;
    }
    return NB_OK;
}

/* What the stream's images came to: counted for "no images", and the
 * photons and overloads of a series' frames for its summary line. */
typedef struct noise_tally {
    int images;
    long frames; /* frames of a series given counts */
    long nframes; /* the series' length (the last image's) */
    double photons;
    long overloads;
} noise_tally;

/* A frame's line on stderr (not with -q): one image, the reference's; a
 * frame of a series, only with -v, "frame i/N: ..." (a summary follows). */
static void print_noise(const nb_image_info *im, const nb_noise_result *res, noise_tally *t)
{
    if (im->nframes > 1) {
        t->frames++, t->nframes = im->nframes;
        t->photons += res->photons, t->overloads += res->overloads;
        if (nb_verbosity() > 0)
            fprintf(stderr, "frame %ld/%ld: %.0f photons on noise image (%ld overloads)\n", im->frame + 1,
                    im->nframes, res->photons, res->overloads);
    } else if (nb_verbosity() >= 0) {
        fprintf(stderr, "%.0f photons on noise image (%ld overloads)\n", res->photons, res->overloads);
    }
}

/* The IMAGE record `in` (im: its parsed keys, which this changes) again,
 * with its photons and the counts made from them (any earlier counts and
 * their keys replaced). */
static nb_status noise_image(const nb_plan *plan, const noise_opts *o, nb_rng *rng, const nb_record *in,
                             nb_image_info *im, nb_record *out, noise_tally *t)
{
    const float *px;
    nb_noise_device gpu;
    const nb_noise_device *dev;
    nb_status st;
    if ((st = nb_image_check_plan(im, plan)) || (st = nb_image_pixels(in, im, &px, NULL)) ||
        (st = pick_device(o, &gpu, &dev)))
        return st;

    nb_noise_params p = o->p;
    p.seed = nb_frame_seed(o->have_seed ? o->seed : plan->seed, im->frame);
    p.adc = o->have_adc ? o->adc : plan->adc;
    if (o->have_fluence) p.photon_scale *= o->fluence / plan->fluence;

    /* the frame's keys, its photons, then the counts and theirs: the payload
     * allocated once, and the counts left for the counting passes to write
     * (each writes every pixel of its panel, on the threads that count), so
     * that this thread copies only the photons (a 1024^2 frame: 4 MiB to
     * copy and fault in, not 12) */
    nb_image_drop_counts(im);
    nb_image_record_init(out);
    int32_t *counts;
    if ((st = nb_image_put_header(im, out, NB_IMAGE_FRAME_KEYS)) ||
        (st = nb_record_reserve(out, im->npixels * (sizeof(float) + sizeof(int32_t)) + 16)) ||
        (st = nb_image_add_pixels(out, im->npixels, px, NULL)) ||
        (st = nb_image_add_counts(out, im->npixels, NB_ARRAY_UNINITIALISED, &counts)))
        return st;
    /* each panel on its own (nb_noise_plan.h); frame 0 continues the plan's
     * generator state, as the reference's noise image follows its mosaic draws */
    nb_noise_result res;
    st = nb_noise_plan_frame(plan, &p, o->psf_fwhm_um, im->frame, rng, dev, px, counts, &res);
    if (st) return st;
    im->counts_bits = p.bits, im->has.counts_bits = 1;
    im->counts_adc = p.adc, im->has.counts_adc = 1;
    im->counts_gain = p.gain, im->has.counts_gain = 1;
    im->noise_seed = -p.seed, im->has.noise_seed = 1;
    if (p.rng == NB_NOISE_RNG_PHILOX) snprintf(im->noise_rng, sizeof im->noise_rng, "philox");
    im->noise_photons = res.photons, im->has.noise_photons = 1;
    im->noise_overloads = res.overloads, im->has.noise_overloads = 1;
    st = nb_image_put_header(im, out, NB_IMAGE_COUNT_KEYS);
    if (!st) print_noise(im, &res, t);
    return st;
}

/* One IMAGE record on: a derivative (nb-sim --grad) as it is, for it is no
 * image of photons; an image with its counts, unless the options or the plan
 * say -nonoise. */
static nb_status put_image(const nb_plan *plan, const noise_opts *o, nb_rng *rng, const nb_record *rec,
                           nb_writer *w, noise_tally *t)
{
    nb_image_info im;
    nb_status st = nb_image_from_record(rec, &im);
    if (st) return st;
    const int pass = o->nonoise || (plan && !plan->calculate_noise);
    if (nb_image_is_grad(&im)) {
        st = nb_writer_put(w, rec);
    } else if (pass) {
        if (!o->nonoise) nb_info("the plan says -nonoise: no counts added");
        t->images++;
        st = nb_writer_put(w, rec);
    } else {
        nb_record out;
        memset(&out, 0, sizeof out);
        t->images++;
        st = noise_image(plan, o, rng, rec, &im, &out, t);
        if (!st) st = nb_writer_put(w, &out);
        nb_record_free(&out);
    }
    nb_image_info_free(&im);
    return st;
}

int main(int argc, char **argv)
{
    nb_std_opts opts;
    noise_opts o;
    memset(&o, 0, sizeof o);
    o.device = DEV_AUTO; /* the GPU's counts are the CPU's, byte for byte (docs/physics.md 11.5) */
    nb_set_tool_name(tool.name);
    nb_std_opts_init(&opts);
    /* its stream goes to standard output unless -o says otherwise: a failure
     * from here on leaves an ABORT record on the pipe to the next stage */
    nb_stream_to_stdout(1);
    nb_noise_defaults(&o.p);
    o.psf_fwhm_um = 46.0;
    nb_exit_on_error(nb_tool_parse(&tool, &opts, &o, argc, argv));
    if (o.device == DEV_CUDA && o.p.rng != NB_NOISE_RNG_PHILOX)
        nb_exit_on_error(nb_error_set(NB_ERR_USAGE, "--device cuda counts with --rng philox only: nanoBragg's "
                                                    "generator is one sequence in the pixels' order"));
    if (may_count_on_gpu(&o)) nb_noise_cuda_environment(); /* before the reader's and writer's threads */
    nb_exit_on_error(nb_std_apply(&opts));
    nb_stream_to_stdout(!strcmp(opts.output, "-"));

    nb_reader *r = NULL;
    nb_writer *w = NULL;
    nb_record rec;
    nb_plan plan;
    int have_plan = 0, eof = 0;
    noise_tally tally;
    memset(&tally, 0, sizeof tally);
    nb_rng rng;
    memset(&rec, 0, sizeof rec);
    nb_status st = nb_reader_open(&r, opts.input);
    if (!st) st = nb_writer_open(&w, opts.output);
    while (!st) {
        st = nb_reader_next(r, &rec, &eof);
        if (st || eof) break;
        if (nb_record_is(&rec, "END")) {
            st = nb_writer_end(w);
            continue;
        }
        if (nb_record_is(&rec, "PLAN")) {
            if (have_plan) nb_plan_free(&plan);
            if ((st = nb_plan_from_record(&rec, &plan))) break;
            have_plan = 1;
            rng = plan.rng;
            /* a seed from the clock: say which, so that the noise can be drawn again */
            if (plan.seed_drawn && !o.have_seed && !o.nonoise && plan.calculate_noise && nb_verbosity() >= 0)
                fprintf(stderr, "nb-noise: noise seed %lld, drawn from the clock by nb-geom (-seed %lld draws "
                                "this noise again)\n", (long long)-plan.seed, (long long)-plan.seed);
        }
        if (nb_record_is(&rec, "IMAGE")) st = put_image(have_plan ? &plan : NULL, &o, &rng, &rec, w, &tally);
        else st = nb_writer_put(w, &rec);
    }
    if (!st && tally.images == 0) st = nb_image_none(r ? nb_reader_name(r) : opts.input);
    if (!st && tally.frames && nb_verbosity() >= 0)
        fprintf(stderr, "%ld of %ld frames: %.0f photons on noise images (%ld overloads)\n", tally.frames,
                tally.nframes, tally.photons, tally.overloads);
    if (have_plan) nb_plan_free(&plan);
    nb_noise_cuda_close(cuda);
    nb_record_free(&rec);
    nb_reader_close(r);
    if (!st) st = nb_writer_close(w);
    else if (w) nb_writer_abort(w);
    nb_exit_on_error(st);
    return 0;
}
