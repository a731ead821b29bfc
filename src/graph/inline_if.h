/* Control flow known at plan time (inline_if.c): graph inputs bound to
 * fixed values become constants, constants are folded, and an If whose
 * condition is then a constant is replaced by the nodes of the branch it
 * takes, so that devices without If can claim them (issue 18).
 *
 * Rules:
 *   binds        each bound graph input of the main graph keeps its place
 *                among the inputs (the run still passes it; nothing reads
 *                it), and every node of the main graph that read it reads
 *                a constant "<input>/bound" instead (subgraphs of Ifs that
 *                are not inlined still read the input: the same value).
 *   which Ifs    every If of the main graph (ai.onnx) whose condition is a
 *                constant after folding (a folded Equal on a bound input,
 *                an initializer, a Constant); rounds repeat (at most 8)
 *                while a taken branch brings more such Ifs.
 *   the branch   its nodes are copied in the If's place, named
 *                "<If>/inline/<node>"; its values keep their names unless
 *                the outer graph has one of that name ("<If>/<name>" then,
 *                "#k" added until unique); outer-scope references keep
 *                the outer name; the branch's outputs take the If's output
 *                names (an Identity when an output is not made by a node
 *                of the branch, or the same value is output twice).
 *   the result   a new model per round (model_build: validation, shape
 *                inference and folding again); each views the constants
 *                of the one before, so all are kept (gr_inline_free). */
#ifndef TDM_GRAPH_INLINE_IF_H
#define TDM_GRAPH_INLINE_IF_H

#include "graph/model.h"

typedef struct gr_bind {
    const char *name;          /* a graph input */
    const tdm_tensor *value;
} gr_bind;

typedef struct gr_inlined {
    char *node;                /* the If's name in the graph it was in */
    int then;                  /* 1: then_branch taken, 0: else_branch */
    int n_nodes;               /* nodes the branch brought */
} gr_inlined;

typedef struct gr_inline {
    tdm_model **models;        /* owned, in order; the last is the result */
    int n_models;
    gr_inlined *ifs;           /* every If inlined, in order */
    int n_ifs;
} gr_inline;

/* Binds and inlines on a copy of m (rules above). out->n_models is 0 when
 * there was nothing to do (no bind names an input and no If has a
 * constant condition). A bind that names no input is skipped (callers
 * check). A round whose model does not build fails with its sentence (and
 * nothing in out). */
tdm_status gr_inline_ifs(tdm_err *e, const tdm_model *m, const gr_bind *binds, int n_binds, gr_inline *out);
void gr_inline_free(gr_inline *x);

#endif
