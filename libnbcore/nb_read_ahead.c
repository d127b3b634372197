/* nb_read_ahead.c - the nb stream reader's second thread: a large payload
 * shown to a consumer is read (with its CRC and the consumer's prepare) on
 * a thread of its own while the consumer's piece works on the caller's
 * thread on what has arrived, at most NB_READER_SLOTS pieces ahead.  Apart
 * from the rest of the reader because it is the only part with threads,
 * locks and the hand-over between them. */
#include "nb_stream_impl.h"

#include <pthread.h>
#include <string.h>

/* A payload read on a second thread (read, CRC and the consumer's prepare)
 * while the consumer's piece works on the caller's thread on what has
 * arrived: the two halves of a consumer's work overlap.  Progress is
 * published under the mutex; the reading stays at most NB_READER_SLOTS pieces
 * ahead of the consumer (the ring's slots, and the prepare's storage per
 * slot, are then reused only once the consumer is done with them). */
typedef struct read_ahead {
    nb_reader *r;
    unsigned char *buf;        /* the record's buffer, or NULL: the ring */
    uint64_t len;
    uint64_t filled, released; /* pieces read; pieces the consumer is done with */
    uint64_t off[NB_READER_SLOTS]; /* where the slots' pieces start, and their lengths */
    size_t got[NB_READER_SLOTS];
    uint64_t have;             /* bytes read */
    uint32_t crc;
    int ioerr, done, stop;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} read_ahead;

static void *read_ahead_main(void *arg)
{
    read_ahead *ra = arg;
    nb_reader *r = ra->r;
    uint64_t off = 0, i = 0;
    uint32_t crc = ra->crc;
    while (off < ra->len) {
        pthread_mutex_lock(&ra->mu);
        while (ra->filled - ra->released >= NB_READER_SLOTS && !ra->stop) pthread_cond_wait(&ra->cv, &ra->mu);
        int stop = ra->stop;
        pthread_mutex_unlock(&ra->mu);
        if (stop) break;
        size_t want = nb_reader_piece_len(r, off, ra->len);
        unsigned char *dst = nb_reader_piece_dst(r, ra->buf, i, off);
        int ioerr = 0;
        size_t got = nb_reader_read_bytes(r, dst, want, &ioerr);
        crc = nb_wire_crc_update(crc, dst, got);
        int end = got < want || ioerr;
        if (!end) nb_reader_prepare_piece(r, dst, off, got, i);
        pthread_mutex_lock(&ra->mu);
        ra->off[i % NB_READER_SLOTS] = off, ra->got[i % NB_READER_SLOTS] = got;
        ra->filled = ++i, ra->have = off + got, ra->crc = crc, ra->ioerr = ioerr;
        pthread_cond_broadcast(&ra->cv);
        pthread_mutex_unlock(&ra->mu);
        if (end) break;
        off += got;
    }
    pthread_mutex_lock(&ra->mu);
    ra->done = 1;
    pthread_cond_broadcast(&ra->cv);
    pthread_mutex_unlock(&ra->mu);
    return NULL;
}

/* Read a shown payload (plen bytes) on a second thread, into buf (the
 * record's buffer, big enough) or, with buf NULL, through the ring; each
 * whole piece is shown here.  *started = 0 when no thread could be had (the
 * caller reads on this one).  Returns what was read in *have_out and the
 * running CRC in *crc. */
nb_status nb_reader_read_ahead(nb_reader *r, unsigned char *buf, uint64_t plen, uint32_t *crc,
                               uint64_t *have_out, int *ioerr_out, int *started)
{
    read_ahead ra;
    memset(&ra, 0, sizeof ra);
    ra.r = r, ra.buf = buf, ra.len = plen, ra.crc = *crc;
    *started = 0;
    if (pthread_mutex_init(&ra.mu, NULL)) return NB_OK;
    if (pthread_cond_init(&ra.cv, NULL)) {
        pthread_mutex_destroy(&ra.mu);
        return NB_OK;
    }
    pthread_t th;
    if (pthread_create(&th, NULL, read_ahead_main, &ra)) {
        pthread_cond_destroy(&ra.cv);
        pthread_mutex_destroy(&ra.mu);
        return NB_OK;
    }
    *started = 1;
    nb_status st = NB_OK;
    for (uint64_t next = 0;; next++) { /* the piece to show next */
        pthread_mutex_lock(&ra.mu);
        while (ra.filled == next && !ra.done) pthread_cond_wait(&ra.cv, &ra.mu);
        const uint64_t filled = ra.filled, off = ra.off[next % NB_READER_SLOTS];
        const size_t got = ra.got[next % NB_READER_SLOTS];
        pthread_mutex_unlock(&ra.mu);
        if (filled == next) break; /* the reading ended */
        /* a short piece is the end of a truncated input: not shown */
        if (!st && got == nb_reader_piece_len(r, off, plen))
            st = nb_reader_show_piece(r, nb_reader_piece_dst(r, buf, next, off), off, got, next);
        pthread_mutex_lock(&ra.mu);
        ra.released = next + 1;
        if (st) ra.stop = 1;
        pthread_cond_broadcast(&ra.cv);
        pthread_mutex_unlock(&ra.mu);
    }
    pthread_join(th, NULL);
    *crc = ra.crc, *have_out = ra.have, *ioerr_out = ra.ioerr;
    pthread_cond_destroy(&ra.cv);
    pthread_mutex_destroy(&ra.mu);
    return st;
}
