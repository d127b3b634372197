/* nb.c - the engine's public C API (nb.h) over the renderer the tools use
 * (nb_engine.h): a plan and its structure factors held, frames, panels and
 * regions rendered into the caller's buffers, errors as codes and a
 * message.  The named options, the plans from flags and the noise are the
 * nb_api_*.c files'. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "nb_api.h"
#include "nb_stream.h"

_Static_assert((int)NB_RESULT_USAGE == (int)NB_ERR_USAGE && (int)NB_RESULT_IO == (int)NB_ERR_IO &&
                   (int)NB_RESULT_DATA == (int)NB_ERR_DATA && (int)NB_RESULT_NOMEM == (int)NB_ERR_NOMEM &&
                   (int)NB_RESULT_UNSUPPORTED == (int)NB_ERR_UNSUPPORTED,
               "nb.h's results are nb_error.h's statuses");
/* the Makefile passes the VERSION file's number: nb.h must say the same */
#ifdef NB_VERSION_NUMBER_BUILT
_Static_assert(NB_VERSION_NUMBER == NB_VERSION_NUMBER_BUILT, "nb.h's NB_VERSION_* are not the VERSION file's");
#endif

int nb_api_result(nb_status st)
{
    return st == NB_ERR_PIPE || st == NB_ERR_UPSTREAM ? NB_RESULT_DATA : (int)st;
}

const char *nb_last_error(void)
{
    return nb_error_message();
}

const char *nb_version(void)
{
    return NB_VERSION;
}

int nb_version_number(void)
{
    return NB_VERSION_NUMBER;
}

void nb_free(void *p)
{
    free(p);
}

void nb_set_log_level(int level)
{
    nb_set_verbosity(level);
}

void nb_render_config_init(nb_render_config *c)
{
    c->device = NB_DEVICE_CPU;
    c->precision = NB_PRECISION_PLAN;
    c->threads = 0;
}

/* The engine's name for a device choice (checked in range first). */
static nb_engine_device engine_device(nb_device_choice d)
{
    return d == NB_DEVICE_CUDA ? NB_ENGINE_CUDA : d == NB_DEVICE_AUTO ? NB_ENGINE_AUTO : NB_ENGINE_CPU;
}

nb_status nb_api_renderer_make(nb_plan *plan, nb_hkl *hkl, int have_hkl, const nb_render_config *c, int wait_for_F,
                               nb_renderer **out)
{
    nb_render_config defaults;
    nb_render_config_init(&defaults);
    if (!c) c = &defaults;
    nb_status st = NB_OK;
    if ((unsigned)c->device > NB_DEVICE_AUTO || (unsigned)c->precision > NB_PRECISION_DOUBLE || c->threads < 0)
        st = nb_error_set(NB_ERR_USAGE, "nb_render_config: device %d, precision %d or threads %d out of range",
                          (int)c->device, (int)c->precision, c->threads);
    int have_F = have_hkl;
    if (!st && !have_hkl) {
        st = nb_sim_plan_F(plan, hkl);
        have_F = !st;
        if (st && wait_for_F) st = NB_OK; /* nb_renderer_set_F gives them */
    }
    nb_renderer *r = NULL;
    if (!st) st = nb_calloc((void **)&r, 1, sizeof *r, "the renderer");
    if (!st) st = nb_engine_open(&r->engine, engine_device(c->device));
    if (st) {
        if (r) free(r);
        nb_plan_free(plan);
        nb_hkl_free(hkl);
        return st;
    }
    r->plan = *plan, r->hkl = *hkl;
    r->have_F = have_F;
    r->precision = c->precision == NB_PRECISION_PLAN ? -1 : c->precision == NB_PRECISION_DOUBLE;
    r->threads = c->threads;
    r->device = c->device;
    *out = r;
    return NB_OK;
}

/* The first PLAN record of a stream and the HKL record right after it. */
static nb_status read_plan_hkl(nb_reader *rd, nb_plan *plan, nb_hkl *hkl, int *have_hkl)
{
    nb_record rec;
    int eof = 0, have_plan = 0;
    nb_status st = NB_OK;
    memset(&rec, 0, sizeof rec);
    while (!st && !*have_hkl) {
        if ((st = nb_reader_next(rd, &rec, &eof)) || eof) break;
        if (!have_plan && nb_record_is(&rec, "PLAN")) {
            if (!(st = nb_plan_from_record(&rec, plan))) have_plan = 1;
        } else if (have_plan && nb_record_is(&rec, "HKL")) {
            if (!(st = nb_hkl_from_record(&rec, hkl))) *have_hkl = 1;
        } else if (have_plan) {
            break; /* the plan's records end: it has no HKL */
        }
    }
    nb_record_free(&rec);
    if (!st && !have_plan) st = nb_error_set(NB_ERR_DATA, "the stream holds no PLAN record");
    if (st && have_plan) nb_plan_free(plan);
    return st;
}

/* A renderer from a stream's bytes (who: the caller, for messages). */
static nb_status from_stream(const char *who, const void *bytes, size_t size, const nb_render_config *c,
                             int wait_for_F, nb_renderer **out)
{
    nb_reader *rd = NULL;
    nb_plan plan;
    nb_hkl hkl;
    int have_hkl = 0;
    if (!out) return nb_error_set(NB_ERR_USAGE, "%s: no place for the renderer", who);
    *out = NULL;
    nb_plan_init(&plan);
    nb_hkl_init(&hkl);
    if (!bytes) return nb_error_set(NB_ERR_USAGE, "%s: no bytes", who);
    nb_status st = nb_reader_open_mem(&rd, bytes, size, "the stream");
    if (!st) st = read_plan_hkl(rd, &plan, &hkl, &have_hkl);
    nb_reader_close(rd);
    if (st) {
        nb_hkl_free(&hkl);
        return st;
    }
    return nb_api_renderer_make(&plan, &hkl, have_hkl, c, wait_for_F, out);
}

int nb_renderer_from_stream(const void *bytes, size_t size, const nb_render_config *c, nb_renderer **out)
{
    return nb_api_result(from_stream("nb_renderer_from_stream", bytes, size, c, 0, out));
}

int nb_renderer_from_stream_opts(const void *bytes, size_t size, const nb_options *options, nb_renderer **out)
{
    static const char who[] = "nb_renderer_from_stream_opts";
    nb_render_config c;
    if (out) *out = NULL;
    nb_status st = nb_api_render_config(options, who, &c);
    return nb_api_result(st ? st : from_stream(who, bytes, size, &c, 1, out));
}

int nb_renderer_from_plan(const struct nb_plan *plan, const struct nb_hkl *hkl, const nb_render_config *c,
                          nb_renderer **out)
{
    nb_record rec;
    nb_plan copy;
    nb_hkl hcopy;
    if (!out) return nb_error_set(NB_ERR_USAGE, "nb_renderer_from_plan: no place for the renderer");
    *out = NULL;
    nb_plan_init(&copy);
    nb_hkl_init(&hcopy);
    if (!plan) return nb_error_set(NB_ERR_USAGE, "nb_renderer_from_plan: no plan");
    /* the copies through the records: every array the structures own (the
     * writers initialise the record) */
    nb_status st = nb_plan_to_record(plan, &rec);
    if (!st) st = nb_plan_from_record(&rec, &copy);
    nb_record_free(&rec);
    if (!st && hkl) {
        st = nb_hkl_to_record(hkl, &rec);
        if (!st) st = nb_hkl_from_record(&rec, &hcopy);
        nb_record_free(&rec);
        if (st) nb_plan_free(&copy);
    }
    if (st) return nb_api_result(st);
    return nb_api_result(nb_api_renderer_make(&copy, &hcopy, hkl != NULL, c, 0, out));
}

void nb_renderer_free(nb_renderer *r)
{
    if (!r) return;
    if (r->have_grad_plans) nb_grad_plans_free(&r->grad_plans);
    nb_grad_list_free(&r->names);
    free(r->vjp_scratch);
    nb_engine_close(r->engine);
    nb_plan_free(&r->plan);
    nb_hkl_free(&r->hkl);
    free(r);
}

/* the counts of no renderer are 0, as a call on none is a usage error */
int nb_renderer_frames(const nb_renderer *r)
{
    return !r ? 0 : r->plan.nframes > 0 ? r->plan.nframes : 1;
}

int nb_renderer_panels(const nb_renderer *r)
{
    return r ? nb_plan_npanels(&r->plan) : 0;
}

int nb_renderer_panel_size(const nb_renderer *r, int panel, int *fast, int *slow)
{
    if (!r) return nb_error_set(NB_ERR_USAGE, "nb_renderer_panel_size: no renderer");
    if (panel < 0 || panel >= nb_plan_npanels(&r->plan))
        return nb_error_set(NB_ERR_USAGE, "panel %d: the detector has %d", panel, nb_plan_npanels(&r->plan));
    nb_plan_panel_dims(&r->plan, panel, fast, slow, NULL);
    return NB_RESULT_OK;
}

size_t nb_renderer_pixels(const nb_renderer *r)
{
    return r ? nb_plan_total_pixels(&r->plan) : 0;
}

/* A renderer with structure factors, frame and panel in range; the run's
 * threads set. */
static nb_status check_call(const nb_renderer *r, long frame, int panel)
{
    if (!r) return nb_error_set(NB_ERR_USAGE, "no renderer");
    if (!r->have_F) {
        /* why there are none, as nb-sim says it, and what gives them */
        nb_hkl none;
        char why[512];
        nb_hkl_init(&none);
        nb_status st = nb_sim_plan_F(&r->plan, &none);
        snprintf(why, sizeof why, "%s", st ? nb_error_message() : "no structure factors");
        return nb_error_set(NB_ERR_USAGE, "%s; nb_renderer_set_F gives them", why);
    }
    if (frame < 0 || frame >= nb_renderer_frames(r))
        return nb_error_set(NB_ERR_USAGE, "frame %ld: the plan has %d (0-based)", frame, nb_renderer_frames(r));
    if (panel < 0 || panel >= nb_plan_npanels(&r->plan))
        return nb_error_set(NB_ERR_USAGE, "panel %d: the detector has %d", panel, nb_plan_npanels(&r->plan));
#ifdef _OPENMP
    if (r->threads > 0) omp_set_num_threads(r->threads);
#endif
    nb_parallel_min_set(NB_PARALLEL_MIN_LIBRARY); /* no pipe beside a library's caller (nb_tuning.h) */
    return NB_OK;
}

/* Where a render's pixels go, each NULL where not wanted: nb-sim's floats,
 * or the double path's own doubles (wide: that path on the CPU); vjp: the
 * derivatives' product with its weights (the panel's) in place of them. */
typedef struct frame_out {
    float *photons;
    float **grads;
    double *wide_photons;
    double **wide_grads;
    const nb_vjp_io *vjp;
    int wide_vjp; /* vjp of the double path's derivatives in double */
} frame_out;

/* Panel `panel` of frame `frame` (view: that panel of the frame's plan,
 * perhaps with a region's ROI and mask) into out (its buffers the panel's). */
static nb_status render_view(nb_renderer *r, const nb_plan *view, long frame, int panel, const frame_out *out)
{
    nb_panel_done done;
    const int grads = out->grads || out->wide_grads || out->vjp;
    const nb_wide_out wide = {out->wide_photons, out->wide_grads};
    const int wide_wanted = out->wide_photons || out->wide_grads || out->wide_vjp;
    const nb_panel_job job = {wide_wanted ? 1 : r->precision, grads ? &r->grad_plans : NULL, frame, panel,
                              out->grads, NULL, NULL, NULL, 0, wide_wanted ? &wide : NULL, out->vjp};
    nb_status st = nb_engine_render_panel(r->engine, view, &r->hkl, &job, out->photons, &done);
    nb_panel_done_free(&done);
    return st;
}

/* Every panel of a frame, or the one asked (panel >= 0), at their places in
 * out's buffers (a panel's own buffers when one is asked). */
static nb_status render_panels(nb_renderer *r, long frame, int panel, const frame_out *out)
{
    nb_plan frame_plan, view;
    nb_source *sources = NULL;
    nb_status st = nb_engine_frame(&r->plan, frame, &frame_plan, &sources);
    const int n = r->names.n;
    for (int i = panel >= 0 ? panel : 0; !st && i < nb_plan_npanels(&r->plan); i++) {
        size_t off = 0;
        float *g[NB_GRAD_MAX_NAMES];
        double *wg[NB_GRAD_MAX_NAMES];
        if (panel < 0) nb_plan_panel_dims(&r->plan, i, NULL, NULL, &off);
        for (int j = 0; out->grads && j < n; j++) g[j] = out->grads[j] + off;
        for (int j = 0; out->wide_grads && j < n; j++) wg[j] = out->wide_grads[j] + off;
        const frame_out at = {out->photons ? out->photons + off : NULL, out->grads ? g : NULL,
                              out->wide_photons ? out->wide_photons + off : NULL, out->wide_grads ? wg : NULL,
                              out->vjp, out->wide_vjp};
        nb_plan_panel_view(&frame_plan, i, &view);
        st = render_view(r, &view, frame, i, &at);
        if (panel >= 0) break;
    }
    free(sources);
    return st;
}

int nb_render_frame(nb_renderer *r, long frame, float *photons)
{
    nb_status st = photons ? check_call(r, frame, 0) : nb_error_set(NB_ERR_USAGE, "nb_render_frame: no buffer");
    const frame_out out = {photons, NULL, NULL, NULL, NULL, 0};
    return nb_api_result(st ? st : render_panels(r, frame, -1, &out));
}

int nb_render_panel(nb_renderer *r, long frame, int panel, float *photons)
{
    nb_status st = photons ? check_call(r, frame, panel) : nb_error_set(NB_ERR_USAGE, "nb_render_panel: no buffer");
    const frame_out out = {photons, NULL, NULL, NULL, NULL, 0};
    return nb_api_result(st ? st : render_panels(r, frame, panel, &out));
}

/* Region k inside its panel (fpixels x spixels)? */
static nb_status check_region(const nb_region *g, int k, int np, const nb_plan *plan)
{
    int fp = 0, sp = 0;
    if (g->panel < 0 || g->panel >= np)
        return nb_error_set(NB_ERR_USAGE, "region %d: panel %d, the detector has %d", k, g->panel, np);
    nb_plan_panel_dims(plan, g->panel, &fp, &sp, NULL);
    if (g->fast < 0 || g->slow < 0 || g->fast_count < 1 || g->slow_count < 1 || g->fast_count > fp - g->fast ||
        g->slow_count > sp - g->slow)
        return nb_error_set(NB_ERR_USAGE, "region %d: %d x %d pixels at (%d, %d) is not inside panel %d's %d x %d", k,
                            g->fast_count, g->slow_count, g->fast, g->slow, g->panel, fp, sp);
    return NB_OK;
}

/* One panel's regions: its view's ROI their bounding box and its mask their
 * union (within the plan's own ROI and mask), rendered once into scratch;
 * each region's pixels copied to its place in photons (starts[k]). */
static nb_status render_panel_regions(nb_renderer *r, const nb_plan *frame_plan, long frame, int panel,
                                      const nb_region *regions, int count, const size_t *starts, float *scratch,
                                      unsigned char *mask, float *photons)
{
    nb_plan view;
    nb_plan_panel_view(frame_plan, panel, &view);
    const size_t n = (size_t)view.panels[0].fpixels * view.panels[0].spixels;
    int x0 = view.panels[0].fpixels, x1 = -1, y0 = view.panels[0].spixels, y1 = -1;
    memset(mask, 0, n);
    for (int k = 0; k < count; k++) {
        const nb_region *g = &regions[k];
        if (g->panel != panel) continue;
        for (int y = g->slow; y < g->slow + g->slow_count; y++)
            memset(mask + (size_t)y * view.panels[0].fpixels + g->fast, 1, (size_t)g->fast_count);
        x0 = g->fast < x0 ? g->fast : x0, y0 = g->slow < y0 ? g->slow : y0;
        x1 = g->fast + g->fast_count - 1 > x1 ? g->fast + g->fast_count - 1 : x1;
        y1 = g->slow + g->slow_count - 1 > y1 ? g->slow + g->slow_count - 1 : y1;
    }
    if (x1 < 0) return NB_OK; /* no region on this panel */
    if (view.panels[0].mask)
        for (size_t i = 0; i < n; i++) mask[i] &= view.panels[0].mask[i] != 0;
    /* the plan's ROI stays: outside it a region's pixels are 0, as in the panel's image;
     * the view gets a panel of its own (the plan's is shared) */
    nb_panel own = view.panels[0];
    view.panels = &own;
    own.roi_xmin = x0 > own.roi_xmin ? x0 : own.roi_xmin, own.roi_xmax = x1 < own.roi_xmax ? x1 : own.roi_xmax;
    own.roi_ymin = y0 > own.roi_ymin ? y0 : own.roi_ymin, own.roi_ymax = y1 < own.roi_ymax ? y1 : own.roi_ymax;
    own.mask = mask;
    nb_status st = NB_OK;
    const frame_out out = {scratch, NULL, NULL, NULL, NULL, 0};
    if (own.roi_xmin <= own.roi_xmax && own.roi_ymin <= own.roi_ymax)
        st = render_view(r, &view, frame, panel, &out);
    else
        memset(scratch, 0, n * sizeof *scratch);
    for (int k = 0; !st && k < count; k++) {
        const nb_region *g = &regions[k];
        if (g->panel != panel) continue;
        for (int y = 0; y < g->slow_count; y++)
            memcpy(photons + starts[k] + (size_t)y * g->fast_count,
                   scratch + (size_t)(g->slow + y) * view.panels[0].fpixels + g->fast,
                   (size_t)g->fast_count * sizeof *scratch);
    }
    return st;
}

int nb_render_regions(nb_renderer *r, long frame, const nb_region *regions, int count, float *photons)
{
    nb_status st = check_call(r, frame, 0);
    const int np = st ? 0 : nb_plan_npanels(&r->plan);
    if (!st && (count < 0 || (count > 0 && (!regions || !photons))))
        st = nb_error_set(NB_ERR_USAGE, "nb_render_regions: %d regions, no regions or no buffer", count);
    size_t *starts = NULL, largest = 0;
    if (!st && count > 0) st = nb_calloc((void **)&starts, (size_t)count, sizeof *starts, "the regions");
    size_t at = 0;
    for (int k = 0; !st && k < count; k++) {
        st = check_region(&regions[k], k, np, &r->plan);
        starts[k] = at;
        at += (size_t)regions[k].fast_count * regions[k].slow_count;
    }
    for (int i = 0; !st && i < np; i++) {
        int fp = 0, sp = 0;
        nb_plan_panel_dims(&r->plan, i, &fp, &sp, NULL);
        largest = (size_t)fp * sp > largest ? (size_t)fp * sp : largest;
    }
    float *scratch = NULL;
    unsigned char *mask = NULL;
    if (!st && count > 0) st = nb_calloc((void **)&scratch, largest, sizeof *scratch, "a panel's pixels");
    if (!st && count > 0) st = nb_calloc((void **)&mask, largest, 1, "the regions' mask");
    nb_plan frame_plan;
    nb_source *sources = NULL;
    if (!st && count > 0) st = nb_engine_frame(&r->plan, frame, &frame_plan, &sources);
    for (int i = 0; !st && count > 0 && i < np; i++)
        st = render_panel_regions(r, &frame_plan, frame, i, regions, count, starts, scratch, mask, photons);
    free(sources);
    free(mask);
    free(scratch);
    free(starts);
    return nb_api_result(st);
}

int nb_renderer_set_derivatives(nb_renderer *r, const char *names)
{
    if (!r) return nb_error_set(NB_ERR_USAGE, "nb_renderer_set_derivatives: no renderer");
    nb_grad_list list = {0, NULL};
    nb_status st = names && *names ? nb_grad_list_parse(names, &list) : NB_OK;
    if (st) return nb_api_result(st);
    if (list.n > NB_GRAD_MAX_NAMES) {
        nb_grad_list_free(&list);
        return nb_error_set(NB_ERR_USAGE, "at most %d derivatives", NB_GRAD_MAX_NAMES);
    }
    if (r->have_grad_plans) nb_grad_plans_free(&r->grad_plans);
    r->have_grad_plans = 0;
    nb_grad_list_free(&r->names);
    r->names = list;
    return NB_RESULT_OK;
}

int nb_renderer_derivatives(const nb_renderer *r)
{
    return r ? r->names.n : 0;
}

/* A renderer ready for derivatives: names set, the plans around its plan built. */
static nb_status grads_ready(nb_renderer *r, long frame, const char *who)
{
    nb_status st = check_call(r, frame, 0);
    if (!st && r->names.n == 0)
        st = nb_error_set(NB_ERR_USAGE, "%s: no derivatives named: nb_renderer_set_derivatives first", who);
    if (!st && !r->have_grad_plans) {
        st = nb_grad_plans_build(&r->plan, &r->names, &r->grad_plans);
        r->have_grad_plans = !st;
    }
    return st;
}

/* Each derivative's buffer given? */
static nb_status grad_buffers(const nb_renderer *r, void *const *grads, const char *who)
{
    for (int j = 0; j < r->names.n; j++)
        if (!grads || !grads[j]) return nb_error_set(NB_ERR_USAGE, "%s: no buffer for derivative %d", who, j);
    return NB_OK;
}

/* A frame's derivatives (and image) into out, whose buffers per name are
 * `grads` (out's float or double ones). */
static int render_frame_grads(nb_renderer *r, long frame, void *const *grads, const frame_out *out, const char *who)
{
    nb_status st = grads_ready(r, frame, who);
    if (!st) st = grad_buffers(r, grads, who);
    return nb_api_result(st ? st : render_panels(r, frame, -1, out));
}

int nb_render_frame_grad(nb_renderer *r, long frame, float *photons, float **grads)
{
    const frame_out out = {photons, grads, NULL, NULL, NULL, 0};
    return render_frame_grads(r, frame, (void *const *)grads, &out, "nb_render_frame_grad");
}

/* ---- API 3: options reset, pixels in double, the vector-Jacobian product -- */

int nb_renderer_set_options(nb_renderer *r, const nb_options *o)
{
    nb_render_config c;
    nb_status st = r ? nb_api_render_config(o, "nb_renderer_set_options", &c)
                     : nb_error_set(NB_ERR_USAGE, "nb_renderer_set_options: no renderer");
    if (st) return nb_api_result(st);
    if (c.device != r->device) {
        nb_engine *e = NULL;
        if ((st = nb_engine_open(&e, engine_device(c.device)))) return nb_api_result(st);
        nb_engine_close(r->engine);
        r->engine = e;
        r->device = c.device;
    }
    r->precision = c.precision == NB_PRECISION_PLAN ? -1 : c.precision == NB_PRECISION_DOUBLE;
    r->threads = c.threads;
    return NB_RESULT_OK;
}

int nb_render_frame_double(nb_renderer *r, long frame, double *photons)
{
    nb_status st = photons ? check_call(r, frame, 0)
                           : nb_error_set(NB_ERR_USAGE, "nb_render_frame_double: no buffer");
    const frame_out out = {NULL, NULL, photons, NULL, NULL, 0};
    return nb_api_result(st ? st : render_panels(r, frame, -1, &out));
}

int nb_render_frame_grad_double(nb_renderer *r, long frame, double *photons, double **grads)
{
    const frame_out out = {NULL, NULL, photons, grads, NULL, 0};
    return render_frame_grads(r, frame, (void *const *)grads, &out, "nb_render_frame_grad_double");
}

int nb_render_frame_vjp(nb_renderer *r, long frame, nb_precision_choice precision, const double *weights,
                        double *vjp)
{
    static const char who[] = "nb_render_frame_vjp";
    nb_status st = grads_ready(r, frame, who);
    if (!st && (!weights || !vjp)) st = nb_error_set(NB_ERR_USAGE, "%s: no weights or no vjp buffer", who);
    if (!st && (unsigned)precision > NB_PRECISION_DOUBLE)
        st = nb_error_set(NB_ERR_USAGE, "%s: precision %d is not an nb_precision_choice", who, (int)precision);
    if (st) return nb_api_result(st);
    const int kept = r->precision;
    if (precision == NB_PRECISION_FAST) r->precision = 0;
    for (int j = 0; j < r->names.n; j++) vjp[j] = 0.0;
    /* panel by panel, each with its weights; the scratch of the paths that
     * render derivative images first is kept: a backward pass calls again
     * with the same sizes */
    for (int i = 0; !st && i < nb_plan_npanels(&r->plan); i++) {
        size_t off = 0;
        nb_plan_panel_dims(&r->plan, i, NULL, NULL, &off);
        const nb_vjp_io io = {weights + off, vjp, &r->vjp_scratch, &r->vjp_scratch_bytes};
        const frame_out out = {NULL, NULL, NULL, NULL, &io, precision == NB_PRECISION_DOUBLE};
        st = render_panels(r, frame, i, &out);
    }
    r->precision = kept;
    return nb_api_result(st);
}

int nb_renderer_set_F(nb_renderer *r, const int *h, const int *k, const int *l, const double *F, size_t n)
{
    static const char who[] = "nb_renderer_set_F";
    if (!r || !h || !k || !l || !F || n == 0)
        return nb_error_set(NB_ERR_USAGE, "%s: no renderer, an array missing or no reflections (n %zu)", who, n);
    /* nb-hkl's rules for an 'h k l F' list (formats/hkl.c) */
    int box[6] = {h[0], h[0], k[0], k[0], l[0], l[0]};
    for (size_t i = 0; i < n; i++) {
        const int idx[3] = {h[i], k[i], l[i]};
        if (!isfinite(F[i]))
            return nb_error_set(NB_ERR_USAGE, "%s: reflection %zu (%d %d %d): F is not a finite number", who, i, h[i],
                                k[i], l[i]);
        for (int a = 0; a < 3; a++) {
            if (idx[a] < -1000000 || idx[a] > 1000000)
                return nb_error_set(NB_ERR_USAGE, "%s: reflection %zu: Miller index %d is not a reasonable one", who,
                                    i, idx[a]);
            box[2 * a] = idx[a] < box[2 * a] ? idx[a] : box[2 * a];
            box[2 * a + 1] = idx[a] > box[2 * a + 1] ? idx[a] : box[2 * a + 1];
        }
    }
    nb_hkl grid;
    nb_hkl_init(&grid);
    const double default_F = r->plan.default_F;
    nb_status st = nb_hkl_alloc(&grid, box[0], box[1], box[2], box[3], box[4], box[5], default_F);
    if (st) return nb_api_result(nb_error_prefix(st, "%s", who));
    for (size_t i = 0; i < n; i++) grid.F[nb_hkl_index(&grid, h[i], k[i], l[i])] = F[i];
    grid.hkls = (long)n;
    grid.default_F = default_F;
    grid.source = nb_xstrdup(who);
    nb_hkl_free(&r->hkl);
    r->hkl = grid;
    r->have_F = 1;
    return NB_RESULT_OK;
}
