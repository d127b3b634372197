/* nb_api_noise.c - nb.h's detector counts: nb-noise's counting chain
 * (nb_noise.c) over photons in memory, a renderer's frame counted as nb-noise
 * counts that frame of the stream (the same loop over the panels,
 * nb_noise_plan.c), or one image without a plan. */
#include <string.h>

#include "nb_api.h"
#include "nb_noise_plan.h"
#include "nb_rng.h"

int nb_renderer_noise_frame(const nb_renderer *r, long frame, const float *photons, const nb_options *options,
                   int32_t *counts)
{
    static const char who[] = "nb_renderer_noise_frame";
    nb_api_noise n;
    if (!r || !photons || !counts)
        return nb_error_set(NB_ERR_USAGE, "%s: no renderer, no photons or no buffer for the counts", who);
    if (frame < 0 || frame >= nb_renderer_frames(r))
        return nb_error_set(NB_ERR_USAGE, "%s: frame %ld: the plan has %d (0-based)", who, frame,
                            nb_renderer_frames(r));
    nb_status st = nb_api_noise_settings(options, who, &n);
    if (st) return nb_api_result(st);
    if (n.have_pixel_size)
        return nb_error_set(NB_ERR_USAGE, "%s: pixel_size is nb_noise_image's: a frame's pixels are its plan's", who);
    /* the frame's settings as nb-noise makes them from its flags and the plan */
    const nb_plan *plan = &r->plan;
    nb_noise_params p = n.p;
    p.seed = nb_frame_seed(n.have_seed ? n.seed : plan->seed, frame);
    p.adc = n.have_adc ? n.p.adc : plan->adc;
    if (n.have_fluence) p.photon_scale *= n.fluence / plan->fluence;
    /* frame 0 continues the plan's generator state, on a copy: the renderer
     * stays as it was, and the same call gives the same counts */
    nb_rng rng = plan->rng;
    nb_noise_result res;
    st = nb_noise_plan_frame(plan, &p, n.psf_fwhm_um, frame, &rng, NULL, photons, counts, &res);
    return nb_api_result(st);
}

int nb_noise_image(const float *photons, int fast, int slow, const nb_options *options, int32_t *counts)
{
    static const char who[] = "nb_noise_image";
    nb_api_noise n;
    if (!photons || !counts)
        return nb_error_set(NB_ERR_USAGE, "%s: no photons or no buffer for the counts", who);
    if (fast < 1 || slow < 1) return nb_error_set(NB_ERR_USAGE, "%s: an image of %d x %d pixels", who, fast, slow);
    nb_status st = nb_api_noise_settings(options, who, &n);
    if (st) return nb_api_result(st);
    if (!n.have_seed)
        return nb_error_set(NB_ERR_USAGE, "%s: no seed (nb_options_set_int(o, \"seed\", ...)): an image has no plan "
                            "to take one from", who);
    if (n.have_fluence)
        return nb_error_set(NB_ERR_USAGE, "%s: fluence rescales from a plan's fluence: nb_renderer_noise_frame's", who);
    nb_noise_params p = n.p;
    p.seed = n.seed;
    p.psf_fwhm_pixels = n.psf_fwhm_um * 1e-3 / n.pixel_size_mm;
    p.roi_xmin = p.roi_ymin = 0;
    p.roi_xmax = fast - 1, p.roi_ymax = slow - 1;
    nb_rng rng;
    nb_rng_init(&rng);
    nb_noise_result res;
    return nb_api_result(nb_noise_frame(&p, &rng, photons, fast, slow, counts, &res));
}
