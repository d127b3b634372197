/* msgpack.c - MessagePack read an item at a time (msgpack.h): the heads of
 * the spec's formats (fixint, fixstr, fixarray, fixmap, nil, bools, bin,
 * ext, floats, ints, str, array, map), big-endian as the spec writes them.
 * Only what a reader of DIALS's tables needs is kept of an item: a string's
 * or blob's bytes stay in the buffer (a table's columns are blobs of
 * megabytes), so nothing is allocated. */
#include "msgpack.h"

#include <string.h>

#include "nb_util.h"

/* Take n bytes of the head (a length or a value): NULL when fewer are left */
static const unsigned char *take(nb_mp *m, size_t n)
{
    if ((size_t)(m->end - m->p) < n) return NULL;
    const unsigned char *at = m->p;
    m->p += n;
    return at;
}

/* A STR, BIN or EXT of a length in `width` bytes (ext: a type byte after it) */
static int sized(nb_mp *m, nb_mp_item *it, nb_mp_type type, int width, int ext_type)
{
    const unsigned char *h = take(m, (size_t)width + (ext_type ? 1 : 0));
    if (!h) return -1;
    size_t n = (size_t)nb_load_be(h, width);
    it->type = type, it->n = n;
    if (!(it->bytes = take(m, n))) return -1;
    return 0;
}

/* An ARRAY or MAP of a count in `width` bytes */
static int counted(nb_mp *m, nb_mp_item *it, nb_mp_type type, int width)
{
    const unsigned char *h = take(m, (size_t)width);
    if (!h) return -1;
    it->type = type, it->n = (size_t)nb_load_be(h, width);
    return 0;
}

/* An INT of `width` bytes, signed or not */
static int integer(nb_mp *m, nb_mp_item *it, int width, int is_signed)
{
    const unsigned char *h = take(m, (size_t)width);
    if (!h) return -1;
    uint64_t u = nb_load_be(h, width);
    it->type = NB_MP_INT;
    if (is_signed) {
        const int shift = 64 - 8 * width; /* sign-extend from the top bit of the width */
        it->i = shift ? (int64_t)(u << shift) >> shift : (int64_t)u;
    } else {
        if (u > (uint64_t)INT64_MAX) return -1;
        it->i = (int64_t)u;
    }
    return 0;
}

static int floating(nb_mp *m, nb_mp_item *it, int width)
{
    const unsigned char *h = take(m, (size_t)width);
    if (!h) return -1;
    it->type = NB_MP_FLOAT;
    if (width == 4) {
        uint32_t u = (uint32_t)nb_load_be(h, 4);
        float f;
        memcpy(&f, &u, sizeof f);
        it->f = f;
    } else {
        uint64_t u = nb_load_be(h, 8);
        memcpy(&it->f, &u, sizeof it->f);
    }
    return 0;
}

int nb_mp_next(nb_mp *m, nb_mp_item *it)
{
    memset(it, 0, sizeof *it);
    const unsigned char *h = take(m, 1);
    if (!h) return -1;
    const unsigned c = *h;
    if (c <= 0x7f) return it->type = NB_MP_INT, it->i = c, 0;
    if (c >= 0xe0) return it->type = NB_MP_INT, it->i = (int64_t)c - 256, 0;
    if (c <= 0x8f) return it->type = NB_MP_MAP, it->n = c & 0x0f, 0;
    if (c <= 0x9f) return it->type = NB_MP_ARRAY, it->n = c & 0x0f, 0;
    if (c <= 0xbf) {
        it->type = NB_MP_STR, it->n = c & 0x1f;
        return (it->bytes = take(m, it->n)) ? 0 : -1;
    }
    switch (c) {
    case 0xc0: return it->type = NB_MP_NIL, 0;
    case 0xc2: case 0xc3: return it->type = NB_MP_BOOL, it->i = c == 0xc3, 0;
    case 0xc4: return sized(m, it, NB_MP_BIN, 1, 0);
    case 0xc5: return sized(m, it, NB_MP_BIN, 2, 0);
    case 0xc6: return sized(m, it, NB_MP_BIN, 4, 0);
    case 0xc7: return sized(m, it, NB_MP_EXT, 1, 1);
    case 0xc8: return sized(m, it, NB_MP_EXT, 2, 1);
    case 0xc9: return sized(m, it, NB_MP_EXT, 4, 1);
    case 0xca: return floating(m, it, 4);
    case 0xcb: return floating(m, it, 8);
    case 0xcc: return integer(m, it, 1, 0);
    case 0xcd: return integer(m, it, 2, 0);
    case 0xce: return integer(m, it, 4, 0);
    case 0xcf: return integer(m, it, 8, 0);
    case 0xd0: return integer(m, it, 1, 1);
    case 0xd1: return integer(m, it, 2, 1);
    case 0xd2: return integer(m, it, 4, 1);
    case 0xd3: return integer(m, it, 8, 1);
    case 0xd4: case 0xd5: case 0xd6: case 0xd7: case 0xd8: { /* fixext 1, 2, 4, 8, 16: a type byte, then the data */
        const size_t n = (size_t)1 << (c - 0xd4);
        it->type = NB_MP_EXT, it->n = n;
        return take(m, 1) && (it->bytes = take(m, n)) ? 0 : -1;
    }
    case 0xd9: return sized(m, it, NB_MP_STR, 1, 0);
    case 0xda: return sized(m, it, NB_MP_STR, 2, 0);
    case 0xdb: return sized(m, it, NB_MP_STR, 4, 0);
    case 0xdc: return counted(m, it, NB_MP_ARRAY, 2);
    case 0xdd: return counted(m, it, NB_MP_ARRAY, 4);
    case 0xde: return counted(m, it, NB_MP_MAP, 2);
    case 0xdf: return counted(m, it, NB_MP_MAP, 4);
    default: return -1; /* 0xc1: never used */
    }
}

static int skip_at(nb_mp *m, int depth)
{
    nb_mp_item it;
    if (depth > NB_MP_MAX_DEPTH || nb_mp_next(m, &it)) return -1;
    if (it.type != NB_MP_ARRAY && it.type != NB_MP_MAP) return 0;
    /* every item takes a byte at least: a count beyond the bytes left is a lie, found before looping on it */
    const size_t items = it.type == NB_MP_MAP ? 2 * (it.n > SIZE_MAX / 2 ? SIZE_MAX / 2 : it.n) : it.n;
    if (items > (size_t)(m->end - m->p)) return -1;
    for (size_t k = 0; k < items; k++)
        if (skip_at(m, depth + 1)) return -1;
    return 0;
}

int nb_mp_skip(nb_mp *m) { return skip_at(m, 0); }

int nb_mp_is_str(const nb_mp_item *it, const char *s)
{
    return it->type == NB_MP_STR && it->n == strlen(s) && !memcmp(it->bytes, s, it->n);
}

/* ---- writing ---- */

/* A head: its first byte, then v big-endian in `width` bytes (0: none) */
static void put_head(FILE *fp, unsigned first, uint64_t v, int width)
{
    unsigned char h[9];
    h[0] = (unsigned char)first;
    for (int k = 0; k < width; k++) h[1 + k] = (unsigned char)(v >> (8 * (width - 1 - k)));
    fwrite(h, 1, (size_t)width + 1, fp);
}

/* A length's head: the fix form below fix_max, else 1, 2 or 4 bytes
 * (first8 0: no 1-byte form, as arrays and maps have none) */
static void put_sized(FILE *fp, size_t n, unsigned fix, size_t fix_max, unsigned first8, unsigned first16,
                      unsigned first32)
{
    if (fix && n < fix_max) put_head(fp, fix | (unsigned)n, 0, 0);
    else if (first8 && n < 256) put_head(fp, first8, n, 1);
    else if (n < 65536) put_head(fp, first16, n, 2);
    else put_head(fp, first32, n, 4);
}

void nb_mp_put_array(FILE *fp, size_t n) { put_sized(fp, n, 0x90, 16, 0, 0xdc, 0xdd); }
void nb_mp_put_map(FILE *fp, size_t n) { put_sized(fp, n, 0x80, 16, 0, 0xde, 0xdf); }

void nb_mp_put_int(FILE *fp, int64_t v)
{
    if (v >= 0) {
        const uint64_t u = (uint64_t)v;
        if (u < 128) put_head(fp, (unsigned)u, 0, 0);
        else if (u < 256) put_head(fp, 0xcc, u, 1);
        else if (u < 65536) put_head(fp, 0xcd, u, 2);
        else if (u <= UINT32_MAX) put_head(fp, 0xce, u, 4);
        else put_head(fp, 0xcf, u, 8);
    } else if (v >= -32) put_head(fp, (unsigned)(v & 0xff), 0, 0);
    else if (v >= INT8_MIN) put_head(fp, 0xd0, (uint64_t)v & 0xff, 1);
    else if (v >= INT16_MIN) put_head(fp, 0xd1, (uint64_t)v & 0xffff, 2);
    else if (v >= INT32_MIN) put_head(fp, 0xd2, (uint64_t)v & 0xffffffffu, 4);
    else put_head(fp, 0xd3, (uint64_t)v, 8);
}

void nb_mp_put_str(FILE *fp, const char *s)
{
    const size_t n = strlen(s);
    put_sized(fp, n, 0xa0, 32, 0xd9, 0xda, 0xdb);
    fwrite(s, 1, n, fp);
}

void nb_mp_put_bin(FILE *fp, const void *bytes, size_t n)
{
    put_sized(fp, n, 0, 0, 0xc4, 0xc5, 0xc6);
    if (n) fwrite(bytes, 1, n, fp);
}
