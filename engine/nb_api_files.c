/* nb_api_files.c - the engine's one door to formats/ (docs/architecture.md):
 * the readers nb-geom hands its loop for -img, -mask, -panels and -expt,
 * handed to nb_api_args.c's loop the same way (nb_api_file_hooks), and nb.h's
 * image files: nb_image_read by the format registry's one reader
 * (formats/image_read.c, the rule for counts nb-convert --import and nb-fit
 * --observed follow), nb_image_write by the registry's one-frame writers,
 * nb-convert's (formats/frame_write.c and each format's write_image).  Nothing here prints or
 * exits: errors are statuses with the readers' messages. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "detector_file.h"
#include "frame_write.h"
#include "nb_api.h"
#include "nb_image.h"
#include "nb_image_record.h"
#include "nb_tuning.h"
#include "nb_util.h"
#include "registry.h"
#include "smv.h"

/* ---- nb-geom's file flags --------------------------------------------------- */

/* as tools/nb-geom.c gives them, less its own options (nb.h refuses those) */
static const nb_args_hooks file_hooks = {NULL, NULL, nb_smv_apply_to_request, nb_detector_file_read,
                                         nb_experiment_list_read};

const nb_args_hooks *nb_api_file_hooks(void) { return &file_hooks; }

/* ---- the image structure -------------------------------------------------- */

/* the first nb.h's structure: the least a caller's size may be */
#define IMAGE_DATA_SIZE_1 sizeof(nb_image_data)

void nb_image_data_init(nb_image_data *image)
{
    if (!image) return;
    memset(image, 0, sizeof *image);
    image->size = sizeof *image;
    image->gain = 1.0;
    image->bits = 16;
}

void nb_image_data_free(nb_image_data *image)
{
    if (!image) return;
    free(image->photons);
    free(image->counts);
    free(image->untrusted);
    nb_image_data_init(image);
}

static nb_status check_size(const char *who, const nb_image_data *image)
{
    if (!image) return nb_error_set(NB_ERR_USAGE, "%s: no image", who);
    if (image->size < IMAGE_DATA_SIZE_1)
        return nb_error_set(NB_ERR_USAGE, "%s: the image's size is %zu, not sizeof(nb_image_data) (%zu): "
                                          "give it to nb_image_data_init first",
                            who, image->size, IMAGE_DATA_SIZE_1);
    return NB_OK;
}

/* The registry's image into the caller's structure (the arrays taken over). */
static void image_from_file(nb_image_file *f, nb_image_data *out)
{
    nb_image_data d;
    nb_image_data_init(&d);
    d.size = out->size;
    d.width = f->width, d.height = f->height, d.pixels = f->npixels;
    d.is_counts = f->is_counts;
    d.photons = f->photons, d.counts = f->counts, d.untrusted = f->untrusted;
    f->photons = NULL, f->counts = NULL, f->untrusted = NULL;
    if (d.is_counts) {
        d.bits = f->bits;
        d.offset = f->offset, d.gain = f->gain, d.overload = f->overload;
        d.offset_stated = f->offset_stated, d.overload_stated = f->overload_stated;
        d.negative = f->nnegative, d.overloaded = f->noverloaded;
    }
    d.format = f->format ? f->format->name : "";
    memcpy(out, &d, sizeof d);
}

/* ---- reading ----------------------------------------------------------------- */

int nb_image_read(const char *path, const nb_renderer *r, long frame, nb_image_data *image)
{
    static const char who[] = "nb_image_read";
    nb_status st = check_size(who, image);
    if (st) return nb_api_result(st);
    const size_t size = image->size;
    nb_image_data_init(image);
    image->size = size;
    if (!path) return nb_api_result(nb_error_set(NB_ERR_USAGE, "%s: no path", who));
    if (frame < 0) return nb_api_result(nb_error_set(NB_ERR_USAGE, "%s: '%s': frame %ld is negative", who, path, frame));
    const nb_format *f = nb_format_of_file(path);
    if (frame > 0 && f && f->read && !f->frames)
        return nb_api_result(nb_error_set(NB_ERR_USAGE, "%s: '%s' is %s, one image: frame %ld is out of range (0)",
                                          who, path, f->title, frame));
    nb_image_file file;
    st = nb_image_file_read(path, r ? &r->plan : NULL, frame, &file);
    if (!st) image_from_file(&file, image);
    nb_image_file_free(&file);
    if (st && !strstr(nb_error_message(), who)) nb_error_prefix(st, "%s", who);
    return nb_api_result(st);
}

/* ---- writing ----------------------------------------------------------------- */

/* What nb_image_write writes: the formats of one image a frame */
static nb_status write_format(const char *who, const char *path, const char *name, const nb_format **out)
{
    const nb_format *f = name ? nb_format_by_name(name) : nb_format_by_suffix(path);
    if (!name && !f) {
        /* nb-convert -o takes a name without a suffix as raw float32 */
        const nb_format *g = nb_format_of_file(path);
        if (g && g == nb_format_unsuffixed() && !strrchr(path, '.')) f = g;
    }
    if (!f)
        return name ? nb_error_set(NB_ERR_USAGE, "%s: unknown format '%s'", who, name)
                    : nb_error_set(NB_ERR_USAGE, "%s: '%s': no format has its suffix: name one", who, path);
    if (f->writer != NB_WRITE_FRAME || !f->write_image)
        return nb_error_set(NB_ERR_USAGE, "%s: '%s': %s is not written one image at a time (writable: %s)", who, path,
                            f->title, nb_format_written_list(NB_WRITE_FRAME));
    *out = f;
    return NB_OK;
}

/* The plan whose frame heads the file: the renderer's, or nb-geom's for a
 * detector of the image's size */
static nb_status header_plan(const char *who, const nb_image_data *image, const nb_renderer *r, nb_plan *own,
                             const nb_plan **plan)
{
    if (r) {
        *plan = &r->plan;
        return NB_OK;
    }
    char w[24], h[24];
    snprintf(w, sizeof w, "%d", image->width);
    snprintf(h, sizeof h, "%d", image->height);
    /* nb-geom needs a crystal; no header states it */
    const char *argv[] = {"-detpixels_f", w, "-detpixels_s", h, "-cell", "100", "100", "100", "90", "90", "90"};
    nb_status st = nb_api_plan_from_args(who, (int)(sizeof argv / sizeof argv[0]), argv, own);
    *plan = own;
    return st;
}

/* The image's arrays as nb-convert's frame holds them: photons (from the
 * counts, (counts - offset) / gain, when there are none) and int32 counts */
static nb_status frame_arrays(const nb_image_data *image, float **photons, int32_t **counts)
{
    const size_t n = image->pixels;
    *photons = NULL, *counts = NULL;
    if (!image->is_counts) return NB_OK;
    nb_status st = nb_alloc_large((void **)photons, n ? n : 1, sizeof **photons, "the photons");
    if (!st) st = nb_alloc_large((void **)counts, n ? n : 1, sizeof **counts, "the counts");
    if (st) return st;
    const double gain = image->gain > 0 ? image->gain : 1.0;
    for (size_t i = 0; i < n; i++) {
        double c = image->counts[i];
        (*photons)[i] = (float)((c - image->offset) / gain);
        (*counts)[i] = c >= 2147483647.0 ? INT32_MAX : c <= -2147483648.0 ? INT32_MIN : (int32_t)lrint(c);
    }
    return NB_OK;
}

/* The frame nb-convert writes for frame `frame` of plan (its IMAGE keys in
 * im): the pixels, their statistics and the reference's scales */
static nb_status make_frame(const nb_plan *plan, long frame, const nb_image_data *image, const float *photons,
                            const int32_t *counts, nb_image_info *im, nb_frame *fr)
{
    memset(fr, 0, sizeof *fr);
    nb_image_info_init(im);
    im->frame = frame, im->has.frame = 1;
    im->nframes = plan->nframes, im->has.nframes = 1;
    im->fpixels = plan->panels[0].fpixels, im->spixels = plan->panels[0].spixels;
    im->phi_start = plan->phi0, im->has.phi_start = 1;
    im->phi_range = plan->osc, im->has.phi_range = 1;
    if (counts) im->counts_gain = image->gain, im->has.counts_gain = 1;
    fr->plan = plan, fr->im = im, fr->frame = frame;
    fr->width = image->width, fr->height = image->height;
    fr->photons = photons;
    fr->counts = counts;
    fr->counts_bits = image->bits == 32 ? 32 : 16;
    fr->counts_adc = image->offset;
    nb_roi roi = {plan->panels[0].roi_xmin, plan->panels[0].roi_xmax, plan->panels[0].roi_ymin,
                  plan->panels[0].roi_ymax};
    size_t bad = nb_first_nonfinite(photons, image->pixels);
    if (bad < image->pixels)
        return nb_error_set(NB_ERR_DATA, "pixel %zu (fast %zu, slow %zu) is not a finite number", bad,
                            bad % (size_t)image->width, bad / (size_t)image->width);
    nb_status st = nb_image_stats(photons, fr->width, fr->height, roi, plan->panels[0].mask, &fr->stats);
    fr->adc = plan->adc;
    fr->int_scale = nb_int_scale(plan->intfile_scale, fr->stats.max_I);
    fr->pgm_scale = nb_pgm_scale(plan->pgm_scale, fr->int_scale, fr->stats.rmsd);
    return st;
}

/* The image's pixels against the plan's: the same count, and one panel for
 * the formats of one */
static nb_status check_image(const char *who, const char *path, const nb_format *f, const nb_image_data *image,
                             const nb_plan *plan)
{
    if (image->width <= 0 || image->height <= 0 || image->pixels != (size_t)image->width * (size_t)image->height)
        return nb_error_set(NB_ERR_USAGE, "%s: '%s': the image is %d x %d pixels, %zu in all", who, path, image->width,
                            image->height, image->pixels);
    if (image->is_counts ? !image->counts : !image->photons)
        return nb_error_set(NB_ERR_USAGE, "%s: '%s': the image has no %s", who, path,
                            image->is_counts ? "counts" : "photons");
    if (image->pixels != nb_plan_total_pixels(plan))
        return nb_error_set(NB_ERR_USAGE, "%s: '%s': the image has %zu pixels, the renderer's plan %zu", who, path,
                            image->pixels, nb_plan_total_pixels(plan));
    if (!f->all_panels && nb_plan_npanels(plan) > 1)
        return nb_error_set(NB_ERR_USAGE, "%s: '%s': a detector of %d panels is written as raw float (bin); %s is "
                                          "one panel's",
                            who, path, nb_plan_npanels(plan), f->title);
    if (!f->all_panels && image->width != plan->panels[0].fpixels)
        return nb_error_set(NB_ERR_USAGE, "%s: '%s': the image is %d pixels wide, the plan's detector %d", who, path,
                            image->width, plan->panels[0].fpixels);
    return NB_OK;
}

/* The file, from the frame's plan (view) */
static nb_status write_file(const char *path, const nb_format *f, const nb_image_data *image, const nb_plan *view,
                            long frame)
{
    float *own_photons = NULL;
    int32_t *counts = NULL;
    nb_image_info im;
    nb_frame fr;
    nb_status st = frame_arrays(image, &own_photons, &counts);
    const float *photons = image->is_counts ? own_photons : image->photons;
    nb_image_info_init(&im);
    if (!st && f->write_photons) {
        /* every panel's photons, no header */
        st = f->write_photons(path, photons, image->pixels);
        free(counts);
        free(own_photons);
        return st;
    }
    /* an SMV's beam centre as dxtbx reads it (nb-convert -o x.img's) */
    const nb_frame_write_opts w = {counts != NULL, NB_SMV_BEAM_DXTBX};
    if (!st) st = make_frame(view, frame, image, photons, counts, &im, &fr);
    if (!st) st = nb_frame_write_image(f, &w, path, path, &fr);
    nb_image_info_free(&im);
    free(own_photons);
    free(counts);
    return st;
}

int nb_image_write(const char *path, const char *format, const nb_image_data *image, const nb_renderer *r, long frame)
{
    static const char who[] = "nb_image_write";
    nb_status st = check_size(who, image);
    if (!st && !path) st = nb_error_set(NB_ERR_USAGE, "%s: no path", who);
    const nb_format *f = NULL;
    if (!st) st = write_format(who, path, format, &f);
    const long nframes = r ? r->plan.nframes : 1;
    if (!st && (frame < 0 || frame >= (nframes > 0 ? nframes : 1)))
        st = nb_error_set(NB_ERR_USAGE, "%s: '%s': frame %ld is out of range (0 to %ld)", who, path, frame,
                          (nframes > 0 ? nframes : 1) - 1);
    if (st) return nb_api_result(st);
    nb_plan own, view;
    nb_source *sources = NULL;
    const nb_plan *plan = NULL;
    nb_plan_init(&own);
    if (!r && f->write_photons && image->width > 0 && image->height > 0 && image->photons && !image->is_counts &&
        image->pixels == (size_t)image->width * (size_t)image->height)
        st = f->write_photons(path, image->photons, image->pixels); /* no header: no plan */
    else if (image->width > 0 && image->height > 0) st = header_plan(who, image, r, &own, &plan);
    else st = nb_error_set(NB_ERR_USAGE, "%s: '%s': the image is %d x %d pixels", who, path, image->width,
                           image->height);
    if (!st && plan) st = check_image(who, path, f, image, plan);
    if (!st && plan) st = nb_engine_frame(plan, frame, &view, &sources);
    if (!st && plan) st = write_file(path, f, image, &view, frame);
    free(sources);
    nb_plan_free(&own);
    if (st && !strstr(nb_error_message(), who)) nb_error_prefix(st, "%s", who);
    return nb_api_result(st);
}
