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
} nb_rng;

void nb_rng_init(nb_rng *r);                /* the program-start state */
float nb_ran1(nb_rng *r, int64_t *idum);     /* uniform deviate in (0, 1) */
float nb_gaussdev(nb_rng *r, int64_t *idum); /* unit normal deviate */
float nb_poidev(nb_rng *r, float xm, int64_t *idum);
float nb_gammln(float xx);

/* ---- the counter-based generator (an nb extension) --------------------------
 * Philox4x32-10: nb_deviates.h has the generator and its deviates for the
 * host and a CUDA device; these are its known-answer form and its vector
 * form. */
void nb_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);
/* Block `block` of items index0 .. index0 + n - 1 of a stream, word j of
 * item k in words[j][k]: many items' four uniforms' words at once (the rounds
 * run side by side in vector lanes, where one item's block alone costs ~40
 * cycles), as nb_philox_block makes them one at a time */
void nb_philox_blocks(int64_t key, uint32_t stream, uint32_t block, uint64_t index0, size_t n,
                      uint32_t *const words[4]);

/* Random rotation inside a spherical cap of the given (single-precision, as in
 * the reference) angular size: consumes three uniforms. */
void nb_mosaic_rotation_umat(nb_rng *r, float mosaicity, double umat[9], int64_t *idum);
/* The same domain at another spread: a rotation's angle times ratio, about
 * the same axis (the domains' angles are proportional to the spread, so these
 * are the draws at spread x ratio without drawing again; ratio 1 gives U). */
void nb_mosaic_umat_rescale(const double U[9], double ratio, double out[9]);
/* Rotation matrix to the x, y, z missetting angles (radians). */
void nb_umat2misset(const double umat[9], double missets[3]);

/* Per-frame seed derived from (seed, frame index): frame 0 keeps the seed, so
 * a single image matches the reference; later frames get decorrelated seeds. */
int64_t nb_frame_seed(int64_t seed, long frame);

#endif
