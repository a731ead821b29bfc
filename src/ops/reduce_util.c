/* Helpers shared by the reduce family: typed row conversions and the
 * reduction walk. */
#include "ops/reduce.h"
#include "core/mem.h"

#include <math.h>
#include <string.h>

/* uint64 to int64 modulo 2^64, without implementation-defined conversion */
static int64_t u64_wrap(uint64_t u)
{
    return u >= 0x8000000000000000u ? (int64_t)(u - 0x8000000000000000u) - INT64_MAX - 1 : (int64_t)u;
}

#define ROW_CONV(T, EXPR)                                                                                  \
    do {                                                                                                   \
        const T *p_ = (const T *)t->data + off;                                                            \
        for (size_t k_ = 0; k_ < n; k_++) {                                                                \
            T v_ = p_[k_];                                                                                 \
            dst[k_] = (EXPR);                                                                              \
        }                                                                                                  \
    } while (0)

void op_red_row_f64(const tdm_tensor *t, size_t off, size_t n, double *dst)
{
    switch (t->dtype) {
    case TDM_FLOAT: ROW_CONV(float, (double)v_); break;
    case TDM_DOUBLE: ROW_CONV(double, v_); break;
    case TDM_FLOAT16: ROW_CONV(uint16_t, (double)fp16_to_f32(v_)); break;
    case TDM_BFLOAT16: ROW_CONV(uint16_t, (double)bf16_to_f32(v_)); break;
    case TDM_INT8: ROW_CONV(int8_t, (double)v_); break;
    case TDM_INT16: ROW_CONV(int16_t, (double)v_); break;
    case TDM_INT32: ROW_CONV(int32_t, (double)v_); break;
    case TDM_INT64: ROW_CONV(int64_t, (double)v_); break;
    case TDM_UINT8: ROW_CONV(uint8_t, (double)v_); break;
    case TDM_BOOL: ROW_CONV(uint8_t, v_ ? 1.0 : 0.0); break;
    case TDM_UINT16: ROW_CONV(uint16_t, (double)v_); break;
    case TDM_UINT32: ROW_CONV(uint32_t, (double)v_); break;
    case TDM_UINT64: ROW_CONV(uint64_t, (double)v_); break;
    default: memset(dst, 0, n * sizeof *dst); break;
    }
}

void op_red_row_i64(const tdm_tensor *t, size_t off, size_t n, int64_t *dst)
{
    switch (t->dtype) {
    case TDM_INT8: ROW_CONV(int8_t, (int64_t)v_); break;
    case TDM_INT16: ROW_CONV(int16_t, (int64_t)v_); break;
    case TDM_INT32: ROW_CONV(int32_t, (int64_t)v_); break;
    case TDM_INT64: ROW_CONV(int64_t, v_); break;
    case TDM_UINT8: ROW_CONV(uint8_t, (int64_t)v_); break;
    case TDM_BOOL: ROW_CONV(uint8_t, v_ ? 1 : 0); break;
    case TDM_UINT16: ROW_CONV(uint16_t, (int64_t)v_); break;
    case TDM_UINT32: ROW_CONV(uint32_t, (int64_t)v_); break;
    case TDM_UINT64: ROW_CONV(uint64_t, u64_wrap(v_)); break;
    default: {
        for (size_t k = 0; k < n; k++) {
            double v = tensor_get_f64(t, off + k);
            dst[k] = v != v ? 0 : v >= 9.2233720368547758e18 ? INT64_MAX : v <= -9.2233720368547758e18 ? INT64_MIN : (int64_t)v;
        }
        break;
    }
    }
}

void op_red_row_key(const tdm_tensor *t, size_t off, size_t n, int64_t *dst)
{
    if (t->dtype == TDM_UINT64) {
        /* flip the top bit: unsigned order becomes signed order */
        const uint64_t *p = (const uint64_t *)t->data + off;
        for (size_t k = 0; k < n; k++) {
            dst[k] = u64_wrap(p[k] ^ 0x8000000000000000u);
        }
        return;
    }
    op_red_row_i64(t, off, n, dst);
}

static int64_t f64_to_i64_sat(double v)
{
    if (v != v)
        return 0;
    if (v >= 9.2233720368547758e18)
        return INT64_MAX;
    if (v <= -9.2233720368547758e18)
        return INT64_MIN;
    return (int64_t)v;
}

static uint64_t f64_to_u64_sat(double v)
{
    if (v != v || v <= 0)
        return 0;
    if (v >= 1.8446744073709552e19)
        return UINT64_MAX;
    return (uint64_t)v;
}

#define PUT_CONV(T, EXPR)                                                                                  \
    do {                                                                                                   \
        T *p_ = (T *)t->data + off;                                                                        \
        for (size_t k_ = 0; k_ < n; k_++) {                                                                \
            double v_ = src[k_];                                                                           \
            p_[k_] = (EXPR);                                                                               \
        }                                                                                                  \
    } while (0)

void op_red_put_f64(tdm_tensor *t, size_t off, size_t n, const double *src)
{
    switch (t->dtype) {
    case TDM_FLOAT: PUT_CONV(float, (float)v_); break;
    case TDM_DOUBLE: PUT_CONV(double, v_); break;
    case TDM_FLOAT16: PUT_CONV(uint16_t, f32_to_fp16((float)v_)); break;
    case TDM_BFLOAT16: PUT_CONV(uint16_t, f32_to_bf16((float)v_)); break;
    case TDM_BOOL: PUT_CONV(uint8_t, (uint8_t)(v_ != 0.0)); break;
    case TDM_INT8: PUT_CONV(int8_t, (int8_t)f64_to_i64_sat(v_)); break;
    case TDM_INT16: PUT_CONV(int16_t, (int16_t)f64_to_i64_sat(v_)); break;
    case TDM_INT32: PUT_CONV(int32_t, (int32_t)f64_to_i64_sat(v_)); break;
    case TDM_INT64: PUT_CONV(int64_t, f64_to_i64_sat(v_)); break;
    case TDM_UINT8: PUT_CONV(uint8_t, (uint8_t)f64_to_i64_sat(v_)); break;
    case TDM_UINT16: PUT_CONV(uint16_t, (uint16_t)f64_to_i64_sat(v_)); break;
    case TDM_UINT32: PUT_CONV(uint32_t, (uint32_t)f64_to_i64_sat(v_)); break;
    case TDM_UINT64: PUT_CONV(uint64_t, f64_to_u64_sat(v_)); break;
    default: break;
    }
}

void op_red_put_i64(tdm_tensor *t, size_t off, size_t n, const int64_t *src)
{
    switch (t->dtype) {
    case TDM_INT64: memcpy((int64_t *)t->data + off, src, n * sizeof *src); break;
    case TDM_FLOAT: case TDM_DOUBLE: case TDM_FLOAT16: case TDM_BFLOAT16:
        for (size_t k = 0; k < n; k++) {
            double v = (double)src[k];
            op_red_put_f64(t, off + k, 1, &v);
        }
        break;
    default:
        for (size_t k = 0; k < n; k++)
            tensor_set_i64(t, off + k, src[k]);
        break;
    }
}

tdm_status op_red_alloc_f64(op_ctx *ctx, size_t n, double **out)
{
    *out = mem_calloc(n ? n : 1, sizeof(double));
    if (!*out)
        return op_fail(ctx, TDM_E_NOMEM, "out of memory for %zu working values", n);
    return TDM_OK;
}

tdm_status op_red_load_f64(op_ctx *ctx, const tdm_tensor *t, double **out)
{
    tdm_status st = op_red_alloc_f64(ctx, t->count, out);
    if (st)
        return st;
    op_red_row_f64(t, 0, t->count, *out);
    return TDM_OK;
}

tdm_status op_red_prod(op_ctx *ctx, const int64_t *dims, int from, int to, size_t *out)
{
    size_t p = 1;
    for (int k = from; k < to; k++) {
        if (dims[k] < 0 || mem_mul(p, (size_t)dims[k], &p))
            return op_fail(ctx, TDM_E_NOMEM, "the tensor's size overflows");
    }
    *out = p;
    return TDM_OK;
}

tdm_status op_red_check(op_ctx *ctx, int i, uint32_t mask)
{
    const tdm_tensor *t = i < ctx->n_in ? ctx->in[i] : NULL;
    if (!t)
        return op_fail(ctx, TDM_E_MODEL, "input %d is missing", i);
    if (t->kind != TDM_KIND_TENSOR)
        return op_fail(ctx, TDM_E_RUNTIME, "input %d must be a tensor", i);
    if (!dtype_valid(t->dtype) || !(mask & DT_BIT(t->dtype)))
        return op_fail(ctx, TDM_E_UNSUPPORTED, "input %d has element type %s, which this operator does not take",
                       i, tdm_dtype_name(t->dtype));
    return TDM_OK;
}

void op_red_iter_init(op_red_iter *it, int rank, const int64_t *dims, const unsigned char *red)
{
    memset(it, 0, sizeof *it);
    int m = 0;
    int flag[TDM_MAX_RANK];
    int empty = 0;
    for (int k = 0; k < rank; k++) {
        if (dims[k] == 0)
            empty = 1;
        if (dims[k] == 1)
            continue; /* size-1 dims never move an offset */
        int r = red[k] != 0;
        if (m > 0 && flag[m - 1] == r) {
            it->d[m - 1] *= dims[k];
        } else {
            flag[m] = r;
            it->d[m++] = dims[k];
        }
    }
    if (m == 0) {
        flag[0] = 0;
        it->d[m++] = 1;
    }
    it->m = m;
    int64_t s = 1;
    for (int k = m - 1; k >= 0; k--) {
        it->ostr[k] = flag[k] ? 0 : s;
        if (!flag[k])
            s *= it->d[k];
    }
    it->n = (size_t)it->d[m - 1];
    it->inner_red = flag[m - 1];
    size_t rows = 1;
    for (int k = 0; k < m - 1; k++)
        rows *= (size_t)it->d[k];
    it->rows = empty ? 0 : rows;
}

void op_red_iter_next(op_red_iter *it)
{
    it->in_off += it->n;
    for (int k = it->m - 2; k >= 0; k--) {
        it->out_off += (size_t)it->ostr[k];
        if (++it->idx[k] < it->d[k])
            return;
        it->out_off -= (size_t)it->ostr[k] * (size_t)it->d[k];
        it->idx[k] = 0;
    }
}
