/* nb_cli.c - what every tool shares on its command line and at start-up:
 * the standard options (--help, --version and --help-man print and exit),
 * --help and the man page from the flag registry.  The tools' library
 * (build/libnbcli.a), never libnb's; the options that only set a value and
 * the command line quoted for provenance are libnbcore/nb_args.c's. */
#include "nb_cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "nb_options.h"
#include "nb_tuning.h"
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

void nb_std_opts_init(nb_std_opts *o)
{
    /* every main() starts here: the one place to set up how a tool ends when
     * its reader goes away, or its file reaches the size limit */
    nb_closed_output_is_quiet();
    nb_too_large_is_an_error();
    memset(o, 0, sizeof *o);
    o->output = "-";
    o->input = "-";
}

static int reads_stream(const nb_tool_info *tool)
{
    return (tool->owner & (NB_HKL | NB_SIM | NB_NOISE | NB_CONVERT | NB_FIT | NB_MATH | NB_AMORPHOUS)) != 0;
}

static const char *std_help_output = "  -o FILE             write the output stream to FILE (default: standard output)\n";
static const char *std_help_verbosity =
    "  -q                  quiet: errors only (no warnings, statistics, progress bar or other\n"
    "                      log lines on standard error; the statistics stay in the stream)\n"
    "  -v                  verbose: log what is being done on standard error\n";
static const char *std_help_threads = "      --threads N     use N threads (default: all cores)\n";
static const char *std_help_info =
    "  -h, --help          show this help and exit\n"
    "      --version       show the version and exit\n";

int nb_std_option(const nb_tool_info *tool, nb_std_opts *o, int argc, char **argv, int *i, nb_status *st)
{
    const char *a = argv[*i];
    *st = NB_OK;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
        nb_print_help(tool, stdout);
        exit(0);
    }
    if (!strcmp(a, "--help-man")) {
        nb_print_man(tool, stdout);
        exit(0);
    }
    if (!strcmp(a, "--version")) {
        printf("%s (nb toolkit) %s\n", tool->name, NB_VERSION);
        if (tool->version_extra) tool->version_extra(stdout);
        exit(0);
    }
    return nb_std_setting(o, argc, argv, i, st);
}

/* the standard options, for the loop */
typedef struct std_ctx {
    const nb_tool_info *tool;
    nb_std_opts *o;
} std_ctx;

static int std_option_hook(void *ctx, int argc, char **argv, int *i, nb_status *st)
{
    std_ctx *c = ctx;
    return nb_std_option(c->tool, c->o, argc, argv, i, st);
}

nb_status nb_tool_parse(const nb_tool_info *tool, nb_std_opts *o, void *dest, int argc, char **argv)
{
    const nb_opt_table none = {tool->owner, NULL, 0};
    std_ctx c = {tool, o};
    /* nb-geom and nb-bench read no stream: a stray word is an error there */
    const nb_opts_hooks hooks = {std_option_hook, &c, reads_stream(tool) ? &o->input : NULL};
    return nb_opts_parse(tool->opts ? tool->opts : &none, argc - 1, argv + 1, &hooks, dest);
}

nb_status nb_std_apply(const nb_std_opts *o)
{
    if (o->quiet) nb_set_verbosity(-1);
    else if (o->verbose) nb_set_verbosity(1);
#ifdef _OPENMP
    if (o->threads > 0) omp_set_num_threads(o->threads);
#endif
    return nb_simd_check();
}

/* One option's lines: its spellings and metavar, then its help in the
 * column at 22 (on the next line when they are wider); a help of several
 * lines ('\n') keeps to that column.  Long options are indented as in
 * "  -h, --help". */
static void print_option(FILE *fp, const char *names, const char *metavar, const char *help)
{
    char left[320];
    snprintf(left, sizeof left, "%s%s%s%s", names[1] == '-' ? "      " : "  ", names, metavar[0] ? " " : "",
             metavar);
    if (strlen(left) < 22) fprintf(fp, "%-22s", left);
    else fprintf(fp, "%s\n%-22s", left, "");
    for (const char *p = help; *p; p++) {
        fputc(*p, fp);
        if (*p == '\n') fprintf(fp, "%-22s", "");
    }
    fputc('\n', fp);
}

static void print_flag_lines(const nb_tool_info *tool, FILE *fp)
{
    int n;
    const nb_flag *t = nb_flag_table(&n);
    for (int i = 0; i < n; i++) {
        if (!(t[i].owners & tool->owner) || !t[i].help) continue;
        /* collect the aliases of this flag */
        char names[256];
        snprintf(names, sizeof names, "%s", t[i].name);
        for (int j = 0; j < n; j++)
            if (j != i && t[j].id == t[i].id && !t[j].help && strlen(names) + strlen(t[j].name) + 3 < sizeof names) {
                strcat(names, ", ");
                strcat(names, t[j].name);
            }
        print_option(fp, names, t[i].metavar, t[i].help);
    }
}

/* Whether the tool's table has a spelling of its own, which then replaces
 * the standard option's help line. */
static int own_spelling(const nb_tool_info *tool, const char *name)
{
    for (int i = 0; tool->opts && i < tool->opts->nrows; i++)
        if (tool->opts->rows[i].name && !strcmp(tool->opts->rows[i].name, name)) return 1;
    return 0;
}

/* The registry's lines, the tool's own options (those with a help line),
 * then the standard options it does not document itself (-o, --threads). */
static void print_option_lines(const nb_tool_info *tool, FILE *fp)
{
    print_flag_lines(tool, fp);
    for (int i = 0; tool->opts && i < tool->opts->nrows; i++) {
        const nb_opt *r = &tool->opts->rows[i];
        if (r->name && r->help) print_option(fp, r->name, r->metavar ? r->metavar : "", r->help);
    }
    if (!own_spelling(tool, "-o")) fputs(std_help_output, fp);
    fputs(std_help_verbosity, fp);
    if (!own_spelling(tool, "--threads")) fputs(std_help_threads, fp);
    fputs(std_help_info, fp);
}

/* the exit status that is not a number: the rule of nb_closed_output_is_quiet() */
static const char *exit_sigpipe =
    "When the reader of standard output goes away, the tool is killed by SIGPIPE (a shell\n"
    "shows 141) and prints nothing, like 'yes | head': the stage that failed reports.";
/* and the other direction, for the tools that read a stream: the ABORT record */
static const char *exit_upstream =
    "When a stage before it in a pipe has failed, the tool prints nothing, hands the failure\n"
    "on and exits with that stage's status (the stream ends in an ABORT record).";

/* every tool's last lines: where the set-up, the GPU backend and the skipped
 * tests are told (README.md "Set up" says it all) */
static const char *setup_footer =
    "Set-up (README.md, \"Set up\"): 'make demo' installs the missing Debian packages when run\n"
    "as root (tools/install-deps.sh lists them; as a user it only lists them) and builds; 'make\n"
    "check' does the same, then runs every test and ends with each skipped test and its reason.\n"
    "GPU: with nvcc, make builds nb-sim's CUDA backend (nb-sim --device; --version lists the\n"
    "backends built).";

void nb_print_help(const nb_tool_info *tool, FILE *fp)
{
    fprintf(fp, "Usage: %s %s\n%s\n", tool->name, tool->synopsis, tool->summary);
    if (tool->description) fprintf(fp, "\n%s\n", tool->description);
    fprintf(fp, "\nOptions:\n");
    print_option_lines(tool, fp);
    if (tool->examples) fprintf(fp, "\nExamples:\n%s", tool->examples);
    fprintf(fp, "\nExit status: 0 success, 1 runtime or data error, 2 usage error.\n");
    if (tool->exit_more) fprintf(fp, "Exit status %s.\n", tool->exit_more);
    fprintf(fp, "%s\n", exit_sigpipe);
    if (reads_stream(tool)) fprintf(fp, "%s\n", exit_upstream);
    /* what this build has (nb-sim: its backends): in --help, not the man page */
    if (tool->version_extra) {
        fprintf(fp, "\nThis build: ");
        tool->version_extra(fp);
    }
    fprintf(fp, "\n%s\n", setup_footer);
}

/* roff-escape a line: backslashes and leading dots/quotes */
static void roff(FILE *fp, const char *s)
{
    if (*s == '.' || *s == '\'') fputs("\\&", fp);
    for (; *s; s++) {
        if (*s == '\\') fputs("\\e", fp);
        else if (*s == '-') fputs("\\-", fp);
        else fputc(*s, fp);
    }
}

void nb_print_man(const nb_tool_info *tool, FILE *fp)
{
    char upper[64];
    size_t k;
    for (k = 0; tool->name[k] && k < sizeof upper - 1; k++)
        upper[k] = (char)(tool->name[k] >= 'a' && tool->name[k] <= 'z' ? tool->name[k] - 32 : tool->name[k]);
    upper[k] = '\0';
    fprintf(fp, ".\\\" generated by '%s --help-man' from the flag registry; do not edit\n", tool->name);
    fprintf(fp, ".TH %s 1 \"\" \"nb toolkit %s\" \"User Commands\"\n", upper, NB_VERSION);
    fprintf(fp, ".SH NAME\n");
    roff(fp, tool->name);
    fputs(" \\- ", fp);
    roff(fp, tool->summary);
    fprintf(fp, "\n.SH SYNOPSIS\n.B %s\n", tool->name);
    roff(fp, tool->synopsis);
    fputc('\n', fp);
    if (tool->description) {
        fprintf(fp, ".SH DESCRIPTION\n");
        char *d = nb_xstrdup(tool->description), *save = NULL;
        for (char *line = strtok_r(d, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
            roff(fp, line);
            fputc('\n', fp);
        }
        free(d);
    }
    fprintf(fp, ".SH OPTIONS\n.nf\n");
    /* reuse the --help layout inside a no-fill block */
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    print_option_lines(tool, mem);
    fclose(mem);
    char *save = NULL;
    for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        roff(fp, line);
        fputc('\n', fp);
    }
    free(buf);
    fprintf(fp, ".fi\n");
    if (tool->examples) {
        fprintf(fp, ".SH EXAMPLES\n.nf\n");
        char *e = nb_xstrdup(tool->examples);
        save = NULL;
        for (char *line = strtok_r(e, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
            roff(fp, line);
            fputc('\n', fp);
        }
        free(e);
        fprintf(fp, ".fi\n");
    }
    fprintf(fp, ".SH EXIT STATUS\n0 success, 1 runtime or data error, 2 usage error.\n");
    if (tool->exit_more) fprintf(fp, ".br\n%s.\n", tool->exit_more);
    roff(fp, exit_sigpipe);
    fputc('\n', fp);
    if (reads_stream(tool)) {
        roff(fp, exit_upstream);
        fputc('\n', fp);
    }
    fprintf(fp, ".SH SET-UP\n");
    roff(fp, setup_footer);
    fputc('\n', fp);
    fprintf(fp, ".SH SEE ALSO\n.BR nb-geom (1),\n.BR nb-hkl (1),\n.BR nb-sim (1),\n.BR nb-noise (1),\n"
                ".BR nb-convert (1),\n.BR nb-bench (1)\n");
}
