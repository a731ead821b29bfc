/* Pooling: MaxPool (with Indices), AveragePool, LpPool, the global pools,
 * MaxUnpool, MaxRoiPool and RoiAlign. Windowed pools handle 1 to 3 spatial
 * dims as 3-D with leading extents of 1. */
#include "ops/nn.h"
#include "core/mem.h"
#include "core/pool.h"
#include "ops/nn_pool_avx2.h"

#include <math.h>
#include <string.h>

typedef struct pool_plan {
    nn_geom g;
    size_t planes;        /* N * C */
    size_t in_sz, out_sz; /* per plane */
    int yrank;
    int64_t ydims[2 + NN_MAX_SP];
} pool_plan;

static tdm_status pool_prepare(op_ctx *ctx, const tdm_tensor *x, int use_dil, int use_ceil, pool_plan *p)
{
    memset(p, 0, sizeof *p);
    if (x->rank < 3 || x->rank > 2 + NN_MAX_SP)
        return op_fail(ctx, TDM_E_UNSUPPORTED, "input X has rank %d; 3 to %d are supported", x->rank, 2 + NN_MAX_SP);
    int nsp = x->rank - 2;
    tdm_status st = op_nn_geom(ctx->err, ctx->node, nsp, x->dims + 2, NULL, use_dil, use_ceil, &p->g);
    if (st)
        return st;
    p->planes = (size_t)(x->dims[0] * x->dims[1]);
    p->in_sz = (size_t)(p->g.in[0] * p->g.in[1] * p->g.in[2]);
    p->yrank = x->rank;
    p->ydims[0] = x->dims[0];
    p->ydims[1] = x->dims[1];
    for (int i = 0; i < nsp; i++)
        p->ydims[2 + i] = p->g.out[NN_MAX_SP - nsp + i];
    size_t cnt;
    if (shape_count(p->yrank, p->ydims, &cnt))
        return op_fail(ctx, TDM_E_NOMEM, "the output is too large");
    p->out_sz = (size_t)(p->g.out[0] * p->g.out[1] * p->g.out[2]);
    return TDM_OK;
}

/* Loops over every output position of every plane with the valid window
 * taps [dlo,dhi) x [hlo,hhi) x [wlo,whi) and their input offsets. BODY sees
 * pl (plane), o (output index), x0/... */
#define POOL_FOR_EACH(p, ...)                                                                                    \
    do {                                                                                                         \
        const nn_geom *g_ = &(p)->g;                                                                             \
        size_t o = 0;                                                                                            \
        for (size_t pl = 0; pl < (p)->planes; pl++)                                                              \
            for (int64_t od = 0; od < g_->out[0]; od++) {                                                        \
                int64_t cd = od * g_->s[0] - g_->pb[0], dlo, dhi;                                                \
                nn_index_range(g_->k[0], g_->in[0], g_->d[0], cd, &dlo, &dhi);                                   \
                for (int64_t oh = 0; oh < g_->out[1]; oh++) {                                                    \
                    int64_t ch = oh * g_->s[1] - g_->pb[1], hlo, hhi;                                            \
                    nn_index_range(g_->k[1], g_->in[1], g_->d[1], ch, &hlo, &hhi);                               \
                    for (int64_t ow = 0; ow < g_->out[2]; ow++, o++) {                                           \
                        int64_t cw = ow * g_->s[2] - g_->pb[2], wlo, whi;                                        \
                        nn_index_range(g_->k[2], g_->in[2], g_->d[2], cw, &wlo, &whi);                           \
                        __VA_ARGS__                                                                              \
                    }                                                                                            \
                }                                                                                                \
            }                                                                                                    \
    } while (0)

#define MAXPOOL_KERNEL(T, X, Y, IDX, P, COLMAJOR)                                                                \
    do {                                                                                                         \
        const int64_t H_ = (P)->g.in[1], W_ = (P)->g.in[2], D_ = (P)->g.in[0];                                   \
        POOL_FOR_EACH(P, {                                                                                       \
            const T *xp_ = (X) + pl * (P)->in_sz;                                                                \
            T best_ = 0;                                                                                         \
            int64_t bi_ = -1;                                                                                    \
            for (int64_t kd = dlo; kd < dhi; kd++) {                                                             \
                int64_t id_ = cd + kd * g_->d[0];                                                                \
                for (int64_t kh = hlo; kh < hhi; kh++) {                                                         \
                    int64_t ih_ = ch + kh * g_->d[1];                                                            \
                    const T *row_ = xp_ + (id_ * H_ + ih_) * W_;                                                 \
                    for (int64_t kw = wlo; kw < whi; kw++) {                                                     \
                        int64_t iw_ = cw + kw * g_->d[2];                                                        \
                        T v_ = row_[iw_];                                                                        \
                        if (bi_ < 0 || v_ > best_) {                                                             \
                            best_ = v_;                                                                          \
                            bi_ = (COLMAJOR) ? (iw_ * H_ + ih_) * D_ + id_ : (id_ * H_ + ih_) * W_ + iw_;        \
                        }                                                                                        \
                    }                                                                                            \
                }                                                                                                \
            }                                                                                                    \
            (Y)[o] = best_;                                                                                      \
            if (IDX)                                                                                             \
                (IDX)[o] = bi_ < 0 ? 0 : (int64_t)(pl * (P)->in_sz) + bi_;                                       \
        });                                                                                                      \
    } while (0)

/* MaxPool over float without indices, 2-D windows (depth 1): one task per
 * group of planes; the interior of each output row runs tap by tap over
 * the whole row (vectorisable), the borders as the generic kernel. Every
 * output compares its taps in the generic kernel's order with the same
 * test, so NaNs and ties come out identical. */
typedef struct maxpool_job {
    const pool_plan *p;
    const float *x;
    float *y;
    size_t per;
    int avx2;
} maxpool_job;

static void maxpool_plane(const pool_plan *p, const float *x, float *y, int avx2)
{
    const nn_geom *g = &p->g;
    const int64_t H = g->in[1], W = g->in[2], OH = g->out[1], OW = g->out[2];
    const int64_t sh = g->s[1], sw = g->s[2], dh = g->d[1], dw = g->d[2], kh = g->k[1], kw = g->k[2];
    /* ow whose whole window row lies inside [0, W) */
    int64_t wlo_all, whi_all;
    {
        int64_t l = g->pb[2] <= 0 ? 0 : (g->pb[2] + sw - 1) / sw;
        int64_t top = W - 1 - (kw - 1) * dw + g->pb[2];
        int64_t h = top < 0 ? 0 : top / sw + 1;
        wlo_all = l < OW ? l : OW;
        whi_all = h < OW ? h : OW;
        if (whi_all < wlo_all)
            whi_all = wlo_all;
    }
    for (int64_t oh = 0; oh < OH; oh++) {
        int64_t ch = oh * sh - g->pb[1], hlo, hhi;
        nn_index_range(kh, H, dh, ch, &hlo, &hhi);
        float *yr = y + oh * OW;
        for (int64_t ow = 0; ow < OW; ow++) {
            if (ow == wlo_all && wlo_all < whi_all && hlo < hhi) {
                ow = whi_all - 1;
                continue;
            }
            int64_t cw = ow * sw - g->pb[2], wlo, whi;
            nn_index_range(kw, W, dw, cw, &wlo, &whi);
            float best = 0;
            int first = 1;
            for (int64_t a = hlo; a < hhi; a++) {
                const float *row = x + (ch + a * dh) * W;
                for (int64_t b = wlo; b < whi; b++) {
                    float v = row[cw + b * dw];
                    if (first || v > best) {
                        best = v;
                        first = 0;
                    }
                }
            }
            yr[ow] = best;
        }
        if (hlo >= hhi || wlo_all >= whi_all)
            continue;
        const int64_t n = whi_all - wlo_all, base = wlo_all * sw - g->pb[2];
        float *yi = yr + wlo_all;
        int first = 1;
        for (int64_t a = hlo; a < hhi; a++) {
            const float *row = x + (ch + a * dh) * W + base;
            for (int64_t b = 0; b < kw; b++) {
                const float *src = row + b * dw;
                if (avx2) {
                    op_maxpool_tap_avx2(src, yi, n, sw, first);
                    first = 0;
                } else if (first) {
                    for (int64_t i = 0; i < n; i++)
                        yi[i] = src[i * sw];
                    first = 0;
                } else if (sw == 1) {
                    for (int64_t i = 0; i < n; i++)
                        yi[i] = src[i] > yi[i] ? src[i] : yi[i];
                } else {
                    for (int64_t i = 0; i < n; i++)
                        yi[i] = src[i * sw] > yi[i] ? src[i * sw] : yi[i];
                }
            }
        }
    }
}

#define POOL_FAST_TAPS 64 /* taps of the AVX2 max-pool row kernel */

/* maxpool_plane at dilation 1, stride 1 across by the AVX2 row kernel
 * (op_maxpool_rows_avx2), stride 2 across (kw >= 2) by the stride-2 one
 * (op_maxpool_s2_avx2, which reads the input rows in place), on the
 * outputs whose window lies across the input, the others as
 * maxpool_plane. */
static void maxpool_plane_fast(const pool_plan *p, const float *x, float *y)
{
    const nn_geom *g = &p->g;
    const int64_t H = g->in[1], W = g->in[2], OH = g->out[1], OW = g->out[2];
    const int64_t sh = g->s[1], sw = g->s[2], kh = g->k[1], kw = g->k[2];
    int64_t wlo_all, whi_all; /* ow whose whole window row lies inside [0, W) */
    {
        int64_t l = g->pb[2] <= 0 ? 0 : (g->pb[2] + sw - 1) / sw;
        int64_t top = W - kw + g->pb[2];
        int64_t h = top < 0 ? 0 : top / sw + 1;
        wlo_all = l < OW ? l : OW;
        whi_all = h < OW ? h : OW;
        if (whi_all < wlo_all)
            whi_all = wlo_all;
    }
    const int64_t base = wlo_all * sw - g->pb[2], n = whi_all - wlo_all;
    int64_t off[POOL_FAST_TAPS];
    for (int64_t oh = 0; oh < OH; oh++) { /* the outputs the kernel leaves */
        const int64_t ch = oh * sh - g->pb[1];
        const int64_t hlo = ch < 0 ? -ch : 0, hhi = H - ch < kh ? H - ch : kh;
        float *yr = y + oh * OW;
        const int inner = hlo < hhi && n > 0;
        if (inner && wlo_all == 0 && whi_all == OW)
            continue; /* all the kernel's */
        for (int64_t ow = 0; ow < OW; ow++) {
            if (inner && ow == wlo_all) {
                ow = whi_all - 1;
                continue;
            }
            const int64_t cw = ow * sw - g->pb[2];
            const int64_t wlo = cw < 0 ? -cw : 0, whi = W - cw < kw ? W - cw : kw;
            float best = 0;
            int first = 1;
            for (int64_t a = hlo; a < hhi; a++) {
                const float *row = x + (ch + a) * W + cw;
                for (int64_t b = wlo; b < whi; b++) {
                    float v = row[b];
                    if (first || v > best) {
                        best = v;
                        first = 0;
                    }
                }
            }
            yr[ow] = best;
        }
    }
    for (int64_t oh = 0; oh < OH && n > 0;) {
        const int64_t ch = oh * sh - g->pb[1];
        const int64_t hlo = ch < 0 ? -ch : 0, hhi = H - ch < kh ? H - ch : kh;
        if (hlo >= hhi) {
            oh++;
            continue;
        }
        /* the rows below with whole windows down (to output row
         * (H - kh + pb) / sh) share the taps */
        int64_t rows = 1;
        if (hlo == 0 && hhi == kh) {
            const int64_t last = (H - kh + g->pb[1]) / sh;
            rows = (last < OH - 1 ? last : OH - 1) - oh + 1;
        }
        const float *src = x + (ch + hlo) * W;
        if (sw == 2) {
            op_maxpool_s2_avx2(src + base, W, sh, hhi - hlo, kw, y + oh * OW + wlo_all, OW, rows, n);
        } else {
            int nt = 0;
            for (int64_t a = hlo; a < hhi; a++)
                for (int64_t b = 0; b < kw; b++)
                    off[nt++] = (a - hlo) * W + base + b;
            op_maxpool_rows_avx2(src, sh * W, off, nt, y + oh * OW + wlo_all, OW, rows, n);
        }
        oh += rows;
    }
}

static void task_maxpool(void *arg, size_t t)
{
    const maxpool_job *j = arg;
    const nn_geom *g = &j->p->g;
    /* the AVX2 row kernels: dilation 1, stride 1 across (up to
     * POOL_FAST_TAPS taps) or stride 2 with windows 2 or more wide */
    int fast = j->avx2 && g->d[1] == 1 && g->d[2] == 1 &&
               ((g->s[2] == 1 && g->k[1] * g->k[2] <= POOL_FAST_TAPS) || (g->s[2] == 2 && g->k[2] >= 2));
    for (size_t pl = t * j->per; pl < j->p->planes && pl < (t + 1) * j->per; pl++) {
        if (fast)
            maxpool_plane_fast(j->p, j->x + pl * j->p->in_sz, j->y + pl * j->p->out_sz);
        else
            maxpool_plane(j->p, j->x + pl * j->p->in_sz, j->y + pl * j->p->out_sz, j->avx2);
    }
}

tdm_status op_run_MaxPool(op_ctx *ctx)
{
    const tdm_tensor *x = op_nn_in(ctx, 0);
    if (!x)
        return op_fail(ctx, TDM_E_MODEL, "input X is required");
    pool_plan p;
    tdm_status st = pool_prepare(ctx, x, ctx->version >= 10, ctx->version >= 10, &p);
    if (st)
        return st;
    int colmajor = gr_attr_int(ctx->node, "storage_order", 0) != 0;
    st = op_out(ctx, 0, x->dtype, p.yrank, p.ydims);
    if (st)
        return st;
    int64_t *idx = NULL;
    if (op_out_wanted(ctx, 1)) {
        st = op_out(ctx, 1, TDM_INT64, p.yrank, p.ydims);
        if (st)
            return st;
        idx = ctx->out[1]->data;
    }
    tdm_tensor *y = ctx->out[0];
    if (x->dtype == TDM_FLOAT && !idx && p.g.in[0] == 1 && p.g.k[0] == 1 && p.g.out[0] == 1 && p.planes) {
        int threads = ctx->threads > 0 ? ctx->threads : 1;
        maxpool_job j = {&p, x->data, y->data, 0, gemm_avx2_usable()};
        size_t bytes = (p.in_sz + p.out_sz) * sizeof(float), tasks = pool_tasks(threads, p.planes, 1);
        if (bytes * p.planes < 2 * POOL_MIN_BYTES)
            tasks = 1;
        else if (tasks > p.planes * bytes / POOL_MIN_BYTES)
            tasks = p.planes * bytes / POOL_MIN_BYTES;
        j.per = (p.planes + tasks - 1) / tasks;
        pool_run(threads, (p.planes + j.per - 1) / j.per, task_maxpool, &j);
        return TDM_OK;
    }
    switch (x->dtype) {
    case TDM_FLOAT: {
        const float *xp = x->data;
        float *yp = y->data;
        MAXPOOL_KERNEL(float, xp, yp, idx, &p, colmajor);
        return TDM_OK;
    }
    case TDM_DOUBLE: {
        const double *xp = x->data;
        double *yp = y->data;
        MAXPOOL_KERNEL(double, xp, yp, idx, &p, colmajor);
        return TDM_OK;
    }
    case TDM_INT8: {
        const int8_t *xp = x->data;
        int8_t *yp = y->data;
        MAXPOOL_KERNEL(int8_t, xp, yp, idx, &p, colmajor);
        return TDM_OK;
    }
    case TDM_UINT8: {
        const uint8_t *xp = x->data;
        uint8_t *yp = y->data;
        MAXPOOL_KERNEL(uint8_t, xp, yp, idx, &p, colmajor);
        return TDM_OK;
    }
    case TDM_FLOAT16:
    case TDM_BFLOAT16: {
        float *xp = op_nn_to_f32(x), *yp = mem_alloc(y->count * sizeof *yp + 1);
        if (!xp || !yp) {
            mem_free(xp);
            mem_free(yp);
            return op_fail(ctx, TDM_E_NOMEM, "out of memory");
        }
        MAXPOOL_KERNEL(float, xp, yp, idx, &p, colmajor);
        op_nn_from_f32(y, yp);
        mem_free(xp);
        mem_free(yp);
        return TDM_OK;
    }
    default:
        return op_fail(ctx, TDM_E_UNSUPPORTED, "MaxPool does not take %s", tdm_dtype_name(x->dtype));
    }
}

/* AveragePool (kind 0) and LpPool (kind 1, exponent lp) over float or
 * double data. */
#define AVGPOOL_KERNEL(T, X, Y, P, INCLUDE_PAD, KIND, LP)                                                        \
    do {                                                                                                         \
        const int64_t H_ = (P)->g.in[1], W_ = (P)->g.in[2];                                                      \
        POOL_FOR_EACH(P, {                                                                                       \
            const T *xp_ = (X) + pl * (P)->in_sz;                                                                \
            T sum_ = 0;                                                                                          \
            for (int64_t kd = dlo; kd < dhi; kd++) {                                                             \
                int64_t id_ = cd + kd * g_->d[0];                                                                \
                for (int64_t kh = hlo; kh < hhi; kh++) {                                                         \
                    int64_t ih_ = ch + kh * g_->d[1];                                                            \
                    const T *row_ = xp_ + (id_ * H_ + ih_) * W_;                                                 \
                    for (int64_t kw = wlo; kw < whi; kw++) {                                                     \
                        T v_ = row_[cw + kw * g_->d[2]];                                                         \
                        if ((KIND) == 0)                                                                         \
                            sum_ += v_;                                                                          \
                        else if ((LP) == 2)                                                                      \
                            sum_ += v_ * v_;                                                                     \
                        else if ((LP) == 1)                                                                      \
                            sum_ += (T)fabs((double)v_);                                                         \
                        else                                                                                     \
                            sum_ += (T)pow(fabs((double)v_), (double)(LP));                                      \
                    }                                                                                            \
                }                                                                                                \
            }                                                                                                    \
            if ((KIND) == 0) {                                                                                   \
                int64_t cnt_;                                                                                    \
                if (INCLUDE_PAD) {                                                                               \
                    /* the window clipped to the padded input */                                                  \
                    int64_t pdlo, pdhi, phlo, phhi, pwlo, pwhi;                                                  \
                    nn_index_range(g_->k[0], g_->in[0] + g_->pb[0] + g_->pe[0], g_->d[0], cd + g_->pb[0],        \
                                   &pdlo, &pdhi);                                                                \
                    nn_index_range(g_->k[1], g_->in[1] + g_->pb[1] + g_->pe[1], g_->d[1], ch + g_->pb[1],        \
                                   &phlo, &phhi);                                                                \
                    nn_index_range(g_->k[2], g_->in[2] + g_->pb[2] + g_->pe[2], g_->d[2], cw + g_->pb[2],        \
                                   &pwlo, &pwhi);                                                                \
                    cnt_ = (pdhi - pdlo) * (phhi - phlo) * (pwhi - pwlo);                                        \
                } else {                                                                                         \
                    cnt_ = (dhi - dlo) * (hhi - hlo) * (whi - wlo);                                              \
                }                                                                                                \
                (Y)[o] = cnt_ > 0 ? sum_ / (T)cnt_ : (T)0;                                                       \
            } else {                                                                                             \
                (Y)[o] = (LP) == 2 ? (T)sqrt((double)sum_)                                                       \
                         : (LP) == 1 ? sum_                                                                     \
                                     : (T)pow((double)sum_, 1.0 / (double)(LP));                                 \
            }                                                                                                    \
        });                                                                                                      \
    } while (0)

static tdm_status avg_lp_pool(op_ctx *ctx, int kind)
{
    const tdm_tensor *x = op_nn_in(ctx, 0);
    if (!x)
        return op_fail(ctx, TDM_E_MODEL, "input X is required");
    if (!(DT_BIT(x->dtype) & DT_FLOATS))
        return op_fail(ctx, TDM_E_UNSUPPORTED, "%s does not take %s", ctx->node->op_type, tdm_dtype_name(x->dtype));
    pool_plan p;
    /* dilations: AveragePool from 19, LpPool from 18 (with ceil_mode) */
    int dil = kind == 0 ? ctx->version >= 19 : ctx->version >= 18;
    int ceil_mode = kind == 0 ? ctx->version >= 10 : ctx->version >= 18;
    tdm_status st = pool_prepare(ctx, x, dil, ceil_mode, &p);
    if (st)
        return st;
    int inc = kind == 0 && gr_attr_int(ctx->node, "count_include_pad", 0) != 0;
    int64_t lp = 2;
    if (kind == 1) {
        if (ctx->version >= 2)
            lp = gr_attr_int(ctx->node, "p", 2);
        else
            lp = (int64_t)gr_attr_float(ctx->node, "p", 2.0f);
        if (lp < 1)
            return op_fail(ctx, TDM_E_MODEL, "attribute p must be 1 or more");
    }
    st = op_out(ctx, 0, x->dtype, p.yrank, p.ydims);
    if (st)
        return st;
    tdm_tensor *y = ctx->out[0];
    if (x->dtype == TDM_DOUBLE) {
        const double *xp = x->data;
        double *yp = y->data;
        AVGPOOL_KERNEL(double, xp, yp, &p, inc, kind, lp);
        return TDM_OK;
    }
    if (x->dtype == TDM_FLOAT) {
        const float *xp = x->data;
        float *yp = y->data;
        AVGPOOL_KERNEL(float, xp, yp, &p, inc, kind, lp);
        return TDM_OK;
    }
    float *xp = op_nn_to_f32(x), *yp = mem_alloc(y->count * sizeof *yp + 1);
    if (!xp || !yp) {
        mem_free(xp);
        mem_free(yp);
        return op_fail(ctx, TDM_E_NOMEM, "out of memory");
    }
    AVGPOOL_KERNEL(float, xp, yp, &p, inc, kind, lp);
    op_nn_from_f32(y, yp);
    mem_free(xp);
    mem_free(yp);
    return TDM_OK;
}

tdm_status op_run_AveragePool(op_ctx *ctx) { return avg_lp_pool(ctx, 0); }
tdm_status op_run_LpPool(op_ctx *ctx) { return avg_lp_pool(ctx, 1); }

/* ------------------------------------------------------------ global pools */

/* kind 0 average, 1 max, 2 Lp (exponent p). */
/* Global average / max pooling of float planes, split over the planes. A
 * sum runs in 8 partial sums (element i into sum i mod 8) added in a fixed
 * order, which vectorises and does not depend on the split. */
typedef struct gpool_job {
    const float *x;
    float *y;
    size_t sp, planes, per;
    int kind; /* 0 average, 1 max */
    int avx2; /* averages by op_gap_avx2 */
} gpool_job;

static void gpool_task(void *arg, size_t t)
{
    const gpool_job *j = arg;
    size_t p0 = t * j->per, p1 = p0 + j->per < j->planes ? p0 + j->per : j->planes;
    const size_t sp = j->sp;
    if (j->kind == 0 && j->avx2) {
        op_gap_avx2(j->x + p0 * sp, sp, j->y + p0, p1 - p0);
        return;
    }
    for (size_t pl = p0; pl < p1; pl++) {
        const float *v = j->x + pl * sp;
        if (j->kind == 0) {
            float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            size_t i = 0;
            for (; i + 8 <= sp; i += 8)
                for (size_t l = 0; l < 8; l++)
                    acc[l] += v[i + l];
            for (size_t l = 0; i < sp; i++, l++)
                acc[l] += v[i];
            float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
            j->y[pl] = sp ? s / (float)sp : 0.0f;
        } else {
            float m = v[0];
            for (size_t i = 1; i < sp; i++)
                m = v[i] > m ? v[i] : m;
            j->y[pl] = m;
        }
    }
}

static tdm_status global_pool(op_ctx *ctx, int kind)
{
    const tdm_tensor *x = op_nn_in(ctx, 0);
    if (!x)
        return op_fail(ctx, TDM_E_MODEL, "input X is required");
    if (x->rank < 2)
        return op_fail(ctx, TDM_E_RUNTIME, "input X must have rank 2 or more, not %d", x->rank);
    if (!(DT_BIT(x->dtype) & DT_FLOATS))
        return op_fail(ctx, TDM_E_UNSUPPORTED, "%s does not take %s", ctx->node->op_type, tdm_dtype_name(x->dtype));
    int64_t dims[TDM_MAX_RANK];
    size_t sp = 1;
    dims[0] = x->dims[0];
    dims[1] = x->dims[1];
    for (int i = 2; i < x->rank; i++) {
        dims[i] = 1;
        sp *= (size_t)x->dims[i];
    }
    double lp = kind == 2 ? (double)gr_attr_int(ctx->node, "p", 2) : 2.0;
    if (kind == 2 && ctx->version < 2)
        lp = gr_attr_float(ctx->node, "p", 2.0f);
    tdm_status st = op_out(ctx, 0, x->dtype, x->rank, dims);
    if (st)
        return st;
    tdm_tensor *y = ctx->out[0];
    size_t planes = (size_t)(x->dims[0] * x->dims[1]);
    if (kind == 1 && sp == 0 && planes)
        return op_fail(ctx, TDM_E_RUNTIME, "GlobalMaxPool over an empty spatial extent");
    if (x->dtype == TDM_FLOAT && kind != 2) {
        gpool_job j = {x->data, y->data, sp, planes, 0, kind, gemm_avx2_usable()};
        size_t work;
        if (mem_mul(planes, sp, &work))
            work = SIZE_MAX;
        size_t tasks = pool_tasks(ctx->threads, work, (size_t)1 << 15);
        j.per = (planes + tasks - 1) / tasks;
        if (planes)
            pool_run(ctx->threads, (planes + j.per - 1) / j.per, gpool_task, &j);
        return TDM_OK;
    }
    for (size_t pl = 0; pl < planes; pl++) {
        double acc = kind == 1 ? tensor_get_f64(x, pl * sp) : 0.0;
        for (size_t i = 0; i < sp; i++) {
            double v = tensor_get_f64(x, pl * sp + i);
            if (kind == 0)
                acc += v;
            else if (kind == 1)
                acc = v > acc ? v : acc;
            else
                acc += pow(fabs(v), lp);
        }
        if (kind == 0)
            acc = sp ? acc / (double)sp : 0.0;
        else if (kind == 2)
            acc = pow(acc, 1.0 / lp);
        tensor_set_f64(y, pl, acc);
    }
    return TDM_OK;
}

tdm_status op_run_GlobalAveragePool(op_ctx *ctx) { return global_pool(ctx, 0); }
tdm_status op_run_GlobalMaxPool(op_ctx *ctx) { return global_pool(ctx, 1); }
tdm_status op_run_GlobalLpPool(op_ctx *ctx) { return global_pool(ctx, 2); }

/* --------------------------------------------------------------- MaxUnpool */

tdm_status op_run_MaxUnpool(op_ctx *ctx)
{
    const tdm_tensor *x = op_nn_in(ctx, 0), *ind = op_nn_in(ctx, 1), *osh = op_nn_in(ctx, 2);
    if (!x || !ind)
        return op_fail(ctx, TDM_E_MODEL, "inputs X and I are required");
    if (x->rank < 3 || x->rank > 2 + NN_MAX_SP)
        return op_fail(ctx, TDM_E_UNSUPPORTED, "input X has rank %d; 3 to %d are supported", x->rank, 2 + NN_MAX_SP);
    if (ind->dtype != TDM_INT64 || !shape_equal(x->rank, x->dims, ind->rank, ind->dims))
        return op_fail(ctx, TDM_E_RUNTIME, "input I must be int64 with the shape of X");
    int nsp = x->rank - 2;
    int64_t dims[TDM_MAX_RANK], defd[TDM_MAX_RANK];
    dims[0] = defd[0] = x->dims[0];
    dims[1] = defd[1] = x->dims[1];
    /* the default output shape: indices are positions in it */
    {
        const int64_t *ks = NULL, *st = NULL, *pd = NULL;
        int nk = gr_attr_ints(ctx->node, "kernel_shape", &ks), ns = gr_attr_ints(ctx->node, "strides", &st);
        int np = gr_attr_ints(ctx->node, "pads", &pd);
        if (nk != nsp || (ns >= 0 && ns != nsp) || (np >= 0 && np != 2 * nsp))
            return op_fail(ctx, TDM_E_MODEL, "attributes kernel_shape, strides and pads must match %d spatial dims",
                           nsp);
        for (int i = 0; i < nsp; i++) {
            int64_t s = ns >= 0 ? st[i] : 1;
            if (s < 1 || ks[i] < 1 || s > ((int64_t)1 << 31) || ks[i] > ((int64_t)1 << 31))
                return op_fail(ctx, TDM_E_MODEL, "attributes kernel_shape and strides must be positive");
            defd[2 + i] = (x->dims[2 + i] - 1) * s + ks[i] - (np >= 0 ? pd[i] + pd[i + nsp] : 0);
            if (defd[2 + i] < 0)
                return op_fail(ctx, TDM_E_RUNTIME, "the output shape has a negative dimension");
        }
    }
    if (osh) {
        int64_t *v;
        size_t n;
        tdm_status st = op_in_ints(ctx, 2, &v, &n);
        if (st)
            return st;
        if (n != (size_t)x->rank) {
            mem_free(v);
            return op_fail(ctx, TDM_E_RUNTIME, "input output_shape must hold %d values, not %zu", x->rank, n);
        }
        for (int i = 0; i < x->rank; i++)
            dims[i] = v[i];
        mem_free(v);
        if (dims[0] != x->dims[0] || dims[1] != x->dims[1])
            return op_fail(ctx, TDM_E_RUNTIME, "input output_shape must keep the batch and channel sizes of X");
    } else {
        memcpy(dims, defd, sizeof(int64_t) * (size_t)x->rank);
    }
    for (int i = 2; i < x->rank; i++)
        if (dims[i] < 0)
            return op_fail(ctx, TDM_E_RUNTIME, "the output shape has a negative dimension");
    tdm_status st = op_out(ctx, 0, x->dtype, x->rank, dims);
    if (st)
        return st;
    tdm_tensor *y = ctx->out[0];
    size_t es = tdm_dtype_size(x->dtype);
    if (!es)
        return op_fail(ctx, TDM_E_UNSUPPORTED, "MaxUnpool does not take %s", tdm_dtype_name(x->dtype));
    memset(y->data, 0, y->nbytes);
    const int64_t *ip = ind->data;
    size_t def_count;
    if (shape_count(x->rank, defd, &def_count))
        return op_fail(ctx, TDM_E_NOMEM, "the output is too large");
    int same = shape_equal(x->rank, dims, x->rank, defd);
    for (size_t i = 0; i < x->count; i++) {
        if (ip[i] < 0 || (uint64_t)ip[i] >= def_count)
            return op_fail(ctx, TDM_E_RUNTIME, "index %lld in I is outside the unpooled shape (%zu elements)",
                           (long long)ip[i], def_count);
        size_t dst = (size_t)ip[i];
        if (!same) {
            /* re-encode the position from the default shape into the given one */
            size_t rem = dst, mul = 1;
            dst = 0;
            for (int d = x->rank - 1; d >= 0; d--) {
                size_t c = rem % (size_t)defd[d];
                rem /= (size_t)defd[d];
                if (c >= (size_t)dims[d])
                    return op_fail(ctx, TDM_E_RUNTIME, "index %lld in I falls outside output_shape",
                                   (long long)ip[i]);
                dst += c * mul;
                mul *= (size_t)dims[d];
            }
        }
        memcpy((char *)y->data + dst * es, (const char *)x->data + i * es, es);
    }
    return TDM_OK;
}

/* -------------------------------------------------------------- MaxRoiPool */

tdm_status op_run_MaxRoiPool(op_ctx *ctx)
{
    const tdm_tensor *x = op_nn_in(ctx, 0), *rois = op_nn_in(ctx, 1);
    if (!x || !rois)
        return op_fail(ctx, TDM_E_MODEL, "inputs X and rois are required");
    if (x->rank != 4 || rois->rank != 2 || rois->dims[1] != 5)
        return op_fail(ctx, TDM_E_RUNTIME, "X must be NxCxHxW and rois num_rois x 5");
    if (!(DT_BIT(x->dtype) & DT_FLOATS) || rois->dtype != x->dtype)
        return op_fail(ctx, TDM_E_UNSUPPORTED, "X and rois must be one floating-point type");
    const int64_t *ps = NULL;
    if (gr_attr_ints(ctx->node, "pooled_shape", &ps) != 2 || ps[0] < 1 || ps[1] < 1)
        return op_fail(ctx, TDM_E_MODEL, "attribute pooled_shape must hold two positive values");
    double scale = gr_attr_float(ctx->node, "spatial_scale", 1.0f);
    int64_t C = x->dims[1], H = x->dims[2], W = x->dims[3], R = rois->dims[0];
    int64_t dims[4] = {R, C, ps[0], ps[1]};
    tdm_status st = op_out(ctx, 0, x->dtype, 4, dims);
    if (st)
        return st;
    tdm_tensor *y = ctx->out[0];
    size_t o = 0;
    for (int64_t r = 0; r < R; r++) {
        int64_t b = (int64_t)tensor_get_f64(rois, (size_t)r * 5);
        if (b < 0 || b >= x->dims[0])
            return op_fail(ctx, TDM_E_RUNTIME, "roi %lld names batch %lld, outside 0..%lld", (long long)r,
                           (long long)b, (long long)(x->dims[0] - 1));
        int64_t x1 = (int64_t)round(tensor_get_f64(rois, (size_t)r * 5 + 1) * scale);
        int64_t y1 = (int64_t)round(tensor_get_f64(rois, (size_t)r * 5 + 2) * scale);
        int64_t x2 = (int64_t)round(tensor_get_f64(rois, (size_t)r * 5 + 3) * scale);
        int64_t y2 = (int64_t)round(tensor_get_f64(rois, (size_t)r * 5 + 4) * scale);
        int64_t rw = x2 - x1 + 1 > 1 ? x2 - x1 + 1 : 1, rh = y2 - y1 + 1 > 1 ? y2 - y1 + 1 : 1;
        double bh = (double)rh / (double)ps[0], bw = (double)rw / (double)ps[1];
        for (int64_t c = 0; c < C; c++) {
            size_t plane = (size_t)((b * C + c) * H * W);
            for (int64_t ph = 0; ph < ps[0]; ph++)
                for (int64_t pw = 0; pw < ps[1]; pw++, o++) {
                    int64_t hs = (int64_t)floor((double)ph * bh) + y1, he = (int64_t)ceil((double)(ph + 1) * bh) + y1;
                    int64_t ws = (int64_t)floor((double)pw * bw) + x1, we = (int64_t)ceil((double)(pw + 1) * bw) + x1;
                    hs = hs < 0 ? 0 : hs > H ? H : hs;
                    he = he < 0 ? 0 : he > H ? H : he;
                    ws = ws < 0 ? 0 : ws > W ? W : ws;
                    we = we < 0 ? 0 : we > W ? W : we;
                    double m = 0;
                    int any = 0;
                    for (int64_t h = hs; h < he; h++)
                        for (int64_t w = ws; w < we; w++) {
                            double v = tensor_get_f64(x, plane + (size_t)(h * W + w));
                            if (!any || v > m)
                                m = v;
                            any = 1;
                        }
                    tensor_set_f64(y, o, any ? m : 0.0);
                }
        }
    }
    return TDM_OK;
}

/* ---------------------------------------------------------------- RoiAlign */

typedef struct roi_tap {
    size_t p1, p2, p3, p4;
    float w1, w2, w3, w4;
} roi_tap;

static roi_tap roi_bilinear(int64_t H, int64_t W, float yy, float xx)
{
    roi_tap t = {0, 0, 0, 0, 0, 0, 0, 0};
    if (yy < -1.0f || yy > (float)H || xx < -1.0f || xx > (float)W)
        return t;
    if (yy <= 0)
        yy = 0;
    if (xx <= 0)
        xx = 0;
    int64_t yl = (int64_t)yy, xl = (int64_t)xx, yh, xh;
    if (yl >= H - 1) {
        yh = yl = H - 1;
        yy = (float)yl;
    } else {
        yh = yl + 1;
    }
    if (xl >= W - 1) {
        xh = xl = W - 1;
        xx = (float)xl;
    } else {
        xh = xl + 1;
    }
    float ly = yy - (float)yl, lx = xx - (float)xl, hy = 1.0f - ly, hx = 1.0f - lx;
    t.p1 = (size_t)(yl * W + xl);
    t.p2 = (size_t)(yl * W + xh);
    t.p3 = (size_t)(yh * W + xl);
    t.p4 = (size_t)(yh * W + xh);
    t.w1 = hy * hx;
    t.w2 = hy * lx;
    t.w3 = ly * hx;
    t.w4 = ly * lx;
    return t;
}

tdm_status op_run_RoiAlign(op_ctx *ctx)
{
    const tdm_tensor *x = op_nn_in(ctx, 0), *rois = op_nn_in(ctx, 1), *bi = op_nn_in(ctx, 2);
    if (!x || !rois || !bi)
        return op_fail(ctx, TDM_E_MODEL, "inputs X, rois and batch_indices are required");
    if (x->rank != 4 || rois->rank != 2 || rois->dims[1] != 4 || bi->rank != 1 || bi->dims[0] != rois->dims[0])
        return op_fail(ctx, TDM_E_RUNTIME, "X must be NxCxHxW, rois num_rois x 4 and batch_indices num_rois");
    if (!(DT_BIT(x->dtype) & DT_FLOATS) || rois->dtype != x->dtype || !dtype_is_int(bi->dtype))
        return op_fail(ctx, TDM_E_UNSUPPORTED, "X and rois must be one floating-point type, batch_indices integer");
    const char *mode = gr_attr_str(ctx->node, "mode", "avg");
    int is_max = strcmp(mode, "max") == 0;
    if (!is_max && strcmp(mode, "avg"))
        return op_fail(ctx, TDM_E_MODEL, "attribute mode must be avg or max, not '%s'", mode);
    int half = 0;
    if (ctx->version >= 16) {
        const char *ct = gr_attr_str(ctx->node, "coordinate_transformation_mode", "half_pixel");
        if (strcmp(ct, "half_pixel") == 0)
            half = 1;
        else if (strcmp(ct, "output_half_pixel"))
            return op_fail(ctx, TDM_E_MODEL, "attribute coordinate_transformation_mode has the unknown value '%s'",
                           ct);
    }
    int64_t oh = gr_attr_int(ctx->node, "output_height", 1), ow = gr_attr_int(ctx->node, "output_width", 1);
    int64_t sr = gr_attr_int(ctx->node, "sampling_ratio", 0);
    float scale = gr_attr_float(ctx->node, "spatial_scale", 1.0f);
    if (oh < 1 || ow < 1 || sr < 0 || oh > ((int64_t)1 << 20) || ow > ((int64_t)1 << 20))
        return op_fail(ctx, TDM_E_MODEL, "attributes output_height, output_width and sampling_ratio are invalid");
    int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3], R = rois->dims[0];
    int64_t dims[4] = {R, C, oh, ow};
    tdm_status st = op_out(ctx, 0, x->dtype, 4, dims);
    if (st)
        return st;
    tdm_tensor *y = ctx->out[0];
    float *fx = op_nn_to_f32(x), *fr = op_nn_to_f32(rois), *fy = mem_alloc(y->count * sizeof *fy + 1);
    roi_tap *taps = NULL;
    if (!fx || !fr || !fy) {
        st = op_fail(ctx, TDM_E_NOMEM, "out of memory");
        goto done;
    }
    float off = half ? 0.5f : 0.0f;
    for (int64_t r = 0; r < R; r++) {
        int64_t b = tensor_get_i64(bi, (size_t)r);
        if (b < 0 || b >= N) {
            st = op_fail(ctx, TDM_E_RUNTIME, "batch_indices[%lld] = %lld is outside 0..%lld", (long long)r,
                         (long long)b, (long long)(N - 1));
            goto done;
        }
        const float *rp = fr + r * 4;
        float sw = rp[0] * scale - off, sh = rp[1] * scale - off;
        float rw = rp[2] * scale - off - sw, rh = rp[3] * scale - off - sh;
        if (!half) {
            rw = rw > 1.0f ? rw : 1.0f;
            rh = rh > 1.0f ? rh : 1.0f;
        }
        float bh = rh / (float)oh, bw = rw / (float)ow;
        int64_t gh = sr > 0 ? sr : (int64_t)ceilf(rh / (float)oh);
        int64_t gw = sr > 0 ? sr : (int64_t)ceilf(rw / (float)ow);
        if (gh < 0 || gw < 0 || gh > 4096 || gw > 4096) {
            st = op_fail(ctx, TDM_E_RUNTIME, "roi %lld needs an unreasonable sampling grid", (long long)r);
            goto done;
        }
        int64_t count = gh * gw > 1 ? gh * gw : 1;
        size_t ntaps;
        mem_free(taps);
        taps = NULL;
        if (mem_mul((size_t)(oh * ow), (size_t)count, &ntaps) || mem_mul(ntaps, sizeof *taps, &ntaps)) {
            st = op_fail(ctx, TDM_E_NOMEM, "roi %lld needs too many samples", (long long)r);
            goto done;
        }
        taps = mem_alloc(ntaps);
        if (!taps) {
            st = op_fail(ctx, TDM_E_NOMEM, "out of memory");
            goto done;
        }
        size_t t = 0;
        for (int64_t ph = 0; ph < oh; ph++)
            for (int64_t pw = 0; pw < ow; pw++)
                for (int64_t iy = 0; iy < gh; iy++) {
                    float yy = sh + (float)ph * bh + ((float)iy + 0.5f) * bh / (float)gh;
                    for (int64_t ix = 0; ix < gw; ix++) {
                        float xx = sw + (float)pw * bw + ((float)ix + 0.5f) * bw / (float)gw;
                        taps[t++] = roi_bilinear(H, W, yy, xx);
                    }
                }
        for (int64_t c = 0; c < C; c++) {
            const float *pl = fx + (size_t)((b * C + c) * H * W);
            float *out = fy + (size_t)((r * C + c) * oh * ow);
            const roi_tap *tp = taps;
            for (int64_t k = 0; k < oh * ow; k++) {
                float acc = 0.0f;
                for (int64_t s = 0; s < gh * gw; s++, tp++) {
                    if (!is_max) {
                        acc += tp->w1 * pl[tp->p1] + tp->w2 * pl[tp->p2] + tp->w3 * pl[tp->p3] + tp->w4 * pl[tp->p4];
                    } else {
                        float v = tp->w1 * pl[tp->p1];
                        float v2 = tp->w2 * pl[tp->p2], v3 = tp->w3 * pl[tp->p3], v4 = tp->w4 * pl[tp->p4];
                        v = v2 > v ? v2 : v;
                        v = v3 > v ? v3 : v;
                        v = v4 > v ? v4 : v;
                        acc = s == 0 || v > acc ? v : acc;
                    }
                }
                out[k] = is_max ? acc : acc / (float)count;
            }
        }
    }
    op_nn_from_f32(y, fy);
done:
    mem_free(fx);
    mem_free(fr);
    mem_free(fy);
    mem_free(taps);
    return st;
}

/* ------------------------------------------------------------ infer hooks */

tdm_status op_infer_Pool(op_infer_ctx *ctx)
{
    const gr_type *x = ctx->n_in > 0 ? ctx->in[0] : NULL;
    if (!x)
        return TDM_OK;
    for (int k = 0; k < ctx->n_out && k < 2; k++) {
        gr_type *o = &ctx->out[k];
        o->kind = TDM_KIND_TENSOR;
        o->dtype = k == 0 ? x->dtype : TDM_INT64;
        if (x->rank < 3 || x->rank > 2 + NN_MAX_SP)
            continue;
        int nsp = x->rank - 2;
        o->rank = x->rank;
        o->dims[0] = x->dims[0];
        o->dims[1] = x->dims[1];
        int64_t in[NN_MAX_SP];
        for (int i = 0; i < nsp; i++) {
            in[i] = x->dims[2 + i].v;
            o->dims[2 + i] = (gr_dim){-1, NULL};
        }
        int is_max = strcmp(ctx->node->op_type, "MaxPool") == 0, is_lp = strcmp(ctx->node->op_type, "LpPool") == 0;
        int newer = ctx->version >= 10;
        /* as the run hooks: dilations in MaxPool from 10, AveragePool from 19, LpPool from 18 */
        int dil = is_max ? newer : is_lp ? ctx->version >= 18 : ctx->version >= 19;
        int ceil_mode = is_lp ? ctx->version >= 18 : newer;
        nn_geom g;
        if (op_nn_geom(NULL, ctx->node, nsp, in, NULL, dil, ceil_mode, &g))
            continue;
        for (int i = 0; i < nsp; i++)
            if (g.out[NN_MAX_SP - nsp + i] >= 0)
                o->dims[2 + i] = (gr_dim){g.out[NN_MAX_SP - nsp + i], NULL};
    }
    return TDM_OK;
}

tdm_status op_infer_GlobalPool(op_infer_ctx *ctx)
{
    const gr_type *x = ctx->n_in > 0 ? ctx->in[0] : NULL;
    if (!x)
        return TDM_OK;
    gr_type *o = &ctx->out[0];
    *o = *x;
    o->kind = TDM_KIND_TENSOR;
    for (int i = 2; i < o->rank; i++)
        o->dims[i] = (gr_dim){1, NULL};
    return TDM_OK;
}

tdm_status op_infer_RoiAlign(op_infer_ctx *ctx)
{
    const gr_type *x = ctx->n_in > 0 ? ctx->in[0] : NULL;
    const gr_type *r = ctx->n_in > 1 ? ctx->in[1] : NULL;
    gr_type *o = &ctx->out[0];
    o->kind = TDM_KIND_TENSOR;
    o->dtype = x ? x->dtype : TDM_UNDEFINED;
    o->rank = 4;
    o->dims[0] = r && r->rank == 2 ? r->dims[0] : (gr_dim){-1, NULL};
    o->dims[1] = x && x->rank == 4 ? x->dims[1] : (gr_dim){-1, NULL};
    o->dims[2] = (gr_dim){gr_attr_int(ctx->node, "output_height", 1), NULL};
    o->dims[3] = (gr_dim){gr_attr_int(ctx->node, "output_width", 1), NULL};
    return TDM_OK;
}
