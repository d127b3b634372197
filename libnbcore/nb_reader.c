/* nb_reader.c - the nb stream reader: an input opened (a file, standard
 * input, memory), and one record read at a time in the order its bytes
 * come, each part checked before the next is read or allocated for (the
 * preamble, the header, the payload, the CRC over all of them), the
 * segments' END counts checked, and an ABORT record taken as the failure
 * of the stage that wrote it.  The payload itself: nb_reader_payload.c. */
#include "nb_stream_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "nb_tuning.h"
#include "nb_util.h"

nb_status nb_reader_open(nb_reader **out, const char *path)
{
    nb_reader *r = calloc(1, sizeof *r);
    *out = NULL;
    if (!r) return nb_error_set(NB_ERR_NOMEM, "out of memory");
    if (!path || strcmp(path, "-") == 0) {
        if (isatty(STDIN_FILENO)) {
            free(r);
            return nb_error_set(NB_ERR_USAGE,
                                "standard input is a terminal; pipe an nb stream in or name a stream file");
        }
        r->fp = stdin;
        nb_pipe_widen(STDIN_FILENO);
        r->name = nb_xstrdup("standard input");
    } else {
        r->fp = fopen(path, "rb");
        if (!r->fp) {
            int e = errno;
            free(r);
            return nb_error_set(NB_ERR_IO, "cannot open '%s': %s", path, strerror(e));
        }
        r->name = nb_xstrdup(path);
    }
    struct stat sb;
    r->from_pipe = fstat(fileno(r->fp), &sb) == 0 && S_ISFIFO(sb.st_mode);
    *out = r;
    return NB_OK;
}

nb_status nb_reader_open_mem(nb_reader **out, const unsigned char *buf, size_t len, const char *name)
{
    nb_reader *r = calloc(1, sizeof *r);
    *out = NULL;
    if (!r) return nb_error_set(NB_ERR_NOMEM, "out of memory");
    r->mem = buf;
    r->mem_len = len;
    r->name = nb_xstrdup(name ? name : "memory");
    *out = r;
    return NB_OK;
}

const char *nb_reader_name(const nb_reader *r) { return r->name; }

void nb_reader_close(nb_reader *r)
{
    if (!r) return;
    if (r->fp && r->fp != stdin) fclose(r->fp);
    free(r->name);
    free(r->ring);
    for (int i = 0; i < r->nspare; i++) free(r->spare[i]);
    free(r);
}

size_t nb_reader_read_bytes(nb_reader *r, void *dst, size_t n, int *ioerr)
{
    size_t got;
    *ioerr = 0;
    if (r->fp) {
        got = fread(dst, 1, n, r->fp);
        if (got < n && ferror(r->fp)) *ioerr = errno ? errno : EIO;
    } else {
        size_t avail = r->mem_len - r->mem_pos;
        got = n < avail ? n : avail;
        memcpy(dst, r->mem + r->mem_pos, got);
        r->mem_pos += got;
    }
    r->offset += got;
    return got;
}

nb_status nb_reader_truncated(nb_reader *r, const char *what, long idx, const char *type, uint64_t got,
                              uint64_t want)
{
    if (type)
        return nb_error_set(NB_ERR_DATA,
                            "%s: truncated stream: %s of record %ld (%s) has %llu of %llu bytes",
                            r->name, what, idx, type, (unsigned long long)got, (unsigned long long)want);
    return nb_error_set(NB_ERR_DATA, "%s: truncated stream: record %ld preamble has %llu of %llu bytes",
                        r->name, idx, (unsigned long long)got, (unsigned long long)want);
}

/* What the reader answers once it has met an ABORT record. */
static nb_status upstream_failed(const nb_reader *r)
{
    return nb_error_upstream(r->abort_tool, r->abort_status, r->from_pipe,
                             "%s: the stream ends where %s failed (status %d)", r->name, r->abort_tool,
                             r->abort_status);
}

/* An ABORT record: the stage that wrote it (TOOL) failed with STATUS and has
 * said why, or a stage after it handed it on.  The stream ends here. */
static nb_status read_abort(nb_reader *r, const nb_record *rec)
{
    size_t len;
    long status;
    const char *tool = nb_hdr_find(rec, "TOOL", &len);
    if (!tool) return nb_error_set(NB_ERR_DATA, "%s: ABORT record: missing key TOOL", r->name);
    /* a name to print and to hand on: one short line of printable ASCII */
    int printable = len > 0 && len < sizeof r->abort_tool;
    for (size_t i = 0; printable && i < len; i++) printable = tool[i] >= 0x20 && tool[i] <= 0x7e;
    if (!printable) return nb_error_set(NB_ERR_DATA, "%s: ABORT record: bad value for TOOL", r->name);
    nb_status st = nb_hdr_get_long(rec, "STATUS", &status);
    if (st) return nb_error_prefix(st, "%s", r->name);
    if (status < 1 || status > 255)
        return nb_error_set(NB_ERR_DATA, "%s: ABORT record: STATUS=%ld is not the status of a failure (1..255)",
                            r->name, status);
    memcpy(r->abort_tool, tool, len);
    r->abort_tool[len] = '\0';
    r->abort_status = (int)status;
    return upstream_failed(r);
}

/* A record's preamble (magic, version, type, lengths) into pre.  At the end
 * of the input, between records, *eof = 1 when the stream ended properly
 * (after an END record). */
static nb_status read_preamble(nb_reader *r, unsigned char pre[NB_PREAMBLE_SIZE], long idx, int *eof)
{
    int ioerr;
    size_t got = nb_reader_read_bytes(r, pre, NB_PREAMBLE_SIZE, &ioerr);
    if (ioerr) return nb_error_set(NB_ERR_IO, "cannot read %s: %s", r->name, strerror(ioerr));
    if (got == 0) {
        if (r->records_total == 0) return nb_error_set(NB_ERR_DATA, "%s: empty stream (no records)", r->name);
        if (!r->last_was_end)
            return nb_error_set(NB_ERR_DATA, "%s: truncated stream: it ends after record %ld without an END record",
                                r->name, r->records_total);
        *eof = 1;
        return NB_OK;
    }
    /* check the magic before complaining about length: garbage is not truncation */
    if (memcmp(pre, NB_STREAM_MAGIC, got < 8 ? got : 8) != 0) {
        if (r->records_total == 0)
            return nb_error_set(NB_ERR_DATA, "%s: not an nb stream (bad magic at byte 0)", r->name);
        return nb_error_set(NB_ERR_DATA, "%s: corrupt stream: bad magic at byte %llu (record %ld)", r->name,
                            (unsigned long long)(r->offset - got), idx);
    }
    if (got < NB_PREAMBLE_SIZE) return nb_reader_truncated(r, "preamble", idx, NULL, got, NB_PREAMBLE_SIZE);
    uint32_t version = nb_get_u32(pre + 8);
    if (version != NB_STREAM_VERSION)
        return nb_error_set(NB_ERR_DATA, "%s: record %ld has stream version %u; this program reads version %u",
                            r->name, idx, version, NB_STREAM_VERSION);
    if (!nb_host_is_little_endian())
        return nb_error_set(NB_ERR_UNSUPPORTED, "the nb stream is little-endian; this host is big-endian");
    return NB_OK;
}

/* The header (hlen bytes, NUL-terminated in rec); *crc starts over the
 * preamble and the header */
static nb_status read_header(nb_reader *r, const unsigned char pre[NB_PREAMBLE_SIZE], long idx, uint32_t hlen,
                             nb_record *rec, uint32_t *crc_out)
{
    int ioerr;
    rec->header = malloc((size_t)hlen + 1);
    if (!rec->header) return nb_error_set(NB_ERR_NOMEM, "out of memory reading record %ld", idx);
    size_t got = nb_reader_read_bytes(r, rec->header, hlen, &ioerr);
    if (ioerr) return nb_error_set(NB_ERR_IO, "cannot read %s: %s", r->name, strerror(ioerr));
    if (got < hlen) return nb_reader_truncated(r, "header", idx, rec->type, got, hlen);
    rec->header[hlen] = '\0';
    rec->header_len = hlen;
    uint32_t crc = (uint32_t)crc32(0L, Z_NULL, 0);
    crc = nb_wire_crc_update(crc, pre, NB_PREAMBLE_SIZE);
    crc = nb_wire_crc_update(crc, (const unsigned char *)rec->header, rec->header_len);
    *crc_out = crc;
    return NB_OK;
}

/* What the input can still give: a length it cannot hold is a truncated (or
 * corrupt) stream, found before the allocation.  Memory and regular files
 * know their size; a pipe does not (UINT64_MAX): from a pipe, a large
 * payload is read into a growing buffer, so memory follows the bytes that
 * actually come. */
static uint64_t input_left(const nb_reader *r)
{
    uint64_t avail = UINT64_MAX;
    struct stat sb;
    if (!r->fp) avail = r->mem_len - r->mem_pos;
    else if (fstat(fileno(r->fp), &sb) == 0 && S_ISREG(sb.st_mode)) {
        long pos = ftell(r->fp);
        if (pos >= 0 && (uint64_t)sb.st_size >= (uint64_t)pos) avail = (uint64_t)sb.st_size - (uint64_t)pos;
    }
    return avail;
}

/* The CRC-32 after the payload, against the one computed while reading; and
 * a header that is text throughout */
static nb_status check_crc(nb_reader *r, const nb_record *rec, long idx, uint32_t crc)
{
    unsigned char crcb[4];
    int ioerr;
    size_t got = nb_reader_read_bytes(r, crcb, 4, &ioerr);
    if (ioerr) return nb_error_set(NB_ERR_IO, "cannot read %s: %s", r->name, strerror(ioerr));
    if (got < 4) return nb_reader_truncated(r, "checksum", idx, rec->type, got, 4);
    uint32_t want = nb_get_u32(crcb);
    if (want != crc)
        return nb_error_set(NB_ERR_DATA, "%s: corrupt stream: record %ld (%s) fails its CRC-32 check", r->name, idx,
                            rec->type);
    if (memchr(rec->header, '\0', rec->header_len))
        return nb_error_set(NB_ERR_DATA, "%s: corrupt stream: record %ld (%s) has a NUL byte in its header", r->name,
                            idx, rec->type);
    return NB_OK;
}

/* A whole record has come: count it.  An ABORT ends the stream; an END
 * closes a segment, and must count its records right. */
static nb_status count_record(nb_reader *r, const nb_record *rec)
{
    r->records_total++;
    if (nb_record_is(rec, "ABORT")) return read_abort(r, rec);
    if (nb_record_is(rec, "END")) {
        long n;
        nb_status st = nb_hdr_get_long(rec, "RECORDS", &n);
        if (st) return nb_error_prefix(st, "%s", r->name);
        if (n != r->records_in_segment)
            return nb_error_set(NB_ERR_DATA,
                                "%s: stream damaged: END record says %ld records but its segment has %ld "
                                "(records lost or spliced?)",
                                r->name, n, r->records_in_segment);
        r->records_in_segment = 0;
        r->last_was_end = 1;
    } else {
        r->records_in_segment++;
        r->last_was_end = 0;
    }
    return NB_OK;
}

/* One record, in the order its bytes come: each part checked before the next
 * is read or allocated for, the CRC over all of them last. */
nb_status nb_reader_next(nb_reader *r, nb_record *rec, int *eof)
{
    unsigned char pre[NB_PREAMBLE_SIZE];
    long idx = r->records_total + 1;
    uint32_t hlen = 0, crc = 0; /* set by the steps below when they succeed */
    uint64_t plen = 0;
    nb_status st;
    *eof = 0;
    nb_record_free(rec);
    if (r->abort_status) return upstream_failed(r); /* nothing follows an ABORT: the same answer again */

    if ((st = read_preamble(r, pre, idx, eof)) || *eof) return st;
    if ((st = nb_wire_parse_preamble(r->name, pre, idx, rec, &hlen, &plen))) return st;
    if ((st = read_header(r, pre, idx, hlen, rec, &crc))) return st;
    if (plen) {
        uint64_t avail = input_left(r);
        if (plen > avail) return nb_reader_truncated(r, "payload", idx, rec->type, avail, plen);
        if ((st = nb_reader_begin_payload(r, rec, plen))) return st;
        st = r->how.use == NB_PAYLOAD_SHOW_ONLY ? nb_reader_read_show_only(r, rec, idx, plen, &crc)
                                                : nb_reader_read_kept(r, rec, idx, plen, avail, &crc);
        if (st) return st;
    }
    rec->payload_len = plen;
    if ((st = check_crc(r, rec, idx, crc))) return st;
    return count_record(r, rec);
}
