/* sf_expand.h - what the structure-factor files of the field (MTZ: mtz.c,
 * mmCIF: sf_cif.c) have in common: telling them from an 'h k l F' list by
 * content, the choice of a column (-column), and the expansion of the
 * reflections of an asymmetric unit by the file's space group to the P1 grid
 * with Friedel mates (or anomalous pairs) that nb-sim reads.
 * The rules are stated in docs/physics.md ("Structure factors from MTZ and
 * mmCIF files"). */
#ifndef NB_FORMAT_SF_EXPAND_H
#define NB_FORMAT_SF_EXPAND_H

#include <stddef.h>

#include "nb_error.h"
#include "nb_hkl.h"

/* What a structure-factor file is, from its first bytes. */
typedef enum nb_sf_format { NB_SF_TEXT, NB_SF_MTZ, NB_SF_CIF } nb_sf_format;
/* "MTZ " at offset 0: MTZ; a first token "data_..." (after blank and '#'
 * lines): mmCIF; anything else, and "-" (standard input), the 'h k l F'
 * text list.  Fails only when the file cannot be opened ("cannot open 'x':
 * ..."). */
nb_status nb_sf_detect(const char *path, nb_sf_format *fmt);
const char *nb_sf_format_name(nb_sf_format fmt);

/* A data column of a file, by the MTZ type letters: 'F' amplitude, 'J'
 * intensity, 'G' anomalous amplitude F(+) or F(-), 'K' anomalous intensity
 * I(+) or I(-). */
typedef struct nb_sf_col {
    const char *name;
    char type;
} nb_sf_col;

/* The choice: plus (and minus, -1 unless a pair) index `cols`; type is the
 * chosen columns' type. */
typedef struct nb_sf_pick {
    int plus, minus;
    char type;
} nb_sf_pick;

/* The -column rule (want NULL: no -column).  Without -column: the one 'F'
 * column, else a usage error listing the candidates.  With it: the column
 * named; a 'G' or 'K' column with its partner (NAME(+)/NAME(-), NAME_plus/
 * NAME_minus), or the pair's stem (F for F(+),F(-)), or "PLUS,MINUS".
 * Names compare exactly (the CIF reader passes them lowercased). */
nb_status nb_sf_choose(const char *path, const nb_sf_col *cols, int ncols, const char *want, nb_sf_pick *pick);

/* One value of the file: F at h and its equivalents (part 0: and at -h
 * and its, Friedel's law; '+': F(+), only h's; '-': F(-) of the pair
 * at h, put at -h and its equivalents). */
typedef struct nb_sf_refl {
    int h, k, l;
    char part;
    double F;
} nb_sf_refl;

/* A space-group operator as the files give it: x' = R x + t (real space);
 * an index goes to h' = h R. */
typedef struct nb_sf_op {
    int R[3][3];
    double t[3];
} nb_sf_op;

#define NB_SF_MAX_OPS 192

typedef struct nb_sf_data {
    nb_sf_refl *refl;
    size_t n, cap;
    nb_sf_op ops[NB_SF_MAX_OPS];
    int nops;
    char spacegroup[64];
    char hall[64];          /* its Hall symbol where known (" P 2ac 2ab"), else "" */
    double cell[6];         /* a b c alpha beta gamma (A, degrees); have_cell 0: unknown */
    int have_cell;
    char column[160];       /* what was read, for the log: "FP (F, amplitudes)" */
    char type;              /* the pick's type: 'F', 'J', 'G', 'K' */
    long unread;            /* rows whose value is missing in the file */
} nb_sf_data;

void nb_sf_data_init(nb_sf_data *d);
void nb_sf_data_free(nb_sf_data *d);
nb_status nb_sf_add(nb_sf_data *d, int h, int k, int l, char part, double F);
/* an operator from a real-space matrix and translation (integers checked) */
nb_status nb_sf_add_op(nb_sf_data *d, const double R[3][3], const double t[3]);
/* Intensities to amplitudes: F = sqrt(max(I, 0)). */
double nb_sf_amplitude(double I);

/* What the expansion did, for the log. */
typedef struct nb_sf_stats {
    long read;          /* values taken from the file */
    long p1;            /* grid points given a value */
    long missing;       /* grid points inside the file's resolution that no value reached
                         * (not 0 0 0, not systematically absent): default_F */
    long conflicts;     /* grid points given two different values (the later kept) */
    long centric_minus; /* F(-) of centric reflections, not used (F(+) is both) */
    double d_min;       /* the file's resolution (A), 0 without a cell */
} nb_sf_stats;

/* Expand to the dense grid (nb_hkl_alloc'ed over the P1 indices' box,
 * prefilled with default_F).  The values are copied, never recomputed. */
nb_status nb_sf_expand(const nb_sf_data *d, const char *path, double default_F, nb_hkl *out, nb_sf_stats *stats);

#endif
