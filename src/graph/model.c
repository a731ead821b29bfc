/* The public model API (include/tandem/tandem.h): building a tdm_model from
 * a loaded IR, specialising it to fixed input shapes, and the queries on
 * it. Loading from a file or a buffer is in onnx/model_load.c, above the
 * loader. */
#include "graph/model.h"
#include "core/mem.h"
#include "graph/qdq.h"
#include "ops/op.h"

#include <stdlib.h>
#include <string.h>

static const char *base_name(const char *path)
{
    const char *b = path ? strrchr(path, '/') : NULL;
    return b ? b + 1 : path ? path : "";
}

void model_err_prefix(tdm_err *e, const char *name)
{
    const char *base = base_name(name);
    if (!e || !*base || strstr(e->msg, base))
        return;
    err_prefix(e, "%s: ", base);
}

void tdm_model_destroy(tdm_model *m)
{
    if (!m)
        return;
    gr_model_free(m->gm);
    mem_free(m->path);
    mem_free(m->ops);
    mem_free(m->inputs);
    mem_free(m->outputs);
    mem_free(m->flops);
    mem_free(m);
}

/* ---- info ---- */

static void add_param(const tdm_tensor *t, size_t *count, size_t *bytes)
{
    if (mem_add(*count, tdm_tensor_count(t), count))
        *count = SIZE_MAX;
    if (mem_add(*bytes, tdm_tensor_nbytes(t), bytes))
        *bytes = SIZE_MAX;
}

/* Parameters are the initializers and the tensors of Constant nodes: some
 * exporters (PaddlePaddle's) store every weight as a Constant. */
static void count_params(const gr_graph *g, size_t *count, size_t *bytes)
{
    for (int v = 0; v < g->n_values; v++)
        if (g->values[v].is_initializer && g->values[v].init)
            add_param(g->values[v].init, count, bytes);
    for (int i = 0; i < g->n_nodes; i++) {
        const gr_node *n = &g->nodes[i];
        if (strcmp(n->op_type, "Constant") == 0 && !*n->domain) {
            const gr_attr *val = gr_attr_find(n, "value");
            if (val && val->type == GA_TENSOR && val->t)
                add_param(val->t, count, bytes);
        }
        for (int a = 0; a < n->n_attrs; a++) {
            const gr_attr *at = &n->attrs[a];
            if (at->type == GA_GRAPH && at->g)
                count_params(at->g, count, bytes);
            for (size_t k = 0; at->type == GA_GRAPHS && k < at->n; k++)
                if (at->graphs[k])
                    count_params(at->graphs[k], count, bytes);
        }
    }
}

static int cmp_ops(const void *pa, const void *pb)
{
    const model_op_count *a = pa, *b = pb;
    if (a->count != b->count)
        return a->count > b->count ? -1 : 1;
    int c = strcmp(a->op_type, b->op_type);
    return c ? c : strcmp(a->domain, b->domain);
}

static tdm_status op_histogram(tdm_err *e, tdm_model *m)
{
    const gr_graph *g = m->gm->main;
    size_t *counts = mem_calloc(OP_COUNT + 1, sizeof *counts);
    if (!counts)
        return err_set(e, TDM_E_NOMEM, "out of memory");
    size_t n = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        int op = g->nodes[i].op;
        if (op < 0 || op >= OP_COUNT)
            continue; /* cannot happen after gr_finalize */
        if (counts[op]++ == 0)
            n++;
    }
    m->ops = mem_calloc(n + 1, sizeof *m->ops);
    if (!m->ops) {
        mem_free(counts);
        return err_set(e, TDM_E_NOMEM, "out of memory");
    }
    for (int op = 0; op < OP_COUNT; op++)
        if (counts[op])
            m->ops[m->n_ops++] = (model_op_count){op_table[op].domain, op_table[op].name, counts[op]};
    qsort(m->ops, m->n_ops, sizeof *m->ops, cmp_ops);
    mem_free(counts);
    return TDM_OK;
}

/* The compute nodes FLOPs are counted for, recorded before folding by
 * value id (value ids survive folding) and evaluated with the final types. */
enum { FL_CONV, FL_CONVT, FL_GEMM, FL_MATMUL };
struct flop_node {
    int kind, trans_a;
    int a, b, y; /* value ids: X/A, W/B, Y; -1 when absent */
};
typedef struct flop_node flop_node;

static int flop_kind(const gr_node *n)
{
    if (*n->domain)
        return -1;
    if (strcmp(n->op_type, "Conv") == 0)
        return FL_CONV;
    if (strcmp(n->op_type, "ConvTranspose") == 0)
        return FL_CONVT;
    if (strcmp(n->op_type, "Gemm") == 0)
        return FL_GEMM;
    if (strcmp(n->op_type, "MatMul") == 0)
        return FL_MATMUL;
    return -1;
}

/* Elements of a static shape as a double, or -1 when not static. */
static double static_count(const gr_graph *g, int v, int *rank, int64_t *dims)
{
    if (v < 0 || gr_type_static_dims(&g->values[v].type, dims))
        return -1;
    *rank = g->values[v].type.rank;
    double c = 1;
    for (int i = 0; i < *rank; i++)
        c *= (double)dims[i];
    return c;
}

/* Multiply-accumulates of one node, or -1 when its shapes are not known. */
static double node_macs(const gr_graph *g, const flop_node *f)
{
    int ra, rb, ry;
    int64_t da[TDM_MAX_RANK], db[TDM_MAX_RANK], dy[TDM_MAX_RANK];
    double ca = static_count(g, f->a, &ra, da), cb = static_count(g, f->b, &rb, db),
           cy = static_count(g, f->y, &ry, dy);
    switch (f->kind) {
    case FL_CONV: /* each output element: C/group * kernel MACs = W's elements per output channel */
        if (cy < 0 || cb < 0 || rb < 1 || db[0] == 0)
            return -1;
        return cy * (cb / (double)db[0]);
    case FL_CONVT: /* each input element scatters into M/group * kernel outputs */
        if (ca < 0 || cb < 0 || rb < 1 || db[0] == 0)
            return -1;
        return ca * (cb / (double)db[0]);
    case FL_GEMM:
        if (cy < 0 || ca < 0 || ra != 2)
            return -1;
        return cy * (double)(f->trans_a ? da[0] : da[1]);
    case FL_MATMUL:
        if (cy < 0 || ca < 0 || ra < 1)
            return -1;
        return cy * (double)da[ra - 1];
    default:
        return -1;
    }
}

static tdm_status snapshot_flops(tdm_err *e, const gr_graph *g, flop_node **out, size_t *n)
{
    size_t k = 0;
    *out = NULL;
    *n = 0;
    for (int i = 0; i < g->n_nodes; i++)
        k += flop_kind(&g->nodes[i]) >= 0;
    flop_node *f = mem_calloc(k + 1, sizeof *f);
    if (!f)
        return err_set(e, TDM_E_NOMEM, "out of memory");
    k = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const gr_node *nd = &g->nodes[i];
        int kind = flop_kind(nd);
        if (kind < 0)
            continue;
        f[k].kind = kind;
        f[k].trans_a = kind == FL_GEMM && gr_attr_int(nd, "transA", 0) != 0;
        f[k].a = nd->n_inputs > 0 ? nd->inputs[0] : -1;
        f[k].b = nd->n_inputs > 1 ? nd->inputs[1] : -1;
        f[k].y = nd->n_outputs > 0 ? nd->outputs[0] : -1;
        k++;
    }
    *out = f;
    *n = k;
    return TDM_OK;
}

static void fill_io(const gr_graph *g, int v, model_io *io)
{
    const gr_value *x = &g->values[v];
    io->value = v;
    io->info.name = x->name;
    io->info.kind = x->type.kind;
    io->info.optional = x->type.optional;
    io->info.dtype = x->type.dtype;
    io->info.rank = x->type.rank;
    for (int d = 0; d < x->type.rank && d < TDM_MAX_RANK; d++) {
        io->dims[d].value = x->type.dims[d].v;
        io->dims[d].symbol = x->type.dims[d].v >= 0 ? NULL : x->type.dims[d].sym;
    }
    io->info.dims = io->dims;
    io->map_key = x->type.map_key;
}

/* FLOPs of the file's compute nodes, with the shapes known at the end. */
static void count_flops(tdm_model *m)
{
    m->info.flops = 0;
    m->info.flops_unknown = 0;
    for (size_t k = 0; k < m->n_flops; k++) {
        double macs = node_macs(m->gm->main, &m->flops[k]);
        if (macs < 0)
            m->info.flops_unknown++;
        else
            m->info.flops += 2.0 * macs;
    }
}

static tdm_status describe_io(tdm_err *e, tdm_model *m)
{
    const gr_graph *g = m->gm->main;
    m->inputs = mem_calloc((size_t)g->n_inputs + 1, sizeof *m->inputs);
    m->outputs = mem_calloc((size_t)g->n_outputs + 1, sizeof *m->outputs);
    if (!m->inputs || !m->outputs)
        return err_set(e, TDM_E_NOMEM, "out of memory");
    for (int k = 0; k < g->n_inputs; k++) {
        int v = g->inputs[k];
        if (g->values[v].is_initializer)
            continue; /* an initializer listed as an input: a parameter, not an input */
        fill_io(g, v, &m->inputs[m->n_inputs++]);
    }
    for (int k = 0; k < g->n_outputs; k++)
        fill_io(g, g->outputs[k], &m->outputs[m->n_outputs++]);
    return TDM_OK;
}

tdm_status model_build(tdm_err *e, gr_model *gm, const char *name, tdm_model **out)
{
    tdm_status st;
    *out = NULL;
    tdm_model *m = mem_calloc(1, sizeof *m);
    if (!m) {
        gr_model_free(gm);
        st = err_set(e, TDM_E_NOMEM, "out of memory");
        goto fail;
    }
    m->gm = gm;
    if (!(m->path = mem_strdup(name ? name : (gm && gm->path ? gm->path : "")))) {
        st = err_set(e, TDM_E_NOMEM, "out of memory");
        goto fail;
    }
    if ((st = gr_finalize(e, gm)) != TDM_OK || (st = gr_validate(e, gm->main)) != TDM_OK ||
        (st = gr_infer(e, gm->main)) != TDM_OK)
        goto fail;

    /* What describes the file: before folding. */
    const gr_graph *g = gm->main;
    m->info.path = m->path;
    m->info.ir_version = gm->ir_version;
    m->info.producer_name = gm->producer_name;
    m->info.producer_version = gm->producer_version;
    m->info.domain = gm->domain;
    m->info.model_version = gm->model_version;
    m->info.graph_name = g->name;
    m->info.node_count = (size_t)g->n_nodes;
    count_params(g, &m->info.param_count, &m->info.param_bytes);
    if ((st = op_histogram(e, m)) != TDM_OK || (st = snapshot_flops(e, g, &m->flops, &m->n_flops)) != TDM_OK)
        goto fail;

    /* QDQ groups before folding turns their weights into float constants;
     * folding re-infers every node it does not fold: the types are final. */
    if ((st = gr_qdq_mark(e, gm->main)) != TDM_OK || (st = gr_fold_constants(e, gm->main)) != TDM_OK)
        goto fail;

    count_flops(m);
    if ((st = describe_io(e, m)) != TDM_OK)
        goto fail;
    *out = m;
    return TDM_OK;
fail:
    tdm_model_destroy(m);
    model_err_prefix(e, name);
    return st;
}

/* ---- specialisation ---- */

/* Forgets what inference found in g and its subgraphs: a value that is
 * neither declared by the model nor a constant goes back to the unknown
 * type it had when loaded (gr_value_get), so that inference starts again
 * from the declarations and the constants, as after a load. */
static void forget_inferred(gr_graph *g)
{
    for (int v = 0; v < g->n_values; v++) {
        gr_value *x = &g->values[v];
        if (x->has_type || x->init)
            continue;
        memset(&x->type, 0, sizeof x->type);
        x->type.rank = -1;
    }
    for (int i = 0; i < g->n_nodes; i++)
        for (int a = 0; a < g->nodes[i].n_attrs; a++) {
            const gr_attr *at = &g->nodes[i].attrs[a];
            if (at->type == GA_GRAPH && at->g)
                forget_inferred(at->g);
            for (size_t k = 0; at->type == GA_GRAPHS && k < at->n; k++)
                if (at->graphs[k])
                    forget_inferred(at->graphs[k]);
        }
}

/* Fixes the dimensions shapes give to g's inputs. */
static void fix_inputs(gr_graph *g, const model_shape *shapes, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const model_shape *o = &shapes[i];
        int v = gr_value_find(g, o->input);
        if (v < 0 || !g->values[v].is_input)
            continue;
        gr_type *t = &g->values[v].type;
        if (t->rank >= 0 && t->rank != o->rank)
            continue;
        if (t->rank < 0) {
            t->rank = o->rank;
            for (int d = 0; d < o->rank; d++) {
                t->dims[d].v = -1;
                t->dims[d].sym = NULL;
            }
        }
        for (int d = 0; d < o->rank; d++)
            if (o->dims[d] >= 0) {
                t->dims[d].v = o->dims[d];
                t->dims[d].sym = NULL;
            }
    }
}

tdm_status model_specialize(tdm_err *e, const tdm_model *m, const model_shape *shapes, size_t n, tdm_model **out)
{
    tdm_status st;
    gr_model *gm = NULL;
    *out = NULL;
    if (!n)
        return TDM_OK;
    if ((st = gr_model_clone(e, m->gm, &gm)) != TDM_OK)
        return st;
    tdm_model *s = mem_calloc(1, sizeof *s);
    if (!s) {
        gr_model_free(gm);
        return err_set(e, TDM_E_NOMEM, "out of memory");
    }
    s->gm = gm;
    s->info = m->info; /* what describes the file */
    s->path = mem_strdup(m->path);
    s->ops = mem_calloc(m->n_ops + 1, sizeof *s->ops);
    s->flops = mem_calloc(m->n_flops + 1, sizeof *s->flops);
    if (!s->path || !s->ops || !s->flops) {
        st = err_set(e, TDM_E_NOMEM, "out of memory");
        goto fail;
    }
    if (m->n_ops)
        memcpy(s->ops, m->ops, m->n_ops * sizeof *s->ops);
    s->n_ops = m->n_ops;
    if (m->n_flops)
        memcpy(s->flops, m->flops, m->n_flops * sizeof *s->flops);
    s->n_flops = m->n_flops;
    s->info.path = s->path;
    s->info.producer_name = gm->producer_name;
    s->info.producer_version = gm->producer_version;
    s->info.domain = gm->domain;
    s->info.graph_name = gm->main ? gm->main->name : NULL;
    forget_inferred(gm->main);
    fix_inputs(gm->main, shapes, n);
    /* Folding re-infers every node it does not fold: the types are final. */
    if ((st = gr_infer(e, gm->main)) != TDM_OK || (st = gr_fold_constants(e, gm->main)) != TDM_OK)
        goto fail;
    count_flops(s);
    if ((st = describe_io(e, s)) != TDM_OK)
        goto fail;
    *out = s;
    return TDM_OK;
fail:
    tdm_model_destroy(s);
    model_err_prefix(e, m->path);
    return st;
}

/* ---- queries ---- */

tdm_status tdm_model_get_info(const tdm_model *m, tdm_model_info *out)
{
    if (!m || !out)
        return TDM_E_USAGE;
    *out = m->info;
    return TDM_OK;
}

size_t tdm_model_opset_count(const tdm_model *m) { return m ? (size_t)m->gm->n_opsets : 0; }

tdm_status tdm_model_opset(const tdm_model *m, size_t i, const char **domain, int64_t *version)
{
    if (!m || i >= (size_t)m->gm->n_opsets)
        return TDM_E_USAGE;
    if (domain)
        *domain = m->gm->opsets[i].domain;
    if (version)
        *version = m->gm->opsets[i].version;
    return TDM_OK;
}

size_t tdm_model_metadata_count(const tdm_model *m) { return m ? (size_t)m->gm->n_metadata : 0; }

tdm_status tdm_model_metadata(const tdm_model *m, size_t i, const char **key, const char **value)
{
    if (!m || i >= (size_t)m->gm->n_metadata)
        return TDM_E_USAGE;
    if (key)
        *key = m->gm->metadata[i].key;
    if (value)
        *value = m->gm->metadata[i].value;
    return TDM_OK;
}

size_t tdm_model_op_type_count(const tdm_model *m) { return m ? m->n_ops : 0; }

tdm_status tdm_model_op_type(const tdm_model *m, size_t i, const char **domain, const char **op_type,
                             size_t *count)
{
    if (!m || i >= m->n_ops)
        return TDM_E_USAGE;
    if (domain)
        *domain = m->ops[i].domain;
    if (op_type)
        *op_type = m->ops[i].op_type;
    if (count)
        *count = m->ops[i].count;
    return TDM_OK;
}

size_t tdm_model_input_count(const tdm_model *m) { return m ? m->n_inputs : 0; }

tdm_status tdm_model_input(const tdm_model *m, size_t i, tdm_value_info *out)
{
    if (!m || !out || i >= m->n_inputs)
        return TDM_E_USAGE;
    *out = m->inputs[i].info;
    return TDM_OK;
}

size_t tdm_model_output_count(const tdm_model *m) { return m ? m->n_outputs : 0; }

tdm_status tdm_model_output(const tdm_model *m, size_t i, tdm_value_info *out)
{
    if (!m || !out || i >= m->n_outputs)
        return TDM_E_USAGE;
    *out = m->outputs[i].info;
    return TDM_OK;
}

tdm_dtype tdm_model_output_map_key(const tdm_model *m, size_t i)
{
    return m && i < m->n_outputs ? m->outputs[i].map_key : TDM_UNDEFINED;
}
