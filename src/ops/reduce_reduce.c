/* The Reduce* operators and ArgMax/ArgMin.
 *
 * One walk (op_red_iter) visits the input in C order by rows and keeps the
 * offset of the output element each row contributes to, so every reduction
 * streams through its input once whatever the axes. Floating-point inputs
 * accumulate in double; integer inputs in int64 (wrapping) for the
 * reductions that stay integral, in double for the others. */
#include "ops/reduce.h"
#include "core/mem.h"

#include <math.h>
#include <string.h>

typedef enum red_kind {
    RK_SUM,
    RK_MEAN,
    RK_MAX,
    RK_MIN,
    RK_PROD,
    RK_L1,
    RK_L2,
    RK_LOGSUM,
    RK_LOGSUMEXP,
    RK_SUMSQ
} red_kind;

/* ---- axes ---- */

/* Marks the reduced axes in red[]; *noop is set when the op is an identity
 * (empty axes with noop_with_empty_axes). Axes come from input 1 for
 * ReduceSum-13 and from the attribute otherwise. */
static tdm_status red_axes(op_ctx *ctx, int axes_input, int rank, unsigned char *red, int *noop)
{
    const int64_t *axes = NULL;
    int64_t *owned = NULL;
    size_t n = 0;
    *noop = 0;
    memset(red, 0, TDM_MAX_RANK);
    if (axes_input) {
        if (ctx->n_in > 1 && ctx->in[1]) {
            tdm_status st = op_in_ints(ctx, 1, &owned, &n);
            if (st)
                return st;
            axes = owned;
        }
    } else {
        int c = gr_attr_ints(ctx->node, "axes", &axes);
        n = c > 0 ? (size_t)c : 0;
    }
    if (n == 0) {
        mem_free(owned);
        if (gr_attr_int(ctx->node, "noop_with_empty_axes", 0)) {
            *noop = 1;
            return TDM_OK;
        }
        memset(red, 1, (size_t)rank);
        return TDM_OK;
    }
    for (size_t k = 0; k < n; k++) {
        int64_t a = axes[k] < 0 ? axes[k] + rank : axes[k];
        if (a < 0 || a >= rank) {
            tdm_status st = op_fail(ctx, TDM_E_RUNTIME, "axis %lld of 'axes' is out of range for rank %d",
                                    (long long)axes[k], rank);
            mem_free(owned);
            return st;
        }
        if (red[a]) {
            mem_free(owned);
            return op_fail(ctx, TDM_E_RUNTIME, "'axes' names axis %lld twice", (long long)a);
        }
        red[a] = 1;
    }
    mem_free(owned);
    return TDM_OK;
}

/* ---- double accumulation ---- */

static void acc_row_f64(red_kind kind, double *acc, const double *x, size_t n, int inner_red)
{
    if (inner_red) {
        double a = *acc;
        switch (kind) {
        case RK_SUM: case RK_MEAN: case RK_LOGSUM: {
            double s0 = 0, s1 = 0;
            size_t j = 0;
            for (; j + 1 < n; j += 2) {
                s0 += x[j];
                s1 += x[j + 1];
            }
            if (j < n)
                s0 += x[j];
            a += s0 + s1;
            break;
        }
        case RK_L1: for (size_t j = 0; j < n; j++) a += fabs(x[j]); break;
        case RK_L2: case RK_SUMSQ: for (size_t j = 0; j < n; j++) a += x[j] * x[j]; break;
        case RK_PROD: for (size_t j = 0; j < n; j++) a *= x[j]; break;
        case RK_MAX: case RK_LOGSUMEXP:
            for (size_t j = 0; j < n; j++)
                if (x[j] > a || x[j] != x[j]) a = x[j];
            break;
        case RK_MIN:
            for (size_t j = 0; j < n; j++)
                if (x[j] < a || x[j] != x[j]) a = x[j];
            break;
        }
        *acc = a;
        return;
    }
    switch (kind) {
    case RK_SUM: case RK_MEAN: case RK_LOGSUM: for (size_t j = 0; j < n; j++) acc[j] += x[j]; break;
    case RK_L1: for (size_t j = 0; j < n; j++) acc[j] += fabs(x[j]); break;
    case RK_L2: case RK_SUMSQ: for (size_t j = 0; j < n; j++) acc[j] += x[j] * x[j]; break;
    case RK_PROD: for (size_t j = 0; j < n; j++) acc[j] *= x[j]; break;
    case RK_MAX: case RK_LOGSUMEXP:
        for (size_t j = 0; j < n; j++)
            if (x[j] > acc[j] || x[j] != x[j]) acc[j] = x[j];
        break;
    case RK_MIN:
        for (size_t j = 0; j < n; j++)
            if (x[j] < acc[j] || x[j] != x[j]) acc[j] = x[j];
        break;
    }
}

/* Second pass of ReduceLogSumExp: acc += exp(x - max). */
static void acc_row_lse(double *acc, const double *mx, const double *x, size_t n, int inner_red)
{
    if (inner_red) {
        double m = *mx, a = 0;
        if (isinf(m))
            return;
        for (size_t j = 0; j < n; j++)
            a += exp(x[j] - m);
        *acc += a;
        return;
    }
    for (size_t j = 0; j < n; j++)
        if (!isinf(mx[j]))
            acc[j] += exp(x[j] - mx[j]);
}

static tdm_status reduce_f64(op_ctx *ctx, red_kind kind, const tdm_tensor *x, const unsigned char *red,
                             size_t rcount, tdm_tensor *y)
{
    op_red_iter it;
    double *acc = NULL, *mx = NULL, *row = NULL;
    tdm_status st = op_red_alloc_f64(ctx, y->count, &acc);
    if (st)
        return st;
    op_red_iter_init(&it, x->rank, x->dims, red);
    if ((st = op_red_alloc_f64(ctx, it.n, &row)))
        goto done;
    double init = kind == RK_PROD ? 1.0 : kind == RK_MAX || kind == RK_LOGSUMEXP ? -INFINITY
                  : kind == RK_MIN ? INFINITY : 0.0;
    for (size_t i = 0; i < y->count; i++)
        acc[i] = init;
    for (size_t r = 0; r < it.rows; r++, op_red_iter_next(&it)) {
        op_red_row_f64(x, it.in_off, it.n, row);
        acc_row_f64(kind, acc + it.out_off, row, it.n, it.inner_red);
    }
    if (kind == RK_LOGSUMEXP) {
        mx = acc;
        acc = NULL;
        if ((st = op_red_alloc_f64(ctx, y->count, &acc)))
            goto done;
        op_red_iter_init(&it, x->rank, x->dims, red);
        for (size_t r = 0; r < it.rows; r++, op_red_iter_next(&it)) {
            op_red_row_f64(x, it.in_off, it.n, row);
            acc_row_lse(acc + it.out_off, mx + it.out_off, row, it.n, it.inner_red);
        }
        for (size_t i = 0; i < y->count; i++)
            acc[i] = isinf(mx[i]) ? mx[i] : log(acc[i]) + mx[i];
    } else {
        for (size_t i = 0; i < y->count; i++) {
            switch (kind) {
            case RK_MEAN: acc[i] = acc[i] / (double)rcount; break;
            case RK_L2: acc[i] = sqrt(acc[i]); break;
            case RK_LOGSUM: acc[i] = log(acc[i]); break;
            default: break;
            }
        }
    }
    op_red_put_f64(y, 0, y->count, acc);
done:
    mem_free(acc);
    mem_free(mx);
    mem_free(row);
    return st;
}

/* ---- float32 over the innermost axes (ReduceMean/ReduceSum in models) ---- */

static void reduce_f32_inner(red_kind kind, const float *x, size_t rows, size_t n, float *y)
{
    for (size_t r = 0; r < rows; r++, x += n) {
        double s0 = 0, s1 = 0, s2 = 0, s3 = 0, s;
        size_t j = 0;
        switch (kind) {
        case RK_MAX: case RK_MIN: {
            float m = n ? x[0] : (kind == RK_MAX ? -INFINITY : INFINITY);
            int nan = 0;
            if (kind == RK_MAX)
                for (j = 0; j < n; j++) {
                    m = x[j] > m ? x[j] : m;
                    nan |= x[j] != x[j];
                }
            else
                for (j = 0; j < n; j++) {
                    m = x[j] < m ? x[j] : m;
                    nan |= x[j] != x[j];
                }
            y[r] = nan ? NAN : m;
            continue;
        }
        case RK_L2: case RK_SUMSQ:
            for (; j + 4 <= n; j += 4) {
                s0 += (double)x[j] * x[j];
                s1 += (double)x[j + 1] * x[j + 1];
                s2 += (double)x[j + 2] * x[j + 2];
                s3 += (double)x[j + 3] * x[j + 3];
            }
            for (; j < n; j++)
                s0 += (double)x[j] * x[j];
            break;
        case RK_L1:
            for (; j < n; j++)
                s0 += fabs(x[j]);
            break;
        default:
            for (; j + 4 <= n; j += 4) {
                s0 += x[j];
                s1 += x[j + 1];
                s2 += x[j + 2];
                s3 += x[j + 3];
            }
            for (; j < n; j++)
                s0 += x[j];
            break;
        }
        s = (s0 + s1) + (s2 + s3);
        y[r] = (float)(kind == RK_MEAN ? s / (double)n : kind == RK_L2 ? sqrt(s) : s);
    }
}

/* ---- integer accumulation ---- */

static int64_t int_key_min(tdm_dtype dt)
{
    switch (dt) {
    case TDM_INT8: return INT8_MIN;
    case TDM_INT16: return INT16_MIN;
    case TDM_INT32: return INT32_MIN;
    case TDM_INT64: case TDM_UINT64: return INT64_MIN;
    default: return 0;
    }
}

static int64_t int_key_max(tdm_dtype dt)
{
    switch (dt) {
    case TDM_INT8: return INT8_MAX;
    case TDM_INT16: return INT16_MAX;
    case TDM_INT32: return INT32_MAX;
    case TDM_UINT8: return UINT8_MAX;
    case TDM_BOOL: return 1;
    case TDM_UINT16: return UINT16_MAX;
    case TDM_UINT32: return UINT32_MAX;
    default: return INT64_MAX;
    }
}

static void acc_row_i64(red_kind kind, int64_t *acc, const int64_t *x, size_t n, int inner_red)
{
    size_t step = inner_red ? 0 : 1;
    int64_t *a = acc;
    for (size_t j = 0; j < n; j++, a += step) {
        uint64_t av = (uint64_t)*a, xv = (uint64_t)x[j];
        switch (kind) {
        case RK_SUM: av += xv; break;
        case RK_PROD: av *= xv; break;
        case RK_L1: av += x[j] < 0 ? 0u - xv : xv; break;
        case RK_SUMSQ: av += xv * xv; break;
        case RK_MAX: if (x[j] > *a) *a = x[j]; continue;
        case RK_MIN: if (x[j] < *a) *a = x[j]; continue;
        default: break;
        }
        /* back from modular arithmetic without implementation-defined casts */
        *a = av >= 0x8000000000000000u ? (int64_t)(av - 0x8000000000000000u) - INT64_MAX - 1 : (int64_t)av;
    }
}

static tdm_status reduce_i64(op_ctx *ctx, red_kind kind, const tdm_tensor *x, const unsigned char *red,
                             tdm_tensor *y)
{
    op_red_iter it;
    op_red_iter_init(&it, x->rank, x->dims, red);
    int64_t *acc = mem_calloc(y->count ? y->count : 1, sizeof *acc);
    int64_t *row = mem_calloc(it.n ? it.n : 1, sizeof *row);
    if (!acc || !row) {
        mem_free(acc);
        mem_free(row);
        return op_fail(ctx, TDM_E_NOMEM, "out of memory for the accumulators");
    }
    int64_t init = kind == RK_PROD ? 1 : kind == RK_MAX ? int_key_min(x->dtype)
                   : kind == RK_MIN ? int_key_max(x->dtype) : 0;
    for (size_t i = 0; i < y->count; i++)
        acc[i] = init;
    int keys = kind == RK_MAX || kind == RK_MIN;
    for (size_t r = 0; r < it.rows; r++, op_red_iter_next(&it)) {
        if (keys)
            op_red_row_key(x, it.in_off, it.n, row);
        else
            op_red_row_i64(x, it.in_off, it.n, row);
        acc_row_i64(kind, acc + it.out_off, row, it.n, it.inner_red);
    }
    if (keys && x->dtype == TDM_UINT64) {
        uint64_t *o = y->data;
        for (size_t i = 0; i < y->count; i++)
            o[i] = (uint64_t)acc[i] ^ 0x8000000000000000u;
    } else {
        op_red_put_i64(y, 0, y->count, acc);
    }
    mem_free(acc);
    mem_free(row);
    return TDM_OK;
}

/* ---- the run hook ---- */

/* Axes come from input 1 in ReduceSum from version 13 and in every other
 * reduction from version 18; before, from the 'axes' attribute. */
static int red_axes_from_input(const char *op_type, int version)
{
    return version >= 18 || (version >= 13 && strcmp(op_type, "ReduceSum") == 0);
}

static tdm_status reduce_run(op_ctx *ctx, red_kind kind)
{
    /* ReduceMax/ReduceMin take bool from version 20 (a widening: as 18) */
    uint32_t mask = DT_NUMERIC | (kind == RK_MAX || kind == RK_MIN ? DT_BIT(TDM_BOOL) : 0);
    tdm_status st = op_red_check(ctx, 0, mask);
    if (st)
        return st;
    const tdm_tensor *x = ctx->in[0];
    unsigned char red[TDM_MAX_RANK];
    int noop;
    int axes_input = red_axes_from_input(ctx->node->op_type, ctx->version);
    if ((st = red_axes(ctx, axes_input, x->rank, red, &noop)))
        return st;
    if (noop) {
        if ((st = op_out(ctx, 0, x->dtype, x->rank, x->dims)))
            return st;
        if (x->nbytes)
            memcpy(ctx->out[0]->data, x->data, x->nbytes);
        return TDM_OK;
    }
    int keep = gr_attr_int(ctx->node, "keepdims", 1) != 0;
    int64_t dims[TDM_MAX_RANK];
    int r = 0;
    size_t rcount = 1;
    for (int k = 0; k < x->rank; k++) {
        if (!red[k])
            dims[r++] = x->dims[k];
        else {
            rcount *= (size_t)x->dims[k]; /* x->count bounds it unless a dim is 0 */
            if (x->dims[k] == 0)
                rcount = 0;
            if (keep)
                dims[r++] = 1;
        }
    }
    if ((st = op_out(ctx, 0, x->dtype, r, dims)))
        return st;
    tdm_tensor *y = ctx->out[0];
    if ((dtype_is_int(x->dtype) || x->dtype == TDM_BOOL) && kind != RK_MEAN && kind != RK_L2 && kind != RK_LOGSUM && kind != RK_LOGSUMEXP)
        return reduce_i64(ctx, kind, x, red, y);
    if (x->dtype == TDM_FLOAT && kind != RK_PROD && kind != RK_LOGSUM && kind != RK_LOGSUMEXP && x->count > 0) {
        op_red_iter it;
        op_red_iter_init(&it, x->rank, x->dims, red);
        if (it.m <= 2 && it.inner_red && (it.m == 1 || it.ostr[0] == 1)) {
            reduce_f32_inner(kind, x->data, it.rows, it.n, y->data);
            return TDM_OK;
        }
    }
    return reduce_f64(ctx, kind, x, red, rcount, y);
}

tdm_status op_run_ReduceSum(op_ctx *ctx) { return reduce_run(ctx, RK_SUM); }
tdm_status op_run_ReduceMean(op_ctx *ctx) { return reduce_run(ctx, RK_MEAN); }
tdm_status op_run_ReduceMax(op_ctx *ctx) { return reduce_run(ctx, RK_MAX); }
tdm_status op_run_ReduceMin(op_ctx *ctx) { return reduce_run(ctx, RK_MIN); }
tdm_status op_run_ReduceProd(op_ctx *ctx) { return reduce_run(ctx, RK_PROD); }
tdm_status op_run_ReduceL1(op_ctx *ctx) { return reduce_run(ctx, RK_L1); }
tdm_status op_run_ReduceL2(op_ctx *ctx) { return reduce_run(ctx, RK_L2); }
tdm_status op_run_ReduceLogSum(op_ctx *ctx) { return reduce_run(ctx, RK_LOGSUM); }
tdm_status op_run_ReduceLogSumExp(op_ctx *ctx) { return reduce_run(ctx, RK_LOGSUMEXP); }
tdm_status op_run_ReduceSumSquare(op_ctx *ctx) { return reduce_run(ctx, RK_SUMSQ); }

tdm_status op_infer_reduce(op_infer_ctx *ctx)
{
    const gr_type *t = ctx->n_in > 0 ? ctx->in[0] : NULL;
    if (!t || ctx->n_out < 1)
        return TDM_OK;
    gr_type *o = &ctx->out[0];
    o->kind = TDM_KIND_TENSOR;
    o->dtype = t->dtype;
    if (t->rank < 0)
        return TDM_OK;
    int keep = gr_attr_int(ctx->node, "keepdims", 1) != 0;
    int noop = gr_attr_int(ctx->node, "noop_with_empty_axes", 0) != 0;
    unsigned char red[TDM_MAX_RANK];
    memset(red, 0, sizeof red);
    int axes_input = red_axes_from_input(ctx->node->op_type, ctx->version);
    int known = 1, n = 0;
    if (axes_input) {
        const tdm_tensor *a = ctx->n_in > 1 ? ctx->value[1] : NULL;
        if (ctx->n_in > 1 && ctx->in[1] && !a) {
            known = 0;
        } else if (a) {
            if (a->kind != TDM_KIND_TENSOR || !dtype_is_int(a->dtype))
                return TDM_OK;
            for (size_t k = 0; k < a->count; k++) {
                int64_t v = tensor_get_i64(a, k);
                v = v < 0 ? v + t->rank : v;
                if (v < 0 || v >= t->rank)
                    return TDM_OK; /* the run hook reports it */
                red[v] = 1;
                n++;
            }
        }
    } else {
        const int64_t *axes;
        int c = gr_attr_ints(ctx->node, "axes", &axes);
        for (int k = 0; k < c; k++) {
            int64_t v = axes[k] < 0 ? axes[k] + t->rank : axes[k];
            if (v < 0 || v >= t->rank)
                return TDM_OK;
            red[v] = 1;
            n++;
        }
    }
    if (!known) {
        if (keep) {
            o->rank = t->rank;
            for (int k = 0; k < t->rank; k++)
                o->dims[k] = t->dims[k].v == 1 ? t->dims[k] : (gr_dim){-1, NULL};
        }
        return TDM_OK;
    }
    if (n == 0) {
        if (noop) {
            *o = *t;
            return TDM_OK;
        }
        memset(red, 1, (size_t)t->rank);
    }
    int r = 0;
    for (int k = 0; k < t->rank; k++) {
        if (!red[k])
            o->dims[r++] = t->dims[k];
        else if (keep)
            o->dims[r++] = (gr_dim){1, NULL};
    }
    o->rank = r;
    return TDM_OK;
}

/* ---- ArgMax / ArgMin ---- */

/* Does v replace the best so far? NaN wins (as numpy's argmax/argmin). */
static int arg_better_f64(double v, double best, int want_max, int last)
{
    if (best != best)
        return last && v != v;
    if (v != v)
        return 1;
    if (last)
        return want_max ? v >= best : v <= best;
    return want_max ? v > best : v < best;
}

static int arg_better_i64(int64_t v, int64_t best, int want_max, int last)
{
    if (last)
        return want_max ? v >= best : v <= best;
    return want_max ? v > best : v < best;
}

static tdm_status arg_run(op_ctx *ctx, int want_max)
{
    tdm_status st = op_red_check(ctx, 0, DT_NUMERIC | DT_BIT(TDM_BOOL));
    if (st)
        return st;
    const tdm_tensor *x = ctx->in[0];
    int axis;
    if ((st = op_axis(ctx, gr_attr_int(ctx->node, "axis", 0), x->rank, "attribute 'axis'", &axis)))
        return st;
    if (x->rank == 0)
        return op_fail(ctx, TDM_E_RUNTIME, "input 0 must have rank 1 or more");
    int keep = gr_attr_int(ctx->node, "keepdims", 1) != 0;
    int last = ctx->version >= 12 && gr_attr_int(ctx->node, "select_last_index", 0) != 0;
    int64_t dims[TDM_MAX_RANK];
    int r = 0;
    for (int k = 0; k < x->rank; k++) {
        if (k != axis)
            dims[r++] = x->dims[k];
        else if (keep)
            dims[r++] = 1;
    }
    size_t outer, n = (size_t)x->dims[axis], inner;
    if ((st = op_red_prod(ctx, x->dims, 0, axis, &outer)) || (st = op_red_prod(ctx, x->dims, axis + 1, x->rank, &inner)))
        return st;
    if (n == 0 && outer > 0 && inner > 0)
        return op_fail(ctx, TDM_E_RUNTIME, "cannot take the arg%s of an empty axis %d", want_max ? "max" : "min",
                       axis);
    if ((st = op_out(ctx, 0, TDM_INT64, r, dims)))
        return st;
    int64_t *o = ctx->out[0]->data;
    int is_f = dtype_is_float(x->dtype);
    /* inner == 1: one contiguous row of n, scanned whole; else blocks of inner */
    size_t rows = inner == 1 ? 1 : n, blk = inner == 1 ? n : inner;
    double *bf = NULL, *rf = NULL;
    int64_t *bi = NULL, *ri = NULL;
    if (is_f) {
        bf = mem_calloc(blk + 1, sizeof *bf);
        rf = mem_calloc(blk + 1, sizeof *rf);
    } else {
        bi = mem_calloc(blk + 1, sizeof *bi);
        ri = mem_calloc(blk + 1, sizeof *ri);
    }
    if (is_f ? (!bf || !rf) : (!bi || !ri)) {
        st = op_fail(ctx, TDM_E_NOMEM, "out of memory");
        goto done;
    }
    for (size_t a = 0; a < outer && inner; a++) {
        int64_t *oi = o + a * inner;
        size_t base = a * n * inner;
        for (size_t j = 0; j < inner; j++)
            oi[j] = 0;
        if (inner == 1) {
            int64_t b = 0;
            if (is_f) {
                op_red_row_f64(x, base, n, rf);
                for (size_t i = 1; i < n; i++)
                    if (arg_better_f64(rf[i], rf[b], want_max, last))
                        b = (int64_t)i;
            } else {
                op_red_row_key(x, base, n, ri);
                for (size_t i = 1; i < n; i++)
                    if (arg_better_i64(ri[i], ri[b], want_max, last))
                        b = (int64_t)i;
            }
            oi[0] = b;
            continue;
        }
        if (is_f) {
            op_red_row_f64(x, base, inner, bf);
            for (size_t i = 1; i < rows; i++) {
                op_red_row_f64(x, base + i * inner, inner, rf);
                for (size_t j = 0; j < inner; j++)
                    if (arg_better_f64(rf[j], bf[j], want_max, last)) {
                        bf[j] = rf[j];
                        oi[j] = (int64_t)i;
                    }
            }
        } else {
            op_red_row_key(x, base, inner, bi);
            for (size_t i = 1; i < rows; i++) {
                op_red_row_key(x, base + i * inner, inner, ri);
                for (size_t j = 0; j < inner; j++)
                    if (arg_better_i64(ri[j], bi[j], want_max, last)) {
                        bi[j] = ri[j];
                        oi[j] = (int64_t)i;
                    }
            }
        }
    }
done:
    mem_free(bf);
    mem_free(rf);
    mem_free(bi);
    mem_free(ri);
    return st;
}

tdm_status op_run_ArgMax(op_ctx *ctx) { return arg_run(ctx, 1); }
tdm_status op_run_ArgMin(op_ctx *ctx) { return arg_run(ctx, 0); }

tdm_status op_infer_arg(op_infer_ctx *ctx)
{
    const gr_type *t = ctx->n_in > 0 ? ctx->in[0] : NULL;
    if (!t || ctx->n_out < 1)
        return TDM_OK;
    gr_type *o = &ctx->out[0];
    o->kind = TDM_KIND_TENSOR;
    o->dtype = TDM_INT64;
    if (t->rank <= 0)
        return TDM_OK;
    int64_t axis = gr_attr_int(ctx->node, "axis", 0);
    axis = axis < 0 ? axis + t->rank : axis;
    if (axis < 0 || axis >= t->rank)
        return TDM_OK;
    int keep = gr_attr_int(ctx->node, "keepdims", 1) != 0;
    int r = 0;
    for (int k = 0; k < t->rank; k++) {
        if (k != axis)
            o->dims[r++] = t->dims[k];
        else if (keep)
            o->dims[r++] = (gr_dim){1, NULL};
    }
    o->rank = r;
    return TDM_OK;
}
