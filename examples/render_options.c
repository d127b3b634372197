/* render_options.c - the engine as a library with settings by name: an nb
 * stream (PLAN + HKL records) on standard input, the renderer's options as
 * NAME=VALUE arguments (device=cpu|cuda|auto, precision=plan|fast|double,
 * threads=N; a name this library does not know is refused, saying which it
 * knows), frame 0's float32 photons on standard output: with precision=double
 * the bytes `nb-sim --device cpu -precision double | nb-convert -o x.bin` writes.
 *
 *     cc render_options.c $(pkg-config --cflags --libs nb) -o render_options
 *     nb-geom -cell 100 100 100 90 90 90 -lambda 6.2 -N 5 -default_F 100 |
 *         ./render_options precision=double threads=4 > frame0.bin
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

/* NAME=VALUE arguments into the options (the name cut at '=' in place);
 * a refusal said on standard error. */
static int set_options(nb_options *o, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        char *eq = strchr(argv[i], '=');
        if (!eq) {
            fprintf(stderr, "render_options: '%s' is not NAME=VALUE\n", argv[i]);
            return NB_RESULT_USAGE;
        }
        *eq = '\0';
        int status = nb_options_set_string(o, argv[i], eq + 1);
        if (status) {
            fprintf(stderr, "render_options: %s\n", nb_last_error());
            return status;
        }
    }
    return NB_RESULT_OK;
}

int main(int argc, char **argv)
{
    nb_options *o = nb_options_new(NB_OPTIONS_RENDER);
    if (!o) {
        fprintf(stderr, "render_options: %s\n", nb_last_error());
        return 1;
    }
    int status = set_options(o, argc, argv);
    if (status) {
        nb_options_free(o);
        return status == NB_RESULT_USAGE ? 2 : 1;
    }
    size_t size = 0;
    unsigned char *bytes = read_all(stdin, &size);
    nb_renderer *r = NULL;
    if (!bytes) {
        fprintf(stderr, "render_options: cannot read standard input\n");
        nb_options_free(o);
        return 1;
    }
    status = nb_renderer_from_stream_opts(bytes, size, o, &r);
    /* the renderer keeps what it needs of both */
    free(bytes);
    nb_options_free(o);
    size_t pixels = nb_renderer_pixels(r);
    float *photons = status ? NULL : malloc(pixels * sizeof *photons);
    if (!status && !photons) status = NB_RESULT_NOMEM;
    if (!status) status = nb_render_frame(r, 0, photons);
    if (status) fprintf(stderr, "render_options: %s\n", nb_last_error());
    else if (fwrite(photons, sizeof *photons, pixels, stdout) != pixels || fflush(stdout)) status = NB_RESULT_IO;
    free(photons);
    nb_renderer_free(r);
    return status == NB_RESULT_USAGE ? 2 : status ? 1 : 0;
}
