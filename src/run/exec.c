#include "run/exec.h"
#include "core/mem.h"
#include "ops/op.h"
#include "run/observe.h"

#include <string.h>

/* Finds the value an outer-scope name refers to, walking up the scopes. */
static const tdm_tensor *scope_lookup(const exec_scope *s, const char *name)
{
    for (; s; s = s->parent) {
        int id = gr_value_find(s->g, name);
        if (id < 0)
            continue;
        if (s->vals[id])
            return s->vals[id];
        if (!s->g->values[id].outer)
            return NULL;
    }
    return NULL;
}

/* Adds to last_use[] the uses a subgraph makes of this graph's values by
 * name (outer-scope references), attributed to node position pos. */
static void mark_outer_uses(const gr_graph *g, const gr_graph *sub, int pos, int *last_use)
{
    for (int v = 0; v < sub->n_values; v++) {
        if (!sub->values[v].outer)
            continue;
        int id = gr_value_find(g, sub->values[v].name);
        if (id >= 0 && last_use[id] < pos)
            last_use[id] = pos;
    }
    for (int n = 0; n < sub->n_nodes; n++) {
        const gr_node *node = &sub->nodes[n];
        for (int a = 0; a < node->n_attrs; a++) {
            const gr_attr *at = &node->attrs[a];
            if (at->type == GA_GRAPH && at->g)
                mark_outer_uses(g, at->g, pos, last_use);
            for (size_t k = 0; at->type == GA_GRAPHS && k < at->n; k++)
                mark_outer_uses(g, at->graphs[k], pos, last_use);
        }
    }
}

static void release(exec_scope *s, int id)
{
    if (s->owned[id])
        tdm_tensor_destroy(s->vals[id]);
    s->vals[id] = NULL;
    s->owned[id] = 0;
}

tdm_status exec_hand_outputs(tdm_err *e, const gr_graph *g, tdm_tensor **vals, unsigned char *owned,
                             tdm_tensor **out)
{
    tdm_status st = TDM_OK;
    for (int k = 0; k < g->n_outputs; k++) {
        int v = g->outputs[k];
        if (!vals[v]) {
            if (g->values[v].type.optional || g->values[v].type.kind == TDM_KIND_NONE) {
                if ((st = tdm_none_create(&out[k])) != TDM_OK) {
                    err_set(e, st, "out of memory");
                    goto fail;
                }
                continue;
            }
            st = err_set(e, TDM_E_INTERNAL, "output '%s' was not computed", g->values[v].name);
            goto fail;
        }
        int dup = 0;
        for (int j = 0; j < k; j++)
            dup |= g->outputs[j] == v;
        if (owned[v] && !dup) {
            out[k] = vals[v];
            owned[v] = 0; /* ownership moves to the caller; the pointer stays for duplicates */
        } else if ((st = tensor_clone(e, vals[v], &out[k])) != TDM_OK) {
            goto fail;
        }
    }
    return TDM_OK;
fail:
    for (int k = 0; k < g->n_outputs; k++) {
        /* outputs handed over are owned by out[]; free them all */
        tdm_tensor_destroy(out[k]);
        out[k] = NULL;
    }
    return st;
}

tdm_status exec_graph(tdm_err *e, const gr_graph *g, exec_scope *parent, const tdm_tensor *const *in,
                      tdm_tensor **out, int threads, uint64_t *rng)
{
    return exec_graph_obs(e, g, parent, in, out, threads, rng, NULL);
}

tdm_status exec_graph_obs(tdm_err *e, const gr_graph *g, exec_scope *parent, const tdm_tensor *const *in,
                          tdm_tensor **out, int threads, uint64_t *rng, const obs_hook *obs)
{
    tdm_status st = TDM_OK;
    exec_scope s = {g, NULL, NULL, parent, e, threads, rng};
    int *last_use = NULL;
    const tdm_tensor **nin = NULL;
    tdm_tensor **nout = NULL;
    int max_in = 0, max_out = 0;
    char label[256];

    for (int k = 0; k < g->n_outputs; k++)
        out[k] = NULL;
    if (g->n_nodes && !g->order)
        return err_set(e, TDM_E_INTERNAL, "graph '%s' has no topological order", g->name ? g->name : "");
    s.vals = mem_calloc((size_t)g->n_values + 1, sizeof *s.vals);
    s.owned = mem_calloc((size_t)g->n_values + 1, 1);
    last_use = mem_calloc((size_t)g->n_values + 1, sizeof *last_use);
    if (!s.vals || !s.owned || !last_use) {
        st = err_set(e, TDM_E_NOMEM, "out of memory");
        goto done;
    }
    for (int n = 0; n < g->n_nodes; n++) {
        if (g->nodes[n].n_inputs > max_in)
            max_in = g->nodes[n].n_inputs;
        if (g->nodes[n].n_outputs > max_out)
            max_out = g->nodes[n].n_outputs;
    }
    nin = mem_calloc((size_t)max_in + 1, sizeof *nin);
    nout = mem_calloc((size_t)max_out + 1, sizeof *nout);
    if (!nin || !nout) {
        st = err_set(e, TDM_E_NOMEM, "out of memory");
        goto done;
    }

    /* Initial values: initializers, then inputs, then outer-scope names. */
    for (int v = 0; v < g->n_values; v++) {
        if (g->values[v].init)
            s.vals[v] = g->values[v].init;
        last_use[v] = -1;
        if (g->values[v].is_output)
            last_use[v] = g->n_nodes; /* never freed before the end */
    }
    for (int k = 0; k < g->n_inputs; k++) {
        int v = g->inputs[k];
        if (in[k])
            s.vals[v] = (tdm_tensor *)in[k];
        else if (!g->values[v].init && !g->values[v].type.optional) {
            st = err_set(e, TDM_E_INPUT, "input '%s' was not given", g->values[v].name);
            goto done;
        }
    }
    for (int v = 0; v < g->n_values; v++)
        if (g->values[v].outer)
            s.vals[v] = (tdm_tensor *)scope_lookup(parent, g->values[v].name);

    for (int pos = 0; pos < g->n_nodes; pos++) {
        const gr_node *node = &g->nodes[g->order[pos]];
        for (int i = 0; i < node->n_inputs; i++)
            if (node->inputs[i] >= 0 && last_use[node->inputs[i]] < pos)
                last_use[node->inputs[i]] = pos;
        for (int a = 0; a < node->n_attrs; a++) {
            const gr_attr *at = &node->attrs[a];
            if (at->type == GA_GRAPH && at->g)
                mark_outer_uses(g, at->g, pos, last_use);
            for (size_t k = 0; at->type == GA_GRAPHS && k < at->n; k++)
                mark_outer_uses(g, at->graphs[k], pos, last_use);
        }
    }

    for (int pos = 0; pos < g->n_nodes; pos++) {
        const gr_node *node = &g->nodes[g->order[pos]];
        if (node->op < 0) {
            st = err_set(e, TDM_E_UNSUPPORTED, "node %s: no kernel for %s",
                         gr_node_label(node, label, sizeof label), node->op_type);
            goto done;
        }
        for (int i = 0; i < node->n_inputs; i++) {
            int v = node->inputs[i];
            nin[i] = v >= 0 ? s.vals[v] : NULL;
            if (v >= 0 && !nin[i] && !g->values[v].type.optional && !g->values[v].is_input) {
                st = err_set(e, TDM_E_INTERNAL, "node %s: input '%s' has no value",
                             gr_node_label(node, label, sizeof label), g->values[v].name);
                goto done;
            }
        }
        for (int i = 0; i < node->n_outputs; i++) {
            nout[i] = mem_calloc(1, sizeof **nout);
            if (!nout[i]) {
                st = err_set(e, TDM_E_NOMEM, "out of memory");
                goto node_fail;
            }
        }
        op_ctx ctx = {node, node->version, node->n_inputs, nin, node->n_outputs, nout, e, &s, threads, rng, NULL};
        uint64_t t0 = obs && obs->fn ? obs_now_ns() : 0;
        st = op_table[node->op].run(&ctx);
        if (st) {
            err_prefix(e, "node %s: ", gr_node_label(node, label, sizeof label));
            goto node_fail;
        }
        for (int i = 0; i < node->n_outputs; i++) {
            int v = node->outputs[i];
            if (v < 0) {
                tdm_tensor_destroy(nout[i]);
            } else {
                release(&s, v);
                s.vals[v] = nout[i];
                s.owned[v] = 1;
            }
            nout[i] = NULL;
        }
        if (obs && obs->fn)
            obs_node(obs, g->order[pos], (int)obs->plan->devs->n - 1, t0, s.vals);
        /* Free what this node was the last to use. */
        for (int i = 0; i < node->n_inputs; i++) {
            int v = node->inputs[i];
            if (v >= 0 && last_use[v] == pos && s.owned[v])
                release(&s, v);
        }
        for (int i = 0; i < node->n_outputs; i++) {
            int v = node->outputs[i];
            if (v >= 0 && last_use[v] < pos + 1 && !g->values[v].is_output)
                release(&s, v);
        }
        continue;
    node_fail:
        for (int i = 0; i < node->n_outputs; i++) {
            tdm_tensor_destroy(nout[i]);
            nout[i] = NULL;
        }
        goto done;
    }

    st = exec_hand_outputs(e, g, s.vals, s.owned, out);
done:
    if (s.vals)
        for (int v = 0; v < g->n_values; v++)
            if (s.owned[v])
                tdm_tensor_destroy(s.vals[v]);
    mem_free(s.vals);
    mem_free(s.owned);
    mem_free(last_use);
    mem_free(nin);
    mem_free(nout);
    return st;
}

tdm_status op_run_subgraph(op_ctx *ctx, const gr_graph *g, int n_in, const tdm_tensor *const *in, tdm_tensor **out)
{
    if (n_in != g->n_inputs)
        return err_set(ctx->err, TDM_E_MODEL, "subgraph '%s' takes %d inputs, the node passes %d",
                       g->name ? g->name : "", g->n_inputs, n_in);
    return exec_graph(ctx->err, g, ctx->scope, in, out, ctx->threads, ctx->rng);
}
