/* nb_options.h - every command-line flag of the toolkit, and who owns it.
 *
 * nb-geom accepts the whole nanoBragg command line (it records the requests
 * meant for later stages in the plan); every other tool accepts the flags it
 * owns, which override the plan.  Matching is exact: "-distance" is only
 * "-distance", never a substring of another flag.  A flag that a tool does
 * not accept is reported with the name of the tool that does.
 */
#ifndef NB_OPTIONS_H
#define NB_OPTIONS_H

#include "nb_error.h"

enum nb_owner {
    NB_GEOM = 1u << 0,
    NB_HKL = 1u << 1,
    NB_SIM = 1u << 2,
    NB_NOISE = 1u << 3,
    NB_CONVERT = 1u << 4,
    NB_BENCH = 1u << 5
};

/* Flag identities (aliases share one). */
enum nb_flag_id {
    FL_IMG, FL_MASK, FL_MAT, FL_CELL, FL_MISSET, FL_MISSET_SEED, FL_MOSAIC_SEED,
    FL_NA, FL_NB, FL_NC, FL_N, FL_SAMPLE_SIZE, FL_SAMPLE_X, FL_SAMPLE_Y, FL_SAMPLE_Z,
    FL_DENSITY, FL_MW, FL_XBEAM, FL_YBEAM, FL_XCLOSE, FL_YCLOSE, FL_ORGX, FL_ORGY, FL_PIVOT,
    FL_MOSFLM, FL_XDS, FL_ADXV, FL_DENZO, FL_DIALS,
    FL_FDET_VECTOR, FL_SDET_VECTOR, FL_ODET_VECTOR, FL_BEAM_VECTOR, FL_POLAR_VECTOR, FL_SPINDLE_AXIS,
    FL_TWOTHETA_AXIS, FL_PIX0_VECTOR,
    FL_DISTANCE, FL_CLOSE_DISTANCE, FL_DETECTOR_ABS, FL_DETECTOR_THICK, FL_THICKSTEPS, FL_TWOTHETA,
    FL_ROTX, FL_ROTY, FL_ROTZ, FL_DETSIZE, FL_DETSIZE_F, FL_DETSIZE_S, FL_DETPIXELS, FL_DETPIXELS_F,
    FL_DETPIXELS_S, FL_CURVED_DET, FL_PIXEL, FL_POINT_PIXEL, FL_POLAR, FL_NOPOLAR,
    FL_OVERSAMPLE, FL_OVERSAMPLE_THICK, FL_OVERSAMPLE_POLAR, FL_OVERSAMPLE_OMEGA, FL_ROI,
    FL_LAMBDA, FL_ENERGY, FL_FLUENCE, FL_FLUX, FL_EXPOSURE, FL_BEAMSIZE, FL_MOSAIC, FL_MOSAIC_DOMAINS,
    FL_DISPERSION, FL_DISPSTEPS, FL_DIVERGENCE, FL_HDIVRANGE, FL_VDIVRANGE, FL_HDIVSTEP, FL_HDIVSTEPS,
    FL_VDIVSTEP, FL_VDIVSTEPS, FL_DIVSTEPS, FL_ROUND_DIV, FL_SQUARE_DIV,
    FL_PHI, FL_OSC, FL_PHISTEP, FL_PHISTEPS, FL_NFRAMES, FL_DMIN, FL_INTERPOLATE, FL_NOINTERPOLATE,
    FL_ROUND_XTAL, FL_SQUARE_XTAL, FL_GAUSS_XTAL, FL_TOPHAT_SPOTS, FL_FUDGE, FL_WATER,
    FL_SOURCEFILE, FL_STOL, FL_STOLOUT, FL_COHERENT,
    /* structure factors */
    FL_HKL, FL_DEFAULT_F, FL_DUMP,
    /* kernel */
    FL_PRINTOUT, FL_PRINTOUT_PIXEL, FL_PROGRESS, FL_NOPROGRESS, FL_PRECISION,
    /* noise and outputs */
    FL_SEED, FL_ADC, FL_NONOISE, FL_NOISEFILE, FL_FLOATFILE, FL_INTFILE, FL_PGMFILE, FL_PGMSCALE,
    FL_NOPGM, FL_SCALE,
    /* nb-noise's detector effects (noisify's) */
    FL_FLICKER, FL_CALIBRATION, FL_CALIB_SEED, FL_READOUT, FL_GAIN, FL_PSF, FL_PSF_FWHM, FL_PSF_RADIUS,
    FL_BITS, FL_PHOTON_SCALE, FL_NOISE_FLUENCE,
    /* a detector of several panels from a file */
    FL_PANELS,
    FL_COUNT
};

typedef struct nb_flag {
    const char *name;
    int id;
    int min_args, max_args;
    unsigned owners;
    const char *metavar;   /* "MM", "X Y Z" ... */
    const char *help;      /* one line; NULL for an alias ("same as <first spelling>") */
} nb_flag;

/* Exact lookup; NULL when no tool knows the spelling.  A spelling can have
 * one entry per owner where the meaning differs (-scale is the int-image
 * scale for nb-convert, the photon scale for nb-noise): nb_flag_lookup_for
 * prefers the entry the given tool owns. */
const nb_flag *nb_flag_lookup(const char *arg);
const nb_flag *nb_flag_lookup_for(const char *arg, unsigned tool);
/* All flags, for --help and the man pages; *n receives the count. */
const nb_flag *nb_flag_table(int *n);
/* First (canonical) spelling of a flag id. */
const char *nb_flag_canonical(int id);

/* The error for an argument this tool does not accept: names the tool that
 * owns it, or suggests a close spelling.  Returns NB_ERR_USAGE. */
nb_status nb_flag_reject(const char *arg, unsigned this_tool);

/* Name of a single owner bit ("nb-geom"). */
const char *nb_owner_tool(unsigned owner_bit);

/* Collect the values of a flag starting at argv[i+1] according to its arity
 * (special rules: -cell takes 1..6 values up to the next one starting with
 * '-'; -misset takes "random" or 3 values; -curved_det takes an optional
 * ignored value).  Sets *nargs.  Fails when values are missing. */
nb_status nb_flag_collect(const nb_flag *f, int argc, char **argv, int i, int *nargs);

#endif
