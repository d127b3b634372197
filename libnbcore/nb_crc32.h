/* nb_crc32.h - the stream's CRC-32 (zlib's polynomial and conventions). */
#ifndef NB_CRC32_H
#define NB_CRC32_H

#include <stdint.h>

/* crc32(crc, data, n) as zlib computes it (start from 0), with PCLMULQDQ
 * folding on CPUs that have it (and VPCLMULQDQ with AVX-512 unless NB_SIMD
 * asks for avx2 or generic). */
uint32_t nb_crc32_update(uint32_t crc, const void *data, uint64_t n);
/* crc32(A || B) from crc32(A), crc32(B) and B's length, in two steps for many
 * B of one length (the rows of an image): op = nb_crc32_combine_gen(len_B)
 * once, then nb_crc32_combine_op(crc_A, crc_B, op) for each. */
uint32_t nb_crc32_combine_gen(uint64_t len2);
uint32_t nb_crc32_combine_op(uint32_t crc1, uint32_t crc2, uint32_t op);
/* 0: zlib's tables; 1: carry-less multiply; 2: that 512 bits wide too. */
int nb_crc32_accelerated(void);

#endif
