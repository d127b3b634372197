/* registry.c - the table of nb's file formats and its look-ups (by name,
 * suffix and magic bytes): the one place that says what a format is called,
 * how its files are named and recognised, how it is read and written
 * (registry.h).  The readers themselves are in image_read.c, the writers in
 * each format's file. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "nb_stream.h"
#include "nxmx.h"
#include "registry.h"
#include "tiff.h"

/* the readers (image_read.c) */
nb_status nb_read_rawfloat_file(const char *path, const nb_plan *plan, long frame, nb_image_file *out);
nb_status nb_read_smv_file(const char *path, const nb_plan *plan, long frame, nb_image_file *out);
nb_status nb_read_cbf_file(const char *path, const nb_plan *plan, long frame, nb_image_file *out);
nb_status nb_read_tiff_file(const char *path, const nb_plan *plan, long frame, nb_image_file *out);
nb_status nb_read_stream_file(const char *path, const nb_plan *plan, long frame, nb_image_file *out);
nb_status nb_read_nxmx_file(const char *path, const nb_plan *plan, long frame, nb_image_file *out);

/* the writers, each in its format's file */
nb_status nb_rawfloat_write_frame(const nb_frame_image *img);
nb_status nb_rawfloat_write_file(const char *path, const float *photons, size_t n);
nb_status nb_smv_write_frame(const nb_frame_image *img);
nb_status nb_cbf_write_frame(const nb_frame_image *img);
nb_status nb_tiff_write_frame(const nb_frame_image *img);
nb_status nb_pgm_write_frame(const nb_frame_image *img);
nb_status nb_png_write_frame(const nb_frame_image *img);
nb_status nb_xds_inp_write_sidecar(const char *path, const nb_frame *fr, const nb_write_opts *o);
nb_status nb_crystfel_geom_write_sidecar(const char *path, const nb_frame *fr, const nb_write_opts *o);
extern const nb_run_writer nb_expt_run_writer, nb_truth_run_writer, nb_nxmx_run_writer;

#define M(s) {s}, {sizeof s - 1}
#define M2(a, b) {a, b}, {sizeof a - 1, sizeof b - 1}
#define NO_MAGIC {NULL}, {0}
/* a frame's file: its writer and what it holds */
#define IMAGE(fn, what) .write_image = fn, .samples = what
#define TIFF_IMAGE(what) IMAGE(nb_tiff_write_frame, what), .load = nb_tiff_load

/* In nb_format_id's order.  The TIFF variants name one TIFF reader: a file
 * is recognised as NB_FMT_TIF (by magic or suffix) and read whatever its
 * samples are; written, they are one writer whose samples their entries
 * choose.  A reader's fields first, then the writer's (registry.h). */
static const nb_format formats[NB_FMT_COUNT] = {
    {NB_FMT_BIN, "bin", "raw float32", {".bin", ".raw", ".float", NULL}, {"raw", "float", NULL}, NO_MAGIC,
     nb_read_rawfloat_file, NB_WRITE_FRAME, 0, 0, 0,
     IMAGE(nb_rawfloat_write_frame, NB_SAMPLES_PHOTONS), .write_photons = nb_rawfloat_write_file,
     .rows = NB_ROWS_FLOAT32, .all_panels = 1, .derivatives = 1},
    {NB_FMT_SMV, "smv", "SMV", {".img", ".smv", NULL}, {"img", NULL}, M("{\nHEADER_BYTES"), nb_read_smv_file,
     NB_WRITE_FRAME, 0, 1, 0,
     IMAGE(nb_smv_write_frame, NB_SAMPLES_INTEGER), .rows = NB_ROWS_SMV, .smv_beam = 1, .processing_images = 1},
    {NB_FMT_CBF, "cbf", "CBF", {".cbf", NULL}, {NULL}, M("###CBF"), nb_read_cbf_file, NB_WRITE_FRAME, 0, 1, 0,
     IMAGE(nb_cbf_write_frame, NB_SAMPLES_INTEGER), .processing_images = 1, .counts_from_zero = 1},
    {NB_FMT_TIF, "tif", "TIFF", {".tif", ".tiff", NULL}, {"tiff", NULL}, M2("II*\0", "MM\0*"), nb_read_tiff_file,
     NB_WRITE_FRAME, 0, 1, 0,
     TIFF_IMAGE(NB_SAMPLES_COUNTS_OR_PHOTONS), .derivatives = 1},
    {NB_FMT_TIF_FLOAT, "tif-float", "float32 TIFF", {NULL}, {NULL}, NO_MAGIC, nb_read_tiff_file, NB_WRITE_FRAME, 0,
     0, 0, TIFF_IMAGE(NB_SAMPLES_PHOTONS), .derivatives = 1},
    {NB_FMT_TIF16, "tif16", "16-bit TIFF", {NULL}, {NULL}, NO_MAGIC, nb_read_tiff_file, NB_WRITE_FRAME, 0, 1, 0,
     TIFF_IMAGE(NB_SAMPLES_INTEGER), .bits = 16},
    {NB_FMT_TIF32, "tif32", "32-bit TIFF", {NULL}, {NULL}, NO_MAGIC, nb_read_tiff_file, NB_WRITE_FRAME, 0, 1, 0,
     TIFF_IMAGE(NB_SAMPLES_INTEGER), .bits = 32},
    {NB_FMT_PGM, "pgm", "PGM", {".pgm", NULL}, {NULL}, M2("P5\n", "P5 "), NULL, NB_WRITE_FRAME, 0, 0, 0,
     IMAGE(nb_pgm_write_frame, NB_SAMPLES_PHOTONS)},
    {NB_FMT_PNG, "png", "PNG", {".png", NULL}, {NULL}, M("\x89PNG\r\n\x1a\n"), NULL, NB_WRITE_FRAME, 0, 0, 0,
     IMAGE(nb_png_write_frame, NB_SAMPLES_COUNTS_OR_PHOTONS), .photons_option = 1},
    {NB_FMT_NBS, "nbs", "nb stream", {".nbs", NULL}, {NULL}, M(NB_STREAM_MAGIC), nb_read_stream_file,
     NB_WRITE_STREAM, 0, 0, 0,
     .frames = 1, .all_panels = 1, .derivatives = 1},
    {NB_FMT_XDS, "xds", "XDS.INP", {".INP", NULL}, {"INP", "inp", NULL}, NO_MAGIC, NULL, NB_WRITE_SIDECAR, 1, 0, 0,
     .write_sidecar = nb_xds_inp_write_sidecar, .names_images = NB_NAMES_FRAME_FILES},
    {NB_FMT_GEOM, "geom", "CrystFEL geometry", {".geom", NULL}, {NULL}, NO_MAGIC, NULL, NB_WRITE_SIDECAR, 1, 0, 0,
     .write_sidecar = nb_crystfel_geom_write_sidecar, .plan_sidecar = 1},
    {NB_FMT_EXPT, "expt", "DIALS experiment list", {".expt", NULL}, {NULL}, NO_MAGIC, NULL, NB_WRITE_RUN, 0, 0, 0,
     .run = &nb_expt_run_writer, .names_images = NB_NAMES_FRAMES},
    {NB_FMT_TRUTH, "truth", "truth.jsonl", {".jsonl", NULL}, {"jsonl", NULL}, NO_MAGIC, NULL, NB_WRITE_RUN, 0, 0, 0,
     .run = &nb_truth_run_writer},
    {NB_FMT_NXMX, "nxmx", "NXmx (HDF5)", {".nxs", ".h5", NULL}, {"nxs", "h5", NULL}, M("\x89HDF"), nb_read_nxmx_file,
     NB_WRITE_RUN, 0, 1, 1,
     .frames = 1, .all_panels = 1, .photons_option = 1, .processing_images = 1, .counts_from_zero = 1,
     .load = nb_nxmx_load, .run = &nb_nxmx_run_writer},
};

const nb_format *nb_format_get(nb_format_id id) { return id < NB_FMT_COUNT ? &formats[id] : NULL; }

const nb_format *nb_format_next(const nb_format *f)
{
    if (!f) return &formats[0];
    return f->id + 1 < NB_FMT_COUNT ? &formats[f->id + 1] : NULL;
}

const nb_format *nb_format_by_name(const char *name)
{
    for (int i = 0; i < NB_FMT_COUNT; i++) {
        if (!strcmp(name, formats[i].name)) return &formats[i];
        for (int k = 0; formats[i].aliases[k]; k++)
            if (!strcmp(name, formats[i].aliases[k])) return &formats[i];
    }
    return NULL;
}

/* The suffix of the last component of path: from its last dot, or NULL */
static const char *suffix_of(const char *path)
{
    const char *dot = strrchr(path, '.'), *slash = strrchr(path, '/');
    return !dot || (slash && dot < slash) ? NULL : dot;
}

const nb_format *nb_format_by_suffix(const char *path)
{
    const char *dot = suffix_of(path);
    if (!dot) return NULL;
    for (int i = 0; i < NB_FMT_COUNT; i++)
        for (int k = 0; formats[i].suffixes[k]; k++)
            if (!strcasecmp(dot, formats[i].suffixes[k])) return &formats[i];
    return NULL;
}

const nb_format *nb_format_by_magic(const unsigned char *bytes, size_t n)
{
    for (int i = 0; i < NB_FMT_COUNT; i++)
        for (int k = 0; k < 2 && formats[i].magic[k]; k++)
            if (n >= formats[i].magic_len[k] && !memcmp(bytes, formats[i].magic[k], formats[i].magic_len[k]))
                return &formats[i];
    return NULL;
}

const nb_format *nb_format_of_file(const char *path)
{
    unsigned char b[16];
    size_t got = 0;
    FILE *fp = fopen(path, "rb");
    if (fp) {
        got = fread(b, 1, sizeof b, fp);
        fclose(fp);
    }
    const nb_format *f = nb_format_by_magic(b, got);
    if (!f) f = nb_format_by_suffix(path);
    if (f) return f;
    /* a name of letters after its last dot that no format has ("x.jpg")
     * says what it is not: not raw floats */
    const char *dot = suffix_of(path);
    if (dot && dot[1] && dot[strspn(dot + 1, "0123456789") + 1] != '\0') return NULL;
    return nb_format_unsuffixed();
}

const nb_format *nb_format_unsuffixed(void) { return &formats[NB_FMT_BIN]; }

const char *nb_format_written_list(nb_format_writer kind)
{
    static char lists[NB_WRITE_STREAM + 1][256];
    char *list = lists[kind];
    size_t at = 0;
    if (list[0]) return list;
    for (int i = 0; i < NB_FMT_COUNT; i++)
        if (formats[i].writer == kind && at < sizeof lists[0] - 1)
            at += (size_t)snprintf(list + at, sizeof lists[0] - at, "%s%s", at ? ", " : "", formats[i].name);
    return list;
}

const char *nb_format_readable_list(void)
{
    static char list[256];
    /* the readers, most used first; the TIFF variants are one TIFF */
    static const nb_format_id order[] = {NB_FMT_CBF, NB_FMT_SMV, NB_FMT_TIF, NB_FMT_BIN, NB_FMT_NBS, NB_FMT_NXMX};
    if (list[0]) return list;
    size_t at = 0;
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        const nb_format *f = &formats[order[i]];
        at += (size_t)snprintf(list + at, sizeof list - at, "%s%s (", i ? ", " : "", f->title);
        for (int k = 0; f->suffixes[k]; k++)
            at += (size_t)snprintf(list + at, sizeof list - at, "%s%s", k ? " " : "", f->suffixes[k]);
        at += (size_t)snprintf(list + at, sizeof list - at, ")");
    }
    return list;
}
