/* tiff.h - single-image greyscale TIFF files through libtiff.
 *
 * Width = m->fpixels, length = m->spixels, row 0 = slow index 0; one sample
 * per pixel, MinIsBlack, uncompressed, strips of about 256 KiB (what fabio's
 * TiffIO, PIL, ImageJ and adxv all read).  An ImageDescription tag carries the
 * provenance (software version, command line, wavelength, distances, pixel
 * size, beam centre, phi, frame); Software says "nb toolkit <version>" and
 * X/YResolution give the pixel pitch in pixels per centimetre.
 *
 * libtiff writes into memory; the bytes then go through nb_outfile, so a
 * failure never leaves a partial file and "-" (stdout, even a pipe) works.
 * libtiff's own warnings and errors never reach stderr: errors become the
 * nb_error message.
 *
 * libtiff itself is loaded (dlopen) by the first write or nb_tiff_load; one
 * that cannot be loaded gives NB_ERR_UNSUPPORTED, "cannot load libtiff: why".
 * In a build without libtiff (NB_HAVE_TIFF undefined) every function returns
 * NB_ERR_UNSUPPORTED, "... this build has no libtiff". */
#ifndef NB_FORMAT_TIFF_H
#define NB_FORMAT_TIFF_H

#include <stdint.h>

#include "image_meta.h"
#include "nb_error.h"

/* Loads libtiff (dlopen, on first use): NB_OK, or NB_ERR_UNSUPPORTED with
 * a message saying why (no libtiff in this build, or it cannot be loaded). */
nb_status nb_tiff_load(void);

/* Read a greyscale TIFF (one sample per pixel, strips: uint16, uint32,
 * int32 or float32, any compression libtiff decodes) into *values
 * (malloc'ed, width x height, row 0 first).  *is_float: the samples were
 * floats (photons); else counts, *count_max the counter's maximum (65535,
 * 4294967295 or 2147483647). */
nb_status nb_tiff_read(const char *path, double **values, int *width, int *height, int *is_float,
                       double *count_max);

/* 32-bit IEEE float samples (SampleFormat 3), e.g. photons per pixel. */
nb_status nb_tiff_write_f32(const char *path, const float *pixels, const nb_image_meta *m);
/* 16-bit unsigned samples; counts are clamped to 0..65535. */
nb_status nb_tiff_write_u16(const char *path, const int32_t *counts, const nb_image_meta *m);
/* 32-bit unsigned samples; negative counts are clamped to 0. */
nb_status nb_tiff_write_u32(const char *path, const int32_t *counts, const nb_image_meta *m);

#endif
