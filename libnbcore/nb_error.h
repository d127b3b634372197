/* nb_error.h - the error idiom shared by every library function.
 *
 * A library function that can fail returns an nb_status and, before it returns
 * a failure, records a message with nb_error_set().  Only main() decides to
 * exit: it calls nb_exit_on_error(), which prints "<tool>: <message>" on stderr
 * and exits with the status' exit code (2 for usage errors, 1 otherwise), after
 * leaving an ABORT record for the next stage of a pipe (nb_set_failure_hook).
 */
#ifndef NB_ERROR_H
#define NB_ERROR_H

#include <stdarg.h>

typedef enum nb_status {
    NB_OK = 0,
    NB_ERR_USAGE = 1,   /* bad command line: exit 2 */
    NB_ERR_IO = 2,      /* open/read/write failed: exit 1 */
    NB_ERR_DATA = 3,    /* malformed or inconsistent input data: exit 1 */
    NB_ERR_NOMEM = 4,   /* allocation failed or would be absurd: exit 1 */
    NB_ERR_UNSUPPORTED = 5, /* a valid request this build cannot do: exit 1 */
    NB_ERR_PIPE = 6,    /* the reader of a pipe we write went away (EPIPE): not
                           this tool's failure but the reader's, so main() dies
                           of SIGPIPE quietly, as with the signal itself */
    NB_ERR_UPSTREAM = 7 /* the input stream ends in an ABORT record: a stage
                           before this one failed (nb_error_upstream); main()
                           exits with that stage's status, quietly when the
                           input is a pipe (that stage said why on the same
                           stderr), and hands the ABORT on */
} nb_status;

/* Name printed in front of every message ("nb-sim"); set once by main(). */
void nb_set_tool_name(const char *name);
const char *nb_tool_name(void);

/* Record the message of the failure being returned; returns `status` so that
 * `return nb_error_set(NB_ERR_IO, "cannot open '%s': %s", p, strerror(errno));`
 * reads naturally. */
nb_status nb_error_set(nb_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Prefix the current message with more context: "reading plan: <old>". */
nb_status nb_error_prefix(nb_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
const char *nb_error_message(void);
/* The current message naming `to` where it names `from`: a held output's
 * final name in place of its temporary one, which a writer saw. */
void nb_error_rename(const char *from, const char *to);

/* For the stream reader, at an ABORT record: the stage `tool` before this one
 * failed with exit status `status` (1..255).  The message (fmt) is kept for
 * nb_exit_on_error() to print only when `quiet` is 0: from a pipe the failing
 * stage has already said why on the same stderr, from a saved stream it has
 * not.  Returns NB_ERR_UPSTREAM. */
nb_status nb_error_upstream(const char *tool, int status, int quiet, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The stage and status of the last nb_error_upstream() ("" and 1 before any). */
const char *nb_upstream_tool(void);
int nb_upstream_status(void);

/* Exit code for a status: 0, 2 for usage, 128 + SIGPIPE (what a shell shows
 * for a death by SIGPIPE) for NB_ERR_PIPE, the failed stage's status for
 * NB_ERR_UPSTREAM, 1 otherwise. */
int nb_exit_code(nb_status status);

/* What nb_exit_on_error() calls last, before it exits: with the name of the
 * stage that failed (this tool, or for NB_ERR_UPSTREAM the stage before it)
 * and the exit status.  The stream layer sets it, to leave an ABORT record on
 * standard output (nb_stream.h); NULL: nothing. */
typedef void (*nb_failure_hook)(const char *tool, int status);
void nb_set_failure_hook(nb_failure_hook hook);

/* For main(): if status is not NB_OK, print "<tool>: <message>" and exit; for
 * NB_ERR_PIPE print nothing and die of SIGPIPE (nb_die_of_sigpipe()); for
 * NB_ERR_UPSTREAM print the message only when it was not quiet.  Before the
 * exit, the failure hook runs. */
void nb_exit_on_error(nb_status status);

/* Logging to stderr, "<tool>: warning: ..." and plain info lines.
 * nb_set_verbosity(-1) silences warnings (-q); 1 enables nb_info (-v). */
void nb_set_verbosity(int level);
int nb_verbosity(void);
void nb_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void nb_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
