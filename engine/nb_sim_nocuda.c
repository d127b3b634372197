/* The engine without its CUDA backend (nvcc was not found at build time):
 * every entry says so, naming no tool (nb-sim and nb-fit both render here). */
#include "nb_sim_cuda.h"

#define NO_CUDA "this build of nb has no CUDA backend (nvcc was not found when it was built)"

int nb_cuda_compiled(void) { return 0; }

void nb_cuda_environment(void) {}

nb_status nb_cuda_open(nb_cuda **ctx, char *desc, size_t desc_size)
{
    (void)desc, (void)desc_size;
    *ctx = NULL;
    return nb_error_set(NB_ERR_UNSUPPORTED, NO_CUDA);
}

void nb_cuda_close(nb_cuda *ctx) { (void)ctx; }

nb_status nb_render_cuda_grad(nb_cuda *ctx, const nb_kparams *kp, const nb_kdual *k, int nd, float *image,
                              float **grads, nb_render_result *res)
{
    (void)ctx, (void)kp, (void)k, (void)nd, (void)image, (void)grads, (void)res;
    return nb_error_set(NB_ERR_UNSUPPORTED, NO_CUDA);
}

nb_status nb_render_cuda_fast_grad(nb_cuda *ctx, const nb_fparams *fp, const nb_fgrad *fg, int nd, float *image,
                                   float **grads, nb_render_result *res)
{
    (void)ctx, (void)fp, (void)fg, (void)nd, (void)image, (void)grads, (void)res;
    return nb_error_set(NB_ERR_UNSUPPORTED, NO_CUDA);
}

nb_status nb_render_cuda(nb_cuda *ctx, const nb_kparams *kp, int use_double, float *image, nb_render_result *res)
{
    (void)ctx, (void)kp, (void)use_double, (void)image, (void)res;
    return nb_error_set(NB_ERR_UNSUPPORTED, NO_CUDA);
}
