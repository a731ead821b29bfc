/* The one place an op_ctx is built (op_ctx_init), and the kernels' side of
 * the caller's callback table (op_calls, ops/op.h). */
#include "ops/op.h"
#include "ops/qdq.h"
#include "core/mem.h"

#include <string.h>

void op_ctx_init(op_ctx *ctx, const gr_node *node, const tdm_tensor *const *in, tdm_tensor **out, tdm_err *e,
                 const op_caller *caller, int threads, uint64_t *rng)
{
    memset(ctx, 0, sizeof *ctx);
    ctx->node = node;
    ctx->version = node->version;
    ctx->n_in = node->n_inputs;
    ctx->in = in;
    ctx->n_out = node->n_outputs;
    ctx->out = out;
    ctx->err = e;
    ctx->caller = caller;
    ctx->threads = threads;
    ctx->rng = rng;
}

tdm_status op_out_shells(tdm_err *e, int n, tdm_tensor **out)
{
    for (int i = 0; i < n; i++)
        out[i] = NULL;
    for (int i = 0; i < n; i++)
        if (!(out[i] = mem_calloc(1, sizeof **out))) {
            for (int j = 0; j < i; j++) {
                tdm_tensor_destroy(out[j]);
                out[j] = NULL;
            }
            return err_set(e, TDM_E_NOMEM, "out of memory");
        }
    return TDM_OK;
}

/* 1 when the kernel of ctx's node reads input i of this type only through
 * its packed form, or aligns it itself where it loads the elements (Conv's
 * float32 W: nn_conv.c conv_f32), so that op_run leaves it where it lies. */
static int kernel_aligns(const op_ctx *ctx, int i)
{
    return ctx->node->op == OP_Conv && i == 1 && ctx->in[i]->dtype == TDM_FLOAT;
}

tdm_status op_align_inputs(op_ctx *ctx, int plain)
{
    for (int i = 0; i < ctx->n_in; i++)
        if (tensor_misaligned(ctx->in[i]) && !(plain && kernel_aligns(ctx, i)) && !tensor_align(ctx->in[i]))
            return op_fail(ctx, TDM_E_NOMEM, "out of memory aligning input %d", i);
    return TDM_OK;
}

/* A node with a QDQ group (ops/qdq.h) runs in integer arithmetic, as
 * onnxruntime's fused kernels run it, unless its output is fused with
 * other ops (fuse.c leaves such heads alone). Misaligned inputs are aligned
 * first (op_align_inputs). */
tdm_status op_run(op_ctx *ctx)
{
    const struct gr_qdq *q = ctx->node->qdq;
    const int plain = !q || q->wrapped || ctx->fuse;
    tdm_status st = op_align_inputs(ctx, plain);
    if (st)
        return st;
    if (!plain)
        return op_qdq_run(ctx, OP_ROUND_HALF_EVEN, "cpu");
    return op_table[ctx->node->op].run(ctx);
}

tdm_status op_run_subgraph(op_ctx *ctx, const gr_graph *g, int n_in, const tdm_tensor *const *in, tdm_tensor **out)
{
    if (!ctx->caller || !ctx->caller->calls->run_subgraph)
        return op_fail(ctx, TDM_E_INTERNAL, "runs a subgraph, and its caller runs none");
    return ctx->caller->calls->run_subgraph(ctx, g, n_in, in, out);
}

int op_input_const(const op_ctx *ctx, int i)
{
    if (i < 0 || i >= ctx->n_in || !ctx->in[i] || !ctx->caller)
        return 0;
    if (ctx->in[i]->immutable) /* a folded weight (graph/fuse.c) */
        return 1;
    return ctx->caller->calls->input_const && ctx->caller->calls->input_const(ctx, i);
}

tdm_status op_subgraph_io(op_ctx *ctx, const gr_graph *g, int *n_in, int *n_out)
{
    if (!ctx->caller || !ctx->caller->calls->subgraph_io)
        return op_fail(ctx, TDM_E_INTERNAL, "runs a subgraph, and its caller runs none");
    ctx->caller->calls->subgraph_io(g, n_in, n_out);
    return TDM_OK;
}

tdm_dtype op_subgraph_out_dtype(const op_ctx *ctx, const gr_graph *g, int k)
{
    if (!ctx->caller || !ctx->caller->calls->subgraph_out_dtype)
        return TDM_UNDEFINED;
    return ctx->caller->calls->subgraph_out_dtype(g, k);
}
