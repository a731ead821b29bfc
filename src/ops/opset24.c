/* Operators of the default domain added in opsets 24 to 28: BitCast (26),
 * SwiGLU (28), TensorScatter (24), CausalConvWithState (27) and
 * LinearAttention (27); and FlexAttention of ai.onnx.preview 1. As the
 * ONNX 1.23 reference computes them (onnx/reference/ops), in double,
 * rounded to the output's type (FlexAttention rounds where the reference
 * does). */
#include "ops/opset24.h"
#include "ops/reduce.h"
#include "core/mem.h"

#include <math.h>
#include <string.h>

static const tdm_tensor *in_opt(const op_ctx *ctx, int i) { return i < ctx->n_in ? ctx->in[i] : NULL; }

/* ---------------------------------------------------------------- BitCast */

/* The bits of x reinterpreted as element type 'to' of the same width. */
tdm_status op_run_BitCast(op_ctx *ctx)
{
    const tdm_tensor *x = ctx->in[0];
    if (!x || x->kind != TDM_KIND_TENSOR)
        return op_fail(ctx, TDM_E_RUNTIME, "input 0 must be a tensor");
    int64_t to = gr_attr_int(ctx->node, "to", 0);
    uint32_t ok = DT_NUMERIC | DT_BIT(TDM_BOOL) | DT_BIT(TDM_COMPLEX64) | DT_BIT(TDM_COMPLEX128);
    if (to <= 0 || to >= TDM_DTYPE_COUNT || !(DT_BIT(to) & ok))
        return op_fail(ctx, TDM_E_UNSUPPORTED, "BitCast to element type %lld is not supported", (long long)to);
    if (!(DT_BIT(x->dtype) & ok))
        return op_fail(ctx, TDM_E_UNSUPPORTED, "BitCast from %s is not supported", tdm_dtype_name(x->dtype));
    if (tdm_dtype_size((tdm_dtype)to) != tdm_dtype_size(x->dtype))
        return op_fail(ctx, TDM_E_MODEL, "BitCast from %s to %s changes the element width (%zu to %zu bytes)",
                       tdm_dtype_name(x->dtype), tdm_dtype_name((tdm_dtype)to), tdm_dtype_size(x->dtype),
                       tdm_dtype_size((tdm_dtype)to));
    tdm_status st = op_out(ctx, 0, (tdm_dtype)to, x->rank, x->dims);
    if (st)
        return st;
    if (x->nbytes)
        memcpy(ctx->out[0]->data, x->data, x->nbytes);
    if (to == TDM_BOOL) /* a bool byte other than 0 or 1 is still true */
        for (size_t i = 0; i < x->count; i++)
            ((uint8_t *)ctx->out[0]->data)[i] = ((const uint8_t *)x->data)[i] != 0;
    return TDM_OK;
}

tdm_status op_infer_BitCast(op_infer_ctx *ctx)
{
    op_infer_copy(ctx, 0, 0);
    int64_t to = gr_attr_int(ctx->node, "to", 0);
    ctx->out[0].kind = TDM_KIND_TENSOR;
    ctx->out[0].dtype = to > 0 && to < TDM_DTYPE_COUNT ? (tdm_dtype)to : TDM_UNDEFINED;
    return TDM_OK;
}

/* ----------------------------------------------------------------- SwiGLU */

/* Y = A * sigmoid(alpha A) * B, A and B of one shape (no broadcasting). */
tdm_status op_run_SwiGLU(op_ctx *ctx)
{
    tdm_status st;
    if ((st = op_red_check(ctx, 0, DT_FLOATS)) || (st = op_red_check(ctx, 1, DT_FLOATS)))
        return st;
    const tdm_tensor *a = ctx->in[0], *b = ctx->in[1];
    if (a->dtype != b->dtype || !shape_equal(a->rank, a->dims, b->rank, b->dims))
        return op_fail(ctx, TDM_E_RUNTIME, "inputs A and B must have one element type and one shape");
    double alpha = (double)gr_attr_float(ctx->node, "alpha", 1.0f);
    if ((st = op_out(ctx, 0, a->dtype, a->rank, a->dims)))
        return st;
    for (size_t i = 0; i < a->count; i++) {
        double x = tensor_get_f64(a, i);
        tensor_set_f64(ctx->out[0], i, x / (1.0 + exp(-alpha * x)) * tensor_get_f64(b, i));
    }
    return TDM_OK;
}

/* ---------------------------------------------------------- TensorScatter */

/* present = past_cache with update written along axis from write_indices[b]
 * on (per batch entry b = index 0 of the leading dimensions); mode
 * "circular" wraps around the axis, "linear" must fit. */
tdm_status op_run_TensorScatter(op_ctx *ctx)
{
    const tdm_tensor *past = ctx->in[0], *up = in_opt(ctx, 1), *wi = in_opt(ctx, 2);
    if (!past || !up || past->kind != TDM_KIND_TENSOR || up->kind != TDM_KIND_TENSOR)
        return op_fail(ctx, TDM_E_MODEL, "inputs past_cache and update are required");
    if (up->dtype != past->dtype || up->rank != past->rank || past->dtype == TDM_STRING)
        return op_fail(ctx, TDM_E_RUNTIME, "update must have past_cache's element type and rank");
    const char *mode = gr_attr_str(ctx->node, "mode", "linear");
    int circular = strcmp(mode, "circular") == 0;
    if (!circular && strcmp(mode, "linear") != 0)
        return op_fail(ctx, TDM_E_MODEL, "attribute mode must be 'linear' or 'circular', not '%s'", mode);
    int axis;
    tdm_status st = op_axis(ctx, gr_attr_int(ctx->node, "axis", -2), past->rank, "attribute axis", &axis);
    if (st)
        return st;
    if (axis == 0)
        return op_fail(ctx, TDM_E_MODEL, "attribute axis must not be the batch axis 0");
    for (int d = 0; d < past->rank; d++)
        if (d == axis ? up->dims[d] > past->dims[d] : up->dims[d] != past->dims[d])
            return op_fail(ctx, TDM_E_RUNTIME, "update's dimension %d (%lld) does not fit past_cache's (%lld)", d,
                           (long long)up->dims[d], (long long)past->dims[d]);
    int64_t B = past->dims[0];
    if (wi && (wi->rank != 1 || wi->dims[0] != B || !dtype_is_int(wi->dtype)))
        return op_fail(ctx, TDM_E_RUNTIME, "write_indices must be a 1-D integer tensor of %lld values", (long long)B);
    if ((st = op_out(ctx, 0, past->dtype, past->rank, past->dims)))
        return st;
    tdm_tensor *y = ctx->out[0];
    if (past->nbytes)
        memcpy(y->data, past->data, past->nbytes);
    size_t es = tdm_dtype_size(past->dtype), inner = es, outer = 1;
    for (int d = axis + 1; d < past->rank; d++)
        inner *= (size_t)past->dims[d];
    for (int d = 1; d < axis; d++)
        outer *= (size_t)past->dims[d];
    int64_t L = past->dims[axis], S = up->dims[axis];
    for (int64_t b = 0; b < B; b++) {
        int64_t w = wi ? tensor_get_i64(wi, (size_t)b) : 0;
        for (size_t o = 0; o < outer; o++)
            for (int64_t s = 0; s < S; s++) {
                int64_t at = w + s;
                if (circular)
                    at = L ? ((at % L) + L) % L : 0;
                if (at < 0 || at >= L)
                    return op_fail(ctx, TDM_E_RUNTIME,
                                   "write index %lld + %lld is outside past_cache's %lld positions (mode linear)",
                                   (long long)w, (long long)s, (long long)L);
                size_t row = (size_t)b * outer + o;
                memcpy((char *)y->data + (row * (size_t)L + (size_t)at) * inner,
                       (const char *)up->data + (row * (size_t)S + (size_t)s) * inner, inner);
            }
    }
    return TDM_OK;
}

/* ---------------------------------------------------- CausalConvWithState */

/* A depthwise causal 1-D convolution over [B, C, L] with a carried state:
 * the input is left-padded with past_state (zeros when absent, [B, C, k-1]),
 * convolved with weight [C, 1, k] (plus bias [C]), optionally followed by
 * SiLU; present_state is the last k-1 positions of the padded input. */
tdm_status op_run_CausalConvWithState(op_ctx *ctx)
{
    tdm_status st;
    if ((st = op_red_check(ctx, 0, DT_FLOATS)) || (st = op_red_check(ctx, 1, DT_FLOATS)))
        return st;
    const tdm_tensor *x = ctx->in[0], *w = ctx->in[1], *bias = in_opt(ctx, 2), *past = in_opt(ctx, 3);
    const char *act = gr_attr_str(ctx->node, "activation", "none");
    int silu = strcmp(act, "silu") == 0 || strcmp(act, "swish") == 0;
    if (!silu && strcmp(act, "none") != 0)
        return op_fail(ctx, TDM_E_MODEL, "attribute activation must be 'none', 'silu' or 'swish', not '%s'", act);
    if (x->rank != 3 || w->rank != 3)
        return op_fail(ctx, TDM_E_RUNTIME, "input and weight must have rank 3, not %d and %d", x->rank, w->rank);
    int64_t B = x->dims[0], C = x->dims[1], L = x->dims[2], k = w->dims[2];
    if (w->dims[0] != C || w->dims[1] != 1 || k < 1)
        return op_fail(ctx, TDM_E_RUNTIME, "weight must be [%lld, 1, k] with k >= 1", (long long)C);
    if (bias && (bias->rank != 1 || bias->dims[0] != C || !dtype_is_float(bias->dtype)))
        return op_fail(ctx, TDM_E_RUNTIME, "bias must be a float tensor of %lld values", (long long)C);
    if (past && (past->rank != 3 || past->dims[0] != B || past->dims[1] != C || past->dims[2] != k - 1 ||
                 !dtype_is_float(past->dtype)))
        return op_fail(ctx, TDM_E_RUNTIME, "past_state must be a float tensor [%lld, %lld, %lld]", (long long)B,
                       (long long)C, (long long)(k - 1));
    int64_t sdims[3] = {B, C, k - 1}, P = L + k - 1;
    if ((st = op_out(ctx, 0, x->dtype, 3, x->dims)))
        return st;
    if (ctx->n_out > 1 && (st = op_out(ctx, 1, x->dtype, 3, sdims)))
        return st;
    double *pad = NULL;
    if ((st = op_red_alloc_f64(ctx, (size_t)P, &pad)))
        return st;
    for (int64_t b = 0; b < B; b++)
        for (int64_t c = 0; c < C; c++) {
            size_t row = (size_t)(b * C + c);
            for (int64_t j = 0; j < k - 1; j++)
                pad[j] = past ? tensor_get_f64(past, row * (size_t)(k - 1) + (size_t)j) : 0.0;
            for (int64_t j = 0; j < L; j++)
                pad[k - 1 + j] = tensor_get_f64(x, row * (size_t)L + (size_t)j);
            double b0 = bias ? tensor_get_f64(bias, (size_t)c) : 0.0;
            for (int64_t t = 0; t < L; t++) {
                double s = b0;
                for (int64_t j = 0; j < k; j++)
                    s += pad[t + j] * tensor_get_f64(w, (size_t)(c * k + j));
                /* the reference rounds the convolution to the input's type before SiLU */
                if (silu) {
                    tensor_set_f64(ctx->out[0], row * (size_t)L + (size_t)t, s);
                    s = tensor_get_f64(ctx->out[0], row * (size_t)L + (size_t)t);
                    s = s / (1.0 + exp(-s));
                }
                tensor_set_f64(ctx->out[0], row * (size_t)L + (size_t)t, s);
            }
            if (ctx->n_out > 1)
                for (int64_t j = 0; j < k - 1; j++)
                    tensor_set_f64(ctx->out[1], row * (size_t)(k - 1) + (size_t)j, pad[P - (k - 1) + j]);
        }
    mem_free(pad);
    return TDM_OK;
}

tdm_status op_infer_CausalConvWithState(op_infer_ctx *ctx)
{
    const gr_type *x = ctx->n_in > 0 ? ctx->in[0] : NULL, *w = ctx->n_in > 1 ? ctx->in[1] : NULL;
    op_infer_copy(ctx, 0, 0);
    if (ctx->n_out < 2 || !x)
        return TDM_OK;
    gr_type *s = &ctx->out[1];
    s->kind = TDM_KIND_TENSOR;
    s->dtype = x->dtype;
    if (x->rank != 3)
        return TDM_OK;
    s->rank = 3;
    s->dims[0] = x->dims[0];
    s->dims[1] = x->dims[1];
    s->dims[2] = w && w->rank == 3 && w->dims[2].v >= 1 ? (gr_dim){w->dims[2].v - 1, NULL} : (gr_dim){-1, NULL};
    return TDM_OK;
}

/* -------------------------------------------------------- LinearAttention */

typedef struct la_shape {
    int64_t B, T, Hq, Hkv, dk, dv;
} la_shape;

/* Element (b, t, h, d) of a [B, T, H*D] tensor of D-wide heads. */
static double la_get(const tdm_tensor *t, const la_shape *s, int64_t b, int64_t i, int64_t h, int64_t D, int64_t d)
{
    int64_t H = t->dims[2] / D;
    return tensor_get_f64(t, (size_t)(((b * s->T + i) * H + h) * D + d));
}

/* The recurrent (linear-attention) state update of update_rule "linear",
 * "gated" (state *= exp(decay)), "delta" (v -= S^T k, times beta) or
 * "gated_delta", read by each query head of its key/value group. */
tdm_status op_run_LinearAttention(op_ctx *ctx)
{
    tdm_status st;
    for (int i = 0; i < 3; i++)
        if ((st = op_red_check(ctx, i, DT_FLOATS)))
            return st;
    const tdm_tensor *q = ctx->in[0], *k = ctx->in[1], *v = ctx->in[2];
    const tdm_tensor *past = in_opt(ctx, 3), *decay = in_opt(ctx, 4), *beta = in_opt(ctx, 5);
    const char *rule = gr_attr_str(ctx->node, "update_rule", "gated_delta");
    int gated = strcmp(rule, "gated") == 0 || strcmp(rule, "gated_delta") == 0;
    int delta = strcmp(rule, "delta") == 0 || strcmp(rule, "gated_delta") == 0;
    if (!gated && !delta && strcmp(rule, "linear") != 0)
        return op_fail(ctx, TDM_E_MODEL, "attribute update_rule must be linear, gated, delta or gated_delta, not '%s'",
                       rule);
    if (gated != (decay != NULL) || delta != (beta != NULL))
        return op_fail(ctx, TDM_E_MODEL, "update_rule '%s' %s decay and %s beta", rule,
                       gated ? "requires" : "forbids", delta ? "requires" : "forbids");
    la_shape s;
    s.Hq = gr_attr_int(ctx->node, "q_num_heads", 0);
    s.Hkv = gr_attr_int(ctx->node, "kv_num_heads", 0);
    if (s.Hq <= 0 || s.Hkv <= 0 || s.Hq % s.Hkv)
        return op_fail(ctx, TDM_E_MODEL, "q_num_heads (%lld) must be a positive multiple of kv_num_heads (%lld)",
                       (long long)s.Hq, (long long)s.Hkv);
    if (q->rank != 3 || k->rank != 3 || v->rank != 3)
        return op_fail(ctx, TDM_E_RUNTIME, "query, key and value must have rank 3 [B, T, H*D]");
    s.B = q->dims[0];
    s.T = q->dims[1];
    if (q->dims[2] % s.Hq || k->dims[2] % s.Hkv || v->dims[2] % s.Hkv)
        return op_fail(ctx, TDM_E_RUNTIME, "the hidden sizes must split into the heads");
    s.dk = q->dims[2] / s.Hq;
    s.dv = v->dims[2] / s.Hkv;
    if (k->dims[0] != s.B || v->dims[0] != s.B || k->dims[1] != s.T || v->dims[1] != s.T ||
        k->dims[2] != s.Hkv * s.dk)
        return op_fail(ctx, TDM_E_RUNTIME, "key and value do not match the query's batch, length and head size");
    int decay_per_head = 0;
    if (decay) {
        if (!dtype_is_float(decay->dtype) || decay->rank != 3 || decay->dims[0] != s.B || decay->dims[1] != s.T ||
            (decay->dims[2] != s.Hkv && decay->dims[2] != s.Hkv * s.dk))
            return op_fail(ctx, TDM_E_RUNTIME, "decay must be a float [B, T, %lld] or [B, T, %lld] tensor",
                           (long long)s.Hkv, (long long)(s.Hkv * s.dk));
        decay_per_head = decay->dims[2] == s.Hkv;
    }
    if (beta && (!dtype_is_float(beta->dtype) || beta->rank != 3 || beta->dims[0] != s.B || beta->dims[1] != s.T ||
                 (beta->dims[2] != s.Hkv && beta->dims[2] != 1)))
        return op_fail(ctx, TDM_E_RUNTIME, "beta must be a float [B, T, %lld] or [B, T, 1] tensor", (long long)s.Hkv);
    int64_t sdims[4] = {s.B, s.Hkv, s.dk, s.dv};
    if (past && (!dtype_is_float(past->dtype) || !shape_equal(past->rank, past->dims, 4, sdims)))
        return op_fail(ctx, TDM_E_RUNTIME, "past_state must be a float tensor [%lld, %lld, %lld, %lld]",
                       (long long)s.B, (long long)s.Hkv, (long long)s.dk, (long long)s.dv);
    double scale = (double)gr_attr_float(ctx->node, "scale", 0.0f);
    if (scale == 0.0)
        scale = 1.0 / sqrt((double)s.dk);
    int64_t ydims[3] = {s.B, s.T, s.Hq * s.dv};
    if ((st = op_out(ctx, 0, q->dtype, 3, ydims)))
        return st;
    if (ctx->n_out > 1 && (st = op_out(ctx, 1, past ? past->dtype : q->dtype, 4, sdims)))
        return st;
    size_t ns = (size_t)(s.B * s.Hkv * s.dk * s.dv);
    double *S = NULL, *vt = NULL;
    if ((st = op_red_alloc_f64(ctx, ns, &S)) || (st = op_red_alloc_f64(ctx, (size_t)s.dv, &vt))) {
        mem_free(S);
        return st;
    }
    for (size_t i = 0; past && i < ns; i++)
        S[i] = tensor_get_f64(past, i);
    int64_t group = s.Hq / s.Hkv;
    for (int64_t b = 0; b < s.B; b++)
        for (int64_t h = 0; h < s.Hkv; h++) {
            double *Sh = S + (size_t)((b * s.Hkv + h) * s.dk * s.dv);
            for (int64_t t = 0; t < s.T; t++) {
                if (gated)
                    for (int64_t d = 0; d < s.dk; d++) {
                        double g = decay_per_head ? la_get(decay, &s, b, t, h, 1, 0) : la_get(decay, &s, b, t, h, s.dk, d);
                        double e = exp(g);
                        for (int64_t m = 0; m < s.dv; m++)
                            Sh[d * s.dv + m] *= e;
                    }
                for (int64_t m = 0; m < s.dv; m++)
                    vt[m] = la_get(v, &s, b, t, h, s.dv, m);
                if (delta) {
                    double bt = beta->dims[2] == 1 ? la_get(beta, &s, b, t, 0, 1, 0) : la_get(beta, &s, b, t, h, 1, 0);
                    for (int64_t m = 0; m < s.dv; m++) {
                        double r = 0.0;
                        for (int64_t d = 0; d < s.dk; d++)
                            r += Sh[d * s.dv + m] * la_get(k, &s, b, t, h, s.dk, d);
                        vt[m] = bt * (vt[m] - r);
                    }
                }
                for (int64_t d = 0; d < s.dk; d++) {
                    double kd = la_get(k, &s, b, t, h, s.dk, d);
                    for (int64_t m = 0; m < s.dv; m++)
                        Sh[d * s.dv + m] += kd * vt[m];
                }
                for (int64_t g = 0; g < group; g++) {
                    int64_t hq = h * group + g;
                    for (int64_t m = 0; m < s.dv; m++) {
                        double o = 0.0;
                        for (int64_t d = 0; d < s.dk; d++)
                            o += la_get(q, &s, b, t, hq, s.dk, d) * Sh[d * s.dv + m];
                        tensor_set_f64(ctx->out[0], (size_t)(((b * s.T + t) * s.Hq + hq) * s.dv + m), scale * o);
                    }
                }
            }
        }
    for (size_t i = 0; ctx->n_out > 1 && i < ns; i++)
        tensor_set_f64(ctx->out[1], i, S[i]);
    mem_free(S);
    mem_free(vt);
    return TDM_OK;
}

tdm_status op_infer_LinearAttention(op_infer_ctx *ctx)
{
    const gr_type *q = ctx->n_in > 0 ? ctx->in[0] : NULL, *k = ctx->n_in > 1 ? ctx->in[1] : NULL;
    const gr_type *v = ctx->n_in > 2 ? ctx->in[2] : NULL, *past = ctx->n_in > 3 ? ctx->in[3] : NULL;
    int64_t hq = gr_attr_int(ctx->node, "q_num_heads", 0), hkv = gr_attr_int(ctx->node, "kv_num_heads", 0);
    gr_dim unk = {-1, NULL};
    for (int o = 0; o < ctx->n_out && o < 2; o++) {
        ctx->out[o].kind = TDM_KIND_TENSOR;
        ctx->out[o].dtype = o == 1 && past ? past->dtype : q ? q->dtype : TDM_UNDEFINED;
    }
    if (!q || !k || !v || q->rank != 3 || k->rank != 3 || v->rank != 3 || hq <= 0 || hkv <= 0)
        return TDM_OK;
    gr_dim dk = k->dims[2].v >= 0 ? (gr_dim){k->dims[2].v / hkv, NULL} : unk;
    gr_dim dv = v->dims[2].v >= 0 ? (gr_dim){v->dims[2].v / hkv, NULL} : unk;
    gr_type *y = &ctx->out[0];
    y->rank = 3;
    y->dims[0] = q->dims[0];
    y->dims[1] = q->dims[1];
    y->dims[2] = dv.v >= 0 && dv.v <= INT64_MAX / hq ? (gr_dim){dv.v * hq, NULL} : unk;
    if (ctx->n_out > 1) {
        gr_type *s = &ctx->out[1];
        s->rank = 4;
        s->dims[0] = q->dims[0];
        s->dims[1] = (gr_dim){hkv, NULL};
        s->dims[2] = dk;
        s->dims[3] = dv;
    }
    return TDM_OK;
}

/* ------------------------------------------ FlexAttention (ai.onnx.preview) */

/* v rounded to element type dt (float, float16, bfloat16; double as is),
 * as numpy rounds each operation in that type. */
static double round_to(tdm_dtype dt, double v)
{
    if (dt == TDM_FLOAT)
        return (double)(float)v;
    if (dt == TDM_FLOAT16)
        return (double)fp16_to_f32(f32_to_fp16((float)v));
    if (dt == TDM_BFLOAT16)
        return (double)bf16_to_f32(f32_to_bf16((float)v));
    return v;
}

/* Runs the one-input, one-output graph attribute 'name' (if any) on t, in
 * place: t's values become the graph's output, converted to t's type. */
static tdm_status flex_mod(op_ctx *ctx, const char *name, tdm_tensor *t)
{
    const gr_attr *a = gr_attr_find(ctx->node, name);
    if (!a)
        return TDM_OK;
    if (a->type != GA_GRAPH || !a->g)
        return op_fail(ctx, TDM_E_MODEL, "attribute %s must be a graph", name);
    int n_in = 0, n_out = 0;
    tdm_status st = op_subgraph_io(ctx, a->g, &n_in, &n_out);
    if (st)
        return st;
    if (n_in != 1 || n_out != 1)
        return op_fail(ctx, TDM_E_MODEL, "graph attribute %s must have one input and one output, not %d and %d",
                       name, n_in, n_out);
    const tdm_tensor *in[1] = {t};
    tdm_tensor *out[1] = {NULL};
    if ((st = op_run_subgraph(ctx, a->g, 1, in, out)))
        return st;
    const tdm_tensor *r = out[0];
    if (!r || r->kind != TDM_KIND_TENSOR || !shape_equal(r->rank, r->dims, t->rank, t->dims) ||
        !(dtype_is_float(r->dtype) || dtype_is_int(r->dtype))) {
        tdm_tensor_destroy(out[0]);
        return op_fail(ctx, TDM_E_RUNTIME, "graph attribute %s must return a numeric tensor of its input's shape",
                       name);
    }
    for (size_t i = 0; i < t->count; i++)
        tensor_set_f64(t, i, tensor_get_f64(r, i));
    tdm_tensor_destroy(out[0]);
    return TDM_OK;
}

/* softmax(score_mod(Q K^T scale)) then prob_mod, times V, on [B, H, L, E]
 * inputs (grouped heads repeat K and V). As the reference: Q and K are
 * each multiplied by sqrt(scale) in their type, the scores are computed
 * in that type and converted to the softmax precision (float for
 * float16/bfloat16, or the attribute softmax_precision), where the mods,
 * the softmax and the product with V are computed. */
tdm_status op_run_FlexAttention(op_ctx *ctx)
{
    tdm_status st;
    for (int i = 0; i < 3; i++)
        if ((st = op_red_check(ctx, i, DT_FLOATS)))
            return st;
    const tdm_tensor *q = ctx->in[0], *k = ctx->in[1], *v = ctx->in[2];
    if (q->rank != 4 || k->rank != 4 || v->rank != 4)
        return op_fail(ctx, TDM_E_RUNTIME, "Q, K and V must have rank 4 [B, H, L, E]");
    int64_t B = q->dims[0], Hq = q->dims[1], L = q->dims[2], E = q->dims[3];
    int64_t Hkv = k->dims[1], S = k->dims[2], Ev = v->dims[3];
    if (k->dims[0] != B || v->dims[0] != B || v->dims[1] != Hkv || v->dims[2] != S || k->dims[3] != E || Hkv <= 0 ||
        Hq % Hkv)
        return op_fail(ctx, TDM_E_RUNTIME, "K and V do not match Q (batch, heads a multiple of K's, head size)");
    tdm_dtype T = q->dtype, CT = T == TDM_DOUBLE ? TDM_DOUBLE : TDM_FLOAT;
    int64_t sp = gr_attr_int(ctx->node, "softmax_precision", 0);
    if (sp) {
        if (!dtype_valid((int)sp) || !dtype_is_float((tdm_dtype)sp))
            return op_fail(ctx, TDM_E_MODEL, "attribute softmax_precision %lld is not a float type", (long long)sp);
        CT = (tdm_dtype)sp;
    }
    const gr_attr *sa = gr_attr_find(ctx->node, "scale");
    float scale = sa && sa->type == GA_FLOAT ? sa->f : (float)(1.0 / sqrt((double)E));
    double ss = round_to(T, (double)sqrtf(scale));
    int64_t sdims[4] = {B, Hq, L, S}, ydims[4] = {B, Hq, L, Ev};
    tdm_tensor *sc = NULL;
    if ((st = tensor_new(ctx->err, CT, 4, sdims, &sc)))
        return st;
    double *row = NULL;
    if ((st = op_red_alloc_f64(ctx, (size_t)(S > Ev ? S : Ev), &row))) {
        tdm_tensor_destroy(sc);
        return st;
    }
    int64_t group = Hq / Hkv;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hq; h++)
            for (int64_t l = 0; l < L; l++)
                for (int64_t s = 0; s < S; s++) {
                    double acc = 0.0;
                    size_t qo = (size_t)(((b * Hq + h) * L + l) * E), ko = (size_t)(((b * Hkv + h / group) * S + s) * E);
                    for (int64_t e = 0; e < E; e++)
                        acc += round_to(T, tensor_get_f64(q, qo + (size_t)e) * ss) *
                               round_to(T, tensor_get_f64(k, ko + (size_t)e) * ss);
                    tensor_set_f64(sc, (size_t)(((b * Hq + h) * L + l) * S + s), round_to(T, acc));
                }
    if (!(st = flex_mod(ctx, "score_mod", sc))) {
        for (size_t r = 0; r < sc->count; r += (size_t)S) {
            double mx = -INFINITY, sum = 0.0;
            for (int64_t s = 0; s < S; s++)
                mx = fmax(mx, tensor_get_f64(sc, r + (size_t)s));
            for (int64_t s = 0; s < S; s++)
                sum += row[s] = exp(tensor_get_f64(sc, r + (size_t)s) - mx);
            for (int64_t s = 0; s < S; s++)
                tensor_set_f64(sc, r + (size_t)s, row[s] / sum);
        }
        st = flex_mod(ctx, "prob_mod", sc);
    }
    if (!st)
        st = op_out(ctx, 0, v->dtype, 4, ydims);
    for (int64_t b = 0; !st && b < B; b++)
        for (int64_t h = 0; h < Hq; h++)
            for (int64_t l = 0; l < L; l++) {
                size_t po = (size_t)(((b * Hq + h) * L + l) * S);
                for (int64_t e = 0; e < Ev; e++) {
                    double acc = 0.0;
                    for (int64_t s = 0; s < S; s++)
                        acc += tensor_get_f64(sc, po + (size_t)s) *
                               round_to(CT, tensor_get_f64(v, (size_t)(((b * Hkv + h / group) * S + s) * Ev + e)));
                    tensor_set_f64(ctx->out[0], (size_t)(((b * Hq + h) * L + l) * Ev + e), round_to(CT, acc));
                }
            }
    mem_free(row);
    tdm_tensor_destroy(sc);
    return st;
}

tdm_status op_infer_FlexAttention(op_infer_ctx *ctx)
{
    const gr_type *q = ctx->n_in > 0 ? ctx->in[0] : NULL, *v = ctx->n_in > 2 ? ctx->in[2] : NULL;
    gr_type *y = &ctx->out[0];
    y->kind = TDM_KIND_TENSOR;
    y->dtype = v ? v->dtype : TDM_UNDEFINED;
    if (!q || !v || q->rank != 4 || v->rank != 4)
        return TDM_OK;
    y->rank = 4;
    y->dims[0] = q->dims[0];
    y->dims[1] = q->dims[1];
    y->dims[2] = q->dims[2];
    y->dims[3] = v->dims[3];
    return TDM_OK;
}
