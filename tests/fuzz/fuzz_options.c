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
    /* nb-geom's own loop (nb_request_scan_args and _apply_scanned), with no
     * header reader; files would be read from the fuzzer's machine by the
     * resolution, so the flags from the first file flag on are dropped */
    nb_scanned_args args;
    nb_status st = nb_request_scan_args(&rq, argc, argv, NULL, &args);
    if (!st) {
        for (int k = 0; k < args.count; k++) {
            int id = args.flags[k].id;
            if (id == FL_MAT || id == FL_SOURCEFILE || id == FL_MASK || id == FL_IMG || id == FL_HKL || id == FL_STOL) {
                args.count = k;
                break;
            }
        }
        st = nb_request_apply_scanned(&rq, &args, NULL);
        nb_scanned_args_free(&args);
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
