/* nb_util.h - small shared helpers: growing strings, strict number parsing,
 * atomic output files, whole-file reading, progress bar.  How the tools ask
 * the system for speed (threads, huge pages, prefaulting) is nb_tuning.h. */
#ifndef NB_UTIL_H
#define NB_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "nb_error.h"

/* ---- growing string ---------------------------------------------------- */
typedef struct nb_strbuf {
    char *data;     /* always NUL-terminated once anything was appended */
    size_t len;
    size_t cap;
} nb_strbuf;

void nb_strbuf_init(nb_strbuf *sb);
void nb_strbuf_free(nb_strbuf *sb);
/* These abort the program on allocation failure (a few bytes of text). */
void nb_strbuf_append(nb_strbuf *sb, const char *s);
void nb_strbuf_appendn(nb_strbuf *sb, const char *s, size_t n);
void nb_strbuf_printf(nb_strbuf *sb, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Hand the buffer over to the caller (never NULL); sb is left empty. */
char *nb_strbuf_take(nb_strbuf *sb);

/* ---- allocation -------------------------------------------------------- */
/* Allocate with a readable error instead of NULL ("cannot allocate 4.0 GiB for
 * the image: Cannot allocate memory").  `what` names the purpose. */
nb_status nb_calloc(void **out, size_t count, size_t size, const char *what);
/* The same checks and message around another allocator of count * size bytes. */
nb_status nb_alloc_checked(void **out, size_t count, size_t size, const char *what, void *(*alloc)(size_t bytes));
/* The most memory one buffer may take: the machine's physical memory, or
 * less with NB_MEMORY_LIMIT=BYTES[K|M|G] in the environment.  Sizes read from
 * files (grids, payloads) beyond it are refused with the size they would need. */
uint64_t nb_memory_limit(void);

/* strdup that aborts on failure (tiny strings only). */
char *nb_xstrdup(const char *s);
/* "12.0 MiB" */
void nb_format_bytes(double bytes, char *buf, size_t size);

/* ---- strict number parsing --------------------------------------------- */
/* Whole string must be a finite number; on failure the message names `what`. */
nb_status nb_parse_double(const char *s, double *out, const char *what);
/* Like nb_parse_double but also accepts inf/nan (for values where they mean
 * something, e.g. -detector_abs inf). */
nb_status nb_parse_double_any(const char *s, double *out, const char *what);
nb_status nb_parse_int(const char *s, int *out, const char *what);
/* --frames A:B of nb-sim, nb-fit and nb-convert: 1 <= A <= B, frames counted
 * from 1 (usage errors name the option) */
nb_status nb_parse_frames(const char *v, int *first, int *last);
nb_status nb_parse_long(const char *s, long *out, const char *what);

/* Shortest text that reads back to exactly the same double ("%.17g" trimmed). */
void nb_format_double(double v, char *buf, size_t size);

/* ---- bytes ------------------------------------------------------------- */
/* n bytes (at most 8) at p as an unsigned number, most significant first
 * (big-endian: msgpack's heads, bitshuffle's chunk headers) or last
 * (little-endian: DIALS's column blobs), whatever the host's order. */
static inline uint64_t nb_load_be(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int k = 0; k < n; k++) v = v << 8 | p[k];
    return v;
}
static inline uint64_t nb_load_le(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int k = n - 1; k >= 0; k--) v = v << 8 | p[k];
    return v;
}

/* ---- files ------------------------------------------------------------- */
/* Read a whole file (path "-" = stdin) into a NUL-terminated buffer. */
nb_status nb_read_file(const char *path, char **data, size_t *len);

/* An output file written under a temporary name in the same directory and
 * renamed over `path` by nb_outfile_commit(); nb_outfile_abort() (or a fatal
 * signal, or exit without commit) removes the temporary file, so a failure
 * never leaves a partial file behind.  path "-" writes to stdout directly. */
typedef struct nb_outfile nb_outfile;
/* A small text file written whole, atomically (nb_outfile). */
nb_status nb_write_text_file(const char *path, const char *text, size_t len);
nb_status nb_outfile_open(nb_outfile **of, const char *path, int binary_ok_on_tty);
FILE *nb_outfile_fp(nb_outfile *of);
const char *nb_outfile_path(const nb_outfile *of);
/* Flush, check for write errors (ENOSPC...), close and rename into place. */
nb_status nb_outfile_commit(nb_outfile *of);
void nb_outfile_abort(nb_outfile *of);

/* A series' file name: the run of '#' in tmpl replaced by frame + 1 (files
 * are numbered from 1, as DIALS's templates), zero-padded to the run's
 * length; a name without '#' as it is.  -1 when tmpl holds more than one
 * run of '#' (or the name does not fit in size). */
int nb_frame_path(const char *tmpl, long frame, char *out, size_t size);

/* path as an absolute name (the working directory before a relative one), as
 * dials.import writes names into an experiment list: 0, or -1 with errno set
 * when the directory cannot be named or the name does not fit in size. */
int nb_absolute_path(const char *path, char *out, size_t size);

/* A new empty file beside `path` (the same directory, so that rename() over
 * path is atomic), named ".NAME<tag>.<6 random characters>", with the usual
 * umask-based mode (not mkstemp's 0600): its descriptor, and its name in *tmp
 * (malloc'ed); -1 with errno set and *tmp NULL when it cannot be made. */
int nb_temp_beside(const char *path, const char *tag, char **tmp);

/* Temporary files of the caller's own, removed on exit or a fatal signal
 * unless unregistered first (nb-convert holds its outputs until the stream
 * has ended cleanly).  The string must stay valid while registered. */
void nb_temp_register(char *path);
void nb_temp_unregister(const char *path);

/* The status of a write to `path` ("-": standard output) that failed with
 * errno `e`: NB_ERR_PIPE when the reader of a pipe went away (EPIPE), else
 * NB_ERR_IO, "cannot write 'PATH': <strerror>". */
nb_status nb_write_error(const char *path, int e);

/* ---- a reader that goes away -------------------------------------------- */
/* A tool whose standard output's reader goes away ends as `yes | head` does:
 * killed by SIGPIPE (a shell shows 141), printing nothing, so that a pipe's
 * status and messages are those of the stage that failed, not of the stages
 * before it.  A parent may have ignored SIGPIPE (`trap '' PIPE`, Python's
 * subprocess) or blocked it, and both survive exec: this gives SIGPIPE its
 * default action back (or leaves the temporary files' cleanup handler, which
 * re-raises it) and unblocks it.  nb_std_opts_init() calls it, first thing in
 * every tool's main(), before any thread starts. */
void nb_closed_output_is_quiet(void);
/* For main(), when a write failed with EPIPE all the same (NB_ERR_PIPE: the
 * signal was caught or ignored after all): removes the pending temporary
 * files, as the signal would have, and dies of SIGPIPE without a word. */
void nb_die_of_sigpipe(void) __attribute__((noreturn));

/* ---- a file past the size limit ------------------------------------------ */
/* A write past the file size limit (ulimit -f, RLIMIT_FSIZE) would kill the
 * tool with SIGXFSZ, leaving its temporary file and no message: ignored, the
 * write fails with EFBIG instead, which the writers report as they report a
 * full disk ("cannot write 'x.cbf': File too large", exit 1) and the
 * temporary file is removed.  nb_std_opts_init() calls it. */
void nb_too_large_is_an_error(void);

/* ---- progress ---------------------------------------------------------- */
/* A one-line progress bar on stderr, drawn only when stderr is a terminal and
 * the verbosity is not negative.  A bar can be one part of a longer job (one
 * frame's panel of a series): it then covers the fraction [base, base + span)
 * of the job begun at t0 (nb_now()), and its bar, percentage and ETA are the
 * whole job's, so that they run on from one part to the next. */
typedef struct nb_progress {
    int enabled;
    long total;
    long done;
    int last_permille;
    const char *label;
    double t0, base, span;
} nb_progress;
void nb_progress_start(nb_progress *p, const char *label, long total, int allowed);
/* one part of a job begun at t0: fraction base .. base + span of it */
void nb_progress_start_part(nb_progress *p, const char *label, long total, int allowed, double t0, double base,
                            double span);
void nb_progress_add(nb_progress *p, long n);   /* thread-safe via atomics */
void nb_progress_finish(nb_progress *p);
/* The bar's text (no carriage return): "TOOL: LABEL [####....]  42% ETA 1:23"
 * for the fraction done of the job after elapsed seconds; the ETA (elapsed x
 * (1 - fraction) / fraction, as nb_format_duration) is "--:--" until a
 * thousandth of the job or a fifth of a second has passed, and gone at the end. */
void nb_progress_line(char *buf, size_t size, const char *tool, const char *label, double fraction,
                      double elapsed);
/* seconds as "M:SS" (under an hour) or "H:MM:SS", rounded up */
void nb_format_duration(double seconds, char *buf, size_t size);

/* Monotonic wall clock in seconds. */
double nb_now(void);

#endif
