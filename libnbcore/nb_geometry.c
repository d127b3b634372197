/* From nanoBragg requests to an explicit plan.  The order of the steps and of
 * the arithmetic follows the reference program; docs/physics.md sections 2-7
 * give the formulas and the order. */
#include "nb_geometry.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nb_materials.h"
#include "nb_options.h"
#include "nb_physics.h"
#include "nb_stills.h"
#include "nb_util.h"
#include "nb_vec.h"

#define RTD (180.0 * M_1_PI)
/* or'ed into nb_request.pivot by a convention flag: a pivot nobody asked for */
#define PIVOT_IMPLIED 2

static void set3(double v[3], double x, double y, double z)
{
    v[0] = x;
    v[1] = y;
    v[2] = z;
}

void nb_request_defaults(nb_request *rq)
{
    memset(rq, 0, sizeof *rq);
    rq->pixel_size = 0.1e-3;
    rq->distance = 100.0e-3;
    rq->close_distance = NAN;
    rq->detsize_f = rq->detsize_s = 102.4e-3;
    rq->Xbeam = rq->Ybeam = rq->Xclose = rq->Yclose = rq->ORGX = rq->ORGY = NAN;
    rq->header_Fbeam = rq->header_Sbeam = NAN;
    /* the pre-convention vectors, which a custom setup starts from */
    set3(rq->beam, 1, 0, 0);
    set3(rq->fdet, 0, 0, 1);
    set3(rq->sdet, 0, -1, 0);
    set3(rq->odet, 1, 0, 0);
    set3(rq->twotheta_axis, 0, 1, 0);
    set3(rq->polar, 0, 0, 1);
    set3(rq->spindle, 0, 0, 1);
    rq->pivot = NB_PIVOT_BEAM;
    rq->convention = NB_MOSFLM;
    rq->detector_mu = -1.0;
    rq->detector_thickstep = -1.0;
    rq->detector_thicksteps = -1;
    rq->oversample = -1;
    rq->roi_xmin = rq->roi_xmax = rq->roi_ymin = rq->roi_ymax = -1;
    rq->lambda0 = 1.0e-10;
    rq->dispstep = -1;
    rq->dispsteps = -1;
    rq->hdivrange = rq->hdivstep = rq->vdivrange = rq->vdivstep = -1.0;
    rq->hdivsteps = rq->vdivsteps = -1;
    rq->round_div = 1;
    rq->fluence = NB_DEFAULT_FLUENCE;
    rq->exposure = 1.0;
    rq->beamsize = 1e-4;
    rq->Na = rq->Nb = rq->Nc = 1.0;
    rq->shape = NB_SHAPE_SQUARE;
    rq->fudge = 1;
    rq->mosaic_spread = -1.0;
    rq->mosaic_domains = -1;
    rq->osc = rq->phistep = -1.0;
    rq->phisteps = -1;
    rq->nframes = 1;
    rq->stills.spikes = -1;
    rq->interpolate = 2;
    rq->seed = -(int64_t)time(NULL);
    rq->mosaic_seed = -12345678;
    rq->misset_seed = rq->seed;
    rq->adc = 40.0;
    rq->calculate_noise = 1;
    rq->write_pgm = 1;
    rq->precision_double = -1;
    rq->printout_fpixel = rq->printout_spixel = -1;
    rq->progress = 1;
}

void nb_request_free(nb_request *rq)
{
    char **strs[] = {&rq->sourcefile, &rq->matfile, &rq->imgfile, &rq->maskfile, &rq->stolfile,
                     &rq->hklfile, &rq->dumpfile, &rq->floatfile, &rq->intfile, &rq->noisefile,
                     &rq->pgmfile, &rq->command_line};
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++) {
        free(*strs[i]);
        *strs[i] = NULL;
    }
    free(rq->mask);
    rq->mask = NULL;
    nb_detector_file_free(rq->panels);
    free(rq->panels);
    rq->panels = NULL;
}

static void set_str(char **dst, const char *v)
{
    free(*dst);
    *dst = nb_xstrdup(v);
}

/* ---- parsing ------------------------------------------------------------ */

nb_status nb_request_apply_header(nb_request *rq, const nb_header_geometry *h, const char *path,
                                  nb_header_role role)
{
    nb_status st;
    if (role == NB_HEADER_MASK && !h->pixels)
        return nb_error_set(NB_ERR_DATA, "mask '%s': its pixels were not read", path);
    /* docs/physics.md 2.4: SIZE1/2 always; the other keys when present */
    rq->fpixels = h->width;
    rq->spixels = h->height;
    if (!isnan(h->pixel_size)) rq->pixel_size = h->pixel_size / 1000.0;
    rq->detsize_f = rq->pixel_size * rq->fpixels;
    rq->detsize_s = rq->pixel_size * rq->spixels;
    if (!isnan(h->distance)) rq->distance = h->distance / 1000.0;
    if (!isnan(h->close_distance)) rq->close_distance = h->close_distance / 1000.0;
    if (!isnan(h->wavelength)) rq->lambda0 = h->wavelength / 1e10;
    if (!isnan(h->beam_f) && !isnan(h->beam_s)) {
        /* the spot itself (an SMV of nb-convert): whatever the convention,
         * resolve_convention makes it its Xbeam, Ybeam; a beam centre an
         * earlier header gave goes, as the -img header's beats the mask's */
        rq->header_Fbeam = h->beam_f / 1000.0;
        rq->header_Sbeam = h->beam_s / 1000.0;
        rq->Xbeam = rq->Ybeam = NAN;
    } else if (!isnan(h->beam_center_x) || !isnan(h->beam_center_y)) {
        rq->header_Fbeam = rq->header_Sbeam = NAN;
    }
    if (!isnan(h->beam_center_x)) rq->Xbeam = h->beam_center_x / 1000.0;
    /* a mask's BEAM_CENTER_Y is counted from the other edge, as the reference reads it */
    if (!isnan(h->beam_center_y))
        rq->Ybeam = role == NB_HEADER_MASK ? rq->detsize_s - h->beam_center_y / 1000.0 : h->beam_center_y / 1000.0;
    if (!isnan(h->orgx)) rq->ORGX = h->orgx;
    if (!isnan(h->orgy)) rq->ORGY = h->orgy;
    if (!isnan(h->phi)) rq->phi0 = h->phi / RTD;
    if (!isnan(h->osc_range)) rq->osc = h->osc_range / RTD;
    if (!isnan(h->twotheta))
        nb_warn("'%s': header TWOTHETA is ignored, as the reference does; use -twotheta", path);
    if (role == NB_HEADER_MASK) {
        size_t n = (size_t)h->width * (size_t)h->height;
        free(rq->mask);
        if ((st = nb_calloc((void **)&rq->mask, n, 1, "mask"))) return st;
        for (size_t i = 0; i < n; i++) rq->mask[i] = h->pixels[i] != 0;
        rq->mask_w = h->width;
        rq->mask_h = h->height;
        set_str(&rq->maskfile, path);
    } else {
        set_str(&rq->imgfile, path);
    }
    return NB_OK;
}

nb_status nb_request_scan_args(nb_request *rq, int argc, char **argv, const nb_args_hooks *hooks,
                               nb_scanned_args *out)
{
    (void)rq; /* every flag, --reference-defaults too, is applied by nb_request_apply_scanned */
    const nb_opts_hooks h = {hooks ? hooks->tool_option : NULL, hooks ? hooks->ctx : NULL, NULL};
    nb_status st = nb_opts_scan(&nb_request_opts, argc, argv, &h, out);
    if (st) return st;
    /* the reference wants a value after -curved_det: as the last argument it
     * does nothing */
    if (out->count && out->flags[out->count - 1].id == FL_CURVED_DET && out->flags[out->count - 1].index == argc - 1) {
        nb_warn("-curved_det as the last argument is ignored, as the reference does (it needs a value after it)");
        out->count--;
    }
    return NB_OK;
}

/* The reference's -misset clause also matches -misset_seed: followed by two
 * more arguments, it takes the seed and those two as fixed angles (atof: a
 * flag reads as 0).  Returns 1 when it did. */
static int misset_seed_quirk(nb_request *rq, const nb_scanned_args *args, int index, double angles[3])
{
    char **argv = args->argv;
    if (index + 3 >= args->argc || strstr(argv[index + 1], "rand")) return 0;
    for (int j = 0; j < 3; j++) angles[j] = atof(argv[index + 1 + j]);
    for (int j = 0; j < 3; j++) rq->misset[j] = angles[j] / (180.0 * M_1_PI);
    rq->misset_mode = 1;
    return 1;
}

nb_status nb_request_apply_scanned(nb_request *rq, const nb_scanned_args *args, const nb_args_hooks *hooks)
{
    nb_status st;
    if ((st = nb_request_take_panels(rq, args, hooks))) return st;
    /* the reference reads the -mask header, then the -img header, before any
     * other flag, so flags override headers and -img beats -mask */
    const char *maskfile = NULL, *imgfile = NULL;
    for (int k = 0; k < args->count; k++) {
        if (args->flags[k].id == FL_MASK) maskfile = args->argv[args->flags[k].index + 1];
        if (args->flags[k].id == FL_IMG) imgfile = args->argv[args->flags[k].index + 1];
    }
    if (hooks && hooks->load_header) {
        if (maskfile && (st = hooks->load_header(rq, maskfile, NB_HEADER_MASK))) return st;
        if (imgfile && (st = hooks->load_header(rq, imgfile, NB_HEADER_IMG))) return st;
    }

    int quirk = 0;
    double quirk_misset[3] = {0, 0, 0};
    for (int k = 0; k < args->count; k++) {
        const struct nb_scanned_flag *a = &args->flags[k];
        const char *name = args->argv[a->index];
        if ((st = nb_opt_apply(a->row, rq, name, args->argv + a->index + 1, a->nvals))) return st;
        if (a->id == FL_MISSET) quirk = 0;
        if (a->id == FL_MISSET_SEED && misset_seed_quirk(rq, args, a->index, quirk_misset)) quirk = 1;
    }
    if (quirk)
        nb_warn("-misset_seed also set a fixed misset of %g %g %g degrees (its value and the next two "
                "arguments), as the reference does; put -misset random after -misset_seed",
                quirk_misset[0], quirk_misset[1], quirk_misset[2]);
    return NB_OK;
}

nb_status nb_request_apply_args(nb_request *rq, int argc, char **argv, const nb_args_hooks *hooks)
{
    nb_scanned_args args;
    nb_status st = nb_request_scan_args(rq, argc, argv, hooks, &args);
    if (st) return st;
    st = nb_request_apply_scanned(rq, &args, hooks);
    nb_scanned_args_free(&args);
    return st;
}

nb_status nb_request_apply(nb_request *rq, int id, const char *name, char **vals, int nvals)
{
    const nb_opt *row = nb_opt_row(&nb_request_opts, id);
    if (!row) return nb_error_set(NB_ERR_USAGE, "option %s is not handled by nb-geom", name);
    return nb_opt_apply(row, rq, name, vals, nvals);
}

/* ---- nb-geom's option table ---------------------------------------------- */

/* The units the reference converts to at parse time (metres, radians), each
 * with the reference's own arithmetic: x / 1e6 and x * 1e-6 differ in the
 * last bit for some x, so each flag keeps the one the reference uses. */
static double milli(double x) { return x / 1000.0; } /* mm to m, mrad to rad */
static double deg_to_rad(double x) { return x / RTD; }
static double angstrom_to_m(double x) { return x / 1.0e10; }
static double angstrom_to_m_mul(double x) { return x * 1e-10; }
static double ev_to_m(double x) { return (12398.42 / x) / 1.0e10; }
static double micron_to_m(double x) { return x / 1e6; }
static double micron_to_m_mul(double x) { return x * 1e-6; }
static double percent(double x) { return x / 100.0; }

/* -cell A [B C AL BE GA]: lengths as given, angles to radians */
static nb_status apply_cell(const nb_opt_args *a)
{
    nb_request *rq = a->dest;
    nb_status st;
    double x;
    rq->user_cell = 1;
    for (int i = 0; i < a->nvals; i++) {
        if ((st = nb_opt_number(a->opt, a->name, a->vals[i], &x))) return st;
        rq->cell[i] = i < 3 ? x : x / RTD;
    }
    return NB_OK;
}

/* -misset RX RY RZ, or -misset random */
static nb_status apply_misset(const nb_opt_args *a)
{
    nb_request *rq = a->dest;
    if (a->nvals == 1) {
        if (strcmp(a->vals[0], "random") != 0 && strcmp(a->vals[0], "rand") != 0)
            return nb_error_set(NB_ERR_USAGE, "option -misset: expected three angles or 'random', got '%s'",
                                a->vals[0]);
        rq->misset_mode = -1;
        return NB_OK;
    }
    double m[3];
    nb_status st;
    for (int i = 0; i < 3; i++)
        if ((st = nb_opt_number(a->opt, a->name, a->vals[i], &m[i]))) return st;
    for (int i = 0; i < 3; i++) rq->misset[i] = m[i] / RTD;
    rq->misset_mode = 1;
    return NB_OK;
}

/* -density, -MW, -coherent: read (a bad number is still an error) and ignored */
static nb_status apply_no_effect(const nb_opt_args *a)
{
    double x;
    nb_status st;
    if (a->nvals && (st = nb_opt_number(a->opt, a->name, a->vals[0], &x))) return st;
    nb_warn("%s has no effect on the image (as in the reference)", a->name);
    return NB_OK;
}

static nb_status apply_stolout(const nb_opt_args *a)
{
    nb_warn("%s: nothing is written (as in the reference)", a->name);
    return NB_OK;
}

/* -twotheta_axis X Y Z: the reference's -twotheta clause matches this flag
 * too, so the angle becomes the axis' x component in degrees and the pivot SAMPLE */
static nb_status apply_twotheta_axis(const nb_opt_args *a)
{
    nb_request *rq = a->dest;
    nb_status st;
    rq->convention = NB_CUSTOM;
    for (int i = 0; i < 3; i++)
        if ((st = nb_opt_number(a->opt, a->name, a->vals[i], &rq->twotheta_axis[i]))) return st;
    if (rq->twotheta != rq->twotheta_axis[0] / RTD)
        nb_warn("-twotheta_axis also sets the two-theta angle to %g degrees (its first value), as the "
                "reference does; give -twotheta after it to choose the angle",
                rq->twotheta_axis[0]);
    rq->twotheta = rq->twotheta_axis[0] / RTD;
    rq->pivot = NB_PIVOT_SAMPLE;
    return NB_OK;
}

/* -pix0_vector X Y Z: read, then ignored as the reference does */
static nb_status apply_pix0_vector(const nb_opt_args *a)
{
    nb_request *rq = a->dest;
    double ignored;
    nb_status st;
    for (int i = 0; i < 3; i++)
        if ((st = nb_opt_number(a->opt, a->name, a->vals[i], &ignored))) return st;
    rq->convention = NB_CUSTOM;
    nb_warn("%s selects the custom convention but its values are ignored, as in the reference", a->name);
    return NB_OK;
}

/* -detector_abs MICRONS|inf: the attenuation depth */
static nb_status apply_detector_abs(const nb_opt_args *a)
{
    nb_request *rq = a->dest;
    char what[80];
    double x;
    nb_status st;
    snprintf(what, sizeof what, "option %s", a->name);
    if ((st = nb_parse_double_any(a->vals[0], &x, what))) return st;
    if (isnan(x) || x < 0)
        return nb_error_set(NB_ERR_USAGE, "option %s: attenuation depth must be >= 0 microns or inf", a->name);
    if (isinf(x) || x == 0.0) {
        /* no absorption: the reference also drops any thickness given before */
        rq->detector_thick = 0.0;
        rq->detector_mu = 0.0;
    } else {
        rq->detector_mu = 1.0 / (x * 1e-6);
    }
    return NB_OK;
}

/* -detector_material NAME: the sensor's material, whose attenuation
 * coefficient resolve_sensor_material takes at the central wavelength */
static nb_status apply_detector_material(const nb_opt_args *a)
{
    nb_request *rq = a->dest;
    nb_material m = nb_material_from_name(a->vals[0]);
    if (m == NB_MATERIAL_NONE)
        return nb_error_set(NB_ERR_USAGE, "option %s: expected Si (or Silicon), CdTe or GaAs, got '%s'", a->name,
                            a->vals[0]);
    rq->detector_material = m;
    return NB_OK;
}

/* -stills_N A:B and -stills_fluence A:B (or one value, A:A): a range */
static nb_status apply_stills_range(const nb_opt_args *a)
{
    nb_request *rq = a->dest;
    const char *v = a->vals[0], *colon = strchr(v, ':');
    char lo[64], what[80];
    double x[2];
    nb_status st;
    snprintf(what, sizeof what, "option %s", a->name);
    snprintf(lo, sizeof lo, "%.*s", colon ? (int)(colon - v) : (int)strlen(v), v);
    if ((st = nb_parse_double(lo, &x[0], what)) || (st = nb_parse_double(colon ? colon + 1 : v, &x[1], what)))
        return st;
    if (a->opt->id == FL_STILLS_N) {
        if (!(x[0] >= 1 && x[1] >= x[0] && x[1] <= 1e6) || x[0] != floor(x[0]) || x[1] != floor(x[1]))
            return nb_error_set(NB_ERR_USAGE, "option %s: expected whole numbers of unit cells A:B, 1 <= A <= B, got "
                                              "'%s'",
                                a->name, v);
        rq->stills.N_min = (int)x[0], rq->stills.N_max = (int)x[1];
    } else {
        if (!(x[0] > 0 && x[1] >= x[0]))
            return nb_error_set(NB_ERR_USAGE, "option %s: expected fluences A:B, 0 < A <= B, got '%s'", a->name, v);
        rq->stills.fluence_min = x[0], rq->stills.fluence_max = x[1];
    }
    return NB_OK;
}

static const nb_opt_choice pivots[] = {{"sample", NB_PIVOT_SAMPLE}, {"beam", NB_PIVOT_BEAM}, {NULL, 0}};
static const nb_opt_choice precisions[] = {{"double", 1}, {"single", 0}, {NULL, 0}};

/* Row builders: a flag's field(s) of nb_request and what it reads. */
#define RQ(f) NB_AT(nb_request, f)
#define SET(id, f, v) {id, .type = NB_OPT_SET, .sets = {{RQ(f), v}}}
#define NUM(id, conv, ...) {id, .type = NB_OPT_DOUBLE, .at = {__VA_ARGS__}, .convert = conv}
#define INT(id, ...) {id, .type = NB_OPT_INT, .at = {__VA_ARGS__}}
#define STR(id, f) {id, .type = NB_OPT_STRDUP, .at = {RQ(f)}}
#define FN(id, f) {id, .type = NB_OPT_CALLBACK, .fn = f}
/* a number that also sets the pivot, as the reference's parser does */
#define PIVOTING(id, conv, f, p) {id, .type = NB_OPT_DOUBLE, .at = {RQ(f)}, .convert = conv, .sets = {{RQ(pivot), p}}}
/* a convention flag sets the parse-time pivot as the reference does (-dials:
 * BEAM, which the DIALS block then forces to SAMPLE), marked as implied, so
 * that nb_resolve does not report it as an overridden request */
#define CONVENTION(id, c, p) {id, .type = NB_OPT_SET, .sets = {{RQ(convention), c}, {RQ(pivot), p | PIVOT_IMPLIED}}}
/* a custom vector selects the custom convention */
#define VECTOR(id, f) {id, .type = NB_OPT_VEC3, .at = {RQ(f)}, .sets = {{RQ(convention), NB_CUSTOM}}}

static const nb_opt request_rows[] = {
    /* the crystal: cell or matrix, orientation, size, mosaicity, spot shape */
    {FL_IMG, .type = NB_OPT_SET}, /* its header is read before every flag: nb_request_apply_scanned */
    {FL_MASK, .type = NB_OPT_SET},
    {FL_PANELS, .type = NB_OPT_SET}, /* its file is read before every flag too */
    STR(FL_MAT, matfile),
    FN(FL_CELL, apply_cell),
    FN(FL_MISSET, apply_misset),
    {FL_MISSET_SEED, .type = NB_OPT_SEED, .at = {RQ(misset_seed)}},
    {FL_MOSAIC_SEED, .type = NB_OPT_SEED, .at = {RQ(mosaic_seed)}},
    /* unit cells: a fractional count is an nb extension (docs/deviations.md) */
    NUM(FL_NA, NULL, RQ(Na)),
    NUM(FL_NB, NULL, RQ(Nb)),
    NUM(FL_NC, NULL, RQ(Nc)),
    NUM(FL_N, NULL, RQ(Na), RQ(Nb), RQ(Nc)),
    NUM(FL_SAMPLE_SIZE, milli, RQ(sample_x), RQ(sample_y), RQ(sample_z)),
    NUM(FL_SAMPLE_X, milli, RQ(sample_x)),
    NUM(FL_SAMPLE_Y, milli, RQ(sample_y)),
    NUM(FL_SAMPLE_Z, milli, RQ(sample_z)),
    FN(FL_DENSITY, apply_no_effect),
    FN(FL_MW, apply_no_effect),
    FN(FL_COHERENT, apply_no_effect),
    NUM(FL_MOSAIC, deg_to_rad, RQ(mosaic_spread)),
    INT(FL_MOSAIC_DOMAINS, RQ(mosaic_domains)),
    SET(FL_ROUND_XTAL, shape, NB_SHAPE_ROUND),
    SET(FL_SQUARE_XTAL, shape, NB_SHAPE_SQUARE),
    SET(FL_GAUSS_XTAL, shape, NB_SHAPE_GAUSS),
    SET(FL_TOPHAT_SPOTS, shape, NB_SHAPE_TOPHAT),
    NUM(FL_FUDGE, NULL, RQ(fudge)),
    /* the detector's placement: beam centres, pivot, convention and its
     * vectors, distances, rotations */
    PIVOTING(FL_XBEAM, milli, Xbeam, NB_PIVOT_BEAM),
    PIVOTING(FL_YBEAM, milli, Ybeam, NB_PIVOT_BEAM),
    PIVOTING(FL_XCLOSE, milli, Xclose, NB_PIVOT_SAMPLE),
    PIVOTING(FL_YCLOSE, milli, Yclose, NB_PIVOT_SAMPLE),
    PIVOTING(FL_ORGX, NULL, ORGX, NB_PIVOT_SAMPLE),
    PIVOTING(FL_ORGY, NULL, ORGY, NB_PIVOT_SAMPLE),
    {FL_PIVOT, .type = NB_OPT_CHOICE, .at = {RQ(pivot)}, .choices = pivots, .expected = "'beam' or 'sample'"},
    CONVENTION(FL_MOSFLM, NB_MOSFLM, NB_PIVOT_BEAM),
    CONVENTION(FL_XDS, NB_XDS, NB_PIVOT_SAMPLE),
    CONVENTION(FL_ADXV, NB_ADXV, NB_PIVOT_BEAM),
    CONVENTION(FL_DENZO, NB_DENZO, NB_PIVOT_BEAM),
    CONVENTION(FL_DIALS, NB_DIALS, NB_PIVOT_BEAM),
    VECTOR(FL_FDET_VECTOR, fdet),
    VECTOR(FL_SDET_VECTOR, sdet),
    VECTOR(FL_ODET_VECTOR, odet),
    VECTOR(FL_BEAM_VECTOR, beam),
    VECTOR(FL_POLAR_VECTOR, polar),
    VECTOR(FL_SPINDLE_AXIS, spindle),
    FN(FL_TWOTHETA_AXIS, apply_twotheta_axis),
    FN(FL_PIX0_VECTOR, apply_pix0_vector),
    /* the reference divides by a distance (and a detector behind the sample is no detector) */
    {FL_DISTANCE, .type = NB_OPT_DOUBLE, .at = {RQ(distance)}, .check = NB_CHECK_POSITIVE, .convert = milli,
     .sets = {{RQ(pivot), NB_PIVOT_BEAM}}},
    {FL_CLOSE_DISTANCE, .type = NB_OPT_DOUBLE, .at = {RQ(close_distance)}, .check = NB_CHECK_POSITIVE,
     .convert = milli, .sets = {{RQ(pivot), NB_PIVOT_SAMPLE}}},
    PIVOTING(FL_TWOTHETA, deg_to_rad, twotheta, NB_PIVOT_SAMPLE),
    NUM(FL_ROTX, deg_to_rad, RQ(rotx)),
    NUM(FL_ROTY, deg_to_rad, RQ(roty)),
    NUM(FL_ROTZ, deg_to_rad, RQ(rotz)),
    /* the detector itself: size, pixels, sensor, oversampling, region of interest */
    FN(FL_DETECTOR_ABS, apply_detector_abs),
    NUM(FL_DETECTOR_THICK, micron_to_m_mul, RQ(detector_thick)),
    INT(FL_THICKSTEPS, RQ(detector_thicksteps)),
    FN(FL_DETECTOR_MATERIAL, apply_detector_material),
    NUM(FL_DETSIZE, milli, RQ(detsize_f), RQ(detsize_s)),
    NUM(FL_DETSIZE_F, milli, RQ(detsize_f)),
    NUM(FL_DETSIZE_S, milli, RQ(detsize_s)),
    INT(FL_DETPIXELS, RQ(fpixels), RQ(spixels)),
    INT(FL_DETPIXELS_F, RQ(fpixels)),
    INT(FL_DETPIXELS_S, RQ(spixels)),
    SET(FL_CURVED_DET, curved_detector, 1),
    NUM(FL_PIXEL, milli, RQ(pixel_size)),
    SET(FL_POINT_PIXEL, point_pixel, 1),
    INT(FL_OVERSAMPLE, RQ(oversample)),
    SET(FL_OVERSAMPLE_THICK, oversample_thick, 1),
    SET(FL_OVERSAMPLE_POLAR, oversample_polar, 1),
    SET(FL_OVERSAMPLE_OMEGA, oversample_omega, 1),
    {FL_ROI, .type = NB_OPT_INTS, .at = {RQ(roi_xmin), RQ(roi_xmax), RQ(roi_ymin), RQ(roi_ymax)}},
    /* the beam: wavelength, polarization, fluence, divergence, dispersion, sources */
    {FL_POLAR, .type = NB_OPT_DOUBLE, .at = {RQ(polarization)}, .sets = {{RQ(nopolar), 0}}},
    SET(FL_NOPOLAR, nopolar, 1),
    {FL_LAMBDA, .type = NB_OPT_DOUBLE, .at = {RQ(lambda0)}, .check = NB_CHECK_POSITIVE, .convert = angstrom_to_m},
    {FL_ENERGY, .type = NB_OPT_DOUBLE, .at = {RQ(lambda0)}, .check = NB_CHECK_POSITIVE, .convert = ev_to_m},
    NUM(FL_FLUENCE, NULL, RQ(fluence)),
    NUM(FL_FLUX, NULL, RQ(flux)),
    NUM(FL_EXPOSURE, NULL, RQ(exposure)),
    NUM(FL_BEAMSIZE, milli, RQ(beamsize)),
    NUM(FL_DISPERSION, percent, RQ(dispersion)),
    INT(FL_DISPSTEPS, RQ(dispsteps)),
    NUM(FL_DIVERGENCE, milli, RQ(hdivrange), RQ(vdivrange)),
    NUM(FL_HDIVRANGE, milli, RQ(hdivrange)),
    NUM(FL_VDIVRANGE, milli, RQ(vdivrange)),
    NUM(FL_HDIVSTEP, milli, RQ(hdivstep)),
    NUM(FL_VDIVSTEP, milli, RQ(vdivstep)),
    INT(FL_HDIVSTEPS, RQ(hdivsteps)),
    INT(FL_VDIVSTEPS, RQ(vdivsteps)),
    INT(FL_DIVSTEPS, RQ(hdivsteps), RQ(vdivsteps)),
    SET(FL_ROUND_DIV, round_div, 1),
    SET(FL_SQUARE_DIV, round_div, 0),
    STR(FL_SOURCEFILE, sourcefile),
    /* the rotation: phi start, oscillation, steps, frames */
    NUM(FL_PHI, deg_to_rad, RQ(phi0)),
    NUM(FL_OSC, deg_to_rad, RQ(osc)),
    NUM(FL_PHISTEP, deg_to_rad, RQ(phistep)),
    INT(FL_PHISTEPS, RQ(phisteps)),
    INT(FL_NFRAMES, RQ(nframes)),
    /* stills: the shots' orientation, spectrum, crystal size and fluence (nb extension) */
    SET(FL_STILLS, stills.on, 1),
    {FL_STILLS_BANDWIDTH, .type = NB_OPT_DOUBLE, .at = {RQ(stills.bandwidth)}, .check = NB_CHECK_POSITIVE,
     .convert = percent},
    {FL_STILLS_SPIKES, .type = NB_OPT_INT, .at = {RQ(stills.spikes)}, .check = NB_CHECK_POSITIVE},
    FN(FL_STILLS_N, apply_stills_range),
    FN(FL_STILLS_FLUENCE, apply_stills_range),
    /* what the later stages do, recorded in the plan: structure factors,
     * rendering, background, noise and output files */
    {FL_SEED, .type = NB_OPT_SEED, .at = {RQ(seed)}, .sets = {{RQ(seed_given), 1}}},
    NUM(FL_DMIN, angstrom_to_m_mul, RQ(dmin)),
    SET(FL_INTERPOLATE, interpolate, 1),
    SET(FL_NOINTERPOLATE, interpolate, 0),
    NUM(FL_WATER, micron_to_m, RQ(water_size)),
    STR(FL_STOL, stolfile),
    FN(FL_STOLOUT, apply_stolout),
    STR(FL_HKL, hklfile),
    NUM(FL_DEFAULT_F, NULL, RQ(default_F)),
    STR(FL_DUMP, dumpfile),
    SET(FL_PRINTOUT, printout, 1),
    {FL_PRINTOUT_PIXEL, .type = NB_OPT_INTS, .at = {RQ(printout_fpixel), RQ(printout_spixel)},
     .sets = {{RQ(printout), 1}}},
    SET(FL_PROGRESS, progress, 1),
    SET(FL_NOPROGRESS, progress, 0),
    {FL_PRECISION, .type = NB_OPT_CHOICE, .at = {RQ(precision_double)}, .choices = precisions,
     .expected = "'single' or 'double'"},
    NUM(FL_ADC, NULL, RQ(adc)),
    SET(FL_NONOISE, calculate_noise, 0),
    {FL_NOISEFILE, .type = NB_OPT_STRDUP, .at = {RQ(noisefile)}, .sets = {{RQ(calculate_noise), 1}}},
    STR(FL_FLOATFILE, floatfile),
    STR(FL_INTFILE, intfile),
    {FL_PGMFILE, .type = NB_OPT_STRDUP, .at = {RQ(pgmfile)}, .sets = {{RQ(write_pgm), 1}}},
    {FL_PGMSCALE, .type = NB_OPT_DOUBLE, .at = {RQ(pgm_scale)}, .sets = {{RQ(write_pgm), 1}}},
    SET(FL_NOPGM, write_pgm, 0),
    NUM(FL_SCALE, NULL, RQ(intfile_scale)),
    /* nb-geom's own option */
    {NB_OPT_LOCAL, "--reference-defaults", 0, "",
     "behave like the nanoBragg program: request floatimage.bin,\n"
     "intimage.img, noiseimage.img, image.pgm and the Fdump.bin cache",
     .type = NB_OPT_SET, .sets = {{RQ(reference_defaults), 1}}},
};
#undef RQ
#undef SET
#undef NUM
#undef INT
#undef STR
#undef FN
#undef PIVOTING
#undef CONVENTION
#undef VECTOR

const nb_opt_table nb_request_opts = {NB_GEOM, request_rows, (int)(sizeof request_rows / sizeof request_rows[0])};

/* ---- sources ------------------------------------------------------------ */

/* Columns X Y Z weight lambda, separated by blanks, tabs or , ; : !  Missing
 * columns take their defaults; blank lines and '#' comments are skipped. */
static nb_status read_source_file(const char *path, double rows[][5], int max_rows, int *nrows)
{
    char *text;
    size_t len;
    nb_status st = nb_read_file(path, &text, &len);
    int n = 0, lineno = 0;
    if (st) return st;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        lineno++;
        char *p = line + strspn(line, " \t,;:!\r");
        if (*p == '\0' || *p == '#') continue;
        if (n >= max_rows) {
            free(text);
            return nb_error_set(NB_ERR_DATA, "'%s': more than %d sources", path, max_rows);
        }
        for (int c = 0; c < 5; c++) rows[n][c] = NAN;
        for (int c = 0; c < 5 && *p; c++) {
            char *end;
            errno = 0;
            double v = strtod(p, &end);
            if (end == p || !isfinite(v)) {
                free(text);
                return nb_error_set(NB_ERR_DATA, "'%s' line %d: column %d is not a number", path, lineno, c + 1);
            }
            rows[n][c] = v;
            p = end + strspn(end, " \t,;:!\r");
        }
        if (*p && *p != '#') {
            free(text);
            return nb_error_set(NB_ERR_DATA, "'%s' line %d: more than 5 columns (X Y Z weight lambda)", path, lineno);
        }
        n++;
    }
    free(text);
    if (n == 0) return nb_error_set(NB_ERR_DATA, "'%s': no sources in the file", path);
    *nrows = n;
    return NB_OK;
}

/* ---- cell --------------------------------------------------------------- */

static double vmag(const double v[3]) { return nb_norm(v); }

static void vscale(const double v[3], double out[3], double s)
{
    out[0] = s * v[0];
    out[1] = s * v[1];
    out[2] = s * v[2];
}

/* force |v| = mag (reference's vector_rescale) */
static void vrescale(const double v[3], double out[3], double mag)
{
    double oldmag = vmag(v);
    if (oldmag <= 0.0) oldmag = 1.0;
    out[0] = mag / oldmag * v[0];
    out[1] = mag / oldmag * v[1];
    out[2] = mag / oldmag * v[2];
}

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
    if (oddball(sin_as, cos_as, sin_bs, cos_bs, sin_gs, cos_gs))
        nb_warn("oddball reciprocal cell angles: sin/cos(alpha*) %.17g %.17g, (beta*) %.17g %.17g, "
                "(gamma*) %.17g %.17g",
                sin_as, cos_as, sin_bs, cos_bs, sin_gs, cos_gs);
    clamp_trig(&sin_as, &cos_as);
    clamp_trig(&sin_bs, &cos_bs);
    clamp_trig(&sin_gs, &cos_gs);
    set3(a_star, as, 0.0, 0.0);
    set3(b_star, bs * cos_gs, bs * sin_gs, 0.0);
    set3(c_star, cs * cos_bs, cs * (cos_as - cos_bs * cos_gs) / sin_gs, cs * V_cell / (a * b * c * sin_gs));
    return V_cell;
}

static nb_status read_matrix(const char *path, double lambda0, double a_star[3], double b_star[3],
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

/* Sampling auto-selection (docs/physics.md 4): count n, range R, step d;
 * "unset" is negative.  `count_only_range` is the range used when only the
 * count is given; `thickness` selects the thickness variant (d = R/2). */
static void auto_steps(int *n, double *R, double *d, double count_only_range, int thickness)
{
    if (*n <= 0) {
        if (*R < 0.0) {
            if (*d <= 0.0) {
                *n = 1, *R = 0.0, *d = 0.0;
            } else {
                *R = *d;
                *n = 2;
            }
        } else {
            if (*d <= 0.0) {
                *n = 2;
                *d = thickness ? *R / *n : *R;
            } else {
                *n = (int)ceil(*R / *d);
            }
        }
    } else {
        if (*R < 0.0) {
            if (*d <= 0.0) {
                *R = count_only_range;
                *d = *R / *n;
            } else {
                *R = *d;
                *n = 2;
            }
        } else {
            if (*d <= 0.0) {
                if (*n <= 1) *n = 2;
                *d = *R / (*n - 1);
            }
        }
    }
}

static const char *convention_name(int c)
{
    switch (c) {
    case NB_ADXV: return "adxv";
    case NB_MOSFLM: return "mosflm";
    case NB_XDS: return "xds";
    case NB_DIALS: return "dials";
    case NB_DENZO: return "denzo";
    default: return "custom";
    }
}

/* ---- resolution: one step per stage of the reference's order ------------ */

/* What the steps of resolve() share.  `w` is the working copy of the request:
 * the reference updates its variables in place, and later steps see what
 * earlier ones made of them.  The rest are the values a step derives for a
 * later one or for the plan. */
typedef struct resolve_state {
    nb_request w;
    nb_strbuf *log;
    int pivot_asked;            /* the pivot came from the user, not from a convention flag */
    double Fclose, Sclose, Fbeam, Sbeam;
    double vert[3];             /* beam x polar: the axis of horizontal divergence */
    double pix0[3], ORGX, ORGY, dials_origin[3];
    double cell[6];             /* the user's cell, its missing values filled in */
    double V_cell, V_star;      /* Angstrom^3, and V_star as computed (1/V_cell may round differently) */
    double a[3], b[3], c[3], a_star[3], b_star[3], c_star[3];
    double misset[3];
    int misset_mode;
    int64_t misset_seed, mosaic_seed; /* the generators' running seeds */
    int divsteps, nsources;
} resolve_state;

#define LOG(...) nb_strbuf_printf(s->log, __VA_ARGS__)

/* 5: the detector's size in pixels, checked against the mask */
static nb_status resolve_detector_size(resolve_state *s, nb_plan *plan)
{
    nb_request *w = &s->w;
    nb_status st;
    if (w->pixel_size <= 0 || !isfinite(w->pixel_size))
        return nb_error_set(NB_ERR_USAGE, "pixel size must be positive (got %g mm)", w->pixel_size * 1000);
    if (w->fpixels < 0 || w->spixels < 0)
        return nb_error_set(NB_ERR_USAGE, "detector pixel counts must be positive");
    if (w->fpixels) w->detsize_f = w->pixel_size * w->fpixels;
    if (w->spixels) w->detsize_s = w->pixel_size * w->spixels;
    if (!(w->detsize_f / w->pixel_size < 2e9) || !(w->detsize_s / w->pixel_size < 2e9))
        return nb_error_set(NB_ERR_USAGE, "detector of %g x %g mm with %g mm pixels is too large",
                            w->detsize_f * 1000, w->detsize_s * 1000, w->pixel_size * 1000);
    w->fpixels = (int)ceil(w->detsize_f / w->pixel_size - 0.5);
    w->spixels = (int)ceil(w->detsize_s / w->pixel_size - 0.5);
    plan->fpixels = w->fpixels;
    plan->spixels = w->spixels;
    if ((st = nb_plan_check_size(plan))) return st;
    if (w->mask && (w->mask_w != w->fpixels || w->mask_h != w->spixels))
        return nb_error_set(NB_ERR_USAGE, "mask '%s' is %d x %d pixels but the detector is %d x %d", w->maskfile,
                            w->mask_w, w->mask_h, w->fpixels, w->spixels);
    return NB_OK;
}

/* 5: fluence from flux, and a sample no larger than the beam */
static void resolve_fluence(resolve_state *s)
{
    nb_request *w = &s->w;
    if (w->flux != 0.0 && w->exposure > 0.0 && w->beamsize >= 0)
        w->fluence = w->flux * w->exposure / w->beamsize / w->beamsize;
    if (w->beamsize >= 0) {
        if (w->beamsize < w->sample_y) {
            nb_warn("clipping sample (%g m high) with beam (%g m)", w->sample_y, w->beamsize);
            w->sample_y = w->beamsize;
        }
        if (w->beamsize < w->sample_z) {
            nb_warn("clipping sample (%g m wide) with beam (%g m)", w->sample_z, w->beamsize);
            w->sample_z = w->beamsize;
        }
    }
    if (w->exposure > 0.0) w->flux = w->fluence / w->exposure * w->beamsize * w->beamsize;
}

/* 5: the beam-centre and ROI defaults, before any convention */
static void resolve_beam_center_defaults(resolve_state *s)
{
    nb_request *w = &s->w;
    s->Fclose = s->Sclose = NAN;
    if (!isnan(w->ORGX)) s->Fclose = (w->ORGX - 0.5) * w->pixel_size;
    if (!isnan(w->ORGY)) s->Sclose = (w->ORGY - 0.5) * w->pixel_size;
    if (isnan(s->Fclose)) s->Fclose = w->detsize_f / 2.0;
    if (isnan(s->Sclose)) s->Sclose = w->detsize_s / 2.0;
    if (isnan(w->Xclose)) w->Xclose = s->Fclose;
    if (isnan(w->Yclose)) w->Yclose = s->Sclose;
    s->Fbeam = s->Fclose;
    s->Sbeam = s->Sclose;
    if (w->roi_xmin < 0) w->roi_xmin = 0;
    if (w->roi_xmax < 0) w->roi_xmax = w->fpixels;
    if (w->roi_ymin < 0) w->roi_ymin = 0;
    if (w->roi_ymax < 0) w->roi_ymax = w->spixels;
}

/* The direct-beam spot an -img/-mask header stated outright (Fbeam, Sbeam
 * from the outer corner of the first pixel) as this convention's Xbeam,
 * Ybeam, the inverse of its mapping below, where no flag set them.  XDS and
 * DIALS place the detector by ORGX/ORGY (the header's XDS_ORGX/ORGY), their
 * Xbeam, Ybeam are only reported. */
static void header_beam_as_convention(nb_request *w)
{
    if (isnan(w->header_Fbeam) || isnan(w->header_Sbeam)) return;
    double x, y, half = w->convention == NB_MOSFLM ? 0.5 * w->pixel_size : 0.0;
    switch (w->convention) {
    case NB_ADXV: x = w->header_Fbeam, y = w->detsize_s - w->header_Sbeam; break;
    case NB_MOSFLM:
    case NB_DENZO: x = w->header_Sbeam - half, y = w->header_Fbeam - half; break;
    default: x = w->header_Fbeam, y = w->header_Sbeam; break;
    }
    if (isnan(w->Xbeam)) w->Xbeam = x;
    if (isnan(w->Ybeam)) w->Ybeam = y;
}

/* 7: the convention block: its vectors and beam centre, then the pivot it forces */
static void resolve_convention(resolve_state *s)
{
    nb_request *w = &s->w;
    header_beam_as_convention(w);
    switch (w->convention) {
    case NB_ADXV:
        if (isnan(w->Xbeam)) w->Xbeam = (w->detsize_f + w->pixel_size) / 2.0;
        if (isnan(w->Ybeam)) w->Ybeam = (w->detsize_s - w->pixel_size) / 2.0;
        set3(w->beam, 0, 0, 1), set3(w->fdet, 1, 0, 0), set3(w->sdet, 0, -1, 0), set3(w->odet, 0, 0, 1);
        set3(w->twotheta_axis, -1, 0, 0), set3(w->polar, 1, 0, 0), set3(w->spindle, 1, 0, 0);
        s->Fbeam = w->Xbeam;
        s->Sbeam = w->detsize_s - w->Ybeam;
        break;
    case NB_MOSFLM:
    case NB_DENZO:
        if (isnan(w->Xbeam)) w->Xbeam = (w->detsize_s + w->pixel_size) / 2.0;
        if (isnan(w->Ybeam)) w->Ybeam = (w->detsize_f + w->pixel_size) / 2.0;
        set3(w->beam, 1, 0, 0), set3(w->odet, 1, 0, 0), set3(w->fdet, 0, 0, 1), set3(w->sdet, 0, -1, 0);
        set3(w->twotheta_axis, 0, 0, -1), set3(w->polar, 0, 0, 1), set3(w->spindle, 0, 0, 1);
        /* MOSFLM's first pixel centre sits half a pixel in; DENZO's does not */
        s->Fbeam = w->Ybeam + (w->convention == NB_MOSFLM ? 0.5 : 0.0) * w->pixel_size;
        s->Sbeam = w->Xbeam + (w->convention == NB_MOSFLM ? 0.5 : 0.0) * w->pixel_size;
        break;
    case NB_XDS:
    case NB_DIALS:
        if (isnan(w->Xbeam)) w->Xbeam = w->Xclose;
        if (isnan(w->Ybeam)) w->Ybeam = w->Yclose;
        set3(w->beam, 0, 0, 1), set3(w->fdet, 1, 0, 0), set3(w->sdet, 0, 1, 0), set3(w->odet, 0, 0, 1);
        if (w->convention == NB_XDS)
            set3(w->twotheta_axis, 1, 0, 0), set3(w->polar, 1, 0, 0), set3(w->spindle, 1, 0, 0);
        else
            set3(w->twotheta_axis, 0, 1, 0), set3(w->polar, 0, 1, 0), set3(w->spindle, 0, 1, 0);
        s->Fbeam = w->Xbeam;
        s->Sbeam = w->Ybeam;
        break;
    default: /* CUSTOM keeps the vectors and the parse-time pivot */
        if (isnan(w->Xbeam)) w->Xbeam = w->Xclose;
        if (isnan(w->Ybeam)) w->Ybeam = w->Yclose;
        s->Fbeam = w->Xbeam;
        s->Sbeam = w->Ybeam;
        s->Fclose = w->Xbeam;
        s->Sclose = w->Ybeam;
        break;
    }
    int forced_pivot = w->pivot;
    if (w->convention == NB_ADXV || w->convention == NB_MOSFLM || w->convention == NB_DENZO)
        forced_pivot = NB_PIVOT_BEAM;
    if (w->convention == NB_XDS || w->convention == NB_DIALS) forced_pivot = NB_PIVOT_SAMPLE;
    if (s->pivot_asked && forced_pivot != w->pivot)
        nb_warn("the %s convention pivots the detector about the %s, whatever -pivot, -distance or beam-centre "
                "options asked (as in the reference)",
                convention_name(w->convention), forced_pivot == NB_PIVOT_BEAM ? "direct-beam spot" : "sample");
    w->pivot = forced_pivot;
}

/* 6: unit vectors, and the axis of horizontal divergence */
static void resolve_unit_vectors(resolve_state *s)
{
    nb_request *w = &s->w;
    nb_unitize(w->beam, w->beam);
    nb_unitize(w->fdet, w->fdet);
    nb_unitize(w->sdet, w->sdet);
    if (nb_unitize(w->odet, w->odet) != 1.0) {
        nb_warn("auto-generating odet_vector");
        nb_cross(w->fdet, w->sdet, w->odet);
        nb_unitize(w->odet, w->odet);
    }
    nb_unitize(w->polar, w->polar);
    nb_unitize(w->spindle, w->spindle);
    nb_cross(w->beam, w->polar, s->vert);
    nb_unitize(s->vert, s->vert);
}

/* 8: phi steps from any two of -osc, -phistep and -phisteps */
static void resolve_phi_steps(nb_request *w)
{
    if (w->phisteps < 0) {
        if (w->osc < 0.0) {
            if (w->phistep <= 0.0) {
                w->phisteps = 1, w->osc = 0.0, w->phistep = 0.0;
            } else {
                w->osc = w->phistep;
                w->phisteps = 2;
            }
        } else {
            if (w->phistep <= 0.0) {
                w->phisteps = 2;
                w->phistep = w->osc / 2.0;
            } else {
                w->phisteps = (int)ceil(w->osc / w->phistep);
            }
        }
    } else {
        if (w->phisteps == 0) w->phisteps = 1;
        if (w->osc < 0.0) {
            if (w->phistep <= 0.0) {
                w->osc = 1.0 / RTD;
                w->phistep = w->osc / w->phisteps;
            } else {
                w->osc = w->phistep;
                w->phisteps = 2;
            }
        } else if (w->phistep < 0.0) {
            w->phistep = w->osc / w->phisteps;
        }
    }
}

/* 8: the number of mosaic domains from the spread, as the reference corrects it */
static void resolve_mosaic_count(nb_request *w)
{
    if (w->mosaic_domains <= 0) {
        if (w->mosaic_spread < 0.0) {
            w->mosaic_domains = 1;
            w->mosaic_spread = 0.0;
        } else if (w->mosaic_spread == 0.0) {
            w->mosaic_domains = 1;
        } else {
            nb_warn("finite mosaicity with only one domain! upping to 10 mosaic domains");
            w->mosaic_domains = 10;
        }
    } else {
        if (w->mosaic_spread < 0.0) {
            nb_warn("no mosaic spread specified.  setting mosaic_domains = 1");
            w->mosaic_spread = 0.0;
            w->mosaic_domains = 1;
        } else if (w->mosaic_spread == 0.0) {
            nb_warn("zero mosaic spread specified.  setting mosaic_domains = 1");
            w->mosaic_domains = 1;
        }
    }
}

/* 8: sampling auto-selection: phi, divergence, dispersion, sensor layers, mosaic domains */
static void resolve_sampling(nb_request *w)
{
    resolve_phi_steps(w);
    auto_steps(&w->hdivsteps, &w->hdivrange, &w->hdivstep, 1.0, 0);
    auto_steps(&w->vdivsteps, &w->vdivrange, &w->vdivstep, 1.0, 0);
    auto_steps(&w->dispsteps, &w->dispersion, &w->dispstep, 1.0, 0);
    auto_steps(&w->detector_thicksteps, &w->detector_thick, &w->detector_thickstep, 0.5e-6, 1);
    if (w->detector_thick > 0.0 && w->detector_mu < 0.0) {
        w->detector_mu = 1.0 / w->detector_thick;
        nb_warn("setting detector attenuation coefficient to %g /m (1/thickness)", w->detector_mu);
    }
    resolve_mosaic_count(w);
    if (w->hdivrange <= 0.0 || w->hdivstep <= 0.0 || w->hdivsteps <= 0)
        w->hdivsteps = 1, w->hdivrange = 0.0, w->hdivstep = 0.0;
    if (w->vdivrange <= 0.0 || w->vdivstep <= 0.0 || w->vdivsteps <= 0)
        w->vdivsteps = 1, w->vdivrange = 0.0, w->vdivstep = 0.0;
    if (w->dispersion <= 0.0 || w->dispstep <= 0.0 || w->dispsteps <= 0)
        w->dispsteps = 1, w->dispersion = 0.0, w->dispstep = 0.0;
    if (w->detector_thick <= 0.0 || w->detector_thickstep <= 0.0 || w->detector_thicksteps <= 0)
        w->detector_thicksteps = 1, w->detector_thick = 0.0, w->detector_thickstep = 0.0;
}

/* 8: a named sensor material's attenuation coefficient, as dxtbx computes it
 * from the material and the beam's wavelength (docs/physics.md 8.3), before
 * the sampling step would make it 1/thickness */
static nb_status resolve_sensor_material(nb_request *w)
{
    if (w->detector_material == NB_MATERIAL_NONE) return NB_OK;
    const char *name = nb_material_name(w->detector_material);
    /* only -detector_abs sets mu before this step (the default is -1) */
    if (w->detector_mu >= 0.0)
        return nb_error_set(NB_ERR_USAGE, "-detector_material and -detector_abs cannot be given together: the "
                                          "material sets the attenuation");
    if (!(w->detector_thick > 0.0))
        return nb_error_set(NB_ERR_USAGE, "-detector_material %s needs the sensor's thickness: give -detector_thick "
                                          "UM (> 0)",
                            name);
    if (nb_material_mu(w->detector_material, w->lambda0, &w->detector_mu))
        return nb_error_prefix(NB_ERR_USAGE, "-detector_material %s", name);
    return NB_OK;
}

/* Stills: the shots' settings make sense together, and nothing turns the
 * spindle (a still has no rotation); the default spike count. */
static nb_status resolve_stills(nb_request *w)
{
    nb_stills *s = &w->stills;
    int any = s->bandwidth > 0 || s->spikes >= 0 || s->N_max > 0 || s->fluence_max > 0;
    if (!s->on) {
        if (any) return nb_error_set(NB_ERR_USAGE, "the -stills_* options need -stills");
        s->spikes = 0;
        return NB_OK;
    }
    if (w->osc > 0 || w->phistep > 0 || w->phisteps > 1)
        return nb_error_set(NB_ERR_USAGE, "-stills: a still has no rotation; -osc, -phistep and -phisteps do not go "
                                          "with it");
    if (s->spikes < 0) s->spikes = s->bandwidth > 0 ? 10 : 0;
    if (s->spikes > 0 && !(s->bandwidth > 0))
        return nb_error_set(NB_ERR_USAGE, "-stills_spikes needs -stills_bandwidth (the envelope's width)");
    return nb_stills_check(s, NB_ERR_USAGE, "-stills");
}

/* the frame count, and limits on work the reference would happily start and never finish */
static nb_status check_sampling_limits(const nb_request *w)
{
    if (w->nframes < 1 || w->nframes > 10000000)
        return nb_error_set(NB_ERR_USAGE, "option -nframes: expected 1 .. 10000000 frames, got %d", w->nframes);
    if (w->nframes > 1 && w->osc <= 0.0 && !w->stills.on)
        return nb_error_set(NB_ERR_USAGE, "option -nframes %d needs an oscillation per frame: give -osc", w->nframes);
    if (w->phisteps > 1000000 || w->mosaic_domains > 1000000 || w->hdivsteps > 100000 || w->vdivsteps > 100000 ||
        w->dispsteps > 100000 || w->detector_thicksteps > 100000 ||
        (double)(w->hdivsteps > 0 ? w->hdivsteps : 1) * (w->vdivsteps > 0 ? w->vdivsteps : 1) *
                (w->dispsteps > 0 ? w->dispsteps : 1) > 1e6)
        return nb_error_set(NB_ERR_USAGE, "absurd sampling: %d phi steps, %d mosaic domains, %dx%d divergence, "
                                          "%d wavelengths, %d layers",
                            w->phisteps, w->mosaic_domains, w->hdivsteps, w->vdivsteps, w->dispsteps,
                            w->detector_thicksteps);
    return NB_OK;
}

/* 9: the detector rotated and placed about its pivot: pix0, the beam and
 * near-point centres it ends with, ORGX/ORGY and the DIALS origin */
static nb_status resolve_detector_position(resolve_state *s)
{
    nb_request *w = &s->w;
    double vector[3], newvector[3];
    double *pix0 = s->pix0;
    LOG("%s convention selected.\n", convention_name(w->convention));
    set3(pix0, 0, 0, 0);
    nb_rotate_xyz(w->odet, vector, w->rotx, w->roty, w->rotz);
    double ratio = nb_dot(w->beam, vector);
    if (ratio == 0.0) ratio = DBL_MIN;
    if (isnan(w->close_distance)) w->close_distance = fabs(ratio * w->distance);
    w->distance = w->close_distance / ratio;
    if (w->pivot == NB_PIVOT_SAMPLE) {
        LOG("pivoting detector around sample\n");
        for (int i = 0; i < 3; i++)
            pix0[i] = -s->Fclose * w->fdet[i] - s->Sclose * w->sdet[i] + w->close_distance * w->odet[i];
        nb_rotate_xyz(pix0, pix0, w->rotx, w->roty, w->rotz);
        nb_rotate_axis(pix0, pix0, w->twotheta_axis, w->twotheta);
    }
    nb_rotate_xyz(w->fdet, w->fdet, w->rotx, w->roty, w->rotz);
    nb_rotate_xyz(w->sdet, w->sdet, w->rotx, w->roty, w->rotz);
    nb_rotate_xyz(w->odet, w->odet, w->rotx, w->roty, w->rotz);
    nb_rotate_axis(w->fdet, w->fdet, w->twotheta_axis, w->twotheta);
    nb_rotate_axis(w->sdet, w->sdet, w->twotheta_axis, w->twotheta);
    nb_rotate_axis(w->odet, w->odet, w->twotheta_axis, w->twotheta);
    if (w->pivot == NB_PIVOT_BEAM) {
        LOG("pivoting detector around direct beam spot\n");
        for (int i = 0; i < 3; i++) pix0[i] = -s->Fbeam * w->fdet[i] - s->Sbeam * w->sdet[i] + w->distance * w->beam[i];
    }
    s->Fclose = -nb_dot(pix0, w->fdet);
    s->Sclose = -nb_dot(pix0, w->sdet);
    w->close_distance = nb_dot(pix0, w->odet);
    for (int i = 0; i < 3; i++) newvector[i] = w->close_distance / ratio * w->beam[i] - pix0[i];
    s->Fbeam = nb_dot(w->fdet, newvector);
    s->Sbeam = nb_dot(w->sdet, newvector);
    w->distance = w->close_distance / ratio;
    s->ORGX = s->Fclose / w->pixel_size + 0.5;
    s->ORGY = s->Sclose / w->pixel_size + 0.5;
    set3(newvector, 0, 0, 1);
    s->dials_origin[0] = 1000.0 * nb_dot(pix0, newvector);
    set3(newvector, 0, 1, 0);
    s->dials_origin[1] = 1000.0 * nb_dot(pix0, newvector);
    set3(newvector, -1, 0, 0);
    s->dials_origin[2] = 1000.0 * nb_dot(pix0, newvector);
    LOG("XDS incident beam: %g %g %g\n", nb_dot(w->beam, w->fdet), nb_dot(w->beam, w->sdet),
        nb_dot(w->beam, w->odet));
    if (!isfinite(w->distance) || !isfinite(pix0[0]) || !isfinite(pix0[1]) || !isfinite(pix0[2]))
        return nb_error_set(NB_ERR_USAGE, "the detector geometry is degenerate (beam parallel to the detector plane?)");
    return NB_OK;
}

/* 10: interpolation choice, on N as parsed */
static void resolve_interpolation(resolve_state *s)
{
    nb_request *w = &s->w;
    if (w->interpolate > 1) {
        if (w->Na <= 2 || w->Nb <= 2 || w->Nc <= 2) {
            LOG("auto-selected tricubic interpolation of structure factors\n");
            w->interpolate = 1;
        } else {
            LOG("auto-selected no interpolation\n");
            w->interpolate = 0;
        }
    }
}

/* 11: the reciprocal vectors from -cell, then from -mat when given */
static nb_status resolve_reciprocal_cell(resolve_state *s)
{
    nb_request *w = &s->w;
    double *cell = s->cell;
    set3(s->a_star, 0, 0, 0), set3(s->b_star, 0, 0, 0), set3(s->c_star, 0, 0, 0);
    memcpy(cell, w->cell, sizeof s->cell);
    s->V_cell = 0;
    if (w->user_cell) {
        if (cell[1] <= 0.0) cell[1] = cell[0];
        if (cell[2] <= 0.0) cell[2] = cell[0];
        for (int i = 3; i < 6; i++)
            if (cell[i] <= 0.0) cell[i] = M_PI / 2;
        s->V_cell = nb_cell_reciprocal(cell, s->a_star, s->b_star, s->c_star);
    }
    if (w->matfile) {
        LOG("reading %s\n", w->matfile);
        return read_matrix(w->matfile, w->lambda0, s->a_star, s->b_star, s->c_star);
    }
    return NB_OK;
}

/* 11: the misset, random (the plan's generator's first draws) or given, applied to the reciprocal vectors */
static void resolve_misset(resolve_state *s, nb_plan *plan)
{
    nb_request *w = &s->w;
    double *misset = s->misset;
    s->misset_mode = w->misset_mode;
    memcpy(misset, w->misset, sizeof s->misset);
    plan->rng = (nb_rng){0};
    nb_rng_init(&plan->rng);
    s->misset_seed = w->misset_seed, s->mosaic_seed = w->mosaic_seed;
    if (s->misset_mode == -1) {
        double umat[9];
        /* the reference passes 90 meaning degrees, but the function takes
         * radians: keep it for identical orientations (docs/physics.md 3.3) */
        nb_mosaic_rotation_umat(&plan->rng, 90.0f, umat, &s->misset_seed);
        nb_umat2misset(umat, misset);
        LOG("random orientation misset angles: %f %f %f deg\n", misset[0] * RTD, misset[1] * RTD, misset[2] * RTD);
        s->misset_mode = 1;
    }
    if (s->misset_mode > 0) {
        nb_rotate_xyz(s->a_star, s->a_star, misset[0], misset[1], misset[2]);
        nb_rotate_xyz(s->b_star, s->b_star, misset[0], misset[1], misset[2]);
        nb_rotate_xyz(s->c_star, s->c_star, misset[0], misset[1], misset[2]);
    }
}

/* 11: real-space vectors from the reciprocal ones (the user's edge lengths
 * kept exact), and the reciprocal ones again from those */
static nb_status resolve_real_cell(resolve_state *s)
{
    double axb_s[3], bxc_s[3], cxa_s[3];
    nb_cross(s->a_star, s->b_star, axb_s);
    nb_cross(s->b_star, s->c_star, bxc_s);
    nb_cross(s->c_star, s->a_star, cxa_s);
    double V_star = nb_dot(s->a_star, bxc_s);
    if (s->w.user_cell) {
        /* keep the user's edge lengths exact */
        vrescale(bxc_s, bxc_s, s->cell[0] / s->V_cell);
        vrescale(cxa_s, cxa_s, s->cell[1] / s->V_cell);
        vrescale(axb_s, axb_s, s->cell[2] / s->V_cell);
        V_star = 1.0 / s->V_cell;
    }
    s->V_star = V_star;
    s->V_cell = 1.0 / V_star;
    if (!isfinite(s->V_cell) || s->V_cell == 0.0)
        return nb_error_set(NB_ERR_DATA, "the unit cell is degenerate (zero or infinite volume)");
    vscale(bxc_s, s->a, s->V_cell);
    vscale(cxa_s, s->b, s->V_cell);
    vscale(axb_s, s->c, s->V_cell);
    double axb[3], bxc[3], cxa[3];
    nb_cross(s->a, s->b, axb);
    nb_cross(s->b, s->c, bxc);
    nb_cross(s->c, s->a, cxa);
    vscale(bxc, s->a_star, V_star);
    vscale(cxa, s->b_star, V_star);
    vscale(axb, s->c_star, V_star);
    return NB_OK;
}

/* 11: the cell's lengths and angles, checked, logged and into the plan; then
 * the real-space vectors in meters */
static void report_cell(resolve_state *s, nb_plan *plan)
{
    const double *a = s->a, *b = s->b, *c = s->c, *a_star = s->a_star, *b_star = s->b_star, *c_star = s->c_star;
    double V_cell = s->V_cell, V_star = s->V_star;
    double am = vmag(a), bm = vmag(b), cm = vmag(c);
    double asm_ = vmag(a_star), bsm = vmag(b_star), csm = vmag(c_star);
    double sin_a = asm_ * V_cell / bm / cm, sin_b = bsm * V_cell / am / cm, sin_g = csm * V_cell / am / bm;
    double cos_a = nb_dot(b, c) / bm / cm, cos_b = nb_dot(a, c) / am / cm, cos_g = nb_dot(a, b) / am / bm;
    if (oddball(sin_a, cos_a, sin_b, cos_b, sin_g, cos_g))
        nb_warn("oddball cell angles: sin/cos(alpha) %.17g %.17g, (beta) %.17g %.17g, (gamma) %.17g %.17g", sin_a,
                cos_a, sin_b, cos_b, sin_g, cos_g);
    clamp_trig(&sin_a, &cos_a);
    clamp_trig(&sin_b, &cos_b);
    clamp_trig(&sin_g, &cos_g);
    double alpha = atan2(sin_a, cos_a), beta = atan2(sin_b, cos_b), gamma = atan2(sin_g, cos_g);
    double sin_as = am * V_star / bsm / csm, sin_bs = bm * V_star / asm_ / csm, sin_gs = cm * V_star / asm_ / bsm;
    double cos_as = nb_dot(b_star, c_star) / bsm / csm, cos_bs = nb_dot(a_star, c_star) / asm_ / csm,
           cos_gs = nb_dot(a_star, b_star) / asm_ / bsm;
    if (oddball(sin_as, cos_as, sin_bs, cos_bs, sin_gs, cos_gs))
        nb_warn("oddball reciprocal cell angles: sin/cos(alpha*) %.17g %.17g, (beta*) %.17g %.17g, "
                "(gamma*) %.17g %.17g",
                sin_as, cos_as, sin_bs, cos_bs, sin_gs, cos_gs);
    clamp_trig(&sin_as, &cos_as);
    clamp_trig(&sin_bs, &cos_bs);
    clamp_trig(&sin_gs, &cos_gs);
    LOG("Unit Cell: %g %g %g %g %g %g\n", am, bm, cm, alpha * RTD, beta * RTD, gamma * RTD);
    LOG("Recp Cell: %g %g %g %g %g %g\n", asm_, bsm, csm, atan2(sin_as, cos_as) * RTD, atan2(sin_bs, cos_bs) * RTD,
        atan2(sin_gs, cos_gs) * RTD);
    LOG("volume = %g A^3\n", V_cell);
    LOG("real-space cell vectors (Angstrom):\n");
    LOG("     %-10s  %-10s  %-10s\n", "a", "b", "c");
    LOG("X: %11.8f %11.8f %11.8f\n", a[0], b[0], c[0]);
    LOG("Y: %11.8f %11.8f %11.8f\n", a[1], b[1], c[1]);
    LOG("Z: %11.8f %11.8f %11.8f\n", a[2], b[2], c[2]);
    LOG("reciprocal-space cell vectors (Angstrom^-1):\n");
    LOG("     %-10s  %-10s  %-10s\n", "a_star", "b_star", "c_star");
    LOG("X: %11.8f %11.8f %11.8f\n", a_star[0], b_star[0], c_star[0]);
    LOG("Y: %11.8f %11.8f %11.8f\n", a_star[1], b_star[1], c_star[1]);
    LOG("Z: %11.8f %11.8f %11.8f\n", a_star[2], b_star[2], c_star[2]);
    plan->unit_cell[0] = am, plan->unit_cell[1] = bm, plan->unit_cell[2] = cm;
    plan->unit_cell[3] = alpha * RTD, plan->unit_cell[4] = beta * RTD, plan->unit_cell[5] = gamma * RTD;
    vscale(s->a, s->a, 1e-10);
    vscale(s->b, s->b, 1e-10);
    vscale(s->c, s->c, 1e-10);
}

/* 11: the cell, oriented */
static nb_status resolve_crystal(resolve_state *s, nb_plan *plan)
{
    nb_status st;
    if ((st = resolve_reciprocal_cell(s))) return st;
    resolve_misset(s, plan);
    if ((st = resolve_real_cell(s))) return st;
    report_cell(s, plan);
    return NB_OK;
}

/* 12: crystal size to N, then the oversampling the crystal and pixel ask for */
static nb_status resolve_crystal_size(resolve_state *s)
{
    nb_request *w = &s->w;
    if (w->sample_x > 0) w->Na = ceil(w->sample_x / vmag(s->a));
    if (w->sample_y > 0) w->Nb = ceil(w->sample_y / vmag(s->b));
    if (w->sample_z > 0) w->Nc = ceil(w->sample_z / vmag(s->c));
    if (w->Na <= 1.0) w->Na = 1.0;
    if (w->Nb <= 1.0) w->Nb = 1.0;
    if (w->Nc <= 1.0) w->Nc = 1.0;
    if (w->Na > 1e6 || w->Nb > 1e6 || w->Nc > 1e6)
        return nb_error_set(NB_ERR_USAGE, "absurd crystal: %g x %g x %g unit cells", w->Na, w->Nb, w->Nc);
    double xa = vmag(s->a) * w->Na, xb = vmag(s->b) * w->Nb, xc = vmag(s->c) * w->Nc;
    LOG("crystal is %g x %g x %g microns\n", xa * 1e6, xb * 1e6, xc * 1e6);
    double xmax = xa;
    if (xmax < xb) xmax = xb;
    if (xmax < xc) xmax = xc;
    double reciprocal_pixel_size = w->lambda0 * w->distance / w->pixel_size;
    double rec = ceil(3.0 * xmax / reciprocal_pixel_size);
    /* NaN (an infinite crystal over an infinite pixel) falls to 1, as <= 0 does */
    int recommended = rec > 1e6 ? 1000000 : rec >= 1.0 ? (int)rec : 1;
    if (w->oversample <= 0) {
        w->oversample = recommended;
        LOG("auto-selected %d-fold oversampling\n", w->oversample);
    }
    if (w->oversample < recommended)
        nb_warn("maximum dimension of sample is %g A but reciprocal pixel size is %g A: intensity may vary "
                "significantly across a pixel! recommend -oversample %d to work around this",
                xmax * 1e10, reciprocal_pixel_size * 1e10, recommended);
    if (w->oversample > 1000)
        return nb_error_set(NB_ERR_USAGE, "oversampling of %d x %d sub-pixels per pixel is absurd (give -oversample)",
                            w->oversample, w->oversample);
    LOG("approximate MW = %g\n", xa * xb * xc * 1.2e6 * NB_AVOGADRO / (w->Na * w->Nb * w->Nc));
    return NB_OK;
}

/* 14: an amorphous table is read and checked, then never used */
static nb_status check_stol_file(const nb_request *w)
{
    if (!w->stolfile) return NB_OK;
    char *text;
    size_t len;
    nb_status st;
    if ((st = nb_read_file(w->stolfile, &text, &len))) return st;
    int any = 0;
    for (size_t i = 0; i < len; i++)
        if (!isspace((unsigned char)text[i])) any = 1;
    free(text);
    if (!any) return nb_error_set(NB_ERR_DATA, "'%s': no data in the file", w->stolfile);
    nb_warn("'%s' is read but not used for the image (as in the reference)", w->stolfile);
    return NB_OK;
}

/* 15: the rows (X Y Z weight lambda) of -sourcefile, missing columns defaulted */
static nb_status source_rows_from_file(resolve_state *s, double (**rows_out)[5])
{
    const nb_request *w = &s->w;
    const int max_rows = 1000000;
    double (*rows)[5] = NULL;
    nb_status st;
    if ((st = nb_calloc((void **)&rows, (size_t)max_rows, sizeof *rows, "source list"))) return st;
    if ((st = read_source_file(w->sourcefile, rows, max_rows, &s->nsources))) {
        free(rows);
        return st;
    }
    for (int i = 0; i < s->nsources; i++) {
        for (int k = 0; k < 3; k++)
            if (isnan(rows[i][k])) rows[i][k] = -10.0 * w->beam[k];
        if (isnan(rows[i][3])) rows[i][3] = 1.0;
        if (isnan(rows[i][4])) rows[i][4] = w->lambda0;
    }
    *rows_out = rows;
    return NB_OK;
}

/* 15: the rows of divergence x dispersion: a first pass counts (and logs)
 * the divergence points kept by the elliptical trim, a second fills them in */
static nb_status source_rows_from_divergence(resolve_state *s, double (**rows_out)[5])
{
    const nb_request *w = &s->w;
    double (*rows)[5] = NULL;
    nb_status st;
    s->divsteps = 0;
    for (int pass = 0; pass < 2; pass++) {
        int count = 0;
        for (int ih = 0; ih < w->hdivsteps; ++ih) {
            for (int iv = 0; iv < w->vdivsteps; ++iv) {
                double hdiv = w->hdivstep * ih - w->hdivrange / 2.0;
                double vdiv = w->vdivstep * iv - w->vdivrange / 2.0;
                /* elliptical trim; a zero range gives NaN and keeps the point */
                double test = (hdiv * hdiv - w->hdivstep * w->hdivstep / 4.0 * (1 - w->hdivsteps % 2)) /
                              w->hdivrange / w->hdivrange;
                test += (vdiv * vdiv - w->vdivstep * w->vdivstep / 4.0 * (1 - w->vdivsteps % 2)) / w->vdivrange /
                        w->vdivrange;
                if (w->round_div && test * 4.0 > 1.1) continue;
                if (pass == 0) {
                    ++s->divsteps;
                    LOG("divergence deviation: %g %g\n", hdiv, vdiv);
                    continue;
                }
                double v[3], nv[3];
                for (int k = 0; k < 3; k++) v[k] = -10.0 * w->beam[k];
                nb_rotate_axis(v, nv, w->polar, vdiv);
                nb_rotate_axis(nv, v, s->vert, hdiv);
                for (int id = 0; id < w->dispsteps; ++id) {
                    double lambda = w->lambda0 * (1.0 + w->dispstep * id - w->dispersion / 2.0);
                    rows[count][0] = v[0];
                    rows[count][1] = v[1];
                    rows[count][2] = v[2];
                    rows[count][3] = 1.0 / s->nsources;
                    rows[count][4] = lambda;
                    count++;
                }
            }
        }
        if (pass == 0) {
            for (int id = 0; id < w->dispsteps; ++id)
                LOG("lambda%d = %.15g\n", id, w->lambda0 * (1.0 + w->dispstep * id - w->dispersion / 2.0));
            s->nsources = s->divsteps * w->dispsteps;
            if (s->nsources <= 0) return nb_error_set(NB_ERR_USAGE, "the divergence settings leave no source");
            if ((st = nb_calloc((void **)&rows, (size_t)s->nsources, sizeof *rows, "source list"))) return st;
        }
    }
    *rows_out = rows;
    return NB_OK;
}

/* 15: the sources, from a file or from divergence and dispersion, into the plan */
static nb_status resolve_sources(resolve_state *s, nb_plan *plan)
{
    double (*rows)[5] = NULL;
    nb_status st;
    s->divsteps = -1, s->nsources = 0;
    st = s->w.sourcefile ? source_rows_from_file(s, &rows) : source_rows_from_divergence(s, &rows);
    if (st) return st;
    int nsources = s->nsources;
    LOG("  created a total of %d sources:\n", nsources);
    if ((st = nb_calloc((void **)&plan->sources, (size_t)nsources, sizeof *plan->sources, "sources"))) {
        free(rows);
        return st;
    }
    for (int i = 0; i < nsources; i++) {
        double v[3] = {rows[i][0], rows[i][1], rows[i][2]};
        nb_unitize(v, plan->sources[i].dir);
        plan->sources[i].weight = rows[i][3];
        plan->sources[i].lambda = rows[i][4];
        LOG("%g %g %g   %g %g\n", rows[i][0], rows[i][1], rows[i][2], rows[i][3], rows[i][4]);
        if (!(rows[i][4] > 0) || nb_norm(v) == 0.0) {
            free(rows);
            return nb_error_set(NB_ERR_DATA, "source %d has a zero direction or a non-positive wavelength", i + 1);
        }
    }
    free(rows);
    plan->nsources = nsources;
    return NB_OK;
}

/* 16: mosaic domains, drawn after the random misset from the same generator
 * (domain 0 is forced to the identity, after its draw) */
static nb_status resolve_mosaic(resolve_state *s, nb_plan *plan)
{
    const nb_request *w = &s->w;
    nb_status st;
    if ((st = nb_calloc((void **)&plan->mosaic_umats, (size_t)w->mosaic_domains, 9 * sizeof(double),
                        "mosaic matrices")))
        return st;
    for (int d = 0; d < w->mosaic_domains; ++d) {
        double *U = plan->mosaic_umats + 9 * d;
        nb_mosaic_rotation_umat(&plan->rng, (float)w->mosaic_spread, U, &s->mosaic_seed);
        if (d == 0) {
            memset(U, 0, 9 * sizeof(double));
            U[0] = U[4] = U[8] = 1.0;
        }
    }
    LOG("  created a total of %d mosaic domains\n", w->mosaic_domains);
    return NB_OK;
}

/* -v: the sensor's material and its mu, when one was named */
static void log_sensor_material(const resolve_state *s)
{
    const nb_request *w = &s->w;
    if (w->detector_material != NB_MATERIAL_NONE)
        LOG("  sensor material is %s: mu= %g /m at %g m, as dxtbx computes it\n",
            nb_material_name(w->detector_material), w->detector_mu, w->lambda0);
}

/* -v with -panels: each panel's geometry in the plan's frame, what the
 * summary's detector lines say of the flags' one panel */
static void log_panels(const resolve_state *s, const nb_plan *plan)
{
    for (int i = 0; i < nb_plan_npanels(plan); i++) {
        nb_plan v;
        nb_plan_panel_view(plan, i, &v);
        LOG("  panel %d: %dx%d pixels of %g m\n", i, v.fpixels, v.spixels, v.pixel_size);
        LOG("    fdet= %g %g %g\n", v.fdet[0], v.fdet[1], v.fdet[2]);
        LOG("    sdet= %g %g %g\n", v.sdet[0], v.sdet[1], v.sdet[2]);
        LOG("    odet= %g %g %g\n", v.odet[0], v.odet[1], v.odet[2]);
        LOG("    pix0_vector= %.10g %.10g %.10g\n", v.pix0[0], v.pix0[1], v.pix0[2]);
        /* odet points away from the sample: the beam meets the plane only going that way */
        if (nb_dot(v.beam, v.odet) > 1e-12) {
            double f = v.Fbeam / v.pixel_size, sl = v.Sbeam / v.pixel_size;
            int on = f >= 0 && f < v.fpixels && sl >= 0 && sl < v.spixels;
            LOG("    distance=%g close_distance=%g (mm)\n", v.distance * 1000, v.close_distance * 1000);
            LOG("    Fbeam=%g Sbeam=%g (pixel %g %g, %s the panel)\n", v.Fbeam, v.Sbeam, f, sl, on ? "on" : "off");
        } else {
            LOG("    close_distance=%g (mm); the beam does not meet its plane\n", v.close_distance * 1000);
        }
        LOG("    Fclose=%g Sclose=%g ORGX=%g ORGY=%g\n", v.Fclose, v.Sclose, v.ORGX, v.ORGY);
        LOG("    sensor is %g m thick in %d layers with mu= %g\n", v.detector_thick, v.detector_thicksteps,
            v.detector_mu);
        LOG("    dials origin= %g %g %g\n", v.dials_origin[0], v.dials_origin[1], v.dials_origin[2]);
    }
}

/* the reference's summary block, then the extras it does not print; with
 * -panels the flags' one-panel detector lines give way to the panels' */
static void log_summary(const resolve_state *s, const nb_plan *plan)
{
    const nb_request *w = &s->w;
    static const char *shape_words[] = {"parallelpiped", "ellipsoidal", "gaussian", "tophat-spot"};
    double vector[3];
    LOG("  %s xtal: %.0fx%.0fx%.0f cells\n", shape_words[w->shape], w->Na, w->Nb, w->Nc);
    LOG("  wave=%g meters +/- %g%% in %d steps\n", w->lambda0, w->dispersion * 100, w->dispsteps);
    if (w->nopolar) LOG("  polarization effect disabled\n");
    else LOG("  Kahn polarization factor: %f\n", w->polarization);
    if (w->curved_detector) LOG("  curved detector: all pixels same distance from origin\n");
    if (w->point_pixel) LOG("  pixel obliquity effect disabled\n");
    LOG("  incident fluence: %g photons/m^2\n", w->fluence);
    if (w->panels) {
        LOG("  detector: %d panel%s from -panels\n", nb_plan_npanels(plan), nb_plan_npanels(plan) > 1 ? "s" : "");
        log_sensor_material(s);
        log_panels(s, plan);
    } else {
        LOG("  distance=%g detsize=%gx%g  pixel=%g meters (%dx%d pixels)\n", w->distance, w->detsize_f,
            w->detsize_s, w->pixel_size, w->fpixels, w->spixels);
        LOG("  sensor is %g m thick in %d layers with mu= %g\n", w->detector_thick, w->detector_thicksteps,
            w->detector_mu);
        log_sensor_material(s);
        LOG("  Xbeam=%g Ybeam=%g\n", w->Xbeam, w->Ybeam);
        LOG("  Fbeam=%g Sbeam=%g\n", s->Fbeam, s->Sbeam);
        LOG("  Xclose=%g Yclose=%g\n", w->Xclose, w->Yclose);
        LOG("  Fclose=%g Sclose=%g\n", s->Fclose, s->Sclose);
        LOG("  DIRECTION_OF_DETECTOR_X-AXIS= %g %g %g\n", w->fdet[0], w->fdet[1], w->fdet[2]);
        LOG("  DIRECTION_OF_DETECTOR_Y-AXIS= %g %g %g\n", w->sdet[0], w->sdet[1], w->sdet[2]);
        LOG("  DIRECTION_OF_DETECTOR_Z-AXIS= %g %g %g\n", w->odet[0], w->odet[1], w->odet[2]);
    }
    LOG("  INCIDENT_BEAM_DIRECTION= %g %g %g\n", w->beam[0], w->beam[1], w->beam[2]);
    LOG("  spindle ROTATION_AXIS= %g %g %g\n", w->spindle[0], w->spindle[1], w->spindle[2]);
    nb_cross(w->beam, w->polar, vector);
    LOG("  POLARIZATION_PLANE_NORMAL= %g %g %g\n", vector[0], vector[1], vector[2]);
    if (!w->panels) {
        LOG("  dials origin= %g %g %g\n", s->dials_origin[0], s->dials_origin[1], s->dials_origin[2]);
        LOG("  roi: %d < x < %d && %d < y < %d\n", w->roi_xmin, w->roi_xmax, w->roi_ymin, w->roi_ymax);
    }
    LOG("  hdivrange=%g hdivstep=%g  radians\n", w->hdivrange, w->hdivstep);
    LOG("  vdivrange=%g vdivstep=%g  radians\n", w->vdivrange, w->vdivstep);
    LOG("  %d divergence steps\n", s->divsteps);
    LOG("  %d sources\n", s->nsources);
    LOG("  %d mosaic domains over mosaic spread of %g degrees\n", w->mosaic_domains, w->mosaic_spread * RTD);
    LOG("  %d phi steps from %g to %g degrees\n", w->phisteps, w->phi0 * RTD, (w->phi0 + w->osc) * RTD);
    if (w->stills.on)
        LOG("  %d stills: random orientations from misset seed %lld\n", w->nframes, (long long)-w->misset_seed);
    else if (w->nframes > 1)
        LOG("  %d frames: a rotation series from %g to %g degrees\n", w->nframes, w->phi0 * RTD,
            (w->phi0 + w->nframes * w->osc) * RTD);
    LOG("  %dx%d pixel oversample steps%s%s%s\n", w->oversample, w->oversample, w->oversample_thick ? " +thick" : "",
        w->oversample_polar ? " +polar" : "", w->oversample_omega ? " +omega" : "");
    if (w->mask) LOG("  skipping zero-flagged pixels in %s\n", w->maskfile);
    if (w->calculate_noise) {
        LOG("\n  noise image paramters:\n");
        LOG("  seed: %lld\n", (long long)w->seed);
        LOG("  water droplet size: %g m\n", w->water_size);
    }
    if (w->panels) return;
    LOG("  pix0_vector= %.10g %.10g %.10g\n", s->pix0[0], s->pix0[1], s->pix0[2]);
    LOG("  ORGX=%g ORGY=%g\n", s->ORGX, s->ORGY);
    LOG("  distance=%g close_distance=%g (mm)\n", w->distance * 1000, w->close_distance * 1000);
}

/* into the plan: the detector, its sensor and sampling, and the mask */
static nb_status plan_detector(const resolve_state *s, nb_plan *plan)
{
    const nb_request *w = &s->w;
    nb_status st;
    plan->pixel_size = w->pixel_size;
    plan->detsize_f = w->detsize_f;
    plan->detsize_s = w->detsize_s;
    plan->distance = w->distance;
    plan->close_distance = w->close_distance;
    memcpy(plan->fdet, w->fdet, sizeof plan->fdet);
    memcpy(plan->sdet, w->sdet, sizeof plan->sdet);
    memcpy(plan->odet, w->odet, sizeof plan->odet);
    memcpy(plan->pix0, s->pix0, sizeof plan->pix0);
    memcpy(plan->beam, w->beam, sizeof plan->beam);
    memcpy(plan->polar_vector, w->polar, sizeof plan->polar_vector);
    memcpy(plan->spindle, w->spindle, sizeof plan->spindle);
    memcpy(plan->twotheta_axis, w->twotheta_axis, sizeof plan->twotheta_axis);
    plan->Xbeam = w->Xbeam, plan->Ybeam = w->Ybeam, plan->Fbeam = s->Fbeam, plan->Sbeam = s->Sbeam;
    plan->Xclose = w->Xclose, plan->Yclose = w->Yclose, plan->Fclose = s->Fclose, plan->Sclose = s->Sclose;
    plan->ORGX = s->ORGX, plan->ORGY = s->ORGY;
    memcpy(plan->dials_origin, s->dials_origin, sizeof plan->dials_origin);
    snprintf(plan->convention, sizeof plan->convention, "%s", convention_name(w->convention));
    snprintf(plan->pivot, sizeof plan->pivot, "%s", w->pivot == NB_PIVOT_BEAM ? "beam" : "sample");
    plan->rotx = w->rotx, plan->roty = w->roty, plan->rotz = w->rotz, plan->twotheta = w->twotheta;
    plan->curved_detector = w->curved_detector;
    plan->point_pixel = w->point_pixel;
    plan->detector_thick = w->detector_thick;
    plan->detector_thickstep = w->detector_thickstep;
    plan->detector_thicksteps = w->detector_thicksteps;
    plan->detector_mu = w->detector_mu;
    plan->detector_material = w->detector_material;
    plan->roi_xmin = w->roi_xmin, plan->roi_xmax = w->roi_xmax;
    plan->roi_ymin = w->roi_ymin, plan->roi_ymax = w->roi_ymax;
    plan->oversample = w->oversample;
    plan->oversample_thick = w->oversample_thick;
    plan->oversample_polar = w->oversample_polar;
    plan->oversample_omega = w->oversample_omega;
    if (w->mask) {
        size_t n = (size_t)w->fpixels * (size_t)w->spixels;
        if ((st = nb_calloc((void **)&plan->mask, n, 1, "mask"))) return st;
        memcpy(plan->mask, w->mask, n);
    }
    return NB_OK;
}

/* into the plan: the beam, the crystal and the rotation */
static void plan_beam_and_crystal(const resolve_state *s, nb_plan *plan)
{
    const nb_request *w = &s->w;
    plan->lambda0 = w->lambda0;
    plan->dispersion = w->dispersion, plan->dispstep = w->dispstep, plan->dispsteps = w->dispsteps;
    plan->hdivrange = w->hdivrange, plan->hdivstep = w->hdivstep, plan->hdivsteps = w->hdivsteps;
    plan->vdivrange = w->vdivrange, plan->vdivstep = w->vdivstep, plan->vdivsteps = w->vdivsteps;
    plan->divsteps = s->divsteps;
    plan->round_div = w->round_div;
    plan->kahn_factor = w->polarization;
    plan->nopolar = w->nopolar;
    plan->fluence = w->fluence, plan->flux = w->flux, plan->exposure = w->exposure, plan->beamsize = w->beamsize;
    memcpy(plan->cell_a, s->a, sizeof s->a);
    memcpy(plan->cell_b, s->b, sizeof s->b);
    memcpy(plan->cell_c, s->c, sizeof s->c);
    memcpy(plan->recip_a, s->a_star, sizeof s->a_star);
    memcpy(plan->recip_b, s->b_star, sizeof s->b_star);
    memcpy(plan->recip_c, s->c_star, sizeof s->c_star);
    memcpy(plan->misset, s->misset_mode > 0 ? s->misset : (double[3]){0, 0, 0}, sizeof plan->misset);
    plan->Na = w->Na, plan->Nb = w->Nb, plan->Nc = w->Nc;
    plan->shape = w->shape;
    plan->fudge = w->fudge;
    plan->mosaic_spread = w->mosaic_spread;
    plan->mosaic_domains = w->mosaic_domains;
    plan->phi0 = w->phi0, plan->phistep = w->phistep, plan->osc = w->osc, plan->phisteps = w->phisteps;
    plan->nframes = w->nframes;
    plan->stills = w->stills;
    plan->water_size = w->water_size;
    plan->dmin = w->dmin;
    plan->interpolate = w->interpolate;
    plan->seed = w->seed;
    plan->seed_drawn = !w->seed_given;
    plan->mosaic_seed = w->mosaic_seed;
    plan->misset_seed = w->misset_seed;
}

/* into the plan: what the later stages are asked to do (files, scales, noise, precision) */
static void plan_requests(const resolve_state *s, nb_plan *plan)
{
    const nb_request *w = &s->w;
    plan->hkl_file = nb_xstrdup(w->hklfile);
    plan->default_F = w->default_F;
    plan->dump_file = nb_xstrdup(w->dumpfile);
    plan->floatfile = nb_xstrdup(w->floatfile);
    plan->intfile = nb_xstrdup(w->intfile);
    plan->noisefile = nb_xstrdup(w->noisefile);
    plan->pgmfile = nb_xstrdup(w->pgmfile);
    if (w->reference_defaults) {
        /* the reference always writes these, under these names */
        if (!plan->dump_file) {
            plan->dump_file = nb_xstrdup("Fdump.bin");
            plan->dump_implicit = 1;
        }
        if (!plan->floatfile) plan->floatfile = nb_xstrdup("floatimage.bin");
        if (!plan->intfile) plan->intfile = nb_xstrdup("intimage.img");
        if (!plan->noisefile) plan->noisefile = nb_xstrdup("noiseimage.img");
        if (!plan->pgmfile) plan->pgmfile = nb_xstrdup("image.pgm");
    }
    plan->intfile_scale = w->intfile_scale;
    plan->pgm_scale = w->pgm_scale;
    plan->adc = w->adc;
    plan->calculate_noise = w->calculate_noise;
    plan->write_pgm = w->write_pgm;
    plan->precision_double = w->precision_double;
    plan->printout = w->printout;
    plan->printout_fpixel = w->printout_fpixel;
    plan->printout_spixel = w->printout_spixel;
    plan->progress = w->progress;
}

/* The steps in the reference's order: each may read what an earlier one
 * resolved, and warnings, log lines and random draws come in that order. */
static nb_status resolve(const nb_request *rq, nb_plan *plan, nb_strbuf *log)
{
    resolve_state state = {.w = *rq, .log = log};
    resolve_state *s = &state;
    nb_request *w = &s->w;
    nb_status st;
    s->pivot_asked = !(rq->pivot & PIVOT_IMPLIED);
    w->pivot &= ~PIVOT_IMPLIED;
    nb_plan_init(plan);

    if ((st = resolve_detector_size(s, plan))) return st;
    resolve_fluence(s);
    resolve_beam_center_defaults(s);
    resolve_convention(s);
    resolve_unit_vectors(s);
    if (!w->matfile && !(w->user_cell && w->cell[0] != 0.0))
        return nb_error_set(NB_ERR_USAGE, "no crystal: give -cell A B C AL BE GA or -mat FILE");
    if ((st = resolve_stills(w))) return st;
    if ((st = resolve_sensor_material(w))) return st;
    resolve_sampling(w);
    if ((st = check_sampling_limits(w))) return st;
    if ((st = resolve_detector_position(s))) return st;
    resolve_interpolation(s);
    if ((st = resolve_crystal(s, plan))) return st;
    if ((st = resolve_crystal_size(s))) return st;
    if ((st = check_stol_file(w))) return st;
    for (int t = 0; t < w->detector_thicksteps; ++t) LOG("thick%d = %g um\n", t, w->detector_thickstep * t * 1e6);
    for (int t = 0; t < w->phisteps; ++t) LOG("phi%d = %g\n", t, (w->phi0 + w->phistep * t) * RTD);
    if ((st = resolve_sources(s, plan))) return st;
    if ((st = resolve_mosaic(s, plan))) return st;

    plan->command_line = nb_xstrdup(rq->command_line ? rq->command_line : "");
    if ((st = plan_detector(s, plan))) return st;
    if (rq->panels && (st = nb_plan_place_panels(rq->panels, plan))) return st;
    log_summary(s, plan); /* after the panels are placed: -v logs them */
    plan_beam_and_crystal(s, plan);
    plan_requests(s, plan);
    return NB_OK;
}

/* On failure nothing of the plan is left allocated (its parts are made one
 * after another; an error may come after some of them). */
nb_status nb_resolve(const nb_request *rq, nb_plan *plan, nb_strbuf *log)
{
    nb_status st = resolve(rq, plan, log);
    if (st) nb_plan_free(plan);
    return st;
}
