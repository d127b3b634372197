/* nb_options.h - every command-line flag of the toolkit, who owns it, where
 * its value goes, and the one loop that reads a command line.
 *
 * nb-geom accepts the whole nanoBragg command line (it records the requests
 * meant for later stages in the plan); every other tool accepts the flags it
 * owns, which override the plan.  Matching is exact: "-distance" is only
 * "-distance", never a substring of another flag.  A flag that a tool does
 * not accept is reported with the name of the tool that does.
 *
 * Two kinds of rows, as git's parse-options has its OPT_* rows:
 *   - the registry (nb_flag, below): every nanoBragg-style spelling with its
 *     flag id, argument count, owners, metavar and help.  It is shared, so
 *     that any tool can say which other tool owns a flag it refuses.
 *   - each tool's option table (nb_opt_table): one nb_opt row per flag it
 *     owns, binding the flag to where its value goes (an offset into the
 *     tool's options struct: nb_request for nb-geom, libnbcore's; the tool's
 *     own struct otherwise), how it is read (number, integer, seed, string,
 *     word from a list, vector) and checked (positive, not negative), the
 *     unit conversion done at parse time (mm to m, degrees to radians, as the
 *     reference does), and the int fields the flag also sets (a pivot, a
 *     "given" mark); or a callback for the irregular ones.  Rows with a
 *     spelling of their own (--device, --frames ...) are the tool's options
 *     that no other tool shares; their help is in the row too.
 * nb_opts_parse() is the loop every tool reads its command line with (nb-geom
 * through nb_request_scan_args, which records first and applies later).
 */
#ifndef NB_OPTIONS_H
#define NB_OPTIONS_H

#include <stddef.h>

#include "nb_error.h"

enum nb_owner {
    NB_GEOM = 1u << 0,
    NB_HKL = 1u << 1,
    NB_SIM = 1u << 2,
    NB_NOISE = 1u << 3,
    NB_CONVERT = 1u << 4,
    NB_BENCH = 1u << 5,
    NB_FIT = 1u << 6,
    NB_MATH = 1u << 7,
    NB_AMORPHOUS = 1u << 8
};

/* Flag identities (aliases share one). */
enum nb_flag_id {
    FL_IMG, FL_MASK, FL_MAT, FL_CELL, FL_MISSET, FL_MISSET_SEED, FL_MOSAIC_SEED,
    FL_NA, FL_NB, FL_NC, FL_N, FL_SAMPLE_SIZE, FL_SAMPLE_X, FL_SAMPLE_Y, FL_SAMPLE_Z,
    FL_DENSITY, FL_MW, FL_XBEAM, FL_YBEAM, FL_XCLOSE, FL_YCLOSE, FL_ORGX, FL_ORGY, FL_PIVOT,
    FL_MOSFLM, FL_XDS, FL_ADXV, FL_DENZO, FL_DIALS,
    FL_FDET_VECTOR, FL_SDET_VECTOR, FL_ODET_VECTOR, FL_BEAM_VECTOR, FL_POLAR_VECTOR, FL_SPINDLE_AXIS,
    FL_TWOTHETA_AXIS, FL_PIX0_VECTOR,
    FL_DISTANCE, FL_CLOSE_DISTANCE, FL_DETECTOR_ABS, FL_DETECTOR_THICK, FL_THICKSTEPS, FL_DETECTOR_MATERIAL,
    FL_TWOTHETA,
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
    /* serial-crystallography stills (nb extension) */
    FL_STILLS, FL_STILLS_BANDWIDTH, FL_STILLS_SPIKES, FL_STILLS_N, FL_STILLS_FLUENCE,
    /* a plan from a DIALS experiment list */
    FL_EXPT, FL_EXPT_SPECTRA,
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
/* The second half of nb_flag_reject, for an argument that is no flag this
 * tool knows: "unexpected argument", or "unknown option" with a close
 * spelling this tool accepts. */
nb_status nb_flag_unknown(const char *arg, unsigned this_tool);

/* Name of a single owner bit ("nb-geom"). */
const char *nb_owner_tool(unsigned owner_bit);

/* Collect the values of a flag starting at argv[i+1] according to its arity
 * (special rules: -cell takes 1..6 values up to the next one starting with
 * '-'; -misset takes "random" or 3 values; -curved_det takes an optional
 * ignored value).  Sets *nargs.  Fails when values are missing. */
nb_status nb_flag_collect(const nb_flag *f, int argc, char **argv, int i, int *nargs);

/* ---- option tables: where each flag's value goes ---------------------------- */

/* How a row reads its values and stores them. */
typedef enum nb_opt_type {
    NB_OPT_SET,        /* no value: only the row's `sets` */
    NB_OPT_DOUBLE,     /* a finite number, checked and converted, into each destination (double) */
    NB_OPT_INT,        /* an integer into each destination (int) */
    NB_OPT_SEED,       /* an integer, negated as the reference keeps its seeds (int64_t) */
    NB_OPT_STRING,     /* the argument itself (const char *: the tool's argv outlives it) */
    NB_OPT_STRDUP,     /* a copy (char *, the destination's to free; a previous one is freed) */
    NB_OPT_VEC3,       /* three numbers into a double[3] */
    NB_OPT_INTS,       /* one integer per value, the k-th into the k-th destination (int) */
    NB_OPT_CHOICE,     /* one of the row's words: its number into each destination (int) */
    NB_OPT_CALLBACK    /* the row's function reads and stores */
} nb_opt_type;

/* The check of an NB_OPT_DOUBLE value, before its conversion. */
typedef enum nb_opt_check {
    NB_CHECK_NONE,
    NB_CHECK_POSITIVE, /* "option X: must be positive, got V" (a distance, a wavelength) */
    NB_CHECK_NONNEG    /* "option X: must not be negative (V)" (noisify's fractions and widths) */
} nb_opt_check;

/* A destination: NB_AT(struct, field), the field's offset plus one, so that
 * a row's unused destinations (0) are not the struct's first field. */
#define NB_AT(type, field) (offsetof(type, field) + 1)
#define NB_OPT_MAX_AT 4
#define NB_OPT_MAX_SETS 2
/* The id of a row with a spelling of its own (not in the registry). */
#define NB_OPT_LOCAL (-1)

typedef struct nb_opt_choice {
    const char *word;
    int value;
} nb_opt_choice;

typedef struct nb_opt_set {
    size_t at;  /* NB_AT(...) of an int field; 0: none */
    int value;
} nb_opt_set;

struct nb_opt;
/* What a callback gets: the row, the spelling as given (for messages), the
 * values, and the tool's options struct. */
typedef struct nb_opt_args {
    const struct nb_opt *opt;
    const char *name;
    char **vals;
    int nvals;
    void *dest;
} nb_opt_args;

typedef struct nb_opt {
    int id;                 /* the registry flag (FL_*) this row binds, or NB_OPT_LOCAL */
    /* a local row's spelling, value count (0, 1 or 2), metavar and help (NULL:
     * not listed, an alias), and what its missing value is called ("option
     * X needs a file name"; NULL: "a value (METAVAR)") */
    const char *name;
    int nargs;
    const char *metavar, *help, *needs;
    nb_opt_type type;
    size_t at[NB_OPT_MAX_AT];                   /* destinations */
    nb_opt_check check;                         /* NB_OPT_DOUBLE */
    double (*convert)(double);                  /* NB_OPT_DOUBLE: unit conversion, or NULL */
    const nb_opt_choice *choices;               /* NB_OPT_CHOICE: words, ended by {NULL} */
    const char *expected;                       /* NB_OPT_CHOICE: "'beam' or 'sample'" for the message */
    nb_opt_set sets[NB_OPT_MAX_SETS];           /* int fields set once the value is taken */
    nb_status (*fn)(const nb_opt_args *a);      /* NB_OPT_CALLBACK */
} nb_opt;

typedef struct nb_opt_table {
    unsigned owner;     /* the tool's owner bit: the registry flags it owns are its own; 0: none */
    const nb_opt *rows;
    int nrows;
} nb_opt_table;

/* The row of `t` that binds registry flag `id`, or NULL. */
const nb_opt *nb_opt_row(const nb_opt_table *t, int id);
/* Read one flag's values into `dest` by its row: parse, check, convert,
 * store, then the row's sets.  `name` is the spelling as given. */
nb_status nb_opt_apply(const nb_opt *row, void *dest, const char *name, char **vals, int nvals);
/* The number of an NB_OPT_DOUBLE row's value, parsed and checked as the row
 * says, before any conversion (for callbacks that do more with it). */
nb_status nb_opt_number(const nb_opt *row, const char *name, const char *val, double *x);

/* What a tool adds to the loop. */
typedef struct nb_opts_hooks {
    /* The tool's standard options at argv[*i] (-o, -q, --threads ...): returns
     * 1 when it is one, with *i on its last value and *st set on a bad value;
     * 0 otherwise.  NULL: none. */
    int (*tool_option)(void *ctx, int argc, char **argv, int *i, nb_status *st);
    void *ctx;
    /* Where an argument that is not a flag (or "-") goes: the input stream,
     * one at most.  NULL: such an argument is an error. */
    const char **input;
} nb_opts_hooks;

/* A command line recognised but not yet applied (nb-geom's first pass). */
typedef struct nb_scanned_args {
    int argc;
    char **argv;
    int count;
    struct nb_scanned_flag {
        const nb_opt *row;
        int id, index, nvals; /* the flag (FL_* or NB_OPT_LOCAL), its position in argv, its values */
    } *flags;
} nb_scanned_args;

/* The one command-line loop.  argv[0] is the first argument, not a program
 * name.  Each argument is, in this order: one of the table's own spellings,
 * a standard option (hooks), a registry flag the tool owns (values collected
 * by nb_flag_collect), the input stream; anything else is refused by
 * nb_flag_reject (by nb_flag_unknown for a tool that owns no registry flag).
 * nb_opts_parse applies each flag to `dest` as it comes; nb_opts_scan only
 * records them (nb_opt_apply each later, in order). */
nb_status nb_opts_parse(const nb_opt_table *t, int argc, char **argv, const nb_opts_hooks *hooks, void *dest);
nb_status nb_opts_scan(const nb_opt_table *t, int argc, char **argv, const nb_opts_hooks *hooks,
                       nb_scanned_args *out);
void nb_scanned_args_free(nb_scanned_args *args);

#endif
