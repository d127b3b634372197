/* nxmx_read.c - NXmx (HDF5) images read, frame by frame, for the image
 * registry (nb-fit --observed, nb-convert --import): nb's own files and the
 * layouts dxtbx reads as NXmx and as an Eiger's master, found by walking
 * /entry/data:
 *   - /entry/data/data, frames x slow x fast (nb's file, one data set; a
 *     master of shards: a virtual data set);
 *   - /entry/data/data_000001, data_000002, ... (an Eiger's master: each an
 *     external link to a data file of some frames), the frames in order;
 * integer counts of any width or float photons; gzip chunks through
 * libhdf5 itself, bitshuffle+LZ4 (filter 32008) through its plugin; beside
 * them the detector's pixel_mask (nonzero: not used), saturation_value and
 * the data's data_scaling_factor (nb's 1/gain).  What cannot be read is
 * refused with the file, the data set and the reason (a filter this
 * libhdf5 has no plugin for named by its number, else libhdf5's message).
 * libhdf5 is loaded at run time as for writing (nxmx_h5.c). */
#include "nxmx.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_util.h"

void nb_nxmx_image_free(nb_nxmx_image *im)
{
    free(im->values);
    free(im->masked);
    memset(im, 0, sizeof *im);
}

#ifndef NB_HAVE_HDF5

nb_status nb_nxmx_read_frame(const char *path, long frame, nb_nxmx_image *out)
{
    (void)frame;
    memset(out, 0, sizeof *out);
    return nb_error_set(NB_ERR_UNSUPPORTED, "cannot read '%s': this build has no libhdf5 (libhdf5-dev)", path);
}

#else

#include "nxmx_h5.h"

/* the most data sets of frames a master names (data_000001 ...) */
#define NX_MAX_PARTS 100000

/* Where the frames are: the data set holding frame `frame`, and its index there */
typedef struct nx_where {
    char name[64];
    long index;    /* in that data set */
    long nframes;  /* in the whole file */
} nx_where;

static int link_exists(hid_t file, const char *name)
{
    return nb_h5.H5Lexists(file, name, 0) > 0;
}

/* A data set's frames, rows and columns (rank 3; rank 2: one frame); 0 when it has none */
static nb_status frames_of(const char *path, hid_t file, const char *name, long *n, hsize_t dims[3])
{
    hid_t d = nb_h5.H5Dopen2(file, name, 0);
    if (d < 0)
        return nb_error_set(NB_ERR_DATA, "'%s': cannot open %s (a broken external link, or a missing file?)", path,
                            name);
    hid_t space = nb_h5.H5Dget_space(d);
    int rank = space < 0 ? -1 : nb_h5.H5Sget_simple_extent_ndims(space);
    hsize_t got[3] = {0, 0, 0};
    if (rank == 2 || rank == 3) nb_h5.H5Sget_simple_extent_dims(space, got, NULL);
    if (space >= 0) nb_h5.H5Sclose(space);
    nb_h5.H5Dclose(d);
    if (rank == 2) got[2] = got[1], got[1] = got[0], got[0] = 1;
    else if (rank != 3)
        return nb_error_set(NB_ERR_DATA, "'%s': %s is not frames of pixels (rank %d, expected 3)", path, name, rank);
    *n = (long)got[0];
    memcpy(dims, got, sizeof got);
    return NB_OK;
}

/* The walk of /entry/data: frame `frame`'s data set and its index there */
static nb_status locate(const char *path, hid_t file, long frame, nx_where *w, hsize_t dims[3])
{
    if (!link_exists(file, "/entry") || !link_exists(file, "/entry/data"))
        return nb_error_set(NB_ERR_DATA, "'%s': no /entry/data (not an NXmx file?)", path);
    long n = 0;
    nb_status st;
    if (link_exists(file, "/entry/data/data")) {
        snprintf(w->name, sizeof w->name, "/entry/data/data");
        if ((st = frames_of(path, file, w->name, &n, dims))) return st;
        w->index = frame, w->nframes = n;
        if (frame < 0 || frame >= n)
            return nb_error_set(NB_ERR_DATA, "'%s': %s holds %ld frames, not frame %ld", path, w->name, n, frame + 1);
        return NB_OK;
    }
    /* an Eiger's master: data_000001, data_000002 ... each some frames, in order */
    long total = 0;
    int found = 0;
    w->nframes = 0;
    for (int k = 1; k <= NX_MAX_PARTS; k++) {
        char name[64];
        snprintf(name, sizeof name, "/entry/data/data_%06d", k);
        if (!link_exists(file, name)) break;
        hsize_t d[3];
        if ((st = frames_of(path, file, name, &n, d))) return st;
        if (total == 0) memcpy(dims, d, sizeof d);
        else if (d[1] != dims[1] || d[2] != dims[2])
            return nb_error_set(NB_ERR_DATA, "'%s': %s's frames are %llu x %llu pixels, data_000001's %llu x %llu", path,
                                name, (unsigned long long)d[2], (unsigned long long)d[1], (unsigned long long)dims[2],
                                (unsigned long long)dims[1]);
        if (!found && frame >= total && frame < total + n) {
            snprintf(w->name, sizeof w->name, "%s", name);
            w->index = frame - total, found = 1;
        }
        total += n;
    }
    w->nframes = total;
    if (total == 0) return nb_error_set(NB_ERR_DATA, "'%s': /entry/data holds no data set of frames (data, data_000001)", path);
    if (!found) return nb_error_set(NB_ERR_DATA, "'%s' holds %ld frames, not frame %ld", path, total, frame + 1);
    return NB_OK;
}

/* Each filter of data set d (its chunks' compression) that this libhdf5
 * can run: else an error naming the filter, where H5Dread would say only
 * that a filter is missing */
static nb_status filters_available(const char *path, hid_t d, const char *name)
{
    hid_t dcpl = nb_h5.H5Dget_create_plist(d);
    if (dcpl < 0) return NB_OK; /* H5Dread says what is wrong */
    const int n = nb_h5.H5Pget_nfilters(dcpl);
    nb_status st = NB_OK;
    for (int i = 0; i < n && !st; i++) {
        unsigned flags = 0, config = 0;
        size_t nvalues = 0;
        char fname[64] = "";
        const H5Z_filter_t id = nb_h5.H5Pget_filter2(dcpl, (unsigned)i, &flags, &nvalues, NULL, sizeof fname, fname,
                                                     &config);
        if (id >= 0 && nb_h5.H5Zfilter_avail(id) <= 0)
            st = nb_error_set(NB_ERR_UNSUPPORTED, "'%s': %s's chunks are compressed with HDF5 filter %d%s%s%s, which this "
                                                  "libhdf5 cannot decode (no plugin for it in HDF5's plugin directories%s)",
                              path, name, (int)id, fname[0] ? " (" : "", fname, fname[0] ? ")" : "",
                              id == BSHUF_FILTER ? "; Debian: apt-get install hdf5-filter-plugin" : "");
    }
    nb_h5.H5Pclose(dcpl);
    return st;
}

/* One frame of data set `name` into out->values (doubles), its type into is_float and bits */
static nb_status read_pixels(const char *path, hid_t file, const nx_where *w, const hsize_t dims[3], nb_nxmx_image *out)
{
    nb_h5err E = {0, ""};
    hid_t d = nb_h5.H5Dopen2(file, w->name, 0);
    hid_t type = d < 0 ? -1 : nb_h5.H5Dget_type(d);
    const int cls = type < 0 ? -1 : (int)nb_h5.H5Tget_class(type);
    const size_t size = type < 0 ? 0 : nb_h5.H5Tget_size(type);
    if (type >= 0) nb_h5.H5Tclose(type);
    if (cls != H5T_INTEGER && cls != H5T_FLOAT) {
        if (d >= 0) nb_h5.H5Dclose(d);
        return nb_error_set(NB_ERR_DATA, "'%s': %s holds neither integers nor floats", path, w->name);
    }
    nb_status unread = filters_available(path, d, w->name);
    if (unread) {
        nb_h5.H5Dclose(d);
        return unread;
    }
    out->is_float = cls == H5T_FLOAT;
    out->bits = (int)(8 * size);
    hid_t space = nb_h5.H5Dget_space(d);
    const hsize_t start[3] = {(hsize_t)w->index, 0, 0}, count[3] = {1, dims[1], dims[2]};
    const hsize_t mdims[2] = {dims[1], dims[2]};
    hid_t mem = nb_h5.H5Screate_simple(2, mdims, NULL);
    /* a rank-2 data set is its one frame */
    const int rank = nb_h5.H5Sget_simple_extent_ndims(space);
    if (rank == 3) nb_h5_check(&E, nb_h5.H5Sselect_hyperslab(space, H5S_SELECT_SET, start, NULL, count, NULL), "select");
    nb_status st = nb_calloc((void **)&out->values, (size_t)(dims[1] * dims[2]) + 1, sizeof *out->values, "the frame");
    if (!st) nb_h5_check(&E, nb_h5.H5Dread(d, T_DOUBLE, mem, space, 0, out->values), w->name);
    nb_h5.H5Sclose(mem);
    nb_h5.H5Sclose(space);
    nb_h5.H5Dclose(d);
    if (!st && E.failed) st = nb_error_set(NB_ERR_DATA, "'%s': cannot read frame %ld of %s: %s", path, w->index + 1, w->name, E.msg);
    return st;
}

/* A scalar number at `name`; NAN when absent */
static double scalar(hid_t file, const char *group, const char *name)
{
    char full[160];
    snprintf(full, sizeof full, "%s/%s", group, name);
    if (!link_exists(file, group) || !link_exists(file, full)) return NAN;
    hid_t d = nb_h5.H5Dopen2(file, full, 0);
    double v = NAN;
    if (d >= 0 && nb_h5.H5Dread(d, T_DOUBLE, 0, 0, 0, &v) < 0) v = NAN;
    if (d >= 0) nb_h5.H5Dclose(d);
    return v;
}

/* The detector's pixel_mask (nonzero: not used), which must have the frames' shape */
static nb_status read_mask(const char *path, hid_t file, const hsize_t dims[3], nb_nxmx_image *out)
{
    static const char *const name = "/entry/instrument/detector/pixel_mask";
    if (!link_exists(file, "/entry/instrument") || !link_exists(file, "/entry/instrument/detector") ||
        !link_exists(file, name))
        return NB_OK;
    nb_h5err E = {0, ""};
    hid_t d = nb_h5.H5Dopen2(file, name, 0);
    if (d < 0) return nb_error_set(NB_ERR_DATA, "'%s': cannot open %s", path, name);
    hid_t space = nb_h5.H5Dget_space(d);
    hsize_t md[3] = {0, 0, 0};
    const int rank = nb_h5.H5Sget_simple_extent_ndims(space);
    if (rank == 2) nb_h5.H5Sget_simple_extent_dims(space, md, NULL);
    nb_h5.H5Sclose(space);
    nb_status st = NB_OK;
    if (rank != 2 || md[0] != dims[1] || md[1] != dims[2])
        st = nb_error_set(NB_ERR_DATA, "'%s': %s is not the frames' %llu x %llu pixels", path, name,
                          (unsigned long long)dims[2], (unsigned long long)dims[1]);
    uint32_t *m = NULL;
    const size_t n = (size_t)(dims[1] * dims[2]);
    if (!st) st = nb_calloc((void **)&m, n + 1, sizeof *m, "the pixel mask");
    if (!st) st = nb_calloc((void **)&out->masked, n + 1, 1, "the pixel mask");
    if (!st && nb_h5_check(&E, nb_h5.H5Dread(d, T_UINT32, 0, 0, 0, m), name))
        for (size_t i = 0; i < n; i++) out->masked[i] = m[i] != 0;
    if (!st && E.failed) st = nb_error_set(NB_ERR_DATA, "'%s': cannot read %s: %s", path, name, E.msg);
    free(m);
    nb_h5.H5Dclose(d);
    return st;
}

nb_status nb_nxmx_read_frame(const char *path, long frame, nb_nxmx_image *out)
{
    memset(out, 0, sizeof *out);
    nb_status st = nb_nxmx_load();
    if (st) return nb_error_prefix(st, "cannot read '%s'", path);
    hid_t file = nb_h5.H5Fopen(path, ACC_RDONLY, 0);
    if (file < 0) return nb_error_set(NB_ERR_IO, "cannot open '%s' as HDF5", path);
    nx_where w;
    hsize_t dims[3] = {0, 0, 0};
    st = locate(path, file, frame, &w, dims);
    if (!st && (dims[1] < 1 || dims[2] < 1 || dims[1] > 1000000 || dims[2] > 1000000 || dims[1] * dims[2] > (1u << 30)))
        st = nb_error_set(NB_ERR_DATA, "'%s': %s's frames are %llu x %llu pixels", path, w.name,
                          (unsigned long long)dims[2], (unsigned long long)dims[1]);
    if (!st) {
        out->width = (int)dims[2], out->height = (int)dims[1], out->nframes = w.nframes;
        st = read_pixels(path, file, &w, dims, out);
    }
    if (!st) st = read_mask(path, file, dims, out);
    if (!st) {
        out->saturation = scalar(file, "/entry/instrument/detector", "saturation_value");
        const double scaling = scalar(file, "/entry/data", "data_scaling_factor");
        out->gain = scaling > 0 && isfinite(scaling) ? 1.0 / scaling : NAN;
    }
    nb_h5.H5Fclose(file);
    if (st) nb_nxmx_image_free(out);
    return st;
}

#endif
