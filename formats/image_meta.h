/* image_meta.h - what an image file header needs to know about the
 * experiment, gathered from the PLAN and IMAGE records by nb-convert. */
#ifndef NB_FORMAT_IMAGE_META_H
#define NB_FORMAT_IMAGE_META_H

typedef struct nb_image_meta {
    int fpixels, spixels;     /* fast (width), slow (height) */
    double pixel_size;        /* m */
    double distance;          /* m, sample to detector along the beam */
    double close_distance;    /* m, sample to detector plane */
    double wavelength;        /* m */
    double beam_f, beam_s;    /* m: direct-beam spot from the outer corner of the first pixel,
                                 along the fast and slow axes (Fbeam, Sbeam) */
    double osc_start;         /* deg: spindle angle at the start of the frame */
    double osc_range;         /* deg: rotation during the frame */
    double exposure;          /* s */
    double count_cutoff;      /* counts at which a pixel is overloaded */
    double sensor_thickness;  /* m (0: not modelled) */
    const char *sensor_material; /* dxtbx's name ("Si", "CdTe", "GaAs"): nb_stated_sensor_of's */
    double gain;              /* ADU per photon of the counts (nb-noise -gain; 1 for the int image) */
    double twotheta;          /* deg */
    long frame;               /* 0-based frame index (headers say frame + 1, as the file names) */
    double polarization;      /* fraction of polarization as DIALS and XDS define it
                                 (nb_polarization_fraction); 0: not stated */
    /* The geometry in DIALS's laboratory frame (nb_dials_image_geometry), for
     * headers that can state it whole (CBF's imgCIF axes); lab 0: none */
    int lab;
    double lab_origin[3];     /* mm: the outer corner of the first pixel */
    double lab_fast[3], lab_slow[3], lab_axis[3];   /* unit: detector axes, spindle */
    double lab_polar_norm;    /* deg: the polarization plane's normal from +y about z */
    const char *command_line; /* provenance, may be NULL */
    const char *name;         /* the file's final name (for names inside it, e.g. CBF's data_
                                 block), when it is written under a temporary one; may be NULL */
} nb_image_meta;

#include <string.h>

#include "nb_image_record.h"
#include "nb_plan.h"

/* The sensor a file states, from which its reader computes mu at the beam's
 * wavelength (NXmx's sensor_material and sensor_thickness, a miniCBF's
 * sensor line): the simulated one, of no named material taken as silicon;
 * or, where nothing was absorbed (dxtbx refuses a thickness of 0 in NXmx),
 * the material that absorbs most at the wavelength ten attenuation lengths
 * thick, so that DIALS's efficiency correction is 1 within 5e-5 and the
 * parallax it corrects for the least, about sin(angle)/mu (docs/physics.md
 * 2.6). */
typedef struct nb_stated_sensor {
    int simulated;        /* the plan's sensor (1), or the stand-in for none (0) */
    nb_material material;
    double thickness;     /* m */
    double mu;            /* 1/m: the material's at the plan's wavelength, as dxtbx computes it (0: not known) */
} nb_stated_sensor;

static inline void nb_stated_sensor_of(const nb_plan *p, nb_stated_sensor *s)
{
    memset(s, 0, sizeof *s);
    s->simulated = p->panels[0].thick > 0 && p->panels[0].mu > 0;
    if (s->simulated) {
        s->material = p->detector_material != NB_MATERIAL_NONE ? p->detector_material : NB_MATERIAL_SI;
        s->thickness = p->panels[0].thick;
        if (nb_material_mu(s->material, p->lambda0, &s->mu)) s->mu = 0.0;
        return;
    }
    s->material = nb_material_most_absorbing(p->lambda0);
    if (s->material == NB_MATERIAL_NONE || nb_material_mu(s->material, p->lambda0, &s->mu) || !(s->mu > 0)) {
        s->material = NB_MATERIAL_SI, s->mu = 0.0, s->thickness = 1e-3; /* outside the tables: 1 mm of silicon */
        return;
    }
    s->thickness = 10.0 / s->mu;
}

/* The wavelength (m) a frame's headers state: a frame crystal's (FRAME_CRYSTALS),
 * a still's shot with spikes their mean (each is rendered with equal weight),
 * else the plan's. */
static inline double nb_frame_wavelength(const nb_plan *p, const nb_image_info *im)
{
    if (im && p->frame_crystals && im->frame >= 0 && im->frame < p->nframes) return p->frame_crystals[im->frame].lambda;
    if (!im || im->still_spikes <= 0) return p->lambda0;
    double sum = 0.0;
    for (int k = 0; k < im->still_spikes; k++) sum += im->still_spectrum[k];
    return sum / im->still_spikes;
}

/* The beam's fraction of polarization, as XDS (FRACTION_OF_POLARIZATION) and
 * DIALS (polarization_fraction) define it, for the simulation's polarization
 * factor (docs/physics.md 8.4): 0.5 (1 + K) for Kahn's factor K (-polar K;
 * 0, unpolarized, by default), and 0.5 under -nopolar, which leaves the
 * factor out: no correction is the unpolarized beam's least wrong one. */
static inline double nb_polarization_fraction(const nb_plan *p)
{
    return p->nopolar ? 0.5 : 0.5 * (1.0 + p->kahn_factor);
}

#endif
