/* tdm_node_desc from an IR node: what a device sees of a node (plain data,
 * no internal types). */
#include "devices/device_internal.h"
#include "core/mem.h"

#include <string.h>

void dev_node_desc_free(dev_node_desc *d)
{
    if (!d)
        return;
    mem_free(d->tensors);
    mem_free(d->dims);
    mem_free(d->attrs);
    mem_free(d->strings);
    memset(d, 0, sizeof *d);
}

static void fill_value(const gr_graph *g, int v, tdm_tensor_desc *t, int64_t *dims)
{
    if (v < 0 || v >= g->n_values) {
        t->name = "";
        t->dtype = TDM_UNDEFINED;
        t->rank = 0;
        t->dims = dims;
        t->data = NULL;
        return;
    }
    const gr_value *val = &g->values[v];
    t->name = val->name ? val->name : "";
    t->dtype = val->type.dtype;
    t->rank = val->type.rank;
    for (int k = 0; k < val->type.rank && k < TDM_MAX_RANK; k++)
        dims[k] = val->type.dims[k].v >= 0 ? val->type.dims[k].v : -1;
    t->dims = dims;
    t->data = NULL;
    if (val->init && val->init->kind == TDM_KIND_TENSOR) {
        /* the constant's exact type wins over the inferred one */
        t->dtype = val->init->dtype;
        t->rank = val->init->rank;
        for (int k = 0; k < val->init->rank; k++)
            dims[k] = val->init->dims[k];
        t->data = val->init->data;
    }
}

tdm_status dev_node_desc_init(tdm_err *e, const gr_graph *g, const gr_node *n, dev_node_desc *out)
{
    memset(out, 0, sizeof *out);
    size_t nt = (size_t)n->n_inputs + (size_t)n->n_outputs;
    size_t n_tattrs = 0;
    for (int a = 0; a < n->n_attrs; a++)
        n_tattrs += n->attrs[a].type == GA_TENSOR && n->attrs[a].t;
    size_t ndims;
    if (mem_mul(nt + 1, TDM_MAX_RANK, &ndims))
        return err_set(e, TDM_E_NOMEM, "node '%s' has too many inputs", n->name);
    out->tensors = mem_calloc(nt + n_tattrs + 1, sizeof *out->tensors);
    out->dims = mem_calloc(ndims, sizeof *out->dims);
    out->attrs = mem_calloc((size_t)n->n_attrs + 1, sizeof *out->attrs);
    if (!out->tensors || !out->dims || !out->attrs) {
        dev_node_desc_free(out);
        return err_set(e, TDM_E_NOMEM, "out of memory");
    }
    for (int i = 0; i < n->n_inputs; i++)
        fill_value(g, n->inputs[i], &out->tensors[i], out->dims + (size_t)i * TDM_MAX_RANK);
    for (int i = 0; i < n->n_outputs; i++) {
        size_t k = (size_t)n->n_inputs + (size_t)i;
        fill_value(g, n->outputs[i], &out->tensors[k], out->dims + k * TDM_MAX_RANK);
    }
    size_t tk = nt;
    for (int a = 0; a < n->n_attrs; a++) {
        const gr_attr *ga = &n->attrs[a];
        tdm_attr_desc *d = &out->attrs[a];
        d->name = ga->name ? ga->name : "";
        d->type = (tdm_attr_type)ga->type;
        d->i = ga->i;
        d->f = ga->f;
        d->s = ga->type == GA_STRING ? (ga->s ? ga->s : "") : NULL;
        switch (ga->type) {
        case GA_INTS:
            d->n = ga->n;
            d->ints = ga->ints;
            break;
        case GA_FLOATS:
            d->n = ga->n;
            d->floats = ga->floats;
            break;
        case GA_STRINGS:
            d->n = ga->n;
            d->strings = (const char *const *)ga->strings;
            break;
        case GA_TENSOR:
            if (ga->t) {
                tdm_tensor_desc *t = &out->tensors[tk++];
                t->name = d->name;
                t->dtype = ga->t->dtype;
                t->rank = ga->t->rank;
                t->dims = ga->t->dims;
                t->data = ga->t->data;
                d->t = t;
            }
            break;
        default:
            break; /* no payload */
        }
    }
    out->d.name = n->name ? n->name : "";
    out->d.op_type = n->op_type;
    out->d.domain = n->domain ? n->domain : "";
    out->d.opset = n->opset;
    out->d.n_inputs = n->n_inputs;
    out->d.inputs = out->tensors;
    out->d.n_outputs = n->n_outputs;
    out->d.outputs = out->tensors + n->n_inputs;
    out->d.n_attrs = n->n_attrs;
    out->d.attrs = out->attrs;
    return TDM_OK;
}
