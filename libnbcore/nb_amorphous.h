/* nb_amorphous.h - the scatter of an amorphous sample, as the reference's
 * nonBragg computes it (docs/physics.md section 17): F of one molecule
 * against sin(theta)/lambda from a table, interpolated through four points,
 * and the molecules of the illuminated sample from its size, density and
 * molecular weight.  No physics of the kernels here: formats/stol.c reads
 * the table into an nb_stol_table through this header, and formats/ never
 * reaches the kernels' pixel.  The pixel, which takes its geometry from the
 * double pixel's terms (engine/physics/nb_physics.h), is the engine's:
 * engine/nb_amorphous_render.h (nb_amorphous_pixel), which nb-amorphous
 * renders with. */
#ifndef NB_AMORPHOUS_H
#define NB_AMORPHOUS_H

#include "nb_error.h"

/* What a table's first column is (nonBragg's -stol, -4stol, -Q): sin(theta)/lambda,
 * 4 sin(theta)/lambda or Q = 4 pi sin(theta)/lambda, all in 1/Angstrom. */
typedef enum nb_stol_axis { NB_STOL_AXIS_STOL, NB_STOL_AXIS_4STOL, NB_STOL_AXIS_Q } nb_stol_axis;

/* A table as read: n rows of x (the first column, in the file's unit) and F
 * (NAN where a row gives none: nonBragg takes it as 0), and the line each
 * row came from (for messages). */
typedef struct nb_stol_table {
    int n;
    double *x, *F;
    int *line;
} nb_stol_table;
void nb_stol_table_free(nb_stol_table *t);

/* The curve the pixel interpolates, as the reference lays it out: the rows
 * in sin(theta)/lambda (1/m), between two points at -1e99 and -1e98 with the
 * first row's F and two at 1e98 and 1e99 with the last row's (n = rows + 4). */
typedef struct nb_amorphous_curve {
    int n;
    double *stol, *F;
    int increasing; /* sin(theta)/lambda increases from row to row */
} nb_amorphous_curve;

/* The curve of table t read on `axis` (name: the table's, for messages).
 * Refused: no row with an F, and two rows with the same sin(theta)/lambda
 * within four (the interpolation through them divides by zero); a table
 * that is not increasing is taken with a warning (docs/deviations.md 5.2). */
nb_status nb_amorphous_curve_build(const nb_stol_table *t, nb_stol_axis axis, const char *name,
                                   nb_amorphous_curve *c);
void nb_amorphous_curve_free(nb_amorphous_curve *c);
/* F at sin(theta)/lambda stol (1/m): the four-point Lagrange polynomial
 * through the points k-1 .. k+2 (the reference's polint).  k is where the
 * reference's walk stops: with walk (its state, 0 before the first
 * evaluation, carried from one evaluation to the next in the reference's
 * order) by that walk; without, the last point at or below stol, where the
 * walk stops on an increasing table from any start. */
double nb_amorphous_F(const nb_amorphous_curve *c, double stol, int *walk);

/* The sample: a box, thick along the beam, width x height across it. */
typedef struct nb_amorphous_sample {
    double thick, width, height;  /* m: nonBragg's sample_x, sample_y, sample_z */
    double density;               /* g/m^3 */
    double molecular_weight;      /* g/mol */
    double molecules;             /* given (0: from the density), then resolved */
} nb_amorphous_sample;

/* nonBragg's defaults: a 0.1 mm cube of density 1 g/cm^3 and 18 g/mol. */
void nb_amorphous_sample_defaults(nb_amorphous_sample *s);
/* Clip the sample's width and height to the beam (beamsize >= 0, m) with
 * nonBragg's warnings, then the molecules as nonBragg works them out (a
 * given count sets the density first).  Refuses a sample with no volume or
 * a non-positive molecular weight. */
nb_status nb_amorphous_sample_resolve(nb_amorphous_sample *s, double beamsize);

#endif
