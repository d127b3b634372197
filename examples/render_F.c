/* render_F.c - the engine as a library with structure factors from arrays:
 * an 'h k l F' list read here (the program's own reader; P1, every index
 * the image needs), handed over with nb_renderer_set_F, the experiment
 * nb-geom's flags; frame 0's float32 photons on standard output: the bytes
 * `nb-geom FLAGS | nb-hkl -hkl LIST | nb-sim --device cpu | nb-convert -o x.bin`
 * writes.
 *
 *     cc render_F.c $(pkg-config --cflags --libs nb) -o render_F
 *     ./render_F P1.hkl -cell 100 100 100 90 90 90 -lambda 6.2 -N 5 > frame0.bin
 */
#include <stdio.h>
#include <stdlib.h>

#include <nb.h>

typedef struct reflections {
    int *h, *k, *l;
    double *F;
    size_t n, cap;
} reflections;

/* The list's 'h k l F' lines ('#' lines and blank ones skipped); 0 on success. */
static int read_list(const char *path, reflections *list)
{
    FILE *fp = fopen(path, "r");
    char line[512];
    if (!fp) return -1;
    while (fgets(line, sizeof line, fp)) {
        int h, k, l;
        double F;
        if (line[0] == '#' || sscanf(line, "%d %d %d %lf", &h, &k, &l, &F) != 4) continue;
        if (list->n == list->cap) {
            size_t cap = list->cap ? 2 * list->cap : 1024;
            int *nh = realloc(list->h, cap * sizeof *nh), *nk = nh ? realloc(list->k, cap * sizeof *nk) : NULL;
            int *nl = nk ? realloc(list->l, cap * sizeof *nl) : NULL;
            double *nF = nl ? realloc(list->F, cap * sizeof *nF) : NULL;
            if (nh) list->h = nh;
            if (nk) list->k = nk;
            if (nl) list->l = nl;
            if (!nF) break;
            list->F = nF, list->cap = cap;
        }
        list->h[list->n] = h, list->k[list->n] = k, list->l[list->n] = l, list->F[list->n] = F;
        list->n++;
    }
    int failed = ferror(fp) || !feof(fp);
    fclose(fp);
    return failed ? -1 : 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: render_F LIST NB-GEOM-FLAGS... > frame0.bin\n");
        return 2;
    }
    reflections list = {0};
    if (read_list(argv[1], &list)) {
        fprintf(stderr, "render_F: cannot read '%s'\n", argv[1]);
        return 1;
    }
    nb_renderer *r = NULL;
    int status = nb_renderer_from_args(argc - 2, (const char *const *)argv + 2, NULL, &r);
    /* the arrays are copied: the list can go once they are set */
    if (!status) status = nb_renderer_set_F(r, list.h, list.k, list.l, list.F, list.n);
    free(list.h), free(list.k), free(list.l), free(list.F);
    size_t pixels = nb_renderer_pixels(r);
    float *photons = status ? NULL : malloc(pixels * sizeof *photons);
    if (!status && !photons) status = NB_RESULT_NOMEM;
    if (!status) status = nb_render_frame(r, 0, photons);
    if (status) fprintf(stderr, "render_F: %s\n", nb_last_error());
    else if (fwrite(photons, sizeof *photons, pixels, stdout) != pixels || fflush(stdout)) status = NB_RESULT_IO;
    free(photons);
    nb_renderer_free(r);
    return status == NB_RESULT_USAGE ? 2 : status ? 1 : 0;
}
