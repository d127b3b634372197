/* nb_stream.c - the nb stream: records, header keys, payload arrays, the
 * reader (pieces checksummed as they arrive, an optional payload consumer,
 * read-ahead) and the writer (vmsplice into pipes; a payload's CRC from its
 * producer's pieces), the CRC of each record, and the ABORT
 * record a failing tool leaves on the pipe to the next stage. */
#include "nb_stream.h"

#include "nb_crc32.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
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
#include <pthread.h>
#include <signal.h>

#include "nb_tuning.h"
#include "nb_util.h"

/* ---- little-endian helpers --------------------------------------------- */

static void put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static void put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get_u32(const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static uint64_t get_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static int host_is_little_endian(void)
{
    const uint16_t one = 1;
    return *(const unsigned char *)&one == 1;
}

/* ---- records ----------------------------------------------------------- */

void nb_record_init(nb_record *rec, const char *type)
{
    memset(rec, 0, sizeof *rec);
    snprintf(rec->type, sizeof rec->type, "%s", type ? type : "");
    /* a leading newline puts the first KEY=VALUE on a line of its own, after
     * the binary preamble, so that grep '^KEY=' finds every key */
    rec->header = nb_xstrdup("\n");
    rec->header_len = 1;
}

void nb_record_free(nb_record *rec)
{
    free(rec->header);
    free(rec->payload);
    memset(rec, 0, sizeof *rec);
}

int nb_record_is(const nb_record *rec, const char *type) { return strcmp(rec->type, type) == 0; }

/* Locate "KEY=" at the start of a line; returns the line start or NULL. */
static const char *find_line(const char *hdr, const char *key)
{
    size_t klen = strlen(key);
    const char *p = hdr;
    while (p && *p) {
        if (strncmp(p, key, klen) == 0 && p[klen] == '=') return p;
        p = strchr(p, '\n');
        if (p) p++;
    }
    return NULL;
}

const char *nb_hdr_find(const nb_record *rec, const char *key, size_t *len)
{
    const char *line = rec->header ? find_line(rec->header, key) : NULL;
    if (!line) return NULL;
    const char *v = line + strlen(key) + 1;
    const char *e = strchr(v, '\n');
    if (len) *len = e ? (size_t)(e - v) : strlen(v);
    return v;
}

int nb_hdr_has(const nb_record *rec, const char *key) { return nb_hdr_find(rec, key, NULL) != NULL; }

void nb_hdr_set(nb_record *rec, const char *key, const char *value)
{
    nb_strbuf sb;
    const char *line = find_line(rec->header, key);
    nb_strbuf_init(&sb);
    if (line) {
        const char *end = strchr(line, '\n');
        nb_strbuf_appendn(&sb, rec->header, (size_t)(line - rec->header));
        nb_strbuf_printf(&sb, "%s=%s\n", key, value);
        if (end) nb_strbuf_append(&sb, end + 1);
    } else {
        nb_strbuf_append(&sb, rec->header);
        nb_strbuf_printf(&sb, "%s=%s\n", key, value);
    }
    free(rec->header);
    rec->header_len = sb.len;
    rec->header = nb_strbuf_take(&sb);
}

void nb_hdr_setf(nb_record *rec, const char *key, const char *fmt, ...)
{
    char buf[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    nb_hdr_set(rec, key, buf);
}

void nb_hdr_set_double(nb_record *rec, const char *key, double v)
{
    char b[64];
    nb_format_double(v, b, sizeof b);
    nb_hdr_set(rec, key, b);
}

void nb_hdr_set_long(nb_record *rec, const char *key, long v) { nb_hdr_setf(rec, key, "%ld", v); }

void nb_hdr_set_vec3(nb_record *rec, const char *key, const double v[3])
{
    char a[64], b[64], c[64];
    nb_format_double(v[0], a, sizeof a);
    nb_format_double(v[1], b, sizeof b);
    nb_format_double(v[2], c, sizeof c);
    nb_hdr_setf(rec, key, "%s %s %s", a, b, c);
}

nb_status nb_hdr_get_str(const nb_record *rec, const char *key, char **out)
{
    size_t len;
    const char *v = nb_hdr_find(rec, key, &len);
    *out = NULL;
    if (!v) return nb_error_set(NB_ERR_DATA, "%s record: missing key %s", rec->type, key);
    char *s = malloc(len + 1);
    if (!s) return nb_error_set(NB_ERR_NOMEM, "out of memory");
    memcpy(s, v, len);
    s[len] = '\0';
    *out = s;
    return NB_OK;
}

/* Parse up to n whitespace-separated doubles from a header value. */
static nb_status get_doubles(const nb_record *rec, const char *key, double *out, int n)
{
    size_t len;
    const char *v = nb_hdr_find(rec, key, &len);
    if (!v) return nb_error_set(NB_ERR_DATA, "%s record: missing key %s", rec->type, key);
    char buf[512];
    if (len >= sizeof buf) return nb_error_set(NB_ERR_DATA, "%s record: value of %s is too long", rec->type, key);
    memcpy(buf, v, len);
    buf[len] = '\0';
    char *p = buf;
    for (int i = 0; i < n; i++) {
        char *end;
        errno = 0;
        out[i] = strtod(p, &end);
        if (end == p) return nb_error_set(NB_ERR_DATA, "%s record: bad value '%s' for %s", rec->type, buf, key);
        p = end;
    }
    while (*p == ' ' || *p == '\t') p++;
    if (*p) return nb_error_set(NB_ERR_DATA, "%s record: bad value '%s' for %s", rec->type, buf, key);
    return NB_OK;
}

nb_status nb_hdr_get_double(const nb_record *rec, const char *key, double *out)
{
    return get_doubles(rec, key, out, 1);
}

nb_status nb_hdr_get_vec3(const nb_record *rec, const char *key, double out[3])
{
    return get_doubles(rec, key, out, 3);
}

nb_status nb_hdr_get_long(const nb_record *rec, const char *key, long *out)
{
    size_t len;
    const char *v = nb_hdr_find(rec, key, &len);
    if (!v) return nb_error_set(NB_ERR_DATA, "%s record: missing key %s", rec->type, key);
    char buf[64];
    if (len >= sizeof buf || len == 0)
        return nb_error_set(NB_ERR_DATA, "%s record: bad value for %s", rec->type, key);
    memcpy(buf, v, len);
    buf[len] = '\0';
    char *end;
    errno = 0;
    long x = strtol(buf, &end, 10);
    if (*end || errno) return nb_error_set(NB_ERR_DATA, "%s record: bad value '%s' for %s", rec->type, buf, key);
    *out = x;
    return NB_OK;
}

nb_status nb_hdr_get_int(const nb_record *rec, const char *key, int *out)
{
    long v;
    nb_status st = nb_hdr_get_long(rec, key, &v);
    if (st) return st;
    if (v < -2147483647L - 1 || v > 2147483647L)
        return nb_error_set(NB_ERR_DATA, "%s record: value of %s out of range", rec->type, key);
    *out = (int)v;
    return NB_OK;
}

/* ---- arrays ------------------------------------------------------------ */

static const char *dtype_names[] = {"f32", "f64", "u8", "u16", "u32", "i32"};
static const size_t dtype_sizes[] = {4, 8, 1, 2, 4, 4};

size_t nb_dtype_size(nb_dtype t) { return dtype_sizes[t]; }
const char *nb_dtype_name(nb_dtype t) { return dtype_names[t]; }

/* Payload room for `need` bytes in all; `exact`: just that (a reservation),
 * else doubled (arrays added one by one); array: the one it is for, named
 * in the error (NULL: a reservation). */
static nb_status payload_room(nb_record *rec, size_t need, int exact, const char *array)
{
    if (need <= rec->payload_cap) return NB_OK;
    size_t cap = rec->payload_cap ? rec->payload_cap : 64;
    if (exact) cap = need;
    while (cap < need) cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    /* a fresh big payload (an image) gets huge pages */
    unsigned char *p = rec->payload ? realloc(rec->payload, cap) : nb_malloc_large(cap);
    if (!p) {
        char b[64];
        nb_format_bytes((double)cap, b, sizeof b);
        if (!array) return nb_error_set(NB_ERR_NOMEM, "cannot allocate %s for a record's payload", b);
        return nb_error_set(NB_ERR_NOMEM, "cannot allocate %s for array %s", b, array);
    }
    rec->payload = p;
    rec->payload_cap = cap;
    return NB_OK;
}

nb_status nb_record_reserve(nb_record *rec, size_t bytes)
{
    if (bytes > SIZE_MAX - 64 - rec->payload_len) return nb_error_set(NB_ERR_NOMEM, "a record's payload is too large");
    return payload_room(rec, (size_t)rec->payload_len + bytes, 1, NULL);
}

nb_status nb_record_add_array(nb_record *rec, const char *name, nb_dtype type, size_t count,
                              const void *data, void **stored)
{
    size_t es = nb_dtype_size(type);
    if (count > (SIZE_MAX - 64) / es) return nb_error_set(NB_ERR_NOMEM, "array %s is too large", name);
    size_t offset = (size_t)((rec->payload_len + 7) & ~(uint64_t)7);
    size_t bytes = count * es;
    size_t need = offset + bytes;
    nb_status st = payload_room(rec, need, 0, name);
    if (st) return st;
    memset(rec->payload + rec->payload_len, 0, offset - rec->payload_len);
    if (data == NB_ARRAY_UNINITIALISED) {
        /* the caller fills every element (first touch on its own threads); a
         * sanitizer build fills it first with a pattern, so that an element
         * left unwritten shows in the output (fresh pages would be zeros) */
#if defined(__SANITIZE_ADDRESS__) || defined(NB_POISON_UNINITIALISED)
        memset(rec->payload + offset, 0x7F, bytes); /* floats 3.4e38, ints 2139062143 */
#endif
    } else if (data) {
        memcpy(rec->payload + offset, data, bytes);
    } else {
        memset(rec->payload + offset, 0, bytes);
    }
    rec->payload_len = need;
    char key[256];
    snprintf(key, sizeof key, "ARRAY.%s", name);
    nb_hdr_setf(rec, key, "%s %zu %zu", nb_dtype_name(type), count, offset);
    if (stored) *stored = rec->payload + offset;
    return NB_OK;
}

int nb_record_has_array(const nb_record *rec, const char *name)
{
    char key[256];
    snprintf(key, sizeof key, "ARRAY.%s", name);
    return nb_hdr_has(rec, key);
}

nb_status nb_record_get_array(const nb_record *rec, const char *name, nb_dtype type,
                              const void **data, size_t *count)
{
    uint64_t off;
    nb_status st = nb_record_array_offset(rec, name, type, &off, count);
    if (st) return st;
    if (!rec->payload && rec->payload_len)
        return nb_error_set(NB_ERR_DATA, "%s record: its payload was not kept (array %s)", rec->type, name);
    *data = rec->payload + off;
    return NB_OK;
}

nb_status nb_record_array_offset(const nb_record *rec, const char *name, nb_dtype type, uint64_t *offset,
                                 size_t *count)
{
    char key[256], buf[128], tname[16];
    size_t len;
    unsigned long long n, off;
    snprintf(key, sizeof key, "ARRAY.%s", name);
    const char *v = nb_hdr_find(rec, key, &len);
    if (!v) return nb_error_set(NB_ERR_DATA, "%s record: missing array %s", rec->type, name);
    if (len >= sizeof buf) return nb_error_set(NB_ERR_DATA, "%s record: bad array entry %s", rec->type, key);
    memcpy(buf, v, len);
    buf[len] = '\0';
    char extra;
    if (sscanf(buf, "%15s %llu %llu %c", tname, &n, &off, &extra) != 3)
        return nb_error_set(NB_ERR_DATA, "%s record: bad array entry %s=%s", rec->type, key, buf);
    if (strcmp(tname, nb_dtype_name(type)) != 0)
        return nb_error_set(NB_ERR_DATA, "%s record: array %s is %s, expected %s", rec->type, name, tname,
                            nb_dtype_name(type));
    size_t es = nb_dtype_size(type);
    if (off % 8 != 0 || off > rec->payload_len || n > (rec->payload_len - off) / es)
        return nb_error_set(NB_ERR_DATA, "%s record: array %s (%llu x %s at %llu) lies outside the %llu-byte payload",
                            rec->type, name, n, tname, off, (unsigned long long)rec->payload_len);
    *offset = off;
    if (count) *count = (size_t)n;
    return NB_OK;
}

/* ---- serialisation ----------------------------------------------------- */

static void make_preamble(const nb_record *rec, unsigned char pre[NB_PREAMBLE_SIZE])
{
    memcpy(pre, NB_STREAM_MAGIC, 8);
    put_u32(pre + 8, NB_STREAM_VERSION);
    memset(pre + 12, 0, NB_TYPE_LEN);
    memcpy(pre + 12, rec->type, strnlen(rec->type, NB_TYPE_LEN));
    put_u32(pre + 20, (uint32_t)rec->header_len);
    put_u64(pre + 24, rec->payload_len);
}

static uint32_t crc_update(uint32_t crc, const unsigned char *p, uint64_t n) { return nb_crc32_update(crc, p, n); }

/* CRC of a large buffer in pieces on several threads, joined with
 * nb_crc32_combine_op: the same value as one pass. */
static uint32_t crc_parallel(uint32_t crc, const unsigned char *p, uint64_t n)
{
    enum { PIECES = 16 };
    const uint64_t min_piece = 4u << 20;
    if (n < 2 * min_piece) return crc_update(crc, p, n);
    uint64_t piece = (n + PIECES - 1) / PIECES;
    if (piece < min_piece) piece = min_piece;
    int npieces = (int)((n + piece - 1) / piece);
    uint32_t part[PIECES];
#pragma omp parallel for schedule(dynamic, 1)
    for (int i = 0; i < npieces; i++) {
        uint64_t off = (uint64_t)i * piece, len = off + piece > n ? n - off : piece;
        part[i] = crc_update((uint32_t)crc32(0L, Z_NULL, 0), p + off, len);
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
static nb_status payload_crc_check(const nb_record *rec, const nb_payload_crc *pc)
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
static uint32_t record_crc(const nb_record *rec, const unsigned char pre[NB_PREAMBLE_SIZE], const nb_payload_crc *pc)
{
    uint32_t crc = (uint32_t)crc32(0L, Z_NULL, 0);
    crc = crc_update(crc, pre, NB_PREAMBLE_SIZE);
    crc = crc_update(crc, (const unsigned char *)rec->header, rec->header_len);
    if (!pc) return crc_parallel(crc, rec->payload, rec->payload_len);
    crc = crc_parallel(crc, rec->payload, pc->offset);
    const uint32_t op = nb_crc32_combine_gen(pc->piece_len); /* pieces of one length: one operator */
    for (size_t i = 0; i < pc->pieces; i++) crc = nb_crc32_combine_op(crc, pc->crc[i], op);
    uint64_t end = pc->offset + (uint64_t)pc->piece_len * pc->pieces;
    return end < rec->payload_len ? crc_parallel(crc, rec->payload + end, rec->payload_len - end) : crc;
}

static nb_status check_writable(const nb_record *rec)
{
    if (!host_is_little_endian())
        return nb_error_set(NB_ERR_UNSUPPORTED, "the nb stream is little-endian; this host is big-endian");
    if (rec->header_len > NB_MAX_HEADER)
        return nb_error_set(NB_ERR_DATA, "%s record header is too large (%zu bytes)", rec->type, rec->header_len);
    if (!rec->type[0]) return nb_error_set(NB_ERR_DATA, "record without a type");
    return NB_OK;
}

nb_status nb_record_serialize(const nb_record *rec, unsigned char **buf, size_t *len)
{
    unsigned char pre[NB_PREAMBLE_SIZE], crcb[4];
    nb_status st = check_writable(rec);
    *buf = NULL;
    *len = 0;
    if (st) return st;
    size_t total = NB_PREAMBLE_SIZE + rec->header_len + (size_t)rec->payload_len + 4;
    unsigned char *p = malloc(total);
    if (!p) return nb_error_set(NB_ERR_NOMEM, "out of memory serialising a %s record", rec->type);
    make_preamble(rec, pre);
    put_u32(crcb, record_crc(rec, pre, NULL));
    memcpy(p, pre, NB_PREAMBLE_SIZE);
    memcpy(p + NB_PREAMBLE_SIZE, rec->header, rec->header_len);
    if (rec->payload_len) memcpy(p + NB_PREAMBLE_SIZE + rec->header_len, rec->payload, (size_t)rec->payload_len);
    memcpy(p + total - 4, crcb, 4);
    *buf = p;
    *len = total;
    return NB_OK;
}

/* ---- reader ------------------------------------------------------------ */

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

/* ---- reading a payload in pieces ------------------------------------------ */
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

static size_t read_bytes(nb_reader *r, void *dst, size_t n, int *ioerr);
static uint32_t crc_update(uint32_t crc, const unsigned char *p, uint64_t n);
static nb_status truncated(nb_reader *r, const char *what, long idx, const char *type, uint64_t got,
                           uint64_t want);

static int shown(const nb_reader *r) { return r->how.use != NB_PAYLOAD_KEEP; }

/* The length of the piece at payload offset off (plen bytes in all) */
static size_t piece_len(const nb_reader *r, uint64_t off, uint64_t plen)
{
    uint64_t left = plen - off, len = (uint64_t)1 << 20;
    if (shown(r)) {
        const size_t target = r->how.piece_size, unit = r->how.unit ? r->how.unit : 1;
        if (off < r->how.first) len = r->how.first - off < target ? r->how.first - off : target;
        else len = unit >= target ? unit : target / unit * unit;
    }
    return (size_t)(len < left ? len : left);
}

/* Where piece i (at payload offset off) is read to: the record's buffer
 * (large enough), or a slot of the ring */
static unsigned char *piece_dst(const nb_reader *r, unsigned char *buf, uint64_t i, uint64_t off)
{
    return buf ? buf + off : r->ring + (size_t)(i % NB_READER_SLOTS) * r->ring_slot;
}

/* The consumer's prepare (when its begin set one), then, on the caller's
 * thread, its piece */
static void prepare_piece(const nb_reader *r, const unsigned char *p, uint64_t off, size_t len, uint64_t i)
{
    if (!r->how.prepare) return;
    nb_payload_piece pc = {p, off, len, (int)(i % NB_READER_SLOTS)};
    r->how.prepare(r->consumer.ctx, &pc);
}

static nb_status show_piece(const nb_reader *r, const unsigned char *p, uint64_t off, size_t len, uint64_t i)
{
    nb_payload_piece pc = {p, off, len, (int)(i % NB_READER_SLOTS)};
    return r->consumer.piece(r->consumer.ctx, &pc);
}

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
        size_t want = piece_len(r, off, ra->len);
        unsigned char *dst = piece_dst(r, ra->buf, i, off);
        int ioerr = 0;
        size_t got = read_bytes(r, dst, want, &ioerr);
        crc = crc_update(crc, dst, got);
        int end = got < want || ioerr;
        if (!end) prepare_piece(r, dst, off, got, i);
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
static nb_status read_payload_ahead(nb_reader *r, unsigned char *buf, uint64_t plen, uint32_t *crc,
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
        if (!st && got == piece_len(r, off, plen)) st = show_piece(r, piece_dst(r, buf, next, off), off, got, next);
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

static nb_status payload_nomem(long idx, const nb_record *rec, uint64_t plen)
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
        const size_t want = piece_len(r, off, plen);
        while (kept && off + want > rec->payload_cap) {
            size_t cap = rec->payload_cap * 2 < plen ? rec->payload_cap * 2 : (size_t)plen;
            unsigned char *q = realloc(rec->payload, cap);
            if (!q) return payload_nomem(idx, rec, plen);
            rec->payload = q, rec->payload_cap = cap;
        }
        unsigned char *dst = piece_dst(r, kept ? rec->payload : NULL, i, off);
        size_t got = read_bytes(r, dst, want, ioerr);
        *crc = crc_update(*crc, dst, got);
        *have += got;
        if (got < want || *ioerr) break; /* the input ended */
        if (shown(r)) {
            prepare_piece(r, dst, off, got, i);
            st = show_piece(r, dst, off, got, i);
        }
    }
    return st;
}

/* A payload shown to the consumer only (NB_PAYLOAD_SHOW_ONLY), through the ring */
static nb_status read_payload_show_only(nb_reader *r, nb_record *rec, long idx, uint64_t plen, uint32_t *crc)
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
        st = read_payload_ahead(r, NULL, plen, crc, &have, &ioerr, &ahead);
    if (!st && !ahead) st = read_pieces(r, rec, idx, plen, 0, crc, &have, &ioerr);
    if (st) return st;
    if (ioerr) return nb_error_set(NB_ERR_IO, "cannot read %s: %s", r->name, strerror(ioerr));
    if (have < plen) return truncated(r, "payload", idx, rec->type, have, plen);
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
static nb_status read_payload_kept(nb_reader *r, nb_record *rec, long idx, uint64_t plen, uint64_t avail,
                                   uint32_t *crc)
{
    const uint64_t grow_from = (uint64_t)256 << 20;
    size_t first = avail == UINT64_MAX && plen > grow_from ? (size_t)grow_from : (size_t)plen;
    rec->payload = take_spare(r, first, &rec->payload_cap);
    if (!rec->payload) rec->payload = nb_malloc_large(first), rec->payload_cap = first;
    if (!rec->payload) return payload_nomem(idx, rec, plen);
    uint64_t have = 0;
    int ioerr = 0, ahead = 0;
    nb_status st = NB_OK;
    /* a large payload for a consumer, with a second thread to spare and no
     * reallocation ahead: read it on that thread */
    if (shown(r) && r->fp && plen >= (uint64_t)4 << 20 && rec->payload_cap >= plen && nb_threads_spare())
        st = read_payload_ahead(r, rec->payload, plen, crc, &have, &ioerr, &ahead);
    if (!st && !ahead) st = read_pieces(r, rec, idx, plen, 1, crc, &have, &ioerr);
    if (st) return st;
    if (ioerr) return nb_error_set(NB_ERR_IO, "cannot read %s: %s", r->name, strerror(ioerr));
    if (have < plen) return truncated(r, "payload", idx, rec->type, have, plen);
    return NB_OK;
}

/* How this record's payload (plen bytes) is read: kept and not shown, unless
 * the consumer's begin asks otherwise */
static nb_status begin_payload(nb_reader *r, nb_record *rec, uint64_t plen)
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
    if (shown(r) && !r->consumer.piece)
        return nb_error_set(NB_ERR_USAGE, "internal error: a payload consumer without a piece function");
    if (!shown(r)) r->how.prepare = NULL;
    return NB_OK;
}

void nb_reader_set_consumer(nb_reader *r, const nb_payload_consumer *c)
{
    if (c) r->consumer = *c;
    else memset(&r->consumer, 0, sizeof r->consumer);
}

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

/* Read up to n bytes; returns the number read (short only at end of input). */
static size_t read_bytes(nb_reader *r, void *dst, size_t n, int *ioerr)
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

/* Largest payload we are willing to allocate: a sanity bound so that a
 * corrupted length is reported, not attempted.  Physical memory when known. */
static uint64_t payload_limit(void) { return nb_memory_limit(); }

static nb_status truncated(nb_reader *r, const char *what, long idx, const char *type, uint64_t got,
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
    size_t got = read_bytes(r, pre, NB_PREAMBLE_SIZE, &ioerr);
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
    if (got < NB_PREAMBLE_SIZE) return truncated(r, "preamble", idx, NULL, got, NB_PREAMBLE_SIZE);
    uint32_t version = get_u32(pre + 8);
    if (version != NB_STREAM_VERSION)
        return nb_error_set(NB_ERR_DATA, "%s: record %ld has stream version %u; this program reads version %u",
                            r->name, idx, version, NB_STREAM_VERSION);
    if (!host_is_little_endian())
        return nb_error_set(NB_ERR_UNSUPPORTED, "the nb stream is little-endian; this host is big-endian");
    return NB_OK;
}

/* The preamble's type (into rec) and lengths, checked before anything is
 * allocated for them */
static nb_status parse_preamble(const nb_reader *r, const unsigned char pre[NB_PREAMBLE_SIZE], long idx,
                                nb_record *rec, uint32_t *hlen_out, uint64_t *plen_out)
{
    /* type: printable ASCII then NUL padding */
    int ended = 0;
    for (int i = 0; i < NB_TYPE_LEN; i++) {
        unsigned char c = pre[12 + i];
        if (c == 0) ended = 1;
        else if (ended || c < 0x21 || c > 0x7e)
            return nb_error_set(NB_ERR_DATA, "%s: corrupt stream: record %ld has an invalid type field", r->name, idx);
    }
    if (pre[12] == 0) return nb_error_set(NB_ERR_DATA, "%s: corrupt stream: record %ld has an empty type", r->name, idx);
    memcpy(rec->type, pre + 12, NB_TYPE_LEN);
    rec->type[NB_TYPE_LEN] = '\0';

    uint32_t hlen = get_u32(pre + 20);
    uint64_t plen = get_u64(pre + 24);
    if (hlen > NB_MAX_HEADER)
        return nb_error_set(NB_ERR_DATA, "%s: corrupt stream: record %ld (%s) claims a %u-byte header", r->name, idx,
                            rec->type, hlen);
    uint64_t limit = payload_limit();
    if (plen > limit) {
        char b[64], m[64];
        nb_format_bytes((double)plen, b, sizeof b);
        nb_format_bytes((double)limit, m, sizeof m);
        return nb_error_set(NB_ERR_DATA,
                            "%s: record %ld (%s) claims a %s payload, more than this machine's %s of memory "
                            "(corrupt stream?)",
                            r->name, idx, rec->type, b, m);
    }
    *hlen_out = hlen;
    *plen_out = plen;
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
    size_t got = read_bytes(r, rec->header, hlen, &ioerr);
    if (ioerr) return nb_error_set(NB_ERR_IO, "cannot read %s: %s", r->name, strerror(ioerr));
    if (got < hlen) return truncated(r, "header", idx, rec->type, got, hlen);
    rec->header[hlen] = '\0';
    rec->header_len = hlen;
    uint32_t crc = (uint32_t)crc32(0L, Z_NULL, 0);
    crc = crc_update(crc, pre, NB_PREAMBLE_SIZE);
    crc = crc_update(crc, (const unsigned char *)rec->header, rec->header_len);
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
    size_t got = read_bytes(r, crcb, 4, &ioerr);
    if (ioerr) return nb_error_set(NB_ERR_IO, "cannot read %s: %s", r->name, strerror(ioerr));
    if (got < 4) return truncated(r, "checksum", idx, rec->type, got, 4);
    uint32_t want = get_u32(crcb);
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
    if ((st = parse_preamble(r, pre, idx, rec, &hlen, &plen))) return st;
    if ((st = read_header(r, pre, idx, hlen, rec, &crc))) return st;
    if (plen) {
        uint64_t avail = input_left(r);
        if (plen > avail) return truncated(r, "payload", idx, rec->type, avail, plen);
        if ((st = begin_payload(r, rec, plen))) return st;
        st = r->how.use == NB_PAYLOAD_SHOW_ONLY ? read_payload_show_only(r, rec, idx, plen, &crc)
                                                : read_payload_kept(r, rec, idx, plen, avail, &crc);
        if (st) return st;
    }
    rec->payload_len = plen;
    if ((st = check_crc(r, rec, idx, crc))) return st;
    return count_record(r, rec);
}

/* ---- writer ------------------------------------------------------------ */

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
    make_preamble(&rec, pre);
    uint32_t crc = crc_update((uint32_t)crc32(0L, Z_NULL, 0), pre, NB_PREAMBLE_SIZE);
    put_u32(crcb, crc_update(crc, (const unsigned char *)header, (uint64_t)hlen));
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
    nb_status st = check_writable(rec);
    if (!st) st = payload_crc_check(rec, payload_crc);
    if (st) return st;
    if (nb_record_is(rec, "END")) return nb_writer_end(w);
    make_preamble(rec, pre);
    put_u32(crcb, record_crc(rec, pre, payload_crc));
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
    make_preamble(&end, pre);
    put_u32(crcb, record_crc(&end, pre, NULL));
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
