/* nb_fit_reduce.c - the fit's processes as its caller gives them
 * (nb_fit_reduce.h): a single process, and which frames are whose. */
#include "nb_fit_reduce.h"

const nb_fit_reduction nb_fit_single_process = {.rank = 0, .size = 1};

int nb_fit_owns(const nb_fit_reduction *red, long frame, long nframes)
{
    const long long size = red->size > 0 ? red->size : 1, rank = red->rank;
    if (frame < 0 || frame >= nframes) return 0;
    return frame >= rank * nframes / size && frame < (rank + 1) * nframes / size;
}
