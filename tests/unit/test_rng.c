/* test_rng.c - the random generators must reproduce the reference program's
 * sequences exactly.  The expected numbers below were produced by compiling
 * the reference's own ran1/gaussdev/poidev/gammln/mosaic_rotation_umat/
 * umat2misset (gcc -O2, x86-64) in a scratch directory and printing the
 * values ("%.9g" for floats, "%.17g" for doubles); only the numbers are
 * copied here.  Each scenario ran in a fresh process, i.e. with the
 * reference's statics (shuffle table, spare deviate, poidev caches) at their
 * program-start values - here a fresh nb_rng. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "nb_deviates.h"
#include "nb_noise.h"
#include "nb_rng.h"
#include "tap.h"

#ifdef _OPENMP
#include <omp.h>
#endif
#include <stdlib.h>

#define RTD (180.0 * M_1_PI)

/* exact float comparison; prints the first mismatch */
static int same_floats(const float *got, const float *want, int n, const char *what)
{
    for (int i = 0; i < n; i++)
        if (memcmp(&got[i], &want[i], sizeof(float)) != 0) {
            printf("# %s[%d]: got %.9g, want %.9g\n", what, i, got[i], want[i]);
            return 0;
        }
    return 1;
}

static int same_doubles(const double *got, const double *want, int n, const char *what)
{
    for (int i = 0; i < n; i++)
        if (got[i] != want[i]) {
            printf("# %s[%d]: got %.17g, want %.17g\n", what, i, got[i], want[i]);
            return 0;
        }
    return 1;
}

static void test_ran1(void)
{
    static const struct {
        int64_t seed;
        float v[6];
        int64_t idum;
    } cases[] = {
        {-1, {0.415999353f, 0.091964893f, 0.75641048f, 0.52970022f, 0.930436492f, 0.383502066f}, 156091745},
        {-12345678, {0.765989304f, 0.023453664f, 0.589726627f, 0.535101593f, 0.982231438f, 0.693016112f}, 1086690778},
        {-123, {0.170755535f, 0.538071811f, 0.444127083f, 0.812239647f, 0.575781107f, 0.473043621f}, 2019415459},
        {-2147483646,
         {0.933157742f, 0.616497934f, 0.582514048f, 0.313227296f, 0.298809409f, 0.0896791667f},
         1991391902},
        {0, {0.415999353f, 0.091964893f, 0.75641048f, 0.52970022f, 0.930436492f, 0.383502066f}, 156091745},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        nb_rng r;
        nb_rng_init(&r);
        int64_t idum = cases[c].seed;
        float got[6];
        for (int i = 0; i < 6; i++) got[i] = nb_ran1(&r, &idum);
        ok(same_floats(got, cases[c].v, 6, "ran1"), "ran1 seed %lld: first 6 deviates", (long long)cases[c].seed);
        ok(idum == cases[c].idum, "ran1 seed %lld: seed variable afterwards %lld", (long long)cases[c].seed,
           (long long)idum);
    }

    /* a negative seed re-initialises a used table: same sequence as fresh */
    {
        nb_rng r;
        nb_rng_init(&r);
        int64_t other = -999;
        for (int i = 0; i < 17; i++) nb_ran1(&r, &other);
        int64_t idum = -12345678;
        float got[6];
        for (int i = 0; i < 6; i++) got[i] = nb_ran1(&r, &idum);
        ok(same_floats(got, cases[1].v, 6, "ran1"), "a negative seed re-initialises a used table");
    }

    /* a positive seed on a fresh table is replaced by 1 (the reference's
     * "-(*idum) < 1" test), giving the seed -1 sequence */
    {
        nb_rng r;
        nb_rng_init(&r);
        int64_t idum = 5;
        float got[6];
        for (int i = 0; i < 6; i++) got[i] = nb_ran1(&r, &idum);
        ok(same_floats(got, cases[0].v, 6, "ran1"), "positive seed 5 on a fresh table gives the seed -1 sequence");
        ok(idum == 156091745, "... and leaves the same seed variable");
    }

    /* shared table: a positive seed continues on the table another stream
     * filled (three draws from seed -1, then seed 987654, then seed -1's
     * variable again) */
    {
        nb_rng r;
        nb_rng_init(&r);
        int64_t a = -1, b = 987654;
        for (int i = 0; i < 3; i++) nb_ran1(&r, &a);
        const float want_b[5] = {0.52970022f, 0.930436492f, 0.383502066f, 0.653918982f, 0.0668422356f};
        const float want_a[3] = {0.722660422f, 0.671149373f, 0.383415639f};
        float got[5];
        for (int i = 0; i < 5; i++) got[i] = nb_ran1(&r, &b);
        ok(same_floats(got, want_b, 5, "shared b"), "a positive seed draws from the shared table");
        ok(b == 1488418937, "its seed variable advances: %lld", (long long)b);
        for (int i = 0; i < 3; i++) got[i] = nb_ran1(&r, &a);
        ok(same_floats(got, want_a, 3, "shared a"), "the first stream continues on the shared table");
        ok(a == 156091745, "the first stream's seed variable: %lld", (long long)a);
    }

    /* a long run */
    {
        nb_rng r;
        nb_rng_init(&r);
        int64_t idum = -12345678;
        float v = 0, v500 = 0;
        int in_range = 1;
        for (int i = 1; i <= 1000; i++) {
            v = nb_ran1(&r, &idum);
            if (!(v > 0.0f && v < 1.0f)) in_range = 0;
            if (i == 500) v500 = v;
        }
        ok(v500 == 0.835846961f, "ran1 seed -12345678: 500th deviate %.9g", v500);
        ok(v == 0.450274765f, "ran1 seed -12345678: 1000th deviate %.9g", v);
        ok(idum == 206479895, "ran1 seed -12345678: seed variable after 1000 draws %lld", (long long)idum);
        ok(in_range, "all 1000 deviates lie in (0, 1)");
    }
}

static void test_gaussdev(void)
{
    nb_rng r;
    nb_rng_init(&r);
    int64_t idum = -7;
    const float want[8] = {-0.19157204f, -1.01012123f, -0.481914014f, 2.15787578f,
                           -0.329030216f, 0.13902913f, 0.177549139f, 0.420755178f};
    float got[8];
    for (int i = 0; i < 8; i++) got[i] = nb_gaussdev(&r, &idum);
    ok(same_floats(got, want, 8, "gaussdev"), "gaussdev seed -7: 4 pairs");
    ok(idum == 414356755, "gaussdev seed -7: seed variable %lld", (long long)idum);

    nb_rng_init(&r);
    idum = -12345678;
    const float want2[5] = {0.935000956f, 2.39004779f, -1.21236098f, -1.01952314f, 0.289932609f};
    for (int i = 0; i < 5; i++) got[i] = nb_gaussdev(&r, &idum);
    ok(same_floats(got, want2, 5, "gaussdev"), "gaussdev seed -12345678: 5 deviates (a spare left over)");
    ok(idum == 1481110328, "gaussdev seed -12345678: seed variable %lld", (long long)idum);
    ok(r.have_spare == 1, "the sixth deviate is kept as the spare");
}

static void test_gammln(void)
{
    const float xs[8] = {0.5f, 1, 1.5f, 2, 3.7f, 10, 100.5f, 1e6f};
    const float want[8] = {0.572364926f, 0.0f,        -0.120782241f, -4.4408921e-16f,
                           1.42807233f,  12.8018274f, 361.435547f,   12815505.0f};
    float got[8];
    for (int i = 0; i < 8; i++) got[i] = nb_gammln(xs[i]);
    ok(same_floats(got, want, 8, "gammln"), "gammln at 0.5 1 1.5 2 3.7 10 100.5 1e6 matches bit for bit");
    near(nb_gammln(5.0f), log(24.0), 1e-6, "gammln(5) = ln 4!");
}

static void test_poidev(void)
{
    static const struct {
        float xm;
        int64_t seed;
        float v[6];
        int64_t idum;
    } cases[] = {
        {0.5f, -1, {0, 0, 1, 1, 1, 1}, 937186357},
        {0.5f, -987, {1, 0, 0, 0, 0, 1}, 442243986},
        {5, -1, {5, 5, 8, 5, 6, 6}, 1777724115},
        {5, -987, {4, 6, 5, 5, 7, 12}, 2061410447},
        {11.9f, -1, {15, 14, 12, 13, 16, 11}, 2014119113},
        {11.9f, -987, {11, 13, 20, 11, 15, 9}, 1131507043},
        {12, -1, {7, 10, 10, 13, 10, 9}, 1075260298},
        {12, -987, {9, 20, 9, 8, 9, 19}, 2119039857},
        {50, -1, {40, 47, 46, 52, 46, 44}, 1075260298},
        {50, -987, {44, 68, 54, 41, 65, 56}, 1245901540},
        {1000, -1, {957, 990, 914, 983, 1010, 985}, 685118024},
        {1000, -987, {976, 1081, 1018, 962, 1006, 995}, 1916848490},
        {2e6f, -1, {1998816.5f, 1999756.38f, 2000264.62f, 2002284.62f, 1999750.0f, 2000923.62f}, 156091745},
        {2e6f, -987, {1999623.25f, 2000385.12f, 1996988.0f, 2000242.62f, 2000193.5f, 1998934.5f}, 1591213378},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        nb_rng r;
        nb_rng_init(&r);
        int64_t idum = cases[c].seed;
        float got[6];
        for (int i = 0; i < 6; i++) got[i] = nb_poidev(&r, cases[c].xm, &idum);
        ok(same_floats(got, cases[c].v, 6, "poidev"), "poidev mean %g seed %lld: 6 deviates", cases[c].xm,
           (long long)cases[c].seed);
        ok(idum == cases[c].idum, "poidev mean %g seed %lld: seed variable %lld", cases[c].xm,
           (long long)cases[c].seed, (long long)idum);
    }

    /* mean 0 returns 0 and consumes exactly one uniform */
    {
        nb_rng r;
        nb_rng_init(&r);
        int64_t idum = -42;
        float p = nb_poidev(&r, 0.0f, &idum);
        float next = nb_ran1(&r, &idum);
        ok(p == 0.0f, "poidev(0) = 0");
        ok(next == 0.539009392f && idum == 573618697, "poidev(0) consumed exactly one uniform (next %.9g)", next);
    }

    /* a mixed sequence: the caches keyed on the previous mean, the Gaussian
     * limit above 1e6 and its spare deviate */
    {
        const float means[14] = {5, 50, 5, 0.5f, 50, 12, 2e6f, 3, 1000, 11.9f, 0, 2e6f, 2e6f, 50};
        const float want[14] = {1,  59, 4, 1, 49, 4, 1999176.88f, 4, 977, 9, 0, 2002878.5f,
                                2000264.12f, 50};
        nb_rng r;
        nb_rng_init(&r);
        int64_t idum = -424242;
        float got[14];
        for (int i = 0; i < 14; i++) got[i] = nb_poidev(&r, means[i], &idum);
        ok(same_floats(got, want, 14, "poidev mix"), "poidev over 14 mixed means matches the reference");
        ok(idum == 218552238, "poidev mix: seed variable %lld", (long long)idum);
    }
}

static void test_mosaic(void)
{
    /* 0.5 degree mosaic spread, seed -12345678 (the default mosaic seed),
     * four domains in a row; with umat2misset of each matrix */
    static const double want_u[4][9] = {
        {0.99996612375044724, 0.0082266013279829672, -0.00027273081166300314, -0.0082272825073718553,
         0.99996277932151434, -0.002598421470118665, 0.00025134448292042335, 0.0026005772787805153,
         0.99999658690605941},
        {0.99996592089784464, -0.0079751680914580177, 0.0021339486494309119, 0.0079761872189555976,
         0.99996807949662869, -0.0004694946988297568, -0.0021301362335746331, 0.00048649947281547405,
         0.99999761291609557},
        {0.9999914359922164, 0.0028416441030047652, 0.0030088205358383916, -0.0028584857919053165,
         0.99998018943075295, 0.0056080125724695118, -0.0029928249535347059, -0.0056165652161582636,
         0.99997974839192127},
        {0.99997328100466476, -0.00099578238670063046, 0.0072419399475676565, 0.0010300984016003182,
         0.99998825298719207, -0.0047363260979907647, -0.0072371385263002878, 0.0047436594588803225,
         0.99996256005957007},
    };
    static const double want_m[4][3] = {
        {0.002600580292219185, -0.00025134448556683151, -0.0082273755850429883},
        {0.00048650059575119112, 0.002130137844486481, 0.0079762898915009331},
        {-0.0056166199007789217, 0.0029928294213421654, -0.0028585024865414054},
        {0.0047438014832505166, 0.0072372017033938496, 0.0010301255611544051},
    };
    nb_rng r;
    nb_rng_init(&r);
    int64_t idum = -12345678;
    int all_u = 1, all_m = 1;
    for (int d = 0; d < 4; d++) {
        double u[9], m[3];
        nb_mosaic_rotation_umat(&r, (float)(0.5 / RTD), u, &idum);
        nb_umat2misset(u, m);
        char what[32];
        snprintf(what, sizeof what, "umat %d", d);
        all_u &= same_doubles(u, want_u[d], 9, what);
        snprintf(what, sizeof what, "misset %d", d);
        all_m &= same_doubles(m, want_m[d], 3, what);
    }
    ok(all_u, "mosaic_rotation_umat(0.5 deg, seed -12345678): 4 matrices match bit for bit");
    ok(all_m, "umat2misset of those 4 matrices matches bit for bit");
    ok(idum == 1162045200, "the mosaic seed variable after 4 domains (12 uniforms): %lld", (long long)idum);

    /* the random misset: the reference passes 90 (meant as degrees) as radians */
    static const double want_r[2][9] = {
        {0.85737581139438646, -0.3582235758453936, -0.36957081560149874, 0.36994374754412446, 0.9281315698108128,
         -0.041393390456998261, 0.35783842958635192, -0.10123072077712346, 0.92828012985419306},
        {0.69181605384998723, -0.13797635304401493, 0.70876870249475965, 0.042035627344253486, 0.9876048318192312,
         0.1512273196254002, -0.72084918926860608, -0.074827950446215319, 0.68904080007123825},
    };
    static const double want_rm[2][3] = {
        {-0.10862267482633257, -0.36595201196788463, 0.40734961614065884},
        {-0.10817335736464345, 0.80502675837099991, 0.060686667354446562},
    };
    nb_rng_init(&r);
    idum = -1234567890;
    all_u = all_m = 1;
    for (int d = 0; d < 2; d++) {
        double u[9], m[3];
        nb_mosaic_rotation_umat(&r, 90.0f, u, &idum);
        nb_umat2misset(u, m);
        all_u &= same_doubles(u, want_r[d], 9, "random umat");
        all_m &= same_doubles(m, want_rm[d], 3, "random misset");
    }
    ok(all_u, "mosaic_rotation_umat(90.0, seed -1234567890): 2 matrices match bit for bit");
    ok(all_m, "umat2misset of the random orientations matches bit for bit");
    ok(idum == 310766971, "the misset seed variable afterwards: %lld", (long long)idum);

    nb_rng_init(&r);
    idum = -7;
    {
        const double want7[9] = {0.93181405391011618, -0.0068332366798606325, 0.3628717070978007,
                                 0.13435907568788955, 0.93528199645000187,    -0.32740682017452644,
                                 -0.3371501263767982, 0.35383738354359301,   0.87242701602548578};
        const double want7m[3] = {0.38530590600203213, 0.34388814224230696, 0.14320385885128259};
        double u[9], m[3];
        nb_mosaic_rotation_umat(&r, 90.0f, u, &idum);
        nb_umat2misset(u, m);
        ok(same_doubles(u, want7, 9, "umat seed -7") && same_doubles(m, want7m, 3, "misset seed -7") &&
               idum == 125891516,
           "random orientation with seed -7");
        /* it is a rotation: U U^T = I, det = 1 */
        double maxdev = 0;
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++) {
                double s = 0;
                for (int k = 0; k < 3; k++) s += u[3 * i + k] * u[3 * j + k];
                double dev = fabs(s - (i == j));
                if (dev > maxdev) maxdev = dev;
            }
        ok(maxdev < 1e-12, "the matrix is orthonormal (max |UU^T - I| = %g)", maxdev);
    }

    /* zero mosaicity gives the identity, still consuming 3 uniforms */
    {
        nb_rng_init(&r);
        idum = -12345678;
        double u[9];
        nb_mosaic_rotation_umat(&r, 0.0f, u, &idum);
        const double id[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
        ok(same_doubles(u, id, 9, "zero mosaic"), "zero mosaicity gives the identity");
        float next = nb_ran1(&r, &idum);
        ok(next == 0.535101593f, "... after consuming three uniforms");
    }

    /* umat2misset corner cases (values from the reference) */
    {
        static const double mats[4][9] = {
            {0, 0.6, 0.8, 0, 0, 0, 0, 0, 0}, /* two empty rows */
            {1, 0, 0, 0, 0, 0, 0, 0, 2},     /* an empty row, unnormalised */
            {0, 0, -1, 0, 1, 0, 1, 0, 0},    /* 90 degrees about y: gimbal lock */
            {2, 0, 0, 0, 2, 0, 0, 0, 2},     /* scaled identity */
        };
        static const double want[4][3] = {
            {-0.9272952180016123, -0.0, 0},
            {0, -0.0, 0},
            {3.1415926535897931, 1.5707963267948966, 3.1415926535897931},
            {0, -0.0, 0},
        };
        for (int c = 0; c < 4; c++) {
            double m[3] = {9, 9, 9};
            nb_umat2misset(mats[c], m);
            ok(same_doubles(m, want[c], 3, "umat2misset"), "umat2misset corner case %d", c);
        }
    }
}

static void test_frame_seed(void)
{
    ok(nb_frame_seed(-12345, 0) == -12345, "frame 0 keeps the seed");
    ok(nb_frame_seed(7, 0) == 7, "frame 0 keeps a positive seed too");
    int64_t s1 = nb_frame_seed(-12345, 1), s2 = nb_frame_seed(-12345, 2), s1b = nb_frame_seed(-12345, 1);
    ok(s1 == s1b, "deterministic");
    ok(s1 != s2 && s1 != -12345 && s2 != -12345, "different frames give different seeds");
    int neg = 1, distinct = 1, inrange = 1;
    int64_t seen[200];
    for (long f = 1; f <= 200; f++) {
        int64_t s = nb_frame_seed(-12345, f);
        if (s >= 0) neg = 0;
        if (s < -2147483646) inrange = 0;
        for (long g = 1; g < f; g++)
            if (seen[g - 1] == s) distinct = 0;
        seen[f - 1] = s;
    }
    ok(neg, "later frames get negative seeds (re-initialising the table)");
    ok(inrange, "frame seeds stay within the generator's range");
    ok(distinct, "200 frames give 200 distinct seeds");
    ok(nb_frame_seed(-1, 1) != nb_frame_seed(-2, 1), "different base seeds give different frame seeds");
    /* two frames' noise streams differ */
    nb_rng r;
    nb_rng_init(&r);
    int64_t a = nb_frame_seed(-12345, 1), b = nb_frame_seed(-12345, 2);
    float fa = nb_ran1(&r, &a);
    nb_rng_init(&r);
    float fb = nb_ran1(&r, &b);
    ok(fa != fb, "frames 1 and 2 draw different first deviates");
}

/* Philox4x32-10: Random123's known answers (its tests/kat_vectors) */
static void test_philox(void)
{
    static const struct {
        uint32_t ctr[4], key[2], out[4];
    } kat[] = {
        {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
        {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
         {0xffffffff, 0xffffffff},
         {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
        {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
         {0xa4093822, 0x299f31d0},
         {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
    };
    for (size_t k = 0; k < sizeof kat / sizeof kat[0]; k++) {
        uint32_t out[4];
        nb_philox4x32_10(kat[k].ctr, kat[k].key, out);
        ok(!memcmp(out, kat[k].out, sizeof out), "Philox4x32-10 known answer %zu", k + 1);
    }
    /* the counter-based generator (nb_deviates.h): item i's uniforms are the
     * words of its blocks, in (0, 1), whatever was drawn before; another
     * stream, item or key gives others */
    nb_ctr_rng r;
    nb_ctr_init(&r);
    float first[6], again[6], other[3];
    nb_ctr_at(&r, 0x0123456789abcdefLL, 2, 77, NULL);
    for (int i = 0; i < 6; i++) first[i] = nb_ctr_uniform(&r);
    (void)nb_ctr_gaussdev(&r); /* leaves a spare, which the next item must not see */
    nb_ctr_at(&r, 0x0123456789abcdefLL, 2, 77, NULL);
    for (int i = 0; i < 6; i++) again[i] = nb_ctr_uniform(&r);
    ok(same_floats(again, first, 6, "philox item again"), "an item's uniforms depend on (key, stream, item) alone");
    uint32_t ctr[4] = {77, 0, 2, 1}, key[2] = {0x89abcdef, 0x01234567}, out[4], block0[4];
    nb_philox4x32_10(ctr, key, out);
    ok(first[4] == ((float)(out[0] >> 9) + 0.5f) / 8388608.0f,
       "the fifth uniform is block 1's first word's top 23 bits, centred");
    /* block 0 given (a row's, made in vector lanes): the same uniforms */
    uint32_t *const words[4] = {&block0[0], &block0[1], &block0[2], &block0[3]};
    nb_philox_blocks(0x0123456789abcdefLL, 2, 0, 77, 1, words);
    nb_ctr_at(&r, 0x0123456789abcdefLL, 2, 77, block0);
    for (int i = 0; i < 6; i++) again[i] = nb_ctr_uniform(&r);
    ok(same_floats(again, first, 6, "philox item from its block 0"), "an item's block 0 given: the same uniforms");
    nb_ctr_at(&r, 0x0123456789abcdefLL, 3, 77, NULL);
    other[0] = nb_ctr_uniform(&r);
    nb_ctr_at(&r, 0x0123456789abcdefLL, 2, 78, NULL);
    other[1] = nb_ctr_uniform(&r);
    nb_ctr_at(&r, 0x0123456789abcdeeLL, 2, 77, NULL);
    other[2] = nb_ctr_uniform(&r);
    ok(other[0] != first[0] && other[1] != first[0] && other[2] != first[0],
       "another stream, item or key draws other numbers");
    nb_ctr_at(&r, 0x0123456789abcdefLL, 2, 77, NULL);
    (void)nb_ctr_gaussdev(&r);
    float g2 = nb_ctr_gaussdev(&r); /* the spare of the first pair */
    nb_ctr_at(&r, 0x0123456789abcdefLL, 2, 77, NULL);
    float g1 = nb_ctr_gaussdev(&r);
    nb_ctr_at(&r, 0x0123456789abcdefLL, 2, 77, NULL);
    ok(g1 != g2 && nb_ctr_gaussdev(&r) == g1, "nb_ctr_at drops gaussdev's spare");
    float lo = 1.0f, hi = 0.0f;
    double sum = 0.0;
    enum { N = 1 << 20 };
    nb_ctr_at(&r, 1, 0, 0, NULL);
    for (int i = 0; i < N; i++) {
        float u = nb_ctr_uniform(&r);
        lo = u < lo ? u : lo, hi = u > hi ? u : hi, sum += u;
    }
    ok(lo > 0.0f && hi < 1.0f && fabs(sum / N - 0.5) < 1e-3, "2^20 uniforms in (0, 1), mean %.5f", sum / N);
}

/* One image counted with p on the given number of threads */
static nb_status count_on(int threads, const nb_noise_params *p, const float *img, int w, int h, int32_t *counts,
                          nb_noise_result *res)
{
#ifdef _OPENMP
    omp_set_num_threads(threads);
#else
    (void)threads;
#endif
    nb_rng r;
    nb_rng_init(&r);
    return nb_noise_frame(p, &r, img, w, h, counts, res);
}

/* Counts of one image with --rng philox: the same on 1 and 3 threads;
 * Poisson's mean and variance at several means; neighbours uncorrelated;
 * with read-out noise and flicker too */
static void test_noise_philox(void)
{
    enum { W = 300, H = 200, NPIX = W * H };
    static const float means[] = {0.05f, 0.7f, 6.0f, 40.0f, 2.5e6f};
    float *img = malloc(sizeof(float) * NPIX);
    int32_t *a = malloc(sizeof(int32_t) * NPIX), *b = malloc(sizeof(int32_t) * NPIX);
    if (!img || !a || !b) abort();
    nb_noise_params p;
    nb_noise_defaults(&p);
    p.rng = NB_NOISE_RNG_PHILOX, p.seed = -17, p.adc = 0.0, p.bits = 32;
    for (size_t m = 0; m < sizeof means / sizeof means[0]; m++) {
        for (int i = 0; i < NPIX; i++) img[i] = means[m];
        nb_noise_result res1, res3;
        nb_status st = count_on(1, &p, img, W, H, a, &res1);
        st = st ? st : count_on(3, &p, img, W, H, b, &res3);
        ok(st == NB_OK && !memcmp(a, b, sizeof(int32_t) * NPIX) && res1.photons == res3.photons,
           "philox counts at mean %g: the same on 1 and 3 threads", means[m]);
        if (m == 2) {
            /* the generator's numbers, fixed: a change to the keys, counters or
             * mapping to uniforms changes every user's counts */
            uint64_t h = 1469598103934665603ull; /* FNV-1a of the counts */
            for (int i = 0; i < NPIX; i++) h = (h ^ (uint32_t)a[i]) * 1099511628211ull;
            ok(res1.photons == 360145.0 && a[0] == 5 && a[1] == 5 && a[2] == 5 && a[3] == 8 && a[4] == 4 &&
                   h == 0xb5d53f618e1eaed2ull,
               "philox counts at mean 6, seed 17: 360145 photons, 5 5 5 8 4 ..., FNV-1a %016llx",
               (unsigned long long)h);
        }
        double sum = 0.0, sq = 0.0, cross = 0.0;
        for (int i = 0; i < NPIX; i++) sum += a[i], sq += (double)a[i] * a[i];
        const double mean = sum / NPIX, var = sq / NPIX - mean * mean, lam = means[m];
        for (int i = 0; i + 1 < NPIX; i++) cross += (a[i] - mean) * (a[i + 1] - mean);
        const double corr = cross / (NPIX - 1) / var;
        /* the mean's standard error is sqrt(lam / NPIX); the variance's about lam sqrt(2 / NPIX) */
        ok(fabs(mean - lam) < 5.0 * sqrt(lam / NPIX) && fabs(var - lam) < 6.0 * lam * sqrt(2.0 / NPIX) + 1e-3 &&
               fabs(corr) < 5.0 / sqrt((double)NPIX),
           "philox Poisson at mean %g: mean %.6g, variance %.6g, neighbours' correlation %.4f", lam, mean, var, corr);
    }
    /* read-out noise and flicker (a photon image between two passes) */
    for (int i = 0; i < NPIX; i++) img[i] = 3.0f;
    p.readout = 2.0, p.flicker = 0.1, p.adc = 40.0, p.bits = 16;
    nb_noise_result res;
    nb_status st = count_on(1, &p, img, W, H, a, &res);
    st = st ? st : count_on(3, &p, img, W, H, b, &res);
    ok(st == NB_OK && !memcmp(a, b, sizeof(int32_t) * NPIX), "philox with read-out noise and flicker: the same on 1 and 3 threads");
    free(img);
    free(a);
    free(b);
}

/* nb-noise's GPU kernel's chain (nb_noise_pixel_ctr.inc: each pixel's blocks
 * made as it draws), here on the host, as a device that counts a pass pixel
 * by pixel into a buffer of its own, as the GPU does, holding a pattern (a
 * device's buffer holds the last frame's), then copied back: nb_noise_frame_on
 * with it must give the CPU's counts */
#define CT_FN(name) lazy_##name
#define CT_QUAL static inline
#include "nb_noise_pixel_ctr.inc"

typedef struct lazy_device {
    int passes;
    int32_t *buffer; /* the device's output, 4 bytes a pixel */
} lazy_device;

static nb_status lazy_run(void *ctx, const nb_noise_params *p, const nb_noise_pass *pass, int height, long *overloads,
                          double *sum)
{
    lazy_device *d = ctx;
    const size_t pixels = (size_t)pass->width * (size_t)height;
    void *host_out = pass->photons ? (void *)pass->photons : (void *)pass->counts;
    d->passes++;
    memset(d->buffer, 0x7f, pixels * sizeof(int32_t));
    nb_noise_pass own = *pass;
    own.photons = pass->photons ? (float *)d->buffer : NULL;
    own.counts = pass->counts ? d->buffer : NULL;
    *sum = 0.0;
    for (int y = 0; y < height; y++)
        for (int x = 0; x < pass->width; x++) {
            nb_ctr_rng r;
            nb_ctr_init(&r);
            *sum += lazy_pass_pixel(p, &own, &r, x, y, overloads);
        }
    memcpy(host_out, d->buffer, pixels * sizeof(int32_t));
    return NB_OK;
}

static void test_noise_device_chain(void)
{
    enum { W = 97, H = 61, NPIX = W * H };
    float *img = malloc(sizeof(float) * NPIX);
    int32_t *a = malloc(sizeof(int32_t) * NPIX), *b = malloc(sizeof(int32_t) * NPIX);
    int32_t *buf = malloc(sizeof(int32_t) * NPIX);
    if (!img || !a || !b || !buf) abort();
    /* every regime of poidev: none, few, the rejection method, the normal limit */
    static const float levels[] = {0.0f, 0.02f, 0.7f, 5.0f, 11.9f, 12.0f, 40.0f, 3000.0f, 2.5e6f};
    for (int i = 0; i < NPIX; i++) img[i] = levels[(i * 7 + i / W) % (int)(sizeof levels / sizeof levels[0])];
    static const struct {
        const char *what;
        double flicker, calibration, readout, gain, scale;
        int bits, psf, roi;
    } cases[] = {
        {"the default chain", 0, 0, 0, 1, 1, 16, NB_PSF_NONE, 0},
        {"flicker, calibration, gain, scale, 32 bits", 0.1, 0.05, 0, 2.5, 0.8, 32, NB_PSF_NONE, 0},
        {"read-out noise (two passes)", 0.1, 0, 3, 1, 1, 16, NB_PSF_NONE, 0},
        {"a PSF between the passes, an ROI", 0, 0.05, 1, 1, 1, 16, NB_PSF_GAUSS, 1},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        nb_noise_params p;
        nb_noise_defaults(&p);
        p.rng = NB_NOISE_RNG_PHILOX, p.seed = -23, p.calib_seed = 99;
        p.flicker = cases[c].flicker, p.calibration = cases[c].calibration, p.readout = cases[c].readout;
        p.gain = cases[c].gain, p.photon_scale = cases[c].scale, p.bits = cases[c].bits;
        p.psf = cases[c].psf, p.psf_fwhm_pixels = 1.5;
        if (cases[c].roi) p.roi_xmin = 5, p.roi_xmax = 80, p.roi_ymin = 3, p.roi_ymax = 50;
        lazy_device ld = {0, buf};
        const nb_noise_device lazy = {lazy_run, &ld};
        nb_rng r1, r2;
        nb_rng_init(&r1);
        nb_rng_init(&r2);
        nb_noise_result res_cpu, res_dev;
        memset(b, 0x7f, sizeof(int32_t) * NPIX);
        nb_status st = nb_noise_frame(&p, &r1, img, W, H, a, &res_cpu);
        st = st ? st : nb_noise_frame_on(&lazy, &p, &r2, img, W, H, b, &res_dev);
        const int two_passes = cases[c].readout > 0 || cases[c].psf != NB_PSF_NONE;
        ok(st == NB_OK && ld.passes == (two_passes ? 2 : 1) && !memcmp(a, b, sizeof(int32_t) * NPIX) &&
               res_cpu.photons == res_dev.photons && res_cpu.overloads == res_dev.overloads,
           "the GPU's chain on the host: the CPU's counts, photons (%.0f) and overloads (%ld): %s", res_dev.photons,
           res_dev.overloads, cases[c].what);
    }
    /* the reference's generator is one sequence: no device counts with it */
    nb_noise_params p;
    nb_noise_defaults(&p);
    lazy_device ld = {0, buf};
    const nb_noise_device lazy = {lazy_run, &ld};
    nb_rng r;
    nb_rng_init(&r);
    nb_noise_result res;
    ok(nb_noise_frame_on(&lazy, &p, &r, img, W, H, b, &res) == NB_ERR_USAGE && ld.passes == 0,
       "a device refuses the reference's generator");
    free(buf);
    free(img);
    free(a);
    free(b);
}

/* The PSF on `threads` threads */
static nb_status psf_on(int threads, const float *in, float *out, int w, int h, int type, double fwhm, int radius,
                        double *lost)
{
#ifdef _OPENMP
    omp_set_num_threads(threads);
#else
    (void)threads;
#endif
    return nb_apply_psf(in, out, w, h, type, fwhm, radius, lost);
}

/* nb_apply_psf: one pixel's photons spread over the disc of its radius, the
 * same pattern wherever the pixel lies (rows are blurred in bands, on several
 * threads: a pixel beside a band's edge spreads as one in its middle), the
 * photons kept; and a whole image the same on 1 and 3 threads. */
static void test_psf(void)
{
    enum { W = 256, H = 160, NPIX = W * H, R = 10, X0 = 120 };
    float *in = calloc(NPIX, sizeof(float)), *out = malloc(sizeof(float) * NPIX), *ref = malloc(sizeof(float) * NPIX);
    if (!in || !out || !ref) abort();
    double lost;
    /* the pattern of a pixel in the middle of the image */
    in[80 * W + X0] = 1000.0f;
    nb_status st = psf_on(3, in, ref, W, H, NB_PSF_GAUSS, 3.0, R, &lost);
    in[80 * W + X0] = 0.0f;
    int disc = 0, raised = 0;
    const float floor = ref[0]; /* the photons beyond the radius, spread evenly */
    double total = 0.0;
    for (int dy = -R; dy <= R; dy++)
        for (int dx = -R; dx <= R; dx++) disc += dx * dx + dy * dy <= R * R;
    for (int i = 0; i < NPIX; i++) raised += ref[i] != floor, total += ref[i];
    ok(st == NB_OK && raised == disc && fabs(total - 1000.0) < 1e-3 && lost > 0.0,
       "psf: one pixel's photons over the %d pixels of its disc (%d raised), %.6f of 1000 kept", disc, raised, total);
    /* the same pixel in every row from 2 to 37: across the edges of bands of
     * 2 R rows, the pattern moved with it (near the top, less the photons
     * that fall off the detector) */
    int same = st == NB_OK;
    for (int y = 2; y < 38 && same; y++) {
        in[y * W + X0] = 1000.0f;
        st = psf_on(3, in, out, W, H, NB_PSF_GAUSS, 3.0, R, &lost);
        in[y * W + X0] = 0.0f;
        for (int dy = -R; dy <= R && !st; dy++) {
            if (y + dy < 0) continue;
            for (int dx = -R; dx <= R; dx++)
                same &= out[(y + dy) * W + X0 + dx] == ref[(80 + dy) * W + X0 + dx];
        }
        same &= st == NB_OK;
    }
    ok(same, "psf: a pixel in any row, beside a band's edge or not, spreads in the same pattern");
    /* beside the left and right edges: the pattern's part on the detector, nothing wrapped into the next row */
    same = 1;
    for (int side = 0; side < 2 && same; side++) {
        const int x = side ? W - 3 : 2;
        in[80 * W + x] = 1000.0f;
        st = psf_on(3, in, out, W, H, NB_PSF_GAUSS, 3.0, R, &lost);
        in[80 * W + x] = 0.0f;
        for (int dy = -R; dy <= R && !st; dy++)
            for (int dx = -R; dx <= R; dx++) {
                const int on = x + dx >= 0 && x + dx < W;
                const float got = out[(80 + dy) * W + x + dx]; /* off the detector: the neighbouring row's pixel */
                same &= on ? got == ref[(80 + dy) * W + X0 + dx] : got == floor;
            }
        same &= st == NB_OK;
    }
    ok(same, "psf: a pixel beside the left or right edge spreads its pattern's part on the detector, none wrapped");
    /* a whole image, each pixel's own radius (fiber, automatic) */
    for (int i = 0; i < NPIX; i++) in[i] = (float)((i * 7919) % 101) * 0.01f;
    for (int k = 0; k < 12; k++) in[(13 * k + 5) * W + 20 * k + 7] = 5000.0f * (float)(k + 1);
    double lost1, lost3;
    st = psf_on(1, in, ref, W, H, NB_PSF_FIBER, 0.46, 0, &lost1);
    st = st ? st : psf_on(3, in, out, W, H, NB_PSF_FIBER, 0.46, 0, &lost3);
    ok(st == NB_OK && !memcmp(ref, out, sizeof(float) * NPIX) && lost1 == lost3,
       "psf: an image blurred with each pixel's radius, the same on 1 and 3 threads");
    free(in);
    free(out);
    free(ref);
}

int main(void)
{
    test_ran1();
    test_gaussdev();
    test_gammln();
    test_poidev();
    test_mosaic();
    test_frame_seed();
    test_philox();
    test_noise_philox();
    test_noise_device_chain();
    test_psf();
    return tap_done();
}
