/* QDQ groups (qdq.h): recognition before constant folding. */
#include "graph/qdq.h"
#include "core/mem.h"

#include <math.h>
#include <string.h>

static int is_op(const gr_node *n, const char *op) { return !*n->domain && strcmp(n->op_type, op) == 0; }

static int is_q8(tdm_dtype dt) { return dt == TDM_INT8 || dt == TDM_UINT8; }

/* The constant value of v (an initializer or folded value), or NULL. */
static const tdm_tensor *cval(const gr_graph *g, int v)
{
    return v >= 0 && g->values[v].init && !g->values[v].is_input ? g->values[v].init : NULL;
}

/* Input i of n (NULL when omitted or absent). */
static int in_id(const gr_node *n, int i) { return i < n->n_inputs ? n->inputs[i] : -1; }

/* The node producing value v when it is a DequantizeLinear in the plain
 * form (no block_size, float output), else NULL. */
static const gr_node *dq_of(const gr_graph *g, int v)
{
    if (v < 0 || g->values[v].producer < 0)
        return NULL;
    const gr_node *n = &g->nodes[g->values[v].producer];
    if (!is_op(n, "DequantizeLinear") || n->n_inputs < 2 || gr_attr_int(n, "block_size", 0) != 0 ||
        gr_attr_int(n, "output_dtype", 0) != 0)
        return NULL;
    const tdm_tensor *s = cval(g, in_id(n, 1));
    if (!s || s->dtype != TDM_FLOAT || g->values[n->outputs[0]].type.dtype != TDM_FLOAT)
        return NULL;
    return n;
}

/* The only node reading value v (v not a graph output), or NULL. */
static const gr_node *sole_consumer(const gr_graph *g, int v)
{
    if (v < 0 || g->values[v].is_output || g->values[v].n_consumers != 1)
        return NULL;
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_inputs; k++)
            if (g->nodes[i].inputs[k] == v)
                return &g->nodes[i];
    return NULL;
}

/* A scalar zero point: zp's value (a new dt 0 when zp is NULL). */
static tdm_tensor *scalar_zp(const tdm_tensor *zp, tdm_dtype dt)
{
    tdm_tensor *t = NULL;
    if (tensor_new(NULL, zp ? zp->dtype : dt, 0, NULL, &t) != TDM_OK)
        return NULL;
    tensor_set_i64(t, 0, zp ? (int64_t)tensor_get_f64(zp, 0) : 0);
    return t;
}

void gr_qdq_free(struct gr_qdq *q)
{
    if (!q)
        return;
    tdm_tensor_destroy(q->x_zp);
    tdm_tensor_destroy(q->w);
    tdm_tensor_destroy(q->w_zp);
    tdm_tensor_destroy(q->y_zp);
    mem_free(q->w_scale);
    mem_free(q->bias);
    mem_free(q->act);
    mem_free(q->q_node);
    mem_free(q);
}

static void *dup_bytes(const void *p, size_t n, int *bad)
{
    if (!p)
        return NULL;
    void *d = mem_alloc(n + 1);
    if (!d)
        *bad = 1;
    else
        memcpy(d, p, n);
    return d;
}

struct gr_qdq *gr_qdq_clone(const struct gr_qdq *q)
{
    struct gr_qdq *d = mem_calloc(1, sizeof *d);
    int bad = !d;
    if (bad)
        return NULL;
    *d = *q;
    d->x_zp = d->w = d->w_zp = d->y_zp = NULL;
    d->w_scale = dup_bytes(q->w_scale, (size_t)q->channels * sizeof *q->w_scale, &bad);
    d->bias = dup_bytes(q->bias, (size_t)q->channels * sizeof *q->bias, &bad);
    d->act = q->act ? mem_strdup(q->act) : NULL;
    d->q_node = q->q_node ? mem_strdup(q->q_node) : NULL;
    bad |= (q->act && !d->act) || (q->q_node && !d->q_node);
    bad |= (q->x_zp && tensor_clone(NULL, q->x_zp, &d->x_zp) != TDM_OK) ||
           (q->w && tensor_clone(NULL, q->w, &d->w) != TDM_OK) ||
           (q->w_zp && tensor_clone(NULL, q->w_zp, &d->w_zp) != TDM_OK) ||
           (q->y_zp && tensor_clone(NULL, q->y_zp, &d->y_zp) != TDM_OK);
    if (bad) {
        gr_qdq_free(d);
        return NULL;
    }
    return d;
}

/* The weights' DequantizeLinear w (constant int8/uint8 input of rank 2 or
 * more), its per-channel axis for `axis` (scale and zero point hold 1 or
 * dims[axis] values) into q: w as is, or transposed from [N, K] to [K, N]
 * when transpose (a Gemm with transB). 0: does not match; -1: no memory. */
static int take_weights(const gr_graph *g, const gr_node *dq, int axis, int transpose, struct gr_qdq *q)
{
    const tdm_tensor *w = cval(g, in_id(dq, 0)), *s = cval(g, in_id(dq, 1)), *zp = cval(g, in_id(dq, 2));
    if (!w || !is_q8(w->dtype) || w->rank < 2 || (zp && zp->dtype != w->dtype))
        return 0;
    int64_t a = gr_attr_int(dq, "axis", 1);
    a = a < 0 ? a + w->rank : a;
    int64_t ch = w->dims[axis];
    if (s->count != 1 && (s->count != (size_t)ch || a != axis))
        return 0;
    if (zp && zp->count != 1 && (zp->count != (size_t)ch || a != axis))
        return 0;
    q->channels = ch;
    if (!(q->w_scale = mem_alloc((size_t)ch * sizeof *q->w_scale + 1)))
        return -1;
    for (int64_t c = 0; c < ch; c++)
        q->w_scale[c] = (float)tensor_get_f64(s, s->count > 1 ? (size_t)c : 0);
    if (zp ? tensor_clone(NULL, zp, &q->w_zp) != TDM_OK : !(q->w_zp = scalar_zp(NULL, w->dtype)))
        return -1;
    if (!transpose)
        return tensor_clone(NULL, w, &q->w) == TDM_OK ? 1 : -1;
    if (w->rank != 2)
        return 0;
    int64_t n = w->dims[0], k = w->dims[1], dims[2] = {k, n};
    if (tensor_new(NULL, w->dtype, 2, dims, &q->w) != TDM_OK)
        return -1;
    const uint8_t *src = w->data;
    uint8_t *dst = q->w->data;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < k; j++)
            dst[j * n + i] = src[i * k + j];
    return 1;
}

/* The bias value b (a DequantizeLinear of constants, or a float constant)
 * at scale x_scale * w_scale[c]: 0 does not match, -1 no memory. */
static int take_bias(const gr_graph *g, int b, struct gr_qdq *q)
{
    const gr_node *dq = dq_of(g, b);
    const tdm_tensor *bq = dq ? cval(g, in_id(dq, 0)) : cval(g, b);
    const tdm_tensor *bs = dq ? cval(g, in_id(dq, 1)) : NULL, *bzp = dq ? cval(g, in_id(dq, 2)) : NULL;
    if (!bq || (dq && (bq->dtype != TDM_INT32 || (bzp && bzp->dtype != TDM_INT32))) ||
        (!dq && bq->dtype != TDM_FLOAT))
        return 0;
    if (bq->count != 1 && bq->count != (size_t)q->channels)
        return 0;
    if (bs && bs->count != 1 && bs->count != bq->count)
        return 0;
    if (bzp && bzp->count != 1 && bzp->count != bq->count)
        return 0;
    if (!(q->bias = mem_alloc((size_t)q->channels * sizeof *q->bias + 1)))
        return -1;
    for (int64_t c = 0; c < q->channels; c++) {
        size_t i = bq->count > 1 ? (size_t)c : 0;
        double v = tensor_get_f64(bq, i);
        if (dq)
            v = (v - (bzp ? tensor_get_f64(bzp, bzp->count > 1 ? i : 0) : 0)) *
                (double)(float)tensor_get_f64(bs, bs->count > 1 ? i : 0);
        double r = nearbyint(v / ((double)q->x_scale * (double)q->w_scale[c]));
        if (!(fabs(r) < 2147483647.0))
            return 0;
        q->bias[c] = (int32_t)r;
    }
    return 1;
}

/* A node whose float inputs all come from DequantizeLinear and whose only
 * output only a QuantizeLinear reads (q->wrapped). */
static tdm_status mark_wrapped(tdm_err *e, const gr_graph *g, const gr_node *n, struct gr_qdq **out)
{
    int floats = 0;
    if (n->n_outputs != 1 || *n->domain)
        return TDM_OK;
    for (int i = 0; i < n->n_inputs; i++) {
        int v = n->inputs[i];
        if (v < 0 || g->values[v].type.dtype != TDM_FLOAT)
            continue;
        if (!dq_of(g, v))
            return TDM_OK;
        floats++;
    }
    const gr_node *qn = sole_consumer(g, n->outputs[0]);
    if (!floats || !qn || !is_op(qn, "QuantizeLinear"))
        return TDM_OK;
    struct gr_qdq *q = mem_calloc(1, sizeof *q);
    if (!q || !(q->q_node = mem_strdup(qn->name))) {
        mem_free(q);
        return err_set(e, TDM_E_NOMEM, "out of memory");
    }
    q->wrapped = 1;
    *out = q;
    return TDM_OK;
}

/* Node n of g as a QDQ group into *out (NULL when it is not one). */
static tdm_status mark_one(tdm_err *e, const gr_graph *g, const gr_node *n, struct gr_qdq **out)
{
    *out = NULL;
    int conv = is_op(n, "Conv"), mm = is_op(n, "MatMul"), gemm = is_op(n, "Gemm");
    if (n->n_outputs < 1 || is_op(n, "DequantizeLinear") || is_op(n, "QuantizeLinear"))
        return TDM_OK;
    if (!conv && !mm && !gemm)
        return mark_wrapped(e, g, n, out);
    if (gemm && (gr_attr_int(n, "transA", 0) != 0 || gr_attr_float(n, "alpha", 1.0f) != 1.0f ||
                 gr_attr_float(n, "beta", 1.0f) != 1.0f))
        return TDM_OK;
    const gr_node *dx = dq_of(g, in_id(n, 0)), *dw = dq_of(g, in_id(n, 1));
    if (!dx || !dw)
        return TDM_OK;
    const tdm_tensor *xs = cval(g, in_id(dx, 1)), *xzp = cval(g, in_id(dx, 2));
    tdm_dtype xdt = g->values[in_id(dx, 0)].type.dtype;
    if (xs->count != 1 || !is_q8(xdt) || (xzp && (xzp->count != 1 || xzp->dtype != xdt)))
        return TDM_OK;
    /* output: [Relu | Clip] then QuantizeLinear, each the sole reader */
    const gr_node *act = NULL, *qn = sole_consumer(g, n->outputs[0]);
    if (qn && (is_op(qn, "Relu") || is_op(qn, "Clip"))) {
        act = qn;
        qn = sole_consumer(g, act->outputs[0]);
    }
    if (!qn || !is_op(qn, "QuantizeLinear") || qn->n_inputs < 2 || gr_attr_int(qn, "saturate", 1) == 0)
        return TDM_OK;
    const tdm_tensor *ys = cval(g, in_id(qn, 1)), *yzp = cval(g, in_id(qn, 2));
    tdm_dtype ydt = yzp ? yzp->dtype : (tdm_dtype)gr_attr_int(qn, "output_dtype", TDM_UINT8);
    if (!ys || ys->dtype != TDM_FLOAT || ys->count != 1 || (yzp && yzp->count != 1) || !is_q8(ydt) ||
        (yzp && gr_attr_int(qn, "output_dtype", 0) != 0 && gr_attr_int(qn, "output_dtype", 0) != (int64_t)ydt))
        return TDM_OK;

    struct gr_qdq *q = mem_calloc(1, sizeof *q);
    if (!q)
        return err_set(e, TDM_E_NOMEM, "out of memory");
    int r = 1;
    q->x_scale = *(const float *)xs->data;
    q->y_scale = *(const float *)ys->data;
    if (!(q->x_zp = scalar_zp(xzp, xdt)) || !(q->y_zp = scalar_zp(yzp, ydt)))
        r = -1;
    if (r > 0 && !(q->x_scale > 0 && q->y_scale > 0 && isfinite(q->x_scale) && isfinite(q->y_scale)))
        r = 0;
    if (r > 0) {
        int trans = gemm && gr_attr_int(n, "transB", 0) != 0;
        r = take_weights(g, dw, conv ? 0 : trans ? 0 : 1, trans, q);
        if (r > 0 && mm && q->w->rank != 2)
            r = 0;
    }
    if (r > 0 && !mm && in_id(n, 2) >= 0)
        r = take_bias(g, in_id(n, 2), q);
    if (r > 0 && ((act && !(q->act = mem_strdup(act->op_type))) || !(q->q_node = mem_strdup(qn->name))))
        r = -1;
    if (r <= 0) {
        gr_qdq_free(q);
        return r < 0 ? err_set(e, TDM_E_NOMEM, "out of memory") : TDM_OK;
    }
    *out = q;
    return TDM_OK;
}

tdm_status gr_qdq_mark(tdm_err *e, gr_graph *g)
{
    for (int i = 0; i < g->n_nodes; i++) {
        struct gr_qdq *q;
        tdm_status st = mark_one(e, g, &g->nodes[i], &q);
        if (st)
            return st;
        gr_qdq_free(g->nodes[i].qdq);
        g->nodes[i].qdq = q;
    }
    return TDM_OK;
}
