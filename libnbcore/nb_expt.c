/* nb_expt.c - a plan from a DIALS experiment list (nb-geom -expt FILE): the
 * flags that would say again what the list says, refused by name; the list
 * (read in formats/ through the load_experiments hook: libnbcore reads no
 * file format) taken into the request (its detector as -panels takes one,
 * its first wavelength, its frames or scan); and its crystals into the
 * resolved plan, turned from the file's frame onto the plan's by the
 * rotation that turns its panels (nb_panels.c): a sweep's crystal is the
 * plan's, stills' are the frame crystals (docs/physics.md 2.5). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nb_geometry.h"
#include "nb_options.h"
#include "nb_util.h"
#include "nb_vec.h"

void nb_experiment_list_free(nb_experiment_list *l)
{
    if (!l) return;
    nb_detector_file_free(&l->detector);
    free(l->crystals);
    memset(l, 0, sizeof *l);
}

/* What the list says, and the flags that would say it again. */
typedef struct contradiction {
    int id;
    const char *what;
} contradiction;

static const char crystals[] = "the experiment list gives the crystals";
static const char beam[] = "the experiment list gives the beam";
static const char frame[] = "the experiment list gives the laboratory frame";
static const char detector[] = "the experiment list gives the detector";
static const char frames[] = "the experiment list gives the frames (a still per experiment, or the sweep's scan)";

static const contradiction contradictions[] = {
    {FL_CELL, crystals}, {FL_MAT, crystals}, {FL_MISSET, crystals},
    {FL_STILLS, frames}, {FL_STILLS_N, frames}, {FL_STILLS_FLUENCE, frames}, {FL_STILLS_BANDWIDTH, frames},
    {FL_STILLS_SPIKES, frames}, {FL_PHI, frames}, {FL_OSC, frames}, {FL_NFRAMES, frames},
    {FL_LAMBDA, beam}, {FL_ENERGY, beam}, {FL_SOURCEFILE, beam},
    {FL_MOSFLM, frame}, {FL_XDS, frame}, {FL_ADXV, frame}, {FL_DENZO, frame}, {FL_DIALS, frame},
    {FL_BEAM_VECTOR, frame}, {FL_POLAR_VECTOR, frame}, {FL_SPINDLE_AXIS, frame},
    {FL_PANELS, detector}, {FL_IMG, detector}, {FL_MASK, detector}, {FL_XBEAM, detector}, {FL_YBEAM, detector},
    {FL_XCLOSE, detector}, {FL_YCLOSE, detector}, {FL_ORGX, detector}, {FL_ORGY, detector}, {FL_PIVOT, detector},
    {FL_FDET_VECTOR, detector}, {FL_SDET_VECTOR, detector}, {FL_ODET_VECTOR, detector},
    {FL_PIX0_VECTOR, detector}, {FL_TWOTHETA_AXIS, detector}, {FL_DISTANCE, detector},
    {FL_CLOSE_DISTANCE, detector}, {FL_TWOTHETA, detector}, {FL_ROTX, detector}, {FL_ROTY, detector},
    {FL_ROTZ, detector}, {FL_DETSIZE, detector}, {FL_DETSIZE_F, detector}, {FL_DETSIZE_S, detector},
    {FL_DETPIXELS, detector}, {FL_DETPIXELS_F, detector}, {FL_DETPIXELS_S, detector}, {FL_CURVED_DET, detector},
    {FL_PIXEL, detector}, {FL_ROI, detector},
};

/* The first flag of args that says what the list says, refused by name */
static nb_status refuse_contradictions(const nb_scanned_args *args)
{
    for (int k = 0; k < args->count; k++)
        for (size_t c = 0; c < sizeof contradictions / sizeof contradictions[0]; c++)
            if (args->flags[k].id == contradictions[c].id)
                return nb_error_set(NB_ERR_USAGE, "%s contradicts -expt: %s", args->argv[args->flags[k].index],
                                    contradictions[c].what);
    return NB_OK;
}

/* The sensor's flags, refused when the list states a sensor */
static nb_status refuse_sensor_flags(const nb_scanned_args *args, const nb_experiment_list *l, int *given)
{
    *given = 0;
    for (int k = 0; k < args->count; k++) {
        int id = args->flags[k].id;
        if (id != FL_DETECTOR_THICK && id != FL_DETECTOR_ABS && id != FL_DETECTOR_MATERIAL) continue;
        if (l->sensor)
            return nb_error_set(NB_ERR_USAGE, "%s contradicts -expt: the experiment list gives the sensor",
                                args->argv[args->flags[k].index]);
        *given = 1;
    }
    return NB_OK;
}

nb_status nb_request_take_expt(nb_request *rq, const nb_scanned_args *args, const nb_args_hooks *hooks)
{
    const char *path = NULL;
    int polar = 0;
    for (int k = 0; k < args->count; k++) {
        if (args->flags[k].id == FL_EXPT) path = args->argv[args->flags[k].index + 1];
        polar |= args->flags[k].id == FL_POLAR || args->flags[k].id == FL_NOPOLAR;
    }
    if (!path) return NB_OK;
    nb_status st = refuse_contradictions(args);
    if (st) return st;
    if (!hooks || !hooks->load_experiments)
        return nb_error_set(NB_ERR_UNSUPPORTED, "-expt: this program reads no experiment lists (use nb-geom)");
    nb_experiment_list *l;
    if ((st = nb_calloc((void **)&l, 1, sizeof *l, "the experiment list"))) return st;
    int sensor_flags = 0;
    if (!(st = hooks->load_experiments(path, l))) st = refuse_sensor_flags(args, l, &sensor_flags);
    if (!st && (l->n < 1 || l->detector.npanels < 1))
        st = nb_error_set(NB_ERR_DATA, "'%s' describes no experiment with a detector", path);
    if (st) {
        nb_experiment_list_free(l);
        free(l);
        return st;
    }
    nb_experiment_list_free(rq->expt);
    free(rq->expt);
    rq->expt = l;
    /* the detector, placed as -panels places one */
    nb_detector_file_free(rq->panels);
    free(rq->panels);
    if ((st = nb_calloc((void **)&rq->panels, 1, sizeof *rq->panels, "the detector"))) return st;
    *rq->panels = l->detector;
    /* the list keeps what ties its frame to the plan's (beam, second, tie) */
    l->detector.panels = NULL, l->detector.npanels = 0;
    rq->panels->sensor_from_flags = sensor_flags;
    const nb_panel *p0 = &rq->panels->panels[0];
    rq->fpixels = p0->fpixels, rq->spixels = p0->spixels;
    rq->pixel_size = p0->pixel_size;
    double n[3];
    nb_vcross(p0->fdet, p0->sdet, n);
    double dist = fabs(nb_vdot(p0->pix0, n)) / nb_vnorm(n);
    if (dist > 0 && isfinite(dist)) rq->distance = dist;
    if (l->sensor && l->material != NB_MATERIAL_NONE) rq->detector_material = l->material;
    /* the beam, the frames */
    rq->lambda0 = l->crystals[0].lambda;
    if (!polar && isfinite(l->polar_fraction)) rq->polarization = 2.0 * l->polar_fraction - 1.0;
    if (l->sweep) {
        rq->phi0 = l->phi0, rq->osc = l->osc, rq->nframes = l->nframes;
    } else {
        rq->phi0 = 0.0, rq->osc = 0.0, rq->nframes = l->n;
    }
    return NB_OK;
}

static void turn(const double R[3][3], const double v[3], double scale, double out[3])
{
    for (int i = 0; i < 3; i++) out[i] = scale * (R[i][0] * v[0] + R[i][1] * v[1] + R[i][2] * v[2]);
}

/* The rotation from the list's frame onto a plan of this beam and spindle */
static nb_status list_rotation(const nb_detector_file *d, const double beam_[3], const double spindle[3],
                               double R[3][3])
{
    /* the rotation reads a plan's beam and spindle alone */
    nb_plan axes;
    nb_plan_init(&axes);
    memcpy(axes.beam, beam_, sizeof axes.beam);
    memcpy(axes.spindle, spindle, sizeof axes.spindle);
    return nb_detector_file_rotation(d, &axes, R);
}

nb_status nb_expt_first_cell(const nb_experiment_list *l, const double beam_[3], const double spindle[3],
                             double abc[3][3])
{
    double R[3][3];
    nb_status st = list_rotation(&l->detector, beam_, spindle, R);
    if (st) return st;
    for (int k = 0; k < 3; k++) turn(R, l->crystals[0].abc[k], 1.0, abc[k]);
    return NB_OK;
}

/* The list's experiment identifiers, kept by the plan when every experiment
 * has one: a still's its frame's; a sweep's every frame's. */
static nb_status take_identifiers(const nb_experiment_list *l, nb_plan *plan)
{
    if (!l->sweep && plan->nframes != l->n) return NB_OK; /* not a frame an experiment */
    for (int i = 0; i < l->n; i++)
        if (!l->crystals[i].identifier[0]) return NB_OK;
    const char **ids;
    nb_status st = nb_calloc((void **)&ids, (size_t)plan->nframes, sizeof *ids, "frame identifiers");
    if (st) return st;
    for (int f = 0; f < plan->nframes; f++) ids[f] = l->crystals[l->sweep ? 0 : f].identifier;
    st = nb_plan_set_frame_ids(plan, ids);
    free(ids);
    return nb_error_prefix(st, "-expt");
}

nb_status nb_plan_take_expt_crystals(const nb_experiment_list *l, nb_plan *plan)
{
    double R[3][3];
    nb_status st = list_rotation(&l->detector, plan->beam, plan->spindle, R);
    if (st) return st;
    const int n = l->sweep ? 1 : l->n;
    free(plan->space_group);
    plan->space_group = l->space_group[0] ? nb_xstrdup(l->space_group) : NULL;
    nb_frame_crystal *fc;
    if ((st = nb_calloc((void **)&fc, (size_t)n, sizeof *fc, "frame crystals"))) return st;
    for (int i = 0; i < n; i++) {
        turn(R, l->crystals[i].abc[0], 1e-10, fc[i].a);
        turn(R, l->crystals[i].abc[1], 1e-10, fc[i].b);
        turn(R, l->crystals[i].abc[2], 1e-10, fc[i].c);
        fc[i].Na = plan->Na, fc[i].Nb = plan->Nb, fc[i].Nc = plan->Nc;
        fc[i].fluence = plan->fluence;
        fc[i].lambda = l->crystals[i].lambda;
    }
    if (l->sweep) {
        /* the rotation series' own crystal, exactly the list's */
        if (!(st = nb_frame_crystal_check(&fc[0], 0, NB_ERR_DATA, "-expt"))) {
            const double lambda0 = plan->lambda0;
            nb_frame_crystal_apply(&fc[0], plan);
            plan->lambda0 = lambda0;
        }
    } else {
        st = nb_plan_set_frame_crystals(plan, fc);
    }
    free(fc);
    if (!st) st = take_identifiers(l, plan);
    return st;
}
