/* nb_spectra.h - a shot's own spectrum (an nb extension; docs/physics.md
 * 16.4): per-frame spectra of weighted channels (PLAN key FRAME_SPECTRA),
 * read from diffBragg's two-column .lam files (nb-geom -expt -expt_spectra
 * LIST), written back beside an experiment list (nb-convert -o X.expt), and
 * how a frame renders with its spectrum.
 *
 * A frame's spectrum is a set of channels (wavelength, weight), wavelengths
 * in metres, weights >= 0 and not all 0.  It belongs with frame crystals
 * (FRAME_CRYSTALS): the frame crystal's wavelength is the frame's, the
 * spectrum scaled as a whole by that wavelength over the spectrum's weighted
 * mean (nb-geom -expt_spectra sets the two equal; nb-fit --refine-frame
 * lambda moves the frame crystal's).  nb-sim weighs every source alike (as
 * nanoBragg does), so channels of unequal weight are rendered as the same
 * number of channels of equal weight at the quantiles of the weights
 * (nb_spectrum_channels); equal weights render as they are. */
#ifndef NB_SPECTRA_H
#define NB_SPECTRA_H

#include "nb_error.h"
#include "nb_plan.h"
#include "nb_stream.h"
#include "nb_util.h"

/* channels a frame's spectrum may hold: as many as a still's spikes
 * (NB_STILLS_MAX_SPIKES); render time grows in proportion (docs/physics.md 16.4) */
#define NB_SPECTRUM_MAX_CHANNELS 1000

/* The plan's spectra: counts[f] channels for frame f (1 .. the cap), pairs
 * (wavelength m, weight) frame after frame, copied into p (replacing any).
 * The plan must have frame crystals (each frame's wavelength). */
nb_status nb_plan_set_frame_spectra(nb_plan *p, const int *counts, const double *pairs);
/* Frame `frame`'s stored spectrum: its channel count (0: none) and *pairs
 * pointing into the plan. */
int nb_plan_frame_spectrum(const nb_plan *p, long frame, const double **pairs);
/* Frame `frame`'s spectrum whatever made it: stored (FRAME_SPECTRA, scaled to
 * the frame crystal's wavelength), or a still's spikes (LAMBDA0 (1 + d_k),
 * weight 1); malloc'ed pairs, *n of them; NULL and 0 when the frame has the
 * plan's sources. */
nb_status nb_plan_frame_spectrum_pairs(const nb_plan *p, long frame, double **pairs, int *n);
/* The weights' mean wavelength of n channels. */
double nb_spectrum_mean(const double *pairs, int n);
/* n channels' sanity: 1 .. the cap, wavelengths positive and finite,
 * weights >= 0 and finite, not all 0 (the message names `who`). */
nb_status nb_spectrum_check(const double *pairs, int n, const char *who);
/* The wavelengths a frame renders (lambda[], at most n, *count of them;
 * relative to the spectrum's weighted mean): one per channel of some weight,
 * equal weights as they are, else at the quantiles (j + 1/2)/count of the
 * weights' cumulative sum taken through each channel's middle and
 * interpolated between channels. */
nb_status nb_spectrum_channels(const double *pairs, int n, double *lambda, int *count);
/* FRAME_SPECTRA as PLAN keys and back (nb_plan.c calls them): the key
 * FRAME_SPECTRA (NFRAMES), the arrays frame_spectra_n (u32, channels per
 * frame) and frame_spectra (f64 pairs); absent: none. */
nb_status nb_frame_spectra_to_record(const nb_plan *p, nb_record *rec);
nb_status nb_frame_spectra_from_record(const nb_record *rec, nb_plan *p);
/* A .lam file (diffBragg's, "precognition"): a header line, then a channel a
 * line, wavelength in Angstrom and weight, comma or blank separated; lines
 * empty or opening with '#' are skipped.  Malloc'ed pairs in metres. */
nb_status nb_spectrum_read_lam(const char *path, double **pairs, int *n);
/* The text of a .lam file of n channels (as diffBragg's save_spectra_file
 * writes one: "# wavelengths, weights", Angstrom, comma separated), into sb. */
void nb_spectrum_lam_text(const double *pairs, int n, nb_strbuf *sb);
/* nb-geom -expt_spectra LIST: a .lam file per experiment, a line each in
 * the list's order (one path, or diffBragg's "expt refl spec" lines whose
 * third path is taken), relative paths from LIST's directory; each frame
 * crystal's wavelength set to its spectrum's mean. */
nb_status nb_plan_take_expt_spectra(const char *list, nb_plan *plan);

#endif
