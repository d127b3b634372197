/* nb_hkl_model.c - nb-hkl -model: structure factors of an atomic model (PDB
 * or mmCIF) computed by gemmi sfcalc, run as a child process that writes a
 * temporary MTZ file, read back by formats/mtz.c; and the resolution of the
 * plan's detector, the default resolution of the calculation.
 *
 * Why gemmi and not a summation of our own: docs/architecture.md section 14.
 * Its output is an MTZ of the asymmetric unit (FC, PHIC) in the model's space
 * group, so the expansion to P1 is nb-hkl's one expansion (sf_expand.c). */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mtz.h"
#include "nb_error.h"
#include "nb_hkl_model.h"
#include "nb_stills.h"
#include "nb_util.h"
#include "nb_vec.h"

extern char **environ;

/* ---- the detector's resolution ---------------------------------------------- */

/* 1/d (1/m) of a diffracted direction `pos` (any length) from every source */
static double inv_d_at(const double pos[3], const nb_source *src, int nsrc)
{
    double s[3], best = 0;
    nb_vunitize(pos, s);
    for (int i = 0; i < nsrc; i++) {
        /* the incident direction is -dir: s - (-dir) */
        double q[3] = {s[0] + src[i].dir[0], s[1] + src[i].dir[1], s[2] + src[i].dir[2]};
        double v = nb_vnorm(q) / src[i].lambda;
        if (v > best) best = v;
    }
    return best;
}

/* The point of panel p at F, S (m along fdet, sdet) and O (m along odet) as
 * the kernels place it (a curved detector's as nb_pixel_double.inc bends it) */
static void panel_point(const nb_plan *plan, const nb_panel *p, double F, double S, double O, double pos[3])
{
    for (int i = 0; i < 3; i++) pos[i] = F * p->fdet[i] + S * p->sdet[i] + O * p->odet[i] + p->pix0[i];
    if (plan->curved_detector && plan->distance > 0) {
        double v[3], nv[3];
        for (int i = 0; i < 3; i++) v[i] = plan->distance * plan->beam[i];
        nb_rotate_about(v, nv, p->sdet, pos[1] / plan->distance);
        nb_rotate_about(nv, pos, p->fdet, pos[2] / plan->distance);
    }
}

/* The largest 1/d (1/m) over one panel: its edges, pixel by pixel, on both
 * faces; on a flat panel also where a source's backward ray meets it (the
 * largest angle from a source lies inside a panel only there). */
static double panel_inv_d(const nb_plan *plan, const nb_panel *p, const nb_source *src, int nsrc)
{
    double best = 0, pos[3], w = p->fpixels * p->pixel_size, h = p->spixels * p->pixel_size;
    double faces[2] = {0, p->thick > 0 ? p->thick : 0};
    for (int face = 0; face < (p->thick > 0 ? 2 : 1); face++) {
        double O = faces[face];
        for (int i = 0; i <= p->fpixels; i++) {
            double F = i * p->pixel_size;
            panel_point(plan, p, F, 0, O, pos);
            best = fmax(best, inv_d_at(pos, src, nsrc));
            panel_point(plan, p, F, h, O, pos);
            best = fmax(best, inv_d_at(pos, src, nsrc));
        }
        for (int j = 0; j <= p->spixels; j++) {
            double S = j * p->pixel_size;
            panel_point(plan, p, 0, S, O, pos);
            best = fmax(best, inv_d_at(pos, src, nsrc));
            panel_point(plan, p, w, S, O, pos);
            best = fmax(best, inv_d_at(pos, src, nsrc));
        }
        if (plan->curved_detector) continue;
        for (int k = 0; k < nsrc; k++) {
            /* the ray from the sample along +dir (towards the source) */
            double along = nb_vdot(src[k].dir, p->odet);
            if (along <= 0) continue;
            double t = (nb_vdot(p->pix0, p->odet) + O) / along, hit[3];
            for (int i = 0; i < 3; i++) hit[i] = t * src[k].dir[i] - p->pix0[i] - O * p->odet[i];
            double F = nb_vdot(hit, p->fdet), S = nb_vdot(hit, p->sdet);
            if (F < 0 || F > w || S < 0 || S > h) continue;
            panel_point(plan, p, F, S, O, pos);
            best = fmax(best, inv_d_at(pos, src, nsrc));
        }
    }
    return best;
}

static double detector_inv_d(const nb_plan *plan, const nb_source *src, int nsrc)
{
    double best = 0;
    for (int i = 0; i < plan->npanels; i++) best = fmax(best, panel_inv_d(plan, &plan->panels[i], src, nsrc));
    return best;
}

double nb_detector_dmin(const nb_plan *plan)
{
    double inv = detector_inv_d(plan, plan->sources, plan->nsources);
    if ((plan->stills.on && plan->stills.spikes > 0) || plan->frame_crystals) {
        /* every shot's own spectrum (or frame crystal's wavelength): its shortest wavelengths reach furthest */
        for (long f = 0; f < plan->nframes; f++) {
            nb_source *src = NULL;
            int n = 0;
            if (nb_plan_frame_sources(plan, f, &src, &n)) {
                free(src);
                continue; /* the render would fail on it in the same way, saying so */
            }
            if (src) inv = fmax(inv, detector_inv_d(plan, src, n));
            free(src);
        }
    }
    if (inv <= 0) return 0;
    /* the nearest index of a scattering vector lies within half of the
     * reciprocal cell's longest diagonal of it; the tricubic interpolation
     * reaches two indices further along each axis */
    double diag = 0;
    for (int sb = -1; sb <= 1; sb += 2)
        for (int sc = -1; sc <= 1; sc += 2) {
            double v[3];
            for (int i = 0; i < 3; i++) v[i] = plan->recip_a[i] + sb * plan->recip_b[i] + sc * plan->recip_c[i];
            diag = fmax(diag, nb_vnorm(v));
        }
    double margin = (plan->interpolate ? 2.0 : 0.5) * diag; /* 1/A */
    return 1.0 / (inv * 1e-10 + margin);
}

/* ---- gemmi sfcalc ----------------------------------------------------------- */

/* At most this much of gemmi's output is kept (its last bytes) */
#define GEMMI_OUTPUT_MAX 8192

/* What the program said, on standard output and standard error together, read
 * until it closes them: the last GEMMI_OUTPUT_MAX bytes. */
static void read_output(int fd, nb_strbuf *out)
{
    char buf[4096];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        nb_strbuf_appendn(out, buf, (size_t)n);
        if (out->len > 2 * GEMMI_OUTPUT_MAX) {
            memmove(out->data, out->data + out->len - GEMMI_OUTPUT_MAX, GEMMI_OUTPUT_MAX + 1);
            out->len = GEMMI_OUTPUT_MAX;
        }
    }
}

/* The output's lines without trailing blanks, each after "  " on a line of
 * its own, for a message */
static void indent_lines(const char *text, nb_strbuf *sb)
{
    const char *p = text;
    while (*p) {
        size_t n = strcspn(p, "\n");
        size_t m = n;
        while (m && (p[m - 1] == ' ' || p[m - 1] == '\r' || p[m - 1] == '\t')) m--;
        if (m) {
            nb_strbuf_append(sb, "\n  ");
            nb_strbuf_appendn(sb, p, m);
        }
        p += n + (p[n] == '\n');
    }
}

/* Run argv (argv[0] found on PATH) with standard input /dev/null and both
 * output streams into *out; its wait status in *status. */
static nb_status run_program(char *const argv[], nb_strbuf *out, int *status)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) return nb_error_set(NB_ERR_IO, "cannot make a pipe: %s", strerror(errno));
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, p[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&fa, p[1], STDERR_FILENO);
    /* the child starts with SIGPIPE's default action whatever nb-hkl's is */
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t def;
    sigemptyset(&def);
    sigaddset(&def, SIGPIPE);
    posix_spawnattr_setsigdefault(&attr, &def);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
    pid_t pid;
    int err = posix_spawnp(&pid, argv[0], &fa, &attr, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    close(p[1]);
    if (err) {
        close(p[0]);
        return nb_error_set(NB_ERR_UNSUPPORTED,
                            "-model needs gemmi (Debian's package gemmi: apt-get install gemmi), "
                            "and '%s' cannot be run: %s", argv[0], strerror(err));
    }
    read_output(p[0], out);
    close(p[0]);
    while (waitpid(pid, status, 0) < 0)
        if (errno != EINTR) return nb_error_set(NB_ERR_IO, "waiting for %s: %s", argv[0], strerror(errno));
    return NB_OK;
}

/* What gemmi said, after a message, its lines indented */
static void append_said(nb_strbuf *msg, const char *said)
{
    if (!*said) return;
    nb_strbuf_append(msg, "; it said:");
    indent_lines(said, msg);
}

/* Run gemmi (argv[0]) with argv: a failure is a data error about `model`,
 * with what gemmi said; what a run that worked said, a warning. */
static nb_status gemmi_run(char *const argv[], const char *model)
{
    nb_strbuf out;
    nb_strbuf_init(&out);
    int status = 0;
    nb_status st = run_program(argv, &out, &status);
    const char *said = out.data ? out.data : "";
    if (!st && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        nb_strbuf msg;
        nb_strbuf_init(&msg);
        if (WIFEXITED(status))
            nb_strbuf_printf(&msg, "gemmi %s cannot compute the structure factors of '%s' (exit status %d)", argv[1],
                             model, WEXITSTATUS(status));
        else
            nb_strbuf_printf(&msg, "gemmi %s was killed by signal %d (%s) on '%s'", argv[1], WTERMSIG(status),
                             strsignal(WTERMSIG(status)), model);
        append_said(&msg, said);
        st = nb_error_set(NB_ERR_DATA, "%s", msg.data);
        nb_strbuf_free(&msg);
    } else if (!st && *said) {
        nb_strbuf lines;
        nb_strbuf_init(&lines);
        indent_lines(said, &lines);
        if (lines.data) nb_warn("gemmi %s on '%s' said:%s", argv[1], model, lines.data);
        nb_strbuf_free(&lines);
    }
    nb_strbuf_free(&out);
    return st;
}

static const char *gemmi_program(void)
{
    const char *gemmi = getenv("NB_GEMMI");
    return gemmi && *gemmi ? gemmi : "gemmi";
}

/* A file name for gemmi's command line: a name starting with '-' as ./NAME,
 * not to be read as an option */
static void file_arg(char *buf, size_t n, const char *path)
{
    snprintf(buf, n, "%s%s", path[0] == '-' ? "./" : "", path);
}

/* gemmi sfcalc on `model` to dmin into the MTZ file `mtz`, read back into d:
 * f' at the wavelength or none (--wavelength=0: gemmi would otherwise be free
 * to take one from the file), the bulk solvent */
static nb_status sfcalc(const nb_model_request *rq, const char *model, double dmin, double lambda, const char *mtz,
                        nb_sf_data *d)
{
    char a_dmin[64], a_lambda[64], a_ksol[64], a_bsol[64], a_mtz[4200], a_model[4200];
    char *argv[10];
    int n = 0;
    argv[n++] = (char *)gemmi_program();
    argv[n++] = (char *)"sfcalc";
    snprintf(a_dmin, sizeof a_dmin, "--dmin=%.17g", dmin);
    argv[n++] = a_dmin;
    snprintf(a_lambda, sizeof a_lambda, "--wavelength=%.17g", lambda);
    argv[n++] = a_lambda;
    if (rq->solvent) {
        snprintf(a_ksol, sizeof a_ksol, "--ksolv=%.17g", rq->ksol);
        snprintf(a_bsol, sizeof a_bsol, "--bsolv=%.17g", rq->bsol);
        argv[n++] = a_ksol;
        argv[n++] = a_bsol;
    }
    snprintf(a_mtz, sizeof a_mtz, "--to-mtz=%s", mtz);
    argv[n++] = a_mtz;
    file_arg(a_model, sizeof a_model, model);
    argv[n++] = a_model;
    argv[n] = NULL;
    nb_status st = gemmi_run(argv, rq->path);
    struct stat sb;
    if (st) return st;
    if (stat(mtz, &sb) != 0 || sb.st_size == 0)
        return nb_error_set(NB_ERR_DATA, "gemmi sfcalc wrote no structure factors for '%s'", rq->path);
    if ((st = nb_mtz_read(mtz, "FC", d)))
        nb_error_prefix(st, "reading gemmi sfcalc's structure factors of '%s'", rq->path);
    return st;
}

/* The largest of a |a*|, b |b*|, c |c*| of a cell: 1 for a cell of right
 * angles, more for an oblique one, where an index reaches |a| / d_min along a
 * while 1 / (|a*| d_min) is smaller */
static double obliquity(const double cell[6])
{
    double rad = M_PI / 180, ca = cos(cell[3] * rad), cb = cos(cell[4] * rad), cg = cos(cell[5] * rad);
    double v2 = 1 - ca * ca - cb * cb - cg * cg + 2 * ca * cb * cg;
    if (!(v2 > 0)) return 1;
    double r = 1 / sqrt(v2); /* a b c / V */
    return fmax(fmax(r * sin(cell[3] * rad), r * sin(cell[4] * rad)), fmax(r * sin(cell[5] * rad), 1.0));
}

/* 1/d^2 of an index in a cell (a b c alpha beta gamma) */
static double inv_d2(const double cell[6], int h, int k, int l)
{
    double rad = M_PI / 180, a = cell[0], b = cell[1], c = cell[2];
    double ca = cos(cell[3] * rad), cb = cos(cell[4] * rad), cg = cos(cell[5] * rad);
    double sa = sin(cell[3] * rad), sb = sin(cell[4] * rad), sg = sin(cell[5] * rad);
    double v2 = 1 - ca * ca - cb * cb - cg * cg + 2 * ca * cb * cg;
    return (h * h * sa * sa / (a * a) + k * k * sb * sb / (b * b) + l * l * sg * sg / (c * c) +
            2 * k * l * (cb * cg - ca) / (b * c) + 2 * l * h * (cg * ca - cb) / (c * a) +
            2 * h * k * (ca * cb - cg) / (a * b)) / v2;
}

/* Keep the reflections with d > dmin (gemmi's own rule) */
static void cut_to(nb_sf_data *d, double dmin)
{
    size_t kept = 0;
    for (size_t i = 0; i < d->n; i++) {
        const nb_sf_refl *r = &d->refl[i];
        if (inv_d2(d->cell, r->h, r->k, r->l) < 1 / (dmin * dmin)) d->refl[kept++] = *r;
    }
    d->n = kept;
}

/* The calculation to run->dmin.  gemmi before 0.6.3 (Debian 12 has 0.5.7)
 * keeps |h| <= 1 / (|a*| d_min), which in an oblique cell leaves out indices
 * inside d_min: asked for d_min / obliquity, its limits reach every one, and
 * those beyond d_min are cut here. */
static nb_status compute(const nb_model_request *rq, const char *model, const nb_model_run *run, const char *mtz,
                         nb_sf_data *d)
{
    nb_status st = sfcalc(rq, model, run->dmin, run->lambda, mtz, d);
    double oblique = !st && d->have_cell ? obliquity(d->cell) : 1;
    if (st || oblique <= 1 + 1e-9) return st;
    nb_sf_data_free(d);
    if ((st = sfcalc(rq, model, run->dmin / oblique * (1 - 1e-6), run->lambda, mtz, d))) return st;
    cut_to(d, run->dmin);
    return NB_OK;
}

/* How many indices inside the data's resolution no value of it reaches (not
 * 0 0 0, not absent by symmetry): 0 for a complete calculation */
static nb_status missing_inside(const nb_sf_data *d, const char *path, long *missing)
{
    nb_hkl grid;
    nb_sf_stats s;
    nb_hkl_init(&grid);
    nb_status st = nb_sf_expand(d, path, 0.0, &grid, &s);
    nb_hkl_free(&grid);
    *missing = st ? 0 : s.missing;
    return st;
}

/* ---- temporary files --------------------------------------------------------- */

/* A new empty file in $TMPDIR (else /tmp) named .nb-hkl-model.XXXXXX<suffix>,
 * removed at exit or on a fatal signal unless dropped first (drop_temp) */
static nb_status temp_file(const char *suffix, char **path)
{
    const char *dir = getenv("TMPDIR");
    if (!dir || !*dir) dir = "/tmp";
    size_t n = strlen(dir) + strlen(suffix) + 32;
    if (!(*path = malloc(n))) return nb_error_set(NB_ERR_NOMEM, "out of memory");
    snprintf(*path, n, "%s/.nb-hkl-model.XXXXXX%s", dir, suffix);
    int fd = mkstemps(*path, (int)strlen(suffix));
    if (fd < 0) {
        int e = errno;
        free(*path);
        *path = NULL;
        return nb_error_set(NB_ERR_IO, "cannot make a temporary file in '%s': %s", dir, strerror(e));
    }
    close(fd);
    nb_temp_register(*path);
    return NB_OK;
}

static void drop_temp(char *path)
{
    if (!path) return;
    unlink(path);
    nb_temp_unregister(path);
    free(path);
}

/* ---- the model in P1 ----------------------------------------------------------- */

/* An operator as gemmi's --apply-symop takes it: "-y,x-y,z+1/3" */
static void op_triplet(const nb_sf_op *op, char *buf, size_t n)
{
    static const int dens[] = {1, 2, 3, 4, 6, 8, 12, 24};
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < 3; i++) {
        char part[64];
        size_t p = 0;
        part[0] = '\0';
        for (int j = 0; j < 3; j++)
            if (op->R[i][j]) p += snprintf(part + p, sizeof part - p, "%s%c", op->R[i][j] < 0 ? "-" : p ? "+" : "", "xyz"[j]);
        double t = op->t[i] - floor(op->t[i]);
        for (size_t k = 0; t > 1e-9 && t < 1 - 1e-9 && k < sizeof dens / sizeof dens[0]; k++) {
            double num = t * dens[k];
            if (fabs(num - nearbyint(num)) < 1e-6) {
                p += snprintf(part + p, sizeof part - p, "+%d/%d", (int)nearbyint(num), dens[k]);
                break;
            }
        }
        used += snprintf(buf + used, used < n ? n - used : 0, "%s%s", i ? "," : "", part);
    }
}

/* A line of text: where it starts, its length without the newline */
typedef struct line_span {
    const char *p;
    size_t n;
} line_span;

static int line_starts(line_span l, const char *prefix) { return l.n >= strlen(prefix) && !memcmp(l.p, prefix, strlen(prefix)); }

/* The loop whose first tag starts with `tag` in gemmi's mmCIF text: the
 * offsets of its first data row and of the end of its rows (a blank line, a
 * '#', a tag, loop_ or a data block, or the end of the text); 0 when there is
 * no such loop.  gemmi writes one row per line. */
static int find_rows(const char *text, const char *tag, size_t *rows, size_t *end)
{
    enum { SEARCH, TAGS, ROWS } state = SEARCH;
    int first_tag = 0, match = 0;
    const char *p = text;
    while (*p) {
        line_span l = {p, strcspn(p, "\n")};
        size_t off = (size_t)(p - text);
        int tag_line = l.n && l.p[0] == '_';
        if (state == ROWS) {
            if (!l.n || l.p[0] == '#' || tag_line || line_starts(l, "loop_") || line_starts(l, "data_")) {
                *end = off;
                return 1;
            }
        } else if (line_starts(l, "loop_")) {
            state = TAGS, first_tag = 1;
        } else if (state == TAGS && tag_line) {
            if (first_tag) match = line_starts(l, tag);
            first_tag = 0;
        } else if (state == TAGS && match) {
            state = ROWS;
            *rows = off;
        } else {
            state = SEARCH;
        }
        p += l.n + (p[l.n] == '\n');
    }
    if (state != ROWS) return 0;
    *end = (size_t)(p - text);
    return 1;
}

/* The rows text[rows, end) with each row's first token (an atom's id, an
 * integer) raised by `shift`: every copy's atoms get ids of their own, and
 * its anisotropic ADPs stay with them */
static nb_status append_rows(nb_strbuf *out, const char *text, size_t rows, size_t end, long shift, long *max_id)
{
    const char *p = text + rows, *stop = text + end;
    while (p < stop) {
        size_t n = strcspn(p, "\n");
        if (p + n > stop) n = (size_t)(stop - p);
        char *after;
        long id = strtol(p, &after, 10);
        if (after == p || (*after != ' ' && *after != '\t'))
            return nb_error_set(NB_ERR_DATA, "gemmi convert wrote an atom whose id is not a number: %.*s", (int)n, p);
        if (id > *max_id) *max_id = id;
        nb_strbuf_printf(out, "%ld", id + shift);
        nb_strbuf_appendn(out, after, (size_t)(p + n - after));
        nb_strbuf_append(out, "\n");
        p += n + 1;
    }
    return NB_OK;
}

/* One copy of the model, every atom moved by an operator, as gemmi convert
 * writes it in mmCIF (full precision, ids 1..N) */
static nb_status model_copy(const nb_model_request *rq, const nb_sf_op *op, const char *path, char **text)
{
    char a_op[256], a_in[4200], a_out[4200];
    size_t len;
    snprintf(a_op, sizeof a_op, "--apply-symop=");
    op_triplet(op, a_op + strlen(a_op), sizeof a_op - strlen(a_op));
    file_arg(a_in, sizeof a_in, rq->path);
    snprintf(a_out, sizeof a_out, "%s", path);
    char *argv[] = {(char *)gemmi_program(), (char *)"convert", (char *)"--to=mmcif", a_op, a_in, a_out, NULL};
    nb_status st = gemmi_run(argv, rq->path);
    return st ? st : nb_read_file(path, text, &len);
}

/* The first copy's text, its space group made P 1, and after its atoms
 * (and its anisotropic ADPs) the other copies' */
static const char *copy_loops[] = {"_atom_site.id", "_atom_site_anisotrop.id"};

/* Loop j's rows of copies 1 .. n-1, their ids raised by k * stride */
static nb_status other_rows(char **copies, int n, int j, long stride, nb_strbuf *out)
{
    for (int k = 1; k < n; k++) {
        size_t r = 0, e = 0;
        long max_id = 0;
        if (!find_rows(copies[k], copy_loops[j], &r, &e))
            return nb_error_set(NB_ERR_DATA, "gemmi convert wrote copies of the model that differ");
        nb_status st = append_rows(out, copies[k], r, e, k * stride, &max_id);
        if (st) return st;
    }
    return NB_OK;
}

static nb_status merge_copies(char **copies, int n, nb_strbuf *out)
{
    size_t rows[2] = {0, 0}, end[2] = {0, 0}, total = strlen(copies[0]);
    int have[2];
    for (int j = 0; j < 2; j++) have[j] = find_rows(copies[0], copy_loops[j], &rows[j], &end[j]);
    if (!have[0]) return nb_error_set(NB_ERR_DATA, "gemmi convert wrote no _atom_site loop");
    /* the first copy's largest id: the k-th copy's ids are raised by k times it */
    long stride = 0;
    nb_strbuf scratch;
    nb_strbuf_init(&scratch);
    nb_status st = append_rows(&scratch, copies[0], rows[0], end[0], 0, &stride);
    nb_strbuf_free(&scratch);
    for (const char *p = copies[0]; !st && *p;) {
        line_span l = {p, strcspn(p, "\n")};
        size_t off = (size_t)(p - copies[0]);
        for (int j = 0; j < 2 && !st; j++)
            if (have[j] && off == end[j]) st = other_rows(copies, n, j, stride, out);
        int name_len = (int)strcspn(p, " \t\n");
        if (line_starts(l, "_symmetry.space_group_name_H-M") || line_starts(l, "_space_group.name_H-M_alt"))
            nb_strbuf_printf(out, "%.*s 'P 1'\n", name_len, p);
        else if (line_starts(l, "_symmetry.Int_Tables_number") || line_starts(l, "_space_group.IT_number"))
            nb_strbuf_printf(out, "%.*s 1\n", name_len, p);
        else if (!line_starts(l, "_symmetry.space_group_name_Hall") && !line_starts(l, "_space_group.name_Hall")) {
            nb_strbuf_appendn(out, p, l.n);
            nb_strbuf_append(out, "\n");
        }
        p += l.n + (p[l.n] == '\n');
    }
    for (int j = 0; j < 2 && !st; j++)
        if (have[j] && end[j] == total) st = other_rows(copies, n, j, stride, out);
    return st;
}

/* The model in P1: every operator of the space group (d's, from the first
 * calculation) applied by gemmi convert --apply-symop, all the copies' atoms
 * in one mmCIF file whose space group is P 1, at *p1 */
static nb_status p1_model(const nb_model_request *rq, const nb_sf_data *d, char **p1)
{
    char **copies = calloc((size_t)d->nops, sizeof *copies), *scratch = NULL;
    if (!copies) return nb_error_set(NB_ERR_NOMEM, "out of memory");
    nb_status st = temp_file(".cif", &scratch);
    for (int k = 0; !st && k < d->nops; k++) st = model_copy(rq, &d->ops[k], scratch, &copies[k]);
    drop_temp(scratch);
    nb_strbuf cif;
    nb_strbuf_init(&cif);
    if (!st) st = merge_copies(copies, d->nops, &cif);
    for (int k = 0; k < d->nops; k++) free(copies[k]);
    free(copies);
    if (!st) st = temp_file(".cif", p1);
    if (!st) {
        FILE *fp = fopen(*p1, "wb");
        int ok = fp && fwrite(cif.data, 1, cif.len, fp) == cif.len;
        int e = errno;
        if (fp && fclose(fp) != 0 && ok) ok = 0, e = errno;
        if (!ok) st = nb_error_set(NB_ERR_IO, "cannot write '%s': %s", *p1, strerror(e));
    }
    nb_strbuf_free(&cif);
    return st;
}

/* Whether an index is absent by symmetry in a group: an operator that
 * leaves it as it is (h R = h) with a phase shift h . t off a whole turn */
static int absent(const nb_sf_op *ops, int nops, const int h[3])
{
    for (int k = 0; k < nops; k++) {
        int same = 1;
        for (int j = 0; j < 3 && same; j++)
            same = h[0] * ops[k].R[0][j] + h[1] * ops[k].R[1][j] + h[2] * ops[k].R[2][j] == h[j];
        double turns = h[0] * ops[k].t[0] + h[1] * ops[k].t[1] + h[2] * ops[k].t[2];
        if (same && fabs(turns - nearbyint(turns)) > 1e-6) return 1;
    }
    return 0;
}

/* The P1 calculation's values without the indices absent in the model's
 * own space group (whose F in P1 are rounding's, near 0) */
static void drop_absent(nb_sf_data *d, const nb_sf_op *ops, int nops)
{
    size_t kept = 0;
    for (size_t i = 0; i < d->n; i++) {
        const int h[3] = {d->refl[i].h, d->refl[i].k, d->refl[i].l};
        if (!absent(ops, nops, h)) d->refl[kept++] = d->refl[i];
    }
    d->n = kept;
}

/* ---- the calculation ----------------------------------------------------------- */

/* The resolution and the wavelength of the calculation */
static nb_status plan_run(const nb_plan *plan, const nb_model_request *rq, nb_model_run *run)
{
    memset(run, 0, sizeof *run);
    if (rq->dmin > 0) {
        run->dmin = rq->dmin;
        run->dmin_from = "-dmin";
    } else if (plan->dmin > 0) {
        run->dmin = plan->dmin * 1e10;
        run->dmin_from = "the plan's -dmin";
    } else {
        run->dmin = nb_detector_dmin(plan);
        run->dmin_from = "the detector's edge";
        if (!(run->dmin > 0))
            return nb_error_set(NB_ERR_USAGE, "-model %s: the plan gives no resolution to compute F to: give -dmin",
                                rq->path);
    }
    if (rq->fprime) run->lambda = plan->lambda0 * 1e10;
    return NB_OK;
}

nb_status nb_model_structure_factors(const nb_plan *plan, const nb_model_request *rq, nb_sf_data *d,
                                     nb_model_run *run)
{
    nb_sf_data_init(d);
    /* the model must be a file we can read: gemmi's own words for a missing
     * one differ from version to version */
    FILE *fp = fopen(rq->path, "rb");
    if (!fp) return nb_error_set(NB_ERR_IO, "cannot open '%s': %s", rq->path, strerror(errno));
    fclose(fp);
    struct stat sb;
    if (stat(rq->path, &sb) == 0 && S_ISDIR(sb.st_mode))
        return nb_error_set(NB_ERR_IO, "cannot read '%s': Is a directory", rq->path);
#ifndef NB_HAVE_CCP4
    (void)plan, (void)run;
    return nb_error_set(NB_ERR_UNSUPPORTED, "-model %s: nb-hkl reads gemmi's structure factors (MTZ) with CCP4's "
                        "library, which this nb-hkl was built without (Debian: libccp4-dev)", rq->path);
#endif
    nb_status st = plan_run(plan, rq, run);
    if (st) return st;

    char *mtz = NULL, *p1 = NULL;
    long missing = 0;
    if (!(st = temp_file(".mtz", &mtz)) && !(st = compute(rq, rq->path, run, mtz, d)))
        st = missing_inside(d, rq->path, &missing);
    if (!st && missing > 0) {
        /* gemmi before 0.6.4 skips the reflections of its asymmetric unit
         * with l < 0 (those of the trigonal space groups): the model in P1,
         * whose asymmetric unit has l >= 0, gives them all */
        nb_info("  gemmi sfcalc left out %ld indices inside d_min in %s: computing again in P1", missing,
                d->spacegroup);
        nb_sf_op ops[NB_SF_MAX_OPS];
        int nops = d->nops;
        memcpy(ops, d->ops, sizeof ops);
        if (!(st = p1_model(rq, d, &p1))) {
            nb_sf_data_free(d);
            if (!(st = compute(rq, p1, run, mtz, d))) {
                drop_absent(d, ops, nops);
                /* complete when the model's own operators spread the values
                 * over every index that is not absent in its space group */
                nb_sf_data *view = malloc(sizeof *view);
                if (!view) st = nb_error_set(NB_ERR_NOMEM, "out of memory");
                if (view) {
                    *view = *d;
                    memcpy(view->ops, ops, sizeof ops);
                    view->nops = nops;
                    st = missing_inside(view, rq->path, &missing);
                    free(view);
                }
            }
        }
        if (!st && missing > 0)
            st = nb_error_set(NB_ERR_DATA, "gemmi sfcalc left out %ld indices inside %g A of '%s', in P1 too",
                              missing, run->dmin, rq->path);
    }
    drop_temp(mtz);
    drop_temp(p1);
    if (st) nb_sf_data_free(d);
    return st;
}
