/* The arithmetic below deliberately mixes float and double exactly where the
 * reference does (its generators return float and keep float state), so that
 * the same seeds give the same deviates. */
#include "nb_rng.h"

#include <math.h>
#include <string.h>

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

/* Park-Miller constants and the shuffle table of Numerical Recipes' ran1 */
#define RNG_IA 16807
#define RNG_IM 2147483647
#define RNG_AM (1.0 / RNG_IM)
#define RNG_IQ 127773
#define RNG_IR 2836
#define RNG_NDIV (1 + (RNG_IM - 1) / NB_RNG_NTAB)
#define RNG_EPS 1.2e-7
#define RNG_RNMX (1.0 - RNG_EPS)

void nb_rng_init(nb_rng *r)
{
    memset(r, 0, sizeof *r);
    r->pd_oldm = -1.0f;
}

/* One Schrage step of the minimal standard generator. */
static int64_t lcg_step(int64_t idum)
{
    int64_t k = idum / RNG_IQ;
    idum = RNG_IA * (idum - k * RNG_IQ) - RNG_IR * k;
    if (idum < 0) idum += RNG_IM;
    return idum;
}

/* ---- Philox4x32-10 ------------------------------------------------------- */

/* one function per instruction set, as nb_image.c's conversions */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define NB_PHILOX_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define NB_PHILOX_CLONES
#endif

/* The ten rounds, a round at a time over up to 256 items (four words each,
 * in L1): each round mixes the products' high and low words with the other
 * words and the key, which is then bumped by Weyl constants (the golden
 * ratio and sqrt(3) - 1); the items' rounds run side by side in vector lanes */
NB_PHILOX_CLONES void nb_philox_blocks(int64_t key, uint32_t stream, uint32_t block, uint64_t index0, size_t n,
                                       uint32_t *const words[4])
{
    enum { CHUNK = 256 };
    const uint64_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u;
    for (size_t at = 0; at < n; at += CHUNK) {
        const size_t m = n - at < CHUNK ? n - at : CHUNK;
        uint32_t *c0 = words[0] + at, *c1 = words[1] + at, *c2 = words[2] + at, *c3 = words[3] + at;
        for (size_t k = 0; k < m; k++) {
            const uint64_t index = index0 + at + k;
            c0[k] = (uint32_t)index, c1[k] = (uint32_t)(index >> 32), c2[k] = stream, c3[k] = block;
        }
        uint32_t k0 = (uint32_t)(uint64_t)key, k1 = (uint32_t)((uint64_t)key >> 32);
        for (int round = 0; round < 10; round++) {
#pragma omp simd
            for (size_t k = 0; k < m; k++) {
                const uint64_t p0 = M0 * c0[k], p1 = M1 * c2[k];
                const uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1[k] ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3[k] ^ k1;
                c0[k] = n0, c1[k] = (uint32_t)p1, c2[k] = n2, c3[k] = (uint32_t)p0;
            }
            k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
        }
    }
}

void nb_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4])
{
    uint32_t *const words[4] = {&out[0], &out[1], &out[2], &out[3]};
    nb_philox_blocks((int64_t)((uint64_t)key[1] << 32 | key[0]), ctr[2], ctr[3], (uint64_t)ctr[1] << 32 | ctr[0], 1,
                     words);
}

void nb_rng_counter_at(nb_rng *r, int64_t key, uint32_t stream, uint64_t index)
{
    nb_rng_counter_at_block(r, key, stream, index, NULL);
}

/* The next uniform of counter mode: 23 bits, centred in their interval */
static float counter_uniform(nb_rng *r)
{
    if (r->used == 4) {
        nb_philox4x32_10(r->ctr, r->key, r->block);
        r->ctr[3]++;
        r->used = 0;
    }
    return ((float)(r->block[r->used++] >> 9) + 0.5f) * (1.0f / 8388608.0f);
}

/* ---- the reference's generators -------------------------------------------- */

float nb_ran1(nb_rng *r, int64_t *idum)
{
    if (r->counter_mode) return counter_uniform(r);
    if (*idum <= 0 || !r->iy) {
        /* (re)load the shuffle table; a non-positive or fresh seed of 0 becomes 1 */
        if (-(*idum) < 1) *idum = 1;
        else *idum = -(*idum);
        for (int j = NB_RNG_NTAB + 7; j >= 0; j--) {
            *idum = lcg_step(*idum);
            if (j < NB_RNG_NTAB) r->iv[j] = *idum;
        }
        r->iy = r->iv[0];
    }
    *idum = lcg_step(*idum);
    int j = (int)(r->iy / RNG_NDIV);
    r->iy = r->iv[j];
    r->iv[j] = *idum;
    float temp = (float)(RNG_AM * (double)r->iy);
    if (temp > RNG_RNMX) return (float)RNG_RNMX;
    return temp;
}

float nb_gaussdev(nb_rng *r, int64_t *idum)
{
    float v1, v2, rsq, fac;
    if (r->have_spare) {
        r->have_spare = 0;
        return r->spare;
    }
    /* polar Box-Muller: a point uniform in the unit disc */
    do {
        v1 = (float)(2.0 * nb_ran1(r, idum) - 1.0);
        v2 = (float)(2.0 * nb_ran1(r, idum) - 1.0);
        rsq = v1 * v1 + v2 * v2;
    } while (rsq >= 1.0f || rsq == 0.0f);
    fac = (float)sqrt(-2.0 * log(rsq) / rsq);
    r->spare = v1 * fac;
    r->have_spare = 1;
    return v2 * fac;
}

float nb_gammln(float xx)
{
    static const double cof[6] = {76.18009172947146,     -86.50532032941677,    24.01409824083091,
                                  -1.231739572450155,    0.1208650973866179e-2, -0.5395239384953e-5};
    double x = xx, y = xx;
    double tmp = x + 5.5;
    tmp -= (x + 0.5) * log(tmp);
    double ser = 1.000000000190015;
    for (int j = 0; j <= 5; ++j) ser += cof[j] / ++y;
    return (float)(-tmp + log(2.5066282746310005 * ser / x));
}

float nb_poidev(nb_rng *r, float xm, int64_t *idum)
{
    float em, t, y;
    /* beyond a million the rejection method is slow: use the normal limit */
    if (xm > 1.0e6) return (float)(xm + sqrt(xm) * nb_gaussdev(r, idum));
    if (xm < 12.0) {
        /* multiply uniforms until the product drops below exp(-mean) */
        if (xm != r->pd_oldm) {
            r->pd_oldm = xm;
            r->pd_g = (float)exp(-xm);
        }
        em = -1;
        t = 1.0f;
        do {
            ++em;
            t *= nb_ran1(r, idum);
        } while (t > r->pd_g);
    } else {
        /* rejection from a Lorentzian comparison function */
        if (xm != r->pd_oldm) {
            r->pd_oldm = xm;
            r->pd_sq = (float)sqrt(2.0 * xm);
            r->pd_alxm = (float)log(xm);
            r->pd_g = xm * r->pd_alxm - nb_gammln((float)(xm + 1.0));
        }
        do {
            do {
                y = (float)tan(M_PI * nb_ran1(r, idum));
                em = r->pd_sq * y + xm;
            } while (em < 0.0f);
            em = (float)floor(em);
            t = (float)(0.9 * (1.0 + y * y) *
                        exp(em * r->pd_alxm - nb_gammln((float)(em + 1.0)) - r->pd_g));
        } while (nb_ran1(r, idum) > t);
    }
    return em;
}

void nb_mosaic_rotation_umat(nb_rng *r, float mosaicity, double umat[9], int64_t *idum)
{
    double r1 = (double)2.0 * nb_ran1(r, idum) - 1.0;
    double r2 = (double)2.0 * nb_ran1(r, idum) - 1.0;
    double r3 = (double)2.0 * nb_ran1(r, idum) - 1.0;
    double xyrad = sqrt(1.0 - r2 * r2);
    /* the reference computes the angle in single precision */
    double rot = mosaicity * powf((float)(1.0 - r3 * r3), (float)(1.0 / 3.0));
    double v1 = xyrad * sin(M_PI * r1);
    double v2 = xyrad * cos(M_PI * r1);
    double v3 = r2;
    /* axis-angle to matrix: cos(rot) I + (1 - cos rot) v v^T + sin(rot) [v]x */
    double c = cos(rot), one_c = 1.0 - c, s = sin(rot);
    double cv1 = one_c * v1;
    double cv1v2 = cv1 * v2, cv1v3 = cv1 * v3, cv2v3 = one_c * v2 * v3;
    umat[0] = c + one_c * (v1 * v1);
    umat[1] = cv1v2 - s * v3;
    umat[2] = cv1v3 + s * v2;
    umat[3] = cv1v2 + s * v3;
    umat[4] = c + one_c * (v2 * v2);
    umat[5] = cv2v3 - s * v1;
    umat[6] = cv1v3 - s * v2;
    umat[7] = cv2v3 + s * v1;
    umat[8] = c + one_c * (v3 * v3);
}

static void normalize3(double *x, double *y, double *z)
{
    double m = sqrt(*x * *x + *y * *y + *z * *z);
    if (m > 0) {
        *x /= m;
        *y /= m;
        *z /= m;
    }
}

void nb_umat2misset(const double U[9], double missets[3])
{
    double m[3][3];
    double mag[3];
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 3; j++) m[i][j] = U[3 * i + j];
        mag[i] = sqrt(m[i][0] * m[i][0] + m[i][1] * m[i][1] + m[i][2] * m[i][2]);
        if (mag[i] > 0)
            for (int j = 0; j < 3; j++) m[i][j] /= mag[i];
    }
    /* rows that were empty are replaced by identity rows, then by the cross
     * product of the other two (twice, as the reference does) */
    if (mag[0] >= 0 && mag[1] <= 0 && mag[2] <= 0) {
        m[1][0] = 0, m[1][1] = 1, m[1][2] = 0;
        m[2][0] = 0, m[2][1] = 0, m[2][2] = 1;
    }
    if (mag[0] <= 0 && mag[1] >= 0 && mag[2] <= 0) {
        m[0][0] = 1, m[0][1] = 0, m[0][2] = 0;
        m[2][0] = 0, m[2][1] = 0, m[2][2] = 1;
    }
    if (mag[0] <= 0 && mag[1] <= 0 && mag[2] >= 0) {
        m[0][0] = 1, m[0][1] = 0, m[0][2] = 0;
        m[1][0] = 0, m[1][1] = 1, m[1][2] = 0;
    }
    for (int pass = 0; pass < 2; pass++) {
        double xcy[3], ycz[3], zcx[3];
        xcy[0] = m[0][1] * m[1][2] - m[0][2] * m[1][1];
        xcy[1] = m[0][2] * m[1][0] - m[0][0] * m[1][2];
        xcy[2] = m[0][0] * m[1][1] - m[0][1] * m[1][0];
        normalize3(&xcy[0], &xcy[1], &xcy[2]);
        ycz[0] = m[1][1] * m[2][2] - m[1][2] * m[2][1];
        ycz[1] = m[1][2] * m[2][0] - m[1][0] * m[2][2];
        ycz[2] = m[1][0] * m[2][1] - m[1][1] * m[2][0];
        normalize3(&ycz[0], &ycz[1], &ycz[2]);
        zcx[0] = m[2][1] * m[0][2] - m[2][2] * m[0][1];
        zcx[1] = m[2][2] * m[0][0] - m[2][0] * m[0][2];
        zcx[2] = m[2][0] * m[0][1] - m[2][1] * m[0][0];
        normalize3(&zcx[0], &zcx[1], &zcx[2]);
        if (mag[0] <= 0) memcpy(m[0], ycz, sizeof ycz);
        if (mag[1] <= 0) memcpy(m[1], zcx, sizeof zcx);
        if (mag[2] <= 0) memcpy(m[2], xcy, sizeof xcy);
    }
    for (int i = 0; i < 3; i++) normalize3(&m[i][0], &m[i][1], &m[i][2]);

    if (m[2][0] * m[2][0] < 1.0) {
        missets[0] = atan2(m[2][1], m[2][2]);
        missets[1] = atan2(-m[2][0], sqrt(m[2][1] * m[2][1] + m[2][2] * m[2][2]));
        missets[2] = atan2(m[1][0], m[0][0]);
    } else {
        missets[0] = atan2(1, 1) * 4;
        missets[1] = atan2(1, 1) * 2;
        missets[2] = atan2(m[0][1], -m[1][1]);
    }
}

int64_t nb_frame_seed(int64_t seed, long frame)
{
    if (frame == 0) return seed;
    /* splitmix64 of (seed, frame), folded into the generator's range and
     * negated so the shuffle table is re-initialised for every frame */
    uint64_t z = (uint64_t)seed * 0x9E3779B97F4A7C15ull + (uint64_t)frame * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return -(int64_t)(1 + z % (uint64_t)(RNG_IM - 2));
}
