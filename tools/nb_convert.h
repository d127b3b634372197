/* nb_convert.h - the parts of nb-convert (tools/nb-convert.c: its command
 * line and the stream's loop; nb_convert_write.c: a frame to its outputs and
 * the held files; nb_convert_rows.c: raw float and SMV files a band of rows
 * at a time, as the image arrives or on the frame pool's workers;
 * nb_convert_run.c: the files of the whole run and the join of shards';
 * nb_convert_import.c: --import).  What a file holds is formats/'s
 * (frame_write.h, registry.h); which frame goes to which file is here. */
#ifndef NB_CONVERT_H
#define NB_CONVERT_H

#include <stddef.h>
#include <stdint.h>

#include "frame_write.h"
#include "nb_cli.h"
#include "nb_pool.h"
#include "nb_stream.h"
#include "nb_util.h"
#include "registry.h"
#include "smv.h"

/* where an output's pixels come from */
enum source { SRC_AUTO, SRC_INT, SRC_COUNTS, SRC_PHOTONS };

typedef struct out_request {
    const char *path;
    const nb_format *format;  /* the registry's entry: what is written, and how */
    int source;               /* enum source */
    int smv_beam;
    int from_plan;
    int done; /* a sidecar already written */
} out_request;

typedef struct conv_opts {
    out_request *outs;
    int nouts;
    double scale, adc, pgmscale;
    int have_scale, have_adc, have_pgmscale, nopgm;
    int smv_beam;
    int photons;            /* --photons: PNG previews and NXmx data of the photons, not the counts */
    int compression;        /* --compression: of NXmx data (enum nb_nxmx_compression) */
    const char **joins;     /* --join: shards' NXmx files and model.expt files to join into the -o files */
    int *join_nxmx;         /* per part: given with --nxmx-join (an NXmx file, whatever its name) */
    int njoins;
    void **runs;            /* per -o of a run file (NXmx, model.expt, truth.jsonl): its writer's file, open
                               from the first frame to the end of the stream (NULL: none yet) */
    const char *import;
    const char *tee;        /* -o FILE.nbs: a copy of the stream */
    const char *grad;       /* --grad NAME: write that derivative (nb-sim --grad), not the images */
    const nb_format *pending_format; /* --format's, for the next -o; NULL: none */
    double truth_min_photons; /* --truth-min-photons: a reflection in truth.jsonl has more */
    long frame_first, frame_last; /* --frames A:B (1-based): a plan without images described by these alone */
} conv_opts;

/* an IMAGE record made ready to write (formats/frame_write.h) */
typedef nb_frame frame;

/* ---- the command line (nb-convert.c) ------------------------------------- */
/* A format by a file's suffix, or a --format name after its last dot; NULL when unknown */
const nb_format *format_from_path(const char *path);

/* ---- raw float and SMV files, a band of rows at a time (nb_convert_rows.c) */
/* ---- row files: raw float and SMV images, a band of rows at a time -------- */
/* Raw float files and SMV images need nothing but the image's rows in order,
 * and one path writes them: pieces of whole rows, each shown once (the
 * SMV's 16-bit values of scaled photons made in a prepare step, on the
 * thread that reads the stream when there is a second one), then committed.
 * The pieces are those of the IMAGE record's payload as it arrives (the
 * stream reader's consumer, below), so that writing overlaps the transfer
 * instead of following it; or, for the files that could not start then (an
 * SMV of the counts, which follow the pixels in the payload; an image
 * without MAX_I, whose scale needs every pixel), the same pieces cut from the
 * whole image afterwards.  The files are the held temporaries of
 * claim_output: a record that then fails its CRC, or a pixel that is not
 * finite, removes them with the rest. */
enum { ROWS_MAX = 16 };
enum row_kind { ROW_FLOAT, ROW_SMV_SCALED, ROW_SMV_COUNTS };

typedef struct row_out {
    int req;               /* index in the request list */
    int kind;              /* enum row_kind */
    nb_outfile *bin;       /* ROW_FLOAT */
    nb_smv_writer *smv;    /* the SMV kinds */
} row_out;

typedef struct row_files {
    int width, height, rows_done;
    long frame;            /* the image's, for messages */
    uint64_t pix_off;      /* the pixels' offset in the pieces' payload */
    nb_roi roi;
    double int_scale, adc; /* of ROW_SMV_SCALED */
    const int32_t *counts; /* of ROW_SMV_COUNTS: the whole image's */
    int scaled;            /* a ROW_SMV_SCALED output is among them */
    /* per slot (nb_payload_piece.slot): the piece's 16-bit values, its first
     * pixel that is not finite (its pixel count when none, SIZE_MAX when not
     * converted), the errno of a failed SMV write and the output it failed on */
    uint16_t *slot_block;  /* the slots' values, one block */
    uint16_t *slot_ints[NB_READER_SLOTS];
    size_t slot_cap;       /* values each holds */
    size_t slot_bad[NB_READER_SLOTS];
    int slot_werr[NB_READER_SLOTS], slot_wout[NB_READER_SLOTS];
    int prepare_failed;    /* a prepared piece failed: no more SMV writes */
    row_out outs[ROWS_MAX];
    int nouts;
} row_files;

/* A series' frames written side by side by workers */
typedef struct frame_pool {
    nb_pool pool;           /* its workers: none when none (every frame written on the main thread) */
    nb_reader *reader;      /* the stream's, which takes the payload buffers back */
} frame_pool;

/* The stream reader's consumer: an IMAGE record's row files written as it comes */
typedef struct live_image {
    const conv_opts *o;
    const nb_plan *plan;   /* the current plan; NULL before the first */
    int live;              /* the current IMAGE record's row files are written as it comes */
    int dropped;           /* ... and its payload is not kept */
    int pooled;            /* ... or it is kept, for the frame pool to write (pool_takes) */
    row_files rows;
} live_image;

void rows_abort(row_files *R);
void rows_free(row_files *R);
nb_status rows_finish(row_files *R, int k, int *was_row_file);
nb_status rows_write_whole(const out_request *q, int k, const frame *fr);
void pool_start(frame_pool *P, nb_reader *r, size_t bytes);
nb_status pool_drain(frame_pool *P);
nb_status pool_image(frame_pool *P, nb_record *rec, const nb_plan *plan, const conv_opts *o);
nb_status live_begin(void *ctx, const nb_record *rec, nb_payload_how *how);
nb_status live_piece(void *ctx, const nb_payload_piece *pc);
int wanted(const nb_image_info *im, const conv_opts *o);

/* ---- a frame to its outputs; the held files (nb_convert_write.c) --------- */
nb_status frame_path(const char *tmpl, long frame, char *out, size_t size);
nb_status claim_output(const char *final, unsigned long long bytes, char **target);
void abort_pending(void);
nb_status commit_pending(void);
double int_scale_for(const nb_plan *plan, const conv_opts *o, double max_I);
double adc_for(const nb_plan *plan, const conv_opts *o);
nb_status takes_counts(const out_request *o, const frame *fr, int *use_counts);
nb_status write_file(const out_request *q, int k, const frame *fr);
nb_status nonfinite_error(const nb_plan *plan, long frame, size_t bad, size_t width);
nb_status prepare_frame(const nb_plan *plan, const nb_record *rec, const nb_image_info *im, const conv_opts *o,
                        int checked_finite, frame *fr);
/* The reference's output file of flag (FL_FLOATFILE ...) at path as a request */
out_request reference_request(int flag, const char *path, int from_plan);
out_request *frame_requests(const nb_plan *plan, const conv_opts *o, out_request req[8], int *n);
nb_status convert_image(const nb_record *rec, const nb_plan *plan, const conv_opts *o, live_image *live,
                        int *converted);

/* ---- the files of the whole run, shards' joined (nb_convert_run.c) ------- */
/* Frame fr into request q's (number k) run file, opened by the run's first frame */
nb_status write_run(const out_request *q, int k, const conv_opts *o, const frame *fr);
/* Every run file of images (NXmx), or every other (model.expt, truth.jsonl),
 * committed (ok) or removed */
enum run_files { RUNS_OF_IMAGES, RUNS_DESCRIBING };
nb_status finish_runs(conv_opts *o, enum run_files which, int ok);
/* Every -o a run file a plan alone can fill (model.expt), and no --grad, --import? */
int only_plan_files(const conv_opts *o);
/* A plan without IMAGE records into every such file: each of its frames
 * (--frames'), with the int image's counts (the -adc offset, 16 bits) */
nb_status write_plan_files(const conv_opts *o, const nb_plan *plan);
nb_status write_sidecar(out_request *o, const conv_opts *all, const frame *fr);
nb_status join_parts(const conv_opts *o, const nb_std_opts *std);

/* ---- --import (nb_convert_import.c) -------------------------------------- */
nb_status import_stream(nb_reader *r, const conv_opts *o);

#endif
