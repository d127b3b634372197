/* libFuzzer target: Fdump.bin, nanoBragg's binary F cache. */
#include "fuzz_common.h"
#include "hkl.h"
#include "nb_hkl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    nb_hkl h;
    nb_hkl_init(&h);
    if (!nb_hkl_read_fdump(fuzz_file(data, size), 0.0, &h)) nb_hkl_free(&h);
    return 0;
}
