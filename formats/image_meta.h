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
    double sensor_mu;         /* 1/m: the sensor's attenuation as simulated (0: not modelled) */
    const char *sensor_material; /* dxtbx's name ("Si", "CdTe", "GaAs"), "" when the simulation named none */
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

#include "nb_image_record.h"
#include "nb_plan.h"

/* The wavelength (m) a frame's headers state: a still's shot with spikes
 * their mean (each is rendered with equal weight), else the plan's. */
static inline double nb_frame_wavelength(const nb_plan *p, const nb_image_info *im)
{
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
