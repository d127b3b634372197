/* nxmx_read.c - NXmx (HDF5) images read, frame by frame, for the image
 * registry (nb-fit --observed, nb-convert --import): nb's own files and the
 * layouts dxtbx 3.12 reads with FormatNXmx, FormatHDF5EigerNearlyNexus and
 * FormatNexusJungfrauHack, found by walking the file:
 *   - the frames: /entry/data/data (nb's file, one data set; a master of
 *     shards: a virtual data set), or /entry/data/data_000001,
 *     data_000002, ... (an Eiger's master: each an external link to a data
 *     file of some frames), the frames in order; a data set is frames x
 *     slow x fast, or frames x modules x slow x fast, or one frame;
 *   - the detector: /entry/instrument's first NXdetector by name (as
 *     dxtbx's find_class), else /entry/instrument/detector;
 *   - its modules: its NXdetector_module groups by name, each the part of
 *     a frame at data_origin of data_size (slow to fast, the frame
 *     dimension left out), one after another as nb's panels are; without
 *     modules, or in a Jungfrau's file (/entry/instrument/JF1M, which
 *     dxtbx's FormatNexusJungfrauHack reads whole), the frame is one;
 *   - the detector's pixel_mask (nonzero: not used), of the frame's shape,
 *     cut into the same modules; saturation_value; the data's
 *     data_scaling_factor (nb's 1/gain); an Eiger's master as DECTRIS
 *     writes it (no NXmx definition: FormatHDF5EigerNearlyNexus's) keeps
 *     the mask and the overload in detectorSpecific (pixel_mask,
 *     countrate_correction_count_cutoff), read where the others are not.
 * Integer counts of any width or float photons; the chunks' compression
 * decoded by nxmx_frame.c.  What cannot be read is refused with the file,
 * the data set and the reason.  libhdf5 is loaded at run time as for
 * writing (nxmx_h5.c). */
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
    free(im->fpixels);
    free(im->spixels);
    free(im->modules);
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

/* the most data sets of frames a master names (data_000001 ...), and modules */
#define NX_MAX_PARTS 100000
#define NX_MAX_MODULES 1024

/* Where frame `frame` is: its data set, its index there, the data set's shape */
typedef struct nx_where {
    char name[64];
    long index;    /* in that data set */
    long nframes;  /* in the whole file */
    int rank;      /* 2 (one frame), 3 (frames x slow x fast) or 4 (frames x modules x slow x fast) */
    hsize_t dims[4];
} nx_where;

/* A module: its part of the frame, in the frame's dimensions (dims after the first) */
typedef struct nx_module {
    char name[64];
    hsize_t origin[3], size[3];
} nx_module;

static int link_exists(hid_t file, const char *name)
{
    return nb_h5.H5Lexists(file, name, 0) > 0;
}

/* Each component of `name` exists (H5Lexists fails on a missing parent) */
static int path_exists(hid_t file, const char *name)
{
    char part[256];
    for (const char *s = strchr(name + 1, '/');; s = strchr(s + 1, '/')) {
        const size_t n = s ? (size_t)(s - name) : strlen(name);
        if (n >= sizeof part) return 0;
        memcpy(part, name, n);
        part[n] = '\0';
        if (!link_exists(file, part)) return 0;
        if (!s) return 1;
    }
}

/* A data set's rank and dimensions (rank 2: one frame, as 1 x slow x fast's) */
static nb_status frames_of(const char *path, hid_t file, const char *name, int *rank, hsize_t dims[4])
{
    hid_t d = nb_h5.H5Dopen2(file, name, 0);
    if (d < 0)
        return nb_error_set(NB_ERR_DATA, "'%s': cannot open %s (a broken external link, or a missing file?)", path,
                            name);
    hid_t space = nb_h5.H5Dget_space(d);
    const int r = space < 0 ? -1 : nb_h5.H5Sget_simple_extent_ndims(space);
    if (r >= 2 && r <= 4) nb_h5.H5Sget_simple_extent_dims(space, dims, NULL);
    if (space >= 0) nb_h5.H5Sclose(space);
    nb_h5.H5Dclose(d);
    if (r < 2 || r > 4)
        return nb_error_set(NB_ERR_DATA, "'%s': %s is not frames of pixels (rank %d, expected 3 or 4)", path, name, r);
    *rank = r;
    return NB_OK;
}

/* frames of a data set of that shape */
static long nframes_of(int rank, const hsize_t *dims) { return rank == 2 ? 1 : (long)dims[0]; }

/* The frame's shape, "512 x 1028" (slow to fast, as h5py says it) */
static const char *shape_text(char *buf, size_t n, int rank, const hsize_t *dims)
{
    buf[0] = '\0';
    for (int k = 0; k < rank; k++)
        snprintf(buf + strlen(buf), n - strlen(buf), "%s%llu", k ? " x " : "", (unsigned long long)dims[k]);
    return buf;
}

/* The walk of /entry/data: frame `frame`'s data set and its index there */
static nb_status locate(const char *path, hid_t file, long frame, nx_where *w)
{
    if (!path_exists(file, "/entry/data")) return nb_error_set(NB_ERR_DATA, "'%s': no /entry/data (not an NXmx file?)", path);
    nb_status st;
    if (link_exists(file, "/entry/data/data")) {
        snprintf(w->name, sizeof w->name, "/entry/data/data");
        if ((st = frames_of(path, file, w->name, &w->rank, w->dims))) return st;
        w->index = frame, w->nframes = nframes_of(w->rank, w->dims);
        if (frame < 0 || frame >= w->nframes)
            return nb_error_set(NB_ERR_DATA, "'%s': %s holds %ld frames, not frame %ld", path, w->name, w->nframes,
                                frame + 1);
        return NB_OK;
    }
    /* an Eiger's master: data_000001, data_000002 ... each some frames, in order */
    long total = 0;
    int found = 0;
    for (int k = 1; k <= NX_MAX_PARTS; k++) {
        char name[64], a[64], b[64];
        snprintf(name, sizeof name, "/entry/data/data_%06d", k);
        if (!link_exists(file, name)) break;
        hsize_t d[4];
        int rank;
        if ((st = frames_of(path, file, name, &rank, d))) return st;
        if (k == 1) w->rank = rank, memcpy(w->dims, d, sizeof d);
        if (rank != w->rank || rank == 2 || memcmp(d + 1, w->dims + 1, (size_t)(rank - 1) * sizeof *d))
            return nb_error_set(NB_ERR_DATA, "'%s': %s's frames are %s pixels, data_000001's %s", path, name,
                                shape_text(a, sizeof a, rank - 1, d + 1), shape_text(b, sizeof b, w->rank - 1, w->dims + 1));
        if (!found && frame >= total && frame < total + (long)d[0]) {
            snprintf(w->name, sizeof w->name, "%s", name);
            w->index = frame - total, w->dims[0] = d[0], found = 1;
        }
        total += (long)d[0];
    }
    w->nframes = total;
    if (total == 0) return nb_error_set(NB_ERR_DATA, "'%s': /entry/data holds no data set of frames (data, data_000001)", path);
    if (!found) return nb_error_set(NB_ERR_DATA, "'%s' holds %ld frames, not frame %ld", path, total, frame + 1);
    return NB_OK;
}

/* Whether object `name` in loc has the string attribute NX_class `want`
 * (a fixed-length string as nb and Dectris write it, or a variable-length
 * one as h5py does) */
static int nx_class_is(hid_t loc, const char *name, const char *want)
{
    if (nb_h5.H5Aexists_by_name(loc, name, "NX_class", H5P_DEFAULT) <= 0) return 0;
    hid_t a = nb_h5.H5Aopen_by_name(loc, name, "NX_class", H5P_DEFAULT, H5P_DEFAULT);
    hid_t t = a < 0 ? -1 : nb_h5.H5Aget_type(a);
    int is = 0;
    if (t >= 0 && nb_h5.H5Tget_class(t) == H5T_STRING) {
        if (nb_h5.H5Tis_variable_str(t) > 0) {
            char *s = NULL;
            if (nb_h5.H5Aread(a, t, &s) >= 0 && s) is = !strcmp(s, want);
            if (s) nb_h5.H5free_memory(s);
        } else {
            char buf[64] = "";
            const size_t n = nb_h5.H5Tget_size(t);
            if (n < sizeof buf && nb_h5.H5Aread(a, t, buf) >= 0) is = !strcmp(buf, want);
        }
    }
    if (t >= 0) nb_h5.H5Tclose(t);
    if (a >= 0) nb_h5.H5Aclose(a);
    return is;
}

/* The names in a group whose NX_class is `want`, in name order */
typedef struct nx_members {
    const char *want;
    char (*names)[64];
    int n, cap, overflow;
} nx_members;

static herr_t member(hid_t g, const char *name, const H5L_info_t *info, void *data)
{
    nx_members *m = data;
    (void)info;
    if (strlen(name) >= 64 || !nx_class_is(g, name, m->want)) return 0;
    if (m->n == m->cap) {
        m->overflow = 1;
        return 1;
    }
    snprintf(m->names[m->n++], 64, "%s", name);
    return 0;
}

static void members_of(hid_t file, const char *group, nx_members *m)
{
    hsize_t idx = 0;
    m->n = 0, m->overflow = 0;
    if (path_exists(file, group)) {
        hid_t grp = nb_h5.H5Gopen2(file, group, H5P_DEFAULT);
        if (grp >= 0) {
            nb_h5.H5Literate(grp, H5_INDEX_NAME, H5_ITER_INC, &idx, member, m);
            nb_h5.H5Gclose(grp);
        }
    }
}

/* The detector group: /entry/instrument's first NXdetector, else
 * /entry/instrument/detector; "" when there is none */
static void find_detector(hid_t file, char *det, size_t n)
{
    char names[1][64];
    nx_members m = {"NXdetector", names, 0, 1, 0};
    members_of(file, "/entry/instrument", &m);
    det[0] = '\0';
    if (m.n) snprintf(det, n, "/entry/instrument/%s", names[0]);
    else if (path_exists(file, "/entry/instrument/detector")) snprintf(det, n, "/entry/instrument/detector");
}

/* A module's data_origin, data_size or data_stride: n integers, the
 * frame's dimensions; 0 when absent, -1 when of another length */
static int module_vector(hid_t file, const char *group, const char *name, int n, hsize_t *v)
{
    char full[256];
    snprintf(full, sizeof full, "%s/%s", group, name);
    if (!link_exists(file, full)) return 0;
    hid_t d = nb_h5.H5Dopen2(file, full, H5P_DEFAULT);
    if (d < 0) return -1;
    hid_t space = nb_h5.H5Dget_space(d);
    hsize_t len = 0;
    const int rank = nb_h5.H5Sget_simple_extent_ndims(space);
    if (rank == 1) nb_h5.H5Sget_simple_extent_dims(space, &len, NULL);
    nb_h5.H5Sclose(space);
    long long tmp[3] = {-1, -1, -1};
    const int ok = rank == 1 && len == (hsize_t)n && nb_h5.H5Dread(d, T_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, tmp) >= 0;
    nb_h5.H5Dclose(d);
    for (int k = 0; ok && k < n; k++) {
        if (tmp[k] < 0) return -1;
        v[k] = (hsize_t)tmp[k];
    }
    return ok ? 1 : -1;
}

/* Module `name` of the detector: where it lies in a frame of nf dimensions F */
static nb_status read_module(const char *path, hid_t file, const char *det, const char *name, int nf, const hsize_t *F,
                             nx_module *m)
{
    char group[256], shape[64];
    snprintf(group, sizeof group, "%s/%s", det, name);
    snprintf(m->name, sizeof m->name, "%s", name);
    hsize_t stride[3] = {1, 1, 1};
    const int o = module_vector(file, group, "data_origin", nf, m->origin);
    const int z = module_vector(file, group, "data_size", nf, m->size);
    const int s = module_vector(file, group, "data_stride", nf, stride);
    if (o <= 0 || z <= 0)
        return nb_error_set(NB_ERR_DATA, "'%s': %s: %s data_origin and data_size of %d non-negative integers (the frames "
                                         "are %s)",
                            path, group, o == 0 || z == 0 ? "no" : "not", nf, shape_text(shape, sizeof shape, nf, F));
    if (s < 0 || stride[0] != 1 || stride[1] != 1 || stride[2] != 1)
        return nb_error_set(NB_ERR_UNSUPPORTED, "'%s': %s: a data_stride other than 1 is not read", path, group);
    for (int k = 0; k < nf; k++)
        if (m->size[k] < 1 || m->origin[k] > F[k] || m->size[k] > F[k] - m->origin[k] || (k < nf - 2 && m->size[k] != 1))
            return nb_error_set(NB_ERR_DATA, "'%s': %s: data_origin and data_size leave the frames' %s pixels, or span "
                                             "more than one module",
                                path, group, shape_text(shape, sizeof shape, nf, F));
    return NB_OK;
}

/* The modules of frames of nf dimensions F: the detector's NXdetector_module
 * groups; the whole frame when it has none, or in a Jungfrau's file */
static nb_status modules_of(const char *path, hid_t file, const char *det, int nf, const hsize_t *F, nx_module **out,
                            int *n)
{
    nb_status st = nb_calloc((void **)out, NX_MAX_MODULES, sizeof **out, "the modules");
    if (st) return st;
    nx_members m = {"NXdetector_module", NULL, 0, NX_MAX_MODULES, 0};
    char (*names)[64] = NULL;
    if ((st = nb_calloc((void **)&names, NX_MAX_MODULES, sizeof *names, "the modules"))) return st;
    m.names = names;
    if (det[0] && !path_exists(file, "/entry/instrument/JF1M")) members_of(file, det, &m);
    *n = 0;
    if (m.overflow)
        st = nb_error_set(NB_ERR_UNSUPPORTED, "'%s': %s has more than %d modules", path, det, NX_MAX_MODULES);
    for (int i = 0; !st && i < m.n; i++) st = read_module(path, file, det, names[i], nf, F, &(*out)[i]);
    free(names);
    if (!st && m.n == 0 && nf != 2) {
        char shape[64];
        st = nb_error_set(NB_ERR_DATA, "'%s': the frames are %s pixels, and no NXdetector_module says which part of "
                                       "them is a module",
                          path, shape_text(shape, sizeof shape, nf, F));
    }
    if (!st && m.n == 0) (*out)[0].size[0] = F[0], (*out)[0].size[1] = F[1];
    *n = m.n ? m.n : 1;
    return st;
}

/* A scalar number at group/name; NAN when absent */
static double scalar(hid_t file, const char *group, const char *name)
{
    char full[256];
    snprintf(full, sizeof full, "%s/%s", group, name);
    if (!group[0] || !path_exists(file, full)) return NAN;
    hid_t d = nb_h5.H5Dopen2(file, full, 0);
    double v = NAN;
    if (d >= 0 && nb_h5.H5Dread(d, T_DOUBLE, 0, 0, 0, &v) < 0) v = NAN;
    if (d >= 0) nb_h5.H5Dclose(d);
    return v;
}

/* The count from which a pixel is overloaded: NXmx's saturation_value, else
 * (an Eiger's master as DECTRIS writes it, which dxtbx's
 * FormatHDF5EigerNearlyNexus reads) its count-rate correction's cut-off,
 * the detector's or its first module's; NAN when none is stated */
static double saturation(hid_t file, const char *det)
{
    char specific[192], module[224];
    snprintf(specific, sizeof specific, "%s/detectorSpecific", det);
    snprintf(module, sizeof module, "%s/detectorModule_000", specific);
    double v = scalar(file, det, "saturation_value");
    if (isnan(v) && det[0]) v = scalar(file, specific, "countrate_correction_count_cutoff");
    if (isnan(v) && det[0]) v = scalar(file, module, "countrate_correction_count_cutoff");
    return v;
}

/* The detector's pixel_mask (or an Eiger's detectorSpecific/pixel_mask), which must have the frames' shape (nf
 * dimensions F): into *mask (NULL where there is none) */
static nb_status read_mask(const char *path, hid_t file, const char *det, int nf, const hsize_t *F, uint32_t **mask)
{
    char name[256], want[64], got[64];
    snprintf(name, sizeof name, "%s/pixel_mask", det);
    *mask = NULL;
    /* an Eiger's master as DECTRIS writes it keeps its mask in detectorSpecific */
    if (det[0] && !path_exists(file, name)) snprintf(name, sizeof name, "%s/detectorSpecific/pixel_mask", det);
    if (!det[0] || !path_exists(file, name)) return NB_OK;
    hid_t d = nb_h5.H5Dopen2(file, name, 0);
    if (d < 0) return nb_error_set(NB_ERR_DATA, "'%s': cannot open %s", path, name);
    hid_t space = nb_h5.H5Dget_space(d);
    hsize_t md[4] = {0, 0, 0, 0};
    const int rank = nb_h5.H5Sget_simple_extent_ndims(space);
    if (rank >= 1 && rank <= 4) nb_h5.H5Sget_simple_extent_dims(space, md, NULL);
    nb_h5.H5Sclose(space);
    nb_status st = NB_OK;
    if (rank != nf || memcmp(md, F, (size_t)nf * sizeof *F))
        st = nb_error_set(NB_ERR_DATA, "'%s': %s is %s pixels, not the frames' %s", path, name,
                          rank >= 1 && rank <= 4 ? shape_text(got, sizeof got, rank, md) : "not an array of",
                          shape_text(want, sizeof want, nf, F));
    size_t n = 1;
    for (int k = 0; k < nf; k++) n *= (size_t)F[k];
    if (!st) st = nb_calloc((void **)mask, n, sizeof **mask, "the pixel mask");
    nb_h5err E = {0, ""};
    if (!st && !nb_h5_check(&E, nb_h5.H5Dread(d, T_UINT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, *mask), name))
        st = nb_error_set(NB_ERR_DATA, "'%s': cannot read %s: %s", path, name, E.msg);
    nb_h5.H5Dclose(d);
    if (st) free(*mask), *mask = NULL;
    return st;
}

/* The modules' pixels (and mask) of the frame (nf dimensions F) one after another into out */
static nb_status cut_modules(const nx_module *mods, int n, int nf, const hsize_t *F, const double *frame,
                             const uint32_t *mask, nb_nxmx_image *out)
{
    size_t total = 0;
    for (int i = 0; i < n; i++) total += (size_t)(mods[i].size[nf - 2] * mods[i].size[nf - 1]);
    nb_status st = nb_calloc((void **)&out->values, total + 1, sizeof *out->values, "the frame");
    if (!st && mask) st = nb_calloc((void **)&out->masked, total + 1, 1, "the pixel mask");
    if (!st) st = nb_calloc((void **)&out->fpixels, (size_t)n, sizeof *out->fpixels, "the modules");
    if (!st) st = nb_calloc((void **)&out->spixels, (size_t)n, sizeof *out->spixels, "the modules");
    if (!st) st = nb_calloc((void **)&out->modules, (size_t)n, sizeof *out->modules, "the modules");
    if (st) return st;
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        const nx_module *m = &mods[i];
        const size_t h = (size_t)m->size[nf - 2], w = (size_t)m->size[nf - 1];
        size_t base = 0; /* the module's first pixel in the frame */
        for (int k = 0; k < nf; k++) base = base * (size_t)F[k] + (size_t)m->origin[k];
        for (size_t y = 0; y < h; y++, at += w) {
            const size_t from = base + y * (size_t)F[nf - 1];
            memcpy(out->values + at, frame + from, w * sizeof *frame);
            for (size_t x = 0; mask && x < w; x++) out->masked[at + x] = mask[from + x] != 0;
        }
        out->fpixels[i] = (int)w, out->spixels[i] = (int)h;
        snprintf(out->modules[i], sizeof out->modules[i], "%s", m->name);
    }
    out->npanels = n, out->npixels = total;
    out->width = n == 1 ? out->fpixels[0] : (int)total;
    out->height = n == 1 ? out->spixels[0] : 1;
    return NB_OK;
}

/* The frame w of the file's data set into doubles (frame pixels n) */
static nb_status read_values(const char *path, hid_t file, const nx_where *w, size_t n, double **frame,
                             nb_nxmx_image *out)
{
    hid_t d = nb_h5.H5Dopen2(file, w->name, 0);
    if (d < 0) return nb_error_set(NB_ERR_DATA, "'%s': cannot open %s", path, w->name);
    hid_t type = nb_h5.H5Dget_type(d);
    if (type >= 0) {
        out->is_float = nb_h5.H5Tget_class(type) == H5T_FLOAT;
        out->bits = (int)(8 * nb_h5.H5Tget_size(type));
        nb_h5.H5Tclose(type);
    }
    nb_status st = nb_calloc((void **)frame, n, sizeof **frame, "the frame");
    if (!st) st = nb_h5_read_frame(path, w->name, d, w->rank, w->dims, w->rank == 2 ? 0 : w->index, *frame);
    nb_h5.H5Dclose(d);
    /* a count above a signed 32-bit counter's top (an Eiger's flag of a dead
     * pixel, 2^32 - 1) is that top, as dxtbx gives it: overloaded either way */
    for (size_t i = 0; !st && !out->is_float && i < n; i++)
        if ((*frame)[i] > 2147483647.0) (*frame)[i] = 2147483647.0;
    return st;
}

/* Frame `frame` of the open file into out */
static nb_status read_open(const char *path, hid_t file, long frame, nb_nxmx_image *out)
{
    nx_where w;
    memset(&w, 0, sizeof w);
    nb_status st = locate(path, file, frame, &w);
    if (st) return st;
    const int nf = w.rank == 2 ? 2 : w.rank - 1;
    const hsize_t *F = w.rank == 2 ? w.dims : w.dims + 1;
    size_t n = 1;
    for (int k = 0; k < nf; k++) {
        if (F[k] < 1 || F[k] > 1000000) n = 0;
        if (n) n *= (size_t)F[k];
        if (n > (1u << 30)) n = 0;
    }
    char shape[64], det[128];
    if (!n) return nb_error_set(NB_ERR_DATA, "'%s': %s's frames are %s pixels", path, w.name, shape_text(shape, sizeof shape, nf, F));
    find_detector(file, det, sizeof det);
    nx_module *mods = NULL;
    uint32_t *mask = NULL;
    double *values = NULL;
    int nmod = 0;
    st = modules_of(path, file, det, nf, F, &mods, &nmod);
    if (!st) st = read_values(path, file, &w, n, &values, out);
    if (!st) st = read_mask(path, file, det, nf, F, &mask);
    if (!st) st = cut_modules(mods, nmod, nf, F, values, mask, out);
    free(mods);
    free(mask);
    free(values);
    out->nframes = w.nframes;
    out->saturation = saturation(file, det);
    const double scaling = scalar(file, "/entry/data", "data_scaling_factor");
    out->gain = scaling > 0 && isfinite(scaling) ? 1.0 / scaling : NAN;
    return st;
}

nb_status nb_nxmx_read_frame(const char *path, long frame, nb_nxmx_image *out)
{
    memset(out, 0, sizeof *out);
    nb_status st = nb_nxmx_load();
    if (st) return nb_error_prefix(st, "cannot read '%s'", path);
    hid_t file = nb_h5.H5Fopen(path, ACC_RDONLY, 0);
    if (file < 0) return nb_error_set(NB_ERR_IO, "cannot open '%s' as HDF5", path);
    st = read_open(path, file, frame, out);
    nb_h5.H5Fclose(file);
    if (st) nb_nxmx_image_free(out);
    return st;
}

#endif
