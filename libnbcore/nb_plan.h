/* nb_plan.h - the resolved experiment, as nb-geom hands it down the pipeline.
 *
 * Everything here is explicit: no convention, pivot or auto-selection is left
 * for a later stage to interpret.  All values are SI (metres, radians,
 * photons/m^2) unless a comment says otherwise.  The PLAN record carries each
 * field as a header key (the table in nb_plan.c, documented in
 * docs/stream-format.md) and the sources, mosaic matrices and mask as arrays.
 */
#ifndef NB_PLAN_H
#define NB_PLAN_H

#include <stdint.h>

#include "nb_error.h"
#include "nb_materials.h"
#include "nb_fields.h"
#include "nb_rng.h"
#include "nb_stream.h"

#define NB_PATH_MAX 4096

typedef struct nb_source {
    double dir[3];  /* unit vector from the sample towards the source */
    double weight;  /* unused by nb-sim (as in the reference); nb-amorphous weighs by it */
    double lambda;  /* m */
} nb_source;

/* One flat detector panel: every field a panel has, declared by the table
 * of nb_fields.h (which also gives the PLAN record's keys, the kernels'
 * parameters and what derivatives follow), and its mask.  Lab frame and
 * units as the plan's; odet points away from the sample (pix0 . odet > 0). */
typedef struct nb_panel {
    NB_PANEL_FIELDS(NB_FIELD_DECLARE)
    unsigned char *mask;                /* NULL or fpixels*spixels, 0 = skip; owned by the plan */
} nb_panel;

/* Serial-crystallography stills (nb-geom -stills, an nb extension;
 * docs/physics.md 16): every frame of the series a shot of its own, drawn
 * from MISSET_SEED and the frame number alone (nb_stills.h). */
typedef struct nb_stills {
    int on;                             /* STILLS: the frames are stills */
    double bandwidth;                   /* STILLS_BANDWIDTH: the SASE envelope's FWHM, relative (0: none) */
    int spikes;                         /* STILLS_SPIKES: spikes per shot (0: the plan's sources) */
    int N_min, N_max;                   /* STILLS_N: unit cells per side, drawn (0 0: the plan's N) */
    double fluence_min, fluence_max;    /* STILLS_FLUENCE, photons/m^2, drawn (0 0: the plan's) */
} nb_stills;

/* Per-frame crystals (nb-geom -expt from a DIALS list of stills; nb-fit
 * --refine-frame writes them): frame i's crystal, size, fluence and
 * wavelength replace the plan's in its view (nb_plan_frame_view).  PLAN key
 * FRAME_CRYSTALS. */
typedef struct nb_frame_crystal {
    double a[3], b[3], c[3];   /* real-space cell vectors, m, the plan's lab frame, at phi 0, no mosaic (as cell_a) */
    double Na, Nb, Nc;         /* unit cells */
    double fluence;            /* photons/m^2 */
    double lambda;             /* m: the frame's wavelength; the view's sources are the plan's scaled by lambda / lambda0 */
    int status;                /* 0; NB_FRAME_FAILED (3): nb-fit's verdict failed for this frame (the values are its start's) */
} nb_frame_crystal;
#define NB_FRAME_FAILED 3

typedef struct nb_plan {
    /* provenance */
    char *command_line;

    /* what the kernels read as it is: distances and beam, sampling,
     * polarization, fluence, crystal size, background, resolution (the
     * table of nb_fields.h: its keys, the kernels' copies, derivatives) */
    NB_PLAN_KERNEL_FIELDS(NB_FIELD_DECLARE)

    /* detector: a list of panels (nanoBragg's flags: one).  The values below
     * them are the first panel's as the headers state them (derived from it
     * and the beam: nb_plan_derive_detector), and the detector's own. */
    int npanels;
    nb_panel *panels;                   /* npanels, owned (masks included) */
    double detsize_f, detsize_s;
    double spindle[3], twotheta_axis[3];
    double Xbeam, Ybeam, Fbeam, Sbeam;  /* header values, m (see docs/physics.md 2.2) */
    double Xclose, Yclose, Fclose, Sclose;
    double ORGX, ORGY;                  /* pixels */
    double dials_origin[3];             /* mm */
    char convention[8];                 /* mosflm xds adxv denzo dials custom */
    char pivot[8];                      /* beam sample */
    double rotx, roty, rotz, twotheta;
    /* the sensor's material (nb-geom -detector_material), key DETECTOR_MATERIAL
     * ("Si", "CdTe", "GaAs"), only when one was named: every panel's
     * DETECTOR_MU is then its attenuation at LAMBDA0 as dxtbx computes it
     * (the flags' sensor is every panel's).  NONE: no key */
    nb_material detector_material;

    /* beam */
    double lambda0;
    double dispersion, dispstep;
    int dispsteps;
    double hdivrange, hdivstep, vdivrange, vdivstep;
    int hdivsteps, vdivsteps, divsteps, round_div;
    double flux, exposure, beamsize;
    int nsources;
    nb_source *sources;

    /* crystal */
    double cell_a[3], cell_b[3], cell_c[3]; /* phi = 0, no mosaic, m */
    double recip_a[3], recip_b[3], recip_c[3]; /* 1/Angstrom */
    double unit_cell[6];                /* a b c (Angstrom) alpha beta gamma (deg), for headers */
    double misset[3];                   /* applied missetting angles, rad */
    int shape;                          /* enum nb_shape */
    double mosaic_spread;
    int mosaic_domains;
    double *mosaic_umats;               /* 9 per domain, row-major */
    /* the spread the matrices were drawn at (resolved, or read: the record's
     * MOSAIC_SPREAD; 0: never rescaled).  A view whose mosaic_spread differs
     * (a frame's own, frame_mosaic) renders the domains with their angles
     * scaled by the ratio (nb_mosaic_umat_rescale) */
    double mosaic_umats_spread;
    double phi0, phistep, osc;
    int phisteps;
    int nframes;                        /* rotation series: frame i starts at phi0 + i osc */
    nb_stills stills;                   /* stills: the shots' variation (stills.on 0: a rotation series) */
    nb_frame_crystal *frame_crystals;  /* nframes of them (owned), or NULL: every frame the plan's crystal (or the stills' draws) */
    double *frame_mosaic;               /* nframes mosaic spreads, rad (owned; nb-fit --refine-frame mosaic), or NULL:
                                         * every frame the plan's MOSAIC_SPREAD.  PLAN array frame_mosaic */
    char *frame_ids;                    /* nframes experiment identifiers, each NUL-ended, back to back (owned), or
                                         * NULL: none kept (nb-geom -expt keeps a DIALS list's).  PLAN array frame_ids */
    size_t frame_ids_bytes;             /* their bytes, the NULs included */
    int *frame_nchannels;               /* nframes channel counts (owned), or NULL: no frame has a spectrum of its own.
                                         * PLAN key FRAME_SPECTRA (nb_spectra.h) */
    double *frame_spectra;              /* (wavelength m, weight) pairs, frame after frame (owned) */
    int interpolate;                    /* resolved: 0 or 1 */

    /* random numbers: seeds as the reference stores them (negated) and the
     * shared ran1 table left by nb-geom's draws */
    int64_t seed, mosaic_seed, misset_seed;
    int seed_drawn; /* SEED was drawn from the clock (no -seed): key SEED_DRAWN, only then */
    nb_rng rng;

    /* structure-factor requests (for nb-hkl) */
    char *hkl_file;                     /* NULL: none */
    char *space_group;                  /* the crystals' symmetry as a Hall symbol (" P 2ac 2ab"), as a DIALS
                                         * experiment list states it or nb-fit --refine-F refined in; NULL: not said */
    char *dump_file;                    /* NULL: none */
    int dump_implicit;                  /* reference mode: read the dump if it exists */
    double default_F;

    /* output requests (for nb-convert / nb-noise) */
    char *floatfile, *intfile, *noisefile, *pgmfile; /* NULL: not requested */
    double intfile_scale, pgm_scale, adc;
    int calculate_noise, write_pgm;

    /* kernel requests (for nb-sim) */
    int precision_double;               /* 1: reference-faithful double path */
    int printout, printout_fpixel, printout_spixel;
    int progress;
} nb_plan;

void nb_plan_init(nb_plan *p);          /* zero, pointers NULL */
void nb_plan_free(nb_plan *p);
/* *out a copy of p that owns all it points to (free it with nb_plan_free). */
nb_status nb_plan_copy(const nb_plan *p, nb_plan *out);

/* Write the plan into a fresh PLAN record / read it back.  Reading checks that
 * every key is present and sane (sizes, counts, array lengths) and fails with
 * a message naming the key. */
nb_status nb_plan_to_record(const nb_plan *p, nb_record *rec);
nb_status nb_plan_from_record(const nb_record *rec, nb_plan *p);

/* Does the plan hold a crystal?  nb-geom --nonbragg without -cell or -mat
 * makes a plan of the detector and beam alone, its cell vectors zero (for
 * nb-amorphous): the Bragg renderers refuse it. */
int nb_plan_has_crystal(const nb_plan *p);

/* Shape names: "square" "round" "gauss" "tophat" */
const char *nb_shape_name(int shape);
int nb_shape_from_name(const char *name);

/* A panel's pixels; fails on absurd sizes with the memory they would need. */
nb_status nb_panel_check_size(const nb_panel *q);

/* ---- panels ---------------------------------------------------------------- */
/* The plan's detector as n zeroed panels (the old ones, masks included,
 * freed): nb-geom's resolve and the PLAN reader make the list with it. */
nb_status nb_plan_set_panels(nb_plan *p, int n);
/* Panels of the detector (1 for nanoBragg's flags), and the pixels of all of
 * them: an IMAGE holds the panels' pixels one panel after another. */
int nb_plan_npanels(const nb_plan *p);
size_t nb_plan_total_pixels(const nb_plan *p);
/* Panel i's pixel counts and where its pixels start in the image. */
void nb_plan_panel_dims(const nb_plan *p, int i, int *fpixels, int *spixels, size_t *offset);
/* The plan as a one-panel plan of panel i: a shallow copy (never freed; it
 * shares p's arrays, its one panel is p's panel i itself: a view that changes
 * a panel field gives it a panel of its own first) with the values derived
 * from the panel (distances, beam spot, near point, XDS and DIALS origins)
 * recomputed as nb_plan_derive_detector does.  Panel 0's are p's, as is. */
void nb_plan_panel_view(const nb_plan *p, int i, nb_plan *view);
/* Which rows of the panel table nb_panel_differs compares: every one, or
 * the detector's alone (not the ROI, which says what was rendered). */
typedef enum nb_panel_scope { NB_PANEL_EVERY_FIELD, NB_PANEL_DETECTOR_ONLY } nb_panel_scope;
typedef struct nb_panel_difference {
    char key[64];        /* the field's PLAN key for the panel (PIX0, PANEL2.PIX0) */
    char a[160], b[160]; /* its numbers in a and in b, as text */
} nb_panel_difference;
/* Do panels a and b (panel `index` of their plans) differ in a row of the
 * panel table (nb_fields.h)?  Doubles within rel of the field's largest
 * component count as the same.  1, with the first that differs in *d; else 0. */
int nb_panel_differs(const nb_panel *a, const nb_panel *b, int index, nb_panel_scope scope, double rel,
                     nb_panel_difference *d);
/* Frame i of a rotation series: the plan (a shallow copy, as above) with its
 * spindle start moved by i OSC.  For stills (STILLS), shot i: the crystal
 * turned by the shot's orientation, its N and fluence (nb_stills.h); with
 * frame crystals, frame i's (nb_frame_crystal_apply); with frame_mosaic, its
 * MOSAIC_SPREAD frame i's.  Its spectrum needs
 * storage of its own: nb_plan_frame_sources. */
void nb_plan_frame_view(const nb_plan *series, long frame, nb_plan *view);
/* Frame crystals (nb_frame_crystal): p->nframes of fc copied into the plan
 * (replacing any), and the plan's own crystal (CELL_A/B/C, RECIP_A/B/C,
 * UNIT_CELL, N, FLUENCE) set from frame 0's, so that single-frame consumers
 * and headers see frame 0.  Fails on a degenerate cell or a value out of
 * range, naming the frame. */
nb_status nb_plan_set_frame_crystals(nb_plan *p, const nb_frame_crystal *fc);
/* Frame `frame`'s crystal as its view sees it, for any plan: its frame
 * crystal; a still's draw applied to the plan's crystal; a rotation series'
 * the plan's crystal at phi 0, N, fluence and LAMBDA0 (a still with spikes:
 * LAMBDA0 times their mean, 1 + mean d_k).  Status 0 unless stored. */
void nb_plan_frame_crystal(const nb_plan *series, long frame, nb_frame_crystal *out);
/* A frame crystal into a plan (a frame's view): cell vectors, reciprocal
 * vectors and UNIT_CELL worked out from them, N, fluence and LAMBDA0 (the
 * sources are nb_plan_frame_sources'). */
void nb_frame_crystal_apply(const nb_frame_crystal *fc, nb_plan *view);
/* A frame crystal's sanity: finite, positive N, fluence and wavelength, a
 * cell of volume; on failure the status `code`, the message naming `who`
 * and the frame (counted from 1). */
nb_status nb_frame_crystal_check(const nb_frame_crystal *fc, long frame, nb_status code, const char *who);
/* FRAME_CRYSTALS as PLAN keys and back (nb_plan.c calls them): the key
 * FRAME_CRYSTALS (their count) and the array frame_crystals, 15 numbers per
 * frame; absent: none. */
nb_status nb_frame_crystals_to_record(const nb_plan *p, nb_record *rec);
nb_status nb_frame_crystals_from_record(const nb_record *rec, nb_plan *p);
/* Per-frame mosaic spreads (rad, >= 0, finite): p->nframes of them copied
 * into the plan (replacing any).  The plan must have mosaic domains drawn at a
 * spread (MOSAIC_SPREAD > 0): a frame's are those rescaled. */
nb_status nb_plan_set_frame_mosaic(nb_plan *p, const double *spread);
/* Has p mosaic domains drawn at a spread, that another spread can rescale? */
int nb_plan_mosaic_rescalable(const nb_plan *p);
/* frame_mosaic as a PLAN array and back (nb_plan.c calls them): f64, NFRAMES
 * of them; absent: none. */
nb_status nb_frame_mosaic_to_record(const nb_plan *p, nb_record *rec);
nb_status nb_frame_mosaic_from_record(const nb_record *rec, nb_plan *p);

/* Frame identifiers (DIALS's experiment identifiers, which tie a list's
 * experiments to their reflections; nb-geom -expt keeps them): p->nframes
 * of them copied into the plan (replacing any).  Each a string of 1 to 255
 * printable ASCII characters; else an error naming the frame (from 1). */
nb_status nb_plan_set_frame_ids(nb_plan *p, const char *const *ids);
/* Frame `frame`'s (from 0) kept identifier; NULL when the plan keeps none. */
const char *nb_plan_frame_id(const nb_plan *p, long frame);
/* frame_ids as a PLAN array and back (nb_plan.c calls them): u8, the
 * identifiers each NUL-ended, NFRAMES of them; absent: none. */
nb_status nb_frame_ids_to_record(const nb_plan *p, nb_record *rec);
nb_status nb_frame_ids_from_record(const nb_record *rec, nb_plan *p);

/* Recompute from the first panel's FPIXELS, SPIXELS, PIXEL_SIZE, FDET, SDET,
 * ODET, PIX0 and the beam the values that follow from them
 * (docs/physics.md 2.4, steps 6-7): CLOSE_DISTANCE = PIX0 . ODET,
 * DISTANCE = CLOSE_DISTANCE / (BEAM . ODET), FCLOSE/SCLOSE, FBEAM/SBEAM (and
 * XBEAM/YBEAM, XCLOSE/YCLOSE the same), ORGX/ORGY, DIALS_ORIGIN_MM and the
 * detector size; no rotations (they are in the vectors). */
void nb_plan_derive_detector(nb_plan *p);

#endif
