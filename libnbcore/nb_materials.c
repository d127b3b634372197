/* nb_materials.c - the three sensor materials dxtbx knows (Si, CdTe, GaAs)
 * and their linear attenuation coefficient, computed as cctbx computes it
 * (cctbx/eltbx/attenuation_coefficient.h), so that the mu nb renders with is
 * the mu dxtbx will correct with (docs/physics.md 8.3).
 *
 * The tables are NIST's X-ray mass attenuation coefficients (Hubbell &
 * Seltzer, NISTIR 5632; XCOM), mu/rho in cm^2/g against the photon energy in
 * MeV, with each material's density in g/cm^3, copied number for number from
 * the tables cctbx's eltbx holds (cctbx.eltbx.attenuation_coefficient:
 * get_table(m).energy(), .mu_rho(), .density()).  An absorption edge is
 * listed twice, the value below the edge and the value above it. */
#include "nb_materials.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

/* hc in keV Angstrom from the 2018 SI's exact h, c and e, then in eV
 * Angstrom, in the order scitbx/constants.h computes them (factor_ev_angstrom,
 * 12398.419843320025): an older constant (CODATA 1986's 12398.4245, or
 * nb-geom -energy's 12398.42) would move mu by about 1e-6 */
#define FACTOR_KEV_ANGSTROM (6.62607015 * 2.99792458 / 1.602176634)
#define FACTOR_EV_ANGSTROM (FACTOR_KEV_ANGSTROM * 1000)

static const double si_energy[38] = {
    0.001, 0.0015, 0.0018389, 0.0018389, 0.002, 0.003, 0.004, 0.005, 0.006, 0.008, 0.01, 0.015,
    0.02, 0.03, 0.04, 0.05, 0.06, 0.08, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0, 1.25, 1.5,
    2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 15.0, 20.0,
};
static const double si_mu_rho[38] = {
    1570.0, 535.5, 309.2, 3192.0, 2777.0, 978.4, 452.9, 245.0, 147.0, 64.68, 33.89, 10.34, 4.464,
    1.436, 0.7012, 0.4385, 0.3207, 0.2228, 0.1835, 0.1448, 0.1275, 0.1082, 0.09614, 0.08748,
    0.08077, 0.07082, 0.06361, 0.05688, 0.05183, 0.0448, 0.03678, 0.0324, 0.02967, 0.02788, 0.02574,
    0.02462, 0.02352, 0.02338,
};
static const double cdte_energy[59] = {
    0.001, 0.001003, 0.001006, 0.001006, 0.0015, 0.002, 0.003, 0.003537, 0.003537, 0.003631,
    0.003727, 0.003727, 0.004, 0.004018, 0.004018, 0.004177, 0.004341, 0.004341, 0.004475, 0.004612,
    0.004612, 0.004773, 0.004939, 0.004939, 0.005, 0.006, 0.008, 0.01, 0.015, 0.02, 0.026711,
    0.026711, 0.03, 0.031814, 0.031814, 0.04, 0.05, 0.06, 0.08, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6,
    0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 15.0, 20.0,
};
static const double cdte_mu_rho[59] = {
    7927.0, 7875.0, 7824.0, 8014.0, 3291.0, 1664.0, 614.6, 406.4, 778.7, 730.0, 684.0, 860.1, 723.0,
    715.1, 793.4, 722.1, 656.2, 932.8, 873.9, 813.5, 943.8, 870.2, 799.9, 865.3, 839.2, 528.6,
    249.2, 138.1, 46.57, 21.44, 9.834, 29.43, 21.82, 18.73, 34.92, 19.3, 10.67, 6.542, 3.019, 1.671,
    0.6071, 0.3246, 0.1628, 0.1147, 0.09291, 0.08042, 0.066, 0.05742, 0.05043, 0.04591, 0.0407,
    0.03649, 0.03525, 0.03513, 0.03548, 0.03687, 0.03857, 0.04273, 0.04616,
};
static const double gaas_energy[58] = {
    0.001, 0.00105613, 0.0011154, 0.0011154, 0.00112877, 0.0011423, 0.0011423, 0.00121752,
    0.0012977, 0.0012977, 0.00131034, 0.0013231, 0.0013231, 0.00134073, 0.0013586, 0.0013586,
    0.0015, 0.0015265, 0.0015265, 0.002, 0.003, 0.004, 0.005, 0.006, 0.008, 0.01, 0.0103671,
    0.0103671, 0.0110916, 0.0118667, 0.0118667, 0.015, 0.02, 0.03, 0.04, 0.05, 0.06, 0.08, 0.1,
    0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 15.0,
    20.0,
};
static const double gaas_mu_rho[58] = {
    1917.0, 1685.0, 1481.0, 2772.0, 3180.0, 3532.0, 4372.0, 4130.0, 3657.0, 4066.0, 3971.0, 3879.0,
    5652.0, 5525.0, 5415.0, 6266.0, 5159.0, 4939.0, 5278.0, 2731.0, 970.2, 453.9, 249.5, 152.4,
    69.6, 37.8, 34.25, 126.0, 105.9, 88.99, 168.5, 92.2, 42.58, 13.97, 6.262, 3.365, 2.042, 0.9587,
    0.5598, 0.2509, 0.1671, 0.1137, 0.09371, 0.08248, 0.07484, 0.06452, 0.05751, 0.05122, 0.04676,
    0.04102, 0.03538, 0.03288, 0.03172, 0.03121, 0.03117, 0.0317, 0.03354, 0.03543,
};

typedef struct material_table {
    const char *name;
    double density;         /* g/cm^3 */
    int n;
    const double *energy;   /* MeV, ascending; an edge twice */
    const double *mu_rho;   /* cm^2/g */
} material_table;

#define TABLE(name, density, e, m) {name, density, (int)(sizeof e / sizeof e[0]), e, m}
static const material_table tables[] = {
    [NB_MATERIAL_SI] = TABLE("Si", 2.33, si_energy, si_mu_rho),
    [NB_MATERIAL_CDTE] = TABLE("CdTe", 6.2, cdte_energy, cdte_mu_rho),
    [NB_MATERIAL_GAAS] = TABLE("GaAs", 5.32, gaas_energy, gaas_mu_rho),
};
#undef TABLE
#define NMATERIALS ((int)(sizeof tables / sizeof tables[0]))

nb_material nb_material_from_name(const char *name)
{
    if (!name) return NB_MATERIAL_NONE;
    /* NXmx's sensor_material may spell silicon out; dxtbx reads it as Si */
    if (!strcmp(name, "Silicon")) return NB_MATERIAL_SI;
    for (int m = 1; m < NMATERIALS; m++)
        if (!strcmp(name, tables[m].name)) return (nb_material)m;
    return NB_MATERIAL_NONE;
}

const char *nb_material_name(nb_material m)
{
    return m > NB_MATERIAL_NONE && (int)m < NMATERIALS ? tables[m].name : "";
}

/* cctbx's mu_at_angstrom (1/cm), step for step: the energy in MeV, the
 * interval [i-1, i] below the first table energy that exceeds it (at an edge
 * that is the interval above the edge), then linear in log E and log mu/rho.
 * Returns -1 outside the table (cctbx asserts there). */
static double mu_per_cm(const material_table *t, double wavelength_angstrom)
{
    double en = FACTOR_EV_ANGSTROM / wavelength_angstrom / 1000000;
    int i = 0;
    while (i < t->n && !(en < t->energy[i])) i++;
    if (i <= 0 || i >= t->n) return -1.0;
    i--;
    double x0 = log(t->energy[i]), x1 = log(t->energy[i + 1]);
    double y0 = log(t->mu_rho[i]), y1 = log(t->mu_rho[i + 1]);
    return exp(y0 + (y1 - y0) * (log(en) - x0) / (x1 - x0)) * t->density;
}

nb_status nb_material_mu(nb_material m, double wavelength_m, double *mu_per_m)
{
    if (m <= NB_MATERIAL_NONE || (int)m >= NMATERIALS)
        return nb_error_set(NB_ERR_DATA, "no sensor material to take an attenuation coefficient from");
    const material_table *t = &tables[m];
    double angstrom = wavelength_m * 1e10;
    double mu = mu_per_cm(t, angstrom);
    if (!(mu > 0))
        return nb_error_set(NB_ERR_DATA, "%s has no attenuation coefficient at %g A (%g eV): its table covers "
                                         "%g keV up to %g MeV",
                            t->name, angstrom, FACTOR_EV_ANGSTROM / angstrom, t->energy[0] * 1e3,
                            t->energy[t->n - 1]);
    *mu_per_m = mu * 100.0;
    return NB_OK;
}

nb_material nb_material_most_absorbing(double wavelength_m)
{
    nb_material best = NB_MATERIAL_NONE;
    double best_mu = 0.0;
    for (int m = 1; m < NMATERIALS; m++) {
        double mu = mu_per_cm(&tables[m], wavelength_m * 1e10);
        if (mu > best_mu) best = (nb_material)m, best_mu = mu;
    }
    return best;
}
