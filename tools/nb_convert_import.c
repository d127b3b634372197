/* nb_convert_import.c - nb-convert --import: an image file, read by the one
 * image reader (formats/registry.h), becomes the IMAGE record after each
 * PLAN of the input stream (a file of a run's frames, NXmx: an IMAGE record
 * for each of the plan's frames), which goes on to standard output or -o
 * FILE.nbs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_image_record.h"
#include "frame_write.h"
#include "nb_convert.h"

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

/* The file's frame as an IMAGE record of the plan: all its panels (a
 * reader of one file per frame refuses a plan of several it cannot hold) */
static nb_status import_image(const char *path, const nb_plan *plan, long frame, nb_record *out)
{
    nb_status st;
    const size_t n = nb_plan_total_pixels(plan);
    nb_image_info im;
    nb_image_info_init(&im);
    im.frame = frame, im.has.frame = 1;
    im.panel = 0, im.has.panel = 1;
    im.fpixels = plan->panels[0].fpixels, im.spixels = plan->panels[0].spixels;
    snprintf(im.units, sizeof im.units, "photons");
    if (strlen(path) >= sizeof im.imported_from) return nb_error_set(NB_ERR_USAGE, "'%s': the name is too long", path);
    snprintf(im.imported_from, sizeof im.imported_from, "%s", path);
    nb_image_record_init(out);
    nb_image_file f;
    memset(&f, 0, sizeof f);
    if ((st = nb_image_set_panels(&im, plan)) || (st = nb_image_file_read(path, plan, frame, &f))) {
        nb_image_file_free(&f);
        nb_image_info_free(&im);
        return nb_error_prefix(st, "--import");
    }
    if (f.npixels != n)
        st = nb_error_set(NB_ERR_DATA, "--import '%s': %zu pixels, the plan's panels %zu", path, f.npixels, n);
    else if (f.is_counts) {
        st = import_counts(out, &im, plan, &f, path);
    } else {
        /* float samples are photons */
        st = nb_image_add_pixels(out, n, f.photons, NULL);
        if (!st) st = nb_image_put_header(&im, out, NB_IMAGE_ALL_KEYS);
    }
    nb_image_file_free(&f);
    nb_image_info_free(&im);
    return st;
}

/* The input stream passed through, each PLAN followed by the imported
 * image (the stream's own IMAGE records replaced by it) */
nb_status import_stream(nb_reader *r, const conv_opts *o)
{
    nb_writer *w = NULL;
    nb_record rec;
    int eof = 0, images = 0;
    nb_status st = NB_OK;
    memset(&rec, 0, sizeof rec);
    /* the stream goes on: to -o FILE.nbs or standard output */
    for (int k = 0; k < o->nouts; k++)
        if (o->outs[k].format->writer != NB_WRITE_STREAM)
            st = nb_error_set(NB_ERR_USAGE, "with --import the output is a stream (.nbs or standard output)");
    if (!st) st = nb_writer_open(&w, o->tee ? o->tee : "-");
    while (!st) {
        st = nb_reader_next(r, &rec, &eof);
        if (st || eof) break;
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
            /* a file of a run's frames (NXmx): every frame of it, the plan's */
            const nb_format *f = nb_format_of_file(o->import);
            const long frames = f && f->run_file ? p.nframes : 1;
            for (long frame = 0; frame < frames && !st; frame++) {
                st = import_image(o->import, &p, frame, &img);
                if (!st) st = nb_writer_put(w, &img);
                nb_record_free(&img);
            }
            nb_plan_free(&p);
            images++;
        }
    }
    if (!st && images == 0) st = nb_error_set(NB_ERR_DATA, "%s: the stream holds no PLAN record", nb_reader_name(r));
    nb_record_free(&rec);
    if (w) {
        if (!st) st = nb_writer_close(w);
        else nb_writer_abort(w);
    }
    return st;
}
