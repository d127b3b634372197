/* nb_request.c - nanoBragg's requests (nb_request) before they are
 * resolved: the reference's defaults, an -img or -mask header's values, and
 * nb-geom's command line read in the reference's order by the one loop that
 * nb-geom, the tests and the fuzzers share, with the reference's quirks
 * (-misset_seed, -curved_det).  What each flag does to the request is its
 * row of nb-geom's option table (nb_geom_flags.c); nb_resolve() makes the
 * plan of the request (nb_resolve.c). */
#include "nb_geometry.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nb_constants.h"
#include "nb_options.h"
#include "nb_util.h"

static void set3(double v[3], double x, double y, double z)
{
    v[0] = x;
    v[1] = y;
    v[2] = z;
}

void nb_request_defaults(nb_request *rq)
{
    memset(rq, 0, sizeof *rq);
    rq->pixel_size = 0.1e-3;
    rq->distance = 100.0e-3;
    rq->close_distance = NAN;
    rq->detsize_f = rq->detsize_s = 102.4e-3;
    rq->Xbeam = rq->Ybeam = rq->Xclose = rq->Yclose = rq->ORGX = rq->ORGY = NAN;
    rq->header_Fbeam = rq->header_Sbeam = NAN;
    /* the pre-convention vectors, which a custom setup starts from */
    set3(rq->beam, 1, 0, 0);
    set3(rq->fdet, 0, 0, 1);
    set3(rq->sdet, 0, -1, 0);
    set3(rq->odet, 1, 0, 0);
    set3(rq->twotheta_axis, 0, 1, 0);
    set3(rq->polar, 0, 0, 1);
    set3(rq->spindle, 0, 0, 1);
    rq->pivot = NB_PIVOT_BEAM;
    rq->convention = NB_MOSFLM;
    rq->detector_mu = -1.0;
    rq->detector_thickstep = -1.0;
    rq->detector_thicksteps = -1;
    rq->oversample = -1;
    rq->roi_xmin = rq->roi_xmax = rq->roi_ymin = rq->roi_ymax = -1;
    rq->lambda0 = 1.0e-10;
    rq->dispstep = -1;
    rq->dispsteps = -1;
    rq->hdivrange = rq->hdivstep = rq->vdivrange = rq->vdivstep = -1.0;
    rq->hdivsteps = rq->vdivsteps = -1;
    rq->round_div = 1;
    rq->fluence = NB_DEFAULT_FLUENCE;
    rq->exposure = 1.0;
    rq->beamsize = 1e-4;
    rq->Na = rq->Nb = rq->Nc = 1.0;
    rq->shape = NB_SHAPE_SQUARE;
    rq->fudge = 1;
    rq->mosaic_spread = -1.0;
    rq->mosaic_domains = -1;
    rq->osc = rq->phistep = -1.0;
    rq->phisteps = -1;
    rq->nframes = 1;
    rq->stills.spikes = -1;
    rq->interpolate = 2;
    rq->seed = -(int64_t)time(NULL);
    rq->mosaic_seed = -12345678;
    rq->misset_seed = rq->seed;
    rq->adc = 40.0;
    rq->calculate_noise = 1;
    rq->write_pgm = 1;
    rq->precision_double = -1;
    rq->printout_fpixel = rq->printout_spixel = -1;
    rq->progress = 1;
}

void nb_request_free(nb_request *rq)
{
    char **strs[] = {&rq->sourcefile, &rq->matfile, &rq->imgfile, &rq->maskfile, &rq->stolfile,
                     &rq->hklfile, &rq->dumpfile, &rq->floatfile, &rq->intfile, &rq->noisefile,
                     &rq->pgmfile, &rq->command_line, &rq->expt_spectra};
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++) {
        free(*strs[i]);
        *strs[i] = NULL;
    }
    free(rq->mask);
    rq->mask = NULL;
    nb_detector_file_free(rq->panels);
    free(rq->panels);
    rq->panels = NULL;
    nb_experiment_list_free(rq->expt);
    free(rq->expt);
    rq->expt = NULL;
}

static void set_str(char **dst, const char *v)
{
    free(*dst);
    *dst = nb_xstrdup(v);
}

/* ---- an -img or -mask header -------------------------------------------- */

nb_status nb_request_apply_header(nb_request *rq, const nb_header_geometry *h, const char *path,
                                  nb_header_role role)
{
    nb_status st;
    if (role == NB_HEADER_MASK && !h->pixels)
        return nb_error_set(NB_ERR_DATA, "mask '%s': its pixels were not read", path);
    /* docs/physics.md 2.4: SIZE1/2 always; the other keys when present */
    rq->fpixels = h->width;
    rq->spixels = h->height;
    if (!isnan(h->pixel_size)) rq->pixel_size = h->pixel_size / 1000.0;
    rq->detsize_f = rq->pixel_size * rq->fpixels;
    rq->detsize_s = rq->pixel_size * rq->spixels;
    if (!isnan(h->distance)) rq->distance = h->distance / 1000.0;
    if (!isnan(h->close_distance)) rq->close_distance = h->close_distance / 1000.0;
    if (!isnan(h->wavelength)) rq->lambda0 = h->wavelength / 1e10;
    if (!isnan(h->beam_f) && !isnan(h->beam_s)) {
        /* the spot itself (an SMV of nb-convert): whatever the convention,
         * resolve_convention makes it its Xbeam, Ybeam; a beam centre an
         * earlier header gave goes, as the -img header's beats the mask's */
        rq->header_Fbeam = h->beam_f / 1000.0;
        rq->header_Sbeam = h->beam_s / 1000.0;
        rq->Xbeam = rq->Ybeam = NAN;
    } else if (!isnan(h->beam_center_x) || !isnan(h->beam_center_y)) {
        rq->header_Fbeam = rq->header_Sbeam = NAN;
    }
    if (!isnan(h->beam_center_x)) rq->Xbeam = h->beam_center_x / 1000.0;
    /* a mask's BEAM_CENTER_Y is counted from the other edge, as the reference reads it */
    if (!isnan(h->beam_center_y))
        rq->Ybeam = role == NB_HEADER_MASK ? rq->detsize_s - h->beam_center_y / 1000.0 : h->beam_center_y / 1000.0;
    if (!isnan(h->orgx)) rq->ORGX = h->orgx;
    if (!isnan(h->orgy)) rq->ORGY = h->orgy;
    if (!isnan(h->phi)) rq->phi0 = h->phi / NB_RTD;
    if (!isnan(h->osc_range)) rq->osc = h->osc_range / NB_RTD;
    if (!isnan(h->twotheta))
        nb_warn("'%s': header TWOTHETA is ignored, as the reference does; use -twotheta", path);
    if (role == NB_HEADER_MASK) {
        size_t n = (size_t)h->width * (size_t)h->height;
        free(rq->mask);
        if ((st = nb_calloc((void **)&rq->mask, n, 1, "mask"))) return st;
        for (size_t i = 0; i < n; i++) rq->mask[i] = h->pixels[i] != 0;
        rq->mask_w = h->width;
        rq->mask_h = h->height;
        set_str(&rq->maskfile, path);
    } else {
        set_str(&rq->imgfile, path);
    }
    return NB_OK;
}

/* ---- the command line ---------------------------------------------------- */

nb_status nb_request_scan_args(nb_request *rq, int argc, char **argv, const nb_args_hooks *hooks,
                               nb_scanned_args *out)
{
    (void)rq; /* every flag, --reference-defaults too, is applied by nb_request_apply_scanned */
    const nb_opts_hooks h = {hooks ? hooks->tool_option : NULL, hooks ? hooks->ctx : NULL, NULL};
    nb_status st = nb_opts_scan(&nb_request_opts, argc, argv, &h, out);
    if (st) return st;
    /* the reference wants a value after -curved_det: as the last argument it
     * does nothing */
    if (out->count && out->flags[out->count - 1].id == FL_CURVED_DET && out->flags[out->count - 1].index == argc - 1) {
        nb_warn("-curved_det as the last argument is ignored, as the reference does (it needs a value after it)");
        out->count--;
    }
    return NB_OK;
}

/* The reference's -misset clause also matches -misset_seed: followed by two
 * more arguments, it takes the seed and those two as fixed angles (atof: a
 * flag reads as 0).  Returns 1 when it did. */
static int misset_seed_quirk(nb_request *rq, const nb_scanned_args *args, int index, double angles[3])
{
    char **argv = args->argv;
    if (index + 3 >= args->argc || strstr(argv[index + 1], "rand")) return 0;
    for (int j = 0; j < 3; j++) angles[j] = atof(argv[index + 1 + j]);
    for (int j = 0; j < 3; j++) rq->misset[j] = angles[j] / (180.0 * M_1_PI);
    rq->misset_mode = 1;
    return 1;
}

nb_status nb_request_apply_scanned(nb_request *rq, const nb_scanned_args *args, const nb_args_hooks *hooks)
{
    nb_status st;
    if ((st = nb_request_take_panels(rq, args, hooks))) return st;
    if ((st = nb_request_take_expt(rq, args, hooks))) return st;
    /* the reference reads the -mask header, then the -img header, before any
     * other flag, so flags override headers and -img beats -mask */
    const char *maskfile = NULL, *imgfile = NULL;
    for (int k = 0; k < args->count; k++) {
        if (args->flags[k].id == FL_MASK) maskfile = args->argv[args->flags[k].index + 1];
        if (args->flags[k].id == FL_IMG) imgfile = args->argv[args->flags[k].index + 1];
    }
    if (hooks && hooks->load_header) {
        if (maskfile && (st = hooks->load_header(rq, maskfile, NB_HEADER_MASK))) return st;
        if (imgfile && (st = hooks->load_header(rq, imgfile, NB_HEADER_IMG))) return st;
    }

    int quirk = 0;
    double quirk_misset[3] = {0, 0, 0};
    for (int k = 0; k < args->count; k++) {
        const struct nb_scanned_flag *a = &args->flags[k];
        const char *name = args->argv[a->index];
        if ((st = nb_opt_apply(a->row, rq, name, args->argv + a->index + 1, a->nvals))) return st;
        if (a->id == FL_MISSET) quirk = 0;
        if (a->id == FL_MISSET_SEED && misset_seed_quirk(rq, args, a->index, quirk_misset)) quirk = 1;
    }
    if (quirk)
        nb_warn("-misset_seed also set a fixed misset of %g %g %g degrees (its value and the next two "
                "arguments), as the reference does; put -misset random after -misset_seed",
                quirk_misset[0], quirk_misset[1], quirk_misset[2]);
    return NB_OK;
}

nb_status nb_request_apply_args(nb_request *rq, int argc, char **argv, const nb_args_hooks *hooks)
{
    nb_scanned_args args;
    nb_status st = nb_request_scan_args(rq, argc, argv, hooks, &args);
    if (st) return st;
    st = nb_request_apply_scanned(rq, &args, hooks);
    nb_scanned_args_free(&args);
    return st;
}

nb_status nb_request_apply(nb_request *rq, int id, const char *name, char **vals, int nvals)
{
    const nb_opt *row = nb_opt_row(&nb_request_opts, id);
    if (!row) return nb_error_set(NB_ERR_USAGE, "option %s is not handled by nb-geom", name);
    return nb_opt_apply(row, rq, name, vals, nvals);
}
