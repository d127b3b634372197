/* nb_stream.h - the nb stream: the one format every pipeline arrow carries.
 *
 * A stream is a sequence of records.  Each record is
 *
 *   offset  size  field
 *   0       8     magic  "\x89NBS\r\n\x1a\n"  (catches 7-bit, CRLF and ^Z mangling)
 *   8       4     version, u32 little-endian (NB_STREAM_VERSION)
 *   12      8     record type, ASCII, NUL-padded ("PLAN", "HKL", "IMAGE", "END")
 *   20      4     header length in bytes, u32 LE
 *   24      8     payload length in bytes, u64 LE
 *   32      H     header: text lines "KEY=VALUE\n"
 *   32+H    P     payload: binary arrays, little-endian, each 8-byte aligned
 *   32+H+P  4     CRC-32 (zlib) of bytes 0 .. 32+H+P-1, u32 LE
 *
 * A segment ends with an END record whose header says RECORDS=<n>, the number
 * of records before it in that segment.  Streams may be concatenated (cat):
 * every segment carries its own END.  Unknown record types are passed through
 * untouched by every tool.  An ABORT record (TOOL=, STATUS=) ends a stream
 * whose writer failed: the stages after it stop with that status, quietly.
 * Full description: docs/stream-format.md.
 */
#ifndef NB_STREAM_H
#define NB_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "nb_error.h"

#define NB_STREAM_VERSION 1u
#define NB_STREAM_MAGIC "\x89NBS\r\n\x1a\n"
#define NB_PREAMBLE_SIZE 32
#define NB_TYPE_LEN 8
/* Refuse headers above this size: a header is a few KiB of text. */
#define NB_MAX_HEADER (16u << 20)

typedef struct nb_record {
    char type[NB_TYPE_LEN + 1]; /* NUL-terminated */
    char *header;               /* NUL-terminated text, header_len bytes */
    size_t header_len;
    unsigned char *payload;
    uint64_t payload_len;
    size_t payload_cap;
} nb_record;

/* ---- building and inspecting records ----------------------------------- */
void nb_record_init(nb_record *rec, const char *type);
void nb_record_free(nb_record *rec);
int nb_record_is(const nb_record *rec, const char *type);

/* Header values.  Setting an existing key replaces its value in place. */
void nb_hdr_set(nb_record *rec, const char *key, const char *value);
void nb_hdr_setf(nb_record *rec, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void nb_hdr_set_double(nb_record *rec, const char *key, double v); /* round-trips exactly */
void nb_hdr_set_long(nb_record *rec, const char *key, long v);
void nb_hdr_set_vec3(nb_record *rec, const char *key, const double v[3]);

/* Returns a pointer to the value (up to, not including, '\n') and its length,
 * or NULL when the key is absent. */
const char *nb_hdr_find(const nb_record *rec, const char *key, size_t *len);
int nb_hdr_has(const nb_record *rec, const char *key);
/* Getters fail with NB_ERR_DATA ("IMAGE record: missing key FPIXELS") when the
 * key is absent or its value does not parse. */
nb_status nb_hdr_get_str(const nb_record *rec, const char *key, char **out); /* malloc'ed */
nb_status nb_hdr_get_double(const nb_record *rec, const char *key, double *out);
nb_status nb_hdr_get_long(const nb_record *rec, const char *key, long *out);
nb_status nb_hdr_get_int(const nb_record *rec, const char *key, int *out);
nb_status nb_hdr_get_vec3(const nb_record *rec, const char *key, double out[3]);

/* Arrays in the payload, described in the header as
 *   ARRAY.<name>=<dtype> <count> <offset>
 * dtype is one of f32 f64 u8 u16 u32 i32 (little-endian). */
typedef enum nb_dtype { NB_F32, NB_F64, NB_U8, NB_U16, NB_U32, NB_I32 } nb_dtype;
size_t nb_dtype_size(nb_dtype t);
const char *nb_dtype_name(nb_dtype t);

/* Append an array (copied) to the payload; returns a pointer to the copy so
 * the caller can fill it in place when data is NULL (then zero-filled) or
 * NB_ARRAY_UNINITIALISED (then left as it is: the caller writes every element;
 * a sanitizer build fills it with 0x7F bytes first, so that one left
 * unwritten shows).
 * The payload may move when another array is added: *stored, and every
 * pointer nb_record_get_array gave before, is valid only until then. */
#define NB_ARRAY_UNINITIALISED ((const void *)1)
nb_status nb_record_add_array(nb_record *rec, const char *name, nb_dtype type, size_t count,
                              const void *data, void **stored);
/* Room for `bytes` more of payload (arrays and their 8-byte alignment), so
 * that the arrays added next neither move the payload nor copy it: a record
 * built of several large arrays is allocated once. */
nb_status nb_record_reserve(nb_record *rec, size_t bytes);
/* Find an array; checks dtype, bounds and alignment.  *data points into the
 * payload (valid while rec lives and no array is added to it). */
nb_status nb_record_get_array(const nb_record *rec, const char *name, nb_dtype type,
                              const void **data, size_t *count);
int nb_record_has_array(const nb_record *rec, const char *name);
/* Where an array lies in the payload (its byte offset), with the same checks
 * as nb_record_get_array: for a payload that is not there (yet). */
nb_status nb_record_array_offset(const nb_record *rec, const char *name, nb_dtype type, uint64_t *offset,
                                 size_t *count);

/* ---- reading ------------------------------------------------------------ */
typedef struct nb_reader nb_reader;
/* path "-" (or NULL) reads standard input. */
nb_status nb_reader_open(nb_reader **r, const char *path);
/* Next record into rec (rec is freed and overwritten).  At the clean end of
 * the stream sets *eof = 1 and returns NB_OK.  END records are returned too
 * (after their count was checked), so tools can mirror segment ends.
 * Errors: truncation, bad magic/version, CRC mismatch, absurd sizes, missing
 * END, wrong END count - all NB_ERR_DATA with a message naming the record.
 * An ABORT record (a stage before this one failed) is not returned: it gives
 * NB_ERR_UPSTREAM (nb_error_upstream(): nb_upstream_tool(), and the status,
 * nb_exit_code()), quiet when the input is a pipe, and so does every later
 * call: the stream ends there. */
nb_status nb_reader_next(nb_reader *r, nb_record *rec, int *eof);
const char *nb_reader_name(const nb_reader *r);

/* ---- a payload's consumer (optional) -------------------------------------- */
/* nb_reader_next returns each record whole, and that is all most tools need.
 * A tool that wants to work on a large payload while the rest of it arrives
 * (nb-convert writes an image's files as it comes) sets a consumer on its
 * reader.  The contract, for each record with a payload:
 *
 *  1. begin(ctx, rec, how), before any of the payload: rec has its type,
 *     header and payload_len, not its payload.  *how comes as "keep the
 *     payload, show no piece of it" (NB_PAYLOAD_KEEP), with how->piece_size
 *     set; begin may ask for the pieces (use, first, unit) and a prepare step.
 *  2. prepare(ctx, piece), when begin set one: each piece in order, on the
 *     thread that reads the input (a second thread when one is spare, else
 *     just before 3), after its CRC is taken.  It runs beside piece() working
 *     on an earlier piece, so it may touch only what is its own for that
 *     piece: storage for piece->slot, files that only it writes.  It cannot
 *     fail or set a message (nb_error is not thread-safe): it leaves its
 *     result in the slot for piece() to report.
 *  3. piece(ctx, piece): each piece in order, on the caller's thread.  The
 *     bytes are valid during the call only.
 *
 * The record's CRC is checked only after the last piece, so whatever begin
 * and piece start must be undoable (temporary files).  A failing begin or
 * piece stops the reading with its status.  Pieces: at most
 * max(how->piece_size, how->unit) bytes; none straddles `first`; from
 * `first` on, whole multiples of `unit` (but the last); piece i is in slot
 * i % NB_READER_SLOTS, and the reading stays at most NB_READER_SLOTS pieces
 * ahead of piece(). */
enum { NB_READER_SLOTS = 4 };

typedef enum nb_payload_use {
    NB_PAYLOAD_KEEP,          /* read whole into rec->payload, no piece shown (the default) */
    NB_PAYLOAD_KEEP_AND_SHOW, /* read into rec->payload, each piece shown as it arrives */
    NB_PAYLOAD_SHOW_ONLY      /* only shown, through a few reused buffers: rec->payload stays NULL,
                                 also in the record returned (nb_record_get_array then fails); a few
                                 MiB of memory instead of the payload, never allocated or zeroed */
} nb_payload_use;

typedef struct nb_payload_piece {
    const unsigned char *data; /* len bytes from payload offset `offset` */
    uint64_t offset;
    size_t len;
    int slot;                  /* 0 .. NB_READER_SLOTS - 1 */
} nb_payload_piece;

typedef struct nb_payload_how {
    nb_payload_use use;
    uint64_t first;            /* pieces from this payload offset on hold whole units */
    size_t unit;               /* bytes (an image's row); 0: any */
    void (*prepare)(void *ctx, const nb_payload_piece *piece); /* NULL: none */
    size_t piece_size;         /* set by the reader: the size it reads in */
} nb_payload_how;

typedef struct nb_payload_consumer {
    nb_status (*begin)(void *ctx, const nb_record *rec, nb_payload_how *how);
    nb_status (*piece)(void *ctx, const nb_payload_piece *piece);
    void *ctx;
} nb_payload_consumer;

/* Set (copied) or, with NULL, remove the reader's consumer. */
void nb_reader_set_consumer(nb_reader *r, const nb_payload_consumer *c);
void nb_reader_close(nb_reader *r);
/* Free rec, keeping its payload buffer (1 MiB or more) for the payload of a
 * later record of about its size: memory the process has touched already,
 * where a fresh buffer's pages would each be zeroed by the kernel as they are
 * first written (a series' frames handed to other threads and given back
 * here).  At most NB_READER_SPARES are kept; call on the reader's thread. */
void nb_reader_recycle(nb_reader *r, nb_record *rec);
enum { NB_READER_SPARES = 8 };

/* ---- writing ------------------------------------------------------------ */
typedef struct nb_writer nb_writer;
/* path "-" (or NULL) writes standard output, refusing a terminal; a file is
 * written under a temporary name and renamed by nb_writer_close().  A writer
 * on standard output also does nb_stream_to_stdout(1). */
nb_status nb_writer_open(nb_writer **w, const char *path);
/* Whether standard output carries this tool's stream.  With 1, a failure
 * (nb_exit_on_error()) leaves an ABORT record there - TOOL and STATUS of the
 * failing stage, this tool or, for NB_ERR_UPSTREAM, the one it read of - when
 * standard output is a pipe or FIFO (never a terminal or a file) and no
 * record is half-written on it.  A tool whose stream goes to standard output
 * says 1 first thing, so that a failure before its writer opens (its command
 * line, its input) leaves one too, and 0 once its options send the stream
 * elsewhere (-o FILE). */
void nb_stream_to_stdout(int yes);
nb_status nb_writer_put(nb_writer *w, const nb_record *rec);

/* A payload's CRC-32 taken by its producer, piece by piece, while each piece
 * is still in cache (nb-sim: each row of the image as it is rendered, on the
 * thread that rendered it).  The writer then joins the pieces' CRCs
 * (nb_crc32_combine) instead of reading the whole payload again, a pass at
 * memory speed over an image long out of cache.  The pieces lie end to end:
 * `pieces` of `piece_len` bytes from payload offset `offset`; the writer
 * checksums any bytes before or after them itself. */
typedef struct nb_payload_crc {
    uint64_t offset;
    size_t piece_len;
    size_t pieces;
    uint32_t *crc; /* one per piece, set by nb_payload_crc_take */
} nb_payload_crc;
nb_status nb_payload_crc_init(nb_payload_crc *pc, uint64_t offset, size_t piece_len, size_t pieces);
/* Piece i's CRC from its piece_len bytes; distinct pieces may be taken on
 * different threads at once. */
void nb_payload_crc_take(nb_payload_crc *pc, size_t i, const void *piece);
void nb_payload_crc_free(nb_payload_crc *pc);

/* nb_writer_put for a record that is freed next: its payload's contents are
 * undefined afterwards (into a pipe, a large payload's pages are handed over
 * instead of copied, and read back as zeros).  crc: NULL (the writer
 * checksums the payload), or its pieces' CRCs, every one taken, from the
 * payload as it is now (a piece outside the payload is an error). */
nb_status nb_writer_put_consume(nb_writer *w, nb_record *rec, const nb_payload_crc *crc);
/* Write the END record of the current segment (count of records since the
 * last END). */
nb_status nb_writer_end(nb_writer *w);
/* Flush and commit; a failure removes the temporary file. */
nb_status nb_writer_close(nb_writer *w);
/* Discard: remove the temporary file (no-op on stdout). */
void nb_writer_abort(nb_writer *w);

/* Serialise one record into a memory buffer (for tests and fuzzing). */
nb_status nb_record_serialize(const nb_record *rec, unsigned char **buf, size_t *len);
/* Reader over a memory buffer (not copied). */
nb_status nb_reader_open_mem(nb_reader **r, const unsigned char *buf, size_t len, const char *name);

#endif
