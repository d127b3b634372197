/* nb.h - the nb simulation engine's public C API.
 *
 * nb renders nanoBragg's images: absolute photons per pixel from a perfect-
 * lattice nanocrystal in a beam, with mosaicity, divergence and dispersion,
 * polarization and detector absorption.  The experiment comes as the tools'
 * stream (nb-geom's PLAN record, nb-hkl's HKL record): make it with the
 * tools, a file or a pipe, and render it here, in your own program, into
 * buffers you own.
 *
 *     nb_render_config c;
 *     nb_render_config_init(&c);                  // the CPU, the plan's precision
 *     nb_renderer *r;
 *     if (nb_renderer_from_stream(bytes, size, &c, &r)) { puts(nb_last_error()); ... }
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
 */
#ifndef NB_H
#define NB_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NB_API_VERSION 1

/* What a call returns (the same numbers as the tools' nb_status). */
typedef enum nb_result {
    NB_RESULT_OK = 0,
    NB_RESULT_USAGE = 1,       /* a bad argument: a frame, panel or region out of range, an unknown name */
    NB_RESULT_IO = 2,          /* a file could not be read */
    NB_RESULT_DATA = 3,        /* malformed or inconsistent input: not a stream, no PLAN record */
    NB_RESULT_NOMEM = 4,       /* out of memory */
    NB_RESULT_UNSUPPORTED = 5  /* a valid request this build or machine cannot do (no CUDA device) */
} nb_result;

/* The message of the last failure on this thread. */
const char *nb_last_error(void);
/* The library's version ("0.1.0"). */
const char *nb_version(void);
/* -1: no warnings; 0: warnings (the default); 1: the tools' -v lines too. */
void nb_set_log_level(int level);

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

typedef struct nb_render_config {
    nb_device_choice device;
    nb_precision_choice precision;
    int threads;             /* OpenMP threads for CPU renders; 0: OpenMP's default */
} nb_render_config;
void nb_render_config_init(nb_render_config *c);

typedef struct nb_renderer nb_renderer;

/* A renderer from the bytes of an nb stream: its first PLAN record and the
 * HKL record after it (without one, the plan's -default_F; later records are
 * not read).  The bytes are copied as needed: the caller may free them. */
int nb_renderer_from_stream(const void *bytes, size_t size, const nb_render_config *c, nb_renderer **out);
/* The same from the structures the records decode to (libnbcore's nb_plan,
 * nb_hkl; hkl NULL: the plan's -default_F), copied. */
struct nb_plan;
struct nb_hkl;
int nb_renderer_from_plan(const struct nb_plan *plan, const struct nb_hkl *hkl, const nb_render_config *c,
                          nb_renderer **out);
void nb_renderer_free(nb_renderer *r);

/* The plan's frames (a rotation's or a series of stills'), panels and
 * pixels: a frame's image is every panel's pixels in panel order, each panel
 * fast index fastest. */
int nb_renderer_frames(const nb_renderer *r);
int nb_renderer_panels(const nb_renderer *r);
int nb_renderer_panel_size(const nb_renderer *r, int panel, int *fast, int *slow);
size_t nb_renderer_pixels(const nb_renderer *r);

/* Frame `frame` (0-based), every panel, into photons (nb_renderer_pixels
 * floats): exactly nb-sim's image of that frame (0 outside the plan's ROI
 * and mask). */
int nb_render_frame(nb_renderer *r, long frame, float *photons);
/* One panel of it (fast x slow floats). */
int nb_render_panel(nb_renderer *r, long frame, int panel, float *photons);

/* A rectangle of pixels of one panel. */
typedef struct nb_region {
    int panel;
    int fast, slow;            /* its first pixel */
    int fast_count, slow_count;
} nb_region;
/* The pixels of each region, one after another (each slow_count rows of
 * fast_count), the same values nb_render_panel gives there; only the
 * regions' pixels are rendered. */
int nb_render_regions(nb_renderer *r, long frame, const nb_region *regions, int count, float *photons);

/* Derivatives: the names of nb-sim --grad (a comma-separated list such as
 * "distance,Xbeam,Ybeam,misset_x"; NULL or "" for none) that
 * nb_render_frame_grad follows from now on. */
int nb_renderer_set_derivatives(nb_renderer *r, const char *names);
int nb_renderer_derivatives(const nb_renderer *r);
/* The frame's image (photons may be NULL) and d image / d name for each
 * name set, grads[j] the j-th name's (nb_renderer_pixels floats each). */
int nb_render_frame_grad(nb_renderer *r, long frame, float *photons, float **grads);

#ifdef __cplusplus
}
#endif

#endif
