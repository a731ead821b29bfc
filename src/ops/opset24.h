/* Run and infer hooks of the operators of opsets 24 to 28 (see ops.def). */
#ifndef TDM_OPS_OPSET24_H
#define TDM_OPS_OPSET24_H

#include "ops/op.h"

/* opset24.c */
tdm_status op_run_BitCast(op_ctx *ctx);
tdm_status op_infer_BitCast(op_infer_ctx *ctx);
tdm_status op_run_SwiGLU(op_ctx *ctx);
tdm_status op_run_TensorScatter(op_ctx *ctx);
tdm_status op_run_CausalConvWithState(op_ctx *ctx);
tdm_status op_infer_CausalConvWithState(op_infer_ctx *ctx);
tdm_status op_run_LinearAttention(op_ctx *ctx);
tdm_status op_infer_LinearAttention(op_infer_ctx *ctx);
tdm_status op_run_FlexAttention(op_ctx *ctx);
tdm_status op_infer_FlexAttention(op_infer_ctx *ctx);

#endif
