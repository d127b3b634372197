/* nb-noise without the CUDA backend (nvcc was not found at build time). */
#include "nb_noise_cuda.h"

int nb_noise_cuda_compiled(void) { return 0; }

void nb_noise_cuda_environment(void) {}

nb_status nb_noise_cuda_open(nb_noise_cuda **ctx, char *desc, size_t desc_size)
{
    (void)desc, (void)desc_size;
    *ctx = NULL;
    return nb_error_set(NB_ERR_UNSUPPORTED, "this nb-noise was built without CUDA (no nvcc at build time)");
}

void nb_noise_cuda_close(nb_noise_cuda *ctx) { (void)ctx; }

nb_noise_device nb_noise_cuda_device(nb_noise_cuda *ctx)
{
    nb_noise_device none = {NULL, ctx};
    return none;
}
