/* cbf.h - CBF images with byte-offset compression: imgCIF categories for
 * dxtbx, then the miniCBF header (PILATUS convention) for XDS and fabio.
 *
 * The file is what a PILATUS camserver / CBFlib writes and what dxtbx (DIALS),
 * XDS and fabio read: "###CBF: VERSION 1.5", one data_ block, a
 * _array_data.header_contents text field of "# Key value" lines (Pixel_size,
 * Wavelength, Detector_distance, Beam_xy, Start_angle, Angle_increment ...),
 * then the binary section: MIME headers with Content-MD5, the 0C 1A 04 D5
 * start marker, the x-CBF_BYTE_OFFSET data (signed 32-bit, little-endian) and
 * 4095 bytes of zero padding.  Lines end with CR LF as in CBFlib's output.
 *
 * When m->lab is set (nb-convert: always, but for a sensor with a thickness)
 * the data block opens with imgCIF categories (_diffrn, _diffrn_source,
 * _diffrn_radiation, _axis, _array_structure_list_axis, _diffrn_scan ...),
 * which make dxtbx read the file with its full-CBF byte-offset reader
 * (FormatCBFFullByteOffset: "_diffrn.id" and "_diffrn_source" present, no
 * "PILATUS" header convention) instead of its miniCBF readers, which take no
 * polarization from any header (0.999 whatever it says):
 *   - _diffrn_radiation.polarizn_source_ratio is m->polarization, which
 *     dxtbx takes as its polarization fraction (imgCIF defines the field as
 *     (Ip - In) / (Ip + In), 2 f - 1 for the fraction f; dxtbx, the reader
 *     these files are for, reads it as f), and polarizn_source_norm the
 *     angle a of the plane's normal, (sin a, cos a, 0) in dxtbx's frame.
 *   - The geometry is model.expt's (m->lab_*, DIALS's frame): PHI, the
 *     spindle; DETECTOR_Z along the plane's normal by the distance to the
 *     plane; ELEMENT_X / ELEMENT_Y the fast and slow axes from the first
 *     pixel's outer corner (pixel 0 at displacement 0: CBFlib's pixel (0, 0),
 *     dxtbx's origin, is that corner).  So dxtbx reads the detector of the
 *     images as model.expt states it: for a detector square to the beam the
 *     one it built from the miniCBF lines (tests/cli/conventions.bats), and a
 *     tilted or two-theta detector whole, which the miniCBF lines cannot say.
 *   - _array_intensities: overload m->count_cutoff, undefined value -1, gain 1
 *     (dxtbx's trusted range -1 .. cutoff, as from the miniCBF).
 *   - The header convention is then "GENERIC_MINI" whatever the size: dxtbx's
 *     full-CBF PILATUS reader sets the polarization fraction to 0.999.
 * A sensor with a thickness (m->lab 0) gets the miniCBF alone: dxtbx's
 * full-CBF readers take no sensor, its miniCBF readers the parallax
 * correction from the "# Silicon sensor" line (and polarization 0.999; a
 * dials.import override of it survives, one of the sensor does not).
 *
 * Header conventions:
 *   - Detector_distance is the perpendicular sample-to-plane distance
 *     (m->close_distance when > 0, else m->distance), in m.
 *   - Beam_xy is (Fbeam, Sbeam) / pixel_size: pixels from the outer corner of
 *     the first pixel along the fast and slow axes (dxtbx's convention).
 *   - "# Silicon sensor, thickness T m" only when m->sensor_thickness > 0
 *     (dxtbx asserts a positive thickness when the line is present).
 *   - Count_cutoff is m->count_cutoff, or 2147483647 when that is not >= 1.
 *     The counts themselves are the caller's: nb-convert writes them from 0
 *     (less their ADC offset, docs/physics.md 2.6) and lowers the cutoff.
 *   - "# Polarization P" when m->polarization > 0 (the field of dxtbx's own
 *     miniCBF writer; its miniCBF readers do not take it).
 *   - "# Software: ..., frame N" with N = m->frame + 1, as the file names.
 *   - Exposure_time and Exposure_period are m->exposure, or 1 s when unset.
 *   - The time stamp is 1970-01-01T00:00:00 + frame * Exposure_period, so that
 *     files are reproducible and a sweep's frames have increasing epochs.
 *   - Image sizes that are a PILATUS module layout (487 + n*494 fast,
 *     195 + n*212 slow) are labelled header_convention "PILATUS_1.2" and
 *     "# Detector: PILATUS ...".  Any other size is labelled "GENERIC_MINI"
 *     with a Detector line that does not say PILATUS: dxtbx's PILATUS reader
 *     asserts that the size matches the module gaps (and fails on, e.g.,
 *     512 x 512), while its GENERIC_MINI reader exists for simulated
 *     pixel-array data of any size.  The "# ..." header lines are the same.
 *     (Only a miniCBF without imgCIF categories: see above.)
 *
 * Byte-offset deltas are taken modulo 2^32 and always fit the 1-, 2- or
 * 4-byte forms, so a jump such as 2147483647 -> -2147483648 costs one byte.
 * A delta of exactly -2^31 (mod 2^32: -1 next to 2147483647, 0 next to
 * -2147483648) is written as the 4-byte value 0x80000000, which is how
 * dxtbx's and fabio's int32 decoders (and dxtbx's own writer) treat it; the
 * CBF specification reads that value as the escape to a 64-bit delta, which
 * neither dxtbx nor fabio's fast path decodes.  So CBFlib-based readers would
 * misread such a pixel pair - it never occurs with counts of one sign.
 *
 * nb_cbf_read accepts both: in files whose first line names the nb toolkit it
 * reads 0x80000000 as a plain delta, in other files as the 64-bit escape, and
 * tries the other reading when the first does not give exactly width x height
 * values in X-Binary-Size bytes.
 */
#ifndef NB_FORMAT_CBF_H
#define NB_FORMAT_CBF_H

#include <stdint.h>

#include "image_meta.h"
#include "nb_error.h"

/* Write m->fpixels x m->spixels counts (row 0 = slow index 0) as a miniCBF. */
nb_status nb_cbf_write(const char *path, const int32_t *counts, const nb_image_meta *m);

/* Read a miniCBF with x-CBF_BYTE_OFFSET signed 32-bit data (the files written
 * above, and PILATUS files in general).  *counts is malloc'ed (free() it);
 * the Content-MD5, when present, is checked.  A truncated or malformed file is
 * NB_ERR_DATA with a message naming the path. */
nb_status nb_cbf_read(const char *path, int32_t **counts, int *width, int *height);
/* The same, and the overload the header states (_array_intensities.overload,
 * else "# Count_cutoff N counts"; NAN when it states none). */
nb_status nb_cbf_read_stated(const char *path, int32_t **counts, int *width, int *height, double *overload);

#endif
