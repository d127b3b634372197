/* h5_chunks.c - the chunk decoders of h5_chunks.h: deflate (zlib, which
 * libnb links anyway), HDF5's byte shuffle, and bitshuffle+LZ4 (liblz4
 * loaded by bslz4.c, the bit transposition its writer's inverse), each
 * checking every length against the input it has and the output it must
 * give, so that a corrupt chunk is an error and never a read or a write
 * outside the buffers. */
#include "h5_chunks.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "bslz4.h"
#include "nb_util.h"

int nb_h5c_filter_known(int id, const unsigned *cd, size_t ncd)
{
    if (id == NB_H5C_DEFLATE || id == NB_H5C_SHUFFLE) return 1;
    /* bitshuffle: cd[4] is its compression, 2 LZ4 (0 none, 3 zstd: left to HDF5's plugin) */
    return id == NB_H5C_BSLZ4 && ncd >= 5 && cd[4] == 2;
}

nb_status nb_h5c_inflate(const uint8_t *in, size_t len, uint8_t *out, size_t out_len)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (len > UINT_MAX || out_len > UINT_MAX)
        return nb_error_set(NB_ERR_DATA, "a deflate chunk of %zu bytes for %zu is too big", len, out_len);
    if (inflateInit(&z) != Z_OK) return nb_error_set(NB_ERR_NOMEM, "zlib's inflateInit failed");
    z.next_in = (Bytef *)(uintptr_t)in, z.avail_in = (uInt)len;
    z.next_out = out, z.avail_out = (uInt)out_len;
    const int r = inflate(&z, Z_FINISH);
    const size_t got = z.total_out;
    const char *why = z.msg ? z.msg : "";
    nb_status st = NB_OK;
    if (r == Z_BUF_ERROR && z.avail_out == 0)
        st = nb_error_set(NB_ERR_DATA, "the deflate chunk holds more than the chunk's %zu bytes", out_len);
    else if (r != Z_STREAM_END)
        st = nb_error_set(NB_ERR_DATA, "the deflate chunk is corrupt (zlib: %s)", why[0] ? why : "it ends early");
    else if (got != out_len)
        st = nb_error_set(NB_ERR_DATA, "the deflate chunk holds %zu bytes, not the chunk's %zu", got, out_len);
    inflateEnd(&z);
    return st;
}

nb_status nb_h5c_unshuffle(const uint8_t *in, size_t len, size_t elem_size, uint8_t *out, size_t out_len)
{
    if (len != out_len)
        return nb_error_set(NB_ERR_DATA, "the shuffled chunk holds %zu bytes, not the chunk's %zu", len, out_len);
    const size_t n = out_len / elem_size;
    for (size_t j = 0; j < elem_size; j++)
        for (size_t i = 0; i < n; i++) out[i * elem_size + j] = in[j * n + i];
    memcpy(out + n * elem_size, in + n * elem_size, out_len - n * elem_size);
    return NB_OK;
}

/* The blocks of a bitshuffle+LZ4 chunk from in + 12: `block` elements each,
 * then the rest rounded down to 8, into out; *at: where the blocks end */
static nb_status bslz4_blocks(const uint8_t *in, size_t len, size_t elem_size, size_t block, uint8_t *out, size_t n,
                              uint8_t *tmp, size_t *at)
{
    const size_t whole = n - n % 8;
    size_t pos = 12;
    for (size_t done = 0, b = 1; done < whole; done += block, b++) {
        const size_t m = whole - done < block ? whole - done : block;
        if (len - pos < 4) return nb_error_set(NB_ERR_DATA, "the bitshuffle+LZ4 chunk ends before block %zu", b);
        const uint64_t c = nb_load_be(in + pos, 4);
        pos += 4;
        if (c > len - pos)
            return nb_error_set(NB_ERR_DATA, "bitshuffle+LZ4 block %zu claims %llu bytes, %zu are left", b,
                                (unsigned long long)c, len - pos);
        const int got = nb_lz4_decompress(in + pos, (int)c, tmp, (int)(m * elem_size));
        if (got < 0 || (size_t)got != m * elem_size)
            return nb_error_set(NB_ERR_DATA, "bitshuffle+LZ4 block %zu is corrupt (LZ4 gives %d bytes, not %zu)", b,
                                got, m * elem_size);
        nb_bitunshuffle(tmp, out + done * elem_size, m, elem_size);
        pos += (size_t)c;
    }
    *at = pos;
    return NB_OK;
}

nb_status nb_h5c_bslz4(const uint8_t *in, size_t len, size_t elem_size, uint8_t *out, size_t out_len)
{
    nb_status st = nb_bslz4_load();
    if (st) return st;
    if (len < 12) return nb_error_set(NB_ERR_DATA, "the bitshuffle+LZ4 chunk of %zu bytes has no header", len);
    const uint64_t total = nb_load_be(in, 8), block_bytes = nb_load_be(in + 8, 4);
    if (total != out_len)
        return nb_error_set(NB_ERR_DATA, "the bitshuffle+LZ4 chunk holds %llu bytes, not the chunk's %zu",
                            (unsigned long long)total, out_len);
    const size_t block = (size_t)block_bytes / elem_size;
    /* LZ4 takes an int: a block is at most INT_MAX bytes */
    if (block_bytes % elem_size || block == 0 || block % 8 || block_bytes > INT_MAX || out_len % elem_size)
        return nb_error_set(NB_ERR_DATA, "the bitshuffle+LZ4 chunk's blocks of %llu bytes are not 8 k elements of %zu",
                            (unsigned long long)block_bytes, elem_size);
    const size_t n = out_len / elem_size, whole = n - n % 8;
    uint8_t *tmp = NULL;
    size_t at = 0;
    st = nb_calloc((void **)&tmp, (block < whole ? block : whole) * elem_size + 1, 1, "a bitshuffle+LZ4 block");
    if (!st) st = bslz4_blocks(in, len, elem_size, block, out, n, tmp, &at);
    free(tmp);
    /* the last n % 8 elements as they are */
    const size_t tail = (n - whole) * elem_size;
    if (!st && len - at < tail)
        st = nb_error_set(NB_ERR_DATA, "the bitshuffle+LZ4 chunk ends before its last %zu bytes", tail);
    if (!st) memcpy(out + whole * elem_size, in + at, tail);
    return st;
}

/* Room for two chunks' bytes */
static nb_status scratch_room(nb_h5c_scratch *s, size_t n)
{
    if (s->cap >= n) return NB_OK;
    for (int k = 0; k < 2; k++) {
        free(s->buf[k]);
        s->buf[k] = NULL;
    }
    s->cap = 0;
    nb_status st = nb_calloc((void **)&s->buf[0], n, 1, "a chunk");
    if (!st) st = nb_calloc((void **)&s->buf[1], n, 1, "a chunk");
    if (!st) s->cap = n;
    return st;
}

nb_status nb_h5c_decode(const nb_h5c_pipeline *p, uint32_t filter_mask, const uint8_t *in, size_t len,
                        size_t elem_size, uint8_t *out, size_t out_len, nb_h5c_scratch *s)
{
    if (elem_size < 1 || elem_size > 16 || p->n < 0 || p->n > NB_H5C_MAX_FILTERS)
        return nb_error_set(NB_ERR_DATA, "a chunk of %zu-byte elements through %d filters", elem_size, p->n);
    int last = -1; /* the last filter to undo, the first applied: it writes into out */
    for (int i = p->n - 1; i >= 0; i--)
        if (!(filter_mask >> i & 1)) last = i;
    if (last < 0) {
        if (len != out_len)
            return nb_error_set(NB_ERR_DATA, "the unfiltered chunk holds %zu bytes, not the chunk's %zu", len, out_len);
        memcpy(out, in, len);
        return NB_OK;
    }
    nb_status st = scratch_room(s, out_len ? out_len : 1);
    const uint8_t *src = in;
    size_t src_len = len;
    /* undone last filter first, each into the other scratch buffer, the last into out */
    for (int i = p->n - 1, k = 0; !st && i >= 0; i--) {
        if (filter_mask >> i & 1) continue;
        uint8_t *dst = i == last ? out : s->buf[k];
        if (p->id[i] == NB_H5C_DEFLATE) st = nb_h5c_inflate(src, src_len, dst, out_len);
        else if (p->id[i] == NB_H5C_SHUFFLE) st = nb_h5c_unshuffle(src, src_len, elem_size, dst, out_len);
        else if (p->id[i] == NB_H5C_BSLZ4) st = nb_h5c_bslz4(src, src_len, elem_size, dst, out_len);
        else st = nb_error_set(NB_ERR_UNSUPPORTED, "HDF5 filter %d is not decoded here", p->id[i]);
        src = dst, src_len = out_len, k ^= 1;
    }
    return st;
}

void nb_h5c_scratch_free(nb_h5c_scratch *s)
{
    free(s->buf[0]);
    free(s->buf[1]);
    memset(s, 0, sizeof *s);
}
