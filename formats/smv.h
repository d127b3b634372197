/* smv.h - SMV (ADSC) images: header reading with the reference's rules. */
#ifndef NB_FORMAT_SMV_H
#define NB_FORMAT_SMV_H

#include <stddef.h>
#include <stdint.h>

#include "nb_error.h"

typedef struct nb_smv {
    char *header;          /* NUL-terminated, header_size bytes */
    int header_size;
    int width, height;     /* SIZE1 (fast), SIZE2 (slow) */
    int big_endian;        /* BYTE_ORDER=big_endian */
    uint16_t *pixels;      /* width*height in host order, or NULL */
} nb_smv;

/* Read an SMV file: checks the "{\nHEADER_BYTES" signature, reads the whole
 * header (HEADER_BYTES long) and, when want_pixels, the unsigned 16-bit data
 * (byte-swapped to host order when the header says so). */
nb_status nb_smv_read(const char *path, int want_pixels, nb_smv *out);
void nb_smv_free(nb_smv *smv);

/* The reference's ValueOf(): the value after the '=' that follows the LAST
 * occurrence of `key` anywhere in the header (so "DISTANCE" matches inside
 * "CLOSE_DISTANCE" and "ORGX" inside "XDS_ORGX").  NaN when the key is absent,
 * 0 when no '=' follows. */
double nb_smv_value(const nb_smv *smv, const char *key);

#endif
