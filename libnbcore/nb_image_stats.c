/* nb_image_stats.c - an image's statistics in the reference's order (the
 * maximum and the first pixel holding it, the mean, the RMS, the RMS
 * deviation over the ROI, docs/physics.md 9): one row's figures
 * (nb_rowstats.inc), then the rows combined in row order, so that the
 * numbers are the same on any thread count and nb-sim can take each row's
 * while it renders.  nb-sim's statistics and nb-convert's scales come from
 * here. */
#include "nb_image.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* the library's copy of one row's figures; nb-sim's fast kernel compiles
 * the same source once per instruction set, to take a row's figures while
 * the row it has just rendered is in cache */
#define NB_ROW_STATS_NAME nb_row_stats_compute
#include "nb_rowstats.inc"

void nb_stats_from_rows(const nb_row_stats *rows, int height, nb_stats *out)
{
    double max_I = 0.0, sum = 0.0, sumsqr = 0.0;
    long sumn = 0, n2 = 0, max_index = -1;
    /* in row order: the same numbers on any thread count, and the reference's
     * maximum (the first pixel holding it) */
    for (int y = 0; y < height; y++) {
        if (rows[y].max > max_I) max_I = rows[y].max, max_index = rows[y].arg;
        sum += rows[y].sum, sumsqr += rows[y].sumsq, sumn += rows[y].n, n2 += rows[y].n_all;
    }
    out->rendered = sumn;
    if (sumn <= 0) sumn = 1;
    double avg = sum / sumn;
    if (sumn <= 1) sumn = 2;
    out->rms = sqrt(sumsqr / (sumn - 1));
    /* sum over ROI pixels of (v - avg)^2 = per row: m2 + n (row mean - avg)^2 */
    double dev = 0.0;
    for (int y = 0; y < height; y++) {
        if (rows[y].n_all == 0) continue;
        double d = rows[y].sum_all / rows[y].n_all - avg;
        dev += rows[y].m2_all + rows[y].n_all * d * d;
    }
    if (n2 <= 1) n2 = 2;
    out->rmsd = sqrt(dev / (n2 - 1));
    out->max_I = max_I;
    out->max_index = max_index;
    out->mean = avg;
}

nb_status nb_image_stats(const float *img, int width, int height, nb_roi roi, const unsigned char *mask,
                         nb_stats *out)
{
    nb_row_stats *rows = calloc(height > 0 ? (size_t)height : 1, sizeof *rows);
    if (!rows) return nb_error_set(NB_ERR_NOMEM, "out of memory for the image statistics");
#pragma omp parallel for schedule(static)
    for (int y = 0; y < height; y++)
        nb_row_stats_compute(img + (size_t)y * width, width, y, roi, mask ? mask + (size_t)y * width : NULL,
                             &rows[y]);
    nb_stats_from_rows(rows, height, out);
    free(rows);
    return NB_OK;
}
