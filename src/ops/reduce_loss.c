/* NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss.
 *
 * Both view the input as [N, C, D] (D: the product of the dims after C)
 * and the target as [N, D]; the loss of an element is -input[n, t, d]
 * times weight[t] (1 without weights, 0 when t is ignore_index); "mean"
 * divides the weighted sum by the sum of the weights. */
#include "ops/reduce.h"
#include "core/mem.h"

#include <math.h>
#include <string.h>

enum { LR_NONE, LR_SUM, LR_MEAN };

static tdm_status loss_reduction(op_ctx *ctx, int *red)
{
    const char *r = gr_attr_str(ctx->node, "reduction", "mean");
    if (strcmp(r, "none") == 0)
        *red = LR_NONE;
    else if (strcmp(r, "sum") == 0)
        *red = LR_SUM;
    else if (strcmp(r, "mean") == 0)
        *red = LR_MEAN;
    else
        return op_fail(ctx, TDM_E_MODEL, "attribute 'reduction' is '%s'; it must be none, sum or mean", r);
    return TDM_OK;
}

/* logp: [N, C, D] doubles (log-probabilities or the NLL input). Writes
 * output 0 in dtype dt. */
static tdm_status nll(op_ctx *ctx, const double *logp, const tdm_tensor *x, int ti, int wi, tdm_dtype dt)
{
    tdm_status st;
    const tdm_tensor *t = ctx->in[ti];
    const tdm_tensor *w = wi < ctx->n_in ? ctx->in[wi] : NULL;
    size_t nb = (size_t)x->dims[0], c = (size_t)x->dims[1], d;
    if ((st = op_red_prod(ctx, x->dims, 2, x->rank, &d)))
        return st;
    if ((st = op_red_check(ctx, ti, DT_BIT(TDM_INT32) | DT_BIT(TDM_INT64))))
        return st;
    int shape_ok = t->rank == x->rank - 1 && t->dims[0] == x->dims[0];
    for (int k = 1; shape_ok && k < t->rank; k++)
        shape_ok = t->dims[k] == x->dims[k + 1];
    if (!shape_ok) {
        char s1[128], s2[128];
        return op_fail(ctx, TDM_E_RUNTIME, "the target's shape %s does not match the input's %s",
                       shape_str(t->rank, t->dims, s1, sizeof s1), shape_str(x->rank, x->dims, s2, sizeof s2));
    }
    if (w) {
        if ((st = op_red_check(ctx, wi, DT_FLOATS)))
            return st;
        if (w->count != c)
            return op_fail(ctx, TDM_E_RUNTIME, "the weights hold %zu values, not C = %zu", w->count, c);
    }
    int red = LR_MEAN;
    if ((st = loss_reduction(ctx, &red)))
        return st;
    const gr_attr *ia = gr_attr_find(ctx->node, "ignore_index");
    int has_ii = ia != NULL;
    int64_t ii = ia ? ia->i : 0;
    if (red == LR_NONE)
        st = op_out(ctx, 0, dt, t->rank, t->dims);
    else
        st = op_out(ctx, 0, dt, 0, NULL);
    if (st)
        return st;
    double *loss = NULL, *wv = NULL;
    int64_t *tv = NULL;
    size_t nt = 0;
    if ((st = op_in_ints(ctx, ti, &tv, &nt)) || (st = op_red_alloc_f64(ctx, t->count, &loss)))
        goto done;
    if (w && (st = op_red_load_f64(ctx, w, &wv)))
        goto done;
    double sum = 0, wsum = 0;
    for (size_t n = 0; n < nb; n++) {
        for (size_t j = 0; j < d; j++) {
            size_t k = n * d + j;
            int64_t cls = tv[k];
            if (has_ii && cls == ii) {
                loss[k] = 0;
                continue;
            }
            if (cls < 0 || (uint64_t)cls >= c) {
                st = op_fail(ctx, TDM_E_RUNTIME, "target %lld at element %zu is outside [0, %zu)", (long long)cls, k,
                             c);
                goto done;
            }
            double wt = wv ? wv[cls] : 1.0;
            loss[k] = -logp[(n * c + (size_t)cls) * d + j] * wt;
            sum += loss[k];
            wsum += wt;
        }
    }
    if (red == LR_NONE) {
        op_red_put_f64(ctx->out[0], 0, t->count, loss);
    } else {
        double v = red == LR_SUM ? sum : sum / wsum;
        op_red_put_f64(ctx->out[0], 0, 1, &v);
    }
done:
    mem_free(loss);
    mem_free(wv);
    mem_free(tv);
    return st;
}

tdm_status op_run_NegativeLogLikelihoodLoss(op_ctx *ctx)
{
    tdm_status st = op_red_check(ctx, 0, DT_FLOATS);
    if (st)
        return st;
    const tdm_tensor *x = ctx->in[0];
    if (x->rank < 2)
        return op_fail(ctx, TDM_E_RUNTIME, "input 0 must have shape [N, C, ...], not rank %d", x->rank);
    double *xb = NULL;
    if ((st = op_red_load_f64(ctx, x, &xb)))
        return st;
    st = nll(ctx, xb, x, 1, 2, x->dtype);
    mem_free(xb);
    return st;
}

tdm_status op_run_SoftmaxCrossEntropyLoss(op_ctx *ctx)
{
    tdm_status st = op_red_check(ctx, 0, DT_FLOATS);
    if (st)
        return st;
    const tdm_tensor *x = ctx->in[0];
    if (x->rank < 2)
        return op_fail(ctx, TDM_E_RUNTIME, "input 0 must have shape [N, C, ...], not rank %d", x->rank);
    size_t nb = (size_t)x->dims[0], c = (size_t)x->dims[1], d;
    if ((st = op_red_prod(ctx, x->dims, 2, x->rank, &d)))
        return st;
    double *xb = NULL;
    if ((st = op_red_load_f64(ctx, x, &xb)))
        return st;
    /* log-softmax along C */
    for (size_t n = 0; n < nb; n++) {
        double *blk = xb + n * c * d;
        for (size_t j = 0; j < d; j++) {
            double m = -INFINITY, s = 0;
            for (size_t k = 0; k < c; k++)
                if (blk[k * d + j] > m)
                    m = blk[k * d + j];
            for (size_t k = 0; k < c; k++)
                s += exp(blk[k * d + j] - m);
            double l = m + log(s);
            for (size_t k = 0; k < c; k++)
                blk[k * d + j] -= l;
        }
    }
    st = nll(ctx, xb, x, 1, 2, x->dtype);
    if (!st && op_out_wanted(ctx, 1)) {
        if (!(st = op_out(ctx, 1, x->dtype, x->rank, x->dims)))
            op_red_put_f64(ctx->out[1], 0, x->count, xb);
    }
    mem_free(xb);
    return st;
}

tdm_status op_infer_loss(op_infer_ctx *ctx)
{
    const gr_type *x = ctx->n_in > 0 ? ctx->in[0] : NULL;
    const gr_type *t = ctx->n_in > 1 ? ctx->in[1] : NULL;
    if (!x || ctx->n_out < 1)
        return TDM_OK;
    gr_type *o = &ctx->out[0];
    o->kind = TDM_KIND_TENSOR;
    o->dtype = x->dtype;
    if (strcmp(gr_attr_str(ctx->node, "reduction", "mean"), "none") != 0)
        o->rank = 0;
    else if (t)
        o->rank = t->rank;
    if (o->rank > 0 && t)
        memcpy(o->dims, t->dims, sizeof(gr_dim) * (size_t)t->rank);
    if (ctx->n_out > 1)
        op_infer_copy(ctx, 1, 0);
    return TDM_OK;
}
