/* nb_fit_frame.c - one frame of nb-fit's dataset fit: what its parameters
 * are, the plan they make (the frame's crystal turned and reshaped, the
 * detector moved, the wavelength scaled), its model and derivatives from the
 * engine on the regions around its spots, and the Poisson normal equations
 * with a background plane per region eliminated (Schur complements), alone
 * or for the shared parameters. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_cell.h"
#include "nb_fit_ds.h"
#include "nb_util.h"
#include "nb_vec.h"

#define DTR (M_PI / 180.0)

static const struct kind_row {
    const char *name, *unit, *grad_name; /* grad_name: the engine's name for messages (NULL: not rendered) */
    int per_frame, shared;
} kinds[K_COUNT] = {
    [K_ROT_X] = {"rot_x", "degree", "rot_x", 1, 0},
    [K_ROT_Y] = {"rot_y", "degree", "rot_y", 1, 0},
    [K_ROT_Z] = {"rot_z", "degree", "rot_z", 1, 0},
    [K_CELL_A] = {"cell_a", "Angstrom", "cell_a", 1, 1},
    [K_CELL_B] = {"cell_b", "Angstrom", "cell_b", 1, 1},
    [K_CELL_C] = {"cell_c", "Angstrom", "cell_c", 1, 1},
    [K_CELL_ALPHA] = {"cell_alpha", "degree", "cell_alpha", 1, 1},
    [K_CELL_BETA] = {"cell_beta", "degree", "cell_beta", 1, 1},
    [K_CELL_GAMMA] = {"cell_gamma", "degree", "cell_gamma", 1, 1},
    [K_NA] = {"Na", "cell", "Na", 1, 1},
    [K_NB] = {"Nb", "cell", "Nb", 1, 1},
    [K_NC] = {"Nc", "cell", "Nc", 1, 1},
    [K_LAMBDA] = {"lambda", "Angstrom", "lambda", 1, 1},
    [K_MOSAIC] = {"mosaic", "degree", "mosaic", 1, 1},
    [K_DISTANCE] = {"distance", "mm", "distance", 0, 1},
    [K_XBEAM] = {"Xbeam", "mm", "Xbeam", 0, 1},
    [K_YBEAM] = {"Ybeam", "mm", "Ybeam", 0, 1},
    [K_SCALE] = {"scale", "", NULL, 1, 1},
};

const char *ds_kind_name(const ds_layout *L, int kind)
{
    return ds_panel_kind(kind) ? L->pv_name[kind - K_COUNT] : kinds[kind].name;
}

const char *ds_kind_unit(const ds_layout *L, int kind)
{
    if (!ds_panel_kind(kind)) return kinds[kind].unit;
    return L->pv_axis[kind - K_COUNT] < PA_ROT_FAST ? "mm" : "degree";
}

static int kind_find(const char *name)
{
    for (int k = 0; k < K_COUNT; k++)
        if (!strcmp(kinds[k].name, name)) return k;
    return -1;
}

/* One list's names into the layout (shared: the shared part). */
static nb_status layout_add(const char *list, int shared, ds_layout *L)
{
    const char *opt = shared ? "--refine" : "--refine-frame";
    char *copy = nb_xstrdup(list), *save = NULL;
    nb_status st = NB_OK;
    for (char *tok = strtok_r(copy, ",", &save); tok && !st; tok = strtok_r(NULL, ",", &save)) {
        int k = kind_find(tok);
        nb_param known;
        if (k < 0 && !nb_param_lookup(tok, &known) && known.panel >= 0) {
            st = ds_panel_value_add(tok, &known, shared, L);
            continue;
        }
        if (k < 0 && !strncmp(tok, "misset_", 7) && !shared)
            st = nb_error_set(NB_ERR_USAGE, "option %s: '%s' is -misset's angle of the plan's crystal; a frame's own "
                                            "turn about the lab's %c axis is rot_%c", opt, tok, tok[7], tok[7]);
        else if (k < 0 && !nb_param_lookup(tok, &known))
            st = nb_error_set(NB_ERR_UNSUPPORTED, "option %s: '%s' is not supported in a dataset fit (it fits: "
                                                  "rot_x/y/z, cell_*, Na/Nb/Nc, lambda, mosaic, scale per "
                                                  "frame; distance, Xbeam, Ybeam, panel<i>_shift_* and "
                                                  "panel<i>_rot_*, cell_*, Na/Nb/Nc, lambda, mosaic, scale "
                                                  "shared)",
                              opt, tok);
        else if (k < 0) st = nb_error_set(NB_ERR_USAGE, "option %s: unknown name '%s'", opt, tok);
        else if (shared ? !kinds[k].shared : !kinds[k].per_frame)
            st = nb_error_set(NB_ERR_USAGE, "option %s: '%s' is %s", opt, tok,
                              shared ? "a frame's own (its crystal's turn): give it to --refine-frame"
                                     : "the detector's, shared by every frame: give it to --refine");
        else if (L->where_p[k] >= 0 || L->where_z[k] >= 0)
            st = nb_error_set(NB_ERR_USAGE, "option %s: '%s' is named twice (in --refine and --refine-frame, or "
                                            "twice in one)", opt, tok);
        else if (shared) L->where_z[k] = L->kz++;
        else L->where_p[k] = L->kp++;
    }
    free(copy);
    return st;
}

nb_status ds_layout_parse(const char *shared, const char *per_frame, int refine_F, ds_layout *L)
{
    memset(L, 0, sizeof *L);
    for (int k = 0; k < DS_KINDS; k++) L->where_p[k] = L->where_z[k] = -1;
    nb_status st = NB_OK;
    if (per_frame) st = layout_add(per_frame, 0, L);
    if (!st && shared) st = layout_add(shared, 1, L);
    if (st) return st;
    if (!L->kp && !L->kz && !refine_F)
        return nb_error_set(NB_ERR_USAGE, "nothing to refine: give --refine, --refine-frame or --refine-F");
    for (int k = 0; k < DS_KINDS; k++) {
        if (L->where_p[k] >= 0) L->kind[L->where_p[k]] = k;
        if (L->where_z[k] >= 0) L->where_z[k] += L->kp, L->kind[L->where_z[k]] = k;
    }
    /* the whole detector's distance and beam centre are every panel's
     * values together: both refined, nothing tells them apart */
    static const int whole[3] = {K_DISTANCE, K_XBEAM, K_YBEAM};
    for (int a = 0; a < 3 && L->npv; a++)
        if (L->where_z[whole[a]] >= 0)
            return nb_error_set(NB_ERR_USAGE, "option --refine: '%s' moves every panel, and %s moves panel %d: "
                                              "refine the panels' values with the detector's distance and beam "
                                              "centre held (docs/physics.md 15.3)",
                                kinds[whole[a]].name, L->pv_name[0], L->pv_panel[0]);
    return NB_OK;
}

/* ---- the crystal ---------------------------------------------------------------- */

nb_status ds_frame_start(ds *d, ds_frame *fr)
{
    nb_plan view;
    nb_plan_frame_crystal(d->start, fr->index, &fr->start);
    nb_plan_frame_view(d->start, fr->index, &view);
    fr->mosaic0 = view.mosaic_spread / DTR;
    nb_status st = ds_frame_set_crystal(fr, fr->start.a, fr->start.b, fr->start.c);
    for (int j = 0; j < d->L.kp && !st; j++) {
        double val[DS_KINDS];
        ds_values(d, fr, NULL, d->z, val);
        fr->p[j] = val[d->L.kind[j]];
    }
    return st;
}

nb_status ds_frame_set_crystal(ds_frame *fr, const double a[3], const double b[3], const double c[3])
{
    const double *v[3] = {a, b, c};
    double len[3];
    for (int i = 0; i < 3; i++) len[i] = nb_vnorm(v[i]);
    if (!(len[0] > 0 && len[1] > 0 && len[2] > 0))
        return nb_error_set(NB_ERR_DATA, "frame %ld: the crystal's cell vectors are degenerate", fr->index + 1);
    fr->cell0[0] = len[0] * 1e10, fr->cell0[1] = len[1] * 1e10, fr->cell0[2] = len[2] * 1e10;
    fr->cell0[3] = acos(nb_vdot(v[1], v[2]) / (len[1] * len[2])) / DTR;
    fr->cell0[4] = acos(nb_vdot(v[0], v[2]) / (len[0] * len[2])) / DTR;
    fr->cell0[5] = acos(nb_vdot(v[0], v[1]) / (len[0] * len[1])) / DTR;
    double A[9], S[9], Si[9];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) A[3 * j + i] = v[i][j] * 1e10; /* columns a, b, c */
    if (fabs(nb_mat3_det(A)) < 1e-9 * len[0] * len[1] * len[2] * 1e30 || nb_cell_standard(fr->cell0, S))
        return nb_error_set(NB_ERR_DATA, "frame %ld: the crystal's cell vectors are degenerate", fr->index + 1);
    nb_mat3_inverse(S, Si);
    nb_mat3_mul(A, Si, fr->U0);
    if (nb_mat3_det(fr->U0) < 0)
        return nb_error_set(NB_ERR_DATA, "frame %ld: the crystal's cell vectors are left-handed", fr->index + 1);
    return NB_OK;
}

void ds_values(const ds *d, const ds_frame *fr, const double *p, const double *z, double val[DS_KINDS])
{
    if (!val) return;
    for (int k = 0; k < DS_KINDS; k++) val[k] = d->zstart[k];
    for (int i = 0; i < 6; i++) val[K_CELL_A + i] = fr->cell0[i];
    val[K_NA] = fr->start.Na, val[K_NB] = fr->start.Nb, val[K_NC] = fr->start.Nc;
    val[K_LAMBDA] = fr->start.lambda * 1e10;
    val[K_MOSAIC] = fr->mosaic0;
    for (int k = 0; k < K_COUNT + d->L.npv; k++) {
        if (z && d->L.where_z[k] >= 0) val[k] = z[d->L.where_z[k] - d->L.kp];
        if (p && d->L.where_p[k] >= 0) val[k] = p[d->L.where_p[k]];
    }
}

void ds_crystal(const ds_frame *fr, const double val[DS_KINDS], double abc[3][3])
{
    double S[9], A[9];
    if (nb_cell_standard(val + K_CELL_A, S)) memset(S, 0, sizeof S); /* no cell: a crystal of no volume */
    nb_mat3_mul(fr->U0, S, A);
    for (int i = 0; i < 3; i++) {
        double col[3] = {A[i] * 1e-10, A[3 + i] * 1e-10, A[6 + i] * 1e-10};
        nb_rotate_xyz(col, abc[i], val[K_ROT_X] * DTR, val[K_ROT_Y] * DTR, val[K_ROT_Z] * DTR);
    }
}

/* ---- the frame's plan ----------------------------------------------------------- */

/* A plan of one frame at some values, and what it owns. */
typedef struct ds_plan {
    nb_plan plan;
    nb_panel *panels;
    nb_source *sources, *frame_sources;
} ds_plan;

static void ds_plan_free(ds_plan *q)
{
    free(q->panels);
    free(q->sources);
    free(q->frame_sources);
    memset(q, 0, sizeof *q);
}

/* Frame fr's plan at values val: its view, one frame, the crystal, N,
 * wavelength and detector as val says, the regions as its panels' masks. */
static nb_status ds_plan_make(const ds *d, const ds_frame *fr, const double val[DS_KINDS], ds_plan *q)
{
    nb_plan *P = &q->plan;
    memset(q, 0, sizeof *q);
    nb_status st = nb_engine_frame(d->start, fr->index, P, &q->frame_sources);
    if (st) return st;
    P->nframes = 1;
    P->stills.on = 0;
    P->frame_crystals = NULL;
    P->frame_nchannels = NULL, P->frame_spectra = NULL; /* the frame's spectrum is its sources already */
    double abc[3][3];
    ds_crystal(fr, val, abc);
    memcpy(P->cell_a, abc[0], sizeof P->cell_a);
    memcpy(P->cell_b, abc[1], sizeof P->cell_b);
    memcpy(P->cell_c, abc[2], sizeof P->cell_c);
    double a[3], b[3], c[3], bc[3], ca[3], ab[3];
    for (int i = 0; i < 3; i++) a[i] = abc[0][i] * 1e10, b[i] = abc[1][i] * 1e10, c[i] = abc[2][i] * 1e10;
    nb_vcross(b, c, bc), nb_vcross(c, a, ca), nb_vcross(a, b, ab);
    const double V = nb_vdot(a, bc);
    for (int i = 0; i < 3; i++) P->recip_a[i] = bc[i] / V, P->recip_b[i] = ca[i] / V, P->recip_c[i] = ab[i] / V;
    for (int i = 0; i < 6; i++) P->unit_cell[i] = val[K_CELL_A + i];
    P->Na = val[K_NA], P->Nb = val[K_NB], P->Nc = val[K_NC];
    P->fluence = fr->start.fluence; /* the scale is applied to the image (ds_likelihood) */
    /* the spread's sign is no physics: the model is even in it, and smooth
     * through 0 (the domains' angles scaled, nb_mosaic_umat_rescale) */
    P->mosaic_spread = fabs(val[K_MOSAIC]) * DTR;
    const double ratio = val[K_LAMBDA] * 1e-10 / fr->start.lambda;
    if (ratio != 1.0) {
        if ((st = nb_calloc((void **)&q->sources, (size_t)P->nsources, sizeof *q->sources, "the sources"))) return st;
        for (int i = 0; i < P->nsources; i++) q->sources[i] = P->sources[i], q->sources[i].lambda *= ratio;
        P->sources = q->sources;
        P->lambda0 *= ratio;
    }
    if ((st = nb_calloc((void **)&q->panels, (size_t)P->npanels, sizeof *q->panels, "the panels"))) return st;
    for (int i = 0; i < P->npanels; i++) {
        ds_panel_at(d, val, i, &q->panels[i]);
        q->panels[i].mask = d->masks ? d->masks[i] : P->panels[i].mask;
    }
    P->panels = q->panels;
    nb_plan_derive_detector(P);
    return NB_OK;
}

/* The stencil's step of a kind at its value. */
static double kind_step(int kind, double v)
{
    switch (kind) {
    case K_NA: case K_NB: case K_NC: return 1e-4 * fmax(fabs(v), 1.0);
    case K_LAMBDA: return 1e-4 * fmax(fabs(v), 0.1);
    default: return 1e-4 * fmax(fabs(v), 1.0);
    }
}

/* The region masks of frame fr into d->masks (1 on its pixels). */
static void masks_set(ds *d, const ds_frame *fr, int full)
{
    for (int p = 0; p < nb_plan_npanels(d->start); p++) {
        int fp, sp;
        nb_plan_panel_dims(d->start, p, &fp, &sp, NULL);
        memset(d->masks[p], full ? 1 : 0, (size_t)fp * sp);
        if (d->start->panels[p].mask && full) memcpy(d->masks[p], d->start->panels[p].mask, (size_t)fp * sp);
    }
    if (full) return;
    for (size_t i = 0; i < fr->npix; i++) {
        const int p = ds_pixel_panel(d, fr->pix[i]);
        d->masks[p][fr->pix[i] - ds_panel_start(d, p)] = 1;
    }
}

/* The rendered kinds of v (all but the scale). */
static int rendered(const ds *d, int *which)
{
    int n = 0;
    for (int j = 0; j < d->L.kp + d->L.kz; j++)
        if (d->L.kind[j] != K_SCALE) which[n++] = j;
    return n;
}

/* The stencil plans of the rendered kinds around val (mem: n x NB_GRAD_STENCIL). */
static nb_status stencil(const ds *d, const ds_frame *fr, const double val[DS_KINDS], const int *which, int n,
                         nb_grad_plans *gp, ds_plan (*mem)[NB_GRAD_STENCIL])
{
    static const int offsets[NB_GRAD_STENCIL] = {0, -2, -1, 1, 2};
    nb_status st = NB_OK;
    gp->names.n = n;
    for (int i = 0; i < n && !st; i++) {
        const int kind = d->L.kind[which[i]];
        st = nb_param_lookup(ds_panel_kind(kind) ? d->L.pv_name[kind - K_COUNT] : kinds[kind].grad_name,
                             &gp->names.param[i]);
        gp->step[i] = kind_step(kind, val[kind]);
        for (int j = 0; j < NB_GRAD_STENCIL && !st; j++) {
            double moved[DS_KINDS];
            memcpy(moved, val, sizeof moved);
            moved[kind] += offsets[j] * gp->step[i];
            st = ds_plan_make(d, fr, moved, &mem[i][j]);
            gp->plans[i][j] = mem[i][j].plan;
        }
    }
    return st;
}

/* Of the stencil's names, those panel `panel`'s pixels depend on (a panel
 * value moves its own panel alone) into sub (sharing gp's plans), with
 * their derivative images at the panel's offset: how many. */
static int panel_names(const ds *d, const nb_grad_plans *gp, const int *which, int panel, size_t off,
                       nb_grad_plans *sub, float **g)
{
    int m = 0;
    for (int j = 0; j < gp->names.n; j++) {
        const int kind = d->L.kind[which[j]];
        if (ds_panel_kind(kind) && d->L.pv_panel[kind - K_COUNT] != panel) continue;
        sub->names.param[m] = gp->names.param[j];
        sub->step[m] = gp->step[j];
        memcpy(sub->plans[m], gp->plans[j], sizeof gp->plans[j]);
        g[m++] = d->grads[which[j]] + off;
    }
    sub->names.n = m;
    return m;
}

void ds_clock(ds *d, int c, double t0)
{
    d->clock_s[c] += nb_now() - t0;
    d->clock_n[c]++;
}

void ds_set_hkl(ds *d, const nb_hkl *hkl)
{
    d->hkl = hkl;
    d->hkl_made++;
}

/* Does d->image (and d->grads, when asked) hold frame fr's render at val
 * already?  The scale is not rendered (ds_likelihood applies it). */
static int rendered_already(const ds *d, const ds_frame *fr, const double val[DS_KINDS], int grads, int full)
{
    const ds_rendered *r = &d->rendered;
    if (r->frame != fr->index || r->regions_made != fr->regions_made || r->hkl_made != d->hkl_made ||
        r->full != full || (grads && !r->grads))
        return 0;
    for (int k = 0; k < DS_KINDS; k++)
        if (k != K_SCALE && r->val[k] != val[k]) return 0;
    return 1;
}

/* The stencil's arrays for n names (heap: a plan is over a kilobyte) */
typedef struct ds_stencil_mem {
    ds_plan (*mem)[NB_GRAD_STENCIL];
    nb_plan (*plans)[NB_GRAD_STENCIL], (*sub_plans)[NB_GRAD_STENCIL];
} ds_stencil_mem;

static void stencil_mem_free(ds_stencil_mem *s, int n)
{
    for (int i = 0; i < n && s->mem; i++)
        for (int j = 0; j < NB_GRAD_STENCIL; j++) ds_plan_free(&s->mem[i][j]);
    free(s->mem), free(s->plans), free(s->sub_plans);
}

/* Render the panels of base (the frame's plan at val) with the derivatives of gp's names */
static nb_status render_panels(ds *d, const ds_plan *base, const nb_grad_plans *gp, const int *which,
                               nb_plan (*sub_plans)[NB_GRAD_STENCIL])
{
    nb_status st = NB_OK;
    nb_param sub_names[DS_MAX];
    double sub_step[DS_MAX];
    nb_grad_plans sub = {{0, sub_names}, sub_step, sub_plans};
    for (int i = 0; i < nb_plan_npanels(&base->plan) && !st; i++) {
        nb_plan view;
        size_t off;
        float *g[DS_MAX];
        nb_panel_done done;
        nb_plan_panel_dims(&base->plan, i, NULL, NULL, &off);
        const int m = gp ? panel_names(d, gp, which, i, off, &sub, g) : 0;
        nb_plan_panel_view(&base->plan, i, &view);
        const nb_panel_job job = {d->path == NB_GRAD_DOUBLE, m ? &sub : NULL, 0, i, g, NULL, NULL, NULL, 0, NULL, NULL};
        st = nb_engine_render_panel(d->engine, &view, d->hkl, &job, d->image + off, &done);
        nb_panel_done_free(&done);
    }
    return st;
}

nb_status ds_render(ds *d, ds_frame *fr, const double *p, const double *z, int grads, int full)
{
    double val[DS_KINDS];
    int which[DS_MAX], n = grads ? rendered(d, which) : 0;
    ds_values(d, fr, p, z, val);
    if (rendered_already(d, fr, val, grads, full)) return NB_OK;
    const double t0 = nb_now();
    d->rendered.frame = -1;
    masks_set(d, fr, full);
    ds_plan base;
    nb_grad_plans gp;
    nb_param names[DS_MAX];
    double step[DS_MAX];
    ds_stencil_mem sm = {NULL, NULL, NULL};
    memset(&gp, 0, sizeof gp);
    nb_status st = NB_OK;
    if (n && (!(sm.mem = calloc((size_t)n, sizeof *sm.mem)) || !(sm.plans = calloc((size_t)n, sizeof *sm.plans)) ||
              !(sm.sub_plans = calloc((size_t)n, sizeof *sm.sub_plans))))
        st = nb_error_set(NB_ERR_NOMEM, "out of memory for the derivatives' plans");
    gp.names.param = names, gp.step = step, gp.plans = sm.plans;
    if (!st) st = ds_plan_make(d, fr, val, &base);
    else memset(&base, 0, sizeof base);
    /* a whole frame is rendered to find its spots alone: one sample a pixel
     * tells where a spot is as well as many, at a fraction of the cost */
    if (!st && full) base.plan.oversample = 1;
    if (!st && n) st = stencil(d, fr, val, which, n, &gp, sm.mem);
    if (!st) st = render_panels(d, &base, n ? &gp : NULL, which, sm.sub_plans);
    stencil_mem_free(&sm, n);
    ds_plan_free(&base);
    if (st) return nb_error_prefix(st, "frame %ld", fr->index + 1);
    ds_clock(d, full ? T_PREDICT : n ? T_GRAD : T_STEP, t0);
    d->rendered = (ds_rendered){fr->index, fr->regions_made, d->hkl_made, full, grads, {0}};
    memcpy(d->rendered.val, val, sizeof val);
    return NB_OK;
}

/* ---- the likelihood and its normal equations ------------------------------------ */

/* The values of v that panel `panel`'s pixels depend on (every one but
 * other panels' own values), ascending, into act: how many. */
static int panel_active(const ds *d, int panel, int *act)
{
    int n = 0;
    for (int j = 0; j < d->L.kp + d->L.kz; j++) {
        const int kind = d->L.kind[j];
        if (!ds_panel_kind(kind) || d->L.pv_panel[kind - K_COUNT] == panel) act[n++] = j;
    }
    return n;
}

double ds_likelihood(ds *d, ds_frame *fr, const double *p, const double *z, const double *bg, int loss, int ne)
{
    const int k = d->L.kp + d->L.kz;
    double val[DS_KINDS];
    ds_values(d, fr, p, z, val);
    const double s = val[K_SCALE];
    const int js = d->L.where_p[K_SCALE] >= 0 ? d->L.where_p[K_SCALE] : d->L.where_z[K_SCALE];
    double nll = 0.0, dv[DS_MAX];
    ds_frefl *fx = ne ? fr->fref : NULL; /* with F's reflections: their couplings too */
    if (ne) {
        memset(fr->H, 0, sizeof fr->H), memset(fr->g, 0, sizeof fr->g);
        memset(fr->Hbb, 0, 9 * sizeof(double) * (size_t)fr->nregions);
        memset(fr->Hbv, 0, 3 * (size_t)k * sizeof(double) * (size_t)fr->nregions);
        memset(fr->gb, 0, 3 * sizeof(double) * (size_t)fr->nregions);
    }
    if (fx) {
        memset(fx->v, 0, (size_t)fx->nslots * (size_t)k * sizeof *fx->v);
        memset(fx->gI, 0, (size_t)fx->nslots * sizeof *fx->gI), memset(fx->DI, 0, (size_t)fx->nslots * sizeof *fx->DI);
    }
    /* the values a pixel depends on: all but other panels' own (act, na of them, ascending) */
    int act[DS_MAX], na = 0, panel = -1;
    for (int j = 0; j < k; j++) act[na++] = j;
    for (size_t i = 0; i < fr->npix; i++) {
        const size_t pix = fr->pix[i];
        const int r = fr->region[i];
        const double *b = bg + 3 * r, I = d->image[pix], y = fr->y[i];
        const double db[3] = {1.0, fr->dx[i], fr->dy[i]};
        const double mu = fmax(s * I + b[0] + b[1] * db[1] + b[2] * db[2], NB_FIT_MU_FLOOR);
        nll += nb_fit_nll(loss, y, mu);
        if (!ne) continue;
        if (d->L.npv && (panel < 0 || pix >= d->panel_end[panel] || pix < ds_panel_start(d, panel)))
            na = panel_active(d, panel = ds_pixel_panel(d, pix), act);
        for (int ai = 0; ai < na; ai++) {
            const int j = act[ai];
            dv[j] = d->L.kind[j] == K_SCALE ? 0.0 : s * d->grads[j][pix];
        }
        if (js >= 0) dv[js] = I;
        const double res = nb_fit_dnll_dmu(loss, y, mu), w = nb_fit_weight(loss, mu);
        double *Hb = fr->Hbb + 9 * r, *Hv = fr->Hbv + 3 * (size_t)k * r, *gb = fr->gb + 3 * r;
        for (int ai = 0; ai < na; ai++) {
            const int a = act[ai];
            fr->g[a] += res * dv[a];
            for (int ci = 0; ci <= ai; ci++) fr->H[a * DS_MAX + act[ci]] += w * dv[a] * dv[act[ci]];
            for (int q = 0; q < 3; q++) Hv[q * k + a] += w * db[q] * dv[a];
        }
        for (int q = 0; q < 3; q++) {
            gb[q] += res * db[q];
            for (int c = 0; c < 3; c++) Hb[3 * q + c] += w * db[q] * db[c];
        }
        if (fx && fx->slot[i] >= 0) { /* dmu/dI of the pixel's reflection: the lattice's photons, scaled */
            const int sl = fx->slot[i];
            const double dI = s * fx->L[i];
            fx->gI[sl] += res * dI, fx->DI[sl] += w * dI * dI;
            for (int ai = 0; ai < na; ai++) fx->v[(size_t)sl * k + act[ai]] += w * dv[act[ai]] * dI;
        }
    }
    for (int a = 0; a < k && ne; a++)
        for (int c = 0; c < a; c++) fr->H[c * DS_MAX + a] = fr->H[a * DS_MAX + c];
    if (ne) fr->nll = nll;
    return nll;
}

/* A plane's block damped: Levenberg-Marquardt's factor, and a ridge on the
 * slopes (a millionth of the level's information: a region of a pixel or a
 * row has no slope to find, and the slopes' unit is the region's half width) */
void ds_plane_damp(double Hb[9], double lambda)
{
    const double ridge = 1e-6 * Hb[0] + 1e-12;
    for (int q = 0; q < 3; q++) Hb[4 * q] = Hb[4 * q] * (1.0 + lambda) + (q ? ridge : 1e-12);
}

/* F's response taken out of the frame's reduced system: each of its
 * reflections' I eliminated, with I's information over every frame (damped
 * as the step is) and I's gradient over every frame, this frame's own as it
 * is now (the others' as the last sums had them):
 *   Hr -= v v^T / D,  gr -= v g / D. */
static void marginal_over_F(const ds *d, const ds_frame *fr, double lambda, double *Hr, double *gr)
{
    const int k = d->L.kp + d->L.kz;
    const ds_frefl *fx = fr->fref;
    const ds_Fset *F = &d->Fset;
    for (int sl = 0; sl < fx->nslots; sl++) {
        const long m = fx->m[sl];
        const double D = F->D[m] * (1.0 + lambda);
        if (!(D > 0)) continue;
        const double *v = fx->v + (size_t)sl * k;
        for (int a = 0; a < k; a++) {
            gr[a] -= v[a] * F->g[m] / D;
            for (int c = 0; c < k; c++) Hr[a * DS_MAX + c] -= v[a] * v[c] / D;
        }
    }
}

/* The frame's system with the planes eliminated, damped by lambda: Hr (k x k,
 * stride DS_MAX), gr; during the joint refinement with F, marginal over it. */
static nb_status reduce(const ds *d, const ds_frame *fr, double lambda, double *Hr, double *gr)
{
    const int k = d->L.kp + d->L.kz;
    for (int a = 0; a < k; a++) {
        gr[a] = fr->g[a];
        for (int c = 0; c < k; c++) Hr[a * DS_MAX + c] = fr->H[a * DS_MAX + c] * (a == c ? 1.0 + lambda : 1.0);
    }
    for (int r = 0; r < fr->nregions; r++) {
        double Hb[9], X[3 * DS_MAX], xg[3];
        const double *Hv = fr->Hbv + 3 * (size_t)k * r;
        memcpy(Hb, fr->Hbb + 9 * r, sizeof Hb);
        ds_plane_damp(Hb, lambda);
        /* X = Hb^-1 Hv (3 x k), xg = Hb^-1 gb */
        for (int a = 0; a < k; a++) {
            double col[3] = {Hv[a], Hv[k + a], Hv[2 * k + a]}, x[3];
            if (!nb_fit_solve(3, Hb, 3, col, x)) return nb_error_set(NB_ERR_DATA, "a region's plane is singular");
            for (int q = 0; q < 3; q++) X[q * k + a] = x[q];
        }
        if (!nb_fit_solve(3, Hb, 3, fr->gb + 3 * r, xg)) return nb_error_set(NB_ERR_DATA, "a region's plane is singular");
        for (int a = 0; a < k; a++) {
            for (int q = 0; q < 3; q++) gr[a] -= Hv[q * k + a] * xg[q];
            for (int c = 0; c < k; c++)
                for (int q = 0; q < 3; q++) Hr[a * DS_MAX + c] -= Hv[q * k + a] * X[q * k + c];
        }
    }
    if (d->Fset.on && fr->fref) marginal_over_F(d, fr, lambda, Hr, gr);
    return NB_OK;
}

nb_status ds_frame_schur(const ds *d, const ds_frame *fr, double lambda, double *S, double *s)
{
    const int kp = d->L.kp, kz = d->L.kz;
    double Hr[DS_MAX * DS_MAX], gr[DS_MAX];
    nb_status st = reduce(d, fr, lambda, Hr, gr);
    if (st) return st;
    /* S += Hzz - Hzp Hpp^-1 Hpz, s += gz - Hzp Hpp^-1 gp */
    double Y[DS_MAX * DS_MAX], yg[DS_MAX];
    for (int c = 0; c < kz && kp; c++) {
        double col[DS_MAX], x[DS_MAX];
        for (int a = 0; a < kp; a++) col[a] = Hr[a * DS_MAX + kp + c];
        if (!nb_fit_solve(kp, Hr, DS_MAX, col, x)) return nb_error_set(NB_ERR_DATA, "the frame's system is singular");
        for (int a = 0; a < kp; a++) Y[a * DS_MAX + c] = x[a];
    }
    if (kp && !nb_fit_solve(kp, Hr, DS_MAX, gr, yg)) return nb_error_set(NB_ERR_DATA, "the frame's system is singular");
    for (int a = 0; a < kz; a++) {
        s[a] += gr[kp + a];
        for (int q = 0; q < kp; q++) s[a] -= Hr[(kp + a) * DS_MAX + q] * yg[q];
        for (int c = 0; c < kz; c++) {
            S[a * kz + c] += Hr[(kp + a) * DS_MAX + kp + c];
            for (int q = 0; q < kp; q++) S[a * kz + c] -= Hr[(kp + a) * DS_MAX + q] * Y[q * DS_MAX + c];
        }
    }
    return NB_OK;
}

nb_status ds_frame_step(const ds *d, const ds_frame *fr, double lambda, const double *dz, double *dp, double *dbg)
{
    const int kp = d->L.kp, kz = d->L.kz, k = kp + kz;
    double Hr[DS_MAX * DS_MAX], gr[DS_MAX], rhs[DS_MAX], dv[DS_MAX];
    nb_status st = reduce(d, fr, lambda, Hr, gr);
    if (st) return st;
    for (int a = 0; a < kp; a++) {
        rhs[a] = -gr[a];
        for (int c = 0; c < kz && dz; c++) rhs[a] -= Hr[a * DS_MAX + kp + c] * dz[c];
    }
    if (kp && !nb_fit_solve(kp, Hr, DS_MAX, rhs, dp))
        return nb_error_set(NB_ERR_DATA, "frame %ld: its parameters are not independent on its pixels (a singular "
                                         "system)", fr->index + 1);
    for (int a = 0; a < kp; a++) dv[a] = dp[a];
    for (int c = 0; c < kz; c++) dv[kp + c] = dz ? dz[c] : 0.0;
    for (int r = 0; r < fr->nregions; r++) {
        double Hb[9], b[3];
        const double *Hv = fr->Hbv + 3 * (size_t)k * r;
        memcpy(Hb, fr->Hbb + 9 * r, sizeof Hb);
        ds_plane_damp(Hb, lambda);
        for (int q = 0; q < 3; q++) {
            b[q] = -fr->gb[3 * r + q];
            for (int a = 0; a < k; a++) b[q] -= Hv[q * k + a] * dv[a];
        }
        if (!nb_fit_solve(3, Hb, 3, b, dbg + 3 * r)) return nb_error_set(NB_ERR_DATA, "a region's plane is singular");
    }
    return NB_OK;
}

int ds_frame_solvable(const ds *d, const ds_frame *fr, double lambda)
{
    double Hr[DS_MAX * DS_MAX], gr[DS_MAX], x[DS_MAX];
    if (reduce(d, fr, lambda, Hr, gr)) return 0;
    if (!d->L.kp) return 1;
    if (!nb_fit_solve(d->L.kp, Hr, DS_MAX, gr, x)) return 0;
    for (int j = 0; j < d->L.kp; j++)
        if (!isfinite(x[j])) return 0;
    return 1;
}

nb_status ds_frame_reduced(const ds *d, const ds_frame *fr, double *Hr, double *gr)
{
    return reduce(d, fr, 0.0, Hr, gr);
}

nb_status ds_frame_sigmas(const ds *d, const ds_frame *fr, double *sigma)
{
    const int kp = d->L.kp, kz = d->have_Sinv ? d->L.kz : 0;
    double Hr[DS_MAX * DS_MAX], gr[DS_MAX], X[DS_MAX][DS_MAX]; /* X = A^-1 B: kp x kz */
    nb_status st = reduce(d, fr, 0.0, Hr, gr);
    for (int c = 0; c < kz && !st; c++) {
        double col[DS_MAX], x[DS_MAX];
        for (int a = 0; a < kp; a++) col[a] = Hr[a * DS_MAX + kp + c];
        if (!nb_fit_solve(kp, Hr, DS_MAX, col, x)) return nb_error_set(NB_ERR_DATA, "a singular system");
        for (int a = 0; a < kp; a++) X[a][c] = x[a];
    }
    for (int j = 0; j < kp && !st; j++) {
        double unit[DS_MAX] = {0}, col[DS_MAX];
        unit[j] = 1.0;
        if (!nb_fit_solve(kp, Hr, DS_MAX, unit, col)) return nb_error_set(NB_ERR_DATA, "a singular system");
        double var = col[j];
        for (int a = 0; a < kz; a++)
            for (int b = 0; b < kz; b++) var += X[j][a] * d->Sinv[a * kz + b] * X[j][b];
        sigma[j] = sqrt(fabs(var));
    }
    return st;
}

int ds_owned(const ds *d, long i) { return nb_fit_owns(d->red, i, d->nframes); }

/* ---- the verdict ---------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The expected Poisson deviance of one pixel of mean mu. */
static double expected_deviance(double mu)
{
    if (mu > 30.0) return 1.0 + 1.0 / (6.0 * mu) + 1.0 / (6.0 * mu * mu);
    const int top = (int)(mu + 12.0 * sqrt(mu) + 25.0);
    double p = exp(-mu), e = p * 2.0 * mu;
    for (int y = 1; y <= top; y++) {
        p *= mu / y;
        e += p * nb_fit_deviance(y, mu);
    }
    return e;
}

/* The verdict's deviance is the median over the frame's regions of each
 * region's deviance over its expectation: a wrong crystal or detector puts
 * most regions off (spots where the image has none, photons where the model
 * has none), while a model that is right but for a few strong spots' F
 * (refined from partial observations) leaves most regions near 1, where
 * the frame's total would be ruled by its strongest pixels. */
/* The strong observed spots (at most STRONG_SPOTS of them, of
 * STRONG_PHOTONS or more above their background) and how many of them the
 * model has a spot at: a photon or more of Bragg scatter in the 5 x 5
 * pixels around the centroid.  A right crystal predicts nearly every strong
 * spot whatever its F (a flat F predicts every reflection); a wrong one, or
 * one whose scale the fit drove towards 0 to predict nothing, predicts
 * few of them, though the few it does predict may all be in the image. */
#define STRONG_SPOTS 100
#define STRONG_PHOTONS 30.0
#define MIN_CC 0.3      /* the spots' photons' correlation below which F disagree with them */
#define MIN_CC_SPOTS 10 /* ... judged over this many spots or more */
static void strong_spots_predicted(const ds *d, const ds_frame *fr, double scale, int *strong, int *predicted)
{
    float cut = (float)STRONG_PHOTONS;
    int n = 0;
    for (int s = 0; s < fr->nspots; s++) n += fr->spot_w[s] >= cut;
    if (n > STRONG_SPOTS) { /* the strongest STRONG_SPOTS: the cut raised to the weight of the last */
        float *w = malloc((size_t)n * sizeof *w);
        if (w) {
            int m = 0;
            for (int s = 0; s < fr->nspots; s++)
                if (fr->spot_w[s] >= cut) w[m++] = fr->spot_w[s];
            for (int i = 0; i < STRONG_SPOTS; i++) /* partial selection: the largest to the front */
                for (int j = i + 1; j < m; j++)
                    if (w[j] > w[i]) { const float t = w[i]; w[i] = w[j], w[j] = t; }
            cut = w[STRONG_SPOTS - 1];
            free(w);
        }
    }
    *strong = *predicted = 0;
    for (int s = 0; s < fr->nspots; s++) {
        if (fr->spot_w[s] < cut) continue;
        int fp, sp;
        size_t off;
        nb_plan_panel_dims(d->start, fr->spot_panel[s], &fp, &sp, &off);
        const int f0 = (int)floorf(fr->spot_f[s]), s0 = (int)floorf(fr->spot_s[s]);
        double model = 0.0;
        for (int ds_ = -2; ds_ <= 2; ds_++)
            for (int df = -2; df <= 2; df++) {
                const int f = f0 + df, r = s0 + ds_;
                if (f >= 0 && f < fp && r >= 0 && r < sp) model += scale * d->image[off + (size_t)r * fp + f];
            }
        ++*strong;
        *predicted += model >= 1.0;
    }
}

/* The verdict's deviance is the median over the frame's regions of each
 * region's deviance over its expectation: a wrong crystal or detector puts
 * most regions off (spots where the image has none, photons where the model
 * has none), while a model that is right but for a few strong spots' F
 * (refined from partial observations) leaves most regions near 1, where
 * the frame's total would be ruled by its strongest pixels.  A predicted
 * spot is judged explained only where half of it would stand three sigmas
 * out of its region's background (a spot of 10 photons on 100 of
 * background shows nothing either way). */
nb_status ds_verdict(ds *d, ds_frame *fr)
{
    double val[DS_KINDS];
    ds_values(d, fr, fr->p, d->z, val);
    /* per region: predicted Bragg photons, observed above the plane, deviance, its expectation, background */
    double *acc = calloc(5 * ((size_t)fr->nregions + 1), sizeof *acc);
    if (!acc) return nb_error_set(NB_ERR_NOMEM, "out of memory for the verdict");
    for (size_t i = 0; i < fr->npix; i++) {
        double *a = acc + 5 * fr->region[i];
        const double *b = fr->bg + 3 * fr->region[i], bragg = val[K_SCALE] * d->image[fr->pix[i]], y = fr->y[i];
        const double back = b[0] + b[1] * fr->dx[i] + b[2] * fr->dy[i];
        const double mu = fmax(bragg + back, NB_FIT_MU_FLOOR);
        a[0] += bragg;
        a[1] += y - fmax(back, 0.0);
        a[2] += nb_fit_deviance(y, mu);
        a[3] += expected_deviance(mu);
        a[4] += fmax(back, 0.0);
    }
    int spots = 0, judged = 0, explained = 0, nratio = 0;
    double m[5] = {0, 0, 0, 0, 0}; /* the spots' predicted and observed photons: sums for their correlation */
    for (int r = 0; r < fr->nregions; r++) {
        const double *a = acc + 5 * r;
        if (a[0] < 10.0) continue; /* too faint to judge */
        spots++;
        m[0] += a[0], m[1] += a[1], m[2] += a[0] * a[0], m[3] += a[1] * a[1], m[4] += a[0] * a[1];
        const double noise = 3.0 * sqrt(a[0] + a[4] + 1.0);
        if (0.5 * a[0] <= noise) continue;
        judged++;
        if (a[1] >= 0.5 * a[0] - noise) explained++;
    }
    for (int r = 0; r < fr->nregions; r++) /* the ratios packed to the front: nratio <= r */
        if (acc[5 * r + 3] > 0) acc[nratio++] = acc[5 * r + 2] / acc[5 * r + 3];
    qsort(acc, (size_t)nratio, sizeof *acc, cmp_double);
    fr->deviance_ratio = nratio ? acc[nratio / 2] : 0.0;
    free(acc);
    strong_spots_predicted(d, fr, val[K_SCALE], &fr->strong_spots, &fr->strong_predicted);
    const double vp = m[2] - m[0] * m[0] / (spots ? spots : 1), vo = m[3] - m[1] * m[1] / (spots ? spots : 1);
    fr->spot_cc = spots >= 3 && vp > 0 && vo > 0 ? (m[4] - m[0] * m[1] / spots) / sqrt(vp * vo) : NAN;
    fr->predicted_spots = judged;
    fr->explained_spots = explained;
    fr->explained = judged ? (double)explained / judged : 1.0;
    const double predicted = fr->strong_spots ? (double)fr->strong_predicted / fr->strong_spots : 1.0;
    /* few spots judge too little of a frame's own values to trust them; a
     * frame with none of its own (F, the shared values) is judged by its
     * pixels alone */
    const int own = ds_frame_owns_values(d);
    fr->no_spots = fr->nregions == 0;
    /* with F that tell reflections apart, a right crystal's spots are bright
     * where F is large: a crystal turned degrees away may still put spots
     * where the image has some (a dense lattice), but with others' F */
    const int uncorrelated = spots >= MIN_CC_SPOTS && isfinite(fr->spot_cc) && fr->spot_cc < MIN_CC &&
                             ds_F_informative(d->hkl);
    fr->failed = fr->no_spots ? (own ? DS_FAIL_NO_SPOTS : DS_FAIL_NONE)
                 : own && spots < 3 ? DS_FAIL_FEW_SPOTS
                 : fr->strong_spots >= 5 && predicted < d->o->min_explained ? DS_FAIL_UNPREDICTED
                 : judged >= 3 && fr->explained < d->o->min_explained ? DS_FAIL_UNEXPLAINED
                 : uncorrelated ? DS_FAIL_UNCORRELATED
                 : fr->deviance_ratio > d->o->max_deviance ? DS_FAIL_DEVIANCE : DS_FAIL_NONE;
    fr->few = spots;
    return NB_OK;
}

int ds_frame_owns_values(const ds *d)
{
    for (int j = 0; j < d->L.kp; j++)
        if (d->L.kind[j] != K_SCALE) return 1;
    return 0;
}

void ds_why(const ds *d, const ds_figures *v, char *buf, size_t size)
{
    switch (v->code) {
    case DS_FAIL_UNPREDICTED:
        snprintf(buf, size, "the model has %d of its %d strongest observed spots (%.0f %%; --min-explained %.0f %%)",
                 v->strong_predicted, v->strong, 100.0 * v->strong_predicted / (v->strong ? v->strong : 1),
                 100 * d->o->min_explained);
        break;
    case DS_FAIL_FEW_SPOTS:
        snprintf(buf, size, "%d predicted spot%s of 10 photons or more: too few to judge its own values", v->few,
                 v->few == 1 ? "" : "s");
        break;
    case DS_FAIL_UNEXPLAINED:
        snprintf(buf, size, "%d of %d predicted spots (%.0f %%) are in the observed image (--min-explained %.0f %%)",
                 v->explained, v->judged, 100.0 * v->explained / (v->judged ? v->judged : 1), 100 * d->o->min_explained);
        break;
    case DS_FAIL_DEVIANCE:
        snprintf(buf, size, "its deviance is %.2f times what Poisson counts of the model would give (--max-deviance "
                 "%.2f)", v->ratio, d->o->max_deviance);
        break;
    case DS_FAIL_UNCORRELATED:
        snprintf(buf, size, "its %d predicted spots' photons correlate %.2f with the observed ones (under %.1f: the "
                 "crystal puts spots where the image has some, but with other reflections' F)", v->few, v->cc, MIN_CC);
        break;
    case DS_FAIL_NO_SPOTS:
        snprintf(buf, size, "no spots, predicted or observed: nothing to refine its values on");
        break;
    case DS_FAIL_FIT:
        snprintf(buf, size, "its parameters could not be refined (a singular system: no spots, or spots that do not "
                 "depend on them)");
        break;
    default: snprintf(buf, size, "passed"); break;
    }
}

/* ---- a frame's equations kept while a step is tried (ds_ne_saved) ---- */

nb_status ds_ne_save(const ds *d, const ds_frame *fr, ds_ne_saved *s)
{
    const size_t k = (size_t)(d->L.kp + d->L.kz), nr = fr->nregions ? (size_t)fr->nregions : 1;
    if (s->cap < nr) {
        free(s->Hbb), free(s->Hbv), free(s->gb);
        s->Hbb = malloc(9 * nr * sizeof *s->Hbb), s->Hbv = malloc(3 * (k ? k : 1) * nr * sizeof *s->Hbv);
        s->gb = malloc(3 * nr * sizeof *s->gb);
        s->cap = s->Hbb && s->Hbv && s->gb ? nr : 0;
        if (!s->cap) return nb_error_set(NB_ERR_NOMEM, "out of memory");
    }
    memcpy(s->H, fr->H, sizeof s->H), memcpy(s->g, fr->g, sizeof s->g);
    s->nll = fr->nll;
    ds_copy(s->Hbb, fr->Hbb, 9 * (size_t)fr->nregions * sizeof *s->Hbb);
    ds_copy(s->Hbv, fr->Hbv, 3 * k * (size_t)fr->nregions * sizeof *s->Hbv);
    ds_copy(s->gb, fr->gb, 3 * (size_t)fr->nregions * sizeof *s->gb);
    return NB_OK;
}

void ds_ne_restore(const ds *d, ds_frame *fr, const ds_ne_saved *s)
{
    const size_t k = (size_t)(d->L.kp + d->L.kz);
    memcpy(fr->H, s->H, sizeof s->H), memcpy(fr->g, s->g, sizeof s->g);
    fr->nll = s->nll;
    ds_copy(fr->Hbb, s->Hbb, 9 * (size_t)fr->nregions * sizeof *s->Hbb);
    ds_copy(fr->Hbv, s->Hbv, 3 * k * (size_t)fr->nregions * sizeof *s->Hbv);
    ds_copy(fr->gb, s->gb, 3 * (size_t)fr->nregions * sizeof *s->gb);
}

void ds_ne_free(ds_ne_saved *s) { free(s->Hbb), free(s->Hbv), free(s->gb); }

/* ---- what the fit came to (nb_fit_dataset.h's result) ---- */

_Static_assert(NB_FIT_DS_NAMES == K_COUNT && NB_FIT_DS_SHARED == DS_KINDS, "the result names every kind");

void ds_row_why(const ds *d, const double *row, char *buf, size_t size)
{
    const ds_figures v = {(int)row[G_FAILED], row[G_RATIO], (int)row[G_FEW], (int)row[G_SPOTS], (int)row[G_EXPLAINED],
                          (int)row[G_STRONG], (int)row[G_STRONG_PREDICTED], row[G_CC]};
    ds_why(d, &v, buf, size);
}

void nb_fit_ds_result_free(nb_fit_ds_result *r)
{
    free(r->values), free(r->sigmas), free(r->failed), free(r->why);
    memset(r, 0, sizeof *r);
}

nb_status ds_result(const ds *d, const double *g, const double *zsigma, nb_fit_ds_result *res)
{
    const int kp = d->L.kp, kz = d->L.kz;
    const size_t n = (size_t)d->nframes;
    memset(res, 0, sizeof *res);
    res->nframes = d->nframes, res->kp = kp, res->kz = kz;
    res->values = calloc(n * (size_t)(kp ? kp : 1), sizeof *res->values);
    res->sigmas = calloc(n * (size_t)(kp ? kp : 1), sizeof *res->sigmas);
    res->failed = calloc(n, sizeof *res->failed);
    res->why = calloc(n, sizeof *res->why);
    if (!res->values || !res->sigmas || !res->failed || !res->why) {
        nb_fit_ds_result_free(res);
        return nb_error_set(NB_ERR_NOMEM, "out of memory for the fit's result");
    }
    for (int j = 0; j < kp + kz; j++) {
        const int k = d->L.kind[j];
        char *name = j < kp ? res->frame_name[j] : res->shared_name[j - kp];
        snprintf(name, sizeof res->frame_name[0], "%s", ds_kind_name(&d->L, k));
        if (j < kp) res->frame_unit[j] = ds_kind_unit(&d->L, k);
        else res->shared_unit[j - kp] = ds_kind_unit(&d->L, k), res->shared[j - kp] = d->z[j - kp],
             res->shared_sigma[j - kp] = zsigma[j - kp];
    }
    for (long i = 0; i < d->nframes; i++) {
        const double *row = g + i * G_WIDTH;
        const int fitted = !d->o->frame_first || (i + 1 >= d->o->frame_first && i + 1 <= d->o->frame_last);
        res->failed[i] = fitted ? (int)row[G_FAILED] : -1;
        for (int j = 0; j < kp; j++)
            res->values[i * kp + j] = row[G_VALUES + j], res->sigmas[i * kp + j] = row[G_SIGMAS + j];
        if (fitted && row[G_FAILED] != DS_FAIL_NONE) ds_row_why(d, row, res->why[i], sizeof res->why[i]);
    }
    return NB_OK;
}
