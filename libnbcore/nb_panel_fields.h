/* nb_panel_fields.h - the fields of one detector panel, as one table.
 *
 * A detector is a list of panels (nb_plan.panels; nanoBragg's flags make a
 * list of one).  Each row of NB_PANEL_FIELDS is one field of a panel, and the
 * table alone declares it everywhere it lives and moves:
 *   - the panel (nb_panel, nb_plan.h) and the kernels' parameters
 *     (nb_kparams, nb_physics.h) declare it: NB_PANEL_DECLARE;
 *   - the kernels' parameters are filled from the panel: NB_PANEL_COPY
 *     (nb_kparams_set_panel);
 *   - the PLAN record carries it as KEY for the first panel and PANEL<i>.KEY
 *     for panel i (nb_plan.c), read back checked;
 *   - the derivatives (nb-sim --grad) follow it as a dual number when its
 *     `follow` column says FOLLOWED (nb_kdual, nb_physics_dual.h), and refuse a
 *     parameter that moves it when it says FIXED (engine/nb_sim_grad.c).
 * So a new per-panel field is one row here, plus the term that reads it.
 *
 * X(KEY, kind, member, follow, what): kind is INT (int), DBL (double) or
 * VEC3 (double[3]); units SI, lab frame as the plan's (docs/stream-format.md).
 * The mask (an array, not a header key) is declared beside the table.
 * Included by host and CUDA device code: macros only.
 */
#ifndef NB_PANEL_FIELDS_H
#define NB_PANEL_FIELDS_H

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

/* A kind's C type, array suffix and count of numbers */
#define NB_PANEL_CTYPE_INT int
#define NB_PANEL_CTYPE_DBL double
#define NB_PANEL_CTYPE_VEC3 double
#define NB_PANEL_ARRAY_INT
#define NB_PANEL_ARRAY_DBL
#define NB_PANEL_ARRAY_VEC3 [3]
#define NB_PANEL_COUNT_INT 1
#define NB_PANEL_COUNT_DBL 1
#define NB_PANEL_COUNT_VEC3 3

/* A row's text only where its follow column is the one asked for */
#define NB_PANEL_IF_FOLLOWED_FOLLOWED(...) __VA_ARGS__
#define NB_PANEL_IF_FOLLOWED_FIXED(...)
#define NB_PANEL_IF_FIXED_FOLLOWED(...)
#define NB_PANEL_IF_FIXED_FIXED(...) __VA_ARGS__

/* The field's declaration in a struct */
#define NB_PANEL_DECLARE(key, kind, member, follow, what) NB_PANEL_CTYPE_##kind member NB_PANEL_ARRAY_##kind;
/* The field copied from *src to *dst (any two structs that declare it by
 * this table; <string.h>) */
#define NB_PANEL_COPY(key, kind, member, follow, what) memcpy(&dst->member, &src->member, sizeof dst->member);

#endif
