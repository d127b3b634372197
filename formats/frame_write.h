/* frame_write.h - one frame of a stream as an image file (frame_write.c).
 *
 * An nb_frame is an IMAGE record made ready to write: its plan, keys,
 * photons and counts (when nb-noise added them) and the reference's scales.
 * The integer formats take the detector counts when the stream has them,
 * else nanoBragg's int image of the photons (-scale, -adc; 16 bits); a CBF
 * and an NXmx file hold the counts from 0, less their ADC offset, as a
 * PILATUS counts (docs/physics.md 2.6).  Each format's write_image
 * (registry.h) takes the frame as nb_frame_write_image makes it ready. */
#ifndef NB_FORMAT_FRAME_WRITE_H
#define NB_FORMAT_FRAME_WRITE_H

#include <stddef.h>
#include <stdint.h>

#include "image_meta.h"
#include "nb_error.h"
#include "nb_image.h"
#include "nb_image_record.h"
#include "nb_plan.h"
#include "registry.h"
#include "smv.h"

typedef struct nb_frame {
    const nb_plan *plan;
    const nb_image_info *im;   /* the IMAGE record's keys */
    const float *photons;
    const int32_t *counts;     /* NULL when the stream has none */
    int counts_bits;
    double counts_adc;
    long frame;
    int width, height;
    nb_stats stats;
    double int_scale, pgm_scale, adc; /* the int image's scale and offset, the PGM's scale */
} nb_frame;

/* The header values of the frame's file */
void nb_frame_meta(const nb_frame *fr, nb_image_meta *m);
/* An SMV file's header values for the frame: its counts' offset adc, the
 * beam centre's convention smv_beam (NB_SMV_BEAM_*) */
void nb_frame_smv_meta(const nb_frame *fr, int smv_beam, double adc, nb_smv_meta *m);
/* Panel i of a frame of several panels as a one-panel frame pf, whose plan
 * is view (panel i's geometry; the frame's common scales) */
void nb_frame_panel(const nb_frame *fr, int i, nb_plan *view, nb_frame *pf);
/* The reference's noiseless int image as int32 (*out from nb_alloc_large) */
nb_status nb_frame_int_counts(const nb_frame *fr, int32_t **out);
/* Counts from 0, as a CBF and an NXmx file hold them: less their ADC
 * offset adc, a -1 (no data) kept; a count below the offset warned of,
 * naming path */
void nb_counts_from_zero(const int32_t *counts, size_t n, double adc, const char *path, int32_t *out);
/* A simulated sensor whose attenuation is not the one DIALS computes from
 * the material a CBF or NXmx file states: warned of once a run */
void nb_warn_sensor_mu(const char *path, const nb_plan *p);

/* How nb_frame_write_image takes the frame: of the stream's counts (else
 * the photons, or the int image's counts for integer samples), and an SMV
 * header's beam centre (NB_SMV_BEAM_*) */
typedef struct nb_frame_write_opts {
    int use_counts;
    int smv_beam;
} nb_frame_write_opts;

/* A frame as a format's write_image takes it (registry.h): its samples as
 * the format's entry says (samples, bits), its header values, its names */
struct nb_frame_image {
    const nb_frame *fr;
    const nb_format *format;
    const char *path;        /* where to write */
    const char *final;       /* its name when in place: for names inside it and messages */
    nb_image_meta meta;      /* the frame's header values, named final */
    int use_counts;          /* the stream's detector counts, not the photons */
    const int32_t *counts;   /* integer samples: the stream's counts or the int image's; NULL: the photons */
    int bits;                /* their counter's depth: 16 or 32 */
    double adc;              /* their ADC offset */
    int smv_beam;            /* an SMV header's beam centre (NB_SMV_BEAM_*) */
};

/* The frame as one file of format f (its write_image) at path (final: its
 * name when in place, for names inside it and messages), its samples taken
 * as o says; a format written otherwise (a run file, a sidecar) is refused */
nb_status nb_frame_write_image(const nb_format *f, const nb_frame_write_opts *o, const char *path, const char *final,
                               const nb_frame *fr);

#endif
