/* nb_fit_panels.c - each panel's own geometry in nb-fit's dataset fit
 * (--refine panel<i>_shift_* and panel<i>_rot_*, docs/physics.md 15.3):
 * the layout's panel values, where a panel is at the fit's values, which
 * panel a pixel is on, and the gauge held (the panels' mean turn about the
 * beam, which with every crystal's turn about it makes the same image). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_fit_ds.h"
#include "nb_util.h"
#include "nb_vec.h"

#define DTR (M_PI / 180.0)

/* A panel's value (panel<i>_shift_fast ...: the parameter `known`) into
 * the shared part: a slot of its own. */
nb_status ds_panel_value_add(const char *tok, const nb_param *known, int shared, ds_layout *L)
{
    if (!shared)
        return nb_error_set(NB_ERR_USAGE, "option --refine-frame: '%s' is a panel's, shared by every frame: give it "
                                          "to --refine", tok);
    for (int s = 0; s < L->npv; s++)
        if (!strcmp(L->pv_name[s], tok))
            return nb_error_set(NB_ERR_USAGE, "option --refine: '%s' is named twice", tok);
    if (L->npv == DS_PANEL_VALUES)
        return nb_error_set(NB_ERR_UNSUPPORTED, "option --refine: more than %d panel values (a fit refines at most "
                                                "%d: fewer panels, or fewer of each panel's values)",
                            DS_PANEL_VALUES, DS_PANEL_VALUES);
    static const char *const axes[PA_COUNT] = {"shift_fast", "shift_slow", "shift_normal",
                                               "rot_fast",   "rot_slow",   "rot_normal"};
    const char *what = strchr(tok, '_') + 1; /* the lookup took "panel<i>_NAME" */
    int axis = 0;
    while (axis < PA_COUNT && strcmp(axes[axis], what)) axis++;
    if (axis == PA_COUNT) return nb_error_set(NB_ERR_USAGE, "option --refine: '%s' is not a panel's value", tok);
    const int s = L->npv++;
    L->pv_panel[s] = known->panel;
    L->pv_axis[s] = axis;
    snprintf(L->pv_name[s], sizeof L->pv_name[s], "%s", tok);
    L->where_z[K_COUNT + s] = L->kz++;
    return NB_OK;
}

void ds_panel_at(const ds *d, const double val[DS_KINDS], int panel, nb_panel *out)
{
    *out = d->start->panels[panel];
    double shift[3], v[PA_COUNT] = {0, 0, 0, 0, 0, 0};
    const double mm[3] = {val[K_DISTANCE] - d->zstart[K_DISTANCE], val[K_XBEAM] - d->zstart[K_XBEAM],
                          val[K_YBEAM] - d->zstart[K_YBEAM]};
    ds_detector_shift(d, mm, shift);
    for (int j = 0; j < 3; j++) out->pix0[j] += shift[j];
    int moved = 0;
    for (int s = 0; s < d->L.npv; s++)
        if (d->L.pv_panel[s] == panel) v[d->L.pv_axis[s]] = val[K_COUNT + s], moved |= val[K_COUNT + s] != 0.0;
    if (!moved) return;
    /* turned about its start axes through its start centre (Rn Rs Rf), then moved along them */
    const nb_panel q0 = *out;
    double Rf[9], Rs[9], Rn[9], M[9], R[9], centre[3], r[3];
    nb_mat3_rotate_about(q0.fdet, v[PA_ROT_FAST] * DTR, Rf);
    nb_mat3_rotate_about(q0.sdet, v[PA_ROT_SLOW] * DTR, Rs);
    nb_mat3_rotate_about(q0.odet, v[PA_ROT_NORMAL] * DTR, Rn);
    nb_mat3_mul(Rs, Rf, M);
    nb_mat3_mul(Rn, M, R);
    for (int j = 0; j < 3; j++)
        centre[j] = q0.pix0[j] + 0.5 * q0.pixel_size * (q0.fpixels * q0.fdet[j] + q0.spixels * q0.sdet[j]),
        r[j] = q0.pix0[j] - centre[j];
    nb_rotate_umat(r, r, R);
    nb_rotate_umat(q0.fdet, out->fdet, R);
    nb_rotate_umat(q0.sdet, out->sdet, R);
    nb_rotate_umat(q0.odet, out->odet, R);
    for (int j = 0; j < 3; j++)
        out->pix0[j] = centre[j] + r[j] +
                       1e-3 * (v[PA_SHIFT_FAST] * q0.fdet[j] + v[PA_SHIFT_SLOW] * q0.sdet[j] +
                               v[PA_SHIFT_NORMAL] * q0.odet[j]);
}

int ds_pixel_panel(const ds *d, size_t pix)
{
    int lo = 0, hi = d->start->npanels - 1; /* the first panel whose end is past pix */
    while (lo < hi) {
        const int mid = (lo + hi) / 2;
        if (d->panel_end[mid] > pix) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

/* The panels' ends in a frame's image, the panel values' panels checked,
 * and the gauge (docs/physics.md 15.3): where the panel values can turn
 * the whole detector about the beam, that turn and the same turn of every
 * crystal about the beam give one image (polarization aside: nothing else
 * tells them apart), so the panels' mean turn about the beam is held at
 * the start's: d->gauge, its combination of the shared values. */
nb_status ds_panels_open(ds *d)
{
    const nb_plan *P = d->start;
    nb_status st = nb_calloc((void **)&d->panel_end, (size_t)P->npanels, sizeof *d->panel_end, "the panels");
    for (int p = 0; p < P->npanels && !st; p++) {
        int fp, sp;
        size_t off;
        nb_plan_panel_dims(P, p, &fp, &sp, &off);
        d->panel_end[p] = off + (size_t)fp * sp;
    }
    for (int s = 0; s < d->L.npv && !st; s++)
        if (d->L.pv_panel[s] >= P->npanels)
            st = nb_error_set(NB_ERR_USAGE, "option --refine: %s: the detector has %d panel%s (panel0 .. panel%d)",
                              d->L.pv_name[s], P->npanels, P->npanels == 1 ? "" : "s", P->npanels - 1);
    if (st || !d->L.npv) return st;
    double beam[3] = {0, 0, 0};
    for (int i = 0; i < P->nsources; i++)
        for (int j = 0; j < 3; j++) beam[j] -= P->sources[i].dir[j];
    nb_vunitize(beam, beam);
    /* t: the detector turned about the beam by a degree, in each panel's values */
    double t[PA_COUNT], c[DS_MAX] = {0};
    int follows = 1;
    for (int p = 0; p < P->npanels && follows; p++) {
        const nb_panel *q = &P->panels[p];
        const double *axes[3] = {q->fdet, q->sdet, q->odet};
        double centre[3], moved[3];
        for (int j = 0; j < 3; j++)
            centre[j] = q->pix0[j] + 0.5 * q->pixel_size * (q->fpixels * q->fdet[j] + q->spixels * q->sdet[j]);
        nb_vcross(beam, centre, moved);
        for (int a = 0; a < 3; a++)
            t[PA_ROT_FAST + a] = nb_vdot(beam, axes[a]), t[PA_SHIFT_FAST + a] = nb_vdot(moved, axes[a]) * 1e3 * M_PI / 180.0;
        double big = 0.0;
        for (int a = 0; a < PA_COUNT; a++) big = fmax(big, fabs(t[a]) * (a >= PA_ROT_FAST ? 1.0 : 0.0));
        for (int a = 0; a < PA_COUNT && follows; a++) {
            if (fabs(t[a]) <= 1e-3 * fmax(big, 1e-30)) continue;
            int s = 0;
            while (s < d->L.npv && !(d->L.pv_panel[s] == p && d->L.pv_axis[s] == a)) s++;
            if (s == d->L.npv) follows = 0;
            else if (a >= PA_ROT_FAST) c[d->L.where_z[K_COUNT + s] - d->L.kp] = t[a] / P->npanels;
        }
    }
    if (follows) memcpy(d->gauge, c, sizeof c);
    return NB_OK;
}

/* The gauge's condition on the shared step (ds_joint_dz, shared_sigmas):
 * S += w c c^T and the right-hand side pulled to c.(z + dz - zstart) = 0,
 * w a hundred million times the step's information along c. */
void ds_gauge_hold(const ds *d, double *S, double *rhs)
{
    const int kz = d->L.kz, kp = d->L.kp;
    double cc = 0.0, info = 0.0, off = 0.0;
    for (int a = 0; a < kz; a++) {
        cc += d->gauge[a] * d->gauge[a];
        off += d->gauge[a] * (d->z[a] - d->zstart[d->L.kind[kp + a]]);
        for (int b = 0; b < kz; b++) info += d->gauge[a] * S[a * kz + b] * d->gauge[b];
    }
    if (!(cc > 0)) return;
    const double w = 1e8 * fmax(info, 1e-12) / (cc * cc);
    for (int a = 0; a < kz; a++) {
        if (rhs) rhs[a] -= w * d->gauge[a] * off;
        for (int b = 0; b < kz; b++) S[a * kz + b] += w * d->gauge[a] * d->gauge[b];
    }
}

