/* nb_fit_global.c - the dataset fit's global stage: the crystals'
 * orientations (and cells) and the detector's distance and beam centre from
 * a far start, on the observed spots' centroids, before any pixel is fitted.
 *
 * Why a search over a spot-lattice score, not several starts or basin
 * hopping of the pixel likelihood: the likelihood's basin is one spot wide
 * (about 1/(N a) in reciprocal space: a tenth of a degree for N = 10 at
 * 3 A), so a start 3 degrees off sees no gradient at all, and every probe of
 * it is a render.  The score here costs a few hundred multiplications a
 * probe and its basin is a reflection's spacing wide.
 *
 * The score of a crystal (real-space rows A, so that h = A q) is
 *   S = sum over spots of exp(-m^2 / 2),  m^2 = |e_perp|^2 / sp^2 + e_exc^2 / se^2,
 * e = q - A^-1 round(A q) the spot's scattering vector less its nearest
 * lattice point, split along the diffracted beam s1 (e_exc: how far the
 * point is off the Ewald sphere, which a still's spot allows up to the
 * reflection's width: 1/(N a) of the crystal's size, its mosaic spread and
 * bandwidth, se) and across it (e_perp: where the spot is on the detector,
 * known to about a pixel, sp).  A score in fractional indices alone (|h -
 * round h| < 0.1 in every direction) is too loose across s1 and too tight
 * along it: on dense patterns (large cells, many spots) chance matches
 * crowd out the true ones.  The spots scored are the TOP_SPOTS strongest
 * (photons above their local background): faint components are the fringes
 * of small crystals and the noise, which the true lattice does not place;
 * pieces of one spot split by the threshold are merged where they are found
 * (nb_fit_roi.c).
 *
 * Per frame, the candidates are the start itself, refined locally, and the
 * best CANDIDATES local maxima of a grid of turns (+- --global-range in
 * quarters, each cell edge scanned +-10 % where the cell is refined), each
 * refined on finer grids and then by Gauss-Newton on the weighted residuals
 * (orientation and the refined cell together, the weights annealed from
 * wide to the spots' own).  The best candidate replaces the start only when
 * it stands MIN_CONTRAST standard deviations above the scores of random
 * orientations (RANDOM_PROBES of them: the score's chance level on this
 * frame's spots) and its score beats the start's by a margin chance would
 * not give, MARGIN sqrt(S + S_start) (two scores' matched spots differ by
 * about the square root of their sum when both orientations are equally
 * right), or the start's own stands less than half MIN_CONTRAST above
 * chance (a start that places no more spots than a random orientation has
 * nothing to keep).  A candidate better than the start by one such
 * standard deviation but not by that margin is taken too: the start refined in its own basin as it is, one in
 * another basin with the start kept as a rival, which the pixel fit tries
 * as well.  A frame moved keeps its start as the fallback of the
 * pixel fit (nb_fit_dataset.c).  The detector's distance and beam centre
 * are searched first, on the summed best scores of up to SEARCH_FRAMES
 * frames; a shared cell takes the median of the frames' found ones.  A grid
 * is deterministic: the same answer on any number of processes. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nb_fit_ds.h"
#include "nb_stills.h"
#include "nb_util.h"
#include "nb_vec.h"

#define DTR (M_PI / 180.0)
#define LEVELS 4
#define SEARCH_FRAMES 20
#define TOP_SPOTS 200
#define CANDIDATES 6
#define RANDOM_PROBES 32
#define MARGIN 2.0
#define MIN_CONTRAST 6.0
#define CELL_SCAN 0.10 /* +- a cell edge's relative range, in steps of CELL_STEP */
#define CELL_STEP 0.02
#define GN_ITERATIONS 12

/* One frame's spots as the search sees them, at the current detector. */
typedef struct gspots {
    int n;
    double *q, *s1;     /* 3 n: scattering vectors (1/A), unit diffracted beams */
    double *sp0, *se0;  /* n: the spot's own sigmas across and along s1 (1/A) */
} gspots;

/* The score's widths at a level: the spots' own, widened by half a grid
 * step's turn (radians) of the spot's q. */
typedef struct gwidth {
    double turn;        /* rad */
} gwidth;

static void gspots_free(gspots *g)
{
    free(g->q), free(g->s1), free(g->sp0), free(g->se0);
    memset(g, 0, sizeof *g);
}

static int cmp_weight_desc(const void *a, const void *b)
{
    const double x = ((const double *)a)[0], y = ((const double *)b)[0];
    return x > y ? -1 : x < y;
}

/* The frame's beam: its sources' mean incident direction, and their spread
 * in wavelength and direction (the bandwidth and divergence: relative, rad),
 * the frame's own sources (a shot's spectrum) where it has them. */
static nb_status source_spread(const ds *d, const ds_frame *fr, double incident[3], double *spread)
{
    nb_source *own;
    int n;
    nb_status st = nb_plan_frame_sources(d->start, fr->index, &own, &n);
    if (st) return st;
    const nb_source *src = own ? own : d->start->sources;
    const double ref = own ? fr->start.lambda : d->start->lambda0;
    if (!own) n = d->start->nsources;
    incident[0] = incident[1] = incident[2] = 0.0;
    *spread = 0.0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < 3; j++) incident[j] -= src[i].dir[j];
    nb_vunitize(incident, incident);
    for (int i = 0; i < n; i++) {
        double dir[3];
        for (int j = 0; j < 3; j++) dir[j] = -src[i].dir[j];
        nb_vunitize(dir, dir);
        const double dl = fabs(src[i].lambda / ref - 1.0), da = acos(fmin(1.0, nb_vdot(dir, incident)));
        *spread = fmax(*spread, fmax(dl, da));
    }
    free(own);
    return NB_OK;
}

/* The frame's strongest spots (at most `top`) with the detector's distance,
 * Xbeam and Ybeam moved by shift_mm from the plan's, at its values val. */
static nb_status spots_make(const ds *d, const ds_frame *fr, const double shift_mm[3], const double val[DS_KINDS],
                            int top, gspots *g)
{
    memset(g, 0, sizeof *g);
    double (*order)[2] = malloc((size_t)(fr->nspots + 1) * sizeof *order);
    if (!order) return nb_error_set(NB_ERR_NOMEM, "out of memory for the global stage");
    for (int s = 0; s < fr->nspots; s++) order[s][0] = fr->spot_w[s], order[s][1] = s;
    qsort(order, (size_t)fr->nspots, sizeof *order, cmp_weight_desc);
    g->n = fr->nspots < top ? fr->nspots : top;
    const size_t n = (size_t)(g->n + 1);
    g->q = malloc(3 * n * sizeof *g->q), g->s1 = malloc(3 * n * sizeof *g->s1);
    g->sp0 = malloc(n * sizeof *g->sp0), g->se0 = malloc(n * sizeof *g->se0);
    if (!g->q || !g->s1 || !g->sp0 || !g->se0) {
        free(order);
        gspots_free(g);
        return nb_error_set(NB_ERR_NOMEM, "out of memory for the global stage");
    }
    double incident[3], spread;
    nb_status st = source_spread(d, fr, incident, &spread);
    if (st) {
        free(order);
        gspots_free(g);
        return st;
    }
    /* the detector where the search puts it, each panel where its values do */
    double at[DS_KINDS];
    memcpy(at, val, sizeof at);
    at[K_DISTANCE] = d->zstart[K_DISTANCE] + shift_mm[0], at[K_XBEAM] = d->zstart[K_XBEAM] + shift_mm[1];
    at[K_YBEAM] = d->zstart[K_YBEAM] + shift_mm[2];
    /* the reflection's width: 1/(N a) of the crystal, its mosaic spread and the sources' spread times |q| */
    const double edge = cbrt(val[K_CELL_A] * val[K_CELL_B] * val[K_CELL_C]);
    const double ncells = cbrt(fmax(val[K_NA], 1.0) * fmax(val[K_NB], 1.0) * fmax(val[K_NC], 1.0));
    const double size_width = 1.0 / (ncells * edge), mosaic = fabs(val[K_MOSAIC]) * DTR;
    for (int k = 0; k < g->n; k++) {
        const int s = (int)order[k][1];
        nb_panel now;
        ds_panel_at(d, at, fr->spot_panel[s], &now);
        const nb_panel *p = &now;
        double pos[3];
        for (int j = 0; j < 3; j++)
            pos[j] = p->pix0[j] + fr->spot_f[s] * p->pixel_size * p->fdet[j] + fr->spot_s[s] * p->pixel_size * p->sdet[j];
        const double dist = nb_vnorm(pos);
        nb_vunitize(pos, pos);
        double *q = g->q + 3 * k;
        for (int j = 0; j < 3; j++) g->s1[3 * k + j] = pos[j], q[j] = (pos[j] - incident[j]) / val[K_LAMBDA];
        const double qlen = nb_vnorm(q);
        /* a pixel across s1, at the spot's distance, as a scattering vector (the
         * centroid of a faint spot is no better: score_contrast.py measured the
         * widths) */
        g->sp0[k] = p->pixel_size / (dist * val[K_LAMBDA]) + 1e-6;
        g->se0[k] = sqrt(size_width * size_width + (mosaic * qlen) * (mosaic * qlen) +
                         (spread * qlen) * (spread * qlen)) + 1e-6;
    }
    free(order);
    return NB_OK;
}

/* ---- the crystal and the score --------------------------------------------------- */

/* A crystal as the score needs it: h = A q (A's rows a, b, c in A), and
 * A^-1 (its columns the reciprocal vectors). */
typedef struct gxtal {
    double A[3][3], Ai[3][3];
} gxtal;

static int xtal_invert(gxtal *x)
{
    const double(*A)[3] = x->A;
    const double det = A[0][0] * (A[1][1] * A[2][2] - A[1][2] * A[2][1]) -
                       A[0][1] * (A[1][0] * A[2][2] - A[1][2] * A[2][0]) +
                       A[0][2] * (A[1][0] * A[2][1] - A[1][1] * A[2][0]);
    if (!(fabs(det) > 0)) return 0;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            const int i1 = (j + 1) % 3, i2 = (j + 2) % 3, j1 = (i + 1) % 3, j2 = (i + 2) % 3;
            x->Ai[i][j] = (A[i1][j1] * A[i2][j2] - A[i1][j2] * A[i2][j1]) / det;
        }
    return 1;
}

/* The crystal of frame fr at values val, its edges scaled by k (NULL: 1). */
static int xtal_at(const ds_frame *fr, const double val[DS_KINDS], const double k[3], gxtal *x)
{
    double abc[3][3];
    ds_crystal(fr, val, abc);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) x->A[i][j] = abc[i][j] * 1e10 * (k ? k[i] : 1.0);
    return xtal_invert(x);
}

/* Spot s's residual, whitened: across s1 over sp, along it over se (the
 * level's widths), and its nearest lattice point's index into h. */
static void residual(const gspots *g, int s, const gxtal *x, double turn, double r[3], double h[3])
{
    const double *q = g->q + 3 * s, *s1 = g->s1 + 3 * s;
    double e[3];
    for (int i = 0; i < 3; i++) h[i] = nearbyint(x->A[i][0] * q[0] + x->A[i][1] * q[1] + x->A[i][2] * q[2]);
    for (int i = 0; i < 3; i++) e[i] = q[i] - (x->Ai[i][0] * h[0] + x->Ai[i][1] * h[1] + x->Ai[i][2] * h[2]);
    const double qlen = nb_vnorm(q), wide = 0.5 * turn * qlen;
    const double sp = sqrt(g->sp0[s] * g->sp0[s] + wide * wide), se = sqrt(g->se0[s] * g->se0[s] + wide * wide);
    const double along = nb_vdot(e, s1);
    for (int i = 0; i < 3; i++) r[i] = (e[i] - along * s1[i]) / sp + along * s1[i] / se;
}

/* The residual at a fixed index h (the Gauss-Newton steps' Jacobian). */
static void residual_at(const gspots *g, int s, const gxtal *x, double turn, const double h[3], double r[3])
{
    const double *q = g->q + 3 * s, *s1 = g->s1 + 3 * s;
    double e[3];
    for (int i = 0; i < 3; i++) e[i] = q[i] - (x->Ai[i][0] * h[0] + x->Ai[i][1] * h[1] + x->Ai[i][2] * h[2]);
    const double qlen = nb_vnorm(q), wide = 0.5 * turn * qlen;
    const double sp = sqrt(g->sp0[s] * g->sp0[s] + wide * wide), se = sqrt(g->se0[s] * g->se0[s] + wide * wide);
    const double along = nb_vdot(e, s1);
    for (int i = 0; i < 3; i++) r[i] = (e[i] - along * s1[i]) / sp + along * s1[i] / se;
}

static double score(const gspots *g, const gxtal *x, double turn)
{
    double sum = 0.0;
    for (int s = 0; s < g->n; s++) {
        double r[3], h[3];
        residual(g, s, x, turn, r, h);
        const double m2 = r[0] * r[0] + r[1] * r[1] + r[2] * r[2];
        if (m2 < 40.0) sum += exp(-0.5 * m2);
    }
    return sum;
}

/* Edge i's best scale of the scanned ones: the spots' indices along it
 * alone closest to whole numbers (one dimension: a wrong edge length
 * leaves the other two indices as they are). */
static double edge_scale(const gspots *g, const gxtal *x, int i)
{
    double best = -1.0, k_best = 1.0;
    const int steps = (int)floor(CELL_SCAN / CELL_STEP + 0.5);
    for (int j = -steps; j <= steps; j++) {
        const double k = 1.0 + j * CELL_STEP;
        double sum = 0.0;
        for (int s = 0; s < g->n; s++) {
            const double *q = g->q + 3 * s, hf = k * (x->A[i][0] * q[0] + x->A[i][1] * q[1] + x->A[i][2] * q[2]);
            const double dh = (hf - nearbyint(hf)) / 0.12;
            sum += exp(-0.5 * dh * dh);
        }
        if (sum > best + 1e-12 || (fabs(sum - best) <= 1e-12 && fabs(k - 1.0) < fabs(k_best - 1.0)))
            best = sum, k_best = k;
    }
    return k_best;
}

/* ---- what the search moves ---------------------------------------------------------- */

/* The search's view of a frame's values: which turns it may move, which
 * cell values it may refine (the frame's own or the shared ones). */
typedef struct gfree {
    int rot[3];               /* 1: that turn is refined */
    int cell[6];              /* 1: that cell value is refined (either way) */
    int any_rot, any_cell, edges; /* edges: a, b or c free (the scan) */
} gfree;

static void free_of(const ds_layout *L, gfree *f)
{
    memset(f, 0, sizeof *f);
    for (int i = 0; i < 3; i++) f->rot[i] = L->where_p[K_ROT_X + i] >= 0, f->any_rot |= f->rot[i];
    for (int i = 0; i < 6; i++) {
        f->cell[i] = L->where_p[K_CELL_A + i] >= 0 || L->where_z[K_CELL_A + i] >= 0;
        f->any_cell |= f->cell[i];
        if (i < 3) f->edges |= f->cell[i];
    }
}

/* The crystal at val with each free edge's scale scanned (scan: whether
 * to); the scales chosen applied to val. */
static int xtal_scanned(const ds_frame *fr, const gfree *f, const gspots *g, double val[DS_KINDS], int scan,
                        gxtal *x)
{
    if (!xtal_at(fr, val, NULL, x)) return 0;
    if (!scan || !f->edges) return 1;
    double k[3] = {1, 1, 1};
    for (int i = 0; i < 3; i++)
        if (f->cell[i]) k[i] = edge_scale(g, x, i);
    if (k[0] == 1.0 && k[1] == 1.0 && k[2] == 1.0) return 1;
    for (int i = 0; i < 3; i++) val[K_CELL_A + i] *= k[i];
    return xtal_at(fr, val, NULL, x);
}

/* A probe: the score of val (its edges scanned when scan) at a level. */
static double probe(const ds_frame *fr, const gfree *f, const gspots *g, double val[DS_KINDS], int scan, double turn)
{
    gxtal x;
    if (!xtal_scanned(fr, f, g, val, scan, &x)) return -1.0;
    return score(g, &x, turn);
}

typedef struct gcand {
    double val[DS_KINDS];
    double score;
} gcand;

/* The grid of turns around val: steps of `step` degrees, +-n of them on
 * each free axis; the best into *out (with scan, each probe's edges
 * scanned), and with keep > 1 the `keep` best that are no neighbours of a
 * better one (two steps apart at least) into cands. */
static int grid(const ds_frame *fr, const gfree *f, const gspots *g, const double val[DS_KINDS], double step, int n,
                int scan, gcand *cands, int keep)
{
    const int side = 2 * n + 1;
    const int na = f->rot[0] ? side : 1, nb = f->rot[1] ? side : 1, nc = f->rot[2] ? side : 1;
    const size_t total = (size_t)na * nb * nc;
    gcand *all = malloc(total * sizeof *all);
    if (!all) return -1;
    for (int a = 0; a < na; a++)
        for (int b = 0; b < nb; b++)
            for (int c = 0; c < nc; c++) {
                gcand *p = all + ((size_t)a * nb + b) * nc + c;
                memcpy(p->val, val, sizeof p->val);
                const int m[3] = {f->rot[0] ? a - n : 0, f->rot[1] ? b - n : 0, f->rot[2] ? c - n : 0};
                for (int i = 0; i < 3; i++) p->val[K_ROT_X + i] += m[i] * step;
                p->score = probe(fr, f, g, p->val, scan, step * DTR);
            }
    int kept = 0;
    for (; kept < keep; kept++) {
        size_t best = total;
        for (size_t i = 0; i < total; i++)
            if (all[i].score >= 0 && (best == total || all[i].score > all[best].score)) best = i;
        if (best == total) break;
        cands[kept] = all[best];
        const int ba = (int)(best / ((size_t)nb * nc)), bb = (int)(best / nc % nb), bc = (int)(best % nc);
        for (size_t i = 0; i < total; i++) {
            const int ia = (int)(i / ((size_t)nb * nc)), ib = (int)(i / nc % nb), ic = (int)(i % nc);
            if (abs(ia - ba) <= 1 && abs(ib - bb) <= 1 && abs(ic - bc) <= 1) all[i].score = -1.0;
        }
    }
    free(all);
    return kept;
}

/* A candidate refined on finer grids (levels 1 .. LEVELS-1, each a quarter
 * of the step before, +-2 steps). */
static void grid_refine(const ds_frame *fr, const gfree *f, const gspots *g, double step, gcand *c)
{
    for (int lv = 1; lv < LEVELS; lv++) {
        step /= 4.0;
        gcand best;
        if (grid(fr, f, g, c->val, step, 2, f->edges, &best, 1) == 1) *c = best;
    }
}

/* ---- Gauss-Newton on the whitened residuals ---------------------------------------- */

/* The values the local refinement moves: the free turns and cell values
 * (positions in val), with their finite-difference steps. */
static int gn_params(const gfree *f, int *at, double *fd)
{
    int n = 0;
    for (int i = 0; i < 3; i++)
        if (f->rot[i]) at[n] = K_ROT_X + i, fd[n++] = 1e-4;
    for (int i = 0; i < 6; i++)
        if (f->cell[i]) at[n] = K_CELL_A + i, fd[n++] = 1e-4;
    return n;
}

/* The candidate's values refined by Gauss-Newton on the spots' whitened
 * residuals, each weighted by its match (exp(-m^2/2): the spots of other
 * lattices and the noise weigh nothing), the widths annealed from `turn`'s
 * to the spots' own; its score (the spots' own widths) into c->score. */
static void gn_refine(const ds_frame *fr, const gfree *f, const gspots *g, double turn, gcand *c)
{
    int at[9];
    double fd[9];
    const int np = gn_params(f, at, fd);
    for (int it = 0; it < GN_ITERATIONS && np; it++) {
        const double level = it + 1 >= GN_ITERATIONS ? 0.0 : turn * pow(0.5, it);
        gxtal x, xm[9];
        if (!xtal_at(fr, c->val, NULL, &x)) break;
        for (int j = 0; j < np; j++) {
            double moved[DS_KINDS];
            memcpy(moved, c->val, sizeof moved);
            moved[at[j]] += fd[j];
            if (!xtal_at(fr, moved, NULL, &xm[j])) return;
        }
        double H[81] = {0}, b[9] = {0};
        for (int s = 0; s < g->n; s++) {
            double r[3], h[3], J[9][3];
            residual(g, s, &x, level, r, h);
            const double m2 = r[0] * r[0] + r[1] * r[1] + r[2] * r[2];
            if (m2 > 25.0) continue;
            const double w = exp(-0.5 * m2);
            for (int j = 0; j < np; j++) {
                double rm[3];
                residual_at(g, s, &xm[j], level, h, rm);
                for (int i = 0; i < 3; i++) J[j][i] = (rm[i] - r[i]) / fd[j];
            }
            for (int j = 0; j < np; j++) {
                for (int i = 0; i < 3; i++) b[j] -= w * J[j][i] * r[i];
                for (int k = 0; k <= j; k++)
                    for (int i = 0; i < 3; i++) H[j * 9 + k] += w * J[j][i] * J[k][i];
            }
        }
        for (int j = 0; j < np; j++) {
            for (int k = 0; k < j; k++) H[k * 9 + j] = H[j * 9 + k];
            H[j * 9 + j] = H[j * 9 + j] * 1.001 + 1e-9;
        }
        double step[9];
        if (!nb_fit_solve(np, H, 9, b, step)) break;
        /* a step at most half a degree or 2 % of a cell value: the weights
         * are a Gaussian's, which the next iteration re-centres */
        double shrink = 1.0;
        for (int j = 0; j < np; j++) {
            const double cap = at[j] <= K_ROT_Z ? 0.5 : 0.02 * fabs(c->val[at[j]]);
            if (fabs(step[j]) * shrink > cap) shrink = cap / fabs(step[j]);
        }
        for (int j = 0; j < np; j++) c->val[at[j]] += shrink * step[j];
    }
    gxtal x;
    c->score = xtal_at(fr, c->val, NULL, &x) ? score(g, &x, 0.0) : -1.0;
}

/* ---- chance ------------------------------------------------------------------------ */

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The mean and standard deviation of the score over random orientations
 * of the start's crystal (the frame's index seeds them: deterministic). */
static void chance(const ds_frame *fr, const gspots *g, const double val[DS_KINDS], double *mean, double *sd)
{
    uint64_t seed = 0x6e622d666974ull ^ (uint64_t)fr->index;
    double sum = 0.0, sum2 = 0.0;
    for (int r = 0; r < RANDOM_PROBES; r++) {
        double v[DS_KINDS];
        memcpy(v, val, sizeof v);
        const double u[3] = {(splitmix(&seed) >> 11) * 0x1p-53, (splitmix(&seed) >> 11) * 0x1p-53,
                             (splitmix(&seed) >> 11) * 0x1p-53};
        v[K_ROT_X] = 360.0 * u[0] - 180.0;
        v[K_ROT_Y] = asin(2.0 * u[1] - 1.0) / DTR;
        v[K_ROT_Z] = 360.0 * u[2] - 180.0;
        gxtal x;
        const double sc = xtal_at(fr, v, NULL, &x) ? score(g, &x, 0.0) : 0.0;
        sum += sc, sum2 += sc * sc;
    }
    *mean = sum / RANDOM_PROBES;
    /* no less than a count's: the probes are few, and at a low mean they
     * may all score 0 */
    *sd = fmax(sqrt(fmax(sum2 / RANDOM_PROBES - *mean * *mean, 0.0)), sqrt(*mean + 1.0));
}

/* ---- a frame's search -------------------------------------------------------------- */

/* What the search found of a frame. */
typedef struct gfound {
    gcand start, best;        /* the start as it is, the best candidate (refined) */
    double chance_mean, chance_sd;
    int moved, plausible;     /* plausible: the start stood out of chance, and the best is in another basin */
} gfound;

/* Frame fr's search at the detector shift (mm): candidates from the grid
 * around its values and the start refined; the test. */
static nb_status frame_search(const ds *d, const ds_frame *fr, const gfree *f, const double shift[3], gfound *out)
{
    double val[DS_KINDS];
    ds_values(d, fr, fr->p, d->z, val);
    gspots g;
    nb_status st = spots_make(d, fr, shift, val, TOP_SPOTS, &g);
    if (st) return st;
    memset(out, 0, sizeof *out);
    memcpy(out->start.val, val, sizeof val);
    gxtal x;
    out->start.score = xtal_at(fr, val, NULL, &x) ? score(&g, &x, 0.0) : 0.0;
    const double step = d->o->global_range / 4.0;
    gcand cands[CANDIDATES + 1];
    int n = f->any_rot ? grid(fr, f, &g, val, step, 4, f->edges, cands, CANDIDATES) : 0;
    if (n < 0) {
        gspots_free(&g);
        return nb_error_set(NB_ERR_NOMEM, "out of memory for the global stage");
    }
    for (int c = 0; c < n; c++) {
        grid_refine(fr, f, &g, step, &cands[c]);
        gn_refine(fr, f, &g, step / 16.0 * DTR, &cands[c]);
    }
    cands[n] = out->start; /* the start, refined locally */
    gn_refine(fr, f, &g, step / 16.0 * DTR, &cands[n]);
    out->best = cands[n];
    for (int c = 0; c < n; c++)
        if (cands[c].score > out->best.score) out->best = cands[c];
    chance(fr, &g, val, &out->chance_mean, &out->chance_sd);
    const double S0 = out->start.score, S = out->best.score;
    /* the start stands out of chance, and the best is not where the start
     * itself leads (another basin, a tenth of a degree away or more): the
     * pixel fit tries both */
    double apart = 0.0;
    for (int i = 0; i < 3; i++)
        apart += (out->best.val[K_ROT_X + i] - cands[n].val[K_ROT_X + i]) *
                 (out->best.val[K_ROT_X + i] - cands[n].val[K_ROT_X + i]);
    const int elsewhere = sqrt(apart) > 0.1;
    /* a start that places no more spots than a random orientation has nothing to keep */
    const int start_at_chance = (S0 - out->chance_mean) / out->chance_sd < 0.5 * MIN_CONTRAST;
    const int clear = S - S0 > MARGIN * sqrt(S + S0) || start_at_chance;
    const int significant = (S - out->chance_mean) / out->chance_sd > MIN_CONTRAST;
    /* the start refined in its own basin, or better in another but not
     * clearly: moved, the start (in the second case) kept as a rival that
     * the pixel fit tries too (the lower deviance of two passing fits kept) */
    out->moved = significant && (clear || S - S0 > sqrt(S + S0));
    out->plausible = ((S0 - out->chance_mean) / out->chance_sd > MIN_CONTRAST || !clear) && elsewhere && out->moved;
    nb_info("frame %ld: global stage: %s (score %.1f of %d spots, the start's %.1f, chance %.1f +- %.1f; turn %.3f "
            "%.3f %.3f degrees)",
            fr->index + 1, out->moved ? "moved" : "kept its start", S, g.n, S0, out->chance_mean, out->chance_sd,
            out->best.val[K_ROT_X], out->best.val[K_ROT_Y], out->best.val[K_ROT_Z]);
    gspots_free(&g);
    return NB_OK;
}

/* ---- the detector ---------------------------------------------------------------- */

/* Is frame i one of the frames the detector is searched on (the first
 * SEARCH_FRAMES of 10 spots or more, counted over every process)? */
static nb_status search_frames(ds *d, unsigned char *use)
{
    double *spots = calloc((size_t)d->nframes, sizeof *spots);
    if (!spots) return nb_error_set(NB_ERR_NOMEM, "out of memory for the global stage");
    for (long i = 0; i < d->nframes; i++)
        if (ds_owned(d, i)) spots[i] = d->fr[i].nspots;
    nb_status st = ds_sum(d, spots, (size_t)d->nframes);
    int taken = 0;
    for (long i = 0; i < d->nframes; i++) {
        use[i] = !st && spots[i] >= 10 && taken < SEARCH_FRAMES;
        taken += use[i];
    }
    free(spots);
    return st;
}

/* The summed best scores of the search frames for each detector shift:
 * each frame's turns on the grid's first two levels (no scan). */
static nb_status detector_scores(ds *d, const unsigned char *use, const double (*shift)[3], int n, double *total)
{
    memset(total, 0, (size_t)n * sizeof *total);
    gfree f;
    free_of(&d->L, &f);
    f.edges = 0;
    const double step = d->o->global_range / 4.0;
    nb_status st = NB_OK;
    for (long i = 0; i < d->nframes && !st; i++) {
        ds_frame *fr = &d->fr[i];
        if (!use[i] || !ds_owned(d, i)) continue;
        double val[DS_KINDS];
        ds_values(d, fr, fr->p, d->z, val);
        for (int c = 0; c < n && !st; c++) {
            gspots g;
            if ((st = spots_make(d, fr, shift[c], val, TOP_SPOTS / 2, &g))) break;
            gcand best;
            if (f.any_rot) {
                if (grid(fr, &f, &g, val, step, 4, 0, &best, 1) == 1 &&
                    grid(fr, &f, &g, best.val, step / 4.0, 2, 0, &best, 1) == 1)
                    total[c] += best.score;
            } else total[c] += probe(fr, &f, &g, val, 0, 0.0);
            gspots_free(&g);
        }
    }
    st = ds_agree(d, st);
    return st ? st : ds_sum(d, total, (size_t)n);
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
        nb_status st = detector_scores(d, use, (const double (*)[3])cand, 2 * n + 1, total);
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

/* The detector's distance and beam centre (those refined), into shift (mm
 * from the plan's). */
static nb_status detector_search(ds *d, double shift[3])
{
    const ds_layout *L = &d->L;
    const int axes[3] = {K_DISTANCE, K_XBEAM, K_YBEAM};
    for (int a = 0; a < 3; a++)
        shift[a] = L->where_z[axes[a]] >= 0 ? d->z[L->where_z[axes[a]] - L->kp] - d->zstart[axes[a]] : 0.0;
    if (L->where_z[K_DISTANCE] < 0 && L->where_z[K_XBEAM] < 0 && L->where_z[K_YBEAM] < 0) return NB_OK;
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
    for (int a = 0; a < 3 && !st; a++)
        if (L->where_z[axes[a]] >= 0) {
            d->z[L->where_z[axes[a]] - L->kp] = d->zstart[axes[a]] + shift[a];
            if (ds_rank(d) == 0)
                nb_info("global stage: %s = %.4f mm", ds_kind_name(&d->L, axes[a]), d->zstart[axes[a]] + shift[a]);
        }
    return st;
}

/* ---- the stage ---------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* A shared cell: each value the median of the frames' found ones (the
 * frames whose best stood out of chance, on every process), when 3 or more
 * found one. */
static nb_status shared_cell(ds *d, const double *found)
{
    const ds_layout *L = &d->L;
    double *v = malloc((size_t)(d->nframes + 1) * sizeof *v);
    if (!v) return nb_error_set(NB_ERR_NOMEM, "out of memory for the global stage");
    for (int k = K_CELL_A; k <= K_CELL_GAMMA; k++) {
        if (L->where_z[k] < 0) continue;
        long n = 0;
        for (long i = 0; i < d->nframes; i++)
            if (found[7 * i] > 0) v[n++] = found[7 * i + 1 + (k - K_CELL_A)];
        if (n < 3) continue;
        qsort(v, (size_t)n, sizeof *v, cmp_double);
        d->z[L->where_z[k] - L->kp] = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
        if (ds_rank(d) == 0)
            nb_info("global stage: %s = %.5g (the median of %ld frames')", ds_kind_name(L, k), d->z[L->where_z[k] - L->kp], n);
    }
    free(v);
    return NB_OK;
}

nb_status ds_global(ds *d)
{
    const ds_layout *L = &d->L;
    const double t0 = nb_now();
    gfree f;
    free_of(L, &f);
    double shift[3];
    nb_status st = detector_search(d, shift);
    /* per frame: found (1 when its best stood out of chance) and the cell found */
    double *found = calloc(7 * (size_t)d->nframes, sizeof *found);
    if (!st && !found) st = nb_error_set(NB_ERR_NOMEM, "out of memory for the global stage");
    for (long i = 0; i < d->nframes && !st && (f.any_rot || f.any_cell); i++) {
        ds_frame *fr = &d->fr[i];
        if (!ds_owned(d, i) || fr->nspots == 0) continue;
        gfound res;
        if ((st = frame_search(d, fr, &f, shift, &res))) break;
        fr->moved = res.moved, fr->start_plausible = res.plausible;
        const gcand *c = res.moved ? &res.best : &res.start;
        for (int k = 0; k < K_COUNT; k++)
            if (L->where_p[k] >= 0 && (k <= K_ROT_Z || (k >= K_CELL_A && k <= K_CELL_GAMMA)))
                fr->p[L->where_p[k]] = c->val[k];
        if ((res.best.score - res.chance_mean) / res.chance_sd > MIN_CONTRAST) {
            found[7 * i] = 1.0;
            for (int k = 0; k < 6; k++) found[7 * i + 1 + k] = res.best.val[K_CELL_A + k];
        }
    }
    if (!st) st = ds_sum(d, found, 7 * (size_t)d->nframes);
    if (!st) st = shared_cell(d, found);
    free(found);
    d->clock_s[T_GLOBAL] += nb_now() - t0, d->clock_n[T_GLOBAL]++;
    return st;
}

nb_status ds_global_frame(ds *d, ds_frame *fr)
{
    const ds_layout *L = &d->L;
    const double t0 = nb_now();
    gfree f;
    free_of(L, &f);
    const int axes[3] = {K_DISTANCE, K_XBEAM, K_YBEAM};
    double shift[3];
    for (int a = 0; a < 3; a++)
        shift[a] = L->where_z[axes[a]] >= 0 ? d->z[L->where_z[axes[a]] - L->kp] - d->zstart[axes[a]] : 0.0;
    nb_status st = NB_OK;
    if (fr->nspots > 0 && (f.any_rot || f.any_cell)) {
        gfound res;
        if (!(st = frame_search(d, fr, &f, shift, &res))) {
            fr->moved = res.moved, fr->start_plausible = res.plausible;
            const gcand *c = res.moved ? &res.best : &res.start;
            for (int k = 0; k < K_COUNT; k++)
                if (L->where_p[k] >= 0 && (k <= K_ROT_Z || (k >= K_CELL_A && k <= K_CELL_GAMMA)))
                    fr->p[L->where_p[k]] = c->val[k];
        }
    }
    d->clock_s[T_GLOBAL] += nb_now() - t0, d->clock_n[T_GLOBAL]++;
    return st;
}
