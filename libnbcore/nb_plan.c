/* nb_plan.c - the PLAN record: the resolved experiment written as header keys
 * and arrays (one table of keys, so writing and reading cannot disagree), read
 * back with every key checked, and the size limits a plan must respect.
 * Keys and units: docs/stream-format.md, PLAN. */
#include "nb_plan.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_stills.h"
#include "nb_spectra.h"
#include "nb_util.h"

enum ftype { F_INT, F_I64, F_DBL, F_VEC3, F_STR, F_CHARS };

typedef struct field {
    const char *key;
    enum ftype type;
    size_t off;
    size_t size; /* for F_CHARS */
} field;

#define I(k, m) {k, F_INT, offsetof(nb_plan, m), 0}
#define L(k, m) {k, F_I64, offsetof(nb_plan, m), 0}
#define D(k, m) {k, F_DBL, offsetof(nb_plan, m), 0}
#define V(k, m) {k, F_VEC3, offsetof(nb_plan, m), 0}
#define S(k, m) {k, F_STR, offsetof(nb_plan, m), 0}
#define C(k, m) {k, F_CHARS, offsetof(nb_plan, m), sizeof(((nb_plan *)0)->m)}

/* The PLAN header keys.  Units are SI unless noted in docs/stream-format.md.
 * The keys of what the kernels read as it is come from their table
 * (nb_fields.h), the panels' below. */
#define PLAN_FIELD(k, kind, m, follow, what) {k, F_##kind, offsetof(nb_plan, m), 0},
static const field fields[] = {
    NB_PLAN_KERNEL_FIELDS(PLAN_FIELD)
    S("COMMAND", command_line),
    D("DETSIZE_F", detsize_f), D("DETSIZE_S", detsize_s),
    V("SPINDLE", spindle), V("TWOTHETA_AXIS", twotheta_axis),
    D("XBEAM", Xbeam), D("YBEAM", Ybeam), D("FBEAM", Fbeam), D("SBEAM", Sbeam),
    D("XCLOSE", Xclose), D("YCLOSE", Yclose), D("FCLOSE", Fclose), D("SCLOSE", Sclose),
    D("ORGX", ORGX), D("ORGY", ORGY), V("DIALS_ORIGIN_MM", dials_origin),
    C("CONVENTION", convention), C("PIVOT", pivot),
    D("DETECTOR_ROTX", rotx), D("DETECTOR_ROTY", roty), D("DETECTOR_ROTZ", rotz), D("TWOTHETA", twotheta),
    D("LAMBDA0", lambda0), D("DISPERSION", dispersion), D("DISPSTEP", dispstep), I("DISPSTEPS", dispsteps),
    D("HDIVRANGE", hdivrange), D("HDIVSTEP", hdivstep), I("HDIVSTEPS", hdivsteps),
    D("VDIVRANGE", vdivrange), D("VDIVSTEP", vdivstep), I("VDIVSTEPS", vdivsteps),
    I("DIVSTEPS", divsteps), I("ROUND_DIV", round_div),
    D("FLUX", flux), D("EXPOSURE", exposure), D("BEAMSIZE", beamsize),
    I("SOURCES", nsources),
    V("CELL_A", cell_a), V("CELL_B", cell_b), V("CELL_C", cell_c),
    V("RECIP_A", recip_a), V("RECIP_B", recip_b), V("RECIP_C", recip_c),
    V("MISSET", misset),
    D("MOSAIC_SPREAD", mosaic_spread), I("MOSAIC_DOMAINS", mosaic_domains),
    D("PHI0", phi0), D("PHISTEP", phistep), D("OSC", osc), I("PHISTEPS", phisteps), I("NFRAMES", nframes),
    I("INTERPOLATE", interpolate),
    L("SEED", seed), L("MOSAIC_SEED", mosaic_seed), L("MISSET_SEED", misset_seed),
    S("HKL_FILE", hkl_file), S("SPACE_GROUP", space_group), S("DUMP_FILE", dump_file), I("DUMP_IMPLICIT", dump_implicit),
    D("DEFAULT_F", default_F),
    S("FLOATFILE", floatfile), S("INTFILE", intfile), S("NOISEFILE", noisefile), S("PGMFILE", pgmfile),
    D("INTFILE_SCALE", intfile_scale), D("PGM_SCALE", pgm_scale), D("ADC", adc),
    I("CALCULATE_NOISE", calculate_noise), I("WRITE_PGM", write_pgm),
    I("PRECISION_DOUBLE", precision_double),
    I("PRINTOUT", printout), I("PRINTOUT_FPIXEL", printout_fpixel), I("PRINTOUT_SPIXEL", printout_spixel),
    I("PROGRESS", progress),
};

/* Every panel's keys, from the panel table (nb_fields.h): the first
 * panel's as KEY, panel i's as PANEL<i>.KEY */
#define PANEL_FIELD(k, kind, m, follow, what) {k, F_##kind, offsetof(nb_panel, m), 0},
static const field panel_fields[] = {NB_PANEL_FIELDS(PANEL_FIELD)};
#define NB_MAX_PANELS 4096

static const char *shape_names[] = {"square", "round", "gauss", "tophat"};

const char *nb_shape_name(int shape)
{
    return shape >= 0 && shape < 4 ? shape_names[shape] : "?";
}

int nb_shape_from_name(const char *name)
{
    for (int i = 0; i < 4; i++)
        if (strcmp(name, shape_names[i]) == 0) return i;
    return -1;
}

int nb_plan_has_crystal(const nb_plan *p)
{
    for (int i = 0; i < 3; i++)
        if (p->cell_a[i] != 0.0 || p->cell_b[i] != 0.0 || p->cell_c[i] != 0.0) return 1;
    return 0;
}

void nb_plan_init(nb_plan *p)
{
    memset(p, 0, sizeof *p);
    nb_rng_init(&p->rng);
}

static void free_panels(nb_plan *p)
{
    for (int i = 0; i < p->npanels; i++) free(p->panels[i].mask);
    free(p->panels);
    p->panels = NULL;
    p->npanels = 0;
}

nb_status nb_plan_set_panels(nb_plan *p, int n)
{
    free_panels(p);
    if (n < 1 || n > NB_MAX_PANELS)
        return nb_error_set(NB_ERR_DATA, "a detector of %d panels (1 .. %d)", n, NB_MAX_PANELS);
    nb_status st = nb_calloc((void **)&p->panels, (size_t)n, sizeof *p->panels, "panels");
    if (!st) p->npanels = n;
    return st;
}

void nb_plan_free(nb_plan *p)
{
    free_panels(p);
    free(p->command_line);
    free(p->sources);
    free(p->mosaic_umats);
    free(p->frame_crystals);
    free(p->frame_mosaic);
    free(p->frame_ids);
    free(p->frame_nchannels);
    free(p->frame_spectra);
    free(p->hkl_file);
    free(p->space_group);
    free(p->dump_file);
    free(p->floatfile);
    free(p->intfile);
    free(p->noisefile);
    free(p->pgmfile);
    nb_plan_init(p);
}

/* *dst a copy of the n bytes at src (NULL stays NULL) */
static nb_status dup_bytes(void *dst_, const void *src, size_t n, nb_status st)
{
    void **dst = dst_;
    *dst = NULL;
    if (st || !src) return st;
    if (!(*dst = malloc(n ? n : 1))) return nb_error_set(NB_ERR_NOMEM, "out of memory copying a plan");
    memcpy(*dst, src, n);
    return NB_OK;
}

static nb_status dup_string(char **dst, const char *src, nb_status st)
{
    return dup_bytes(dst, src, src ? strlen(src) + 1 : 0, st);
}

nb_status nb_plan_copy(const nb_plan *p, nb_plan *out)
{
    *out = *p;
    const size_t nf = p->nframes > 0 ? (size_t)p->nframes : 0;
    nb_status st = dup_bytes(&out->panels, p->panels, (size_t)p->npanels * sizeof *p->panels, NB_OK);
    for (int i = 0; i < p->npanels && out->panels; i++)
        st = dup_bytes(&out->panels[i].mask, p->panels[i].mask,
                       (size_t)p->panels[i].fpixels * (size_t)p->panels[i].spixels, st);
    if (!out->panels) out->npanels = 0;
    st = dup_string(&out->command_line, p->command_line, st);
    st = dup_bytes(&out->sources, p->sources, (size_t)p->nsources * sizeof *p->sources, st);
    st = dup_bytes(&out->mosaic_umats, p->mosaic_umats, 9 * (size_t)p->mosaic_domains * sizeof(double), st);
    st = dup_bytes(&out->frame_crystals, p->frame_crystals, nf * sizeof *p->frame_crystals, st);
    st = dup_bytes(&out->frame_mosaic, p->frame_mosaic, nf * sizeof *p->frame_mosaic, st);
    st = dup_bytes(&out->frame_ids, p->frame_ids, p->frame_ids_bytes, st);
    size_t channels = 0;
    for (size_t f = 0; p->frame_nchannels && f < nf; f++) channels += (size_t)p->frame_nchannels[f];
    st = dup_bytes(&out->frame_nchannels, p->frame_nchannels, nf * sizeof *p->frame_nchannels, st);
    st = dup_bytes(&out->frame_spectra, p->frame_spectra, 2 * channels * sizeof *p->frame_spectra, st);
    char **strings[] = {&out->hkl_file, &out->space_group, &out->dump_file, &out->floatfile,
                        &out->intfile,  &out->noisefile,   &out->pgmfile};
    const char *from[] = {p->hkl_file, p->space_group, p->dump_file, p->floatfile, p->intfile, p->noisefile, p->pgmfile};
    for (size_t i = 0; i < sizeof strings / sizeof strings[0]; i++) st = dup_string(strings[i], from[i], st);
    if (st) nb_plan_free(out);
    return st;
}

static nb_status bad(const char *key, const char *why)
{
    return nb_error_set(NB_ERR_DATA, "PLAN record: %s %s", key, why);
}

/* One key of a table into the header, from the struct at base. */
static nb_status put_field(nb_record *rec, const field *f, const char *key, const void *base_)
{
    const char *base = (const char *)base_ + f->off;
    switch (f->type) {
    case F_INT: nb_hdr_set_long(rec, key, *(const int *)base); break;
    case F_I64: nb_hdr_setf(rec, key, "%lld", (long long)*(const int64_t *)base); break;
    case F_DBL: nb_hdr_set_double(rec, key, *(const double *)base); break;
    case F_VEC3: nb_hdr_set_vec3(rec, key, (const double *)base); break;
    case F_CHARS: nb_hdr_set(rec, key, base); break;
    case F_STR: {
        const char *s = *(char *const *)base;
        if (s) {
            /* header values are single lines */
            if (strchr(s, '\n')) return nb_error_set(NB_ERR_DATA, "value of %s contains a newline", key);
            nb_hdr_set(rec, key, s);
        }
        break;
    }
    }
    return NB_OK;
}

/* One key of a table from the header into the struct at base, checked. */
static nb_status get_field(const nb_record *rec, const field *f, const char *key, void *base_)
{
    char *base = (char *)base_ + f->off;
    nb_status st = NB_OK;
    switch (f->type) {
    case F_INT: st = nb_hdr_get_int(rec, key, (int *)base); break;
    case F_I64: {
        long v;
        st = nb_hdr_get_long(rec, key, &v);
        *(int64_t *)base = v;
        break;
    }
    case F_DBL:
        st = nb_hdr_get_double(rec, key, (double *)base);
        if (!st && !isfinite(*(double *)base)) st = bad(key, "is not a finite number");
        break;
    case F_VEC3:
        st = nb_hdr_get_vec3(rec, key, (double *)base);
        for (int k = 0; !st && k < 3; k++)
            if (!isfinite(((double *)base)[k])) st = bad(key, "holds a non-finite number");
        break;
    case F_CHARS: {
        size_t len;
        const char *v = nb_hdr_find(rec, key, &len);
        if (!v) return nb_error_set(NB_ERR_DATA, "PLAN record: missing key %s", key);
        if (len >= f->size) return bad(key, "is too long");
        memcpy(base, v, len);
        base[len] = '\0';
        break;
    }
    case F_STR:
        if (nb_hdr_has(rec, key)) st = nb_hdr_get_str(rec, key, (char **)base);
        break;
    }
    return st;
}

/* Panel i's name in the record: "" and "mask" for the first (a one-panel
 * plan's record is what it always was), "PANEL<i>." and "mask<i>" after it. */
static void panel_key(int i, const char *key, char *out, size_t size)
{
    if (i == 0) snprintf(out, size, "%s", key);
    else snprintf(out, size, "PANEL%d.%s", i, key);
}

static void mask_key(int i, char *out, size_t size)
{
    if (i == 0) snprintf(out, size, "mask");
    else snprintf(out, size, "mask%d", i);
}

/* A field's numbers as text, for messages. */
static void field_text(const field *f, const nb_panel *q, char *buf, size_t size)
{
    const char *v = (const char *)q + f->off;
    const int count = f->type == F_VEC3 ? 3 : 1;
    size_t used = 0;
    buf[0] = '\0';
    for (int k = 0; k < count && used + 1 < size; k++) {
        char num[32];
        if (f->type == F_INT) snprintf(num, sizeof num, "%d", ((const int *)v)[k]);
        else nb_format_double(((const double *)v)[k], num, sizeof num);
        used += (size_t)snprintf(buf + used, size - used, "%s%s", k ? " " : "", num);
    }
}

/* Do a and b differ in this field, beyond rel of its largest component? */
static int field_differs(const field *f, const nb_panel *a, const nb_panel *b, double rel)
{
    const char *va = (const char *)a + f->off, *vb = (const char *)b + f->off;
    if (f->type == F_INT) return *(const int *)va != *(const int *)vb;
    const int count = f->type == F_VEC3 ? 3 : 1;
    const double *x = (const double *)va, *y = (const double *)vb;
    double scale = 0.0;
    for (int k = 0; k < count; k++) scale = fmax(scale, fmax(fabs(x[k]), fabs(y[k])));
    for (int k = 0; k < count; k++)
        if (!(fabs(x[k] - y[k]) <= rel * scale)) return 1;
    return 0;
}

int nb_panel_differs(const nb_panel *a, const nb_panel *b, int index, nb_panel_scope scope, double rel,
                     nb_panel_difference *d)
{
    for (size_t k = 0; k < sizeof panel_fields / sizeof panel_fields[0]; k++) {
        const field *f = &panel_fields[k];
        if (scope == NB_PANEL_DETECTOR_ONLY && !strncmp(f->key, "ROI_", 4)) continue;
        if (!field_differs(f, a, b, rel)) continue;
        panel_key(index, f->key, d->key, sizeof d->key);
        field_text(f, a, d->a, sizeof d->a);
        field_text(f, b, d->b, sizeof d->b);
        return 1;
    }
    return 0;
}

/* PANELS (when there are several), every panel's keys and masks. */
static nb_status put_panels(const nb_plan *p, nb_record *rec)
{
    nb_status st;
    char key[64];
    if (p->npanels > 1) nb_hdr_set_long(rec, "PANELS", p->npanels);
    for (int i = 0; i < p->npanels; i++) {
        const nb_panel *q = &p->panels[i];
        for (size_t k = 0; k < sizeof panel_fields / sizeof panel_fields[0]; k++) {
            panel_key(i, panel_fields[k].key, key, sizeof key);
            if ((st = put_field(rec, &panel_fields[k], key, q))) return st;
        }
        if (q->mask) {
            mask_key(i, key, sizeof key);
            st = nb_record_add_array(rec, key, NB_U8, (size_t)q->fpixels * (size_t)q->spixels, q->mask, NULL);
            if (st) return st;
        }
    }
    return NB_OK;
}

/* Panel i's sizes and counts, which the kernels trust. */
static nb_status check_panel(const nb_panel *q, int i)
{
    char key[64];
    panel_key(i, "", key, sizeof key);
    if (nb_panel_check_size(q)) return nb_error_prefix(NB_ERR_DATA, "PLAN record: %sFPIXELS/SPIXELS", key);
    if (!(q->pixel_size > 0) || !isfinite(q->pixel_size))
        return nb_error_set(NB_ERR_DATA, "PLAN record: %sPIXEL_SIZE must be positive", key);
    if (q->thicksteps < 1) return nb_error_set(NB_ERR_DATA, "PLAN record: %sDETECTOR_THICKSTEPS must be >= 1", key);
    return NB_OK;
}

/* The panels: PANELS (1 when absent), every panel's keys, checked, and masks. */
static nb_status get_panels(const nb_record *rec, nb_plan *p)
{
    nb_status st;
    char key[64];
    int n = 1;
    if (nb_hdr_has(rec, "PANELS") && (st = nb_hdr_get_int(rec, "PANELS", &n))) return st;
    if (n < 1 || n > NB_MAX_PANELS) return bad("PANELS", "must be 1 .. 4096");
    if ((st = nb_plan_set_panels(p, n))) return st;
    for (int i = 0; i < n; i++) {
        nb_panel *q = &p->panels[i];
        for (size_t k = 0; k < sizeof panel_fields / sizeof panel_fields[0]; k++) {
            panel_key(i, panel_fields[k].key, key, sizeof key);
            if ((st = get_field(rec, &panel_fields[k], key, q))) return st;
        }
        if ((st = check_panel(q, i))) return st;
        mask_key(i, key, sizeof key);
        if (nb_record_has_array(rec, key)) {
            const void *data;
            size_t count;
            if ((st = nb_record_get_array(rec, key, NB_U8, &data, &count))) return st;
            if (count != (size_t)q->fpixels * (size_t)q->spixels) return bad(key, "does not match its panel's size");
            if ((st = nb_calloc((void **)&q->mask, count, 1, "mask"))) return st;
            memcpy(q->mask, data, count);
        }
    }
    if ((double)nb_plan_total_pixels(p) > 2147483647.0)
        return bad(n > 1 ? "PANELS" : "FPIXELS x SPIXELS", "hold more than 2^31-1 pixels in all");
    return NB_OK;
}

/* DETECTOR_MATERIAL, when present: one of the materials nb knows */
static nb_status get_material(const nb_record *rec, nb_plan *p)
{
    if (!nb_hdr_has(rec, "DETECTOR_MATERIAL")) return NB_OK;
    char *name = NULL;
    nb_status st = nb_hdr_get_str(rec, "DETECTOR_MATERIAL", &name);
    if (st) return st;
    p->detector_material = nb_material_from_name(name);
    free(name);
    if (p->detector_material == NB_MATERIAL_NONE) return bad("DETECTOR_MATERIAL", "is not one of Si, CdTe, GaAs");
    return NB_OK;
}

nb_status nb_plan_to_record(const nb_plan *p, nb_record *rec)
{
    nb_status st;
    nb_record_init(rec, "PLAN");
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if ((st = put_field(rec, &fields[i], fields[i].key, p))) return st;
    nb_hdr_set(rec, "SHAPE", nb_shape_name(p->shape));
    /* only when it was: a plan with -seed is the record it always was */
    if (p->seed_drawn) nb_hdr_set_long(rec, "SEED_DRAWN", 1);
    /* only when a material was named: a plan without one is the record it always was */
    if (p->detector_material != NB_MATERIAL_NONE)
        nb_hdr_set(rec, "DETECTOR_MATERIAL", nb_material_name(p->detector_material));
    /* only for stills: a rotation series' record is what it always was */
    if (p->stills.on) nb_stills_to_record(&p->stills, rec);
    /* only when set: a plan without them is the record it always was */
    if ((st = nb_frame_crystals_to_record(p, rec))) return st;
    if ((st = nb_frame_mosaic_to_record(p, rec))) return st;
    if ((st = nb_frame_ids_to_record(p, rec))) return st;
    if ((st = nb_frame_spectra_to_record(p, rec))) return st;
    nb_hdr_setf(rec, "UNIT_CELL", "%.10g %.10g %.10g %.10g %.10g %.10g", p->unit_cell[0], p->unit_cell[1],
                p->unit_cell[2], p->unit_cell[3], p->unit_cell[4], p->unit_cell[5]);
    /* the shared ran1 shuffle table, so nb-noise continues the reference's
     * generator state when a seed does not re-initialise it */
    nb_strbuf sb;
    nb_strbuf_init(&sb);
    nb_strbuf_printf(&sb, "%lld", (long long)p->rng.iy);
    for (int i = 0; i < NB_RNG_NTAB; i++) nb_strbuf_printf(&sb, " %lld", (long long)p->rng.iv[i]);
    nb_hdr_set(rec, "RAN1_STATE", sb.data);
    nb_strbuf_free(&sb);

    double *src;
    st = nb_record_add_array(rec, "sources", NB_F64, (size_t)p->nsources * 5, NULL, (void **)&src);
    if (st) return st;
    for (int i = 0; i < p->nsources; i++) {
        src[5 * i + 0] = p->sources[i].dir[0];
        src[5 * i + 1] = p->sources[i].dir[1];
        src[5 * i + 2] = p->sources[i].dir[2];
        src[5 * i + 3] = p->sources[i].weight;
        src[5 * i + 4] = p->sources[i].lambda;
    }
    st = nb_record_add_array(rec, "mosaic_umats", NB_F64, (size_t)p->mosaic_domains * 9, p->mosaic_umats, NULL);
    if (st) return st;
    return put_panels(p, rec);
}

nb_status nb_plan_from_record(const nb_record *rec, nb_plan *p)
{
    nb_status st;
    nb_plan_init(p);
    if (!nb_record_is(rec, "PLAN")) return nb_error_set(NB_ERR_DATA, "expected a PLAN record, got %s", rec->type);
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if ((st = get_field(rec, &fields[i], fields[i].key, p))) {
            nb_plan_free(p);
            return st;
        }
    p->seed_drawn = nb_hdr_has(rec, "SEED_DRAWN");
    if ((st = get_material(rec, p))) goto fail;
    if ((st = nb_stills_from_record(rec, &p->stills))) goto fail;
    char *shape = NULL;
    if ((st = nb_hdr_get_str(rec, "SHAPE", &shape))) goto fail;
    p->shape = nb_shape_from_name(shape);
    free(shape);
    if (p->shape < 0) {
        st = bad("SHAPE", "is not one of square, round, gauss, tophat");
        goto fail;
    }
    {
        size_t len;
        const char *v = nb_hdr_find(rec, "UNIT_CELL", &len);
        if (!v || sscanf(v, "%lf %lf %lf %lf %lf %lf", &p->unit_cell[0], &p->unit_cell[1], &p->unit_cell[2],
                         &p->unit_cell[3], &p->unit_cell[4], &p->unit_cell[5]) != 6) {
            st = bad("UNIT_CELL", "is missing or malformed");
            goto fail;
        }
        for (int k = 0; k < 6; k++)
            if (!isfinite(p->unit_cell[k])) {
                st = bad("UNIT_CELL", "holds a non-finite number");
                goto fail;
            }
        v = nb_hdr_find(rec, "RAN1_STATE", &len);
        char buf[1024];
        if (!v || len >= sizeof buf) {
            st = bad("RAN1_STATE", "is missing or malformed");
            goto fail;
        }
        memcpy(buf, v, len);
        buf[len] = '\0';
        char *q = buf, *end;
        p->rng.iy = strtoll(q, &end, 10);
        for (int i = 0; i < NB_RNG_NTAB && end != q; i++) {
            q = end;
            p->rng.iv[i] = strtoll(q, &end, 10);
        }
        if (end == q || *end) {
            st = bad("RAN1_STATE", "is malformed");
            goto fail;
        }
    }

    /* sanity: sizes and counts that the kernel will trust */
    if ((st = get_panels(rec, p))) goto fail;
    if (p->oversample < 1 || p->oversample > 1000) { st = bad("OVERSAMPLE", "must be 1..1000"); goto fail; }
    if (p->phisteps < 1) { st = bad("PHISTEPS", "must be >= 1"); goto fail; }
    if (p->nframes < 1 || p->nframes > 10000000) { st = bad("NFRAMES", "must be 1 .. 10000000"); goto fail; }
    if (p->mosaic_domains < 1) { st = bad("MOSAIC_DOMAINS", "must be >= 1"); goto fail; }
    if (p->nsources < 1) { st = bad("SOURCES", "must be >= 1"); goto fail; }

    const void *data;
    size_t count;
    if ((st = nb_record_get_array(rec, "sources", NB_F64, &data, &count))) goto fail;
    if (count != (size_t)p->nsources * 5) { st = bad("sources array", "does not match SOURCES"); goto fail; }
    if ((st = nb_calloc((void **)&p->sources, (size_t)p->nsources, sizeof *p->sources, "sources"))) goto fail;
    for (int i = 0; i < p->nsources; i++) {
        const double *s = (const double *)data + 5 * i;
        memcpy(p->sources[i].dir, s, 3 * sizeof(double));
        p->sources[i].weight = s[3];
        p->sources[i].lambda = s[4];
    }
    if ((st = nb_record_get_array(rec, "mosaic_umats", NB_F64, &data, &count))) goto fail;
    if (count != (size_t)p->mosaic_domains * 9) {
        st = bad("mosaic_umats array", "does not match MOSAIC_DOMAINS");
        goto fail;
    }
    if ((st = nb_calloc((void **)&p->mosaic_umats, count, sizeof(double), "mosaic matrices"))) goto fail;
    memcpy(p->mosaic_umats, data, count * sizeof(double));
    p->mosaic_umats_spread = p->mosaic_spread;
    if ((st = nb_frame_crystals_from_record(rec, p))) goto fail;
    if ((st = nb_frame_mosaic_from_record(rec, p))) goto fail;
    if ((st = nb_frame_ids_from_record(rec, p))) goto fail;
    if ((st = nb_frame_spectra_from_record(rec, p))) goto fail;
    return NB_OK;
fail:
    nb_plan_free(p);
    return st;
}

nb_status nb_panel_check_size(const nb_panel *q)
{
    /* the float image alone: refuse what cannot be addressed or held */
    double pixels = (double)q->fpixels * (double)q->spixels;
    if (q->fpixels <= 0 || q->spixels <= 0)
        return nb_error_set(NB_ERR_USAGE, "detector of %d x %d pixels is empty", q->fpixels, q->spixels);
    if (pixels > 2147483647.0 || q->fpixels > 1000000 || q->spixels > 1000000) {
        char b[64];
        nb_format_bytes(pixels * 4.0, b, sizeof b);
        return nb_error_set(NB_ERR_USAGE,
                            "detector of %d x %d pixels is too large (its float image alone would need %s)",
                            q->fpixels, q->spixels, b);
    }
    return NB_OK;
}

/* ---- panels ---------------------------------------------------------------- */

int nb_plan_npanels(const nb_plan *p) { return p->npanels; }

void nb_plan_panel_dims(const nb_plan *p, int i, int *fpixels, int *spixels, size_t *offset)
{
    size_t off = 0;
    for (int k = 0; k < i && k < p->npanels; k++) off += (size_t)p->panels[k].fpixels * (size_t)p->panels[k].spixels;
    const nb_panel *q = &p->panels[i < p->npanels ? i : p->npanels - 1];
    if (fpixels) *fpixels = q->fpixels;
    if (spixels) *spixels = q->spixels;
    if (offset) *offset = off;
}

size_t nb_plan_total_pixels(const nb_plan *p)
{
    size_t n = 0;
    for (int k = 0; k < p->npanels; k++) n += (size_t)p->panels[k].fpixels * (size_t)p->panels[k].spixels;
    return n;
}

static double dot3(const double a[3], const double b[3]) { return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]; }

void nb_plan_derive_detector(nb_plan *p)
{
    const nb_panel *q = &p->panels[0];
    p->detsize_f = q->fpixels * q->pixel_size;
    p->detsize_s = q->spixels * q->pixel_size;
    p->close_distance = dot3(q->pix0, q->odet);
    double ratio = dot3(p->beam, q->odet);
    /* a panel parallel to the beam is never hit by it: its "distance" is the
     * perpendicular one (only a curved detector uses it, and -panels refuses that) */
    p->distance = fabs(ratio) > 1e-12 ? p->close_distance / ratio : p->close_distance;
    p->Fclose = -dot3(q->pix0, q->fdet);
    p->Sclose = -dot3(q->pix0, q->sdet);
    double R[3];
    for (int k = 0; k < 3; k++) R[k] = p->distance * p->beam[k] - q->pix0[k];
    p->Fbeam = dot3(q->fdet, R), p->Sbeam = dot3(q->sdet, R);
    p->Xbeam = p->Fbeam, p->Ybeam = p->Sbeam;
    p->Xclose = p->Fclose, p->Yclose = p->Sclose;
    p->ORGX = p->Fclose / q->pixel_size + 0.5;
    p->ORGY = p->Sclose / q->pixel_size + 0.5;
    p->dials_origin[0] = 1000.0 * q->pix0[2];
    p->dials_origin[1] = 1000.0 * q->pix0[1];
    p->dials_origin[2] = -1000.0 * q->pix0[0];
    p->rotx = p->roty = p->rotz = p->twotheta = 0.0;
}

void nb_plan_frame_view(const nb_plan *series, long frame, nb_plan *view)
{
    *view = *series;
    view->phi0 = series->phi0 + (double)frame * series->osc;
    if (series->frame_crystals && frame >= 0 && frame < series->nframes) {
        nb_frame_crystal_apply(&series->frame_crystals[frame], view);
    } else if (series->stills.on) {
        nb_still_shot shot;
        nb_still_draw(series, frame, &shot);
        nb_still_apply(&shot, view);
    }
    if (series->frame_mosaic && frame >= 0 && frame < series->nframes)
        view->mosaic_spread = series->frame_mosaic[frame];
}

void nb_plan_panel_view(const nb_plan *p, int i, nb_plan *view)
{
    *view = *p;
    if (i < 0 || i >= p->npanels) i = 0;
    view->npanels = 1;
    view->panels = &p->panels[i];
    if (i > 0) nb_plan_derive_detector(view);
}
