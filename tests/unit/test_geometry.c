/* test_geometry.c - vectors and rotations, the per-pixel helpers of
 * nb_physics.h, the cell, nb_resolve() end to end on known geometries, and
 * mosaic domains at another spread (a frame's own). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_error.h"
#include "nb_geometry.h"
#include "nb_options.h"
#include "nb_physics.h"
#include "nb_plan.h"
#include "nb_rng.h"
#include "nb_sim.h"
#include "nb_util.h"
#include "nb_vec.h"
#include "tap.h"

#define RTD (180.0 * M_1_PI)

static int vnear(const double a[3], double x, double y, double z, double tol)
{
    return fabs(a[0] - x) <= tol && fabs(a[1] - y) <= tol && fabs(a[2] - z) <= tol;
}

static void vprint(const char *what, const double v[3])
{
    printf("#   %s = (%.17g, %.17g, %.17g)\n", what, v[0], v[1], v[2]);
}

/* ---- request helpers (the way nb-geom applies flags) ---------------------- */

/* Split `args` on blanks and apply every flag to rq.  Returns the first
 * failure. */
static nb_status apply_args(nb_request *rq, const char *args)
{
    char *copy = nb_xstrdup(args);
    char *argv[128];
    int argc = 0;
    argv[argc++] = "nb-geom";
    for (char *tok = strtok(copy, " "); tok && argc < 127; tok = strtok(NULL, " ")) argv[argc++] = tok;
    argv[argc] = NULL;
    nb_status st = nb_request_apply_args(rq, argc - 1, argv + 1, NULL);
    free(copy);
    return st;
}

/* Resolve a command line into a plan (plan is initialised either way). */
static nb_status resolve(const char *args, nb_plan *plan)
{
    nb_request rq;
    nb_strbuf log;
    nb_request_defaults(&rq);
    nb_strbuf_init(&log);
    nb_status st = apply_args(&rq, args);
    if (!st) st = nb_resolve(&rq, plan, &log);
    else nb_plan_init(plan);
    nb_strbuf_free(&log);
    nb_request_free(&rq);
    return st;
}

/* ---- vectors ------------------------------------------------------------- */

static void test_vectors(void)
{
    const double x[3] = {1, 0, 0}, y[3] = {0, 1, 0}, z[3] = {0, 0, 1};
    const double q = M_PI / 2;
    double o[3];

    nb_rotate_xyz(y, o, q, 0, 0);
    ok(vnear(o, 0, 0, 1, 1e-15), "Rx(90) takes y to z");
    nb_rotate_xyz(z, o, q, 0, 0);
    ok(vnear(o, 0, -1, 0, 1e-15), "Rx(90) takes z to -y");
    nb_rotate_xyz(z, o, 0, q, 0);
    ok(vnear(o, 1, 0, 0, 1e-15), "Ry(90) takes z to x");
    nb_rotate_xyz(x, o, 0, q, 0);
    ok(vnear(o, 0, 0, -1, 1e-15), "Ry(90) takes x to -z");
    nb_rotate_xyz(x, o, 0, 0, q);
    ok(vnear(o, 0, 1, 0, 1e-15), "Rz(90) takes x to y");
    nb_rotate_xyz(y, o, 0, 0, q);
    ok(vnear(o, -1, 0, 0, 1e-15), "Rz(90) takes y to -x");
    /* composition order Rz Ry Rx: x -> x -> -z -> -z (Rx Ry Rz would give z) */
    nb_rotate_xyz(x, o, q, q, q);
    ok(vnear(o, 0, 0, -1, 1e-15), "x under (90,90,90) is -z: Rx first, then Ry, then Rz");
    nb_rotate_xyz(y, o, q, q, q);
    ok(vnear(o, 0, 1, 0, 1e-15), "y under (90,90,90) is y (y->z->x->y)");
    nb_rotate_xyz(z, o, q, q, q);
    ok(vnear(o, 1, 0, 0, 1e-15), "z under (90,90,90) is x (z->-y->-y->x)");
    /* general angles against explicit matrices */
    {
        double rx = 0.3, ry = -0.7, rz = 1.1, v[3] = {0.2, -1.3, 2.5};
        double t[3], u[3];
        t[0] = v[0];
        t[1] = cos(rx) * v[1] - sin(rx) * v[2];
        t[2] = sin(rx) * v[1] + cos(rx) * v[2];
        u[0] = cos(ry) * t[0] + sin(ry) * t[2];
        u[1] = t[1];
        u[2] = -sin(ry) * t[0] + cos(ry) * t[2];
        double w[3] = {cos(rz) * u[0] - sin(rz) * u[1], sin(rz) * u[0] + cos(rz) * u[1], u[2]};
        nb_rotate_xyz(v, o, rx, ry, rz);
        ok(vnear(o, w[0], w[1], w[2], 1e-14), "general rotation equals Rz*Ry*Rx");
        /* in place */
        double ip[3] = {v[0], v[1], v[2]};
        nb_rotate_xyz(ip, ip, rx, ry, rz);
        ok(memcmp(ip, o, sizeof o) == 0, "nb_rotate_xyz works in place");
    }
    /* an angle of exactly 0 skips its factor: no 0*inf = NaN appears */
    {
        double v[3] = {INFINITY, 1, 2};
        nb_rotate_xyz(v, o, 0, 0, 0);
        ok(isinf(o[0]) && o[1] == 1 && o[2] == 2, "all angles 0: the vector is untouched (even with inf)");
        nb_rotate_xyz(v, o, 0.5, 0, 0);
        ok(isinf(o[0]) && !isnan(o[1]) && !isnan(o[2]), "ry = rz = 0 skip their factors (x = inf stays alone)");
        double w[3] = {1, 2, INFINITY};
        nb_rotate_xyz(w, o, 0, 0, 0.5);
        ok(isinf(o[2]) && !isnan(o[0]) && !isnan(o[1]), "rx = ry = 0 skip their factors (z = inf stays alone)");
        double a[3] = {0.1, 0.2, 0.3};
        nb_rotate_xyz(a, o, 0, 0, 0);
        ok(memcmp(a, o, sizeof o) == 0, "zero angles give the input bit for bit");
    }

    /* Rodrigues */
    nb_rotate_axis(x, o, z, q);
    ok(vnear(o, 0, 1, 0, 1e-15), "rotate_axis: x about z by 90 is y");
    nb_rotate_axis(y, o, x, q);
    ok(vnear(o, 0, 0, 1, 1e-15), "rotate_axis: y about x by 90 is z");
    {
        double d[3] = {1 / sqrt(3), 1 / sqrt(3), 1 / sqrt(3)};
        nb_rotate_axis(x, o, d, 2 * M_PI / 3);
        ok(vnear(o, 0, 1, 0, 1e-15), "rotate_axis: x about (1,1,1) by 120 is y");
        double v[3] = {0.3, -0.4, 1.2};
        nb_rotate_axis(v, o, d, 0.0);
        ok(vnear(o, v[0], v[1], v[2], 0), "rotate_axis by 0 is the identity");
        nb_rotate_axis(d, o, d, 1.234);
        ok(vnear(o, d[0], d[1], d[2], 1e-15), "the axis itself is fixed");
        /* agrees with rotate_xyz for a pure x rotation */
        double a[3], b[3];
        nb_rotate_axis(v, a, x, 0.77);
        nb_rotate_xyz(v, b, 0.77, 0, 0);
        ok(vnear(a, b[0], b[1], b[2], 1e-15), "rotate_axis about x equals Rx");
        double ip[3] = {v[0], v[1], v[2]};
        nb_rotate_axis(ip, ip, x, 0.77);
        ok(memcmp(ip, a, sizeof a) == 0, "rotate_axis works in place");
    }
    /* rotate_umat */
    {
        const double U[9] = {1, 2, 3, 4, 5, 6, 7, 8, 10};
        double v[3] = {1, -1, 2};
        nb_rotate_umat(v, o, U);
        ok(vnear(o, 5, 11, 19, 0), "rotate_umat multiplies by the row-major matrix");
        nb_rotate_umat(v, v, U);
        ok(vnear(v, 5, 11, 19, 0), "rotate_umat works in place");
        const double Rz[9] = {0, -1, 0, 1, 0, 0, 0, 0, 1};
        nb_rotate_umat(x, o, Rz);
        ok(vnear(o, 0, 1, 0, 0), "rotate_umat with Rz(90) takes x to y");
    }

    /* cross, dot, unitize */
    nb_cross(x, y, o);
    ok(vnear(o, 0, 0, 1, 0), "x cross y = z");
    nb_cross(y, z, o);
    ok(vnear(o, 1, 0, 0, 0), "y cross z = x");
    nb_cross(z, x, o);
    ok(vnear(o, 0, 1, 0, 0), "z cross x = y");
    {
        double a[3] = {1, 2, 3}, b[3] = {-4, 5, 0.5};
        nb_cross(a, b, o);
        ok(vnear(o, 2 * 0.5 - 3 * 5, 3 * -4 - 1 * 0.5, 1 * 5 - 2 * -4, 1e-15), "a cross b by hand");
        ok(fabs(nb_dot(o, a)) < 1e-12 && fabs(nb_dot(o, b)) < 1e-12, "a cross b is perpendicular to both");
        nb_cross(a, b, a);
        ok(vnear(a, o[0], o[1], o[2], 0), "nb_cross may write over its input");
        double c[3] = {1, 2, 3};
        ok(nb_dot(c, b) == -4 + 10 + 1.5, "dot product");
        ok(nb_norm(c) == sqrt(14.0), "norm");
        double u[3];
        double m = nb_unitize(c, u);
        ok(m == sqrt(14.0) && fabs(nb_norm(u) - 1) < 1e-15 && vnear(u, 1 / m, 2 / m, 3 / m, 1e-16),
           "unitize returns the length and the unit vector");
        nb_unitize(c, c);
        ok(fabs(nb_norm(c) - 1) < 1e-15, "unitize in place");
        double zero[3] = {0, 0, 0}, zu[3] = {9, 9, 9};
        ok(nb_unitize(zero, zu) == 0.0 && zu[0] == 0 && zu[1] == 0 && zu[2] == 0, "a zero vector stays zero");
    }
}

/* The plan's vector helpers (nb_vec.h) are the kernels' (nb_physics.h)
 * written again, so that the plan builds without the physics: the two must
 * give the same bits, or a plan's vectors would drift from the double path's. */
static uint64_t bits_of(double x)
{
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static int same_bits3(const double a[3], const double b[3])
{
    return bits_of(a[0]) == bits_of(b[0]) && bits_of(a[1]) == bits_of(b[1]) && bits_of(a[2]) == bits_of(b[2]);
}

static void test_plan_vectors_are_the_kernels(void)
{
    unsigned long long st = 88172645463325252ull;
    int dot = 1, cross = 1, norm = 1, unit = 1, rot = 1;
    for (int n = 0; n < 20000; n++) {
        double v[4][3];
        for (int i = 0; i < 4; i++)
            for (int k = 0; k < 3; k++) {
                st ^= st << 13, st ^= st >> 7, st ^= st << 17; /* xorshift64 */
                /* mixed magnitudes: the reference's metres and Angstroms */
                v[i][k] = ((double)(st >> 11) / 9007199254740992.0 - 0.5) * pow(10.0, (int)(st % 21) - 10);
            }
        double a[3], b[3], phi = v[3][0] * 1e9;
        dot &= bits_of(nb_vdot(v[0], v[1])) == bits_of(nb_dot(v[0], v[1]));
        nb_vcross(v[0], v[1], a), nb_cross(v[0], v[1], b);
        cross &= same_bits3(a, b);
        norm &= bits_of(nb_vnorm(v[2])) == bits_of(nb_norm(v[2]));
        unit &= bits_of(nb_vunitize(v[2], a)) == bits_of(nb_unitize(v[2], b)) && same_bits3(a, b);
        nb_vunitize(v[1], v[1]);
        nb_rotate_about(v[0], a, v[1], phi), nb_rotate_axis(v[0], b, v[1], phi);
        rot &= same_bits3(a, b);
    }
    ok(dot && cross && norm, "the plan's dot, cross and norm are the kernels', bit for bit");
    ok(unit, "the plan's unitize is the kernels', bit for bit");
    ok(rot, "the plan's rotation about an axis is the kernels', bit for bit");
}

static void test_physics_helpers(void)
{
    ok(nb_sincg(0.0, 5) == 5, "sincg(0, N) = N");
    near(nb_sincg(1e-9, 5), 5, 1e-12, "sincg(x -> 0, N) -> N");
    near(nb_sincg(0.3, 5), sin(1.5) / sin(0.3), 1e-15, "sincg(0.3, 5) = sin(1.5)/sin(0.3)");
    ok(fabs(nb_sincg(M_PI / 2, 2)) < 1e-15, "sincg(pi/2, 2) = sin(pi)/1 = 0");
    near(fabs(nb_sincg(M_PI, 3)), 3, 1e-6, "|sincg(pi, N)| = N at the next Bragg peak");
    near(nb_sincg(0.7, 1), 1, 1e-15, "sincg(x, 1) = 1");
    ok(nb_sinc3(0.0) == 1, "sinc3(0) = 1");
    near(nb_sinc3(1e-3), 1 - 1e-6 / 10, 1e-9, "sinc3(x) ~ 1 - x^2/10 for small x");
    near(nb_sinc3(M_PI), 3 / (M_PI * M_PI), 1e-14, "sinc3(pi) = 3/pi^2");
    near(nb_sinc3(4.493409457909064), 0, 1e-12, "sinc3 vanishes at tan x = x (4.4934)");
    near(nb_sinc3(2.0), 3 * (sin(2.0) / 2.0 - cos(2.0)) / 4.0, 1e-15, "sinc3(2) by the formula");

    /* Kahn factor 0: (1 + cos^2 2theta)/2, with unnormalised inputs */
    double tt = 0.6;
    double inc[3] = {2, 0, 0}, dif[3] = {3 * cos(tt), 3 * sin(tt), 0}, axis[3] = {0, 0, 5};
    double p = nb_polarization_factor(0.0, inc, dif, axis);
    near(p, (1 + cos(tt) * cos(tt)) / 2, 1e-15, "K=0: (1 + cos^2 2theta)/2");
    ok(fabs(nb_norm(inc) - 1) < 1e-15 && fabs(nb_norm(dif) - 1) < 1e-15,
       "the incident and diffracted vectors are normalised in place");
    ok(axis[2] == 5, "the polarization axis is not modified");
    /* K=1, E along z: scattering in the xy plane (perpendicular to E) loses nothing */
    double inc2[3] = {1, 0, 0}, dif2[3] = {cos(tt), sin(tt), 0}, ax2[3] = {0, 0, 1};
    near(nb_polarization_factor(1.0, inc2, dif2, ax2), 1.0, 1e-15, "K=1, scattering perpendicular to E: 1");
    /* K=1, scattering in the xz plane (containing E): cos^2 2theta */
    double inc3[3] = {1, 0, 0}, dif3[3] = {cos(tt), 0, sin(tt)}, ax3[3] = {0, 0, 1};
    near(nb_polarization_factor(1.0, inc3, dif3, ax3), cos(tt) * cos(tt), 1e-15,
         "K=1, scattering in the E plane: cos^2 2theta");
    /* K=0.5 in between, by hand: 0.5 (1 + c^2 - K cos(2 psi) s^2) */
    double inc4[3] = {1, 0, 0}, dif4[3] = {cos(tt), sin(tt) * cos(0.4), sin(tt) * sin(0.4)}, ax4[3] = {0, 0, 1};
    double psi = -atan2(sin(tt) * cos(0.4), sin(tt) * sin(0.4));
    near(nb_polarization_factor(0.5, inc4, dif4, ax4),
         0.5 * (1 + cos(tt) * cos(tt) - 0.5 * cos(2 * psi) * sin(tt) * sin(tt)), 1e-15, "K=0.5 by hand");
    /* forward scattering: no loss whatever K */
    double inc5[3] = {1, 0, 0}, dif5[3] = {1, 0, 0}, ax5[3] = {0, 0, 1};
    near(nb_polarization_factor(0.9, inc5, dif5, ax5), 1.0, 1e-15, "forward scattering: 1");
}

static void test_cell(void)
{
    double as[3], bs[3], cs[3];
    const double cubic[6] = {100, 100, 100, M_PI / 2, M_PI / 2, M_PI / 2};
    double V = nb_cell_reciprocal(cubic, as, bs, cs);
    near(V, 1e6, 1e-12, "cubic 100 A: volume 1e6 A^3");
    ok(vnear(as, 0.01, 0, 0, 1e-17), "cubic: a* = (0.01, 0, 0)");
    ok(vnear(bs, 0, 0.01, 0, 1e-17), "cubic: b* = (0, 0.01, 0)");
    ok(vnear(cs, 0, 0, 0.01, 1e-17), "cubic: c* = (0, 0, 0.01)");
    ok(as[1] == 0 && as[2] == 0 && bs[2] == 0, "a* along x, b* in the xy plane");

    /* triclinic */
    const double a = 50, b = 60, c = 70, al = 80 / RTD, be = 95 / RTD, ga = 105 / RTD;
    const double tri[6] = {a, b, c, al, be, ga};
    V = nb_cell_reciprocal(tri, as, bs, cs);
    double Vf = a * b * c *
                sqrt(1 - cos(al) * cos(al) - cos(be) * cos(be) - cos(ga) * cos(ga) + 2 * cos(al) * cos(be) * cos(ga));
    near(V, Vf, 1e-12, "triclinic volume %.10g matches abc sqrt(1 - cos^2... + 2 cos cos cos) = %.10g", V, Vf);
    ok(as[1] == 0 && as[2] == 0 && bs[2] == 0, "triclinic: a* along x, b* in the xy plane");
    near(nb_norm(as), b * c * sin(al) / V, 1e-14, "|a*| = bc sin(alpha)/V");
    near(nb_norm(bs), c * a * sin(be) / V, 1e-14, "|b*| = ca sin(beta)/V");
    double cos_gs = (cos(al) * cos(be) - cos(ga)) / (sin(al) * sin(be));
    near(nb_dot(as, bs) / nb_norm(as) / nb_norm(bs), cos_gs, 1e-14, "angle between a* and b* is gamma*");
    /* c*_z: the reference's formula c* V/(abc sin gamma*) (docs/physics.md 3.1),
     * which equals sin(gamma)/(c sin(gamma*)) rather than 1/c, so the
     * default orientation of a triclinic cell is slightly off (the reference
     * prints 79.9723 95.0141 105.003 for this cell, see below); nb reproduces
     * it for parity */
    double cs_len = a * b * sin(ga) / V, sin_gs = c / V / nb_norm(as) / nb_norm(bs);
    near(cs[2], cs_len * V / (a * b * c * sin_gs), 1e-14, "c*_z follows the reference's formula");
    near(cs[0], cs_len * (cos(ga) * cos(al) - cos(be)) / (sin(ga) * sin(al)), 1e-14, "c*_x = c* cos(beta*)");
    /* real vectors built from these reciprocal vectors: a = (b* x c*)/V* */
    double Vs = 0, bxc[3], cxa[3], axb[3], ra[3], rb[3], rc[3];
    nb_cross(bs, cs, bxc);
    nb_cross(cs, as, cxa);
    nb_cross(as, bs, axb);
    Vs = nb_dot(as, bxc);
    for (int i = 0; i < 3; i++) ra[i] = bxc[i] / Vs, rb[i] = cxa[i] / Vs, rc[i] = axb[i] / Vs;
    near(nb_dot(ra, as), 1, 1e-12, "a . a* = 1");
    near(nb_dot(rb, bs), 1, 1e-12, "b . b* = 1");
    near(nb_dot(rc, cs), 1, 1e-12, "c . c* = 1");
    ok(fabs(nb_dot(ra, bs)) < 1e-12 && fabs(nb_dot(ra, cs)) < 1e-12 && fabs(nb_dot(rb, as)) < 1e-12 &&
           fabs(nb_dot(rb, cs)) < 1e-12 && fabs(nb_dot(rc, as)) < 1e-12 && fabs(nb_dot(rc, bs)) < 1e-12,
       "a . b* = 0 and the other off-diagonal products vanish");
    ok(fabs(rc[0]) < 1e-12 && fabs(rc[1]) < 1e-12, "c is along z (perpendicular to a* and b*)");
    near(Vs * V, sin(ga) / sin_gs, 1e-12, "V* V = sin(gamma)/sin(gamma*) (the reference's c*_z quirk)");
}

static void test_cell_resolved(void)
{
    /* the whole cell path (regeneration of 9.4) against the reference
     * program's own printout for this cell:
     *   Unit Cell: 50 60 70 79.9723 95.0141 105.003
     *   X: 48.24767663 -0.00000000  0.00000000
     *   Y: -12.37192543 59.08341460  0.00000000
     *   Z: -4.37002990 10.44749342 70.00000000
     *   reciprocal X:  0.02072417  0.00433959  0.00064611
     *              Y:  0.00000000  0.01692341 -0.00252582
     *              Z: -0.00000000 -0.00000000  0.01428419 */
    nb_plan p;
    nb_request rq;
    nb_strbuf log;
    nb_request_defaults(&rq);
    nb_strbuf_init(&log);
    nb_status st = apply_args(&rq, "-cell 50 60 70 80 95 105 -detpixels 8 -N 1");
    if (!st) st = nb_resolve(&rq, &p, &log);
    else nb_plan_init(&p);
    ok(st == NB_OK, "triclinic cell resolves");
    if (!st) {
        const double uc[6] = {50, 60, 70, 79.9723, 95.0141, 105.003};
        int good = 1;
        for (int i = 0; i < 6; i++) good &= fabs(p.unit_cell[i] - uc[i]) <= 6e-4;
        ok(good, "unit cell after regeneration equals the reference's (%g %g %g %g %g %g)", p.unit_cell[0],
           p.unit_cell[1], p.unit_cell[2], p.unit_cell[3], p.unit_cell[4], p.unit_cell[5]);
        const double t = 6e-9;
        ok(vnear(p.cell_a, 48.24767663e-10, -12.37192543e-10, -4.37002990e-10, t * 1e-10) &&
               vnear(p.cell_b, 0, 59.08341460e-10, 10.44749342e-10, t * 1e-10) &&
               vnear(p.cell_c, 0, 0, 70e-10, t * 1e-10),
           "real-space vectors equal the reference's printout");
        ok(vnear(p.recip_a, 0.02072417, 0, 0, t) && vnear(p.recip_b, 0.00433959, 0.01692341, 0, t) &&
               vnear(p.recip_c, 0.00064611, -0.00252582, 0.01428419, t),
           "reciprocal vectors equal the reference's printout");
        ok(log.data && strstr(log.data, "Unit Cell: 50 60 70 79.9723 95.0141 105.003"),
           "the log prints the reference's Unit Cell line");
    }
    nb_plan_free(&p);
    nb_strbuf_free(&log);
    nb_request_free(&rq);
}

/* ---- nb_resolve end to end -------------------------------------------------- */

static void test_resolve_mosflm(void)
{
    nb_plan p;
    nb_status st = resolve("-pixel 0.1 -distance 100 -Xbeam 51.2 -Ybeam 51.2 -detpixels 1024 "
                           "-cell 100 100 100 90 90 90",
                           &p);
    ok(st == NB_OK, "AT-GEO-001 resolves: %s", st ? nb_error_message() : "ok");
    if (!st) {
        ok(vnear(p.panels[0].pix0, 0.1, 0.05125, -0.05125, 1e-9), "AT-GEO-001: pix0 = (0.1, 0.05125, -0.05125) m");
        near(p.Fbeam, 0.05125, 1e-12, "AT-GEO-001: Fbeam = 51.25 mm (half-pixel MOSFLM offset)");
        near(p.Sbeam, 0.05125, 1e-12, "AT-GEO-001: Sbeam = 51.25 mm");
        near(p.Xbeam, 0.0512, 1e-15, "AT-GEO-001: Xbeam stays 51.2 mm");
        ok(vnear(p.panels[0].fdet, 0, 0, 1, 0) && vnear(p.panels[0].sdet, 0, -1, 0, 0) &&
               vnear(p.panels[0].odet, 1, 0, 0, 0) && vnear(p.beam, 1, 0, 0, 0),
           "MOSFLM vectors f=(0,0,1) s=(0,-1,0) o=(1,0,0) beam=(1,0,0)");
        ok(vnear(p.polar_vector, 0, 0, 1, 0) && vnear(p.spindle, 0, 0, 1, 0), "MOSFLM polar and spindle (0,0,1)");
        ok(!strcmp(p.convention, "mosflm") && !strcmp(p.pivot, "beam"), "convention mosflm, pivot beam");
        ok(p.panels[0].fpixels == 1024 && p.panels[0].spixels == 1024, "1024 x 1024 pixels");
        near(p.distance, 0.1, 1e-15, "distance 0.1 m");
        near(p.close_distance, 0.1, 1e-15, "close distance 0.1 m");
        near(p.panels[0].pixel_size, 1e-4, 1e-18, "pixel 0.1 mm");
        near(p.lambda0, 1e-10, 1e-25, "default wavelength 1 A");
        ok(p.nsources == 1 && vnear(p.sources[0].dir, -1, 0, 0, 0) && p.sources[0].lambda == 1e-10,
           "one source, direction towards the source (-beam)");
        ok(p.mosaic_domains == 1 && p.phisteps == 1 && p.panels[0].thicksteps == 1 && p.oversample >= 1,
           "single domain, phi step, layer");
        ok(vnear(p.recip_a, 0.01, 0, 0, 1e-15) && vnear(p.recip_b, 0, 0.01, 0, 1e-15) &&
               vnear(p.recip_c, 0, 0, 0.01, 1e-15),
           "reciprocal cell of the 100 A cubic cell");
        ok(vnear(p.cell_a, 100e-10, 0, 0, 1e-22) && vnear(p.cell_b, 0, 100e-10, 0, 1e-22) &&
               vnear(p.cell_c, 0, 0, 100e-10, 1e-22),
           "real cell vectors in metres");
        near(p.ORGX, 0.05125 / 1e-4 + 0.5, 1e-9, "ORGX = Fclose/pixel + 0.5");
    }
    nb_plan_free(&p);
}

static void test_resolve_tilted(void)
{
    nb_plan p;
    nb_status st = resolve("-distance 100 -detpixels 1024 -Xbeam 61.2 -Ybeam 61.2 -detector_rotx 5 "
                           "-detector_roty 3 -detector_rotz 2 -twotheta 15 -cell 100 100 100 90 90 90 "
                           "-lambda 6.2 -N 5",
                           &p);
    ok(st == NB_OK, "tilted detector resolves: %s", st ? nb_error_message() : "ok");
    if (!st) {
        const double tol = 1e-12;
        if (!ok(vnear(p.panels[0].fdet, 0.0311947630447082, -0.096650175316428, 0.994829447880333, tol),
                "tilted: fdet"))
            vprint("fdet", p.panels[0].fdet);
        if (!ok(vnear(p.panels[0].sdet, -0.228539518954453, -0.969636205471835, -0.0870362988312832, tol),
                "tilted: sdet"))
            vprint("sdet", p.panels[0].sdet);
        if (!ok(vnear(p.panels[0].odet, 0.973034724475264, -0.224642766741965, -0.0523359562429438, tol),
                "tilted: odet"))
            vprint("odet", p.panels[0].odet);
        if (!ok(vnear(p.panels[0].pix0, 0.112087366299472, 0.0653100408232811, -0.0556023303792543, tol),
                "tilted: pix0"))
            vprint("pix0", p.panels[0].pix0);
        ok(!strcmp(p.pivot, "beam"), "MOSFLM forces the beam pivot even with -twotheta");
        near(p.twotheta, 15 / RTD, 1e-15, "two-theta recorded in radians");
        ok(fabs(nb_dot(p.panels[0].fdet, p.panels[0].sdet)) < 1e-15 &&
               fabs(nb_dot(p.panels[0].fdet, p.panels[0].odet)) < 1e-15 && fabs(nb_norm(p.panels[0].odet) - 1) < 1e-15,
           "rotated detector axes stay orthonormal");
        ok(p.interpolate == 0, "-N 5: interpolation auto-selected off");
    }
    nb_plan_free(&p);
}

static void test_resolve_xds(void)
{
    nb_plan p;
    nb_status st = resolve("-xds -pixel 0.1 -distance 100 -detpixels 1024 -ORGX 400 -ORGY 300 "
                           "-cell 100 100 100 90 90 90",
                           &p);
    ok(st == NB_OK, "XDS with ORGX/ORGY resolves: %s", st ? nb_error_message() : "ok");
    if (!st) {
        ok(vnear(p.panels[0].pix0, -0.03995, -0.02995, 0.1, 1e-12),
           "XDS: pix0 = (-(ORGX-0.5) px, -(ORGY-0.5) px, distance)");
        if (!vnear(p.panels[0].pix0, -0.03995, -0.02995, 0.1, 1e-12)) vprint("pix0", p.panels[0].pix0);
        near(p.ORGX, 400, 1e-9, "XDS: ORGX round-trips to 400");
        near(p.ORGY, 300, 1e-9, "XDS: ORGY round-trips to 300");
        ok(!strcmp(p.convention, "xds") && !strcmp(p.pivot, "sample"), "XDS: sample pivot");
        ok(vnear(p.panels[0].fdet, 1, 0, 0, 0) && vnear(p.panels[0].sdet, 0, 1, 0, 0) &&
               vnear(p.panels[0].odet, 0, 0, 1, 0) && vnear(p.beam, 0, 0, 1, 0),
           "XDS vectors f=x s=y o=z beam=z");
    }
    double pix0_orgx[3] = {p.panels[0].pix0[0], p.panels[0].pix0[1], p.panels[0].pix0[2]};
    nb_plan_free(&p);

    nb_set_verbosity(-1);
    st = resolve("-xds -pixel 0.1 -distance 100 -detpixels 1024 -Xbeam 40 -Ybeam 30 -cell 100 100 100 90 90 90",
                 &p);
    ok(st == NB_OK, "XDS with -Xbeam resolves");
    if (!st) {
        ok(vnear(p.panels[0].pix0, -0.0512, -0.0512, 0.1, 1e-12), "XDS: -Xbeam/-Ybeam do not move pix0 (centre stays)");
        ok(!vnear(p.panels[0].pix0, pix0_orgx[0], pix0_orgx[1], pix0_orgx[2], 1e-6), "... unlike -ORGX/-ORGY");
        ok(!strcmp(p.pivot, "sample"), "XDS forces the sample pivot although -Xbeam asked for beam");
    }
    nb_plan_free(&p);
    st = resolve("-xds -pixel 0.1 -distance 100 -detpixels 1024 -cell 100 100 100 90 90 90", &p);
    ok(st == NB_OK && vnear(p.panels[0].pix0, -0.0512, -0.0512, 0.1, 1e-12),
       "XDS default: origin at the detector centre");
    nb_plan_free(&p);
}

static void test_resolve_defaults(void)
{
    nb_plan p;
    nb_status st = resolve("-detpixels 64 -cell 100 100 100 90 90 90", &p);
    ok(st == NB_OK, "default MOSFLM 64 px detector resolves");
    if (!st) {
        near(p.Fbeam, 3.3e-3, 1e-15, "default 64 px: Fbeam = 3.3 mm");
        near(p.Sbeam, 3.3e-3, 1e-15, "default 64 px: Sbeam = 3.3 mm");
        near(p.Xbeam, 3.25e-3, 1e-15, "default 64 px: Xbeam = 3.25 mm ((detsize + pixel)/2)");
        near(p.Ybeam, 3.25e-3, 1e-15, "default 64 px: Ybeam = 3.25 mm");
        ok(vnear(p.panels[0].pix0, 0.1, 3.3e-3, -3.3e-3, 1e-15), "default 64 px: pix0");
        near(p.detsize_f, 6.4e-3, 1e-15, "detector size from pixel count");
        ok(p.interpolate == 1, "N = 1: interpolation auto-selected on");
        ok(p.panels[0].roi_xmin == 0 && p.panels[0].roi_xmax == 64 && p.panels[0].roi_ymin == 0 &&
               p.panels[0].roi_ymax == 64,
           "ROI defaults");
        near(p.fluence, NB_DEFAULT_FLUENCE, 1e-15, "default fluence");
        ok(p.mosaic_seed == -12345678, "default mosaic seed (stored negated)");
    }
    nb_plan_free(&p);
    /* -detsize without pixel counts */
    st = resolve("-detsize 10.24 -pixel 0.08 -cell 100 100 100 90 90 90", &p);
    ok(st == NB_OK && p.panels[0].fpixels == 128 && p.panels[0].spixels == 128,
       "-detsize 10.24 with 0.08 mm pixels: 128 pixels");
    nb_plan_free(&p);
    st = resolve("-detpixels_f 300 -detpixels_s 200 -cell 100 100 100 90 90 90", &p);
    ok(st == NB_OK && p.panels[0].fpixels == 300 && p.panels[0].spixels == 200, "rectangular detector");
    if (!st) {
        near(p.Fbeam, (30e-3 + 1e-4) / 2 + 0.5e-4, 1e-15,
             "MOSFLM Fbeam = Ybeam default (fast size + pixel)/2 + half pixel");
        near(p.Sbeam, (20e-3 + 1e-4) / 2 + 0.5e-4, 1e-15,
             "MOSFLM Sbeam = Xbeam default (slow size + pixel)/2 + half pixel");
        near(p.Xbeam, (20e-3 + 1e-4) / 2, 1e-15, "MOSFLM Xbeam default from the SLOW size");
    }
    nb_plan_free(&p);
}

static void test_auto_selection(void)
{
    nb_plan p;
    nb_set_verbosity(-1);
    nb_status st = resolve("-detpixels 32 -cell 100 100 100 90 90 90 -osc 1", &p);
    ok(st == NB_OK && p.phisteps == 2, "-osc 1 alone: 2 phi steps");
    if (!st) {
        near(p.phistep, 0.5 / RTD, 1e-15, "-osc 1 alone: phi step 0.5 deg");
        near(p.osc, 1 / RTD, 1e-15, "-osc 1 alone: osc 1 deg");
    }
    nb_plan_free(&p);
    st = resolve("-detpixels 32 -cell 100 100 100 90 90 90 -phisteps 4", &p);
    ok(st == NB_OK && p.phisteps == 4, "-phisteps 4 alone: 4 steps");
    if (!st) near(p.phistep, 0.25 / RTD, 1e-15, "-phisteps 4 alone: 1 degree range in 4 steps");
    nb_plan_free(&p);
    st = resolve("-detpixels 32 -cell 100 100 100 90 90 90 -osc 2 -phistep 0.5", &p);
    ok(st == NB_OK && p.phisteps == 4, "-osc 2 -phistep 0.5: 4 steps");
    nb_plan_free(&p);

    st = resolve("-detpixels 32 -cell 100 100 100 90 90 90 -detector_thick 450", &p);
    ok(st == NB_OK && p.panels[0].thicksteps == 2, "-detector_thick 450 alone: 2 layers");
    if (!st) {
        near(p.panels[0].thickstep, 225e-6, 1e-15, "-detector_thick 450 alone: 225 um apart");
        near(p.panels[0].thick, 450e-6, 1e-15, "thickness 450 um");
        near(p.panels[0].mu, 1 / 450e-6, 1e-12, "mu = 1/thickness (%g /m)", p.panels[0].mu);
    }
    nb_plan_free(&p);
    st = resolve("-detpixels 32 -cell 100 100 100 90 90 90 -detector_thick 450 -thicksteps 5 -detector_abs 300", &p);
    ok(st == NB_OK && p.panels[0].thicksteps == 5, "-detector_thick 450 -thicksteps 5: 5 layers");
    if (!st) {
        near(p.panels[0].thickstep, 112.5e-6, 1e-15, "step = thick/(n-1) = 112.5 um");
        near(p.panels[0].mu, 1 / 300e-6, 1e-12, "-detector_abs 300: mu = 1/300 um");
    }
    nb_plan_free(&p);
    st = resolve("-detpixels 32 -cell 100 100 100 90 90 90 -thicksteps 5", &p);
    ok(st == NB_OK && p.panels[0].thicksteps == 1 && p.panels[0].thick == 0, "-thicksteps alone does nothing");
    nb_plan_free(&p);

    st = resolve("-detpixels 32 -cell 100 100 100 90 90 90 -dispersion 10", &p);
    ok(st == NB_OK && p.dispsteps == 2 && p.nsources == 2, "-dispersion alone: 2 wavelengths");
    if (!st && p.nsources == 2) {
        near(p.sources[0].lambda, 0.95e-10, 1e-15, "first wavelength lambda0 (1 - d/2)");
        near(p.sources[1].lambda, 1.05e-10, 1e-15, "second wavelength lambda0 (1 + d/2)");
    }
    nb_plan_free(&p);
    st = resolve("-detpixels 32 -cell 100 100 100 90 90 90 -dispsteps 5", &p);
    ok(st == NB_OK && p.dispsteps == 1 && p.nsources == 1, "-dispsteps alone does nothing");
    nb_plan_free(&p);

    st = resolve("-detpixels 32 -cell 100 100 100 90 90 90 -divergence 0.28 -divsteps 14 -square_div", &p);
    ok(st == NB_OK && p.nsources == 196, "14 x 14 square divergence grid: 196 sources (%d)", p.nsources);
    nb_plan_free(&p);
    st = resolve("-detpixels 32 -cell 100 100 100 90 90 90 -hdivrange 0.28 -hdivstep 0.02 -vdivrange 0.28 "
                 "-vdivstep 0.02",
                 &p);
    ok(st == NB_OK && p.nsources == 167, "0.28/0.02 mrad both ways, round: 167 sources kept (%d)", p.nsources);
    nb_plan_free(&p);
    st = resolve("-detpixels 32 -cell 100 100 100 90 90 90 -hdivrange 0.28 -hdivstep 0.02 -vdivrange 0.28 "
                 "-vdivstep 0.02 -dispersion 0.1 -dispsteps 3",
                 &p);
    ok(st == NB_OK && p.nsources == 501, "... with 3 wavelengths: 501 sources (%d)", p.nsources);
    if (!st && p.nsources == 501) {
        near(p.sources[0].lambda, 0.9995e-10, 1e-12, "lambda 0.9995 A");
        near(p.sources[1].lambda, 1.0e-10, 1e-12, "lambda 1.0 A");
        near(p.sources[2].lambda, 1.0005e-10, 1e-12, "lambda 1.0005 A");
    }
    nb_plan_free(&p);

    /* mosaic domains */
    st = resolve("-detpixels 32 -cell 100 100 100 90 90 90 -mosaic 0.5", &p);
    ok(st == NB_OK && p.mosaic_domains == 10, "-mosaic alone: 10 domains");
    if (!st && p.mosaic_domains == 10) {
        const double I[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
        ok(memcmp(p.mosaic_umats, I, sizeof I) == 0, "domain 0 is the identity");
        /* domain 1 is the reference's second matrix for seed -12345678 (test_rng) */
        const double want1[9] = {0.99996592089784464,   -0.0079751680914580177, 0.0021339486494309119,
                                 0.0079761872189555976, 0.99996807949662869,    -0.0004694946988297568,
                                 -0.0021301362335746331, 0.00048649947281547405, 0.99999761291609557};
        ok(memcmp(p.mosaic_umats + 9, want1, sizeof want1) == 0,
           "domain 1 is the reference's second rotation of seed -12345678, bit for bit");
        near(p.mosaic_spread, 0.5 / RTD, 1e-15, "mosaic spread in radians");
    }
    nb_plan_free(&p);
    st = resolve("-detpixels 32 -cell 100 100 100 90 90 90 -mosaic_domains 5", &p);
    ok(st == NB_OK && p.mosaic_domains == 1 && p.mosaic_spread == 0, "-mosaic_domains without spread: 1 domain");
    nb_plan_free(&p);
    st = resolve("-detpixels 32 -cell 100 100 100 90 90 90 -mosaic 0 -mosaic_domains 5", &p);
    ok(st == NB_OK && p.mosaic_domains == 1, "zero spread: 1 domain");
    nb_plan_free(&p);

    /* random misset with a given seed: the reference's first 90-"degree" rotation */
    st = resolve("-detpixels 32 -cell 100 100 100 90 90 90 -misset random -misset_seed 1234567890", &p);
    ok(st == NB_OK, "-misset random resolves");
    if (!st) {
        const double want[3] = {-0.10862267482633257, -0.36595201196788463, 0.40734961614065884};
        ok(memcmp(p.misset, want, sizeof want) == 0, "random misset angles equal the reference's for seed 1234567890");
        if (memcmp(p.misset, want, sizeof want) != 0) vprint("misset", p.misset);
        ok(p.misset_seed == -1234567890, "misset seed stored negated");
    }
    nb_plan_free(&p);
    /* fixed misset rotates the reciprocal cell */
    st = resolve("-detpixels 32 -cell 100 100 100 90 90 90 -misset 0 0 90", &p);
    ok(st == NB_OK && vnear(p.recip_a, 0, 0.01, 0, 1e-15) && vnear(p.recip_b, -0.01, 0, 0, 1e-15),
       "-misset 0 0 90 rotates a* onto y and b* onto -x");
    if (!st) near(p.misset[2], M_PI / 2, 1e-15, "misset recorded in radians");
    nb_plan_free(&p);

    /* interpolation choice */
    st = resolve("-detpixels 32 -cell 100 100 100 90 90 90 -N 2", &p);
    ok(st == NB_OK && p.interpolate == 1, "-N 2: tricubic interpolation auto-selected");
    nb_plan_free(&p);
    st = resolve("-detpixels 32 -cell 100 100 100 90 90 90 -N 3", &p);
    ok(st == NB_OK && p.interpolate == 0, "-N 3: no interpolation");
    nb_plan_free(&p);
    st = resolve("-detpixels 32 -cell 100 100 100 90 90 90 -N 3 -interpolate", &p);
    ok(st == NB_OK && p.interpolate == 1, "-interpolate forces it on");
    nb_plan_free(&p);

    /* crystal size sets N */
    st = resolve("-detpixels 32 -cell 100 100 100 90 90 90 -xtal_x 0.000105", &p);
    ok(st == NB_OK && p.Na == 11 && p.Nb == 1 && p.Nc == 1, "-xtal_x 105 nm with a 100 A cell: Na = 11 (%g)", p.Na);
    nb_plan_free(&p);
    st = resolve("-detpixels 32 -cell 100 100 100 90 90 90 -N 0", &p);
    ok(st == NB_OK && p.Na == 1 && p.Nb == 1 && p.Nc == 1 && p.interpolate == 1, "-N 0 gives N = 1 (interpolation on)");
    nb_plan_free(&p);

    /* errors */
    st = resolve("-detpixels 32", &p);
    ok(st == NB_ERR_USAGE && strstr(nb_error_message(), "cell"), "no cell and no matrix: %s", nb_error_message());
    nb_plan_free(&p);
    st = resolve("-detpixels 32 -cell 100 100 100 90 90 90 -pixel 0", &p);
    ok(st == NB_ERR_USAGE, "zero pixel size refused: %s", nb_error_message());
    nb_plan_free(&p);
    st = resolve("-detpixels 3000000 -cell 100 100 100 90 90 90", &p);
    ok(st == NB_ERR_USAGE && strstr(nb_error_message(), "too large"), "a 3e6 x 3e6 detector is refused: %s",
       nb_error_message());
    nb_plan_free(&p);
    st = resolve("-detpixels 32 -cell 100 100 100 90 90 90 -distance abc", &p);
    ok(st == NB_ERR_USAGE && strstr(nb_error_message(), "-distance"), "a non-numeric distance: %s",
       nb_error_message());
    nb_plan_free(&p);
    st = resolve("-detpixels 32 -cell 100 100 100 90 90 90 -pivot middle", &p);
    ok(st == NB_ERR_USAGE, "-pivot middle: %s", nb_error_message());
    nb_plan_free(&p);
}


/* The one command-line loop that nb-geom, these tests and the fuzzers share:
 * what nb-geom accepts, it accepts, with the reference's quirks. */
static int header_calls, header_roles[4];
static nb_status fake_header(nb_request *rq, const char *path, nb_header_role role)
{
    (void)rq, (void)path;
    if (header_calls < 4) header_roles[header_calls] = role;
    header_calls++;
    return NB_OK;
}

static void test_command_line(void)
{
    nb_request rq;
    nb_request_defaults(&rq);
    ok(apply_args(&rq, "-cell 100 -detpixels 32 -scale 2") == NB_OK && rq.intfile_scale == 2,
       "-scale is taken as nb-geom takes it (the int image's scale)");
    nb_request_free(&rq);

    nb_request_defaults(&rq);
    ok(apply_args(&rq, "-cell 100 -misset_seed 5 -N 3 -detpixels 32") == NB_OK && rq.misset_mode == 1 &&
           fabs(rq.misset[0] - 5 * M_PI / 180) < 1e-15 && rq.misset[1] == 0 &&
           fabs(rq.misset[2] - 3 * M_PI / 180) < 1e-15,
       "-misset_seed with two more arguments also sets a fixed misset (reference quirk)");
    nb_request_free(&rq);
    nb_request_defaults(&rq);
    ok(apply_args(&rq, "-cell 100 -detpixels 32 -misset_seed 5") == NB_OK && rq.misset_mode == 0,
       "-misset_seed at the end sets only the seed");
    nb_request_free(&rq);

    nb_request_defaults(&rq);
    ok(apply_args(&rq, "--reference-defaults -cell 100 -curved_det") == NB_OK && rq.reference_defaults &&
           !rq.curved_detector,
       "--reference-defaults is read; a -curved_det without a value is ignored");
    nb_request_free(&rq);

    nb_request_defaults(&rq);
    ok(apply_args(&rq, "-cell 100 -nfram 3") == NB_ERR_USAGE, "an unknown flag is a usage error");
    nb_request_free(&rq);

    /* headers: -mask before -img whatever the order, then the flags */
    char *argv[] = {"-img", "a.img", "-cell", "100", "-mask", "m.img"};
    const nb_args_hooks hooks = {.load_header = fake_header};
    nb_request_defaults(&rq);
    header_calls = 0;
    ok(nb_request_apply_args(&rq, 6, argv, &hooks) == NB_OK && header_calls == 2 &&
           header_roles[0] == NB_HEADER_MASK && header_roles[1] == NB_HEADER_IMG,
       "the -mask header is read before the -img header");
    nb_request_free(&rq);
    nb_request_defaults(&rq);
    header_calls = 0;
    ok(nb_request_apply_args(&rq, 6, argv, NULL) == NB_OK && header_calls == 0,
       "without a header reader, -img and -mask are left to the caller");
    nb_request_free(&rq);
}

/* ---- mosaic domains at another spread ------------------------------------- */

static double max_diff9(const double *a, const double *b)
{
    double m = 0.0;
    for (int i = 0; i < 9; i++) m = fmax(m, fabs(a[i] - b[i]));
    return m;
}

/* The rotation by rot about the unit axis v (Rodrigues), for the checks. */
static void rotation(const double v[3], double rot, double U[9])
{
    const double c = cos(rot), s = sin(rot);
    const double K[9] = {0, -v[2], v[1], v[2], 0, -v[0], -v[1], v[0], 0};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) U[3 * i + j] = (i == j ? c : 0.0) + (1.0 - c) * v[i] * v[j] + s * K[3 * i + j];
}

static void test_mosaic_rescale(void)
{
    /* the reference's angles are the spread times a draw, in single
     * precision: twice the spread is twice every angle, exactly */
    nb_plan a, b;
    nb_status sa = resolve("-detpixels 24 -cell 60 70 80 90 90 90 -mosaic 0.3 -mosaic_domains 12 -nframes 2 "
                           "-osc 0.1", &a);
    nb_status sb = resolve("-detpixels 24 -cell 60 70 80 90 90 90 -mosaic 0.6 -mosaic_domains 12 -nframes 2 "
                           "-osc 0.1", &b);
    ok(sa == NB_OK && sb == NB_OK, "plans at spreads 0.3 and 0.6 degrees resolve");
    if (sa || sb) return;
    ok(a.mosaic_umats_spread == a.mosaic_spread, "the matrices' spread is the plan's when resolved");
    double worst = 0.0, moved = 0.0, U[9];
    for (int d = 0; d < 12; d++) {
        nb_mosaic_umat_rescale(a.mosaic_umats + 9 * d, 2.0, U);
        worst = fmax(worst, max_diff9(U, b.mosaic_umats + 9 * d));
        moved = fmax(moved, max_diff9(a.mosaic_umats + 9 * d, b.mosaic_umats + 9 * d));
    }
    ok(worst < 1e-15 && moved > 1e-4, "domains at 0.3 degrees scaled by 2 are the draws at 0.6 (%.2g; apart %.2g)",
       worst, moved);
    nb_mosaic_umat_rescale(a.mosaic_umats + 9, 1.0, U);
    ok(memcmp(U, a.mosaic_umats + 9, sizeof U) == 0, "ratio 1 is the matrix bit for bit");
    nb_mosaic_umat_rescale(a.mosaic_umats, 3.0, U);
    ok(memcmp(U, a.mosaic_umats, sizeof U) == 0, "domain 0 (the identity) stays");
    /* past a quarter turn the axis comes from the symmetric part */
    const double n = sqrt(1.0 + 4.0 + 9.0), v[3] = {1.0 / n, -2.0 / n, 3.0 / n};
    double big[9], half[9], back[9];
    rotation(v, 170.0 / RTD, big);
    rotation(v, 85.0 / RTD, half);
    nb_mosaic_umat_rescale(big, 0.5, U);
    ok(max_diff9(U, half) < 1e-13, "170 degrees halved: 85 about the same axis (%.2g)", max_diff9(U, half));
    rotation(v, 180.0 / RTD, big);
    rotation(v, 60.0 / RTD, back);
    nb_mosaic_umat_rescale(big, 1.0 / 3.0, U);
    double neg[3] = {-v[0], -v[1], -v[2]}, back_neg[9];
    rotation(neg, 60.0 / RTD, back_neg);
    ok(fmin(max_diff9(U, back), max_diff9(U, back_neg)) < 1e-7, "a half turn's third: 60 degrees about its axis");

    /* a frame's own spread: its view renders the domains scaled */
    const double spread[2] = {a.mosaic_spread, b.mosaic_spread};
    ok(nb_plan_set_frame_mosaic(&a, spread) == NB_OK, "frame spreads set");
    nb_plan view;
    nb_plan_frame_view(&a, 1, &view);
    ok(view.mosaic_spread == b.mosaic_spread, "frame 2's view has its own spread");
    nb_sim_setup ca, cb;
    nb_hkl hkl;
    memset(&hkl, 0, sizeof hkl);
    hkl.default_F = 100.0;
    if (nb_sim_setup_build(&view, &hkl, &ca) == NB_OK) {
        nb_plan bview;
        nb_plan_frame_view(&b, 1, &bview);
        if (nb_sim_setup_build(&bview, &hkl, &cb) == NB_OK) {
            double cell_worst = 0.0;
            for (int i = 0; i < 9 * ca.kp.ncells; i++)
                cell_worst = fmax(cell_worst, fabs(ca.cells[i] - cb.cells[i]) / 1e-9);
            ok(ca.kp.ncells == cb.kp.ncells && cell_worst < 1e-14,
               "its rendered cells are the 0.6-degree plan's (%.2g relative)", cell_worst);
            nb_sim_setup_free(&cb);
        } else ok(0, "the 0.6-degree plan sets up");
        nb_sim_setup_free(&ca);
    } else ok(0, "the view sets up");
    const double bad[2] = {0.1, -0.1};
    ok(nb_plan_set_frame_mosaic(&a, bad) == NB_ERR_DATA, "a negative spread is refused");
    nb_plan_free(&a);
    nb_plan_free(&b);
    resolve("-detpixels 24 -cell 60 70 80 90 90 90", &a);
    ok(nb_plan_set_frame_mosaic(&a, spread) == NB_ERR_DATA, "spreads of a plan without domains are refused");
    nb_plan_free(&a);
}

int main(void)
{
    nb_set_tool_name("test_geometry");
    nb_set_verbosity(-1); /* the reference's warnings (forced pivots...) are expected here */
    test_vectors();
    test_physics_helpers();
    test_plan_vectors_are_the_kernels();
    test_cell();
    test_cell_resolved();
    test_resolve_mosflm();
    test_resolve_tilted();
    test_resolve_xds();
    test_resolve_defaults();
    test_auto_selection();
    test_command_line();
    test_mosaic_rescale();
    return tap_done();
}
