/* CRC-32 (zlib's: reflected polynomial 0xEDB88320) with carry-less multiply
 * where the CPU has it.
 *
 * An image of 4096^2 floats is 64 MiB; zlib's table-driven crc32 runs at
 * 1-2 GB/s, which made the checksum a tenth of a whole render.  Folding 64
 * bytes at a time with PCLMULQDQ (Gopal et al., "Fast CRC Computation for
 * Generic Polynomials Using PCLMULQDQ Instruction", Intel 2009) runs an order
 * of magnitude faster; with VPCLMULQDQ (AVX-512) four such folds run in one
 * instruction, which keeps up with data in cache (nb-sim checksums each row
 * as it renders it).  The folding constants are x^(k) mod P(x), bit
 * reflected, for the distances the loops fold over:
 *   k1, k2: 4 x 128 bits + 32 and - 32;  k3, k4: 128 bits + 32 and - 32;
 *   k5: 64 bits;  mu, P': Barrett reduction of the last 64 bits;
 *   k2048: 16 x 128 bits + 32 and - 32 (the AVX-512 loop's four registers).
 * The result equals zlib's crc32() on every input (tests/unit/test_stream.c
 * compares them over random buffers and lengths). */
#include "nb_crc32.h"

#include <zlib.h>

#include "nb_tuning.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define NB_CRC_CLMUL 1
#include <immintrin.h>
#endif

/* zlib's crc32 takes uInt lengths: feed large buffers in pieces. */
static uint32_t crc_zlib(uint32_t crc, const unsigned char *p, uint64_t n)
{
    while (n > 0) {
        uInt piece = n > (1u << 30) ? (1u << 30) : (uInt)n;
        crc = (uint32_t)crc32(crc, p, piece);
        p += piece;
        n -= piece;
    }
    return crc;
}

#ifdef NB_CRC_CLMUL
static const uint64_t k1k2[2] __attribute__((aligned(16))) = {0x0154442bd4, 0x01c6e41596};
static const uint64_t k3k4[2] __attribute__((aligned(16))) = {0x01751997d0, 0x00ccaa009e};
static const uint64_t k5k0[2] __attribute__((aligned(16))) = {0x0163cd6124, 0x0000000000};
static const uint64_t k2048[2] __attribute__((aligned(16))) = {0x011542778a, 0x01322d1430};
static const uint64_t poly[2] __attribute__((aligned(16))) = {0x01db710641, 0x01f7011641};

/* The fold from four 128-bit lanes x1..x4 (the 64 bytes before buf, state
 * folded in) over the n more bytes at buf (a multiple of 16) to the raw CRC
 * state. */
__attribute__((target("pclmul,sse4.1"), always_inline)) static inline uint32_t
crc_fold_lanes(__m128i x1, __m128i x2, __m128i x3, __m128i x4, const unsigned char *buf, uint64_t n)
{
    __m128i x0, x5, x6, x7, x8, y5, y6, y7, y8;
    x0 = _mm_load_si128((const __m128i *)k1k2);
    /* four 128-bit lanes, each folded 512 bits forward per step */
    while (n >= 64) {
        x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
        x6 = _mm_clmulepi64_si128(x2, x0, 0x00);
        x7 = _mm_clmulepi64_si128(x3, x0, 0x00);
        x8 = _mm_clmulepi64_si128(x4, x0, 0x00);
        x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
        x2 = _mm_clmulepi64_si128(x2, x0, 0x11);
        x3 = _mm_clmulepi64_si128(x3, x0, 0x11);
        x4 = _mm_clmulepi64_si128(x4, x0, 0x11);
        y5 = _mm_loadu_si128((const __m128i *)(buf + 0x00));
        y6 = _mm_loadu_si128((const __m128i *)(buf + 0x10));
        y7 = _mm_loadu_si128((const __m128i *)(buf + 0x20));
        y8 = _mm_loadu_si128((const __m128i *)(buf + 0x30));
        x1 = _mm_xor_si128(_mm_xor_si128(x1, x5), y5);
        x2 = _mm_xor_si128(_mm_xor_si128(x2, x6), y6);
        x3 = _mm_xor_si128(_mm_xor_si128(x3, x7), y7);
        x4 = _mm_xor_si128(_mm_xor_si128(x4, x8), y8);
        buf += 64;
        n -= 64;
    }
    /* the four lanes into one */
    x0 = _mm_load_si128((const __m128i *)k3k4);
    x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
    x1 = _mm_xor_si128(_mm_xor_si128(x1, x2), x5);
    x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
    x1 = _mm_xor_si128(_mm_xor_si128(x1, x3), x5);
    x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
    x1 = _mm_xor_si128(_mm_xor_si128(x1, x4), x5);
    /* the remaining 16-byte blocks */
    while (n >= 16) {
        x2 = _mm_loadu_si128((const __m128i *)buf);
        x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
        x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
        x1 = _mm_xor_si128(_mm_xor_si128(x1, x2), x5);
        buf += 16;
        n -= 16;
    }
    /* 128 bits to 64 */
    x2 = _mm_clmulepi64_si128(x1, x0, 0x10);
    x3 = _mm_setr_epi32(~0, 0, ~0, 0);
    x1 = _mm_srli_si128(x1, 8);
    x1 = _mm_xor_si128(x1, x2);
    x0 = _mm_loadl_epi64((const __m128i *)k5k0);
    x2 = _mm_srli_si128(x1, 4);
    x1 = _mm_and_si128(x1, x3);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_xor_si128(x1, x2);
    /* Barrett reduction to 32 bits */
    x0 = _mm_load_si128((const __m128i *)poly);
    x2 = _mm_and_si128(x1, x3);
    x2 = _mm_clmulepi64_si128(x2, x0, 0x10);
    x2 = _mm_and_si128(x2, x3);
    x2 = _mm_clmulepi64_si128(x2, x0, 0x00);
    x1 = _mm_xor_si128(x1, x2);
    return (uint32_t)_mm_extract_epi32(x1, 1);
}

/* The raw (not inverted) CRC state over n bytes, n >= 64 and a multiple of 16. */
__attribute__((target("pclmul,sse4.1"))) static uint32_t crc_fold(uint32_t state, const unsigned char *buf,
                                                                   uint64_t n)
{
    __m128i x1 = _mm_loadu_si128((const __m128i *)(buf + 0x00));
    x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128((int)state));
    return crc_fold_lanes(x1, _mm_loadu_si128((const __m128i *)(buf + 0x10)),
                          _mm_loadu_si128((const __m128i *)(buf + 0x20)),
                          _mm_loadu_si128((const __m128i *)(buf + 0x30)), buf + 64, n - 64);
}

/* crc_fold for n >= 256: four 512-bit registers, each folded 2048 bits
 * forward per step, then into one (512 bits at a time), whose four lanes go
 * on as crc_fold's. */
__attribute__((target("vpclmulqdq,avx512f,pclmul,sse4.1"))) static uint32_t crc_fold512(uint32_t state,
                                                                                       const unsigned char *buf,
                                                                                       uint64_t n)
{
    __m512i z0 = _mm512_loadu_si512(buf), z1 = _mm512_loadu_si512(buf + 64), z2 = _mm512_loadu_si512(buf + 128),
            z3 = _mm512_loadu_si512(buf + 192);
    z0 = _mm512_xor_si512(z0, _mm512_zextsi128_si512(_mm_cvtsi32_si128((int)state)));
    buf += 256;
    n -= 256;
    const __m512i k = _mm512_broadcast_i32x4(_mm_load_si128((const __m128i *)k2048));
#define NB_FOLD512(z, kk, next)                                                                                  \
    _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(z, kk, 0x00), _mm512_clmulepi64_epi128(z, kk, 0x11), next, \
                              0x96)
    while (n >= 256) {
        z0 = NB_FOLD512(z0, k, _mm512_loadu_si512(buf));
        z1 = NB_FOLD512(z1, k, _mm512_loadu_si512(buf + 64));
        z2 = NB_FOLD512(z2, k, _mm512_loadu_si512(buf + 128));
        z3 = NB_FOLD512(z3, k, _mm512_loadu_si512(buf + 192));
        buf += 256;
        n -= 256;
    }
    const __m512i k512 = _mm512_broadcast_i32x4(_mm_load_si128((const __m128i *)k1k2));
    z1 = NB_FOLD512(z0, k512, z1);
    z2 = NB_FOLD512(z1, k512, z2);
    z3 = NB_FOLD512(z2, k512, z3);
#undef NB_FOLD512
    return crc_fold_lanes(_mm512_extracti32x4_epi32(z3, 0), _mm512_extracti32x4_epi32(z3, 1),
                          _mm512_extracti32x4_epi32(z3, 2), _mm512_extracti32x4_epi32(z3, 3), buf, n);
}

static int have_clmul(void)
{
    static int known = -1;
    if (known < 0) {
        __builtin_cpu_init();
        known = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
        /* 2: the 512-bit fold too, unless NB_SIMD asks for less */
        if (known && __builtin_cpu_supports("vpclmulqdq") && __builtin_cpu_supports("avx512f") && nb_simd_limit() == 2)
            known = 2;
    }
    return known;
}
#endif

uint32_t nb_crc32_update(uint32_t crc, const void *data, uint64_t n)
{
    const unsigned char *p = data;
#ifdef NB_CRC_CLMUL
    if (n >= 64 && have_clmul()) {
        uint64_t bulk = n & ~(uint64_t)15;
        crc = ~(n >= 256 && have_clmul() == 2 ? crc_fold512(~crc, p, bulk) : crc_fold(~crc, p, bulk));
        p += bulk;
        n -= bulk;
    }
#endif
    return crc_zlib(crc, p, n);
}

/* Arithmetic modulo the polynomial in zlib's bit-reflected form (x^0 is the
 * top bit), as zlib's crc32_combine_gen64 and crc32_combine_op (1.2.12 and
 * later; written out here for older ones). */
static uint32_t multmodp(uint32_t a, uint32_t b)
{
    uint32_t m = (uint32_t)1 << 31, p = 0;
    for (;;) {
        if (a & m) {
            p ^= b;
            if ((a & (m - 1)) == 0) break;
        }
        m >>= 1;
        b = b & 1 ? (b >> 1) ^ 0xedb88320u : b >> 1;
    }
    return p;
}

uint32_t nb_crc32_combine_gen(uint64_t len2)
{
    /* x^(8 len2) mod P: x^(2^k) by squaring, k from 3 (a byte is 2^3 bits) */
    uint32_t x2k = (uint32_t)1 << 30, op = (uint32_t)1 << 31; /* x^1, x^0 */
    for (int k = 0; k < 3; k++) x2k = multmodp(x2k, x2k);
    for (; len2; len2 >>= 1) {
        if (len2 & 1) op = multmodp(x2k, op);
        x2k = multmodp(x2k, x2k);
    }
    return op;
}

uint32_t nb_crc32_combine_op(uint32_t crc1, uint32_t crc2, uint32_t op) { return multmodp(op, crc1) ^ crc2; }

int nb_crc32_accelerated(void)
{
#ifdef NB_CRC_CLMUL
    return have_clmul();
#else
    return 0;
#endif
}
