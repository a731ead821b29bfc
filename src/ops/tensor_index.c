/* Index ops: Gather, GatherElements, GatherND, Scatter, ScatterElements,
 * ScatterND, NonZero, OneHot, Unique. */
#include "ops/tensor.h"
#include "core/mem.h"

#include <math.h>
#include <string.h>

/* Reads index k of an int32/int64 index tensor, normalised against dim;
 * -1 when out of range. */
static int64_t index_at(const tdm_tensor *t, size_t k, int64_t dim)
{
    int64_t v = t->dtype == TDM_INT32 ? ((const int32_t *)t->data)[k] : t->dtype == TDM_INT64 ? ((const int64_t *)t->data)[k] : tensor_get_i64(t, k);
    if (v < 0)
        v += dim;
    return v < 0 || v >= dim ? -1 : v;
}

static tdm_status check_indices(op_ctx *ctx, const tdm_tensor *t, const char *what)
{
    if (!dtype_is_int(t->dtype))
        return op_fail(ctx, TDM_E_RUNTIME, "input '%s' must be int32 or int64, not %s", what, tdm_dtype_name(t->dtype));
    return TDM_OK;
}

static tdm_status bad_index(op_ctx *ctx, const tdm_tensor *t, size_t k, int64_t dim)
{
    return op_fail(ctx, TDM_E_RUNTIME, "index %lld (entry %zu of the indices) is out of range for a dimension of %lld",
                   (long long)tensor_get_i64(t, k), k, (long long)dim);
}

tdm_status op_run_Gather(op_ctx *ctx)
{
    const tdm_tensor *x, *ind;
    tdm_status st;
    if ((st = op_tensor_in(ctx, 0, "data", &x)) || (st = op_tensor_in(ctx, 1, "indices", &ind)) ||
        (st = check_indices(ctx, ind, "indices")))
        return st;
    int axis;
    if (x->rank == 0)
        return op_fail(ctx, TDM_E_RUNTIME, "input 'data' must have rank 1 or more");
    if ((st = op_axis(ctx, gr_attr_int(ctx->node, "axis", 0), x->rank, "attribute 'axis'", &axis)) != TDM_OK)
        return st;
    int r = x->rank - 1 + ind->rank;
    if (r > TDM_MAX_RANK)
        return op_fail(ctx, TDM_E_UNSUPPORTED, "output rank %d exceeds the limit %d", r, TDM_MAX_RANK);
    int64_t dims[TDM_MAX_RANK];
    int k = 0;
    for (int d = 0; d < axis; d++)
        dims[k++] = x->dims[d];
    for (int d = 0; d < ind->rank; d++)
        dims[k++] = ind->dims[d];
    for (int d = axis + 1; d < x->rank; d++)
        dims[k++] = x->dims[d];
    int64_t dim = x->dims[axis];
    for (size_t i = 0; i < ind->count; i++)
        if (index_at(ind, i, dim) < 0)
            return bad_index(ctx, ind, i, dim);
    if ((st = op_out(ctx, 0, x->dtype, r, dims)) != TDM_OK)
        return st;
    size_t outer = 1, inner = 1;
    for (int d = 0; d < axis; d++)
        outer *= (size_t)x->dims[d];
    for (int d = axis + 1; d < x->rank; d++)
        inner *= (size_t)x->dims[d];
    size_t ni = ind->count;
    tdm_tensor *o = ctx->out[0];
    size_t es = op_tensor_esize(x->dtype);
    if (inner == 1 && x->dtype != TDM_STRING && (es == 4 || es == 8)) {
        for (size_t a = 0; a < outer; a++)
            for (size_t i = 0; i < ni; i++) {
                size_t src = a * (size_t)dim + (size_t)index_at(ind, i, dim), dst = a * ni + i;
                if (es == 4)
                    ((uint32_t *)o->data)[dst] = ((const uint32_t *)x->data)[src];
                else
                    ((uint64_t *)o->data)[dst] = ((const uint64_t *)x->data)[src];
            }
        return TDM_OK;
    }
    for (size_t a = 0; a < outer; a++)
        for (size_t i = 0; i < ni; i++) {
            size_t src = (a * (size_t)dim + (size_t)index_at(ind, i, dim)) * inner, dst = (a * ni + i) * inner;
            if (x->dtype != TDM_STRING)
                memcpy((char *)o->data + dst * es, (const char *)x->data + src * es, inner * es);
            else if ((st = op_tensor_copy(ctx, o, dst, x, src, inner)) != TDM_OK)
                return st;
        }
    return TDM_OK;
}

tdm_status op_run_GatherElements(op_ctx *ctx)
{
    const tdm_tensor *x, *ind;
    tdm_status st;
    if ((st = op_tensor_in(ctx, 0, "data", &x)) || (st = op_tensor_in(ctx, 1, "indices", &ind)) ||
        (st = check_indices(ctx, ind, "indices")))
        return st;
    int axis;
    if ((st = op_axis(ctx, gr_attr_int(ctx->node, "axis", 0), x->rank, "attribute 'axis'", &axis)) != TDM_OK)
        return st;
    if (ind->rank != x->rank || x->rank == 0)
        return op_fail(ctx, TDM_E_RUNTIME, "input 'indices' has rank %d, data rank %d", ind->rank, x->rank);
    for (int d = 0; d < x->rank; d++)
        if (d != axis && ind->dims[d] > x->dims[d])
            return op_fail(ctx, TDM_E_RUNTIME, "input 'indices' is larger than the data along dimension %d", d);
    if ((st = op_out(ctx, 0, x->dtype, ind->rank, ind->dims)) != TDM_OK)
        return st;
    int64_t xs[TDM_MAX_RANK], idx[TDM_MAX_RANK] = {0};
    shape_strides(x->rank, x->dims, xs);
    int64_t dim = x->dims[axis];
    for (size_t i = 0; i < ind->count; i++) {
        int64_t v = index_at(ind, i, dim);
        if (v < 0)
            return bad_index(ctx, ind, i, dim);
        int64_t off = 0;
        for (int d = 0; d < x->rank; d++)
            off += (d == axis ? v : idx[d]) * xs[d];
        if ((st = op_tensor_copy(ctx, ctx->out[0], i, x, (size_t)off, 1)) != TDM_OK)
            return st;
        for (int d = x->rank - 1; d >= 0 && ++idx[d] == ind->dims[d]; d--)
            idx[d] = 0;
    }
    return TDM_OK;
}

tdm_status op_run_GatherND(op_ctx *ctx)
{
    const tdm_tensor *x, *ind;
    tdm_status st;
    if ((st = op_tensor_in(ctx, 0, "data", &x)) || (st = op_tensor_in(ctx, 1, "indices", &ind)) ||
        (st = check_indices(ctx, ind, "indices")))
        return st;
    int64_t b = ctx->version >= 12 ? gr_attr_int(ctx->node, "batch_dims", 0) : 0;
    if (ind->rank < 1 || x->rank < 1 || b < 0 || b >= ind->rank || b >= x->rank)
        return op_fail(ctx, TDM_E_RUNTIME, "attribute 'batch_dims' %lld does not fit data rank %d and indices rank %d",
                       (long long)b, x->rank, ind->rank);
    int64_t k = ind->dims[ind->rank - 1];
    if (k < 1 || k > x->rank - b)
        return op_fail(ctx, TDM_E_RUNTIME, "the last dimension of 'indices' (%lld) exceeds data rank %d - batch_dims",
                       (long long)k, x->rank);
    for (int d = 0; d < b; d++)
        if (ind->dims[d] != x->dims[d])
            return op_fail(ctx, TDM_E_RUNTIME, "batch dimension %d differs between data and indices", d);
    int64_t dims[TDM_MAX_RANK];
    int r = 0;
    for (int d = 0; d < ind->rank - 1; d++)
        dims[r++] = ind->dims[d];
    for (int d = (int)(b + k); d < x->rank; d++) {
        if (r >= TDM_MAX_RANK)
            return op_fail(ctx, TDM_E_UNSUPPORTED, "output rank exceeds the limit %d", TDM_MAX_RANK);
        dims[r++] = x->dims[d];
    }
    if ((st = op_out(ctx, 0, x->dtype, r, dims)) != TDM_OK)
        return st;
    int64_t xs[TDM_MAX_RANK];
    shape_strides(x->rank, x->dims, xs);
    size_t block = 1, nbatch = 1;
    for (int d = (int)(b + k); d < x->rank; d++)
        block *= (size_t)x->dims[d];
    for (int d = 0; d < b; d++)
        nbatch *= (size_t)x->dims[d];
    size_t ntup = ind->count / (size_t)k; /* tuples in all */
    size_t per_batch = nbatch ? ntup / nbatch : 0;
    size_t batch_stride = b > 0 ? (size_t)xs[b - 1] : 0;
    /* Plain values are copied here (a block of one or a few elements per
     * tuple in detection heads: a call per tuple would cost more than it). */
    size_t es = op_tensor_esize(x->dtype), bytes = block * es;
    const char *xd = x->data;
    char *od = ctx->out[0]->data;
    for (size_t t = 0; t < ntup; t++) {
        size_t bi = per_batch ? t / per_batch : 0;
        int64_t off = (int64_t)(bi * batch_stride);
        for (int64_t j = 0; j < k; j++) {
            int64_t dim = x->dims[b + j];
            int64_t v = index_at(ind, t * (size_t)k + (size_t)j, dim);
            if (v < 0)
                return bad_index(ctx, ind, t * (size_t)k + (size_t)j, dim);
            off += v * xs[b + j];
        }
        if (x->dtype == TDM_STRING) {
            if ((st = op_tensor_copy(ctx, ctx->out[0], t * block, x, (size_t)off, block)) != TDM_OK)
                return st;
        } else if (bytes == 4) {
            memcpy(od + t * 4, xd + (size_t)off * es, 4);
        } else if (bytes == 8) {
            memcpy(od + t * 8, xd + (size_t)off * es, 8);
        } else {
            memcpy(od + t * bytes, xd + (size_t)off * es, bytes);
        }
    }
    return TDM_OK;
}

/* ---- scatter ---- */

enum { RED_NONE, RED_ADD, RED_MUL, RED_MAX, RED_MIN };

static tdm_status reduction_of(op_ctx *ctx, int *red)
{
    const char *s = ctx->version >= 16 ? gr_attr_str(ctx->node, "reduction", "none") : "none";
    if (!strcmp(s, "none"))
        *red = RED_NONE;
    else if (!strcmp(s, "add"))
        *red = RED_ADD;
    else if (!strcmp(s, "mul"))
        *red = RED_MUL;
    else if (!strcmp(s, "max"))
        *red = RED_MAX;
    else if (!strcmp(s, "min"))
        *red = RED_MIN;
    else
        return op_fail(ctx, TDM_E_MODEL, "attribute 'reduction' '%s' is not none, add, mul, max or min", s);
    return TDM_OK;
}

#define RED_APPLY(T)                                                                                         \
    do {                                                                                                     \
        T *d_ = (T *)o->data + doff;                                                                         \
        const T *s_ = (const T *)u->data + soff;                                                             \
        for (size_t j = 0; j < n; j++) {                                                                     \
            T a_ = d_[j], b_ = s_[j];                                                                        \
            d_[j] = red == RED_ADD ? (T)(a_ + b_) : red == RED_MUL ? (T)(a_ * b_) : red == RED_MAX ? (a_ > b_ ? a_ : b_) : (a_ < b_ ? a_ : b_); \
        }                                                                                                    \
    } while (0)

/* o[doff..+n] = reduce(o, u[soff..+n]); numeric types. */
static tdm_status reduce_into(op_ctx *ctx, tdm_tensor *o, size_t doff, const tdm_tensor *u, size_t soff, size_t n,
                              int red)
{
    if (red == RED_NONE) {
        if (o->dtype == TDM_STRING) {
            char **d = (char **)o->data + doff;
            for (size_t j = 0; j < n; j++) {
                mem_free(d[j]);
                d[j] = NULL;
            }
        }
        return op_tensor_copy(ctx, o, doff, u, soff, n);
    }
    switch (o->dtype) {
    case TDM_FLOAT: RED_APPLY(float); break;
    case TDM_DOUBLE: RED_APPLY(double); break;
    case TDM_INT8: RED_APPLY(int8_t); break;
    case TDM_INT16: RED_APPLY(int16_t); break;
    case TDM_INT32: RED_APPLY(int32_t); break;
    case TDM_INT64: RED_APPLY(int64_t); break;
    case TDM_UINT8: RED_APPLY(uint8_t); break;
    case TDM_UINT16: RED_APPLY(uint16_t); break;
    case TDM_UINT32: RED_APPLY(uint32_t); break;
    case TDM_UINT64: RED_APPLY(uint64_t); break;
    case TDM_FLOAT16:
    case TDM_BFLOAT16:
        for (size_t j = 0; j < n; j++) {
            double a = tensor_get_f64(o, doff + j), b = tensor_get_f64(u, soff + j);
            double v = red == RED_ADD ? a + b : red == RED_MUL ? a * b : red == RED_MAX ? (a > b ? a : b) : (a < b ? a : b);
            tensor_set_f64(o, doff + j, v);
        }
        break;
    default:
        return op_fail(ctx, TDM_E_UNSUPPORTED, "reduction on %s elements is not supported", tdm_dtype_name(o->dtype));
    }
    return TDM_OK;
}

static tdm_status scatter_elements(op_ctx *ctx, int red)
{
    const tdm_tensor *x, *ind, *u;
    tdm_status st;
    if ((st = op_tensor_in(ctx, 0, "data", &x)) || (st = op_tensor_in(ctx, 1, "indices", &ind)) ||
        (st = op_tensor_in(ctx, 2, "updates", &u)) || (st = check_indices(ctx, ind, "indices")))
        return st;
    int axis;
    if ((st = op_axis(ctx, gr_attr_int(ctx->node, "axis", 0), x->rank, "attribute 'axis'", &axis)) != TDM_OK)
        return st;
    if (x->rank == 0 || ind->rank != x->rank || !shape_equal(ind->rank, ind->dims, u->rank, u->dims) ||
        u->dtype != x->dtype)
        return op_fail(ctx, TDM_E_RUNTIME, "inputs 'indices' and 'updates' must have one shape of the data's rank and type");
    for (int d = 0; d < x->rank; d++)
        if (d != axis && ind->dims[d] > x->dims[d])
            return op_fail(ctx, TDM_E_RUNTIME, "input 'indices' is larger than the data along dimension %d", d);
    if ((st = op_out(ctx, 0, x->dtype, x->rank, x->dims)) != TDM_OK ||
        (st = op_tensor_copy(ctx, ctx->out[0], 0, x, 0, x->count)) != TDM_OK)
        return st;
    int64_t xs[TDM_MAX_RANK], idx[TDM_MAX_RANK] = {0};
    shape_strides(x->rank, x->dims, xs);
    int64_t dim = x->dims[axis];
    for (size_t i = 0; i < ind->count; i++) {
        int64_t v = index_at(ind, i, dim);
        if (v < 0)
            return bad_index(ctx, ind, i, dim);
        int64_t off = 0;
        for (int d = 0; d < x->rank; d++)
            off += (d == axis ? v : idx[d]) * xs[d];
        if ((st = reduce_into(ctx, ctx->out[0], (size_t)off, u, i, 1, red)) != TDM_OK)
            return st;
        for (int d = x->rank - 1; d >= 0 && ++idx[d] == ind->dims[d]; d--)
            idx[d] = 0;
    }
    return TDM_OK;
}

tdm_status op_run_Scatter(op_ctx *ctx) { return scatter_elements(ctx, RED_NONE); }

tdm_status op_run_ScatterElements(op_ctx *ctx)
{
    int red;
    tdm_status st = reduction_of(ctx, &red);
    return st ? st : scatter_elements(ctx, red);
}

tdm_status op_run_ScatterND(op_ctx *ctx)
{
    const tdm_tensor *x, *ind, *u;
    tdm_status st;
    int red;
    if ((st = reduction_of(ctx, &red)) || (st = op_tensor_in(ctx, 0, "data", &x)) ||
        (st = op_tensor_in(ctx, 1, "indices", &ind)) || (st = op_tensor_in(ctx, 2, "updates", &u)) ||
        (st = check_indices(ctx, ind, "indices")))
        return st;
    if (ind->rank < 1 || u->dtype != x->dtype)
        return op_fail(ctx, TDM_E_RUNTIME, "input 'indices' must have rank 1 or more and 'updates' the data's type");
    int64_t k = ind->dims[ind->rank - 1];
    if (k < 1 || k > x->rank)
        return op_fail(ctx, TDM_E_RUNTIME, "the last dimension of 'indices' (%lld) exceeds the data rank %d",
                       (long long)k, x->rank);
    /* updates shape = indices.shape[:-1] + data.shape[k:] */
    int ur = ind->rank - 1 + x->rank - (int)k;
    int ok = u->rank == ur;
    for (int d = 0; ok && d < ind->rank - 1; d++)
        ok = u->dims[d] == ind->dims[d];
    for (int d = (int)k; ok && d < x->rank; d++)
        ok = u->dims[ind->rank - 1 + d - k] == x->dims[d];
    if (!ok)
        return op_fail(ctx, TDM_E_RUNTIME, "input 'updates' must have shape indices.shape[:-1] + data.shape[k:]");
    if ((st = op_out(ctx, 0, x->dtype, x->rank, x->dims)) != TDM_OK ||
        (st = op_tensor_copy(ctx, ctx->out[0], 0, x, 0, x->count)) != TDM_OK)
        return st;
    int64_t xs[TDM_MAX_RANK];
    shape_strides(x->rank, x->dims, xs);
    size_t block = 1;
    for (int d = (int)k; d < x->rank; d++)
        block *= (size_t)x->dims[d];
    size_t ntup = ind->count / (size_t)k;
    for (size_t t = 0; t < ntup; t++) {
        int64_t off = 0;
        for (int64_t j = 0; j < k; j++) {
            int64_t v = index_at(ind, t * (size_t)k + (size_t)j, x->dims[j]);
            if (v < 0)
                return bad_index(ctx, ind, t * (size_t)k + (size_t)j, x->dims[j]);
            off += v * xs[j];
        }
        if ((st = reduce_into(ctx, ctx->out[0], (size_t)off, u, t * block, block, red)) != TDM_OK)
            return st;
    }
    return TDM_OK;
}

/* ---- NonZero ---- */

#define NZ_SCAN(T)                                                                                           \
    do {                                                                                                     \
        const T *p_ = x->data;                                                                               \
        for (size_t i = 0; i < x->count; i++)                                                                \
            nz[i] = p_[i] != 0;                                                                              \
    } while (0)

tdm_status op_run_NonZero(op_ctx *ctx)
{
    const tdm_tensor *x;
    tdm_status st = op_tensor_in(ctx, 0, "X", &x);
    if (st)
        return st;
    unsigned char *nz = mem_alloc(x->count + 1);
    if (!nz)
        return op_fail(ctx, TDM_E_NOMEM, "out of memory");
    switch (x->dtype) {
    case TDM_FLOAT: NZ_SCAN(float); break;
    case TDM_DOUBLE: NZ_SCAN(double); break;
    case TDM_INT8: case TDM_UINT8: case TDM_BOOL: NZ_SCAN(uint8_t); break;
    case TDM_INT16: case TDM_UINT16: NZ_SCAN(uint16_t); break;
    case TDM_INT32: case TDM_UINT32: NZ_SCAN(uint32_t); break;
    case TDM_INT64: case TDM_UINT64: NZ_SCAN(uint64_t); break;
    case TDM_STRING:
        for (size_t i = 0; i < x->count; i++)
            nz[i] = tensor_str(x, i)[0] != 0;
        break;
    default:
        for (size_t i = 0; i < x->count; i++)
            nz[i] = tensor_get_f64(x, i) != 0;
        break;
    }
    int64_t n = 0;
    for (size_t i = 0; i < x->count; i++)
        n += nz[i];
    int r = x->rank ? x->rank : 1;
    int64_t dims[2] = {r, n};
    if ((st = op_out(ctx, 0, TDM_INT64, 2, dims)) != TDM_OK) {
        mem_free(nz);
        return st;
    }
    int64_t *o = ctx->out[0]->data, idx[TDM_MAX_RANK] = {0};
    int64_t j = 0;
    for (size_t i = 0; i < x->count; i++) {
        if (nz[i]) {
            for (int d = 0; d < x->rank; d++)
                o[d * n + j] = idx[d];
            if (!x->rank)
                o[j] = 0;
            j++;
        }
        for (int d = x->rank - 1; d >= 0 && ++idx[d] == x->dims[d]; d--)
            idx[d] = 0;
    }
    mem_free(nz);
    return TDM_OK;
}

/* ---- OneHot ---- */

tdm_status op_run_OneHot(op_ctx *ctx)
{
    const tdm_tensor *ind, *dt, *vals;
    tdm_status st;
    if ((st = op_tensor_in(ctx, 0, "indices", &ind)) || (st = op_tensor_in(ctx, 1, "depth", &dt)) ||
        (st = op_tensor_in(ctx, 2, "values", &vals)))
        return st;
    if (dt->count != 1 || dt->dtype == TDM_STRING)
        return op_fail(ctx, TDM_E_RUNTIME, "input 'depth' must be a numeric scalar");
    if (vals->count != 2 || vals->rank != 1)
        return op_fail(ctx, TDM_E_RUNTIME, "input 'values' must hold two elements [off, on]");
    double df = tensor_get_f64(dt, 0);
    if (df >= 1e12)
        return op_fail(ctx, TDM_E_RUNTIME, "input 'depth' (%g) is too large: it must be from 1 to below 1e12", df);
    if (!(df >= 1))
        return op_fail(ctx, TDM_E_RUNTIME, "input 'depth' (%g) must be a number from 1 to below 1e12", df);
    int64_t depth = (int64_t)df;
    int r = ind->rank + 1;
    if (r > TDM_MAX_RANK)
        return op_fail(ctx, TDM_E_UNSUPPORTED, "output rank %d exceeds the limit %d", r, TDM_MAX_RANK);
    int axis;
    if ((st = op_axis(ctx, gr_attr_int(ctx->node, "axis", -1), r, "attribute 'axis'", &axis)) != TDM_OK)
        return st;
    int64_t dims[TDM_MAX_RANK];
    for (int d = 0, j = 0; d < r; d++)
        dims[d] = d == axis ? depth : ind->dims[j++];
    if ((st = op_out(ctx, 0, vals->dtype, r, dims)) != TDM_OK)
        return st;
    tdm_tensor *o = ctx->out[0];
    size_t outer = 1, inner = 1;
    for (int d = 0; d < axis; d++)
        outer *= (size_t)dims[d];
    for (int d = axis + 1; d < r; d++)
        inner *= (size_t)dims[d];
    for (size_t i = 0; i < o->count; i++)
        if ((st = op_tensor_copy(ctx, o, i, vals, 0, 1)) != TDM_OK)
            return st;
    for (size_t a = 0; a < outer; a++)
        for (size_t i = 0; i < inner; i++) {
            double v = tensor_get_f64(ind, a * inner + i);
            int64_t k = (int64_t)v; /* fractional indices truncate, as the reference casts */
            if (v != v || v >= 1e18 || v <= -1e18)
                continue;
            if (k < 0)
                k += depth;
            if (k < 0 || k >= depth)
                continue;
            size_t off = (a * (size_t)depth + (size_t)k) * inner + i;
            if (o->dtype == TDM_STRING) {
                mem_free(((char **)o->data)[off]);
                ((char **)o->data)[off] = NULL;
            }
            if ((st = op_tensor_copy(ctx, o, off, vals, 1, 1)) != TDM_OK)
                return st;
        }
    return TDM_OK;
}

/* ---- Unique ---- */

/* The slices Unique compares: n slices along the axis, each of len =
 * outer * inner elements (without an axis: n single elements). */
typedef struct uq_ctx {
    const tdm_tensor *x;
    size_t len;   /* elements per slice */
    size_t outer; /* product of the dims before the axis */
    size_t inner; /* product of the dims after the axis */
    size_t n;     /* slices along the axis */
} uq_ctx;

/* Element e of slice s (s along the axis, e in [0, outer*inner)). */
static size_t uq_at(const uq_ctx *u, size_t s, size_t e)
{
    size_t o = e / u->inner, i = e % u->inner;
    return (o * u->n + s) * u->inner + i;
}

static int elem_cmp(const tdm_tensor *x, size_t a, size_t b)
{
    switch (x->dtype) {
    case TDM_STRING: {
        int c = strcmp(tensor_str(x, a), tensor_str(x, b));
        return c < 0 ? -1 : c > 0;
    }
    case TDM_INT8: case TDM_INT16: case TDM_INT32: case TDM_INT64: {
        int64_t p = tensor_get_i64(x, a), q = tensor_get_i64(x, b);
        return p < q ? -1 : p > q;
    }
    case TDM_UINT8: case TDM_UINT16: case TDM_UINT32: case TDM_UINT64: case TDM_BOOL: {
        uint64_t p = (uint64_t)tensor_get_i64(x, a), q = (uint64_t)tensor_get_i64(x, b);
        return p < q ? -1 : p > q;
    }
    default: {
        double p = tensor_get_f64(x, a), q = tensor_get_f64(x, b);
        return p < q ? -1 : p > q;
    }
    }
}

static int slice_cmp(const uq_ctx *u, size_t s, size_t t)
{
    for (size_t e = 0; e < u->len; e++) {
        int c = elem_cmp(u->x, uq_at(u, s, e), uq_at(u, t, e));
        if (c)
            return c;
    }
    return 0;
}

/* Stable merge sort of idx[0..n) by slice order; tmp has n entries. */
static void uq_sort(const uq_ctx *u, int64_t *idx, int64_t *tmp, size_t n)
{
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi)
                tmp[k++] = slice_cmp(u, (size_t)idx[j], (size_t)idx[i]) < 0 ? idx[j++] : idx[i++];
            while (i < mid)
                tmp[k++] = idx[i++];
            while (j < hi)
                tmp[k++] = idx[j++];
        }
        memcpy(idx, tmp, n * sizeof *idx);
    }
}

tdm_status op_run_Unique(op_ctx *ctx)
{
    const tdm_tensor *x;
    tdm_status st = op_tensor_in(ctx, 0, "X", &x);
    if (st)
        return st;
    int sorted = (int)gr_attr_int(ctx->node, "sorted", 1);
    const gr_attr *aa = gr_attr_find(ctx->node, "axis");
    int axis = -1;
    if (aa && (st = op_axis(ctx, aa->i, x->rank, "attribute 'axis'", &axis)) != TDM_OK)
        return st;
    if (aa && x->rank == 0)
        return op_fail(ctx, TDM_E_RUNTIME, "attribute 'axis' given for a scalar input");
    uq_ctx u = {x, 1, 1, 1, x->count};
    if (axis >= 0) {
        u.n = (size_t)x->dims[axis];
        for (int d = 0; d < axis; d++)
            u.outer *= (size_t)x->dims[d];
        for (int d = axis + 1; d < x->rank; d++)
            u.inner *= (size_t)x->dims[d];
        u.len = u.outer * u.inner;
    }
    size_t n = u.n;
    int64_t *order = mem_calloc(n + 1, sizeof *order), *tmp = mem_calloc(n + 1, sizeof *tmp);
    int64_t *group = mem_calloc(n + 1, sizeof *group);  /* slice -> unique id */
    int64_t *first = mem_calloc(n + 1, sizeof *first);  /* unique id -> first slice */
    int64_t *count = mem_calloc(n + 1, sizeof *count);
    int64_t *rank_of = mem_calloc(n + 1, sizeof *rank_of); /* unique id -> output position */
    if (!order || !tmp || !group || !first || !count || !rank_of) {
        st = op_fail(ctx, TDM_E_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++)
        order[i] = (int64_t)i;
    uq_sort(&u, order, tmp, n);
    /* Groups in sorted order; stable sort keeps first occurrences first. */
    size_t ng = 0;
    for (size_t k = 0; k < n; k++) {
        if (k == 0 || slice_cmp(&u, (size_t)order[k - 1], (size_t)order[k]) != 0) {
            first[ng] = order[k];
            ng++;
        }
        group[order[k]] = (int64_t)ng - 1;
        count[ng - 1]++;
    }
    if (sorted) {
        for (size_t g = 0; g < ng; g++)
            rank_of[g] = (int64_t)g;
    } else {
        /* Order groups by first occurrence: walk the slices in order. */
        int64_t next = 0;
        for (size_t g = 0; g < ng; g++)
            rank_of[g] = -1;
        for (size_t i = 0; i < n; i++)
            if (rank_of[group[i]] < 0)
                rank_of[group[i]] = next++;
    }
    /* Y */
    int64_t dims[TDM_MAX_RANK];
    int r = 1;
    dims[0] = (int64_t)ng;
    if (axis >= 0) {
        r = x->rank;
        memcpy(dims, x->dims, sizeof dims[0] * (size_t)r);
        dims[axis] = (int64_t)ng;
    }
    if ((st = op_out(ctx, 0, x->dtype, r, dims)) != TDM_OK)
        goto done;
    for (size_t g = 0; g < ng; g++) {
        size_t pos = (size_t)rank_of[g];
        for (size_t o = 0; o < u.outer; o++)
            if ((st = op_tensor_copy(ctx, ctx->out[0], (o * ng + pos) * u.inner, x,
                                     (o * n + (size_t)first[g]) * u.inner, u.inner)) != TDM_OK)
                goto done;
    }
    int64_t ngd = (int64_t)ng, nd = (int64_t)n;
    if (op_out_wanted(ctx, 1)) {
        if ((st = op_out(ctx, 1, TDM_INT64, 1, &ngd)) != TDM_OK)
            goto done;
        for (size_t g = 0; g < ng; g++)
            ((int64_t *)ctx->out[1]->data)[rank_of[g]] = first[g];
    }
    if (op_out_wanted(ctx, 2)) {
        if ((st = op_out(ctx, 2, TDM_INT64, 1, &nd)) != TDM_OK)
            goto done;
        for (size_t i = 0; i < n; i++)
            ((int64_t *)ctx->out[2]->data)[i] = rank_of[group[i]];
    }
    if (op_out_wanted(ctx, 3)) {
        if ((st = op_out(ctx, 3, TDM_INT64, 1, &ngd)) != TDM_OK)
            goto done;
        for (size_t g = 0; g < ng; g++)
            ((int64_t *)ctx->out[3]->data)[rank_of[g]] = count[g];
    }
done:
    mem_free(order);
    mem_free(tmp);
    mem_free(group);
    mem_free(first);
    mem_free(count);
    mem_free(rank_of);
    return st;
}
