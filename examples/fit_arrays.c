/* fit_arrays.c - the fit as a library: a renderer's named parameters
 * refined to observed images held in memory (nb_fit_renderer), here read
 * from a file of float32 photons, frame after frame (nb-convert -o obs.bin
 * writes one).  The start is an nb stream on standard input; each NAME
 * given is refined (nb_parameter_name's names, and scale); standard output
 * gets "NAME = VALUE ± SIGMA UNIT", as nb-fit prints them.  With
 * --processes 2 the frames are split over two processes (a fork), and the
 * fit's sums go through a pipe between them: the caller's reduction, which
 * MPI, Slurm or Python's multiprocessing would be in a real program.
 *
 *     cc fit_arrays.c $(pkg-config --cflags --libs nb) -o fit_arrays
 *     nb-geom $TRUTH | nb-sim | nb-convert -o obs.bin
 *     nb-geom $START | ./fit_arrays obs.bin distance Xbeam Ybeam scale
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

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

/* Two processes' sum: each writes its values to the other and reads the
 * other's; both add them in rank order, so both get the same bits. */
typedef struct pair {
    int rank;
    int to_other, from_other; /* pipe ends */
} pair;

static int full_io(int fd, void *buf, size_t bytes, int writing)
{
    for (size_t done = 0; done < bytes;) {
        ssize_t k = writing ? write(fd, (char *)buf + done, bytes - done) : read(fd, (char *)buf + done, bytes - done);
        if (k <= 0) return -1;
        done += (size_t)k;
    }
    return 0;
}

static int pair_sum(void *ctx, double *values, size_t n)
{
    const pair *p = ctx;
    double *other = malloc(n * sizeof *other);
    if (!other || full_io(p->to_other, values, n * sizeof *values, 1) ||
        full_io(p->from_other, other, n * sizeof *other, 0)) {
        free(other);
        return -1;
    }
    for (size_t i = 0; i < n; i++) values[i] = p->rank == 0 ? values[i] + other[i] : other[i] + values[i];
    free(other);
    return 0;
}

/* Fit names to the frames of obs (frame f is this process's when it is
 * f % processes == rank); rank 0 prints the values. */
static int fit(nb_renderer *r, const float *obs, int processes, pair *link, char **names, int n)
{
    const int frames = nb_renderer_frames(r);
    const size_t npix = nb_renderer_pixels(r);
    nb_fit_image *images = calloc((size_t)frames, sizeof *images);
    double *values = malloc((size_t)n * sizeof *values), *sigmas = malloc((size_t)n * sizeof *sigmas);
    if (!images || !values || !sigmas) return NB_RESULT_NOMEM;
    for (int f = 0; f < frames; f++) /* photons: gain 0; every pixel */
        if (f % processes == (link ? link->rank : 0)) images[f].pixels = obs + (size_t)f * npix;
    nb_fit_settings s;
    nb_fit_settings_init(&s);
    if (link) s.rank = link->rank, s.processes = 2, s.sum = pair_sum, s.sum_ctx = link;
    nb_fit_result res = {.size = sizeof res};
    int status = nb_fit_renderer(r, (const char *const *)names, n, images, &s, values, sigmas, &res);
    if (status) fprintf(stderr, "fit_arrays: %s\n", nb_last_error());
    for (int i = 0; i < n && !status && (!link || link->rank == 0); i++) {
        const char *unit = strcmp(names[i], "scale") ? nb_parameter_unit(names[i]) : "";
        printf("%s = %.10g \u00b1 %.3g%s%s\n", names[i], values[i], sigmas[i], unit[0] ? " " : "", unit);
    }
    if (!status && (!link || link->rank == 0))
        fprintf(stderr, "fit_arrays: -log L %.12g on %ld pixels, %d iterations%s\n", res.nll, res.pixels,
                res.iterations, res.converged ? "" : " (the cap)");
    free(images), free(values), free(sigmas);
    return status;
}

/* The same fit in two processes, a pipe each way */
static int fit_forked(nb_renderer *r, const float *obs, char **names, int n)
{
    int up[2], down[2];
    if (pipe(up) || pipe(down)) return NB_RESULT_IO;
    fflush(stdout);
    pid_t child = fork();
    if (child < 0) return NB_RESULT_IO;
    pair link = child == 0 ? (pair){1, up[1], down[0]} : (pair){0, down[1], up[0]};
    int status = fit(r, obs, 2, &link, names, n);
    if (child == 0) _exit(status);
    int child_status = 0;
    waitpid(child, &child_status, 0);
    return status ? status : WIFEXITED(child_status) ? WEXITSTATUS(child_status) : NB_RESULT_IO;
}

int main(int argc, char **argv)
{
    int processes = 1, first = 1;
    if (argc > 2 && !strcmp(argv[1], "--processes")) processes = atoi(argv[2]), first = 3;
    if (argc - first < 2 || (processes != 1 && processes != 2)) {
        fprintf(stderr, "usage: fit_arrays [--processes 1|2] OBSERVED.bin NAME... < start.nbs\n");
        return 2;
    }
    size_t size = 0, obs_size = 0;
    unsigned char *bytes = read_all(stdin, &size);
    nb_renderer *r = NULL;
    if (!bytes || nb_renderer_from_stream(bytes, size, NULL, &r)) {
        fprintf(stderr, "fit_arrays: %s\n", bytes ? nb_last_error() : "out of memory");
        free(bytes);
        return 1;
    }
    free(bytes);
    FILE *fp = fopen(argv[first], "rb");
    float *obs = fp ? (float *)read_all(fp, &obs_size) : NULL;
    if (fp) fclose(fp);
    const size_t want = (size_t)nb_renderer_frames(r) * nb_renderer_pixels(r) * sizeof(float);
    int status = 0;
    if (!obs || obs_size != want) {
        fprintf(stderr, "fit_arrays: '%s' holds %zu bytes, the plan's frames %zu\n", argv[first], obs_size, want);
        status = 1;
    } else if (processes == 2) status = fit_forked(r, obs, argv + first + 1, argc - first - 1);
    else status = fit(r, obs, 1, NULL, argv + first + 1, argc - first - 1);
    free(obs);
    nb_renderer_free(r);
    return status ? (status == NB_RESULT_USAGE ? 2 : 1) : 0;
}
