/* png.c - 8-bit greyscale PNG previews of float images, with the automatic
 * contrast of png.h, written with zlib alone (no libpng). */
#include "png.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "frame_write.h"
#include "nb_tuning.h"
#include "nb_util.h"

/* ---- grey levels ------------------------------------------------------------ */

static void swapf(float *a, float *b)
{
    float t = *a;
    *a = *b;
    *b = t;
}

/* k-th smallest of a[0..n) (a is reordered); three-way partitions, so images
 * with many equal values stay linear. */
static float select_kth(float *a, size_t n, size_t k)
{
    size_t lo = 0, hi = n;
    while (hi - lo > 1) {
        float x = a[lo], y = a[lo + (hi - lo) / 2], z = a[hi - 1];
        float pivot = (x < y) ? ((y < z) ? y : (x < z ? z : x)) : ((x < z) ? x : (y < z ? z : y));
        size_t lt = lo, i = lo, gt = hi;
        while (i < gt) {
            if (a[i] < pivot) swapf(&a[lt++], &a[i++]);
            else if (a[i] > pivot) swapf(&a[i], &a[--gt]);
            else i++;
        }
        if (k < lt) hi = lt;
        else if (k >= gt) lo = gt;
        else return pivot;
    }
    return a[lo];
}

/* the automatic scale's top: 99.5th percentile (nearest rank) of the positive
 * finite pixels, 0 when there are none */
static nb_status auto_top(const float *p, size_t n, double *top)
{
    size_t count = 0;
    *top = 0;
    for (size_t i = 0; i < n; i++)
        if (p[i] > 0 && isfinite(p[i])) count++;
    if (count == 0) return NB_OK;
    float *v;
    nb_status st = nb_calloc((void **)&v, count, sizeof(float), "the PNG contrast stretch");
    if (st) return st;
    size_t j = 0;
    for (size_t i = 0; i < n; i++)
        if (p[i] > 0 && isfinite(p[i])) v[j++] = p[i];
    size_t k = (size_t)ceil(0.995 * (double)count);
    k = k == 0 ? 0 : k - 1;
    if (k >= count) k = count - 1;
    *top = select_kth(v, count, k);
    free(v);
    return NB_OK;
}

static void map_row(const float *p, int w, double scale, double top, unsigned char *out)
{
    for (int x = 0; x < w; x++) {
        double v = p[x], g;
        if (isnan(v) || v <= 0) {
            out[x] = 0;
            continue;
        }
        if (scale > 0) g = v * scale;
        else if (top > 0) g = 255.0 * sqrt(v >= top ? 1.0 : v / top);
        else g = 0;   /* no positive finite pixel: only +inf can get here */
        if (isinf(v)) g = 255;
        out[x] = g >= 255 ? 255 : (unsigned char)floor(g + 0.5);
    }
}

nb_status nb_png_preview_levels(const float *pixels, int width, int height, double scale, unsigned char *out,
                                double *top)
{
    double t = NAN;
    if (width <= 0 || height <= 0)
        return nb_error_set(NB_ERR_DATA, "image size %d x %d is empty", width, height);
    if (!(scale > 0)) {
        nb_status st = auto_top(pixels, (size_t)width * (size_t)height, &t);
        if (st) return st;
    }
    for (int y = 0; y < height; y++)
        map_row(pixels + (size_t)y * (size_t)width, width, scale, t, out + (size_t)y * (size_t)width);
    if (top) *top = t;
    return NB_OK;
}

/* ---- PNG chunks ---------------------------------------------------------------- */

static void be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

/* returns 1 when written */
static int put_chunk(FILE *fp, const char type[4], const unsigned char *data, uint32_t len)
{
    unsigned char head[8], tail[4];
    be32(head, len);
    memcpy(head + 4, type, 4);
    uLong crc = crc32(0L, Z_NULL, 0);
    crc = crc32(crc, head + 4, 4);
    if (len) crc = crc32(crc, data, len);
    be32(tail, (uint32_t)crc);
    return fwrite(head, 1, 8, fp) == 8 && (len == 0 || fwrite(data, 1, len, fp) == len) &&
           fwrite(tail, 1, 4, fp) == 4;
}

#define IDAT_MAX 65536

nb_status nb_png_write_preview(const char *path, const float *pixels, int width, int height, double scale)
{
    if (width <= 0 || height <= 0)
        return nb_error_set(NB_ERR_DATA, "cannot write '%s': image size %d x %d is empty", path, width, height);
    double top = NAN;
    nb_status st;
    if (!(scale > 0)) {
        st = auto_top(pixels, (size_t)width * (size_t)height, &top);
        if (st) return st;
    }

    nb_outfile *of;
    st = nb_outfile_open(&of, path, 0);
    if (st) return st;
    FILE *fp = nb_outfile_fp(of);

    unsigned char *row = NULL, *zout = NULL;
    st = nb_calloc((void **)&row, (size_t)width + 1, 1, "a PNG row");
    if (!st) st = nb_calloc((void **)&zout, IDAT_MAX, 1, "the PNG data");
    if (st) {
        free(row);
        nb_outfile_abort(of);
        return st;
    }

    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (deflateInit(&zs, 6) != Z_OK) {
        free(row);
        free(zout);
        nb_outfile_abort(of);
        return nb_error_set(NB_ERR_NOMEM, "cannot write '%s': zlib: %s", path, zs.msg ? zs.msg : "deflateInit failed");
    }

    static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
    unsigned char ihdr[13];
    be32(ihdr, (uint32_t)width);
    be32(ihdr + 4, (uint32_t)height);
    ihdr[8] = 8;    /* bit depth */
    ihdr[9] = 0;    /* greyscale */
    ihdr[10] = 0;   /* deflate */
    ihdr[11] = 0;   /* adaptive filtering, type 0 used on every row */
    ihdr[12] = 0;   /* no interlace */
    static const char text[] = "Software\0nb toolkit";
    int okw = fwrite(sig, 1, 8, fp) == 8 && put_chunk(fp, "IHDR", ihdr, 13) &&
              put_chunk(fp, "tEXt", (const unsigned char *)text, sizeof text - 1);
    int zerr = Z_OK;

    zs.next_out = zout;
    zs.avail_out = IDAT_MAX;
    for (int y = 0; okw && zerr == Z_OK && y <= height; y++) {
        int flush = Z_NO_FLUSH;
        if (y < height) {
            row[0] = 0;   /* filter: none */
            map_row(pixels + (size_t)y * (size_t)width, width, scale, top, row + 1);
            zs.next_in = row;
            zs.avail_in = (uInt)width + 1;
        } else {
            zs.next_in = row;
            zs.avail_in = 0;
            flush = Z_FINISH;
        }
        for (;;) {
            int r = deflate(&zs, flush);
            if (r == Z_STREAM_ERROR) {
                zerr = r;
                break;
            }
            if (zs.avail_out == 0 || (r == Z_STREAM_END && zs.avail_out < IDAT_MAX)) {
                okw = put_chunk(fp, "IDAT", zout, IDAT_MAX - zs.avail_out);
                zs.next_out = zout;
                zs.avail_out = IDAT_MAX;
                if (!okw) break;
            }
            if (r == Z_STREAM_END) break;
            if (flush == Z_NO_FLUSH && zs.avail_in == 0 && zs.avail_out > 0) break;
            if (r == Z_BUF_ERROR && zs.avail_out > 0) {   /* no progress possible */
                zerr = r;
                break;
            }
        }
    }
    deflateEnd(&zs);
    if (okw && zerr == Z_OK) okw = put_chunk(fp, "IEND", NULL, 0);
    int e = errno;
    free(row);
    free(zout);
    if (zerr != Z_OK) {
        nb_outfile_abort(of);
        return nb_error_set(NB_ERR_IO, "cannot write '%s': zlib error %d", path, zerr);
    }
    st = nb_outfile_commit(of);
    if (!okw && !st) st = nb_error_set(NB_ERR_IO, "cannot write '%s': %s", path, strerror(e ? e : EIO));
    return st;
}

/* ---- a frame as a PNG (the registry's write_image) ------------------------- */

/* The preview: of the counts less their ADC offset (so that the background
 * shows the noise a detector would, and -1 gaps stay black), or of the
 * photons. */
nb_status nb_png_write_frame(const nb_frame_image *img)
{
    const nb_frame *fr = img->fr;
    if (!img->counts) return nb_png_write_preview(img->path, fr->photons, fr->width, fr->height, 0.0);
    size_t n = (size_t)fr->width * fr->height;
    float *v;
    nb_status st = nb_alloc_large((void **)&v, n, sizeof *v, "the PNG preview");
    if (st) return st;
    for (size_t i = 0; i < n; i++) v[i] = (float)((double)img->counts[i] - img->adc);
    st = nb_png_write_preview(img->path, v, fr->width, fr->height, 0.0);
    free(v);
    return st;
}
