/* nb_params.h - the named parameters of a resolved plan: one table of every
 * quantity the tools and the library move by name (nb-sim --grad, nb-fit
 * --refine and --refine-frame, nb_renderer_set_derivatives), each with its
 * unit, how it is read from a plan and set on one, and the step its
 * derivative's stencil takes.
 *
 * A parameter acts on the plan itself, not on the command that made it: a
 * plan made from nanoBragg's flags, from a DIALS experiment list, a -panels
 * file, an -img header or in memory is moved the same way (its COMMAND stays
 * as provenance).  The derivative of an image with respect to a parameter is
 * then the pixel's exact dual-number derivative fed the tangents of the
 * kernels' inputs, a five-point central difference of the plans the setter
 * makes around the value (engine/nb_sim_grad.c; docs/physics.md 14).
 *
 * One meaning per name; docs/physics.md 14 says each in full.  A plan's
 * crystal parameters move every crystal it holds: its own and each frame
 * crystal's (-expt stills, nb-fit --refine-frame's results), each by the same
 * step from its own value.  Parameters whose value is "from the plan as it
 * is" (rot_*, scale, panel<i>_*) read 0 (scale 1) on every plan.
 */
#ifndef NB_PARAMS_H
#define NB_PARAMS_H

#include "nb_error.h"
#include "nb_plan.h"

/* What a parameter moves. */
typedef enum nb_param_scope {
    NB_PARAM_CRYSTAL,  /* every crystal of the plan (per frame in a dataset fit) */
    NB_PARAM_BEAM,     /* the beam: wavelength, fluence, the image's scale */
    NB_PARAM_DETECTOR, /* every panel together */
    NB_PARAM_PANEL     /* one panel: panel<i>_... */
} nb_param_scope;

typedef struct nb_param_row nb_param_row;

/* One parameter: a row of the table and, for a panel's, the panel. */
typedef struct nb_param {
    const nb_param_row *row;
    int panel;     /* panel<i>_...: i (0-based, as PANEL<i> keys); else -1 */
    char name[48]; /* as written: "distance", "panel3_shift_fast" */
} nb_param;

/* The parameter of a name; an unknown name (or a panel beyond 9999) is a
 * usage error naming the known ones.  Whether the panel exists is the
 * plan's business (nb_param_get, nb_param_set say). */
nb_status nb_param_lookup(const char *name, nb_param *out);
const char *nb_param_name(const nb_param *p);
const char *nb_param_unit(const nb_param *p);
nb_param_scope nb_param_scope_of(const nb_param *p);
/* The table's rows: how many, and row i's name as lists write it (a
 * panel's "panel<i>_shift_fast"; NULL beyond the table). */
int nb_param_rows(void);
const char *nb_param_row_listed(int i);
/* Where a parameter comes in the table: plans set several in this order. */
int nb_param_order(const nb_param *p);

/* The parameter's value in the plan, in its unit; an error where the plan
 * has no such thing (no mosaic spread, no panel i, ...), saying why. */
nb_status nb_param_get(const nb_plan *plan, const nb_param *p, double *value);
/* Set it, moving what it moves.  The plan's panels, sources, frame crystals
 * and frame mosaic must be its own to change (nb_plan_copy, or
 * nb_param_plan_copy). */
nb_status nb_param_set(nb_plan *plan, const nb_param *p, double value);
/* The central difference's step for the parameter at a value. */
double nb_param_step(const nb_param *p, double value);

/* A copy of plan whose arrays the setters change (panels, sources, frame
 * crystals, frame mosaic) are its own, the rest shared with plan (masks,
 * mosaic domains, strings): free it with nb_param_plan_free, never
 * nb_plan_free, before plan. */
nb_status nb_param_plan_copy(const nb_plan *plan, nb_plan *out);
void nb_param_plan_free(nb_plan *p);

#endif
