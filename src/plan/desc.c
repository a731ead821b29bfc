/* tdm_node_desc from gr_node, with storage in an arena. */
#include "plan/desc.h"
#include "core/mem.h"

#include <string.h>

struct plan_arena_chunk {
    plan_arena_chunk *next;
    size_t size, used;
    /* data follows, aligned to max_align_t */
};

#define ARENA_ALIGN sizeof(max_align_t)
#define ARENA_HEAD ((sizeof(plan_arena_chunk) + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN)
#define ARENA_CHUNK ((size_t)64 << 10)

void plan_arena_init(plan_arena *a) { a->head = NULL; }

void plan_arena_free(plan_arena *a)
{
    if (!a)
        return;
    while (a->head) {
        plan_arena_chunk *c = a->head;
        a->head = c->next;
        mem_free(c);
    }
}

void *plan_arena_alloc(plan_arena *a, size_t size)
{
    size_t need;
    if (size == 0)
        size = 1;
    if (mem_add(size, ARENA_ALIGN - 1, &need))
        return NULL;
    need = need / ARENA_ALIGN * ARENA_ALIGN;
    plan_arena_chunk *c = a->head;
    if (!c || c->size - c->used < need) {
        size_t csize = need > ARENA_CHUNK ? need : ARENA_CHUNK, total;
        if (mem_add(csize, ARENA_HEAD, &total))
            return NULL;
        c = mem_alloc(total);
        if (!c)
            return NULL;
        c->size = csize;
        c->used = 0;
        c->next = a->head;
        a->head = c;
    }
    unsigned char *p = (unsigned char *)c + ARENA_HEAD + c->used;
    c->used += need;
    memset(p, 0, need);
    return p;
}

void *plan_arena_array(plan_arena *a, size_t n, size_t size)
{
    size_t bytes;
    if (mem_mul(n, size, &bytes))
        return NULL;
    return plan_arena_alloc(a, bytes);
}

char *plan_arena_strdup(plan_arena *a, const char *s)
{
    size_t n = strlen(s);
    char *d = plan_arena_alloc(a, n + 1);
    if (d)
        memcpy(d, s, n + 1);
    return d;
}

/* A tensor desc for value v of g (v < 0: an omitted optional). */
static int value_desc(plan_arena *a, const gr_graph *g, int v, tdm_tensor_desc *t)
{
    memset(t, 0, sizeof *t);
    if (v < 0) {
        t->name = "";
        t->dtype = TDM_UNDEFINED;
        t->rank = -1;
        return 0;
    }
    const gr_value *x = &g->values[v];
    t->name = x->name;
    t->dtype = x->type.dtype;
    t->rank = x->type.rank;
    const tdm_tensor *c = x->init && !x->is_input && x->init->kind == TDM_KIND_TENSOR ? x->init : NULL;
    if (c) { /* a constant's own shape is exact, inferred or not */
        t->dtype = c->dtype;
        t->rank = c->rank;
        if (c->rank > 0) {
            int64_t *dims = plan_arena_array(a, (size_t)c->rank, sizeof *dims);
            if (!dims)
                return -1;
            for (int d = 0; d < c->rank; d++)
                dims[d] = c->dims[d];
            t->dims = dims;
        }
        t->data = c->data;
        return 0;
    }
    if (x->type.rank > 0) {
        int64_t *dims = plan_arena_array(a, (size_t)x->type.rank, sizeof *dims);
        if (!dims)
            return -1;
        for (int d = 0; d < x->type.rank; d++)
            dims[d] = x->type.dims[d].v >= 0 ? x->type.dims[d].v : -1;
        t->dims = dims;
    }
    return 0;
}

static int tensor_desc(plan_arena *a, const char *name, const tdm_tensor *src, tdm_tensor_desc *t)
{
    memset(t, 0, sizeof *t);
    t->name = name;
    t->dtype = src->dtype;
    t->rank = src->rank;
    if (src->rank > 0) {
        int64_t *dims = plan_arena_array(a, (size_t)src->rank, sizeof *dims);
        if (!dims)
            return -1;
        memcpy(dims, src->dims, (size_t)src->rank * sizeof *dims);
        t->dims = dims;
    }
    t->data = src->data;
    return 0;
}

tdm_status plan_desc_build(tdm_err *e, plan_arena *a, const gr_graph *g, const gr_node *n, tdm_node_desc *out)
{
    memset(out, 0, sizeof *out);
    out->name = n->name;
    out->op_type = n->op_type;
    out->domain = n->domain ? n->domain : "";
    out->opset = n->opset;
    out->n_inputs = n->n_inputs;
    out->n_outputs = n->n_outputs;
    out->n_attrs = n->n_attrs;
    tdm_tensor_desc *ins = plan_arena_array(a, (size_t)n->n_inputs + 1, sizeof *ins);
    tdm_tensor_desc *outs = plan_arena_array(a, (size_t)n->n_outputs + 1, sizeof *outs);
    tdm_attr_desc *attrs = plan_arena_array(a, (size_t)n->n_attrs + 1, sizeof *attrs);
    if (!ins || !outs || !attrs)
        goto nomem;
    for (int i = 0; i < n->n_inputs; i++)
        if (value_desc(a, g, n->inputs[i], &ins[i]))
            goto nomem;
    for (int i = 0; i < n->n_outputs; i++)
        if (value_desc(a, g, n->outputs[i], &outs[i]))
            goto nomem;
    for (int k = 0; k < n->n_attrs; k++) {
        const gr_attr *at = &n->attrs[k];
        tdm_attr_desc *d = &attrs[k];
        d->name = at->name;
        d->type = (tdm_attr_type)at->type;
        switch (at->type) {
        case GA_FLOAT:
            d->f = at->f;
            break;
        case GA_INT:
            d->i = at->i;
            break;
        case GA_STRING:
            d->s = at->s ? at->s : "";
            break;
        case GA_TENSOR:
        case GA_SPARSE_TENSOR:
            if (at->t) {
                tdm_tensor_desc *t = plan_arena_alloc(a, sizeof *t);
                if (!t || tensor_desc(a, at->name, at->t, t))
                    goto nomem;
                d->t = t;
            }
            break;
        case GA_FLOATS:
            d->n = at->n;
            d->floats = at->floats;
            break;
        case GA_INTS:
            d->n = at->n;
            d->ints = at->ints;
            break;
        case GA_STRINGS:
            d->n = at->n;
            d->strings = (const char *const *)at->strings;
            break;
        default:
            break; /* graphs, tensor lists, type protos: the type only */
        }
    }
    out->inputs = ins;
    out->outputs = outs;
    out->attrs = attrs;
    return TDM_OK;
nomem:
    return err_set(e, TDM_E_NOMEM, "out of memory describing node '%s'", n->name);
}
