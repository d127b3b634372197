/* pgm.c - the reference's image.pgm: an 8-bit binary PGM preview. */
#include "pgm.h"

#include <stdio.h>
#include <stdlib.h>

#include "frame_write.h"
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

/* ---- a frame as a PGM (the registry's write_image) ------------------------- */

/* nanoBragg's 8-bit image of the photons, its scale the frame's (-pgmscale) */
nb_status nb_pgm_write_frame(const nb_frame_image *img)
{
    const nb_frame *fr = img->fr;
    const nb_plan *p = fr->plan;
    const nb_roi roi = {p->panels[0].roi_xmin, p->panels[0].roi_xmax, p->panels[0].roi_ymin, p->panels[0].roi_ymax};
    uint8_t *bytes;
    nb_status st = nb_calloc((void **)&bytes, (size_t)fr->width * fr->height, 1, "the PGM image");
    if (st) return st;
    nb_pgm_bytes(fr->photons, fr->width, fr->height, roi, fr->pgm_scale, bytes);
    nb_info("pgm_scale = %g", fr->pgm_scale);
    st = nb_pgm_write(img->path, bytes, fr->width, fr->height, fr->pgm_scale);
    free(bytes);
    return st;
}
