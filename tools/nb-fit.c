/* nb-fit: refine a plan's parameters against observed images, by maximum
 * likelihood on the derivatives of nb-sim --grad (Levenberg-Marquardt):
 * the command line, the files (nb_fit_files.c) and the processes under
 * mpirun (nb_par.h) around libnb's fit (fit/: one set of parameters shared
 * by every frame, nb_fit_plan.h; or a dataset's per-frame and shared
 * parameters and structure factors, nb_fit_dataset.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_cli.h"
#include "nb_fit.h"
#include "mtz.h"
#include "nb_fit_plan.h"
#include "nb_par.h"
#include "nb_hkl.h"
#include "nb_options.h"
#include "registry.h"
#include "nb_plan.h"
#include "nb_engine.h"
#include "nb_sim_cuda.h"
#include "nb_stream.h"
#include "nb_util.h"
#include "rawfloat.h"

static const nb_opt_table table;

static const nb_tool_info tool = {
    "nb-fit",
    NB_FIT,
    "[OPTIONS] --observed FILE... [--refine LIST] [--refine-frame LIST] [--refine-F] [STREAM]",
    "refine a plan's parameters against observed images",
    "nb-fit reads a PLAN record (and the HKL record of nb-hkl) as the start model and one\n"
    "observed image per frame of the plan (--observed: CBF, SMV, TIFF, an nb stream's IMAGE\n"
    "record, or raw float photons with the plan's size; read as nb-convert --import reads them,\n"
    "write-only formats such as PNG and PGM refused by name; one NXmx file, nb's or an Eiger's\n"
    "master, gives every frame, its frame count the plan's, its modules the plan's panels), and\n"
    "refines the parameters of --refine (the\n"
    "names of nb-sim --grad, and 'scale', an overall factor on the fluence) by maximum\n"
    "likelihood: Poisson photon counts (the image's counts less its ADC offset, over its gain),\n"
    "from where least squares leave it, or least squares alone (--loss lsq), with\n"
    "Levenberg-Marquardt steps on the derivative images (at least one of --refine,\n"
    "--refine-frame and --refine-F).\n"
    "Pixels outside the ROI, masked or overloaded in the observed image are left out.  The\n"
    "refined plan goes to standard output (nb-fit ... | nb-sim renders the fit), the refined\n"
    "values to standard error as 'NAME = VALUE +- SIGMA UNIT' (sigma from the inverse Fisher\n"
    "information), with -v the likelihood of every iteration.  The model is rendered on the\n"
    "double path (nb-sim -precision double --grad), or with -precision single on the fast\n"
    "path (nb-sim -precision single --grad: tens of times faster, the fast path's model).\n"
    "\n"
    "A dataset fit (--refine-frame, --refine-F, or a plan of per-frame crystals such as\n"
    "nb-geom -expt makes from a DIALS experiment list) refines each frame's own parameters\n"
    "(--refine-frame: rot_x/y/z turn the frame's crystal about the lab axes, cell_*, Na/Nb/Nc,\n"
    "lambda, mosaic, scale) with the shared ones of --refine (distance, Xbeam, Ybeam, cell_* ...)\n"
    "and, with --refine-F, the structure factors of the asymmetric unit, on the fast path, over\n"
    "regions around the spots with a background plane each.  A global stage searches the\n"
    "crystals' turns (and cells) and the detector's distance and beam centre on the observed\n"
    "spots first, moving a frame only where it finds clearly better than the start (a frame\n"
    "moved whose fit fails is fitted again from its start); with --refine-F the frames' values\n"
    "and F are refined jointly, and every sigma is marginal over the rest.  Each frame gets a\n"
    "verdict (its deviance against its expectation, the predicted spots the image shows, the\n"
    "strong spots the model predicts): a frame that fails keeps its start, marked in the\n"
    "refined plan, is named on standard error ('nb-fit: frame N failed: WHY'), is left out of\n"
    "the shared values and F, and nb-fit exits 3 after writing the whole stream.  nb-fit ... |\n"
    "nb-convert -o fit.expt writes the refined experiments; -v adds each stage's steps and\n"
    "'time:' lines, where a dataset fit's time went.  Under mpirun -n K the frames are split\n"
    "over the processes (docs/physics.md 15.1; 15.2: the correspondence with diffBragg).",
    &table,
    "  nb-geom $START | nb-hkl | nb-fit --observed still.cbf --refine distance,Xbeam,Ybeam > fit.nbs\n"
    "  nb-fit --observed frame.img --refine rot_x,rot_y,rot_z,cell_a,scale -o fit.nbs start.nbs\n"
    "  nb-geom -expt indexed.expt -N 20 -fluence 1e27 | nb-hkl -hkl F.hkl | nb-fit --observed s_001.cbf \\\n"
    "      --observed s_002.cbf --refine cell_a,cell_b,cell_c --refine-frame rot_x,rot_y,rot_z,scale \\\n"
    "      | nb-convert -o fit.expt\n"
    "  nb-geom -expt indexed.expt -N 20 | nb-hkl -hkl F.hkl | nb-fit --observed master.h5 --spots strong.refl \\\n"
    "      --refine-frame rot_x,rot_y,rot_z,scale | nb-convert -o fit.expt\n"
    "  mpirun -n 8 nb-fit $OBSERVED --refine-F --refine-frame scale --space-group 'P 21 21 21' --F-out F.hkl \\\n"
    "      -o fit.nbs start.nbs\n",
    NULL,
    "3: the fit ran and the stream is whole, but a frame's verdict failed (named on standard error)",
};


/* ---- the fit of one plan (fit/nb_fit_plan.c) ------------------------------------------ */

static void report(const nb_fit_plan_result *res)
{
    if (nb_verbosity() < 0) return;
    for (int j = 0; j < res->k; j++)
        fprintf(stderr, "%s = %.10g \u00b1 %.3g%s%s\n", res->name[j], res->value[j], res->sigma[j],
                res->unit[j][0] ? " " : "", res->unit[j]);
}

/* --residual FILE: raw floats, frame after frame */
static nb_status write_residual(const char *path, float **residual, long nframes, size_t npix)
{
    nb_outfile *of = NULL;
    nb_status st = nb_rawfloat_writer_open(&of, path);
    for (long f = 0; f < nframes && !st; f++) st = nb_rawfloat_writer_put(of, residual[f], npix);
    if (!st) st = nb_outfile_commit(of);
    else if (of) nb_outfile_abort(of);
    return st;
}

/* The engine the fit renders with (--device) */
static nb_engine *engine;

static nb_status fit(const nb_plan *start, const nb_hkl *hkl, const fit_opts *o, nb_plan *out)
{
    if (!o->nobserved) return nb_error_set(NB_ERR_USAGE, "no observed image: give --observed FILE");
    if (!o->ds.refine) return nb_error_set(NB_ERR_USAGE, "nothing to refine: give --refine, --refine-frame or --refine-F");
    if (o->nobserved != start->nframes)
        return nb_error_set(NB_ERR_USAGE, "the plan has %d frame%s but %d observed image%s were given", start->nframes,
                            start->nframes == 1 ? "" : "s", o->nobserved, o->nobserved == 1 ? "" : "s");
    nb_fit_observed *obs = NULL;
    float **residual = NULL;
    nb_fit_plan_result res;
    const size_t npix = nb_plan_total_pixels(start);
    nb_status st = nb_calloc((void **)&obs, (size_t)o->nobserved, sizeof *obs, "the observed images");
    for (int f = 0; f < o->nobserved && !st; f++) st = nb_fit_observed_read(o->observed[f], o, start, f, &obs[f]);
    if (!st && o->residual) st = nb_calloc((void **)&residual, (size_t)o->nobserved, sizeof *residual, "the residual");
    for (int f = 0; residual && f < o->nobserved && !st; f++)
        st = nb_calloc((void **)&residual[f], npix, sizeof **residual, "the residual");
    const nb_fit_plan_settings s = {.loss = o->ds.loss, .iterations = o->ds.iterations,
                                    .path = o->ds.precision ? NB_GRAD_DOUBLE : NB_GRAD_FAST, .residual = residual};
    if (!st) st = nb_fit_plan(engine, start, hkl, o->ds.refine, obs, &s, out, &res);
    if (!st) report(&res);
    if (!st && residual) st = write_residual(o->residual, residual, start->nframes, npix);
    for (int f = 0; obs && f < o->nobserved; f++) nb_fit_observed_free(&obs[f]);
    for (int f = 0; residual && f < o->nobserved; f++) free(residual[f]);
    free(obs), free(residual);
    return st;
}

/* ---- options and main ---------------------------------------------------------------- */

static nb_status add_observed(const nb_opt_args *a)
{
    fit_opts *o = a->dest;
    if (o->nobserved == NB_FIT_MAX_OBSERVED)
        return nb_error_set(NB_ERR_USAGE, "at most %d observed images", NB_FIT_MAX_OBSERVED);
    if (o->nobserved == o->observed_cap) {
        int cap = o->observed_cap ? 2 * o->observed_cap : 64;
        const char **more = realloc(o->observed, (size_t)cap * sizeof *more);
        if (!more) return nb_error_set(NB_ERR_NOMEM, "out of memory for the observed images' names");
        o->observed = more, o->observed_cap = cap;
    }
    o->observed[o->nobserved++] = a->vals[0];
    return NB_OK;
}

/* One --observed with a run of '#': a name per frame fitted (every frame of
 * the plan, or --frames'), the run the frame's number as nb_frame_path makes
 * it (nb-convert -o s_#.cbf's names); one --observed of a file that holds a
 * run's frames (NXmx): that file for each of them, read by frame. */
static nb_status observed_pattern(fit_opts *o, const nb_plan *start)
{
    if (o->nobserved != 1) return NB_OK;
    const nb_format *f = nb_format_of_file(o->observed[0]);
    const int run_file = f && f->run_file && !strchr(o->observed[0], '#');
    if (!run_file && !strchr(o->observed[0], '#')) return NB_OK;
    const char *tmpl = o->observed[0];
    const long first = o->ds.frame_first ? o->ds.frame_first - 1 : 0;
    const long n = o->ds.frame_first ? o->ds.frame_last - o->ds.frame_first + 1 : start->nframes;
    const size_t each = strlen(tmpl) + 24;
    char *names = NULL; /* the pattern's names (a run file's: its one name) */
    const char **list;
    if (n < 1 || n > NB_FIT_MAX_OBSERVED) return nb_error_set(NB_ERR_USAGE, "option --observed: %ld frames", n);
    nb_status st = run_file ? NB_OK : nb_calloc((void **)&names, (size_t)n, each, "the observed images' names");
    if (st) return st;
    if ((st = nb_calloc((void **)&list, (size_t)n, sizeof *list, "the observed images' names"))) {
        free(names);
        return st;
    }
    for (long i = 0; i < n && !st; i++) {
        if (run_file) { /* the one file, read by frame (the reader checks its frame count) */
            list[i] = tmpl;
            continue;
        }
        list[i] = names + (size_t)i * each;
        if (nb_frame_path(tmpl, first + i, names + (size_t)i * each, each))
            st = nb_error_set(NB_ERR_USAGE, "option --observed: '%s' holds '#' in two places (one run of '#' is the "
                                            "frame number)", tmpl);
    }
    if (st) {
        free(names);
        free(list);
        return st;
    }
    free(o->observed);
    o->observed = list, o->nobserved = (int)n, o->observed_cap = (int)n;
    o->observed_names = names;
    return NB_OK;
}

/* --frames A:B, 1-based and inclusive */
static nb_status set_frames(const nb_opt_args *a)
{
    fit_opts *o = a->dest;
    int first, last;
    nb_status st = nb_parse_frames(a->vals[0], &first, &last);
    if (!st) o->ds.frame_first = first, o->ds.frame_last = last;
    return st;
}

static const nb_opt_choice losses[] = {{"poisson", NB_FIT_POISSON}, {"lsq", NB_FIT_LSQ}, {NULL, 0}};
static const nb_opt_choice globals[] = {
    {"auto", NB_FIT_GLOBAL_AUTO}, {"on", NB_FIT_GLOBAL_ON}, {"off", NB_FIT_GLOBAL_OFF}, {NULL, 0}};
static const nb_opt_choice precisions[] = {{"double", 1}, {"single", 0}, {NULL, 0}};
static const nb_opt_choice devices[] = {
    {"cpu", NB_ENGINE_CPU}, {"cuda", NB_ENGINE_CUDA}, {"auto", NB_ENGINE_AUTO}, {NULL, 0}};

#define FO(f) NB_AT(fit_opts, f)
static const nb_opt rows[] = {
    {NB_OPT_LOCAL, "--observed", 1, "FILE",
     "an observed image: CBF, SMV, TIFF (counts, or float photons), an nb\n"
     "stream (.nbs: its IMAGE record) or raw float photons of the plan's\n"
     "size (a detector of panels: .nbs, or raw float of all its panels);\n"
     "once per frame of the plan (of --frames), in frame order; or once, a\n"
     "name with a run of '#', the frame number (from 1, zero-padded to the\n"
     "run's length, as nb-convert -o s_#.cbf names them): s_###.cbf; or once,\n"
     "an NXmx file (nb's .nxs, an Eiger's master.h5): every frame of it",
     .needs = "a file name", .type = NB_OPT_CALLBACK, .fn = add_observed},
    {NB_OPT_LOCAL, "--refine", 1, "LIST",
     "the parameters to refine, comma-separated: the names of nb-sim --grad\n"
     "(distance, Xbeam, Ybeam, misset_x, rot_x, cell_a, Na, lambda, panel0_shift_fast,\n"
     "...) and scale",
     .needs = "a list of names", .type = NB_OPT_STRING, .at = {FO(ds.refine)}},
    {NB_OPT_LOCAL, "--loss", 1, "poisson|lsq",
     "the likelihood: Poisson photon counts (default) or least squares",
     .type = NB_OPT_CHOICE, .at = {FO(ds.loss)}, .choices = losses, .expected = "'poisson' or 'lsq'"},
    {NB_OPT_LOCAL, "--adc", 1, "ADU",
     "the observed counts' ADC offset (default: the image's ADC_OFFSET or\n"
     "COUNTS_ADC; 0 for a CBF, which counts from 0; else the plan's -adc)",
     .type = NB_OPT_DOUBLE, .at = {FO(adc)}, .sets = {{FO(have_adc), 1}}},
    {NB_OPT_LOCAL, "--gain", 1, "ADU/PHOTON", "the observed counts' gain (default: COUNTS_GAIN, else 1)",
     .type = NB_OPT_DOUBLE, .check = NB_CHECK_POSITIVE, .at = {FO(gain)}, .sets = {{FO(have_gain), 1}}},
    {NB_OPT_LOCAL, "--overload", 1, "ADU",
     "counts from this value up are overloads, left out (default: the\n"
     "overload the file states, as a CBF does, else its counter's top)",
     .type = NB_OPT_DOUBLE, .at = {FO(overload)}, .sets = {{FO(have_overload), 1}}},
    {FL_PRECISION, .type = NB_OPT_CHOICE, .at = {FO(ds.precision)}, .choices = precisions,
     .expected = "'single' or 'double'", .sets = {{FO(ds.precision_given), 1}}},
    {NB_OPT_LOCAL, "--device", 1, "cpu|cuda|auto",
     "where the model and its derivatives are rendered (default cpu; auto:\n"
     "CUDA when this build has it and a GPU is present, as nb-sim)",
     .type = NB_OPT_CHOICE, .at = {FO(device)}, .choices = devices, .expected = "cpu, cuda or auto"},
    {NB_OPT_LOCAL, "--iterations", 1, "N", "at most N Levenberg-Marquardt iterations (default 50)",
     .type = NB_OPT_INT, .at = {FO(ds.iterations)}},
    {NB_OPT_LOCAL, "--residual", 1, "FILE",
     "write observed - model photons of the fit (raw float, 0 where a pixel\n"
     "is not used; the frames one after another); not in a dataset fit",
     .needs = "a file name", .type = NB_OPT_STRING, .at = {FO(residual)}},
    {NB_OPT_LOCAL, "--refine-frame", 1, "LIST",
     "a dataset fit: the parameters each frame has its own value of:\n"
     "rot_x, rot_y, rot_z (small turns of the frame's crystal about the\n"
     "lab axes, degrees), cell_a ... cell_gamma, Na, Nb, Nc, lambda,\n"
     "mosaic (the spread, degrees: the plan's domains, -mosaic_domains, their\n"
     "angles scaled), scale.  --refine then names the shared ones: distance,\n"
     "Xbeam, Ybeam (the whole detector moved), panel<i>_shift_fast/slow/normal\n"
     "and panel<i>_rot_fast/slow/normal (each panel's own, mm and degrees; not\n"
     "with distance, Xbeam, Ybeam: the panels' mean turn about the beam is\n"
     "held, docs/physics.md 15.3), cell_*, Na, Nb, Nc, lambda, mosaic, scale",
     .needs = "a list of names", .type = NB_OPT_STRING, .at = {FO(ds.refine_frame)}},
    {NB_OPT_LOCAL, "--refine-F", 0, NULL,
     "a dataset fit: refine the structure factor of every reflection of the\n"
     "asymmetric unit over every frame that passes its verdict; the refined\n"
     "F go into the output's HKL record.  A stream without F (no HKL record,\n"
     "no -default_F) starts flat: every F the square root of the observed\n"
     "photons above each panel's median over the model's with every F = 1",
     .type = NB_OPT_SET, .sets = {{FO(ds.refine_F), 1}}},
    {NB_OPT_LOCAL, "--F-out", 1, "FILE",
     "write the refined F as text lines 'h k l F sigma multiplicity' (the\n"
     "asymmetric unit; P1: with the Friedel mates), or a FILE.mtz: MTZ\n"
     "columns H K L F SIGF N (CCP4's asymmetric unit)",
     .needs = "a file name", .type = NB_OPT_STRING, .at = {FO(F_out)}},
    {NB_OPT_LOCAL, "--integrated", 1, "FILE.refl",
     "a dataset fit: measure every reflection on every frame that passes\n"
     "(profile-fitted with the model's profile and by summation, over the\n"
     "fitted background planes) and write them as DIALS's integrated\n"
     "reflection table, its experiments those of nb-convert -o fit.expt on\n"
     "the refined stream: dials.scale fit.expt FILE.refl",
     .needs = "a file name", .type = NB_OPT_STRING, .at = {FO(integrated)}},
    {NB_OPT_LOCAL, "--integrated-mtz", 1, "FILE.mtz",
     "a dataset fit: the same measured intensities as an unmerged MTZ for\n"
     "CCP4's programs (pointless, aimless): H K L in the asymmetric unit of\n"
     "--space-group's group, M/ISYM, BATCH (the frame's number from 1),\n"
     "I SIGI and IPR SIGIPR (profile-fitted, the whole reflection), ISUM\n"
     "SIGISUM (summed, the frame's part), FRACTIONCALC (the partiality), BG,\n"
     "XDET YDET, ROT, LP, QE; a batch header per frame with its refined cell\n"
     "and orientation.  Needs CCP4's library (libccp4-dev) in the build",
     .needs = "a file name", .type = NB_OPT_STRING, .at = {FO(integrated_mtz)}},
    {NB_OPT_LOCAL, "--space-group", 1, "NAME|FILE.mtz",
     "the space group whose asymmetric unit --refine-F refines and\n"
     "--integrated-mtz's H K L M/ISYM state: a name as\n"
     "CCP4's syminfo.lib ('P 21 21 21', P212121, 'C 1 2 1'), a Hall symbol\n"
     "(' P 2ac 2ab'), or an MTZ file's symmetry (default: the plan's, as the\n"
     "experiment list of nb-geom -expt states it, else P1)",
     .needs = "a space group", .type = NB_OPT_STRING, .at = {FO(space_group)}},
    {NB_OPT_LOCAL, "--F-prior", 1, "W",
     "the weight of --refine-F's Wilson prior (default 1; 0: none)",
     .type = NB_OPT_DOUBLE, .check = NB_CHECK_NONNEG, .at = {FO(ds.F_prior)}},
    {NB_OPT_LOCAL, "--roi-radius", 1, "PX",
     "a dataset fit's regions: each spot's pixels grown by PX (default 3)",
     .type = NB_OPT_DOUBLE, .check = NB_CHECK_NONNEG, .at = {FO(ds.roi_radius)}},
    {NB_OPT_LOCAL, "--spot-photons", 1, "P",
     "a model pixel of P photons or more is in a predicted spot (default 0.5)",
     .type = NB_OPT_DOUBLE, .check = NB_CHECK_POSITIVE, .at = {FO(ds.spot_photons)}},
    {NB_OPT_LOCAL, "--global", 1, "auto|on|off",
     "the global stage (a search over turns, cells, distance and beam centre\n"
     "on the observed spots) before the pixels are fitted: auto (default)\n"
     "when turns or the detector's position are refined",
     .type = NB_OPT_CHOICE, .at = {FO(ds.global)}, .choices = globals, .expected = "'auto', 'on' or 'off'"},
    {NB_OPT_LOCAL, "--global-range", 1, "DEG", "the turns the global stage searches, +- DEG (default 4)",
     .type = NB_OPT_DOUBLE, .check = NB_CHECK_POSITIVE, .at = {FO(ds.global_range)}},
    {NB_OPT_LOCAL, "--global-distance", 1, "MM", "the distances the global stage searches, +- MM (default 15)",
     .type = NB_OPT_DOUBLE, .check = NB_CHECK_POSITIVE, .at = {FO(ds.global_distance)}},
    {NB_OPT_LOCAL, "--global-beam", 1, "MM", "the beam centres the global stage searches, +- MM (default 1)",
     .type = NB_OPT_DOUBLE, .check = NB_CHECK_POSITIVE, .at = {FO(ds.global_beam)}},
    {NB_OPT_LOCAL, "--max-deviance", 1, "R",
     "a frame fails when its Poisson deviance is more than R times what the\n"
     "model's own counts would give (default 1.5)",
     .type = NB_OPT_DOUBLE, .check = NB_CHECK_POSITIVE, .at = {FO(ds.max_deviance)}},
    {NB_OPT_LOCAL, "--min-explained", 1, "F",
     "a frame fails when less than F of its predicted spots (bright enough to\n"
     "judge) are in the observed image, or less than F of its strongest\n"
     "observed spots are predicted (default 0.5)",
     .type = NB_OPT_DOUBLE, .check = NB_CHECK_NONNEG, .at = {FO(ds.min_explained)}},
    {NB_OPT_LOCAL, "--spots", 1, "FILE.refl",
     "a dataset fit: the observed spots are DIALS's reflection table's\n"
     "(dials.find_spots' strong.refl, dials.index's indexed.refl), not\n"
     "found here: their boxes the regions' seeds, their centroids the global\n"
     "stage's.  Each row's experiment identifier names its frame (the\n"
     "plan's, as nb-geom -expt keeps them); rows of no experiment or of\n"
     "another are left out",
     .needs = "a file name", .type = NB_OPT_STRING, .at = {FO(spots)}},
    {NB_OPT_LOCAL, "--frames", 1, "A:B",
     "a dataset fit of frames A to B alone (counted from 1; --observed once\n"
     "for each): the others keep their start (a Slurm array's share)",
     .needs = "FIRST:LAST", .type = NB_OPT_CALLBACK, .fn = set_frames},
};
#undef FO
static const nb_opt_table table = {NB_FIT, rows, (int)(sizeof rows / sizeof rows[0])};

/* The start model from the stream: its (one) PLAN and HKL records. */
static nb_status read_start(nb_reader *r, nb_plan *plan, nb_record *hkl_rec, int *have_plan, int *have_hkl)
{
    nb_record rec;
    int eof = 0;
    nb_status st = NB_OK;
    memset(&rec, 0, sizeof rec);
    while (!st) {
        if ((st = nb_reader_next(r, &rec, &eof)) || eof) break;
        if (nb_record_is(&rec, "PLAN")) {
            if (*have_plan) {
                st = nb_error_set(NB_ERR_USAGE, "the stream holds more than one plan: nb-fit fits one");
                break;
            }
            if (!(st = nb_plan_from_record(&rec, plan))) *have_plan = 1;
        } else if (nb_record_is(&rec, "HKL") && *have_plan && !*have_hkl) {
            *hkl_rec = rec;
            memset(&rec, 0, sizeof rec);
            *have_hkl = 1;
        }
    }
    nb_record_free(&rec);
    if (!st && !*have_plan) st = nb_error_set(NB_ERR_DATA, "%s: the stream holds no PLAN record", nb_reader_name(r));
    return st;
}

/* nb-fit's processes (nb_par.h) as the fit's reduction (nb_fit_reduce.h) */
static nb_status par_sum(void *par, double *buf, size_t n) { return nb_par_sum(par, buf, n); }
static nb_status par_agree(void *par, nb_status st) { return nb_par_agree(par, st); }

/* The start model's structure factors: the HKL record's, the plan's, or
 * for --refine-F from a plan that asks for none, a flat start. */
static nb_status start_hkl(const nb_plan *plan, const nb_record *rec, int have, const fit_opts *o, const nb_par *par,
                           nb_hkl *hkl)
{
    nb_hkl_init(hkl);
    if (have) return nb_hkl_from_record(rec, hkl);
    const int asks = plan->default_F != 0.0 || plan->hkl_file || (plan->dump_file && !plan->dump_implicit);
    if (!o->ds.refine_F || asks) return nb_sim_plan_F(plan, hkl);
    const nb_fit_reduction red = {.rank = par->rank, .size = par->size, .ctx = (void *)par, .sum = par_sum,
                                  .agree = par_agree};
    nb_fit_files files = {o, plan};
    nb_fit_ds_settings s = o->ds;
    s.nobserved = o->nobserved, s.observed = nb_fit_observed_frame, s.observed_ctx = &files;
    return nb_fit_flat_F(plan, &s, engine, &red, hkl);
}

/* The refined plan (and the start's HKL record) to the output. */
static nb_status write_fit(const char *output, const nb_plan *plan, const nb_record *hkl_rec, int have_hkl)
{
    nb_record rec;
    nb_writer *w = NULL;
    nb_status st = nb_plan_to_record(plan, &rec);
    if (!st) st = nb_writer_open(&w, output);
    if (!st) st = nb_writer_put(w, &rec);
    if (!st && have_hkl) st = nb_writer_put(w, hkl_rec);
    if (!st) st = nb_writer_end(w);
    if (!st) st = nb_writer_close(w);
    else if (w) nb_writer_abort(w);
    nb_record_free(&rec);
    return st;
}

/* The defaults of the options (fit_opts is zeroed first). */
static void defaults(fit_opts *o)
{
    memset(o, 0, sizeof *o);
    nb_fit_ds_defaults(&o->ds);
    o->device = NB_ENGINE_CPU;
}

/* Is this a dataset fit (nb_fit_dataset.c) or one set of parameters? */
static int dataset_fit(const fit_opts *o, const nb_plan *start)
{
    return o->ds.refine_frame || o->ds.refine_F || start->frame_crystals;
}

/* The dataset fit with nb-fit's files: the observed images read as the fit
 * asks for them, --space-group resolved first, --F-out written after. */
static nb_status dataset(const nb_plan *start, const nb_hkl *hkl, const fit_opts *o, const nb_fit_reduction *red,
                         nb_plan *out, nb_hkl *refined_F, int *failed)
{
    if (!o->nobserved) return nb_error_set(NB_ERR_USAGE, "no observed image: give --observed FILE");
    if (o->residual)
        return nb_error_set(NB_ERR_USAGE, "option --residual: a dataset fit writes no residual image (it compares "
                                          "the spots' regions alone); render the refined plan (nb-fit ... | "
                                          "nb-sim) and subtract it (nb-math)");
    nb_fit_files files = {o, start};
    nb_fit_ds_settings s = o->ds;
    nb_fit_symmetry *sym = NULL;
    nb_fit_F_table table;
    memset(&table, 0, sizeof table);
    s.nobserved = o->nobserved, s.observed = nb_fit_observed_frame, s.observed_ctx = &files;
    if (o->integrated_mtz && !nb_mtz_available())
        return nb_error_set(NB_ERR_UNSUPPORTED, "option --integrated-mtz: this nb-fit was built without CCP4's "
                                                "library (Debian: libccp4-dev), which writes MTZ files; --integrated "
                                                "FILE.refl writes the same intensities for DIALS");
    nb_status st = s.refine_F || o->integrated_mtz ? nb_calloc((void **)&sym, 1, sizeof *sym, "the space group")
                                                   : NB_OK;
    if (!st && sym) st = nb_fit_space_group(o->space_group, start, sym);
    s.symmetry = s.refine_F ? sym : NULL;
    nb_fit_given_spots given;
    memset(&given, 0, sizeof given);
    nb_fit_integrated integrated;
    memset(&integrated, 0, sizeof integrated);
    if (o->integrated || o->integrated_mtz) s.integrated = &integrated;
    if (!st && o->spots && !(st = nb_fit_spots_read(o->spots, start, &given))) s.spots = &given;
    st = nb_fit_agree(red, st);
    if (!st) st = nb_fit_dataset_run(start, hkl, &s, engine, red, out, refined_F, o->F_out ? &table : NULL, NULL, failed);
    if (!st && o->F_out && s.refine_F && red->rank == 0) st = nb_fit_write_F(o->F_out, &table);
    if (!st && o->integrated && red->rank == 0) st = nb_fit_write_integrated(o->integrated, out, &integrated);
    if (!st && o->integrated_mtz && red->rank == 0)
        st = nb_fit_write_integrated_mtz(o->integrated_mtz, out, sym->spacegroup,
                                         &integrated);
    nb_fit_integrated_free(&integrated);
    nb_fit_F_table_free(&table);
    nb_fit_spots_free(&given);
    free(sym);
    return st;
}

/* The fit of either kind: the refined plan (and F) into out, refined_F. */
static nb_status run_fit(const nb_plan *start, const nb_hkl *hkl, const fit_opts *o, const nb_par *par,
                         nb_plan *out, nb_hkl *refined_F, int *failed)
{
    const nb_fit_reduction red = {.rank = par->rank, .size = par->size, .ctx = (void *)par, .sum = par_sum,
                                  .agree = par_agree};
    *failed = 0;
    if (dataset_fit(o, start)) return dataset(start, hkl, o, &red, out, refined_F, failed);
    if (par->size > 1)
        return nb_error_set(NB_ERR_USAGE, "only a dataset fit (--refine-frame, --refine-F) runs across processes");
    if (o->ds.frame_first) return nb_error_set(NB_ERR_USAGE, "option --frames: only with --refine-frame or --refine-F");
    if (o->spots) return nb_error_set(NB_ERR_USAGE, "option --spots: only with --refine-frame or --refine-F (a fit of "
                                                    "one set of parameters compares every pixel)");
    if (o->integrated || o->integrated_mtz)
        return nb_error_set(NB_ERR_USAGE, "option %s: only in a dataset fit (--refine-frame, --refine-F, or a plan "
                                          "of per-frame crystals)", o->integrated ? "--integrated" : "--integrated-mtz");
    return fit(start, hkl, o, out);
}

int main(int argc, char **argv)
{
    nb_std_opts opts;
    fit_opts o;
    nb_par par;
    defaults(&o);
    nb_set_tool_name(tool.name);
    nb_exit_on_error(nb_par_init(&par, &argc, &argv));
    nb_std_opts_init(&opts);
    nb_stream_to_stdout(1);
    nb_exit_on_error(nb_tool_parse(&tool, &opts, &o, argc, argv));
    nb_exit_on_error(nb_std_apply(&opts));
    nb_stream_to_stdout(par.rank == 0 && !strcmp(opts.output, "-"));
    if (par.rank != 0 && nb_verbosity() > 0) nb_set_verbosity(0);
    if (o.device != NB_ENGINE_CPU) nb_cuda_environment(); /* before any thread starts */
    nb_exit_on_error(nb_engine_open(&engine, (nb_engine_device)o.device));
    if (o.ds.iterations < 1) nb_exit_on_error(nb_error_set(NB_ERR_USAGE, "option --iterations: at least 1"));

    nb_reader *r = NULL;
    nb_plan start, refined;
    nb_record hkl_rec;
    nb_hkl hkl, refined_F;
    int have_plan = 0, have_hkl = 0, failed = 0;
    memset(&hkl_rec, 0, sizeof hkl_rec);
    nb_hkl_init(&hkl);
    nb_hkl_init(&refined_F);
    nb_status st = NB_OK;
    /* mpirun hands standard input to rank 0 alone */
    if (par.size > 1 && !strcmp(opts.input, "-"))
        st = nb_error_set(NB_ERR_USAGE, "under mpirun every process reads the start: give it as a file (nb-fit ... "
                                        "start.nbs), not on standard input");
    /* and gives each a terminal for its standard output: no way for a stream */
    if (!st && par.size > 1 && !strcmp(opts.output, "-"))
        st = nb_error_set(NB_ERR_USAGE, "under mpirun write the refined stream with -o FILE (mpirun gives every "
                                        "process a terminal, not a pipe, for standard output)");
    if (!st) st = nb_reader_open(&r, opts.input);
    if (!st) st = read_start(r, &start, &hkl_rec, &have_plan, &have_hkl);
    if (!st) st = observed_pattern(&o, &start);
    if (!st) st = start_hkl(&start, &hkl_rec, have_hkl, &o, &par, &hkl);
    int have_refined = 0;
    if (!st) have_refined = !(st = run_fit(&start, &hkl, &o, &par, &refined, &refined_F, &failed));
    if (!st && par.rank == 0) {
        nb_record F_rec;
        int have_F = refined_F.hkls > 0;
        if (have_F) st = nb_hkl_to_record(&refined_F, &F_rec);
        if (!st) st = write_fit(opts.output, &refined, have_F ? &F_rec : &hkl_rec, have_F || have_hkl);
        if (have_F) nb_record_free(&F_rec);
    }
    if (have_refined) nb_plan_free(&refined);
    if (have_plan) nb_plan_free(&start);
    nb_hkl_free(&hkl);
    nb_hkl_free(&refined_F);
    nb_record_free(&hkl_rec);
    nb_reader_close(r);
    nb_engine_close(engine);
    free(o.observed);
    free(o.observed_names);
    nb_fit_files_free();
    /* a failure the processes agreed on: exit, every process having said so
     * (nb_par's exit handler waits for the others and finalizes) */
    nb_exit_on_error(st);
    nb_par_finalize(&par);
    /* the fit ran and the stream is whole; a frame's verdict failed: 3 (documented) */
    return failed ? 3 : 0;
}
