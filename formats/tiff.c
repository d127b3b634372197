/* tiff.c - greyscale TIFF (float32, uint16, uint32) through libtiff, which is
 * loaded at run time (dlopen) so that the tools run where it is missing and
 * only a TIFF output needs it; written in memory, then committed through
 * nb_outfile.  Conventions: tiff.h. */
#include "tiff.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_util.h"
#include "frame_write.h"

#ifndef NB_VERSION
#define NB_VERSION "unknown"
#endif

#ifndef NB_HAVE_TIFF

nb_status nb_tiff_load(void) { return nb_error_set(NB_ERR_UNSUPPORTED, "this build has no libtiff"); }

static nb_status no_tiff(const char *path) { return nb_error_prefix(nb_tiff_load(), "cannot write '%s'", path); }

nb_status nb_tiff_read(const char *path, double **values, int *width, int *height, int *is_float,
                       double *count_max)
{
    (void)values, (void)width, (void)height, (void)is_float, (void)count_max;
    return nb_error_prefix(nb_tiff_load(), "cannot read '%s'", path);
}

nb_status nb_tiff_write_f32(const char *path, const float *pixels, const nb_image_meta *m)
{
    (void)pixels;
    (void)m;
    return no_tiff(path);
}

nb_status nb_tiff_write_u16(const char *path, const int32_t *counts, const nb_image_meta *m)
{
    (void)counts;
    (void)m;
    return no_tiff(path);
}

nb_status nb_tiff_write_u32(const char *path, const int32_t *counts, const nb_image_meta *m)
{
    (void)counts;
    (void)m;
    return no_tiff(path);
}

#else /* NB_HAVE_TIFF */

#include <dlfcn.h>
#include <tiffio.h>

#ifndef NB_TIFF_SONAME
#define NB_TIFF_SONAME "libtiff.so.6"
#endif

/* ---- libtiff, loaded on first use ------------------------------------------- */

/* libtiff is opened when a TIFF is first written, not at start-up: its
 * dependencies cost every nb-convert about 2 ms of CPU to load, in a pipe
 * where nb-sim is rendering on the same cores, and most runs write no TIFF.
 * The functions used are called through these pointers (the macros below). */
static struct {
    int state; /* 0 not tried, 1 loaded, -1 failed */
    char why[256];
    __typeof__(TIFFSetField) *SetField;
    __typeof__(TIFFWriteScanline) *WriteScanline;
    __typeof__(TIFFWriteDirectory) *WriteDirectory;
    __typeof__(TIFFClose) *Close;
    __typeof__(TIFFGetFieldDefaulted) *GetFieldDefaulted;
    __typeof__(TIFFReadScanline) *ReadScanline;
    __typeof__(TIFFScanlineSize64) *ScanlineSize64;
    __typeof__(TIFFIsTiled) *IsTiled;
#if TIFFLIB_VERSION >= 20221213
    __typeof__(TIFFOpenOptionsAlloc) *OpenOptionsAlloc;
    __typeof__(TIFFOpenOptionsFree) *OpenOptionsFree;
    __typeof__(TIFFOpenOptionsSetErrorHandlerExtR) *OpenOptionsSetErrorHandlerExtR;
    __typeof__(TIFFOpenOptionsSetWarningHandlerExtR) *OpenOptionsSetWarningHandlerExtR;
    __typeof__(TIFFClientOpenExt) *ClientOpenExt;
#else
    __typeof__(TIFFSetErrorHandler) *SetErrorHandler;
    __typeof__(TIFFSetWarningHandler) *SetWarningHandler;
    __typeof__(TIFFClientOpen) *ClientOpen;
#endif
} libtiff;

nb_status nb_tiff_load(void)
{
    if (libtiff.state == 0) {
        libtiff.state = -1;
        void *h = dlopen(NB_TIFF_SONAME, RTLD_NOW | RTLD_LOCAL);
        const char *missing = NULL;
#define NB_TIFF_SYM(field, name)                                                   \
    if (h && !missing && !(libtiff.field = (__typeof__(libtiff.field))dlsym(h, name))) \
        missing = name;
        NB_TIFF_SYM(SetField, "TIFFSetField")
        NB_TIFF_SYM(WriteScanline, "TIFFWriteScanline")
        NB_TIFF_SYM(WriteDirectory, "TIFFWriteDirectory")
        NB_TIFF_SYM(Close, "TIFFClose")
        NB_TIFF_SYM(GetFieldDefaulted, "TIFFGetFieldDefaulted")
        NB_TIFF_SYM(ReadScanline, "TIFFReadScanline")
        NB_TIFF_SYM(ScanlineSize64, "TIFFScanlineSize64")
        NB_TIFF_SYM(IsTiled, "TIFFIsTiled")
#if TIFFLIB_VERSION >= 20221213
        NB_TIFF_SYM(OpenOptionsAlloc, "TIFFOpenOptionsAlloc")
        NB_TIFF_SYM(OpenOptionsFree, "TIFFOpenOptionsFree")
        NB_TIFF_SYM(OpenOptionsSetErrorHandlerExtR, "TIFFOpenOptionsSetErrorHandlerExtR")
        NB_TIFF_SYM(OpenOptionsSetWarningHandlerExtR, "TIFFOpenOptionsSetWarningHandlerExtR")
        NB_TIFF_SYM(ClientOpenExt, "TIFFClientOpenExt")
#else
        NB_TIFF_SYM(SetErrorHandler, "TIFFSetErrorHandler")
        NB_TIFF_SYM(SetWarningHandler, "TIFFSetWarningHandler")
        NB_TIFF_SYM(ClientOpen, "TIFFClientOpen")
#endif
#undef NB_TIFF_SYM
        if (!h) {
            const char *e = dlerror();
            snprintf(libtiff.why, sizeof libtiff.why, "%s", e ? e : NB_TIFF_SONAME ": cannot be loaded");
        } else if (missing) {
            snprintf(libtiff.why, sizeof libtiff.why, "%s has no %s", NB_TIFF_SONAME, missing);
            dlclose(h);
        } else {
            libtiff.state = 1;
        }
    }
    if (libtiff.state < 0) return nb_error_set(NB_ERR_UNSUPPORTED, "cannot load libtiff: %s", libtiff.why);
    return NB_OK;
}

#define TIFFSetField libtiff.SetField
#define TIFFWriteScanline libtiff.WriteScanline
#define TIFFWriteDirectory libtiff.WriteDirectory
#define TIFFClose libtiff.Close
#define TIFFGetFieldDefaulted libtiff.GetFieldDefaulted
#define TIFFReadScanline libtiff.ReadScanline
#define TIFFScanlineSize64 libtiff.ScanlineSize64
#define TIFFIsTiled libtiff.IsTiled
#define TIFFOpenOptionsAlloc libtiff.OpenOptionsAlloc
#define TIFFOpenOptionsFree libtiff.OpenOptionsFree
#define TIFFOpenOptionsSetErrorHandlerExtR libtiff.OpenOptionsSetErrorHandlerExtR
#define TIFFOpenOptionsSetWarningHandlerExtR libtiff.OpenOptionsSetWarningHandlerExtR
#define TIFFClientOpenExt libtiff.ClientOpenExt
#define TIFFSetErrorHandler libtiff.SetErrorHandler
#define TIFFSetWarningHandler libtiff.SetWarningHandler
#define TIFFClientOpen libtiff.ClientOpen

/* ---- an in-memory file for TIFFClientOpen ---------------------------------- */

typedef struct memfile {
    unsigned char *buf;
    size_t len, cap, pos;
    int nomem;
    char err[512];          /* first libtiff error message */
} memfile;

static tmsize_t mem_read(thandle_t h, void *p, tmsize_t n)
{
    memfile *f = (memfile *)h;
    if (n <= 0 || f->pos >= f->len) return 0;
    size_t k = (size_t)n < f->len - f->pos ? (size_t)n : f->len - f->pos;
    memcpy(p, f->buf + f->pos, k);
    f->pos += k;
    return (tmsize_t)k;
}

static tmsize_t mem_write(thandle_t h, void *p, tmsize_t n)
{
    memfile *f = (memfile *)h;
    if (n < 0) return -1;
    size_t need = f->pos + (size_t)n;
    if (need < f->pos) {
        f->nomem = 1;
        return -1;
    }
    if (need > f->cap) {
        size_t cap = f->cap ? f->cap : 65536;
        while (cap < need) {
            if (cap > SIZE_MAX / 2) {
                cap = need;
                break;
            }
            cap *= 2;
        }
        unsigned char *b = realloc(f->buf, cap);
        if (!b) {
            f->nomem = 1;
            errno = ENOMEM;
            return -1;
        }
        f->buf = b;
        f->cap = cap;
    }
    if (f->pos > f->len) memset(f->buf + f->len, 0, f->pos - f->len);   /* a gap after a seek */
    memcpy(f->buf + f->pos, p, (size_t)n);
    f->pos = need;
    if (need > f->len) f->len = need;
    return n;
}

static toff_t mem_seek(thandle_t h, toff_t off, int whence)
{
    memfile *f = (memfile *)h;
    uint64_t base = whence == SEEK_CUR ? f->pos : whence == SEEK_END ? f->len : 0;
    uint64_t to = base + off;   /* toff_t is unsigned: a negative offset wraps back */
    if (to > (uint64_t)SIZE_MAX / 2) return (toff_t)-1;
    f->pos = (size_t)to;
    return to;
}

static int mem_close(thandle_t h)
{
    (void)h;
    return 0;
}

static toff_t mem_size(thandle_t h) { return ((memfile *)h)->len; }

static int mem_map(thandle_t h, void **base, toff_t *size)
{
    (void)h;
    (void)base;
    (void)size;
    return 0;
}

static void mem_unmap(thandle_t h, void *base, toff_t size)
{
    (void)h;
    (void)base;
    (void)size;
}

/* ---- libtiff messages -------------------------------------------------------- */

#if TIFFLIB_VERSION >= 20221213
static int on_error(TIFF *tif, void *user, const char *module, const char *fmt, va_list ap)
{
    (void)tif;
    memfile *f = (memfile *)user;
    if (f && !f->err[0]) {
        int n = 0;
        if (module && *module) n = snprintf(f->err, sizeof f->err, "%s: ", module);
        if (n < 0 || (size_t)n >= sizeof f->err) n = 0;
        vsnprintf(f->err + n, sizeof f->err - (size_t)n, fmt, ap);
    }
    return 1;   /* handled: nothing on stderr */
}

static int on_warning(TIFF *tif, void *user, const char *module, const char *fmt, va_list ap)
{
    (void)tif;
    (void)user;
    (void)module;
    (void)fmt;
    (void)ap;
    return 1;   /* silenced */
}

static TIFF *open_tiff(memfile *f, const char *name, const char *mode)
{
    TIFFOpenOptions *opts = TIFFOpenOptionsAlloc();
    if (!opts) return NULL;
    TIFFOpenOptionsSetErrorHandlerExtR(opts, on_error, f);
    TIFFOpenOptionsSetWarningHandlerExtR(opts, on_warning, f);
    TIFF *tif = TIFFClientOpenExt(name, mode, (thandle_t)f, mem_read, mem_write, mem_seek, mem_close, mem_size,
                                  mem_map, mem_unmap, opts);
    TIFFOpenOptionsFree(opts);
    return tif;
}
static void handlers_begin(memfile *f) { (void)f; }
static void handlers_end(void) {}
#else
/* older libtiff: process-wide handlers, swapped in for the duration of a write */
static memfile *current;
static TIFFErrorHandler old_err, old_warn;

static void on_error_global(const char *module, const char *fmt, va_list ap)
{
    memfile *f = current;
    if (f && !f->err[0]) {
        int n = 0;
        if (module && *module) n = snprintf(f->err, sizeof f->err, "%s: ", module);
        if (n < 0 || (size_t)n >= sizeof f->err) n = 0;
        vsnprintf(f->err + n, sizeof f->err - (size_t)n, fmt, ap);
    }
}

static void handlers_begin(memfile *f)
{
    current = f;
    old_err = TIFFSetErrorHandler(on_error_global);
    old_warn = TIFFSetWarningHandler(NULL);
}

static void handlers_end(void)
{
    TIFFSetErrorHandler(old_err);
    TIFFSetWarningHandler(old_warn);
    current = NULL;
}

static TIFF *open_tiff(memfile *f, const char *name, const char *mode)
{
    return TIFFClientOpen(name, mode, (thandle_t)f, mem_read, mem_write, mem_seek, mem_close, mem_size, mem_map,
                          mem_unmap);
}
#endif

/* ---- the writer ----------------------------------------------------------- */

enum sample_kind { KIND_F32, KIND_U16, KIND_U32 };

static char *description(const nb_image_meta *m, enum sample_kind kind)
{
    nb_strbuf sb;
    nb_strbuf_init(&sb);
    nb_strbuf_printf(&sb, "nb toolkit %s simulated diffraction image (%s)\n", NB_VERSION,
                     kind == KIND_F32 ? "float32 photons/pixel"
                                      : kind == KIND_U16 ? "uint16 detector counts" : "uint32 detector counts");
    if (m->command_line && *m->command_line) {
        nb_strbuf_append(&sb, "command_line=");
        for (const unsigned char *c = (const unsigned char *)m->command_line; *c; c++) {
            char ch = (*c >= 32 && *c < 127) ? (char)*c : '?';
            nb_strbuf_appendn(&sb, &ch, 1);
        }
        nb_strbuf_append(&sb, "\n");
    }
    nb_strbuf_printf(&sb, "wavelength_A=%.8g\n", m->wavelength * 1e10);
    nb_strbuf_printf(&sb, "distance_mm=%.8g\n", m->distance * 1e3);
    nb_strbuf_printf(&sb, "close_distance_mm=%.8g\n", m->close_distance * 1e3);
    nb_strbuf_printf(&sb, "pixel_size_mm=%.8g\n", m->pixel_size * 1e3);
    nb_strbuf_printf(&sb, "beam_center_mm=%.8g,%.8g (Fbeam,Sbeam from the outer corner of the first pixel)\n",
                     m->beam_f * 1e3, m->beam_s * 1e3);
    nb_strbuf_printf(&sb, "phi_deg=%.8g\nosc_range_deg=%.8g\n", m->osc_start, m->osc_range);
    nb_strbuf_printf(&sb, "twotheta_deg=%.8g\n", m->twotheta);
    if (kind != KIND_F32 && m->count_cutoff > 0) nb_strbuf_printf(&sb, "count_cutoff=%.10g\n", m->count_cutoff);
    if (m->polarization > 0) nb_strbuf_printf(&sb, "polarization_fraction=%.4f\n", m->polarization);
    nb_strbuf_printf(&sb, "frame=%ld\n", m->frame + 1); /* from 1, as the file names */
    return nb_strbuf_take(&sb);
}

static nb_status write_tiff(const char *path, const void *src, enum sample_kind kind, const nb_image_meta *m)
{
    const int w = m->fpixels, h = m->spixels;
    if (w <= 0 || h <= 0)
        return nb_error_set(NB_ERR_DATA, "cannot write '%s': image size %d x %d is empty", path, w, h);
    const int bps = kind == KIND_U16 ? 16 : 32;
    const size_t rowbytes = (size_t)w * (size_t)(bps / 8);
    const double total = (double)rowbytes * h;

    nb_status st = nb_tiff_load();
    if (st) return nb_error_prefix(st, "cannot write '%s'", path);
    /* open the output first: a bad path fails before any work */
    nb_outfile *of;
    st = nb_outfile_open(&of, path, 0);
    if (st) return st;
    unsigned char *row;
    st = nb_calloc((void **)&row, rowbytes, 1, "a TIFF row");
    if (st) {
        nb_outfile_abort(of);
        return st;
    }
    memfile f;
    memset(&f, 0, sizeof f);
    char *desc = description(m, kind);

    handlers_begin(&f);
    /* classic TIFF up to ~3.9 GiB of pixels, BigTIFF beyond */
    TIFF *tif = open_tiff(&f, path, total < 3.9 * 1024 * 1024 * 1024 ? "w" : "w8");
    int good = tif != NULL;
    if (good) {
        uint32_t rps = (uint32_t)(262144 / rowbytes);
        if (rps < 1) rps = 1;
        if (rps > (uint32_t)h) rps = (uint32_t)h;
        good = TIFFSetField(tif, TIFFTAG_IMAGEWIDTH, (uint32_t)w) && TIFFSetField(tif, TIFFTAG_IMAGELENGTH, (uint32_t)h) &&
               TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, (uint16_t)bps) &&
               TIFFSetField(tif, TIFFTAG_SAMPLESPERPIXEL, (uint16_t)1) &&
               TIFFSetField(tif, TIFFTAG_SAMPLEFORMAT,
                            (uint16_t)(kind == KIND_F32 ? SAMPLEFORMAT_IEEEFP : SAMPLEFORMAT_UINT)) &&
               TIFFSetField(tif, TIFFTAG_PHOTOMETRIC, (uint16_t)PHOTOMETRIC_MINISBLACK) &&
               TIFFSetField(tif, TIFFTAG_PLANARCONFIG, (uint16_t)PLANARCONFIG_CONTIG) &&
               TIFFSetField(tif, TIFFTAG_COMPRESSION, (uint16_t)COMPRESSION_NONE) &&
               TIFFSetField(tif, TIFFTAG_ORIENTATION, (uint16_t)ORIENTATION_TOPLEFT) &&
               TIFFSetField(tif, TIFFTAG_ROWSPERSTRIP, rps) &&
               TIFFSetField(tif, TIFFTAG_IMAGEDESCRIPTION, desc) &&
               TIFFSetField(tif, TIFFTAG_SOFTWARE, "nb toolkit " NB_VERSION);
        if (good && m->pixel_size > 0 && isfinite(m->pixel_size)) {
            float res = (float)(0.01 / m->pixel_size);   /* pixels per cm */
            good = TIFFSetField(tif, TIFFTAG_XRESOLUTION, res) && TIFFSetField(tif, TIFFTAG_YRESOLUTION, res) &&
                   TIFFSetField(tif, TIFFTAG_RESOLUTIONUNIT, (uint16_t)RESUNIT_CENTIMETER);
        }
        for (int y = 0; good && y < h; y++) {
            size_t off = (size_t)y * (size_t)w;
            if (kind == KIND_F32) {
                memcpy(row, (const float *)src + off, rowbytes);
            } else if (kind == KIND_U16) {
                const int32_t *c = (const int32_t *)src + off;
                uint16_t *o = (uint16_t *)row;
                for (int x = 0; x < w; x++) o[x] = (uint16_t)(c[x] < 0 ? 0 : c[x] > 65535 ? 65535 : c[x]);
            } else {
                const int32_t *c = (const int32_t *)src + off;
                uint32_t *o = (uint32_t *)row;
                for (int x = 0; x < w; x++) o[x] = (uint32_t)(c[x] < 0 ? 0 : c[x]);
            }
            good = TIFFWriteScanline(tif, row, (uint32_t)y, 0) == 1;
        }
        if (good) good = TIFFWriteDirectory(tif) == 1;
        TIFFClose(tif);
    }
    handlers_end();
    free(row);
    free(desc);

    if (!good || f.nomem) {
        free(f.buf);
        nb_outfile_abort(of);
        if (f.nomem) return nb_error_set(NB_ERR_NOMEM, "cannot write '%s': out of memory for the TIFF image", path);
        return nb_error_set(NB_ERR_IO, "cannot write '%s': libtiff: %s", path,
                            f.err[0] ? f.err : "cannot create the TIFF image");
    }

    int okw = fwrite(f.buf, 1, f.len, nb_outfile_fp(of)) == f.len;
    int e = errno;
    free(f.buf);
    st = nb_outfile_commit(of);   /* reports ENOSPC and the like, removes the file */
    if (!okw && !st) st = nb_error_set(NB_ERR_IO, "cannot write '%s': %s", path, strerror(e ? e : EIO));
    return st;
}

nb_status nb_tiff_write_f32(const char *path, const float *pixels, const nb_image_meta *m)
{
    return write_tiff(path, pixels, KIND_F32, m);
}

/* ---- the reader ------------------------------------------------------------ */

/* The image's layout: greyscale, strips, a sample type this reader knows. */
static nb_status read_layout(TIFF *tif, const char *path, uint32_t *w, uint32_t *h, uint16_t *bps, uint16_t *fmt)
{
    uint16_t spp = 1;
    TIFFGetFieldDefaulted(tif, TIFFTAG_IMAGEWIDTH, w);
    TIFFGetFieldDefaulted(tif, TIFFTAG_IMAGELENGTH, h);
    TIFFGetFieldDefaulted(tif, TIFFTAG_BITSPERSAMPLE, bps);
    TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLESPERPIXEL, &spp);
    TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLEFORMAT, fmt);
    if (*w == 0 || *h == 0 || *w > 1u << 20 || *h > 1u << 20)
        return nb_error_set(NB_ERR_DATA, "'%s': TIFF image of %u x %u pixels", path, *w, *h);
    if (spp != 1 || TIFFIsTiled(tif))
        return nb_error_set(NB_ERR_UNSUPPORTED, "'%s': only greyscale TIFF in strips is read (%u samples per pixel%s)",
                            path, spp, TIFFIsTiled(tif) ? ", tiled" : "");
    int known = (*fmt == SAMPLEFORMAT_IEEEFP && *bps == 32) || (*fmt == SAMPLEFORMAT_UINT && (*bps == 16 || *bps == 32)) ||
                (*fmt == SAMPLEFORMAT_INT && *bps == 32);
    if (!known)
        return nb_error_set(NB_ERR_UNSUPPORTED, "'%s': TIFF samples of %u bits, format %u: only uint16, uint32, int32 "
                                                "and float32 are read", path, *bps, *fmt);
    if (TIFFScanlineSize64(tif) != (uint64_t)*w * (*bps / 8))
        return nb_error_set(NB_ERR_DATA, "'%s': TIFF rows of unexpected size", path);
    return NB_OK;
}

static double sample_at(const unsigned char *row, uint32_t x, uint16_t bps, uint16_t fmt)
{
    if (bps == 16) {
        uint16_t v;
        memcpy(&v, row + 2 * (size_t)x, 2);
        return v;
    }
    uint32_t u;
    memcpy(&u, row + 4 * (size_t)x, 4);
    if (fmt == SAMPLEFORMAT_IEEEFP) {
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    return fmt == SAMPLEFORMAT_INT ? (double)(int32_t)u : (double)u;
}

nb_status nb_tiff_read(const char *path, double **values, int *width, int *height, int *is_float,
                       double *count_max)
{
    nb_status st = nb_tiff_load();
    if (st) return nb_error_prefix(st, "cannot read '%s'", path);
    memfile f;
    memset(&f, 0, sizeof f);
    char *data;
    if ((st = nb_read_file(path, &data, &f.len))) return st;
    f.buf = (unsigned char *)data;
    handlers_begin(&f);
    TIFF *tif = open_tiff(&f, path, "r");
    uint32_t w = 0, h = 0;
    uint16_t bps = 0, fmt = SAMPLEFORMAT_UINT;
    unsigned char *row = NULL;
    *values = NULL;
    if (!tif) st = nb_error_set(NB_ERR_DATA, "'%s': not a TIFF file (%s)", path, f.err[0] ? f.err : "libtiff");
    if (!st) st = read_layout(tif, path, &w, &h, &bps, &fmt);
    if (!st) st = nb_calloc((void **)&row, w, bps / 8, "a TIFF row");
    if (!st) st = nb_calloc((void **)values, (size_t)w * h, sizeof **values, "the TIFF image");
    for (uint32_t y = 0; y < h && !st; y++) {
        if (TIFFReadScanline(tif, row, y, 0) != 1)
            st = nb_error_set(NB_ERR_DATA, "'%s': cannot read row %u: %s", path, y, f.err[0] ? f.err : "libtiff");
        for (uint32_t x = 0; x < w && !st; x++) (*values)[(size_t)y * w + x] = sample_at(row, x, bps, fmt);
    }
    if (tif) TIFFClose(tif);
    handlers_end();
    free(row);
    free(data);
    if (st) {
        free(*values);
        *values = NULL;
        return st;
    }
    *width = (int)w, *height = (int)h;
    *is_float = fmt == SAMPLEFORMAT_IEEEFP;
    *count_max = bps == 16 ? 65535.0 : fmt == SAMPLEFORMAT_INT ? 2147483647.0 : 4294967295.0;
    return NB_OK;
}

nb_status nb_tiff_write_u16(const char *path, const int32_t *counts, const nb_image_meta *m)
{
    return write_tiff(path, counts, KIND_U16, m);
}

nb_status nb_tiff_write_u32(const char *path, const int32_t *counts, const nb_image_meta *m)
{
    return write_tiff(path, counts, KIND_U32, m);
}

#endif /* NB_HAVE_TIFF */

/* ---- a frame as a TIFF (the registry's write_image) ------------------------ */

/* Integer samples as 16 or 32 bits (the format's own depth, tif16 and tif32,
 * or the counts'), else float32 photons: one writer for the TIFF variants,
 * whose entries choose the samples */
nb_status nb_tiff_write_frame(const nb_frame_image *img)
{
    if (!img->counts) return nb_tiff_write_f32(img->path, img->fr->photons, &img->meta);
    return img->bits == 32 ? nb_tiff_write_u32(img->path, img->counts, &img->meta)
                           : nb_tiff_write_u16(img->path, img->counts, &img->meta);
}
