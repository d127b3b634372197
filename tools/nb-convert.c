/* nb-convert: write the images of a stream as files, or read files into a stream. */
#include <errno.h>
#include <glob.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#else
static int omp_get_max_threads(void) { return 1; }
#endif

#include "cbf.h"
#include "image_meta.h"
#include "nb_cli.h"
#include "nb_image.h"
#include "nb_image_record.h"
#include "nb_options.h"
#include "nb_plan.h"
#include "nb_pool.h"
#include "nb_stream.h"
#include "nb_tuning.h"
#include "nb_util.h"
#include "pgm.h"
#include "png.h"
#include "rawfloat.h"
#include "smv.h"
#include "crystfel_geom.h"
#include "dials_expt_join.h"
#include "dials_expt_write.h"
#include "truth_jsonl.h"
#include "xds_inp.h"
#include "tiff.h"
#include "nxmx.h"
#include "registry.h"

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
    "                     -o of the same command, if any.  Shards': --join 'part_*.expt'\n"
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
    "With --import FILE the direction reverses: a raw float, SMV, CBF or TIFF image becomes\n"
    "an IMAGE record after the PLAN of the input stream, so it can be re-noised or converted.",
    &table,
    "  nb-geom ... | nb-hkl | nb-sim | nb-noise -seed 1 | nb-convert -o frame.cbf -o preview.png\n"
    "  nb-convert -o floatimage.bin -o image.pgm -pgmscale 2 rendered.nbs\n"
    "  nb-convert --import floatimage.bin plan.nbs | nb-noise -seed 3 | nb-convert -o noisy.img\n"
    "      (plan.nbs: the plan floatimage.bin was rendered from)\n",
    NULL,
};

/* sidecars describe the series for a processing program, once per plan */
#define IS_SIDECAR(f) (nb_format_get(f)->sidecar)

/* where an output's pixels come from */
enum source { SRC_AUTO, SRC_INT, SRC_COUNTS, SRC_PHOTONS };

typedef struct out_request {
    const char *path;
    int format;
    int source;
    int smv_beam;
    int from_plan;
    int done; /* a sidecar already written */
} out_request;

typedef struct conv_opts {
    out_request *outs;
    int nouts;
    double scale, adc, pgmscale;
    int have_scale, have_adc, have_pgmscale, nopgm;
    int smv_beam;
    int photons;            /* --photons: PNG previews and NXmx data of the photons, not the counts */
    int compression;        /* --compression: of NXmx data (enum nb_nxmx_compression) */
    const char **joins;     /* --join: shards' NXmx files and model.expt files to join into the -o files */
    int *join_nxmx;         /* per part: given with --nxmx-join (an NXmx file, whatever its name) */
    int njoins;
    nb_nxmx **nxmx;         /* per -o: its NXmx file, open from its first frame to the end of the stream */
    const char *import;
    const char *tee;        /* -o FILE.nbs: a copy of the stream */
    const char *grad;       /* --grad NAME: write that derivative (nb-sim --grad), not the images */
    int pending_format;     /* --format's, for the next -o; -1: none */
    double truth_min_photons; /* --truth-min-photons: a reflection in truth.jsonl has more */
    nb_truth **truths;      /* per -o: its truth.jsonl, open for the whole run (NULL: none yet) */
    nb_expt **expts;        /* per -o: its model.expt, gathered over the whole run (NULL: none yet) */
} conv_opts;

/* A format's id by --format's name, or by a file's suffix; -1 when unknown */
static int format_from_name(const char *name)
{
    const nb_format *f = nb_format_by_name(name);
    return f ? (int)f->id : -1;
}

/* by the suffix, or (as nb-convert always took them) a --format name after the last dot: x.tif16 */
static int format_from_path(const char *path)
{
    const nb_format *f = nb_format_by_suffix(path);
    const char *dot = strrchr(path, '.'), *slash = strrchr(path, '/');
    if (!f && dot && (!slash || dot > slash)) f = nb_format_by_name(dot + 1);
    return f ? (int)f->id : -1;
}

/* --format's name of a format */
static const char *fmt_name(int id) { return nb_format_get(id)->name; }

/* ---- outputs held until the stream has ended cleanly ----------------------- */

typedef struct pending {
    char *tmp;   /* written, not yet in place */
    char *final;
} pending;

static pending *pend;
static int npend, cap_pend;
static char **written; /* every final name of this run */
static int nwritten, cap_written;

static int is_special(const char *path)
{
    struct stat st;
    return !strcmp(path, "-") || (stat(path, &st) == 0 && !S_ISREG(st.st_mode));
}

/* Expand a run of '#' into the 1-based frame number, zero-padded. */
static nb_status frame_path(const char *tmpl, long frame, char *out, size_t size)
{
    if (nb_frame_path(tmpl, frame, out, size) == 0) return NB_OK;
    const char *h = strchr(tmpl, '#');
    if (h && strchr(h + strspn(h, "#"), '#'))
        return nb_error_set(NB_ERR_USAGE, "'%s': only one run of '#' is allowed", tmpl);
    return nb_error_set(NB_ERR_USAGE, "'%s': the name is too long", tmpl);
}

/* The held outputs removed, the failure's message naming the file the user
 * named rather than its temporary (a writer's "cannot write") */
static void abort_pending(void)
{
    for (int i = 0; i < npend; i++) {
        nb_error_rename(pend[i].tmp, pend[i].final);
        unlink(pend[i].tmp);
        nb_temp_unregister(pend[i].tmp);
        free(pend[i].tmp);
        free(pend[i].final);
    }
    npend = 0;
}

static nb_status commit_pending(void)
{
    nb_status st = NB_OK;
    for (int i = 0; i < npend; i++) {
        if (!st && rename(pend[i].tmp, pend[i].final) != 0)
            st = nb_error_set(NB_ERR_IO, "cannot write '%s': %s", pend[i].final, strerror(errno));
        if (st) unlink(pend[i].tmp);
        nb_temp_unregister(pend[i].tmp);
        free(pend[i].tmp);
        free(pend[i].final);
    }
    npend = 0;
    return st;
}

/* Where to write `final` now: a hidden name beside it (renamed by
 * commit_pending) or, for special files, the file itself.  bytes: what the
 * file will hold at least, when known (its space is allocated now,
 * nb_preallocate), else 0. */
static nb_status claim_output(const char *final, unsigned long long bytes, char **target)
{
    for (int i = 0; i < nwritten; i++)
        if (!strcmp(written[i], final))
            return nb_error_set(NB_ERR_USAGE,
                                "'%s' would hold more than one image; put a '#' run in the name for the frame "
                                "number (e.g. img_####.cbf)",
                                final);
    if (nwritten == cap_written) {
        cap_written = cap_written ? 2 * cap_written : 16;
        written = realloc(written, (size_t)cap_written * sizeof *written);
        if (!written) return nb_error_set(NB_ERR_NOMEM, "out of memory");
    }
    written[nwritten++] = nb_xstrdup(final);
    if (is_special(final)) {
        *target = nb_xstrdup(final);
        return NB_OK;
    }
    /* the writer fills this file in place (nb_outfile_open) */
    char *tmp;
    int fd = nb_temp_beside(final, ".nbc", &tmp);
    if (fd < 0) return nb_error_set(NB_ERR_IO, "cannot write '%s': %s", final, strerror(errno));
    nb_preallocate(fd, bytes);
    close(fd);
    if (npend == cap_pend) {
        cap_pend = cap_pend ? 2 * cap_pend : 16;
        pend = realloc(pend, (size_t)cap_pend * sizeof *pend);
        if (!pend) return nb_error_set(NB_ERR_NOMEM, "out of memory");
    }
    pend[npend].tmp = tmp;
    pend[npend].final = nb_xstrdup(final);
    npend++;
    nb_temp_register(tmp);
    *target = nb_xstrdup(tmp);
    return NB_OK;
}

/* ---- writing one image ---------------------------------------------------- */

typedef struct frame {
    const nb_plan *plan;
    const nb_image_info *im;   /* the IMAGE record's keys */
    const float *photons;
    const int32_t *counts; /* NULL when the stream has none */
    int counts_bits;
    double counts_adc;
    long frame;
    int width, height;
    nb_stats stats;
    double int_scale, pgm_scale, adc;
} frame;

static void image_meta(const frame *fr, nb_image_meta *m)
{
    const nb_plan *p = fr->plan;
    memset(m, 0, sizeof *m);
    m->fpixels = fr->width;
    m->spixels = fr->height;
    m->pixel_size = p->pixel_size;
    m->distance = p->distance;
    m->close_distance = p->close_distance;
    m->wavelength = nb_frame_wavelength(p, fr->im);
    m->beam_f = p->Fbeam;
    m->beam_s = p->Sbeam;
    double start = fr->im->has.phi_start ? fr->im->phi_start : p->phi0;
    double range = fr->im->has.phi_range ? fr->im->phi_range : p->osc;
    m->osc_start = start * 180.0 / M_PI;
    m->osc_range = range * 180.0 / M_PI;
    m->exposure = p->exposure;
    m->count_cutoff = fr->counts ? (fr->counts_bits == 32 ? 2147483647.0 : 65535.0) : 65535.0;
    nb_stated_sensor sensor;
    nb_stated_sensor_of(p, &sensor);
    m->sensor_thickness = sensor.simulated ? p->detector_thick : 0.0;
    m->sensor_material = nb_material_name(sensor.material);
    m->gain = fr->counts && fr->im->has.counts_gain ? fr->im->counts_gain : 1.0;
    m->twotheta = p->twotheta * 180.0 / M_PI;
    m->frame = fr->frame;
    m->polarization = nb_polarization_fraction(p);
    nb_dials_image_geometry(p, m);
    m->command_line = p->command_line;
}

/* A simulated sensor whose attenuation is not the one DIALS will compute
 * from the material a CBF or NXmx file states (silicon's, when no
 * -detector_material named one): said once a run */
static void warn_sensor_mu(const char *path, const nb_plan *p)
{
    static int told;
    nb_stated_sensor s;
    nb_stated_sensor_of(p, &s);
    if (told || !s.simulated || (s.mu > 0 && fabs(s.mu - p->detector_mu) <= 0.01 * p->detector_mu)) return;
    told = 1;
    nb_warn("'%s': the simulated sensor's attenuation (%g /mm) is not %s's at %g A (%g /mm), which DIALS computes "
            "from the file: name the material with nb-geom -detector_material instead of -detector_abs",
            path, p->detector_mu * 1e-3, nb_material_name(s.material), p->lambda0 * 1e10, s.mu * 1e-3);
}

/* A CBF holds counts as a PILATUS counts them, from 0: the counts less
 * their ADC offset (dxtbx reads no pedestal from a miniCBF); the -1 of a
 * stacked image's empty columns stays.  A count below its offset (read-out
 * noise) stays negative: DIALS takes such pixels as untrusted, so say so. */
static void counts_from_zero(const int32_t *counts, size_t n, double adc, const char *path, int32_t *out)
{
    const int32_t off = (int32_t)lrint(adc);
    size_t below = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t v = counts[i];
        out[i] = v < 0 ? v : v - off;
        below += v >= 0 && v < off;
    }
    if (below)
        nb_warn("'%s': %zu pixels hold fewer counts than the ADC offset %d (read-out noise): negative in the CBF, "
                "where DIALS takes them as untrusted",
                path, below, (int)off);
}

static nb_status cbf_values(const int32_t *counts, size_t n, double adc, const char *path, int32_t **out)
{
    nb_status st = nb_alloc_large((void **)out, n, sizeof **out, "the CBF values");
    if (!st) counts_from_zero(counts, n, adc, path, *out);
    return st;
}

/* The reference's noiseless int image as int32 (for CBF and TIFF). */
static nb_status int_counts(const frame *fr, int32_t **out)
{
    size_t n = (size_t)fr->width * fr->height;
    nb_status st = nb_alloc_large((void **)out, n, sizeof **out, "the int image");
    if (st) return st;
    const nb_plan *p = fr->plan;
    nb_roi roi = {p->roi_xmin, p->roi_xmax, p->roi_ymin, p->roi_ymax};
    nb_int_image(fr->photons, fr->width, fr->height, roi, fr->int_scale, fr->adc, *out);
    return NB_OK;
}

static nb_status write_format(const out_request *o, const char *path, const char *final, const frame *fr);

/* An SMV file's header values for this frame */
static void smv_meta_for(const out_request *o, const frame *fr, double adc, nb_smv_meta *m)
{
    nb_image_meta meta;
    image_meta(fr, &meta);
    nb_smv_meta_from_plan(fr->plan, adc, o->smv_beam, m);
    /* a still's shot: its own wavelength; the counts' gain when not 1 */
    m->wavelength_A = meta.wavelength * 1e10;
    m->gain = meta.gain;
    if (fr->im->has.phi_start) {
        m->phi_deg = m->osc_start_deg = meta.osc_start;
        m->osc_range_deg = meta.osc_range;
    }
}

/* the reference's int-image scale (-scale, else 55000 / max) and ADC offset */
static double int_scale_for(const nb_plan *plan, const conv_opts *o, double max_I)
{
    return nb_int_scale(o->have_scale ? o->scale : plan->intfile_scale, max_I);
}
static double adc_for(const nb_plan *plan, const conv_opts *o) { return o->have_adc ? o->adc : plan->adc; }

/* ---- model.expt: the truth as a DIALS experiment list -------------------- */

/* The images model.expt names (dials_expt_write.h): the first output of the
 * same command that holds a frame whole, by its absolute name (as
 * dials.import writes it): a CBF or SMV of one panel (a file per frame), or
 * an NXmx file (every frame, every panel); else none, a model alone. */
static nb_status expt_images(const out_request *o, const conv_opts *all, const nb_plan *plan, nb_expt_images *img,
                             char *abs, size_t size)
{
    const out_request *q = NULL;
    for (int k = 0; k < all->nouts && !q; k++) {
        int f = all->outs[k].format;
        if (f == NB_FMT_NXMX || ((f == NB_FMT_CBF || f == NB_FMT_SMV) && nb_plan_npanels(plan) == 1)) q = &all->outs[k];
    }
    *img = (nb_expt_images){NB_EXPT_NO_IMAGES, NULL, 0};
    if (!q) return NB_OK;
    if (q->format != NB_FMT_NXMX && !strchr(q->path, '#') && plan->nframes > 1)
        return nb_error_set(NB_ERR_USAGE, "'%s': name the images with a '#' run for the frame number (e.g. "
                                          "img_###.cbf)",
                            q->path);
    if (nb_absolute_path(q->path, abs, size))
        return nb_error_set(NB_ERR_IO, "'%s': cannot name the images' directory: %s", o->path, strerror(errno));
    /* a CBF and NXmx count from 0 (counts_from_zero); an SMV keeps the offset */
    *img = (nb_expt_images){q->format == NB_FMT_NXMX ? NB_EXPT_ONE_FILE : NB_EXPT_FILE_PER_FRAME, abs,
                            q->format == NB_FMT_SMV};
    return NB_OK;
}

/* The frame into request q's model.expt, opened at the run's first frame
 * and written at its end (finish_expts): the counts the stream's (nb-noise's
 * offset, counter and gain) or the int image's (the -adc offset, 16 bits) */
static nb_status write_expt(const out_request *q, int k, const conv_opts *o, const frame *fr)
{
    nb_status st = NB_OK;
    if (!o->expts[k]) {
        char abs[2 * NB_PATH_MAX + 2];
        nb_expt_images img;
        if ((st = expt_images(q, o, fr->plan, &img, abs, sizeof abs))) return st;
        if ((st = nb_expt_open(&o->expts[k], q->path, &img))) return st;
        nb_info("writing %s", q->path);
    }
    nb_expt_counts c = {fr->counts ? fr->counts_adc : fr->adc,
                        fr->counts && fr->counts_bits == 32 ? 2147483647.0 : 65535.0,
                        fr->counts && fr->im->has.counts_gain ? fr->im->counts_gain : 1.0};
    return nb_expt_frame(o->expts[k], fr->plan, fr->frame, nb_frame_wavelength(fr->plan, fr->im), &c);
}

/* Every model.expt written into place (ok) or removed */
static nb_status finish_expts(conv_opts *o, int ok)
{
    nb_status st = NB_OK;
    for (int k = 0; k < o->nouts; k++) {
        if (!o->expts[k]) continue;
        if (ok && !st) st = nb_expt_commit(o->expts[k]);
        else nb_expt_abort(o->expts[k]);
        o->expts[k] = NULL;
    }
    return st;
}

/* XDS.INP or a CrystFEL .geom for the plan of this frame, written once (they
 * describe the whole series: shards joined with cat repeat the plan).  XDS
 * needs the images' name, a '#' run becoming '?': the first SMV or CBF
 * output of the same command. */
static nb_status write_sidecar(out_request *o, const conv_opts *all, const frame *fr)
{
    if (o->done) return NB_OK;
    char *target = NULL;
    nb_status st = NB_OK;
    int overload = fr->counts && fr->counts_bits == 32 ? 2147483647 : 65535;
    if (o->format == NB_FMT_XDS) {
        const out_request *img = NULL;
        for (int k = 0; k < all->nouts && !img; k++)
            if (all->outs[k].format == NB_FMT_CBF || all->outs[k].format == NB_FMT_SMV) img = &all->outs[k];
        if (!img)
            return nb_error_set(NB_ERR_USAGE, "'%s' needs the images' name: write them in the same command as CBF "
                                              "or SMV (e.g. -o img_###.cbf -o %s)",
                                o->path, o->path);
        const char *hash = strchr(img->path, '#');
        if (!hash && fr->plan->nframes > 1)
            return nb_error_set(NB_ERR_USAGE, "'%s': name the images with a '#' run for the frame number (e.g. "
                                              "img_###.cbf)",
                                img->path);
        char tmpl[NB_PATH_MAX];
        snprintf(tmpl, sizeof tmpl, "%s", img->path);
        for (char *c = tmpl; *c; c++)
            if (*c == '#') *c = '?';
        if ((st = claim_output(o->path, 0, &target))) return st;
        nb_info("writing %s", o->path);
        /* a CBF's counts start at 0 (cbf_values), so its overload is lower by the offset */
        if (img->format == NB_FMT_CBF) overload -= (int)lrint(fr->counts ? fr->counts_adc : fr->adc);
        st = nb_xds_inp_write(target, fr->plan, tmpl, img->format == NB_FMT_CBF ? NB_XDS_PILATUS : NB_XDS_ADSC,
                              overload);
    } else {
        if ((st = claim_output(o->path, 0, &target))) return st;
        nb_info("writing %s", o->path);
        st = nb_crystfel_geom_write(target, fr->plan, overload,
                                    fr->counts && fr->im->has.counts_gain ? fr->im->counts_gain : 1.0);
    }
    free(target);
    o->done = 1;
    return st;
}

static nb_status write_one(const out_request *o, const frame *fr)
{
    char final[NB_PATH_MAX], *target = NULL;
    nb_status st = frame_path(o->path, fr->frame, final, sizeof final);
    if (!st) st = claim_output(final, 0, &target);
    if (!st) {
        nb_info("writing %s", final);
        st = write_format(o, target, final, fr);
    }
    free(target);
    return st;
}

/* The file of panel i: a '#' run's name gets "p<i>_" before the run (the
 * frame number stays last, for DIALS's templates: img_p1_0001.cbf), any
 * other name "-p<i>" before its extension (img-p1.cbf). */
static void panel_path(const char *tmpl, int i, char *out, size_t size)
{
    const char *h = strchr(tmpl, '#'), *slash = strrchr(tmpl, '/');
    const char *dot = strrchr(tmpl, '.');
    if (dot && slash && dot < slash) dot = NULL;
    if (h) snprintf(out, size, "%.*sp%d_%s", (int)(h - tmpl), tmpl, i, h);
    else if (dot) snprintf(out, size, "%.*s-p%d%s", (int)(dot - tmpl), tmpl, i, dot);
    else snprintf(out, size, "%s-p%d", tmpl, i);
}

static nb_status rows_write_whole(const out_request *q, int k, const frame *fr);

/* The file of request k from a whole frame: raw float and SMV through the
 * row writer (rows_write_whole), the other formats at once. */
static nb_status write_file(const out_request *q, int k, const frame *fr)
{
    return q->format == NB_FMT_BIN || q->format == NB_FMT_SMV ? rows_write_whole(q, k, fr) : write_one(q, fr);
}

/* Panel i of a frame of several panels as a one-panel frame pf, whose plan
 * is view (panel i's geometry; the frame's common scales) */
static void panel_frame(const frame *fr, int i, nb_plan *view, frame *pf)
{
    size_t off;
    nb_plan_panel_view(fr->plan, i, view);
    nb_plan_panel_dims(fr->plan, i, &view->fpixels, &view->spixels, &off);
    *pf = *fr;
    pf->plan = view;
    pf->width = view->fpixels, pf->height = view->spixels;
    pf->photons = fr->photons + off;
    if (fr->counts) pf->counts = fr->counts + off;
}

/* A detector of several panels: a raw float file holds them all, one after
 * another; a one-panel format is one file per panel (panel_path), each
 * with its panel's geometry and the image's common scales. */
static nb_status write_panels(const out_request *o, int k, const frame *fr)
{
    const nb_plan *plan = fr->plan;
    if (o->format == NB_FMT_BIN) {
        frame all = *fr;
        all.width = (int)nb_plan_total_pixels(plan), all.height = 1;
        return write_file(o, k, &all);
    }
    nb_status st = NB_OK;
    for (int i = 0; i < nb_plan_npanels(plan) && !st; i++) {
        nb_plan view;
        char tmpl[NB_PATH_MAX];
        frame pf;
        panel_frame(fr, i, &view, &pf);
        panel_path(o->path, i, tmpl, sizeof tmpl);
        out_request po = *o;
        po.path = tmpl;
        st = write_file(&po, k, &pf);
    }
    return st;
}

/* Whether request q is written as one stacked image of the panels: a CBF or
 * SMV beside an XDS.INP (XDS reads one file per frame; the stacking rule is
 * nb_xds_stack_row's, which the XDS.INP's SEGMENT= blocks describe). */
static int stacks_panels(const out_request *q, const out_request *list, int n)
{
    if (q->format != NB_FMT_CBF && q->format != NB_FMT_SMV) return 0;
    for (int k = 0; k < n; k++)
        if (list[k].format == NB_FMT_XDS) return 1;
    return 0;
}

/* The panels of fr as one image (stacks_panels): the counts each panel's
 * file would hold (the stream's, else its int image with its own ROI), row
 * after row; -1 right of a narrower panel, which XDS takes as no data (and
 * SMV as 0).  The header's geometry is panel 0's. */
static nb_status write_stacked(const out_request *o, int k, const frame *fr)
{
    const nb_plan *plan = fr->plan;
    int nx, ny;
    nb_status st = nb_xds_stack_dims(plan, &nx, &ny);
    if (st) return nb_error_prefix(st, "'%s'", o->path);
    size_t n = (size_t)nx * ny;
    float *photons = NULL;
    int32_t *counts = NULL;
    if ((st = nb_alloc_large((void **)&photons, n, sizeof *photons, "the stacked image")) ||
        (st = nb_alloc_large((void **)&counts, n, sizeof *counts, "the stacked counts")))
        goto done;
    for (size_t j = 0; j < n; j++) photons[j] = 0.0f, counts[j] = -1;
    for (int i = 0; i < nb_plan_npanels(plan) && !st; i++) {
        nb_plan view;
        frame pf;
        int32_t *ints = NULL;
        panel_frame(fr, i, &view, &pf);
        if (!fr->counts && (st = int_counts(&pf, &ints))) break;
        const int32_t *src = fr->counts ? pf.counts : ints;
        size_t row0 = (size_t)nb_xds_stack_row(plan, i);
        for (int y = 0; y < pf.height; y++) {
            size_t at = (row0 + (size_t)y) * (size_t)nx, from = (size_t)y * (size_t)pf.width;
            memcpy(photons + at, pf.photons + from, (size_t)pf.width * sizeof *photons);
            memcpy(counts + at, src + from, (size_t)pf.width * sizeof *counts);
        }
        free(ints);
    }
    if (!st) {
        nb_plan view;
        nb_plan_panel_view(plan, 0, &view);
        view.fpixels = nx, view.spixels = ny;
        view.roi_xmin = 0, view.roi_xmax = nx - 1, view.roi_ymin = 0, view.roi_ymax = ny - 1;
        view.mask = NULL;
        frame sf = *fr;
        sf.plan = &view;
        sf.width = nx, sf.height = ny;
        sf.photons = photons, sf.counts = counts;
        /* without the stream's counts, these are the int image's: 16 bits over the ADC offset */
        if (!fr->counts) sf.counts_bits = 16, sf.counts_adc = fr->adc;
        out_request so = *o;
        so.source = SRC_COUNTS;
        st = write_file(&so, k, &sf);
    }
done:
    free(photons);
    free(counts);
    return st;
}

/* Whether request o takes the frame's detector counts (an error when it must
 * and the stream has none) */
static nb_status takes_counts(const out_request *o, const frame *fr, int *use_counts)
{
    *use_counts = o->source == SRC_COUNTS || (o->source == SRC_AUTO && fr->counts != NULL);
    if (o->source == SRC_COUNTS && !fr->counts)
        return nb_error_set(NB_ERR_USAGE, "'%s' needs detector counts but the stream has none: put nb-noise before "
                                          "nb-convert",
                            o->path);
    return NB_OK;
}

/* The PNG preview: of the counts less their ADC offset (so that the
 * background shows the noise a detector would, and -1 gaps stay black), or
 * of the photons. */
static nb_status write_png(const char *path, const frame *fr, int use_counts)
{
    if (!use_counts) return nb_png_write_preview(path, fr->photons, fr->width, fr->height, 0.0);
    size_t n = (size_t)fr->width * fr->height;
    float *v;
    nb_status st = nb_alloc_large((void **)&v, n, sizeof *v, "the PNG preview");
    if (st) return st;
    for (size_t i = 0; i < n; i++) v[i] = (float)((double)fr->counts[i] - fr->counts_adc);
    st = nb_png_write_preview(path, v, fr->width, fr->height, 0.0);
    free(v);
    return st;
}

static nb_status write_format(const out_request *o, const char *path, const char *final, const frame *fr)
{
    const nb_plan *p = fr->plan;
    nb_roi roi = {p->roi_xmin, p->roi_xmax, p->roi_ymin, p->roi_ymax};
    size_t n = (size_t)fr->width * fr->height;
    nb_image_meta meta;
    nb_status st = NB_OK;
    image_meta(fr, &meta);
    meta.name = final;

    int use_counts;
    if ((st = takes_counts(o, fr, &use_counts))) return st;
    int32_t *ints = NULL;
    const int32_t *counts = NULL;
    int bits = 16;
    int is_int = o->format == NB_FMT_CBF || o->format == NB_FMT_TIF16 || o->format == NB_FMT_TIF32 ||
                 (o->format == NB_FMT_TIF && use_counts);
    if (is_int) {
        if (use_counts) {
            counts = fr->counts;
            bits = fr->counts_bits;
        } else {
            if ((st = int_counts(fr, &ints))) return st;
            counts = ints;
            nb_info("intfile_scale = %g", fr->int_scale);
        }
    }
    nb_info("  %s, %s", fmt_name(o->format),
            (is_int || o->format == NB_FMT_PNG) && use_counts ? "detector counts" : is_int ? "scaled photons" : "photons");
    switch (o->format) {
    case NB_FMT_CBF: {
        /* the counts' own offset, or the int image's (-adc) */
        double adc = use_counts ? fr->counts_adc : fr->adc;
        int32_t *values;
        if ((st = cbf_values(counts, n, adc, final, &values))) break;
        meta.count_cutoff = (bits == 32 ? 2147483647.0 : 65535.0) - lrint(adc);
        /* a sensor: the miniCBF alone, which dxtbx reads with the sensor's
         * parallax but polarization 0.999 (cbf.h); said once a run */
        static int told_sensor;
        if (meta.sensor_thickness > 0) warn_sensor_mu(final, p);
        if (meta.lab && meta.sensor_thickness > 0) {
            meta.lab = 0;
            if (!told_sensor) {
                told_sensor = 1;
                nb_warn("'%s': with a sensor thickness the CBF is a miniCBF, from which DIALS takes polarization "
                        "0.999: give it 'dials.import ... polarization_fraction=%g' or read -o model.expt",
                        final, meta.polarization);
            }
        }
        st = nb_cbf_write(path, values, &meta);
        free(values);
        break;
    }
    case NB_FMT_TIF:
        if (use_counts) st = bits == 32 ? nb_tiff_write_u32(path, counts, &meta) : nb_tiff_write_u16(path, counts, &meta);
        else st = nb_tiff_write_f32(path, fr->photons, &meta);
        break;
    case NB_FMT_TIF_FLOAT: st = nb_tiff_write_f32(path, fr->photons, &meta); break;
    case NB_FMT_TIF16: st = nb_tiff_write_u16(path, counts, &meta); break;
    case NB_FMT_TIF32: st = nb_tiff_write_u32(path, counts, &meta); break;
    case NB_FMT_PGM: {
        uint8_t *bytes;
        if ((st = nb_calloc((void **)&bytes, n, 1, "the PGM image"))) break;
        nb_pgm_bytes(fr->photons, fr->width, fr->height, roi, fr->pgm_scale, bytes);
        nb_info("pgm_scale = %g", fr->pgm_scale);
        st = nb_pgm_write(path, bytes, fr->width, fr->height, fr->pgm_scale);
        free(bytes);
        break;
    }
    case NB_FMT_PNG: st = write_png(path, fr, use_counts); break;
    default: st = nb_error_set(NB_ERR_USAGE, "'%s': format %s cannot be written here", o->path, fmt_name(o->format));
    }
    free(ints);
    return st;
}

/* ---- NXmx: every frame into one file ------------------------------------------ */

/* The frame's counts as an NXmx file holds them (every panel, one after
 * another): as a CBF's, from 0 (cbf_values: dxtbx's NXmx reader has no
 * pedestal either), the stream's counts or else the int image; *saturation
 * the counter's top less the offset. */
static int32_t *nxmx_buf; /* the frame's counts, kept from frame to frame: fresh pages cost more than the copy */
static size_t nxmx_cap;

static nb_status nxmx_counts(const frame *fr, const char *path, int32_t **out, double *saturation)
{
    const nb_plan *p = fr->plan;
    nb_status st = NB_OK;
    if (nxmx_cap < nb_plan_total_pixels(p)) {
        free(nxmx_buf);
        nxmx_buf = NULL, nxmx_cap = 0;
        if (!(st = nb_alloc_large((void **)&nxmx_buf, nb_plan_total_pixels(p), sizeof *nxmx_buf, "the NXmx frame")))
            nxmx_cap = nb_plan_total_pixels(p);
    }
    *out = nxmx_buf;
    double adc = fr->counts ? fr->counts_adc : fr->adc;
    *saturation = (fr->counts && fr->counts_bits == 32 ? 2147483647.0 : 65535.0) - lrint(adc);
    for (int i = 0; i < nb_plan_npanels(p) && !st; i++) {
        nb_plan view;
        frame pf;
        int32_t *ints = NULL;
        size_t off, n;
        panel_frame(fr, i, &view, &pf);
        nb_plan_panel_dims(p, i, NULL, NULL, &off);
        n = (size_t)pf.width * pf.height;
        if (!fr->counts) st = int_counts(&pf, &ints);
        if (!st) counts_from_zero(fr->counts ? pf.counts : ints, n, adc, path, *out + off);
        free(ints);
    }
    return st;
}

/* Frame fr into request q's NXmx file, opened by the first frame */
static nb_status write_nxmx(const out_request *q, nb_nxmx **file, const conv_opts *o, const frame *fr)
{
    int32_t *counts = NULL;
    nb_nxmx_setup setup = {o->photons ? NB_NXMX_PHOTONS : NB_NXMX_COUNTS, o->compression, 0.0,
                           fr->counts && fr->im->has.counts_gain ? fr->im->counts_gain : 1.0};
    nb_status st = o->photons ? NB_OK : nxmx_counts(fr, q->path, &counts, &setup.saturation);
    if (!st && !*file) {
        nb_info("writing %s (NXmx, %s)", q->path, o->photons ? "float32 photons" : "int32 counts from 0");
        warn_sensor_mu(q->path, fr->plan);
        if (!o->photons && !fr->counts) nb_info("intfile_scale = %g", fr->int_scale);
        st = nb_nxmx_open(file, q->path, fr->plan, &setup);
    }
    if (!st) {
        nb_image_meta m;
        image_meta(fr, &m);
        nb_nxmx_frame f = {fr->frame, m.osc_start, m.osc_range, m.wavelength, fr->im->has.noise_seed,
                           fr->im->noise_seed};
        st = nb_nxmx_put(*file, fr->plan, o->photons ? (const void *)fr->photons : (const void *)counts, &f);
    }
    return st;
}

/* At the end of the stream: every NXmx file finished and renamed into place
 * (ok), or removed */
static nb_status nxmx_finish(conv_opts *o, int ok)
{
    nb_status st = NB_OK;
    for (int k = 0; k < o->nouts; k++) {
        if (!o->nxmx[k]) continue;
        if (ok && !st) st = nb_nxmx_close(o->nxmx[k]);
        else nb_nxmx_abort(o->nxmx[k]);
        o->nxmx[k] = NULL;
    }
    free(nxmx_buf);
    nxmx_buf = NULL, nxmx_cap = 0;
    return st;
}

/* --join: the -o files (an NXmx master, a model.expt) from the shards' files
 * of the same kinds; no stream read.  With both, the joined model.expt names
 * the master's frames (dials_expt_join.h). */
static nb_status join_parts(const conv_opts *o, const nb_std_opts *std)
{
    const char *master = NULL, *expt = NULL;
    const char **nx = calloc((size_t)o->njoins + 1, sizeof *nx), **ex = calloc((size_t)o->njoins + 1, sizeof *ex);
    int nnx = 0, nex = 0;
    nb_status st = nx && ex ? NB_OK : nb_error_set(NB_ERR_NOMEM, "out of memory");
    for (int k = 0; k < o->njoins && !st; k++) {
        if (o->join_nxmx[k] || format_from_path(o->joins[k]) == NB_FMT_NXMX) nx[nnx++] = o->joins[k];
        else if (format_from_path(o->joins[k]) == NB_FMT_EXPT) ex[nex++] = o->joins[k];
        else st = nb_error_set(NB_ERR_USAGE, "--join '%s': not an NXmx (.nxs, .h5) or experiment list (.expt) file",
                               o->joins[k]);
    }
    for (int k = 0; k < o->nouts && !st; k++) {
        const out_request *q = &o->outs[k];
        const char **slot = q->format == NB_FMT_NXMX ? &master : q->format == NB_FMT_EXPT ? &expt : NULL;
        if (!slot || *slot)
            st = nb_error_set(NB_ERR_USAGE, "--join writes one NXmx master and one experiment list (-o MASTER.nxs, "
                                            "-o model.expt), not '%s'",
                              q->path);
        else *slot = q->path;
    }
    if (!st && !master && !expt) st = nb_error_set(NB_ERR_USAGE, "--join needs -o MASTER.nxs or -o model.expt");
    for (int k = 0; k < o->njoins && !st; k++) {
        char a[NB_PATH_MAX], b[NB_PATH_MAX];
        for (int i = 0; i < o->nouts && !st; i++)
            if (realpath(o->joins[k], a) && realpath(o->outs[i].path, b) && !strcmp(a, b))
                st = nb_error_set(NB_ERR_USAGE, "'%s' is both a part to join and the output", o->outs[i].path);
    }
    if (!st && (master ? !nnx : nnx))
        st = nb_error_set(NB_ERR_USAGE, master ? "-o '%s' joins NXmx parts: give them with --join PART.nxs"
                                               : "--join '%s': an NXmx part needs -o MASTER.nxs",
                          master ? master : nx[0]);
    if (!st && (expt ? !nex : nex))
        st = nb_error_set(NB_ERR_USAGE, expt ? "-o '%s' joins experiment lists: give them with --join PART.expt"
                                             : "--join '%s': an experiment list needs -o model.expt",
                          expt ? expt : ex[0]);
    if (!st && strcmp(std->input, "-"))
        st = nb_error_set(NB_ERR_USAGE, "--join reads no stream ('%s'): name each part with --join", std->input);
    if (!st && master) {
        nb_info("writing %s (NXmx master of %d parts)", master, nnx);
        st = nb_nxmx_master(master, nx, nnx);
    }
    if (!st && expt) {
        nb_info("writing %s (experiment list of %d parts)", expt, nex);
        st = nb_expt_join(expt, ex, nex, master, nx, nnx);
        /* the master and the list are one result: not one without the other */
        if (st && master) unlink(master);
    }
    free(nx);
    free(ex);
    return st;
}

/* A pixel that is not a finite number, named with its frame (counted from 1,
 * as the files' numbers: of a series, one frame of many may be wrong) and,
 * on a detector of panels (plan not NULL), its panel and its place there */
static nb_status nonfinite_error(const nb_plan *plan, long frame, size_t bad, size_t width)
{
    const int npanels = plan ? nb_plan_npanels(plan) : 1;
    for (int i = 0; i < npanels && npanels > 1; i++) {
        int fp, sp;
        size_t off;
        nb_plan_panel_dims(plan, i, &fp, &sp, &off);
        if (bad < off || bad - off >= (size_t)fp * (size_t)sp) continue;
        const size_t at = bad - off;
        return nb_error_set(NB_ERR_DATA,
                            "IMAGE record of frame %ld, panel %d: pixel %zu (fast %zu, slow %zu) is not a finite number",
                            frame + 1, i, at, at % (size_t)fp, at / (size_t)fp);
    }
    return nb_error_set(NB_ERR_DATA, "IMAGE record of frame %ld: pixel %zu (fast %zu, slow %zu) is not a finite number",
                        frame + 1, bad, bad % width, bad / width);
}

/* The frame of an IMAGE record (its keys in im, checked against the plan
 * already) whose payload is there. */
static nb_status prepare_frame(const nb_plan *plan, const nb_record *rec, const nb_image_info *im,
                               const conv_opts *o, int checked_finite, frame *fr)
{
    const float *px;
    nb_status st;
    memset(fr, 0, sizeof *fr);
    fr->plan = plan;
    fr->im = im;
    if ((st = nb_image_pixels(rec, im, &px, NULL))) return st;
    fr->width = im->fpixels;
    fr->height = im->spixels;
    fr->photons = px;
    size_t n = im->npixels, bad = checked_finite ? n : nb_first_nonfinite(fr->photons, n);
    if (bad < n) return nonfinite_error(plan, im->frame, bad, (size_t)im->fpixels);
    fr->frame = im->frame;
    if (im->has_counts) {
        if ((st = nb_image_counts(rec, im, &fr->counts, NULL))) return st;
        fr->counts_bits = im->counts_bits;
        fr->counts_adc = im->has.counts_adc ? im->counts_adc : plan->adc;
    }
    /* the reference's scales: from the image statistics (recomputed when a
     * stream carries none, e.g. an imported image) */
    nb_roi roi = {plan->roi_xmin, plan->roi_xmax, plan->roi_ymin, plan->roi_ymax};
    if (im->has.max_I && im->has.rmsd) {
        fr->stats.max_I = im->max_I;
        fr->stats.rmsd = im->rmsd;
    } else if (im->npanels > 1) {
        /* over every pixel of every panel, as one row */
        nb_roi all = {0, (int)n, 0, 1};
        if ((st = nb_image_stats(fr->photons, (int)n, 1, all, NULL, &fr->stats))) return st;
    } else {
        if ((st = nb_image_stats(fr->photons, fr->width, fr->height, roi, plan->mask, &fr->stats))) return st;
    }
    fr->adc = adc_for(plan, o);
    fr->int_scale = int_scale_for(plan, o, fr->stats.max_I);
    fr->pgm_scale = nb_pgm_scale(o->have_pgmscale ? o->pgmscale : plan->pgm_scale, fr->int_scale, fr->stats.rmsd);
    return NB_OK;
}

/* The files the plan asked for, when no -o was given. */
static int plan_requests(const nb_plan *p, const conv_opts *o, out_request *req)
{
    int n = 0;
    if (p->floatfile) req[n++] = (out_request){p->floatfile, NB_FMT_BIN, SRC_AUTO, 0, 1, 0};
    if (p->intfile) req[n++] = (out_request){p->intfile, NB_FMT_SMV, SRC_INT, NB_SMV_BEAM_REFERENCE, 1, 0};
    if (p->noisefile && p->calculate_noise) req[n++] = (out_request){p->noisefile, NB_FMT_SMV, SRC_COUNTS, NB_SMV_BEAM_REFERENCE, 1, 0};
    if (p->pgmfile && p->write_pgm && !o->nopgm) req[n++] = (out_request){p->pgmfile, NB_FMT_PGM, SRC_AUTO, 0, 1, 0};
    return n;
}

/* The requests for an image: the -o list, else what the plan asked for. */
static out_request *frame_requests(const nb_plan *plan, const conv_opts *o, out_request req[8], int *n)
{
    if (o->nouts) {
        *n = o->nouts;
        return o->outs;
    }
    *n = plan_requests(plan, o, req);
    return req;
}

/* ---- row files: raw float and SMV images, a band of rows at a time -------- */
/* Raw float files and SMV images need nothing but the image's rows in order,
 * and one path writes them: pieces of whole rows, each shown once (the
 * SMV's 16-bit values of scaled photons made in a prepare step, on the
 * thread that reads the stream when there is a second one), then committed.
 * The pieces are those of the IMAGE record's payload as it arrives (the
 * stream reader's consumer, below), so that writing overlaps the transfer
 * instead of following it; or, for the files that could not start then (an
 * SMV of the counts, which follow the pixels in the payload; an image
 * without MAX_I, whose scale needs every pixel), the same pieces cut from the
 * whole image afterwards.  The files are the held temporaries of
 * claim_output: a record that then fails its CRC, or a pixel that is not
 * finite, removes them with the rest. */
enum { ROWS_MAX = 16 };
enum row_kind { ROW_FLOAT, ROW_SMV_SCALED, ROW_SMV_COUNTS };

typedef struct row_out {
    int req;               /* index in the request list */
    int kind;              /* enum row_kind */
    nb_outfile *bin;       /* ROW_FLOAT */
    nb_smv_writer *smv;    /* the SMV kinds */
} row_out;

typedef struct row_files {
    int width, height, rows_done;
    long frame;            /* the image's, for messages */
    uint64_t pix_off;      /* the pixels' offset in the pieces' payload */
    nb_roi roi;
    double int_scale, adc; /* of ROW_SMV_SCALED */
    const int32_t *counts; /* of ROW_SMV_COUNTS: the whole image's */
    int scaled;            /* a ROW_SMV_SCALED output is among them */
    /* per slot (nb_payload_piece.slot): the piece's 16-bit values, its first
     * pixel that is not finite (its pixel count when none, SIZE_MAX when not
     * converted), the errno of a failed SMV write and the output it failed on */
    uint16_t *slot_block;  /* the slots' values, one block */
    uint16_t *slot_ints[NB_READER_SLOTS];
    size_t slot_cap;       /* values each holds */
    size_t slot_bad[NB_READER_SLOTS];
    int slot_werr[NB_READER_SLOTS], slot_wout[NB_READER_SLOTS];
    int prepare_failed;    /* a prepared piece failed: no more SMV writes */
    row_out outs[ROWS_MAX];
    int nouts;
} row_files;

/* Start the rows of an image (width x height, its pixels at pix_off) */
static void rows_start(row_files *R, const frame *fr, uint64_t pix_off, double int_scale, double adc)
{
    const nb_plan *p = fr->plan;
    R->width = fr->width, R->height = fr->height, R->rows_done = 0;
    R->frame = fr->frame;
    R->pix_off = pix_off;
    R->roi = (nb_roi){p->roi_xmin, p->roi_xmax, p->roi_ymin, p->roi_ymax};
    R->int_scale = int_scale, R->adc = adc;
    R->counts = fr->counts;
    R->scaled = R->prepare_failed = 0;
    R->nouts = 0;
}

static void rows_abort(row_files *R)
{
    for (int i = 0; i < R->nouts; i++) {
        if (R->outs[i].bin) nb_outfile_abort(R->outs[i].bin);
        if (R->outs[i].smv) nb_smv_writer_abort(R->outs[i].smv);
    }
    R->nouts = 0;
}

static void rows_free(row_files *R)
{
    rows_abort(R);
    free(R->slot_block);
    R->slot_block = NULL, R->slot_cap = 0;
}

/* Open request q (number k) for this frame as a row file of the given kind */
static nb_status rows_open(row_files *R, const out_request *q, int k, const frame *fr, int kind)
{
    char final[NB_PATH_MAX], *target = NULL;
    if (R->nouts == ROWS_MAX) return nb_error_set(NB_ERR_USAGE, "more than %d raw float and SMV outputs", ROWS_MAX);
    row_out *ro = &R->outs[R->nouts];
    memset(ro, 0, sizeof *ro);
    ro->req = k, ro->kind = kind;
    /* the bytes it will hold at least: an SMV header is 512 or more */
    const int bits = kind == ROW_FLOAT ? 32 : kind == ROW_SMV_SCALED ? 16 : fr->counts_bits;
    const unsigned long long pixels = (unsigned long long)fr->width * (unsigned long long)fr->height;
    const unsigned long long bytes = (kind == ROW_FLOAT ? 0 : 512) + pixels * (unsigned)(bits / 8);
    nb_status st = frame_path(q->path, fr->frame, final, sizeof final);
    if (!st) st = claim_output(final, bytes, &target);
    if (st) return st;
    nb_info("writing %s", final);
    if (kind == ROW_FLOAT) {
        nb_info("  %s, photons", fmt_name(q->format));
        st = nb_rawfloat_writer_open(&ro->bin, target);
    } else {
        if (kind == ROW_SMV_SCALED) nb_info("intfile_scale = %g", R->int_scale);
        nb_info("  %s, %s", fmt_name(q->format), kind == ROW_SMV_SCALED ? "scaled photons" : "detector counts");
        nb_smv_meta m;
        smv_meta_for(q, fr, kind == ROW_SMV_SCALED ? R->adc : fr->counts_adc, &m);
        st = nb_smv_writer_open(&ro->smv, target, &m, kind == ROW_SMV_SCALED ? 16 : fr->counts_bits);
    }
    free(target);
    if (st) return st;
    R->nouts++;
    R->scaled |= kind == ROW_SMV_SCALED;
    return NB_OK;
}

/* The slots' buffers, for pieces of up to piece_bytes */
static nb_status rows_slots(row_files *R, size_t piece_bytes)
{
    size_t cap = piece_bytes / sizeof(float);
    if (R->slot_cap >= cap) return NB_OK;
    free(R->slot_block);
    R->slot_block = NULL, R->slot_cap = 0;
    nb_status st = nb_alloc_large((void **)&R->slot_block, NB_READER_SLOTS * cap, sizeof(uint16_t), "int rows");
    if (st) return st;
    /* faulted in at once: 512 separate page faults cost the reading thread ~5 ms */
    nb_prefault(R->slot_block, NB_READER_SLOTS * cap * sizeof(uint16_t));
    for (int k = 0; k < NB_READER_SLOTS; k++) R->slot_ints[k] = R->slot_block + (size_t)k * cap;
    R->slot_cap = cap;
    return NB_OK;
}

/* The image rows in a piece: 0 when it holds none (bytes before or after
 * the pixels), -1 when it does not start on a row, else 1 with the first
 * row and the count. */
static int piece_rows(const row_files *R, const nb_payload_piece *pc, int *y0_out, int *ny_out)
{
    const size_t row = (size_t)R->width * sizeof(float);
    if (pc->offset < R->pix_off) return 0;
    uint64_t y0 = (pc->offset - R->pix_off) / row, ny = pc->len / row;
    if (y0 >= (uint64_t)R->height) return 0;
    if ((pc->offset - R->pix_off) % row) return -1;
    if (ny > (uint64_t)R->height - y0) ny = (uint64_t)R->height - y0;
    *y0_out = (int)y0, *ny_out = (int)ny;
    return 1;
}

/* The prepare step: a piece's 16-bit values of scaled photons (and the
 * finite check), written to the scaled SMV files; on the reading thread
 * when there is a second one, beside rows_piece on an earlier piece, so
 * errors are left in the slot for rows_piece to report. */
static void rows_prepare(row_files *R, const nb_payload_piece *pc)
{
    int y0, ny;
    const int slot = pc->slot;
    R->slot_bad[slot] = SIZE_MAX;
    R->slot_werr[slot] = 0;
    if (!R->scaled || piece_rows(R, pc, &y0, &ny) != 1 || (size_t)ny * (size_t)R->width > R->slot_cap) return;
    const size_t n = (size_t)ny * (size_t)R->width;
    R->slot_bad[slot] = nb_int16_image_rows_checked((const float *)(const void *)pc->data, R->width, y0, ny, R->roi,
                                                    R->int_scale, R->adc, R->slot_ints[slot]);
    if (R->slot_bad[slot] < n || R->prepare_failed) return;
    for (int i = 0; i < R->nouts && !R->slot_werr[slot]; i++)
        if (R->outs[i].kind == ROW_SMV_SCALED) {
            R->slot_werr[slot] = nb_smv_writer_put_u16_errno(R->outs[i].smv, R->slot_ints[slot], n);
            R->slot_wout[slot] = i;
        }
    R->prepare_failed = R->slot_werr[slot] != 0;
}

/* A piece after its prepare step: its rows checked (finite, in order), then
 * into the raw float files and, from the counts, the SMV files of counts. */
static nb_status rows_piece(row_files *R, const nb_payload_piece *pc)
{
    int y0, ny;
    int has = piece_rows(R, pc, &y0, &ny);
    if (has == 0) return NB_OK;
    if (has < 0 || y0 != R->rows_done)
        return nb_error_set(NB_ERR_DATA, "internal error: a piece of the image out of step (row %d, expected %d)",
                            has < 0 ? -1 : y0, R->rows_done);
    const float *rows = (const float *)(const void *)pc->data;
    const size_t w = (size_t)R->width, n = (size_t)ny * w;
    size_t bad = R->scaled ? R->slot_bad[pc->slot] : nb_first_nonfinite(rows, n);
    if (bad == SIZE_MAX) return nb_error_set(NB_ERR_DATA, "internal error: rows %d to %d were not converted", y0, y0 + ny - 1);
    if (bad < n) return nonfinite_error(NULL, R->frame, (size_t)y0 * w + bad, w); /* one panel */
    if (R->scaled && R->slot_werr[pc->slot])
        return nb_error_set(NB_ERR_IO, "cannot write '%s': %s", nb_smv_writer_path(R->outs[R->slot_wout[pc->slot]].smv),
                            strerror(R->slot_werr[pc->slot]));
    R->rows_done = y0 + ny;
    nb_status st = NB_OK;
    for (int i = 0; i < R->nouts && !st; i++) {
        if (R->outs[i].kind == ROW_FLOAT) st = nb_rawfloat_writer_put(R->outs[i].bin, rows, n);
        if (R->outs[i].kind == ROW_SMV_COUNTS) st = nb_smv_writer_put(R->outs[i].smv, R->counts + (size_t)y0 * w, n);
    }
    return st;
}

/* After the whole image: whether request k is a row file here; if so it is
 * committed (renamed with the others when the stream ends). */
static nb_status rows_finish(row_files *R, int k, int *was_row_file)
{
    *was_row_file = 0;
    for (int i = 0; i < R->nouts; i++) {
        row_out *ro = &R->outs[i];
        if (ro->req != k || (!ro->bin && !ro->smv)) continue;
        *was_row_file = 1;
        nb_status st = ro->bin ? nb_outfile_commit(ro->bin) : nb_smv_writer_close(ro->smv);
        ro->bin = NULL, ro->smv = NULL;
        return st;
    }
    return NB_OK;
}

/* The rows of an image of the given width in a piece: about 1 MiB of them,
 * one row at least */
static int rows_per_piece(int width)
{
    const size_t row = (size_t)width * sizeof(float), piece = row > ((size_t)1 << 20) ? row : (size_t)1 << 20;
    return (int)(piece / row);
}

/* Every row of fr into R's open files, in the pieces the stream's reader
 * would have shown, each prepared in slot 0 (rows_slots, or a buffer of
 * rows_per_piece rows' values lent to it) */
static nb_status rows_write_all(row_files *R, const frame *fr)
{
    const size_t row = (size_t)fr->width * sizeof(float);
    const int per_piece = rows_per_piece(fr->width);
    nb_status st = NB_OK;
    for (int y0 = 0; y0 < fr->height && !st; y0 += per_piece) {
        int ny = fr->height - y0 < per_piece ? fr->height - y0 : per_piece;
        nb_payload_piece pc = {(const unsigned char *)(fr->photons + (size_t)y0 * fr->width), (uint64_t)y0 * row,
                               (size_t)ny * row, 0};
        rows_prepare(R, &pc);
        st = rows_piece(R, &pc);
    }
    return st;
}

/* The row kind that writes request q for fr (a raw float or SMV file) */
static nb_status row_kind_of(const out_request *q, const frame *fr, int *kind)
{
    int use_counts = 0;
    nb_status st = q->format == NB_FMT_SMV ? takes_counts(q, fr, &use_counts) : NB_OK;
    *kind = q->format == NB_FMT_BIN ? ROW_FLOAT : use_counts ? ROW_SMV_COUNTS : ROW_SMV_SCALED;
    return st;
}

/* Request q (number k) as a row file from the whole image of fr, in the
 * pieces the stream's reader would have shown. */
static nb_status rows_write_whole(const out_request *q, int k, const frame *fr)
{
    row_files R;
    memset(&R, 0, sizeof R);
    rows_start(&R, fr, 0, fr->int_scale, fr->adc);
    int kind, was;
    nb_status st = row_kind_of(q, fr, &kind);
    if (!st) st = rows_open(&R, q, k, fr, kind);
    if (!st && R.scaled) st = rows_slots(&R, (size_t)rows_per_piece(fr->width) * fr->width * sizeof(float));
    if (!st) st = rows_write_all(&R, fr);
    if (!st) st = rows_finish(&R, k, &was);
    rows_free(&R);
    return st;
}

/* ---- a series' frames written side by side --------------------------------- */
/* A series whose frames go to raw float and SMV files only is written
 * several frames at a time: a file is filled by one thread at a time (the
 * kernel takes its pages a writer at a time), but files of different frames
 * fill side by side (100 frames of 1024^2 to tmpfs: 176 ms on one thread, 89
 * on two).  The main thread reads the stream, opens each frame's files (so
 * that the -v lines stay in frame order) and hands the frame over with its
 * record; a worker writes the rows and closes the files, which go into
 * place at the segment's end as before.  A failure is the run's in frame
 * order (nb_pool: workers take the frames in order, so every frame before a
 * failing one is written to its end, and none not yet taken is started). */
#define POOL_MAX_BYTES ((size_t)512 << 20) /* of frames held at once */

typedef struct pool_job {
    nb_pool_job base;       /* the pool's part: first */
    nb_record rec;          /* the IMAGE record, the job's own */
    nb_image_info im;
    frame fr;
    row_files rows;         /* its files, open */
} pool_job;

typedef struct frame_pool {
    nb_pool pool;           /* its workers: none when none (every frame written on the main thread) */
    nb_reader *reader;      /* the stream's, which takes the payload buffers back */
} frame_pool;

/* On the main thread: the files still open removed, the record's payload
 * buffer back to the reader */
static void pool_job_release(nb_pool_job *base, void *ctx)
{
    frame_pool *P = ctx;
    pool_job *j = (pool_job *)base;
    rows_free(&j->rows);
    nb_image_info_free(&j->im);
    nb_reader_recycle(P->reader, &j->rec);
    free(j);
}

/* A worker's own: the SMV values of a piece, kept from frame to frame */
typedef struct pool_scratch {
    uint16_t *ints;
    size_t cap;
} pool_scratch;

static void pool_scratch_free(void *p)
{
    pool_scratch *sc = p;
    if (sc) free(sc->ints);
    free(sc);
}

/* On a worker: a job's rows into its files, then the files closed (on a
 * failure, or after an earlier frame's, left for abort_pending to remove) */
static nb_status pool_write(nb_pool_job *base, int skip, void **scratch, void *ctx)
{
    (void)ctx;
    pool_job *j = (pool_job *)base;
    row_files *R = &j->rows;
    if (skip) { /* not written: an earlier frame failed */
        rows_abort(R);
        return NB_OK;
    }
    nb_status st = NB_OK;
    if (!*scratch && !(*scratch = calloc(1, sizeof(pool_scratch))))
        st = nb_error_set(NB_ERR_NOMEM, "out of memory");
    pool_scratch *sc = *scratch;
    const size_t need = (size_t)rows_per_piece(j->fr.width) * (size_t)j->fr.width;
    if (!st && R->scaled && sc->cap < need) {
        free(sc->ints);
        sc->ints = NULL, sc->cap = 0;
        if (!(st = nb_alloc_large((void **)&sc->ints, need, sizeof *sc->ints, "int rows"))) sc->cap = need;
    }
    if (sc) R->slot_ints[0] = sc->ints, R->slot_cap = sc->cap;
    if (!st) st = rows_write_all(R, &j->fr);
    for (int i = 0; i < R->nouts && !st; i++) {
        row_out *ro = &R->outs[i];
        st = ro->bin ? nb_outfile_commit(ro->bin) : nb_smv_writer_close(ro->smv);
        ro->bin = NULL, ro->smv = NULL;
    }
    if (st) rows_abort(R);
    R->slot_ints[0] = NULL, R->slot_cap = 0;
    return st;
}

/* Start the workers: as many as the threads allowed (this one mostly waits
 * for the input: 100 frames of 1024^2 from tmpfs to tmpfs on 2 cores took
 * 127-145 ms with two workers, 170-189 with one, 202-213 written as they
 * came), at most NB_POOL_MAX_WORKERS and as many as frames of `bytes` fit in
 * POOL_MAX_BYTES, one waiting beside each; none when one thread is allowed
 * (or none could be had). */
static void pool_start(frame_pool *P, nb_reader *r, size_t bytes)
{
    memset(P, 0, sizeof *P);
    P->reader = r;
    int n = omp_get_max_threads();
    if (n < 2) return;
    n = n > NB_POOL_MAX_WORKERS ? NB_POOL_MAX_WORKERS : n;
    const size_t fit = bytes ? POOL_MAX_BYTES / bytes : POOL_MAX_BYTES;
    if ((size_t)n + 1 > fit) n = fit > 1 ? (int)fit - 1 : 1;
    const nb_pool_ops ops = {pool_write, pool_job_release, pool_scratch_free, NULL, P};
    if (nb_pool_start(&P->pool, n, n + 1, &ops)) nb_info("writing the frames %d at a time", P->pool.workers);
}

/* Every frame handed over written: the first failure in frame order */
static nb_status pool_drain(frame_pool *P) { return nb_pool_collect(&P->pool, 1); }

/* Whether an IMAGE record of plan p (wanted, matching the plan, one panel)
 * goes to the pool: a frame of a series whose outputs are all
 * raw float and SMV files, with a thread to spare */
static int pool_takes(const nb_plan *p, const conv_opts *o)
{
    if (p->nframes < 2 || o->tee || omp_get_max_threads() < 2) return 0;
    out_request req[8];
    int n;
    const out_request *list = frame_requests(p, o, req, &n);
    for (int k = 0; k < n; k++)
        if (list[k].format != NB_FMT_BIN && list[k].format != NB_FMT_SMV) return 0;
    return n > 0 && n <= ROWS_MAX;
}

/* The IMAGE record *rec (its payload kept; taken from the caller) as a job:
 * its frame and files made ready here, written by a worker. */
static nb_status pool_image(frame_pool *P, nb_record *rec, const nb_plan *plan, const conv_opts *o)
{
    pool_job *j = calloc(1, sizeof *j);
    if (!j) return nb_error_set(NB_ERR_NOMEM, "out of memory");
    j->rec = *rec;
    memset(rec, 0, sizeof *rec);
    out_request req[8];
    int n;
    const out_request *list = frame_requests(plan, o, req, &n);
    /* every pixel is checked for a finite value by the worker, a piece at a time */
    nb_status st = nb_image_from_record(&j->rec, &j->im);
    if (!st) st = prepare_frame(plan, &j->rec, &j->im, o, 1, &j->fr);
    if (!st) rows_start(&j->rows, &j->fr, 0, j->fr.int_scale, j->fr.adc);
    for (int k = 0; k < n && !st; k++) {
        int kind;
        if (!(st = row_kind_of(&list[k], &j->fr, &kind))) st = rows_open(&j->rows, &list[k], k, &j->fr, kind);
    }
    if (st) {
        pool_job_release(&j->base, P);
        nb_status earlier = pool_drain(P); /* a frame before this one failed first */
        return earlier ? earlier : st;
    }
    return nb_pool_submit(&P->pool, &j->base);
}

/* ---- writing while the image arrives -------------------------------------- */
/* The stream reader's consumer: at an IMAGE record's header, the row files
 * that can be written from its pieces are opened, and its payload is shown
 * piece by piece; when they are all its outputs (and no copy of the stream
 * is wanted) the payload is not kept at all: a few MiB of memory instead of
 * the image, and the 64 MiB of a 4096^2 image never allocated (fresh pages
 * are zeroed by the kernel as they are first touched, a quarter of this
 * tool's CPU time). */
typedef struct live_image {
    const conv_opts *o;
    const nb_plan *plan;   /* the current plan; NULL before the first */
    int live;              /* the current IMAGE record's row files are written as it comes */
    int dropped;           /* ... and its payload is not kept */
    int pooled;            /* ... or it is kept, for the frame pool to write (pool_takes) */
    row_files rows;
} live_image;

static void live_prepare(void *ctx, const nb_payload_piece *pc) { rows_prepare(&((live_image *)ctx)->rows, pc); }

static nb_status live_piece(void *ctx, const nb_payload_piece *pc)
{
    live_image *L = ctx;
    return L->live ? rows_piece(&L->rows, pc) : NB_OK;
}

/* Which requests can be written live, and open them, for the IMAGE record
 * whose keys are im (its payload not there yet); how the reader shows it */
static nb_status live_open(live_image *L, const nb_image_info *im, nb_payload_how *how)
{
    const nb_plan *p = L->plan;
    const conv_opts *o = L->o;
    int have_max = im->has.max_I && im->has.rmsd;
    out_request req[8];
    int nreq;
    const out_request *list = frame_requests(p, o, req, &nreq);
    frame fr;
    memset(&fr, 0, sizeof fr);
    fr.plan = p, fr.im = im, fr.width = (int)im->fpixels, fr.height = (int)im->spixels, fr.frame = im->frame;
    rows_start(&L->rows, &fr, im->pixels_offset, have_max ? int_scale_for(p, o, im->max_I) : 0.0, adc_for(p, o));
    nb_status st = NB_OK;
    for (int k = 0; k < nreq && !st && L->rows.nouts < ROWS_MAX; k++) {
        const out_request *q = &list[k];
        int smv = q->format == NB_FMT_SMV && have_max && (q->source == SRC_INT || (q->source == SRC_AUTO && !im->has_counts));
        if (q->format == NB_FMT_BIN || smv) st = rows_open(&L->rows, q, k, &fr, smv ? ROW_SMV_SCALED : ROW_FLOAT);
    }
    if (st || !L->rows.nouts) return st;
    L->live = 1;
    L->dropped = L->rows.nouts == nreq && !o->tee;
    how->use = L->dropped ? NB_PAYLOAD_SHOW_ONLY : NB_PAYLOAD_KEEP_AND_SHOW;
    how->first = im->pixels_offset;
    how->unit = (size_t)im->fpixels * sizeof(float);
    /* the int image made and written where the pieces are read: reading,
     * checksum, conversion and the SMV files on one thread, the raw floats
     * on the other (writing a file into the page cache costs the kernel more
     * than the rest, and one file is written by one thread at a time) */
    if (L->rows.scaled) {
        st = rows_slots(&L->rows, how->unit > how->piece_size ? how->unit : how->piece_size);
        how->prepare = live_prepare;
    }
    return st;
}

/* Is the IMAGE record (its keys im) one this run writes: an image, or with
 * --grad NAME the derivative of that name? */
static int wanted(const nb_image_info *im, const conv_opts *o)
{
    if (!o->grad) return !nb_image_is_grad(im);
    return nb_image_is_grad(im) && !strcmp(im->grad_of, o->grad);
}

/* The consumer's begin: an IMAGE record's files written as it comes, when its
 * keys are sound and match the plan (else the usual path, after the whole
 * record, says what is wrong). */
static nb_status live_begin(void *ctx, const nb_record *rec, nb_payload_how *how)
{
    live_image *L = ctx;
    nb_image_info im;
    rows_abort(&L->rows);
    L->live = L->dropped = L->pooled = 0;
    /* several panels: written when the record is complete, panel by panel */
    if (!L->plan || nb_plan_npanels(L->plan) > 1 || !nb_record_is(rec, "IMAGE") || nb_image_from_record(rec, &im))
        return NB_OK;
    nb_status st = NB_OK;
    if (!nb_image_check_plan(&im, L->plan) && wanted(&im, L->o)) {
        if (pool_takes(L->plan, L->o)) L->pooled = 1;
        else st = live_open(L, &im, how);
    }
    nb_image_info_free(&im);
    return st;
}

/* ---- importing ------------------------------------------------------------ */

/* The detector counts of a file into the record: the counts as read
 * (negative values, a CBF's masked pixels, as 0; over the stream's counter,
 * its top), the photons (counts - offset) / scale, scale the plan's
 * INTFILE_SCALE when positive; the offset and counter the image reader's
 * (registry.h). */
static nb_status import_counts(nb_record *out, nb_image_info *im, const nb_plan *plan, const nb_image_file *f,
                               const char *path)
{
    const size_t n = f->npixels;
    double scale = plan->intfile_scale > 0 ? plan->intfile_scale : 1.0;
    double top = f->bits == 32 ? 2147483647.0 : 65535.0;
    int32_t *counts;
    const float *stored_px;
    /* adding the counts may move the payload: find the pixels again after it */
    nb_status st = nb_image_add_pixels(out, n, NULL, NULL);
    if (!st) st = nb_image_add_counts(out, n, NULL, &counts);
    if (!st) st = nb_image_pixels(out, NULL, &stored_px, NULL);
    if (st) return st;
    float *px = (float *)stored_px;
    for (size_t i = 0; i < n; i++) {
        const double c = f->counts[i], v = c < 0 ? 0.0 : c > top ? top : c;
        counts[i] = (int32_t)v;
        px[i] = (float)((v - f->offset) / scale);
    }
    if (f->nnegative) nb_warn("'%s': %zu negative pixels (masked, in a CBF) taken as 0 counts", path, f->nnegative);
    im->counts_bits = f->bits, im->has.counts_bits = 1;
    im->counts_adc = f->offset, im->has.counts_adc = 1;
    /* the counts' keys first, as this record has always had them */
    st = nb_image_put_header(im, out, NB_IMAGE_COUNT_KEYS);
    if (!st) st = nb_image_put_header(im, out, NB_IMAGE_FRAME_KEYS);
    return st;
}

static nb_status import_image(const char *path, const nb_plan *plan, nb_record *out)
{
    nb_status st;
    if (nb_plan_npanels(plan) > 1)
        return nb_error_set(NB_ERR_UNSUPPORTED, "--import '%s': the plan's detector has %d panels; only one-panel "
                                                "images can be imported",
                            path, nb_plan_npanels(plan));
    size_t n = (size_t)plan->fpixels * plan->spixels;
    nb_image_info im;
    nb_image_info_init(&im);
    im.frame = 0, im.has.frame = 1;
    im.panel = 0, im.has.panel = 1;
    im.fpixels = plan->fpixels, im.spixels = plan->spixels;
    snprintf(im.units, sizeof im.units, "photons");
    if (strlen(path) >= sizeof im.imported_from) return nb_error_set(NB_ERR_USAGE, "'%s': the name is too long", path);
    snprintf(im.imported_from, sizeof im.imported_from, "%s", path);
    nb_image_record_init(out);
    nb_image_file f;
    if ((st = nb_image_file_read(path, plan, 0, &f))) {
        nb_image_file_free(&f);
        return nb_error_prefix(st, "--import");
    }
    if (f.is_counts) {
        st = import_counts(out, &im, plan, &f, path);
    } else {
        /* float samples are photons */
        st = nb_image_add_pixels(out, n, f.photons, NULL);
        if (!st) st = nb_image_put_header(&im, out, NB_IMAGE_ALL_KEYS);
    }
    nb_image_file_free(&f);
    return st;
}

/* ---- converting ------------------------------------------------------------ */

/* The frame's line of truth.jsonl: the file opened at the run's first image,
 * committed at its end (finish_truths) */
static nb_status write_truth(const out_request *q, int k, const conv_opts *o, const frame *fr,
                             const nb_image_info *im)
{
    nb_status st;
    if (!o->truths[k]) {
        if ((st = nb_truth_open(&o->truths[k], q->path, o->truth_min_photons))) return st;
        nb_info("writing %s", q->path);
    }
    st = nb_truth_frame(o->truths[k], fr->plan, im, fr->photons);
    return st ? nb_error_prefix(st, "'%s'", q->path) : NB_OK;
}

/* Every truth file into place (ok) or removed */
static nb_status finish_truths(conv_opts *o, int ok)
{
    nb_status st = NB_OK;
    for (int k = 0; k < o->nouts; k++) {
        if (!o->truths[k]) continue;
        if (ok && !st) st = nb_truth_commit(o->truths[k]);
        else nb_truth_abort(o->truths[k]);
        o->truths[k] = NULL;
    }
    return st;
}

/* One IMAGE record to every requested file: its payload is there, or was all
 * written as it came (live) and not kept.  A record this run does not write
 * (a derivative, or an image with --grad) is passed over: *converted 0. */
static nb_status convert_image(const nb_record *rec, const nb_plan *plan, const conv_opts *o, live_image *live,
                               int *converted)
{
    nb_image_info im;
    frame fr;
    memset(&fr, 0, sizeof fr);
    *converted = 0;
    nb_status st = nb_image_from_record(rec, &im);
    if (st) return st;
    if ((st = nb_image_check_plan(&im, plan)) || !wanted(&im, o)) goto done;
    *converted = 1;
    /* every pixel checked as it came already */
    int all_live = live->live && live->rows.rows_done == live->rows.height;
    /* a payload not kept was all written as it came (every output live) */
    if (!live->dropped && (st = prepare_frame(plan, rec, &im, o, all_live, &fr))) goto done;
    out_request req[8];
    int n;
    out_request *list = frame_requests(plan, o, req, &n);
    if (n == 0) {
        st = nb_error_set(NB_ERR_USAGE, "nothing to write: give -o FILE (the plan requests no files)");
        goto done;
    }
    for (int k = 0; k < n && !st; k++) {
        int was_live = 0;
        if (IS_SIDECAR(list[k].format)) st = write_sidecar(&list[k], o, &fr);
        else if (list[k].format == NB_FMT_TRUTH) st = write_truth(&list[k], k, o, &fr, &im);
        else if (list[k].format == NB_FMT_EXPT) st = write_expt(&list[k], k, o, &fr);
        else if (list[k].format == NB_FMT_NXMX) st = write_nxmx(&list[k], &o->nxmx[k], o, &fr);
        else if ((st = rows_finish(&live->rows, k, &was_live)) || was_live || list[k].format == NB_FMT_NBS) continue;
        else if (live->dropped)
            st = nb_error_set(NB_ERR_DATA, "internal error: '%s' was not written as the image came, which is no "
                                           "longer there",
                              list[k].path);
        else if (im.npanels < 2) st = write_file(&list[k], k, &fr);
        else st = stacks_panels(&list[k], list, n) ? write_stacked(&list[k], k, &fr) : write_panels(&list[k], k, &fr);
    }
done:
    rows_abort(&live->rows); /* nothing is left open; ready for the next record */
    live->live = live->dropped = 0;
    nb_image_info_free(&im);
    return st;
}

/* ---- main ------------------------------------------------------------------ */

/* -o FILE: its format from --format before it, or from its name */
static nb_status add_output(const nb_opt_args *a)
{
    conv_opts *o = a->dest;
    out_request *r = &o->outs[o->nouts++];
    r->path = a->vals[0];
    r->format = o->pending_format >= 0 ? o->pending_format : format_from_path(r->path);
    r->source = SRC_AUTO;
    o->pending_format = -1;
    if (r->format < 0)
        return nb_error_set(NB_ERR_USAGE,
                            "cannot tell the format of '%s' from its name (known: .bin .img .smv .cbf .tif "
                            ".pgm .png .nbs .INP .geom .expt .jsonl .nxs .h5); use --format",
                            r->path);
    return NB_OK;
}

static nb_status set_format(const nb_opt_args *a)
{
    conv_opts *o = a->dest;
    o->pending_format = format_from_name(a->vals[0]);
    if (o->pending_format < 0) return nb_error_set(NB_ERR_USAGE, "unknown format '%s'", a->vals[0]);
    return NB_OK;
}

/* the reference's output files, requested here rather than in the plan */
static nb_status add_reference_output(const nb_opt_args *a)
{
    conv_opts *o = a->dest;
    const char *v = a->vals[0];
    out_request *r = &o->outs[o->nouts++];
    switch (a->opt->id) {
    case FL_FLOATFILE: *r = (out_request){v, NB_FMT_BIN, SRC_AUTO, 0, 0, 0}; break;
    case FL_INTFILE: *r = (out_request){v, NB_FMT_SMV, SRC_INT, NB_SMV_BEAM_REFERENCE, 0, 0}; break;
    case FL_NOISEFILE: *r = (out_request){v, NB_FMT_SMV, SRC_COUNTS, NB_SMV_BEAM_REFERENCE, 0, 0}; break;
    default: *r = (out_request){v, NB_FMT_PGM, SRC_AUTO, 0, 0, 0}; break;
    }
    return NB_OK;
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
    {NB_OPT_LOCAL, "--join", 1, "PART",
     "join the files of shards (nb-sim --shard, --frames): NXmx parts into\n"
     "the -o MASTER.nxs (a virtual data set over theirs), model.expt parts\n"
     "into the -o model.expt of the whole run (naming the master's frames\n"
     "when both are joined).  Repeatable; a quoted pattern such as\n"
     "'part_*.nxs' is expanded; no stream is read",
     .needs = "a file name or pattern", .type = NB_OPT_CALLBACK, .fn = add_join},
    {NB_OPT_LOCAL, "--nxmx-join", 1, "PART", "the same as --join (its older name)",
     .needs = "a file name or pattern", .type = NB_OPT_CALLBACK, .fn = add_join},
    {NB_OPT_LOCAL, "--import", 1, "FILE", "read FILE (raw float32, SMV, CBF or TIFF) as the image of the input\n"
     "plan",
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
    o->pending_format = -1;
    o->truth_min_photons = 1.0;
    nb_status st = nb_tool_parse(&tool, std, o, argc, argv);
    if (st) return st;
    if (o->pending_format >= 0)
        return nb_error_set(NB_ERR_USAGE, "--format %s must come before the -o FILE it applies to",
                            fmt_name(o->pending_format));
    for (int k = 0; k < o->nouts; k++) {
        out_request *r = &o->outs[k];
        if (r->format == NB_FMT_SMV && r->source == SRC_AUTO) r->smv_beam = o->smv_beam;
        if (r->format == NB_FMT_PNG && o->photons) r->source = SRC_PHOTONS;
        if ((r->format == NB_FMT_TIF || r->format == NB_FMT_TIF_FLOAT || r->format == NB_FMT_TIF16 || r->format == NB_FMT_TIF32) &&
            (st = nb_tiff_load()))
            return nb_error_prefix(st, "'%s'", r->path);
        if (r->format == NB_FMT_NXMX && strchr(r->path, '#'))
            return nb_error_set(NB_ERR_USAGE, "'%s': one NXmx file holds every frame; no '#' run in its name", r->path);
        if (r->format == NB_FMT_NXMX && (st = nb_nxmx_load())) return nb_error_prefix(st, "'%s'", r->path);
        if (r->format == NB_FMT_NBS && o->tee && !o->import)
            return nb_error_set(NB_ERR_USAGE, "'%s': only one .nbs copy of the stream", r->path);
        if (r->format == NB_FMT_NBS) o->tee = r->path;
        if (o->grad && r->format != NB_FMT_BIN && r->format != NB_FMT_TIF && r->format != NB_FMT_TIF_FLOAT &&
            r->format != NB_FMT_NBS)
            return nb_error_set(NB_ERR_USAGE,
                                "--grad %s: '%s' would be a %s file; a derivative (photons per unit, any sign) is "
                                "written as raw float (.bin) or float TIFF (.tif)",
                                o->grad, r->path, fmt_name(r->format));
    }
    if (o->grad && o->import) return nb_error_set(NB_ERR_USAGE, "--grad and --import do not go together");
    if (o->grad && !o->nouts) return nb_error_set(NB_ERR_USAGE, "--grad %s needs -o FILE", o->grad);
    return NB_OK;
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
    o.truths = calloc((size_t)argc + 1, sizeof *o.truths);
    o.nxmx = calloc((size_t)argc + 1, sizeof *o.nxmx);
    o.expts = calloc((size_t)argc + 1, sizeof *o.expts);
    if (!o.outs || !o.truths || !o.nxmx || !o.expts) nb_exit_on_error(nb_error_set(NB_ERR_NOMEM, "out of memory"));
    nb_exit_on_error(parse(argc, argv, &o, &opts));
    nb_exit_on_error(nb_std_apply(&opts));
    if (o.njoins) {
        nb_status js = join_parts(&o, &opts);
        for (int k = 0; k < o.njoins; k++) free((char *)o.joins[k]);
        free(o.joins);
        free(o.join_nxmx);
        free(o.outs);
        free(o.nxmx);
        free(o.truths);
        free(o.expts);
        nb_exit_on_error(js);
        return 0;
    }
    nb_stream_to_stdout((o.import && !o.tee) || (o.tee && !strcmp(o.tee, "-")));

    nb_reader *r = NULL;
    nb_writer *w = NULL;
    nb_record rec;
    nb_plan plan;
    int have_plan = 0, eof = 0, images = 0;
    memset(&rec, 0, sizeof rec);
    nb_status st = nb_reader_open(&r, opts.input);
    nb_writer *tee = NULL;
    live_image live;
    memset(&live, 0, sizeof live);
    live.o = &o;
    frame_pool pool;
    memset(&pool, 0, sizeof pool);
    int pool_tried = 0;
    nb_payload_consumer consumer = {live_begin, live_piece, &live};
    if (!st && !o.import) nb_reader_set_consumer(r, &consumer);
    if (!st && o.import) {
        /* the stream goes on: to -o FILE.nbs or standard output */
        for (int k = 0; k < o.nouts; k++)
            if (o.outs[k].format != NB_FMT_NBS)
                st = nb_error_set(NB_ERR_USAGE, "with --import the output is a stream (.nbs or standard output)");
        if (!st) st = nb_writer_open(&w, o.tee ? o.tee : "-");
    } else if (!st && o.tee) {
        st = nb_writer_open(&tee, o.tee);
    }
    while (!st) {
        st = nb_reader_next(r, &rec, &eof);
        if (st || eof) break;
        if (w) {
            /* import mode: pass everything through, add the image after each plan */
            if (nb_record_is(&rec, "END")) {
                st = nb_writer_end(w);
                continue;
            }
            if (nb_record_is(&rec, "IMAGE")) continue; /* replaced by the imported one */
            if ((st = nb_writer_put(w, &rec))) break;
            if (nb_record_is(&rec, "PLAN")) {
                nb_plan p;
                nb_record img;
                if ((st = nb_plan_from_record(&rec, &p))) break;
                st = import_image(o.import, &p, &img);
                if (!st) st = nb_writer_put(w, &img);
                nb_record_free(&img);
                nb_plan_free(&p);
                images++;
            }
            continue;
        }
        if (tee && (st = nb_writer_put(tee, &rec))) break;
        if (nb_record_is(&rec, "END")) {
            /* the segment is complete: its files go into place */
            if (!(st = pool_drain(&pool))) st = commit_pending();
        } else if (nb_record_is(&rec, "PLAN")) {
            if ((st = pool_drain(&pool))) break; /* its frames are done with the plan they point to */
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
                st = pool_image(&pool, &rec, &plan, &o);
                converted = 1;
            } else {
                st = convert_image(&rec, have_plan ? &plan : NULL, &o, &live, &converted);
            }
            live.pooled = 0;
            images += converted;
        }
    }
    /* every frame handed over written (or, after a failure, finished) */
    nb_status pst = nb_pool_stop(&pool.pool);
    if (!st) st = pst;
    if (!st && images == 0) {
        const char *name = r ? nb_reader_name(r) : opts.input;
        st = o.import ? nb_error_set(NB_ERR_DATA, "%s: the stream holds no PLAN record", name)
             : o.grad ? nb_error_set(NB_ERR_DATA, "%s: the stream holds no derivative of '%s' (run nb-sim --grad %s)",
                                     name, o.grad, o.grad)
                      : nb_image_none(name);
    }
    if (tee) {
        if (!st) st = nb_writer_close(tee);
        else nb_writer_abort(tee);
    }
    rows_free(&live.rows);
    nb_status nx = nxmx_finish(&o, !st);
    if (!st) st = nx;
    if (st) abort_pending();
    else st = commit_pending();
    nb_status tst = finish_truths(&o, !st);
    if (!st) st = tst;
    nb_status est = finish_expts(&o, !st);
    if (!st) st = est;
    if (have_plan) nb_plan_free(&plan);
    nb_record_free(&rec);
    nb_reader_close(r);
    if (w) {
        if (!st) st = nb_writer_close(w);
        else nb_writer_abort(w);
    }
    free(o.outs);
    free(o.truths);
    free(o.nxmx);
    free(o.expts);
    nb_exit_on_error(st);
    return 0;
}
