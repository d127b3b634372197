/* nb-math: arithmetic on streams of rendered images - the photons of the
 * main stream's IMAGE records scaled, with other streams' photons added or
 * subtracted frame by frame and panel by panel (nanoBragg's float_add and
 * float_func on nb streams), before the noise. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_cli.h"
#include "nb_image.h"
#include "nb_image_record.h"
#include "nb_math.h"
#include "nb_options.h"
#include "nb_plan.h"
#include "nb_stream.h"
#include "nb_util.h"

#define MAX_OPERANDS 64

typedef struct math_opts {
    double scale;
    const char *scale_text; /* as given, for MATH */
    int have_scale;
    int nops;
    math_operand ops[MAX_OPERANDS];
} math_opts;

/* --add STREAM, --sub STREAM, --add-scaled F STREAM: one more operand */
static nb_status add_operand(const nb_opt_args *a)
{
    math_opts *o = a->dest;
    if (o->nops == MAX_OPERANDS)
        return nb_error_set(NB_ERR_USAGE, "option %s: at most %d operands", a->name, MAX_OPERANDS);
    math_operand *op = &o->ops[o->nops];
    memset(op, 0, sizeof *op);
    op->flag = a->opt->name;
    op->weight = strcmp(op->flag, "--sub") ? 1.0 : -1.0;
    if (a->nvals == 2) {
        char what[64];
        snprintf(what, sizeof what, "option %s", a->name);
        nb_status st = nb_parse_double(a->vals[0], &op->weight, what);
        if (st) return st;
        op->factor = a->vals[0];
    }
    op->path = a->vals[a->nvals - 1];
    if (!op->path[0]) return nb_error_set(NB_ERR_USAGE, "option %s: the stream's name is empty", a->name);
    o->nops++;
    return NB_OK;
}

static nb_status take_scale(const nb_opt_args *a)
{
    math_opts *o = a->dest;
    nb_status st = nb_opt_number(a->opt, a->name, a->vals[0], &o->scale);
    if (st) return st;
    o->scale_text = a->vals[0], o->have_scale = 1;
    return NB_OK;
}

static const nb_opt rows[] = {
    {NB_OPT_LOCAL, "--add", 1, "STREAM",
     "add the photons of STREAM's images (repeatable): a background, another\n"
     "shard's part of the render",
     .needs = "a stream file", .type = NB_OPT_CALLBACK, .fn = add_operand},
    {NB_OPT_LOCAL, "--sub", 1, "STREAM", "subtract the photons of STREAM's images (repeatable)",
     .needs = "a stream file", .type = NB_OPT_CALLBACK, .fn = add_operand},
    {NB_OPT_LOCAL, "--add-scaled", 2, "F STREAM",
     "add F times the photons of STREAM's images (repeatable; F may be\n"
     "negative)",
     .needs = "a factor and a stream file", .type = NB_OPT_CALLBACK, .fn = add_operand},
    {NB_OPT_LOCAL, "--scale", 1, "S",
     "multiply the main stream's photons by S (default 1) before the\n"
     "operands are added",
     .needs = "a number", .type = NB_OPT_CALLBACK, .fn = take_scale},
};
static const nb_opt_table table = {NB_MATH, rows, (int)(sizeof rows / sizeof rows[0])};

static const nb_tool_info tool = {
    "nb-math",
    NB_MATH,
    "[OPTIONS] [STREAM]",
    "add, subtract and scale the photons of rendered images, frame by frame",
    "nb-math reads the main nb stream (STREAM, or standard input) and writes it again with the\n"
    "photons of every IMAGE record replaced by S times its own (--scale) plus, for every\n"
    "operand in the order given, F times the operand's (--add: F = 1, --sub: F = -1,\n"
    "--add-scaled F), in float32, pixel by pixel, every panel of the detector.  The nanoBragg\n"
    "family's float_add and float_func, on streams: a Bragg render plus backgrounds rendered on\n"
    "their own (-water, -stol, air), the parts of one render made by several jobs, a\n"
    "difference of two renders.  An operand's images are matched to the main stream's by frame\n"
    "number; an operand of one frame (its plan's NFRAMES 1: a background rendered once) serves\n"
    "every frame of a series.  The operands must be images of the main stream's detector: the\n"
    "same panels, pixel counts and geometry in their plans (every field of a panel but its\n"
    "ROI); anything else is refused, naming what differs.  The arithmetic is on photons,\n"
    "before nb-noise: an image holding counts is refused.  Derivatives (nb-sim --grad) are\n"
    "carried through: each is scaled and added as its image is, and an operand must then hold\n"
    "the same derivatives.  The PLAN and every other record of the main stream pass through;\n"
    "an IMAGE record keeps its keys and gains MATH, the operations and the operands' names;\n"
    "its statistics (MAX_I, MEAN, RMS, RMSD), which were its old pixels', are dropped.",
    &table,
    "  nb-sim plan.nbs | nb-math --add water.nbs | nb-noise -seed 1 | nb-convert -o img.cbf\n"
    "  nb-math --add part2.nbs --add part3.nbs part1.nbs > whole.nbs\n"
    "  nb-math --scale 2 --add-scaled -0.5 air.nbs bragg.nbs | nb-convert -o x.bin\n",
    NULL,
    NULL, /* no exit status of its own */
};

/* The operations as MATH records them: the options, quoted as a command
 * line (--scale first, then the operands in order). */
static char *math_text(const math_opts *o)
{
    char *argv[2 + 3 * MAX_OPERANDS];
    int n = 0;
    if (o->have_scale) argv[n++] = "--scale", argv[n++] = (char *)o->scale_text;
    for (int i = 0; i < o->nops; i++) {
        argv[n++] = (char *)o->ops[i].flag;
        if (o->ops[i].factor) argv[n++] = (char *)o->ops[i].factor;
        argv[n++] = (char *)o->ops[i].path;
    }
    return nb_join_args(n, argv);
}

/* MATH: the image's earlier operations, if any, then these. */
static nb_status set_math(nb_image_info *im, const char *ops)
{
    char joined[sizeof im->math];
    int len = snprintf(joined, sizeof joined, "%s%s%s", im->math, im->math[0] ? "; " : "", ops);
    if (len < 0 || (size_t)len >= sizeof joined)
        return nb_error_set(NB_ERR_DATA, "IMAGE record: MATH would be longer than %zu characters",
                            sizeof joined - 1);
    memcpy(im->math, joined, (size_t)len + 1);
    return NB_OK;
}

/* dst += F times the operand's image for the main stream's image im (of
 * its plan): the same frame, or the one frame of a one-frame operand. */
static nb_status add_operand_pixels(math_operand *op, const nb_image_info *im, const nb_plan *plan, float *dst)
{
    const math_image *m;
    const nb_plan *p;
    const float *px;
    nb_status st = math_operand_find(op, im->frame, im->grad_of, &m, &p);
    if (!st) st = math_same_detector(op->path, &m->im, p, im, plan);
    if (!st) st = nb_image_pixels(&m->rec, &m->im, &px, NULL);
    if (st) return st;
    nb_info("frame %ld%s%s: %s %s%s", im->frame + 1, im->grad_of[0] ? ", derivative by " : "", im->grad_of, op->flag,
            op->path, op->one_frame ? " (its one frame)" : "");
    const size_t n = im->npixels;
    if (op->weight == 1.0) {
        for (size_t i = 0; i < n; i++) dst[i] += px[i];
    } else if (op->weight == -1.0) {
        for (size_t i = 0; i < n; i++) dst[i] -= px[i];
    } else {
        const float w = (float)op->weight;
        for (size_t i = 0; i < n; i++) dst[i] += w * px[i];
    }
    math_operand_release(op, m);
    return NB_OK;
}

/* The IMAGE record `in` (im: its keys, which this changes) again, its pixels
 * the result, into *out. */
static nb_status transform_image(math_opts *o, const char *ops, const nb_plan *plan, const char *input,
                            const nb_record *in, nb_image_info *im, nb_record *out)
{
    const float *px;
    float *dst;
    nb_status st;
    if (im->has_counts)
        return nb_error_set(NB_ERR_DATA,
                            "%s: frame %ld holds detector counts (nb-noise has run): nb-math adds photons, before "
                            "the noise; put it before nb-noise",
                            input, im->frame + 1);
    if ((st = nb_image_check_plan(im, plan)) || (st = nb_image_pixels(in, im, &px, NULL)) ||
        (st = set_math(im, ops)))
        return st;
    /* the statistics described the pixels replaced (nb-convert computes
     * what it needs of them from the pixels when they are absent) */
    im->has.max_I = im->has.max_I_x = im->has.max_I_y = 0;
    im->has.mean = im->has.rms = im->has.rmsd = 0;
    nb_image_record_init(out);
    if ((st = nb_image_put_header(im, out, NB_IMAGE_ALL_KEYS)) ||
        (st = nb_image_add_pixels(out, im->npixels, NB_ARRAY_UNINITIALISED, &dst)))
        return st;
    const float s = (float)o->scale;
    for (size_t i = 0; i < im->npixels; i++) dst[i] = o->scale == 1.0 ? px[i] : s * px[i];
    for (int k = 0; k < o->nops && !st; k++) st = add_operand_pixels(&o->ops[k], im, plan, dst);
    if (st) return st;
    size_t bad = nb_first_nonfinite(dst, im->npixels);
    if (bad < im->npixels)
        return nb_error_set(NB_ERR_DATA, "frame %ld%s%s: pixel %zu is %g after the arithmetic", im->frame + 1,
                            im->grad_of[0] ? ", derivative by " : "", im->grad_of, bad, dst[bad]);
    return NB_OK;
}

/* The main stream, record by record, into the writer; *images counts its
 * IMAGE records. */
static nb_status run(math_opts *o, const char *ops, nb_reader *r, nb_writer *w, long *images)
{
    nb_record rec;
    nb_plan plan;
    int have_plan = 0, eof = 0;
    nb_status st = NB_OK;
    memset(&rec, 0, sizeof rec);
    while (!st) {
        if ((st = nb_reader_next(r, &rec, &eof)) || eof) break;
        if (nb_record_is(&rec, "END")) {
            st = nb_writer_end(w);
            continue;
        }
        if (nb_record_is(&rec, "PLAN")) {
            if (have_plan) nb_plan_free(&plan);
            have_plan = 0;
            if ((st = nb_plan_from_record(&rec, &plan))) break;
            have_plan = 1;
        }
        if (!nb_record_is(&rec, "IMAGE")) {
            st = nb_writer_put(w, &rec);
            continue;
        }
        nb_image_info im;
        nb_record out;
        memset(&out, 0, sizeof out);
        if ((st = nb_image_from_record(&rec, &im))) break;
        (*images)++;
        st = transform_image(o, ops, have_plan ? &plan : NULL, nb_reader_name(r), &rec, &im, &out);
        if (!st) st = nb_writer_put(w, &out);
        nb_record_free(&out);
        nb_image_info_free(&im);
    }
    if (have_plan) nb_plan_free(&plan);
    nb_record_free(&rec);
    return st;
}

/* What the command line asks is possible: something to do, and standard
 * input one stream at most. */
static nb_status check_opts(const math_opts *o, const nb_std_opts *std)
{
    if (!o->nops && !o->have_scale)
        return nb_error_set(NB_ERR_USAGE, "nothing to do: name an operand (--add, --sub, --add-scaled) or --scale");
    for (int i = 0; i < o->nops; i++)
        if (!strcmp(o->ops[i].path, "-") && !strcmp(std->input, "-"))
            return nb_error_set(NB_ERR_USAGE,
                                "%s -: standard input is the main stream's (name the main stream as a file)",
                                o->ops[i].flag);
    return NB_OK;
}

int main(int argc, char **argv)
{
    nb_std_opts opts;
    static math_opts o; /* its operands are large: not on the stack */
    o.scale = 1.0;
    nb_set_tool_name(tool.name);
    nb_std_opts_init(&opts);
    /* its stream goes to standard output unless -o says otherwise: a failure
     * from here on leaves an ABORT record on the pipe to the next stage */
    nb_stream_to_stdout(1);
    nb_exit_on_error(nb_tool_parse(&tool, &opts, &o, argc, argv));
    nb_exit_on_error(nb_std_apply(&opts));
    nb_exit_on_error(check_opts(&o, &opts));
    nb_stream_to_stdout(!strcmp(opts.output, "-"));

    nb_reader *r = NULL;
    nb_writer *w = NULL;
    long images = 0;
    char *ops = math_text(&o);
    nb_status st = nb_reader_open(&r, opts.input);
    for (int i = 0; i < o.nops && !st; i++) st = math_operand_open(&o.ops[i]);
    if (!st) st = nb_writer_open(&w, opts.output);
    if (!st) st = run(&o, ops, r, w, &images);
    if (!st && images == 0) st = nb_image_none(nb_reader_name(r));
    for (int i = 0; i < o.nops; i++) math_operand_close(&o.ops[i]);
    nb_reader_close(r);
    free(ops);
    if (!st) st = nb_writer_close(w);
    else if (w) nb_writer_abort(w);
    nb_exit_on_error(st);
    return 0;
}
