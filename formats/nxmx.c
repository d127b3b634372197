/* nxmx.c - NeXus/NXmx HDF5 files through libhdf5, loaded at run time
 * (dlopen) so that the tools start without it and only an NXmx output needs
 * it: every frame of a stream in one file, its metadata from the PLAN, and
 * master files joining the files of shards.  Layout and conventions: nxmx.h
 * and docs/architecture.md 5. */
#include "nxmx.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image_meta.h"
#include "nb_util.h"

#ifndef NB_VERSION
#define NB_VERSION "unknown"
#endif

#ifndef NB_HAVE_HDF5

nb_status nb_nxmx_load(void)
{
    return nb_error_set(NB_ERR_UNSUPPORTED, "this build has no libhdf5 (install libhdf5-dev and rebuild)");
}

nb_status nb_nxmx_open(nb_nxmx **w, const char *path, const nb_plan *p, const nb_nxmx_setup *s)
{
    (void)p, (void)s;
    *w = NULL;
    return nb_error_prefix(nb_nxmx_load(), "cannot write '%s'", path);
}

nb_status nb_nxmx_put(nb_nxmx *w, const nb_plan *p, const void *values, const nb_nxmx_frame *f)
{
    (void)w, (void)p, (void)values, (void)f;
    return nb_nxmx_load();
}

nb_status nb_nxmx_close(nb_nxmx *w)
{
    (void)w;
    return nb_nxmx_load();
}

void nb_nxmx_abort(nb_nxmx *w) { (void)w; }

const char *nb_nxmx_path(const nb_nxmx *w)
{
    (void)w;
    return "";
}

nb_status nb_nxmx_master(const char *path, const char *const *parts, int nparts)
{
    (void)parts, (void)nparts;
    return nb_error_prefix(nb_nxmx_load(), "cannot write '%s'", path);
}

#else /* NB_HAVE_HDF5 */

#include <dlfcn.h>
#include <hdf5.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "bslz4.h"
#include "dials_expt_write.h"
#include "image_meta.h"
#include "xds_inp.h"

#ifndef NB_HDF5_SONAME
#define NB_HDF5_SONAME "libhdf5_serial.so.103"
#endif

/* ---- libhdf5, loaded on first use ------------------------------------------ */

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
    X(H5Tget_size) X(H5Tget_class) X(H5Tclose) X(H5Lcreate_soft) X(H5Lcreate_external) X(H5Lexists) X(H5dont_atexit)
#define NB_H5_GLOBALS(X)                                                                                               \
    X(H5T_NATIVE_INT32_g) X(H5T_NATIVE_UINT32_g) X(H5T_NATIVE_INT64_g) X(H5T_NATIVE_FLOAT_g) X(H5T_NATIVE_DOUBLE_g)  \
    X(H5T_C_S1_g) X(H5T_STD_I32LE_g) X(H5T_STD_U32LE_g) X(H5T_STD_I64LE_g) X(H5T_IEEE_F32LE_g) X(H5T_IEEE_F64LE_g) \
    X(H5P_CLS_DATASET_CREATE_ID_g) X(H5P_CLS_FILE_ACCESS_ID_g) X(H5P_CLS_GROUP_CREATE_ID_g)

static struct {
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
} h5;

nb_status nb_nxmx_load(void)
{
    if (h5.state == 0) {
        h5.state = -1;
        void *lib = dlopen(NB_HDF5_SONAME, RTLD_NOW | RTLD_LOCAL);
        const char *missing = NULL;
        if (!lib) {
            snprintf(h5.why, sizeof h5.why, "%s", dlerror());
        } else {
#define X(f) if (!missing && !(*(void **)&h5.f = dlsym(lib, #f))) missing = #f;
            NB_H5_FUNCS(X)
            NB_H5_GLOBALS(X)
#undef X
            *(void **)&h5.H5Dwrite_chunk = dlsym(lib, "H5Dwrite_chunk");
            /* no clean-up at exit: after a failed write (a full disk) the
             * file stays open in the library, whose clean-up would try to
             * flush it again and crash (1.10.8); every file is closed here,
             * and one that failed is removed */
            if (missing) snprintf(h5.why, sizeof h5.why, "%s has no %s", NB_HDF5_SONAME, missing);
            else if (h5.H5dont_atexit() < 0 || h5.H5open() < 0) snprintf(h5.why, sizeof h5.why, "H5open failed");
            else h5.state = 1;
        }
        /* HDF5's own error printing never reaches stderr: the first error becomes the message */
        if (h5.state == 1) h5.H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    }
    if (h5.state < 0)
        return nb_error_set(NB_ERR_UNSUPPORTED, "cannot load libhdf5 (Debian: apt-get install libhdf5-103-1): %s",
                            h5.why);
    return NB_OK;
}

/* the globals' values, valid after nb_nxmx_load */
#define T_INT32 (*h5.H5T_NATIVE_INT32_g)
#define T_UINT32 (*h5.H5T_NATIVE_UINT32_g)
#define T_INT64 (*h5.H5T_NATIVE_INT64_g)
#define T_FLOAT (*h5.H5T_NATIVE_FLOAT_g)
#define T_DOUBLE (*h5.H5T_NATIVE_DOUBLE_g)
#define T_CS1 (*h5.H5T_C_S1_g)
#define P_DCREATE (*h5.H5P_CLS_DATASET_CREATE_ID_g)
#define P_FACCESS (*h5.H5P_CLS_FILE_ACCESS_ID_g)
#define P_GCREATE (*h5.H5P_CLS_GROUP_CREATE_ID_g)

/* H5F_ACC_TRUNC and H5F_ACC_RDONLY are macros that call H5check_version
 * and H5open: their plain values (HDF5's file-format constants) */
#define ACC_TRUNC 0x0002u
#define ACC_RDONLY 0x0000u

#define BSHUF_FILTER 32008 /* bitshuffle (+LZ4), the HDF5 filter id Eiger files use */

/* ---- errors: the first failure of a sequence of calls ----------------------- */

/* The calls that build a file are many and all must succeed: the first
 * failure is kept (with HDF5's innermost message, or errno's when the
 * system refused a write) and the calls after it do nothing. */
typedef struct h5err {
    int failed;
    char msg[512];
} h5err;

static herr_t innermost(unsigned n, const H5E_error2_t *e, void *data)
{
    (void)n;
    char *out = data;
    if (!out[0] && e && e->desc) snprintf(out, 256, "%s", e->desc);
    return 0;
}

/* r < 0: remember what failed, in `what` */
static int h5_check(h5err *E, long long r, const char *what)
{
    if (E->failed) return 0;
    if (r >= 0) return 1;
    int e = errno;
    char inner[256] = "";
    h5.H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, innermost, inner);
    E->failed = 1;
    if (e == ENOSPC || e == EDQUOT || e == EIO || e == EFBIG || e == EROFS) snprintf(E->msg, sizeof E->msg, "%s", strerror(e));
    else snprintf(E->msg, sizeof E->msg, "libhdf5: %s%s%s", what, inner[0] ? ": " : "", inner);
    return 0;
}

/* ---- writing helpers ---------------------------------------------------------- */

static hid_t group(h5err *E, hid_t loc, const char *name, const char *nx_class);
static void attr_str(h5err *E, hid_t obj, const char *name, const char *value);

static hid_t gcpl(void)
{
    /* no time stamps in object headers: the same stream gives the same bytes */
    hid_t p = h5.H5Pcreate(P_GCREATE);
    if (p >= 0) h5.H5Pset_obj_track_times(p, 0);
    return p;
}

static hid_t plain_dcpl(void)
{
    hid_t p = h5.H5Pcreate(P_DCREATE);
    if (p >= 0) h5.H5Pset_obj_track_times(p, 0);
    return p;
}

static hid_t group(h5err *E, hid_t loc, const char *name, const char *nx_class)
{
    if (E->failed) return -1;
    hid_t pl = gcpl();
    hid_t g = h5.H5Gcreate2(loc, name, H5P_DEFAULT, pl, H5P_DEFAULT);
    h5.H5Pclose(pl);
    if (!h5_check(E, g, name)) return -1;
    attr_str(E, g, "NX_class", nx_class);
    return g;
}

static void close_group(hid_t g)
{
    if (g >= 0) h5.H5Gclose(g);
}

static hid_t str_type(const char *s)
{
    hid_t t = h5.H5Tcopy(T_CS1);
    size_t n = strlen(s);
    h5.H5Tset_size(t, n ? n : 1);
    return t;
}

static void attr_write(h5err *E, hid_t obj, const char *name, hid_t type, hid_t mem, int n, const void *v)
{
    if (E->failed || obj < 0) return;
    hsize_t dim = (hsize_t)n;
    hid_t sp = n ? h5.H5Screate_simple(1, &dim, NULL) : h5.H5Screate(H5S_SCALAR);
    hid_t a = h5.H5Acreate2(obj, name, type, sp, H5P_DEFAULT, H5P_DEFAULT);
    if (h5_check(E, a, name)) h5_check(E, h5.H5Awrite(a, mem, v), name);
    if (a >= 0) h5.H5Aclose(a);
    h5.H5Sclose(sp);
}

static void attr_str(h5err *E, hid_t obj, const char *name, const char *value)
{
    hid_t t = str_type(value);
    attr_write(E, obj, name, t, t, 0, value[0] ? value : "");
    h5.H5Tclose(t);
}

static void attr_vec3(h5err *E, hid_t obj, const char *name, const double v[3])
{
    attr_write(E, obj, name, T_DOUBLE, T_DOUBLE, 3, v);
}

/* A dataset of n values (0: a scalar) of file type ftype from memory type mtype */
static hid_t dset(h5err *E, hid_t loc, const char *name, hid_t ftype, hid_t mtype, int rank, const hsize_t *dims,
                  const void *v)
{
    if (E->failed || loc < 0) return -1;
    hid_t sp = rank ? h5.H5Screate_simple(rank, dims, NULL) : h5.H5Screate(H5S_SCALAR);
    hid_t pl = plain_dcpl();
    hid_t d = h5.H5Dcreate2(loc, name, ftype, sp, H5P_DEFAULT, pl, H5P_DEFAULT);
    h5.H5Pclose(pl);
    if (h5_check(E, d, name)) h5_check(E, h5.H5Dwrite(d, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, v), name);
    h5.H5Sclose(sp);
    return d;
}

static void put_str(h5err *E, hid_t loc, const char *name, const char *value)
{
    hid_t t = str_type(value);
    hid_t d = dset(E, loc, name, t, t, 0, NULL, value[0] ? value : "");
    if (d >= 0) h5.H5Dclose(d);
    h5.H5Tclose(t);
}

/* doubles (n 0: a scalar) with a units attribute (NULL: none); the dataset stays open when *out */
static void put_f64(h5err *E, hid_t loc, const char *name, int n, const double *v, const char *units, hid_t *out)
{
    hsize_t dim = (hsize_t)n;
    hid_t d = dset(E, loc, name, *h5.H5T_IEEE_F64LE_g, T_DOUBLE, n ? 1 : 0, &dim, v);
    if (units) attr_str(E, d, "units", units);
    if (out) *out = d;
    else if (d >= 0) h5.H5Dclose(d);
}

static void put_i64(h5err *E, hid_t loc, const char *name, int n, const int64_t *v)
{
    hsize_t dim = (hsize_t)n;
    hid_t d = dset(E, loc, name, *h5.H5T_STD_I64LE_g, T_INT64, n ? 1 : 0, &dim, v);
    if (d >= 0) h5.H5Dclose(d);
}

/* An NXtransformations axis: value(s) along/about `vector`, depending on `dep` */
static void put_axis(h5err *E, hid_t loc, const char *name, int n, const double *v, const char *units,
                     const char *type, const double vector[3], const char *dep)
{
    static const double zero[3] = {0, 0, 0};
    hid_t d = -1;
    put_f64(E, loc, name, n, v, units, &d);
    attr_str(E, d, "transformation_type", type);
    attr_vec3(E, d, "vector", vector);
    attr_vec3(E, d, "offset", zero);
    attr_str(E, d, "offset_units", "mm");
    attr_str(E, d, "depends_on", dep);
    if (d >= 0) h5.H5Dclose(d);
}

/* ---- geometry ----------------------------------------------------------------- */

static double dot3(const double a[3], const double b[3]) { return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]; }

/* v (the plan's frame) in NeXus's McStas frame: DIALS's laboratory frame
 * (R, as model.expt), x and z negated (dxtbx's MCSTAS_TO_IMGCIF), times scale */
static void mcstas(const double R[3][3], const double v[3], double scale, double out[3])
{
    for (int i = 0; i < 3; i++) out[i] = scale * (R[i][0] * v[0] + R[i][1] * v[1] + R[i][2] * v[2]);
    out[0] = -out[0], out[2] = -out[2];
    for (int i = 0; i < 3; i++) out[i] += 0.0; /* no -0 */
}

/* The stacked frame: panels along the slow axis, as wide as the widest */
static void stack_dims(const nb_plan *p, int *width, int *rows)
{
    *width = 0;
    for (int i = 0; i < nb_plan_npanels(p); i++) {
        int f, s;
        nb_plan_panel_dims(p, i, &f, &s, NULL);
        if (f > *width) *width = f;
    }
    *rows = nb_xds_stack_row(p, nb_plan_npanels(p));
}

/* What frames of one file (and the parts of a master) must share: the
 * detector's panels, the beam's direction and polarization, the spindle */
static char *geometry_text(const nb_plan *p)
{
    nb_strbuf sb;
    nb_strbuf_init(&sb);
    nb_strbuf_printf(&sb, "beam %.17g %.17g %.17g spindle %.17g %.17g %.17g polar %.17g %.17g %.17g %.17g\n", p->beam[0],
                     p->beam[1], p->beam[2], p->spindle[0], p->spindle[1], p->spindle[2], p->polar_vector[0],
                     p->polar_vector[1], p->polar_vector[2], nb_polarization_fraction(p));
    for (int i = 0; i < nb_plan_npanels(p); i++) {
        nb_plan v;
        nb_plan_panel_view(p, i, &v);
        nb_plan_panel_dims(p, i, &v.fpixels, &v.spixels, NULL);
        nb_strbuf_printf(&sb, "panel %d %d x %d pixel %.17g f %.17g %.17g %.17g s %.17g %.17g %.17g o %.17g %.17g %.17g\n",
                         i, v.fpixels, v.spixels, v.pixel_size, v.fdet[0], v.fdet[1], v.fdet[2], v.sdet[0], v.sdet[1],
                         v.sdet[2], v.pix0[0], v.pix0[1], v.pix0[2]);
    }
    return nb_strbuf_take(&sb);
}

/* ---- the metadata ----------------------------------------------------------- */

/* The beam: the plan's wavelength (per frame when it varies: written at
 * close), polarization as a Stokes vector in the McStas frame, and the
 * spectrum of several sources: each wavelength with the fraction of the
 * sources at it (every source counts alike in the simulation). */
static void put_beam(h5err *E, hid_t instrument, const nb_plan *p, const double R[3][3], hid_t *beam_out)
{
    hid_t beam = group(E, instrument, "beam", "NXbeam");
    double e[3], frac = nb_polarization_fraction(p);
    mcstas(R, p->polar_vector, 1.0, e);
    double psi = atan2(e[1], e[0]), deg = 2 * frac - 1;
    double stokes[4] = {1.0, deg * cos(2 * psi), deg * sin(2 * psi), 0.0};
    put_f64(E, beam, "incident_polarisation_stokes", 4, stokes, NULL, NULL);
    if (p->flux > 0) put_f64(E, beam, "total_flux", 0, &p->flux, "Hz", NULL);
    if (p->beamsize > 0) {
        double size[2] = {p->beamsize * 1e3, p->beamsize * 1e3};
        put_f64(E, beam, "incident_beam_size", 2, size, "mm", NULL);
    }
    int n = p->nsources, m = 0;
    double *wl = n > 1 ? calloc((size_t)n, sizeof *wl) : NULL, *wt = n > 1 ? calloc((size_t)n, sizeof *wt) : NULL;
    for (int i = 0; wl && wt && i < n; i++) {
        int k = 0;
        while (k < m && wl[k] != p->sources[i].lambda * 1e10) k++;
        if (k == m) wl[m++] = p->sources[i].lambda * 1e10;
        wt[k] += 1.0 / n;
    }
    if (m > 1) {
        hid_t sp = group(E, beam, "incident_wavelength_spectrum", "NXdata");
        attr_str(E, sp, "signal", "weight");
        attr_str(E, sp, "axes", "wavelength");
        put_f64(E, sp, "wavelength", m, wl, "angstrom", NULL);
        put_f64(E, sp, "weight", m, wt, NULL, NULL);
        close_group(sp);
    }
    free(wl);
    free(wt);
    *beam_out = beam;
}

/* Panel i as an NXdetector_module: its rows of the stacked frame, its
 * origin (module_offset: PIX0 in the McStas frame, mm) and pixel directions
 * (translations of one pixel along the fast and slow axes, depending on it) */
static void put_module(h5err *E, hid_t det, const nb_plan *p, int i, const double R[3][3])
{
    char name[32], path[128], off_path[160];
    nb_plan v;
    nb_plan_panel_view(p, i, &v);
    nb_plan_panel_dims(p, i, &v.fpixels, &v.spixels, NULL);
    snprintf(name, sizeof name, "module_%d", i);
    snprintf(path, sizeof path, "/entry/instrument/detector/%s", name);
    snprintf(off_path, sizeof off_path, "%s/module_offset", path);
    hid_t mod = group(E, det, name, "NXdetector_module");
    int64_t origin[2] = {nb_xds_stack_row(p, i), 0}, size[2] = {v.spixels, v.fpixels};
    put_i64(E, mod, "data_origin", 2, origin);
    put_i64(E, mod, "data_size", 2, size);
    double o[3], f[3], s[3];
    mcstas(R, v.pix0, 1e3, o);
    mcstas(R, v.fdet, 1.0, f);
    mcstas(R, v.sdet, 1.0, s);
    double len = sqrt(dot3(o, o)), px = v.pixel_size * 1e3;
    double dir[3] = {0, 0, 1};
    if (len > 0)
        for (int k = 0; k < 3; k++) dir[k] = o[k] / len;
    put_axis(E, mod, "module_offset", 0, &len, "mm", "translation", dir, ".");
    put_axis(E, mod, "fast_pixel_direction", 0, &px, "mm", "translation", f, off_path);
    put_axis(E, mod, "slow_pixel_direction", 0, &px, "mm", "translation", s, off_path);
    close_group(mod);
}

/* The pixel mask over the stacked frame: NeXus's bit 0 (gap) right of a
 * narrower panel, bit 1 (dead) where the plan's mask skips a pixel */
static void put_pixel_mask(h5err *E, hid_t det, const nb_plan *p)
{
    int width, rows;
    stack_dims(p, &width, &rows);
    uint32_t *mask = calloc((size_t)width * rows, sizeof *mask);
    if (!mask) {
        E->failed = 1;
        snprintf(E->msg, sizeof E->msg, "out of memory for the pixel mask");
        return;
    }
    for (int i = 0; i < nb_plan_npanels(p); i++) {
        nb_plan v;
        int f, s;
        nb_plan_panel_view(p, i, &v);
        nb_plan_panel_dims(p, i, &f, &s, NULL);
        size_t row0 = (size_t)nb_xds_stack_row(p, i);
        for (int y = 0; y < s; y++)
            for (int x = 0; x < width; x++) {
                uint32_t *m = &mask[(row0 + (size_t)y) * width + x];
                if (x >= f) *m = 1;
                else if (v.mask && !v.mask[(size_t)y * f + x]) *m = 2;
            }
    }
    hsize_t dims[2] = {(hsize_t)rows, (hsize_t)width};
    hid_t sp = h5.H5Screate_simple(2, dims, NULL), pl = plain_dcpl();
    h5.H5Pset_chunk(pl, 2, dims);
    h5.H5Pset_deflate(pl, 6);
    hid_t d = E->failed ? -1 : h5.H5Dcreate2(det, "pixel_mask", *h5.H5T_STD_U32LE_g, sp, H5P_DEFAULT, pl, H5P_DEFAULT);
    if (h5_check(E, d, "pixel_mask")) h5_check(E, h5.H5Dwrite(d, T_UINT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, mask), "pixel_mask");
    if (d >= 0) h5.H5Dclose(d);
    h5.H5Pclose(pl);
    h5.H5Sclose(sp);
    free(mask);
}

static void put_detector(h5err *E, hid_t instrument, const nb_plan *p, const nb_nxmx_setup *s, const double R[3][3])
{
    hid_t det = group(E, instrument, "detector", "NXdetector");
    nb_stated_sensor sensor;
    nb_stated_sensor_of(p, &sensor);
    put_str(E, det, "description", sensor.simulated ? "nb-sim simulated pixel-array detector"
                                                    : "nb-sim simulated pixel-array detector; no absorption was "
                                                      "simulated: the sensor is stated as one that absorbs every "
                                                      "photon (mu t = 10), so that a reader's efficiency "
                                                      "correction is 1");
    put_str(E, det, "type", "pixel");
    put_str(E, det, "sensor_material", nb_material_name(sensor.material));
    double thick = sensor.thickness * 1e3;
    put_f64(E, det, "sensor_thickness", 0, &thick, "mm", NULL);
    double t = p->exposure > 0 ? p->exposure : 1.0;
    put_f64(E, det, "count_time", 0, &t, "s", NULL);
    put_f64(E, det, "frame_time", 0, &t, "s", NULL);
    double dist = p->distance * 1e3, bx = p->Fbeam / p->pixel_size, by = p->Sbeam / p->pixel_size;
    put_f64(E, det, "distance", 0, &dist, "mm", NULL);
    /* panel 0's direct-beam spot, pixels from the outer corner of the first pixel (docs/physics.md 2.6) */
    put_f64(E, det, "beam_center_x", 0, &bx, "pixel", NULL);
    put_f64(E, det, "beam_center_y", 0, &by, "pixel", NULL);
    double pxs = p->pixel_size * 1e3;
    put_f64(E, det, "x_pixel_size", 0, &pxs, "mm", NULL);
    put_f64(E, det, "y_pixel_size", 0, &pxs, "mm", NULL);
    if (s->kind == NB_NXMX_COUNTS) {
        /* dxtbx trusts counts above underload - 1 and up to the saturation */
        int64_t under = 0, sat = (int64_t)s->saturation;
        put_i64(E, det, "underload_value", 0, &under);
        put_i64(E, det, "saturation_value", 0, &sat);
    }
    int64_t applied = 0;
    put_i64(E, det, "pixel_mask_applied", 0, &applied);
    put_pixel_mask(E, det, p);
    /* the frames, as NeXus links a detector's data: XDS's durin plugin takes
     * an NXdetector's data before the last NXdata it meets, which is the
     * beam's incident_wavelength_spectrum when there is one.  Soft, so that a
     * master's copy of this group points to the master's frames */
    if (!E->failed) h5_check(E, h5.H5Lcreate_soft("/entry/data/data", det, "data", H5P_DEFAULT, H5P_DEFAULT), "data");
    for (int i = 0; i < nb_plan_npanels(p); i++) put_module(E, det, p, i, R);
    close_group(det);
}

/* the simulation's provenance; the per-frame arrays follow at close */
static hid_t put_note(h5err *E, hid_t entry, const nb_plan *p)
{
    hid_t note = group(E, entry, "nb", "NXnote");
    put_str(E, note, "program", "nb toolkit");
    put_str(E, note, "version", NB_VERSION);
    put_str(E, note, "command_line", p->command_line ? p->command_line : "");
    put_str(E, note, "description", "simulated by the nb toolkit (nanoBragg as Unix tools); seeds as the PLAN "
                                    "stores them (negated, as nanoBragg keeps them)");
    int64_t seeds[3] = {p->seed, p->mosaic_seed, p->misset_seed};
    put_i64(E, note, "seed", 0, &seeds[0]);
    put_i64(E, note, "mosaic_seed", 0, &seeds[1]);
    put_i64(E, note, "misset_seed", 0, &seeds[2]);
    char *geom = geometry_text(p);
    attr_str(E, note, "geometry", geom);
    free(geom);
    return note;
}

/* ---- the writer --------------------------------------------------------------- */

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
    h5err E;
};

const char *nb_nxmx_path(const nb_nxmx *w) { return w ? w->final : ""; }

/* Bitshuffle+LZ4 chunks made here, on every thread, where liblz4 and
 * H5Dwrite_chunk are there: the data set still declares the filter as the
 * plugin would apply it (HDF5 runs its set_local, which adds the element
 * size and the version to the options), so readers see no difference; else
 * HDF5's filter plugin makes them, on one thread, as slowly as before. */
static void own_chunks(nb_nxmx *w)
{
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    nb_status st = h5.H5Dwrite_chunk ? nb_bslz4_new(&w->bslz4, (size_t)w->rows * w->width, threads)
                                     : nb_error_set(NB_ERR_UNSUPPORTED, "libhdf5 has no H5Dwrite_chunk (1.10.3)");
    if (st) nb_info("'%s': bitshuffle+LZ4 by HDF5's filter plugin, on one thread: %s", w->final, nb_error_message());
    else nb_info("'%s': bitshuffle+LZ4 chunks made on %d threads (%s bit shuffle)", w->final,
                 nb_bslz4_threads(w->bslz4), nb_bitshuffle4_path());
}

/* The counts' photons per ADU (1/gain): NXmx's data_scaling_factor, and
 * data_scale_factor, the spelling DIALS's nxmx reader takes it by (dxtbx
 * 3.23 and later: the panels' gain is its inverse) */
static void put_scaling(h5err *E, hid_t data, double factor)
{
    put_f64(E, data, "data_scaling_factor", 0, &factor, NULL, NULL);
    put_f64(E, data, "data_scale_factor", 0, &factor, NULL, NULL);
}

/* The data set: frames x rows x width, unlimited frames, one frame per chunk */
static void create_data(nb_nxmx *w, hid_t entry)
{
    h5err *E = &w->E;
    hid_t data = group(E, entry, "data", "NXdata");
    attr_str(E, data, "signal", "data");
    if (E->failed) return;
    hsize_t dims[3] = {0, (hsize_t)w->rows, (hsize_t)w->width}, max[3] = {H5S_UNLIMITED, dims[1], dims[2]};
    hsize_t chunk[3] = {1, dims[1], dims[2]};
    hid_t sp = h5.H5Screate_simple(3, dims, max), pl = plain_dcpl();
    h5.H5Pset_chunk(pl, 3, chunk);
    int c = w->setup.compression;
    if (c == NB_NXMX_AUTO) c = h5.H5Zfilter_avail(BSHUF_FILTER) > 0 ? NB_NXMX_BSLZ4 : NB_NXMX_GZIP;
    if (c == NB_NXMX_BSLZ4) {
        const unsigned opts[2] = {0, 2}; /* default block, LZ4 */
        if (h5.H5Zfilter_avail(BSHUF_FILTER) <= 0) {
            E->failed = 1;
            snprintf(E->msg, sizeof E->msg, "the bitshuffle filter (HDF5 filter 32008) is not installed (Debian: "
                                            "bitshuffle, hdf5-filter-plugin)");
        } else {
            h5_check(E, h5.H5Pset_filter(pl, BSHUF_FILTER, H5Z_FLAG_MANDATORY, 2, opts), "the bitshuffle filter");
            if (!E->failed) own_chunks(w);
        }
    } else if (c == NB_NXMX_GZIP) {
        /* byte shuffle and the fastest deflate: most of a simulated frame is 0 */
        h5.H5Pset_shuffle(pl);
        h5.H5Pset_deflate(pl, 1);
    }
    hid_t ftype = w->setup.kind == NB_NXMX_COUNTS ? *h5.H5T_STD_I32LE_g : *h5.H5T_IEEE_F32LE_g;
    w->data = E->failed ? -1 : h5.H5Dcreate2(data, "data", ftype, sp, H5P_DEFAULT, pl, H5P_DEFAULT);
    h5_check(E, w->data, "/entry/data/data");
    attr_str(E, w->data, "units", w->setup.kind == NB_NXMX_COUNTS ? "counts" : "photons");
    h5.H5Pclose(pl);
    h5.H5Sclose(sp);
    if (w->setup.kind == NB_NXMX_COUNTS) put_scaling(E, data, 1.0 / (w->setup.gain > 0 ? w->setup.gain : 1.0));
    close_group(data);
}

static void put_sample(nb_nxmx *w, hid_t entry, const nb_plan *p)
{
    h5err *E = &w->E;
    hid_t sample = group(E, entry, "sample", "NXsample");
    put_str(E, sample, "name", "simulated crystal");
    put_str(E, sample, "depends_on", "/entry/sample/transformations/omega");
    double cell[6];
    memcpy(cell, p->unit_cell, sizeof cell);
    put_f64(E, sample, "unit_cell", 6, cell, NULL, NULL);
    w->sample_tf = group(E, sample, "transformations", "NXtransformations");
    close_group(sample);
}

/* The file under a temporary name in the final one's directory */
/* The file's NXentry (an NXmx entry, the file's default), its data the
 * entry's default: a writer's file and a master alike */
static hid_t nxmx_entry(h5err *E, hid_t file)
{
    attr_str(E, file, "default", "entry");
    attr_str(E, file, "creator", "nb toolkit " NB_VERSION);
    hid_t entry = group(E, file, "entry", "NXentry");
    attr_str(E, entry, "default", "data");
    put_str(E, entry, "definition", "NXmx");
    /* NXmx requires a start time: a simulation's is when its file was made */
    char when[32];
    time_t now = time(NULL);
    struct tm utc;
    if (gmtime_r(&now, &utc) && strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &utc))
        put_str(E, entry, "start_time", when);
    return entry;
}

static nb_status create_file(nb_nxmx *w, const char *path)
{
    struct stat st;
    if (!strcmp(path, "-") || (stat(path, &st) == 0 && !S_ISREG(st.st_mode)))
        return nb_error_set(NB_ERR_USAGE, "cannot write '%s': an NXmx (HDF5) file must be a regular file, not "
                                          "standard output or a device",
                            path);
    /* libhdf5 creates the file by name: a temporary one beside it, renamed at the end */
    int fd = nb_temp_beside(path, ".nbc", &w->tmp);
    if (fd < 0) return nb_error_set(NB_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    close(fd);
    nb_temp_register(w->tmp);
    w->file = h5.H5Fcreate(w->tmp, ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    h5_check(&w->E, w->file, "cannot create the file");
    return w->E.failed ? nb_error_set(NB_ERR_IO, "cannot write '%s': %s", path, w->E.msg) : NB_OK;
}

nb_status nb_nxmx_open(nb_nxmx **out, const char *path, const nb_plan *p, const nb_nxmx_setup *s)
{
    *out = NULL;
    nb_status st = nb_nxmx_load();
    if (st) return nb_error_prefix(st, "cannot write '%s'", path);
    double R[3][3];
    if ((st = nb_dials_frame(p, R))) return nb_error_prefix(st, "'%s'", path);
    nb_nxmx *w = calloc(1, sizeof *w);
    if (!w) return nb_error_set(NB_ERR_NOMEM, "out of memory");
    w->final = nb_xstrdup(path);
    w->setup = *s;
    w->file = w->data = w->sample_tf = w->note = w->beam = -1;
    w->all_noise_seeds = 1;
    w->geometry = geometry_text(p);
    stack_dims(p, &w->width, &w->rows);
    w->stacked = w->rows * (size_t)w->width != nb_plan_total_pixels(p);
    mcstas(R, p->spindle, 1.0, w->spindle_axis);
    for (int i = 0; i < nb_plan_npanels(p) && nb_plan_npanels(p) > 1; i++) {
        nb_plan v;
        nb_plan_panel_view(p, i, &v);
        double d = dot3(v.fdet, v.sdet);
        if (fabs(d) > 1e-7)
            nb_warn("'%s': panel %d's fast and slow axes are not perpendicular (cosine %.3g): written as they are, "
                    "but dxtbx refuses such a panel in a detector of several modules",
                    path, i, d);
    }
    if ((st = create_file(w, path))) {
        nb_nxmx_abort(w);
        return st;
    }
    h5err *E = &w->E;
    hid_t entry = nxmx_entry(E, w->file);
    hid_t source = group(E, entry, "source", "NXsource");
    put_str(E, source, "name", "nb toolkit simulation (nanoBragg)");
    put_str(E, source, "type", "Synchrotron X-ray Source");
    close_group(source);
    hid_t instrument = group(E, entry, "instrument", "NXinstrument");
    put_str(E, instrument, "name", "nb-sim");
    put_beam(E, instrument, p, R, &w->beam);
    put_detector(E, instrument, p, s, R);
    close_group(instrument);
    put_sample(w, entry, p);
    w->note = put_note(E, entry, p);
    create_data(w, entry);
    close_group(entry);
    if (E->failed) {
        st = nb_error_set(NB_ERR_IO, "cannot write '%s': %s", path, E->msg);
        nb_nxmx_abort(w);
        return st;
    }
    *out = w;
    return NB_OK;
}

/* room for one more frame's values */
static nb_status grow(nb_nxmx *w)
{
    if (w->n < w->cap) return NB_OK;
    long cap = w->cap ? 2 * w->cap : 64;
    double **d[3] = {&w->omega, &w->omega_end, &w->wavelength};
    int64_t **i[2] = {&w->frames, &w->noise_seeds};
    for (int k = 0; k < 3; k++) {
        void *q = realloc(*d[k], (size_t)cap * sizeof **d[k]);
        if (!q) return nb_error_set(NB_ERR_NOMEM, "out of memory");
        *d[k] = q;
    }
    for (int k = 0; k < 2; k++) {
        void *q = realloc(*i[k], (size_t)cap * sizeof **i[k]);
        if (!q) return nb_error_set(NB_ERR_NOMEM, "out of memory");
        *i[k] = q;
    }
    w->cap = cap;
    return NB_OK;
}

/* values laid out as the file's frame: panels of several widths move into
 * rows of the widest, -1 beside them */
static const void *stacked_frame(nb_nxmx *w, const nb_plan *p, const void *values)
{
    if (!w->stacked) return values;
    const size_t n = (size_t)w->width * w->rows, es = 4;
    if (!w->frame_buf && !(w->frame_buf = malloc(n * es))) return NULL;
    for (size_t j = 0; j < n; j++) {
        if (w->setup.kind == NB_NXMX_COUNTS) ((int32_t *)w->frame_buf)[j] = -1;
        else ((float *)w->frame_buf)[j] = -1.0f;
    }
    for (int i = 0; i < nb_plan_npanels(p); i++) {
        int f, s;
        size_t off;
        nb_plan_panel_dims(p, i, &f, &s, &off);
        size_t row0 = (size_t)nb_xds_stack_row(p, i);
        for (int y = 0; y < s; y++)
            memcpy((char *)w->frame_buf + ((row0 + (size_t)y) * (size_t)w->width) * es,
                   (const char *)values + (off + (size_t)y * (size_t)f) * es, (size_t)f * es);
    }
    return w->frame_buf;
}

/* The frame after the last in the data set: its chunk made here and stored
 * as it is (filter mask 0: the declared filter applied), or HDF5's */
static void write_frame(nb_nxmx *w, const void *frame)
{
    h5err *E = &w->E;
    hsize_t dims[3] = {(hsize_t)w->n + 1, (hsize_t)w->rows, (hsize_t)w->width}, start[3] = {(hsize_t)w->n, 0, 0};
    hsize_t count[3] = {1, dims[1], dims[2]};
    if (!h5_check(E, h5.H5Dset_extent(w->data, dims), "extending /entry/data/data")) return;
    if (w->bslz4) {
        const void *chunk;
        size_t len;
        if (nb_bslz4_encode(w->bslz4, frame, &chunk, &len)) {
            E->failed = 1;
            snprintf(E->msg, sizeof E->msg, "%s", nb_error_message());
        } else {
            h5_check(E, h5.H5Dwrite_chunk(w->data, H5P_DEFAULT, 0, start, len, chunk), "writing a frame");
        }
        return;
    }
    hid_t fsp = h5.H5Dget_space(w->data), msp = h5.H5Screate_simple(3, count, NULL);
    h5.H5Sselect_hyperslab(fsp, H5S_SELECT_SET, start, NULL, count, NULL);
    h5_check(E, h5.H5Dwrite(w->data, w->setup.kind == NB_NXMX_COUNTS ? T_INT32 : T_FLOAT, msp, fsp, H5P_DEFAULT, frame),
             "writing a frame");
    h5.H5Sclose(msp);
    h5.H5Sclose(fsp);
}

nb_status nb_nxmx_put(nb_nxmx *w, const nb_plan *p, const void *values, const nb_nxmx_frame *f)
{
    char *geom = geometry_text(p);
    int same = !strcmp(geom, w->geometry);
    free(geom);
    if (!same)
        return nb_error_set(NB_ERR_DATA, "'%s': frame %ld's plan has another detector, beam direction or spindle "
                                         "than the first frame's: one NXmx file holds one experiment",
                            w->final, f->frame + 1);
    nb_status st = grow(w);
    if (st) return st;
    const void *frame = stacked_frame(w, p, values);
    if (!frame) return nb_error_set(NB_ERR_NOMEM, "out of memory for an NXmx frame");
    h5err *E = &w->E;
    write_frame(w, frame);
    if (E->failed) return nb_error_set(NB_ERR_IO, "cannot write '%s': %s", w->final, E->msg);
    w->omega[w->n] = f->phi_start;
    w->omega_end[w->n] = f->phi_start + f->phi_range;
    w->wavelength[w->n] = f->wavelength * 1e10;
    w->frames[w->n] = f->frame;
    w->noise_seeds[w->n] = f->noise_seed;
    w->all_noise_seeds &= f->has_noise_seed;
    w->n++;
    return NB_OK;
}

/* the per-frame arrays: omega, the wavelength (one value unless it varies),
 * the stream's frame numbers and noise seeds */
static void put_frames(nb_nxmx *w)
{
    h5err *E = &w->E;
    int n = (int)w->n, varies = 0;
    put_axis(E, w->sample_tf, "omega", n, w->omega, "deg", "rotation", w->spindle_axis, ".");
    put_f64(E, w->sample_tf, "omega_end", n, w->omega_end, "deg", NULL);
    double inc = n ? w->omega_end[0] - w->omega[0] : 0.0;
    put_f64(E, w->sample_tf, "omega_increment_set", 0, &inc, "deg", NULL);
    for (int i = 1; i < n; i++) varies |= w->wavelength[i] != w->wavelength[0];
    put_f64(E, w->beam, "incident_wavelength", varies ? n : 0, w->wavelength, "angstrom", NULL);
    put_i64(E, w->note, "frame", n, w->frames);
    if (w->all_noise_seeds) put_i64(E, w->note, "noise_seed", n, w->noise_seeds);
}

static void release(nb_nxmx *w)
{
    hid_t *h[] = {&w->data, &w->sample_tf, &w->note, &w->beam};
    for (int k = 0; k < 4; k++) {
        if (*h[k] >= 0) {
            if (k == 0) h5.H5Dclose(*h[k]);
            else h5.H5Gclose(*h[k]);
        }
        *h[k] = -1;
    }
    if (w->file >= 0) h5_check(&w->E, h5.H5Fclose(w->file), "closing the file");
    w->file = -1;
}

static void free_writer(nb_nxmx *w)
{
    free(w->final), free(w->tmp), free(w->geometry), free(w->frame_buf);
    nb_bslz4_free(w->bslz4);
    free(w->omega), free(w->omega_end), free(w->wavelength), free(w->frames), free(w->noise_seeds);
    free(w);
}

nb_status nb_nxmx_close(nb_nxmx *w)
{
    if (!w) return NB_OK;
    put_frames(w);
    release(w);
    nb_status st = NB_OK;
    if (w->E.failed) st = nb_error_set(NB_ERR_IO, "cannot write '%s': %s", w->final, w->E.msg);
    else if (rename(w->tmp, w->final) != 0) st = nb_error_set(NB_ERR_IO, "cannot write '%s': %s", w->final, strerror(errno));
    if (st) unlink(w->tmp);
    nb_temp_unregister(w->tmp);
    free_writer(w);
    return st;
}

void nb_nxmx_abort(nb_nxmx *w)
{
    if (!w) return;
    release(w);
    if (w->tmp) {
        unlink(w->tmp);
        nb_temp_unregister(w->tmp);
    }
    free_writer(w);
}

/* ---- master files: the parts of shards joined ------------------------------- */

typedef struct part {
    const char *name;
    long n;                  /* frames */
    int64_t *frames;
    double *omega, *omega_end, *wavelength; /* n each (wavelength: its one value repeated) */
    double axis[3], stokes[4];
    char geometry[8192];
    hsize_t dims[3];
    int is_float, has_spectrum;
    double scaling;          /* /entry/data/data_scaling_factor (1 when absent) */
} part;

/* n values of a dataset of 0 or 1 dimensions (a scalar repeated n times) */
static double *read_f64(h5err *E, hid_t f, const char *name, long n, double *axis)
{
    hid_t d = E->failed ? -1 : h5.H5Dopen2(f, name, H5P_DEFAULT);
    if (!h5_check(E, d, name)) return NULL;
    hid_t sp = h5.H5Dget_space(d);
    hsize_t len = 1;
    if (h5.H5Sget_simple_extent_ndims(sp) == 1) h5.H5Sget_simple_extent_dims(sp, &len, NULL);
    h5.H5Sclose(sp);
    double *v = calloc((size_t)(n > (long)len ? n : (long)len) + 1, sizeof *v);
    if (v && len == 1 && n > 1) {
        h5_check(E, h5.H5Dread(d, T_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v), name);
        for (long i = 1; i < n; i++) v[i] = v[0];
    } else if (v && (long)len == n) {
        h5_check(E, h5.H5Dread(d, T_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v), name);
    } else if (!E->failed) {
        E->failed = 1;
        snprintf(E->msg, sizeof E->msg, "%s holds %llu values for %ld frames", name, (unsigned long long)len, n);
    }
    if (axis && !E->failed) {
        hid_t a = h5.H5Aopen(d, "vector", H5P_DEFAULT);
        if (h5_check(E, a, "omega's vector")) h5_check(E, h5.H5Aread(a, T_DOUBLE, axis), "omega's vector");
        if (a >= 0) h5.H5Aclose(a);
    }
    h5.H5Dclose(d);
    return v;
}

/* What the master needs of one part */
static void read_part(h5err *E, part *pt)
{
    hid_t f = h5.H5Fopen(pt->name, ACC_RDONLY, H5P_DEFAULT);
    if (!h5_check(E, f, "not an HDF5 file")) return;
    hid_t d = h5.H5Dopen2(f, "/entry/data/data", H5P_DEFAULT);
    if (h5_check(E, d, "no /entry/data/data (not an NXmx file of nb-convert)")) {
        hid_t sp = h5.H5Dget_space(d), t = h5.H5Dget_type(d);
        if (h5.H5Sget_simple_extent_ndims(sp) == 3) h5.H5Sget_simple_extent_dims(sp, pt->dims, NULL);
        pt->is_float = h5.H5Tget_class(t) == H5T_FLOAT;
        h5.H5Tclose(t), h5.H5Sclose(sp), h5.H5Dclose(d);
    }
    pt->n = (long)pt->dims[0];
    pt->scaling = 1.0;
    if (!E->failed && h5.H5Lexists(f, "/entry/data/data_scaling_factor", H5P_DEFAULT) > 0) {
        double *sc = read_f64(E, f, "/entry/data/data_scaling_factor", 1, NULL);
        if (sc) pt->scaling = sc[0];
        free(sc);
    }
    hid_t note = E->failed ? -1 : h5.H5Dopen2(f, "/entry/nb/frame", H5P_DEFAULT);
    if (h5_check(E, note, "no /entry/nb/frame (not an NXmx file of nb-convert)")) {
        pt->frames = calloc((size_t)pt->n + 1, sizeof *pt->frames);
        if (pt->frames) h5_check(E, h5.H5Dread(note, T_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, pt->frames), "frame");
        h5.H5Dclose(note);
    }
    pt->omega = read_f64(E, f, "/entry/sample/transformations/omega", pt->n, pt->axis);
    pt->omega_end = read_f64(E, f, "/entry/sample/transformations/omega_end", pt->n, NULL);
    pt->wavelength = read_f64(E, f, "/entry/instrument/beam/incident_wavelength", pt->n, NULL);
    double *st = read_f64(E, f, "/entry/instrument/beam/incident_polarisation_stokes", 4, NULL);
    if (st) memcpy(pt->stokes, st, sizeof pt->stokes);
    free(st);
    hid_t g = E->failed ? -1 : h5.H5Aopen_by_name(f, "/entry/nb", "geometry", H5P_DEFAULT, H5P_DEFAULT);
    if (h5_check(E, g, "no geometry of nb-convert")) {
        hid_t t = h5.H5Aget_type(g);
        if (h5.H5Tget_size(t) < sizeof pt->geometry) h5_check(E, h5.H5Aread(g, t, pt->geometry), "geometry");
        h5.H5Tclose(t), h5.H5Aclose(g);
    }
    pt->has_spectrum = !E->failed && h5.H5Lexists(f, "/entry/instrument/beam/incident_wavelength_spectrum", H5P_DEFAULT) > 0;
    h5.H5Fclose(f);
    if (!E->failed && (!pt->frames || !pt->omega || !pt->omega_end || !pt->wavelength)) {
        E->failed = 1;
        snprintf(E->msg, sizeof E->msg, "out of memory");
    }
}

static int by_first_frame(const void *a, const void *b)
{
    const part *p = a, *q = b;
    long x = p->n ? (long)p->frames[0] : -1, y = q->n ? (long)q->frames[0] : -1;
    return (x > y) - (x < y);
}

/* The parts read, sorted, and checked against each other */
static nb_status read_parts(part *pts, int nparts, long *total)
{
    h5err E = {0, ""};
    *total = 0;
    for (int k = 0; k < nparts; k++) {
        read_part(&E, &pts[k]);
        if (!E.failed && pts[k].n < 1) return nb_error_set(NB_ERR_DATA, "'%s' holds no frames", pts[k].name);
        if (E.failed) return nb_error_set(NB_ERR_DATA, "cannot read '%s': %s", pts[k].name, E.msg);
        *total += pts[k].n;
    }
    qsort(pts, (size_t)nparts, sizeof *pts, by_first_frame);
    for (int k = 1; k < nparts; k++) {
        const part *a = &pts[k - 1], *b = &pts[k];
        if (strcmp(a->geometry, b->geometry) || a->dims[1] != b->dims[1] || a->dims[2] != b->dims[2])
            return nb_error_set(NB_ERR_DATA, "'%s' and '%s' describe different detectors, beams or spindles: they "
                                             "are not parts of one experiment",
                                a->name, b->name);
        if (a->scaling != b->scaling)
            return nb_error_set(NB_ERR_DATA, "'%s' and '%s' hold counts of different gains (data_scaling_factor %g "
                                             "and %g)",
                                a->name, b->name, a->scaling, b->scaling);
        if (a->is_float != b->is_float)
            return nb_error_set(NB_ERR_DATA, "'%s' holds %s, '%s' %s", a->name, a->is_float ? "photons" : "counts",
                                b->name, b->is_float ? "photons" : "counts");
        if (a->frames[a->n - 1] >= b->frames[0])
            return nb_error_set(NB_ERR_DATA, "'%s' and '%s' overlap: both hold frame %lld", a->name, b->name,
                                (long long)b->frames[0] + 1);
    }
    return NB_OK;
}

/* The virtual /entry/data/data: each part's frames in turn */
static void master_data(h5err *E, hid_t entry, const part *pts, int nparts, long total)
{
    hid_t data = group(E, entry, "data", "NXdata");
    attr_str(E, data, "signal", "data");
    if (E->failed) return;
    hsize_t dims[3] = {(hsize_t)total, pts[0].dims[1], pts[0].dims[2]};
    hid_t vsp = h5.H5Screate_simple(3, dims, NULL), pl = plain_dcpl();
    hsize_t at = 0;
    for (int k = 0; k < nparts && !E->failed; k++) {
        hsize_t start[3] = {at, 0, 0}, count[3] = {pts[k].dims[0], dims[1], dims[2]};
        hid_t src = h5.H5Screate_simple(3, count, NULL);
        h5.H5Sselect_hyperslab(vsp, H5S_SELECT_SET, start, NULL, count, NULL);
        h5_check(E, h5.H5Pset_virtual(pl, vsp, pts[k].name, "/entry/data/data", src), "the virtual data set");
        h5.H5Sclose(src);
        at += pts[k].dims[0];
    }
    h5.H5Sclose(vsp);
    vsp = h5.H5Screate_simple(3, dims, NULL);
    hid_t t = pts[0].is_float ? *h5.H5T_IEEE_F32LE_g : *h5.H5T_STD_I32LE_g;
    hid_t d = E->failed ? -1 : h5.H5Dcreate2(data, "data", t, vsp, H5P_DEFAULT, pl, H5P_DEFAULT);
    if (h5_check(E, d, "the virtual data set")) attr_str(E, d, "units", pts[0].is_float ? "photons" : "counts");
    if (d >= 0) h5.H5Dclose(d);
    h5.H5Sclose(vsp), h5.H5Pclose(pl);
    if (!pts[0].is_float) put_scaling(E, data, pts[0].scaling);
    close_group(data);
}

/* The per-frame values of the parts, one after another */
static void master_frames(h5err *E, hid_t entry, const part *pts, int nparts, long total)
{
    double *om = calloc((size_t)total, sizeof *om), *oe = calloc((size_t)total, sizeof *oe);
    double *wl = calloc((size_t)total, sizeof *wl);
    int64_t *fr = calloc((size_t)total, sizeof *fr);
    int varies = 0;
    if (!om || !oe || !wl || !fr) {
        E->failed = 1;
        snprintf(E->msg, sizeof E->msg, "out of memory");
    }
    for (long k = 0, at = 0; !E->failed && k < nparts; at += pts[k].n, k++) {
        memcpy(om + at, pts[k].omega, (size_t)pts[k].n * sizeof *om);
        memcpy(oe + at, pts[k].omega_end, (size_t)pts[k].n * sizeof *oe);
        memcpy(wl + at, pts[k].wavelength, (size_t)pts[k].n * sizeof *wl);
        memcpy(fr + at, pts[k].frames, (size_t)pts[k].n * sizeof *fr);
    }
    for (long i = 1; !E->failed && i < total; i++) varies |= wl[i] != wl[0];
    hid_t sample = group(E, entry, "sample", "NXsample");
    put_str(E, sample, "name", "simulated crystal");
    put_str(E, sample, "depends_on", "/entry/sample/transformations/omega");
    hid_t tf = group(E, sample, "transformations", "NXtransformations");
    put_axis(E, tf, "omega", (int)total, om, "deg", "rotation", pts[0].axis, ".");
    put_f64(E, tf, "omega_end", (int)total, oe, "deg", NULL);
    double inc = om && oe ? oe[0] - om[0] : 0.0;
    put_f64(E, tf, "omega_increment_set", 0, &inc, "deg", NULL);
    close_group(tf), close_group(sample);
    hid_t ins = group(E, entry, "instrument", "NXinstrument");
    put_str(E, ins, "name", "nb-sim");
    /* the first part's detector copied, not linked: durin (XDS) finds an
     * NXdetector only through hard links; its data link is the master's frames */
    hid_t first = E->failed ? -1 : h5.H5Fopen(pts[0].name, ACC_RDONLY, H5P_DEFAULT);
    if (h5_check(E, first, pts[0].name)) {
        h5_check(E, h5.H5Ocopy(first, "/entry/instrument/detector", ins, "detector", H5P_DEFAULT, H5P_DEFAULT),
                 "the detector's copy");
        h5.H5Fclose(first);
    }
    hid_t beam = group(E, ins, "beam", "NXbeam");
    put_f64(E, beam, "incident_wavelength", varies ? (int)total : 0, wl, "angstrom", NULL);
    put_f64(E, beam, "incident_polarisation_stokes", 4, pts[0].stokes, NULL, NULL);
    if (pts[0].has_spectrum && !E->failed)
        h5_check(E, h5.H5Lcreate_external(pts[0].name, "/entry/instrument/beam/incident_wavelength_spectrum", beam,
                                          "incident_wavelength_spectrum", H5P_DEFAULT, H5P_DEFAULT), "the spectrum's link");
    close_group(beam), close_group(ins);
    hid_t note = group(E, entry, "nb", "NXnote");
    put_str(E, note, "program", "nb toolkit");
    put_str(E, note, "version", NB_VERSION);
    put_i64(E, note, "frame", (int)total, fr);
    attr_str(E, note, "geometry", pts[0].geometry);
    nb_strbuf sb;
    nb_strbuf_init(&sb);
    for (int k = 0; k < nparts; k++) nb_strbuf_printf(&sb, "%s\n", pts[k].name);
    put_str(E, note, "parts", sb.data ? sb.data : "");
    nb_strbuf_free(&sb);
    if (!E->failed) h5_check(E, h5.H5Lcreate_external(pts[0].name, "/entry/nb", note, "first_part", H5P_DEFAULT,
                                                      H5P_DEFAULT), "the first part's link");
    close_group(note);
    free(om), free(oe), free(wl), free(fr);
}

nb_status nb_nxmx_master(const char *path, const char *const *parts, int nparts)
{
    nb_status st = nb_nxmx_load();
    if (st) return nb_error_prefix(st, "cannot write '%s'", path);
    if (nparts < 1) return nb_error_set(NB_ERR_USAGE, "'%s': no parts to join", path);
    part *pts = calloc((size_t)nparts, sizeof *pts);
    if (!pts) return nb_error_set(NB_ERR_NOMEM, "out of memory");
    for (int k = 0; k < nparts; k++) pts[k].name = parts[k];
    long total = 0;
    st = read_parts(pts, nparts, &total);
    nb_nxmx *w = NULL;
    if (!st) {
        if (!(w = calloc(1, sizeof *w))) st = nb_error_set(NB_ERR_NOMEM, "out of memory");
        else {
            w->final = nb_xstrdup(path);
            w->file = w->data = w->sample_tf = w->note = w->beam = -1;
            st = create_file(w, path);
        }
    }
    if (!st) {
        h5err *E = &w->E;
        hid_t entry = nxmx_entry(E, w->file);
        if (!E->failed) h5_check(E, h5.H5Lcreate_external(pts[0].name, "/entry/source", entry, "source", H5P_DEFAULT,
                                                          H5P_DEFAULT), "the source's link");
        master_data(E, entry, pts, nparts, total);
        master_frames(E, entry, pts, nparts, total);
        close_group(entry);
        release(w);
        if (E->failed) st = nb_error_set(NB_ERR_IO, "cannot write '%s': %s", path, E->msg);
        else if (rename(w->tmp, w->final) != 0) st = nb_error_set(NB_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
        if (st) unlink(w->tmp);
        nb_temp_unregister(w->tmp);
        free_writer(w);
    } else if (w) {
        nb_nxmx_abort(w);
    }
    for (int k = 0; k < nparts; k++) {
        free(pts[k].frames), free(pts[k].omega), free(pts[k].omega_end), free(pts[k].wavelength);
    }
    free(pts);
    return st;
}

#endif /* NB_HAVE_HDF5 */
