/* plan_stream.c - nb_plan_stream_from_args for tests/cli/api.bats: nb-geom's
 * flags as arguments, the stream libnb makes of them on standard output (to
 * be nb-geom's bytes), a failure's status as the exit status and its message
 * on standard error. */
#include <stdio.h>

#include <nb.h>

int main(int argc, char **argv)
{
    void *bytes = NULL;
    size_t size = 0;
    int status = nb_plan_stream_from_args(argc - 1, (const char *const *)argv + 1, &bytes, &size);
    if (status) {
        fprintf(stderr, "plan_stream: %s\n", nb_last_error());
        return status;
    }
    if (fwrite(bytes, 1, size, stdout) != size || fflush(stdout)) status = NB_RESULT_IO;
    nb_free(bytes);
    return status;
}
