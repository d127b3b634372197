/* libFuzzer target: mmCIF reflection files (formats/sf_cif.c's parser and
 * the -column rule), with and without a column named; then the expansion of
 * what was read in P 1 and P 2 (formats/sf_expand.c). */
#include "fuzz_common.h"
#include "nb_hkl.h"
#include "sf_cif.h"
#include "sf_expand.h"

static void expand(nb_sf_data *d)
{
    static const double one[3][3] = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}, two[3][3] = {{-1, 0, 0}, {0, 1, 0}, {0, 0, -1}};
    static const double t[3] = {0, 0.5, 0};
    nb_hkl h;
    nb_sf_stats s;
    if (nb_sf_add_op(d, one, t) || nb_sf_add_op(d, two, t)) return;
    if (!nb_sf_expand(d, "fuzz.cif", 0.0, &h, &s)) nb_hkl_free(&h);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *columns[] = {NULL, "F_meas_au", "_refln.pdbx_F_plus", "intensity_meas", "a,b"};
    char name[64];
    for (size_t c = 0; c < sizeof columns / sizeof columns[0]; c++) {
        nb_sf_data d;
        if (nb_sf_cif_parse("fuzz.cif", (const char *)data, size, columns[c], &d, name)) continue;
        expand(&d);
        nb_sf_data_free(&d);
    }
    return 0;
}
