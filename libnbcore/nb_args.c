/* nb_args.c - a command line's words (nb_args.h): the standard options that
 * only set a value, the line joined for a plan's COMMAND and split again.
 * Pure: nothing here prints help or exits, so the library (the engine's
 * replay of a recorded command line) can use it; the tools' --help and
 * --version are cli/nb_cli.c's. */
#include "nb_args.h"

#include <stdlib.h>
#include <string.h>

#include "nb_util.h"

int nb_std_setting(nb_std_opts *o, int argc, char **argv, int *i, nb_status *st)
{
    const char *a = argv[*i];
    *st = NB_OK;
    if (!strcmp(a, "-q")) {
        o->quiet = 1;
        return 1;
    }
    if (!strcmp(a, "-v")) {
        o->verbose = 1;
        return 1;
    }
    if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
        if (*i + 1 >= argc) {
            *st = nb_error_set(NB_ERR_USAGE, "option %s needs a file name", a);
            return 1;
        }
        o->output = argv[++*i];
        return 1;
    }
    if (!strcmp(a, "--threads")) {
        if (*i + 1 >= argc) {
            *st = nb_error_set(NB_ERR_USAGE, "option --threads needs a number");
            return 1;
        }
        *st = nb_parse_int(argv[++*i], &o->threads, "option --threads");
        if (!*st && (o->threads < 1 || o->threads > 4096))
            *st = nb_error_set(NB_ERR_USAGE, "option --threads: %d is not a sensible thread count", o->threads);
        return 1;
    }
    return 0;
}

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
