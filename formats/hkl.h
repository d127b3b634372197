/* hkl.h - structure-factor files: "h k l F" text and the Fdump.bin cache. */
#ifndef NB_FORMAT_HKL_H
#define NB_FORMAT_HKL_H

#include "nb_error.h"
#include "nb_hkl.h"

/* Read an "h k l F" text file into a dense grid prefilled with default_F.
 * Blank lines and lines starting with '#' or '!' are skipped, columns after
 * the fourth (sigma, phase ...) are ignored, duplicates: the last one wins.
 * Indices must be integers; F must be finite. */
nb_status nb_hkl_read_text(const char *path, double default_F, nb_hkl *out);

/* Fdump.bin, byte-compatible with the reference: the text line
 * "h_min h_max k_min k_max l_min l_max\n\f" then, for each h and k of the
 * box plus one spare slab per axis, (l_range+1) native doubles. */
nb_status nb_hkl_write_fdump(const nb_hkl *h, const char *path);
nb_status nb_hkl_read_fdump(const char *path, double default_F, nb_hkl *out);

#endif
