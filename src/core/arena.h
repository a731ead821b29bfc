/* A buffer arena: a bounded cache of freed tensor data blocks that an
 * executor program keeps across its runs, so that the intermediates of a
 * run reuse the memory of those already dead (liveness reuse) and of the
 * previous runs (no fresh pages to fault in).
 *
 * The blocks are ordinary mem_alloc blocks: a tensor handed to a caller
 * keeps its block and is freed with tdm_tensor_destroy as any other. An
 * entry records a size no larger than its block's real size (the nbytes of
 * the tensor that gave it back), so a block is only ever reused for a
 * request it can hold.
 *
 * The executor makes an arena current on its thread for the time of a run
 * (arena_enter / arena_leave); tensor_alloc then takes blocks from it and
 * tensor_reset gives them back (arena_take / arena_give). Several runs may
 * share one arena at once: it has a lock. The bytes it keeps never exceed
 * twice the most its runs had in use at once: with one block per size a
 * run needs, the next run allocates nothing (squeezenet1_1: 1450 page
 * faults per run with a bound of 1.25x, none with 2x; peak RSS unchanged,
 * 23 MiB). A block serves requests from half its size up. */
#ifndef TDM_CORE_ARENA_H
#define TDM_CORE_ARENA_H

#include <stddef.h>

typedef struct arena arena;

/* A new, empty arena (NULL on out of memory). */
arena *arena_new(void);
/* Frees the arena and every block it holds. */
void arena_free(arena *a);

/* Makes a current on this thread (NULL: none) and returns the arena that
 * was current, to pass back to arena_leave. */
arena *arena_enter(arena *a);
void arena_leave(arena *prev);
/* The arena current on this thread, or NULL. */
arena *arena_current(void);

/* A block of at least nbytes from the current arena, or a new one
 * (mem_alloc); NULL on out of memory. */
void *arena_take(size_t nbytes);
/* Gives p (a mem_alloc block of at least nbytes, or NULL) back: kept by
 * the current arena within its bound, freed otherwise. */
void arena_give(void *p, size_t nbytes);
/* A block of nbytes taken from the current arena left the run for good
 * (an output handed to the caller): no longer counted as in use. */
void arena_gone(size_t nbytes);

/* In-place reuse: the next arena_take of exactly nbytes on this thread
 * (with an arena current) returns p, the block of an input that dies at
 * the node about to run, instead of another block. arena_donation_end
 * ends the offer and returns 1 when p was taken (the input must then no
 * longer free it). */
void arena_donate(void *p, size_t nbytes);
int arena_donation_end(void);

/* Figures (for tests): blocks and bytes kept, bytes served from kept
 * blocks so far. */
void arena_stats(arena *a, size_t *blocks, size_t *bytes, size_t *reused);

#endif
