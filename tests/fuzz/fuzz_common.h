/* fuzz_common.h - helpers for the libFuzzer targets: the input as a file
 * (the parsers under test take paths). */
#ifndef NB_FUZZ_COMMON_H
#define NB_FUZZ_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nb_error.h"

/* Buffers the inputs ask for are refused above this (nb_memory_limit), as
 * they are above the machine's memory in real runs: libFuzzer flags an
 * allocation over its own -rss_limit_mb as a bug. */
__attribute__((constructor)) static void fuzz_limits(void) { setenv("NB_MEMORY_LIMIT", "256M", 1); }

static char fuzz_path[512];

/* The temporary file goes when the run ends (a crash leaves it, beside the
 * crash's own input) */
static void fuzz_file_remove(void) { unlink(fuzz_path); }

/* Write data to a private temporary file in TMPDIR (the same one on every
 * call) and return its path. */
static const char *fuzz_file(const uint8_t *data, size_t size)
{
    char *path = fuzz_path;
    if (!path[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(path, sizeof fuzz_path, "%s/nb-fuzz-%ld.XXXXXX", base && *base ? base : "/tmp", (long)getpid());
        int fd = mkstemp(path);
        if (fd < 0) abort();
        close(fd);
        atexit(fuzz_file_remove);
        nb_set_verbosity(-2);
    }
    FILE *fp = fopen(path, "wb");
    if (!fp) abort();
    if (size && fwrite(data, 1, size, fp) != size) abort();
    fclose(fp);
    return path;
}

#endif
