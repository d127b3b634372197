/* dials_expt.c - the detector of a DIALS experiment list (.expt JSON, as
 * dials.import writes it) for nb-geom -panels, and the whole list (every
 * experiment's crystal and wavelength, its one detector and beam
 * direction, a sweep's scan) for nb-geom -expt.
 *
 * The first experiment's detector, beam and goniometer are read (dxtbx's
 * serialisation: lengths in mm, mu in 1/mm).  Panels inside a hierarchy
 * hold frames local to their group: fast = lf0 F + lf1 S + lf2 N and
 * origin = O + lo0 F + lo1 S + lo2 N in the group's frame (F, S, N = F x S,
 * O), groups likewise down from the laboratory.  The beam's "direction" is
 * dxtbx's sample-to-source vector: the propagation direction is its
 * negative.  The lab-frame rotation axis is setting_rotation . rotation_axis;
 * without a single-axis goniometer the frame is tied by DIALS's fixed
 * convention instead (docs/physics.md, Panels). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "detector_file.h"
#include "json.h"
#include "nb_util.h"

typedef struct frame3 {
    double f[3], s[3], n[3], o[3];
} frame3;

static nb_status bad(const char *name, const char *what) { return nb_error_set(NB_ERR_DATA, "'%s': %s", name, what); }

/* The model of kind `kind` ("detector", "beam", "goniometer") that the
 * first experiment points to (index 0 when it says nothing); NULL when absent. */
static const nb_json *model(const nb_json *root, const char *kind)
{
    const nb_json *list = nb_json_get(root, kind);
    const nb_json *exp = nb_json_at(nb_json_get(root, "experiment"), 0);
    const nb_json *ix = nb_json_get(exp, kind);
    if (exp && (!ix || ix->type != NB_JSON_NUMBER)) return NULL;
    size_t i = ix ? (size_t)ix->number : 0;
    if (ix && (ix->number < 0 || ix->number != floor(ix->number))) return NULL;
    return nb_json_at(list, i);
}

/* A node's local frame composed with its parent's global one. */
static int compose(const nb_json *node, const frame3 *parent, frame3 *out)
{
    double lf[3], ls[3], lo[3];
    if (nb_json_numbers(nb_json_get(node, "fast_axis"), lf, 3) ||
        nb_json_numbers(nb_json_get(node, "slow_axis"), ls, 3) || nb_json_numbers(nb_json_get(node, "origin"), lo, 3))
        return -1;
    for (int k = 0; k < 3; k++) {
        out->f[k] = lf[0] * parent->f[k] + lf[1] * parent->s[k] + lf[2] * parent->n[k];
        out->s[k] = ls[0] * parent->f[k] + ls[1] * parent->s[k] + ls[2] * parent->n[k];
        out->o[k] = parent->o[k] + lo[0] * parent->f[k] + lo[1] * parent->s[k] + lo[2] * parent->n[k];
    }
    out->n[0] = out->f[1] * out->s[2] - out->f[2] * out->s[1];
    out->n[1] = out->f[2] * out->s[0] - out->f[0] * out->s[2];
    out->n[2] = out->f[0] * out->s[1] - out->f[1] * out->s[0];
    double m = sqrt(out->n[0] * out->n[0] + out->n[1] * out->n[1] + out->n[2] * out->n[2]);
    if (!(m > 0)) return -1;
    for (int k = 0; k < 3; k++) out->n[k] /= m;
    return 0;
}

/* One panel's size, pixel and sensor (its frame comes from compose). */
static nb_status read_panel(const nb_json *pj, const frame3 *fr, const char *name, int index, nb_panel *out)
{
    double size[2], px[2], v;
    char what[128];
    snprintf(what, sizeof what, "panel %d needs image_size, pixel_size, fast_axis, slow_axis and origin", index);
    if (nb_json_numbers(nb_json_get(pj, "image_size"), size, 2) ||
        nb_json_numbers(nb_json_get(pj, "pixel_size"), px, 2))
        return bad(name, what);
    if (size[0] < 1 || size[1] < 1 || size[0] > 1000000 || size[1] > 1000000 || size[0] != floor(size[0]) ||
        size[1] != floor(size[1]))
        return nb_error_set(NB_ERR_DATA, "'%s': panel %d's image_size is not two pixel counts", name, index);
    if (!(px[0] > 0) || fabs(px[0] - px[1]) > 1e-9 * px[0])
        return nb_error_set(NB_ERR_UNSUPPORTED, "'%s': panel %d has pixels of %g x %g mm: only square pixels are "
                                                "supported", name, index, px[0], px[1]);
    memset(out, 0, sizeof *out);
    out->fpixels = (int)size[0], out->spixels = (int)size[1];
    out->pixel_size = px[0] * 1e-3;
    for (int k = 0; k < 3; k++) {
        out->fdet[k] = fr->f[k], out->sdet[k] = fr->s[k];
        out->pix0[k] = fr->o[k] * 1e-3;
    }
    const nb_json *t = nb_json_get(pj, "thickness"), *mu = nb_json_get(pj, "mu");
    v = t && t->type == NB_JSON_NUMBER ? t->number : -1.0;
    out->thick = v > 0 ? v * 1e-3 : v; /* 0: no absorption; < 0: not given */
    out->mu = mu && mu->type == NB_JSON_NUMBER ? mu->number * 1e3 : 0.0;
    return NB_OK;
}

/* The hierarchy below node (frames composed down from parent) into the
 * panels it reaches; seen[] marks them. */
static nb_status walk(const nb_json *node, const frame3 *parent, const nb_json *panels, const char *name,
                      nb_detector_file *out, int *seen, int depth)
{
    const nb_json *leaf = nb_json_get(node, "panel");
    if (depth > 32) return bad(name, "the detector hierarchy is nested too deeply");
    if (leaf) {
        if (leaf->type != NB_JSON_NUMBER || leaf->number < 0 || leaf->number >= out->npanels ||
            seen[(int)leaf->number])
            return bad(name, "the detector hierarchy names a panel that is not there, or one twice");
        int i = (int)leaf->number;
        frame3 fr;
        seen[i] = 1;
        if (compose(nb_json_at(panels, (size_t)i), parent, &fr)) return bad(name, "a panel has no frame");
        return read_panel(nb_json_at(panels, (size_t)i), &fr, name, i, &out->panels[i]);
    }
    frame3 fr;
    if (compose(node, parent, &fr)) return bad(name, "a detector group has no frame");
    const nb_json *kids = nb_json_get(node, "children");
    for (size_t k = 0; kids && k < kids->count; k++) {
        nb_status st = walk(nb_json_at(kids, k), &fr, panels, name, out, seen, depth + 1);
        if (st) return st;
    }
    return NB_OK;
}

/* The detector's panels, through its hierarchy when it has one. */
static nb_status read_detector(const nb_json *det, const char *name, nb_detector_file *out)
{
    const frame3 lab = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}, {0, 0, 0}};
    const nb_json *panels = nb_json_get(det, "panels");
    if (!panels || panels->type != NB_JSON_ARRAY || panels->count == 0) return bad(name, "the detector has no panels");
    if (panels->count > 4096) return bad(name, "more than 4096 panels");
    out->npanels = (int)panels->count;
    nb_status st = nb_calloc((void **)&out->panels, panels->count, sizeof *out->panels, "panels");
    int *seen = NULL;
    if (!st) st = nb_calloc((void **)&seen, panels->count, sizeof *seen, "panels");
    const nb_json *h = nb_json_get(det, "hierarchy");
    if (!st && h) st = walk(h, &lab, panels, name, out, seen, 0);
    for (int i = 0; i < out->npanels && !st; i++) {
        frame3 fr;
        if (seen[i]) continue;
        /* not in the hierarchy (or none): a frame in the laboratory's */
        if (compose(nb_json_at(panels, (size_t)i), &lab, &fr)) st = bad(name, "a panel has no frame");
        else st = read_panel(nb_json_at(panels, (size_t)i), &fr, name, i, &out->panels[i]);
    }
    free(seen);
    return st;
}

/* The beam direction and the rotation axis that tie DIALS's frame to ours. */
static nb_status read_tie(const nb_json *root, const char *name, nb_detector_file *out)
{
    double dir[3], axis[3], S[9];
    if (nb_json_numbers(nb_json_get(model(root, "beam"), "direction"), dir, 3))
        return bad(name, "the experiment has no beam with a direction");
    for (int k = 0; k < 3; k++) out->beam[k] = -dir[k];
    const nb_json *g = model(root, "goniometer");
    if (!g || nb_json_numbers(nb_json_get(g, "rotation_axis"), axis, 3)) {
        out->tie = NB_TIE_DIALS_FIXED;
        nb_info("'%s' has no single-axis goniometer: DIALS's fixed frame is taken", name);
        return NB_OK;
    }
    if (nb_json_numbers(nb_json_get(g, "setting_rotation"), S, 9)) {
        const double I[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
        memcpy(S, I, sizeof S);
    }
    for (int i = 0; i < 3; i++) out->second[i] = S[3 * i] * axis[0] + S[3 * i + 1] * axis[1] + S[3 * i + 2] * axis[2];
    out->tie = NB_TIE_SPINDLE;
    return NB_OK;
}

nb_status nb_dials_expt_parse(const char *text, size_t len, const char *name, nb_detector_file *out)
{
    nb_json root;
    memset(out, 0, sizeof *out);
    nb_status st = nb_json_parse(text, len, name, &root);
    if (st) return st;
    const nb_json *det = model(&root, "detector");
    if (!det) st = bad(name, "no detector in the experiment list (is it a DIALS .expt?)");
    if (!st) st = read_detector(det, name, out);
    if (!st) st = read_tie(&root, name, out);
    nb_json_free(&root);
    if (st) nb_detector_file_free(out);
    return st;
}

/* ---- a whole experiment list (nb-geom -expt) ---------------------------------- */

/* Model `kind` of experiment i (its index into the list of that kind),
 * with the index in *index; NULL when the experiment names none. */
static const nb_json *model_of(const nb_json *root, const nb_json *exp, const char *kind, size_t *index)
{
    const nb_json *ix = nb_json_get(exp, kind);
    if (!ix || ix->type != NB_JSON_NUMBER || ix->number < 0 || ix->number != floor(ix->number)) return NULL;
    *index = (size_t)ix->number;
    return nb_json_at(nb_json_get(root, kind), *index);
}

/* Two detectors the same, panel by panel (within 1e-9 of each field) */
static int same_panels(const nb_detector_file *a, const nb_detector_file *b)
{
    if (a->npanels != b->npanels) return 0;
    for (int i = 0; i < a->npanels; i++) {
        const nb_panel *p = &a->panels[i], *q = &b->panels[i];
        if (p->fpixels != q->fpixels || p->spixels != q->spixels ||
            fabs(p->pixel_size - q->pixel_size) > 1e-9 * p->pixel_size || p->thick != q->thick || p->mu != q->mu)
            return 0;
        for (int k = 0; k < 3; k++)
            if (fabs(p->fdet[k] - q->fdet[k]) > 1e-9 || fabs(p->sdet[k] - q->sdet[k]) > 1e-9 ||
                fabs(p->pix0[k] - q->pix0[k]) > 1e-9 * (fabs(p->pix0[k]) + 1e-3))
                return 0;
    }
    return 1;
}

/* Is the experiment's scan a still's (none, or one image without oscillation)? */
static int still_scan(const nb_json *scan)
{
    double range[2], osc[2];
    if (!scan || scan->type == NB_JSON_NULL) return 1;
    if (nb_json_numbers(nb_json_get(scan, "image_range"), range, 2) ||
        nb_json_numbers(nb_json_get(scan, "oscillation"), osc, 2))
        return 0;
    return range[0] == range[1] && osc[1] == 0;
}

/* Experiment i's crystal (real_space_a/b/c, Angstrom) and wavelength */
static nb_status read_crystal(const nb_json *root, const nb_json *exp, int i, const char *name, nb_listed_crystal *c)
{
    size_t ix;
    char what[160];
    const nb_json *cr = model_of(root, exp, "crystal", &ix), *beam = model_of(root, exp, "beam", &ix);
    static const char *keys[3] = {"real_space_a", "real_space_b", "real_space_c"};
    snprintf(what, sizeof what, "experiment %d has no crystal with real_space_a, _b and _c", i);
    for (int k = 0; k < 3; k++)
        if (!cr || nb_json_numbers(nb_json_get(cr, keys[k]), c->abc[k], 3)) return bad(name, what);
    const nb_json *w = nb_json_get(beam, "wavelength");
    if (!w || w->type != NB_JSON_NUMBER || !(w->number > 0) || !isfinite(w->number)) {
        snprintf(what, sizeof what, "experiment %d has no beam with a positive wavelength", i);
        return bad(name, what);
    }
    c->lambda = w->number * 1e-10;
    /* its identifier, kept through the plan into every list written from it (a UUID from DIALS) */
    const nb_json *id = nb_json_get(exp, "identifier");
    c->identifier[0] = '\0';
    if (id && id->type == NB_JSON_STRING && id->string[0]) {
        int printable = strlen(id->string) < sizeof c->identifier;
        for (const char *q = id->string; printable && *q; q++) printable = *q >= 0x20 && *q <= 0x7e;
        if (!printable) {
            snprintf(what, sizeof what, "experiment %d's identifier is not 1 to 255 printable ASCII characters", i);
            return bad(name, what);
        }
        strcpy(c->identifier, id->string);
    }
    return NB_OK;
}

/* Experiment i's crystal's space_group_hall_symbol: the first's, or the same */
static nb_status read_space_group(const nb_json *root, const nb_json *exp, int i, const char *name,
                                  nb_experiment_list *out)
{
    size_t ix;
    char what[240];
    const nb_json *hall = nb_json_get(model_of(root, exp, "crystal", &ix), "space_group_hall_symbol");
    const char *sg = hall && hall->type == NB_JSON_STRING ? hall->string : "";
    if (strlen(sg) >= sizeof out->space_group || strchr(sg, '\n')) {
        snprintf(what, sizeof what, "experiment %d's space_group_hall_symbol is not a Hall symbol (too long, or "
                 "lines)", i);
        return bad(name, what);
    }
    if (i == 0) {
        snprintf(out->space_group, sizeof out->space_group, "%s", sg);
        return NB_OK;
    }
    if (strcmp(sg, out->space_group)) {
        snprintf(what, sizeof what, "experiment %d's crystal is in space group '%s', experiment 0's in '%s' (one "
                 "plan holds crystals of one symmetry)", i, sg, out->space_group);
        return nb_error_set(NB_ERR_UNSUPPORTED, "'%s': %s", name, what);
    }
    return NB_OK;
}

/* Experiment i's detector and beam direction: the first's, or the same */
static nb_status check_shared(const nb_json *root, const nb_json *exp, int i, const char *name,
                              nb_experiment_list *out)
{
    size_t ix;
    double dir[3];
    char what[200];
    const nb_json *det = model_of(root, exp, "detector", &ix), *beam = model_of(root, exp, "beam", &ix);
    if (!det) {
        snprintf(what, sizeof what, "experiment %d has no detector", i);
        return bad(name, what);
    }
    if (nb_json_numbers(nb_json_get(beam, "direction"), dir, 3)) {
        snprintf(what, sizeof what, "experiment %d has no beam with a direction", i);
        return bad(name, what);
    }
    if (i == 0) {
        for (int k = 0; k < 3; k++) out->detector.beam[k] = -dir[k];
        return read_detector(det, name, &out->detector);
    }
    for (int k = 0; k < 3; k++)
        if (fabs(-dir[k] - out->detector.beam[k]) > 1e-9) {
            snprintf(what, sizeof what, "experiments 0 and %d have beams of other directions: one plan has one beam "
                                        "direction", i);
            return nb_error_set(NB_ERR_UNSUPPORTED, "'%s': %s", name, what);
        }
    nb_detector_file other;
    memset(&other, 0, sizeof other);
    nb_status st = read_detector(det, name, &other);
    int same = !st && same_panels(&out->detector, &other);
    nb_detector_file_free(&other);
    if (st) return st;
    if (!same)
        return nb_error_set(NB_ERR_UNSUPPORTED, "'%s': experiments 0 and %d have other detectors: one plan has one "
                                                "detector", name, i);
    return NB_OK;
}

/* A sweep's scan and goniometer: the frames and the tie's rotation axis
 * (setting_rotation . rotation_axis); its crystal turned to spindle angle 0
 * by the fixed and setting rotations (S F A) */
static nb_status read_sweep(const nb_json *root, const nb_json *exp, const char *name, nb_experiment_list *out)
{
    size_t ix;
    double range[2], osc[2], axis[3], S[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1}, F[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
    const nb_json *scan = model_of(root, exp, "scan", &ix), *g = model_of(root, exp, "goniometer", &ix);
    if (nb_json_numbers(nb_json_get(scan, "image_range"), range, 2) ||
        nb_json_numbers(nb_json_get(scan, "oscillation"), osc, 2) || range[1] < range[0] || range[0] != floor(range[0]) ||
        range[1] != floor(range[1]) || range[1] - range[0] >= 10000000 || !(osc[1] > 0) || !isfinite(osc[0]))
        return bad(name, "the sweep's scan needs an image_range and an oscillation of a positive width");
    if (!g || nb_json_numbers(nb_json_get(g, "rotation_axis"), axis, 3))
        return bad(name, "the sweep has no single-axis goniometer (rotation_axis)");
    if (nb_json_get(g, "setting_rotation") && nb_json_numbers(nb_json_get(g, "setting_rotation"), S, 9))
        return bad(name, "the goniometer's setting_rotation is not 9 numbers");
    if (nb_json_get(g, "fixed_rotation") && nb_json_numbers(nb_json_get(g, "fixed_rotation"), F, 9))
        return bad(name, "the goniometer's fixed_rotation is not 9 numbers");
    for (int i = 0; i < 3; i++) out->detector.second[i] = S[3 * i] * axis[0] + S[3 * i + 1] * axis[1] + S[3 * i + 2] * axis[2];
    double SF[9];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) SF[3 * i + j] = S[3 * i] * F[j] + S[3 * i + 1] * F[3 + j] + S[3 * i + 2] * F[6 + j];
    for (int k = 0; k < 3; k++) {
        double v[3];
        memcpy(v, out->crystals[0].abc[k], sizeof v);
        for (int i = 0; i < 3; i++) out->crystals[0].abc[k][i] = SF[3 * i] * v[0] + SF[3 * i + 1] * v[1] + SF[3 * i + 2] * v[2];
    }
    out->sweep = 1;
    out->phi0 = osc[0] * M_PI / 180.0, out->osc = osc[1] * M_PI / 180.0;
    out->nframes = (int)(range[1] - range[0]) + 1;
    if (range[0] != 1)
        nb_info("'%s': the sweep's images %g .. %g are the plan's frames 1 .. %d", name, range[0], range[1],
                out->nframes);
    return NB_OK;
}

/* The sensor's material and the beam's polarization, as panel 0 and the first beam state them */
static void read_sensor_and_polarization(const nb_json *root, const nb_json *exp, nb_experiment_list *out)
{
    size_t ix;
    const nb_json *det = model_of(root, exp, "detector", &ix), *beam = model_of(root, exp, "beam", &ix);
    const nb_json *m = nb_json_get(nb_json_at(nb_json_get(det, "panels"), 0), "material");
    out->sensor = out->detector.panels[0].thick > 0 && out->detector.panels[0].mu > 0;
    out->material = m && m->type == NB_JSON_STRING ? nb_material_from_name(m->string) : NB_MATERIAL_NONE;
    const nb_json *f = nb_json_get(beam, "polarization_fraction");
    out->polar_fraction = f && f->type == NB_JSON_NUMBER && f->number >= 0 && f->number <= 1 ? f->number : NAN;
}

static nb_status parse_list(const nb_json *root, const char *name, nb_experiment_list *out)
{
    const nb_json *exps = nb_json_get(root, "experiment");
    if (!exps || exps->type != NB_JSON_ARRAY || exps->count == 0)
        return bad(name, "no experiment in the list (is it a DIALS .expt?)");
    if (exps->count > 10000000) return bad(name, "more than 10000000 experiments");
    nb_status st = nb_calloc((void **)&out->crystals, exps->count, sizeof *out->crystals, "the crystals");
    if (st) return st;
    out->n = (int)exps->count;
    int sweeps = 0;
    for (int i = 0; i < out->n && !st; i++) {
        const nb_json *exp = nb_json_at(exps, (size_t)i);
        size_t ix;
        if (!(st = check_shared(root, exp, i, name, out))) st = read_crystal(root, exp, i, name, &out->crystals[i]);
        if (!st) st = read_space_group(root, exp, i, name, out);
        sweeps += !st && !still_scan(model_of(root, exp, "scan", &ix));
    }
    if (st) return st;
    if (sweeps > 0 && out->n > 1)
        return nb_error_set(NB_ERR_UNSUPPORTED, "'%s': %d experiments of which %d turn (sweeps): -expt takes a list "
                                                "of stills or one sweep",
                            name, out->n, sweeps);
    read_sensor_and_polarization(root, nb_json_at(exps, 0), out);
    out->detector.tie = NB_TIE_SPINDLE;
    if (sweeps) return read_sweep(root, nb_json_at(exps, 0), name, out);
    /* stills: the file's x axis across the beam ties the frame (dxtbx's images have the beam along -z) */
    const double x[3] = {1, 0, 0}, y[3] = {0, 1, 0};
    memcpy(out->detector.second, fabs(out->detector.beam[0]) > 0.9 ? y : x, sizeof x);
    return NB_OK;
}

nb_status nb_experiment_list_read(const char *path, nb_experiment_list *out)
{
    char *text;
    size_t len;
    nb_json root;
    memset(out, 0, sizeof *out);
    nb_status st = nb_read_file(path, &text, &len);
    if (st) return st;
    st = nb_json_parse(text, len, path, &root);
    free(text);
    if (st) return st;
    st = parse_list(&root, path, out);
    nb_json_free(&root);
    if (st) nb_experiment_list_free(out);
    return st;
}

nb_status nb_detector_file_read(const char *path, nb_detector_file *out)
{
    const char *dot = strrchr(path, '.'), *slash = strrchr(path, '/');
    if (!dot || (slash && dot < slash) || (strcmp(dot, ".expt") && strcmp(dot, ".json") && strcmp(dot, ".geom")))
        return nb_error_set(NB_ERR_USAGE, "-panels '%s': name a DIALS experiment list (.expt, .json) or a CrystFEL "
                                          "geometry (.geom)",
                            path);
    char *text;
    size_t len;
    nb_status st = nb_read_file(path, &text, &len);
    if (st) return st;
    st = !strcmp(dot, ".geom") ? nb_crystfel_geom_parse(text, path, out) : nb_dials_expt_parse(text, len, path, out);
    free(text);
    return st;
}
