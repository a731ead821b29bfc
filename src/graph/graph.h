/* The graph IR: a model's graphs, their nodes, values and initializers.
 *
 * The loader (src/onnx) builds it with the gr_* construction functions;
 * validation, topological order, shape inference and constant folding
 * (src/graph) complete it; the executor (src/run) and the planner read it.
 * Values are addressed by index in their graph's value table; a node input
 * or output of -1 is an omitted optional. A subgraph (If/Loop/Scan body)
 * may read values of enclosing graphs by name: those are values with
 * `outer` set, resolved at run time through the scope chain. */
#ifndef TDM_GRAPH_GRAPH_H
#define TDM_GRAPH_GRAPH_H

#include "core/err.h"
#include "core/strmap.h"
#include "core/tensor.h"
#include "ops/node.h"

#include <stddef.h>
#include <stdint.h>

typedef struct gr_value {
    char *name;
    gr_type type;
    tdm_tensor *init;  /* initializer, Constant output or folded value: owned */
    int is_initializer;/* init came from the model's initializers */
    int producer;      /* node index in the graph, or -1 */
    int is_input;      /* a graph input (not only an initializer) */
    int is_output;
    int outer;         /* no producer, not an input: an enclosing graph's value */
    int has_type;      /* type came from the model (input/output/value_info) */
    int n_consumers;   /* filled by gr_finalize */
} gr_value;

struct gr_graph {
    char *name;
    gr_model *model;
    gr_graph *parent;  /* enclosing graph for subgraphs, NULL for the main graph */
    gr_node *nodes;
    int n_nodes;
    size_t cap_nodes;
    gr_value *values;
    int n_values;
    size_t cap_values;
    strmap value_ids;  /* name → value id */
    int *inputs;       /* graph inputs in order, initializer-only inputs excluded */
    int n_inputs;
    int *outputs;
    int n_outputs;
    int *order;        /* topological order of nodes (filled by gr_toposort) */
    int depth;         /* nesting depth: 0 for the main graph */
};

typedef struct gr_opset {
    char *domain;      /* "" for ai.onnx (and for "ai.onnx" in the file) */
    int64_t version;
} gr_opset;

typedef struct gr_kv {
    char *key;
    char *value;
} gr_kv;

/* A call of a model-local function that the loader inlined (onnx/functions.c). */
typedef struct gr_fn_call {
    char *node;        /* the call's name; a nested call's is "<call>/fn/<node>" */
    char *function;    /* "domain:name" */
    int depth;         /* 0: a call in the main graph */
    int n_nodes;       /* nodes it became (nested calls expanded) */
} gr_fn_call;

struct gr_model {
    char *path;        /* as given */
    char *dir;         /* folder external data is resolved in (NULL: none allowed) */
    int64_t ir_version;
    char *producer_name;
    char *producer_version;
    char *domain;
    int64_t model_version;
    char *doc;
    gr_opset *opsets;
    int n_opsets;
    gr_kv *metadata;
    int n_metadata;
    gr_graph *main;
    gr_fn_call *fn_calls;  /* local function calls inlined at load */
    int n_fn_calls;
    /* interned dimension symbols */
    char **syms;
    size_t n_syms, cap_syms;
    strmap sym_ids;
};

/* ---- construction (used by the loader and by tests) ---- */

tdm_status gr_model_new(tdm_err *e, gr_model **out);
void gr_model_free(gr_model *m);
/* An interned copy of s owned by m (NULL on out of memory). */
const char *gr_intern(gr_model *m, const char *s);
/* The version of an opset domain ("" or "ai.onnx" for the default), or -1. */
int64_t gr_opset_version(const gr_model *m, const char *domain);

tdm_status gr_graph_new(tdm_err *e, gr_model *m, gr_graph *parent, const char *name, gr_graph **out);
void gr_graph_free(gr_graph *g);
/* The id of the value named name, creating it when absent. */
tdm_status gr_value_get(tdm_err *e, gr_graph *g, const char *name, int *id);
/* The id of the value named name, or -1. */
int gr_value_find(const gr_graph *g, const char *name);
/* Appends a node; takes ownership of nothing (strings are copied). inputs /
 * outputs are names ("" = omitted). Returns the node index in *idx. */
tdm_status gr_node_add(tdm_err *e, gr_graph *g, const char *name, const char *op_type, const char *domain,
                       int n_in, const char *const *inputs, int n_out, const char *const *outputs, int *idx);
/* Appends an (empty) attribute to node idx and returns it for filling. */
gr_attr *gr_attr_add(tdm_err *e, gr_graph *g, int node, const char *name);
void gr_attr_clear(gr_attr *a);
/* Frees what node n owns (names, value lists, attributes) and zeroes it. */
void gr_node_clear(gr_node *n);

/* Marks subgraph values with no producer that are not inputs or initializers
 * as `outer`, counts consumers, resolves ops and their versions against the
 * op table, and checks what the construction could not (recursively into
 * subgraphs). Called by the loader after construction. */
tdm_status gr_finalize(tdm_err *e, gr_model *m);

/* ---- analysis (src/graph) ---- */

/* Validates g and its subgraphs: duplicate names, undefined inputs, cycles,
 * unknown ops (with domain and opset), missing required inputs. Fills
 * g->order with a topological order. */
tdm_status gr_validate(tdm_err *e, gr_graph *g);

/* Infers types and shapes of every value (symbolic dims kept by name) from
 * the graph inputs, initializers and each op's infer hook. Values it cannot
 * infer keep rank -1 or dims with v == -1. Never fails on an op without an
 * infer hook; fails on a contradiction (e.g. incompatible broadcast) with a
 * sentence naming the node. */
tdm_status gr_infer(tdm_err *e, gr_graph *g);

/* Folds nodes whose inputs are all constant and whose op is deterministic
 * (the Shape→Gather→Unsqueeze→Concat→Reshape chains PyTorch exports) into
 * initializers; removes the nodes. Shapes must have been inferred. */
tdm_status gr_fold_constants(tdm_err *e, gr_graph *g);


/* ---- static types (src/graph/type.c), shared by the inference driver and
 * the infer hooks ---- */

/* Sets t to a tensor of unknown element type and rank. */
void gr_type_unknown(gr_type *t);
/* The exact type of a constant value (NULL: unknown). */
void gr_type_from_tensor(gr_type *t, const tdm_tensor *v);
/* Nothing is known: element type undefined and rank -1. */
int gr_type_is_unknown(const gr_type *t);
/* 0 and the dims (dims may be NULL) when t is a tensor of known rank whose
 * every dimension is known; -1 otherwise. */
int gr_type_static_dims(const gr_type *t, int64_t *dims);
/* Merges what b knows into a (a known dimension beats a symbol, a symbol
 * beats an anonymous unknown; a's symbols win over b's). Returns 0, or -1
 * on a contradiction (element types, ranks or known dimensions differ),
 * leaving a unchanged. */
int gr_type_merge(gr_type *a, const gr_type *b);
/* "float[N,3,224,224]" ("?" for unknowns) into buf. */
const char *gr_type_str(const gr_type *t, char *buf, size_t size);

/* Constant folding keeps results of at most this many bytes per tensor:
 * folded values stay in memory for the model's lifetime (and are copied to
 * every device that reads them), so folding large tensors (an Expand of a
 * weight, a ConstantOfShape mask) would trade run-time work for a permanent
 * memory cost; the shape chains folding is for are a few bytes. A Constant
 * node is exempt: its value is in memory already. */
#define GR_FOLD_MAX_BYTES ((size_t)1 << 20)

#endif
