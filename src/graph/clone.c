/* gr_model_clone: a deep copy of a model's IR (graphs, nodes, attributes,
 * values with their types and constants), so that a model can be
 * specialised (graph/model.h, model_specialize) without reading its file
 * again. Dimension symbols are interned again in the copy, in the same
 * order, so that the copy's types name the copy's symbols. */
#include "graph/model.h"
#include "core/mem.h"
#include "graph/qdq.h"

#include <string.h>

/* A copy of s (NULL stays NULL); sets *bad when out of memory. */
static char *dup_or_null(const char *s, int *bad)
{
    char *d;
    if (!s)
        return NULL;
    if (!(d = mem_strdup(s)))
        *bad = 1;
    return d;
}

/* t's symbols as the copy dst interned them. */
static int remap_type(gr_model *dst, gr_type *t)
{
    for (int d = 0; d < t->rank && d < TDM_MAX_RANK; d++)
        if (t->dims[d].sym && !(t->dims[d].sym = gr_intern(dst, t->dims[d].sym)))
            return -1;
    return 0;
}

/* A copy of a constant; immutable is kept (kernels may cache derived forms
 * of an initializer's data), data in a file mapping are shared. */
static tdm_status clone_tensor(tdm_err *e, const tdm_tensor *src, tdm_tensor **out)
{
    *out = NULL;
    return src ? tensor_share(e, src, out) : TDM_OK;
}

static tdm_status clone_graph(tdm_err *e, const gr_graph *src, gr_model *dm, gr_graph *parent, gr_graph **out);

static tdm_status clone_attr(tdm_err *e, const gr_attr *a, gr_model *dm, gr_graph *owner, gr_attr *d)
{
    tdm_status st;
    int bad = 0;
    memset(d, 0, sizeof *d);
    d->type = a->type;
    d->f = a->f;
    d->i = a->i;
    d->s_len = a->s_len;
    d->tp = a->tp;
    d->n = a->n;
    d->name = dup_or_null(a->name, &bad);
    if (a->s) {
        if ((d->s = mem_alloc(a->s_len + 1)) != NULL)
            memcpy(d->s, a->s, a->s_len + 1);
        else
            bad = 1;
    }
    if (bad || remap_type(dm, &d->tp))
        return err_set(e, TDM_E_NOMEM, "out of memory");
    if ((st = clone_tensor(e, a->t, &d->t)) != TDM_OK)
        return st;
    if (a->g && (st = clone_graph(e, a->g, dm, owner, &d->g)) != TDM_OK)
        return st;
    if (a->floats && (d->floats = mem_calloc(a->n ? a->n : 1, sizeof *d->floats)) != NULL)
        memcpy(d->floats, a->floats, a->n * sizeof *d->floats);
    if (a->ints && (d->ints = mem_calloc(a->n ? a->n : 1, sizeof *d->ints)) != NULL)
        memcpy(d->ints, a->ints, a->n * sizeof *d->ints);
    if ((a->floats && !d->floats) || (a->ints && !d->ints))
        return err_set(e, TDM_E_NOMEM, "out of memory");
    if (a->strings) {
        d->strings = mem_calloc(a->n ? a->n : 1, sizeof *d->strings);
        d->string_lens = mem_calloc(a->n ? a->n : 1, sizeof *d->string_lens);
        if (!d->strings || !d->string_lens)
            return err_set(e, TDM_E_NOMEM, "out of memory");
        for (size_t k = 0; k < a->n; k++) {
            size_t len = a->string_lens ? a->string_lens[k] : strlen(a->strings[k]);
            d->string_lens[k] = len;
            if (!(d->strings[k] = mem_alloc(len + 1)))
                return err_set(e, TDM_E_NOMEM, "out of memory");
            memcpy(d->strings[k], a->strings[k], len + 1);
        }
    }
    if (a->tensors) {
        if (!(d->tensors = mem_calloc(a->n ? a->n : 1, sizeof *d->tensors)))
            return err_set(e, TDM_E_NOMEM, "out of memory");
        for (size_t k = 0; k < a->n; k++)
            if ((st = clone_tensor(e, a->tensors[k], &d->tensors[k])) != TDM_OK)
                return st;
    }
    if (a->graphs) {
        if (!(d->graphs = mem_calloc(a->n ? a->n : 1, sizeof *d->graphs)))
            return err_set(e, TDM_E_NOMEM, "out of memory");
        for (size_t k = 0; k < a->n; k++)
            if (a->graphs[k] && (st = clone_graph(e, a->graphs[k], dm, owner, &d->graphs[k])) != TDM_OK)
                return st;
    }
    return TDM_OK;
}

/* Node n of src into d (zeroed by the caller): on failure d holds what was
 * copied so far, for gr_node_clear. */
static tdm_status clone_node(tdm_err *e, const gr_node *n, gr_model *dm, gr_graph *owner, gr_node *d)
{
    int bad = 0;
    d->op = n->op;
    d->version = n->version;
    d->opset = n->opset;
    d->name = dup_or_null(n->name, &bad);
    d->op_type = dup_or_null(n->op_type, &bad);
    d->domain = dup_or_null(n->domain, &bad);
    d->doc = dup_or_null(n->doc, &bad);
    d->inputs = mem_calloc((size_t)n->n_inputs + 1, sizeof *d->inputs);
    d->outputs = mem_calloc((size_t)n->n_outputs + 1, sizeof *d->outputs);
    d->attrs = mem_calloc((size_t)n->n_attrs + 1, sizeof *d->attrs);
    if (bad || !d->inputs || !d->outputs || !d->attrs)
        return err_set(e, TDM_E_NOMEM, "out of memory");
    d->n_inputs = n->n_inputs;
    d->n_outputs = n->n_outputs;
    if (n->n_inputs)
        memcpy(d->inputs, n->inputs, (size_t)n->n_inputs * sizeof *d->inputs);
    if (n->n_outputs)
        memcpy(d->outputs, n->outputs, (size_t)n->n_outputs * sizeof *d->outputs);
    if (n->qdq && !(d->qdq = gr_qdq_clone(n->qdq)))
        return err_set(e, TDM_E_NOMEM, "out of memory");
    for (int a = 0; a < n->n_attrs; a++) {
        d->n_attrs = a + 1; /* what gr_node_clear must free */
        tdm_status st = clone_attr(e, &n->attrs[a], dm, owner, &d->attrs[a]);
        if (st)
            return st;
    }
    return TDM_OK;
}

static int *clone_ints(const int *src, int n, int *bad)
{
    int *d;
    if (!src)
        return NULL;
    if (!(d = mem_calloc((size_t)n + 1, sizeof *d))) {
        *bad = 1;
        return NULL;
    }
    if (n)
        memcpy(d, src, (size_t)n * sizeof *d);
    return d;
}

static tdm_status clone_graph(tdm_err *e, const gr_graph *src, gr_model *dm, gr_graph *parent, gr_graph **out)
{
    gr_graph *g;
    tdm_status st = gr_graph_new(e, dm, parent, src->name, &g);
    int bad = 0;
    *out = NULL;
    if (st)
        return st;
    g->depth = src->depth;
    g->values = mem_calloc((size_t)src->n_values + 1, sizeof *g->values);
    g->nodes = mem_calloc((size_t)src->n_nodes + 1, sizeof *g->nodes);
    if (!g->values || !g->nodes)
        goto nomem;
    g->cap_values = (size_t)src->n_values + 1;
    g->cap_nodes = (size_t)src->n_nodes + 1;
    for (int v = 0; v < src->n_values; v++) {
        const gr_value *x = &src->values[v];
        gr_value *y = &g->values[v];
        *y = *x;
        y->name = NULL;
        y->init = NULL;
        g->n_values = v + 1; /* what gr_graph_free must free */
        if (!(y->name = mem_strdup(x->name)) || remap_type(dm, &y->type) || strmap_put(&g->value_ids, y->name, v))
            goto nomem;
        if ((st = clone_tensor(e, x->init, &y->init)) != TDM_OK)
            goto fail;
    }
    for (int i = 0; i < src->n_nodes; i++) {
        g->n_nodes = i + 1;
        if ((st = clone_node(e, &src->nodes[i], dm, g, &g->nodes[i])) != TDM_OK)
            goto fail;
    }
    g->inputs = clone_ints(src->inputs, src->n_inputs, &bad);
    g->outputs = clone_ints(src->outputs, src->n_outputs, &bad);
    g->order = clone_ints(src->order, src->n_nodes, &bad);
    if (bad)
        goto nomem;
    g->n_inputs = src->n_inputs;
    g->n_outputs = src->n_outputs;
    *out = g;
    return TDM_OK;
nomem:
    st = err_set(e, TDM_E_NOMEM, "out of memory");
fail:
    gr_graph_free(g);
    return st;
}

tdm_status gr_model_clone(tdm_err *e, const gr_model *src, gr_model **out)
{
    gr_model *m;
    tdm_status st = gr_model_new(e, &m);
    int bad = 0;
    *out = NULL;
    if (st)
        return st;
    /* symbols first, in order, so that the copy's ids match */
    for (size_t i = 0; i < src->n_syms; i++)
        if (!gr_intern(m, src->syms[i]))
            goto nomem;
    m->path = dup_or_null(src->path, &bad);
    m->dir = dup_or_null(src->dir, &bad);
    m->producer_name = dup_or_null(src->producer_name, &bad);
    m->producer_version = dup_or_null(src->producer_version, &bad);
    m->domain = dup_or_null(src->domain, &bad);
    m->doc = dup_or_null(src->doc, &bad);
    m->ir_version = src->ir_version;
    m->model_version = src->model_version;
    if (bad)
        goto nomem;
    if (src->n_opsets) {
        if (!(m->opsets = mem_calloc((size_t)src->n_opsets, sizeof *m->opsets)))
            goto nomem;
        for (int i = 0; i < src->n_opsets; i++, m->n_opsets++) {
            m->opsets[i].version = src->opsets[i].version;
            if (!(m->opsets[i].domain = dup_or_null(src->opsets[i].domain, &bad)) && bad)
                goto nomem;
        }
    }
    if (src->n_metadata) {
        if (!(m->metadata = mem_calloc((size_t)src->n_metadata, sizeof *m->metadata)))
            goto nomem;
        for (int i = 0; i < src->n_metadata; i++) {
            m->n_metadata = i + 1;
            m->metadata[i].key = dup_or_null(src->metadata[i].key, &bad);
            m->metadata[i].value = dup_or_null(src->metadata[i].value, &bad);
            if (bad)
                goto nomem;
        }
    }
    if (src->main && (st = clone_graph(e, src->main, m, NULL, &m->main)) != TDM_OK)
        goto fail;
    *out = m;
    return TDM_OK;
nomem:
    st = err_set(e, TDM_E_NOMEM, "out of memory");
fail:
    gr_model_free(m);
    return st;
}
