/* libFuzzer target: the NXmx reader's walk of a file's layout
 * (formats/nxmx_read.c, nxmx_frame.c) on files built from the input by
 * libhdf5, which itself is not under test: the input is a small
 * description of a layout, and the file holds what it says.
 *
 * The description, a byte at a time (0 once the input ends):
 *   where the frames are (data, data_000001 ... of 1-3 external data files,
 *     one of them maybe missing, or none), the data set's rank (2-4), its
 *     dimensions (frames 1-4, the others 1-12), its type (8-64-bit
 *     integers, floats, a string), its chunks and filters (none, deflate,
 *     shuffle with deflate, bitshuffle+LZ4 whose chunks are the input's own
 *     bytes), the detector (an NXdetector by attribute or by name, or
 *     none; a Jungfrau's name), its modules (0-3, data_origin and data_size
 *     of any length and values, a data_stride), its pixel_mask (any shape),
 *     saturation_value and data_scaling_factor, and the frame read.
 * Every read must succeed or fail with a message; ASan flags the rest. */
#include "fuzz_common.h"
#include "nxmx.h"
#include "nxmx_h5.h"

typedef struct input {
    const uint8_t *p;
    size_t n;
} input;

static unsigned next(input *in)
{
    if (!in->n) return 0;
    in->n--;
    return *in->p++;
}

static char base_path[256];

static void remove_files(void)
{
    char name[300];
    unlink(base_path);
    for (int k = 1; k <= 3; k++) {
        snprintf(name, sizeof name, "%s_data_%06d.h5", base_path, k);
        unlink(name);
    }
}

/* The values' file and memory type (the string's: NULL, it is written as bytes) */
static hid_t type_of(unsigned code, hid_t *str)
{
    *str = -1;
    switch (code % 8) {
    case 0: return *nb_h5.H5T_STD_I32LE_g;
    case 1: return *nb_h5.H5T_STD_U32LE_g;
    case 2: return *nb_h5.H5T_IEEE_F32LE_g;
    case 3: return *nb_h5.H5T_IEEE_F64LE_g;
    case 4: return *nb_h5.H5T_STD_I64LE_g;
    case 5: return *nb_h5.H5T_STD_U32LE_g;
    case 6: *str = nb_h5_str_type("text"); return *str; /* 4-byte strings: frames the reader must refuse */
    default: return *nb_h5.H5T_STD_I32LE_g;
    }
}

/* A data set of frames at `name` in loc: shape, type, chunks and filters from the input */
static void put_frames(nb_h5err *E, input *in, hid_t loc, const char *name, int rank, const hsize_t *dims)
{
    hid_t str, type = type_of(next(in), &str);
    const unsigned filt = next(in) % 5;
    hid_t dcpl = nb_h5_plain_dcpl();
    hsize_t chunk[4];
    size_t n = 1, csize = 1;
    for (int k = 0; k < rank; k++) {
        chunk[k] = 1 + next(in) % dims[k];
        n *= dims[k], csize *= chunk[k];
    }
    if (filt) nb_h5.H5Pset_chunk(dcpl, rank, chunk);
    if (filt == 2 || filt == 4) nb_h5.H5Pset_shuffle(dcpl);
    if (filt == 1 || filt == 2) nb_h5.H5Pset_deflate(dcpl, 1);
    /* as the writers ask for it (block size 0: the default, 2: LZ4); the
     * plugin, where installed, puts its version and the element size first */
    const unsigned cd[2] = {0, 2};
    if (filt >= 3) nb_h5.H5Pset_filter(dcpl, BSHUF_FILTER, H5Z_FLAG_OPTIONAL, 2, cd);
    hid_t sp = nb_h5.H5Screate_simple(rank, dims, NULL);
    hid_t d = nb_h5.H5Dcreate2(loc, name, type, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (nb_h5_check(E, d, name)) {
        if (filt >= 3 && nb_h5.H5Dwrite_chunk) {
            /* the chunks as stored: the input's bytes, each chunk's length from it */
            hsize_t off[4] = {0, 0, 0, 0};
            for (int c = 0; c < 4; c++) {
                const size_t len = next(in) * 4 + 1;
                uint8_t buf[1024 + 4] = {0};
                for (size_t i = 0; i < len; i++) buf[i] = (uint8_t)next(in);
                for (int k = 0; k < rank; k++) off[k] = chunk[k] * (next(in) % ((dims[k] + chunk[k] - 1) / chunk[k]));
                nb_h5.H5Dwrite_chunk(d, H5P_DEFAULT, next(in) & 1, off, len, buf);
            }
        } else if (next(in) % 4) {
            int32_t *v = calloc(n, 8);
            for (size_t i = 0; v && i < n; i++) v[2 * i] = (int32_t)(next(in) * 97u) - 7;
            if (v) nb_h5.H5Dwrite(d, str >= 0 ? str : T_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, v);
            free(v);
        }
        nb_h5.H5Dclose(d);
    }
    nb_h5.H5Sclose(sp);
    nb_h5.H5Pclose(dcpl);
    if (str >= 0) nb_h5.H5Tclose(str);
}

/* A module's data_origin, data_size or data_stride: its length and values from the input */
static void put_vector(nb_h5err *E, input *in, hid_t g, const char *name)
{
    int64_t v[4];
    const int n = (int)(next(in) % 4);
    for (int k = 0; k < n; k++) v[k] = (int64_t)next(in) % 14 - (next(in) == 255);
    nb_h5_put_i64(E, g, name, n ? n : 0, v);
}

static void put_detector(nb_h5err *E, input *in, hid_t file)
{
    hid_t inst = nb_h5_group(E, file, "/entry/instrument", "NXinstrument");
    const unsigned how = next(in) % 4;
    const char *name = how == 3 ? "JF1M" : how == 2 ? "det" : "detector";
    hid_t det = -1;
    if (how == 1) {
        hid_t pl = nb_h5_gcpl();
        det = nb_h5.H5Gcreate2(inst, name, H5P_DEFAULT, pl, H5P_DEFAULT); /* no NX_class */
        nb_h5.H5Pclose(pl);
    } else {
        det = nb_h5_group(E, inst, name, "NXdetector");
    }
    const unsigned nmod = next(in) % 4;
    for (unsigned m = 0; m < nmod; m++) {
        char mname[16];
        snprintf(mname, sizeof mname, "module_%u", m);
        hid_t g = nb_h5_group(E, det, mname, next(in) % 8 ? "NXdetector_module" : "NXother");
        put_vector(E, in, g, "data_origin");
        put_vector(E, in, g, "data_size");
        if (next(in) % 8 == 0) put_vector(E, in, g, "data_stride");
        nb_h5_close_group(g);
    }
    if (next(in) % 2) {
        hsize_t md[4];
        const int mr = (int)(next(in) % 4) + 1;
        for (int k = 0; k < mr; k++) md[k] = 1 + next(in) % 12;
        uint32_t *mask = calloc(12 * 12 * 12 * 12, sizeof *mask);
        for (int i = 0; mask && i < 64; i++) mask[next(in) % (12 * 12)] = next(in);
        hid_t d = nb_h5_dset(E, det, "pixel_mask", *nb_h5.H5T_STD_U32LE_g, T_UINT32, mr, md, mask);
        if (d >= 0) nb_h5.H5Dclose(d);
        free(mask);
    }
    if (next(in) % 2) {
        double sat = next(in) * 100.0;
        nb_h5_put_f64(E, det, "saturation_value", 0, &sat, NULL, NULL);
    }
    nb_h5_close_group(det);
    nb_h5_close_group(inst);
}

static void build(input *in)
{
    nb_h5err E = {0, ""};
    hid_t fapl = nb_h5.H5Pcreate(P_FACCESS);
    nb_h5.H5Pset_libver_bounds(fapl, H5F_LIBVER_EARLIEST, H5F_LIBVER_LATEST);
    hid_t file = nb_h5.H5Fcreate(base_path, ACC_TRUNC, H5P_DEFAULT, fapl);
    nb_h5.H5Pclose(fapl);
    if (file < 0) abort();
    const unsigned where = next(in) % 4, rank = 2 + next(in) % 3;
    hsize_t dims[4];
    for (unsigned k = 0; k < rank; k++) dims[k] = 1 + next(in) % (k == 0 ? 4 : 12);
    hid_t entry = where == 3 ? -1 : nb_h5_group(&E, file, "/entry", "NXentry");
    hid_t data = where == 3 ? -1 : nb_h5_group(&E, entry, "data", "NXdata");
    if (where <= 1) {
        put_frames(&E, in, data, "data", (int)rank, dims);
    } else if (where == 2) {
        const unsigned parts = 1 + next(in) % 3, missing = next(in) % 4;
        for (unsigned k = 1; k <= parts; k++) {
            char part[300], link[32];
            snprintf(part, sizeof part, "%s_data_%06u.h5", base_path, k);
            snprintf(link, sizeof link, "data_%06u", k);
            nb_h5.H5Lcreate_external(part, "/entry/data/data", data, link, H5P_DEFAULT, H5P_DEFAULT);
            if (k == missing) continue;
            hid_t f = nb_h5.H5Fcreate(part, ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
            hid_t e = nb_h5_group(&E, f, "/entry", "NXentry"), g = nb_h5_group(&E, e, "data", "NXdata");
            dims[0] = 1 + next(in) % 3;
            put_frames(&E, in, g, "data", (int)rank, dims);
            nb_h5_close_group(g);
            nb_h5_close_group(e);
            nb_h5.H5Fclose(f);
        }
    }
    if (data >= 0 && next(in) % 2) {
        double scaling = next(in) / 16.0;
        nb_h5_put_f64(&E, data, "data_scaling_factor", 0, &scaling, NULL, NULL);
    }
    nb_h5_close_group(data);
    nb_h5_close_group(entry);
    if (where != 3) put_detector(&E, in, file);
    nb_h5.H5Fclose(file);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!base_path[0]) {
        const char *tmp = getenv("TMPDIR");
        snprintf(base_path, sizeof base_path, "%s/nb-fuzz-nxmx-%ld.h5", tmp && *tmp ? tmp : "/tmp", (long)getpid());
        /* NB_FUZZ_KEEP=1: the files stay, to look at with h5py */
        if (!getenv("NB_FUZZ_KEEP")) atexit(remove_files);
        nb_set_verbosity(-2);
        if (nb_nxmx_load()) abort();
    }
    input in = {data, size};
    remove_files();
    build(&in);
    nb_nxmx_image im;
    const long frame = (long)next(&in) % 5;
    nb_status st = nb_nxmx_read_frame(base_path, frame, &im);
    if (st && !nb_error_message()[0]) abort();
    if (!st) {
        /* what was read is whole: every module inside the pixels, every value touched */
        size_t total = 0;
        for (int i = 0; i < im.npanels; i++) total += (size_t)im.fpixels[i] * (size_t)im.spixels[i];
        if (total != im.npixels || im.npanels < 1) abort();
        volatile double sum = 0;
        for (size_t i = 0; i < im.npixels; i++) sum += im.values[i] + (im.masked ? im.masked[i] : 0);
        nb_nxmx_image_free(&im);
    }
    return 0;
}
