/* Graph rewrites: one or a few nodes of a model's main graph replaced by
 * other nodes that compute the same values (the rescue pass, plan/rescue.h,
 * decides which to keep; this layer only builds them).
 *
 * A rewrite (gr_rw) names the original nodes it replaces (their external
 * inputs and the outputs read elsewhere stay the same values) and holds the
 * new nodes as plain data plus the constants they read. The rules
 * (rewrite_rules.c) fill a gr_rw from a node of a built model (types and
 * shapes inferred); gr_rw_apply builds a new model with rewrites in place
 * and gr_rw_extract a small model of one rewrite (or of its original
 * nodes) alone, for checking and verification. Both models borrow the
 * source model's constant tensors (tensor_view): the source must outlive
 * them. The new models are raw IR: the caller builds them (model_build). */
#ifndef TDM_GRAPH_REWRITE_H
#define TDM_GRAPH_REWRITE_H

#include "graph/graph.h"

#define GR_RW_MAX_IO 16
#define GR_RW_MAX_ATTRS 8
#define GR_RW_MAX_ORIG 4

typedef struct gr_rw_attr {
    char name[24];
    gr_attr_type type;      /* GA_INT, GA_FLOAT, GA_STRING, GA_INTS */
    int64_t i;
    float f;
    char s[24];
    int n;
    int64_t ints[TDM_MAX_RANK];
} gr_rw_attr;

typedef struct gr_rw_node {
    char op[32];
    int n_in, n_out;
    char *in[GR_RW_MAX_IO];  /* value names (owned), "" = omitted */
    char *out[GR_RW_MAX_IO];
    int n_attrs;
    gr_rw_attr attrs[GR_RW_MAX_ATTRS];
} gr_rw_node;

/* Rule kinds, recorded as the RESCUED sub-reason. */
typedef enum gr_rw_kind { GR_RW_DECOMPOSE = 0, GR_RW_FUSE = 1, GR_RW_APPROX = 2, GR_RW_DTYPE = 3 } gr_rw_kind;
const char *gr_rw_kind_str(gr_rw_kind k);

typedef struct gr_rw {
    const char *rule;        /* static name ("layernorm") */
    gr_rw_kind kind;
    int orig[GR_RW_MAX_ORIG];/* node indices in the source main graph */
    int n_orig;
    gr_rw_node *nodes;
    int n_nodes, cap_nodes;
    char **cnames;           /* constants the new nodes read */
    tdm_tensor **cvals;      /* owned */
    int n_consts, cap_consts;
    int counter;             /* names of intermediate values */
    char why[200];           /* a rule that returns 0 for a form of its op it does not take may say why */
} gr_rw;

void gr_rw_init(gr_rw *r, const char *rule, gr_rw_kind kind);
void gr_rw_free(gr_rw *r);

/* ---- building a rewrite (the rules) ---- */

/* A fresh intermediate value name derived from the first original node
 * ("<node>/rescue/<k>"), into buf. */
const char *gr_rw_tmp(gr_rw *r, const gr_graph *g, char *buf, size_t size);
/* Appends a node; in/out are names (copied; "" = omitted). Returns the node
 * for adding attributes, or NULL when out of memory. */
gr_rw_node *gr_rw_node_add(gr_rw *r, const char *op, int n_in, const char *const *in, int n_out,
                           const char *const *out);
void gr_rw_attr_int(gr_rw_node *n, const char *name, int64_t v);
void gr_rw_attr_float(gr_rw_node *n, const char *name, float v);
void gr_rw_attr_str(gr_rw_node *n, const char *name, const char *v);
void gr_rw_attr_ints(gr_rw_node *n, const char *name, int n_v, const int64_t *v);
/* A constant named after the rewrite (written into name, size >= 200) of
 * dtype (a float type: the values are converted) and shape; vals has
 * count(dims) doubles. -1 when out of memory. */
int gr_rw_const(gr_rw *r, const gr_graph *g, tdm_dtype dtype, int rank, const int64_t *dims, const double *vals,
                char *name, size_t size);
/* An int64 1-D constant. */
int gr_rw_const_i64(gr_rw *r, const gr_graph *g, int n, const int64_t *vals, char *name, size_t size);

/* ---- the rules (rewrite_rules.c) ---- */

/* What a rule needs to know of the device it rescues for beyond
 * supports(): nothing yet; the rule builds, the device judges. */
typedef int (*gr_rw_rule_fn)(const gr_graph *g, int node, gr_rw *out);

/* Which refusals a rule answers (gr_rw_rule.when). */
typedef enum gr_rw_when {
    GR_RW_WHEN_OP = 0,       /* OP_UNSUPPORTED, DTYPE_UNSUPPORTED, ATTR_UNSUPPORTED */
    GR_RW_WHEN_SHAPE = 1,    /* SHAPE_UNSUPPORTED, ATTR_UNSUPPORTED (a rank the device does not take) */
    GR_RW_WHEN_DTYPE = 2     /* DTYPE_UNSUPPORTED only */
} gr_rw_when;

typedef struct gr_rw_rule {
    const char *name;        /* "layernorm", as profiles list them */
    const char *op;          /* the op type it starts from; "*": any op with an int64 input or output;
                              * "*float": any op with a float32 input or output */
    gr_rw_kind kind;         /* GR_RW_APPROX: only with --rescue all */
    gr_rw_rule_fn build;     /* 1: *out filled; 0: does not apply (out left empty); -1: out of memory */
    const char *what;        /* one line: what it becomes */
    gr_rw_when when;         /* which refusals it answers */
} gr_rw_rule;

/* The rules, in the order they are tried; *n receives the count. */
const gr_rw_rule *gr_rw_rules(size_t *n);

/* ---- models from rewrites ---- */

/* A copy of src's main graph (types, constants as views, subgraphs
 * copied) with each rewrite's original nodes replaced by its new nodes, in
 * the position of the first of them. Rewrites must not share nodes. */
tdm_status gr_rw_apply(tdm_err *e, const gr_model *src, const gr_rw *const *rws, int n_rws, gr_model **out);

/* A model of rw alone: its new nodes (orig == 0) or its original nodes
 * (orig == 1); graph inputs are the original nodes' external non-constant
 * inputs (with their types), constants are initializers, graph outputs the
 * values the original nodes produce that are read elsewhere or are graph
 * outputs. */
tdm_status gr_rw_extract(tdm_err *e, const gr_model *src, const gr_rw *rw, int orig, gr_model **out);

/* ---- building models by hand (inline_if.c) ---- */

/* Names of src's values in the graph being built: name() returns the new
 * name of value v of src, or NULL to keep its own. */
typedef struct gr_rw_names {
    const char *(*name)(void *user, const gr_graph *src, int v);
    void *user;
} gr_rw_names;

/* Appends a copy of node n of src to g, named name (NULL: its own), its
 * values renamed by map (NULL: none); attributes and subgraphs copied,
 * constants are views of src's (src must outlive g). */
tdm_status gr_rw_copy_node(tdm_err *e, gr_graph *g, const gr_graph *src, const gr_node *n, const char *name,
                           const gr_rw_names *map);
/* The value named name (NULL: its own) in g, made when absent, with the
 * type of value sv of src (when declared or constant) and its constant (a
 * view). */
tdm_status gr_rw_take_value(tdm_err *e, gr_graph *g, const gr_graph *src, int sv, const char *name, int *id);
/* An empty model with src's header and opsets. */
tdm_status gr_rw_model_shell(tdm_err *e, const gr_model *src, gr_model **out);

#endif
