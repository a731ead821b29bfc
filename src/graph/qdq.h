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
#include "ops/qdq.h"


/* Marks every QDQ group of g's nodes (main graph only). Fails only when
 * out of memory; a node that does not match the pattern exactly is left
 * unmarked. Types must have been inferred. */
tdm_status gr_qdq_mark(tdm_err *e, gr_graph *g);

/* A deep copy of q (NULL when out of memory); gr_qdq_free(NULL) is a no-op. */
struct gr_qdq *gr_qdq_clone(const struct gr_qdq *q);
void gr_qdq_free(struct gr_qdq *q);

#endif
