/* Unary math and activation ops, Clip and Dropout.
 *
 * One kernel per compute type holds a switch over the op outside its loops:
 * float32 and double run on the tensor data directly; float16 / bfloat16
 * are converted in chunks to float and rounded back per element; integer
 * types (for the ops that take them) compute in int64 / uint64. */
#include "ops/elementwise.h"
#include "core/mem.h"
#include "core/pool.h"
#include "ops/nn.h"

#include <float.h>
#include <math.h>
#include <string.h>

enum ukind {
    U_ABS, U_NEG, U_EXP, U_LOG, U_SQRT, U_RECIP, U_FLOOR, U_CEIL, U_ROUND, U_SIGN, U_ERF,
    U_SIN, U_COS, U_TAN, U_ASIN, U_ACOS, U_ATAN, U_SINH, U_COSH, U_ASINH, U_ACOSH, U_ATANH,
    U_RELU, U_LEAKY, U_ELU, U_SELU, U_CELU, U_SIGMOID, U_HSIGMOID, U_HSWISH, U_SOFTPLUS,
    U_SOFTSIGN, U_TANH, U_THRELU, U_SHRINK, U_CLIP, U_MISH, U_GELU, U_GELU_TANH, U_SWISH
};

/* Parameters: a, b, g are the op's float attributes (alpha, beta, gamma /
 * lambd, bias / min, max); ilo..uhi the integer Clip bounds. */
typedef struct upar {
    double a, b, g;
    int64_t ilo, ihi;
    uint64_t ulo, uhi;
} upar;

#define MF(fn) fn##f
#define MD(fn) fn

#define UL(T, E)                                                                                              \
    for (i = 0; i < n; i++) {                                                                                 \
        T v = x[i];                                                                                           \
        y[i] = (T)(E);                                                                                        \
    }                                                                                                         \
    break

#define UNARY_FLOAT(NAME, T, M)                                                                               \
    static void NAME(int k, const T *x, T *y, size_t n, const upar *p)                                        \
    {                                                                                                         \
        const T a = (T)p->a, b = (T)p->b, g = (T)p->g;                                                        \
        size_t i;                                                                                             \
        switch (k) {                                                                                          \
        case U_ABS: UL(T, M(fabs)(v));                                                                        \
        case U_NEG: UL(T, -v);                                                                                \
        case U_EXP: UL(T, M(exp)(v));                                                                         \
        case U_LOG: UL(T, M(log)(v));                                                                         \
        case U_SQRT: UL(T, M(sqrt)(v));                                                                       \
        case U_RECIP: UL(T, (T)1 / v);                                                                        \
        case U_FLOOR: UL(T, M(floor)(v));                                                                     \
        case U_CEIL: UL(T, M(ceil)(v));                                                                       \
        case U_ROUND: UL(T, M(nearbyint)(v));                                                                 \
        case U_SIGN: UL(T, v > 0 ? (T)1 : v < 0 ? (T)-1 : v);                                                 \
        case U_ERF: UL(T, M(erf)(v));                                                                         \
        case U_SIN: UL(T, M(sin)(v));                                                                         \
        case U_COS: UL(T, M(cos)(v));                                                                         \
        case U_TAN: UL(T, M(tan)(v));                                                                         \
        case U_ASIN: UL(T, M(asin)(v));                                                                       \
        case U_ACOS: UL(T, M(acos)(v));                                                                       \
        case U_ATAN: UL(T, M(atan)(v));                                                                       \
        case U_SINH: UL(T, M(sinh)(v));                                                                       \
        case U_COSH: UL(T, M(cosh)(v));                                                                       \
        case U_ASINH: UL(T, M(asinh)(v));                                                                     \
        case U_ACOSH: UL(T, M(acosh)(v));                                                                     \
        case U_ATANH: UL(T, M(atanh)(v));                                                                     \
        case U_RELU: UL(T, v < 0 ? (T)0 : v);                                                                 \
        case U_LEAKY: UL(T, v < 0 ? a * v : v);                                                               \
        case U_ELU: UL(T, v < 0 ? a * M(expm1)(v) : v);                                                       \
        case U_SELU: UL(T, v <= 0 ? g * (a * M(exp)(v) - a) : g * v);                                         \
        case U_CELU: UL(T, v > 0 ? v : a * M(expm1)(v / a));                                                  \
        case U_SIGMOID: /* one exp of -|v|, no overflow, no branch on the exp */                             \
            for (i = 0; i < n; i++) {                                                                         \
                T v = x[i], e = M(exp)(-M(fabs)(v)), r = (T)1 / ((T)1 + e);                                   \
                y[i] = v >= 0 ? r : e * r;                                                                    \
            }                                                                                                 \
            break;                                                                                            \
        case U_HSIGMOID: UL(T, M(fmax)((T)0, M(fmin)((T)1, a * v + b)));                                      \
        case U_HSWISH: UL(T, v * M(fmax)((T)0, M(fmin)((T)1, a * v + b)));                                   \
        case U_SOFTPLUS: UL(T, v > 0 ? v + M(log1p)(M(exp)(-v)) : M(log1p)(M(exp)(v)));                       \
        case U_SOFTSIGN: UL(T, v / ((T)1 + M(fabs)(v)));                                                      \
        case U_TANH: UL(T, M(tanh)(v));                                                                       \
        case U_THRELU: UL(T, v > a ? v : (T)0);                                                               \
        case U_MISH: UL(T, v * M(tanh)(v > 0 ? v + M(log1p)(M(exp)(-v)) : M(log1p)(M(exp)(v))));               \
        case U_GELU: UL(T, (T)0.5 * v * ((T)1 + M(erf)(v * (T)0.70710678118654752440)));                      \
        case U_GELU_TANH:                                                                                     \
            UL(T, (T)0.5 * v * ((T)1 + M(tanh)((T)0.79788456080286535588 * (v + (T)0.044715 * v * v * v))));  \
        case U_SWISH: UL(T, v / ((T)1 + M(exp)(-a * v)));                                                     \
        case U_SHRINK: UL(T, v < -a ? v + b : v > a ? v - b : (T)0);                                          \
        case U_CLIP:                                                                                          \
            for (i = 0; i < n; i++) {                                                                         \
                T v = x[i];                                                                                   \
                v = v < a ? a : v;                                                                            \
                y[i] = v > b ? b : v;                                                                         \
            }                                                                                                 \
            break;                                                                                            \
        default: break;                                                                                       \
        }                                                                                                     \
        (void)g;                                                                                              \
    }

/* Sigmoid in float without libm and without branches, so that compilers
 * can vectorize it (SiLU = x * Sigmoid(x) is everywhere in EfficientNet
 * and YOLO): e = exp(-|v|) by Cephes' range reduction and polynomial
 * (relative error of the result below 2e-7), then (v < 0 ? e : 1) / (1 + e),
 * the numerator selected with bit masks. For |v| > 87 the
 * tail is not denormalised (absolute error < 2e-38); NaN stays NaN. */
static void sigmoid_f32(const float *restrict x, float *restrict y, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t vb, ab, m, nan, tb, sb, rb, eb;
        float v = x[i], a, t, k, r, p, s, e, nm, q;
        memcpy(&vb, &v, 4);
        ab = vb & 0x7fffffffu;
        nan = 0u - (uint32_t)(ab > 0x7f800000u);
        m = 0u - (uint32_t)(ab > 0x42ae0000u); /* |v| > 87: clamp */
        ab = (ab & ~m) | (0x42ae0000u & m);
        memcpy(&a, &ab, 4);
        t = a * -1.44269504088896341f + 12582912.0f; /* 1.5 * 2^23 rounds to an integer k */
        k = t - 12582912.0f;
        r = -a - k * 0.693359375f + k * 2.12194440e-4f;
        p = 1.9875691500e-4f;
        p = p * r + 1.3981999507e-3f;
        p = p * r + 8.3334519073e-3f;
        p = p * r + 4.1665795894e-2f;
        p = p * r + 1.6666665459e-1f;
        p = p * r + 5.0000001201e-1f;
        memcpy(&tb, &t, 4);
        sb = (tb - 0x4B400000u + 127u) << 23; /* 2^k */
        memcpy(&s, &sb, 4);
        e = (p * r * r + r + 1.0f) * s;
        memcpy(&eb, &e, 4);
        m = 0u - (vb >> 31); /* v negative: the numerator is e, else 1 */
        eb = (eb & m) | (0x3f800000u & ~m);
        memcpy(&nm, &eb, 4);
        q = nm / (1.0f + e);
        memcpy(&rb, &q, 4);
        rb |= nan & 0x7fc00000u;
        memcpy(&y[i], &rb, 4);
    }
}

UNARY_FLOAT(un_f32, float, MF)
UNARY_FLOAT(un_f64, double, MD)

static void un_i64(int k, const int64_t *x, int64_t *y, size_t n, const upar *p)
{
    size_t i;
    switch (k) {
    case U_ABS: UL(int64_t, v < 0 ? (int64_t)(0u - (uint64_t)v) : v);
    case U_NEG: UL(int64_t, (int64_t)(0u - (uint64_t)v));
    case U_SIGN: UL(int64_t, (v > 0) - (v < 0));
    case U_RELU: UL(int64_t, v < 0 ? 0 : v);
    case U_CLIP: UL(int64_t, v < p->ilo ? p->ilo : v > p->ihi ? p->ihi : v);
    default: break;
    }
}

static void un_u64(int k, const uint64_t *x, uint64_t *y, size_t n, const upar *p)
{
    size_t i;
    switch (k) {
    case U_ABS: case U_RELU: UL(uint64_t, v);
    case U_NEG: UL(uint64_t, 0u - v);
    case U_SIGN: UL(uint64_t, v != 0);
    case U_CLIP: UL(uint64_t, v < p->ulo ? p->ulo : v > p->uhi ? p->uhi : v);
    default: break;
    }
}

/* Element types each op takes beyond the float types. */
static uint32_t int_types(int k)
{
    switch (k) {
    case U_ABS: case U_SIGN: case U_CLIP: case U_SHRINK: return DT_INTS;
    case U_NEG: case U_RELU: return DT_SINTS;
    default: return 0;
    }
}

#define CHUNK 1024

/* Elements a parallel task holds at least: below this, waking a worker
 * costs more than it saves. */
#define UN_TASK_MIN ((size_t)16384)

/* A float32 or double unary op split into tasks of `per` elements; each
 * task writes only its own range. */
typedef struct un_job {
    int k;
    const upar *p;
    const void *x;
    void *y;
    size_t n, per;
    int dbl, avx2;
} un_job;

static void un_task(void *arg, size_t t)
{
    const un_job *j = arg;
    size_t i0 = t * j->per, m = j->n - i0 < j->per ? j->n - i0 : j->per;
    if (j->dbl)
        un_f64(j->k, (const double *)j->x + i0, (double *)j->y + i0, m, j->p);
    else if (j->avx2 && j->k == U_ERF)
        op_ew_erf_avx2((const float *)j->x + i0, (float *)j->y + i0, m);
    else if (j->avx2 && j->k == U_RELU)
        op_ew_relu_avx2((const float *)j->x + i0, (float *)j->y + i0, m);
    else if (j->avx2 && j->k == U_CLIP)
        op_ew_clip_avx2((const float *)j->x + i0, (float *)j->y + i0, m, (float)j->p->a, (float)j->p->b);
    else if (j->avx2)
        op_ew_sigmoid_avx2((const float *)j->x + i0, (float *)j->y + i0, m);
    else if (j->k == U_SIGMOID)
        sigmoid_f32((const float *)j->x + i0, (float *)j->y + i0, m);
    else
        un_f32(j->k, (const float *)j->x + i0, (float *)j->y + i0, m, j->p);
}

static tdm_status unary_run(op_ctx *ctx, int k, const upar *p)
{
    const tdm_tensor *x = ctx->n_in > 0 ? ctx->in[0] : NULL;
    if (!x || x->kind != TDM_KIND_TENSOR)
        return op_fail(ctx, TDM_E_RUNTIME, "input 0 must be a tensor");
    if (!((DT_FLOATS | int_types(k)) & DT_BIT(x->dtype)))
        return op_fail(ctx, TDM_E_UNSUPPORTED, "%s does not take element type %s", ctx->node->op_type,
                       tdm_dtype_name(x->dtype));
    tdm_status st = op_out(ctx, 0, x->dtype, x->rank, x->dims);
    if (st)
        return st;
    tdm_tensor *y = ctx->out[0];
    size_t cnt = x->count;
    if (!cnt)
        return TDM_OK;
    if (x->dtype == TDM_FLOAT || x->dtype == TDM_DOUBLE) {
        un_job j;
        j.k = k;
        j.p = p;
        j.x = x->data;
        j.y = y->data;
        j.n = cnt;
        j.dbl = x->dtype == TDM_DOUBLE;
        j.avx2 = !j.dbl && (k == U_SIGMOID || k == U_ERF || k == U_RELU || k == U_CLIP) && gemm_avx2_usable();
        /* cheap ops stream memory: split by bytes; the costly ones by elements */
        size_t tasks = k == U_RELU || k == U_CLIP || k == U_NEG || k == U_ABS
                           ? pool_tasks(ctx->threads, cnt * 2 * (j.dbl ? 8 : 4), POOL_MIN_BYTES)
                           : pool_tasks(ctx->threads, cnt, UN_TASK_MIN);
        j.per = (cnt + tasks - 1) / tasks;
        j.per = (j.per + 15) / 16 * 16; /* whole vectors per task */
        pool_run(ctx->threads, (cnt + j.per - 1) / j.per, un_task, &j);
        return TDM_OK;
    }
    op_ew_ct ct = op_ew_ctype(x->dtype);
    if (k == U_SHRINK && ct != EW_F32)
        ct = EW_F64;
    union {
        float f[CHUNK];
        double d[CHUNK];
        int64_t i[CHUNK];
        uint64_t u[CHUNK];
    } buf;
    for (size_t off = 0; off < cnt; off += CHUNK) {
        size_t n = cnt - off < CHUNK ? cnt - off : CHUNK;
        void *b;
        switch (ct) {
        case EW_F32:
            op_ew_load(x->data, x->dtype, off, n, ct, b = buf.f);
            un_f32(k, buf.f, buf.f, n, p);
            break;
        case EW_F64:
            op_ew_load(x->data, x->dtype, off, n, ct, b = buf.d);
            un_f64(k, buf.d, buf.d, n, p);
            break;
        case EW_I64:
            op_ew_load(x->data, x->dtype, off, n, ct, b = buf.i);
            un_i64(k, buf.i, buf.i, n, p);
            break;
        default:
            op_ew_load(x->data, x->dtype, off, n, ct, b = buf.u);
            un_u64(k, buf.u, buf.u, n, p);
            break;
        }
        op_ew_store(b, ct, y->data, y->dtype, off, n);
    }
    return TDM_OK;
}

static tdm_status unary_attr(op_ctx *ctx, int k, const char *an, double ad, const char *bn, double bd,
                             const char *gn, double gd)
{
    upar p;
    memset(&p, 0, sizeof p);
    p.a = an ? gr_attr_float(ctx->node, an, (float)ad) : ad;
    p.b = bn ? gr_attr_float(ctx->node, bn, (float)bd) : bd;
    p.g = gn ? gr_attr_float(ctx->node, gn, (float)gd) : gd;
    return unary_run(ctx, k, &p);
}

#define UNARY_PLAIN(Op, K)                                                                                    \
    tdm_status op_run_##Op(op_ctx *ctx) { return unary_attr(ctx, K, NULL, 0, NULL, 0, NULL, 0); }

UNARY_PLAIN(Abs, U_ABS)
UNARY_PLAIN(Neg, U_NEG)
UNARY_PLAIN(Exp, U_EXP)
UNARY_PLAIN(Log, U_LOG)
UNARY_PLAIN(Sqrt, U_SQRT)
UNARY_PLAIN(Reciprocal, U_RECIP)
UNARY_PLAIN(Floor, U_FLOOR)
UNARY_PLAIN(Ceil, U_CEIL)
UNARY_PLAIN(Round, U_ROUND)
UNARY_PLAIN(Sign, U_SIGN)
UNARY_PLAIN(Erf, U_ERF)
UNARY_PLAIN(Sin, U_SIN)
UNARY_PLAIN(Cos, U_COS)
UNARY_PLAIN(Tan, U_TAN)
UNARY_PLAIN(Asin, U_ASIN)
UNARY_PLAIN(Acos, U_ACOS)
UNARY_PLAIN(Atan, U_ATAN)
UNARY_PLAIN(Sinh, U_SINH)
UNARY_PLAIN(Cosh, U_COSH)
UNARY_PLAIN(Asinh, U_ASINH)
UNARY_PLAIN(Acosh, U_ACOSH)
UNARY_PLAIN(Atanh, U_ATANH)
UNARY_PLAIN(Relu, U_RELU)
UNARY_PLAIN(Sigmoid, U_SIGMOID)
UNARY_PLAIN(Softplus, U_SOFTPLUS)
UNARY_PLAIN(Softsign, U_SOFTSIGN)
UNARY_PLAIN(Tanh, U_TANH)

tdm_status op_run_LeakyRelu(op_ctx *ctx) { return unary_attr(ctx, U_LEAKY, "alpha", 0.01, NULL, 0, NULL, 0); }
tdm_status op_run_Elu(op_ctx *ctx) { return unary_attr(ctx, U_ELU, "alpha", 1.0, NULL, 0, NULL, 0); }
tdm_status op_run_Selu(op_ctx *ctx)
{
    return unary_attr(ctx, U_SELU, "alpha", 1.67326319217681884765625, NULL, 0, "gamma", 1.05070102214813232421875);
}
tdm_status op_run_HardSigmoid(op_ctx *ctx) { return unary_attr(ctx, U_HSIGMOID, "alpha", 0.2, "beta", 0.5, NULL, 0); }
tdm_status op_run_HardSwish(op_ctx *ctx) { return unary_attr(ctx, U_HSWISH, NULL, 1.0 / 6, NULL, 0.5, NULL, 0); }
tdm_status op_run_ThresholdedRelu(op_ctx *ctx) { return unary_attr(ctx, U_THRELU, "alpha", 1.0, NULL, 0, NULL, 0); }
tdm_status op_run_Shrink(op_ctx *ctx) { return unary_attr(ctx, U_SHRINK, "lambd", 0.5, "bias", 0.0, NULL, 0); }

/* Mish (18), Gelu (20: approximate none or tanh), Swish (24: x sigmoid(alpha x)) */
UNARY_PLAIN(Mish, U_MISH)
tdm_status op_run_Swish(op_ctx *ctx) { return unary_attr(ctx, U_SWISH, "alpha", 1.0, NULL, 0, NULL, 0); }

tdm_status op_run_Gelu(op_ctx *ctx)
{
    const char *ap = gr_attr_str(ctx->node, "approximate", "none");
    if (strcmp(ap, "none") && strcmp(ap, "tanh"))
        return op_fail(ctx, TDM_E_MODEL, "attribute 'approximate' must be \"none\" or \"tanh\", not \"%s\"", ap);
    return unary_attr(ctx, strcmp(ap, "tanh") ? U_GELU : U_GELU_TANH, NULL, 0, NULL, 0, NULL, 0);
}

tdm_status op_run_Celu(op_ctx *ctx)
{
    float alpha = gr_attr_float(ctx->node, "alpha", 1.0f);
    if (alpha == 0)
        return op_fail(ctx, TDM_E_MODEL, "attribute 'alpha' must not be 0");
    return unary_attr(ctx, U_CELU, NULL, alpha, NULL, 0, NULL, 0);
}

/* Clip: bounds from attributes (before opset 11) or from optional scalar
 * inputs 1 and 2; an absent bound does not clip. */
static tdm_status clip_bound(op_ctx *ctx, int i, const tdm_tensor *x, double *f, int64_t *iv, uint64_t *uv)
{
    const tdm_tensor *t = i < ctx->n_in ? ctx->in[i] : NULL;
    if (!t)
        return TDM_OK;
    if (t->kind != TDM_KIND_TENSOR || t->count != 1)
        return op_fail(ctx, TDM_E_RUNTIME, "input %d (%s) must be a scalar", i, i == 1 ? "min" : "max");
    if (t->dtype != x->dtype)
        return op_fail(ctx, TDM_E_RUNTIME, "input %d (%s) has element type %s, input 0 has %s", i,
                       i == 1 ? "min" : "max", tdm_dtype_name(t->dtype), tdm_dtype_name(x->dtype));
    if (dtype_is_float(t->dtype))
        *f = tensor_get_f64(t, 0);
    else if (dtype_is_signed(t->dtype) || t->dtype == TDM_BOOL)
        *iv = tensor_get_i64(t, 0);
    else
        op_ew_load(t->data, t->dtype, 0, 1, EW_U64, uv);
    return TDM_OK;
}

tdm_status op_run_Clip(op_ctx *ctx)
{
    upar p;
    memset(&p, 0, sizeof p);
    const tdm_tensor *x = ctx->n_in > 0 ? ctx->in[0] : NULL;
    if (!x || x->kind != TDM_KIND_TENSOR)
        return op_fail(ctx, TDM_E_RUNTIME, "input 0 must be a tensor");
    p.ilo = INT64_MIN;
    p.ihi = INT64_MAX;
    p.ulo = 0;
    p.uhi = UINT64_MAX;
    if (ctx->version < 11) {
        p.a = gr_attr_float(ctx->node, "min", -FLT_MAX);
        p.b = gr_attr_float(ctx->node, "max", FLT_MAX);
    } else {
        p.a = -INFINITY;
        p.b = INFINITY;
        tdm_status st = clip_bound(ctx, 1, x, &p.a, &p.ilo, &p.ulo);
        if (!st)
            st = clip_bound(ctx, 2, x, &p.b, &p.ihi, &p.uhi);
        if (st)
            return st;
    }
    return unary_run(ctx, U_CLIP, &p);
}

/* ---- predicates with bool output ---- */

static tdm_status pred_run(op_ctx *ctx, int isinf_op)
{
    const tdm_tensor *x = ctx->n_in > 0 ? ctx->in[0] : NULL;
    if (!x || x->kind != TDM_KIND_TENSOR)
        return op_fail(ctx, TDM_E_RUNTIME, "input 0 must be a tensor");
    if (!(DT_FLOATS & DT_BIT(x->dtype)))
        return op_fail(ctx, TDM_E_UNSUPPORTED, "%s does not take element type %s", ctx->node->op_type,
                       tdm_dtype_name(x->dtype));
    int pos = (int)gr_attr_int(ctx->node, "detect_positive", 1);
    int neg = (int)gr_attr_int(ctx->node, "detect_negative", 1);
    tdm_status st = op_out(ctx, 0, TDM_BOOL, x->rank, x->dims);
    if (st)
        return st;
    uint8_t *y = ctx->out[0]->data;
    double buf[CHUNK];
    for (size_t off = 0; off < x->count; off += CHUNK) {
        size_t n = x->count - off < CHUNK ? x->count - off : CHUNK;
        op_ew_load(x->data, x->dtype, off, n, EW_F64, buf);
        for (size_t i = 0; i < n; i++) {
            double v = buf[i];
            y[off + i] = isinf_op ? (uint8_t)((pos && v == INFINITY) || (neg && v == -INFINITY)) : (uint8_t)(v != v);
        }
    }
    return TDM_OK;
}

tdm_status op_run_IsNaN(op_ctx *ctx) { return pred_run(ctx, 0); }
tdm_status op_run_IsInf(op_ctx *ctx) { return pred_run(ctx, 1); }

tdm_status op_run_Not(op_ctx *ctx)
{
    const tdm_tensor *x = ctx->n_in > 0 ? ctx->in[0] : NULL;
    if (!x || x->kind != TDM_KIND_TENSOR || x->dtype != TDM_BOOL)
        return op_fail(ctx, TDM_E_RUNTIME, "input 0 must be a bool tensor");
    tdm_status st = op_out(ctx, 0, TDM_BOOL, x->rank, x->dims);
    if (st)
        return st;
    const uint8_t *a = x->data;
    uint8_t *y = ctx->out[0]->data;
    for (size_t i = 0; i < x->count; i++)
        y[i] = !a[i];
    return TDM_OK;
}

tdm_status op_run_BitwiseNot(op_ctx *ctx)
{
    const tdm_tensor *x = ctx->n_in > 0 ? ctx->in[0] : NULL;
    if (!x || x->kind != TDM_KIND_TENSOR || !dtype_is_int(x->dtype))
        return op_fail(ctx, TDM_E_RUNTIME, "input 0 must be an integer tensor");
    tdm_status st = op_out(ctx, 0, x->dtype, x->rank, x->dims);
    if (st)
        return st;
    /* the complement of every byte is the complement of every element */
    const uint8_t *a = x->data;
    uint8_t *y = ctx->out[0]->data;
    for (size_t i = 0; i < x->nbytes; i++)
        y[i] = (uint8_t)~a[i];
    return TDM_OK;
}

tdm_status op_infer_bool_same(op_infer_ctx *ctx)
{
    op_infer_copy(ctx, 0, 0);
    ctx->out[0].dtype = TDM_BOOL;
    return TDM_OK;
}

/* ---- Dropout ---- */

/* MT19937 with numpy's legacy seeding and random_sample(), so that a node
 * with a seed attribute drops the same elements as numpy.random.seed(seed);
 * numpy.random.uniform(0, 1, shape) >= ratio (the ONNX reference). */
typedef struct mt_state {
    uint32_t mt[624];
    int pos;
} mt_state;

static void mt_seed(mt_state *s, uint32_t seed)
{
    s->mt[0] = seed;
    for (uint32_t i = 1; i < 624; i++)
        s->mt[i] = 1812433253u * (s->mt[i - 1] ^ (s->mt[i - 1] >> 30)) + i;
    s->pos = 624;
}

static uint32_t mt_next(mt_state *s)
{
    if (s->pos >= 624) {
        for (int k = 0; k < 624; k++) {
            uint32_t y = (s->mt[k] & 0x80000000u) | (s->mt[(k + 1) % 624] & 0x7fffffffu);
            s->mt[k] = s->mt[(k + 397) % 624] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
        }
        s->pos = 0;
    }
    uint32_t y = s->mt[s->pos++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

static double mt_double(mt_state *s)
{
    uint32_t a = mt_next(s) >> 5, b = mt_next(s) >> 6;
    return (a * 67108864.0 + b) / 9007199254740992.0;
}

tdm_status op_run_Dropout(op_ctx *ctx)
{
    const tdm_tensor *x = ctx->n_in > 0 ? ctx->in[0] : NULL;
    if (!x || x->kind != TDM_KIND_TENSOR || !(DT_FLOATS & DT_BIT(x->dtype)))
        return op_fail(ctx, TDM_E_RUNTIME, "input 0 (data) must be a float tensor");
    double ratio = 0.5;
    int training = 0;
    if (ctx->version >= 12) {
        const tdm_tensor *r = ctx->n_in > 1 ? ctx->in[1] : NULL;
        const tdm_tensor *t = ctx->n_in > 2 ? ctx->in[2] : NULL;
        if (r) {
            if (r->kind != TDM_KIND_TENSOR || r->count != 1 || !dtype_is_float(r->dtype))
                return op_fail(ctx, TDM_E_RUNTIME, "input 1 (ratio) must be a float scalar");
            ratio = tensor_get_f64(r, 0);
        }
        if (t) {
            if (t->kind != TDM_KIND_TENSOR || t->count != 1 || t->dtype != TDM_BOOL)
                return op_fail(ctx, TDM_E_RUNTIME, "input 2 (training_mode) must be a bool scalar");
            training = ((const uint8_t *)t->data)[0] != 0;
        }
    } else {
        ratio = gr_attr_float(ctx->node, "ratio", 0.5f);
    }
    if (training && ratio != 0 && !(ratio > 0 && ratio < 1))
        return op_fail(ctx, TDM_E_RUNTIME, "ratio %g is outside [0, 1)", ratio);
    tdm_status st = op_out(ctx, 0, x->dtype, x->rank, x->dims);
    if (st)
        return st;
    tdm_tensor *y = ctx->out[0], *mask = NULL;
    if (op_out_wanted(ctx, 1)) {
        if ((st = op_out(ctx, 1, ctx->version >= 10 ? TDM_BOOL : x->dtype, x->rank, x->dims)) != TDM_OK)
            return st;
        mask = ctx->out[1];
    }
    if (!training || ratio == 0) {
        if (x->nbytes)
            memcpy(y->data, x->data, x->nbytes);
        for (size_t i = 0; mask && i < x->count; i++)
            tensor_set_f64(mask, i, 1.0);
        return TDM_OK;
    }
    mt_state *mt = mem_alloc(sizeof *mt);
    if (!mt)
        return op_fail(ctx, TDM_E_NOMEM, "out of memory");
    const gr_attr *sa = gr_attr_find(ctx->node, "seed");
    uint32_t seed;
    if (sa && sa->type == GA_INT) {
        seed = (uint32_t)sa->i;
    } else {
        seed = ctx->rng ? (uint32_t)op_splitmix64(ctx->rng) : 0;
    }
    mt_seed(mt, seed);
    double scale = 1.0 / (1.0 - ratio);
    float fscale = (float)scale;
    for (size_t i = 0; i < x->count; i++) {
        int keep = mt_double(mt) >= ratio;
        if (x->dtype == TDM_FLOAT)
            ((float *)y->data)[i] = keep ? ((const float *)x->data)[i] * fscale : 0.0f;
        else if (x->dtype == TDM_DOUBLE)
            ((double *)y->data)[i] = keep ? ((const double *)x->data)[i] * scale : 0.0;
        else
            tensor_set_f64(y, i, keep ? (double)((float)tensor_get_f64(x, i) * fscale) : 0.0);
        if (mask)
            tensor_set_f64(mask, i, keep);
    }
    mem_free(mt);
    return TDM_OK;
}

tdm_status op_infer_Dropout(op_infer_ctx *ctx)
{
    op_infer_copy(ctx, 0, 0);
    if (ctx->n_out > 1) {
        op_infer_copy(ctx, 1, 0);
        if (ctx->version >= 10)
            ctx->out[1].dtype = TDM_BOOL;
    }
    return TDM_OK;
}
