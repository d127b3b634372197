/* registry.h - every file format nb knows, in one table, and the one reader
 * of image files that every tool uses.
 *
 * Each format declares its name (as --format spells it), the title messages
 * use, its file-name suffixes, its magic bytes, whether it can be read (its
 * reader) and how it is written (its writer's kind), and which formats are
 * sidecars (files that describe a series of images for a processing
 * program, written once per plan).  nb-convert's -o and --format, its
 * --import and nb-fit's --observed all look formats up here, so that a
 * format is known, read and refused the same way by every tool.
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

typedef struct nb_image_file nb_image_file;
typedef struct nb_format nb_format;

/* A format's reader: the file into *out (its format, values and keys set by
 * nb_image_file_read's rule); plan, when not NULL, the one the image must
 * match; frame, of a file of several (a stream), the one wanted. */
typedef nb_status (*nb_image_reader)(const char *path, const nb_plan *plan, long frame, nb_image_file *out);

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
};

/* The format of that id (never NULL for an id below NB_FMT_COUNT). */
const nb_format *nb_format_get(nb_format_id id);
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
