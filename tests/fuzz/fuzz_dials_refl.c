/* libFuzzer target: DIALS's reflection tables (.refl, msgpack), as nb-fit
 * --spots reads them (formats/dials_refl.c over formats/msgpack.c). */
#include "dials_refl.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    nb_refl_table t;
    (void)fuzz_file; /* the parser takes bytes: no file needed */
    if (!nb_refl_parse(data, size, "fuzz.refl", &t))
        for (size_t r = 0; r < t.nrows; r++) (void)nb_refl_identifier(&t, t.id[r]);
    nb_refl_free(&t);
    return 0;
}
