/* Run and infer hooks of the elementwise ops (see ops.def). */
#ifndef TDM_OPS_ELEMENTWISE_H
#define TDM_OPS_ELEMENTWISE_H

#include "ops/op.h"

tdm_status op_run_Add(op_ctx *ctx);
tdm_status op_run_Relu(op_ctx *ctx);

#endif
