#include "nb_image.h"

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

static int inside(nb_roi r, int x, int y) { return x >= r.xmin && x <= r.xmax && y >= r.ymin && y <= r.ymax; }

void nb_int_image(const float *img, int width, int height, nb_roi roi, double scale, double adc, uint16_t *out)
{
    for (int y = 0; y < height; y++)
        for (int x = 0; x < width; x++) {
            size_t i = (size_t)y * width + x;
            if (!inside(roi, x, y)) {
                out[i] = 0;
                continue;
            }
            double v = img[i] * scale + adc;
            if (v > 65535.0) v = 65535.0;
            if (v < 0.0) v = 0.0;
            /* the reference rounds in single precision: floorf(v + 0.5) */
            out[i] = (uint16_t)floorf((float)(v + 0.5));
        }
}

void nb_pgm_bytes(const float *img, int width, int height, nb_roi roi, double scale, uint8_t *out)
{
    for (int y = 0; y < height; y++)
        for (int x = 0; x < width; x++) {
            size_t i = (size_t)y * width + x;
            if (!inside(roi, x, y)) {
                out[i] = 0;
                continue;
            }
            double v = img[i] * scale;
            if (v > 255.0) v = 255.0;
            out[i] = v > 0.0 ? (uint8_t)v : 0;
        }
}

void nb_image_stats(const float *img, int width, int height, nb_roi roi, const unsigned char *mask,
                    nb_stats *out)
{
    /* per-row partial results, combined in row order: the same numbers on any
     * thread count (and the reference's max: the first pixel holding it) */
    double *rsum = calloc((size_t)height, sizeof(double)), *rsq = calloc((size_t)height, sizeof(double));
    double *rmax = calloc((size_t)height, sizeof(double)), *rdev = calloc((size_t)height, sizeof(double));
    long *rn = calloc((size_t)height, sizeof(long)), *rarg = calloc((size_t)height, sizeof(long));
    long *rn2 = calloc((size_t)height, sizeof(long));
    if (!rsum || !rsq || !rmax || !rdev || !rn || !rarg || !rn2) {
        free(rsum), free(rsq), free(rmax), free(rdev), free(rn), free(rarg), free(rn2);
        memset(out, 0, sizeof *out);
        out->max_index = -1;
        return;
    }
#pragma omp parallel for schedule(static)
    for (int y = 0; y < height; y++) {
        double mx = 0.0, sum = 0.0, sumsqr = 0.0;
        long n = 0, arg = -1;
        int x0 = roi.xmin < 0 ? 0 : roi.xmin, x1 = roi.xmax >= width ? width - 1 : roi.xmax;
        if (y < roi.ymin || y > roi.ymax) x1 = -1;
        for (int x = x0; x <= x1; x++) {
            size_t i = (size_t)y * width + x;
            if (mask && mask[i] == 0) continue;
            float v = img[i];
            if (v > mx) {
                mx = v;
                arg = (long)i;
            }
            sum += v;
            sumsqr += v * v; /* float product, as the reference */
            ++n;
        }
        rsum[y] = sum, rsq[y] = sumsqr, rmax[y] = mx, rarg[y] = arg, rn[y] = n;
    }
    double max_I = 0.0, sum = 0.0, sumsqr = 0.0, dev = 0.0;
    long sumn = 0, n2 = 0, max_index = -1;
    for (int y = 0; y < height; y++) {
        if (rmax[y] > max_I) max_I = rmax[y], max_index = rarg[y];
        sum += rsum[y], sumsqr += rsq[y], sumn += rn[y];
    }
    out->rendered = sumn;
    if (sumn <= 0) sumn = 1;
    double avg = sum / sumn;
    if (sumn <= 1) sumn = 2;
    out->rms = sqrt(sumsqr / (sumn - 1));
#pragma omp parallel for schedule(static)
    for (int y = 0; y < height; y++) {
        double d = 0.0;
        long n = 0;
        int x0 = roi.xmin < 0 ? 0 : roi.xmin, x1 = roi.xmax >= width ? width - 1 : roi.xmax;
        if (y < roi.ymin || y > roi.ymax) x1 = -1;
        for (int x = x0; x <= x1; x++) {
            double t = img[(size_t)y * width + x] - avg;
            d += t * t;
            ++n;
        }
        rdev[y] = d, rn2[y] = n;
    }
    for (int y = 0; y < height; y++) dev += rdev[y], n2 += rn2[y];
    if (n2 <= 1) n2 = 2;
    out->rmsd = sqrt(dev / (n2 - 1));
    out->max_I = max_I;
    out->max_index = max_index;
    out->mean = avg;
    free(rsum), free(rsq), free(rmax), free(rdev), free(rn), free(rarg), free(rn2);
}
