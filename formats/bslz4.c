/* bslz4.c - NXmx frames as bitshuffle+LZ4 chunks (the layout: bslz4.h),
 * compressed on every thread, for the NXmx writer to hand to HDF5 whole.
 *
 * HDF5's filter path ran the bitshuffle plugin on one thread inside H5Dwrite,
 * after copying the frame into a chunk buffer, and the plugin allocated its
 * output afresh for every chunk: writing NXmx cost more than writing the same
 * frames as CBF.  Here the threads take a frame's blocks in runs, each
 * bit-shuffling a block (with AVX2 where the processor has it) and
 * compressing it with liblz4, into buffers kept from frame to frame.
 * LZ4_compress_default on the same bit-shuffled bytes is what the plugin
 * calls, so the chunks are the plugin's, byte for byte (with the same
 * liblz4).  liblz4 is loaded at run time (dlopen), as libhdf5 is. */
#include "bslz4.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_tuning.h"

#ifndef NB_LZ4_SONAME
#define NB_LZ4_SONAME "liblz4.so.1"
#endif

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define NB_BSHUF_X86 1
#include <immintrin.h>
#endif

/* ---- the bit shuffle ---------------------------------------------------------- */

/* x's byte i bit b moved to byte b bit i: the 8 x 8 bit matrix (a byte a
 * row) transposed by swapping the off-diagonal 1 x 1, then 2 x 2, then
 * 4 x 4 blocks of its 2 x 2 block grids (Hacker's Delight, 7-3) */
static uint64_t transpose8x8(uint64_t x)
{
    uint64_t t;
    t = (x ^ (x >> 7)) & 0x00AA00AA00AA00AAull;
    x ^= t ^ (t << 7);
    t = (x ^ (x >> 14)) & 0x0000CCCC0000CCCCull;
    x ^= t ^ (t << 14);
    t = (x ^ (x >> 28)) & 0x00000000F0F0F0F0ull;
    x ^= t ^ (t << 28);
    return x;
}

/* groups of 8 elements from group k0 on, of a block whose rows are `row`
 * bytes: each byte j of the 8 elements is an 8 x 8 bit matrix whose rows,
 * transposed, are byte k of rows 8 j .. 8 j + 7 */
static void shuffle_groups(const uint8_t *in, uint8_t *out, size_t row, size_t k0)
{
    for (size_t k = k0; k < row; k++) {
        const uint8_t *e = in + 32 * k;
        for (int j = 0; j < 4; j++) {
            uint64_t x = 0;
            for (int i = 0; i < 8; i++) x |= (uint64_t)e[4 * i + j] << (8 * i);
            x = transpose8x8(x);
            for (int b = 0; b < 8; b++) out[(size_t)(8 * j + b) * row + k] = (uint8_t)(x >> (8 * b));
        }
    }
}

#ifdef NB_BSHUF_X86
/* A block of m elements, 32 at a time: their bytes sorted into one register
 * per byte j, element i in byte i; then _mm256_movemask_epi8 takes the top
 * bit of every byte, 4 bytes of row 8 j + 7, and each doubling moves the
 * next bit up.  Returns the elements done (m less m % 32).  (AVX-512BW's
 * _mm512_movepi8_mask, 8 bytes of a row at once, made the bit shuffle a
 * third faster but the whole run only 1-2 %: not worth a third path.) */
__attribute__((target("avx2"))) static size_t shuffle_avx2(const uint8_t *in, uint8_t *out, size_t m)
{
    const size_t row = m / 8;
    size_t g = 0;
    /* in each 128-bit lane (4 elements): byte j of the 4 in 32-bit word j */
    const __m256i by_byte = _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15, 0, 4, 8, 12, 1, 5,
                                             9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    /* the unpacks leave words of elements 0-3, 8-11, 16-19, 24-27 | 4-7, 12-15, 20-23, 28-31 */
    const __m256i in_order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (; g + 32 <= m; g += 32) {
        const __m256i *src = (const __m256i *)(in + 4 * g);
        __m256i a0 = _mm256_shuffle_epi8(_mm256_loadu_si256(src), by_byte);
        __m256i a1 = _mm256_shuffle_epi8(_mm256_loadu_si256(src + 1), by_byte);
        __m256i a2 = _mm256_shuffle_epi8(_mm256_loadu_si256(src + 2), by_byte);
        __m256i a3 = _mm256_shuffle_epi8(_mm256_loadu_si256(src + 3), by_byte);
        __m256i lo01 = _mm256_unpacklo_epi32(a0, a1), hi01 = _mm256_unpackhi_epi32(a0, a1);
        __m256i lo23 = _mm256_unpacklo_epi32(a2, a3), hi23 = _mm256_unpackhi_epi32(a2, a3);
        __m256i plane[4] = {_mm256_unpacklo_epi64(lo01, lo23), _mm256_unpackhi_epi64(lo01, lo23),
                            _mm256_unpacklo_epi64(hi01, hi23), _mm256_unpackhi_epi64(hi01, hi23)};
        for (int j = 0; j < 4; j++) {
            __m256i p = _mm256_permutevar8x32_epi32(plane[j], in_order);
            for (int b = 7; b >= 0; b--) {
                uint32_t bits = (uint32_t)_mm256_movemask_epi8(p);
                memcpy(out + (size_t)(8 * j + b) * row + g / 8, &bits, 4);
                p = _mm256_add_epi8(p, p);
            }
        }
    }
    return g;
}

/* AVX2, unless NB_SIMD=generic (atomic: the encoder's threads ask at once) */
static int have_avx2(void)
{
    static _Atomic int known = -1;
    if (known < 0) {
        __builtin_cpu_init();
        known = __builtin_cpu_supports("avx2") && nb_simd_limit() >= 1;
    }
    return known;
}
#endif

void nb_bitshuffle4_portable(const void *in, void *out, size_t m) { shuffle_groups(in, out, m / 8, 0); }

void nb_bitshuffle4(const void *in, void *out, size_t m)
{
    size_t done = 0; /* elements */
#ifdef NB_BSHUF_X86
    if (have_avx2()) done = shuffle_avx2(in, out, m);
#endif
    shuffle_groups(in, out, m / 8, done / 8);
}

/* The inverse, for elements of any size: byte j of elements 8 k .. 8 k + 7
 * is the 8 x 8 bit matrix of byte k of rows 8 j .. 8 j + 7, transposed
 * (the transposition is its own inverse).  Plain C: reading a chunk is
 * bound by LZ4 and the copy into doubles, not by this. */
void nb_bitunshuffle(const void *in_, void *out_, size_t m, size_t elem_size)
{
    const uint8_t *in = in_;
    uint8_t *out = out_;
    const size_t row = m / 8;
    for (size_t k = 0; k < row; k++)
        for (size_t j = 0; j < elem_size; j++) {
            uint64_t x = 0;
            for (int b = 0; b < 8; b++) x |= (uint64_t)in[(8 * j + (size_t)b) * row + k] << (8 * b);
            x = transpose8x8(x);
            for (int i = 0; i < 8; i++) out[(8 * k + (size_t)i) * elem_size + j] = (uint8_t)(x >> (8 * i));
        }
}

const char *nb_bitshuffle4_path(void)
{
#ifdef NB_BSHUF_X86
    if (have_avx2()) return "avx2";
#endif
    return "portable";
}

/* ---- liblz4, loaded on first use ---------------------------------------------- */

/* liblz4.so.1's functions (lz4.h, stable since 1.7): declared here, so that
 * building needs no liblz4-dev */
static struct {
    int state; /* 0 not tried, 1 loaded, -1 failed */
    char why[256];
    int (*compress_default)(const char *src, char *dst, int src_size, int dst_capacity);
    int (*compress_bound)(int input_size);
    int (*decompress_safe)(const char *src, char *dst, int compressed_size, int dst_capacity);
} lz4;

nb_status nb_bslz4_load(void)
{
    if (lz4.state == 0) {
        lz4.state = -1;
        const uint16_t one = 1;
        void *lib = NULL;
        /* a chunk holds the file's little-endian values: on a big-endian
         * host HDF5 converts them before its filter runs */
        if (*(const uint8_t *)&one != 1)
            snprintf(lz4.why, sizeof lz4.why, "the chunks are made here on little-endian hosts only");
        else if (!(lib = dlopen(NB_LZ4_SONAME, RTLD_NOW | RTLD_LOCAL)))
            snprintf(lz4.why, sizeof lz4.why, "%s", dlerror());
        else if (!(*(void **)&lz4.compress_default = dlsym(lib, "LZ4_compress_default")) ||
                 !(*(void **)&lz4.compress_bound = dlsym(lib, "LZ4_compressBound")) ||
                 !(*(void **)&lz4.decompress_safe = dlsym(lib, "LZ4_decompress_safe")))
            snprintf(lz4.why, sizeof lz4.why, "%s has no LZ4_compress_default, LZ4_compressBound or LZ4_decompress_safe",
                     NB_LZ4_SONAME);
        else lz4.state = 1;
        if (lib && lz4.state < 0) dlclose(lib);
    }
    if (lz4.state < 0) return nb_error_set(NB_ERR_UNSUPPORTED, "cannot load liblz4 (Debian: liblz4-1): %s", lz4.why);
    return NB_OK;
}

int nb_lz4_decompress(const void *src, int len, void *dst, int capacity)
{
    return lz4.decompress_safe(src, dst, len, capacity);
}

/* ---- the chunks ---------------------------------------------------------------- */

/* A frame's blocks go in runs of RUN_BLOCKS to whichever thread claims the
 * next run first: the caller's thread and threads - 1 helpers, which wait
 * for a frame blocked (no spinning: on a busy machine a spinning helper
 * takes the core that the caller or the stream's reader needs).  A helper
 * the machine holds up claims nothing and is waited for by no one (OpenMP's
 * barrier would wait for it: 2 to 3 times slower with one core busy).  A
 * claim is tagged with the frame's number, so that a helper waking late can
 * claim no run of a later frame with the earlier one's values. */
#define RUN_BLOCKS 16

struct nb_bslz4 {
    size_t n;                /* elements a chunk */
    size_t blocks;           /* of NB_BSLZ4_BLOCK elements, and the partial one */
    size_t runs;             /* of RUN_BLOCKS blocks (the last fewer) */
    size_t run_cap;          /* bytes a run's blocks take at most */
    uint8_t *chunk;          /* the header, run 0's blocks, then the others' copied after them */
    uint8_t *later;          /* runs 1 .. runs-1: their blocks, run_cap each */
    uint8_t *shuffled;       /* the caller's bit-shuffled block, NB_BSLZ4_BLOCK * 4 bytes */
    size_t *len;             /* bytes of each run's blocks */
    pthread_t *helper;
    int helpers;             /* started */
    pthread_mutex_t mu;
    pthread_cond_t start_cv, done_cv;
    uint32_t frame;          /* the frame being encoded (under mu), from 1 */
    const uint8_t *values;   /* its values (under mu) */
    int quit;                /* under mu */
    _Atomic uint64_t claim;  /* frame << 32 | the next run to claim */
    _Atomic size_t finished; /* runs of the frame done */
    _Atomic int failed;      /* LZ4 failed on a block of the frame */
};

static void put_be(uint8_t *p, uint64_t v, int bytes)
{
    for (int i = bytes - 1; i >= 0; i--, v >>= 8) p[i] = (uint8_t)v;
}

/* elements of block b of a chunk of n (blocks of NB_BSLZ4_BLOCK, then the
 * rest less its last n % 8) */
static size_t block_elements(size_t n, size_t b)
{
    size_t whole = n / 8 * 8, first = b * NB_BSLZ4_BLOCK;
    return whole - first < NB_BSLZ4_BLOCK ? whole - first : NB_BSLZ4_BLOCK;
}

/* Blocks b0 .. b1-1 of values, one after another into dst: their bytes, or
 * -1 where LZ4 failed */
static long compress_blocks(const nb_bslz4 *z, const uint8_t *values, size_t b0, size_t b1, uint8_t *shuffled,
                            uint8_t *dst)
{
    const int cap = lz4.compress_bound(NB_BSLZ4_BLOCK * 4);
    long at = 0;
    for (size_t b = b0; b < b1; b++) {
        size_t m = block_elements(z->n, b);
        nb_bitshuffle4(values + b * NB_BSLZ4_BLOCK * 4, shuffled, m);
        int c = lz4.compress_default((const char *)shuffled, (char *)dst + at + 4, (int)(m * 4), cap);
        if (c <= 0) return -1;
        put_be(dst + at, (uint64_t)c, 4);
        at += 4 + c;
    }
    return at;
}

/* The next unclaimed run of `frame`, or -1: none left, or a later frame's */
static long claim_run(nb_bslz4 *z, uint32_t frame)
{
    uint64_t c = atomic_load(&z->claim);
    for (;;) {
        if ((uint32_t)(c >> 32) != frame || (c & 0xffffffffu) >= z->runs) return -1;
        if (atomic_compare_exchange_weak(&z->claim, &c, c + 1)) return (long)(c & 0xffffffffu);
    }
}

/* Runs of `frame` compressed until none is left; the last one done wakes the caller */
static void do_runs(nb_bslz4 *z, uint32_t frame, const uint8_t *values, uint8_t *shuffled)
{
    long r;
    while ((r = claim_run(z, frame)) >= 0) {
        size_t b0 = (size_t)r * RUN_BLOCKS, b1 = b0 + RUN_BLOCKS < z->blocks ? b0 + RUN_BLOCKS : z->blocks;
        uint8_t *dst = r == 0 ? z->chunk + 12 : z->later + z->run_cap * (size_t)(r - 1);
        long got = compress_blocks(z, values, b0, b1, shuffled, dst);
        if (got < 0) atomic_store(&z->failed, 1);
        z->len[r] = got < 0 ? 0 : (size_t)got;
        if (atomic_fetch_add(&z->finished, 1) + 1 == z->runs) {
            pthread_mutex_lock(&z->mu);
            pthread_cond_signal(&z->done_cv);
            pthread_mutex_unlock(&z->mu);
        }
    }
}

static void *helper_main(void *arg)
{
    nb_bslz4 *z = arg;
    uint8_t shuffled[NB_BSLZ4_BLOCK * 4];
    uint32_t seen = 0;
    pthread_mutex_lock(&z->mu);
    for (;;) {
        while (!z->quit && z->frame == seen) pthread_cond_wait(&z->start_cv, &z->mu);
        if (z->quit) break;
        seen = z->frame;
        const uint8_t *values = z->values;
        pthread_mutex_unlock(&z->mu);
        do_runs(z, seen, values, shuffled);
        pthread_mutex_lock(&z->mu);
    }
    pthread_mutex_unlock(&z->mu);
    return NULL;
}

nb_status nb_bslz4_new(nb_bslz4 **out, size_t n, int threads)
{
    *out = NULL;
    nb_status st = nb_bslz4_load();
    if (st) return st;
    nb_bslz4 *z = calloc(1, sizeof *z);
    if (!z) return nb_error_set(NB_ERR_NOMEM, "out of memory");
    z->n = n;
    z->blocks = (n / 8 * 8 + NB_BSLZ4_BLOCK - 1) / NB_BSLZ4_BLOCK;
    z->runs = z->blocks ? (z->blocks + RUN_BLOCKS - 1) / RUN_BLOCKS : 1;
    z->run_cap = RUN_BLOCKS * (4 + (size_t)lz4.compress_bound(NB_BSLZ4_BLOCK * 4));
    z->chunk = malloc(12 + z->run_cap + (n % 8) * 4 + (z->runs - 1) * z->run_cap);
    z->later = z->runs > 1 ? malloc(z->run_cap * (z->runs - 1)) : NULL;
    z->shuffled = malloc(NB_BSLZ4_BLOCK * 4);
    z->len = calloc(z->runs, sizeof *z->len);
    size_t want = threads > 1 ? (size_t)threads - 1 : 0;
    if (want > z->runs - 1) want = z->runs - 1;
    z->helper = calloc(want ? want : 1, sizeof *z->helper);
    if (!z->chunk || (z->runs > 1 && !z->later) || !z->shuffled || !z->len || !z->helper ||
        pthread_mutex_init(&z->mu, NULL)) {
        free(z->chunk), free(z->later), free(z->shuffled), free(z->len), free(z->helper), free(z);
        return nb_error_set(NB_ERR_NOMEM, "out of memory for bitshuffle+LZ4 chunks of %zu values", n);
    }
    pthread_cond_init(&z->start_cv, NULL);
    pthread_cond_init(&z->done_cv, NULL);
    /* as many helpers as can be had: with none the caller's thread does it all */
    while ((size_t)z->helpers < want && !pthread_create(&z->helper[z->helpers], NULL, helper_main, z)) z->helpers++;
    *out = z;
    return NB_OK;
}

int nb_bslz4_threads(const nb_bslz4 *z) { return 1 + z->helpers; }

nb_status nb_bslz4_encode(nb_bslz4 *z, const void *values, const void **chunk, size_t *len)
{
    const uint8_t *v = values;
    pthread_mutex_lock(&z->mu);
    uint32_t frame = ++z->frame;
    z->values = v;
    atomic_store(&z->finished, 0);
    atomic_store(&z->failed, 0);
    atomic_store(&z->claim, (uint64_t)frame << 32);
    if (z->helpers) pthread_cond_broadcast(&z->start_cv);
    pthread_mutex_unlock(&z->mu);
    do_runs(z, frame, v, z->shuffled);
    /* the runs the helpers claimed */
    pthread_mutex_lock(&z->mu);
    while (atomic_load(&z->finished) < z->runs) pthread_cond_wait(&z->done_cv, &z->mu);
    pthread_mutex_unlock(&z->mu);
    if (atomic_load(&z->failed)) return nb_error_set(NB_ERR_DATA, "LZ4 could not compress a block");
    /* run 0 is in place: the others after it */
    put_be(z->chunk, (uint64_t)z->n * 4, 8);
    put_be(z->chunk + 8, NB_BSLZ4_BLOCK * 4, 4);
    size_t at = 12 + z->len[0];
    for (size_t r = 1; r < z->runs; r++) {
        memcpy(z->chunk + at, z->later + z->run_cap * (r - 1), z->len[r]);
        at += z->len[r];
    }
    /* the last n % 8 elements, as they are */
    memcpy(z->chunk + at, v + z->n / 8 * 8 * 4, (z->n % 8) * 4);
    *chunk = z->chunk;
    *len = at + (z->n % 8) * 4;
    return NB_OK;
}

void nb_bslz4_free(nb_bslz4 *z)
{
    if (!z) return;
    pthread_mutex_lock(&z->mu);
    z->quit = 1;
    pthread_cond_broadcast(&z->start_cv);
    pthread_mutex_unlock(&z->mu);
    for (int i = 0; i < z->helpers; i++) pthread_join(z->helper[i], NULL);
    pthread_cond_destroy(&z->start_cv), pthread_cond_destroy(&z->done_cv), pthread_mutex_destroy(&z->mu);
    free(z->chunk), free(z->later), free(z->shuffled), free(z->len), free(z->helper);
    free(z);
}
