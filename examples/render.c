/* render.c - the engine as a library: an nb stream (PLAN + HKL records) on
 * standard input, the first frame's float32 photons on standard output,
 * rendered on the CPU: the bytes `nb-sim --device cpu | nb-convert -o x.bin`
 * writes for that frame (every panel, in panel order).
 *
 *     cc render.c $(pkg-config --cflags --libs nb) -o render
 *     nb-geom -cell 100 100 100 90 90 90 -lambda 6.2 -N 5 -default_F 100 | ./render > frame0.bin
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nb.h>

/* Standard input, all of it, into a buffer of its own. */
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
    if (buf && ferror(fp)) {
        free(buf);
        buf = NULL;
    }
    *size = n;
    return buf;
}

int main(void)
{
    size_t size = 0;
    unsigned char *bytes = read_all(stdin, &size);
    if (!bytes) {
        fprintf(stderr, "render: cannot read standard input\n");
        return 1;
    }
    nb_render_config config;
    nb_render_config_init(&config);
    config.device = NB_DEVICE_CPU;
    nb_renderer *r = NULL;
    int status = nb_renderer_from_stream(bytes, size, &config, &r);
    free(bytes);
    if (status) {
        fprintf(stderr, "render: %s\n", nb_last_error());
        return status == NB_RESULT_USAGE ? 2 : 1;
    }
    size_t pixels = nb_renderer_pixels(r);
    float *photons = malloc(pixels * sizeof *photons);
    if (!photons) status = NB_RESULT_NOMEM;
    else if ((status = nb_render_frame(r, 0, photons))) fprintf(stderr, "render: %s\n", nb_last_error());
    if (!status && fwrite(photons, sizeof *photons, pixels, stdout) != pixels) {
        fprintf(stderr, "render: cannot write standard output\n");
        status = NB_RESULT_IO;
    }
    if (!status && fflush(stdout)) status = NB_RESULT_IO;
    free(photons);
    nb_renderer_free(r);
    return status ? 1 : 0;
}
