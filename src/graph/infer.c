/* gr_infer: static types and shapes, node by node in topological order.
 *
 * Sources of knowledge, from the most to the least certain: constants
 * (initializers, Constant outputs, folded values: exact), the model's
 * declarations (graph inputs, value_info, outputs), and each op's infer
 * hook. They are merged per value (gr_type_merge): what one knows and the
 * other does not is kept; a disagreement is a contradiction in the model
 * and fails with a sentence naming the node and the value. An op without
 * an infer hook leaves its outputs as declared (or unknown). */
#include "graph/analysis.h"
#include "core/mem.h"
#include "ops/op.h"

#include <string.h>

/* A constant the infer hooks may read: not a graph input (whose initializer
 * is only a default the caller may replace). */
static const tdm_tensor *const_of(const gr_graph *g, int v)
{
    return v >= 0 && g->values[v].init && !g->values[v].is_input ? g->values[v].init : NULL;
}

void gr_infer_seed(gr_graph *g)
{
    for (int v = 0; v < g->n_values; v++) {
        gr_value *x = &g->values[v];
        if (x->init) {
            gr_type t;
            gr_type_from_tensor(&t, x->init);
            if (!x->is_input || !x->has_type) {
                t.optional |= x->type.optional;
                x->type = t;
            } else {
                /* an input with a default: the caller may replace the default, so the
                 * declaration rules; the default only fills what it leaves open */
                (void)gr_type_merge(&x->type, &t);
            }
        } else if (x->outer && g->parent) {
            int id;
            const gr_graph *o = gr_outer_lookup(g, x->name, &id);
            if (o)
                (void)gr_type_merge(&x->type, &o->values[id].type);
        }
    }
}

static tdm_status infer_graph(tdm_err *e, gr_graph *g)
{
    if (g->n_nodes && !g->order)
        return err_set(e, TDM_E_INTERNAL, "graph '%s' has no topological order (gr_validate must run first)",
                       g->name ? g->name : "");
    gr_infer_seed(g);
    for (int pos = 0; pos < g->n_nodes; pos++) {
        tdm_status st = gr_infer_node(e, g, g->order[pos]);
        if (st)
            return st;
    }
    return TDM_OK;
}

tdm_status gr_infer_node(tdm_err *e, gr_graph *g, int ni)
{
    char label[256], got[256], had[256];
    gr_node *n = &g->nodes[ni];
    tdm_status st = TDM_OK;

    if (gr_node_has_subgraphs(n) && (st = gr_each_subgraph(e, n, infer_graph)) != TDM_OK)
        return st;
    if (n->op < 0 || !op_table[n->op].infer)
        return TDM_OK;

    const gr_type **in = mem_calloc((size_t)n->n_inputs + 1, sizeof *in);
    const tdm_tensor **vals = mem_calloc((size_t)n->n_inputs + 1, sizeof *vals);
    gr_type *out = mem_calloc((size_t)n->n_outputs + 1, sizeof *out);
    if (!in || !vals || !out) {
        st = err_set(e, TDM_E_NOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < n->n_inputs; i++) {
        int v = n->inputs[i];
        in[i] = v >= 0 ? &g->values[v].type : NULL;
        vals[i] = const_of(g, v);
    }
    for (int i = 0; i < n->n_outputs; i++)
        gr_type_unknown(&out[i]);
    op_infer_ctx ctx = {n, n->version, n->n_inputs, in, vals, n->n_outputs, out, g->model, e};
    if ((st = op_table[n->op].infer(&ctx)) != TDM_OK) {
        err_prefix(e, "node %s: ", gr_node_label(n, label, sizeof label));
        goto done;
    }
    for (int i = 0; i < n->n_outputs; i++) {
        int v = n->outputs[i];
        if (v < 0 || const_of(g, v))
            continue; /* a constant's type is exact already */
        gr_value *x = &g->values[v];
        gr_type merged = x->type;
        if (gr_type_merge(&merged, &out[i])) {
            st = err_set(e, TDM_E_MODEL, "node %s: output '%s' is inferred as %s but %s %s",
                         gr_node_label(n, label, sizeof label), x->name, gr_type_str(&out[i], got, sizeof got),
                         x->has_type ? "the model declares" : "was earlier found to be",
                         gr_type_str(&x->type, had, sizeof had));
            goto done;
        }
        x->type = merged;
    }
done:
    mem_free((void *)in);
    mem_free((void *)vals);
    mem_free(out);
    return st;
}

tdm_status gr_infer(tdm_err *e, gr_graph *g)
{
    if (!g)
        return err_set(e, TDM_E_MODEL, "the model has no graph");
    return infer_graph(e, g);
}
