/* The kernels' thread pool (see pool.h). One parallel region at a time:
 * the owner holds `busy`; workers sleep on `wake` until the generation
 * changes, claim task indices from an atomic counter, and the last one to
 * finish signals `done`. */
#include "core/pool.h"
#include "core/mem.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

static pthread_mutex_t busy = PTHREAD_MUTEX_INITIALIZER; /* held by the region's owner */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* guards everything below */
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static pthread_cond_t done = PTHREAD_COND_INITIALIZER;
static int n_workers;
static unsigned long start_gen[POOL_MAX]; /* the generation a worker was created at */
static unsigned long generation;
static pool_fn job_fn;
static void *job_arg;
static size_t job_n;
static int job_workers; /* workers taking part in the current region */
static int pending;     /* of those, the ones not finished yet */
static atomic_size_t next_task;

static void run_tasks(pool_fn fn, void *arg, size_t n)
{
    for (;;) {
        size_t i = atomic_fetch_add(&next_task, 1);
        if (i >= n)
            return;
        fn(arg, i);
    }
}

static void *worker(void *p)
{
    int idx = (int)(intptr_t)p;
    pthread_mutex_lock(&lock);
    unsigned long seen = start_gen[idx];
    for (;;) {
        while (generation == seen)
            pthread_cond_wait(&wake, &lock);
        seen = generation;
        if (idx >= job_workers)
            continue;
        pool_fn fn = job_fn;
        void *arg = job_arg;
        size_t n = job_n;
        pthread_mutex_unlock(&lock);
        run_tasks(fn, arg, n);
        pthread_mutex_lock(&lock);
        if (--pending == 0)
            pthread_cond_signal(&done);
    }
    return NULL;
}

/* Grows the pool to `want` workers (as far as the system lets it). Called
 * with `lock` held. */
static void grow(int want)
{
    if (want > POOL_MAX - 1)
        want = POOL_MAX - 1;
    while (n_workers < want) {
        pthread_t t;
        pthread_attr_t at;
        if (pthread_attr_init(&at))
            return;
        start_gen[n_workers] = generation;
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        int rc = pthread_create(&t, &at, worker, (void *)(intptr_t)n_workers);
        pthread_attr_destroy(&at);
        if (rc)
            return;
        n_workers++;
    }
}

void pool_run(int threads, size_t n, pool_fn fn, void *arg)
{
    if (!n)
        return;
    if (threads <= 1 || n == 1 || pthread_mutex_trylock(&busy) != 0) {
        for (size_t i = 0; i < n; i++)
            fn(arg, i);
        return;
    }
    pthread_mutex_lock(&lock);
    grow(threads - 1);
    int w = threads - 1 < n_workers ? threads - 1 : n_workers;
    if ((size_t)w > n - 1)
        w = (int)(n - 1);
    job_fn = fn;
    job_arg = arg;
    job_n = n;
    job_workers = w;
    pending = w;
    atomic_store(&next_task, 0);
    generation++;
    if (w)
        pthread_cond_broadcast(&wake);
    pthread_mutex_unlock(&lock);
    run_tasks(fn, arg, n);
    pthread_mutex_lock(&lock);
    while (pending)
        pthread_cond_wait(&done, &lock);
    pthread_mutex_unlock(&lock);
    pthread_mutex_unlock(&busy);
}

size_t pool_tasks(int threads, size_t work, size_t min_per_task)
{
    if (threads <= 1 || !work)
        return 1;
    size_t t = min_per_task ? work / min_per_task : work;
    size_t cap = (size_t)threads * 4;
    if (t > cap)
        t = cap;
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
