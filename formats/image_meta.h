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
    double twotheta;          /* deg */
    long frame;               /* 0-based frame index */
    const char *command_line; /* provenance, may be NULL */
    const char *name;         /* the file's final name (for names inside it, e.g. CBF's data_
                                 block), when it is written under a temporary one; may be NULL */
} nb_image_meta;

#endif
