/* ccp4.h - what nb takes from CCP4's C library (libccp4c, Debian's
 * libccp4-dev) besides the MTZ reader: its messages kept off the stream,
 * and a space group's operators from its name through csymlib and
 * syminfo.lib.  Used by mtz.c, sf_cif.c (nb-hkl) and nb-fit's --refine-F. */
#ifndef NB_FORMAT_CCP4_H
#define NB_FORMAT_CCP4_H

#include "nb_error.h"
#include "sf_expand.h"

/* CCP4's library prints its signals and some errors on standard output,
 * where nb-hkl's stream goes: between begin and end both standard output
 * and standard error go to /dev/null (the caller says what failed). */
typedef struct nb_ccp4_quiet {
    int saved_out, saved_err;
} nb_ccp4_quiet;
void nb_ccp4_quiet_begin(nb_ccp4_quiet *q);
void nb_ccp4_quiet_end(nb_ccp4_quiet *q);

/* The operators of the space group named (Hermann-Mauguin, "P 21 21 21",
 * "P212121", "C 1 2 1" ..., or a Hall symbol as DIALS's experiment lists
 * state it, " P 2ac 2ab") into d->ops, its name into d->spacegroup and its
 * Hall symbol into d->hall.
 * syminfo.lib: $SYMINFO, else $CLIBD/syminfo.lib, else the one this build
 * found (NB_CCP4_SYMINFO). */
nb_status nb_ccp4_spacegroup(const char *path, const char *name, nb_sf_data *d);

#ifdef NB_HAVE_CCP4
#include <ccp4/csymlib.h>
/* The same space group as csymlib's own (NULL: unknown; ccp4spg_free it),
 * by name, else as a Hall symbol; silent. */
CCP4SPG *nb_ccp4_load_spacegroup(const char *name);
#endif

#endif
