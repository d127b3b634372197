/* nb_materials.h - the sensor materials DIALS knows, and their linear
 * attenuation coefficient exactly as dxtbx computes it.
 *
 * An NXmx file or a miniCBF header states only a sensor's material and
 * thickness; dxtbx then takes mu from cctbx's tables (eltbx
 * attenuation_coefficient) at the beam's wavelength.  The simulation's
 * absorption matches what DIALS corrects for only when nb renders with that
 * same mu: nb_material_mu is cctbx's mu_at_angstrom, the same table, the
 * same interpolation, the same constants (docs/physics.md 8.3).
 */
#ifndef NB_MATERIALS_H
#define NB_MATERIALS_H

#include "nb_error.h"

typedef enum nb_material {
    NB_MATERIAL_NONE = 0,
    NB_MATERIAL_SI,
    NB_MATERIAL_CDTE,
    NB_MATERIAL_GAAS
} nb_material;

/* "Si" (or NXmx's "Silicon"), "CdTe", "GaAs", spelled so; NONE for any
 * other name or NULL. */
nb_material nb_material_from_name(const char *name);
/* dxtbx's (and NXmx's) spelling: "Si", "CdTe", "GaAs"; "" for NONE. */
const char *nb_material_name(nb_material m);
/* The linear attenuation coefficient (1/m) at this wavelength (m): cctbx's
 * mu_at_angstrom x 100.  A wavelength outside the table (energies from 1 keV
 * up to, not including, 20 MeV: longer than about 12.4 Angstrom or shorter
 * than 0.00062 Angstrom) is NB_ERR_DATA, never an extrapolation; so is NONE. */
nb_status nb_material_mu(nb_material m, double wavelength_m, double *mu_per_m);
/* Of Si, CdTe and GaAs, the one with the largest mu at this wavelength; NONE
 * when the wavelength is outside every table. */
nb_material nb_material_most_absorbing(double wavelength_m);

#endif
