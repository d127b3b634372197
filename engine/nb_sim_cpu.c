/* nb_sim_cpu.c - the kernels' inputs from a one-panel plan (nb_sim_setup_build)
 * and the reference-faithful double kernel on the CPU. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "nb_sim.h"
#include "nb_vec.h"

void nb_kparams_set_panel(nb_kparams *dst, const nb_panel *src)
{
    NB_PANEL_FIELDS(NB_FIELD_COPY)
    dst->mask = src->mask;
}

/* The plan's fields the kernels take as they are, by their table. */
static void plan_fields_to_kparams(nb_kparams *dst, const nb_plan *src)
{
    NB_PLAN_KERNEL_FIELDS(NB_FIELD_COPY)
}

nb_status nb_sim_setup_beam(const nb_plan *plan, nb_sim_setup *s)
{
    nb_kparams *kp = &s->kp;
    nb_status st;
    memset(s, 0, sizeof *s);

    nb_kparams_set_panel(kp, &plan->panels[0]);
    plan_fields_to_kparams(kp, plan);
    kp->subpixel_size = kp->pixel_size / plan->oversample;
    kp->r_e_sqr = NB_R_E_SQR;

    /* sources: the propagation direction is minus the unit source position */
    kp->nsources = plan->nsources;
    if ((st = nb_calloc((void **)&s->src_incident, (size_t)plan->nsources, 3 * sizeof(double), "sources")) ||
        (st = nb_calloc((void **)&s->src_lambda, (size_t)plan->nsources, sizeof(double), "sources"))) {
        nb_sim_setup_free(s);
        return st;
    }
    for (int i = 0; i < plan->nsources; i++) {
        for (int k = 0; k < 3; k++) s->src_incident[3 * i + k] = -plan->sources[i].dir[k];
        s->src_lambda[i] = plan->sources[i].lambda;
    }
    kp->src_incident = s->src_incident;
    kp->src_lambda = s->src_lambda;
    return NB_OK;
}

nb_status nb_sim_setup_build(const nb_plan *plan, const nb_hkl *hkl, nb_sim_setup *s)
{
    nb_kparams *kp = &s->kp;
    nb_status st;
    if (!nb_plan_has_crystal(plan))
        return nb_error_set(NB_ERR_DATA, "the plan has no crystal (nb-geom --nonbragg without -cell or -mat): "
                                         "nothing to render here; nb-amorphous renders its amorphous sample");
    if ((st = nb_sim_setup_beam(plan, s))) return st;

    /* the crystal for every (phi step, mosaic domain), in the reference's loop
     * order; phi exactly 0 uses the unrotated cell (docs/deviations.md) */
    kp->ncells = plan->phisteps * plan->mosaic_domains;
    double *scaled = NULL;
    const double *umats = plan->mosaic_umats;
    if ((st = nb_calloc((void **)&s->cells, (size_t)kp->ncells, 9 * sizeof(double), "rotated cells"))) goto fail;
    /* a frame's own spread (frame_mosaic): the domains' angles scaled, once a domain */
    if (plan->mosaic_spread > 0.0 && plan->mosaic_umats_spread > 0.0 &&
        plan->mosaic_spread != plan->mosaic_umats_spread) {
        if ((st = nb_calloc((void **)&scaled, (size_t)plan->mosaic_domains, 9 * sizeof(double), "mosaic matrices")))
            goto fail;
        for (int d = 0; d < plan->mosaic_domains; d++)
            nb_mosaic_umat_rescale(plan->mosaic_umats + 9 * d, plan->mosaic_spread / plan->mosaic_umats_spread,
                                   scaled + 9 * d);
        umats = scaled;
    }
    for (int t = 0; t < plan->phisteps; t++) {
        double phi = plan->phi0 + plan->phistep * t;
        double ap[3], bp[3], cp[3];
        if (phi != 0.0) {
            nb_rotate_axis(plan->cell_a, ap, plan->spindle, phi);
            nb_rotate_axis(plan->cell_b, bp, plan->spindle, phi);
            nb_rotate_axis(plan->cell_c, cp, plan->spindle, phi);
        } else {
            memcpy(ap, plan->cell_a, sizeof ap);
            memcpy(bp, plan->cell_b, sizeof bp);
            memcpy(cp, plan->cell_c, sizeof cp);
        }
        for (int d = 0; d < plan->mosaic_domains; d++) {
            double *abc = s->cells + 9 * ((size_t)t * plan->mosaic_domains + d);
            if (plan->mosaic_spread > 0.0) {
                const double *U = umats + 9 * d;
                nb_rotate_umat(ap, abc + 0, U);
                nb_rotate_umat(bp, abc + 3, U);
                nb_rotate_umat(cp, abc + 6, U);
            } else {
                memcpy(abc + 0, ap, sizeof ap);
                memcpy(abc + 3, bp, sizeof bp);
                memcpy(abc + 6, cp, sizeof cp);
            }
        }
    }
    free(scaled);
    kp->cells = s->cells;
    memcpy(kp->a_star, plan->recip_a, sizeof kp->a_star);
    memcpy(kp->b_star, plan->recip_b, sizeof kp->b_star);
    memcpy(kp->c_star, plan->recip_c, sizeof kp->c_star);
    kp->frac_N[0] = plan->Na != floor(plan->Na);
    kp->frac_N[1] = plan->Nb != floor(plan->Nb);
    kp->frac_N[2] = plan->Nc != floor(plan->Nc);
    kp->shape = plan->shape;
    if (!nb_shape_known(kp->shape)) {
        st =
            nb_error_set(NB_ERR_DATA, "the plan's crystal shape %d is none of square, round, gauss, tophat", kp->shape);
        goto fail;
    }
    /* water: F = 2.57 forward, density 1 g/cm^3, 18 g/mol */
    kp->I_bg = 2.57 * 2.57 * NB_R_E_SQR * plan->fluence * plan->water_size * plan->water_size * plan->water_size *
               1e6 * NB_AVOGADRO / 18.0;
    kp->steps = (double)plan->nsources * plan->mosaic_domains * plan->phisteps * plan->oversample * plan->oversample;
    kp->F = nb_hkl_grid(hkl);
    kp->interpolate = plan->interpolate && kp->F.hkls != 0;
    return NB_OK;
fail:
    nb_sim_setup_free(s);
    return st;
}

nb_status nb_sim_plan_F(const nb_plan *plan, nb_hkl *hkl)
{
    if (plan->hkl_file || (plan->dump_file && !plan->dump_implicit))
        return nb_error_set(NB_ERR_USAGE, "the plan asks for structure factors from '%s': put nb-hkl before %s",
                            plan->hkl_file ? plan->hkl_file : plan->dump_file, nb_tool_name());
    if (plan->default_F == 0.0)
        return nb_error_set(NB_ERR_USAGE,
                            "no structure factors: the plan has no -default_F and no HKL record came (nb-hkl)");
    hkl->default_F = plan->default_F;
    return NB_OK;
}

void nb_sim_setup_free(nb_sim_setup *s)
{
    free(s->cells);
    free(s->src_incident);
    free(s->src_lambda);
    memset(s, 0, sizeof *s);
}

nb_status nb_render_cpu_double(const nb_kparams *kp, float *image, nb_render_result *res, nb_progress *prog)
{
    double *row_omega;
    nb_status st = nb_calloc((void **)&row_omega, (size_t)kp->spixels, sizeof(double), "row sums");
    if (st) return st;
    int tripped = 0;
    const nb_roi roi = {kp->roi_xmin, kp->roi_xmax, kp->roi_ymin, kp->roi_ymax};
    double *wide = res->wide ? res->wide->image : NULL;
    const size_t fp = (size_t)kp->fpixels;
    double t0 = nb_now();
#pragma omp parallel for schedule(dynamic, 1) reduction(| : tripped)
    for (int s = 0; s < kp->spixels; s++) {
        double omega = 0.0;
        /* first touch of the row on the thread that renders it */
        if (image) {
            nb_fault_rows_ahead(image, fp * sizeof(float), kp->spixels, s);
            memset(image + (size_t)s * fp, 0, fp * sizeof(float));
        }
        if (wide) memset(wide + (size_t)s * fp, 0, fp * sizeof(double));
        for (int f = 0; f < kp->fpixels; f++) {
            if (!nb_pixel_rendered(kp, f, s)) continue;
            int trip = 0;
            double v = nb_pixel_double(kp, f, s, &omega, &trip, NULL);
            tripped |= trip;
            if (image) image[(size_t)s * fp + f] = (float)v;
            if (wide) wide[(size_t)s * fp + f] = v;
        }
        /* per-row sums, added in row order below: the same total on any thread count */
        row_omega[s] = omega;
        if (image && res->row_stats)
            nb_row_stats_compute(image + (size_t)s * fp, kp->fpixels, s, roi, kp->mask ? kp->mask + (size_t)s * fp : NULL,
                                 &res->row_stats[s]);
        if (image && res->row_crc) nb_payload_crc_take(res->row_crc, (size_t)s, image + (size_t)s * fp);
        if (prog) nb_progress_add(prog, 1);
    }
    res->omega_sum = 0.0;
    for (int s = 0; s < kp->spixels; s++) res->omega_sum += row_omega[s];
    res->tripped = tripped;
    res->row_stats_filled = image && res->row_stats != NULL;
    res->seconds = nb_now() - t0;
    free(row_omega);
    return NB_OK;
}

/* ---- the fast path ---------------------------------------------------------- */

#include "nb_sim_fast.h"

const char *nb_fast_variant(void)
{
#if defined(__x86_64__) && defined(NB_HAVE_X86_VARIANTS)
    __builtin_cpu_init();
    int avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                 __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw");
    int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    int limit = nb_simd_limit();
#ifndef NB_HAVE_AVX512_VARIANT
    avx512 = 0; /* not built (the Makefile's NB_AVX512) */
#endif
    if (avx512 && limit >= 2) return "avx512";
    if (avx2 && limit >= 1) return "avx2";
#endif
    return "generic";
}

/* The build of an entry point (the image pass nb_render_fast, the tangent
 * passes nb_render_fast_grad, the adjoint sweep nb_render_fast_adjoint) for
 * the variant nb_fast_variant names */
#if defined(__x86_64__) && defined(NB_HAVE_X86_VARIANTS)
#ifdef NB_HAVE_AVX512_VARIANT
#define PICK_AVX512(entry) \
    if (!strcmp(v, "avx512")) return entry##_avx512;
#else
#define PICK_AVX512(entry)
#endif
#define PICK_VARIANT(entry)                     \
    const char *v = nb_fast_variant();          \
    PICK_AVX512(entry)                          \
    if (!strcmp(v, "avx2")) return entry##_avx2; \
    return entry##_generic;
#else
#define PICK_VARIANT(entry) return entry##_generic;
#endif

static nb_fast_kernel pick_kernel(void) { PICK_VARIANT(nb_render_fast) }

nb_fast_grad_kernel nb_pick_fast_grad_kernel(void) { PICK_VARIANT(nb_render_fast_grad) }

nb_fast_adjoint_kernel nb_pick_fast_adjoint_kernel(void) { PICK_VARIANT(nb_render_fast_adjoint) }

/* AVX2's 16 vector registers spill 8 tangents' lanes far more than 4: 8
 * names at 1024^2 on one thread took 24.2 ms in one pass of 8 and 19.5 in
 * two of 4.  With AVX-512's 32 registers one pass of 8 is the quicker (9.6
 * ms against 11.3), and the portable variant has the 8's instantiation
 * alone (nb_sim_fast_grad.c). */
int nb_fast_grad_names_a_pass(void) { return !strcmp(nb_fast_variant(), "avx2") ? 4 : NB_DUAL_N; }

/* The Miller index by offset's tables (nb_pixel_offset): each pair's A in
 * single precision, rows of 4; and its reach, N |A| times the largest angle
 * between a ray and its reference (half a span and a pixel along a row, or
 * along a curved detector's arc, plus the sensor's depth, seen from the
 * closest point of the detector). */
static nb_status offset_tables(const nb_kparams *kp, const nb_pair *pairs, size_t npairs, nb_fparams *fp)
{
    float *A4 = NULL;
    nb_status st = nb_calloc((void **)&A4, npairs, 12 * sizeof(float), "source x cell constants");
    if (st) return st;
    double A_max = 0.0;
    for (size_t p = 0; p < npairs; p++)
        for (int v = 0; v < 3; v++) {
            const double *A = pairs[p].A + 3 * v;
            for (int i = 0; i < 3; i++) A4[12 * p + 4 * v + i] = (float)A[i];
            const double norm = sqrt(nb_dot(A, A));
            if (norm > A_max) A_max = norm;
        }
    double N_max = kp->Na > kp->Nb ? kp->Na : kp->Nb;
    if (kp->Nc > N_max) N_max = kp->Nc;
    const double span = (NB_OFFSET_SPAN / 2 + 1) * kp->pixel_size + kp->thick;
    fp->offset_reach = kp->close_distance > 0.0 ? N_max * A_max * span / kp->close_distance : INFINITY;
    fp->pair_A4 = A4;
    return NB_OK;
}

nb_status nb_fparams_build(const nb_kparams *kp, nb_fparams *fp)
{
    nb_status st;
    nb_pair *pairs = NULL;
    float *src_i = NULL, *src_E = NULL, *src_B = NULL, *inv2l = NULL, *Fgrid = NULL;
    memset(fp, 0, sizeof *fp);
    fp->kp = *kp;
    size_t npairs = (size_t)kp->nsources * kp->ncells;
    if ((st = nb_calloc((void **)&pairs, npairs, sizeof *pairs, "source x cell constants"))) goto fail;
    for (int s = 0; s < kp->nsources; s++) {
        const double *inc = kp->src_incident + 3 * s;
        double lambda = kp->src_lambda[s];
        for (int c = 0; c < kp->ncells; c++) {
            nb_pair *pc = pairs + (size_t)s * kp->ncells + c;
            const double *abc = kp->cells + 9 * c;
            for (int v = 0; v < 3; v++) {
                double *A = pc->A + 3 * v;
                for (int i = 0; i < 3; i++) A[i] = abc[3 * v + i] / lambda;
                pc->hi[v] = nb_dot(A, inc);
                pc->Af[v] = nb_dot(A, kp->fdet);
                pc->As[v] = nb_dot(A, kp->sdet);
                pc->Ao[v] = nb_dot(A, kp->odet);
                pc->Ap[v] = nb_dot(A, kp->pix0);
            }
        }
    }
    if ((st = nb_calloc((void **)&src_i, (size_t)kp->nsources, 3 * sizeof(float), "sources")) ||
        (st = nb_calloc((void **)&src_E, (size_t)kp->nsources, 3 * sizeof(float), "sources")) ||
        (st = nb_calloc((void **)&src_B, (size_t)kp->nsources, 3 * sizeof(float), "sources")) ||
        (st = nb_calloc((void **)&inv2l, (size_t)kp->nsources, sizeof(float), "sources")))
        goto fail;
    for (int s = 0; s < kp->nsources; s++) {
        double i[3], axis[3], B[3], E[3];
        nb_unitize(kp->src_incident + 3 * s, i);
        nb_unitize(kp->polar_vector, axis);
        /* the E-vector nearest the polarization axis, as the reference */
        nb_cross(axis, i, B);
        nb_unitize(B, B);
        nb_cross(i, B, E);
        nb_unitize(E, E);
        for (int k = 0; k < 3; k++) {
            src_i[3 * s + k] = (float)i[k];
            src_E[3 * s + k] = (float)E[k];
            src_B[3 * s + k] = (float)B[k];
        }
        inv2l[s] = (float)(1.0 / (2.0 * kp->src_lambda[s]));
    }
    fp->dmin = (float)kp->dmin;
    for (int k = 0; k < 3; k++) {
        fp->a_star[k] = (float)kp->a_star[k];
        fp->b_star[k] = (float)kp->b_star[k];
        fp->c_star[k] = (float)kp->c_star[k];
    }
    fp->cheb = 1;
    const double Ns[3] = {kp->Na, kp->Nb, kp->Nc};
    for (int k = 0; k < 3; k++)
        if (Ns[k] != floor(Ns[k]) || Ns[k] > NB_CHEB_MAX_N) fp->cheb = 0;
    if (fp->cheb) fp->na = (int)kp->Na, fp->nb = (int)kp->Nb, fp->nc = (int)kp->Nc;
    fp->pix2_close = (float)(kp->pixel_size * kp->pixel_size * kp->close_distance);
    fp->kahn = (float)kp->kahn_factor;
    fp->thickstep_mu = (float)(kp->thickstep * kp->mu);
    fp->scale = (float)(kp->r_e_sqr * kp->fluence / kp->steps);
    fp->Na_f = (float)kp->Na, fp->Nb_f = (float)kp->Nb, fp->Nc_f = (float)kp->Nc, fp->fudge_f = (float)kp->fudge;
    for (int k = 0; k < 3; k++) fp->odet_f[k] = (float)kp->odet[k];
    fp->default_F = (float)kp->F.default_F;
    if ((st = offset_tables(kp, pairs, npairs, fp))) goto fail;
    fp->fmode = NB_FMODE_DEFAULT;
    if (kp->F.hkls) {
        size_t n = (size_t)kp->F.h_range * kp->F.k_range * kp->F.l_range;
        /* padded so that a 4x4x4 neighbourhood read never leaves the array */
        size_t pad = 4 * ((size_t)kp->F.k_range * kp->F.l_range + kp->F.l_range + 1);
        if ((st = nb_calloc((void **)&Fgrid, n + pad, sizeof(float), "the F grid"))) goto fail;
        for (size_t i = 0; i < n; i++) Fgrid[i] = (float)kp->F.F[i];
        fp->fmode = kp->interpolate ? NB_FMODE_TRICUBIC : NB_FMODE_NEAREST;
    }
    fp->pairs = pairs;
    fp->src_i = src_i, fp->src_E = src_E, fp->src_B = src_B, fp->src_inv2lambda = inv2l;
    fp->Fgrid = Fgrid;
    return NB_OK;
fail:
    free(pairs), free(src_i), free(src_E), free(src_B), free(inv2l), free(Fgrid);
    free((void *)fp->pair_A4);
    memset(fp, 0, sizeof *fp);
    return st;
}

void nb_fparams_free(nb_fparams *fp)
{
    free((void *)fp->pairs);
    free((void *)fp->src_i);
    free((void *)fp->src_E);
    free((void *)fp->src_B);
    free((void *)fp->src_inv2lambda);
    free((void *)fp->Fgrid);
    free((void *)fp->pair_A4);
    memset(fp, 0, sizeof *fp);
}

nb_status nb_render_cpu_fast(const nb_kparams *kp, float *image, nb_render_result *res, nb_progress *prog)
{
    nb_fparams fp;
    double *row_omega = NULL;
    nb_status st = nb_fparams_build(kp, &fp);
    if (st) return st;
    if ((st = nb_calloc((void **)&row_omega, (size_t)kp->spixels, sizeof(double), "row sums"))) {
        nb_fparams_free(&fp);
        return st;
    }
    double t0 = nb_now();
    int tripped = 0;
    pick_kernel()(&fp, image, row_omega, res->row_stats, res->row_crc, &tripped, prog);
    res->seconds = nb_now() - t0;
    res->row_stats_filled = res->row_stats != NULL;
    res->tripped = tripped;
    res->omega_sum = 0.0;
    for (int s = 0; s < kp->spixels; s++) res->omega_sum += row_omega[s];
    free(row_omega);
    nb_fparams_free(&fp);
    return NB_OK;
}
