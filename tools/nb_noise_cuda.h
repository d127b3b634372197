/* nb_noise_cuda.h - nb-noise's CUDA backend (built when nvcc is found).
 *
 * A frame's counting passes (nb_noise.h's nb_noise_device) on the GPU, a
 * pixel a thread: nb_noise_pixel.inc's chain on nb_deviates.h's Philox
 * generator and deviates, the code the CPU counts with, compiled without
 * contraction as the host's is, so that a pixel gets the CPU's counts.  Only
 * launch, memory and reduction code is CUDA-specific.  The point-spread
 * function, between the Poisson pass and the counting, stays on the CPU. */
#ifndef NB_NOISE_CUDA_H
#define NB_NOISE_CUDA_H

#include <stddef.h>

#include "nb_noise.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nb_noise_cuda nb_noise_cuda;

/* Set the CUDA environment nb-noise counts best in (where the user has not
 * set it; as nb-sim's): before any thread starts, since it changes the
 * environment, and before nb_noise_cuda_open, which reads it. */
void nb_noise_cuda_environment(void);

/* Open the first CUDA device; NB_ERR_UNSUPPORTED with the reason (no driver,
 * no device, a build without CUDA) when there is none.  desc receives the
 * device's name, e.g. "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, CUDA runtime 13.0, driver 13.0)". */
nb_status nb_noise_cuda_open(nb_noise_cuda **ctx, char *desc, size_t desc_size);
void nb_noise_cuda_close(nb_noise_cuda *ctx);

/* The passes of nb_noise_frame_on on ctx's device */
nb_noise_device nb_noise_cuda_device(nb_noise_cuda *ctx);

/* 1 when this binary has the CUDA backend compiled in. */
int nb_noise_cuda_compiled(void);

#ifdef __cplusplus
}
#endif

#endif
