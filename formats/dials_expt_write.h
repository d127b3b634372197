/* dials_expt_write.h - the simulated truth as a DIALS experiment list
 * (.expt JSON, dxtbx's serialisation), written by nb-convert -o model.expt.
 *
 * The list is gathered frame by frame (nb_expt_frame) and written at the
 * end of the run (nb_expt_commit), so that it describes exactly the frames
 * the stream held (a shard's, or the whole run's):
 *   - a rotation series (OSC > 0): one experiment, its scan the frames seen
 *     (their numbers, which must follow one another), a single-axis
 *     goniometer, and the crystal at spindle angle 0;
 *   - stills (and any series with OSC 0): one experiment per frame, in the
 *     order the frames came, each with its own beam (the frame's
 *     wavelength), its own crystal (the shot as the frame saw it, the
 *     crystal truth.jsonl's A is made from) and its own image set naming its
 *     image, and its frame's number "nb_frame" (counted from 1, as file
 *     names: by it shards' lists are joined in frame order,
 *     dials_expt_join.h).
 * Identifiers: the plan's own where it keeps them (nb-geom -expt keeps a
 * DIALS list's, which tie its experiments to their reflections), else the
 * run's, "nb-" and the CRC-32 of the series plan's PLAN record in hex (a
 * still's with "-N", its frame's number): the same command, and every shard
 * of one run, names them alike; another plan's differ, so that a truth and
 * a fit load into one ExperimentList.
 * One detector serves every experiment: every panel with the trusted range,
 * gain and pedestal of the counts as the images beside it hold them, and the
 * sensor as simulated (thickness, material, mu; none: thickness 0, which
 * DIALS takes as no absorption, no parallax).  A single panel is a flat
 * detector; several panels are nested one group per panel, as dxtbx builds
 * the detector of the NXmx file nb-convert writes (docs/architecture.md 5),
 * so that `dials.import x.nxs reference_geometry=model.expt` accepts it.
 * Everything is in DIALS's laboratory frame (nb_dials_frame): lengths mm
 * (real-space cell vectors Angstrom), angles degrees. */
#ifndef NB_FORMAT_DIALS_EXPT_WRITE_H
#define NB_FORMAT_DIALS_EXPT_WRITE_H

#include <stddef.h>

#include "nb_error.h"
#include "nb_plan.h"

/* What the experiments' image sets name */
typedef enum nb_expt_image_kind {
    NB_EXPT_NO_IMAGES,      /* none: a model to compare with */
    NB_EXPT_FILE_PER_FRAME, /* one file per frame (CBF, SMV): path a '#' template, or the one file */
    NB_EXPT_ONE_FILE        /* every frame in one file (NXmx): path that file, frames by their index in it */
} nb_expt_image_kind;

typedef struct nb_expt_images {
    nb_expt_image_kind kind;
    const char *path;       /* absolute (as dials.import writes it) */
    int offset_kept;        /* the images hold the counts with their ADC offset, which dxtbx reads as the
                               pedestal (an SMV's ADC_OFFSET); 0: counted from 0 (CBF, NXmx, or none) */
} nb_expt_images;

/* A frame's counts: what the panels' trusted range (-1 to the counter's top
 * less the offset, as dxtbx reads it from the images), pedestal and gain
 * follow from */
typedef struct nb_expt_counts {
    double adc;             /* the ADC offset */
    double top;             /* the counter's top (65535, or 2^31 - 1 for 32-bit counts) */
    double gain;            /* ADU per photon (nb-noise -gain) */
} nb_expt_counts;

/* R (row-major) that takes the plan's laboratory frame onto DIALS's: the
 * beam's propagation direction onto -z, the spindle (made perpendicular to
 * the beam) onto +x.  An error when the spindle is along the beam. */
nb_status nb_dials_frame(const nb_plan *p, double R[3][3]);

/* The plan's (or a panel view's) detector, spindle and polarization normal
 * in DIALS's frame, as model.expt states them, into m's lab fields (m->lab
 * 1); m->lab 0 when there is no DIALS frame (the spindle along the beam). */
struct nb_image_meta;
void nb_dials_image_geometry(const nb_plan *p, struct nb_image_meta *m);

/* The real-space cell vectors (rows a, b, c; Angstrom) of frame `frame`'s
 * crystal in DIALS's frame: a still's shot as it saw it, a rotation frame's
 * crystal at mid-frame (truth.jsonl's A is their reciprocal). */
nb_status nb_dials_frame_cell(const nb_plan *series, long frame, double abc[3][3]);

/* The wavelength (m) frame `frame`'s headers state: a frame crystal's, a
 * still's spikes' mean, else the plan's LAMBDA0 */
double nb_expt_frame_wavelength(const nb_plan *series, long frame);

/* The run's identifier (above): "nb-" and 8 hex digits, NUL-ended */
#define NB_EXPT_RUN_ID 16
nb_status nb_expt_run_id(const nb_plan *series, char out[NB_EXPT_RUN_ID]);
/* Frame `frame`'s experiment identifier by the rule above, into out (n
 * bytes): the plan's kept one, else the run's (a rotation's) or the run's
 * and "-N" (a still's, N its number from 1).  truth.jsonl names the same. */
void nb_expt_identifier(const nb_plan *series, const char *run_id, long frame, char *out, size_t n);

typedef struct nb_expt nb_expt;

/* A list to be written at `path` (under a temporary name until
 * nb_expt_commit); img is copied. */
nb_status nb_expt_open(nb_expt **e, const char *path, const nb_expt_images *img);
/* Frame `frame` of the series plan, its wavelength (m) as the image headers
 * state it and its counts.  Every frame must share the first one's detector,
 * beam direction and counts; a rotation's frames must follow one another. */
nb_status nb_expt_frame(nb_expt *e, const nb_plan *series, long frame, double wavelength, const nb_expt_counts *c);
/* Write the list and rename it into place; frees e. */
nb_status nb_expt_commit(nb_expt *e);
void nb_expt_abort(nb_expt *e); /* frees e; NULL is allowed */

#endif
