/* nb_deviates.h - the counter-based generator and its deviates, written once
 * for the host and a CUDA device.
 *
 * Philox4x32-10 (Salmon, Moraes, Dror and Shaw, SC 2011, as in Random123):
 * ten rounds of a keyed bijection on a 128-bit counter, so that any draw is a
 * pure function of (key, counter) and the pixels of an image can be counted
 * in any order, on any number of threads or on a GPU, with the same result.
 * An nb_ctr_rng walks one item's stream: counter (index low, index high,
 * stream, block), four uniforms a block, (u >> 9 + 1/2) / 2^23 each, in (0, 1)
 * exactly in single precision.  Its Gaussian and Poisson deviates are the
 * reference's algorithms (nb_deviates.inc), the same code as nb_rng.h's on
 * the reference's generator.  nb_noise_pixel.inc counts a pixel with them. */
#ifndef NB_DEVIATES_H
#define NB_DEVIATES_H

#include <math.h>
#include <stdint.h>

#include "nb_hd.h"

typedef struct nb_ctr_rng {
    uint32_t key[2], ctr[4], block[4];
    int used; /* words of block taken */
    /* the deviates' caches (nb_deviates.inc) */
    int have_spare;
    float spare;
    float pd_oldm, pd_sq, pd_alxm, pd_g;
} nb_ctr_rng;

/* Block ctr of key (k0, k1): each round mixes the products' high and low
 * words with the other words and the key, which is then bumped by Weyl
 * constants (the golden ratio and sqrt(3) - 1).  nb_philox_blocks (nb_rng.h)
 * is the same arithmetic over many items in vector lanes. */
NB_HD void nb_philox_block(const uint32_t ctr[4], uint32_t k0, uint32_t k1, uint32_t out[4])
{
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    for (int round = 0; round < 10; round++) {
        const uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
        const uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c0 = n0, c1 = (uint32_t)p1, c2 = n2, c3 = (uint32_t)p0;
        k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
    }
    out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

/* A fresh state: nothing drawn, no deviate cached */
NB_HD void nb_ctr_init(nb_ctr_rng *r)
{
    r->key[0] = r->key[1] = 0;
    r->ctr[0] = r->ctr[1] = r->ctr[2] = r->ctr[3] = 0;
    r->used = 4;
    r->have_spare = 0;
    r->spare = 0.0f;
    r->pd_oldm = -1.0f, r->pd_sq = r->pd_alxm = r->pd_g = 0.0f;
}

/* r to the start of stream `stream` of item `index` (a pixel) under `key` (a
 * seed), its block 0 given (NULL: made at the first draw).  gaussdev's spare
 * deviate is dropped, so an item's deviates depend on nothing drawn before;
 * poidev's cache, a function of the mean alone, is kept. */
NB_HD void nb_ctr_at(nb_ctr_rng *r, int64_t key, uint32_t stream, uint64_t index, const uint32_t *block0)
{
    r->key[0] = (uint32_t)(uint64_t)key, r->key[1] = (uint32_t)((uint64_t)key >> 32);
    r->ctr[0] = (uint32_t)index, r->ctr[1] = (uint32_t)(index >> 32), r->ctr[2] = stream;
    r->have_spare = 0;
    if (!block0) {
        r->ctr[3] = 0, r->used = 4; /* the first draw makes block 0 */
        return;
    }
    r->block[0] = block0[0], r->block[1] = block0[1], r->block[2] = block0[2], r->block[3] = block0[3];
    r->ctr[3] = 1, r->used = 0; /* block 1 next */
}

/* The next uniform: 23 bits, centred in their interval.  The word is picked
 * by comparisons, not by an index, so that on a GPU the state can stay in
 * registers (an indexed array goes to local memory). */
NB_HD float nb_ctr_uniform(nb_ctr_rng *r)
{
    if (r->used == 4) {
        nb_philox_block(r->ctr, r->key[0], r->key[1], r->block);
        r->ctr[3]++;
        r->used = 0;
    }
    const int k = r->used++;
    const uint32_t w = k == 0 ? r->block[0] : k == 1 ? r->block[1] : k == 2 ? r->block[2] : r->block[3];
    return ((float)(w >> 9) + 0.5f) * (1.0f / 8388608.0f);
}

/* ln Gamma(xx) for xx > 0 (Lanczos, as Numerical Recipes' gammln), the
 * coefficients' terms summed in their order */
NB_HD float nb_dv_gammln(float xx)
{
    double x = xx, y = xx;
    double tmp = x + 5.5;
    tmp -= (x + 0.5) * log(tmp);
    double ser = 1.000000000190015;
    ser += 76.18009172947146 / ++y;
    ser += -86.50532032941677 / ++y;
    ser += 24.01409824083091 / ++y;
    ser += -1.231739572450155 / ++y;
    ser += 0.1208650973866179e-2 / ++y;
    ser += -0.5395239384953e-5 / ++y;
    return (float)(-tmp + log(2.5066282746310005 * ser / x));
}

#define DV_FN(name) nb_ctr_##name
#define DV_QUAL NB_HD
#define DV_STATE nb_ctr_rng
#define DV_SEED_PARAM
#define DV_SEED_ARG
#define DV_UNIFORM(r) nb_ctr_uniform(r)
#include "nb_deviates.inc"

#endif
