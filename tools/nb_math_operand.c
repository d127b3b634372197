/* nb_math_operand.c - nb-math's operand streams: read as far as the main
 * stream's frames need, each image checked (its plan's size, no counts) as
 * it comes; a stream of one frame kept to serve every frame, a series'
 * frames found by number; and the check that an operand's detector is the
 * main stream's, field by field of the panel table (nb_panel_differs). */
#include "nb_math.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_util.h"

nb_status math_operand_open(math_operand *op)
{
    op->one_frame = -1;
    return nb_reader_open(&op->r, op->path);
}

static void free_image(math_image *m)
{
    nb_image_info_free(&m->im);
    nb_record_free(&m->rec);
}

void math_operand_close(math_operand *op)
{
    for (int i = 0; i < op->nheld; i++) free_image(&op->held[i]);
    for (int i = 0; i < op->nplans; i++) nb_plan_free(&op->plans[i]);
    free(op->held);
    free(op->plans);
    nb_reader_close(op->r);
    op->held = NULL, op->plans = NULL, op->r = NULL;
    op->nheld = op->capheld = op->nplans = 0;
}

static nb_status add_plan(math_operand *op, const nb_record *rec)
{
    nb_plan *p = realloc(op->plans, ((size_t)op->nplans + 1) * sizeof *p);
    if (!p) return nb_error_set(NB_ERR_NOMEM, "out of memory for the plans of %s", op->path);
    op->plans = p;
    nb_status st = nb_plan_from_record(rec, &op->plans[op->nplans]);
    if (st) return nb_error_prefix(st, "%s", op->path);
    op->nplans++;
    return NB_OK;
}

/* The IMAGE record *rec (taken: its memory is the operand's now), checked
 * against its plan, into the images held. */
static nb_status add_image(math_operand *op, nb_record *rec)
{
    if (op->nheld == op->capheld) {
        int cap = op->capheld ? 2 * op->capheld : 4;
        math_image *h = realloc(op->held, (size_t)cap * sizeof *h);
        if (!h) {
            nb_record_free(rec);
            return nb_error_set(NB_ERR_NOMEM, "out of memory for the images of %s", op->path);
        }
        op->held = h, op->capheld = cap;
    }
    math_image *m = &op->held[op->nheld];
    m->rec = *rec;
    memset(rec, 0, sizeof *rec);
    nb_status st = nb_image_from_record(&m->rec, &m->im);
    if (st) {
        nb_record_free(&m->rec);
        return nb_error_prefix(st, "%s", op->path);
    }
    st = nb_image_check_plan(&m->im, op->nplans ? &op->plans[op->nplans - 1] : NULL);
    if (!st && m->im.has_counts)
        st = nb_error_set(NB_ERR_DATA,
                          "frame %ld holds detector counts (nb-noise has run): nb-math adds photons, before the "
                          "noise; use the stream nb-sim wrote",
                          m->im.frame + 1);
    if (st) {
        free_image(m);
        return nb_error_prefix(st, "%s", op->path);
    }
    m->plan = op->nplans - 1;
    op->nheld++;
    if (!nb_image_is_grad(&m->im)) op->images++;
    return NB_OK;
}

/* The operand's next record: a PLAN or an IMAGE kept, anything else passed
 * over; op->eof at the end of its stream. */
static nb_status read_one(math_operand *op)
{
    nb_record rec;
    int eof = 0;
    memset(&rec, 0, sizeof rec);
    nb_status st = nb_reader_next(op->r, &rec, &eof);
    if (!st && eof) op->eof = 1;
    if (!st && !eof && nb_record_is(&rec, "IMAGE")) return add_image(op, &rec);
    if (!st && !eof && nb_record_is(&rec, "PLAN")) st = add_plan(op, &rec);
    nb_record_free(&rec);
    return st;
}

/* One frame or a series: read up to the first image of photons; a plan of
 * one frame (NFRAMES 1) makes a one-frame operand, read whole now, which
 * must hold that one image (and its derivatives) only. */
static nb_status classify(math_operand *op)
{
    nb_status st = NB_OK;
    while (!st && !op->images && !op->eof) st = read_one(op);
    if (st) return st;
    if (!op->images) return nb_image_none(op->path);
    const math_image *first = NULL;
    for (int i = 0; i < op->nheld && !first; i++)
        if (!nb_image_is_grad(&op->held[i].im)) first = &op->held[i];
    if (first->im.nframes > 1) {
        op->one_frame = 0;
        return NB_OK;
    }
    while (!st && !op->eof) st = read_one(op);
    if (st) return st;
    if (op->images > 1)
        return nb_error_set(NB_ERR_DATA,
                            "%s: %ld images of one-frame plans (NFRAMES=1): nb-math cannot tell which one to add "
                            "(a series' images have the series' NFRAMES)",
                            op->path, op->images);
    op->one_frame = 1;
    return NB_OK;
}

static int matches(const math_operand *op, const math_image *m, long frame, const char *grad_of)
{
    return strcmp(m->im.grad_of, grad_of) == 0 && (op->one_frame || m->im.frame == frame);
}

nb_status math_operand_find(math_operand *op, long frame, const char *grad_of, const math_image **img,
                            const nb_plan **plan)
{
    nb_status st = op->one_frame < 0 ? classify(op) : NB_OK;
    for (int scanned = 0; !st;) {
        for (; scanned < op->nheld; scanned++)
            if (matches(op, &op->held[scanned], frame, grad_of)) {
                *img = &op->held[scanned];
                *plan = &op->plans[op->held[scanned].plan];
                return NB_OK;
            }
        if (op->eof) break;
        st = read_one(op);
    }
    if (st) return st;
    if (grad_of[0])
        return nb_error_set(NB_ERR_DATA,
                            "%s has no derivative by %s for frame %ld: render it with nb-sim --grad %s too, or the "
                            "main stream without derivatives",
                            op->path, grad_of, frame + 1, grad_of);
    return nb_error_set(NB_ERR_DATA,
                        "%s has no frame %ld: a series must hold every frame of the main stream (a stream of one "
                        "frame serves them all)",
                        op->path, frame + 1);
}

void math_operand_release(math_operand *op, const math_image *img)
{
    if (op->one_frame) return;
    int i = (int)(img - op->held);
    free_image(&op->held[i]);
    memmove(&op->held[i], &op->held[i + 1], (size_t)(op->nheld - i - 1) * sizeof *op->held);
    op->nheld--;
}

/* ---- the same detector ----------------------------------------------------- */

nb_status math_same_detector(const char *name, const nb_image_info *im, const nb_plan *plan,
                             const nb_image_info *main_im, const nb_plan *main_plan)
{
    const char *not_it = "not the main stream's detector";
    if (im->npanels != main_im->npanels)
        return nb_error_set(NB_ERR_DATA, "%s: %s: %d panel%s (the main stream's: %d)", name, not_it, im->npanels,
                            im->npanels == 1 ? "" : "s", main_im->npanels);
    for (int i = 0; i < im->npanels; i++) {
        int f, s, mf, ms;
        nb_plan_panel_dims(plan, i, &f, &s, NULL);
        nb_plan_panel_dims(main_plan, i, &mf, &ms, NULL);
        if (f == mf && s == ms) continue;
        if (im->npanels == 1)
            return nb_error_set(NB_ERR_DATA, "%s: %s: %d x %d pixels (the main stream's: %d x %d)", name, not_it, f,
                                s, mf, ms);
        return nb_error_set(NB_ERR_DATA, "%s: %s: panel %d is %d x %d pixels (the main stream's: %d x %d)", name,
                            not_it, i, f, s, mf, ms);
    }
    /* the panels' geometry and sensor; the ROI is what was rendered, not the
     * detector: a pixel outside an image's ROI is 0 there.  Numbers within
     * 1e-9 of the field's largest component are the same: two plans of one
     * detector resolve it to the same bits, but a plan read from another
     * program may round. */
    for (int i = 0; i < im->npanels; i++) {
        nb_panel_difference d;
        if (nb_panel_differs(&plan->panels[i], &main_plan->panels[i], i, NB_PANEL_DETECTOR_ONLY, 1e-9, &d))
            return nb_error_set(NB_ERR_DATA, "%s: %s: its plan's %s is %s (the main stream's: %s)", name, not_it,
                                d.key, d.a, d.b);
    }
    return NB_OK;
}
