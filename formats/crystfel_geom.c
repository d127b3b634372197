/* A CrystFEL geometry file for images written by nb-convert: the plan's
 * detector as its panels p0, p1 ... (laid out as nb-convert's raw float
 * file holds them: one after another along the slow axis), and the reader
 * of such files for nb-geom -panels (below).
 *
 * CrystFEL's laboratory frame has z along the beam and x, y across it.  Here
 * z is the plan's beam, x the polarization (E) direction made perpendicular
 * to the beam (horizontal at a synchrotron), y = z cross x: a rotation of
 * nanoBragg's frame, so the panel's corner and its fast and slow directions
 * are the plan's pix0, fdet and sdet in that basis.  corner_x/y are in
 * pixels, clen is the corner's z in metres, and fs/ss keep their z parts
 * for a tilted detector. */
#include "crystfel_geom.h"

#include <math.h>
#include <stdio.h>

#include "nb_util.h"

static double dot(const double a[3], const double b[3]) { return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]; }

static void unit(double a[3])
{
    double n = sqrt(dot(a, a));
    if (n > 0)
        for (int i = 0; i < 3; i++) a[i] /= n;
}

nb_status nb_crystfel_geom_write(const char *path, const nb_plan *p, int max_adu, double adu_per_photon)
{
    double ez[3] = {p->beam[0], p->beam[1], p->beam[2]}, ex[3], ey[3];
    unit(ez);
    double along = dot(p->polar_vector, ez);
    for (int i = 0; i < 3; i++) ex[i] = p->polar_vector[i] - along * ez[i];
    if (dot(ex, ex) < 1e-20) { /* a polarization along the beam: any perpendicular */
        double t[3] = {fabs(ez[0]) < 0.9 ? 1.0 : 0.0, fabs(ez[0]) < 0.9 ? 0.0 : 1.0, 0.0};
        along = dot(t, ez);
        for (int i = 0; i < 3; i++) ex[i] = t[i] - along * ez[i];
    }
    unit(ex);
    ey[0] = ez[1] * ex[2] - ez[2] * ex[1];
    ey[1] = ez[2] * ex[0] - ez[0] * ex[2];
    ey[2] = ez[0] * ex[1] - ez[1] * ex[0];
    const double px = p->panels[0].pixel_size;

    nb_strbuf sb;
    nb_strbuf_init(&sb);
    nb_strbuf_printf(&sb, "; CrystFEL geometry for images written by nb-convert (nb toolkit %s)\n", NB_VERSION);
    if (p->command_line) nb_strbuf_printf(&sb, "; plan: %s\n", p->command_line);
    nb_strbuf_printf(&sb, "; laboratory frame: z along the beam, x along the polarization\n\n");
    nb_strbuf_printf(&sb, "photon_energy = %.6f\n", 12398.419843320026 / (p->lambda0 * 1e10));
    nb_strbuf_printf(&sb, "adu_per_photon = %.10g\n", adu_per_photon > 0 ? adu_per_photon : 1.0);
    nb_strbuf_printf(&sb, "res = %.6f\n", 1.0 / px);
    /* the panels as the raw float file lays them out: one after another,
     * which is one image of the common width, panel i from row `row` on */
    int row = 0;
    for (int i = 0; i < nb_plan_npanels(p); i++) {
        nb_plan v;
        nb_plan_panel_view(p, i, &v);
        if (v.panels[0].fpixels != p->panels[0].fpixels || v.panels[0].pixel_size != px) {
            nb_strbuf_free(&sb);
            return nb_error_set(NB_ERR_UNSUPPORTED, "'%s': panels of different widths or pixel sizes cannot be laid "
                                                    "out in one CrystFEL data block", path);
        }
        nb_strbuf_printf(&sb, "\np%d/min_fs = 0\np%d/max_fs = %d\np%d/min_ss = %d\np%d/max_ss = %d\n", i, i,
                         v.panels[0].fpixels - 1, i, row, i, row + v.panels[0].spixels - 1);
        nb_strbuf_printf(&sb, "p%d/corner_x = %.6f\n", i, dot(v.panels[0].pix0, ex) / px);
        nb_strbuf_printf(&sb, "p%d/corner_y = %.6f\n", i, dot(v.panels[0].pix0, ey) / px);
        nb_strbuf_printf(&sb, "p%d/clen = %.9f\n", i, dot(v.panels[0].pix0, ez));
        nb_strbuf_printf(&sb, "p%d/coffset = 0.0\n", i);
        nb_strbuf_printf(&sb, "p%d/fs = %+.8fx %+.8fy %+.8fz\n", i, dot(v.panels[0].fdet, ex),
                         dot(v.panels[0].fdet, ey), dot(v.panels[0].fdet, ez));
        nb_strbuf_printf(&sb, "p%d/ss = %+.8fx %+.8fy %+.8fz\n", i, dot(v.panels[0].sdet, ex),
                         dot(v.panels[0].sdet, ey), dot(v.panels[0].sdet, ez));
        nb_strbuf_printf(&sb, "p%d/max_adu = %d\n", i, max_adu);
        row += v.panels[0].spixels;
    }

    nb_status st = nb_write_text_file(path, sb.data, sb.len);
    nb_strbuf_free(&sb);
    return st;
}

/* ---- reading (nb-geom -panels FILE.geom) ----------------------------------
 * The panels of a CrystFEL geometry file in its laboratory frame (metres):
 * pixel (fs, ss) of a panel lies at corner + fs * fs_vector + ss * ss_vector
 * pixels, at z = clen + coffset, so pix0 = (corner_x / res, corner_y / res,
 * clen + coffset) and the fast and slow axes are the fs and ss vectors.  The
 * frame is tied to the plan's as the writer above ties it (z the beam, x
 * across it along the polarization), so that writing a plan's detector and
 * reading it back gives the same panels.  A global key applies to the panels
 * first named after it, as in CrystFEL.  Keys about the data layout, the
 * counts or the beam are accepted and ignored; a bad region, a clen read from
 * the data file or a key CrystFEL does not have is an error. */
#include <stdlib.h>
#include <string.h>

#include "detector_file.h"
#include "frame_write.h"

typedef struct geom_panel {
    char name[64];
    double min_fs, max_fs, min_ss, max_ss, corner_x, corner_y, res, clen, coffset;
    double fs[3], ss[3];
} geom_panel;

/* "+0.5x -0.866y +0.01z" (terms in any order; a bare "x" is 1) into v */
static int parse_axis(const char *s, double v[3])
{
    v[0] = v[1] = v[2] = 0.0;
    int terms = 0;
    while (*s) {
        while (*s == ' ' || *s == '\t') s++;
        if (!*s) break;
        char *end;
        double c = 1.0;
        if ((*s == '+' || *s == '-') && (s[1] == 'x' || s[1] == 'y' || s[1] == 'z')) c = *s++ == '-' ? -1.0 : 1.0;
        else if (*s != 'x' && *s != 'y' && *s != 'z') {
            c = strtod(s, &end);
            if (end == s) return -1;
            s = end;
        }
        while (*s == ' ') s++;
        if (*s != 'x' && *s != 'y' && *s != 'z') return -1;
        v[*s - 'x'] += c;
        s++;
        terms++;
    }
    return terms ? 0 : -1;
}

/* Keys that say nothing of where the pixels are: accepted, not used. */
static int ignored_key(const char *k)
{
    static const char *exact[] = {"adu_per_eV", "adu_per_photon", "max_adu", "photon_energy", "data", "mask",
                                  "mask_file", "mask_good", "mask_bad", "no_index", "bandwidth", "wavelength",
                                  "photon_energy_scale", "peak_list", "peak_list_type", "saturation_map",
                                  "saturation_map_file", NULL};
    static const char *prefix[] = {"dim", "rigid_group", "flag_", "mask", NULL};
    for (int i = 0; exact[i]; i++)
        if (!strcmp(k, exact[i])) return 1;
    for (int i = 0; prefix[i]; i++)
        if (!strncmp(k, prefix[i], strlen(prefix[i]))) return 1;
    return 0;
}

/* key = value into a panel (or the defaults); -1 for a key not known. */
static nb_status set_key(geom_panel *p, const char *key, const char *val, const char *name, int line)
{
    struct { const char *k; double *dst; } nums[] = {
        {"min_fs", &p->min_fs}, {"max_fs", &p->max_fs}, {"min_ss", &p->min_ss}, {"max_ss", &p->max_ss},
        {"corner_x", &p->corner_x}, {"corner_y", &p->corner_y}, {"res", &p->res}, {"clen", &p->clen},
        {"coffset", &p->coffset}};
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        if (strcmp(key, nums[i].k)) continue;
        char *end;
        double v = strtod(val, &end);
        if (end == val || *end || !isfinite(v))
            return nb_error_set(!strcmp(key, "clen") ? NB_ERR_UNSUPPORTED : NB_ERR_DATA,
                                "'%s' line %d: %s = '%s' is not a number%s", name, line, key, val,
                                !strcmp(key, "clen") ? " (a camera length read from the data is not supported)" : "");
        *nums[i].dst = v;
        return NB_OK;
    }
    if (!strcmp(key, "fs") || !strcmp(key, "ss")) {
        if (parse_axis(val, !strcmp(key, "fs") ? p->fs : p->ss))
            return nb_error_set(NB_ERR_DATA, "'%s' line %d: %s = '%s' is not a direction such as +1.0x -0.2y", name,
                                line, key, val);
        return NB_OK;
    }
    if (ignored_key(key)) return NB_OK;
    return nb_error_set(NB_ERR_UNSUPPORTED, "'%s' line %d: the key '%s' is not supported", name, line, key);
}

/* The panel named so, made (from the current defaults) when first named. */
static nb_status find_panel(geom_panel **list, int *n, const char *pname, const geom_panel *defaults, geom_panel **out)
{
    for (int i = 0; i < *n; i++)
        if (!strcmp((*list)[i].name, pname)) {
            *out = &(*list)[i];
            return NB_OK;
        }
    if (*n >= 4096) return nb_error_set(NB_ERR_DATA, "more than 4096 panels");
    /* a longer name, cut, would never match itself again */
    if (strlen(pname) >= sizeof (*list)->name)
        return nb_error_set(NB_ERR_DATA, "the panel name '%.20s...' is longer than %d characters",
                            pname, (int)sizeof (*list)->name - 1);
    geom_panel *grown = realloc(*list, (size_t)(*n + 1) * sizeof **list);
    if (!grown) return nb_error_set(NB_ERR_NOMEM, "out of memory reading a geometry file");
    *list = grown;
    grown[*n] = *defaults;
    memcpy(grown[*n].name, pname, strlen(pname) + 1);
    *out = &grown[(*n)++];
    return NB_OK;
}

/* The panels read into the detector, in the order they were first named. */
static nb_status geom_to_detector(const geom_panel *g, int n, const char *name, nb_detector_file *out)
{
    nb_status st = nb_calloc((void **)&out->panels, (size_t)n, sizeof *out->panels, "panels");
    if (st) return st;
    out->npanels = n;
    for (int i = 0; i < n && !st; i++) {
        nb_panel *q = &out->panels[i];
        double w = g[i].max_fs - g[i].min_fs + 1, h = g[i].max_ss - g[i].min_ss + 1;
        if (!(w >= 1 && h >= 1 && w <= 1000000 && h <= 1000000) || w != floor(w) || h != floor(h))
            st = nb_error_set(NB_ERR_DATA, "'%s': panel %s needs min_fs, max_fs, min_ss and max_ss", name, g[i].name);
        else if (!(g[i].res > 0))
            st = nb_error_set(NB_ERR_DATA, "'%s': panel %s needs res (pixels per metre)", name, g[i].name);
        if (st) break;
        q->fpixels = (int)w, q->spixels = (int)h;
        q->pixel_size = 1.0 / g[i].res;
        for (int k = 0; k < 3; k++) q->fdet[k] = g[i].fs[k], q->sdet[k] = g[i].ss[k];
        q->pix0[0] = g[i].corner_x * q->pixel_size;
        q->pix0[1] = g[i].corner_y * q->pixel_size;
        q->pix0[2] = g[i].clen + g[i].coffset;
        q->thick = -1.0; /* CrystFEL knows no sensor: the flags' */
    }
    out->beam[2] = 1.0;
    out->second[0] = 1.0;
    out->tie = NB_TIE_POLAR;
    return st;
}

nb_status nb_crystfel_geom_parse(const char *text, const char *name, nb_detector_file *out)
{
    geom_panel defaults, *list = NULL;
    memset(&defaults, 0, sizeof defaults);
    defaults.min_fs = defaults.min_ss = 0, defaults.max_fs = defaults.max_ss = -1;
    defaults.fs[0] = 1.0, defaults.ss[1] = 1.0;
    int n = 0, line = 0;
    nb_status st = NB_OK;
    memset(out, 0, sizeof *out);
    for (const char *p = text; *p && !st; line++) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        char buf[1024];
        if (len >= sizeof buf) len = sizeof buf - 1;
        memcpy(buf, p, len);
        buf[len] = '\0';
        p += len + (eol != NULL);
        char *semi = strchr(buf, ';');
        if (semi) *semi = '\0';
        char *eq = strchr(buf, '=');
        char *key = buf, *val = eq ? eq + 1 : NULL;
        if (eq) *eq = '\0';
        while (*key == ' ' || *key == '\t') key++;
        for (char *e = key + strlen(key); e > key && strchr(" \t\r", e[-1]); e--) e[-1] = '\0';
        if (!*key && !val) continue;
        if (!val || !*key)
            st = nb_error_set(NB_ERR_DATA, "'%s' line %d: expected 'key = value'", name, line + 1);
        if (st) break;
        while (*val == ' ' || *val == '\t') val++;
        for (char *e = val + strlen(val); e > val && strchr(" \t\r", e[-1]); e--) e[-1] = '\0';
        char *slash = strchr(key, '/');
        geom_panel *target = &defaults;
        if (slash) {
            *slash = '\0';
            if (!strncmp(key, "bad", 3)) {
                st = nb_error_set(NB_ERR_UNSUPPORTED, "'%s' line %d: bad regions (%s) are not supported", name,
                                  line + 1, key);
                break;
            }
            if (!strncmp(key, "rigid_group", 11)) continue;
            if ((st = find_panel(&list, &n, key, &defaults, &target))) break;
            key = slash + 1;
        }
        st = set_key(target, key, val, name, line + 1);
    }
    if (!st && n == 0) st = nb_error_set(NB_ERR_DATA, "'%s' names no panel (panel/min_fs = ...)", name);
    if (!st) st = geom_to_detector(list, n, name, out);
    free(list);
    if (st) nb_detector_file_free(out);
    return st;
}

/* ---- the registry's sidecar writer ------------------------------------------- */

/* The frame plan's detector, its counts' top and gain the frame's */
nb_status nb_crystfel_geom_write_sidecar(const char *path, const nb_frame *fr, const nb_write_opts *o)
{
    char *target = NULL;
    nb_status st = o->claim(path, 0, &target);
    if (st) return st;
    nb_info("writing %s", path);
    st = nb_crystfel_geom_write(target, fr->plan, fr->counts && fr->counts_bits == 32 ? 2147483647 : 65535,
                                fr->counts && fr->im->has.counts_gain ? fr->im->counts_gain : 1.0);
    free(target);
    return st;
}
