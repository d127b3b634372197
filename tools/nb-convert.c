/* nb-convert: write the images of a stream as files. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_cli.h"
#include "nb_options.h"
#include "nb_plan.h"
#include "nb_stream.h"
#include "nb_util.h"
#include "rawfloat.h"

static const nb_tool_info tool = {
    "nb-convert",
    NB_CONVERT,
    "[OPTIONS] -o FILE [-o FILE...] [STREAM]",
    "write the images of an nb stream as files",
    "nb-convert reads an nb stream and writes every IMAGE record to the files named with -o\n"
    "(the format follows the extension, or --format).  Without -o it writes the files the plan\n"
    "requested (-floatfile).  Files are written under a temporary name and renamed when\n"
    "complete, so a failure never leaves a partial file.\n"
    "Formats: .bin (raw float32 photons/pixel, nanoBragg's floatimage.bin layout).",
    "  -o FILE             write FILE (repeatable); the format follows the extension\n"
    "      --format NAME   format for the -o that follows: bin\n",
    "  nb-geom ... | nb-hkl | nb-sim | nb-convert -o floatimage.bin\n",
};

typedef struct out_request {
    const char *path;
    const char *format; /* NULL: from the extension */
} out_request;

static const char *ext_format(const char *path)
{
    const char *dot = strrchr(path, '.');
    const char *slash = strrchr(path, '/');
    if (!dot || (slash && dot < slash)) return NULL;
    if (!strcmp(dot, ".bin") || !strcmp(dot, ".raw") || !strcmp(dot, ".float")) return "bin";
    return dot + 1;
}

static nb_status check_format(const out_request *o)
{
    const char *fmt = o->format ? o->format : ext_format(o->path);
    if (!fmt)
        return nb_error_set(NB_ERR_USAGE, "cannot tell the format of '%s' from its name; use --format", o->path);
    if (strcmp(fmt, "bin") != 0)
        return nb_error_set(NB_ERR_USAGE, "'%s': unknown or unsupported format '%s' (supported: bin)", o->path, fmt);
    return NB_OK;
}

static nb_status write_image(const out_request *o, const nb_record *img)
{
    const void *px;
    size_t n;
    long fp, sp;
    nb_status st;
    if ((st = nb_hdr_get_long(img, "FPIXELS", &fp)) || (st = nb_hdr_get_long(img, "SPIXELS", &sp))) return st;
    if ((st = nb_record_get_array(img, "pixels", NB_F32, &px, &n))) return st;
    if (n != (size_t)fp * (size_t)sp)
        return nb_error_set(NB_ERR_DATA, "IMAGE record: %zu pixels but FPIXELS x SPIXELS = %ld x %ld", n, fp, sp);
    nb_info("writing %s as %zu 4-byte floats", o->path, n);
    return nb_rawfloat_write(o->path, (const float *)px, n);
}

int main(int argc, char **argv)
{
    nb_std_opts opts;
    nb_status st = NB_OK;
    out_request *outs = calloc((size_t)argc + 1, sizeof *outs);
    int nouts = 0, ninputs = 0;
    const char *pending_format = NULL;

    nb_set_tool_name(tool.name);
    nb_std_opts_init(&opts);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (i + 1 >= argc) nb_exit_on_error(nb_error_set(NB_ERR_USAGE, "option %s needs a file name", a));
            outs[nouts].path = argv[++i];
            outs[nouts].format = pending_format;
            pending_format = NULL;
            nb_exit_on_error(check_format(&outs[nouts]));
            nouts++;
            continue;
        }
        if (!strcmp(a, "--format")) {
            if (i + 1 >= argc) nb_exit_on_error(nb_error_set(NB_ERR_USAGE, "option --format needs a name"));
            pending_format = argv[++i];
            continue;
        }
        if (nb_std_option(&tool, &opts, argc, argv, &i, &st)) {
            nb_exit_on_error(st);
            continue;
        }
        const nb_flag *f = nb_flag_lookup(a);
        if (!f && (a[0] != '-' || !strcmp(a, "-"))) {
            if (ninputs++) nb_exit_on_error(nb_error_set(NB_ERR_USAGE, "only one input stream, got '%s' too", a));
            opts.input = a;
            continue;
        }
        if (!f || !(f->owners & NB_CONVERT)) nb_exit_on_error(nb_flag_reject(a, NB_CONVERT));
        int nvals;
        nb_exit_on_error(nb_flag_collect(f, argc, argv, i, &nvals));
        if (f->id == FL_FLOATFILE) {
            outs[nouts].path = argv[i + 1];
            outs[nouts].format = "bin";
            nouts++;
        } else {
            nb_exit_on_error(nb_error_set(NB_ERR_UNSUPPORTED, "%s: only raw float output (-floatfile, .bin) is "
                                                              "supported by this nb-convert",
                                          f->name));
        }
        i += nvals;
    }
    if (pending_format) nb_exit_on_error(nb_error_set(NB_ERR_USAGE, "--format %s must come before an -o FILE", pending_format));
    nb_std_apply(&opts);

    nb_reader *r = NULL;
    nb_record rec;
    nb_plan plan;
    int have_plan = 0, eof = 0, images = 0;
    memset(&rec, 0, sizeof rec);
    st = nb_reader_open(&r, opts.input);
    while (!st) {
        st = nb_reader_next(r, &rec, &eof);
        if (st || eof) break;
        if (nb_record_is(&rec, "PLAN")) {
            if (have_plan) nb_plan_free(&plan);
            if ((st = nb_plan_from_record(&rec, &plan))) break;
            have_plan = 1;
        } else if (nb_record_is(&rec, "IMAGE")) {
            images++;
            if (nouts) {
                for (int k = 0; k < nouts && !st; k++) st = write_image(&outs[k], &rec);
            } else if (have_plan && plan.floatfile) {
                out_request req = {plan.floatfile, "bin"};
                st = write_image(&req, &rec);
            } else {
                st = nb_error_set(NB_ERR_USAGE, "nothing to write: give -o FILE (the plan requests no -floatfile)");
            }
        }
    }
    if (!st && images == 0) st = nb_error_set(NB_ERR_DATA, "%s: the stream holds no IMAGE record (run nb-sim first)",
                                             r ? nb_reader_name(r) : opts.input);
    if (have_plan) nb_plan_free(&plan);
    nb_record_free(&rec);
    nb_reader_close(r);
    free(outs);
    nb_exit_on_error(st);
    return 0;
}
