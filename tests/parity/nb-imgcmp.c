/* nb-imgcmp: compare two raw float32 images (either may be gzip-compressed)
 * and check the parity gates.
 *
 *   nb-imgcmp [--width W --roi XMIN XMAX YMIN YMAX] [--corr MIN] [--sum-tol T]
 *             [--norm-tol T] [--max-rel R] [--skip-nonfinite-ref] REFERENCE TEST
 *
 * Prints "corr=... sum_ratio=... norm_ratio=... max_rel=... " and exits 0
 * when every gate
 * given holds, 1 when one fails, 2 on usage or read errors.  The ROI (inclusive
 * pixel indices, as -roi) restricts the comparison; without it the whole image
 * is compared.  A non-finite pixel of TEST fails; one of the REFERENCE is
 * compared too (failing the gates), unless --skip-nonfinite-ref leaves it
 * out and counts it ("ref_nonfinite=N": nonBragg's NaN pixels).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static float *read_floats(const char *path, size_t *n)
{
    gzFile gz = gzopen(path, "rb");
    size_t cap = 1 << 20, len = 0;
    char *buf = malloc(cap);
    int got;
    if (!gz || !buf) {
        fprintf(stderr, "nb-imgcmp: cannot open '%s'\n", path);
        exit(2);
    }
    while ((got = gzread(gz, buf + len, (unsigned)(cap - len))) > 0) {
        len += (size_t)got;
        if (len == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            if (!buf) exit(2);
        }
    }
    gzclose(gz);
    if (got < 0 || len % 4) {
        fprintf(stderr, "nb-imgcmp: '%s' is not a float32 image\n", path);
        exit(2);
    }
    *n = len / 4;
    return (float *)buf;
}

int main(int argc, char **argv)
{
    long width = 0, roi[4] = {-1, -1, -1, -1};
    double corr_min = -2, sum_tol = -1, norm_tol = -1, max_rel = -1;
    int skip_ref_nonfinite = 0;
    size_t ref_nonfinite = 0;
    const char *files[2];
    int nf = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--width") && i + 1 < argc) width = atol(argv[++i]);
        else if (!strcmp(argv[i], "--roi") && i + 4 < argc)
            for (int k = 0; k < 4; k++) roi[k] = atol(argv[++i]);
        else if (!strcmp(argv[i], "--corr") && i + 1 < argc) corr_min = atof(argv[++i]);
        else if (!strcmp(argv[i], "--sum-tol") && i + 1 < argc) sum_tol = atof(argv[++i]);
        else if (!strcmp(argv[i], "--norm-tol") && i + 1 < argc) norm_tol = atof(argv[++i]);
        else if (!strcmp(argv[i], "--max-rel") && i + 1 < argc) max_rel = atof(argv[++i]);
        else if (!strcmp(argv[i], "--skip-nonfinite-ref")) skip_ref_nonfinite = 1;
        else if (nf < 2) files[nf++] = argv[i];
        else {
            fprintf(stderr, "usage: nb-imgcmp [--width W --roi X0 X1 Y0 Y1] [--corr C] [--sum-tol T] [--norm-tol T] [--max-rel R] "
                            "[--skip-nonfinite-ref] REF TEST\n");
            return 2;
        }
    }
    if (nf != 2) {
        fprintf(stderr, "nb-imgcmp: need two images\n");
        return 2;
    }
    size_t na, nb;
    float *a = read_floats(files[0], &na), *b = read_floats(files[1], &nb);
    if (na != nb) {
        printf("size mismatch: %zu vs %zu pixels\n", na, nb);
        return 1;
    }
    double sa = 0, sb = 0, saa = 0, sbb = 0, sab = 0, maxa = 0, maxdiff = 0;
    size_t n = 0, worst = 0;
    for (size_t i = 0; i < na; i++) {
        if (width > 0 && roi[0] >= 0) {
            long f = (long)(i % (size_t)width), s = (long)(i / (size_t)width);
            if (f < roi[0] || f > roi[1] || s < roi[2] || s > roi[3]) continue;
        }
        double x = a[i], y = b[i];
        if (!isfinite(y)) {
            printf("non-finite value at pixel %zu\n", i);
            return 1;
        }
        if (skip_ref_nonfinite && !isfinite(x)) {
            ref_nonfinite++;
            continue;
        }
        sa += x, sb += y, saa += x * x, sbb += y * y, sab += x * y;
        if (fabs(x) > maxa) maxa = fabs(x);
        if (fabs(x - y) > maxdiff) maxdiff = fabs(x - y), worst = i;
        n++;
    }
    double cov = sab - sa * sb / n, va = saa - sa * sa / n, vb = sbb - sb * sb / n;
    double corr = (va > 0 && vb > 0) ? cov / sqrt(va * vb) : (va == vb ? 1.0 : 0.0);
    double ratio = sa != 0 ? sb / sa : (sb == 0 ? 1.0 : INFINITY);
    /* the L2 norms' ratio: a derivative image sums to about 0, its norm does not */
    double norm_ratio = saa > 0 ? sqrt(sbb / saa) : (sbb == 0 ? 1.0 : INFINITY);
    double rel = maxa > 0 ? maxdiff / maxa : maxdiff;
    printf("pixels=%zu corr=%.12f sum_ratio=%.12f norm_ratio=%.9f max_rel=%.3e (worst pixel %zu: %.9g vs %.9g)", n, corr,
           ratio, norm_ratio, rel, worst, a[worst], b[worst]);
    if (skip_ref_nonfinite) printf(" ref_nonfinite=%zu", ref_nonfinite);
    printf("\n");
    int fail = 0;
    if (corr_min > -2 && !(corr >= corr_min)) fail = 1;
    if (sum_tol >= 0 && !(fabs(ratio - 1) <= sum_tol)) fail = 1;
    if (norm_tol >= 0 && !(fabs(norm_ratio - 1) <= norm_tol)) fail = 1;
    if (max_rel >= 0 && !(rel <= max_rel)) fail = 1;
    free(a);
    free(b);
    return fail;
}
