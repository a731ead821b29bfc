/* GridSample (opset 16: bilinear, nearest, bicubic; zeros, border,
 * reflection padding; align_corners) and NonMaxSuppression. */
#include "ops/nn.h"
#include "core/mem.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- GridSample */

static double gs_unnormalize(double c, int64_t size, int align)
{
    return align ? (c + 1.0) / 2.0 * (double)(size - 1) : ((c + 1.0) * (double)size - 1.0) / 2.0;
}

static double gs_reflect(double c, double twice_lo, double twice_hi)
{
    if (twice_lo == twice_hi)
        return 0.0;
    double mn = twice_lo / 2.0, span = (twice_hi - twice_lo) / 2.0;
    c = fabs(c - mn);
    double extra = fmod(c, span);
    double flips = floor(c / span);
    return fmod(flips, 2.0) == 0.0 ? extra + mn : span - extra + mn;
}

/* pad: 0 zeros, 1 border, 2 reflection */
static double gs_pad(double c, int64_t size, int pad, int align)
{
    if (pad == 1) {
        c = c < 0 ? 0 : c > (double)(size - 1) ? (double)(size - 1) : c;
    } else if (pad == 2) {
        c = align ? gs_reflect(c, 0.0, 2.0 * (double)(size - 1)) : gs_reflect(c, -1.0, 2.0 * (double)size - 1.0);
        c = c < 0 ? 0 : c > (double)(size - 1) ? (double)(size - 1) : c;
    }
    return c;
}

static double gs_at(const double *pl, int64_t H, int64_t W, int64_t y, int64_t x)
{
    return y >= 0 && y < H && x >= 0 && x < W ? pl[y * W + x] : 0.0;
}

static double gs_cubic1(double x, double a) { return ((a + 2) * x - (a + 3)) * x * x + 1; }
static double gs_cubic2(double x, double a) { return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a; }

static void gs_coeffs(double t, double *c)
{
    const double a = -0.75;
    c[0] = gs_cubic2(t + 1.0, a);
    c[1] = gs_cubic1(t, a);
    c[2] = gs_cubic1(1.0 - t, a);
    c[3] = gs_cubic2(2.0 - t, a);
}

/* A tap of the bicubic stencil with padding applied to its coordinate. */
static double gs_bounded(const double *pl, int64_t H, int64_t W, double y, double x, int pad, int align)
{
    double px = gs_pad(x, W, pad, align), py = gs_pad(y, H, pad, align);
    return gs_at(pl, H, W, (int64_t)py, (int64_t)px);
}

tdm_status op_run_GridSample(op_ctx *ctx)
{
    const tdm_tensor *x = op_nn_in(ctx, 0), *grid = op_nn_in(ctx, 1);
    if (!x || !grid)
        return op_fail(ctx, TDM_E_MODEL, "inputs X and grid are required");
    if (x->rank != 4 || grid->rank != 4 || grid->dims[0] != x->dims[0] || grid->dims[3] != 2)
        return op_fail(ctx, TDM_E_RUNTIME, "X must be NxCxHxW and grid NxHoutxWoutx2");
    if (!(DT_BIT(x->dtype) & DT_FLOATS) || !(DT_BIT(grid->dtype) & DT_FLOATS))
        return op_fail(ctx, TDM_E_UNSUPPORTED, "X and grid must be floating-point");
    /* version 20 renamed the modes linear / nearest / cubic (and took N-d inputs: 2-d here) */
    int v20 = ctx->version >= 20;
    const char *ms = gr_attr_str(ctx->node, "mode", v20 ? "linear" : "bilinear");
    const char *ps = gr_attr_str(ctx->node, "padding_mode", "zeros");
    int align = gr_attr_int(ctx->node, "align_corners", 0) != 0;
    int mode = strcmp(ms, v20 ? "linear" : "bilinear") == 0 ? 0 : strcmp(ms, "nearest") == 0 ? 1
             : strcmp(ms, v20 ? "cubic" : "bicubic") == 0 ? 2 : -1;
    int pad = strcmp(ps, "zeros") == 0 ? 0 : strcmp(ps, "border") == 0 ? 1 : strcmp(ps, "reflection") == 0 ? 2 : -1;
    if (mode < 0)
        return op_fail(ctx, TDM_E_MODEL, "attribute mode has the unknown value '%s'", ms);
    if (pad < 0)
        return op_fail(ctx, TDM_E_MODEL, "attribute padding_mode has the unknown value '%s'", ps);
    int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3];
    int64_t OH = grid->dims[1], OW = grid->dims[2];
    int64_t dims[4] = {N, C, OH, OW};
    tdm_status st = op_out(ctx, 0, x->dtype, 4, dims);
    if (st)
        return st;
    tdm_tensor *y = ctx->out[0];
    double *px = mem_alloc(x->count * sizeof *px + 1), *pg = mem_alloc(grid->count * sizeof *pg + 1);
    if (!px || !pg) {
        mem_free(px);
        mem_free(pg);
        return op_fail(ctx, TDM_E_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < x->count; i++)
        px[i] = tensor_get_f64(x, i);
    for (size_t i = 0; i < grid->count; i++)
        pg[i] = tensor_get_f64(grid, i);
    size_t o = 0;
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++) {
            const double *pl = px + (size_t)((n * C + c) * H * W);
            const double *gp = pg + (size_t)(n * OH * OW * 2);
            for (int64_t k = 0; k < OH * OW; k++, o++) {
                double ix = gs_unnormalize(gp[2 * k], W, align), iy = gs_unnormalize(gp[2 * k + 1], H, align);
                double v = 0.0;
                if (mode == 2) {
                    double fx = floor(ix), fy = floor(iy), cx[4], cy[4];
                    gs_coeffs(ix - fx, cx);
                    gs_coeffs(iy - fy, cy);
                    for (int i = 0; i < 4; i++) {
                        double row = 0.0;
                        for (int j = 0; j < 4; j++)
                            row += cx[j] * gs_bounded(pl, H, W, fy - 1 + i, fx - 1 + j, pad, align);
                        v += cy[i] * row;
                    }
                } else {
                    ix = gs_pad(ix, W, pad, align);
                    iy = gs_pad(iy, H, pad, align);
                    if (!isfinite(ix) || !isfinite(iy) || fabs(ix) > 1e15 || fabs(iy) > 1e15) {
                        v = 0.0;
                    } else if (mode == 1) {
                        v = gs_at(pl, H, W, (int64_t)nearbyint(iy), (int64_t)nearbyint(ix));
                    } else {
                        double fx = floor(ix), fy = floor(iy);
                        int64_t x0 = (int64_t)fx, y0 = (int64_t)fy;
                        double tx = ix - fx, ty = iy - fy;
                        v = gs_at(pl, H, W, y0, x0) * (1 - tx) * (1 - ty) + gs_at(pl, H, W, y0, x0 + 1) * tx * (1 - ty) +
                            gs_at(pl, H, W, y0 + 1, x0) * (1 - tx) * ty + gs_at(pl, H, W, y0 + 1, x0 + 1) * tx * ty;
                    }
                }
                tensor_set_f64(y, o, v);
            }
        }
    mem_free(px);
    mem_free(pg);
    return TDM_OK;
}

tdm_status op_infer_GridSample(op_infer_ctx *ctx)
{
    const gr_type *x = ctx->n_in > 0 ? ctx->in[0] : NULL, *g = ctx->n_in > 1 ? ctx->in[1] : NULL;
    gr_type *o = &ctx->out[0];
    o->kind = TDM_KIND_TENSOR;
    o->dtype = x ? x->dtype : TDM_UNDEFINED;
    if (!x || x->rank != 4)
        return TDM_OK;
    o->rank = 4;
    o->dims[0] = x->dims[0];
    o->dims[1] = x->dims[1];
    o->dims[2] = g && g->rank == 4 ? g->dims[1] : (gr_dim){-1, NULL};
    o->dims[3] = g && g->rank == 4 ? g->dims[2] : (gr_dim){-1, NULL};
    return TDM_OK;
}

/* ------------------------------------------------------ NonMaxSuppression */

typedef struct nms_cand {
    float score;
    int64_t index;
} nms_cand;

static int nms_cmp(const void *a, const void *b)
{
    const nms_cand *x = a, *y = b;
    if (x->score != y->score)
        return x->score > y->score ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* Corners (ymin, xmin, ymax, xmax) of box i. */
static void nms_corners(const float *bx, int center, float *c)
{
    if (center) {
        float xc = bx[0], yc = bx[1], w = bx[2], h = bx[3];
        c[0] = yc - h / 2;
        c[2] = yc + h / 2;
        c[1] = xc - w / 2;
        c[3] = xc + w / 2;
    } else {
        c[0] = bx[0] < bx[2] ? bx[0] : bx[2];
        c[2] = bx[0] < bx[2] ? bx[2] : bx[0];
        c[1] = bx[1] < bx[3] ? bx[1] : bx[3];
        c[3] = bx[1] < bx[3] ? bx[3] : bx[1];
    }
}

static int nms_suppress(const float *a, const float *b, int center, float thr)
{
    float ca[4], cb[4];
    nms_corners(a, center, ca);
    nms_corners(b, center, cb);
    float ymin = ca[0] > cb[0] ? ca[0] : cb[0], xmin = ca[1] > cb[1] ? ca[1] : cb[1];
    float ymax = ca[2] < cb[2] ? ca[2] : cb[2], xmax = ca[3] < cb[3] ? ca[3] : cb[3];
    if (xmax <= xmin || ymax <= ymin)
        return 0;
    float inter = (xmax - xmin) * (ymax - ymin);
    float aa = (ca[2] - ca[0]) * (ca[3] - ca[1]), ab = (cb[2] - cb[0]) * (cb[3] - cb[1]);
    float uni = aa + ab - inter;
    if (inter <= 0 || aa <= 0 || ab <= 0 || uni <= 0)
        return 0;
    return inter / uni > thr;
}

tdm_status op_run_NonMaxSuppression(op_ctx *ctx)
{
    const tdm_tensor *boxes = op_nn_in(ctx, 0), *scores = op_nn_in(ctx, 1);
    const tdm_tensor *tmax = op_nn_in(ctx, 2), *tiou = op_nn_in(ctx, 3), *tsc = op_nn_in(ctx, 4);
    if (!boxes || !scores)
        return op_fail(ctx, TDM_E_MODEL, "inputs boxes and scores are required");
    if (boxes->dtype != TDM_FLOAT || scores->dtype != TDM_FLOAT || boxes->rank != 3 || scores->rank != 3 ||
        boxes->dims[2] != 4 || scores->dims[0] != boxes->dims[0] || scores->dims[2] != boxes->dims[1])
        return op_fail(ctx, TDM_E_RUNTIME,
                       "boxes must be float batches x spatial x 4 and scores float batches x classes x spatial");
    int64_t maxo = tmax && tmax->count ? tensor_get_i64(tmax, 0) : 0;
    float iou = tiou && tiou->count ? (float)tensor_get_f64(tiou, 0) : 0.0f;
    int has_sc = tsc && tsc->count;
    float sthr = has_sc ? (float)tensor_get_f64(tsc, 0) : 0.0f;
    int center = gr_attr_int(ctx->node, "center_point_box", 0) != 0;
    if (iou < 0 || iou > 1)
        return op_fail(ctx, TDM_E_RUNTIME, "iou_threshold must be in [0, 1], not %g", (double)iou);
    int64_t NB = boxes->dims[0], NS = boxes->dims[1], NC = scores->dims[1];
    if (maxo < 0)
        maxo = 0;
    if (maxo > NS)
        maxo = NS;
    const float *bp = boxes->data, *sp = scores->data;
    size_t cap = 0, n_sel = 0;
    int64_t *sel = NULL;
    nms_cand *cand = mem_alloc((size_t)NS * sizeof *cand + 1);
    int64_t *picked = mem_alloc((size_t)NS * sizeof *picked + 1);
    tdm_status st = TDM_OK;
    if (!cand || !picked) {
        st = op_fail(ctx, TDM_E_NOMEM, "out of memory");
        goto done;
    }
    for (int64_t b = 0; b < NB && maxo > 0; b++)
        for (int64_t c = 0; c < NC; c++) {
            const float *sc = sp + (size_t)((b * NC + c) * NS);
            size_t nc = 0;
            for (int64_t i = 0; i < NS; i++)
                if (!has_sc || sc[i] > sthr)
                    cand[nc++] = (nms_cand){sc[i], i};
            qsort(cand, nc, sizeof *cand, nms_cmp);
            int64_t np = 0;
            for (size_t k = 0; k < nc && np < maxo; k++) {
                const float *bx = bp + (size_t)((b * NS + cand[k].index) * 4);
                int keep = 1;
                for (int64_t j = 0; j < np && keep; j++)
                    if (nms_suppress(bx, bp + (size_t)((b * NS + picked[j]) * 4), center, iou))
                        keep = 0;
                if (!keep)
                    continue;
                picked[np++] = cand[k].index;
                if (mem_grow((void **)&sel, &cap, (n_sel + 1) * 3, sizeof *sel)) {
                    st = op_fail(ctx, TDM_E_NOMEM, "out of memory");
                    goto done;
                }
                sel[n_sel * 3] = b;
                sel[n_sel * 3 + 1] = c;
                sel[n_sel * 3 + 2] = cand[k].index;
                n_sel++;
            }
        }
    {
        int64_t dims[2] = {(int64_t)n_sel, 3};
        st = op_out(ctx, 0, TDM_INT64, 2, dims);
        if (!st && n_sel)
            memcpy(ctx->out[0]->data, sel, n_sel * 3 * sizeof *sel);
    }
done:
    mem_free(cand);
    mem_free(picked);
    mem_free(sel);
    return st;
}

/* ------------------------------------------------------------ AffineGrid */

/* The normalised coordinate of index i of n along an axis: [-1, 1] through
 * the corner pixels' centres (align_corners) or their outer edges. */
static double affine_coord(int64_t i, int64_t n, int align)
{
    if (align)
        return n > 1 ? -1.0 + 2.0 * (double)i / (double)(n - 1) : -1.0;
    return -1.0 + (2.0 * (double)i + 1.0) / (double)n;
}

/* AffineGrid (20): theta [N, 2, 3] and size (N, C, H, W) give the grid
 * [N, H, W, 2] of theta (x, y, 1); theta [N, 3, 4] and (N, C, D, H, W)
 * give [N, D, H, W, 3] of theta (x, y, z, 1). */
tdm_status op_run_AffineGrid(op_ctx *ctx)
{
    const tdm_tensor *th = op_nn_in(ctx, 0), *sz = op_nn_in(ctx, 1);
    if (!th || !sz)
        return op_fail(ctx, TDM_E_MODEL, "inputs theta and size are required");
    if (!(DT_BIT(th->dtype) & DT_FLOATS) || !dtype_is_int(sz->dtype) || (sz->count != 4 && sz->count != 5))
        return op_fail(ctx, TDM_E_RUNTIME, "theta must be float and size 4 or 5 integers");
    int nd = (int)sz->count - 2; /* 2 or 3 spatial dims */
    int64_t s[5];
    for (int i = 0; i < (int)sz->count; i++) {
        s[i] = tensor_get_i64(sz, (size_t)i);
        if (s[i] < 0 || s[i] > INT32_MAX)
            return op_fail(ctx, TDM_E_RUNTIME, "size entry %d (%lld) is out of range", i, (long long)s[i]);
    }
    if (th->rank != 3 || th->dims[0] != s[0] || th->dims[1] != nd || th->dims[2] != nd + 1)
        return op_fail(ctx, TDM_E_RUNTIME, "theta must have shape [N, %d, %d] for size N = %lld", nd, nd + 1,
                       (long long)s[0]);
    int align = gr_attr_int(ctx->node, "align_corners", 0) != 0;
    int64_t D = nd == 3 ? s[2] : 1, H = s[nd], W = s[nd + 1];
    int64_t dims[5] = {s[0], nd == 3 ? D : H, nd == 3 ? H : W, nd == 3 ? W : nd, nd};
    tdm_status st = op_out(ctx, 0, th->dtype, nd + 2, dims);
    if (st)
        return st;
    tdm_tensor *y = ctx->out[0];
    size_t o = 0;
    for (int64_t n = 0; n < s[0]; n++)
        for (int64_t d = 0; d < D; d++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t w = 0; w < W; w++) {
                    double p[4] = {affine_coord(w, W, align), affine_coord(h, H, align), 0, 1};
                    if (nd == 3)
                        p[2] = affine_coord(d, D, align);
                    else
                        p[2] = 1;
                    for (int r = 0; r < nd; r++) {
                        double acc = 0;
                        for (int c = 0; c <= nd; c++)
                            acc += tensor_get_f64(th, (size_t)((n * nd + r) * (nd + 1) + c)) * p[c];
                        tensor_set_f64(y, o++, acc);
                    }
                }
    return TDM_OK;
}

/* ------------------------------------------------------------ Col2Im */

/* Col2Im (18): input [N, C * prod(block), L] holds, for each of the L
 * sliding blocks (row-major over the block grid) and each kernel offset,
 * a value that is added into the image [N, C, image_shape...] at
 * block * stride - pad_begin + offset * dilation (outside: dropped). */
tdm_status op_run_Col2Im(op_ctx *ctx)
{
    const tdm_tensor *x = op_nn_in(ctx, 0), *im = op_nn_in(ctx, 1), *bs = op_nn_in(ctx, 2);
    if (!x || !im || !bs)
        return op_fail(ctx, TDM_E_MODEL, "inputs input, image_shape and block_shape are required");
    if (!(DT_BIT(x->dtype) & DT_FLOATS) || x->rank != 3 || !dtype_is_int(im->dtype) || !dtype_is_int(bs->dtype) ||
        im->count != bs->count || im->count < 1 || im->count > NN_MAX_SP)
        return op_fail(ctx, TDM_E_RUNTIME, "input must be float [N, C*K, L]; image_shape and block_shape 1 to %d "
                                           "integers each", NN_MAX_SP);
    int nd = (int)im->count;
    int64_t img[NN_MAX_SP], blk[NN_MAX_SP], dil[NN_MAX_SP], str[NN_MAX_SP], pb[NN_MAX_SP], pe[NN_MAX_SP];
    int64_t nb[NN_MAX_SP];
    const int64_t *a = NULL, *sv = NULL, *pv = NULL;
    int nda = gr_attr_ints(ctx->node, "dilations", &a);
    int nst = gr_attr_ints(ctx->node, "strides", &sv);
    int npd = gr_attr_ints(ctx->node, "pads", &pv);
    if ((nda >= 0 && nda != nd) || (nst >= 0 && nst != nd) || (npd >= 0 && npd != 2 * nd))
        return op_fail(ctx, TDM_E_MODEL, "dilations, strides and pads must have %d, %d and %d entries", nd, nd, 2 * nd);
    int64_t K = 1, L = 1;
    for (int d = 0; d < nd; d++) {
        img[d] = tensor_get_i64(im, (size_t)d);
        blk[d] = tensor_get_i64(bs, (size_t)d);
        dil[d] = nda >= 0 ? a[d] : 1;
        str[d] = nst >= 0 ? sv[d] : 1;
        pb[d] = npd >= 0 ? pv[d] : 0;
        pe[d] = npd >= 0 ? pv[d + nd] : 0;
        if (img[d] < 0 || img[d] > INT32_MAX || blk[d] < 1 || blk[d] > INT32_MAX || dil[d] < 1 || dil[d] > INT32_MAX ||
            str[d] < 1 || str[d] > INT32_MAX || pb[d] < 0 || pb[d] > INT32_MAX || pe[d] < 0 || pe[d] > INT32_MAX)
            return op_fail(ctx, TDM_E_RUNTIME, "image, block, dilation, stride or pad of axis %d is out of range", d);
        int64_t span = dil[d] * (blk[d] - 1) + 1;
        nb[d] = (img[d] + pb[d] + pe[d] - span) / str[d] + 1;
        if (nb[d] < 1 || mem_mul_i64(K, blk[d], &K) || mem_mul_i64(L, nb[d], &L))
            return op_fail(ctx, TDM_E_RUNTIME, "the blocks do not fit the image along axis %d", d);
    }
    if (x->dims[1] % K || x->dims[2] != L)
        return op_fail(ctx, TDM_E_RUNTIME, "input has shape [%lld, %lld, %lld]; expected C * %lld channels and %lld blocks",
                       (long long)x->dims[0], (long long)x->dims[1], (long long)x->dims[2], (long long)K, (long long)L);
    int64_t N = x->dims[0], C = x->dims[1] / K, dims[2 + NN_MAX_SP] = {N, C};
    memcpy(dims + 2, img, sizeof img[0] * (size_t)nd);
    tdm_status st = op_out(ctx, 0, x->dtype, nd + 2, dims);
    if (st)
        return st;
    tdm_tensor *y = ctx->out[0];
    size_t plane = N > 0 && C > 0 ? y->count / (size_t)(N * C) : 0;
    double *acc = mem_calloc(y->count + 1, sizeof *acc);
    if (!acc)
        return op_fail(ctx, TDM_E_NOMEM, "out of memory");
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t k = 0; k < K; k++)
                for (int64_t l = 0; l < L; l++) {
                    int64_t kr = k, lr = l, off = 0;
                    int in = 1;
                    int64_t pos[NN_MAX_SP];
                    for (int d = nd - 1; d >= 0; d--) {
                        int64_t kd = kr % blk[d], bd = lr % nb[d];
                        kr /= blk[d];
                        lr /= nb[d];
                        pos[d] = bd * str[d] - pb[d] + kd * dil[d];
                        in &= pos[d] >= 0 && pos[d] < img[d];
                    }
                    if (!in)
                        continue;
                    for (int d = 0; d < nd; d++)
                        off = off * img[d] + pos[d];
                    size_t src = ((size_t)n * (size_t)x->dims[1] + (size_t)(c * K + k)) * (size_t)L + (size_t)l;
                    acc[(size_t)(n * C + c) * plane + (size_t)off] += tensor_get_f64(x, src);
                }
    for (size_t i = 0; i < y->count; i++)
        tensor_set_f64(y, i, acc[i]);
    mem_free(acc);
    return TDM_OK;
}
