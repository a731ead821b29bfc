/* Attention (23; 24 adds nonpad_kv_seqlen, 25 the sliding window) and
 * RotaryEmbedding (23), following the ONNX reference: computed in double
 * over the inputs' values, rounded once to the input type at the end.
 *
 * Attention: Q [B, Hq, Sq, D] or [B, Sq, Hq*D] (then q_num_heads and
 * kv_num_heads say the heads), K [B, Hkv, Sk, D], V [B, Hkv, Sk, Dv];
 * past_key/past_value [B, Hkv, Sp, D/Dv] are prepended to K/V and returned
 * as present_key/present_value. scores = (Q K^T) * scale, softcapped, plus
 * a bias made of attn_mask (bool: false is -inf; float: added; shorter
 * than the keys: padded with -inf), the causal frontier j <= i + offset,
 * the sliding window and the key padding of nonpad_kv_seqlen; a softmax
 * row whose bias is -inf everywhere is 0. Heads of Q share a head of K/V
 * in groups of Hq / Hkv. */
#include "ops/nn.h"
#include "ops/reduce.h"
#include "core/mem.h"

#include <math.h>
#include <string.h>

/* ---- helpers ---- */

/* Loads input i into doubles laid out [B, H, S, D] (a rank-3 input
 * [B, S, H*D] is split into heads). */
static tdm_status att_load(op_ctx *ctx, int i, int64_t heads, int64_t *dims4, double **out)
{
    const tdm_tensor *t = ctx->in[i];
    double *raw = NULL;
    tdm_status st = op_red_load_f64(ctx, t, &raw);
    if (st)
        return st;
    if (t->rank == 4) {
        memcpy(dims4, t->dims, 4 * sizeof *dims4);
        *out = raw;
        return TDM_OK;
    }
    if (heads <= 0 || t->dims[2] % heads) {
        mem_free(raw);
        return op_fail(ctx, TDM_E_RUNTIME, "input %d's last dimension %lld does not split into %lld heads", i,
                       (long long)t->dims[2], (long long)heads);
    }
    int64_t B = t->dims[0], S = t->dims[1], D = t->dims[2] / heads;
    dims4[0] = B;
    dims4[1] = heads;
    dims4[2] = S;
    dims4[3] = D;
    double *d = NULL;
    if ((st = op_red_alloc_f64(ctx, t->count, &d))) {
        mem_free(raw);
        return st;
    }
    for (int64_t b = 0; b < B; b++)
        for (int64_t s = 0; s < S; s++)
            for (int64_t h = 0; h < heads; h++)
                for (int64_t k = 0; k < D; k++)
                    d[((b * heads + h) * S + s) * D + k] = raw[((b * S + s) * heads + h) * D + k];
    mem_free(raw);
    *out = d;
    return TDM_OK;
}

/* Element of the mask for (b, h, i, j), right-aligned broadcasting over
 * [B, H, Sq, Sk]; keys beyond the mask's last dimension are masked. Bool:
 * 0 or -inf. */
static double att_mask_at(const tdm_tensor *m, int64_t b, int64_t h, int64_t i, int64_t j)
{
    int64_t idx[4] = {b, h, i, j};
    int r = m->rank;
    if (j >= m->dims[r - 1])
        return -INFINITY;
    size_t off = 0;
    for (int k = 0; k < r; k++) {
        int64_t d = m->dims[k], v = idx[4 - r + k];
        off = off * (size_t)d + (size_t)(d == 1 ? 0 : v);
    }
    if (m->dtype == TDM_BOOL)
        return ((const uint8_t *)m->data)[off] ? 0.0 : -INFINITY;
    return tensor_get_f64(m, off);
}

static const tdm_tensor *att_opt(const op_ctx *ctx, int i) { return i < ctx->n_in ? ctx->in[i] : NULL; }

/* Concatenates past [B, H, Sp, D] and cur [B, H, Sc, D] along S. */
static tdm_status att_concat(op_ctx *ctx, const double *past, int64_t sp, const double *cur, const int64_t *d4,
                             double **out)
{
    size_t n;
    int64_t s = sp + d4[2];
    int64_t dims[4] = {d4[0], d4[1], s, d4[3]};
    if (shape_count(4, dims, &n))
        return op_fail(ctx, TDM_E_RUNTIME, "the key/value cache is too large");
    tdm_status st = op_red_alloc_f64(ctx, n, out);
    if (st)
        return st;
    size_t rp = (size_t)sp * (size_t)d4[3], rc = (size_t)d4[2] * (size_t)d4[3];
    for (int64_t bh = 0; bh < d4[0] * d4[1]; bh++) {
        if (rp)
            memcpy(*out + (size_t)bh * (rp + rc), past + (size_t)bh * rp, rp * sizeof(double));
        if (rc)
            memcpy(*out + (size_t)bh * (rp + rc) + rp, cur + (size_t)bh * rc, rc * sizeof(double));
    }
    return TDM_OK;
}

static tdm_status att_put(op_ctx *ctx, int o, tdm_dtype dt, int rank, const int64_t *dims, const double *v)
{
    if (!op_out_wanted(ctx, o))
        return TDM_OK;
    tdm_status st = op_out(ctx, o, dt, rank, dims);
    if (!st)
        op_red_put_f64(ctx->out[o], 0, ctx->out[o]->count, v);
    return st;
}

/* ---- Attention ---- */

typedef struct att_geom {
    int64_t B, Hq, Hkv, Sq, Sk, Sp, D, Dv;
} att_geom;

tdm_status op_run_Attention(op_ctx *ctx)
{
    tdm_status st;
    for (int i = 0; i < 3; i++)
        if ((st = op_red_check(ctx, i, DT_FLOATS)))
            return st;
    const tdm_tensor *q = ctx->in[0], *k = ctx->in[1], *v = ctx->in[2];
    const tdm_tensor *mask = att_opt(ctx, 3), *pk = att_opt(ctx, 4), *pv = att_opt(ctx, 5);
    const tdm_tensor *nonpad = ctx->version >= 24 ? att_opt(ctx, 6) : NULL;
    int r = q->rank;
    if ((r != 3 && r != 4) || k->rank != r || v->rank != r)
        return op_fail(ctx, TDM_E_RUNTIME, "Q, K and V must all have rank 3 or all rank 4");
    if (!pk != !pv)
        return op_fail(ctx, TDM_E_RUNTIME, "past_key and past_value must be given together");
    if (nonpad && pk)
        return op_fail(ctx, TDM_E_RUNTIME, "nonpad_kv_seqlen cannot be combined with past_key/past_value");
    int64_t qh = gr_attr_int(ctx->node, "q_num_heads", 0), kvh = gr_attr_int(ctx->node, "kv_num_heads", 0);
    double *Q = NULL, *K = NULL, *V = NULL, *PK = NULL, *PV = NULL, *KK = NULL, *VV = NULL;
    double *Y = NULL, *S = NULL, *QK = NULL, *bias = NULL;
    int64_t dq[4], dk[4], dv[4];
    if ((st = att_load(ctx, 0, qh, dq, &Q)) || (st = att_load(ctx, 1, kvh, dk, &K)) ||
        (st = att_load(ctx, 2, kvh, dv, &V)))
        goto done;
    att_geom g = {dq[0], dq[1], dk[1], dq[2], dk[2], 0, dq[3], dv[3]};
    if (dk[0] != g.B || dv[0] != g.B || dv[1] != g.Hkv || dv[2] != dk[2] || dk[3] != g.D || g.Hkv <= 0 ||
        g.Hq % g.Hkv) {
        st = op_fail(ctx, TDM_E_RUNTIME, "Q, K and V have inconsistent shapes (heads %lld and %lld)",
                     (long long)g.Hq, (long long)g.Hkv);
        goto done;
    }
    if (pk) {
        if ((st = op_red_check(ctx, 4, DT_FLOATS)) || (st = op_red_check(ctx, 5, DT_FLOATS)))
            goto done;
        if (pk->rank != 4 || pv->rank != 4 || pk->dims[0] != g.B || pk->dims[1] != g.Hkv || pk->dims[3] != g.D ||
            pv->dims[0] != g.B || pv->dims[1] != g.Hkv || pv->dims[2] != pk->dims[2] || pv->dims[3] != g.Dv) {
            st = op_fail(ctx, TDM_E_RUNTIME, "past_key/past_value do not match K and V");
            goto done;
        }
        g.Sp = pk->dims[2];
        if ((st = op_red_load_f64(ctx, pk, &PK)) || (st = op_red_load_f64(ctx, pv, &PV)) ||
            (st = att_concat(ctx, PK, g.Sp, K, dk, &KK)) || (st = att_concat(ctx, PV, g.Sp, V, dv, &VV)))
            goto done;
        mem_free(K);
        mem_free(V);
        K = KK;
        V = VV;
        KK = VV = NULL;
        g.Sk += g.Sp;
    }
    if (mask && (mask->kind != TDM_KIND_TENSOR || mask->rank < 1 || mask->rank > 4 ||
                 (mask->dtype != TDM_BOOL && !dtype_is_float(mask->dtype)))) {
        st = op_fail(ctx, TDM_E_RUNTIME, "attn_mask must be a bool or float tensor of rank 1 to 4");
        goto done;
    }
    if (mask) {
        int64_t full[4] = {g.B, g.Hq, g.Sq, g.Sk};
        for (int i = 0; i < mask->rank - 1; i++) {
            int64_t d = mask->dims[i], want = full[4 - mask->rank + i];
            if (d != 1 && d != want) {
                st = op_fail(ctx, TDM_E_RUNTIME, "attn_mask dimension %d is %lld, not 1 or %lld", i, (long long)d,
                             (long long)want);
                goto done;
            }
        }
    }
    if (nonpad && (nonpad->rank != 1 || nonpad->dims[0] != g.B || !dtype_is_int(nonpad->dtype))) {
        st = op_fail(ctx, TDM_E_RUNTIME, "nonpad_kv_seqlen must be an integer vector of the batch size");
        goto done;
    }
    double scale = gr_attr_float(ctx->node, "scale", 0.0f);
    if (!gr_attr_find(ctx->node, "scale"))
        scale = 1.0 / sqrt((double)g.D);
    double softcap = gr_attr_float(ctx->node, "softcap", 0.0f);
    int causal = gr_attr_int(ctx->node, "is_causal", 0) != 0;
    int64_t mode = gr_attr_int(ctx->node, "qk_matmul_output_mode", 0);
    int64_t lw = ctx->version >= 25 ? gr_attr_int(ctx->node, "left_window_size", -1) : -1;
    int64_t rw = ctx->version >= 25 ? gr_attr_int(ctx->node, "right_window_size", -1) : -1;

    size_t nqk, ny, nrow;
    int64_t qkd[4] = {g.B, g.Hq, g.Sq, g.Sk}, yd[4] = {g.B, g.Hq, g.Sq, g.Dv};
    if (shape_count(4, qkd, &nqk) || shape_count(4, yd, &ny)) {
        st = op_fail(ctx, TDM_E_RUNTIME, "the attention scores are too large");
        goto done;
    }
    nrow = (size_t)g.Sk;
    if ((st = op_red_alloc_f64(ctx, ny, &Y)) || (st = op_red_alloc_f64(ctx, nqk, &QK)) ||
        (st = op_red_alloc_f64(ctx, nrow + 1, &S)) || (st = op_red_alloc_f64(ctx, nrow + 1, &bias)))
        goto done;
    int64_t grp = g.Hq / g.Hkv;
    for (int64_t b = 0; b < g.B; b++) {
        int64_t np = nonpad ? tensor_get_i64(nonpad, (size_t)b) : g.Sk;
        int64_t offset = pk ? g.Sp : nonpad ? np - g.Sq : 0;
        for (int64_t h = 0; h < g.Hq; h++) {
            int64_t hk = h / grp;
            const double *Kb = K + (size_t)(b * g.Hkv + hk) * (size_t)g.Sk * (size_t)g.D;
            const double *Vb = V + (size_t)(b * g.Hkv + hk) * (size_t)g.Sk * (size_t)g.Dv;
            for (int64_t i = 0; i < g.Sq; i++) {
                const double *qi = Q + ((size_t)(b * g.Hq + h) * (size_t)g.Sq + (size_t)i) * (size_t)g.D;
                double *qk = QK + ((size_t)(b * g.Hq + h) * (size_t)g.Sq + (size_t)i) * (size_t)g.Sk;
                double mx = -INFINITY, bmx = -INFINITY;
                for (int64_t j = 0; j < g.Sk; j++) {
                    const double *kj = Kb + (size_t)j * (size_t)g.D;
                    double dot = 0;
                    for (int64_t c = 0; c < g.D; c++)
                        dot += qi[c] * kj[c];
                    dot *= scale;
                    if (softcap > 0)
                        dot = softcap * tanh(dot / softcap);
                    double bj = mask ? att_mask_at(mask, b, h, i, j) : 0.0;
                    int64_t diff = i + offset - j;
                    if (causal && diff < 0)
                        bj = -INFINITY;
                    if ((lw >= 0 && diff > lw) || (rw >= 0 && -diff > rw))
                        bj = -INFINITY;
                    if (nonpad && j >= np)
                        bj = -INFINITY;
                    bias[j] = bj;
                    qk[j] = dot;
                    S[j] = dot + bj;
                    if (S[j] > mx)
                        mx = S[j];
                    if (bj > bmx)
                        bmx = bj;
                }
                if (mode == 2)
                    memcpy(qk, S, (size_t)g.Sk * sizeof *qk);
                double sum = 0;
                int masked = bmx == -INFINITY;
                for (int64_t j = 0; j < g.Sk; j++) {
                    S[j] = masked || mx == -INFINITY ? 0.0 : exp(S[j] - mx);
                    sum += S[j];
                }
                for (int64_t j = 0; j < g.Sk; j++)
                    S[j] = sum > 0 ? S[j] / sum : 0.0;
                if (mode == 3)
                    memcpy(qk, S, (size_t)g.Sk * sizeof *qk);
                double *y = Y + ((size_t)(b * g.Hq + h) * (size_t)g.Sq + (size_t)i) * (size_t)g.Dv;
                for (int64_t c = 0; c < g.Dv; c++) {
                    double acc = 0;
                    for (int64_t j = 0; j < g.Sk; j++)
                        acc += S[j] * Vb[(size_t)j * (size_t)g.Dv + (size_t)c];
                    y[c] = acc;
                }
            }
        }
    }
    /* Y back to the input's layout */
    if (r == 3) {
        double *y3 = NULL;
        if ((st = op_red_alloc_f64(ctx, ny, &y3)))
            goto done;
        for (int64_t b = 0; b < g.B; b++)
            for (int64_t h = 0; h < g.Hq; h++)
                for (int64_t i = 0; i < g.Sq; i++)
                    for (int64_t c = 0; c < g.Dv; c++)
                        y3[((size_t)(b * g.Sq + i) * (size_t)g.Hq + (size_t)h) * (size_t)g.Dv + (size_t)c] =
                            Y[((size_t)(b * g.Hq + h) * (size_t)g.Sq + (size_t)i) * (size_t)g.Dv + (size_t)c];
        mem_free(Y);
        Y = y3;
        int64_t y3d[3] = {g.B, g.Sq, g.Hq * g.Dv};
        st = att_put(ctx, 0, q->dtype, 3, y3d, Y);
    } else {
        st = att_put(ctx, 0, q->dtype, 4, yd, Y);
    }
    int64_t pkd[4] = {g.B, g.Hkv, g.Sk, g.D}, pvd[4] = {g.B, g.Hkv, g.Sk, g.Dv};
    if (!st)
        st = att_put(ctx, 1, k->dtype, 4, pkd, K);
    if (!st)
        st = att_put(ctx, 2, v->dtype, 4, pvd, V);
    if (!st)
        st = att_put(ctx, 3, q->dtype, 4, qkd, QK);
done:
    mem_free(Q);
    mem_free(K);
    mem_free(V);
    mem_free(PK);
    mem_free(PV);
    mem_free(KK);
    mem_free(VV);
    mem_free(Y);
    mem_free(S);
    mem_free(QK);
    mem_free(bias);
    return st;
}

/* ---- RotaryEmbedding (23) ---- */

tdm_status op_run_RotaryEmbedding(op_ctx *ctx)
{
    tdm_status st;
    if ((st = op_red_check(ctx, 0, DT_FLOATS)) || (st = op_red_check(ctx, 1, DT_FLOATS)) ||
        (st = op_red_check(ctx, 2, DT_FLOATS)))
        return st;
    const tdm_tensor *x = ctx->in[0], *cc = ctx->in[1], *sc = ctx->in[2], *pos = att_opt(ctx, 3);
    if (x->rank != 3 && x->rank != 4)
        return op_fail(ctx, TDM_E_RUNTIME, "input must have rank 3 or 4, not %d", x->rank);
    int inter = gr_attr_int(ctx->node, "interleaved", 0) != 0;
    int64_t nh = gr_attr_int(ctx->node, "num_heads", 0);
    /* x as [B, S, H, D] with strides: rank 4 is [B, H, S, D] */
    int64_t B = x->dims[0], Sn, H, D;
    if (x->rank == 4) {
        H = x->dims[1];
        Sn = x->dims[2];
        D = x->dims[3];
    } else {
        if (nh <= 0 || x->dims[2] % nh)
            return op_fail(ctx, TDM_E_RUNTIME, "num_heads (%lld) must divide the hidden size %lld", (long long)nh,
                           (long long)x->dims[2]);
        Sn = x->dims[1];
        H = nh;
        D = x->dims[2] / nh;
    }
    int64_t rd = gr_attr_int(ctx->node, "rotary_embedding_dim", 0);
    if (rd <= 0)
        rd = D;
    if (rd > D || rd % 2)
        return op_fail(ctx, TDM_E_RUNTIME, "rotary_embedding_dim %lld must be even and at most the head size %lld",
                       (long long)rd, (long long)D);
    int64_t half = rd / 2;
    if (cc->dims[cc->rank - 1] != half || sc->dims[sc->rank - 1] != half || cc->count != sc->count)
        return op_fail(ctx, TDM_E_RUNTIME, "the cos/sin caches' last dimension must be %lld", (long long)half);
    if (pos ? (cc->rank != 2 || pos->rank != 2 || pos->dims[0] != B || pos->dims[1] != Sn)
            : (cc->rank != 3 || cc->dims[0] != B || cc->dims[1] != Sn))
        return op_fail(ctx, TDM_E_RUNTIME, "the cos/sin caches and position_ids do not match the input");
    double *xb = NULL;
    if ((st = op_red_load_f64(ctx, x, &xb)))
        return st;
    for (int64_t b = 0; b < B; b++)
        for (int64_t s = 0; s < Sn; s++) {
            size_t crow;
            if (pos) {
                int64_t p = tensor_get_i64(pos, (size_t)(b * Sn + s));
                if (p < 0 || p >= cc->dims[0]) {
                    mem_free(xb);
                    return op_fail(ctx, TDM_E_RUNTIME, "position id %lld is outside the caches' %lld rows",
                                   (long long)p, (long long)cc->dims[0]);
                }
                crow = (size_t)p * (size_t)half;
            } else {
                crow = (size_t)(b * Sn + s) * (size_t)half;
            }
            for (int64_t h = 0; h < H; h++) {
                size_t base = x->rank == 4 ? ((size_t)(b * H + h) * (size_t)Sn + (size_t)s) * (size_t)D
                                           : ((size_t)(b * Sn + s) * (size_t)H + (size_t)h) * (size_t)D;
                double *p = xb + base;
                for (int64_t c = 0; c < half; c++) {
                    double co = tensor_get_f64(cc, crow + (size_t)c), si = tensor_get_f64(sc, crow + (size_t)c);
                    size_t i1 = inter ? (size_t)(2 * c) : (size_t)c, i2 = inter ? (size_t)(2 * c + 1) : (size_t)(c + half);
                    double x1 = p[i1], x2 = p[i2];
                    p[i1] = co * x1 - si * x2;
                    p[i2] = si * x1 + co * x2;
                }
            }
        }
    st = op_out(ctx, 0, x->dtype, x->rank, x->dims);
    if (!st)
        op_red_put_f64(ctx->out[0], 0, x->count, xb);
    mem_free(xb);
    return st;
}

/* ---- shape inference ---- */

static gr_dim att_dim_sum(gr_dim a, gr_dim b)
{
    return a.v >= 0 && b.v >= 0 && a.v <= INT64_MAX - b.v ? (gr_dim){a.v + b.v, NULL} : (gr_dim){-1, NULL};
}

/* Y: Q's shape with V's head size; present_key/value: [B, Hkv, Sp + Sk, D];
 * qk_matmul_output: [B, Hq, Sq, Sp + Sk]. Unknown where the inputs are. */
tdm_status op_infer_Attention(op_infer_ctx *ctx)
{
    const gr_type *q = ctx->n_in > 0 ? ctx->in[0] : NULL, *k = ctx->n_in > 1 ? ctx->in[1] : NULL;
    const gr_type *v = ctx->n_in > 2 ? ctx->in[2] : NULL, *pk = ctx->n_in > 4 ? ctx->in[4] : NULL;
    gr_dim unk = {-1, NULL};
    for (int o = 0; o < ctx->n_out; o++) {
        ctx->out[o].kind = TDM_KIND_TENSOR;
        ctx->out[o].dtype = o == 1 && k ? k->dtype : o == 2 && v ? v->dtype : q ? q->dtype : TDM_UNDEFINED;
    }
    if (!q || !k || !v || q->rank < 0 || q->rank != k->rank || q->rank != v->rank || (q->rank != 3 && q->rank != 4))
        return TDM_OK;
    int64_t qh = gr_attr_int(ctx->node, "q_num_heads", 0), kvh = gr_attr_int(ctx->node, "kv_num_heads", 0);
    int r4 = q->rank == 4;
    gr_dim B = q->dims[0], Sq = q->dims[r4 ? 2 : 1], Sk = k->dims[r4 ? 2 : 1];
    gr_dim Hq = r4 ? q->dims[1] : (qh > 0 ? (gr_dim){qh, NULL} : unk);
    gr_dim Hkv = r4 ? k->dims[1] : (kvh > 0 ? (gr_dim){kvh, NULL} : unk);
    gr_dim D = r4 ? k->dims[3] : (kvh > 0 && k->dims[2].v >= 0 ? (gr_dim){k->dims[2].v / kvh, NULL} : unk);
    gr_dim Dv = r4 ? v->dims[3] : (kvh > 0 && v->dims[2].v >= 0 ? (gr_dim){v->dims[2].v / kvh, NULL} : unk);
    gr_dim Skv = pk && pk->rank == 4 ? att_dim_sum(pk->dims[2], Sk) : pk ? unk : Sk;
    gr_type *y = &ctx->out[0];
    y->rank = q->rank;
    if (r4) {
        y->dims[0] = B;
        y->dims[1] = Hq;
        y->dims[2] = Sq;
        y->dims[3] = Dv;
    } else {
        y->dims[0] = B;
        y->dims[1] = Sq;
        y->dims[2] = Hq.v > 0 && Dv.v >= 0 && Dv.v <= INT64_MAX / Hq.v ? (gr_dim){Hq.v * Dv.v, NULL} : unk;
    }
    for (int o = 1; o <= 2 && o < ctx->n_out; o++) {
        gr_type *t = &ctx->out[o];
        t->rank = 4;
        t->dims[0] = B;
        t->dims[1] = Hkv;
        t->dims[2] = Skv;
        t->dims[3] = o == 1 ? D : Dv;
    }
    if (ctx->n_out > 3) {
        gr_type *t = &ctx->out[3];
        t->rank = 4;
        t->dims[0] = B;
        t->dims[1] = Hq;
        t->dims[2] = Sq;
        t->dims[3] = Skv;
    }
    return TDM_OK;
}
