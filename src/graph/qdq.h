/* QDQ groups: a Conv, MatMul or Gemm between DequantizeLinear and
 * QuantizeLinear nodes, as onnxruntime's quantize_static writes them —
 *
 *   DequantizeLinear(x_q) ─┐
 *   DequantizeLinear(w_q) ─┼─► Conv / MatMul / Gemm ─► [Relu | Clip] ─► QuantizeLinear ─► y_q
 *   DequantizeLinear(b_q) ─┘   (bias optional)
 *
 * gr_qdq_mark (called by model_build before constant folding, which turns
 * the weights' DequantizeLinear into float constants) records on each such
 * node what an integer device needs to run the group as int8 × int8 → int32
 * with one requantization: the integer weights and their scales, the input's
 * and the output's scale and zero point, the bias at scale x_scale × w_scale.
 * The graph itself is not changed: cpu still runs the float ops as written;
 * a device that computes in int8 (a vnpu profile's "quantized") reads
 * node->qdq. A node's qdq is owned by the node (gr_node_clear frees it,
 * gr_model_clone copies it). */
#ifndef TDM_GRAPH_QDQ_H
#define TDM_GRAPH_QDQ_H

#include "graph/graph.h"

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

/* Marks every QDQ group of g's nodes (main graph only). Fails only when
 * out of memory; a node that does not match the pattern exactly is left
 * unmarked. Types must have been inferred. */
tdm_status gr_qdq_mark(tdm_err *e, gr_graph *g);

/* A deep copy of q (NULL when out of memory); gr_qdq_free(NULL) is a no-op. */
struct gr_qdq *gr_qdq_clone(const struct gr_qdq *q);
void gr_qdq_free(struct gr_qdq *q);

#endif
