/* test_mtz.c - the unmerged MTZ writer (formats/mtz.c, nb-fit
 * --integrated-mtz): a file of a few rows in P 21 21 21 read back with
 * CCP4's own reader, each row's index in the asymmetric unit and its
 * M/ISYM taking it back to the index written, its batch and columns; the
 * batch headers; an unknown space group and an unwritable path refused with
 * no file left.  Without CCP4's library: the writer refuses. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mtz.h"
#include "nb_error.h"
#include "tap.h"

#ifdef NB_HAVE_CCP4
#include <ccp4/cmtzlib.h>
#include <ccp4/csymlib.h>

#include "ccp4.h"

#define NROW 5
static const int hkl[NROW][3] = {{1, 2, 3}, {-1, 2, 3}, {1, -2, -3}, {-4, -5, 6}, {0, 0, -2}};
static const int batchno[NROW] = {1, 1, 2, 2, 7};
static const float I[NROW] = {10.5f, -2.0f, 300.0f, 0.25f, 7.0f};

static void write_one(const char *path)
{
    const nb_mtz_batch b[3] = {
        {.number = 1, .cell = {34, 52, 53, 90, 90, 90}, .umat = {1, 0, 0, 0, 1, 0, 0, 0, 1}, .lambda = 1.0,
         .distance = 100, .pixels = {192, 192}},
        {.number = 2, .cell = {34.1, 52, 53, 90, 90, 90}, .umat = {0, 1, 0, -1, 0, 0, 0, 0, 1}, .lambda = 1.01,
         .distance = 100, .pixels = {192, 192}},
        {.number = 7, .cell = {34, 52.2, 53, 90, 90, 90}, .umat = {1, 0, 0, 0, 0, 1, 0, -1, 0}, .lambda = 0.99,
         .distance = 100, .pixels = {192, 192}},
    };
    const nb_mtz_column col[1] = {{"I", "J", I}};
    const nb_mtz_unmerged u = {.spacegroup = "P 21 21 21", .cell = {34, 52, 53, 90, 90, 90}, .lambda = 1.0,
                               .title = "test", .nbatch = 3, .batch = b, .n = NROW, .hkl = hkl,
                               .batchno = batchno, .ncol = 1, .col = col};
    ok(nb_mtz_write_unmerged(path, &u) == NB_OK, "an unmerged file written");
}

/* by its label alone (cmtzlib reads the file's M/ISYM as M_ISYM) */
static MTZCOL *column(MTZ *m, const char *label)
{
    for (int x = 0; x < m->nxtal; x++)
        for (int s = 0; s < m->xtal[x]->nset; s++)
            for (int k = 0; k < m->xtal[x]->set[s]->ncol; k++)
                if (!strcmp(m->xtal[x]->set[s]->col[k]->label, label)) return m->xtal[x]->set[s]->col[k];
    return NULL;
}

static void read_back(const char *path)
{
    MTZ *m = MtzGet(path, 1);
    ok(m != NULL, "read back by cmtzlib");
    if (!m) return;
    const char *want[] = {"H", "K", "L", "M_ISYM", "BATCH", "I"};
    MTZCOL *c[6];
    int have = 1;
    for (int k = 0; k < 6; k++)
        if (!(c[k] = column(m, want[k]))) have = 0, printf("# no column %s\n", want[k]);
    ok(have, "columns H K L M/ISYM (M_ISYM) BATCH I");
    ok(MtzNref(m) == NROW, "%d rows", MtzNref(m));
    ok(MtzNbat(m) == 3, "3 batches (%d)", MtzNbat(m));
    CCP4SPG *sp = nb_ccp4_load_spacegroup("P 21 21 21");
    for (int r = 0; have && sp && r < NROW; r++) {
        int h = (int)c[0]->ref[r], k = (int)c[1]->ref[r], l = (int)c[2]->ref[r], isym = (int)c[3]->ref[r];
        ok(h >= 0 && k >= 0 && l >= 0, "row %d in the asymmetric unit: %d %d %d", r, h, k, l);
        int o[3];
        ccp4spg_generate_indices(sp, isym, h, k, l, &o[0], &o[1], &o[2]);
        ok(!memcmp(o, hkl[r], sizeof o), "row %d: M/ISYM %d gives back %d %d %d (%d %d %d)", r, isym, hkl[r][0],
           hkl[r][1], hkl[r][2], o[0], o[1], o[2]);
        ok((int)c[4]->ref[r] == batchno[r], "row %d: batch %d", r, batchno[r]);
        near(c[5]->ref[r], I[r], 1e-6, "row %d: I", r);
    }
    if (sp) ccp4spg_free(&sp);
    MTZBAT *b = m->batch;
    ok(b && b->num == 1 && b->next && b->next->num == 2 && b->next->next && b->next->next->num == 7,
       "batch headers 1 2 7");
    if (b && b->next) {
        near(b->next->cell[0], 34.1, 1e-6, "batch 2's cell");
        near(b->next->umat[3], -1.0, 0, "batch 2's U as given");
        near(b->next->alambd, 1.01, 1e-6, "batch 2's wavelength");
    }
    MtzFree(m);
}

static void refusals(const char *dir)
{
    char path[512];
    const nb_mtz_batch b = {.number = 1, .cell = {34, 52, 53, 90, 90, 90}, .umat = {1, 0, 0, 0, 1, 0, 0, 0, 1}};
    const int one_hkl[1][3] = {{1, 2, 3}}, one_batch[1] = {1};
    nb_mtz_unmerged u = {.spacegroup = "Q 9", .cell = {34, 52, 53, 90, 90, 90}, .lambda = 1.0, .title = "test",
                         .nbatch = 1, .batch = &b, .n = 1, .hkl = one_hkl, .batchno = one_batch};
    snprintf(path, sizeof path, "%s/refused.mtz", dir);
    ok(nb_mtz_write_unmerged(path, &u) == NB_ERR_DATA && strstr(nb_error_message(), "'Q 9'"),
       "an unknown space group refused: %s", nb_error_message());
    ok(access(path, F_OK) != 0, "and no file");
    u.spacegroup = "P 1";
    ok(nb_mtz_write_unmerged("/nonexistent/x.mtz", &u) == NB_ERR_IO && strstr(nb_error_message(), "/nonexistent/x.mtz"),
       "an unwritable path named: %s", nb_error_message());
}

int main(void)
{
    char dir[] = "/tmp/nb_test_mtz_XXXXXX", path[512];
    if (!mkdtemp(dir)) return 1;
    snprintf(path, sizeof path, "%s/u.mtz", dir);
    ok(nb_mtz_available(), "this build writes MTZ");
    write_one(path);
    read_back(path);
    refusals(dir);
    unlink(path);
    rmdir(dir);
    return tap_done();
}

#else

int main(void)
{
    const nb_mtz_unmerged u = {.spacegroup = "P 1", .n = 0};
    ok(!nb_mtz_available(), "this build writes no MTZ");
    ok(nb_mtz_write_unmerged("/tmp/nb_test_unwritten.mtz", &u) == NB_ERR_UNSUPPORTED &&
           strstr(nb_error_message(), "libccp4-dev"),
       "refused, naming CCP4's library: %s", nb_error_message());
    return tap_done();
}

#endif
