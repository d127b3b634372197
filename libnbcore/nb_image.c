/* nb_image.c - what nb-convert derives from a float image, by the reference's
 * rules (docs/physics.md 9 and 12): the automatic int and PGM scales, the int
 * image (whole, or a band of rows on the fly, clipped to 16 bits), the 8-bit
 * preview, and the first pixel that is not finite.  The image statistics the
 * scales are taken from: nb_image_stats.c. */
#include "nb_image.h"

#include "nb_tuning.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

double nb_int_scale(double requested, double max_I)
{
    if (requested > 0.0) return requested;
    return max_I > 0.0 ? 55000.0 / max_I : 1.0;
}

double nb_pgm_scale(double requested, double int_scale, double rmsd)
{
    if (requested > 0.0) return requested;
    return rmsd > 0.0 ? 250.0 / (5.0 * rmsd) : int_scale;
}

/* The ROI's columns on row y, clamped to the image: [*x0, *x1], empty when x1 < x0. */
static void roi_columns(nb_roi r, int width, int y, int *x0, int *x1)
{
    *x0 = r.xmin < 0 ? 0 : r.xmin;
    *x1 = r.xmax >= width ? width - 1 : r.xmax;
    if (y < r.ymin || y > r.ymax) *x1 = *x0 - 1;
}

/* The clamps below are selects only when GCC may ignore floating-point
 * exceptions (the values are the same either way): then the loops vectorise. */
#if defined(__GNUC__) && !defined(__clang__)
#define NB_VECTOR_CLAMPS __attribute__((optimize("no-trapping-math"), target_clones("avx512f", "avx2", "default")))
#else
#define NB_VECTOR_CLAMPS
#endif

void nb_int_image(const float *img, int width, int height, nb_roi roi, double scale, double adc, int32_t *out)
{
    nb_int_image_rows(img, width, 0, height, roi, scale, adc, out);
}

/* Whether any of n values is NaN or infinite: a vector test of the exponent bits. */
static inline __attribute__((always_inline)) int any_nonfinite(const float *v, size_t n)
{
    const uint32_t *w = (const uint32_t *)(const void *)v;
    uint32_t bad = 0;
#pragma omp simd reduction(| : bad)
    for (size_t i = 0; i < n; i++) bad |= (w[i] & 0x7f800000u) == 0x7f800000u;
    return bad != 0;
}

/* Columns x0..x1 of one row as int image values (the caller zeroes the rest). */
static inline __attribute__((always_inline)) void int_row(const float *in, int x0, int x1, double scale, double adc,
                                                          int32_t *o)
{
#pragma omp simd
    for (int x = x0; x <= x1; x++) {
        double v = in[x] * scale + adc;
        /* the reference clips v to 0..65535, then rounds in single
         * precision, floorf(v + 0.5).  v -> (float)(v + 0.5) does not
         * decrease, so clipping its result to 0.5..65535.5 instead gives the
         * same numbers (for all but NaN, which callers reject first), with
         * the clipping in float, twice the lanes; the value is then
         * positive, so truncation is the floor */
        float w = (float)(v + 0.5);
        w = w > 0.5f ? w : 0.5f;
        w = w < 65535.5f ? w : 65535.5f;
        o[x] = (int32_t)w;
    }
}

NB_VECTOR_CLAMPS void nb_int_image_rows(const float *img, int width, int y0, int ny, nb_roi roi, double scale,
                                        double adc, int32_t *out)
{
    /* threads only for large pieces: a few rows are quicker on one, and idle
     * OpenMP threads spin, taking a core from the other stages of a pipe */
#pragma omp parallel for schedule(static) if ((size_t)ny * (size_t)width >= nb_parallel_min())
    for (int y = y0; y < y0 + ny; y++) {
        const float *in = img + (size_t)y * width;
        int32_t *o = out + (size_t)(y - y0) * width;
        int x0, x1;
        roi_columns(roi, width, y, &x0, &x1);
        if (x1 < x0) {
            memset(o, 0, (size_t)width * sizeof *o);
            continue;
        }
        memset(o, 0, (size_t)x0 * sizeof *o);
        memset(o + x1 + 1, 0, (size_t)(width - 1 - x1) * sizeof *o);
        int_row(in, x0, x1, scale, adc, o);
    }
}

/* One pass per row while it is in cache: the finite check, the conversion
 * (to int32 in a block that stays in L1, where it vectorises at full width)
 * and the packing to 16 bits. */
NB_VECTOR_CLAMPS size_t nb_int16_image_rows_checked(const float *rows, int width, int y0, int ny, nb_roi roi,
                                                    double scale, double adc, uint16_t *out)
{
    enum { BLOCK = 1024 };
    int32_t block[BLOCK];
    for (int y = y0; y < y0 + ny; y++) {
        const float *in = rows + (size_t)(y - y0) * width;
        if (any_nonfinite(in, (size_t)width)) return (size_t)(y - y0) * width + nb_first_nonfinite(in, (size_t)width);
        uint16_t *o = out + (size_t)(y - y0) * width;
        int x0, x1;
        roi_columns(roi, width, y, &x0, &x1);
        if (x1 < x0) x0 = width, x1 = width - 1;
        memset(o, 0, (size_t)x0 * sizeof *o);
        memset(o + x1 + 1, 0, (size_t)(width - 1 - x1) * sizeof *o);
        for (int b0 = x0; b0 <= x1; b0 += BLOCK) {
            int b1 = x1 - b0 < BLOCK ? x1 : b0 + BLOCK - 1;
            int_row(in + b0, 0, b1 - b0, scale, adc, block);
#pragma omp simd
            for (int x = 0; x <= b1 - b0; x++) o[b0 + x] = (uint16_t)block[x]; /* 0..65535 already */
        }
    }
    return (size_t)ny * width;
}

NB_VECTOR_CLAMPS void nb_pgm_bytes(const float *img, int width, int height, nb_roi roi, double scale, uint8_t *out)
{
#pragma omp parallel for schedule(static)
    for (int y = 0; y < height; y++) {
        const float *in = img + (size_t)y * width;
        uint8_t *o = out + (size_t)y * width;
        int x0, x1;
        roi_columns(roi, width, y, &x0, &x1);
        if (x1 < x0) {
            memset(o, 0, (size_t)width);
            continue;
        }
        memset(o, 0, (size_t)x0);
        memset(o + x1 + 1, 0, (size_t)(width - 1 - x1));
#pragma omp simd
        for (int x = x0; x <= x1; x++) {
            double v = in[x] * scale;
            v = v > 255.0 ? 255.0 : v;
            o[x] = v > 0.0 ? (uint8_t)v : 0;
        }
    }
}

size_t nb_first_nonfinite(const float *img, size_t n)
{
    /* blocks checked in parallel, the first bad block searched afterwards */
    enum { BLOCK = 1 << 16 };
    size_t nblocks = (n + BLOCK - 1) / BLOCK, first_bad = nblocks;
#pragma omp parallel for schedule(static) reduction(min : first_bad) if (n >= nb_parallel_min())
    for (size_t b = 0; b < nblocks; b++) {
        size_t len = b + 1 < nblocks ? BLOCK : n - b * BLOCK;
        if (any_nonfinite(img + b * BLOCK, len) && b < first_bad) first_bad = b;
    }
    if (first_bad == nblocks) return n;
    for (size_t i = first_bad * BLOCK; i < n; i++)
        if (!isfinite(img[i])) return i;
    return n;
}
