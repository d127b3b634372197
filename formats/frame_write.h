/* frame_write.h - one frame of a stream as an image file (frame_write.c).
 *
 * An nb_frame is an IMAGE record made ready to write: its plan, keys,
 * photons and counts (when nb-noise added them) and the reference's scales.
 * The integer formats take the detector counts when the stream has them,
 * else nanoBragg's int image of the photons (-scale, -adc; 16 bits); a CBF
 * and an NXmx file hold the counts from 0, less their ADC offset, as a
 * PILATUS counts (docs/physics.md 2.6). */
#ifndef NB_FORMAT_FRAME_WRITE_H
#define NB_FORMAT_FRAME_WRITE_H

#include <stddef.h>
#include <stdint.h>

#include "image_meta.h"
#include "nb_error.h"
#include "nb_image.h"
#include "nb_image_record.h"
#include "nb_plan.h"
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

/* The frame as one file of format (NB_FMT_CBF, the TIFFs, PGM, PNG) at path
 * (final: its name when in place, for names inside it and messages): of
 * its counts when use_counts (the stream's), else of the photons (the int
 * image's counts for the integer formats) */
nb_status nb_frame_write_image(int format, int use_counts, const char *path, const char *final, const nb_frame *fr);

#endif
