/* cbf.c - miniCBF images as PILATUS and CBFlib write them: the header text
 * that dxtbx, XDS and fabio read, byte-offset compression (and decompression,
 * to read our files back in tests), Content-MD5.  Conventions: cbf.h. */
#include "cbf.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "nb_tuning.h"
#include "nb_util.h"
#include "frame_write.h"

#ifndef NB_VERSION
#define NB_VERSION "unknown"
#endif

#define CBF_PADDING 4095
#define CBF_EOL "\r\n"

static const unsigned char cbf_magic[4] = {0x0C, 0x1A, 0x04, 0xD5};

/* ---- MD5 (RFC 1321) ------------------------------------------------------ */

typedef struct md5_ctx {
    uint32_t h[4];
    uint64_t len;          /* bytes */
    unsigned char buf[64];
    size_t nbuf;
} md5_ctx;

static uint32_t rol32(uint32_t x, int c) { return (x << c) | (x >> (32 - c)); }

static void md5_block(md5_ctx *c, const unsigned char *p)
{
    static const uint32_t K[64] = {
        0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501,
        0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
        0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
        0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
        0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
        0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
        0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
        0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391};
    static const int R[64] = {7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22,
                              5, 9,  14, 20, 5, 9,  14, 20, 5, 9,  14, 20, 5, 9,  14, 20,
                              4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23,
                              6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21};
    uint32_t w[16];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 | (uint32_t)p[4 * i + 2] << 16 |
               (uint32_t)p[4 * i + 3] << 24;
    uint32_t a = c->h[0], b = c->h[1], cc = c->h[2], d = c->h[3];
    for (int i = 0; i < 64; i++) {
        uint32_t f;
        int g;
        if (i < 16) {
            f = (b & cc) | (~b & d);
            g = i;
        } else if (i < 32) {
            f = (d & b) | (~d & cc);
            g = (5 * i + 1) % 16;
        } else if (i < 48) {
            f = b ^ cc ^ d;
            g = (3 * i + 5) % 16;
        } else {
            f = cc ^ (b | ~d);
            g = (7 * i) % 16;
        }
        uint32_t t = d;
        d = cc;
        cc = b;
        b = b + rol32(a + f + K[i] + w[g], R[i]);
        a = t;
    }
    c->h[0] += a;
    c->h[1] += b;
    c->h[2] += cc;
    c->h[3] += d;
}

static void md5_init(md5_ctx *c)
{
    c->h[0] = 0x67452301;
    c->h[1] = 0xefcdab89;
    c->h[2] = 0x98badcfe;
    c->h[3] = 0x10325476;
    c->len = 0;
    c->nbuf = 0;
}

static void md5_update(md5_ctx *c, const unsigned char *p, size_t n)
{
    c->len += n;
    if (c->nbuf) {
        size_t take = 64 - c->nbuf < n ? 64 - c->nbuf : n;
        memcpy(c->buf + c->nbuf, p, take);
        c->nbuf += take;
        p += take;
        n -= take;
        if (c->nbuf < 64) return;
        md5_block(c, c->buf);
        c->nbuf = 0;
    }
    for (; n >= 64; n -= 64, p += 64) md5_block(c, p);
    memcpy(c->buf, p, n);
    c->nbuf = n;
}

static void md5_final(md5_ctx *c, unsigned char out[16])
{
    uint64_t bits = c->len * 8;
    unsigned char pad[72] = {0x80};
    size_t padlen = (c->nbuf < 56) ? 56 - c->nbuf : 120 - c->nbuf;
    for (int i = 0; i < 8; i++) pad[padlen + i] = (unsigned char)(bits >> (8 * i));
    md5_update(c, pad, padlen + 8);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) out[4 * i + j] = (unsigned char)(c->h[i] >> (8 * j));
}

/* base64 of the MD5 of data: 24 characters + NUL */
static void md5_base64(const unsigned char *data, size_t n, char out[25])
{
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    unsigned char d[18];
    md5_ctx c;
    md5_init(&c);
    md5_update(&c, data, n);
    md5_final(&c, d);
    d[16] = d[17] = 0;
    for (int i = 0, o = 0; i < 18; i += 3) {
        uint32_t v = (uint32_t)d[i] << 16 | (uint32_t)d[i + 1] << 8 | d[i + 2];
        out[o++] = b64[(v >> 18) & 63];
        out[o++] = b64[(v >> 12) & 63];
        out[o++] = b64[(v >> 6) & 63];
        out[o++] = b64[v & 63];
    }
    out[22] = out[23] = '=';   /* 16 bytes: the last group holds one byte */
    out[24] = '\0';
}

/* ---- byte-offset compression --------------------------------------------- */

/* Bytes needed for one delta (modulo 2^32, as int32). */
static size_t bo_len(int32_t d)
{
    if (d >= -127 && d <= 127) return 1;
    if (d >= -32767 && d <= 32767) return 3;
    return 7;
}

static int32_t wrap_delta(int32_t cur, int32_t prev)
{
    uint32_t u = (uint32_t)cur - (uint32_t)prev;
    return (u <= (uint32_t)INT32_MAX) ? (int32_t)u : (int32_t)(-(int64_t)(UINT32_MAX - u) - 1);
}

static void put_le(unsigned char *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static size_t bo_compressed_size(const int32_t *v, size_t n)
{
    size_t total = 0;
    int32_t prev = 0;
    for (size_t i = 0; i < n; i++) {
        total += bo_len(wrap_delta(v[i], prev));
        prev = v[i];
    }
    return total;
}

static void bo_compress(const int32_t *v, size_t n, unsigned char *out)
{
    int32_t prev = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t d = wrap_delta(v[i], prev);
        prev = v[i];
        if (d >= -127 && d <= 127) {
            *out++ = (unsigned char)(uint8_t)(int8_t)d;
            continue;
        }
        *out++ = 0x80;
        if (d >= -32767 && d <= 32767) {
            put_le(out, (uint16_t)(int16_t)d, 2);
            out += 2;
            continue;
        }
        put_le(out, 0x8000, 2);
        out += 2;
        put_le(out, (uint32_t)d, 4);   /* INT32_MIN too: see cbf.h */
        out += 4;
    }
}

/* Decode exactly n values from p[0..size); 0 on success, -1 when the data run
 * out early or do not end exactly at size. Accumulates modulo 2^32.  With
 * literal_min, a 32-bit 0x80000000 is the delta -2^31 (dxtbx, fabio and this
 * writer); otherwise it introduces a 64-bit delta (the CBF specification). */
static int bo_decompress(const unsigned char *p, size_t size, int32_t *v, size_t n, int literal_min)
{
    size_t j = 0;
    uint32_t cur = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t d;
        if (j >= size) return -1;
        if (p[j] != 0x80) {
            d = (uint32_t)(int32_t)(int8_t)p[j];
            j += 1;
        } else {
            if (size - j < 3) return -1;
            uint16_t s = (uint16_t)(p[j + 1] | p[j + 2] << 8);
            if (s != 0x8000) {
                d = (uint32_t)(int32_t)(int16_t)s;
                j += 3;
            } else {
                if (size - j < 7) return -1;
                uint32_t w = (uint32_t)p[j + 3] | (uint32_t)p[j + 4] << 8 | (uint32_t)p[j + 5] << 16 |
                             (uint32_t)p[j + 6] << 24;
                if (w != 0x80000000u || literal_min) {
                    d = w;
                    j += 7;
                } else {
                    if (size - j < 15) return -1;
                    uint64_t q = 0;
                    for (int k = 0; k < 8; k++) q |= (uint64_t)p[j + 7 + k] << (8 * k);
                    d = (uint32_t)q;   /* int32 data: the low 32 bits of the delta */
                    j += 15;
                }
            }
        }
        cur += d;
        v[i] = (cur <= (uint32_t)INT32_MAX) ? (int32_t)cur : (int32_t)(-(int64_t)(UINT32_MAX - cur) - 1);
    }
    return j == size ? 0 : -1;
}

/* ---- writer -------------------------------------------------------------- */

static int is_pilatus_layout(int n, int module, int gap)
{
    if (n < module) return 0;
    int k = n / module, r = n % module;
    return r == (k - 1) * gap;
}

/* data_ block name from the file name: [A-Za-z0-9_.-] only */
static void block_name(const char *path, char *out, size_t size)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t n = strlen(base);
    if (n > 4 && strcmp(base + n - 4, ".cbf") == 0) n -= 4;
    size_t o = 0;
    for (size_t i = 0; i < n && o + 1 < size; i++) {
        char c = base[i];
        int okc = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
                  c == '.' || c == '-';
        out[o++] = okc ? c : '_';
    }
    out[o] = '\0';
    if (o == 0 || strcmp(path, "-") == 0) snprintf(out, size, "nb_image");
}

static void append_command_line(nb_strbuf *sb, const char *cmd)
{
    /* "# Command_line (i/n) <chunk>": printable ASCII only, <= 72 characters a
     * line; the "(i/n)" keeps the second word fixed for header parsers. */
    enum { CHUNK = 72 };
    size_t len = strlen(cmd);
    if (len == 0) return;
    size_t nchunks = (len + CHUNK - 1) / CHUNK;
    if (nchunks > 64) nchunks = 64, len = 64 * CHUNK;   /* keep the header bounded */
    for (size_t i = 0; i < nchunks; i++) {
        char chunk[CHUNK + 1];
        size_t start = i * CHUNK, m = len - start < CHUNK ? len - start : CHUNK;
        for (size_t k = 0; k < m; k++) {
            unsigned char c = (unsigned char)cmd[start + k];
            chunk[k] = (c >= 32 && c < 127) ? (char)c : '?';
        }
        chunk[m] = '\0';
        nb_strbuf_printf(sb, "# Command_line (%zu/%zu) %s" CBF_EOL, i + 1, nchunks, chunk);
    }
}

static double finite_or(double v, double dflt) { return isfinite(v) ? v : dflt; }

/* The imgCIF categories that dxtbx's full-CBF readers (and CBFlib) build
 * the beam, detector, goniometer and scan from: the geometry of model.expt
 * in DIALS's frame (m->lab_*), the polarization, the trusted range. */
static void put_imgcif(nb_strbuf *sb, const nb_image_meta *m, double lambda_A, double period, double cutoff,
                       const char *date)
{
    const double *o = m->lab_origin, *f = m->lab_fast, *s = m->lab_slow, *ax = m->lab_axis;
    double px_mm = finite_or(m->pixel_size, 0) * 1e3;
    /* DETECTOR_Z: along the plane's normal, from the sample, by the distance to
     * the plane; ELEMENT_X/Y from there to the first pixel's outer corner */
    double n[3] = {f[1] * s[2] - f[2] * s[1], f[2] * s[0] - f[0] * s[2], f[0] * s[1] - f[1] * s[0]};
    double nn = sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]);
    for (int k = 0; k < 3; k++) n[k] = nn > 0 ? n[k] / nn : (k == 2 ? -1.0 : 0.0);
    double d = o[0] * n[0] + o[1] * n[1] + o[2] * n[2];
    if (d < 0)
        for (int k = 0; k < 3; k++) n[k] = -n[k];
    d = fabs(d);
    double off[3];
    for (int k = 0; k < 3; k++) off[k] = o[k] - d * n[k] + 0.0;
    double start = finite_or(m->osc_start, 0), inc = finite_or(m->osc_range, 0);

    nb_strbuf_printf(sb, "_diffrn.id DIFFRN_ID" CBF_EOL CBF_EOL);
    nb_strbuf_printf(sb, "_diffrn_source.diffrn_id DIFFRN_ID" CBF_EOL "_diffrn_source.source simulation" CBF_EOL
                         "_diffrn_source.type 'nb toolkit'" CBF_EOL CBF_EOL);
    /* dxtbx takes polarizn_source_ratio as its polarization fraction (cbf.h) */
    nb_strbuf_printf(sb, "_diffrn_radiation.diffrn_id DIFFRN_ID" CBF_EOL
                         "_diffrn_radiation.wavelength_id WAVELENGTH1" CBF_EOL "_diffrn_radiation.probe x-ray" CBF_EOL
                         "_diffrn_radiation.polarizn_source_ratio %.6f" CBF_EOL
                         "_diffrn_radiation.polarizn_source_norm %.6f" CBF_EOL CBF_EOL,
                     m->polarization > 0 && isfinite(m->polarization) ? m->polarization : 0.5, m->lab_polar_norm);
    nb_strbuf_printf(sb, "_diffrn_radiation_wavelength.id WAVELENGTH1" CBF_EOL
                         "_diffrn_radiation_wavelength.wavelength %.8f" CBF_EOL
                         "_diffrn_radiation_wavelength.wt 1.0" CBF_EOL CBF_EOL,
                     lambda_A);
    nb_strbuf_printf(sb, "_diffrn_detector.diffrn_id DIFFRN_ID" CBF_EOL "_diffrn_detector.id DETECTOR" CBF_EOL
                         "_diffrn_detector.type 'nb toolkit simulated pixel-array detector'" CBF_EOL
                         "_diffrn_detector.number_of_axes 1" CBF_EOL CBF_EOL);
    nb_strbuf_printf(sb, "_diffrn_detector_axis.detector_id DETECTOR" CBF_EOL
                         "_diffrn_detector_axis.axis_id DETECTOR_Z" CBF_EOL CBF_EOL);
    nb_strbuf_printf(sb, "_diffrn_detector_element.id ELEMENT1" CBF_EOL
                         "_diffrn_detector_element.detector_id DETECTOR" CBF_EOL CBF_EOL);
    nb_strbuf_printf(sb, "_diffrn_data_frame.id FRAME1" CBF_EOL "_diffrn_data_frame.detector_element_id ELEMENT1" CBF_EOL
                         "_diffrn_data_frame.array_id ARRAY1" CBF_EOL "_diffrn_data_frame.binary_id 1" CBF_EOL CBF_EOL);
    nb_strbuf_printf(sb, "_diffrn_measurement.diffrn_id DIFFRN_ID" CBF_EOL "_diffrn_measurement.id GONIOMETER" CBF_EOL
                         "_diffrn_measurement.number_of_axes 1" CBF_EOL "_diffrn_measurement.method rotation" CBF_EOL
                         CBF_EOL);
    nb_strbuf_printf(sb, "_diffrn_measurement_axis.measurement_id GONIOMETER" CBF_EOL
                         "_diffrn_measurement_axis.axis_id PHI" CBF_EOL CBF_EOL);
    nb_strbuf_printf(sb, "_diffrn_scan.id SCAN1" CBF_EOL "_diffrn_scan.frame_id_start FRAME1" CBF_EOL
                         "_diffrn_scan.frame_id_end FRAME1" CBF_EOL "_diffrn_scan.frames 1" CBF_EOL CBF_EOL);
    nb_strbuf_printf(sb, "loop_" CBF_EOL "_diffrn_scan_axis.axis_id" CBF_EOL "_diffrn_scan_axis.scan_id" CBF_EOL
                         "_diffrn_scan_axis.angle_start" CBF_EOL "_diffrn_scan_axis.angle_range" CBF_EOL
                         "_diffrn_scan_axis.angle_increment" CBF_EOL "_diffrn_scan_axis.displacement_start" CBF_EOL
                         "_diffrn_scan_axis.displacement_range" CBF_EOL "_diffrn_scan_axis.displacement_increment" CBF_EOL);
    nb_strbuf_printf(sb, "PHI SCAN1 %.6f %.6f %.6f 0.0 0.0 0.0" CBF_EOL, start, inc, inc);
    nb_strbuf_printf(sb, "DETECTOR_Z SCAN1 0.0 0.0 0.0 %.9f 0.0 0.0" CBF_EOL CBF_EOL, d);
    nb_strbuf_printf(sb, "_diffrn_scan_frame.frame_id FRAME1" CBF_EOL "_diffrn_scan_frame.frame_number %ld" CBF_EOL
                         "_diffrn_scan_frame.integration_time %.7f" CBF_EOL "_diffrn_scan_frame.scan_id SCAN1" CBF_EOL
                         "_diffrn_scan_frame.date %s" CBF_EOL CBF_EOL,
                     m->frame + 1, period, date);
    nb_strbuf_printf(sb, "loop_" CBF_EOL "_diffrn_scan_frame_axis.frame_id" CBF_EOL "_diffrn_scan_frame_axis.axis_id" CBF_EOL
                         "_diffrn_scan_frame_axis.angle" CBF_EOL "_diffrn_scan_frame_axis.displacement" CBF_EOL
                         "FRAME1 PHI %.6f 0.0" CBF_EOL "FRAME1 DETECTOR_Z 0.0 %.9f" CBF_EOL CBF_EOL,
                     start, d);
    nb_strbuf_printf(sb, "loop_" CBF_EOL "_axis.id" CBF_EOL "_axis.type" CBF_EOL "_axis.equipment" CBF_EOL
                         "_axis.depends_on" CBF_EOL "_axis.vector[1]" CBF_EOL "_axis.vector[2]" CBF_EOL
                         "_axis.vector[3]" CBF_EOL "_axis.offset[1]" CBF_EOL "_axis.offset[2]" CBF_EOL
                         "_axis.offset[3]" CBF_EOL);
    nb_strbuf_printf(sb, "SOURCE general source . 0 0 1 . . ." CBF_EOL "GRAVITY general gravity . 0 -1 0 . . ." CBF_EOL);
    nb_strbuf_printf(sb, "PHI rotation goniometer . %.12f %.12f %.12f . . ." CBF_EOL, ax[0] + 0.0, ax[1] + 0.0,
                     ax[2] + 0.0);
    nb_strbuf_printf(sb, "DETECTOR_Z translation detector . %.12f %.12f %.12f 0 0 0" CBF_EOL, n[0] + 0.0, n[1] + 0.0,
                     n[2] + 0.0);
    nb_strbuf_printf(sb, "ELEMENT_X translation detector DETECTOR_Z %.12f %.12f %.12f %.9f %.9f %.9f" CBF_EOL,
                     f[0] + 0.0, f[1] + 0.0, f[2] + 0.0, off[0], off[1], off[2]);
    nb_strbuf_printf(sb, "ELEMENT_Y translation detector ELEMENT_X %.12f %.12f %.12f 0 0 0" CBF_EOL CBF_EOL,
                     s[0] + 0.0, s[1] + 0.0, s[2] + 0.0);
    nb_strbuf_printf(sb, "loop_" CBF_EOL "_array_structure_list.array_id" CBF_EOL "_array_structure_list.index" CBF_EOL
                         "_array_structure_list.dimension" CBF_EOL "_array_structure_list.precedence" CBF_EOL
                         "_array_structure_list.direction" CBF_EOL "_array_structure_list.axis_set_id" CBF_EOL
                         "ARRAY1 1 %d 1 increasing ELEMENT_X" CBF_EOL "ARRAY1 2 %d 2 increasing ELEMENT_Y" CBF_EOL CBF_EOL,
                     m->fpixels, m->spixels);
    /* the first pixel at 0: CBFlib's pixel (0, 0) is then the ELEMENT_X offset, dxtbx's origin */
    nb_strbuf_printf(sb, "loop_" CBF_EOL "_array_structure_list_axis.axis_set_id" CBF_EOL
                         "_array_structure_list_axis.axis_id" CBF_EOL "_array_structure_list_axis.displacement" CBF_EOL
                         "_array_structure_list_axis.displacement_increment" CBF_EOL
                         "ELEMENT_X ELEMENT_X 0.0 %.10g" CBF_EOL "ELEMENT_Y ELEMENT_Y 0.0 %.10g" CBF_EOL CBF_EOL,
                     px_mm, px_mm);
    nb_strbuf_printf(sb, "loop_" CBF_EOL "_array_element_size.array_id" CBF_EOL "_array_element_size.index" CBF_EOL
                         "_array_element_size.size" CBF_EOL "ARRAY1 1 %.10ge-6" CBF_EOL "ARRAY1 2 %.10ge-6" CBF_EOL CBF_EOL,
                     px_mm * 1e3, px_mm * 1e3);
    nb_strbuf_printf(sb, "_array_intensities.array_id ARRAY1" CBF_EOL "_array_intensities.binary_id 1" CBF_EOL
                         "_array_intensities.linearity linear" CBF_EOL "_array_intensities.gain %.10g" CBF_EOL
                         "_array_intensities.overload %.0f" CBF_EOL "_array_intensities.undefined_value -1" CBF_EOL
                         CBF_EOL,
                     m->gain > 0 && isfinite(m->gain) ? m->gain : 1.0, cutoff);
    nb_strbuf_printf(sb, "_array_structure.id ARRAY1" CBF_EOL "_array_structure.encoding_type 'signed 32-bit integer'" CBF_EOL
                         "_array_structure.compression_type x-CBF_BYTE_OFFSET" CBF_EOL
                         "_array_structure.byte_order LITTLE_ENDIAN" CBF_EOL CBF_EOL);
}

/* The sensor line's material (nb_stated_sensor_of's), as PILATUS headers
 * and dxtbx's miniCBF reader, which knows "Silicon" and "CdTe", spell it;
 * none named is silicon, as PILATUS's */
static const char *cbf_sensor_word(const char *material)
{
    if (!material || !*material || !strcmp(material, "Si")) return "Silicon";
    return material;
}

static void build_header(nb_strbuf *sb, const char *path, const nb_image_meta *m, size_t nbytes,
                         const char *md5)
{
    char name[128];
    block_name(m->name ? m->name : path, name, sizeof name);
    int pilatus = is_pilatus_layout(m->fpixels, 487, 7) && is_pilatus_layout(m->spixels, 195, 17);

    double pixel = finite_or(m->pixel_size, 0);
    double dist = (m->close_distance > 0 && isfinite(m->close_distance)) ? m->close_distance
                                                                       : finite_or(m->distance, 0);
    double lambda_A = finite_or(m->wavelength, 0) * 1e10;
    double period = (m->exposure > 0 && isfinite(m->exposure)) ? m->exposure : 1.0;
    double cutoff = m->count_cutoff;
    if (!(cutoff >= 1) || cutoff > INT32_MAX) cutoff = INT32_MAX;
    double energy = lambda_A > 0 ? 12398.419843320026 / lambda_A : 0;
    double bx = pixel > 0 ? m->beam_f / pixel : 0, by = pixel > 0 ? m->beam_s / pixel : 0;

    /* time stamp: epoch + frame * period, millisecond resolution */
    double t = (m->frame > 0 ? (double)m->frame : 0.0) * period;
    if (!(t < 4e9)) t = 0;
    time_t secs = (time_t)floor(t);
    int ms = (int)floor((t - floor(t)) * 1000.0 + 0.5);
    if (ms >= 1000) secs += 1, ms -= 1000;
    struct tm tmv;
    char stamp[64];
    gmtime_r(&secs, &tmv);
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tmv);

    nb_strbuf_printf(sb, "###CBF: VERSION 1.5, nb toolkit %s" CBF_EOL CBF_EOL, NB_VERSION);
    nb_strbuf_printf(sb, "data_%s" CBF_EOL CBF_EOL, name);
    if (m->lab) {
        char date[80];
        snprintf(date, sizeof date, "%s.%03d", stamp, ms);
        put_imgcif(sb, m, lambda_A, period, cutoff, date);
        nb_strbuf_printf(sb, "_array_data.array_id ARRAY1" CBF_EOL "_array_data.binary_id 1" CBF_EOL);
    }
    /* PILATUS_1.2 only without the imgCIF categories: dxtbx's full-CBF
     * PILATUS reader sets the polarization fraction to 0.999 (see cbf.h) */
    nb_strbuf_printf(sb, "_array_data.header_convention \"%s\"" CBF_EOL,
                     pilatus && !m->lab ? "PILATUS_1.2" : "GENERIC_MINI");
    nb_strbuf_printf(sb, "_array_data.header_contents" CBF_EOL ";" CBF_EOL);
    if (pilatus)
        nb_strbuf_printf(sb, "# Detector: PILATUS (nb toolkit simulation), S/N 00-0000" CBF_EOL);
    else
        nb_strbuf_printf(sb, "# Detector: nb toolkit simulated pixel-array detector, S/N 00-0000" CBF_EOL);
    nb_strbuf_printf(sb, "# %s.%03d" CBF_EOL, stamp, ms);
    nb_strbuf_printf(sb, "# Pixel_size %.10ge-6 m x %.10ge-6 m" CBF_EOL, pixel * 1e6, pixel * 1e6);
    /* no sensor line without a thickness: dxtbx's parallax correction
     * asserts a positive one and falls back to plain pixels without the line */
    if (m->sensor_thickness > 0 && isfinite(m->sensor_thickness))
        nb_strbuf_printf(sb, "# %s sensor, thickness %.6f m" CBF_EOL, cbf_sensor_word(m->sensor_material),
                         m->sensor_thickness);
    nb_strbuf_printf(sb, "# Exposure_time %.7f s" CBF_EOL, period);
    nb_strbuf_printf(sb, "# Exposure_period %.7f s" CBF_EOL, period);
    nb_strbuf_printf(sb, "# Tau = 0 s" CBF_EOL);
    nb_strbuf_printf(sb, "# Count_cutoff %.0f counts" CBF_EOL, cutoff);
    nb_strbuf_printf(sb, "# Threshold_setting: %.0f eV" CBF_EOL, energy / 2);
    nb_strbuf_printf(sb, "# N_excluded_pixels = 0" CBF_EOL);
    nb_strbuf_printf(sb, "# Excluded_pixels: (nil)" CBF_EOL);
    nb_strbuf_printf(sb, "# Flat_field: (nil)" CBF_EOL);
    nb_strbuf_printf(sb, "# Trim_file: (nil)" CBF_EOL);
    nb_strbuf_printf(sb, "# Image_path: (nil)" CBF_EOL);
    nb_strbuf_printf(sb, "# Wavelength %.6f A" CBF_EOL, lambda_A);
    nb_strbuf_printf(sb, "# Energy_range (0, 0) eV" CBF_EOL);
    nb_strbuf_printf(sb, "# Detector_distance %.6f m" CBF_EOL, dist);
    nb_strbuf_printf(sb, "# Detector_Voffset 0.00000 m" CBF_EOL);
    nb_strbuf_printf(sb, "# Beam_xy (%.6f, %.6f) pixels" CBF_EOL, finite_or(bx, 0), finite_or(by, 0));
    nb_strbuf_printf(sb, "# Filter_transmission 1.0000" CBF_EOL);
    nb_strbuf_printf(sb, "# Start_angle %.4f deg." CBF_EOL, finite_or(m->osc_start, 0));
    nb_strbuf_printf(sb, "# Angle_increment %.4f deg." CBF_EOL, finite_or(m->osc_range, 0));
    if (m->polarization > 0 && isfinite(m->polarization))
        nb_strbuf_printf(sb, "# Polarization %.4f" CBF_EOL, m->polarization);
    nb_strbuf_printf(sb, "# Detector_2theta %.4f deg." CBF_EOL, finite_or(m->twotheta, 0));
    nb_strbuf_printf(sb, "# Alpha 0.0000 deg." CBF_EOL);
    nb_strbuf_printf(sb, "# Kappa 0.0000 deg." CBF_EOL);
    nb_strbuf_printf(sb, "# Phi %.4f deg." CBF_EOL, finite_or(m->osc_start, 0));
    nb_strbuf_printf(sb, "# Phi_increment %.4f deg." CBF_EOL, finite_or(m->osc_range, 0));
    nb_strbuf_printf(sb, "# Chi 0.0000 deg." CBF_EOL);
    nb_strbuf_printf(sb, "# Chi_increment 0.0000 deg." CBF_EOL);
    nb_strbuf_printf(sb, "# Oscillation_axis X, CW" CBF_EOL);
    nb_strbuf_printf(sb, "# N_oscillations 1" CBF_EOL);
    /* numbered from 1, as the file names and DIALS's image numbers */
    nb_strbuf_printf(sb, "# Software: nb toolkit %s, frame %ld" CBF_EOL, NB_VERSION, m->frame + 1);
    if (m->command_line) append_command_line(sb, m->command_line);
    nb_strbuf_printf(sb, ";" CBF_EOL);
    nb_strbuf_printf(sb, "_array_data.data" CBF_EOL ";" CBF_EOL);
    nb_strbuf_printf(sb, "--CIF-BINARY-FORMAT-SECTION--" CBF_EOL);
    nb_strbuf_printf(sb, "Content-Type: application/octet-stream;" CBF_EOL);
    nb_strbuf_printf(sb, "     conversions=\"x-CBF_BYTE_OFFSET\"" CBF_EOL);
    nb_strbuf_printf(sb, "Content-Transfer-Encoding: BINARY" CBF_EOL);
    nb_strbuf_printf(sb, "X-Binary-Size: %zu" CBF_EOL, nbytes);
    nb_strbuf_printf(sb, "X-Binary-ID: 1" CBF_EOL);
    nb_strbuf_printf(sb, "X-Binary-Element-Type: \"signed 32-bit integer\"" CBF_EOL);
    nb_strbuf_printf(sb, "X-Binary-Element-Byte-Order: LITTLE_ENDIAN" CBF_EOL);
    nb_strbuf_printf(sb, "Content-MD5: %s" CBF_EOL, md5);
    nb_strbuf_printf(sb, "X-Binary-Number-of-Elements: %zu" CBF_EOL, (size_t)m->fpixels * (size_t)m->spixels);
    nb_strbuf_printf(sb, "X-Binary-Size-Fastest-Dimension: %d" CBF_EOL, m->fpixels);
    nb_strbuf_printf(sb, "X-Binary-Size-Second-Dimension: %d" CBF_EOL, m->spixels);
    nb_strbuf_printf(sb, "X-Binary-Size-Padding: %d" CBF_EOL, CBF_PADDING);
    nb_strbuf_printf(sb, CBF_EOL);
}

nb_status nb_cbf_write(const char *path, const int32_t *counts, const nb_image_meta *m)
{
    if (m->fpixels <= 0 || m->spixels <= 0)
        return nb_error_set(NB_ERR_DATA, "cannot write '%s': image size %d x %d is empty", path, m->fpixels,
                            m->spixels);
    size_t n = (size_t)m->fpixels * (size_t)m->spixels;
    size_t nbytes = bo_compressed_size(counts, n);
    unsigned char *packed;
    nb_status st = nb_calloc((void **)&packed, nbytes, 1, "the compressed CBF data");
    if (st) return st;
    bo_compress(counts, n, packed);

    char md5[25];
    md5_base64(packed, nbytes, md5);
    nb_strbuf hdr;
    nb_strbuf_init(&hdr);
    build_header(&hdr, path, m, nbytes, md5);

    nb_outfile *of;
    st = nb_outfile_open(&of, path, 0);
    if (st) {
        nb_strbuf_free(&hdr);
        free(packed);
        return st;
    }
    FILE *fp = nb_outfile_fp(of);
    static const char pad[CBF_PADDING];
    static const char trailer[] = CBF_EOL "--CIF-BINARY-FORMAT-SECTION----" CBF_EOL ";" CBF_EOL CBF_EOL;
    int okw = fwrite(hdr.data, 1, hdr.len, fp) == hdr.len && fwrite(cbf_magic, 1, 4, fp) == 4 &&
              fwrite(packed, 1, nbytes, fp) == nbytes && fwrite(pad, 1, CBF_PADDING, fp) == CBF_PADDING &&
              fwrite(trailer, 1, sizeof trailer - 1, fp) == sizeof trailer - 1;
    int e = errno;
    nb_strbuf_free(&hdr);
    free(packed);
    st = nb_outfile_commit(of);   /* reports a write error (ENOSPC...) and removes the file */
    if (!okw && !st) st = nb_error_set(NB_ERR_IO, "cannot write '%s': %s", path, strerror(e ? e : EIO));
    return st;
}

/* ---- reader -------------------------------------------------------------- */

static const char *memfind(const char *hay, size_t n, const char *needle, size_t m)
{
    if (m == 0 || n < m) return NULL;
    for (size_t i = 0; i + m <= n; i++)
        if (hay[i] == needle[0] && memcmp(hay + i, needle, m) == 0) return hay + i;
    return NULL;
}

/* Value of a MIME header "Key: value" (or "key=value") in [p, end): copies the
 * rest of the line (quotes and spaces trimmed) into out; 0 when absent. */
static int mime_value(const char *p, const char *end, const char *key, char *out, size_t size)
{
    size_t klen = strlen(key);
    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        const char *le = eol ? eol : end;
        const char *s = p;
        while (s < le && (*s == ' ' || *s == '\t')) s++;
        if ((size_t)(le - s) > klen && strncasecmp(s, key, klen) == 0 && (s[klen] == ':' || s[klen] == '=')) {
            s += klen + 1;
            while (s < le && (*s == ' ' || *s == '\t' || *s == '"')) s++;
            const char *t = le;
            while (t > s && (t[-1] == '\r' || t[-1] == ' ' || t[-1] == '\t' || t[-1] == '"' || t[-1] == ';'))
                t--;
            size_t len = (size_t)(t - s);
            if (len >= size) len = size - 1;
            memcpy(out, s, len);
            out[len] = '\0';
            return 1;
        }
        p = eol ? eol + 1 : end;
    }
    return 0;
}

static int parse_size(const char *s, unsigned long long *out)
{
    char *endp;
    if (!*s || *s == '-') return -1;
    errno = 0;
    unsigned long long v = strtoull(s, &endp, 10);
    if (errno || endp == s || *endp) return -1;
    *out = v;
    return 0;
}

/* The overload the text before the binary section [p, end) states:
 * _array_intensities.overload (imgCIF), else the miniCBF's "# Count_cutoff";
 * NAN when neither */
static double stated_overload(const char *p, const char *end)
{
    static const char *const keys[] = {"_array_intensities.overload", "# Count_cutoff"};
    for (int k = 0; k < 2; k++) {
        const char *at = memfind(p, (size_t)(end - p), keys[k], strlen(keys[k]));
        if (!at) continue;
        char num[64];
        size_t i = 0;
        at += strlen(keys[k]);
        while (at < end && (*at == ' ' || *at == '\t')) at++;
        while (at < end && i + 1 < sizeof num && *at != '\r' && *at != '\n' && *at != ' ') num[i++] = *at++;
        num[i] = '\0';
        char *e;
        double v = strtod(num, &e);
        if (e != num && *e == '\0' && isfinite(v)) return v;
    }
    return NAN;
}

nb_status nb_cbf_read(const char *path, int32_t **counts, int *width, int *height)
{
    return nb_cbf_read_stated(path, counts, width, height, NULL);
}

nb_status nb_cbf_read_stated(const char *path, int32_t **counts, int *width, int *height, double *overload)
{
    char *data;
    size_t len;
    *counts = NULL;
    *width = *height = 0;
    if (overload) *overload = NAN;
    nb_status st = nb_read_file(path, &data, &len);
    if (st) return st;

#define FAIL(...)                                                     \
    do {                                                              \
        nb_status fail_ = nb_error_set(NB_ERR_DATA, __VA_ARGS__);     \
        free(data);                                                   \
        return fail_;                                                 \
    } while (0)

    if (len < 6 || memcmp(data, "###CBF", 6) != 0) FAIL("'%s' is not a CBF file (no ###CBF signature)", path);
    static const char marker[] = "--CIF-BINARY-FORMAT-SECTION--";
    const char *sec = memfind(data, len, marker, sizeof marker - 1);
    if (!sec) FAIL("'%s': truncated or malformed CBF: no binary section", path);
    const char *start = memfind(sec, len - (size_t)(sec - data), (const char *)cbf_magic, 4);
    if (!start) FAIL("'%s': truncated or malformed CBF: no binary data start marker", path);
    const char *hend = start;   /* the MIME headers lie in [sec, hend) */

    char v[128];
    if (!mime_value(sec, hend, "conversions", v, sizeof v) || strcmp(v, "x-CBF_BYTE_OFFSET") != 0)
        FAIL("'%s': unsupported CBF compression '%s' (only x-CBF_BYTE_OFFSET is read)", path,
             mime_value(sec, hend, "conversions", v, sizeof v) ? v : "none");
    if (mime_value(sec, hend, "X-Binary-Element-Type", v, sizeof v) && strcmp(v, "signed 32-bit integer") != 0)
        FAIL("'%s': unsupported CBF element type '%s' (only signed 32-bit integer is read)", path, v);
    if (mime_value(sec, hend, "X-Binary-Element-Byte-Order", v, sizeof v) && strcmp(v, "LITTLE_ENDIAN") != 0)
        FAIL("'%s': unsupported CBF byte order '%s'", path, v);

    unsigned long long size, fast, slow, nelem;
    if (!mime_value(sec, hend, "X-Binary-Size", v, sizeof v) || parse_size(v, &size))
        FAIL("'%s': malformed CBF: missing or bad X-Binary-Size", path);
    if (!mime_value(sec, hend, "X-Binary-Size-Fastest-Dimension", v, sizeof v) || parse_size(v, &fast) ||
        fast == 0 || fast > INT_MAX)
        FAIL("'%s': malformed CBF: missing or bad X-Binary-Size-Fastest-Dimension", path);
    if (!mime_value(sec, hend, "X-Binary-Size-Second-Dimension", v, sizeof v) || parse_size(v, &slow) ||
        slow == 0 || slow > INT_MAX)
        FAIL("'%s': malformed CBF: missing or bad X-Binary-Size-Second-Dimension", path);
    if (mime_value(sec, hend, "X-Binary-Number-of-Elements", v, sizeof v) &&
        (parse_size(v, &nelem) || nelem != fast * slow))
        FAIL("'%s': malformed CBF: X-Binary-Number-of-Elements %s is not %llu x %llu", path, v, fast, slow);
    if (fast * slow > SIZE_MAX / sizeof(int32_t) / 16)
        FAIL("'%s': CBF image %llu x %llu is too large", path, fast, slow);

    const unsigned char *packed = (const unsigned char *)start + 4;
    size_t avail = len - (size_t)((const char *)packed - data);
    if (size > avail)
        FAIL("'%s': truncated CBF: %zu of %llu bytes of compressed data present", path, avail, size);
    /* each value takes at least one byte */
    if (size < fast * slow)
        FAIL("'%s': malformed CBF: %llu bytes cannot hold %llu values", path, size, fast * slow);

    if (mime_value(sec, hend, "Content-MD5", v, sizeof v)) {
        char md5[25];
        md5_base64(packed, (size_t)size, md5);
        if (strcmp(v, md5) != 0) FAIL("'%s': corrupt CBF: Content-MD5 %s does not match the data (%s)", path, v, md5);
    }

    int32_t *out;
    st = nb_calloc((void **)&out, (size_t)(fast * slow), sizeof(int32_t), "the CBF image");
    if (st) {
        free(data);
        return st;
    }
    /* 0x80000000: a plain delta in this writer's files, else first the
     * specification's 64-bit escape; the other reading when that fails */
    const char *eol = memchr(data, '\n', (size_t)(sec - data));
    int ours = eol && memfind(data, (size_t)(eol - data), "nb toolkit", 10) != NULL;
    if (bo_decompress(packed, (size_t)size, out, (size_t)(fast * slow), ours) != 0 &&
        bo_decompress(packed, (size_t)size, out, (size_t)(fast * slow), !ours) != 0) {
        free(out);
        FAIL("'%s': corrupt CBF: the byte-offset data do not decode to %llu x %llu values in %llu bytes", path,
             fast, slow, size);
    }
#undef FAIL
    if (overload) *overload = stated_overload(data, sec);
    free(data);
    *counts = out;
    *width = (int)fast;
    *height = (int)slow;
    return NB_OK;
}

/* ---- a frame as a CBF (the registry's write_image) ------------------------- */

/* A CBF holds counts as a PILATUS counts them, from 0: the counts less
 * their ADC offset (nb_counts_from_zero), the overload lower by it.  With a
 * sensor it is a miniCBF alone, which dxtbx reads with the sensor's parallax
 * but polarization 0.999 (cbf.h): said once a run. */
nb_status nb_cbf_write_frame(const nb_frame_image *img)
{
    const size_t n = (size_t)img->fr->width * img->fr->height;
    nb_image_meta meta = img->meta;
    int32_t *values;
    nb_status st = nb_alloc_large((void **)&values, n, sizeof *values, "the CBF values");
    if (st) return st;
    nb_counts_from_zero(img->counts, n, img->adc, img->final, values);
    meta.count_cutoff = (img->bits == 32 ? 2147483647.0 : 65535.0) - lrint(img->adc);
    static int told_sensor;
    if (meta.sensor_thickness > 0) nb_warn_sensor_mu(img->final, img->fr->plan);
    if (meta.lab && meta.sensor_thickness > 0) {
        meta.lab = 0;
        if (!told_sensor) {
            told_sensor = 1;
            nb_warn("'%s': with a sensor thickness the CBF is a miniCBF, from which DIALS takes polarization "
                    "0.999: give it 'dials.import ... polarization_fraction=%g' or read -o model.expt",
                    img->final, meta.polarization);
        }
    }
    st = nb_cbf_write(img->path, values, &meta);
    free(values);
    return st;
}
