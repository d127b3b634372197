/* fit_dataset.c - the dataset fit as a library (nb_fit_dataset_renderer):
 * stills in memory, each frame's own values and values shared by every
 * frame refined, a verdict per frame.  The start is an nb stream on
 * standard input (nb-geom -expt indexed.expt ...: a crystal per frame);
 * OBSERVED a file of float32 photons, frame after frame (nb-convert -o
 * still_#.bin, concatenated); SHARED and OWN comma lists of names ("" for
 * none); SPOTS, when given, a DIALS reflection table (dials.find_spots'
 * strong.refl of the same experiments) whose spots the fit takes in place
 * of its own, as nb-fit --spots.  Standard output: the shared values
 * ("NAME = VALUE ± SIGMA UNIT") and each frame's own ("frame N: NAME =
 * VALUE ± SIGMA ..."), or why it failed, as nb-fit -v prints them.
 *
 *     cc fit_dataset.c $(pkg-config --cflags --libs nb) -o fit_dataset
 *     nb-geom -expt indexed.expt -N 12 | ./fit_dataset stills.bin cell_a,cell_b,cell_c rot_x,rot_y,rot_z,scale
 *     nb-geom -expt indexed.expt -N 12 | ./fit_dataset stills.bin "" rot_x,rot_y,rot_z,scale strong.refl
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nb.h>

static unsigned char *read_all(FILE *fp, size_t *size)
{
    size_t cap = 1 << 16, n = 0;
    unsigned char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, fp);
        if (n < cap) break;
        unsigned char *bigger = realloc(buf, cap *= 2);
        if (!bigger) free(buf);
        buf = bigger;
    }
    *size = n;
    return buf;
}

/* Each name of a comma list, printed with its value and sigma for frame (-1: the shared ones) */
static int print_values(const nb_fit_dataset *f, long frame, const char *list)
{
    char *names = strdup(list), *save = NULL;
    int status = names ? 0 : NB_RESULT_NOMEM;
    for (char *name = names ? strtok_r(names, ",", &save) : NULL; name && !status; name = strtok_r(NULL, ",", &save)) {
        double value = 0, sigma = 0;
        if ((status = nb_fit_dataset_value(f, frame, name, &value, &sigma))) break;
        const char *unit = strcmp(name, "scale") ? nb_parameter_unit(name) : "";
        if (frame < 0) printf("%s = %.10g \u00b1 %.3g%s%s\n", name, value, sigma, unit && unit[0] ? " " : "", unit ? unit : "");
        else printf(" %s = %.6g \u00b1 %.2g", name, value, sigma);
    }
    free(names);
    return status;
}

static int report(const nb_fit_dataset *f, int frames, const char *shared, const char *own)
{
    int status = shared[0] ? print_values(f, -1, shared) : 0;
    for (int i = 0; i < frames && !status; i++) {
        const char *why = NULL;
        if (nb_fit_dataset_verdict(f, i, &why) == 1) {
            printf("frame %d failed: %s\n", i + 1, why);
            continue;
        }
        printf("frame %d:", i + 1);
        if (own[0]) status = print_values(f, i, own);
        printf("\n");
    }
    return status;
}

int main(int argc, char **argv)
{
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: fit_dataset OBSERVED.bin SHARED OWN [SPOTS.refl] < start.nbs\n");
        return 2;
    }
    size_t size = 0, obs_size = 0;
    unsigned char *bytes = read_all(stdin, &size);
    nb_renderer *r = NULL;
    if (!bytes || nb_renderer_from_stream(bytes, size, NULL, &r)) {
        fprintf(stderr, "fit_dataset: %s\n", bytes ? nb_last_error() : "out of memory");
        free(bytes);
        return 1;
    }
    free(bytes);
    FILE *fp = fopen(argv[1], "rb");
    float *obs = fp ? (float *)read_all(fp, &obs_size) : NULL;
    if (fp) fclose(fp);
    const int frames = nb_renderer_frames(r);
    const size_t npix = nb_renderer_pixels(r);
    nb_fit_image *images = calloc((size_t)frames, sizeof *images);
    int status = 0;
    if (!obs || !images || obs_size != (size_t)frames * npix * sizeof(float)) {
        fprintf(stderr, "fit_dataset: '%s' holds %zu bytes, the plan's %d frames %zu\n", argv[1], obs_size, frames,
                (size_t)frames * npix * sizeof(float));
        status = 1;
    }
    for (int f = 0; f < frames && !status; f++) images[f].pixels = obs + (size_t)f * npix; /* photons: gain 0 */
    nb_fit_dataset_settings s;
    nb_fit_dataset_settings_init(&s);
    s.refine = argv[2], s.refine_frame = argv[3];
    s.spots = argc == 5 ? argv[4] : NULL;
    nb_fit_dataset *fit = NULL;
    if (!status) status = nb_fit_dataset_renderer(r, images, &s, &fit);
    if (!status) status = report(fit, frames, argv[2], argv[3]);
    if (status) fprintf(stderr, "fit_dataset: %s\n", nb_last_error());
    nb_fit_dataset_free(fit);
    free(images), free(obs);
    nb_renderer_free(r);
    return status ? (status == NB_RESULT_USAGE ? 2 : 1) : 0;
}
