/* nxmx_master.c - the NXmx master of shards' files (nb-convert --join): a
 * virtual data set over the parts' frames in the order of their first
 * frames, their omega and frame numbers, the detector copied from the first
 * part (XDS's durin follows no external link to find it) and its spectrum
 * and source linked; parts that overlap or describe another detector are
 * refused (nxmx.h). */
#include "nxmx.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_util.h"

#ifndef NB_HAVE_HDF5

nb_status nb_nxmx_master(const char *path, const char *const *parts, int nparts)
{
    (void)parts, (void)nparts;
    return nb_error_prefix(nb_nxmx_load(), "cannot write '%s'", path);
}

#else /* NB_HAVE_HDF5 */

#include <unistd.h>

#include "nxmx_h5.h"

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
static double *read_f64(nb_h5err *E, hid_t f, const char *name, long n, double *axis)
{
    hid_t d = E->failed ? -1 : nb_h5.H5Dopen2(f, name, H5P_DEFAULT);
    if (!nb_h5_check(E, d, name)) return NULL;
    hid_t sp = nb_h5.H5Dget_space(d);
    hsize_t len = 1;
    if (nb_h5.H5Sget_simple_extent_ndims(sp) == 1) nb_h5.H5Sget_simple_extent_dims(sp, &len, NULL);
    nb_h5.H5Sclose(sp);
    double *v = calloc((size_t)(n > (long)len ? n : (long)len) + 1, sizeof *v);
    if (v && len == 1 && n > 1) {
        nb_h5_check(E, nb_h5.H5Dread(d, T_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v), name);
        for (long i = 1; i < n; i++) v[i] = v[0];
    } else if (v && (long)len == n) {
        nb_h5_check(E, nb_h5.H5Dread(d, T_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v), name);
    } else if (!E->failed) {
        E->failed = 1;
        snprintf(E->msg, sizeof E->msg, "%s holds %llu values for %ld frames", name, (unsigned long long)len, n);
    }
    if (axis && !E->failed) {
        hid_t a = nb_h5.H5Aopen(d, "vector", H5P_DEFAULT);
        if (nb_h5_check(E, a, "omega's vector")) nb_h5_check(E, nb_h5.H5Aread(a, T_DOUBLE, axis), "omega's vector");
        if (a >= 0) nb_h5.H5Aclose(a);
    }
    nb_h5.H5Dclose(d);
    return v;
}

/* What the master needs of one part */
static void read_part(nb_h5err *E, part *pt)
{
    hid_t f = nb_h5.H5Fopen(pt->name, ACC_RDONLY, H5P_DEFAULT);
    if (!nb_h5_check(E, f, "not an HDF5 file")) return;
    hid_t d = nb_h5.H5Dopen2(f, "/entry/data/data", H5P_DEFAULT);
    if (nb_h5_check(E, d, "no /entry/data/data (not an NXmx file of nb-convert)")) {
        hid_t sp = nb_h5.H5Dget_space(d), t = nb_h5.H5Dget_type(d);
        if (nb_h5.H5Sget_simple_extent_ndims(sp) == 3) nb_h5.H5Sget_simple_extent_dims(sp, pt->dims, NULL);
        pt->is_float = nb_h5.H5Tget_class(t) == H5T_FLOAT;
        nb_h5.H5Tclose(t), nb_h5.H5Sclose(sp), nb_h5.H5Dclose(d);
    }
    pt->n = (long)pt->dims[0];
    pt->scaling = 1.0;
    if (!E->failed && nb_h5.H5Lexists(f, "/entry/data/data_scaling_factor", H5P_DEFAULT) > 0) {
        double *sc = read_f64(E, f, "/entry/data/data_scaling_factor", 1, NULL);
        if (sc) pt->scaling = sc[0];
        free(sc);
    }
    hid_t note = E->failed ? -1 : nb_h5.H5Dopen2(f, "/entry/nb/frame", H5P_DEFAULT);
    if (nb_h5_check(E, note, "no /entry/nb/frame (not an NXmx file of nb-convert)")) {
        pt->frames = calloc((size_t)pt->n + 1, sizeof *pt->frames);
        if (pt->frames) nb_h5_check(E, nb_h5.H5Dread(note, T_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, pt->frames), "frame");
        nb_h5.H5Dclose(note);
    }
    pt->omega = read_f64(E, f, "/entry/sample/transformations/omega", pt->n, pt->axis);
    pt->omega_end = read_f64(E, f, "/entry/sample/transformations/omega_end", pt->n, NULL);
    pt->wavelength = read_f64(E, f, "/entry/instrument/beam/incident_wavelength", pt->n, NULL);
    double *st = read_f64(E, f, "/entry/instrument/beam/incident_polarisation_stokes", 4, NULL);
    if (st) memcpy(pt->stokes, st, sizeof pt->stokes);
    free(st);
    hid_t g = E->failed ? -1 : nb_h5.H5Aopen_by_name(f, "/entry/nb", "geometry", H5P_DEFAULT, H5P_DEFAULT);
    if (nb_h5_check(E, g, "no geometry of nb-convert")) {
        hid_t t = nb_h5.H5Aget_type(g);
        if (nb_h5.H5Tget_size(t) < sizeof pt->geometry) nb_h5_check(E, nb_h5.H5Aread(g, t, pt->geometry), "geometry");
        nb_h5.H5Tclose(t), nb_h5.H5Aclose(g);
    }
    pt->has_spectrum = !E->failed && nb_h5.H5Lexists(f, "/entry/instrument/beam/incident_wavelength_spectrum", H5P_DEFAULT) > 0;
    nb_h5.H5Fclose(f);
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
    nb_h5err E = {0, ""};
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
static void master_data(nb_h5err *E, hid_t entry, const part *pts, int nparts, long total)
{
    hid_t data = nb_h5_group(E, entry, "data", "NXdata");
    nb_h5_attr_str(E, data, "signal", "data");
    if (E->failed) return;
    hsize_t dims[3] = {(hsize_t)total, pts[0].dims[1], pts[0].dims[2]};
    hid_t vsp = nb_h5.H5Screate_simple(3, dims, NULL), pl = nb_h5_plain_dcpl();
    hsize_t at = 0;
    for (int k = 0; k < nparts && !E->failed; k++) {
        hsize_t start[3] = {at, 0, 0}, count[3] = {pts[k].dims[0], dims[1], dims[2]};
        hid_t src = nb_h5.H5Screate_simple(3, count, NULL);
        nb_h5.H5Sselect_hyperslab(vsp, H5S_SELECT_SET, start, NULL, count, NULL);
        nb_h5_check(E, nb_h5.H5Pset_virtual(pl, vsp, pts[k].name, "/entry/data/data", src), "the virtual data set");
        nb_h5.H5Sclose(src);
        at += pts[k].dims[0];
    }
    nb_h5.H5Sclose(vsp);
    vsp = nb_h5.H5Screate_simple(3, dims, NULL);
    hid_t t = pts[0].is_float ? *nb_h5.H5T_IEEE_F32LE_g : *nb_h5.H5T_STD_I32LE_g;
    hid_t d = E->failed ? -1 : nb_h5.H5Dcreate2(data, "data", t, vsp, H5P_DEFAULT, pl, H5P_DEFAULT);
    if (nb_h5_check(E, d, "the virtual data set")) nb_h5_attr_str(E, d, "units", pts[0].is_float ? "photons" : "counts");
    if (d >= 0) nb_h5.H5Dclose(d);
    nb_h5.H5Sclose(vsp), nb_h5.H5Pclose(pl);
    if (!pts[0].is_float) nb_nxmx_put_scaling(E, data, pts[0].scaling);
    nb_h5_close_group(data);
}

/* The per-frame values of the parts, one after another */
static void master_frames(nb_h5err *E, hid_t entry, const part *pts, int nparts, long total)
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
    hid_t sample = nb_h5_group(E, entry, "sample", "NXsample");
    nb_h5_put_str(E, sample, "name", "simulated crystal");
    nb_h5_put_str(E, sample, "depends_on", "/entry/sample/transformations/omega");
    hid_t tf = nb_h5_group(E, sample, "transformations", "NXtransformations");
    nb_h5_put_axis(E, tf, "omega", (int)total, om, "deg", "rotation", pts[0].axis, ".");
    nb_h5_put_f64(E, tf, "omega_end", (int)total, oe, "deg", NULL);
    double inc = om && oe ? oe[0] - om[0] : 0.0;
    nb_h5_put_f64(E, tf, "omega_increment_set", 0, &inc, "deg", NULL);
    nb_h5_close_group(tf), nb_h5_close_group(sample);
    hid_t ins = nb_h5_group(E, entry, "instrument", "NXinstrument");
    nb_h5_put_str(E, ins, "name", "nb-sim");
    /* the first part's detector copied, not linked: durin (XDS) finds an
     * NXdetector only through hard links; its data link is the master's frames */
    hid_t first = E->failed ? -1 : nb_h5.H5Fopen(pts[0].name, ACC_RDONLY, H5P_DEFAULT);
    if (nb_h5_check(E, first, pts[0].name)) {
        nb_h5_check(E, nb_h5.H5Ocopy(first, "/entry/instrument/detector", ins, "detector", H5P_DEFAULT, H5P_DEFAULT),
                 "the detector's copy");
        nb_h5.H5Fclose(first);
    }
    hid_t beam = nb_h5_group(E, ins, "beam", "NXbeam");
    nb_h5_put_f64(E, beam, "incident_wavelength", varies ? (int)total : 0, wl, "angstrom", NULL);
    nb_h5_put_f64(E, beam, "incident_polarisation_stokes", 4, pts[0].stokes, NULL, NULL);
    if (pts[0].has_spectrum && !E->failed)
        nb_h5_check(E, nb_h5.H5Lcreate_external(pts[0].name, "/entry/instrument/beam/incident_wavelength_spectrum", beam,
                                          "incident_wavelength_spectrum", H5P_DEFAULT, H5P_DEFAULT), "the spectrum's link");
    nb_h5_close_group(beam), nb_h5_close_group(ins);
    hid_t note = nb_h5_group(E, entry, "nb", "NXnote");
    nb_h5_put_str(E, note, "program", "nb toolkit");
    nb_h5_put_str(E, note, "version", NB_VERSION);
    nb_h5_put_i64(E, note, "frame", (int)total, fr);
    nb_h5_attr_str(E, note, "geometry", pts[0].geometry);
    nb_strbuf sb;
    nb_strbuf_init(&sb);
    for (int k = 0; k < nparts; k++) nb_strbuf_printf(&sb, "%s\n", pts[k].name);
    nb_h5_put_str(E, note, "parts", sb.data ? sb.data : "");
    nb_strbuf_free(&sb);
    if (!E->failed) nb_h5_check(E, nb_h5.H5Lcreate_external(pts[0].name, "/entry/nb", note, "first_part", H5P_DEFAULT,
                                                      H5P_DEFAULT), "the first part's link");
    nb_h5_close_group(note);
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
            st = nb_nxmx_create_file(w, path);
        }
    }
    if (!st) {
        nb_h5err *E = &w->E;
        hid_t entry = nb_nxmx_entry(E, w->file);
        if (!E->failed) nb_h5_check(E, nb_h5.H5Lcreate_external(pts[0].name, "/entry/source", entry, "source", H5P_DEFAULT,
                                                          H5P_DEFAULT), "the source's link");
        master_data(E, entry, pts, nparts, total);
        master_frames(E, entry, pts, nparts, total);
        nb_h5_close_group(entry);
        nb_nxmx_release(w);
        if (E->failed) st = nb_error_set(NB_ERR_IO, "cannot write '%s': %s", path, E->msg);
        else if (rename(w->tmp, w->final) != 0) st = nb_error_set(NB_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
        if (st) unlink(w->tmp);
        nb_temp_unregister(w->tmp);
        nb_nxmx_free_writer(w);
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
