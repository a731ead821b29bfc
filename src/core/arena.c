/* The buffer arena (arena.h). */
#include "core/arena.h"
#include "core/mem.h"

#include <pthread.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

/* Blocks smaller than this come from malloc's bins, cheaply: not kept. */
#define ARENA_MIN_BLOCK 4096
/* At most this many blocks are kept. */
#define ARENA_MAX_BLOCKS 512
/* A block serves a request of at least half its size. */
#define ARENA_FIT_NUM 1
#define ARENA_FIT_DEN 2

typedef struct arena_block {
    void *p;
    size_t n;
} arena_block;

struct arena {
    pthread_mutex_t lock;
    arena_block blocks[ARENA_MAX_BLOCKS];
    size_t n_blocks;
    size_t held;   /* bytes of the blocks kept */
    size_t in_use; /* bytes taken and not given back (an estimate) */
    size_t peak;   /* the most in_use seen: the bound of held */
    size_t reused; /* bytes served from kept blocks */
};

static _Thread_local arena *arena_tls;
static _Thread_local void *donor_p;
static _Thread_local size_t donor_n;
static _Thread_local int donor_taken;

arena *arena_new(void)
{
    arena *a = mem_calloc(1, sizeof *a);
    if (!a)
        return NULL;
    if (pthread_mutex_init(&a->lock, NULL)) {
        mem_free(a);
        return NULL;
    }
    return a;
}

void arena_free(arena *a)
{
    if (!a)
        return;
    for (size_t i = 0; i < a->n_blocks; i++)
        mem_free(a->blocks[i].p);
    pthread_mutex_destroy(&a->lock);
    mem_free(a);
}

arena *arena_enter(arena *a)
{
    arena *prev = arena_tls;
    arena_tls = a;
    return prev;
}

void arena_leave(arena *prev) { arena_tls = prev; }

arena *arena_current(void) { return arena_tls; }

void *arena_take(size_t nbytes)
{
    arena *a = arena_tls;
    if (!a || nbytes < ARENA_MIN_BLOCK)
        return mem_alloc(nbytes);
    if (donor_p && nbytes == donor_n) { /* counted in use already */
        void *d = donor_p;
        donor_p = NULL;
        donor_taken = 1;
        return d;
    }
    void *p = NULL;
    pthread_mutex_lock(&a->lock);
    size_t best = a->n_blocks;
    for (size_t i = 0; i < a->n_blocks; i++) {
        size_t n = a->blocks[i].n;
        if (n >= nbytes && nbytes / ARENA_FIT_NUM >= n / ARENA_FIT_DEN &&
            (best == a->n_blocks || n < a->blocks[best].n))
            best = i;
    }
    if (best < a->n_blocks) {
        p = a->blocks[best].p;
        a->held -= a->blocks[best].n;
        a->reused += nbytes;
        a->blocks[best] = a->blocks[--a->n_blocks];
    }
    a->in_use += nbytes;
    if (a->in_use > a->peak)
        a->peak = a->in_use;
    pthread_mutex_unlock(&a->lock);
    if (!p && !(p = mem_alloc(nbytes))) {
        pthread_mutex_lock(&a->lock);
        a->in_use -= nbytes;
        pthread_mutex_unlock(&a->lock);
    }
    return p;
}

/* The bytes block p (given back by a tensor of nbytes) can hold: its real
 * size where the C library tells it, else nbytes. Recording only nbytes
 * would shrink a block each time it serves a smaller request, until it
 * fits nothing and every run allocates (and faults in) fresh pages. */
static size_t block_capacity(void *p, size_t nbytes)
{
#ifdef __GLIBC__
    size_t cap = malloc_usable_size(p);
    return cap > nbytes ? cap : nbytes;
#else
    (void)p;
    return nbytes;
#endif
}

void arena_give(void *p, size_t nbytes)
{
    arena *a = arena_tls;
    if (!p)
        return;
    if (!a || nbytes < ARENA_MIN_BLOCK) {
        mem_free(p);
        return;
    }
    int kept = 0;
    size_t cap = block_capacity(p, nbytes);
    pthread_mutex_lock(&a->lock);
    a->in_use = a->in_use > nbytes ? a->in_use - nbytes : 0;
    if (a->n_blocks < ARENA_MAX_BLOCKS && a->held + cap <= 2 * a->peak) {
        a->blocks[a->n_blocks].p = p;
        a->blocks[a->n_blocks].n = cap;
        a->n_blocks++;
        a->held += cap;
        kept = 1;
    }
    pthread_mutex_unlock(&a->lock);
    if (!kept)
        mem_free(p);
}

void arena_gone(size_t nbytes)
{
    arena *a = arena_tls;
    if (!a || nbytes < ARENA_MIN_BLOCK)
        return;
    pthread_mutex_lock(&a->lock);
    a->in_use = a->in_use > nbytes ? a->in_use - nbytes : 0;
    pthread_mutex_unlock(&a->lock);
}

void arena_donate(void *p, size_t nbytes)
{
    donor_p = arena_tls ? p : NULL;
    donor_n = nbytes;
    donor_taken = 0;
}

int arena_donation_end(void)
{
    int taken = donor_taken;
    donor_p = NULL;
    donor_taken = 0;
    return taken;
}

void arena_stats(arena *a, size_t *blocks, size_t *bytes, size_t *reused)
{
    pthread_mutex_lock(&a->lock);
    *blocks = a->n_blocks;
    *bytes = a->held;
    *reused = a->reused;
    pthread_mutex_unlock(&a->lock);
}
