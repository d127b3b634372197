/* nb_engine.c - the renderer as the tools use it (nb_engine.h): a device
 * chosen once per run, a frame's plan, and a panel rendered by the kernel
 * its job asks for. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_engine.h"
#include "nb_stills.h"

struct nb_engine {
    nb_engine_device device;
    int cuda_tried;
    nb_cuda *cuda;
};

nb_status nb_engine_open(nb_engine **e, nb_engine_device device)
{
    nb_status st = nb_calloc((void **)e, 1, sizeof **e, "the engine");
    if (!st) (*e)->device = device;
    return st;
}

void nb_engine_close(nb_engine *e)
{
    if (!e) return;
    nb_cuda_close(e->cuda);
    free(e);
}

nb_cuda *nb_engine_cuda(nb_engine *e)
{
    return e ? e->cuda : NULL;
}

/* Which device renders: CUDA when asked (an error if there is none), or when
 * 'auto' finds one; the CPU otherwise. */
static nb_status pick_device(nb_engine *e, int *use_cuda)
{
    *use_cuda = 0;
    if (e->device == NB_ENGINE_CPU) return NB_OK;
    if (!e->cuda_tried) {
        char desc[256] = "";
        e->cuda_tried = 1;
        const double t0 = nb_now();
        nb_status st = nb_cuda_open(&e->cuda, desc, sizeof desc);
        if (st) {
            if (e->device == NB_ENGINE_CUDA) return nb_error_prefix(st, "--device cuda");
            /* a CUDA build on a machine without a GPU renders on the CPU, as
             * asked ('auto'); -v says why */
            if (nb_cuda_compiled()) nb_info("%s; rendering on the CPU", nb_error_message());
        } else {
            nb_info("rendering on %s", desc);
            /* most of a short GPU run: the driver's start and the context */
            nb_info("  CUDA started in %.0f ms", (nb_now() - t0) * 1e3);
        }
    }
    if (!e->cuda && e->device == NB_ENGINE_CUDA)
        return nb_error_set(NB_ERR_UNSUPPORTED, "--device cuda: no CUDA device");
    *use_cuda = e->cuda != NULL;
    return NB_OK;
}

nb_status nb_engine_frame(const nb_plan *series, long frame, nb_plan *view, nb_source **sources)
{
    int n = 0;
    *sources = NULL;
    nb_plan_frame_view(series, frame, view);
    nb_status st = nb_plan_frame_sources(series, frame, sources, &n);
    if (!st && *sources) view->sources = *sources, view->nsources = n;
    return st;
}

nb_status nb_engine_render_panel(nb_engine *e, const nb_plan *plan, const nb_hkl *hkl, const nb_panel_job *job,
                                 float *img, nb_panel_done *done)
{
    nb_sim_setup setup;
    memset(done, 0, sizeof *done);
    /* the job's precision, else the plan's; derivatives are those of the
     * path that renders the image */
    const int use_double = (job->precision >= 0 ? job->precision : plan->precision_double) == 1;
    const nb_grad_path grad_path = use_double ? NB_GRAD_DOUBLE : NB_GRAD_FAST;
    int use_cuda = 0;
    nb_status st = pick_device(e, &use_cuda);
    if (st || (st = nb_sim_setup_build(plan, hkl, &setup))) return st;
    nb_render_result *res = &done->res;
    res->row_stats = job->row_stats;
    res->row_crc = job->row_crc;
    res->wide = job->wide;
    res->vjp = job->vjp;
    if (job->wide && (!use_double || use_cuda)) {
        nb_sim_setup_free(&setup);
        return nb_error_set(NB_ERR_UNSUPPORTED, "pixels in double come from the double path on the CPU, not the %s",
                            use_cuda ? "GPU" : "fast path");
    }
    const int grads = job->grads && job->grads->names.n > 0;
    if (grads)
        st = nb_render_grads(job->grads, grad_path, job->frame, job->panel, &setup.kp, hkl, use_cuda ? e->cuda : NULL,
                             img, job->grad_out, res, job->prog);
    else if (use_cuda) st = nb_render_cuda(e->cuda, &setup.kp, use_double, img, res);
    else st = use_double ? nb_render_cpu_double(&setup.kp, img, res, job->prog)
                         : nb_render_cpu_fast(&setup.kp, img, res, job->prog);
    snprintf(done->path, sizeof done->path, "%s%s%s", use_cuda ? "cuda-" : "",
             use_double ? "double" : use_cuda ? "fast" : nb_fast_variant(), grads ? "-dual" : "");
    done->steps = setup.kp.steps;
    done->subpixel_size = setup.kp.subpixel_size;
    done->thicksteps = setup.kp.thicksteps;
    done->oversample = setup.kp.oversample;
    done->use_cuda = use_cuda, done->use_double = use_double;
    if (job->keep_setup && !st) done->setup = setup, done->have_setup = 1;
    else nb_sim_setup_free(&setup);
    return st;
}

void nb_panel_done_free(nb_panel_done *done)
{
    if (done->have_setup) nb_sim_setup_free(&done->setup);
    done->have_setup = 0;
}
