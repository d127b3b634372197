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
    int bytes_per_pixel;   /* 2 (TYPE=unsigned_short, the default) or 4 (long_integer) */
    uint32_t *pixels;      /* width*height in host order, or NULL */
} nb_smv;

/* Read an SMV file: checks the "{\nHEADER_BYTES" signature, reads the whole
 * header (HEADER_BYTES long) and, when want_pixels, the pixels: unsigned
 * 16-bit, or 32-bit when TYPE=long_integer (byte-swapped to host order when
 * BYTE_ORDER says so).  Other TYPEs are an error. */
nb_status nb_smv_read(const char *path, int want_pixels, nb_smv *out);
/* 1 when the file starts with SMV's "{\nHEADER_BYTES" (0 also when it cannot be opened) */
int nb_smv_signature(const char *path);
void nb_smv_free(nb_smv *smv);

/* The reference's ValueOf(): the value after the '=' that follows the LAST
 * occurrence of `key` anywhere in the header (so "DISTANCE" matches inside
 * "CLOSE_DISTANCE" and "ORGX" inside "XDS_ORGX").  NaN when the key is absent,
 * 0 when no '=' follows. */
double nb_smv_value(const nb_smv *smv, const char *key);

/* ---- -img and -mask ----------------------------------------------------------- */
#include "nb_geometry.h"

/* Read the SMV image of -img (role NB_HEADER_IMG) or -mask (NB_HEADER_MASK,
 * with its pixels) and apply what its header says to the request
 * (nb_request_apply_header): the keys the reference reads, by its ValueOf()
 * rules (nb_smv_value). */
nb_status nb_smv_apply_to_request(nb_request *rq, const char *path, nb_header_role role);

/* ---- writing ---------------------------------------------------------------- */
#include "nb_plan.h"

/* The header values of an SMV image, in the reference's key order. */
typedef struct nb_smv_meta {
    int fpixels, spixels;
    double pixel_mm, distance_mm, wavelength_A;
    double beam_center_x, beam_center_y; /* BEAM_CENTER_X/Y, mm */
    double adxv_x, adxv_y, mosflm_x, mosflm_y, denzo_x, denzo_y;
    double dials_origin[3];
    double orgx, orgy, close_distance_mm;
    double phi_deg, osc_start_deg, osc_range_deg, twotheta_deg;
    double adc_offset;         /* written as ADC_OFFSET (dxtbx's pedestal) */
    double gain;               /* ADU per photon, written as GAIN= when not 1 (0 is taken as 1) */
    int beam_mode;             /* enum nb_smv_beam: how BEAM_CENTER_X/Y are written */
} nb_smv_meta;

/* How BEAM_CENTER_X/Y are written: as nanoBragg writes them, or so that
 * dxtbx (which reads BEAMLINE=fake images as "JHSim" with an ADXV-like
 * convention) finds the true direct-beam position.  Every other key is the
 * reference's either way. */
enum nb_smv_beam { NB_SMV_BEAM_REFERENCE = 0, NB_SMV_BEAM_DXTBX = 1 };

/* The key (a line "BEAM_CENTER_CONVENTION=dxtbx;") of the files written in
 * dxtbx's form, so that nb-geom -img reads their beam back as written.  Its
 * name holds none of the keys the reference looks up anywhere in a header
 * (nb_smv_value). */
#define NB_SMV_BEAM_KEY "BEAM_CENTER_CONVENTION"

/* The direct-beam spot (mm from the outer corner of the first pixel, along
 * fast and slow) of a header written in dxtbx's form (NB_SMV_BEAM_KEY=dxtbx),
 * undoing the writer's; NAN, NAN for any other header, whose BEAM_CENTER_X/Y
 * are the reference's Xbeam, Ybeam of an unknown convention. */
void nb_smv_dxtbx_beam(const nb_smv *smv, double *beam_f, double *beam_s);

void nb_smv_meta_from_plan(const nb_plan *p, double adc, int beam_mode, nb_smv_meta *m);

/* Write an SMV image in pieces (a few rows at a time, as they come): open
 * (writes the reference's header, plus ADC_OFFSET, padded to 512 bytes, 1024
 * when it does not fit), put the values in order, close (commits the file)
 * or abort (removes it).  Pixels are unsigned 16-bit (bits = 16,
 * TYPE=unsigned_short) or 32-bit (bits = 32, TYPE=long_integer as noisify)
 * in the host's byte order, as the header says; values are clipped to the
 * type's range. */
typedef struct nb_smv_writer nb_smv_writer;
nb_status nb_smv_writer_open(nb_smv_writer **w, const char *path, const nb_smv_meta *m, int bits);
nb_status nb_smv_writer_put(nb_smv_writer *w, const int32_t *values, size_t count);
nb_status nb_smv_writer_put_u16(nb_smv_writer *w, const uint16_t *values, size_t count); /* 16-bit files */
/* The same from a thread other than the one that reports errors (nb_error's
 * message is not thread-safe): 0, or the errno of the failed write, and no
 * message; nb_smv_writer_path() names the file for one. */
int nb_smv_writer_put_u16_errno(nb_smv_writer *w, const uint16_t *values, size_t count);
const char *nb_smv_writer_path(const nb_smv_writer *w);
nb_status nb_smv_writer_close(nb_smv_writer *w);
void nb_smv_writer_abort(nb_smv_writer *w);

#endif
