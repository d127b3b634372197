/* rawfloat.c - the reference's floatimage.bin (raw little-endian float32,
 * no header): written a band of rows at a time, and read back for
 * nb-convert --import. */
#include "rawfloat.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "frame_write.h"
#include "nb_util.h"

nb_status nb_rawfloat_writer_open(nb_outfile **of, const char *path) { return nb_outfile_open(of, path, 0); }

nb_status nb_rawfloat_writer_put(nb_outfile *of, const float *pixels, size_t count)
{
    /* the stream and this file are both little-endian float32 */
    if (fwrite(pixels, sizeof(float), count, nb_outfile_fp(of)) != count)
        return nb_error_set(NB_ERR_IO, "cannot write '%s': %s", nb_outfile_path(of), strerror(errno ? errno : EIO));
    return NB_OK;
}

nb_status nb_rawfloat_read(const char *path, float **pixels, size_t *count)
{
    char *data;
    size_t len;
    nb_status st = nb_read_file(path, &data, &len);
    *pixels = NULL;
    if (st) return st;
    if (len % sizeof(float) != 0 || len == 0 || (*count && len != *count * sizeof(float))) {
        free(data);
        if (*count)
            return nb_error_set(NB_ERR_DATA, "'%s' has %zu bytes; %zu float32 pixels need %zu", path, len, *count,
                                *count * sizeof(float));
        return nb_error_set(NB_ERR_DATA, "'%s' has %zu bytes, not a whole number of float32 pixels", path, len);
    }
    *count = len / sizeof(float);
    *pixels = (float *)data; /* nb_read_file's buffer is malloc'ed and suitably aligned */
    return NB_OK;
}

/* ---- the registry's writers ------------------------------------------------ */

/* n photons, every panel, as the file alone: no header, no plan */
nb_status nb_rawfloat_write_file(const char *path, const float *photons, size_t n)
{
    nb_outfile *of;
    nb_status st = nb_rawfloat_writer_open(&of, path);
    if (st) return st;
    if ((st = nb_rawfloat_writer_put(of, photons, n))) {
        nb_outfile_abort(of);
        return st;
    }
    return nb_outfile_commit(of);
}

/* a frame's photons (nb-convert writes them a band of rows at a time instead) */
nb_status nb_rawfloat_write_frame(const nb_frame_image *img)
{
    return nb_rawfloat_write_file(img->path, img->fr->photons, (size_t)img->fr->width * img->fr->height);
}
