/* nb-sim's CUDA backend: the physics of nb_physics.h (and the derivatives of
 * nb_physics_dual.h), one thread per pixel.
 * Everything here is launch, memory and reduction code. */
#include <cuda_runtime.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "nb_image.h"
#include "nb_physics.h"
#include "nb_physics_fgrad.h"
#include "nb_sim.h"
#include "nb_sim_cuda.h"
}
#include "nb_cuda_device.cuh"

#define BLOCK_X 128
/* the most copies one render times: every array of nb_cuda, uploaded, and the
 * image back (copies beyond these still run, untimed) */
#define NB_CUDA_COPY_PAIRS 32

/* ---- kernels ----------------------------------------------------------------- */

/* The block's solid angles summed into its row's (a warp's by shuffles, the
 * block's four in shared memory); a tricubic fallback flagged.  Every
 * thread of the block calls it. */
__device__ static void row_sums(double om, int trip, int s, double *row_omega, int *tripped)
{
    __shared__ double warp_sum[BLOCK_X / 32];
    if (trip) *tripped = 1;
    for (int w = 16; w > 0; w /= 2) om += __shfl_down_sync(0xffffffffu, om, w);
    if ((threadIdx.x & 31) == 0) warp_sum[threadIdx.x >> 5] = om;
    __syncthreads();
    if (threadIdx.x == 0) {
        double sum = 0.0;
        for (int w = 0; w < BLOCK_X / 32; w++) sum += warp_sum[w];
        atomicAdd(row_omega + s, sum);
    }
}

/* one thread per pixel of a row */
__global__ void k_double(nb_kparams kp, float *image, double *row_omega, int *tripped)
{
    int f = blockIdx.x * blockDim.x + threadIdx.x, s = blockIdx.y;
    double om = 0.0;
    int trip = 0;
    if (f < kp.fpixels) {
        float v = 0.0f;
        if (nb_pixel_rendered(&kp, f, s)) v = (float)nb_pixel_double(&kp, f, s, &om, &trip, NULL);
        image[(size_t)s * kp.fpixels + f] = v;
    }
    row_sums(om, trip, s, row_omega, tripped);
}

/* The fast path, one thread per pixel of a row, instantiated for what every
 * pixel of the plan allows (nb_fast_opts_of: SIMPLE, ONE_STEP, ONE_PAIR
 * fold into the code) and for the Miller index: in double (nb_pixel_fast's),
 * or by OFFSET from one reference per warp (nb_pixel_offset), built by the
 * warp's 32 threads together into shared memory with a copy of the pairs' A. */
template <int SIMPLE, int ONE_STEP, int ONE_PAIR, int OFFSET>
__device__ __forceinline__ void fast_pixels(const nb_fparams &fp, float *image, double *row_omega, int *tripped)
{
    const nb_pixel_opts o = {ONE_STEP, ONE_PAIR, SIMPLE};
    const int f = blockIdx.x * blockDim.x + threadIdx.x, s = blockIdx.y;
    extern __shared__ float4 shared_pairs[];
    double d0[3] = {0.0, 0.0, 0.0};
    const float *A4 = NULL;
    const nb_offset_ref *ref = NULL;
    if (OFFSET) {
        const int npairs = fp.kp.nsources * fp.kp.ncells, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
        float4 *A_s = shared_pairs;
        nb_offset_ref *ref_s = (nb_offset_ref *)(shared_pairs + 3 * npairs) + (size_t)warp * npairs;
        for (int i = threadIdx.x; i < 3 * npairs; i += blockDim.x) A_s[i] = ((const float4 *)fp.pair_A4)[i];
        const int mid = blockIdx.x * blockDim.x + warp * 32 + 16;
        nb_offset_direction(&fp, mid < fp.kp.fpixels ? mid : fp.kp.fpixels - 1, s, d0);
        for (int p = lane; p < npairs; p += 32) nb_offset_reference(&fp, d0, p, &ref_s[p]);
        __syncthreads();
        A4 = (const float *)A_s, ref = ref_s;
    }
    double om = 0.0;
    int trip = 0;
    if (f < fp.kp.fpixels) {
        float v = 0.0f;
        if (nb_pixel_rendered(&fp.kp, f, s))
            v = OFFSET ? nb_pixel_offset(&fp, o, A4, ref, d0, f, s, &om, &trip)
                       : nb_pixel_fast_opts(&fp, o, f, s, &om, &trip);
        image[(size_t)s * fp.kp.fpixels + f] = v;
    }
    row_sums(om, trip, s, row_omega, tripped);
}

/* The fast pixels as a kernel, its registers left to the compiler... */
template <int SIMPLE, int ONE_STEP, int ONE_PAIR, int OFFSET>
__global__ void k_fast(nb_fparams fp, float *image, double *row_omega, int *tripped)
{
    fast_pixels<SIMPLE, ONE_STEP, ONE_PAIR, OFFSET>(fp, image, row_omega, tripped);
}

/* ... or capped at 64 (8 blocks of BLOCK_X threads an SM).  The kernels of
 * sub-pixels or layers, and of several sources or cells with the index in
 * double, take 88 to 128 registers uncapped, and the cap's occupancy pays for
 * its spills; one pair in one step fits anyway (36 to 40, the same time).  The
 * one-step kernels with the index by offset take 54 to 80 uncapped and lose
 * with any bound, which moves the compiler to more registers, not fewer.
 * Measured on an H200 (ncu kernel time, uncapped / capped): oversample 268 /
 * 237 us, deriv-image 99 / 97, sources 1.21 / 1.14 ms, seed-4096 170 / 170;
 * and with a bound, mosaic 333 / 349 us, tricubic 179 / 199. */
template <int SIMPLE, int ONE_STEP, int ONE_PAIR, int OFFSET>
__global__ void __launch_bounds__(BLOCK_X, 8) k_fast_capped(nb_fparams fp, float *image, double *row_omega, int *tripped)
{
    fast_pixels<SIMPLE, ONE_STEP, ONE_PAIR, OFFSET>(fp, image, row_omega, tripped);
}

/* A fast kernel's entry and its shared memory. */
typedef struct fast_launch {
    const void *kernel;
    size_t shared_bytes;
    const char *index; /* how it takes the Miller index: "in double" or "by offset" */
} fast_launch;

/* The shared memory the index by offset takes: the pairs' A and one
 * reference per pair for each warp of the block. */
static size_t offset_shared_bytes(const nb_kparams *kp)
{
    const size_t npairs = (size_t)kp->nsources * kp->ncells;
    return npairs * (3 * sizeof(float4) + BLOCK_X / 32 * sizeof(nb_offset_ref));
}

/* at most this much shared memory a block (what a launch may take without
 * asking): the references of 260 pairs */
#define OFFSET_SHARED_MAX (48 * 1024)

/* The entry for each instantiation: capped but where one step takes the
 * index by offset (only the one taken is compiled). */
template <int S, int T, int P, int X>
static const void *fast_kernel(void)
{
    if constexpr (T && X) return (const void *)k_fast<S, T, P, X>;
    else return (const void *)k_fast_capped<S, T, P, X>;
}
#define FAST(S, T, P, X) {fast_kernel<S, T, P, X>(), 0, X ? "by offset" : "in double"}
/* The kernel for fp's pixels: the instantiation for its options, with the
 * index by offset where its reach allows it (NB_OFFSET_REACH_MAX), the
 * references fit in shared memory and a pixel takes more than one index
 * (with one, building the reference costs what it saves).
 * NB_CUDA_INDEX=double or offset forces either (the tests' way to check
 * both). */
static nb_status pick_fast(const nb_fparams *fp, fast_launch *out)
{
    static const fast_launch kernels[2][2][2][2] = {
        {{{FAST(0, 0, 0, 0), FAST(0, 0, 0, 1)}, {FAST(0, 0, 1, 0), FAST(0, 0, 1, 1)}},
         {{FAST(0, 1, 0, 0), FAST(0, 1, 0, 1)}, {FAST(0, 1, 1, 0), FAST(0, 1, 1, 1)}}},
        {{{FAST(1, 0, 0, 0), FAST(1, 0, 0, 1)}, {FAST(1, 0, 1, 0), FAST(1, 0, 1, 1)}},
         {{FAST(1, 1, 0, 0), FAST(1, 1, 0, 1)}, {FAST(1, 1, 1, 0), FAST(1, 1, 1, 1)}}}};
    const nb_pixel_opts o = nb_fast_opts_of(fp);
    const size_t shared = offset_shared_bytes(&fp->kp);
    const char *force = getenv("NB_CUDA_INDEX");
    int offset = !(o.one_pair && o.one_step) && fp->offset_reach <= NB_OFFSET_REACH_MAX && shared <= OFFSET_SHARED_MAX;
    if (force && *force && strcmp(force, "auto")) {
        if (!strcmp(force, "double")) offset = 0;
        else if (!strcmp(force, "offset")) offset = shared <= OFFSET_SHARED_MAX;
        else return nb_error_set(NB_ERR_USAGE, "NB_CUDA_INDEX='%s': not auto, double or offset", force);
    }
    *out = kernels[o.simple][o.one_step][o.one_pair][offset];
    out->shared_bytes = offset ? shared : 0;
    return NB_OK;
}
#undef FAST

/* The pixel and its derivatives: the double path's in dual numbers
 * (nb_pixel_grad), or the fast path's (nb_pixel_fast_grad: the fast
 * family's terms and their slopes in single-precision duals), picked by the
 * inputs' types. */
__device__ static nb_dual pixel_dual(const nb_kparams *kp, const nb_kdual *kd, int f, int s, double *om, int *trip)
{
    return nb_pixel_grad(kp, kd, f, s, om, trip);
}
__device__ static nb_fdual pixel_dual(const nb_fparams *fp, const nb_fgrad *fg, int f, int s, double *om, int *trip)
{
    return nb_pixel_fast_grad(fp, fg, f, s, om, trip);
}
__device__ static const nb_kparams *kparams_of(const nb_kparams *kp) { return kp; }
__device__ static const nb_kparams *kparams_of(const nb_fparams *fp) { return &fp->kp; }

/* the pixel and its derivatives: the image, then nd derivative images (P:
 * the plan's parameters, nb_kparams or nb_fparams; T: their tangents) */
template <typename D, typename P, typename T>
__global__ void k_grad(P params, T tangents, int nd, float *out, double *row_omega, int *tripped)
{
    const nb_kparams *kp = kparams_of(&params);
    int f = blockIdx.x * blockDim.x + threadIdx.x, s = blockIdx.y;
    const size_t npix = (size_t)kp->fpixels * kp->spixels;
    double om = 0.0;
    int trip = 0;
    if (f < kp->fpixels) {
        D v = {}; /* 0 outside the ROI and mask */
        if (nb_pixel_rendered(kp, f, s)) v = pixel_dual(&params, &tangents, f, s, &om, &trip);
        const size_t at = (size_t)s * kp->fpixels + f;
        out[at] = (float)v.v;
        /* unrolled to NB_DUAL_N, each store tested against nd: a loop to
         * the runtime nd indexes v.d by a variable and puts v in local memory */
#pragma unroll
        for (int j = 0; j < NB_DUAL_N; j++)
            if (j < nd) out[(size_t)(1 + j) * npix + at] = (float)v.d[j];
    }
    row_sums(om, trip, s, row_omega, tripped);
}

/* Load a kernel's code before its launch is timed: CUDA loads modules
 * lazily, at a kernel's first launch, and the load (about a millisecond)
 * would otherwise count as the first frame's kernel time. */
static void load_kernel(const void *kernel)
{
    cudaFuncAttributes attr;
    (void)cudaFuncGetAttributes(&attr, kernel);
}

/* ---- device memory ------------------------------------------------------------ */

/* A device copy of a host array, re-uploaded only when the array's contents
 * changed (the same plan across frames keeps its copies).  The key is the
 * contents, compared with a host copy of what was uploaded, not the host
 * address: nb-sim frees and reallocates its arrays every frame, malloc hands
 * the same addresses back, and the next frame's cells (rotated to its phi)
 * would otherwise render with the last frame's. */
typedef struct dev_array {
    void *uploaded; /* host copy of the bytes now on the device */
    size_t bytes;   /* their size; 0: nothing uploaded */
    size_t capacity;
    void *dev;
} dev_array;

struct nb_cuda {
    int device;
    cudaStream_t stream;
    dev_array mask, src_incident, src_lambda, cells, F;
    dev_array pairs, src_i, src_E, src_B, inv2l, Fgrid, pair_A4;
    dev_array dual_src_incident, dual_src_lambda, dual_cells; /* derivatives' inputs */
    dev_array fgrad_dA, fgrad_dhi; /* the fast path's: nb_fgrad's per-pair tangents */
    float *d_image;
    size_t image_bytes;
    float *h_pinned;
    size_t pinned_bytes;
    double *d_row_omega;
    int *d_tripped;
    int rows;
    /* every host-device copy of a render between a pair of these events, so
     * that -v can say how long the copies took on the GPU's own clock */
    cudaEvent_t copy_events[2 * NB_CUDA_COPY_PAIRS];
    int ncopies, have_events;
};

static nb_status cuda_error(cudaError_t e, const char *what)
{
    return nb_error_set(NB_ERR_IO, "CUDA: %s: %s", what, cudaGetErrorString(e));
}

/* A copy on the stream, timed by the next pair of copy events. */
static cudaError_t timed_copy(nb_cuda *c, void *to, const void *from, size_t bytes, cudaMemcpyKind kind)
{
    const int timed = c->have_events && c->ncopies < NB_CUDA_COPY_PAIRS;
    if (timed) cudaEventRecord(c->copy_events[2 * c->ncopies], c->stream);
    cudaError_t e = cudaMemcpyAsync(to, from, bytes, kind, c->stream);
    if (timed) cudaEventRecord(c->copy_events[2 * c->ncopies++ + 1], c->stream);
    return e;
}

/* The timed copies' total, once the stream has finished them; the next render
 * times its own. */
static double copy_seconds(nb_cuda *c)
{
    double total = 0.0;
    for (int i = 0; i < c->ncopies; i++) {
        float ms = 0.0f;
        if (cudaEventElapsedTime(&ms, c->copy_events[2 * i], c->copy_events[2 * i + 1]) == cudaSuccess)
            total += ms * 1e-3;
    }
    c->ncopies = 0;
    return total;
}

static nb_status upload(nb_cuda *c, dev_array *a, const void *host, size_t bytes, const char *what)
{
    cudaError_t e;
    if (!host || bytes == 0) {
        a->bytes = 0;
        return NB_OK;
    }
    if (a->bytes == bytes && memcmp(a->uploaded, host, bytes) == 0) return NB_OK;
    if (a->capacity < bytes) {
        if (a->dev) cudaFree(a->dev);
        free(a->uploaded);
        a->dev = NULL, a->uploaded = NULL, a->bytes = a->capacity = 0;
        if ((e = cudaMalloc(&a->dev, bytes)) != cudaSuccess) return cuda_error(e, what);
        if (!(a->uploaded = malloc(bytes))) return nb_error_set(NB_ERR_NOMEM, "out of memory for the %s", what);
        a->capacity = bytes;
    }
    memcpy(a->uploaded, host, bytes);
    a->bytes = 0; /* not valid until the copy is queued */
    if ((e = timed_copy(c, a->dev, a->uploaded, bytes, cudaMemcpyHostToDevice)) != cudaSuccess)
        return cuda_error(e, what);
    a->bytes = bytes;
    return NB_OK;
}

static void release(dev_array *a)
{
    if (a->dev) cudaFree(a->dev);
    free(a->uploaded);
    memset(a, 0, sizeof *a);
}

extern "C" int nb_cuda_compiled(void) { return 1; }

extern "C" void nb_cuda_environment(void) { nb_cuda_one_queue(); }

extern "C" nb_status nb_cuda_open(nb_cuda **out, char *desc, size_t desc_size)
{
    *out = NULL;
    nb_status st = nb_cuda_first_device(desc, desc_size);
    if (st) return st;
    nb_cuda *c = (nb_cuda *)calloc(1, sizeof *c);
    if (!c) return nb_error_set(NB_ERR_NOMEM, "out of memory");
    c->device = 0;
    cudaError_t e = cudaStreamCreate(&c->stream);
    if (e != cudaSuccess) {
        free(c);
        return nb_error_set(NB_ERR_UNSUPPORTED, "CUDA device unusable: %s", cudaGetErrorString(e));
    }
    c->have_events = 1;
    for (int i = 0; i < 2 * NB_CUDA_COPY_PAIRS && c->have_events; i++)
        if (cudaEventCreate(&c->copy_events[i]) != cudaSuccess) c->have_events = 0;
    *out = c;
    return NB_OK;
}

extern "C" void nb_cuda_close(nb_cuda *c)
{
    if (!c) return;
    dev_array *all[] = {&c->mask, &c->src_incident, &c->src_lambda, &c->cells, &c->F, &c->pairs,
                        &c->src_i, &c->src_E, &c->src_B, &c->inv2l, &c->Fgrid, &c->pair_A4,
                        &c->dual_src_incident, &c->dual_src_lambda, &c->dual_cells, &c->fgrad_dA, &c->fgrad_dhi};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) release(all[i]);
    if (c->d_image) cudaFree(c->d_image);
    if (c->h_pinned) cudaFreeHost(c->h_pinned);
    if (c->d_row_omega) cudaFree(c->d_row_omega);
    if (c->d_tripped) cudaFree(c->d_tripped);
    if (c->have_events)
        for (int i = 0; i < 2 * NB_CUDA_COPY_PAIRS; i++) cudaEventDestroy(c->copy_events[i]);
    cudaStreamDestroy(c->stream);
    free(c);
}

/* The double path's parameters with device pointers: the mask, sources,
 * cells and F grid uploaded where they changed. */
static nb_status upload_kparams(nb_cuda *c, const nb_kparams *kp, nb_kparams *dk)
{
    nb_status st;
    size_t npix = (size_t)kp->fpixels * kp->spixels;
    *dk = *kp;
    c->ncopies = 0; /* a render's copies are timed from its first upload */
    if ((st = upload(c, &c->mask, kp->mask, kp->mask ? npix : 0, "mask")) ||
        (st = upload(c, &c->src_incident, kp->src_incident, 3 * sizeof(double) * kp->nsources, "sources")) ||
        (st = upload(c, &c->src_lambda, kp->src_lambda, sizeof(double) * kp->nsources, "sources")) ||
        (st = upload(c, &c->cells, kp->cells, 9 * sizeof(double) * kp->ncells, "cells")))
        return st;
    size_t nF = kp->F.hkls ? (size_t)kp->F.h_range * kp->F.k_range * kp->F.l_range : 0;
    if ((st = upload(c, &c->F, kp->F.F, nF * sizeof(double), "F grid"))) return st;
    dk->mask = (const unsigned char *)c->mask.dev;
    dk->src_incident = (const double *)c->src_incident.dev;
    dk->src_lambda = (const double *)c->src_lambda.dev;
    dk->cells = (const double *)c->cells.dev;
    dk->F.F = (const double *)c->F.dev;
    return NB_OK;
}

/* The fast path's constants, built on the host, uploaded; df their device view. */
static nb_status upload_built_fparams(nb_cuda *c, const nb_kparams *dk, const nb_fparams *hf, nb_fparams *df)
{
    nb_status st;
    const nb_kparams *kp = &hf->kp;
    size_t nF = kp->F.hkls ? (size_t)kp->F.h_range * kp->F.k_range * kp->F.l_range : 0;
    size_t pad = hf->Fgrid ? 4 * ((size_t)kp->F.k_range * kp->F.l_range + kp->F.l_range + 1) : 0;
    if ((st = upload(c, &c->pairs, hf->pairs, sizeof(nb_pair) * kp->nsources * kp->ncells, "pairs")) ||
        (st = upload(c, &c->src_i, hf->src_i, 3 * sizeof(float) * kp->nsources, "sources")) ||
        (st = upload(c, &c->src_E, hf->src_E, 3 * sizeof(float) * kp->nsources, "sources")) ||
        (st = upload(c, &c->src_B, hf->src_B, 3 * sizeof(float) * kp->nsources, "sources")) ||
        (st = upload(c, &c->inv2l, hf->src_inv2lambda, sizeof(float) * kp->nsources, "sources")) ||
        (st = upload(c, &c->pair_A4, hf->pair_A4, 12 * sizeof(float) * kp->nsources * kp->ncells, "pairs")) ||
        (st = upload(c, &c->Fgrid, hf->Fgrid, hf->Fgrid ? (nF + pad) * sizeof(float) : 0, "F grid")))
        return st;
    *df = *hf;
    df->kp = *dk;
    df->pairs = (const nb_pair *)c->pairs.dev;
    df->src_i = (const float *)c->src_i.dev;
    df->src_E = (const float *)c->src_E.dev;
    df->src_B = (const float *)c->src_B.dev;
    df->src_inv2lambda = (const float *)c->inv2l.dev;
    df->Fgrid = (const float *)c->Fgrid.dev;
    df->pair_A4 = (const float *)c->pair_A4.dev;
    return NB_OK;
}

static nb_status upload_fparams(nb_cuda *c, const nb_kparams *kp, const nb_kparams *dk, nb_fparams *hf, nb_fparams *df)
{
    nb_status st = nb_fparams_build(kp, hf);
    return st ? st : upload_built_fparams(c, dk, hf, df);
}

/* Device and pinned host buffers for `floats` output values, the row sums
 * and the flag, zeroed for a launch. */
static nb_status ensure_buffers(nb_cuda *c, size_t floats, int rows)
{
    cudaError_t e;
    size_t bytes = floats * sizeof(float);
    if (c->image_bytes < bytes) {
        if (c->d_image) cudaFree(c->d_image);
        if (c->h_pinned) cudaFreeHost(c->h_pinned);
        c->d_image = NULL, c->h_pinned = NULL, c->image_bytes = 0;
        if ((e = cudaMalloc((void **)&c->d_image, bytes)) != cudaSuccess ||
            (e = cudaMallocHost((void **)&c->h_pinned, bytes)) != cudaSuccess)
            return cuda_error(e, "image buffers");
        c->image_bytes = bytes;
    }
    if (c->rows < rows) {
        if (c->d_row_omega) cudaFree(c->d_row_omega);
        if ((e = cudaMalloc((void **)&c->d_row_omega, sizeof(double) * rows)) != cudaSuccess)
            return cuda_error(e, "row sums");
        c->rows = rows;
    }
    if (!c->d_tripped && (e = cudaMalloc((void **)&c->d_tripped, sizeof(int))) != cudaSuccess)
        return cuda_error(e, "flags");
    cudaMemsetAsync(c->d_row_omega, 0, sizeof(double) * rows, c->stream);
    cudaMemsetAsync(c->d_tripped, 0, sizeof(int), c->stream);
    return NB_OK;
}

/* After the launch (recorded between ev0 and ev1, launch status e): the
 * `floats` values into c->h_pinned, the sums and times into res. */
static nb_status collect(nb_cuda *c, size_t floats, int rows, cudaEvent_t ev0, cudaEvent_t ev1, cudaError_t e,
                         double t0, nb_render_result *res)
{
    double *row_omega = (double *)malloc(sizeof(double) * rows);
    int tripped = 0;
    if (e == cudaSuccess)
        e = timed_copy(c, c->h_pinned, c->d_image, floats * sizeof(float), cudaMemcpyDeviceToHost);
    if (e == cudaSuccess && row_omega)
        e = cudaMemcpyAsync(row_omega, c->d_row_omega, sizeof(double) * rows, cudaMemcpyDeviceToHost, c->stream);
    if (e == cudaSuccess) e = cudaMemcpyAsync(&tripped, c->d_tripped, sizeof(int), cudaMemcpyDeviceToHost, c->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(c->stream);
    float kernel_ms = 0.0f;
    cudaEventElapsedTime(&kernel_ms, ev0, ev1);
    cudaEventDestroy(ev0);
    cudaEventDestroy(ev1);
    if (e != cudaSuccess || !row_omega) {
        free(row_omega);
        c->ncopies = 0;
        return e != cudaSuccess ? cuda_error(e, "render") : nb_error_set(NB_ERR_NOMEM, "out of memory");
    }
    res->omega_sum = 0.0;
    for (int s = 0; s < rows; s++) res->omega_sum += row_omega[s];
    free(row_omega);
    res->tripped = tripped;
    res->seconds = nb_now() - t0;
    res->kernel_seconds = kernel_ms * 1e-3;
    res->transfer_seconds = copy_seconds(c);
    return NB_OK;
}

/* The image from the pinned buffer into `image`, row by row on the host
 * threads, each row's statistics and CRC-32 taken while it is in cache (as
 * the CPU kernels take them), so that nb-sim makes no second pass over the
 * image on one thread.  At most FINISH_THREADS of them: OpenMP's threads
 * wait for the next frame spinning (nb-sim lets them go only while it waits
 * for its writer), and a whole machine's spinning starves
 * the stages after nb-sim (a 100-frame 1024^2 series into nb-convert on an
 * H200 host of 16 cores: 114-127 frames/s with 16, 168-177 with 4 or 2). */
#define FINISH_THREADS 4
static void finish_rows(const nb_kparams *kp, const float *from, float *image, nb_render_result *res)
{
    const nb_roi roi = {kp->roi_xmin, kp->roi_xmax, kp->roi_ymin, kp->roi_ymax};
    const size_t w = (size_t)kp->fpixels;
    int threads = omp_get_max_threads();
    if (threads > FINISH_THREADS) threads = FINISH_THREADS;
#pragma omp parallel for schedule(static) num_threads(threads) if (kp->spixels >= 64)
    for (int s = 0; s < kp->spixels; s++) {
        float *row = image + (size_t)s * w;
        memcpy(row, from + (size_t)s * w, w * sizeof(float));
        if (!res->row_stats) continue;
        nb_row_stats_compute(row, kp->fpixels, s, roi, kp->mask ? kp->mask + (size_t)s * w : NULL, &res->row_stats[s]);
        if (res->row_crc) nb_payload_crc_take(res->row_crc, (size_t)s, row);
    }
    res->row_stats_filled = res->row_stats != NULL;
}

extern "C" nb_status nb_render_cuda(nb_cuda *c, const nb_kparams *kp, int use_double, float *image,
                                    nb_render_result *res)
{
    nb_status st;
    double t0 = nb_now();
    size_t npix = (size_t)kp->fpixels * kp->spixels;
    nb_kparams dk;
    nb_fparams hf, df;
    memset(&hf, 0, sizeof hf);
    memset(&df, 0, sizeof df);
    if ((st = upload_kparams(c, kp, &dk))) return st;
    if (!use_double) st = upload_fparams(c, kp, &dk, &hf, &df);
    if (!st) st = ensure_buffers(c, npix, kp->spixels);
    if (st) {
        nb_fparams_free(&hf);
        return st;
    }
    dim3 block(BLOCK_X), grid((kp->fpixels + BLOCK_X - 1) / BLOCK_X, kp->spixels);
    fast_launch launch = {(const void *)k_double, 0, "in double"};
    if (!use_double && (st = pick_fast(&hf, &launch))) {
        nb_fparams_free(&hf);
        return st;
    }
    load_kernel(launch.kernel);
    static const char *said; /* -v says which index once, and again where it changes */
    if (!use_double && said != launch.index)
        nb_info("  GPU fast kernel: the Miller index %s (reach %.3g)", said = launch.index, hf.offset_reach);
    void *args_double[] = {&dk, &c->d_image, &c->d_row_omega, &c->d_tripped};
    void *args_fast[] = {&df, &c->d_image, &c->d_row_omega, &c->d_tripped};
    cudaEvent_t ev0, ev1;
    cudaEventCreate(&ev0);
    cudaEventCreate(&ev1);
    cudaEventRecord(ev0, c->stream);
    cudaError_t e = cudaLaunchKernel(launch.kernel, grid, block, use_double ? args_double : args_fast,
                                     launch.shared_bytes, c->stream);
    if (e == cudaSuccess) e = cudaGetLastError();
    cudaEventRecord(ev1, c->stream);
    st = collect(c, npix, kp->spixels, ev0, ev1, e, t0, res);
    nb_fparams_free(&hf);
    if (!st) finish_rows(kp, c->h_pinned, image, res);
    return st;
}

/* Launch k_grad on the device views of the plan's parameters and their
 * tangents (uploaded by the caller, timed from t0): the image (NULL: not
 * wanted) and grads[0 .. nd-1] back from the kernel's one buffer. */
template <typename D, typename P, typename T>
static nb_status launch_grad(nb_cuda *c, const nb_kparams *kp, P params, T tangents, int nd, float *image,
                             float **grads, nb_render_result *res, double t0)
{
    nb_status st;
    const size_t npix = (size_t)kp->fpixels * kp->spixels;
    if ((st = ensure_buffers(c, (size_t)(1 + nd) * npix, kp->spixels))) return st;
    dim3 block(BLOCK_X), grid((kp->fpixels + BLOCK_X - 1) / BLOCK_X, kp->spixels);
    load_kernel((const void *)k_grad<D, P, T>);
    cudaEvent_t ev0, ev1;
    cudaEventCreate(&ev0);
    cudaEventCreate(&ev1);
    cudaEventRecord(ev0, c->stream);
    k_grad<D, P, T><<<grid, block, 0, c->stream>>>(params, tangents, nd, c->d_image, c->d_row_omega, c->d_tripped);
    cudaError_t e = cudaGetLastError();
    cudaEventRecord(ev1, c->stream);
    if ((st = collect(c, (size_t)(1 + nd) * npix, kp->spixels, ev0, ev1, e, t0, res))) return st;
    if (image) memcpy(image, c->h_pinned, npix * sizeof(float));
    for (int j = 0; j < nd; j++) memcpy(grads[j], c->h_pinned + (size_t)(1 + j) * npix, npix * sizeof(float));
    res->row_stats_filled = 0;
    return NB_OK;
}

/* the double path: k's followed arrays uploaded, the rest passed by value */
extern "C" nb_status nb_render_cuda_grad(nb_cuda *c, const nb_kparams *kp, const nb_kdual *k, int nd, float *image,
                                         float **grads, nb_render_result *res)
{
    nb_status st;
    const double t0 = nb_now();
    nb_kparams dk;
    nb_kdual dkd = *k;
    if ((st = upload_kparams(c, kp, &dk)) ||
        (st = upload(c, &c->dual_src_incident, k->src_incident, 3 * sizeof(nb_dual) * kp->nsources, "sources")) ||
        (st = upload(c, &c->dual_src_lambda, k->src_lambda, sizeof(nb_dual) * kp->nsources, "sources")) ||
        (st = upload(c, &c->dual_cells, k->cells, 9 * sizeof(nb_dual) * kp->ncells, "cells")))
        return st;
    dkd.src_incident = (const nb_dual *)c->dual_src_incident.dev;
    dkd.src_lambda = (const nb_dual *)c->dual_src_lambda.dev;
    dkd.cells = (const nb_dual *)c->dual_cells.dev;
    return launch_grad<nb_dual>(c, kp, dk, dkd, nd, image, grads, res, t0);
}

/* the fast path: the plan's fast parameters and the pairs' tangents (dA and
 * dhi) uploaded; the CPU's row tables are not read here */
extern "C" nb_status nb_render_cuda_fast_grad(nb_cuda *c, const nb_fparams *fp, const nb_fgrad *fg, int nd,
                                              float *image, float **grads, nb_render_result *res)
{
    nb_status st;
    const double t0 = nb_now();
    const nb_kparams *kp = &fp->kp;
    const size_t npairs = (size_t)kp->nsources * kp->ncells;
    nb_kparams dk;
    nb_fparams df;
    nb_fgrad dfg = *fg;
    if ((st = upload_kparams(c, kp, &dk)) || (st = upload_built_fparams(c, &dk, fp, &df)) ||
        (st = upload(c, &c->fgrad_dA, fg->dA, npairs * 9 * NB_DUAL_N * sizeof(float), "derivative inputs")) ||
        (st = upload(c, &c->fgrad_dhi, fg->dhi, npairs * 3 * NB_DUAL_N * sizeof(float), "derivative inputs")))
        return st;
    dfg.dA = (const float *)c->fgrad_dA.dev;
    dfg.dhi = (const float *)c->fgrad_dhi.dev;
    dfg.dAaxes = NULL, dfg.slow_scratch = NULL;
    return launch_grad<nb_fdual>(c, kp, df, dfg, nd, image, grads, res, t0);
}
