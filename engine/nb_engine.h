/* nb_engine.h - the renderer as the tools use it: a frame's plan, a device,
 * and one call that renders a panel of it (the image, or the image and its
 * derivatives) into the caller's buffer.
 *
 * nb-sim, nb-fit and nb.h's public API (nb.c) render through here, so that
 * the choice of kernel (fast or double, CPU or CUDA, with or without
 * derivatives), the hoisting of a panel's constants (nb_sim_setup) and a
 * still's own spectrum are made in one place.  Printing, statistics and
 * records stay with the programs.
 */
#ifndef NB_ENGINE_H
#define NB_ENGINE_H

#include "nb_sim.h"
#include "nb_sim_cuda.h"
#include "nb_sim_grad.h"

typedef enum nb_engine_device { NB_ENGINE_AUTO, NB_ENGINE_CPU, NB_ENGINE_CUDA } nb_engine_device;

/* The device a run renders on: CUDA is opened at the first render that may
 * use it (AUTO: when there is a GPU, else the CPU with the reason under -v;
 * CUDA: an error when there is none). */
typedef struct nb_engine nb_engine;
nb_status nb_engine_open(nb_engine **e, nb_engine_device device);
void nb_engine_close(nb_engine *e);

/* Frame `frame` of a series plan as a plan of its own (nb_plan_frame_view),
 * a still's spectrum included: the view points into series and into
 * *sources (NULL when the frame has none of its own; free() it after). */
nb_status nb_engine_frame(const nb_plan *series, long frame, nb_plan *view, nb_source **sources);

/* How to render one panel. */
typedef struct nb_panel_job {
    int precision;               /* 1: the reference-faithful double path; 0: the fast one; -1: the plan's */
    const nb_grad_plans *grads;  /* derivatives of these names too (NULL: the image only) */
    long frame;                  /* the series' frame (for grads' stencil plans) */
    int panel;                   /* the panel's index (for grads) */
    float **grad_out;            /* grads->names.n buffers of the panel's pixels */
    nb_progress *prog;           /* NULL: no progress */
    nb_payload_crc *row_crc;     /* NULL, or where the CPU kernels take each row's CRC-32 */
    nb_row_stats *row_stats;     /* NULL, or spixels entries for each row's statistics */
    int keep_setup;              /* keep the panel's kernel inputs in done->setup (nb_panel_done_free) */
    const nb_wide_out *wide;     /* NULL, or the double path's pixels (and grad_out's) in double, on the CPU:
                                  * img and grad_out may then be NULL */
    const nb_vjp_io *vjp;        /* NULL, or grads' product with weights in place of grad_out (NULL) */
} nb_panel_job;

/* What rendering one panel gave besides its pixels. */
typedef struct nb_panel_done {
    nb_render_result res;        /* times, solid-angle sum, tripped, row_stats_filled */
    double steps, subpixel_size; /* the kernel's steps per pixel and sub-pixel size (m) */
    int thicksteps, oversample;
    int use_cuda, use_double;
    char path[64];               /* "avx512", "double", "cuda-fast", "...-dual" */
    int have_setup;
    nb_sim_setup setup;          /* with job->keep_setup: the kernel inputs (the -printout trace's) */
} nb_panel_done;
void nb_panel_done_free(nb_panel_done *done);

/* Render panel `plan` (a one-panel plan: nb_plan_panel_view of a frame's
 * plan) into img (fpixels x spixels, written in full: 0 outside the ROI and
 * mask), by the job's path and the engine's device. */
nb_status nb_engine_render_panel(nb_engine *e, const nb_plan *plan, const nb_hkl *hkl, const nb_panel_job *job,
                                 float *img, nb_panel_done *done);

/* The CUDA device the engine opened (NULL: none, or not yet asked). */
nb_cuda *nb_engine_cuda(nb_engine *e);

#endif
