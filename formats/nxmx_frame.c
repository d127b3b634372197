/* nxmx_frame.c - one frame of an NXmx data set read into doubles, for
 * nxmx_read.c's walk: by its chunks, read as stored (H5Dread_chunk) and
 * decoded here (h5_chunks.h), when every filter of the data set is one this
 * file decodes (deflate, shuffle, bitshuffle+LZ4) and its values are
 * little-endian integers or floats; else by H5Dread through libhdf5's own
 * pipeline and filter plugins.
 *
 * Why decode here: HDF5's bitshuffle plugin is a separate package (Debian's
 * hdf5-filter-plugin, or hdf5plugin's in Python) that many systems lack,
 * and an Eiger's files are unreadable without it; liblz4 and zlib are
 * everywhere.  Our decoders also check every length of a corrupt chunk and
 * say which block is wrong, where the pipeline says only that a filter
 * failed.  libhdf5's path stays for what this file does not decode (another
 * filter with its plugin installed, big-endian values, a virtual or
 * contiguous data set, chunks never written), so nothing readable before is
 * refused now.  One thread: an Eiger's frame is one chunk, and libhdf5
 * (serial) reads chunks one at a time. */
#include "nxmx.h"

#ifdef NB_HAVE_HDF5

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h5_chunks.h"
#include "nb_util.h"
#include "nxmx_h5.h"

/* How the data set's values are stored, and its chunks */
typedef struct frame_layout {
    int cls;          /* H5T_INTEGER or H5T_FLOAT */
    size_t size;      /* bytes a value */
    int is_signed;
    int rank, lead;   /* lead: 1 when the first dimension counts frames */
    hsize_t dims[4], chunk[4];
    nb_h5c_pipeline pipe;
    double fill;      /* the value of a chunk never written */
    int chunked, nfilters;
} frame_layout;

/* Each filter of data set d that this libhdf5 can run: else an error naming
 * the filter, where H5Dread would say only that a filter is missing.  *ours:
 * every filter is one h5_chunks.c decodes (then libhdf5 need not) */
static nb_status filters_of(const char *path, hid_t dcpl, const char *name, size_t size, nb_h5c_pipeline *pipe,
                            int *ours)
{
    const int n = nb_h5.H5Pget_nfilters(dcpl);
    *ours = n >= 0 && n <= NB_H5C_MAX_FILTERS;
    pipe->n = *ours ? n : 0;
    for (int i = 0; i < n; i++) {
        unsigned flags = 0, config = 0, cd[8] = {0};
        size_t ncd = 8;
        char fname[64] = "";
        const H5Z_filter_t id = nb_h5.H5Pget_filter2(dcpl, (unsigned)i, &flags, &ncd, cd, sizeof fname, fname, &config);
        /* bitshuffle's element size (cd[2]) must be the values' */
        const int known = nb_h5c_filter_known((int)id, cd, ncd < 8 ? ncd : 8) && (id != BSHUF_FILTER || cd[2] == size);
        if (*ours && known) pipe->id[i] = (int)id;
        else *ours = 0;
        if (!known && id >= 0 && nb_h5.H5Zfilter_avail(id) <= 0)
            return nb_error_set(NB_ERR_UNSUPPORTED, "'%s': %s's chunks are compressed with HDF5 filter %d%s%s%s, which "
                                                    "this libhdf5 cannot decode (no plugin for it in HDF5's plugin "
                                                    "directories%s)",
                                path, name, (int)id, fname[0] ? " (" : "", fname, fname[0] ? ")" : "",
                                id == BSHUF_FILTER ? "; Debian: apt-get install hdf5-filter-plugin" : "");
    }
    return NB_OK;
}

/* The values' type and, when the chunks are ours to decode, the chunks:
 * *ours 0 leaves the frame to H5Dread */
static nb_status layout_of(const char *path, const char *name, hid_t d, int rank, const hsize_t *dims,
                           frame_layout *L, int *ours)
{
    memset(L, 0, sizeof *L);
    *ours = 0;
    hid_t type = nb_h5.H5Dget_type(d);
    if (type < 0) return nb_error_set(NB_ERR_DATA, "'%s': %s has no type libhdf5 can read", path, name);
    L->cls = (int)nb_h5.H5Tget_class(type);
    L->size = nb_h5.H5Tget_size(type);
    L->is_signed = L->cls == H5T_INTEGER && nb_h5.H5Tget_sign(type) == H5T_SGN_2;
    const int little = nb_h5.H5Tget_order(type) == H5T_ORDER_LE;
    nb_h5.H5Tclose(type);
    if (L->cls != H5T_INTEGER && L->cls != H5T_FLOAT)
        return nb_error_set(NB_ERR_DATA, "'%s': %s holds neither integers nor floats", path, name);
    L->rank = rank, L->lead = rank > 2;
    memcpy(L->dims, dims, (size_t)rank * sizeof *dims);
    hid_t dcpl = nb_h5.H5Dget_create_plist(d);
    if (dcpl < 0) return NB_OK; /* H5Dread says what is wrong */
    nb_status st = filters_of(path, dcpl, name, L->size, &L->pipe, ours);
    const int sizes_ok = L->size == 1 || L->size == 2 || L->size == 4 || L->size == 8;
    L->chunked = nb_h5.H5Pget_layout(dcpl) == H5D_CHUNKED && nb_h5.H5Pget_chunk(dcpl, rank, L->chunk) == rank;
    L->nfilters = nb_h5.H5Pget_nfilters(dcpl);
    if (!st && *ours)
        *ours = nb_h5.H5Dread_chunk && little && sizes_ok && (L->cls == H5T_INTEGER || L->size >= 4) && L->chunked;
    if (*ours && nb_h5.H5Pget_fill_value(dcpl, T_DOUBLE, &L->fill) < 0) L->fill = 0.0;
    nb_h5.H5Pclose(dcpl);
    return st;
}

/* n values of the layout's type at src into dst */
static void to_doubles(const frame_layout *L, const uint8_t *src, size_t n, double *dst)
{
#define CONVERT(T)                                                                                                     \
    for (size_t i = 0; i < n; i++) {                                                                                   \
        T v;                                                                                                           \
        memcpy(&v, src + i * sizeof v, sizeof v);                                                                      \
        dst[i] = (double)v;                                                                                            \
    }
    if (L->cls == H5T_FLOAT && L->size == 4) { CONVERT(float) }
    else if (L->cls == H5T_FLOAT) { CONVERT(double) }
    else if (L->size == 1 && L->is_signed) { CONVERT(int8_t) }
    else if (L->size == 1) { CONVERT(uint8_t) }
    else if (L->size == 2 && L->is_signed) { CONVERT(int16_t) }
    else if (L->size == 2) { CONVERT(uint16_t) }
    else if (L->size == 4 && L->is_signed) { CONVERT(int32_t) }
    else if (L->size == 4) { CONVERT(uint32_t) }
    else if (L->is_signed) { CONVERT(int64_t) }
    else { CONVERT(uint64_t) }
#undef CONVERT
}

/* The next index of an odometer over n dimensions below lim (the last the
 * fastest); 0 after the last */
static int next_index(hsize_t *y, const hsize_t *lim, int n)
{
    for (int k = n - 1; k >= 0; k--) {
        if (++y[k] < lim[k]) return 1;
        y[k] = 0;
    }
    return 0;
}

/* The frame's chunk grid: its size in chunks along each frame dimension;
 * and the offset (in the data set) of the chunk at grid position g */
static void chunk_grid(const frame_layout *L, hsize_t *grid)
{
    for (int k = 0; k < L->rank - L->lead; k++)
        grid[k] = (L->dims[L->lead + k] + L->chunk[L->lead + k] - 1) / L->chunk[L->lead + k];
}

static void chunk_offset(const frame_layout *L, long index, const hsize_t *g, hsize_t *off)
{
    if (L->lead) off[0] = (hsize_t)index - (hsize_t)index % L->chunk[0];
    for (int k = 0; k < L->rank - L->lead; k++) off[L->lead + k] = g[k] * L->chunk[L->lead + k];
}

/* The decoded chunk at frame position `at` (the frame's dimensions): its
 * part inside the frame into out */
static void chunk_into_frame(const frame_layout *L, const uint8_t *chunk, long index, const hsize_t *at, double *out)
{
    const int nf = L->rank - L->lead;
    const hsize_t *F = L->dims + L->lead, *C = L->chunk + L->lead;
    hsize_t count[4], y[4] = {0, 0, 0, 0};
    for (int k = 0; k < nf; k++) count[k] = C[k] < F[k] - at[k] ? C[k] : F[k] - at[k];
    const hsize_t run = count[nf - 1];
    count[nf - 1] = 1; /* rows: the last dimension a run */
    do {
        size_t src = L->lead ? (size_t)index % L->chunk[0] : 0, dst = 0;
        for (int k = 0; k < nf; k++) {
            src = src * C[k] + y[k];
            dst = dst * F[k] + at[k] + y[k];
        }
        to_doubles(L, chunk + src * L->size, run, out + dst);
    } while (next_index(y, count, nf));
}

/* The frame by its chunks, a chunk never written its fill value.  Every
 * chunked data set of filters known here is read so, none through
 * libhdf5's pipeline: libhdf5 trusts a stored chunk's length where no
 * filter was applied to it (a chunk stored whole, H5Dwrite_chunk's filter
 * mask), and copies past the end of a short one (1.10.8; found by
 * tests/fuzz/fuzz_nxmx_layout.c). */
static nb_status read_chunks(const char *path, const char *name, hid_t d, const frame_layout *L, long index,
                             double *out)
{
    const int nf = L->rank - L->lead;
    size_t chunk_bytes = L->size;
    for (int k = 0; k < L->rank; k++) chunk_bytes *= L->chunk[k];
    hsize_t grid[4], g[4] = {0, 0, 0, 0}, off[4];
    chunk_grid(L, grid);
    uint8_t *raw = NULL, *chunk = NULL;
    size_t raw_cap = 0;
    nb_h5c_scratch scratch = {{NULL, NULL}, 0};
    nb_status st = nb_calloc((void **)&chunk, chunk_bytes, 1, "a chunk");
    size_t n = 1;
    for (int k = 0; k < nf; k++) n *= L->dims[L->lead + k];
    for (size_t i = 0; i < n; i++) out[i] = L->fill;
    while (!st) {
        chunk_offset(L, index, g, off);
        hsize_t stored = 0;
        uint32_t mask = 0;
        if (nb_h5.H5Dget_chunk_storage_size(d, off, &stored) < 0) stored = 0;
        if (stored && stored > raw_cap) {
            free(raw), raw = NULL, raw_cap = 0;
            if ((st = nb_calloc((void **)&raw, (size_t)stored, 1, "a stored chunk"))) break;
            raw_cap = (size_t)stored;
        }
        if (!stored) { /* never written: the fill value */
        } else if (nb_h5.H5Dread_chunk(d, H5P_DEFAULT, off, &mask, raw) < 0) {
            st = nb_error_set(NB_ERR_DATA, "'%s': cannot read the chunk of %s at frame %ld", path, name, index + 1);
            break;
        } else if ((st = nb_h5c_decode(&L->pipe, mask, raw, (size_t)stored, L->size, chunk, chunk_bytes, &scratch))) {
            char where[96] = "";
            for (int k = 0; k < L->rank; k++)
                snprintf(where + strlen(where), sizeof where - strlen(where), "%s%llu", k ? ", " : "",
                         (unsigned long long)off[k]);
            st = nb_error_prefix(st, "'%s': %s's chunk at (%s) is corrupt", path, name, where);
            break;
        } else {
            chunk_into_frame(L, chunk, index, off + L->lead, out);
        }
        if (!next_index(g, grid, nf)) break;
    }
    nb_h5c_scratch_free(&scratch);
    free(raw);
    free(chunk);
    return st;
}

/* Before libhdf5's pipeline reads a chunked frame: no chunk of it stored
 * unfiltered (its filter mask, or no filters) of another length than a
 * chunk's, which libhdf5 would copy past the end of (see read_chunks) */
static nb_status check_unfiltered(const char *path, const char *name, hid_t d, const frame_layout *L, long index)
{
    if (!L->chunked || !nb_h5.H5Dget_chunk_info_by_coord) return NB_OK;
    hsize_t grid[4], g[4] = {0, 0, 0, 0}, off[4];
    size_t chunk_bytes = L->size;
    for (int k = 0; k < L->rank; k++) chunk_bytes *= L->chunk[k];
    chunk_grid(L, grid);
    do {
        chunk_offset(L, index, g, off);
        unsigned mask = 0;
        haddr_t addr;
        hsize_t size = 0;
        const unsigned all = L->nfilters >= 32 ? ~0u : (1u << L->nfilters) - 1;
        if (nb_h5.H5Dget_chunk_info_by_coord(d, off, &mask, &addr, &size) >= 0 && size &&
            (mask & all) == all && size != chunk_bytes)
            return nb_error_set(NB_ERR_DATA, "'%s': %s's chunk at frame %ld is corrupt: stored unfiltered, %llu "
                                             "bytes, not a chunk's %zu",
                                path, name, index + 1, (unsigned long long)size, chunk_bytes);
    } while (next_index(g, grid, L->rank - L->lead));
    return NB_OK;
}

/* The frame through libhdf5's pipeline */
static nb_status read_whole(const char *path, const char *name, hid_t d, const frame_layout *L, long index,
                            double *out)
{
    nb_status st = check_unfiltered(path, name, d, L, index);
    if (st) return st;
    nb_h5err E = {0, ""};
    hid_t space = nb_h5.H5Dget_space(d);
    hsize_t start[4] = {0, 0, 0, 0}, count[4], n = 1;
    for (int k = 0; k < L->rank; k++) count[k] = L->dims[k];
    for (int k = L->lead; k < L->rank; k++) n *= L->dims[k];
    if (L->lead) start[0] = (hsize_t)index, count[0] = 1;
    hid_t mem = nb_h5.H5Screate_simple(1, &n, NULL);
    nb_h5_check(&E, nb_h5.H5Sselect_hyperslab(space, H5S_SELECT_SET, start, NULL, count, NULL), "select");
    nb_h5_check(&E, nb_h5.H5Dread(d, T_DOUBLE, mem, space, H5P_DEFAULT, out), name);
    nb_h5.H5Sclose(mem);
    nb_h5.H5Sclose(space);
    if (E.failed)
        return nb_error_set(NB_ERR_DATA, "'%s': cannot read frame %ld of %s: %s", path, index + 1, name, E.msg);
    return NB_OK;
}

nb_status nb_h5_read_frame(const char *path, const char *name, hid_t d, int rank, const hsize_t *dims, long index,
                           double *out)
{
    frame_layout L;
    int ours = 0;
    if (rank < 2 || rank > 4) return nb_error_set(NB_ERR_DATA, "'%s': %s has rank %d", path, name, rank);
    nb_status st = layout_of(path, name, d, rank, dims, &L, &ours);
    if (!st && ours) st = read_chunks(path, name, d, &L, index, out);
    else if (!st) st = read_whole(path, name, d, &L, index, out);
    return st;
}

#endif
