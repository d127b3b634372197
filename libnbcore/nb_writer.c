/* nb_writer.c - the nb stream writer: records onto a file or standard
 * output (a large payload handed to a pipe by reference, vmsplice), each
 * segment closed by its END record and handed on at once; and the ABORT
 * record a failing tool leaves on the pipe to the next stage. */
#include "nb_stream_impl.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#ifdef __linux__
#include <fcntl.h>
#include <sys/uio.h>
#endif
#include <unistd.h>
#include <zlib.h>

#include "nb_tuning.h"
#include "nb_util.h"

struct nb_writer {
    nb_outfile *of;
    long records_in_segment;
    int on_stdout;  /* keeps stdout_in_record up to date */
};

/* ---- the ABORT record ---------------------------------------------------- */
/* A tool that fails leaves an ABORT record on the pipe its stream goes down,
 * so that the stages after it stop with its status and without a message of
 * their own (nb_exit_on_error() calls leave_abort() through its failure
 * hook).  Only between two records: after a half-written one the next stage
 * must see the truncation.  Process-wide, since standard output is. */
static int stdout_carries_stream; /* nb_stream_to_stdout(1), or a writer opened on "-" */
static int stdout_in_record;      /* a writer on stdout has handed it part of a record */

/* The failure hook: the ABORT record of `tool` failing with `status`, into
 * standard output when that is a pipe carrying this tool's stream.  Built on
 * the stack (no allocation: the failure may be a lack of memory). */
static void leave_abort(const char *tool, int status)
{
    struct stat sb;
    if (!stdout_carries_stream || stdout_in_record) return;
    /* a terminal gets no binary; a file keeps no half stream with an ABORT
     * in it (a saved stream that ends early is reported as truncated) */
    if (fstat(STDOUT_FILENO, &sb) != 0 || !S_ISFIFO(sb.st_mode)) return;
    /* what the FILE holds goes first; if that fails, where the pipe's stream
     * ends is unknown */
    if (ferror(stdout) || fflush(stdout) != 0) return;
    char header[128];
    int hlen = snprintf(header, sizeof header, "\nTOOL=%.64s\nSTATUS=%d\n", tool, status);
    if (hlen < 0 || (size_t)hlen >= sizeof header) return;
    nb_record rec;
    memset(&rec, 0, sizeof rec);
    snprintf(rec.type, sizeof rec.type, "ABORT");
    rec.header = header;
    rec.header_len = (size_t)hlen;
    unsigned char pre[NB_PREAMBLE_SIZE], crcb[4];
    nb_wire_preamble(&rec, pre);
    uint32_t crc = nb_wire_crc_update((uint32_t)crc32(0L, Z_NULL, 0), pre, NB_PREAMBLE_SIZE);
    nb_put_u32(crcb, nb_wire_crc_update(crc, (const unsigned char *)header, (uint64_t)hlen));
    /* the next stage may be gone too: then the write fails (EPIPE) and this
     * tool still exits with its own status, not killed by SIGPIPE */
    signal(SIGPIPE, SIG_IGN);
    if (fwrite(pre, 1, sizeof pre, stdout) == sizeof pre && fwrite(header, 1, (size_t)hlen, stdout) == (size_t)hlen)
        (void)fwrite(crcb, 1, sizeof crcb, stdout);
    (void)fflush(stdout);
}

void nb_stream_to_stdout(int yes)
{
    stdout_carries_stream = yes;
    nb_set_failure_hook(yes ? leave_abort : NULL);
}

nb_status nb_writer_open(nb_writer **out, const char *path)
{
    nb_writer *w = calloc(1, sizeof *w);
    *out = NULL;
    if (!w) return nb_error_set(NB_ERR_NOMEM, "out of memory");
    nb_status st = nb_outfile_open(&w->of, path ? path : "-", 0);
    if (st) {
        free(w);
        return st;
    }
    if (nb_outfile_fp(w->of) == stdout) {
        w->on_stdout = 1;
        nb_stream_to_stdout(1);
    }
    *out = w;
    return NB_OK;
}

/* NB_ERR_PIPE for a reader that went away (main() then dies of SIGPIPE,
 * quietly), NB_ERR_IO with a message for anything else */
static nb_status write_failed(nb_writer *w, int e) { return nb_write_error(nb_outfile_path(w->of), e); }

static nb_status write_all(nb_writer *w, const void *p, size_t n)
{
    FILE *fp = nb_outfile_fp(w->of);
    if (n && fwrite(p, 1, n, fp) != n) return write_failed(w, errno);
    return NB_OK;
}

/* The payload of a record the caller frees next, into a pipe: its whole
 * pages are handed to the pipe by reference (vmsplice) instead of copied into
 * it, then dropped from this process (MADV_DONTNEED: reading them again
 * gives zeros), so that nothing this process does later can change what the
 * reader gets, even from a reader that splices the pages on.  The copy into
 * the pipe was a seventh of nb-sim's CPU time for a 64 MiB image.  *done:
 * the leading bytes written (0 where this does not apply: not a pipe, a
 * small payload, a kernel without vmsplice), the rest to be written as usual. */
static nb_status splice_payload(nb_writer *w, unsigned char *payload, size_t n, size_t *done_out)
{
    *done_out = 0;
#if defined(__linux__) && defined(SPLICE_F_GIFT) && defined(MADV_DONTNEED)
    const size_t page = (size_t)sysconf(_SC_PAGESIZE), least = (size_t)4 << 20;
    FILE *fp = nb_outfile_fp(w->of);
    struct stat st;
    if (n < least || fstat(fileno(fp), &st) != 0 || !S_ISFIFO(st.st_mode)) return NB_OK;
    unsigned char *first = (unsigned char *)(((uintptr_t)payload + page - 1) / page * page);
    size_t head = (size_t)(first - payload), len = (n - head) / page * page, done = 0;
    /* the bytes before the first whole page as usual, then the pages */
    nb_status err = write_all(w, payload, head);
    if (!err && fflush(fp) != 0) err = write_failed(w, errno);
    while (!err && done < len) {
        struct iovec iov = {first + done, len - done};
        ssize_t k = vmsplice(fileno(fp), &iov, 1, 0);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0 && done == 0 && (errno == EINVAL || errno == ENOSYS || errno == EPERM || errno == EAGAIN))
            break; /* not here: all of it as usual */
        if (k <= 0) {
            err = write_failed(w, k < 0 ? errno : EIO);
            break;
        }
        done += (size_t)k;
        if (done % page) { /* a page in part (not seen): the rest of it copied, before it is dropped */
            size_t rest = page - done % page;
            if (fwrite(first + done, 1, rest, fp) != rest || fflush(fp) != 0) err = write_failed(w, errno);
            done += rest;
        }
    }
    if (done) (void)madvise(first, done, MADV_DONTNEED);
    *done_out = head + done;
    return err;
#else
    (void)w, (void)payload, (void)n;
    return NB_OK;
#endif
}

static nb_status writer_put(nb_writer *w, const nb_record *rec, int consume, const nb_payload_crc *payload_crc)
{
    unsigned char pre[NB_PREAMBLE_SIZE], crcb[4];
    nb_status st = nb_wire_check_writable(rec);
    if (!st) st = nb_wire_payload_crc_check(rec, payload_crc);
    if (st) return st;
    if (nb_record_is(rec, "END")) return nb_writer_end(w);
    nb_wire_preamble(rec, pre);
    nb_put_u32(crcb, nb_wire_record_crc(rec, pre, payload_crc));
    /* a long write follows a large (parallel) checksum or render */
    if (rec->payload_len >= ((uint64_t)8 << 20)) nb_threads_release_idle();
    if (w->on_stdout) stdout_in_record = 1; /* until the last byte is handed over */
    if ((st = write_all(w, pre, sizeof pre))) return st;
    if ((st = write_all(w, rec->header, rec->header_len))) return st;
    size_t done = 0;
    if (consume && (st = splice_payload(w, rec->payload, (size_t)rec->payload_len, &done))) return st;
    if ((st = write_all(w, rec->payload + done, (size_t)rec->payload_len - done))) return st;
    if ((st = write_all(w, crcb, 4))) return st;
    if (w->on_stdout) stdout_in_record = 0;
    w->records_in_segment++;
    return NB_OK;
}

nb_status nb_writer_put(nb_writer *w, const nb_record *rec) { return writer_put(w, rec, 0, NULL); }

nb_status nb_writer_put_consume(nb_writer *w, nb_record *rec, const nb_payload_crc *payload_crc)
{
    return writer_put(w, rec, 1, payload_crc);
}

nb_status nb_writer_end(nb_writer *w)
{
    nb_record end;
    unsigned char pre[NB_PREAMBLE_SIZE], crcb[4];
    nb_status st;
    nb_record_init(&end, "END");
    nb_hdr_set_long(&end, "RECORDS", w->records_in_segment);
    nb_wire_preamble(&end, pre);
    nb_put_u32(crcb, nb_wire_record_crc(&end, pre, NULL));
    if (w->on_stdout) stdout_in_record = 1;
    st = write_all(w, pre, sizeof pre);
    if (!st) st = write_all(w, end.header, end.header_len);
    if (!st) st = write_all(w, crcb, 4);
    nb_record_free(&end);
    if (!st) {
        if (w->on_stdout) stdout_in_record = 0;
        w->records_in_segment = 0;
        /* hand each finished segment on at once, so pipelines stream */
        if (fflush(nb_outfile_fp(w->of)) != 0) st = write_failed(w, errno);
    }
    return st;
}

nb_status nb_writer_close(nb_writer *w)
{
    nb_status st = nb_outfile_commit(w->of);
    free(w);
    return st;
}

void nb_writer_abort(nb_writer *w)
{
    if (!w) return;
    nb_outfile_abort(w->of);
    free(w);
}
