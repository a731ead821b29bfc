/* Helpers shared by the signal, random and text op files. */
#include "ops/signal.h"

#include <math.h>

tdm_status sig_scalar_int(op_ctx *ctx, int i, const char *what, int64_t *out)
{
    const tdm_tensor *t = i < ctx->n_in ? ctx->in[i] : NULL;
    if (!t || t->kind != TDM_KIND_TENSOR)
        return op_fail(ctx, TDM_E_RUNTIME, "input %d (%s) is missing", i, what);
    if (!dtype_is_int(t->dtype))
        return op_fail(ctx, TDM_E_RUNTIME, "input %d (%s) must be an integer, not %s", i, what,
                       tdm_dtype_name(t->dtype));
    if (t->count != 1)
        return op_fail(ctx, TDM_E_RUNTIME, "input %d (%s) must hold one value, not %zu", i, what, t->count);
    *out = tensor_get_i64(t, 0);
    return TDM_OK;
}

tdm_status sig_scalar_f64(op_ctx *ctx, int i, const char *what, double *out)
{
    const tdm_tensor *t = i < ctx->n_in ? ctx->in[i] : NULL;
    if (!t || t->kind != TDM_KIND_TENSOR)
        return op_fail(ctx, TDM_E_RUNTIME, "input %d (%s) is missing", i, what);
    if (!dtype_is_int(t->dtype) && !dtype_is_float(t->dtype))
        return op_fail(ctx, TDM_E_RUNTIME, "input %d (%s) must be numeric, not %s", i, what,
                       tdm_dtype_name(t->dtype));
    if (t->count != 1)
        return op_fail(ctx, TDM_E_RUNTIME, "input %d (%s) must hold one value, not %zu", i, what, t->count);
    *out = tensor_get_f64(t, 0);
    return TDM_OK;
}

int sig_infer_scalar_int(const op_infer_ctx *ctx, int i, int64_t *out)
{
    const tdm_tensor *t = i < ctx->n_in && ctx->value ? ctx->value[i] : NULL;
    if (!t || t->kind != TDM_KIND_TENSOR || !dtype_is_int(t->dtype) || t->count != 1 || !t->data)
        return 0;
    *out = tensor_get_i64(t, 0);
    return 1;
}

int sig_numeric_dtype(int64_t dt)
{
    return dt > 0 && dt < TDM_DTYPE_COUNT && (DT_NUMERIC & DT_BIT(dt));
}

/* Float to integer with saturation, so that NaN/huge values stay defined. */
static int64_t to_i64(double v, double lo, double hi)
{
    if (!(v == v))
        return 0;
    if (v <= lo)
        return (int64_t)lo;
    if (v >= hi)
        return (int64_t)hi;
    return (int64_t)v;
}

static uint64_t to_u64(double v, double hi)
{
    if (!(v > 0))
        return 0;
    if (v >= hi)
        return (uint64_t)hi;
    return (uint64_t)v;
}

void sig_store_f64(tdm_tensor *t, size_t at, const double *src, size_t n)
{
    size_t k;
    switch (t->dtype) {
    case TDM_FLOAT: {
        float *p = (float *)t->data + at;
        for (k = 0; k < n; k++)
            p[k] = (float)src[k];
        break;
    }
    case TDM_DOUBLE: {
        double *p = (double *)t->data + at;
        for (k = 0; k < n; k++)
            p[k] = src[k];
        break;
    }
    case TDM_FLOAT16: {
        uint16_t *p = (uint16_t *)t->data + at;
        for (k = 0; k < n; k++)
            p[k] = f32_to_fp16((float)src[k]);
        break;
    }
    case TDM_BFLOAT16: {
        uint16_t *p = (uint16_t *)t->data + at;
        for (k = 0; k < n; k++)
            p[k] = f32_to_bf16((float)src[k]);
        break;
    }
    case TDM_INT8: {
        int8_t *p = (int8_t *)t->data + at;
        for (k = 0; k < n; k++)
            p[k] = (int8_t)to_i64(src[k], INT8_MIN, INT8_MAX);
        break;
    }
    case TDM_INT16: {
        int16_t *p = (int16_t *)t->data + at;
        for (k = 0; k < n; k++)
            p[k] = (int16_t)to_i64(src[k], INT16_MIN, INT16_MAX);
        break;
    }
    case TDM_INT32: {
        int32_t *p = (int32_t *)t->data + at;
        for (k = 0; k < n; k++)
            p[k] = (int32_t)to_i64(src[k], INT32_MIN, INT32_MAX);
        break;
    }
    case TDM_INT64: {
        int64_t *p = (int64_t *)t->data + at;
        for (k = 0; k < n; k++)
            p[k] = to_i64(src[k], -9223372036854775808.0, 9223372036854774784.0);
        break;
    }
    case TDM_UINT8: {
        uint8_t *p = (uint8_t *)t->data + at;
        for (k = 0; k < n; k++)
            p[k] = (uint8_t)to_u64(src[k], UINT8_MAX);
        break;
    }
    case TDM_UINT16: {
        uint16_t *p = (uint16_t *)t->data + at;
        for (k = 0; k < n; k++)
            p[k] = (uint16_t)to_u64(src[k], UINT16_MAX);
        break;
    }
    case TDM_UINT32: {
        uint32_t *p = (uint32_t *)t->data + at;
        for (k = 0; k < n; k++)
            p[k] = (uint32_t)to_u64(src[k], UINT32_MAX);
        break;
    }
    case TDM_UINT64: {
        uint64_t *p = (uint64_t *)t->data + at;
        for (k = 0; k < n; k++)
            p[k] = to_u64(src[k], 18446744073709549568.0);
        break;
    }
    case TDM_BOOL: {
        uint8_t *p = (uint8_t *)t->data + at;
        for (k = 0; k < n; k++)
            p[k] = src[k] != 0;
        break;
    }
    default:
        for (k = 0; k < n; k++)
            tensor_set_f64(t, at + k, src[k]);
        break;
    }
}

void sig_load_f64(const tdm_tensor *t, size_t at, size_t stride, size_t n, double *dst)
{
    size_t k;
    switch (t->dtype) {
    case TDM_FLOAT: {
        const float *p = (const float *)t->data + at;
        for (k = 0; k < n; k++, p += stride)
            dst[k] = *p;
        break;
    }
    case TDM_DOUBLE: {
        const double *p = (const double *)t->data + at;
        for (k = 0; k < n; k++, p += stride)
            dst[k] = *p;
        break;
    }
    case TDM_FLOAT16: {
        const uint16_t *p = (const uint16_t *)t->data + at;
        for (k = 0; k < n; k++, p += stride)
            dst[k] = fp16_to_f32(*p);
        break;
    }
    case TDM_BFLOAT16: {
        const uint16_t *p = (const uint16_t *)t->data + at;
        for (k = 0; k < n; k++, p += stride)
            dst[k] = bf16_to_f32(*p);
        break;
    }
    default:
        for (k = 0; k < n; k++)
            dst[k] = tensor_get_f64(t, at + k * stride);
        break;
    }
}
