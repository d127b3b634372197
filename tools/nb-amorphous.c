/* nb-amorphous: the scatter of an amorphous sample (water, ice, air, oil:
 * F of one molecule against sin(theta)/lambda from a table) on the plan's
 * detector, as nanoBragg's companion nonBragg computes it, into an IMAGE
 * record of photons per pixel: one frame, the background of every frame. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_amorphous.h"
#include "nb_amorphous_render.h"
#include "nb_cli.h"
#include "nb_image.h"
#include "nb_image_record.h"
#include "nb_options.h"
#include "nb_plan.h"
#include "nb_stream.h"
#include "nb_util.h"
#include "stol.h"

typedef struct am_opts {
    const char *table;
    int axis; /* nb_stol_axis */
    nb_amorphous_sample sample;
    int absolute_weights, fmap;
} am_opts;

static double milli(double x) { return x / 1000; }        /* mm to m, as nonBragg divides */
static double per_cm3(double x) { return x * 1e6; }       /* g/cm^3 to g/m^3, as nonBragg multiplies */

static const nb_opt_choice axes[] = {
    {"stol", NB_STOL_AXIS_STOL}, {"4stol", NB_STOL_AXIS_4STOL}, {"q", NB_STOL_AXIS_Q}, {NULL, 0}};

#define AO(f) NB_AT(am_opts, f)
static const nb_opt rows[] = {
    {NB_OPT_LOCAL, "--table", 1, "FILE",
     "F of one molecule against sin(theta)/lambda: two columns of text\n"
     "(nonBragg's .stol file; '#' lines are comments).  Required",
     .needs = "a file name", .type = NB_OPT_STRING, .at = {AO(table)}},
    {NB_OPT_LOCAL, "--table-x", 1, "stol|4stol|q",
     "what the table's first column is, in 1/Angstrom: sin(theta)/lambda\n"
     "(default; nonBragg's -stol), 4 sin(theta)/lambda (-4stol) or\n"
     "Q = 4 pi sin(theta)/lambda (-Q)",
     .type = NB_OPT_CHOICE, .at = {AO(axis)}, .choices = axes, .expected = "stol, 4stol or q"},
    {NB_OPT_LOCAL, "--thickness", 1, "MM",
     "the sample's thickness along the beam (default 0.1)",
     .type = NB_OPT_DOUBLE, .at = {AO(sample.thick)}, .check = NB_CHECK_POSITIVE, .convert = milli},
    {NB_OPT_LOCAL, "--width", 1, "MM",
     "its width across the beam (default 0.1; clipped to the plan's\n"
     "beam size)",
     .type = NB_OPT_DOUBLE, .at = {AO(sample.width)}, .check = NB_CHECK_POSITIVE, .convert = milli},
    {NB_OPT_LOCAL, "--height", 1, "MM", "its height across the beam (default 0.1; clipped to the beam size)",
     .type = NB_OPT_DOUBLE, .at = {AO(sample.height)}, .check = NB_CHECK_POSITIVE, .convert = milli},
    {NB_OPT_LOCAL, "--size", 1, "MM", "thickness, width and height at once: a cube",
     .type = NB_OPT_DOUBLE, .at = {AO(sample.thick), AO(sample.width), AO(sample.height)},
     .check = NB_CHECK_POSITIVE, .convert = milli},
    {NB_OPT_LOCAL, "--density", 1, "G/CM3", "the sample's density (default 1)",
     .type = NB_OPT_DOUBLE, .at = {AO(sample.density)}, .check = NB_CHECK_NONNEG, .convert = per_cm3},
    {NB_OPT_LOCAL, "--mw", 1, "G/MOL", "the molecular weight of the table's molecule (default 18)",
     .type = NB_OPT_DOUBLE, .at = {AO(sample.molecular_weight)}, .check = NB_CHECK_POSITIVE},
    {NB_OPT_LOCAL, "--molecules", 1, "N",
     "the molecules in the sample, instead of the density (0: from the\n"
     "density)",
     .type = NB_OPT_DOUBLE, .at = {AO(sample.molecules)}, .check = NB_CHECK_NONNEG},
    {NB_OPT_LOCAL, "--absolute-weights", 0, "",
     "each source's term times its weight as the plan gives it, as\n"
     "nonBragg does (pipelines/nonbragg); default: times its share of the\n"
     "fluence (weight / mean weight)",
     .type = NB_OPT_SET, .sets = {{AO(absolute_weights), 1}}},
    {NB_OPT_LOCAL, "--fmap", 0, "",
     "each pixel is F of its last evaluation, not photons (nonBragg's\n"
     "-Fmap; UNITS=F)",
     .type = NB_OPT_SET, .sets = {{AO(fmap), 1}}},
};
#undef AO
static const nb_opt_table table = {NB_AMORPHOUS, rows, (int)(sizeof rows / sizeof rows[0])};

static const nb_tool_info tool = {
    "nb-amorphous",
    NB_AMORPHOUS,
    "[OPTIONS] --table FILE [STREAM]",
    "render the scatter of an amorphous sample (nonBragg's model) into an image",
    "nb-amorphous reads an nb stream (the PLAN of nb-geom) and writes it through, adding after\n"
    "each plan one IMAGE record of float32 photons per pixel: the scatter of an amorphous\n"
    "sample (a liquid, a glass, a gas) as nanoBragg's companion program nonBragg computes it.\n"
    "The sample is a box (--thickness along the beam, --width and --height across it, clipped\n"
    "to the plan's -beamsize) of --density and molecular weight --mw; F of one of its\n"
    "molecules against sin(theta)/lambda comes from --table and is interpolated through four\n"
    "points.  Each pixel sums, over sensor layers, sub-pixels and sources, F^2 times that\n"
    "evaluation's polarization, solid angle, capture fraction and source weight, times\n"
    "r_e^2 x fluence x molecules / (sources x oversample^2) (docs/physics.md 17).  Everything\n"
    "else is the plan's: panels, pixels, oversampling, polarization, sensor absorption,\n"
    "sources (divergence, dispersion, -sourcefile) and fluence; nothing of the crystal (cell,\n"
    "mosaic, phi, -dmin, -water) enters.  The image is the background of every frame: FRAME 0\n"
    "of NFRAMES 1, which nb-math adds to each frame of a series; stills whose fluence or\n"
    "spectrum change from shot to shot are refused.  Double precision on the CPU's threads.\n"
    "nanoBragg's -stol, -density and -MW (nb-geom's, without effect there) are not these:\n"
    "pipelines/nonbragg maps nonBragg's flags onto these options.  Tables for water, vitreous\n"
    "ice, air and a cryo-oil are installed in share/nb/amorphous (examples/amorphous in the\n"
    "source tree).",
    &table,
    "  nb-geom -cell 78 78 37 90 90 90 -lambda 1 -N 10 -detpixels 512 -default_F 100 -o plan.nbs\n"
    "  nb-amorphous --table water.stol --thickness 0.05 plan.nbs > water.nbs\n"
    "  nb-sim plan.nbs | nb-math --add water.nbs | nb-noise -seed 1 | nb-convert -o img.cbf\n"
    "  nb-geom --nonbragg -lambda 1.3 -detsize 60 | nb-amorphous --table air.stol --thickness 150 \\\n"
    "      --density 0.0012 --mw 29 | nb-convert -o air.bin\n",
    NULL,
    NULL, /* no exit status of its own */
};

/* One panel's statistics, added to the detector's: the rows of every panel
 * in panel order, the largest pixel the first panel's that holds it. */
typedef struct am_stats {
    nb_row_stats *rows;
    int nrows;
    int max_panel;
    double max_I;
} am_stats;

/* The IMAGE keys of the image: the frame, the statistics, the sample. */
static nb_status image_keys(const nb_plan *plan, const am_opts *o, const nb_amorphous_sample *smp,
                            const am_stats *sum, double omega, double seconds, nb_image_info *im)
{
    nb_stats st;
    nb_status s;
    im->frame = 0, im->has.frame = 1;
    im->nframes = 1, im->has.nframes = 1; /* one image: every frame's background */
    im->panel = 0, im->has.panel = 1;
    im->fpixels = plan->panels[0].fpixels, im->spixels = plan->panels[0].spixels;
    if ((s = nb_image_set_panels(im, plan))) return s;
    snprintf(im->units, sizeof im->units, "%s", o->fmap ? "F" : "photons");
    snprintf(im->precision, sizeof im->precision, "double");
    snprintf(im->rendered_by, sizeof im->rendered_by, "nb-amorphous %s", NB_VERSION);
    snprintf(im->render_path, sizeof im->render_path, "amorphous");
    im->render_seconds = seconds, im->has.render_seconds = 1;
    nb_stats_from_rows(sum->rows, sum->nrows, &st);
    im->max_I = st.max_I, im->has.max_I = 1;
    if (st.max_index >= 0) {
        /* the reference's position: the pixel's last sub-pixel, on its panel */
        nb_plan v;
        nb_plan_panel_view(plan, sum->max_panel, &v);
        const int os = plan->oversample, fp = v.panels[0].fpixels;
        const double sub = v.panels[0].pixel_size / os;
        long f = st.max_index % fp, sl = st.max_index / fp;
        im->max_I_x = sub * (f * os + os - 1) + sub / 2.0, im->has.max_I_x = 1;
        im->max_I_y = sub * (sl * os + os - 1) + sub / 2.0, im->has.max_I_y = 1;
    }
    im->mean = st.mean, im->rms = st.rms, im->rmsd = st.rmsd;
    im->has.mean = im->has.rms = im->has.rmsd = 1;
    im->solid_angle = omega, im->has.solid_angle = 1;
    if (strchr(o->table, '\n')) return nb_error_set(NB_ERR_USAGE, "the table's name holds a newline");
    nb_strbuf extra;
    nb_strbuf_init(&extra);
    nb_strbuf_printf(&extra, "AMORPHOUS_TABLE=%s\n", o->table);
    nb_strbuf_printf(&extra, "AMORPHOUS_SAMPLE=%.17g %.17g %.17g\n", smp->thick, smp->width, smp->height);
    nb_strbuf_printf(&extra, "AMORPHOUS_MOLECULES=%.17g\n", smp->molecules);
    im->extra = nb_strbuf_take(&extra);
    return NB_OK;
}

/* A plan whose frames differ in what the amorphous sample sees: stills
 * with a fluence or a spectrum of their own per shot, frame crystals of
 * another wavelength or fluence. */
static nb_status check_one_background(const nb_plan *plan)
{
    if (plan->stills.on && plan->nframes > 1 && (plan->stills.spikes > 0 || plan->stills.fluence_max > 0))
        return nb_error_set(NB_ERR_USAGE, "the plan's stills change their %s from shot to shot: nb-amorphous renders "
                                          "one background for every frame",
                            plan->stills.spikes > 0 ? "spectrum" : "fluence");
    for (long f = 1; plan->frame_crystals && f < plan->nframes; f++) {
        const nb_frame_crystal *a = &plan->frame_crystals[0], *b = &plan->frame_crystals[f];
        if (a->lambda != b->lambda || a->fluence != b->fluence)
            return nb_error_set(NB_ERR_USAGE, "the plan's frame crystals change their %s from frame to frame: "
                                              "nb-amorphous renders one background for every frame",
                                a->lambda != b->lambda ? "wavelength" : "fluence");
    }
    return NB_OK;
}

/* The plan's image: every panel rendered, then its keys. */
static nb_status render_plan(const nb_plan *plan, const am_opts *o, const nb_amorphous_curve *curve, nb_record *out)
{
    nb_amorphous_sample smp = o->sample;
    am_stats sum = {NULL, 0, 0, 0.0};
    float *img;
    nb_status st = check_one_background(plan);
    if (!st) st = nb_amorphous_sample_resolve(&smp, plan->beamsize);
    if (st) return st;
    nb_info("  sample is %g m thick x %g m high x %g m wide, %g g/cm^3 and %g g/mol (%g molecules)", smp.thick,
            smp.width, smp.height, smp.density / 1e6, smp.molecular_weight, smp.molecules);
    const int np = nb_plan_npanels(plan);
    for (int i = 0; i < np; i++) sum.nrows += plan->panels[i].spixels;
    nb_image_record_init(out);
    if ((st = nb_image_add_pixels(out, nb_plan_total_pixels(plan), NB_ARRAY_UNINITIALISED, &img)) ||
        (st = nb_calloc((void **)&sum.rows, (size_t)sum.nrows, sizeof *sum.rows, "row statistics")))
        return st;
    int walk = 0; /* the reference's, from its first pixel */
    const nb_amorphous_job job = {curve, smp.molecules, o->absolute_weights, o->fmap, &walk};
    double omega = 0.0, seconds = 0.0;
    int row0 = 0;
    for (int i = 0; i < np && !st; i++) {
        nb_plan v;
        size_t off;
        nb_amorphous_result res;
        nb_plan_panel_view(plan, i, &v);
        nb_plan_panel_dims(plan, i, NULL, NULL, &off);
        const nb_panel *q = &v.panels[0];
        if ((st = nb_render_amorphous(&v, &job, img + off, &res))) break;
        /* the detector's solid angle: each sub-pixel's is the whole pixel's */
        omega += res.omega_sum / ((double)plan->oversample * plan->oversample);
        seconds += res.seconds;
        const nb_roi roi = {q->roi_xmin, q->roi_xmax, q->roi_ymin, q->roi_ymax};
        for (int y = 0; y < q->spixels; y++) {
            nb_row_stats *r = &sum.rows[row0 + y];
            nb_row_stats_compute(img + off + (size_t)y * q->fpixels, q->fpixels, y, roi,
                                 q->mask ? q->mask + (size_t)y * q->fpixels : NULL, r);
            if (r->max > sum.max_I) sum.max_I = r->max, sum.max_panel = i;
        }
        row0 += q->spixels;
        nb_info("panel %d: %d x %d pixels in %.3f s (%g steps per pixel)", i, q->fpixels, q->spixels, res.seconds,
                res.steps);
    }
    /* layers: each layer's sub-pixels add a solid angle of their own */
    omega /= plan->panels[0].thicksteps > 0 ? plan->panels[0].thicksteps : 1;
    nb_image_info im;
    nb_image_info_init(&im);
    if (!st) st = image_keys(plan, o, &smp, &sum, omega, seconds, &im);
    if (!st) st = nb_image_put_header(&im, out, NB_IMAGE_ALL_KEYS);
    if (!st && nb_verbosity() >= 0) {
        fprintf(stderr, "solid angle subtended by detector = %g steradian ( %g%% sphere)\n", im.solid_angle,
                100 * im.solid_angle / 4 / M_PI);
        fprintf(stderr, "max_I = %g  at %g %g\n", im.max_I, im.max_I_x, im.max_I_y);
        fprintf(stderr, "mean= %g rms= %g rmsd= %g\n", im.mean, im.rms, im.rmsd);
    }
    nb_image_info_free(&im);
    free(sum.rows);
    return st;
}

/* The table, read when the first plan comes (a stage before that failed
 * speaks alone: its ABORT record comes first). */
static nb_status load_table(const am_opts *o, nb_amorphous_curve *curve)
{
    nb_stol_table t;
    nb_status st = nb_stol_read(o->table, &t);
    if (st) return st;
    st = nb_amorphous_curve_build(&t, (nb_stol_axis)o->axis, o->table, curve);
    nb_stol_table_free(&t);
    if (!st)
        nb_info("reading %s: %d initialized F points (will cubic-spline interpolate between them)", o->table,
                curve->n);
    return st;
}

/* The stream, record by record: after each PLAN its image; IMAGE records
 * already there are dropped.  *plans counts the plans. */
static nb_status run(const am_opts *o, nb_amorphous_curve *curve, nb_reader *r, nb_writer *w, long *plans)
{
    nb_record rec;
    int eof = 0, dropped = 0;
    nb_status st = NB_OK;
    memset(&rec, 0, sizeof rec);
    while (!st) {
        if ((st = nb_reader_next(r, &rec, &eof)) || eof) break;
        if (nb_record_is(&rec, "END")) {
            st = nb_writer_end(w);
            continue;
        }
        if (nb_record_is(&rec, "IMAGE")) {
            if (!dropped++) nb_warn("dropping the IMAGE records already in the stream: the amorphous image replaces them");
            continue;
        }
        if ((st = nb_writer_put(w, &rec)) || !nb_record_is(&rec, "PLAN")) continue;
        nb_plan plan;
        nb_record out;
        memset(&out, 0, sizeof out);
        if (!curve->n && (st = load_table(o, curve))) break;
        if ((st = nb_plan_from_record(&rec, &plan))) break;
        (*plans)++;
        st = render_plan(&plan, o, curve, &out);
        if (!st) st = nb_writer_put(w, &out);
        nb_record_free(&out);
        nb_plan_free(&plan);
    }
    nb_record_free(&rec);
    return st;
}

/* nonBragg's spellings of the sample's flags, which nanoBragg's nb-geom owns
 * (-stol, -density, -MW: without effect there) or no tool has: the option
 * that says it here.  Values of this tool's own options are skipped. */
static nb_status refuse_nonbragg_spelling(int argc, char **argv)
{
    static const char *map[][2] = {
        {"-stol", "--table FILE"}, {"-4stol", "--table FILE --table-x 4stol"}, {"-Q", "--table FILE --table-x q"},
        {"-thickness", "--thickness"}, {"-thick", "--thickness"}, {"-sample_thick", "--thickness"},
        {"-samplesize", "--size"}, {"-sample_size", "--size"}, {"-density", "--density"},
        {"-sample_density", "--density"}, {"-MW", "--mw"}, {"-molecular_weight", "--mw"},
        {"-molecules", "--molecules"}, {"-Fmap", "--fmap"}};
    for (int i = 1; i < argc; i++) {
        int skip = 0;
        for (int r = 0; r < table.nrows; r++)
            if (!strcmp(argv[i], table.rows[r].name)) skip = table.rows[r].nargs;
        if (!strcmp(argv[i], "-o") || !strcmp(argv[i], "--threads")) skip = 1;
        if (skip) {
            i += skip;
            continue;
        }
        for (size_t k = 0; k < sizeof map / sizeof map[0]; k++)
            if (!strcmp(argv[i], map[k][0]))
                return nb_error_set(NB_ERR_USAGE, "%s is nonBragg's spelling: here it is %s (pipelines/nonbragg takes "
                                                  "nonBragg's command line)",
                                    argv[i], map[k][1]);
    }
    return NB_OK;
}

int main(int argc, char **argv)
{
    nb_std_opts opts;
    am_opts o;
    memset(&o, 0, sizeof o);
    nb_amorphous_sample_defaults(&o.sample);
    nb_set_tool_name(tool.name);
    nb_std_opts_init(&opts);
    /* its stream goes to standard output unless -o says otherwise: a failure
     * from here on leaves an ABORT record on the pipe to the next stage */
    nb_stream_to_stdout(1);
    nb_exit_on_error(refuse_nonbragg_spelling(argc, argv));
    nb_exit_on_error(nb_tool_parse(&tool, &opts, &o, argc, argv));
    nb_exit_on_error(nb_std_apply(&opts));
    if (!o.table) nb_exit_on_error(nb_error_set(NB_ERR_USAGE, "no table: give --table FILE (F against sin(theta)/lambda)"));
    nb_stream_to_stdout(!strcmp(opts.output, "-"));

    nb_amorphous_curve curve;
    memset(&curve, 0, sizeof curve);
    nb_status st = NB_OK;
    nb_reader *r = NULL;
    nb_writer *w = NULL;
    long plans = 0;
    if (!st) st = nb_reader_open(&r, opts.input);
    if (!st) st = nb_writer_open(&w, opts.output);
    if (!st) st = run(&o, &curve, r, w, &plans);
    if (!st && plans == 0)
        st = nb_error_set(NB_ERR_DATA, "%s: the stream holds no PLAN record (run nb-geom first)", nb_reader_name(r));
    nb_reader_close(r);
    nb_amorphous_curve_free(&curve);
    if (!st) st = nb_writer_close(w);
    else if (w) nb_writer_abort(w);
    nb_exit_on_error(st);
    return 0;
}
