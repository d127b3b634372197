/* nb_vec.c - the rotations the geometry needs (about x, y, z in the
 * reference's order, about an axis, and by a mosaic-domain matrix), with
 * nanoBragg's operation order so that vectors agree with it to the last bit. */
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
