/* nb_tuning.h - how the tools ask the operating system and the CPU for
 * speed: thread counts, huge pages, faulting pages in ahead of use, files'
 * space allocated ahead, pipe buffer sizes, the SIMD width allowed.  Policy
 * only: what is computed never depends on it (the same bytes on any thread
 * count, page size or pipe). */
#ifndef NB_TUNING_H
#define NB_TUNING_H

#include <stddef.h>

#include "nb_error.h"

/* ---- threads -------------------------------------------------------------- */
/* Passes over fewer items than this (pixels of an image being converted or
 * checked, pixel-steps of a render) stay on one thread: waiting for a second one to be scheduled, in a
 * pipe whose other stages are busy, costs more than the pass. */
#define NB_PARALLEL_MIN ((size_t)1 << 21)
/* The same size for a process that renders through libnb's renderer
 * (engine/nb.c): no pipe's stages beside it, a caller that names its threads
 * and calls again while OpenMP's team still waits warm (a refinement's loop
 * of renders and derivatives); a 1024^2 fast render took 2.2 ms on one thread
 * of an AVX2 core and 1.2 on two. */
#define NB_PARALLEL_MIN_LIBRARY ((size_t)1 << 17)
/* The size the calling thread's passes compare with: NB_PARALLEL_MIN unless
 * nb_parallel_min_set gave another (per thread, as OpenMP's own thread count
 * is: each thread that starts parallel regions has its own). */
size_t nb_parallel_min(void);
/* Set the calling thread's size; 0 restores NB_PARALLEL_MIN. */
void nb_parallel_min_set(size_t size);
/* Whether a second thread may be used (--threads, OMP_NUM_THREADS): the
 * stream reader then reads a large payload on its own thread. */
int nb_threads_spare(void);
/* Before a long sequential stretch (writing an image after a parallel
 * checksum or render): release OpenMP's idle threads, which would spin-wait
 * on a core the next stage of the pipe needs (a later parallel region starts
 * them again).  Only the calling thread's own team is released (OpenMP keeps
 * a pool per thread that starts parallel regions): called from a thread
 * that started none, such as a writer thread beside the render, it does
 * nothing. */
void nb_threads_release_idle(void);

/* ---- memory ----------------------------------------------------------------- */
/* malloc for big buffers (images): 2 MiB-aligned and marked for transparent
 * huge pages, so that first touching 64 MiB costs 32 page faults instead of
 * 16384.  Free with free(); realloc() works on it. */
void *nb_malloc_large(size_t size);
/* the huge page nb_malloc_large aligns big blocks to */
#define NB_HUGE_PAGE ((size_t)2 << 20)
/* nb_malloc_large with nb_calloc's checks and message; the memory is NOT
 * cleared (the caller writes every element, on the threads that use it). */
nb_status nb_alloc_large(void **out, size_t count, size_t size, const char *what);
/* For a parallel loop that hands the rows of a fresh image (nb_malloc_large)
 * out one at a time, called as a thread starts row `row`: the thread that
 * starts a huge page's worth of rows faults in the next one (the kernel
 * zeroes it) without changing what the pages hold.  Otherwise every thread
 * touches each new huge page at once and all but one wait for its fault (a
 * 4096^2 fast render at 2 threads: 40 ms median without this, 35 with).
 * Does nothing when the calling team has one thread, or on kernels without
 * MADV_POPULATE_WRITE (5.14). */
void nb_fault_rows_ahead(void *image, size_t row_bytes, int rows, int row);
/* Fault in the pages of [p, p + size) now, in one call (MADV_POPULATE_WRITE;
 * nothing on kernels without it): a fresh buffer written piece by piece
 * otherwise takes a page fault per 4 KiB, each costing microseconds on a
 * virtual machine.  Contents are left as they are. */
void nb_prefault(void *p, size_t size);

/* ---- files ------------------------------------------------------------------ */
/* Allocate the space of the first `bytes` of the new file on fd now (Linux
 * fallocate, its size kept), so that the writes that fill it find their
 * blocks mapped: on ext4 writing 64 MiB then takes 9 ms instead of 13.  A
 * hint, given only where it was measured to pay: on ext4 (its extents are
 * allocated at once); not on tmpfs, where allocating a page costs the same
 * ahead as on the write (16 of 26 ms for 64 MiB) and only moves the cost;
 * nowhere else, untested.  Nothing is written (as posix_fallocate's zeros
 * would be), and a file system that refuses is left as it is. */
void nb_preallocate(int fd, unsigned long long bytes);

/* ---- pipes ------------------------------------------------------------------ */
/* Give a pipe on fd a 1 MiB buffer (no-op for anything else). */
void nb_pipe_widen(int fd);

/* ---- the CPU ---------------------------------------------------------------- */
/* The widest SIMD the environment allows: NB_SIMD=generic 0, NB_SIMD=avx2 1,
 * NB_SIMD=avx512, empty or unset 2 (whatever the CPU has).  The fast kernel
 * and the CRC-32 follow it, so that tests can run the narrower paths on a
 * wider CPU.  Any other value is an error, which nb_simd_check() reports
 * (every tool calls it through nb_std_apply); nb_simd_limit() reads it as 2. */
int nb_simd_limit(void);
nb_status nb_simd_check(void);

#endif
