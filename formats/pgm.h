/* pgm.h - 8-bit PGM previews, as the reference writes image.pgm. */
#ifndef NB_FORMAT_PGM_H
#define NB_FORMAT_PGM_H

#include <stdint.h>

#include "nb_error.h"

/* "P5\n<w> <h>\n# pixels scaled by <scale>\n255\n" then w*h bytes. */
nb_status nb_pgm_write(const char *path, const uint8_t *bytes, int width, int height, double scale);

#endif
