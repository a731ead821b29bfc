/* Run and infer hooks of the tensor ops (see ops.def). */
#ifndef TDM_OPS_TENSOR_H
#define TDM_OPS_TENSOR_H

#include "ops/op.h"

tdm_status op_run_Identity(op_ctx *ctx);

#endif
