/* nb_api.h - what the public API's files (nb.c, nb_api_options.c,
 * nb_api_args.c, nb_api_noise.c, nb_api_files.c) share and nb.h does not show: the
 * renderer's insides, its making, and the named options read back as the
 * settings they stand for.  Not installed. */
#ifndef NB_API_INTERNAL_H
#define NB_API_INTERNAL_H

#include <stdint.h>

#include "nb.h"
#include "nb_engine.h"
#include "nb_geometry.h"
#include "nb_noise.h"

struct nb_renderer {
    nb_plan plan;
    nb_hkl hkl;
    int have_F; /* 0: no structure factors yet (a render waits for nb_renderer_set_F) */
    nb_engine *engine;
    int precision; /* nb_panel_job's: -1 the plan's, 0 fast, 1 double */
    nb_device_choice device;
    int threads;
    nb_grad_list names; /* the derivatives followed */
    int have_grad_plans;
    nb_grad_plans grad_plans; /* built at the first derivative render */
    void *vjp_scratch;        /* nb_render_frame_vjp's panel of derivatives, kept for the next call */
    size_t vjp_scratch_bytes;
};

/* A status as the API returns it: nb_status's pipe and upstream cases cannot
 * come from the library's work, and are data errors if they ever do. */
int nb_api_result(nb_status st);

/* The renderer around a decoded plan and HKL (both taken over, and freed on
 * failure).  have_hkl 0: the plan's -default_F; when the plan has none (or
 * names nb-hkl's file), an error, or with wait_for_F a renderer whose
 * renders wait for nb_renderer_set_F.  c NULL: the defaults. */
nb_status nb_api_renderer_make(nb_plan *plan, nb_hkl *hkl, int have_hkl, const nb_render_config *c, int wait_for_F,
                               nb_renderer **out);

/* Render options as API 1's settings (o NULL: the defaults); options of
 * another kind are a usage error naming `who`. */
nb_status nb_api_render_config(const nb_options *o, const char *who, nb_render_config *c);

/* Noise options as nb-noise's settings: its parameters (seed and ADC as the
 * options give them), and which of the plan's values they replace. */
typedef struct nb_api_noise {
    nb_noise_params p;
    int have_seed, have_adc, have_fluence, have_pixel_size;
    int64_t seed;             /* as the reference stores it (negated), when have_seed */
    double fluence;           /* photons/m^2, when have_fluence */
    double psf_fwhm_um;
    double pixel_size_mm;     /* nb_noise_image's pixel */
} nb_api_noise;
nb_status nb_api_noise_settings(const nb_options *o, const char *who, nb_api_noise *n);

/* The readers of nb-geom's file flags, from formats/ (engine/nb_api_files.c,
 * the engine's one door to them): the hooks nb-geom hands its loop (-img and
 * -mask: nb_smv_apply_to_request; -panels: nb_detector_file_read; -expt:
 * nb_experiment_list_read), without nb-geom's own options. */
const nb_args_hooks *nb_api_file_hooks(void);
/* The plan nb-geom resolves from the flags (nb_api_args.c); the calls'
 * messages name `who`.  Freed with nb_plan_free (also on failure). */
nb_status nb_api_plan_from_args(const char *who, int argc, const char *const *argv, nb_plan *plan);

#endif
