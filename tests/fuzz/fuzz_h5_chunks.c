/* libFuzzer target: the HDF5 chunk decoders (formats/h5_chunks.c) on any
 * bytes: bitshuffle+LZ4, deflate and HDF5's shuffle, alone and in the
 * pipelines NXmx files use, each into a buffer of exactly the chunk's size
 * (ASan flags a byte read or written outside either).
 *
 * Input: byte 0, the element size (its low two bits: 1, 2, 4 or 8 bytes)
 * and the pipeline (the next three bits); byte 1, the filter mask (the
 * filters skipped); bytes 2-3, the chunk's bytes (little-endian, at most
 * 65535); the rest, the stored chunk. */
#include "fuzz_common.h"
#include "h5_chunks.h"

static const nb_h5c_pipeline pipelines[8] = {
    {1, {NB_H5C_BSLZ4}},   {1, {NB_H5C_DEFLATE}}, {2, {NB_H5C_SHUFFLE, NB_H5C_DEFLATE}},
    {1, {NB_H5C_SHUFFLE}}, {0, {0}},              {2, {NB_H5C_SHUFFLE, NB_H5C_BSLZ4}},
    {3, {NB_H5C_SHUFFLE, NB_H5C_BSLZ4, NB_H5C_DEFLATE}}, {1, {12345}},
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static nb_h5c_scratch scratch; /* kept between inputs, as the reader keeps it between chunks */
    if (size < 4) return 0;
    nb_set_verbosity(-2);
    const size_t elem = (size_t)1 << (data[0] & 3);
    const nb_h5c_pipeline *p = &pipelines[(data[0] >> 2) & 7];
    const uint32_t mask = data[1];
    const size_t out_len = (size_t)data[2] | (size_t)data[3] << 8;
    /* the stored chunk and the output in buffers of their own sizes */
    uint8_t *in = malloc(size - 4 ? size - 4 : 1), *out = malloc(out_len ? out_len : 1);
    if (!in || !out) abort();
    memcpy(in, data + 4, size - 4);
    nb_status st = nb_h5c_decode(p, mask, in, size - 4, elem, out, out_len, &scratch);
    /* a failure says why; a success filled every byte (MSan-free check: touch them) */
    if (st && !nb_error_message()[0]) abort();
    volatile uint8_t sum = 0;
    for (size_t i = 0; !st && i < out_len; i++) sum ^= out[i];
    free(in);
    free(out);
    return 0;
}
