/* render_params.c - the engine as a library, the plan moved by name: an nb
 * stream (PLAN + HKL records) on standard input, NAME=VALUE arguments that
 * set the plan's named parameters (distance=80, cell_a=40.2, rot_x=0.5,
 * panel0_shift_fast=0.1 ...: docs/physics.md 14), then frame 0's float32
 * photons and, after them, its derivative with respect to the last name
 * set, on standard output.  On standard error each name's value before and
 * after, in its unit.  A name the plan does not have is refused, saying why.
 *
 *     cc render_params.c $(pkg-config --cflags --libs nb) -o render_params
 *     nb-geom -cell 100 100 100 90 90 90 -lambda 6.2 -N 5 -default_F 100 -distance 60 |
 *         ./render_params distance=80 > frame0-and-ddistance.bin
 */
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

/* NAME=VALUE arguments set on the renderer's plan (the name cut at '=' in
 * place); the last name into *last. */
static int set_parameters(nb_renderer *r, int argc, char **argv, const char **last)
{
    for (int i = 1; i < argc; i++) {
        char *eq = strchr(argv[i], '='), *end = NULL;
        double value = eq ? strtod(eq + 1, &end) : 0.0;
        if (!eq || end == eq + 1 || *end) {
            fprintf(stderr, "render_params: '%s' is not NAME=NUMBER\n", argv[i]);
            return NB_RESULT_USAGE;
        }
        *eq = '\0';
        double before = 0.0, after = 0.0;
        int status = nb_renderer_get_parameter(r, argv[i], &before);
        if (!status) status = nb_renderer_set_parameter(r, argv[i], value);
        if (!status) status = nb_renderer_get_parameter(r, argv[i], &after);
        if (status) {
            fprintf(stderr, "render_params: %s\n", nb_last_error());
            return status;
        }
        fprintf(stderr, "%s: %.10g -> %.10g %s\n", argv[i], before, after, nb_parameter_unit(argv[i]));
        *last = argv[i];
    }
    return NB_RESULT_OK;
}

int main(int argc, char **argv)
{
    size_t size = 0;
    unsigned char *bytes = read_all(stdin, &size);
    nb_renderer *r = NULL;
    if (!bytes || nb_renderer_from_stream(bytes, size, NULL, &r)) {
        fprintf(stderr, "render_params: %s\n", bytes ? nb_last_error() : "out of memory");
        free(bytes);
        return 1;
    }
    free(bytes);
    const char *last = NULL;
    int status = set_parameters(r, argc, argv, &last);
    size_t n = nb_renderer_pixels(r);
    float *photons = malloc(n * sizeof *photons), *grad = malloc(n * sizeof *grad);
    if (!status && (!photons || !grad)) status = NB_RESULT_NOMEM;
    if (!status && last) status = nb_renderer_set_derivatives(r, last);
    if (!status) status = last ? nb_render_frame_grad(r, 0, photons, &grad) : nb_render_frame(r, 0, photons);
    if (status) fprintf(stderr, "render_params: %s\n", nb_last_error());
    else {
        fwrite(photons, sizeof *photons, n, stdout);
        if (last) fwrite(grad, sizeof *grad, n, stdout);
    }
    free(photons);
    free(grad);
    nb_renderer_free(r);
    return status ? (status == NB_RESULT_USAGE ? 2 : 1) : 0;
}
