/* bslz4.h - NXmx frames as bitshuffle+LZ4 chunks, byte for byte what HDF5
 * filter 32008 (bitshuffle with LZ4, the Eiger files' compression) stores,
 * made here so that the NXmx writer compresses a frame on every thread and
 * hands HDF5 the finished chunk (H5Dwrite_chunk) instead of running the
 * filter plugin on one thread after copying the frame.
 *
 * A chunk of n 4-byte elements (int32 counts or float32 photons, the host's
 * little-endian bytes):
 *   8 bytes   n * 4, big-endian: the chunk's uncompressed size
 *   4 bytes   NB_BSLZ4_BLOCK * 4 = 8192, big-endian: a block's size in bytes
 *   blocks    each NB_BSLZ4_BLOCK elements, then one of the rest rounded down
 *             to a multiple of 8 (none when that is 0): a 4-byte big-endian
 *             length, then that many bytes, the LZ4 block (raw LZ4, no frame)
 *             of the block's elements bit-shuffled
 *   tail      the last n % 8 elements' bytes as they are
 * Bit-shuffled, a block of m elements (m a multiple of 8) is 32 rows of m / 8
 * bytes: row 8 j + b holds bit b (0 the least significant) of byte j (0 the
 * least significant) of every element, element i in bit i % 8 of the row's
 * byte i / 8.
 *
 * liblz4 is loaded at run time (dlopen, by its soname); nb_bslz4_load says
 * why not where it cannot be (then the NXmx writer lets HDF5 run the plugin). */
#ifndef NB_FORMAT_BSLZ4_H
#define NB_FORMAT_BSLZ4_H

#include <stddef.h>

#include "nb_error.h"

/* Elements a block: bitshuffle's default for 4-byte elements (8192 bytes) */
#define NB_BSLZ4_BLOCK 2048

typedef struct nb_bslz4 nb_bslz4;

/* Load liblz4: NB_OK, or NB_ERR_UNSUPPORTED saying why not. */
nb_status nb_bslz4_load(void);

/* An encoder of chunks of n elements on up to `threads` threads (loads
 * liblz4 first). */
nb_status nb_bslz4_new(nb_bslz4 **z, size_t n, int threads);
/* The chunk of n elements at values: *chunk points into z, valid until the
 * next call, *len bytes. */
nb_status nb_bslz4_encode(nb_bslz4 *z, const void *values, const void **chunk, size_t *len);
/* The threads the encoder uses (at most the blocks of a chunk). */
int nb_bslz4_threads(const nb_bslz4 *z);
void nb_bslz4_free(nb_bslz4 *z);

/* Bit-shuffle m elements (m a multiple of 8) of 4 bytes from in to out (m * 4
 * bytes each, not overlapping), as above: nb_bitshuffle4 the fastest way this
 * processor has (nb_bitshuffle4_path names it), nb_bitshuffle4_portable plain
 * C for any processor. */
void nb_bitshuffle4(const void *in, void *out, size_t m);
void nb_bitshuffle4_portable(const void *in, void *out, size_t m);
const char *nb_bitshuffle4_path(void);

/* The inverse for elements of elem_size bytes (m a multiple of 8): in holds
 * 8 * elem_size rows of m / 8 bytes, row 8 j + b bit b of byte j; the
 * reader of such chunks (h5_chunks.c) calls it. */
void nb_bitunshuffle(const void *in, void *out, size_t m, size_t elem_size);

/* LZ4_decompress_safe of liblz4 (after nb_bslz4_load): the bytes written to
 * dst, at most capacity, or a negative number for input that is no LZ4
 * block fitting there; it reads no byte outside src[0, len). */
int nb_lz4_decompress(const void *src, int len, void *dst, int capacity);

#endif
