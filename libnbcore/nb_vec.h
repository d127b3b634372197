/* nb_vec.h - 3-vectors and rotations, with the reference's conventions.
 *
 * Vectors are double[3] (x, y, z).  The operation order inside each function
 * follows nanoBragg's, so that results agree with it to the last bit where
 * the arithmetic is the same. */
#ifndef NB_VEC_H
#define NB_VEC_H

#include "nb_physics.h"

/* The inline vector helpers live in nb_physics.h (shared with the kernels);
 * these are the host-only rotations built from them. */

/* v' = Rz(rz) Ry(ry) Rx(rx) v; a factor is skipped when its angle is exactly 0. */
void nb_rotate_xyz(const double v[3], double out[3], double rx, double ry, double rz);
/* Rodrigues rotation of v about the (assumed unit) axis by phi radians. */
void nb_rotate_axis(const double v[3], double out[3], const double axis[3], double phi);
/* v' = U v, U row-major. */
void nb_rotate_umat(const double v[3], double out[3], const double U[9]);

#endif
