/* Softmax, LogSoftmax, Hardmax, CumSum and TopK.
 *
 * The softmax family views its input as [outer, n, inner] and normalises
 * along n: before opset 13 the input is coerced to 2D at `axis` (n is the
 * product of the dims from axis on, inner is 1); from 13 on n is the one
 * axis. float32 runs in float with double sums; the other float types run
 * in double and are rounded once per output element. */
#include "ops/reduce.h"
#include "core/mem.h"
#include "core/pool.h"
#include "ops/elementwise.h"
#include "ops/nn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { SM_SOFTMAX, SM_LOGSOFTMAX, SM_HARDMAX };

#define SOFTMAX_IMPL(NAME, T, EXP, LOG)                                                                    \
    static void NAME(const T *x, T *y, size_t outer, size_t n, size_t inner, int mode, double *mx,         \
                     double *sm)                                                                           \
    {                                                                                                      \
        size_t blk = n * inner;                                                                            \
        for (size_t a = 0; a < outer; a++, x += blk, y += blk) {                                           \
            if (inner == 1) {                                                                              \
                T m = x[0];                                                                                \
                size_t am = 0;                                                                             \
                for (size_t i = 1; i < n; i++)                                                             \
                    if (x[i] > m) {                                                                        \
                        m = x[i];                                                                          \
                        am = i;                                                                            \
                    }                                                                                      \
                if (mode == SM_HARDMAX) {                                                                  \
                    for (size_t i = 0; i < n; i++)                                                         \
                        y[i] = (T)(i == am);                                                               \
                    continue;                                                                              \
                }                                                                                          \
                double s = 0;                                                                              \
                if (mode == SM_SOFTMAX) {                                                                  \
                    for (size_t i = 0; i < n; i++) {                                                       \
                        T e = EXP(x[i] - m);                                                               \
                        y[i] = e;                                                                          \
                        s += e;                                                                            \
                    }                                                                                      \
                    T r = (T)(1.0 / s);                                                                    \
                    for (size_t i = 0; i < n; i++)                                                         \
                        y[i] *= r;                                                                         \
                } else {                                                                                   \
                    for (size_t i = 0; i < n; i++)                                                         \
                        s += EXP(x[i] - m);                                                                \
                    T l = (T)log(s);                                                                       \
                    for (size_t i = 0; i < n; i++)                                                         \
                        y[i] = x[i] - m - l;                                                               \
                }                                                                                          \
                continue;                                                                                  \
            }                                                                                              \
            /* strided: vectors of inner lanes */                                                          \
            for (size_t j = 0; j < inner; j++) {                                                           \
                mx[j] = (double)x[j];                                                                      \
                sm[j] = 0;                                                                                 \
            }                                                                                              \
            for (size_t i = 1; i < n; i++) {                                                               \
                const T *xr = x + i * inner;                                                               \
                for (size_t j = 0; j < inner; j++)                                                         \
                    if ((double)xr[j] > mx[j]) {                                                           \
                        mx[j] = (double)xr[j];                                                             \
                        if (mode == SM_HARDMAX)                                                            \
                            sm[j] = (double)i;                                                             \
                    }                                                                                      \
            }                                                                                              \
            if (mode == SM_HARDMAX) {                                                                      \
                for (size_t i = 0; i < n; i++)                                                             \
                    for (size_t j = 0; j < inner; j++)                                                     \
                        y[i * inner + j] = (T)((double)i == sm[j]);                                        \
                continue;                                                                                  \
            }                                                                                              \
            for (size_t i = 0; i < n; i++) {                                                               \
                const T *xr = x + i * inner;                                                               \
                T *yr = y + i * inner;                                                                     \
                for (size_t j = 0; j < inner; j++) {                                                       \
                    T e = EXP(xr[j] - (T)mx[j]);                                                           \
                    if (mode == SM_SOFTMAX)                                                                \
                        yr[j] = e;                                                                         \
                    sm[j] += e;                                                                            \
                }                                                                                          \
            }                                                                                              \
            if (mode == SM_SOFTMAX) {                                                                      \
                for (size_t j = 0; j < inner; j++)                                                         \
                    sm[j] = 1.0 / sm[j];                                                                   \
                for (size_t i = 0; i < n; i++)                                                             \
                    for (size_t j = 0; j < inner; j++)                                                     \
                        y[i * inner + j] *= (T)sm[j];                                                      \
            } else {                                                                                       \
                for (size_t j = 0; j < inner; j++)                                                         \
                    sm[j] = mx[j] + LOG(sm[j]);                                                            \
                for (size_t i = 0; i < n; i++)                                                             \
                    for (size_t j = 0; j < inner; j++)                                                     \
                        y[i * inner + j] = (T)((double)x[i * inner + j] - sm[j]);                          \
            }                                                                                              \
        }                                                                                                  \
    }

SOFTMAX_IMPL(softmax_f32, float, expf, log)
SOFTMAX_IMPL(softmax_f64, double, exp, log)

/* float32 Softmax along contiguous rows (inner == 1), split over the rows:
 * the same steps as softmax_f32, the exponentials by the AVX2 loop when
 * the CPU has it. */
typedef struct sm_job {
    const float *x;
    float *y;
    size_t n, rows, per;
    int avx2;
} sm_job;

static void sm_task(void *arg, size_t t)
{
    const sm_job *j = arg;
    const size_t n = j->n;
    size_t r0 = t * j->per, r1 = r0 + j->per < j->rows ? r0 + j->per : j->rows;
    for (size_t a = r0; a < r1; a++) {
        const float *x = j->x + a * n;
        float *y = j->y + a * n;
        if (j->avx2) {
            op_ew_softmax_row_avx2(x, y, n);
            continue;
        }
        float m = x[0];
        for (size_t i = 1; i < n; i++)
            if (x[i] > m)
                m = x[i];
        if (j->avx2)
            op_ew_exp_shift_avx2(x, y, n, m);
        else
            for (size_t i = 0; i < n; i++)
                y[i] = expf(x[i] - m);
        double s = 0;
        for (size_t i = 0; i < n; i++)
            s += y[i];
        float r = (float)(1.0 / s);
        for (size_t i = 0; i < n; i++)
            y[i] *= r;
    }
}

static tdm_status softmax_run(op_ctx *ctx, int mode)
{
    tdm_status st = op_red_check(ctx, 0, DT_FLOATS);
    if (st)
        return st;
    const tdm_tensor *x = ctx->in[0];
    int v13 = ctx->version >= 13;
    int axis = 0;
    size_t outer = 1, n = 1, inner = 1;
    if (x->rank > 0) {
        if ((st = op_axis(ctx, gr_attr_int(ctx->node, "axis", v13 ? -1 : 1), x->rank, "attribute 'axis'", &axis)))
            return st;
        if ((st = op_red_prod(ctx, x->dims, 0, axis, &outer)))
            return st;
        if (v13) {
            n = (size_t)x->dims[axis];
            st = op_red_prod(ctx, x->dims, axis + 1, x->rank, &inner);
        } else {
            st = op_red_prod(ctx, x->dims, axis, x->rank, &n);
        }
        if (st)
            return st;
    }
    if ((st = op_out(ctx, 0, x->dtype, x->rank, x->dims)))
        return st;
    if (x->count == 0)
        return TDM_OK;
    if (x->dtype == TDM_FLOAT && mode == SM_SOFTMAX && inner == 1 && n > 0) {
        sm_job j = {x->data, ctx->out[0]->data, n, outer, 0, gemm_avx2_usable()};
        size_t tasks = pool_tasks(ctx->threads, x->count, (size_t)1 << 13);
        j.per = (outer + tasks - 1) / tasks;
        pool_run(ctx->threads, (outer + j.per - 1) / j.per, sm_task, &j);
        return TDM_OK;
    }
    double *mx = NULL, *sm = NULL, *buf = NULL;
    if ((st = op_red_alloc_f64(ctx, inner, &mx)) || (st = op_red_alloc_f64(ctx, inner, &sm)))
        goto done;
    if (x->dtype == TDM_FLOAT) {
        softmax_f32(x->data, ctx->out[0]->data, outer, n, inner, mode, mx, sm);
    } else {
        if ((st = op_red_load_f64(ctx, x, &buf)))
            goto done;
        softmax_f64(buf, buf, outer, n, inner, mode, mx, sm);
        op_red_put_f64(ctx->out[0], 0, x->count, buf);
    }
done:
    mem_free(mx);
    mem_free(sm);
    mem_free(buf);
    return st;
}

tdm_status op_run_Softmax(op_ctx *ctx) { return softmax_run(ctx, SM_SOFTMAX); }
tdm_status op_run_LogSoftmax(op_ctx *ctx) { return softmax_run(ctx, SM_LOGSOFTMAX); }
tdm_status op_run_Hardmax(op_ctx *ctx) { return softmax_run(ctx, SM_HARDMAX); }

/* ---- CumSum ---- */

static tdm_status scalar_axis(op_ctx *ctx, int i, int rank, int *axis)
{
    int64_t *v = NULL;
    size_t n = 0;
    tdm_status st = op_in_ints(ctx, i, &v, &n);
    if (st)
        return st;
    if (n != 1) {
        mem_free(v);
        return op_fail(ctx, TDM_E_RUNTIME, "input %d ('axis') must hold one value, not %zu", i, n);
    }
    st = op_axis(ctx, v[0], rank, "input 'axis'", axis);
    mem_free(v);
    return st;
}

/* CumSum, and CumProd (26) when prod: running sums or products along the
 * axis (integers wrap modulo 2^64 before the store narrows them). */
static tdm_status cum_run(op_ctx *ctx, int prod)
{
    tdm_status st = op_red_check(ctx, 0, DT_NUMERIC);
    if (st)
        return st;
    const tdm_tensor *x = ctx->in[0];
    int axis;
    if ((st = scalar_axis(ctx, 1, x->rank, &axis)))
        return st;
    if (x->rank == 0)
        return op_fail(ctx, TDM_E_RUNTIME, "input 0 must have rank 1 or more");
    int excl = gr_attr_int(ctx->node, "exclusive", 0) != 0;
    int rev = gr_attr_int(ctx->node, "reverse", 0) != 0;
    size_t outer, n = (size_t)x->dims[axis], inner;
    if ((st = op_red_prod(ctx, x->dims, 0, axis, &outer)) || (st = op_red_prod(ctx, x->dims, axis + 1, x->rank, &inner)))
        return st;
    if ((st = op_out(ctx, 0, x->dtype, x->rank, x->dims)))
        return st;
    if (x->count == 0)
        return TDM_OK;
    int is_int = dtype_is_int(x->dtype);
    double *fb = NULL, *fa = NULL;
    int64_t *ib = NULL, *ia = NULL;
    if (is_int) {
        ib = mem_calloc(x->count, sizeof *ib);
        ia = mem_calloc(inner, sizeof *ia);
    } else {
        fb = mem_calloc(x->count, sizeof *fb);
        fa = mem_calloc(inner, sizeof *fa);
    }
    if (is_int ? (!ib || !ia) : (!fb || !fa)) {
        st = op_fail(ctx, TDM_E_NOMEM, "out of memory");
        goto done;
    }
    if (is_int)
        op_red_row_i64(x, 0, x->count, ib);
    else
        op_red_row_f64(x, 0, x->count, fb);
    for (size_t a = 0; a < outer; a++) {
        for (size_t j = 0; j < inner; j++) {
            if (is_int)
                ia[j] = prod;
            else
                fa[j] = prod;
        }
        for (size_t s = 0; s < n; s++) {
            size_t i = rev ? n - 1 - s : s;
            size_t off = (a * n + i) * inner;
            if (is_int) {
                int64_t *p = ib + off;
                for (size_t j = 0; j < inner; j++) {
                    uint64_t sum = prod ? (uint64_t)ia[j] * (uint64_t)p[j] : (uint64_t)ia[j] + (uint64_t)p[j];
                    int64_t nv = sum >= 0x8000000000000000u ? (int64_t)(sum - 0x8000000000000000u) - INT64_MAX - 1
                                                            : (int64_t)sum;
                    p[j] = excl ? ia[j] : nv;
                    ia[j] = nv;
                }
            } else {
                double *p = fb + off;
                for (size_t j = 0; j < inner; j++) {
                    double nv = prod ? fa[j] * p[j] : fa[j] + p[j];
                    p[j] = excl ? fa[j] : nv;
                    fa[j] = nv;
                }
            }
        }
    }
    if (is_int) {
        if (x->dtype == TDM_UINT64) {
            uint64_t *o = ctx->out[0]->data;
            for (size_t k = 0; k < x->count; k++)
                o[k] = (uint64_t)ib[k];
        } else {
            op_red_put_i64(ctx->out[0], 0, x->count, ib);
        }
    } else {
        op_red_put_f64(ctx->out[0], 0, x->count, fb);
    }
done:
    mem_free(fb);
    mem_free(fa);
    mem_free(ib);
    mem_free(ia);
    return st;
}

tdm_status op_run_CumSum(op_ctx *ctx) { return cum_run(ctx, 0); }
tdm_status op_run_CumProd(op_ctx *ctx) { return cum_run(ctx, 1); }

/* ---- TopK ---- */

/* Every element becomes an int64 key whose order is the order TopK wants
 * (floats: NaN above every number as numpy sorts, -0 tied with +0; the
 * smallest: the key's complement), and the k best (key descending, index
 * ascending on ties: a total order, so the result is unique) are selected
 * with a heap of k, then sorted: O(n log k) with the comparison inline. */
typedef struct topk_e {
    int64_t v;
    int64_t i;
} topk_e;

static int64_t topk_f64_key(double v)
{
    if (v != v)
        return INT64_MAX;
    if (v == 0)
        v = 0.0;
    int64_t b;
    memcpy(&b, &v, sizeof b);
    return b >= 0 ? b : b ^ INT64_MAX;
}

static int topk_before(const topk_e *a, const topk_e *b)
{
    return a->v > b->v || (a->v == b->v && a->i < b->i);
}

/* Restores the heap below node r of h[0 .. n): the worst element at the root. */
static void topk_sift(topk_e *h, size_t n, size_t r)
{
    topk_e x = h[r];
    for (;;) {
        size_t c = 2 * r + 1;
        if (c >= n)
            break;
        if (c + 1 < n && topk_before(&h[c], &h[c + 1]))
            c++;
        if (!topk_before(&x, &h[c]))
            break;
        h[r] = h[c];
        r = c;
    }
    h[r] = x;
}

/* Leaves the k best of p[0 .. n) in p[0 .. k), best first. */
static void topk_select(topk_e *p, size_t n, size_t k)
{
    if (k == 0)
        return;
    for (size_t r = k / 2; r-- > 0;)
        topk_sift(p, k, r);
    for (size_t i = k; i < n; i++)
        if (topk_before(&p[i], &p[0])) {
            p[0] = p[i];
            topk_sift(p, k, 0);
        }
    for (size_t end = k - 1; end > 0; end--) {
        topk_e t = p[0];
        p[0] = p[end];
        p[end] = t;
        topk_sift(p, end, 0);
    }
}

tdm_status op_run_TopK(op_ctx *ctx)
{
    tdm_status st = op_red_check(ctx, 0, DT_NUMERIC);
    if (st)
        return st;
    const tdm_tensor *x = ctx->in[0];
    if (x->rank == 0)
        return op_fail(ctx, TDM_E_RUNTIME, "input 0 must have rank 1 or more");
    int axis;
    if ((st = op_axis(ctx, gr_attr_int(ctx->node, "axis", -1), x->rank, "attribute 'axis'", &axis)))
        return st;
    int64_t k;
    if (ctx->version >= 10) {
        int64_t *kv = NULL;
        size_t nk = 0;
        if ((st = op_in_ints(ctx, 1, &kv, &nk)))
            return st;
        k = nk == 1 ? kv[0] : -1;
        mem_free(kv);
        if (nk != 1)
            return op_fail(ctx, TDM_E_RUNTIME, "input 1 ('K') must hold one value, not %zu", nk);
    } else {
        k = gr_attr_int(ctx->node, "k", -1);
    }
    int largest = ctx->version >= 11 ? gr_attr_int(ctx->node, "largest", 1) != 0 : 1;
    size_t outer, n = (size_t)x->dims[axis], inner;
    if ((st = op_red_prod(ctx, x->dims, 0, axis, &outer)) || (st = op_red_prod(ctx, x->dims, axis + 1, x->rank, &inner)))
        return st;
    if (k < 0 || (uint64_t)k > (uint64_t)n)
        return op_fail(ctx, TDM_E_RUNTIME, "K = %lld is outside [0, %zu], the size of axis %d", (long long)k, n, axis);
    int64_t dims[TDM_MAX_RANK];
    memcpy(dims, x->dims, sizeof(int64_t) * (size_t)x->rank);
    dims[axis] = k;
    if ((st = op_out(ctx, 0, x->dtype, x->rank, dims)))
        return st;
    if (ctx->n_out > 1 && (st = op_out(ctx, 1, TDM_INT64, x->rank, dims)))
        return st;
    if (ctx->out[0]->count == 0)
        return TDM_OK;
    size_t es = tdm_dtype_size(x->dtype);
    int is_f = dtype_is_float(x->dtype);
    topk_e *pe = mem_calloc(n, sizeof *pe);
    double *rowf = NULL;
    int64_t *rowi = NULL;
    if (is_f) {
        rowf = mem_calloc(x->count, sizeof *rowf);
        if (rowf)
            op_red_row_f64(x, 0, x->count, rowf);
    } else {
        rowi = mem_calloc(x->count, sizeof *rowi);
        if (rowi)
            op_red_row_key(x, 0, x->count, rowi);
    }
    if (!pe || (is_f ? !rowf : !rowi)) {
        st = op_fail(ctx, TDM_E_NOMEM, "out of memory");
        goto done;
    }
    const unsigned char *src = x->data;
    unsigned char *vo = ctx->out[0]->data;
    int64_t *io = ctx->n_out > 1 ? ctx->out[1]->data : NULL;
    size_t kk = (size_t)k;
    for (size_t a = 0; a < outer; a++) {
        for (size_t j = 0; j < inner; j++) {
            size_t base = a * n * inner + j;
            for (size_t i = 0; i < n; i++) {
                int64_t key = is_f ? topk_f64_key(rowf[base + i * inner]) : rowi[base + i * inner];
                pe[i].v = largest ? key : ~key;
                pe[i].i = (int64_t)i;
            }
            topk_select(pe, n, kk);
            size_t obase = a * kk * inner + j;
            for (size_t i = 0; i < kk; i++) {
                int64_t idx = pe[i].i;
                size_t o = obase + i * inner;
                memcpy(vo + o * es, src + (base + (size_t)idx * inner) * es, es);
                if (io)
                    io[o] = idx;
            }
        }
    }
done:
    mem_free(pe);
    mem_free(rowf);
    mem_free(rowi);
    return st;
}

tdm_status op_infer_TopK(op_infer_ctx *ctx)
{
    const gr_type *t = ctx->n_in > 0 ? ctx->in[0] : NULL;
    if (!t)
        return TDM_OK;
    for (int i = 0; i < ctx->n_out && i < 2; i++) {
        ctx->out[i].kind = TDM_KIND_TENSOR;
        ctx->out[i].dtype = i == 0 ? t->dtype : TDM_INT64;
    }
    if (t->rank <= 0)
        return TDM_OK;
    int64_t axis = gr_attr_int(ctx->node, "axis", -1);
    axis = axis < 0 ? axis + t->rank : axis;
    if (axis < 0 || axis >= t->rank)
        return TDM_OK;
    gr_dim kd = {-1, NULL};
    if (ctx->version >= 10) {
        const tdm_tensor *kv = ctx->n_in > 1 ? ctx->value[1] : NULL;
        if (kv && kv->kind == TDM_KIND_TENSOR && kv->count == 1 && dtype_is_int(kv->dtype))
            kd.v = tensor_get_i64(kv, 0);
    } else {
        kd.v = gr_attr_int(ctx->node, "k", -1);
    }
    if (kd.v < -1)
        kd.v = -1;
    for (int i = 0; i < ctx->n_out && i < 2; i++) {
        ctx->out[i].rank = t->rank;
        memcpy(ctx->out[i].dims, t->dims, sizeof(gr_dim) * (size_t)t->rank);
        ctx->out[i].dims[axis] = kd;
    }
    return TDM_OK;
}
