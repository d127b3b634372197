/* nb_fields.h - the fields the kernels read, as two tables: one detector
 * panel's (NB_PANEL_FIELDS), and the plan's that the kernels take as they are
 * (NB_PLAN_KERNEL_FIELDS).
 *
 * A detector is a list of panels (nb_plan.panels; nanoBragg's flags make a
 * list of one).  Each row of a table is one field, and the table alone
 * declares it everywhere it lives and moves:
 *   - the plan (nb_plan, and each nb_panel of it: nb_plan.h) and the
 *     kernels' parameters (nb_kparams, engine/physics/nb_physics.h)
 *     declare it: NB_FIELD_DECLARE;
 *   - the kernels' parameters are filled from the panel and the plan:
 *     NB_FIELD_COPY (nb_kparams_set_panel, nb_sim_setup_build);
 *   - the PLAN record carries it as KEY (a panel's: KEY for the first panel,
 *     PANEL<i>.KEY for panel i), read back checked (nb_plan.c);
 *   - two panels are compared by it (nb_panel_differs, nb_plan.c: nb-math's
 *     check that two streams' detectors are one);
 *   - the derivatives (nb-sim --grad) follow it as a dual number when its
 *     `follow` column says FOLLOWED (nb_kdual,
 *     engine/physics/nb_physics_dual.h), and refuse a parameter that moves
 *     it when it says FIXED (engine/nb_sim_grad.c).
 * So a new parameter the kernels read is one row here, plus the term that
 * reads it (and, for a flag, the flag: docs/architecture.md).
 *
 * X(KEY, kind, member, follow, what): kind is INT (int), DBL (double) or
 * VEC3 (double[3]); units SI, lab frame as the plan's (docs/stream-format.md).
 * What a kernel needs in another form (the shape's name, the reciprocal cell
 * in 1/Angstrom, the sources, the rotated cells, the mask) is not in a table:
 * nb_sim_setup_build works it out.  Included by host and CUDA device code:
 * macros only.
 */
#ifndef NB_FIELDS_H
#define NB_FIELDS_H

#define NB_PANEL_FIELDS(X)                                                                          \
    X("FPIXELS", INT, fpixels, FIXED, "pixels along the fast axis")                                  \
    X("SPIXELS", INT, spixels, FIXED, "pixels along the slow axis")                                  \
    X("PIXEL_SIZE", DBL, pixel_size, FIXED, "m")                                                     \
    X("FDET", VEC3, fdet, FOLLOWED, "fast axis, unit")                                               \
    X("SDET", VEC3, sdet, FOLLOWED, "slow axis, unit")                                               \
    X("ODET", VEC3, odet, FOLLOWED, "normal, unit, away from the sample (pix0 . odet > 0)")           \
    X("PIX0", VEC3, pix0, FOLLOWED, "m: the corner of pixel (0, 0), from the sample")                \
    X("DETECTOR_THICK", DBL, thick, FIXED, "m: the sensor's thickness (0: a surface)")               \
    X("DETECTOR_THICKSTEP", DBL, thickstep, FIXED, "m: one layer of the sensor")                     \
    X("DETECTOR_THICKSTEPS", INT, thicksteps, FIXED, "layers the sensor is cut into (>= 1)")         \
    X("DETECTOR_MU", DBL, mu, FIXED, "1/m: the sensor's attenuation")                                \
    X("ROI_XMIN", INT, roi_xmin, FIXED, "inclusive fast pixel index")                                \
    X("ROI_XMAX", INT, roi_xmax, FIXED, "inclusive fast pixel index")                                \
    X("ROI_YMIN", INT, roi_ymin, FIXED, "inclusive slow pixel index")                                \
    X("ROI_YMAX", INT, roi_ymax, FIXED, "inclusive slow pixel index")

#define NB_PLAN_KERNEL_FIELDS(X)                                                                    \
    X("DISTANCE", DBL, distance, FOLLOWED, "m, along the beam to the (first) panel's plane")         \
    X("CLOSE_DISTANCE", DBL, close_distance, FOLLOWED, "m, PIX0 . ODET of the (first) panel")       \
    X("BEAM", VEC3, beam, FOLLOWED, "unit: the beam's direction, sample to detector")               \
    X("POLAR_VECTOR", VEC3, polar_vector, FIXED, "unit: the E vector")                               \
    X("CURVED_DETECTOR", INT, curved_detector, FIXED, "pixels on a sphere about the sample")         \
    X("POINT_PIXEL", INT, point_pixel, FIXED, "solid angle 1/r^2 (no obliquity)")                    \
    X("OVERSAMPLE", INT, oversample, FIXED, "sub-pixels per pixel side")                             \
    X("OVERSAMPLE_THICK", INT, oversample_thick, FIXED, "capture fraction per sub-pixel")            \
    X("OVERSAMPLE_POLAR", INT, oversample_polar, FIXED, "polarization per sub-pixel")                \
    X("OVERSAMPLE_OMEGA", INT, oversample_omega, FIXED, "solid angle per sub-pixel")                 \
    X("KAHN_FACTOR", DBL, kahn_factor, FIXED, "the beam's polarization fraction")                    \
    X("NOPOLAR", INT, nopolar, FIXED, "no polarization factor")                                      \
    X("FLUENCE", DBL, fluence, FOLLOWED, "photons/m^2")                                              \
    X("NA", DBL, Na, FOLLOWED, "unit cells along a")                                                 \
    X("NB", DBL, Nb, FOLLOWED, "unit cells along b")                                                 \
    X("NC", DBL, Nc, FOLLOWED, "unit cells along c")                                                 \
    X("FUDGE", DBL, fudge, FIXED, "the lattice factor's width scale")                                \
    X("WATER_SIZE", DBL, water_size, FIXED, "m: the water background's cube")                        \
    X("DMIN", DBL, dmin, FIXED, "m: no spot beyond this resolution (0: off)")

/* A kind's C type, array suffix and count of numbers */
#define NB_FIELD_CTYPE_INT int
#define NB_FIELD_CTYPE_DBL double
#define NB_FIELD_CTYPE_VEC3 double
#define NB_FIELD_ARRAY_INT
#define NB_FIELD_ARRAY_DBL
#define NB_FIELD_ARRAY_VEC3 [3]
#define NB_FIELD_COUNT_INT 1
#define NB_FIELD_COUNT_DBL 1
#define NB_FIELD_COUNT_VEC3 3

/* A row's text only where its follow column is the one asked for */
#define NB_FIELD_IF_FOLLOWED_FOLLOWED(...) __VA_ARGS__
#define NB_FIELD_IF_FOLLOWED_FIXED(...)
#define NB_FIELD_IF_FIXED_FOLLOWED(...)
#define NB_FIELD_IF_FIXED_FIXED(...) __VA_ARGS__
/* ... and only where its numbers are the type asked for (DOUBLE or INT) */
#define NB_FIELD_IF_DOUBLE_DBL(...) __VA_ARGS__
#define NB_FIELD_IF_DOUBLE_VEC3(...) __VA_ARGS__
#define NB_FIELD_IF_DOUBLE_INT(...)
#define NB_FIELD_IF_INT_DBL(...)
#define NB_FIELD_IF_INT_VEC3(...)
#define NB_FIELD_IF_INT_INT(...) __VA_ARGS__

/* The field's declaration in a struct */
#define NB_FIELD_DECLARE(key, kind, member, follow, what) NB_FIELD_CTYPE_##kind member NB_FIELD_ARRAY_##kind;
/* The field copied from *src to *dst (any two structs that declare it by
 * the same table; <string.h>) */
#define NB_FIELD_COPY(key, kind, member, follow, what) memcpy(&dst->member, &src->member, sizeof dst->member);

#endif
