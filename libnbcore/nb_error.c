/* nb_error.c - the message of the current failure, the exit code of a status
 * (an upstream stage's for NB_ERR_UPSTREAM), the one way out of a failing
 * main(), and the warning and info lines every tool prints on stderr. */
#include "nb_error.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_util.h"

static const char *tool_name = "nb";
/* each thread's own: a worker's failure (nb-sim's frame writer, nb-convert's
 * frame pool) is told to the main thread, which sets it again there */
static _Thread_local char message[4096];
static int verbosity = 0;
/* the stage before this one that failed (an ABORT record in the input) */
static char upstream_tool[64];
static int upstream_status = 1, upstream_quiet;
static nb_failure_hook failure_hook;

void nb_set_tool_name(const char *name) { tool_name = name; }
const char *nb_tool_name(void) { return tool_name; }

nb_status nb_error_set(nb_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    return status;
}

nb_status nb_error_prefix(nb_status status, const char *fmt, ...)
{
    char old[sizeof message];
    char prefix[1024];
    va_list ap;
    memcpy(old, message, sizeof old);
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    /* the prefix, then as much of the old message as fits (truncation is intended) */
    size_t n = strlen(prefix);
    if (n > sizeof message - 3) n = sizeof message - 3;
    memcpy(message, prefix, n);
    memcpy(message + n, ": ", 2);
    size_t room = sizeof message - n - 2;
    size_t m = strnlen(old, room - 1);
    memcpy(message + n + 2, old, m);
    message[n + 2 + m] = '\0';
    return status;
}

const char *nb_error_message(void) { return message; }

void nb_error_rename(const char *from, const char *to)
{
    char *at = from[0] ? strstr(message, from) : NULL;
    if (!at) return;
    char old[sizeof message];
    memcpy(old, message, sizeof old);
    snprintf(message, sizeof message, "%.*s%s%s", (int)(at - message), old, to, old + (at - message) + strlen(from));
}

nb_status nb_error_upstream(const char *tool, int status, int quiet, const char *fmt, ...)
{
    va_list ap;
    snprintf(upstream_tool, sizeof upstream_tool, "%s", tool);
    /* an exit status is 1..255; anything else read from a stream still fails */
    upstream_status = status >= 1 && status <= 255 ? status : 1;
    upstream_quiet = quiet;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    return NB_ERR_UPSTREAM;
}

const char *nb_upstream_tool(void) { return upstream_tool; }
int nb_upstream_status(void) { return upstream_status; }

int nb_exit_code(nb_status status)
{
    if (status == NB_OK) return 0;
    if (status == NB_ERR_USAGE) return 2;
    if (status == NB_ERR_PIPE) return 128 + SIGPIPE;
    /* the whole pipe agrees on the status of the stage that failed first */
    if (status == NB_ERR_UPSTREAM) return upstream_status;
    return 1;
}

void nb_set_failure_hook(nb_failure_hook hook) { failure_hook = hook; }

void nb_exit_on_error(nb_status status)
{
    static int exiting;
    if (status == NB_OK) return;
    /* the reader that went away has failed, or stopped on purpose (head):
     * its status and message tell what happened, a second one would not */
    if (status == NB_ERR_PIPE) nb_die_of_sigpipe();
    fflush(stdout);
    int code = nb_exit_code(status);
    /* an upstream failure from a pipe was told by that stage already; from a
     * saved stream it was not, so say where the stream ends */
    if (status != NB_ERR_UPSTREAM || !upstream_quiet)
        fprintf(stderr, "%s: %s\n", tool_name, message[0] ? message : "unknown error");
    if (status == NB_ERR_USAGE)
        fprintf(stderr, "Try '%s --help' for more information.\n", tool_name);
    /* the hook runs once: should it fail in turn (out of memory), the second
     * call only exits */
    if (failure_hook && !exiting) {
        exiting = 1;
        failure_hook(status == NB_ERR_UPSTREAM && upstream_tool[0] ? upstream_tool : tool_name, code);
    }
    exit(code);
}

void nb_set_verbosity(int level) { verbosity = level; }
int nb_verbosity(void) { return verbosity; }

void nb_warn(const char *fmt, ...)
{
    va_list ap;
    if (verbosity < 0) return;
    fprintf(stderr, "%s: warning: ", tool_name);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

void nb_info(const char *fmt, ...)
{
    va_list ap;
    if (verbosity < 1) return;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}
