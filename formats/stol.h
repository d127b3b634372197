/* stol.h - an amorphous scatterer's table (nonBragg's .stol file): F of one
 * molecule against sin(theta)/lambda (or 4 sin(theta)/lambda, or Q). */
#ifndef NB_FORMAT_STOL_H
#define NB_FORMAT_STOL_H

#include <stddef.h>

#include "nb_amorphous.h"
#include "nb_error.h"

/* Text, one row a line: the first column x, the second F, separated by
 * blanks, tabs or , ; : ! (nonBragg's delimiters); later columns are
 * ignored, as nonBragg ignores them.  Blank lines are skipped, and so are
 * lines whose first character (after delimiters) is '#': comments
 * (nonBragg reads such a line as a row of zeros, docs/deviations.md 5.2).
 * A row without F keeps F = NAN (nonBragg takes it as 0).  Anything else that
 * is not a finite number is an error naming the file and line. */
nb_status nb_stol_parse(const char *text, size_t len, const char *name, nb_stol_table *out);
/* The file at path ("-": standard input) through nb_stol_parse. */
nb_status nb_stol_read(const char *path, nb_stol_table *out);

#endif
