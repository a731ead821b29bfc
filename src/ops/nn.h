/* Run and infer hooks of the nn ops (see ops.def), the single-precision
 * GEMM every float32 Conv/MatMul/Gemm goes through, and the helpers the
 * nn_*.c files share. */
#ifndef TDM_OPS_NN_H
#define TDM_OPS_NN_H

#include "ops/op.h"

#include <stddef.h>
#include <stdint.h>

/* ---- GEMM (ops/nn_gemm.c) ---- */

/* C = alpha * op(A) * op(B) + beta * C, row-major, op(X) = X or X^T.
 * op(A) is M x K, op(B) is K x N, C is M x N; lda/ldb/ldc are the row
 * strides (in elements) of A, B and C as stored. When beta == 0, C is
 * written without being read. Cache-blocked with packed panels; the one
 * float32 GEMM of tandem. Returns 0, or -1 when the packing buffers cannot
 * be allocated (C is then unspecified). */
int op_sgemm(int trans_a, int trans_b, size_t m, size_t n, size_t k, float alpha, const float *a, size_t lda,
             const float *b, size_t ldb, float beta, float *c, size_t ldc);

/* ---- helpers shared by the nn files (ops/nn_util.c) ---- */

/* Input i, or NULL when omitted or beyond the node's inputs. */
const tdm_tensor *op_nn_in(const op_ctx *ctx, int i);

/* A float copy of a float/double/float16/bfloat16 (or integer) tensor's
 * data (count elements), allocated with mem_alloc; NULL on out of memory. */
float *op_nn_to_f32(const tdm_tensor *t);
/* Writes count floats into t's data converted to its element type. */
void op_nn_from_f32(tdm_tensor *t, const float *src);

/* Geometry of a convolution or pooling window over up to 3 spatial dims,
 * stored right-aligned in 3 slots (a 1-D op has d = h = 1). */
#define NN_MAX_SP 3
typedef struct nn_geom {
    int nsp;                  /* spatial rank as in the model (1..3) */
    int64_t in[NN_MAX_SP];    /* input spatial size (-1 unknown, infer only) */
    int64_t k[NN_MAX_SP];     /* kernel */
    int64_t s[NN_MAX_SP];     /* strides */
    int64_t d[NN_MAX_SP];     /* dilations */
    int64_t pb[NN_MAX_SP];    /* pads at the beginning */
    int64_t pe[NN_MAX_SP];    /* pads at the end */
    int64_t out[NN_MAX_SP];   /* output spatial size (-1 unknown) */
} nn_geom;

/* Fills g from the node's kernel_shape (or kernel, when kernel != NULL and
 * the attribute is absent), strides, dilations (when use_dil), pads,
 * auto_pad and (when use_ceil) ceil_mode, for spatial input sizes in[nsp]
 * (-1 = unknown). Output sizes follow the Conv/pool rules. Fails with a
 * sentence naming the attribute. e may be NULL (infer hooks). */
tdm_status op_nn_geom(tdm_err *e, const gr_node *node, int nsp, const int64_t *in, const int64_t *kernel,
                      int use_dil, int use_ceil, nn_geom *g);

/* ---- run hooks ---- */

tdm_status op_run_MatMul(op_ctx *ctx);
tdm_status op_run_Gemm(op_ctx *ctx);
tdm_status op_run_MatMulInteger(op_ctx *ctx);
tdm_status op_run_QLinearMatMul(op_ctx *ctx);

tdm_status op_run_Conv(op_ctx *ctx);
tdm_status op_run_ConvTranspose(op_ctx *ctx);
tdm_status op_run_ConvInteger(op_ctx *ctx);
tdm_status op_run_QLinearConv(op_ctx *ctx);

tdm_status op_run_MaxPool(op_ctx *ctx);
tdm_status op_run_AveragePool(op_ctx *ctx);
tdm_status op_run_LpPool(op_ctx *ctx);
tdm_status op_run_GlobalAveragePool(op_ctx *ctx);
tdm_status op_run_GlobalMaxPool(op_ctx *ctx);
tdm_status op_run_GlobalLpPool(op_ctx *ctx);
tdm_status op_run_MaxUnpool(op_ctx *ctx);
tdm_status op_run_MaxRoiPool(op_ctx *ctx);
tdm_status op_run_RoiAlign(op_ctx *ctx);

tdm_status op_run_QuantizeLinear(op_ctx *ctx);
tdm_status op_run_DequantizeLinear(op_ctx *ctx);
tdm_status op_run_DynamicQuantizeLinear(op_ctx *ctx);

tdm_status op_run_RNN(op_ctx *ctx);
tdm_status op_run_GRU(op_ctx *ctx);
tdm_status op_run_LSTM(op_ctx *ctx);

tdm_status op_run_GridSample(op_ctx *ctx);
tdm_status op_run_NonMaxSuppression(op_ctx *ctx);

/* ---- infer hooks ---- */

tdm_status op_infer_MatMul(op_infer_ctx *ctx);
tdm_status op_infer_Gemm(op_infer_ctx *ctx);
tdm_status op_infer_MatMulInteger(op_infer_ctx *ctx);
tdm_status op_infer_QLinearMatMul(op_infer_ctx *ctx);
tdm_status op_infer_Conv(op_infer_ctx *ctx);
tdm_status op_infer_ConvTranspose(op_infer_ctx *ctx);
tdm_status op_infer_ConvInteger(op_infer_ctx *ctx);
tdm_status op_infer_QLinearConv(op_infer_ctx *ctx);
tdm_status op_infer_Pool(op_infer_ctx *ctx);        /* MaxPool, AveragePool, LpPool */
tdm_status op_infer_GlobalPool(op_infer_ctx *ctx);  /* Global*Pool */
tdm_status op_infer_QuantizeLinear(op_infer_ctx *ctx);
tdm_status op_infer_DequantizeLinear(op_infer_ctx *ctx);
tdm_status op_infer_DynamicQuantizeLinear(op_infer_ctx *ctx);
tdm_status op_infer_GridSample(op_infer_ctx *ctx);
tdm_status op_infer_RoiAlign(op_infer_ctx *ctx);

#endif
