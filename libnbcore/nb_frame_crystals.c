/* nb_frame_crystals.c - per-frame crystals (nb_frame_crystal, nb_plan.h):
 * a series whose every frame has a crystal, size, fluence and wavelength of
 * its own (nb-geom -expt from a DIALS list of stills; nb-fit's per-frame
 * refinement), how a frame's view takes its crystal (the reciprocal vectors
 * and the cell's parameters worked out from the real ones), any plan's
 * frame crystal as its view sees it, and the PLAN key FRAME_CRYSTALS with
 * its array (docs/stream-format.md); beside them each frame's own mosaic
 * spread (frame_mosaic: nb-fit --refine-frame mosaic) and identifier
 * (frame_ids: a DIALS list's, kept). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nb_plan.h"
#include "nb_stills.h"
#include "nb_util.h"
#include "nb_vec.h"

/* numbers per frame in the record's array: a b c (9), Na Nb Nc, fluence, lambda, status */
#define FC_WORDS 15

/* a b c in Angstrom, and the volume they span (Angstrom^3) */
static double angstrom_cell(const nb_frame_crystal *fc, double a[3], double b[3], double c[3])
{
    double bxc[3];
    for (int k = 0; k < 3; k++) a[k] = 1e10 * fc->a[k], b[k] = 1e10 * fc->b[k], c[k] = 1e10 * fc->c[k];
    nb_vcross(b, c, bxc);
    return nb_vdot(a, bxc);
}

nb_status nb_frame_crystal_check(const nb_frame_crystal *fc, long frame, nb_status code, const char *who)
{
    const double *v[3] = {fc->a, fc->b, fc->c};
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 3; k++)
            if (!isfinite(v[i][k]))
                return nb_error_set(code, "%s: frame %ld's crystal holds a non-finite number", who, frame + 1);
    if (!(fc->Na >= 1 && fc->Nb >= 1 && fc->Nc >= 1 && fc->Na <= 1e6 && fc->Nb <= 1e6 && fc->Nc <= 1e6))
        return nb_error_set(code, "%s: frame %ld's crystal is not 1 .. 1000000 unit cells a side", who, frame + 1);
    if (!(fc->fluence > 0) || !isfinite(fc->fluence))
        return nb_error_set(code, "%s: frame %ld's fluence must be positive", who, frame + 1);
    if (!(fc->lambda > 0) || !isfinite(fc->lambda))
        return nb_error_set(code, "%s: frame %ld's wavelength must be positive", who, frame + 1);
    if (fc->status != 0 && fc->status != NB_FRAME_FAILED)
        return nb_error_set(code, "%s: frame %ld's status must be 0 or %d", who, frame + 1, NB_FRAME_FAILED);
    double a[3], b[3], c[3];
    double V = angstrom_cell(fc, a, b, c), scale = nb_vnorm(a) * nb_vnorm(b) * nb_vnorm(c);
    /* a cell flatter than this is no crystal (and its reciprocal vectors overflow) */
    if (!(fabs(V) > 1e-9 * scale) || !isfinite(V))
        return nb_error_set(code, "%s: frame %ld's cell vectors are degenerate (no volume)", who, frame + 1);
    return NB_OK;
}

void nb_frame_crystal_apply(const nb_frame_crystal *fc, nb_plan *view)
{
    double a[3], b[3], c[3], axb[3], bxc[3], cxa[3];
    double V = angstrom_cell(fc, a, b, c);
    memcpy(view->cell_a, fc->a, sizeof view->cell_a);
    memcpy(view->cell_b, fc->b, sizeof view->cell_b);
    memcpy(view->cell_c, fc->c, sizeof view->cell_c);
    /* as the resolver's round trip (nb_cell_real_from_reciprocal): a* = b x c / V, 1/Angstrom */
    nb_vcross(a, b, axb);
    nb_vcross(b, c, bxc);
    nb_vcross(c, a, cxa);
    for (int k = 0; k < 3; k++) {
        view->recip_a[k] = bxc[k] / V;
        view->recip_b[k] = cxa[k] / V;
        view->recip_c[k] = axb[k] / V;
    }
    /* lengths (Angstrom) and angles (degrees) for the headers */
    const double *e[3] = {a, b, c};
    for (int i = 0; i < 3; i++) view->unit_cell[i] = nb_vnorm(e[i]);
    for (int i = 0; i < 3; i++) {
        const double *x = e[(i + 1) % 3], *y = e[(i + 2) % 3];
        double xy[3];
        nb_vcross(x, y, xy);
        view->unit_cell[3 + i] = atan2(nb_vnorm(xy), nb_vdot(x, y)) * 180.0 / M_PI;
    }
    view->Na = fc->Na, view->Nb = fc->Nb, view->Nc = fc->Nc;
    view->fluence = fc->fluence;
    view->lambda0 = fc->lambda;
}

nb_status nb_plan_set_frame_crystals(nb_plan *p, const nb_frame_crystal *fc)
{
    nb_status st;
    if (p->nframes < 1) return nb_error_set(NB_ERR_DATA, "frame crystals of a plan without frames");
    for (long i = 0; i < p->nframes; i++)
        if ((st = nb_frame_crystal_check(&fc[i], i, NB_ERR_DATA, "frame crystals"))) return st;
    nb_frame_crystal *copy;
    if ((st = nb_calloc((void **)&copy, (size_t)p->nframes, sizeof *copy, "frame crystals"))) return st;
    memcpy(copy, fc, (size_t)p->nframes * sizeof *copy);
    free(p->frame_crystals);
    p->frame_crystals = copy;
    /* the plan's own crystal is frame 0's, its wavelength the plan's */
    const double lambda0 = p->lambda0;
    nb_frame_crystal_apply(&copy[0], p);
    p->lambda0 = lambda0;
    return NB_OK;
}

void nb_plan_frame_crystal(const nb_plan *series, long frame, nb_frame_crystal *out)
{
    if (series->frame_crystals && frame >= 0 && frame < series->nframes) {
        *out = series->frame_crystals[frame];
        return;
    }
    nb_plan view;
    nb_plan_frame_view(series, frame, &view);
    memset(out, 0, sizeof *out);
    memcpy(out->a, view.cell_a, sizeof out->a);
    memcpy(out->b, view.cell_b, sizeof out->b);
    memcpy(out->c, view.cell_c, sizeof out->c);
    out->Na = view.Na, out->Nb = view.Nb, out->Nc = view.Nc;
    out->fluence = view.fluence;
    out->lambda = series->lambda0;
    if (series->stills.on && series->stills.spikes > 0) {
        /* a shot's wavelength is its spikes' mean: the spectrum written as
         * frame spectra (nb_spectra.h) renders as the spikes did */
        nb_still_shot shot;
        double sum = 0.0;
        nb_still_draw(series, frame, &shot);
        for (int k = 0; k < shot.spikes; k++) sum += shot.spike[k];
        out->lambda = series->lambda0 * (1.0 + sum / shot.spikes);
    }
}

/* ---- PLAN keys ---------------------------------------------------------------- */

nb_status nb_frame_crystals_to_record(const nb_plan *p, nb_record *rec)
{
    if (!p->frame_crystals) return NB_OK;
    double *w;
    nb_hdr_set_long(rec, "FRAME_CRYSTALS", p->nframes);
    nb_status st = nb_record_add_array(rec, "frame_crystals", NB_F64, (size_t)p->nframes * FC_WORDS, NULL, (void **)&w);
    if (st) return st;
    for (long i = 0; i < p->nframes; i++, w += FC_WORDS) {
        const nb_frame_crystal *fc = &p->frame_crystals[i];
        memcpy(w, fc->a, 3 * sizeof *w);
        memcpy(w + 3, fc->b, 3 * sizeof *w);
        memcpy(w + 6, fc->c, 3 * sizeof *w);
        w[9] = fc->Na, w[10] = fc->Nb, w[11] = fc->Nc;
        w[12] = fc->fluence, w[13] = fc->lambda, w[14] = fc->status;
    }
    return NB_OK;
}

nb_status nb_frame_crystals_from_record(const nb_record *rec, nb_plan *p)
{
    nb_status st;
    int n;
    if (!nb_hdr_has(rec, "FRAME_CRYSTALS")) {
        if (nb_record_has_array(rec, "frame_crystals"))
            return nb_error_set(NB_ERR_DATA, "PLAN record: a frame_crystals array without FRAME_CRYSTALS");
        return NB_OK;
    }
    if ((st = nb_hdr_get_int(rec, "FRAME_CRYSTALS", &n))) return st;
    if (n != p->nframes) return nb_error_set(NB_ERR_DATA, "PLAN record: FRAME_CRYSTALS must be NFRAMES (%d)", p->nframes);
    if (p->stills.on)
        return nb_error_set(NB_ERR_DATA, "PLAN record: FRAME_CRYSTALS and STILLS do not go together (a frame's "
                                         "crystal is either stored or drawn)");
    const void *data;
    size_t count;
    if ((st = nb_record_get_array(rec, "frame_crystals", NB_F64, &data, &count))) return st;
    if (count != (size_t)n * FC_WORDS)
        return nb_error_set(NB_ERR_DATA, "PLAN record: the frame_crystals array does not hold %d numbers per frame",
                            FC_WORDS);
    nb_frame_crystal *fc;
    if ((st = nb_calloc((void **)&fc, (size_t)n, sizeof *fc, "frame crystals"))) return st;
    const double *w = data;
    for (int i = 0; i < n && !st; i++, w += FC_WORDS) {
        memcpy(fc[i].a, w, 3 * sizeof *w);
        memcpy(fc[i].b, w + 3, 3 * sizeof *w);
        memcpy(fc[i].c, w + 6, 3 * sizeof *w);
        fc[i].Na = w[9], fc[i].Nb = w[10], fc[i].Nc = w[11];
        fc[i].fluence = w[12], fc[i].lambda = w[13];
        fc[i].status = w[14] == 0 ? 0 : w[14] == NB_FRAME_FAILED ? NB_FRAME_FAILED : -1;
        st = nb_frame_crystal_check(&fc[i], i, NB_ERR_DATA, "PLAN record: FRAME_CRYSTALS");
    }
    if (!st) {
        free(p->frame_crystals);
        p->frame_crystals = fc;
    } else free(fc);
    return st;
}

/* ---- per-frame mosaic spreads ------------------------------------------------- */

int nb_plan_mosaic_rescalable(const nb_plan *p)
{
    return p->mosaic_spread > 0.0 && p->mosaic_umats_spread > 0.0 && p->mosaic_domains > 1;
}

/* spread[] into p (its own copy), sane: finite, 0 .. pi, and domains to rescale */
static nb_status frame_mosaic_set(nb_plan *p, const double *spread, const char *who)
{
    if (p->nframes < 1) return nb_error_set(NB_ERR_DATA, "%s: a plan without frames", who);
    if (!nb_plan_mosaic_rescalable(p))
        return nb_error_set(NB_ERR_DATA, "%s: per-frame mosaic spreads need the plan's mosaic domains "
                                         "(MOSAIC_SPREAD > 0, MOSAIC_DOMAINS > 1: nb-geom -mosaic DEG -mosaic_domains N)",
                            who);
    for (long i = 0; i < p->nframes; i++)
        if (!(spread[i] >= 0.0) || !isfinite(spread[i]) || spread[i] > M_PI)
            return nb_error_set(NB_ERR_DATA, "%s: frame %ld's mosaic spread must be 0 .. pi rad", who, i + 1);
    double *copy;
    nb_status st = nb_calloc((void **)&copy, (size_t)p->nframes, sizeof *copy, "frame mosaic spreads");
    if (st) return st;
    memcpy(copy, spread, (size_t)p->nframes * sizeof *copy);
    free(p->frame_mosaic);
    p->frame_mosaic = copy;
    return NB_OK;
}

nb_status nb_plan_set_frame_mosaic(nb_plan *p, const double *spread)
{
    return frame_mosaic_set(p, spread, "frame mosaic spreads");
}

nb_status nb_frame_mosaic_to_record(const nb_plan *p, nb_record *rec)
{
    if (!p->frame_mosaic) return NB_OK;
    return nb_record_add_array(rec, "frame_mosaic", NB_F64, (size_t)p->nframes, p->frame_mosaic, NULL);
}

nb_status nb_frame_mosaic_from_record(const nb_record *rec, nb_plan *p)
{
    if (!nb_record_has_array(rec, "frame_mosaic")) return NB_OK;
    const void *data;
    size_t count;
    nb_status st = nb_record_get_array(rec, "frame_mosaic", NB_F64, &data, &count);
    if (st) return st;
    if (count != (size_t)p->nframes)
        return nb_error_set(NB_ERR_DATA, "PLAN record: the frame_mosaic array does not hold NFRAMES (%d) numbers",
                            p->nframes);
    return frame_mosaic_set(p, data, "PLAN record: frame_mosaic");
}

/* ---- frame identifiers ------------------------------------------------------ */

/* the longest identifier kept (DIALS's are 36-character UUIDs) */
#define FRAME_ID_MAX 255

static nb_status frame_id_check(const char *id, size_t len, long frame, const char *who)
{
    if (len == 0 || len > FRAME_ID_MAX)
        return nb_error_set(NB_ERR_DATA, "%s: frame %ld's identifier is %s", who, frame,
                            len ? "over 255 characters" : "empty");
    for (size_t i = 0; i < len; i++)
        if (id[i] < 0x20 || id[i] > 0x7e)
            return nb_error_set(NB_ERR_DATA, "%s: frame %ld's identifier holds a byte that is not printable ASCII",
                                who, frame);
    return NB_OK;
}

/* the plan's identifiers from `bytes` (n of them, each NUL-ended), checked */
static nb_status frame_ids_set(nb_plan *p, const char *bytes, size_t len, const char *who)
{
    size_t at = 0;
    for (long f = 0; f < p->nframes; f++) {
        const char *end = at < len ? memchr(bytes + at, '\0', len - at) : NULL;
        if (!end) return nb_error_set(NB_ERR_DATA, "%s: %d identifiers expected (NFRAMES), %ld found", who, p->nframes, f);
        nb_status st = frame_id_check(bytes + at, (size_t)(end - (bytes + at)), f + 1, who);
        if (st) return st;
        at = (size_t)(end - bytes) + 1;
    }
    if (at != len) return nb_error_set(NB_ERR_DATA, "%s: more identifiers than NFRAMES (%d)", who, p->nframes);
    char *copy = malloc(len ? len : 1);
    if (!copy) return nb_error_set(NB_ERR_NOMEM, "out of memory for the frames' identifiers");
    memcpy(copy, bytes, len);
    free(p->frame_ids);
    p->frame_ids = copy, p->frame_ids_bytes = len;
    return NB_OK;
}

nb_status nb_plan_set_frame_ids(nb_plan *p, const char *const *ids)
{
    size_t len = 0;
    for (long f = 0; f < p->nframes; f++) len += strlen(ids[f]) + 1;
    char *bytes = malloc(len ? len : 1);
    if (!bytes) return nb_error_set(NB_ERR_NOMEM, "out of memory for the frames' identifiers");
    size_t at = 0;
    for (long f = 0; f < p->nframes; f++) {
        const size_t n = strlen(ids[f]) + 1;
        memcpy(bytes + at, ids[f], n);
        at += n;
    }
    nb_status st = frame_ids_set(p, bytes, len, "frame identifiers");
    free(bytes);
    return st;
}

const char *nb_plan_frame_id(const nb_plan *p, long frame)
{
    if (!p->frame_ids || frame < 0 || frame >= p->nframes) return NULL;
    const char *id = p->frame_ids;
    for (long f = 0; f < frame; f++) id += strlen(id) + 1;
    return id;
}

nb_status nb_frame_ids_to_record(const nb_plan *p, nb_record *rec)
{
    if (!p->frame_ids) return NB_OK;
    return nb_record_add_array(rec, "frame_ids", NB_U8, p->frame_ids_bytes, p->frame_ids, NULL);
}

nb_status nb_frame_ids_from_record(const nb_record *rec, nb_plan *p)
{
    if (!nb_record_has_array(rec, "frame_ids")) return NB_OK;
    const void *data;
    size_t count;
    nb_status st = nb_record_get_array(rec, "frame_ids", NB_U8, &data, &count);
    if (st) return st;
    return frame_ids_set(p, data, count, "PLAN record: frame_ids");
}
