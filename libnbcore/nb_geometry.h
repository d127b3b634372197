/* nb_geometry.h - from nanoBragg's command-line requests to an explicit plan.
 *
 * nb_request holds the requests exactly as the reference keeps them after
 * parsing (its units, its "unset" sentinels: NaN or -1).  nb_resolve() then
 * runs the reference's resolution in its order (docs/physics.md 2-7):
 * detector size, fluence, beam-centre defaults, the convention block, vector
 * normalisation, sampling auto-selection, pivot and rotations, interpolation
 * choice, the cell and missetting, crystal size to N and oversampling,
 * sources, mosaic domains.
 *
 * The request and its command line: nb_request.c; nb-geom's option table:
 * nb_geom_flags.c; the resolution: nb_resolve*.c; the cell's maths:
 * nb_cell.c; a detector file's panels: nb_panels.c.
 */
#ifndef NB_GEOMETRY_H
#define NB_GEOMETRY_H

#include <stdint.h>

#include "nb_cell.h" /* the cell's maths, which the resolution uses (and the tests) */
#include "nb_error.h"
#include "nb_options.h"
#include "nb_plan.h"
#include "nb_util.h"

enum nb_convention { NB_CUSTOM, NB_ADXV, NB_MOSFLM, NB_XDS, NB_DIALS, NB_DENZO };
enum nb_pivot { NB_PIVOT_SAMPLE, NB_PIVOT_BEAM };
/* or'ed into nb_request.pivot by a convention flag: a pivot nobody asked
 * for, which nb_resolve does not report as overridden by the convention */
#define NB_PIVOT_IMPLIED 2

/* A detector read from a file (nb-geom -panels FILE): its panels in the
 * file's own laboratory frame, and what ties that frame to the plan's. */
typedef enum nb_frame_tie {
    NB_TIE_SPINDLE,     /* beam and `second` (a rotation axis) onto the plan's beam and spindle */
    NB_TIE_POLAR,       /* beam and `second` (across the beam) onto the plan's beam and polarization */
    NB_TIE_DIALS_FIXED  /* DIALS's fixed frame: lab (x, y, z) is ours (z, y, -x) swapped, as -dials puts it */
} nb_frame_tie;

typedef struct nb_detector_file {
    int npanels;
    nb_panel *panels;     /* metres; detector_thick < 0: the file gives no sensor (the flags' then) */
    double beam[3];       /* the beam's propagation direction, in the file's frame */
    double second[3];     /* see tie */
    nb_frame_tie tie;
    int sensor_from_flags; /* -detector_thick, -detector_abs or -detector_material given: they apply
                              to every panel */
} nb_detector_file;

void nb_detector_file_free(nb_detector_file *d);

/* A DIALS experiment list read for nb-geom -expt FILE (formats/ reads it:
 * nb_experiment_list_read): its one detector and beam direction, each
 * experiment's crystal and wavelength, and a sweep's scan, in the file's
 * own laboratory frame.  detector.tie is NB_TIE_SPINDLE: its `second` the
 * sweep's rotation axis, or for stills the file's x axis. */
typedef struct nb_listed_crystal {
    double abc[3][3];   /* real-space a, b, c (Angstrom), the file's frame, spindle angle 0 */
    double lambda;      /* m: its beam's wavelength */
    char identifier[256]; /* the experiment's identifier (what ties it to its reflections); "": none */
} nb_listed_crystal;

typedef struct nb_experiment_list {
    nb_detector_file detector;
    nb_material material;       /* the sensor's material the panels name (NONE: none, or one nb does not know) */
    int sensor;                 /* the panels state a sensor (thickness > 0) */
    double polar_fraction;      /* the beam's polarization_fraction; NAN: not given */
    int n;                      /* experiments */
    nb_listed_crystal *crystals;
    char space_group[64];       /* the crystals' space_group_hall_symbol (all alike); "": not stated */
    int sweep;                  /* one experiment with a scan that turns: a rotation series */
    double phi0, osc;           /* rad: the sweep's first image's start and its width */
    int nframes;                /* the sweep's images */
} nb_experiment_list;

void nb_experiment_list_free(nb_experiment_list *l);

typedef struct nb_request {
    /* detector (metres, radians as the reference converts at parse time) */
    double pixel_size, distance, close_distance, detsize_f, detsize_s;
    int fpixels, spixels;
    double Xbeam, Ybeam, Xclose, Yclose, ORGX, ORGY; /* NaN = unset */
    /* the direct-beam spot an -img/-mask header states outright (an SMV that
     * nb-convert wrote: nb_header_geometry.beam_f/_s), m from the outer corner
     * of the first pixel; NaN = none.  The convention turns it into its own
     * Xbeam, Ybeam where no flag set them (docs/physics.md 2.4). */
    double header_Fbeam, header_Sbeam;
    double fdet[3], sdet[3], odet[3], beam[3], polar[3], spindle[3], twotheta_axis[3];
    int odet_given; /* -odet_vector was given (nonBragg ignores it: --nonbragg says so) */
    int pivot, convention;
    double rotx, roty, rotz, twotheta;
    int curved_detector, point_pixel;
    double detector_mu, detector_thick, detector_thickstep;
    int detector_thicksteps;
    nb_material detector_material; /* -detector_material: mu is its at lambda0 (NONE: not named) */
    int oversample, oversample_thick, oversample_polar, oversample_omega;
    int roi_xmin, roi_xmax, roi_ymin, roi_ymax; /* -1 = unset */
    /* beam */
    double lambda0, dispersion, dispstep;
    int dispsteps;
    double hdivrange, hdivstep, vdivrange, vdivstep;
    int hdivsteps, vdivsteps, round_div;
    double polarization;
    int nopolar;
    double fluence, flux, exposure, beamsize;
    char *sourcefile;
    /* crystal */
    int user_cell;
    double cell[6];             /* a b c (Angstrom), angles (rad); 0 = unset */
    char *matfile;
    int misset_mode;            /* 0 none, 1 fixed, -1 random */
    double misset[3];           /* rad */
    double Na, Nb, Nc;
    double sample_x, sample_y, sample_z; /* m */
    int shape;
    double fudge;
    double mosaic_spread;       /* rad, -1 unset */
    int mosaic_domains;
    double phi0, osc, phistep;  /* rad, -1 unset for osc/phistep */
    int phisteps;
    int nframes;        /* -nframes: frames in the rotation series (1) */
    nb_stills stills;   /* -stills and its ranges (spikes -1: not given) */
    double water_size, dmin;
    int interpolate;            /* 0, 1, or 2 = auto */
    int64_t seed, mosaic_seed, misset_seed;
    int seed_given;
    /* files */
    char *imgfile, *maskfile, *stolfile;
    unsigned char *mask;        /* from -mask: 1 = render, 0 = skip */
    int mask_w, mask_h;
    nb_detector_file *panels;   /* -panels FILE, read; NULL: the flags' one-panel detector */
    nb_experiment_list *expt;   /* -expt FILE, read (its detector moved into panels); NULL: none */
    char *expt_spectra;         /* -expt_spectra LIST: a .lam file per experiment (nb_spectra.h); NULL: none */
    /* requests for later stages */
    char *hklfile, *dumpfile;
    double default_F;
    char *floatfile, *intfile, *noisefile, *pgmfile;
    double intfile_scale, pgm_scale, adc;
    int calculate_noise, write_pgm;
    int precision_double;
    int printout, printout_fpixel, printout_spixel, progress;
    /* the drop-in's implicit reference outputs (floatimage.bin, ...) */
    int reference_defaults;
    /* --nonbragg: nonBragg's detector frame and defaults, its sources, and
     * no crystal needed (docs/physics.md 17.1) */
    int nonbragg;
    char *command_line;
} nb_request;

/* The reference's defaults; the seeds default to -time(NULL). */
void nb_request_defaults(nb_request *rq);
void nb_request_free(nb_request *rq);

/* nb-geom's option table: each of its flags bound to its field of
 * nb_request, with its check and the reference's parse-time unit conversion
 * (docs/physics.md 2), or to a handler for the irregular ones. */
extern const nb_opt_table nb_request_opts;

/* Apply one flag (from nb_options) with its values, by its row of
 * nb_request_opts.  -img/-mask headers must be applied first
 * (nb_request_apply_header) - nb-geom does that. */
nb_status nb_request_apply(nb_request *rq, int flag_id, const char *name, char **vals, int nvals);
/* Which flag named the image: both set the geometry from the header; a mask's
 * BEAM_CENTER_Y counts from the other edge (as the reference reads it) and its
 * zero pixels are not rendered. */
typedef enum nb_header_role { NB_HEADER_IMG, NB_HEADER_MASK } nb_header_role;

/* nb-geom's command line, read in the reference's order by the one loop
 * that nb-geom, the tests and the fuzzers share.  argv[0] is the first
 * argument, not a program name.  nb_request_scan_args recognises every
 * argument (a flag nb-geom does not own is a usage error naming its owner);
 * nb_request_apply_scanned then reads the -mask header, then the -img header
 * (so that flags override headers and -img beats -mask), then applies the
 * flags in order, with the reference's quirks: a -misset_seed followed by two
 * more arguments also sets a fixed misset, a -curved_det without a value is
 * ignored.  The two halves let a tool act on its own options in between. */
typedef struct nb_args_hooks {
    /* A tool's own option at argv[*i] (-o, -q, --threads ...): returns 1 when
     * it is one, with *i on its last value and *st set on a bad value; 0
     * otherwise.  NULL: the tool has none. */
    int (*tool_option)(void *ctx, int argc, char **argv, int *i, nb_status *st);
    void *ctx;
    /* Reads an -img or -mask header into the request (libnbcore reads no
     * image format; nb-geom passes nb_smv_apply_to_request).  NULL: -img and
     * -mask are left to the caller. */
    nb_status (*load_header)(nb_request *rq, const char *path, nb_header_role role);
    /* Reads a -panels detector file (DIALS .expt, CrystFEL .geom) in its own
     * frame (nb-geom passes nb_detector_file_read).  NULL: -panels is refused. */
    nb_status (*load_panels)(const char *path, nb_detector_file *out);
    /* Reads a -expt DIALS experiment list in its own frame (nb-geom passes
     * nb_experiment_list_read).  NULL: -expt is refused. */
    nb_status (*load_experiments)(const char *path, nb_experiment_list *out);
} nb_args_hooks;

nb_status nb_request_scan_args(nb_request *rq, int argc, char **argv, const nb_args_hooks *hooks,
                               nb_scanned_args *out);
nb_status nb_request_apply_scanned(nb_request *rq, const nb_scanned_args *args, const nb_args_hooks *hooks);
/* Both halves at once (hooks may be NULL). */
nb_status nb_request_apply_args(nb_request *rq, int argc, char **argv, const nb_args_hooks *hooks);

/* What the header of an -img or -mask image says about the experiment, in
 * the header's own units; NAN where it is silent.  The library reads no image
 * file: nb-geom reads the header through formats/ (SMV:
 * nb_smv_apply_to_request) and hands the values over. */
typedef struct nb_header_geometry {
    int width, height;                            /* pixels, fast and slow: always given */
    double pixel_size, distance, close_distance;  /* mm */
    double wavelength;                            /* Angstrom */
    double beam_center_x, beam_center_y;          /* mm, the reference's Xbeam, Ybeam */
    double beam_f, beam_s;                        /* mm: the direct-beam spot from the outer corner of
                                                     the first pixel along fast and slow, when the
                                                     header states it outright (then beam_center_x/y
                                                     are NAN); docs/physics.md 2.4 */
    double orgx, orgy;                            /* pixels */
    double phi, osc_range;                        /* degrees */
    double twotheta;                              /* degrees: reported as ignored, as the reference ignores it */
    const uint32_t *pixels;                       /* width x height, zero = skip: a mask's (NULL for -img) */
} nb_header_geometry;

/* Apply an -img or -mask header (`path` names it in messages and in the plan)
 * to the request, as the reference does before parsing the rest of the
 * command line.  A mask needs its pixels. */
nb_status nb_request_apply_header(nb_request *rq, const nb_header_geometry *h, const char *path,
                                  nb_header_role role);

/* -panels on a command line (nb_request_apply_scanned calls it first): the
 * flags that place the one-panel detector are refused beside it, the file
 * is read through hooks->load_panels into rq->panels, and panel 0's size,
 * pixel and distance stand in for the default detector's (the automatic
 * oversampling and -v's log use them). */
nb_status nb_request_take_panels(nb_request *rq, const nb_scanned_args *args, const nb_args_hooks *hooks);
/* The file's panels into a resolved plan (nb_resolve calls it): rotated from
 * the file's frame onto the plan's (see nb_frame_tie), odet away from the
 * sample, the sensor from the file or the flags, full ROI, no mask. */
nb_status nb_plan_place_panels(const nb_detector_file *d, nb_plan *plan);

/* -expt on a command line (nb_request_apply_scanned calls it first): the
 * flags that say what the list says (the crystals, the beam, the laboratory
 * frame, the detector, the frames; the sensor when the list states one) are
 * refused by name, the list is read through hooks->load_experiments, and
 * the request takes its detector (as -panels'), first wavelength,
 * polarization fraction (unless -polar or -nopolar), frames and scan. */
nb_status nb_request_take_expt(nb_request *rq, const nb_scanned_args *args, const nb_args_hooks *hooks);
/* The rotation (row-major) that takes a detector file's frame onto the
 * plan's, as nb_plan_place_panels turns the panels. */
nb_status nb_detector_file_rotation(const nb_detector_file *d, const nb_plan *plan, double R[3][3]);
/* The list's crystals into a resolved plan (nb_resolve calls it after the
 * panels are placed), turned as the panels are: a sweep's crystal is the
 * plan's, stills' the frame crystals (each with the plan's N and fluence
 * and its own wavelength). */
nb_status nb_plan_take_expt_crystals(const nb_experiment_list *l, nb_plan *plan);
/* Frame 0's real-space cell (Angstrom) in the plan's frame (its beam and
 * spindle resolved), before the plan exists: the crystal the resolution
 * sizes N and oversampling by. */
nb_status nb_expt_first_cell(const nb_experiment_list *l, const double beam[3], const double spindle[3],
                             double abc[3][3]);

/* Resolve into a plan.  `log` receives the reference's console lines for the
 * resolved geometry (printed by nb-geom -v); warnings go to nb_warn(). */
nb_status nb_resolve(const nb_request *rq, nb_plan *plan, nb_strbuf *log);

#endif
