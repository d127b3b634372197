/* libFuzzer target: the files nb-geom reads - the A matrix (-mat), the
 * source file (-sourcefile) and the mask (-mask) - through the geometry
 * resolution that uses them.  The first byte picks the flag, the rest is the
 * file. */
#include "fuzz_common.h"
#include "nb_geometry.h"
#include "nb_options.h"
#include "nb_plan.h"
#include "nb_util.h"
#include "smv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    static const char *flags[] = {"-mat", "-sourcefile", "-mask"};
    const char *flag = flags[data[0] % 3];
    const char *path = fuzz_file(data + 1, size - 1);
    /* the file's flag first; -mat gives the cell itself, the others need one */
    char *argv[] = {(char *)flag, (char *)path, "-default_F", "10", "-detpixels", "16", "-lambda", "1",
                    "-cell", "50", "50", "50", "90", "90", "90"};
    int argc = (int)(sizeof argv / sizeof argv[0]) - (data[0] % 3 == 0 ? 7 : 0);
    nb_request rq;
    nb_request_defaults(&rq);
    /* nb-geom's own loop, with its reader of -img and -mask headers */
    const nb_args_hooks hooks = {NULL, NULL, nb_smv_apply_to_request, NULL};
    nb_status st = nb_request_apply_args(&rq, argc, argv, &hooks);
    nb_plan plan;
    nb_strbuf log;
    nb_strbuf_init(&log);
    if (!st && !nb_resolve(&rq, &plan, &log)) nb_plan_free(&plan);
    nb_strbuf_free(&log);
    nb_request_free(&rq);
    return 0;
}
