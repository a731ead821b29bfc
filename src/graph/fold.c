/* gr_fold_constants: one pass in topological order that evaluates every
 * node whose inputs are all constant (and Shape/Size of values whose shape
 * is statically known), turns the results into constants and re-infers the
 * types of the nodes it cannot fold, so that a chain
 * Shape -> Gather -> Unsqueeze -> Concat -> Reshape folds in one pass and
 * the Reshape after it gets a static shape.
 *
 * A node is not folded when its op is random or runs subgraphs, when a
 * result is not a plain tensor or exceeds GR_FOLD_MAX_BYTES (see graph.h),
 * or when its kernel fails: that failure is left for the executor to
 * report when (and if) the node runs, with the inputs it then has. */
#include "graph/analysis.h"
#include "core/mem.h"
#include "ops/op.h"

#include <string.h>

static int is_const(const gr_graph *g, int v) { return v >= 0 && g->values[v].init && !g->values[v].is_input; }

/* Makes res[] (one per node output, NULL where the output is omitted) the
 * constant values of node ni's outputs. Takes ownership of res[] entries on
 * success; on a contradiction with a declared type nothing changes. */
static tdm_status commit(tdm_err *e, gr_graph *g, int ni, tdm_tensor **res)
{
    char label[256], got[256], had[256];
    gr_node *n = &g->nodes[ni];
    for (int i = 0; i < n->n_outputs; i++) {
        int v = n->outputs[i];
        if (v < 0 || !res[i])
            continue;
        gr_type t, merged = g->values[v].type;
        gr_type_from_tensor(&t, res[i]);
        if (gr_type_merge(&merged, &t))
            return err_set(e, TDM_E_MODEL, "node %s: output '%s' evaluates to %s but %s %s",
                           gr_node_label(n, label, sizeof label), g->values[v].name, gr_type_str(&t, got, sizeof got),
                           g->values[v].has_type ? "the model declares" : "was inferred as",
                           gr_type_str(&g->values[v].type, had, sizeof had));
    }
    for (int i = 0; i < n->n_outputs; i++) {
        int v = n->outputs[i];
        if (v < 0 || !res[i])
            continue;
        gr_value *x = &g->values[v];
        gr_type t;
        gr_type_from_tensor(&t, res[i]);
        t.optional = x->type.optional;
        tdm_tensor_destroy(x->init);
        x->init = res[i];
        x->type = t;
        x->producer = -1;
        res[i] = NULL;
    }
    return TDM_OK;
}

/* Shape or Size of a value whose shape inference fixed: a constant even
 * though the value itself is not. Sets *done when folded. */
static tdm_status fold_static_shape(tdm_err *e, gr_graph *g, int ni, int *done)
{
    gr_node *n = &g->nodes[ni];
    int is_shape = strcmp(n->op_type, "Shape") == 0, is_size = strcmp(n->op_type, "Size") == 0;
    int64_t dims[TDM_MAX_RANK], vals[TDM_MAX_RANK];
    if (*n->domain || (!is_shape && !is_size) || n->n_inputs < 1 || n->inputs[0] < 0 || n->n_outputs < 1 ||
        n->outputs[0] < 0)
        return TDM_OK;
    const gr_type *t = &g->values[n->inputs[0]].type;
    if (gr_type_static_dims(t, dims))
        return TDM_OK;
    int rank = t->rank, len = 0;
    tdm_tensor *res = NULL;
    tdm_status st;
    if (is_shape) {
        int64_t start = 0, end = rank;
        if (n->version >= 15) {
            const gr_attr *a;
            start = gr_attr_int(n, "start", 0);
            if ((a = gr_attr_find(n, "end")) && a->type == GA_INT)
                end = a->i;
        }
        start = start < 0 ? start + rank : start;
        end = end < 0 ? end + rank : end;
        start = start < 0 ? 0 : start > rank ? rank : start;
        end = end < 0 ? 0 : end > rank ? rank : end;
        for (int64_t k = start; k < end; k++)
            vals[len++] = dims[k];
        int64_t shp = len;
        st = tensor_new(e, TDM_INT64, 1, &shp, &res);
        if (st)
            return st;
        if (len)
            memcpy(res->data, vals, sizeof(int64_t) * (size_t)len);
    } else {
        int64_t count = 1;
        for (int k = 0; k < rank; k++)
            if (mem_mul_i64(count, dims[k], &count))
                return TDM_OK; /* overflows int64: leave it to the kernel */
        if ((st = tensor_new(e, TDM_INT64, 0, NULL, &res)) != TDM_OK)
            return st;
        *(int64_t *)res->data = count;
    }
    tdm_tensor **outs = mem_calloc((size_t)n->n_outputs + 1, sizeof *outs);
    if (!outs) {
        tdm_tensor_destroy(res);
        return err_set(e, TDM_E_NOMEM, "out of memory");
    }
    outs[0] = res;
    st = commit(e, g, ni, outs);
    tdm_tensor_destroy(outs[0]);
    mem_free(outs);
    *done = st == TDM_OK;
    return st;
}

/* Bytes a value of static type t takes, or SIZE_MAX when unknown/too big. */
static size_t static_bytes(const gr_type *t)
{
    int64_t dims[TDM_MAX_RANK];
    size_t count, bytes;
    if (t->dtype == TDM_UNDEFINED || gr_type_static_dims(t, dims) || shape_count(t->rank, dims, &count) ||
        mem_mul(count, tdm_dtype_size(t->dtype), &bytes))
        return SIZE_MAX;
    return bytes;
}

static tdm_status fold_node(tdm_err *e, gr_graph *g, int ni, int *done)
{
    gr_node *n = &g->nodes[ni];
    tdm_status st = TDM_OK;
    int wanted = 0;
    *done = 0;
    if (n->op < 0)
        return TDM_OK;
    if ((st = fold_static_shape(e, g, ni, done)) != TDM_OK || *done)
        return st;
    const op_def *d = &op_table[n->op];
    if (!d->run || (d->flags & (OPF_RANDOM | OPF_SUBGRAPH)))
        return TDM_OK;
    for (int i = 0; i < n->n_inputs; i++)
        if (n->inputs[i] >= 0 && !is_const(g, n->inputs[i]))
            return TDM_OK;
    /* A Constant's value is in memory already (its attribute, freed with the
     * node): folding it costs nothing, whatever its size. */
    size_t limit = !*n->domain && strcmp(n->op_type, "Constant") == 0 ? SIZE_MAX : GR_FOLD_MAX_BYTES;
    for (int i = 0; i < n->n_outputs; i++) {
        int v = n->outputs[i];
        if (v < 0)
            continue;
        wanted++;
        const gr_type *t = &g->values[v].type;
        if (gr_type_static_dims(t, NULL) == 0 && t->dtype != TDM_UNDEFINED && static_bytes(t) > limit)
            return TDM_OK; /* known to be too big: do not even compute it */
    }
    if (!wanted)
        return TDM_OK;

    const tdm_tensor **in = mem_calloc((size_t)n->n_inputs + 1, sizeof *in);
    tdm_tensor **out = mem_calloc((size_t)n->n_outputs + 1, sizeof *out);
    if (!in || !out) {
        st = err_set(e, TDM_E_NOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < n->n_inputs; i++)
        in[i] = n->inputs[i] >= 0 ? g->values[n->inputs[i]].init : NULL;
    if ((st = op_out_shells(e, n->n_outputs, out)) != TDM_OK)
        goto done;
    tdm_err kerr;
    uint64_t rng = 0x9e3779b97f4a7c15ull; /* unused: random ops are not folded */
    err_clear(&kerr);
    op_ctx ctx; /* no caller: folded ops run no subgraph and see no input as a packed constant */
    op_ctx_init(&ctx, n, in, out, &kerr, NULL, 1, &rng);
    if (op_align_inputs(&ctx, 1) != TDM_OK || d->run(&ctx) != TDM_OK)
        goto done; /* the executor reports it if the node ever runs */
    for (int i = 0; i < n->n_outputs; i++) {
        if (n->outputs[i] < 0) {
            tdm_tensor_destroy(out[i]);
            out[i] = NULL;
            continue;
        }
        const tdm_tensor *r = out[i];
        if (r->kind != TDM_KIND_TENSOR || r->dtype == TDM_STRING || !dtype_valid(r->dtype) ||
            r->nbytes > limit)
            goto done;
        if (r->borrowed) { /* a view of an input: own the data */
            tdm_tensor *c;
            if ((st = tensor_clone(e, r, &c)) != TDM_OK)
                goto done;
            tdm_tensor_destroy(out[i]);
            out[i] = c;
        }
    }
    /* the inputs' pages in a file mapping were read once: the folded
     * value is what stays (issue 20 item 5) */
    for (int i = 0; i < n->n_inputs; i++)
        tensor_drop_pages(in[i]);
    if ((st = commit(e, g, ni, out)) == TDM_OK)
        *done = 1;
done:
    for (int i = 0; out && i < n->n_outputs; i++)
        tdm_tensor_destroy(out[i]);
    mem_free((void *)in);
    mem_free(out);
    return st;
}

/* Removes the nodes marked in removed[], keeping the order of the rest. */
static tdm_status compact(tdm_err *e, gr_graph *g, const unsigned char *removed)
{
    int *newidx = mem_calloc((size_t)g->n_nodes + 1, sizeof *newidx);
    if (!newidx)
        return err_set(e, TDM_E_NOMEM, "out of memory");
    int k = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        if (removed[i]) {
            gr_node_clear(&g->nodes[i]);
            newidx[i] = -1;
            continue;
        }
        newidx[i] = k;
        if (k != i)
            g->nodes[k] = g->nodes[i];
        k++;
    }
    int j = 0;
    for (int pos = 0; pos < g->n_nodes; pos++)
        if (newidx[g->order[pos]] >= 0)
            g->order[j++] = newidx[g->order[pos]];
    g->n_nodes = k;
    mem_free(newidx);
    return gr_count_uses(e, g);
}

static tdm_status fold_graph(tdm_err *e, gr_graph *g)
{
    tdm_status st = TDM_OK;
    int folded = 0;
    if (g->n_nodes && !g->order)
        return err_set(e, TDM_E_INTERNAL, "graph '%s' has no topological order (gr_validate must run first)",
                       g->name ? g->name : "");
    unsigned char *removed = mem_calloc((size_t)g->n_nodes + 1, 1);
    if (!removed)
        return err_set(e, TDM_E_NOMEM, "out of memory");
    gr_infer_seed(g);
    for (int pos = 0; pos < g->n_nodes; pos++) {
        int ni = g->order[pos], done;
        gr_node *n = &g->nodes[ni];
        if (gr_node_has_subgraphs(n) && (st = gr_each_subgraph(e, n, fold_graph)) != TDM_OK)
            goto out;
        if ((st = fold_node(e, g, ni, &done)) != TDM_OK)
            goto out;
        if (done) {
            removed[ni] = 1;
            folded++;
            continue;
        }
        /* Not folded: its inputs may have just become constant or static. */
        if ((st = gr_infer_node(e, g, ni)) != TDM_OK)
            goto out;
    }
    if (folded)
        st = compact(e, g, removed);
out:
    mem_free(removed);
    return st;
}

tdm_status gr_fold_constants(tdm_err *e, gr_graph *g)
{
    if (!g)
        return err_set(e, TDM_E_MODEL, "the model has no graph");
    return fold_graph(e, g);
}
