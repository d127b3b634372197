/* nb_fit_roi.c - the pixels a dataset fit compares: regions around the
 * spots, so that its cost grows with the spots and not with the detector.
 * A spot is a connected set of pixels where the model has --spot-photons or
 * more (a predicted spot), or where the observed image stands out of its
 * panel's median m by 5 sqrt(m + 1) (an observed one: the reflections the
 * start does not yet predict); each spot's box, grown by --roi-radius
 * pixels, is a region (a pixel in two boxes the first's); the region has
 * a background plane of its own.  Untrusted, masked and overloaded pixels are
 * never in a region.  The observed spots' centroids are also what the global
 * stage searches with. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nb_fit_ds.h"
#include "nb_util.h"

typedef struct box {
    int f0, f1, s0, s1; /* inclusive */
} box;

typedef struct grow {
    void *a;
    size_t n, cap, size;
} grow;

static nb_status grow_push(grow *g, const void *item)
{
    if (g->n == g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 64;
        void *a = realloc(g->a, cap * g->size);
        if (!a) return nb_error_set(NB_ERR_NOMEM, "out of memory for the regions");
        g->a = a, g->cap = cap;
    }
    memcpy((char *)g->a + g->n++ * g->size, item, g->size);
    return NB_OK;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double nb_fit_panel_median(const observed *ob, size_t off, size_t n)
{
    size_t stride = n / 65536 + 1, m = 0;
    double *v = malloc((n / stride + 1) * sizeof *v);
    if (!v) return 0.0;
    for (size_t i = 0; i < n; i += stride)
        if (ob->use[off + i]) v[m++] = ob->y[off + i];
    qsort(v, m, sizeof *v, cmp_double);
    double med = m ? v[m / 2] : 0.0;
    free(v);
    return med;
}

typedef struct spot_acc {
    double w, wf, ws;
} spot_acc;

/* The connected sets of marked pixels of one panel: their boxes (and, for
 * the observed image's, centroids into the frame's spots). */
static nb_status components(const unsigned char *mark, const observed *ob, size_t off, int fp, int sp, double med,
                            int panel, grow *boxes, grow *spots)
{
    const size_t n = (size_t)fp * sp;
    unsigned char *seen = calloc(n, 1);
    size_t *stack = malloc(n * sizeof *stack);
    nb_status st = seen && stack ? NB_OK : nb_error_set(NB_ERR_NOMEM, "out of memory for the regions");
    for (size_t start = 0; start < n && !st; start++) {
        if (!mark[start] || seen[start]) continue;
        box b = {fp, -1, sp, -1};
        spot_acc acc = {0, 0, 0};
        int observed_spot = 0;
        size_t top = 0;
        stack[top++] = start, seen[start] = 1;
        while (top) {
            const size_t i = stack[--top];
            const int f = (int)(i % fp), s = (int)(i / fp);
            b.f0 = f < b.f0 ? f : b.f0, b.f1 = f > b.f1 ? f : b.f1;
            b.s0 = s < b.s0 ? s : b.s0, b.s1 = s > b.s1 ? s : b.s1;
            if (mark[i] & 2) {
                const double w = ob->y[off + i] - med;
                observed_spot = 1;
                acc.w += w, acc.wf += w * (f + 0.5), acc.ws += w * (s + 0.5);
            }
            const size_t nb[4] = {f > 0 ? i - 1 : n, f < fp - 1 ? i + 1 : n, s > 0 ? i - fp : n, s < sp - 1 ? i + fp : n};
            for (int q = 0; q < 4; q++)
                if (nb[q] < n && mark[nb[q]] && !seen[nb[q]]) seen[nb[q]] = 1, stack[top++] = nb[q];
        }
        st = grow_push(boxes, &b);
        if (!st && observed_spot && acc.w >= 10.0) {
            float c[3] = {(float)panel, (float)(acc.wf / acc.w), (float)(acc.ws / acc.w)};
            st = grow_push(spots, c);
        }
    }
    free(seen);
    free(stack);
    return st;
}

/* Grow the boxes by r (clipped to the panel).  Boxes that overlap are not
 * merged (a chain of neighbours would make one region of a crowded panel,
 * one plane under many spots): a pixel belongs to the first box that holds it. */
static void grow_boxes(box *b, size_t n, int r, int fp, int sp)
{
    for (size_t i = 0; i < n; i++) {
        b[i].f0 = b[i].f0 - r < 0 ? 0 : b[i].f0 - r, b[i].f1 = b[i].f1 + r >= fp ? fp - 1 : b[i].f1 + r;
        b[i].s0 = b[i].s0 - r < 0 ? 0 : b[i].s0 - r, b[i].s1 = b[i].s1 + r >= sp ? sp - 1 : b[i].s1 + r;
    }
}

void ds_planes_project(double *bg, int nregions)
{
    const double floor = 1e-3;
    for (int r = 0; r < nregions; r++) {
        double *b = bg + 3 * r;
        b[0] = fmax(b[0], floor);
        const double tilt = fabs(b[1]) + fabs(b[2]), room = b[0] - floor;
        if (tilt > room) b[1] *= room / tilt, b[2] *= room / tilt;
    }
}

void ds_regions_free(ds_frame *fr)
{
    free(fr->pix), free(fr->region), free(fr->dx), free(fr->dy), free(fr->y), free(fr->bg);
    free(fr->Hbb), free(fr->Hbv), free(fr->gb);
    free(fr->spot_panel), free(fr->spot_f), free(fr->spot_s);
    fr->pix = NULL, fr->region = NULL, fr->dx = fr->dy = NULL, fr->y = fr->bg = NULL;
    fr->Hbb = fr->Hbv = fr->gb = NULL;
    fr->spot_panel = NULL, fr->spot_f = fr->spot_s = NULL;
    fr->npix = 0, fr->nregions = 0, fr->nspots = 0;
}

/* The pixels of the boxes into the frame's lists (region `first` on). */
static nb_status take_pixels(ds_frame *fr, const box *b, size_t nb, size_t off, int fp, const observed *ob,
                             const float *model, double scale, double spot, unsigned char *taken_px, grow *pix,
                             grow *bgs)
{
    nb_status st = NB_OK;
    for (size_t i = 0; i < nb && !st; i++) {
        const double cf = 0.5 * (b[i].f0 + b[i].f1), cs = 0.5 * (b[i].s0 + b[i].s1);
        const double hf = fmax(0.5 * (b[i].f1 - b[i].f0), 1.0), hs = fmax(0.5 * (b[i].s1 - b[i].s0), 1.0);
        double sum = 0.0;
        long nback = 0, taken = 0;
        for (int s = b[i].s0; s <= b[i].s1 && !st; s++)
            for (int f = b[i].f0; f <= b[i].f1 && !st; f++) {
                const size_t at = off + (size_t)s * fp + f;
                if (!ob->use[at] || taken_px[at - off]) continue;
                taken_px[at - off] = 1;
                struct { size_t pix; int region; float dx, dy; double y; } px = {
                    at, fr->nregions, (float)((f - cf) / hf), (float)((s - cs) / hs), ob->y[at]};
                st = grow_push(pix, &px);
                taken++;
                if (scale * model[at] < 0.5 * spot) sum += ob->y[at], nback++;
            }
        if (!taken) continue;
        double plane[3] = {nback ? sum / nback : 0.0, 0.0, 0.0};
        ds_planes_project(plane, 1);
        if (!st) st = grow_push(bgs, plane);
        fr->nregions++;
    }
    return st;
}

/* The lists of the growing arrays into the frame's own. */
static nb_status frame_lists(ds_frame *fr, const grow *pix, const grow *bgs, const grow *spots, int k)
{
    typedef struct { size_t pix; int region; float dx, dy; double y; } px_t;
    const px_t *p = pix->a;
    const size_t n = pix->n ? pix->n : 1, nr = fr->nregions ? (size_t)fr->nregions : 1;
    fr->npix = pix->n;
    fr->pix = malloc(n * sizeof *fr->pix), fr->region = malloc(n * sizeof *fr->region);
    fr->dx = malloc(n * sizeof *fr->dx), fr->dy = malloc(n * sizeof *fr->dy), fr->y = malloc(n * sizeof *fr->y);
    fr->bg = malloc(3 * nr * sizeof *fr->bg);
    fr->Hbb = malloc(9 * nr * sizeof *fr->Hbb), fr->Hbv = malloc(3 * (size_t)(k ? k : 1) * nr * sizeof *fr->Hbv);
    fr->gb = malloc(3 * nr * sizeof *fr->gb);
    const size_t ns = spots->n ? spots->n : 1;
    fr->spot_panel = malloc(ns * sizeof *fr->spot_panel);
    fr->spot_f = malloc(ns * sizeof *fr->spot_f), fr->spot_s = malloc(ns * sizeof *fr->spot_s);
    if (!fr->pix || !fr->region || !fr->dx || !fr->dy || !fr->y || !fr->bg || !fr->Hbb || !fr->Hbv || !fr->gb ||
        !fr->spot_panel || !fr->spot_f || !fr->spot_s)
        return nb_error_set(NB_ERR_NOMEM, "out of memory for the regions");
    for (size_t i = 0; i < pix->n; i++)
        fr->pix[i] = p[i].pix, fr->region[i] = p[i].region, fr->dx[i] = p[i].dx, fr->dy[i] = p[i].dy, fr->y[i] = p[i].y;
    if (bgs->n) memcpy(fr->bg, bgs->a, bgs->n * bgs->size);
    const float *c = spots->a;
    fr->nspots = (int)spots->n;
    for (size_t i = 0; i < spots->n; i++)
        fr->spot_panel[i] = (int)c[3 * i], fr->spot_f[i] = c[3 * i + 1], fr->spot_s[i] = c[3 * i + 2];
    return NB_OK;
}

nb_status ds_regions(ds *d, ds_frame *fr, const observed *ob)
{
    typedef struct { size_t pix; int region; float dx, dy; double y; } px_t;
    grow pix = {NULL, 0, 0, sizeof(px_t)}, bgs = {NULL, 0, 0, 3 * sizeof(double)};
    grow spots = {NULL, 0, 0, 3 * sizeof(float)}, boxes = {NULL, 0, 0, sizeof(box)};
    double val[K_COUNT];
    ds_values(d, fr, fr->p, d->z, val);
    ds_regions_free(fr);
    nb_status st = NB_OK;
    for (int p = 0; p < nb_plan_npanels(d->start) && !st; p++) {
        int fp, sp;
        size_t off;
        nb_plan_panel_dims(d->start, p, &fp, &sp, &off);
        const size_t n = (size_t)fp * sp;
        const double med = nb_fit_panel_median(ob, off, n), cut = med + 5.0 * sqrt(med + 1.0);
        unsigned char *mark = malloc(n);
        if (!mark) {
            st = nb_error_set(NB_ERR_NOMEM, "out of memory for the regions");
            break;
        }
        for (size_t i = 0; i < n; i++)
            mark[i] = ob->use[off + i] ? (val[K_SCALE] * d->image[off + i] >= d->o->spot_photons) |
                                             (ob->y[off + i] >= cut ? 2 : 0)
                                       : 0;
        boxes.n = 0;
        st = components(mark, ob, off, fp, sp, med, p, &boxes, &spots);
        if (!st) grow_boxes(boxes.a, boxes.n, (int)ceil(d->o->roi_radius), fp, sp);
        memset(mark, 0, n); /* now: the pixels a region has taken */
        if (!st)
            st = take_pixels(fr, boxes.a, boxes.n, off, fp, ob, d->image, val[K_SCALE], d->o->spot_photons, mark, &pix,
                             &bgs);
        free(mark);
    }
    if (!st) st = frame_lists(fr, &pix, &bgs, &spots, d->L.kp + d->L.kz);
    free(pix.a), free(bgs.a), free(spots.a), free(boxes.a);
    return st;
}
