/* libFuzzer target: amorphous tables (nonBragg's .stol files), read and laid
 * out as the pixel interpolates them, and F looked up at a few points both
 * ways (the reference's walk and the search). */
#include <math.h>

#include "fuzz_common.h"
#include "nb_amorphous.h"
#include "stol.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    nb_stol_table t;
    if (nb_stol_parse((const char *)data, size, "fuzz", &t)) return 0;
    nb_amorphous_curve c;
    if (!nb_amorphous_curve_build(&t, NB_STOL_AXIS_STOL, "fuzz", &c)) {
        int walk = 0;
        for (double s = 0.0; s < 3e10; s += 2.5e9) {
            volatile double a = nb_amorphous_F(&c, s, NULL), b = nb_amorphous_F(&c, s, &walk);
            (void)a, (void)b;
        }
        nb_amorphous_curve_free(&c);
    }
    nb_stol_table_free(&t);
    return 0;
}
