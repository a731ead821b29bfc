/* A QDQ group's integer form (struct gr_qdq: graph/qdq.h marks the groups,
 * node->qdq carries it) and the integer run of a group, shared by the cpu
 * device and the vnpu profiles that compute in int8 (qdq_run.c).
 *
 * op_qdq_run runs the node (a Conv, MatMul or Gemm with node->qdq, not
 * wrapped) as the integer hardware and onnxruntime's fused kernels run it:
 * its float input is the output of a DequantizeLinear, so x_q = x / x_scale
 * + x_zp exactly; the products (x_q - x_zp)(w_q - w_zp) accumulate in int32
 * (the ConvInteger and MatMulInteger kernels), the bias is added at scale
 * x_scale * w_scale[c], and the sum is requantized to y_q with the
 * QuantizeLinear's scale and zero point: y = round((acc + b) * m[c]) + y_zp,
 * m[c] = x_scale * w_scale[c] / y_scale in fp32 (as onnxruntime computes
 * it), rounded half to even (ONNX QuantizeLinear's rule) or half away from
 * zero, saturated to y_q's type. The node's float output is y_q's
 * dequantized value (y - y_zp) * y_scale, which the Relu/Clip and
 * QuantizeLinear after it map back to exactly y_q. who names the device in
 * sentences ("cpu", "vnpu:rk3588"). */
#ifndef TDM_OPS_QDQ_H
#define TDM_OPS_QDQ_H

#include "ops/op.h"

struct gr_qdq {
    /* 1: another op wrapped the same way (Add, MaxPool, GlobalAveragePool,
     * ...: every float input from a DequantizeLinear, the output read only by
     * a QuantizeLinear), which an integer device computes in its quantized
     * domain at fp32 or wider, not at its float precision; no field below is
     * set but q_node */
    int wrapped;
    /* input 0: float = (x_q - x_zp) * x_scale, x_q of x_zp's type */
    float x_scale;
    tdm_tensor *x_zp;     /* scalar int8/uint8 (uint8 0 when the model omits it) */
    /* weights as the integer kernel reads them: Conv [M, C/group, k...];
     * MatMul and Gemm B as [K, N] (a Gemm's transB undone) */
    tdm_tensor *w;        /* int8 or uint8 */
    tdm_tensor *w_zp;     /* of w's type: 1 or channels values */
    float *w_scale;       /* channels values (a per-tensor scale repeated) */
    int32_t *bias;        /* channels values at scale x_scale * w_scale[c], or NULL */
    int64_t channels;     /* output channels: Conv M, MatMul/Gemm N */
    /* output: the QuantizeLinear the node's output reaches */
    float y_scale;
    tdm_tensor *y_zp;     /* scalar int8/uint8: its type is y_q's */
    char *act;            /* "Relu" or "Clip" between node and QuantizeLinear, or NULL */
    char *q_node;         /* the QuantizeLinear's name */
};

enum { OP_ROUND_HALF_EVEN = 0, OP_ROUND_HALF_AWAY = 1 };

tdm_status op_qdq_run(op_ctx *op, int rounding, const char *who);

#endif
