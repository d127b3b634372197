/* nb-fit: refine a plan's parameters against observed images, by maximum
 * likelihood on the derivatives of nb-sim --grad (Levenberg-Marquardt):
 * one set shared by every frame (this file), or a dataset's per-frame and
 * shared parameters and structure factors (nb_fit_dataset.c and its parts),
 * across processes under mpirun (nb_par.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "detector_file.h"
#include "nb_cli.h"
#include "nb_fit.h"
#include "nb_hkl.h"
#include "nb_image_record.h"
#include "nb_options.h"
#include "nb_plan.h"
#include "nb_engine.h"
#include "nb_sim_cuda.h"
#include "nb_stream.h"
#include "nb_util.h"
#include "rawfloat.h"
#include "registry.h"
#include "smv.h"

static const nb_opt_table table;

static const nb_tool_info tool = {
    "nb-fit",
    NB_FIT,
    "[OPTIONS] --observed FILE... [--refine LIST] [--refine-frame LIST] [--refine-F] [STREAM]",
    "refine a plan's parameters against observed images",
    "nb-fit reads a PLAN record (and the HKL record of nb-hkl) as the start model and one\n"
    "observed image per frame of the plan (--observed: CBF, SMV, TIFF, an nb stream's IMAGE\n"
    "record, or raw float photons with the plan's size; read as nb-convert --import reads them,\n"
    "write-only formats such as PNG, PGM and NXmx refused by name), and refines the parameters of --refine (the\n"
    "names of nb-sim --grad, and 'scale', an overall factor on the fluence) by maximum\n"
    "likelihood: Poisson photon counts (the image's counts less its ADC offset, over its gain),\n"
    "from where least squares leave it, or least squares alone (--loss lsq), with\n"
    "Levenberg-Marquardt steps on the derivative images (at least one of --refine,\n"
    "--refine-frame and --refine-F).\n"
    "Pixels outside the ROI, masked or overloaded in the observed image are left out.  The\n"
    "refined plan goes to standard output (nb-fit ... | nb-sim renders the fit), the refined\n"
    "values to standard error as 'NAME = VALUE +- SIGMA UNIT' (sigma from the inverse Fisher\n"
    "information), with -v the likelihood of every iteration.  The model is rendered on the\n"
    "double path (nb-sim -precision double --grad), or with -precision single on the fast\n"
    "path (nb-sim -precision single --grad: tens of times faster, the fast path's model).\n"
    "\n"
    "A dataset fit (--refine-frame, --refine-F, or a plan of per-frame crystals such as\n"
    "nb-geom -expt makes from a DIALS experiment list) refines each frame's own parameters\n"
    "(--refine-frame: rot_x/y/z turn the frame's crystal about the lab axes, cell_*, Na/Nb/Nc,\n"
    "lambda, mosaic, scale) with the shared ones of --refine (distance, Xbeam, Ybeam, cell_* ...)\n"
    "and, with --refine-F, the structure factors of the asymmetric unit, on the fast path, over\n"
    "regions around the spots with a background plane each.  A global stage searches the\n"
    "crystals' turns (and cells) and the detector's distance and beam centre on the observed\n"
    "spots first, moving a frame only where it finds clearly better than the start (a frame\n"
    "moved whose fit fails is fitted again from its start); with --refine-F the frames' values\n"
    "and F are refined jointly, and every sigma is marginal over the rest.  Each frame gets a\n"
    "verdict (its deviance against its expectation, the predicted spots the image shows, the\n"
    "strong spots the model predicts): a frame that fails keeps its start, marked in the\n"
    "refined plan, is named on standard error ('nb-fit: frame N failed: WHY'), is left out of\n"
    "the shared values and F, and nb-fit exits 3 after writing the whole stream.  nb-fit ... |\n"
    "nb-convert -o fit.expt writes the refined experiments; -v adds each stage's steps and\n"
    "'time:' lines, where a dataset fit's time went.  Under mpirun -n K the frames are split\n"
    "over the processes (docs/physics.md 15.1; 15.2: the correspondence with diffBragg).",
    &table,
    "  nb-geom $START | nb-hkl | nb-fit --observed still.cbf --refine distance,Xbeam,Ybeam > fit.nbs\n"
    "  nb-fit --observed frame.img --refine rot_x,rot_y,rot_z,cell_a,scale -o fit.nbs start.nbs\n"
    "  nb-geom -expt indexed.expt -N 20 -fluence 1e27 | nb-hkl -hkl F.hkl | nb-fit --observed s_001.cbf \\\n"
    "      --observed s_002.cbf --refine cell_a,cell_b,cell_c --refine-frame rot_x,rot_y,rot_z,scale \\\n"
    "      | nb-convert -o fit.expt\n"
    "  mpirun -n 8 nb-fit $OBSERVED --refine-F --refine-frame scale --space-group 'P 21 21 21' --F-out F.hkl \\\n"
    "      -o fit.nbs start.nbs\n",
    NULL,
    "3: the fit ran and the stream is whole, but a frame's verdict failed (named on standard error)",
};

#define MAX_PARAMS (NB_GRAD_MAX_NAMES + 1)
#define MU_FLOOR 1e-4 /* photons: a trace of background under every model pixel (log 0 is no likelihood) */

/* ---- the observed images ---------------------------------------------------- */

/* An image file's counts into photons, (counts - offset) / gain, the
 * untrusted pixels (negative, a CBF's masked ones, or overloaded: the image
 * reader's rule, registry.h) left out; --adc, --gain and --overload given
 * override the file's. */
static void counts_to_photons(const fit_opts *o, nb_image_file *f, observed *ob)
{
    const double adc = o->have_adc ? o->adc : f->offset, gain = o->have_gain ? o->gain : f->gain;
    if (o->have_overload) nb_image_file_set_overload(f, o->overload);
    for (size_t i = 0; i < f->npixels; i++) {
        if (f->untrusted[i]) ob->use[i] = 0;
        ob->y[i] = (f->counts[i] - adc) / gain;
    }
}

/* The frames whose file has been read: the dataset fit reads a frame's file
 * again at each prediction of its regions, and -v says how a file is read
 * (and the reader warns) at its first reading alone. */
static unsigned char *frames_read;

/* Frame `frame`'s file, read with the reader's log at its first reading only. */
static nb_status read_frame_file(const char *path, const nb_plan *plan, long frame, nb_image_file *f)
{
    if (!frames_read && plan->nframes > 0) frames_read = calloc((size_t)plan->nframes, 1);
    const int again = frames_read && frame >= 0 && frame < plan->nframes && frames_read[frame];
    const int verbosity = nb_verbosity();
    if (again) nb_set_verbosity(-1);
    nb_status st = nb_image_file_read(path, plan, frame, f);
    if (again) nb_set_verbosity(verbosity);
    else if (!st && frames_read && frame >= 0 && frame < plan->nframes) frames_read[frame] = 1;
    return st;
}

/* Observed frame `frame` from path, by the one image reader (registry.h:
 * CBF, SMV, TIFF, an nb stream's IMAGE record of that frame, or raw float
 * photons; its rule for the offset, gain and overload, which --adc, --gain
 * and --overload override). */
nb_status nb_fit_observed_read(const char *path, const fit_opts *o, const nb_plan *plan, long frame, observed *ob)
{
    const size_t n = nb_plan_total_pixels(plan);
    nb_image_file f;
    nb_status st;
    if ((st = nb_calloc((void **)&ob->y, n, sizeof *ob->y, "the observed image")) ||
        (st = nb_calloc((void **)&ob->use, n, 1, "the observed image")))
        return st;
    memset(ob->use, 1, n);
    if (!(st = read_frame_file(path, plan, frame, &f)) && f.npixels != n)
        st = nb_error_set(NB_ERR_DATA, "'%s' holds %zu pixels but the plan has %zu", path, f.npixels, n);
    if (!st && f.is_counts) {
        counts_to_photons(o, &f, ob);
    } else if (!st) {
        for (size_t i = 0; i < n; i++) ob->y[i] = f.photons[i];
    }
    nb_image_file_free(&f);
    return st;
}

void nb_fit_observed_free(observed *ob)
{
    free(ob->y);
    free(ob->use);
    ob->y = NULL, ob->use = NULL;
}

/* ---- the model ----------------------------------------------------------------- */

/* The parameters: the names of nb-sim --grad, then (when refined) the scale. */
typedef struct params {
    nb_grad_list names;
    int with_scale;
    int k;                  /* names.n + with_scale */
    double x[MAX_PARAMS];   /* values, in the flags' units; the scale last */
} params;

/* The model of every frame at x: photons per pixel (mu, the scale applied)
 * and, with grads, d mu / d x_j. */
typedef struct model {
    float **image;              /* per frame */
    float **grad[MAX_PARAMS];   /* per parameter, per frame (NULL: not rendered) */
} model;

/* The engine the model renders with (on the CPU). */
static nb_engine *engine;

/* One panel of a frame, into the panel's place in image (and grads), by the
 * path's pixel. */
static nb_status render_panel(const nb_plan *plan, const nb_hkl *hkl, const nb_grad_plans *gp, nb_grad_path path,
                              long frame, int panel, float *image, float **grads)
{
    nb_plan frame_plan, view;
    nb_source *shot_sources = NULL;
    nb_panel_done done;
    if (plan->stills.spikes > 0)
        return nb_error_set(NB_ERR_UNSUPPORTED, "fitting stills with a per-shot spectrum (-stills_bandwidth) is not "
                                                "supported");
    nb_status st = nb_engine_frame(plan, frame, &frame_plan, &shot_sources);
    if (st) return st;
    nb_plan_panel_view(&frame_plan, panel, &view);
    const nb_panel_job job = {path == NB_GRAD_DOUBLE, gp, frame, panel, grads, NULL, NULL, NULL, 0};
    st = nb_engine_render_panel(engine, &view, hkl, &job, image, &done);
    nb_panel_done_free(&done);
    free(shot_sources);
    return st;
}

/* A frame, panel after panel (an IMAGE's layout). */
static nb_status render_frame(const nb_plan *plan, const nb_hkl *hkl, const nb_grad_plans *gp, nb_grad_path path,
                              long frame, float *image, float **grads, int ngrads)
{
    nb_status st = NB_OK;
    for (int i = 0; i < nb_plan_npanels(plan) && !st; i++) {
        size_t off;
        float *g[NB_GRAD_MAX_NAMES];
        nb_plan_panel_dims(plan, i, NULL, NULL, &off);
        for (int j = 0; j < ngrads; j++) g[j] = grads[j] ? grads[j] + off : NULL;
        st = render_panel(plan, hkl, gp, path, frame, i, image + off, g);
    }
    return st;
}

/* Render the model at p (with its derivatives when grads). */
static nb_status model_eval(const nb_plan *start, const nb_hkl *hkl, nb_grad_path path, const params *p, int grads,
                            model *m,
                            nb_plan *at)
{
    nb_grad_plans gp;
    nb_status st = nb_grad_plan_at(start, &p->names, p->x, at);
    if (st) return st;
    if (grads && (st = nb_grad_plans_build(at, &p->names, &gp))) return st;
    for (long f = 0; f < start->nframes && !st; f++) {
        float *g[NB_GRAD_MAX_NAMES];
        for (int j = 0; j < p->names.n; j++) g[j] = grads ? m->grad[j][f] : NULL;
        st = render_frame(at, hkl, grads ? &gp : NULL, path, f, m->image[f], g, p->names.n);
    }
    if (grads) nb_grad_plans_free(&gp);
    return st;
}

/* ---- the likelihood and its Fisher information ----------------------------------- */

typedef struct normal_eq {
    double nll;                       /* -log L (Poisson) or RSS/2 */
    double g[MAX_PARAMS];             /* its gradient */
    double H[MAX_PARAMS][MAX_PARAMS]; /* Fisher information (Gauss-Newton) */
    long n;                           /* pixels used */
} normal_eq;

/* -log L at the model (mu = scale I), and with grads its gradient and Fisher matrix. */
static void likelihood(const params *p, const model *m, const observed *obs, long nframes, size_t npix, int loss,
                       int grads, normal_eq *e)
{
    const double s = p->with_scale ? p->x[p->k - 1] : 1.0;
    memset(e, 0, sizeof *e);
    double d[MAX_PARAMS];
    for (long f = 0; f < nframes; f++)
        for (size_t i = 0; i < npix; i++) {
            if (!obs[f].use[i]) continue;
            const double I = m->image[f][i], y = obs[f].y[i], mu = s * I + MU_FLOOR;
            e->n++;
            e->nll += loss == NB_FIT_POISSON ? mu - (y > 0 ? y * log(mu) : 0.0) : 0.5 * (y - mu) * (y - mu);
            if (!grads) continue;
            for (int j = 0; j < p->names.n; j++) d[j] = s * m->grad[j][f][i];
            if (p->with_scale) d[p->k - 1] = I;
            const double r = loss == NB_FIT_POISSON ? 1.0 - y / mu : mu - y; /* d nll / d mu */
            const double w = loss == NB_FIT_POISSON ? 1.0 / mu : 1.0;       /* Fisher weight */
            for (int a = 0; a < p->k; a++) {
                e->g[a] += r * d[a];
                for (int b = 0; b <= a; b++) e->H[a][b] += w * d[a] * d[b];
            }
        }
    for (int a = 0; a < p->k; a++)
        for (int b = 0; b < a; b++) e->H[b][a] = e->H[a][b];
}

#define SOLVE_MAX 64

int nb_fit_solve(int k, const double *A, int stride, const double *b, double *x)
{
    double M[SOLVE_MAX][SOLVE_MAX + 1];
    if (k > SOLVE_MAX) return 0;
    for (int i = 0; i < k; i++) {
        for (int j = 0; j < k; j++) M[i][j] = A[i * stride + j];
        M[i][k] = b[i];
    }
    for (int c = 0; c < k; c++) {
        int piv = c;
        for (int r = c + 1; r < k; r++)
            if (fabs(M[r][c]) > fabs(M[piv][c])) piv = r;
        if (!(fabs(M[piv][c]) > 0.0)) return 0;
        for (int j = 0; j <= k; j++) {
            double t = M[c][j];
            M[c][j] = M[piv][j], M[piv][j] = t;
        }
        for (int r = c + 1; r < k; r++) {
            double f = M[r][c] / M[c][c];
            for (int j = c; j <= k; j++) M[r][j] -= f * M[c][j];
        }
    }
    for (int i = k - 1; i >= 0; i--) {
        double v = M[i][k];
        for (int j = i + 1; j < k; j++) v -= M[i][j] * x[j];
        x[i] = v / M[i][i];
    }
    return 1;
}

/* ---- Levenberg-Marquardt ----------------------------------------------------------- */

/* The model's buffers for every frame, and its derivatives' when grads. */
static nb_status model_alloc(model *m, const params *p, long nframes, size_t npix, int grads)
{
    nb_status st = nb_calloc((void **)&m->image, (size_t)nframes, sizeof *m->image, "the model");
    for (long f = 0; f < nframes && !st; f++) st = nb_calloc((void **)&m->image[f], npix, sizeof(float), "the model");
    for (int j = 0; j < (grads ? p->names.n : 0) && !st; j++) {
        st = nb_calloc((void **)&m->grad[j], (size_t)nframes, sizeof *m->grad[j], "the derivatives");
        for (long f = 0; f < nframes && !st; f++)
            st = nb_calloc((void **)&m->grad[j][f], npix, sizeof(float), "the derivatives");
    }
    return st;
}

static void model_free(model *m, long nframes)
{
    for (long f = 0; m->image && f < nframes; f++) free(m->image[f]);
    free(m->image);
    for (int j = 0; j < MAX_PARAMS; j++) {
        for (long f = 0; m->grad[j] && f < nframes; f++) free(m->grad[j][f]);
        free(m->grad[j]);
    }
    memset(m, 0, sizeof *m);
}

static const char *param_name(const params *p, int j)
{
    return j < p->names.n ? nb_param_name(&p->names.param[j]) : "scale";
}

/* The step of damping lambda: (H + lambda diag H) dx = -g. */
static nb_status lm_step(const params *p, const normal_eq *e, double lambda, double *dx)
{
    double A[MAX_PARAMS][MAX_PARAMS], b[MAX_PARAMS];
    for (int a = 0; a < p->k; a++) {
        if (!(e->H[a][a] > 0.0))
            return nb_error_set(NB_ERR_DATA, "%s does not change the model on any pixel used: it cannot be refined "
                                             "from these images", param_name(p, a));
        for (int c = 0; c < p->k; c++) A[a][c] = e->H[a][c];
        A[a][a] *= 1.0 + lambda;
        b[a] = -e->g[a];
    }
    if (!nb_fit_solve(p->k, &A[0][0], MAX_PARAMS, b, dx))
        return nb_error_set(NB_ERR_DATA, "the parameters are not independent on these images (a singular system)");
    return NB_OK;
}

typedef struct problem {
    const nb_plan *start;
    const nb_hkl *hkl;
    const observed *obs;
    const fit_opts *o;
    size_t npix;
    nb_grad_path path; /* the model's pixel: -precision */
} problem;

/* Iterate from p->x to the least -log L of `loss`; e: the normal equations there. */
static nb_status refine(const problem *pb, int loss, params *p, model *m, model *trial, normal_eq *e)
{
    const long nf = pb->start->nframes;
    nb_plan at;
    nb_status st = model_eval(pb->start, pb->hkl, pb->path, p, 1, m, &at);
    if (st) return st;
    nb_plan_free(&at);
    likelihood(p, m, pb->obs, nf, pb->npix, loss, 1, e);
    double lambda = 1e-3;
    for (int it = 0; it < pb->o->iterations && !st; it++) {
        nb_info("%s iteration %d: %s = %.12g on %ld pixels, lambda %.1e",
                loss == NB_FIT_LSQ ? "least-squares" : "Poisson", it, loss == NB_FIT_LSQ ? "RSS/2" : "-log L", e->nll, e->n,
                lambda);
        double dx[MAX_PARAMS];
        params next = *p;
        if ((st = lm_step(p, e, lambda, dx))) break;
        for (int j = 0; j < p->k; j++) next.x[j] = p->x[j] + dx[j];
        normal_eq te;
        nb_status ts = model_eval(pb->start, pb->hkl, pb->path, &next, 0, trial, &at);
        if (!ts) nb_plan_free(&at);
        if (!ts) likelihood(&next, trial, pb->obs, nf, pb->npix, loss, 0, &te);
        if (ts || !(te.nll < e->nll)) {
            /* a step the plan refuses (a negative distance ...) or no better: shorter */
            lambda *= 10.0;
            if (lambda > 1e10) break;
            continue;
        }
        const double gain = e->nll - te.nll;
        *p = next;
        if ((st = model_eval(pb->start, pb->hkl, pb->path, p, 1, m, &at))) break;
        nb_plan_free(&at);
        likelihood(p, m, pb->obs, nf, pb->npix, loss, 1, e);
        lambda = fmax(lambda / 10.0, 1e-9);
        if (gain < 1e-10 * fabs(e->nll) + 1e-9) break;
    }
    if (!st) nb_info("%s: %s = %.12g on %ld pixels", loss == NB_FIT_LSQ ? "least squares" : "Poisson",
                     loss == NB_FIT_LSQ ? "RSS/2" : "-log L", e->nll, e->n);
    return st;
}

/* Sigmas from the inverse Fisher information (least squares: scaled by the
 * residual variance). */
static nb_status sigmas(const params *p, const normal_eq *e, int loss, double *sigma)
{
    double H[MAX_PARAMS][MAX_PARAMS];
    memcpy(H, e->H, sizeof H);
    const double var = loss == NB_FIT_LSQ && e->n > p->k ? 2.0 * e->nll / (double)(e->n - p->k) : 1.0;
    for (int j = 0; j < p->k; j++) {
        double unit[MAX_PARAMS] = {0}, col[MAX_PARAMS];
        unit[j] = 1.0;
        if (!nb_fit_solve(p->k, &H[0][0], MAX_PARAMS, unit, col)) return nb_error_set(NB_ERR_DATA, "the Fisher information is singular");
        sigma[j] = sqrt(fabs(col[j]) * var);
    }
    return NB_OK;
}

/* ---- parameters in, plan out ------------------------------------------------------- */

/* --refine LIST: the names of nb-sim --grad, and 'scale' (anywhere in the list) */
static nb_status params_parse(const char *list, const nb_plan *start, params *p)
{
    memset(p, 0, sizeof *p);
    /* the names but 'scale' into a buffer of their own: sprintf from the
     * tokens into the string they lie in overlaps (undefined; with
     * _FORTIFY_SOURCE, Ubuntu's default, the first name was lost) */
    char *tokens = nb_xstrdup(list), *names = nb_xstrdup(list), *out = names;
    *out = '\0';
    for (char *tok = strtok(tokens, ","); tok; tok = strtok(NULL, ","))
        if (!strcmp(tok, "scale")) p->with_scale = 1;
        else out += sprintf(out, "%s%s", out == names ? "" : ",", tok);
    free(tokens);
    nb_status st = NB_OK;
    if (out == names && !p->with_scale) st = nb_error_set(NB_ERR_USAGE, "option --refine: no names in '%s'", list);
    if (!st && out != names) st = nb_grad_list_parse(names, &p->names);
    free(names);
    if (st) return nb_error_prefix(st, "--refine");
    for (int j = 0; j < p->names.n && p->with_scale; j++)
        if (!strcmp(nb_param_name(&p->names.param[j]), "fluence"))
            st = nb_error_set(NB_ERR_USAGE, "--refine: 'scale' and 'fluence' are one parameter: name one of them");
    if (!st && p->names.n) st = nb_grad_values(start, &p->names, p->x);
    p->k = p->names.n + p->with_scale;
    if (p->with_scale) p->x[p->k - 1] = 1.0;
    return st;
}

/* The refined plan: the names at their values, the scale into the fluence. */
static nb_status refined_plan(const nb_plan *start, const params *p, nb_plan *out)
{
    if (!p->with_scale) return nb_grad_plan_at(start, &p->names, p->x, out);
    nb_grad_list with = {0, NULL};
    double x[MAX_PARAMS];
    nb_status st = nb_grad_list_parse("scale", &with);
    if (st) return st;
    const nb_param scale = with.param[0];
    nb_grad_list_free(&with);
    if ((st = nb_calloc((void **)&with.param, (size_t)p->names.n + 1, sizeof *with.param, "parameters"))) return st;
    for (int j = 0; j < p->names.n; j++) with.param[j] = p->names.param[j], x[j] = p->x[j];
    with.param[p->names.n] = scale;
    x[p->names.n] = p->x[p->k - 1];
    with.n = p->names.n + 1;
    st = nb_grad_plan_at(start, &with, x, out);
    nb_grad_list_free(&with);
    return st;
}

static void report(const params *p, const double *sigma)
{
    if (nb_verbosity() < 0) return;
    for (int j = 0; j < p->k; j++) {
        const char *unit = j < p->names.n ? nb_param_unit(&p->names.param[j]) : "";
        fprintf(stderr, "%s = %.10g \u00b1 %.3g%s%s\n", param_name(p, j), p->x[j], sigma[j], unit[0] ? " " : "", unit);
    }
}

/* observed - model photons on the pixels used (0 elsewhere), frame after frame */
static nb_status write_residual(const char *path, const problem *pb, const params *p, const model *m)
{
    nb_outfile *of = NULL;
    const double s = p->with_scale ? p->x[p->k - 1] : 1.0;
    float *row;
    nb_status st = nb_calloc((void **)&row, pb->npix, sizeof *row, "the residual");
    if (!st) st = nb_rawfloat_writer_open(&of, path);
    for (long f = 0; f < pb->start->nframes && !st; f++) {
        for (size_t i = 0; i < pb->npix; i++)
            row[i] = pb->obs[f].use[i] ? (float)(pb->obs[f].y[i] - s * m->image[f][i]) : 0.0f;
        st = nb_rawfloat_writer_put(of, row, pb->npix);
    }
    if (!st) st = nb_outfile_commit(of);
    else if (of) nb_outfile_abort(of);
    free(row);
    return st;
}

/* ---- the fit of one plan ------------------------------------------------------------ */

nb_status nb_fit_leave_out_unrendered(const nb_plan *plan, const nb_hkl *hkl, observed *ob)
{
    nb_status st = NB_OK;
    for (int p = 0; p < nb_plan_npanels(plan) && !st; p++) {
        nb_plan view;
        nb_sim_setup setup;
        size_t off;
        nb_plan_panel_view(plan, p, &view);
        nb_plan_panel_dims(plan, p, NULL, NULL, &off);
        if ((st = nb_sim_setup_build(&view, hkl, &setup))) break;
        for (int y = 0; y < view.panels[0].spixels; y++)
            for (int x = 0; x < view.panels[0].fpixels; x++)
                if (!nb_pixel_rendered(&setup.kp, x, y)) ob->use[off + (size_t)y * view.panels[0].fpixels + x] = 0;
        nb_sim_setup_free(&setup);
    }
    return st;
}

static nb_status fit(const nb_plan *start, const nb_hkl *hkl, const fit_opts *o, nb_plan *out)
{
    if (!o->nobserved) return nb_error_set(NB_ERR_USAGE, "no observed image: give --observed FILE");
    if (!o->refine) return nb_error_set(NB_ERR_USAGE, "nothing to refine: give --refine, --refine-frame or --refine-F");
    if (o->nobserved != start->nframes)
        return nb_error_set(NB_ERR_USAGE, "the plan has %d frame%s but %d observed image%s were given", start->nframes,
                            start->nframes == 1 ? "" : "s", o->nobserved, o->nobserved == 1 ? "" : "s");
    params p;
    model m, trial;
    normal_eq e;
    double sigma[MAX_PARAMS];
    observed *obs = NULL;
    const size_t npix = nb_plan_total_pixels(start);
    memset(&m, 0, sizeof m);
    memset(&trial, 0, sizeof trial);
    nb_status st = params_parse(o->refine, start, &p);
    if (!st) st = nb_calloc((void **)&obs, (size_t)o->nobserved, sizeof *obs, "the observed images");
    for (int f = 0; f < o->nobserved && !st; f++) st = nb_fit_observed_read(o->observed[f], o, start, f, &obs[f]);
    if (!st) st = model_alloc(&m, &p, start->nframes, npix, 1);
    if (!st) st = model_alloc(&trial, &p, start->nframes, npix, 0);
    const problem pb = {start, hkl, obs, o, npix, o->precision ? NB_GRAD_DOUBLE : NB_GRAD_FAST};
    for (int f = 0; f < o->nobserved && !st; f++) st = nb_fit_leave_out_unrendered(start, hkl, &obs[f]);
    /* least squares first: far from the optimum the Poisson likelihood has
     * many local minima (a photon where the model has none weighs log 0),
     * the squares one wide basin */
    if (!st) st = refine(&pb, NB_FIT_LSQ, &p, &m, &trial, &e);
    if (!st && o->loss == NB_FIT_POISSON) st = refine(&pb, NB_FIT_POISSON, &p, &m, &trial, &e);
    if (!st) st = sigmas(&p, &e, o->loss, sigma);
    if (!st) report(&p, sigma);
    if (!st && o->residual) st = write_residual(o->residual, &pb, &p, &m);
    if (!st) st = refined_plan(start, &p, out);
    for (int f = 0; obs && f < o->nobserved; f++) nb_fit_observed_free(&obs[f]);
    free(obs);
    model_free(&m, start->nframes);
    model_free(&trial, start->nframes);
    nb_grad_list_free(&p.names);
    return st;
}

/* ---- options and main ---------------------------------------------------------------- */

static nb_status add_observed(const nb_opt_args *a)
{
    fit_opts *o = a->dest;
    if (o->nobserved == NB_FIT_MAX_OBSERVED)
        return nb_error_set(NB_ERR_USAGE, "at most %d observed images", NB_FIT_MAX_OBSERVED);
    if (o->nobserved == o->observed_cap) {
        int cap = o->observed_cap ? 2 * o->observed_cap : 64;
        const char **more = realloc(o->observed, (size_t)cap * sizeof *more);
        if (!more) return nb_error_set(NB_ERR_NOMEM, "out of memory for the observed images' names");
        o->observed = more, o->observed_cap = cap;
    }
    o->observed[o->nobserved++] = a->vals[0];
    return NB_OK;
}

/* One --observed with a run of '#': a name per frame fitted (every frame of
 * the plan, or --frames'), the run the frame's number as nb_frame_path makes
 * it (nb-convert -o s_#.cbf's names). */
static nb_status observed_pattern(fit_opts *o, const nb_plan *start)
{
    if (o->nobserved != 1 || !strchr(o->observed[0], '#')) return NB_OK;
    const char *tmpl = o->observed[0];
    const long first = o->frame_first ? o->frame_first - 1 : 0;
    const long n = o->frame_first ? o->frame_last - o->frame_first + 1 : start->nframes;
    const size_t each = strlen(tmpl) + 24;
    char *names;
    const char **list;
    if (n < 1 || n > NB_FIT_MAX_OBSERVED) return nb_error_set(NB_ERR_USAGE, "option --observed: %ld frames", n);
    nb_status st = nb_calloc((void **)&names, (size_t)n, each, "the observed images' names");
    if (st) return st;
    if ((st = nb_calloc((void **)&list, (size_t)n, sizeof *list, "the observed images' names"))) {
        free(names);
        return st;
    }
    for (long i = 0; i < n && !st; i++) {
        list[i] = names + (size_t)i * each;
        if (nb_frame_path(tmpl, first + i, names + (size_t)i * each, each))
            st = nb_error_set(NB_ERR_USAGE, "option --observed: '%s' holds '#' in two places (one run of '#' is the "
                                            "frame number)", tmpl);
    }
    if (st) {
        free(names);
        free(list);
        return st;
    }
    free(o->observed);
    o->observed = list, o->nobserved = (int)n, o->observed_cap = (int)n;
    o->observed_names = names;
    return NB_OK;
}

/* --frames A:B, 1-based and inclusive */
static nb_status set_frames(const nb_opt_args *a)
{
    fit_opts *o = a->dest;
    int first, last;
    nb_status st = nb_parse_frames(a->vals[0], &first, &last);
    if (!st) o->frame_first = first, o->frame_last = last;
    return st;
}

static const nb_opt_choice losses[] = {{"poisson", NB_FIT_POISSON}, {"lsq", NB_FIT_LSQ}, {NULL, 0}};
static const nb_opt_choice globals[] = {
    {"auto", NB_FIT_GLOBAL_AUTO}, {"on", NB_FIT_GLOBAL_ON}, {"off", NB_FIT_GLOBAL_OFF}, {NULL, 0}};
static const nb_opt_choice precisions[] = {{"double", 1}, {"single", 0}, {NULL, 0}};
static const nb_opt_choice devices[] = {
    {"cpu", NB_ENGINE_CPU}, {"cuda", NB_ENGINE_CUDA}, {"auto", NB_ENGINE_AUTO}, {NULL, 0}};

#define FO(f) NB_AT(fit_opts, f)
static const nb_opt rows[] = {
    {NB_OPT_LOCAL, "--observed", 1, "FILE",
     "an observed image: CBF, SMV, TIFF (counts, or float photons), an nb\n"
     "stream (.nbs: its IMAGE record) or raw float photons of the plan's\n"
     "size (a detector of panels: .nbs, or raw float of all its panels);\n"
     "once per frame of the plan (of --frames), in frame order; or once, a\n"
     "name with a run of '#', the frame number (from 1, zero-padded to the\n"
     "run's length, as nb-convert -o s_#.cbf names them): s_###.cbf",
     .needs = "a file name", .type = NB_OPT_CALLBACK, .fn = add_observed},
    {NB_OPT_LOCAL, "--refine", 1, "LIST",
     "the parameters to refine, comma-separated: the names of nb-sim --grad\n"
     "(distance, Xbeam, Ybeam, misset_x, rot_x, cell_a, Na, lambda, panel0_shift_fast,\n"
     "...) and scale",
     .needs = "a list of names", .type = NB_OPT_STRING, .at = {FO(refine)}},
    {NB_OPT_LOCAL, "--loss", 1, "poisson|lsq",
     "the likelihood: Poisson photon counts (default) or least squares",
     .type = NB_OPT_CHOICE, .at = {FO(loss)}, .choices = losses, .expected = "'poisson' or 'lsq'"},
    {NB_OPT_LOCAL, "--adc", 1, "ADU",
     "the observed counts' ADC offset (default: the image's ADC_OFFSET or\n"
     "COUNTS_ADC; 0 for a CBF, which counts from 0; else the plan's -adc)",
     .type = NB_OPT_DOUBLE, .at = {FO(adc)}, .sets = {{FO(have_adc), 1}}},
    {NB_OPT_LOCAL, "--gain", 1, "ADU/PHOTON", "the observed counts' gain (default: COUNTS_GAIN, else 1)",
     .type = NB_OPT_DOUBLE, .check = NB_CHECK_POSITIVE, .at = {FO(gain)}, .sets = {{FO(have_gain), 1}}},
    {NB_OPT_LOCAL, "--overload", 1, "ADU",
     "counts from this value up are overloads, left out (default: the\n"
     "overload the file states, as a CBF does, else its counter's top)",
     .type = NB_OPT_DOUBLE, .at = {FO(overload)}, .sets = {{FO(have_overload), 1}}},
    {FL_PRECISION, .type = NB_OPT_CHOICE, .at = {FO(precision)}, .choices = precisions,
     .expected = "'single' or 'double'", .sets = {{FO(precision_given), 1}}},
    {NB_OPT_LOCAL, "--device", 1, "cpu|cuda|auto",
     "where the model and its derivatives are rendered (default cpu; auto:\n"
     "CUDA when this build has it and a GPU is present, as nb-sim)",
     .type = NB_OPT_CHOICE, .at = {FO(device)}, .choices = devices, .expected = "cpu, cuda or auto"},
    {NB_OPT_LOCAL, "--iterations", 1, "N", "at most N Levenberg-Marquardt iterations (default 50)",
     .type = NB_OPT_INT, .at = {FO(iterations)}},
    {NB_OPT_LOCAL, "--residual", 1, "FILE",
     "write observed - model photons of the fit (raw float, 0 where a pixel\n"
     "is not used; the frames one after another); not in a dataset fit",
     .needs = "a file name", .type = NB_OPT_STRING, .at = {FO(residual)}},
    {NB_OPT_LOCAL, "--refine-frame", 1, "LIST",
     "a dataset fit: the parameters each frame has its own value of:\n"
     "rot_x, rot_y, rot_z (small turns of the frame's crystal about the\n"
     "lab axes, degrees), cell_a ... cell_gamma, Na, Nb, Nc, lambda,\n"
     "mosaic (the spread, degrees: the plan's domains, -mosaic_domains, their\n"
     "angles scaled), scale.  --refine then names the shared ones: distance,\n"
     "Xbeam, Ybeam (the whole detector moved), cell_*, Na, Nb, Nc, lambda,\n"
     "mosaic, scale",
     .needs = "a list of names", .type = NB_OPT_STRING, .at = {FO(refine_frame)}},
    {NB_OPT_LOCAL, "--refine-F", 0, NULL,
     "a dataset fit: refine the structure factor of every reflection of the\n"
     "asymmetric unit over every frame that passes its verdict; the refined\n"
     "F go into the output's HKL record.  A stream without F (no HKL record,\n"
     "no -default_F) starts flat: every F the square root of the observed\n"
     "photons above each panel's median over the model's with every F = 1",
     .type = NB_OPT_SET, .sets = {{FO(refine_F), 1}}},
    {NB_OPT_LOCAL, "--F-out", 1, "FILE",
     "write the refined F as text lines 'h k l F sigma multiplicity' (the\n"
     "asymmetric unit; P1: with the Friedel mates), or a FILE.mtz: MTZ\n"
     "columns H K L F SIGF N (CCP4's asymmetric unit)",
     .needs = "a file name", .type = NB_OPT_STRING, .at = {FO(F_out)}},
    {NB_OPT_LOCAL, "--space-group", 1, "NAME|FILE.mtz",
     "the space group whose asymmetric unit --refine-F refines: a name as\n"
     "CCP4's syminfo.lib ('P 21 21 21', P212121, 'C 1 2 1'), a Hall symbol\n"
     "(' P 2ac 2ab'), or an MTZ file's symmetry (default: the plan's, as the\n"
     "experiment list of nb-geom -expt states it, else P1)",
     .needs = "a space group", .type = NB_OPT_STRING, .at = {FO(space_group)}},
    {NB_OPT_LOCAL, "--F-prior", 1, "W",
     "the weight of --refine-F's Wilson prior (default 1; 0: none)",
     .type = NB_OPT_DOUBLE, .check = NB_CHECK_NONNEG, .at = {FO(F_prior)}},
    {NB_OPT_LOCAL, "--roi-radius", 1, "PX",
     "a dataset fit's regions: each spot's pixels grown by PX (default 3)",
     .type = NB_OPT_DOUBLE, .check = NB_CHECK_NONNEG, .at = {FO(roi_radius)}},
    {NB_OPT_LOCAL, "--spot-photons", 1, "P",
     "a model pixel of P photons or more is in a predicted spot (default 0.5)",
     .type = NB_OPT_DOUBLE, .check = NB_CHECK_POSITIVE, .at = {FO(spot_photons)}},
    {NB_OPT_LOCAL, "--global", 1, "auto|on|off",
     "the global stage (a search over turns, cells, distance and beam centre\n"
     "on the observed spots) before the pixels are fitted: auto (default)\n"
     "when turns or the detector's position are refined",
     .type = NB_OPT_CHOICE, .at = {FO(global)}, .choices = globals, .expected = "'auto', 'on' or 'off'"},
    {NB_OPT_LOCAL, "--global-range", 1, "DEG", "the turns the global stage searches, +- DEG (default 4)",
     .type = NB_OPT_DOUBLE, .check = NB_CHECK_POSITIVE, .at = {FO(global_range)}},
    {NB_OPT_LOCAL, "--global-distance", 1, "MM", "the distances the global stage searches, +- MM (default 15)",
     .type = NB_OPT_DOUBLE, .check = NB_CHECK_POSITIVE, .at = {FO(global_distance)}},
    {NB_OPT_LOCAL, "--global-beam", 1, "MM", "the beam centres the global stage searches, +- MM (default 1)",
     .type = NB_OPT_DOUBLE, .check = NB_CHECK_POSITIVE, .at = {FO(global_beam)}},
    {NB_OPT_LOCAL, "--max-deviance", 1, "R",
     "a frame fails when its Poisson deviance is more than R times what the\n"
     "model's own counts would give (default 1.5)",
     .type = NB_OPT_DOUBLE, .check = NB_CHECK_POSITIVE, .at = {FO(max_deviance)}},
    {NB_OPT_LOCAL, "--min-explained", 1, "F",
     "a frame fails when less than F of its predicted spots (bright enough to\n"
     "judge) are in the observed image, or less than F of its strongest\n"
     "observed spots are predicted (default 0.5)",
     .type = NB_OPT_DOUBLE, .check = NB_CHECK_NONNEG, .at = {FO(min_explained)}},
    {NB_OPT_LOCAL, "--frames", 1, "A:B",
     "a dataset fit of frames A to B alone (counted from 1; --observed once\n"
     "for each): the others keep their start (a Slurm array's share)",
     .needs = "FIRST:LAST", .type = NB_OPT_CALLBACK, .fn = set_frames},
};
#undef FO
static const nb_opt_table table = {NB_FIT, rows, (int)(sizeof rows / sizeof rows[0])};

/* The start model from the stream: its (one) PLAN and HKL records. */
static nb_status read_start(nb_reader *r, nb_plan *plan, nb_record *hkl_rec, int *have_plan, int *have_hkl)
{
    nb_record rec;
    int eof = 0;
    nb_status st = NB_OK;
    memset(&rec, 0, sizeof rec);
    while (!st) {
        if ((st = nb_reader_next(r, &rec, &eof)) || eof) break;
        if (nb_record_is(&rec, "PLAN")) {
            if (*have_plan) {
                st = nb_error_set(NB_ERR_USAGE, "the stream holds more than one plan: nb-fit fits one");
                break;
            }
            if (!(st = nb_plan_from_record(&rec, plan))) *have_plan = 1;
        } else if (nb_record_is(&rec, "HKL") && *have_plan && !*have_hkl) {
            *hkl_rec = rec;
            memset(&rec, 0, sizeof rec);
            *have_hkl = 1;
        }
    }
    nb_record_free(&rec);
    if (!st && !*have_plan) st = nb_error_set(NB_ERR_DATA, "%s: the stream holds no PLAN record", nb_reader_name(r));
    return st;
}

/* Frame f's photons above its panels' medians (the background where spots
 * are sparse), and the model's with every F = 1, into sums[0], sums[1]. */
static nb_status frame_level(const nb_plan *plan, const fit_opts *o, long f, float *model, double sums[2])
{
    nb_hkl ones;
    nb_hkl_init(&ones);
    ones.default_F = 1.0;
    observed ob;
    memset(&ob, 0, sizeof ob);
    const long slot = o->frame_first ? f - (o->frame_first - 1) : f;
    const nb_grad_path path = o->precision_given && o->precision ? NB_GRAD_DOUBLE : NB_GRAD_FAST;
    nb_status st = nb_fit_observed_read(o->observed[slot], o, plan, f, &ob);
    if (!st) st = nb_fit_leave_out_unrendered(plan, &ones, &ob);
    if (!st) st = render_frame(plan, &ones, NULL, path, f, model, NULL, 0);
    for (int p = 0; p < nb_plan_npanels(plan) && !st; p++) {
        int fp, sp;
        size_t off;
        nb_plan_panel_dims(plan, p, &fp, &sp, &off);
        const size_t n = (size_t)fp * sp;
        const double med = nb_fit_panel_median(&ob, off, n);
        for (size_t i = off; i < off + n; i++)
            if (ob.use[i]) sums[0] += ob.y[i] - med, sums[1] += model[i];
    }
    nb_fit_observed_free(&ob);
    return st;
}

/* --refine-F from a plan without structure factors (no HKL record, no
 * -default_F, no file asked for): a flat start, every F the square root of
 * the level the observed pixels ask for, their photons above the background
 * over the model's with every F = 1, summed over the frames fitted (on every
 * process: the same F everywhere; docs/physics.md 15.1). */
static nb_status flat_start(const nb_plan *plan, const fit_opts *o, const nb_par *par, nb_hkl *hkl)
{
    /* frames without an image (none, too few given, or --frames past the
     * plan's) are the fit's errors to report, after this */
    if (!o->nobserved) return NB_OK;
    const long first = o->frame_first ? o->frame_first - 1 : 0;
    long last = o->frame_first ? o->frame_last - 1 : plan->nframes - 1;
    if (last >= plan->nframes) last = plan->nframes - 1;
    if (last >= first + o->nobserved) last = first + o->nobserved - 1;
    double sums[2] = {0, 0};
    float *model = NULL;
    nb_status st = nb_calloc((void **)&model, nb_plan_total_pixels(plan), sizeof *model, "the model");
    for (long f = first; f <= last && !st; f++)
        if (nb_par_owns(par, f, plan->nframes)) st = frame_level(plan, o, f, model, sums);
    free(model);
    st = nb_par_agree(par, st);
    if (!st) st = nb_par_sum(par, sums, 2);
    if (!st && !(sums[0] > 0 && sums[1] > 0))
        st = nb_error_set(NB_ERR_DATA, "--refine-F: the plan has no structure factors, and the observed images hold "
                                       "no photons above their background to start a flat F from: give F (nb-hkl, "
                                       "or nb-geom -default_F)");
    if (st) return st;
    hkl->default_F = sqrt(sums[0] / sums[1]);
    nb_info("--refine-F: no structure factors in the plan: a flat start, F = %.6g", hkl->default_F);
    return NB_OK;
}

/* The start model's structure factors: the HKL record's, the plan's, or
 * for --refine-F from a plan that asks for none, a flat start. */
static nb_status start_hkl(const nb_plan *plan, const nb_record *rec, int have, const fit_opts *o, const nb_par *par,
                           nb_hkl *hkl)
{
    nb_hkl_init(hkl);
    if (have) return nb_hkl_from_record(rec, hkl);
    const int asks = plan->default_F != 0.0 || plan->hkl_file || (plan->dump_file && !plan->dump_implicit);
    return o->refine_F && !asks ? flat_start(plan, o, par, hkl) : nb_sim_plan_F(plan, hkl);
}

/* The refined plan (and the start's HKL record) to the output. */
static nb_status write_fit(const char *output, const nb_plan *plan, const nb_record *hkl_rec, int have_hkl)
{
    nb_record rec;
    nb_writer *w = NULL;
    nb_status st = nb_plan_to_record(plan, &rec);
    if (!st) st = nb_writer_open(&w, output);
    if (!st) st = nb_writer_put(w, &rec);
    if (!st && have_hkl) st = nb_writer_put(w, hkl_rec);
    if (!st) st = nb_writer_end(w);
    if (!st) st = nb_writer_close(w);
    else if (w) nb_writer_abort(w);
    nb_record_free(&rec);
    return st;
}

/* The defaults of the options (fit_opts is zeroed first). */
static void defaults(fit_opts *o)
{
    memset(o, 0, sizeof *o);
    o->iterations = 50;
    o->device = NB_ENGINE_CPU;
    o->precision = 1;
    o->roi_radius = 3.0;
    o->spot_photons = 0.5;
    o->global_range = 4.0;
    o->global_distance = 15.0;
    o->global_beam = 1.0;
    o->max_deviance = 1.5;
    o->min_explained = 0.5;
    o->F_prior = 1.0;
}

/* Is this a dataset fit (nb_fit_dataset.c) or one set of parameters? */
static int dataset_fit(const fit_opts *o, const nb_plan *start)
{
    return o->refine_frame || o->refine_F || start->frame_crystals;
}

/* The fit of either kind: the refined plan (and F) into out, refined_F. */
static nb_status run_fit(const nb_plan *start, const nb_hkl *hkl, const fit_opts *o, const nb_par *par,
                         nb_plan *out, nb_hkl *refined_F, int *failed)
{
    *failed = 0;
    if (dataset_fit(o, start)) {
        if (!o->nobserved) return nb_error_set(NB_ERR_USAGE, "no observed image: give --observed FILE");
        return nb_fit_dataset(start, hkl, o, engine, par, out, refined_F, failed);
    }
    if (par->size > 1)
        return nb_error_set(NB_ERR_USAGE, "only a dataset fit (--refine-frame, --refine-F) runs across processes");
    if (o->frame_first) return nb_error_set(NB_ERR_USAGE, "option --frames: only with --refine-frame or --refine-F");
    return fit(start, hkl, o, out);
}

int main(int argc, char **argv)
{
    nb_std_opts opts;
    fit_opts o;
    nb_par par;
    defaults(&o);
    nb_set_tool_name(tool.name);
    nb_exit_on_error(nb_par_init(&par, &argc, &argv));
    nb_std_opts_init(&opts);
    nb_stream_to_stdout(1);
    nb_exit_on_error(nb_tool_parse(&tool, &opts, &o, argc, argv));
    nb_exit_on_error(nb_std_apply(&opts));
    nb_stream_to_stdout(par.rank == 0 && !strcmp(opts.output, "-"));
    if (par.rank != 0 && nb_verbosity() > 0) nb_set_verbosity(0);
    if (o.device != NB_ENGINE_CPU) nb_cuda_environment(); /* before any thread starts */
    nb_exit_on_error(nb_engine_open(&engine, (nb_engine_device)o.device));
    if (o.iterations < 1) nb_exit_on_error(nb_error_set(NB_ERR_USAGE, "option --iterations: at least 1"));

    nb_reader *r = NULL;
    nb_plan start, refined;
    nb_record hkl_rec;
    nb_hkl hkl, refined_F;
    int have_plan = 0, have_hkl = 0, failed = 0;
    memset(&hkl_rec, 0, sizeof hkl_rec);
    nb_hkl_init(&hkl);
    nb_hkl_init(&refined_F);
    nb_status st = NB_OK;
    /* mpirun hands standard input to rank 0 alone */
    if (par.size > 1 && !strcmp(opts.input, "-"))
        st = nb_error_set(NB_ERR_USAGE, "under mpirun every process reads the start: give it as a file (nb-fit ... "
                                        "start.nbs), not on standard input");
    /* and gives each a terminal for its standard output: no way for a stream */
    if (!st && par.size > 1 && !strcmp(opts.output, "-"))
        st = nb_error_set(NB_ERR_USAGE, "under mpirun write the refined stream with -o FILE (mpirun gives every "
                                        "process a terminal, not a pipe, for standard output)");
    if (!st) st = nb_reader_open(&r, opts.input);
    if (!st) st = read_start(r, &start, &hkl_rec, &have_plan, &have_hkl);
    if (!st) st = observed_pattern(&o, &start);
    if (!st) st = start_hkl(&start, &hkl_rec, have_hkl, &o, &par, &hkl);
    int have_refined = 0;
    if (!st) have_refined = !(st = run_fit(&start, &hkl, &o, &par, &refined, &refined_F, &failed));
    if (!st && par.rank == 0) {
        nb_record F_rec;
        int have_F = refined_F.hkls > 0;
        if (have_F) st = nb_hkl_to_record(&refined_F, &F_rec);
        if (!st) st = write_fit(opts.output, &refined, have_F ? &F_rec : &hkl_rec, have_F || have_hkl);
        if (have_F) nb_record_free(&F_rec);
    }
    if (have_refined) nb_plan_free(&refined);
    if (have_plan) nb_plan_free(&start);
    nb_hkl_free(&hkl);
    nb_hkl_free(&refined_F);
    nb_record_free(&hkl_rec);
    nb_reader_close(r);
    nb_engine_close(engine);
    free(o.observed);
    free(o.observed_names);
    free(frames_read);
    /* a failure the processes agreed on: exit, every process having said so
     * (nb_par's exit handler waits for the others and finalizes) */
    nb_exit_on_error(st);
    nb_par_finalize(&par);
    /* the fit ran and the stream is whole; a frame's verdict failed: 3 (documented) */
    return failed ? 3 : 0;
}
