/* dials_expt_write.c - the simulated truth as a DIALS experiment list
 * (nb-convert -o model.expt): beam, detector (every panel), goniometer and
 * scan of a rotation series, and the crystal, in DIALS's laboratory frame,
 * so that DIALS's results can be compared with the truth directly
 * (dials.compare_orientation_matrices, or dxtbx in Python).
 *
 * The frame: the plan's vectors are rotated by the R that takes the beam's
 * propagation direction onto DIALS's -z and the spindle (made perpendicular
 * to the beam) onto +x, the frame dxtbx builds for a miniCBF or an SMV
 * image; so the detector of the images and of this file are one, whatever
 * nb-geom's convention.  Lengths are mm (real-space cell vectors
 * Angstrom), angles degrees, as dxtbx serialises them; see
 * dials_expt_write.h for the rest. */
#include "dials_expt_write.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "image_meta.h"
#include "nb_util.h"

static double dot3(const double a[3], const double b[3]) { return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]; }

static void cross3(const double a[3], const double b[3], double out[3])
{
    out[0] = a[1] * b[2] - a[2] * b[1];
    out[1] = a[2] * b[0] - a[0] * b[2];
    out[2] = a[0] * b[1] - a[1] * b[0];
}

/* rows e1 = unit(a), e2 = b made perpendicular to it, e3 = e1 x e2 */
static int frame_of(const double a[3], const double b[3], double e[3][3])
{
    double na = sqrt(dot3(a, a));
    if (!(na > 0)) return -1;
    for (int k = 0; k < 3; k++) e[0][k] = a[k] / na;
    double along = dot3(b, e[0]);
    for (int k = 0; k < 3; k++) e[1][k] = b[k] - along * e[0][k];
    double len = sqrt(dot3(e[1], e[1]));
    if (!(len > 1e-9 * sqrt(dot3(b, b)))) return -1;
    for (int k = 0; k < 3; k++) e[1][k] /= len;
    cross3(e[0], e[1], e[2]);
    return 0;
}

nb_status nb_dials_frame(const nb_plan *p, double R[3][3])
{
    static const double dials_beam[3] = {0, 0, -1}, dials_axis[3] = {1, 0, 0};
    double e[3][3], E[3][3];
    if (frame_of(p->beam, p->spindle, e) || frame_of(dials_beam, dials_axis, E))
        return nb_error_set(NB_ERR_DATA, "the spindle axis is parallel to the beam: no DIALS frame for it");
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) R[i][j] = E[0][i] * e[0][j] + E[1][i] * e[1][j] + E[2][i] * e[2][j];
    return NB_OK;
}

static void rot(const double R[3][3], const double v[3], double scale, double out[3])
{
    for (int i = 0; i < 3; i++) out[i] = scale * (R[i][0] * v[0] + R[i][1] * v[1] + R[i][2] * v[2]);
}

static void put_vec(nb_strbuf *sb, const char *key, const double v[3], const char *after)
{
    nb_strbuf_printf(sb, "\"%s\": [%.17g, %.17g, %.17g]%s", key, v[0] + 0.0, v[1] + 0.0, v[2] + 0.0, after);
}

/* JSON string body: the path's characters, quotes, backslashes and control
 * characters escaped */
static void put_string(nb_strbuf *sb, const char *s)
{
    nb_strbuf_append(sb, "\"");
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\') nb_strbuf_printf(sb, "\\%c", *c);
        else if (*c < 32) nb_strbuf_printf(sb, "\\u%04x", *c);
        else nb_strbuf_appendn(sb, (const char *)c, 1);
    }
    nb_strbuf_append(sb, "\"");
}

static void put_panel(nb_strbuf *sb, const nb_plan *v, const double R[3][3], const nb_expt_images *img, int last)
{
    double f[3], s[3], o[3];
    rot(R, v->fdet, 1.0, f);
    rot(R, v->sdet, 1.0, s);
    rot(R, v->pix0, 1e3, o);
    int thick = v->detector_thick > 0 && v->detector_mu > 0;
    nb_strbuf_printf(sb, "        {\"name\": \"Panel\", \"type\": \"SENSOR_PAD\", ");
    put_vec(sb, "fast_axis", f, ", ");
    put_vec(sb, "slow_axis", s, ", ");
    put_vec(sb, "origin", o, ", ");
    nb_strbuf_printf(sb, "\"raw_image_offset\": [0, 0], \"image_size\": [%d, %d], \"pixel_size\": [%.17g, %.17g], ",
                     v->fpixels, v->spixels, v->pixel_size * 1e3, v->pixel_size * 1e3);
    nb_strbuf_printf(sb, "\"trusted_range\": [-1.0, %.17g], ", img->overload - img->pedestal);
    nb_strbuf_printf(sb, "\"thickness\": %.17g, \"material\": \"%s\", \"mu\": %.17g, ",
                     thick ? v->detector_thick * 1e3 : 0.0, thick ? "Si" : "", thick ? v->detector_mu * 1e-3 : 0.0);
    nb_strbuf_printf(sb, "\"identifier\": \"\", \"mask\": [], \"gain\": 1.0, \"pedestal\": %.17g, ", img->pedestal);
    nb_strbuf_printf(sb, "\"px_mm_strategy\": {\"type\": \"%s\"}}%s\n",
                     thick ? "ParallaxCorrectedPxMmStrategy" : "SimplePxMmStrategy", last ? "" : ",");
}

static void put_detector(nb_strbuf *sb, const nb_plan *p, const double R[3][3], const nb_expt_images *img)
{
    int n = nb_plan_npanels(p);
    nb_strbuf_append(sb, "  \"detector\": [{\n    \"panels\": [\n");
    for (int i = 0; i < n; i++) {
        nb_plan v;
        nb_plan_panel_view(p, i, &v);
        nb_plan_panel_dims(p, i, &v.fpixels, &v.spixels, NULL);
        put_panel(sb, &v, R, img, i == n - 1);
    }
    nb_strbuf_append(sb, "    ],\n    \"hierarchy\": {\"name\": \"\", \"type\": \"\", \"fast_axis\": [1.0, 0.0, 0.0], "
                         "\"slow_axis\": [0.0, 1.0, 0.0], \"origin\": [0.0, 0.0, 0.0], \"raw_image_offset\": [0, 0], "
                         "\"image_size\": [0, 0], \"pixel_size\": [0.0, 0.0], \"trusted_range\": [0.0, 0.0], "
                         "\"thickness\": 0.0, \"material\": \"\", \"mu\": 0.0, \"identifier\": \"\", \"mask\": [], "
                         "\"gain\": 1.0, \"pedestal\": 0.0, \"px_mm_strategy\": {\"type\": \"SimplePxMmStrategy\"}, "
                         "\"children\": [");
    for (int i = 0; i < n; i++) nb_strbuf_printf(sb, "%s{\"panel\": %d}", i ? ", " : "", i);
    nb_strbuf_append(sb, "]}\n  }],\n");
}

/* the normal of the polarization plane (beam x E), unit, in DIALS's frame */
static void polar_normal(const nb_plan *p, const double R[3][3], double pn[3])
{
    double n[3];
    cross3(p->beam, p->polar_vector, n);
    double len = sqrt(dot3(n, n));
    rot(R, n, len > 0 ? 1.0 / len : 0.0, pn);
    if (!(len > 0)) pn[0] = 0, pn[1] = 1, pn[2] = 0;
}

void nb_dials_image_geometry(const nb_plan *p, nb_image_meta *m)
{
    double R[3][3], pn[3];
    m->lab = 0;
    if (nb_dials_frame(p, R)) return;   /* the message is no one's: the header goes without */
    rot(R, p->fdet, 1.0, m->lab_fast);
    rot(R, p->sdet, 1.0, m->lab_slow);
    rot(R, p->pix0, 1e3, m->lab_origin);
    rot(R, p->spindle, 1.0, m->lab_axis);
    polar_normal(p, R, pn);
    /* dxtbx's imgCIF reader: the normal is (sin a, cos a, 0); its sign is no matter */
    double a = atan2(pn[0], pn[1]) * 180.0 / M_PI;
    if (a > 90.0) a -= 180.0;
    else if (a <= -90.0) a += 180.0;
    m->lab_polar_norm = a + 0.0;
    m->lab = 1;
}

static void put_beam(nb_strbuf *sb, const nb_plan *p, const double R[3][3])
{
    double dir[3], pn[3];
    /* dxtbx's direction points from the sample to the source */
    rot(R, p->beam, -1.0, dir);
    polar_normal(p, R, pn);
    nb_strbuf_append(sb, "  \"beam\": [{");
    put_vec(sb, "direction", dir, ", ");
    nb_strbuf_printf(sb, "\"wavelength\": %.17g, \"divergence\": 0.0, \"sigma_divergence\": 0.0, ", p->lambda0 * 1e10);
    put_vec(sb, "polarization_normal", pn, ", ");
    nb_strbuf_printf(sb, "\"polarization_fraction\": %.17g, \"flux\": 0.0, \"transmission\": 1.0}],\n",
                     nb_polarization_fraction(p));
}

/* the goniometer and scan of a rotation series (the plan's frames 1..NFRAMES) */
static void put_rotation(nb_strbuf *sb, const nb_plan *p, const double R[3][3])
{
    const double RTD = 180.0 / M_PI;
    double axis[3];
    rot(R, p->spindle, 1.0, axis);
    double period = p->exposure > 0 ? p->exposure : 1.0;
    nb_strbuf_append(sb, "  \"goniometer\": [{");
    put_vec(sb, "rotation_axis", axis, ", ");
    nb_strbuf_append(sb, "\"fixed_rotation\": [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0], "
                         "\"setting_rotation\": [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]}],\n");
    nb_strbuf_printf(sb, "  \"scan\": [{\"image_range\": [1, %d], \"batch_offset\": 0, \"oscillation\": [%.17g, %.17g], ",
                     p->nframes, p->phi0 * RTD, p->osc * RTD);
    nb_strbuf_append(sb, "\"exposure_time\": [");
    for (int i = 0; i < p->nframes; i++) nb_strbuf_printf(sb, "%s%.17g", i ? ", " : "", period);
    /* the CBF time stamps': frame i at i periods */
    nb_strbuf_append(sb, "], \"epochs\": [");
    for (int i = 0; i < p->nframes; i++) nb_strbuf_printf(sb, "%s%.17g", i ? ", " : "", i * period);
    nb_strbuf_append(sb, "], \"valid_image_ranges\": {}}],\n");
}

/* The crystal at spindle angle 0 (a series: DIALS's setting at the scan
 * angle 0) or, for a still, as the frame saw it (the plan's phi0) */
static void put_crystal(nb_strbuf *sb, const nb_plan *p, const double R[3][3], int series)
{
    const double *cell[3] = {p->cell_a, p->cell_b, p->cell_c};
    static const char *names[3] = {"real_space_a", "real_space_b", "real_space_c"};
    nb_strbuf_append(sb, "  \"crystal\": [{\"__id__\": \"crystal\", ");
    for (int k = 0; k < 3; k++) {
        double v[3], u[3], out[3];
        memcpy(v, cell[k], sizeof v);
        if (!series && p->phi0 != 0) {
            /* Rodrigues about the unit spindle, as nb-sim turns the cell */
            double c = cos(p->phi0), s = sin(p->phi0), d = dot3(p->spindle, v);
            cross3(p->spindle, v, u);
            for (int j = 0; j < 3; j++) v[j] = v[j] * c + u[j] * s + p->spindle[j] * d * (1 - c);
        }
        rot(R, v, 1e10, out);
        put_vec(sb, names[k], out, ", ");
    }
    nb_strbuf_append(sb, "\"space_group_hall_symbol\": \" P 1\"}],\n");
}

static void put_imageset(nb_strbuf *sb, const nb_expt_images *img, int series)
{
    nb_strbuf_append(sb, "  \"imageset\": [");
    if (img->path) {
        nb_strbuf_printf(sb, "{\"__id__\": \"%s\", \"%s\": %s", series ? "ImageSequence" : "ImageSet",
                         series ? "template" : "images", series ? "" : "[");
        put_string(sb, img->path);
        nb_strbuf_printf(sb, "%s, \"mask\": null, \"gain\": null, \"pedestal\": null, \"dx\": null, \"dy\": null, "
                             "\"params\": {\"dynamic_shadowing\": \"Auto\", \"multi_panel\": false}}",
                         series ? "" : "]");
    }
    nb_strbuf_append(sb, "],\n");
}

nb_status nb_dials_expt_write(const char *path, const nb_plan *p, const nb_expt_images *img)
{
    double R[3][3];
    nb_status st = nb_dials_frame(p, R);
    if (st) return nb_error_prefix(st, "'%s'", path);
    int series = p->osc > 0;
    nb_strbuf sb;
    nb_strbuf_init(&sb);
    nb_strbuf_append(&sb, "{\n  \"__id__\": \"ExperimentList\",\n  \"experiment\": [{\"__id__\": \"Experiment\", "
                          "\"identifier\": \"\", \"beam\": 0, \"detector\": 0, ");
    if (series) nb_strbuf_append(&sb, "\"goniometer\": 0, \"scan\": 0, ");
    if (img->path) nb_strbuf_append(&sb, "\"imageset\": 0, ");
    nb_strbuf_append(&sb, "\"crystal\": 0}],\n");
    put_imageset(&sb, img, series);
    put_beam(&sb, p, R);
    put_detector(&sb, p, R, img);
    if (series) put_rotation(&sb, p, R);
    else nb_strbuf_append(&sb, "  \"goniometer\": [],\n  \"scan\": [],\n");
    put_crystal(&sb, p, R, series);
    nb_strbuf_append(&sb, "  \"profile\": [],\n  \"scaling_model\": []\n}\n");
    st = nb_write_text_file(path, sb.data, sb.len);
    nb_strbuf_free(&sb);
    return st;
}
