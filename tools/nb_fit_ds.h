/* nb_fit_ds.h - the dataset fit's inner parts (nb_fit_frame.c: a frame's
 * model and normal equations; nb_fit_roi.c: regions around the spots;
 * nb_fit_global.c: the global stage; nb_fit_F.c: structure factors;
 * nb_fit_dataset.c: the stages in order).  Not an interface outside nb-fit. */
#ifndef NB_FIT_DS_H
#define NB_FIT_DS_H

#include "nb_fit.h"
#include "nb_sim_grad.h"

/* What a dataset fit can move.  Rotations are degrees about the lab axes,
 * R = Rz Ry Rx applied to the frame's start crystal (0 at the start); the
 * cell in Angstrom and degrees (the crystal keeps its orientation); N in
 * unit cells; lambda in Angstrom (the frame's sources scaled); mosaic the
 * spread in degrees (the plan's domains, their angles scaled); distance,
 * Xbeam and Ybeam in mm: every panel moved along the first panel's normal,
 * fast and slow axes (Xbeam, Ybeam: where the beam meets the first panel,
 * along its fast and slow axes); scale a factor on the fluence. */
enum ds_kind {
    K_ROT_X, K_ROT_Y, K_ROT_Z,
    K_CELL_A, K_CELL_B, K_CELL_C, K_CELL_ALPHA, K_CELL_BETA, K_CELL_GAMMA,
    K_NA, K_NB, K_NC, K_LAMBDA, K_MOSAIC, K_DISTANCE, K_XBEAM, K_YBEAM, K_SCALE,
    K_COUNT
};
#define DS_MAX (2 * K_COUNT)

typedef struct ds_layout {
    int kp, kz;              /* per-frame values, shared ones */
    int kind[DS_MAX];        /* v = [per-frame | shared]: what each is */
    int where_p[K_COUNT];    /* index in v of the frame's kind, -1 */
    int where_z[K_COUNT];    /* index in v of the shared kind, -1 */
} ds_layout;

/* One frame of the fit: its start, its values, its regions and pixels. */
typedef struct ds_frame {
    long index;               /* in the plan */
    nb_frame_crystal start;   /* as the plan gives it */
    double U0[9];             /* its orientation: the start's cell vectors are U0 times the standard ones */
    double cell0[6];          /* A, degrees */
    double mosaic0;           /* its start's mosaic spread, degrees */
    double p[DS_MAX];         /* its own values (layout kp of them) */
    /* the pixels fitted: regions around the spots */
    size_t npix;
    size_t *pix;              /* index into the frame's image */
    int *region;              /* each pixel's region */
    float *dx, *dy;           /* from its region's centre, pixels (the plane's slopes) */
    double *y;                /* observed photons */
    int nregions;
    double *bg;               /* 3 per region: the plane */
    /* the observed spots (the global stage), centroids */
    int nspots;
    int *spot_panel;
    float *spot_f, *spot_s;
    /* the normal equations at the current values (per region, then reduced) */
    double nll;
    double *Hbb, *Hbv, *gb;   /* 9, 3 k, 3 per region */
    double H[DS_MAX * DS_MAX], g[DS_MAX];
    /* the verdict */
    int failed;               /* enum ds_fail */
    double deviance_ratio, explained;
    int predicted_spots, explained_spots;
} ds_frame;

typedef struct ds {
    const nb_plan *start;
    const nb_hkl *hkl;
    const fit_opts *o;
    nb_engine *engine;
    const nb_par *par;
    ds_layout L;
    double z[DS_MAX];         /* the shared values (at v[kp ..]) */
    double zstart[K_COUNT];   /* every kind's start value where the frame gives none */
    long nframes;             /* frames fitted (every frame of the plan) */
    ds_frame *fr;             /* nframes, those of this process filled */
    nb_grad_path path;
    size_t total_pixels;
    /* scratch for one frame's render */
    float *image, *grads[DS_MAX];
    unsigned char **masks;    /* per panel, the regions as a render mask */
    char space_group_hall[64];  /* --refine-F's space group (Hall symbol), for the refined plan; "": none */
} ds;

/* ---- nb_fit_frame.c ---- */
nb_status ds_layout_parse(const char *shared, const char *per_frame, int refine_F, ds_layout *L);
const char *ds_kind_name(int kind);
const char *ds_kind_unit(int kind);
/* frame f's start (U0, cell0, start crystal) and its values at the start */
nb_status ds_frame_start(ds *d, ds_frame *fr);
/* every kind's value for frame fr at v = (fr->p, d->z) */
void ds_values(const ds *d, const ds_frame *fr, const double *p, const double *z, double val[K_COUNT]);
/* the crystal's cell vectors (rows a, b, c; m) at these values */
void ds_crystal(const ds_frame *fr, const double val[K_COUNT], double abc[3][3]);
/* Render frame fr at (p, z): d->image (the Bragg photons at scale 1 on the
 * regions; the full frame when full, one sample a pixel: to find spots), with the derivatives of the rendered
 * kinds into d->grads when grads. */
nb_status ds_render(ds *d, ds_frame *fr, const double *p, const double *z, int grads, int full);
/* -log L of fr at (p, z, bg) from d->image; with ne, its normal equations into fr */
double ds_likelihood(ds *d, ds_frame *fr, const double *p, const double *z, const double *bg, int loss, int ne);
/* The step for damping lambda: frame alone (dz 0) or joint (dz given, from the shared solve) */
nb_status ds_frame_step(const ds *d, const ds_frame *fr, double lambda, const double *dz, double *dp, double *dbg);
/* The frame's Schur complement on the shared values: S (kz x kz) and s (kz), added */
nb_status ds_frame_schur(const ds *d, const ds_frame *fr, double lambda, double *S, double *s);
/* The sigmas of the frame's own values (its planes eliminated, the shared
 * ones fixed): the inverse Fisher information at its last equations */
nb_status ds_frame_sigmas(const ds *d, const ds_frame *fr, double *sigma);
int ds_owned(const ds *d, long i);

/* ---- nb_fit_roi.c ---- */
/* The regions of frame fr from its model image (d->image, full frame) and
 * its observed image: pixels, planes' start, observed spots. */
nb_status ds_regions(ds *d, ds_frame *fr, const observed *ob);
void ds_regions_free(ds_frame *fr);

/* Keep every plane at or above a thousandth of a photon over its region
 * (|dx|, |dy| <= 1): the level raised to it, the slopes shrunk to what the
 * level allows.  A background is never negative, and one of 0 (a simulated
 * still) would otherwise draw the level down towards 0 without end. */
void ds_planes_project(double *bg, int nregions);

/* ---- nb_fit_global.c ---- */
nb_status ds_global(ds *d);

/* ---- the verdict (nb_fit_frame.c), from d->image at the frame's values ---- */
enum ds_fail { DS_FAIL_NONE, DS_FAIL_FEW_SPOTS, DS_FAIL_UNEXPLAINED, DS_FAIL_DEVIANCE, DS_FAIL_FIT };
nb_status ds_verdict(ds *d, ds_frame *fr);
void ds_why(const ds *d, int code, double ratio, int spots, int explained, char *buf, size_t size);

/* ---- nb_fit_F.c ---- */
nb_status ds_refine_F(ds *d, nb_hkl *refined);

#endif
