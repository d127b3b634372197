/* test_formats.c - CBF, TIFF and PNG writers (and the CBF reader); the format
 * registry and its one image reader (registry.h). */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "cbf.h"
#include "json.h"
#include "nb_error.h"
#include "nb_image.h"
#include "nb_util.h"
#include "pgm.h"
#include "png.h"
#include "registry.h"
#include "nb_stream.h"
#include "tap.h"
#include "tiff.h"

#ifdef NB_HAVE_TIFF
#include <tiffio.h>
#endif

static char dir[64];

static char *tpath(const char *name)
{
    static char buf[8][256];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, 256, "%s/%s", dir, name);
    return p;
}

static int exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

static int write_bytes(const char *p, const void *data, size_t n)
{
    FILE *fp = fopen(p, "wb");
    if (!fp) return 0;
    int good = fwrite(data, 1, n, fp) == n;
    return fclose(fp) == 0 && good;
}

static uint64_t rng = 88172645463325252ull;
static uint32_t xr(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

static nb_image_meta test_meta(int w, int h)
{
    nb_image_meta m;
    memset(&m, 0, sizeof m);
    m.fpixels = w;
    m.spixels = h;
    m.pixel_size = 172e-6;
    m.distance = 0.151;
    m.close_distance = 0.150;
    m.wavelength = 1.0e-10;
    m.beam_f = 0.045;
    m.beam_s = 0.040;
    m.osc_start = 0;
    m.osc_range = 1;
    m.exposure = 0.5;
    m.count_cutoff = 1048575;
    m.sensor_thickness = 450e-6;
    m.frame = 3;
    m.command_line = "nb-convert -o x.cbf   # a \"quoted\" : test";
    return m;
}

/* ---- CBF ------------------------------------------------------------------ */

static int cbf_roundtrip(const char *name, const int32_t *v, int w, int h)
{
    nb_image_meta m = test_meta(w, h);
    const char *p = tpath(name);
    nb_status st = nb_cbf_write(p, v, &m);
    if (st) {
        printf("# write: %s\n", nb_error_message());
        return 0;
    }
    int32_t *back;
    int bw, bh;
    st = nb_cbf_read(p, &back, &bw, &bh);
    if (st) {
        printf("# read: %s\n", nb_error_message());
        return 0;
    }
    int same = bw == w && bh == h && memcmp(back, v, (size_t)w * h * sizeof(int32_t)) == 0;
    free(back);
    return same;
}

static char *slurp(const char *p, size_t *len)
{
    char *d;
    if (nb_read_file(p, &d, len)) return NULL;
    return d;
}

static void test_cbf(void)
{
    /* special values: every delta class, int32 extremes, the -2^31 delta */
    static const int32_t special[] = {0,     2147483647, -2147483648, 0,      -2147483648, 2147483647, -1,
                                      2147483647, 5,     -5,          127,    -127,        128,        -128,
                                      0,     32767,      -32767,      32768,  -32768,      0,          65536,
                                      -1,    1000000,    -1000000,    0,      INT32_MAX,   INT32_MIN,  INT32_MAX};
    int ns = (int)(sizeof special / sizeof special[0]);
    ok(cbf_roundtrip("special.cbf", special, ns, 1), "CBF round trip of int32 extremes and delta classes (%d x 1)",
       ns);
    ok(cbf_roundtrip("special_t.cbf", special, 1, ns), "CBF round trip as a 1 x %d column", ns);

    int32_t one = 12345;
    ok(cbf_roundtrip("one.cbf", &one, 1, 1), "CBF round trip 1 x 1");
    one = INT32_MIN;
    ok(cbf_roundtrip("one_min.cbf", &one, 1, 1), "CBF round trip 1 x 1 holding INT32_MIN");

    int sizes[][2] = {{37, 11}, {11, 37}, {100, 64}, {487, 195}, {256, 3}};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int w = sizes[s][0], h = sizes[s][1];
        int32_t *v = malloc((size_t)w * h * sizeof *v);
        for (int i = 0; i < w * h; i++) {
            uint32_t r = xr();
            switch (r % 5) {   /* a mixture of every delta size */
            case 0: v[i] = (int32_t)(r % 50); break;
            case 1: v[i] = (int32_t)(r % 20000) - 10000; break;
            case 2: v[i] = (int32_t)(r % 200000) - 100000; break;
            case 3: v[i] = (int32_t)xr(); break;
            default: v[i] = (r & 1) ? INT32_MAX : INT32_MIN; break;
            }
        }
        char name[64];
        snprintf(name, sizeof name, "rand_%dx%d.cbf", w, h);
        ok(cbf_roundtrip(name, v, w, h), "CBF round trip of a random %d x %d image with large deltas", w, h);
        free(v);
    }

    /* header contents */
    size_t len;
    char *d = slurp(tpath("rand_37x11.cbf"), &len);
    ok(d && strncmp(d, "###CBF: VERSION 1.5", 19) == 0, "CBF starts with ###CBF: VERSION 1.5");
    ok(d && strstr(d, "# Pixel_size 172e-6 m x 172e-6 m\r\n"), "CBF header Pixel_size 172e-6 m x 172e-6 m");
    ok(d && strstr(d, "# Wavelength 1.000000 A\r\n"), "CBF header Wavelength 1.000000 A");
    ok(d && strstr(d, "# Detector_distance 0.150000 m\r\n"), "CBF header Detector_distance is the close distance");
    ok(d && strstr(d, "# Beam_xy (261.627907, 232.558140) pixels\r\n"), "CBF header Beam_xy = (Fbeam, Sbeam) / pixel");
    ok(d && strstr(d, "# Start_angle 0.0000 deg.\r\n") && strstr(d, "# Angle_increment 1.0000 deg.\r\n"),
       "CBF header Start_angle and Angle_increment");
    ok(d && strstr(d, "# Silicon sensor, thickness 0.000450 m\r\n"), "CBF header sensor thickness");
    ok(d && strstr(d, "# Count_cutoff 1048575 counts\r\n"), "CBF header Count_cutoff");
    ok(d && strstr(d, "# Exposure_period 0.5000000 s\r\n"), "CBF header Exposure_period");
    ok(d && strstr(d, "# 1970-01-01T00:00:01.500\r\n"), "CBF time stamp = frame x exposure period");
    ok(d && strstr(d, "_array_data.header_convention \"GENERIC_MINI\""), "37 x 11 is labelled GENERIC_MINI");
    ok(d && !strstr(d, "PILATUS"), "a non-PILATUS size never says PILATUS");
    ok(d && strstr(d, "X-Binary-Size-Fastest-Dimension: 37\r\nX-Binary-Size-Second-Dimension: 11\r\n"),
       "CBF dimensions");
    ok(d && strstr(d, "# Command_line (1/1) nb-convert -o x.cbf   # a \"quoted\" : test\r\n"),
       "CBF header carries the command line");
    /* the binary section: magic, data, 4095 zero bytes, closing lines */
    if (d) {
        const char *mag = memchr(d, 0x0C, len);
        while (mag && !(mag + 4 <= d + len && memcmp(mag, "\x0c\x1a\x04\xd5", 4) == 0))
            mag = memchr(mag + 1, 0x0C, len - (size_t)(mag + 1 - d));
        const char *xs = strstr(d, "X-Binary-Size: ");
        long size = xs ? atol(xs + 15) : -1;
        int layout = mag && size > 0 && (size_t)(mag - d) + 4 + (size_t)size + 4095 <= len;
        if (layout) {
            const char *pad = mag + 4 + size;
            for (int i = 0; i < 4095; i++)
                if (pad[i]) layout = 0;
            const char *tail = "\r\n--CIF-BINARY-FORMAT-SECTION----\r\n;\r\n\r\n";
            layout = layout && (size_t)(pad + 4095 - d) + strlen(tail) == len && memcmp(pad + 4095, tail, strlen(tail)) == 0;
        }
        ok(layout, "CBF binary section: magic, X-Binary-Size bytes, 4095 zero bytes, closing lines");
        ok(strstr(d, "\r\n\r\n\x0c\x1a\x04\xd5") != NULL || (mag && mag - d > 4 && memcmp(mag - 4, "\r\n\r\n", 4) == 0),
           "an empty line ends the MIME headers right before the magic");
    } else {
        ok(0, "CBF binary section layout");
        ok(0, "MIME header end");
    }

    char *d2 = slurp(tpath("rand_487x195.cbf"), &len);
    ok(d2 && strstr(d2, "_array_data.header_convention \"PILATUS_1.2\"") &&
           strstr(d2, "# Detector: PILATUS"),
       "487 x 195 (a PILATUS module) is labelled PILATUS_1.2");
    free(d2);

    /* MD5 of the data (RFC 1321 test vector through a 1 x 1 image is not
     * possible, so check against the value fabio/CBFlib would compute for a
     * known payload: one byte 0x00 -> MD5 93b885adfe0da089cdf634904fd59f71) */
    int32_t zero = 0;
    nb_image_meta mz = test_meta(1, 1);
    nb_cbf_write(tpath("zero.cbf"), &zero, &mz);
    d2 = slurp(tpath("zero.cbf"), &len);
    ok(d2 && strstr(d2, "Content-MD5: k7iFrf4NoInN9jSQT9WfcQ==\r\n"), "Content-MD5 is base64(MD5(data))");
    free(d2);

    /* truncated and corrupted files */
    if (d) {
        const char *xs0 = strstr(d, "X-Binary-Size: ");
        const char *m0 = xs0 ? strstr(xs0, "\r\n\r\n") : NULL;
        size_t moff = m0 ? (size_t)(m0 + 4 - d) : 100, dsize = xs0 ? (size_t)atol(xs0 + 15) : 100;
        size_t cuts[] = {5, 200, moff + 2, moff + 4 + dsize / 2, moff + 4 + dsize - 1};
        for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
            write_bytes(tpath("trunc.cbf"), d, cuts[c]);
            int32_t *v = NULL;
            int w, h;
            nb_status st = nb_cbf_read(tpath("trunc.cbf"), &v, &w, &h);
            ok(st == NB_ERR_DATA && v == NULL && strstr(nb_error_message(), "trunc.cbf"),
               "CBF truncated to %zu of %zu bytes -> data error (%s)", cuts[c], len, nb_error_message());
        }
        /* flip one byte of the compressed data */
        const char *xs = strstr(d, "X-Binary-Size: ");
        char *mag = xs ? strstr(xs, "\r\n\r\n") : NULL;
        if (mag) {
            mag += 4 + 4;
            mag[10] ^= 0x55;
            write_bytes(tpath("corrupt.cbf"), d, len);
            int32_t *v = NULL;
            int w, h;
            nb_status st = nb_cbf_read(tpath("corrupt.cbf"), &v, &w, &h);
            ok(st == NB_ERR_DATA && v == NULL, "CBF with a corrupted data byte -> data error (%s)",
               nb_error_message());
        } else {
            ok(0, "corrupt CBF test set-up");
        }
    }
    free(d);
    {
        int32_t *v = NULL;
        int w, h;
        write_bytes(tpath("notcbf.cbf"), "hello", 5);
        ok(nb_cbf_read(tpath("notcbf.cbf"), &v, &w, &h) == NB_ERR_DATA, "a non-CBF file -> data error");
        ok(nb_cbf_read(tpath("missing.cbf"), &v, &w, &h) == NB_ERR_IO, "a missing CBF -> I/O error");
    }

    /* a hand-made file with genuine 64-bit escapes (as CBFlib may write) */
    {
        static const unsigned char packed[] = {
            0x05,                                                       /* 5 */
            0x80, 0x00, 0x80, 0x00, 0x00, 0x00, 0x80,                   /* 64-bit: +2^32 -> 5 */
            0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00,
            0x80, 0x00, 0x80, 0x00, 0x00, 0x00, 0x80,                   /* 64-bit: -2^31 -> 5 - 2^31 */
            0x00, 0x00, 0x00, 0x80, 0xff, 0xff, 0xff, 0xff,
            0x80, 0x00, 0x80, 0xff, 0xff, 0xff, 0x7f,                   /* 32-bit: +2^31-1 -> 4 */
            0x80, 0x00, 0x01,                                            /* 16-bit: +256 -> 260 */
        };
        nb_strbuf sb;
        nb_strbuf_init(&sb);
        nb_strbuf_printf(&sb,
                         "###CBF: VERSION 1.5\r\n\r\ndata_x\r\n\r\n_array_data.data\r\n;\r\n"
                         "--CIF-BINARY-FORMAT-SECTION--\r\n"
                         "Content-Type: application/octet-stream;\r\n     conversions=\"x-CBF_BYTE_OFFSET\"\r\n"
                         "Content-Transfer-Encoding: BINARY\r\nX-Binary-Size: %zu\r\nX-Binary-ID: 1\r\n"
                         "X-Binary-Element-Type: \"signed 32-bit integer\"\r\n"
                         "X-Binary-Element-Byte-Order: LITTLE_ENDIAN\r\n"
                         "X-Binary-Number-of-Elements: 5\r\nX-Binary-Size-Fastest-Dimension: 5\r\n"
                         "X-Binary-Size-Second-Dimension: 1\r\nX-Binary-Size-Padding: 0\r\n\r\n\x0c\x1a\x04\xd5",
                         sizeof packed);
        nb_strbuf_appendn(&sb, (const char *)packed, sizeof packed);
        nb_strbuf_append(&sb, "\r\n--CIF-BINARY-FORMAT-SECTION----\r\n;\r\n");
        write_bytes(tpath("esc64.cbf"), sb.data, sb.len);
        nb_strbuf_free(&sb);
        int32_t *v = NULL;
        int w = 0, h = 0;
        nb_status st = nb_cbf_read(tpath("esc64.cbf"), &v, &w, &h);
        ok(st == NB_OK && w == 5 && h == 1 && v[0] == 5 && v[1] == 5 && v[2] == 5 + INT32_MIN && v[3] == 4 &&
               v[4] == 260,
           "CBF reader decodes 64-bit escapes (%s)", st ? nb_error_message() : "ok");
        free(v);
    }
}

/* ---- TIFF ----------------------------------------------------------------- */

static void test_tiff(void)
{
#ifndef NB_HAVE_TIFF
    skip("this build has no libtiff", "TIFF float32 round trip");
    skip("this build has no libtiff", "TIFF uint16 round trip");
    skip("this build has no libtiff", "TIFF uint32 round trip");
    nb_image_meta m = test_meta(2, 2);
    float f[4] = {0};
    nb_status st = nb_tiff_write_f32(tpath("x.tif"), f, &m);
    ok(st == NB_ERR_UNSUPPORTED && strstr(nb_error_message(), "no libtiff"), "TIFF without libtiff: %s",
       nb_error_message());
#else
    const int w = 301, h = 17;
    nb_image_meta m = test_meta(w, h);
    float *f = malloc((size_t)w * h * sizeof *f);
    int32_t *c = malloc((size_t)w * h * sizeof *c);
    for (int i = 0; i < w * h; i++) {
        f[i] = (float)((double)(int32_t)xr() / 1e5);
        uint32_t r = xr();
        c[i] = (r % 3 == 0) ? (int32_t)xr() : (int32_t)(r % 70000) - 1000;
    }
    c[0] = -5;
    c[1] = 65535;
    c[2] = 65536;
    c[3] = INT32_MAX;
    c[4] = INT32_MIN;
    ok(nb_tiff_load() == NB_OK, "libtiff is available (loaded)");
    ok(nb_tiff_write_f32(tpath("f.tif"), f, &m) == NB_OK, "write float32 TIFF");
    ok(nb_tiff_write_u16(tpath("u16.tif"), c, &m) == NB_OK, "write uint16 TIFF");
    ok(nb_tiff_write_u32(tpath("u32.tif"), c, &m) == NB_OK, "write uint32 TIFF");
    const char *names[3] = {"f.tif", "u16.tif", "u32.tif"};
    for (int k = 0; k < 3; k++) {
        TIFFSetWarningHandler(NULL);
        TIFF *t = TIFFOpen(tpath(names[k]), "r");
        uint32_t tw = 0, th = 0;
        uint16_t bps = 0, fmt = 0, spp = 0, comp = 0;
        char *desc = NULL;
        int good = t != NULL;
        if (good) {
            TIFFGetField(t, TIFFTAG_IMAGEWIDTH, &tw);
            TIFFGetField(t, TIFFTAG_IMAGELENGTH, &th);
            TIFFGetFieldDefaulted(t, TIFFTAG_BITSPERSAMPLE, &bps);
            TIFFGetFieldDefaulted(t, TIFFTAG_SAMPLEFORMAT, &fmt);
            TIFFGetFieldDefaulted(t, TIFFTAG_SAMPLESPERPIXEL, &spp);
            TIFFGetFieldDefaulted(t, TIFFTAG_COMPRESSION, &comp);
            TIFFGetField(t, TIFFTAG_IMAGEDESCRIPTION, &desc);
            good = (int)tw == w && (int)th == h && spp == 1 && comp == COMPRESSION_NONE &&
                   bps == (k == 1 ? 16 : 32) && fmt == (k == 0 ? SAMPLEFORMAT_IEEEFP : SAMPLEFORMAT_UINT);
            ok(good, "%s: %u x %u, %u bits, sample format %u", names[k], tw, th, bps, fmt);
            ok(desc && strstr(desc, "wavelength_A=1\n") && strstr(desc, "pixel_size_mm=0.172\n") &&
                   strstr(desc, "close_distance_mm=150\n") && strstr(desc, "command_line=nb-convert -o x.cbf") &&
                   strstr(desc, "phi_deg=0\n"),
               "%s: ImageDescription carries the provenance", names[k]);
            unsigned char *row = malloc(TIFFScanlineSize(t));
            int same = 1;
            for (int y = 0; y < h && same; y++) {
                if (TIFFReadScanline(t, row, (uint32_t)y, 0) != 1) {
                    same = 0;
                    break;
                }
                for (int x = 0; x < w; x++) {
                    int32_t cv = c[y * w + x];
                    if (k == 0) same &= memcmp(&((float *)row)[x], &f[y * w + x], 4) == 0;
                    else if (k == 1) same &= ((uint16_t *)row)[x] == (uint16_t)(cv < 0 ? 0 : cv > 65535 ? 65535 : cv);
                    else same &= ((uint32_t *)row)[x] == (uint32_t)(cv < 0 ? 0 : cv);
                }
            }
            free(row);
            ok(same, "%s: every pixel reads back (clamped where the type needs it)", names[k]);
            TIFFClose(t);
        } else {
            ok(0, "%s opens with libtiff", names[k]);
        }
    }
    /* nb_tiff_read (nb-fit's observed images): every kind back as written */
    for (int k = 0; k < 3; k++) {
        double *v = NULL, cmax = 0;
        int rw = 0, rh = 0, is_float = -1, same = 1;
        nb_status st = nb_tiff_read(tpath(names[k]), &v, &rw, &rh, &is_float, &cmax);
        for (int i = 0; st == NB_OK && i < w * h; i++) {
            int32_t cv = c[i];
            double want = k == 0 ? (double)f[i] : k == 1 ? (cv < 0 ? 0 : cv > 65535 ? 65535 : cv) : (double)(uint32_t)(cv < 0 ? 0 : cv);
            same &= v[i] == want;
        }
        ok(st == NB_OK && rw == w && rh == h && is_float == (k == 0) && (k == 0 || cmax == (k == 1 ? 65535.0 : 4294967295.0)) &&
               same,
           "nb_tiff_read %s: %d x %d, %s, every value as written", names[k], rw, rh, is_float ? "float" : "counts");
        free(v);
    }
    {
        double *v = NULL, cmax;
        int rw, rh, is_float;
        FILE *fp = fopen(tpath("not.tif"), "w");
        fputs("II*\0garbage that is no TIFF directory", fp);
        fclose(fp);
        nb_status st = nb_tiff_read(tpath("not.tif"), &v, &rw, &rh, &is_float, &cmax);
        ok(st == NB_ERR_DATA && strstr(nb_error_message(), "not.tif") && v == NULL, "a broken TIFF is a data error: %s",
           nb_error_message());
        st = nb_tiff_read(tpath("missing.tif"), &v, &rw, &rh, &is_float, &cmax);
        ok(st == NB_ERR_IO && strstr(nb_error_message(), "missing.tif"), "a missing TIFF: %s", nb_error_message());
    }
    /* a taller image: several strips */
    {
        const int W = 1000, H = 300;
        nb_image_meta mm = test_meta(W, H);
        float *g = malloc((size_t)W * H * sizeof *g);
        for (int i = 0; i < W * H; i++) g[i] = (float)i;
        nb_status st = nb_tiff_write_f32(tpath("big.tif"), g, &mm);
        TIFF *t = st ? NULL : TIFFOpen(tpath("big.tif"), "r");
        int same = t != NULL && TIFFNumberOfStrips(t) > 1;
        if (t) {
            float *row = malloc((size_t)W * sizeof *row);
            for (int y = 0; y < H && same; y++) {
                same = TIFFReadScanline(t, row, (uint32_t)y, 0) == 1 && memcmp(row, g + (size_t)y * W, W * 4) == 0;
            }
            free(row);
            TIFFClose(t);
        }
        ok(same, "a 1000 x 300 float TIFF in several strips reads back");
        free(g);
    }
    free(f);
    free(c);
#endif
}

/* ---- PNG ------------------------------------------------------------------ */

static uint32_t rd32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Parse a PNG: chunk CRCs, IHDR, tEXt Software, inflated IDAT. Returns the
 * raw scanlines (malloc'ed) or NULL; *why says what failed. */
static unsigned char *parse_png(const char *path, int *w, int *h, size_t *rawlen, const char **why, int *software)
{
    size_t len;
    char *d = slurp(path, &len);
    unsigned char *p = (unsigned char *)d;
    *why = "cannot read";
    *software = 0;
    if (!d) return NULL;
    static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
    if (len < 8 || memcmp(p, sig, 8) != 0) {
        *why = "signature";
        free(d);
        return NULL;
    }
    unsigned char *idat = NULL;
    size_t idatlen = 0, pos = 8;
    int seen_ihdr = 0, seen_iend = 0;
    while (pos + 12 <= len) {
        uint32_t n = rd32(p + pos);
        if (pos + 12 + n > len) break;
        const unsigned char *type = p + pos + 4, *data = p + pos + 8;
        uint32_t crc = (uint32_t)crc32(crc32(0, Z_NULL, 0), type, 4 + n);
        if (crc != rd32(p + pos + 8 + n)) {
            *why = "chunk CRC";
            free(idat);
            free(d);
            return NULL;
        }
        if (memcmp(type, "IHDR", 4) == 0 && n == 13 && pos == 8) {
            seen_ihdr = 1;
            *w = (int)rd32(data);
            *h = (int)rd32(data + 4);
            if (data[8] != 8 || data[9] != 0 || data[10] != 0 || data[11] != 0 || data[12] != 0) {
                *why = "IHDR fields";
                free(idat);
                free(d);
                return NULL;
            }
        } else if (memcmp(type, "IDAT", 4) == 0) {
            idat = realloc(idat, idatlen + n + 1);
            memcpy(idat + idatlen, data, n);
            idatlen += n;
        } else if (memcmp(type, "tEXt", 4) == 0 && n == 19 && memcmp(data, "Software\0nb toolkit", 19) == 0) {
            *software = 1;
        } else if (memcmp(type, "IEND", 4) == 0 && n == 0) {
            seen_iend = pos + 12 == len;
        }
        pos += 12 + n;
    }
    free(d);
    if (!seen_ihdr || !seen_iend || !idat) {
        *why = "IHDR/IDAT/IEND structure";
        free(idat);
        return NULL;
    }
    uLongf out = (uLongf)((size_t)*h * (1 + (size_t)*w));
    unsigned char *raw = malloc(out + 1);
    uLongf got = out + 1;
    int zr = uncompress(raw, &got, idat, idatlen);
    free(idat);
    if (zr != Z_OK || got != out) {
        *why = "IDAT does not inflate to height*(1+width) bytes";
        free(raw);
        return NULL;
    }
    *rawlen = got;
    *why = "ok";
    return raw;
}

static void test_png(void)
{
    /* known scale 0.5: value*0.5 rounded, clipped */
    const float vals[] = {-3, 0, 1, 2.9f, 100, 509, 511, 1e9f, NAN, INFINITY, -INFINITY, 0.99f};
    const unsigned char want[] = {0, 0, 1, 1, 50, 255, 255, 255, 0, 255, 0, 0};
    const int w = 4, h = 3;
    nb_status st = nb_png_write_preview(tpath("s.png"), vals, w, h, 0.5);
    ok(st == NB_OK, "write a PNG with scale 0.5 (%s)", st ? nb_error_message() : "ok");
    int pw = 0, ph = 0, sw = 0;
    size_t rl = 0;
    const char *why;
    unsigned char *raw = parse_png(tpath("s.png"), &pw, &ph, &rl, &why, &sw);
    ok(raw != NULL, "PNG signature, chunk CRCs, IHDR, IDAT and IEND valid (%s)", why);
    ok(pw == w && ph == h, "PNG IHDR is %d x %d", pw, ph);
    ok(sw, "PNG has tEXt Software = nb toolkit");
    if (raw) {
        int same = 1;
        for (int y = 0; y < h; y++) {
            same &= raw[(size_t)y * (w + 1)] == 0;
            for (int x = 0; x < w; x++) same &= raw[(size_t)y * (w + 1) + 1 + x] == want[y * w + x];
        }
        ok(same, "PNG rows have filter 0 and the expected grey levels");
    } else {
        ok(0, "PNG grey levels");
    }
    free(raw);

    /* automatic contrast: dark background, a few bright spots */
    {
        const int W = 700, H = 500;   /* > 64 KiB of scanlines: several IDAT chunks */
        float *img = malloc((size_t)W * H * sizeof *img);
        for (int i = 0; i < W * H; i++) img[i] = (float)(xr() % 1000) / 1000.0f;   /* 0 .. 1 photons */
        for (int k = 0; k < 30; k++) img[(size_t)(xr() % H) * W + xr() % W] = 5000.0f;
        img[0] = 0;
        st = nb_png_write_preview(tpath("auto.png"), img, W, H, 0);
        raw = st ? NULL : parse_png(tpath("auto.png"), &pw, &ph, &rl, &why, &sw);
        unsigned char *lv = malloc((size_t)W * H);
        double top = 0;
        nb_png_preview_levels(img, W, H, 0, lv, &top);
        int same = raw != NULL && pw == W && ph == H;
        for (int y = 0; same && y < H; y++) same = memcmp(raw + (size_t)y * (W + 1) + 1, lv + (size_t)y * W, W) == 0;
        ok(same, "auto-contrast PNG (%d x %d, several IDATs) matches nb_png_preview_levels", W, H);
        int spots = 1, mid = 0;
        for (int i = 0; i < W * H; i++) {
            if (img[i] >= 5000.0f) spots &= lv[i] == 255;
            if (lv[i] > 64 && lv[i] < 250) mid++;
        }
        ok(spots && lv[0] == 0 && top > 0.9 && top < 1.0, "spots are white, zero is black, top %.3f ~ background max",
           top);
        ok(mid > W * H / 2, "the sqrt ramp spreads the background over the grey range");
        free(lv);
        free(raw);
        free(img);
    }
    {
        float zeros[6] = {0, 0, -1, 0, 0, 0};
        unsigned char lv[6] = {1, 1, 1, 1, 1, 1};
        double top = -1;
        st = nb_png_preview_levels(zeros, 3, 2, 0, lv, &top);
        ok(st == NB_OK && top == 0 && !memchr(lv, 1, 6) && lv[0] == 0, "an image with no positive pixel is black");
        ok(nb_png_write_preview(tpath("zeros.png"), zeros, 3, 2, 0) == NB_OK, "and writes");
    }
}

/* ---- failures ------------------------------------------------------------- */

static void test_failures(void)
{
    nb_image_meta m = test_meta(4, 3);
    int32_t c[12] = {0};
    float f[12] = {0};
    char bad[300];
    snprintf(bad, sizeof bad, "%s/no/such/dir/x.out", dir);
    nb_status st;

    st = nb_cbf_write(bad, c, &m);
    ok(st == NB_ERR_IO && strstr(nb_error_message(), bad) && !exists(bad),
       "CBF into a missing directory fails naming the path: %s", nb_error_message());
    st = nb_png_write_preview(bad, f, 4, 3, 1);
    ok(st == NB_ERR_IO && strstr(nb_error_message(), bad) && !exists(bad),
       "PNG into a missing directory fails naming the path: %s", nb_error_message());
#ifdef NB_HAVE_TIFF
    st = nb_tiff_write_f32(bad, f, &m);
    ok(st == NB_ERR_IO && strstr(nb_error_message(), bad) && !exists(bad),
       "TIFF into a missing directory fails naming the path: %s", nb_error_message());
#else
    skip("this build has no libtiff", "TIFF into a missing directory");
#endif

    if (access("/dev/full", W_OK) == 0) {
        st = nb_cbf_write("/dev/full", c, &m);
        ok(st == NB_ERR_IO && strstr(nb_error_message(), "/dev/full"), "CBF to /dev/full fails: %s",
           nb_error_message());
        st = nb_png_write_preview("/dev/full", f, 4, 3, 1);
        ok(st == NB_ERR_IO && strstr(nb_error_message(), "/dev/full"), "PNG to /dev/full fails: %s",
           nb_error_message());
#ifdef NB_HAVE_TIFF
        st = nb_tiff_write_u16("/dev/full", c, &m);
        ok(st == NB_ERR_IO && strstr(nb_error_message(), "/dev/full"), "TIFF to /dev/full fails: %s",
           nb_error_message());
#else
        skip("this build has no libtiff", "TIFF to /dev/full");
#endif
    } else {
        skip("no writable /dev/full", "CBF to /dev/full");
        skip("no writable /dev/full", "PNG to /dev/full");
        skip("no writable /dev/full", "TIFF to /dev/full");
    }

    nb_image_meta empty = test_meta(0, 5);
    ok(nb_cbf_write(tpath("empty.cbf"), c, &empty) != NB_OK && !exists(tpath("empty.cbf")),
       "an empty image is refused (%s)", nb_error_message());

    /* nothing temporary left behind */
    DIR *dd = opendir(dir);
    int stray = 0;
    struct dirent *e;
    while (dd && (e = readdir(dd)))
        if (e->d_name[0] == '.' && strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) stray++;
    if (dd) closedir(dd);
    ok(stray == 0, "no temporary files left in the output directory (%d)", stray);
}

static void cleanup(void)
{
    DIR *dd = opendir(dir);
    struct dirent *e;
    while (dd && (e = readdir(dd))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        unlink(tpath(e->d_name));
    }
    if (dd) closedir(dd);
    rmdir(dir);
}

/* The SMV writer's fused rows (finite check, conversion, 16-bit packing)
 * against the int image and the finite check they replace. */
static void test_int16_rows(void)
{
    enum { W = 1037, H = 9 }; /* a width that is no multiple of any vector or block */
    float *img = malloc(sizeof(float) * W * H);
    int32_t *ref = malloc(sizeof(int32_t) * W * H);
    uint16_t *got = malloc(sizeof(uint16_t) * W * H);
    uint32_t seed = 12345;
    for (int i = 0; i < W * H; i++) {
        seed = seed * 1664525u + 1013904223u;
        /* negatives, zeros, halves that round either way, values that clip */
        img[i] = (float)((double)(seed >> 8) / (1 << 24) * 2600.0 - 100.0);
        if (i % 97 == 0) img[i] = 0.5f;
        if (i % 89 == 0) img[i] = i % 2 ? 1e30f : -1e30f;
        /* on the rounding boundaries of the integer image and its clips */
        if (i % 83 == 0) img[i] = (float)(((double)(i % 5000) + 0.5 - 40.0) / 30.0);
        if (i % 79 == 0) img[i] = nextafterf((float)((65535.0 - 40.0) / 30.0), i % 2 ? 1e9f : -1e9f);
    }
    const nb_roi rois[] = {{0, W - 1, 0, H - 1}, {3, 1020, 2, 6}, {500, 499, 0, H - 1}, {-5, W + 5, 4, 4}};
    int all_same = 1;
    for (size_t k = 0; k < sizeof rois / sizeof rois[0]; k++) {
        nb_int_image_rows(img, W, 1, H - 1, rois[k], 30.0, 40.0, ref);
        size_t n = nb_int16_image_rows_checked(img + W, W, 1, H - 1, rois[k], 30.0, 40.0, got);
        ok(n == (size_t)W * (H - 1), "fused int rows: all finite (ROI %zu)", k);
        for (int i = 0; i < W * (H - 1); i++) all_same &= ref[i] == (int32_t)got[i];
    }
    ok(all_same, "fused int rows: the int image's values, 0 outside the ROI");
    /* and both the reference's arithmetic, written out as it does it */
    int as_reference = 1;
    nb_int_image_rows(img, W, 0, H, rois[0], 30.0, 40.0, ref);
    for (int i = 0; i < W * H; i++) {
        double t = img[i] * 30.0 + 40.0;
        if (t > 65535.0) t = 65535.0;
        if (t < 0.0) t = 0.0;
        as_reference &= ref[i] == (int32_t)floorf((float)(t + 0.5));
    }
    ok(as_reference, "int image values as the reference computes them (clips, rounding boundaries, +-1e30)");
    const float bad[] = {NAN, INFINITY, -INFINITY};
    const int where[] = {0, W - 1, 2 * W + 517};
    for (int b = 0; b < 3; b++) {
        float keep = img[W + where[b]];
        img[W + where[b]] = bad[b];
        size_t at = nb_int16_image_rows_checked(img + W, W, 1, H - 1, rois[1], 30.0, 40.0, got);
        ok(at == (size_t)where[b] && nb_first_nonfinite(img + W, (size_t)W * (H - 1)) == at,
           "fused int rows: %g found at %zu (expected %d)", bad[b], at, where[b]);
        img[W + where[b]] = keep;
    }
    free(img), free(ref), free(got);
}

/* The JSON reader's escapes (\u as UTF-8, surrogate pairs, refusals) and
 * the writer: what it writes reads back to the same tree and text */
static void test_json(void)
{
    static const char text[] = "{\"a\": [1, 0.1, -2.5e-7, true, null], \"s\": \"x\\u00e9\\ud83d\\ude00\\n\\\"\\\\/\", "
                               "\"o\": {\"k\": \"\"}}";
    nb_json v, w;
    ok(nb_json_parse(text, strlen(text), "t.json", &v) == NB_OK, "json: parses escapes");
    const nb_json *str = nb_json_get(&v, "s");
    ok(str && !strcmp(str->string, "x\xc3\xa9\xf0\x9f\x98\x80\n\"\\/"), "json: \\u escapes decode to UTF-8, a surrogate pair to one character");
    const nb_json *empty = nb_json_get(nb_json_get(&v, "o"), "k");
    ok(empty && empty->string && !empty->string[0], "json: an empty string is \"\", not NULL");
    nb_strbuf sb, sb2;
    nb_strbuf_init(&sb), nb_strbuf_init(&sb2);
    nb_json_write(&sb, &v);
    ok(nb_json_parse(sb.data, sb.len, "w.json", &w) == NB_OK, "json: the written text parses");
    nb_json_write(&sb2, &w);
    ok(!strcmp(sb.data, sb2.data), "json: written, read and written again, the same text");
    const nb_json *a = nb_json_get(&w, "a");
    ok(a && a->count == 5 && a->items[1].number == 0.1 && a->items[2].number == -2.5e-7, "json: numbers read back exactly");
    nb_json_free(&w);
    nb_json_free(&v);
    nb_strbuf_free(&sb), nb_strbuf_free(&sb2);
    static const char *bad[] = {"\"\\ud83d\"", "\"\\ude00\"", "\"\\u0000\"", "\"\\u12\"", "\"\\uzzzz\""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ok(nb_json_parse(bad[i], strlen(bad[i]), "b.json", &v) == NB_ERR_DATA, "json: %s is refused", bad[i]);
    }
    char name[64];
    ok(nb_frame_path("img_###.cbf", 6, name, sizeof name) == 0 && !strcmp(name, "img_007.cbf"), "frame path: %s", name);
    ok(nb_frame_path("img.cbf", 6, name, sizeof name) == 0 && !strcmp(name, "img.cbf"), "frame path without '#'");
    ok(nb_frame_path("a#_#.cbf", 0, name, sizeof name) == -1, "frame path: two runs of '#' refused");
    ok(nb_frame_path("img_###.cbf", 6, name, 5) == -1, "frame path: too long for the buffer refused");
}

/* ---- the registry and its one image reader -------------------------------- */

static int id_of(const nb_format *f) { return f ? (int)f->id : -1; }

static void test_registry_lookup(void)
{
    ok(id_of(nb_format_by_name("smv")) == NB_FMT_SMV && id_of(nb_format_by_name("img")) == NB_FMT_SMV,
       "registry: smv and its alias img by name");
    ok(id_of(nb_format_by_name("tiff")) == NB_FMT_TIF && id_of(nb_format_by_name("nxs")) == NB_FMT_NXMX,
       "registry: tiff and nxs are aliases");
    ok(nb_format_by_name("jpeg") == NULL, "registry: an unknown name is NULL");
    ok(id_of(nb_format_by_suffix("d/x.cbf")) == NB_FMT_CBF, "registry: .cbf by suffix");
    ok(id_of(nb_format_by_suffix("X.CBF")) == NB_FMT_CBF, "registry: suffixes match without case");
    ok(id_of(nb_format_by_suffix("XDS.INP")) == NB_FMT_XDS, "registry: XDS.INP by suffix");
    ok(id_of(nb_format_by_suffix("a.h5")) == NB_FMT_NXMX, "registry: .h5 is NXmx");
    ok(id_of(nb_format_by_suffix("x.tiff")) == NB_FMT_TIF, "registry: .tiff is TIFF");
    ok(nb_format_by_suffix("dir.d/image") == NULL, "registry: a dot in a directory is no suffix");
    static const struct { const char *bytes; size_t n; int id; } magic[] = {
        {"###CBF: VERSION 1.5", 19, NB_FMT_CBF}, {"{\nHEADER_BYTES=512;", 19, NB_FMT_SMV},
        {"II*\0\x08\0\0\0", 8, NB_FMT_TIF}, {"MM\0*\0\0\0\x08", 8, NB_FMT_TIF},
        {"\x89PNG\r\n\x1a\n", 8, NB_FMT_PNG}, {"P5\n96 96\n", 9, NB_FMT_PGM},
        {NB_STREAM_MAGIC, 8, NB_FMT_NBS}, {"\x89HDF\r\n\x1a\n", 8, NB_FMT_NXMX},
        {"\0\0\x80?\0\0\0@", 8, -1}, {"###CB", 5, -1}};
    for (size_t i = 0; i < sizeof magic / sizeof magic[0]; i++)
        ok(id_of(nb_format_by_magic((const unsigned char *)magic[i].bytes, magic[i].n)) == magic[i].id,
           "registry: magic %zu read as %d", i, magic[i].id);
    ok(nb_format_get(NB_FMT_PGM)->read == NULL && nb_format_get(NB_FMT_PNG)->read == NULL,
       "registry: PGM and PNG are write-only");
    ok(nb_format_get(NB_FMT_NXMX)->read != NULL && nb_format_get(NB_FMT_NXMX)->run_file &&
       !nb_format_get(NB_FMT_CBF)->run_file && !nb_format_get(NB_FMT_NBS)->run_file,
       "registry: NXmx is read, a run's frames in one file");
    ok(nb_format_get(NB_FMT_XDS)->sidecar && nb_format_get(NB_FMT_GEOM)->sidecar &&
       !nb_format_get(NB_FMT_CBF)->sidecar, "registry: XDS.INP and .geom are the sidecars");
    ok(strstr(nb_format_readable_list(), "CBF (.cbf)") && strstr(nb_format_readable_list(), "raw float32 (.bin"),
       "registry: readable list '%s'", nb_format_readable_list());
    /* by the first bytes before the name; no suffix: raw float; an unknown suffix: none */
    ok(write_bytes(tpath("smv_named.cbf"), "{\nHEADER_BYTES=512;\n}", 21) &&
       id_of(nb_format_of_file(tpath("smv_named.cbf"))) == NB_FMT_SMV, "registry: the magic wins over the suffix");
    float px[4] = {1, 2, 3, 4};
    ok(write_bytes(tpath("floatimage"), px, sizeof px) && id_of(nb_format_of_file(tpath("floatimage"))) == NB_FMT_BIN,
       "registry: no suffix, no magic: raw float");
    ok(write_bytes(tpath("img.0001"), px, sizeof px) && id_of(nb_format_of_file(tpath("img.0001"))) == NB_FMT_BIN,
       "registry: a number for a suffix: raw float");
    ok(write_bytes(tpath("x.jpg"), px, sizeof px) && nb_format_of_file(tpath("x.jpg")) == NULL,
       "registry: an unknown suffix is no format");
    ok(id_of(nb_format_of_file(tpath("missing.cbf"))) == NB_FMT_CBF, "registry: a missing file by its name");
}

/* Every format's writer as its kind needs it: no tool asks for an id, so a
 * writable entry that lacks a function, a suffix or a property its kind
 * reads would fail only when a user writes it */
static void test_registry_writers(void)
{
    int n = 0, frame = 0, run = 0, sidecar = 0, stream = 0;
    for (const nb_format *f = nb_format_next(NULL); f; f = nb_format_next(f), n++) {
        /* a variant (tif16) is named by --format alone; the others by their suffix too */
        const int suffixed = f->suffixes[0] != NULL;
        switch (f->writer) {
        case NB_WRITE_FRAME:
            frame++;
            ok(f->write_image && f->samples != NB_SAMPLES_NONE &&
                   (suffixed || f->read == nb_format_get(NB_FMT_TIF)->read),
               "registry: %s writes a frame (write_image, samples, a suffix or a variant's name)", f->name);
            ok(!f->write_photons || (f->all_panels && f->samples == NB_SAMPLES_PHOTONS),
               "registry: %s: the photons alone only of a file of every panel", f->name);
            ok(f->rows == NB_ROWS_NONE || f->rows == (f->samples == NB_SAMPLES_PHOTONS ? NB_ROWS_FLOAT32 : NB_ROWS_SMV),
               "registry: %s: its rows are its samples", f->name);
            ok(!f->bits || (f->samples == NB_SAMPLES_INTEGER && (f->bits == 16 || f->bits == 32)),
               "registry: %s: a depth of its own only for integer samples, 16 or 32", f->name);
            ok(!f->run && !f->write_sidecar, "registry: %s: no run or sidecar writer", f->name);
            break;
        case NB_WRITE_RUN:
            run++;
            ok(suffixed && f->run && f->run->frame && f->run->commit && f->run->abort && !f->write_image,
               "registry: %s gathers a run (frame, commit, abort; a suffix)", f->name);
            ok(!f->run->join || (f->run->joined && f->run->join_parts && f->run->join_output),
               "registry: %s: a join says what it joins", f->name);
            break;
        case NB_WRITE_SIDECAR:
            sidecar++;
            ok(suffixed && f->sidecar && f->write_sidecar && !f->run && !f->write_image,
               "registry: %s is a sidecar (write_sidecar, a suffix)", f->name);
            break;
        case NB_WRITE_STREAM:
            stream++;
            ok(suffixed && f->derivatives && f->all_panels && !f->write_image && !f->run,
               "registry: %s copies the stream", f->name);
            break;
        default: ok(!f->write_image && !f->run && !f->write_sidecar, "registry: %s is not written", f->name);
        }
        ok(f->writer == NB_WRITE_SIDECAR || !f->sidecar, "registry: %s: a sidecar is written as one", f->name);
        ok(f->names_images == NB_NAMES_NONE || f->writer == NB_WRITE_RUN || f->writer == NB_WRITE_SIDECAR,
           "registry: %s: only a run file or sidecar names images", f->name);
        ok(!f->processing_images || f->writer == NB_WRITE_RUN || f->samples == NB_SAMPLES_INTEGER,
           "registry: %s: images a processing program reads hold integer counts", f->name);
        ok(nb_format_by_name(f->name) == f, "registry: %s found by its name", f->name);
    }
    ok(n == NB_FMT_COUNT && frame == 9 && run == 3 && sidecar == 2 && stream == 1,
       "registry: %d formats: %d frame, %d run, %d sidecar, %d stream writers", n, frame, run, sidecar, stream);
    ok(!strcmp(nb_format_written_list(NB_WRITE_FRAME), "bin, smv, cbf, tif, tif-float, tif16, tif32, pgm, png"),
       "registry: written a frame at a time: %s", nb_format_written_list(NB_WRITE_FRAME));
    ok(nb_format_unsuffixed() == nb_format_get(NB_FMT_BIN) && nb_format_unsuffixed()->write_photons,
       "registry: a name without a suffix is raw float, written without a plan");
}

static void test_image_file_read(void)
{
    nb_image_file f;
    /* a CBF: counts from 0, its stated overload, -1 and overloads untrusted */
    const int32_t v[6] = {-1, 0, 5, 999, 1000, 70000};
    nb_image_meta m = test_meta(3, 2);
    m.count_cutoff = 1000;
    nb_status st = nb_cbf_write(tpath("r.cbf"), v, &m);
    if (!st) st = nb_image_file_read(tpath("r.cbf"), NULL, 0, &f);
    ok(!st, "reader: a CBF is read (%s)", st ? nb_error_message() : "ok");
    ok(!st && f.format->id == NB_FMT_CBF && f.is_counts && f.width == 3 && f.height == 2 && f.counts[5] == 70000,
       "reader: the CBF's counts as written");
    ok(!st && f.overload == 1000 && f.offset == 0 && f.offset_stated && f.gain == 1 && f.bits == 32,
       "reader: CBF overload %g (stated), offset 0, 32 bits (a count over 65535)", st ? 0 : f.overload);
    ok(!st && f.untrusted[0] && !f.untrusted[1] && !f.untrusted[3] && f.untrusted[4] && f.untrusted[5] &&
       f.nnegative == 1 && f.noverloaded == 2, "reader: the negative and overloaded pixels are untrusted");
    if (!st) nb_image_file_set_overload(&f, 100000);
    ok(!st && !f.untrusted[4] && !f.untrusted[5] && f.untrusted[0] && f.noverloaded == 0,
       "reader: an overload given again marks again");
    nb_image_file_free(&f);
    /* raw float: photons, no mask */
    const float px[6] = {0.5f, 1, 2, 3, 4, 5};
    ok(write_bytes(tpath("r.bin"), px, sizeof px) && !nb_image_file_read(tpath("r.bin"), NULL, 0, &f) &&
       !f.is_counts && f.npixels == 6 && f.photons[0] == 0.5f && !f.untrusted, "reader: raw float photons");
    nb_image_file_free(&f);
    /* refused by name: write-only formats, an unknown suffix */
    uint8_t bytes[6] = {0};
    ok(!nb_pgm_write(tpath("r.pgm"), bytes, 3, 2, 1.0), "reader: a PGM to refuse");
    st = nb_image_file_read(tpath("r.pgm"), NULL, 0, &f);
    ok(st == NB_ERR_USAGE && strstr(nb_error_message(), "r.pgm': PGM is a write-only format (readable: CBF"),
       "reader: a PGM is refused by name: %s", nb_error_message());
    nb_image_file_free(&f);
    ok(write_bytes(tpath("r.png"), "\x89PNG\r\n\x1a\n", 8) &&
       nb_image_file_read(tpath("r.png"), NULL, 0, &f) == NB_ERR_USAGE &&
       strstr(nb_error_message(), "PNG is a write-only format"), "reader: a PNG is refused by name");
    nb_image_file_free(&f);
    /* HDF5's magic and nothing after it: read as NXmx, and refused naming the file */
#ifdef NB_HAVE_HDF5
    ok(write_bytes(tpath("r.h5"), "\x89HDF\r\n\x1a\n", 8) && nb_image_file_read(tpath("r.h5"), NULL, 0, &f) == NB_ERR_IO &&
       strstr(nb_error_message(), "r.h5' as HDF5"), "reader: a file with HDF5's magic alone is refused: %s",
       nb_error_message());
#else
    ok(write_bytes(tpath("r.h5"), "\x89HDF\r\n\x1a\n", 8) &&
       nb_image_file_read(tpath("r.h5"), NULL, 0, &f) == NB_ERR_UNSUPPORTED && strstr(nb_error_message(), "libhdf5"),
       "reader: NXmx without libhdf5 in the build is refused saying so: %s", nb_error_message());
#endif
    nb_image_file_free(&f);
    ok(nb_image_file_read(tpath("x.jpg"), NULL, 0, &f) == NB_ERR_USAGE &&
       strstr(nb_error_message(), "no format has the suffix '.jpg'"), "reader: an unknown suffix is refused");
    nb_image_file_free(&f);
    /* a file named .cbf that is no CBF: the CBF reader's error, never raw floats */
    ok(write_bytes(tpath("fake.cbf"), px, sizeof px) && nb_image_file_read(tpath("fake.cbf"), NULL, 0, &f) == NB_ERR_DATA &&
       strstr(nb_error_message(), "is not a CBF file"), "reader: a .cbf that is no CBF is the CBF reader's error");
    nb_image_file_free(&f);
}

int main(void)
{
    nb_set_tool_name("test_formats");
    snprintf(dir, sizeof dir, "/tmp/nb_test_formats.XXXXXX");
    if (!mkdtemp(dir)) {
        printf("not ok 1 - mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    test_cbf();
    test_tiff();
    test_png();
    test_failures();
    test_int16_rows();
    test_json();
    test_registry_lookup();
    test_registry_writers();
    test_image_file_read();
    if (!getenv("NB_KEEP_TEST_FILES")) cleanup();
    else printf("# files kept in %s\n", dir);
    return tap_done();
}
