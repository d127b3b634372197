/* nb_fit_F.c - structure factors from every pixel (nb-fit --refine-F).
 *
 * With the nearest-F model (no -interpolate) a pixel's Bragg photons are
 * F(h)^2 times what the lattice alone gives there, h the reflection the
 * pixel lies nearest to: mu = s I(h) L + b, with L rendered once per frame
 * with every F = 1 (the frames' geometry as fitted), s the frame's scale and
 * b its regions' planes.  So dI/dF is one reflection per pixel: sparse, and
 * each I(h) is a one-dimensional Poisson problem over its pixels of every
 * frame, given the scales and planes, and these given the I.  The two are
 * alternated (30 rounds), each I by a Newton step on its summed Fisher
 * information, with a Wilson prior (the acentric exponential, p(I) =
 * exp(-I / S) / S, S the mean I of its resolution shell, weight --F-prior):
 * a reflection seen on few pixels is pulled to its shell's mean, not to 0.
 * With --refine-frame scale the frames' scales are refined with the I (from
 * 1, the plan's fluence, and only from the tenth round: a scale fitted to a
 * flat start's F says nothing of the fluence, and the two would wander
 * along the product the pixels fix), keeping a mean of 1 (the fluence's scale: the product s I is what the
 * pixels fix); without, they stay as the frames' fit left them.  I of the asymmetric unit: each index maps to one
 * member of its orbit under the space group (--space-group, CCP4's
 * operators) and Friedel's law, the greatest in (h, k, l) order; sums over
 * a box of indices, the same on every process, so that processes add their
 * frames' sums. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_fit_ds.h"
#include "nb_fit_ds_integrate.h"
#include "nb_util.h"
#include "nb_vec.h"

#define ROUNDS 30
#define SHELLS 10

typedef struct fbox {
    int H, K, Lm;            /* indices -H..H, -K..K, -L..L */
    size_t n;
    nb_fit_symmetry sg;      /* its operators */
} fbox;

static size_t box_index(const fbox *b, int h, int k, int l)
{
    if (h < -b->H || h > b->H || k < -b->K || k > b->K || l < -b->Lm || l > b->Lm) return (size_t)-1;
    return ((size_t)(h + b->H) * (2 * b->K + 1) + (size_t)(k + b->K)) * (2 * b->Lm + 1) + (size_t)(l + b->Lm);
}

static void box_hkl(const fbox *b, size_t i, int *h, int *k, int *l)
{
    *l = (int)(i % (size_t)(2 * b->Lm + 1)) - b->Lm;
    i /= (size_t)(2 * b->Lm + 1);
    *k = (int)(i % (size_t)(2 * b->K + 1)) - b->K;
    *h = (int)(i / (size_t)(2 * b->K + 1)) - b->H;
}

/* The orbit's representative: the greatest of h R and -h R over the operators. */
static void canonical(const fbox *b, int hkl[3], int out[3])
{
    out[0] = hkl[0], out[1] = hkl[1], out[2] = hkl[2];
    for (int o = 0; o < b->sg.nops; o++) {
        int r[3];
        for (int j = 0; j < 3; j++)
            r[j] = hkl[0] * b->sg.R[o][0][j] + hkl[1] * b->sg.R[o][1][j] + hkl[2] * b->sg.R[o][2][j];
        for (int sign = 1; sign >= -1; sign -= 2) {
            int c[3] = {sign * r[0], sign * r[1], sign * r[2]};
            if (c[0] > out[0] || (c[0] == out[0] && (c[1] > out[1] || (c[1] == out[1] && c[2] > out[2]))))
                memcpy(out, c, sizeof c);
        }
    }
}

/* The space group of the asymmetric unit: the caller's (nb-fit's
 * --space-group or the plan's SPACE_GROUP, resolved), else P 1. */
static void space_group(const ds *d, nb_fit_symmetry *sg)
{
    if (d->o->symmetry) {
        *sg = *d->o->symmetry;
        return;
    }
    memset(sg, 0, sizeof *sg);
    sg->nops = 1;
    for (int i = 0; i < 3; i++) sg->R[0][i][i] = 1;
    snprintf(sg->spacegroup, sizeof sg->spacegroup, "P 1");
    snprintf(sg->hall, sizeof sg->hall, " P 1");
}

/* The box: every index a detector corner of any frame can reach, with room. */
static void box_size(const ds *d, fbox *b)
{
    double qmax = 0.0, len[3] = {0, 0, 0}, incident[3] = {0, 0, 0};
    for (int i = 0; i < d->start->nsources; i++)
        for (int j = 0; j < 3; j++) incident[j] -= d->start->sources[i].dir[j];
    nb_vunitize(incident, incident);
    for (long i = 0; i < d->nframes; i++) {
        const nb_frame_crystal *c = &d->fr[i].start;
        const double *v[3] = {c->a, c->b, c->c};
        for (int j = 0; j < 3; j++) len[j] = fmax(len[j], nb_vnorm(v[j]) * 1e10);
        for (int p = 0; p < d->start->npanels; p++) {
            const nb_panel *q = &d->start->panels[p];
            for (int corner = 0; corner < 4; corner++) {
                double pos[3], dq[3];
                const double f = (corner & 1) ? q->fpixels : 0, s = (corner & 2) ? q->spixels : 0;
                for (int j = 0; j < 3; j++) pos[j] = q->pix0[j] + f * q->pixel_size * q->fdet[j] + s * q->pixel_size * q->sdet[j];
                nb_vunitize(pos, pos);
                for (int j = 0; j < 3; j++) dq[j] = pos[j] - incident[j];
                qmax = fmax(qmax, nb_vnorm(dq) / (c->lambda * 1e10));
            }
        }
    }
    /* a corner is not always the farthest point (a detector around the
     * beam's foot): the Ewald sphere's diameter bounds it all */
    double lmin = INFINITY;
    for (long i = 0; i < d->nframes; i++) lmin = fmin(lmin, d->fr[i].start.lambda * 1e10);
    qmax = fmin(qmax * 1.2, 2.0 / lmin);
    b->H = (int)ceil(len[0] * 1.05 * qmax) + 1, b->K = (int)ceil(len[1] * 1.05 * qmax) + 1;
    b->Lm = (int)ceil(len[2] * 1.05 * qmax) + 1;
    b->n = (size_t)(2 * b->H + 1) * (2 * b->K + 1) * (2 * b->Lm + 1);
}

/* One frame's lattice image on its regions and each pixel's reflection. */
typedef struct fframe {
    float *L;
    long *refl;   /* box index of the representative, -1: none */
    double scale;
} fframe;

nb_status ds_render_lattice(ds *d, ds_frame *fr)
{
    static nb_hkl ones;
    ones.default_F = 1.0;
    const nb_hkl *saved = d->hkl;
    ds_set_hkl(d, &ones);
    nb_status st = ds_render(d, fr, fr->p, d->z, 0, 0);
    ds_set_hkl(d, saved);
    return st;
}

void ds_indexer_init(const ds *d, const ds_frame *fr, ds_indexer *ix)
{
    double val[DS_KINDS];
    ds_values(d, fr, fr->p, d->z, val);
    ds_crystal(fr, val, ix->abc);
    for (int j = 0; j < 3; j++) ix->incident[j] = 0.0;
    for (int i = 0; i < d->start->nsources; i++)
        for (int j = 0; j < 3; j++) ix->incident[j] -= d->start->sources[i].dir[j];
    nb_vunitize(ix->incident, ix->incident);
    ix->lambda = val[K_LAMBDA];
    memcpy(ix->val, val, sizeof ix->val);
    ix->panel = -1;
}

void ds_index_pixel(const ds *d, ds_indexer *ix, size_t pix, int h[3], double *far, int *panel, double *f,
                    double *s)
{
    const int p = ds_pixel_panel(d, pix);
    const size_t off = ds_panel_start(d, p);
    if (p != ix->panel) ds_panel_at(d, ix->val, ix->panel = p, &ix->now); /* where the values put it */
    const nb_panel *q = &ix->now;
    *f = (double)((pix - off) % (size_t)q->fpixels) + 0.5, *s = (double)((pix - off) / (size_t)q->fpixels) + 0.5;
    *panel = p;
    double pos[3], hkl[3];
    for (int j = 0; j < 3; j++) pos[j] = q->pix0[j] + *f * q->pixel_size * q->fdet[j] + *s * q->pixel_size * q->sdet[j];
    nb_vunitize(pos, pos);
    for (int j = 0; j < 3; j++) pos[j] = (pos[j] - ix->incident[j]) / ix->lambda;
    for (int j = 0; j < 3; j++) hkl[j] = nb_vdot(ix->abc[j], pos) * 1e10, h[j] = (int)nearbyint(hkl[j]);
    *far = fabs(hkl[0] - h[0]) + fabs(hkl[1] - h[1]) + fabs(hkl[2] - h[2]);
}

static nb_status frame_lattice(ds *d, ds_frame *fr, const fbox *b, fframe *ff)
{
    nb_status st = ds_render_lattice(d, fr);
    if (st) return st;
    double val[DS_KINDS];
    ds_values(d, fr, fr->p, d->z, val);
    ds_indexer ix;
    ds_indexer_init(d, fr, &ix);
    ff->scale = val[K_SCALE];
    const size_t n = fr->npix ? fr->npix : 1;
    ff->L = malloc(n * sizeof *ff->L), ff->refl = malloc(n * sizeof *ff->refl);
    if (!ff->L || !ff->refl) return nb_error_set(NB_ERR_NOMEM, "out of memory for --refine-F");
    long none = 0;
    double Lmax = 0.0, far_at_max = 0.0;
    for (size_t i = 0; i < fr->npix; i++) {
        int h[3], c[3], panel;
        double dist, f, s;
        ds_index_pixel(d, &ix, fr->pix[i], h, &dist, &panel, &f, &s);
        canonical(b, h, c);
        const size_t at = box_index(b, c[0], c[1], c[2]);
        ff->L[i] = d->image[fr->pix[i]];
        ff->refl[i] = at == (size_t)-1 || (h[0] == 0 && h[1] == 0 && h[2] == 0) ? -1 : (long)at;
        none += ff->refl[i] < 0;
        if (ff->L[i] > Lmax) Lmax = ff->L[i], far_at_max = dist;
    }
    nb_info("frame %ld: --refine-F: %zu pixels, %ld without a reflection; the brightest %.3g from its index by %.3f",
            fr->index + 1, fr->npix, none, Lmax, far_at_max);
    return NB_OK;
}

/* Each region's plane and the frame's scale by one Newton step, the I given. */
static void frame_update(ds_frame *fr, fframe *ff, const double *I, int free_scale)
{
    double gs = 0.0, hs = 0.0;
    double *H = calloc(12 * (size_t)(fr->nregions + 1), sizeof *H);
    if (!H) return;
    for (size_t i = 0; i < fr->npix; i++) {
        if (ff->refl[i] < 0) continue;
        const int r = fr->region[i];
        const double *b = fr->bg + 3 * r, db[3] = {1.0, fr->dx[i], fr->dy[i]};
        const double bragg = I[ff->refl[i]] * ff->L[i];
        const double mu = fmax(ff->scale * bragg + b[0] + b[1] * db[1] + b[2] * db[2], NB_FIT_MU_FLOOR);
        const double res = nb_fit_dnll_dmu(NB_FIT_POISSON, fr->y[i], mu);
        gs += res * bragg, hs += bragg * bragg / mu;
        for (int a = 0; a < 3; a++) {
            H[12 * r + 9 + a] += res * db[a];
            for (int c = 0; c < 3; c++) H[12 * r + 3 * a + c] += db[a] * db[c] / mu;
        }
    }
    for (int r = 0; r < fr->nregions; r++) {
        double step[3], rhs[3] = {-H[12 * r + 9], -H[12 * r + 10], -H[12 * r + 11]};
        ds_plane_damp(H + 12 * r, 0.0);
        if (nb_fit_solve(3, H + 12 * r, 3, rhs, step))
            for (int a = 0; a < 3; a++) fr->bg[3 * r + a] += step[a];
    }
    ds_planes_project(fr->bg, fr->nregions);
    if (free_scale && hs > 0) ff->scale = fmax(ff->scale - gs / hs, 0.1 * ff->scale);
    free(H);
}

/* The Wilson prior's shell means: 1/S per reflection (0 without data). */
static void shell_means(const ds *d, const fbox *b, const double *I, const double *npx, double *inv_S)
{
    double sum[SHELLS] = {0}, cnt[SHELLS] = {0}, dmax2 = 0.0;
    const nb_frame_crystal *c = &d->fr[0].start;
    double a[3], bb[3], cc[3], bc[3], ca[3], ab[3];
    for (int j = 0; j < 3; j++) a[j] = c->a[j] * 1e10, bb[j] = c->b[j] * 1e10, cc[j] = c->c[j] * 1e10;
    nb_vcross(bb, cc, bc), nb_vcross(cc, a, ca), nb_vcross(a, bb, ab);
    const double V = nb_vdot(a, bc);
    double *d2 = malloc(b->n * sizeof *d2);
    if (!d2) return;
    for (size_t i = 0; i < b->n; i++) {
        int h, k, l;
        box_hkl(b, i, &h, &k, &l);
        double q[3];
        for (int j = 0; j < 3; j++) q[j] = (h * bc[j] + k * ca[j] + l * ab[j]) / V;
        d2[i] = nb_vdot(q, q);
        if (npx[i] > 0) dmax2 = fmax(dmax2, d2[i]);
    }
    for (size_t i = 0; i < b->n; i++) {
        if (!(npx[i] > 0)) continue;
        const int s = (int)fmin(SHELLS - 1, floor(SHELLS * d2[i] / (dmax2 * 1.000001)));
        sum[s] += I[i], cnt[s] += 1;
    }
    for (size_t i = 0; i < b->n; i++) {
        const int s = (int)fmin(SHELLS - 1, floor(SHELLS * d2[i] / (dmax2 * 1.000001)));
        inv_S[i] = npx[i] > 0 && sum[s] > 0 ? cnt[s] / sum[s] : 0.0;
    }
    free(d2);
}

/* One round's sums over the frames (every process's): gradient and Fisher
 * information of each I, its pixels, and frames' photons per reflection. */
static nb_status sums(const ds *d, const fframe *ff, const double *I, double *acc, const fbox *b)
{
    memset(acc, 0, 3 * b->n * sizeof *acc);
    for (long f = 0; f < d->nframes; f++) {
        const ds_frame *fr = &d->fr[f];
        if (!ff[f].L) continue;
        for (size_t i = 0; i < fr->npix; i++) {
            const long r = ff[f].refl[i];
            if (r < 0) continue;
            const double *bg = fr->bg + 3 * fr->region[i];
            const double sL = ff[f].scale * ff[f].L[i];
            const double mu = fmax(sL * I[r] + bg[0] + bg[1] * fr->dx[i] + bg[2] * fr->dy[i], NB_FIT_MU_FLOOR);
            acc[r] += sL * nb_fit_dnll_dmu(NB_FIT_POISSON, fr->y[i], mu);
            acc[b->n + r] += sL * sL / mu;
            acc[2 * b->n + r] += 1.0;
        }
    }
    return ds_sum(d, acc, 3 * b->n);
}

/* The frames' scales to a mean of 1, the I the other way. */
static nb_status gauge(const ds *d, fframe *ff, double *I, size_t n)
{
    double m[2] = {0, 0};
    for (long f = 0; f < d->nframes; f++)
        if (ff[f].L) m[0] += ff[f].scale, m[1] += 1;
    nb_status st = ds_sum(d, m, 2);
    if (st || !(m[0] > 0)) return st;
    const double c = m[0] / m[1];
    for (long f = 0; f < d->nframes; f++)
        if (ff[f].L) ff[f].scale /= c;
    for (size_t i = 0; i < n; i++) I[i] *= c;
    return NB_OK;
}

/* The multiplicity: frames where the reflection would give a photon or more
 * at its shell's mean intensity (inv_S: 1 / that mean), so that a reflection
 * refined near 0 still counts the frames that saw it. */
static nb_status multiplicity(const ds *d, const fframe *ff, const double *inv_S, const fbox *b, double *mult)
{
    double *photons = calloc(b->n, sizeof *photons);
    if (!photons) return nb_error_set(NB_ERR_NOMEM, "out of memory for --refine-F");
    memset(mult, 0, b->n * sizeof *mult);
    for (long f = 0; f < d->nframes; f++) {
        if (!ff[f].L) continue;
        const ds_frame *fr = &d->fr[f];
        for (size_t i = 0; i < fr->npix; i++)
            if (ff[f].refl[i] >= 0 && inv_S[ff[f].refl[i]] > 0)
                photons[ff[f].refl[i]] += ff[f].scale * ff[f].L[i] / inv_S[ff[f].refl[i]];
        for (size_t i = 0; i < fr->npix; i++) {
            const long r = ff[f].refl[i];
            if (r >= 0 && photons[r] > 0) mult[r] += photons[r] >= 1.0, photons[r] = 0.0;
        }
    }
    free(photons);
    return ds_sum(d, mult, b->n);
}

/* F and its sigma from I and I's Fisher information: sigma_F = sigma_I / 2 sqrt(I) */
static void amplitude(double I, double fisher, double *F, double *sF)
{
    const double sI = 1.0 / sqrt(fisher);
    *F = sqrt(fmax(I, 0.0));
    *sF = sI / (2.0 * sqrt(fmax(I, sI)));
}

/* The measured reflections of the asymmetric unit as --F-out writes them
 * (nb_fit_dataset.h): the cell as refined (cell_says which), the
 * wavelength the plan's. */
static nb_status F_table(const ds *d, const fbox *b, const double *I, const double *acc, const double *mult,
                         const double cell[6], const char *cell_says, nb_fit_F_table *t)
{
    memset(t, 0, sizeof *t);
    size_t n = 0;
    for (size_t i = 0; i < b->n; i++) n += acc[2 * b->n + i] > 0 && mult[i] > 0;
    t->hkl = malloc((n ? n : 1) * sizeof *t->hkl);
    t->F = malloc((n ? n : 1) * 3 * sizeof *t->F);
    if (!t->hkl || !t->F) {
        nb_fit_F_table_free(t);
        return nb_error_set(NB_ERR_NOMEM, "out of memory for the refined F's table");
    }
    t->sigF = t->F + n, t->mult = t->F + 2 * n;
    for (size_t i = 0; i < b->n; i++) {
        if (!(acc[2 * b->n + i] > 0) || !(mult[i] > 0)) continue;
        box_hkl(b, i, &t->hkl[t->n][0], &t->hkl[t->n][1], &t->hkl[t->n][2]);
        amplitude(I[i], acc[b->n + i], &t->F[t->n], &t->sigF[t->n]);
        t->mult[t->n] = mult[i];
        t->n++;
    }
    t->p1 = b->sg.nops == 1;
    snprintf(t->spacegroup, sizeof t->spacegroup, "%s", b->sg.hall[0] ? b->sg.hall : b->sg.spacegroup);
    memcpy(t->cell, cell, sizeof t->cell);
    snprintf(t->cell_says, sizeof t->cell_says, "%s", cell_says);
    t->lambda = d->start->lambda0 * 1e10;
    return NB_OK;
}

void nb_fit_F_table_free(nb_fit_F_table *t)
{
    free(t->hkl), free(t->F);
    memset(t, 0, sizeof *t);
}

/* The rounds: I by Newton on each, then the frames' planes and scales
 * (from the first round when the I start from a refinement's, warm). */
static nb_status rounds(ds *d, fframe *ff, const fbox *b, double *I, double *acc, double *inv_S, int warm)
{
    nb_status st = NB_OK;
    const double t0 = nb_now();
    for (int round = 0; round < ROUNDS && !st; round++) {
        if ((st = sums(d, ff, I, acc, b))) break;
        shell_means(d, b, I, acc + 2 * b->n, inv_S);
        for (size_t r = 0; r < b->n; r++) {
            if (!(acc[2 * b->n + r] > 0) || !(acc[b->n + r] > 0)) continue;
            const double g = acc[r] + d->o->F_prior * inv_S[r];
            I[r] = fmax(I[r] - g / acc[b->n + r], 0.1 * I[r]);
        }
        /* the scales free once the I have settled: from a flat start both
         * would wander along the product that the pixels fix */
        const int free_scale = d->L.where_p[K_SCALE] >= 0 && (warm || round >= ROUNDS / 3);
        for (long f = 0; f < d->nframes; f++)
            if (ff[f].L) frame_update(&d->fr[f], &ff[f], I, free_scale);
        if (free_scale) st = gauge(d, ff, I, b->n);
    }
    if (!st) st = sums(d, ff, I, acc, b);
    ds_clock(d, T_F, t0);
    return st;
}

/* The last refinement's result, kept for --F-out (ds_F_table) and the
 * next refinement's start. */
typedef struct ds_F {
    fbox b;
    double *I, *acc, *mult;   /* box-sized: I, then gradient, information, pixels; multiplicity */
    long *box_m;              /* box index -> index in d->Fset (-1: not measured) */
    long *m_box;              /* and back */
    const nb_hkl *start_F;    /* the F of the reflections not measured */
} ds_F;

static void Fset_free(ds_Fset *F)
{
    free(F->I), free(F->D), free(F->g), free(F->prior), free(F->Dcorr);
    memset(F, 0, sizeof *F);
}

void ds_frefl_free(ds_frame *fr)
{
    ds_frefl *x = fr->fref;
    if (!x) return;
    free(x->slot), free(x->L), free(x->m), free(x->v), free(x->gI), free(x->DI);
    free(x);
    fr->fref = NULL;
}

void ds_F_free(ds *d)
{
    for (long f = 0; d->fr && f < d->nframes; f++) ds_frefl_free(&d->fr[f]);
    Fset_free(&d->Fset);
    if (!d->Fres) return;
    free(d->Fres->I), free(d->Fres->acc), free(d->Fres->mult), free(d->Fres->box_m), free(d->Fres->m_box);
    free(d->Fres);
    d->Fres = NULL;
}

/* The measured reflections (those with pixels) as d->Fset, and each
 * frame's pixels' reflections among them (its fref). */
static nb_status measured_set(ds *d, ds_F *R, fframe *ff, const double *inv_S)
{
    const fbox *b = &R->b;
    ds_Fset *F = &d->Fset;
    long n = 0;
    R->box_m = malloc(b->n * sizeof *R->box_m);
    if (!R->box_m) return nb_error_set(NB_ERR_NOMEM, "out of memory for --refine-F");
    for (size_t i = 0; i < b->n; i++) R->box_m[i] = R->acc[2 * b->n + i] > 0 ? n++ : -1;
    const size_t nn = (size_t)(n ? n : 1);
    F->n = n;
    F->I = malloc(nn * sizeof *F->I), F->D = malloc(nn * sizeof *F->D), F->g = malloc(nn * sizeof *F->g);
    F->prior = malloc(nn * sizeof *F->prior), F->Dcorr = calloc(nn, sizeof *F->Dcorr);
    R->m_box = malloc(nn * sizeof *R->m_box);
    long *seen = malloc(nn * sizeof *seen);
    if (!F->I || !F->D || !F->g || !F->prior || !F->Dcorr || !R->m_box || !seen) {
        free(seen);
        return nb_error_set(NB_ERR_NOMEM, "out of memory for --refine-F");
    }
    for (size_t i = 0; i < b->n; i++) {
        const long m = R->box_m[i];
        if (m < 0) continue;
        R->m_box[m] = (long)i;
        F->I[m] = R->I[i], F->D[m] = R->acc[b->n + i];
        F->prior[m] = d->o->F_prior * inv_S[i], F->g[m] = R->acc[i] + F->prior[m];
    }
    for (long m = 0; m < n; m++) seen[m] = -1;
    const int k = d->L.kp + d->L.kz;
    nb_status st = NB_OK;
    for (long f = 0; f < d->nframes && !st; f++) {
        ds_frame *fr = &d->fr[f];
        ds_frefl_free(fr);
        if (!ff[f].L) continue;
        ds_frefl *x = calloc(1, sizeof *x);
        const size_t np = fr->npix ? fr->npix : 1;
        if (x) x->slot = malloc(np * sizeof *x->slot), x->L = ff[f].L, x->m = malloc(np * sizeof *x->m);
        if (x) ff[f].L = NULL; /* the frame's now */
        if (!x || !x->slot || !x->m) {
            if (x) free(x->slot), free(x->L), free(x->m), free(x);
            st = nb_error_set(NB_ERR_NOMEM, "out of memory for --refine-F");
            break;
        }
        fr->fref = x;
        for (size_t i = 0; i < fr->npix; i++) {
            const long m = ff[f].refl[i] >= 0 ? R->box_m[ff[f].refl[i]] : -1;
            if (m < 0) {
                x->slot[i] = -1;
                continue;
            }
            if (seen[m] < 0 || x->m[seen[m]] != m || seen[m] >= x->nslots) seen[m] = x->nslots, x->m[x->nslots++] = m;
            x->slot[i] = (int)seen[m];
        }
        const size_t ns = (size_t)(x->nslots ? x->nslots : 1);
        x->v = malloc(ns * (size_t)(k ? k : 1) * sizeof *x->v);
        x->gI = malloc(ns * sizeof *x->gI), x->DI = malloc(ns * sizeof *x->DI);
        if (!x->v || !x->gI || !x->DI) st = nb_error_set(NB_ERR_NOMEM, "out of memory for --refine-F");
    }
    free(seen);
    return st;
}

nb_status ds_F_hkl(const ds *d, const double *I, nb_hkl *out)
{
    const ds_F *R = d->Fres;
    const fbox *b = &R->b;
    const nb_hkl *start = R->start_F;
    nb_status st = nb_hkl_alloc(out, -b->H, b->H, -b->K, b->K, -b->Lm, b->Lm, start->default_F);
    if (st) return st;
    out->default_F = start->default_F;
    for (size_t i = 0; i < b->n; i++) {
        int h[3], c[3];
        box_hkl(b, i, &h[0], &h[1], &h[2]);
        canonical(b, h, c);
        const size_t at = box_index(b, c[0], c[1], c[2]);
        const long m = at != (size_t)-1 ? R->box_m[at] : -1;
        if (m >= 0) out->F[nb_hkl_index(out, h[0], h[1], h[2])] = sqrt(fmax(I[m], 0.0));
        else if (start->F && h[0] >= start->h_min && h[0] <= start->h_max && h[1] >= start->k_min &&
                 h[1] <= start->k_max && h[2] >= start->l_min && h[2] <= start->l_max)
            out->F[nb_hkl_index(out, h[0], h[1], h[2])] = start->F[nb_hkl_index(start, h[0], h[1], h[2])];
    }
    out->hkls = (long)b->n;
    return NB_OK;
}

void ds_F_commit(ds *d)
{
    ds_F *R = d->Fres;
    const ds_Fset *F = &d->Fset;
    for (long m = 0; R && m < F->n; m++) {
        R->I[R->m_box[m]] = F->I[m];
        R->acc[R->b.n + R->m_box[m]] = fmax(F->D[m] - F->Dcorr[m], 1e-3 * F->D[m]);
    }
}

/* I's start: flat at the level the pixels ask for, or (warm) the last
 * refinement's where it has one. */
static nb_status start_I(ds *d, const fframe *ff, const fbox *b, double *I, int warm)
{
    double level[2] = {0, 0};
    for (long f = 0; f < d->nframes; f++)
        for (size_t i = 0; ff[f].L && i < d->fr[f].npix; i++) {
            const double *bg = d->fr[f].bg + 3 * d->fr[f].region[i];
            level[0] += d->fr[f].y[i] - (bg[0] + bg[1] * d->fr[f].dx[i] + bg[2] * d->fr[f].dy[i]);
            level[1] += ff[f].scale * ff[f].L[i];
        }
    nb_status st = ds_sum(d, level, 2);
    const ds_F *w = warm ? d->Fres : NULL;
    for (size_t i = 0; i < b->n && !st; i++) {
        I[i] = level[1] > 0 && level[0] > 0 ? level[0] / level[1] : 1.0;
        if (w && w->b.n == b->n && w->acc[2 * b->n + i] > 0) I[i] = fmax(w->I[i], 1e-6 * I[i]);
    }
    return st;
}

/* How far F moved from the last refinement's: the largest and the rms of
 * |F - F_last| / sigma_F over the reflections both measured. */
static void F_moved(ds *d, const fbox *b, const double *I, const double *acc)
{
    const ds_F *w = d->Fres;
    double most = 0.0, sum = 0.0;
    long n = 0;
    for (size_t i = 0; w && w->b.n == b->n && i < b->n; i++) {
        if (!(acc[2 * b->n + i] > 0) || !(w->acc[2 * b->n + i] > 0) || !(acc[b->n + i] > 0)) continue;
        double F, sF, F0, sF0;
        amplitude(I[i], acc[b->n + i], &F, &sF);
        amplitude(w->I[i], w->acc[b->n + i], &F0, &sF0);
        const double m = fabs(F - F0) / sF;
        most = fmax(most, m), sum += m * m, n++;
    }
    d->F_moved = n ? most : INFINITY;
    d->F_moved_rms = n ? sqrt(sum / n) : INFINITY;
}

nb_status ds_refine_F(ds *d, nb_hkl *refined, int warm)
{
    if (d->start->interpolate)
        return nb_error_set(NB_ERR_UNSUPPORTED, "--refine-F: the plan interpolates F between reflections "
                                                "(-interpolate): a pixel's photons are no longer one reflection's");
    fbox b;
    nb_status st = NB_OK;
    space_group(d, &b.sg);
    snprintf(d->space_group_hall, sizeof d->space_group_hall, "%s", b.sg.hall);
    box_size(d, &b);
    if (!d->Fres) warm = 0;
    fframe *ff = calloc((size_t)d->nframes, sizeof *ff);
    double *I = malloc(b.n * sizeof *I), *acc = malloc(3 * b.n * sizeof *acc), *inv_S = malloc(b.n * sizeof *inv_S);
    double *mult = malloc(b.n * sizeof *mult);
    if (!ff || !I || !acc || !inv_S || !mult) st = nb_error_set(NB_ERR_NOMEM, "out of memory for --refine-F");
    for (long f = 0; f < d->nframes && !st; f++) {
        ds_frame *fr = &d->fr[f];
        if (!nb_fit_owns(d->red, f, d->nframes) || fr->failed || !fr->npix) continue;
        if (d->o->frame_first && (f + 1 < d->o->frame_first || f + 1 > d->o->frame_last)) continue;
        st = frame_lattice(d, fr, &b, &ff[f]);
        /* a frame's scale fitted to the start's (flat) F says nothing of its
         * fluence: the first refinement starts them at 1, the plan's
         * fluence; a warm one from where they are */
        if (!st && d->L.where_p[K_SCALE] >= 0 && !warm) ff[f].scale = 1.0;
    }
    st = ds_agree(d, st);
    if (!st) st = start_I(d, ff, &b, I, warm);
    if (!st) st = rounds(d, ff, &b, I, acc, inv_S, warm);
    if (!st) shell_means(d, &b, I, acc + 2 * b.n, inv_S);
    if (!st) st = multiplicity(d, ff, inv_S, &b, mult);
    for (long f = 0; f < d->nframes && d->L.where_p[K_SCALE] >= 0; f++) /* the frames' scales as refined here */
        if (ff && ff[f].L) d->fr[f].p[d->L.where_p[K_SCALE]] = ff[f].scale;
    if (!st) F_moved(d, &b, I, acc);
    long nrefl = 0;
    for (size_t i = 0; !st && i < b.n; i++) nrefl += acc[2 * b.n + i] > 0 && mult[i] > 0;
    if (!st && ds_rank(d) == 0) nb_info("--refine-F: %ld reflections of %s refined", nrefl, b.sg.spacegroup);
    ds_F_free(d);
    if (!st && !(d->Fres = calloc(1, sizeof *d->Fres))) st = nb_error_set(NB_ERR_NOMEM, "out of memory for --refine-F");
    if (!st) {
        *d->Fres = (ds_F){.b = b, .I = I, .acc = acc, .mult = mult, .start_F = d->hkl};
        I = acc = mult = NULL;
        st = measured_set(d, d->Fres, ff, inv_S);
    }
    if (!st) st = ds_F_hkl(d, d->Fset.I, refined);
    for (long f = 0; ff && f < d->nframes; f++) free(ff[f].L), free(ff[f].refl);
    free(ff), free(inv_S), free(I), free(acc), free(mult);
    return st;
}

nb_status ds_F_table(const ds *d, const double cell[6], const char *cell_says, nb_fit_F_table *t)
{
    if (!d->Fres) return nb_error_set(NB_ERR_DATA, "no refined F to tabulate");
    return F_table(d, &d->Fres->b, d->Fres->I, d->Fres->acc, d->Fres->mult, cell, cell_says, t);
}

/* Frame f's photons above its panels' medians (the background where spots
 * are sparse), and the model's with every F = 1, into sums[0], sums[1]. */
static nb_status frame_level(const nb_plan *plan, const nb_fit_ds_settings *o, nb_engine *engine, long f, float *model,
                             double sums[2])
{
    nb_hkl ones;
    nb_hkl_init(&ones);
    ones.default_F = 1.0;
    nb_fit_observed ob;
    memset(&ob, 0, sizeof ob);
    const long slot = o->frame_first ? f - (o->frame_first - 1) : f;
    const nb_grad_path path = o->precision_given && o->precision ? NB_GRAD_DOUBLE : NB_GRAD_FAST;
    nb_status st = o->observed(o->observed_ctx, f, slot, &ob);
    if (!st) st = nb_fit_leave_out_unrendered(plan, &ones, &ob);
    if (!st) st = nb_fit_render_frame(engine, plan, &ones, path, f, model);
    for (int p = 0; p < nb_plan_npanels(plan) && !st; p++) {
        int fp, sp;
        size_t off;
        nb_plan_panel_dims(plan, p, &fp, &sp, &off);
        const size_t n = (size_t)fp * sp;
        const double med = nb_fit_panel_median(&ob, off, n);
        for (size_t i = off; i < off + n; i++)
            if (ob.use[i]) sums[0] += ob.y[i] - med, sums[1] += model[i];
    }
    free(ob.y), free(ob.use);
    return st;
}

nb_status nb_fit_flat_F(const nb_plan *plan, const nb_fit_ds_settings *o, nb_engine *engine,
                        const nb_fit_reduction *red, nb_hkl *hkl)
{
    /* frames without an image (none, too few given, or a range past the
     * plan's) are the fit's errors to report, after this */
    if (!o->nobserved) return NB_OK;
    if (!red) red = &nb_fit_single_process;
    const long first = o->frame_first ? o->frame_first - 1 : 0;
    long last = o->frame_first ? o->frame_last - 1 : plan->nframes - 1;
    if (last >= plan->nframes) last = plan->nframes - 1;
    if (last >= first + o->nobserved) last = first + o->nobserved - 1;
    double sums[2] = {0, 0};
    float *model = NULL;
    nb_status st = nb_calloc((void **)&model, nb_plan_total_pixels(plan), sizeof *model, "the model");
    for (long f = first; f <= last && !st; f++)
        if (nb_fit_owns(red, f, plan->nframes)) st = frame_level(plan, o, engine, f, model, sums);
    free(model);
    st = nb_fit_agree(red, st);
    if (!st) st = nb_fit_sum(red, sums, 2);
    if (!st && !(sums[0] > 0 && sums[1] > 0))
        st = nb_error_set(NB_ERR_DATA, "--refine-F: the plan has no structure factors, and the observed images hold "
                                       "no photons above their background to start a flat F from: give F (nb-hkl, "
                                       "or nb-geom -default_F)");
    if (st) return st;
    hkl->default_F = sqrt(sums[0] / sums[1]);
    nb_info("--refine-F: no structure factors in the plan: a flat start, F = %.6g", hkl->default_F);
    return NB_OK;
}
