/* nb_fgrid.h - the F(hkl) grid as the kernels read it: a view of an nb_hkl
 * (nb_hkl_grid) that holds no memory of its own.  Its own header so that the
 * structure factors' code hands the view over without the physics that
 * reads it (engine/physics/nb_physics.h includes this for its lookups). */
#ifndef NB_FGRID_H
#define NB_FGRID_H

/* The F(hkl) grid as nb-sim sees it: a dense box [h_min..h_max] x ... with
 * F stored at ((h-h_min)*k_range + (k-k_min))*l_range + (l-l_min). */
typedef struct nb_fgrid {
    int h_min, h_max, k_min, k_max, l_min, l_max;
    int h_range, k_range, l_range; /* max - min + 1 */
    long hkls;                     /* reflections read; 0 = no grid, use default_F */
    double default_F;
    const double *F;
} nb_fgrid;

#endif
