/* nb_convert_write.c - nb-convert's frame to its outputs: the files held
 * until the stream has ended cleanly, the requests of a frame (the -o list
 * or the plan's), a frame of several panels as one file per panel or one
 * stacked image, and the dispatch of an IMAGE record to every output. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nb_image.h"
#include "nb_image_record.h"
#include "nb_tuning.h"
#include "frame_write.h"
#include "nb_options.h"
#include "xds_inp.h"
#include "nb_convert.h"

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
nb_status frame_path(const char *tmpl, long frame, char *out, size_t size)
{
    if (nb_frame_path(tmpl, frame, out, size) == 0) return NB_OK;
    const char *h = strchr(tmpl, '#');
    if (h && strchr(h + strspn(h, "#"), '#'))
        return nb_error_set(NB_ERR_USAGE, "'%s': only one run of '#' is allowed", tmpl);
    return nb_error_set(NB_ERR_USAGE, "'%s': the name is too long", tmpl);
}

/* The held outputs removed, the failure's message naming the file the user
 * named rather than its temporary (a writer's "cannot write") */
void abort_pending(void)
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

nb_status commit_pending(void)
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
nb_status claim_output(const char *final, unsigned long long bytes, char **target)
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

/* the reference's int-image scale (-scale, else 55000 / max) and ADC offset */
double int_scale_for(const nb_plan *plan, const conv_opts *o, double max_I)
{
    return nb_int_scale(o->have_scale ? o->scale : plan->intfile_scale, max_I);
}
double adc_for(const nb_plan *plan, const conv_opts *o) { return o->have_adc ? o->adc : plan->adc; }

/* Whether request o takes the frame's detector counts (an error when it must
 * and the stream has none) */
nb_status takes_counts(const out_request *o, const frame *fr, int *use_counts)
{
    *use_counts = o->source == SRC_COUNTS || (o->source == SRC_AUTO && fr->counts != NULL);
    if (o->source == SRC_COUNTS && !fr->counts)
        return nb_error_set(NB_ERR_USAGE, "'%s' needs detector counts but the stream has none: put nb-noise before "
                                          "nb-convert",
                            o->path);
    return NB_OK;
}

/* The file of request o for fr at path (final: its name when in place), of
 * a format written whole (its entry's write_image) */
static nb_status write_format(const out_request *o, const char *path, const char *final, const frame *fr)
{
    nb_frame_write_opts w = {0, o->smv_beam};
    nb_status st = takes_counts(o, fr, &w.use_counts);
    return st ? st : nb_frame_write_image(o->format, &w, path, final, fr);
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

/* The file of request k from a whole frame: a format written a band of rows
 * at a time through the row writer (rows_write_whole), the others at once. */
nb_status write_file(const out_request *q, int k, const frame *fr)
{
    return q->format->rows ? rows_write_whole(q, k, fr) : write_one(q, fr);
}

/* A detector of several panels: a format of every panel (raw float) holds
 * them all, one after another; a one-panel format is one file per panel
 * (panel_path), each with its panel's geometry and the image's common
 * scales. */
static nb_status write_panels(const out_request *o, int k, const frame *fr)
{
    const nb_plan *plan = fr->plan;
    if (o->format->all_panels) {
        frame all = *fr;
        all.width = (int)nb_plan_total_pixels(plan), all.height = 1;
        return write_file(o, k, &all);
    }
    nb_status st = NB_OK;
    for (int i = 0; i < nb_plan_npanels(plan) && !st; i++) {
        nb_plan view;
        char tmpl[NB_PATH_MAX];
        frame pf;
        nb_frame_panel(fr, i, &view, &pf);
        panel_path(o->path, i, tmpl, sizeof tmpl);
        out_request po = *o;
        po.path = tmpl;
        st = write_file(&po, k, &pf);
    }
    return st;
}

/* Whether request q is written as one stacked image of the panels: the
 * images (a file per frame: CBF, SMV) of an output that names them so, an
 * XDS.INP (XDS reads one file per frame; the stacking rule is
 * nb_xds_stack_row's, which the XDS.INP's SEGMENT= blocks describe). */
static int stacks_panels(const out_request *q, const out_request *list, int n)
{
    if (!q->format->processing_images || q->format->run_file) return 0;
    for (int k = 0; k < n; k++)
        if (list[k].format->names_images == NB_NAMES_FRAME_FILES) return 1;
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
        nb_frame_panel(fr, i, &view, &pf);
        if (!fr->counts && (st = nb_frame_int_counts(&pf, &ints))) break;
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
        nb_panel stack = view.panels[0]; /* the stacked image's own panel: the plan's stays */
        view.panels = &stack;
        stack.fpixels = nx, stack.spixels = ny;
        stack.roi_xmin = 0, stack.roi_xmax = nx - 1, stack.roi_ymin = 0, stack.roi_ymax = ny - 1;
        stack.mask = NULL;
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

/* A pixel that is not a finite number, named with its frame (counted from 1,
 * as the files' numbers: of a series, one frame of many may be wrong) and,
 * on a detector of panels (plan not NULL), its panel and its place there */
nb_status nonfinite_error(const nb_plan *plan, long frame, size_t bad, size_t width)
{
    const int npanels = plan ? nb_plan_npanels(plan) : 1;
    for (int i = 0; i < npanels && npanels > 1; i++) {
        int fp, sp;
        size_t off;
        nb_plan_panel_dims(plan, i, &fp, &sp, &off);
        if (bad < off || bad - off >= (size_t)fp * (size_t)sp) continue;
        const size_t at = bad - off;
        return nb_error_set(
            NB_ERR_DATA, "IMAGE record of frame %ld, panel %d: pixel %zu (fast %zu, slow %zu) is not a finite number",
            frame + 1, i, at, at % (size_t)fp, at / (size_t)fp);
    }
    return nb_error_set(NB_ERR_DATA, "IMAGE record of frame %ld: pixel %zu (fast %zu, slow %zu) is not a finite number",
                        frame + 1, bad, bad % width, bad / width);
}

/* The frame of an IMAGE record (its keys in im, checked against the plan
 * already) whose payload is there. */
nb_status prepare_frame(const nb_plan *plan, const nb_record *rec, const nb_image_info *im,
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
    nb_roi roi = {plan->panels[0].roi_xmin, plan->panels[0].roi_xmax, plan->panels[0].roi_ymin,
                  plan->panels[0].roi_ymax};
    if (im->has.max_I && im->has.rmsd) {
        fr->stats.max_I = im->max_I;
        fr->stats.rmsd = im->rmsd;
    } else if (im->npanels > 1) {
        /* over every pixel of every panel, as one row */
        nb_roi all = {0, (int)n, 0, 1};
        if ((st = nb_image_stats(fr->photons, (int)n, 1, all, NULL, &fr->stats))) return st;
    } else {
        if ((st = nb_image_stats(fr->photons, fr->width, fr->height, roi, plan->panels[0].mask, &fr->stats))) return st;
    }
    fr->adc = adc_for(plan, o);
    fr->int_scale = int_scale_for(plan, o, fr->stats.max_I);
    fr->pgm_scale = nb_pgm_scale(o->have_pgmscale ? o->pgmscale : plan->pgm_scale, fr->int_scale, fr->stats.rmsd);
    return NB_OK;
}

/* The reference's output files (-floatfile, -intfile, -noisefile, -pgmfile:
 * flag) as a request: raw float photons, SMV of the int image or of the
 * counts with nanoBragg's beam centre, the PGM (the formats by name) */
out_request reference_request(int flag, const char *path, int from_plan)
{
    switch (flag) {
    case FL_FLOATFILE: return (out_request){path, nb_format_by_name("bin"), SRC_AUTO, 0, from_plan, 0};
    case FL_INTFILE: return (out_request){path, nb_format_by_name("smv"), SRC_INT, NB_SMV_BEAM_REFERENCE, from_plan, 0};
    case FL_NOISEFILE:
        return (out_request){path, nb_format_by_name("smv"), SRC_COUNTS, NB_SMV_BEAM_REFERENCE, from_plan, 0};
    default: return (out_request){path, nb_format_by_name("pgm"), SRC_AUTO, 0, from_plan, 0};
    }
}

/* The files the plan asked for, when no -o was given. */
static int plan_requests(const nb_plan *p, const conv_opts *o, out_request *req)
{
    int n = 0;
    if (p->floatfile) req[n++] = reference_request(FL_FLOATFILE, p->floatfile, 1);
    if (p->intfile) req[n++] = reference_request(FL_INTFILE, p->intfile, 1);
    if (p->noisefile && p->calculate_noise) req[n++] = reference_request(FL_NOISEFILE, p->noisefile, 1);
    if (p->pgmfile && p->write_pgm && !o->nopgm) req[n++] = reference_request(FL_PGMFILE, p->pgmfile, 1);
    return n;
}

/* The requests for an image: the -o list, else what the plan asked for. */
out_request *frame_requests(const nb_plan *plan, const conv_opts *o, out_request req[8], int *n)
{
    if (o->nouts) {
        *n = o->nouts;
        return o->outs;
    }
    *n = plan_requests(plan, o, req);
    return req;
}

/* One IMAGE record to every requested file: its payload is there, or was all
 * written as it came (live) and not kept.  A record this run does not write
 * (a derivative, or an image with --grad) is passed over: *converted 0. */
nb_status convert_image(const nb_record *rec, const nb_plan *plan, const conv_opts *o, live_image *live,
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
        const nb_format_writer kind = list[k].format->writer;
        if (kind == NB_WRITE_SIDECAR) st = write_sidecar(&list[k], o, &fr);
        else if (kind == NB_WRITE_RUN) st = write_run(&list[k], k, o, &fr);
        else if ((st = rows_finish(&live->rows, k, &was_live)) || was_live || kind == NB_WRITE_STREAM) continue;
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
