/* nxmx_h5.c - the HDF5 layer of the NXmx writer: libhdf5 loaded (dlopen,
 * the serial library's soname found at build time) when an NXmx file is
 * first written, its functions and global "constants" resolved with dlsym;
 * the keeper of a sequence of calls' first failure; and the helpers that
 * write NeXus groups, attributes and data sets (nxmx_h5.h). */
#include "nxmx.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef NB_HAVE_HDF5

#include <dlfcn.h>

#include "nb_util.h"
#include "nxmx_h5.h"

#ifndef NB_HDF5_SONAME
#define NB_HDF5_SONAME "libhdf5_serial.so.103"
#endif

nb_h5_lib nb_h5;

nb_status nb_nxmx_load(void)
{
    if (nb_h5.state == 0) {
        nb_h5.state = -1;
        void *lib = dlopen(NB_HDF5_SONAME, RTLD_NOW | RTLD_LOCAL);
        const char *missing = NULL;
        if (!lib) {
            snprintf(nb_h5.why, sizeof nb_h5.why, "%s", dlerror());
        } else {
#define X(f) if (!missing && !(*(void **)&nb_h5.f = dlsym(lib, #f))) missing = #f;
            NB_H5_FUNCS(X)
            NB_H5_GLOBALS(X)
#undef X
            *(void **)&nb_h5.H5Dwrite_chunk = dlsym(lib, "H5Dwrite_chunk");
            *(void **)&nb_h5.H5Dread_chunk = dlsym(lib, "H5Dread_chunk");
            *(void **)&nb_h5.H5Dget_chunk_info_by_coord = dlsym(lib, "H5Dget_chunk_info_by_coord");
            /* no clean-up at exit: after a failed write (a full disk) the
             * file stays open in the library, whose clean-up would try to
             * flush it again and crash (1.10.8); every file is closed here,
             * and one that failed is removed */
            if (missing) snprintf(nb_h5.why, sizeof nb_h5.why, "%s has no %s", NB_HDF5_SONAME, missing);
            /* (H5dont_atexit fails where the library is already in use, by
             * h5py in the same process: its clean-up is then its user's) */
            else if ((void)nb_h5.H5dont_atexit(), nb_h5.H5open() < 0) snprintf(nb_h5.why, sizeof nb_h5.why, "H5open failed");
            else nb_h5.state = 1;
        }
        /* HDF5's own error printing never reaches stderr: the first error becomes the message */
        if (nb_h5.state == 1) nb_h5.H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    }
    if (nb_h5.state < 0)
        return nb_error_set(NB_ERR_UNSUPPORTED, "cannot load libhdf5 (Debian: apt-get install libhdf5-103-1): %s",
                            nb_h5.why);
    return NB_OK;
}

/* ---- errors: the first failure of a sequence of calls ----------------------- */



static herr_t innermost(unsigned n, const H5E_error2_t *e, void *data)
{
    (void)n;
    char *out = data;
    if (!out[0] && e && e->desc) snprintf(out, 256, "%s", e->desc);
    return 0;
}

/* r < 0: remember what failed, in `what` */
int nb_h5_check(nb_h5err *E, long long r, const char *what)
{
    if (E->failed) return 0;
    if (r >= 0) return 1;
    int e = errno;
    char inner[256] = "";
    nb_h5.H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, innermost, inner);
    E->failed = 1;
    if (e == ENOSPC || e == EDQUOT || e == EIO || e == EFBIG || e == EROFS) snprintf(E->msg, sizeof E->msg, "%s", strerror(e));
    else snprintf(E->msg, sizeof E->msg, "libhdf5: %s%s%s", what, inner[0] ? ": " : "", inner);
    return 0;
}

/* ---- writing helpers ---------------------------------------------------------- */

hid_t nb_h5_gcpl(void)
{
    /* no time stamps in object headers: the same stream gives the same bytes */
    hid_t p = nb_h5.H5Pcreate(P_GCREATE);
    if (p >= 0) nb_h5.H5Pset_obj_track_times(p, 0);
    return p;
}

hid_t nb_h5_plain_dcpl(void)
{
    hid_t p = nb_h5.H5Pcreate(P_DCREATE);
    if (p >= 0) nb_h5.H5Pset_obj_track_times(p, 0);
    return p;
}

hid_t nb_h5_group(nb_h5err *E, hid_t loc, const char *name, const char *nx_class)
{
    if (E->failed) return -1;
    hid_t pl = nb_h5_gcpl();
    hid_t g = nb_h5.H5Gcreate2(loc, name, H5P_DEFAULT, pl, H5P_DEFAULT);
    nb_h5.H5Pclose(pl);
    if (!nb_h5_check(E, g, name)) return -1;
    nb_h5_attr_str(E, g, "NX_class", nx_class);
    return g;
}

void nb_h5_close_group(hid_t g)
{
    if (g >= 0) nb_h5.H5Gclose(g);
}

hid_t nb_h5_str_type(const char *s)
{
    hid_t t = nb_h5.H5Tcopy(T_CS1);
    size_t n = strlen(s);
    nb_h5.H5Tset_size(t, n ? n : 1);
    return t;
}

void nb_h5_attr_write(nb_h5err *E, hid_t obj, const char *name, hid_t type, hid_t mem, int n, const void *v)
{
    if (E->failed || obj < 0) return;
    hsize_t dim = (hsize_t)n;
    hid_t sp = n ? nb_h5.H5Screate_simple(1, &dim, NULL) : nb_h5.H5Screate(H5S_SCALAR);
    hid_t a = nb_h5.H5Acreate2(obj, name, type, sp, H5P_DEFAULT, H5P_DEFAULT);
    if (nb_h5_check(E, a, name)) nb_h5_check(E, nb_h5.H5Awrite(a, mem, v), name);
    if (a >= 0) nb_h5.H5Aclose(a);
    nb_h5.H5Sclose(sp);
}

void nb_h5_attr_str(nb_h5err *E, hid_t obj, const char *name, const char *value)
{
    hid_t t = nb_h5_str_type(value);
    nb_h5_attr_write(E, obj, name, t, t, 0, value[0] ? value : "");
    nb_h5.H5Tclose(t);
}

void nb_h5_attr_vec3(nb_h5err *E, hid_t obj, const char *name, const double v[3])
{
    nb_h5_attr_write(E, obj, name, T_DOUBLE, T_DOUBLE, 3, v);
}

/* A dataset of n values (0: a scalar) of file type ftype from memory type mtype */
hid_t nb_h5_dset(nb_h5err *E, hid_t loc, const char *name, hid_t ftype, hid_t mtype, int rank, const hsize_t *dims,
                  const void *v)
{
    if (E->failed || loc < 0) return -1;
    hid_t sp = rank ? nb_h5.H5Screate_simple(rank, dims, NULL) : nb_h5.H5Screate(H5S_SCALAR);
    hid_t pl = nb_h5_plain_dcpl();
    hid_t d = nb_h5.H5Dcreate2(loc, name, ftype, sp, H5P_DEFAULT, pl, H5P_DEFAULT);
    nb_h5.H5Pclose(pl);
    if (nb_h5_check(E, d, name)) nb_h5_check(E, nb_h5.H5Dwrite(d, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, v), name);
    nb_h5.H5Sclose(sp);
    return d;
}

void nb_h5_put_str(nb_h5err *E, hid_t loc, const char *name, const char *value)
{
    hid_t t = nb_h5_str_type(value);
    hid_t d = nb_h5_dset(E, loc, name, t, t, 0, NULL, value[0] ? value : "");
    if (d >= 0) nb_h5.H5Dclose(d);
    nb_h5.H5Tclose(t);
}

/* doubles (n 0: a scalar) with a units attribute (NULL: none); the dataset stays open when *out */
void nb_h5_put_f64(nb_h5err *E, hid_t loc, const char *name, int n, const double *v, const char *units, hid_t *out)
{
    hsize_t dim = (hsize_t)n;
    hid_t d = nb_h5_dset(E, loc, name, *nb_h5.H5T_IEEE_F64LE_g, T_DOUBLE, n ? 1 : 0, &dim, v);
    if (units) nb_h5_attr_str(E, d, "units", units);
    if (out) *out = d;
    else if (d >= 0) nb_h5.H5Dclose(d);
}

void nb_h5_put_i64(nb_h5err *E, hid_t loc, const char *name, int n, const int64_t *v)
{
    hsize_t dim = (hsize_t)n;
    hid_t d = nb_h5_dset(E, loc, name, *nb_h5.H5T_STD_I64LE_g, T_INT64, n ? 1 : 0, &dim, v);
    if (d >= 0) nb_h5.H5Dclose(d);
}

/* An NXtransformations axis: value(s) along/about `vector`, depending on `dep` */
void nb_h5_put_axis(nb_h5err *E, hid_t loc, const char *name, int n, const double *v, const char *units,
                     const char *type, const double vector[3], const char *dep)
{
    static const double zero[3] = {0, 0, 0};
    hid_t d = -1;
    nb_h5_put_f64(E, loc, name, n, v, units, &d);
    nb_h5_attr_str(E, d, "transformation_type", type);
    nb_h5_attr_vec3(E, d, "vector", vector);
    nb_h5_attr_vec3(E, d, "offset", zero);
    nb_h5_attr_str(E, d, "offset_units", "mm");
    nb_h5_attr_str(E, d, "depends_on", dep);
    if (d >= 0) nb_h5.H5Dclose(d);
}

#endif /* NB_HAVE_HDF5 */
