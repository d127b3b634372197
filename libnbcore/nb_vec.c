/* nb_vec.c - the rotations the geometry needs (about x, y, z in the
 * reference's order, about an axis, and by a mosaic-domain matrix), with
 * nanoBragg's operation order so that vectors agree with it to the last bit;
 * and the 3x3 matrices that compose them (the named parameters' moves of a
 * plan, the fit's crystals). */
#include "nb_vec.h"

#include <math.h>

void nb_rotate_xyz(const double v[3], double out[3], double phix, double phiy, double phiz)
{
    double x = v[0], y = v[1], z = v[2];
    if (phix != 0) {
        double c = cos(phix), s = sin(phix);
        double ny = y * c + z * (-s);
        double nz = y * s + z * c;
        y = ny, z = nz;
    }
    if (phiy != 0) {
        double c = cos(phiy), s = sin(phiy);
        /* the reference multiplies by the explicit zero of the matrix too */
        double nx = x * c + y * 0 + z * s;
        double nz = x * (-s) + y * 0 + z * c;
        x = nx, z = nz;
    }
    if (phiz != 0) {
        double c = cos(phiz), s = sin(phiz);
        double nx = x * c + y * (-s);
        double ny = x * s + y * c;
        x = nx, y = ny;
    }
    out[0] = x;
    out[1] = y;
    out[2] = z;
}

/* the kernels' nb_rotate_axis (nb_pixel_double.inc), term for term */
void nb_rotate_about(const double v[3], double out[3], const double axis[3], double phi)
{
    double sinphi = sin(phi);
    double cosphi = cos(phi);
    double dot = nb_vdot(axis, v) * (1.0 - cosphi);
    double t0 = axis[0] * dot + v[0] * cosphi + ((-axis[2]) * v[1] + axis[1] * v[2]) * sinphi;
    double t1 = axis[1] * dot + v[1] * cosphi + (axis[2] * v[0] - axis[0] * v[2]) * sinphi;
    double t2 = axis[2] * dot + v[2] * cosphi + ((-axis[1]) * v[0] + axis[0] * v[1]) * sinphi;
    out[0] = t0;
    out[1] = t1;
    out[2] = t2;
}

void nb_rotate_umat(const double v[3], double out[3], const double U[9])
{
    double x = U[0] * v[0] + U[1] * v[1] + U[2] * v[2];
    double y = U[3] * v[0] + U[4] * v[1] + U[5] * v[2];
    double z = U[6] * v[0] + U[7] * v[1] + U[8] * v[2];
    out[0] = x;
    out[1] = y;
    out[2] = z;
}

void nb_mat3_mul(const double A[9], const double B[9], double C[9])
{
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) C[3 * i + j] = A[3 * i] * B[j] + A[3 * i + 1] * B[3 + j] + A[3 * i + 2] * B[6 + j];
}

double nb_mat3_det(const double M[9])
{
    return M[0] * (M[4] * M[8] - M[5] * M[7]) - M[1] * (M[3] * M[8] - M[5] * M[6]) +
           M[2] * (M[3] * M[7] - M[4] * M[6]);
}

void nb_mat3_inverse(const double M[9], double out[9])
{
    const double d = nb_mat3_det(M);
    double r[9];
    r[0] = (M[4] * M[8] - M[5] * M[7]) / d, r[1] = (M[2] * M[7] - M[1] * M[8]) / d;
    r[2] = (M[1] * M[5] - M[2] * M[4]) / d, r[3] = (M[5] * M[6] - M[3] * M[8]) / d;
    r[4] = (M[0] * M[8] - M[2] * M[6]) / d, r[5] = (M[2] * M[3] - M[0] * M[5]) / d;
    r[6] = (M[3] * M[7] - M[4] * M[6]) / d, r[7] = (M[1] * M[6] - M[0] * M[7]) / d;
    r[8] = (M[0] * M[4] - M[1] * M[3]) / d;
    for (int i = 0; i < 9; i++) out[i] = r[i];
}

void nb_mat3_transpose(const double M[9], double out[9])
{
    double t[9];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) t[3 * j + i] = M[3 * i + j];
    for (int i = 0; i < 9; i++) out[i] = t[i];
}

/* The matrix whose columns are what rotate does to x, y and z. */
static void columns_of(double M[9], void (*rotate)(const double *, double *, const void *), const void *ctx)
{
    for (int j = 0; j < 3; j++) {
        double e[3] = {j == 0, j == 1, j == 2}, r[3];
        rotate(e, r, ctx);
        for (int i = 0; i < 3; i++) M[3 * i + j] = r[i];
    }
}

static void by_xyz(const double *v, double *out, const void *ctx)
{
    const double *a = ctx;
    nb_rotate_xyz(v, out, a[0], a[1], a[2]);
}

static void by_axis(const double *v, double *out, const void *ctx)
{
    const double *a = ctx;
    nb_rotate_about(v, out, a, a[3]);
}

void nb_mat3_rotate_xyz(double rx, double ry, double rz, double M[9])
{
    const double a[3] = {rx, ry, rz};
    columns_of(M, by_xyz, a);
}

void nb_mat3_rotate_about(const double axis[3], double phi, double M[9])
{
    const double a[4] = {axis[0], axis[1], axis[2], phi};
    columns_of(M, by_axis, a);
}
