/* nb_cli.h - the tools' command-line code: the standard options every tool
 * shares (-h/--help, --version and --help-man print and exit), and --help
 * and the man page from the flag registry (one source for both).  Its own
 * library (build/libnbcli.a) that the tools and the tests link and libnb
 * does not contain: a library's caller decides when to print and exit.  The
 * words joined and split (a plan's COMMAND) are libnbcore/nb_args.h's. */
#ifndef NB_CLI_H
#define NB_CLI_H

#include <stdio.h>

#include "nb_args.h"
#include "nb_error.h"
#include "nb_options.h"

#ifndef NB_VERSION
#define NB_VERSION "0.1.0"
#endif

/* The standard options every tool shares: their values. */
typedef struct nb_std_opts {
    const char *output;   /* -o FILE, default "-" */
    const char *input;    /* positional input stream, default "-" */
    int quiet, verbose;
    int threads;          /* 0 = default (OpenMP's choice) */
} nb_std_opts;

/* The standard options that only set a value (-o FILE, -q, -v, --threads N):
 * if argv[*i] is one, set it in *o and return 1, advancing *i past its value
 * (on a bad value *st is set); 0 otherwise: what nb_std_option reads after
 * --help and --version. */
int nb_std_setting(nb_std_opts *o, int argc, char **argv, int *i, nb_status *st);

typedef struct nb_tool_info {
    const char *name;        /* "nb-sim" */
    unsigned owner;          /* its enum nb_owner bit */
    const char *synopsis;    /* "[OPTIONS] [STREAM]" */
    const char *summary;     /* one line */
    const char *description; /* paragraphs, may be NULL */
    const nb_opt_table *opts; /* its flags: the registry's it owns, bound, and its own spellings
                                 (listed after them in --help; a -o or --threads row of its own
                                 replaces the standard one's line) */
    const char *examples;    /* may be NULL */
    void (*version_extra)(FILE *fp); /* more --version lines (nb-sim: its backends), or NULL */
    const char *exit_more;   /* a status of its own after the three ("3: the fit ran ..."), or NULL */
} nb_tool_info;

/* Every main() calls this first: besides the defaults it sets up the tool's
 * quiet death by SIGPIPE when its reader goes away (nb_closed_output_is_quiet). */
void nb_std_opts_init(nb_std_opts *o);
/* If argv[*i] is a standard option (-h/--help, --version, -o FILE, -q, -v,
 * --threads N), handle it (printing help/version and exiting for those) and
 * return 1, advancing *i past its value.  Returns 0 otherwise; on a standard
 * option with a bad value sets *st. */
int nb_std_option(const nb_tool_info *tool, nb_std_opts *o, int argc, char **argv, int *i, nb_status *st);
/* The tool's command line (argv[0] its name) through the one loop: its
 * table's own spellings, the standard options, the registry flags it owns
 * (each applied to `dest`, its options struct, as it comes), and one input
 * stream into o->input. */
nb_status nb_tool_parse(const nb_tool_info *tool, nb_std_opts *o, void *dest, int argc, char **argv);
/* Apply verbosity and --threads, and check the environment the tools read
 * (NB_SIMD: an unknown value is a usage error). */
nb_status nb_std_apply(const nb_std_opts *o);

void nb_print_help(const nb_tool_info *tool, FILE *fp);
/* The same content as a man page (roff), for man/ (make man). */
void nb_print_man(const nb_tool_info *tool, FILE *fp);

#endif
