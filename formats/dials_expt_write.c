/* dials_expt_write.c - the simulated truth as a DIALS experiment list
 * (nb-convert -o model.expt): beam, detector (every panel), goniometer and
 * scan of a rotation series, or one experiment per still, and the crystal,
 * in DIALS's laboratory frame, so that DIALS's results can be compared with
 * the truth directly (dials.compare_orientation_matrices, or dxtbx in
 * Python) and DIALS can be given the simulated geometry whole
 * (dials.import ... reference_geometry=model.expt).
 *
 * The frame: the plan's vectors are rotated by the R that takes the beam's
 * propagation direction onto DIALS's -z and the spindle (made perpendicular
 * to the beam) onto +x, the frame dxtbx builds for a miniCBF or an SMV
 * image; so the detector of the images and of this file are one, whatever
 * nb-geom's convention.  Lengths are mm (real-space cell vectors
 * Angstrom), angles degrees, as dxtbx serialises them; see
 * dials_expt_write.h for the rest. */
#include "dials_expt_write.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dials_expt_join.h"
#include "frame_write.h"
#include "image_meta.h"
#include "json.h"
#include "nxmx.h"
#include "nb_crc32.h"
#include "nb_reflections.h"
#include "nb_spectra.h"
#include "nb_stills.h"
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

nb_status nb_dials_frame_cell(const nb_plan *series, long frame, double abc[3][3])
{
    double R[3][3], cell[3][3];
    nb_plan view;
    nb_status st = nb_dials_frame(series, R);
    if (st) return st;
    nb_plan_frame_view(series, frame, &view);
    nb_plan_cell_at(&view, nb_plan_mid_phi(&view), cell);
    for (int v = 0; v < 3; v++) rot(R, cell[v], 1e10, abc[v]);
    return NB_OK;
}

static void put_vec(nb_strbuf *sb, const char *key, const double v[3], const char *after)
{
    nb_strbuf_printf(sb, "\"%s\": [%.17g, %.17g, %.17g]%s", key, v[0] + 0.0, v[1] + 0.0, v[2] + 0.0, after);
}

/* ---- the detector ------------------------------------------------------------ */

/* What the panels state of the counts, as dxtbx reads it from the images */
typedef struct panel_counts {
    double pedestal;        /* the ADC offset when the images keep it, else 0 */
    double trusted_max;     /* the counter's top less the offset */
    double gain;
} panel_counts;

static panel_counts panel_counts_of(const nb_expt_counts *c, int offset_kept)
{
    panel_counts pc = {offset_kept ? c->adc : 0.0, c->top - (double)lrint(c->adc), c->gain};
    return pc;
}

/* The fields every dxtbx panel or group node holds after its frame, name
 * and type: a group's are zero */
static void put_node_tail(nb_strbuf *sb)
{
    nb_strbuf_append(sb, "\"raw_image_offset\": [0, 0], \"image_size\": [0, 0], \"pixel_size\": [0.0, 0.0], "
                         "\"trusted_range\": [0.0, 0.0], \"thickness\": 0.0, \"material\": \"\", \"mu\": 0.0, "
                         "\"identifier\": \"\", \"mask\": [], \"gain\": 1.0, \"pedestal\": 0.0, "
                         "\"px_mm_strategy\": {\"type\": \"SimplePxMmStrategy\"}, ");
}

/* The sensor as simulated: thickness (mm), material (dxtbx's name, "" when
 * the simulation named none) and mu (1/mm); none: thickness 0 and mu 0,
 * which DIALS takes as no absorption to correct and no parallax */
static void put_sensor(nb_strbuf *sb, const nb_plan *v)
{
    int thick = v->panels[0].thick > 0 && v->panels[0].mu > 0;
    nb_strbuf_printf(sb, "\"thickness\": %.17g, \"material\": ", thick ? v->panels[0].thick * 1e3 : 0.0);
    nb_json_write_string(sb, thick ? nb_material_name(v->detector_material) : "");
    nb_strbuf_printf(sb, ", \"mu\": %.17g, ", thick ? v->panels[0].mu * 1e-3 : 0.0);
}

/* Panel i (its view v): its frame in DIALS's lab frame (flat) or, nested in
 * a group at its origin, the same axes from a local origin of 0 */
static void put_panel(nb_strbuf *sb, const nb_plan *v, int i, int n, int nested, const double R[3][3],
                      const panel_counts *c)
{
    const int last = i == n - 1;
    double f[3], s[3], o[3];
    rot(R, v->panels[0].fdet, 1.0, f);
    rot(R, v->panels[0].sdet, 1.0, s);
    rot(R, v->panels[0].pix0, 1e3, o);
    if (nested) o[0] = o[1] = o[2] = 0.0;
    int thick = v->panels[0].thick > 0 && v->panels[0].mu > 0;
    char module[24];
    nb_nxmx_module_name(i, n, module, sizeof module);
    if (nested) nb_strbuf_printf(sb, "        {\"name\": \"/entry/instrument/detector/%s\", ", module);
    else nb_strbuf_append(sb, "        {\"name\": \"Panel\", ");
    nb_strbuf_append(sb, "\"type\": \"SENSOR_PAD\", ");
    put_vec(sb, "fast_axis", f, ", ");
    put_vec(sb, "slow_axis", s, ", ");
    put_vec(sb, "origin", o, ", ");
    nb_strbuf_printf(sb, "\"raw_image_offset\": [0, 0], \"image_size\": [%d, %d], \"pixel_size\": [%.17g, %.17g], ",
                     v->panels[0].fpixels, v->panels[0].spixels, v->panels[0].pixel_size * 1e3,
                     v->panels[0].pixel_size * 1e3);
    nb_strbuf_printf(sb, "\"trusted_range\": [-1.0, %.17g], ", c->trusted_max);
    put_sensor(sb, v);
    nb_strbuf_printf(sb, "\"identifier\": \"\", \"mask\": [], \"gain\": %.17g, \"pedestal\": %.17g, ", c->gain,
                     c->pedestal);
    nb_strbuf_printf(sb, "\"px_mm_strategy\": {\"type\": \"%s\"}}%s\n",
                     thick ? "ParallaxCorrectedPxMmStrategy" : "SimplePxMmStrategy", last ? "" : ",");
}

/* The detector: one panel flat under the root; several, each in a group of
 * its own named as dxtbx names the NXmx module's offset, at the panel's
 * origin with the laboratory's axes (dxtbx's NXmx reader builds this) */
static void put_detector(nb_strbuf *sb, const nb_plan *p, const double R[3][3], const panel_counts *c)
{
    int n = nb_plan_npanels(p), nested = n > 1;
    nb_strbuf_append(sb, "  \"detector\": [{\n    \"panels\": [\n");
    for (int i = 0; i < n; i++) {
        nb_plan v;
        nb_plan_panel_view(p, i, &v);
        nb_plan_panel_dims(p, i, NULL, NULL, NULL);
        put_panel(sb, &v, i, n, nested, R, c);
    }
    static const double x[3] = {1, 0, 0}, y[3] = {0, 1, 0}, zero[3] = {0, 0, 0};
    nb_strbuf_append(sb, "    ],\n    \"hierarchy\": {\"name\": \"\", \"type\": \"\", ");
    put_vec(sb, "fast_axis", x, ", ");
    put_vec(sb, "slow_axis", y, ", ");
    put_vec(sb, "origin", zero, ", ");
    put_node_tail(sb);
    nb_strbuf_append(sb, "\"children\": [");
    for (int i = 0; i < n; i++) {
        if (!nested) {
            nb_strbuf_printf(sb, "%s{\"panel\": %d}", i ? ", " : "", i);
            continue;
        }
        nb_plan v;
        double o[3];
        nb_plan_panel_view(p, i, &v);
        rot(R, v.panels[0].pix0, 1e3, o);
        char module[24];
        nb_nxmx_module_name(i, p->npanels, module, sizeof module);
        nb_strbuf_printf(sb, "%s\n      {\"name\": \"/entry/instrument/detector/%s/module_offset\", "
                             "\"type\": \"\", ",
                         i ? "," : "", module);
        put_vec(sb, "fast_axis", x, ", ");
        put_vec(sb, "slow_axis", y, ", ");
        put_vec(sb, "origin", o, ", ");
        put_node_tail(sb);
        nb_strbuf_printf(sb, "\"children\": [{\"panel\": %d}]}", i);
    }
    nb_strbuf_append(sb, "]}\n  }],\n");
}

/* ---- beam, goniometer, scan, crystal ----------------------------------------- */

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
    rot(R, p->panels[0].fdet, 1.0, m->lab_fast);
    rot(R, p->panels[0].sdet, 1.0, m->lab_slow);
    rot(R, p->panels[0].pix0, 1e3, m->lab_origin);
    rot(R, p->spindle, 1.0, m->lab_axis);
    polar_normal(p, R, pn);
    /* dxtbx's imgCIF reader: the normal is (sin a, cos a, 0); its sign is no matter */
    double a = atan2(pn[0], pn[1]) * 180.0 / M_PI;
    if (a > 90.0) a -= 180.0;
    else if (a <= -90.0) a += 180.0;
    m->lab_polar_norm = a + 0.0;
    m->lab = 1;
}

/* The beam's direction and polarization in DIALS's frame */
typedef struct beam_model {
    double dir[3];          /* dxtbx's: from the sample to the source */
    double polar_normal[3];
    double polar_fraction;
} beam_model;

static void beam_of(const nb_plan *p, const double R[3][3], beam_model *b)
{
    rot(R, p->beam, -1.0, b->dir);
    polar_normal(p, R, b->polar_normal);
    b->polar_fraction = nb_polarization_fraction(p);
}

/* A beam at `wavelength` (m) */
static void put_beam(nb_strbuf *sb, const beam_model *b, double wavelength, int last)
{
    nb_strbuf_append(sb, "    {");
    put_vec(sb, "direction", b->dir, ", ");
    nb_strbuf_printf(sb, "\"wavelength\": %.17g, \"divergence\": 0.0, \"sigma_divergence\": 0.0, ", wavelength * 1e10);
    put_vec(sb, "polarization_normal", b->polar_normal, ", ");
    nb_strbuf_printf(sb, "\"polarization_fraction\": %.17g, \"flux\": 0.0, \"transmission\": 1.0}%s\n",
                     b->polar_fraction, last ? "" : ",");
}

/* A crystal in space group `hall` (the plan's SPACE_GROUP; NULL: P 1) */
static void put_crystal(nb_strbuf *sb, const double abc[3][3], const char *hall, int last)
{
    static const char *names[3] = {"real_space_a", "real_space_b", "real_space_c"};
    nb_strbuf_append(sb, "    {\"__id__\": \"crystal\", ");
    for (int k = 0; k < 3; k++) put_vec(sb, names[k], abc[k], ", ");
    nb_strbuf_append(sb, "\"space_group_hall_symbol\": ");
    nb_json_write_string(sb, hall ? hall : " P 1");
    nb_strbuf_printf(sb, "}%s\n", last ? "" : ",");
}

/* ---- the list, gathered frame by frame --------------------------------------- */

typedef struct still_shot {
    long frame;             /* the stream's FRAME, 0-based */
    long index;             /* its place among the frames this list saw (an NXmx file's index) */
    double wavelength;      /* m */
    double abc[3][3];       /* Angstrom, DIALS's frame */
    char identifier[256];   /* the plan's kept identifier of the frame, or the run's with its number */
} still_shot;

struct nb_expt {
    nb_outfile *of;
    nb_expt_image_kind kind;
    char *img_path;
    int offset_kept;        /* nb_expt_images' */
    int started, rotation;
    beam_model beam;
    char *fixed;            /* what every frame must share: the detector, the beam's direction, the counts */
    double R[3][3];
    long first_frame, last_frame, nseen;
    double wavelength;      /* a rotation's: the first frame's */
    double abc0[3][3];      /* a rotation's crystal at spindle angle 0 */
    int no_crystal;         /* the plan has none (nb-geom --nonbragg): the experiments name no crystal */
    char *space_group;      /* the plan's SPACE_GROUP (Hall symbol); NULL: P 1 */
    double phi0_deg, osc_deg, period;
    double axis[3];
    still_shot *shots;
    size_t nshots, cap;
    char *detector;         /* the "detector" entry, of the first frame */
    char run_id[NB_EXPT_RUN_ID]; /* "nb-" and the CRC-32 of the series plan's record: its experiments' identifiers */
    char rotation_id[256];  /* a rotation's experiment's: the plan's kept one of its first frame, or run_id */
    nb_strbuf spectra;      /* the shots' .lam files, a line each (nb-geom -expt_spectra's list); empty: none */
};

nb_status nb_expt_open(nb_expt **out, const char *path, const nb_expt_images *img)
{
    nb_expt *e;
    *out = NULL;
    nb_status st = nb_calloc((void **)&e, 1, sizeof *e, "the experiment list");
    if (st) return st;
    nb_strbuf_init(&e->spectra);
    e->kind = img->path ? img->kind : NB_EXPT_NO_IMAGES;
    if (e->kind != NB_EXPT_NO_IMAGES) e->img_path = nb_xstrdup(img->path);
    e->offset_kept = e->kind != NB_EXPT_NO_IMAGES && img->offset_kept;
    if ((st = nb_outfile_open(&e->of, path, 1))) {
        free(e->img_path);
        free(e);
        return st;
    }
    *out = e;
    return NB_OK;
}

/* What a frame shares with every other of the list: the detector and counts,
 * the beam's direction and polarization, a rotation's spindle, steps and
 * crystal (a still's crystal is its own) */
static char *fixed_text(const nb_plan *p, const double R[3][3], const panel_counts *c)
{
    nb_strbuf sb;
    beam_model b;
    beam_of(p, R, &b);
    nb_strbuf_init(&sb);
    put_detector(&sb, p, R, c);
    put_beam(&sb, &b, 1.0, 1);
    nb_strbuf_printf(&sb, "osc %.17g phi0 %.17g exposure %.17g axis %.17g %.17g %.17g\n", p->osc, p->phi0,
                     p->exposure, p->spindle[0], p->spindle[1], p->spindle[2]);
    if (p->osc > 0) {
        const double *cell[3] = {p->cell_a, p->cell_b, p->cell_c};
        for (int k = 0; k < 3; k++)
            nb_strbuf_printf(&sb, "cell %.17g %.17g %.17g\n", cell[k][0], cell[k][1], cell[k][2]);
    }
    return nb_strbuf_take(&sb);
}

/* dials_expt_write.h.  What the run was made from, so that the same
 * command (and every shard of one run) names its experiments alike and
 * another plan otherwise, where a number drawn at random would differ each
 * time. */
nb_status nb_expt_run_id(const nb_plan *series, char out[NB_EXPT_RUN_ID])
{
    nb_record rec;
    unsigned char *bytes = NULL;
    size_t len = 0;
    nb_status st = nb_plan_to_record(series, &rec);
    if (!st) st = nb_record_serialize(&rec, &bytes, &len);
    nb_record_free(&rec);
    /* the bytes before the record's own CRC-32, whose CRC with it is a constant */
    if (!st) snprintf(out, NB_EXPT_RUN_ID, "nb-%08x", (unsigned)nb_crc32_update(0, bytes, len >= 4 ? len - 4 : len));
    free(bytes);
    return st;
}

void nb_expt_identifier(const nb_plan *series, const char *run_id, long frame, char *out, size_t n)
{
    const char *kept = nb_plan_frame_id(series, frame);
    if (kept) snprintf(out, n, "%s", kept);
    else if (series->osc > 0) snprintf(out, n, "%s", run_id);
    else snprintf(out, n, "%s-%ld", run_id, frame + 1);
}

static nb_status start(nb_expt *e, const nb_plan *series, long frame, double wavelength, const panel_counts *c)
{
    nb_status st = nb_dials_frame(series, e->R);
    if (!st) st = nb_expt_run_id(series, e->run_id);
    if (st) return st;
    nb_expt_identifier(series, e->run_id, frame, e->rotation_id, sizeof e->rotation_id);
    e->started = 1;
    e->rotation = series->osc > 0;
    beam_of(series, e->R, &e->beam);
    e->fixed = fixed_text(series, e->R, c);
    nb_strbuf sb;
    nb_strbuf_init(&sb);
    put_detector(&sb, series, e->R, c);
    e->detector = nb_strbuf_take(&sb);
    e->first_frame = e->last_frame = frame;
    e->wavelength = wavelength;
    const double RTD = 180.0 / M_PI;
    e->phi0_deg = series->phi0 * RTD, e->osc_deg = series->osc * RTD;
    e->period = series->exposure > 0 ? series->exposure : 1.0;
    rot(e->R, series->spindle, 1.0, e->axis);
    const double *cell[3] = {series->cell_a, series->cell_b, series->cell_c};
    for (int k = 0; k < 3; k++) rot(e->R, cell[k], 1e10, e->abc0[k]);
    e->no_crystal = !nb_plan_has_crystal(series);
    e->space_group = series->space_group ? nb_xstrdup(series->space_group) : NULL;
    return NB_OK;
}

/* X.expt's spectra: the directory X_spectra (its name in dir_name) and the
 * list X_spectra.txt beside it; 0, or -1 when the names do not fit */
static int spectra_names(const char *expt, char *dir, char *dir_name, char *list, size_t size)
{
    size_t stem = strlen(expt);
    if (stem > 5 && !strcmp(expt + stem - 5, ".expt")) stem -= 5;
    const char *slash = strrchr(expt, '/');
    const size_t base = slash ? (size_t)(slash + 1 - expt) : 0;
    int a = snprintf(dir, size, "%.*s_spectra", (int)stem, expt);
    int b = snprintf(dir_name, size, "%.*s_spectra", (int)(stem - base), expt + base);
    int c = snprintf(list, size, "%.*s_spectra.txt", (int)stem, expt);
    return a < 0 || b < 0 || c < 0 || (size_t)a >= size || (size_t)b >= size || (size_t)c >= size ? -1 : 0;
}

/* A still's own spectrum (a shot's spikes, or its stored spectrum) as a .lam
 * file, X_spectra/shot_NNNNNN.lam (the frame from 1), named in the list
 * nb_expt_commit writes: nb-geom -expt X.expt -expt_spectra X_spectra.txt
 * renders the shot again (docs/physics.md 16.4) */
static nb_status shot_spectrum(nb_expt *e, const nb_plan *series, long frame)
{
    double *pairs;
    int n;
    nb_status st = nb_plan_frame_spectrum_pairs(series, frame, &pairs, &n);
    if (st || !n) return st;
    const char *expt = nb_outfile_path(e->of);
    char dir[NB_PATH_MAX], dir_name[NB_PATH_MAX], list[NB_PATH_MAX], lam[NB_PATH_MAX + 32];
    if (!strcmp(expt, "-")) st = nb_error_set(NB_ERR_USAGE, "the shots' spectra go beside the list: name a file, not -");
    else if (spectra_names(expt, dir, dir_name, list, sizeof dir))
        st = nb_error_set(NB_ERR_USAGE, "the name '%s' is too long for its spectra's", expt);
    if (!st && mkdir(dir, 0777) && errno != EEXIST)
        st = nb_error_set(NB_ERR_IO, "cannot make the directory '%s': %s", dir, strerror(errno));
    if (!st) {
        nb_strbuf text;
        nb_strbuf_init(&text);
        nb_spectrum_lam_text(pairs, n, &text);
        snprintf(lam, sizeof lam, "%s/shot_%06ld.lam", dir, frame + 1);
        st = nb_write_text_file(lam, text.data, text.len);
        nb_strbuf_free(&text);
        nb_strbuf_printf(&e->spectra, "%s/shot_%06ld.lam\n", dir_name, frame + 1);
    }
    free(pairs);
    return st;
}

static nb_status add_shot(nb_expt *e, const nb_plan *series, long frame, double wavelength)
{
    if (e->nshots == e->cap) {
        size_t cap = e->cap ? 2 * e->cap : 16;
        still_shot *s = realloc(e->shots, cap * sizeof *s);
        if (!s) return nb_error_set(NB_ERR_NOMEM, "out of memory for the experiment list");
        e->shots = s, e->cap = cap;
    }
    still_shot *s = &e->shots[e->nshots];
    s->frame = frame, s->index = e->nseen, s->wavelength = wavelength;
    nb_expt_identifier(series, e->run_id, frame, s->identifier, sizeof s->identifier);
    nb_status st = nb_dials_frame_cell(series, frame, s->abc);
    if (!st) st = shot_spectrum(e, series, frame);
    if (!st) e->nshots++;
    return st;
}

nb_status nb_expt_frame(nb_expt *e, const nb_plan *series, long frame, double wavelength, const nb_expt_counts *c)
{
    nb_status st = NB_OK;
    const panel_counts pc = panel_counts_of(c, e->offset_kept);
    if (!e->started) st = start(e, series, frame, wavelength, &pc);
    else {
        double R[3][3];
        char *fixed = NULL;
        if (!(st = nb_dials_frame(series, R))) fixed = fixed_text(series, R, &pc);
        if (!st && strcmp(fixed, e->fixed))
            st = nb_error_set(NB_ERR_DATA, "frame %ld has another detector, beam, crystal or counts than frame %ld: "
                                           "one experiment list holds one experiment's frames",
                              frame + 1, e->first_frame + 1);
        free(fixed);
        if (!st && e->rotation && frame != e->last_frame + 1)
            st = nb_error_set(NB_ERR_DATA, "frame %ld follows frame %ld: the frames of a rotation series' experiment "
                                           "list must follow one another",
                              frame + 1, e->last_frame + 1);
    }
    if (!st && !e->rotation) st = add_shot(e, series, frame, wavelength);
    if (st) return nb_error_prefix(st, "'%s'", nb_outfile_path(e->of));
    e->last_frame = frame;
    e->nseen++;
    return NB_OK;
}

/* The image set of a still (its frame), or of the rotation (every frame) */
static void put_imageset(nb_strbuf *sb, const nb_expt *e, const still_shot *s, int last)
{
    char name[NB_PATH_MAX];
    nb_strbuf_append(sb, "    {");
    if (s) {
        nb_strbuf_append(sb, "\"__id__\": \"ImageSet\", \"images\": [");
        if (e->kind == NB_EXPT_FILE_PER_FRAME && nb_frame_path(e->img_path, s->frame, name, sizeof name) == 0)
            nb_json_write_string(sb, name);
        else nb_json_write_string(sb, e->img_path);
        nb_strbuf_append(sb, "], ");
        if (e->kind == NB_EXPT_ONE_FILE) nb_strbuf_printf(sb, "\"single_file_indices\": [%ld], ", s->index);
    } else {
        nb_strbuf_append(sb, "\"__id__\": \"ImageSequence\", \"template\": ");
        nb_json_write_string(sb, e->img_path);
        nb_strbuf_append(sb, ", ");
        if (e->kind == NB_EXPT_ONE_FILE) {
            nb_strbuf_append(sb, "\"single_file_indices\": [");
            for (long i = 0; i < e->nseen; i++) nb_strbuf_printf(sb, "%s%ld", i ? ", " : "", i);
            nb_strbuf_append(sb, "], ");
        }
    }
    nb_strbuf_printf(sb, "\"mask\": null, \"gain\": null, \"pedestal\": null, \"dx\": null, \"dy\": null, "
                         "\"params\": {\"dynamic_shadowing\": \"Auto\", \"multi_panel\": false}}%s\n",
                     last ? "" : ",");
}

/* A rotation series: one experiment, its scan the frames seen */
static void put_rotation(nb_strbuf *sb, const nb_expt *e)
{
    int images = e->kind != NB_EXPT_NO_IMAGES;
    nb_strbuf_append(sb, "  \"experiment\": [{\"__id__\": \"Experiment\", \"identifier\": ");
    nb_json_write_string(sb, e->rotation_id);
    nb_strbuf_printf(sb, ", \"beam\": 0, \"detector\": 0, \"goniometer\": 0, \"scan\": 0%s%s}],\n",
                     images ? ", \"imageset\": 0" : "", e->no_crystal ? "" : ", \"crystal\": 0");
    nb_strbuf_append(sb, "  \"imageset\": [\n");
    if (images) put_imageset(sb, e, NULL, 1);
    nb_strbuf_append(sb, "  ],\n  \"beam\": [\n");
    put_beam(sb, &e->beam, e->wavelength, 1);
    nb_strbuf_append(sb, "  ],\n");
    nb_strbuf_append(sb, e->detector);
    nb_strbuf_append(sb, "  \"goniometer\": [{");
    put_vec(sb, "rotation_axis", e->axis, ", ");
    nb_strbuf_append(sb, "\"fixed_rotation\": [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0], "
                         "\"setting_rotation\": [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]}],\n");
    /* frame i (0-based) starts at PHI0 + i OSC.  Images numbered as dxtbx
     * numbers them: files by the frame numbers in their names; the frames
     * of one file (an NXmx shard's too) from 1, which dxtbx also takes as
     * their indices in the file, and their epochs from 0 */
    long first = e->kind == NB_EXPT_ONE_FILE ? 0 : e->first_frame, n = e->last_frame - e->first_frame + 1;
    nb_strbuf_printf(
        sb, "  \"scan\": [{\"image_range\": [%ld, %ld], \"batch_offset\": 0, \"oscillation\": [%.17g, %.17g], ",
        first + 1, first + n, e->phi0_deg + (double)e->first_frame * e->osc_deg, e->osc_deg);
    nb_strbuf_append(sb, "\"exposure_time\": [");
    for (long i = 0; i < n; i++) nb_strbuf_printf(sb, "%s%.17g", i ? ", " : "", e->period);
    /* the CBF time stamps': frame i at i periods */
    nb_strbuf_append(sb, "], \"epochs\": [");
    for (long i = 0; i < n; i++) nb_strbuf_printf(sb, "%s%.17g", i ? ", " : "", (double)(first + i) * e->period);
    nb_strbuf_append(sb, "], \"valid_image_ranges\": {}}],\n  \"crystal\": [\n");
    if (!e->no_crystal) put_crystal(sb, e->abc0, e->space_group, 1);
    nb_strbuf_append(sb, "  ],\n");
}

/* Stills: an experiment per frame, each with its beam, crystal and image */
static void put_stills(nb_strbuf *sb, const nb_expt *e)
{
    int images = e->kind != NB_EXPT_NO_IMAGES;
    nb_strbuf_append(sb, "  \"experiment\": [\n");
    for (size_t i = 0; i < e->nshots; i++) {
        /* nb_frame, the frame's number (from 1), by which shards' lists join
         * (dials_expt_join.h); dxtbx reads past it */
        nb_strbuf_append(sb, "    {\"__id__\": \"Experiment\", \"identifier\": ");
        nb_json_write_string(sb, e->shots[i].identifier);
        nb_strbuf_printf(sb, ", \"nb_frame\": %ld, \"beam\": %zu, \"detector\": 0", e->shots[i].frame + 1, i);
        if (images) nb_strbuf_printf(sb, ", \"imageset\": %zu", i);
        if (!e->no_crystal) nb_strbuf_printf(sb, ", \"crystal\": %zu", i);
        nb_strbuf_printf(sb, "}%s\n", i + 1 < e->nshots ? "," : "");
    }
    nb_strbuf_append(sb, "  ],\n  \"imageset\": [\n");
    for (size_t i = 0; images && i < e->nshots; i++) put_imageset(sb, e, &e->shots[i], i + 1 == e->nshots);
    nb_strbuf_append(sb, "  ],\n  \"beam\": [\n");
    for (size_t i = 0; i < e->nshots; i++) put_beam(sb, &e->beam, e->shots[i].wavelength, i + 1 == e->nshots);
    nb_strbuf_append(sb, "  ],\n");
    nb_strbuf_append(sb, e->detector);
    nb_strbuf_append(sb, "  \"goniometer\": [],\n  \"scan\": [],\n  \"crystal\": [\n");
    for (size_t i = 0; i < e->nshots && !e->no_crystal; i++) put_crystal(sb, e->shots[i].abc, e->space_group, i + 1 == e->nshots);
    nb_strbuf_append(sb, "  ],\n");
}

nb_status nb_expt_commit(nb_expt *e)
{
    nb_status st = NB_OK;
    if (!e->started) st = nb_error_set(NB_ERR_DATA, "'%s': no frame to describe", nb_outfile_path(e->of));
    nb_strbuf sb;
    nb_strbuf_init(&sb);
    if (!st) {
        nb_strbuf_append(&sb, "{\n  \"__id__\": \"ExperimentList\",\n");
        if (e->rotation) put_rotation(&sb, e);
        else put_stills(&sb, e);
        nb_strbuf_append(&sb, "  \"profile\": [],\n  \"scaling_model\": []\n}\n");
        FILE *fp = nb_outfile_fp(e->of);
        if (fwrite(sb.data, 1, sb.len, fp) != sb.len || ferror(fp))
            st = nb_error_set(NB_ERR_IO, "cannot write '%s'", nb_outfile_path(e->of));
    }
    nb_strbuf_free(&sb);
    if (!st && e->spectra.len) {
        char dir[NB_PATH_MAX], dir_name[NB_PATH_MAX], list[NB_PATH_MAX];
        spectra_names(nb_outfile_path(e->of), dir, dir_name, list, sizeof dir);
        st = nb_write_text_file(list, e->spectra.data, e->spectra.len);
    }
    if (st) nb_outfile_abort(e->of);
    else st = nb_outfile_commit(e->of);
    e->of = NULL;
    nb_expt_abort(e);
    return st;
}

void nb_expt_abort(nb_expt *e)
{
    if (!e) return;
    if (e->of) nb_outfile_abort(e->of);
    free(e->img_path);
    free(e->fixed);
    free(e->detector);
    free(e->space_group);
    free(e->shots);
    nb_strbuf_free(&e->spectra);
    free(e);
}

/* ---- the registry's run writer ------------------------------------------------ */

/* The images the list names (o->images, the first of the same command that
 * holds the frames whole), by their absolute name as dials.import writes
 * it: a run file's, or a file per frame (a '#' run needed for several) */
static nb_status expt_images(const char *path, const nb_plan *plan, const nb_write_opts *o, nb_expt_images *img,
                             char *abs, size_t size)
{
    *img = (nb_expt_images){NB_EXPT_NO_IMAGES, NULL, 0};
    if (!o->images) return NB_OK;
    const nb_format *f = o->images_format;
    if (!f->run_file && !strchr(o->images, '#') && plan->nframes > 1)
        return nb_error_set(NB_ERR_USAGE, "'%s': name the images with a '#' run for the frame number (e.g. "
                                          "img_###.cbf)",
                            o->images);
    if (nb_absolute_path(o->images, abs, size))
        return nb_error_set(NB_ERR_IO, "'%s': cannot name the images' directory: %s", path, strerror(errno));
    /* a CBF and NXmx count from 0 (nb_counts_from_zero); an SMV keeps the offset */
    *img = (nb_expt_images){f->run_file ? NB_EXPT_ONE_FILE : NB_EXPT_FILE_PER_FRAME, abs, !f->counts_from_zero};
    return NB_OK;
}

/* The frame into the list, opened at the run's first frame and written at
 * its end (commit): the counts the stream's (nb-noise's offset, counter and
 * gain) or the int image's (the -adc offset, 16 bits) */
static nb_status expt_frame(void **file, const char *path, const nb_frame *fr, const nb_write_opts *o)
{
    nb_expt *e = *file;
    if (!e) {
        char abs[2 * NB_PATH_MAX + 2];
        nb_expt_images img;
        nb_status st = expt_images(path, fr->plan, o, &img, abs, sizeof abs);
        if (!st) st = nb_expt_open(&e, path, &img);
        if (st) return st;
        *file = e;
        nb_info("writing %s", path);
    }
    nb_expt_counts c = {fr->counts ? fr->counts_adc : fr->adc,
                        fr->counts && fr->counts_bits == 32 ? 2147483647.0 : 65535.0,
                        fr->counts && fr->im->has.counts_gain ? fr->im->counts_gain : 1.0};
    return nb_expt_frame(e, fr->plan, fr->frame, nb_frame_wavelength(fr->plan, fr->im), &c);
}

/* The wavelength frame f's headers would state (nb_frame_wavelength of its
 * IMAGE): a frame crystal's, a still's spikes' mean, else LAMBDA0 */
double nb_expt_frame_wavelength(const nb_plan *p, long f)
{
    if (p->frame_crystals) return p->frame_crystals[f].lambda;
    if (!p->stills.on || p->stills.spikes <= 0) return p->lambda0;
    nb_still_shot shot;
    double sum = 0.0;
    nb_still_draw(p, f, &shot);
    for (int k = 0; k < shot.spikes; k++) sum += p->lambda0 * (1.0 + shot.spike[k]);
    return shot.spikes > 0 ? sum / shot.spikes : p->lambda0;
}

/* A plan without images: its frames [first, last), with the counts
 * nanoBragg's int image would have (the offset adc, 16 bits), no images */
static nb_status expt_plan_frames(void **file, const char *path, const nb_plan *plan, long first, long last, double adc)
{
    const nb_expt_counts c = {adc, 65535.0, 1.0};
    nb_expt *e = *file;
    nb_status st = NB_OK;
    if (!e) {
        const nb_expt_images none = {NB_EXPT_NO_IMAGES, NULL, 0};
        if ((st = nb_expt_open(&e, path, &none))) return st;
        *file = e;
        nb_info("writing %s of the plan's %d frame%s (no IMAGE record)", path, plan->nframes,
                plan->nframes == 1 ? "" : "s");
    }
    for (long f = first; f < last && !st; f++) st = nb_expt_frame(e, plan, f, nb_expt_frame_wavelength(plan, f), &c);
    return st;
}

static nb_status expt_commit(void *file) { return nb_expt_commit(file); }
static void expt_abort(void *file) { nb_expt_abort(file); }

/* shards' lists as one, naming the joined NXmx master's frames when there is one */
static nb_status expt_join(const char *path, const char *const *parts, int nparts, const nb_joined_images *images)
{
    return nb_expt_join(path, parts, nparts, images->path, images->parts, images->nparts);
}

const nb_run_writer nb_expt_run_writer = {expt_frame,      expt_plan_frames, expt_commit,  expt_abort,
                                          expt_join,       "experiment list", "experiment lists", "model.expt"};
