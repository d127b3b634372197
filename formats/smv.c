#include "smv.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_util.h"

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
    if (want_pixels) {
        size_t n = (size_t)out->width * (size_t)out->height;
        nb_status st = nb_calloc((void **)&out->pixels, n, sizeof(uint16_t), "SMV pixels");
        if (st) {
            fclose(fp);
            nb_smv_free(out);
            return st;
        }
        got = fread(out->pixels, sizeof(uint16_t), n, fp);
        if (got < n) {
            fclose(fp);
            nb_smv_free(out);
            return nb_error_set(NB_ERR_DATA, "'%s': truncated SMV image: %zu of %zu pixels", path, got, n);
        }
        const uint16_t one = 1;
        int host_le = *(const unsigned char *)&one == 1;
        if (out->big_endian == host_le)
            for (size_t i = 0; i < n; i++) out->pixels[i] = (uint16_t)((out->pixels[i] >> 8) | (out->pixels[i] << 8));
    }
    fclose(fp);
    return NB_OK;
}
