/* nb-geom: nanoBragg's experiment flags in, an explicit plan out. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_cli.h"
#include "nb_geometry.h"
#include "nb_options.h"
#include "nb_plan.h"
#include "nb_stream.h"
#include "nb_util.h"
#include "smv.h"

static const nb_tool_info tool = {
    "nb-geom",
    NB_GEOM,
    "[OPTIONS] [NANOBRAGG FLAGS...]",
    "resolve a nanoBragg experiment into an explicit plan (the first stage of a pipeline)",
    "nb-geom takes nanoBragg's experiment flags with the same spellings, units and defaults,\n"
    "resolves conventions, pivots, beam centres, the crystal orientation, sources, mosaic\n"
    "domains and sampling exactly as nanoBragg does, and writes one PLAN record (an nb stream)\n"
    "for nb-hkl, nb-sim, nb-noise and nb-convert.  Flags meant for later stages (-hkl,\n"
    "-default_F, -floatfile, -seed, ...) are recorded in the plan, so those stages can run on\n"
    "their defaults.  Flags are matched exactly.  With -v the resolved geometry is printed on\n"
    "standard error in the reference's log format.",
    "      --reference-defaults\n"
    "                      behave like the nanoBragg program: request floatimage.bin,\n"
    "                      intimage.img, noiseimage.img, image.pgm and the Fdump.bin cache\n",
    "  nb-geom -cell 100 100 100 90 90 90 -lambda 6.2 -N 5 -distance 100 -detpixels 1024 \\\n"
    "          -default_F 100 > plan.nbs\n"
    "  nb-geom -v -xds -cell 78 78 37 90 90 90 -misset random -ORGX 256 -ORGY 256 -o plan.nbs\n",
    0,
    NULL,
};

typedef struct parsed_flag {
    const nb_flag *flag;
    int index; /* argv position */
    int nvals;
} parsed_flag;

int main(int argc, char **argv)
{
    nb_std_opts opts;
    nb_request rq;
    nb_status st = NB_OK;
    parsed_flag *flags = calloc((size_t)argc + 1, sizeof *flags);
    int nflags = 0;

    nb_set_tool_name(tool.name);
    nb_std_opts_init(&opts);
    /* its stream goes to standard output unless -o says otherwise: a failure
     * from here on leaves an ABORT record on the pipe to the next stage */
    nb_stream_to_stdout(1);
    nb_request_defaults(&rq);
    if (!flags) nb_exit_on_error(nb_error_set(NB_ERR_NOMEM, "out of memory"));

    /* pass 1: recognise every argument */
    for (int i = 1; i < argc; i++) {
        if (nb_std_option(&tool, &opts, argc, argv, &i, &st)) {
            nb_exit_on_error(st);
            continue;
        }
        if (!strcmp(argv[i], "--reference-defaults")) {
            rq.reference_defaults = 1;
            continue;
        }
        const nb_flag *f = nb_flag_lookup_for(argv[i], NB_GEOM);
        if (!f || !(f->owners & NB_GEOM)) nb_exit_on_error(nb_flag_reject(argv[i], NB_GEOM));
        int nvals;
        nb_exit_on_error(nb_flag_collect(f, argc, argv, i, &nvals));
        if (f->id == FL_CURVED_DET && i == argc - 1) {
            nb_warn("-curved_det as the last argument is ignored, as the reference does (it needs a value after it)");
            continue;
        }
        flags[nflags].flag = f;
        flags[nflags].index = i;
        flags[nflags].nvals = nvals;
        nflags++;
        i += nvals;
    }
    nb_std_apply(&opts);
    nb_stream_to_stdout(!strcmp(opts.output, "-"));
    rq.command_line = nb_join_args(argc, argv);

    /* the reference reads the -mask header, then the -img header, before any
     * other flag, so flags override headers and -img beats -mask */
    const char *maskfile = NULL, *imgfile = NULL;
    for (int k = 0; k < nflags; k++) {
        if (flags[k].flag->id == FL_MASK) maskfile = argv[flags[k].index + 1];
        if (flags[k].flag->id == FL_IMG) imgfile = argv[flags[k].index + 1];
    }
    if (maskfile) nb_exit_on_error(nb_smv_apply_to_request(&rq, maskfile, NB_HEADER_MASK));
    if (imgfile) nb_exit_on_error(nb_smv_apply_to_request(&rq, imgfile, NB_HEADER_IMG));

    /* pass 2: apply in order */
    int misset_from_seed_quirk = 0;
    double quirk_misset[3] = {0, 0, 0};
    for (int k = 0; k < nflags; k++) {
        const nb_flag *f = flags[k].flag;
        int i = flags[k].index;
        nb_exit_on_error(nb_request_apply(&rq, f->id, f->name, argv + i + 1, flags[k].nvals));
        if (f->id == FL_MISSET) misset_from_seed_quirk = 0;
        if (f->id == FL_MISSET_SEED && i + 3 < argc && !strstr(argv[i + 1], "rand")) {
            /* the reference's -misset clause also matches -misset_seed: it
             * takes the seed and the next two arguments as fixed angles */
            for (int j = 0; j < 3; j++) quirk_misset[j] = atof(argv[i + 1 + j]);
            for (int j = 0; j < 3; j++) rq.misset[j] = quirk_misset[j] / (180.0 * M_1_PI);
            rq.misset_mode = 1;
            misset_from_seed_quirk = 1;
        }
    }
    if (misset_from_seed_quirk)
        nb_warn("-misset_seed also set a fixed misset of %g %g %g degrees (its value and the next two "
                "arguments), as the reference does; put -misset random after -misset_seed",
                quirk_misset[0], quirk_misset[1], quirk_misset[2]);

    nb_plan plan;
    nb_strbuf log;
    nb_strbuf_init(&log);
    st = nb_resolve(&rq, &plan, &log);
    if (st) nb_exit_on_error(st);
    if (opts.verbose && log.data) fputs(log.data, stderr);
    nb_strbuf_free(&log);

    nb_record rec;
    nb_writer *w = NULL;
    st = nb_plan_to_record(&plan, &rec);
    if (!st) st = nb_writer_open(&w, opts.output);
    if (!st) st = nb_writer_put(w, &rec);
    if (!st) st = nb_writer_end(w);
    if (!st) st = nb_writer_close(w);
    else if (w) nb_writer_abort(w);
    nb_record_free(&rec);
    nb_plan_free(&plan);
    nb_request_free(&rq);
    free(flags);
    nb_exit_on_error(st);
    return 0;
}
