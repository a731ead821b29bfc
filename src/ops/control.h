/* Run and infer hooks of the control-flow, sequence, optional, random,
 * string and signal ops (see ops.def). */
#ifndef TDM_OPS_CONTROL_H
#define TDM_OPS_CONTROL_H

#include "ops/op.h"

tdm_status op_run_If(op_ctx *ctx);
tdm_status op_run_Loop(op_ctx *ctx);
tdm_status op_run_Scan(op_ctx *ctx);

tdm_status op_run_SequenceEmpty(op_ctx *ctx);
tdm_status op_run_SequenceConstruct(op_ctx *ctx);
tdm_status op_run_SequenceInsert(op_ctx *ctx);
tdm_status op_run_SequenceAt(op_ctx *ctx);
tdm_status op_run_SequenceErase(op_ctx *ctx);
tdm_status op_run_SequenceLength(op_ctx *ctx);
tdm_status op_run_SplitToSequence(op_ctx *ctx);
tdm_status op_run_ConcatFromSequence(op_ctx *ctx);
tdm_status op_run_SequenceMap(op_ctx *ctx);
tdm_status op_run_Optional(op_ctx *ctx);
tdm_status op_run_OptionalHasElement(op_ctx *ctx);
tdm_status op_run_OptionalGetElement(op_ctx *ctx);

/* Helpers shared by these ops (control_util.c). */

/* Moves src's contents into the shell dst and frees src's shell. */
void ctl_move(tdm_tensor *dst, tdm_tensor *src);
/* The slice of t at index i along axis, with that axis removed. */
tdm_status ctl_take(op_ctx *ctx, const tdm_tensor *t, int axis, int64_t i, tdm_tensor **out);
/* Stacks n tensors of one shape along a new axis (0..rank) into dst. */
tdm_status ctl_stack(op_ctx *ctx, tdm_tensor *const *items, size_t n, int axis, tdm_tensor *dst);

#endif
