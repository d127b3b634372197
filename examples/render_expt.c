/* render_expt.c - the engine as a library, the experiment a DIALS experiment
 * list (dials.import's or dials.index's .expt: its detector, beam, crystals,
 * and a frame per still or the sweep's frames), with nb-geom's flags for
 * what the list does not say (-N, -mosaic, -default_F ...): the plan made in
 * this process as `nb-geom -expt LIST FLAGS` makes it, each frame rendered
 * and written as an image file (nb_image_write: the file `nb-geom -expt LIST
 * FLAGS | nb-sim | nb-convert -o OUT` writes for that frame).  OUT's '#'
 * run, if any, is the frame's number from 1 (img_#####.cbf), as nb-convert
 * numbers its files; without one, frame 0 alone is written.
 *
 *     cc render_expt.c $(pkg-config --cflags --libs nb) -o render_expt
 *     ./render_expt indexed.expt 'img_###.cbf' -N 10 -default_F 100
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nb.h>

/* OUT with its '#' run replaced by frame + 1, zero-padded to the run's width */
static void frame_name(const char *tmpl, long frame, char *out, size_t size)
{
    const char *hash = strchr(tmpl, '#');
    if (!hash) {
        snprintf(out, size, "%s", tmpl);
        return;
    }
    int width = (int)strspn(hash, "#");
    snprintf(out, size, "%.*s%0*ld%s", (int)(hash - tmpl), tmpl, width, frame + 1, hash + width);
}

int main(int argc, char **argv)
{
    if (!NB_VERSION_CHECK()) {
        fprintf(stderr, "render_expt: libnb %s is not the version nb.h %d.%d was built for\n", nb_version(),
                NB_VERSION_MAJOR, NB_VERSION_MINOR);
        return 1;
    }
    if (argc < 3) {
        fprintf(stderr, "usage: render_expt LIST.expt OUT [NB-GEOM FLAGS...]\n");
        return 2;
    }
    /* -expt LIST and the flags after OUT, as nb-geom takes them */
    const char **flags = malloc((size_t)argc * sizeof *flags);
    if (!flags) return 1;
    int n = 0;
    flags[n++] = "-expt";
    flags[n++] = argv[1];
    for (int i = 3; i < argc; i++) flags[n++] = argv[i];
    nb_renderer *r = NULL;
    int status = nb_renderer_from_args(n, flags, NULL, &r);
    free(flags);
    if (status) {
        fprintf(stderr, "render_expt: %s\n", nb_last_error());
        return status == NB_RESULT_USAGE ? 2 : 1;
    }
    const long frames = strchr(argv[2], '#') ? nb_renderer_frames(r) : 1;
    fprintf(stderr, "render_expt: %s: %d frames, %d panels, %zu pixels a frame\n", argv[1], nb_renderer_frames(r),
            nb_renderer_panels(r), nb_renderer_pixels(r));

    nb_image_data image;
    nb_image_data_init(&image);
    image.pixels = nb_renderer_pixels(r);
    /* one panel: its own size; several: every pixel in one row (raw float) */
    int fast = 0, slow = 0;
    nb_renderer_panel_size(r, 0, &fast, &slow);
    image.width = nb_renderer_panels(r) == 1 ? fast : (int)image.pixels;
    image.height = nb_renderer_panels(r) == 1 ? slow : 1;
    image.photons = malloc(image.pixels * sizeof *image.photons);
    if (!image.photons) status = NB_RESULT_NOMEM;
    for (long f = 0; f < frames && !status; f++) {
        char name[4096];
        frame_name(argv[2], f, name, sizeof name);
        if ((status = nb_render_frame(r, f, image.photons)) || (status = nb_image_write(name, NULL, &image, r, f)))
            fprintf(stderr, "render_expt: frame %ld: %s\n", f, nb_last_error());
    }
    free(image.photons);
    nb_renderer_free(r);
    return status ? 1 : 0;
}
