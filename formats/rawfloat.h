/* rawfloat.h - the reference's floatimage.bin: fpixels*spixels float32,
 * little-endian, fast index varying fastest, no header. */
#ifndef NB_FORMAT_RAWFLOAT_H
#define NB_FORMAT_RAWFLOAT_H

#include <stddef.h>

#include "nb_error.h"

nb_status nb_rawfloat_write(const char *path, const float *pixels, size_t count);
/* Read a raw float file of exactly `count` pixels (count 0: any size, returned in *count). */
nb_status nb_rawfloat_read(const char *path, float **pixels, size_t *count);

#endif
