/* nb_fit_files.c - nb-fit's files around libnb's fit (fit/): the observed
 * images read by the one image reader (registry.h) into photons and the
 * pixels that count, as the fit asks for them; --space-group resolved into
 * the operators the fit merges F by (CCP4's library, an MTZ file's
 * symmetry); --F-out written from the fit's table (text or MTZ). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "nb_fit.h"
#include "nb_util.h"
#include "registry.h"
#ifdef NB_HAVE_CCP4
#include "ccp4.h"
#endif
#include "mtz.h"
#include "sf_expand.h"

/* ---- the observed images ---------------------------------------------------- */

/* An image file's counts into photons, (counts - offset) / gain, the
 * untrusted pixels (negative, a CBF's masked ones, or overloaded: the image
 * reader's rule, registry.h) left out; --adc, --gain and --overload given
 * override the file's. */
static void counts_to_photons(const fit_opts *o, nb_image_file *f, nb_fit_observed *ob)
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
nb_status nb_fit_observed_read(const char *path, const fit_opts *o, const nb_plan *plan, long frame, nb_fit_observed *ob)
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

void nb_fit_observed_free(nb_fit_observed *ob)
{
    free(ob->y);
    free(ob->use);
    ob->y = NULL, ob->use = NULL;
}

void nb_fit_files_free(void)
{
    free(frames_read);
    frames_read = NULL;
}

nb_status nb_fit_observed_frame(void *ctx, long frame, long slot, nb_fit_observed *ob)
{
    const nb_fit_files *files = ctx;
    if (slot < 0 || slot >= files->o->nobserved)
        return nb_error_set(NB_ERR_USAGE, "frame %ld has no observed image (%d given)", frame + 1, files->o->nobserved);
    return nb_fit_observed_read(files->o->observed[slot], files->o, files->plan, frame, ob);
}

/* ---- --space-group -------------------------------------------------------------- */

/* "P1", "P 1", " P 1" (a Hall symbol) */
static int is_p1(const char *name)
{
    char c[8];
    size_t n = 0;
    for (; *name && n < sizeof c - 1; name++)
        if (*name != ' ') c[n++] = *name;
    c[n] = '\0';
    return !*name && !strcmp(c, "P1");
}

/* A name, a Hall symbol or an MTZ file's symmetry into sg (the formats' operators) */
static nb_status resolve(const char *given, const nb_plan *start, nb_sf_data *sg)
{
    const char *name = given ? given : start->space_group;
    nb_sf_format fmt;
    if (given && access(given, F_OK) == 0) {
        nb_status st = nb_sf_detect(given, &fmt);
        if (st) return nb_error_prefix(st, "--space-group");
        if (fmt != NB_SF_MTZ)
            return nb_error_set(NB_ERR_USAGE, "--space-group '%s': a file, but not an MTZ file (its symmetry is "
                                              "what --space-group takes from a file)", given);
        st = nb_mtz_symmetry(given, sg);
        return st ? nb_error_prefix(st, "--space-group") : NB_OK;
    }
    if (!name || is_p1(name)) {
        const double I[3][3] = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}, t[3] = {0, 0, 0};
        snprintf(sg->spacegroup, sizeof sg->spacegroup, "P 1");
        snprintf(sg->hall, sizeof sg->hall, " P 1");
        return nb_sf_add_op(sg, I, t);
    }
    const char *who = given ? "--space-group" : "the plan's SPACE_GROUP";
#ifdef NB_HAVE_CCP4
    return nb_ccp4_spacegroup(who, name, sg);
#else
    return nb_error_set(NB_ERR_UNSUPPORTED, "%s %s: this build has no CCP4 library (libccp4-dev) for the "
                                            "space group's operators; P1 needs none", who, name);
#endif
}

nb_status nb_fit_space_group(const char *given, const nb_plan *start, nb_fit_symmetry *sym)
{
    nb_sf_data sg;
    nb_sf_data_init(&sg);
    nb_status st = resolve(given, start, &sg);
    if (!st && sg.nops > NB_FIT_MAX_OPS) st = nb_error_set(NB_ERR_DATA, "%d symmetry operators", sg.nops);
    if (!st) {
        memset(sym, 0, sizeof *sym);
        sym->nops = sg.nops;
        for (int o = 0; o < sg.nops; o++) memcpy(sym->R[o], sg.ops[o].R, sizeof sym->R[o]);
        snprintf(sym->spacegroup, sizeof sym->spacegroup, "%s", sg.spacegroup);
        snprintf(sym->hall, sizeof sym->hall, "%s", sg.hall);
    }
    nb_sf_data_free(&sg);
    return st;
}

/* ---- --F-out ---------------------------------------------------------------------- */

/* MTZ columns H K L F SIGF N; the cell and a line of history saying which */
static nb_status write_F_mtz(const char *path, const nb_fit_F_table *t)
{
    nb_mtz_amplitudes a = {.spacegroup = t->spacegroup, .lambda = t->lambda, .n = t->n,
                           .hkl = (const int(*)[3])t->hkl, .F = t->F, .sigF = t->sigF, .multiplicity = t->mult,
                           .history = t->cell_says};
    memcpy(a.cell, t->cell, sizeof a.cell);
    nb_status st = nb_mtz_write_amplitudes(path, &a);
    return st ? nb_error_prefix(st, "--F-out") : NB_OK;
}

nb_status nb_fit_write_F(const char *path, const nb_fit_F_table *t)
{
    const size_t len = strlen(path);
    if (len > 4 && !strcasecmp(path + len - 4, ".mtz")) return write_F_mtz(path, t);
    nb_outfile *of = NULL;
    nb_status st = nb_outfile_open(&of, path, 0);
    if (st) return st;
    FILE *fp = nb_outfile_fp(of);
    for (size_t i = 0; i < t->n; i++) {
        const int *h = t->hkl[i];
        fprintf(fp, "%d %d %d %.6g %.4g %.0f\n", h[0], h[1], h[2], t->F[i], t->sigF[i], t->mult[i]);
        if (t->p1) fprintf(fp, "%d %d %d %.6g %.4g %.0f\n", -h[0], -h[1], -h[2], t->F[i], t->sigF[i], t->mult[i]);
    }
    return nb_outfile_commit(of);
}
