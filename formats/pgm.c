/* pgm.c - the reference's image.pgm: an 8-bit binary PGM preview. */
#include "pgm.h"

#include <stdio.h>

#include "nb_util.h"

nb_status nb_pgm_write(const char *path, const uint8_t *bytes, int width, int height, double scale)
{
    nb_outfile *of;
    nb_status st = nb_outfile_open(&of, path, 0);
    if (st) return st;
    FILE *fp = nb_outfile_fp(of);
    fprintf(fp, "P5\n%d %d\n", width, height);
    fprintf(fp, "# pixels scaled by %g\n", scale);
    fprintf(fp, "255\n");
    fwrite(bytes, 1, (size_t)width * (size_t)height, fp);
    return nb_outfile_commit(of);
}
