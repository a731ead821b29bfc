#include "run/exec.h"
#include "core/arena.h"
#include "core/mem.h"
#include "ops/nn.h"
#include "ops/op.h"
#include "run/fuse.h"
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
 * buffer that is none of the node's inputs. */
static int inplace_ok(const tdm_tensor *y, const tdm_tensor *const *nin, int n_in)
{
    if (!y || y->kind != TDM_KIND_TENSOR || y->dtype != TDM_FLOAT || y->borrowed || !y->data)
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
        return 1;
    case OP_Sigmoid: /* the portable loop takes restrict pointers; the AVX2 one allows x == y */
        return gemm_avx2_usable();
    default:
        return 0;
    }
}

static tdm_status exec_run(tdm_err *e, const gr_graph *g, exec_scope *parent, const tdm_tensor *const *in,
                           tdm_tensor **out, int threads, uint64_t *rng, const obs_hook *obs, const exec_cache *cache)
{
    tdm_status st = TDM_OK;
    const fuse_plan *fp = NULL;
    unsigned char *unfused = NULL; /* per node: its chain does not run fused this time */
    if (cache && cache->fuse && fuse_plan_chains(cache->fuse) && !parent &&
        (cache->fusion == TDM_FUSION_OBSERVED || (cache->fusion == TDM_FUSION_ON && !(obs && obs->fn))))
        fp = cache->fuse;
    /* in-place reuse of dying inputs: with an arena, not under an observer
     * (which reads the inputs after the node) */
    const int donate = cache && cache->arena && !(obs && obs->fn);
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
    if (fp)
        unfused = mem_calloc((size_t)g->n_nodes + 1, 1);
    if (!s.vals || !s.owned || !last_use || (fp && !unfused)) {
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
        const int n = g->order[pos];
        const gr_node *node = &g->nodes[n];
        const fuse_chain *fc = NULL;
        op_fuse fz;
        if (fp && !unfused[n]) {
            if (fuse_is_member(fp, n))
                goto release_inputs; /* computed with its chain's head */
            fc = fuse_head_chain(fp, n);
        }
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
        if (fc) {
            if ((st = fuse_bind(e, fc, s.vals, nout[0], &fz)) != TDM_OK) {
                err_prefix(e, "node %s: ", gr_node_label(node, label, sizeof label));
                goto node_fail;
            }
            if (fuse_chain_in_kernel(fc))
                ctx.fuse = &fz;
        }
        int donor = -1;
        for (int i = 0; donate && inplace_op(node->op) && i < node->n_inputs && donor < 0; i++) {
            int v = node->inputs[i];
            const tdm_tensor *t = v >= 0 ? s.vals[v] : NULL;
            if (t && s.owned[v] && last_use[v] == pos && !g->values[v].is_output && t->kind == TDM_KIND_TENSOR &&
                t->dtype == TDM_FLOAT && !t->borrowed && t->data && node->n_outputs == 1)
                donor = v;
        }
        if (donor >= 0)
            arena_donate(s.vals[donor]->data, s.vals[donor]->nbytes);
        uint64_t t0 = obs && obs->fn ? obs_now_ns() : 0;
        st = op_table[node->op].run(&ctx);
        if (donor >= 0 && arena_donation_end())
            s.vals[donor]->data = NULL; /* the block is the output's now; the input dies here */
        if (st) {
            err_prefix(e, "node %s: ", gr_node_label(node, label, sizeof label));
            goto node_fail;
        }
        if (fc) {
            size_t done = atomic_load(&fz.done);
            int ok = fuse_shapes_ok(&fz);
            if (done == 0 && ok && inplace_ok(nout[0], nin, node->n_inputs)) {
                fuse_apply_all(&fz, threads);
            } else if (done == 0) { /* not fusable this time: the chain runs node by node */
                for (int m = 0; m < fuse_chain_n_members(fc); m++)
                    unfused[fuse_chain_member(fc, m)] = 1;
                fc = NULL;
            } else if (done != nout[0]->count || !ok) {
                st = err_set(e, TDM_E_INTERNAL,
                             "node %s: the fused elementwise program was applied to %zu of %zu elements%s",
                             gr_node_label(node, label, sizeof label), done, nout[0]->count,
                             ok ? "" : " and its operands do not broadcast to the output");
                goto node_fail;
            }
        }
        for (int i = 0; i < node->n_outputs; i++) {
            int v = node->outputs[i];
            if (fc && i == 0)
                v = fuse_chain_out_value(fc); /* the chain's last value */
            if (v < 0) {
                tdm_tensor_destroy(nout[i]);
            } else {
                release(&s, v);
                s.vals[v] = nout[i];
                s.owned[v] = 1;
            }
            nout[i] = NULL;
        }
        if (obs && obs->fn) {
            obs_node(obs, n, (int)obs->plan->devs->n - 1, t0, s.vals);
            /* the nodes fused away: zero time, their time is in the head's */
            for (int m = 0; fc && m < fuse_chain_n_members(fc); m++)
                obs_node(obs, fuse_chain_member(fc, m), (int)obs->plan->devs->n - 1, obs_now_ns(), s.vals);
        }
        for (int i = 0; i < node->n_outputs; i++) {
            int v = fc && i == 0 ? fuse_chain_out_value(fc) : node->outputs[i];
            if (v >= 0 && last_use[v] < pos + 1 && !g->values[v].is_output)
                release(&s, v);
        }
    release_inputs:
        /* Free what this node was the last to use. */
        for (int i = 0; i < node->n_inputs; i++) {
            int v = node->inputs[i];
            if (v >= 0 && last_use[v] == pos && s.owned[v])
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
    mem_free(unfused);
    return st;
}

tdm_status op_run_subgraph(op_ctx *ctx, const gr_graph *g, int n_in, const tdm_tensor *const *in, tdm_tensor **out)
{
    if (n_in != g->n_inputs)
        return err_set(ctx->err, TDM_E_MODEL, "subgraph '%s' takes %d inputs, the node passes %d",
                       g->name ? g->name : "", g->n_inputs, n_in);
    return exec_graph(ctx->err, g, ctx->scope, in, out, ctx->threads, ctx->rng);
}
