/* nb_amorphous.c - nonBragg's amorphous sample (docs/physics.md section 17):
 * its table laid out as the reference interpolates it, F interpolated on it,
 * and the molecules of the illuminated sample.  The pixel that sums them is
 * the engine's (engine/nb_amorphous_render.c): it needs the kernels' physics,
 * which the core does not include. */
#include "nb_amorphous.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nb_constants.h"
#include "nb_util.h"

/* the reference's four-point polint, in double: the one the kernels' pixel
 * interpolates its structure factors with (nb_polint.inc) */
#define DR_INLINE static inline
#define DRF(name) amorphous_##name
#define DR double
#define DR_C(x) ((double)(x))
#define DR_ADD(a, b) ((a) + (b))
#define DR_SUB(a, b) ((a) - (b))
#define DR_MUL(a, b) ((a) * (b))
#define DR_DIV(a, b) ((a) / (b))
#include "nb_polint.inc"
#undef DR_INLINE
#undef DRF
#undef DR
#undef DR_C
#undef DR_ADD
#undef DR_SUB
#undef DR_MUL
#undef DR_DIV

void nb_stol_table_free(nb_stol_table *t)
{
    free(t->x);
    free(t->F);
    free(t->line);
    memset(t, 0, sizeof *t);
}

void nb_amorphous_curve_free(nb_amorphous_curve *c)
{
    free(c->stol);
    free(c->F);
    memset(c, 0, sizeof *c);
}

/* The factor from the file's first column to sin(theta)/lambda in 1/m, as
 * the reference writes it (1e10/M_PI/4 is its -Q's, in that order). */
static double axis_factor(nb_stol_axis axis)
{
    switch (axis) {
    case NB_STOL_AXIS_4STOL: return 1e10 / 4;
    case NB_STOL_AXIS_Q: return 1e10 / M_PI / 4;
    default: return 1.0e10;
    }
}

nb_status nb_amorphous_curve_build(const nb_stol_table *t, nb_stol_axis axis, const char *name,
                                   nb_amorphous_curve *c)
{
    memset(c, 0, sizeof *c);
    if (t->n < 1) return nb_error_set(NB_ERR_DATA, "'%s': no data in the table", name);
    const double mult = axis_factor(axis);
    const int n = t->n + 4;
    nb_status st = nb_calloc((void **)&c->stol, (size_t)n, sizeof(double), "the amorphous table");
    if (!st) st = nb_calloc((void **)&c->F, (size_t)n, sizeof(double), "the amorphous table");
    if (st) {
        nb_amorphous_curve_free(c);
        return st;
    }
    c->n = n;
    /* the reference's F_lowangle and F_highangle: the first and the last F
     * given; a row without one counts as 0 between them */
    double F_low = NAN, F_high = NAN;
    int missing = 0;
    for (int i = 0; i < t->n; i++) {
        c->stol[i + 2] = t->x[i] * mult;
        if (isnan(t->F[i])) {
            c->F[i + 2] = 0.0;
            if (!missing) missing = t->line[i];
            continue;
        }
        c->F[i + 2] = t->F[i];
        if (isnan(F_low)) F_low = t->F[i];
        F_high = t->F[i];
    }
    /* four rows with two the same sin(theta)/lambda: the interpolation
     * through them divides by zero (NaN pixels in the reference) */
    for (int i = 0; i < t->n; i++)
        for (int j = i + 1; j < t->n && j < i + 4; j++)
            if (c->stol[i + 2] == c->stol[j + 2]) {
                nb_status e = nb_error_set(NB_ERR_DATA,
                                           "'%s' lines %d and %d: the same sin(theta)/lambda (%g) within four rows: "
                                           "the interpolation through them would divide by zero",
                                           name, t->line[i], t->line[j], t->x[i]);
                nb_amorphous_curve_free(c);
                return e;
            }
    c->increasing = 1;
    for (int i = 1; i < t->n && c->increasing; i++)
        if (!(c->stol[i + 2] > c->stol[i + 1])) {
            c->increasing = 0;
            nb_warn("'%s' line %d: sin(theta)/lambda decreases (%g after %g): where it does, the reference's "
                    "interpolation depends on the pixel before; rendered on one thread, in its pixel order",
                    name, t->line[i], t->x[i], t->x[i - 1]);
        }
    if (isnan(F_low)) {
        nb_amorphous_curve_free(c);
        return nb_error_set(NB_ERR_DATA, "'%s': no row gives an F (two columns: sin(theta)/lambda and F)", name);
    }
    if (missing) nb_warn("'%s' line %d (and maybe others) gives no F: taken as 0, as nonBragg does", name, missing);
    c->stol[0] = -1e99;
    c->stol[1] = -1e98;
    c->F[0] = c->F[1] = F_low;
    c->stol[n - 2] = 1e98;
    c->stol[n - 1] = 1e99;
    c->F[n - 2] = c->F[n - 1] = F_high;
    return NB_OK;
}

double nb_amorphous_F(const nb_amorphous_curve *c, double stol, int *walk)
{
    int k;
    if (walk) {
        /* the reference's walk from where the last evaluation left it */
        k = *walk;
        while (k < c->n - 1 && stol > c->stol[k]) ++k;
        while (stol < c->stol[k] && k >= 2) --k;
        *walk = k;
    } else {
        /* the last point at or below stol, within 1 .. n-3: where the walk
         * stops on an increasing table, wherever it starts */
        int lo = 1, hi = c->n - 3;
        while (lo < hi) {
            int mid = lo + (hi - lo + 1) / 2;
            if (c->stol[mid] <= stol) lo = mid;
            else hi = mid - 1;
        }
        k = lo;
    }
    return amorphous_polint(c->stol + k - 1, c->F + k - 1, stol);
}

void nb_amorphous_sample_defaults(nb_amorphous_sample *s)
{
    s->thick = s->width = s->height = 1e-4;
    s->density = 1.0e6;
    s->molecular_weight = 18.0;
    s->molecules = 0.0;
}

nb_status nb_amorphous_sample_resolve(nb_amorphous_sample *s, double beamsize)
{
    if (beamsize >= 0) {
        if (beamsize < s->width) {
            nb_warn("clipping sample (%g m high) with beam (%g m)", s->width, beamsize);
            s->width = beamsize;
        }
        if (beamsize < s->height) {
            nb_warn("clipping sample (%g m wide) with beam (%g m)", s->height, beamsize);
            s->height = beamsize;
        }
    }
    double volume = s->thick * s->width * s->height;
    if (!(volume > 0) || !isfinite(volume))
        return nb_error_set(NB_ERR_USAGE, "the amorphous sample has no volume (%g x %g x %g m)", s->thick, s->width,
                            s->height);
    if (!(s->molecular_weight > 0))
        return nb_error_set(NB_ERR_USAGE, "the molecular weight must be positive (got %g g/mol)",
                            s->molecular_weight);
    if (s->molecules != 0) s->density = s->molecules / volume / NB_AVOGADRO * s->molecular_weight;
    s->molecules = volume * s->density * NB_AVOGADRO / s->molecular_weight;
    return NB_OK;
}
