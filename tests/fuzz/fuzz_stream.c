/* libFuzzer target: the nb stream reader, and the PLAN, HKL and IMAGE records
 * it hands on (nb_plan_from_record, nb_hkl_from_record, nb_image_from_record,
 * the IMAGE header also before its payload has come); an ABORT record ends
 * the reading with an exit status a process can have. */
#include "fuzz_common.h"
#include "nb_hkl.h"
#include "nb_image_record.h"
#include "nb_plan.h"
#include "nb_stream.h"

/* A second reading in which every payload goes to a consumer (the stream
 * reader's nb_payload_consumer) and is not kept: its pieces are looked at by
 * a prepare step and by piece(), cut where the pixels array of a sound IMAGE
 * header starts, in units of 12 bytes. */
typedef struct drop_ctx {
    unsigned sum;
} drop_ctx;

static void look_at_piece(void *ctx, const nb_payload_piece *pc)
{
    drop_ctx *d = ctx;
    if (pc->len) d->sum += pc->data[pc->len / 2] + (unsigned)pc->slot + (unsigned)pc->offset;
}

static nb_status drop_begin(void *ctx, const nb_record *rec, nb_payload_how *how)
{
    (void)ctx;
    uint64_t first = 0;
    nb_image_info im;
    if (nb_record_is(rec, "IMAGE") && !nb_image_from_record(rec, &im)) {
        first = im.pixels_offset;
        nb_image_info_free(&im);
    }
    how->use = NB_PAYLOAD_SHOW_ONLY, how->first = first, how->unit = 12, how->prepare = look_at_piece;
    return NB_OK;
}

static nb_status drop_piece(void *ctx, const nb_payload_piece *pc)
{
    drop_ctx *d = ctx;
    if (pc->len) d->sum += pc->data[0] + pc->data[pc->len - 1] + (unsigned)pc->offset;
    return NB_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    nb_set_verbosity(-2);
    nb_reader *r;
    drop_ctx d = {0};
    if (!nb_reader_open_mem(&r, data, size, "fuzz")) {
        nb_record got;
        memset(&got, 0, sizeof got);
        nb_payload_consumer c = {drop_begin, drop_piece, &d};
        nb_reader_set_consumer(r, &c);
        for (int n = 0; n < 64; n++) {
            int eof = 0;
            if (nb_reader_next(r, &got, &eof) || eof) break;
        }
        nb_record_free(&got);
        nb_reader_close(r);
    }
    if (nb_reader_open_mem(&r, data, size, "fuzz")) return 0;
    nb_record rec;
    memset(&rec, 0, sizeof rec);
    for (int n = 0; n < 64; n++) {
        int eof = 0;
        nb_status st = nb_reader_next(r, &rec, &eof);
        /* what main() would exit with, and the tool it would hand on */
        if (st == NB_ERR_UPSTREAM) {
            int code = nb_exit_code(st);
            const char *tool = nb_upstream_tool();
            if (code < 1 || code > 255 || !tool[0] || strlen(tool) > 63 || strchr(tool, '\n')) abort();
        }
        if (st || eof) break;
        if (nb_record_is(&rec, "PLAN")) {
            nb_plan p;
            if (!nb_plan_from_record(&rec, &p)) nb_plan_free(&p);
        } else if (nb_record_is(&rec, "HKL")) {
            nb_hkl h;
            nb_hkl_init(&h);
            if (!nb_hkl_from_record(&rec, &h)) nb_hkl_free(&h);
        } else if (nb_record_is(&rec, "IMAGE")) {
            nb_image_info im;
            if (!nb_image_from_record(&rec, &im)) {
                /* what a parsed record promises: its arrays are there, and it writes back */
                const float *px;
                const int32_t *counts;
                if (nb_image_pixels(&rec, &im, &px, NULL)) abort();
                if (im.has_counts && nb_image_counts(&rec, &im, &counts, NULL)) abort();
                nb_record out;
                nb_image_record_init(&out);
                if (nb_image_put_header(&im, &out, NB_IMAGE_ALL_KEYS)) abort();
                nb_record_free(&out);
                nb_image_info_free(&im);
            }
        }
    }
    nb_record_free(&rec);
    nb_reader_close(r);
    return 0;
}
