/* Linear quantization: QuantizeLinear, DequantizeLinear (per tensor or per
 * axis) and DynamicQuantizeLinear. Rounding is to nearest, ties to even,
 * in float as the ONNX reference does. */
#include "ops/nn.h"
#include "ops/elementwise.h"
#include "core/mem.h"

#include <math.h>
#include <string.h>

/* Scale / zero point layout: per tensor (one value) or per axis. */
typedef struct q_axis {
    size_t outer, len, inner; /* x = outer x len x inner; len = 1 for per tensor */
} q_axis;

static tdm_status q_layout(op_ctx *ctx, const tdm_tensor *x, const tdm_tensor *scale, const tdm_tensor *zp,
                           q_axis *q)
{
    q->outer = x->count;
    q->len = 1;
    q->inner = 1;
    if (zp && zp->count != scale->count)
        return op_fail(ctx, TDM_E_RUNTIME, "the zero point has %zu values but the scale has %zu", zp->count,
                       scale->count);
    if (scale->count == 1 && scale->rank <= 1)
        return TDM_OK;
    if (ctx->version < 13 || scale->rank != 1)
        return op_fail(ctx, TDM_E_RUNTIME, "the scale must be a scalar%s",
                       ctx->version < 13 ? "" : " or a 1-D tensor");
    int axis;
    tdm_status st = op_axis(ctx, gr_attr_int(ctx->node, "axis", 1), x->rank, "attribute axis", &axis);
    if (st)
        return st;
    if (scale->count != (size_t)x->dims[axis])
        return op_fail(ctx, TDM_E_RUNTIME, "the scale has %zu values but dimension %d of x has %lld", scale->count,
                       axis, (long long)x->dims[axis]);
    q->outer = 1;
    for (int i = 0; i < axis; i++)
        q->outer *= (size_t)x->dims[i];
    q->len = (size_t)x->dims[axis];
    for (int i = axis + 1; i < x->rank; i++)
        q->inner *= (size_t)x->dims[i];
    return TDM_OK;
}

static int32_t q_ld(const tdm_tensor *t, size_t i)
{
    switch (t->dtype) {
    case TDM_INT8:
        return ((const int8_t *)t->data)[i];
    case TDM_UINT8:
        return ((const uint8_t *)t->data)[i];
    case TDM_INT32:
        return ((const int32_t *)t->data)[i];
    default:
        return (int32_t)tensor_get_i64(t, i);
    }
}

/* ---- versions 19 (float8, saturate), 21 (blocks, int4/uint4/int16/uint16,
 * output_dtype) and 23 (DequantizeLinear's output_dtype) ---- */

/* Where each element of x finds its scale: per tensor, per axis, or per
 * block of block_size along the axis (the scale then has x's rank). */
typedef struct q_map {
    size_t len, inner, slen; /* x = outer x len x inner; slen: the scale's length along the axis */
    int64_t block;           /* 0: per tensor (len == 1) or per axis */
} q_map;

static size_t q_index(const q_map *m, size_t i)
{
    size_t k = i % m->inner, a = (i / m->inner) % m->len, o = i / m->inner / m->len;
    if (!m->block)
        return m->len == 1 ? 0 : a;
    return (o * m->slen + a / (size_t)m->block) * m->inner + k;
}

static tdm_status q_map_of(op_ctx *ctx, const tdm_tensor *x, const tdm_tensor *sc, const tdm_tensor *zp, q_map *m)
{
    memset(m, 0, sizeof *m);
    m->len = m->inner = m->slen = 1;
    if (zp && (zp->count != sc->count || (zp->rank != sc->rank && sc->count != 1)))
        return op_fail(ctx, TDM_E_RUNTIME, "the zero point has %zu values but the scale has %zu", zp->count,
                       sc->count);
    int64_t block = ctx->version >= 21 ? gr_attr_int(ctx->node, "block_size", 0) : 0;
    if (sc->count == 1 && sc->rank <= 1 && block <= 0)
        return TDM_OK;
    int axis;
    tdm_status st = op_axis(ctx, gr_attr_int(ctx->node, "axis", 1), x->rank, "attribute axis", &axis);
    if (st)
        return st;
    m->len = (size_t)x->dims[axis];
    for (int i = axis + 1; i < x->rank; i++)
        m->inner *= (size_t)x->dims[i];
    if (block <= 0) {
        if (sc->rank != 1 || sc->count != m->len)
            return op_fail(ctx, TDM_E_RUNTIME, "the scale has %zu values but dimension %d of x has %zu", sc->count,
                           axis, m->len);
        return TDM_OK;
    }
    if (sc->rank != x->rank)
        return op_fail(ctx, TDM_E_RUNTIME, "a blocked scale must have x's rank %d, not %d", x->rank, sc->rank);
    for (int i = 0; i < x->rank; i++) {
        int64_t want = i == axis ? x->dims[i] / block + (x->dims[i] % block != 0) : x->dims[i];
        if (sc->dims[i] != want)
            return op_fail(ctx, TDM_E_RUNTIME, "the scale's dimension %d is %lld, blocks of %lld need %lld", i,
                           (long long)sc->dims[i], (long long)block, (long long)want);
    }
    m->block = block;
    m->slen = (size_t)sc->dims[axis];
    return TDM_OK;
}

/* The range of an integer quantized type (lo > hi: not an integer one). */
static void q_range(tdm_dtype dt, double *lo, double *hi)
{
    switch (dt) {
    case TDM_UINT8: *lo = 0; *hi = 255; break;
    case TDM_INT8: *lo = -128; *hi = 127; break;
    case TDM_UINT16: *lo = 0; *hi = 65535; break;
    case TDM_INT16: *lo = -32768; *hi = 32767; break;
    case TDM_UINT4: *lo = 0; *hi = 15; break;
    case TDM_INT4: *lo = -8; *hi = 7; break;
    case TDM_UINT2: *lo = 0; *hi = 3; break;
    case TDM_INT2: *lo = -2; *hi = 1; break;
    case TDM_INT32: *lo = -2147483648.0; *hi = 2147483647.0; break;
    default: *lo = 1; *hi = 0; break;
    }
}

/* Element i of a quantized tensor as a number (the low-bit types held one
 * per byte). */
static double q_get(const tdm_tensor *t, size_t i)
{
    if (op_is_lowbit(t->dtype))
        return op_lowbit_to_f64(((const uint8_t *)t->data)[i], t->dtype);
    return tensor_get_f64(t, i);
}

/* A float computed in x's type, as numpy computes x / scale there. */
static float q_round_to(tdm_dtype dt, float v)
{
    if (dt == TDM_FLOAT16)
        return fp16_to_f32(f32_to_fp16(v));
    if (dt == TDM_BFLOAT16)
        return bf16_to_f32(f32_to_bf16(v));
    return v;
}

static tdm_status quantize_v19(op_ctx *ctx, const tdm_tensor *x, const tdm_tensor *sc, const tdm_tensor *zp)
{
    int64_t odt = ctx->version >= 21 ? gr_attr_int(ctx->node, "output_dtype", 0) : 0;
    tdm_dtype ydt = zp ? zp->dtype : odt > 0 && odt <= 31 && dtype_valid((int)odt) ? (tdm_dtype)odt : TDM_UINT8;
    if (zp && odt && odt != (int64_t)zp->dtype)
        return op_fail(ctx, TDM_E_RUNTIME, "output_dtype %lld contradicts y_zero_point's %s", (long long)odt,
                       tdm_dtype_name(zp->dtype));
    double lo, hi;
    q_range(ydt, &lo, &hi);
    /* float4e2m1 has no infinity and no NaN: it always saturates */
    int f8 = op_is_float8(ydt) || ydt == TDM_FLOAT4E2M1;
    if ((lo > hi && !f8) || ydt == TDM_INT32)
        return op_fail(ctx, TDM_E_UNSUPPORTED, "QuantizeLinear cannot produce %s", tdm_dtype_name(ydt));
    q_map m;
    tdm_status st = q_map_of(ctx, x, sc, zp, &m);
    if (st || (st = op_out(ctx, 0, ydt, x->rank, x->dims)))
        return st;
    tdm_tensor *y = ctx->out[0];
    int saturate = gr_attr_int(ctx->node, "saturate", 1) != 0;
    for (size_t i = 0; i < x->count; i++) {
        size_t s = q_index(&m, i);
        float v = q_round_to(x->dtype, (float)tensor_get_f64(x, i) / (float)tensor_get_f64(sc, s));
        double z = zp ? q_get(zp, s) : 0.0;
        if (f8) {
            ((uint8_t *)y->data)[i] = op_f64_to_lowbit((double)v + z, ydt, saturate, OP_E8M0_UP);
            continue;
        }
        double r = nearbyint((double)v) + z;
        r = r != r ? 0.0 : r < lo ? lo : r > hi ? hi : r;
        if (dtype_packed_bits(ydt))
            ((uint8_t *)y->data)[i] = (uint8_t)(int8_t)r;
        else
            tensor_set_i64(y, i, (int64_t)r);
    }
    return TDM_OK;
}

static tdm_status dequantize_v19(op_ctx *ctx, const tdm_tensor *x, const tdm_tensor *sc, const tdm_tensor *zp)
{
    double lo, hi;
    q_range(x->dtype, &lo, &hi);
    if (lo > hi && !op_is_float8(x->dtype) && x->dtype != TDM_FLOAT4E2M1)
        return op_fail(ctx, TDM_E_UNSUPPORTED, "DequantizeLinear cannot take %s", tdm_dtype_name(x->dtype));
    /* the reference ignores a float4e2m1 zero point */
    if (x->dtype == TDM_FLOAT4E2M1)
        zp = NULL;
    if (!dtype_is_float(sc->dtype) || (zp && zp->dtype != x->dtype))
        return op_fail(ctx, TDM_E_RUNTIME, "x_scale must be float and x_zero_point of x's type");
    int64_t odt = ctx->version >= 23 ? gr_attr_int(ctx->node, "output_dtype", 0) : 0;
    tdm_dtype ydt = odt > 0 && odt <= 31 && dtype_is_float((tdm_dtype)odt) ? (tdm_dtype)odt : sc->dtype;
    q_map m;
    tdm_status st = q_map_of(ctx, x, sc, zp, &m);
    if (st || (st = op_out(ctx, 0, ydt, x->rank, x->dims)))
        return st;
    for (size_t i = 0; i < x->count; i++) {
        size_t s = q_index(&m, i);
        float v = (float)(q_get(x, i) - (zp ? q_get(zp, s) : 0.0)) * (float)tensor_get_f64(sc, s);
        tensor_set_f64(ctx->out[0], i, v);
    }
    return TDM_OK;
}

tdm_status op_run_QuantizeLinear(op_ctx *ctx)
{
    if (ctx->version >= 19) {
        const tdm_tensor *x19 = op_nn_in(ctx, 0), *sc19 = op_nn_in(ctx, 1);
        if (!x19 || !sc19)
            return op_fail(ctx, TDM_E_MODEL, "inputs x and y_scale are required");
        if (!(DT_BIT(x19->dtype) & (DT_FLOATS | DT_BIT(TDM_INT32))) || !dtype_is_float(sc19->dtype))
            return op_fail(ctx, TDM_E_UNSUPPORTED, "QuantizeLinear takes float or int32 x and a float scale");
        return quantize_v19(ctx, x19, sc19, op_nn_in(ctx, 2));
    }
    const tdm_tensor *x = op_nn_in(ctx, 0), *sc = op_nn_in(ctx, 1), *zp = op_nn_in(ctx, 2);
    if (!x || !sc)
        return op_fail(ctx, TDM_E_MODEL, "inputs x and y_scale are required");
    if (!(DT_BIT(x->dtype) & (DT_FLOATS | DT_BIT(TDM_INT32))) || !dtype_is_float(sc->dtype))
        return op_fail(ctx, TDM_E_UNSUPPORTED, "QuantizeLinear takes float or int32 x and a float scale");
    tdm_dtype ydt = zp ? zp->dtype : TDM_UINT8;
    if (ydt != TDM_UINT8 && ydt != TDM_INT8)
        return op_fail(ctx, TDM_E_UNSUPPORTED, "y_zero_point must be int8 or uint8, not %s", tdm_dtype_name(ydt));
    q_axis q;
    tdm_status st = q_layout(ctx, x, sc, zp, &q);
    if (st)
        return st;
    st = op_out(ctx, 0, ydt, x->rank, x->dims);
    if (st)
        return st;
    tdm_tensor *y = ctx->out[0];
    float *fx = op_nn_to_f32(x), *fs = op_nn_to_f32(sc);
    if (!fx || !fs) {
        mem_free(fx);
        mem_free(fs);
        return op_fail(ctx, TDM_E_NOMEM, "out of memory");
    }
    float lo = ydt == TDM_UINT8 ? 0.0f : -128.0f, hi = ydt == TDM_UINT8 ? 255.0f : 127.0f;
    size_t i = 0;
    for (size_t o = 0; o < q.outer; o++)
        for (size_t a = 0; a < q.len; a++) {
            float s = fs[a];
            float z = zp ? (float)q_ld(zp, a) : 0.0f;
            for (size_t k = 0; k < q.inner; k++, i++) {
                float v = nearbyintf(fx[i] / s) + z;
                v = v < lo ? lo : v > hi ? hi : v;
                if (v != v)
                    v = 0.0f;
                if (ydt == TDM_UINT8)
                    ((uint8_t *)y->data)[i] = (uint8_t)v;
                else
                    ((int8_t *)y->data)[i] = (int8_t)v;
            }
        }
    mem_free(fx);
    mem_free(fs);
    return TDM_OK;
}

tdm_status op_run_DequantizeLinear(op_ctx *ctx)
{
    if (ctx->version >= 19) {
        const tdm_tensor *x19 = op_nn_in(ctx, 0), *sc19 = op_nn_in(ctx, 1);
        if (!x19 || !sc19)
            return op_fail(ctx, TDM_E_MODEL, "inputs x and x_scale are required");
        return dequantize_v19(ctx, x19, sc19, op_nn_in(ctx, 2));
    }
    const tdm_tensor *x = op_nn_in(ctx, 0), *sc = op_nn_in(ctx, 1), *zp = op_nn_in(ctx, 2);
    if (!x || !sc)
        return op_fail(ctx, TDM_E_MODEL, "inputs x and x_scale are required");
    if (x->dtype != TDM_INT8 && x->dtype != TDM_UINT8 && x->dtype != TDM_INT32)
        return op_fail(ctx, TDM_E_UNSUPPORTED, "DequantizeLinear takes int8, uint8 or int32 x, not %s",
                       tdm_dtype_name(x->dtype));
    if (!dtype_is_float(sc->dtype) || (zp && zp->dtype != x->dtype))
        return op_fail(ctx, TDM_E_RUNTIME, "x_scale must be float and x_zero_point of x's type");
    q_axis q;
    tdm_status st = q_layout(ctx, x, sc, zp, &q);
    if (st)
        return st;
    tdm_dtype ydt = sc->dtype;
    st = op_out(ctx, 0, ydt, x->rank, x->dims);
    if (st)
        return st;
    tdm_tensor *y = ctx->out[0];
    float *fs = op_nn_to_f32(sc);
    float *fy = ydt == TDM_FLOAT ? y->data : mem_alloc(y->count * sizeof *fy + 1);
    if (!fs || !fy) {
        mem_free(fs);
        if (ydt != TDM_FLOAT)
            mem_free(fy);
        return op_fail(ctx, TDM_E_NOMEM, "out of memory");
    }
    size_t i = 0;
    for (size_t o = 0; o < q.outer; o++)
        for (size_t a = 0; a < q.len; a++) {
            float s = fs[a];
            int32_t z = zp ? q_ld(zp, a) : 0;
            for (size_t k = 0; k < q.inner; k++, i++)
                fy[i] = (float)((int64_t)q_ld(x, i) - z) * s;
        }
    if (ydt != TDM_FLOAT) {
        op_nn_from_f32(y, fy);
        mem_free(fy);
    }
    mem_free(fs);
    return TDM_OK;
}

tdm_status op_run_DynamicQuantizeLinear(op_ctx *ctx)
{
    const tdm_tensor *x = op_nn_in(ctx, 0);
    if (!x)
        return op_fail(ctx, TDM_E_MODEL, "input x is required");
    if (x->dtype != TDM_FLOAT)
        return op_fail(ctx, TDM_E_UNSUPPORTED, "DynamicQuantizeLinear takes float, not %s", tdm_dtype_name(x->dtype));
    tdm_status st = op_out(ctx, 0, TDM_UINT8, x->rank, x->dims);
    if (!st && ctx->n_out > 1)
        st = op_out(ctx, 1, TDM_FLOAT, 0, NULL);
    if (!st && ctx->n_out > 2)
        st = op_out(ctx, 2, TDM_UINT8, 0, NULL);
    if (st)
        return st;
    const float *xp = x->data;
    float mn = 0.0f, mx = 0.0f;
    for (size_t i = 0; i < x->count; i++) {
        mn = xp[i] < mn ? xp[i] : mn;
        mx = xp[i] > mx ? xp[i] : mx;
    }
    float scale = (mx - mn) / 255.0f;
    float zpf = 0.0f;
    if (scale > 0.0f) {
        zpf = 0.0f - mn / scale;
        zpf = zpf < 0.0f ? 0.0f : zpf > 255.0f ? 255.0f : zpf;
        zpf = nearbyintf(zpf);
    }
    uint8_t *yp = ctx->out[0]->data;
    for (size_t i = 0; i < x->count; i++) {
        float v = scale > 0.0f ? nearbyintf(xp[i] / scale) + zpf : 0.0f;
        v = v < 0.0f ? 0.0f : v > 255.0f ? 255.0f : v;
        yp[i] = (uint8_t)(v == v ? v : 0.0f);
    }
    if (ctx->n_out > 1)
        *(float *)ctx->out[1]->data = scale;
    if (ctx->n_out > 2)
        *(uint8_t *)ctx->out[2]->data = (uint8_t)zpf;
    return TDM_OK;
}

/* ------------------------------------------------------------ infer hooks */

tdm_status op_infer_QuantizeLinear(op_infer_ctx *ctx)
{
    op_infer_copy(ctx, 0, 0);
    int64_t odt = ctx->version >= 21 ? gr_attr_int(ctx->node, "output_dtype", 0) : 0;
    ctx->out[0].dtype = ctx->n_in > 2 && ctx->in[2]                            ? ctx->in[2]->dtype
                        : odt > 0 && odt <= 31 && dtype_valid((int)odt) ? (tdm_dtype)odt
                                                                          : TDM_UINT8;
    return TDM_OK;
}

tdm_status op_infer_DequantizeLinear(op_infer_ctx *ctx)
{
    op_infer_copy(ctx, 0, 0);
    int64_t odt = ctx->version >= 23 ? gr_attr_int(ctx->node, "output_dtype", 0) : 0;
    ctx->out[0].dtype = odt > 0 && odt <= 31 && dtype_valid((int)odt) ? (tdm_dtype)odt
                        : ctx->n_in > 1 && ctx->in[1]                  ? ctx->in[1]->dtype
                                                                        : TDM_FLOAT;
    return TDM_OK;
}

tdm_status op_infer_DynamicQuantizeLinear(op_infer_ctx *ctx)
{
    op_infer_copy(ctx, 0, 0);
    ctx->out[0].dtype = TDM_UINT8;
    for (int k = 1; k < ctx->n_out && k < 3; k++) {
        ctx->out[k].kind = TDM_KIND_TENSOR;
        ctx->out[k].dtype = k == 1 ? TDM_FLOAT : TDM_UINT8;
        ctx->out[k].rank = 0;
    }
    return TDM_OK;
}
