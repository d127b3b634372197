/* nb_resolve_plan.c - the end of nb_resolve(): what its steps resolved,
 * written into the plan (the detector and its sensor, the beam, the crystal
 * and the rotation, the later stages' requests), and the summary block of
 * the reference's console log that nb-geom -v prints (each panel's geometry
 * too with -panels).  Apart from the steps: these read the state, and
 * change nothing the steps compute. */
#include "nb_resolve.h"

#include <stdio.h>
#include <string.h>

#include "nb_materials.h"
#include "nb_util.h"
#include "nb_vec.h"

/* -v: the sensor's material and its mu, when one was named */
static void log_sensor_material(const nb_resolve_state *s)
{
    const nb_request *w = &s->w;
    if (w->detector_material != NB_MATERIAL_NONE)
        LOG("  sensor material is %s: mu= %g /m at %g m, as dxtbx computes it\n",
            nb_material_name(w->detector_material), w->detector_mu, w->lambda0);
}

/* -v with -panels: each panel's geometry in the plan's frame, what the
 * summary's detector lines say of the flags' one panel */
static void log_panels(const nb_resolve_state *s, const nb_plan *plan)
{
    for (int i = 0; i < nb_plan_npanels(plan); i++) {
        nb_plan v;
        nb_plan_panel_view(plan, i, &v);
        LOG("  panel %d: %dx%d pixels of %g m\n", i, v.panels[0].fpixels, v.panels[0].spixels, v.panels[0].pixel_size);
        LOG("    fdet= %g %g %g\n", v.panels[0].fdet[0], v.panels[0].fdet[1], v.panels[0].fdet[2]);
        LOG("    sdet= %g %g %g\n", v.panels[0].sdet[0], v.panels[0].sdet[1], v.panels[0].sdet[2]);
        LOG("    odet= %g %g %g\n", v.panels[0].odet[0], v.panels[0].odet[1], v.panels[0].odet[2]);
        LOG("    pix0_vector= %.10g %.10g %.10g\n", v.panels[0].pix0[0], v.panels[0].pix0[1], v.panels[0].pix0[2]);
        /* odet points away from the sample: the beam meets the plane only going that way */
        if (nb_vdot(v.beam, v.panels[0].odet) > 1e-12) {
            double f = v.Fbeam / v.panels[0].pixel_size, sl = v.Sbeam / v.panels[0].pixel_size;
            int on = f >= 0 && f < v.panels[0].fpixels && sl >= 0 && sl < v.panels[0].spixels;
            LOG("    distance=%g close_distance=%g (mm)\n", v.distance * 1000, v.close_distance * 1000);
            LOG("    Fbeam=%g Sbeam=%g (pixel %g %g, %s the panel)\n", v.Fbeam, v.Sbeam, f, sl, on ? "on" : "off");
        } else {
            LOG("    close_distance=%g (mm); the beam does not meet its plane\n", v.close_distance * 1000);
        }
        LOG("    Fclose=%g Sclose=%g ORGX=%g ORGY=%g\n", v.Fclose, v.Sclose, v.ORGX, v.ORGY);
        LOG("    sensor is %g m thick in %d layers with mu= %g\n", v.panels[0].thick, v.panels[0].thicksteps,
            v.panels[0].mu);
        LOG("    dials origin= %g %g %g\n", v.dials_origin[0], v.dials_origin[1], v.dials_origin[2]);
    }
}

/* the reference's summary block, then the extras it does not print; with
 * -panels the flags' one-panel detector lines give way to the panels' */
void nb_resolve_log_summary(const nb_resolve_state *s, const nb_plan *plan)
{
    const nb_request *w = &s->w;
    static const char *shape_words[] = {"parallelpiped", "ellipsoidal", "gaussian", "tophat-spot"};
    double vector[3];
    if (s->no_crystal) LOG("  no crystal\n");
    else LOG("  %s xtal: %.0fx%.0fx%.0f cells\n", shape_words[w->shape], w->Na, w->Nb, w->Nc);
    LOG("  wave=%g meters +/- %g%% in %d steps\n", w->lambda0, w->dispersion * 100, w->dispsteps);
    if (w->nopolar) LOG("  polarization effect disabled\n");
    else LOG("  Kahn polarization factor: %f\n", w->polarization);
    if (w->curved_detector) LOG("  curved detector: all pixels same distance from origin\n");
    if (w->point_pixel) LOG("  pixel obliquity effect disabled\n");
    LOG("  incident fluence: %g photons/m^2\n", w->fluence);
    if (w->panels) {
        LOG("  detector: %d panel%s from -panels\n", nb_plan_npanels(plan), nb_plan_npanels(plan) > 1 ? "s" : "");
        log_sensor_material(s);
        log_panels(s, plan);
    } else {
        LOG("  distance=%g detsize=%gx%g  pixel=%g meters (%dx%d pixels)\n", w->distance, w->detsize_f,
            w->detsize_s, w->pixel_size, w->fpixels, w->spixels);
        LOG("  sensor is %g m thick in %d layers with mu= %g\n", w->detector_thick, w->detector_thicksteps,
            w->detector_mu);
        log_sensor_material(s);
        LOG("  Xbeam=%g Ybeam=%g\n", w->Xbeam, w->Ybeam);
        LOG("  Fbeam=%g Sbeam=%g\n", s->Fbeam, s->Sbeam);
        LOG("  Xclose=%g Yclose=%g\n", w->Xclose, w->Yclose);
        LOG("  Fclose=%g Sclose=%g\n", s->Fclose, s->Sclose);
        LOG("  DIRECTION_OF_DETECTOR_X-AXIS= %g %g %g\n", w->fdet[0], w->fdet[1], w->fdet[2]);
        LOG("  DIRECTION_OF_DETECTOR_Y-AXIS= %g %g %g\n", w->sdet[0], w->sdet[1], w->sdet[2]);
        LOG("  DIRECTION_OF_DETECTOR_Z-AXIS= %g %g %g\n", w->odet[0], w->odet[1], w->odet[2]);
    }
    LOG("  INCIDENT_BEAM_DIRECTION= %g %g %g\n", w->beam[0], w->beam[1], w->beam[2]);
    LOG("  spindle ROTATION_AXIS= %g %g %g\n", w->spindle[0], w->spindle[1], w->spindle[2]);
    nb_vcross(w->beam, w->polar, vector);
    LOG("  POLARIZATION_PLANE_NORMAL= %g %g %g\n", vector[0], vector[1], vector[2]);
    if (!w->panels) {
        LOG("  dials origin= %g %g %g\n", s->dials_origin[0], s->dials_origin[1], s->dials_origin[2]);
        LOG("  roi: %d < x < %d && %d < y < %d\n", w->roi_xmin, w->roi_xmax, w->roi_ymin, w->roi_ymax);
    }
    LOG("  hdivrange=%g hdivstep=%g  radians\n", w->hdivrange, w->hdivstep);
    LOG("  vdivrange=%g vdivstep=%g  radians\n", w->vdivrange, w->vdivstep);
    LOG("  %d divergence steps\n", s->divsteps);
    LOG("  %d sources\n", s->nsources);
    LOG("  %d mosaic domains over mosaic spread of %g degrees\n", w->mosaic_domains, w->mosaic_spread * NB_RTD);
    LOG("  %d phi steps from %g to %g degrees\n", w->phisteps, w->phi0 * NB_RTD, (w->phi0 + w->osc) * NB_RTD);
    if (w->stills.on)
        LOG("  %d stills: random orientations from misset seed %lld\n", w->nframes, (long long)-w->misset_seed);
    else if (w->nframes > 1)
        LOG("  %d frames: a rotation series from %g to %g degrees\n", w->nframes, w->phi0 * NB_RTD,
            (w->phi0 + w->nframes * w->osc) * NB_RTD);
    LOG("  %dx%d pixel oversample steps%s%s%s\n", w->oversample, w->oversample, w->oversample_thick ? " +thick" : "",
        w->oversample_polar ? " +polar" : "", w->oversample_omega ? " +omega" : "");
    if (w->mask) LOG("  skipping zero-flagged pixels in %s\n", w->maskfile);
    if (w->calculate_noise) {
        LOG("\n  noise image paramters:\n");
        LOG("  seed: %lld\n", (long long)w->seed);
        LOG("  water droplet size: %g m\n", w->water_size);
    }
    if (w->panels) return;
    LOG("  pix0_vector= %.10g %.10g %.10g\n", s->pix0[0], s->pix0[1], s->pix0[2]);
    LOG("  ORGX=%g ORGY=%g\n", s->ORGX, s->ORGY);
    LOG("  distance=%g close_distance=%g (mm)\n", w->distance * 1000, w->close_distance * 1000);
}

/* into the plan: the detector, its sensor and sampling, and the mask */
nb_status nb_resolve_plan_detector(const nb_resolve_state *s, nb_plan *plan)
{
    const nb_request *w = &s->w;
    nb_status st;
    nb_panel *panel = &plan->panels[0]; /* the flags' one panel (nb_resolve made the list) */
    panel->pixel_size = w->pixel_size;
    plan->detsize_f = w->detsize_f;
    plan->detsize_s = w->detsize_s;
    plan->distance = w->distance;
    plan->close_distance = w->close_distance;
    memcpy(panel->fdet, w->fdet, sizeof panel->fdet);
    memcpy(panel->sdet, w->sdet, sizeof panel->sdet);
    memcpy(panel->odet, w->odet, sizeof panel->odet);
    memcpy(panel->pix0, s->pix0, sizeof panel->pix0);
    memcpy(plan->beam, w->beam, sizeof plan->beam);
    memcpy(plan->polar_vector, w->polar, sizeof plan->polar_vector);
    memcpy(plan->spindle, w->spindle, sizeof plan->spindle);
    memcpy(plan->twotheta_axis, w->twotheta_axis, sizeof plan->twotheta_axis);
    plan->Xbeam = w->Xbeam, plan->Ybeam = w->Ybeam, plan->Fbeam = s->Fbeam, plan->Sbeam = s->Sbeam;
    plan->Xclose = w->Xclose, plan->Yclose = w->Yclose, plan->Fclose = s->Fclose, plan->Sclose = s->Sclose;
    plan->ORGX = s->ORGX, plan->ORGY = s->ORGY;
    memcpy(plan->dials_origin, s->dials_origin, sizeof plan->dials_origin);
    snprintf(plan->convention, sizeof plan->convention, "%s", nb_convention_name(w->convention));
    snprintf(plan->pivot, sizeof plan->pivot, "%s", w->pivot == NB_PIVOT_BEAM ? "beam" : "sample");
    plan->rotx = w->rotx, plan->roty = w->roty, plan->rotz = w->rotz, plan->twotheta = w->twotheta;
    plan->curved_detector = w->curved_detector;
    plan->point_pixel = w->point_pixel;
    panel->thick = w->detector_thick;
    panel->thickstep = w->detector_thickstep;
    panel->thicksteps = w->detector_thicksteps;
    panel->mu = w->detector_mu;
    plan->detector_material = w->detector_material;
    panel->roi_xmin = w->roi_xmin, panel->roi_xmax = w->roi_xmax;
    panel->roi_ymin = w->roi_ymin, panel->roi_ymax = w->roi_ymax;
    plan->oversample = w->oversample;
    plan->oversample_thick = w->oversample_thick;
    plan->oversample_polar = w->oversample_polar;
    plan->oversample_omega = w->oversample_omega;
    if (w->mask) {
        size_t n = (size_t)w->fpixels * (size_t)w->spixels;
        if ((st = nb_calloc((void **)&panel->mask, n, 1, "mask"))) return st;
        memcpy(panel->mask, w->mask, n);
    }
    return NB_OK;
}

/* into the plan: the beam, the crystal and the rotation */
void nb_resolve_plan_beam_and_crystal(const nb_resolve_state *s, nb_plan *plan)
{
    const nb_request *w = &s->w;
    plan->lambda0 = w->lambda0;
    plan->dispersion = w->dispersion, plan->dispstep = w->dispstep, plan->dispsteps = w->dispsteps;
    plan->hdivrange = w->hdivrange, plan->hdivstep = w->hdivstep, plan->hdivsteps = w->hdivsteps;
    plan->vdivrange = w->vdivrange, plan->vdivstep = w->vdivstep, plan->vdivsteps = w->vdivsteps;
    plan->divsteps = s->divsteps;
    plan->round_div = w->round_div;
    plan->kahn_factor = w->polarization;
    plan->nopolar = w->nopolar;
    plan->fluence = w->fluence, plan->flux = w->flux, plan->exposure = w->exposure, plan->beamsize = w->beamsize;
    memcpy(plan->cell_a, s->v.a, sizeof s->v.a);
    memcpy(plan->cell_b, s->v.b, sizeof s->v.b);
    memcpy(plan->cell_c, s->v.c, sizeof s->v.c);
    memcpy(plan->recip_a, s->v.a_star, sizeof s->v.a_star);
    memcpy(plan->recip_b, s->v.b_star, sizeof s->v.b_star);
    memcpy(plan->recip_c, s->v.c_star, sizeof s->v.c_star);
    memcpy(plan->misset, s->misset_mode > 0 ? s->misset : (double[3]){0, 0, 0}, sizeof plan->misset);
    plan->Na = w->Na, plan->Nb = w->Nb, plan->Nc = w->Nc;
    plan->shape = w->shape;
    plan->fudge = w->fudge;
    plan->mosaic_spread = w->mosaic_spread;
    plan->mosaic_umats_spread = w->mosaic_spread;
    plan->mosaic_domains = w->mosaic_domains;
    plan->phi0 = w->phi0, plan->phistep = w->phistep, plan->osc = w->osc, plan->phisteps = w->phisteps;
    plan->nframes = w->nframes;
    plan->stills = w->stills;
    plan->water_size = w->water_size;
    plan->dmin = w->dmin;
    plan->interpolate = w->interpolate;
    plan->seed = w->seed;
    plan->seed_drawn = !w->seed_given;
    plan->mosaic_seed = w->mosaic_seed;
    plan->misset_seed = w->misset_seed;
}

/* into the plan: what the later stages are asked to do (files, scales, noise, precision) */
void nb_resolve_plan_requests(const nb_resolve_state *s, nb_plan *plan)
{
    const nb_request *w = &s->w;
    plan->hkl_file = nb_xstrdup(w->hklfile);
    plan->default_F = w->default_F;
    plan->dump_file = nb_xstrdup(w->dumpfile);
    plan->floatfile = nb_xstrdup(w->floatfile);
    plan->intfile = nb_xstrdup(w->intfile);
    plan->noisefile = nb_xstrdup(w->noisefile);
    plan->pgmfile = nb_xstrdup(w->pgmfile);
    if (w->reference_defaults) {
        /* the reference always writes these, under these names */
        if (!plan->dump_file) {
            plan->dump_file = nb_xstrdup("Fdump.bin");
            plan->dump_implicit = 1;
        }
        if (!plan->floatfile) plan->floatfile = nb_xstrdup("floatimage.bin");
        if (!plan->intfile) plan->intfile = nb_xstrdup("intimage.img");
        if (!plan->noisefile) plan->noisefile = nb_xstrdup("noiseimage.img");
        if (!plan->pgmfile) plan->pgmfile = nb_xstrdup("image.pgm");
    }
    plan->intfile_scale = w->intfile_scale;
    plan->pgm_scale = w->pgm_scale;
    plan->adc = w->adc;
    plan->calculate_noise = w->calculate_noise;
    plan->write_pgm = w->write_pgm;
    plan->precision_double = w->precision_double;
    plan->printout = w->printout;
    plan->printout_fpixel = w->printout_fpixel;
    plan->printout_spixel = w->printout_spixel;
    plan->progress = w->progress;
}
