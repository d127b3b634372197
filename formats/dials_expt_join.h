/* dials_expt_join.h - the model.expt files of shards joined into the whole
 * run's (nb-convert --join part1.expt --join part2.expt -o model.expt), as
 * their NXmx files join into a master.
 *
 * The parts are experiment lists nb-convert wrote (dials_expt_write.h) from
 * one plan: one detector each, the same in all.  Stills' experiments are
 * put in frame order (their "nb_frame", the frame's number nb-convert writes
 * beside the identifier), each keeping its identifier, beam, crystal and
 * image; a frame in two parts is an error.  A rotation series'
 * parts (one experiment each, with a scan) must follow one another without
 * a gap or an overlap and share the beam, goniometer, crystal and
 * oscillation: they become one experiment whose scan covers them all, the
 * first part's identifier its own.
 *
 * Images: a part's images stay as they are (a '#' template of CBF or SMV
 * files, or a still's file), unless `master` names the NXmx master joined
 * in the same command from `nxmx_parts`: every image that is one of those
 * parts is then named by the master and the frame's index in it (the
 * master holds the parts' frames in frame order).  A rotation series whose
 * parts name different NXmx files needs the master: no one image sequence
 * spans several files. */
#ifndef NB_FORMAT_DIALS_EXPT_JOIN_H
#define NB_FORMAT_DIALS_EXPT_JOIN_H

#include "nb_error.h"

nb_status nb_expt_join(const char *path, const char *const *parts, int nparts, const char *master,
                       const char *const *nxmx_parts, int n_nxmx_parts);

#endif
