/* nb_fit_ds.h - the dataset fit's inner parts (nb_fit_frame.c: a frame's
 * model and normal equations; nb_fit_roi.c: regions around the spots;
 * nb_fit_global.c: the global stage; nb_fit_F.c: structure factors;
 * nb_fit_dataset.c: the stages in order).  Not an interface outside fit/
 * (nb_fit_dataset.h is). */
#ifndef NB_FIT_DS_H
#define NB_FIT_DS_H

#include <string.h>

#include "nb_fit_dataset.h"
#include "nb_lm.h"
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
/* A panel's own geometry (the table's panel<i>_shift_fast ... rot_normal,
 * shared only): the kinds K_COUNT + s, s the value's slot in the layout.
 * Its pose from the start panel (ds_panel_at): turned by R = Rn Rs Rf
 * about the start's normal, slow and fast axes through the start's centre,
 * then moved along the start's fast, slow and normal axes (mm); 0 is the
 * start. */
enum ds_panel_axis { PA_SHIFT_FAST, PA_SHIFT_SLOW, PA_SHIFT_NORMAL, PA_ROT_FAST, PA_ROT_SLOW, PA_ROT_NORMAL, PA_COUNT };
#define DS_PANEL_VALUES 48                   /* the most panel values one fit refines */
#define DS_KINDS (K_COUNT + DS_PANEL_VALUES) /* the length of a values array (val[]) */
#define DS_MAX (2 * K_COUNT + DS_PANEL_VALUES)
static inline int ds_panel_kind(int kind) { return kind >= K_COUNT; }

typedef struct ds_layout {
    int kp, kz;              /* per-frame values, shared ones */
    int kind[DS_MAX];        /* v = [per-frame | shared]: what each is */
    int where_p[DS_KINDS];   /* index in v of the frame's kind, -1 */
    int where_z[DS_KINDS];   /* index in v of the shared kind, -1 */
    int npv;                 /* panel values: kind K_COUNT + s is panel pv_panel[s]'s axis pv_axis[s] */
    int pv_panel[DS_PANEL_VALUES], pv_axis[DS_PANEL_VALUES];
    char pv_name[DS_PANEL_VALUES][32];
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
    unsigned regions_made;    /* counts ds_regions' calls: a render's mask is the regions' */
    /* the observed spots (the global stage): centroids, photons above the panel's median */
    int nspots;
    int *spot_panel;
    float *spot_f, *spot_s, *spot_w;
    /* the global stage: the values it started from, whether it moved them,
     * and its scores (docs/physics.md 15.1) */
    double p_start[DS_MAX];
    int moved;                /* the global stage moved the frame (its start is the fallback) */
    int start_plausible;      /* the start's own score stood out of chance, and the move left its basin */
    int retried;              /* fitted again from its start (the fallback) */
    int capped;               /* the last fit stopped at --iterations */
    /* the normal equations at the current values (per region, then reduced) */
    double nll;
    double *Hbb, *Hbv, *gb;   /* 9, 3 k, 3 per region */
    double H[DS_MAX * DS_MAX], g[DS_MAX];
    /* the verdict */
    int failed;               /* enum ds_fail */
    double deviance_ratio, explained;
    int predicted_spots, explained_spots; /* predicted spots bright enough to judge, those the image shows */
    int few;                  /* predicted spots of 10 photons or more */
    double spot_cc;           /* their predicted photons' correlation with the observed ones (NAN: < 3) */
    int strong_spots, strong_predicted; /* the strongest observed spots, those the model has */
    int no_spots;             /* no region at all: nothing predicted or observed */
    struct ds_frefl *fref;    /* its pixels' reflections, as the last --refine-F mapped them (NULL: none) */
} ds_frame;

/* A frame's pixels' reflections as the last --refine-F mapped them, for the
 * refinement of the frames' values jointly with F (nb_fit_joint.c):
 * ds_likelihood fills v, gI and DI with the frame's normal equations. */
typedef struct ds_frefl {
    int *slot;                /* per pixel: its reflection among the frame's (-1: none) */
    float *L;                 /* per pixel: the lattice's photons at F = 1 and scale 1 */
    int nslots;
    long *m;                  /* per slot: the reflection's index in d->Fset */
    double *v;                /* nslots x k: sum over its pixels of dmu/dv dmu/dI / mu (the values' v = [p | z]) */
    double *gI, *DI;          /* per slot: this frame's d(-log L)/dI and its Fisher information */
} ds_frefl;

/* The reflections the last --refine-F measured, m = 0 .. n-1: what the
 * joint refinement moves with the frames' values. */
typedef struct ds_Fset {
    long n;
    double *I;                /* F^2 */
    double *D, *g;            /* Fisher information and d(-log L)/dI over every frame, the prior's gradient in g */
    double *prior;            /* the Wilson prior's gradient (F_prior / S), fixed */
    double *Dcorr;            /* what the frames' own values take of D (F's sigma marginal over them) */
    double lambda;            /* the joint step's damping (reduce() takes F's response out at it) */
    int on;                   /* the frames' normal equations are to be taken marginal over F */
} ds_Fset;

/* Where a dataset fit's time goes (-v prints it at the end). */
enum ds_clock { T_READ, T_PREDICT, T_STEP, T_GRAD, T_NORMAL, T_SOLVE, T_GLOBAL, T_F, T_CLOCKS };

/* What d->image and d->grads hold: the render of which frame, at which
 * values, on which regions and F (a render at the same is not done again:
 * a step of the scale alone, or a verdict at the values just fitted). */
typedef struct ds_rendered {
    long frame;               /* -1: nothing */
    unsigned regions_made, hkl_made;
    int full, grads;
    double val[DS_KINDS];
} ds_rendered;

typedef struct ds {
    const nb_plan *start;
    const nb_hkl *hkl;
    const nb_fit_ds_settings *o;
    nb_engine *engine;
    const nb_fit_reduction *red; /* the processes (never NULL) */
    ds_layout L;
    double z[DS_MAX];         /* the shared values (at v[kp ..]) */
    double zstart[DS_KINDS];   /* every kind's start value where the frame gives none */
    double det_axis[3][3];    /* the detector's move (m) per mm of distance, Xbeam, Ybeam (nb_params.h) */
    long nframes;             /* frames fitted (every frame of the plan) */
    ds_frame *fr;             /* nframes, those of this process filled */
    nb_grad_path path;
    size_t total_pixels;
    /* scratch for one frame's render */
    float *image, *grads[DS_MAX]; /* a panel value's points into panel_grads[its axis] */
    float *panel_grads[PA_COUNT]; /* a panel value's derivative on its own panel (each panel writes its own pixels) */
    size_t *panel_end;        /* per panel: where its pixels end in a frame's image */
    double gauge[DS_MAX];     /* the shared values' combination held (the panels' mean turn about the beam; 0: none) */
    unsigned char **masks;    /* per panel, the regions as a render mask */
    char space_group_hall[64];  /* --refine-F's space group (Hall symbol), for the refined plan; "": none */
    ds_rendered rendered;
    unsigned hkl_made;        /* counts changes of d->hkl */
    struct ds_F *Fres;        /* the last --refine-F's result (nb_fit_F.c) */
    ds_Fset Fset;             /* its measured reflections (nb_fit_joint.c) */
    double Sinv[DS_MAX * DS_MAX]; /* the shared values' covariance (kz x kz), for the frames' marginal sigmas */
    int have_Sinv;
    double F_moved, F_moved_rms; /* how far it moved F, in sigmas: the most, rms */
    nb_hkl flat;              /* --refine-F: a flat F at the start's rms, that regions are predicted with */
    double clock_s[T_CLOCKS];
    long clock_n[T_CLOCKS];
} ds;

/* memcpy of `bytes` that may be 0 with a NULL list (a frame without
 * regions, another MPI rank's frame): memcpy itself wants both pointers. */
static inline void ds_copy(void *dst, const void *src, size_t bytes)
{
    if (bytes) memcpy(dst, src, bytes);
}

/* Frame i is in --frames (every frame without it) */
static inline int ds_in_range(const ds *d, long i)
{
    return !d->o->frame_first || (i + 1 >= d->o->frame_first && i + 1 <= d->o->frame_last);
}
int ds_owned(const ds *d, long i);
/* Frame i is fitted here: in --frames and this process's. */
static inline int ds_mine(const ds *d, long i) { return ds_in_range(d, i) && ds_owned(d, i); }

/* The fit's sums and agreements over its processes (nb_fit_reduce.h). */
static inline nb_status ds_sum(const ds *d, double *buf, size_t n) { return nb_fit_sum(d->red, buf, n); }
static inline nb_status ds_agree(const ds *d, nb_status st) { return nb_fit_agree(d->red, st); }
static inline int ds_rank(const ds *d) { return d->red->rank; }

/* Time from t0 (nb_now()) to now into clock c. */
void ds_clock(ds *d, int c, double t0);
/* d->hkl is now `hkl` (what every later render takes). */
void ds_set_hkl(ds *d, const nb_hkl *hkl);

/* The detector's move (lab, m) when distance, Xbeam and Ybeam move by
 * mm[0 .. 2] from the start: translations, as the table's setters move it. */
void ds_detector_shift(const ds *d, const double mm[3], double shift[3]);

/* ---- nb_fit_output.c ---- */
/* Every frame's row (enum G_...) over every process into *out (malloc'ed) */
nb_status ds_gather(ds *d, double **out);
/* The refined plan from the rows g; *failed: the frames the verdict failed */
nb_status ds_refined_plan(ds *d, const double *g, nb_plan *out, int *failed);
/* The frames' verdicts and values, and the shared values with zsigma, on standard error */
void ds_report(const ds *d, const double *g, const double *zsigma, int failed);
/* Where the time went since t_begin (-v) */
void ds_report_clocks(const ds *d, double t_begin);
/* The cell --F-out states (the refined shared one, else the passing frames' mean) and what it is */
void ds_F_out_cell(ds *d, const double *g, double cell[6], char *says, size_t size);

/* ---- nb_fit_panels.c ---- */
/* Panel value tok (the parameter `known`: panel<i>_...) into the layout's
 * shared part (shared: it was given to --refine, else refused). */
nb_status ds_panel_value_add(const char *tok, const nb_param *known, int shared, ds_layout *L);
/* The panels' ends in a frame's image (d->panel_end), the panel values'
 * panels checked against the plan's, and the gauge (d->gauge). */
nb_status ds_panels_open(ds *d);
/* The gauge's condition on the shared step's equations S (kz x kz) and
 * right-hand side rhs (NULL: S alone, for the covariance). */
void ds_gauge_hold(const ds *d, double *S, double *rhs);

/* ---- nb_fit_frame.c ---- */
nb_status ds_layout_parse(const char *shared, const char *per_frame, int refine_F, ds_layout *L);
/* A kind's name and unit (a panel value's as the layout names it) */
const char *ds_kind_name(const ds_layout *L, int kind);
const char *ds_kind_unit(const ds_layout *L, int kind);
/* Panel `panel` as the values val place it: the start's, the detector's
 * distance and beam centre moved, and the panel's own pose. */
void ds_panel_at(const ds *d, const double val[DS_KINDS], int panel, nb_panel *out);
/* The panel of pixel pix (an index into the frame's image). */
int ds_pixel_panel(const ds *d, size_t pix);
/* Where panel p's pixels start in the frame's image. */
static inline size_t ds_panel_start(const ds *d, int p) { return p > 0 ? d->panel_end[p - 1] : 0; }
/* frame f's start (U0, cell0, start crystal) and its values at the start */
nb_status ds_frame_start(ds *d, ds_frame *fr);
/* The frame's U0 and cell0 from a crystal's vectors a, b, c (m). */
nb_status ds_frame_set_crystal(ds_frame *fr, const double a[3], const double b[3], const double c[3]);
/* every kind's value for frame fr at v = (fr->p, d->z) */
void ds_values(const ds *d, const ds_frame *fr, const double *p, const double *z, double val[DS_KINDS]);
/* the crystal's cell vectors (rows a, b, c; m) at these values */
void ds_crystal(const ds_frame *fr, const double val[DS_KINDS], double abc[3][3]);
/* Render frame fr at (p, z): d->image (the Bragg photons at scale 1 on the
 * regions; the full frame when full, one sample a pixel: to find spots), with the derivatives of the rendered
 * kinds into d->grads when grads. */
nb_status ds_render(ds *d, ds_frame *fr, const double *p, const double *z, int grads, int full);
/* -log L of fr at (p, z, bg) from d->image; with ne, its normal equations into fr */
double ds_likelihood(ds *d, ds_frame *fr, const double *p, const double *z, const double *bg, int loss, int ne);
/* The step for damping lambda: frame alone (dz 0) or joint (dz given, from the shared solve) */
nb_status ds_frame_step(const ds *d, const ds_frame *fr, double lambda, const double *dz, double *dp, double *dbg);
/* A plane's 3 x 3 block (level, slopes) damped by Levenberg-Marquardt's
 * lambda, with a ridge on the slopes: a region of a pixel or a row has no
 * slope to find. */
void ds_plane_damp(double Hb[9], double lambda);
/* The frame's Schur complement on the shared values: S (kz x kz) and s (kz), added */
nb_status ds_frame_schur(const ds *d, const ds_frame *fr, double lambda, double *S, double *s);
/* The sigmas of the frame's own values: the inverse Fisher information at
 * its last equations, its planes eliminated (and F, while d->Fset.on), and
 * marginal over the shared values where d->have_Sinv (their covariance:
 * A^-1 + A^-1 B Sinv B^T A^-1, A the frame's own block, B its coupling to
 * them) */
nb_status ds_frame_sigmas(const ds *d, const ds_frame *fr, double *sigma);
/* Can the frame's own values take a step at lambda (its system, planes
 * eliminated, not singular)? */
int ds_frame_solvable(const ds *d, const ds_frame *fr, double lambda);
/* Frames of the joint stage whose own system is singular at lambda fail
 * (DS_FAIL_FIT) and leave it; *dropped: how many, over every process. */
nb_status ds_drop_singular(ds *d, double lambda, long *dropped);
/* The frame's normal equations with its planes eliminated, undamped (k x k,
 * stride DS_MAX); marginal over F while d->Fset.on. */
nb_status ds_frame_reduced(const ds *d, const ds_frame *fr, double *Hr, double *gr);

/* A frame's normal equations and -log L, kept while a step is tried: the
 * trial is rendered with its derivatives, so that an accepted step's
 * equations are the next step's without a render of their own; a refused
 * one gives these back. */
typedef struct ds_ne_saved {
    double H[DS_MAX * DS_MAX], g[DS_MAX], nll;
    double *Hbb, *Hbv, *gb;
    size_t cap; /* regions they hold */
} ds_ne_saved;
nb_status ds_ne_save(const ds *d, const ds_frame *fr, ds_ne_saved *s);
void ds_ne_restore(const ds *d, ds_frame *fr, const ds_ne_saved *s);
void ds_ne_free(ds_ne_saved *s);

/* ---- nb_fit_roi.c ---- */
/* The regions of frame fr from its model image (d->image, full frame) and
 * its observed image: pixels, planes' start, observed spots. */
nb_status ds_regions(ds *d, ds_frame *fr, const nb_fit_observed *ob);
void ds_regions_free(ds_frame *fr);
/* Forget the frame's regions without freeing them (a copy of the frame
 * owns them now). */
void ds_regions_detach(ds_frame *fr);

/* Keep every plane at or above a thousandth of a photon over its region
 * (|dx|, |dy| <= 1): the level raised to it, the slopes shrunk to what the
 * level allows.  A background is never negative, and one of 0 (a simulated
 * still) would otherwise draw the level down towards 0 without end. */
void ds_planes_project(double *bg, int nregions);

/* ---- nb_fit_global.c ---- */
nb_status ds_global(ds *d);
/* One frame's search alone, at the shared values as they are (its values
 * as they are its start): the second chance of a frame that failed. */
nb_status ds_global_frame(ds *d, ds_frame *fr);

/* ---- the verdict (nb_fit_frame.c), from d->image at the frame's values ---- */
enum ds_fail {
    DS_FAIL_NONE, DS_FAIL_FEW_SPOTS, DS_FAIL_UNEXPLAINED, DS_FAIL_DEVIANCE, DS_FAIL_FIT, DS_FAIL_NO_SPOTS,
    DS_FAIL_UNPREDICTED, DS_FAIL_UNCORRELATED
};
nb_status ds_verdict(ds *d, ds_frame *fr);
/* Does a frame refine values of its own that the image depends on (more
 * than its scale)? */
int ds_frame_owns_values(const ds *d);
/* A verdict's figures, as reported. */
typedef struct ds_figures {
    int code;                 /* enum ds_fail */
    double ratio;             /* the deviance's */
    int few, judged, explained, strong, strong_predicted;
    double cc;                /* the spots' photons' correlation */
} ds_figures;
void ds_why(const ds *d, const ds_figures *v, char *buf, size_t size);

/* What each frame came to, on every process (nb_fit_dataset.c's
 * gather): failed code, the verdict's figures, its values and sigmas. */
enum { G_FAILED, G_RATIO, G_SPOTS, G_EXPLAINED, G_FEW, G_STRONG, G_STRONG_PREDICTED, G_CC, G_PIXELS, G_CAPPED,
       G_NOSPOTS, G_VALUES, G_SIGMAS = G_VALUES + DS_MAX,
       G_WIDTH = G_SIGMAS + DS_MAX };
/* A failed frame's row: why, in words */
void ds_row_why(const ds *d, const double *row, char *buf, size_t size);
/* The rows (every frame's) and the shared values' sigmas as the caller's result */
nb_status ds_result(const ds *d, const double *g, const double *zsigma, nb_fit_ds_result *res);

/* ---- nb_fit_F.c ---- */
/* The structure factors over every frame that passes, into refined (its
 * every equivalent: the stream's HKL record); warm: from the last
 * refinement's I and the frames' scales as they are (else flat, scales 1).
 * d->F_moved: how far F moved from the last refinement's, in its sigmas. */
nb_status ds_refine_F(ds *d, nb_hkl *refined, int warm);
/* The last refinement's table for --F-out; the cell it states, and a line
 * that says which cell it is (the MTZ file's history). */
nb_status ds_F_table(const ds *d, const double cell[6], const char *cell_says, nb_fit_F_table *t);
void ds_F_free(ds *d);
/* The HKL of the measured reflections' I (d->Fset order; every
 * equivalent), the others the start's F. */
nb_status ds_F_hkl(const ds *d, const double *I, nb_hkl *out);
/* The joint refinement's I and their information back into the last
 * refinement's result (what --F-out writes). */
void ds_F_commit(ds *d);
void ds_frefl_free(ds_frame *fr);

/* ---- nb_fit_settings.c ---- */
/* Do the F the frames are rendered with tell reflections apart (not one
 * value: a grid that varies by more than a part in 20)? */
int ds_F_informative(const nb_hkl *hkl);
/* Each passing frame of this process whose turns are refined, tried in the
 * other settings of its lattice (bases that give the cell again, which an
 * indexing may have picked): where one explains the pixels clearly better
 * with the plan's F, the frame takes it (its crystal, its turns from 0) and
 * switched[i] is set, for the caller to fit it again.  Nothing is tried
 * where F is flat (every setting predicts the same). */
nb_status ds_resolve_settings(ds *d, unsigned char *switched);

/* ---- nb_fit_joint.c ---- */
/* The frames' values (and the shared ones) with F, jointly: Levenberg-
 * Marquardt whose step takes each frame's values marginal over F (its
 * reflections' I eliminated with their information over every frame) and
 * moves I by back-substitution; refined holds the HKL of the final I. */
nb_status ds_joint_F(ds *d, nb_hkl *refined);

/* ---- nb_fit_dataset.c, for nb_fit_joint.c ---- */
int ds_joins(const ds *d, long i);
nb_status ds_joint_dz(ds *d, double lambda, double *dz);
double ds_predicted_gain(const ds *d, const ds_frame *fr, const double *dv, const double *dbg);
/* The Levenberg-Marquardt settings of a stage over `frames` frames: it
 * ends when a step gains less than a hundredth per frame (and the model's
 * rounding) */
nb_lm_settings ds_lm_settings(int iterations, long frames);

#endif
