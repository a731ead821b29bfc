/* The executor: runs a graph's nodes in topological order on host tensors,
 * freeing each intermediate after its last use. Subgraphs run through the
 * same path with a scope chain for outer-scope names. */
#ifndef TDM_RUN_EXEC_H
#define TDM_RUN_EXEC_H

#include "graph/graph.h"
#include "ops/op.h"

/* One graph's run: its values, and the callbacks (op_calls) its kernels
 * reach the executor through (ctx->caller points at `caller`). */
typedef struct exec_scope {
    op_caller caller;           /* first member: ctx->caller is the scope */
    const gr_graph *g;
    tdm_tensor **vals;          /* current value of each value id, or NULL */
    unsigned char *owned;       /* vals[i] is owned by this scope */
    struct exec_scope *parent;
    tdm_err *err;
    int threads;
    uint64_t *rng;
} exec_scope;

/* Fills s for a run of g (vals, owned: its value table; parent: the
 * enclosing scope of a subgraph, or NULL) with the executor's callbacks:
 * subgraphs run through exec_graph, an input is constant when it is g's
 * initializer. */
void exec_scope_init(exec_scope *s, const gr_graph *g, tdm_tensor **vals, unsigned char *owned,
                     exec_scope *parent, tdm_err *e, int threads, uint64_t *rng);

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

/* What an execution program keeps across its runs (built once per
 * program, only read by runs, which may be concurrent): the elementwise
 * fusion of its graph (graph/fuse.h) and the arena its intermediates are
 * allocated from (core/arena.h). */
struct obs_hook;
struct fuse_plan;
struct arena;
struct exec_prog;
typedef struct exec_cache {
    struct fuse_plan *fuse; /* NULL: nothing fused */
    struct arena *arena;    /* NULL: plain allocation */
    int fusion;             /* TDM_FUSION_OFF / _ON / _OBSERVED (tandem.h) */
    /* Figures over all runs (for tests): Reshape-family nodes whose output
     * took its input's block (moves) or borrowed it (views), no copy. */
    _Atomic size_t alias_moves, alias_views;
    /* Concat nodes whose inputs their producers wrote into its output */
    _Atomic size_t concat_in_place;
} exec_cache;

/* Builds the cache of graph g (fusion on). */
tdm_status exec_cache_init(tdm_err *e, const gr_graph *g, exec_cache *c);
void exec_cache_free(exec_cache *c);

/* exec_graph_obs (observe.h) with a program's cache (may be NULL): the
 * fused chains run in their head node (the nodes fused away are not run;
 * an observer sees them with zero time right after their head, whose time
 * holds theirs, and without output values) when c->fusion is
 * TDM_FUSION_OBSERVED, or TDM_FUSION_ON and no observer is set (an
 * observer then sees every node's outputs: the run is not fused);
 * intermediates come from c->arena. In the same cases (and in any run
 * without an observer) Reshape, Flatten, Squeeze and Unsqueeze do not
 * copy: their output takes the input's block or borrows it (exec.c). */
tdm_status exec_graph_cached(tdm_err *e, const gr_graph *g, const tdm_tensor *const *in, tdm_tensor **out,
                             int threads, uint64_t *rng, const struct obs_hook *obs, const exec_cache *c);

/* Sets the fusion mode of an all-cpu program (TDM_FUSION_*; hexec.c). */
void exec_prog_set_fusion(struct exec_prog *p, int mode);

#endif
