/* render_noise.c - the engine as a library with detector counts: the
 * experiment as nb-geom's flags, frame 0 rendered, then counted as nb-noise
 * counts it (nanoBragg's Poisson noise plus the ADC offset, noisify's effects
 * when asked); the int32 counts on standard output: the counts of
 * `nb-geom FLAGS | nb-sim --device cpu | nb-noise -seed SEED [-readout R]`.
 *
 *     cc render_noise.c $(pkg-config --cflags --libs nb) -o render_noise
 *     ./render_noise 7 3 -cell 100 100 100 90 90 90 -lambda 6.2 -N 5 -default_F 100 > counts.i32
 */
#include <stdio.h>
#include <stdlib.h>

#include <nb.h>

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: render_noise SEED READOUT NB-GEOM-FLAGS... > counts.i32\n");
        return 2;
    }
    nb_renderer *r = NULL;
    nb_options *noise = nb_options_new(NB_OPTIONS_NOISE);
    /* the names are nb-noise's flags; numbers as text are taken too */
    int status = noise ? nb_options_set_string(noise, "seed", argv[1]) : NB_RESULT_NOMEM;
    if (!status) status = nb_options_set_string(noise, "readout", argv[2]);
    if (!status) status = nb_renderer_from_args(argc - 3, (const char *const *)argv + 3, NULL, &r);
    size_t pixels = nb_renderer_pixels(r);
    float *photons = status ? NULL : malloc(pixels * sizeof *photons);
    int32_t *counts = status ? NULL : malloc(pixels * sizeof *counts);
    if (!status && (!photons || !counts)) status = NB_RESULT_NOMEM;
    if (!status) status = nb_render_frame(r, 0, photons);
    if (!status) status = nb_renderer_noise_frame(r, 0, photons, noise, counts);
    if (status) fprintf(stderr, "render_noise: %s\n", nb_last_error());
    else if (fwrite(counts, sizeof *counts, pixels, stdout) != pixels || fflush(stdout)) status = NB_RESULT_IO;
    free(photons);
    free(counts);
    nb_options_free(noise);
    nb_renderer_free(r);
    return status == NB_RESULT_USAGE ? 2 : status ? 1 : 0;
}
