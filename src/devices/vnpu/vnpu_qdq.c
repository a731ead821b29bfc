/* A QDQ group (graph/qdq.h) on a profile with "quantized": the node runs as
 * the integer hardware runs it. Its float input is the output of a
 * DequantizeLinear, so x_q = x / x_scale + x_zp exactly; the products
 * (x_q - x_zp)(w_q - w_zp) accumulate in int32 (tandem's ConvInteger and
 * MatMulInteger kernels), the bias is added at scale x_scale * w_scale[c],
 * and the sum is requantized to y_q with the QuantizeLinear's scale and
 * zero point: y = round((acc + b) * m[c]) + y_zp, m[c] = x_scale *
 * w_scale[c] / y_scale in fp32 (as onnxruntime's integer kernels compute
 * it), rounded half to even or half away from zero as the profile says,
 * saturated to y_q's type. The node's float output is y_q's dequantized
 * value (y - y_zp) * y_scale, which the Relu/Clip and QuantizeLinear after
 * it (on any device) map back to exactly y_q: the group's int8 result. */
#include "devices/vnpu/vnpu.h"
#include "core/mem.h"
#include "graph/qdq.h"
#include "ops/nn.h"

#include <math.h>
#include <string.h>

static void q_limits(tdm_dtype dt, double *lo, double *hi)
{
    *lo = dt == TDM_UINT8 ? 0 : -128;
    *hi = dt == TDM_UINT8 ? 255 : 127;
}

/* x_q from the group's float input x (the DequantizeLinear's output). */
static tdm_status requantize_input(const struct vnpu_ctx *c, op_ctx *op, const struct gr_qdq *q,
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
        double v = (double)xv[i] / (double)q->x_scale, r = nearbyint(v);
        if (!(fabs(v - r) <= 0.01) || r + zp < lo || r + zp > hi) {
            tdm_tensor_destroy(*xq);
            *xq = NULL;
            return err_set(op->err, TDM_E_RUNTIME,
                           "%s: input 0 of %s is not on its DequantizeLinear's int8 grid (scale %g): element %zu is %g",
                           c->dev_name, gr_node_label(op->node, label, sizeof label),
                           (double)q->x_scale, i, (double)xv[i]);
        }
        tensor_set_i64(*xq, i, (int64_t)(r + zp));
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

tdm_status vnpu_qdq_run(const struct vnpu_ctx *c, op_ctx *op)
{
    const struct gr_qdq *q = op->node->qdq;
    const tdm_tensor *x = op->n_in > 0 ? op->in[0] : NULL;
    int conv = strcmp(op->node->op_type, "Conv") == 0;
    char label[256];
    if (!x || x->kind != TDM_KIND_TENSOR || x->dtype != TDM_FLOAT)
        return err_set(op->err, TDM_E_RUNTIME, "%s runs %s as int8 but its input 0 is not a float tensor",
                       c->dev_name, gr_node_label(op->node, label, sizeof label));
    tdm_tensor *xq = NULL, *acc = NULL;
    tdm_status st = requantize_input(c, op, q, x, &xq);
    if (!st)
        st = accumulate(op, q, xq, conv, &acc);
    tdm_tensor_destroy(xq);
    if (st)
        return st;
    int64_t ch = acc->rank >= 2 ? acc->dims[conv ? 1 : acc->rank - 1] : 1;
    if (ch != q->channels) {
        tdm_tensor_destroy(acc);
        return err_set(op->err, TDM_E_RUNTIME, "%s: %s has %lld output channels, its weights %lld", c->dev_name,
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
        double r = (c->q_round == VNPU_ROUND_HALF_AWAY ? round(v) : nearbyint(v)) + yz;
        r = r < lo ? lo : r > hi ? hi : r;
        y[i] = (float)(r - yz) * q->y_scale;
    }
    mem_free(m);
    tdm_tensor_destroy(acc);
    return TDM_OK;
}
