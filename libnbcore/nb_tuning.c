/* nb_tuning.c - the tools' requests to the operating system and the CPU for
 * speed (nb_tuning.h): thread counts, huge pages, faulting pages in ahead,
 * files' space allocated ahead, pipe sizes, the SIMD limit.  Kept apart
 * from what they speed up, so that the policy can be read, and changed, in
 * one place. */
#include "nb_tuning.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#ifdef __linux__
#include <sys/vfs.h>
#endif
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "nb_util.h"

int nb_threads_spare(void)
{
#ifdef _OPENMP
    return omp_get_max_threads() > 1;
#else
    return 0;
#endif
}

void nb_threads_release_idle(void)
{
#ifdef _OPENMP
    omp_pause_resource_all(omp_pause_soft);
#endif
}

nb_status nb_alloc_large(void **out, size_t count, size_t size, const char *what)
{
    return nb_alloc_checked(out, count, size, what, nb_malloc_large);
}

/* NB_SIMD's value as a limit: 0, 1, 2; -1 for a value it does not take */
static int simd_limit_of(const char *v)
{
    if (!v || !*v || !strcmp(v, "avx512")) return 2;
    if (!strcmp(v, "generic")) return 0;
    if (!strcmp(v, "avx2")) return 1;
    return -1;
}

static _Thread_local size_t parallel_min_here; /* 0: NB_PARALLEL_MIN */

size_t nb_parallel_min(void) { return parallel_min_here ? parallel_min_here : NB_PARALLEL_MIN; }

void nb_parallel_min_set(size_t size) { parallel_min_here = size; }

int nb_simd_limit(void)
{
    int limit = simd_limit_of(getenv("NB_SIMD"));
    return limit < 0 ? 2 : limit;
}

nb_status nb_simd_check(void)
{
    const char *v = getenv("NB_SIMD");
    if (simd_limit_of(v) < 0)
        return nb_error_set(NB_ERR_USAGE, "NB_SIMD='%s': expected generic, avx2 or avx512 (or unset: the widest "
                                          "the CPU has)", v);
    return NB_OK;
}

void *nb_malloc_large(size_t size)
{
    const size_t huge = NB_HUGE_PAGE;
    if (size < 2 * huge) return malloc(size ? size : 1);
    size_t rounded = (size + huge - 1) / huge * huge;
    void *p = NULL;
    if (posix_memalign(&p, huge, rounded) != 0) return NULL;
#ifdef MADV_HUGEPAGE
    madvise(p, rounded, MADV_HUGEPAGE); /* a hint: failure is harmless */
#endif
    return p;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

void nb_prefault(void *p, size_t size)
{
    const uintptr_t page = 4096, a = ((uintptr_t)p + page - 1) & ~(page - 1),
                    b = ((uintptr_t)p + size) & ~(page - 1);
    if (b > a) (void)madvise((void *)a, b - a, MADV_POPULATE_WRITE); /* a hint: failure is harmless */
}

void nb_fault_rows_ahead(void *image, size_t row_bytes, int rows, int row)
{
    if (row_bytes == 0) return;
    const size_t block = row_bytes < NB_HUGE_PAGE ? NB_HUGE_PAGE / row_bytes : 1; /* rows */
    if (row % block) return;
#ifdef _OPENMP
    if (omp_get_num_threads() < 2) return; /* one thread gains nothing: it faults each page as it comes */
#else
    return;
#endif
    /* the first row's thread faults in its own block too */
    size_t first = row == 0 ? 0 : (size_t)row + block, last = (size_t)row + 2 * block;
    if (last > (size_t)rows) last = (size_t)rows;
    if (first >= last) return;
    nb_prefault((char *)image + first * row_bytes, (last - first) * row_bytes);
}

void nb_preallocate(int fd, unsigned long long bytes)
{
#if defined(__linux__) && defined(FALLOC_FL_KEEP_SIZE)
    const long ext4_magic = 0xEF53; /* EXT4_SUPER_MAGIC (ext2 and ext3 share it) */
    struct statfs fs;
    if (bytes == 0 || bytes > (unsigned long long)INT64_MAX || fstatfs(fd, &fs) != 0 || (long)fs.f_type != ext4_magic)
        return;
    (void)fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, (off_t)bytes); /* a hint: failure is harmless */
#else
    (void)fd, (void)bytes;
#endif
}

void nb_pipe_widen(int fd)
{
#ifdef F_SETPIPE_SZ
    /* images are tens of MiB: with the default 64 KiB pipe the two ends take
     * turns a thousand times per image.  1 MiB is the unprivileged maximum;
     * a refusal is harmless. */
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode) && fcntl(fd, F_GETPIPE_SZ) < (1 << 20))
        (void)fcntl(fd, F_SETPIPE_SZ, 1 << 20);
#else
    (void)fd;
#endif
}

