/* Run and infer hooks of the reduce ops (see ops.def), and the helpers the
 * reduce family's files share (reduce_util.c). */
#ifndef TDM_OPS_REDUCE_H
#define TDM_OPS_REDUCE_H

#include "ops/op.h"

/* ---- reductions (reduce_reduce.c) ---- */
tdm_status op_run_ReduceSum(op_ctx *ctx);
tdm_status op_run_ReduceMean(op_ctx *ctx);
tdm_status op_run_ReduceMax(op_ctx *ctx);
tdm_status op_run_ReduceMin(op_ctx *ctx);
tdm_status op_run_ReduceProd(op_ctx *ctx);
tdm_status op_run_ReduceL1(op_ctx *ctx);
tdm_status op_run_ReduceL2(op_ctx *ctx);
tdm_status op_run_ReduceLogSum(op_ctx *ctx);
tdm_status op_run_ReduceLogSumExp(op_ctx *ctx);
tdm_status op_run_ReduceSumSquare(op_ctx *ctx);
tdm_status op_infer_reduce(op_infer_ctx *ctx);
tdm_status op_run_ArgMax(op_ctx *ctx);
tdm_status op_run_ArgMin(op_ctx *ctx);
tdm_status op_infer_arg(op_infer_ctx *ctx);

/* ---- softmax family, CumSum, TopK (reduce_softmax.c) ---- */
tdm_status op_run_Softmax(op_ctx *ctx);
tdm_status op_run_LogSoftmax(op_ctx *ctx);
tdm_status op_run_Hardmax(op_ctx *ctx);
tdm_status op_run_CumSum(op_ctx *ctx);
tdm_status op_run_CumProd(op_ctx *ctx);
tdm_status op_run_TopK(op_ctx *ctx);
tdm_status op_infer_TopK(op_infer_ctx *ctx);

/* ---- normalisations (reduce_norm.c) ---- */
tdm_status op_run_BatchNormalization(op_ctx *ctx);
tdm_status op_infer_BatchNormalization(op_infer_ctx *ctx);
tdm_status op_run_InstanceNormalization(op_ctx *ctx);
tdm_status op_run_LayerNormalization(op_ctx *ctx);
tdm_status op_run_RMSNormalization(op_ctx *ctx);
tdm_status op_run_GroupNormalization(op_ctx *ctx);
tdm_status op_infer_LayerNormalization(op_infer_ctx *ctx);
tdm_status op_run_LpNormalization(op_ctx *ctx);
tdm_status op_run_MeanVarianceNormalization(op_ctx *ctx);
tdm_status op_run_LRN(op_ctx *ctx);

/* ---- losses (reduce_loss.c) ---- */
tdm_status op_run_NegativeLogLikelihoodLoss(op_ctx *ctx);
tdm_status op_run_SoftmaxCrossEntropyLoss(op_ctx *ctx);
tdm_status op_infer_loss(op_infer_ctx *ctx);

/* ---- Einsum, Det (reduce_einsum.c) ---- */
tdm_status op_run_Einsum(op_ctx *ctx);
tdm_status op_infer_Einsum(op_infer_ctx *ctx);
tdm_status op_run_Det(op_ctx *ctx);
tdm_status op_infer_Det(op_infer_ctx *ctx);

/* ---- shared helpers (reduce_util.c) ---- */

/* Converts n elements of t from element off on into dst as double
 * (numeric and bool types). */
void op_red_row_f64(const tdm_tensor *t, size_t off, size_t n, double *dst);
/* Converts n elements as order-preserving int64 keys: integers as
 * themselves, uint64 with the top bit flipped (so that signed comparison
 * orders them), bool as 0/1. */
void op_red_row_key(const tdm_tensor *t, size_t off, size_t n, int64_t *dst);
/* Converts n integer elements (wrapping) to int64. */
void op_red_row_i64(const tdm_tensor *t, size_t off, size_t n, int64_t *dst);
/* Writes n doubles into t from element off on, converted to t's type
 * (floats rounded, integers truncated and saturated, NaN to 0). */
void op_red_put_f64(tdm_tensor *t, size_t off, size_t n, const double *src);
/* Writes n int64 into t (wrapping to narrower integers). */
void op_red_put_i64(tdm_tensor *t, size_t off, size_t n, const int64_t *src);
/* A new array of t's elements as double (free with mem_free). */
tdm_status op_red_load_f64(op_ctx *ctx, const tdm_tensor *t, double **out);
/* A new zeroed array of n doubles (at least one). */
tdm_status op_red_alloc_f64(op_ctx *ctx, size_t n, double **out);
/* Product of dims[from..to) with overflow check. */
tdm_status op_red_prod(op_ctx *ctx, const int64_t *dims, int from, int to, size_t *out);
/* The input is a tensor of one of the types in mask (DT_BIT). */
tdm_status op_red_check(op_ctx *ctx, int i, uint32_t mask);

/* A walk over a tensor in C order, by rows of its (merged) innermost
 * dimension, keeping the offset into a reduced tensor: the dimensions
 * flagged in `red` map to offset 0 there. */
typedef struct op_red_iter {
    int m;                        /* merged rank (>= 1) */
    int64_t d[TDM_MAX_RANK];      /* merged dims */
    int64_t ostr[TDM_MAX_RANK];   /* output strides, 0 on reduced dims */
    int64_t idx[TDM_MAX_RANK];
    size_t rows;                  /* rows to visit (0 for an empty tensor) */
    size_t n;                     /* row length */
    int inner_red;                /* the row runs along a reduced dimension */
    size_t in_off, out_off;       /* of the current row */
} op_red_iter;

/* red[k] != 0 marks dimension k as reduced. */
void op_red_iter_init(op_red_iter *it, int rank, const int64_t *dims, const unsigned char *red);
void op_red_iter_next(op_red_iter *it);

#endif
