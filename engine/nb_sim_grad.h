/* nb_sim_grad.h - nb-sim --grad: derivatives of the image with respect to
 * the plan's named parameters (nb_params.h).
 *
 * The derivative of a pixel with respect to, say, distance is the chain of
 * two parts.  The plan's part (how the detector vectors, sources, rotated
 * cells ... move when the parameter moves) is taken from the plans the
 * parameter's setter makes with it moved by +-h and +-2h: a five-point
 * central difference of smooth closed-form functions, exact to ~1e-11
 * (docs/physics.md, section 14).  The pixel's part is exact: the double
 * pixel in dual numbers (nb_physics_dual.h), fed those tangents.
 */
#ifndef NB_SIM_GRAD_H
#define NB_SIM_GRAD_H

#include "nb_hkl.h"
#include "nb_params.h"
#include "nb_physics_fgrad.h"
#include "nb_plan.h"
#include "nb_sim.h"
#include "nb_sim_cuda.h"

/* At most this many names in one list. */
#define NB_GRAD_MAX_NAMES 64

/* A comma-separated list of parameter names (nb_params.h), checked
 * (unknown and repeated names are usage errors). */
typedef struct nb_grad_list {
    int n;
    nb_param *param;
} nb_grad_list;
nb_status nb_grad_list_parse(const char *list, nb_grad_list *out);
void nb_grad_list_free(nb_grad_list *l);

/* The plans around a plan, for each name: the parameter at its value (which
 * must reproduce the plan) and at -2h, -h, +h, +2h; each shares the plan's
 * masks, domains and strings (nb_param_plan_copy): free them before it. */
enum { NB_GRAD_STENCIL = 5 };
typedef struct nb_grad_plans {
    nb_grad_list names;
    double *step;                             /* h per name, in its unit */
    nb_plan (*plans)[NB_GRAD_STENCIL];        /* per name: 0, -2h, -h, +h, +2h */
} nb_grad_plans;

/* Make them.  A name that does not apply to the plan (the mosaic of a plan
 * without domains, a panel it does not have ...) is an error that says why. */
nb_status nb_grad_plans_build(const nb_plan *plan, const nb_grad_list *names, nb_grad_plans *out);
void nb_grad_plans_free(nb_grad_plans *g);

/* The names' values in the plan (their units), and a copy of the plan (its
 * own: nb_plan_free) with them set to `values`, in the table's order: nb-fit's
 * parameters. */
nb_status nb_grad_values(const nb_plan *plan, const nb_grad_list *names, double *values);
nb_status nb_grad_plan_at(const nb_plan *plan, const nb_grad_list *names, const double *values, nb_plan *out);


/* The dual inputs of one frame and panel for names [first, first + count)
 * (count <= NB_DUAL_N): values from `base` (the kernel inputs of the plan as
 * given), tangents from the stencil's plans. */
typedef struct nb_kdual_store {
    nb_kdual k;
    nb_dual *storage; /* every followed value; k's arrays point into it */
} nb_kdual_store;
nb_status nb_grad_kdual_build(const nb_grad_plans *g, int first, int count, long frame, int panel,
                              const nb_kparams *base, const nb_hkl *hkl, nb_kdual_store *out);
void nb_kdual_store_free(nb_kdual_store *s);

/* The fast path's tangents (nb_fgrad, nb_physics_fgrad.h) from the double
 * path's (k, nd of them), with fp's per-(source, cell) constants; *storage:
 * what dA, dhi, dAaxes and the CPU's row scratch point into (the caller frees
 * it).  What the fast path does not follow (the sources' directions) is
 * refused by name. */
nb_status nb_fgrad_build(const nb_fparams *fp, const nb_kdual *k, int nd, nb_fgrad *out, float **storage);

/* Which pixel the derivatives are taken of: the double path's (the
 * reference-faithful oracle) or the fast path's (single precision). */
typedef enum nb_grad_path { NB_GRAD_DOUBLE, NB_GRAD_FAST } nb_grad_path;

/* The image and the derivatives of every name of g for one frame and panel
 * (kp: that panel's kernel inputs), NB_DUAL_N names a pass (the image with
 * the first), on the CPU or, with cuda (not NULL), the GPU (the fast path
 * there one pixel a thread, nb_pixel_fast_grad); grads[j] is name j's
 * pixels (NULL with res->wide: those alone).  res->wide (the double path
 * on the CPU only; else NB_ERR_UNSUPPORTED): the image and derivatives in
 * double too.  res->vjp: in place of grads (NULL), the derivatives' product
 * with its weights (the fast path on the CPU forms it in the rows; the others
 * render into its scratch first).  res->seconds: all passes. */
nb_status nb_render_grads(const nb_grad_plans *g, nb_grad_path path, long frame, int panel, const nb_kparams *kp,
                          const nb_hkl *hkl, nb_cuda *cuda, float *image, float **grads, nb_render_result *res,
                          nb_progress *prog);

/* The fast path's image (its kernel's, to the last bit or so; NULL: not
 * wanted) and its derivatives grads[0 .. nd-1] on the CPU (sources that do
 * not move: else an error naming why). */
nb_status nb_render_cpu_fast_grad(const nb_kparams *kp, const nb_kdual *k, int nd, float *image, float **grads,
                                  nb_render_result *res, nb_progress *prog);

/* Render the image (the double path's, bit for bit) and its derivatives
 * grads[0 .. nd-1] (nd <= NB_DUAL_N; image may be NULL, grads too with
 * res->wide) on the CPU, OpenMP over rows; 0 outside the ROI and mask;
 * with res->wide, in double too. */
nb_status nb_render_cpu_grad(const nb_kparams *kp, const nb_kdual *k, int nd, float *image, float **grads,
                             nb_render_result *res, nb_progress *prog);

#endif
