/* A small process-wide pthread pool for the CPU kernels.
 *
 * pool_run(threads, n, fn, arg) calls fn(arg, i) for every i in [0, n) on
 * up to `threads` threads (the caller is one of them) and returns when all
 * calls have returned. Tasks are claimed dynamically, so a task must write
 * only its own part of the output: the result then does not depend on which
 * thread ran which task nor on the thread count (kernels split work so that
 * no sum is divided between tasks).
 *
 * The workers are created lazily, on the first call that asks for more than
 * one thread, up to the largest count ever asked (capped at POOL_MAX). The
 * pool serves one parallel region at a time: a call made while another is
 * running (from a second session on another thread, or from inside a task)
 * runs its tasks in the calling thread instead of waiting, which keeps
 * concurrent sessions deadlock-free and their results identical. When the
 * workers cannot be created, everything runs in the caller.
 *
 * A region costs well under a microsecond when the workers are awake: idle
 * workers spin briefly on an atomic word before they sleep, tasks are
 * claimed by compare-and-swap, nothing is allocated, and the caller never
 * waits for a worker that has not started a task (a sleeping worker only
 * costs the caller one wake-up call). Still, a task should hold a few
 * microseconds of work: pool_tasks with a min_per_task of that size (see
 * POOL_MIN_BYTES) keeps small ops on the caller. */
#ifndef TDM_CORE_POOL_H
#define TDM_CORE_POOL_H

#include <stddef.h>

#define POOL_MAX 64

typedef void (*pool_fn)(void *arg, size_t task);

void pool_run(int threads, size_t n, pool_fn fn, void *arg);

/* The number of tasks worth splitting `work` units into for `threads`
 * threads when a task should hold at least `min_per_task` units: between 1
 * and threads * 4, and a multiple of `threads` when above it. */
size_t pool_tasks(int threads, size_t work, size_t min_per_task);

/* Bytes of memory traffic (read + written) a task of a streaming kernel
 * (copies, elementwise, pooling) should hold at least, about 5 us on one
 * core: below twice that an op runs on the caller alone. */
#define POOL_MIN_BYTES ((size_t)1 << 17)

/* Scratch buffers for kernels (packing, im2col): a process-wide cache of
 * a few blocks kept between calls, so that large temporary buffers are not
 * mapped and faulted in again on every call. pool_scratch_get returns a
 * block of at least `bytes` (64-byte aligned, except the plain mem_alloc
 * block handed out when every slot is in use) or NULL when out of memory;
 * pool_scratch_put gives it back (NULL is a no-op). Thread-safe. */
void *pool_scratch_get(size_t bytes);
void pool_scratch_put(void *p);

#endif
