/* libFuzzer target: the files nb-geom reads - the A matrix (-mat), the
 * source file (-sourcefile) and the mask (-mask) - through the geometry
 * resolution that uses them.  The first byte picks the flag, the rest is the
 * file. */
#include "fuzz_common.h"
#include "nb_geometry.h"
#include "nb_options.h"
#include "nb_plan.h"
#include "nb_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    static const char *flags[] = {"-mat", "-sourcefile", "-mask"};
    const char *flag = flags[data[0] % 3];
    const char *path = fuzz_file(data + 1, size - 1);
    char *argv[] = {(char *)flag, (char *)path, "-cell", "50", "50", "50", "90", "90", "90", "-default_F", "10",
                    "-detpixels", "16", "-lambda", "1"};
    int argc = (int)(sizeof argv / sizeof argv[0]);
    if (data[0] % 3 == 0) argc = 2; /* -mat replaces the cell */
    nb_request rq;
    nb_request_defaults(&rq);
    nb_status st = NB_OK;
    for (int i = 0; i < argc && !st; i++) {
        const nb_flag *f = nb_flag_lookup_for(argv[i], NB_GEOM);
        int nvals = 0;
        if (!f) break;
        st = nb_flag_collect(f, argc, argv, i, &nvals);
        if (!st) st = nb_request_apply(&rq, f->id, f->name, argv + i + 1, nvals);
        i += nvals;
    }
    if (data[0] % 3 == 0 && !st) {
        const nb_flag *f = nb_flag_lookup_for("-default_F", NB_GEOM);
        char *v[] = {"10"};
        st = nb_request_apply(&rq, f->id, f->name, v, 1);
    }
    nb_plan plan;
    nb_strbuf log;
    nb_strbuf_init(&log);
    if (!st && !nb_resolve(&rq, &plan, &log)) nb_plan_free(&plan);
    nb_strbuf_free(&log);
    nb_request_free(&rq);
    return 0;
}
