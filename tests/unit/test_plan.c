/* test_plan.c - the PLAN record round trip, its checks on corrupted input, and
 * the options registry (lookup, rejection messages, value collection). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_error.h"
#include "nb_geometry.h"
#include "nb_options.h"
#include "nb_physics.h"
#include "nb_plan.h"
#include "nb_spectra.h"
#include "nb_stills.h"
#include "nb_stream.h"
#include "nb_util.h"
#include "nb_vec.h"
#include "tap.h"

static int contains(const char *hay, const char *needle) { return hay && needle && strstr(hay, needle) != NULL; }

/* ---- building a rich plan ------------------------------------------------- */

static nb_status apply_args(nb_request *rq, const char *args)
{
    char *copy = nb_xstrdup(args);
    char *argv[160];
    int argc = 0;
    argv[argc++] = "nb-geom";
    for (char *tok = strtok(copy, " "); tok && argc < 159; tok = strtok(NULL, " ")) argv[argc++] = tok;
    argv[argc] = NULL;
    nb_status st = nb_request_apply_args(rq, argc - 1, argv + 1, NULL);
    free(copy);
    return st;
}

#define FP 24
#define SP 16

/* A plan with a mask, several sources and mosaic domains, a random misset
 * (a used shuffle table), phi steps, layers, an ROI and some requests. */
static nb_status make_plan(nb_plan *p)
{
    nb_request rq;
    nb_strbuf log;
    nb_request_defaults(&rq);
    nb_strbuf_init(&log);
    nb_status st = apply_args(
        &rq, "-cell 70 80 90 75 85 95 -misset random -misset_seed 42 -N 5 -lambda 1.2 "
             "-distance 100 -detpixels_f 24 -detpixels_s 16 -pixel 0.25 -mosaic 0.5 "
             "-mosaic_dom 6 -divergence 0.2 -divsteps 3 -dispersion 0.5 -dispsteps 2 "
             "-hkl P1.hkl -default_F 3.5 -floatfile out.bin -seed 7 -phi 10 -osc 2 "
             "-phisteps 4 -detector_thick 100 -detector_material GaAs -thicksteps 2 -roi 1 20 2 14 -polar 0.9 "
             "-round_xtal -fudge 1.25 -oversample 2 -oversample_polar -water 3 "
             "-detector_rotx 1 -twotheta 3 -printout_pixel 3 4 -noprogress");
    if (!st) {
        rq.mask = calloc(FP * SP, 1);
        rq.mask_w = FP;
        rq.mask_h = SP;
        for (int i = 0; i < FP * SP; i++) rq.mask[i] = (unsigned char)((i * 7) % 5 != 0);
        rq.maskfile = nb_xstrdup("mask.img");
        rq.command_line = nb_xstrdup("nb-geom -cell 70 80 90 75 85 95 'odd \"quoted\" arg' \\ back");
        st = nb_resolve(&rq, p, &log);
    } else {
        nb_plan_init(p);
    }
    nb_strbuf_free(&log);
    nb_request_free(&rq);
    return st;
}

/* ---- comparing plans ------------------------------------------------------- */

static int mismatches;

static void cmp_bits(const void *a, const void *b, size_t n, const char *what)
{
    if (memcmp(a, b, n) != 0) {
        printf("#   field %s differs\n", what);
        mismatches++;
    }
}

static void cmp_str(const char *a, const char *b, const char *what)
{
    if ((a == NULL) != (b == NULL) || (a && strcmp(a, b) != 0)) {
        printf("#   string %s differs: '%s' vs '%s'\n", what, a ? a : "(null)", b ? b : "(null)");
        mismatches++;
    }
}

#define F(m) cmp_bits(&a->m, &b->m, sizeof a->m, #m)
#define S(m) cmp_str(a->m, b->m, #m)

static int compare_plans(const nb_plan *a, const nb_plan *b)
{
    mismatches = 0;
    S(command_line);
    F(detsize_f), F(detsize_s), F(distance), F(close_distance);
    F(beam), F(polar_vector), F(spindle), F(twotheta_axis);
    F(Xbeam), F(Ybeam), F(Fbeam), F(Sbeam), F(Xclose), F(Yclose), F(Fclose), F(Sclose), F(ORGX), F(ORGY);
    F(dials_origin);
    cmp_str(a->convention, b->convention, "convention");
    cmp_str(a->pivot, b->pivot, "pivot");
    F(rotx), F(roty), F(rotz), F(twotheta), F(curved_detector), F(point_pixel), F(detector_material);
    F(oversample), F(oversample_thick), F(oversample_polar), F(oversample_omega);
    F(npanels);
    for (int i = 0; i < a->npanels && i < b->npanels; i++) {
        const nb_panel *pa = &a->panels[i], *pb = &b->panels[i];
        /* every field of the panel table */
#define PANEL_FIELD_SAME(key, kind, m, follow, what) cmp_bits(&pa->m, &pb->m, sizeof pa->m, #m);
        NB_PANEL_FIELDS(PANEL_FIELD_SAME)
        if ((pa->mask == NULL) != (pb->mask == NULL) ||
            (pa->mask && memcmp(pa->mask, pb->mask, (size_t)pa->fpixels * (size_t)pa->spixels) != 0)) {
            printf("#   panel %d's mask differs\n", i);
            mismatches++;
        }
    }
    F(lambda0), F(dispersion), F(dispstep), F(dispsteps);
    F(hdivrange), F(hdivstep), F(vdivrange), F(vdivstep), F(hdivsteps), F(vdivsteps), F(divsteps), F(round_div);
    F(kahn_factor), F(nopolar), F(fluence), F(flux), F(exposure), F(beamsize);
    F(nsources);
    if (a->nsources == b->nsources && a->nsources > 0) {
        for (int i = 0; i < a->nsources; i++) {
            cmp_bits(a->sources[i].dir, b->sources[i].dir, sizeof a->sources[i].dir, "sources.dir");
            cmp_bits(&a->sources[i].weight, &b->sources[i].weight, sizeof(double), "sources.weight");
            cmp_bits(&a->sources[i].lambda, &b->sources[i].lambda, sizeof(double), "sources.lambda");
        }
    }
    F(cell_a), F(cell_b), F(cell_c), F(recip_a), F(recip_b), F(recip_c);
    /* UNIT_CELL is written with %.10g (for headers): close, not exact */
    for (int i = 0; i < 6; i++)
        if (fabs(a->unit_cell[i] - b->unit_cell[i]) > 1e-8 * fabs(a->unit_cell[i])) {
            printf("#   unit_cell[%d] differs: %.17g vs %.17g\n", i, a->unit_cell[i], b->unit_cell[i]);
            mismatches++;
        }
    F(misset), F(Na), F(Nb), F(Nc), F(shape), F(fudge), F(mosaic_spread), F(mosaic_domains);
    if (a->mosaic_domains == b->mosaic_domains && a->mosaic_domains > 0)
        cmp_bits(a->mosaic_umats, b->mosaic_umats, 9 * sizeof(double) * (size_t)a->mosaic_domains, "mosaic_umats");
    F(phi0), F(phistep), F(osc), F(phisteps), F(water_size), F(dmin), F(interpolate);
    F(seed), F(mosaic_seed), F(misset_seed);
    F(rng.iy), F(rng.iv);
    S(hkl_file), S(dump_file);
    F(dump_implicit), F(default_F);
    S(floatfile), S(intfile), S(noisefile), S(pgmfile);
    F(intfile_scale), F(pgm_scale), F(adc), F(calculate_noise), F(write_pgm);
    F(precision_double), F(printout), F(printout_fpixel), F(printout_spixel), F(progress);
    return mismatches;
}

/* plan -> record -> bytes -> reader -> record -> plan */
static nb_status round_trip(const nb_plan *in, nb_plan *out, nb_record *rec_out)
{
    nb_record rec, got;
    unsigned char *buf;
    size_t len;
    nb_reader *r;
    int eof;
    nb_status st = nb_plan_to_record(in, &rec);
    if (st) return st;
    st = nb_record_serialize(&rec, &buf, &len);
    nb_record_free(&rec);
    if (st) return st;
    memset(&got, 0, sizeof got);
    nb_reader_open_mem(&r, buf, len, "plan");
    st = nb_reader_next(r, &got, &eof);
    nb_reader_close(r);
    free(buf);
    if (st) return st;
    st = nb_plan_from_record(&got, out);
    if (rec_out) *rec_out = got;
    else nb_record_free(&got);
    return st;
}

static void test_round_trip(void)
{
    nb_plan p, q;
    nb_set_verbosity(-1);
    nb_status st = make_plan(&p);
    ok(st == NB_OK, "a rich plan resolves: %s", st ? nb_error_message() : "ok");
    if (st) return;
    ok(p.panels[0].mask != NULL && p.nsources > 1 && p.mosaic_domains == 6 && p.phisteps == 4 &&
           p.panels[0].thicksteps == 2,
       "the plan has a mask, %d sources, %d domains, %d phi steps, %d layers", p.nsources, p.mosaic_domains, p.phisteps,
       p.panels[0].thicksteps);
    ok(p.detector_material == NB_MATERIAL_GAAS, "the sensor is GaAs (-detector_material)");
    ok(p.rng.iy != 0, "the shared ran1 table was used (iy = %lld)", (long long)p.rng.iy);
    ok(p.hkl_file && !p.dump_file && !p.intfile && !p.noisefile && !p.pgmfile && p.floatfile,
       "some output requests set, others NULL");

    nb_record rec;
    st = round_trip(&p, &q, &rec);
    ok(st == NB_OK, "plan -> record -> bytes -> record -> plan: %s", st ? nb_error_message() : "ok");
    if (!st) {
        ok(compare_plans(&p, &q) == 0, "every field survives (doubles bit for bit, arrays, strings, rng state)");
        ok(q.dump_file == NULL && q.intfile == NULL && q.noisefile == NULL && q.pgmfile == NULL,
           "NULL strings stay NULL");
        ok(!strcmp(q.command_line, p.command_line), "the command line with quotes and backslashes survives");
        ok(q.rng.iy == p.rng.iy && !memcmp(q.rng.iv, p.rng.iv, sizeof q.rng.iv),
           "the ran1 shuffle table survives");
        /* a second trip through the record gives the identical record bytes */
        nb_record r2;
        unsigned char *b1, *b2;
        size_t l1, l2;
        nb_plan_to_record(&p, &r2);
        nb_record_serialize(&r2, &b1, &l1);
        nb_record_free(&r2);
        nb_plan_to_record(&q, &r2);
        nb_record_serialize(&r2, &b2, &l2);
        nb_record_free(&r2);
        ok(l1 == l2 && memcmp(b1, b2, l1) == 0, "re-writing the read plan gives the same bytes");
        free(b1);
        free(b2);
    }
    nb_plan_free(&q);

    /* corner values: -0, tiny, huge, a NaN-free but odd plan */
    {
        nb_plan odd;
        st = make_plan(&odd);
        odd.rotx = -0.0;
        odd.fudge = 5e-324;
        odd.fluence = 1.7976931348623157e308;
        odd.default_F = 1.0 / 3.0;
        odd.seed = -2147483647;
        odd.misset_seed = 9007199254740993LL;
        free(odd.command_line);
        odd.command_line = nb_xstrdup("");
        nb_plan back;
        st = round_trip(&odd, &back, NULL);
        ok(st == NB_OK && compare_plans(&odd, &back) == 0 && signbit(back.rotx),
           "odd values (-0, denormal, DBL_MAX, 1/3, a 2^53+1 seed, an empty command line) round-trip");
        nb_plan_free(&back);
        nb_plan_free(&odd);
    }

    /* a plan without a mask reads back without one */
    {
        nb_plan nomask;
        st = make_plan(&nomask);
        free(nomask.panels[0].mask);
        nomask.panels[0].mask = NULL;
        nb_plan back;
        st = round_trip(&nomask, &back, NULL);
        ok(st == NB_OK && back.panels[0].mask == NULL && compare_plans(&nomask, &back) == 0, "a plan without a mask");
        nb_plan_free(&back);
        nb_plan_free(&nomask);
    }

    /* a newline in a string cannot be written into a header */
    {
        nb_plan nl;
        make_plan(&nl);
        free(nl.hkl_file);
        nl.hkl_file = nb_xstrdup("two\nlines.hkl");
        nb_record r;
        st = nb_plan_to_record(&nl, &r);
        ok(st == NB_ERR_DATA && contains(nb_error_message(), "HKL_FILE"), "a newline in a file name is refused: %s",
           nb_error_message());
        nb_record_free(&r);
        nb_plan_free(&nl);
    }

    nb_record_free(&rec);
    nb_plan_free(&p);
}

/* ---- corrupted plans -------------------------------------------------------- */

/* Remove the line "KEY=..." from a record's header. */
static void drop_key(nb_record *rec, const char *key)
{
    size_t klen = strlen(key);
    char *h = rec->header, *line = h;
    while (line && *line) {
        char *next = strchr(line, '\n');
        next = next ? next + 1 : line + strlen(line);
        if (strncmp(line, key, klen) == 0 && line[klen] == '=') {
            memmove(line, next, strlen(next) + 1);
            rec->header_len = strlen(h);
            return;
        }
        line = next;
    }
}

static void copy_record(const nb_record *src, nb_record *dst)
{
    nb_record_init(dst, src->type);
    free(dst->header);
    dst->header = nb_xstrdup(src->header);
    dst->header_len = src->header_len;
    if (src->payload_len) {
        dst->payload = malloc((size_t)src->payload_len);
        memcpy(dst->payload, src->payload, (size_t)src->payload_len);
        dst->payload_len = src->payload_len;
        dst->payload_cap = (size_t)src->payload_len;
    }
}

static int is_optional_key(const char *key)
{
    static const char *optional[] = {"COMMAND", "HKL_FILE",  "DUMP_FILE", "FLOATFILE", "INTFILE",
                                     "NOISEFILE", "PGMFILE", "ARRAY.mask", "DETECTOR_MATERIAL", NULL};
    for (int i = 0; optional[i]; i++)
        if (!strcmp(key, optional[i])) return 1;
    return 0;
}

static int is_text_key(const char *key)
{
    /* values that are free text (CONVENTION and PIVOT are labels for headers
     * and logs; no later stage interprets them) */
    static const char *text[] = {"COMMAND", "HKL_FILE", "DUMP_FILE", "FLOATFILE", "INTFILE",
                                 "NOISEFILE", "PGMFILE", "CONVENTION", "PIVOT", NULL};
    for (int i = 0; text[i]; i++)
        if (!strcmp(key, text[i])) return 1;
    return 0;
}

static void test_corrupted(void)
{
    nb_plan p, q;
    nb_record good;
    if (make_plan(&p) != NB_OK || nb_plan_to_record(&p, &good) != NB_OK) {
        ok(0, "cannot build the plan for the corruption tests: %s", nb_error_message());
        return;
    }
    ok(nb_plan_from_record(&good, &q) == NB_OK, "the unmodified record reads");
    nb_plan_free(&q);

    /* every key, removed in turn */
    char keys[256][64];
    int nkeys = 0;
    /* the header starts with a newline, so that every key begins a line */
    for (const char *line = good.header + (good.header[0] == '\n'); *line && nkeys < 256;) {
        const char *eq = strchr(line, '=');
        const char *nl = strchr(line, '\n');
        if (!eq || !nl) break;
        snprintf(keys[nkeys], sizeof keys[0], "%.*s", (int)(eq - line), line);
        nkeys++;
        line = nl + 1;
    }
    ok(nkeys > 90, "the PLAN header has %d keys", nkeys);
    int missing_ok = 0, missing_named = 0, missing_total = 0, missing_optional = 0;
    for (int k = 0; k < nkeys; k++) {
        nb_record r;
        copy_record(&good, &r);
        drop_key(&r, keys[k]);
        nb_status st = nb_plan_from_record(&r, &q);
        const char *name = strncmp(keys[k], "ARRAY.", 6) == 0 ? keys[k] + 6 : keys[k];
        if (is_optional_key(keys[k])) {
            missing_optional++;
            if (st != NB_OK) printf("#   optional key %s: %s\n", keys[k], nb_error_message());
            else missing_ok++;
        } else {
            missing_total++;
            if (st == NB_ERR_DATA && contains(nb_error_message(), name)) missing_named++;
            else printf("#   without %s: status %d, '%s'\n", keys[k], st, st ? nb_error_message() : "accepted");
        }
        nb_plan_free(&q);
        nb_record_free(&r);
    }
    ok(missing_named == missing_total, "each of the %d required keys, when missing, gives NB_ERR_DATA naming it (%d)",
       missing_total, missing_named);
    ok(missing_optional >= 4 && missing_ok == missing_optional,
       "the %d optional keys present (file names, command, mask) may be missing (%d)", missing_optional, missing_ok);

    /* every key given a malformed value */
    int bad_named = 0, bad_total = 0;
    for (int k = 0; k < nkeys; k++) {
        if (is_text_key(keys[k])) continue;
        nb_record r;
        copy_record(&good, &r);
        nb_hdr_set(&r, keys[k], "bogus");
        nb_status st = nb_plan_from_record(&r, &q);
        const char *name = strncmp(keys[k], "ARRAY.", 6) == 0 ? keys[k] + 6 : keys[k];
        bad_total++;
        if ((st == NB_ERR_DATA || st == NB_ERR_USAGE) && contains(nb_error_message(), name)) bad_named++;
        else printf("#   %s=bogus: status %d, '%s'\n", keys[k], st, st ? nb_error_message() : "accepted");
        nb_plan_free(&q);
        nb_record_free(&r);
    }
    ok(bad_named == bad_total, "each of the %d non-text keys set to 'bogus' is refused naming the key (%d)", bad_total,
       bad_named);

    /* non-finite numbers: a resolved plan never holds one (the command-line
     * parser refuses them), and the kernel would turn one into a silently
     * wrong image */
    {
        int refused = 0, total = 0;
        char accepted[2048] = "";
        for (int k = 0; k < nkeys; k++) {
            if (is_text_key(keys[k]) || !strncmp(keys[k], "ARRAY.", 6) || !strcmp(keys[k], "SHAPE") ||
                !strcmp(keys[k], "RAN1_STATE"))
                continue;
            for (int v = 0; v < 2; v++) {
                nb_record r;
                copy_record(&good, &r);
                size_t len;
                const char *val = nb_hdr_find(&r, keys[k], &len);
                char buf[600];
                /* replace the first number of the value */
                const char *sp = memchr(val, ' ', len);
                snprintf(buf, sizeof buf, "%s%.*s", v ? "-inf" : "nan", sp ? (int)(len - (size_t)(sp - val)) : 0,
                         sp ? sp : "");
                nb_hdr_set(&r, keys[k], buf);
                nb_status st = nb_plan_from_record(&r, &q);
                total++;
                if (st != NB_OK && contains(nb_error_message(), keys[k])) refused++;
                else if (strlen(accepted) + strlen(keys[k]) + 8 < sizeof accepted) {
                    strcat(accepted, " ");
                    strcat(accepted, keys[k]);
                    strcat(accepted, v ? "=-inf" : "=nan");
                }
                nb_plan_free(&q);
                nb_record_free(&r);
            }
        }
        if (accepted[0]) printf("#   accepted:%s\n", accepted);
        ok(refused == total,
           "non-finite values (nan, -inf) in the %d numeric keys are refused naming the key (%d of %d)", total / 2,
           refused, total);
    }

    /* specific corruptions */
    struct {
        const char *key, *value, *named;
        nb_status want;
        const char *what;
    } cases[] = {
        {"SOURCES", NULL, "SOURCES", NB_ERR_DATA, "SOURCES one more than the sources array"},
        {"SOURCES", "0", "SOURCES", NB_ERR_DATA, "SOURCES=0"},
        {"SOURCES", "-3", "SOURCES", NB_ERR_DATA, "SOURCES=-3"},
        {"MOSAIC_DOMAINS", "7", "MOSAIC_DOMAINS", NB_ERR_DATA, "MOSAIC_DOMAINS disagrees with the matrices"},
        {"FPIXELS", "0", "FPIXELS", NB_ERR_DATA, "FPIXELS=0"},
        {"SPIXELS", "-16", "SPIXELS", NB_ERR_DATA, "SPIXELS negative"},
        {"FPIXELS", "25", "mask", NB_ERR_DATA, "FPIXELS that disagrees with the mask"},
        {"FPIXELS", "2000000000", "too large", NB_ERR_DATA, "a huge FPIXELS"},
        {"FPIXELS", "99999999999", "FPIXELS", NB_ERR_DATA, "FPIXELS beyond an int"},
        {"FPIXELS", "1.5", "FPIXELS", NB_ERR_DATA, "a fractional FPIXELS"},
        {"PIXEL_SIZE", "0", "PIXEL_SIZE", NB_ERR_DATA, "PIXEL_SIZE=0"},
        {"PIXEL_SIZE", "nan", "PIXEL_SIZE", NB_ERR_DATA, "PIXEL_SIZE=nan"},
        {"PIXEL_SIZE", "inf", "PIXEL_SIZE", NB_ERR_DATA, "PIXEL_SIZE=inf"},
        {"OVERSAMPLE", "0", "OVERSAMPLE", NB_ERR_DATA, "OVERSAMPLE=0"},
        {"OVERSAMPLE", "100000", "OVERSAMPLE", NB_ERR_DATA, "OVERSAMPLE=100000"},
        {"PHISTEPS", "0", "PHISTEPS", NB_ERR_DATA, "PHISTEPS=0"},
        {"DETECTOR_THICKSTEPS", "0", "DETECTOR_THICKSTEPS", NB_ERR_DATA, "DETECTOR_THICKSTEPS=0"},
        {"SHAPE", "cube", "SHAPE", NB_ERR_DATA, "an unknown SHAPE"},
        {"DETECTOR_MATERIAL", "Ge", "DETECTOR_MATERIAL", NB_ERR_DATA, "a DETECTOR_MATERIAL dxtbx does not know"},
        {"UNIT_CELL", "1 2 3", "UNIT_CELL", NB_ERR_DATA, "a short UNIT_CELL"},
        {"RAN1_STATE", "1 2 3", "RAN1_STATE", NB_ERR_DATA, "a short RAN1_STATE"},
        {"CONVENTION", "a-very-long-convention-name", "CONVENTION", NB_ERR_DATA, "a CONVENTION too long"},
        {"FDET", "0 0", "FDET", NB_ERR_DATA, "a vector with two components"},
        {"SEED", "12x", "SEED", NB_ERR_DATA, "a malformed SEED"},
        {"ARRAY.sources", "f32 10 0", "sources", NB_ERR_DATA, "sources of the wrong dtype"},
        {"ARRAY.mosaic_umats", "f64 54 999999", "mosaic_umats", NB_ERR_DATA, "matrices outside the payload"},
        {"ARRAY.mask", "u8 3 0", "mask", NB_ERR_DATA, "a mask of the wrong size"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        nb_record r;
        copy_record(&good, &r);
        if (cases[i].value) {
            nb_hdr_set(&r, cases[i].key, cases[i].value);
        } else {
            char v[32];
            snprintf(v, sizeof v, "%d", p.nsources + 1);
            nb_hdr_set(&r, cases[i].key, v);
        }
        nb_status st = nb_plan_from_record(&r, &q);
        ok(st == cases[i].want && contains(nb_error_message(), cases[i].named), "%s refused (%d): %s", cases[i].what,
           st, st ? nb_error_message() : "accepted");
        ok(q.sources == NULL && q.mosaic_umats == NULL && q.panels == NULL && q.command_line == NULL,
           "... and the half-read plan was freed");
        nb_plan_free(&q);
        nb_record_free(&r);
    }

    /* a huge detector with a matching (absent) mask is refused before any
     * allocation: the message says what it would need */
    {
        nb_record r;
        copy_record(&good, &r);
        drop_key(&r, "ARRAY.mask");
        nb_hdr_set(&r, "FPIXELS", "1000000");
        nb_hdr_set(&r, "SPIXELS", "1000000");
        nb_status st = nb_plan_from_record(&r, &q);
        ok(st == NB_ERR_DATA && contains(nb_error_message(), "too large") && contains(nb_error_message(), "iB"),
           "a 1e6 x 1e6 detector is refused with its memory need: %s", nb_error_message());
        nb_plan_free(&q);
        nb_record_free(&r);
    }

    /* not a PLAN record at all */
    {
        nb_record r;
        copy_record(&good, &r);
        snprintf(r.type, sizeof r.type, "HKL");
        nb_status st = nb_plan_from_record(&r, &q);
        ok(st == NB_ERR_DATA && contains(nb_error_message(), "PLAN"), "an HKL record is not a plan: %s",
           nb_error_message());
        nb_plan_free(&q);
        nb_record_free(&r);
    }
    nb_record_free(&good);
    nb_plan_free(&p);

    /* nb_panel_check_size on its own */
    nb_panel s = {0};
    s.fpixels = 1024, s.spixels = 1024;
    ok(nb_panel_check_size(&s) == NB_OK, "1024 x 1024 is fine");
    s.fpixels = 0;
    ok(nb_panel_check_size(&s) == NB_ERR_USAGE, "0 x 1024 is refused");
    s.fpixels = 50000, s.spixels = 50000;
    ok(nb_panel_check_size(&s) == NB_ERR_USAGE && contains(nb_error_message(), "GiB"),
       "50000 x 50000 is refused: %s", nb_error_message());
    ok(nb_shape_from_name("gauss") == NB_SHAPE_GAUSS && nb_shape_from_name("tophat") == NB_SHAPE_TOPHAT &&
           nb_shape_from_name("square") == NB_SHAPE_SQUARE && nb_shape_from_name("round") == NB_SHAPE_ROUND &&
           nb_shape_from_name("Gauss") == -1,
       "shape names");
    ok(!strcmp(nb_shape_name(NB_SHAPE_ROUND), "round") && !strcmp(nb_shape_name(7), "?"), "shape name lookup");
}

/* ---- options registry ------------------------------------------------------- */

static nb_status collect(const char *line, int *nargs)
{
    char *copy = nb_xstrdup(line);
    char *argv[32];
    int argc = 0;
    for (char *tok = strtok(copy, " "); tok && argc < 31; tok = strtok(NULL, " ")) argv[argc++] = tok;
    argv[argc] = NULL;
    const nb_flag *f = nb_flag_lookup(argv[0]);
    nb_status st = f ? nb_flag_collect(f, argc, argv, 0, nargs) : NB_ERR_USAGE;
    free(copy);
    return st;
}

static void test_options(void)
{
    const nb_flag *f = nb_flag_lookup("-distance");
    ok(f && f->id == FL_DISTANCE && f->min_args == 1 && (f->owners & NB_GEOM), "-distance is found");
    ok(nb_flag_lookup("-distanc") == NULL, "-distanc (a prefix) is not found");
    ok(nb_flag_lookup("-distances") == NULL, "-distances (an extension) is not found");
    ok(nb_flag_lookup("distance") == NULL && nb_flag_lookup("--distance") == NULL &&
           nb_flag_lookup("-Distance") == NULL && nb_flag_lookup("") == NULL,
       "no dashless, double-dash, case-folded or empty matches");
    ok(nb_flag_lookup("-close_distance") && nb_flag_lookup("-close_distance")->id == FL_CLOSE_DISTANCE,
       "-close_distance is its own flag, not -distance");
    const nb_flag *m = nb_flag_lookup("-matrix"), *mat = nb_flag_lookup("-mat");
    ok(m && mat && m->id == FL_MAT && mat->id == FL_MAT, "-matrix is an alias of -mat");
    ok(m && m->help == NULL && mat && mat->help != NULL, "the alias has no help line of its own");
    ok(!strcmp(nb_flag_canonical(FL_MAT), "-mat"), "canonical spelling of FL_MAT is -mat");
    ok(!strcmp(nb_flag_canonical(FL_SAMPLE_SIZE), "-xtalsize"), "canonical spelling of FL_SAMPLE_SIZE");
    ok(nb_flag_lookup("-N") && nb_flag_lookup("-N")->id == FL_N && nb_flag_lookup("-Na")->id == FL_NA,
       "-N and -Na are distinct");
    ok(nb_flag_lookup("-mosaic_dom") && nb_flag_lookup("-mosaic_dom")->id == FL_MOSAIC_DOMAINS,
       "-mosaic_dom is an alias of -mosaic_domains");

    int n = 0;
    const nb_flag *table = nb_flag_table(&n);
    int good = n > 100, canon_help = 1;
    for (int i = 0; i < n; i++) {
        if (table[i].name[0] != '-' || table[i].min_args > table[i].max_args || !table[i].owners) good = 0;
        if (!strcmp(nb_flag_canonical(table[i].id), table[i].name) && table[i].help == NULL) {
            printf("#   %s has no help\n", table[i].name);
            canon_help = 0;
        }
    }
    ok(good, "the table of %d flags is well formed", n);
    ok(canon_help, "every canonical spelling has a help line");
    ok(!strcmp(nb_owner_tool(NB_HKL), "nb-hkl") && !strcmp(nb_owner_tool(NB_NOISE), "nb-noise") &&
           !strcmp(nb_owner_tool(NB_GEOM), "nb-geom"),
       "owner names");

    /* rejection messages name the owner */
    nb_set_tool_name("nb-sim");
    nb_status st = nb_flag_reject("-seed", NB_SIM);
    ok(st == NB_ERR_USAGE && contains(nb_error_message(), "nb-noise") && contains(nb_error_message(), "-seed"),
       "-seed rejected by nb-sim: %s", nb_error_message());
    st = nb_flag_reject("-hkl", NB_SIM);
    ok(st == NB_ERR_USAGE && contains(nb_error_message(), "nb-hkl"), "-hkl rejected by nb-sim: %s",
       nb_error_message());
    st = nb_flag_reject("-floatfile", NB_SIM);
    ok(st == NB_ERR_USAGE && contains(nb_error_message(), "nb-convert"), "-floatfile rejected by nb-sim: %s",
       nb_error_message());
    st = nb_flag_reject("-distance", NB_SIM);
    ok(st == NB_ERR_USAGE && contains(nb_error_message(), "nb-geom"), "-distance rejected by nb-sim: %s",
       nb_error_message());
    ok(contains(nb_error_message(), "nb-sim"), "... and says which tool refused it");
    nb_set_tool_name("nb-hkl");
    st = nb_flag_reject("-printout", NB_HKL);
    ok(st == NB_ERR_USAGE && contains(nb_error_message(), "nb-sim"), "-printout rejected by nb-hkl: %s",
       nb_error_message());
    /* typos: a close spelling this tool accepts */
    nb_set_tool_name("nb-geom");
    st = nb_flag_reject("-distanse", NB_GEOM);
    ok(st == NB_ERR_USAGE && contains(nb_error_message(), "-distance"), "typo -distanse: %s", nb_error_message());
    st = nb_flag_reject("-detpixel", NB_GEOM);
    ok(st == NB_ERR_USAGE && contains(nb_error_message(), "did you mean -detpixels"), "typo -detpixel: %s",
       nb_error_message());
    st = nb_flag_reject("-lamda", NB_GEOM);
    ok(st == NB_ERR_USAGE && contains(nb_error_message(), "-lambda"), "typo -lamda: %s", nb_error_message());
    st = nb_flag_reject("-qwertyuiop", NB_GEOM);
    ok(st == NB_ERR_USAGE && contains(nb_error_message(), "-qwertyuiop") && !contains(nb_error_message(), "mean"),
       "no suggestion for a far-off word: %s", nb_error_message());
    nb_set_tool_name("nb-sim");
    st = nb_flag_reject("-printot", NB_SIM);
    ok(st == NB_ERR_USAGE && contains(nb_error_message(), "-printout"), "typo -printot for nb-sim: %s",
       nb_error_message());
    st = nb_flag_reject("-distanse", NB_SIM);
    ok(st == NB_ERR_USAGE && !contains(nb_error_message(), "-distance"),
       "nb-sim does not suggest a flag it does not accept: %s", nb_error_message());
    st = nb_flag_reject("stray", NB_SIM);
    ok(st == NB_ERR_USAGE && contains(nb_error_message(), "stray"), "a stray word: %s", nb_error_message());
    nb_set_tool_name("test_plan");

    /* value collection */
    int k = -1;
    ok(collect("-cell 100", &k) == NB_OK && k == 1, "-cell 100: 1 value");
    ok(collect("-cell 100 100 100 90 90 90", &k) == NB_OK && k == 6, "-cell with 6 values");
    ok(collect("-cell 100 100 100 90 90 90 77", &k) == NB_OK && k == 6, "-cell takes at most 6 values");
    ok(collect("-cell 70 80 -N 5", &k) == NB_OK && k == 2, "-cell 70 80 -N 5: stops at the '-' argument");
    ok(collect("-cell -N 5", &k) == NB_ERR_USAGE && contains(nb_error_message(), "-cell"), "-cell -N: %s",
       nb_error_message());
    ok(collect("-cell", &k) == NB_ERR_USAGE, "-cell at the end: %s", nb_error_message());
    ok(collect("-misset random", &k) == NB_OK && k == 1, "-misset random: 1 value");
    ok(collect("-misset random 1 2", &k) == NB_OK && k == 1, "-misset random does not eat what follows");
    ok(collect("-misset 10 20 30", &k) == NB_OK && k == 3, "-misset with 3 angles");
    ok(collect("-misset 10 20 30 40", &k) == NB_OK && k == 3, "-misset takes 3 angles only");
    ok(collect("-misset 10 20", &k) == NB_ERR_USAGE && contains(nb_error_message(), "-misset"), "-misset 10 20: %s",
       nb_error_message());
    ok(collect("-misset", &k) == NB_ERR_USAGE, "-misset alone: %s", nb_error_message());
    ok(collect("-curved_det 1", &k) == NB_OK && k == 1, "-curved_det takes an optional value");
    ok(collect("-curved_det -N 5", &k) == NB_OK && k == 0, "-curved_det before a flag takes none");
    ok(collect("-curved_det", &k) == NB_OK && k == 0, "-curved_det at the end takes none");
    ok(collect("-curved_det -1", &k) == NB_OK && k == 1, "-curved_det -1: a negative number is a value");
    ok(collect("-distance", &k) == NB_ERR_USAGE && contains(nb_error_message(), "-distance"),
       "-distance without its value: %s", nb_error_message());
    ok(collect("-distance -100", &k) == NB_OK && k == 1, "-distance -100: a negative value is taken");
    ok(collect("-roi 1 2 3", &k) == NB_ERR_USAGE && contains(nb_error_message(), "4"), "-roi with 3 values: %s",
       nb_error_message());
    ok(collect("-roi 1 2 3 4 5", &k) == NB_OK && k == 4, "-roi takes 4 values");
    ok(collect("-fdet_vector 0 0", &k) == NB_ERR_USAGE, "-fdet_vector with 2 values: %s", nb_error_message());
    ok(collect("-nonoise 5", &k) == NB_OK && k == 0, "-nonoise takes no value");
    ok(collect("-printout_pixel 3 4", &k) == NB_OK && k == 2, "-printout_pixel takes 2 values");

    /* values applied to a request: -misset with a word other than random */
    nb_request rq;
    nb_request_defaults(&rq);
    char *vals[3] = {"randomly", NULL, NULL};
    ok(nb_request_apply(&rq, FL_MISSET, "-misset", vals, 1) == NB_ERR_USAGE, "-misset randomly is refused: %s",
       nb_error_message());
    char *cell[2] = {"70", "80"};
    ok(nb_request_apply(&rq, FL_CELL, "-cell", cell, 2) == NB_OK && rq.cell[0] == 70 && rq.cell[1] == 80 &&
           rq.cell[2] == 0,
       "-cell 70 80 sets a and b only");
    nb_request_free(&rq);
}

/* A plan of three panels (one with a mask) through the record and back:
 * every panel's keys and mask as written, the views' derived values, the
 * IMAGE layout; PANELS out of range is refused. */
static void test_panels(void)
{
    nb_plan p, q;
    nb_record rec;
    if (make_plan(&p) != NB_OK) {
        ok(0, "panels: the base plan builds");
        return;
    }
    /* the base plan's panel, then two more */
    nb_panel first = p.panels[0];
    p.panels[0].mask = NULL;
    if (nb_plan_set_panels(&p, 3) != NB_OK) {
        ok(0, "panels: a list of 3 panels");
        return;
    }
    p.panels[0] = first;
    for (int i = 1; i < 3; i++) {
        nb_panel *e = &p.panels[i];
        e->fpixels = 9 + i, e->spixels = 7, e->pixel_size = 2e-4;
        e->fdet[1] = 1, e->sdet[2] = -1, e->odet[0] = 1;
        e->pix0[0] = 0.09 + 0.01 * i, e->pix0[1] = -0.001, e->pix0[2] = 0.002;
        e->thicksteps = 1;
        e->roi_xmax = e->fpixels, e->roi_ymax = e->spixels;
    }
    p.panels[2].mask = calloc(11 * 7, 1);
    p.panels[2].mask[5] = 1;
    nb_status st = round_trip(&p, &q, &rec);
    ok(st == NB_OK, "panels: a plan of 3 panels reads back (%s)", st ? nb_error_message() : "ok");
    if (!st) {
        ok(nb_plan_npanels(&q) == 3, "panels: 3 panels read");
        ok(q.panels[2].fpixels == 11 && q.panels[2].mask && q.panels[2].mask[5] == 1 && q.panels[2].mask[4] == 0,
           "panels: panel 2's size and mask come back");
        ok(!memcmp(q.panels[1].pix0, p.panels[1].pix0, sizeof p.panels[1].pix0),
           "panels: panel 1's PIX0 comes back bit for bit");
        ok(nb_plan_total_pixels(&q) == (size_t)FP * SP + 70 + 77, "panels: the pixels of all panels");
        size_t off;
        nb_plan_panel_dims(&q, 2, NULL, NULL, &off);
        ok(off == (size_t)FP * SP + 70, "panels: panel 2 starts after panels 0 and 1");
        nb_plan v;
        nb_plan_panel_view(&q, 1, &v);
        near(v.close_distance, 0.1, 1e-15, "panels: panel 1's close distance is PIX0 . ODET");
        near(v.ORGX, 0.001 / 2e-4 + 0.5, 1e-12, "panels: panel 1's ORGX from its near point");
        /* two panels compared by the panel table */
        nb_panel_difference d;
        nb_panel moved = q.panels[1];
        ok(!nb_panel_differs(&q.panels[1], &moved, 1, NB_PANEL_EVERY_FIELD, 0.0, &d), "panels: a panel is its copy");
        moved.pix0[1] += 1e-12;
        ok(!nb_panel_differs(&q.panels[1], &moved, 1, NB_PANEL_EVERY_FIELD, 1e-9, &d),
           "panels: within 1e-9 of the field's size is the same");
        moved.pix0[1] += 1e-6;
        ok(nb_panel_differs(&q.panels[1], &moved, 1, NB_PANEL_EVERY_FIELD, 1e-9, &d) && !strcmp(d.key, "PANEL1.PIX0"),
           "panels: a moved panel differs in PANEL1.PIX0 (%s vs %s)", d.a, d.b);
        moved = q.panels[0];
        moved.roi_xmax--;
        ok(nb_panel_differs(&q.panels[0], &moved, 0, NB_PANEL_EVERY_FIELD, 0.0, &d) && !strcmp(d.key, "ROI_XMAX"),
           "panels: the first panel's keys are unprefixed (%s)", d.key);
        ok(!nb_panel_differs(&q.panels[0], &moved, 0, NB_PANEL_DETECTOR_ONLY, 0.0, &d),
           "panels: the detector alone leaves the ROI out");
        nb_plan_free(&q);
        nb_hdr_set(&rec, "PANELS", "5000");
        st = nb_plan_from_record(&rec, &q);
        ok(st && contains(nb_error_message(), "PANELS must be 1 .. 4096"), "panels: PANELS=5000 is refused: %s",
           nb_error_message());
        nb_hdr_set(&rec, "PANELS", "3");
        nb_hdr_set(&rec, "PANEL2.SPIXELS", "0");
        st = nb_plan_from_record(&rec, &q);
        ok(st && contains(nb_error_message(), "PANEL2.FPIXELS/SPIXELS"), "panels: an empty panel is refused: %s",
           nb_error_message());
        nb_record_free(&rec);
    }
    nb_plan_free(&p);
}

/* ---- option tables: the typed rows and the one loop ------------------------ */

typedef struct demo_opts {
    double d;
    double both[2];
    int n, pair[2], word, given, other;
    int64_t seed;
    const char *s;
    char *copy;
    double v[3];
} demo_opts;

static double times_ten(double x) { return x * 10; }

static int callback_calls;
static nb_status demo_callback(const nb_opt_args *a)
{
    demo_opts *o = a->dest;
    callback_calls++;
    o->other = a->nvals;
    return NB_OK;
}

static const nb_opt_choice demo_words[] = {{"one", 1}, {"two", 2}, {NULL, 0}};
#define DO(f) NB_AT(demo_opts, f)
static const nb_opt demo_rows[] = {
    {FL_DISTANCE, .type = NB_OPT_DOUBLE, .at = {DO(d)}, .check = NB_CHECK_POSITIVE, .convert = times_ten,
     .sets = {{DO(given), 1}, {DO(other), 7}}},
    {FL_DIVERGENCE, .type = NB_OPT_DOUBLE, .at = {DO(both[0]), DO(both[1])}, .check = NB_CHECK_NONNEG},
    {FL_DETPIXELS, .type = NB_OPT_INT, .at = {DO(n)}},
    {FL_PRINTOUT_PIXEL, .type = NB_OPT_INTS, .at = {DO(pair[0]), DO(pair[1])}},
    {FL_SEED, .type = NB_OPT_SEED, .at = {DO(seed)}},
    {FL_HKL, .type = NB_OPT_STRING, .at = {DO(s)}},
    {FL_DUMP, .type = NB_OPT_STRDUP, .at = {DO(copy)}},
    {FL_FDET_VECTOR, .type = NB_OPT_VEC3, .at = {DO(v)}},
    {FL_PRECISION, .type = NB_OPT_CHOICE, .at = {DO(word)}, .choices = demo_words, .expected = "'one' or 'two'"},
    {FL_ROI, .type = NB_OPT_CALLBACK, .fn = demo_callback},
    {NB_OPT_LOCAL, "--own", 1, "X", "an option of its own", .needs = "an X", .type = NB_OPT_STRING, .at = {DO(s)}},
};
#undef DO
static const nb_opt_table demo_table = {NB_GEOM, demo_rows, (int)(sizeof demo_rows / sizeof demo_rows[0])};

/* the loop on a command line of words (no program name) */
static nb_status demo_parse(const nb_opt_table *t, const char *line, demo_opts *o, const char **input)
{
    static char buf[512];
    char *argv[32];
    int argc = 0;
    snprintf(buf, sizeof buf, "%s", line);
    for (char *tok = strtok(buf, " "); tok && argc < 31; tok = strtok(NULL, " ")) argv[argc++] = tok;
    const nb_opts_hooks hooks = {NULL, NULL, input};
    return nb_opts_parse(t, argc, argv, &hooks, o);
}

static void test_option_tables(void)
{
    demo_opts o;
    const char *input = NULL;
    memset(&o, 0, sizeof o);
    ok(demo_parse(&demo_table, "-distance 2.5", &o, NULL) == NB_OK && o.d == 25 && o.given == 1 && o.other == 7,
       "a number: parsed, converted, its sets set");
    ok(demo_parse(&demo_table, "-distance 0", &o, NULL) == NB_ERR_USAGE &&
           !strcmp(nb_error_message(), "option -distance: must be positive, got 0"),
       "the positive check: %s", nb_error_message());
    ok(demo_parse(&demo_table, "-distance x", &o, NULL) == NB_ERR_USAGE && contains(nb_error_message(), "-distance"),
       "a bad number: %s", nb_error_message());
    ok(demo_parse(&demo_table, "-divergence 0.5", &o, NULL) == NB_OK && o.both[0] == 0.5 && o.both[1] == 0.5,
       "a value goes to every destination");
    ok(demo_parse(&demo_table, "-divergence -1", &o, NULL) == NB_ERR_USAGE &&
           !strcmp(nb_error_message(), "option -divergence: must not be negative (-1)"),
       "the not-negative check: %s", nb_error_message());
    ok(demo_parse(&demo_table, "-detpixels 12 -printout_pixel 3 4 -seed 5", &o, NULL) == NB_OK && o.n == 12 &&
           o.pair[0] == 3 && o.pair[1] == 4 && o.seed == -5,
       "an integer, one integer per destination, a seed kept negated");
    ok(demo_parse(&demo_table, "-detpixels 1.5", &o, NULL) == NB_ERR_USAGE && contains(nb_error_message(), "integer"),
       "an integer flag refuses 1.5: %s", nb_error_message());
    ok(demo_parse(&demo_table, "-hkl a.hkl -dump b.bin -dump c.bin", &o, NULL) == NB_OK && !strcmp(o.s, "a.hkl") &&
           o.copy && !strcmp(o.copy, "c.bin"),
       "a string, and a copy that replaces the previous one");
    ok(demo_parse(&demo_table, "-fdet_vector 1 2 3 -precision two", &o, NULL) == NB_OK && o.v[0] == 1 &&
           o.v[2] == 3 && o.word == 2,
       "a vector, a word");
    ok(demo_parse(&demo_table, "-precision three", &o, NULL) == NB_ERR_USAGE &&
           !strcmp(nb_error_message(), "option -precision: expected 'one' or 'two', got 'three'"),
       "a word not in the list: %s", nb_error_message());
    ok(demo_parse(&demo_table, "-roi 1 2 3 4", &o, NULL) == NB_OK && callback_calls == 1 && o.other == 4,
       "a callback gets the values");
    ok(demo_parse(&demo_table, "--own x1 stream.nbs", &o, &input) == NB_OK && !strcmp(o.s, "x1") &&
           input && !strcmp(input, "stream.nbs"),
       "a spelling of the table's own, and the input stream");
    ok(demo_parse(&demo_table, "a.nbs b.nbs", &o, &input) == NB_ERR_USAGE &&
           contains(nb_error_message(), "only one input stream"),
       "one input stream: %s", nb_error_message());
    ok(demo_parse(&demo_table, "stray", &o, NULL) == NB_ERR_USAGE &&
           !strcmp(nb_error_message(), "unexpected argument 'stray'"),
       "no input stream wanted: %s", nb_error_message());
    ok(demo_parse(&demo_table, "--own", &o, NULL) == NB_ERR_USAGE &&
           !strcmp(nb_error_message(), "option --own needs an X"),
       "a missing value of a spelling of its own: %s", nb_error_message());
    ok(demo_parse(&demo_table, "-detpixels", &o, NULL) == NB_ERR_USAGE &&
           !strcmp(nb_error_message(), "option -detpixels needs a value (N)"),
       "a missing value of a registry flag: %s", nb_error_message());
    ok(demo_parse(&demo_table, "-lambda 1", &o, NULL) == NB_ERR_USAGE && contains(nb_error_message(), "not handled"),
       "a flag the tool owns without a row is refused: %s", nb_error_message());
    ok(demo_parse(&demo_table, "-readout 1", &o, NULL) == NB_ERR_USAGE && contains(nb_error_message(), "nb-noise"),
       "a flag of another tool names it: %s", nb_error_message());
    const nb_opt_table no_registry = {0, demo_rows, (int)(sizeof demo_rows / sizeof demo_rows[0])};
    ok(demo_parse(&no_registry, "-distance 1", &o, NULL) == NB_ERR_USAGE &&
           !strcmp(nb_error_message(), "unknown option '-distance'"),
       "a tool that owns no registry flag: %s", nb_error_message());
    free(o.copy);

    /* nb-geom's table binds every flag nb-geom owns, once; nothing else */
    int n = 0, unbound = 0, twice = 0, foreign = 0;
    const nb_flag *t = nb_flag_table(&n);
    for (int i = 0; i < n; i++) {
        if (!(t[i].owners & NB_GEOM)) continue;
        int rows = 0;
        for (int k = 0; k < nb_request_opts.nrows; k++) rows += nb_request_opts.rows[k].id == t[i].id;
        if (rows == 0) printf("#   %s has no row\n", t[i].name);
        unbound += rows == 0, twice += rows > 1;
    }
    for (int k = 0; k < nb_request_opts.nrows; k++) {
        const nb_opt *r = &nb_request_opts.rows[k];
        if (r->id != NB_OPT_LOCAL && !(nb_flag_lookup_for(nb_flag_canonical(r->id), NB_GEOM)->owners & NB_GEOM))
            foreign++;
    }
    ok(unbound == 0 && twice == 0 && foreign == 0,
       "nb-geom's table binds each of its flags once (%d unbound, %d twice, "
       "%d not its own)",
       unbound, twice, foreign);
}

/* Frame crystals (FRAME_CRYSTALS): through the record and back bit for bit,
 * each frame's view takes its crystal (reciprocal vectors, cell parameters,
 * N, fluence), the sources scale to its wavelength, frame 0's is the plan's;
 * bad ones and ones beside STILLS are refused. */
static void test_frame_crystals(void)
{
    nb_plan p, q;
    nb_record rec;
    if (make_plan(&p) != NB_OK) {
        ok(0, "frame crystals: the base plan builds");
        return;
    }
    p.nframes = 3;
    nb_frame_crystal fc[3];
    memset(fc, 0, sizeof fc);
    for (int i = 0; i < 3; i++) {
        /* an orthorhombic cell 50 x 60 x 70 A turned about z by 10 i degrees */
        double t = 10.0 * i * M_PI / 180.0, c = cos(t), s = sin(t);
        fc[i].a[0] = 50e-10 * c, fc[i].a[1] = 50e-10 * s;
        fc[i].b[0] = -60e-10 * s, fc[i].b[1] = 60e-10 * c;
        fc[i].c[2] = 70e-10;
        fc[i].Na = 3 + i, fc[i].Nb = 4, fc[i].Nc = 5;
        fc[i].fluence = 1e20 * (i + 1);
        fc[i].lambda = p.lambda0 * (1.0 + 0.01 * i);
    }
    fc[2].status = NB_FRAME_FAILED;
    nb_status st = nb_plan_set_frame_crystals(&p, fc);
    ok(st == NB_OK, "frame crystals: set (%s)", st ? nb_error_message() : "ok");
    ok(p.cell_a[0] == fc[0].a[0] && p.Na == 3 && p.fluence == 1e20, "frame crystals: the plan's crystal is frame 0's");
    near(p.unit_cell[1], 60.0, 1e-12, "frame crystals: the plan's UNIT_CELL b from frame 0");
    st = round_trip(&p, &q, &rec);
    ok(st == NB_OK, "frame crystals: the plan reads back (%s)", st ? nb_error_message() : "ok");
    if (!st) {
        ok(q.frame_crystals && !memcmp(q.frame_crystals, p.frame_crystals, sizeof fc),
           "frame crystals: every number comes back bit for bit");
        ok(nb_hdr_has(&rec, "FRAME_CRYSTALS") && nb_record_has_array(&rec, "frame_crystals"),
           "frame crystals: key FRAME_CRYSTALS and array frame_crystals");
        nb_plan v;
        nb_plan_frame_view(&q, 1, &v);
        ok(v.cell_b[0] == fc[1].b[0] && v.Na == 4 && v.fluence == 2e20, "frame crystals: frame 1's view takes its crystal");
        near(nb_vdot(v.recip_a, fc[1].a) * 1e10, 1.0, 1e-14, "frame crystals: a* . a = 1 in the view");
        near(nb_vdot(v.recip_a, fc[1].b) * 1e10, 0.0, 1e-14, "frame crystals: a* . b = 0 in the view");
        near(v.unit_cell[5], 90.0, 1e-12, "frame crystals: gamma in the view");
        near(v.lambda0, fc[1].lambda, 0, "frame crystals: the view's LAMBDA0 is the frame's");
        nb_frame_crystal got;
        nb_plan_frame_crystal(&q, 2, &got);
        ok(got.status == NB_FRAME_FAILED && got.Na == 5, "frame crystals: nb_plan_frame_crystal gives the stored one");
        nb_source *src = NULL;
        int n = 0;
        st = nb_plan_frame_sources(&q, 0, &src, &n);
        ok(st == NB_OK && !src && n == 0, "frame crystals: frame 0 at LAMBDA0 keeps the plan's sources");
        st = nb_plan_frame_sources(&q, 2, &src, &n);
        ok(st == NB_OK && src && n == q.nsources, "frame crystals: frame 2's sources are its own");
        int scaled = 1;
        for (int i = 0; src && i < n; i++)
            scaled &= fabs(src[i].lambda / q.sources[i].lambda - 1.02) < 1e-15 &&
                      !memcmp(src[i].dir, q.sources[i].dir, sizeof src[i].dir);
        ok(src && scaled, "frame crystals: frame 2's sources are the plan's scaled by lambda / LAMBDA0");
        free(src);
        nb_record_free(&rec);
        nb_plan_free(&q);
    }
    /* a rotation series' frame crystal: the plan's at phi 0 */
    nb_plan r;
    if (make_plan(&r) == NB_OK) {
        nb_frame_crystal got;
        nb_plan_frame_crystal(&r, 1, &got);
        ok(!memcmp(got.a, r.cell_a, sizeof got.a) && got.Na == r.Na && got.lambda == r.lambda0 && got.status == 0,
           "frame crystals: a series' frame crystal is the plan's");
        nb_plan_free(&r);
    }
    /* refused: a degenerate cell, and beside STILLS when read */
    fc[1].c[2] = 0;
    fc[1].c[0] = fc[1].a[0], fc[1].c[1] = fc[1].a[1];
    st = nb_plan_set_frame_crystals(&p, fc);
    ok(st == NB_ERR_DATA && contains(nb_error_message(), "frame 2") && contains(nb_error_message(), "degenerate"),
       "frame crystals: a flat cell is refused: %s", nb_error_message());
    p.stills.on = 1;
    st = round_trip(&p, &q, NULL);
    ok(st == NB_ERR_DATA && contains(nb_error_message(), "STILLS"), "frame crystals: beside STILLS refused: %s",
       nb_error_message());
    nb_plan_free(&p);
}

/* Per-frame mosaic spreads (frame_mosaic): through the record and back bit
 * for bit, each frame's view takes its own, the matrices keep the spread
 * they were drawn at; refused without domains, negative, or of the wrong
 * count. */
static void test_frame_mosaic(void)
{
    nb_plan p, q;
    nb_record rec;
    if (make_plan(&p) != NB_OK) {
        ok(0, "frame mosaic: the base plan builds");
        return;
    }
    p.nframes = 3;
    const double spread[3] = {0.5 * M_PI / 180.0, 0.8 * M_PI / 180.0, 0.0};
    nb_status st = nb_plan_set_frame_mosaic(&p, spread);
    ok(st == NB_OK, "frame mosaic: set (%s)", st ? nb_error_message() : "ok");
    st = round_trip(&p, &q, &rec);
    ok(st == NB_OK, "frame mosaic: the plan reads back (%s)", st ? nb_error_message() : "ok");
    if (!st) {
        ok(q.frame_mosaic && !memcmp(q.frame_mosaic, spread, sizeof spread) && nb_record_has_array(&rec, "frame_mosaic"),
           "frame mosaic: array frame_mosaic, every number back bit for bit");
        ok(q.mosaic_umats_spread == p.mosaic_spread, "frame mosaic: the matrices' spread is MOSAIC_SPREAD");
        nb_plan v;
        nb_plan_frame_view(&q, 1, &v);
        ok(v.mosaic_spread == spread[1] && v.mosaic_umats_spread == p.mosaic_spread,
           "frame mosaic: frame 1's view has its spread, its matrices' the plan's");
        nb_record_free(&rec);
        nb_plan_free(&q);
    }
    const double negative[3] = {0.01, -0.01, 0.01};
    st = nb_plan_set_frame_mosaic(&p, negative);
    ok(st == NB_ERR_DATA && contains(nb_error_message(), "frame 2"), "frame mosaic: a negative spread is refused: %s",
       nb_error_message());
    /* the record's count must be NFRAMES */
    if (nb_plan_to_record(&p, &rec) == NB_OK) {
        p.nframes = 2;
        ok(nb_frame_mosaic_from_record(&rec, &p) == NB_ERR_DATA && contains(nb_error_message(), "NFRAMES"),
           "frame mosaic: an array of another count is refused: %s", nb_error_message());
        p.nframes = 3;
        p.mosaic_spread = 0.0;
        ok(nb_frame_mosaic_from_record(&rec, &p) == NB_ERR_DATA && contains(nb_error_message(), "mosaic domains"),
           "frame mosaic: refused without domains: %s", nb_error_message());
        nb_record_free(&rec);
    }
    nb_plan_free(&p);
}

/* Frame identifiers (frame_ids): through the record and back, copied with
 * the plan; a bad one refused naming its frame, a record's of another count
 * refused. */
static void test_frame_ids(void)
{
    nb_plan p, q, c;
    nb_record rec;
    if (make_plan(&p) != NB_OK) {
        ok(0, "frame ids: the base plan builds");
        return;
    }
    p.nframes = 3;
    ok(nb_plan_frame_id(&p, 0) == NULL, "frame ids: none kept, none given");
    const char *ids[3] = {"3c8e3b3a-6e22-4b6c-9ab2-0a4f6f1c2d11", "b", "a \"quoted\" one"};
    nb_status st = nb_plan_set_frame_ids(&p, ids);
    ok(st == NB_OK, "frame ids: set (%s)", st ? nb_error_message() : "ok");
    st = round_trip(&p, &q, &rec);
    ok(st == NB_OK, "frame ids: the plan reads back (%s)", st ? nb_error_message() : "ok");
    if (!st) {
        int same = 1;
        for (int f = 0; f < 3; f++) same &= nb_plan_frame_id(&q, f) && !strcmp(nb_plan_frame_id(&q, f), ids[f]);
        ok(same && nb_record_has_array(&rec, "frame_ids"), "frame ids: array frame_ids, every identifier back");
        ok(nb_plan_frame_id(&q, 3) == NULL && nb_plan_frame_id(&q, -1) == NULL, "frame ids: none beyond the frames");
        if (nb_plan_copy(&q, &c) == NB_OK) {
            ok(c.frame_ids != q.frame_ids && !strcmp(nb_plan_frame_id(&c, 2), ids[2]), "frame ids: a copy has its own");
            nb_plan_free(&c);
        }
        p.nframes = 2;
        ok(nb_frame_ids_from_record(&rec, &p) == NB_ERR_DATA && contains(nb_error_message(), "NFRAMES"),
           "frame ids: a record's of another count is refused: %s", nb_error_message());
        p.nframes = 3;
        nb_record_free(&rec);
        nb_plan_free(&q);
    }
    const char *empty[3] = {"a", "", "c"}, *control[3] = {"a", "b", "c\td"};
    st = nb_plan_set_frame_ids(&p, empty);
    ok(st == NB_ERR_DATA && contains(nb_error_message(), "frame 2") && contains(nb_error_message(), "empty"),
       "frame ids: an empty one is refused: %s", nb_error_message());
    st = nb_plan_set_frame_ids(&p, control);
    ok(st == NB_ERR_DATA && contains(nb_error_message(), "frame 3") && contains(nb_error_message(), "printable"),
       "frame ids: a tab is refused: %s", nb_error_message());
    ok(!strcmp(nb_plan_frame_id(&p, 1), "b"), "frame ids: a refused set leaves the plan's as they were");
    nb_plan_free(&p);
}

/* Per-frame spectra (FRAME_SPECTRA): through the record and back bit for
 * bit; a frame renders each channel (equal weights as they are, unequal at
 * the weights' quantiles), scaled to its frame crystal's wavelength; refused
 * without frame crystals, all-zero, or a negative wavelength. */
static void test_frame_spectra(void)
{
    nb_plan p, q;
    nb_record rec;
    if (make_plan(&p) != NB_OK) {
        ok(0, "frame spectra: the base plan builds");
        return;
    }
    p.nframes = 2;
    const int counts[2] = {3, 2};
    const double L = 1e-10;
    double pairs[10] = {0.99 * L, 1, 1.00 * L, 1, 1.01 * L, 1, /* frame 2: unequal weights */ 1.0 * L, 1, 1.02 * L, 3};
    nb_status st = nb_plan_set_frame_spectra(&p, counts, pairs);
    ok(st == NB_ERR_DATA && contains(nb_error_message(), "frame crystals"),
       "frame spectra: refused without frame crystals: %s", nb_error_message());
    nb_frame_crystal fc[2];
    memset(fc, 0, sizeof fc);
    for (int i = 0; i < 2; i++) {
        fc[i].a[0] = 50e-10, fc[i].b[1] = 60e-10, fc[i].c[2] = 70e-10;
        fc[i].Na = fc[i].Nb = fc[i].Nc = 5, fc[i].fluence = 1e20;
        fc[i].lambda = nb_spectrum_mean(pairs + 6 * i, counts[i]);
    }
    fc[1].lambda *= 1.001; /* frame 2's wavelength moved: its spectrum follows */
    if ((st = nb_plan_set_frame_crystals(&p, fc)) || (st = nb_plan_set_frame_spectra(&p, counts, pairs))) {
        ok(0, "frame spectra: set (%s)", nb_error_message());
        nb_plan_free(&p);
        return;
    }
    st = round_trip(&p, &q, &rec);
    ok(st == NB_OK, "frame spectra: the plan reads back (%s)", st ? nb_error_message() : "ok");
    if (!st) {
        const double *got;
        ok(nb_plan_frame_spectrum(&q, 1, &got) == 2 && !memcmp(got, pairs + 6, 4 * sizeof *got),
           "frame spectra: frame 2's channels come back bit for bit");
        nb_source *src = NULL;
        int n = 0;
        st = nb_plan_frame_sources(&q, 0, &src, &n);
        int same = st == NB_OK && n == 3 * q.nsources;
        /* source 0's channels first, each at its wavelength over LAMBDA0 (the plan's dispersion) */
        const double f0 = q.sources[0].lambda / q.lambda0;
        for (int k = 0; same && k < 3; k++) same &= fabs(src[k].lambda / (f0 * pairs[2 * k]) - 1) < 1e-15;
        ok(same, "frame spectra: frame 1 renders its three channels as they are");
        free(src);
        st = nb_plan_frame_sources(&q, 1, &src, &n);
        /* C = 1/8 at 1.00, 5/8 at 1.02: the quantiles 1/4, 3/4 at 1.005 and 1.02 */
        const double mean = (1.0 + 3 * 1.02) / 4, r = 1.001;
        const double f1 = q.sources[0].lambda / q.lambda0;
        ok(st == NB_OK && n == 2 * q.nsources && fabs(src[0].lambda / (f1 * L * 1.005 * r) - 1) < 1e-12 &&
               fabs(src[1].lambda / (f1 * L * 1.02 * r) - 1) < 1e-12,
           "frame spectra: unequal weights at their quantiles, scaled by the frame's wavelength over %.4f", mean);
        free(src);
        nb_record_free(&rec);
        nb_plan_free(&q);
    }
    pairs[3] = -1;
    st = nb_plan_set_frame_spectra(&p, counts, pairs);
    ok(st == NB_ERR_DATA && contains(nb_error_message(), "frame 1") && contains(nb_error_message(), "weight"),
       "frame spectra: a negative weight is refused: %s", nb_error_message());
    pairs[3] = 1, pairs[7] = pairs[9] = 0;
    st = nb_plan_set_frame_spectra(&p, counts, pairs);
    ok(st == NB_ERR_DATA && contains(nb_error_message(), "every weight is 0"),
       "frame spectra: a frame without light is refused: %s", nb_error_message());
    nb_plan_free(&p);
}

int main(void)
{
    nb_set_tool_name("test_plan");
    nb_set_verbosity(-1);
    test_round_trip();
    test_corrupted();
    test_panels();
    test_frame_crystals();
    test_frame_mosaic();
    test_frame_ids();
    test_frame_spectra();
    test_options();
    test_option_tables();
    return tap_done();
}
