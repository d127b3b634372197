/* nb-convert: write the images of a stream as files, or read files into a
 * stream.  This file is its command line (the help, the option table, -o and
 * --format by the format registry) and the stream's loop; the rest is in
 * tools/nb_convert_*.c (nb_convert.h says which part is where). */
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frame_write.h"
#include "nb_cli.h"
#include "nb_image_record.h"
#include "nb_options.h"
#include "nb_plan.h"
#include "nb_pool.h"
#include "nb_stream.h"
#include "nb_util.h"
#include "nxmx.h"
#include "registry.h"
#include "smv.h"
#include "nb_convert.h"

static const nb_opt_table table;

static const nb_tool_info tool = {
    "nb-convert",
    NB_CONVERT,
    "[OPTIONS] [-o FILE ...] [STREAM]",
    "write the images of an nb stream as files, or read image files into a stream",
    "nb-convert reads an nb stream and writes every IMAGE record to each file named with -o;\n"
    "the format follows the extension, or the --format given before the -o:\n"
    "  .bin .raw .float   raw float32 photons/pixel (nanoBragg's floatimage.bin layout)\n"
    "  .img .smv          SMV (ADSC) 16-bit, nanoBragg's header keys plus ADC_OFFSET\n"
    "  .cbf               CBF (byte-offset int32): imgCIF axes and polarization for DIALS,\n"
    "                     a miniCBF header for XDS (PILATUS lines for PILATUS sizes)\n"
    "  .tif .tiff         TIFF: integer counts when the stream has them, else float32 photons\n"
    "                     (--format tif-float, tif16, tif32 choose)\n"
    "  .pgm               8-bit PGM, nanoBragg's scaling (-pgmscale)\n"
    "  .png               8-bit PNG preview with an automatic contrast stretch: of the\n"
    "                     counts less their ADC offset when the stream has them, else (or\n"
    "                     with --photons) of the photons\n"
    "  .nxs .h5           NeXus/NXmx HDF5: every frame in one file (no '#' run), int32 counts\n"
    "                     from 0 as a CBF's (--photons: float32 photons), one frame per\n"
    "                     chunk, bitshuffle+LZ4 when the HDF5 filter is installed, else gzip\n"
    "                     (--compression); beam, every panel as an NXdetector_module, the\n"
    "                     spindle's omega per frame, provenance (docs/architecture.md 5).\n"
    "                     Shards' files: -o master.nxs --join 'part_*.nxs'\n"
    "  .nbs               a copy of the stream (with --import: the stream with the image)\n"
    "  XDS.INP, .INP      XDS's input for the series (once; the images' name from the CBF\n"
    "                     or SMV -o of the same command, its '#' run as '?')\n"
    "  .geom              a CrystFEL geometry file for the detector (once)\n"
    "  .expt              a DIALS experiment list of the simulated truth (once for the run):\n"
    "                     a rotation series' one experiment (its scan the frames written),\n"
    "                     or one experiment per still with its own beam and crystal; the\n"
    "                     detector with gain, trusted range and sensor as simulated, in\n"
    "                     DIALS's frame; its images the first CBF or SMV (one panel) or NXmx\n"
    "                     -o of the same command, if any; when every -o is a .expt, a plan\n"
    "                     without images is described by its frames.  Identifiers: the plan's\n"
    "                     (nb-geom -expt keeps a list's), else nb-<crc>(-N), <crc> the\n"
    "                     plan's CRC-32 (the same for the same command).  Shards': --join 'part_*.expt'\n"
    "                     Stills with a spectrum of their own (-stills_bandwidth, -expt_spectra):\n"
    "                     each shot's as a diffBragg .lam, X_spectra/shot_NNNNNN.lam, and their\n"
    "                     list X_spectra.txt beside X.expt (nb-geom -expt_spectra reads it)\n"
    "  .jsonl             the ground truth, one JSON line per frame (once for the run): the\n"
    "                     setting matrix A in DIALS's frame, the shot's spectrum, fluence and\n"
    "                     size, and every reflection over --truth-min-photons photons\n"
    "Integer formats (SMV, CBF, 16/32-bit TIFF) take the detector counts when nb-noise added\n"
    "them, else the photons scaled as nanoBragg's int image (-scale, default 55000/max, plus\n"
    "-adc, rounded).  Float formats take the photons.  Without -o, the files the plan\n"
    "requested are written: -floatfile, -intfile (noiseless SMV), -noisefile (SMV of the\n"
    "counts), -pgmfile.  Every file is written under a temporary name and renamed when\n"
    "complete; they are renamed into place only when the stream has ended cleanly.  A '#'\n"
    "run in a file name is replaced by the frame number (img_####.cbf: img_0001.cbf ...);\n"
    "without one, a stream of several images is an error.  A series written to raw float and\n"
    "SMV files only is written up to four frames at a time (--threads).  A detector of several\n"
    "panels (nb-geom -panels) is written as: raw float, every panel one after another in one\n"
    "file; the one-panel formats (SMV, CBF, TIFF, PGM, PNG), one file per panel, the panel's\n"
    "number before the '#' run (img_###.cbf: img_p0_001.cbf, img_p1_001.cbf ...) or else\n"
    "before the extension (img.cbf: img-p0.cbf, img-p1.cbf ...); .geom, all the panels.\n"
    "Beside XDS.INP (XDS reads one file per frame) the CBF and SMV files are one image per\n"
    "frame instead: the panels one after another along the slow axis, as wide as the widest\n"
    "(-1 right of a narrower one), panel 0's geometry in the header; XDS.INP has NX, NY of\n"
    "that image and a SEGMENT= block per panel (its rows, axes, SEGMENT_ORGX/ORGY,\n"
    "SEGMENT_DISTANCE in panel 0's frame).  The panels must share one pixel size.\n"
    "CBF files count from 0 (the counts less their ADC offset, as a PILATUS counts); SMV\n"
    "files keep the offset in ADC_OFFSET; beam centre, polarization and frame numbers follow\n"
    "one convention (docs/physics.md 2.6).\n"
    "With --import FILE the direction reverses: a raw float, SMV, CBF or TIFF image (or an nb\n"
    "stream's IMAGE record) becomes an IMAGE record after the PLAN of the input stream, so it can\n"
    "be re-noised or converted; an NXmx file (nb's, an Eiger's master and its data files, a\n"
    "Jungfrau's) an IMAGE record for each of the plan's frames, its modules (NXdetector_module)\n"
    "the plan's panels, its pixel_mask's pixels untrusted; it is read\n"
    "as nb-fit --observed reads it (its magic bytes, else its suffix; the counts' offset and\n"
    "overload the file states), and a write-only format (PNG, PGM) is refused by name.",
    &table,
    "  nb-geom ... | nb-hkl | nb-sim | nb-noise -seed 1 | nb-convert -o frame.cbf -o preview.png\n"
    "  nb-convert -o floatimage.bin -o image.pgm -pgmscale 2 rendered.nbs\n"
    "  nb-convert --import floatimage.bin plan.nbs | nb-noise -seed 3 | nb-convert -o noisy.img\n"
    "      (plan.nbs: the plan floatimage.bin was rendered from)\n",
    NULL,
    NULL, /* no exit status of its own */
};


/* by the suffix, or (as nb-convert always took them) a --format name after the last dot: x.tif16 */
const nb_format *format_from_path(const char *path)
{
    const nb_format *f = nb_format_by_suffix(path);
    const char *dot = strrchr(path, '.'), *slash = strrchr(path, '/');
    if (!f && dot && (!slash || dot > slash)) f = nb_format_by_name(dot + 1);
    return f;
}

/* ---- options and main ---------------------------------------------------- */

/* -o FILE: its format from --format before it, or from its name */
static nb_status add_output(const nb_opt_args *a)
{
    conv_opts *o = a->dest;
    out_request *r = &o->outs[o->nouts++];
    r->path = a->vals[0];
    r->format = o->pending_format ? o->pending_format : format_from_path(r->path);
    r->source = SRC_AUTO;
    o->pending_format = NULL;
    if (!r->format)
        return nb_error_set(NB_ERR_USAGE,
                            "cannot tell the format of '%s' from its name (known: .bin .img .smv .cbf .tif "
                            ".pgm .png .nbs .INP .geom .expt .jsonl .nxs .h5); use --format",
                            r->path);
    return NB_OK;
}

static nb_status set_format(const nb_opt_args *a)
{
    conv_opts *o = a->dest;
    o->pending_format = nb_format_by_name(a->vals[0]);
    if (!o->pending_format) return nb_error_set(NB_ERR_USAGE, "unknown format '%s'", a->vals[0]);
    return NB_OK;
}

/* the reference's output files, requested here rather than in the plan */
static nb_status add_reference_output(const nb_opt_args *a)
{
    conv_opts *o = a->dest;
    const char *v = a->vals[0];
    out_request *r = &o->outs[o->nouts++];
    *r = reference_request(a->opt->id, v, 0);
    return NB_OK;
}

/* --frames A:B, 1-based and inclusive */
static nb_status set_frames(const nb_opt_args *a)
{
    conv_opts *o = a->dest;
    int first, last;
    nb_status st = nb_parse_frames(a->vals[0], &first, &last);
    if (!st) o->frame_first = first, o->frame_last = last;
    return st;
}

/* --join PART: a name, or a pattern expanded here (so that a quoted
 * 'part_*.nxs' names every part; the joined files order them by their frames) */
static nb_status add_join(const nb_opt_args *a)
{
    conv_opts *o = a->dest;
    const char *v = a->vals[0], *flag = a->name;
    /* --nxmx-join's parts are NXmx files whatever their names */
    const int nxmx = !strcmp(flag, "--nxmx-join");
    glob_t g;
    memset(&g, 0, sizeof g);
    int r = strpbrk(v, "*?[") ? glob(v, 0, NULL, &g) : GLOB_NOMATCH;
    if (r != 0 && r != GLOB_NOMATCH) return nb_error_set(NB_ERR_IO, "%s '%s': cannot expand the pattern", flag, v);
    if (r == GLOB_NOMATCH && strpbrk(v, "*?["))
        return nb_error_set(NB_ERR_USAGE, "%s '%s': no file matches the pattern", flag, v);
    size_t add = r == 0 ? g.gl_pathc : 1;
    const char **j = realloc(o->joins, ((size_t)o->njoins + add) * sizeof *j);
    int *k = j ? realloc(o->join_nxmx, ((size_t)o->njoins + add) * sizeof *k) : NULL;
    if (j) o->joins = j;
    if (k) o->join_nxmx = k;
    if (!j || !k) {
        globfree(&g);
        return nb_error_set(NB_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < add; i++) {
        o->join_nxmx[o->njoins] = nxmx;
        o->joins[o->njoins++] = nb_xstrdup(r == 0 ? g.gl_pathv[i] : v);
    }
    globfree(&g);
    return NB_OK;
}

static const nb_opt_choice compressions[] = {
    {"auto", NB_NXMX_AUTO}, {"gzip", NB_NXMX_GZIP}, {"bslz4", NB_NXMX_BSLZ4}, {"none", NB_NXMX_NONE}, {NULL, 0}};

static const nb_opt_choice smv_beams[] = {
    {"reference", NB_SMV_BEAM_REFERENCE}, {"dxtbx", NB_SMV_BEAM_DXTBX}, {NULL, 0}};

/* each flag overrides the plan's request: have_* says it was given */
#define CO(f) NB_AT(conv_opts, f)
static const nb_opt rows[] = {
    {FL_FLOATFILE, .type = NB_OPT_CALLBACK, .fn = add_reference_output},
    {FL_INTFILE, .type = NB_OPT_CALLBACK, .fn = add_reference_output},
    {FL_NOISEFILE, .type = NB_OPT_CALLBACK, .fn = add_reference_output},
    {FL_PGMFILE, .type = NB_OPT_CALLBACK, .fn = add_reference_output},
    {FL_NOPGM, .type = NB_OPT_SET, .sets = {{CO(nopgm), 1}}},
    {FL_SCALE, .type = NB_OPT_DOUBLE, .at = {CO(scale)}, .sets = {{CO(have_scale), 1}}},
    {FL_PGMSCALE, .type = NB_OPT_DOUBLE, .at = {CO(pgmscale)}, .sets = {{CO(have_pgmscale), 1}}},
    {FL_ADC, .type = NB_OPT_DOUBLE, .at = {CO(adc)}, .sets = {{CO(have_adc), 1}}},
    {NB_OPT_LOCAL, "-o", 1, "FILE", "write FILE (repeatable); the format follows the extension",
     .needs = "a file name", .type = NB_OPT_CALLBACK, .fn = add_output},
    {NB_OPT_LOCAL, "--output", 1, "FILE", NULL, .needs = "a file name", .type = NB_OPT_CALLBACK, .fn = add_output},
    {NB_OPT_LOCAL, "--format", 1, "NAME",
     "format of the next -o: bin smv cbf tif tif-float tif16 tif32 pgm png nbs\n"
     "xds geom expt truth nxmx",
     .needs = "a name", .type = NB_OPT_CALLBACK, .fn = set_format},
    {NB_OPT_LOCAL, "--smv-beam", 1, "reference|dxtbx",
     "BEAM_CENTER_X/Y of -o SMV files: as nanoBragg writes them, or (default)\n"
     "so that dxtbx/DIALS and nb-geom -img find the true beam position;\n"
     "-intfile and -noisefile always use nanoBragg's values",
     .needs = "'reference' or 'dxtbx'", .type = NB_OPT_CHOICE, .at = {CO(smv_beam)}, .choices = smv_beams,
     .expected = "'reference' or 'dxtbx'"},
    {NB_OPT_LOCAL, "--truth-min-photons", 1, "N",
     "truth.jsonl lists the reflections whose photons in the frame exceed N\n"
     "(default 1)",
     .needs = "a number", .type = NB_OPT_DOUBLE, .at = {CO(truth_min_photons)}},
    {NB_OPT_LOCAL, "--photons", 0, "", "PNG previews of the photons even when the stream has counts (default:\n"
     "the counts less their ADC offset, what a detector would show); NXmx\n"
     "data as float32 photons (default: int32 counts, as a CBF's)",
     .type = NB_OPT_SET, .sets = {{CO(photons), 1}}},
    {NB_OPT_LOCAL, "--compression", 1, "auto|gzip|bslz4|none",
     "compression of NXmx data: bitshuffle+LZ4 (HDF5 filter 32008, as Eiger\n"
     "files) when its plugin is installed, else gzip (auto, the default)",
     .needs = "a name", .type = NB_OPT_CHOICE, .at = {CO(compression)}, .choices = compressions,
     .expected = "'auto', 'gzip', 'bslz4' or 'none'"},
    {NB_OPT_LOCAL, "--frames", 1, "A:B",
     "a plan without IMAGE records written as model.expt: frames A to B\n"
     "alone (counted from 1; a shard's part for --join, as nb-fit --frames\n"
     "refines them)",
     .needs = "FIRST:LAST", .type = NB_OPT_CALLBACK, .fn = set_frames},
    {NB_OPT_LOCAL, "--join", 1, "PART",
     "join the files of shards (nb-sim --shard, --frames): NXmx parts into\n"
     "the -o MASTER.nxs (a virtual data set over theirs), model.expt parts\n"
     "into the -o model.expt of the whole run (naming the master's frames\n"
     "when both are joined).  Repeatable; a quoted pattern such as\n"
     "'part_*.nxs' is expanded; no stream is read",
     .needs = "a file name or pattern", .type = NB_OPT_CALLBACK, .fn = add_join},
    {NB_OPT_LOCAL, "--nxmx-join", 1, "PART", "the same as --join (its older name)",
     .needs = "a file name or pattern", .type = NB_OPT_CALLBACK, .fn = add_join},
    {NB_OPT_LOCAL, "--import", 1, "FILE", "read FILE (raw float32, SMV, CBF, TIFF, an nb stream's image, or\n"
     "every frame of an NXmx file) as the image of the input plan",
     .needs = "a file name", .type = NB_OPT_STRING, .at = {CO(import)}},
    {NB_OPT_LOCAL, "--grad", 1, "NAME",
     "write the derivative records of NAME (nb-sim --grad NAME) instead of\n"
     "the images, as raw float (.bin) or float TIFF; without it derivative\n"
     "records are passed over",
     .needs = "a name", .type = NB_OPT_STRING, .at = {CO(grad)}},
};
#undef CO
static const nb_opt_table table = {NB_CONVERT, rows, (int)(sizeof rows / sizeof rows[0])};

static nb_status parse(int argc, char **argv, conv_opts *o, nb_std_opts *std)
{
    o->smv_beam = NB_SMV_BEAM_DXTBX;
    o->pending_format = NULL;
    o->truth_min_photons = 1.0;
    nb_status st = nb_tool_parse(&tool, std, o, argc, argv);
    if (st) return st;
    if (o->pending_format)
        return nb_error_set(NB_ERR_USAGE, "--format %s must come before the -o FILE it applies to",
                            o->pending_format->name);
    for (int k = 0; k < o->nouts; k++) {
        out_request *r = &o->outs[k];
        const nb_format *f = r->format;
        if (f->smv_beam && r->source == SRC_AUTO) r->smv_beam = o->smv_beam;
        if (f->photons_option && o->photons) r->source = SRC_PHOTONS;
        /* "NXmx (HDF5)": its title before the parenthesis */
        if (f->run_file && strchr(r->path, '#'))
            return nb_error_set(NB_ERR_USAGE, "'%s': one %.*s file holds every frame; no '#' run in its name", r->path,
                                (int)strcspn(f->title, " ("), f->title);
        if (f->load && (st = f->load())) return nb_error_prefix(st, "'%s'", r->path);
        if (f->writer == NB_WRITE_STREAM && o->tee && !o->import)
            return nb_error_set(NB_ERR_USAGE, "'%s': only one .nbs copy of the stream", r->path);
        if (f->writer == NB_WRITE_STREAM) o->tee = r->path;
        if (o->grad && !f->derivatives)
            return nb_error_set(NB_ERR_USAGE,
                                "--grad %s: '%s' would be a %s file; a derivative (photons per unit, any sign) is "
                                "written as raw float (.bin) or float TIFF (.tif)",
                                o->grad, r->path, f->name);
    }
    if (o->grad && o->import) return nb_error_set(NB_ERR_USAGE, "--grad and --import do not go together");
    if (o->grad && !o->nouts) return nb_error_set(NB_ERR_USAGE, "--grad %s needs -o FILE", o->grad);
    return NB_OK;
}

/* The stream's images into the files: each IMAGE record written as it comes
 * (live), by the frame pool's workers, or whole (convert_image); the held
 * files put in place at each END, the run's files at the end */
static nb_status convert_stream(nb_reader *r, conv_opts *o)
{
    nb_record rec;
    nb_plan plan;
    int have_plan = 0, eof = 0, images = 0, pool_tried = 0;
    /* model.expt alone: a plan without images is described by its frames */
    int plan_images = 0, plans_described = 0;
    const int plan_files_only = only_plan_files(o);
    nb_writer *tee = NULL;
    live_image live;
    frame_pool pool;
    memset(&rec, 0, sizeof rec);
    memset(&live, 0, sizeof live);
    memset(&pool, 0, sizeof pool);
    live.o = o;
    nb_payload_consumer consumer = {live_begin, live_piece, &live};
    nb_reader_set_consumer(r, &consumer);
    nb_status st = o->tee ? nb_writer_open(&tee, o->tee) : NB_OK;
    while (!st) {
        st = nb_reader_next(r, &rec, &eof);
        if (st || eof) break;
        if (tee && (st = nb_writer_put(tee, &rec))) break;
        if (nb_record_is(&rec, "END")) {
            /* the segment is complete: its files go into place */
            if (!(st = pool_drain(&pool))) st = commit_pending();
        } else if (nb_record_is(&rec, "PLAN")) {
            if ((st = pool_drain(&pool))) break; /* its frames are done with the plan they point to */
            if (have_plan && plan_files_only && !plan_images) {
                if ((st = write_plan_files(o, &plan))) break;
                plans_described++;
            }
            plan_images = 0;
            live.plan = NULL;
            if (have_plan) nb_plan_free(&plan);
            if ((st = nb_plan_from_record(&rec, &plan))) break;
            have_plan = 1;
            live.plan = &plan;
        } else if (nb_record_is(&rec, "IMAGE")) {
            int converted = 0;
            if (live.pooled && !pool_tried) {
                pool_start(&pool, r, (size_t)rec.payload_len);
                pool_tried = 1;
            }
            if (live.pooled && pool.pool.workers) {
                st = pool_image(&pool, &rec, &plan, o);
                converted = 1;
            } else {
                st = convert_image(&rec, have_plan ? &plan : NULL, o, &live, &converted);
            }
            live.pooled = 0;
            images += converted;
            plan_images += converted;
        }
    }
    /* every frame handed over written (or, after a failure, finished) */
    nb_status pst = nb_pool_stop(&pool.pool);
    if (!st) st = pst;
    if (!st && have_plan && plan_files_only && !plan_images && !(st = write_plan_files(o, &plan))) plans_described++;
    if (!st && images == 0 && plans_described == 0)
        st = o->grad ? nb_error_set(NB_ERR_DATA, "%s: the stream holds no derivative of '%s' (run nb-sim --grad %s)",
                                    nb_reader_name(r), o->grad, o->grad)
                     : nb_image_none(nb_reader_name(r));
    if (tee) {
        if (!st) st = nb_writer_close(tee);
        else nb_writer_abort(tee);
    }
    rows_free(&live.rows);
    /* the run files of images go into place with the other images (one
     * that fails takes them with it), then the files that describe them */
    nb_status rst = finish_runs(o, RUNS_OF_IMAGES, !st);
    if (!st) st = rst;
    if (st) abort_pending();
    else st = commit_pending();
    rst = finish_runs(o, RUNS_DESCRIBING, !st);
    if (!st) st = rst;
    if (have_plan) nb_plan_free(&plan);
    nb_record_free(&rec);
    return st;
}

int main(int argc, char **argv)
{
    nb_std_opts opts;
    conv_opts o;
    memset(&o, 0, sizeof o);
    nb_set_tool_name(tool.name);
    nb_std_opts_init(&opts);
    /* with --import the stream goes on to standard output (as it does with
     * --format nbs -o -): a failure, on the command line already, leaves an
     * ABORT record on the pipe to the next stage.  Writing files, this tool
     * ends a pipeline and leaves none. */
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--import")) nb_stream_to_stdout(1);
    o.outs = calloc((size_t)argc + 1, sizeof *o.outs);
    o.runs = calloc((size_t)argc + 1, sizeof *o.runs);
    if (!o.outs || !o.runs) nb_exit_on_error(nb_error_set(NB_ERR_NOMEM, "out of memory"));
    nb_exit_on_error(parse(argc, argv, &o, &opts));
    nb_exit_on_error(nb_std_apply(&opts));
    if (o.njoins) {
        nb_status js = join_parts(&o, &opts);
        for (int k = 0; k < o.njoins; k++) free((char *)o.joins[k]);
        free(o.joins);
        free(o.join_nxmx);
        free(o.outs);
        free(o.runs);
        nb_exit_on_error(js);
        return 0;
    }
    nb_stream_to_stdout((o.import && !o.tee) || (o.tee && !strcmp(o.tee, "-")));

    nb_reader *r = NULL;
    nb_status st = nb_reader_open(&r, opts.input);
    if (!st) st = o.import ? import_stream(r, &o) : convert_stream(r, &o);
    nb_reader_close(r);
    free(o.outs);
    free(o.runs);
    nb_exit_on_error(st);
    return 0;
}
