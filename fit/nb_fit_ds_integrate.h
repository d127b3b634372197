/* nb_fit_ds_integrate.h - the dataset fit's own parts of the intensities'
 * measurement (nb_fit_integrate.c), and the pixel-to-reflection mapping
 * --refine-F and the measurement share (nb_fit_F.c).  Not an interface
 * outside fit/. */
#ifndef NB_FIT_DS_INTEGRATE_H
#define NB_FIT_DS_INTEGRATE_H

#include "nb_fit_ds.h"
#include "nb_fit_integrate.h"

/* What maps a frame's pixels to the reflections nearest them: its crystal
 * (rows a, b, c; m) at the frame's values, the incident beam's direction
 * and the wavelength (Angstrom). */
typedef struct ds_indexer {
    double abc[3][3], incident[3], lambda;
    double val[DS_KINDS];    /* the frame's values: where its panels are (ds_panel_at) */
    int panel;               /* the panel `now` holds (-1: none yet) */
    nb_panel now;
} ds_indexer;
void ds_indexer_init(const ds *d, const ds_frame *fr, ds_indexer *ix);
/* Pixel pix (an index into the frame's image) to its reflection h (the
 * nearest), how far it is from it (|dh| + |dk| + |dl|), its panel and its
 * fast and slow position (pixels from the panel's corner, centre +0.5). */
void ds_index_pixel(const ds *d, ds_indexer *ix, size_t pix, int h[3], double *far, int *panel, double *f,
                    double *s);
/* Render frame fr at its values with every F = 1 (the lattice's photons at
 * scale 1) into d->image, the frame's F kept. */
nb_status ds_render_lattice(ds *d, ds_frame *fr);

/* The reflections of every passing frame, measured (all processes'). */
nb_status ds_integrate(ds *d, nb_fit_integrated *out);
#endif
