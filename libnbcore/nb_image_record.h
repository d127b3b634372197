/* nb_image_record.h - the IMAGE record: one frame of a detector, as nb-sim,
 * nb-noise and nb-convert --import write it and nb-noise and nb-convert
 * read it.
 *
 * The header keys (docs/stream-format.md, IMAGE) are known here only: a
 * writer fills an nb_image_info and puts it into a record's header, a reader
 * has the header parsed and checked into one.  The pixels (f32 photons) and
 * counts (i32 detector counts) arrays are added and found through the
 * accessors below, which check their dtype and size; the payload itself is
 * never copied here.
 *
 * Where a key's line goes in the header is where it is put: the arrays' lines
 * (ARRAY.pixels, ARRAY.counts) land where the arrays are added, and the frame's
 * keys and the counts' keys are two parts that can be put separately, so that
 * every writer keeps its record's layout (nb-sim adds its pixels before it
 * renders, then puts the keys; nb-noise puts the frame's keys, then the
 * arrays, then the counts' keys).  Within a part the order is that of the
 * table in nb_image_record.c.
 */
#ifndef NB_IMAGE_RECORD_H
#define NB_IMAGE_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "nb_error.h"
#include "nb_plan.h"
#include "nb_stream.h"

/* Everything an IMAGE record's header carries.  Numbers of optional keys are
 * valid when their flag in `has` is set; text keys are present when not ""
 * (a value too long for its field is refused on reading). */
typedef struct nb_image_info {
    /* the frame */
    long frame;                 /* FRAME: 0-based index in the series (0 when absent) */
    long nframes;               /* NFRAMES: frames in the series */
    long panel;                 /* PANEL: detector panel; always 0 (the whole detector) */
    int fpixels, spixels;       /* FPIXELS, SPIXELS: width and height (required; panel 0's) */
    int npanels;                /* PANELS: panels of the detector (1 when absent) */
    int *panel_pixels;          /* PANEL_PIXELS: fast and slow pixel counts of each panel (2 x
                                   npanels, malloc'ed), NULL for one panel */
    char units[32];             /* UNITS: "photons"; a derivative's "photons/mm" ... */
    char grad_of[32];           /* GRAD_OF: the flag a derivative is taken by (nb-sim --grad);
                                   "" for an image */
    char precision[16];         /* PRECISION: the kernel's arithmetic, "single" or "double" */
    double phi_start;           /* PHI_START, rad: spindle angle at the start of the frame */
    double phi_range;           /* PHI_RANGE, rad: rotation during the frame */
    /* a still's shot (nb-geom -stills; nb_stills.h), as nb-sim rendered it */
    double still_rotation[9];   /* STILL_ROTATION: the orientation applied to the plan's crystal, row-major */
    double still_Na, still_Nb, still_Nc; /* STILL_NA, STILL_NB, STILL_NC: unit cells */
    double still_fluence;       /* STILL_FLUENCE, photons/m^2 */
    int still_spikes;           /* spikes of STILL_SPECTRUM (0: the plan's sources) */
    double *still_spectrum;     /* STILL_SPECTRUM, m: the spikes' wavelengths (malloc'ed), NULL: none */
    /* how it was rendered (nb-sim) */
    char rendered_by[64];       /* RENDERED_BY: "nb-sim <version>" */
    double render_seconds;      /* RENDER_SECONDS: wall-clock time of the kernel */
    char render_path[64];       /* RENDER_PATH: the kernel that ran (double, avx512, cuda-fast, ...) */
    double kernel_seconds;      /* KERNEL_SECONDS: the GPU kernel alone (CUDA renders) */
    /* statistics of the photons, as the reference computes them (nb-sim) */
    double max_I, max_I_x, max_I_y; /* MAX_I (photons), MAX_I_X, MAX_I_Y (m) */
    double mean, rms, rmsd;     /* MEAN, RMS, RMSD (photons) */
    double solid_angle;         /* SOLID_ANGLE, sr */
    /* an image read from a file (nb-convert --import) */
    char imported_from[NB_PATH_MAX]; /* IMPORTED_FROM: its path */
    /* arithmetic on the pixels (nb-math) */
    char math[NB_PATH_MAX];     /* MATH: the operations that made them, "; " between runs */
    /* the detector counts (nb-noise, or an imported SMV file) */
    int counts_bits;            /* COUNTS_BITS: 16 or 32 (16 when absent) */
    double counts_adc;          /* COUNTS_ADC, ADU: ADC offset included in the counts */
    double counts_gain;         /* COUNTS_GAIN, ADU/photon */
    int64_t noise_seed;         /* NOISE_SEED: the seed of this frame's counts, positive as on a command line */
    char noise_rng[16];         /* NOISE_RNG: "philox" when the counts come from that generator (nb-noise --rng) */
    double noise_photons;       /* NOISE_PHOTONS: sum of the Poisson photons */
    long noise_overloads;       /* NOISE_OVERLOADS: pixels clipped at the counter's maximum */

    struct {                    /* which optional numeric keys are present */
        int frame, nframes, panel, panels, phi_start, phi_range, render_seconds, kernel_seconds;
        int max_I, max_I_x, max_I_y, mean, rms, rmsd, solid_angle;
        int counts_bits, counts_adc, counts_gain, noise_seed, noise_photons, noise_overloads;
        int still_rotation, still_Na, still_Nb, still_Nc, still_fluence;
    } has;

    /* the arrays, as nb_image_from_record found them described */
    size_t npixels;             /* FPIXELS x SPIXELS (the sum over the panels), the length of each array */
    uint64_t pixels_offset;     /* byte offset of the pixels in the payload */
    int has_counts;             /* a counts array is there */
    uint64_t counts_offset;

    /* keys this module does not know, as "KEY=VALUE\n" lines in the order
     * read (NULL: none), so that a tool rewriting the record keeps them:
     * unknown COUNTS_* and NOISE_* keys belong to the counts, the others to
     * the frame. */
    char *extra;
    char *extra_counts;
} nb_image_info;

void nb_image_info_init(nb_image_info *im);   /* every optional key absent */
void nb_image_info_free(nb_image_info *im);   /* the unknown keys; then as nb_image_info_init */

/* An empty IMAGE record (nb_record_init with the type). */
void nb_image_record_init(nb_record *rec);

/* Put the header keys of `parts` into rec (appended, or replaced in place
 * where rec has them already), in the table's order: FPIXELS and SPIXELS
 * always, the others when present, then the unknown keys of that part.
 * Fails when a text value would break the header (a newline). */
enum { NB_IMAGE_FRAME_KEYS = 1, NB_IMAGE_COUNT_KEYS = 2, NB_IMAGE_ALL_KEYS = 3 };
nb_status nb_image_put_header(const nb_image_info *im, nb_record *rec, unsigned parts);

/* Parse and check an IMAGE record's header into im: FPIXELS and SPIXELS
 * present, positive and matching the pixels array (f32, inside the payload);
 * a counts array, if any, i32 of the same size; every key present well
 * formed (FRAME >= 0, NFRAMES >= 1, FRAME < NFRAMES, PANEL 0, COUNTS_BITS 16
 * or 32, finite angles and ADC offset and gain, text values that fit).
 * Unknown keys are kept in im->extra*.  Only the header and the payload's
 * length are looked at: it works on a record whose payload is not there (a
 * payload hook's first call, or a payload that was not kept).  On failure
 * im is left freed; the message names the key ("IMAGE record: missing key
 * FPIXELS"). */
nb_status nb_image_from_record(const nb_record *rec, nb_image_info *im);

/* The image belongs to the plan: there is one (NULL: "an IMAGE record came
 * before any PLAN record"), and its size is the plan's (every panel's). */
nb_status nb_image_check_plan(const nb_image_info *im, const nb_plan *plan);
/* The panel layout of a plan into im (PANELS and PANEL_PIXELS; nothing for one panel). */
nb_status nb_image_set_panels(nb_image_info *im, const nb_plan *plan);

/* Is the record a derivative (GRAD_OF set), not an image? */
int nb_image_is_grad(const nb_image_info *im);

/* Forget the counts' keys (and the unknown ones of that part), before the
 * counts are made again: nb-noise replaces them. */
void nb_image_drop_counts(nb_image_info *im);

/* Add the pixels (n f32) or counts (n i32) array; data as for
 * nb_record_add_array (NULL: zeros, NB_ARRAY_UNINITIALISED: the caller fills
 * every element, else copied).  *stored (may be NULL) is valid until another
 * array is added. */
nb_status nb_image_add_pixels(nb_record *rec, size_t n, const void *data, float **stored);
nb_status nb_image_add_counts(nb_record *rec, size_t n, const void *data, int32_t **stored);

/* The pixels or counts of a record (pointing into its payload, which must be
 * there), with their count in *n (may be NULL).  Checks the dtype and bounds
 * and, with im (from nb_image_from_record; NULL: any length), that there are
 * FPIXELS x SPIXELS of them. */
nb_status nb_image_pixels(const nb_record *rec, const nb_image_info *im, const float **px, size_t *n);
nb_status nb_image_counts(const nb_record *rec, const nb_image_info *im, const int32_t **counts, size_t *n);

/* The error of a stream that should hold images and has none: "<input>: the
 * stream holds no IMAGE record (run nb-sim first)". */
nb_status nb_image_none(const char *input);

#endif
