/* ccp4.c - CCP4's C library as nb-hkl uses it beside the MTZ reader: its
 * output silenced around each call (it prints on standard output, nb-hkl's
 * stream) and space groups by name (csymlib) or Hall symbol (syminfo.lib's
 * table) with their operators. */
#include "ccp4.h"

#ifdef NB_HAVE_CCP4

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ccp4/ccp4_errno.h>
#include <ccp4/csymlib.h>

#ifndef NB_CCP4_SYMINFO
#define NB_CCP4_SYMINFO "/usr/share/ccp4/syminfo.lib"
#endif

void nb_ccp4_quiet_begin(nb_ccp4_quiet *q)
{
    fflush(stdout);
    fflush(stderr);
    q->saved_out = dup(STDOUT_FILENO);
    q->saved_err = dup(STDERR_FILENO);
    int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null >= 0) {
        if (q->saved_out >= 0) dup2(null, STDOUT_FILENO);
        if (q->saved_err >= 0) dup2(null, STDERR_FILENO);
        close(null);
    }
    /* its signals (">>>>>> CCP4 library signal ...") off; errors are returned */
    ccp4_liberr_verbosity(0);
}

void nb_ccp4_quiet_end(nb_ccp4_quiet *q)
{
    fflush(stdout);
    fflush(stderr);
    if (q->saved_out >= 0) {
        dup2(q->saved_out, STDOUT_FILENO);
        close(q->saved_out);
    }
    if (q->saved_err >= 0) {
        dup2(q->saved_err, STDERR_FILENO);
        close(q->saved_err);
    }
    q->saved_out = q->saved_err = -1;
}

/* csymlib reads $SYMINFO, else $CLIBD/syminfo.lib: point it at the one
 * found at build time when neither is set */
static const char *syminfo(void)
{
    static char path[4096];
    const char *s = getenv("SYMINFO"), *clibd = getenv("CLIBD");
    if (s) return s;
    if (clibd) return snprintf(path, sizeof path, "%s/syminfo.lib", clibd), path;
    setenv("SYMINFO", NB_CCP4_SYMINFO, 0);
    return NB_CCP4_SYMINFO;
}

/* s with its runs of blanks made one and its ends trimmed, into out */
static void squeeze(const char *s, char *out, size_t size)
{
    size_t n = 0;
    for (; *s && n + 1 < size; s++) {
        if (*s == ' ' || *s == '\t') {
            if (n > 0 && out[n - 1] != ' ') out[n++] = ' ';
        } else {
            out[n++] = *s;
        }
    }
    while (n > 0 && out[n - 1] == ' ') n--;
    out[n] = '\0';
}

/* The quoted value of a syminfo.lib line "symbol KIND 'VALUE'", squeezed */
static int symbol_line(const char *line, const char *kind, char *out, size_t size)
{
    char head[32];
    snprintf(head, sizeof head, "symbol %s", kind);
    if (strncmp(line, head, strlen(head))) return 0;
    const char *a = strchr(line, '\''), *b = a ? strchr(a + 1, '\'') : NULL;
    if (!b) return 0;
    char v[96];
    snprintf(v, sizeof v, "%.*s", (int)(b - a - 1), a + 1);
    squeeze(v, out, size);
    return 1;
}

/* A Hall symbol (DIALS's space_group_hall_symbol, " P 2ac 2ab") to the
 * extended Hermann-Mauguin name of its setting, by syminfo.lib's own table
 * (csymlib looks up names only); 0 when the table has no such symbol. */
static int hall_to_xhm(const char *hall, char *xhm, size_t size)
{
    char want[96], line[256], got[96] = "";
    squeeze(hall, want, sizeof want);
    FILE *fp = fopen(syminfo(), "r");
    if (!fp) return 0;
    int found = 0, match = 0;
    while (!found && fgets(line, sizeof line, fp)) {
        if (!strncmp(line, "begin_spacegroup", 16)) match = 0;
        if (symbol_line(line, "Hall", got, sizeof got)) match = !strcmp(got, want);
        if (match && symbol_line(line, "xHM", xhm, size)) found = 1;
    }
    fclose(fp);
    return found;
}

CCP4SPG *nb_ccp4_load_spacegroup(const char *name)
{
    (void)syminfo();
    char xhm[96];
    nb_ccp4_quiet q;
    nb_ccp4_quiet_begin(&q);
    CCP4SPG *sp = ccp4spg_load_by_spgname(name);
    if (!sp) sp = ccp4spg_load_by_ccp4_spgname(name);
    if (!sp && hall_to_xhm(name, xhm, sizeof xhm)) sp = ccp4spg_load_by_spgname(xhm);
    nb_ccp4_quiet_end(&q);
    return sp;
}

nb_status nb_ccp4_spacegroup(const char *path, const char *name, nb_sf_data *d)
{
    const char *lib = syminfo();
    CCP4SPG *sp = nb_ccp4_load_spacegroup(name);
    if (!sp)
        return nb_error_set(NB_ERR_DATA, "'%s': space group '%s' is not one that CCP4's %s knows (by name or "
                            "Hall symbol)", path, name, lib);
    nb_status st = NB_OK;
    d->nops = 0;
    for (int i = 0; i < sp->nsymop && !st; i++) {
        double R[3][3], t[3];
        for (int r = 0; r < 3; r++) {
            for (int c = 0; c < 3; c++) R[r][c] = sp->symop[i].rot[r][c];
            t[r] = sp->symop[i].trn[r];
        }
        st = nb_sf_add_op(d, R, t);
    }
    snprintf(d->spacegroup, sizeof d->spacegroup, "%s", sp->symbol_xHM);
    snprintf(d->hall, sizeof d->hall, "%s", sp->symbol_Hall);
    ccp4spg_free(&sp);
    return st ? nb_error_prefix(st, "'%s'", path) : NB_OK;
}

#else /* without CCP4's library */

void nb_ccp4_quiet_begin(nb_ccp4_quiet *q) { q->saved_out = q->saved_err = -1; }
void nb_ccp4_quiet_end(nb_ccp4_quiet *q) { (void)q; }

nb_status nb_ccp4_spacegroup(const char *path, const char *name, nb_sf_data *d)
{
    (void)d;
    return nb_error_set(NB_ERR_UNSUPPORTED, "'%s': the operators of space group '%s' come from CCP4's library "
                        "(Debian: libccp4-dev), which this nb-hkl was built without", path, name);
}

#endif
