/* Seed kernels that prove the pipeline end to end; the op families replace
 * them with full implementations. */
#include "ops/tensor.h"

#include <string.h>

tdm_status op_run_Identity(op_ctx *ctx)
{
    const tdm_tensor *x = ctx->in[0];
    tdm_tensor *c;
    tdm_status st = tensor_clone(ctx->err, x, &c);
    if (st)
        return st;
    tensor_reset(ctx->out[0]);
    *ctx->out[0] = *c;
    memset(c, 0, sizeof *c);
    tdm_tensor_destroy(c);
    return TDM_OK;
}

