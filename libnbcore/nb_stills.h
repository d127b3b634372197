/* nb_stills.h - serial-crystallography stills (nb-geom -stills, an nb
 * extension; docs/physics.md 16): what each shot of a series of stills is.
 *
 * Shot i is drawn from the plan's MISSET_SEED and i alone, by a counter-based
 * generator (a hash of seed, frame, quantity and index, never a running
 * state), so that any shard of the series (nb-sim --frames, --shard) and any
 * later stage (nb-convert's truth.jsonl) gets the same shot without drawing
 * the frames before it:
 *   - the orientation: a rotation uniform on SO(3) (Shoemake's uniform unit
 *     quaternion), applied to the plan's crystal (cell and reciprocal cell);
 *   - the crystal size, STILLS_N A:B: one whole number of unit cells for
 *     Na = Nb = Nc, uniform over A..B;
 *   - the fluence, STILLS_FLUENCE A:B: uniform over [A, B];
 *   - the spectrum, STILLS_SPIKES K with STILLS_BANDWIDTH B: K spikes of
 *     equal weight whose wavelengths are lambda (1 + d_k), the d_k normal
 *     deviates of standard deviation B / 2.3548 (an envelope of FWHM B), so
 *     that the shots' mean spectrum is the Gaussian envelope.
 * Quantities without a range keep the plan's values. */
#ifndef NB_STILLS_H
#define NB_STILLS_H

#include "nb_error.h"
#include "nb_plan.h"
#include "nb_stream.h"

#define NB_STILLS_MAX_SPIKES 1000

typedef struct nb_still_shot {
    double U[9];            /* row-major rotation applied to the plan's crystal */
    double Na, Nb, Nc;      /* unit cells */
    double fluence;         /* photons/m^2 */
    int spikes;             /* 0: the plan's sources as they are */
    double spike[NB_STILLS_MAX_SPIKES]; /* relative wavelength offsets d_k, ascending */
} nb_still_shot;

/* Shot `frame` of the plan's stills (the plan's values where nothing varies). */
void nb_still_draw(const nb_plan *p, long frame, nb_still_shot *shot);
/* The shot into a frame's view of the plan: the crystal turned by U, N and fluence. */
void nb_still_apply(const nb_still_shot *shot, nb_plan *view);

/* The sources of frame `frame`: for stills with spikes, each of the plan's
 * sources at every spike's wavelength; for a frame crystal whose wavelength
 * is not LAMBDA0, the plan's sources scaled by lambda / LAMBDA0, and with a
 * spectrum of its own (FRAME_SPECTRA, nb_spectra.h) each of those at every
 * channel's wavelength over the spectrum's mean (malloc'ed,
 * *n of them, the caller frees); NULL and 0 when the frame's sources are
 * the plan's. */
nb_status nb_plan_frame_sources(const nb_plan *series, long frame, nb_source **sources, int *n);

/* Uniform deviate in (0, 1) of the counter-based generator: a hash of
 * (seed, frame, stream, k).  Exposed for the unit tests. */
double nb_still_uniform(int64_t seed, long frame, unsigned stream, unsigned k);

/* The stills' settings as PLAN keys (STILLS, STILLS_BANDWIDTH, STILLS_SPIKES,
 * STILLS_N, STILLS_FLUENCE), and back: absent STILLS is a rotation series. */
void nb_stills_to_record(const nb_stills *s, nb_record *rec);
nb_status nb_stills_from_record(const nb_record *rec, nb_stills *s);
/* The settings' sanity (ranges ordered and positive, spikes within bounds):
 * on failure the status `code`, the message prefixed by `who` ("PLAN
 * record", "-stills"). */
nb_status nb_stills_check(const nb_stills *s, nb_status code, const char *who);

#endif
