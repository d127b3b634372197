/* nb_fit_integrate.c - each reflection's intensity measured on each frame
 * the dataset fit passes, from the observed pixels of its regions (nb-fit
 * --integrated; docs/physics.md, "Intensities measured").
 *
 * A pixel belongs to the reflection nearest it (ds_index_pixel, as
 * --refine-F maps it), and the model gives each reflection's profile on the
 * frame: P_i = L_i / sum L, L the lattice's photons at F = 1 (the frame's
 * geometry, crystal, mosaic and spectrum as fitted; with the nearest-F
 * model a reflection's photons are scale x F^2 x L on each of its pixels).
 * The background is each region's fitted plane b_i.  The frame's photons of
 * the reflection, profile-fitted: I = sum P_i (y_i - b_i) / v_i over
 * sum P_i^2 / v_i, sigma^2 = 1 / sum P_i^2 / v_i, v_i the model's expected
 * counts there (scale x the model's F x L_i + b_i: the Poisson variance at
 * the fit, not at the noisy count, so that a weak reflection is not biased
 * by its own counts' weights); by summation: sum (y_i - b_i), variance
 * sum y_i.  A still records part of each reflection: its partiality here
 * is sum L over the frame's largest sum L (its best-excited reflection's),
 * the lattice transform's share of it that the Ewald sphere cuts, with the
 * solid angle and polarisation it is seen at; the profile-fitted value is
 * given as the full reflection, I / partiality (DIALS takes
 * intensity.prf as full and divides intensity.sum by the partiality:
 * dials.scale's per-image scale takes up the frame's reference).  A
 * reflection is measured when the model at the plan's rms F would put
 * --spot-photons or more on its pixels: the ones the regions were made for. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nb_fit_ds.h"
#include "nb_fit_ds_integrate.h"
#include "nb_util.h"
#include "nb_vec.h"

void nb_fit_integrated_free(nb_fit_integrated *r)
{
    free(r->row);
    memset(r, 0, sizeof *r);
}

/* A pixel of the frame's regions, with its reflection. */
typedef struct ipix {
    int h[3], panel;
    size_t i;         /* into fr->pix */
    double f, s;
} ipix;

static int imin(int a, int b) { return a < b ? a : b; }
static int imax(int a, int b) { return a > b ? a : b; }

static int cmp_ipix(const void *a, const void *b)
{
    const ipix *x = a, *y = b;
    for (int j = 0; j < 3; j++)
        if (x->h[j] != y->h[j]) return x->h[j] < y->h[j] ? -1 : 1;
    if (x->panel != y->panel) return x->panel < y->panel ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

static int same_reflection(const ipix *x, const ipix *y)
{
    return x->h[0] == y->h[0] && x->h[1] == y->h[1] && x->h[2] == y->h[2] && x->panel == y->panel;
}

/* The frame's pixels: L (lattice at F = 1), M (the model's Bragg photons
 * at scale 1), their reflections sorted so that each one's are together. */
typedef struct iframe {
    float *L, *M;
    ipix *px;
    size_t n;         /* pixels with a reflection */
    double scale;
    ds_indexer ix;
} iframe;

static void iframe_free(iframe *f)
{
    free(f->L), free(f->M), free(f->px);
}

static nb_status iframe_make(ds *d, ds_frame *fr, iframe *f)
{
    memset(f, 0, sizeof *f);
    const size_t n = fr->npix ? fr->npix : 1;
    nb_status st = nb_calloc((void **)&f->L, n, sizeof *f->L, "the intensities' profiles");
    if (!st) st = nb_calloc((void **)&f->M, n, sizeof *f->M, "the intensities' profiles");
    if (!st) st = nb_calloc((void **)&f->px, n, sizeof *f->px, "the intensities' pixels");
    if (!st) st = ds_render_lattice(d, fr);
    for (size_t i = 0; i < fr->npix && !st; i++) f->L[i] = d->image[fr->pix[i]];
    if (!st) st = ds_render(d, fr, fr->p, d->z, 0, 0);
    for (size_t i = 0; i < fr->npix && !st; i++) f->M[i] = d->image[fr->pix[i]];
    if (st) return st;
    double val[DS_KINDS];
    ds_values(d, fr, fr->p, d->z, val);
    f->scale = val[K_SCALE];
    ds_indexer_init(d, fr, &f->ix);
    for (size_t i = 0; i < fr->npix; i++) {
        ipix *p = &f->px[f->n];
        double far;
        ds_index_pixel(d, &f->ix, fr->pix[i], p->h, &far, &p->panel, &p->f, &p->s);
        p->i = i;
        if (p->h[0] || p->h[1] || p->h[2]) f->n++;
    }
    qsort(f->px, f->n, sizeof *f->px, cmp_ipix);
    return NB_OK;
}

/* The diffracted beam towards (f, s) of a panel, 1/A, and the spacing of h, A. */
static void geometry(const ds *d, const iframe *f, int panel, double fpx, double spx, const int h[3], nb_fit_refl *r)
{
    nb_panel now; /* where the fit's values put it (a panel's own values, the detector's) */
    ds_panel_at(d, f->ix.val, panel, &now);
    const nb_panel *q = &now;
    double pos[3], bc[3], ca[3], ab[3], qv[3];
    for (int j = 0; j < 3; j++) pos[j] = q->pix0[j] + (fpx * q->fdet[j] + spx * q->sdet[j]) * q->pixel_size;
    nb_vunitize(pos, pos);
    for (int j = 0; j < 3; j++) r->s1[j] = pos[j] / f->ix.lambda;
    const double (*abc)[3] = f->ix.abc;
    nb_vcross(abc[1], abc[2], bc), nb_vcross(abc[2], abc[0], ca), nb_vcross(abc[0], abc[1], ab);
    const double V = nb_vdot(abc[0], bc);
    for (int j = 0; j < 3; j++) qv[j] = (h[0] * bc[j] + h[1] * ca[j] + h[2] * ab[j]) / V;
    const double qn = nb_vnorm(qv);
    r->d = qn > 0 ? 1e10 / qn : 0.0;
}

/* One reflection from its pixels px[0 .. n-1]: 0 when it is not worth
 * measuring (its row not filled). */
static int measure(const ds *d, const ds_frame *fr, const iframe *f, const ipix *px, size_t n, nb_fit_refl *r)
{
    double sL = 0, Lmax = 0, cf = 0, cs = 0, of = 0, os = 0, ow = 0, sum = 0, counts = 0, bsum = 0, sM = 0;
    double num = 0, den = 0;
    int bbox[4] = {(int)px[0].f, (int)px[0].f + 1, (int)px[0].s, (int)px[0].s + 1};
    for (size_t k = 0; k < n; k++) sL += f->L[px[k].i];
    const double F_rms = d->flat.default_F;
    if (!(sL > 0) || f->scale * F_rms * F_rms * sL < d->o->spot_photons) return 0;
    for (size_t k = 0; k < n; k++) {
        const size_t i = px[k].i;
        const double *b = fr->bg + 3 * fr->region[i];
        const double bi = b[0] + b[1] * fr->dx[i] + b[2] * fr->dy[i], y = fr->y[i];
        const double P = f->L[i] / sL, mu = fmax(f->scale * f->M[i] + bi, NB_FIT_MU_FLOOR);
        num += P * (y - bi) / mu, den += P * P / mu;
        sum += y - bi, counts += y, bsum += bi, sM += f->M[i];
        Lmax = fmax(Lmax, f->L[i]);
        cf += f->L[i] * px[k].f, cs += f->L[i] * px[k].s;
        const double w = fmax(y - bi, 0.0);
        of += w * px[k].f, os += w * px[k].s, ow += w;
        bbox[0] = imin(bbox[0], (int)px[k].f), bbox[1] = imax(bbox[1], (int)px[k].f + 1);
        bbox[2] = imin(bbox[2], (int)px[k].s), bbox[3] = imax(bbox[3], (int)px[k].s + 1);
    }
    if (!(den > 0)) return 0;
    memset(r, 0, sizeof *r);
    r->frame = fr->index, r->panel = px[0].panel, r->npix = (int)n;
    memcpy(r->hkl, px[0].h, sizeof r->hkl);
    r->sum = sum, r->sum_var = fmax(counts, 1.0);
    r->prf = num / den, r->prf_var = 1.0 / den; /* the frame's photons: made full by the caller */
    r->partiality = sL;                         /* the caller divides by the frame's largest */
    r->model = f->scale * sM, r->background = bsum;
    r->xyzcal[0] = cf / sL, r->xyzcal[1] = cs / sL;
    r->xyzobs[0] = ow > 0 ? of / ow : r->xyzcal[0], r->xyzobs[1] = ow > 0 ? os / ow : r->xyzcal[1];
    memcpy(r->bbox, bbox, sizeof bbox);
    geometry(d, f, r->panel, r->xyzcal[0], r->xyzcal[1], r->hkl, r);
    return 1;
}

/* The frame's reflections appended to *rows (*n of *cap). */
static nb_status measure_frame(ds *d, ds_frame *fr, nb_fit_refl **rows, size_t *n, size_t *cap)
{
    iframe f;
    nb_status st = iframe_make(d, fr, &f);
    const size_t first = *n;
    for (size_t a = 0, b; a < f.n && !st; a = b) {
        for (b = a + 1; b < f.n && same_reflection(&f.px[a], &f.px[b]); b++) continue;
        if (*n == *cap) {
            const size_t c = *cap ? 2 * *cap : 256;
            nb_fit_refl *grown = realloc(*rows, c * sizeof *grown);
            if (!grown) {
                st = nb_error_set(NB_ERR_NOMEM, "out of memory for the intensities");
                break;
            }
            *rows = grown, *cap = c;
        }
        *n += (size_t)measure(d, fr, &f, f.px + a, b - a, *rows + *n);
    }
    iframe_free(&f);
    double top = 0;
    for (size_t k = first; k < *n; k++) top = fmax(top, (*rows)[k].partiality);
    for (size_t k = first; k < *n; k++) {
        nb_fit_refl *r = *rows + k;
        r->partiality /= top;
        r->prf /= r->partiality, r->prf_var /= r->partiality * r->partiality;
    }
    if (!st) nb_info("frame %ld: %zu reflections measured", fr->index + 1, *n - first);
    return st;
}

/* A row as doubles, to be summed over the processes (each row is one
 * process's, the others' zero), and back. */
enum { W_ROW = 25 };
static void pack(const nb_fit_refl *r, double *w)
{
    double *p = w;
    *p++ = (double)r->frame, *p++ = r->panel, *p++ = r->hkl[0], *p++ = r->hkl[1], *p++ = r->hkl[2], *p++ = r->npix;
    *p++ = r->sum, *p++ = r->sum_var, *p++ = r->prf, *p++ = r->prf_var, *p++ = r->partiality, *p++ = r->model;
    *p++ = r->background, *p++ = r->xyzcal[0], *p++ = r->xyzcal[1], *p++ = r->xyzobs[0], *p++ = r->xyzobs[1];
    for (int j = 0; j < 3; j++) *p++ = r->s1[j];
    *p++ = r->d;
    for (int j = 0; j < 4; j++) *p++ = r->bbox[j];
}

static void unpack(const double *w, nb_fit_refl *r)
{
    const double *p = w;
    r->frame = (long)*p++, r->panel = (int)*p++;
    for (int j = 0; j < 3; j++) r->hkl[j] = (int)*p++;
    r->npix = (int)*p++;
    r->sum = *p++, r->sum_var = *p++, r->prf = *p++, r->prf_var = *p++, r->partiality = *p++, r->model = *p++;
    r->background = *p++, r->xyzcal[0] = *p++, r->xyzcal[1] = *p++, r->xyzobs[0] = *p++, r->xyzobs[1] = *p++;
    for (int j = 0; j < 3; j++) r->s1[j] = *p++;
    r->d = *p++;
    for (int j = 0; j < 4; j++) r->bbox[j] = (int)*p++;
}

/* Every process's rows, in frame order, into out. */
static nb_status gather_rows(ds *d, const nb_fit_refl *rows, size_t n, nb_fit_integrated *out)
{
    double *count, *w = NULL;
    nb_status st = nb_calloc((void **)&count, (size_t)d->nframes + 1, sizeof *count, "the intensities");
    if (st) return st;
    for (size_t k = 0; k < n; k++) count[rows[k].frame] += 1;
    st = ds_sum(d, count, (size_t)d->nframes);
    size_t total = 0;
    for (long i = 0; i < d->nframes && !st; i++) {
        const double c = count[i];
        count[i] = (double)total, total += (size_t)c; /* now the frame's first row */
    }
    if (!st) st = nb_calloc((void **)&w, (total ? total : 1) * W_ROW, sizeof *w, "the intensities");
    for (size_t k = 0, last = (size_t)-1, at = 0; k < n && !st; k++) {
        if ((size_t)rows[k].frame != last) last = (size_t)rows[k].frame, at = (size_t)count[last];
        pack(&rows[k], w + W_ROW * at++);
    }
    if (!st) st = ds_sum(d, w, total * W_ROW);
    if (!st) st = nb_calloc((void **)&out->row, total ? total : 1, sizeof *out->row, "the intensities");
    for (size_t k = 0; k < total && !st; k++) unpack(w + W_ROW * k, &out->row[k]);
    if (!st) out->n = total;
    free(count);
    free(w);
    return st;
}

nb_status ds_integrate(ds *d, nb_fit_integrated *out)
{
    nb_fit_refl *rows = NULL;
    size_t n = 0, cap = 0;
    nb_status st = NB_OK;
    memset(out, 0, sizeof *out);
    for (long i = 0; i < d->nframes && !st; i++) {
        ds_frame *fr = &d->fr[i];
        if (ds_joins(d, i)) st = measure_frame(d, fr, &rows, &n, &cap);
    }
    st = ds_agree(d, st);
    if (!st) st = gather_rows(d, rows, n, out);
    free(rows);
    return st;
}
