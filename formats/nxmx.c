/* nxmx.c - the NXmx writer: every frame of a stream in one NeXus/NXmx HDF5
 * file, its metadata (beam, detector and its modules, sample, provenance)
 * from the PLAN, the frames as chunks (bitshuffle+LZ4 made here, bslz4.h).
 * libhdf5 is loaded at run time (nxmx_h5.c) so that the tools start without
 * it; the master of shards' files is nxmx_master.c.  Layout and
 * conventions: nxmx.h and docs/architecture.md 5. */
#include "nxmx.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frame_write.h"
#include "image_meta.h"
#include "nb_tuning.h"
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

#else /* NB_HAVE_HDF5 */

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
#include "nxmx_h5.h"

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
    nb_strbuf_printf(&sb, "beam %.17g %.17g %.17g spindle %.17g %.17g %.17g polar %.17g %.17g %.17g %.17g\n",
                     p->beam[0], p->beam[1], p->beam[2], p->spindle[0], p->spindle[1], p->spindle[2],
                     p->polar_vector[0], p->polar_vector[1], p->polar_vector[2], nb_polarization_fraction(p));
    for (int i = 0; i < nb_plan_npanels(p); i++) {
        nb_plan v;
        nb_plan_panel_view(p, i, &v);
        nb_plan_panel_dims(p, i, NULL, NULL, NULL);
        nb_strbuf_printf(&sb,
                         "panel %d %d x %d pixel %.17g f %.17g %.17g %.17g s %.17g %.17g %.17g o %.17g %.17g %.17g\n",
                         i, v.panels[0].fpixels, v.panels[0].spixels, v.panels[0].pixel_size, v.panels[0].fdet[0],
                         v.panels[0].fdet[1], v.panels[0].fdet[2], v.panels[0].sdet[0], v.panels[0].sdet[1],
                         v.panels[0].sdet[2], v.panels[0].pix0[0], v.panels[0].pix0[1], v.panels[0].pix0[2]);
    }
    return nb_strbuf_take(&sb);
}

/* ---- the metadata ----------------------------------------------------------- */

/* The beam: the plan's wavelength (per frame when it varies: written at
 * close), polarization as a Stokes vector in the McStas frame, and the
 * spectrum of several sources: each wavelength with the fraction of the
 * sources at it (every source counts alike in the simulation). */
static void put_beam(nb_h5err *E, hid_t instrument, const nb_plan *p, const double R[3][3], hid_t *beam_out)
{
    hid_t beam = nb_h5_group(E, instrument, "beam", "NXbeam");
    double e[3], frac = nb_polarization_fraction(p);
    mcstas(R, p->polar_vector, 1.0, e);
    double psi = atan2(e[1], e[0]), deg = 2 * frac - 1;
    double stokes[4] = {1.0, deg * cos(2 * psi), deg * sin(2 * psi), 0.0};
    nb_h5_put_f64(E, beam, "incident_polarisation_stokes", 4, stokes, NULL, NULL);
    if (p->flux > 0) nb_h5_put_f64(E, beam, "total_flux", 0, &p->flux, "Hz", NULL);
    if (p->beamsize > 0) {
        double size[2] = {p->beamsize * 1e3, p->beamsize * 1e3};
        nb_h5_put_f64(E, beam, "incident_beam_size", 2, size, "mm", NULL);
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
        hid_t sp = nb_h5_group(E, beam, "incident_wavelength_spectrum", "NXdata");
        nb_h5_attr_str(E, sp, "signal", "weight");
        nb_h5_attr_str(E, sp, "axes", "wavelength");
        nb_h5_put_f64(E, sp, "wavelength", m, wl, "angstrom", NULL);
        nb_h5_put_f64(E, sp, "weight", m, wt, NULL, NULL);
        nb_h5_close_group(sp);
    }
    free(wl);
    free(wt);
    *beam_out = beam;
}

void nb_nxmx_module_name(int i, int n, char *out, size_t size)
{
    char num[16], top[16];
    const int len = snprintf(num, sizeof num, "%d", i), width = snprintf(top, sizeof top, "%d", n - 1);
    snprintf(out, size, "module_%.*s%s", width > len ? width - len : 0, "0000000000", num);
}

/* Panel i as an NXdetector_module: its rows of the stacked frame, its
 * origin (module_offset: PIX0 in the McStas frame, mm) and pixel directions
 * (translations of one pixel along the fast and slow axes, depending on it) */
static void put_module(nb_h5err *E, hid_t det, const nb_plan *p, int i, const double R[3][3])
{
    char name[32], path[128], off_path[160];
    nb_plan v;
    nb_plan_panel_view(p, i, &v);
    nb_plan_panel_dims(p, i, NULL, NULL, NULL);
    nb_nxmx_module_name(i, p->npanels, name, sizeof name);
    snprintf(path, sizeof path, "/entry/instrument/detector/%s", name);
    snprintf(off_path, sizeof off_path, "%s/module_offset", path);
    hid_t mod = nb_h5_group(E, det, name, "NXdetector_module");
    int64_t origin[2] = {nb_xds_stack_row(p, i), 0}, size[2] = {v.panels[0].spixels, v.panels[0].fpixels};
    nb_h5_put_i64(E, mod, "data_origin", 2, origin);
    nb_h5_put_i64(E, mod, "data_size", 2, size);
    double o[3], f[3], s[3];
    mcstas(R, v.panels[0].pix0, 1e3, o);
    mcstas(R, v.panels[0].fdet, 1.0, f);
    mcstas(R, v.panels[0].sdet, 1.0, s);
    double len = sqrt(dot3(o, o)), px = v.panels[0].pixel_size * 1e3;
    double dir[3] = {0, 0, 1};
    if (len > 0)
        for (int k = 0; k < 3; k++) dir[k] = o[k] / len;
    nb_h5_put_axis(E, mod, "module_offset", 0, &len, "mm", "translation", dir, ".");
    nb_h5_put_axis(E, mod, "fast_pixel_direction", 0, &px, "mm", "translation", f, off_path);
    nb_h5_put_axis(E, mod, "slow_pixel_direction", 0, &px, "mm", "translation", s, off_path);
    nb_h5_close_group(mod);
}

/* The pixel mask over the stacked frame: NeXus's bit 0 (gap) right of a
 * narrower panel, bit 1 (dead) where the plan's mask skips a pixel */
static void put_pixel_mask(nb_h5err *E, hid_t det, const nb_plan *p)
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
                else if (v.panels[0].mask && !v.panels[0].mask[(size_t)y * f + x]) *m = 2;
            }
    }
    hsize_t dims[2] = {(hsize_t)rows, (hsize_t)width};
    hid_t sp = nb_h5.H5Screate_simple(2, dims, NULL), pl = nb_h5_plain_dcpl();
    nb_h5.H5Pset_chunk(pl, 2, dims);
    nb_h5.H5Pset_deflate(pl, 6);
    hid_t d =
        E->failed ? -1 : nb_h5.H5Dcreate2(det, "pixel_mask", *nb_h5.H5T_STD_U32LE_g, sp, H5P_DEFAULT, pl, H5P_DEFAULT);
    if (nb_h5_check(E, d, "pixel_mask"))
        nb_h5_check(E, nb_h5.H5Dwrite(d, T_UINT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, mask), "pixel_mask");
    if (d >= 0) nb_h5.H5Dclose(d);
    nb_h5.H5Pclose(pl);
    nb_h5.H5Sclose(sp);
    free(mask);
}

static void put_detector(nb_h5err *E, hid_t instrument, const nb_plan *p, const nb_nxmx_setup *s, const double R[3][3])
{
    hid_t det = nb_h5_group(E, instrument, "detector", "NXdetector");
    nb_stated_sensor sensor;
    nb_stated_sensor_of(p, &sensor);
    nb_h5_put_str(E, det, "description", sensor.simulated ? "nb-sim simulated pixel-array detector"
                                                    : "nb-sim simulated pixel-array detector; no absorption was "
                                                      "simulated: the sensor is stated as one that absorbs every "
                                                      "photon (mu t = 10), so that a reader's efficiency "
                                                      "correction is 1");
    nb_h5_put_str(E, det, "type", "pixel");
    nb_h5_put_str(E, det, "sensor_material", nb_material_name(sensor.material));
    double thick = sensor.thickness * 1e3;
    nb_h5_put_f64(E, det, "sensor_thickness", 0, &thick, "mm", NULL);
    double t = p->exposure > 0 ? p->exposure : 1.0;
    nb_h5_put_f64(E, det, "count_time", 0, &t, "s", NULL);
    nb_h5_put_f64(E, det, "frame_time", 0, &t, "s", NULL);
    double dist = p->distance * 1e3, bx = p->Fbeam / p->panels[0].pixel_size, by = p->Sbeam / p->panels[0].pixel_size;
    nb_h5_put_f64(E, det, "distance", 0, &dist, "mm", NULL);
    /* panel 0's direct-beam spot, pixels from the outer corner of the first pixel (docs/physics.md 2.6) */
    nb_h5_put_f64(E, det, "beam_center_x", 0, &bx, "pixel", NULL);
    nb_h5_put_f64(E, det, "beam_center_y", 0, &by, "pixel", NULL);
    double pxs = p->panels[0].pixel_size * 1e3;
    nb_h5_put_f64(E, det, "x_pixel_size", 0, &pxs, "mm", NULL);
    nb_h5_put_f64(E, det, "y_pixel_size", 0, &pxs, "mm", NULL);
    if (s->kind == NB_NXMX_COUNTS) {
        /* dxtbx trusts counts above underload - 1 and up to the saturation */
        int64_t under = 0, sat = (int64_t)s->saturation;
        nb_h5_put_i64(E, det, "underload_value", 0, &under);
        nb_h5_put_i64(E, det, "saturation_value", 0, &sat);
    }
    int64_t applied = 0;
    nb_h5_put_i64(E, det, "pixel_mask_applied", 0, &applied);
    put_pixel_mask(E, det, p);
    /* the frames, as NeXus links a detector's data: XDS's durin plugin takes
     * an NXdetector's data before the last NXdata it meets, which is the
     * beam's incident_wavelength_spectrum when there is one.  Soft, so that a
     * master's copy of this group points to the master's frames */
    if (!E->failed)
        nb_h5_check(E, nb_h5.H5Lcreate_soft("/entry/data/data", det, "data", H5P_DEFAULT, H5P_DEFAULT), "data");
    for (int i = 0; i < nb_plan_npanels(p); i++) put_module(E, det, p, i, R);
    nb_h5_close_group(det);
}

/* the simulation's provenance; the per-frame arrays follow at close */
static hid_t put_note(nb_h5err *E, hid_t entry, const nb_plan *p)
{
    hid_t note = nb_h5_group(E, entry, "nb", "NXnote");
    nb_h5_put_str(E, note, "program", "nb toolkit");
    nb_h5_put_str(E, note, "version", NB_VERSION);
    nb_h5_put_str(E, note, "command_line", p->command_line ? p->command_line : "");
    nb_h5_put_str(E, note, "description", "simulated by the nb toolkit (nanoBragg as Unix tools); seeds as the PLAN "
                                    "stores them (negated, as nanoBragg keeps them)");
    int64_t seeds[3] = {p->seed, p->mosaic_seed, p->misset_seed};
    nb_h5_put_i64(E, note, "seed", 0, &seeds[0]);
    nb_h5_put_i64(E, note, "mosaic_seed", 0, &seeds[1]);
    nb_h5_put_i64(E, note, "misset_seed", 0, &seeds[2]);
    char *geom = geometry_text(p);
    nb_h5_attr_str(E, note, "geometry", geom);
    free(geom);
    return note;
}

/* ---- the writer --------------------------------------------------------------- */

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
    nb_status st = nb_h5.H5Dwrite_chunk ? nb_bslz4_new(&w->bslz4, (size_t)w->rows * w->width, threads)
                                     : nb_error_set(NB_ERR_UNSUPPORTED, "libhdf5 has no H5Dwrite_chunk (1.10.3)");
    if (st) nb_info("'%s': bitshuffle+LZ4 by HDF5's filter plugin, on one thread: %s", w->final, nb_error_message());
    else nb_info("'%s': bitshuffle+LZ4 chunks made on %d threads (%s bit shuffle)", w->final,
                 nb_bslz4_threads(w->bslz4), nb_bitshuffle4_path());
}

/* The counts' photons per ADU (1/gain): NXmx's data_scaling_factor, and
 * data_scale_factor, the spelling DIALS's nxmx reader takes it by (dxtbx
 * 3.23 and later: the panels' gain is its inverse) */
void nb_nxmx_put_scaling(nb_h5err *E, hid_t data, double factor)
{
    nb_h5_put_f64(E, data, "data_scaling_factor", 0, &factor, NULL, NULL);
    nb_h5_put_f64(E, data, "data_scale_factor", 0, &factor, NULL, NULL);
}

/* The data set: frames x rows x width, unlimited frames, one frame per chunk */
static void create_data(nb_nxmx *w, hid_t entry)
{
    nb_h5err *E = &w->E;
    hid_t data = nb_h5_group(E, entry, "data", "NXdata");
    nb_h5_attr_str(E, data, "signal", "data");
    if (E->failed) return;
    hsize_t dims[3] = {0, (hsize_t)w->rows, (hsize_t)w->width}, max[3] = {H5S_UNLIMITED, dims[1], dims[2]};
    hsize_t chunk[3] = {1, dims[1], dims[2]};
    hid_t sp = nb_h5.H5Screate_simple(3, dims, max), pl = nb_h5_plain_dcpl();
    nb_h5.H5Pset_chunk(pl, 3, chunk);
    int c = w->setup.compression;
    if (c == NB_NXMX_AUTO) c = nb_h5.H5Zfilter_avail(BSHUF_FILTER) > 0 ? NB_NXMX_BSLZ4 : NB_NXMX_GZIP;
    if (c == NB_NXMX_BSLZ4) {
        const unsigned opts[2] = {0, 2}; /* default block, LZ4 */
        if (nb_h5.H5Zfilter_avail(BSHUF_FILTER) <= 0) {
            E->failed = 1;
            snprintf(E->msg, sizeof E->msg, "the bitshuffle filter (HDF5 filter 32008) is not installed (Debian: "
                                            "bitshuffle, hdf5-filter-plugin)");
        } else {
            nb_h5_check(E, nb_h5.H5Pset_filter(pl, BSHUF_FILTER, H5Z_FLAG_MANDATORY, 2, opts), "the bitshuffle filter");
            if (!E->failed) own_chunks(w);
        }
    } else if (c == NB_NXMX_GZIP) {
        /* byte shuffle and the fastest deflate: most of a simulated frame is 0 */
        nb_h5.H5Pset_shuffle(pl);
        nb_h5.H5Pset_deflate(pl, 1);
    }
    hid_t ftype = w->setup.kind == NB_NXMX_COUNTS ? *nb_h5.H5T_STD_I32LE_g : *nb_h5.H5T_IEEE_F32LE_g;
    w->data = E->failed ? -1 : nb_h5.H5Dcreate2(data, "data", ftype, sp, H5P_DEFAULT, pl, H5P_DEFAULT);
    nb_h5_check(E, w->data, "/entry/data/data");
    nb_h5_attr_str(E, w->data, "units", w->setup.kind == NB_NXMX_COUNTS ? "counts" : "photons");
    nb_h5.H5Pclose(pl);
    nb_h5.H5Sclose(sp);
    if (w->setup.kind == NB_NXMX_COUNTS) nb_nxmx_put_scaling(E, data, 1.0 / (w->setup.gain > 0 ? w->setup.gain : 1.0));
    nb_h5_close_group(data);
}

static void put_sample(nb_nxmx *w, hid_t entry, const nb_plan *p)
{
    nb_h5err *E = &w->E;
    hid_t sample = nb_h5_group(E, entry, "sample", "NXsample");
    nb_h5_put_str(E, sample, "name", "simulated crystal");
    nb_h5_put_str(E, sample, "depends_on", "/entry/sample/transformations/omega");
    double cell[6];
    memcpy(cell, p->unit_cell, sizeof cell);
    nb_h5_put_f64(E, sample, "unit_cell", 6, cell, NULL, NULL);
    w->sample_tf = nb_h5_group(E, sample, "transformations", "NXtransformations");
    nb_h5_close_group(sample);
}

/* The file under a temporary name in the final one's directory */
/* The file's NXentry (an NXmx entry, the file's default), its data the
 * entry's default: a writer's file and a master alike */
hid_t nb_nxmx_entry(nb_h5err *E, hid_t file)
{
    nb_h5_attr_str(E, file, "default", "entry");
    nb_h5_attr_str(E, file, "creator", "nb toolkit " NB_VERSION);
    hid_t entry = nb_h5_group(E, file, "entry", "NXentry");
    nb_h5_attr_str(E, entry, "default", "data");
    nb_h5_put_str(E, entry, "definition", "NXmx");
    /* NXmx requires a start time: a simulation's is when its file was made */
    char when[32];
    time_t now = time(NULL);
    struct tm utc;
    if (gmtime_r(&now, &utc) && strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &utc))
        nb_h5_put_str(E, entry, "start_time", when);
    return entry;
}

nb_status nb_nxmx_create_file(nb_nxmx *w, const char *path)
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
    w->file = nb_h5.H5Fcreate(w->tmp, ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    nb_h5_check(&w->E, w->file, "cannot create the file");
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
        double d = dot3(v.panels[0].fdet, v.panels[0].sdet);
        if (fabs(d) > 1e-7)
            nb_warn("'%s': panel %d's fast and slow axes are not perpendicular (cosine %.3g): written as they are, "
                    "but dxtbx refuses such a panel in a detector of several modules",
                    path, i, d);
    }
    if ((st = nb_nxmx_create_file(w, path))) {
        nb_nxmx_abort(w);
        return st;
    }
    nb_h5err *E = &w->E;
    hid_t entry = nb_nxmx_entry(E, w->file);
    hid_t source = nb_h5_group(E, entry, "source", "NXsource");
    nb_h5_put_str(E, source, "name", "nb toolkit simulation (nanoBragg)");
    nb_h5_put_str(E, source, "type", "Synchrotron X-ray Source");
    nb_h5_close_group(source);
    hid_t instrument = nb_h5_group(E, entry, "instrument", "NXinstrument");
    nb_h5_put_str(E, instrument, "name", "nb-sim");
    put_beam(E, instrument, p, R, &w->beam);
    put_detector(E, instrument, p, s, R);
    nb_h5_close_group(instrument);
    put_sample(w, entry, p);
    w->note = put_note(E, entry, p);
    create_data(w, entry);
    nb_h5_close_group(entry);
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
    nb_h5err *E = &w->E;
    hsize_t dims[3] = {(hsize_t)w->n + 1, (hsize_t)w->rows, (hsize_t)w->width}, start[3] = {(hsize_t)w->n, 0, 0};
    hsize_t count[3] = {1, dims[1], dims[2]};
    if (!nb_h5_check(E, nb_h5.H5Dset_extent(w->data, dims), "extending /entry/data/data")) return;
    if (w->bslz4) {
        const void *chunk;
        size_t len;
        if (nb_bslz4_encode(w->bslz4, frame, &chunk, &len)) {
            E->failed = 1;
            snprintf(E->msg, sizeof E->msg, "%s", nb_error_message());
        } else {
            nb_h5_check(E, nb_h5.H5Dwrite_chunk(w->data, H5P_DEFAULT, 0, start, len, chunk), "writing a frame");
        }
        return;
    }
    hid_t fsp = nb_h5.H5Dget_space(w->data), msp = nb_h5.H5Screate_simple(3, count, NULL);
    nb_h5.H5Sselect_hyperslab(fsp, H5S_SELECT_SET, start, NULL, count, NULL);
    nb_h5_check(
        E, nb_h5.H5Dwrite(w->data, w->setup.kind == NB_NXMX_COUNTS ? T_INT32 : T_FLOAT, msp, fsp, H5P_DEFAULT, frame),
        "writing a frame");
    nb_h5.H5Sclose(msp);
    nb_h5.H5Sclose(fsp);
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
    nb_h5err *E = &w->E;
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
    nb_h5err *E = &w->E;
    int n = (int)w->n, varies = 0;
    nb_h5_put_axis(E, w->sample_tf, "omega", n, w->omega, "deg", "rotation", w->spindle_axis, ".");
    nb_h5_put_f64(E, w->sample_tf, "omega_end", n, w->omega_end, "deg", NULL);
    double inc = n ? w->omega_end[0] - w->omega[0] : 0.0;
    nb_h5_put_f64(E, w->sample_tf, "omega_increment_set", 0, &inc, "deg", NULL);
    for (int i = 1; i < n; i++) varies |= w->wavelength[i] != w->wavelength[0];
    nb_h5_put_f64(E, w->beam, "incident_wavelength", varies ? n : 0, w->wavelength, "angstrom", NULL);
    nb_h5_put_i64(E, w->note, "frame", n, w->frames);
    if (w->all_noise_seeds) nb_h5_put_i64(E, w->note, "noise_seed", n, w->noise_seeds);
}

void nb_nxmx_release(nb_nxmx *w)
{
    hid_t *h[] = {&w->data, &w->sample_tf, &w->note, &w->beam};
    for (int k = 0; k < 4; k++) {
        if (*h[k] >= 0) {
            if (k == 0) nb_h5.H5Dclose(*h[k]);
            else nb_h5.H5Gclose(*h[k]);
        }
        *h[k] = -1;
    }
    if (w->file >= 0) nb_h5_check(&w->E, nb_h5.H5Fclose(w->file), "closing the file");
    w->file = -1;
}

void nb_nxmx_free_writer(nb_nxmx *w)
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
    nb_nxmx_release(w);
    nb_status st = NB_OK;
    if (w->E.failed) st = nb_error_set(NB_ERR_IO, "cannot write '%s': %s", w->final, w->E.msg);
    else if (rename(w->tmp, w->final) != 0)
        st = nb_error_set(NB_ERR_IO, "cannot write '%s': %s", w->final, strerror(errno));
    if (st) unlink(w->tmp);
    nb_temp_unregister(w->tmp);
    nb_nxmx_free_writer(w);
    return st;
}

void nb_nxmx_abort(nb_nxmx *w)
{
    if (!w) return;
    nb_nxmx_release(w);
    if (w->tmp) {
        unlink(w->tmp);
        nb_temp_unregister(w->tmp);
    }
    nb_nxmx_free_writer(w);
}

#endif /* NB_HAVE_HDF5 */

/* ---- the registry's run writer (with libhdf5 or without) ----------------------- */

/* A run's NXmx file and the frame's counts, kept from frame to frame (fresh
 * pages cost more than the copy) */
typedef struct nxmx_run {
    nb_nxmx *file;
    int32_t *buf;
    size_t cap;
} nxmx_run;

/* The frame's counts as an NXmx file holds them (every panel, one after
 * another): as a CBF's, from 0 (nb_counts_from_zero: dxtbx's NXmx reader has
 * no pedestal either), the stream's counts or else the int image;
 * *saturation the counter's top less the offset. */
static nb_status nxmx_counts(nxmx_run *r, const nb_frame *fr, const char *path, double *saturation)
{
    const nb_plan *p = fr->plan;
    const size_t total = nb_plan_total_pixels(p);
    nb_status st = NB_OK;
    if (r->cap < total) {
        free(r->buf);
        r->buf = NULL, r->cap = 0;
        if (!(st = nb_alloc_large((void **)&r->buf, total, sizeof *r->buf, "the NXmx frame"))) r->cap = total;
    }
    double adc = fr->counts ? fr->counts_adc : fr->adc;
    *saturation = (fr->counts && fr->counts_bits == 32 ? 2147483647.0 : 65535.0) - lrint(adc);
    for (int i = 0; i < nb_plan_npanels(p) && !st; i++) {
        nb_plan view;
        nb_frame pf;
        int32_t *ints = NULL;
        size_t off, n;
        nb_frame_panel(fr, i, &view, &pf);
        nb_plan_panel_dims(p, i, NULL, NULL, &off);
        n = (size_t)pf.width * pf.height;
        if (!fr->counts) st = nb_frame_int_counts(&pf, &ints);
        if (!st) nb_counts_from_zero(fr->counts ? pf.counts : ints, n, adc, path, r->buf + off);
        free(ints);
    }
    return st;
}

static void nxmx_run_abort(void *file)
{
    nxmx_run *r = file;
    if (!r) return;
    nb_nxmx_abort(r->file);
    free(r->buf);
    free(r);
}

static nb_status nxmx_run_commit(void *file)
{
    nxmx_run *r = file;
    nb_status st = nb_nxmx_close(r->file);
    free(r->buf);
    free(r);
    return st;
}

/* Frame fr into the file, opened by the first frame: int32 counts from 0,
 * or float32 photons (o->photons) */
static nb_status nxmx_run_frame(void **file, const char *path, const nb_frame *fr, const nb_write_opts *o)
{
    nxmx_run *r = *file;
    if (!r && !(r = *file = calloc(1, sizeof *r))) return nb_error_set(NB_ERR_NOMEM, "out of memory");
    nb_nxmx_setup setup = {o->photons ? NB_NXMX_PHOTONS : NB_NXMX_COUNTS, o->compression, 0.0,
                           fr->counts && fr->im->has.counts_gain ? fr->im->counts_gain : 1.0};
    nb_status st = o->photons ? NB_OK : nxmx_counts(r, fr, path, &setup.saturation);
    if (!st && !r->file) {
        nb_info("writing %s (NXmx, %s)", path, o->photons ? "float32 photons" : "int32 counts from 0");
        nb_warn_sensor_mu(path, fr->plan);
        if (!o->photons && !fr->counts) nb_info("intfile_scale = %g", fr->int_scale);
        st = nb_nxmx_open(&r->file, path, fr->plan, &setup);
    }
    if (!st) {
        nb_image_meta m;
        nb_frame_meta(fr, &m);
        nb_nxmx_frame f = {fr->frame, m.osc_start, m.osc_range, m.wavelength, fr->im->has.noise_seed,
                           fr->im->noise_seed};
        st = nb_nxmx_put(r->file, fr->plan, o->photons ? (const void *)fr->photons : (const void *)r->buf, &f);
    }
    return st;
}

/* shards' files as one master of virtual data sets over theirs */
static nb_status nxmx_run_join(const char *path, const char *const *parts, int nparts, const nb_joined_images *images)
{
    (void)images;
    return nb_nxmx_master(path, parts, nparts);
}

const nb_run_writer nb_nxmx_run_writer = {nxmx_run_frame, NULL,         nxmx_run_commit, nxmx_run_abort,
                                          nxmx_run_join,  "NXmx master", "NXmx parts",    "MASTER.nxs"};
