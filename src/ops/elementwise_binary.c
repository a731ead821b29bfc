/* Binary ops with numpy broadcasting, the variadic Max/Min/Sum/Mean, PRelu
 * and Where.
 *
 * One broadcast engine serves them all: it aligns the operands' strides to
 * the output shape, merges adjacent dimensions that stay contiguous (or stay
 * broadcast) in every operand, and calls a kernel on the innermost run with
 * a 0/1 stride flag per operand. Same-shape operands thus make one kernel
 * call over the whole tensor; a scalar or a row broadcast makes one call per
 * row with the broadcast operand held in a register. Kernels compute in
 * float (float32, float16, bfloat16), double, int64 or uint64; operands of
 * other types are converted first. */
#include "ops/elementwise.h"
#include "core/mem.h"
#include "core/pool.h"
#include "ops/nn.h"

#include <math.h>
#include <string.h>

#define NOPS 3

typedef struct bpar {
    int divzero; /* an integer division by zero happened */
    int nomem;
} bpar;

typedef void (*kfn)(const void *const *in, const int *s, void *out, size_t n, bpar *p);

/* The output of a broadcast op as nested loops: m merged dimensions d[]
 * with per-operand strides cs[k][]; the innermost one (inner elements)
 * is the kernel's run, s[k] the 0/1 stride flag of operand k in it. */
typedef struct bc_lay {
    int m, nin;
    int64_t cs[NOPS][TDM_MAX_RANK], d[TDM_MAX_RANK];
    int s[NOPS];
    size_t inner;
    const void *const *data;
    const size_t *es;
    void *out;
    size_t eo;
    kfn f;
    bpar *p;
    const op_fuse *fuse; /* float32 output: the fused program, per piece */
} bc_lay;

/* Elements of a piece the fused program runs over right after the kernel
 * wrote them (in L1). */
#define BC_FUSE_PIECE ((size_t)2048)

static void bc_layout(bc_lay *L, int r, const int64_t *od, int nin, const int *ranks, const int64_t *const *dims)
{
    int64_t st[NOPS][TDM_MAX_RANK];
    int m = 0;
    L->nin = nin;
    for (int k = 0; k < nin; k++)
        op_bcast_strides(r, od, ranks[k], dims[k], st[k]);
    for (int i = 0; i < r; i++) {
        if (od[i] == 1)
            continue;
        int merge = m > 0;
        for (int k = 0; k < nin && merge; k++)
            if (L->cs[k][m - 1] != st[k][i] * od[i])
                merge = 0;
        if (merge) {
            L->d[m - 1] *= od[i];
            for (int k = 0; k < nin; k++)
                L->cs[k][m - 1] = st[k][i];
        } else {
            L->d[m] = od[i];
            for (int k = 0; k < nin; k++)
                L->cs[k][m] = st[k][i];
            m++;
        }
    }
    L->m = m;
    L->inner = m ? (size_t)L->d[m - 1] : 1;
    for (int k = 0; k < nin; k++)
        L->s[k] = m ? L->cs[k][m - 1] != 0 : 0;
}

/* Output elements [e0, e1) of the layout. */
static void bc_range(const bc_lay *L, size_t e0, size_t e1)
{
    int64_t idx[TDM_MAX_RANK], off[NOPS];
    const char *ptr[NOPS];
    const int m = L->m, nin = L->nin;
    const size_t inner = L->inner;
    size_t q = e0 / inner, o = e0 % inner;
    for (int k = 0; k < nin; k++)
        off[k] = 0;
    for (int j = m - 2; j >= 0; j--) {
        idx[j] = (int64_t)(q % (size_t)L->d[j]);
        q /= (size_t)L->d[j];
        for (int k = 0; k < nin; k++)
            off[k] += idx[j] * L->cs[k][j];
    }
    for (size_t e = e0; e < e1;) {
        size_t len = inner - o < e1 - e ? inner - o : e1 - e;
        if (L->fuse && len > BC_FUSE_PIECE)
            len = BC_FUSE_PIECE;
        for (int k = 0; k < nin; k++)
            ptr[k] = (const char *)L->data[k] + ((size_t)off[k] + (L->s[k] ? o : 0)) * L->es[k];
        L->f((const void *const *)ptr, L->s, (char *)L->out + e * L->eo, len, L->p);
        if (L->fuse)
            op_fuse_apply(L->fuse, (float *)((char *)L->out + e * L->eo), e, len);
        e += len;
        o += len;
        if (o < inner)
            continue; /* the rest of the row: a piece more */
        o = 0;
        for (int j = m - 2; j >= 0; j--) {
            idx[j]++;
            for (int k = 0; k < nin; k++)
                off[k] += L->cs[k][j];
            if (idx[j] < L->d[j])
                break;
            for (int k = 0; k < nin; k++)
                off[k] -= L->cs[k][j] * L->d[j];
            idx[j] = 0;
        }
    }
}

/* Runs f over the output (shape r, od; count elements) with nin operands of
 * shapes (ranks[k], dims[k]), data[k] and element sizes es[k]. */
static void bcast_exec(int r, const int64_t *od, size_t count, int nin, const int *ranks,
                       const int64_t *const *dims, const void *const *data, const size_t *es, void *out, size_t eo,
                       kfn f, bpar *p)
{
    bc_lay L;
    if (count == 0)
        return;
    bc_layout(&L, r, od, nin, ranks, dims);
    L.data = data;
    L.es = es;
    L.out = out;
    L.eo = eo;
    L.f = f;
    L.p = p;
    L.fuse = NULL;
    bc_range(&L, 0, count);
}

/* Elements a parallel task holds at least. */
#define BC_TASK_MIN ((size_t)16384)

typedef struct bc_job {
    const bc_lay *L;
    size_t count, per;
} bc_job;

static void bc_task(void *arg, size_t t)
{
    const bc_job *j = arg;
    size_t e0 = t * j->per, e1 = j->count - e0 < j->per ? j->count : e0 + j->per;
    bc_range(j->L, e0, e1);
}

/* bcast_exec split into tasks of disjoint output ranges on up to `threads`
 * threads; for kernels that do not write *p (the float ones). fuse (a
 * float32 output, or NULL): applied to every piece after the kernel. */
static void bcast_exec_par(int threads, int r, const int64_t *od, size_t count, int nin, const int *ranks,
                           const int64_t *const *dims, const void *const *data, const size_t *es, void *out,
                           size_t eo, kfn f, bpar *p, const op_fuse *fuse)
{
    if (count == 0)
        return;
    size_t tasks = pool_tasks(threads, count, BC_TASK_MIN);
    bc_lay L;
    bc_layout(&L, r, od, nin, ranks, dims);
    L.data = data;
    L.es = es;
    L.out = out;
    L.eo = eo;
    L.f = f;
    L.p = p;
    L.fuse = fuse;
    if (tasks <= 1) {
        bc_range(&L, 0, count);
        return;
    }
    bc_job j;
    j.L = &L;
    j.count = count;
    j.per = (count + tasks - 1) / tasks;
    j.per = (j.per + 15) / 16 * 16;
    pool_run(threads, (count + j.per - 1) / j.per, bc_task, &j);
}

/* ---- kernels ---- */

#define BK(NAME, TA, TB, TO, EXPR)                                                                            \
    static void NAME(const void *const *in, const int *s, void *vo, size_t n, bpar *p)                        \
    {                                                                                                         \
        const TA *a = in[0];                                                                                  \
        const TB *b = in[1];                                                                                  \
        TO *o = vo;                                                                                           \
        size_t i;                                                                                             \
        (void)p;                                                                                              \
        if (s[0] && s[1]) {                                                                                   \
            for (i = 0; i < n; i++) {                                                                         \
                TA x = a[i];                                                                                  \
                TB y = b[i];                                                                                  \
                o[i] = (TO)(EXPR);                                                                            \
            }                                                                                                 \
        } else if (s[0]) {                                                                                    \
            const TB y = b[0];                                                                                \
            for (i = 0; i < n; i++) {                                                                         \
                TA x = a[i];                                                                                  \
                o[i] = (TO)(EXPR);                                                                            \
            }                                                                                                 \
        } else if (s[1]) {                                                                                    \
            const TA x = a[0];                                                                                \
            for (i = 0; i < n; i++) {                                                                         \
                TB y = b[i];                                                                                  \
                o[i] = (TO)(EXPR);                                                                            \
            }                                                                                                 \
        } else {                                                                                              \
            const TA x = a[0];                                                                                \
            const TB y = b[0];                                                                                \
            for (i = 0; i < n; i++)                                                                           \
                o[i] = (TO)(EXPR);                                                                            \
        }                                                                                                     \
    }

/* Kernels of one op for the four compute types. */
#define BK4(NAME, TO_F32, TO_F64, TO_I, TO_U, EF, EI, EU)                                                     \
    BK(NAME##_f32, float, float, TO_F32, EF)                                                                  \
    BK(NAME##_f64, double, double, TO_F64, EF)                                                                \
    BK(NAME##_i64, int64_t, int64_t, TO_I, EI)                                                                \
    BK(NAME##_u64, uint64_t, uint64_t, TO_U, EU)

#define WRAP(op) (int64_t)((uint64_t)x op (uint64_t)y)

static int64_t idiv(int64_t x, int64_t y, bpar *p)
{
    if (y == 0) {
        p->divzero = 1;
        return 0;
    }
    return y == -1 ? (int64_t)(0u - (uint64_t)x) : x / y;
}

static uint64_t udiv(uint64_t x, uint64_t y, bpar *p)
{
    if (y == 0) {
        p->divzero = 1;
        return 0;
    }
    return x / y;
}

/* Integer remainder: with the sign of the divisor (Python's %) unless
 * fmod, then with the sign of the dividend (C's %). */
static int64_t imod(int64_t x, int64_t y, int fmod_, bpar *p)
{
    if (y == 0) {
        p->divzero = 1;
        return 0;
    }
    if (y == -1)
        return 0;
    int64_t r = x % y;
    if (!fmod_ && r != 0 && ((r < 0) != (y < 0)))
        r += y;
    return r;
}

static uint64_t umod(uint64_t x, uint64_t y, bpar *p)
{
    if (y == 0) {
        p->divzero = 1;
        return 0;
    }
    return x % y;
}

static double pymod(double x, double y)
{
    double r = fmod(x, y);
    if (r != 0 && ((r < 0) != (y < 0)))
        r += y;
    return r;
}

static int64_t ipow(int64_t x, int64_t y)
{
    if (y < 0)
        return x == 1 ? 1 : x == -1 ? ((y & 1) ? -1 : 1) : 0;
    uint64_t r = 1, b = (uint64_t)x;
    while (y) {
        if (y & 1)
            r *= b;
        b *= b;
        y >>= 1;
    }
    return (int64_t)r;
}

static uint64_t upow(uint64_t x, uint64_t y)
{
    uint64_t r = 1;
    while (y) {
        if (y & 1)
            r *= x;
        x *= x;
        y >>= 1;
    }
    return r;
}

BK4(k_add, float, double, int64_t, uint64_t, x + y, WRAP(+), x + y)
BK4(k_sub, float, double, int64_t, uint64_t, x - y, WRAP(-), x - y)
BK4(k_mul, float, double, int64_t, uint64_t, x * y, WRAP(*), x * y)
BK4(k_div, float, double, int64_t, uint64_t, x / y, idiv(x, y, p), udiv(x, y, p))
BK4(k_pow, float, double, int64_t, uint64_t, pow(x, y), ipow(x, y), upow(x, y))
BK4(k_mod, float, double, int64_t, uint64_t, pymod(x, y), imod(x, y, 0, p), umod(x, y, p))
BK4(k_fmod, float, double, int64_t, uint64_t, fmod(x, y), imod(x, y, 1, p), umod(x, y, p))
BK4(k_max, float, double, int64_t, uint64_t, (x != x || x > y) ? x : y, x > y ? x : y, x > y ? x : y)
BK4(k_min, float, double, int64_t, uint64_t, (x != x || x < y) ? x : y, x < y ? x : y, x < y ? x : y)
BK4(k_prelu, float, double, int64_t, uint64_t, x < 0 ? y * x : x, x < 0 ? WRAP(*) : x, ((void)y, x))
BK4(k_eq, uint8_t, uint8_t, uint8_t, uint8_t, x == y, x == y, x == y)
BK4(k_lt, uint8_t, uint8_t, uint8_t, uint8_t, x < y, x < y, x < y)
BK4(k_gt, uint8_t, uint8_t, uint8_t, uint8_t, x > y, x > y, x > y)
BK4(k_le, uint8_t, uint8_t, uint8_t, uint8_t, x <= y, x <= y, x <= y)
BK4(k_ge, uint8_t, uint8_t, uint8_t, uint8_t, x >= y, x >= y, x >= y)
BK(k_shl_u64, uint64_t, uint64_t, uint64_t, y >= 64 ? 0u : x << y)
BK(k_shr_u64, uint64_t, uint64_t, uint64_t, y >= 64 ? 0u : x >> y)
/* signed right shifts fill with the sign bit; a shift of the width or more
 * (or a negative one, which is as large as a shift can be) leaves only it */
BK(k_shr_i64, int64_t, int64_t, int64_t, y >= 64 || y < 0 ? (x < 0 ? -1 : 0) : x < 0 ? ~(~x >> y) : x >> y)
BK(k_and_b, uint8_t, uint8_t, uint8_t, (x != 0) & (y != 0))
BK(k_or_b, uint8_t, uint8_t, uint8_t, (x != 0) | (y != 0))
BK(k_xor_b, uint8_t, uint8_t, uint8_t, (x != 0) ^ (y != 0))
/* BitwiseAnd/Or/Xor: the integers' bits, one kernel per element width */
#define BITWISE_KS(W)                                                                                         \
    BK(k_band_u##W, uint##W##_t, uint##W##_t, uint##W##_t, x & y)                                             \
    BK(k_bor_u##W, uint##W##_t, uint##W##_t, uint##W##_t, x | y)                                              \
    BK(k_bxor_u##W, uint##W##_t, uint##W##_t, uint##W##_t, x ^ y)
BITWISE_KS(8)
BITWISE_KS(16)
BITWISE_KS(32)
BITWISE_KS(64)
typedef const char *cstr;
BK(k_eq_str, cstr, cstr, uint8_t, strcmp(x ? x : "", y ? y : "") == 0)

/* The float32 kernels of the AVX2 file (same results, 8 at a time). */
#define KV(NAME, OP)                                                                                          \
    static void NAME(const void *const *in, const int *s, void *o, size_t n, bpar *p)                         \
    {                                                                                                         \
        (void)p;                                                                                              \
        op_ew_binary_f32_avx2(OP, in[0], s[0], in[1], s[1], o, n);                                            \
    }
KV(kv_add, EW_BIN_ADD)
KV(kv_sub, EW_BIN_SUB)
KV(kv_mul, EW_BIN_MUL)
KV(kv_div, EW_BIN_DIV)
KV(kv_max, EW_BIN_MAX)
KV(kv_min, EW_BIN_MIN)

/* x * x: Pow with the exponent 2. The double product of two floats is
 * exact, so (float)pow(x, 2.0) and the float product x * x are the same
 * correctly rounded value (NaN, infinities and zeros included). */
static void k_square_f32(const void *const *in, const int *s, void *vo, size_t n, bpar *p)
{
    const float *a = in[0];
    float *o = vo;
    (void)p;
    if (gemm_avx2_usable()) {
        op_ew_binary_f32_avx2(EW_BIN_MUL, a, s[0], a, s[0], o, n);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        float x = a[s[0] ? i : 0];
        o[i] = x * x;
    }
}

enum bkind {
    B_ADD, B_SUB, B_MUL, B_DIV, B_POW, B_MOD, B_FMOD, B_MAX, B_MIN, B_PRELU,
    B_EQ, B_LT, B_GT, B_LE, B_GE, B_SHL, B_SHR, B_AND, B_OR, B_XOR, B_BAND, B_BOR, B_BXOR, B_COUNT
};

#define KROW(k) {k##_f32, k##_f64, k##_i64, k##_u64}

/* Kernel per op and compute type (EW_F32, EW_F64, EW_I64, EW_U64); NULL
 * where the op does not take the type. */
static const kfn ktab[B_COUNT][4] = {
    [B_ADD] = KROW(k_add), [B_SUB] = KROW(k_sub), [B_MUL] = KROW(k_mul), [B_DIV] = KROW(k_div),
    [B_POW] = KROW(k_pow), [B_MOD] = KROW(k_mod), [B_FMOD] = KROW(k_fmod), [B_MAX] = KROW(k_max),
    [B_MIN] = KROW(k_min), [B_PRELU] = KROW(k_prelu), [B_EQ] = KROW(k_eq), [B_LT] = KROW(k_lt),
    [B_GT] = KROW(k_gt), [B_LE] = KROW(k_le), [B_GE] = KROW(k_ge),
    [B_SHL] = {NULL, NULL, NULL, k_shl_u64}, [B_SHR] = {NULL, NULL, k_shr_i64, k_shr_u64},
};

static int is_compare(int k) { return k >= B_EQ && k <= B_GE; }

/* The float32 kernel of op k: the AVX2 one when there is one and the CPU
 * has AVX2. */
static kfn kernel_f32(int k)
{
    static const kfn kv[B_COUNT] = {[B_ADD] = kv_add, [B_SUB] = kv_sub, [B_MUL] = kv_mul,
                                    [B_DIV] = kv_div, [B_MAX] = kv_max, [B_MIN] = kv_min};
    return kv[k] && gemm_avx2_usable() ? kv[k] : ktab[k][EW_F32];
}

/* The element type of a compute type's native storage. */
static tdm_dtype ct_native(op_ew_ct ct)
{
    switch (ct) {
    case EW_F32: return TDM_FLOAT;
    case EW_F64: return TDM_DOUBLE;
    case EW_I64: return TDM_INT64;
    case EW_U64: return TDM_UINT64;
    }
    return TDM_UNDEFINED;
}

static tdm_status need_tensor(op_ctx *ctx, int i)
{
    const tdm_tensor *t = i < ctx->n_in ? ctx->in[i] : NULL;
    if (!t || t->kind != TDM_KIND_TENSOR)
        return op_fail(ctx, TDM_E_RUNTIME, "input %d must be a tensor", i);
    return TDM_OK;
}

static tdm_status bcast_shape(op_ctx *ctx, int nin, const tdm_tensor *const *t, int *r, int64_t *dims)
{
    char b1[256], b2[256];
    *r = t[0]->rank;
    memcpy(dims, t[0]->dims, sizeof(int64_t) * (size_t)t[0]->rank);
    for (int k = 1; k < nin; k++) {
        int64_t nd[TDM_MAX_RANK];
        int nr;
        if (op_broadcast(*r, dims, t[k]->rank, t[k]->dims, &nr, nd))
            return op_fail(ctx, TDM_E_RUNTIME, "input %d of shape %s cannot be broadcast with shape %s", k,
                           shape_str(t[k]->rank, t[k]->dims, b1, sizeof b1), shape_str(*r, dims, b2, sizeof b2));
        *r = nr;
        memcpy(dims, nd, sizeof(int64_t) * (size_t)nr);
    }
    return TDM_OK;
}

/* Operand data in compute type ct: the tensor's own data when it already
 * has that type, else a converted copy put in *owned. */
static const void *operand(const tdm_tensor *t, op_ew_ct ct, void **owned)
{
    *owned = NULL;
    if (t->dtype == ct_native(ct))
        return t->data;
    *owned = op_ew_to_ct(t, ct);
    return *owned;
}

static tdm_status binary_run(op_ctx *ctx, int k)
{
    tdm_status st;
    if ((st = need_tensor(ctx, 0)) || (st = need_tensor(ctx, 1)))
        return st;
    const tdm_tensor *t[2] = {ctx->in[0], ctx->in[1]};
    tdm_tensor bview;
    int rb = op_legacy_bcast_rank(ctx->node, ctx->version, t[0]->rank, t[1]->rank);
    if (k == B_PRELU && ctx->version < 7 && t[1]->rank == 1 && t[0]->rank >= 2 && t[1]->dims[0] != 1 &&
        t[1]->dims[0] == t[0]->dims[1])
        rb = t[0]->rank - 1; /* PRelu 6: a slope per channel (axis 1) */
    if (rb != t[1]->rank) { /* before opset 7: B aligned at 'axis' of A */
        bview = *t[1];
        for (int d = bview.rank; d < rb; d++)
            bview.dims[d] = 1;
        bview.rank = rb;
        t[1] = &bview;
    }
    const tdm_tensor *a = t[0], *b = t[1];
    const char *opn = ctx->node->op_type;
    tdm_dtype odt = is_compare(k) ? TDM_BOOL : a->dtype;
    kfn f = NULL;
    op_ew_ct ct = op_ew_ctype(a->dtype);
    int raw = 0; /* kernel works on the tensors' own bytes */
    if (k == B_POW) {
        if (!(DT_NUMERIC & DT_BIT(a->dtype)) || !(DT_NUMERIC & DT_BIT(b->dtype)))
            return op_fail(ctx, TDM_E_UNSUPPORTED, "Pow does not take element types %s and %s",
                           tdm_dtype_name(a->dtype), tdm_dtype_name(b->dtype));
        if (dtype_is_float(a->dtype) || dtype_is_float(b->dtype))
            ct = ct == EW_F32 && op_ew_ctype(b->dtype) == EW_F32 ? EW_F32 : EW_F64;
    } else if (k == B_AND || k == B_OR || k == B_XOR) {
        if (a->dtype != TDM_BOOL || b->dtype != TDM_BOOL)
            return op_fail(ctx, TDM_E_UNSUPPORTED, "%s takes bool inputs, not %s and %s", opn,
                           tdm_dtype_name(a->dtype), tdm_dtype_name(b->dtype));
        f = k == B_AND ? k_and_b : k == B_OR ? k_or_b : k_xor_b;
        raw = 1;
    } else if (k == B_BAND || k == B_BOR || k == B_BXOR) {
        static const kfn bk[3][4] = {{k_band_u8, k_band_u16, k_band_u32, k_band_u64},
                                     {k_bor_u8, k_bor_u16, k_bor_u32, k_bor_u64},
                                     {k_bxor_u8, k_bxor_u16, k_bxor_u32, k_bxor_u64}};
        size_t es = tdm_dtype_size(a->dtype);
        if (a->dtype != b->dtype || !dtype_is_int(a->dtype))
            return op_fail(ctx, TDM_E_UNSUPPORTED, "%s takes two integer inputs of one type, not %s and %s", opn,
                           tdm_dtype_name(a->dtype), tdm_dtype_name(b->dtype));
        f = bk[k - B_BAND][es == 1 ? 0 : es == 2 ? 1 : es == 4 ? 2 : 3];
        raw = 1;
    } else {
        if (a->dtype != b->dtype)
            return op_fail(ctx, TDM_E_RUNTIME, "%s inputs have different element types, %s and %s", opn,
                           tdm_dtype_name(a->dtype), tdm_dtype_name(b->dtype));
        if (a->dtype == TDM_STRING && k == B_EQ) {
            f = k_eq_str;
            raw = 1;
        } else if (!(DT_BIT(a->dtype) & (DT_NUMERIC | (k == B_EQ ? DT_BIT(TDM_BOOL) : 0)))) {
            return op_fail(ctx, TDM_E_UNSUPPORTED, "%s does not take element type %s", opn,
                           tdm_dtype_name(a->dtype));
        } else if ((k == B_SHL || k == B_SHR) && !dtype_is_int(a->dtype)) {
            return op_fail(ctx, TDM_E_UNSUPPORTED, "BitShift does not take element type %s",
                           tdm_dtype_name(a->dtype));
        }
        if (k == B_SHL && ct == EW_I64)
            ct = EW_U64; /* left shifts of signed integers act on their bits */
    }
    if (!raw && !(f = ct == EW_F32 ? kernel_f32(k) : ktab[k][ct]))
        return op_fail(ctx, TDM_E_UNSUPPORTED, "%s does not take element type %s", opn, tdm_dtype_name(a->dtype));

    int r;
    int64_t dims[TDM_MAX_RANK];
    if ((st = bcast_shape(ctx, 2, t, &r, dims)))
        return st;
    if (k == B_PRELU && !shape_equal(r, dims, a->rank, a->dims)) {
        char b1[256], b2[256];
        return op_fail(ctx, TDM_E_RUNTIME, "slope of shape %s cannot be broadcast to X of shape %s",
                       shape_str(b->rank, b->dims, b1, sizeof b1), shape_str(a->rank, a->dims, b2, sizeof b2));
    }
    if ((st = op_out(ctx, 0, odt, r, dims)))
        return st;
    tdm_tensor *y = ctx->out[0];

    const void *data[2];
    size_t es[2];
    void *own[2] = {NULL, NULL}, *tmp = NULL;
    void *dst = y->data;
    size_t eo;
    if (raw) {
        data[0] = a->data;
        data[1] = b->data;
        es[0] = es[1] = a->dtype == TDM_STRING ? sizeof(char *) : tdm_dtype_size(a->dtype);
        eo = tdm_dtype_size(odt);
    } else {
        data[0] = operand(a, ct, &own[0]);
        data[1] = operand(b, ct, &own[1]);
        es[0] = es[1] = op_ew_ct_size(ct);
        eo = is_compare(k) ? 1 : op_ew_ct_size(ct);
        if (!is_compare(k) && odt != ct_native(ct)) {
            size_t nb;
            if (!mem_mul(y->count ? y->count : 1, eo, &nb))
                tmp = mem_alloc(nb);
            dst = tmp;
        }
        if (!data[0] || !data[1] || !dst) {
            mem_free(own[0]);
            mem_free(own[1]);
            mem_free(tmp);
            return op_fail(ctx, TDM_E_NOMEM, "out of memory converting the inputs of %s", opn);
        }
    }
    int ranks[2] = {a->rank, b->rank};
    const int64_t *dd[2] = {a->dims, b->dims};
    bpar p = {0, 0};
    if (k == B_POW && ct == EW_F32 && b->dtype == TDM_FLOAT && b->count == 1 && ((const float *)b->data)[0] == 2.0f)
        f = k_square_f32; /* (float)pow(x, 2) is x * x exactly */
    /* the fused program (ctx->fuse), on the float32 output as it is written */
    const op_fuse *fz = ctx->fuse && ct == EW_F32 && odt == TDM_FLOAT && dst == y->data ? ctx->fuse : NULL;
    if (!raw && (ct == EW_F32 || ct == EW_F64))
        bcast_exec_par(ctx->threads, r, dims, y->count, 2, ranks, dd, data, es, dst, eo, f, &p, fz);
    else
        bcast_exec(r, dims, y->count, 2, ranks, dd, data, es, dst, eo, f, &p);
    if (tmp)
        op_ew_store(tmp, ct, y->data, odt, 0, y->count);
    mem_free(own[0]);
    mem_free(own[1]);
    mem_free(tmp);
    if (p.divzero)
        return op_fail(ctx, TDM_E_RUNTIME, "integer division by zero");
    return TDM_OK;
}

tdm_status op_run_Add(op_ctx *ctx) { return binary_run(ctx, B_ADD); }
tdm_status op_run_Sub(op_ctx *ctx) { return binary_run(ctx, B_SUB); }
tdm_status op_run_Mul(op_ctx *ctx) { return binary_run(ctx, B_MUL); }
tdm_status op_run_Div(op_ctx *ctx) { return binary_run(ctx, B_DIV); }
tdm_status op_run_Pow(op_ctx *ctx) { return binary_run(ctx, B_POW); }
tdm_status op_run_And(op_ctx *ctx) { return binary_run(ctx, B_AND); }
tdm_status op_run_Or(op_ctx *ctx) { return binary_run(ctx, B_OR); }
tdm_status op_run_Xor(op_ctx *ctx) { return binary_run(ctx, B_XOR); }
tdm_status op_run_BitwiseAnd(op_ctx *ctx) { return binary_run(ctx, B_BAND); }
tdm_status op_run_BitwiseOr(op_ctx *ctx) { return binary_run(ctx, B_BOR); }
tdm_status op_run_BitwiseXor(op_ctx *ctx) { return binary_run(ctx, B_BXOR); }
tdm_status op_run_Equal(op_ctx *ctx) { return binary_run(ctx, B_EQ); }
tdm_status op_run_Less(op_ctx *ctx) { return binary_run(ctx, B_LT); }
tdm_status op_run_Greater(op_ctx *ctx) { return binary_run(ctx, B_GT); }
tdm_status op_run_LessOrEqual(op_ctx *ctx) { return binary_run(ctx, B_LE); }
tdm_status op_run_GreaterOrEqual(op_ctx *ctx) { return binary_run(ctx, B_GE); }
tdm_status op_run_PRelu(op_ctx *ctx) { return binary_run(ctx, B_PRELU); }

tdm_status op_run_Mod(op_ctx *ctx)
{
    int64_t fm = gr_attr_int(ctx->node, "fmod", 0);
    if (fm != 0 && fm != 1)
        return op_fail(ctx, TDM_E_MODEL, "attribute 'fmod' must be 0 or 1, not %lld", (long long)fm);
    return binary_run(ctx, fm ? B_FMOD : B_MOD);
}

tdm_status op_run_BitShift(op_ctx *ctx)
{
    const char *dir = gr_attr_str(ctx->node, "direction", "");
    if (strcmp(dir, "LEFT") == 0)
        return binary_run(ctx, B_SHL);
    if (strcmp(dir, "RIGHT") == 0)
        return binary_run(ctx, B_SHR);
    return op_fail(ctx, TDM_E_MODEL, "attribute 'direction' must be \"LEFT\" or \"RIGHT\", not \"%s\"", dir);
}

/* ---- variadic: Max, Min, Sum, Mean ---- */

static tdm_status variadic_run(op_ctx *ctx, int k, int mean)
{
    tdm_status st;
    int nin = ctx->n_in;
    if (nin < 1)
        return op_fail(ctx, TDM_E_RUNTIME, "%s needs at least one input", ctx->node->op_type);
    for (int i = 0; i < nin; i++)
        if ((st = need_tensor(ctx, i)))
            return st;
    const tdm_tensor *x0 = ctx->in[0];
    for (int i = 1; i < nin; i++)
        if (ctx->in[i]->dtype != x0->dtype)
            return op_fail(ctx, TDM_E_RUNTIME, "input %d has element type %s, input 0 has %s", i,
                           tdm_dtype_name(ctx->in[i]->dtype), tdm_dtype_name(x0->dtype));
    if (!(DT_BIT(x0->dtype) & (mean ? DT_FLOATS : DT_NUMERIC)))
        return op_fail(ctx, TDM_E_UNSUPPORTED, "%s does not take element type %s", ctx->node->op_type,
                       tdm_dtype_name(x0->dtype));
    int r;
    int64_t dims[TDM_MAX_RANK];
    if ((st = bcast_shape(ctx, nin, ctx->in, &r, dims)))
        return st;
    if ((st = op_out(ctx, 0, x0->dtype, r, dims)))
        return st;
    tdm_tensor *y = ctx->out[0];
    op_ew_ct ct = op_ew_ctype(x0->dtype);
    int native = x0->dtype == ct_native(ct);
    size_t es = op_ew_ct_size(ct);
    kfn f = ct == EW_F32 ? kernel_f32(k) : (unsigned)ct < 4 ? ktab[k][ct] : NULL;
    if (!f)
        return op_fail(ctx, TDM_E_UNSUPPORTED, "%s does not take element type %s", ctx->node->op_type,
                       tdm_dtype_name(x0->dtype));

    /* acc: the running result, of shape (ar, ad) */
    void *acc_own = NULL, *in_own = NULL;
    const void *acc = operand(x0, ct, &acc_own);
    int ar = x0->rank;
    int64_t ad[TDM_MAX_RANK];
    memcpy(ad, x0->dims, sizeof(int64_t) * (size_t)ar);
    if (!acc)
        goto nomem;
    if (nin == 1) {
        /* copy through the accumulator below */
        size_t nb;
        if (mem_mul(y->count ? y->count : 1, es, &nb) || !(in_own = mem_alloc(nb)))
            goto nomem;
        memcpy(in_own, acc, y->count * es);
        mem_free(acc_own);
        acc = acc_own = in_own;
        in_own = NULL;
    }
    for (int i = 1; i < nin; i++) {
        const tdm_tensor *xi = ctx->in[i];
        int nr;
        int64_t nd[TDM_MAX_RANK];
        size_t cnt, nb;
        op_broadcast(ar, ad, xi->rank, xi->dims, &nr, nd);
        shape_count(nr, nd, &cnt);
        const void *bi = operand(xi, ct, &in_own);
        void *dst = NULL;
        int last = i == nin - 1 && native;
        if (last)
            dst = y->data;
        else if (!mem_mul(cnt ? cnt : 1, es, &nb))
            dst = mem_alloc(nb);
        if (!bi || !dst) {
            mem_free(in_own);
            if (!last)
                mem_free(dst);
            goto nomem;
        }
        const void *data[2] = {acc, bi};
        size_t ess[2] = {es, es};
        int ranks[2] = {ar, xi->rank};
        const int64_t *dd[2] = {ad, xi->dims};
        bpar p = {0, 0};
        bcast_exec(nr, nd, cnt, 2, ranks, dd, data, ess, dst, es, f, &p);
        mem_free(in_own);
        in_own = NULL;
        mem_free(acc_own);
        acc_own = last ? NULL : dst;
        acc = dst;
        ar = nr;
        memcpy(ad, nd, sizeof(int64_t) * (size_t)nr);
    }
    if (mean) {
        if (ct == EW_F32) {
            float *v = (float *)acc, dn = (float)nin;
            for (size_t i = 0; i < y->count; i++)
                v[i] /= dn;
        } else {
            double *v = (double *)acc, dn = (double)nin;
            for (size_t i = 0; i < y->count; i++)
                v[i] /= dn;
        }
    }
    if (acc != y->data)
        op_ew_store(acc, ct, y->data, y->dtype, 0, y->count);
    mem_free(acc_own);
    return TDM_OK;
nomem:
    mem_free(acc_own);
    return op_fail(ctx, TDM_E_NOMEM, "out of memory in %s", ctx->node->op_type);
}

tdm_status op_run_Max(op_ctx *ctx) { return variadic_run(ctx, B_MAX, 0); }
tdm_status op_run_Min(op_ctx *ctx) { return variadic_run(ctx, B_MIN, 0); }
tdm_status op_run_Sum(op_ctx *ctx) { return variadic_run(ctx, B_ADD, 0); }
tdm_status op_run_Mean(op_ctx *ctx) { return variadic_run(ctx, B_ADD, 1); }

/* ---- Where ---- */

#define WK(NAME, T)                                                                                           \
    static void NAME(const void *const *in, const int *s, void *vo, size_t n, bpar *p)                        \
    {                                                                                                         \
        const uint8_t *c = in[0];                                                                             \
        const T *a = in[1], *b = in[2];                                                                       \
        T *o = vo;                                                                                            \
        (void)p;                                                                                              \
        if (s[0] && s[1] && s[2]) {                                                                           \
            for (size_t i = 0; i < n; i++)                                                                    \
                o[i] = c[i] ? a[i] : b[i];                                                                    \
        } else {                                                                                              \
            size_t sc = (size_t)s[0], sa = (size_t)s[1], sb = (size_t)s[2];                                  \
            for (size_t i = 0; i < n; i++)                                                                    \
                o[i] = c[i * sc] ? a[i * sa] : b[i * sb];                                                     \
        }                                                                                                     \
    }

WK(k_where1, uint8_t)
WK(k_where2, uint16_t)
WK(k_where4, uint32_t)
WK(k_where8, uint64_t)

static void k_where_str(const void *const *in, const int *s, void *vo, size_t n, bpar *p)
{
    const uint8_t *c = in[0];
    char *const *a = in[1], *const *b = in[2];
    char **o = vo;
    for (size_t i = 0; i < n; i++) {
        const char *v = c[i * (size_t)s[0]] ? a[i * (size_t)s[1]] : b[i * (size_t)s[2]];
        if (!(o[i] = mem_strdup(v ? v : "")))
            p->nomem = 1;
    }
}

tdm_status op_run_Where(op_ctx *ctx)
{
    tdm_status st;
    for (int i = 0; i < 3; i++)
        if ((st = need_tensor(ctx, i)))
            return st;
    const tdm_tensor *const *t = ctx->in;
    if (t[0]->dtype != TDM_BOOL)
        return op_fail(ctx, TDM_E_RUNTIME, "input 0 (condition) must be bool, not %s", tdm_dtype_name(t[0]->dtype));
    if (t[1]->dtype != t[2]->dtype)
        return op_fail(ctx, TDM_E_RUNTIME, "inputs 1 and 2 have different element types, %s and %s",
                       tdm_dtype_name(t[1]->dtype), tdm_dtype_name(t[2]->dtype));
    tdm_dtype dt = t[1]->dtype;
    size_t esz = dt == TDM_STRING ? sizeof(char *) : tdm_dtype_size(dt);
    kfn f = dt == TDM_STRING ? k_where_str
            : esz == 1       ? k_where1
            : esz == 2       ? k_where2
            : esz == 4       ? k_where4
            : esz == 8       ? k_where8
                             : NULL;
    if (!f)
        return op_fail(ctx, TDM_E_UNSUPPORTED, "Where does not take element type %s", tdm_dtype_name(dt));
    int r;
    int64_t dims[TDM_MAX_RANK];
    if ((st = bcast_shape(ctx, 3, t, &r, dims)) || (st = op_out(ctx, 0, dt, r, dims)))
        return st;
    const void *data[3] = {t[0]->data, t[1]->data, t[2]->data};
    size_t es[3] = {1, esz, esz};
    int ranks[3] = {t[0]->rank, t[1]->rank, t[2]->rank};
    const int64_t *dd[3] = {t[0]->dims, t[1]->dims, t[2]->dims};
    bpar p = {0, 0};
    bcast_exec(r, dims, ctx->out[0]->count, 3, ranks, dd, data, es, ctx->out[0]->data, esz, f, &p);
    if (p.nomem)
        return op_fail(ctx, TDM_E_NOMEM, "out of memory copying strings in Where");
    return TDM_OK;
}

tdm_status op_infer_Where(op_infer_ctx *ctx)
{
    tdm_status st = op_infer_broadcast(ctx);
    if (st)
        return st;
    ctx->out[0].dtype = ctx->n_in > 1 && ctx->in[1] ? ctx->in[1]->dtype : TDM_UNDEFINED;
    return TDM_OK;
}

tdm_status op_infer_PRelu(op_infer_ctx *ctx) { return op_infer_same(ctx); }
