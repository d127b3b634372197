/* truth_jsonl.h - the ground truth of every frame as JSON lines
 * (nb-convert -o truth.jsonl; docs/stream-format.md, truth.jsonl).
 *
 * One object per frame, in the order the frames come: its number (1-based,
 * as the file names of a '#' template), its experiment's identifier (as
 * model.expt names it, nb_expt_identifier), the crystal setting matrix A (UB,
 * reciprocal Angstrom, row-major, in DIALS's laboratory frame by the mapping
 * of dials_expt_write.h, so that DIALS's crystal.get_A() compares directly),
 * the cell, the spectrum, fluence and crystal size of the shot, and the
 * reflections whose photons exceed a threshold (nb_reflections.h).  The file
 * is one output of the whole run, written under a temporary name and renamed
 * into place by nb_truth_commit. */
#ifndef NB_FORMAT_TRUTH_JSONL_H
#define NB_FORMAT_TRUTH_JSONL_H

#include "nb_error.h"
#include "nb_image_record.h"
#include "nb_plan.h"

typedef struct nb_truth nb_truth;

nb_status nb_truth_open(nb_truth **t, const char *path, double min_photons);
/* Frame im->frame of the series plan: its photons (every panel's), im the
 * IMAGE record's keys (a still's STILL_* keys are checked against the
 * plan's shot). */
nb_status nb_truth_frame(nb_truth *t, const nb_plan *series, const nb_image_info *im, const float *photons);
nb_status nb_truth_commit(nb_truth *t);   /* frees t */
void nb_truth_abort(nb_truth *t);         /* frees t; NULL is allowed */

#endif
