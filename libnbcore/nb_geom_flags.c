/* nb_geom_flags.c - nb-geom's option table (nb_request_opts): each of its
 * flags bound to its field of nb_request, with its check and the unit
 * conversion the reference does at parse time (mm to m, degrees to radians
 * ..., each with the reference's own arithmetic), and the handlers of the
 * irregular ones (-cell, -misset, -twotheta_axis, -pix0_vector,
 * -detector_abs, -detector_material, the -stills ranges and the flags that
 * only warn).  The flags' spellings, owners and help are the registry's
 * (nb_options.c); the loop that reads them is nb_request.c's. */
#include "nb_geometry.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nb_constants.h"
#include "nb_materials.h"
#include "nb_options.h"
#include "nb_util.h"

/* The units the reference converts to at parse time (metres, radians), each
 * with the reference's own arithmetic: x / 1e6 and x * 1e-6 differ in the
 * last bit for some x, so each flag keeps the one the reference uses. */
static double milli(double x) { return x / 1000.0; } /* mm to m, mrad to rad */
static double deg_to_rad(double x) { return x / NB_RTD; }
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
        rq->cell[i] = i < 3 ? x : x / NB_RTD;
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
    for (int i = 0; i < 3; i++) rq->misset[i] = m[i] / NB_RTD;
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
    if (rq->twotheta != rq->twotheta_axis[0] / NB_RTD)
        nb_warn("-twotheta_axis also sets the two-theta angle to %g degrees (its first value), as the "
                "reference does; give -twotheta after it to choose the angle",
                rq->twotheta_axis[0]);
    rq->twotheta = rq->twotheta_axis[0] / NB_RTD;
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
#define CONVENTION(id, c, p) {id, .type = NB_OPT_SET, .sets = {{RQ(convention), c}, {RQ(pivot), p | NB_PIVOT_IMPLIED}}}
/* a custom vector selects the custom convention */
#define VECTOR(id, f) {id, .type = NB_OPT_VEC3, .at = {RQ(f)}, .sets = {{RQ(convention), NB_CUSTOM}}}

static const nb_opt request_rows[] = {
    /* the crystal: cell or matrix, orientation, size, mosaicity, spot shape */
    {FL_IMG, .type = NB_OPT_SET}, /* its header is read before every flag: nb_request_apply_scanned */
    {FL_MASK, .type = NB_OPT_SET},
    {FL_PANELS, .type = NB_OPT_SET}, /* its file is read before every flag too */
    {FL_EXPT, .type = NB_OPT_SET},   /* and so is the experiment list */
    STR(FL_EXPT_SPECTRA, expt_spectra),
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
    {FL_ODET_VECTOR, .type = NB_OPT_VEC3, .at = {RQ(odet)}, .sets = {{RQ(convention), NB_CUSTOM}, {RQ(odet_given), 1}}},
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
    {NB_OPT_LOCAL, "--nonbragg", 0, "",
     "the geometry of nanoBragg's companion nonBragg (pipelines/nonbragg):\n"
     "its detector frame (fast 0 0 1, slow 0 -1 0, normal fast x slow,\n"
     "beam 1 0 0, no convention), its beam-centre defaults\n"
     "((detsize - pixel)/2, (detsize + pixel)/2; ORGX x pixel), its pixel\n"
     "count (detsize/pixel rounded up), sources of weight 1, oversample 1;\n"
     "no crystal needed (a plan for nb-amorphous; nb-sim refuses it)",
     .type = NB_OPT_SET, .sets = {{RQ(nonbragg), 1}}},
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
