/* nb_math.h - nb-math's operands: the other streams whose images are added
 * to the main stream's, found frame by frame, and the checks that they are
 * images of the same detector (tools/nb_math_operand.c). */
#ifndef NB_MATH_H
#define NB_MATH_H

#include "nb_image_record.h"
#include "nb_plan.h"
#include "nb_stream.h"

/* One IMAGE record of an operand, read and not yet used. */
typedef struct math_image {
    nb_record rec;
    nb_image_info im;
    int plan; /* its plan: an index into the operand's plans */
} math_image;

/* An operand stream: its path as given, the factor its photons are added
 * with, and what has been read of it. */
typedef struct math_operand {
    const char *path;
    const char *flag;   /* the option that named it (--add, --sub, --add-scaled), for MATH */
    const char *factor; /* --add-scaled's factor as given, else NULL */
    double weight;      /* +1, -1 or --add-scaled's factor */
    nb_reader *r;
    int eof;
    nb_plan *plans; /* every PLAN read, in order */
    int nplans;
    math_image *held; /* images read and not yet used (a one-frame operand's: kept) */
    int nheld, capheld;
    long images;   /* images of photons read (derivatives not counted) */
    int one_frame; /* -1: not known yet; 1: one frame serves every frame; 0: a series */
} math_operand;

/* Open the operand's stream ("cannot open 'x.nbs': ..."). */
nb_status math_operand_open(math_operand *op);
/* Close it and free what was read. */
void math_operand_close(math_operand *op);

/* The operand's image for the main stream's frame `frame` (0-based) and
 * derivative `grad_of` ("" for the photons): of a one-frame operand, its one
 * frame; of a series, the record with that FRAME, read on until it comes.
 * *plan is its plan.  Fails naming the operand when there is none. */
nb_status math_operand_find(math_operand *op, long frame, const char *grad_of, const math_image **img,
                            const nb_plan **plan);
/* Done with the image math_operand_find gave: a series' frame is freed, a
 * one-frame operand's is kept for the next frame. */
void math_operand_release(math_operand *op, const math_image *img);

/* Refuse an image of another detector than the main stream's: the panels'
 * count, their pixel counts, then every field of the panel table
 * (NB_PANEL_FIELDS) but the ROI, in the plans.  `name` is the operand's. */
nb_status math_same_detector(const char *name, const nb_image_info *im, const nb_plan *plan,
                             const nb_image_info *main_im, const nb_plan *main_plan);

#endif
