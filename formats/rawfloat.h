/* rawfloat.h - the reference's floatimage.bin: fpixels*spixels float32,
 * little-endian, fast index varying fastest, no header. */
#ifndef NB_FORMAT_RAWFLOAT_H
#define NB_FORMAT_RAWFLOAT_H

#include <stddef.h>

#include "nb_error.h"
#include "nb_util.h"

/* Write one in pieces (a few rows at a time, as they come): open, put the
 * pixels in order, then nb_outfile_commit (or nb_outfile_abort). */
nb_status nb_rawfloat_writer_open(nb_outfile **of, const char *path);
nb_status nb_rawfloat_writer_put(nb_outfile *of, const float *pixels, size_t count);
/* Read a raw float file of exactly `count` pixels (count 0: any size, returned in *count). */
nb_status nb_rawfloat_read(const char *path, float **pixels, size_t *count);

#endif
