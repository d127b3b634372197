/* nxmx.h - NeXus/NXmx HDF5 files (nb-convert -o x.nxs): every frame of a
 * stream in one file, as DIALS (dxtbx's FormatNXmx), h5py and XDS's HDF5
 * plugins read them.
 *
 * Layout (docs/architecture.md 5 lists it in full):
 *   /entry (NXentry, definition "NXmx")
 *     data/data            frames x rows x columns, int32 counts or float32
 *                          photons, one frame per chunk; bitshuffle+LZ4
 *                          (filter 32008, as Eiger data) when the HDF5 filter
 *                          plugin is there, else gzip; the bitshuffle+LZ4
 *                          chunks made here on every thread (bslz4.h) and
 *                          stored as they are, the plugin's bytes
 *     instrument/beam      incident_wavelength (A), polarisation as a Stokes
 *                          vector, the spectrum of several sources
 *     instrument/detector  sensor, saturation/underload, pixel_mask, and one
 *                          NXdetector_module per panel (module_offset and the
 *                          pixel directions, NXtransformations chains)
 *     sample               depends_on omega: the spindle, per-frame angles
 *     nb                   provenance: version, command line, seeds, frames
 * Vectors are the plan's in DIALS's laboratory frame (nb_dials_frame, as
 * model.expt) turned into NeXus's McStas frame (x and z negated).  Several
 * panels lie one after another along the slow axis of each frame, from
 * column 0, as wide as the widest (gaps -1 and masked).
 *
 * Written under a temporary name beside the final one, renamed into place by
 * nb_nxmx_close; nb_nxmx_abort (or a fatal signal) removes it.
 *
 * libhdf5 is loaded (dlopen, its soname found at build time) by the first
 * call that needs it; a build without its headers (NB_HAVE_HDF5 undefined)
 * or a system without the library gives NB_ERR_UNSUPPORTED naming it. */
#ifndef NB_FORMAT_NXMX_H
#define NB_FORMAT_NXMX_H

#include <stdint.h>

#include "nb_error.h"
#include "nb_plan.h"

typedef struct nb_nxmx nb_nxmx;

/* What /entry/data/data holds */
enum nb_nxmx_kind { NB_NXMX_COUNTS, NB_NXMX_PHOTONS };

/* How the frames are compressed: bitshuffle+LZ4 when its plugin is there,
 * else gzip (AUTO); or as named (BSLZ4 without the plugin is an error). */
enum nb_nxmx_compression { NB_NXMX_AUTO, NB_NXMX_GZIP, NB_NXMX_BSLZ4, NB_NXMX_NONE };

typedef struct nb_nxmx_setup {
    int kind;             /* enum nb_nxmx_kind */
    int compression;      /* enum nb_nxmx_compression */
    double saturation;    /* counts: the highest valid count (the counter's top less its offset) */
    double gain;          /* counts: ADU per photon (nb-noise -gain): /entry/data/data_scaling_factor is 1/gain */
} nb_nxmx_setup;


/* One frame's values besides its pixels */
typedef struct nb_nxmx_frame {
    long frame;           /* the stream's FRAME (0-based) */
    double phi_start;     /* deg: spindle angle at the start of the frame */
    double phi_range;     /* deg: rotation during the frame */
    double wavelength;    /* m: the frame's (a still's shot: its spectrum's mean) */
    int has_noise_seed;
    int64_t noise_seed;   /* NOISE_SEED of the counts */
} nb_nxmx_frame;

/* Load libhdf5: NB_OK, or NB_ERR_UNSUPPORTED saying why not. */
nb_status nb_nxmx_load(void);

/* Panel i's NXdetector_module name of a detector of n panels: "module_" and
 * its number zero-padded to n - 1's digits (module_0 .. module_9; module_00
 * .. module_15), so that the names' order, which dxtbx and nxmx_read.c take
 * the modules in, is the panels'.  out: at least 24 bytes. */
void nb_nxmx_module_name(int i, int n, char *out, size_t size);

/* ---- reading (nxmx_read.c) ------------------------------------------------ */

/* One frame of an NXmx file as the image registry reads it: its modules
 * (NXdetector_module's data_origin and data_size; one, the whole frame,
 * where the file has none) one after another, as an IMAGE holds panels */
typedef struct nb_nxmx_image {
    int width, height;      /* one module: its pixels; several: all of them, one row */
    int npanels;            /* modules */
    int *fpixels, *spixels; /* each module's width and height */
    char (*modules)[64];    /* each module's NXdetector_module ("": the whole frame) */
    size_t npixels;         /* of all modules */
    long nframes;           /* frames in the file */
    double *values;         /* npixels: counts, or photons (is_float) */
    int is_float;           /* the data are floats */
    int bits;               /* the data's bits per value */
    unsigned char *masked;  /* npixels, 1 where pixel_mask is nonzero; NULL: no mask */
    double saturation;      /* saturation_value; NAN: not stated */
    double gain;            /* counts per photon, 1 / data_scaling_factor; NAN: not stated */
} nb_nxmx_image;

/* Frame `frame` (from 0) of `path`, by nxmx_read.c's walk of its layout;
 * an error names the file, the data set and why.  Free *out with
 * nb_nxmx_image_free (it is cleared after a failure). */
nb_status nb_nxmx_read_frame(const char *path, long frame, nb_nxmx_image *out);
void nb_nxmx_image_free(nb_nxmx_image *im);

/* Create `path` (under a temporary name) for frames of plan p. */
nb_status nb_nxmx_open(nb_nxmx **w, const char *path, const nb_plan *p, const nb_nxmx_setup *s);
/* Append a frame: `values` int32 (counts) or float (photons), the plan's
 * panels one after another as an IMAGE record holds them.  The plan must
 * describe the same detector, beam and spindle as the one it was opened with. */
nb_status nb_nxmx_put(nb_nxmx *w, const nb_plan *p, const void *values, const nb_nxmx_frame *f);
/* Write the per-frame arrays, close and rename into place; frees w. */
nb_status nb_nxmx_close(nb_nxmx *w);
/* Remove the temporary file; frees w (NULL: nothing). */
void nb_nxmx_abort(nb_nxmx *w);
const char *nb_nxmx_path(const nb_nxmx *w);

/* A master file joining NXmx files of one experiment written by shards
 * (nb-sim --shard / --frames): its data a virtual dataset over theirs, its
 * omega and frame numbers theirs, in the order of their first frames, its
 * detector a copy of the first's (XDS's durin plugin follows no external
 * link to find it), its spectrum and source external links into the first;
 * the parts must share
 * one geometry and must not overlap.  Part names are stored as given
 * (relative names are found beside the master). */
nb_status nb_nxmx_master(const char *path, const char *const *parts, int nparts);

#endif
