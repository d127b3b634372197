/* image_read.c - the one reader of image files (registry.h's
 * nb_image_file_read): each readable format's reader, and the rule for
 * counts (offset, gain, overload, untrusted pixels) applied to all of them
 * in one place, so that nb-convert --import and nb-fit --observed read a
 * file the same way. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cbf.h"
#include "nb_image_record.h"
#include "nb_stream.h"
#include "nb_util.h"
#include "rawfloat.h"
#include "nxmx.h"
#include "registry.h"
#include "smv.h"
#include "tiff.h"

nb_status nb_read_rawfloat_file(const char *path, const nb_plan *plan, long frame, nb_image_file *out);
nb_status nb_read_smv_file(const char *path, const nb_plan *plan, long frame, nb_image_file *out);
nb_status nb_read_cbf_file(const char *path, const nb_plan *plan, long frame, nb_image_file *out);
nb_status nb_read_tiff_file(const char *path, const nb_plan *plan, long frame, nb_image_file *out);
nb_status nb_read_stream_file(const char *path, const nb_plan *plan, long frame, nb_image_file *out);
nb_status nb_read_nxmx_file(const char *path, const nb_plan *plan, long frame, nb_image_file *out);

/* ---- the rule ------------------------------------------------------------- */

void nb_image_file_set_overload(nb_image_file *f, double overload)
{
    f->overload = overload;
    f->nnegative = f->noverloaded = 0;
    if (!f->is_counts || !f->untrusted) return;
    for (size_t i = 0; i < f->npixels; i++) {
        const double v = f->counts[i];
        f->untrusted[i] = v < 0 || v >= overload;
        f->nnegative += v < 0;
        f->noverloaded += v >= overload;
    }
}

/* A count image's keys: the offset the file stated (NAN: none, the plan's
 * ADC then), its gain (NAN: 1), the overload it stated (NAN: the counter's
 * top), and the untrusted pixels by them */
static nb_status counts_rule(nb_image_file *f, const nb_plan *plan, double offset, double gain, double overload,
                             double top)
{
    f->is_counts = 1;
    f->offset_stated = !isnan(offset);
    f->offset = f->offset_stated ? offset : plan ? plan->adc : 0.0;
    f->gain = isnan(gain) ? 1.0 : gain;
    f->overload_stated = !isnan(overload);
    nb_status st = nb_calloc((void **)&f->untrusted, f->npixels ? f->npixels : 1, 1, "the image's mask");
    if (!st) nb_image_file_set_overload(f, isnan(overload) ? top : overload);
    return st;
}

/* The size the plan says (one panel: width x height) */
static nb_status size_matches(const char *path, int w, int h, const nb_plan *plan)
{
    if (!plan || (w == plan->panels[0].fpixels && h == plan->panels[0].spixels)) return NB_OK;
    return nb_error_set(NB_ERR_DATA, "'%s' is %d x %d pixels but the plan says %d x %d", path, w, h,
                        plan->panels[0].fpixels, plan->panels[0].spixels);
}

static nb_status alloc_counts(nb_image_file *f, int w, int h)
{
    f->width = w, f->height = h;
    f->npixels = (size_t)w * (size_t)h;
    return nb_calloc((void **)&f->counts, f->npixels ? f->npixels : 1, sizeof *f->counts, "the image");
}

/* ---- the readers ---------------------------------------------------------- */

/* Raw float32 photons: the plan's pixels (all its panels), else any size, one row */
nb_status nb_read_rawfloat_file(const char *path, const nb_plan *plan, long frame, nb_image_file *out)
{
    (void)frame;
    size_t count = plan ? nb_plan_total_pixels(plan) : 0;
    nb_status st = nb_rawfloat_read(path, &out->photons, &count);
    if (st) return st;
    out->npixels = count;
    out->width = (int)count, out->height = 1;
    if (plan && nb_plan_npanels(plan) == 1) out->width = plan->panels[0].fpixels, out->height = plan->panels[0].spixels;
    return NB_OK;
}

/* SMV: 16-bit, or 32-bit (TYPE=long_integer) unsigned counts */
nb_status nb_read_smv_file(const char *path, const nb_plan *plan, long frame, nb_image_file *out)
{
    (void)frame;
    nb_smv smv;
    /* an SMV that cannot be read is an error, never raw floats */
    nb_status st = nb_smv_read(path, 1, &smv);
    if (st) return st;
    if (!(st = size_matches(path, smv.width, smv.height, plan)) && !(st = alloc_counts(out, smv.width, smv.height)))
        for (size_t i = 0; i < out->npixels; i++) out->counts[i] = smv.pixels[i];
    out->bits = 8 * smv.bytes_per_pixel;
    const double offset = nb_smv_value(&smv, "ADC_OFFSET"), gain = nb_smv_value(&smv, "GAIN");
    if (!st)
        st = counts_rule(out, plan, offset, gain > 0 ? gain : NAN, NAN, out->bits == 32 ? 4294967295.0 : 65535.0);
    nb_smv_free(&smv);
    return st;
}

/* CBF: signed 32-bit counts from 0 (as a PILATUS counts, and nb-convert
 * writes them), its overload the one it states */
nb_status nb_read_cbf_file(const char *path, const nb_plan *plan, long frame, nb_image_file *out)
{
    (void)frame;
    int32_t *c = NULL;
    int w, h;
    double overload;
    nb_status st = nb_cbf_read_stated(path, &c, &w, &h, &overload);
    if (st) return st;
    int32_t top = 0;
    if (!(st = size_matches(path, w, h, plan)) && !(st = alloc_counts(out, w, h)))
        for (size_t i = 0; i < out->npixels; i++) out->counts[i] = c[i], top = c[i] > top ? c[i] : top;
    free(c);
    /* its counter 16 bits deep when every count fits */
    out->bits = top > 65535 ? 32 : 16;
    return st ? st : counts_rule(out, plan, 0.0, NAN, overload, 2147483647.0);
}

/* TIFF: unsigned counts (16 or 32 bits), or float32 photons */
nb_status nb_read_tiff_file(const char *path, const nb_plan *plan, long frame, nb_image_file *out)
{
    (void)frame;
    double *v = NULL, count_max;
    int w, h, is_float;
    nb_status st = nb_tiff_read(path, &v, &w, &h, &is_float, &count_max);
    if (!st) st = size_matches(path, w, h, plan);
    if (st) {
        free(v);
        return st;
    }
    out->width = w, out->height = h, out->npixels = (size_t)w * (size_t)h;
    if (is_float) {
        st = nb_calloc((void **)&out->photons, out->npixels ? out->npixels : 1, sizeof *out->photons, "the image");
        for (size_t i = 0; !st && i < out->npixels; i++) out->photons[i] = (float)v[i];
        free(v);
        return st;
    }
    out->counts = v;
    out->bits = count_max > 65535 ? 32 : 16;
    /* nb-convert's integer TIFF holds the counts with their offset, and says nothing of it */
    return counts_rule(out, plan, NAN, NAN, NAN, count_max);
}

/* The IMAGE record's pixels or counts into out */
static nb_status from_record(const nb_record *rec, const nb_image_info *im, const nb_plan *plan, nb_image_file *out)
{
    const float *px;
    const int32_t *counts;
    nb_status st = nb_image_pixels(rec, im, &px, NULL);
    if (st) return st;
    out->npixels = im->npixels;
    out->width = im->npanels > 1 ? (int)im->npixels : (int)im->fpixels;
    out->height = im->npanels > 1 ? 1 : (int)im->spixels;
    if (!im->has_counts) {
        if ((st =
                 nb_calloc((void **)&out->photons, out->npixels ? out->npixels : 1, sizeof *out->photons, "the image")))
            return st;
        memcpy(out->photons, px, out->npixels * sizeof *px);
        return NB_OK;
    }
    if ((st = nb_image_counts(rec, im, &counts, NULL))) return st;
    if ((st = nb_calloc((void **)&out->counts, out->npixels ? out->npixels : 1, sizeof *out->counts, "the image")))
        return st;
    for (size_t i = 0; i < out->npixels; i++) out->counts[i] = counts[i];
    out->bits = im->counts_bits;
    return counts_rule(out, plan, im->has.counts_adc ? im->counts_adc : NAN,
                       im->has.counts_gain ? im->counts_gain : NAN, NAN,
                       im->counts_bits == 32 ? 2147483647.0 : 65535.0);
}

/* An nb stream: the first IMAGE record of that frame that is an image (not
 * a derivative), matching the plan */
nb_status nb_read_stream_file(const char *path, const nb_plan *plan, long frame, nb_image_file *out)
{
    nb_reader *r;
    nb_record rec;
    int eof = 0, found = 0;
    memset(&rec, 0, sizeof rec);
    nb_status st = nb_reader_open(&r, path);
    while (!st && !found) {
        nb_image_info im;
        if ((st = nb_reader_next(r, &rec, &eof)) || eof) break;
        if (!nb_record_is(&rec, "IMAGE")) continue;
        if ((st = nb_image_from_record(&rec, &im))) break;
        if (!nb_image_is_grad(&im) && im.frame == frame) {
            found = 1;
            if (!plan || !(st = nb_image_check_plan(&im, plan))) st = from_record(&rec, &im, plan, out);
        }
        nb_image_info_free(&im);
    }
    if (!st && !found) st = nb_error_set(NB_ERR_DATA, "'%s' holds no image of frame %ld", path, frame + 1);
    nb_record_free(&rec);
    nb_reader_close(r);
    return st;
}

/* An NXmx frame's modules against the plan's panels: as many, each of its panel's size */
static nb_status modules_match(const char *path, const nb_nxmx_image *im, const nb_plan *plan)
{
    if (!plan) return NB_OK;
    const int np = nb_plan_npanels(plan);
    if (im->npanels != np)
        return nb_error_set(NB_ERR_DATA, "'%s' holds %d module%s (NXdetector_module) but the plan has %d panel%s", path,
                            im->npanels, im->npanels == 1 ? "" : "s", np, np == 1 ? "" : "s");
    for (int i = 0; i < np; i++) {
        int f, s;
        nb_plan_panel_dims(plan, i, &f, &s, NULL);
        if (im->fpixels[i] != f || im->spixels[i] != s)
            return nb_error_set(NB_ERR_DATA, "'%s': %s%s%d x %d pixels but the plan's panel %d is %d x %d", path,
                                im->modules[i][0] ? im->modules[i] : "the frames", im->modules[i][0] ? " is " : " are ",
                                im->fpixels[i], im->spixels[i], i + 1, f, s);
    }
    return NB_OK;
}

/* NXmx: frame `frame` of the file's run (nxmx_read.c), whose frame count is
 * the plan's and whose modules are the plan's panels; integer counts from
 * 0, their overload the saturation_value stated, the pixel_mask's pixels
 * untrusted; floats are photons */
nb_status nb_read_nxmx_file(const char *path, const nb_plan *plan, long frame, nb_image_file *out)
{
    nb_nxmx_image im;
    nb_status st = nb_nxmx_read_frame(path, frame, &im);
    if (st) return st;
    if (plan && im.nframes != plan->nframes)
        st = nb_error_set(NB_ERR_DATA, "'%s' holds %ld frames but the plan has %d", path, im.nframes, plan->nframes);
    if (!st) st = modules_match(path, &im, plan);
    const size_t n = im.npixels;
    if (!st && im.is_float) {
        out->width = im.width, out->height = im.height, out->npixels = n;
        st = nb_calloc((void **)&out->photons, n ? n : 1, sizeof *out->photons, "the image");
        for (size_t i = 0; !st && i < n; i++) out->photons[i] = (float)im.values[i];
    } else if (!st && !(st = alloc_counts(out, im.width, im.height))) {
        memcpy(out->counts, im.values, n * sizeof *out->counts);
        out->bits = im.bits > 16 ? 32 : 16;
        const double top = im.bits >= 32 ? 4294967295.0 : im.bits > 16 ? 2147483647.0 : 65535.0;
        st = counts_rule(out, plan, 0.0, im.gain, im.saturation, top);
        for (size_t i = 0; !st && im.masked && i < n; i++) out->untrusted[i] |= im.masked[i];
    }
    nb_nxmx_image_free(&im);
    return st;
}

/* ---- the one entry -------------------------------------------------------- */

nb_status nb_image_file_read(const char *path, const nb_plan *plan, long frame, nb_image_file *out)
{
    memset(out, 0, sizeof *out);
    const nb_format *f = nb_format_of_file(path);
    out->format = f;
    if (!f) {
        const char *dot = strrchr(path, '.');
        return nb_error_set(NB_ERR_USAGE, "cannot read '%s': no format has the suffix '%s' (readable: %s)", path, dot,
                            nb_format_readable_list());
    }
    if (!f->read)
        return nb_error_set(NB_ERR_USAGE, "cannot read '%s': %s is a write-only format (readable: %s)", path, f->title,
                            nb_format_readable_list());
    /* one file per frame holds every panel: an nb stream, raw float panel
     * after panel, or NXmx's modules */
    if (plan && nb_plan_npanels(plan) > 1 && !f->all_panels)
        return nb_error_set(NB_ERR_UNSUPPORTED, "'%s': a detector of %d panels is observed as an nb stream (.nbs), "
                                                "NXmx or raw float of all its panels", path, nb_plan_npanels(plan));
    nb_status st = f->read(path, plan, frame, out);
    if (st || nb_verbosity() < 1) return st;
    if (!out->is_counts) {
        nb_info("'%s' read as %s: photons", path, f->title);
        return NB_OK;
    }
    nb_info("'%s' read as %s: %d-bit counts, offset %g (%s), gain %g, overload %.0f (%s); untrusted: %zu negative, %zu "
            "overloaded pixels",
            path, f->title, out->bits, out->offset, out->offset_stated ? "the file's" : "the plan's ADC", out->gain,
            out->overload, out->overload_stated ? "the file's" : "the counter's top", out->nnegative, out->noverloaded);
    return NB_OK;
}

void nb_image_file_free(nb_image_file *f)
{
    free(f->photons);
    free(f->counts);
    free(f->untrusted);
    memset(f, 0, sizeof *f);
}
