/* libFuzzer target: SMV images (header rules and pixels), as -img, -mask and
 * nb-convert --import read them. */
#include "fuzz_common.h"
#include "smv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    nb_smv smv;
    if (!nb_smv_read(fuzz_file(data, size), 1, &smv)) {
        static const char *keys[] = {"DISTANCE", "BEAM_CENTER_X", "PIXEL_SIZE", "WAVELENGTH", "ADC_OFFSET", "PHI"};
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) (void)nb_smv_value(&smv, keys[k]);
        nb_smv_free(&smv);
    }
    return 0;
}
