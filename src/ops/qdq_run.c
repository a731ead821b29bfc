/* The integer run of a QDQ group (ops/qdq.h). */
#include "ops/qdq.h"
#include "core/mem.h"
#include "ops/nn.h"

#include <math.h>
#include <string.h>

static void q_limits(tdm_dtype dt, double *lo, double *hi)
{
    *lo = dt == TDM_UINT8 ? 0 : -128;
    *hi = dt == TDM_UINT8 ? 255 : 127;
}

/* x_q from the group's float input x, the DequantizeLinear's output: on its
 * grid when the DequantizeLinear ran in float32 (x_q exactly), a fraction of
 * a step off when it ran on a device that rounds floats to fp16 (at most
 * 128 steps x 2^-11: the nearest grid point is x_q again); rounded to the
 * nearest and saturated as QuantizeLinear would. NaN has no x_q: refused. */
static tdm_status requantize_input(const char *who, op_ctx *op, const struct gr_qdq *q,
                                   const tdm_tensor *x, tdm_tensor **xq)
{
    char label[256];
    double lo, hi, zp = tensor_get_f64(q->x_zp, 0);
    q_limits(q->x_zp->dtype, &lo, &hi);
    tdm_status st = tensor_new(op->err, q->x_zp->dtype, x->rank, x->dims, xq);
    if (st)
        return st;
    const float *xv = x->data;
    for (size_t i = 0; i < x->count; i++) {
        double r = nearbyint((double)xv[i] / (double)q->x_scale) + zp;
        if (r != r) {
            tdm_tensor_destroy(*xq);
            *xq = NULL;
            return err_set(op->err, TDM_E_RUNTIME, "%s: input 0 of %s has NaN at element %zu, which int8 cannot hold",
                           who, gr_node_label(op->node, label, sizeof label), i);
        }
        tensor_set_i64(*xq, i, (int64_t)(r < lo ? lo : r > hi ? hi : r));
    }
    return TDM_OK;
}

/* int32 accumulations of the group into *acc (ConvInteger / MatMulInteger). */
static tdm_status accumulate(op_ctx *op, const struct gr_qdq *q, const tdm_tensor *xq, int conv, tdm_tensor **acc)
{
    const tdm_tensor *in[4] = {xq, q->w, q->x_zp, q->w_zp};
    tdm_tensor *out[1] = {NULL};
    tdm_status st = op_out_shells(op->err, 1, out);
    if (st)
        return st;
    op_ctx ic;
    op_ctx_init(&ic, op->node, in, out, op->err, NULL, op->threads, op->rng);
    ic.n_in = 4;
    ic.n_out = 1;
    st = conv ? op_run_ConvInteger(&ic) : op_run_MatMulInteger(&ic);
    if (st || out[0]->dtype != TDM_INT32) {
        tdm_tensor_destroy(out[0]);
        return st ? st : err_set(op->err, TDM_E_RUNTIME, "the integer kernel gave no int32 accumulation");
    }
    *acc = out[0];
    return TDM_OK;
}

tdm_status op_qdq_run(op_ctx *op, int rounding, const char *who)
{
    const struct gr_qdq *q = op->node->qdq;
    const tdm_tensor *x = op->n_in > 0 ? op->in[0] : NULL;
    int conv = strcmp(op->node->op_type, "Conv") == 0;
    char label[256];
    if (!x || x->kind != TDM_KIND_TENSOR || x->dtype != TDM_FLOAT)
        return err_set(op->err, TDM_E_RUNTIME, "%s runs %s as int8 but its input 0 is not a float tensor",
                       who, gr_node_label(op->node, label, sizeof label));
    tdm_tensor *xq = NULL, *acc = NULL;
    tdm_status st = requantize_input(who, op, q, x, &xq);
    if (!st)
        st = accumulate(op, q, xq, conv, &acc);
    tdm_tensor_destroy(xq);
    if (st)
        return st;
    int64_t ch = acc->rank >= 2 ? acc->dims[conv ? 1 : acc->rank - 1] : 1;
    if (ch != q->channels) {
        tdm_tensor_destroy(acc);
        return err_set(op->err, TDM_E_RUNTIME, "%s: %s has %lld output channels, its weights %lld", who,
                       gr_node_label(op->node, label, sizeof label), (long long)ch, (long long)q->channels);
    }
    size_t inner = 1; /* elements per channel run: Conv's spatial size, 1 for MatMul/Gemm */
    for (int d = 2; conv && d < acc->rank; d++)
        inner *= (size_t)acc->dims[d];
    float *m = mem_alloc((size_t)ch * sizeof *m + 1);
    if (!m || (st = op_out(op, 0, TDM_FLOAT, acc->rank, acc->dims)) != TDM_OK) {
        mem_free(m);
        tdm_tensor_destroy(acc);
        return st ? st : err_set(op->err, TDM_E_NOMEM, "out of memory");
    }
    for (int64_t k = 0; k < ch; k++)
        m[k] = q->x_scale * q->w_scale[k] / q->y_scale; /* fp32, as onnxruntime's requantization */
    double lo, hi, yz = tensor_get_f64(q->y_zp, 0);
    q_limits(q->y_zp->dtype, &lo, &hi);
    const int32_t *a = acc->data;
    float *y = op->out[0]->data;
    for (size_t i = 0; i < acc->count; i++) {
        size_t k = (size_t)(conv ? (int64_t)(i / inner) % ch : (int64_t)(i % (size_t)ch));
        int64_t s = (int64_t)a[i] + (q->bias ? q->bias[k] : 0);
        double v = (double)((float)s * m[k]);
        double r = (rounding == OP_ROUND_HALF_AWAY ? round(v) : nearbyint(v)) + yz;
        r = r < lo ? lo : r > hi ? hi : r;
        y[i] = (float)(r - yz) * q->y_scale;
    }
    mem_free(m);
    tdm_tensor_destroy(acc);
    return TDM_OK;
}
