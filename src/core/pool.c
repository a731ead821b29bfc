/* The kernels' thread pool (see pool.h).
 *
 * One parallel region at a time: the caller that wins `busy` owns it. A
 * region is published through one atomic word, `claim`, holding the
 * region's generation, the number of workers that may take part and the
 * index of the next unclaimed task. The caller writes the job (fn, arg, n)
 * first, then stores a new generation with index 0; every participant
 * (the caller included) takes tasks by compare-and-swap on `claim`, which
 * fails as soon as the word no longer holds the generation it saw, and
 * counts each finished task in `finished`. The caller returns once all n
 * tasks have finished, without waiting for workers that never got a task:
 * a worker that wakes late finds every task claimed (or a newer region) and
 * goes back to waiting. Before the next region's job is written, the
 * caller closes the old one (index CLOSED), so that a late worker's
 * compare-and-swap can never succeed against a job that is being replaced.
 * Every access to `claim`, the job fields and `finished` is sequentially
 * consistent, which is what that argument needs (a worker's reads of the
 * job precede its successful claim in the single total order, the caller's
 * writes of the next job follow the close).
 *
 * Idle workers spin on `claim` for POOL_SPIN_NS, then sleep on a condition
 * variable; the caller signals it only when some worker is asleep
 * (`sleepers`, with the same store-then-load handshake on both sides, so no
 * wake-up is lost). A worker that finds itself on the CPU the owner last
 * published a region from takes no task and sleeps a moment (parks), so
 * that the scheduler places it on another CPU. Nothing is allocated per
 * region. */
#if defined(__linux__)
#define _GNU_SOURCE /* sched_getcpu */
#else
#define _POSIX_C_SOURCE 200809L
#endif
#include "core/pool.h"
#include "core/mem.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

/* How long an idle worker spins before it sleeps; after the first
 * POOL_PURE_SPIN_NS it yields between checks, which costs little when the
 * CPU is otherwise idle and leaves it to other runnable threads when the
 * machine is oversubscribed. */
#ifndef POOL_SPIN_NS
#define POOL_SPIN_NS 400000L
#endif
#ifndef POOL_PURE_SPIN_NS
#define POOL_PURE_SPIN_NS 30000L
#endif
/* How long the owner waits for the last tasks spinning before it yields
 * between checks. The worker that runs them is on another CPU (see
 * POOL_PARK_NS), so yielding at once would only hand the owner's CPU to
 * another process for a time slice (ms) when the machine is busy. */
#ifndef POOL_OWNER_YIELD_NS
#define POOL_OWNER_YIELD_NS 50000L
#endif

/* How long a worker that finds itself on the region owner's CPU stays
 * away. Two threads of ours on one CPU only take turns (the owner then
 * waits for tasks the worker claimed but cannot run), and a worker that
 * keeps spinning there is never moved to the idle CPU: the scheduler keeps
 * a task that ran a moment ago where it is. A parked worker sleeps, and on
 * waking it is placed on an idle CPU when there is one. Measured on 2
 * vCPUs: without it, runs stayed at one-thread speed for tens of ms. */
#define POOL_PARK_NS 1000000L

/* claim = gen << GEN_SHIFT | workers << IDX_BITS | index */
#define IDX_BITS 24
#define IDX_MASK ((UINT64_C(1) << IDX_BITS) - 1)
#define CLOSED IDX_MASK                /* index of a finished region */
#define MAX_TASKS ((size_t)IDX_MASK - 1) /* tasks of one region */
#define W_BITS 6                       /* POOL_MAX - 1 workers fit */
#define GEN_SHIFT (IDX_BITS + W_BITS)
#define GEN(c) ((c) >> GEN_SHIFT)
#define WORKERS(c) ((int)(((c) >> IDX_BITS) & ((UINT64_C(1) << W_BITS) - 1)))
#define INDEX(c) ((c) & IDX_MASK)

static atomic_flag busy = ATOMIC_FLAG_INIT; /* held by the region's owner */
static _Atomic uint64_t claim = CLOSED;      /* generation 0, closed */
static _Atomic(pool_fn) job_fn;
static _Atomic(void *) job_arg;
static atomic_size_t job_n;
static atomic_size_t finished; /* tasks of the current region done */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* guards the sleep and n_workers */
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static atomic_int sleepers;
static int n_workers; /* written by the region owner under `lock` */
static atomic_int owner_cpu = -1; /* the CPU the last region was published from */

static int this_cpu(void)
{
#if defined(__linux__)
    return sched_getcpu();
#else
    return -1;
#endif
}

/* 1 when the calling worker runs on the CPU of the region owner. */
static int on_owner_cpu(void)
{
    int cpu = this_cpu();
    return cpu >= 0 && cpu == atomic_load_explicit(&owner_cpu, memory_order_relaxed);
}

/* Sleeps POOL_PARK_NS without being counted as a sleeper (the owner does
 * not wake a parked worker: it runs the tasks itself meanwhile). */
static void park(void)
{
    struct timespec t = {0, POOL_PARK_NS};
    nanosleep(&t, NULL);
}

/* Runs tasks of generation `gen` (job n tasks of fn) until none is left to
 * claim or the region is no longer current. */
static void run_tasks(uint64_t gen, pool_fn fn, void *arg, size_t n)
{
    uint64_t c = atomic_load(&claim);
    for (;;) {
        if (GEN(c) != gen || INDEX(c) >= n)
            return;
        if (atomic_compare_exchange_weak(&claim, &c, c + 1)) {
            fn(arg, (size_t)INDEX(c));
            atomic_fetch_add(&finished, 1);
            c = atomic_load(&claim);
        }
    }
}

static long elapsed_ns(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long)(t.tv_sec - t0->tv_sec) * 1000000000L + (t.tv_nsec - t0->tv_nsec);
}

/* Waits until claim holds a generation other than `seen`; returns it. */
static uint64_t wait_region(uint64_t seen)
{
    uint64_t c;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int yield = 0;
    for (unsigned k = 1;; k++) {
        c = atomic_load(&claim);
        if (GEN(c) != seen)
            return c;
        if (yield) {
            sched_yield();
        } else {
            cpu_relax();
        }
        if (!(k & 63)) {
            if (on_owner_cpu()) {
                park();
                clock_gettime(CLOCK_MONOTONIC, &t0);
                yield = 0;
                continue;
            }
            long t = elapsed_ns(&t0);
            if (t > POOL_SPIN_NS)
                break;
            yield = t > POOL_PURE_SPIN_NS;
        }
    }
    pthread_mutex_lock(&lock);
    atomic_fetch_add(&sleepers, 1);
    while (GEN(c = atomic_load(&claim)) == seen)
        pthread_cond_wait(&wake, &lock);
    atomic_fetch_sub(&sleepers, 1);
    pthread_mutex_unlock(&lock);
    return c;
}

static void *worker(void *p)
{
    int idx = (int)(intptr_t)p;
    uint64_t seen = GEN(atomic_load(&claim));
    for (;;) {
        uint64_t c = wait_region(seen);
        seen = GEN(c);
        if (idx >= WORKERS(c) || INDEX(c) == CLOSED)
            continue;
        if (on_owner_cpu()) { /* the owner runs the tasks faster alone */
            park();
            continue;
        }
        /* The job read here is the region's own as long as a claim of
         * generation `seen` succeeds (see the top of the file). */
        pool_fn fn = atomic_load(&job_fn);
        void *arg = atomic_load(&job_arg);
        size_t n = atomic_load(&job_n);
        run_tasks(seen, fn, arg, n);
    }
    return NULL;
}

/* Grows the pool to `want` workers (as far as the system lets it). Called
 * by the region owner. */
static void grow(int want)
{
    if (want > POOL_MAX - 1)
        want = POOL_MAX - 1;
    if (n_workers >= want)
        return;
    pthread_mutex_lock(&lock);
    while (n_workers < want) {
        pthread_t t;
        pthread_attr_t at;
        if (pthread_attr_init(&at))
            break;
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        int rc = pthread_create(&t, &at, worker, (void *)(intptr_t)n_workers);
        pthread_attr_destroy(&at);
        if (rc)
            break;
        n_workers++;
    }
    pthread_mutex_unlock(&lock);
}

/* One region of n <= MAX_TASKS tasks on the caller and w workers. */
static void region(int w, size_t n, pool_fn fn, void *arg)
{
    uint64_t gen = GEN(atomic_load(&claim)) + 1;
    atomic_store_explicit(&owner_cpu, this_cpu(), memory_order_relaxed);
    atomic_store(&job_fn, fn);
    atomic_store(&job_arg, arg);
    atomic_store(&job_n, n);
    atomic_store(&finished, 0);
    atomic_store(&claim, gen << GEN_SHIFT | (uint64_t)w << IDX_BITS);
    if (atomic_load(&sleepers) > 0) {
        pthread_mutex_lock(&lock);
        pthread_cond_broadcast(&wake);
        pthread_mutex_unlock(&lock);
    }
    run_tasks(gen, fn, arg, n);
    /* Every task is claimed; wait for the ones still running. */
    struct timespec t0;
    int timing = 0;
    for (unsigned k = 1; atomic_load(&finished) < n; k++) {
        cpu_relax();
        if (!(k & 1023)) {
            if (!timing) {
                clock_gettime(CLOCK_MONOTONIC, &t0);
                timing = 1;
            } else if (elapsed_ns(&t0) >= POOL_OWNER_YIELD_NS) {
                sched_yield();
            }
        }
    }
    atomic_store(&claim, gen << GEN_SHIFT | (uint64_t)w << IDX_BITS | CLOSED);
}

typedef struct chunk_job {
    pool_fn fn;
    void *arg;
    size_t base;
} chunk_job;

static void chunk_task(void *arg, size_t i)
{
    const chunk_job *j = arg;
    j->fn(j->arg, j->base + i);
}

void pool_run(int threads, size_t n, pool_fn fn, void *arg)
{
    if (!n)
        return;
    if (threads <= 1 || n == 1 || atomic_flag_test_and_set(&busy)) {
        for (size_t i = 0; i < n; i++)
            fn(arg, i);
        return;
    }
    grow(threads - 1);
    int w = threads - 1 < n_workers ? threads - 1 : n_workers;
    if ((size_t)w > n - 1)
        w = (int)(n - 1);
    if (!w) {
        for (size_t i = 0; i < n; i++)
            fn(arg, i);
    } else if (n <= MAX_TASKS) {
        region(w, n, fn, arg);
    } else {
        chunk_job j = {fn, arg, 0};
        for (; j.base < n; j.base += MAX_TASKS)
            region(w, n - j.base < MAX_TASKS ? n - j.base : MAX_TASKS, chunk_task, &j);
    }
    atomic_flag_clear(&busy);
}

size_t pool_tasks(int threads, size_t work, size_t min_per_task)
{
    if (threads <= 1 || !work)
        return 1;
    size_t t = min_per_task ? work / min_per_task : work;
    size_t cap = (size_t)threads * 4;
    if (t > cap)
        t = cap;
    /* More tasks than threads: a multiple of the thread count, so that
     * equal tasks end together (5 tasks on 2 threads leave one thread
     * waiting for the fifth). */
    if (t > (size_t)threads)
        t -= t % (size_t)threads;
    return t ? t : 1;
}
/* ---- scratch cache ---- */

#define SCRATCH_SLOTS 8

typedef struct scratch_slot {
    void *raw;     /* as allocated */
    void *aligned; /* handed out */
    size_t size;   /* usable bytes from aligned */
    int used;
} scratch_slot;

static pthread_mutex_t scratch_lock = PTHREAD_MUTEX_INITIALIZER;
static scratch_slot scratch[SCRATCH_SLOTS];

void *pool_scratch_get(size_t bytes)
{
    size_t want;
    if (mem_add(bytes, 64, &want))
        return NULL;
    pthread_mutex_lock(&scratch_lock);
    int best = -1, free_slot = -1;
    for (int i = 0; i < SCRATCH_SLOTS; i++) {
        if (scratch[i].used)
            continue;
        if (scratch[i].raw && scratch[i].size >= bytes && (best < 0 || scratch[i].size < scratch[best].size))
            best = i;
        if (free_slot < 0 || !scratch[i].raw || (scratch[free_slot].raw && scratch[i].size < scratch[free_slot].size))
            free_slot = i;
    }
    if (best < 0 && free_slot >= 0) {
        /* Replace the smallest unused block with a bigger one. */
        mem_free(scratch[free_slot].raw);
        scratch[free_slot].raw = scratch[free_slot].aligned = NULL;
        scratch[free_slot].size = 0;
        void *raw = mem_alloc(want);
        if (raw) {
            uintptr_t a = ((uintptr_t)raw + 63) & ~(uintptr_t)63;
            scratch[free_slot].raw = raw;
            scratch[free_slot].aligned = (void *)a;
            scratch[free_slot].size = want - (size_t)(a - (uintptr_t)raw);
            best = free_slot;
        }
    }
    void *r = NULL;
    if (best >= 0) {
        scratch[best].used = 1;
        r = scratch[best].aligned;
    }
    pthread_mutex_unlock(&scratch_lock);
    if (!r && free_slot < 0)
        r = mem_alloc(bytes); /* every slot busy: a plain block, freed on put */
    return r;
}

void pool_scratch_put(void *p)
{
    if (!p)
        return;
    int found = 0;
    pthread_mutex_lock(&scratch_lock);
    for (int i = 0; i < SCRATCH_SLOTS; i++)
        if (scratch[i].aligned == p) {
            scratch[i].used = 0;
            found = 1;
        }
    pthread_mutex_unlock(&scratch_lock);
    if (!found)
        mem_free(p);
}
