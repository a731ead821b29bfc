/* If, Loop and Scan: run their subgraph attributes through the executor. */
#include "ops/control.h"
#include "core/mem.h"

#include <string.h>

static const gr_graph *graph_attr(const gr_node *n, const char *name)
{
    const gr_attr *a = gr_attr_find(n, name);
    return a && a->type == GA_GRAPH ? a->g : NULL;
}

static int scalar_true(const tdm_tensor *t)
{
    return t && t->kind == TDM_KIND_TENSOR && t->count >= 1 && tensor_get_i64(t, 0) != 0;
}

/* Frees an array of n owned values and the array. */
static void free_values(tdm_tensor **v, size_t n)
{
    if (!v)
        return;
    for (size_t i = 0; i < n; i++)
        tdm_tensor_destroy(v[i]);
    mem_free(v);
}

tdm_status op_run_If(op_ctx *ctx)
{
    const tdm_tensor *cond = ctx->in[0];
    if (!cond || cond->kind != TDM_KIND_TENSOR || cond->count != 1)
        return op_fail(ctx, TDM_E_RUNTIME, "the condition must be a tensor of one element");
    const gr_graph *g = graph_attr(ctx->node, scalar_true(cond) ? "then_branch" : "else_branch");
    if (!g)
        return op_fail(ctx, TDM_E_MODEL, "attribute %s is missing", scalar_true(cond) ? "then_branch" : "else_branch");
    int g_in, g_out;
    tdm_status st = op_subgraph_io(ctx, g, &g_in, &g_out);
    if (st)
        return st;
    if (g_out != ctx->n_out)
        return op_fail(ctx, TDM_E_MODEL, "the branch has %d outputs, the node %d", g_out, ctx->n_out);
    tdm_tensor **res = mem_calloc((size_t)g_out + 1, sizeof *res);
    if (!res)
        return op_fail(ctx, TDM_E_NOMEM, "out of memory");
    st = op_run_subgraph(ctx, g, 0, NULL, res);
    if (st) {
        mem_free(res);
        return st;
    }
    for (int i = 0; i < ctx->n_out; i++)
        ctl_move(ctx->out[i], res[i]);
    mem_free(res);
    return TDM_OK;
}

static tdm_status scalar_new(op_ctx *ctx, tdm_dtype dt, int64_t v, tdm_tensor **out)
{
    tdm_status st = tensor_new(ctx->err, dt, 0, NULL, out);
    if (!st)
        tensor_set_i64(*out, 0, v);
    return st;
}

tdm_status op_run_Loop(op_ctx *ctx)
{
    const gr_graph *body = graph_attr(ctx->node, "body");
    if (!body)
        return op_fail(ctx, TDM_E_MODEL, "attribute body is missing");
    int body_in, body_out;
    tdm_status io_st = op_subgraph_io(ctx, body, &body_in, &body_out);
    if (io_st)
        return io_st;
    int n_carried = ctx->n_in - 2;
    int n_scan = body_out - 1 - n_carried;
    if (n_carried < 0 || n_scan < 0 || body_in != 2 + n_carried || ctx->n_out != n_carried + n_scan)
        return op_fail(ctx, TDM_E_MODEL,
                       "the body takes %d inputs and gives %d outputs, which does not fit %d loop-carried values",
                       body_in, body_out, n_carried < 0 ? 0 : n_carried);
    int64_t max_trip = INT64_MAX;
    if (ctx->in[0]) {
        if (ctx->in[0]->count != 1)
            return op_fail(ctx, TDM_E_RUNTIME, "the trip count M must have one element");
        max_trip = tensor_get_i64(ctx->in[0], 0);
    }
    int cond = ctx->in[1] ? scalar_true(ctx->in[1]) : 1;
    tdm_status st = TDM_OK;
    tdm_tensor **carried = mem_calloc((size_t)n_carried + 1, sizeof *carried);
    const tdm_tensor **bin = mem_calloc((size_t)body_in + 1, sizeof *bin);
    tdm_tensor **bout = mem_calloc((size_t)body_out + 1, sizeof *bout);
    tdm_tensor ***scans = mem_calloc((size_t)n_scan + 1, sizeof *scans);
    size_t n_iter = 0, cap_iter = 0;
    tdm_tensor *iter_t = NULL, *cond_t = NULL;
    if (!carried || !bin || !bout || !scans) {
        st = op_fail(ctx, TDM_E_NOMEM, "out of memory");
        goto done;
    }
    for (int k = 0; k < n_carried; k++) {
        if (!ctx->in[2 + k]) {
            if ((st = tdm_none_create(&carried[k])) != TDM_OK) {
                st = op_fail(ctx, TDM_E_NOMEM, "out of memory");
                goto done;
            }
        } else if ((st = tensor_clone(ctx->err, ctx->in[2 + k], &carried[k])) != TDM_OK) {
            goto done;
        }
    }
    for (int64_t it = 0; it < max_trip && cond; it++) {
        if ((st = scalar_new(ctx, TDM_INT64, it, &iter_t)) != TDM_OK ||
            (st = scalar_new(ctx, TDM_BOOL, cond, &cond_t)) != TDM_OK)
            goto done;
        bin[0] = iter_t;
        bin[1] = cond_t;
        for (int k = 0; k < n_carried; k++)
            bin[2 + k] = carried[k];
        if ((st = op_run_subgraph(ctx, body, body_in, bin, bout)) != TDM_OK)
            goto done;
        tdm_tensor_destroy(iter_t);
        tdm_tensor_destroy(cond_t);
        iter_t = cond_t = NULL;
        cond = scalar_true(bout[0]);
        tdm_tensor_destroy(bout[0]);
        for (int k = 0; k < n_carried; k++) {
            tdm_tensor_destroy(carried[k]);
            carried[k] = bout[1 + k];
        }
        if (n_scan && n_iter == cap_iter) {
            size_t ncap = cap_iter ? cap_iter * 2 : 16;
            for (int k = 0; k < n_scan; k++) {
                tdm_tensor **p = mem_realloc(scans[k], ncap * sizeof *p);
                if (!p) {
                    for (int j = 0; j < n_scan; j++)
                        tdm_tensor_destroy(bout[1 + n_carried + j]);
                    st = op_fail(ctx, TDM_E_NOMEM, "out of memory");
                    goto done;
                }
                scans[k] = p;
            }
            cap_iter = ncap;
        }
        for (int k = 0; k < n_scan; k++)
            scans[k][n_iter] = bout[1 + n_carried + k];
        n_iter += n_scan ? 1 : 0;
    }
    for (int k = 0; k < n_carried; k++) {
        ctl_move(ctx->out[k], carried[k]);
        carried[k] = NULL;
    }
    for (int k = 0; k < n_scan; k++) {
        tdm_tensor *o = ctx->out[n_carried + k];
        if (n_iter == 0) {
            /* No iteration: an empty tensor of the declared element type. */
            tdm_dtype dt = op_subgraph_out_dtype(ctx, body, 1 + n_carried + k);
            if (dt == TDM_UNDEFINED)
                dt = TDM_FLOAT;
            int64_t zero = 0;
            if ((st = tensor_alloc(ctx->err, o, dt, 1, &zero)) != TDM_OK)
                goto done;
        } else if (scans[k][0]->kind == TDM_KIND_SEQUENCE) {
            st = op_fail(ctx, TDM_E_UNSUPPORTED, "scan output %d is a sequence", k);
            goto done;
        } else if ((st = ctl_stack(ctx, scans[k], n_iter, 0, o)) != TDM_OK) {
            goto done;
        }
    }
done:
    tdm_tensor_destroy(iter_t);
    tdm_tensor_destroy(cond_t);
    free_values(carried, carried ? (size_t)n_carried : 0);
    for (int k = 0; scans && k < n_scan; k++)
        free_values(scans[k], n_iter);
    mem_free(scans);
    mem_free(bin);
    mem_free(bout);
    return st;
}

/* One scan over sequence axis: states in/out (n_state), scan inputs (already
 * batch-free), scan outputs stacked into outs[]. */
static tdm_status scan_run(op_ctx *ctx, const gr_graph *body, int n_state, int n_scan_in,
                           const tdm_tensor *const *state_in, const tdm_tensor *const *scan_in,
                           const int64_t *in_axes, const int64_t *in_dirs, const int64_t *out_axes,
                           const int64_t *out_dirs, int64_t seq_len, tdm_tensor **state_out, tdm_tensor **scan_out)
{
    int body_in, body_out;
    tdm_status st = op_subgraph_io(ctx, body, &body_in, &body_out);
    if (st)
        return st;
    int n_scan_out = body_out - n_state;
    tdm_tensor **states = mem_calloc((size_t)n_state + 1, sizeof *states);
    const tdm_tensor **bin = mem_calloc((size_t)body_in + 1, sizeof *bin);
    tdm_tensor **slices = mem_calloc((size_t)n_scan_in + 1, sizeof *slices);
    tdm_tensor **bout = mem_calloc((size_t)body_out + 1, sizeof *bout);
    tdm_tensor ***items = mem_calloc((size_t)n_scan_out + 1, sizeof *items);
    int64_t done_steps = 0;
    if (!states || !bin || !slices || !bout || !items) {
        st = op_fail(ctx, TDM_E_NOMEM, "out of memory");
        goto done;
    }
    for (int k = 0; k < n_scan_out; k++)
        if (!(items[k] = mem_calloc((size_t)seq_len + 1, sizeof **items))) {
            st = op_fail(ctx, TDM_E_NOMEM, "out of memory");
            goto done;
        }
    for (int k = 0; k < n_state; k++)
        if ((st = tensor_clone(ctx->err, state_in[k], &states[k])) != TDM_OK)
            goto done;
    for (int64_t t = 0; t < seq_len; t++) {
        for (int j = 0; j < n_scan_in; j++) {
            int64_t idx = in_dirs && in_dirs[j] ? seq_len - 1 - t : t;
            tdm_tensor_destroy(slices[j]);
            slices[j] = NULL;
            if ((st = ctl_take(ctx, scan_in[j], (int)in_axes[j], idx, &slices[j])) != TDM_OK)
                goto done;
        }
        for (int k = 0; k < n_state; k++)
            bin[k] = states[k];
        for (int j = 0; j < n_scan_in; j++)
            bin[n_state + j] = slices[j];
        if ((st = op_run_subgraph(ctx, body, body_in, bin, bout)) != TDM_OK)
            goto done;
        for (int k = 0; k < n_state; k++) {
            tdm_tensor_destroy(states[k]);
            states[k] = bout[k];
        }
        for (int k = 0; k < n_scan_out; k++)
            items[k][t] = bout[n_state + k];
        done_steps = t + 1;
    }
    for (int k = 0; k < n_state; k++) {
        state_out[k] = states[k];
        states[k] = NULL;
    }
    for (int k = 0; k < n_scan_out; k++) {
        if (out_dirs && out_dirs[k])
            for (int64_t a = 0, b = seq_len - 1; a < b; a++, b--) {
                tdm_tensor *tmp = items[k][a];
                items[k][a] = items[k][b];
                items[k][b] = tmp;
            }
        tdm_tensor *o = mem_calloc(1, sizeof *o);
        if (!o) {
            st = op_fail(ctx, TDM_E_NOMEM, "out of memory");
            goto done;
        }
        scan_out[k] = o;
        if (seq_len == 0) {
            int64_t zero = 0;
            if ((st = tensor_alloc(ctx->err, o, TDM_FLOAT, 1, &zero)) != TDM_OK)
                goto done;
            continue;
        }
        int axis = (int)out_axes[k];
        if (axis < 0)
            axis += items[k][0]->rank + 1;
        if ((st = ctl_stack(ctx, items[k], (size_t)seq_len, axis, o)) != TDM_OK)
            goto done;
    }
done:
    free_values(states, states ? (size_t)n_state : 0);
    free_values(slices, slices ? (size_t)n_scan_in : 0);
    for (int k = 0; items && k < n_scan_out; k++)
        free_values(items[k], (size_t)done_steps);
    mem_free(items);
    mem_free(bin);
    mem_free(bout);
    return st;
}

/* Reads an optional int list attribute of length n, default 0 for each. */
static tdm_status axes_attr(op_ctx *ctx, const char *name, int n, int64_t *out)
{
    const int64_t *v;
    int c = gr_attr_ints(ctx->node, name, &v);
    for (int i = 0; i < n; i++)
        out[i] = 0;
    if (c < 0)
        return TDM_OK;
    if (c != n)
        return op_fail(ctx, TDM_E_MODEL, "attribute %s has %d entries, expected %d", name, c, n);
    for (int i = 0; i < n; i++)
        out[i] = v[i];
    return TDM_OK;
}

tdm_status op_run_Scan(op_ctx *ctx)
{
    const gr_graph *body = graph_attr(ctx->node, "body");
    if (!body)
        return op_fail(ctx, TDM_E_MODEL, "attribute body is missing");
    int body_in, body_out;
    tdm_status io_st = op_subgraph_io(ctx, body, &body_in, &body_out);
    if (io_st)
        return io_st;
    int m = (int)gr_attr_int(ctx->node, "num_scan_inputs", -1);
    int first = ctx->version == 8 ? 1 : 0; /* Scan-8 takes sequence_lens first */
    int n_state = ctx->n_in - first - m;
    int n_scan_out = body_out - n_state;
    if (m <= 0 || n_state < 0 || n_scan_out < 0 || body_in != n_state + m ||
        ctx->n_out != body_out)
        return op_fail(ctx, TDM_E_MODEL, "num_scan_inputs %d does not fit the node's %d inputs and the body's %d",
                       m, ctx->n_in, body_in);
    int64_t in_axes[64], in_dirs[64], out_axes[64], out_dirs[64];
    if (m > 64 || n_scan_out > 64)
        return op_fail(ctx, TDM_E_UNSUPPORTED, "more than 64 scan inputs or outputs");
    tdm_status st;
    if ((st = axes_attr(ctx, ctx->version == 8 ? "directions" : "scan_input_directions", m, in_dirs)) != TDM_OK ||
        (st = axes_attr(ctx, "scan_input_axes", m, in_axes)) != TDM_OK ||
        (st = axes_attr(ctx, "scan_output_axes", n_scan_out, out_axes)) != TDM_OK ||
        (st = axes_attr(ctx, "scan_output_directions", n_scan_out, out_dirs)) != TDM_OK)
        return st;
    const tdm_tensor *const *state_in = ctx->in + first;
    const tdm_tensor *const *scan_in = ctx->in + first + n_state;
    for (int j = 0; j < m; j++) {
        if (!scan_in[j])
            return op_fail(ctx, TDM_E_RUNTIME, "scan input %d is missing", j);
        int r = scan_in[j]->rank - (first ? 1 : 0);
        if (in_axes[j] < 0)
            in_axes[j] += r;
        if (in_axes[j] < 0 || in_axes[j] >= r)
            return op_fail(ctx, TDM_E_RUNTIME, "scan_input_axes[%d] is out of range", j);
    }
    if (ctx->version != 8) {
        int64_t seq = scan_in[0]->dims[in_axes[0]];
        for (int j = 1; j < m; j++)
            if (scan_in[j]->dims[in_axes[j]] != seq)
                return op_fail(ctx, TDM_E_RUNTIME, "scan inputs differ in sequence length");
        tdm_tensor **outs = mem_calloc((size_t)body_out + 1, sizeof *outs);
        if (!outs)
            return op_fail(ctx, TDM_E_NOMEM, "out of memory");
        st = scan_run(ctx, body, n_state, m, state_in, scan_in, in_axes, in_dirs, out_axes, out_dirs, seq, outs,
                      outs + n_state);
        if (!st)
            for (int k = 0; k < body_out; k++) {
                ctl_move(ctx->out[k], outs[k]);
                outs[k] = NULL;
            }
        free_values(outs, (size_t)body_out);
        return st;
    }
    /* Scan-8: a batch axis 0 on every input and output, optional sequence_lens. */
    int64_t batch = scan_in[0]->rank > 0 ? scan_in[0]->dims[0] : 0;
    size_t nb = (size_t)batch;
    size_t nout = (size_t)body_out;
    tdm_tensor **all = mem_calloc(nb * nout + 1, sizeof *all);
    const tdm_tensor **sin = mem_calloc((size_t)(n_state + m) + 1, sizeof *sin);
    tdm_tensor **owned = mem_calloc((size_t)(n_state + m) + 1, sizeof *owned);
    if (!all || !sin || !owned) {
        st = op_fail(ctx, TDM_E_NOMEM, "out of memory");
        goto done8;
    }
    for (int64_t b = 0; b < batch; b++) {
        for (int k = 0; k < n_state + m; k++) {
            tdm_tensor_destroy(owned[k]);
            owned[k] = NULL;
            const tdm_tensor *src = k < n_state ? state_in[k] : scan_in[k - n_state];
            if ((st = ctl_take(ctx, src, 0, b, &owned[k])) != TDM_OK)
                goto done8;
            sin[k] = owned[k];
        }
        int64_t seq = owned[n_state]->dims[in_axes[0]];
        if (ctx->in[0]) {
            int64_t l = tensor_get_i64(ctx->in[0], (size_t)b);
            if (l < 0 || l > seq) {
                st = op_fail(ctx, TDM_E_RUNTIME, "sequence_lens[%lld] = %lld is out of range", (long long)b,
                             (long long)l);
                goto done8;
            }
            seq = l;
        }
        if ((st = scan_run(ctx, body, n_state, m, sin, sin + n_state, in_axes, in_dirs, out_axes, out_dirs, seq,
                           all + (size_t)b * nout, all + (size_t)b * nout + n_state)) != TDM_OK)
            goto done8;
    }
    for (size_t k = 0; k < nout; k++) {
        tdm_tensor **col = mem_calloc(nb + 1, sizeof *col);
        if (!col) {
            st = op_fail(ctx, TDM_E_NOMEM, "out of memory");
            goto done8;
        }
        for (size_t b = 0; b < nb; b++)
            col[b] = all[b * nout + k];
        st = ctl_stack(ctx, col, nb, 0, ctx->out[k]);
        mem_free(col);
        if (st)
            goto done8;
    }
done8:
    free_values(all, all ? nb * nout : 0);
    free_values(owned, owned ? (size_t)(n_state + m) : 0);
    mem_free(sin);
    return st;
}
