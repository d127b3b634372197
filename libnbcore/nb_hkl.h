/* nb_hkl.h - structure factors: the dense F(hkl) grid and its HKL record. */
#ifndef NB_HKL_H
#define NB_HKL_H

#include "nb_error.h"
#include "nb_fgrid.h"
#include "nb_stream.h"

typedef struct nb_hkl {
    int h_min, h_max, k_min, k_max, l_min, l_max;
    long hkls;          /* reflections read (text), range product (dump), 0 = no grid */
    double default_F;
    double *F;          /* (h_max-h_min+1)(k_max-k_min+1)(l_max-l_min+1), h slowest; NULL without grid */
    char *source;       /* where it came from, for logs and provenance */
} nb_hkl;

void nb_hkl_init(nb_hkl *h);
void nb_hkl_free(nb_hkl *h);
/* Allocate the grid for the index box, filled with `fill`; refuses absurd
 * boxes with the memory they would need. */
nb_status nb_hkl_alloc(nb_hkl *h, int h_min, int h_max, int k_min, int k_max, int l_min, int l_max, double fill);
size_t nb_hkl_index(const nb_hkl *h, int hh, int kk, int ll);

nb_status nb_hkl_to_record(const nb_hkl *h, nb_record *rec);
nb_status nb_hkl_from_record(const nb_record *rec, nb_hkl *h);

/* The grid as the kernels read it (a view: it owns nothing). */
nb_fgrid nb_hkl_grid(const nb_hkl *h);

#endif
