/* nb_stream_impl.h - inside the nb stream: what its files share and the
 * tools do not see (nb_stream.h is the interface).
 *
 *   nb_record.c         a record in memory: header keys, payload arrays
 *   nb_record_wire.c    a record's bytes: preamble, CRC, serialisation
 *   nb_reader.c         the reader: a record's framing read and checked
 *   nb_reader_payload.c the reader: a payload in pieces, kept or shown
 *   nb_read_ahead.c     the reader: a payload read on a second thread
 *   nb_writer.c         the writer, and the ABORT record of a failing tool
 */
#ifndef NB_STREAM_IMPL_H
#define NB_STREAM_IMPL_H

#include <stdint.h>
#include <stdio.h>

#include "nb_stream.h"

/* ---- little-endian fields (the stream's byte order, whatever the host's) -- */

static inline void nb_put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static inline void nb_put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static inline uint32_t nb_get_u32(const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static inline uint64_t nb_get_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static inline int nb_host_is_little_endian(void)
{
    const uint16_t one = 1;
    return *(const unsigned char *)&one == 1;
}

/* ---- a record's bytes (nb_record_wire.c) ----------------------------------- */

/* The 32-byte preamble of rec: magic, version, type, lengths. */
void nb_wire_preamble(const nb_record *rec, unsigned char pre[NB_PREAMBLE_SIZE]);
/* A preamble's type (into rec) and lengths, checked before anything is
 * allocated for them; `name` (the input's) and `idx` (the record's number)
 * for the messages.  The magic and version are the reader's to check first. */
nb_status nb_wire_parse_preamble(const char *name, const unsigned char pre[NB_PREAMBLE_SIZE], long idx,
                                 nb_record *rec, uint32_t *hlen_out, uint64_t *plen_out);
/* the running CRC-32 over n more bytes */
uint32_t nb_wire_crc_update(uint32_t crc, const unsigned char *p, uint64_t n);
/* The record's CRC; the payload's from its producer's pieces (pc, checked
 * with nb_wire_payload_crc_check) where it gave them, else read here. */
uint32_t nb_wire_record_crc(const nb_record *rec, const unsigned char pre[NB_PREAMBLE_SIZE],
                            const nb_payload_crc *pc);
/* a record that can go on the wire: a type, a header within bounds, a little-endian host */
nb_status nb_wire_check_writable(const nb_record *rec);
/* the producer's pieces (pc, NULL: none) lie inside the payload */
nb_status nb_wire_payload_crc_check(const nb_record *rec, const nb_payload_crc *pc);

/* ---- the reader's state (nb_reader.c, nb_reader_payload.c, nb_read_ahead.c) */

struct nb_reader {
    FILE *fp;               /* NULL for memory readers */
    const unsigned char *mem;
    size_t mem_len, mem_pos;
    char *name;
    long records_in_segment;
    long records_total;     /* including END records */
    uint64_t offset;        /* bytes consumed */
    int last_was_end;
    nb_payload_consumer consumer; /* nb_reader_set_consumer; begin NULL: none */
    nb_payload_how how;     /* for the current record's payload, from the consumer's begin */
    unsigned char *ring;    /* NB_READER_SLOTS slots of ring_slot bytes, kept for the next record */
    size_t ring_slot;
    unsigned char *spare[NB_READER_SPARES]; /* payload buffers given back (nb_reader_recycle) */
    size_t spare_cap[NB_READER_SPARES];
    int nspare;
    int from_pipe;          /* the input is a pipe (an ABORT is then told quietly) */
    char abort_tool[64];    /* after an ABORT record: who failed, and how; the */
    int abort_status;       /* stream ends there (abort_status 0: none came) */
};

/* Read up to n bytes; returns the number read (short only at end of input). */
size_t nb_reader_read_bytes(nb_reader *r, void *dst, size_t n, int *ioerr);
/* the error of an input that ended inside `what` of record idx (type NULL: its preamble) */
nb_status nb_reader_truncated(nb_reader *r, const char *what, long idx, const char *type, uint64_t got,
                              uint64_t want);

/* ---- a payload in pieces (nb_reader_payload.c, nb_read_ahead.c) ----------- */

/* Every payload is read in pieces, each checksummed while it is in cache.  One
 * that no consumer looks at goes into the record in pieces of 1 MiB.  One
 * shown to a consumer (nb_payload_consumer) is cut as its begin() asked - the
 * bytes before `first` in pieces of at most the piece size (a sixteenth of
 * the payload, 64 KiB to 1 MiB), then whole multiples of `unit`, so that a
 * consumer's rows never straddle two pieces - and read into the record, or
 * (NB_PAYLOAD_SHOW_ONLY) through a ring of NB_READER_SLOTS pieces, reused.
 * Piece i is in slot i % NB_READER_SLOTS; from a file or pipe, with a second
 * thread to spare, a large payload is read (and prepared) on that thread,
 * at most NB_READER_SLOTS pieces ahead of the consumer. */

/* How this record's payload (plen bytes) is read: the consumer's begin. */
nb_status nb_reader_begin_payload(nb_reader *r, nb_record *rec, uint64_t plen);
/* The payload kept in the record (avail: what the input can still give,
 * UINT64_MAX when unknown), or shown to the consumer only (NB_PAYLOAD_SHOW_ONLY);
 * *crc runs on over it. */
nb_status nb_reader_read_kept(nb_reader *r, nb_record *rec, long idx, uint64_t plen, uint64_t avail,
                              uint32_t *crc);
nb_status nb_reader_read_show_only(nb_reader *r, nb_record *rec, long idx, uint64_t plen, uint32_t *crc);
/* the error of a payload that cannot be allocated */
nb_status nb_reader_payload_nomem(long idx, const nb_record *rec, uint64_t plen);
/* nb_read_ahead.c: a shown payload read on a second thread (see there) */
nb_status nb_reader_read_ahead(nb_reader *r, unsigned char *buf, uint64_t plen, uint32_t *crc, uint64_t *have_out,
                               int *ioerr_out, int *started);

/* whether the current payload goes to the consumer */
static inline int nb_reader_shown(const nb_reader *r) { return r->how.use != NB_PAYLOAD_KEEP; }

/* The length of the piece at payload offset off (plen bytes in all) */
static inline size_t nb_reader_piece_len(const nb_reader *r, uint64_t off, uint64_t plen)
{
    uint64_t left = plen - off, len = (uint64_t)1 << 20;
    if (nb_reader_shown(r)) {
        const size_t target = r->how.piece_size, unit = r->how.unit ? r->how.unit : 1;
        if (off < r->how.first) len = r->how.first - off < target ? r->how.first - off : target;
        else len = unit >= target ? unit : target / unit * unit;
    }
    return (size_t)(len < left ? len : left);
}

/* Where piece i (at payload offset off) is read to: the record's buffer
 * (large enough), or a slot of the ring */
static inline unsigned char *nb_reader_piece_dst(const nb_reader *r, unsigned char *buf, uint64_t i, uint64_t off)
{
    return buf ? buf + off : r->ring + (size_t)(i % NB_READER_SLOTS) * r->ring_slot;
}

/* The consumer's prepare (when its begin set one), then, on the caller's
 * thread, its piece */
static inline void nb_reader_prepare_piece(const nb_reader *r, const unsigned char *p, uint64_t off, size_t len,
                                           uint64_t i)
{
    if (!r->how.prepare) return;
    nb_payload_piece pc = {p, off, len, (int)(i % NB_READER_SLOTS)};
    r->how.prepare(r->consumer.ctx, &pc);
}

static inline nb_status nb_reader_show_piece(const nb_reader *r, const unsigned char *p, uint64_t off, size_t len,
                                             uint64_t i)
{
    nb_payload_piece pc = {p, off, len, (int)(i % NB_READER_SLOTS)};
    return r->consumer.piece(r->consumer.ctx, &pc);
}

#endif
