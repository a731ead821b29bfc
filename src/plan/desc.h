/* Node descriptions for the device ABI (tdm_node_desc) built from IR nodes,
 * with their storage in a small arena owned by the planner. Everything a
 * device's supports()/estimate_ms()/run() sees of a node comes from here. */
#ifndef TDM_PLAN_DESC_H
#define TDM_PLAN_DESC_H

#include "tandem/device.h"
#include "core/err.h"
#include "graph/graph.h"

#include <stddef.h>

/* A bump allocator: many small blocks freed at once. */
typedef struct plan_arena_chunk plan_arena_chunk;
typedef struct plan_arena {
    plan_arena_chunk *head;
} plan_arena;

void plan_arena_init(plan_arena *a);
void plan_arena_free(plan_arena *a);
/* size bytes, zeroed, aligned for any type; NULL when out of memory. */
void *plan_arena_alloc(plan_arena *a, size_t size);
/* n elements of size bytes (checked); NULL on overflow or out of memory. */
void *plan_arena_array(plan_arena *a, size_t n, size_t size);
char *plan_arena_strdup(plan_arena *a, const char *s);

/* Fills out for node n of g: the inferred static type of every input and
 * output (unknown dims as -1, unknown rank as -1, an omitted optional input
 * as name "" and TDM_UNDEFINED), the value of constant inputs (initializers
 * and folded values that are not graph inputs), and the attributes
 * (TENSORS, GRAPHS, SPARSE_* and TYPE_PROTO* attributes carry their type
 * only). Names, attribute payloads and constant data are borrowed from g;
 * the arrays live in a. */
tdm_status plan_desc_build(tdm_err *e, plan_arena *a, const gr_graph *g, const gr_node *n, tdm_node_desc *out);

#endif
