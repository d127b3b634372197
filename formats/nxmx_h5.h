/* nxmx_h5.h - inside the NXmx writer (not an interface for the tools:
 * nxmx.h is): libhdf5 loaded at run time and called through a table of its
 * functions (nxmx_h5.c), the first-failure error keeper, the helpers that
 * write groups, attributes and data sets, and the writer's state, which
 * the writer (nxmx.c) and the master of shards' files (nxmx_master.c)
 * share.  Only with NB_HAVE_HDF5. */
#ifndef NB_FORMAT_NXMX_H5_H
#define NB_FORMAT_NXMX_H5_H

#include <hdf5.h>
#include <stdint.h>

#include "bslz4.h"
#include "nxmx.h"

/* The functions used, called through pointers of their own types (the
 * macros below), and the library's "constants" that are global variables
 * behind macros (H5T_NATIVE_INT32 is H5OPEN H5T_NATIVE_INT32_g). */
#define NB_H5_FUNCS(X)                                                                                                 \
    X(H5open) X(H5Eset_auto2) X(H5Ewalk2) X(H5Fcreate) X(H5Fopen) X(H5Fclose) X(H5Gcreate2) X(H5Gclose) X(H5Ocopy)   \
    X(H5Screate) X(H5Screate_simple) X(H5Sclose) X(H5Sselect_hyperslab) X(H5Sget_simple_extent_dims)                 \
    X(H5Sget_simple_extent_ndims) X(H5Dcreate2) X(H5Dopen2) X(H5Dwrite) X(H5Dread) X(H5Dclose) X(H5Dset_extent)     \
    X(H5Dget_space) X(H5Dget_type) X(H5Pcreate) X(H5Pset_chunk) X(H5Pset_deflate) X(H5Pset_shuffle) X(H5Pset_filter) \
    X(H5Pset_obj_track_times) X(H5Pset_virtual) X(H5Pset_libver_bounds) X(H5Pclose) X(H5Zfilter_avail)               \
    X(H5Acreate2) X(H5Awrite) X(H5Aopen) X(H5Aopen_by_name) X(H5Aread) X(H5Aget_type) X(H5Aclose) X(H5Tcopy) X(H5Tset_size)             \
    X(H5Tget_size) X(H5Tget_class) X(H5Tclose) X(H5Lcreate_soft) X(H5Lcreate_external) X(H5Lexists) X(H5dont_atexit) \
    X(H5Dget_create_plist) X(H5Pget_nfilters) X(H5Pget_filter2) X(H5Pget_layout) X(H5Pget_chunk)                     \
    X(H5Dget_chunk_storage_size) X(H5Tget_order) X(H5Tget_sign) X(H5Tis_variable_str) X(H5free_memory)             \
    X(H5Literate) X(H5Aexists_by_name) X(H5Gopen2) X(H5Pget_fill_value)
#define NB_H5_GLOBALS(X)                                                                                               \
    X(H5T_NATIVE_INT32_g) X(H5T_NATIVE_UINT32_g) X(H5T_NATIVE_INT64_g) X(H5T_NATIVE_FLOAT_g) X(H5T_NATIVE_DOUBLE_g)  \
    X(H5T_C_S1_g) X(H5T_STD_I32LE_g) X(H5T_STD_U32LE_g) X(H5T_STD_I64LE_g) X(H5T_IEEE_F32LE_g) X(H5T_IEEE_F64LE_g) \
    X(H5P_CLS_DATASET_CREATE_ID_g) X(H5P_CLS_FILE_ACCESS_ID_g) X(H5P_CLS_GROUP_CREATE_ID_g)

typedef struct nb_h5_lib {
    int state; /* 0 not tried, 1 loaded, -1 failed */
    char why[512];
#define X(f) __typeof__(f) *f;
    NB_H5_FUNCS(X)
#undef X
#define X(g) __typeof__(g) *g;
    NB_H5_GLOBALS(X)
#undef X
    /* optional, NULL where the library lacks it: H5Dwrite_chunk (1.10.3)
     * stores chunks compressed here (bslz4.h), else HDF5's filter plugin
     * compresses them, on one thread.  Its type spelled out: older headers
     * declare no H5Dwrite_chunk */
    herr_t (*H5Dwrite_chunk)(hid_t dset, hid_t dxpl, uint32_t filters, const hsize_t *offset, size_t size,
                             const void *buf);
    /* H5Dread_chunk (1.10.3): the chunks of the filters h5_chunks.h knows
     * are decoded here; NULL, or another filter: by libhdf5's pipeline */
    herr_t (*H5Dread_chunk)(hid_t dset, hid_t dxpl, const hsize_t *offset, uint32_t *filters, void *buf);
    /* H5Dget_chunk_info_by_coord (1.10.5): a chunk's filter mask and size,
     * checked before libhdf5's pipeline reads it (nxmx_frame.c) */
    herr_t (*H5Dget_chunk_info_by_coord)(hid_t dset, const hsize_t *offset, unsigned *filter_mask, haddr_t *addr,
                                         hsize_t *size);
} nb_h5_lib;

/* the table, filled by nb_nxmx_load */
extern nb_h5_lib nb_h5;

/* the globals' values, valid after nb_nxmx_load */
#define T_INT32 (*nb_h5.H5T_NATIVE_INT32_g)
#define T_UINT32 (*nb_h5.H5T_NATIVE_UINT32_g)
#define T_INT64 (*nb_h5.H5T_NATIVE_INT64_g)
#define T_FLOAT (*nb_h5.H5T_NATIVE_FLOAT_g)
#define T_DOUBLE (*nb_h5.H5T_NATIVE_DOUBLE_g)
#define T_CS1 (*nb_h5.H5T_C_S1_g)
#define P_DCREATE (*nb_h5.H5P_CLS_DATASET_CREATE_ID_g)
#define P_FACCESS (*nb_h5.H5P_CLS_FILE_ACCESS_ID_g)
#define P_GCREATE (*nb_h5.H5P_CLS_GROUP_CREATE_ID_g)

/* H5F_ACC_TRUNC and H5F_ACC_RDONLY are macros that call H5check_version
 * and H5open: their plain values (HDF5's file-format constants) */
#define ACC_TRUNC 0x0002u
#define ACC_RDONLY 0x0000u

#define BSHUF_FILTER 32008 /* bitshuffle (+LZ4), the HDF5 filter id Eiger files use */

/* ---- errors: the first failure of a sequence of calls ----------------------- */

/* The calls that build a file are many and all must succeed: the first
 * failure is kept (with HDF5's innermost message, or errno's when the
 * system refused a write) and the calls after it do nothing. */
typedef struct nb_h5err {
    int failed;
    char msg[512];
} nb_h5err;

/* r < 0: remember what failed, in `what`; 0 then (and after any earlier failure) */
int nb_h5_check(nb_h5err *E, long long r, const char *what);

/* ---- reading (nxmx_frame.c) --------------------------------------------------- */

/* Frame `index` of data set d (`name` in `path`, for messages) of rank 2
 * (one frame: index 0) to 4 and dims, its values (dims after the first, or
 * all of a rank 2) into out as doubles, in C order.  A filter libhdf5 has
 * no plugin for is refused by number; a chunk decoded here that is corrupt,
 * by what is wrong with it. */
nb_status nb_h5_read_frame(const char *path, const char *name, hid_t d, int rank, const hsize_t *dims, long index,
                           double *out);

/* ---- writing helpers (nxmx_h5.c) ---------------------------------------------- */
hid_t nb_h5_gcpl(void);
hid_t nb_h5_plain_dcpl(void);
hid_t nb_h5_group(nb_h5err *E, hid_t loc, const char *name, const char *nx_class);
void nb_h5_close_group(hid_t g);
hid_t nb_h5_str_type(const char *s);
void nb_h5_attr_write(nb_h5err *E, hid_t obj, const char *name, hid_t type, hid_t mem, int n, const void *v);
void nb_h5_attr_str(nb_h5err *E, hid_t obj, const char *name, const char *value);
void nb_h5_attr_vec3(nb_h5err *E, hid_t obj, const char *name, const double v[3]);
hid_t nb_h5_dset(nb_h5err *E, hid_t loc, const char *name, hid_t ftype, hid_t mtype, int rank, const hsize_t *dims,
                 const void *v);
void nb_h5_put_str(nb_h5err *E, hid_t loc, const char *name, const char *value);
void nb_h5_put_f64(nb_h5err *E, hid_t loc, const char *name, int n, const double *v, const char *units, hid_t *out);
void nb_h5_put_i64(nb_h5err *E, hid_t loc, const char *name, int n, const int64_t *v);
void nb_h5_put_axis(nb_h5err *E, hid_t loc, const char *name, int n, const double *v, const char *units,
                    const char *type, const double vector[3], const char *dep);

/* ---- the writer's state, and its parts the master uses (nxmx.c) -------------- */

struct nb_nxmx {
    char *final, *tmp;
    nb_nxmx_setup setup;
    char *geometry;        /* geometry_text of the first plan */
    int width, rows;       /* the stacked frame */
    int stacked;           /* panels of several widths: values are moved into rows of `width` */
    void *frame_buf;       /* the stacked frame */
    double spindle_axis[3];
    hid_t file, data, sample_tf, note, beam;
    long n, cap;           /* frames written, room in the arrays */
    double *omega, *omega_end, *wavelength;
    int64_t *frames, *noise_seeds;
    int all_noise_seeds;
    nb_bslz4 *bslz4;       /* bitshuffle+LZ4 chunks made here (NULL: by HDF5's filter, or none) */
    nb_h5err E;
};

hid_t nb_nxmx_entry(nb_h5err *E, hid_t file);
nb_status nb_nxmx_create_file(nb_nxmx *w, const char *path);
void nb_nxmx_put_scaling(nb_h5err *E, hid_t data, double factor);
void nb_nxmx_release(nb_nxmx *w);
void nb_nxmx_free_writer(nb_nxmx *w);

#endif
