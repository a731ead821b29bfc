/* GridSample (opset 16: bilinear, nearest, bicubic; zeros, border,
 * reflection padding; align_corners; 20: also volumes, nearest and
 * trilinear) and NonMaxSuppression. */
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

static double gs_at3(const double *pl, const int64_t *d, int64_t z, int64_t y, int64_t x)
{
    return z >= 0 && z < d[0] && y >= 0 && y < d[1] && x >= 0 && x < d[2] ? pl[(z * d[1] + y) * d[2] + x] : 0.0;
}

/* GridSample 20 on volumes: X N x C x D x H x W, grid N x Do x Ho x Wo x 3
 * of (x, y, z); nearest or trilinear (cubic is 2-D only), as the 2-D path
 * with a third axis. px and pg hold X and grid as doubles. */
static void gs_volume(const tdm_tensor *x, const tdm_tensor *grid, const double *px, const double *pg, int mode,
                      int pad, int align, tdm_tensor *y)
{
    int64_t N = x->dims[0], C = x->dims[1], d[3] = {x->dims[2], x->dims[3], x->dims[4]};
    int64_t P = grid->dims[1] * grid->dims[2] * grid->dims[3];
    size_t o = 0;
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++) {
            const double *pl = px + (size_t)((n * C + c) * d[0] * d[1] * d[2]);
            const double *gp = pg + (size_t)(n * P * 3);
            for (int64_t k = 0; k < P; k++, o++) {
                double u[3]; /* z, y, x */
                int bad = 0;
                for (int a = 0; a < 3; a++) {
                    u[a] = gs_pad(gs_unnormalize(gp[3 * k + 2 - a], d[a], align), d[a], pad, align);
                    bad |= !isfinite(u[a]) || fabs(u[a]) > 1e15;
                }
                double v = 0.0;
                if (bad) {
                    v = 0.0;
                } else if (mode == 1) {
                    v = gs_at3(pl, d, (int64_t)nearbyint(u[0]), (int64_t)nearbyint(u[1]), (int64_t)nearbyint(u[2]));
                } else {
                    double f[3] = {floor(u[0]), floor(u[1]), floor(u[2])};
                    for (int corner = 0; corner < 8; corner++) {
                        double w = 1.0;
                        int64_t at[3];
                        for (int a = 0; a < 3; a++) {
                            int hi = (corner >> (2 - a)) & 1;
                            double t = u[a] - f[a];
                            w *= hi ? t : 1 - t;
                            at[a] = (int64_t)f[a] + hi;
                        }
                        v += w * gs_at3(pl, d, at[0], at[1], at[2]);
                    }
                }
                tensor_set_f64(y, o, v);
            }
        }
}

tdm_status op_run_GridSample(op_ctx *ctx)
{
    const tdm_tensor *x = op_nn_in(ctx, 0), *grid = op_nn_in(ctx, 1);
    if (!x || !grid)
        return op_fail(ctx, TDM_E_MODEL, "inputs X and grid are required");
    int vol = x->rank == 5 && ctx->version >= 20;
    if (vol ? grid->rank != 5 || grid->dims[0] != x->dims[0] || grid->dims[4] != 3
            : x->rank != 4 || grid->rank != 4 || grid->dims[0] != x->dims[0] || grid->dims[3] != 2)
        return op_fail(ctx, TDM_E_RUNTIME, "X must be NxCxHxW and grid NxHoutxWoutx2%s",
                       ctx->version >= 20 ? ", or X NxCxDxHxW and grid NxDoutxHoutxWoutx3" : "");
    if (!(DT_BIT(x->dtype) & DT_FLOATS) || !(DT_BIT(grid->dtype) & DT_FLOATS))
        return op_fail(ctx, TDM_E_UNSUPPORTED, "X and grid must be floating-point");
    /* version 20 renamed the modes linear / nearest / cubic (and took N-d inputs: 2-d and 3-d here) */
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
    if (vol && mode == 2)
        return op_fail(ctx, TDM_E_UNSUPPORTED, "GridSample mode cubic takes 4-D input only");
    int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3];
    int64_t OH = grid->dims[1], OW = grid->dims[2];
    int64_t dims[5] = {N, C, OH, OW, vol ? grid->dims[3] : 0};
    tdm_status st = op_out(ctx, 0, x->dtype, vol ? 5 : 4, dims);
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
    if (vol) {
        gs_volume(x, grid, px, pg, mode, pad, align, y);
        mem_free(px);
        mem_free(pg);
        return TDM_OK;
    }
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
    if (!x || (x->rank != 4 && x->rank != 5))
        return TDM_OK;
    o->rank = x->rank;
    o->dims[0] = x->dims[0];
    o->dims[1] = x->dims[1];
    for (int k = 2; k < x->rank; k++)
        o->dims[k] = g && g->rank == x->rank ? g->dims[k - 1] : (gr_dim){-1, NULL};
    return TDM_OK;
}

/* ------------------------------------------------------ NonMaxSuppression */

/* Per class: the candidates above the score threshold are sorted once (score
 * descending, index ascending on ties, as onnxruntime pops them), their
 * corners and areas computed once, and each is tested only against the
 * picked boxes that can overlap it, found through a uniform grid. The IoU
 * test is onnxruntime's SuppressByIOU with the same float operations in the
 * same order, so the selection is the one a test of every pair would make:
 * two boxes whose intersection is empty cannot suppress each other, and two
 * boxes with a common interior point share the grid cell of that point
 * (the cell index is a monotonic function of the coordinate). Boxes with a
 * non-finite coordinate make the class fall back to testing every pair. */

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

/* Corners and area of a box. */
typedef struct nms_box {
    float y0, x0, y1, x1, area;
} nms_box;

/* Corners (ymin, xmin, ymax, xmax) and area of every candidate, in
 * candidate order; returns 0 when some coordinate is not finite. */
static int nms_geometry(const float *bp, const nms_cand *cand, size_t nc, int center, nms_box *g)
{
    int finite = 1;
    for (size_t k = 0; k < nc; k++) {
        const float *bx = bp + (size_t)cand[k].index * 4;
        float c0, c1, c2, c3;
        if (center) {
            float xc = bx[0], yc = bx[1], w = bx[2], h = bx[3];
            c0 = yc - h / 2;
            c2 = yc + h / 2;
            c1 = xc - w / 2;
            c3 = xc + w / 2;
        } else {
            c0 = bx[0] < bx[2] ? bx[0] : bx[2];
            c2 = bx[0] < bx[2] ? bx[2] : bx[0];
            c1 = bx[1] < bx[3] ? bx[1] : bx[3];
            c3 = bx[1] < bx[3] ? bx[3] : bx[1];
        }
        g[k] = (nms_box){c0, c1, c2, c3, (c2 - c0) * (c3 - c1)};
        finite &= isfinite(c0) && isfinite(c1) && isfinite(c2) && isfinite(c3);
    }
    return finite;
}

/* Whether picked box p suppresses candidate box k (IoU above thr). */
static int nms_suppresses(const nms_box *k, const nms_box *p, float thr)
{
    float ymin = k->y0 > p->y0 ? k->y0 : p->y0, xmin = k->x0 > p->x0 ? k->x0 : p->x0;
    float ymax = k->y1 < p->y1 ? k->y1 : p->y1, xmax = k->x1 < p->x1 ? k->x1 : p->x1;
    if (xmax <= xmin || ymax <= ymin)
        return 0;
    float inter = (xmax - xmin) * (ymax - ymin);
    float aa = k->area, ab = p->area;
    float uni = aa + ab - inter;
    if (inter <= 0 || aa <= 0 || ab <= 0 || uni <= 0)
        return 0;
    return inter / uni > thr;
}

/* A box covering more cells than this is kept in a list every candidate
 * checks (a picked one) or checks every picked box (a candidate). */
#define NMS_MAX_CELLS 16

/* A picked box in a cell's list: its geometry, copied so that a list is
 * walked without an indirection, and the next node (-1: the end). */
typedef struct nms_node {
    nms_box b;
    int32_t next;
} nms_node;

typedef struct nms_grid {
    float ox, oy, inv;       /* origin and 1 / cell size */
    int64_t gx, gy;          /* cells along x and y */
    int32_t *head;           /* gx * gy list heads, -1: empty */
    size_t cap_head;
    nms_node *node;
    size_t n_node, cap_node;
    int32_t *big;            /* picked candidates on more than NMS_MAX_CELLS cells */
    size_t n_big, cap_big;
} nms_grid;

static void nms_grid_free(nms_grid *gr)
{
    mem_free(gr->head);
    mem_free(gr->node);
    mem_free(gr->big);
}

static int64_t nms_cell(float v, float o, float inv, int64_t n)
{
    float f = (v - o) * inv;
    if (!(f > 0))
        return 0;
    return f >= (float)(n - 1) ? n - 1 : (int64_t)f;
}

/* Sizes the grid over the candidates' extent: cells about the mean box
 * size, at most 4 per candidate. Returns 0 when out of memory; sets gx = 0
 * when no grid helps (every box empty). */
static int nms_grid_init(nms_grid *gr, const nms_box *g, size_t nc)
{
    double lx = INFINITY, ly = INFINITY, hx = -INFINITY, hy = -INFINITY, ext = 0;
    size_t nv = 0;
    gr->gx = gr->gy = 0;
    gr->n_node = gr->n_big = 0;
    for (size_t k = 0; k < nc; k++) {
        const nms_box *b = &g[k];
        if (!(b->x1 > b->x0) || !(b->y1 > b->y0))
            continue;
        lx = b->x0 < lx ? b->x0 : lx;
        ly = b->y0 < ly ? b->y0 : ly;
        hx = b->x1 > hx ? b->x1 : hx;
        hy = b->y1 > hy ? b->y1 : hy;
        ext += ((double)b->x1 - b->x0 + (double)b->y1 - b->y0) / 2;
        nv++;
    }
    if (!nv)
        return 1;
    double cell = ext / (double)nv, limit = 4.0 * (double)nv + 64;
    double wx = hx - lx, wy = hy - ly;
    if (!(cell > 0) || !isfinite(wx) || !isfinite(wy))
        return 1;
    while ((floor(wx / cell) + 1) * (floor(wy / cell) + 1) > limit)
        cell *= 1.5;
    float inv = (float)(1.0 / cell);
    if (!(inv > 0) || !isfinite(inv))
        return 1;
    gr->ox = (float)lx;
    gr->oy = (float)ly;
    gr->inv = inv;
    gr->gx = (int64_t)floor(wx / cell) + 1;
    gr->gy = (int64_t)floor(wy / cell) + 1;
    size_t cells = (size_t)(gr->gx * gr->gy);
    if (mem_grow((void **)&gr->head, &gr->cap_head, cells, sizeof *gr->head))
        return 0;
    memset(gr->head, 0xff, cells * sizeof *gr->head);
    return 1;
}

/* The cell range of box b; returns the number of cells (0: none). */
static int64_t nms_cells(const nms_grid *gr, const nms_box *b, int64_t r[4])
{
    if (!(b->x1 > b->x0) || !(b->y1 > b->y0))
        return 0;
    r[0] = nms_cell(b->x0, gr->ox, gr->inv, gr->gx);
    r[1] = nms_cell(b->x1, gr->ox, gr->inv, gr->gx);
    r[2] = nms_cell(b->y0, gr->oy, gr->inv, gr->gy);
    r[3] = nms_cell(b->y1, gr->oy, gr->inv, gr->gy);
    return (r[1] - r[0] + 1) * (r[3] - r[2] + 1);
}

/* Whether a picked candidate suppresses candidate k. */
static int nms_grid_hit(const nms_grid *gr, const nms_box *g, const int32_t *picked, size_t np, size_t k,
                        float thr)
{
    int64_t r[4];
    const nms_box *b = &g[k];
    int64_t n = nms_cells(gr, b, r);
    if (!n)
        return 0; /* an empty box overlaps nothing */
    if (n > NMS_MAX_CELLS) {
        for (size_t j = 0; j < np; j++)
            if (nms_suppresses(b, &g[picked[j]], thr))
                return 1;
        return 0;
    }
    for (size_t j = 0; j < gr->n_big; j++)
        if (nms_suppresses(b, &g[gr->big[j]], thr))
            return 1;
    for (int64_t cy = r[2]; cy <= r[3]; cy++)
        for (int64_t cx = r[0]; cx <= r[1]; cx++)
            for (int32_t e = gr->head[cy * gr->gx + cx]; e >= 0; e = gr->node[e].next)
                if (nms_suppresses(b, &gr->node[e].b, thr))
                    return 1;
    return 0;
}

/* Registers picked candidate k in its cells; returns 0 when out of memory. */
static int nms_grid_add(nms_grid *gr, const nms_box *g, size_t k)
{
    int64_t r[4];
    int64_t n = nms_cells(gr, &g[k], r);
    if (!n)
        return 1;
    if (n > NMS_MAX_CELLS) {
        if (mem_grow((void **)&gr->big, &gr->cap_big, gr->n_big + 1, sizeof *gr->big))
            return 0;
        gr->big[gr->n_big++] = (int32_t)k;
        return 1;
    }
    if (mem_grow((void **)&gr->node, &gr->cap_node, gr->n_node + (size_t)n, sizeof *gr->node))
        return 0;
    for (int64_t cy = r[2]; cy <= r[3]; cy++)
        for (int64_t cx = r[0]; cx <= r[1]; cx++) {
            int32_t *h = &gr->head[cy * gr->gx + cx];
            gr->node[gr->n_node] = (nms_node){g[k], *h};
            *h = (int32_t)gr->n_node++;
        }
    return 1;
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
    if (NS > INT32_MAX / NMS_MAX_CELLS)
        return op_fail(ctx, TDM_E_RUNTIME, "%lld boxes are more than NonMaxSuppression handles",
                       (long long)NS);
    if (maxo < 0)
        maxo = 0;
    if (maxo > NS)
        maxo = NS;
    const float *bp = boxes->data, *sp = scores->data;
    size_t cap = 0, n_sel = 0, ns = (size_t)NS;
    int64_t *sel = NULL;
    nms_cand *cand = mem_alloc(ns * sizeof *cand + 1);
    int32_t *picked = mem_alloc(ns * sizeof *picked + 1);
    nms_box *g = mem_alloc(ns * sizeof *g + 1);
    nms_grid grid = {0};
    tdm_status st = TDM_OK;
    if (!cand || !picked || !g) {
        st = op_fail(ctx, TDM_E_NOMEM, "out of memory");
        goto done;
    }
    for (int64_t b = 0; b < NB && maxo > 0; b++)
        for (int64_t c = 0; c < NC; c++) {
            const float *sc = sp + (size_t)((b * NC + c) * NS);
            const float *bb = bp + (size_t)(b * NS * 4);
            size_t nc = 0;
            for (int64_t i = 0; i < NS; i++)
                if (!has_sc || sc[i] > sthr)
                    cand[nc++] = (nms_cand){sc[i], i};
            qsort(cand, nc, sizeof *cand, nms_cmp);
            int use_grid = nms_geometry(bb, cand, nc, center, g);
            if (use_grid && !nms_grid_init(&grid, g, nc)) {
                st = op_fail(ctx, TDM_E_NOMEM, "out of memory");
                goto done;
            }
            size_t np = 0;
            for (size_t k = 0; k < nc && (int64_t)np < maxo; k++) {
                int hit = 0;
                if (use_grid && grid.gx)
                    hit = nms_grid_hit(&grid, g, picked, np, k, iou);
                else if (!use_grid)
                    for (size_t j = 0; j < np && !hit; j++)
                        hit = nms_suppresses(&g[k], &g[picked[j]], iou);
                if (hit)
                    continue;
                picked[np++] = (int32_t)k;
                if ((use_grid && grid.gx && !nms_grid_add(&grid, g, k)) ||
                    mem_grow((void **)&sel, &cap, (n_sel + 1) * 3, sizeof *sel)) {
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
    mem_free(g);
    nms_grid_free(&grid);
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

/* ------------------------------------------ AffineGrid, Col2Im: infer hooks */

/* Constant integer input i (at most max values) into v: the count, or -1. */
static int nn_const_ints(const op_infer_ctx *ctx, int i, int64_t *v, int max)
{
    const tdm_tensor *t = i < ctx->n_in && ctx->value ? ctx->value[i] : NULL;
    if (!t || t->kind != TDM_KIND_TENSOR || !dtype_is_int(t->dtype) || t->count > (size_t)max)
        return -1;
    for (size_t k = 0; k < t->count; k++)
        v[k] = tensor_get_i64(t, k);
    return (int)t->count;
}

/* AffineGrid: [N, H, W, 2] or [N, D, H, W, 3] from a constant size (N, C,
 * H, W) or (N, C, D, H, W); else the rank from size's length. */
tdm_status op_infer_AffineGrid(op_infer_ctx *ctx)
{
    const gr_type *th = ctx->n_in > 0 ? ctx->in[0] : NULL, *sz = ctx->n_in > 1 ? ctx->in[1] : NULL;
    gr_type *o = &ctx->out[0];
    o->kind = TDM_KIND_TENSOR;
    o->dtype = th ? th->dtype : TDM_UNDEFINED;
    int64_t s[5];
    int n = nn_const_ints(ctx, 1, s, 5);
    int len = n >= 0 ? n : sz && sz->rank == 1 ? (int)sz->dims[0].v : -1;
    if (len != 4 && len != 5)
        return TDM_OK;
    int nd = len - 2;
    o->rank = nd + 2;
    for (int k = 0; k < nd + 1; k++)
        o->dims[k] = n >= 0 && s[k == 0 ? 0 : k + 1] >= 0 ? (gr_dim){s[k == 0 ? 0 : k + 1], NULL}
                     : k == 0 && th && th->rank == 3 ? th->dims[0] : (gr_dim){-1, NULL};
    o->dims[nd + 1] = (gr_dim){nd, NULL};
    return TDM_OK;
}

/* Col2Im: [N, C, image_shape...], C = input's dim 1 / prod(block_shape)
 * when both shapes are constant. */
tdm_status op_infer_Col2Im(op_infer_ctx *ctx)
{
    const gr_type *x = ctx->n_in > 0 ? ctx->in[0] : NULL;
    gr_type *o = &ctx->out[0];
    o->kind = TDM_KIND_TENSOR;
    o->dtype = x ? x->dtype : TDM_UNDEFINED;
    int64_t img[NN_MAX_SP], blk[NN_MAX_SP];
    int ni = nn_const_ints(ctx, 1, img, NN_MAX_SP), nb = nn_const_ints(ctx, 2, blk, NN_MAX_SP);
    const gr_type *im = ctx->n_in > 1 ? ctx->in[1] : NULL;
    int nd = ni >= 0 ? ni : im && im->rank == 1 && im->dims[0].v >= 1 && im->dims[0].v <= NN_MAX_SP ? (int)im->dims[0].v
                                                                                                    : -1;
    if (nd < 1)
        return TDM_OK;
    o->rank = nd + 2;
    for (int k = 0; k < nd + 2; k++)
        o->dims[k] = (gr_dim){-1, NULL};
    if (x && x->rank == 3) {
        o->dims[0] = x->dims[0];
        int64_t K = 1;
        for (int k = 0; nb == nd && k < nb && K > 0; k++)
            K = blk[k] >= 1 && K <= INT64_MAX / blk[k] ? K * blk[k] : 0;
        if (nb == nd && K > 0 && x->dims[1].v >= 0 && x->dims[1].v % K == 0)
            o->dims[1] = (gr_dim){x->dims[1].v / K, NULL};
    }
    for (int k = 0; ni == nd && k < nd; k++)
        if (img[k] >= 0)
            o->dims[2 + k] = (gr_dim){img[k], NULL};
    return TDM_OK;
}
