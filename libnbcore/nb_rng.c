/* The arithmetic below deliberately mixes float and double exactly where the
 * reference does (its generators return float and keep float state), so that
 * the same seeds give the same deviates. */
#include "nb_rng.h"

#include "nb_deviates.h"

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
    nb_philox_block(ctr, key[0], key[1], out);
}

/* ---- the reference's generators -------------------------------------------- */

float nb_ran1(nb_rng *r, int64_t *idum)
{
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

/* gasdev and poidev on ran1: the reference's deviates */
#define DV_FN(name) nb_##name
#define DV_QUAL
#define DV_STATE nb_rng
#define DV_SEED_PARAM , int64_t *idum
#define DV_SEED_ARG , idum
#define DV_UNIFORM(r) nb_ran1(r, idum)
#include "nb_deviates.inc"

float nb_gammln(float xx) { return nb_dv_gammln(xx); }

/* The rotation by rot about the unit axis (v1, v2, v3), row-major: cos(rot) I
 * + (1 - cos rot) v v^T + sin(rot) [v]x, in the reference's order of
 * operations (its domains' matrices are these bit for bit). */
static void axis_angle_umat(double v1, double v2, double v3, double rot, double umat[9])
{
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
    axis_angle_umat(v1, v2, v3, rot, umat);
}

void nb_mosaic_umat_rescale(const double U[9], double ratio, double out[9])
{
    /* sin(rot) v from the antisymmetric part, cos(rot) from the trace: the
     * angle to the last bit at the small angles of a mosaic spread */
    double v[3] = {0.5 * (U[7] - U[5]), 0.5 * (U[2] - U[6]), 0.5 * (U[3] - U[1])};
    const double sin_rot = sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
    const double cos_rot = 0.5 * (U[0] + U[4] + U[8] - 1.0);
    if (ratio == 1.0 || (sin_rot == 0.0 && cos_rot > 0.0)) { /* unmoved, or no turn (domain 0) */
        memcpy(out, U, 9 * sizeof *out);
        return;
    }
    if (cos_rot >= 0.0) {
        for (int k = 0; k < 3; k++) v[k] /= sin_rot;
    } else {
        /* past a quarter turn sin(rot) loses the axis: (U + U^T) / 2 - cos I
         * = (1 - cos) v v^T, its largest diagonal's column, signed as sin v */
        const double one_c = 1.0 - cos_rot;
        int j = 0;
        for (int k = 1; k < 3; k++)
            if (U[4 * k] > U[4 * j]) j = k;
        const double vj = sqrt(fmax((U[4 * j] - cos_rot) / one_c, 0.0));
        double axis[3];
        for (int k = 0; k < 3; k++) axis[k] = k == j ? vj : 0.5 * (U[3 * k + j] + U[3 * j + k]) / (one_c * vj);
        const double sign = axis[0] * v[0] + axis[1] * v[1] + axis[2] * v[2] < 0.0 ? -1.0 : 1.0;
        for (int k = 0; k < 3; k++) v[k] = sign * axis[k];
    }
    axis_angle_umat(v[0], v[1], v[2], atan2(sin_rot, cos_rot) * ratio, out);
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
