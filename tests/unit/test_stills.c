/* test_stills.c - the shots of a series of stills (nb_stills.c): each a
 * rotation, drawn from the seed and the frame alone, uniform on SO(3) (its
 * moments against Haar measure's over many frames of one fixed seed, so the
 * figures are fixed and the check cannot flake), the ranges respected, the
 * PLAN keys read back as written. */
#include <math.h>
#include <string.h>

#include "nb_plan.h"
#include "nb_stills.h"
#include "tap.h"

static void plan_of(nb_plan *p, int64_t seed)
{
    nb_plan_init(p);
    p->misset_seed = seed;
    p->Na = p->Nb = p->Nc = 5;
    p->fluence = 1e24;
    p->stills = (nb_stills){1, 0.004, 12, 3, 9, 1e29, 2e29};
}

int main(void)
{
    nb_plan p;
    plan_of(&p, -12345);
    const long n = 40000;
    double mean[9] = {0}, sq[9] = {0}, cos_angle = 0, worst_orth = 0, worst_det = 0, axis_z[3] = {0};
    int in_range = 1, spikes_sorted = 1;
    long N_seen[16] = {0};
    static nb_still_shot s;
    for (long f = 0; f < n; f++) {
        nb_still_draw(&p, f, &s);
        const double *U = s.U;
        for (int i = 0; i < 9; i++) mean[i] += U[i] / n, sq[i] += U[i] * U[i] / n;
        cos_angle += (U[0] + U[4] + U[8] - 1) / 2 / n;
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++) {
                double d = U[3 * i] * U[3 * j] + U[3 * i + 1] * U[3 * j + 1] + U[3 * i + 2] * U[3 * j + 2];
                worst_orth = fmax(worst_orth, fabs(d - (i == j)));
            }
        double det = U[0] * (U[4] * U[8] - U[5] * U[7]) - U[1] * (U[3] * U[8] - U[5] * U[6]) +
                     U[2] * (U[3] * U[7] - U[4] * U[6]);
        worst_det = fmax(worst_det, fabs(det - 1));
        /* the image of z: its octant counts below */
        axis_z[0] += U[2] > 0, axis_z[1] += U[5] > 0, axis_z[2] += U[8] > 0;
        in_range &= s.Na == s.Nb && s.Nb == s.Nc && s.Na >= 3 && s.Na <= 9 && s.Na == floor(s.Na);
        in_range &= s.fluence >= 1e29 && s.fluence <= 2e29 && s.spikes == 12;
        N_seen[(int)s.Na]++;
        for (int k = 1; k < s.spikes; k++) spikes_sorted &= s.spike[k - 1] <= s.spike[k];
    }
    ok(worst_orth < 1e-12, "every U is orthonormal (worst |U U^T - I| %.2g)", worst_orth);
    ok(worst_det < 1e-12, "every U is a proper rotation (worst |det - 1| %.2g)", worst_det);
    /* Haar measure: E[U_ij] = 0, E[U_ij^2] = 1/3, E[cos angle] = -1/2; with
     * 40000 draws the standard errors are 0.003, 0.0015 and 0.0025 */
    double worst_mean = 0, worst_sq = 0;
    for (int i = 0; i < 9; i++) worst_mean = fmax(worst_mean, fabs(mean[i])), worst_sq = fmax(worst_sq, fabs(sq[i] - 1.0 / 3));
    ok(worst_mean < 0.015, "E[U_ij] = 0 (worst %.4f)", worst_mean);
    ok(worst_sq < 0.008, "E[U_ij^2] = 1/3 (worst deviation %.4f)", worst_sq);
    ok(fabs(cos_angle + 0.5) < 0.0125, "E[cos rotation angle] = -1/2 (got %.4f)", cos_angle);
    for (int i = 0; i < 3; i++)
        ok(fabs(axis_z[i] / n - 0.5) < 0.01, "U z points to either side of axis %d equally (%.4f)", i, axis_z[i] / n);
    ok(in_range, "N whole and within 3..9, the fluence within its range, 12 spikes");
    int all_N = 1;
    for (int k = 3; k <= 9; k++) all_N &= fabs(N_seen[k] / (double)n - 1.0 / 7) < 0.01;
    ok(all_N, "every N of 3..9 drawn equally often");
    ok(spikes_sorted, "spikes in ascending order");

    /* the frame alone decides: frame 77 drawn cold equals frame 77 after others */
    nb_still_shot a, b;
    nb_still_draw(&p, 77, &a);
    nb_still_draw(&p, 3, &b);
    nb_still_draw(&p, 77, &b);
    ok(!memcmp(a.U, b.U, sizeof a.U) && a.Na == b.Na && a.fluence == b.fluence && a.spikes == b.spikes &&
           !memcmp(a.spike, b.spike, (size_t)a.spikes * sizeof a.spike[0]),
       "a shot depends on its frame only, not on the draws before it");
    nb_plan q;
    plan_of(&q, -12346);
    nb_still_draw(&q, 77, &b);
    ok(memcmp(a.U, b.U, sizeof a.U) != 0, "another seed, another orientation");

    /* the spectrum's spread: FWHM 0.004 is sigma 0.0017 */
    double m2 = 0;
    long ns = 0;
    for (long f = 0; f < 5000; f++) {
        nb_still_draw(&p, f, &s);
        for (int k = 0; k < s.spikes; k++) m2 += s.spike[k] * s.spike[k], ns++;
    }
    double sigma = sqrt(m2 / ns), want = 0.004 / (2 * sqrt(2 * log(2.0)));
    ok(fabs(sigma / want - 1) < 0.02, "the spikes' spread is the envelope's (sigma %.6f, want %.6f)", sigma, want);

    /* PLAN keys: written and read back */
    nb_record rec;
    nb_stills back;
    nb_record_init(&rec, "PLAN");
    nb_stills_to_record(&p.stills, &rec);
    ok(nb_stills_from_record(&rec, &back) == NB_OK && !memcmp(&back, &p.stills, sizeof back),
       "the STILLS keys read back as written");
    nb_hdr_set(&rec, "STILLS_N", "9 3");
    ok(nb_stills_from_record(&rec, &back) == NB_ERR_DATA, "a reversed STILLS_N is refused: %s", nb_error_message());
    nb_record_free(&rec);
    nb_plan_free(&p);
    nb_plan_free(&q);
    return tap_done();
}
