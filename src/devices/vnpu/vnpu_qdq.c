/* A QDQ group (graph/qdq.h) on a profile with "quantized": the node runs as
 * the integer hardware runs it (ops/qdq.h op_qdq_run), rounded as the
 * profile says. */
#include "devices/vnpu/vnpu.h"
#include "ops/qdq.h"

tdm_status vnpu_qdq_run(const struct vnpu_ctx *c, op_ctx *op)
{
    return op_qdq_run(op, c->q_round == VNPU_ROUND_HALF_AWAY ? OP_ROUND_HALF_AWAY : OP_ROUND_HALF_EVEN, c->dev_name);
}
