/* nb_cell.h - the unit cell's maths, as the reference does it: the
 * reciprocal vectors of a cell's parameters, the real-space vectors of
 * reciprocal ones (and back), the parameters of a set of vectors, and the
 * vectors of a MOSFLM orientation matrix.  No state: nb_resolve's crystal
 * step (nb_resolve_crystal.c) calls these in the reference's order. */
#ifndef NB_CELL_H
#define NB_CELL_H

#include "nb_error.h"

/* A cell's vectors, real (Angstrom) and reciprocal (1/Angstrom), and its
 * volumes as the reference computes them (V_star need not be 1/V_cell to
 * the last bit). */
typedef struct nb_cell_vectors {
    double a[3], b[3], c[3];
    double a_star[3], b_star[3], c_star[3];
    double V_cell, V_star; /* Angstrom^3, 1/Angstrom^3 */
} nb_cell_vectors;

/* Reciprocal vectors (1/Angstrom) of a cell given as a b c (Angstrom) and
 * alpha beta gamma (radians) in the reference's default orientation:
 * a* along x, b* in the xy plane.  Returns the volume (Angstrom^3).  An
 * impossible cell is warned about and carried on with, as the reference
 * does. */
double nb_cell_reciprocal(const double cell[6], double a_star[3], double b_star[3], double c_star[3]);

/* The reciprocal vectors of a MOSFLM orientation matrix file (nine numbers:
 * rows x, y, z of the columns a*, b*, c*, times the wavelength lambda0 in
 * metres, which is taken out). */
nb_status nb_cell_read_matrix(const char *path, double lambda0, double a_star[3], double b_star[3],
                              double c_star[3]);

/* The real-space vectors of v's reciprocal ones, then the reciprocal ones
 * again from those, with the volumes (the reference's round trip).  With
 * `lengths` (a user's cell: a b c in Angstrom, and v->V_cell the volume its
 * nb_cell_reciprocal gave) the real edges keep those lengths exactly.  A
 * degenerate cell (zero or infinite volume) is an error. */
nb_status nb_cell_real_from_reciprocal(nb_cell_vectors *v, const double *lengths);

/* The real cell (columns a b c, Angstrom, row-major) of parameters `cell`
 * (a b c in Angstrom, alpha beta gamma in degrees) in the standard
 * orientation a along x, b in the xy plane: a crystal's orientation U is
 * its cell vectors times this one's inverse, so that a change of the cell
 * alone changes no U (the named parameters cell_*, nb-fit's frames, and
 * bench/dataset/evaluate.py's orientation error).  No such cell: an error. */
nb_status nb_cell_standard(const double cell[6], double S[9]);

/* The cell's parameters from its vectors: cell = a b c (Angstrom) alpha
 * beta gamma (radians), recip = a* b* c* (1/Angstrom) and their angles;
 * sines and cosines out of range are warned about, then clamped. */
void nb_cell_parameters(const nb_cell_vectors *v, double cell[6], double recip[6]);

#endif
