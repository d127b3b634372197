/* nb_crc32.h - the stream's CRC-32 (zlib's polynomial and conventions). */
#ifndef NB_CRC32_H
#define NB_CRC32_H

#include <stdint.h>

/* crc32(crc, data, n) as zlib computes it (start from 0), with PCLMULQDQ
 * folding on CPUs that have it. */
uint32_t nb_crc32_update(uint32_t crc, const void *data, uint64_t n);
/* 1 when the carry-less multiply path is in use on this CPU. */
int nb_crc32_accelerated(void);

#endif
