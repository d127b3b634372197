/* nb_fit_roi.c - the pixels a dataset fit compares: regions around the
 * spots, so that its cost grows with the spots and not with the detector.
 * A spot is a connected set of pixels where the model has --spot-photons or
 * more (a predicted spot), or where the observed image stands out of its
 * local background m (local_background) by 5 sqrt(m + 1) (an observed one:
 * the reflections the start does not yet predict); each spot's box, grown by --roi-radius
 * pixels, is a region (a pixel in two boxes the first's); the region has
 * a background plane of its own.  Untrusted, masked and overloaded pixels are
 * never in a region.  The observed spots' centroids are also what the global
 * stage searches with.  Spots given by another program (--spots: DIALS's
 * table) take the observed ones' place: their boxes are the regions' seeds
 * and their centroids the global stage's, each weighted by its photons
 * above the local background over its box, as the fit's own are. */
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

/* Box sums of v (and of the weights w) over (2r+1)^2 pixels, one
 * dimension after the other: a running sum along each row (row_v, row_w),
 * then down the columns a row at a time, each output row the one above it
 * with the row entering the box added and the one leaving it taken away
 * (the memory read in order): out_v, out_w. */
static void box_sums(const double *v, const double *w, int fp, int sp, int r, double *out_v, double *out_w,
                     double *row_v, double *row_w)
{
    for (int s = 0; s < sp; s++) {
        const double *a = v + (size_t)s * fp, *b = w + (size_t)s * fp;
        double sv = 0.0, sw = 0.0;
        for (int f = 0; f < r && f < fp; f++) sv += a[f], sw += b[f];
        for (int f = 0; f < fp; f++) {
            if (f + r < fp) sv += a[f + r], sw += b[f + r];
            if (f - r - 1 >= 0) sv -= a[f - r - 1], sw -= b[f - r - 1];
            row_v[(size_t)s * fp + f] = sv, row_w[(size_t)s * fp + f] = sw;
        }
    }
    for (int f = 0; f < fp; f++) out_v[f] = 0.0, out_w[f] = 0.0;
    for (int s = 0; s < r && s < sp; s++)
        for (int f = 0; f < fp; f++) out_v[f] += row_v[(size_t)s * fp + f], out_w[f] += row_w[(size_t)s * fp + f];
    for (int s = 0; s < sp; s++) {
        double *ov = out_v + (size_t)s * fp, *ow = out_w + (size_t)s * fp;
        if (s > 0) memcpy(ov, ov - fp, (size_t)fp * sizeof *ov), memcpy(ow, ow - fp, (size_t)fp * sizeof *ow);
        if (s + r < sp) {
            const double *add_v = row_v + (size_t)(s + r) * fp, *add_w = row_w + (size_t)(s + r) * fp;
            for (int f = 0; f < fp; f++) ov[f] += add_v[f], ow[f] += add_w[f];
        }
        if (s - r - 1 >= 0) {
            const double *sub_v = row_v + (size_t)(s - r - 1) * fp, *sub_w = row_w + (size_t)(s - r - 1) * fp;
            for (int f = 0; f < fp; f++) ov[f] -= sub_v[f], ow[f] -= sub_w[f];
        }
    }
}

/* Each pixel's local background: the mean of the used pixels in the
 * (2 LOCAL_R + 1)^2 box around it, twice, the second time without the
 * pixels that stood 3 sigmas above the first (the spots: a box holds a
 * few, which would raise it).  A local mean and not the panel's median:
 * a water ring or the air's scatter falls with the angle, and against one
 * level the ring's pixels would all be spots. */
#define LOCAL_R 12
static nb_status local_background(const nb_fit_observed *ob, size_t off, int fp, int sp, double *bg)
{
    const size_t n = (size_t)fp * sp;
    double *v = malloc(n * sizeof *v), *w = malloc(n * sizeof *w), *sw = malloc(n * sizeof *sw);
    double *rv = malloc(n * sizeof *rv), *rw = malloc(n * sizeof *rw);
    nb_status st = v && w && sw && rv && rw ? NB_OK : nb_error_set(NB_ERR_NOMEM, "out of memory for the regions");
    for (int pass = 0; pass < 2 && !st; pass++) {
        for (size_t i = 0; i < n; i++) {
            const int use = ob->use[off + i] && (!pass || ob->y[off + i] <= bg[i] + 3.0 * sqrt(bg[i] + 1.0));
            v[i] = use ? ob->y[off + i] : 0.0, w[i] = use;
        }
        box_sums(v, w, fp, sp, LOCAL_R, bg, sw, rv, rw);
        for (size_t i = 0; i < n; i++) bg[i] = sw[i] > 0 ? bg[i] / sw[i] : 0.0;
    }
    free(v), free(w), free(sw), free(rv), free(rw);
    return st;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double nb_fit_panel_median(const nb_fit_observed *ob, size_t off, size_t n)
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
static nb_status components(const unsigned char *mark, const nb_fit_observed *ob, size_t off, int fp, int sp,
                            const double *back, int panel, int centroids, grow *boxes, grow *spots)
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
                const double w = ob->y[off + i] - back[i];
                observed_spot = 1;
                acc.w += w, acc.wf += w * (f + 0.5), acc.ws += w * (s + 0.5);
            }
            const size_t nb[4] = {f > 0 ? i - 1 : n, f < fp - 1 ? i + 1 : n, s > 0 ? i - fp : n, s < sp - 1 ? i + fp : n};
            for (int q = 0; q < 4; q++)
                if (nb[q] < n && mark[nb[q]] && !seen[nb[q]]) seen[nb[q]] = 1, stack[top++] = nb[q];
        }
        st = grow_push(boxes, &b);
        if (!st && centroids && observed_spot && acc.w >= 10.0) {
            float c[4] = {(float)panel, (float)(acc.wf / acc.w), (float)(acc.ws / acc.w), (float)acc.w};
            st = grow_push(spots, c);
        }
    }
    free(seen);
    free(stack);
    return st;
}

/* Panel `panel`'s spots of those given for frame `frame`: each box (clipped
 * to the panel) marked as an observed spot's pixels are (bit 2: a region's
 * seed), each centroid into spots [panel f s w], w its photons above the
 * local background over the box's used pixels (at least 1e-3: a spot the
 * program found is kept, if last, however faint it is here). */
static nb_status given_spots(const nb_fit_given_spots *g, long frame, int panel, const nb_fit_observed *ob,
                             size_t off, int fp, int sp, const double *back, unsigned char *mark, grow *spots)
{
    nb_status st = NB_OK;
    for (size_t k = g->first[frame]; k < g->first[frame + 1] && !st; k++) {
        const nb_fit_spot *q = &g->spot[k];
        if (q->panel != panel) continue;
        const int f0 = q->f0 < 0 ? 0 : q->f0, f1 = q->f1 >= fp ? fp - 1 : q->f1;
        const int s0 = q->s0 < 0 ? 0 : q->s0, s1 = q->s1 >= sp ? sp - 1 : q->s1;
        double w = 0.0;
        for (int s = s0; s <= s1; s++)
            for (int f = f0; f <= f1; f++) {
                const size_t i = (size_t)s * fp + f;
                if (!ob->use[off + i]) continue;
                w += ob->y[off + i] - back[i];
                mark[i] |= 2;
            }
        float c[4] = {(float)panel, q->f, q->s, (float)fmax(w, 1e-3)};
        st = grow_push(spots, c);
    }
    return st;
}

static int cmp_spot_s(const void *a, const void *b)
{
    const float *x = a, *y = b;
    return x[0] != y[0] ? (x[0] < y[0] ? -1 : 1) : x[2] < y[2] ? -1 : x[2] > y[2];
}

/* One spot that the threshold split in pieces (a faint spot's pixels
 * above it need not touch) is one spot: pieces of one panel whose centroids
 * are within MERGE_PX are merged into the stronger's place, weighted, and the
 * weaker's weight set to 0 (left out).  The spots [panel f s w] sorted by
 * panel and slow coordinate, each looks ahead only as far as MERGE_PX. */
#define MERGE_PX 2.5f
static void merge_split_spots(float *c, size_t n)
{
    if (n < 2) return; /* nothing to merge (and no list at all when n is 0) */
    qsort(c, n, 4 * sizeof *c, cmp_spot_s);
    for (size_t i = 0; i < n; i++) {
        float *a = c + 4 * i;
        for (size_t j = i + 1; j < n && a[3] > 0; j++) {
            float *b = c + 4 * j;
            if (b[0] != a[0] || b[2] - a[2] > MERGE_PX) break;
            const float df = b[1] - a[1], ds = b[2] - a[2];
            if (b[3] <= 0 || df * df + ds * ds > MERGE_PX * MERGE_PX) continue;
            float *keep = a[3] >= b[3] ? a : b, *drop = keep == a ? b : a;
            const float w = keep[3] + drop[3];
            keep[1] = (keep[1] * keep[3] + drop[1] * drop[3]) / w;
            keep[2] = (keep[2] * keep[3] + drop[2] * drop[3]) / w;
            keep[3] = w, drop[3] = 0;
        }
    }
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

void ds_regions_detach(ds_frame *fr)
{
    fr->pix = NULL, fr->region = NULL, fr->dx = fr->dy = NULL, fr->y = fr->bg = NULL;
    fr->Hbb = fr->Hbv = fr->gb = NULL;
    fr->spot_panel = NULL, fr->spot_f = fr->spot_s = fr->spot_w = NULL;
    fr->npix = 0, fr->nregions = 0, fr->nspots = 0;
}

void ds_regions_free(ds_frame *fr)
{
    free(fr->pix), free(fr->region), free(fr->dx), free(fr->dy), free(fr->y), free(fr->bg);
    free(fr->Hbb), free(fr->Hbv), free(fr->gb);
    free(fr->spot_panel), free(fr->spot_f), free(fr->spot_s), free(fr->spot_w);
    ds_regions_detach(fr);
}

/* The pixels of the boxes into the frame's lists (region `first` on). */
/* The pixels of the boxes into the frame's lists, a region each.  A
 * region's plane is b0 + b1 dx + b2 dy with dx, dy from the centre of the
 * pixels it took over their half extent (not the box's: a box whose pixels
 * other boxes took first may keep a sliver along one side, where the box's
 * own dx would be 1 on every pixel and the level and the slope one
 * unknown); its level starts at the mean of its pixels the model puts no
 * spot on (all of them when it puts one on every pixel). */
static nb_status take_pixels(ds_frame *fr, const box *b, size_t nb, size_t off, int fp, const nb_fit_observed *ob,
                             const float *model, double scale, double spot, unsigned char *taken_px, grow *pix,
                             grow *bgs)
{
    nb_status st = NB_OK;
    for (size_t i = 0; i < nb && !st; i++) {
        double sf = 0.0, ss = 0.0, sum = 0.0, all = 0.0;
        long nback = 0, taken = 0;
        int f0 = b[i].f1, f1 = b[i].f0, s0 = b[i].s1, s1 = b[i].s0;
        for (int s = b[i].s0; s <= b[i].s1; s++)
            for (int f = b[i].f0; f <= b[i].f1; f++) {
                const size_t at = off + (size_t)s * fp + f;
                if (!ob->use[at] || taken_px[at - off]) continue;
                sf += f, ss += s, taken++, all += ob->y[at];
                f0 = f < f0 ? f : f0, f1 = f > f1 ? f : f1, s0 = s < s0 ? s : s0, s1 = s > s1 ? s : s1;
                if (scale * model[at] < 0.5 * spot) sum += ob->y[at], nback++;
            }
        if (!taken) continue;
        const double cf = sf / taken, cs = ss / taken;
        const double hf = fmax(fmax(f1 - cf, cf - f0), 1.0), hs = fmax(fmax(s1 - cs, cs - s0), 1.0);
        for (int s = b[i].s0; s <= b[i].s1 && !st; s++)
            for (int f = b[i].f0; f <= b[i].f1 && !st; f++) {
                const size_t at = off + (size_t)s * fp + f;
                if (!ob->use[at] || taken_px[at - off]) continue;
                taken_px[at - off] = 1;
                struct { size_t pix; int region; float dx, dy; double y; } px = {
                    at, fr->nregions, (float)((f - cf) / hf), (float)((s - cs) / hs), ob->y[at]};
                st = grow_push(pix, &px);
            }
        double plane[3] = {nback ? sum / nback : all / taken, 0.0, 0.0};
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
    fr->spot_w = malloc(ns * sizeof *fr->spot_w);
    if (!fr->pix || !fr->region || !fr->dx || !fr->dy || !fr->y || !fr->bg || !fr->Hbb || !fr->Hbv || !fr->gb ||
        !fr->spot_panel || !fr->spot_f || !fr->spot_s || !fr->spot_w)
        return nb_error_set(NB_ERR_NOMEM, "out of memory for the regions");
    for (size_t i = 0; i < pix->n; i++)
        fr->pix[i] = p[i].pix, fr->region[i] = p[i].region, fr->dx[i] = p[i].dx, fr->dy[i] = p[i].dy, fr->y[i] = p[i].y;
    if (bgs->n) memcpy(fr->bg, bgs->a, bgs->n * bgs->size);
    const float *c = spots->a;
    fr->nspots = 0;
    for (size_t i = 0; i < spots->n; i++) {
        if (c[4 * i + 3] <= 0) continue; /* merged into another */
        fr->spot_panel[fr->nspots] = (int)c[4 * i], fr->spot_f[fr->nspots] = c[4 * i + 1];
        fr->spot_s[fr->nspots] = c[4 * i + 2], fr->spot_w[fr->nspots] = c[4 * i + 3];
        fr->nspots++;
    }
    return NB_OK;
}

nb_status ds_regions(ds *d, ds_frame *fr, const nb_fit_observed *ob)
{
    typedef struct { size_t pix; int region; float dx, dy; double y; } px_t;
    grow pix = {NULL, 0, 0, sizeof(px_t)}, bgs = {NULL, 0, 0, 3 * sizeof(double)};
    grow spots = {NULL, 0, 0, 4 * sizeof(float)}, boxes = {NULL, 0, 0, sizeof(box)};
    double val[DS_KINDS];
    ds_values(d, fr, fr->p, d->z, val);
    ds_regions_free(fr);
    nb_status st = NB_OK;
    for (int p = 0; p < nb_plan_npanels(d->start) && !st; p++) {
        int fp, sp;
        size_t off;
        nb_plan_panel_dims(d->start, p, &fp, &sp, &off);
        const size_t n = (size_t)fp * sp;
        unsigned char *mark = malloc(n);
        double *back = malloc(n * sizeof *back);
        if (!mark || !back) {
            free(mark), free(back);
            st = nb_error_set(NB_ERR_NOMEM, "out of memory for the regions");
            break;
        }
        st = local_background(ob, off, fp, sp, back);
        const nb_fit_given_spots *given = d->o->spots;
        for (size_t i = 0; i < n && !st; i++)
            mark[i] = ob->use[off + i] ? (val[K_SCALE] * d->image[off + i] >= d->o->spot_photons) |
                                             (!given && ob->y[off + i] >= back[i] + 5.0 * sqrt(back[i] + 1.0) ? 2 : 0)
                                       : 0;
        if (!st && given) st = given_spots(given, fr->index, p, ob, off, fp, sp, back, mark, &spots);
        boxes.n = 0;
        if (!st) st = components(mark, ob, off, fp, sp, back, p, !given, &boxes, &spots);
        free(back);
        if (!st) grow_boxes(boxes.a, boxes.n, (int)ceil(d->o->roi_radius), fp, sp);
        memset(mark, 0, n); /* now: the pixels a region has taken */
        if (!st)
            st = take_pixels(fr, boxes.a, boxes.n, off, fp, ob, d->image, val[K_SCALE], d->o->spot_photons, mark, &pix,
                             &bgs);
        free(mark);
    }
    if (!st && !d->o->spots) merge_split_spots(spots.a, spots.n); /* a program's spots are whole */
    if (!st) st = frame_lists(fr, &pix, &bgs, &spots, d->L.kp + d->L.kz);
    fr->regions_made++;
    free(pix.a), free(bgs.a), free(spots.a), free(boxes.a);
    return st;
}
