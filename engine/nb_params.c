/* nb_params.c - the named parameters of a resolved plan (nb_params.h): the
 * table, and how each is read from a plan and set on one, by moving the
 * plan's crystals, beam or panels directly (docs/physics.md 14). */
#include "nb_params.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_cell.h"
#include "nb_util.h"
#include "nb_vec.h"

#define DTR (M_PI / 180.0)

typedef nb_status (*param_get_fn)(const nb_plan *P, const nb_param *p, double *v);
typedef nb_status (*param_set_fn)(nb_plan *P, const nb_param *p, double v);

struct nb_param_row {
    const char *name, *unit, *what;
    const char *listed; /* as lists name it: a panel's "panel<i>_NAME" */
    nb_param_scope scope;
    int index;         /* which one of a family: an axis 0 1 2, a cell parameter 0 .. 5 */
    double scale, rel; /* the stencil's step: rel * max(|value|, scale) */
    param_get_fn get;
    param_set_fn set;
};

/* ---- every crystal of a plan ---------------------------------------------------- */

/* The plan's own crystal as a frame crystal. */
static void own_crystal(const nb_plan *P, nb_frame_crystal *fc)
{
    memset(fc, 0, sizeof *fc);
    memcpy(fc->a, P->cell_a, sizeof fc->a);
    memcpy(fc->b, P->cell_b, sizeof fc->b);
    memcpy(fc->c, P->cell_c, sizeof fc->c);
    fc->Na = P->Na, fc->Nb = P->Nb, fc->Nc = P->Nc;
    fc->fluence = P->fluence;
    fc->lambda = P->lambda0;
}

/* A crystal's cell vectors, columns a b c in Angstrom. */
static void cell_matrix(const nb_frame_crystal *fc, double A[9])
{
    const double *v[3] = {fc->a, fc->b, fc->c};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) A[3 * j + i] = v[i][j] * 1e10;
}


/* A linear map of a crystal's cell vectors (Angstrom space, row-major). */
typedef nb_status (*crystal_fn)(const nb_frame_crystal *fc, const double *arg, double L[9]);

static void cell_parameters(const nb_frame_crystal *fc, double cell[6]);

/* v' = L v for the three vectors at v (metres or 1/Angstrom alike) */
static void map_vectors(const double L[9], double *v[3])
{
    for (int i = 0; i < 3; i++) nb_rotate_umat(v[i], v[i], L);
}

/* Turn or reshape every crystal the plan holds by the map fn gives it: its
 * own (its reciprocal vectors by the inverse transpose, so that the
 * reference's own reciprocal cell keeps its digits; UNIT_CELL worked out
 * again) and each frame crystal. */
static nb_status each_crystal(nb_plan *P, crystal_fn fn, const double *arg)
{
    if (!nb_plan_has_crystal(P)) return nb_error_set(NB_ERR_USAGE, "the plan holds no crystal (nb-geom --nonbragg)");
    nb_frame_crystal own;
    double L[9], Lit[9], cell[6];
    own_crystal(P, &own);
    nb_status st = fn(&own, arg, L);
    for (int k = 0; P->frame_crystals && k < P->nframes && !st; k++) {
        double Lk[9];
        nb_frame_crystal *fc = &P->frame_crystals[k];
        if (!(st = fn(fc, arg, Lk))) map_vectors(Lk, (double *[3]){fc->a, fc->b, fc->c});
    }
    if (st) return st;
    map_vectors(L, (double *[3]){P->cell_a, P->cell_b, P->cell_c});
    nb_mat3_inverse(L, Lit);
    nb_mat3_transpose(Lit, Lit);
    map_vectors(Lit, (double *[3]){P->recip_a, P->recip_b, P->recip_c});
    own_crystal(P, &own);
    cell_parameters(&own, cell);
    memcpy(P->unit_cell, cell, sizeof cell);
    return NB_OK;
}

/* arg: the turn itself */
static nb_status turn_crystal(const nb_frame_crystal *fc, const double *M, double L[9])
{
    (void)fc;
    memcpy(L, M, 9 * sizeof *L);
    return NB_OK;
}

/* A crystal's a b c (Angstrom) alpha beta gamma (degrees). */
static void cell_parameters(const nb_frame_crystal *fc, double cell[6])
{
    double A[9];
    cell_matrix(fc, A);
    double e[3][3];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) e[i][j] = A[3 * j + i];
    for (int i = 0; i < 3; i++) cell[i] = nb_vnorm(e[i]);
    for (int i = 0; i < 3; i++) {
        double xy[3];
        nb_vcross(e[(i + 1) % 3], e[(i + 2) % 3], xy);
        cell[3 + i] = atan2(nb_vnorm(xy), nb_vdot(e[(i + 1) % 3], e[(i + 2) % 3])) / DTR;
    }
}

/* arg: {which parameter, its step}: the crystal's orientation U = A S^-1 kept
 * (S its parameters' standard cell), the parameter moved: L = U S' A^-1. */
static nb_status reshape_crystal(const nb_frame_crystal *fc, const double *arg, double L[9])
{
    double cell[6], A[9], Ai[9], S[9], Si[9], U[9], A1[9];
    cell_parameters(fc, cell);
    cell_matrix(fc, A);
    nb_status st = nb_cell_standard(cell, S);
    if (st) return st;
    nb_mat3_inverse(S, Si);
    nb_mat3_mul(A, Si, U);
    cell[(int)arg[0]] += arg[1];
    if (!(cell[0] > 0 && cell[1] > 0 && cell[2] > 0 && cell[3] > 0 && cell[4] > 0 && cell[5] > 0 && cell[3] < 180 &&
          cell[4] < 180 && cell[5] < 180))
        return nb_error_set(NB_ERR_DATA, "no cell has these parameters: %g %g %g %g %g %g", cell[0], cell[1], cell[2],
                            cell[3], cell[4], cell[5]);
    if ((st = nb_cell_standard(cell, S))) return st;
    nb_mat3_mul(U, S, A1);
    nb_mat3_inverse(A, Ai);
    nb_mat3_mul(A1, Ai, L);
    return NB_OK;
}

/* ---- the crystal's parameters ----------------------------------------------- */

static nb_status get_cell(const nb_plan *P, const nb_param *p, double *v)
{
    nb_frame_crystal own;
    double cell[6];
    own_crystal(P, &own);
    cell_parameters(&own, cell);
    *v = cell[p->row->index];
    return NB_OK;
}

static nb_status set_cell(nb_plan *P, const nb_param *p, double v)
{
    double now;
    get_cell(P, p, &now);
    const double arg[2] = {p->row->index, v - now};
    return each_crystal(P, reshape_crystal, arg);
}

static nb_status get_misset(const nb_plan *P, const nb_param *p, double *v)
{
    *v = P->misset[p->row->index] / DTR;
    return NB_OK;
}

/* R(m') R(m)^T: the crystal without its misset, then the new one */
static nb_status set_misset(nb_plan *P, const nb_param *p, double v)
{
    double m[3] = {P->misset[0], P->misset[1], P->misset[2]}, R0[9], R1[9], M[9];
    nb_mat3_rotate_xyz(m[0], m[1], m[2], R0);
    m[p->row->index] = v * DTR;
    nb_mat3_rotate_xyz(m[0], m[1], m[2], R1);
    nb_mat3_transpose(R0, R0);
    nb_mat3_mul(R1, R0, M);
    nb_status st = each_crystal(P, turn_crystal, M);
    if (!st) P->misset[p->row->index] = v * DTR;
    return st;
}

static nb_status get_zero(const nb_plan *P, const nb_param *p, double *v)
{
    (void)P, (void)p;
    *v = 0.0;
    return NB_OK;
}

static nb_status set_rot(nb_plan *P, const nb_param *p, double v)
{
    double a[3] = {0, 0, 0}, M[9];
    a[p->row->index] = v * DTR;
    nb_mat3_rotate_xyz(a[0], a[1], a[2], M);
    return each_crystal(P, turn_crystal, M);
}

static double *N_of(nb_plan *P, int i) { return i == 0 ? &P->Na : i == 1 ? &P->Nb : &P->Nc; }
static double *fc_N_of(nb_frame_crystal *fc, int i) { return i == 0 ? &fc->Na : i == 1 ? &fc->Nb : &fc->Nc; }

static nb_status get_N(const nb_plan *P, const nb_param *p, double *v)
{
    *v = *N_of((nb_plan *)P, p->row->index);
    return NB_OK;
}

static nb_status set_N(nb_plan *P, const nb_param *p, double v)
{
    const double d = v - *N_of(P, p->row->index);
    for (int k = 0; P->frame_crystals && k < P->nframes; k++) *fc_N_of(&P->frame_crystals[k], p->row->index) += d;
    *N_of(P, p->row->index) = v;
    return NB_OK;
}

static nb_status get_mosaic(const nb_plan *P, const nb_param *p, double *v)
{
    if (!(P->mosaic_spread > 0.0) || !nb_plan_mosaic_rescalable(P))
        return nb_error_set(NB_ERR_USAGE, "%s: the plan has no mosaic spread (-mosaic): no domains to move", p->name);
    *v = P->mosaic_spread / DTR;
    return NB_OK;
}

/* The model is even in the spread and smooth through 0 (the domains' angles
 * are scaled, nb_mosaic_umat_rescale): its sign is no physics. */
static nb_status set_mosaic(nb_plan *P, const nb_param *p, double v)
{
    double now = 0.0;
    nb_status st = get_mosaic(P, p, &now);
    if (st) return st;
    for (int k = 0; P->frame_mosaic && k < P->nframes; k++)
        P->frame_mosaic[k] = fabs(P->frame_mosaic[k] + (v - now) * DTR);
    P->mosaic_spread = fabs(v) * DTR;
    return NB_OK;
}

/* ---- the beam's ----------------------------------------------------------------- */

static nb_status get_lambda(const nb_plan *P, const nb_param *p, double *v)
{
    (void)p;
    *v = P->lambda0 * 1e10;
    return NB_OK;
}

/* every wavelength scaled (the spectrum's shape kept); the sensor's
 * attenuation stays the plan's */
static nb_status set_lambda(nb_plan *P, const nb_param *p, double v)
{
    if (!(v > 0)) return nb_error_set(NB_ERR_DATA, "%s: a wavelength of %g Angstrom", p->name, v);
    const double r = v * 1e-10 / P->lambda0;
    for (int i = 0; i < P->nsources; i++) P->sources[i].lambda *= r;
    for (int k = 0; P->frame_crystals && k < P->nframes; k++) P->frame_crystals[k].lambda *= r;
    P->lambda0 = v * 1e-10;
    return NB_OK;
}

static void scale_fluence(nb_plan *P, double r)
{
    for (int k = 0; P->frame_crystals && k < P->nframes; k++) P->frame_crystals[k].fluence *= r;
    P->fluence *= r;
    P->flux *= r;
}

static nb_status get_fluence(const nb_plan *P, const nb_param *p, double *v)
{
    (void)p;
    *v = P->fluence;
    return NB_OK;
}

static nb_status set_fluence(nb_plan *P, const nb_param *p, double v)
{
    if (!(P->fluence > 0)) return nb_error_set(NB_ERR_USAGE, "%s: the plan's fluence is not positive", p->name);
    scale_fluence(P, v / P->fluence);
    return NB_OK;
}

static nb_status get_one(const nb_plan *P, const nb_param *p, double *v)
{
    (void)P, (void)p;
    *v = 1.0;
    return NB_OK;
}

static nb_status set_scale(nb_plan *P, const nb_param *p, double v)
{
    (void)p;
    scale_fluence(P, v);
    return NB_OK;
}

/* ---- the detector's ------------------------------------------------------------- */

/* A move of the beam spot on the first panel (dF along fast, dS along slow)
 * as the convention's XBEAM, YBEAM move (docs/physics.md 2.2), and back. */
static int beam_axes_swapped(const nb_plan *P) { return !strcmp(P->convention, "mosflm") || !strcmp(P->convention, "denzo"); }

static void beam_as_convention(const nb_plan *P, double dF, double dS, double *dX, double *dY)
{
    if (beam_axes_swapped(P)) *dX = dS, *dY = dF;
    else if (!strcmp(P->convention, "adxv")) *dX = dF, *dY = -dS;
    else *dX = dF, *dY = dS;
}

static void convention_as_beam(const nb_plan *P, double dX, double dY, double *dF, double *dS)
{
    if (beam_axes_swapped(P)) *dF = dY, *dS = dX;
    else if (!strcmp(P->convention, "adxv")) *dF = dX, *dS = -dY;
    else *dF = dX, *dS = dY;
}

/* The values derived from the first panel (nb_plan_derive_detector) of P as
 * it is now, into *d (a shallow copy that shares nothing P frees). */
static void derived_now(const nb_plan *P, nb_plan *d, nb_panel *first)
{
    *d = *P;
    *first = P->panels[0];
    d->panels = first;
    d->npanels = 1;
    nb_plan_derive_detector(d);
}

/* After the panels moved (before: derived_now of the plan before): each
 * value derived from the first panel moved by what the move changed it by,
 * so that a plan's own (the reference's DISTANCE with two-theta, its beam
 * centre in the convention, XDS's reported XBEAM) keeps its digits; the
 * headers' beam centre moved with the beam spot in the plan's convention. */
static void detector_moved(nb_plan *P, const nb_plan *before)
{
    nb_plan after;
    nb_panel first;
    derived_now(P, &after, &first);
#define MOVED(f) P->f += after.f - before->f
    MOVED(distance), MOVED(close_distance), MOVED(Fbeam), MOVED(Sbeam), MOVED(Fclose), MOVED(Sclose);
    MOVED(Xclose), MOVED(Yclose), MOVED(ORGX), MOVED(ORGY);
    for (int j = 0; j < 3; j++) MOVED(dials_origin[j]);
#undef MOVED
    double dX, dY;
    beam_as_convention(P, after.Fbeam - before->Fbeam, after.Sbeam - before->Sbeam, &dX, &dY);
    P->Xbeam += dX, P->Ybeam += dY;
}

static void shift_panel(nb_panel *q, const double shift[3])
{
    for (int j = 0; j < 3; j++) q->pix0[j] += shift[j];
}

/* Panel q turned by M about the point `about`. */
static void turn_panel(nb_panel *q, const double M[9], const double about[3])
{
    double r[3];
    for (int j = 0; j < 3; j++) r[j] = q->pix0[j] - about[j];
    nb_rotate_umat(r, r, M);
    for (int j = 0; j < 3; j++) q->pix0[j] = about[j] + r[j];
    nb_rotate_umat(q->fdet, q->fdet, M);
    nb_rotate_umat(q->sdet, q->sdet, M);
    nb_rotate_umat(q->odet, q->odet, M);
}

static int pivots_about_beam(const nb_plan *P) { return !strcmp(P->pivot, "beam"); }

static nb_status get_distance(const nb_plan *P, const nb_param *p, double *v)
{
    (void)p;
    *v = P->distance * 1e3;
    return NB_OK;
}

/* DISTANCE moved by d: along the beam about the beam spot, else along the
 * first panel's normal (by d times the beam's cosine to it) */
static nb_status set_distance(nb_plan *P, const nb_param *p, double v)
{
    (void)p;
    nb_plan before;
    nb_panel first;
    derived_now(P, &before, &first);
    const double d = v * 1e-3 - P->distance, *o = P->panels[0].odet;
    const double along = pivots_about_beam(P) ? d : d * nb_vdot(P->beam, o);
    double shift[3];
    for (int j = 0; j < 3; j++) shift[j] = pivots_about_beam(P) ? along * P->beam[j] : along * o[j];
    for (int i = 0; i < P->npanels; i++) shift_panel(&P->panels[i], shift);
    detector_moved(P, &before);
    return NB_OK;
}

static nb_status get_beam_center(const nb_plan *P, const nb_param *p, double *v)
{
    *v = (p->row->index ? P->Ybeam : P->Xbeam) * 1e3;
    return NB_OK;
}

/* The beam spot moved on the first panel: every panel the other way in its plane. */
static nb_status set_beam_center(nb_plan *P, const nb_param *p, double v)
{
    const double d = v * 1e-3 - (p->row->index ? P->Ybeam : P->Xbeam);
    double dF, dS, shift[3];
    nb_plan before;
    nb_panel first;
    derived_now(P, &before, &first);
    convention_as_beam(P, p->row->index ? 0.0 : d, p->row->index ? d : 0.0, &dF, &dS);
    for (int j = 0; j < 3; j++) shift[j] = -dF * P->panels[0].fdet[j] - dS * P->panels[0].sdet[j];
    for (int i = 0; i < P->npanels; i++) shift_panel(&P->panels[i], shift);
    detector_moved(P, &before);
    return NB_OK;
}

static double *rotation_of(nb_plan *P, int i)
{
    return i == 0 ? &P->rotx : i == 1 ? &P->roty : i == 2 ? &P->rotz : &P->twotheta;
}

static nb_status get_rotation(const nb_plan *P, const nb_param *p, double *v)
{
    *v = *rotation_of((nb_plan *)P, p->row->index) / DTR;
    return NB_OK;
}

/* nb-geom's rotation of the detector: about x, y, z, then two-theta about its axis */
static void detector_rotation(const nb_plan *P, const double a[4], double R[9])
{
    double Rxyz[9], Rtt[9];
    nb_mat3_rotate_xyz(a[0], a[1], a[2], Rxyz);
    nb_mat3_rotate_about(P->twotheta_axis, a[3], Rtt);
    nb_mat3_mul(Rtt, Rxyz, R);
}

/* Every panel turned by R(new) R(old)^T about the pivot: the beam spot
 * (DISTANCE along the beam) or the sample. */
static nb_status set_rotation(nb_plan *P, const nb_param *p, double v)
{
    double a[4] = {P->rotx, P->roty, P->rotz, P->twotheta}, R0[9], R1[9], M[9], about[3] = {0, 0, 0};
    nb_plan before;
    nb_panel first;
    derived_now(P, &before, &first);
    detector_rotation(P, a, R0);
    a[p->row->index] = v * DTR;
    detector_rotation(P, a, R1);
    nb_mat3_transpose(R0, R0);
    nb_mat3_mul(R1, R0, M);
    if (pivots_about_beam(P))
        for (int j = 0; j < 3; j++) about[j] = P->distance * P->beam[j];
    for (int i = 0; i < P->npanels; i++) turn_panel(&P->panels[i], M, about);
    detector_moved(P, &before);
    *rotation_of(P, p->row->index) = v * DTR;
    return NB_OK;
}

/* ---- one panel's ---------------------------------------------------------------- */

static nb_status the_panel(const nb_plan *P, const nb_param *p)
{
    if (p->panel < P->npanels) return NB_OK;
    return nb_error_set(NB_ERR_USAGE, "%s: the detector has %d panel%s (panel0 .. panel%d)", p->name, P->npanels,
                        P->npanels == 1 ? "" : "s", P->npanels - 1);
}

static nb_status get_panel(const nb_plan *P, const nb_param *p, double *v)
{
    *v = 0.0;
    return the_panel(P, p);
}

static const double *panel_axis(const nb_panel *q, int i) { return i == 0 ? q->fdet : i == 1 ? q->sdet : q->odet; }

/* Panel i moved along its own axis (turn 0: by v mm) or turned about it
 * through its centre (turn 1: by v degrees). */
static nb_status move_panel(nb_plan *P, const nb_param *p, double v, int turn)
{
    nb_status st = the_panel(P, p);
    if (st) return st;
    nb_plan before;
    nb_panel first, *q = &P->panels[p->panel];
    derived_now(P, &before, &first);
    double axis[3], M[9], centre[3];
    memcpy(axis, panel_axis(q, p->row->index), sizeof axis);
    if (turn) {
        for (int j = 0; j < 3; j++)
            centre[j] = q->pix0[j] + 0.5 * q->pixel_size * (q->fpixels * q->fdet[j] + q->spixels * q->sdet[j]);
        nb_mat3_rotate_about(axis, v * DTR, M);
        turn_panel(q, M, centre);
    } else {
        for (int j = 0; j < 3; j++) axis[j] *= v * 1e-3;
        shift_panel(q, axis);
    }
    detector_moved(P, &before);
    return NB_OK;
}

static nb_status set_panel_shift(nb_plan *P, const nb_param *p, double v) { return move_panel(P, p, v, 0); }
static nb_status set_panel_rotation(nb_plan *P, const nb_param *p, double v) { return move_panel(P, p, v, 1); }

/* ---- the table ------------------------------------------------------------------ */

#define CRYSTAL(name, unit, i, scale, rel, get, set, what)                                                         \
    {name, unit, what, name, NB_PARAM_CRYSTAL, i, scale, rel, get, set}
#define BEAM(name, unit, scale, get, set, what) {name, unit, what, name, NB_PARAM_BEAM, 0, scale, 1e-4, get, set}
#define DETECTOR(name, unit, i, get, set, what) {name, unit, what, name, NB_PARAM_DETECTOR, i, 1.0, 1e-4, get, set}
#define PANEL(name, unit, i, set, what)                                                                           \
    {name, unit, what, "panel<i>_" name, NB_PARAM_PANEL, i, 1.0, 1e-4, get_panel, set}

static const nb_param_row rows[] = {
    CRYSTAL("cell_a", "Angstrom", 0, 1.0, 1e-4, get_cell, set_cell, "the cell's edge a, its orientation kept"),
    CRYSTAL("cell_b", "Angstrom", 1, 1.0, 1e-4, get_cell, set_cell, "the cell's edge b, its orientation kept"),
    CRYSTAL("cell_c", "Angstrom", 2, 1.0, 1e-4, get_cell, set_cell, "the cell's edge c, its orientation kept"),
    CRYSTAL("cell_alpha", "degree", 3, 1.0, 1e-4, get_cell, set_cell, "the cell's angle alpha, its orientation kept"),
    CRYSTAL("cell_beta", "degree", 4, 1.0, 1e-4, get_cell, set_cell, "the cell's angle beta, its orientation kept"),
    CRYSTAL("cell_gamma", "degree", 5, 1.0, 1e-4, get_cell, set_cell, "the cell's angle gamma, its orientation kept"),
    CRYSTAL("misset_x", "degree", 0, 1.0, 1e-4, get_misset, set_misset, "-misset's angle about x (x, y, then z)"),
    CRYSTAL("misset_y", "degree", 1, 1.0, 1e-4, get_misset, set_misset, "-misset's angle about y"),
    CRYSTAL("misset_z", "degree", 2, 1.0, 1e-4, get_misset, set_misset, "-misset's angle about z"),
    CRYSTAL("rot_x", "degree", 0, 1.0, 1e-4, get_zero, set_rot, "a turn of the crystal about the lab's x from the plan's"),
    CRYSTAL("rot_y", "degree", 1, 1.0, 1e-4, get_zero, set_rot, "a turn about the lab's y (after rot_x)"),
    CRYSTAL("rot_z", "degree", 2, 1.0, 1e-4, get_zero, set_rot, "a turn about the lab's z (after rot_y)"),
    CRYSTAL("Na", "cell", 0, 1.0, 1e-4, get_N, set_N, "unit cells along a"),
    CRYSTAL("Nb", "cell", 1, 1.0, 1e-4, get_N, set_N, "unit cells along b"),
    CRYSTAL("Nc", "cell", 2, 1.0, 1e-4, get_N, set_N, "unit cells along c"),
    /* the reference draws the domains' angles in single precision: a step of
     * 1e-4 would be a few float roundings */
    CRYSTAL("mosaic", "degree", 0, 0.01, 1e-2, get_mosaic, set_mosaic, "the mosaic spread (the domains' angles scaled)"),
    BEAM("lambda", "Angstrom", 0.1, get_lambda, set_lambda, "the wavelength, every source's scaled with it"),
    BEAM("fluence", "(photons/m^2)", 1.0, get_fluence, set_fluence, "photons per square metre"),
    BEAM("scale", "", 1.0, get_one, set_scale, "a factor on every pixel's photons (the fluence's), 1 at the plan"),
    DETECTOR("distance", "mm", 0, get_distance, set_distance,
             "DISTANCE: along the beam about the beam spot (pivot beam), else along the first panel's normal"),
    DETECTOR("Xbeam", "mm", 0, get_beam_center, set_beam_center, "XBEAM, the beam centre in the plan's convention"),
    DETECTOR("Ybeam", "mm", 1, get_beam_center, set_beam_center, "YBEAM, the beam centre in the plan's convention"),
    DETECTOR("detector_rotx", "degree", 0, get_rotation, set_rotation, "-detector_rotx: every panel about the pivot"),
    DETECTOR("detector_roty", "degree", 1, get_rotation, set_rotation, "-detector_roty: every panel about the pivot"),
    DETECTOR("detector_rotz", "degree", 2, get_rotation, set_rotation, "-detector_rotz: every panel about the pivot"),
    DETECTOR("twotheta", "degree", 3, get_rotation, set_rotation, "-twotheta: every panel about the two-theta axis"),
    PANEL("shift_fast", "mm", 0, set_panel_shift, "panel i moved along its fast axis"),
    PANEL("shift_slow", "mm", 1, set_panel_shift, "panel i moved along its slow axis"),
    PANEL("shift_normal", "mm", 2, set_panel_shift, "panel i moved along its normal"),
    PANEL("rot_fast", "degree", 0, set_panel_rotation, "panel i turned about its fast axis through its centre"),
    PANEL("rot_slow", "degree", 1, set_panel_rotation, "panel i turned about its slow axis through its centre"),
    PANEL("rot_normal", "degree", 2, set_panel_rotation, "panel i turned about its normal through its centre"),
};
#define NROWS ((int)(sizeof rows / sizeof rows[0]))

static const char *param_names(void);

nb_status nb_param_lookup(const char *name, nb_param *out)
{
    memset(out, 0, sizeof *out);
    out->panel = -1;
    int panel = -1, used = 0;
    const char *row_name = name;
    char canonical[24];
    if (sscanf(name, "panel%d_%n", &panel, &used) == 1 && used > 0 && panel >= 0 && panel < 10000 &&
        snprintf(canonical, sizeof canonical, "panel%d_", panel) == used && !strncmp(canonical, name, (size_t)used))
        row_name = name + used;
    for (int i = 0; i < NROWS; i++)
        if (!strcmp(rows[i].name, row_name) && (rows[i].scope == NB_PARAM_PANEL) == (row_name != name)) {
            out->row = &rows[i];
            out->panel = row_name != name ? panel : -1;
            snprintf(out->name, sizeof out->name, "%s", name);
            return NB_OK;
        }
    return nb_error_set(NB_ERR_USAGE, "unknown parameter '%s' (known: %s)", name, param_names());
}

const char *nb_param_name(const nb_param *p) { return p->name; }
const char *nb_param_unit(const nb_param *p) { return p->row->unit; }
nb_param_scope nb_param_scope_of(const nb_param *p) { return p->row->scope; }
int nb_param_order(const nb_param *p) { return (int)(p->row - rows); }

const char *nb_param_row_listed(int i) { return i >= 0 && i < NROWS ? rows[i].listed : NULL; }
int nb_param_rows(void) { return NROWS; }

/* Every name, comma-separated (a panel's as panel<i>_NAME): messages. */
static const char *param_names(void)
{
    static char names[1024];
    if (!names[0]) {
        size_t at = 0;
        for (int i = 0; i < NROWS; i++)
            at += (size_t)snprintf(names + at, sizeof names - at, "%s%s", i ? "," : "", rows[i].listed);
    }
    return names;
}

nb_status nb_param_get(const nb_plan *plan, const nb_param *p, double *value)
{
    nb_status st = p->row->get(plan, p, value);
    return st ? st : isfinite(*value) ? NB_OK : nb_error_set(NB_ERR_DATA, "%s: the plan's value is not finite", p->name);
}

nb_status nb_param_set(nb_plan *plan, const nb_param *p, double value)
{
    if (!isfinite(value)) return nb_error_set(NB_ERR_USAGE, "%s: a value that is not finite", p->name);
    return p->row->set(plan, p, value);
}

double nb_param_step(const nb_param *p, double value) { return p->row->rel * fmax(fabs(value), p->row->scale); }

/* ---- copies the setters may change ------------------------------------------------ */

static nb_status own_array(void *field_, size_t n, size_t size, nb_status st)
{
    void **field = field_;
    if (st || !*field) return st;
    void *copy = malloc(n > 0 && size > 0 ? n * size : 1);
    if (!copy) {
        *field = NULL;
        return nb_error_set(NB_ERR_NOMEM, "out of memory moving a plan");
    }
    memcpy(copy, *field, n * size);
    *field = copy;
    return NB_OK;
}

nb_status nb_param_plan_copy(const nb_plan *plan, nb_plan *out)
{
    *out = *plan;
    const size_t nf = plan->nframes > 0 ? (size_t)plan->nframes : 0;
    nb_status st = own_array(&out->panels, (size_t)plan->npanels, sizeof *plan->panels, NB_OK);
    if (st) out->sources = NULL;
    st = own_array(&out->sources, (size_t)plan->nsources, sizeof *plan->sources, st);
    if (st) out->frame_crystals = NULL;
    st = own_array(&out->frame_crystals, nf, sizeof *plan->frame_crystals, st);
    if (st) out->frame_mosaic = NULL;
    st = own_array(&out->frame_mosaic, nf, sizeof *plan->frame_mosaic, st);
    if (st) nb_param_plan_free(out);
    return st;
}

void nb_param_plan_free(nb_plan *p)
{
    free(p->panels);
    free(p->sources);
    free(p->frame_crystals);
    free(p->frame_mosaic);
    p->panels = NULL, p->sources = NULL, p->frame_crystals = NULL, p->frame_mosaic = NULL;
}
