/* registry.h - every file format nb knows, in one table, and the one reader
 * of image files that every tool uses.
 *
 * Each format declares its name (as --format spells it), the title messages
 * use, its file-name suffixes, its magic bytes, whether it can be read (its
 * reader) and how it is written: its writer's kind and functions, and what
 * the tools would otherwise ask of its id (below).  nb-convert's -o and
 * --format, its --import, nb-fit's --observed and nb.h's nb_image_read and
 * nb_image_write all look formats up here, so that a format is known, read,
 * written and refused the same way by every tool, and no tool tests a
 * format's id: a format added is its entry in registry.c and its file.
 *
 * The writers, by kind (nb_format_writer):
 *   - NB_WRITE_FRAME, a file per frame: write_image, handed the frame's
 *     pixels as its samples say (nb_frame_write_image, frame_write.h: the
 *     photons, or integer counts, the stream's or nanoBragg's int image);
 *     write_photons for a format of the photons alone (raw float32, which
 *     needs no plan); rows, for nb-convert's writer of a band of rows at a
 *     time as the image arrives (raw float, SMV); all_panels, one file of
 *     every panel (else a one-panel format: a file per panel).
 *   - NB_WRITE_RUN, one file gathered over the run (NXmx, model.expt,
 *     truth.jsonl): run's functions, a frame at a time into the file that
 *     the first frame opened, committed or aborted at the run's end, a plan
 *     without images (model.expt) and the join of shards' files (--join).
 *   - NB_WRITE_SIDECAR, once per plan (XDS.INP, .geom): write_sidecar.
 *   - NB_WRITE_STREAM: the stream itself (.nbs), copied by nb-convert.
 * What names images (model.expt, XDS.INP: names_images) takes the first
 * output of the same command whose format is processing_images.
 *
 * What a file is read as: its first bytes when they are a format's magic,
 * else its name's suffix (so that a file named .cbf that is no CBF gets the
 * CBF reader's error, never raw floats), else raw float32 (the reference's
 * floatimage.bin has neither, and a name without a suffix, or a number
 * for one, is taken as it).  A format that cannot be read (PNG, PGM,
 * XDS.INP ...) is refused by name, as is a suffix that no format has,
 * listing those that can be read.  An NXmx file holds a run's frames
 * (nxmx_read.c: nb's own, an Eiger's master with its data files, several
 * modules, a Jungfrau's); its frame count must be the plan's, its modules
 * (NXdetector_module) the plan's panels, read as one image of all of them
 * as an nb stream's or a raw float file's are.
 *
 * The rule for counts (nb_image_file_read), the same for every reader:
 *   - offset: the pedestal the counts include is the one the file states
 *     (SMV's ADC_OFFSET, a stream's COUNTS_ADC); a CBF counts from 0, as a
 *     PILATUS does (nb-convert writes it so); where the file says nothing
 *     (a TIFF, an SMV without ADC_OFFSET) it is the plan's ADC (-adc).
 *   - gain: the file's (a stream's COUNTS_GAIN, SMV's GAIN, NXmx's 1 /
 *     data_scaling_factor), else 1.
 *   - overload: the count the file states as its overload (a CBF's
 *     _array_intensities.overload or "# Count_cutoff", NXmx's
 *     saturation_value), else the top of its
 *     counter (65535 for 16 bits; 2147483647 for a CBF's or a stream's
 *     signed 32 bits; 4294967295 for an SMV's or TIFF's unsigned 32 bits).
 *     A count at or above it is overloaded.
 *   - untrusted pixels: the overloaded ones and the negative ones (a CBF's
 *     -1 gaps and masked pixels), and NXmx's pixel_mask's nonzero ones; they
 *     are marked in the mask, not changed.
 *   - counter depth (bits): 32 for an SMV or TIFF of 32-bit samples and a
 *     stream's 32-bit counts, and for a CBF whose counts do not all fit 16
 *     bits; else 16.
 * Photon images (raw float32, float TIFF, a stream's IMAGE without counts)
 * have no offset, overload or mask: every pixel is used as it is.
 */
#ifndef NB_FORMAT_REGISTRY_H
#define NB_FORMAT_REGISTRY_H

#include <stddef.h>

#include "nb_error.h"
#include "nb_plan.h"

/* The formats, in the order of nb-convert's --format list. */
typedef enum nb_format_id {
    NB_FMT_BIN, NB_FMT_SMV, NB_FMT_CBF, NB_FMT_TIF, NB_FMT_TIF_FLOAT, NB_FMT_TIF16, NB_FMT_TIF32, NB_FMT_PGM,
    NB_FMT_PNG, NB_FMT_NBS, NB_FMT_XDS, NB_FMT_GEOM, NB_FMT_EXPT, NB_FMT_TRUTH, NB_FMT_NXMX,
    NB_FMT_COUNT
} nb_format_id;

/* How a format is written (what nb-convert does with an -o of it) */
typedef enum nb_format_writer {
    NB_WRITE_NONE,     /* not written (only read, or only recognised) */
    NB_WRITE_FRAME,    /* a file per frame (and per panel of a one-panel format) */
    NB_WRITE_RUN,      /* one file for the whole run, gathered frame by frame (NXmx, .expt, .jsonl) */
    NB_WRITE_SIDECAR,  /* a description of the series, once per plan (XDS.INP, .geom) */
    NB_WRITE_STREAM    /* a copy of the nb stream */
} nb_format_writer;

/* What a frame's file holds (nb_frame_write_image picks the pixels by it) */
typedef enum nb_format_samples {
    NB_SAMPLES_NONE,              /* no image of its own */
    NB_SAMPLES_PHOTONS,           /* the photons, always (raw float, float TIFF, PGM's bytes of them) */
    NB_SAMPLES_INTEGER,           /* integer counts, always: the stream's, else nanoBragg's int image (-scale, -adc) */
    NB_SAMPLES_COUNTS_OR_PHOTONS  /* the stream's counts when it has them, else the photons (TIFF, PNG) */
} nb_format_samples;

/* How nb-convert writes it a band of rows at a time (tools/nb_convert_rows.c) */
typedef enum nb_format_rows {
    NB_ROWS_NONE,     /* only whole (write_image) */
    NB_ROWS_FLOAT32,  /* the photons' rows as they are, no header (raw float) */
    NB_ROWS_SMV       /* an SMV header, then 16-bit scaled photons or the counts, row by row */
} nb_format_rows;

/* Which images of the same command a run file or sidecar names */
typedef enum nb_format_names {
    NB_NAMES_NONE,
    NB_NAMES_FRAME_FILES, /* a file per frame, every panel in it (stacked: XDS.INP's SEGMENT= blocks) */
    NB_NAMES_FRAMES       /* the frames whole: a run file, or a file per frame of a one-panel detector */
} nb_format_names;

typedef struct nb_image_file nb_image_file;
typedef struct nb_format nb_format;
typedef struct nb_frame nb_frame;             /* a frame ready to write (frame_write.h) */
typedef struct nb_frame_image nb_frame_image; /* ... and its samples for a format (frame_write.h) */

/* A format's reader: the file into *out (its format, values and keys set by
 * nb_image_file_read's rule); plan, when not NULL, the one the image must
 * match; frame, of a file of several (a stream), the one wanted. */
typedef nb_status (*nb_image_reader)(const char *path, const nb_plan *plan, long frame, nb_image_file *out);

/* What the writers are told besides the frame: the tool's settings that
 * concern them (nb-convert's options) */
typedef struct nb_write_opts {
    int photons;               /* run files: the photons as float32, not counts (nb-convert --photons) */
    int compression;           /* of NXmx data (enum nb_nxmx_compression) */
    double truth_min_photons;  /* truth.jsonl's reflections have more photons */
    const char *images;        /* names_images: the name (its '#' run the frame number) of the images
                                  the same command writes; NULL when none */
    const nb_format *images_format;
    /* where to write final: a temporary beside it that the tool puts in place
     * when the run has ended cleanly (*target to free); bytes: at least, when known */
    nb_status (*claim)(const char *final, unsigned long long bytes, char **target);
} nb_write_opts;

/* A frame as one file (img: its samples, header values and names, frame_write.h) */
typedef nb_status (*nb_image_writer)(const nb_frame_image *img);
/* n photons, every panel, as the file alone (no header: no plan) */
typedef nb_status (*nb_photons_writer)(const char *path, const float *photons, size_t n);
/* A sidecar for the frame's plan, at o->claim's name for path */
typedef nb_status (*nb_sidecar_writer)(const char *path, const nb_frame *fr, const nb_write_opts *o);

/* The images a joined file names: the joined file of images and its parts */
typedef struct nb_joined_images {
    const char *path;  /* NULL: none joined */
    const char *const *parts;
    int nparts;
} nb_joined_images;

/* A run file's writer: *file is the writer's own, NULL until the first frame */
typedef struct nb_run_writer {
    /* frame fr into *file, opened at path by the run's first frame (o: its options) */
    nb_status (*frame)(void **file, const char *path, const nb_frame *fr, const nb_write_opts *o);
    /* frames [first, last) of a plan without images (their counts the int
     * image's: offset adc, 16 bits); NULL: it needs the images */
    nb_status (*plan_frames)(void **file, const char *path, const nb_plan *plan, long first, long last, double adc);
    nb_status (*commit)(void *file); /* into place; frees it */
    void (*abort)(void *file);       /* removed; frees it (NULL allowed) */
    /* --join: path from shards' files of this format (images: the joined run
     * file of images, when one is joined too); NULL: not joined */
    nb_status (*join)(const char *path, const char *const *parts, int nparts, const nb_joined_images *images);
    const char *joined;      /* --join's messages: "NXmx master" */
    const char *join_parts;  /* "NXmx parts" */
    const char *join_output; /* "MASTER.nxs" */
} nb_run_writer;

struct nb_format {
    nb_format_id id;
    const char *name;            /* --format's spelling: "smv" */
    const char *title;           /* what messages call it: "SMV" */
    const char *suffixes[4];     /* file-name suffixes with the dot, matched without case; NULL-ended */
    const char *aliases[3];      /* other --format spellings; NULL-ended */
    const char *magic[2];        /* the file's first bytes; NULL-ended */
    unsigned char magic_len[2];
    nb_image_reader read;        /* NULL: write-only (or neither) */
    nb_format_writer writer;
    int sidecar;                 /* describes a series of images, written once per plan */
    int counts;                  /* its images hold integer counts (else photons, 8-bit previews or none) */
    int run_file;                /* one file holds a run's frames, read by frame (NXmx): nb-fit --observed
                                    FILE and nb-convert --import FILE take every frame of it */
    /* ---- writing (nb_format_writer says which of these it has) ---- */
    int frames;                  /* a file holds several frames, read by number (a stream, NXmx) */
    nb_image_writer write_image; /* NB_WRITE_FRAME: a frame as one file */
    nb_photons_writer write_photons; /* ... the photons alone (raw float): written without a plan */
    nb_format_samples samples;   /* ... what its file holds */
    int bits;                    /* ... its integer samples' depth whatever the counts' (tif16: 16); 0: theirs */
    nb_format_rows rows;         /* ... written a band of rows at a time by nb-convert */
    int all_panels;              /* one file holds every panel, one after another (else a file per panel) */
    int smv_beam;                /* its header's beam centre follows nb-convert --smv-beam */
    int photons_option;          /* nb-convert --photons makes it of the photons, not the counts */
    int derivatives;             /* a derivative (--grad: photons per unit, any sign) can be written to it */
    int processing_images;       /* a processing program reads its files as the images (dxtbx, XDS): what
                                    names_images takes */
    int counts_from_zero;        /* its counts are less their ADC offset, as a PILATUS counts (else kept) */
    nb_status (*load)(void);     /* the library it is written with, loaded before the first frame (libtiff,
                                    libhdf5); NULL: none */
    const nb_run_writer *run;    /* NB_WRITE_RUN */
    nb_sidecar_writer write_sidecar; /* NB_WRITE_SIDECAR */
    int plan_sidecar;            /* ... written from a plan alone (no IMAGE record: a refined plan's detector) */
    nb_format_names names_images; /* the images of the same command it names */
};

/* The format of that id (never NULL for an id below NB_FMT_COUNT). */
const nb_format *nb_format_get(nb_format_id id);
/* The formats in turn, in the table's order: the first after NULL, NULL after the last */
const nb_format *nb_format_next(const nb_format *f);
/* By --format's name or an alias ("img", "tiff", "nxs" ...); NULL when unknown. */
const nb_format *nb_format_by_name(const char *name);
/* By the file name's suffix ("x.cbf", "XDS.INP"); NULL when it has none known. */
const nb_format *nb_format_by_suffix(const char *path);
/* By the first bytes of a file (n of them): NULL when none is a magic. */
const nb_format *nb_format_by_magic(const unsigned char *bytes, size_t n);

/* What path is read as: by its first bytes, else its suffix, else raw
 * float32 when its name has no suffix or a number ("floatimage",
 * "img.0001"); NULL for a suffix that no format has ("x.jpg").  A file that
 * cannot be opened is taken by its name (the reader then says why it cannot
 * be read). */
const nb_format *nb_format_of_file(const char *path);

/* The formats that can be read, for messages: "CBF, SMV, TIFF, raw float32, nb stream" */
const char *nb_format_readable_list(void);
/* What a name without a suffix is written as: raw float32 (nb-convert -o floatimage) */
const nb_format *nb_format_unsuffixed(void);
/* The names of the formats written by kind, for messages: "bin, smv, cbf ..." (static storage) */
const char *nb_format_written_list(nb_format_writer kind);

/* What an image file holds, read by the one rule above. */
struct nb_image_file {
    const nb_format *format;  /* what it was read as */
    int width, height;        /* pixels (a stream or raw float of several panels: all of them, one row) */
    size_t npixels;
    int is_counts;            /* 1: counts (below); 0: photons */
    float *photons;           /* photon images: npixels photons per pixel */
    double *counts;           /* count images: npixels counts as stored (the offset included) */
    int bits;                 /* counts: the counter's depth, 16 or 32 */
    double offset;            /* counts: the pedestal they include, ADU */
    int offset_stated;        /* ... the file's own (else the plan's, or 0 without a plan) */
    double gain;              /* counts: ADU per photon */
    double overload;          /* counts: from this count up a pixel is overloaded */
    int overload_stated;      /* ... the file's own (else its counter's top) */
    unsigned char *untrusted; /* counts: npixels, 1 where negative or overloaded; NULL for photons */
    size_t nnegative, noverloaded;
};

/* Read an image file by the rule above.  plan (may be NULL): the image
 * must have its size (a raw float file: exactly its pixels; a detector of
 * several panels is read from an nb stream or a raw float file of all of
 * them), and its ADC is the offset of counts whose file states none.
 * frame: of an nb stream, the IMAGE record of that frame (0-based).  A
 * format that cannot be read is NB_ERR_USAGE, "cannot read 'x.pgm': PGM is
 * a write-only format (readable: ...)"; a file that cannot be read or is
 * not what it claims, NB_ERR_IO or NB_ERR_DATA naming it.  Free *out with
 * nb_image_file_free (also after a failure).  With -v (nb_info) it says
 * what it read, one line by the rule: "'x.cbf' read as CBF: 16-bit counts,
 * offset 0 (the file's), gain 1, overload 65495 (the file's); untrusted: 0
 * negative, 3 overloaded pixels", the same line in every tool. */
nb_status nb_image_file_read(const char *path, const nb_plan *plan, long frame, nb_image_file *out);
void nb_image_file_free(nb_image_file *f);

/* The untrusted pixels again, for an overload given by hand (nb-fit --overload). */
void nb_image_file_set_overload(nb_image_file *f, double overload);

#endif
