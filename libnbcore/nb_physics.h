/* nb_physics.h - the per-pixel physics of nanoBragg, in one place.
 *
 * Every function here is inline and marked NB_HD, so the same source compiles
 * for the host (the CPU kernels, the unit tests) and for a CUDA device.  The
 * reference-faithful double-precision pixel function nb_pixel_double() is the
 * model every other backend is checked against.
 *
 * The order of floating-point operations follows nanoBragg.c so that the
 * double path reproduces its images to rounding (see docs/physics.md for the
 * formulas and docs/deviations.md for where we differ on purpose).
 */
#ifndef NB_PHYSICS_H
#define NB_PHYSICS_H

#include <math.h>
#include <stddef.h>

#ifdef __CUDACC__
#define NB_HD __host__ __device__ static inline
#else
#define NB_HD static inline
#endif

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

/* Thomson cross section of the electron, m^2 */
#define NB_R_E_SQR 7.94079248018965e-30
#define NB_AVOGADRO 6.02214179e23
/* the reference's default fluence, photons/m^2 (so that r_e^2 * fluence ~ 1) */
#define NB_DEFAULT_FLUENCE 125932015286227086360700780544.0

enum nb_shape { NB_SHAPE_SQUARE = 0, NB_SHAPE_ROUND = 1, NB_SHAPE_GAUSS = 2, NB_SHAPE_TOPHAT = 3 };

/* ---- vectors ------------------------------------------------------------ */

NB_HD double nb_dot(const double a[3], const double b[3]) { return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]; }

NB_HD void nb_cross(const double x[3], const double y[3], double z[3])
{
    double z0 = x[1] * y[2] - x[2] * y[1];
    double z1 = x[2] * y[0] - x[0] * y[2];
    double z2 = x[0] * y[1] - x[1] * y[0];
    z[0] = z0;
    z[1] = z1;
    z[2] = z2;
}

NB_HD double nb_norm(const double v[3]) { return sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]); }

/* out = v/|v| (out may alias v); a zero vector stays zero.  Returns |v|. */
NB_HD double nb_unitize(const double v[3], double out[3])
{
    double mag = nb_norm(v);
    if (mag != 0.0) {
        out[0] = v[0] / mag;
        out[1] = v[1] / mag;
        out[2] = v[2] / mag;
    } else {
        out[0] = out[1] = out[2] = 0.0;
    }
    return mag;
}

/* Rodrigues rotation about a unit axis (out may alias v). */
NB_HD void nb_rotate_axis(const double v[3], double out[3], const double axis[3], double phi)
{
    double sinphi = sin(phi);
    double cosphi = cos(phi);
    double dot = (axis[0] * v[0] + axis[1] * v[1] + axis[2] * v[2]) * (1.0 - cosphi);
    double t0 = axis[0] * dot + v[0] * cosphi + (-axis[2] * v[1] + axis[1] * v[2]) * sinphi;
    double t1 = axis[1] * dot + v[1] * cosphi + (+axis[2] * v[0] - axis[0] * v[2]) * sinphi;
    double t2 = axis[2] * dot + v[2] * cosphi + (-axis[1] * v[0] + axis[0] * v[1]) * sinphi;
    out[0] = t0;
    out[1] = t1;
    out[2] = t2;
}

/* ---- lattice and shape transforms --------------------------------------- */

/* Fourier transform of a grating of N slits: sin(Nx)/sin(x). */
NB_HD double nb_sincg(double x, double N)
{
    if (x == 0.0) return N;
    return sin(x * N) / sin(x);
}

/* Fourier transform of a sphere. */
NB_HD double nb_sinc3(double x)
{
    if (x == 0.0) return 1.0;
    return 3.0 * (sin(x) / x - cos(x)) / (x * x);
}

/* Kahn polarization factor.  As in the reference, the incident and diffracted
 * vectors are re-normalised in place (the caller keeps using `diffracted`). */
NB_HD double nb_polarization_factor(double kahn_factor, double incident[3], double diffracted[3],
                                    const double axis_in[3])
{
    double axis[3], B_in[3], E_in[3];
    double psi = 0.0;
    nb_unitize(incident, incident);
    nb_unitize(diffracted, diffracted);
    nb_unitize(axis_in, axis);
    double cos2theta = nb_dot(incident, diffracted);
    double cos2theta_sqr = cos2theta * cos2theta;
    double sin2theta_sqr = 1 - cos2theta_sqr;
    if (kahn_factor != 0.0) {
        nb_cross(axis, incident, B_in);
        nb_unitize(B_in, B_in);
        nb_cross(incident, B_in, E_in);
        nb_unitize(E_in, E_in);
        double E_out = nb_dot(diffracted, E_in);
        double B_out = nb_dot(diffracted, B_in);
        psi = -atan2(B_out, E_out);
    }
    return 0.5 * (1.0 + cos2theta_sqr - kahn_factor * cos(2 * psi) * sin2theta_sqr);
}

/* ---- structure factors -------------------------------------------------- */

/* The F(hkl) grid as nb-sim sees it: a dense box [h_min..h_max] x ... with
 * F stored at ((h-h_min)*k_range + (k-k_min))*l_range + (l-l_min). */
typedef struct nb_fgrid {
    int h_min, h_max, k_min, k_max, l_min, l_max;
    int h_range, k_range, l_range; /* max - min + 1 */
    long hkls;                     /* reflections read; 0 = no grid, use default_F */
    double default_F;
    const double *F;
} nb_fgrid;

NB_HD double nb_fgrid_at(const nb_fgrid *g, int h, int k, int l)
{
    return g->F[((long)(h - g->h_min) * g->k_range + (k - g->k_min)) * g->l_range + (l - g->l_min)];
}

/* Nearest-neighbour structure factor: grid value inside the box, else default_F. */
NB_HD double nb_F_nearest(const nb_fgrid *g, int h0, int k0, int l0)
{
    if (g->hkls && h0 <= g->h_max && h0 >= g->h_min && k0 <= g->k_max && k0 >= g->k_min && l0 <= g->l_max &&
        l0 >= g->l_min)
        return nb_fgrid_at(g, h0, k0, l0);
    return g->default_F;
}

/* Is the 4x4x4 neighbourhood of the fractional index inside the grid?
 * (the reference's test, on the fractional h) */
NB_HD int nb_tricubic_safe(const nb_fgrid *g, double h, double k, double l)
{
    return !(((h - g->h_min + 3) > g->h_range) || (h - 2 < g->h_min) || ((k - g->k_min + 3) > g->k_range) ||
             (k - 2 < g->k_min) || ((l - g->l_min + 3) > g->l_range) || (l - 2 < g->l_min));
}

/* Four-point Lagrange interpolation (the reference's polint). */
NB_HD double nb_polint(const double xa[4], const double ya[4], double x)
{
    double x0 = (x - xa[1]) * (x - xa[2]) * (x - xa[3]) * ya[0] / ((xa[0] - xa[1]) * (xa[0] - xa[2]) * (xa[0] - xa[3]));
    double x1 = (x - xa[0]) * (x - xa[2]) * (x - xa[3]) * ya[1] / ((xa[1] - xa[0]) * (xa[1] - xa[2]) * (xa[1] - xa[3]));
    double x2 = (x - xa[0]) * (x - xa[1]) * (x - xa[3]) * ya[2] / ((xa[2] - xa[0]) * (xa[2] - xa[1]) * (xa[2] - xa[3]));
    double x3 = (x - xa[0]) * (x - xa[1]) * (x - xa[2]) * ya[3] / ((xa[3] - xa[0]) * (xa[3] - xa[1]) * (xa[3] - xa[2]));
    return x0 + x1 + x2 + x3;
}

/* Tricubic interpolation on the 4x4x4 nodes floor(h)-1 .. floor(h)+2; the
 * caller has checked nb_tricubic_safe().  Interpolates along l, then k, then h
 * (the reference's polin3/polin2 order). */
NB_HD double nb_F_tricubic(const nb_fgrid *g, double h, double k, double l)
{
    int hf = (int)floor(h), kf = (int)floor(k), lf = (int)floor(l);
    double hd[4], kd[4], ld[4], along_k[4], along_l[4], col[4];
    for (int i = 0; i < 4; i++) {
        hd[i] = (double)(hf - 1 + i);
        kd[i] = (double)(kf - 1 + i);
        ld[i] = (double)(lf - 1 + i);
    }
    for (int i1 = 0; i1 < 4; i1++) {
        for (int i2 = 0; i2 < 4; i2++) {
            for (int i3 = 0; i3 < 4; i3++) col[i3] = nb_fgrid_at(g, hf - 1 + i1, kf - 1 + i2, lf - 1 + i3);
            along_l[i2] = nb_polint(ld, col, l);
        }
        along_k[i1] = nb_polint(kd, along_l, k);
    }
    return nb_polint(hd, along_k, h);
}


/* ---- the fast path: single precision where it is safe ------------------- *
 * Miller indices are computed in double (nb-sim's fast kernel does that);
 * everything downstream of the fractional index is single precision, in the
 * functions of nb_fastmath.inc, instantiated here for a plain float
 * (nb_sinpi, nb_lattice, nb_polar ...) and in nb_sim_fast.c for SIMD vectors. */

/* Round a double to nearest without libm: exact for |x| < 2^51. */
NB_HD double nb_rint(double x)
{
    const double magic = 6755399441055744.0; /* 1.5 * 2^52 */
    return x >= 0.0 ? (x + magic) - magic : (x - magic) + magic;
}

NB_HD float nb_bits_as_float(int i)
{
    union {
        int i;
        float f;
    } u;
    u.i = i;
    return u.f;
}

NB_HD int nb_float_bits(float f)
{
    union {
        int i;
        float f;
    } u;
    u.f = f;
    return u.i;
}

#define NB_FN(name) nb_##name
#define NBF float
#define NBI int
#define NB_SELF(m, a, b) ((m) ? (a) : (b))
#define NB_NOT(m) (!(m))
#define NB_F2I(x) ((int)(x))
#define NB_I2F(i) ((float)(i))
#define NB_BITSF(i) nb_bits_as_float(i)
#define NB_FBITS(x) nb_float_bits(x)
#define NB_INLINE NB_HD
#include "nb_fastmath.inc"
#undef NB_FN
#undef NBF
#undef NBI
#undef NB_SELF
#undef NB_NOT
#undef NB_F2I
#undef NB_I2F
#undef NB_BITSF
#undef NB_FBITS
#undef NB_INLINE

/* ---- the pixel ---------------------------------------------------------- */

/* Everything one pixel needs, flattened for both backends.  Lengths in metres,
 * wavelengths in metres, angles in radians; the reciprocal vectors used by the
 * Gaussian and top-hat shapes are in 1/Angstrom, as in the reference. */
typedef struct nb_kparams {
    int fpixels, spixels;
    int roi_xmin, roi_xmax, roi_ymin, roi_ymax; /* inclusive */
    const unsigned char *mask;                  /* NULL, or 0 = skip pixel */
    double pixel_size, subpixel_size;
    int oversample;
    int oversample_thick, oversample_polar, oversample_omega;
    double fdet[3], sdet[3], odet[3], pix0[3], beam[3], polar_vector[3];
    double distance, close_distance;
    int curved_detector, point_pixel;
    int thicksteps;
    double thickstep, thick, mu;
    int nsources;
    const double *src_incident; /* 3 per source: unit propagation direction */
    const double *src_lambda;   /* metres */
    int ncells;                 /* phi steps x mosaic domains */
    const double *cells;        /* 9 per (phi, domain): a, b, c in metres */
    double a_star[3], b_star[3], c_star[3];
    double Na, Nb, Nc, fudge;
    int shape;
    double kahn_factor;
    int nopolar;
    double dmin;                /* metres, 0 = off */
    double water_size, I_bg;
    double r_e_sqr, fluence, steps;
    int interpolate;
    nb_fgrid F;
} nb_kparams;

/* Lattice (shape) transform at fractional index (h, k, l). */
NB_HD double nb_lattice_factor(const nb_kparams *p, double h, double k, double l)
{
    double F_latt = 1.0;
    if (p->shape == NB_SHAPE_SQUARE) {
        if (p->Na > 1) F_latt *= nb_sincg(M_PI * h, p->Na);
        if (p->Nb > 1) F_latt *= nb_sincg(M_PI * k, p->Nb);
        if (p->Nc > 1) F_latt *= nb_sincg(M_PI * l, p->Nc);
        return F_latt;
    }
    double h0 = ceil(h - 0.5), k0 = ceil(k - 0.5), l0 = ceil(l - 0.5);
    if (p->shape == NB_SHAPE_ROUND) {
        double hrad_sqr = (h - h0) * (h - h0) * p->Na * p->Na + (k - k0) * (k - k0) * p->Nb * p->Nb +
                          (l - l0) * (l - l0) * p->Nc * p->Nc;
        return p->Na * p->Nb * p->Nc * 0.723601254558268 * nb_sinc3(M_PI * sqrt(hrad_sqr * p->fudge));
    }
    double dx = (h - h0) * p->a_star[0] + (k - k0) * p->b_star[0] + (l - l0) * p->c_star[0];
    double dy = (h - h0) * p->a_star[1] + (k - k0) * p->b_star[1] + (l - l0) * p->c_star[1];
    double dz = (h - h0) * p->a_star[2] + (k - k0) * p->b_star[2] + (l - l0) * p->c_star[2];
    double rad_star_sqr = (dx * dx + dy * dy + dz * dz) * p->Na * p->Na * p->Nb * p->Nb * p->Nc * p->Nc;
    if (p->shape == NB_SHAPE_GAUSS) return p->Na * p->Nb * p->Nc * exp(-(rad_star_sqr / 0.63 * p->fudge));
    return p->Na * p->Nb * p->Nc * (rad_star_sqr * p->fudge < 0.3969);
}

/* Diagnostics of one evaluated pixel, for -printout. */
typedef struct nb_pixel_trace {
    double pos[3];      /* last subpixel position, m */
    double stol;        /* last evaluated sin(theta)/lambda, 1/m */
    double h, k, l;
    int h0, k0, l0;
    double F_cell, F_latt, I, polar, omega, capture;
    double cell[9];     /* last a, b, c used, m */
} nb_pixel_trace;

/* Render one pixel in double precision, exactly as the reference's pixel loop
 * does (for pixels inside the ROI and the mask).  Returns the photons/pixel;
 * adds this pixel's solid angles to *omega_sum; sets *tripped when a tricubic
 * neighbourhood left the grid (that evaluation then used the nearest
 * neighbour: docs/deviations.md). */
NB_HD double nb_pixel_double(const nb_kparams *p, int fpixel, int spixel, double *omega_sum, int *tripped,
                             nb_pixel_trace *trace)
{
    double I = p->I_bg;
    double polar = p->nopolar ? 1.0 : 0.0;
    double omega_pixel = 0.0;
    double capture_fraction = 0.0;
    double pixel_pos[3], diffracted[3], incident[3], scattering[3];
    double h = 0, k = 0, l = 0, F_cell = 0, F_latt = 0, stol = 0;
    int h0 = 0, k0 = 0, l0 = 0;
    const int os = p->oversample;

    for (int thick_tic = 0; thick_tic < p->thicksteps; ++thick_tic) {
        double Odet = thick_tic * p->thickstep;
        capture_fraction = 0.0;
        if (p->thick == 0.0) capture_fraction = 1.0;
        for (int subS = 0; subS < os; ++subS) {
            for (int subF = 0; subF < os; ++subF) {
                double Fdet = p->subpixel_size * (fpixel * os + subF) + p->subpixel_size / 2.0;
                double Sdet = p->subpixel_size * (spixel * os + subS) + p->subpixel_size / 2.0;
                for (int i = 0; i < 3; i++)
                    pixel_pos[i] = Fdet * p->fdet[i] + Sdet * p->sdet[i] + Odet * p->odet[i] + p->pix0[i];
                if (p->curved_detector) {
                    /* every pixel at `distance`: planar lab y, z read as angles */
                    double v[3], nv[3];
                    for (int i = 0; i < 3; i++) v[i] = p->distance * p->beam[i];
                    nb_rotate_axis(v, nv, p->sdet, pixel_pos[1] / p->distance);
                    nb_rotate_axis(nv, pixel_pos, p->fdet, pixel_pos[2] / p->distance);
                }
                double airpath = nb_unitize(pixel_pos, diffracted);
                if (omega_pixel == 0.0 || p->oversample_omega) {
                    omega_pixel = p->pixel_size * p->pixel_size / airpath / airpath * p->close_distance / airpath;
                    if (p->point_pixel) omega_pixel = 1.0 / airpath / airpath;
                }
                *omega_sum += omega_pixel;
                if (capture_fraction == 0.0 || p->oversample_thick) {
                    double parallax = nb_dot(diffracted, p->odet);
                    capture_fraction = exp(-thick_tic * p->thickstep * p->mu / parallax) -
                                       exp(-(thick_tic + 1) * p->thickstep * p->mu / parallax);
                }
                for (int source = 0; source < p->nsources; ++source) {
                    incident[0] = p->src_incident[3 * source + 0];
                    incident[1] = p->src_incident[3 * source + 1];
                    incident[2] = p->src_incident[3 * source + 2];
                    double lambda = p->src_lambda[source];
                    scattering[0] = (diffracted[0] - incident[0]) / lambda;
                    scattering[1] = (diffracted[1] - incident[1]) / lambda;
                    scattering[2] = (diffracted[2] - incident[2]) / lambda;
                    stol = 0.5 * nb_norm(scattering);
                    if (p->dmin > 0.0 && stol > 0.0 && p->dmin > 0.5 / stol) continue;
                    if (polar == 0.0 || p->oversample_polar)
                        polar = nb_polarization_factor(p->kahn_factor, incident, diffracted, p->polar_vector);
                    for (int cell = 0; cell < p->ncells; ++cell) {
                        const double *abc = p->cells + 9 * cell;
                        h = nb_dot(abc + 0, scattering);
                        k = nb_dot(abc + 3, scattering);
                        l = nb_dot(abc + 6, scattering);
                        h0 = (int)ceil(h - 0.5);
                        k0 = (int)ceil(k - 0.5);
                        l0 = (int)ceil(l - 0.5);
                        F_latt = nb_lattice_factor(p, h, k, l);
                        if (F_latt == 0.0 && p->water_size == 0.0) continue;
                        if (p->interpolate && nb_tricubic_safe(&p->F, h, k, l)) {
                            F_cell = nb_F_tricubic(&p->F, h, k, l);
                        } else {
                            if (p->interpolate) *tripped = 1;
                            F_cell = nb_F_nearest(&p->F, h0, k0, l0);
                        }
                        I += F_cell * F_cell * F_latt * F_latt;
                        if (p->oversample_thick) I *= capture_fraction;
                        if (p->oversample_polar) I *= polar;
                        if (p->oversample_omega) I *= omega_pixel;
                    }
                }
            }
        }
    }
    double value = p->r_e_sqr * p->fluence * I / p->steps;
    if (!p->oversample_thick) value *= capture_fraction;
    if (!p->oversample_polar) value *= polar;
    if (!p->oversample_omega) value *= omega_pixel;
    if (trace) {
        for (int i = 0; i < 3; i++) trace->pos[i] = pixel_pos[i];
        trace->stol = stol;
        trace->h = h;
        trace->k = k;
        trace->l = l;
        trace->h0 = h0;
        trace->k0 = k0;
        trace->l0 = l0;
        trace->F_cell = F_cell;
        trace->F_latt = F_latt;
        trace->I = I;
        trace->polar = polar;
        trace->omega = omega_pixel;
        trace->capture = capture_fraction;
        for (int i = 0; i < 9; i++) trace->cell[i] = p->ncells ? p->cells[9 * (p->ncells - 1) + i] : 0.0;
    }
    return value;
}

/* ---- the fast pixel -------------------------------------------------------- */

enum nb_fmode { NB_FMODE_DEFAULT = 0, NB_FMODE_NEAREST = 1, NB_FMODE_TRICUBIC = 2 };

/* Up to this N the grating factor is cheaper as U_{N-1}(cos pi d) than as a
 * ratio of sines (and as accurate: the recurrence is stable for |cos| <= 1). */
#define NB_CHEB_MAX_N 16

/* Per (source, cell): A = cell vectors / lambda (rows a, b, c), hi = A.i, and
 * A times the detector's fast, slow, normal axes and origin (on a flat
 * detector A.pos is then linear in the sub-pixel's Fdet, Sdet, Odet). */
typedef struct nb_pair {
    double A[9];
    double hi[3];
    double Af[3], As[3], Ao[3], Ap[3];
} nb_pair;

/* What the fast path needs beyond nb_kparams (built by nb_fparams_build in
 * nb-sim, copied to the device by the CUDA backend). */
typedef struct nb_fparams {
    nb_kparams kp;
    const nb_pair *pairs;           /* nsources x ncells, source-major */
    const float *src_i, *src_E, *src_B; /* per source: incident direction, its E and B polarization axes */
    const float *src_inv2lambda;    /* 1/(2 lambda), 1/m */
    float dmin;                     /* m, 0 = off */
    float a_star[3], b_star[3], c_star[3];
    const float *Fgrid;             /* float copy of the F grid, padded for 4x4x4 reads */
    int fmode;                      /* enum nb_fmode */
    int cheb;                       /* N a, b, c whole and <= NB_CHEB_MAX_N */
} nb_fparams;

/* One pixel on the fast path, in plain scalar code: the same arithmetic as
 * the CPU's SIMD kernel lane by lane (nb_sim_fast.c) and the CUDA kernel.
 * Returns photons/pixel; adds the evaluated solid angles to *omega_sum; sets
 * *tripped where a tricubic neighbourhood left the grid. */
NB_HD float nb_pixel_fast(const nb_fparams *fp, int fpixel, int spixel, double *omega_sum, int *tripped)
{
    const nb_kparams *kp = &fp->kp;
    const nb_fgrid *g = &kp->F;
    const int os = kp->oversample;
    const double sub = kp->subpixel_size;
    const float kahn = (float)kp->kahn_factor;
    const int any_os = kp->oversample_thick || kp->oversample_polar || kp->oversample_omega;
    const float Na = (float)kp->Na, Nb = (float)kp->Nb, Nc = (float)kp->Nc, fudge = (float)kp->fudge;
    const float pix2_close = (float)(kp->pixel_size * kp->pixel_size * kp->close_distance);
    float I = (float)kp->I_bg, polar = kp->nopolar ? 1.0f : 0.0f, omega = 0.0f, capture = 0.0f;

    for (int t = 0; t < kp->thicksteps; t++) {
        const double Odet = t * kp->thickstep;
        capture = kp->thick != 0.0 ? 0.0f : 1.0f;
        for (int subS = 0; subS < os; subS++) {
            const double Sdet = sub * ((double)spixel * os + subS) + sub / 2.0;
            const double Cx = Sdet * kp->sdet[0] + Odet * kp->odet[0] + kp->pix0[0];
            const double Cy = Sdet * kp->sdet[1] + Odet * kp->odet[1] + kp->pix0[1];
            const double Cz = Sdet * kp->sdet[2] + Odet * kp->odet[2] + kp->pix0[2];
            for (int subF = 0; subF < os; subF++) {
                const double Fdet = sub * ((double)fpixel * os + subF) + sub / 2.0;
                double pos[3] = {Fdet * kp->fdet[0] + Cx, Fdet * kp->fdet[1] + Cy, Fdet * kp->fdet[2] + Cz};
                if (kp->curved_detector) {
                    double v[3], nv[3];
                    for (int i = 0; i < 3; i++) v[i] = kp->distance * kp->beam[i];
                    nb_rotate_axis(v, nv, kp->sdet, pos[1] / kp->distance);
                    nb_rotate_axis(nv, pos, kp->fdet, pos[2] / kp->distance);
                }
                double r2 = pos[0] * pos[0] + pos[1] * pos[1] + pos[2] * pos[2];
                /* 1/r: a single-precision estimate refined by a Newton step in double */
                double inv = (double)nb_rsqrtf2((float)r2);
                inv = inv * (1.5 - 0.5 * r2 * inv * inv);
                float invf = (float)inv;
                float om = kp->point_pixel ? invf * invf : pix2_close * invf * invf * invf;
                omega = omega == 0.0f || kp->oversample_omega ? om : omega;
                *omega_sum += omega;
                float dx = (float)pos[0] * invf, dy = (float)pos[1] * invf, dz = (float)pos[2] * invf;
                if (kp->thick != 0.0) {
                    float rho = dx * (float)kp->odet[0] + dy * (float)kp->odet[1] + dz * (float)kp->odet[2];
                    float mu_over = (float)(kp->thickstep * kp->mu) / rho;
                    float cap = nb_expf(-(float)t * mu_over) - nb_expf(-(float)(t + 1) * mu_over);
                    capture = capture == 0.0f || kp->oversample_thick ? cap : capture;
                }
                for (int src = 0; src < kp->nsources; src++) {
                    const float *si = fp->src_i + 3 * src;
                    float c2t = dx * si[0] + dy * si[1] + dz * si[2];
                    if (fp->dmin > 0.0f) {
                        float stol = nb_sqrtf(2.0f - 2.0f * c2t) * fp->src_inv2lambda[src];
                        if (stol > 0.0f && fp->dmin * stol > 0.5f) continue;
                    }
                    if (polar == 0.0f || kp->oversample_polar) {
                        float dE = 0.0f, dB = 0.0f;
                        if (kahn != 0.0f) {
                            const float *sE = fp->src_E + 3 * src, *sB = fp->src_B + 3 * src;
                            dE = dx * sE[0] + dy * sE[1] + dz * sE[2];
                            dB = dx * sB[0] + dy * sB[1] + dz * sB[2];
                        }
                        polar = nb_polar(kahn, c2t, dE, dB);
                    }
                    float mult = (kp->oversample_thick ? capture : 1.0f) * (kp->oversample_polar ? polar : 1.0f) *
                                 (kp->oversample_omega ? omega : 1.0f);
                    const nb_pair *pc = fp->pairs + (size_t)src * kp->ncells;
                    for (int cell = 0; cell < kp->ncells; cell++, pc++) {
                        double hkl[3];
                        for (int i = 0; i < 3; i++)
                            hkl[i] = (pc->A[3 * i] * pos[0] + pc->A[3 * i + 1] * pos[1] + pc->A[3 * i + 2] * pos[2]) *
                                         inv -
                                     pc->hi[i];
                        double h0 = nb_rint(hkl[0]), k0 = nb_rint(hkl[1]), l0 = nb_rint(hkl[2]);
                        float dh = (float)(hkl[0] - h0), dk = (float)(hkl[1] - k0), dl = (float)(hkl[2] - l0);
                        float F_latt = nb_lattice(kp->shape, fp->cheb, dh, dk, dl, Na, Nb, Nc, fudge, fp->a_star,
                                                  fp->b_star, fp->c_star);
                        float F_cell = (float)g->default_F;
                        if (fp->fmode != NB_FMODE_DEFAULT) {
                            int ih = (int)h0, ik = (int)k0, il = (int)l0;
                            if (ih >= g->h_min && ih <= g->h_max && ik >= g->k_min && ik <= g->k_max &&
                                il >= g->l_min && il <= g->l_max)
                                F_cell = fp->Fgrid[((ih - g->h_min) * g->k_range + (ik - g->k_min)) * g->l_range +
                                                   (il - g->l_min)];
                            if (fp->fmode == NB_FMODE_TRICUBIC) {
                                float hh = (float)ih + dh, kk = (float)ik + dk, ll = (float)il + dl;
                                int safe = hh >= (float)(g->h_min + 2) && hh <= (float)(g->h_max - 2) &&
                                           kk >= (float)(g->k_min + 2) && kk <= (float)(g->k_max - 2) &&
                                           ll >= (float)(g->l_min + 2) && ll <= (float)(g->l_max - 2);
                                if (!safe) {
                                    *tripped = 1;
                                } else {
                                    /* floor and the position within the cell, from the nearest index */
                                    int nh = dh < 0.0f, nk = dk < 0.0f, nl = dl < 0.0f;
                                    float wh[4], wk[4], wl[4];
                                    nb_cubic_weights(dh + (nh ? 1.0f : 0.0f), wh);
                                    nb_cubic_weights(dk + (nk ? 1.0f : 0.0f), wk);
                                    nb_cubic_weights(dl + (nl ? 1.0f : 0.0f), wl);
                                    int base = ((ih - nh - 1 - g->h_min) * g->k_range + (ik - nk - 1 - g->k_min)) *
                                                   g->l_range +
                                               (il - nl - 1 - g->l_min);
                                    float sum = 0.0f;
                                    for (int a = 0; a < 4; a++)
                                        for (int b = 0; b < 4; b++) {
                                            const float *row = fp->Fgrid + base + (a * g->k_range + b) * g->l_range;
                                            float sl = wl[0] * row[0] + wl[1] * row[1] + wl[2] * row[2] + wl[3] * row[3];
                                            sum += wh[a] * wk[b] * sl;
                                        }
                                    F_cell = sum;
                                }
                            }
                        }
                        float term = F_cell * F_cell * F_latt * F_latt;
                        /* the reference skips zero lattice terms unless there is water */
                        if (F_latt == 0.0f && kp->water_size == 0.0) continue;
                        I = any_os ? (I + term) * mult : I + term;
                    }
                }
            }
        }
    }
    float v = (float)(kp->r_e_sqr * kp->fluence / kp->steps) * I;
    if (!kp->oversample_thick) v *= capture;
    if (!kp->oversample_polar) v *= polar;
    if (!kp->oversample_omega) v *= omega;
    return v;
}

#endif
