/* nb_cell.c - the unit cell's maths in the reference's arithmetic (the
 * order of its operations kept, so that the vectors agree with its to the
 * last bit): a cell's parameters to reciprocal vectors, reciprocal to real
 * and back, vectors to parameters, and a MOSFLM matrix's vectors.  Here,
 * apart from the resolution's order of steps, so that the maths can be read
 * and tested on its own (tests/unit/test_geometry.c). */
#include "nb_cell.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nb_util.h"
#include "nb_vec.h"

static void set3(double v[3], double x, double y, double z)
{
    v[0] = x;
    v[1] = y;
    v[2] = z;
}

static void vscale(const double v[3], double out[3], double s)
{
    out[0] = s * v[0];
    out[1] = s * v[1];
    out[2] = s * v[2];
}

/* force |v| = mag (reference's vector_rescale) */
static void vrescale(const double v[3], double out[3], double mag)
{
    double oldmag = nb_vnorm(v);
    if (oldmag <= 0.0) oldmag = 1.0;
    out[0] = mag / oldmag * v[0];
    out[1] = mag / oldmag * v[1];
    out[2] = mag / oldmag * v[2];
}

/* a sine or cosine out of [-1, 1] (beyond rounding): the reference warns */
static int oddball(double sa, double ca, double sb, double cb, double sg, double cg)
{
    double v[6] = {sa, ca, sb, cb, sg, cg};
    for (int i = 0; i < 6; i++)
        if (v[i] > 1.0000001 || v[i] < -1.0000001) return 1;
    return 0;
}

static void clamp_trig(double *s, double *c)
{
    if (*s > 1.0) *s = 1.0;
    if (*s < -1.0) *s = -1.0;
    if (*c * *c > 1.0) *c = 1.0;
}

/* The reciprocal angles' sines and cosines: a warning when they are oddball,
 * as the reference warns, then each pair clamped into [-1, 1]. */
static void reciprocal_angles_checked(double *sin_as, double *cos_as, double *sin_bs, double *cos_bs, double *sin_gs,
                                      double *cos_gs)
{
    if (oddball(*sin_as, *cos_as, *sin_bs, *cos_bs, *sin_gs, *cos_gs))
        nb_warn("oddball reciprocal cell angles: sin/cos(alpha*) %.17g %.17g, (beta*) %.17g %.17g, "
                "(gamma*) %.17g %.17g",
                *sin_as, *cos_as, *sin_bs, *cos_bs, *sin_gs, *cos_gs);
    clamp_trig(sin_as, cos_as);
    clamp_trig(sin_bs, cos_bs);
    clamp_trig(sin_gs, cos_gs);
}

double nb_cell_reciprocal(const double cell_in[6], double a_star[3], double b_star[3], double c_star[3])
{
    double a = cell_in[0], b = cell_in[1], c = cell_in[2];
    double alpha = cell_in[3], beta = cell_in[4], gamma = cell_in[5];
    double aavg = (alpha + beta + gamma) / 2;
    double skew = sin(aavg) * sin(aavg - alpha) * sin(aavg - beta) * sin(aavg - gamma);
    if (skew < 0.0) skew = -skew;
    double V_cell = 2.0 * a * b * c * sqrt(skew);
    if (V_cell <= 0.0) {
        nb_warn("impossible unit cell volume: %g", V_cell);
        V_cell = DBL_MIN;
    }
    double V_star = 1.0 / V_cell;
    double as = b * c * sin(alpha) * V_star;
    double bs = c * a * sin(beta) * V_star;
    double cs = a * b * sin(gamma) * V_star;
    if (as <= 0.0 || bs <= 0.0 || cs <= 0.0) {
        nb_warn("impossible reciprocal cell lengths: %g %g %g", as, bs, cs);
        as = fabs(as), bs = fabs(bs), cs = fabs(cs);
        if (as <= 0.0) as = DBL_MIN;
        if (bs <= 0.0) bs = DBL_MIN;
        if (cs <= 0.0) cs = DBL_MIN;
    }
    double sin_as = a * V_star / bs / cs;
    double sin_bs = b * V_star / as / cs;
    double sin_gs = c * V_star / as / bs;
    double cos_as = (cos(beta) * cos(gamma) - cos(alpha)) / (sin(beta) * sin(gamma));
    double cos_bs = (cos(gamma) * cos(alpha) - cos(beta)) / (sin(gamma) * sin(alpha));
    double cos_gs = (cos(alpha) * cos(beta) - cos(gamma)) / (sin(alpha) * sin(beta));
    reciprocal_angles_checked(&sin_as, &cos_as, &sin_bs, &cos_bs, &sin_gs, &cos_gs);
    set3(a_star, as, 0.0, 0.0);
    set3(b_star, bs * cos_gs, bs * sin_gs, 0.0);
    set3(c_star, cs * cos_bs, cs * (cos_as - cos_bs * cos_gs) / sin_gs, cs * V_cell / (a * b * c * sin_gs));
    return V_cell;
}

nb_status nb_cell_read_matrix(const char *path, double lambda0, double a_star[3], double b_star[3],
                              double c_star[3])
{
    char *text;
    size_t len;
    double m[9];
    nb_status st = nb_read_file(path, &text, &len);
    if (st) return st;
    char *p = text;
    for (int i = 0; i < 9; i++) {
        char *end;
        m[i] = strtod(p, &end);
        if (end == p || !isfinite(m[i])) {
            free(text);
            return nb_error_set(NB_ERR_DATA, "'%s': expected 9 numbers (three reciprocal vectors), found %d", path,
                                i);
        }
        p = end;
    }
    free(text);
    /* rows are x, y, z components; columns are a*, b*, c* */
    set3(a_star, m[0], m[3], m[6]);
    set3(b_star, m[1], m[4], m[7]);
    set3(c_star, m[2], m[5], m[8]);
    /* a MOSFLM matrix includes the wavelength: remove it */
    vscale(a_star, a_star, 1e-10 / lambda0);
    vscale(b_star, b_star, 1e-10 / lambda0);
    vscale(c_star, c_star, 1e-10 / lambda0);
    return NB_OK;
}

nb_status nb_cell_real_from_reciprocal(nb_cell_vectors *v, const double *lengths)
{
    double axb_s[3], bxc_s[3], cxa_s[3];
    nb_vcross(v->a_star, v->b_star, axb_s);
    nb_vcross(v->b_star, v->c_star, bxc_s);
    nb_vcross(v->c_star, v->a_star, cxa_s);
    double V_star = nb_vdot(v->a_star, bxc_s);
    if (lengths) {
        /* keep the user's edge lengths exact */
        vrescale(bxc_s, bxc_s, lengths[0] / v->V_cell);
        vrescale(cxa_s, cxa_s, lengths[1] / v->V_cell);
        vrescale(axb_s, axb_s, lengths[2] / v->V_cell);
        V_star = 1.0 / v->V_cell;
    }
    v->V_star = V_star;
    v->V_cell = 1.0 / V_star;
    if (!isfinite(v->V_cell) || v->V_cell == 0.0)
        return nb_error_set(NB_ERR_DATA, "the unit cell is degenerate (zero or infinite volume)");
    vscale(bxc_s, v->a, v->V_cell);
    vscale(cxa_s, v->b, v->V_cell);
    vscale(axb_s, v->c, v->V_cell);
    double axb[3], bxc[3], cxa[3];
    nb_vcross(v->a, v->b, axb);
    nb_vcross(v->b, v->c, bxc);
    nb_vcross(v->c, v->a, cxa);
    vscale(bxc, v->a_star, V_star);
    vscale(cxa, v->b_star, V_star);
    vscale(axb, v->c_star, V_star);
    return NB_OK;
}

void nb_cell_parameters(const nb_cell_vectors *v, double cell[6], double recip[6])
{
    const double *a = v->a, *b = v->b, *c = v->c, *a_star = v->a_star, *b_star = v->b_star, *c_star = v->c_star;
    double V_cell = v->V_cell, V_star = v->V_star;
    double am = nb_vnorm(a), bm = nb_vnorm(b), cm = nb_vnorm(c);
    double asm_ = nb_vnorm(a_star), bsm = nb_vnorm(b_star), csm = nb_vnorm(c_star);
    double sin_a = asm_ * V_cell / bm / cm, sin_b = bsm * V_cell / am / cm, sin_g = csm * V_cell / am / bm;
    double cos_a = nb_vdot(b, c) / bm / cm, cos_b = nb_vdot(a, c) / am / cm, cos_g = nb_vdot(a, b) / am / bm;
    if (oddball(sin_a, cos_a, sin_b, cos_b, sin_g, cos_g))
        nb_warn("oddball cell angles: sin/cos(alpha) %.17g %.17g, (beta) %.17g %.17g, (gamma) %.17g %.17g", sin_a,
                cos_a, sin_b, cos_b, sin_g, cos_g);
    clamp_trig(&sin_a, &cos_a);
    clamp_trig(&sin_b, &cos_b);
    clamp_trig(&sin_g, &cos_g);
    double sin_as = am * V_star / bsm / csm, sin_bs = bm * V_star / asm_ / csm, sin_gs = cm * V_star / asm_ / bsm;
    double cos_as = nb_vdot(b_star, c_star) / bsm / csm, cos_bs = nb_vdot(a_star, c_star) / asm_ / csm,
           cos_gs = nb_vdot(a_star, b_star) / asm_ / bsm;
    reciprocal_angles_checked(&sin_as, &cos_as, &sin_bs, &cos_bs, &sin_gs, &cos_gs);
    cell[0] = am, cell[1] = bm, cell[2] = cm;
    cell[3] = atan2(sin_a, cos_a), cell[4] = atan2(sin_b, cos_b), cell[5] = atan2(sin_g, cos_g);
    recip[0] = asm_, recip[1] = bsm, recip[2] = csm;
    recip[3] = atan2(sin_as, cos_as), recip[4] = atan2(sin_bs, cos_bs), recip[5] = atan2(sin_gs, cos_gs);
}

nb_status nb_cell_standard(const double cell[6], double S[9])
{
    const double d = M_PI / 180.0;
    const double ca = cos(cell[3] * d), cb = cos(cell[4] * d), cg = cos(cell[5] * d), sg = sin(cell[5] * d);
    const double cx = cb, cy = (ca - cb * cg) / sg, cz2 = 1.0 - cx * cx - cy * cy;
    if (!(cell[0] > 0 && cell[1] > 0 && cell[2] > 0 && sg != 0.0 && cz2 > 0) || !isfinite(cz2))
        return nb_error_set(NB_ERR_DATA, "no cell has these parameters: %g %g %g %g %g %g", cell[0], cell[1], cell[2],
                            cell[3], cell[4], cell[5]);
    const double M[9] = {cell[0], cell[1] * cg, cell[2] * cx, 0.0, cell[1] * sg, cell[2] * cy, 0.0, 0.0,
                         cell[2] * sqrt(cz2)};
    memcpy(S, M, sizeof M);
    return NB_OK;
}
