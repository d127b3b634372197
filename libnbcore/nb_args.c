/* nb_args.c - a command line's words (nb_args.h): joined for a plan's
 * COMMAND (nb-geom, and libnb's plans from flags), split again.  Pure:
 * nothing here prints or exits, so the library can use it. */
#include "nb_args.h"

#include <stdlib.h>
#include <string.h>

#include "nb_util.h"

char *nb_join_args(int argc, char **argv)
{
    nb_strbuf sb;
    nb_strbuf_init(&sb);
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (i) nb_strbuf_append(&sb, " ");
        int plain = *a != '\0';
        for (const char *p = a; *p; p++)
            if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.,/:=+@%", *p)) plain = 0;
        if (plain) {
            nb_strbuf_append(&sb, a);
        } else {
            nb_strbuf_append(&sb, "'");
            for (const char *p = a; *p; p++) {
                if (*p == '\'') nb_strbuf_append(&sb, "'\\''");
                else if (*p == '\n') nb_strbuf_append(&sb, " ");
                else nb_strbuf_appendn(&sb, p, 1);
            }
            nb_strbuf_append(&sb, "'");
        }
    }
    return nb_strbuf_take(&sb);
}

nb_status nb_split_args(const char *line, int *argc, char ***argv)
{
    /* words are separated by blanks: at most half the characters, rounded up */
    char **v;
    int n = 0;
    nb_status st = nb_calloc((void **)&v, strlen(line) / 2 + 2, sizeof *v, "the command's words");
    if (st) return st;
    const char *p = line;
    for (;;) {
        while (*p == ' ' || *p == '\t') p++;
        if (!*p) break;
        nb_strbuf w;
        nb_strbuf_init(&w);
        while (*p && *p != ' ' && *p != '\t') {
            if (*p != '\'') {
                nb_strbuf_appendn(&w, p++, 1);
                continue;
            }
            const char *end = strchr(p + 1, '\'');
            if (!end) {
                nb_strbuf_free(&w);
                nb_free_args(n, v);
                return nb_error_set(NB_ERR_DATA, "unbalanced quote in the command line '%s'", line);
            }
            nb_strbuf_appendn(&w, p + 1, (size_t)(end - p - 1));
            p = end + 1;
            /* '\'' : a quote inside a quoted word */
            if (p[0] == '\\' && p[1] == '\'') nb_strbuf_appendn(&w, "'", 1), p += 2;
        }
        v[n++] = nb_strbuf_take(&w);
    }
    v[n] = NULL;
    *argc = n;
    *argv = v;
    return NB_OK;
}

void nb_free_args(int argc, char **argv)
{
    for (int i = 0; i < argc; i++) free(argv[i]);
    free(argv);
}
