/* nb_convert_run.c - nb-convert's files of the whole run: model.expt and
 * truth.jsonl gathered frame by frame, the NXmx file every frame goes into,
 * the XDS.INP and CrystFEL .geom sidecars (once per plan), and --join, which
 * makes an NXmx master and a model.expt of shards' files. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crystfel_geom.h"
#include "dials_expt_join.h"
#include "nb_stills.h"
#include "nb_tuning.h"
#include "xds_inp.h"
#include "frame_write.h"
#include "nb_convert.h"

/* ---- model.expt: the truth as a DIALS experiment list -------------------- */

/* The images model.expt names (dials_expt_write.h): the first output of the
 * same command that holds a frame whole, by its absolute name (as
 * dials.import writes it): a CBF or SMV of one panel (a file per frame), or
 * an NXmx file (every frame, every panel); else none, a model alone. */
static nb_status expt_images(const out_request *o, const conv_opts *all, const nb_plan *plan, nb_expt_images *img,
                             char *abs, size_t size)
{
    const out_request *q = NULL;
    for (int k = 0; k < all->nouts && !q; k++) {
        int f = all->outs[k].format;
        if (f == NB_FMT_NXMX || ((f == NB_FMT_CBF || f == NB_FMT_SMV) && nb_plan_npanels(plan) == 1)) q = &all->outs[k];
    }
    *img = (nb_expt_images){NB_EXPT_NO_IMAGES, NULL, 0};
    if (!q) return NB_OK;
    if (q->format != NB_FMT_NXMX && !strchr(q->path, '#') && plan->nframes > 1)
        return nb_error_set(NB_ERR_USAGE, "'%s': name the images with a '#' run for the frame number (e.g. "
                                          "img_###.cbf)",
                            q->path);
    if (nb_absolute_path(q->path, abs, size))
        return nb_error_set(NB_ERR_IO, "'%s': cannot name the images' directory: %s", o->path, strerror(errno));
    /* a CBF and NXmx count from 0 (counts_from_zero); an SMV keeps the offset */
    *img = (nb_expt_images){q->format == NB_FMT_NXMX ? NB_EXPT_ONE_FILE : NB_EXPT_FILE_PER_FRAME, abs,
                            q->format == NB_FMT_SMV};
    return NB_OK;
}

/* The frame into request q's model.expt, opened at the run's first frame
 * and written at its end (finish_expts): the counts the stream's (nb-noise's
 * offset, counter and gain) or the int image's (the -adc offset, 16 bits) */
nb_status write_expt(const out_request *q, int k, const conv_opts *o, const frame *fr)
{
    nb_status st = NB_OK;
    if (!o->expts[k]) {
        char abs[2 * NB_PATH_MAX + 2];
        nb_expt_images img;
        if ((st = expt_images(q, o, fr->plan, &img, abs, sizeof abs))) return st;
        if ((st = nb_expt_open(&o->expts[k], q->path, &img))) return st;
        nb_info("writing %s", q->path);
    }
    nb_expt_counts c = {fr->counts ? fr->counts_adc : fr->adc,
                        fr->counts && fr->counts_bits == 32 ? 2147483647.0 : 65535.0,
                        fr->counts && fr->im->has.counts_gain ? fr->im->counts_gain : 1.0};
    return nb_expt_frame(o->expts[k], fr->plan, fr->frame, nb_frame_wavelength(fr->plan, fr->im), &c);
}

/* Does every -o name a model.expt (which a plan alone can fill)? */
int only_expts(const conv_opts *o)
{
    for (int k = 0; k < o->nouts; k++)
        if (o->outs[k].format != NB_FMT_EXPT) return 0;
    return o->nouts > 0 && !o->grad && !o->import;
}

/* The wavelength frame f's headers would state (nb_frame_wavelength of its
 * IMAGE): a frame crystal's, a still's spikes' mean, else LAMBDA0 */
static double plan_frame_wavelength(const nb_plan *p, long f)
{
    if (p->frame_crystals) return p->frame_crystals[f].lambda;
    if (!p->stills.on || p->stills.spikes <= 0) return p->lambda0;
    nb_still_shot shot;
    double sum = 0.0;
    nb_still_draw(p, f, &shot);
    for (int k = 0; k < shot.spikes; k++) sum += p->lambda0 * (1.0 + shot.spike[k]);
    return shot.spikes > 0 ? sum / shot.spikes : p->lambda0;
}

nb_status write_expt_plan(const conv_opts *o, const nb_plan *plan)
{
    nb_status st = NB_OK;
    /* no images: the counts nanoBragg's int image would have (the -adc offset, 16 bits) */
    const nb_expt_counts c = {o->have_adc ? o->adc : plan->adc, 65535.0, 1.0};
    for (int k = 0; k < o->nouts && !st; k++) {
        if (!o->expts[k]) {
            const nb_expt_images none = {NB_EXPT_NO_IMAGES, NULL, 0};
            if ((st = nb_expt_open(&o->expts[k], o->outs[k].path, &none))) return st;
            nb_info("writing %s of the plan's %d frame%s (no IMAGE record)", o->outs[k].path, plan->nframes,
                    plan->nframes == 1 ? "" : "s");
        }
        const long first = o->frame_first ? o->frame_first - 1 : 0, last = o->frame_first ? o->frame_last : plan->nframes;
        if (last > plan->nframes)
            return nb_error_set(NB_ERR_USAGE, "option --frames: the plan has %d frame%s", plan->nframes,
                                plan->nframes == 1 ? "" : "s");
        for (long f = first; f < last && !st; f++)
            st = nb_expt_frame(o->expts[k], plan, f, plan_frame_wavelength(plan, f), &c);
    }
    return st;
}

/* Every model.expt written into place (ok) or removed */
nb_status finish_expts(conv_opts *o, int ok)
{
    nb_status st = NB_OK;
    for (int k = 0; k < o->nouts; k++) {
        if (!o->expts[k]) continue;
        if (ok && !st) st = nb_expt_commit(o->expts[k]);
        else nb_expt_abort(o->expts[k]);
        o->expts[k] = NULL;
    }
    return st;
}

/* XDS.INP or a CrystFEL .geom for the plan of this frame, written once (they
 * describe the whole series: shards joined with cat repeat the plan).  XDS
 * needs the images' name, a '#' run becoming '?': the first SMV or CBF
 * output of the same command. */
nb_status write_sidecar(out_request *o, const conv_opts *all, const frame *fr)
{
    if (o->done) return NB_OK;
    char *target = NULL;
    nb_status st = NB_OK;
    int overload = fr->counts && fr->counts_bits == 32 ? 2147483647 : 65535;
    if (o->format == NB_FMT_XDS) {
        const out_request *img = NULL;
        for (int k = 0; k < all->nouts && !img; k++)
            if (all->outs[k].format == NB_FMT_CBF || all->outs[k].format == NB_FMT_SMV) img = &all->outs[k];
        if (!img)
            return nb_error_set(NB_ERR_USAGE, "'%s' needs the images' name: write them in the same command as CBF "
                                              "or SMV (e.g. -o img_###.cbf -o %s)",
                                o->path, o->path);
        const char *hash = strchr(img->path, '#');
        if (!hash && fr->plan->nframes > 1)
            return nb_error_set(NB_ERR_USAGE, "'%s': name the images with a '#' run for the frame number (e.g. "
                                              "img_###.cbf)",
                                img->path);
        char tmpl[NB_PATH_MAX];
        snprintf(tmpl, sizeof tmpl, "%s", img->path);
        for (char *c = tmpl; *c; c++)
            if (*c == '#') *c = '?';
        if ((st = claim_output(o->path, 0, &target))) return st;
        nb_info("writing %s", o->path);
        /* a CBF's counts start at 0 (cbf_values), so its overload is lower by the offset */
        if (img->format == NB_FMT_CBF) overload -= (int)lrint(fr->counts ? fr->counts_adc : fr->adc);
        st = nb_xds_inp_write(target, fr->plan, tmpl, img->format == NB_FMT_CBF ? NB_XDS_PILATUS : NB_XDS_ADSC,
                              overload);
    } else {
        if ((st = claim_output(o->path, 0, &target))) return st;
        nb_info("writing %s", o->path);
        st = nb_crystfel_geom_write(target, fr->plan, overload,
                                    fr->counts && fr->im->has.counts_gain ? fr->im->counts_gain : 1.0);
    }
    free(target);
    o->done = 1;
    return st;
}

/* The frame's counts as an NXmx file holds them (every panel, one after
 * another): as a CBF's, from 0 (cbf_values: dxtbx's NXmx reader has no
 * pedestal either), the stream's counts or else the int image; *saturation
 * the counter's top less the offset. */
static int32_t *nxmx_buf; /* the frame's counts, kept from frame to frame: fresh pages cost more than the copy */
static size_t nxmx_cap;

static nb_status nxmx_counts(const frame *fr, const char *path, int32_t **out, double *saturation)
{
    const nb_plan *p = fr->plan;
    nb_status st = NB_OK;
    if (nxmx_cap < nb_plan_total_pixels(p)) {
        free(nxmx_buf);
        nxmx_buf = NULL, nxmx_cap = 0;
        if (!(st = nb_alloc_large((void **)&nxmx_buf, nb_plan_total_pixels(p), sizeof *nxmx_buf, "the NXmx frame")))
            nxmx_cap = nb_plan_total_pixels(p);
    }
    *out = nxmx_buf;
    double adc = fr->counts ? fr->counts_adc : fr->adc;
    *saturation = (fr->counts && fr->counts_bits == 32 ? 2147483647.0 : 65535.0) - lrint(adc);
    for (int i = 0; i < nb_plan_npanels(p) && !st; i++) {
        nb_plan view;
        frame pf;
        int32_t *ints = NULL;
        size_t off, n;
        nb_frame_panel(fr, i, &view, &pf);
        nb_plan_panel_dims(p, i, NULL, NULL, &off);
        n = (size_t)pf.width * pf.height;
        if (!fr->counts) st = nb_frame_int_counts(&pf, &ints);
        if (!st) nb_counts_from_zero(fr->counts ? pf.counts : ints, n, adc, path, *out + off);
        free(ints);
    }
    return st;
}

/* Frame fr into request q's NXmx file, opened by the first frame */
nb_status write_nxmx(const out_request *q, nb_nxmx **file, const conv_opts *o, const frame *fr)
{
    int32_t *counts = NULL;
    nb_nxmx_setup setup = {o->photons ? NB_NXMX_PHOTONS : NB_NXMX_COUNTS, o->compression, 0.0,
                           fr->counts && fr->im->has.counts_gain ? fr->im->counts_gain : 1.0};
    nb_status st = o->photons ? NB_OK : nxmx_counts(fr, q->path, &counts, &setup.saturation);
    if (!st && !*file) {
        nb_info("writing %s (NXmx, %s)", q->path, o->photons ? "float32 photons" : "int32 counts from 0");
        nb_warn_sensor_mu(q->path, fr->plan);
        if (!o->photons && !fr->counts) nb_info("intfile_scale = %g", fr->int_scale);
        st = nb_nxmx_open(file, q->path, fr->plan, &setup);
    }
    if (!st) {
        nb_image_meta m;
        nb_frame_meta(fr, &m);
        nb_nxmx_frame f = {fr->frame, m.osc_start, m.osc_range, m.wavelength, fr->im->has.noise_seed,
                           fr->im->noise_seed};
        st = nb_nxmx_put(*file, fr->plan, o->photons ? (const void *)fr->photons : (const void *)counts, &f);
    }
    return st;
}

/* At the end of the stream: every NXmx file finished and renamed into place
 * (ok), or removed */
nb_status nxmx_finish(conv_opts *o, int ok)
{
    nb_status st = NB_OK;
    for (int k = 0; k < o->nouts; k++) {
        if (!o->nxmx[k]) continue;
        if (ok && !st) st = nb_nxmx_close(o->nxmx[k]);
        else nb_nxmx_abort(o->nxmx[k]);
        o->nxmx[k] = NULL;
    }
    free(nxmx_buf);
    nxmx_buf = NULL, nxmx_cap = 0;
    return st;
}

/* The frame's line of truth.jsonl: the file opened at the run's first image,
 * committed at its end (finish_truths) */
nb_status write_truth(const out_request *q, int k, const conv_opts *o, const frame *fr,
                             const nb_image_info *im)
{
    nb_status st;
    if (!o->truths[k]) {
        if ((st = nb_truth_open(&o->truths[k], q->path, o->truth_min_photons))) return st;
        nb_info("writing %s", q->path);
    }
    st = nb_truth_frame(o->truths[k], fr->plan, im, fr->photons);
    return st ? nb_error_prefix(st, "'%s'", q->path) : NB_OK;
}

/* Every truth file into place (ok) or removed */
nb_status finish_truths(conv_opts *o, int ok)
{
    nb_status st = NB_OK;
    for (int k = 0; k < o->nouts; k++) {
        if (!o->truths[k]) continue;
        if (ok && !st) st = nb_truth_commit(o->truths[k]);
        else nb_truth_abort(o->truths[k]);
        o->truths[k] = NULL;
    }
    return st;
}

/* --join: the -o files (an NXmx master, a model.expt) from the shards' files
 * of the same kinds; no stream read.  With both, the joined model.expt names
 * the master's frames (dials_expt_join.h). */
nb_status join_parts(const conv_opts *o, const nb_std_opts *std)
{
    const char *master = NULL, *expt = NULL;
    const char **nx = calloc((size_t)o->njoins + 1, sizeof *nx), **ex = calloc((size_t)o->njoins + 1, sizeof *ex);
    int nnx = 0, nex = 0;
    nb_status st = nx && ex ? NB_OK : nb_error_set(NB_ERR_NOMEM, "out of memory");
    for (int k = 0; k < o->njoins && !st; k++) {
        if (o->join_nxmx[k] || format_from_path(o->joins[k]) == NB_FMT_NXMX) nx[nnx++] = o->joins[k];
        else if (format_from_path(o->joins[k]) == NB_FMT_EXPT) ex[nex++] = o->joins[k];
        else st = nb_error_set(NB_ERR_USAGE, "--join '%s': not an NXmx (.nxs, .h5) or experiment list (.expt) file",
                               o->joins[k]);
    }
    for (int k = 0; k < o->nouts && !st; k++) {
        const out_request *q = &o->outs[k];
        const char **slot = q->format == NB_FMT_NXMX ? &master : q->format == NB_FMT_EXPT ? &expt : NULL;
        if (!slot || *slot)
            st = nb_error_set(NB_ERR_USAGE, "--join writes one NXmx master and one experiment list (-o MASTER.nxs, "
                                            "-o model.expt), not '%s'",
                              q->path);
        else *slot = q->path;
    }
    if (!st && !master && !expt) st = nb_error_set(NB_ERR_USAGE, "--join needs -o MASTER.nxs or -o model.expt");
    for (int k = 0; k < o->njoins && !st; k++) {
        char a[NB_PATH_MAX], b[NB_PATH_MAX];
        for (int i = 0; i < o->nouts && !st; i++)
            if (realpath(o->joins[k], a) && realpath(o->outs[i].path, b) && !strcmp(a, b))
                st = nb_error_set(NB_ERR_USAGE, "'%s' is both a part to join and the output", o->outs[i].path);
    }
    if (!st && (master ? !nnx : nnx))
        st = nb_error_set(NB_ERR_USAGE, master ? "-o '%s' joins NXmx parts: give them with --join PART.nxs"
                                               : "--join '%s': an NXmx part needs -o MASTER.nxs",
                          master ? master : nx[0]);
    if (!st && (expt ? !nex : nex))
        st = nb_error_set(NB_ERR_USAGE, expt ? "-o '%s' joins experiment lists: give them with --join PART.expt"
                                             : "--join '%s': an experiment list needs -o model.expt",
                          expt ? expt : ex[0]);
    if (!st && strcmp(std->input, "-"))
        st = nb_error_set(NB_ERR_USAGE, "--join reads no stream ('%s'): name each part with --join", std->input);
    if (!st && master) {
        nb_info("writing %s (NXmx master of %d parts)", master, nnx);
        st = nb_nxmx_master(master, nx, nnx);
    }
    if (!st && expt) {
        nb_info("writing %s (experiment list of %d parts)", expt, nex);
        st = nb_expt_join(expt, ex, nex, master, nx, nnx);
        /* the master and the list are one result: not one without the other */
        if (st && master) unlink(master);
    }
    free(nx);
    free(ex);
    return st;
}
