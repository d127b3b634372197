/* mtz.c - structure factors from MTZ files through CCP4's cmtzlib (never a
 * reader of our own): the columns offered to -column, the chosen ones'
 * values with their Miller indices, the file's symmetry operators and cell,
 * handed to sf_expand.c; a file's symmetry alone; and nb-fit's refined
 * amplitudes and measured (unmerged) intensities written as MTZ (cmtzlib's
 * writer too, its csymlib for the asymmetric unit and M/ISYM). */
#include "mtz.h"

#ifdef NB_HAVE_CCP4

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ccp4/ccp4_errno.h>
#include <ccp4/cmtzlib.h>

#include "ccp4.h"
#include "nb_util.h"

#define MAX_COLS 1024

/* the file's columns: the three index columns (type H) and the data ones */
typedef struct mtz_cols {
    MTZCOL *hkl[3];
    int nhkl, n;
    MTZCOL *col[MAX_COLS];
    MTZXTAL *xtal[MAX_COLS];
    nb_sf_col list[MAX_COLS];
} mtz_cols;

static void collect(MTZ *mtz, mtz_cols *c)
{
    memset(c, 0, sizeof *c);
    for (int x = 0; x < mtz->nxtal; x++)
        for (int s = 0; s < mtz->xtal[x]->nset; s++)
            for (int k = 0; k < mtz->xtal[x]->set[s]->ncol; k++) {
                MTZCOL *col = mtz->xtal[x]->set[s]->col[k];
                char t = col->type[0];
                if (t == 'H' && c->nhkl < 3) c->hkl[c->nhkl++] = col;
                if ((t != 'F' && t != 'J' && t != 'G' && t != 'K') || c->n == MAX_COLS) continue;
                c->col[c->n] = col;
                c->xtal[c->n] = mtz->xtal[x];
                c->list[c->n].name = col->label;
                c->list[c->n].type = t;
                c->n++;
            }
}

/* the file's operators (x' = R x + t: sym[i][row][0..2], t in [i][row][3]) */
static nb_status mtz_ops(const MTZ *mtz, const char *path, nb_sf_data *d)
{
    if (mtz->mtzsymm.nsym < 1 || mtz->mtzsymm.nsym > NB_SF_MAX_OPS)
        return nb_error_set(NB_ERR_DATA, "'%s': %d symmetry operators", path, mtz->mtzsymm.nsym);
    for (int i = 0; i < mtz->mtzsymm.nsym; i++) {
        double R[3][3], t[3];
        for (int r = 0; r < 3; r++) {
            for (int c = 0; c < 3; c++) R[r][c] = mtz->mtzsymm.sym[i][r][c];
            t[r] = mtz->mtzsymm.sym[i][r][3];
        }
        nb_status st = nb_sf_add_op(d, R, t);
        if (st) return nb_error_prefix(st, "'%s'", path);
    }
    snprintf(d->spacegroup, sizeof d->spacegroup, "%s", mtz->mtzsymm.spcgrpname);
    return NB_OK;
}

/* one value: missing (the file's flag) skipped, intensities to amplitudes */
static nb_status take(const MTZ *mtz, const char *path, nb_sf_data *d, const int h[3], char part, float v,
                      const char *label)
{
    if (ccp4_ismnf(mtz, v)) {
        d->unread++;
        return NB_OK;
    }
    if (!isfinite(v))
        return nb_error_set(NB_ERR_DATA, "'%s': column %s at %d %d %d is not a finite number", path, label, h[0],
                            h[1], h[2]);
    double F = (d->type == 'J' || d->type == 'K') ? nb_sf_amplitude(v) : (double)v;
    return nb_sf_add(d, h[0], h[1], h[2], part, F);
}

static nb_status read_values(const MTZ *mtz, const char *path, const mtz_cols *c, const nb_sf_pick *p, nb_sf_data *d)
{
    nb_status st = NB_OK;
    MTZCOL *plus = c->col[p->plus], *minus = p->minus >= 0 ? c->col[p->minus] : NULL;
    for (int i = 0; i < mtz->nref && !st; i++) {
        int h[3];
        for (int a = 0; a < 3; a++) {
            float v = c->hkl[a]->ref[i];
            if (!(fabsf(v) <= 1e6f) || v != nearbyintf(v))
                return nb_error_set(NB_ERR_DATA, "'%s': reflection %d has the Miller index %g", path, i + 1, v);
            h[a] = (int)v;
        }
        st = take(mtz, path, d, h, minus ? '+' : 0, plus->ref[i], plus->label);
        if (!st && minus) st = take(mtz, path, d, h, '-', minus->ref[i], minus->label);
    }
    return st;
}

static void describe(const mtz_cols *c, const nb_sf_pick *p, nb_sf_data *d)
{
    static const char *what[] = {"F, amplitudes", "J, intensities: F = sqrt(max(I, 0))",
                                 "G, anomalous amplitudes F(+),F(-)",
                                 "K, anomalous intensities I(+),I(-): F = sqrt(max(I, 0))"};
    int w = p->type == 'F' ? 0 : p->type == 'J' ? 1 : p->type == 'G' ? 2 : 3;
    if (p->minus < 0)
        snprintf(d->column, sizeof d->column, "column %s (%s)", c->list[p->plus].name, what[w]);
    else
        snprintf(d->column, sizeof d->column, "columns %s,%s (%s)", c->list[p->plus].name, c->list[p->minus].name,
                 what[w]);
}

/* MtzGet takes a "logical name": an environment variable of that name
 * would stand for the file; no variable's name holds a '/' */
static char *logical_name(const char *path)
{
    char *name = malloc(strlen(path) + 3);
    if (name) sprintf(name, "%s%s", strchr(path, '/') ? "" : "./", path);
    return name;
}

/* The file's header (and its reflections when read_refs), CCP4 kept quiet */
static nb_status open_mtz(const char *path, int read_refs, MTZ **out)
{
    nb_ccp4_quiet q;
    char *name = logical_name(path);
    if (!name) return nb_error_set(NB_ERR_NOMEM, "out of memory");
    nb_ccp4_quiet_begin(&q);
    *out = MtzGet(name, read_refs);
    free(name);
    nb_ccp4_quiet_end(&q);
    if (!*out)
        return nb_error_set(NB_ERR_DATA, "'%s': CCP4's library cannot read it as an MTZ file (%s)", path,
                            ccp4_strerror(ccp4_errno));
    return NB_OK;
}

nb_status nb_mtz_read(const char *path, const char *column, nb_sf_data *d)
{
    MTZ *mtz;
    nb_sf_data_init(d);
    nb_status st = open_mtz(path, 1, &mtz);
    if (st) return st;
    mtz_cols *c = malloc(sizeof *c);
    nb_sf_pick p;
    if (!c) st = nb_error_set(NB_ERR_NOMEM, "out of memory");
    if (!st) collect(mtz, c);
    if (!st && c->nhkl != 3) st = nb_error_set(NB_ERR_DATA, "'%s': no h, k, l columns (type H)", path);
    if (!st) st = nb_sf_choose(path, c->list, c->n, column, &p);
    if (!st) {
        d->type = p.type;
        describe(c, &p, d);
        for (int i = 0; i < 6; i++) d->cell[i] = c->xtal[p.plus]->cell[i];
        d->have_cell = d->cell[0] > 0 && d->cell[1] > 0 && d->cell[2] > 0;
        st = mtz_ops(mtz, path, d);
    }
    if (!st) st = read_values(mtz, path, c, &p, d);
    free(c);
    MtzFree(mtz);
    if (st) nb_sf_data_free(d);
    return st;
}

nb_status nb_mtz_symmetry(const char *path, nb_sf_data *d)
{
    MTZ *mtz;
    nb_sf_data_init(d);
    nb_status st = open_mtz(path, 0, &mtz);
    if (st) return st;
    st = mtz_ops(mtz, path, d);
    if (!st) {
        snprintf(d->spacegroup, sizeof d->spacegroup, "%s", mtz->mtzsymm.spcgrpname);
        for (int x = 0; x < mtz->nxtal && !d->have_cell; x++) {
            for (int i = 0; i < 6; i++) d->cell[i] = mtz->xtal[x]->cell[i];
            d->have_cell = d->cell[0] > 0 && d->cell[1] > 0 && d->cell[2] > 0;
        }
        CCP4SPG *sp = nb_ccp4_load_spacegroup(d->spacegroup);
        if (sp && sp->nsymop == d->nops) snprintf(d->hall, sizeof d->hall, "%s", sp->symbol_Hall);
        if (sp) ccp4spg_free(&sp);
    }
    MtzFree(mtz);
    if (st) nb_sf_data_free(d);
    return st;
}

/* The header's symmetry: the space group's operators, number and names */
static int put_symmetry(MTZ *mtz, const CCP4SPG *sp)
{
    float (*rsym)[4][4] = calloc(192, sizeof *rsym);
    if (!rsym || sp->nsymop > 192) return free(rsym), 0;
    for (int i = 0; i < sp->nsymop; i++) {
        for (int r = 0; r < 3; r++) {
            for (int c = 0; c < 3; c++) rsym[i][r][c] = sp->symop[i].rot[r][c];
            rsym[i][r][3] = sp->symop[i].trn[r];
        }
        rsym[i][3][3] = 1.0f;
    }
    char lattice[2] = {sp->symbol_xHM[0], '\0'}, name[20], pg[20];
    snprintf(name, sizeof name, "%s", sp->symbol_xHM);
    snprintf(pg, sizeof pg, "%s", sp->point_group);
    int ok = ccp4_lwsymm(mtz, sp->nsymop, sp->nsymop_prim, rsym, lattice, sp->spg_ccp4_num, name, pg);
    free(rsym);
    return ok;
}

/* The reflections, each moved into CCP4's asymmetric unit */
static int put_reflections(MTZ *mtz, const CCP4SPG *sp, const nb_mtz_amplitudes *a, const double cell[6])
{
    float fcell[6];
    for (int i = 0; i < 6; i++) fcell[i] = (float)cell[i];
    MTZXTAL *base = MtzAddXtal(mtz, "HKL_base", "HKL_base", fcell);
    MTZSET *bset = base ? MtzAddDataset(mtz, base, "HKL_base", 0.0f) : NULL;
    MTZXTAL *xtal = MtzAddXtal(mtz, "nb", "nb", fcell);
    MTZSET *set = xtal ? MtzAddDataset(mtz, xtal, "refined", (float)a->lambda) : NULL;
    if (!bset || !set) return 0;
    MTZCOL *col[6] = {MtzAddColumn(mtz, bset, "H", "H"), MtzAddColumn(mtz, bset, "K", "H"),
                      MtzAddColumn(mtz, bset, "L", "H"), MtzAddColumn(mtz, set, "F", "F"),
                      MtzAddColumn(mtz, set, "SIGF", "Q"), MtzAddColumn(mtz, set, "N", "I")};
    for (int k = 0; k < 6; k++)
        if (!col[k]) return 0;
    for (size_t i = 0; i < a->n; i++) {
        int h, k, l;
        ccp4spg_put_in_asu(sp, a->hkl[i][0], a->hkl[i][1], a->hkl[i][2], &h, &k, &l);
        const float row[6] = {(float)h, (float)k, (float)l, (float)a->F[i], (float)a->sigF[i],
                              (float)a->multiplicity[i]};
        if (!ccp4_lwrefl(mtz, row, col, 6, (int)i + 1)) return 0;
    }
    return 1;
}

/* An MTZ being written: cmtzlib's structure writing to a temporary name
 * beside path (renamed into place by mtz_close), its output silenced. */
typedef struct mtz_out {
    MTZ *mtz;
    char *tmp;
    nb_ccp4_quiet q;
} mtz_out;

static nb_status mtz_open(const char *path, const char *title, const char *history, mtz_out *o)
{
    memset(o, 0, sizeof *o);
    o->q.saved_out = o->q.saved_err = -1;
    if (!(o->tmp = malloc(strlen(path) + 32))) return nb_error_set(NB_ERR_NOMEM, "out of memory");
    sprintf(o->tmp, "%s%s.tmp%ld", strchr(path, '/') ? "" : "./", path, (long)getpid());
    nb_ccp4_quiet_begin(&o->q);
    o->mtz = MtzMalloc(0, NULL);
    int ok = o->mtz != NULL;
    if (ok) {
        o->mtz->refs_in_memory = 0;
        o->mtz->fileout = MtzOpenForWrite(o->tmp);
        ok = o->mtz->fileout != NULL;
    }
    ok = ok && ccp4_lwtitl(o->mtz, title, 0);
    if (ok && history) {
        char line[1][MTZRECORDLENGTH];
        snprintf(line[0], sizeof line[0], "%s", history);
        ok = MtzAddHistory(o->mtz, (const char(*)[MTZRECORDLENGTH])line, 1) >= 0;
    }
    return ok ? NB_OK : NB_ERR_IO;
}

/* The header written (ok: everything before went well) and the file
 * renamed into place; else no file left. */
static nb_status mtz_close(const char *path, mtz_out *o, int ok)
{
    if (!o->tmp) return nb_error_set(NB_ERR_NOMEM, "out of memory for '%s'", path);
    ok = ok && o->mtz && MtzPut(o->mtz, " ");
    if (o->mtz) MtzFree(o->mtz);
    nb_ccp4_quiet_end(&o->q);
    nb_status st = NB_OK;
    if (!ok) st = nb_error_set(NB_ERR_IO, "cannot write '%s' (CCP4's MTZ library: %s)", path, ccp4_strerror(ccp4_errno));
    else if (rename(o->tmp, path)) st = nb_error_set(NB_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    if (st) unlink(o->tmp);
    free(o->tmp);
    return st;
}

static CCP4SPG *load_spacegroup(const char *path, const char *name, nb_status *st)
{
    CCP4SPG *sp = nb_ccp4_load_spacegroup(name);
    *st = sp ? NB_OK : nb_error_set(NB_ERR_DATA, "'%s': space group '%s' is not one that CCP4's syminfo.lib knows",
                                    path, name);
    return sp;
}

nb_status nb_mtz_write_amplitudes(const char *path, const nb_mtz_amplitudes *a)
{
    if (a->n > 2000000000) return nb_error_set(NB_ERR_DATA, "'%s': too many reflections for an MTZ file", path);
    nb_status st;
    CCP4SPG *sp = load_spacegroup(path, a->spacegroup, &st);
    if (!sp) return st;
    mtz_out o;
    int ok = !mtz_open(path, "nb-fit --refine-F: refined amplitudes", a->history, &o);
    ok = ok && put_symmetry(o.mtz, sp) && put_reflections(o.mtz, sp, a, a->cell);
    st = mtz_close(path, &o, ok);
    ccp4spg_free(&sp);
    return st;
}

int nb_mtz_available(void) { return 1; }

/* One batch header, of dataset set: a still (no scan, no goniometer axis),
 * as dials.export fills one (dials/util/export_mtz_helpers.h) */
static int put_batch(MTZ *mtz, const MTZSET *set, const nb_mtz_batch *b)
{
    float buf[NBATCHINTEGERS + NBATCHREALS] = {0};
    if (!ccp4_lwbat(mtz, NULL, b->number, buf, "")) return 0;
    MTZBAT *p = mtz->batch;
    while (p && p->next) p = p->next;
    if (!p || p->num != b->number) return 0;
    p->nbsetid = set->setid;
    p->ncryst = 1;
    snprintf(p->title, sizeof p->title, "Batch %d", b->number);
    p->ndet = 1;
    p->alambd = (float)b->lambda;
    p->so[0] = -1.0f, p->source[0] = -1.0f; /* sample to source: the beam along Cambridge x */
    p->bscale = 1.0f;
    for (int j = 0; j < 6; j++) p->cell[j] = (float)b->cell[j], p->lbcell[j] = -1;
    for (int j = 0; j < 9; j++) p->umat[j] = (float)b->umat[j];
    p->crydat[0] = (float)b->mosaic;
    p->detlm[0][0][1] = (float)b->pixels[0], p->detlm[0][1][1] = (float)b->pixels[1];
    p->dx[0] = (float)b->distance;
    snprintf(p->gonlab[0], sizeof p->gonlab[0], "AXIS");
    p->jsaxs = 1, p->ngonax = 1, p->ldtype = 2;
    return 1;
}

/* The rows: H K L M/ISYM BATCH and the columns */
static int put_unmerged_rows(MTZ *mtz, const CCP4SPG *sp, const MTZSET *base, MTZSET *set, const nb_mtz_unmerged *u)
{
    const char *label[5] = {"H", "K", "L", "M/ISYM", "BATCH"}, *type[5] = {"H", "H", "H", "Y", "B"};
    const int ncol = 5 + u->ncol;
    MTZCOL **col = calloc((size_t)ncol, sizeof *col);
    float *row = calloc((size_t)ncol, sizeof *row);
    int ok = col && row;
    for (int k = 0; k < 5 && ok; k++) ok = (col[k] = MtzAddColumn(mtz, k < 3 ? (MTZSET *)base : set, label[k], type[k])) != NULL;
    for (int k = 0; k < u->ncol && ok; k++) ok = (col[5 + k] = MtzAddColumn(mtz, set, u->col[k].label, u->col[k].type)) != NULL;
    for (size_t i = 0; i < u->n && ok; i++) {
        int h[3];
        const int isym = ccp4spg_put_in_asu(sp, u->hkl[i][0], u->hkl[i][1], u->hkl[i][2], &h[0], &h[1], &h[2]);
        for (int k = 0; k < 3; k++) row[k] = (float)h[k];
        row[3] = (float)isym, row[4] = (float)u->batchno[i];
        for (int k = 0; k < u->ncol; k++) row[5 + k] = u->col[k].value[i];
        ok = isym > 0 && ccp4_lwrefl(mtz, row, col, ncol, (int)i + 1);
    }
    free(col);
    free(row);
    return ok;
}

nb_status nb_mtz_write_unmerged(const char *path, const nb_mtz_unmerged *u)
{
    if (u->n > 2000000000) return nb_error_set(NB_ERR_DATA, "'%s': too many reflections for an MTZ file", path);
    nb_status st;
    CCP4SPG *sp = load_spacegroup(path, u->spacegroup, &st);
    if (!sp) return st;
    float cell[6];
    for (int k = 0; k < 6; k++) cell[k] = (float)u->cell[k];
    mtz_out o;
    int ok = !mtz_open(path, u->title, u->history, &o) && put_symmetry(o.mtz, sp);
    MTZXTAL *base = ok ? MtzAddXtal(o.mtz, "HKL_base", "HKL_base", cell) : NULL;
    MTZSET *bset = base ? MtzAddDataset(o.mtz, base, "HKL_base", 0.0f) : NULL;
    MTZXTAL *xtal = bset ? MtzAddXtal(o.mtz, "nb", "nb", cell) : NULL;
    MTZSET *set = xtal ? MtzAddDataset(o.mtz, xtal, "unmerged", (float)u->lambda) : NULL;
    ok = set != NULL;
    for (size_t b = 0; b < u->nbatch && ok; b++) ok = put_batch(o.mtz, set, &u->batch[b]);
    ok = ok && put_unmerged_rows(o.mtz, sp, bset, set, u);
    st = mtz_close(path, &o, ok);
    ccp4spg_free(&sp);
    return st;
}

#else /* without CCP4's library */

nb_status nb_mtz_read(const char *path, const char *column, nb_sf_data *d)
{
    (void)column;
    nb_sf_data_init(d);
    return nb_error_set(NB_ERR_UNSUPPORTED, "'%s' is an MTZ file: this nb-hkl was built without CCP4's library "
                        "(Debian: libccp4-dev), which reads it", path);
}

nb_status nb_mtz_symmetry(const char *path, nb_sf_data *d)
{
    nb_sf_data_init(d);
    return nb_error_set(NB_ERR_UNSUPPORTED, "'%s' is an MTZ file: this build has no CCP4 library (Debian: "
                        "libccp4-dev), which reads it", path);
}

nb_status nb_mtz_write_amplitudes(const char *path, const nb_mtz_amplitudes *a)
{
    (void)a;
    return nb_error_set(NB_ERR_UNSUPPORTED, "'%s': this build has no CCP4 library (Debian: libccp4-dev) to write "
                        "MTZ files; write .hkl text instead", path);
}

int nb_mtz_available(void) { return 0; }

nb_status nb_mtz_write_unmerged(const char *path, const nb_mtz_unmerged *u)
{
    (void)u;
    return nb_error_set(NB_ERR_UNSUPPORTED, "'%s': this build has no CCP4 library (Debian: libccp4-dev) to write "
                        "MTZ files", path);
}

#endif
