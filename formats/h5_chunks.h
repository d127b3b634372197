/* h5_chunks.h - HDF5 chunks decoded here, not by libhdf5's filter pipeline:
 * the compressions of the NXmx files nb reads (an Eiger's bitshuffle+LZ4,
 * gzip with or without HDF5's byte shuffle), from a chunk's stored bytes
 * (H5Dread_chunk) to its raw values.  No HDF5 here: the decoders take bytes
 * and give bytes (tests/fuzz/fuzz_h5_chunks.c feeds them any).
 *
 * The stored forms:
 *   deflate (HDF5 filter 1): a zlib stream (RFC 1950) of the bytes;
 *   shuffle (2): byte k of every element together, element after element,
 *     k = 0 .. size - 1, the bytes left after the last whole element last;
 *   bitshuffle+LZ4 (32008, compression 2): 8 bytes big-endian, the chunk's
 *     bytes; 4 bytes big-endian, a block's bytes (its elements a multiple
 *     of 8); blocks of that many elements, then one of the rest rounded
 *     down to a multiple of 8, each a 4-byte big-endian length and an LZ4
 *     block of the block's elements bit-shuffled (bslz4.h); then the last
 *     elements (under 8) as they are.  That is bitshuffle's
 *     bshuf_blocked_wrap_fun and bshuf_decompress_lz4_block (bitshuffle
 *     0.3-0.5, src/bitshuffle_core.c, src/bitshuffle.c).
 * Every filter here keeps the size: each stage gives exactly the chunk's
 * bytes, and anything else is a corrupt chunk. */
#ifndef NB_FORMAT_H5_CHUNKS_H
#define NB_FORMAT_H5_CHUNKS_H

#include <stddef.h>
#include <stdint.h>

#include "nb_error.h"

/* HDF5's filter numbers */
#define NB_H5C_DEFLATE 1
#define NB_H5C_SHUFFLE 2
#define NB_H5C_BSLZ4 32008
#define NB_H5C_MAX_FILTERS 8

/* A data set's filters, in the order they were applied when writing */
typedef struct nb_h5c_pipeline {
    int n;
    int id[NB_H5C_MAX_FILTERS];
} nb_h5c_pipeline;

/* Buffers a decoder keeps between chunks (zero it first; nb_h5c_scratch_free) */
typedef struct nb_h5c_scratch {
    uint8_t *buf[2];
    size_t cap;
} nb_h5c_scratch;

/* Whether a filter (its id and client values, as H5Pget_filter2 gives them)
 * is decoded here: deflate, shuffle, and bitshuffle with LZ4 (its fifth
 * value 2). */
int nb_h5c_filter_known(int id, const unsigned *cd, size_t ncd);

/* The chunk stored as in[0, len) through pipeline p, less the filters
 * whose bit is set in filter_mask (H5Dread_chunk's: not applied to this
 * chunk), into out: exactly out_len bytes (the chunk's elements of
 * elem_size bytes each, 1 to 16).  Loads liblz4 for bitshuffle+LZ4.  An
 * input that is no such chunk is NB_ERR_DATA saying what is wrong with it
 * ("bitshuffle+LZ4 block 3 is corrupt"); nothing is read outside in or
 * written outside out. */
nb_status nb_h5c_decode(const nb_h5c_pipeline *p, uint32_t filter_mask, const uint8_t *in, size_t len,
                        size_t elem_size, uint8_t *out, size_t out_len, nb_h5c_scratch *s);

/* The stages alone (out_len bytes exactly, else NB_ERR_DATA) */
nb_status nb_h5c_inflate(const uint8_t *in, size_t len, uint8_t *out, size_t out_len);
nb_status nb_h5c_unshuffle(const uint8_t *in, size_t len, size_t elem_size, uint8_t *out, size_t out_len);
nb_status nb_h5c_bslz4(const uint8_t *in, size_t len, size_t elem_size, uint8_t *out, size_t out_len);

void nb_h5c_scratch_free(nb_h5c_scratch *s);

#endif
