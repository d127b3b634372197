/* nb-noise's CUDA backend: a frame's counting passes, a pixel a thread, with
 * the CPU's code for a pixel (nb_noise_pixel.inc on nb_deviates.h's Philox
 * generator).  Everything here is launch, memory and reduction code. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "nb_deviates.h"
#include "nb_noise.h"
#include "nb_noise_cuda.h"
}
#include "nb_cuda_device.cuh"

extern "C" void nb_noise_cuda_close(nb_noise_cuda *c);

#define NOISE_BLOCK 256

/* the chain on Philox's generator, each pixel's blocks made as it draws */
#define CT_FN(name) dev_##name
#define CT_QUAL __device__ static inline
#include "nb_noise_pixel_ctr.inc"

/* What a pass sums over the image: its Poisson photons (whole numbers, or
 * multiples of 1/16 beyond a million, so that their sum in double is exact
 * in any order: the CPU's) and its overloads */
typedef struct pass_totals {
    double photons;
    unsigned long long overloads;
} pass_totals;

/* One pixel a thread; the block's totals (a warp's by shuffles, the block's
 * warps' in shared memory) added to *totals by its first thread */
__global__ static void k_count(nb_noise_params p, nb_noise_pass ps, size_t pixels, pass_totals *totals)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    double photons = 0.0;
    long over = 0;
    if (i < pixels) {
        nb_ctr_rng r;
        nb_ctr_init(&r);
        photons = dev_pass_pixel(&p, &ps, &r, (int)(i % (size_t)ps.width), (int)(i / (size_t)ps.width), &over);
    }
    unsigned long long o = (unsigned long long)over;
    for (int off = 16; off > 0; off >>= 1) {
        photons += __shfl_down_sync(0xffffffffu, photons, off);
        o += __shfl_down_sync(0xffffffffu, o, off);
    }
    __shared__ double warp_photons[NOISE_BLOCK / 32];
    __shared__ unsigned long long warp_over[NOISE_BLOCK / 32];
    if (threadIdx.x % 32 == 0) warp_photons[threadIdx.x / 32] = photons, warp_over[threadIdx.x / 32] = o;
    __syncthreads();
    if (threadIdx.x == 0) {
        double block_photons = 0.0;
        unsigned long long block_over = 0;
        for (int w = 0; w < NOISE_BLOCK / 32; w++) block_photons += warp_photons[w], block_over += warp_over[w];
        if (block_photons != 0.0) atomicAdd(&totals->photons, block_photons);
        if (block_over) atomicAdd(&totals->overloads, block_over);
    }
}

struct nb_noise_cuda {
    cudaStream_t stream;
    float *d_in;
    int32_t *d_out;    /* a pass's counts, or its photons (the same size) */
    pass_totals *d_totals;
    size_t capacity;   /* pixels d_in and d_out hold */
};

static nb_status cuda_failed(const char *what, cudaError_t e)
{
    return nb_error_set(NB_ERR_IO, "CUDA: %s: %s", what, cudaGetErrorString(e));
}

/* room on the device for a pass of `pixels` */
static nb_status reserve(nb_noise_cuda *c, size_t pixels)
{
    if (pixels <= c->capacity) return NB_OK;
    cudaFree(c->d_in);
    cudaFree(c->d_out);
    c->d_in = NULL, c->d_out = NULL, c->capacity = 0;
    cudaError_t e;
    if ((e = cudaMalloc((void **)&c->d_in, pixels * sizeof(float))) != cudaSuccess ||
        (e = cudaMalloc((void **)&c->d_out, pixels * sizeof(int32_t))) != cudaSuccess)
        return cuda_failed("device memory for the image", e);
    c->capacity = pixels;
    return NB_OK;
}

/* nb_noise_device's run: the pass's input up, its pixels counted, its output
 * (counts or photons, never both) and totals back */
static nb_status run_pass(void *ctx, const nb_noise_params *p, const nb_noise_pass *pass, int height,
                          long *overloads, double *sum)
{
    nb_noise_cuda *c = (nb_noise_cuda *)ctx;
    const size_t pixels = (size_t)pass->width * (size_t)height;
    void *host_out = pass->photons ? (void *)pass->photons : (void *)pass->counts;
    if ((pass->photons && pass->counts) || !host_out)
        return nb_error_set(NB_ERR_USAGE, "a pass on the GPU writes counts or photons, one of them");
    *sum = 0.0;
    if (pixels == 0) return NB_OK;
    nb_status st = reserve(c, pixels);
    if (st) return st;
    nb_noise_pass dev = *pass;
    dev.in = c->d_in;
    dev.photons = pass->photons ? (float *)c->d_out : NULL;
    dev.counts = pass->counts ? c->d_out : NULL;
    pass_totals totals;
    cudaError_t e;
    if ((e = cudaMemcpyAsync(c->d_in, pass->in, pixels * sizeof(float), cudaMemcpyHostToDevice, c->stream)) ||
        (e = cudaMemsetAsync(c->d_totals, 0, sizeof *c->d_totals, c->stream)))
        return cuda_failed("copying the image to the device", e);
    const size_t blocks = (pixels + NOISE_BLOCK - 1) / NOISE_BLOCK;
    k_count<<<(unsigned)blocks, NOISE_BLOCK, 0, c->stream>>>(*p, dev, pixels, c->d_totals);
    if ((e = cudaGetLastError())) return cuda_failed("the counting kernel", e);
    if ((e = cudaMemcpyAsync(host_out, c->d_out, pixels * sizeof(int32_t), cudaMemcpyDeviceToHost, c->stream)) ||
        (e = cudaMemcpyAsync(&totals, c->d_totals, sizeof totals, cudaMemcpyDeviceToHost, c->stream)) ||
        (e = cudaStreamSynchronize(c->stream)))
        return cuda_failed("the counts back from the device", e);
    *sum = totals.photons;
    *overloads += (long)totals.overloads;
    return NB_OK;
}

extern "C" int nb_noise_cuda_compiled(void) { return 1; }

extern "C" void nb_noise_cuda_environment(void) { nb_cuda_one_queue(); }

extern "C" nb_status nb_noise_cuda_open(nb_noise_cuda **out, char *desc, size_t desc_size)
{
    *out = NULL;
    nb_status st = nb_cuda_first_device(desc, desc_size);
    if (st) return st;
    nb_noise_cuda *c = (nb_noise_cuda *)calloc(1, sizeof *c);
    if (!c) return nb_error_set(NB_ERR_NOMEM, "out of memory");
    cudaError_t e;
    if ((e = cudaStreamCreate(&c->stream)) != cudaSuccess ||
        (e = cudaMalloc((void **)&c->d_totals, sizeof *c->d_totals)) != cudaSuccess) {
        nb_noise_cuda_close(c);
        return nb_error_set(NB_ERR_UNSUPPORTED, "CUDA device unusable: %s", cudaGetErrorString(e));
    }
    *out = c;
    return NB_OK;
}

extern "C" void nb_noise_cuda_close(nb_noise_cuda *c)
{
    if (!c) return;
    cudaFree(c->d_in);
    cudaFree(c->d_out);
    cudaFree(c->d_totals);
    if (c->stream) cudaStreamDestroy(c->stream);
    free(c);
}

extern "C" nb_noise_device nb_noise_cuda_device(nb_noise_cuda *c)
{
    nb_noise_device d = {run_pass, c};
    return d;
}
