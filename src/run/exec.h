/* The executor: runs a graph's nodes in topological order on host tensors,
 * freeing each intermediate after its last use. Subgraphs run through the
 * same path with a scope chain for outer-scope names. */
#ifndef TDM_RUN_EXEC_H
#define TDM_RUN_EXEC_H

#include "graph/graph.h"

typedef struct exec_scope {
    const gr_graph *g;
    tdm_tensor **vals;          /* current value of each value id, or NULL */
    unsigned char *owned;       /* vals[i] is owned by this scope */
    struct exec_scope *parent;
    tdm_err *err;
    int threads;
    uint64_t *rng;
} exec_scope;

/* Runs g. in[] has g->n_inputs entries (NULL: absent, the initializer of
 * the same name is used if there is one); out[] receives g->n_outputs new
 * values owned by the caller. parent is NULL for the main graph. */
tdm_status exec_graph(tdm_err *e, const gr_graph *g, exec_scope *parent, const tdm_tensor *const *in,
                      tdm_tensor **out, int threads, uint64_t *rng);

/* Hands g's outputs from vals[] over to out[]: an owned value moves (its
 * owned[] flag cleared), a borrowed or repeated one is cloned, a missing
 * optional one becomes a none value. On failure out[] is destroyed and
 * cleared. Shared by exec_graph and the heterogeneous executor. */
tdm_status exec_hand_outputs(tdm_err *e, const gr_graph *g, tdm_tensor **vals, unsigned char *owned,
                             tdm_tensor **out);

#endif
