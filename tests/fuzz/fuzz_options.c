/* libFuzzer target: the command-line parser and the geometry resolution:
 * the input, split at white space, is nb-geom's argument list. */
#include <ctype.h>

#include "fuzz_common.h"
#include "nb_geometry.h"
#include "nb_options.h"
#include "nb_plan.h"
#include "nb_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    nb_set_verbosity(-2);
    if (size > 4096) return 0;
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = 0;
    char *argv[256];
    int argc = 0;
    for (char *t = strtok(text, " \t\n\r\f\v"); t && argc < 256; t = strtok(NULL, " \t\n\r\f\v")) argv[argc++] = t;
    nb_request rq;
    nb_request_defaults(&rq);
    nb_status st = NB_OK;
    for (int i = 0; i < argc && !st; i++) {
        const nb_flag *f = nb_flag_lookup_for(argv[i], NB_GEOM);
        int nvals = 0;
        if (!f || !(f->owners & NB_GEOM)) {
            st = NB_ERR_USAGE;
            break;
        }
        /* files would be read from the fuzzer's machine: keep to the numbers */
        if (f->id == FL_MAT || f->id == FL_SOURCEFILE || f->id == FL_MASK || f->id == FL_IMG || f->id == FL_HKL ||
            f->id == FL_STOL)
            break;
        st = nb_flag_collect(f, argc, argv, i, &nvals);
        if (!st) st = nb_request_apply(&rq, f->id, f->name, argv + i + 1, nvals);
        i += nvals;
    }
    nb_plan plan;
    nb_strbuf log;
    nb_strbuf_init(&log);
    if (!st && !nb_resolve(&rq, &plan, &log)) nb_plan_free(&plan);
    nb_strbuf_free(&log);
    nb_request_free(&rq);
    free(text);
    return 0;
}
