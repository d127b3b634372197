/* nb_resolve_crystal.c - nb_resolve()'s crystal steps, in the reference's
 * order (docs/physics.md 3-6): the interpolation chosen on N, the cell from
 * -cell or -mat and its misset (random: the plan's generator's first
 * draws), the crystal's size in cells and the oversampling it asks for, the
 * amorphous table checked, and the mosaic domains drawn after the misset
 * from the same generator.  The cell's maths are nb_cell.c's; the order and
 * the log lines are here. */
#include "nb_resolve.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nb_rng.h"
#include "nb_util.h"
#include "nb_vec.h"

/* 10: interpolation choice, on N as parsed */
void nb_resolve_interpolation(nb_resolve_state *s)
{
    nb_request *w = &s->w;
    if (w->interpolate > 1) {
        if (w->Na <= 2 || w->Nb <= 2 || w->Nc <= 2) {
            LOG("auto-selected tricubic interpolation of structure factors\n");
            w->interpolate = 1;
        } else {
            LOG("auto-selected no interpolation\n");
            w->interpolate = 0;
        }
    }
}

void nb_resolve_no_crystal(nb_resolve_state *s)
{
    nb_request *w = &s->w;
    LOG("no crystal: the plan holds the detector and the beam (--nonbragg)\n");
    memset(&s->v, 0, sizeof s->v);
    w->Na = w->Nb = w->Nc = 1.0;
    w->interpolate = 0;
}

/* 11: the reciprocal vectors from -cell, then from -mat when given */
static nb_status resolve_reciprocal_cell(nb_resolve_state *s)
{
    nb_request *w = &s->w;
    double *cell = s->cell;
    nb_cell_vectors *v = &s->v;
    memset(v->a_star, 0, sizeof v->a_star);
    memset(v->b_star, 0, sizeof v->b_star);
    memset(v->c_star, 0, sizeof v->c_star);
    memcpy(cell, w->cell, sizeof s->cell);
    v->V_cell = 0;
    if (w->user_cell) {
        if (cell[1] <= 0.0) cell[1] = cell[0];
        if (cell[2] <= 0.0) cell[2] = cell[0];
        for (int i = 3; i < 6; i++)
            if (cell[i] <= 0.0) cell[i] = M_PI / 2;
        v->V_cell = nb_cell_reciprocal(cell, v->a_star, v->b_star, v->c_star);
    }
    if (w->expt) {
        /* the list's first crystal (its frames' come into the plan at the end: nb_plan_take_expt_crystals) */
        double abc[3][3];
        nb_status st = nb_expt_first_cell(w->expt, w->beam, w->spindle, abc);
        if (st) return st;
        nb_cell_vectors real = {.V_cell = 0};
        memcpy(real.a, abc[0], sizeof real.a), memcpy(real.b, abc[1], sizeof real.b);
        memcpy(real.c, abc[2], sizeof real.c);
        double bxc[3], cxa[3], axb[3];
        nb_vcross(real.b, real.c, bxc), nb_vcross(real.c, real.a, cxa), nb_vcross(real.a, real.b, axb);
        double V = nb_vdot(real.a, bxc);
        if (!(fabs(V) > 0) || !isfinite(V)) return nb_error_set(NB_ERR_DATA, "-expt: the first crystal has no volume");
        for (int k = 0; k < 3; k++) v->a_star[k] = bxc[k] / V, v->b_star[k] = cxa[k] / V, v->c_star[k] = axb[k] / V;
        LOG("crystals from -expt: %d experiment%s\n", w->expt->n, w->expt->n == 1 ? "" : "s");
        return NB_OK;
    }
    if (w->matfile) {
        LOG("reading %s\n", w->matfile);
        return nb_cell_read_matrix(w->matfile, w->lambda0, v->a_star, v->b_star, v->c_star);
    }
    return NB_OK;
}

/* 11: the misset, random (the plan's generator's first draws) or given, applied to the reciprocal vectors */
static void resolve_misset(nb_resolve_state *s, nb_plan *plan)
{
    nb_request *w = &s->w;
    double *misset = s->misset;
    s->misset_mode = w->misset_mode;
    memcpy(misset, w->misset, sizeof s->misset);
    plan->rng = (nb_rng){0};
    nb_rng_init(&plan->rng);
    s->misset_seed = w->misset_seed, s->mosaic_seed = w->mosaic_seed;
    if (s->misset_mode == -1) {
        double umat[9];
        /* the reference passes 90 meaning degrees, but the function takes
         * radians: keep it for identical orientations (docs/physics.md 3.3) */
        nb_mosaic_rotation_umat(&plan->rng, 90.0f, umat, &s->misset_seed);
        nb_umat2misset(umat, misset);
        LOG("random orientation misset angles: %f %f %f deg\n", misset[0] * NB_RTD, misset[1] * NB_RTD,
            misset[2] * NB_RTD);
        s->misset_mode = 1;
    }
    if (s->misset_mode > 0) {
        nb_rotate_xyz(s->v.a_star, s->v.a_star, misset[0], misset[1], misset[2]);
        nb_rotate_xyz(s->v.b_star, s->v.b_star, misset[0], misset[1], misset[2]);
        nb_rotate_xyz(s->v.c_star, s->v.c_star, misset[0], misset[1], misset[2]);
    }
}

/* 11: the cell's lengths and angles (nb_cell_parameters warns of odd ones),
 * logged and into the plan; then the real-space vectors in metres */
static void report_cell(nb_resolve_state *s, nb_plan *plan)
{
    const nb_cell_vectors *v = &s->v;
    const double *a = v->a, *b = v->b, *c = v->c, *a_star = v->a_star, *b_star = v->b_star, *c_star = v->c_star;
    double cell[6], recip[6];
    nb_cell_parameters(v, cell, recip);
    LOG("Unit Cell: %g %g %g %g %g %g\n", cell[0], cell[1], cell[2], cell[3] * NB_RTD, cell[4] * NB_RTD,
        cell[5] * NB_RTD);
    LOG("Recp Cell: %g %g %g %g %g %g\n", recip[0], recip[1], recip[2], recip[3] * NB_RTD, recip[4] * NB_RTD,
        recip[5] * NB_RTD);
    LOG("volume = %g A^3\n", v->V_cell);
    LOG("real-space cell vectors (Angstrom):\n");
    LOG("     %-10s  %-10s  %-10s\n", "a", "b", "c");
    LOG("X: %11.8f %11.8f %11.8f\n", a[0], b[0], c[0]);
    LOG("Y: %11.8f %11.8f %11.8f\n", a[1], b[1], c[1]);
    LOG("Z: %11.8f %11.8f %11.8f\n", a[2], b[2], c[2]);
    LOG("reciprocal-space cell vectors (Angstrom^-1):\n");
    LOG("     %-10s  %-10s  %-10s\n", "a_star", "b_star", "c_star");
    LOG("X: %11.8f %11.8f %11.8f\n", a_star[0], b_star[0], c_star[0]);
    LOG("Y: %11.8f %11.8f %11.8f\n", a_star[1], b_star[1], c_star[1]);
    LOG("Z: %11.8f %11.8f %11.8f\n", a_star[2], b_star[2], c_star[2]);
    plan->unit_cell[0] = cell[0], plan->unit_cell[1] = cell[1], plan->unit_cell[2] = cell[2];
    for (int i = 3; i < 6; i++) plan->unit_cell[i] = cell[i] * NB_RTD;
    for (int i = 0; i < 3; i++) {
        s->v.a[i] = 1e-10 * s->v.a[i];
        s->v.b[i] = 1e-10 * s->v.b[i];
        s->v.c[i] = 1e-10 * s->v.c[i];
    }
}

/* 11: the cell, oriented */
nb_status nb_resolve_crystal(nb_resolve_state *s, nb_plan *plan)
{
    nb_status st;
    if ((st = resolve_reciprocal_cell(s))) return st;
    resolve_misset(s, plan);
    /* real-space vectors from the reciprocal ones (the user's edge lengths
     * kept exact), and the reciprocal ones again from those */
    if ((st = nb_cell_real_from_reciprocal(&s->v, s->w.user_cell ? s->cell : NULL))) return st;
    report_cell(s, plan);
    return NB_OK;
}

/* 12: crystal size to N, then the oversampling the crystal and pixel ask for */
nb_status nb_resolve_crystal_size(nb_resolve_state *s)
{
    nb_request *w = &s->w;
    if (w->sample_x > 0) w->Na = ceil(w->sample_x / nb_vnorm(s->v.a));
    if (w->sample_y > 0) w->Nb = ceil(w->sample_y / nb_vnorm(s->v.b));
    if (w->sample_z > 0) w->Nc = ceil(w->sample_z / nb_vnorm(s->v.c));
    if (w->Na <= 1.0) w->Na = 1.0;
    if (w->Nb <= 1.0) w->Nb = 1.0;
    if (w->Nc <= 1.0) w->Nc = 1.0;
    if (w->Na > 1e6 || w->Nb > 1e6 || w->Nc > 1e6)
        return nb_error_set(NB_ERR_USAGE, "absurd crystal: %g x %g x %g unit cells", w->Na, w->Nb, w->Nc);
    double xa = nb_vnorm(s->v.a) * w->Na, xb = nb_vnorm(s->v.b) * w->Nb, xc = nb_vnorm(s->v.c) * w->Nc;
    LOG("crystal is %g x %g x %g microns\n", xa * 1e6, xb * 1e6, xc * 1e6);
    double xmax = xa;
    if (xmax < xb) xmax = xb;
    if (xmax < xc) xmax = xc;
    double reciprocal_pixel_size = w->lambda0 * w->distance / w->pixel_size;
    double rec = ceil(3.0 * xmax / reciprocal_pixel_size);
    /* NaN (an infinite crystal over an infinite pixel) falls to 1, as <= 0 does */
    int recommended = rec > 1e6 ? 1000000 : rec >= 1.0 ? (int)rec : 1;
    if (w->oversample <= 0) {
        w->oversample = recommended;
        LOG("auto-selected %d-fold oversampling\n", w->oversample);
    }
    if (w->oversample < recommended)
        nb_warn("maximum dimension of sample is %g A but reciprocal pixel size is %g A: intensity may vary "
                "significantly across a pixel! recommend -oversample %d to work around this",
                xmax * 1e10, reciprocal_pixel_size * 1e10, recommended);
    if (w->oversample > 1000)
        return nb_error_set(NB_ERR_USAGE, "oversampling of %d x %d sub-pixels per pixel is absurd (give -oversample)",
                            w->oversample, w->oversample);
    LOG("approximate MW = %g\n", xa * xb * xc * 1.2e6 * NB_AVOGADRO / (w->Na * w->Nb * w->Nc));
    return NB_OK;
}

/* 14: an amorphous table is read and checked, then never used */
nb_status nb_resolve_check_stol_file(const nb_request *w)
{
    if (!w->stolfile) return NB_OK;
    char *text;
    size_t len;
    nb_status st;
    if ((st = nb_read_file(w->stolfile, &text, &len))) return st;
    int any = 0;
    for (size_t i = 0; i < len; i++)
        if (!isspace((unsigned char)text[i])) any = 1;
    free(text);
    if (!any) return nb_error_set(NB_ERR_DATA, "'%s': no data in the file", w->stolfile);
    nb_warn("'%s' is read but not used for the image (as in the reference)", w->stolfile);
    return NB_OK;
}

/* 16: mosaic domains, drawn after the random misset from the same generator
 * (domain 0 is forced to the identity, after its draw) */
nb_status nb_resolve_mosaic(nb_resolve_state *s, nb_plan *plan)
{
    const nb_request *w = &s->w;
    nb_status st;
    if ((st = nb_calloc((void **)&plan->mosaic_umats, (size_t)w->mosaic_domains, 9 * sizeof(double),
                        "mosaic matrices")))
        return st;
    /* no crystal: no domains drawn (the generator is left as nonBragg has it) */
    for (int d = 0; d < w->mosaic_domains && s->no_crystal; ++d) {
        double *U = plan->mosaic_umats + 9 * d;
        U[0] = U[4] = U[8] = 1.0;
    }
    for (int d = 0; d < w->mosaic_domains && !s->no_crystal; ++d) {
        double *U = plan->mosaic_umats + 9 * d;
        nb_mosaic_rotation_umat(&plan->rng, (float)w->mosaic_spread, U, &s->mosaic_seed);
        if (d == 0) {
            memset(U, 0, 9 * sizeof(double));
            U[0] = U[4] = U[8] = 1.0;
        }
    }
    LOG("  created a total of %d mosaic domains\n", w->mosaic_domains);
    return NB_OK;
}
