/* test_materials.c - the sensor materials' attenuation coefficient is the one
 * dxtbx computes (docs/physics.md 8.3): cctbx's mu_at_angstrom at wavelengths
 * across the usual range and on both sides of the absorption edges; the
 * names dxtbx and NXmx spell; no extrapolation outside the tables. */
#include <math.h>
#include <string.h>

#include "nb_materials.h"
#include "tap.h"

/* mu in 1/cm from cctbx itself (Debian's python3-cctbx), printed with repr:
 *   from cctbx.eltbx import attenuation_coefficient as ac
 *   ac.get_table('CdTe').mu_at_angstrom(0.4641)
 * The energies (keV) say which side of an edge each wavelength is on. */
static const struct {
    nb_material m;
    double angstrom, mu_per_cm;
} cctbx_mu[] = {
    {NB_MATERIAL_SI, 0.3, 1.525303447072138},    /* 41.3281 keV */
    {NB_MATERIAL_SI, 0.5, 5.700486566882857},    /* 24.7968 keV */
    {NB_MATERIAL_SI, 1.0, 42.07985875566818},    /* 12.3984 keV */
    {NB_MATERIAL_SI, 2.0, 312.02698979266427},   /* 6.1992 keV */
    {NB_MATERIAL_SI, 3.0, 964.4959138862507},    /* 4.1328 keV */
    {NB_MATERIAL_SI, 6.74, 7433.148446725917},   /* 1.8395 keV: above Si K (1.8389) */
    {NB_MATERIAL_SI, 6.75, 722.6557719418144},   /* 1.8368 keV: below it */
    {NB_MATERIAL_CDTE, 0.3897, 216.48120757197952}, /* 31.8153 keV: above Te K (31.814) */
    {NB_MATERIAL_CDTE, 0.3898, 116.19123484546328}, /* 31.8071 keV: below it */
    {NB_MATERIAL_CDTE, 0.4641, 182.39605929702464}, /* 26.7150 keV: above Cd K (26.711) */
    {NB_MATERIAL_CDTE, 0.4643, 61.017141040210255}, /* 26.7035 keV: below it */
    {NB_MATERIAL_CDTE, 1.0, 481.1463840098675},     /* 12.3984 keV */
    {NB_MATERIAL_CDTE, 2.5, 5310.053826348717},     /* 4.9594 keV: above Cd L1 (4.939) */
    {NB_MATERIAL_GAAS, 1.0448, 896.4029417514282},  /* 11.8668 keV: above As K (11.8667) */
    {NB_MATERIAL_GAAS, 1.0449, 473.53449361079845}, /* 11.8657 keV: below it */
    {NB_MATERIAL_GAAS, 1.1959, 670.2636756752912},  /* 10.3674 keV: above Ga K (10.3671) */
    {NB_MATERIAL_GAAS, 1.1961, 182.2770838648402},  /* 10.3657 keV: below it */
    {NB_MATERIAL_GAAS, 1.0, 800.7998629661656},     /* 12.3984 keV */
    {NB_MATERIAL_GAAS, 0.7, 313.91335500513253},    /* 17.7120 keV */
};

static void test_cctbx_values(void)
{
    for (size_t i = 0; i < sizeof cctbx_mu / sizeof cctbx_mu[0]; i++) {
        double mu = -1, want = cctbx_mu[i].mu_per_cm * 100.0;
        nb_status st = nb_material_mu(cctbx_mu[i].m, cctbx_mu[i].angstrom * 1e-10, &mu);
        ok(st == NB_OK && fabs(mu - want) <= 1e-12 * want, "%s at %g A: mu %.17g /m, cctbx %.17g",
           nb_material_name(cctbx_mu[i].m), cctbx_mu[i].angstrom, mu, want);
    }
}

static void test_names(void)
{
    ok(nb_material_from_name("Si") == NB_MATERIAL_SI, "Si");
    ok(nb_material_from_name("Silicon") == NB_MATERIAL_SI, "Silicon (NXmx) is Si");
    ok(nb_material_from_name("CdTe") == NB_MATERIAL_CDTE, "CdTe");
    ok(nb_material_from_name("GaAs") == NB_MATERIAL_GAAS, "GaAs");
    ok(nb_material_from_name("si") == NB_MATERIAL_NONE, "si: spelled as dxtbx spells it, or not at all");
    ok(nb_material_from_name("Ge") == NB_MATERIAL_NONE, "Ge: not a sensor dxtbx knows");
    ok(nb_material_from_name("") == NB_MATERIAL_NONE, "empty name");
    ok(nb_material_from_name(NULL) == NB_MATERIAL_NONE, "NULL name");
    ok(!strcmp(nb_material_name(NB_MATERIAL_SI), "Si"), "Si's name");
    ok(!strcmp(nb_material_name(NB_MATERIAL_CDTE), "CdTe"), "CdTe's name");
    ok(!strcmp(nb_material_name(NB_MATERIAL_GAAS), "GaAs"), "GaAs's name");
    ok(!strcmp(nb_material_name(NB_MATERIAL_NONE), ""), "NONE's name is empty");
}

static void test_outside_the_table(void)
{
    double mu = 42;
    /* the tables run from 1 keV (12.398 A) up to 20 MeV (0.00062 A), the last excluded */
    ok(nb_material_mu(NB_MATERIAL_SI, 13e-10, &mu) == NB_ERR_DATA, "Si at 13 A (954 eV): below the table");
    ok(mu == 42, "... and mu is left alone");
    ok(strstr(nb_error_message(), "Si has no attenuation coefficient at 13 A") != NULL, "message: %s",
       nb_error_message());
    ok(nb_material_mu(NB_MATERIAL_GAAS, 1e-15, &mu) == NB_ERR_DATA, "GaAs at 1e-5 A: above the table");
    ok(nb_material_mu(NB_MATERIAL_CDTE, 0.0, &mu) == NB_ERR_DATA, "a wavelength of 0");
    ok(nb_material_mu(NB_MATERIAL_CDTE, -1e-10, &mu) == NB_ERR_DATA, "a negative wavelength");
    ok(nb_material_mu(NB_MATERIAL_CDTE, NAN, &mu) == NB_ERR_DATA, "NaN");
    ok(nb_material_mu(NB_MATERIAL_NONE, 1e-10, &mu) == NB_ERR_DATA, "no material");
    ok(nb_material_mu(NB_MATERIAL_SI, 12.3e-10, &mu) == NB_OK && mu > 0, "Si at 12.3 A: inside");
}

static void test_most_absorbing(void)
{
    /* cctbx, 1/cm: at 1 A Si 42.08, CdTe 481.1, GaAs 800.8; at 1.5 A 137.1,
     * 1417, 338.6; at 0.3 A 1.525, 109.7, 30.42 */
    ok(nb_material_most_absorbing(1.0e-10) == NB_MATERIAL_GAAS, "1 A: GaAs (above its K edges)");
    ok(nb_material_most_absorbing(1.5e-10) == NB_MATERIAL_CDTE, "1.5 A: CdTe");
    ok(nb_material_most_absorbing(0.3e-10) == NB_MATERIAL_CDTE, "0.3 A: CdTe");
    ok(nb_material_most_absorbing(13e-10) == NB_MATERIAL_NONE, "13 A: none has a table there");
}

int main(void)
{
    test_cctbx_values();
    test_names();
    test_outside_the_table();
    test_most_absorbing();
    return tap_done();
}
