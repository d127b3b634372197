/* nb_record_wire.c - a record's bytes on the wire (docs/stream-format.md):
 * the preamble written and decoded, the record's CRC-32 (in parallel for a
 * large payload, or joined from the CRCs its producer took piece by piece),
 * and a whole record serialised into memory.  The reader and the writer
 * frame records with these; nothing here does input or output. */
#include "nb_stream_impl.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "nb_crc32.h"
#include "nb_tuning.h"
#include "nb_util.h"

void nb_wire_preamble(const nb_record *rec, unsigned char pre[NB_PREAMBLE_SIZE])
{
    memcpy(pre, NB_STREAM_MAGIC, 8);
    nb_put_u32(pre + 8, NB_STREAM_VERSION);
    memset(pre + 12, 0, NB_TYPE_LEN);
    memcpy(pre + 12, rec->type, strnlen(rec->type, NB_TYPE_LEN));
    nb_put_u32(pre + 20, (uint32_t)rec->header_len);
    nb_put_u64(pre + 24, rec->payload_len);
}

uint32_t nb_wire_crc_update(uint32_t crc, const unsigned char *p, uint64_t n) { return nb_crc32_update(crc, p, n); }

/* CRC of a large buffer in pieces on several threads, joined with
 * nb_crc32_combine_op: the same value as one pass. */
static uint32_t crc_parallel(uint32_t crc, const unsigned char *p, uint64_t n)
{
    enum { PIECES = 16 };
    const uint64_t min_piece = 4u << 20;
    if (n < 2 * min_piece) return nb_wire_crc_update(crc, p, n);
    uint64_t piece = (n + PIECES - 1) / PIECES;
    if (piece < min_piece) piece = min_piece;
    int npieces = (int)((n + piece - 1) / piece);
    uint32_t part[PIECES];
#pragma omp parallel for schedule(dynamic, 1)
    for (int i = 0; i < npieces; i++) {
        uint64_t off = (uint64_t)i * piece, len = off + piece > n ? n - off : piece;
        part[i] = nb_wire_crc_update((uint32_t)crc32(0L, Z_NULL, 0), p + off, len);
    }
    const uint32_t op = nb_crc32_combine_gen(piece); /* every piece but the last */
    for (int i = 0; i < npieces; i++) {
        uint64_t off = (uint64_t)i * piece, len = off + piece > n ? n - off : piece;
        crc = nb_crc32_combine_op(crc, part[i], len == piece ? op : nb_crc32_combine_gen(len));
    }
    return crc;
}

/* ---- a payload's CRC from its producer ------------------------------------ */

nb_status nb_payload_crc_init(nb_payload_crc *pc, uint64_t offset, size_t piece_len, size_t pieces)
{
    memset(pc, 0, sizeof *pc);
    nb_status st = nb_calloc((void **)&pc->crc, pieces ? pieces : 1, sizeof *pc->crc, "the payload's CRCs");
    if (st) return st;
    /* faulted in here rather than a page at a time by the producer's threads */
    nb_prefault(pc->crc, pieces * sizeof *pc->crc);
    pc->offset = offset, pc->piece_len = piece_len, pc->pieces = pieces;
    return NB_OK;
}

void nb_payload_crc_take(nb_payload_crc *pc, size_t i, const void *piece)
{
    pc->crc[i] = nb_crc32_update(0, piece, pc->piece_len);
}

void nb_payload_crc_free(nb_payload_crc *pc)
{
    free(pc->crc);
    memset(pc, 0, sizeof *pc);
}

/* Where the producer's pieces lie, checked against the payload */
nb_status nb_wire_payload_crc_check(const nb_record *rec, const nb_payload_crc *pc)
{
    if (!pc) return NB_OK;
    uint64_t covered = (uint64_t)pc->piece_len * pc->pieces;
    if (pc->offset > rec->payload_len || covered > rec->payload_len - pc->offset)
        return nb_error_set(NB_ERR_USAGE, "internal error: the CRCs of %zu pieces of %zu bytes from offset %llu lie "
                                          "outside the %llu-byte payload of its %s record",
                            pc->pieces, pc->piece_len, (unsigned long long)pc->offset,
                            (unsigned long long)rec->payload_len, rec->type);
    return NB_OK;
}

/* The record's CRC; the payload's from its producer's pieces (pc, checked
 * already) where it gave them, else read here */
uint32_t nb_wire_record_crc(const nb_record *rec, const unsigned char pre[NB_PREAMBLE_SIZE], const nb_payload_crc *pc)
{
    uint32_t crc = (uint32_t)crc32(0L, Z_NULL, 0);
    crc = nb_wire_crc_update(crc, pre, NB_PREAMBLE_SIZE);
    crc = nb_wire_crc_update(crc, (const unsigned char *)rec->header, rec->header_len);
    if (!pc) return crc_parallel(crc, rec->payload, rec->payload_len);
    crc = crc_parallel(crc, rec->payload, pc->offset);
    const uint32_t op = nb_crc32_combine_gen(pc->piece_len); /* pieces of one length: one operator */
    for (size_t i = 0; i < pc->pieces; i++) crc = nb_crc32_combine_op(crc, pc->crc[i], op);
    uint64_t end = pc->offset + (uint64_t)pc->piece_len * pc->pieces;
    return end < rec->payload_len ? crc_parallel(crc, rec->payload + end, rec->payload_len - end) : crc;
}

nb_status nb_wire_check_writable(const nb_record *rec)
{
    if (!nb_host_is_little_endian())
        return nb_error_set(NB_ERR_UNSUPPORTED, "the nb stream is little-endian; this host is big-endian");
    if (rec->header_len > NB_MAX_HEADER)
        return nb_error_set(NB_ERR_DATA, "%s record header is too large (%zu bytes)", rec->type, rec->header_len);
    if (!rec->type[0]) return nb_error_set(NB_ERR_DATA, "record without a type");
    return NB_OK;
}

nb_status nb_record_serialize(const nb_record *rec, unsigned char **buf, size_t *len)
{
    unsigned char pre[NB_PREAMBLE_SIZE], crcb[4];
    nb_status st = nb_wire_check_writable(rec);
    *buf = NULL;
    *len = 0;
    if (st) return st;
    size_t total = NB_PREAMBLE_SIZE + rec->header_len + (size_t)rec->payload_len + 4;
    unsigned char *p = malloc(total);
    if (!p) return nb_error_set(NB_ERR_NOMEM, "out of memory serialising a %s record", rec->type);
    nb_wire_preamble(rec, pre);
    nb_put_u32(crcb, nb_wire_record_crc(rec, pre, NULL));
    memcpy(p, pre, NB_PREAMBLE_SIZE);
    memcpy(p + NB_PREAMBLE_SIZE, rec->header, rec->header_len);
    if (rec->payload_len) memcpy(p + NB_PREAMBLE_SIZE + rec->header_len, rec->payload, (size_t)rec->payload_len);
    memcpy(p + total - 4, crcb, 4);
    *buf = p;
    *len = total;
    return NB_OK;
}

/* ---- reading: a preamble decoded -------------------------------------------- */

/* Largest payload we are willing to allocate: a sanity bound so that a
 * corrupted length is reported, not attempted.  Physical memory when known. */
static uint64_t payload_limit(void) { return nb_memory_limit(); }

nb_status nb_wire_parse_preamble(const char *name, const unsigned char pre[NB_PREAMBLE_SIZE], long idx,
                                 nb_record *rec, uint32_t *hlen_out, uint64_t *plen_out)
{
    /* type: printable ASCII then NUL padding */
    int ended = 0;
    for (int i = 0; i < NB_TYPE_LEN; i++) {
        unsigned char c = pre[12 + i];
        if (c == 0) ended = 1;
        else if (ended || c < 0x21 || c > 0x7e)
            return nb_error_set(NB_ERR_DATA, "%s: corrupt stream: record %ld has an invalid type field", name, idx);
    }
    if (pre[12] == 0) return nb_error_set(NB_ERR_DATA, "%s: corrupt stream: record %ld has an empty type", name, idx);
    memcpy(rec->type, pre + 12, NB_TYPE_LEN);
    rec->type[NB_TYPE_LEN] = '\0';

    uint32_t hlen = nb_get_u32(pre + 20);
    uint64_t plen = nb_get_u64(pre + 24);
    if (hlen > NB_MAX_HEADER)
        return nb_error_set(NB_ERR_DATA, "%s: corrupt stream: record %ld (%s) claims a %u-byte header", name, idx,
                            rec->type, hlen);
    uint64_t limit = payload_limit();
    if (plen > limit) {
        char b[64], m[64];
        nb_format_bytes((double)plen, b, sizeof b);
        nb_format_bytes((double)limit, m, sizeof m);
        return nb_error_set(NB_ERR_DATA,
                            "%s: record %ld (%s) claims a %s payload, more than this machine's %s of memory "
                            "(corrupt stream?)",
                            name, idx, rec->type, b, m);
    }
    *hlen_out = hlen;
    *plen_out = plen;
    return NB_OK;
}
