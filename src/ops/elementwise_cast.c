/* Element type conversions shared by the elementwise kernels, and Cast /
 * CastLike, including numpy-compatible number <-> string conversions. */
#include "ops/elementwise.h"
#include "core/mem.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

op_ew_ct op_ew_ctype(tdm_dtype dt)
{
    switch (dt) {
    case TDM_DOUBLE: return EW_F64;
    case TDM_FLOAT: case TDM_FLOAT16: case TDM_BFLOAT16: return EW_F32;
    case TDM_UINT8: case TDM_UINT16: case TDM_UINT32: case TDM_UINT64: return EW_U64;
    default: return EW_I64;
    }
}

size_t op_ew_ct_size(op_ew_ct ct) { return ct == EW_F32 ? sizeof(float) : 8; }

/* Float to integer: truncation toward zero, saturating, NaN to 0 (C leaves
 * out-of-range conversions undefined). */
static int64_t sat_i64(double v)
{
    if (v != v)
        return 0;
    if (v >= 9223372036854775808.0)
        return INT64_MAX;
    if (v < -9223372036854775808.0)
        return INT64_MIN;
    return (int64_t)v;
}

static uint64_t sat_u64(double v)
{
    if (v != v)
        return 0;
    if (v <= -1.0)
        return (uint64_t)sat_i64(v); /* wraps like numpy's int path */
    if (v >= 18446744073709551616.0)
        return UINT64_MAX;
    return (uint64_t)v;
}

#define CV_F32(x) ((float)(x))
#define CV_F64(x) ((double)(x))
#define CV_SATI(x) sat_i64((double)(x))
#define CV_I64(x) ((int64_t)(x))
#define CV_SATU(x) sat_u64((double)(x))
#define CV_U64(x) ((uint64_t)(x))

#define LLOOP(ST, EXPR)                                                                                       \
    do {                                                                                                      \
        const ST *s = (const ST *)src + off;                                                                  \
        for (size_t i = 0; i < n; i++)                                                                        \
            d[i] = (EXPR);                                                                                    \
    } while (0)

#define LOAD_SWITCH(FCV, ICV)                                                                                 \
    switch (sdt) {                                                                                            \
    case TDM_FLOAT: LLOOP(float, FCV(s[i])); break;                                                           \
    case TDM_DOUBLE: LLOOP(double, FCV(s[i])); break;                                                         \
    case TDM_FLOAT16: LLOOP(uint16_t, FCV(fp16_to_f32(s[i]))); break;                                         \
    case TDM_BFLOAT16: LLOOP(uint16_t, FCV(bf16_to_f32(s[i]))); break;                                        \
    case TDM_INT8: LLOOP(int8_t, ICV(s[i])); break;                                                           \
    case TDM_INT16: LLOOP(int16_t, ICV(s[i])); break;                                                         \
    case TDM_INT32: LLOOP(int32_t, ICV(s[i])); break;                                                         \
    case TDM_INT64: LLOOP(int64_t, ICV(s[i])); break;                                                         \
    case TDM_UINT8: LLOOP(uint8_t, ICV(s[i])); break;                                                         \
    case TDM_UINT16: LLOOP(uint16_t, ICV(s[i])); break;                                                       \
    case TDM_UINT32: LLOOP(uint32_t, ICV(s[i])); break;                                                       \
    case TDM_UINT64: LLOOP(uint64_t, ICV(s[i])); break;                                                       \
    case TDM_BOOL: LLOOP(uint8_t, ICV(s[i] != 0)); break;                                                     \
    default: memset(d, 0, n * sizeof *d); break;                                                              \
    }

void op_ew_load(const void *src, tdm_dtype sdt, size_t off, size_t n, op_ew_ct ct, void *dst)
{
    switch (ct) {
    case EW_F32: {
        float *d = dst;
        LOAD_SWITCH(CV_F32, CV_F32)
        break;
    }
    case EW_F64: {
        double *d = dst;
        LOAD_SWITCH(CV_F64, CV_F64)
        break;
    }
    case EW_I64: {
        int64_t *d = dst;
        LOAD_SWITCH(CV_SATI, CV_I64)
        break;
    }
    case EW_U64: {
        uint64_t *d = dst;
        LOAD_SWITCH(CV_SATU, CV_U64)
        break;
    }
    }
}

#define SLOOP(DT, EXPR)                                                                                       \
    do {                                                                                                      \
        DT *d = (DT *)dst + off;                                                                              \
        for (size_t i = 0; i < n; i++)                                                                        \
            d[i] = (DT)(EXPR);                                                                                \
    } while (0)

/* FCV: to float; SI: to int64; SU: to uint64 */
#define STORE_SWITCH(FCV, SI, SU)                                                                             \
    switch (ddt) {                                                                                            \
    case TDM_FLOAT: SLOOP(float, FCV(s[i])); break;                                                           \
    case TDM_DOUBLE: SLOOP(double, s[i]); break;                                                              \
    case TDM_FLOAT16: SLOOP(uint16_t, f32_to_fp16(FCV(s[i]))); break;                                         \
    case TDM_BFLOAT16: SLOOP(uint16_t, f32_to_bf16(FCV(s[i]))); break;                                        \
    case TDM_INT8: SLOOP(int8_t, SI(s[i])); break;                                                            \
    case TDM_INT16: SLOOP(int16_t, SI(s[i])); break;                                                          \
    case TDM_INT32: SLOOP(int32_t, SI(s[i])); break;                                                          \
    case TDM_INT64: SLOOP(int64_t, SI(s[i])); break;                                                          \
    case TDM_UINT8: SLOOP(uint8_t, SI(s[i])); break;                                                          \
    case TDM_UINT16: SLOOP(uint16_t, SI(s[i])); break;                                                        \
    case TDM_UINT32: SLOOP(uint32_t, SI(s[i])); break;                                                        \
    case TDM_UINT64: SLOOP(uint64_t, SU(s[i])); break;                                                        \
    case TDM_BOOL: SLOOP(uint8_t, s[i] != 0); break;                                                          \
    default: break;                                                                                           \
    }

void op_ew_store(const void *src, op_ew_ct ct, void *dst, tdm_dtype ddt, size_t off, size_t n)
{
    switch (ct) {
    case EW_F32: {
        const float *s = src;
        STORE_SWITCH(CV_F32, CV_SATI, CV_SATU)
        break;
    }
    case EW_F64: {
        const double *s = src;
        STORE_SWITCH(CV_F32, CV_SATI, CV_SATU)
        break;
    }
    case EW_I64: {
        const int64_t *s = src;
        STORE_SWITCH(CV_F32, CV_I64, CV_U64)
        break;
    }
    case EW_U64: {
        const uint64_t *s = src;
        STORE_SWITCH(CV_F32, CV_I64, CV_U64)
        break;
    }
    }
}

void *op_ew_to_ct(const tdm_tensor *t, op_ew_ct ct)
{
    size_t es = op_ew_ct_size(ct), nb;
    if (mem_mul(t->count ? t->count : 1, es, &nb))
        return NULL;
    void *p = mem_alloc(nb);
    if (p)
        op_ew_load(t->data, t->dtype, 0, t->count, ct, p);
    return p;
}

/* ---- numbers to strings, as numpy's str() prints them ---- */

/* Shortest decimal digits that read back to the same value: fills digits
 * (no dot, no trailing zeros) and the decimal exponent of the first digit. */
static void shortest_digits(double v, int kind, char *digits, int *exp10)
{
    char buf[64];
    int maxp = kind == TDM_DOUBLE ? 17 : kind == TDM_FLOAT ? 9 : 5;
    for (int p = 1; p <= maxp; p++) {
        snprintf(buf, sizeof buf, "%.*e", p - 1, v);
        int same;
        if (kind == TDM_DOUBLE)
            same = strtod(buf, NULL) == v;
        else if (kind == TDM_FLOAT)
            same = strtof(buf, NULL) == (float)v;
        else if (kind == TDM_FLOAT16)
            same = f32_to_fp16(strtof(buf, NULL)) == f32_to_fp16((float)v);
        else
            same = f32_to_bf16(strtof(buf, NULL)) == f32_to_bf16((float)v);
        if (same)
            break;
    }
    /* buf: [-]d[.ddd]e[+-]XX */
    const char *q = buf;
    if (*q == '-')
        q++;
    size_t k = 0;
    for (; *q && *q != 'e'; q++)
        if (*q >= '0' && *q <= '9')
            digits[k++] = *q;
    while (k > 1 && digits[k - 1] == '0')
        k--;
    digits[k] = 0;
    *exp10 = *q == 'e' ? atoi(q + 1) : 0;
}

static void float_to_str(double v, int kind, char *out, size_t size)
{
    if (v != v) {
        snprintf(out, size, "nan");
        return;
    }
    if (isinf(v)) {
        snprintf(out, size, v < 0 ? "-inf" : "inf");
        return;
    }
    char digits[32];
    int e;
    const char *sign = signbit(v) ? "-" : "";
    double a = fabs(v);
    if (a == 0) {
        snprintf(out, size, "%s0.0", sign);
        return;
    }
    shortest_digits(a, kind, digits, &e);
    int nd = (int)strlen(digits);
    if (a >= 1e-4 && a < 1e16) {
        char buf[64];
        size_t o = 0;
        if (e >= 0) {
            for (int i = 0; i <= e; i++)
                buf[o++] = i < nd ? digits[i] : '0';
            buf[o++] = '.';
            if (nd > e + 1)
                for (int i = e + 1; i < nd; i++)
                    buf[o++] = digits[i];
            else
                buf[o++] = '0';
        } else {
            buf[o++] = '0';
            buf[o++] = '.';
            for (int i = 0; i < -e - 1; i++)
                buf[o++] = '0';
            for (int i = 0; i < nd; i++)
                buf[o++] = digits[i];
        }
        buf[o] = 0;
        snprintf(out, size, "%s%s", sign, buf);
    } else {
        snprintf(out, size, "%s%c%s%se%c%02d", sign, digits[0], nd > 1 ? "." : "", digits + 1, e < 0 ? '-' : '+',
                 e < 0 ? -e : e);
    }
}

static tdm_status to_strings(op_ctx *ctx, const tdm_tensor *x, tdm_tensor *y)
{
    char **o = y->data;
    char buf[64];
    for (size_t i = 0; i < x->count; i++) {
        switch (x->dtype) {
        case TDM_FLOAT: case TDM_DOUBLE: case TDM_FLOAT16: case TDM_BFLOAT16:
            float_to_str(tensor_get_f64(x, i), x->dtype, buf, sizeof buf);
            break;
        case TDM_BOOL:
            snprintf(buf, sizeof buf, "%s", ((const uint8_t *)x->data)[i] ? "True" : "False");
            break;
        case TDM_UINT64:
            snprintf(buf, sizeof buf, "%llu", (unsigned long long)((const uint64_t *)x->data)[i]);
            break;
        case TDM_STRING:
            if (!(o[i] = mem_strdup(tensor_str(x, i))))
                return op_fail(ctx, TDM_E_NOMEM, "out of memory");
            continue;
        default:
            snprintf(buf, sizeof buf, "%lld", (long long)tensor_get_i64(x, i));
            break;
        }
        if (!(o[i] = mem_strdup(buf)))
            return op_fail(ctx, TDM_E_NOMEM, "out of memory");
    }
    return TDM_OK;
}

static int only_space(const char *s)
{
    while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')
        s++;
    return *s == 0;
}

static tdm_status from_strings(op_ctx *ctx, const tdm_tensor *x, tdm_tensor *y)
{
    int to_int = dtype_is_int(y->dtype);
    for (size_t i = 0; i < x->count; i++) {
        const char *s = tensor_str(x, i);
        char *end;
        if (y->dtype == TDM_BOOL) {
            if (strcmp(s, "True") == 0 || strcmp(s, "true") == 0) {
                ((uint8_t *)y->data)[i] = 1;
                continue;
            }
            if (strcmp(s, "False") == 0 || strcmp(s, "false") == 0) {
                ((uint8_t *)y->data)[i] = 0;
                continue;
            }
        }
        if (to_int) {
            errno = 0;
            if (dtype_is_signed(y->dtype)) {
                long long v = strtoll(s, &end, 10);
                if (end != s && only_space(end) && errno == 0) {
                    int64_t iv = v;
                    op_ew_store(&iv, EW_I64, y->data, y->dtype, i, 1);
                    continue;
                }
            } else if (*s != '-') {
                unsigned long long v = strtoull(s, &end, 10);
                if (end != s && only_space(end) && errno == 0) {
                    uint64_t uv = v;
                    op_ew_store(&uv, EW_U64, y->data, y->dtype, i, 1);
                    continue;
                }
            }
        }
        double d = strtod(s, &end);
        if (end == s || !only_space(end))
            return op_fail(ctx, TDM_E_RUNTIME, "input element %zu, \"%.40s\", is not a number", i, s);
        op_ew_store(&d, EW_F64, y->data, y->dtype, i, 1);
    }
    return TDM_OK;
}

/* float/double to bfloat16 by truncation, as the ONNX reference of the
 * node tests does (NaN stays NaN). */
static void to_bf16_trunc(const tdm_tensor *x, uint16_t *o)
{
    for (size_t i = 0; i < x->count; i++) {
        float f = x->dtype == TDM_FLOAT ? ((const float *)x->data)[i] : (float)tensor_get_f64(x, i);
        uint32_t u;
        memcpy(&u, &f, 4);
        o[i] = f != f ? (uint16_t)((u >> 16) | 0x40) : (uint16_t)(u >> 16);
    }
}

/* ---- float8 (e4m3fn, e4m3fnuz, e5m2, e5m2fnuz) and 4-bit integers ----
 * Cast from version 19 (float8, 'saturate') and 21 (int4/uint4), as the
 * ONNX reference computes them with ml_dtypes: round to nearest even;
 * NaN is 0x7F / 0x7E (e5m2) with the sign, or 0x80 in the fnuz types,
 * which have no negative zero; with saturate, values beyond the largest
 * (infinities too) become the largest, without, they become NaN (or
 * infinity in e5m2, the one type that has it). 4-bit integers are held one
 * per byte (int4 sign-extended); a value outside their range becomes 0. */

typedef struct f8_fmt {
    int mbits, bias, fnuz, has_inf;
    double max;
} f8_fmt;

static int is_f8(tdm_dtype dt)
{
    return dt == TDM_FLOAT8E4M3FN || dt == TDM_FLOAT8E4M3FNUZ || dt == TDM_FLOAT8E5M2 || dt == TDM_FLOAT8E5M2FNUZ;
}

static f8_fmt f8_format(tdm_dtype dt)
{
    switch (dt) {
    case TDM_FLOAT8E4M3FNUZ: return (f8_fmt){3, 8, 1, 0, 240.0};
    case TDM_FLOAT8E5M2: return (f8_fmt){2, 15, 0, 1, 57344.0};
    case TDM_FLOAT8E5M2FNUZ: return (f8_fmt){2, 16, 1, 0, 57344.0};
    default: return (f8_fmt){3, 7, 0, 0, 448.0};
    }
}

static double f8_decode(uint8_t c, const f8_fmt *f)
{
    int ebits = 7 - f->mbits;
    int sign = c >> 7, e = (c >> f->mbits) & ((1 << ebits) - 1), m = c & ((1 << f->mbits) - 1);
    if (f->fnuz && c == 0x80)
        return NAN;
    if (!f->fnuz && !f->has_inf && (c & 0x7F) == 0x7F)
        return NAN;
    if (f->has_inf && e == (1 << ebits) - 1)
        return m ? NAN : sign ? -INFINITY : INFINITY;
    double v = e == 0 ? ldexp((double)m, 1 - f->bias - f->mbits)
                      : ldexp(1.0 + ldexp((double)m, -f->mbits), e - f->bias);
    return sign ? -v : v;
}

static uint8_t f8_encode(double x, const f8_fmt *f, int saturate)
{
    uint8_t sign = signbit(x) ? 0x80 : 0;
    uint8_t nan = f->fnuz ? 0x80 : (uint8_t)(sign | (f->has_inf ? 0x7E : 0x7F));
    uint8_t maxc = f->fnuz || f->has_inf ? (uint8_t)(sign | (f->has_inf ? 0x7B : 0x7F)) : (uint8_t)(sign | 0x7E);
    if (x != x)
        return nan;
    double a = fabs(x);
    if (isinf(a))
        return saturate ? maxc : f->has_inf ? (uint8_t)(sign | 0x7C) : nan;
    if (a == 0)
        return f->fnuz ? 0 : sign;
    int e2;
    (void)frexp(a, &e2);
    int emin = 1 - f->bias, E = e2 - 1 < emin ? emin : e2 - 1;
    double r = rint(ldexp(a, f->mbits - E)); /* the default rounding: to nearest even */
    if (r >= ldexp(1.0, f->mbits + 1)) {
        E++;
        r /= 2;
    }
    if (ldexp(r, E - f->mbits) > f->max)
        return saturate ? maxc : f->has_inf ? (uint8_t)(sign | 0x7C) : nan;
    unsigned mant = (unsigned)r, field = 0;
    if (mant >= (1u << f->mbits)) {
        field = (unsigned)(E + f->bias);
        mant -= 1u << f->mbits;
    }
    uint8_t c = (uint8_t)(sign | (field << f->mbits) | mant);
    return f->fnuz && c == 0x80 ? 0 : c;
}

/* Casts x to or from the low-bit types (float8, float4e2m1, float8e8m0,
 * int4/uint4, int2/uint2) through double. */
static tdm_status cast_exotic(op_ctx *ctx, const tdm_tensor *x, tdm_tensor *y)
{
    int saturate = ctx->version >= 19 ? gr_attr_int(ctx->node, "saturate", 1) != 0 : 1;
    int round_mode = op_e8m0_round_mode(ctx->version >= 24 ? gr_attr_str(ctx->node, "round_mode", NULL) : NULL);
    if (round_mode < 0)
        return op_fail(ctx, TDM_E_MODEL, "attribute round_mode must be 'up', 'nearest' or 'down'");
    const uint8_t *b = x->data;
    for (size_t i = 0; i < x->count; i++) {
        double v = op_is_lowbit(x->dtype) ? op_lowbit_to_f64(b[i], x->dtype) : tensor_get_f64(x, i);
        if (op_is_lowbit(y->dtype)) {
            ((uint8_t *)y->data)[i] = op_f64_to_lowbit(v, y->dtype, saturate, round_mode);
        } else {
            double one = v;
            float f = (float)v;
            /* through the common loaders, from one double (exact for every source value) */
            if (y->dtype == TDM_DOUBLE)
                ((double *)y->data)[i] = one;
            else if (dtype_is_float(y->dtype))
                op_ew_store(&f, EW_F32, y->data, y->dtype, i, 1);
            else
                op_ew_store(&one, EW_F64, y->data, y->dtype, i, 1);
        }
    }
    return TDM_OK;
}

static int is_exotic(tdm_dtype dt) { return op_is_lowbit(dt); }

int op_is_float8(tdm_dtype dt) { return is_f8(dt); }

double op_float8_to_f64(uint8_t c, tdm_dtype dt)
{
    f8_fmt f = f8_format(dt);
    return f8_decode(c, &f);
}

uint8_t op_f64_to_float8(double v, tdm_dtype dt, int saturate)
{
    f8_fmt f = f8_format(dt);
    return f8_encode(v, &f, saturate);
}

static tdm_status cast_to(op_ctx *ctx, tdm_dtype to)
{
    const tdm_tensor *x = ctx->in[0];
    if (!x || x->kind != TDM_KIND_TENSOR)
        return op_fail(ctx, TDM_E_RUNTIME, "input 0 must be a tensor");
    int numeric = DT_BIT(x->dtype) & (DT_NUMERIC | DT_BIT(TDM_BOOL));
    int exotic = (is_exotic(to) || is_exotic(x->dtype)) && ctx->version >= 19;
    if (!dtype_valid(to) || !(((DT_ALL >> to) & 1) || (exotic && is_exotic(to))))
        return op_fail(ctx, TDM_E_UNSUPPORTED, "cannot cast to element type %s", tdm_dtype_name(to));
    if (!numeric && x->dtype != TDM_STRING && !(exotic && is_exotic(x->dtype)))
        return op_fail(ctx, TDM_E_UNSUPPORTED, "cannot cast from element type %s", tdm_dtype_name(x->dtype));
    if (exotic && (to == TDM_STRING || x->dtype == TDM_STRING))
        return op_fail(ctx, TDM_E_UNSUPPORTED, "cannot cast between %s and %s", tdm_dtype_name(x->dtype),
                       tdm_dtype_name(to));
    tdm_status st = op_out(ctx, 0, to, x->rank, x->dims);
    if (st)
        return st;
    tdm_tensor *y = ctx->out[0];
    if (exotic && x->dtype != to)
        return cast_exotic(ctx, x, y);
    if (to == TDM_STRING)
        return to_strings(ctx, x, y);
    if (x->dtype == TDM_STRING)
        return from_strings(ctx, x, y);
    if (x->dtype == to) {
        if (x->nbytes)
            memcpy(y->data, x->data, x->nbytes);
        return TDM_OK;
    }
    /* From version 19 the reference rounds to nearest even (ml_dtypes, as
     * onnxruntime does), which the common store below does */
    if (to == TDM_BFLOAT16 && (x->dtype == TDM_FLOAT || x->dtype == TDM_DOUBLE) && ctx->version < 19) {
        to_bf16_trunc(x, y->data);
        return TDM_OK;
    }
    op_ew_ct ct = op_ew_ctype(x->dtype);
    if (ct == EW_F32 && !dtype_is_float(to))
        ct = EW_F64;
    union {
        float f[1024];
        double d[1024];
        int64_t i[1024];
        uint64_t u[1024];
    } buf;
    void *b = ct == EW_F32 ? (void *)buf.f : ct == EW_F64 ? (void *)buf.d : ct == EW_I64 ? (void *)buf.i : (void *)buf.u;
    for (size_t off = 0; off < x->count; off += 1024) {
        size_t n = x->count - off < 1024 ? x->count - off : 1024;
        op_ew_load(x->data, x->dtype, off, n, ct, b);
        op_ew_store(b, ct, y->data, to, off, n);
    }
    return TDM_OK;
}

tdm_status op_run_Cast(op_ctx *ctx)
{
    const gr_attr *a = gr_attr_find(ctx->node, "to");
    if (!a || a->type != GA_INT)
        return op_fail(ctx, TDM_E_MODEL, "attribute 'to' is missing or not an integer");
    if (a->i <= 0 || a->i > 31 || !dtype_valid((int)a->i))
        return op_fail(ctx, TDM_E_MODEL, "attribute 'to' = %lld is not an element type", (long long)a->i);
    return cast_to(ctx, (tdm_dtype)a->i);
}

tdm_status op_run_CastLike(op_ctx *ctx)
{
    if (ctx->n_in < 2 || !ctx->in[1] || ctx->in[1]->kind != TDM_KIND_TENSOR)
        return op_fail(ctx, TDM_E_RUNTIME, "input 1 (target_type) must be a tensor");
    return cast_to(ctx, ctx->in[1]->dtype);
}

tdm_status op_infer_Cast(op_infer_ctx *ctx)
{
    op_infer_copy(ctx, 0, 0);
    int64_t to = gr_attr_int(ctx->node, "to", 0);
    ctx->out[0].kind = TDM_KIND_TENSOR;
    ctx->out[0].dtype = to > 0 && to <= 31 && dtype_valid((int)to) ? (tdm_dtype)to : TDM_UNDEFINED;
    return TDM_OK;
}

tdm_status op_infer_CastLike(op_infer_ctx *ctx)
{
    op_infer_copy(ctx, 0, 0);
    ctx->out[0].kind = TDM_KIND_TENSOR;
    ctx->out[0].dtype = ctx->n_in > 1 && ctx->in[1] ? ctx->in[1]->dtype : TDM_UNDEFINED;
    return TDM_OK;
}
