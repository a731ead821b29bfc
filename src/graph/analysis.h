/* Helpers shared by the analysis passes of src/graph (finalize, validate,
 * infer, fold). Private to src/graph. */
#ifndef TDM_GRAPH_ANALYSIS_H
#define TDM_GRAPH_ANALYSIS_H

#include "graph/graph.h"

/* A growable list of value ids. */
typedef struct gr_ids {
    int *v;
    size_t n, cap;
} gr_ids;

/* Value v of g has a value inside g: a producer, a graph input or a
 * constant (initializer, Constant output, folded value). */
int gr_value_defined(const gr_graph *g, int v);

/* Resolves an outer-scope name of g: the nearest enclosing graph where the
 * name is defined, and its id there; NULL when no enclosing graph defines it. */
const gr_graph *gr_outer_lookup(const gr_graph *g, const char *name, int *id);

/* Appends to out the ids of g's values that node n of g reads implicitly,
 * by name, from inside its subgraphs (at any depth). Returns 0, or -1 when
 * out of memory. */
int gr_node_implicit(const gr_graph *g, const gr_node *n, gr_ids *out);

/* Node n has at least one graph attribute. */
int gr_node_has_subgraphs(const gr_node *n);

/* Recounts n_consumers of g's values (input slots plus implicit reads by
 * subgraphs); recomputes producers (first producer in file order). */
tdm_status gr_count_uses(tdm_err *e, gr_graph *g);

/* Infers the output types of node ni of g (and the types inside its
 * subgraphs) from the current types and constants of its inputs, merging
 * them into the outputs' types. */
tdm_status gr_infer_node(tdm_err *e, gr_graph *g, int ni);

/* Initialises the types of g's inputs, constants and outer-scope values
 * before a pass over its nodes. */
void gr_infer_seed(gr_graph *g);

/* Applies fn to every subgraph of node n; stops at the first failure. */
tdm_status gr_each_subgraph(tdm_err *e, gr_node *n, tdm_status (*fn)(tdm_err *, gr_graph *));

#endif
