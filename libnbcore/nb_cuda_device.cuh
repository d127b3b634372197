/* nb_cuda_device.cuh - what nb-sim's and nb-noise's CUDA backends share: the
 * environment they run best in, and the first device opened and described.
 * Included by each .cu (its functions static, one copy a backend). */
#ifndef NB_CUDA_DEVICE_CUH
#define NB_CUDA_DEVICE_CUH

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

extern "C" {
#include "nb_error.h"
}

/* One stream works, so one hardware queue serves: the driver's default of 8
 * costs the context about 50 of its 100-130 ms to make (an H200, driver
 * 580), a tenth of a 100-frame series's whole run.  Set where the user has
 * not set it, before any thread starts and before the device is opened. */
static inline void nb_cuda_one_queue(void) { setenv("CUDA_DEVICE_MAX_CONNECTIONS", "1", 0); }

/* The first CUDA device made current, and desc (if not NULL) its name, e.g.
 * "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, CUDA runtime 13.0, driver 13.0)";
 * NB_ERR_UNSUPPORTED with the reason (no driver, no device) where there is
 * none. */
static inline nb_status nb_cuda_first_device(char *desc, size_t desc_size)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) return nb_error_set(NB_ERR_UNSUPPORTED, "no CUDA device: %s", cudaGetErrorString(e));
    if (n == 0) return nb_error_set(NB_ERR_UNSUPPORTED, "no CUDA device found");
    cudaDeviceProp prop;
    if ((e = cudaSetDevice(0)) != cudaSuccess || (e = cudaGetDeviceProperties(&prop, 0)) != cudaSuccess)
        return nb_error_set(NB_ERR_UNSUPPORTED, "CUDA device unusable: %s", cudaGetErrorString(e));
    int runtime = 0, driver = 0;
    cudaRuntimeGetVersion(&runtime);
    cudaDriverGetVersion(&driver);
    if (desc)
        snprintf(desc, desc_size, "%s (sm_%d%d, %d SMs, CUDA runtime %d.%d, driver %d.%d)", prop.name, prop.major,
                 prop.minor, prop.multiProcessorCount, runtime / 1000, runtime % 1000 / 10, driver / 1000,
                 driver % 1000 / 10);
    return NB_OK;
}

#endif
