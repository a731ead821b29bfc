/* The node view the kernels read: a node of the graph IR (src/graph) with
 * its attributes, and the static types the infer hooks compute. Plain data,
 * below the graph layer: src/graph/graph.h includes this header and builds
 * these structs; the kernels (src/ops) only read them. The attribute
 * queries are defined in ops/node.c. */
#ifndef TDM_OPS_NODE_H
#define TDM_OPS_NODE_H

#include "core/tensor.h"

#include <stddef.h>
#include <stdint.h>

/* A graph (src/graph/graph.h) and a model: opaque here. A kernel that runs
 * a subgraph passes the gr_graph of its attribute back to its caller
 * (op_run_subgraph, ops/op.h). */
typedef struct gr_graph gr_graph;
typedef struct gr_model gr_model;

/* One dimension: v >= 0 when known; else v == -1 and sym names it (interned
 * in the model; NULL for an anonymous unknown dimension). */
typedef struct gr_dim {
    int64_t v;
    const char *sym;
} gr_dim;

/* Static type of a value. For a sequence, dtype/rank/dims describe the items.
 * rank == -1: unknown rank. dtype == TDM_UNDEFINED: unknown element type. */
typedef struct gr_type {
    tdm_kind kind;
    tdm_dtype dtype;
    int rank;
    gr_dim dims[TDM_MAX_RANK];
    int optional; /* declared as optional(...) in the model */
    /* TDM_INT64 or TDM_STRING: the value (kind TDM_KIND_MAP) or a
     * sequence's items are maps with this key type and values of dtype
     * (rank and dims then say nothing); TDM_UNDEFINED otherwise. */
    tdm_dtype map_key;
} gr_type;

/* Attribute types, numbered as ONNX's AttributeProto.AttributeType. */
typedef enum gr_attr_type {
    GA_UNDEFINED = 0,
    GA_FLOAT = 1,
    GA_INT = 2,
    GA_STRING = 3,
    GA_TENSOR = 4,
    GA_GRAPH = 5,
    GA_FLOATS = 6,
    GA_INTS = 7,
    GA_STRINGS = 8,
    GA_TENSORS = 9,
    GA_GRAPHS = 10,
    GA_SPARSE_TENSOR = 11,
    GA_SPARSE_TENSORS = 12,
    GA_TYPE_PROTO = 13,
    GA_TYPE_PROTOS = 14
} gr_attr_type;

typedef struct gr_attr {
    char *name;
    gr_attr_type type;
    float f;
    int64_t i;
    char *s;           /* GA_STRING: bytes, NUL-terminated; s_len excludes the NUL */
    size_t s_len;
    tdm_tensor *t;     /* GA_TENSOR (and GA_SPARSE_TENSOR, densified) */
    gr_graph *g;       /* GA_GRAPH */
    gr_type tp;        /* GA_TYPE_PROTO */
    size_t n;          /* element count of the list forms below */
    float *floats;
    int64_t *ints;
    char **strings;
    size_t *string_lens;
    tdm_tensor **tensors;
    gr_graph **graphs;
} gr_attr;

typedef struct gr_node {
    char *name;        /* never NULL; loader invents "<op>_<index>" when empty */
    char *op_type;
    char *domain;      /* "" for ai.onnx */
    int op;            /* index in the op table, or -1 when unknown */
    int version;       /* the op's resolved since-version (from the op table) */
    int64_t opset;     /* the model's opset for this node's domain */
    int n_inputs;
    int *inputs;       /* value ids; -1 = omitted */
    int n_outputs;
    int *outputs;
    int n_attrs;
    gr_attr *attrs;
    char *doc;
    struct gr_qdq *qdq; /* the node's QDQ group for integer devices (graph/qdq.h), or NULL */
} gr_node;

/* ---- queries ---- */

const gr_attr *gr_attr_find(const gr_node *n, const char *name);
int64_t gr_attr_int(const gr_node *n, const char *name, int64_t dflt);
float gr_attr_float(const gr_node *n, const char *name, float dflt);
/* NUL-terminated string attribute, or dflt. */
const char *gr_attr_str(const gr_node *n, const char *name, const char *dflt);
/* Integer list attribute: returns the count and sets *vals, or -1 when absent. */
int gr_attr_ints(const gr_node *n, const char *name, const int64_t **vals);
int gr_attr_floats(const gr_node *n, const char *name, const float **vals);

/* "Conv 'conv1'" style label for messages, into buf. */
const char *gr_node_label(const gr_node *n, char *buf, size_t size);

#endif
