/* Building rewrites, for the rule files (rewrite_rules.c,
 * rewrite_rules2.c) only: a builder (rwb) over one node of a built graph,
 * the intermediate names it makes and the nodes it appends to a gr_rw
 * (rewrite.h). Every helper sets b->fail on out of memory and returns
 * something harmless, so a rule writes its nodes straight through and
 * checks once (rwb_done). */
#ifndef TDM_GRAPH_REWRITE_BUILD_H
#define TDM_GRAPH_REWRITE_BUILD_H

#include "graph/rewrite.h"

#define RWB_NAME 200
#define RWB_TMPS 80

typedef struct rwb {
    gr_rw *r;
    const gr_graph *g;
    const gr_node *n;
    int64_t opset;
    tdm_dtype dt;        /* the element type of input 0 */
    tdm_dtype ct;        /* the type constants are made in (float32 for a widened normalisation) */
    int fail;            /* out of memory */
    char tmp[RWB_TMPS][RWB_NAME];
    int nt;
} rwb;

/* A builder for node of g, recorded as the rewrite's first original node. */
void rwb_init(rwb *b, gr_rw *r, const gr_graph *g, int node);
/* A fresh intermediate value name. */
const char *rwb_tmp(rwb *b);
/* The node's input / output i ("" when omitted), its type, its constant. */
const char *rwb_in_name(const rwb *b, int i);
const char *rwb_out_name(const rwb *b, int i);
const gr_type *rwb_in_type(const rwb *b, int i);
const tdm_tensor *rwb_in_const(const rwb *b, int i);
/* Output i is produced and read (by a node or as a graph output). */
int rwb_out_used(const rwb *b, int i);
int rwb_is_float(tdm_dtype dt);
/* Appends a node of one output with one or two inputs (c NULL for one). */
gr_rw_node *rwb_op(rwb *b, const char *type, int n_in, const char *a, const char *c, const char *out);
/* A scalar constant of type b->ct; an int64 1-D constant. */
const char *rwb_scalar(rwb *b, double v);
const char *rwb_ints(rwb *b, int n, const int64_t *v);
/* The node's constant int64 list input i (or attribute attr when the input
 * is absent): its count, or -1 when neither is constant. */
int rwb_const_ints(const rwb *b, int i, const char *attr, int64_t *v, int cap);
/* 1, or -1 when out of memory. */
int rwb_done(const rwb *b);
/* Names x's node-axis removal/insertion: Squeeze / Unsqueeze of one axis
 * (an attribute before opset 13, an input from 13). */
void rwb_squeeze(rwb *b, const char *op, const char *x, int64_t axis, const char *out);

/* The rules of rewrite_rules2.c (the table is in rewrite_rules.c). */
int gr_rw_rule_gather_scalar(const gr_graph *g, int node, gr_rw *r);
int gr_rw_rule_einsum(const gr_graph *g, int node, gr_rw *r);
int gr_rw_rule_conv_bn(const gr_graph *g, int node, gr_rw *r);
int gr_rw_rule_cast_insert(const gr_graph *g, int node, gr_rw *r);
int gr_rw_rule_cast_fp16(const gr_graph *g, int node, gr_rw *r);

#endif
