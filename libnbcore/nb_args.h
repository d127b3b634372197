/* nb_args.h - a command line's words: joined into one shell-quoted string
 * (a plan's COMMAND, for provenance: nb-geom's, libnb's plans from flags)
 * and split into words again (the tests' plans).  The tools' own
 * command-line code (the standard options, --help, --version, the man page)
 * is cli/nb_cli.h's, which libnb does not contain. */
#ifndef NB_ARGS_H
#define NB_ARGS_H

#include "nb_error.h"

/* The command line as one shell-quoted string (provenance). */
char *nb_join_args(int argc, char **argv);
/* The words of such a string again: words split at blanks, '...' quoting as nb_join_args writes it.
 * *argv is NULL-terminated; free it with nb_free_args(). */
nb_status nb_split_args(const char *line, int *argc, char ***argv);
void nb_free_args(int argc, char **argv);

#endif
