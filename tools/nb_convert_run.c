/* nb_convert_run.c - nb-convert's files of the whole run (NB_WRITE_RUN:
 * NXmx, model.expt, truth.jsonl, gathered frame by frame by their writers),
 * the sidecars (XDS.INP, CrystFEL .geom: once per plan), the images such a
 * file names, and --join, which makes the -o files of shards' files.  Every
 * format is its registry entry's: no format is named here. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "frame_write.h"
#include "nb_convert.h"

/* ---- the images a file names ------------------------------------------------ */

/* The images of the same command that a run file or sidecar names (names:
 * its entry's names_images): the first output a processing program reads
 * as the images (processing_images), as a file per frame (their panels
 * stacked, NB_NAMES_FRAME_FILES), or holding each frame whole (a run file,
 * or a file per frame of one panel, NB_NAMES_FRAMES); NULL for none. */
static const out_request *images_named(const conv_opts *all, const nb_plan *plan, nb_format_names names)
{
    for (int k = 0; k < all->nouts && names != NB_NAMES_NONE; k++) {
        const nb_format *f = all->outs[k].format;
        if (!f->processing_images) continue;
        if (names == NB_NAMES_FRAME_FILES ? !f->run_file : f->run_file || nb_plan_npanels(plan) == 1)
            return &all->outs[k];
    }
    return NULL;
}

/* What a writer of request q is told: --photons (its source), the run's options,
 * the images it names and where its files are held until the run ends */
static nb_write_opts write_opts(const out_request *q, const conv_opts *all, const nb_plan *plan)
{
    const out_request *img = images_named(all, plan, q->format->names_images);
    nb_write_opts w = {q->source == SRC_PHOTONS, all->compression, all->truth_min_photons, img ? img->path : NULL,
                       img ? img->format : NULL, claim_output};
    return w;
}

/* ---- the files of the whole run: NXmx, model.expt, truth.jsonl ------------- */

/* Frame fr into request q's run file (its writer opens it at the first) */
nb_status write_run(const out_request *q, int k, const conv_opts *o, const frame *fr)
{
    const nb_write_opts w = write_opts(q, o, fr->plan);
    return q->format->run->frame(&o->runs[k], q->path, fr, &w);
}

/* The run files of images (NXmx) or the others (which describe them)
 * committed into place (ok) or removed */
nb_status finish_runs(conv_opts *o, enum run_files which, int ok)
{
    nb_status st = NB_OK;
    for (int k = 0; k < o->nouts; k++) {
        if (!o->runs[k] || o->outs[k].format->processing_images != (which == RUNS_OF_IMAGES)) continue;
        const nb_run_writer *run = o->outs[k].format->run;
        if (ok && !st) st = run->commit(o->runs[k]);
        else run->abort(o->runs[k]);
        o->runs[k] = NULL;
    }
    return st;
}

/* Does every -o name a file that a plan alone can fill (model.expt, a
 * refined plan's fit.geom)? */
int only_plan_files(const conv_opts *o)
{
    for (int k = 0; k < o->nouts; k++) {
        const nb_format *f = o->outs[k].format;
        if (!(f->run && f->run->plan_frames) && !f->plan_sidecar) return 0;
    }
    return o->nouts > 0 && !o->grad && !o->import;
}

nb_status write_plan_files(const conv_opts *o, const nb_plan *plan)
{
    nb_status st = NB_OK;
    /* no images: the counts nanoBragg's int image would have (the -adc offset) */
    const double adc = o->have_adc ? o->adc : plan->adc;
    const long first = o->frame_first ? o->frame_first - 1 : 0, last = o->frame_first ? o->frame_last : plan->nframes;
    if (last > plan->nframes)
        return nb_error_set(NB_ERR_USAGE, "option --frames: the plan has %d frame%s", plan->nframes,
                            plan->nframes == 1 ? "" : "s");
    for (int k = 0; k < o->nouts && !st; k++) {
        out_request *out = &o->outs[k];
        if (out->format->plan_sidecar) { /* the plan's detector: no image to describe */
            const frame fr = {.plan = plan, .frame = first};
            st = write_sidecar(out, o, &fr);
        } else {
            st = out->format->run->plan_frames(&o->runs[k], out->path, plan, first, last, adc);
        }
    }
    return st;
}

/* A sidecar (XDS.INP, a CrystFEL .geom) for the plan of this frame, written
 * once (it describes the whole series: shards joined with cat repeat the
 * plan) */
nb_status write_sidecar(out_request *o, const conv_opts *all, const frame *fr)
{
    if (o->done) return NB_OK;
    const nb_write_opts w = write_opts(o, all, fr->plan);
    nb_status st = o->format->write_sidecar(o->path, fr, &w);
    o->done = 1;
    return st;
}

/* ---- --join ------------------------------------------------------------------- */

/* The formats --join joins, for messages: their parts ("NXmx parts (.nxs
 * .h5)"), outputs ("NXmx master (-o MASTER.nxs)") or outputs' examples
 * alone ("MASTER.nxs"), sep between */
enum join_words { JOIN_PARTS, JOIN_OUTPUTS, JOIN_EXAMPLES };

static const char *join_list(char *buf, size_t size, enum join_words words, const char *sep)
{
    size_t at = 0;
    buf[0] = '\0';
    for (const nb_format *f = nb_format_next(NULL); f && at < size - 1; f = nb_format_next(f)) {
        const nb_run_writer *r = f->run;
        if (!r || !r->join) continue;
        at += (size_t)snprintf(buf + at, size - at, "%s", at ? sep : "");
        if (words == JOIN_PARTS) {
            at += (size_t)snprintf(buf + at, size - at, "%s (", r->join_parts);
            for (int i = 0; f->suffixes[i] && at < size - 1; i++)
                at += (size_t)snprintf(buf + at, size - at, "%s%s", i ? " " : "", f->suffixes[i]);
            at += (size_t)snprintf(buf + at, size - at, ")");
        } else if (words == JOIN_OUTPUTS) {
            at += (size_t)snprintf(buf + at, size - at, "%s (-o %s)", r->joined, r->join_output);
        } else {
            at += (size_t)snprintf(buf + at, size - at, "%s", r->join_output);
        }
    }
    return buf;
}

/* The format of --join's part k: an NXmx file given with --nxmx-join, else by its name */
static const nb_format *part_format(const conv_opts *o, int k)
{
    const nb_format *f = o->join_nxmx[k] ? nb_format_by_name("nxmx") : format_from_path(o->joins[k]);
    return f && f->run && f->run->join ? f : NULL;
}

/* The checks of --join's parts and outputs: each part of a format joined,
 * one -o of each, the parts of each -o's format given and none of them
 * an output */
static nb_status join_check(const conv_opts *o, const nb_std_opts *std)
{
    char list[512];
    for (int k = 0; k < o->njoins; k++)
        if (!part_format(o, k))
            return nb_error_set(NB_ERR_USAGE, "--join '%s': not one of the files it joins: %s", o->joins[k],
                                join_list(list, sizeof list, JOIN_PARTS, ", "));
    for (int i = 0; i < o->nouts; i++) {
        const nb_format *f = o->outs[i].format;
        int twice = 0;
        for (int j = 0; j < i; j++) twice |= o->outs[j].format == f;
        if (!f->run || !f->run->join || twice)
            return nb_error_set(NB_ERR_USAGE, "--join writes one of each: %s; not '%s'",
                                join_list(list, sizeof list, JOIN_OUTPUTS, ", "), o->outs[i].path);
    }
    if (!o->nouts)
        return nb_error_set(NB_ERR_USAGE, "--join needs -o %s",
                            join_list(list, sizeof list, JOIN_EXAMPLES, " or -o "));
    for (int k = 0; k < o->njoins; k++) {
        char a[NB_PATH_MAX], b[NB_PATH_MAX];
        for (int i = 0; i < o->nouts; i++)
            if (realpath(o->joins[k], a) && realpath(o->outs[i].path, b) && !strcmp(a, b))
                return nb_error_set(NB_ERR_USAGE, "'%s' is both a part to join and the output", o->outs[i].path);
    }
    for (int i = 0; i < o->nouts; i++) {
        const nb_format *f = o->outs[i].format;
        int n = 0;
        for (int k = 0; k < o->njoins; k++) n += part_format(o, k) == f;
        if (!n)
            return nb_error_set(NB_ERR_USAGE, "-o '%s' joins %s: give them with --join PART%s", o->outs[i].path,
                                f->run->join_parts, f->suffixes[0]);
    }
    for (int k = 0; k < o->njoins; k++) {
        int out = 0;
        for (int i = 0; i < o->nouts; i++) out |= o->outs[i].format == part_format(o, k);
        if (!out)
            return nb_error_set(NB_ERR_USAGE, "--join '%s': %s need -o %s", o->joins[k],
                                part_format(o, k)->run->join_parts, part_format(o, k)->run->join_output);
    }
    if (strcmp(std->input, "-"))
        return nb_error_set(NB_ERR_USAGE, "--join reads no stream ('%s'): name each part with --join", std->input);
    return NB_OK;
}

/* --join: the -o files (an NXmx master, a model.expt) from the shards' files
 * of their formats; no stream read.  A run file of images (NXmx) is joined
 * first: the others (model.expt) name its frames (dials_expt_join.h), and
 * it is removed when they fail (one result, not one without the other). */
nb_status join_parts(const conv_opts *o, const nb_std_opts *std)
{
    nb_status st = join_check(o, std);
    const char **parts = calloc((size_t)o->njoins + 1, sizeof *parts);
    if (!st && !parts) st = nb_error_set(NB_ERR_NOMEM, "out of memory");
    nb_joined_images images = {NULL, NULL, 0};
    const char **image_parts = calloc((size_t)o->njoins + 1, sizeof *image_parts);
    if (!st && !image_parts) st = nb_error_set(NB_ERR_NOMEM, "out of memory");
    for (int pass = 0; pass < 2 && !st; pass++) {
        for (int i = 0; i < o->nouts && !st; i++) {
            const nb_format *f = o->outs[i].format;
            if (f->run_file != (pass == 0)) continue; /* the images first */
            int n = 0;
            for (int k = 0; k < o->njoins; k++)
                if (part_format(o, k) == f) parts[n++] = o->joins[k];
            nb_info("writing %s (%s of %d parts)", o->outs[i].path, f->run->joined, n);
            st = f->run->join(o->outs[i].path, parts, n, &images);
            if (!st && f->run_file) {
                memcpy(image_parts, parts, (size_t)n * sizeof *parts);
                images = (nb_joined_images){o->outs[i].path, image_parts, n};
            }
        }
    }
    if (st && images.path) unlink(images.path);
    free(parts);
    free(image_parts);
    return st;
}
