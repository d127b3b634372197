/* nb_bench_proc.c - the processes nb-bench times: argument vectors, a chain
 * of stages spawned as one pipeline in a run directory and waited for (each
 * one's peak memory from wait4), the first stage that failed reported with
 * the end of its standard error, and the run directories made and removed. */
#include "nb_bench.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nb_cli.h"
#include "nb_util.h"

/* ---- argument vectors ------------------------------------------------------ */

void args_push(arglist *a, const char *s)
{
    if (a->n + 2 > a->cap) {
        a->cap = a->cap ? 2 * a->cap : 32;
        a->v = realloc(a->v, (size_t)a->cap * sizeof *a->v);
        if (!a->v) nb_exit_on_error(nb_error_set(NB_ERR_NOMEM, "out of memory"));
    }
    a->v[a->n++] = nb_xstrdup(s);
    a->v[a->n] = NULL;
}

/* Append a configuration's flags, word by word. */
void args_push_flags(arglist *a, const char *flags, const char *hkl)
{
    char *copy = nb_xstrdup(flags), *save = NULL;
    for (char *w = strtok_r(copy, " ", &save); w; w = strtok_r(NULL, " ", &save))
        args_push(a, strcmp(w, "@HKL@") || !hkl ? w : hkl); /* not found: left as @HKL@ (for --list) */
    free(copy);
}

void args_free(arglist *a)
{
    for (int i = 0; i < a->n; i++) free(a->v[i]);
    free(a->v);
    memset(a, 0, sizeof *a);
}

/* "dir/name", malloc'ed. */
char *path_join(const char *dir, const char *name)
{
    nb_strbuf sb;
    nb_strbuf_init(&sb);
    nb_strbuf_printf(&sb, "%s/%s", dir, name);
    return nb_strbuf_take(&sb);
}

/* ---- running processes ----------------------------------------------------- */

/* The command as a shell would read it. */
char *stage_command(const stage *s, int n, const char *sep)
{
    nb_strbuf sb;
    nb_strbuf_init(&sb);
    for (int k = 0; k < n; k++) {
        char *c = nb_join_args(s[k].args.n, s[k].args.v);
        nb_strbuf_printf(&sb, "%s%s", k ? sep : "", c);
        free(c);
    }
    return nb_strbuf_take(&sb);
}

/* The last few lines of a stage's standard error, indented. */
static void append_stderr_tail(nb_strbuf *sb, const char *dir, const char *name)
{
    char errf[256], *path, *text = NULL;
    size_t len = 0;
    snprintf(errf, sizeof errf, "%s.err", name);
    path = path_join(dir, errf);
    nb_status st = nb_read_file(path, &text, &len);
    free(path);
    if (st != NB_OK || len == 0) {
        nb_strbuf_append(sb, "\n  (nothing on standard error)");
        free(text);
        return;
    }
    while (len && text[len - 1] == '\n') text[--len] = '\0';
    const char *start = text + len;
    for (int lines = 0; start > text && lines < 12; start--)
        if (start[-1] == '\n' && ++lines == 12) break;
    for (const char *p = start; *p;) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        nb_strbuf_append(sb, "\n  ");
        nb_strbuf_appendn(sb, p, n);
        p += n + (nl != NULL);
    }
    free(text);
}

/* The failure of a finished chain of stages: the first stage that failed for
 * a reason of its own (a broken pipe follows a later stage's failure). */
static nb_status chain_failure(const stage *s, int n, const char *dir)
{
    int culprit = -1;
    for (int k = 0; k < n && culprit < 0; k++)
        if (s[k].status && !(WIFSIGNALED(s[k].status) && WTERMSIG(s[k].status) == SIGPIPE)) culprit = k;
    for (int k = 0; k < n && culprit < 0; k++)
        if (s[k].status) culprit = k;
    if (culprit < 0) return NB_OK;
    const stage *c = &s[culprit];
    nb_strbuf sb;
    nb_strbuf_init(&sb);
    char *cmd = stage_command(s, n, " | ");
    if (WIFEXITED(c->status))
        nb_strbuf_printf(&sb, "run failed: %s exited with status %d", c->name, WEXITSTATUS(c->status));
    else
        nb_strbuf_printf(&sb, "run failed: %s was killed by signal %d (%s)", c->name, WTERMSIG(c->status),
                         strsignal(WTERMSIG(c->status)));
    nb_strbuf_printf(&sb, "\n  command: %s\n  its standard error ends:", cmd);
    append_stderr_tail(&sb, dir, c->name);
    nb_status st = nb_error_set(NB_ERR_DATA, "%s", sb.data);
    free(cmd);
    nb_strbuf_free(&sb);
    return st;
}

/* Run the stages as one pipeline in `dir` with the environment `envp` and
 * wait for all of them.  Standard input of the first is /dev/null, standard
 * output of the last goes to <name>.out, every standard error to <name>.err. */
nb_status run_chain(stage *s, int n, const char *dir, char **envp)
{
    int prev_read = -1, spawned = 0, err = 0;
    const char *failed_name = NULL;
    for (int k = 0; k < n; k++) {
        int p[2] = {-1, -1};
        if (k + 1 < n && pipe2(p, O_CLOEXEC) != 0) {
            err = errno;
            failed_name = s[k].name;
            break;
        }
        char out[256], errf[256];
        snprintf(out, sizeof out, "%s.out", s[k].name);
        snprintf(errf, sizeof errf, "%s.err", s[k].name);
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addchdir_np(&fa, dir);
        if (prev_read >= 0) posix_spawn_file_actions_adddup2(&fa, prev_read, STDIN_FILENO);
        else posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
        if (p[1] >= 0) posix_spawn_file_actions_adddup2(&fa, p[1], STDOUT_FILENO);
        else posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, errf, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        err = posix_spawn(&s[k].pid, s[k].args.v[0], &fa, NULL, s[k].args.v, envp);
        posix_spawn_file_actions_destroy(&fa);
        if (prev_read >= 0) close(prev_read);
        if (p[1] >= 0) close(p[1]);
        prev_read = p[0];
        if (err) {
            failed_name = s[k].name;
            break;
        }
        spawned++;
    }
    if (prev_read >= 0) close(prev_read);
    /* the stages already started see end of input or a broken pipe and end */
    for (int k = 0; k < spawned; k++) {
        struct rusage ru;
        while (wait4(s[k].pid, &s[k].status, 0, &ru) < 0)
            if (errno != EINTR) return nb_error_set(NB_ERR_IO, "waiting for %s: %s", s[k].name, strerror(errno));
        s[k].rss_kib = ru.ru_maxrss;
    }
    if (failed_name)
        return nb_error_set(NB_ERR_IO, "cannot run %s ('%s'): %s", failed_name, s[spawned].args.v[0], strerror(err));
    return chain_failure(s, n, dir);
}

/* ---- temporary directories -------------------------------------------------- */

nb_status make_dir(char *templ)
{
    if (!mkdtemp(templ)) return nb_error_set(NB_ERR_IO, "cannot create a directory '%s': %s", templ, strerror(errno));
    return NB_OK;
}

/* Remove a directory of plain files (what one run leaves). */
void remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char *path = path_join(dir, e->d_name);
        unlink(path);
        free(path);
    }
    closedir(d);
    rmdir(dir);
}
