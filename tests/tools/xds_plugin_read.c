/* xds-plugin-read: read an HDF5/NeXus file through an XDS plugin library (a
 * LIB= shared object such as DiamondLightSource's durin-plugin.so) by calling
 * it as XDS does, so that tests/cli/durin.bats can check what XDS would get
 * from our NXmx files without XDS.
 *
 *   xds-plugin-read [--threads N] PLUGIN NAME [CBF...]
 *
 * NAME is what XDS hands the plugin: a NAME_TEMPLATE_OF_DATA_FRAMES ending in
 * "??????.h5" names its master file, "x_??????.h5" -> "x_master.h5" (XDS's
 * rule, as in Kay Diederichs's generic_data_plugin.f90 host); any other NAME is
 * the file itself.  The calls are XDS's LIB interface (the durin and Neggia
 * plugins export it):
 *   plugin_open(filename, info[1024], &error)            info[0] = 1: XDS
 *   plugin_get_header(&nx, &ny, &nbytes, &qx, &qy, &frames, info, &error)
 *   plugin_get_data(&frame, &nx, &ny, data[nx*ny], info, &error)  frame from 1
 *   plugin_close(&error)
 * with the library loaded RTLD_NOW | RTLD_GLOBAL, and frames read by N threads
 * at once (XDS reads frames on several threads, as the OpenMP loop of the
 * generic host does).
 *
 * Prints
 *   header nx=NX ny=NY nbytes=B qx=QX qy=QY frames=N vendor=V
 *   frame K sum=S min=A max=B minus1=C box1=X0,X1,Y0,Y1 minus2=D box2=...
 * (QX, QY as the plugin gives them, a float to 7 digits; boxes: the columns
 * and rows, from 0, that hold the values -1 and -2, which XDS takes as no
 * data: durin's marks of pixel_mask bits, "none" when there is none)
 * and, for each CBF given (the Kth compared with frame K), the pixels that
 * equal the CBF's, those the plugin marks as masked (a negative value where
 * the CBF has another) and those that differ otherwise:
 *   frame K cbf=PATH equal=E masked=M differ=X
 * Exit status: 0, 1 when the plugin reports an error or a pixel differs
 * (masked pixels are not differences), 2 on usage or read errors.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cbf.h"

typedef void (*open_fn)(const char *, int *, int *);
typedef void (*header_fn)(int *, int *, int *, float *, float *, int *, int *, int *);
typedef void (*data_fn)(int *, int *, int *, int *, int *, int *);
typedef void (*close_fn)(int *);

static data_fn get_data;

/* one frame read through the plugin */
typedef struct {
    int number, error;
    long long sum;
    int min, max;
    long minus[2];  /* pixels of value -1, -2 */
    int box[2][4];  /* their columns and rows: min x, max x, min y, max y */
    int *pixels;
} frame_read;

typedef struct {
    frame_read *frames;
    int nframes, nx, ny, first, step;
} reader_job;

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "xds-plugin-read: out of memory\n");
        exit(2);
    }
    return p;
}

static void *dlsym_or_die(void *lib, const char *name)
{
    void *f = dlsym(lib, name);
    if (!f) {
        fprintf(stderr, "xds-plugin-read: the plugin has no %s: %s\n", name, dlerror());
        exit(2);
    }
    return f;
}

/* XDS's rule: a template "x_??????.h5" stands for the master file "x_master.h5" */
static char *master_name(const char *name)
{
    size_t n = strlen(name), tail = strlen("??????.h5");
    char *out = xmalloc(n + 8);
    if (n >= tail && !strcmp(name + n - tail, "??????.h5"))
        snprintf(out, n + 8, "%.*smaster.h5", (int)(n - tail), name);
    else
        snprintf(out, n + 8, "%s", name);
    return out;
}

/* pixel (x, y) into the count and box of value -1 (m 0) or -2 (m 1) */
static void mark(frame_read *f, int m, int x, int y)
{
    int *b = f->box[m];
    if (!f->minus[m]++) b[0] = b[1] = x, b[2] = b[3] = y;
    b[0] = x < b[0] ? x : b[0];
    b[1] = x > b[1] ? x : b[1];
    b[2] = y < b[2] ? y : b[2];
    b[3] = y > b[3] ? y : b[3];
}

static void print_frame(const frame_read *f)
{
    printf("frame %d sum=%lld min=%d max=%d", f->number, f->sum, f->min, f->max);
    for (int m = 0; m < 2; m++) {
        printf(" minus%d=%ld box%d=", m + 1, f->minus[m], m + 1);
        if (f->minus[m]) printf("%d,%d,%d,%d", f->box[m][0], f->box[m][1], f->box[m][2], f->box[m][3]);
        else printf("none");
    }
    printf("\n");
}

/* frames first, first + step, ... of the job: each thread its own buffer and info array */
static void *read_frames(void *arg)
{
    reader_job *j = arg;
    for (int k = j->first; k < j->nframes; k += j->step) {
        frame_read *f = &j->frames[k];
        int info[1024] = {1}, nx = j->nx, ny = j->ny;
        size_t n = (size_t)nx * (size_t)ny;
        f->number = k + 1;
        f->pixels = xmalloc(n * sizeof *f->pixels);
        get_data(&f->number, &nx, &ny, f->pixels, info, &f->error);
        if (f->error) continue;
        f->min = f->max = f->pixels[0];
        for (size_t i = 0; i < n; i++) {
            int v = f->pixels[i];
            f->sum += v;
            f->min = v < f->min ? v : f->min;
            f->max = v > f->max ? v : f->max;
            if (v == -1 || v == -2) mark(f, -v - 1, (int)(i % (size_t)nx), (int)(i / (size_t)nx));
        }
    }
    return NULL;
}

/* Frame f against a CBF: 0 when every pixel is the CBF's or marked masked */
static int compare_cbf(const frame_read *f, int nx, int ny, const char *path)
{
    int32_t *c = NULL;
    int w = 0, h = 0;
    nb_status st = nb_cbf_read(path, &c, &w, &h);
    if (st) {
        fprintf(stderr, "xds-plugin-read: %s\n", nb_error_message());
        exit(2);
    }
    if (w != nx || h != ny) {
        printf("frame %d cbf=%s size %dx%d, not %dx%d\n", f->number, path, w, h, nx, ny);
        free(c);
        return 1;
    }
    long equal = 0, masked = 0, differ = 0;
    for (long i = 0; i < (long)nx * ny; i++) {
        int v = f->pixels[i];
        if (v == c[i]) equal++;
        else if (v < 0) masked++;
        else if (differ++ < 5)
            fprintf(stderr, "frame %d pixel (%ld, %ld): plugin %d, %s %d\n", f->number, i % nx, i / nx, v, path,
                    (int)c[i]);
    }
    printf("frame %d cbf=%s equal=%ld masked=%ld differ=%ld\n", f->number, path, equal, masked, differ);
    free(c);
    return differ > 0;
}

/* Read every frame with `threads` threads; print each; compare with the CBFs */
static int read_all(int nframes, int nx, int ny, int threads, char **cbf, int ncbf)
{
    frame_read *frames = calloc((size_t)nframes + 1, sizeof *frames);
    pthread_t *tid = xmalloc((size_t)threads * sizeof *tid);
    reader_job *jobs = xmalloc((size_t)threads * sizeof *jobs);
    if (!frames) exit(2);
    for (int t = 0; t < threads; t++) {
        jobs[t] = (reader_job){frames, nframes, nx, ny, t, threads};
        if (pthread_create(&tid[t], NULL, read_frames, &jobs[t])) {
            fprintf(stderr, "xds-plugin-read: cannot start a thread\n");
            exit(2);
        }
    }
    for (int t = 0; t < threads; t++) pthread_join(tid[t], NULL);
    int bad = 0;
    for (int k = 0; k < nframes; k++) {
        const frame_read *f = &frames[k];
        if (f->error) {
            printf("frame %d error=%d\n", f->number, f->error);
            bad = 1;
            continue;
        }
        print_frame(f);
        if (k < ncbf) bad |= compare_cbf(f, nx, ny, cbf[k]);
    }
    if (ncbf > nframes) {
        printf("%d CBF files for %d frames\n", ncbf, nframes);
        bad = 1;
    }
    for (int k = 0; k < nframes; k++) free(frames[k].pixels);
    free(frames), free(tid), free(jobs);
    return bad;
}

int main(int argc, char **argv)
{
    int threads = 1, a = 1;
    if (a + 1 < argc && !strcmp(argv[a], "--threads")) threads = atoi(argv[a + 1]), a += 2;
    if (argc - a < 2 || threads < 1) {
        fprintf(stderr, "usage: xds-plugin-read [--threads N] PLUGIN NAME [CBF...]\n");
        return 2;
    }
    void *lib = dlopen(argv[a], RTLD_NOW | RTLD_GLOBAL);
    if (!lib) {
        fprintf(stderr, "xds-plugin-read: cannot load '%s': %s\n", argv[a], dlerror());
        return 2;
    }
    open_fn p_open = (open_fn)dlsym_or_die(lib, "plugin_open");
    header_fn p_header = (header_fn)dlsym_or_die(lib, "plugin_get_header");
    close_fn p_close = (close_fn)dlsym_or_die(lib, "plugin_close");
    get_data = (data_fn)dlsym_or_die(lib, "plugin_get_data");

    char *master = master_name(argv[a + 1]);
    int info[1024] = {1, 1}, error = 0; /* consumer 1: XDS */
    p_open(master, info, &error);
    if (error) {
        printf("plugin_open('%s') error=%d\n", master, error);
        return 1;
    }
    int nx = 0, ny = 0, nbytes = 0, nframes = 0;
    float qx = 0, qy = 0;
    p_header(&nx, &ny, &nbytes, &qx, &qy, &nframes, info, &error);
    if (error || nx < 1 || ny < 1 || nframes < 0) {
        printf("plugin_get_header error=%d nx=%d ny=%d frames=%d\n", error, nx, ny, nframes);
        return 1;
    }
    printf("header nx=%d ny=%d nbytes=%d qx=%.7g qy=%.7g frames=%d vendor=%d\n", nx, ny, nbytes, qx, qy, nframes,
           info[0]);
    fflush(stdout);
    int bad = read_all(nframes, nx, ny, threads, argv + a + 2, argc - a - 2);
    p_close(&error);
    if (error) printf("plugin_close error=%d\n", error);
    free(master);
    return bad || error ? 1 : 0;
}
