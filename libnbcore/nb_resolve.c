/* nb_resolve.c - from nanoBragg's requests to an explicit plan: nb_resolve()
 * and the order of its steps, which is the reference's (docs/physics.md
 * 2-7): each step may read what an earlier one resolved, and warnings, log
 * lines and random draws come in that order.  Here too the steps of the
 * detector (size, beam centre, convention, pivot and rotations), of the
 * beam (fluence, sources from a file or from divergence and dispersion)
 * and of the sampling (phi, divergence, dispersion, sensor layers, mosaic
 * domains: the reference's auto-selection).  The crystal's steps are in
 * nb_resolve_crystal.c, the plan written and the summary logged in
 * nb_resolve_plan.c. */
#include "nb_resolve.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nb_materials.h"
#include "nb_spectra.h"
#include "nb_stills.h"
#include "nb_util.h"
#include "nb_vec.h"

static void set3(double v[3], double x, double y, double z)
{
    v[0] = x;
    v[1] = y;
    v[2] = z;
}

/* Sampling auto-selection (docs/physics.md 4): count n, range R, step d;
 * "unset" is negative.  `count_only_range` is the range used when only the
 * count is given; `thickness` selects the thickness variant (d = R/2). */
static void auto_steps(int *n, double *R, double *d, double count_only_range, int thickness)
{
    if (*n <= 0) {
        if (*R < 0.0) {
            if (*d <= 0.0) {
                *n = 1, *R = 0.0, *d = 0.0;
            } else {
                *R = *d;
                *n = 2;
            }
        } else {
            if (*d <= 0.0) {
                *n = 2;
                *d = thickness ? *R / *n : *R;
            } else {
                *n = (int)ceil(*R / *d);
            }
        }
    } else {
        if (*R < 0.0) {
            if (*d <= 0.0) {
                *R = count_only_range;
                *d = *R / *n;
            } else {
                *R = *d;
                *n = 2;
            }
        } else {
            if (*d <= 0.0) {
                if (*n <= 1) *n = 2;
                *d = *R / (*n - 1);
            }
        }
    }
}

const char *nb_convention_name(int c)
{
    switch (c) {
    case NB_ADXV: return "adxv";
    case NB_MOSFLM: return "mosflm";
    case NB_XDS: return "xds";
    case NB_DIALS: return "dials";
    case NB_DENZO: return "denzo";
    default: return "custom";
    }
}

/* 5: the detector's size in pixels, checked against the mask */
static nb_status resolve_detector_size(nb_resolve_state *s, nb_plan *plan)
{
    nb_request *w = &s->w;
    nb_status st;
    if (w->pixel_size <= 0 || !isfinite(w->pixel_size))
        return nb_error_set(NB_ERR_USAGE, "pixel size must be positive (got %g mm)", w->pixel_size * 1000);
    if (w->fpixels < 0 || w->spixels < 0)
        return nb_error_set(NB_ERR_USAGE, "detector pixel counts must be positive");
    if (w->fpixels) w->detsize_f = w->pixel_size * w->fpixels;
    if (w->spixels) w->detsize_s = w->pixel_size * w->spixels;
    if (!(w->detsize_f / w->pixel_size < 2e9) || !(w->detsize_s / w->pixel_size < 2e9))
        return nb_error_set(NB_ERR_USAGE, "detector of %g x %g mm with %g mm pixels is too large",
                            w->detsize_f * 1000, w->detsize_s * 1000, w->pixel_size * 1000);
    if (w->nonbragg) {
        /* nonBragg rounds up, after making the size of a pixel count */
        int f0 = w->fpixels, s0 = w->spixels;
        w->fpixels = (int)ceil(w->detsize_f / w->pixel_size);
        w->spixels = (int)ceil(w->detsize_s / w->pixel_size);
        if ((f0 && f0 != w->fpixels) || (s0 && s0 != w->spixels))
            nb_warn("the detector is %d x %d pixels: nonBragg's rounding of the pixel count times the pixel size "
                    "makes it so",
                    w->fpixels, w->spixels);
    } else {
        w->fpixels = (int)ceil(w->detsize_f / w->pixel_size - 0.5);
        w->spixels = (int)ceil(w->detsize_s / w->pixel_size - 0.5);
    }
    /* the flags' detector: a list of one panel (-panels replaces it) */
    if ((st = nb_plan_set_panels(plan, 1))) return st;
    plan->panels[0].fpixels = w->fpixels;
    plan->panels[0].spixels = w->spixels;
    if ((st = nb_panel_check_size(&plan->panels[0]))) return st;
    if (w->mask && (w->mask_w != w->fpixels || w->mask_h != w->spixels))
        return nb_error_set(NB_ERR_USAGE, "mask '%s' is %d x %d pixels but the detector is %d x %d", w->maskfile,
                            w->mask_w, w->mask_h, w->fpixels, w->spixels);
    return NB_OK;
}

/* 5: fluence from flux, and a sample no larger than the beam */
static void resolve_fluence(nb_resolve_state *s)
{
    nb_request *w = &s->w;
    if (w->flux != 0.0 && w->exposure > 0.0 && w->beamsize >= 0)
        w->fluence = w->flux * w->exposure / w->beamsize / w->beamsize;
    if (w->beamsize >= 0) {
        if (w->beamsize < w->sample_y) {
            nb_warn("clipping sample (%g m high) with beam (%g m)", w->sample_y, w->beamsize);
            w->sample_y = w->beamsize;
        }
        if (w->beamsize < w->sample_z) {
            nb_warn("clipping sample (%g m wide) with beam (%g m)", w->sample_z, w->beamsize);
            w->sample_z = w->beamsize;
        }
    }
    if (w->exposure > 0.0) w->flux = w->fluence / w->exposure * w->beamsize * w->beamsize;
}

/* 5: the beam-centre and ROI defaults, before any convention */
static void resolve_beam_center_defaults(nb_resolve_state *s)
{
    nb_request *w = &s->w;
    s->Fclose = s->Sclose = NAN;
    if (!isnan(w->ORGX)) s->Fclose = (w->ORGX - 0.5) * w->pixel_size;
    if (!isnan(w->ORGY)) s->Sclose = (w->ORGY - 0.5) * w->pixel_size;
    if (isnan(s->Fclose)) s->Fclose = w->detsize_f / 2.0;
    if (isnan(s->Sclose)) s->Sclose = w->detsize_s / 2.0;
    if (isnan(w->Xclose)) w->Xclose = s->Fclose;
    if (isnan(w->Yclose)) w->Yclose = s->Sclose;
    s->Fbeam = s->Fclose;
    s->Sbeam = s->Sclose;
    if (w->roi_xmin < 0) w->roi_xmin = 0;
    if (w->roi_xmax < 0) w->roi_xmax = w->fpixels;
    if (w->roi_ymin < 0) w->roi_ymin = 0;
    if (w->roi_ymax < 0) w->roi_ymax = w->spixels;
}

/* 5 and 7, --nonbragg: nonBragg's beam-centre defaults in its own frame
 * (no convention): the near point from ORGX/ORGY in whole pixels or the
 * detector's centre shifted half a pixel, the beam centre at the near point;
 * Xbeam, Xclose along fast and Ybeam, Yclose along slow as they are */
static void nonbragg_beam_center(nb_resolve_state *s)
{
    nb_request *w = &s->w;
    if (!isnan(w->ORGX)) w->Xclose = w->ORGX * w->pixel_size;
    if (!isnan(w->ORGY)) w->Yclose = w->ORGY * w->pixel_size;
    if (isnan(w->Xclose)) w->Xclose = (w->detsize_f - w->pixel_size) / 2.0;
    if (isnan(w->Yclose)) w->Yclose = (w->detsize_s + w->pixel_size) / 2.0;
    if (isnan(w->Xbeam)) w->Xbeam = w->Xclose;
    if (isnan(w->Ybeam)) w->Ybeam = w->Yclose;
    s->Fclose = w->Xclose, s->Sclose = w->Yclose;
    s->Fbeam = w->Xbeam, s->Sbeam = w->Ybeam;
    if (w->roi_xmin < 0) w->roi_xmin = 0;
    if (w->roi_xmax < 0) w->roi_xmax = w->fpixels;
    if (w->roi_ymin < 0) w->roi_ymin = 0;
    if (w->roi_ymax < 0) w->roi_ymax = w->spixels;
    w->convention = NB_CUSTOM;
}

/* --nonbragg goes with nonBragg's flags: no convention, no header or panel file */
static nb_status nonbragg_check(const nb_request *rq)
{
    if (rq->convention != NB_MOSFLM && rq->convention != NB_CUSTOM)
        return nb_error_set(NB_ERR_USAGE, "--nonbragg: nonBragg has no conventions (-%s)",
                            nb_convention_name(rq->convention));
    if (rq->expt) return nb_error_set(NB_ERR_USAGE, "--nonbragg: -expt's crystals are not nonBragg's sample");
    if (rq->imgfile || rq->maskfile || rq->panels)
        return nb_error_set(NB_ERR_USAGE, "--nonbragg: -img, -mask and -panels are not nonBragg's detector");
    return NB_OK;
}

/* The direct-beam spot an -img/-mask header stated outright (Fbeam, Sbeam
 * from the outer corner of the first pixel) as this convention's Xbeam,
 * Ybeam, the inverse of its mapping below, where no flag set them.  XDS and
 * DIALS place the detector by ORGX/ORGY (the header's XDS_ORGX/ORGY), their
 * Xbeam, Ybeam are only reported. */
static void header_beam_as_convention(nb_request *w)
{
    if (isnan(w->header_Fbeam) || isnan(w->header_Sbeam)) return;
    double x, y, half = w->convention == NB_MOSFLM ? 0.5 * w->pixel_size : 0.0;
    switch (w->convention) {
    case NB_ADXV: x = w->header_Fbeam, y = w->detsize_s - w->header_Sbeam; break;
    case NB_MOSFLM:
    case NB_DENZO: x = w->header_Sbeam - half, y = w->header_Fbeam - half; break;
    default: x = w->header_Fbeam, y = w->header_Sbeam; break;
    }
    if (isnan(w->Xbeam)) w->Xbeam = x;
    if (isnan(w->Ybeam)) w->Ybeam = y;
}

/* 7: the convention block: its vectors and beam centre, then the pivot it forces */
static void resolve_convention(nb_resolve_state *s)
{
    nb_request *w = &s->w;
    header_beam_as_convention(w);
    switch (w->convention) {
    case NB_ADXV:
        if (isnan(w->Xbeam)) w->Xbeam = (w->detsize_f + w->pixel_size) / 2.0;
        if (isnan(w->Ybeam)) w->Ybeam = (w->detsize_s - w->pixel_size) / 2.0;
        set3(w->beam, 0, 0, 1), set3(w->fdet, 1, 0, 0), set3(w->sdet, 0, -1, 0), set3(w->odet, 0, 0, 1);
        set3(w->twotheta_axis, -1, 0, 0), set3(w->polar, 1, 0, 0), set3(w->spindle, 1, 0, 0);
        s->Fbeam = w->Xbeam;
        s->Sbeam = w->detsize_s - w->Ybeam;
        break;
    case NB_MOSFLM:
    case NB_DENZO:
        if (isnan(w->Xbeam)) w->Xbeam = (w->detsize_s + w->pixel_size) / 2.0;
        if (isnan(w->Ybeam)) w->Ybeam = (w->detsize_f + w->pixel_size) / 2.0;
        set3(w->beam, 1, 0, 0), set3(w->odet, 1, 0, 0), set3(w->fdet, 0, 0, 1), set3(w->sdet, 0, -1, 0);
        set3(w->twotheta_axis, 0, 0, -1), set3(w->polar, 0, 0, 1), set3(w->spindle, 0, 0, 1);
        /* MOSFLM's first pixel centre sits half a pixel in; DENZO's does not */
        s->Fbeam = w->Ybeam + (w->convention == NB_MOSFLM ? 0.5 : 0.0) * w->pixel_size;
        s->Sbeam = w->Xbeam + (w->convention == NB_MOSFLM ? 0.5 : 0.0) * w->pixel_size;
        break;
    case NB_XDS:
    case NB_DIALS:
        if (isnan(w->Xbeam)) w->Xbeam = w->Xclose;
        if (isnan(w->Ybeam)) w->Ybeam = w->Yclose;
        set3(w->beam, 0, 0, 1), set3(w->fdet, 1, 0, 0), set3(w->sdet, 0, 1, 0), set3(w->odet, 0, 0, 1);
        if (w->convention == NB_XDS)
            set3(w->twotheta_axis, 1, 0, 0), set3(w->polar, 1, 0, 0), set3(w->spindle, 1, 0, 0);
        else
            set3(w->twotheta_axis, 0, 1, 0), set3(w->polar, 0, 1, 0), set3(w->spindle, 0, 1, 0);
        s->Fbeam = w->Xbeam;
        s->Sbeam = w->Ybeam;
        break;
    default: /* CUSTOM keeps the vectors and the parse-time pivot */
        if (isnan(w->Xbeam)) w->Xbeam = w->Xclose;
        if (isnan(w->Ybeam)) w->Ybeam = w->Yclose;
        s->Fbeam = w->Xbeam;
        s->Sbeam = w->Ybeam;
        s->Fclose = w->Xbeam;
        s->Sclose = w->Ybeam;
        break;
    }
    int forced_pivot = w->pivot;
    if (w->convention == NB_ADXV || w->convention == NB_MOSFLM || w->convention == NB_DENZO)
        forced_pivot = NB_PIVOT_BEAM;
    if (w->convention == NB_XDS || w->convention == NB_DIALS) forced_pivot = NB_PIVOT_SAMPLE;
    if (s->pivot_asked && forced_pivot != w->pivot)
        nb_warn("the %s convention pivots the detector about the %s, whatever -pivot, -distance or beam-centre "
                "options asked (as in the reference)",
                nb_convention_name(w->convention), forced_pivot == NB_PIVOT_BEAM ? "direct-beam spot" : "sample");
    w->pivot = forced_pivot;
}

/* 6: unit vectors, and the axis of horizontal divergence */
static void resolve_unit_vectors(nb_resolve_state *s)
{
    nb_request *w = &s->w;
    nb_vunitize(w->beam, w->beam);
    nb_vunitize(w->fdet, w->fdet);
    nb_vunitize(w->sdet, w->sdet);
    if (w->nonbragg) {
        /* nonBragg's normal is always fast x slow */
        if (w->odet_given) nb_warn("-odet_vector is ignored, as nonBragg ignores it: the normal is fdet x sdet");
        nb_vcross(w->fdet, w->sdet, w->odet);
        nb_vunitize(w->odet, w->odet);
    } else if (nb_vunitize(w->odet, w->odet) != 1.0) {
        nb_warn("auto-generating odet_vector");
        nb_vcross(w->fdet, w->sdet, w->odet);
        nb_vunitize(w->odet, w->odet);
    }
    nb_vunitize(w->polar, w->polar);
    nb_vunitize(w->spindle, w->spindle);
    nb_vcross(w->beam, w->polar, s->vert);
    nb_vunitize(s->vert, s->vert);
}

/* 8: phi steps from any two of -osc, -phistep and -phisteps */
static void resolve_phi_steps(nb_request *w)
{
    if (w->phisteps < 0) {
        if (w->osc < 0.0) {
            if (w->phistep <= 0.0) {
                w->phisteps = 1, w->osc = 0.0, w->phistep = 0.0;
            } else {
                w->osc = w->phistep;
                w->phisteps = 2;
            }
        } else {
            if (w->phistep <= 0.0) {
                w->phisteps = 2;
                w->phistep = w->osc / 2.0;
            } else {
                w->phisteps = (int)ceil(w->osc / w->phistep);
            }
        }
    } else {
        if (w->phisteps == 0) w->phisteps = 1;
        if (w->osc < 0.0) {
            if (w->phistep <= 0.0) {
                w->osc = 1.0 / NB_RTD;
                w->phistep = w->osc / w->phisteps;
            } else {
                w->osc = w->phistep;
                w->phisteps = 2;
            }
        } else if (w->phistep < 0.0) {
            w->phistep = w->osc / w->phisteps;
        }
    }
}

/* 8: the number of mosaic domains from the spread, as the reference corrects it */
static void resolve_mosaic_count(nb_request *w)
{
    if (w->mosaic_domains <= 0) {
        if (w->mosaic_spread < 0.0) {
            w->mosaic_domains = 1;
            w->mosaic_spread = 0.0;
        } else if (w->mosaic_spread == 0.0) {
            w->mosaic_domains = 1;
        } else {
            nb_warn("finite mosaicity with only one domain! upping to 10 mosaic domains");
            w->mosaic_domains = 10;
        }
    } else {
        if (w->mosaic_spread < 0.0) {
            nb_warn("no mosaic spread specified.  setting mosaic_domains = 1");
            w->mosaic_spread = 0.0;
            w->mosaic_domains = 1;
        } else if (w->mosaic_spread == 0.0) {
            nb_warn("zero mosaic spread specified.  setting mosaic_domains = 1");
            w->mosaic_domains = 1;
        }
    }
}

/* 8: sampling auto-selection: phi, divergence, dispersion, sensor layers, mosaic domains */
static void resolve_sampling(nb_request *w)
{
    resolve_phi_steps(w);
    auto_steps(&w->hdivsteps, &w->hdivrange, &w->hdivstep, 1.0, 0);
    auto_steps(&w->vdivsteps, &w->vdivrange, &w->vdivstep, 1.0, 0);
    auto_steps(&w->dispsteps, &w->dispersion, &w->dispstep, 1.0, 0);
    auto_steps(&w->detector_thicksteps, &w->detector_thick, &w->detector_thickstep, 0.5e-6, 1);
    if (w->detector_thick > 0.0 && w->detector_mu < 0.0) {
        w->detector_mu = 1.0 / w->detector_thick;
        nb_warn("setting detector attenuation coefficient to %g /m (1/thickness)", w->detector_mu);
    }
    resolve_mosaic_count(w);
    if (w->hdivrange <= 0.0 || w->hdivstep <= 0.0 || w->hdivsteps <= 0)
        w->hdivsteps = 1, w->hdivrange = 0.0, w->hdivstep = 0.0;
    if (w->vdivrange <= 0.0 || w->vdivstep <= 0.0 || w->vdivsteps <= 0)
        w->vdivsteps = 1, w->vdivrange = 0.0, w->vdivstep = 0.0;
    if (w->dispersion <= 0.0 || w->dispstep <= 0.0 || w->dispsteps <= 0)
        w->dispsteps = 1, w->dispersion = 0.0, w->dispstep = 0.0;
    if (w->detector_thick <= 0.0 || w->detector_thickstep <= 0.0 || w->detector_thicksteps <= 0)
        w->detector_thicksteps = 1, w->detector_thick = 0.0, w->detector_thickstep = 0.0;
}

/* 8: a named sensor material's attenuation coefficient, as dxtbx computes it
 * from the material and the beam's wavelength (docs/physics.md 8.3), before
 * the sampling step would make it 1/thickness */
static nb_status resolve_sensor_material(nb_request *w)
{
    if (w->detector_material == NB_MATERIAL_NONE) return NB_OK;
    const char *name = nb_material_name(w->detector_material);
    /* only -detector_abs sets mu before this step (the default is -1) */
    if (w->detector_mu >= 0.0)
        return nb_error_set(NB_ERR_USAGE, "-detector_material and -detector_abs cannot be given together: the "
                                          "material sets the attenuation");
    if (!(w->detector_thick > 0.0))
        return nb_error_set(NB_ERR_USAGE, "-detector_material %s needs the sensor's thickness: give -detector_thick "
                                          "UM (> 0)",
                            name);
    if (nb_material_mu(w->detector_material, w->lambda0, &w->detector_mu))
        return nb_error_prefix(NB_ERR_USAGE, "-detector_material %s", name);
    return NB_OK;
}

/* Stills: the shots' settings make sense together, and nothing turns the
 * spindle (a still has no rotation); the default spike count. */
static nb_status resolve_stills(nb_request *w)
{
    nb_stills *s = &w->stills;
    int any = s->bandwidth > 0 || s->spikes >= 0 || s->N_max > 0 || s->fluence_max > 0;
    if (!s->on) {
        if (any) return nb_error_set(NB_ERR_USAGE, "the -stills_* options need -stills");
        s->spikes = 0;
        return NB_OK;
    }
    if (w->osc > 0 || w->phistep > 0 || w->phisteps > 1)
        return nb_error_set(NB_ERR_USAGE, "-stills: a still has no rotation; -osc, -phistep and -phisteps do not go "
                                          "with it");
    if (s->spikes < 0) s->spikes = s->bandwidth > 0 ? 10 : 0;
    if (s->spikes > 0 && !(s->bandwidth > 0))
        return nb_error_set(NB_ERR_USAGE, "-stills_spikes needs -stills_bandwidth (the envelope's width)");
    return nb_stills_check(s, NB_ERR_USAGE, "-stills");
}

/* the frame count, and limits on work the reference would happily start and never finish */
static nb_status check_sampling_limits(const nb_request *w)
{
    if (w->nframes < 1 || w->nframes > 10000000)
        return nb_error_set(NB_ERR_USAGE, "option -nframes: expected 1 .. 10000000 frames, got %d", w->nframes);
    if (w->nframes > 1 && w->osc <= 0.0 && !w->stills.on && !w->expt)
        return nb_error_set(NB_ERR_USAGE, "option -nframes %d needs an oscillation per frame: give -osc", w->nframes);
    if (w->phisteps > 1000000 || w->mosaic_domains > 1000000 || w->hdivsteps > 100000 || w->vdivsteps > 100000 ||
        w->dispsteps > 100000 || w->detector_thicksteps > 100000 ||
        (double)(w->hdivsteps > 0 ? w->hdivsteps : 1) * (w->vdivsteps > 0 ? w->vdivsteps : 1) *
                (w->dispsteps > 0 ? w->dispsteps : 1) > 1e6)
        return nb_error_set(NB_ERR_USAGE, "absurd sampling: %d phi steps, %d mosaic domains, %dx%d divergence, "
                                          "%d wavelengths, %d layers",
                            w->phisteps, w->mosaic_domains, w->hdivsteps, w->vdivsteps, w->dispsteps,
                            w->detector_thicksteps);
    return NB_OK;
}

/* 9: the detector rotated and placed about its pivot: pix0, the beam and
 * near-point centres it ends with, ORGX/ORGY and the DIALS origin */
static nb_status resolve_detector_position(nb_resolve_state *s)
{
    nb_request *w = &s->w;
    double vector[3], newvector[3];
    double *pix0 = s->pix0;
    LOG("%s convention selected.\n", nb_convention_name(w->convention));
    set3(pix0, 0, 0, 0);
    nb_rotate_xyz(w->odet, vector, w->rotx, w->roty, w->rotz);
    double ratio = nb_vdot(w->beam, vector);
    if (ratio == 0.0) ratio = DBL_MIN;
    /* nonBragg takes the signed product */
    if (isnan(w->close_distance)) w->close_distance = w->nonbragg ? ratio * w->distance : fabs(ratio * w->distance);
    w->distance = w->close_distance / ratio;
    if (w->pivot == NB_PIVOT_SAMPLE) {
        LOG("pivoting detector around sample\n");
        for (int i = 0; i < 3; i++)
            pix0[i] = -s->Fclose * w->fdet[i] - s->Sclose * w->sdet[i] + w->close_distance * w->odet[i];
        nb_rotate_xyz(pix0, pix0, w->rotx, w->roty, w->rotz);
        nb_rotate_about(pix0, pix0, w->twotheta_axis, w->twotheta);
    }
    nb_rotate_xyz(w->fdet, w->fdet, w->rotx, w->roty, w->rotz);
    nb_rotate_xyz(w->sdet, w->sdet, w->rotx, w->roty, w->rotz);
    nb_rotate_xyz(w->odet, w->odet, w->rotx, w->roty, w->rotz);
    nb_rotate_about(w->fdet, w->fdet, w->twotheta_axis, w->twotheta);
    nb_rotate_about(w->sdet, w->sdet, w->twotheta_axis, w->twotheta);
    nb_rotate_about(w->odet, w->odet, w->twotheta_axis, w->twotheta);
    if (w->pivot == NB_PIVOT_BEAM) {
        LOG("pivoting detector around direct beam spot\n");
        for (int i = 0; i < 3; i++) pix0[i] = -s->Fbeam * w->fdet[i] - s->Sbeam * w->sdet[i] + w->distance * w->beam[i];
    }
    s->Fclose = -nb_vdot(pix0, w->fdet);
    s->Sclose = -nb_vdot(pix0, w->sdet);
    w->close_distance = nb_vdot(pix0, w->odet);
    for (int i = 0; i < 3; i++) newvector[i] = w->close_distance / ratio * w->beam[i] - pix0[i];
    s->Fbeam = nb_vdot(w->fdet, newvector);
    s->Sbeam = nb_vdot(w->sdet, newvector);
    w->distance = w->close_distance / ratio;
    s->ORGX = s->Fclose / w->pixel_size + 0.5;
    s->ORGY = s->Sclose / w->pixel_size + 0.5;
    set3(newvector, 0, 0, 1);
    s->dials_origin[0] = 1000.0 * nb_vdot(pix0, newvector);
    set3(newvector, 0, 1, 0);
    s->dials_origin[1] = 1000.0 * nb_vdot(pix0, newvector);
    set3(newvector, -1, 0, 0);
    s->dials_origin[2] = 1000.0 * nb_vdot(pix0, newvector);
    LOG("XDS incident beam: %g %g %g\n", nb_vdot(w->beam, w->fdet), nb_vdot(w->beam, w->sdet),
        nb_vdot(w->beam, w->odet));
    if (!isfinite(w->distance) || !isfinite(pix0[0]) || !isfinite(pix0[1]) || !isfinite(pix0[2]))
        return nb_error_set(NB_ERR_USAGE, "the detector geometry is degenerate (beam parallel to the detector plane?)");
    return NB_OK;
}

/* ---- the sources ------------------------------------------------------- */

/* Columns X Y Z weight lambda, separated by blanks, tabs or , ; : !  Missing
 * columns take their defaults; blank lines and '#' comments are skipped. */
static nb_status read_source_file(const char *path, double rows[][5], int max_rows, int *nrows)
{
    char *text;
    size_t len;
    nb_status st = nb_read_file(path, &text, &len);
    int n = 0, lineno = 0;
    if (st) return st;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        lineno++;
        char *p = line + strspn(line, " \t,;:!\r");
        if (*p == '\0' || *p == '#') continue;
        if (n >= max_rows) {
            free(text);
            return nb_error_set(NB_ERR_DATA, "'%s': more than %d sources", path, max_rows);
        }
        for (int c = 0; c < 5; c++) rows[n][c] = NAN;
        for (int c = 0; c < 5 && *p; c++) {
            char *end;
            errno = 0;
            double v = strtod(p, &end);
            if (end == p || !isfinite(v)) {
                free(text);
                return nb_error_set(NB_ERR_DATA, "'%s' line %d: column %d is not a number", path, lineno, c + 1);
            }
            rows[n][c] = v;
            p = end + strspn(end, " \t,;:!\r");
        }
        if (*p && *p != '#') {
            free(text);
            return nb_error_set(NB_ERR_DATA, "'%s' line %d: more than 5 columns (X Y Z weight lambda)", path, lineno);
        }
        n++;
    }
    free(text);
    if (n == 0) return nb_error_set(NB_ERR_DATA, "'%s': no sources in the file", path);
    *nrows = n;
    return NB_OK;
}

/* 15: the rows (X Y Z weight lambda) of -sourcefile, missing columns defaulted */
static nb_status source_rows_from_file(nb_resolve_state *s, double (**rows_out)[5])
{
    const nb_request *w = &s->w;
    const int max_rows = 1000000;
    double (*rows)[5] = NULL;
    nb_status st;
    if ((st = nb_calloc((void **)&rows, (size_t)max_rows, sizeof *rows, "source list"))) return st;
    if ((st = read_source_file(w->sourcefile, rows, max_rows, &s->nsources))) {
        free(rows);
        return st;
    }
    for (int i = 0; i < s->nsources; i++) {
        for (int k = 0; k < 3; k++)
            if (isnan(rows[i][k])) rows[i][k] = -10.0 * w->beam[k];
        if (isnan(rows[i][3])) rows[i][3] = 1.0;
        if (isnan(rows[i][4])) rows[i][4] = w->lambda0;
    }
    *rows_out = rows;
    return NB_OK;
}

/* 15: the rows of divergence x dispersion: a first pass counts (and logs)
 * the divergence points kept by the elliptical trim, a second fills them in */
static nb_status source_rows_from_divergence(nb_resolve_state *s, double (**rows_out)[5])
{
    const nb_request *w = &s->w;
    double (*rows)[5] = NULL;
    nb_status st;
    s->divsteps = 0;
    for (int pass = 0; pass < 2; pass++) {
        int count = 0;
        for (int ih = 0; ih < w->hdivsteps; ++ih) {
            for (int iv = 0; iv < w->vdivsteps; ++iv) {
                double hdiv = w->hdivstep * ih - w->hdivrange / 2.0;
                double vdiv = w->vdivstep * iv - w->vdivrange / 2.0;
                /* elliptical trim; a zero range gives NaN and keeps the point */
                double test = (hdiv * hdiv - w->hdivstep * w->hdivstep / 4.0 * (1 - w->hdivsteps % 2)) /
                              w->hdivrange / w->hdivrange;
                test += (vdiv * vdiv - w->vdivstep * w->vdivstep / 4.0 * (1 - w->vdivsteps % 2)) / w->vdivrange /
                        w->vdivrange;
                if (w->round_div && test * 4.0 > 1.1) continue;
                if (pass == 0) {
                    ++s->divsteps;
                    LOG("divergence deviation: %g %g\n", hdiv, vdiv);
                    continue;
                }
                double v[3], nv[3];
                for (int k = 0; k < 3; k++) v[k] = -10.0 * w->beam[k];
                nb_rotate_about(v, nv, w->polar, vdiv);
                nb_rotate_about(nv, v, s->vert, hdiv);
                for (int id = 0; id < w->dispsteps; ++id) {
                    double lambda = w->lambda0 * (1.0 + w->dispstep * id - w->dispersion / 2.0);
                    rows[count][0] = v[0];
                    rows[count][1] = v[1];
                    rows[count][2] = v[2];
                    /* nanoBragg's weight (stored, unused) is 1/sources, nonBragg's 1 */
                    rows[count][3] = w->nonbragg ? 1.0 : 1.0 / s->nsources;
                    rows[count][4] = lambda;
                    count++;
                }
            }
        }
        if (pass == 0) {
            for (int id = 0; id < w->dispsteps; ++id)
                LOG("lambda%d = %.15g\n", id, w->lambda0 * (1.0 + w->dispstep * id - w->dispersion / 2.0));
            s->nsources = s->divsteps * w->dispsteps;
            if (s->nsources <= 0)
                return nb_error_set(NB_ERR_USAGE,
                                    "the divergence settings leave no source: every point of the %d x %d grid "
                                    "(steps %g x %g mrad over %g x %g mrad) lies outside the ellipse the ranges "
                                    "make (-square_div keeps them; the reference renders an image of NaN)",
                                    w->hdivsteps, w->vdivsteps, w->hdivstep * 1000, w->vdivstep * 1000,
                                    w->hdivrange * 1000, w->vdivrange * 1000);
            if ((st = nb_calloc((void **)&rows, (size_t)s->nsources, sizeof *rows, "source list"))) return st;
        }
    }
    *rows_out = rows;
    return NB_OK;
}

/* 15: the sources, from a file or from divergence and dispersion, into the plan */
static nb_status resolve_sources(nb_resolve_state *s, nb_plan *plan)
{
    double (*rows)[5] = NULL;
    nb_status st;
    s->divsteps = -1, s->nsources = 0;
    st = s->w.sourcefile ? source_rows_from_file(s, &rows) : source_rows_from_divergence(s, &rows);
    if (st) return st;
    int nsources = s->nsources;
    LOG("  created a total of %d sources:\n", nsources);
    if ((st = nb_calloc((void **)&plan->sources, (size_t)nsources, sizeof *plan->sources, "sources"))) {
        free(rows);
        return st;
    }
    for (int i = 0; i < nsources; i++) {
        double v[3] = {rows[i][0], rows[i][1], rows[i][2]};
        nb_vunitize(v, plan->sources[i].dir);
        plan->sources[i].weight = rows[i][3];
        plan->sources[i].lambda = rows[i][4];
        LOG("%g %g %g   %g %g\n", rows[i][0], rows[i][1], rows[i][2], rows[i][3], rows[i][4]);
        if (!(rows[i][4] > 0) || nb_vnorm(v) == 0.0) {
            free(rows);
            return nb_error_set(NB_ERR_DATA, "source %d has a zero direction or a non-positive wavelength", i + 1);
        }
    }
    free(rows);
    plan->nsources = nsources;
    return NB_OK;
}

/* ---- the order ---------------------------------------------------------- */

/* The steps in the reference's order: each may read what an earlier one
 * resolved, and warnings, log lines and random draws come in that order. */
static nb_status resolve(const nb_request *rq, nb_plan *plan, nb_strbuf *log)
{
    nb_resolve_state state = {.w = *rq, .log = log};
    nb_resolve_state *s = &state;
    nb_request *w = &s->w;
    nb_status st;
    s->pivot_asked = !(rq->pivot & NB_PIVOT_IMPLIED);
    w->pivot &= ~NB_PIVOT_IMPLIED;
    nb_plan_init(plan);

    if (w->nonbragg && (st = nonbragg_check(w))) return st;
    if ((st = resolve_detector_size(s, plan))) return st;
    resolve_fluence(s);
    if (w->nonbragg) {
        nonbragg_beam_center(s);
    } else {
        resolve_beam_center_defaults(s);
        resolve_convention(s);
    }
    resolve_unit_vectors(s);
    s->no_crystal = !w->matfile && !(w->user_cell && w->cell[0] != 0.0) && !w->expt;
    if (s->no_crystal && !w->nonbragg)
        return nb_error_set(NB_ERR_USAGE, "no crystal: give -cell A B C AL BE GA or -mat FILE");
    /* nonBragg samples one sub-pixel unless told otherwise */
    if (w->nonbragg && w->oversample <= 0) w->oversample = 1;
    if ((st = resolve_stills(w))) return st;
    if ((st = resolve_sensor_material(w))) return st;
    resolve_sampling(w);
    if ((st = check_sampling_limits(w))) return st;
    if ((st = resolve_detector_position(s))) return st;
    if (s->no_crystal) {
        nb_resolve_no_crystal(s);
    } else {
        nb_resolve_interpolation(s);
        if ((st = nb_resolve_crystal(s, plan))) return st;
        if ((st = nb_resolve_crystal_size(s))) return st;
    }
    if ((st = nb_resolve_check_stol_file(w))) return st;
    for (int t = 0; t < w->detector_thicksteps; ++t) LOG("thick%d = %g um\n", t, w->detector_thickstep * t * 1e6);
    for (int t = 0; t < w->phisteps; ++t) LOG("phi%d = %g\n", t, (w->phi0 + w->phistep * t) * NB_RTD);
    if ((st = resolve_sources(s, plan))) return st;
    if ((st = nb_resolve_mosaic(s, plan))) return st;

    plan->command_line = nb_xstrdup(rq->command_line ? rq->command_line : "");
    if ((st = nb_resolve_plan_detector(s, plan))) return st;
    if (rq->panels && (st = nb_plan_place_panels(rq->panels, plan))) return st;
    nb_resolve_log_summary(s, plan); /* after the panels are placed: -v logs them */
    nb_resolve_plan_beam_and_crystal(s, plan);
    nb_resolve_plan_requests(s, plan);
    if (rq->expt && (st = nb_plan_take_expt_crystals(rq->expt, plan))) return st;
    if (rq->expt_spectra && !rq->expt)
        return nb_error_set(NB_ERR_USAGE, "-expt_spectra: a spectrum per experiment of -expt FILE (no -expt given)");
    if (rq->expt_spectra && (st = nb_plan_take_expt_spectra(rq->expt_spectra, plan))) return st;
    return NB_OK;
}

/* On failure nothing of the plan is left allocated (its parts are made one
 * after another; an error may come after some of them). */
nb_status nb_resolve(const nb_request *rq, nb_plan *plan, nb_strbuf *log)
{
    nb_status st = resolve(rq, plan, log);
    if (st) nb_plan_free(plan);
    return st;
}
