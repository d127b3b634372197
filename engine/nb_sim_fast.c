/* nb_sim_fast.c - nb-sim's fast CPU kernel, its image pass: a row at a time,
 * W pixels (one group of SIMD lanes) at a time, in the instantiations of a
 * row's kind the compiler folds constants into (render_row).
 *
 * Compiled once per instruction set (the Makefile's nb_sim_fast_<isa>.o) with
 * NB_FAST_NAME naming the entry point; nb_sim_cpu.c picks one at run time.
 * The lanes, the tables and the pixel's terms are nb_fast_lanes.inc, shared
 * with the derivative pass (nb_sim_fast_grad.c).
 */
#include "nb_fast_lanes.inc"

/* the row statistics, compiled for this instruction set */
#define NB_ROW_STATS_NAME row_stats_here
#define NB_ROW_STATS_LINKAGE static
#include "nb_rowstats.inc"

/* Row s_row, a group of W pixels at a time, a chunk of groups' tables at a time. */
INL void render_row_impl(const nb_fparams *fs_shared, int s_row, float *restrict row, vd *omega_acc, int *tripped,
                         const row_kind k)
{
    /* a private copy: the image's float stores cannot alias it, so what the
     * compiler loads once stays loaded across the row */
    const nb_fparams fs_copy = *fs_shared, *fs = &fs_copy;
    const nb_kparams *kp = &fs->kp;
    vx_px_ctx c;
    row_context(&c, fs, s_row, k, tripped);
    c.omega_sum = *omega_acc;
    /* the row's parts, per layer and slow sub-step (t os + subS): computed
     * once per row, used by the tables and by every group */
    row_part parts[k.px.one_step ? 1 : TABLE_STEPS];
    if (c.parts_tabled)
        for (int t = 0; t < c.nthick; t++)
            for (int subS = 0; subS < c.os; subS++)
                parts[t * c.os + subS] = row_part_at(kp, s_row, t * kp->thickstep, subS);
    /* tabled (flat): the groups' centres are done ahead, a chunk of the row
     * at a time, in vectors of doubles - no scalar square root and division
     * at the head of each group's chain */
    pos_table pos[k.px.one_step ? 1 : TABLE_STEPS];
    pair_table pair[k.px.one_pair && !k.px.one_step ? TABLE_STEPS : 1];
    c.parts = parts, c.pos = pos, c.pair = pair;
    const vx_px_rules rules = vx_px_rules_of(kp, k.px);
    for (int c0 = 0; c0 < kp->fpixels; c0 += TABLE_GROUPS * W) {
        const int left = (kp->fpixels - c0 + W - 1) / W, groups = left < TABLE_GROUPS ? left : TABLE_GROUPS;
        if (c.tabled) fill_tables(&c, pos, pair, c0);
        for (int g = 0; g < groups; g++) {
            const int f0 = c0 + g * W;
            const int n = k.full ? W : kp->fpixels - f0 < W ? kp->fpixels - f0 : W;
            float *out = row + f0;
            vi live;
            if (!group_live(kp, s_row, f0, n, k.full, &live)) {
                memset(out, 0, (size_t)n * sizeof(float));
                continue;
            }
            c.g = g, c.f0 = f0;
            vf val = vx_px_collect(&c, k.px, &rules, live).value;
            if (!k.full) val = self(live, val, splat(0.0f));
            if (n >= W) memcpy(out, &val, sizeof val);
            else memcpy(out, &val, (size_t)n * sizeof(float));
        }
    }
    *omega_acc = c.omega_sum + tod(c.omega_block);
}

/* The instantiations: curved detectors; flat ones in general; flat ones
 * without the oversampling flags, absorption, dmin or an F table ("simple",
 * where the compiler drops those branches and keeps more in registers); and,
 * of those, one sub-pixel and layer, one source and cell, and rows rendered
 * whole - constants the compiler folds.  All give the same bits (the lattice
 * term is rounded before it is added). */
/* Each a function of its own (not inlined into one render_row): a row
 * kind's registers are allocated apart from the others', which compiles in
 * two thirds of the time, and rendered some kinds faster (sources: 8 %). */
#define ROW_KIND(name, ...)                                                                                           \
    static __attribute__((noinline)) void name(const nb_fparams *fs, int s_row, float *row, vd *omega_acc,           \
                                               int *tripped)                                                          \
    {                                                                                                                 \
        render_row_impl(fs, s_row, row, omega_acc, tripped, (row_kind){__VA_ARGS__});                                 \
    }
ROW_KIND(row_curved, .curved = 1)
ROW_KIND(row_simple_step_pair_full, .px = {.simple = 1, .one_step = 1, .one_pair = 1}, .full = 1)
ROW_KIND(row_simple_step_pair, .px = {.simple = 1, .one_step = 1, .one_pair = 1})
ROW_KIND(row_simple_step_full, .px = {.simple = 1, .one_step = 1}, .full = 1)
ROW_KIND(row_simple_step, .px = {.simple = 1, .one_step = 1})
ROW_KIND(row_simple_pair, .px = {.simple = 1, .one_pair = 1})
ROW_KIND(row_simple, .px = {.simple = 1})
ROW_KIND(row_pair, .px = {.one_pair = 1})
ROW_KIND(row_flat, .curved = 0)
#undef ROW_KIND

static void render_row(const nb_fparams *fs, int s_row, float *row, vd *omega_acc, int *tripped)
{
    const nb_kparams *kp = &fs->kp;
    const nb_pixel_opts o = nb_fast_opts_of(fs);
    const int simple = o.simple, one_step = o.one_step, one_pair = o.one_pair;
    /* full: every pixel of the row is rendered, in whole groups */
    const int full = !kp->mask && kp->roi_xmin <= 0 && kp->roi_xmax >= kp->fpixels - 1 && kp->fpixels % W == 0;
    if (kp->curved_detector) row_curved(fs, s_row, row, omega_acc, tripped);
    else if (simple && one_step && one_pair && full) row_simple_step_pair_full(fs, s_row, row, omega_acc, tripped);
    else if (simple && one_step && one_pair) row_simple_step_pair(fs, s_row, row, omega_acc, tripped);
    else if (simple && one_step && full) row_simple_step_full(fs, s_row, row, omega_acc, tripped);
    else if (simple && one_step) row_simple_step(fs, s_row, row, omega_acc, tripped);
    else if (simple && one_pair) row_simple_pair(fs, s_row, row, omega_acc, tripped);
    else if (simple) row_simple(fs, s_row, row, omega_acc, tripped);
    else if (one_pair) row_pair(fs, s_row, row, omega_acc, tripped);
    else row_flat(fs, s_row, row, omega_acc, tripped);
}

void NB_FAST_NAME(const nb_fparams *fs, float *image, double *row_omega, nb_row_stats *row_stats,
                  nb_payload_crc *row_crc, int *tripped_out,
                  nb_progress *prog)
{
    const nb_kparams *kp = &fs->kp;
    const nb_roi roi = {kp->roi_xmin, kp->roi_xmax, kp->roi_ymin, kp->roi_ymax};
    int tripped = 0;
    /* a small render (a few milliseconds of work: pixel-steps) stays on one
     * thread, as every pass does (nb_tuning.h) */
    const double work = (double)kp->fpixels * kp->spixels * (kp->steps > 0 ? kp->steps : 1);
#pragma omp parallel for schedule(dynamic, 1) reduction(| : tripped) if (work >= (double)nb_parallel_min())
    for (int s = 0; s < kp->spixels; s++) {
        vd omega = tod(splat(0.0f));
        float *row = image + (size_t)s * kp->fpixels;
        nb_fault_rows_ahead(image, (size_t)kp->fpixels * sizeof(float), kp->spixels, s);
        if (s < kp->roi_ymin || s > kp->roi_ymax) {
            memset(row, 0, (size_t)kp->fpixels * sizeof(float));
        } else {
            render_row(fs, s, row, &omega, &tripped);
        }
        row_omega[s] = lanes_sum(omega);
        /* the row's statistics while it is still in cache */
        if (row_stats)
            row_stats_here(row, kp->fpixels, s, roi, kp->mask ? kp->mask + (size_t)s * kp->fpixels : NULL,
                           &row_stats[s]);
        if (row_crc) nb_payload_crc_take(row_crc, (size_t)s, row);
        if (prog) nb_progress_add(prog, 1);
    }
    *tripped_out = tripped;
}
