/* test_amorphous.c - the amorphous sample (docs/physics.md 17): the table
 * reader (formats/stol.c), the curve nonBragg interpolates and its two
 * look-ups (the reference's walk, the search), the sample's molecules, and
 * the pixel against the formula written out for a one-source, one-sub-pixel
 * detector. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nb_amorphous.h"
#include "nb_amorphous_render.h"
#include "nb_constants.h"
#include "nb_error.h"
#include "stol.h"
#include "tap.h"

static int parse(const char *text, nb_stol_table *t)
{
    return nb_stol_parse(text, strlen(text), "t.stol", t) == NB_OK;
}

static void test_reader(void)
{
    nb_stol_table t;
    ok(parse("#Curve 0, 3 points\n#x y type\n0 1.3 i\n\n 0.002,0.48 i\r\n0.004;0.11 # a note\n0.006\n", &t),
       "reader: comments, blank lines, nonBragg's delimiters, extra columns, CRLF");
    ok(t.n == 4, "reader: four rows (the two '#' lines are not rows), got %d", t.n);
    ok(t.x[1] == 0.002 && t.F[1] == 0.48 && t.line[1] == 5, "reader: row 2 is line 5: 0.002 0.48");
    ok(t.F[2] == 0.11 && isnan(t.F[3]), "reader: a trailing comment ends a row; a row without F keeps NaN");
    nb_stol_table_free(&t);
    ok(!parse("0 1\nstol F\n", &t) && strstr(nb_error_message(), "line 2: 'stol' is not a number"),
       "reader: a word is an error naming the line (%s)", nb_error_message());
    ok(!parse("0 1\n0.1 abc\n", &t) && strstr(nb_error_message(), "line 2: F 'abc' is not a number"),
       "reader: an F that is no number is an error");
    ok(!parse("0 1\n0.1 nan\n", &t), "reader: NaN is not a number here");
    ok(!parse("# only\n\n", &t) && strstr(nb_error_message(), "no data"), "reader: a table of comments has no data");
    ok(nb_stol_parse("0 1\n\0 2\n", 7, "t.stol", &t) != NB_OK && strstr(nb_error_message(), "NUL"),
       "reader: a NUL byte is no text");
}

static int curve(const char *text, nb_amorphous_curve *c)
{
    nb_stol_table t;
    if (!parse(text, &t)) return 0;
    int good = nb_amorphous_curve_build(&t, NB_STOL_AXIS_STOL, "t.stol", c) == NB_OK;
    nb_stol_table_free(&t);
    return good;
}

static void test_curve(void)
{
    nb_amorphous_curve c;
    nb_set_verbosity(-1);
    ok(curve("0 2\n0.1 3\n0.2 5\n0.3 4\n0.4 2\n", &c), "curve: an increasing table");
    ok(c.n == 9 && c.increasing, "curve: rows + 4 points, increasing");
    ok(c.stol[0] == -1e99 && c.stol[1] == -1e98 && c.F[0] == 2 && c.F[1] == 2 && c.stol[7] == 1e98 &&
           c.F[8] == 2,
       "curve: the reference's padding, the first and last F beyond the ends");
    ok(c.stol[4] == 0.2 * 1.0e10, "curve: sin(theta)/lambda in 1/m");
    /* through the nodes: the four-point polynomial gives the table's F */
    int exact = 1, same = 1, walk = 0;
    for (int i = 1; i < 4; i++) exact &= fabs(nb_amorphous_F(&c, c.stol[i + 2], NULL) - c.F[i + 2]) < 1e-12;
    ok(exact, "curve: F at the nodes is the table's");
    /* on an increasing table the walk and the search agree, from any start,
     * in any order of evaluations */
    for (int k = 0; k < 400; k++) {
        double s = ((k * 7919) % 400) * 1.2e7;
        same &= nb_amorphous_F(&c, s, &walk) == nb_amorphous_F(&c, s, NULL);
    }
    ok(same, "curve: the reference's walk and the search find the same points");
    double mid = nb_amorphous_F(&c, 0.15e10, NULL);
    ok(mid > 3 && mid < 5, "curve: between 0.1 and 0.2, F between 3 and 5 (%g)", mid);
    nb_amorphous_curve_free(&c);

    ok(!curve("0 2\n0.1 3\n0.1 5\n0.3 4\n", &c) && strstr(nb_error_message(), "lines 2 and 3"),
       "curve: the same sin(theta)/lambda twice within four rows is refused (%s)", nb_error_message());
    ok(!curve("0 2\n0.1 3\n0.2 5\n0 4\n", &c), "curve: ... also when not next to each other");
    ok(!curve("0\n0.1\n", &c) && strstr(nb_error_message(), "no row gives an F"), "curve: no F at all");
    ok(curve("0 2.57\n0.2 6.75\n0.18 7.32\n0.216 6.75\n0.3 4\n0.4 3\n", &c) && !c.increasing,
       "curve: a table that goes back is taken (rendered in the reference's order)");
    /* there the walk depends on where it comes from: up from 0 or down from the top */
    walk = 0;
    double up = nb_amorphous_F(&c, 0.19e10, &walk);
    walk = c.n - 3;
    double down = nb_amorphous_F(&c, 0.19e10, &walk);
    ok(up != down, "curve: a table that goes back: the walk from below and from above differ (%g, %g)", up, down);
    nb_amorphous_curve_free(&c);

    nb_stol_table t;
    parse("0 1\n0.4 2\n0.8 3\n", &t);
    nb_amorphous_curve_build(&t, NB_STOL_AXIS_4STOL, "t", &c);
    ok(c.stol[3] == 0.4 * (1e10 / 4), "curve: -4stol's axis, 0.4 / 4");
    nb_amorphous_curve_free(&c);
    nb_amorphous_curve_build(&t, NB_STOL_AXIS_Q, "t", &c);
    ok(c.stol[3] == 0.4 * (1e10 / M_PI / 4), "curve: -Q's axis, 0.4 / (4 pi)");
    nb_amorphous_curve_free(&c);
    nb_stol_table_free(&t);
}

static void test_sample(void)
{
    nb_amorphous_sample s;
    nb_amorphous_sample_defaults(&s);
    ok(nb_amorphous_sample_resolve(&s, 1e-4) == NB_OK, "sample: nonBragg's default cube");
    ok(s.molecules == 1e-4 * 1e-4 * 1e-4 * 1.0e6 * NB_AVOGADRO / 18.0, "sample: molecules = V rho N_A / MW (%g)",
       s.molecules);
    nb_amorphous_sample_defaults(&s);
    s.width = s.height = 1e-3;
    nb_amorphous_sample_resolve(&s, 2e-4);
    ok(s.width == 2e-4 && s.height == 2e-4 && s.thick == 1e-4, "sample: clipped across the beam, not along it");
    nb_amorphous_sample_defaults(&s);
    s.molecules = 1e15;
    nb_amorphous_sample_resolve(&s, 1e-4);
    near(s.molecules, 1e15, 1e-12, "sample: a given number of molecules stays (through the density)");
    nb_amorphous_sample_defaults(&s);
    s.molecular_weight = 0;
    ok(nb_amorphous_sample_resolve(&s, 1e-4) != NB_OK, "sample: MW 0 is refused");
}

/* One pixel, one source, one sub-pixel, no sensor: r_e^2 fluence N F^2
 * P Omega, each factor written out here. */
static void test_pixel(void)
{
    nb_amorphous_curve c;
    curve("0 3\n0.5 3\n1 3\n1.5 3\n", &c); /* F = 3 everywhere */
    nb_kparams kp;
    memset(&kp, 0, sizeof kp);
    const double pix = 1e-4, d = 0.1;
    kp.fpixels = kp.spixels = 3, kp.pixel_size = pix, kp.subpixel_size = pix, kp.oversample = 1;
    double f[3] = {0, 0, 1}, s[3] = {0, -1, 0}, o[3] = {1, 0, 0}, pix0[3] = {d, 1.5 * pix, -1.5 * pix};
    memcpy(kp.fdet, f, sizeof f), memcpy(kp.sdet, s, sizeof s), memcpy(kp.odet, o, sizeof o);
    memcpy(kp.pix0, pix0, sizeof pix0);
    kp.thicksteps = 1, kp.close_distance = d, kp.distance = d;
    memcpy(kp.beam, o, sizeof o);
    double polar[3] = {0, 0, 1}, inc[3] = {1, 0, 0}, lambda = 1e-10, w = 1.0;
    memcpy(kp.polar_vector, polar, sizeof polar);
    kp.nsources = 1, kp.src_incident = inc, kp.src_lambda = &lambda;
    kp.fluence = NB_DEFAULT_FLUENCE, kp.r_e_sqr = NB_R_E_SQR;
    const nb_amorphous_params a = {&kp, &c, &w, 1e16, 1.0, 0, NULL};
    double omega = 0;
    double v = nb_amorphous_pixel(&a, 2, 0, &omega);
    /* pixel (2, 0): its centre at f = 2.5 pix, s = 0.5 pix from pix0 */
    double pos[3] = {d, 1.5 * pix - 0.5 * pix, -1.5 * pix + 2.5 * pix};
    double r = sqrt(pos[0] * pos[0] + pos[1] * pos[1] + pos[2] * pos[2]);
    double c2t = pos[0] / r, om = pix * pix / (r * r) * d / r;
    double P = 0.5 * (1 + c2t * c2t); /* unpolarized (Kahn factor 0) */
    double want = NB_R_E_SQR * NB_DEFAULT_FLUENCE * 1e16 * 9 * P * om;
    near(v, want, 1e-12, "pixel: r_e^2 fluence N F^2 P Omega (%g, %g)", v, want);
    near(omega, om, 1e-12, "pixel: its solid angle is added to the sum");
    const nb_amorphous_params fm = {&kp, &c, &w, 1e16, 1.0, 1, NULL};
    near(nb_amorphous_pixel(&fm, 2, 0, &omega), 3.0, 1e-12, "pixel: -Fmap gives F");
    nb_amorphous_curve_free(&c);
}

int main(void)
{
    test_reader();
    test_curve();
    test_sample();
    test_pixel();
    return tap_done();
}
