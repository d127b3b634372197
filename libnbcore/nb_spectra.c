/* nb_spectra.c - a shot's own spectrum (nb_spectra.h, docs/physics.md
 * 16.4): per-frame spectra of weighted channels in the plan (FRAME_SPECTRA)
 * and their record arrays, the wavelengths a frame renders, diffBragg's
 * .lam files read and written, and nb-geom -expt_spectra's list. */
#include "nb_spectra.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_stills.h"
#include "nb_util.h"

/* ---- the plan's spectra ------------------------------------------------------- */

nb_status nb_spectrum_check(const double *pairs, int n, const char *who)
{
    if (n < 1 || n > NB_SPECTRUM_MAX_CHANNELS)
        return nb_error_set(NB_ERR_DATA, "%s: %d channels (a spectrum holds 1 .. %d)", who, n,
                            NB_SPECTRUM_MAX_CHANNELS);
    double total = 0.0;
    for (int k = 0; k < n; k++) {
        const double lambda = pairs[2 * k], w = pairs[2 * k + 1];
        if (!(lambda > 0) || !isfinite(lambda))
            return nb_error_set(NB_ERR_DATA, "%s: channel %d's wavelength must be positive", who, k + 1);
        if (!(w >= 0) || !isfinite(w))
            return nb_error_set(NB_ERR_DATA, "%s: channel %d's weight must be 0 or more", who, k + 1);
        total += w;
    }
    if (!(total > 0) || !isfinite(total)) return nb_error_set(NB_ERR_DATA, "%s: every weight is 0", who);
    return NB_OK;
}

double nb_spectrum_mean(const double *pairs, int n)
{
    double sw = 0.0, swl = 0.0;
    for (int k = 0; k < n; k++) sw += pairs[2 * k + 1], swl += pairs[2 * k + 1] * pairs[2 * k];
    return sw > 0 ? swl / sw : 0.0;
}

static int cmp_pair(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

nb_status nb_spectrum_channels(const double *pairs, int n, double *lambda, int *count)
{
    const double mean = nb_spectrum_mean(pairs, n);
    double *c;
    int m = 0, equal = 1;
    *count = 0;
    nb_status st = nb_calloc((void **)&c, 2 * (size_t)(n > 0 ? n : 1), sizeof *c, "the frame's spectrum");
    if (st) return st;
    /* the channels of some weight, in wavelength order */
    for (int k = 0; k < n; k++)
        if (pairs[2 * k + 1] > 0) c[2 * m] = pairs[2 * k], c[2 * m + 1] = pairs[2 * k + 1], m++;
    qsort(c, (size_t)m, 2 * sizeof *c, cmp_pair);
    for (int k = 1; k < m; k++) equal &= c[2 * k + 1] == c[1];
    /* the weights' cumulative sum through each channel's middle, C_k (equal
     * weights: C_k = (k + 1/2)/m, each channel its own quantile) */
    double total = 0.0, below = 0.0;
    for (int k = 0; k < m; k++) total += c[2 * k + 1];
    for (int k = 0; k < m; k++) {
        const double w = c[2 * k + 1];
        c[2 * k + 1] = (below + 0.5 * w) / total;
        below += w;
    }
    for (int j = 0, k = 0; j < m; j++) {
        if (equal) {
            lambda[j] = c[2 * j] / mean;
            continue;
        }
        const double u = (j + 0.5) / m;
        while (k + 1 < m && c[2 * (k + 1) + 1] <= u) k++;
        double l = c[2 * k];
        if (u > c[2 * k + 1] && k + 1 < m)
            l += (u - c[2 * k + 1]) / (c[2 * (k + 1) + 1] - c[2 * k + 1]) * (c[2 * (k + 1)] - c[2 * k]);
        lambda[j] = l / mean;
    }
    free(c);
    *count = m;
    return NB_OK;
}

int nb_plan_frame_spectrum(const nb_plan *p, long frame, const double **pairs)
{
    *pairs = NULL;
    if (!p->frame_nchannels || frame < 0 || frame >= p->nframes) return 0;
    size_t at = 0;
    for (long f = 0; f < frame; f++) at += (size_t)p->frame_nchannels[f];
    *pairs = p->frame_spectra + 2 * at;
    return p->frame_nchannels[frame];
}

nb_status nb_plan_frame_spectrum_pairs(const nb_plan *p, long frame, double **pairs, int *n)
{
    const double *stored;
    int m = nb_plan_frame_spectrum(p, frame, &stored);
    *pairs = NULL;
    *n = 0;
    nb_still_shot shot;
    if (!m && p->stills.on && p->stills.spikes > 0) {
        nb_still_draw(p, frame, &shot);
        m = shot.spikes;
    }
    if (!m) return NB_OK;
    nb_status st = nb_calloc((void **)pairs, 2 * (size_t)m, sizeof **pairs, "the frame's spectrum");
    if (st) return st;
    if (stored) {
        /* scaled to the frame crystal's wavelength (nb_spectra.h) */
        const double r = p->frame_crystals[frame].lambda / nb_spectrum_mean(stored, m);
        for (int k = 0; k < m; k++) (*pairs)[2 * k] = stored[2 * k] * r, (*pairs)[2 * k + 1] = stored[2 * k + 1];
    } else {
        for (int k = 0; k < m; k++) (*pairs)[2 * k] = p->lambda0 * (1.0 + shot.spike[k]), (*pairs)[2 * k + 1] = 1.0;
    }
    *n = m;
    return NB_OK;
}

/* counts and pairs into p (its own copies), each frame's checked */
static nb_status spectra_set(nb_plan *p, const int *counts, const double *pairs, const char *who)
{
    if (p->nframes < 1 || !p->frame_crystals)
        return nb_error_set(NB_ERR_DATA, "%s: per-frame spectra need frame crystals (each frame's wavelength: "
                                         "FRAME_CRYSTALS, as nb-geom -expt makes them)", who);
    size_t total = 0;
    for (long f = 0; f < p->nframes; f++) {
        char what[160];
        snprintf(what, sizeof what, "%s: frame %ld's spectrum", who, f + 1);
        nb_status st = nb_spectrum_check(pairs + 2 * total, counts[f], what);
        if (st) return st;
        total += (size_t)counts[f];
    }
    int *n;
    double *w;
    nb_status st = nb_calloc((void **)&n, (size_t)p->nframes, sizeof *n, "the frames' spectra");
    if (st) return st;
    if ((st = nb_calloc((void **)&w, 2 * total, sizeof *w, "the frames' spectra"))) {
        free(n);
        return st;
    }
    memcpy(n, counts, (size_t)p->nframes * sizeof *n);
    memcpy(w, pairs, 2 * total * sizeof *w);
    free(p->frame_nchannels);
    free(p->frame_spectra);
    p->frame_nchannels = n, p->frame_spectra = w;
    return NB_OK;
}

nb_status nb_plan_set_frame_spectra(nb_plan *p, const int *counts, const double *pairs)
{
    return spectra_set(p, counts, pairs, "frame spectra");
}

nb_status nb_frame_spectra_to_record(const nb_plan *p, nb_record *rec)
{
    if (!p->frame_nchannels) return NB_OK;
    uint32_t *n;
    size_t total = 0;
    nb_hdr_set_long(rec, "FRAME_SPECTRA", p->nframes);
    nb_status st = nb_record_add_array(rec, "frame_spectra_n", NB_U32, (size_t)p->nframes, NB_ARRAY_UNINITIALISED,
                                       (void **)&n);
    if (st) return st;
    for (long f = 0; f < p->nframes; f++) n[f] = (uint32_t)p->frame_nchannels[f], total += n[f];
    return nb_record_add_array(rec, "frame_spectra", NB_F64, 2 * total, p->frame_spectra, NULL);
}

nb_status nb_frame_spectra_from_record(const nb_record *rec, nb_plan *p)
{
    static const char who[] = "PLAN record: FRAME_SPECTRA";
    nb_status st;
    int nf;
    if (!nb_hdr_has(rec, "FRAME_SPECTRA")) {
        if (nb_record_has_array(rec, "frame_spectra") || nb_record_has_array(rec, "frame_spectra_n"))
            return nb_error_set(NB_ERR_DATA, "PLAN record: a frame_spectra array without FRAME_SPECTRA");
        return NB_OK;
    }
    if ((st = nb_hdr_get_int(rec, "FRAME_SPECTRA", &nf))) return st;
    if (nf != p->nframes) return nb_error_set(NB_ERR_DATA, "%s must be NFRAMES (%d)", who, p->nframes);
    const void *nd, *wd;
    size_t ncount, wcount, total = 0;
    if ((st = nb_record_get_array(rec, "frame_spectra_n", NB_U32, &nd, &ncount)) ||
        (st = nb_record_get_array(rec, "frame_spectra", NB_F64, &wd, &wcount)))
        return st;
    if (ncount != (size_t)nf) return nb_error_set(NB_ERR_DATA, "%s: frame_spectra_n does not hold NFRAMES counts", who);
    int *counts;
    if ((st = nb_calloc((void **)&counts, (size_t)nf, sizeof *counts, "the frames' spectra"))) return st;
    const uint32_t *n = nd;
    for (int f = 0; f < nf; f++) {
        counts[f] = n[f] > NB_SPECTRUM_MAX_CHANNELS ? NB_SPECTRUM_MAX_CHANNELS + 1 : (int)n[f];
        total += (size_t)counts[f];
    }
    if (wcount != 2 * total)
        st = nb_error_set(NB_ERR_DATA, "%s: frame_spectra does not hold 2 numbers per channel", who);
    if (!st) st = spectra_set(p, counts, wd, who);
    free(counts);
    return st;
}

/* ---- .lam files ------------------------------------------------------------ */

/* One line's two numbers, wavelength and weight, comma or blank separated
 * (trailing blanks and a CR allowed): 1, else 0 */
static int two_numbers(const char *s, double *a, double *b)
{
    char *end;
    errno = 0;
    *a = strtod(s, &end);
    if (end == s) return 0;
    s = end;
    while (*s == ' ' || *s == '\t') s++;
    if (*s == ',') s++;
    *b = strtod(s, &end);
    if (end == s || errno == ERANGE) return 0;
    for (s = end; *s; s++)
        if (!isspace((unsigned char)*s)) return 0;
    return 1;
}

/* Is the line empty or a comment? */
static int blank_line(const char *s)
{
    while (*s == ' ' || *s == '\t' || *s == '\r') s++;
    return *s == '\0' || *s == '#';
}

/* text's channels (NUL-terminated lines, edited in place) into pairs[] (room for the cap) */
static nb_status lam_parse(const char *path, char *text, double *pairs, int *n)
{
    int line = 0, last = 0;
    double total = 0.0;
    *n = 0;
    for (char *s = text, *next; s && *s; s = next) {
        next = strchr(s, '\n');
        if (next) *next++ = '\0';
        line++;
        double lambda, w;
        if (blank_line(s)) continue;
        if (!two_numbers(s, &lambda, &w)) {
            if (line == 1) continue; /* a header: diffBragg skips its first line */
            return nb_error_set(NB_ERR_DATA, "'%s' line %d: not a channel (wavelength in Angstrom, weight)", path, line);
        }
        if (!(lambda > 0) || !isfinite(lambda))
            return nb_error_set(NB_ERR_DATA, "'%s' line %d: the wavelength must be positive", path, line);
        if (!(w >= 0) || !isfinite(w))
            return nb_error_set(NB_ERR_DATA, "'%s' line %d: the weight must be 0 or more", path, line);
        if (*n == NB_SPECTRUM_MAX_CHANNELS)
            return nb_error_set(NB_ERR_DATA, "'%s' line %d: more than %d channels (the cap: render time grows with "
                                             "them, docs/physics.md 16.4)", path, line, NB_SPECTRUM_MAX_CHANNELS);
        pairs[2 * *n] = lambda * 1e-10, pairs[2 * *n + 1] = w;
        ++*n, total += w, last = line;
    }
    if (*n == 0)
        return nb_error_set(NB_ERR_DATA, "'%s' line %d: the file ends with no channel (wavelength, weight)", path,
                            line + 1);
    if (!(total > 0) || !isfinite(total))
        return nb_error_set(NB_ERR_DATA, "'%s' line %d: every weight up to here is 0 (no light)", path, last);
    return NB_OK;
}

nb_status nb_spectrum_read_lam(const char *path, double **pairs, int *n)
{
    char *text;
    size_t len;
    *pairs = NULL;
    *n = 0;
    nb_status st = nb_read_file(path, &text, &len);
    if (st) return st;
    if (memchr(text, '\0', len)) st = nb_error_set(NB_ERR_DATA, "'%s' is not text (it holds a NUL byte)", path);
    if (!st) st = nb_calloc((void **)pairs, 2 * NB_SPECTRUM_MAX_CHANNELS, sizeof **pairs, "the spectrum");
    if (!st) st = lam_parse(path, text, *pairs, n);
    free(text);
    if (st) {
        free(*pairs);
        *pairs = NULL, *n = 0;
    }
    return st;
}

void nb_spectrum_lam_text(const double *pairs, int n, nb_strbuf *sb)
{
    /* numpy.savetxt's header, as diffBragg's save_spectra_file writes it;
     * 17 digits: the wavelengths come back as they went */
    nb_strbuf_append(sb, "# wavelengths, weights\n");
    for (int k = 0; k < n; k++) nb_strbuf_printf(sb, "%.17g,%.17g\n", pairs[2 * k] * 1e10, pairs[2 * k + 1]);
}

/* ---- nb-geom -expt_spectra -------------------------------------------------- */

/* The .lam path of a list's line (one path, or "expt refl spec"), relative to
 * the list's directory: 1 and out filled; 0: a blank line; -1: neither */
static int list_entry(const char *list, char *line, char *out, size_t size)
{
    char *field[4];
    int nfields = 0;
    for (char *tok = strtok(line, " \t\r"); tok; tok = strtok(NULL, " \t\r"))
        if (nfields < 4) field[nfields++] = tok;
        else nfields = 5;
    if (nfields == 0 || field[0][0] == '#') return 0;
    if (nfields != 1 && nfields != 3) return -1;
    const char *path = field[nfields - 1], *slash = strrchr(list, '/');
    int w = path[0] == '/' || !slash ? snprintf(out, size, "%s", path)
                                     : snprintf(out, size, "%.*s/%s", (int)(slash - list), list, path);
    return w >= 0 && (size_t)w < size ? 1 : -1;
}

/* The list's .lam files read, frame after frame, into counts and *pairs (grown) */
static nb_status read_list(const char *list, char *text, long nframes, int *counts, double **pairs, size_t *total)
{
    nb_status st = NB_OK;
    long f = 0;
    int line = 0;
    *total = 0;
    for (char *s = text, *next; s && *s && !st; s = next) {
        next = strchr(s, '\n');
        if (next) *next++ = '\0';
        line++;
        char path[NB_PATH_MAX];
        const int got = list_entry(list, s, path, sizeof path);
        if (got < 0)
            return nb_error_set(NB_ERR_DATA, "'%s' line %d: neither a .lam path nor diffBragg's 'expt refl spec'",
                                list, line);
        if (!got) continue;
        if (f == nframes)
            return nb_error_set(NB_ERR_DATA, "'%s' line %d: more spectra than experiments (%ld)", list, line, nframes);
        double *one;
        if ((st = nb_spectrum_read_lam(path, &one, &counts[f]))) return st;
        double *grown = realloc(*pairs, 2 * (*total + (size_t)counts[f]) * sizeof *grown);
        if (!grown) {
            free(one);
            return nb_error_set(NB_ERR_NOMEM, "out of memory for the spectra");
        }
        *pairs = grown;
        memcpy(*pairs + 2 * *total, one, 2 * (size_t)counts[f] * sizeof *one);
        *total += (size_t)counts[f++];
        free(one);
    }
    if (f != nframes)
        return nb_error_set(NB_ERR_DATA, "'%s' names %ld spectra, the experiment list has %ld experiments", list, f,
                            nframes);
    return NB_OK;
}

nb_status nb_plan_take_expt_spectra(const char *list, nb_plan *plan)
{
    if (!plan->frame_crystals)
        return nb_error_set(NB_ERR_USAGE, "-expt_spectra: a spectrum per still (an experiment list of stills); a "
                                          "sweep's frames share the plan's beam (-expt with a scan)");
    char *text;
    size_t len, total;
    int *counts;
    double *pairs = NULL;
    nb_status st = nb_read_file(list, &text, &len);
    if (st) return st;
    if ((st = nb_calloc((void **)&counts, (size_t)plan->nframes, sizeof *counts, "the spectra"))) {
        free(text);
        return st;
    }
    st = read_list(list, text, plan->nframes, counts, &pairs, &total);
    /* the frame's wavelength is its spectrum's mean (the experiment's beam a
     * nominal one: diffBragg renders the spectrum as it is) */
    for (long f = 0, at = 0; !st && f < plan->nframes; at += counts[f++])
        plan->frame_crystals[f].lambda = nb_spectrum_mean(pairs + 2 * at, counts[f]);
    if (!st) st = spectra_set(plan, counts, pairs, "-expt_spectra");
    free(text);
    free(counts);
    free(pairs);
    return st;
}
