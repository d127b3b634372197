/* smv.c - SMV (ADSC) images: the header reader that -img and -mask use, with
 * the reference's rules (it hands the values to the geometry through
 * nb_smv_apply_to_request, so libnbcore reads no file format), and the writer
 * of the int and noise images (16-bit unsigned, or 32-bit as noisify), a few
 * rows at a time. */
#include "smv.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_util.h"
#include "frame_write.h"

void nb_smv_free(nb_smv *smv)
{
    free(smv->header);
    free(smv->pixels);
    memset(smv, 0, sizeof *smv);
}

double nb_smv_value(const nb_smv *smv, const char *key)
{
    const char *s = smv->header, *hit = NULL, *p;
    size_t klen = strlen(key);
    while ((p = strstr(s, key)) != NULL) {
        hit = p + klen;
        s = hit;
    }
    if (!hit) return NAN;
    const char *eq = strchr(hit, '=');
    if (!eq) return 0.0;
    return atof(eq + 1);
}

nb_status nb_smv_apply_to_request(nb_request *rq, const char *path, nb_header_role role)
{
    nb_smv smv;
    nb_status st = nb_smv_read(path, role == NB_HEADER_MASK, &smv);
    if (st) return st;
    nb_header_geometry h = {
        .width = smv.width,
        .height = smv.height,
        .pixel_size = nb_smv_value(&smv, "PIXEL_SIZE"),
        .distance = nb_smv_value(&smv, "DISTANCE"),
        .close_distance = nb_smv_value(&smv, "CLOSE_DISTANCE"),
        .wavelength = nb_smv_value(&smv, "WAVELENGTH"),
        .beam_center_x = nb_smv_value(&smv, "BEAM_CENTER_X"),
        .beam_center_y = nb_smv_value(&smv, "BEAM_CENTER_Y"),
        .beam_f = NAN,
        .beam_s = NAN,
        .orgx = nb_smv_value(&smv, "ORGX"),
        .orgy = nb_smv_value(&smv, "ORGY"),
        .phi = nb_smv_value(&smv, "PHI"),
        .osc_range = nb_smv_value(&smv, "OSC_RANGE"),
        .twotheta = nb_smv_value(&smv, "TWOTHETA"),
        .pixels = smv.pixels,
    };
    nb_smv_dxtbx_beam(&smv, &h.beam_f, &h.beam_s);
    if (!isnan(h.beam_f)) h.beam_center_x = h.beam_center_y = NAN;
    st = nb_request_apply_header(rq, &h, path, role);
    nb_smv_free(&smv);
    return st;
}

/* The value of the last "KEY=" line (KEY at a line start), up to ';' or
 * the end of the line; 0 when absent. */
static int smv_line_value(const nb_smv *smv, const char *key, char *out, size_t size)
{
    size_t klen = strlen(key);
    const char *hit = NULL;
    for (const char *p = smv->header; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (!strncmp(p, key, klen) && p[klen] == '=') hit = p + klen + 1;
    if (!hit) return 0;
    size_t len = strcspn(hit, ";\r\n");
    if (len >= size) len = size - 1;
    memcpy(out, hit, len);
    out[len] = '\0';
    return 1;
}

void nb_smv_dxtbx_beam(const nb_smv *smv, double *beam_f, double *beam_s)
{
    char v[32];
    *beam_f = *beam_s = NAN;
    if (!smv_line_value(smv, NB_SMV_BEAM_KEY, v, sizeof v) || strcmp(v, "dxtbx") != 0) return;
    double x = nb_smv_value(smv, "BEAM_CENTER_X"), y = nb_smv_value(smv, "BEAM_CENTER_Y");
    double pixel = nb_smv_value(smv, "PIXEL_SIZE");
    if (isnan(x) || isnan(y) || !(pixel > 0)) return;
    /* the inverse of the writer's (nb_smv_meta_from_plan), which is the
     * inverse of dxtbx's JHSim reader */
    *beam_f = x + pixel;
    *beam_s = smv->height * pixel - y + pixel;
}

int nb_smv_signature(const char *path)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) return 0;
    char first[12];
    size_t got = fread(first, 1, sizeof first, fp);
    fclose(fp);
    return got == sizeof first && memcmp(first, "{\nHEADER_BYT", 12) == 0;
}

nb_status nb_smv_read(const char *path, int want_pixels, nb_smv *out)
{
    memset(out, 0, sizeof *out);
    FILE *fp = fopen(path, "rb");
    if (!fp) return nb_error_set(NB_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    char first[512];
    size_t got = fread(first, 1, sizeof first, fp);
    if (got < 12 || strncmp(first, "{\nHEADER_BYT", 12) != 0) {
        fclose(fp);
        return nb_error_set(NB_ERR_DATA, "'%s' does not look like an SMV (ADSC) image: no {HEADER_BYTES= at its start",
                            path);
    }
    out->header = calloc(1, got + 1);
    if (!out->header) {
        fclose(fp);
        return nb_error_set(NB_ERR_NOMEM, "out of memory");
    }
    memcpy(out->header, first, got);
    double hb = nb_smv_value(out, "HEADER_BYTES");
    if (!(hb >= 16 && hb <= 1 << 24)) {
        fclose(fp);
        nb_smv_free(out);
        return nb_error_set(NB_ERR_DATA, "'%s': bad HEADER_BYTES in its SMV header", path);
    }
    out->header_size = (int)hb;
    free(out->header);
    out->header = calloc(1, (size_t)out->header_size + 1);
    if (!out->header) {
        fclose(fp);
        return nb_error_set(NB_ERR_NOMEM, "out of memory");
    }
    rewind(fp);
    got = fread(out->header, 1, (size_t)out->header_size, fp);
    if (got < (size_t)out->header_size) {
        fclose(fp);
        nb_smv_free(out);
        return nb_error_set(NB_ERR_DATA, "'%s': truncated SMV header (%zu of %d bytes)", path, got,
                            (int)hb);
    }
    /* a header is text: stop at the first NUL, as the reference's string functions do */
    double w = nb_smv_value(out, "SIZE1"), h = nb_smv_value(out, "SIZE2");
    if (isnan(w) || w == 0) w = h = nb_smv_value(out, "DETECTOR_DIMENSIONS");
    if (!(w >= 1 && h >= 1 && w <= 1000000 && h <= 1000000 && w * h <= 2147483647.0)) {
        fclose(fp);
        nb_smv_free(out);
        return nb_error_set(NB_ERR_DATA, "'%s': SMV header has no usable SIZE1/SIZE2", path);
    }
    out->width = (int)w;
    out->height = (int)h;
    {
        const char *s = out->header, *hit = NULL, *p;
        while ((p = strstr(s, "BYTE_ORDER=")) != NULL) {
            hit = p + 11;
            s = hit;
        }
        out->big_endian = hit && strncmp(hit, "big_endian", 10) == 0;
    }
    /* TYPE= says the pixel width: ADSC's unsigned_short, or the 32-bit
     * long_integer that noisify and nb-convert -bits 32 write (the reference
     * itself always reads 16 bits; following TYPE reads both correctly) */
    out->bytes_per_pixel = 2;
    {
        const char *s = out->header, *hit = NULL, *p;
        while ((p = strstr(s, "TYPE=")) != NULL) {
            hit = p + 5;
            s = hit;
        }
        if (hit) {
            size_t len = strcspn(hit, ";\n\r \t");
            if (len == 14 && !strncmp(hit, "unsigned_short", len)) out->bytes_per_pixel = 2;
            else if ((len == 12 && !strncmp(hit, "long_integer", len)) ||
                     (len == 13 && !strncmp(hit, "unsigned_long", len)) ||
                     (len == 12 && !strncmp(hit, "unsigned_int", len)))
                out->bytes_per_pixel = 4;
            else {
                fclose(fp);
                int shown = (int)(len > 40 ? 40 : len);
                nb_smv_free(out);
                return nb_error_set(NB_ERR_DATA,
                                    "'%s': SMV TYPE=%.*s is not supported (only unsigned_short and long_integer)", path,
                                    shown, hit);
            }
        }
    }
    if (want_pixels) {
        size_t n = (size_t)out->width * (size_t)out->height;
        nb_status st = nb_calloc((void **)&out->pixels, n, sizeof(uint32_t), "SMV pixels");
        if (st) {
            fclose(fp);
            nb_smv_free(out);
            return st;
        }
        /* read into the top of the buffer, then widen in place from the start */
        size_t bpp = (size_t)out->bytes_per_pixel;
        unsigned char *raw = (unsigned char *)out->pixels + n * (sizeof(uint32_t) - bpp);
        got = fread(raw, bpp, n, fp);
        if (got < n) {
            fclose(fp);
            nb_smv_free(out);
            return nb_error_set(NB_ERR_DATA, "'%s': truncated SMV image: %zu of %zu pixels", path, got, n);
        }
        for (size_t i = 0; i < n; i++) {
            const unsigned char *b = raw + i * bpp;
            uint32_t v;
            if (bpp == 2)
                v = out->big_endian ? (uint32_t)b[0] << 8 | b[1] : (uint32_t)b[1] << 8 | b[0];
            else
                v = out->big_endian ? (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3]
                                    : (uint32_t)b[3] << 24 | (uint32_t)b[2] << 16 | (uint32_t)b[1] << 8 | b[0];
            out->pixels[i] = v;
        }
    }
    fclose(fp);
    return NB_OK;
}

/* ---- writing ---------------------------------------------------------------- */

#define RTD (180.0 / 3.14159265358979323846)

void nb_smv_meta_from_plan(const nb_plan *p, double adc, int beam_mode, nb_smv_meta *m)
{
    memset(m, 0, sizeof *m);
    m->fpixels = p->panels[0].fpixels;
    m->spixels = p->panels[0].spixels;
    m->pixel_mm = p->panels[0].pixel_size * 1000.0;
    m->distance_mm = p->distance * 1000.0;
    m->wavelength_A = p->lambda0 * 1e10;
    m->beam_mode = beam_mode;
    if (beam_mode == NB_SMV_BEAM_DXTBX) {
        /* dxtbx's JHSim reader puts the beam at (X + pixel, height - Y + pixel) */
        m->beam_center_x = (p->Fbeam - p->panels[0].pixel_size) * 1000.0;
        m->beam_center_y =
            (p->panels[0].spixels * p->panels[0].pixel_size - p->Sbeam + p->panels[0].pixel_size) * 1000.0;
    } else {
        m->beam_center_x = p->Xbeam * 1000.0;
        m->beam_center_y = p->Ybeam * 1000;
    }
    m->adxv_x = p->Fbeam * 1000.0;
    m->adxv_y = (p->detsize_s - p->Sbeam) * 1000;
    m->mosflm_x = (p->Sbeam - 0.5 * p->panels[0].pixel_size) * 1000.0;
    m->mosflm_y = (p->Fbeam - 0.5 * p->panels[0].pixel_size) * 1000;
    m->denzo_x = (p->Sbeam - 0.0 * p->panels[0].pixel_size) * 1000.0;
    m->denzo_y = (p->Fbeam - 0.0 * p->panels[0].pixel_size) * 1000;
    memcpy(m->dials_origin, p->dials_origin, sizeof m->dials_origin);
    m->orgx = p->ORGX;
    m->orgy = p->ORGY;
    m->close_distance_mm = p->close_distance * 1000.0;
    m->phi_deg = p->phi0 * RTD;
    m->osc_start_deg = p->phi0 * RTD;
    m->osc_range_deg = p->osc * RTD;
    m->twotheta_deg = p->twotheta * RTD;
    m->adc_offset = adc;
}

/* An SMV file being written: the header, then the pixels in any number of
 * pieces (nb_smv_writer_put), then nb_smv_writer_close. */
struct nb_smv_writer {
    nb_outfile *of;
    int bits;
    void *packed; /* one piece of packed pixels */
    size_t packed_cap;
};

nb_status nb_smv_writer_open(nb_smv_writer **out, const char *path, const nb_smv_meta *m, int bits)
{
    char head[2048];
    const uint16_t one = 1;
    const char *order = *(const unsigned char *)&one == 1 ? "little_endian" : "big_endian";
    *out = NULL;
    if (bits != 16 && bits != 32) return nb_error_set(NB_ERR_USAGE, "SMV images are 16 or 32 bits, not %d", bits);
    /* the reference's %g, or (dxtbx) digits enough for the beam to come back
     * within 1e-6 pixel, and the key that says how to read it back */
    char beam[160];
    /* the counts' ADU per photon (ADSC's key, which dxtbx's ADSC reader
     * takes); left out at 1, as the reference writes its headers */
    char gain[64] = "";
    if (m->gain > 0 && m->gain != 1.0 && isfinite(m->gain)) snprintf(gain, sizeof gain, "GAIN=%.10g;\n", m->gain);
    if (m->beam_mode == NB_SMV_BEAM_DXTBX)
        snprintf(beam, sizeof beam, "BEAM_CENTER_X=%.10g;\nBEAM_CENTER_Y=%.10g;\n", m->beam_center_x, m->beam_center_y);
    else
        snprintf(beam, sizeof beam, "BEAM_CENTER_X=%g;\nBEAM_CENTER_Y=%g;\n", m->beam_center_x, m->beam_center_y);
    int n = snprintf(head, sizeof head,
                     "{\nHEADER_BYTES=%%d;\nDIM=2;\nBYTE_ORDER=%s;\nTYPE=%s;\n"
                     "SIZE1=%d;\nSIZE2=%d;\nPIXEL_SIZE=%g;\nDISTANCE=%g;\n"
                     "WAVELENGTH=%g;\n"
                     "%s"
                     "ADXV_CENTER_X=%g;\nADXV_CENTER_Y=%g;\n"
                     "MOSFLM_CENTER_X=%g;\nMOSFLM_CENTER_Y=%g;\n"
                     "DENZO_X_BEAM=%g;\nDENZO_Y_BEAM=%g;\n"
                     "DIALS_ORIGIN=%g,%g,%g\n"
                     "XDS_ORGX=%g;\nXDS_ORGY=%g;\n"
                     "CLOSE_DISTANCE=%g;\n"
                     "PHI=%g;\nOSC_START=%g;\nOSC_RANGE=%g;\n"
                     "TWOTHETA=%g;\n"
                     "DETECTOR_SN=000;\n"
                     "BEAMLINE=fake;\n"
                     "ADC_OFFSET=%g;\n"
                     "%s%s"
                     "}\f",
                     order, bits == 16 ? "unsigned_short" : "long_integer", m->fpixels, m->spixels, m->pixel_mm,
                     m->distance_mm, m->wavelength_A, beam, m->adxv_x, m->adxv_y,
                     m->mosflm_x, m->mosflm_y, m->denzo_x, m->denzo_y, m->dials_origin[0], m->dials_origin[1],
                     m->dials_origin[2], m->orgx, m->orgy, m->close_distance_mm, m->phi_deg, m->osc_start_deg,
                     m->osc_range_deg, m->twotheta_deg, m->adc_offset, gain,
                     m->beam_mode == NB_SMV_BEAM_DXTBX ? NB_SMV_BEAM_KEY "=dxtbx;\n" : "");
    if (n < 0 || n >= (int)sizeof head - 16) return nb_error_set(NB_ERR_DATA, "SMV header too long for '%s'", path);
    /* "%d" for HEADER_BYTES takes at most 2 more characters than "%%d" */
    int header_bytes = 512;
    while (n + 2 > header_bytes) header_bytes += 512;
    char text[2048];
    int len = snprintf(text, sizeof text, head, header_bytes);
    char *block = calloc(1, (size_t)header_bytes);
    nb_smv_writer *w = calloc(1, sizeof *w);
    if (!block || !w) {
        free(block), free(w);
        return nb_error_set(NB_ERR_NOMEM, "out of memory");
    }
    memset(block, ' ', (size_t)header_bytes);
    memcpy(block, text, (size_t)len);
    w->bits = bits;
    nb_status st = nb_outfile_open(&w->of, path, 0);
    if (st) {
        free(block), free(w);
        return st;
    }
    fwrite(block, 1, (size_t)header_bytes, nb_outfile_fp(w->of));
    free(block);
    *out = w;
    return NB_OK;
}

nb_status nb_smv_writer_put(nb_smv_writer *w, const int32_t *v, size_t k)
{
    size_t need = k * (size_t)(w->bits / 8);
    if (need > w->packed_cap) {
        void *q = realloc(w->packed, need);
        if (!q) return nb_error_set(NB_ERR_NOMEM, "out of memory for the SMV rows");
        w->packed = q, w->packed_cap = need;
    }
    if (w->bits == 16) {
        uint16_t *b16 = w->packed;
#pragma omp simd
        for (size_t j = 0; j < k; j++) {
            int32_t x = v[j] < 0 ? 0 : v[j];
            b16[j] = (uint16_t)(x > 65535 ? 65535 : x);
        }
    } else {
        uint32_t *b32 = w->packed;
#pragma omp simd
        for (size_t j = 0; j < k; j++) b32[j] = (uint32_t)(v[j] < 0 ? 0 : v[j]);
    }
    if (fwrite(w->packed, (size_t)(w->bits / 8), k, nb_outfile_fp(w->of)) != k)
        return nb_error_set(NB_ERR_IO, "cannot write '%s': %s", nb_outfile_path(w->of), strerror(errno ? errno : EIO));
    return NB_OK;
}

int nb_smv_writer_put_u16_errno(nb_smv_writer *w, const uint16_t *v, size_t k)
{
    if (w->bits != 16) return EINVAL;
    errno = 0;
    if (fwrite(v, sizeof *v, k, nb_outfile_fp(w->of)) != k) return errno ? errno : EIO;
    return 0;
}

const char *nb_smv_writer_path(const nb_smv_writer *w) { return nb_outfile_path(w->of); }

nb_status nb_smv_writer_put_u16(nb_smv_writer *w, const uint16_t *v, size_t k)
{
    if (w->bits != 16) return nb_error_set(NB_ERR_USAGE, "16-bit values for a %d-bit SMV", w->bits);
    int e = nb_smv_writer_put_u16_errno(w, v, k);
    if (e) return nb_error_set(NB_ERR_IO, "cannot write '%s': %s", nb_outfile_path(w->of), strerror(e));
    return NB_OK;
}

nb_status nb_smv_writer_close(nb_smv_writer *w)
{
    nb_status st = nb_outfile_commit(w->of);
    free(w->packed);
    free(w);
    return st;
}

void nb_smv_writer_abort(nb_smv_writer *w)
{
    if (!w) return;
    nb_outfile_abort(w->of);
    free(w->packed);
    free(w);
}

/* ---- a frame as an SMV (the registry's write_image) ------------------------ */

/* Its integer samples (the counts with their offset, or the reference's
 * 16-bit int image) under the header the frame gives, its beam centre by
 * img->smv_beam (nb-convert writes its SMV files a band of rows at a time
 * instead, tools/nb_convert_rows.c) */
nb_status nb_smv_write_frame(const nb_frame_image *img)
{
    const nb_frame *fr = img->fr;
    nb_smv_meta m;
    nb_frame_smv_meta(fr, img->smv_beam, img->adc, &m);
    nb_smv_writer *w = NULL;
    nb_status st = nb_smv_writer_open(&w, img->path, &m, img->bits);
    if (!st) st = nb_smv_writer_put(w, img->counts, (size_t)fr->width * (size_t)fr->height);
    if (!st) st = nb_smv_writer_close(w);
    else if (w) nb_smv_writer_abort(w);
    return st;
}
