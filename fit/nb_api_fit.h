/* nb_api_fit.h - what nb.h's two fits share (fit/nb_api_fit.c,
 * fit/nb_api_dataset.c): the caller's arrays as observed frames, the
 * caller's sum as the fit's reduction.  Not installed. */
#ifndef NB_API_FIT_H
#define NB_API_FIT_H

#include <stddef.h>

#include "nb.h"
#include "nb_fit_plan.h"

/* A frame's pixels as photons, and which count (nb.h's rule for
 * nb_fit_image); ob's arrays allocated (free() them). */
nb_status nb_api_observed_from(const nb_fit_image *im, long frame, size_t n, nb_fit_observed *ob);

/* A caller's settings (a struct whose first field is its size_t size) over
 * the defaults in dst (dst_size bytes): the fields its size holds; dst's
 * size then dst_size.  A size below size_t's or above dst_size: usage. */
nb_status nb_api_sized(const char *who, void *dst, size_t dst_size, const void *given);

/* The fields both fits' settings have, checked (who: the call, for the message) */
nb_status nb_api_fit_common(const char *who, nb_fit_loss_choice loss, int iterations, int rank, int processes,
                            nb_fit_sum_fn sum);

/* The caller's sum as the fit's reduction (ctx: an nb_api_sum); processes
 * agree by summing their failures. */
typedef struct nb_api_sum {
    nb_fit_sum_fn sum;
    void *ctx;
} nb_api_sum;
nb_status nb_api_sum_values(void *ctx, double *buf, size_t n);
nb_status nb_api_agree(void *ctx, nb_status st);

#endif
