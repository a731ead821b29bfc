#include "run/exec.h"
#include "core/arena.h"
#include "core/mem.h"
#include "ops/nn.h"
#include "ops/op.h"
#include "graph/fuse.h"
#include "run/observe.h"

#include <stdatomic.h>
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

/* ---- the callbacks kernels reach the executor through (op_calls) ---- */

static tdm_status scope_run_subgraph(op_ctx *ctx, const gr_graph *g, int n_in, const tdm_tensor *const *in,
                                     tdm_tensor **out)
{
    exec_scope *s = (exec_scope *)(void *)ctx->caller;
    if (n_in != g->n_inputs)
        return err_set(ctx->err, TDM_E_MODEL, "subgraph '%s' takes %d inputs, the node passes %d",
                       g->name ? g->name : "", g->n_inputs, n_in);
    return exec_graph(ctx->err, g, s, in, out, ctx->threads, ctx->rng);
}

static int scope_input_const(const op_ctx *ctx, int i)
{
    const exec_scope *s = (const exec_scope *)(const void *)ctx->caller;
    const gr_node *node = ctx->node;
    if (!s->g || !node || i >= node->n_inputs)
        return 0;
    int v = node->inputs[i];
    return v >= 0 && v < s->g->n_values && s->g->values[v].init && s->g->values[v].init == ctx->in[i];
}

static void scope_subgraph_io(const gr_graph *g, int *n_in, int *n_out)
{
    *n_in = g->n_inputs;
    *n_out = g->n_outputs;
}

static tdm_dtype scope_subgraph_out_dtype(const gr_graph *g, int k)
{
    return k >= 0 && k < g->n_outputs ? g->values[g->outputs[k]].type.dtype : TDM_UNDEFINED;
}

static const op_calls scope_calls = {scope_run_subgraph, scope_input_const, scope_subgraph_io,
                                     scope_subgraph_out_dtype};

void exec_scope_init(exec_scope *s, const gr_graph *g, tdm_tensor **vals, unsigned char *owned,
                     exec_scope *parent, tdm_err *e, int threads, uint64_t *rng)
{
    memset(s, 0, sizeof *s);
    s->caller.calls = &scope_calls;
    s->g = g;
    s->vals = vals;
    s->owned = owned;
    s->parent = parent;
    s->err = e;
    s->threads = threads;
    s->rng = rng;
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
            if (out[k]->kind == TDM_KIND_TENSOR && !out[k]->borrowed)
                arena_gone(out[k]->nbytes); /* leaves the run's arena for good */
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

tdm_status exec_cache_init(tdm_err *e, const gr_graph *g, exec_cache *c)
{
    memset(c, 0, sizeof *c);
    atomic_init(&c->alias_moves, 0);
    atomic_init(&c->alias_views, 0);
    atomic_init(&c->concat_in_place, 0);
    c->fusion = TDM_FUSION_ON;
    tdm_status st = fuse_plan_build(e, g, &c->fuse);
    if (st)
        return st;
    if (!(c->arena = arena_new())) {
        exec_cache_free(c);
        return err_set(e, TDM_E_NOMEM, "out of memory");
    }
    return TDM_OK;
}

void exec_cache_free(exec_cache *c)
{
    fuse_plan_free(c->fuse);
    arena_free(c->arena);
    memset(c, 0, sizeof *c);
}

static tdm_status exec_run(tdm_err *e, const gr_graph *g, exec_scope *parent, const tdm_tensor *const *in,
                           tdm_tensor **out, int threads, uint64_t *rng, const obs_hook *obs, const exec_cache *cache);

tdm_status exec_graph_obs(tdm_err *e, const gr_graph *g, exec_scope *parent, const tdm_tensor *const *in,
                          tdm_tensor **out, int threads, uint64_t *rng, const obs_hook *obs)
{
    return exec_run(e, g, parent, in, out, threads, rng, obs, NULL);
}

tdm_status exec_graph_cached(tdm_err *e, const gr_graph *g, const tdm_tensor *const *in, tdm_tensor **out,
                             int threads, uint64_t *rng, const obs_hook *obs, const exec_cache *c)
{
    if (!c || !c->arena)
        return exec_run(e, g, NULL, in, out, threads, rng, obs, c);
    arena *prev = arena_enter(c->arena);
    tdm_status st = exec_run(e, g, NULL, in, out, threads, rng, obs, c);
    arena_leave(prev);
    return st;
}

/* The head's output y can take its chain in place: an owned float32
 * buffer (or its slab of a Concat's output) that is none of the node's
 * inputs (n_in 0: a Concat done in place, whose inputs are its slabs and
 * die with it). */
static int inplace_ok(const tdm_tensor *y, const tdm_tensor *const *nin, int n_in, const void *slab)
{
    if (!y || y->kind != TDM_KIND_TENSOR || y->dtype != TDM_FLOAT || (y->borrowed && y->data != slab) || !y->data)
        return 0;
    for (int i = 0; i < n_in; i++)
        if (nin[i] && nin[i]->data == y->data)
            return 0;
    return 1;
}

/* Ops whose float32 kernels may write their output over an input of the
 * output's size (each element read before its own is written, no
 * restrict): the executor offers them the block of an input that dies at
 * the node (arena_donate). */
static int inplace_op(int op)
{
    switch (op) {
    case OP_Relu: case OP_LeakyRelu: case OP_Clip: case OP_Tanh: case OP_Erf: case OP_HardSigmoid:
    case OP_HardSwish: case OP_Neg: case OP_Abs: case OP_Exp: case OP_Sqrt:
    case OP_Add: case OP_Sub: case OP_Mul: case OP_Div:
    case OP_BatchNormalization: /* each element read before it is written */
        return 1;
    case OP_Sigmoid: /* the portable loop takes restrict pointers; the AVX2 one allows x == y */
        return gemm_avx2_usable();
    default:
        return 0;
    }
}

/* Reshape, Flatten, Squeeze and Unsqueeze: the output holds the input's
 * elements in the same order. The executor gives it the input's block
 * (a move, when the input dies at the node) or a borrowed view of it (the
 * input's last use is then extended to the view's, see exec_run) instead
 * of running the kernel, which copies. */
static int alias_op(int op)
{
    return op == OP_Reshape || op == OP_Flatten || op == OP_Squeeze || op == OP_Unsqueeze;
}

/* The integer values of an optional input i (*n = -1: absent); -1 when it
 * is not a small integer tensor. */
static int alias_ints(const gr_node *node, const tdm_tensor *const *nin, int i, int64_t *v, int64_t *n)
{
    const tdm_tensor *t = i < node->n_inputs ? nin[i] : NULL;
    *n = -1;
    if (!t || t->kind == TDM_KIND_NONE)
        return 0;
    if (t->kind != TDM_KIND_TENSOR || !dtype_is_int(t->dtype) || t->count > TDM_MAX_RANK || (t->count && !t->data))
        return -1;
    for (size_t k = 0; k < t->count; k++)
        v[k] = tensor_get_i64(t, k);
    *n = (int64_t)t->count;
    return 0;
}

/* The output shape of alias node on x; -1 for anything unusual (the
 * kernel then runs and reports it). */
static int alias_shape(const gr_node *node, const tdm_tensor *const *nin, int *rank, int64_t *dims)
{
    const tdm_tensor *x = nin[0];
    int64_t v[TDM_MAX_RANK];
    int64_t n = -1;
    if (node->op == OP_Reshape) {
        if (node->version < 5) {
            const int64_t *a;
            int k = gr_attr_ints(node, "shape", &a);
            if (k < 0 || k > TDM_MAX_RANK)
                return -1;
            for (int i = 0; i < k; i++)
                v[i] = a[i];
            n = k;
        } else if (alias_ints(node, nin, 1, v, &n) || n < 0) {
            return -1;
        }
        int allowzero = node->version >= 14 ? (int)gr_attr_int(node, "allowzero", 0) : 0;
        int neg = -1;
        size_t known = 1;
        for (int i = 0; i < (int)n; i++) {
            int64_t d = v[i];
            if (d == 0 && !allowzero) {
                if (i >= x->rank)
                    return -1;
                d = x->dims[i];
            }
            if (d == -1 && neg < 0) {
                neg = i;
                continue;
            }
            if (d < 0 || mem_mul(known, (size_t)d, &known))
                return -1;
            dims[i] = d;
        }
        if (neg >= 0) {
            if (known == 0 || x->count % known)
                return -1;
            dims[neg] = (int64_t)(x->count / known);
            known = x->count;
        }
        if (known != x->count)
            return -1;
        *rank = (int)n;
        return 0;
    }
    if (node->op == OP_Flatten) {
        int64_t axis = gr_attr_int(node, "axis", 1);
        if (axis < 0)
            axis += x->rank;
        if (axis < 0 || axis > x->rank)
            return -1;
        dims[0] = dims[1] = 1;
        for (int d = 0; d < x->rank; d++)
            dims[d < axis ? 0 : 1] *= x->dims[d];
        *rank = 2;
        return 0;
    }
    /* Squeeze, Unsqueeze: axes from the attribute before opset 13 */
    if (node->version < 13) {
        const int64_t *a;
        int k = gr_attr_ints(node, "axes", &a);
        if (k > TDM_MAX_RANK)
            return -1;
        for (int i = 0; i < k; i++)
            v[i] = a[i];
        n = k;
    } else if (alias_ints(node, nin, 1, v, &n)) {
        return -1;
    }
    int mark[TDM_MAX_RANK] = {0};
    int r = node->op == OP_Squeeze ? x->rank : x->rank + (int)n;
    if (node->op == OP_Unsqueeze && (n < 0 || r > TDM_MAX_RANK))
        return -1;
    for (int64_t k = 0; k < n; k++) {
        int64_t a = v[k] < 0 ? v[k] + r : v[k];
        if (a < 0 || a >= r || (node->op == OP_Squeeze ? x->dims[a] != 1 : mark[a]))
            return -1;
        mark[a] = 1;
    }
    *rank = 0;
    if (node->op == OP_Squeeze) {
        for (int d = 0; d < x->rank; d++)
            if (!(n < 0 ? x->dims[d] == 1 : mark[d]))
                dims[(*rank)++] = x->dims[d];
    } else {
        for (int d = 0, j = 0; d < r; d++)
            dims[(*rank)++] = mark[d] ? 1 : x->dims[j++];
    }
    return 0;
}

/* Concat into place: a Concat whose inputs are contiguous slabs of its
 * output (every dim before the axis is 1) and are each produced by a node
 * of this graph for the Concat alone. The output is allocated at the
 * first producer, each producer writes its slab (its output is a view of
 * it: tensor_alloc keeps a preset buffer, core/tensor.c) and the Concat
 * does nothing. Static shapes only; at run time any mismatch (a shape, a
 * kernel that allocated its output its own way) runs the Concat kernel,
 * which copies as usual. slab_cat[v]: the position of the Concat whose
 * slab value v is (-1: none), slab_off[v]: its byte offset. */
static int concat_plan(const gr_graph *g, const gr_node *node, int pos, const int *uses, int *slab_cat,
                       size_t *slab_off)
{
    if (node->op != OP_Concat || node->n_inputs < 2 || node->n_outputs != 1 || node->outputs[0] < 0 ||
        g->values[node->outputs[0]].is_output)
        return 0;
    const gr_type *t0 = NULL;
    int64_t axis = gr_attr_int(node, "axis", INT64_MIN);
    for (int i = 0; i < node->n_inputs; i++) {
        int v = node->inputs[i];
        if (v < 0 || uses[v] != 1 || slab_cat[v] >= 0)
            return 0;
        const gr_value *val = &g->values[v];
        const gr_type *t = &val->type;
        if (val->init || val->is_input || val->is_output || val->outer || val->producer < 0 ||
            g->nodes[val->producer].n_outputs != 1 ||
            t->kind != TDM_KIND_TENSOR || t->dtype == TDM_STRING || !dtype_valid(t->dtype) || t->rank < 1)
            return 0;
        if (!t0) {
            t0 = t;
            if (axis < -t->rank || axis >= t->rank)
                return 0;
            if (axis < 0)
                axis += t->rank;
        }
        if (t->dtype != t0->dtype || t->rank != t0->rank)
            return 0;
        for (int d = 0; d < t->rank; d++)
            if (t->dims[d].v < 1 || t->dims[d].sym || (d != axis && t->dims[d].v != t0->dims[d].v) ||
                (d < axis && t->dims[d].v != 1))
                return 0;
    }
    size_t off = 0, esz = tdm_dtype_size(t0->dtype);
    for (int i = 0; i < node->n_inputs; i++) {
        const gr_type *t = &g->values[node->inputs[i]].type;
        size_t n = esz;
        for (int d = 0; d < t->rank; d++)
            if (mem_mul(n, (size_t)t->dims[d].v, &n))
                return 0;
        if (mem_add(off, n, &off))
            return 0;
    }
    off = 0;
    for (int i = 0; i < node->n_inputs; i++) {
        int v = node->inputs[i];
        const gr_type *t = &g->values[v].type;
        slab_cat[v] = pos;
        slab_off[v] = off;
        size_t n = esz;
        for (int d = 0; d < t->rank; d++)
            n *= (size_t)t->dims[d].v;
        off += n;
    }
    return 1;
}

/* The Concat output (the shape of its first input with the axis summed)
 * of plan concat at node. */
static tdm_status concat_alloc(tdm_err *e, const gr_graph *g, const gr_node *node, tdm_tensor **out)
{
    const gr_type *t0 = &g->values[node->inputs[0]].type;
    int64_t dims[TDM_MAX_RANK], axis = gr_attr_int(node, "axis", 0);
    if (axis < 0)
        axis += t0->rank;
    for (int d = 0; d < t0->rank; d++)
        dims[d] = t0->dims[d].v;
    for (int i = 1; i < node->n_inputs; i++)
        dims[axis] += g->values[node->inputs[i]].type.dims[axis].v;
    return tensor_new(e, t0->dtype, t0->rank, dims, out);
}

/* Every input of the planned Concat at node is its slab of y, as planned. */
static int concat_in_place(const gr_graph *g, const gr_node *node, const tdm_tensor *const *nin, const tdm_tensor *y,
                           const size_t *slab_off)
{
    if (!y || !y->data)
        return 0;
    for (int i = 0; i < node->n_inputs; i++) {
        int v = node->inputs[i];
        const tdm_tensor *t = nin[i];
        const gr_type *ty = &g->values[v].type;
        if (!t || t->kind != TDM_KIND_TENSOR || t->dtype != ty->dtype || t->rank != ty->rank ||
            t->data != (const void *)((const char *)y->data + slab_off[v]))
            return 0;
        for (int d = 0; d < t->rank; d++)
            if (t->dims[d] != ty->dims[d].v)
                return 0;
    }
    return 1;
}

/* ---- one run of a graph, in phases: the tables (run_alloc), the values
 * it starts from (run_bind), when each value dies (run_lifetimes, with the
 * Concat and alias planning), then node by node (run_node), and the end
 * (run_free) ---- */

typedef struct exec_run_state {
    exec_scope s;
    const gr_graph *g;
    tdm_err *e;
    int threads;
    uint64_t *rng;
    const obs_hook *obs;
    const exec_cache *cache;
    const fuse_plan *fp;      /* the fusion this run applies, or NULL */
    int fast, donate, alias;  /* see exec_run */
    unsigned char *unfused;   /* per node: its chain does not run fused this time */
    int *last_use;
    int *die_head, *die_next; /* per position: the values whose last use it is */
    unsigned char *move_ok;   /* per position: an alias node may move its input */
    int *slab_cat, *uses;     /* Concat into place (concat_plan) */
    size_t *slab_off;
    const tdm_tensor **nin;
    tdm_tensor **nout;
} exec_run_state;

static tdm_status run_alloc(exec_run_state *R)
{
    const gr_graph *g = R->g;
    int max_in = 0, max_out = 0;
    R->s.vals = mem_calloc((size_t)g->n_values + 1, sizeof *R->s.vals);
    R->s.owned = mem_calloc((size_t)g->n_values + 1, 1);
    R->last_use = mem_calloc((size_t)g->n_values + 1, sizeof *R->last_use);
    R->die_head = mem_calloc((size_t)g->n_nodes + 1, sizeof *R->die_head);
    R->die_next = mem_calloc((size_t)g->n_values + 1, sizeof *R->die_next);
    R->move_ok = mem_calloc((size_t)g->n_nodes + 1, 1);
    if (R->fp)
        R->unfused = mem_calloc((size_t)g->n_nodes + 1, 1);
    if (!R->s.vals || !R->s.owned || !R->last_use || !R->die_head || !R->die_next || !R->move_ok ||
        (R->fp && !R->unfused))
        return err_set(R->e, TDM_E_NOMEM, "out of memory");
    for (int n = 0; n < g->n_nodes; n++) {
        if (g->nodes[n].n_inputs > max_in)
            max_in = g->nodes[n].n_inputs;
        if (g->nodes[n].n_outputs > max_out)
            max_out = g->nodes[n].n_outputs;
    }
    R->nin = mem_calloc((size_t)max_in + 1, sizeof *R->nin);
    R->nout = mem_calloc((size_t)max_out + 1, sizeof *R->nout);
    if (!R->nin || !R->nout)
        return err_set(R->e, TDM_E_NOMEM, "out of memory");
    return TDM_OK;
}

/* Initial values: initializers, then inputs, then outer-scope names. */
static tdm_status run_bind(exec_run_state *R, const tdm_tensor *const *in, const exec_scope *parent)
{
    const gr_graph *g = R->g;
    for (int v = 0; v < g->n_values; v++) {
        if (g->values[v].init)
            R->s.vals[v] = g->values[v].init;
        R->last_use[v] = -1;
        if (g->values[v].is_output)
            R->last_use[v] = g->n_nodes; /* never freed before the end */
    }
    for (int k = 0; k < g->n_inputs; k++) {
        int v = g->inputs[k];
        if (in[k])
            R->s.vals[v] = (tdm_tensor *)in[k];
        else if (!g->values[v].init && !g->values[v].type.optional)
            return err_set(R->e, TDM_E_INPUT, "input '%s' was not given", g->values[v].name);
    }
    for (int v = 0; v < g->n_values; v++)
        if (g->values[v].outer)
            R->s.vals[v] = (tdm_tensor *)scope_lookup(parent, g->values[v].name);
    return TDM_OK;
}

/* The Concats whose inputs their producers write into place (concat_plan). */
static tdm_status run_plan_concats(exec_run_state *R)
{
    const gr_graph *g = R->g;
    R->slab_cat = mem_calloc((size_t)g->n_values + 1, sizeof *R->slab_cat);
    R->slab_off = mem_calloc((size_t)g->n_values + 1, sizeof *R->slab_off);
    R->uses = mem_calloc((size_t)g->n_values + 1, sizeof *R->uses);
    if (!R->slab_cat || !R->slab_off || !R->uses)
        return err_set(R->e, TDM_E_NOMEM, "out of memory");
    for (int v = 0; v < g->n_values; v++)
        R->slab_cat[v] = -1;
    for (int n = 0; n < g->n_nodes; n++)
        for (int i = 0; i < g->nodes[n].n_inputs; i++)
            if (g->nodes[n].inputs[i] >= 0)
                R->uses[g->nodes[n].inputs[i]]++;
    for (int pos = 0; pos < g->n_nodes; pos++) {
        const int n = g->order[pos];
        if (!(R->fp && fuse_is_member(R->fp, n)))
            concat_plan(g, &g->nodes[n], pos, R->uses, R->slab_cat, R->slab_off);
    }
    return TDM_OK;
}

/* When each value dies: its last use (subgraphs' outer-scope uses
 * included), extended by the views of it, and the die lists per position. */
static tdm_status run_lifetimes(exec_run_state *R)
{
    const gr_graph *g = R->g;
    int *last_use = R->last_use;
    int has_sub = 0, n_cat = 0;
    for (int pos = 0; pos < g->n_nodes; pos++) {
        const gr_node *node = &g->nodes[g->order[pos]];
        for (int i = 0; i < node->n_inputs; i++)
            if (node->inputs[i] >= 0 && last_use[node->inputs[i]] < pos)
                last_use[node->inputs[i]] = pos;
        for (int a = 0; a < node->n_attrs; a++) {
            const gr_attr *at = &node->attrs[a];
            has_sub |= at->type == GA_GRAPH || at->type == GA_GRAPHS;
            if (at->type == GA_GRAPH && at->g)
                mark_outer_uses(g, at->g, pos, last_use);
            for (size_t k = 0; at->type == GA_GRAPHS && k < at->n; k++)
                mark_outer_uses(g, at->graphs[k], pos, last_use);
        }
        n_cat += node->op == OP_Concat;
    }
    if (R->alias && n_cat && !has_sub) {
        tdm_status st = run_plan_concats(R);
        if (st)
            return st;
    }
    /* A view must not outlive its source's data: the input of an alias
     * node lives as long as its output (backwards, so that the output's
     * own views count, and a view of a view extends the first source). A
     * node may move its input when the node is its last direct use and no
     * view of it outlives the output. Outputs of the graph are never
     * views (only moves). */
    for (int pos = g->n_nodes - 1; R->alias && pos >= 0; pos--) {
        const gr_node *node = &g->nodes[g->order[pos]];
        if (!alias_op(node->op) || node->n_inputs < 1 || node->n_outputs != 1)
            continue;
        int x = node->inputs[0], y = node->outputs[0];
        if (x < 0 || y < 0)
            continue;
        int direct = last_use[x] == pos;
        if (!g->values[y].is_output && last_use[x] < last_use[y])
            last_use[x] = last_use[y];
        R->move_ok[pos] = (unsigned char)direct;
    }
    for (int pos = 0; R->alias && pos < g->n_nodes; pos++) {
        const gr_node *node = &g->nodes[g->order[pos]];
        if (R->move_ok[pos])
            R->move_ok[pos] = last_use[node->inputs[0]] <= last_use[node->outputs[0]];
    }
    for (int pos = 0; pos < g->n_nodes; pos++)
        R->die_head[pos] = -1;
    for (int v = 0; v < g->n_values; v++) {
        R->die_next[v] = -1;
        if (last_use[v] >= 0 && last_use[v] < g->n_nodes && !g->values[v].is_output) {
            R->die_next[v] = R->die_head[last_use[v]];
            R->die_head[last_use[v]] = v;
        }
    }
    return TDM_OK;
}

/* A producer of a Concat's slab (rv: the value it computes): its output
 * nout[0] is made a view of the slab, the Concat's output allocated at the
 * first producer. *preset: the slab, or NULL when the node has none. */
static tdm_status node_preset_slab(exec_run_state *R, const gr_node *node, const fuse_chain *fc, void **preset)
{
    const gr_graph *g = R->g;
    *preset = NULL;
    if (!R->slab_cat || node->n_outputs != 1 || node->outputs[0] < 0)
        return TDM_OK;
    const int rv = fc ? fuse_chain_out_value(fc) : node->outputs[0];
    if (rv < 0 || R->slab_cat[rv] < 0)
        return TDM_OK;
    const gr_node *cn = &g->nodes[g->order[R->slab_cat[rv]]];
    const int yv = cn->outputs[0];
    if (!R->s.vals[yv]) {
        tdm_status st = concat_alloc(R->e, g, cn, &R->s.vals[yv]);
        if (st)
            return st;
        R->s.owned[yv] = 1;
    }
    const gr_type *t = &g->values[rv].type;
    tdm_tensor *o = R->nout[0];
    o->kind = TDM_KIND_TENSOR;
    o->dtype = t->dtype;
    o->rank = t->rank;
    o->count = 1;
    for (int d = 0; d < t->rank; d++) {
        o->dims[d] = t->dims[d].v;
        o->count *= (size_t)t->dims[d].v;
    }
    o->nbytes = o->count * tdm_dtype_size(t->dtype);
    o->data = *preset = (char *)R->s.vals[yv]->data + R->slab_off[rv];
    o->borrowed = TENSOR_PRESET;
    return TDM_OK;
}

/* A planned Concat whose producers wrote their slabs: the output is done
 * (a chain it heads then runs over it in place). 1 when so. */
static int node_concat_done(exec_run_state *R, const gr_node *node)
{
    const int yv = node->outputs[0];
    if (!R->slab_cat || node->op != OP_Concat || yv < 0 || !R->s.vals[yv] ||
        !concat_in_place(R->g, node, R->nin, R->s.vals[yv], R->slab_off))
        return 0;
    tdm_tensor_destroy(R->nout[0]);
    R->nout[0] = R->s.vals[yv];
    R->s.vals[yv] = NULL;
    R->s.owned[yv] = 0;
    if (R->cache)
        atomic_fetch_add((_Atomic size_t *)&R->cache->concat_in_place, 1);
    return 1;
}

/* An input of an in-place op that dies at the node: its block is offered
 * to the output (arena_donate). The value id, or -1. */
static int node_donor(exec_run_state *R, const gr_node *node, int pos)
{
    int donor = -1;
    for (int i = 0; inplace_op(node->op) && i < node->n_inputs && donor < 0; i++) {
        int v = node->inputs[i];
        const tdm_tensor *t = v >= 0 ? R->s.vals[v] : NULL;
        if (t && R->s.owned[v] && R->last_use[v] == pos && !R->g->values[v].is_output &&
            t->kind == TDM_KIND_TENSOR && t->dtype == TDM_FLOAT && !t->borrowed && t->data && node->n_outputs == 1)
            donor = v;
        for (int j = 0; donor >= 0 && j < node->n_inputs; j++)
            if (j != i && R->nin[j] && R->nin[j]->data == t->data)
                donor = -1; /* another input is a view of the block */
    }
    return donor;
}

/* An alias node (alias_op) without running its kernel: its output takes
 * the input's block (*moved: that input) or a view of it. 1 when done. */
static int node_alias(exec_run_state *R, const gr_node *node, int pos, tdm_tensor **moved)
{
    const gr_graph *g = R->g;
    if (!alias_op(node->op) || node->n_inputs < 1 || node->n_outputs != 1 || node->inputs[0] < 0 ||
        node->outputs[0] < 0 || !R->nin[0])
        return 0;
    const int x = node->inputs[0];
    tdm_tensor *xt = R->s.vals[x], *yt = R->nout[0];
    const int mv = R->move_ok[pos] && R->s.owned[x] && !xt->borrowed;
    int r;
    int64_t dims[TDM_MAX_RANK];
    if (xt->kind != TDM_KIND_TENSOR || xt->dtype == TDM_STRING || !xt->data ||
        !(mv || !g->values[node->outputs[0]].is_output) || alias_shape(node, R->nin, &r, dims) != 0)
        return 0;
    yt->kind = TDM_KIND_TENSOR;
    yt->dtype = xt->dtype;
    yt->rank = r;
    for (int d = 0; d < r; d++)
        yt->dims[d] = dims[d];
    yt->count = xt->count;
    yt->nbytes = xt->nbytes;
    yt->data = xt->data;
    yt->borrowed = !mv; /* a view: the source lives as long (last_use) */
    if (mv) /* the block is the output's now (the input keeps it for an observer) */
        *moved = xt;
    if (R->cache) /* the figures only: the cache is otherwise read-only here */
        atomic_fetch_add((_Atomic size_t *)(mv ? &R->cache->alias_moves : &R->cache->alias_views), 1);
    return 1;
}

/* After the head of chain *fc ran: the program applied in place when its
 * kernel did not, or the chain handed back to run node by node (*fc set
 * to NULL) when it cannot run fused this time. */
static tdm_status node_finish_fused(exec_run_state *R, const gr_node *node, const fuse_chain **fc, op_fuse *fz,
                                    int cat_done, void *preset)
{
    char label[256];
    size_t done = atomic_load(&fz->done);
    int ok = fuse_shapes_ok(fz);
    tdm_tensor **nout = R->nout;
    if (done == 0 && ok && inplace_ok(nout[0], R->nin, cat_done ? 0 : node->n_inputs, preset)) {
        fuse_apply_all(fz, R->threads);
    } else if (done == 0) { /* not fusable this time: the chain runs node by node */
        for (int m = 0; m < fuse_chain_n_members(*fc); m++)
            R->unfused[fuse_chain_member(*fc, m)] = 1;
        *fc = NULL;
        if (preset && nout[0]->data == preset) { /* the head's own output: not the slab */
            tdm_tensor *c;
            tdm_status st = tensor_clone(R->e, nout[0], &c);
            if (st)
                return st;
            tdm_tensor_destroy(nout[0]);
            nout[0] = c;
        }
    } else if (done != nout[0]->count || !ok) {
        return err_set(R->e, TDM_E_INTERNAL,
                       "node %s: the fused elementwise program was applied to %zu of %zu elements%s",
                       gr_node_label(node, label, sizeof label), done, nout[0]->count,
                       ok ? "" : " and its operands do not broadcast to the output");
    }
    return TDM_OK;
}

/* Runs the node at position pos (or skips it when fused away), stores its
 * outputs and frees what it was the last to use. */
static tdm_status run_node(exec_run_state *R, int pos)
{
    const gr_graph *g = R->g;
    exec_scope *s = &R->s;
    const obs_hook *obs = R->obs;
    const int n = g->order[pos];
    const gr_node *node = &g->nodes[n];
    const fuse_chain *fc = NULL;
    const tdm_tensor **nin = R->nin;
    tdm_tensor **nout = R->nout;
    tdm_status st = TDM_OK;
    char label[256];
    op_fuse fz;
    if (R->fp && !R->unfused[n]) {
        if (fuse_is_member(R->fp, n))
            goto release_inputs; /* computed with its chain's head */
        fc = fuse_head_chain(R->fp, n);
    }
    if (node->op < 0)
        return err_set(R->e, TDM_E_UNSUPPORTED, "node %s: no kernel for %s", gr_node_label(node, label, sizeof label),
                       node->op_type);
    for (int i = 0; i < node->n_inputs; i++) {
        int v = node->inputs[i];
        nin[i] = v >= 0 ? s->vals[v] : NULL;
        if (v >= 0 && !nin[i] && !g->values[v].type.optional && !g->values[v].is_input)
            return err_set(R->e, TDM_E_INTERNAL, "node %s: input '%s' has no value",
                           gr_node_label(node, label, sizeof label), g->values[v].name);
    }
    if ((st = op_out_shells(R->e, node->n_outputs, nout)) != TDM_OK)
        goto node_fail;
    void *preset;
    if ((st = node_preset_slab(R, node, fc, &preset)) != TDM_OK)
        goto node_fail;
    int cat_done = node_concat_done(R, node);
    op_ctx ctx;
    op_ctx_init(&ctx, node, nin, nout, R->e, &s->caller, R->threads, R->rng);
    ctx.fast = R->fast;
    if (fc) {
        if ((st = fuse_bind(R->e, fc, s->vals, nout[0], &fz)) != TDM_OK) {
            err_prefix(R->e, "node %s: ", gr_node_label(node, label, sizeof label));
            goto node_fail;
        }
        if (fuse_chain_in_kernel(fc))
            ctx.fuse = &fz;
        fuse_chain_inputs(fc, nin, &ctx.n_in); /* a folded BatchNormalization's weights and bias */
    }
    const int donor = R->donate && !preset ? node_donor(R, node, pos) : -1;
    if (donor >= 0)
        arena_donate(s->vals[donor]->data, s->vals[donor]->nbytes);
    uint64_t t0 = obs && obs->fn ? obs_now_ns() : 0;
    tdm_tensor *moved = NULL; /* the input whose block the output took */
    int aliased = cat_done || (R->alias && !fc && !preset && node_alias(R, node, pos, &moved));
    st = aliased ? TDM_OK : op_run(&ctx);
    if (preset && nout[0]->borrowed == TENSOR_PRESET)
        nout[0]->borrowed = 1; /* not allocated: still the slab */
    if (donor >= 0 && arena_donation_end())
        s->vals[donor]->data = NULL; /* the block is the output's now; the input dies here */
    if (st) {
        err_prefix(R->e, "node %s: ", gr_node_label(node, label, sizeof label));
        goto node_fail;
    }
    if (fc && (st = node_finish_fused(R, node, &fc, &fz, cat_done, preset)) != TDM_OK)
        goto node_fail;
    for (int i = 0; i < node->n_outputs; i++) {
        int v = node->outputs[i];
        if (fc && i == 0)
            v = fuse_chain_out_value(fc); /* the chain's last value */
        if (v < 0) {
            tdm_tensor_destroy(nout[i]);
        } else {
            release(s, v);
            s->vals[v] = nout[i];
            s->owned[v] = 1;
        }
        nout[i] = NULL;
    }
    if (obs && obs->fn) {
        obs_node(obs, n, (int)obs->plan->devs->n - 1, t0, s->vals);
        /* the nodes fused away: zero time, their time is in the head's */
        for (int m = 0; fc && m < fuse_chain_n_members(fc); m++)
            obs_node(obs, fuse_chain_member(fc, m), (int)obs->plan->devs->n - 1, obs_now_ns(), s->vals);
    }
    if (moved) {
        moved->data = NULL;
        moved->nbytes = 0;
    }
    for (int i = 0; i < node->n_outputs; i++) {
        int v = fc && i == 0 ? fuse_chain_out_value(fc) : node->outputs[i];
        if (v >= 0 && R->last_use[v] < pos + 1 && !g->values[v].is_output)
            release(s, v);
    }
release_inputs:
    /* Free what this node was the last to use (the sources of views are
     * freed with the last use of their views). */
    for (int v = R->die_head[pos]; v >= 0; v = R->die_next[v])
        if (s->owned[v])
            release(s, v);
    return TDM_OK;
node_fail:
    for (int i = 0; i < node->n_outputs; i++) {
        tdm_tensor_destroy(nout[i]);
        nout[i] = NULL;
    }
    return st;
}

static void run_free(exec_run_state *R)
{
    if (R->s.vals)
        for (int v = 0; v < R->g->n_values; v++)
            if (R->s.owned[v])
                tdm_tensor_destroy(R->s.vals[v]);
    mem_free(R->s.vals);
    mem_free(R->s.owned);
    mem_free(R->last_use);
    mem_free(R->die_head);
    mem_free(R->die_next);
    mem_free(R->move_ok);
    mem_free(R->slab_cat);
    mem_free(R->slab_off);
    mem_free(R->uses);
    mem_free(R->nin);
    mem_free(R->nout);
    mem_free(R->unfused);
}

static tdm_status exec_run(tdm_err *e, const gr_graph *g, exec_scope *parent, const tdm_tensor *const *in,
                           tdm_tensor **out, int threads, uint64_t *rng, const obs_hook *obs, const exec_cache *cache)
{
    exec_run_state R;
    memset(&R, 0, sizeof R);
    R.g = g;
    R.e = e;
    R.threads = threads;
    R.rng = rng;
    R.obs = obs;
    R.cache = cache;
    R.fast = cache && (cache->fusion == TDM_FUSION_OBSERVED || (cache->fusion == TDM_FUSION_ON && !(obs && obs->fn)));
    if (R.fast && cache->fuse && fuse_plan_chains(cache->fuse) && !parent)
        R.fp = cache->fuse;
    /* in-place reuse of dying inputs: with an arena, not under an observer
     * (which reads the inputs after the node) */
    R.donate = cache && cache->arena && !(obs && obs->fn);
    /* moves and views for the Reshape family (alias_op): not under an
     * observer, which sees every node run the normal way, unless the run
     * is the fused one it asked for (TDM_FUSION_OBSERVED: profiles time
     * what runs) */
    R.alias = !(obs && obs->fn) || R.fp;
    exec_scope_init(&R.s, g, NULL, NULL, parent, e, threads, rng);
    for (int k = 0; k < g->n_outputs; k++)
        out[k] = NULL;
    if (g->n_nodes && !g->order)
        return err_set(e, TDM_E_INTERNAL, "graph '%s' has no topological order", g->name ? g->name : "");
    tdm_status st = run_alloc(&R);
    if (!st)
        st = run_bind(&R, in, parent);
    if (!st)
        st = run_lifetimes(&R);
    for (int pos = 0; !st && pos < g->n_nodes; pos++)
        st = run_node(&R, pos);
    if (!st)
        st = exec_hand_outputs(e, g, R.s.vals, R.s.owned, out);
    run_free(&R);
    return st;
}
