/* dials_expt_join.c - shards' model.expt files joined into the whole run's
 * experiment list (nb-convert --join): stills in frame order, a rotation
 * series' scans into one, the images named by the NXmx master when one is
 * joined beside it.  The rules are in dials_expt_join.h. */
#include "dials_expt_join.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "nb_plan.h"
#include "nb_util.h"

/* One experiment of a part, its models resolved */
typedef struct expt_ref {
    const char *part;
    long first, last;       /* its frames, counted from 1: a still's one, a scan's image range */
    double osc[2];          /* a scan's oscillation: start of its first image, width (deg) */
    const nb_json *identifier, *beam, *crystal, *imageset, *goniometer, *scan;
} expt_ref;

typedef struct join_state {
    const char *path;
    nb_json *roots;
    int nroots;
    expt_ref *refs;
    size_t nrefs;
    char *detector;         /* the parts' one detector, as text */
    const nb_json *detector_json;
    int rotation;
} join_state;

static nb_status bad_part(const char *part, const char *what)
{
    return nb_error_set(NB_ERR_DATA, "'%s': %s (not a model.expt of nb-convert?)", part, what);
}

/* The model of kind `kind` an experiment points to; NULL when it points to none */
static const nb_json *model_of(const nb_json *root, const nb_json *expt, const char *kind)
{
    const nb_json *ix = nb_json_get(expt, kind);
    if (!ix || ix->type != NB_JSON_NUMBER || ix->number < 0 || ix->number != floor(ix->number)) return NULL;
    return nb_json_at(nb_json_get(root, kind), (size_t)ix->number);
}

static char *as_text(const nb_json *v)
{
    nb_strbuf sb;
    nb_strbuf_init(&sb);
    if (v) nb_json_write(&sb, v);
    else nb_strbuf_append(&sb, "null");
    return nb_strbuf_take(&sb);
}

/* A still's frame (from 1): its "nb_frame", which nb-convert writes beside
 * the identifier (dials_expt_write.c) - an identifier kept from DIALS's list
 * says nothing of the frame */
static int still_frame(const nb_json *number, long *frame)
{
    if (!number || number->type != NB_JSON_NUMBER || !(number->number >= 1) || number->number > (double)LONG_MAX ||
        number->number != floor(number->number))
        return -1;
    *frame = (long)number->number;
    return 0;
}

/* Experiment e of part `name` as a reference, its frames read */
static nb_status add_ref(join_state *J, const char *name, const nb_json *root, const nb_json *e)
{
    expt_ref r = {name, 0, 0, {0, 0}, nb_json_get(e, "identifier"), model_of(root, e, "beam"), model_of(root, e, "crystal"),
                  model_of(root, e, "imageset"), model_of(root, e, "goniometer"), model_of(root, e, "scan")};
    const nb_json *det = nb_json_get(e, "detector");
    if (!det || det->type != NB_JSON_NUMBER || det->number != 0 || !r.beam || !r.crystal)
        return bad_part(name, "an experiment without its beam, crystal or the one detector");
    int rotation = r.scan != NULL;
    if (J->nrefs && rotation != J->rotation)
        return nb_error_set(NB_ERR_DATA, "'%s' and '%s': one holds a rotation series, the other stills", J->refs[0].part,
                            name);
    J->rotation = rotation;
    double range[2];
    if (rotation) {
        if (nb_json_numbers(nb_json_get(r.scan, "image_range"), range, 2) || range[0] < 1 || range[1] < range[0] ||
            nb_json_numbers(nb_json_get(r.scan, "oscillation"), r.osc, 2) || !(r.osc[1] > 0))
            return bad_part(name, "a scan without a sound image_range and oscillation");
        r.first = (long)range[0], r.last = (long)range[1];
    } else if (still_frame(nb_json_get(e, "nb_frame"), &r.first)) {
        return bad_part(name, "a still without its frame's number (nb_frame)");
    } else {
        r.last = r.first;
    }
    expt_ref *refs = realloc(J->refs, (J->nrefs + 1) * sizeof *refs);
    if (!refs) return nb_error_set(NB_ERR_NOMEM, "out of memory");
    J->refs = refs;
    J->refs[J->nrefs++] = r;
    return NB_OK;
}

/* Part k read, its detector checked against the first part's */
static nb_status read_part(join_state *J, const char *name, nb_json *root)
{
    char *text = NULL;
    size_t len = 0;
    nb_status st = nb_read_file(name, &text, &len);
    if (!st) st = nb_json_parse(text, len, name, root);
    free(text);
    if (st) return st;
    const nb_json *id = nb_json_get(root, "__id__");
    const nb_json *experiments = nb_json_get(root, "experiment"), *detectors = nb_json_get(root, "detector");
    if (!id || id->type != NB_JSON_STRING || strcmp(id->string, "ExperimentList") || !experiments ||
        experiments->type != NB_JSON_ARRAY || !experiments->count)
        return bad_part(name, "no experiment list");
    if (!detectors || detectors->type != NB_JSON_ARRAY || detectors->count != 1)
        return bad_part(name, "not one detector");
    char *det = as_text(&detectors->items[0]);
    if (!J->detector) J->detector = det, J->detector_json = &detectors->items[0];
    else {
        int same = !strcmp(det, J->detector);
        free(det);
        if (!same)
            return nb_error_set(NB_ERR_DATA, "'%s' and '%s' describe different detectors: they are not parts of one "
                                             "experiment",
                                J->refs[0].part, name);
    }
    for (size_t i = 0; i < experiments->count && !st; i++) st = add_ref(J, name, root, &experiments->items[i]);
    return st;
}

/* stills by frame; a rotation's parts by angle (an NXmx part's images are
 * numbered from 1 in its file, as dxtbx numbers them: their frames tell
 * only by where the rotation starts) */
static int by_first(const void *a, const void *b)
{
    const expt_ref *x = a, *y = b;
    if (x->scan) return (x->osc[0] > y->osc[0]) - (x->osc[0] < y->osc[0]);
    return (x->first > y->first) - (x->first < y->first);
}

/* ---- images ------------------------------------------------------------------ */

/* The file an image set names (its one image, or its template) */
static const char *image_file(const nb_json *iset)
{
    const nb_json *v = nb_json_get(iset, "template");
    if (!v) v = nb_json_at(nb_json_get(iset, "images"), 0);
    return v && v->type == NB_JSON_STRING ? v->string : NULL;
}

/* Whether file is one of the NXmx parts (the same file, however named) */
static int is_nxmx_part(const char *file, const char *const *nxmx_parts, int n)
{
    char a[PATH_MAX], b[PATH_MAX];
    if (!file || !realpath(file, a)) return 0;
    for (int k = 0; k < n; k++)
        if (realpath(nxmx_parts[k], b) && !strcmp(a, b)) return 1;
    return 0;
}

static void put_imageset_tail(nb_strbuf *sb)
{
    nb_strbuf_append(sb, "\"mask\": null, \"gain\": null, \"pedestal\": null, \"dx\": null, \"dy\": null, "
                         "\"params\": {\"dynamic_shadowing\": \"Auto\", \"multi_panel\": false}}");
}

/* ---- the joined list --------------------------------------------------------- */

/* Rotation parts: one after another (in angle, and in frame numbers where
 * the images are files numbered so), one beam, goniometer, crystal and step */
static nb_status check_rotation(const join_state *J)
{
    const expt_ref *a = &J->refs[0];
    char *beam = as_text(a->beam), *gonio = as_text(a->goniometer), *crystal = as_text(a->crystal);
    nb_status st = NB_OK;
    for (size_t i = 1; i < J->nrefs && !st; i++) {
        const expt_ref *p = &J->refs[i - 1], *r = &J->refs[i];
        char *b = as_text(r->beam), *g = as_text(r->goniometer), *c = as_text(r->crystal);
        const double next = p->osc[0] + (double)(p->last - p->first + 1) * p->osc[1];
        const int numbered = !nb_json_get(r->imageset, "single_file_indices");
        if (strcmp(b, beam) || strcmp(g, gonio) || strcmp(c, crystal) || r->osc[1] != a->osc[1])
            st = nb_error_set(NB_ERR_DATA, "'%s' and '%s' hold other beams, goniometers, crystals or steps: they are "
                                           "not parts of one experiment",
                              a->part, r->part);
        else if (r->osc[0] < next - 1e-6 * (1 + fabs(next)) || (numbered && r->first <= p->last))
            st = nb_error_set(NB_ERR_DATA, "'%s' and '%s' overlap: both hold the rotation from %.6g deg", p->part,
                              r->part, r->osc[0]);
        else if (r->osc[0] > next + 1e-6 * (1 + fabs(next)) || (numbered && r->first != p->last + 1))
            st = nb_error_set(NB_ERR_DATA, "the rotation from %.6g to %.6g deg is in no part: the parts of '%s' leave a "
                                           "gap",
                              next, r->osc[0], J->path);
        free(b), free(g), free(c);
    }
    free(beam), free(gonio), free(crystal);
    return st;
}

/* The numbers of every part's scan field `key`, one after another */
static void put_scan_list(nb_strbuf *sb, const join_state *J, const char *key)
{
    nb_strbuf_printf(sb, "\"%s\": [", key);
    int first = 1;
    for (size_t i = 0; i < J->nrefs; i++) {
        const nb_json *v = nb_json_get(J->refs[i].scan, key);
        for (size_t k = 0; v && v->type == NB_JSON_ARRAY && k < v->count; k++, first = 0)
            nb_strbuf_printf(sb, "%s%.17g", first ? "" : ", ", v->items[k].number + 0.0);
    }
    nb_strbuf_append(sb, "], ");
}

/* A rotation's one image sequence: the master's frames, or the parts' one template */
static nb_status put_rotation_images(nb_strbuf *sb, const join_state *J, const char *master,
                                     const char *const *nxmx_parts, int n_nxmx)
{
    const expt_ref *a = &J->refs[0];
    long total = 0;
    for (size_t i = 0; i < J->nrefs; i++) total += J->refs[i].last - J->refs[i].first + 1;
    if (!a->imageset) return NB_OK;
    const char *file = image_file(a->imageset);
    if (master && is_nxmx_part(file, nxmx_parts, n_nxmx)) {
        nb_strbuf_append(sb, "    {\"__id__\": \"ImageSequence\", \"template\": ");
        nb_json_write_string(sb, master);
        nb_strbuf_append(sb, ", \"single_file_indices\": [");
        for (long i = 0; i < total; i++) nb_strbuf_printf(sb, "%s%ld", i ? ", " : "", i);
        nb_strbuf_append(sb, "], ");
        put_imageset_tail(sb);
        nb_strbuf_append(sb, "\n");
        return NB_OK;
    }
    for (size_t i = 1; i < J->nrefs; i++) {
        const char *f = J->refs[i].imageset ? image_file(J->refs[i].imageset) : NULL;
        if (!f || !file || strcmp(f, file) || nb_json_get(J->refs[i].imageset, "single_file_indices"))
            return nb_error_set(NB_ERR_USAGE, "the parts' images are different files (NXmx files of shards?): join "
                                              "those into a master in the same command (--join PART.nxs ... -o "
                                              "MASTER.nxs) and '%s' names it",
                                J->path);
    }
    nb_strbuf_append(sb, "    ");
    nb_json_write(sb, a->imageset);
    nb_strbuf_append(sb, "\n");
    return NB_OK;
}

/* An experiment's identifier as its part states it (the run's, or one kept from DIALS) */
static void put_identifier(nb_strbuf *sb, const expt_ref *r)
{
    if (r->identifier && r->identifier->type == NB_JSON_STRING) nb_json_write_string(sb, r->identifier->string);
    else nb_json_write_string(sb, "");
}

static nb_status put_rotation(nb_strbuf *sb, const join_state *J, const char *master, const char *const *nxmx_parts,
                              int n_nxmx)
{
    nb_status st = check_rotation(J);
    if (st) return st;
    const expt_ref *a = &J->refs[0];
    int images = a->imageset != NULL;
    nb_strbuf_append(sb, "  \"experiment\": [{\"__id__\": \"Experiment\", \"identifier\": ");
    put_identifier(sb, a);
    nb_strbuf_printf(sb, ", \"beam\": 0, \"detector\": 0, \"goniometer\": 0, \"scan\": 0, %s\"crystal\": 0}],\n"
                         "  \"imageset\": [\n",
                     images ? "\"imageset\": 0, " : "");
    if ((st = put_rotation_images(sb, J, master, nxmx_parts, n_nxmx))) return st;
    nb_strbuf_append(sb, "  ],\n  \"beam\": [");
    nb_json_write(sb, a->beam);
    nb_strbuf_append(sb, "],\n  \"detector\": [");
    nb_json_write(sb, J->detector_json);
    nb_strbuf_append(sb, "],\n  \"goniometer\": [");
    if (a->goniometer) nb_json_write(sb, a->goniometer);
    /* one NXmx file's frames are numbered from 1 (its indices), files by the numbers in their names */
    long total = 0;
    for (size_t i = 0; i < J->nrefs; i++) total += J->refs[i].last - J->refs[i].first + 1;
    const int in_master = master && a->imageset && is_nxmx_part(image_file(a->imageset), nxmx_parts, n_nxmx);
    const long first = in_master ? 1 : a->first;
    nb_strbuf_printf(sb, "],\n  \"scan\": [{\"image_range\": [%ld, %ld], \"batch_offset\": 0, "
                         "\"oscillation\": [%.17g, %.17g], ",
                     first, first + total - 1, a->osc[0], a->osc[1]);
    put_scan_list(sb, J, "exposure_time");
    if (in_master) { /* as dxtbx reads a file's: frame i at i exposures */
        const nb_json *t = nb_json_at(nb_json_get(a->scan, "exposure_time"), 0);
        nb_strbuf_append(sb, "\"epochs\": [");
        for (long i = 0; i < total; i++) nb_strbuf_printf(sb, "%s%.17g", i ? ", " : "", (double)i * (t ? t->number : 1.0));
        nb_strbuf_append(sb, "], ");
    } else {
        put_scan_list(sb, J, "epochs");
    }
    nb_strbuf_append(sb, "\"valid_image_ranges\": {}}],\n  \"crystal\": [");
    nb_json_write(sb, a->crystal);
    nb_strbuf_append(sb, "],\n");
    return NB_OK;
}

/* Every experiment's beam (or crystal), one a line */
enum model_kind { MODEL_BEAM, MODEL_CRYSTAL };
static void put_models(nb_strbuf *sb, const join_state *J, enum model_kind kind)
{
    for (size_t i = 0; i < J->nrefs; i++) {
        nb_strbuf_append(sb, "    ");
        nb_json_write(sb, kind == MODEL_BEAM ? J->refs[i].beam : J->refs[i].crystal);
        nb_strbuf_append(sb, i + 1 < J->nrefs ? ",\n" : "\n");
    }
}

/* Stills in frame order, each its own beam, crystal and image (the master's
 * frame when its file is an NXmx part joined beside) */
static nb_status put_stills(nb_strbuf *sb, const join_state *J, const char *master, const char *const *nxmx_parts,
                            int n_nxmx)
{
    for (size_t i = 1; i < J->nrefs; i++)
        if (J->refs[i].first == J->refs[i - 1].first)
            return nb_error_set(NB_ERR_DATA, "'%s' and '%s' overlap: both hold frame %ld", J->refs[i - 1].part,
                                J->refs[i].part, J->refs[i].first);
    int images = J->refs[0].imageset != NULL;
    for (size_t i = 0; i < J->nrefs; i++)
        if ((J->refs[i].imageset != NULL) != images)
            return nb_error_set(NB_ERR_DATA, "'%s' names images, '%s' none", J->refs[images ? 0 : i].part,
                                J->refs[images ? i : 0].part);
    nb_strbuf_append(sb, "  \"experiment\": [\n");
    for (size_t i = 0; i < J->nrefs; i++) {
        nb_strbuf_append(sb, "    {\"__id__\": \"Experiment\", \"identifier\": ");
        put_identifier(sb, &J->refs[i]);
        nb_strbuf_printf(sb, ", \"nb_frame\": %ld, \"beam\": %zu, \"detector\": 0, ", J->refs[i].first, i);
        if (images) nb_strbuf_printf(sb, "\"imageset\": %zu, ", i);
        nb_strbuf_printf(sb, "\"crystal\": %zu}%s\n", i, i + 1 < J->nrefs ? "," : "");
    }
    nb_strbuf_append(sb, "  ],\n  \"imageset\": [\n");
    size_t in_master = 0; /* the master holds the parts' frames in frame order */
    for (size_t i = 0; images && i < J->nrefs; i++) {
        const nb_json *iset = J->refs[i].imageset;
        nb_strbuf_append(sb, "    ");
        if (master && is_nxmx_part(image_file(iset), nxmx_parts, n_nxmx)) {
            nb_strbuf_append(sb, "{\"__id__\": \"ImageSet\", \"images\": [");
            nb_json_write_string(sb, master);
            nb_strbuf_printf(sb, "], \"single_file_indices\": [%zu], ", in_master++);
            put_imageset_tail(sb);
        } else {
            nb_json_write(sb, iset);
        }
        nb_strbuf_append(sb, i + 1 < J->nrefs ? ",\n" : "\n");
    }
    nb_strbuf_append(sb, "  ],\n  \"beam\": [\n");
    put_models(sb, J, MODEL_BEAM);
    nb_strbuf_append(sb, "  ],\n  \"detector\": [");
    nb_json_write(sb, J->detector_json);
    nb_strbuf_append(sb, "],\n  \"goniometer\": [],\n  \"scan\": [],\n  \"crystal\": [\n");
    put_models(sb, J, MODEL_CRYSTAL);
    nb_strbuf_append(sb, "  ],\n");
    return NB_OK;
}

nb_status nb_expt_join(const char *path, const char *const *parts, int nparts, const char *master,
                       const char *const *nxmx_parts, int n_nxmx_parts)
{
    join_state J;
    memset(&J, 0, sizeof J);
    J.path = path;
    if (nparts < 1) return nb_error_set(NB_ERR_USAGE, "'%s': no parts to join", path);
    nb_status st = nb_calloc((void **)&J.roots, (size_t)nparts, sizeof *J.roots, "the parts");
    for (int k = 0; k < nparts && !st; k++, J.nroots++) st = read_part(&J, parts[k], &J.roots[k]);
    /* the master by its absolute name, as dials.import writes names */
    char abs[2 * NB_PATH_MAX + 2];
    if (!st && master) {
        if (nb_absolute_path(master, abs, sizeof abs))
            st = nb_error_set(NB_ERR_IO, "'%s': cannot name the master's directory: %s", path, strerror(errno));
        else master = abs;
    }
    nb_strbuf sb;
    nb_strbuf_init(&sb);
    if (!st) {
        qsort(J.refs, J.nrefs, sizeof *J.refs, by_first);
        nb_strbuf_append(&sb, "{\n  \"__id__\": \"ExperimentList\",\n");
        st = J.rotation ? put_rotation(&sb, &J, master, nxmx_parts, n_nxmx_parts)
                        : put_stills(&sb, &J, master, nxmx_parts, n_nxmx_parts);
        nb_strbuf_append(&sb, "  \"profile\": [],\n  \"scaling_model\": []\n}\n");
    }
    if (!st) st = nb_write_text_file(path, sb.data, sb.len);
    nb_strbuf_free(&sb);
    for (int k = 0; k < J.nroots; k++) nb_json_free(&J.roots[k]);
    free(J.roots);
    free(J.refs);
    free(J.detector);
    return st;
}
