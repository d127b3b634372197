/* nb_convert_rows.c - nb-convert's raw float and SMV files, written a band
 * of rows at a time by one path: from the IMAGE record's payload as it
 * arrives (the stream reader's consumer), on the frame pool's workers (a
 * series' frames side by side), or cut from a whole frame afterwards. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#else
static int omp_get_max_threads(void) { return 1; }
#endif

#include "nb_image.h"
#include "nb_image_record.h"
#include "nb_tuning.h"
#include "rawfloat.h"
#include "frame_write.h"
#include "nb_convert.h"

/* Start the rows of an image (width x height, its pixels at pix_off) */
static void rows_start(row_files *R, const frame *fr, uint64_t pix_off, double int_scale, double adc)
{
    const nb_plan *p = fr->plan;
    R->width = fr->width, R->height = fr->height, R->rows_done = 0;
    R->frame = fr->frame;
    R->pix_off = pix_off;
    R->roi = (nb_roi){p->panels[0].roi_xmin, p->panels[0].roi_xmax, p->panels[0].roi_ymin, p->panels[0].roi_ymax};
    R->int_scale = int_scale, R->adc = adc;
    R->counts = fr->counts;
    R->scaled = R->prepare_failed = 0;
    R->nouts = 0;
}

void rows_abort(row_files *R)
{
    for (int i = 0; i < R->nouts; i++) {
        if (R->outs[i].bin) nb_outfile_abort(R->outs[i].bin);
        if (R->outs[i].smv) nb_smv_writer_abort(R->outs[i].smv);
    }
    R->nouts = 0;
}

void rows_free(row_files *R)
{
    rows_abort(R);
    free(R->slot_block);
    R->slot_block = NULL, R->slot_cap = 0;
}

/* Open request q (number k) for this frame as a row file of the given kind */
static nb_status rows_open(row_files *R, const out_request *q, int k, const frame *fr, int kind)
{
    char final[NB_PATH_MAX], *target = NULL;
    if (R->nouts == ROWS_MAX) return nb_error_set(NB_ERR_USAGE, "more than %d raw float and SMV outputs", ROWS_MAX);
    row_out *ro = &R->outs[R->nouts];
    memset(ro, 0, sizeof *ro);
    ro->req = k, ro->kind = kind;
    /* the bytes it will hold at least: an SMV header is 512 or more */
    const int bits = kind == ROW_FLOAT ? 32 : kind == ROW_SMV_SCALED ? 16 : fr->counts_bits;
    const unsigned long long pixels = (unsigned long long)fr->width * (unsigned long long)fr->height;
    const unsigned long long bytes = (kind == ROW_FLOAT ? 0 : 512) + pixels * (unsigned)(bits / 8);
    nb_status st = frame_path(q->path, fr->frame, final, sizeof final);
    if (!st) st = claim_output(final, bytes, &target);
    if (st) return st;
    nb_info("writing %s", final);
    if (kind == ROW_FLOAT) {
        nb_info("  %s, photons", q->format->name);
        st = nb_rawfloat_writer_open(&ro->bin, target);
    } else {
        if (kind == ROW_SMV_SCALED) nb_info("intfile_scale = %g", R->int_scale);
        nb_info("  %s, %s", q->format->name,
                kind == ROW_SMV_SCALED ? "scaled photons" : "detector counts");
        nb_smv_meta m;
        nb_frame_smv_meta(fr, q->smv_beam, kind == ROW_SMV_SCALED ? R->adc : fr->counts_adc, &m);
        st = nb_smv_writer_open(&ro->smv, target, &m, kind == ROW_SMV_SCALED ? 16 : fr->counts_bits);
    }
    free(target);
    if (st) return st;
    R->nouts++;
    R->scaled |= kind == ROW_SMV_SCALED;
    return NB_OK;
}

/* The slots' buffers, for pieces of up to piece_bytes */
static nb_status rows_slots(row_files *R, size_t piece_bytes)
{
    size_t cap = piece_bytes / sizeof(float);
    if (R->slot_cap >= cap) return NB_OK;
    free(R->slot_block);
    R->slot_block = NULL, R->slot_cap = 0;
    nb_status st = nb_alloc_large((void **)&R->slot_block, NB_READER_SLOTS * cap, sizeof(uint16_t), "int rows");
    if (st) return st;
    /* faulted in at once: 512 separate page faults cost the reading thread ~5 ms */
    nb_prefault(R->slot_block, NB_READER_SLOTS * cap * sizeof(uint16_t));
    for (int k = 0; k < NB_READER_SLOTS; k++) R->slot_ints[k] = R->slot_block + (size_t)k * cap;
    R->slot_cap = cap;
    return NB_OK;
}

/* The image rows in a piece: 0 when it holds none (bytes before or after
 * the pixels), -1 when it does not start on a row, else 1 with the first
 * row and the count. */
static int piece_rows(const row_files *R, const nb_payload_piece *pc, int *y0_out, int *ny_out)
{
    const size_t row = (size_t)R->width * sizeof(float);
    if (pc->offset < R->pix_off) return 0;
    uint64_t y0 = (pc->offset - R->pix_off) / row, ny = pc->len / row;
    if (y0 >= (uint64_t)R->height) return 0;
    if ((pc->offset - R->pix_off) % row) return -1;
    if (ny > (uint64_t)R->height - y0) ny = (uint64_t)R->height - y0;
    *y0_out = (int)y0, *ny_out = (int)ny;
    return 1;
}

/* The prepare step: a piece's 16-bit values of scaled photons (and the
 * finite check), written to the scaled SMV files; on the reading thread
 * when there is a second one, beside rows_piece on an earlier piece, so
 * errors are left in the slot for rows_piece to report. */
static void rows_prepare(row_files *R, const nb_payload_piece *pc)
{
    int y0, ny;
    const int slot = pc->slot;
    R->slot_bad[slot] = SIZE_MAX;
    R->slot_werr[slot] = 0;
    if (!R->scaled || piece_rows(R, pc, &y0, &ny) != 1 || (size_t)ny * (size_t)R->width > R->slot_cap) return;
    const size_t n = (size_t)ny * (size_t)R->width;
    R->slot_bad[slot] = nb_int16_image_rows_checked((const float *)(const void *)pc->data, R->width, y0, ny, R->roi,
                                                    R->int_scale, R->adc, R->slot_ints[slot]);
    if (R->slot_bad[slot] < n || R->prepare_failed) return;
    for (int i = 0; i < R->nouts && !R->slot_werr[slot]; i++)
        if (R->outs[i].kind == ROW_SMV_SCALED) {
            R->slot_werr[slot] = nb_smv_writer_put_u16_errno(R->outs[i].smv, R->slot_ints[slot], n);
            R->slot_wout[slot] = i;
        }
    R->prepare_failed = R->slot_werr[slot] != 0;
}

/* A piece after its prepare step: its rows checked (finite, in order), then
 * into the raw float files and, from the counts, the SMV files of counts. */
static nb_status rows_piece(row_files *R, const nb_payload_piece *pc)
{
    int y0, ny;
    int has = piece_rows(R, pc, &y0, &ny);
    if (has == 0) return NB_OK;
    if (has < 0 || y0 != R->rows_done)
        return nb_error_set(NB_ERR_DATA, "internal error: a piece of the image out of step (row %d, expected %d)",
                            has < 0 ? -1 : y0, R->rows_done);
    const float *rows = (const float *)(const void *)pc->data;
    const size_t w = (size_t)R->width, n = (size_t)ny * w;
    size_t bad = R->scaled ? R->slot_bad[pc->slot] : nb_first_nonfinite(rows, n);
    if (bad == SIZE_MAX)
        return nb_error_set(NB_ERR_DATA, "internal error: rows %d to %d were not converted", y0, y0 + ny - 1);
    if (bad < n) return nonfinite_error(NULL, R->frame, (size_t)y0 * w + bad, w); /* one panel */
    if (R->scaled && R->slot_werr[pc->slot])
        return nb_error_set(NB_ERR_IO, "cannot write '%s': %s", nb_smv_writer_path(R->outs[R->slot_wout[pc->slot]].smv),
                            strerror(R->slot_werr[pc->slot]));
    R->rows_done = y0 + ny;
    nb_status st = NB_OK;
    for (int i = 0; i < R->nouts && !st; i++) {
        if (R->outs[i].kind == ROW_FLOAT) st = nb_rawfloat_writer_put(R->outs[i].bin, rows, n);
        if (R->outs[i].kind == ROW_SMV_COUNTS) st = nb_smv_writer_put(R->outs[i].smv, R->counts + (size_t)y0 * w, n);
    }
    return st;
}

/* A row file complete: closed (renamed with the others when the stream ends) */
static nb_status row_commit(row_out *ro)
{
    nb_status st = ro->bin ? nb_outfile_commit(ro->bin) : nb_smv_writer_close(ro->smv);
    ro->bin = NULL, ro->smv = NULL;
    return st;
}

/* After the whole image: whether request k is a row file here; if so it is
 * committed. */
nb_status rows_finish(row_files *R, int k, int *was_row_file)
{
    *was_row_file = 0;
    for (int i = 0; i < R->nouts; i++) {
        row_out *ro = &R->outs[i];
        if (ro->req != k || (!ro->bin && !ro->smv)) continue;
        *was_row_file = 1;
        return row_commit(ro);
    }
    return NB_OK;
}

/* The rows of an image of the given width in a piece: about 1 MiB of them,
 * one row at least */
static int rows_per_piece(int width)
{
    const size_t row = (size_t)width * sizeof(float), piece = row > ((size_t)1 << 20) ? row : (size_t)1 << 20;
    return (int)(piece / row);
}

/* Every row of fr into R's open files, in the pieces the stream's reader
 * would have shown, each prepared in slot 0 (rows_slots, or a buffer of
 * rows_per_piece rows' values lent to it) */
static nb_status rows_write_all(row_files *R, const frame *fr)
{
    const size_t row = (size_t)fr->width * sizeof(float);
    const int per_piece = rows_per_piece(fr->width);
    nb_status st = NB_OK;
    for (int y0 = 0; y0 < fr->height && !st; y0 += per_piece) {
        int ny = fr->height - y0 < per_piece ? fr->height - y0 : per_piece;
        nb_payload_piece pc = {(const unsigned char *)(fr->photons + (size_t)y0 * fr->width), (uint64_t)y0 * row,
                               (size_t)ny * row, 0};
        rows_prepare(R, &pc);
        st = rows_piece(R, &pc);
    }
    return st;
}

/* Request q (number k, of a format written a band of rows at a time: raw
 * float or SMV) opened for fr as the row file of its kind: the whole
 * frame's (rows_write_whole) and the frame pool's (pool_image) */
static nb_status rows_open_request(row_files *R, const out_request *q, int k, const frame *fr)
{
    int use_counts = 0;
    nb_status st = q->format->rows == NB_ROWS_SMV ? takes_counts(q, fr, &use_counts) : NB_OK;
    const int kind = q->format->rows == NB_ROWS_FLOAT32 ? ROW_FLOAT : use_counts ? ROW_SMV_COUNTS : ROW_SMV_SCALED;
    return st ? st : rows_open(R, q, k, fr, kind);
}

/* Request q (number k) as a row file from the whole image of fr, in the
 * pieces the stream's reader would have shown. */
nb_status rows_write_whole(const out_request *q, int k, const frame *fr)
{
    row_files R;
    memset(&R, 0, sizeof R);
    rows_start(&R, fr, 0, fr->int_scale, fr->adc);
    int was;
    nb_status st = rows_open_request(&R, q, k, fr);
    if (!st && R.scaled) st = rows_slots(&R, (size_t)rows_per_piece(fr->width) * fr->width * sizeof(float));
    if (!st) st = rows_write_all(&R, fr);
    if (!st) st = rows_finish(&R, k, &was);
    rows_free(&R);
    return st;
}

/* ---- a series' frames written side by side --------------------------------- */
/* A series whose frames go to raw float and SMV files only is written
 * several frames at a time: a file is filled by one thread at a time (the
 * kernel takes its pages a writer at a time), but files of different frames
 * fill side by side (100 frames of 1024^2 to tmpfs: 176 ms on one thread, 89
 * on two).  The main thread reads the stream, opens each frame's files (so
 * that the -v lines stay in frame order) and hands the frame over with its
 * record; a worker writes the rows and closes the files, which go into
 * place at the segment's end as before.  A failure is the run's in frame
 * order (nb_pool: workers take the frames in order, so every frame before a
 * failing one is written to its end, and none not yet taken is started). */
#define POOL_MAX_BYTES ((size_t)512 << 20) /* of frames held at once */

typedef struct pool_job {
    nb_pool_job base;       /* the pool's part: first */
    nb_record rec;          /* the IMAGE record, the job's own */
    nb_image_info im;
    frame fr;
    row_files rows;         /* its files, open */
} pool_job;


/* On the main thread: the files still open removed, the record's payload
 * buffer back to the reader */
static void pool_job_release(nb_pool_job *base, void *ctx)
{
    frame_pool *P = ctx;
    pool_job *j = (pool_job *)base;
    rows_free(&j->rows);
    nb_image_info_free(&j->im);
    nb_reader_recycle(P->reader, &j->rec);
    free(j);
}

/* A worker's own: the SMV values of a piece, kept from frame to frame */
typedef struct pool_scratch {
    uint16_t *ints;
    size_t cap;
} pool_scratch;

static void pool_scratch_free(void *p)
{
    pool_scratch *sc = p;
    if (sc) free(sc->ints);
    free(sc);
}

/* On a worker: a job's rows into its files, then the files closed (on a
 * failure, or after an earlier frame's, left for abort_pending to remove) */
static nb_status pool_write(nb_pool_job *base, int skip, void **scratch, void *ctx)
{
    (void)ctx;
    pool_job *j = (pool_job *)base;
    row_files *R = &j->rows;
    if (skip) { /* not written: an earlier frame failed */
        rows_abort(R);
        return NB_OK;
    }
    nb_status st = NB_OK;
    if (!*scratch && !(*scratch = calloc(1, sizeof(pool_scratch))))
        st = nb_error_set(NB_ERR_NOMEM, "out of memory");
    pool_scratch *sc = *scratch;
    const size_t need = (size_t)rows_per_piece(j->fr.width) * (size_t)j->fr.width;
    if (!st && R->scaled && sc->cap < need) {
        free(sc->ints);
        sc->ints = NULL, sc->cap = 0;
        if (!(st = nb_alloc_large((void **)&sc->ints, need, sizeof *sc->ints, "int rows"))) sc->cap = need;
    }
    if (sc) R->slot_ints[0] = sc->ints, R->slot_cap = sc->cap;
    if (!st) st = rows_write_all(R, &j->fr);
    for (int i = 0; i < R->nouts && !st; i++) st = row_commit(&R->outs[i]);
    if (st) rows_abort(R);
    R->slot_ints[0] = NULL, R->slot_cap = 0;
    return st;
}

/* Start the workers: as many as the threads allowed (this one mostly waits
 * for the input: 100 frames of 1024^2 from tmpfs to tmpfs on 2 cores took
 * 127-145 ms with two workers, 170-189 with one, 202-213 written as they
 * came), at most NB_POOL_MAX_WORKERS and as many as frames of `bytes` fit in
 * POOL_MAX_BYTES, one waiting beside each; none when one thread is allowed
 * (or none could be had). */
void pool_start(frame_pool *P, nb_reader *r, size_t bytes)
{
    memset(P, 0, sizeof *P);
    P->reader = r;
    int n = omp_get_max_threads();
    if (n < 2) return;
    n = n > NB_POOL_MAX_WORKERS ? NB_POOL_MAX_WORKERS : n;
    const size_t fit = bytes ? POOL_MAX_BYTES / bytes : POOL_MAX_BYTES;
    if ((size_t)n + 1 > fit) n = fit > 1 ? (int)fit - 1 : 1;
    const nb_pool_ops ops = {pool_write, pool_job_release, pool_scratch_free, NULL, P};
    if (nb_pool_start(&P->pool, n, n + 1, &ops)) nb_info("writing the frames %d at a time", P->pool.workers);
}

/* Every frame handed over written: the first failure in frame order */
nb_status pool_drain(frame_pool *P) { return nb_pool_collect(&P->pool, 1); }

/* Whether an IMAGE record of plan p (wanted, matching the plan, one panel)
 * goes to the pool: a frame of a series whose outputs are all
 * raw float and SMV files, with a thread to spare */
static int pool_takes(const nb_plan *p, const conv_opts *o)
{
    if (p->nframes < 2 || o->tee || omp_get_max_threads() < 2) return 0;
    out_request req[8];
    int n;
    const out_request *list = frame_requests(p, o, req, &n);
    for (int k = 0; k < n; k++)
        if (list[k].format->rows == NB_ROWS_NONE) return 0;
    return n > 0 && n <= ROWS_MAX;
}

/* The IMAGE record *rec (its payload kept; taken from the caller) as a job:
 * its frame and files made ready here, written by a worker. */
nb_status pool_image(frame_pool *P, nb_record *rec, const nb_plan *plan, const conv_opts *o)
{
    pool_job *j = calloc(1, sizeof *j);
    if (!j) return nb_error_set(NB_ERR_NOMEM, "out of memory");
    j->rec = *rec;
    memset(rec, 0, sizeof *rec);
    out_request req[8];
    int n;
    const out_request *list = frame_requests(plan, o, req, &n);
    /* every pixel is checked for a finite value by the worker, a piece at a time */
    nb_status st = nb_image_from_record(&j->rec, &j->im);
    if (!st) st = prepare_frame(plan, &j->rec, &j->im, o, 1, &j->fr);
    if (!st) rows_start(&j->rows, &j->fr, 0, j->fr.int_scale, j->fr.adc);
    for (int k = 0; k < n && !st; k++) st = rows_open_request(&j->rows, &list[k], k, &j->fr);
    if (st) {
        pool_job_release(&j->base, P);
        nb_status earlier = pool_drain(P); /* a frame before this one failed first */
        return earlier ? earlier : st;
    }
    return nb_pool_submit(&P->pool, &j->base);
}

/* ---- writing while the image arrives -------------------------------------- */
/* The stream reader's consumer: at an IMAGE record's header, the row files
 * that can be written from its pieces are opened, and its payload is shown
 * piece by piece; when they are all its outputs (and no copy of the stream
 * is wanted) the payload is not kept at all: a few MiB of memory instead of
 * the image, and the 64 MiB of a 4096^2 image never allocated (fresh pages
 * are zeroed by the kernel as they are first touched, a quarter of this
 * tool's CPU time). */

static void live_prepare(void *ctx, const nb_payload_piece *pc) { rows_prepare(&((live_image *)ctx)->rows, pc); }

nb_status live_piece(void *ctx, const nb_payload_piece *pc)
{
    live_image *L = ctx;
    return L->live ? rows_piece(&L->rows, pc) : NB_OK;
}

/* Which requests can be written live, and open them, for the IMAGE record
 * whose keys are im (its payload not there yet); how the reader shows it */
static nb_status live_open(live_image *L, const nb_image_info *im, nb_payload_how *how)
{
    const nb_plan *p = L->plan;
    const conv_opts *o = L->o;
    int have_max = im->has.max_I && im->has.rmsd;
    out_request req[8];
    int nreq;
    const out_request *list = frame_requests(p, o, req, &nreq);
    frame fr;
    memset(&fr, 0, sizeof fr);
    fr.plan = p, fr.im = im, fr.width = (int)im->fpixels, fr.height = (int)im->spixels, fr.frame = im->frame;
    rows_start(&L->rows, &fr, im->pixels_offset, have_max ? int_scale_for(p, o, im->max_I) : 0.0, adc_for(p, o));
    nb_status st = NB_OK;
    for (int k = 0; k < nreq && !st && L->rows.nouts < ROWS_MAX; k++) {
        const out_request *q = &list[k];
        int smv = q->format->rows == NB_ROWS_SMV && have_max &&
                  (q->source == SRC_INT || (q->source == SRC_AUTO && !im->has_counts));
        if (q->format->rows == NB_ROWS_FLOAT32 || smv)
            st = rows_open(&L->rows, q, k, &fr, smv ? ROW_SMV_SCALED : ROW_FLOAT);
    }
    if (st || !L->rows.nouts) return st;
    L->live = 1;
    L->dropped = L->rows.nouts == nreq && !o->tee;
    how->use = L->dropped ? NB_PAYLOAD_SHOW_ONLY : NB_PAYLOAD_KEEP_AND_SHOW;
    how->first = im->pixels_offset;
    how->unit = (size_t)im->fpixels * sizeof(float);
    /* the int image made and written where the pieces are read: reading,
     * checksum, conversion and the SMV files on one thread, the raw floats
     * on the other (writing a file into the page cache costs the kernel more
     * than the rest, and one file is written by one thread at a time) */
    if (L->rows.scaled) {
        st = rows_slots(&L->rows, how->unit > how->piece_size ? how->unit : how->piece_size);
        how->prepare = live_prepare;
    }
    return st;
}

/* Is the IMAGE record (its keys im) one this run writes: an image, or with
 * --grad NAME the derivative of that name? */
int wanted(const nb_image_info *im, const conv_opts *o)
{
    if (!o->grad) return !nb_image_is_grad(im);
    return nb_image_is_grad(im) && !strcmp(im->grad_of, o->grad);
}

/* The consumer's begin: an IMAGE record's files written as it comes, when its
 * keys are sound and match the plan (else the usual path, after the whole
 * record, says what is wrong). */
nb_status live_begin(void *ctx, const nb_record *rec, nb_payload_how *how)
{
    live_image *L = ctx;
    nb_image_info im;
    rows_abort(&L->rows);
    L->live = L->dropped = L->pooled = 0;
    /* several panels: written when the record is complete, panel by panel */
    if (!L->plan || nb_plan_npanels(L->plan) > 1 || !nb_record_is(rec, "IMAGE") || nb_image_from_record(rec, &im))
        return NB_OK;
    nb_status st = NB_OK;
    if (!nb_image_check_plan(&im, L->plan) && wanted(&im, L->o)) {
        if (pool_takes(L->plan, L->o)) L->pooled = 1;
        else st = live_open(L, &im, how);
    }
    nb_image_info_free(&im);
    return st;
}
