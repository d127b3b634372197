/* nb_args.h - a command line's words: joined into one shell-quoted string
 * (a plan's COMMAND, for provenance), split into words again, and the
 * standard options that only set a value read from them.  The library's
 * part of the command line: a recorded one is replayed by the engine
 * (nb-sim --grad's derivative plans) with no help printed and no exit; the
 * tools' own command-line code (--help, --version, the man page) is
 * cli/nb_cli.h's, which libnb does not contain. */
#ifndef NB_ARGS_H
#define NB_ARGS_H

#include "nb_error.h"

/* The standard options every tool shares: their values. */
typedef struct nb_std_opts {
    const char *output;   /* -o FILE, default "-" */
    const char *input;    /* positional input stream, default "-" */
    int quiet, verbose;
    int threads;          /* 0 = default (OpenMP's choice) */
} nb_std_opts;

/* The standard options that only set a value (-o FILE, -q, -v, --threads N):
 * if argv[*i] is one, set it in *o and return 1, advancing *i past its value
 * (on a bad value *st is set); 0 otherwise.  What a replay of a recorded
 * command line (the engine's derivative plans) reads, and what the tools'
 * nb_std_option (cli/nb_cli.h) reads after --help and --version. */
int nb_std_setting(nb_std_opts *o, int argc, char **argv, int *i, nb_status *st);

/* The command line as one shell-quoted string (provenance). */
char *nb_join_args(int argc, char **argv);
/* The words of such a string again (nb-sim --grad re-reads a plan's
 * COMMAND): words split at blanks, '...' quoting as nb_join_args writes it.
 * *argv is NULL-terminated; free it with nb_free_args(). */
nb_status nb_split_args(const char *line, int *argc, char ***argv);
void nb_free_args(int argc, char **argv);

#endif
