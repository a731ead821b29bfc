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
