/* Building a copy of a model's main graph node by node, with values renamed
 * (rebuild.c; used by inline_if.c and unroll_loop.c). */
#ifndef TDM_GRAPH_REBUILD_H
#define TDM_GRAPH_REBUILD_H

#include "graph/rewrite.h"

/* New names of one graph's values (NULL: keep its own); owned strings. */
typedef struct gr_names {
    char **to;
    int n;
} gr_names;

/* 0, or -1 on out of memory. */
int gr_names_init(gr_names *m, int n);
void gr_names_free(gr_names *m);
/* The gr_rw_names hook: user is a gr_names. */
const char *gr_names_get(void *user, const gr_graph *src, int v);

/* A model shell (gr_rw_model_shell) whose main graph *g has src's constants
 * (views) and inputs, and room for its outputs; the caller adds the nodes,
 * then gr_rebuild_end. */
tdm_status gr_rebuild_begin(tdm_err *e, const gr_model *src, gr_model **out, gr_graph **g);
/* src's outputs into g. */
tdm_status gr_rebuild_end(tdm_err *e, const gr_graph *src, gr_graph *g);

#endif
