/* render_flags.c - the engine as a library, the experiment given as nb-geom's
 * flags (nanoBragg's spellings, units and defaults) on the command line: the
 * plan made in this process (no nb-geom, no stream), frame 0's float32
 * photons on standard output, rendered on the CPU: the bytes
 * `nb-geom FLAGS | nb-sim --device cpu | nb-convert -o x.bin` writes.
 *
 *     cc render_flags.c $(pkg-config --cflags --libs nb) -o render_flags
 *     ./render_flags -cell 100 100 100 90 90 90 -lambda 6.2 -N 5 -default_F 100 > frame0.bin
 */
#include <stdio.h>
#include <stdlib.h>

#include <nb.h>

int main(int argc, char **argv)
{
    if (!NB_VERSION_CHECK()) {
        fprintf(stderr, "render_flags: libnb %s is not the version nb.h %d.%d was built for\n", nb_version(),
                NB_VERSION_MAJOR, NB_VERSION_MINOR);
        return 1;
    }
    /* argv[1..]: the flags alone, no program name; a flag nb-geom does not
     * take is NB_RESULT_USAGE and nb-geom's message, never an exit */
    nb_renderer *r = NULL;
    int status = nb_renderer_from_args(argc - 1, (const char *const *)argv + 1, NULL, &r);
    if (status) {
        fprintf(stderr, "render_flags: %s\n", nb_last_error());
        return status == NB_RESULT_USAGE ? 2 : 1;
    }
    size_t pixels = nb_renderer_pixels(r);
    float *photons = malloc(pixels * sizeof *photons);
    if (!photons) status = NB_RESULT_NOMEM;
    else if ((status = nb_render_frame(r, 0, photons))) fprintf(stderr, "render_flags: %s\n", nb_last_error());
    if (!status && (fwrite(photons, sizeof *photons, pixels, stdout) != pixels || fflush(stdout))) {
        fprintf(stderr, "render_flags: cannot write standard output\n");
        status = NB_RESULT_IO;
    }
    free(photons);
    nb_renderer_free(r);
    return status ? 1 : 0;
}
