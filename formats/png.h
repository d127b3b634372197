/* png.h - 8-bit greyscale PNG previews of float images, written with zlib only.
 *
 * Pixel value mapping (row 0 = slow index 0, black = 0):
 *   scale > 0:  grey = round(value * scale), clipped to 0..255.
 *   scale <= 0: automatic contrast for diffraction images, which are mostly
 *               dark with a few bright spots:
 *                 top  = the 99.5th percentile of the positive finite pixels
 *                 grey = round(255 * sqrt(min(value / top, 1)))  (0 if value <= 0)
 *               The square-root ramp lifts faint background and diffuse
 *               scatter so that the crystal's spots stand out against it; the
 *               brightest 0.5 % of the positive pixels (Bragg spots and the
 *               direct-beam region) saturate at white.  An image without any
 *               positive pixel is all black.
 *   NaN maps to 0, +inf to 255 (and -inf to 0).
 *
 * The file holds IHDR (greyscale, 8 bits), a tEXt chunk "Software" =
 * "nb toolkit", IDAT chunks of at most 64 KiB (zlib stream, filter type 0 on
 * every row) and IEND, each with its CRC-32. */
#ifndef NB_FORMAT_PNG_H
#define NB_FORMAT_PNG_H

#include "nb_error.h"

nb_status nb_png_write_preview(const char *path, const float *pixels, int width, int height, double scale);

/* The grey levels nb_png_write_preview would write (width*height bytes into
 * out), and the automatic scale's 'top' value (NaN when scale > 0, 0 when no
 * pixel is positive).  For tests and for PGM previews with the same look. */
nb_status nb_png_preview_levels(const float *pixels, int width, int height, double scale, unsigned char *out,
                                double *top);

#endif
