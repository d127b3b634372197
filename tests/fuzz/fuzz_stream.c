/* libFuzzer target: the nb stream reader, and the PLAN and HKL records it
 * hands on (nb_plan_from_record, nb_hkl_from_record). */
#include "fuzz_common.h"
#include "nb_hkl.h"
#include "nb_plan.h"
#include "nb_stream.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    nb_set_verbosity(-2);
    nb_reader *r;
    if (nb_reader_open_mem(&r, data, size, "fuzz")) return 0;
    nb_record rec;
    memset(&rec, 0, sizeof rec);
    for (int n = 0; n < 64; n++) {
        int eof = 0;
        if (nb_reader_next(r, &rec, &eof) || eof) break;
        if (nb_record_is(&rec, "PLAN")) {
            nb_plan p;
            if (!nb_plan_from_record(&rec, &p)) nb_plan_free(&p);
        } else if (nb_record_is(&rec, "HKL")) {
            nb_hkl h;
            nb_hkl_init(&h);
            if (!nb_hkl_from_record(&rec, &h)) nb_hkl_free(&h);
        }
    }
    nb_record_free(&rec);
    nb_reader_close(r);
    return 0;
}
