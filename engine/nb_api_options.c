/* nb_api_options.c - nb.h's named options (nb_options): settings that later
 * versions extend by adding names, never by changing a structure a program
 * was compiled with.  One table says each name's use, type, range and
 * default; the setters check a value against it, and the API's functions read
 * the options back as the settings they stand for (nb_api.h). */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nb_api.h"
#include "nb_util.h"

typedef enum ptype { P_INT, P_DOUBLE, P_CHOICE } ptype;

typedef struct param {
    const char *name;
    nb_options_kind kind;
    ptype type;
    long long ilo, ihi;          /* P_INT: the range, inclusive */
    int positive;                /* P_DOUBLE: > 0 (else >= 0) */
    int any_sign;                /* P_DOUBLE: any finite number */
    const char *const *choices;  /* P_CHOICE: the names, NULL-ended; a name's value is its index */
    long long idef;              /* P_INT, P_CHOICE: the default */
    double ddef;                 /* P_DOUBLE: the default */
    int only16_32;               /* "bits": 16 or 32 */
} param;

enum {
    R_DEVICE, R_PRECISION, R_THREADS,
    N_SEED, N_CALIB_SEED, N_ADC, N_GAIN, N_SCALE, N_FLUENCE, N_FLICKER, N_CALIBRATION, N_READOUT,
    N_PSF, N_PSF_FWHM, N_PSF_RADIUS, N_BITS, N_RNG, N_PIXEL_SIZE,
    NPARAMS
};

static const char *const devices[] = {"cpu", "cuda", "auto", NULL};
static const char *const precisions[] = {"plan", "fast", "double", NULL};
static const char *const psfs[] = {"none", "gauss", "fiber", NULL};
static const char *const rngs[] = {"reference", "philox", NULL};

_Static_assert(NB_DEVICE_CUDA == 1 && NB_DEVICE_AUTO == 2 && NB_PRECISION_DOUBLE == 2, "the choices' order");
_Static_assert(NB_PSF_GAUSS == 1 && NB_PSF_FIBER == 2 && NB_NOISE_RNG_PHILOX == 1, "the choices' order");

#define R NB_OPTIONS_RENDER
#define N NB_OPTIONS_NOISE
/* the seeds: nb-noise's -seed, any long but the one that cannot be negated */
#define SEEDS -LLONG_MAX, LLONG_MAX
static const param params[NPARAMS] = {
    [R_DEVICE] = {"device", R, P_CHOICE, .choices = devices, .idef = NB_DEVICE_CPU},
    [R_PRECISION] = {"precision", R, P_CHOICE, .choices = precisions, .idef = NB_PRECISION_PLAN},
    [R_THREADS] = {"threads", R, P_INT, 0, INT_MAX},
    [N_SEED] = {"seed", N, P_INT, SEEDS},
    [N_CALIB_SEED] = {"calib_seed", N, P_INT, SEEDS},
    [N_ADC] = {"adc", N, P_DOUBLE, .any_sign = 1, .ddef = 40.0},
    [N_GAIN] = {"gain", N, P_DOUBLE, .ddef = 1.0},
    [N_SCALE] = {"scale", N, P_DOUBLE, .ddef = 1.0},
    [N_FLUENCE] = {"fluence", N, P_DOUBLE, .positive = 1, .ddef = 0.0},
    [N_FLICKER] = {"flicker", N, P_DOUBLE},
    [N_CALIBRATION] = {"calibration", N, P_DOUBLE},
    [N_READOUT] = {"readout", N, P_DOUBLE},
    [N_PSF] = {"psf", N, P_CHOICE, .choices = psfs, .idef = NB_PSF_NONE},
    [N_PSF_FWHM] = {"psf_fwhm", N, P_DOUBLE, .ddef = 46.0},
    [N_PSF_RADIUS] = {"psf_radius", N, P_INT, 0, 100000},
    [N_BITS] = {"bits", N, P_INT, 16, 32, .idef = 16, .only16_32 = 1},
    [N_RNG] = {"rng", N, P_CHOICE, .choices = rngs, .idef = NB_NOISE_RNG_REFERENCE},
    [N_PIXEL_SIZE] = {"pixel_size", N, P_DOUBLE, .positive = 1, .ddef = 0.1},
};
#undef R
#undef N
#undef SEEDS

struct nb_options {
    nb_options_kind kind;
    struct {
        long long i; /* P_INT, P_CHOICE */
        double d;    /* P_DOUBLE */
        int set;     /* given, not the default */
    } v[NPARAMS];
};

static const char *kind_name(nb_options_kind kind)
{
    return kind == NB_OPTIONS_RENDER ? "render" : "noise";
}

/* Every parameter at its default (those of other kinds too: never read) */
static void defaults(nb_options *o, nb_options_kind kind)
{
    memset(o, 0, sizeof *o);
    o->kind = kind;
    for (int i = 0; i < NPARAMS; i++) o->v[i].i = params[i].idef, o->v[i].d = params[i].ddef;
}

nb_options *nb_options_new(nb_options_kind kind)
{
    if (kind != NB_OPTIONS_RENDER && kind != NB_OPTIONS_NOISE) {
        nb_error_set(NB_ERR_USAGE, "nb_options_new: no kind %d (NB_OPTIONS_RENDER or NB_OPTIONS_NOISE)", (int)kind);
        return NULL;
    }
    nb_options *o = NULL;
    if (nb_calloc((void **)&o, 1, sizeof *o, "the options")) return NULL;
    defaults(o, kind);
    return o;
}

void nb_options_free(nb_options *o)
{
    free(o);
}

/* The parameter `name` of o's kind; a usage error listing that kind's names
 * when there is none. */
static nb_status find(const nb_options *o, const char *who, const char *name, int *index)
{
    if (!o) return nb_error_set(NB_ERR_USAGE, "%s: no options (nb_options_new makes them)", who);
    for (int i = 0; name && i < NPARAMS; i++)
        if (params[i].kind == o->kind && !strcmp(params[i].name, name)) {
            *index = i;
            return NB_OK;
        }
    char names[512] = "";
    for (int i = 0; i < NPARAMS; i++)
        if (params[i].kind == o->kind) {
            if (names[0]) strcat(names, ", ");
            strcat(names, params[i].name);
        }
    return nb_error_set(NB_ERR_USAGE, "%s: no %s option '%s' (this library's: %s)", who, kind_name(o->kind),
                        name ? name : "(null)", names);
}

/* The choices of a parameter, "a, b or c", for a message. */
static void choice_list(const param *p, char *out, size_t size)
{
    out[0] = '\0';
    for (int c = 0; p->choices[c]; c++) {
        size_t n = strlen(out);
        snprintf(out + n, size - n, "%s%s", c == 0 ? "" : p->choices[c + 1] ? ", " : " or ", p->choices[c]);
    }
}

static nb_status set_int_checked(nb_options *o, int i, const char *who, long long value)
{
    const param *p = &params[i];
    if (p->type == P_CHOICE) {
        int n = 0;
        while (p->choices[n]) n++;
        if (value < 0 || value >= n) {
            char list[128];
            choice_list(p, list, sizeof list);
            return nb_error_set(NB_ERR_USAGE, "%s: %s %lld is not one of 0..%d (%s)", who, p->name, value, n - 1,
                                list);
        }
    } else if (value < p->ilo || value > p->ihi || (p->only16_32 && value != 16 && value != 32)) {
        if (p->only16_32) return nb_error_set(NB_ERR_USAGE, "%s: %s is 16 or 32, not %lld", who, p->name, value);
        return nb_error_set(NB_ERR_USAGE, "%s: %s %lld is outside %lld..%lld", who, p->name, value, p->ilo, p->ihi);
    }
    o->v[i].i = value;
    o->v[i].set = 1;
    return NB_OK;
}

static nb_status set_double_checked(nb_options *o, int i, const char *who, double value)
{
    const param *p = &params[i];
    if (!isfinite(value) || (!p->any_sign && (value < 0 || (p->positive && value == 0)))) {
        if (p->any_sign) return nb_error_set(NB_ERR_USAGE, "%s: %s must be finite, not %g", who, p->name, value);
        return nb_error_set(NB_ERR_USAGE, "%s: %s must be a finite number %s 0, not %g", who, p->name,
                            p->positive ? ">" : ">=", value);
    }
    o->v[i].d = value;
    o->v[i].set = 1;
    return NB_OK;
}

int nb_options_set_int(nb_options *o, const char *name, long long value)
{
    static const char who[] = "nb_options_set_int";
    int i = 0;
    nb_status st = find(o, who, name, &i);
    if (st) return nb_api_result(st);
    if (params[i].type == P_DOUBLE) return nb_api_result(set_double_checked(o, i, who, (double)value));
    return nb_api_result(set_int_checked(o, i, who, value));
}

int nb_options_set_double(nb_options *o, const char *name, double value)
{
    static const char who[] = "nb_options_set_double";
    int i = 0;
    nb_status st = find(o, who, name, &i);
    if (st) return nb_api_result(st);
    if (params[i].type != P_DOUBLE)
        return nb_error_set(NB_ERR_USAGE, "%s: %s is %s: nb_options_set_%s", who, name,
                            params[i].type == P_INT ? "an integer" : "a choice",
                            params[i].type == P_INT ? "int" : "string");
    return nb_api_result(set_double_checked(o, i, who, value));
}

int nb_options_set_string(nb_options *o, const char *name, const char *value)
{
    static const char who[] = "nb_options_set_string";
    int i = 0;
    nb_status st = find(o, who, name, &i);
    if (st) return nb_api_result(st);
    const param *p = &params[i];
    if (!value) return nb_error_set(NB_ERR_USAGE, "%s: %s: no value", who, name);
    if (p->type == P_CHOICE) {
        for (int c = 0; p->choices[c]; c++)
            if (!strcmp(p->choices[c], value)) return nb_api_result(set_int_checked(o, i, who, c));
        char list[128];
        choice_list(p, list, sizeof list);
        return nb_error_set(NB_ERR_USAGE, "%s: %s is %s, not '%s'", who, name, list, value);
    }
    char *end = NULL;
    errno = 0;
    if (p->type == P_INT) {
        long long n = strtoll(value, &end, 10);
        if (end == value || *end || errno)
            return nb_error_set(NB_ERR_USAGE, "%s: %s is an integer, not '%s'", who, name, value);
        return nb_api_result(set_int_checked(o, i, who, n));
    }
    double x = strtod(value, &end);
    if (end == value || *end || errno)
        return nb_error_set(NB_ERR_USAGE, "%s: %s is a number, not '%s'", who, name, value);
    return nb_api_result(set_double_checked(o, i, who, x));
}

/* Options of the kind a function takes. */
static nb_status check_kind(const nb_options *o, nb_options_kind kind, const char *who)
{
    if (o && o->kind != kind)
        return nb_error_set(NB_ERR_USAGE, "%s: these are %s options, not %s ones (nb_options_new(%s))", who,
                            kind_name(o->kind), kind_name(kind),
                            kind == NB_OPTIONS_RENDER ? "NB_OPTIONS_RENDER" : "NB_OPTIONS_NOISE");
    return NB_OK;
}

nb_status nb_api_render_config(const nb_options *o, const char *who, nb_render_config *c)
{
    nb_render_config_init(c);
    nb_status st = check_kind(o, NB_OPTIONS_RENDER, who);
    if (st || !o) return st;
    c->device = (nb_device_choice)o->v[R_DEVICE].i;
    c->precision = (nb_precision_choice)o->v[R_PRECISION].i;
    c->threads = (int)o->v[R_THREADS].i;
    return NB_OK;
}

nb_status nb_api_noise_settings(const nb_options *o, const char *who, nb_api_noise *n)
{
    nb_status st = check_kind(o, NB_OPTIONS_NOISE, who);
    if (st) return st;
    nb_options none;
    if (!o) {
        defaults(&none, NB_OPTIONS_NOISE);
        o = &none;
    }
    memset(n, 0, sizeof *n);
    nb_noise_defaults(&n->p);
    /* seeds as nb-noise's -seed and -calib_seed store them (negated); the
     * calibration seed's default is noisify's, as nb_noise_defaults has it */
    n->have_seed = o->v[N_SEED].set;
    n->seed = -(int64_t)o->v[N_SEED].i;
    if (o->v[N_CALIB_SEED].set) n->p.calib_seed = -(int64_t)o->v[N_CALIB_SEED].i;
    n->have_adc = o->v[N_ADC].set;
    n->p.adc = o->v[N_ADC].d;
    n->p.gain = o->v[N_GAIN].d;
    n->p.photon_scale = o->v[N_SCALE].d;
    n->have_fluence = o->v[N_FLUENCE].set;
    n->fluence = o->v[N_FLUENCE].d;
    n->p.flicker = o->v[N_FLICKER].d;
    n->p.calibration = o->v[N_CALIBRATION].d;
    n->p.readout = o->v[N_READOUT].d;
    n->p.psf = (int)o->v[N_PSF].i;
    n->psf_fwhm_um = o->v[N_PSF_FWHM].d;
    n->p.psf_radius = (int)o->v[N_PSF_RADIUS].i;
    n->p.bits = (int)o->v[N_BITS].i;
    n->p.rng = (int)o->v[N_RNG].i;
    n->have_pixel_size = o->v[N_PIXEL_SIZE].set;
    n->pixel_size_mm = o->v[N_PIXEL_SIZE].d;
    return NB_OK;
}
