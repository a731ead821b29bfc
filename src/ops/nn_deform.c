/* DeformConv (opsets 19, 22): a 2-D convolution whose kernel taps are moved
 * by learned offsets (and weighted by an optional mask), each tap read
 * bilinearly with zeros outside the input, as the ONNX reference computes
 * it through GridSample (align_corners). Accumulated in double. */
#include "ops/nn.h"
#include "ops/reduce.h"
#include "core/mem.h"

#include <math.h>

/* Bilinear sample of plane pl (H x W) at (y, x), zeros outside. */
static double dc_sample(const double *pl, int64_t H, int64_t W, double y, double x)
{
    if (!isfinite(y) || !isfinite(x) || fabs(y) > 1e15 || fabs(x) > 1e15)
        return 0.0;
    double fy = floor(y), fx = floor(x), ty = y - fy, tx = x - fx, v = 0.0;
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 2; b++) {
            int64_t yy = (int64_t)fy + a, xx = (int64_t)fx + b;
            if (yy >= 0 && yy < H && xx >= 0 && xx < W)
                v += (a ? ty : 1 - ty) * (b ? tx : 1 - tx) * pl[yy * W + xx];
        }
    return v;
}

static int dc_ints(const gr_node *n, const char *name, int64_t dflt, int64_t *v, int k)
{
    const int64_t *a;
    int na = gr_attr_ints(n, name, &a);
    if (na < 0) {
        for (int i = 0; i < k; i++)
            v[i] = dflt;
        return 0;
    }
    if (na != k)
        return -1;
    for (int i = 0; i < k; i++)
        v[i] = a[i];
    return 0;
}

tdm_status op_run_DeformConv(op_ctx *ctx)
{
    tdm_status st;
    for (int i = 0; i < 3; i++)
        if ((st = op_red_check(ctx, i, DT_FLOATS)))
            return st;
    const tdm_tensor *x = ctx->in[0], *w = ctx->in[1], *off = ctx->in[2];
    const tdm_tensor *bias = op_nn_in(ctx, 3), *mask = op_nn_in(ctx, 4);
    if (x->rank != 4 || w->rank != 4 || off->rank != 4)
        return op_fail(ctx, TDM_E_UNSUPPORTED, "DeformConv takes 2-D convolutions (X, W and offset of rank 4)");
    int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], Wd = x->dims[3];
    int64_t M = w->dims[0], Cg = w->dims[1], kh = w->dims[2], kw = w->dims[3];
    int64_t group = gr_attr_int(ctx->node, "group", 1), og = gr_attr_int(ctx->node, "offset_group", 1);
    int64_t pads[4], strides[2], dil[2], ks[2];
    if (dc_ints(ctx->node, "pads", 0, pads, 4) || dc_ints(ctx->node, "strides", 1, strides, 2) ||
        dc_ints(ctx->node, "dilations", 1, dil, 2) || dc_ints(ctx->node, "kernel_shape", 0, ks, 2))
        return op_fail(ctx, TDM_E_MODEL, "pads, strides, dilations and kernel_shape must have one entry per axis");
    if ((ks[0] && ks[0] != kh) || (ks[1] && ks[1] != kw))
        return op_fail(ctx, TDM_E_MODEL, "kernel_shape does not match W");
    if (group <= 0 || og <= 0 || C != Cg * group || M % group || C % og)
        return op_fail(ctx, TDM_E_RUNTIME, "X's %lld channels do not match W (%lld per group of %lld) and "
                       "offset_group %lld", (long long)C, (long long)Cg, (long long)group, (long long)og);
    int64_t oh = off->dims[2], ow = off->dims[3], K = kh * kw;
    int64_t eh = (H + pads[0] + pads[2] - ((kh - 1) * dil[0] + 1)), ew = (Wd + pads[1] + pads[3] - ((kw - 1) * dil[1] + 1));
    if (strides[0] <= 0 || strides[1] <= 0 || eh < 0 || ew < 0 || oh != eh / strides[0] + 1 ||
        ow != ew / strides[1] + 1 || off->dims[0] != N || off->dims[1] != og * K * 2)
        return op_fail(ctx, TDM_E_RUNTIME, "offset must be [%lld, %lld, out_h, out_w] of the convolution's output size",
                       (long long)N, (long long)(og * K * 2));
    if (mask && (!dtype_is_float(mask->dtype) || mask->rank != 4 || mask->dims[0] != N || mask->dims[1] != og * K ||
                 mask->dims[2] != oh || mask->dims[3] != ow))
        return op_fail(ctx, TDM_E_RUNTIME, "mask must be a float [%lld, %lld, %lld, %lld] tensor", (long long)N,
                       (long long)(og * K), (long long)oh, (long long)ow);
    if (bias && (!dtype_is_float(bias->dtype) || bias->count != (size_t)M))
        return op_fail(ctx, TDM_E_RUNTIME, "B must have %lld float values", (long long)M);
    int64_t ydims[4] = {N, M, oh, ow};
    if ((st = op_out(ctx, 0, x->dtype, 4, ydims)))
        return st;
    double *px = NULL;
    if ((st = op_red_load_f64(ctx, x, &px)))
        return st;
    int64_t mg = M / group, cpo = C / og;
    for (int64_t n = 0; n < N; n++)
        for (int64_t m = 0; m < M; m++)
            for (int64_t i = 0; i < oh; i++)
                for (int64_t j = 0; j < ow; j++) {
                    double acc = bias ? tensor_get_f64(bias, (size_t)m) : 0.0;
                    int64_t g = m / mg;
                    for (int64_t cl = 0; cl < Cg; cl++) {
                        int64_t c = g * Cg + cl, o = c / cpo;
                        const double *pl = px + (size_t)((n * C + c) * H * Wd);
                        for (int64_t a = 0; a < kh; a++)
                            for (int64_t b = 0; b < kw; b++) {
                                int64_t k = a * kw + b;
                                size_t ob = (size_t)(((n * og + o) * K + k) * 2);
                                double dy = tensor_get_f64(off, ((ob * (size_t)oh) + (size_t)i) * (size_t)ow + (size_t)j);
                                double dx =
                                    tensor_get_f64(off, (((ob + 1) * (size_t)oh) + (size_t)i) * (size_t)ow + (size_t)j);
                                double y = (double)(i * strides[0] - pads[0] + a * dil[0]) + dy;
                                double xx = (double)(j * strides[1] - pads[1] + b * dil[1]) + dx;
                                double v = dc_sample(pl, H, Wd, y, xx) *
                                           tensor_get_f64(w, (size_t)(((m * Cg + cl) * kh + a) * kw + b));
                                if (mask)
                                    v *= tensor_get_f64(
                                        mask, ((size_t)((n * og + o) * K + k) * (size_t)oh + (size_t)i) * (size_t)ow +
                                                  (size_t)j);
                                acc += v;
                            }
                    }
                    tensor_set_f64(ctx->out[0], (size_t)(((n * M + m) * oh + i) * ow + j), acc);
                }
    mem_free(px);
    return TDM_OK;
}

tdm_status op_infer_DeformConv(op_infer_ctx *ctx)
{
    const gr_type *x = ctx->n_in > 0 ? ctx->in[0] : NULL, *w = ctx->n_in > 1 ? ctx->in[1] : NULL;
    const gr_type *off = ctx->n_in > 2 ? ctx->in[2] : NULL;
    gr_type *y = &ctx->out[0];
    y->kind = TDM_KIND_TENSOR;
    y->dtype = x ? x->dtype : TDM_UNDEFINED;
    if (!x || x->rank != 4)
        return TDM_OK;
    y->rank = 4;
    y->dims[0] = x->dims[0];
    y->dims[1] = w && w->rank == 4 ? w->dims[0] : (gr_dim){-1, NULL};
    y->dims[2] = off && off->rank == 4 ? off->dims[2] : (gr_dim){-1, NULL};
    y->dims[3] = off && off->rank == 4 ? off->dims[3] : (gr_dim){-1, NULL};
    return TDM_OK;
}
