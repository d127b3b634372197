/* nb_util.c - small helpers every tool shares: growing strings, number
 * parsing, allocation with a message, atomic output files and the temporaries' cleanup on
 * exit or a fatal signal, a quiet death when a pipe's reader goes away, the
 * progress bar, the clock. */
#include "nb_util.h"

#include "nb_tuning.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- growing string ---------------------------------------------------- */

static void oom(void)
{
    /* the one way out of a failing tool, so that the next stage of a pipe
     * gets its ABORT record too */
    nb_exit_on_error(nb_error_set(NB_ERR_NOMEM, "out of memory"));
    exit(1); /* not reached */
}

void nb_strbuf_init(nb_strbuf *sb)
{
    sb->data = NULL;
    sb->len = sb->cap = 0;
}

void nb_strbuf_free(nb_strbuf *sb)
{
    free(sb->data);
    nb_strbuf_init(sb);
}

static void reserve(nb_strbuf *sb, size_t extra)
{
    size_t need = sb->len + extra + 1;
    if (need <= sb->cap) return;
    size_t cap = sb->cap ? sb->cap : 256;
    while (cap < need) cap *= 2;
    char *p = realloc(sb->data, cap);
    if (!p) oom();
    sb->data = p;
    sb->cap = cap;
}

void nb_strbuf_appendn(nb_strbuf *sb, const char *s, size_t n)
{
    reserve(sb, n);
    memcpy(sb->data + sb->len, s, n);
    sb->len += n;
    sb->data[sb->len] = '\0';
}

void nb_strbuf_append(nb_strbuf *sb, const char *s) { nb_strbuf_appendn(sb, s, strlen(s)); }

void nb_strbuf_printf(nb_strbuf *sb, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    reserve(sb, (size_t)n);
    va_start(ap, fmt);
    vsnprintf(sb->data + sb->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    sb->len += (size_t)n;
}

char *nb_strbuf_take(nb_strbuf *sb)
{
    if (!sb->data) nb_strbuf_appendn(sb, "", 0);
    char *p = sb->data;
    nb_strbuf_init(sb);
    return p;
}

/* ---- allocation -------------------------------------------------------- */

void nb_format_bytes(double bytes, char *buf, size_t size)
{
    static const char *units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    int u = 0;
    while (bytes >= 1024.0 && u < 6) {
        bytes /= 1024.0;
        u++;
    }
    if (u == 0) snprintf(buf, size, "%.0f bytes", bytes);
    else snprintf(buf, size, "%.1f %s", bytes, units[u]);
}

nb_status nb_alloc_checked(void **out, size_t count, size_t size, const char *what, void *(*alloc)(size_t bytes))
{
    *out = NULL;
    if (count == 0 || size == 0) count = size = 1;
    if (count > SIZE_MAX / size) {
        return nb_error_set(NB_ERR_NOMEM, "cannot allocate %zu x %zu bytes for %s: size overflows",
                            count, size, what);
    }
    void *p = alloc(count * size);
    if (!p) {
        char b[64];
        nb_format_bytes((double)count * (double)size, b, sizeof b);
        return nb_error_set(NB_ERR_NOMEM, "cannot allocate %s for %s: %s", b, what, strerror(ENOMEM));
    }
    *out = p;
    return NB_OK;
}

static void *zeroed(size_t bytes) { return calloc(bytes, 1); }

nb_status nb_calloc(void **out, size_t count, size_t size, const char *what)
{
    return nb_alloc_checked(out, count, size, what, zeroed);
}

uint64_t nb_memory_limit(void)
{
    uint64_t limit = (uint64_t)1 << 36;
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    if (pages > 0 && psize > 0) limit = (uint64_t)pages * (uint64_t)psize;
    const char *env = getenv("NB_MEMORY_LIMIT");
    if (env && *env) {
        char *end;
        double v = strtod(env, &end);
        double mult = *end == 'K' || *end == 'k' ? 1024.0 : *end == 'M' || *end == 'm' ? 1048576.0
                      : *end == 'G' || *end == 'g' ? 1073741824.0 : 1.0;
        if (v > 0 && v * mult < (double)limit) limit = (uint64_t)(v * mult);
    }
    return limit;
}

char *nb_xstrdup(const char *s)
{
    if (!s) return NULL;
    char *p = strdup(s);
    if (!p) oom();
    return p;
}

/* ---- strict number parsing --------------------------------------------- */

static nb_status parse_double_impl(const char *s, double *out, const char *what, int allow_nonfinite)
{
    char *end;
    if (!s || !*s) return nb_error_set(NB_ERR_USAGE, "%s: expected a number, got an empty string", what);
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end != '\0')
        return nb_error_set(NB_ERR_USAGE, "%s: '%s' is not a number", what, s);
    if (!allow_nonfinite && !isfinite(v))
        return nb_error_set(NB_ERR_USAGE, "%s: '%s' is not a finite number", what, s);
    if (errno == ERANGE && isinf(v) && !allow_nonfinite)
        return nb_error_set(NB_ERR_USAGE, "%s: '%s' is out of range", what, s);
    *out = v;
    return NB_OK;
}

nb_status nb_parse_double(const char *s, double *out, const char *what)
{
    return parse_double_impl(s, out, what, 0);
}

nb_status nb_parse_double_any(const char *s, double *out, const char *what)
{
    return parse_double_impl(s, out, what, 1);
}

nb_status nb_parse_long(const char *s, long *out, const char *what)
{
    char *end;
    if (!s || !*s) return nb_error_set(NB_ERR_USAGE, "%s: expected an integer, got an empty string", what);
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end != '\0')
        return nb_error_set(NB_ERR_USAGE, "%s: '%s' is not an integer", what, s);
    if (errno == ERANGE) return nb_error_set(NB_ERR_USAGE, "%s: '%s' is out of range", what, s);
    *out = v;
    return NB_OK;
}

nb_status nb_parse_int(const char *s, int *out, const char *what)
{
    long v;
    nb_status st = nb_parse_long(s, &v, what);
    if (st) return st;
    if (v < INT_MIN || v > INT_MAX) return nb_error_set(NB_ERR_USAGE, "%s: '%s' is out of range", what, s);
    *out = (int)v;
    return NB_OK;
}

void nb_format_double(double v, char *buf, size_t size)
{
    /* %.17g always round-trips; try shorter first for readability */
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, size, "%.*g", prec, v);
        if (strtod(buf, NULL) == v || isnan(v)) return;
    }
}

/* ---- files ------------------------------------------------------------- */

nb_status nb_read_file(const char *path, char **data, size_t *len)
{
    FILE *fp = (strcmp(path, "-") == 0) ? stdin : fopen(path, "rb");
    nb_strbuf sb;
    char chunk[65536];
    size_t n;

    *data = NULL;
    *len = 0;
    if (!fp) return nb_error_set(NB_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    nb_strbuf_init(&sb);
    while ((n = fread(chunk, 1, sizeof chunk, fp)) > 0) nb_strbuf_appendn(&sb, chunk, n);
    if (ferror(fp)) {
        int e = errno;
        if (fp != stdin) fclose(fp);
        nb_strbuf_free(&sb);
        return nb_error_set(NB_ERR_IO, "cannot read '%s': %s", path, strerror(e ? e : EIO));
    }
    if (fp != stdin) fclose(fp);
    *len = sb.len;
    *data = nb_strbuf_take(&sb);
    return NB_OK;
}

/* Temporary files not yet committed, removed on exit or fatal signal. */
#define MAX_PENDING 64
static char *pending[MAX_PENDING];
static int cleanup_installed;

static void remove_pending(void)
{
    for (int i = 0; i < MAX_PENDING; i++)
        if (pending[i]) {
            unlink(pending[i]);
            pending[i] = NULL;
        }
}

static void on_fatal_signal(int sig)
{
    /* unlink() is async-signal-safe; the strings are not freed here */
    for (int i = 0; i < MAX_PENDING; i++)
        if (pending[i]) unlink(pending[i]);
    signal(sig, SIG_DFL);
    raise(sig);
}

static void install_cleanup(void)
{
    if (cleanup_installed) return;
    cleanup_installed = 1;
    atexit(remove_pending);
    int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_fatal_signal;
        sigemptyset(&sa.sa_mask);
        /* a signal the parent ignored stays ignored (nohup's SIGHUP).  In a
         * tool SIGPIPE never is by now (nb_closed_output_is_quiet() ran
         * first): a reader that goes away removes the temporaries here, and
         * the re-raised signal kills the tool quietly */
        struct sigaction old;
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN) continue;
        sigaction(sigs[i], &sa, NULL);
    }
}

void nb_closed_output_is_quiet(void)
{
    /* a write into a pipe without a reader would otherwise fail with EPIPE,
     * and the tool report an error that is not its own */
    struct sigaction old;
    if (sigaction(SIGPIPE, NULL, &old) != 0 || old.sa_handler != on_fatal_signal) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = SIG_DFL;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGPIPE, &sa, NULL);
    }
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
}

void nb_too_large_is_an_error(void)
{
#ifdef SIGXFSZ
    signal(SIGXFSZ, SIG_IGN);
#endif
}

void nb_die_of_sigpipe(void)
{
    remove_pending();
    signal(SIGPIPE, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    /* raise() sends it to this thread: unblock it here, whatever the rest do */
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    raise(SIGPIPE);
    _exit(128 + SIGPIPE); /* not reached: SIGPIPE's default action ends the process */
}

nb_status nb_write_error(const char *path, int e)
{
    const char *name = strcmp(path, "-") ? path : "standard output";
    if (!e) e = EIO;
    if (e == EPIPE) return nb_error_set(NB_ERR_PIPE, "cannot write %s: the reader closed the pipe", name);
    if (!strcmp(path, "-")) return nb_error_set(NB_ERR_IO, "cannot write standard output: %s", strerror(e));
    return nb_error_set(NB_ERR_IO, "cannot write '%s': %s", path, strerror(e));
}

static void track(char *tmp)
{
    for (int i = 0; i < MAX_PENDING; i++)
        if (!pending[i]) {
            pending[i] = tmp;
            return;
        }
}

static void untrack(const char *tmp)
{
    for (int i = 0; i < MAX_PENDING; i++)
        if (pending[i] == tmp) pending[i] = NULL;
}

void nb_temp_register(char *path)
{
    install_cleanup();
    track(path);
}

void nb_temp_unregister(const char *path) { untrack(path); }

/* whether path names a registered temporary file (the caller's own, private) */
static int is_registered_temp(const char *path)
{
    for (int i = 0; i < MAX_PENDING; i++)
        if (pending[i] && strcmp(pending[i], path) == 0) return 1;
    return 0;
}

struct nb_outfile {
    FILE *fp;
    char *path;
    char *tmp;      /* NULL when writing to stdout */
};

nb_status nb_write_text_file(const char *path, const char *text, size_t len)
{
    nb_outfile *of;
    nb_status st = nb_outfile_open(&of, path, 1);
    if (st) return st;
    if (len && fwrite(text, 1, len, nb_outfile_fp(of)) != len) {
        int e = errno;
        nb_outfile_abort(of);
        return nb_write_error(path, e);
    }
    return nb_outfile_commit(of);
}

nb_status nb_outfile_open(nb_outfile **out, const char *path, int binary_ok_on_tty)
{
    nb_outfile *of = calloc(1, sizeof *of);
    *out = NULL;
    if (!of) return nb_error_set(NB_ERR_NOMEM, "out of memory");
    of->path = nb_xstrdup(path);
    if (strcmp(path, "-") == 0) {
        if (!binary_ok_on_tty && isatty(STDOUT_FILENO)) {
            free(of->path);
            free(of);
            return nb_error_set(NB_ERR_USAGE,
                                "refusing to write binary data to a terminal; redirect stdout or use -o FILE");
        }
        of->fp = stdout;
        nb_pipe_widen(STDOUT_FILENO);
        *out = of;
        return NB_OK;
    }
    /* a directory or an unwritable location fails here, before any work */
    struct stat stt;
    if (stat(path, &stt) == 0 && S_ISDIR(stt.st_mode)) {
        free(of->path);
        free(of);
        return nb_error_set(NB_ERR_IO, "cannot write '%s': %s", path, strerror(EISDIR));
    }
    /* special files (/dev/null, /dev/full, FIFOs) are written in place */
    if (stat(path, &stt) == 0 && !S_ISREG(stt.st_mode)) {
        of->fp = fopen(path, "wb");
        if (!of->fp) {
            int e = errno;
            free(of->path);
            free(of);
            return nb_error_set(NB_ERR_IO, "cannot open '%s': %s", path, strerror(e));
        }
        *out = of;
        return NB_OK;
    }
    /* the caller's own registered temporary file (nb-convert's outputs, held
     * until the stream ends) is written in place: a second temporary renamed
     * over it would replace an existing file, which makes ext4 write the
     * data out at once (its auto_da_alloc), tens of ms for an image */
    if (is_registered_temp(path)) {
        /* it is empty (mkstemp made it): no O_TRUNC either, which would make
         * ext4 flush the file when it is closed (auto_da_alloc again) */
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        of->fp = fd < 0 ? NULL : fdopen(fd, "wb");
        if (!of->fp) {
            int e = errno;
            if (fd >= 0) close(fd);
            free(of->path);
            free(of);
            return nb_error_set(NB_ERR_IO, "cannot open '%s': %s", path, strerror(e));
        }
        *out = of;
        return NB_OK;
    }
    install_cleanup();
    int fd = nb_temp_beside(path, "", &of->tmp);
    if (fd < 0) {
        int e = errno;
        free(of->path);
        free(of);
        return nb_error_set(NB_ERR_IO, "cannot open '%s': %s", path, strerror(e));
    }
    track(of->tmp);
    of->fp = fdopen(fd, "wb");
    if (!of->fp) {
        int e = errno;
        close(fd);
        unlink(of->tmp);
        untrack(of->tmp);
        free(of->tmp);
        free(of->path);
        free(of);
        return nb_error_set(NB_ERR_IO, "cannot open '%s': %s", path, strerror(e));
    }
    *out = of;
    return NB_OK;
}

int nb_temp_beside(const char *path, const char *tag, char **tmp)
{
    size_t n = strlen(path) + strlen(tag) + 16;
    *tmp = malloc(n);
    if (!*tmp) {
        errno = ENOMEM;
        return -1;
    }
    const char *slash = strrchr(path, '/');
    if (slash) snprintf(*tmp, n, "%.*s/.%s%s.XXXXXX", (int)(slash - path), path, slash + 1, tag);
    else snprintf(*tmp, n, ".%s%s.XXXXXX", path, tag); /* mkstemp's template */
    int fd = mkstemp(*tmp);
    if (fd < 0) {
        int e = errno;
        free(*tmp);
        *tmp = NULL;
        errno = e;
        return -1;
    }
    mode_t mask = umask(0);
    umask(mask);
    (void)fchmod(fd, 0666 & ~mask);
    return fd;
}

FILE *nb_outfile_fp(nb_outfile *of) { return of->fp; }
const char *nb_outfile_path(const nb_outfile *of) { return of->path; }

static void outfile_free(nb_outfile *of)
{
    if (of->tmp) {
        untrack(of->tmp);
        free(of->tmp);
    }
    free(of->path);
    free(of);
}

nb_status nb_outfile_commit(nb_outfile *of)
{
    nb_status st = NB_OK;
    int e = 0;
    if (!of) return NB_OK;
    if (fflush(of->fp) != 0 || ferror(of->fp)) e = errno ? errno : EIO;
    if (of->fp == stdout) {
        if (e) st = nb_write_error("-", e);
        outfile_free(of);
        return st;
    }
    if (fclose(of->fp) != 0 && !e) e = errno ? errno : EIO;
    of->fp = NULL;
    if (e) {
        st = nb_write_error(of->path, e);
        if (of->tmp) unlink(of->tmp);
    } else if (of->tmp && rename(of->tmp, of->path) != 0) {
        e = errno;
        unlink(of->tmp);
        st = nb_error_set(NB_ERR_IO, "cannot write '%s': %s", of->path, strerror(e));
    }
    outfile_free(of);
    return st;
}

void nb_outfile_abort(nb_outfile *of)
{
    if (!of) return;
    if (of->fp && of->fp != stdout) fclose(of->fp);
    if (of->tmp) unlink(of->tmp);
    outfile_free(of);
}

/* ---- progress ---------------------------------------------------------- */

void nb_format_duration(double seconds, char *buf, size_t size)
{
    if (!(seconds >= 0) || seconds > 1e8) {
        snprintf(buf, size, "--:--");
        return;
    }
    long s = (long)ceil(seconds - 1e-6);   /* 275.0000001 s is 4:35 */
    if (s < 3600) snprintf(buf, size, "%ld:%02ld", s / 60, s % 60);
    else snprintf(buf, size, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
}

void nb_progress_line(char *buf, size_t size, const char *tool, const char *label, double fraction,
                      double elapsed)
{
    if (!(fraction >= 0)) fraction = 0;
    if (fraction > 1) fraction = 1;
    int pct = (int)(100.0 * fraction), filled = (int)(40.0 * fraction);
    char bar[41], eta[48] = "";
    for (int i = 0; i < 40; i++) bar[i] = i < filled ? '#' : '.';
    bar[40] = '\0';
    if (fraction < 1) {
        char d[32] = "--:--";
        if (fraction >= 1e-3 && elapsed >= 0.2) nb_format_duration(elapsed * (1 - fraction) / fraction, d, sizeof d);
        snprintf(eta, sizeof eta, " ETA %s", d);
    }
    snprintf(buf, size, "%s: %s [%s] %3d%%%s", tool, label, bar, pct, eta);
}

static void progress_draw(nb_progress *p, double fraction)
{
    char line[256];
    nb_progress_line(line, sizeof line, nb_tool_name(), p->label, fraction, nb_now() - p->t0);
    /* clear to the end: the ETA's width changes */
    fprintf(stderr, "\r%s\033[K", line);
    fflush(stderr);
}

void nb_progress_start_part(nb_progress *p, const char *label, long total, int allowed, double t0, double base,
                            double span)
{
    p->enabled = allowed && total > 0 && nb_verbosity() >= 0 && isatty(STDERR_FILENO);
    p->total = total;
    p->done = 0;
    p->last_permille = -1;
    p->label = label;
    p->t0 = t0, p->base = base, p->span = span;
    /* a later part shows at once where the job stands */
    if (p->enabled && base > 0) {
        p->last_permille = (int)(1000.0 * base);
        progress_draw(p, base);
    }
}

void nb_progress_start(nb_progress *p, const char *label, long total, int allowed)
{
    nb_progress_start_part(p, label, total, allowed, nb_now(), 0.0, 1.0);
}

void nb_progress_add(nb_progress *p, long n)
{
    if (!p->enabled) return;
    long done = __atomic_add_fetch(&p->done, n, __ATOMIC_RELAXED);
    /* the last row of the last part is the whole run, whatever the rounding */
    double fraction = fmin(1.0, p->base + p->span * (double)done / (double)p->total + 1e-9);
    int pm = (int)(1000.0 * fraction);
    int last = __atomic_load_n(&p->last_permille, __ATOMIC_RELAXED);
    if (pm <= last) return;
    if (!__atomic_compare_exchange_n(&p->last_permille, &last, pm, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        return;
    progress_draw(p, fraction);
}

void nb_progress_finish(nb_progress *p)
{
    if (!p->enabled) return;
    fprintf(stderr, "\r\033[K");
    fflush(stderr);
    p->enabled = 0;
}

double nb_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int nb_frame_path(const char *tmpl, long frame, char *out, size_t size)
{
    const char *h = strchr(tmpl, '#');
    int n;
    if (!h) n = snprintf(out, size, "%s", tmpl);
    else {
        size_t run = strspn(h, "#");
        if (strchr(h + run, '#')) return -1;
        n = snprintf(out, size, "%.*s%0*ld%s", (int)(h - tmpl), tmpl, (int)run, frame + 1, h + run);
    }
    return n < 0 || (size_t)n >= size ? -1 : 0;
}

int nb_absolute_path(const char *path, char *out, size_t size)
{
    char cwd[4096];
    int n;
    if (path[0] == '/') n = snprintf(out, size, "%s", path);
    else if (getcwd(cwd, sizeof cwd)) n = snprintf(out, size, "%s/%s", cwd, path);
    else return -1;
    if (n < 0 || (size_t)n >= size) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return 0;
}

nb_status nb_parse_frames(const char *v, int *a, int *b)
{
    char *colon = strchr(v, ':');
    if (!colon) return nb_error_set(NB_ERR_USAGE, "option --frames: expected A:B (e.g. 1:30), got '%s'", v);
    char first[32];
    size_t n = (size_t)(colon - v);
    if (n == 0 || n >= sizeof first) return nb_error_set(NB_ERR_USAGE, "option --frames: expected A:B, got '%s'", v);
    memcpy(first, v, n);
    first[n] = 0;
    nb_status st = nb_parse_int(first, a, "option --frames");
    if (!st) st = nb_parse_int(colon + 1, b, "option --frames");
    if (st) return st;
    if (*a < 1 || *b < *a)
        return nb_error_set(NB_ERR_USAGE, "option --frames %s: frames are numbered from 1 and A <= B", v);
    return NB_OK;
}
