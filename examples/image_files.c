/* image_files.c - the engine as a library, image files read and written in
 * the tools' formats: an image read (CBF, SMV, TIFF, raw float32, or an nb
 * stream's IMAGE record of a frame) and written again in another format,
 * what nb-convert --import then -o would write.  What was read is said on
 * standard error: photons or counts, the counts' offset, gain, overload and
 * untrusted pixels.  After "--", nb-geom's flags: the experiment whose image
 * it is (the plan's ADC for counts whose file states none; the written
 * file's header), as nb-convert takes them from the stream's plan; without
 * them, a header of nb-geom's defaults for a detector of the image's size.
 *
 *     cc image_files.c $(pkg-config --cflags --libs nb) -o image_files
 *     ./image_files frame.cbf frame.img
 *     ./image_files run.nbs frame3.cbf --frame 2 --format cbf -- -cell 100 100 100 90 90 90 -lambda 1 -N 5
 *
 * --frame N: the stream's frame read (0-based), and the plan's frame whose
 * header the file gets; --as-frame N: that frame alone (an SMV of frame 3
 * read, written with frame 3's header: --as-frame 2).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nb.h>

static int fail(const char *what)
{
    fprintf(stderr, "image_files: %s: %s\n", what, nb_last_error());
    return 1;
}

int main(int argc, char **argv)
{
    if (!NB_VERSION_CHECK()) {
        fprintf(stderr, "image_files: libnb %s is not the version nb.h %d.%d was built for\n", nb_version(),
                NB_VERSION_MAJOR, NB_VERSION_MINOR);
        return 1;
    }
    if (argc < 3) {
        fprintf(stderr, "usage: image_files IN OUT [--frame N] [--as-frame N] [--format NAME] [-- NB-GEOM FLAGS...]\n");
        return 2;
    }
    const char *in = argv[1], *out = argv[2], *format = NULL;
    long frame = 0, as_frame = -1;
    int i = 3;
    for (; i < argc && strcmp(argv[i], "--"); i += 2) {
        if (i + 1 >= argc) return fprintf(stderr, "image_files: %s needs a value\n", argv[i]), 2;
        if (!strcmp(argv[i], "--frame")) frame = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--as-frame")) as_frame = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--format")) format = argv[i + 1];
        else return fprintf(stderr, "image_files: unknown option %s\n", argv[i]), 2;
    }
    /* the experiment, when flags follow "--" */
    nb_renderer *r = NULL;
    if (i < argc && nb_renderer_from_args(argc - i - 1, (const char *const *)argv + i + 1, NULL, &r))
        return fail("the flags");

    nb_image_data image;
    nb_image_data_init(&image);
    if (nb_image_read(in, r, frame, &image)) {
        nb_renderer_free(r);
        return fail("reading");
    }
    if (image.is_counts)
        fprintf(stderr, "%s: %s, %d x %d, %d-bit counts, offset %g (%s), gain %g, overload %.0f (%s); untrusted: %zu "
                        "negative, %zu overloaded\n",
                in, image.format, image.width, image.height, image.bits, image.offset,
                image.offset_stated ? "the file's" : "the plan's ADC", image.gain, image.overload,
                image.overload_stated ? "the file's" : "the counter's top", image.negative, image.overloaded);
    else fprintf(stderr, "%s: %s, %d x %d, photons\n", in, image.format, image.width, image.height);

    int status = nb_image_write(out, format, &image, r, as_frame >= 0 ? as_frame : frame);
    if (status) fail("writing");
    nb_image_data_free(&image);
    nb_renderer_free(r);
    return status ? 1 : 0;
}
