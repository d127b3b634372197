/* nb_panels.c - a detector of several panels read from a file (nb-geom
 * -panels): which flags conflict with it, and the panels placed in the
 * plan's frame.  The file itself is read in formats/ (through the
 * load_panels hook: libnbcore reads no file format); here its panels, given
 * in the file's laboratory frame, are rotated onto ours and become the
 * plan's panel 0 and extra panels (docs/physics.md, "Panels"). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nb_geometry.h"
#include "nb_options.h"
#include "nb_util.h"
#include "nb_vec.h"

void nb_detector_file_free(nb_detector_file *d)
{
    if (!d) return;
    for (int i = 0; i < d->npanels; i++) free(d->panels[i].mask);
    free(d->panels);
    memset(d, 0, sizeof *d);
}

/* Flags that place or size the one-panel detector: the file does that. */
static const int conflicting[] = {
    FL_IMG, FL_MASK, FL_XBEAM, FL_YBEAM, FL_XCLOSE, FL_YCLOSE, FL_ORGX, FL_ORGY, FL_PIVOT,
    FL_FDET_VECTOR, FL_SDET_VECTOR, FL_ODET_VECTOR, FL_PIX0_VECTOR, FL_DISTANCE, FL_CLOSE_DISTANCE,
    FL_TWOTHETA, FL_TWOTHETA_AXIS, FL_ROTX, FL_ROTY, FL_ROTZ, FL_DETSIZE, FL_DETSIZE_F, FL_DETSIZE_S,
    FL_DETPIXELS, FL_DETPIXELS_F, FL_DETPIXELS_S, FL_CURVED_DET, FL_PIXEL, FL_ROI,
};

nb_status nb_request_take_panels(nb_request *rq, const nb_scanned_args *args, const nb_args_hooks *hooks)
{
    const char *path = NULL;
    int sensor = 0;
    for (int k = 0; k < args->count; k++) {
        int id = args->flags[k].id;
        if (id == FL_PANELS) path = args->argv[args->flags[k].index + 1];
        sensor |= id == FL_DETECTOR_THICK || id == FL_DETECTOR_ABS || id == FL_DETECTOR_MATERIAL;
    }
    if (!path) return NB_OK;
    for (int k = 0; k < args->count; k++)
        for (size_t c = 0; c < sizeof conflicting / sizeof conflicting[0]; c++)
            if (args->flags[k].id == conflicting[c])
                return nb_error_set(NB_ERR_USAGE, "%s cannot be used with -panels: the detector comes from '%s'",
                                    args->argv[args->flags[k].index], path);
    if (!hooks || !hooks->load_panels)
        return nb_error_set(NB_ERR_UNSUPPORTED, "-panels: this program reads no detector files (use nb-geom)");
    nb_detector_file *d;
    nb_status st = nb_calloc((void **)&d, 1, sizeof *d, "the detector");
    if (st) return st;
    if ((st = hooks->load_panels(path, d))) {
        free(d);
        return st;
    }
    if (d->npanels < 1) {
        nb_detector_file_free(d);
        free(d);
        return nb_error_set(NB_ERR_DATA, "'%s' describes no detector panel", path);
    }
    d->sensor_from_flags = sensor;
    nb_detector_file_free(rq->panels);
    free(rq->panels);
    rq->panels = d;
    /* panel 0 in place of the default detector, for what is resolved from it */
    const nb_panel *p0 = &d->panels[0];
    rq->fpixels = p0->fpixels, rq->spixels = p0->spixels;
    rq->pixel_size = p0->pixel_size;
    double n[3];
    nb_vcross(p0->fdet, p0->sdet, n);
    double dist = fabs(nb_vdot(p0->pix0, n)) / nb_vnorm(n);
    if (dist > 0 && isfinite(dist)) rq->distance = dist;
    return NB_OK;
}

/* An orthonormal frame from a primary direction and a second one made
 * perpendicular to it: rows e1, e2, e3 = e1 x e2.  Fails when they are parallel. */
static int frame_of(const double a[3], const double b[3], double e[3][3])
{
    double na = nb_vnorm(a);
    if (!(na > 0)) return -1;
    for (int k = 0; k < 3; k++) e[0][k] = a[k] / na;
    double along = nb_vdot(b, e[0]);
    for (int k = 0; k < 3; k++) e[1][k] = b[k] - along * e[0][k];
    double len = nb_vnorm(e[1]);
    if (!(len > 1e-9 * nb_vnorm(b))) return -1;
    for (int k = 0; k < 3; k++) e[1][k] /= len;
    nb_vcross(e[0], e[1], e[2]);
    return 0;
}

/* R = E^T e: takes the file's (beam, second) frame onto the plan's. */
nb_status nb_detector_file_rotation(const nb_detector_file *d, const nb_plan *plan, double R[3][3])
{
    if (d->tie == NB_TIE_DIALS_FIXED) {
        /* DIALS (x, y, z) -> ours (-z, y, x): DIALS_ORIGIN_MM = 1000 (PIX0.z, PIX0.y, -PIX0.x) inverted */
        const double M[3][3] = {{0, 0, -1}, {0, 1, 0}, {1, 0, 0}};
        memcpy(R, M, sizeof M);
        return NB_OK;
    }
    const double *target = d->tie == NB_TIE_SPINDLE ? plan->spindle : plan->polar_vector;
    double e[3][3], E[3][3];
    if (frame_of(d->beam, d->second, e))
        return nb_error_set(NB_ERR_DATA, "-panels: the file's beam direction and %s are parallel",
                            d->tie == NB_TIE_SPINDLE ? "rotation axis" : "x axis");
    if (frame_of(plan->beam, target, E))
        return nb_error_set(NB_ERR_USAGE, "-panels: the beam and the %s are parallel: the file's frame cannot be "
                                          "tied to the plan's",
                            d->tie == NB_TIE_SPINDLE ? "spindle axis" : "polarization");
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) R[i][j] = E[0][i] * e[0][j] + E[1][i] * e[1][j] + E[2][i] * e[2][j];
    return NB_OK;
}

static void apply(const double R[3][3], const double v[3], double out[3])
{
    for (int i = 0; i < 3; i++) out[i] = R[i][0] * v[0] + R[i][1] * v[1] + R[i][2] * v[2];
}

/* One panel of the file in the plan's frame, with its sensor. */
static nb_status place(const nb_panel *in, const double R[3][3], const nb_detector_file *d, const nb_plan *plan,
                       int index, nb_panel *out)
{
    *out = *in;
    out->mask = NULL;
    apply(R, in->fdet, out->fdet);
    apply(R, in->sdet, out->sdet);
    apply(R, in->pix0, out->pix0);
    double nf = nb_vnorm(out->fdet), ns = nb_vnorm(out->sdet);
    if (!(nf > 0) || !(ns > 0) || in->fpixels < 1 || in->spixels < 1 || !(in->pixel_size > 0))
        return nb_error_set(NB_ERR_DATA, "-panels: panel %d has no size or no axes", index);
    for (int k = 0; k < 3; k++) out->fdet[k] /= nf, out->sdet[k] /= ns;
    nb_vcross(out->fdet, out->sdet, out->odet);
    double no = nb_vnorm(out->odet);
    if (no < 1e-6) return nb_error_set(NB_ERR_DATA, "-panels: panel %d's fast and slow axes are parallel", index);
    /* the normal away from the sample, as the kernels' solid angle and
     * sensor depth need (close_distance = pix0 . odet > 0) */
    if (!(fabs(nb_vdot(out->pix0, out->odet)) / no > 1e-9))
        return nb_error_set(NB_ERR_DATA, "-panels: panel %d's plane passes through the sample (no clen or origin?)",
                            index);
    double sign = nb_vdot(out->pix0, out->odet) < 0 ? -1.0 : 1.0;
    for (int k = 0; k < 3; k++) out->odet[k] *= sign / no;
    const nb_panel *flags = &plan->panels[0]; /* the flags' sensor, before the panels replace it */
    if (d->sensor_from_flags || in->thick < 0) {
        out->thick = flags->thick, out->mu = flags->mu;
        out->thickstep = flags->thickstep;
    } else {
        out->mu = in->thick > 0 ? in->mu : flags->mu;
        out->thickstep = in->thick / flags->thicksteps;
    }
    out->thicksteps = flags->thicksteps;
    out->roi_xmin = 0, out->roi_xmax = in->fpixels, out->roi_ymin = 0, out->roi_ymax = in->spixels;
    return NB_OK;
}

nb_status nb_plan_place_panels(const nb_detector_file *d, nb_plan *plan)
{
    double R[3][3];
    nb_status st = nb_detector_file_rotation(d, plan, R);
    if (st) return st;
    nb_panel *placed;
    if ((st = nb_calloc((void **)&placed, (size_t)d->npanels, sizeof *placed, "panels"))) return st;
    for (int i = 0; i < d->npanels && !st; i++) st = place(&d->panels[i], R, d, plan, i, &placed[i]);
    if (!st) {
        /* the flags' panel (-mask conflicts with -panels: it has none) gives way to the file's */
        for (int i = 0; i < plan->npanels; i++) free(plan->panels[i].mask);
        free(plan->panels);
        plan->panels = placed;
        plan->npanels = d->npanels;
        placed = NULL;
        nb_plan_derive_detector(plan);
        snprintf(plan->convention, sizeof plan->convention, "custom");
    }
    free(placed);
    return st;
}
