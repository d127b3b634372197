/* nb_bench_configs.c - nb-bench's named configurations (nanoBragg's flags
 * for each, and nb-sim's extra ones), and where the data they read is found:
 * an installed nb has it under share/nb, a build in its source tree reads
 * the tree's own copy.  bench/README.md describes each configuration. */
#include "nb_bench.h"

#include <stdlib.h>
#include <unistd.h>

#include "nb_util.h"

/* Flags are single words separated by single spaces; @HKL@ stands for the
 * P1.hkl of the golden test inputs (bench_find_hkl). */
#define SEED_FLAGS "-default_F 100 -cell 100 100 100 90 90 90 -lambda 6.2 -N 5 -distance 100 -detpixels "

/* the derivative configurations: one model (1024^2, 4 domains, 2x2 sub-pixels),
 * the image alone on the fast and the double path, and with k derivatives on
 * each (deriv-k: the fast path's, deriv-double-k: the double path's) */
#define DERIV_FLAGS                                                                                                  \
    "-default_F 100 -cell 70 80 90 88 95 91 -misset 10 5 3 -lambda 1 -N 8 -distance 150 -detpixels 1024 "         \
    "-pixel 0.1 -mosaic 0.2 -mosaic_domains 4 -oversample 2"

const bench_config configs[] = {
    {"seed-256", SEED_FLAGS "256", NULL},
    {"seed-512", SEED_FLAGS "512", NULL},
    {"seed-1024", SEED_FLAGS "1024", NULL},
    {"seed-2048", SEED_FLAGS "2048", NULL},
    {"seed-4096", SEED_FLAGS "4096", NULL},
    {"mosaic", SEED_FLAGS "1024 -mosaic 0.5 -mosaic_domains 20 -phi 0.1 -osc 1 -phisteps 5", NULL},
    /* 13 divergence directions (a 5 x 5 grid cut to a disc) x 5 wavelengths = 65 sources */
    {"sources", "-default_F 100 -cell 100 100 100 90 90 90 -lambda 1 -N 5 -distance 100 -detpixels 1024 "
                "-divergence 0.3 -divsteps 5 -dispersion 0.5 -dispsteps 5", NULL},
    {"oversample", SEED_FLAGS "1024 -oversample 3 -detector_thick 450 -detector_abs 320 -thicksteps 3", NULL},
    /* 600 mm keeps every tricubic neighbourhood inside P1.hkl's +-14 grid
     * (|h| <= 11 at the corners), so the reference keeps interpolating */
    {"tricubic", "-hkl @HKL@ -cell 70 80 90 75 85 95 -misset 10 5 3 -lambda 1.0 -N 2 -distance 600 "
                 "-detpixels 1024 -pixel 0.1 -interpolate -mosaic 0.3 -mosaic_domains 10", NULL},
    {"deriv-image", DERIV_FLAGS, NULL},
    {"deriv-image-double", DERIV_FLAGS, "-precision double"},
#define DERIV_NAMES_1 "distance"
#define DERIV_NAMES_3 "distance,Xbeam,Ybeam"
#define DERIV_NAMES_8 "distance,Xbeam,Ybeam,misset_x,misset_y,misset_z,cell_a,mosaic"
    {"deriv-1", DERIV_FLAGS, "-precision single --grad " DERIV_NAMES_1},
    {"deriv-3", DERIV_FLAGS, "-precision single --grad " DERIV_NAMES_3},
    {"deriv-8", DERIV_FLAGS, "-precision single --grad " DERIV_NAMES_8},
    {"deriv-double-1", DERIV_FLAGS, "-precision double --grad " DERIV_NAMES_1},
    {"deriv-double-3", DERIV_FLAGS, "-precision double --grad " DERIV_NAMES_3},
    {"deriv-double-8", DERIV_FLAGS, "-precision double --grad " DERIV_NAMES_8},
};
const int config_count = (int)(sizeof configs / sizeof configs[0]);
_Static_assert(sizeof configs / sizeof configs[0] <= MAX_CONFIGS, "bench_opts has no room for every configuration");

/* The configurations' P1.hkl: the golden tests' (h, k, l in -14..14, so that
 * the tricubic configuration's neighbourhoods stay inside it), installed as
 * share/nb/bench/P1.hkl.  $NB_DATADIR first (a copy anywhere, or a share/nb
 * elsewhere), then the share/nb of the prefix nb-bench is installed in,
 * then the source tree of a build run in place. */
char *bench_find_hkl(const char *bindir, char **where)
{
    const char *env = getenv("NB_DATADIR");
    char *candidates[3];
    int n = 0;
    if (env && *env) candidates[n++] = path_join(env, "bench/P1.hkl");
    candidates[n++] = path_join(bindir, "../share/nb/bench/P1.hkl");
    candidates[n++] = path_join(bindir, "../tests/golden/inputs/P1.hkl");
    char *found = NULL;
    for (int i = 0; i < n && !found; i++)
        if (access(candidates[i], R_OK) == 0) found = realpath(candidates[i], NULL);
    nb_strbuf sb;
    nb_strbuf_init(&sb);
    for (int i = 0; i < n; i++) {
        nb_strbuf_printf(&sb, "%s'%s'", i == 0 ? "" : i + 1 < n ? ", " : " or ", candidates[i]);
        free(candidates[i]);
    }
    if (!env || !*env) nb_strbuf_append(&sb, " (NB_DATADIR is not set)");
    *where = nb_strbuf_take(&sb);
    return found;
}
