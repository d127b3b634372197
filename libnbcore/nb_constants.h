/* nb_constants.h - what the plan and the kernels both need to name: the
 * physical constants of the reference, its default fluence, the crystal
 * shapes a plan may ask for and the degree/radian factor.
 *
 * A header of its own so that the plan's code (the request, the resolution,
 * the records) builds without the physics: engine/physics/nb_physics.h
 * includes it, and nothing here is defined anywhere else.  Plain C, also
 * read by nvcc. */
#ifndef NB_CONSTANTS_H
#define NB_CONSTANTS_H

#include <math.h>

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif
#ifndef M_1_PI
#define M_1_PI 0.31830988618379067154
#endif

/* Thomson cross section of the electron, m^2 */
#define NB_R_E_SQR 7.94079248018965e-30
#define NB_AVOGADRO 6.02214179e23
/* the reference's default fluence, photons/m^2 (so that r_e^2 * fluence ~ 1) */
#define NB_DEFAULT_FLUENCE 125932015286227086360700780544.0

/* degrees per radian, as the reference writes it (RTD): x / NB_RTD and
 * x * NB_RTD round as its conversions do */
#define NB_RTD (180.0 * M_1_PI)

enum nb_shape { NB_SHAPE_SQUARE = 0, NB_SHAPE_ROUND = 1, NB_SHAPE_GAUSS = 2, NB_SHAPE_TOPHAT = 3 };

#endif
