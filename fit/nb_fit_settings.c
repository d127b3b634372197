/* nb_fit_settings.c - a frame indexed in another setting of its lattice.
 *
 * A lattice whose metric is nearly that of a higher symmetry (a monoclinic
 * cell with a cos(beta) near -c, an orthorhombic one with two edges alike)
 * has other bases that give its cell again: rotations that map the lattice
 * (nearly) onto itself but not its structure factors, since they are no
 * symmetry of the crystal.  An indexing of a still, which sees the spots'
 * positions alone, picks one of them as readily as the true one (the
 * classic indexing ambiguity of serial crystallography); every spot is then
 * predicted where it is, but with another reflection's F.  Where the plan's
 * F tell reflections apart, the pixels do not: each such setting is tried
 * on each frame (one render), and a frame takes the one that explains its
 * pixels best when it beats the frame's own by more than MARGIN in -log L (a
 * likelihood ratio no noise gives); a frame that failed by its spots'
 * photons alone is tried too.  The settings: the bases M (a, b, c) of
 * integer matrices M of entries -2 .. 2 and determinant 1 whose cell is the
 * start's within SETTING_LENGTH in every edge and SETTING_ANGLE in every
 * angle, the identity left out (the crystal's own symmetry among them
 * predicts the same image, and is never taken: no margin to beat). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nb_fit_ds.h"
#include "nb_util.h"
#include "nb_vec.h"

#define SETTINGS_MAX 48
#define SETTING_LENGTH 0.01 /* relative */
#define SETTING_ANGLE 1.0   /* degrees */
#define MARGIN 25.0         /* -log L */

typedef struct settings {
    int n;
    int M[SETTINGS_MAX][9];
} settings;

/* The metric's six numbers (edges, angles in degrees) of the basis M (a b c),
 * G the basis's own metric (3 x 3). */
static void metric_cell(const double G[9], const int M[9], double cell[6])
{
    double H[9];
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 3; k++) {
            double v = 0.0;
            for (int j = 0; j < 3; j++)
                for (int l = 0; l < 3; l++) v += M[3 * i + j] * G[3 * j + l] * M[3 * k + l];
            H[3 * i + k] = v;
        }
    for (int i = 0; i < 3; i++) cell[i] = sqrt(fmax(H[4 * i], 0.0));
    cell[3] = acos(H[5] / (cell[1] * cell[2])) * 180.0 / M_PI;
    cell[4] = acos(H[2] / (cell[0] * cell[2])) * 180.0 / M_PI;
    cell[5] = acos(H[1] / (cell[0] * cell[1])) * 180.0 / M_PI;
}

/* The other settings of the lattice of cell (A, degrees). */
static void lattice_settings(const double cell[6], settings *out)
{
    const double r = M_PI / 180.0, ca = cos(cell[3] * r), cb = cos(cell[4] * r), cg = cos(cell[5] * r);
    const double G[9] = {cell[0] * cell[0], cell[0] * cell[1] * cg, cell[0] * cell[2] * cb,
                         cell[0] * cell[1] * cg, cell[1] * cell[1], cell[1] * cell[2] * ca,
                         cell[0] * cell[2] * cb, cell[1] * cell[2] * ca, cell[2] * cell[2]};
    out->n = 0;
    int M[9];
    for (long code = 0; code < 1953125L && out->n < SETTINGS_MAX; code++) { /* 5^9 */
        long c = code;
        for (int i = 0; i < 9; i++) M[i] = (int)(c % 5) - 2, c /= 5;
        const long det = (long)M[0] * (M[4] * M[8] - M[5] * M[7]) - (long)M[1] * (M[3] * M[8] - M[5] * M[6]) +
                         (long)M[2] * (M[3] * M[7] - M[4] * M[6]);
        if (det != 1 || (M[0] == 1 && M[4] == 1 && M[8] == 1 && !M[1] && !M[2] && !M[3] && !M[5] && !M[6] && !M[7]))
            continue;
        double got[6];
        metric_cell(G, M, got);
        int alike = 1;
        for (int i = 0; i < 3 && alike; i++) alike = fabs(got[i] / cell[i] - 1.0) <= SETTING_LENGTH;
        for (int i = 3; i < 6 && alike; i++) alike = fabs(got[i] - cell[i]) <= SETTING_ANGLE;
        if (alike) memcpy(out->M[out->n++], M, sizeof M);
    }
}

int ds_F_informative(const nb_hkl *hkl)
{
    if (!hkl || !hkl->F) return 0;
    const size_t n = (size_t)(hkl->h_max - hkl->h_min + 1) * (hkl->k_max - hkl->k_min + 1) * (hkl->l_max - hkl->l_min + 1);
    double s = 0.0, s2 = 0.0;
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (hkl->F[i] > 0) s += hkl->F[i], s2 += hkl->F[i] * hkl->F[i], m++;
    if (m < 2) return 0;
    const double mean = s / m, var = s2 / m - mean * mean;
    return var > 0 && sqrt(var) > 0.05 * mean;
}

/* -log L of frame fr with its crystal's vectors abc (m; its turns 0, a cell
 * of its own the vectors' cell), the planes and scale as they are; the
 * frame's crystal and values are restored. */
static nb_status setting_nll(ds *d, ds_frame *fr, const double abc[3][3], double *nll)
{
    double U0[9], cell0[6], p[DS_MAX];
    memcpy(U0, fr->U0, sizeof U0), memcpy(cell0, fr->cell0, sizeof cell0), memcpy(p, fr->p, sizeof p);
    nb_status st = ds_frame_set_crystal(fr, abc[0], abc[1], abc[2]);
    for (int k = K_ROT_X; k <= K_CELL_GAMMA && !st; k++)
        if (d->L.where_p[k] >= 0) fr->p[d->L.where_p[k]] = k <= K_ROT_Z ? 0.0 : fr->cell0[k - K_CELL_A];
    if (!st) st = ds_render(d, fr, fr->p, d->z, 0, 0);
    if (!st) *nll = ds_likelihood(d, fr, fr->p, d->z, fr->bg, NB_FIT_POISSON, 0);
    memcpy(fr->U0, U0, sizeof U0), memcpy(fr->cell0, cell0, sizeof cell0), memcpy(fr->p, p, sizeof p);
    return st;
}

/* A frame whose settings are tried: one that passed its verdict, or one that
 * failed it by its spots' photons alone (they do not correlate with the
 * model's: the mark of another setting, every spot where the image has one
 * but with another reflection's F; near the verdict's threshold a frame in
 * the wrong setting passes or fails by chance, and only a pass was tried) */
static int settings_tried(const ds *d, long i)
{
    return ds_joins(d, i) || (ds_owned(d, i) && d->fr[i].failed == DS_FAIL_UNCORRELATED);
}

nb_status ds_resolve_settings(ds *d, unsigned char *switched)
{
    const ds_layout *L = &d->L;
    if (!ds_F_informative(d->hkl) || (L->where_p[K_ROT_X] < 0 && L->where_p[K_ROT_Y] < 0 && L->where_p[K_ROT_Z] < 0))
        return NB_OK;
    settings set;
    double val0[DS_KINDS];
    ds_values(d, &d->fr[0], d->fr[0].p, d->z, val0);
    lattice_settings(val0 + K_CELL_A, &set);
    if (!set.n) return NB_OK;
    nb_status st = NB_OK;
    for (long i = 0; i < d->nframes && !st; i++) {
        ds_frame *fr = &d->fr[i];
        if (!settings_tried(d, i)) continue;
        double val[DS_KINDS], abc[3][3], nll0, best = INFINITY, alt[3][3], best_abc[3][3];
        int best_m = -1;
        ds_values(d, fr, fr->p, d->z, val);
        ds_crystal(fr, val, abc);
        if ((st = ds_render(d, fr, fr->p, d->z, 0, 0))) break;
        nll0 = ds_likelihood(d, fr, fr->p, d->z, fr->bg, NB_FIT_POISSON, 0);
        for (int m = 0; m < set.n && !st; m++) {
            const int *M = set.M[m];
            for (int r = 0; r < 3; r++)
                for (int j = 0; j < 3; j++) alt[r][j] = M[3 * r] * abc[0][j] + M[3 * r + 1] * abc[1][j] + M[3 * r + 2] * abc[2][j];
            double nll;
            if ((st = setting_nll(d, fr, (const double(*)[3])alt, &nll))) break;
            if (nll < best) best = nll, best_m = m, memcpy(best_abc, alt, sizeof alt);
        }
        if (st || !(best < nll0 - fmax(MARGIN, 1e-4 * fabs(nll0)))) continue;
        const int *M = set.M[best_m];
        nb_info("frame %ld: another setting of its lattice (%d %d %d / %d %d %d / %d %d %d) explains its pixels better by "
                "%.1f in -log L: taken", i + 1, M[0], M[1], M[2], M[3], M[4], M[5], M[6], M[7], M[8], nll0 - best);
        if ((st = ds_frame_set_crystal(fr, best_abc[0], best_abc[1], best_abc[2]))) break;
        for (int k = K_ROT_X; k <= K_CELL_GAMMA; k++)
            if (L->where_p[k] >= 0) fr->p[L->where_p[k]] = k <= K_ROT_Z ? 0.0 : fr->cell0[k - K_CELL_A];
        memcpy(fr->p_start, fr->p, sizeof fr->p);
        switched[i] = 1;
    }
    return st;
}
