/* nb_fit_integrated_mtz.c - nb-fit --integrated-mtz FILE.mtz: the
 * intensities the dataset fit measured (fit/nb_fit_integrate.h), the rows
 * of --integrated's table, written as an unmerged MTZ for CCP4's programs
 * (pointless, aimless): one batch a frame (its number the frame's, from 1),
 * each batch's header the refined crystal of its frame in the Cambridge
 * frame as dials.export states a still's, the columns dials.export writes
 * (formats/mtz.c writes the file). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dials_expt_write.h"
#include "mtz.h"
#include "nb_fit.h"
#include "nb_util.h"

#define DEG (180.0 / M_PI)

enum { C_I, C_SIGI, C_IPR, C_SIGIPR, C_ISUM, C_SIGISUM, C_FRACTIONCALC, C_BG, C_XDET, C_YDET, C_ROT, C_LP, C_QE,
       NCOL };

static const nb_mtz_column column_names[NCOL] = {
    [C_I] = {"I", "J", NULL},           [C_SIGI] = {"SIGI", "Q", NULL},       [C_IPR] = {"IPR", "J", NULL},
    [C_SIGIPR] = {"SIGIPR", "Q", NULL}, [C_ISUM] = {"ISUM", "J", NULL},       [C_SIGISUM] = {"SIGISUM", "Q", NULL},
    [C_FRACTIONCALC] = {"FRACTIONCALC", "R", NULL}, [C_BG] = {"BG", "R", NULL}, [C_XDET] = {"XDET", "R", NULL},
    [C_YDET] = {"YDET", "R", NULL},     [C_ROT] = {"ROT", "R", NULL},         [C_LP] = {"LP", "R", NULL},
    [C_QE] = {"QE", "R", NULL},
};

static double dot3(const double a[3], const double b[3]) { return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]; }

static void cross3(const double a[3], const double b[3], double out[3])
{
    out[0] = a[1] * b[2] - a[2] * b[1];
    out[1] = a[2] * b[0] - a[0] * b[2];
    out[2] = a[0] * b[1] - a[1] * b[0];
}

/* The inverse of a 3x3 matrix (0: singular) */
static int invert3(const double m[3][3], double out[3][3])
{
    double c[3][3];
    cross3(m[1], m[2], c[0]), cross3(m[2], m[0], c[1]), cross3(m[0], m[1], c[2]);
    const double det = dot3(m[0], c[0]);
    if (!(fabs(det) > 0)) return 0;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) out[i][j] = c[j][i] / det;
    return 1;
}

/* A frame's cell and Mosflm's U in the Cambridge frame (DIALS's x to z,
 * DIALS's -z, the beam, to x), as dials.export's ub_to_mosflm_u: UB = R A
 * (A's columns the reciprocal axes), B Mosflm's (Busing and Levy's, c* along
 * z), U = UB B^-1 */
static nb_status frame_batch(const nb_plan *plan, long frame, nb_mtz_batch *b)
{
    double abc[3][3], A[3][3], B[3][3], Binv[3][3];
    static const double R[3][3] = {{0, 0, -1}, {0, 1, 0}, {1, 0, 0}};
    nb_status st = nb_dials_frame_cell(plan, frame, abc);
    if (st) return st;
    if (!invert3(abc, A)) return nb_error_set(NB_ERR_DATA, "frame %ld: a cell of no volume", frame + 1);
    const double la = sqrt(dot3(abc[0], abc[0])), lb = sqrt(dot3(abc[1], abc[1])), lc = sqrt(dot3(abc[2], abc[2]));
    const double al = acos(dot3(abc[1], abc[2]) / (lb * lc)), be = acos(dot3(abc[0], abc[2]) / (la * lc)),
                 ga = acos(dot3(abc[0], abc[1]) / (la * lb));
    const double cell[6] = {la, lb, lc, al * DEG, be * DEG, ga * DEG};
    double ra[3], rb[3], rc[3];
    for (int k = 0; k < 3; k++) ra[k] = A[k][0], rb[k] = A[k][1], rc[k] = A[k][2];
    const double sa = sqrt(dot3(ra, ra)), sb = sqrt(dot3(rb, rb)), sc = sqrt(dot3(rc, rc));
    const double cbs = dot3(ra, rc) / (sa * sc), cgs = dot3(ra, rb) / (sa * sb);
    const double Bm[3][3] = {{sa, sb * cgs, sc * cbs},
                             {0, sb * sqrt(1 - cgs * cgs), -sc * sqrt(1 - cbs * cbs) * cos(al)},
                             {0, 0, 1 / lc}};
    memcpy(B, Bm, sizeof B);
    if (!invert3(B, Binv)) return nb_error_set(NB_ERR_DATA, "frame %ld: a cell of no volume", frame + 1);
    double UB[3][3], U[3][3];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) UB[i][j] = R[i][0] * A[0][j] + R[i][1] * A[1][j] + R[i][2] * A[2][j];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) U[i][j] = UB[i][0] * Binv[0][j] + UB[i][1] * Binv[1][j] + UB[i][2] * Binv[2][j];
    b->number = (int)frame + 1;
    memcpy(b->cell, cell, sizeof b->cell);
    for (int j = 0; j < 3; j++)
        for (int i = 0; i < 3; i++) b->umat[3 * j + i] = U[i][j];
    b->lambda = nb_expt_frame_wavelength(plan, frame) * 1e10;
    b->distance = plan->distance * 1e3;
    b->mosaic = (plan->frame_mosaic ? plan->frame_mosaic[frame] : plan->mosaic_spread) * DEG;
    b->pixels[0] = plan->panels[0].fpixels, b->pixels[1] = plan->panels[0].spixels;
    return NB_OK;
}

/* A batch for every frame with a row (rows come frame by frame), and the
 * dataset's cell and wavelength their means */
static nb_status batches(const nb_plan *plan, const nb_fit_integrated *r, nb_mtz_batch **out, size_t *nb,
                         double cell[6], double *lambda)
{
    size_t n = 0;
    nb_status st = nb_calloc((void **)out, r->n ? r->n : 1, sizeof **out, "the batches");
    for (size_t k = 0; k < r->n && !st; k++) {
        if (n && (*out)[n - 1].number == (int)r->row[k].frame + 1) continue;
        st = frame_batch(plan, r->row[k].frame, &(*out)[n++]);
    }
    memset(cell, 0, 6 * sizeof *cell);
    *lambda = 0.0;
    for (size_t b = 0; b < n && !st; b++) {
        for (int j = 0; j < 6; j++) cell[j] += (*out)[b].cell[j] / (double)n;
        *lambda += (*out)[b].lambda / (double)n;
    }
    if (!st && !n) { /* no row: the plan's crystal */
        memcpy(cell, plan->unit_cell, 6 * sizeof *cell);
        *lambda = plan->lambda0 * 1e10;
    }
    *nb = n;
    return st;
}

/* The rows' columns: I, SIGI and IPR, SIGIPR the profile-fitted full
 * reflection; ISUM, SIGISUM the summed partial photons; FRACTIONCALC the
 * partiality; XDET, YDET the observed centroid (pixels of its panel); ROT 0
 * (a still); LP, QE 1 (as the table's lp, qe) */
static void fill(const nb_fit_integrated *r, float *v[NCOL], int *batchno, int (*hkl)[3])
{
    for (size_t k = 0; k < r->n; k++) {
        const nb_fit_refl *x = &r->row[k];
        memcpy(hkl[k], x->hkl, sizeof x->hkl);
        batchno[k] = (int)x->frame + 1;
        v[C_I][k] = v[C_IPR][k] = (float)x->prf;
        v[C_SIGI][k] = v[C_SIGIPR][k] = (float)sqrt(fmax(x->prf_var, 0.0));
        v[C_ISUM][k] = (float)x->sum, v[C_SIGISUM][k] = (float)sqrt(fmax(x->sum_var, 0.0));
        v[C_FRACTIONCALC][k] = (float)x->partiality, v[C_BG][k] = (float)x->background;
        v[C_XDET][k] = (float)x->xyzobs[0], v[C_YDET][k] = (float)x->xyzobs[1];
        v[C_ROT][k] = 0.0f, v[C_LP][k] = v[C_QE][k] = 1.0f;
    }
}

nb_status nb_fit_write_integrated_mtz(const char *path, const nb_plan *plan, const char *spacegroup,
                                      const nb_fit_integrated *r)
{
    nb_mtz_unmerged u = {.spacegroup = spacegroup, .n = r->n, .ncol = NCOL,
                         .title = "nb-fit --integrated-mtz: intensities measured, one batch a frame",
                         .history = "From nb " NB_VERSION ": nb-fit --integrated-mtz"};
    nb_mtz_batch *b = NULL;
    nb_mtz_column col[NCOL];
    float *v[NCOL] = {0};
    int *batchno = NULL, (*hkl)[3] = NULL;
    const size_t m = r->n ? r->n : 1;
    nb_status st = batches(plan, r, &b, &u.nbatch, u.cell, &u.lambda);
    if (!st) st = nb_calloc((void **)&batchno, m, sizeof *batchno, "the rows");
    if (!st) st = nb_calloc((void **)&hkl, m, sizeof *hkl, "the rows");
    for (int c = 0; c < NCOL && !st; c++) st = nb_calloc((void **)&v[c], m, sizeof(float), "the rows");
    if (!st) {
        fill(r, v, batchno, hkl);
        for (int c = 0; c < NCOL; c++) col[c] = column_names[c], col[c].value = v[c];
        u.batch = b, u.batchno = batchno, u.hkl = (const int(*)[3])hkl, u.col = col;
        st = nb_mtz_write_unmerged(path, &u);
    }
    for (int c = 0; c < NCOL; c++) free(v[c]);
    free(batchno);
    free(hkl);
    free(b);
    return st ? nb_error_prefix(st, "--integrated-mtz") : NB_OK;
}
