/* Seed kernels that prove the pipeline end to end; the op families replace
 * them with full implementations. */
#include "ops/elementwise.h"

tdm_status op_run_Add(op_ctx *ctx)
{
    const tdm_tensor *a = ctx->in[0], *b = ctx->in[1];
    int r;
    int64_t dims[TDM_MAX_RANK];
    if (a->dtype != TDM_FLOAT || b->dtype != TDM_FLOAT)
        return op_fail(ctx, TDM_E_UNSUPPORTED, "seed Add takes float only");
    if (op_broadcast(a->rank, a->dims, b->rank, b->dims, &r, dims))
        return op_fail(ctx, TDM_E_RUNTIME, "shapes cannot be broadcast");
    tdm_status st = op_out(ctx, 0, TDM_FLOAT, r, dims);
    if (st)
        return st;
    /* naive broadcasting index */
    float *o = ctx->out[0]->data;
    const float *pa = a->data, *pb = b->data;
    for (size_t i = 0; i < ctx->out[0]->count; i++) {
        size_t rem = i, ia = 0, ib = 0, sa = 1, sb = 1;
        for (int d = r - 1; d >= 0; d--) {
            size_t idx = rem % (size_t)dims[d];
            rem /= (size_t)dims[d];
            int da = d - (r - a->rank), db = d - (r - b->rank);
            if (da >= 0) {
                ia += (a->dims[da] == 1 ? 0 : idx) * sa;
                sa *= (size_t)a->dims[da];
            }
            if (db >= 0) {
                ib += (b->dims[db] == 1 ? 0 : idx) * sb;
                sb *= (size_t)b->dims[db];
            }
        }
        o[i] = pa[ia] + pb[ib];
    }
    return TDM_OK;
}

tdm_status op_run_Relu(op_ctx *ctx)
{
    const tdm_tensor *x = ctx->in[0];
    if (x->dtype != TDM_FLOAT)
        return op_fail(ctx, TDM_E_UNSUPPORTED, "seed Relu takes float only");
    tdm_status st = op_out(ctx, 0, x->dtype, x->rank, x->dims);
    if (st)
        return st;
    const float *p = x->data;
    float *o = ctx->out[0]->data;
    for (size_t i = 0; i < x->count; i++)
        o[i] = p[i] > 0 ? p[i] : 0;
    return TDM_OK;
}
