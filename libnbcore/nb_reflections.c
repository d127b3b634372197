/* nb_reflections.c - a frame's photons attributed to reflections (the rule
 * is in nb_reflections.h): the pixel's scattering vector for the frame's
 * crystal at mid-frame, its nearest Miller index, and per reflection and
 * panel the photons and their centroid.  Used by nb-convert's truth.jsonl. */
#include "nb_reflections.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nb_util.h"
#include "nb_vec.h"

void nb_plan_cell_at(const nb_plan *p, double phi, double abc[3][3])
{
    const double *cell[3] = {p->cell_a, p->cell_b, p->cell_c};
    for (int i = 0; i < 3; i++) {
        if (phi != 0.0) nb_rotate_about(cell[i], abc[i], p->spindle, phi);
        else memcpy(abc[i], cell[i], sizeof abc[i]);
    }
}

double nb_plan_mid_phi(const nb_plan *v) { return v->phi0 + 0.5 * v->osc; }

double nb_plan_mean_lambda(const nb_plan *v)
{
    double sum = 0.0;
    for (int i = 0; i < v->nsources; i++) sum += v->sources[i].lambda;
    return v->nsources > 0 ? sum / v->nsources : v->lambda0;
}

/* ---- an open-addressing table of (h, k, l, panel) -> accumulator ---------- */

typedef struct acc {
    int h, k, l, panel;
    double w, wx, wy;
} acc;

typedef struct table {
    acc *slot;
    unsigned char *used;
    size_t cap, n; /* cap a power of two, kept at most half full */
} table;

static size_t hash_of(int h, int k, int l, int panel)
{
    uint64_t z = (uint64_t)(uint32_t)h * 0x9E3779B97F4A7C15ull ^ (uint64_t)(uint32_t)k * 0xC2B2AE3D27D4EB4Full ^
                 (uint64_t)(uint32_t)l * 0x165667B19E3779F9ull ^ (uint64_t)(uint32_t)panel * 0x27D4EB2F165667C5ull;
    z ^= z >> 31;
    return (size_t)(z * 0x94D049BB133111EBull >> 17);
}

static nb_status table_grow(table *t)
{
    table g = {NULL, NULL, t->cap ? 2 * t->cap : 1024, 0};
    nb_status st = nb_calloc((void **)&g.slot, g.cap, sizeof *g.slot, "reflections");
    if (!st) st = nb_calloc((void **)&g.used, g.cap, 1, "reflections");
    if (st) {
        free(g.slot);
        return st;
    }
    for (size_t i = 0; i < t->cap; i++) {
        if (!t->used[i]) continue;
        const acc *a = &t->slot[i];
        size_t j = hash_of(a->h, a->k, a->l, a->panel) & (g.cap - 1);
        while (g.used[j]) j = (j + 1) & (g.cap - 1);
        g.slot[j] = *a, g.used[j] = 1, g.n++;
    }
    free(t->slot);
    free(t->used);
    *t = g;
    return NB_OK;
}

static nb_status table_add(table *t, const int hkl[3], int panel, double w, double x, double y)
{
    nb_status st;
    if (2 * (t->n + 1) > t->cap && (st = table_grow(t))) return st;
    size_t j = hash_of(hkl[0], hkl[1], hkl[2], panel) & (t->cap - 1);
    for (;; j = (j + 1) & (t->cap - 1)) {
        acc *a = &t->slot[j];
        if (!t->used[j]) {
            *a = (acc){hkl[0], hkl[1], hkl[2], panel, 0, 0, 0};
            t->used[j] = 1, t->n++;
        } else if (a->h != hkl[0] || a->k != hkl[1] || a->l != hkl[2] || a->panel != panel) {
            continue;
        }
        a->w += w, a->wx += w * x, a->wy += w * y;
        return NB_OK;
    }
}

static int cmp_reflection(const void *pa, const void *pb)
{
    const nb_reflection *a = pa, *b = pb;
    if (a->panel != b->panel) return a->panel < b->panel ? -1 : 1;
    if (a->h != b->h) return a->h < b->h ? -1 : 1;
    if (a->k != b->k) return a->k < b->k ? -1 : 1;
    return (a->l > b->l) - (a->l < b->l);
}

/* One panel's pixels into the table: each pixel's nearest index */
static nb_status collect_panel(const nb_plan *v, int panel, const double abc[3][3], double lambda, const float *px,
                               table *t)
{
    nb_status st = NB_OK;
    for (int s = 0; s < v->panels[0].spixels && !st; s++)
        for (int f = 0; f < v->panels[0].fpixels && !st; f++) {
            double w = px[(size_t)s * v->panels[0].fpixels + f];
            if (!(w > 0)) continue;
            double pos[3], len = 0, S[3], frac[3];
            int hkl[3];
            for (int i = 0; i < 3; i++) {
                pos[i] = v->panels[0].pix0[i] + (f + 0.5) * v->panels[0].pixel_size * v->panels[0].fdet[i] +
                         (s + 0.5) * v->panels[0].pixel_size * v->panels[0].sdet[i];
                len += pos[i] * pos[i];
            }
            len = sqrt(len);
            for (int i = 0; i < 3; i++) S[i] = (pos[i] / len - v->beam[i]) / lambda;
            for (int i = 0; i < 3; i++) {
                frac[i] = abc[i][0] * S[0] + abc[i][1] * S[1] + abc[i][2] * S[2];
                hkl[i] = (int)lround(frac[i]);
            }
            st = table_add(t, hkl, panel, w, f + 0.5, s + 0.5);
        }
    return st;
}

nb_status nb_reflections_collect(const nb_plan *view, const float *photons, double min_photons,
                                 nb_reflection_list *out)
{
    memset(out, 0, sizeof *out);
    if (view->curved_detector)
        return nb_error_set(NB_ERR_UNSUPPORTED, "reflections on a curved detector (-curved_det) are not supported");
    double abc[3][3];
    nb_plan_cell_at(view, nb_plan_mid_phi(view), abc);
    double lambda = nb_plan_mean_lambda(view);
    table t = {NULL, NULL, 0, 0};
    nb_status st = table_grow(&t);
    for (int i = 0; i < nb_plan_npanels(view) && !st; i++) {
        nb_plan pv;
        size_t off;
        nb_plan_panel_view(view, i, &pv);
        nb_plan_panel_dims(view, i, NULL, NULL, &off);
        st = collect_panel(&pv, i, abc, lambda, photons + off, &t);
    }
    if (!st) st = nb_calloc((void **)&out->r, t.n ? t.n : 1, sizeof *out->r, "reflections");
    for (size_t j = 0; !st && j < t.cap; j++) {
        const acc *a = &t.slot[j];
        if (!t.used[j] || !(a->w > min_photons)) continue;
        out->r[out->n++] = (nb_reflection){a->h, a->k, a->l, a->panel, a->w, a->wx / a->w, a->wy / a->w};
    }
    free(t.slot);
    free(t.used);
    if (st) return st;
    qsort(out->r, out->n, sizeof *out->r, cmp_reflection);
    return NB_OK;
}

void nb_reflection_list_free(nb_reflection_list *l)
{
    free(l->r);
    memset(l, 0, sizeof *l);
}
