/* nb_vec.h - 3-vectors and rotations, with the reference's conventions.
 *
 * Vectors are double[3] (x, y, z).  The operation order inside each function
 * follows nanoBragg's, so that results agree with it to the last bit where
 * the arithmetic is the same. */
#ifndef NB_VEC_H
#define NB_VEC_H

#include <math.h>

/* The plan's geometry (the resolution, the panels, the stills, the
 * reflections) has its vector helpers here rather than from the kernels'
 * engine/physics/nb_physics.h, so that the plan builds without the
 * physics.  They are the kernels' nb_dot, nb_cross, nb_norm, nb_unitize and
 * nb_rotate_axis (nb_pixel_double.inc on double) operation for operation,
 * so a vector the plan resolves is the one the double path would compute:
 * tests/unit/test_geometry.c checks the two agree bit for bit.  Other names, since a
 * file may include both. */

/* a . b, as ((a0 b0 + a1 b1) + a2 b2) */
static inline double nb_vdot(const double a[3], const double b[3])
{
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}

/* z = x cross y (z may alias x or y) */
static inline void nb_vcross(const double x[3], const double y[3], double z[3])
{
    double z0 = x[1] * y[2] - x[2] * y[1];
    double z1 = x[2] * y[0] - x[0] * y[2];
    double z2 = x[0] * y[1] - x[1] * y[0];
    z[0] = z0;
    z[1] = z1;
    z[2] = z2;
}

static inline double nb_vnorm(const double v[3]) { return sqrt(nb_vdot(v, v)); }

/* out = v/|v| (out may alias v); a zero vector stays zero.  Returns |v|. */
static inline double nb_vunitize(const double v[3], double out[3])
{
    double mag = nb_vnorm(v);
    if (mag != 0.0) {
        out[0] = v[0] / mag;
        out[1] = v[1] / mag;
        out[2] = v[2] / mag;
    } else {
        out[0] = out[1] = out[2] = 0.0;
    }
    return mag;
}

/* v' = Rz(rz) Ry(ry) Rx(rx) v; a factor is skipped when its angle is exactly 0. */
void nb_rotate_xyz(const double v[3], double out[3], double rx, double ry, double rz);
/* Rodrigues rotation of v about the (assumed unit) axis by phi radians (out may alias v). */
void nb_rotate_about(const double v[3], double out[3], const double axis[3], double phi);
/* v' = U v, U row-major. */
void nb_rotate_umat(const double v[3], double out[3], const double U[9]);

/* 3x3 matrices, row-major: C = A B (C may alias neither), the determinant,
 * the inverse (of a matrix with a determinant), the transpose (out may
 * alias M), and the matrices of nb_rotate_xyz and nb_rotate_about (their
 * columns the images of x, y, z). */
void nb_mat3_mul(const double A[9], const double B[9], double C[9]);
double nb_mat3_det(const double M[9]);
void nb_mat3_inverse(const double M[9], double out[9]);
void nb_mat3_transpose(const double M[9], double out[9]);
void nb_mat3_rotate_xyz(double rx, double ry, double rz, double M[9]);
void nb_mat3_rotate_about(const double axis[3], double phi, double M[9]);

#endif
