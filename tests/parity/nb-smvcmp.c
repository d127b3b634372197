/* nb-smvcmp: compare an SMV or PGM image with the reference's (either may be
 * gzip-compressed).
 *
 *   nb-smvcmp [--pgm] [--min-identical F] REFERENCE TEST
 *
 * SMV: every KEY=VALUE of the reference header must be in the test header
 * with the same printed value (HEADER_BYTES may be larger when extra keys
 * did not fit in 512 bytes); then the 16-bit pixels are compared.
 * PGM: the text header lines must be equal, then the bytes are compared.
 * Prints a summary; exits 0 when the headers agree and at least F (default
 * 0.999) of the pixels are identical, 1 otherwise, 2 on read errors.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static unsigned char *slurp(const char *path, size_t *n)
{
    gzFile gz = gzopen(path, "rb");
    size_t cap = 1 << 20, len = 0;
    unsigned char *buf = malloc(cap);
    int got;
    if (!gz || !buf) {
        fprintf(stderr, "nb-smvcmp: cannot open '%s'\n", path);
        exit(2);
    }
    while ((got = gzread(gz, buf + len, (unsigned)(cap - len))) > 0) {
        len += (size_t)got;
        if (len == cap) {
            cap *= 2;
            if (!(buf = realloc(buf, cap))) exit(2);
        }
    }
    gzclose(gz);
    *n = len;
    return buf;
}

/* value of KEY in an SMV header (text up to '}'), or NULL */
static int header_value(const char *hdr, const char *key, char *out, size_t size)
{
    size_t klen = strlen(key);
    for (const char *p = hdr; *p; p++) {
        if ((p == hdr || p[-1] == '\n') && !strncmp(p, key, klen) && p[klen] == '=') {
            const char *v = p + klen + 1, *e = v;
            while (*e && *e != ';' && *e != '\n') e++;
            size_t n = (size_t)(e - v) < size - 1 ? (size_t)(e - v) : size - 1;
            memcpy(out, v, n);
            out[n] = '\0';
            return 1;
        }
    }
    return 0;
}

static long header_bytes(const unsigned char *img)
{
    char v[64];
    return header_value((const char *)img, "HEADER_BYTES", v, sizeof v) ? atol(v) : -1;
}

int main(int argc, char **argv)
{
    int pgm = 0;
    double min_identical = 0.999;
    const char *files[2];
    int nf = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--pgm")) pgm = 1;
        else if (!strcmp(argv[i], "--min-identical") && i + 1 < argc) min_identical = atof(argv[++i]);
        else if (nf < 2) files[nf++] = argv[i];
        else nf = 3;
    }
    if (nf != 2) {
        fprintf(stderr, "usage: nb-smvcmp [--pgm] [--min-identical F] REFERENCE TEST\n");
        return 2;
    }
    size_t na, nb;
    unsigned char *a = slurp(files[0], &na), *b = slurp(files[1], &nb);
    int bad_header = 0;
    size_t off_a, off_b, npix, bytes_per;
    char msg[2048] = "";
    if (pgm) {
        /* three header lines plus the comment line */
        size_t ha = 0, hb = 0;
        for (int lines = 0; ha < na && lines < 4; ha++)
            if (a[ha] == '\n') lines++;
        for (int lines = 0; hb < nb && lines < 4; hb++)
            if (b[hb] == '\n') lines++;
        if (ha != hb || memcmp(a, b, ha) != 0) {
            bad_header = 1;
            snprintf(msg, sizeof msg, "PGM headers differ: '%.*s' vs '%.*s'", (int)ha, a, (int)hb, b);
        }
        off_a = ha, off_b = hb, bytes_per = 1;
    } else {
        long ha = header_bytes(a), hb = header_bytes(b);
        if (ha <= 0 || hb <= 0 || (size_t)ha > na || (size_t)hb > nb) {
            printf("not an SMV image\n");
            return 1;
        }
        char *ta = calloc(1, (size_t)ha + 1), *tb = calloc(1, (size_t)hb + 1);
        memcpy(ta, a, (size_t)ha);
        memcpy(tb, b, (size_t)hb);
        char *end = strchr(ta, '}');
        if (end) *end = '\0';
        /* every reference key, in order */
        for (char *line = ta; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
            char key[128], va[256], vb[256];
            const char *eq = strchr(line, '=');
            const char *nl = strchr(line, '\n');
            if (!eq || (nl && eq > nl)) continue;
            size_t kl = (size_t)(eq - line);
            if (kl == 0 || kl >= sizeof key) continue;
            memcpy(key, line, kl);
            key[kl] = '\0';
            header_value(ta, key, va, sizeof va);
            if (!header_value(tb, key, vb, sizeof vb)) {
                bad_header = 1;
                snprintf(msg + strlen(msg), sizeof msg - strlen(msg), "missing %s; ", key);
            } else if (strcmp(va, vb) != 0 && !(strcmp(key, "HEADER_BYTES") == 0 && hb > ha && hb % 512 == 0)) {
                bad_header = 1;
                snprintf(msg + strlen(msg), sizeof msg - strlen(msg), "%s=%s vs %s; ", key, va, vb);
            }
        }
        free(ta);
        free(tb);
        off_a = (size_t)ha, off_b = (size_t)hb, bytes_per = 2;
    }
    if (na - off_a != nb - off_b) {
        printf("pixel data sizes differ: %zu vs %zu bytes\n", na - off_a, nb - off_b);
        return 1;
    }
    npix = (na - off_a) / bytes_per;
    size_t same = 0, maxdiff = 0;
    for (size_t i = 0; i < npix; i++) {
        long va = bytes_per == 2 ? (long)(a[off_a + 2 * i] | a[off_a + 2 * i + 1] << 8) : a[off_a + i];
        long vb = bytes_per == 2 ? (long)(b[off_b + 2 * i] | b[off_b + 2 * i + 1] << 8) : b[off_b + i];
        if (va == vb) same++;
        size_t d = (size_t)labs(va - vb);
        if (d > maxdiff) maxdiff = d;
    }
    double frac = npix ? (double)same / (double)npix : 1.0;
    printf("header %s; %zu of %zu pixels identical (%.6f), max |diff| %zu%s%s\n", bad_header ? "DIFFERS" : "agrees",
           same, npix, frac, maxdiff, msg[0] ? ": " : "", msg);
    free(a);
    free(b);
    return bad_header || frac < min_identical;
}
