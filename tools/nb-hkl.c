/* nb-hkl: structure factors for the plan (HKL text, MTZ, mmCIF, an atomic
 * model through gemmi sfcalc, Fdump.bin, default_F). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "hkl.h"
#include "nb_hkl_model.h"
#include "mtz.h"
#include "sf_cif.h"
#include "sf_expand.h"
#include "nb_cli.h"
#include "nb_hkl.h"
#include "nb_options.h"
#include "nb_plan.h"
#include "nb_stream.h"
#include "nb_util.h"

typedef struct hkl_opts {
    const char *hkl, *dump, *column, *model;
    double default_F, dmin, ksol, bsol;
    int have_hkl, have_dump, have_default, have_dmin, have_ksol, have_bsol, fprime;
} hkl_opts;

/* each flag overrides the plan's request: have_* says it was given */
#define HO(f) NB_AT(hkl_opts, f)
static const nb_opt rows[] = {
    {FL_HKL, .type = NB_OPT_STRING, .at = {HO(hkl)}, .sets = {{HO(have_hkl), 1}}},
    {FL_DUMP, .type = NB_OPT_STRING, .at = {HO(dump)}, .sets = {{HO(have_dump), 1}}},
    {FL_DEFAULT_F, .type = NB_OPT_DOUBLE, .at = {HO(default_F)}, .sets = {{HO(have_default), 1}}},
    {NB_OPT_LOCAL, "-column", 1, "LABEL",
     "the MTZ column or mmCIF _refln item that -hkl reads (above)", "a column label", .type = NB_OPT_STRING, .at = {HO(column)}},
    {NB_OPT_LOCAL, "-model", 1, "FILE",
     "an atomic model, PDB or mmCIF: F computed by gemmi sfcalc (above)",
     "a file name", .type = NB_OPT_STRING, .at = {HO(model)}},
    {FL_DMIN, .type = NB_OPT_DOUBLE, .check = NB_CHECK_POSITIVE, .at = {HO(dmin)}, .sets = {{HO(have_dmin), 1}}},
    {NB_OPT_LOCAL, "-ksol", 1, "E/A3",
     "-model: add a bulk solvent of this k_sol (default 0.35 when -bsol is given)", NULL, .type = NB_OPT_DOUBLE,
     .check = NB_CHECK_NONNEG, .at = {HO(ksol)}, .sets = {{HO(have_ksol), 1}}},
    {NB_OPT_LOCAL, "-bsol", 1, "A2",
     "-model: the bulk solvent's B_sol (default 46 when -ksol is given)", NULL, .type = NB_OPT_DOUBLE,
     .check = NB_CHECK_NONNEG, .at = {HO(bsol)}, .sets = {{HO(have_bsol), 1}}},
    {NB_OPT_LOCAL, "-fprime", 0, "",
     "-model: each element's f' at the plan's wavelength (no f'')", NULL,
     .type = NB_OPT_SET, .sets = {{HO(fprime), 1}}},
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
    "here.  With -hkl and -dump the cache is written, byte-compatible with nanoBragg's.\n"
    "\n"
    "-hkl also reads MTZ files (by CCP4's library) and mmCIF reflection files (the PDB's\n"
    "*-sf.cif), told apart by their content.  Without -column the file's one amplitude\n"
    "column (MTZ type F; mmCIF F_meas_au, F_meas, F_calc) is read, and more than one is\n"
    "an error listing them; -column LABEL names amplitudes (F), intensities (J,\n"
    "intensity_meas: F = sqrt(max(I,0))) or an anomalous pair (G: F(+),F(-); K: I(+),I(-);\n"
    "pdbx_F_plus,pdbx_F_minus) by either label, its stem (F for F(+),F(-)) or PLUS,MINUS.\n"
    "The values are expanded by the file's space group to every P1 index: F(-h) = F(h),\n"
    "or with a pair F(+) at h and its equivalents and F(-) at -h and its.  Indices no\n"
    "value reaches take -default_F (0 unless given); -v says how many lie inside the\n"
    "file's resolution.\n"
    "\n"
    "-model FILE computes F from an atomic model (PDB or mmCIF: atoms, B factors,\n"
    "occupancies, its CRYST1 or _cell and space group) with gemmi sfcalc (Debian's\n"
    "package gemmi; $NB_GEMMI names another program), to -dmin (A; default the plan's\n"
    "-dmin, else the resolution of the detector's edge and the nearest index beyond\n"
    "it), then expands them to P1 as a file's.  X-ray form factors of International\n"
    "Tables (1992), an FFT of the model's density; -ksol/-bsol add a flat bulk solvent\n"
    "(gemmi's mask), -fprime the elements' f' at the plan's wavelength.  The plan's\n"
    "cell should be the model's (-cell of nb-geom): F goes by index.",
    &table,
    "  nb-geom -cell 70 80 90 75 85 95 -N 5 -distance 100 | nb-hkl -hkl P1.hkl | nb-sim | ...\n"
    "  nb-hkl -hkl P1.hkl -dump Fdump.bin < plan.nbs > plan+hkl.nbs\n"
    "  nb-hkl -hkl data.mtz -column FP < plan.nbs > plan+hkl.nbs\n"
    "  nb-hkl -model model.pdb -dmin 2 < plan.nbs > plan+hkl.nbs\n",
    NULL,
    NULL, /* no exit status of its own */
};

static int file_exists(const char *path)
{
    struct stat s;
    return stat(path, &s) == 0;
}

/* The values read (from a file or gemmi's calculation) expanded to P1
 * (sf_expand.c), and the log of what was read and what is missing. */
static nb_status expand_sf(const char *path, const char *what, nb_sf_data *d, double default_F, nb_hkl *out)
{
    nb_sf_stats s;
    nb_info("reading %s %s, %s", what, path, d->column);
    nb_status st = nb_sf_expand(d, path, default_F, out, &s);
    if (!st) {
        int anomalous = d->type == 'G' || d->type == 'K';
        nb_info("  %ld values in space group %s (%d operators) to %.3g A%s -> %ld P1 indices, %s", s.read,
                d->spacegroup, d->nops, s.d_min, d->have_cell ? "" : " (no cell)", s.p1,
                anomalous ? "F(+) at h and its equivalents, F(-) at -h and its (anomalous)"
                          : "with Friedel mates F(-h) = F(h)");
        if (d->unread) nb_info("  %ld values missing in the file (not read)", d->unread);
        if (s.centric_minus) nb_info("  %ld F(-) of centric reflections not used (F(+) is both)", s.centric_minus);
        nb_info("  %ld indices inside %s missing from the file (not 0 0 0, not absent by symmetry): F = %g",
                s.missing, d->have_cell ? "its resolution" : "its index box", default_F);
        if (s.conflicts)
            nb_warn("'%s': %ld P1 indices given two different values by symmetry-equivalent reflections; the "
                    "later in the file kept", path, s.conflicts);
    }
    nb_sf_data_free(d);
    return st;
}

/* An MTZ or mmCIF file: the chosen column, expanded to P1. */
static nb_status load_sf_file(const char *path, nb_sf_format fmt, const char *column, double default_F, nb_hkl *out)
{
    nb_sf_data d;
    nb_status st = fmt == NB_SF_MTZ ? nb_mtz_read(path, column, &d) : nb_sf_cif_read(path, column, &d);
    if (st) return st;
    return expand_sf(path, nb_sf_format_name(fmt), &d, default_F, out);
}

/* Whether two cells (a b c alpha beta gamma) differ by more than the MTZ's
 * float32 and a rounded CRYST1 allow */
static int cells_differ(const double x[6], const double y[6])
{
    for (int i = 0; i < 6; i++) {
        double tol = i < 3 ? 1e-4 * fabs(y[i]) + 1e-3 : 1e-3;
        if (fabs(x[i] - y[i]) > tol) return 1;
    }
    return 0;
}

/* An atomic model: F computed by gemmi sfcalc (nb_hkl_model.c), expanded to P1. */
static nb_status load_model(const nb_plan *plan, const hkl_opts *o, double default_F, nb_hkl *out)
{
    nb_model_request rq = {o->model, o->have_dmin ? o->dmin : 0, NB_MODEL_KSOL, NB_MODEL_BSOL,
                           o->have_ksol || o->have_bsol, o->fprime};
    if (o->have_ksol) rq.ksol = o->ksol;
    if (o->have_bsol) rq.bsol = o->bsol;
    nb_model_run run;
    nb_sf_data d;
    nb_status st = nb_model_structure_factors(plan, &rq, &d, &run);
    if (st) return st;
    nb_info("computing F of the model %s with gemmi sfcalc to %.4g A (%s)%s", o->model, run.dmin, run.dmin_from,
            rq.solvent ? "" : ", no bulk solvent");
    if (rq.solvent) nb_info("  bulk solvent: k_sol %g e/A^3, B_sol %g A^2 (gemmi's mask)", rq.ksol, rq.bsol);
    if (run.lambda > 0) nb_info("  f' of every element at %.6g A (no f'': F(-h) = F(h))", run.lambda);
    else nb_info("  no f' or f'' (-fprime adds f' at the plan's wavelength)");
    if (d.have_cell && cells_differ(d.cell, plan->unit_cell))
        nb_warn("the model's cell %g %g %g %g %g %g is not the plan's %g %g %g %g %g %g (nb-geom -cell): its F go "
                "to the plan's lattice by index", d.cell[0], d.cell[1], d.cell[2], d.cell[3], d.cell[4], d.cell[5],
                plan->unit_cell[0], plan->unit_cell[1], plan->unit_cell[2], plan->unit_cell[3], plan->unit_cell[4],
                plan->unit_cell[5]);
    snprintf(d.column, sizeof d.column, "FC (F, computed by gemmi sfcalc)");
    return expand_sf(o->model, "the model", &d, default_F, out);
}

/* -model's companions without it, -model with what it replaces */
static nb_status check_model_flags(const hkl_opts *o)
{
    if (!o->model) {
        const char *lone = o->have_dmin   ? "-dmin"
                           : o->have_ksol ? "-ksol"
                           : o->have_bsol ? "-bsol"
                           : o->fprime    ? "-fprime"
                                          : NULL;
        if (lone) return nb_error_set(NB_ERR_USAGE, "%s is for -model (structure factors computed from a model)", lone);
        return NB_OK;
    }
    if (o->have_hkl)
        return nb_error_set(NB_ERR_USAGE, "-model %s and -hkl %s: give one source of structure factors", o->model, o->hkl);
    if (o->column)
        return nb_error_set(NB_ERR_USAGE, "-column %s: -model %s has no columns to choose from (gemmi computes FC)",
                            o->column, o->model);
    return NB_OK;
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
    if (o->model) {
        if (!o->have_hkl && plan->hkl_file) nb_info("-model %s in place of the plan's -hkl %s", o->model, plan->hkl_file);
        hkl = o->model;
    } else if (o->column && !hkl) {
        return nb_error_set(NB_ERR_USAGE, "-column %s: there is no -hkl file to read it from", o->column);
    }
    if (hkl) {
        nb_sf_format fmt = NB_SF_TEXT;
        if (o->model) {
            if ((st = load_model(plan, o, default_F, out))) return st;
        } else if ((st = nb_sf_detect(hkl, &fmt))) {
            return st;
        } else if (fmt != NB_SF_TEXT) {
            if ((st = load_sf_file(hkl, fmt, o->column, default_F, out))) return st;
        } else {
            if (o->column)
                return nb_error_set(NB_ERR_USAGE, "-column %s: '%s' is an 'h k l F' text list, which has no columns",
                                    o->column, hkl);
            nb_info("counting entries in %s", hkl);
            if ((st = nb_hkl_read_text(hkl, default_F, out))) return st;
        }
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
    nb_exit_on_error(check_model_flags(&o));
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
