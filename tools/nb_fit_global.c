/* nb_fit_global.c - the dataset fit's global stage: the crystals'
 * orientations and the detector's distance and beam centre from a far start.
 *
 * Why a grid over a spot-lattice score, not several starts or basin hopping
 * of the pixel likelihood: the likelihood's basin is one spot wide (about
 * 1/(N a) in reciprocal space: a tenth of a degree for N = 10 at 3 A), so a
 * start 3 degrees off sees no gradient at all, and every probe of it is a
 * render.  The score here is the observed spots' closeness to whole Miller
 * indices, sum over spots of exp(-|h - round(h)|^2 / 2 sigma^2) with
 * h = (a, b, c) . q: its basin is a reflection's spacing wide (N times
 * wider), a probe costs a few hundred multiplications (no render), and a
 * grid is deterministic: the same answer on any number of processes.  The
 * grid is coarse to fine (steps of a quarter of --global-range, then a
 * quarter of that, three times), the detector's distance and beam centre
 * searched first on up to 20 frames' summed best scores, then every frame's
 * orientation at the detector found.  What the grid gets wrong the pixel fit
 * cannot mend, and the verdict reports. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nb_cli.h"
#include "nb_fit_ds.h"
#include "nb_util.h"
#include "nb_vec.h"

#define LEVELS 4
#define SEARCH_FRAMES 20

/* The reciprocal vectors (1/A) of a frame's observed spots with the
 * detector shifted by (distance, fast, slow) mm from the plan's. */
static void spot_q(const ds *d, const ds_frame *fr, const double shift_mm[3], double lambda_A, double *q)
{
    const nb_plan *P = d->start;
    const nb_panel *p0 = &P->panels[0];
    double incident[3] = {0, 0, 0};
    for (int i = 0; i < P->nsources; i++)
        for (int j = 0; j < 3; j++) incident[j] -= P->sources[i].dir[j];
    nb_vunitize(incident, incident);
    double shift[3];
    for (int j = 0; j < 3; j++)
        shift[j] = 1e-3 * (shift_mm[0] * p0->odet[j] - shift_mm[1] * p0->fdet[j] - shift_mm[2] * p0->sdet[j]);
    for (int s = 0; s < fr->nspots; s++) {
        const nb_panel *p = &P->panels[fr->spot_panel[s]];
        double pos[3];
        for (int j = 0; j < 3; j++)
            pos[j] = p->pix0[j] + shift[j] + fr->spot_f[s] * p->pixel_size * p->fdet[j] +
                     fr->spot_s[s] * p->pixel_size * p->sdet[j];
        nb_vunitize(pos, pos);
        for (int j = 0; j < 3; j++) q[3 * s + j] = (pos[j] - incident[j]) / lambda_A;
    }
}

/* The score of the crystal at val (its rotation) for the spots' q. */
static double score(const ds_frame *fr, const double val[K_COUNT], const double *q, double sigma)
{
    double abc[3][3];
    ds_crystal(fr, val, abc);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) abc[i][j] *= 1e10;
    const double w = 1.0 / (2.0 * sigma * sigma);
    double sum = 0.0;
    for (int s = 0; s < fr->nspots; s++) {
        double e = 0.0;
        for (int i = 0; i < 3; i++) {
            const double h = nb_vdot(abc[i], q + 3 * s), dh = h - nearbyint(h);
            e += dh * dh;
        }
        sum += exp(-w * e);
    }
    return sum;
}

/* The best rotation of a frame on a grid coarse to fine (levels of it),
 * around its current one; *best the score there. */
static void best_rotation(const ds *d, const ds_frame *fr, const double *q, int levels, double rot[3], double *best)
{
    double val[K_COUNT];
    ds_values(d, fr, fr->p, d->z, val);
    const int turn = d->L.where_p[K_ROT_X] >= 0 || d->L.where_p[K_ROT_Y] >= 0 || d->L.where_p[K_ROT_Z] >= 0;
    static const double sigma[LEVELS] = {0.15, 0.1, 0.07, 0.05};
    for (int i = 0; i < 3; i++) rot[i] = val[K_ROT_X + i];
    *best = score(fr, val, q, sigma[turn ? levels - 1 : LEVELS - 1]);
    if (!turn) return;
    double step = d->o->global_range / 4.0;
    for (int lv = 0; lv < levels; lv++, step /= 4.0) {
        const int n = lv == 0 ? 4 : 2;
        double centre[3] = {rot[0], rot[1], rot[2]}, top = -1.0;
        for (int a = -n; a <= n; a++)
            for (int b = -n; b <= n; b++)
                for (int c = -n; c <= n; c++) {
                    const int moves[3] = {a, b, c};
                    for (int i = 0; i < 3; i++)
                        val[K_ROT_X + i] = d->L.where_p[K_ROT_X + i] >= 0 ? centre[i] + moves[i] * step : centre[i];
                    const double sc = score(fr, val, q, sigma[lv]);
                    if (sc > top) top = sc, rot[0] = val[K_ROT_X], rot[1] = val[K_ROT_Y], rot[2] = val[K_ROT_Z];
                }
        *best = top;
    }
}

/* Is frame i one of the frames the detector is searched on (the first
 * SEARCH_FRAMES of 10 spots or more, counted over every process)? */
static nb_status search_frames(ds *d, unsigned char *use)
{
    double *spots = calloc((size_t)d->nframes, sizeof *spots);
    if (!spots) return nb_error_set(NB_ERR_NOMEM, "out of memory for the global stage");
    for (long i = 0; i < d->nframes; i++)
        if (ds_owned(d, i)) spots[i] = d->fr[i].nspots;
    nb_status st = nb_par_sum(d->par, spots, (size_t)d->nframes);
    int taken = 0;
    for (long i = 0; i < d->nframes; i++) {
        use[i] = !st && spots[i] >= 10 && taken < SEARCH_FRAMES;
        taken += use[i];
    }
    free(spots);
    return st;
}

/* The summed best scores of the search frames for each detector shift. */
static nb_status detector_scores(ds *d, const unsigned char *use, const double (*shift)[3], int n, int levels,
                                 double *total)
{
    memset(total, 0, (size_t)n * sizeof *total);
    nb_status st = NB_OK;
    for (long i = 0; i < d->nframes && !st; i++) {
        ds_frame *fr = &d->fr[i];
        if (!use[i] || !ds_owned(d, i)) continue;
        double *q = malloc(3 * (size_t)fr->nspots * sizeof *q), val[K_COUNT], rot[3], best;
        if (!q) return nb_error_set(NB_ERR_NOMEM, "out of memory for the global stage");
        ds_values(d, fr, fr->p, d->z, val);
        for (int c = 0; c < n; c++) {
            spot_q(d, fr, shift[c], val[K_LAMBDA], q);
            best_rotation(d, fr, q, levels, rot, &best);
            total[c] += best;
        }
        free(q);
    }
    return nb_par_sum(d->par, total, (size_t)n);
}

/* One detector value (0 distance, 1 Xbeam, 2 Ybeam) searched over
 * +- range in steps, then a quarter step around the best. */
static nb_status search_axis(ds *d, const unsigned char *use, int axis, double range, double step, double shift[3])
{
    for (int pass = 0; pass < 2; pass++) {
        const int n = (int)floor(range / step + 0.5);
        double (*cand)[3] = malloc((size_t)(2 * n + 1) * sizeof *cand), *total = malloc((size_t)(2 * n + 1) * sizeof(double));
        if (!cand || !total) {
            free(cand), free(total);
            return nb_error_set(NB_ERR_NOMEM, "out of memory for the global stage");
        }
        for (int c = 0; c <= 2 * n; c++) {
            memcpy(cand[c], shift, 3 * sizeof(double));
            cand[c][axis] += (c - n) * step;
        }
        nb_status st = detector_scores(d, use, (const double (*)[3])cand, 2 * n + 1, 2, total);
        int best = n;
        for (int c = 0; c <= 2 * n && !st; c++)
            if (total[c] > total[best]) best = c;
        if (!st) shift[axis] = cand[best][axis];
        free(cand), free(total);
        if (st) return st;
        range = step, step /= 4.0;
    }
    return NB_OK;
}

nb_status ds_global(ds *d)
{
    const ds_layout *L = &d->L;
    const int turn = L->where_p[K_ROT_X] >= 0 || L->where_p[K_ROT_Y] >= 0 || L->where_p[K_ROT_Z] >= 0;
    const int axes[3] = {K_DISTANCE, K_XBEAM, K_YBEAM};
    double shift[3] = {0, 0, 0};
    for (int a = 0; a < 3; a++)
        if (L->where_z[axes[a]] >= 0) shift[a] = d->z[L->where_z[axes[a]] - L->kp] - d->zstart[axes[a]];
    unsigned char *use = calloc((size_t)d->nframes, 1);
    if (!use) return nb_error_set(NB_ERR_NOMEM, "out of memory for the global stage");
    nb_status st = search_frames(d, use);
    if (!st && L->where_z[K_DISTANCE] >= 0) st = search_axis(d, use, 0, d->o->global_distance, 1.0, shift);
    for (int a = 1; a < 3 && !st; a++)
        if (L->where_z[axes[a]] >= 0) st = search_axis(d, use, a, d->o->global_beam, 0.25, shift);
    for (int round = 0; round < 2 && !st && L->where_z[K_DISTANCE] >= 0 && L->where_z[K_XBEAM] >= 0; round++)
        for (int a = 0; a < 3 && !st; a++)
            if (L->where_z[axes[a]] >= 0) st = search_axis(d, use, a, a ? 0.25 : 1.0, a ? 0.0625 : 0.25, shift);
    free(use);
    if (st) return st;
    for (int a = 0; a < 3; a++)
        if (L->where_z[axes[a]] >= 0) {
            d->z[L->where_z[axes[a]] - L->kp] = d->zstart[axes[a]] + shift[a];
            if (d->par->rank == 0)
                nb_info("global stage: %s = %.4f mm", ds_kind_name(axes[a]), d->zstart[axes[a]] + shift[a]);
        }
    for (long i = 0; i < d->nframes && turn; i++) {
        ds_frame *fr = &d->fr[i];
        if (!ds_owned(d, i) || fr->nspots == 0) continue;
        double *q = malloc(3 * (size_t)fr->nspots * sizeof *q), val[K_COUNT], rot[3], best;
        if (!q) return nb_error_set(NB_ERR_NOMEM, "out of memory for the global stage");
        ds_values(d, fr, fr->p, d->z, val);
        spot_q(d, fr, shift, val[K_LAMBDA], q);
        best_rotation(d, fr, q, LEVELS, rot, &best);
        free(q);
        for (int k = 0; k < 3; k++)
            if (L->where_p[K_ROT_X + k] >= 0) fr->p[L->where_p[K_ROT_X + k]] = rot[k];
        nb_info("frame %ld: global stage turn %.3f %.3f %.3f degrees (score %.1f of %d spots)", i + 1, rot[0], rot[1],
                 rot[2], best, fr->nspots);
    }
    return NB_OK;
}
