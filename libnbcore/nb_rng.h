/* nb_rng.h - the reference's random generators, reproducing its sequences.
 *
 * nanoBragg uses Numerical Recipes' ran1 (Park-Miller minimal standard with a
 * Bays-Durham shuffle) whose shuffle table is a static shared by every stream
 * (misset, mosaic, noise).  Here that shared state is explicit: an nb_rng
 * holds the table and the spare Gaussian deviate, and every draw names the
 * seed variable it advances, exactly like the reference's `long *idum`.
 *
 * Seeds follow the reference: a negative value re-initialises the table on the
 * next draw; the command-line seeds are stored negated for that reason.
 */
#ifndef NB_RNG_H
#define NB_RNG_H

#include <stddef.h>
#include <stdint.h>

#define NB_RNG_NTAB 32

typedef struct nb_rng {
    int64_t iy;
    int64_t iv[NB_RNG_NTAB];
    /* gaussdev's spare deviate */
    int have_spare;
    float spare;
    /* poidev's caches, keyed on the previous mean */
    float pd_oldm, pd_sq, pd_alxm, pd_g;
    /* counter mode (nb_rng_counter_at): nb_ran1 takes its uniforms from
     * Philox4x32-10 at (key, counter) instead, ignoring its seed argument */
    int counter_mode;
    uint32_t key[2], ctr[4], block[4];
    int used; /* words of block taken */
} nb_rng;

void nb_rng_init(nb_rng *r);                /* the program-start state */
float nb_ran1(nb_rng *r, int64_t *idum);     /* uniform deviate in (0, 1) */
float nb_gaussdev(nb_rng *r, int64_t *idum); /* unit normal deviate */
float nb_poidev(nb_rng *r, float xm, int64_t *idum);
float nb_gammln(float xx);

/* ---- the counter-based generator (an nb extension) --------------------------
 * Philox4x32-10 (Salmon, Moraes, Dror and Shaw, SC 2011, as in Random123):
 * ten rounds of a keyed bijection on a 128-bit counter.  Any draw is a pure
 * function of (key, counter), so the pixels of an image can be counted in
 * any order, on any number of threads or on a GPU, with the same result. */
void nb_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);
/* Put r in counter mode at the start of stream `stream` of item `index`
 * (a pixel) under `key` (a seed): counter (index low, index high, stream,
 * block), four uniforms a block, (u >> 9 + 1/2) / 2^23 each, in (0, 1)
 * exactly in single precision.  gaussdev's spare deviate is dropped, so an
 * item's deviates depend on nothing drawn before. */
void nb_rng_counter_at(nb_rng *r, int64_t key, uint32_t stream, uint64_t index);
/* Block `block` of items index0 .. index0 + n - 1 of a stream, word j of
 * item k in words[j][k]: many items' four uniforms' words at once (the rounds
 * run side by side in vector lanes, where one item's block alone costs ~40
 * cycles); nb_philox4x32_10 is the one-item case */
void nb_philox_blocks(int64_t key, uint32_t stream, uint32_t block, uint64_t index0, size_t n,
                      uint32_t *const words[4]);
/* nb_rng_counter_at, with the item's block 0 given (nb_philox_blocks;
 * NULL: made at the first draw); inline, for it is called for every pixel */
static inline void nb_rng_counter_at_block(nb_rng *r, int64_t key, uint32_t stream, uint64_t index,
                                           const uint32_t block0[4])
{
    r->counter_mode = 1;
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

/* Random rotation inside a spherical cap of the given (single-precision, as in
 * the reference) angular size: consumes three uniforms. */
void nb_mosaic_rotation_umat(nb_rng *r, float mosaicity, double umat[9], int64_t *idum);
/* Rotation matrix to the x, y, z missetting angles (radians). */
void nb_umat2misset(const double umat[9], double missets[3]);

/* Per-frame seed derived from (seed, frame index): frame 0 keeps the seed, so
 * a single image matches the reference; later frames get decorrelated seeds. */
int64_t nb_frame_seed(int64_t seed, long frame);

#endif
