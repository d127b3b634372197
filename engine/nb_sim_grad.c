/* nb-sim --grad: the derivatives of a rendered image with respect to
 * nanoBragg's flags (nb_sim_grad.h says how: the plan's part by resolving
 * its command line again around the flag's value, the pixel's part exact in
 * dual numbers). */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "nb_args.h"
#include "nb_geometry.h"
#include "nb_options.h"
#include "nb_sim_fast.h"
#include "nb_sim_grad.h"

#define RTD (180.0 * M_1_PI)

/* ---- the names ------------------------------------------------------------- */

/* The flag's values at the plan (all of them: -cell has six), or an error
 * saying why the name does not apply. */
typedef nb_status (*base_fn)(const nb_grad_param *p, const nb_request *rq, const nb_plan *plan, double vals[6]);

struct nb_grad_param {
    const char *name, *flag, *unit;
    int nvals, index; /* the flag's value count; which value is this name */
    double scale;     /* the step is `rel` of max(|value|, scale) */
    double rel;
    base_fn base;     /* NULL: a one-value flag read by base_field from ... */
    long rq_field;    /* ... this double of nb_request (-1: none; NaN: not given) */
    long plan_field;  /* ... or else this double of nb_plan (-1: none) */
    double factor;    /* the field's unit (SI, radians) to the flag's */
};

#define RQ(f) (long)offsetof(nb_request, f)
#define PL(f) (long)offsetof(nb_plan, f)

static double double_at(const void *base, long off) { return *(const double *)((const char *)base + off); }

/* A one-value flag's value: the request's field as given, else the plan's. */
static nb_status base_field(const nb_grad_param *p, const nb_request *rq, const nb_plan *plan, double v[6])
{
    double given = p->rq_field >= 0 ? double_at(rq, p->rq_field) : NAN;
    v[0] = (isnan(given) && p->plan_field >= 0 ? double_at(plan, p->plan_field) : given) * p->factor;
    return NB_OK;
}

static nb_status base_cell(const nb_grad_param *p, const nb_request *rq, const nb_plan *plan, double v[6])
{
    (void)plan;
    if (rq->expt)
        return nb_error_set(NB_ERR_USAGE, "--grad %s: the crystals come from -expt's experiment list: its cell is no "
                                          "flag", p->name);
    if (rq->matfile || !rq->user_cell)
        return nb_error_set(NB_ERR_USAGE, "--grad %s: the crystal is given by -mat, not -cell: its cell is no flag",
                            p->name);
    for (int i = 0; i < 6; i++) v[i] = i < 3 ? rq->cell[i] : rq->cell[i] * RTD;
    return NB_OK;
}

static nb_status base_misset(const nb_grad_param *p, const nb_request *rq, const nb_plan *plan, double v[6])
{
    (void)plan;
    if (rq->expt)
        return nb_error_set(NB_ERR_USAGE, "--grad %s: the crystals come from -expt's experiment list: their "
                                          "orientation is no flag", p->name);
    if (rq->matfile)
        return nb_error_set(NB_ERR_USAGE, "--grad %s: the crystal's orientation is given by -mat, not -misset",
                            p->name);
    if (rq->misset_mode < 0)
        return nb_error_set(NB_ERR_USAGE,
                            "--grad %s: the misset is random (-misset random); give its angles with -misset X Y Z "
                            "to differentiate them", p->name);
    for (int i = 0; i < 3; i++) v[i] = rq->misset_mode ? rq->misset[i] * RTD : 0.0;
    return NB_OK;
}

static nb_status base_mosaic(const nb_grad_param *p, const nb_request *rq, const nb_plan *plan, double v[6])
{
    (void)rq;
    if (!(plan->mosaic_spread > 0.0))
        return nb_error_set(NB_ERR_USAGE, "--grad %s: the plan has no mosaic spread (-mosaic): no domains to move",
                            p->name);
    v[0] = plan->mosaic_spread * RTD;
    return NB_OK;
}

/* The values of p's flag at the plan. */
static nb_status values_at_plan(const nb_grad_param *p, const nb_request *rq, const nb_plan *plan, double v[6])
{
    return (p->base ? p->base : base_field)(p, rq, plan, v);
}

/* a one-value flag: name, flag, unit, step scale, the request's and the plan's field, factor */
#define ONE(name, flag, unit, scale, rq, plan, factor) {name, flag, unit, 1, 0, scale, 1e-4, NULL, rq, plan, factor}
#define CELL(name, unit, i) {name, "-cell", unit, 6, i, 1.0, 1e-4, base_cell, -1, -1, 1.0}
#define MISSET(name, i) {name, "-misset", "degree", 3, i, 1.0, 1e-4, base_misset, -1, -1, 1.0}

static const nb_grad_param params[] = {
    ONE("distance", "-distance", "mm", 1.0, RQ(distance), -1, 1e3),
    ONE("Xbeam", "-Xbeam", "mm", 1.0, RQ(Xbeam), PL(Xbeam), 1e3),
    ONE("Ybeam", "-Ybeam", "mm", 1.0, RQ(Ybeam), PL(Ybeam), 1e3),
    ONE("detector_rotx", "-detector_rotx", "degree", 1.0, RQ(rotx), -1, RTD),
    ONE("detector_roty", "-detector_roty", "degree", 1.0, RQ(roty), -1, RTD),
    ONE("detector_rotz", "-detector_rotz", "degree", 1.0, RQ(rotz), -1, RTD),
    ONE("twotheta", "-twotheta", "degree", 1.0, RQ(twotheta), -1, RTD),
    CELL("cell_a", "Angstrom", 0),
    CELL("cell_b", "Angstrom", 1),
    CELL("cell_c", "Angstrom", 2),
    CELL("cell_alpha", "degree", 3),
    CELL("cell_beta", "degree", 4),
    CELL("cell_gamma", "degree", 5),
    MISSET("misset_x", 0),
    MISSET("misset_y", 1),
    MISSET("misset_z", 2),
    ONE("Na", "-Na", "cell", 1.0, -1, PL(Na), 1.0),
    ONE("Nb", "-Nb", "cell", 1.0, -1, PL(Nb), 1.0),
    ONE("Nc", "-Nc", "cell", 1.0, -1, PL(Nc), 1.0),
    ONE("lambda", "-lambda", "Angstrom", 0.1, -1, PL(lambda0), 1e10),
    /* the reference draws the domains' angles in single precision: a step of
     * 1e-4 would be a few float roundings */
    {"mosaic", "-mosaic", "degree", 1, 0, 0.01, 1e-2, base_mosaic, -1, -1, 1.0},
    ONE("fluence", "-fluence", "(photons/m^2)", 1.0, -1, PL(fluence), 1.0),
};
#define NPARAMS ((int)(sizeof params / sizeof params[0]))
_Static_assert(sizeof params / sizeof params[0] <= NB_GRAD_MAX_NAMES, "a list of every name fits NB_GRAD_MAX_NAMES");

const nb_grad_param *nb_grad_param_find(const char *name)
{
    for (int i = 0; i < NPARAMS; i++)
        if (!strcmp(params[i].name, name)) return &params[i];
    return NULL;
}

const char *nb_grad_param_name(const nb_grad_param *p) { return p->name; }
const char *nb_grad_param_unit(const nb_grad_param *p) { return p->unit; }

const char *nb_grad_param_names(void)
{
    static char names[512];
    if (!names[0])
        for (int i = 0; i < NPARAMS; i++) {
            if (i) strcat(names, ",");
            strcat(names, params[i].name);
        }
    return names;
}

nb_status nb_grad_list_parse(const char *list, nb_grad_list *out)
{
    memset(out, 0, sizeof *out);
    nb_status st = nb_calloc((void **)&out->param, NPARAMS, sizeof *out->param, "--grad names");
    if (st) return st;
    const char *p = list;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char name[64];
        if (len == 0 || len >= sizeof name) {
            st = nb_error_set(NB_ERR_USAGE, "option --grad: expected names separated by commas, got '%s'", list);
            break;
        }
        memcpy(name, p, len);
        name[len] = 0;
        const nb_grad_param *g = nb_grad_param_find(name);
        if (!g) {
            st = nb_error_set(NB_ERR_USAGE, "option --grad: unknown name '%s' (known: %s)", name,
                              nb_grad_param_names());
            break;
        }
        for (int i = 0; i < out->n && !st; i++)
            if (out->param[i] == g) st = nb_error_set(NB_ERR_USAGE, "option --grad: '%s' is named twice", name);
        if (st) break;
        out->param[out->n++] = g;
        if (!comma) break;
        p = comma + 1;
    }
    if (st) nb_grad_list_free(out);
    return st;
}

void nb_grad_list_free(nb_grad_list *l)
{
    free(l->param);
    memset(l, 0, sizeof *l);
}

/* ---- the plans around the plan --------------------------------------------- */

/* nb-geom's own options in a COMMAND (-o FILE, -q, -v, --threads N): read by
 * the standard options' own rows, their values dropped */
static int geom_option(void *ctx, int argc, char **argv, int *i, nb_status *st)
{
    (void)ctx;
    nb_std_opts ignored;
    memset(&ignored, 0, sizeof ignored);
    return nb_std_setting(&ignored, argc, argv, i, st);
}

/* The readers of the files a COMMAND names (-img, -mask headers; -panels'
 * detector file): the engine reads no file format, its caller hands them
 * over (nb_grad_set_readers); without them such a command is refused by
 * the resolution as it would be by a library without readers. */
static nb_args_hooks geom_hooks = {geom_option, NULL, NULL, NULL, NULL};

void nb_grad_set_readers(nb_status (*load_header)(nb_request *rq, const char *path, nb_header_role role),
                         nb_status (*load_panels)(const char *path, nb_detector_file *out))
{
    geom_hooks.load_header = load_header;
    geom_hooks.load_panels = load_panels;
}

void nb_grad_set_expt_reader(nb_status (*load_experiments)(const char *path, nb_experiment_list *out))
{
    geom_hooks.load_experiments = load_experiments;
}

/* The request of words argv[1 .. argc-1] (argv[0]: the program), resolved
 * into *plan (out_rq: the request, kept, or NULL).  Quiet: nb-geom said
 * its warnings when it made the plan. */
static nb_status resolve_words(int argc, char **argv, nb_request *out_rq, nb_plan *plan)
{
    for (int i = 1; i < argc; i++) {
        const nb_flag *f = nb_flag_lookup(argv[i]);
        int header = f && (f->id == FL_IMG || f->id == FL_MASK), panels = f && f->id == FL_PANELS;
        int expt = f && f->id == FL_EXPT;
        if ((header && !geom_hooks.load_header) || (panels && !geom_hooks.load_panels) ||
            (expt && !geom_hooks.load_experiments))
            return nb_error_set(NB_ERR_UNSUPPORTED,
                                "the plan's command reads a file (%s), and this program gave the engine no reader "
                                "for it (nb_grad_set_readers)",
                                argv[i]);
    }
    nb_request rq;
    nb_strbuf log;
    nb_request_defaults(&rq);
    nb_strbuf_init(&log);
    int verbosity = nb_verbosity();
    nb_set_verbosity(-1);
    nb_status st = nb_request_apply_args(&rq, argc - 1, argv + 1, &geom_hooks);
    if (!st && plan) st = nb_resolve(&rq, plan, &log);
    nb_set_verbosity(verbosity);
    nb_strbuf_free(&log);
    if (out_rq && !st) *out_rq = rq;
    else nb_request_free(&rq);
    return st;
}

/* One flag and its values, to append to a command. */
typedef struct flag_values {
    const nb_grad_param *p; /* its flag and value count */
    double vals[6];
} flag_values;

/* Is word i of the command one that appending words would change: a
 * -misset_seed (and its value) among the last three words, which the
 * reference reads as a seed only there (followed by two more words it also
 * sets a misset), or a -curved_det as the last word (ignored there)?  The
 * plan's seeds are appended anyway. */
static int quirk_word(int argc, char **argv, int i)
{
    if (!strcmp(argv[i], "-misset_seed") && i + 3 >= argc) return 2;
    if (!strcmp(argv[i], "-curved_det") && i + 1 == argc) return 1;
    return 0;
}

/* The words of the plan's command with each `flag vals...` of fv, the plan's
 * pivot and its seeds appended: every other flag as the plan has it
 * (-misset_seed at the very end). */
static char **words_with(int argc, char **argv, const nb_plan *plan, const flag_values *fv, int nfv, int *n_out)
{
    char **w = calloc((size_t)argc + 7 * (size_t)nfv + 12, sizeof *w);
    if (!w) return NULL;
    int n = 0;
    for (int i = 0; i < argc; i++) {
        int skip = i > 0 ? quirk_word(argc, argv, i) : 0;
        if (skip) i += skip - 1;
        else w[n++] = nb_xstrdup(argv[i]);
    }
    char num[64];
    for (int f = 0; f < nfv; f++) {
        w[n++] = nb_xstrdup(fv[f].p->flag);
        for (int i = 0; i < fv[f].p->nvals; i++) {
            snprintf(num, sizeof num, "%.17g", fv[f].vals[i]);
            w[n++] = nb_xstrdup(num);
        }
    }
    /* the pivot as resolved: -Xbeam, -twotheta ... set one of their own (a
     * detector from -panels has none to keep) */
    int panels = 0;
    for (int i = 1; i < argc; i++) panels |= !strcmp(argv[i], "-panels") || !strcmp(argv[i], "-expt");
    if (plan->pivot[0] && !panels) {
        w[n++] = nb_xstrdup("-pivot");
        w[n++] = nb_xstrdup(plan->pivot);
    }
    const char *seed_flags[3] = {"-seed", "-mosaic_seed", "-misset_seed"};
    const int64_t seeds[3] = {plan->seed, plan->mosaic_seed, plan->misset_seed};
    for (int i = 0; i < 3; i++) {
        w[n++] = nb_xstrdup(seed_flags[i]);
        snprintf(num, sizeof num, "%lld", (long long)-seeds[i]);
        w[n++] = nb_xstrdup(num);
    }
    *n_out = n;
    return w;
}

/* The plan's command with the flags of fv appended, resolved (its COMMAND
 * those words). */
static nb_status plan_with(int argc, char **argv, const nb_plan *plan, const flag_values *fv, int nfv, nb_plan *out)
{
    int n = 0;
    char **w = words_with(argc, argv, plan, fv, nfv, &n);
    if (!w) return nb_error_set(NB_ERR_NOMEM, "--grad: out of memory");
    nb_plan_init(out);
    nb_status st = resolve_words(n, w, NULL, out);
    if (!st) {
        free(out->command_line);
        out->command_line = nb_join_args(n, w);
    }
    nb_free_args(n, w);
    return st;
}

/* The plan's command with p's flag at its value + delta, resolved. */
static nb_status moved_plan(const nb_grad_param *p, int argc, char **argv, const nb_plan *plan, const double vals[6],
                            double delta, nb_plan *out)
{
    flag_values fv = {p, {0, 0, 0, 0, 0, 0}};
    memcpy(fv.vals, vals, sizeof fv.vals);
    fv.vals[p->index] += delta;
    nb_status st = plan_with(argc, argv, plan, &fv, 1, out);
    if (st) return nb_error_prefix(st, "--grad %s: nb-geom ... %s %.6g", p->name, p->flag, fv.vals[p->index]);
    return NB_OK;
}

/* The five plans of one name. */
static nb_status name_plans(const nb_grad_param *p, int argc, char **argv, const nb_request *rq, const nb_plan *plan,
                            double *step, nb_plan out[NB_GRAD_STENCIL])
{
    double vals[6] = {0, 0, 0, 0, 0, 0};
    nb_status st = values_at_plan(p, rq, plan, vals);
    if (st) return st;
    const double h = p->rel * fmax(fabs(vals[p->index]), p->scale);
    const int offsets[NB_GRAD_STENCIL] = {0, -2, -1, 1, 2};
    *step = h;
    for (int j = 0; j < NB_GRAD_STENCIL; j++)
        if ((st = moved_plan(p, argc, argv, plan, vals, offsets[j] * h, &out[j]))) {
            for (int i = 0; i < j; i++) nb_plan_free(&out[i]);
            return st;
        }
    return NB_OK;
}

/* The plan's COMMAND as words and as the request they make. */
static nb_status command_request(const nb_plan *plan, int *argc, char ***argv, nb_request *rq)
{
    if (!plan->command_line || !plan->command_line[0])
        return nb_error_set(NB_ERR_DATA, "--grad: the plan has no COMMAND (nb-geom's command line) to vary");
    nb_status st = nb_split_args(plan->command_line, argc, argv);
    if (st) return st;
    if (*argc < 1) st = nb_error_set(NB_ERR_DATA, "--grad: the plan's COMMAND is empty");
    if (!st) st = resolve_words(*argc, *argv, rq, NULL);
    if (st) {
        nb_free_args(*argc, *argv);
        return nb_error_prefix(st, "--grad: the plan's COMMAND");
    }
    return NB_OK;
}

nb_status nb_grad_plan_moved(const nb_plan *plan, const nb_grad_param *p, double delta, nb_plan *out)
{
    int argc = 0;
    char **argv = NULL;
    nb_request rq;
    double vals[6] = {0, 0, 0, 0, 0, 0};
    nb_status st = command_request(plan, &argc, &argv, &rq);
    if (st) return st;
    st = values_at_plan(p, &rq, plan, vals);
    if (!st) st = moved_plan(p, argc, argv, plan, vals, delta, out);
    nb_request_free(&rq);
    nb_free_args(argc, argv);
    return st;
}

nb_status nb_grad_values(const nb_plan *plan, const nb_grad_list *names, double *values)
{
    int argc = 0;
    char **argv = NULL;
    nb_request rq;
    nb_status st = command_request(plan, &argc, &argv, &rq);
    for (int j = 0; j < names->n && !st; j++) {
        double vals[6] = {0, 0, 0, 0, 0, 0};
        const nb_grad_param *p = names->param[j];
        if (!(st = values_at_plan(p, &rq, plan, vals))) values[j] = vals[p->index];
    }
    if (argv) {
        nb_request_free(&rq);
        nb_free_args(argc, argv);
    }
    return st;
}

nb_status nb_grad_plan_at(const nb_plan *plan, const nb_grad_list *names, const double *values, nb_plan *out)
{
    int argc = 0, nfv = 0;
    char **argv = NULL;
    nb_request rq;
    flag_values fv[NB_GRAD_MAX_NAMES];
    nb_status st = command_request(plan, &argc, &argv, &rq);
    if (st) return st;
    /* the names of one flag (-cell, -misset) share its values */
    for (int j = 0; j < names->n && !st; j++) {
        const nb_grad_param *p = names->param[j];
        int f = 0;
        while (f < nfv && strcmp(fv[f].p->flag, p->flag)) f++;
        if (f == nfv) {
            fv[nfv].p = p;
            st = values_at_plan(p, &rq, plan, fv[nfv++].vals);
        }
        fv[f].vals[p->index] = values[j];
    }
    if (!st) st = plan_with(argc, argv, plan, fv, nfv, out);
    nb_request_free(&rq);
    nb_free_args(argc, argv);
    return st;
}

nb_status nb_grad_plans_build(const nb_plan *plan, const nb_grad_list *names, nb_grad_plans *out)
{
    memset(out, 0, sizeof *out);
    /* a shot's spectrum is not a plan's field that the stencil could move */
    if (plan->stills.spikes > 0)
        return nb_error_set(NB_ERR_UNSUPPORTED, "derivatives of stills with a per-shot spectrum (-stills_bandwidth) "
                                                "are not supported");
    int argc = 0;
    char **argv = NULL;
    nb_request rq;
    nb_status st = command_request(plan, &argc, &argv, &rq);
    if (st) return st;
    out->names.n = names->n;
    if (!(st = nb_calloc((void **)&out->names.param, (size_t)names->n + 1, sizeof *out->names.param, "--grad")) &&
        !(st = nb_calloc((void **)&out->step, (size_t)names->n + 1, sizeof *out->step, "--grad")))
        st = nb_calloc((void **)&out->plans, (size_t)names->n + 1, sizeof *out->plans, "--grad plans");
    int done = 0;
    for (int i = 0; i < names->n && !st; i++) {
        out->names.param[i] = names->param[i];
        st = name_plans(names->param[i], argc, argv, &rq, plan, &out->step[i], out->plans[i]);
        if (!st) done++;
    }
    out->names.n = done;
    nb_request_free(&rq);
    nb_free_args(argc, argv);
    if (st) nb_grad_plans_free(out);
    return st;
}

void nb_grad_plans_free(nb_grad_plans *g)
{
    for (int i = 0; g->plans && i < g->names.n; i++)
        for (int j = 0; j < NB_GRAD_STENCIL; j++) nb_plan_free(&g->plans[i][j]);
    free(g->plans);
    free(g->step);
    nb_grad_list_free(&g->names);
    memset(g, 0, sizeof *g);
}

/* ---- the kernel inputs and their tangents ----------------------------------- */

/* The fields of nb_kparams that the dual pixel follows (nb_kdual's), and the
 * others, which no name may move: the tables' by their follow column
 * (nb_fields.h), then what nb_sim_setup_build works out. */
#define FOLLOWED(f, n) {#f, offsetof(nb_kparams, f), offsetof(nb_kdual, f), n}
#define TABLE_FOLLOWED(key, kind, m, follow, what) NB_FIELD_IF_FOLLOWED_##follow(FOLLOWED(m, NB_FIELD_COUNT_##kind), )
static const struct followed {
    const char *name;
    size_t kp, kd;
    int n;
} followed[] = {
    NB_PANEL_FIELDS(TABLE_FOLLOWED) NB_PLAN_KERNEL_FIELDS(TABLE_FOLLOWED)
    FOLLOWED(a_star, 3), FOLLOWED(b_star, 3), FOLLOWED(c_star, 3), FOLLOWED(I_bg, 1),
};
#define FIXED(f, n) {#f, offsetof(nb_kparams, f), n}
#define TABLE_FIXED_AS(want, kind, m, follow) \
    NB_FIELD_IF_FIXED_##follow(NB_FIELD_IF_##want##_##kind(FIXED(m, NB_FIELD_COUNT_##kind), ))
#define TABLE_FIXED_DOUBLE(key, kind, m, follow, what) TABLE_FIXED_AS(DOUBLE, kind, m, follow)
#define TABLE_FIXED_INT(key, kind, m, follow, what) TABLE_FIXED_AS(INT, kind, m, follow)
static const struct fixed {
    const char *name;
    size_t kp;
    int n;
} fixed_doubles[] = {
    NB_PANEL_FIELDS(TABLE_FIXED_DOUBLE) NB_PLAN_KERNEL_FIELDS(TABLE_FIXED_DOUBLE)
    FIXED(subpixel_size, 1), FIXED(r_e_sqr, 1), FIXED(steps, 1),
}, fixed_ints[] = {
    NB_PANEL_FIELDS(TABLE_FIXED_INT) NB_PLAN_KERNEL_FIELDS(TABLE_FIXED_INT)
    FIXED(nsources, 1), FIXED(ncells, 1), FIXED(shape, 1), FIXED(interpolate, 1),
};
#define COUNT(a) ((int)(sizeof a / sizeof a[0]))

static const double *kp_doubles(const nb_kparams *kp, size_t off) { return (const double *)((const char *)kp + off); }

/* The followed values of kp in one array (the fixed fields, then the sources'
 * directions and wavelengths, then the cells); its length. */
static size_t flat_len(const nb_kparams *kp)
{
    size_t n = 0;
    for (int i = 0; i < COUNT(followed); i++) n += (size_t)followed[i].n;
    return n + 4 * (size_t)kp->nsources + 9 * (size_t)kp->ncells;
}

static void flat_get(const nb_kparams *kp, double *out)
{
    for (int i = 0; i < COUNT(followed); i++)
        for (int j = 0; j < followed[i].n; j++) *out++ = kp_doubles(kp, followed[i].kp)[j];
    for (int i = 0; i < 3 * kp->nsources; i++) *out++ = kp->src_incident[i];
    for (int i = 0; i < kp->nsources; i++) *out++ = kp->src_lambda[i];
    for (int i = 0; i < 9 * kp->ncells; i++) *out++ = kp->cells[i];
}

/* The name of the followed value at flat index i (for messages). */
static const char *flat_name(const nb_kparams *kp, size_t i)
{
    for (int f = 0; f < COUNT(followed); f++) {
        if (i < (size_t)followed[f].n) return followed[f].name;
        i -= (size_t)followed[f].n;
    }
    if (i < 4 * (size_t)kp->nsources) return "the sources";
    return "the crystal's orientation";
}

/* Does `moved` differ from `base` in a field the derivatives do not follow? */
static const char *fixed_field_moved(const nb_kparams *base, const nb_kparams *moved)
{
    for (int i = 0; i < COUNT(fixed_doubles); i++)
        for (int j = 0; j < fixed_doubles[i].n; j++) {
            double a = kp_doubles(base, fixed_doubles[i].kp)[j], b = kp_doubles(moved, fixed_doubles[i].kp)[j];
            if (fabs(a - b) > 1e-12 * fmax(fabs(a), fabs(b))) return fixed_doubles[i].name;
        }
    for (int i = 0; i < COUNT(fixed_ints); i++)
        if (*(const int *)((const char *)base + fixed_ints[i].kp) !=
            *(const int *)((const char *)moved + fixed_ints[i].kp))
            return fixed_ints[i].name;
    return NULL;
}

/* The kernel inputs of frame/panel of each plan of name i's stencil, as
 * flat arrays of n values (vals[j] for stencil point j). */
static nb_status stencil_values(const nb_grad_plans *g, int i, long frame, int panel, const nb_kparams *base,
                                const nb_hkl *hkl, size_t n, double *vals[NB_GRAD_STENCIL])
{
    const char *name = g->names.param[i]->name, *flag = g->names.param[i]->flag;
    for (int j = 0; j < NB_GRAD_STENCIL; j++) {
        nb_plan frame_plan, view;
        nb_sim_setup setup;
        nb_plan_frame_view(&g->plans[i][j], frame, &frame_plan);
        nb_plan_panel_view(&frame_plan, panel, &view);
        nb_status st = nb_sim_setup_build(&view, hkl, &setup);
        if (st) return nb_error_prefix(st, "--grad %s", name);
        const char *moved = fixed_field_moved(base, &setup.kp);
        if (!moved && flat_len(&setup.kp) != n) moved = "the sources or the crystal's domains";
        if (!moved) flat_get(&setup.kp, vals[j]);
        nb_sim_setup_free(&setup);
        if (moved)
            return nb_error_set(NB_ERR_USAGE,
                                "--grad %s: moving %s changes %s, which the derivatives do not follow (or the %s "
                                "the plan was made with do not give this plan)", name, flag, moved,
                                j == 0 ? "flags" : "seeds");
    }
    return NB_OK;
}

/* The tangents of name i: the five-point central difference of the stencil's
 * values, after checking that the flag at its value gives the plan. */
static nb_status name_tangents(const nb_grad_plans *g, int i, const double *base_vals, size_t n,
                               double *vals[NB_GRAD_STENCIL], const nb_kparams *base, double *tangent)
{
    const nb_grad_param *p = g->names.param[i];
    for (size_t k = 0; k < n; k++) {
        double a = base_vals[k], b = vals[0][k];
        if (fabs(a - b) > 1e-9 * fmax(fmax(fabs(a), fabs(b)), 1e-300) && fabs(a - b) > 1e-15)
            return nb_error_set(NB_ERR_USAGE,
                                "--grad %s: the plan's command with %s at its value does not give this plan "
                                "(%s differs): the flag changes more than its value (a pivot, a convention)",
                                p->name, p->flag, flat_name(base, k));
    }
    const double h = g->step[i];
    int moves = 0;
    for (size_t k = 0; k < n; k++) {
        tangent[k] = (vals[1][k] - 8.0 * vals[2][k] + 8.0 * vals[3][k] - vals[4][k]) / (12.0 * h);
        if (vals[1][k] != vals[4][k]) moves = 1;
    }
    if (!moves)
        return nb_error_set(NB_ERR_USAGE, "--grad %s: %s does not change this plan (another flag sets what it "
                                          "would: -flux, -samplesize, a source file ...)", p->name, p->flag);
    return NB_OK;
}

/* nb_kdual from the flat values and tangents. */
static nb_status kdual_fill(const nb_kparams *base, const double *val, double *const *tan, int count,
                            nb_kdual_store *out)
{
    size_t n = flat_len(base), k = 0;
    nb_dual *all;
    nb_status st = nb_calloc((void **)&all, n, sizeof *all, "derivative inputs");
    if (st) return st;
    for (size_t i = 0; i < n; i++) {
        all[i] = nb_dual_c(val[i]);
        for (int j = 0; j < count; j++) all[i].d[j] = tan[j][i];
    }
    for (int f = 0; f < COUNT(followed); f++) {
        nb_dual *dst = (nb_dual *)((char *)&out->k + followed[f].kd);
        for (int j = 0; j < followed[f].n; j++) dst[j] = all[k++];
    }
    out->storage = all;
    out->k.src_incident = all + k;
    out->k.src_lambda = all + k + 3 * (size_t)base->nsources;
    out->k.cells = all + k + 4 * (size_t)base->nsources;
    return NB_OK;
}

nb_status nb_grad_kdual_build(const nb_grad_plans *g, int first, int count, long frame, int panel,
                              const nb_kparams *base, const nb_hkl *hkl, nb_kdual_store *out)
{
    memset(out, 0, sizeof *out);
    const size_t n = flat_len(base);
    double *store = NULL;
    /* base values, NB_GRAD_STENCIL stencil arrays, count tangents */
    nb_status st = nb_calloc((void **)&store, n, (size_t)(1 + NB_GRAD_STENCIL + count) * sizeof(double),
                             "derivative stencil");
    if (st) return st;
    double *base_vals = store, *vals[NB_GRAD_STENCIL], *tan[NB_DUAL_N];
    for (int j = 0; j < NB_GRAD_STENCIL; j++) vals[j] = store + n * (size_t)(1 + j);
    for (int j = 0; j < count; j++) tan[j] = store + n * (size_t)(1 + NB_GRAD_STENCIL + j);
    flat_get(base, base_vals);
    for (int j = 0; j < count && !st; j++) {
        st = stencil_values(g, first + j, frame, panel, base, hkl, n, vals);
        if (!st) st = name_tangents(g, first + j, base_vals, n, vals, base, tan[j]);
    }
    if (!st) st = kdual_fill(base, base_vals, tan, count, out);
    free(store);
    return st;
}

void nb_kdual_store_free(nb_kdual_store *s)
{
    free(s->storage);
    memset(s, 0, sizeof *s);
}

/* ---- the render ------------------------------------------------------------ */

/* Row s: its pixels and derivatives; returns the row's solid-angle sum. */
static double grad_row(const nb_kparams *kp, const nb_kdual *k, int nd, int s, float *image, float **grads,
                       int *tripped)
{
    double omega = 0.0;
    for (int f = 0; f < kp->fpixels; f++) {
        if (!nb_pixel_rendered(kp, f, s)) continue;
        int trip = 0;
        nb_dual v = nb_pixel_grad(kp, k, f, s, &omega, &trip);
        *tripped |= trip;
        const size_t at = (size_t)s * kp->fpixels + f;
        if (image) image[at] = (float)v.v;
        for (int j = 0; j < nd; j++) grads[j][at] = (float)v.d[j];
    }
    return omega;
}

nb_status nb_render_cpu_grad(const nb_kparams *kp, const nb_kdual *k, int nd, float *image, float **grads,
                             nb_render_result *res, nb_progress *prog)
{
    double *row_omega;
    nb_status st = nb_calloc((void **)&row_omega, (size_t)kp->spixels, sizeof(double), "row sums");
    if (st) return st;
    int tripped = 0;
    double t0 = nb_now();
    const size_t npix = (size_t)kp->fpixels * kp->spixels;
    if (image) memset(image, 0, npix * sizeof(float));
    for (int j = 0; j < nd; j++) memset(grads[j], 0, npix * sizeof(float));
#pragma omp parallel for schedule(dynamic, 1) reduction(| : tripped)
    for (int s = 0; s < kp->spixels; s++) {
        int trip = 0;
        row_omega[s] = grad_row(kp, k, nd, s, image, grads, &trip);
        tripped |= trip;
        if (prog) nb_progress_add(prog, 1);
    }
    res->omega_sum = 0.0;
    for (int s = 0; s < kp->spixels; s++) res->omega_sum += row_omega[s];
    res->tripped = tripped;
    res->row_stats_filled = 0;
    res->seconds = nb_now() - t0;
    free(row_omega);
    return NB_OK;
}

/* ---- the fast path's tangents ---------------------------------------------- */

/* Does any of the first nd tangents of the n unit vectors' components x
 * move them?  (The stencil's plans are resolved afresh: a direction that
 * stays put can differ in its last bits, tangents of 1e-14.) */
static int moves(const nb_dual *x, size_t n, int nd)
{
    for (size_t i = 0; i < n; i++)
        for (int j = 0; j < nd; j++)
            if (fabs(x[i].d[j]) > 1e-9) return 1;
    return 0;
}

static void tangents_f(const nb_dual *x, int n, float out[][NB_DUAL_N])
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < NB_DUAL_N; j++) out[i][j] = (float)x[i].d[j];
}

/* the most a thread's slow-step slots take (nb_fgrad) */
#define SLOW_SLOTS_BYTES (256u << 10)

/* the threads a fast pass may run on: a thread's scratch each */
static int fgrad_threads(void)
{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

/* The tangent j of A = abc / lambda, component (v, i), of source s and cell c */
static double dA_of(const nb_kparams *kp, const nb_kdual *k, int s, int c, int v, int i, int j)
{
    const double lambda = kp->src_lambda[s], dl = k->src_lambda[s].d[j];
    return k->cells[9 * c + 3 * v + i].d[j] / lambda - kp->cells[9 * c + 3 * v + i] * dl / (lambda * lambda);
}

/* Per pair, the tangents of A.fdet, A.sdet, A.odet and A.pix0 (nb_fgrad's
 * dAaxes): A dX + dA X, in double, from the pairs' A and their tangents dA. */
static void pair_axes_tangents(const nb_fparams *fp, const nb_kdual *k, float *out)
{
    const nb_kparams *kp = &fp->kp;
    const double *axes[4] = {kp->fdet, kp->sdet, kp->odet, kp->pix0};
    const nb_dual *daxes[4] = {k->fdet, k->sdet, k->odet, k->pix0};
    for (int s = 0; s < kp->nsources; s++)
        for (int c = 0; c < kp->ncells; c++) {
            const size_t p = (size_t)s * kp->ncells + c;
            const double *A = fp->pairs[p].A;
            for (int x = 0; x < 4; x++)
                for (int v = 0; v < 3; v++)
                    for (int j = 0; j < NB_DUAL_N; j++) {
                        double d = 0.0;
                        for (int i = 0; i < 3; i++)
                            d += A[3 * v + i] * daxes[x][i].d[j] + dA_of(kp, k, s, c, v, i, j) * axes[x][i];
                        out[((p * 4 + x) * 3 + v) * NB_DUAL_N + j] = (float)d;
                    }
        }
}

/* nb_sim_grad.h */
nb_status nb_fgrad_build(const nb_fparams *fp, const nb_kdual *k, int nd, nb_fgrad *out, float **storage)
{
    const nb_kparams *kp = &fp->kp;
    memset(out, 0, sizeof *out);
    *storage = NULL;
    if (moves(k->src_incident, 3 * (size_t)kp->nsources, nd))
        return nb_error_set(NB_ERR_UNSUPPORTED, "--grad on the fast path: the sources' directions move, which the "
                                                "fast path does not follow; use -precision double");
    out->nd = nd;
    tangents_f(k->fdet, 3, out->dfdet), tangents_f(k->sdet, 3, out->dsdet);
    tangents_f(k->odet, 3, out->dodet), tangents_f(k->pix0, 3, out->dpix0);
    tangents_f(k->a_star, 3, out->dstar[0]), tangents_f(k->b_star, 3, out->dstar[1]);
    tangents_f(k->c_star, 3, out->dstar[2]);
    tangents_f(k->beam, 3, out->dbeam);
    const nb_dual N[3] = {k->Na, k->Nb, k->Nc};
    tangents_f(N, 3, out->dN);
    for (int j = 0; j < NB_DUAL_N; j++) {
        out->dclose[j] = (float)k->close_distance.d[j];
        out->ddistance[j] = (float)k->distance.d[j];
        out->dscale[j] = (float)(kp->r_e_sqr * k->fluence.d[j] / kp->steps);
        out->dI_bg[j] = (float)k->I_bg.d[j];
    }
    const size_t npairs = (size_t)kp->nsources * kp->ncells, threads = (size_t)fgrad_threads();
    const size_t steps = (size_t)kp->thicksteps * kp->oversample;
    /* a slot per slow step while a thread's slots stay small (in cache) */
    out->slow_slots = steps > 1 && steps * npairs * 3 * NB_DUAL_N * sizeof(float) <= SLOW_SLOTS_BYTES ? (int)steps : 1;
    float *dA, *dhi;
    /* per pair: dA 9, dhi 3, dAaxes 12; per thread, slot and pair: the slow step's 3 */
    nb_status st = nb_calloc((void **)storage, npairs * (24 + 3 * threads * (size_t)out->slow_slots),
                             NB_DUAL_N * sizeof(float), "the pairs' tangents");
    if (st) return st;
    dA = *storage, dhi = *storage + npairs * 9 * NB_DUAL_N;
    out->dAaxes = dhi + npairs * 3 * NB_DUAL_N;
    out->slow_scratch = *storage + npairs * 24 * NB_DUAL_N;
    out->slow_stride = npairs * 3 * NB_DUAL_N * (size_t)out->slow_slots;
    /* A = abc / lambda per (source, cell); A.i with i the source's direction (fixed) */
    for (int s = 0; s < kp->nsources; s++) {
        const double *inc = kp->src_incident + 3 * s;
        for (int c = 0; c < kp->ncells; c++) {
            const size_t p = (size_t)s * kp->ncells + c;
            for (int j = 0; j < NB_DUAL_N; j++) {
                for (int v = 0; v < 3; v++) {
                    double dhv = 0.0;
                    for (int i = 0; i < 3; i++) {
                        const double d = dA_of(kp, k, s, c, v, i, j);
                        dA[(p * 9 + 3 * v + i) * NB_DUAL_N + j] = (float)d;
                        dhv += d * inc[i];
                    }
                    dhi[(p * 3 + v) * NB_DUAL_N + j] = (float)dhv;
                }
            }
        }
    }
    out->dA = dA, out->dhi = dhi;
    pair_axes_tangents(fp, k, (float *)out->dAaxes);
    return NB_OK;
}

/* The fast path's image and derivatives on the GPU (cuda) or the CPU: the
 * fast parameters and the tangents built here for either. */
static nb_status render_fast_grad(const nb_kparams *kp, const nb_kdual *k, int nd, nb_cuda *cuda, float *image,
                                  float **grads, nb_render_result *res, nb_progress *prog)
{
    nb_fparams fp;
    nb_fgrad fg;
    float *storage = NULL;
    double *row_omega = NULL;
    nb_status st = nb_fparams_build(kp, &fp);
    if (st) return st;
    if (!(st = nb_fgrad_build(&fp, k, nd, &fg, &storage)) && cuda) {
        st = nb_render_cuda_fast_grad(cuda, &fp, &fg, nd, image, grads, res);
    } else if (!st && !(st = nb_calloc((void **)&row_omega, (size_t)kp->spixels, sizeof(double), "row sums"))) {
        int tripped = 0;
        double t0 = nb_now();
        nb_pick_fast_grad_kernel()(&fp, &fg, image, grads, row_omega, &tripped, prog);
        res->seconds = nb_now() - t0;
        res->tripped = tripped;
        res->row_stats_filled = 0;
        res->omega_sum = 0.0;
        for (int s = 0; s < kp->spixels; s++) res->omega_sum += row_omega[s];
    }
    free(row_omega);
    free(storage);
    nb_fparams_free(&fp);
    return st;
}

nb_status nb_render_cpu_fast_grad(const nb_kparams *kp, const nb_kdual *k, int nd, float *image, float **grads,
                                  nb_render_result *res, nb_progress *prog)
{
    return render_fast_grad(kp, k, nd, NULL, image, grads, res, prog);
}

nb_status nb_render_grads(const nb_grad_plans *g, nb_grad_path path, long frame, int panel, const nb_kparams *kp,
                          const nb_hkl *hkl, nb_cuda *cuda, float *image, float **grads, nb_render_result *res,
                          nb_progress *prog)
{
    nb_status st = NB_OK;
    const int n = g->names.n;
    double seconds = 0.0, kernel_seconds = 0.0, transfer_seconds = 0.0; /* over the passes */
    for (int first = 0; first < n && !st; first += NB_DUAL_N) {
        const int count = n - first < NB_DUAL_N ? n - first : NB_DUAL_N;
        float *pass_image = first == 0 ? image : NULL; /* the image once, with the first pass */
        nb_kdual_store ks;
        st = nb_grad_kdual_build(g, first, count, frame, panel, kp, hkl, &ks);
        nb_progress *pass_prog = first ? NULL : prog;
        if (!st && path == NB_GRAD_FAST)
            st = render_fast_grad(kp, &ks.k, count, cuda, pass_image, grads + first, res, pass_prog);
        else if (!st && cuda) st = nb_render_cuda_grad(cuda, kp, &ks.k, count, pass_image, grads + first, res);
        else if (!st) st = nb_render_cpu_grad(kp, &ks.k, count, pass_image, grads + first, res, pass_prog);
        nb_kdual_store_free(&ks);
        seconds += res->seconds, kernel_seconds += res->kernel_seconds, transfer_seconds += res->transfer_seconds;
    }
    res->seconds = seconds, res->kernel_seconds = kernel_seconds, res->transfer_seconds = transfer_seconds;
    return st;
}
