/* ccp4.c - CCP4's C library as nb-hkl uses it beside the MTZ reader: its
 * output silenced around each call (it prints on standard output, nb-hkl's
 * stream) and space groups by name from csymlib (syminfo.lib). */
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
    const char *s = getenv("SYMINFO");
    if (s) return s;
    if (getenv("CLIBD")) return "$CLIBD/syminfo.lib";
    setenv("SYMINFO", NB_CCP4_SYMINFO, 0);
    return NB_CCP4_SYMINFO;
}

nb_status nb_ccp4_spacegroup(const char *path, const char *name, nb_sf_data *d)
{
    const char *lib = syminfo();
    nb_ccp4_quiet q;
    nb_ccp4_quiet_begin(&q);
    CCP4SPG *sp = ccp4spg_load_by_spgname(name);
    if (!sp) sp = ccp4spg_load_by_ccp4_spgname(name);
    nb_ccp4_quiet_end(&q);
    if (!sp)
        return nb_error_set(NB_ERR_DATA, "'%s': space group '%s' is not one that CCP4's %s knows", path, name, lib);
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
