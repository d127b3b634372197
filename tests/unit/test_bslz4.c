/* test_bslz4.c - NXmx's bitshuffle+LZ4 chunks (formats/bslz4.c): the bit
 * shuffle, on the fastest path this processor has and the portable one,
 * against a bit-by-bit transcription of the layout in bslz4.h; and whole
 * chunks, on 1 to 3 threads, taken apart here by that layout (liblz4's
 * LZ4_decompress_safe for the blocks) back to the values they were made of;
 * and the reader's decoders (formats/h5_chunks.c): those chunks, the bit
 * shuffle of elements of 1, 2, 4 and 8 bytes undone, deflate with HDF5's
 * byte shuffle, and corrupt chunks refused saying why. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "bslz4.h"
#include "h5_chunks.h"
#include "nb_error.h"
#include "tap.h"

static uint64_t rng_state = 88172645463325252ull;

static uint32_t next_u32(void)
{
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

/* Row 8 j + b, byte i / 8, bit i % 8: bit b of byte j of element i */
static void shuffle_by_bits(const uint32_t *in, uint8_t *out, size_t m)
{
    memset(out, 0, m * 4);
    for (size_t i = 0; i < m; i++)
        for (int j = 0; j < 4; j++)
            for (int b = 0; b < 8; b++) {
                unsigned bit = (in[i] >> (8 * j + b)) & 1u;
                out[(size_t)(8 * j + b) * (m / 8) + i / 8] |= (uint8_t)(bit << (i % 8));
            }
}

static void unshuffle_by_bits(const uint8_t *in, uint32_t *out, size_t m)
{
    memset(out, 0, m * 4);
    for (size_t i = 0; i < m; i++)
        for (int r = 0; r < 32; r++) out[i] |= (uint32_t)((in[(size_t)r * (m / 8) + i / 8] >> (i % 8)) & 1u) << r;
}

static void test_shuffle(void)
{
    const size_t sizes[] = {8, 16, 24, 32, 40, 56, 64, 72, 96, 120, 128, 136, 200, 1024, 2040, 2048};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t m = sizes[k];
        uint32_t *in = malloc(m * 4);
        uint8_t *want = malloc(m * 4), *fast = malloc(m * 4), *plain = malloc(m * 4);
        for (size_t i = 0; i < m; i++) in[i] = i % 3 ? next_u32() : next_u32() % 40; /* all bits, and small counts */
        shuffle_by_bits(in, want, m);
        nb_bitshuffle4(in, fast, m);
        nb_bitshuffle4_portable(in, plain, m);
        ok(!memcmp(fast, want, m * 4), "%zu elements: the %s bit shuffle is the bit-by-bit one", m,
           nb_bitshuffle4_path());
        ok(!memcmp(plain, want, m * 4), "%zu elements: the portable bit shuffle is the bit-by-bit one", m);
        free(in), free(want), free(fast), free(plain);
    }
}

static uint32_t get_be(const uint8_t *p, int bytes)
{
    uint32_t v = 0;
    for (int i = 0; i < bytes; i++) v = v << 8 | p[i];
    return v;
}

typedef int (*lz4_decompress_fn)(const char *src, char *dst, int src_size, int dst_capacity);

/* The chunk taken apart by bslz4.h's layout: its values, or a message in why */
static int decode_chunk(lz4_decompress_fn dec, const uint8_t *c, size_t len, size_t n, uint32_t *out, char *why)
{
    uint64_t total = (uint64_t)get_be(c, 4) << 32 | get_be(c + 4, 4);
    if (len < 12 || total != n * 4 || get_be(c + 8, 4) != NB_BSLZ4_BLOCK * 4)
        return sprintf(why, "header: %llu bytes, blocks of %u", (unsigned long long)total, get_be(c + 8, 4)), 0;
    size_t at = 12, whole = n / 8 * 8;
    uint8_t shuffled[NB_BSLZ4_BLOCK * 4];
    for (size_t first = 0; first < whole; first += NB_BSLZ4_BLOCK) {
        size_t m = whole - first < NB_BSLZ4_BLOCK ? whole - first : NB_BSLZ4_BLOCK;
        uint32_t clen = at + 4 <= len ? get_be(c + at, 4) : 0;
        if (!clen || at + 4 + clen > len) return sprintf(why, "block at element %zu: length %u", first, clen), 0;
        if (dec((const char *)c + at + 4, (char *)shuffled, (int)clen, (int)(m * 4)) != (int)(m * 4))
            return sprintf(why, "block at element %zu does not decompress to %zu bytes", first, m * 4), 0;
        unshuffle_by_bits(shuffled, out + first, m);
        at += 4 + clen;
    }
    if (len - at != (n - whole) * 4)
        return sprintf(why, "%zu bytes after the blocks, not %zu", len - at, (n - whole) * 4), 0;
    memcpy(out + whole, c + at, (n - whole) * 4);
    return 1;
}

/* A frame like a simulated one: mostly small counts, a few large, gaps -1
 * (the same for the same seed) */
static void frame_values(uint32_t *v, size_t n, uint64_t seed)
{
    rng_state = seed;
    for (size_t i = 0; i < n; i++) {
        uint32_t r = next_u32();
        v[i] = r % 97 == 0 ? (uint32_t)-1 : r % 31 == 0 ? r % 100000 : r % 7;
    }
}

static void test_chunks(void)
{
    nb_status st = nb_bslz4_load();
    void *lib = st ? NULL : dlopen("liblz4.so.1", RTLD_NOW | RTLD_LOCAL);
    lz4_decompress_fn dec = NULL;
    if (lib) *(void **)&dec = dlsym(lib, "LZ4_decompress_safe");
    if (!dec) {
        skip(st ? nb_error_message() : "liblz4.so.1 has no LZ4_decompress_safe", "bitshuffle+LZ4 chunks");
        return;
    }
    /* no whole group of 8, no whole block, a partial block and a tail, an odd detector's frame */
    const size_t sizes[] = {5, 8, 2048, 2049, 4096 + 13, 3 * 2048 + 8, 1001 * 999};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t n = sizes[k];
        uint32_t *v = malloc(n * 4), *back = malloc(n * 4);
        uint8_t *first = NULL;
        size_t first_len = 0;
        for (int threads = 1; threads <= 3; threads++) {
            nb_bslz4 *z = NULL;
            const void *chunk;
            size_t len = 0;
            char why[160] = "";
            if (!ok(!nb_bslz4_new(&z, n, threads), "%zu values, %d threads: an encoder", n, threads)) continue;
            /* two frames through one encoder: the second must not be the first's */
            for (int f = 0; f < 2; f++) {
                frame_values(v, n, 1000 + (uint64_t)f);
                ok(!nb_bslz4_encode(z, v, &chunk, &len), "%zu values, %d threads, frame %d: encoded", n, threads, f);
                int good = decode_chunk(dec, chunk, len, n, back, why);
                ok(good && !memcmp(back, v, n * 4), "%zu values, %d threads, frame %d: the chunk (%zu bytes) decodes "
                   "to them%s%s", n, threads, f, len, why[0] ? ": " : "", why);
            }
            /* the same values (frame 1's) give the same bytes on any number of threads */
            if (threads == 1) {
                first = malloc(len), first_len = len;
                memcpy(first, chunk, len);
            } else {
                ok(len == first_len && !memcmp(chunk, first, len), "%zu values: %d threads write the bytes of one",
                   n, threads);
            }
            nb_bslz4_free(z);
        }
        free(first), free(v), free(back);
    }
    dlclose(lib);
}

/* Elements of `size` bytes bit-shuffled by the layout's words (row 8 j + b
 * holds bit b of byte j of every element, element i in bit i % 8 of byte
 * i / 8), then undone by nb_bitunshuffle */
static void test_unshuffle_sizes(void)
{
    const size_t m = 48;
    for (size_t size = 1; size <= 8; size *= 2) {
        uint8_t in[48 * 8], shuffled[48 * 8] = {0}, back[48 * 8];
        for (size_t i = 0; i < m * size; i++) in[i] = (uint8_t)next_u32();
        for (size_t i = 0; i < m; i++)
            for (size_t j = 0; j < size; j++)
                for (int b = 0; b < 8; b++)
                    if (in[i * size + j] >> b & 1) shuffled[(8 * j + (size_t)b) * (m / 8) + i / 8] |= (uint8_t)(1u << (i % 8));
        nb_bitunshuffle(shuffled, back, m, size);
        ok(!memcmp(back, in, m * size), "nb_bitunshuffle: %zu-byte elements", size);
    }
}

static void test_decoders(void)
{
    if (nb_bslz4_load()) {
        skip(nb_error_message(), "the chunk decoders");
        return;
    }
    const size_t sizes[] = {5, 8, 2049, 4096 + 13};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        const size_t n = sizes[k];
        uint32_t *v = malloc(n * 4), *back = malloc(n * 4);
        nb_bslz4 *z = NULL;
        const void *chunk;
        size_t len = 0;
        frame_values(v, n, 7 + k);
        if (!ok(v && back && !nb_bslz4_new(&z, n, 1) && !nb_bslz4_encode(z, v, &chunk, &len), "%zu values encoded", n))
            continue;
        const nb_h5c_pipeline bs = {1, {NB_H5C_BSLZ4}};
        nb_h5c_scratch scratch = {{NULL, NULL}, 0};
        nb_status st = nb_h5c_decode(&bs, 0, chunk, len, 4, (uint8_t *)back, n * 4, &scratch);
        ok(!st && !memcmp(back, v, n * 4), "%zu values: nb_h5c_decode gives them back (%s)", n, st ? nb_error_message() : "");
        /* cut short, or the header's size another */
        ok(nb_h5c_decode(&bs, 0, chunk, len - 1, 4, (uint8_t *)back, n * 4, &scratch) == NB_ERR_DATA,
           "%zu values: a chunk cut short is refused: %s", n, nb_error_message());
        ok(nb_h5c_decode(&bs, 0, chunk, len, 4, (uint8_t *)back, n * 4 - 4, &scratch) == NB_ERR_DATA &&
               strstr(nb_error_message(), "not the chunk's"),
           "%zu values: a chunk of another size is refused: %s", n, nb_error_message());
        /* filter 0 skipped (the mask): the bytes as they are, which are not the chunk's size */
        ok(nb_h5c_decode(&bs, 1, chunk, len, 4, (uint8_t *)back, n * 4, &scratch) == NB_ERR_DATA,
           "%zu values: skipped, the stored bytes must be the chunk's: %s", n, nb_error_message());
        /* HDF5's shuffle, then deflate (gzip's pipeline) */
        uint8_t *sh = malloc(n * 4), *gz = malloc(compressBound(n * 4));
        uLongf gz_len = compressBound(n * 4);
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < 4; j++) sh[j * n + i] = ((const uint8_t *)v)[4 * i + j];
        compress2(gz, &gz_len, sh, n * 4, 6);
        const nb_h5c_pipeline gzip = {2, {NB_H5C_SHUFFLE, NB_H5C_DEFLATE}};
        memset(back, 0, n * 4);
        st = nb_h5c_decode(&gzip, 0, gz, gz_len, 4, (uint8_t *)back, n * 4, &scratch);
        ok(!st && !memcmp(back, v, n * 4), "%zu values: shuffle and deflate undone (%s)", n, st ? nb_error_message() : "");
        gz[gz_len / 2] ^= 0x55;
        ok(nb_h5c_decode(&gzip, 0, gz, gz_len, 4, (uint8_t *)back, n * 4, &scratch) == NB_ERR_DATA,
           "%zu values: a corrupt deflate chunk is refused: %s", n, nb_error_message());
        nb_h5c_scratch_free(&scratch);
        nb_bslz4_free(z);
        free(sh), free(gz), free(v), free(back);
    }
}

int main(void)
{
    test_shuffle();
    test_chunks();
    test_unshuffle_sizes();
    test_decoders();
    return tap_done();
}
