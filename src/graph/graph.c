/* Construction and queries of the graph IR. */
#include "graph/graph.h"
#include "core/mem.h"
#include "graph/qdq.h"
#include "ops/op.h"

#include <stdio.h>
#include <string.h>

tdm_status gr_model_new(tdm_err *e, gr_model **out)
{
    *out = mem_calloc(1, sizeof **out);
    if (!*out)
        return err_set(e, TDM_E_NOMEM, "out of memory");
    strmap_init(&(*out)->sym_ids);
    return TDM_OK;
}

void gr_model_free(gr_model *m)
{
    if (!m)
        return;
    gr_graph_free(m->main);
    mem_free(m->path);
    mem_free(m->dir);
    mem_free(m->producer_name);
    mem_free(m->producer_version);
    mem_free(m->domain);
    mem_free(m->doc);
    for (int i = 0; i < m->n_opsets; i++)
        mem_free(m->opsets[i].domain);
    mem_free(m->opsets);
    for (int i = 0; i < m->n_metadata; i++) {
        mem_free(m->metadata[i].key);
        mem_free(m->metadata[i].value);
    }
    mem_free(m->metadata);
    for (int i = 0; i < m->n_fn_calls; i++) {
        mem_free(m->fn_calls[i].node);
        mem_free(m->fn_calls[i].function);
    }
    mem_free(m->fn_calls);
    for (size_t i = 0; i < m->n_syms; i++)
        mem_free(m->syms[i]);
    mem_free(m->syms);
    strmap_free(&m->sym_ids);
    mem_free(m);
}

const char *gr_intern(gr_model *m, const char *s)
{
    int id = strmap_get(&m->sym_ids, s);
    if (id >= 0)
        return m->syms[id];
    if (mem_grow((void **)&m->syms, &m->cap_syms, m->n_syms + 1, sizeof *m->syms))
        return NULL;
    char *d = mem_strdup(s);
    if (!d)
        return NULL;
    if (strmap_put(&m->sym_ids, d, (int)m->n_syms)) {
        mem_free(d);
        return NULL;
    }
    m->syms[m->n_syms++] = d;
    return d;
}

int64_t gr_opset_version(const gr_model *m, const char *domain)
{
    const char *d = (!domain || strcmp(domain, "ai.onnx") == 0) ? "" : domain;
    for (int i = 0; i < m->n_opsets; i++)
        if (strcmp(m->opsets[i].domain, d) == 0)
            return m->opsets[i].version;
    return -1;
}

tdm_status gr_graph_new(tdm_err *e, gr_model *m, gr_graph *parent, const char *name, gr_graph **out)
{
    gr_graph *g = mem_calloc(1, sizeof *g);
    *out = NULL;
    if (!g)
        return err_set(e, TDM_E_NOMEM, "out of memory");
    g->model = m;
    g->parent = parent;
    g->depth = parent ? parent->depth + 1 : 0;
    strmap_init(&g->value_ids);
    if (name && !(g->name = mem_strdup(name))) {
        mem_free(g);
        return err_set(e, TDM_E_NOMEM, "out of memory");
    }
    *out = g;
    return TDM_OK;
}

void gr_attr_clear(gr_attr *a)
{
    mem_free(a->name);
    mem_free(a->s);
    tdm_tensor_destroy(a->t);
    gr_graph_free(a->g);
    mem_free(a->floats);
    mem_free(a->ints);
    for (size_t k = 0; a->strings && k < a->n; k++)
        mem_free(a->strings[k]);
    mem_free(a->strings);
    mem_free(a->string_lens);
    for (size_t k = 0; a->tensors && k < a->n; k++)
        tdm_tensor_destroy(a->tensors[k]);
    mem_free(a->tensors);
    for (size_t k = 0; a->graphs && k < a->n; k++)
        gr_graph_free(a->graphs[k]);
    mem_free(a->graphs);
    memset(a, 0, sizeof *a);
}

void gr_node_clear(gr_node *n)
{
    mem_free(n->name);
    mem_free(n->op_type);
    mem_free(n->domain);
    mem_free(n->inputs);
    mem_free(n->outputs);
    mem_free(n->doc);
    for (int a = 0; a < n->n_attrs; a++)
        gr_attr_clear(&n->attrs[a]);
    mem_free(n->attrs);
    gr_qdq_free(n->qdq);
    memset(n, 0, sizeof *n);
}

void gr_graph_free(gr_graph *g)
{
    if (!g)
        return;
    for (int i = 0; i < g->n_nodes; i++)
        gr_node_clear(&g->nodes[i]);
    mem_free(g->nodes);
    for (int i = 0; i < g->n_values; i++) {
        mem_free(g->values[i].name);
        tdm_tensor_destroy(g->values[i].init);
    }
    mem_free(g->values);
    strmap_free(&g->value_ids);
    mem_free(g->inputs);
    mem_free(g->outputs);
    mem_free(g->order);
    mem_free(g->name);
    mem_free(g);
}

int gr_value_find(const gr_graph *g, const char *name) { return strmap_get(&g->value_ids, name); }

tdm_status gr_value_get(tdm_err *e, gr_graph *g, const char *name, int *id)
{
    int v = strmap_get(&g->value_ids, name);
    if (v >= 0) {
        *id = v;
        return TDM_OK;
    }
    if (g->n_values == INT32_MAX ||
        mem_grow((void **)&g->values, &g->cap_values, (size_t)g->n_values + 1, sizeof *g->values))
        return err_set(e, TDM_E_NOMEM, "out of memory");
    gr_value *val = &g->values[g->n_values];
    memset(val, 0, sizeof *val);
    val->producer = -1;
    val->type.rank = -1;
    if (!(val->name = mem_strdup(name)))
        return err_set(e, TDM_E_NOMEM, "out of memory");
    if (strmap_put(&g->value_ids, val->name, g->n_values)) {
        mem_free(val->name);
        return err_set(e, TDM_E_NOMEM, "out of memory");
    }
    *id = g->n_values++;
    return TDM_OK;
}

tdm_status gr_node_add(tdm_err *e, gr_graph *g, const char *name, const char *op_type, const char *domain,
                       int n_in, const char *const *inputs, int n_out, const char *const *outputs, int *idx)
{
    tdm_status st;
    if (g->n_nodes == INT32_MAX ||
        mem_grow((void **)&g->nodes, &g->cap_nodes, (size_t)g->n_nodes + 1, sizeof *g->nodes))
        return err_set(e, TDM_E_NOMEM, "out of memory");
    gr_node *n = &g->nodes[g->n_nodes];
    memset(n, 0, sizeof *n);
    n->op = -1;
    char gen[64];
    if (!name || !*name) {
        snprintf(gen, sizeof gen, "%s_%d", op_type ? op_type : "node", g->n_nodes);
        name = gen;
    }
    n->name = mem_strdup(name);
    n->op_type = mem_strdup(op_type ? op_type : "");
    n->domain = mem_strdup(domain && strcmp(domain, "ai.onnx") != 0 ? domain : "");
    n->inputs = mem_calloc((size_t)n_in + 1, sizeof *n->inputs);
    n->outputs = mem_calloc((size_t)n_out + 1, sizeof *n->outputs);
    if (!n->name || !n->op_type || !n->domain || !n->inputs || !n->outputs) {
        st = err_set(e, TDM_E_NOMEM, "out of memory");
        goto fail;
    }
    for (int i = 0; i < n_in; i++) {
        n->inputs[i] = -1;
        if (inputs[i] && *inputs[i] && (st = gr_value_get(e, g, inputs[i], &n->inputs[i])) != TDM_OK)
            goto fail;
        n->n_inputs = i + 1;
    }
    n->n_inputs = n_in;
    for (int i = 0; i < n_out; i++) {
        n->outputs[i] = -1;
        if (outputs[i] && *outputs[i] && (st = gr_value_get(e, g, outputs[i], &n->outputs[i])) != TDM_OK)
            goto fail;
    }
    n->n_outputs = n_out;
    *idx = g->n_nodes++;
    return TDM_OK;
fail:
    mem_free(n->name);
    mem_free(n->op_type);
    mem_free(n->domain);
    mem_free(n->inputs);
    mem_free(n->outputs);
    memset(n, 0, sizeof *n);
    return st;
}

gr_attr *gr_attr_add(tdm_err *e, gr_graph *g, int node, const char *name)
{
    gr_node *n = &g->nodes[node];
    gr_attr *arr = mem_realloc(n->attrs, sizeof *arr * ((size_t)n->n_attrs + 1));
    if (!arr) {
        err_set(e, TDM_E_NOMEM, "out of memory");
        return NULL;
    }
    n->attrs = arr;
    gr_attr *a = &arr[n->n_attrs];
    memset(a, 0, sizeof *a);
    if (!(a->name = mem_strdup(name))) {
        err_set(e, TDM_E_NOMEM, "out of memory");
        return NULL;
    }
    n->n_attrs++;
    return a;
}

