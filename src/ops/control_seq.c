/* Sequence and optional ops. */
#include "ops/control.h"
#include "ops/tensor.h"
#include "core/mem.h"

#include <string.h>

static tdm_status need_seq(op_ctx *ctx, int i)
{
    const tdm_tensor *t = i < ctx->n_in ? ctx->in[i] : NULL;
    if (!t || t->kind != TDM_KIND_SEQUENCE)
        return op_fail(ctx, TDM_E_RUNTIME, "input %d must be a sequence", i);
    return TDM_OK;
}

static void make_seq(tdm_tensor *t, tdm_dtype elem)
{
    tensor_reset(t);
    t->kind = TDM_KIND_SEQUENCE;
    t->dtype = elem;
}

/* Appends a clone of item to seq. */
static tdm_status seq_push_clone(op_ctx *ctx, tdm_tensor *seq, const tdm_tensor *item)
{
    tdm_tensor *c;
    tdm_status st = tensor_clone(ctx->err, item, &c);
    if (st)
        return st;
    if (tdm_sequence_append(seq, c) != TDM_OK)
        return op_fail(ctx, TDM_E_NOMEM, "out of memory");
    return TDM_OK;
}

/* Resolves a position input against a length (inclusive_end: insert). */
static tdm_status seq_position(op_ctx *ctx, int i, size_t len, int inclusive_end, int64_t dflt, size_t *out)
{
    int64_t p = dflt;
    if (i < ctx->n_in && ctx->in[i]) {
        if (ctx->in[i]->count != 1 || !dtype_is_int(ctx->in[i]->dtype))
            return op_fail(ctx, TDM_E_RUNTIME, "position must be an integer scalar");
        p = tensor_get_i64(ctx->in[i], 0);
    }
    int64_t n = (int64_t)len;
    int64_t hi = inclusive_end ? n : n - 1;
    if (p < -n || p > hi)
        return op_fail(ctx, TDM_E_RUNTIME, "position %lld is out of range for a sequence of %lld", (long long)p,
                       (long long)n);
    *out = (size_t)(p < 0 ? p + n : p);
    return TDM_OK;
}

tdm_status op_run_SequenceEmpty(op_ctx *ctx)
{
    make_seq(ctx->out[0], (tdm_dtype)gr_attr_int(ctx->node, "dtype", TDM_FLOAT));
    return TDM_OK;
}

tdm_status op_run_SequenceConstruct(op_ctx *ctx)
{
    tdm_tensor *o = ctx->out[0];
    make_seq(o, ctx->n_in && ctx->in[0] ? ctx->in[0]->dtype : TDM_FLOAT);
    for (int i = 0; i < ctx->n_in; i++) {
        if (!ctx->in[i] || ctx->in[i]->kind != TDM_KIND_TENSOR || ctx->in[i]->dtype != o->dtype)
            return op_fail(ctx, TDM_E_RUNTIME, "input %d must be a tensor of %s", i, tdm_dtype_name(o->dtype));
        tdm_status st = seq_push_clone(ctx, o, ctx->in[i]);
        if (st)
            return st;
    }
    return TDM_OK;
}

tdm_status op_run_SequenceInsert(op_ctx *ctx)
{
    tdm_status st = need_seq(ctx, 0);
    if (st)
        return st;
    const tdm_tensor *s = ctx->in[0], *t = ctx->in[1];
    if (!t || t->kind != TDM_KIND_TENSOR)
        return op_fail(ctx, TDM_E_RUNTIME, "input 1 must be a tensor");
    if (s->n_items && t->dtype != s->dtype)
        return op_fail(ctx, TDM_E_RUNTIME, "the tensor is %s, the sequence holds %s", tdm_dtype_name(t->dtype),
                       tdm_dtype_name(s->dtype));
    size_t pos;
    if ((st = seq_position(ctx, 2, s->n_items, 1, (int64_t)s->n_items, &pos)) != TDM_OK)
        return st;
    tdm_tensor *o = ctx->out[0];
    make_seq(o, t->dtype);
    for (size_t k = 0; k <= s->n_items; k++) {
        if (k == pos && (st = seq_push_clone(ctx, o, t)) != TDM_OK)
            return st;
        if (k < s->n_items && (st = seq_push_clone(ctx, o, s->items[k])) != TDM_OK)
            return st;
    }
    return TDM_OK;
}

tdm_status op_run_SequenceAt(op_ctx *ctx)
{
    tdm_status st = need_seq(ctx, 0);
    size_t pos;
    if (st || (st = seq_position(ctx, 1, ctx->in[0]->n_items, 0, 0, &pos)) != TDM_OK)
        return st;
    return op_tensor_clone_into(ctx, ctx->out[0], ctx->in[0]->items[pos]);
}

tdm_status op_run_SequenceErase(op_ctx *ctx)
{
    tdm_status st = need_seq(ctx, 0);
    if (st)
        return st;
    const tdm_tensor *s = ctx->in[0];
    size_t pos;
    if (s->n_items == 0)
        return op_fail(ctx, TDM_E_RUNTIME, "cannot erase from an empty sequence");
    if ((st = seq_position(ctx, 1, s->n_items, 0, -1, &pos)) != TDM_OK)
        return st;
    make_seq(ctx->out[0], s->dtype);
    for (size_t k = 0; k < s->n_items; k++)
        if (k != pos && (st = seq_push_clone(ctx, ctx->out[0], s->items[k])) != TDM_OK)
            return st;
    return TDM_OK;
}

tdm_status op_run_SequenceLength(op_ctx *ctx)
{
    tdm_status st = need_seq(ctx, 0);
    if (st || (st = op_out(ctx, 0, TDM_INT64, 0, NULL)) != TDM_OK)
        return st;
    ((int64_t *)ctx->out[0]->data)[0] = (int64_t)ctx->in[0]->n_items;
    return TDM_OK;
}

tdm_status op_run_SplitToSequence(op_ctx *ctx)
{
    const tdm_tensor *x = ctx->in[0];
    int axis;
    tdm_status st = op_axis(ctx, gr_attr_int(ctx->node, "axis", 0), x->rank, "axis", &axis);
    if (st)
        return st;
    int keepdims = (int)gr_attr_int(ctx->node, "keepdims", 1);
    int64_t len = x->dims[axis];
    int64_t *sizes = NULL;
    size_t n = 0;
    const tdm_tensor *sp = ctx->n_in > 1 ? ctx->in[1] : NULL;
    if (!sp) {
        n = (size_t)len;
        sizes = mem_calloc(n + 1, sizeof *sizes);
        if (!sizes)
            return op_fail(ctx, TDM_E_NOMEM, "out of memory");
        for (size_t k = 0; k < n; k++)
            sizes[k] = 1;
    } else if (sp->rank == 0) {
        int64_t c = tensor_get_i64(sp, 0);
        if (c <= 0)
            return op_fail(ctx, TDM_E_RUNTIME, "split %lld must be positive", (long long)c);
        n = (size_t)((len + c - 1) / c);
        sizes = mem_calloc(n + 1, sizeof *sizes);
        if (!sizes)
            return op_fail(ctx, TDM_E_NOMEM, "out of memory");
        for (size_t k = 0; k < n; k++)
            sizes[k] = (int64_t)k + 1 < (int64_t)n ? c : len - c * (int64_t)(n - 1);
        keepdims = 1;
    } else {
        if ((st = op_in_ints(ctx, 1, &sizes, &n)) != TDM_OK)
            return st;
        int64_t sum = 0;
        for (size_t k = 0; k < n; k++) {
            if (sizes[k] < 0) {
                mem_free(sizes);
                return op_fail(ctx, TDM_E_RUNTIME, "split sizes must not be negative");
            }
            sum += sizes[k];
        }
        if (sum != len) {
            mem_free(sizes);
            return op_fail(ctx, TDM_E_RUNTIME, "split sizes add up to %lld, the axis has %lld", (long long)sum,
                           (long long)len);
        }
        keepdims = 1;
    }
    tdm_tensor *o = ctx->out[0];
    make_seq(o, x->dtype);
    size_t outer = 1, inner = 1;
    for (int d = 0; d < axis; d++)
        outer *= (size_t)x->dims[d];
    for (int d = axis + 1; d < x->rank; d++)
        inner *= (size_t)x->dims[d];
    int64_t start = 0;
    for (size_t k = 0; k < n && !st; k++) {
        int64_t dims[TDM_MAX_RANK];
        int r = 0;
        for (int d = 0; d < x->rank; d++) {
            if (d == axis) {
                if (keepdims)
                    dims[r++] = sizes[k];
            } else {
                dims[r++] = x->dims[d];
            }
        }
        tdm_tensor *item;
        if ((st = tensor_new(ctx->err, x->dtype, r, dims, &item)) != TDM_OK)
            break;
        size_t chunk = (size_t)sizes[k] * inner;
        for (size_t a = 0; a < outer && !st; a++)
            st = op_tensor_copy(ctx, item, a * chunk, x, (a * (size_t)len + (size_t)start) * inner, chunk);
        if (st || tdm_sequence_append(o, item) != TDM_OK) {
            if (!st)
                st = op_fail(ctx, TDM_E_NOMEM, "out of memory");
            break;
        }
        start += sizes[k];
    }
    mem_free(sizes);
    return st;
}

tdm_status op_run_ConcatFromSequence(op_ctx *ctx)
{
    tdm_status st = need_seq(ctx, 0);
    if (st)
        return st;
    const tdm_tensor *s = ctx->in[0];
    if (s->n_items == 0)
        return op_fail(ctx, TDM_E_RUNTIME, "the sequence is empty");
    int new_axis = (int)gr_attr_int(ctx->node, "new_axis", 0);
    int rank = s->items[0]->rank + (new_axis ? 1 : 0);
    int axis;
    if ((st = op_axis(ctx, gr_attr_int(ctx->node, "axis", 0), rank, "axis", &axis)) != TDM_OK)
        return st;
    if (new_axis)
        return ctl_stack(ctx, s->items, s->n_items, axis, ctx->out[0]);
    return op_tensor_concat(ctx, (const tdm_tensor *const *)s->items, s->n_items, axis, ctx->out[0]);
}

tdm_status op_run_SequenceMap(op_ctx *ctx)
{
    const gr_attr *a = gr_attr_find(ctx->node, "body");
    if (!a || a->type != GA_GRAPH)
        return op_fail(ctx, TDM_E_MODEL, "attribute body is missing");
    const gr_graph *body = a->g;
    tdm_status st = need_seq(ctx, 0);
    if (st)
        return st;
    int body_in, body_out;
    if ((st = op_subgraph_io(ctx, body, &body_in, &body_out)) != TDM_OK)
        return st;
    if (body_in != ctx->n_in || body_out != ctx->n_out)
        return op_fail(ctx, TDM_E_MODEL, "the body's inputs and outputs do not match the node's");
    size_t len = ctx->in[0]->n_items;
    for (int i = 1; i < ctx->n_in; i++)
        if (ctx->in[i] && ctx->in[i]->kind == TDM_KIND_SEQUENCE && ctx->in[i]->n_items != len)
            return op_fail(ctx, TDM_E_RUNTIME, "input %d has %zu items, input 0 has %zu", i, ctx->in[i]->n_items,
                           len);
    for (int k = 0; k < ctx->n_out; k++) {
        tdm_dtype dt = op_subgraph_out_dtype(ctx, body, k);
        make_seq(ctx->out[k], dt != TDM_UNDEFINED ? dt : TDM_FLOAT);
    }
    const tdm_tensor **bin = mem_calloc((size_t)ctx->n_in + 1, sizeof *bin);
    tdm_tensor **bout = mem_calloc((size_t)ctx->n_out + 1, sizeof *bout);
    if (!bin || !bout) {
        mem_free(bin);
        mem_free(bout);
        return op_fail(ctx, TDM_E_NOMEM, "out of memory");
    }
    for (size_t it = 0; it < len && !st; it++) {
        for (int i = 0; i < ctx->n_in; i++)
            bin[i] = ctx->in[i] && ctx->in[i]->kind == TDM_KIND_SEQUENCE ? ctx->in[i]->items[it] : ctx->in[i];
        if ((st = op_run_subgraph(ctx, body, ctx->n_in, bin, bout)) != TDM_OK)
            break;
        for (int k = 0; k < ctx->n_out; k++) {
            ctx->out[k]->dtype = bout[k]->dtype;
            if (tdm_sequence_append(ctx->out[k], bout[k]) != TDM_OK && !st)
                st = op_fail(ctx, TDM_E_NOMEM, "out of memory");
            bout[k] = NULL;
        }
    }
    mem_free(bin);
    mem_free(bout);
    return st;
}

tdm_status op_run_Optional(op_ctx *ctx)
{
    const tdm_tensor *x = ctx->n_in > 0 ? ctx->in[0] : NULL;
    if (!x) {
        tensor_reset(ctx->out[0]);
        ctx->out[0]->kind = TDM_KIND_NONE;
        return TDM_OK;
    }
    return op_tensor_clone_into(ctx, ctx->out[0], x);
}

tdm_status op_run_OptionalHasElement(op_ctx *ctx)
{
    const tdm_tensor *x = ctx->n_in > 0 ? ctx->in[0] : NULL;
    tdm_status st = op_out(ctx, 0, TDM_BOOL, 0, NULL);
    if (st)
        return st;
    ((uint8_t *)ctx->out[0]->data)[0] = x && x->kind != TDM_KIND_NONE;
    return TDM_OK;
}

tdm_status op_run_OptionalGetElement(op_ctx *ctx)
{
    const tdm_tensor *x = ctx->n_in > 0 ? ctx->in[0] : NULL;
    if (!x || x->kind == TDM_KIND_NONE)
        return op_fail(ctx, TDM_E_RUNTIME, "the optional input is empty");
    return op_tensor_clone_into(ctx, ctx->out[0], x);
}
