/* nb_reader_payload.c - how the nb stream reader takes a record's payload:
 * in pieces, each checksummed while it is in cache, kept in the record (a
 * buffer given back by nb_reader_recycle when one fits) or shown to the
 * payload consumer piece by piece, through a ring of NB_READER_SLOTS
 * buffers when it keeps nothing; on a second thread when that pays
 * (nb_read_ahead.c).  The record's framing around it: nb_reader.c. */
#include "nb_stream_impl.h"

#include <stdlib.h>
#include <string.h>

#include "nb_tuning.h"
#include "nb_util.h"

nb_status nb_reader_payload_nomem(long idx, const nb_record *rec, uint64_t plen)
{
    char b[64];
    nb_format_bytes((double)plen, b, sizeof b);
    return nb_error_set(NB_ERR_NOMEM, "cannot allocate %s for record %ld (%s)", b, idx, rec->type);
}

/* Read the payload (plen bytes) on this thread, piece by piece: into rec's
 * buffer (grown as the bytes come when it is smaller than plen) or, with
 * kept 0, through the ring; shown pieces are prepared and shown.  *have: the
 * bytes that came. */
static nb_status read_pieces(nb_reader *r, nb_record *rec, long idx, uint64_t plen, int kept, uint32_t *crc,
                             uint64_t *have, int *ioerr)
{
    nb_status st = NB_OK;
    for (uint64_t i = 0; *have < plen && !st; i++) {
        const uint64_t off = *have;
        const size_t want = nb_reader_piece_len(r, off, plen);
        while (kept && off + want > rec->payload_cap) {
            size_t cap = rec->payload_cap * 2 < plen ? rec->payload_cap * 2 : (size_t)plen;
            unsigned char *q = realloc(rec->payload, cap);
            if (!q) return nb_reader_payload_nomem(idx, rec, plen);
            rec->payload = q, rec->payload_cap = cap;
        }
        unsigned char *dst = nb_reader_piece_dst(r, kept ? rec->payload : NULL, i, off);
        size_t got = nb_reader_read_bytes(r, dst, want, ioerr);
        *crc = nb_wire_crc_update(*crc, dst, got);
        *have += got;
        if (got < want || *ioerr) break; /* the input ended */
        if (nb_reader_shown(r)) {
            nb_reader_prepare_piece(r, dst, off, got, i);
            st = nb_reader_show_piece(r, dst, off, got, i);
        }
    }
    return st;
}

/* A payload shown to the consumer only (NB_PAYLOAD_SHOW_ONLY), through the ring */
nb_status nb_reader_read_show_only(nb_reader *r, nb_record *rec, long idx, uint64_t plen, uint32_t *crc)
{
    size_t slot = r->how.unit > r->how.piece_size ? r->how.unit : r->how.piece_size;
    if (r->ring_slot < slot) {
        free(r->ring);
        r->ring = nb_malloc_large(slot * NB_READER_SLOTS);
        r->ring_slot = r->ring ? slot : 0;
        if (!r->ring) return nb_error_set(NB_ERR_NOMEM, "out of memory for the reading buffer of %s", r->name);
    }
    uint64_t have = 0;
    int ioerr = 0, ahead = 0;
    nb_status st = NB_OK;
    if (r->fp && plen >= (uint64_t)4 << 20 && nb_threads_spare())
        st = nb_reader_read_ahead(r, NULL, plen, crc, &have, &ioerr, &ahead);
    if (!st && !ahead) st = read_pieces(r, rec, idx, plen, 0, crc, &have, &ioerr);
    if (st) return st;
    if (ioerr) return nb_error_set(NB_ERR_IO, "cannot read %s: %s", r->name, strerror(ioerr));
    if (have < plen) return nb_reader_truncated(r, "payload", idx, rec->type, have, plen);
    return NB_OK;
}

/* A buffer given back for a payload of n bytes: the first that holds them
 * and is at most twice as large (its capacity in *cap), else NULL */
static unsigned char *take_spare(nb_reader *r, size_t n, size_t *cap)
{
    for (int i = 0; i < r->nspare; i++)
        if (r->spare_cap[i] >= n && r->spare_cap[i] / 2 <= n) {
            unsigned char *p = r->spare[i];
            *cap = r->spare_cap[i];
            r->nspare--;
            r->spare[i] = r->spare[r->nspare], r->spare_cap[i] = r->spare_cap[r->nspare];
            return p;
        }
    return NULL;
}

void nb_reader_recycle(nb_reader *r, nb_record *rec)
{
    if (r && rec->payload && rec->payload_cap >= ((size_t)1 << 20)) {
        if (r->nspare == NB_READER_SPARES) { /* the oldest goes */
            free(r->spare[0]);
            memmove(r->spare, r->spare + 1, (NB_READER_SPARES - 1) * sizeof *r->spare);
            memmove(r->spare_cap, r->spare_cap + 1, (NB_READER_SPARES - 1) * sizeof *r->spare_cap);
            r->nspare--;
        }
        r->spare[r->nspare] = rec->payload, r->spare_cap[r->nspare] = rec->payload_cap;
        r->nspare++;
        rec->payload = NULL;
    }
    nb_record_free(rec);
}

/* A payload kept in the record (plen bytes of which the input can give
 * avail): allocated once when its size is known, else grown as it comes */
nb_status nb_reader_read_kept(nb_reader *r, nb_record *rec, long idx, uint64_t plen, uint64_t avail,
                              uint32_t *crc)
{
    const uint64_t grow_from = (uint64_t)256 << 20;
    size_t first = avail == UINT64_MAX && plen > grow_from ? (size_t)grow_from : (size_t)plen;
    rec->payload = take_spare(r, first, &rec->payload_cap);
    if (!rec->payload) rec->payload = nb_malloc_large(first), rec->payload_cap = first;
    if (!rec->payload) return nb_reader_payload_nomem(idx, rec, plen);
    uint64_t have = 0;
    int ioerr = 0, ahead = 0;
    nb_status st = NB_OK;
    /* a large payload for a consumer, with a second thread to spare and no
     * reallocation ahead: read it on that thread */
    if (nb_reader_shown(r) && r->fp && plen >= (uint64_t)4 << 20 && rec->payload_cap >= plen && nb_threads_spare())
        st = nb_reader_read_ahead(r, rec->payload, plen, crc, &have, &ioerr, &ahead);
    if (!st && !ahead) st = read_pieces(r, rec, idx, plen, 1, crc, &have, &ioerr);
    if (st) return st;
    if (ioerr) return nb_error_set(NB_ERR_IO, "cannot read %s: %s", r->name, strerror(ioerr));
    if (have < plen) return nb_reader_truncated(r, "payload", idx, rec->type, have, plen);
    return NB_OK;
}

/* How this record's payload (plen bytes) is read: kept and not shown, unless
 * the consumer's begin asks otherwise */
nb_status nb_reader_begin_payload(nb_reader *r, nb_record *rec, uint64_t plen)
{
    const uint64_t least = (uint64_t)64 << 10, most = (uint64_t)1 << 20;
    uint64_t target = plen / 16;
    memset(&r->how, 0, sizeof r->how);
    r->how.use = NB_PAYLOAD_KEEP;
    r->how.piece_size = (size_t)(target < least ? least : target > most ? most : target);
    if (!r->consumer.begin) return NB_OK;
    rec->payload_len = plen;
    nb_status st = r->consumer.begin(r->consumer.ctx, rec, &r->how);
    if (st) return st;
    if (r->how.use != NB_PAYLOAD_KEEP && r->how.use != NB_PAYLOAD_KEEP_AND_SHOW && r->how.use != NB_PAYLOAD_SHOW_ONLY)
        return nb_error_set(NB_ERR_USAGE, "internal error: a payload consumer asked for use %d", (int)r->how.use);
    if (nb_reader_shown(r) && !r->consumer.piece)
        return nb_error_set(NB_ERR_USAGE, "internal error: a payload consumer without a piece function");
    if (!nb_reader_shown(r)) r->how.prepare = NULL;
    return NB_OK;
}

void nb_reader_set_consumer(nb_reader *r, const nb_payload_consumer *c)
{
    if (c) r->consumer = *c;
    else memset(&r->consumer, 0, sizeof r->consumer);
}
