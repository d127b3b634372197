/* sf_cif.h - structure factors from an mmCIF reflection file (the PDB's
 * *-sf.cif; what cctbx and gemmi write): the _refln loop of the first data
 * block that has one, with _cell.* and the space group's Hermann-Mauguin
 * name, for nb-hkl -hkl FILE.cif. */
#ifndef NB_FORMAT_SF_CIF_H
#define NB_FORMAT_SF_CIF_H

#include "nb_error.h"
#include "sf_expand.h"

/* As nb_mtz_read: the -column rule over the loop's items (names without
 * "_refln.", any case): amplitudes F_meas_au, F_meas, F_calc, F_calc_au (F);
 * intensities intensity_meas, intensity_calc, F_squared_meas, F_squared_calc
 * (J); pairs pdbx_F_plus,pdbx_F_minus (G) and pdbx_I_plus,pdbx_I_minus (K).
 * '?' and '.' are missing values.  The operators come from
 * _symmetry.space_group_name_H-M (or _space_group.name_H-M_alt) through
 * CCP4's csymlib. */
nb_status nb_sf_cif_read(const char *path, const char *column, nb_sf_data *d);

/* The parsing alone, from text (for the fuzzer): the chosen values and
 * the cell, the space group's name in *spacegroup (size 64). */
nb_status nb_sf_cif_parse(const char *path, const char *text, size_t len, const char *column, nb_sf_data *d,
                          char *spacegroup);

#endif
