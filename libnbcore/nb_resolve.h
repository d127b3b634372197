/* nb_resolve.h - inside nb_resolve(): the state its steps share and the
 * steps that live in files of their own.  Not for the tools: nb_geometry.h
 * is the interface.
 *
 *   nb_resolve.c          the order of the steps; the detector, the beam
 *                         and its sources, the sampling
 *   nb_resolve_crystal.c  the crystal: cell, misset, size, mosaic domains
 *   nb_resolve_plan.c     the resolved values into the plan, and -v's summary
 */
#ifndef NB_RESOLVE_H
#define NB_RESOLVE_H

#include <stdint.h>

#include "nb_cell.h"
#include "nb_constants.h"
#include "nb_geometry.h"

/* What the steps of nb_resolve() share.  `w` is the working copy of the
 * request: the reference updates its variables in place, and later steps
 * see what earlier ones made of them.  The rest are the values a step
 * derives for a later one or for the plan. */
typedef struct nb_resolve_state {
    nb_request w;
    nb_strbuf *log;
    int pivot_asked;            /* the pivot came from the user, not from a convention flag */
    double Fclose, Sclose, Fbeam, Sbeam;
    double vert[3];             /* beam x polar: the axis of horizontal divergence */
    double pix0[3], ORGX, ORGY, dials_origin[3];
    double cell[6];             /* the user's cell, its missing values filled in */
    nb_cell_vectors v;          /* the cell's vectors: Angstrom, then (after the report) metres */
    double misset[3];
    int misset_mode;
    int64_t misset_seed, mosaic_seed; /* the generators' running seeds */
    int divsteps, nsources;
    int no_crystal;             /* --nonbragg without -cell or -mat: the plan's cell is zero */
} nb_resolve_state;

/* a line of the reference's console log (nb-geom -v), in a step with `s` */
#define LOG(...) nb_strbuf_printf(s->log, __VA_ARGS__)

/* the convention's name as the plan and the log spell it */
const char *nb_convention_name(int convention);

/* nb_resolve_crystal.c, in this order */
void nb_resolve_interpolation(nb_resolve_state *s);
/* --nonbragg without a crystal: no cell (zero vectors), one cell, no interpolation */
void nb_resolve_no_crystal(nb_resolve_state *s);
nb_status nb_resolve_crystal(nb_resolve_state *s, nb_plan *plan);
nb_status nb_resolve_crystal_size(nb_resolve_state *s);
nb_status nb_resolve_check_stol_file(const nb_request *w);
nb_status nb_resolve_mosaic(nb_resolve_state *s, nb_plan *plan);

/* nb_resolve_plan.c */
void nb_resolve_log_summary(const nb_resolve_state *s, const nb_plan *plan);
nb_status nb_resolve_plan_detector(const nb_resolve_state *s, nb_plan *plan);
void nb_resolve_plan_beam_and_crystal(const nb_resolve_state *s, nb_plan *plan);
void nb_resolve_plan_requests(const nb_resolve_state *s, nb_plan *plan);

#endif
