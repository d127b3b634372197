/* nb.h - the nb simulation engine's public C API.
 *
 * nb renders nanoBragg's images: absolute photons per pixel from a perfect-
 * lattice nanocrystal in a beam, with mosaicity, divergence and dispersion,
 * polarization and detector absorption.  The experiment comes as the tools'
 * stream (nb-geom's PLAN record, nb-hkl's HKL record), or as nb-geom's flags
 * (nb_renderer_from_args); the structure factors from the stream, the plan's
 * -default_F or your arrays (nb_renderer_set_F); detector counts (nb-noise's
 * chain) from the photons (nb_renderer_noise_frame); image files read and
 * written in the tools' formats (nb_image_read, nb_image_write).  Everything
 * goes into buffers you own, but for what nb_free and nb_image_data_free
 * release.
 *
 *     const char *flags[] = {"-cell", "100", "100", "100", "90", "90", "90", "-lambda", "6.2",
 *                            "-N", "5", "-detpixels", "256", "-default_F", "100"};
 *     nb_renderer *r;
 *     if (nb_renderer_from_args(15, flags, NULL, &r)) { puts(nb_last_error()); ... }
 *     float *photons = malloc(nb_renderer_pixels(r) * sizeof(float));
 *     nb_render_frame(r, 0, photons);             // every panel, in panel order
 *     nb_renderer_free(r);
 *
 * Build with pkg-config: cc prog.c $(pkg-config --cflags --libs nb).
 *
 * Every function that can fail returns 0 (NB_RESULT_OK) or an nb_result
 * and keeps a message for nb_last_error(); none exits or prints, except the
 * engine's warnings on standard error (nb_set_log_level).  A renderer is used
 * by one thread at a time; its renders use OpenMP threads of their own.
 *
 * Compatibility: libnb.so exports these functions and nothing else (symbol
 * version NB_1).  Within one major version (the soname, libnb.so.MAJOR) a
 * library runs every program built with an nb.h no newer than itself:
 * functions are only added, and a structure of this header never changes its
 * layout (nb_render_config stays as it is; settings that come later are
 * named options, nb_options).  NB_VERSION_CHECK() below tells a program that
 * the library it runs on is such a one.
 */
#ifndef NB_H
#define NB_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 1: the 17 functions of nb 0.1.0; 2: options, versions, flags (file flags
 * too), F from arrays, noise, named parameters, image files, the fits (the
 * functions after "API 2" below); 3 (nb 0.2.0): a renderer's options reset,
 * pixels in double, the vector-Jacobian product (after "API 3"). */
#define NB_API_VERSION 3

/* The version of this header: nb_version_number() is the library's. */
#define NB_VERSION_MAJOR 0
#define NB_VERSION_MINOR 2
#define NB_VERSION_PATCH 0
#define NB_VERSION_NUMBER (NB_VERSION_MAJOR * 10000 + NB_VERSION_MINOR * 100 + NB_VERSION_PATCH)

/* What the library exports (the others are hidden: -fvisibility=hidden). */
#if defined(__GNUC__) || defined(__clang__)
#define NB_API __attribute__((visibility("default")))
#else
#define NB_API
#endif

/* What a call returns (the same numbers as the tools' nb_status). */
typedef enum nb_result {
    NB_RESULT_OK = 0,
    NB_RESULT_USAGE = 1,       /* a bad argument: a frame, panel or region out of range, an unknown name */
    NB_RESULT_IO = 2,          /* a file could not be read */
    NB_RESULT_DATA = 3,        /* malformed or inconsistent input: not a stream, no PLAN record */
    NB_RESULT_NOMEM = 4,       /* out of memory */
    NB_RESULT_UNSUPPORTED = 5  /* a valid request this build or machine cannot do (no CUDA device, a file
                                  flag of nb-hkl's for a renderer) */
} nb_result;

/* The message of the last failure on this thread. */
NB_API const char *nb_last_error(void);
/* The library's version ("0.1.0"). */
NB_API const char *nb_version(void);
/* -1: no warnings; 0: warnings (the default); 1: the tools' -v lines too. */
NB_API void nb_set_log_level(int level);

typedef enum nb_device_choice {
    NB_DEVICE_CPU = 0,   /* OpenMP threads over rows, SIMD lanes across pixels */
    NB_DEVICE_CUDA = 1,  /* the first CUDA device; an error where there is none */
    NB_DEVICE_AUTO = 2   /* CUDA when the build has it and a GPU is there, else the CPU */
} nb_device_choice;

typedef enum nb_precision_choice {
    NB_PRECISION_PLAN = 0,   /* the plan's (nb-geom -precision; the fast path by default) */
    NB_PRECISION_FAST = 1,   /* single precision after the Miller index (nb-sim's default) */
    NB_PRECISION_DOUBLE = 2  /* the reference-faithful double path: nanoBragg's own operations */
} nb_precision_choice;

/* API 1's settings, kept as they are (their layout is part of the ABI); the
 * growable way is nb_options ("device", "precision", "threads"). */
typedef struct nb_render_config {
    nb_device_choice device;
    nb_precision_choice precision;
    int threads;             /* OpenMP threads for CPU renders; 0: OpenMP's default */
} nb_render_config;
NB_API void nb_render_config_init(nb_render_config *c);

typedef struct nb_renderer nb_renderer;

/* A renderer from the bytes of an nb stream: its first PLAN record and the
 * HKL record after it (without one, the plan's -default_F; later records are
 * not read).  The bytes are copied as needed: the caller may free them.
 * Without an HKL record and a -default_F: NB_RESULT_USAGE (the _opts form
 * below waits for nb_renderer_set_F instead).  c NULL: the defaults. */
NB_API int nb_renderer_from_stream(const void *bytes, size_t size, const nb_render_config *c, nb_renderer **out);
/* The same from the structures the records decode to (libnbcore's nb_plan,
 * nb_hkl; hkl NULL: the plan's -default_F), copied.  Kept for API 1's
 * programs: the structures are the tools' own and nb.h does not declare
 * them; a program makes a renderer from a stream or from flags instead. */
struct nb_plan;
struct nb_hkl;
NB_API int nb_renderer_from_plan(const struct nb_plan *plan, const struct nb_hkl *hkl, const nb_render_config *c,
                                 nb_renderer **out);
/* NULL: nothing to do. */
NB_API void nb_renderer_free(nb_renderer *r);

/* The plan's frames (a rotation's or a series of stills'), panels and
 * pixels: a frame's image is every panel's pixels in panel order, each panel
 * fast index fastest. */
NB_API int nb_renderer_frames(const nb_renderer *r);
NB_API int nb_renderer_panels(const nb_renderer *r);
NB_API int nb_renderer_panel_size(const nb_renderer *r, int panel, int *fast, int *slow);
NB_API size_t nb_renderer_pixels(const nb_renderer *r);

/* Frame `frame` (0-based), every panel, into photons (nb_renderer_pixels
 * floats): exactly nb-sim's image of that frame (0 outside the plan's ROI
 * and mask). */
NB_API int nb_render_frame(nb_renderer *r, long frame, float *photons);
/* One panel of it (fast x slow floats). */
NB_API int nb_render_panel(nb_renderer *r, long frame, int panel, float *photons);

/* A rectangle of pixels of one panel. */
typedef struct nb_region {
    int panel;
    int fast, slow;            /* its first pixel */
    int fast_count, slow_count;
} nb_region;
/* The pixels of each region, one after another (each slow_count rows of
 * fast_count), the same values nb_render_panel gives there; only the
 * regions' pixels are rendered. */
NB_API int nb_render_regions(nb_renderer *r, long frame, const nb_region *regions, int count, float *photons);

/* Derivatives: the names of nb-sim --grad (a comma-separated list such as
 * "distance,Xbeam,Ybeam,misset_x"; NULL or "" for none) that
 * nb_render_frame_grad follows from now on. */
NB_API int nb_renderer_set_derivatives(nb_renderer *r, const char *names);
NB_API int nb_renderer_derivatives(const nb_renderer *r);
/* The frame's image (photons may be NULL) and d image / d name for each
 * name set, grads[j] the j-th name's (nb_renderer_pixels floats each). */
NB_API int nb_render_frame_grad(nb_renderer *r, long frame, float *photons, float **grads);

/* ==== API 2 ================================================================ */

/* The library's version as a number, MAJOR * 10000 + MINOR * 100 + PATCH
 * (NB_VERSION_NUMBER of the nb.h it was built with). */
NB_API int nb_version_number(void);
/* Whether the library this program runs on runs what it was built for: the
 * same major version as this nb.h, and not older.  A program checks it once,
 * before any other call:
 *     if (!NB_VERSION_CHECK()) { fprintf(stderr, "libnb %s is older than nb.h\n", nb_version()); exit(1); } */
#define NB_VERSION_CHECK() \
    (nb_version_number() / 10000 == NB_VERSION_MAJOR && nb_version_number() >= NB_VERSION_NUMBER)

/* What the library allocated for the caller (nb_plan_stream_from_args's
 * bytes, nb_image_read's arrays); NULL: nothing to do. */
NB_API void nb_free(void *p);

/* ---- options: settings by name, in the manner of zstd's parameters --------
 *
 * A set of named settings, each with a default, made for one use: a
 * renderer's (NB_OPTIONS_RENDER) or the noise's (NB_OPTIONS_NOISE).  Later
 * versions add names; a name this library does not know is NB_RESULT_USAGE
 * with a message that lists the ones it does, so a program can tell.
 *
 * NB_OPTIONS_RENDER:
 *   "device"     string cpu | cuda | auto, or int NB_DEVICE_* (default cpu)
 *   "precision"  string plan | fast | double, or int NB_PRECISION_* (default plan)
 *   "threads"    int >= 0: OpenMP threads for CPU renders; 0 OpenMP's default
 * NB_OPTIONS_NOISE (nb-noise's flags, their units and defaults):
 *   "seed"        int: as nb-noise -seed (frame i's seed derived from it);
 *                 default: the plan's seed (nb_renderer_noise_frame); nb_noise_image needs one
 *   "calib_seed"  int, default 123456789: the calibration error's pattern
 *   "adc"         double, counts: the ADC offset (default the plan's -adc, 40)
 *   "gain"        double >= 0, ADU per photon (default 1)
 *   "scale"       double >= 0: photons multiplied before counting (default 1)
 *   "fluence"     double > 0, photons/m^2: photons rescaled from the plan's
 *                 fluence to this one (nb_renderer_noise_frame only)
 *   "flicker", "calibration"  double >= 0, fractions (default 0: off)
 *   "readout"     double >= 0, ADU: read-out noise (default 0: off)
 *   "psf"         string none | gauss | fiber (default none)
 *   "psf_fwhm"    double >= 0, um: the PSF's width (default 46)
 *   "psf_radius"  int 0..100000 pixels (default 0: automatic)
 *   "bits"        int 16 or 32: the counter's depth, its overload (default 16)
 *   "rng"         string reference | philox: nanoBragg's generator, one
 *                 sequence in the pixels' order (default); or nb-noise
 *                 --rng philox's, each pixel's deviates its own, every thread
 *   "pixel_size"  double > 0, mm: the pixel the PSF's width is measured in
 *                 (nb_noise_image only, default 0.1; a renderer's frame has the plan's)
 *
 * The setters check the value (its type and range) and keep it; a value of
 * the wrong type (a string for "threads" that is not a number, a fraction
 * for an int) is NB_RESULT_USAGE.  nb_options_set_string takes every name,
 * numbers as text ("4"); nb_options_set_int takes the int and double ones
 * and the choices' NB_* numbers; nb_options_set_double the double ones. */
typedef struct nb_options nb_options;
typedef enum nb_options_kind { NB_OPTIONS_RENDER = 1, NB_OPTIONS_NOISE = 2 } nb_options_kind;
/* A set of `kind`'s defaults, the caller's (nb_options_free); NULL when the
 * kind is unknown or memory is short (nb_last_error says which). */
NB_API nb_options *nb_options_new(nb_options_kind kind);
/* NULL: nothing to do. */
NB_API void nb_options_free(nb_options *o);
NB_API int nb_options_set_int(nb_options *o, const char *name, long long value);
NB_API int nb_options_set_double(nb_options *o, const char *name, double value);
NB_API int nb_options_set_string(nb_options *o, const char *name, const char *value);

/* nb_renderer_from_stream with options (NB_OPTIONS_RENDER; NULL: the
 * defaults), which the renderer copies.  A stream without an HKL record
 * whose plan has no -default_F (or asks for nb-hkl's -hkl file) gives a
 * renderer all the same, that renders only once nb_renderer_set_F has given
 * it structure factors (until then a render is NB_RESULT_USAGE). */
NB_API int nb_renderer_from_stream_opts(const void *bytes, size_t size, const nb_options *options,
                                        nb_renderer **out);

/* ---- plans from nb-geom's flags, in this process --------------------------
 *
 * argv[0 .. argc-1] are nb-geom's flags and their values, with nanoBragg's
 * spellings, units and defaults ("-cell", "100", ..., "-lambda", "6.2"), and
 * no program name; the strings are read, not kept.  A flag nb-geom does not
 * take, a missing or bad value: NB_RESULT_USAGE and nb-geom's message
 * (nothing is printed; -v's geometry log goes to standard error at log
 * level 1).  nb-geom's own options (-o, -q, -v, --help) are not flags of the
 * experiment and are refused likewise.  Files are read as nb-geom reads
 * them, with the same readers: -img FILE and -mask FILE (an SMV header; a
 * mask's zero pixels not rendered), -panels FILE (a CrystFEL .geom or a
 * DIALS .expt: the detector), -expt FILE (a DIALS experiment list: the
 * detector, beam, crystals and frames), -matrix, -sourcefile, -stol.  A file
 * that cannot be read is NB_RESULT_IO or NB_RESULT_DATA, naming it. */

/* nb-geom's stream for the flags: its PLAN record and END, byte for byte
 * what `nb-geom FLAGS` writes when the clock plays no part (give -seed; the
 * plan records the command as "nb-geom FLAGS").  *bytes: the caller's, freed
 * with nb_free; NULL on failure.  The flags of later stages (-hkl,
 * -floatfile ...) are recorded in the plan, as nb-geom does, for the tools. */
NB_API int nb_plan_stream_from_args(int argc, const char *const *argv, void **bytes, size_t *size);
/* A renderer for the flags (options: NB_OPTIONS_RENDER, NULL: the
 * defaults): the plan nb_plan_stream_from_args makes, its structure factors
 * the plan's -default_F, until nb_renderer_set_F gives others (without
 * -default_F a render waits for them).  -hkl and -dump, whose files nb-hkl
 * reads, are NB_RESULT_UNSUPPORTED: give the F as arrays instead. */
NB_API int nb_renderer_from_args(int argc, const char *const *argv, const nb_options *options, nb_renderer **out);

/* ---- structure factors from arrays -----------------------------------------
 *
 * The renderer's F from now on: n reflections, F[i] at (h[i], k[i], l[i]),
 * taken as P1 (no symmetry expansion, no Friedel mates: give every index
 * the image needs) exactly as nb-hkl takes an 'h k l F' list: a grid over
 * the indices' box, every other index in it and every index outside it the
 * plan's -default_F (0 unless given), a later duplicate winning.  The arrays
 * are copied.  n 0, a NULL array, a non-finite F or an index beyond
 * +-1000000 is NB_RESULT_USAGE, a box too large for memory NB_RESULT_NOMEM;
 * either way the renderer keeps the F it had. */
NB_API int nb_renderer_set_F(nb_renderer *r, const int *h, const int *k, const int *l, const double *F, size_t n);

/* ---- detector counts: nb-noise's chain -------------------------------------
 *
 * Counts (int32, every pixel written) from photons, as nb-noise adds them to
 * nb-sim's images: nanoBragg's Poisson noise image plus the ADC offset,
 * clipped at the counter's overload, and, when asked, noisify's effects in
 * its order (scale, flicker, calibration error, Poisson, PSF, gain, ADC,
 * read-out noise).  options: NB_OPTIONS_NOISE (NULL: the defaults).  A
 * non-finite photon count is NB_RESULT_DATA.  On the CPU. */

/* Frame `frame` of r's plan from its photons (nb_renderer_pixels floats, as
 * nb_render_frame gives them) into counts (as many int32): the counts
 * `nb-sim | nb-noise` gives that frame, bit for bit: each panel over its ROI
 * (0 outside), the seed the plan's or "seed", frame i's derived from it as
 * nb-noise derives it, frame 0 continuing the plan's generator state.  The
 * renderer is not changed: the same call gives the same counts.  The plan's
 * -nonoise does not stop it. */
NB_API int nb_renderer_noise_frame(const nb_renderer *r, long frame, const float *photons,
                                   const nb_options *options, int32_t *counts);
/* One image of fast x slow pixels, no plan: the whole image counted, as
 * nb-noise counts frame 0 of a one-panel plan of that size without an ROI,
 * from options' "seed" (needed: NB_RESULT_USAGE without one) on a fresh
 * generator; the PSF's width in pixels of "pixel_size". */
NB_API int nb_noise_image(const float *photons, int fast, int slow, const nb_options *options, int32_t *counts);

/* ---- named parameters: the plan moved by name ------------------------------
 *
 * The plan's parameters (docs/physics.md 14), the names nb-sim --grad and
 * nb_renderer_set_derivatives take: distance, Xbeam, Ybeam, the detector's
 * rotations, the cell, misset_* (-misset's angles), rot_* (turns from the
 * plan's orientation), Na/Nb/Nc, mosaic, lambda, fluence, scale, and each
 * panel's panel<i>_shift_fast/_slow/_normal and panel<i>_rot_fast/_slow/
 * _normal (i from 0).  They act on the plan itself, however it was made. */

/* The table: how many rows, row i's name (a panel's written
 * "panel<i>_shift_fast"; NULL beyond the table) and a name's unit ("mm",
 * "degree" ...; NULL for an unknown name, nb_last_error saying why). */
NB_API int nb_parameter_count(void);
NB_API const char *nb_parameter_name(int i);
NB_API const char *nb_parameter_unit(const char *name);
/* A parameter's value in r's plan, in its unit.  rot_*, scale and a panel's
 * moves are moves from the plan as it is: they read 0, 1 and 0.  An unknown
 * name, a panel the detector lacks, the mosaic of a plan without a spread:
 * NB_RESULT_USAGE. */
NB_API int nb_renderer_get_parameter(const nb_renderer *r, const char *name, double *value);
/* Set it: r's plan moved (what it moves: docs/physics.md 14); every later
 * render and derivative is of the moved plan.  On an error the plan is as
 * it was. */
NB_API int nb_renderer_set_parameter(nb_renderer *r, const char *name, double value);

/* ---- the fit: a renderer's parameters refined to observed images ----------
 *
 * libnb's fit (fit/: the Levenberg-Marquardt loop and the likelihood that
 * nb-fit runs): the named parameters above, shared by every frame, refined
 * from the renderer's plan to the caller's images by least squares, then
 * (the default) the Poisson likelihood, on the parameters' analytic
 * derivatives; sigmas from the inverse Fisher information.  The frames may
 * be spread over processes: each gives its own frames' pixels and a `sum`
 * that adds a vector over the processes (MPI_Allreduce, a pipe, Python's
 * multiprocessing); every process then takes the same steps and gets the
 * same values. */

/* One observed frame: every panel's pixels in nb_render_frame's order
 * (nb_renderer_pixels floats).  With gain > 0 they are detector counts,
 * photons = (pixel - offset) / gain, and a negative count (a detector's
 * flag) is left out; with gain 0 they are photons.  A pixel whose mask byte
 * is 0 (mask NULL: none), at or above overload (0: no overload) or not
 * finite is left out.  pixels NULL: a frame another process fits. */
typedef struct nb_fit_image {
    const float *pixels;
    const unsigned char *mask;
    double gain, offset, overload;
} nb_fit_image;

typedef enum nb_fit_loss_choice { NB_FIT_LOSS_POISSON = 0, NB_FIT_LOSS_LSQ = 1 } nb_fit_loss_choice;

/* values[0..n) summed element-wise over every process, in place, each
 * getting the sum; 0 on success. */
typedef int (*nb_fit_sum_fn)(void *ctx, double *values, size_t n);

/* How to fit.  size: sizeof (nb_fit_settings) as the caller was compiled
 * (the struct grows at its end; fields past a caller's size take their
 * defaults); nb_fit_settings_init sets every default. */
typedef struct nb_fit_settings {
    size_t size;
    nb_fit_loss_choice loss;   /* the last stage's (least squares always first); default Poisson */
    int iterations;            /* each stage's at most; default 50 */
    int rank, processes;       /* this process, of how many; default 0 of 1 */
    nb_fit_sum_fn sum;         /* with processes > 1: the sum over them */
    void *sum_ctx;
} nb_fit_settings;
NB_API void nb_fit_settings_init(nb_fit_settings *s);

/* What the fit ended with; size as for nb_fit_settings. */
typedef struct nb_fit_result {
    size_t size;
    double nll;                /* -log L (Poisson) or RSS/2, over every process */
    long pixels;               /* pixels fitted, over every process */
    int iterations;            /* the last stage's */
    int converged;             /* 0: the last stage stopped at `iterations` */
} nb_fit_result;

/* Refine names[0..n) (nb_parameter_name's, and "scale": a factor on every
 * frame's photons, refined into the fluence) from r's plan to images, one
 * per frame of r (nb_renderer_frames).  values and sigmas (n each, NULL:
 * not wanted) get each name's refined value and its standard deviation, in
 * its unit; r's plan becomes the refined one (every later render and
 * nb_renderer_get_parameter is of it).  The model is the one r renders: its
 * precision (the plan's: the fast path unless it says -precision double;
 * nb-fit's default is the double path) on r's device, with r's F.  s NULL: the defaults; result NULL: not wanted.  An unknown or
 * repeated name, a frame without pixels in one process, no pixel left:
 * NB_RESULT_USAGE; a parameter the images do not fix: NB_RESULT_DATA.  On an
 * error r's plan is as it was. */
NB_API int nb_fit_renderer(nb_renderer *r, const char *const *names, int n, const nb_fit_image *images,
                           const nb_fit_settings *s, double *values, double *sigmas, nb_fit_result *result);

/* ---- the dataset fit: each frame's own values, shared ones, F --------------
 *
 * nb-fit --refine-frame / --refine-F as a call (docs/physics.md 15.1): each
 * frame's own values (rot_x, rot_y, rot_z: turns in degrees about the lab's
 * axes from the frame's crystal; cell_*, Na/Nb/Nc, lambda, mosaic, scale),
 * values shared by every frame (distance, Xbeam, Ybeam, cell_*, Na/Nb/Nc,
 * lambda, mosaic, scale), and with refine_F the structure factors from
 * every pixel, refined to the caller's images (nb_fit_image, one per frame
 * of r) by the same loop and likelihood, with regions around the spots, a
 * global stage, and a verdict for each frame: a frame the model does not
 * explain fails, keeps its start and is left out of the shared values and
 * F.  On success r's plan is the refined one (its frames' crystals) and,
 * with refine_F, r's F the refined ones. */
typedef struct nb_fit_dataset_settings {
    size_t size;               /* sizeof (nb_fit_dataset_settings); nb_fit_dataset_settings_init */
    const char *refine;        /* the shared names, comma-separated (NULL: none) */
    const char *refine_frame;  /* each frame's own names, comma-separated (NULL: none) */
    int refine_F;              /* F from every pixel */
    nb_fit_loss_choice loss;   /* default Poisson */
    int iterations;            /* each stage's at most; default 50 */
    int rank, processes;       /* as nb_fit_settings's */
    nb_fit_sum_fn sum;
    void *sum_ctx;
    const int *symmetry;       /* refine_F's space group: nops rotation matrices R (9 ints each, row by
                                * row; an index goes to h R); NULL: P 1 */
    int nops;
    const char *spots;         /* a DIALS reflection table (.refl: dials.find_spots', dials.index's) whose
                                * spots are the observed ones, tied to r's frames by their experiments'
                                * identifiers (nb-fit --spots); NULL: the fit finds its own */
} nb_fit_dataset_settings;
NB_API void nb_fit_dataset_settings_init(nb_fit_dataset_settings *s);

typedef struct nb_fit_dataset nb_fit_dataset;

/* Fit; *out gets what the fit came to (free it with nb_fit_dataset_free).
 * Refusals as nb_fit_renderer's, and names a frame or the shared values
 * cannot have. */
NB_API int nb_fit_dataset_renderer(nb_renderer *r, const nb_fit_image *images, const nb_fit_dataset_settings *s,
                                   nb_fit_dataset **out);
/* A refined value and its sigma, in its unit: frame's own (frame 0 ..), or
 * a shared one (frame -1).  A name not refined there: NB_RESULT_USAGE. */
NB_API int nb_fit_dataset_value(const nb_fit_dataset *f, long frame, const char *name, double *value, double *sigma);
/* Frame's verdict: 0 passed, 1 failed (*why, when not NULL, says why: the
 * library's string, valid until nb_fit_dataset_free), -1 an error (no such
 * frame, or a frame not fitted). */
NB_API int nb_fit_dataset_verdict(const nb_fit_dataset *f, long frame, const char **why);
NB_API void nb_fit_dataset_free(nb_fit_dataset *f);
/* ---- image files: the tools' formats -------------------------------------
 *
 * Images read and written by the readers and writers the tools use (the
 * format registry): nb_image_read reads what nb-convert --import and nb-fit
 * --observed read, nb_image_write writes what nb-convert -o writes for one
 * frame.
 *
 * An image: photons (float) or detector counts (double, as the file stores
 * them: the offset included) with what the file says of them.  `size` is the
 * caller's sizeof(nb_image_data), set by nb_image_data_init: a later nb.h
 * adds fields at the end, and the library reads and writes only those the
 * caller's structure has. */
typedef struct nb_image_data {
    size_t size;              /* sizeof(nb_image_data) as the caller was built: nb_image_data_init */
    int width, height;        /* pixels, fast and slow (a stream or raw float file of several panels:
                                 every panel's pixels in one row, height 1) */
    size_t pixels;            /* width x height */
    int is_counts;            /* 1: counts; 0: photons */
    float *photons;           /* photons per pixel (is_counts 0), else NULL */
    double *counts;           /* counts as stored, offset included (is_counts 1), else NULL */
    unsigned char *untrusted; /* counts: 1 where a count is negative or overloaded (NULL for photons; an
                                 image to write may leave it NULL) */
    int bits;                 /* counts: the counter's depth, 16 or 32 */
    double offset;            /* counts: the pedestal they include, ADU */
    double gain;              /* counts: ADU per photon */
    double overload;          /* counts: from this count up a pixel is overloaded */
    int offset_stated;        /* 1: the file's offset; 0: the plan's ADC (-adc; 40 without a renderer) */
    int overload_stated;      /* 1: the file's overload; 0: the top of its counter */
    size_t negative, overloaded; /* the untrusted pixels, by kind */
    const char *format;       /* nb_image_read: the format it was read as ("cbf", "smv", "tif", "bin",
                                 "nbs"), the library's string */
} nb_image_data;

/* Every field 0, size set, gain 1, bits 16: an image to fill, or for
 * nb_image_read. */
NB_API void nb_image_data_init(nb_image_data *image);
/* The arrays nb_image_read allocated (each could be given to nb_free), then
 * as nb_image_data_init; NULL: nothing to do.  Not for arrays of the
 * caller's. */
NB_API void nb_image_data_free(nb_image_data *image);

/* The image in path, by its first bytes, else its name's suffix, else raw
 * float32 (a name without a suffix or a number for one): CBF, SMV (.img),
 * TIFF (16- or 32-bit counts, float photons), raw float32 (.bin), an nb
 * stream (.nbs: the IMAGE record of `frame`, its counts when nb-noise added
 * them) or NXmx (.nxs, .h5: frame `frame` of nb's file or an Eiger's master
 * with its data files, the pixel_mask's pixels untrusted; its frame count
 * r's plan's).  r (may be NULL): the renderer whose image it must be (its
 * nb_renderer_pixels), whose plan's ADC is the offset of counts whose file
 * states none.  frame: 0-based, of a stream or an NXmx file; 0 for the
 * other formats.  The
 * counts' offset, gain, overload and untrusted pixels by the tools' one rule
 * (the file's own, else the plan's ADC, 1 and the counter's top).  image:
 * initialised by nb_image_data_init; its arrays the library's
 * (nb_image_data_free).  A NULL path or image, a negative frame or one a
 * file of one image lacks, a format that cannot be read (PNG, PGM ...):
 * NB_RESULT_USAGE; a file that cannot be read NB_RESULT_IO, or
 * NB_RESULT_DATA when it is not what it claims (a stream without that
 * frame); image is then empty. */
NB_API int nb_image_read(const char *path, const nb_renderer *r, long frame, nb_image_data *image);

/* image into path in format: nb-convert's name for it ("bin", "smv", "cbf",
 * "tif", "tif-float", "tif16", "tif32", "pgm", "png"; or an alias: "img",
 * "tiff" ...), or NULL to take it from the name's suffix as nb-convert -o
 * does.  Its header is frame `frame` of r's plan (distance, beam centre,
 * wavelength, oscillation ...), as nb-convert writes that frame of the
 * stream; r NULL: the plan nb-geom makes for a detector of the image's size
 * with no other flag.  The image must have r's pixels (a renderer of one
 * panel, but for raw float).  Photons go to the integer formats (CBF, SMV,
 * 16/32-bit TIFF) as the reference's int image (-scale, -adc: nb-convert's
 * without counts); counts as they are (the offset kept in SMV and TIFF,
 * taken off in CBF, as a PILATUS counts), and to the photon formats (raw
 * float, float TIFF, PGM, PNG) as (counts - offset) / gain.  A format that
 * is not one image (NXmx, XDS.INP, .expt, .nbs ...) or unknown, a NULL
 * path, an image without pixels or of another size: NB_RESULT_USAGE; a file
 * that cannot be written: NB_RESULT_IO. */
NB_API int nb_image_write(const char *path, const char *format, const nb_image_data *image, const nb_renderer *r,
                          long frame);

/* ==== API 3 ================================================================ */

/* r's settings from now on: every NB_OPTIONS_RENDER setting of o ("device",
 * "precision", "threads"; those o does not set, their defaults; o NULL:
 * every default), as nb_renderer_from_stream_opts takes them.  A device
 * the machine lacks is refused at the next render, as at the first.
 * Options of another kind: NB_RESULT_USAGE, r unchanged. */
NB_API int nb_renderer_set_options(nb_renderer *r, const nb_options *o);

/* The reference-faithful double path's pixels in double, as they are before
 * nb-sim's float image rounds them (nb_render_frame under the double
 * precision gives those values rounded), whatever r's precision: frame
 * `frame`, every panel, into photons (nb_renderer_pixels doubles).  On the
 * CPU: a renderer on a GPU gives NB_RESULT_UNSUPPORTED. */
NB_API int nb_render_frame_double(nb_renderer *r, long frame, double *photons);
/* The same with the derivatives nb_renderer_set_derivatives named, in
 * double: photons may be NULL, grads[j] the j-th name's. */
NB_API int nb_render_frame_grad_double(nb_renderer *r, long frame, double *photons, double **grads);

/* The vector-Jacobian product of frame `frame`: for each derivative named
 * (nb_renderer_set_derivatives), vjp[j] = the sum over the frame's pixels p
 * of weights[p] x d photons[p] / d name_j (weights: nb_renderer_pixels
 * doubles, in nb_render_frame's order), added in double in a fixed order
 * (the same sum on any thread count); what autograd's backward asks of a
 * render, with no image of derivatives kept.  The fast path on the CPU
 * weighs each row's derivatives as it renders them and adds the rows in
 * order; the double path and the GPU render a panel's derivatives into
 * scratch the renderer keeps for the next call, then add them in blocks of
 * pixels.  precision: which
 * path's derivatives: NB_PRECISION_DOUBLE the double path's in double (on
 * the CPU, as nb_render_frame_double), NB_PRECISION_FAST the fast path's,
 * NB_PRECISION_PLAN r's own precision (nb_render_frame_grad's). */
NB_API int nb_render_frame_vjp(nb_renderer *r, long frame, nb_precision_choice precision, const double *weights,
                               double *vjp);

#ifdef __cplusplus
}
#endif

#endif
