/* nb_noise_plan.c - a frame of a plan's detector counted panel by panel, as
 * nb-noise counts it and libnb's nb_renderer_noise_frame does
 * (nb_noise_plan.h): the one loop both use, so that a program's counts are the tool's, bit for bit. */
#include "nb_noise_plan.h"

#include <string.h>

nb_status nb_noise_plan_frame(const nb_plan *plan, const nb_noise_params *p, double psf_fwhm_um, long frame,
                              nb_rng *rng, const nb_noise_device *dev, const float *photons, int32_t *counts,
                              nb_noise_result *res)
{
    const int npanels = nb_plan_npanels(plan);
    nb_status st = NB_OK;
    memset(res, 0, sizeof *res);
    nb_rng fresh;
    nb_rng_init(&fresh);
    for (int i = 0; i < npanels && !st; i++) {
        nb_plan v;
        size_t off;
        nb_noise_result pres;
        nb_plan_panel_view(plan, i, &v);
        nb_plan_panel_dims(plan, i, NULL, NULL, &off);
        nb_noise_params pp = *p;
        pp.seed = nb_frame_seed(p->seed, i);
        pp.calib_seed = nb_frame_seed(p->calib_seed, i);
        pp.psf_fwhm_pixels = psf_fwhm_um * 1e-6 / v.panels[0].pixel_size;
        pp.roi_xmin = v.panels[0].roi_xmin, pp.roi_xmax = v.panels[0].roi_xmax;
        pp.roi_ymin = v.panels[0].roi_ymin, pp.roi_ymax = v.panels[0].roi_ymax;
        if (i > 0) nb_rng_init(&fresh);
        st = nb_noise_frame_on(dev, &pp, frame == 0 && i == 0 ? rng : &fresh, photons + off, v.panels[0].fpixels,
                               v.panels[0].spixels, counts + off, &pres);
        /* a bad pixel's place: its frame (counted from 1, as the files'
         * numbers), its panel (of several) */
        if (st == NB_ERR_DATA && npanels > 1) st = nb_error_prefix(st, "frame %ld, panel %d", frame + 1, i);
        else if (st == NB_ERR_DATA) st = nb_error_prefix(st, "frame %ld", frame + 1);
        res->photons += pres.photons, res->overloads += pres.overloads, res->lost_photons += pres.lost_photons;
    }
    return st;
}
