/* nb_api_args.c - nb.h's plans from nb-geom's flags, made in the calling
 * process: the flags read by the loop nb-geom reads them with (nb_request.c,
 * nb_geom_flags.c), resolved by nb_resolve() and written as nb-geom writes
 * its PLAN record; a stream of it (nb_plan_stream_from_args) or a renderer
 * (nb_renderer_from_args).  Never a usage text or an exit: a bad flag is a
 * status and nb-geom's message.  The files of -img, -mask, -panels and
 * -expt are read by nb-geom's own readers, handed to the loop as nb-geom
 * hands them (nb_api_file_hooks, engine/nb_api_files.c); a renderer refuses
 * nb-hkl's files (-hkl, -dump), whose F it takes as arrays. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_api.h"
#include "nb_args.h"
#include "nb_geometry.h"
#include "nb_options.h"
#include "nb_plan.h"
#include "nb_stream.h"
#include "nb_util.h"

/* The flags whose file nb-hkl reads (structure factors): a renderer takes
 * its F as arrays (nb_renderer_set_F) instead. */
static const struct refused {
    int id;
    const char *why;
} refused[] = {
    {FL_HKL, "libnb reads no structure-factor file: give the F as arrays (nb_renderer_set_F), or the "
             "stream of nb-geom | nb-hkl"},
    {FL_DUMP, "libnb reads no structure-factor file: give the F as arrays (nb_renderer_set_F), or the "
              "stream of nb-geom | nb-hkl"},
};

/* The command nb-geom records in the plan, "nb-geom FLAGS", each word
 * quoted as nb-geom quotes its own command line (nb_join_args), so that the
 * plan is the one `nb-geom FLAGS` writes. */
static char *command_line(int argc, char **argv)
{
    char *flags = nb_join_args(argc, argv);
    nb_strbuf sb;
    nb_strbuf_init(&sb);
    nb_strbuf_append(&sb, "nb-geom");
    if (argc > 0) {
        nb_strbuf_append(&sb, " ");
        nb_strbuf_append(&sb, flags);
    }
    free(flags);
    return nb_strbuf_take(&sb);
}

/* The caller's flags as nb-geom's loop takes them: argv writable, its own
 * copy (the request keeps pointers into it until the plan is made). */
static nb_status copy_args(const char *who, int argc, const char *const *argv, char ***out)
{
    *out = NULL;
    if (argc < 0 || (argc > 0 && !argv)) return nb_error_set(NB_ERR_USAGE, "%s: %d flags and no argv", who, argc);
    for (int i = 0; i < argc; i++)
        if (!argv[i]) return nb_error_set(NB_ERR_USAGE, "%s: argv[%d] is NULL", who, i);
    char **v = NULL;
    nb_status st = nb_calloc((void **)&v, (size_t)argc + 1, sizeof *v, "the flags");
    for (int i = 0; !st && i < argc; i++)
        if (!(v[i] = strdup(argv[i]))) st = nb_error_set(NB_ERR_NOMEM, "%s: out of memory for the flags", who);
    if (!st) *out = v;
    for (int i = 0; st && v && i < argc; i++) free(v[i]);
    if (st) free(v);
    return st;
}

static void free_args(int argc, char **v)
{
    for (int i = 0; v && i < argc; i++) free(v[i]);
    free(v);
}

/* The refused flags among those scanned (a renderer's). */
static nb_status check_refused(const char *who, const nb_scanned_args *args, int renderer)
{
    for (int k = 0; k < args->count && renderer; k++)
        for (size_t j = 0; j < sizeof refused / sizeof refused[0]; j++)
            if (args->flags[k].id == refused[j].id)
                return nb_error_set(NB_ERR_UNSUPPORTED, "%s: %s: %s", who, args->argv[args->flags[k].index],
                                    refused[j].why);
    return NB_OK;
}

/* The plan of the flags, as nb-geom resolves it (its file flags read by
 * nb-geom's readers); renderer: nb-hkl's files refused. */
static nb_status resolve_args(const char *who, int argc, const char *const *argv, int renderer, nb_plan *plan)
{
    char **v = NULL;
    nb_request rq;
    nb_scanned_args args;
    const nb_args_hooks *hooks = nb_api_file_hooks();
    nb_request_defaults(&rq);
    memset(&args, 0, sizeof args);
    nb_status st = copy_args(who, argc, argv, &v);
    if (!st) st = nb_request_scan_args(&rq, argc, v, hooks, &args);
    if (!st) st = check_refused(who, &args, renderer);
    if (!st) {
        rq.command_line = command_line(argc, v);
        st = nb_request_apply_scanned(&rq, &args, hooks);
    }
    nb_strbuf log;
    nb_strbuf_init(&log);
    if (!st && !(st = nb_resolve(&rq, plan, &log))) {
        /* nb-geom -v's geometry, at the tools' -v level */
        if (nb_verbosity() > 0 && log.data) fputs(log.data, stderr);
    }
    nb_strbuf_free(&log);
    nb_scanned_args_free(&args);
    nb_request_free(&rq);
    free_args(argc, v);
    /* nb-geom's messages name their tool, the library's "nb" here: they are
     * nb-geom's flags, and the caller's call */
    const char *msg = nb_error_message();
    size_t len = strlen(msg);
    if (st && len >= 8 && !strcmp(msg + len - 8, ", not nb")) nb_error_rename(", not nb", ", not nb-geom");
    if (st && !strstr(nb_error_message(), who)) nb_error_prefix(st, "%s", who);
    return st;
}

nb_status nb_api_plan_from_args(const char *who, int argc, const char *const *argv, nb_plan *plan)
{
    nb_plan_init(plan);
    return resolve_args(who, argc, argv, 0, plan);
}

/* The plan's record, as nb-geom writes it. */
static nb_status plan_record(const char *who, int argc, const char *const *argv, int renderer, nb_record *rec)
{
    nb_plan plan;
    nb_plan_init(&plan);
    nb_status st = resolve_args(who, argc, argv, renderer, &plan);
    if (!st) st = nb_plan_to_record(&plan, rec);
    nb_plan_free(&plan);
    return st;
}

/* The bytes of a PLAN record and the END of its segment. */
static nb_status stream_bytes(const nb_record *plan, void **bytes, size_t *size)
{
    nb_record end;
    unsigned char *a = NULL, *b = NULL;
    size_t na = 0, nbytes = 0;
    nb_record_init(&end, "END");
    nb_hdr_set_long(&end, "RECORDS", 1);
    nb_status st = nb_record_serialize(plan, &a, &na);
    if (!st) st = nb_record_serialize(&end, &b, &nbytes);
    unsigned char *all = NULL;
    if (!st) st = nb_calloc((void **)&all, na + nbytes, 1, "the stream");
    if (!st) {
        memcpy(all, a, na);
        memcpy(all + na, b, nbytes);
        *bytes = all;
        *size = na + nbytes;
    }
    nb_record_free(&end);
    free(a);
    free(b);
    return st;
}

int nb_plan_stream_from_args(int argc, const char *const *argv, void **bytes, size_t *size)
{
    static const char who[] = "nb_plan_stream_from_args";
    if (!bytes || !size) return nb_error_set(NB_ERR_USAGE, "%s: no place for the bytes or their size", who);
    *bytes = NULL;
    *size = 0;
    nb_record rec;
    memset(&rec, 0, sizeof rec);
    nb_status st = plan_record(who, argc, argv, 0, &rec);
    if (!st) st = stream_bytes(&rec, bytes, size);
    nb_record_free(&rec);
    return nb_api_result(st);
}

int nb_renderer_from_args(int argc, const char *const *argv, const nb_options *options, nb_renderer **out)
{
    static const char who[] = "nb_renderer_from_args";
    if (!out) return nb_error_set(NB_ERR_USAGE, "%s: no place for the renderer", who);
    *out = NULL;
    nb_render_config c;
    nb_record rec;
    nb_plan plan;
    nb_hkl hkl;
    memset(&rec, 0, sizeof rec);
    nb_plan_init(&plan);
    nb_hkl_init(&hkl);
    nb_status st = nb_api_render_config(options, who, &c);
    /* the plan nb-sim reads: the record's, decoded */
    if (!st) st = plan_record(who, argc, argv, 1, &rec);
    if (!st) st = nb_plan_from_record(&rec, &plan);
    nb_record_free(&rec);
    if (st) return nb_api_result(st);
    return nb_api_result(nb_api_renderer_make(&plan, &hkl, 0, &c, 1, out));
}
