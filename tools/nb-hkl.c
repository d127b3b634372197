/* nb-hkl: structure factors for the plan (HKL text, Fdump.bin, default_F). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "hkl.h"
#include "nb_cli.h"
#include "nb_hkl.h"
#include "nb_options.h"
#include "nb_plan.h"
#include "nb_stream.h"
#include "nb_util.h"

typedef struct hkl_opts {
    const char *hkl, *dump;
    double default_F;
    int have_hkl, have_dump, have_default;
} hkl_opts;

/* each flag overrides the plan's request: have_* says it was given */
#define HO(f) NB_AT(hkl_opts, f)
static const nb_opt rows[] = {
    {FL_HKL, .type = NB_OPT_STRING, .at = {HO(hkl)}, .sets = {{HO(have_hkl), 1}}},
    {FL_DUMP, .type = NB_OPT_STRING, .at = {HO(dump)}, .sets = {{HO(have_dump), 1}}},
    {FL_DEFAULT_F, .type = NB_OPT_DOUBLE, .at = {HO(default_F)}, .sets = {{HO(have_default), 1}}},
};
static const nb_opt_table table = {NB_HKL, rows, (int)(sizeof rows / sizeof rows[0])};

static const nb_tool_info tool = {
    "nb-hkl",
    NB_HKL,
    "[OPTIONS] [STREAM]",
    "add the structure factors F(hkl) to a plan stream",
    "nb-hkl reads an nb stream (standard input or STREAM), and after every PLAN record\n"
    "appends an HKL record holding the F(hkl) grid: from an 'h k l F' text file (-hkl),\n"
    "from a binary Fdump.bin cache (-dump without -hkl), or nothing but a constant\n"
    "(-default_F).  Requests recorded in the plan by nb-geom are used unless overridden\n"
    "here.  With -hkl and -dump the cache is written, byte-compatible with nanoBragg's.",
    &table,
    "  nb-geom -cell 70 80 90 75 85 95 -N 5 -distance 100 | nb-hkl -hkl P1.hkl | nb-sim | ...\n"
    "  nb-hkl -hkl P1.hkl -dump Fdump.bin < plan.nbs > plan+hkl.nbs\n",
    NULL,
};

static int file_exists(const char *path)
{
    struct stat s;
    return stat(path, &s) == 0;
}

/* Decide where F comes from for this plan and load it. */
static nb_status load_hkl(const nb_plan *plan, const hkl_opts *o, nb_hkl *out)
{
    const char *hkl = o->have_hkl ? o->hkl : plan->hkl_file;
    const char *dump = o->have_dump ? o->dump : plan->dump_file;
    int dump_implicit = !o->have_dump && plan->dump_implicit;
    double default_F = o->have_default ? o->default_F : plan->default_F;
    nb_status st;

    nb_hkl_init(out);
    if (hkl) {
        nb_info("counting entries in %s", hkl);
        if ((st = nb_hkl_read_text(hkl, default_F, out))) return st;
        nb_info("  %ld reflections, h %d..%d k %d..%d l %d..%d", out->hkls, out->h_min, out->h_max, out->k_min,
                out->k_max, out->l_min, out->l_max);
        if (dump) {
            nb_info("writing dump file for next time: %s", dump);
            st = nb_hkl_write_fdump(out, dump);
            if (st && dump_implicit) {
                /* the reference only warns when its default cache cannot be written */
                nb_warn("%s", nb_error_message());
                st = NB_OK;
            }
            if (st) return st;
        }
        return NB_OK;
    }
    if (dump && (!dump_implicit || file_exists(dump))) {
        if (dump_implicit)
            nb_warn("no -hkl: reading structure factors from '%s' left by an earlier run, as the reference does",
                    dump);
        nb_info("reading Fs from %s", dump);
        return nb_hkl_read_fdump(dump, default_F, out);
    }
    if (default_F == 0.0)
        return nb_error_set(NB_ERR_USAGE, "no structure factors: give -hkl FILE, -dump FILE or -default_F F");
    out->default_F = default_F;
    out->hkls = 0;
    return NB_OK;
}

int main(int argc, char **argv)
{
    nb_std_opts opts;
    hkl_opts o;
    nb_status st = NB_OK;

    nb_set_tool_name(tool.name);
    nb_std_opts_init(&opts);
    /* its stream goes to standard output unless -o says otherwise: a failure
     * from here on leaves an ABORT record on the pipe to the next stage */
    nb_stream_to_stdout(1);
    memset(&o, 0, sizeof o);
    nb_exit_on_error(nb_tool_parse(&tool, &opts, &o, argc, argv));
    nb_exit_on_error(nb_std_apply(&opts));
    nb_stream_to_stdout(!strcmp(opts.output, "-"));

    nb_reader *r = NULL;
    nb_writer *w = NULL;
    nb_record rec, out;
    int eof = 0;
    memset(&rec, 0, sizeof rec);
    st = nb_reader_open(&r, opts.input);
    if (!st) st = nb_writer_open(&w, opts.output);
    while (!st) {
        st = nb_reader_next(r, &rec, &eof);
        if (st || eof) break;
        if (nb_record_is(&rec, "END")) {
            st = nb_writer_end(w);
            continue;
        }
        if (nb_record_is(&rec, "HKL")) {
            nb_info("replacing the HKL record already in the stream");
            continue;
        }
        if ((st = nb_writer_put(w, &rec))) break;
        if (!nb_record_is(&rec, "PLAN")) continue;
        nb_plan plan;
        nb_hkl hkl;
        if ((st = nb_plan_from_record(&rec, &plan))) break;
        st = load_hkl(&plan, &o, &hkl);
        nb_plan_free(&plan);
        if (st) break;
        nb_info("  %ld initialized hkls (all others =%g)", hkl.hkls, hkl.default_F);
        st = nb_hkl_to_record(&hkl, &out);
        if (!st) st = nb_writer_put(w, &out);
        nb_record_free(&out);
        nb_hkl_free(&hkl);
    }
    nb_record_free(&rec);
    nb_reader_close(r);
    if (!st) st = nb_writer_close(w);
    else if (w) nb_writer_abort(w);
    nb_exit_on_error(st);
    return 0;
}
