/* nb_image_record.c - the IMAGE record: its header keys, written from and
 * parsed into an nb_image_info, and its pixels and counts arrays.
 *
 * This is the one place that knows the IMAGE record's key names (the table
 * below, in the order they are written) and checks a record that is read:
 * nb-sim, nb-noise, nb-math and nb-convert --import write IMAGE records
 * through it, nb-noise, nb-math and nb-convert read them through it.  docs/stream-format.md
 * (section 2, IMAGE) documents the keys.  The pixel payload is never copied
 * or touched here: the writers add their arrays where they want their lines,
 * and a record can be parsed before its payload has arrived (nb-convert's
 * files written while the image is read).
 */
#include "nb_image_record.h"

#include <limits.h>
#include <math.h>
#include <ctype.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "nb_util.h"

#define RECORD_TYPE "IMAGE"
#define PIXELS_ARRAY "pixels"
#define COUNTS_ARRAY "counts"
#define PANEL_PIXELS_KEY "PANEL_PIXELS" /* with PANELS > 1: "f0 s0 f1 s1 ...", panel after panel */
#define MAX_PANELS 4096
#define STILL_ROTATION_KEY "STILL_ROTATION" /* a still's orientation: nine numbers, row-major */
#define STILL_SPECTRUM_KEY "STILL_SPECTRUM" /* a still's spikes: their wavelengths, m */
#define NB_IMAGE_MAX_SPIKES 1000            /* nb_stills.h's NB_STILLS_MAX_SPIKES */

enum ftype { F_INT, F_LONG, F_I64, F_DBL, F_TEXT };

static void put_still_lists(const nb_image_info *im, nb_record *rec);
enum { FRAME_PART = NB_IMAGE_FRAME_KEYS, COUNT_PART = NB_IMAGE_COUNT_KEYS };
#define ALWAYS ((size_t)-1) /* `has` of a required key, or of a text key (present when not "") */

typedef struct field {
    const char *key;
    enum ftype type;
    int part;
    size_t off;    /* the value in nb_image_info */
    size_t has;    /* its flag in nb_image_info.has, or ALWAYS */
    size_t size;   /* F_TEXT: the field's size */
    int finite;    /* F_DBL: a non-finite value is refused */
} field;

#define OFF(m) offsetof(nb_image_info, m)
#define REQ(k, m) {k, F_INT, FRAME_PART, OFF(m), ALWAYS, 0, 0}
#define OPT(k, t, p, m) {k, t, p, OFF(m), OFF(has.m), 0, 0}
#define FIN(k, p, m) {k, F_DBL, p, OFF(m), OFF(has.m), 0, 1}
#define TXT(k, m) {k, F_TEXT, FRAME_PART, OFF(m), ALWAYS, sizeof(((nb_image_info *)0)->m), 0}

/* The IMAGE header keys, in the order they are written (docs/stream-format.md). */
static const field fields[] = {
    /* the frame */
    OPT("FRAME", F_LONG, FRAME_PART, frame),
    OPT("NFRAMES", F_LONG, FRAME_PART, nframes),
    OPT("PANEL", F_LONG, FRAME_PART, panel),
    REQ("FPIXELS", fpixels),
    REQ("SPIXELS", spixels),
    {"PANELS", F_INT, FRAME_PART, OFF(npanels), OFF(has.panels), 0, 0},
    TXT("UNITS", units),
    TXT("GRAD_OF", grad_of),
    TXT("PRECISION", precision),
    FIN("PHI_START", FRAME_PART, phi_start),
    FIN("PHI_RANGE", FRAME_PART, phi_range),
    /* a still's shot (STILL_ROTATION and STILL_SPECTRUM follow the table) */
    FIN("STILL_NA", FRAME_PART, still_Na),
    FIN("STILL_NB", FRAME_PART, still_Nb),
    FIN("STILL_NC", FRAME_PART, still_Nc),
    FIN("STILL_FLUENCE", FRAME_PART, still_fluence),
    /* how it was rendered */
    TXT("RENDERED_BY", rendered_by),
    OPT("RENDER_SECONDS", F_DBL, FRAME_PART, render_seconds),
    TXT("RENDER_PATH", render_path),
    OPT("KERNEL_SECONDS", F_DBL, FRAME_PART, kernel_seconds),
    /* statistics */
    OPT("MAX_I", F_DBL, FRAME_PART, max_I),
    OPT("MAX_I_X", F_DBL, FRAME_PART, max_I_x),
    OPT("MAX_I_Y", F_DBL, FRAME_PART, max_I_y),
    OPT("MEAN", F_DBL, FRAME_PART, mean),
    OPT("RMS", F_DBL, FRAME_PART, rms),
    OPT("RMSD", F_DBL, FRAME_PART, rmsd),
    OPT("SOLID_ANGLE", F_DBL, FRAME_PART, solid_angle),
    /* an imported image */
    TXT("IMPORTED_FROM", imported_from),
    /* arithmetic on the pixels */
    TXT("MATH", math),
    /* the counts */
    OPT("COUNTS_BITS", F_INT, COUNT_PART, counts_bits),
    FIN("COUNTS_ADC", COUNT_PART, counts_adc),
    FIN("COUNTS_GAIN", COUNT_PART, counts_gain),
    OPT("NOISE_SEED", F_I64, COUNT_PART, noise_seed),
    {"NOISE_RNG", F_TEXT, COUNT_PART, OFF(noise_rng), ALWAYS, sizeof(((nb_image_info *)0)->noise_rng), 0},
    OPT("NOISE_PHOTONS", F_DBL, COUNT_PART, noise_photons),
    OPT("NOISE_OVERLOADS", F_LONG, COUNT_PART, noise_overloads),
};
#define NFIELDS (sizeof fields / sizeof fields[0])

/* Unknown keys with these prefixes belong to the counts (replaced with them). */
static const char *count_prefixes[] = {"COUNTS_", "NOISE_"};
/* Header lines that describe arrays: never kept as unknown keys. */
#define ARRAY_PREFIX "ARRAY."

void nb_image_info_init(nb_image_info *im)
{
    memset(im, 0, sizeof *im);
    im->nframes = 1;
    im->npanels = 1;
    im->counts_bits = 16;
    im->counts_gain = 1.0;
}

void nb_image_info_free(nb_image_info *im)
{
    free(im->still_spectrum);
    free(im->extra);
    free(im->extra_counts);
    free(im->panel_pixels);
    nb_image_info_init(im);
}

void nb_image_record_init(nb_record *rec) { nb_record_init(rec, RECORD_TYPE); }

static nb_status bad(const char *key, const char *why)
{
    return nb_error_set(NB_ERR_DATA, RECORD_TYPE " record: %s %s", key, why);
}

static int field_present(const nb_image_info *im, const field *f)
{
    if (f->type == F_TEXT) return ((const char *)im + f->off)[0] != '\0';
    return f->has == ALWAYS || *(const int *)((const char *)im + f->has);
}

/* "KEY=VALUE\n" lines into the header */
static void put_lines(nb_record *rec, const char *lines)
{
    if (!lines) return;
    char *copy = nb_xstrdup(lines), *save = NULL;
    for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *eq = strchr(line, '=');
        if (!eq || eq == line) continue;
        *eq = '\0';
        nb_hdr_set(rec, line, eq + 1);
    }
    free(copy);
}

nb_status nb_image_put_header(const nb_image_info *im, nb_record *rec, unsigned parts)
{
    for (size_t i = 0; i < NFIELDS; i++) {
        const field *f = &fields[i];
        if (!(parts & (unsigned)f->part) || !field_present(im, f)) continue;
        const char *v = (const char *)im + f->off;
        switch (f->type) {
        case F_INT: nb_hdr_set_long(rec, f->key, *(const int *)v); break;
        case F_LONG: nb_hdr_set_long(rec, f->key, *(const long *)v); break;
        case F_I64: nb_hdr_setf(rec, f->key, "%lld", (long long)*(const int64_t *)v); break;
        case F_DBL: nb_hdr_set_double(rec, f->key, *(const double *)v); break;
        case F_TEXT:
            /* header values are single lines */
            if (strnlen(v, f->size) == f->size) return bad(f->key, "is too long");
            if (strchr(v, '\n')) return bad(f->key, "contains a newline");
            nb_hdr_set(rec, f->key, v);
            break;
        }
    }
    if (parts & FRAME_PART) put_still_lists(im, rec);
    if ((parts & FRAME_PART) && im->panel_pixels) {
        nb_strbuf sb;
        nb_strbuf_init(&sb);
        for (int i = 0; i < im->npanels; i++)
            nb_strbuf_printf(&sb, "%s%d %d", i ? " " : "", im->panel_pixels[2 * i], im->panel_pixels[2 * i + 1]);
        nb_hdr_set(rec, PANEL_PIXELS_KEY, sb.data);
        nb_strbuf_free(&sb);
    }
    if (parts & FRAME_PART) put_lines(rec, im->extra);
    if (parts & COUNT_PART) put_lines(rec, im->extra_counts);
    return NB_OK;
}

/* One optional key, when present, into its field. */
static nb_status get_field(const nb_record *rec, const field *f, nb_image_info *im)
{
    size_t len;
    const char *text = nb_hdr_find(rec, f->key, &len);
    if (!text) return NB_OK;
    char *v = (char *)im + f->off;
    nb_status st = NB_OK;
    switch (f->type) {
    case F_INT: st = nb_hdr_get_int(rec, f->key, (int *)v); break;
    case F_LONG: st = nb_hdr_get_long(rec, f->key, (long *)v); break;
    case F_I64: {
        long x = 0;
        st = nb_hdr_get_long(rec, f->key, &x);
        *(int64_t *)v = x;
        break;
    }
    case F_DBL:
        st = nb_hdr_get_double(rec, f->key, (double *)v);
        if (!st && f->finite && !isfinite(*(double *)v)) st = bad(f->key, "is not a finite number");
        break;
    case F_TEXT:
        if (len >= f->size) return bad(f->key, "is too long");
        memcpy(v, text, len);
        v[len] = '\0';
        return NB_OK;
    }
    if (!st && f->has != ALWAYS) *(int *)((char *)im + f->has) = 1;
    return st;
}

/* STILL_ROTATION and STILL_SPECTRUM: lists of numbers, round-trip exact */
static void put_still_lists(const nb_image_info *im, nb_record *rec)
{
    const double *v[2] = {im->still_rotation, im->still_spectrum};
    int n[2] = {im->has.still_rotation ? 9 : 0, im->still_spectrum ? im->still_spikes : 0};
    const char *keys[2] = {STILL_ROTATION_KEY, STILL_SPECTRUM_KEY};
    for (int j = 0; j < 2; j++) {
        if (!n[j]) continue;
        nb_strbuf sb;
        char b[32];
        nb_strbuf_init(&sb);
        for (int i = 0; i < n[j]; i++) {
            nb_format_double(v[j][i], b, sizeof b);
            nb_strbuf_printf(&sb, "%s%s", i ? " " : "", b);
        }
        nb_hdr_set(rec, keys[j], sb.data);
        nb_strbuf_free(&sb);
    }
}

/* A list of finite numbers of a key into out (at most max; malloc'ed when
 * *out is NULL), their count in *n. */
static nb_status get_list(const nb_record *rec, const char *key, double **out, int max, int *n)
{
    char *text = NULL, *q, *end;
    nb_status st = nb_hdr_get_str(rec, key, &text);
    if (st) return st;
    double *v = *out;
    if (!v && (st = nb_calloc((void **)&v, (size_t)max, sizeof *v, key))) {
        free(text);
        return st;
    }
    *out = v;
    *n = 0;
    for (q = text;; q = end) {
        double x = strtod(q, &end);
        if (end == q) break;
        if (*n == max || !isfinite(x)) st = bad(key, "holds too many numbers, or one not finite");
        if (st) break;
        v[(*n)++] = x;
    }
    while (!st && *q == ' ') q++;
    if (!st && *q) st = bad(key, "is not a list of numbers");
    free(text);
    return st;
}

/* STILL_ROTATION (nine numbers) and STILL_SPECTRUM, when present */
static nb_status get_still_lists(const nb_record *rec, nb_image_info *im)
{
    nb_status st;
    int n;
    if (nb_hdr_has(rec, STILL_ROTATION_KEY)) {
        double *r = im->still_rotation;
        if ((st = get_list(rec, STILL_ROTATION_KEY, &r, 9, &n))) return st;
        if (n != 9) return bad(STILL_ROTATION_KEY, "is not nine numbers");
        im->has.still_rotation = 1;
    }
    if (nb_hdr_has(rec, STILL_SPECTRUM_KEY))
        return get_list(rec, STILL_SPECTRUM_KEY, &im->still_spectrum, NB_IMAGE_MAX_SPIKES, &im->still_spikes);
    return NB_OK;
}

static int is_known(const char *key, size_t len)
{
    if (len == strlen(STILL_ROTATION_KEY) && !memcmp(key, STILL_ROTATION_KEY, len)) return 1;
    if (len == strlen(STILL_SPECTRUM_KEY) && !memcmp(key, STILL_SPECTRUM_KEY, len)) return 1;
    if (len >= strlen(ARRAY_PREFIX) && !strncmp(key, ARRAY_PREFIX, strlen(ARRAY_PREFIX))) return 1;
    if (len == strlen(PANEL_PIXELS_KEY) && !memcmp(key, PANEL_PIXELS_KEY, len)) return 1;
    for (size_t i = 0; i < NFIELDS; i++)
        if (strlen(fields[i].key) == len && !memcmp(key, fields[i].key, len)) return 1;
    return 0;
}

static int is_count_key(const char *key, size_t len)
{
    for (size_t i = 0; i < sizeof count_prefixes / sizeof count_prefixes[0]; i++) {
        size_t n = strlen(count_prefixes[i]);
        if (len >= n && !strncmp(key, count_prefixes[i], n)) return 1;
    }
    return 0;
}

/* The header's unknown keys into im->extra and im->extra_counts. */
static void keep_unknown(const nb_record *rec, nb_image_info *im)
{
    nb_strbuf part[2];
    nb_strbuf_init(&part[0]);
    nb_strbuf_init(&part[1]);
    for (const char *line = rec->header; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t n = end ? (size_t)(end - line) : strlen(line);
        const char *eq = memchr(line, '=', n);
        if (eq && eq > line && !is_known(line, (size_t)(eq - line))) {
            nb_strbuf *sb = &part[is_count_key(line, (size_t)(eq - line))];
            nb_strbuf_appendn(sb, line, n);
            nb_strbuf_append(sb, "\n");
        }
        line += n + (end != NULL);
    }
    im->extra = part[0].len ? nb_strbuf_take(&part[0]) : NULL;
    im->extra_counts = part[1].len ? nb_strbuf_take(&part[1]) : NULL;
    nb_strbuf_free(&part[0]);
    nb_strbuf_free(&part[1]);
}

/* PANELS and PANEL_PIXELS, when there are several panels: the layout into
 * im, and the pixels of all of them into *total (else left alone). */
static nb_status get_panels(const nb_record *rec, nb_image_info *im, long fp, long sp, size_t *total)
{
    nb_status st;
    int n = 1;
    if (nb_hdr_has(rec, "PANELS") && (st = nb_hdr_get_int(rec, "PANELS", &n))) return st;
    if (n < 1 || n > MAX_PANELS) return bad("PANELS", "must be 1 .. 4096");
    im->npanels = n;
    if (n == 1) return NB_OK;
    char *text = NULL;
    if ((st = nb_hdr_get_str(rec, PANEL_PIXELS_KEY, &text))) return st;
    if ((st = nb_calloc((void **)&im->panel_pixels, 2 * (size_t)n, sizeof(int), "the panel layout"))) {
        free(text);
        return st;
    }
    char *q = text, *end;
    size_t sum = 0;
    for (int i = 0; i < 2 * n && !st; i++, q = end) {
        long v = strtol(q, &end, 10);
        if (end == q || v <= 0 || v > 1000000) st = bad(PANEL_PIXELS_KEY, "is not PANELS pairs of pixel counts");
        im->panel_pixels[i] = (int)v;
        if (i % 2) sum += (size_t)im->panel_pixels[i - 1] * (size_t)v;
    }
    if (!st && *q) st = bad(PANEL_PIXELS_KEY, "has more values than PANELS pairs");
    if (!st && (im->panel_pixels[0] != fp || im->panel_pixels[1] != sp))
        st = bad(PANEL_PIXELS_KEY, "does not start with FPIXELS SPIXELS");
    free(text);
    *total = sum;
    return st;
}

/* The size keys and the arrays they describe. */
static nb_status get_arrays(const nb_record *rec, nb_image_info *im)
{
    long fp, sp;
    size_t n, want;
    nb_status st;
    if ((st = nb_hdr_get_long(rec, "FPIXELS", &fp)) || (st = nb_hdr_get_long(rec, "SPIXELS", &sp))) return st;
    if ((st = nb_record_array_offset(rec, PIXELS_ARRAY, NB_F32, &im->pixels_offset, &n))) return st;
    if (fp <= 0 || sp <= 0 || fp > INT_MAX || sp > INT_MAX)
        return nb_error_set(NB_ERR_DATA, RECORD_TYPE " record: FPIXELS x SPIXELS = %ld x %ld", fp, sp);
    want = (size_t)fp * (size_t)sp;
    if ((st = get_panels(rec, im, fp, sp, &want))) return st;
    if (n != want && im->npanels > 1)
        return nb_error_set(NB_ERR_DATA, RECORD_TYPE " record: %zu pixels but its %d panels have %zu", n,
                            im->npanels, want);
    if (n != want)
        return nb_error_set(NB_ERR_DATA, RECORD_TYPE " record: %zu pixels but FPIXELS x SPIXELS = %ld x %ld", n, fp,
                            sp);
    im->fpixels = (int)fp, im->spixels = (int)sp;
    im->npixels = n;
    if (nb_record_has_array(rec, COUNTS_ARRAY)) {
        if ((st = nb_record_array_offset(rec, COUNTS_ARRAY, NB_I32, &im->counts_offset, &n))) return st;
        if (n != im->npixels)
            return nb_error_set(NB_ERR_DATA,
                                RECORD_TYPE " record: counts array has the wrong size (%zu values for %d x %d pixels)",
                                n, im->fpixels, im->spixels);
        im->has_counts = 1;
    }
    return NB_OK;
}

/* What the values must be, beyond being well formed. */
static nb_status check_values(const nb_image_info *im)
{
    for (const char *c = im->grad_of; *c; c++)
        if (!isalnum((unsigned char)*c) && *c != '_') return bad("GRAD_OF", "is not a name (letters, digits, _)");
    if (im->grad_of[0] && im->has_counts) return bad("GRAD_OF", "marks a derivative, which has no counts");
    if (im->has.frame && im->frame < 0) return bad("FRAME", "must be >= 0");
    if (im->has.nframes && im->nframes < 1) return bad("NFRAMES", "must be >= 1");
    if (im->has.frame && im->has.nframes && im->frame >= im->nframes)
        return nb_error_set(NB_ERR_DATA, RECORD_TYPE " record: FRAME=%ld is not a frame of NFRAMES=%ld", im->frame,
                            im->nframes);
    if (im->has.panel && im->panel != 0) return bad("PANEL", "must be 0 (one panel, the whole detector)");
    if (im->has.counts_bits && im->counts_bits != 16 && im->counts_bits != 32)
        return bad("COUNTS_BITS", "must be 16 or 32");
    if (im->has.noise_overloads && im->noise_overloads < 0) return bad("NOISE_OVERLOADS", "must be >= 0");
    return NB_OK;
}

nb_status nb_image_from_record(const nb_record *rec, nb_image_info *im)
{
    nb_status st;
    nb_image_info_init(im);
    if (!nb_record_is(rec, RECORD_TYPE))
        return nb_error_set(NB_ERR_DATA, "expected an " RECORD_TYPE " record, got %s", rec->type);
    if ((st = get_arrays(rec, im))) goto fail;
    for (size_t i = 0; i < NFIELDS; i++) {
        if (fields[i].type != F_TEXT && fields[i].has == ALWAYS) continue; /* the sizes, above */
        if ((st = get_field(rec, &fields[i], im))) goto fail;
    }
    if ((st = get_still_lists(rec, im))) goto fail;
    if ((st = check_values(im))) goto fail;
    keep_unknown(rec, im);
    return NB_OK;
fail:
    nb_image_info_free(im);
    return st;
}

nb_status nb_image_check_plan(const nb_image_info *im, const nb_plan *plan)
{
    if (!plan) return nb_error_set(NB_ERR_DATA, "an " RECORD_TYPE " record came before any PLAN record");
    if (plan->panels[0].fpixels != im->fpixels || plan->panels[0].spixels != im->spixels)
        return nb_error_set(NB_ERR_DATA, RECORD_TYPE " record is %d x %d pixels but its plan says %d x %d",
                            im->fpixels, im->spixels, plan->panels[0].fpixels, plan->panels[0].spixels);
    if (im->npanels != nb_plan_npanels(plan))
        return nb_error_set(NB_ERR_DATA, RECORD_TYPE " record has %d panel%s but its plan has %d", im->npanels,
                            im->npanels == 1 ? "" : "s", nb_plan_npanels(plan));
    for (int i = 1; i < im->npanels; i++) {
        int f, s;
        nb_plan_panel_dims(plan, i, &f, &s, NULL);
        if (im->panel_pixels[2 * i] != f || im->panel_pixels[2 * i + 1] != s)
            return nb_error_set(NB_ERR_DATA,
                                RECORD_TYPE " record: panel %d is %d x %d pixels but its plan says %d x %d", i,
                                im->panel_pixels[2 * i], im->panel_pixels[2 * i + 1], f, s);
    }
    return NB_OK;
}

nb_status nb_image_set_panels(nb_image_info *im, const nb_plan *plan)
{
    int n = nb_plan_npanels(plan);
    free(im->panel_pixels);
    im->panel_pixels = NULL;
    im->npanels = n, im->has.panels = n > 1;
    if (n == 1) return NB_OK;
    nb_status st = nb_calloc((void **)&im->panel_pixels, 2 * (size_t)n, sizeof(int), "the panel layout");
    for (int i = 0; i < n && !st; i++)
        nb_plan_panel_dims(plan, i, &im->panel_pixels[2 * i], &im->panel_pixels[2 * i + 1], NULL);
    return st;
}

int nb_image_is_grad(const nb_image_info *im) { return im->grad_of[0] != '\0'; }

void nb_image_drop_counts(nb_image_info *im)
{
    for (size_t i = 0; i < NFIELDS; i++)
        if (fields[i].part == COUNT_PART && fields[i].has != ALWAYS) *(int *)((char *)im + fields[i].has) = 0;
    im->counts_bits = 16;
    im->counts_adc = 0.0;
    im->counts_gain = 1.0;
    im->noise_seed = 0;
    im->noise_rng[0] = '\0';
    im->noise_photons = 0.0;
    im->noise_overloads = 0;
    im->has_counts = 0;
    im->counts_offset = 0;
    free(im->extra_counts);
    im->extra_counts = NULL;
}

nb_status nb_image_add_pixels(nb_record *rec, size_t n, const void *data, float **stored)
{
    return nb_record_add_array(rec, PIXELS_ARRAY, NB_F32, n, data, (void **)stored);
}

nb_status nb_image_add_counts(nb_record *rec, size_t n, const void *data, int32_t **stored)
{
    return nb_record_add_array(rec, COUNTS_ARRAY, NB_I32, n, data, (void **)stored);
}

static nb_status get_image_array(const nb_record *rec, const nb_image_info *im, const char *name, nb_dtype type,
                                 const void **data, size_t *n)
{
    size_t count;
    nb_status st = nb_record_get_array(rec, name, type, data, &count);
    if (st) return st;
    if (im && count != im->npixels)
        return nb_error_set(NB_ERR_DATA, RECORD_TYPE " record: %s array has %zu values but FPIXELS x SPIXELS is %zu",
                            name, count, im->npixels);
    if (n) *n = count;
    return NB_OK;
}

nb_status nb_image_pixels(const nb_record *rec, const nb_image_info *im, const float **px, size_t *n)
{
    return get_image_array(rec, im, PIXELS_ARRAY, NB_F32, (const void **)px, n);
}

nb_status nb_image_counts(const nb_record *rec, const nb_image_info *im, const int32_t **counts, size_t *n)
{
    return get_image_array(rec, im, COUNTS_ARRAY, NB_I32, (const void **)counts, n);
}

nb_status nb_image_none(const char *input)
{
    return nb_error_set(NB_ERR_DATA, "%s: the stream holds no " RECORD_TYPE " record (run nb-sim first)", input);
}
