/* nb_vec.c - the rotations the geometry needs (about x, y, z in the
 * reference's order, and by a mosaic-domain matrix), with nanoBragg's
 * operation order so that vectors agree with it to the last bit. */
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

void nb_rotate_umat(const double v[3], double out[3], const double U[9])
{
    double x = U[0] * v[0] + U[1] * v[1] + U[2] * v[2];
    double y = U[3] * v[0] + U[4] * v[1] + U[5] * v[2];
    double z = U[6] * v[0] + U[7] * v[1] + U[8] * v[2];
    out[0] = x;
    out[1] = y;
    out[2] = z;
}
