/* nb-geom: nanoBragg's experiment flags in, an explicit plan out. */
#include <stdio.h>
#include <string.h>

#include "nb_cli.h"
#include "nb_geometry.h"
#include "nb_options.h"
#include "nb_plan.h"
#include "nb_stream.h"
#include "nb_util.h"
#include "detector_file.h"
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
    "standard error in the reference's log format.  -panels FILE takes the detector (only the\n"
    "detector) from a DIALS experiment list (.expt) or a CrystFEL geometry (.geom): one or\n"
    "more flat panels, tied to the flags' beam and spindle (or polarization); the flags that\n"
    "place the one-panel detector (-distance, -pixel, -detpixels, beam centres, rotations,\n"
    "-roi, -img, -mask ...) are then usage errors.  -expt FILE takes the detector, the beam\n"
    "and the crystals from a DIALS experiment list: a frame per still (each with its crystal\n"
    "and wavelength) or the sweep's frames; the flags add what the list lacks (-N, -mosaic,\n"
    "-fluence, -default_F ...), and those that say what it says (-cell, -lambda, -distance,\n"
    "-panels, -nframes ...) are usage errors.  -expt_spectra LIST gives each still its own\n"
    "spectrum: a diffBragg .lam file (\"# wavelengths, weights\", Angstrom) per experiment, a\n"
    "line of LIST each (or hopper's 'expt refl spec' lines), at most 1000 channels; the frame's\n"
    "wavelength is the spectrum's mean (docs/physics.md 16.4).",
    &nb_request_opts,
    "  nb-geom -cell 100 100 100 90 90 90 -lambda 6.2 -N 5 -distance 100 -detpixels 1024 \\\n"
    "          -default_F 100 > plan.nbs\n"
    "  nb-geom -panels imported.expt -cell 78 78 37 90 90 90 -lambda 1 -N 10 -oversample 1 -o plan.nbs\n"
    "  nb-geom -expt indexed.expt -N 10 -default_F 100 -o plan.nbs\n"
    "  nb-geom -expt model.expt -expt_spectra model_spectra.txt -N 10 -default_F 100 -o plan.nbs\n"
    "  nb-geom -v -xds -cell 78 78 37 90 90 90 -misset random -ORGX 256 -ORGY 256 -o plan.nbs\n",
    NULL,
    NULL, /* no exit status of its own */
};

/* nb-geom's own options (-o, -q, -v, --help ...) for the library's loop */
static int std_option(void *ctx, int argc, char **argv, int *i, nb_status *st)
{
    return nb_std_option(&tool, ctx, argc, argv, i, st);
}

int main(int argc, char **argv)
{
    nb_std_opts opts;
    nb_request rq;
    nb_status st = NB_OK;

    nb_set_tool_name(tool.name);
    nb_std_opts_init(&opts);
    /* its stream goes to standard output unless -o says otherwise: a failure
     * from here on leaves an ABORT record on the pipe to the next stage */
    nb_stream_to_stdout(1);
    nb_request_defaults(&rq);

    /* the command line: every argument recognised first, then (once -o and
     * -q are known) the headers and the flags applied in order */
    const nb_args_hooks hooks = {std_option, &opts, nb_smv_apply_to_request, nb_detector_file_read,
                                 nb_experiment_list_read};
    nb_scanned_args args;
    nb_exit_on_error(nb_request_scan_args(&rq, argc - 1, argv + 1, &hooks, &args));
    nb_exit_on_error(nb_std_apply(&opts));
    nb_stream_to_stdout(!strcmp(opts.output, "-"));
    rq.command_line = nb_join_args(argc, argv);
    nb_exit_on_error(nb_request_apply_scanned(&rq, &args, &hooks));
    nb_scanned_args_free(&args);

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
    nb_exit_on_error(st);
    return 0;
}
