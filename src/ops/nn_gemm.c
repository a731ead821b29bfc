/* The float32 GEMM (op_sgemm) and the matrix-product ops built on it:
 * MatMul, Gemm, MatMulInteger, QLinearMatMul. */
#include "ops/nn.h"
#include "core/mem.h"

#include <math.h>
#include <string.h>

/* ------------------------------------------------------------------ sgemm */

/* Micro-tile: NN_MR rows x (2 * NN_V) columns. The kernel is written as
 * 2 * NN_MR accumulator arrays of NN_V floats with fixed-trip inner loops so
 * that the compiler keeps each array in one vector register (NN_V = the
 * vector width the target offers). */
#if defined(__AVX__)
#define NN_V 8
#else
#define NN_V 4
#endif
#define NN_MR 6
#define NN_NR (2 * NN_V)
#define NN_MC 120
#define NN_KC 256
#define NN_NC 2048

/* acc[NN_MR][NN_NR] = sum over kc of a-panel (NN_MR per step) x b-panel
 * (NN_NR per step). */
static void sgemm_kernel(size_t kc, const float *restrict a, const float *restrict b, float *restrict acc)
{
    float c0a[NN_V] = {0}, c1a[NN_V] = {0}, c2a[NN_V] = {0}, c3a[NN_V] = {0}, c4a[NN_V] = {0}, c5a[NN_V] = {0};
    float c0b[NN_V] = {0}, c1b[NN_V] = {0}, c2b[NN_V] = {0}, c3b[NN_V] = {0}, c4b[NN_V] = {0}, c5b[NN_V] = {0};
    for (size_t p = 0; p < kc; p++) {
        const float a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3], a4 = a[4], a5 = a[5];
        for (int j = 0; j < NN_V; j++) {
            const float bj = b[j], bk = b[j + NN_V];
            c0a[j] += a0 * bj;
            c0b[j] += a0 * bk;
            c1a[j] += a1 * bj;
            c1b[j] += a1 * bk;
            c2a[j] += a2 * bj;
            c2b[j] += a2 * bk;
            c3a[j] += a3 * bj;
            c3b[j] += a3 * bk;
            c4a[j] += a4 * bj;
            c4b[j] += a4 * bk;
            c5a[j] += a5 * bj;
            c5b[j] += a5 * bk;
        }
        a += NN_MR;
        b += NN_NR;
    }
    for (int j = 0; j < NN_V; j++) {
        acc[0 * NN_NR + j] = c0a[j];
        acc[0 * NN_NR + NN_V + j] = c0b[j];
        acc[1 * NN_NR + j] = c1a[j];
        acc[1 * NN_NR + NN_V + j] = c1b[j];
        acc[2 * NN_NR + j] = c2a[j];
        acc[2 * NN_NR + NN_V + j] = c2b[j];
        acc[3 * NN_NR + j] = c3a[j];
        acc[3 * NN_NR + NN_V + j] = c3b[j];
        acc[4 * NN_NR + j] = c4a[j];
        acc[4 * NN_NR + NN_V + j] = c4b[j];
        acc[5 * NN_NR + j] = c5a[j];
        acc[5 * NN_NR + NN_V + j] = c5b[j];
    }
}

/* Packs op(A)[i0:i0+mc, p0:p0+kc] into panels of NN_MR rows, k-major,
 * zero-padded to a multiple of NN_MR rows. */
static void pack_a(int trans, const float *a, size_t lda, size_t i0, size_t mc, size_t p0, size_t kc, float *dst)
{
    for (size_t ir = 0; ir < mc; ir += NN_MR) {
        size_t mr = mc - ir < NN_MR ? mc - ir : NN_MR;
        if (!trans) {
            const float *src = a + (i0 + ir) * lda + p0;
            for (size_t p = 0; p < kc; p++) {
                size_t i = 0;
                for (; i < mr; i++)
                    dst[p * NN_MR + i] = src[i * lda + p];
                for (; i < NN_MR; i++)
                    dst[p * NN_MR + i] = 0.0f;
            }
        } else {
            /* A is stored K x M: row p holds op(A)[:, p]. */
            const float *src = a + p0 * lda + i0 + ir;
            for (size_t p = 0; p < kc; p++) {
                size_t i = 0;
                for (; i < mr; i++)
                    dst[p * NN_MR + i] = src[p * lda + i];
                for (; i < NN_MR; i++)
                    dst[p * NN_MR + i] = 0.0f;
            }
        }
        dst += kc * NN_MR;
    }
}

/* Packs op(B)[p0:p0+kc, j0:j0+nc] into panels of NN_NR columns, k-major,
 * zero-padded to a multiple of NN_NR columns. */
static void pack_b(int trans, const float *b, size_t ldb, size_t p0, size_t kc, size_t j0, size_t nc, float *dst)
{
    for (size_t jr = 0; jr < nc; jr += NN_NR) {
        size_t nr = nc - jr < NN_NR ? nc - jr : NN_NR;
        if (!trans) {
            const float *src = b + p0 * ldb + j0 + jr;
            if (nr == NN_NR) {
                for (size_t p = 0; p < kc; p++)
                    memcpy(dst + p * NN_NR, src + p * ldb, NN_NR * sizeof *dst);
            } else {
                for (size_t p = 0; p < kc; p++) {
                    size_t j = 0;
                    for (; j < nr; j++)
                        dst[p * NN_NR + j] = src[p * ldb + j];
                    for (; j < NN_NR; j++)
                        dst[p * NN_NR + j] = 0.0f;
                }
            }
        } else {
            /* B is stored N x K: row j holds op(B)[:, j]. */
            const float *src = b + (j0 + jr) * ldb + p0;
            for (size_t j = 0; j < nr; j++)
                for (size_t p = 0; p < kc; p++)
                    dst[p * NN_NR + j] = src[j * ldb + p];
            for (size_t j = nr; j < NN_NR; j++)
                for (size_t p = 0; p < kc; p++)
                    dst[p * NN_NR + j] = 0.0f;
        }
        dst += kc * NN_NR;
    }
}

static void scale_c(size_t m, size_t n, float beta, float *c, size_t ldc)
{
    for (size_t i = 0; i < m; i++) {
        float *row = c + i * ldc;
        if (beta == 0.0f)
            memset(row, 0, n * sizeof *row);
        else if (beta != 1.0f)
            for (size_t j = 0; j < n; j++)
                row[j] *= beta;
    }
}

int op_sgemm(int trans_a, int trans_b, size_t m, size_t n, size_t k, float alpha, const float *a, size_t lda,
             const float *b, size_t ldb, float beta, float *c, size_t ldc)
{
    if (!m || !n)
        return 0;
    if (!k || alpha == 0.0f) {
        scale_c(m, n, beta, c, ldc);
        return 0;
    }
    size_t nc_max = n < NN_NC ? (n + NN_NR - 1) / NN_NR * NN_NR : NN_NC;
    size_t kc_max = k < NN_KC ? k : NN_KC;
    size_t mc_max = m < NN_MC ? (m + NN_MR - 1) / NN_MR * NN_MR : NN_MC;
    float *pa = mem_alloc(mc_max * kc_max * sizeof *pa + 64);
    float *pb = mem_alloc(nc_max * kc_max * sizeof *pb + 64);
    if (!pa || !pb) {
        mem_free(pa);
        mem_free(pb);
        return -1;
    }
    float acc[NN_MR * NN_NR];
    for (size_t jc = 0; jc < n; jc += NN_NC) {
        size_t nc = n - jc < NN_NC ? n - jc : NN_NC;
        for (size_t pc = 0; pc < k; pc += NN_KC) {
            size_t kc = k - pc < NN_KC ? k - pc : NN_KC;
            float bt = pc == 0 ? beta : 1.0f;
            pack_b(trans_b, b, ldb, pc, kc, jc, nc, pb);
            for (size_t ic = 0; ic < m; ic += NN_MC) {
                size_t mc = m - ic < NN_MC ? m - ic : NN_MC;
                pack_a(trans_a, a, lda, ic, mc, pc, kc, pa);
                for (size_t jr = 0; jr < nc; jr += NN_NR) {
                    size_t nr = nc - jr < NN_NR ? nc - jr : NN_NR;
                    const float *bp = pb + (jr / NN_NR) * kc * NN_NR;
                    for (size_t ir = 0; ir < mc; ir += NN_MR) {
                        size_t mr = mc - ir < NN_MR ? mc - ir : NN_MR;
                        sgemm_kernel(kc, pa + (ir / NN_MR) * kc * NN_MR, bp, acc);
                        float *cp = c + (ic + ir) * ldc + jc + jr;
                        for (size_t i = 0; i < mr; i++) {
                            float *row = cp + i * ldc;
                            const float *ar = acc + i * NN_NR;
                            if (bt == 0.0f)
                                for (size_t j = 0; j < nr; j++)
                                    row[j] = alpha * ar[j];
                            else if (bt == 1.0f)
                                for (size_t j = 0; j < nr; j++)
                                    row[j] += alpha * ar[j];
                            else
                                for (size_t j = 0; j < nr; j++)
                                    row[j] = bt * row[j] + alpha * ar[j];
                        }
                    }
                }
            }
        }
    }
    mem_free(pa);
    mem_free(pb);
    return 0;
}

/* ------------------------------------------------------- batched products */

/* The shape bookkeeping of a numpy matmul: batch broadcast and 1-D operands. */
typedef struct mm_shape {
    int rank;                     /* output rank */
    int64_t dims[TDM_MAX_RANK];   /* output dims */
    int nb;                       /* batch rank */
    int64_t bdims[TDM_MAX_RANK];  /* broadcast batch dims */
    int64_t sa[TDM_MAX_RANK], sb[TDM_MAX_RANK]; /* batch strides (in matrices) of A and B */
    size_t batches, m, n, k;
} mm_shape;

static tdm_status mm_plan(op_ctx *ctx, const tdm_tensor *a, const tdm_tensor *b, mm_shape *s)
{
    memset(s, 0, sizeof *s);
    if (a->rank < 1 || b->rank < 1)
        return op_fail(ctx, TDM_E_RUNTIME, "inputs must have rank 1 or more (A has %d, B has %d)", a->rank,
                       b->rank);
    int64_t ad[TDM_MAX_RANK + 1], bd[TDM_MAX_RANK + 1];
    int ra = a->rank, rb = b->rank;
    memcpy(ad, a->dims, sizeof(int64_t) * (size_t)ra);
    memcpy(bd, b->dims, sizeof(int64_t) * (size_t)rb);
    if (ra == 1) {
        ad[1] = ad[0];
        ad[0] = 1;
        ra = 2;
    }
    if (rb == 1) {
        bd[1] = 1;
        rb = 2;
    }
    if (ad[ra - 1] != bd[rb - 2])
        return op_fail(ctx, TDM_E_RUNTIME, "inner dimensions differ: A has %lld columns, B has %lld rows",
                       (long long)ad[ra - 1], (long long)bd[rb - 2]);
    s->m = (size_t)ad[ra - 2];
    s->k = (size_t)ad[ra - 1];
    s->n = (size_t)bd[rb - 1];
    if (op_broadcast(ra - 2, ad, rb - 2, bd, &s->nb, s->bdims))
        return op_fail(ctx, TDM_E_RUNTIME, "the batch dimensions of A and B cannot be broadcast");
    op_bcast_strides(s->nb, s->bdims, ra - 2, ad, s->sa);
    op_bcast_strides(s->nb, s->bdims, rb - 2, bd, s->sb);
    if (shape_count(s->nb, s->bdims, &s->batches))
        return op_fail(ctx, TDM_E_NOMEM, "the output is too large");
    s->rank = 0;
    for (int i = 0; i < s->nb; i++)
        s->dims[s->rank++] = s->bdims[i];
    if (a->rank > 1)
        s->dims[s->rank++] = (int64_t)s->m;
    if (b->rank > 1)
        s->dims[s->rank++] = (int64_t)s->n;
    return TDM_OK;
}

/* Offsets (in elements) of batch i's matrices in A and B. */
static void mm_offsets(const mm_shape *s, size_t i, size_t *oa, size_t *ob)
{
    *oa = (size_t)op_bcast_offset(i, s->nb, s->bdims, s->sa) * s->m * s->k;
    *ob = (size_t)op_bcast_offset(i, s->nb, s->bdims, s->sb) * s->k * s->n;
}

/* A batched float product, folding A's batches into M when B is shared. */
static tdm_status mm_f32(op_ctx *ctx, const mm_shape *s, const float *a, const float *b, float *y)
{
    int b_shared = 1;
    for (int i = 0; i < s->nb; i++)
        b_shared &= s->sb[i] == 0;
    int a_dense = 1; /* A's batches are all distinct and in order */
    for (int i = 0; i < s->nb; i++)
        a_dense &= s->sa[i] != 0 || s->bdims[i] == 1;
    if (b_shared && a_dense) {
        if (op_sgemm(0, 0, s->batches * s->m, s->n, s->k, 1.0f, a, s->k, b, s->n, 0.0f, y, s->n))
            return op_fail(ctx, TDM_E_NOMEM, "out of memory");
        return TDM_OK;
    }
    for (size_t i = 0; i < s->batches; i++) {
        size_t oa, ob;
        mm_offsets(s, i, &oa, &ob);
        if (op_sgemm(0, 0, s->m, s->n, s->k, 1.0f, a + oa, s->k, b + ob, s->n, 0.0f, y + i * s->m * s->n, s->n))
            return op_fail(ctx, TDM_E_NOMEM, "out of memory");
    }
    return TDM_OK;
}

#define MM_LOOP(T, ACC)                                                                                          \
    do {                                                                                                         \
        const T *pa_ = a->data, *pb_ = b->data;                                                                 \
        T *py_ = y->data;                                                                                        \
        for (size_t bi = 0; bi < s.batches; bi++) {                                                              \
            size_t oa_, ob_;                                                                                     \
            mm_offsets(&s, bi, &oa_, &ob_);                                                                      \
            const T *A_ = pa_ + oa_, *B_ = pb_ + ob_;                                                            \
            T *Y_ = py_ + bi * s.m * s.n;                                                                        \
            for (size_t i = 0; i < s.m; i++)                                                                     \
                for (size_t j = 0; j < s.n; j++) {                                                               \
                    ACC sum_ = 0;                                                                                \
                    for (size_t p = 0; p < s.k; p++)                                                             \
                        sum_ += (ACC)A_[i * s.k + p] * (ACC)B_[p * s.n + j];                                     \
                    Y_[i * s.n + j] = (T)sum_;                                                                   \
                }                                                                                                \
        }                                                                                                        \
    } while (0)

tdm_status op_run_MatMul(op_ctx *ctx)
{
    const tdm_tensor *a = op_nn_in(ctx, 0), *b = op_nn_in(ctx, 1);
    if (!a || !b)
        return op_fail(ctx, TDM_E_MODEL, "inputs A and B are required");
    if (a->dtype != b->dtype)
        return op_fail(ctx, TDM_E_RUNTIME, "A is %s but B is %s", tdm_dtype_name(a->dtype),
                       tdm_dtype_name(b->dtype));
    mm_shape s;
    tdm_status st = mm_plan(ctx, a, b, &s);
    if (st)
        return st;
    st = op_out(ctx, 0, a->dtype, s.rank, s.dims);
    if (st)
        return st;
    tdm_tensor *y = ctx->out[0];
    if (!y->count)
        return TDM_OK;
    switch (a->dtype) {
    case TDM_FLOAT:
        return mm_f32(ctx, &s, a->data, b->data, y->data);
    case TDM_FLOAT16:
    case TDM_BFLOAT16: {
        float *fa = op_nn_to_f32(a), *fb = op_nn_to_f32(b);
        float *fy = mem_alloc(y->count * sizeof *fy);
        if (!fa || !fb || !fy)
            st = op_fail(ctx, TDM_E_NOMEM, "out of memory");
        else
            st = mm_f32(ctx, &s, fa, fb, fy);
        if (!st)
            op_nn_from_f32(y, fy);
        mem_free(fa);
        mem_free(fb);
        mem_free(fy);
        return st;
    }
    case TDM_DOUBLE:
        MM_LOOP(double, double);
        return TDM_OK;
    case TDM_INT32:
        MM_LOOP(int32_t, int64_t);
        return TDM_OK;
    case TDM_INT64:
        MM_LOOP(int64_t, uint64_t);
        return TDM_OK;
    case TDM_UINT32:
        MM_LOOP(uint32_t, uint64_t);
        return TDM_OK;
    case TDM_UINT64:
        MM_LOOP(uint64_t, uint64_t);
        return TDM_OK;
    default:
        return op_fail(ctx, TDM_E_UNSUPPORTED, "MatMul does not take %s", tdm_dtype_name(a->dtype));
    }
}

/* ------------------------------------------------------------------- Gemm */

tdm_status op_run_Gemm(op_ctx *ctx)
{
    const tdm_tensor *a = op_nn_in(ctx, 0), *b = op_nn_in(ctx, 1), *c = op_nn_in(ctx, 2);
    if (!a || !b)
        return op_fail(ctx, TDM_E_MODEL, "inputs A and B are required");
    if (a->rank != 2 || b->rank != 2)
        return op_fail(ctx, TDM_E_RUNTIME, "A and B must be matrices (ranks %d and %d)", a->rank, b->rank);
    if (a->dtype != b->dtype || (c && c->dtype != a->dtype))
        return op_fail(ctx, TDM_E_RUNTIME, "A, B and C must have one element type");
    int ta = gr_attr_int(ctx->node, "transA", 0) != 0, tb = gr_attr_int(ctx->node, "transB", 0) != 0;
    float alpha = gr_attr_float(ctx->node, "alpha", 1.0f), beta = gr_attr_float(ctx->node, "beta", 1.0f);
    size_t m = (size_t)(ta ? a->dims[1] : a->dims[0]), k = (size_t)(ta ? a->dims[0] : a->dims[1]);
    size_t kb = (size_t)(tb ? b->dims[1] : b->dims[0]), n = (size_t)(tb ? b->dims[0] : b->dims[1]);
    if (k != kb)
        return op_fail(ctx, TDM_E_RUNTIME, "inner dimensions differ: op(A) has %zu columns, op(B) has %zu rows", k,
                       kb);
    int64_t od[2] = {(int64_t)m, (int64_t)n};
    int64_t cs[2] = {0, 0};
    if (c) {
        int r;
        int64_t bd[TDM_MAX_RANK];
        if (c->rank > 2 || op_broadcast(2, od, c->rank, c->dims, &r, bd) || bd[0] != od[0] || bd[1] != od[1])
            return op_fail(ctx, TDM_E_RUNTIME, "C cannot be broadcast to %zux%zu", m, n);
        op_bcast_strides(2, od, c->rank, c->dims, cs);
    }
    tdm_status st = op_out(ctx, 0, a->dtype, 2, od);
    if (st)
        return st;
    tdm_tensor *y = ctx->out[0];
    if (!y->count)
        return TDM_OK;
    if (a->dtype == TDM_FLOAT || a->dtype == TDM_FLOAT16 || a->dtype == TDM_BFLOAT16) {
        float *fa = NULL, *fb = NULL, *fc = NULL, *fy;
        const float *pa = a->data, *pb = b->data, *pc = c ? c->data : NULL;
        if (a->dtype != TDM_FLOAT) {
            fa = op_nn_to_f32(a);
            fb = op_nn_to_f32(b);
            fc = c ? op_nn_to_f32(c) : NULL;
            fy = mem_alloc(y->count * sizeof *fy);
            if (!fa || !fb || (c && !fc) || !fy) {
                mem_free(fa);
                mem_free(fb);
                mem_free(fc);
                mem_free(fy);
                return op_fail(ctx, TDM_E_NOMEM, "out of memory");
            }
            pa = fa;
            pb = fb;
            pc = fc;
        } else {
            fy = y->data;
        }
        if (pc)
            for (size_t i = 0; i < m; i++)
                for (size_t j = 0; j < n; j++)
                    fy[i * n + j] = pc[(int64_t)i * cs[0] + (int64_t)j * cs[1]];
        int rc = op_sgemm(ta, tb, m, n, k, alpha, pa, (size_t)a->dims[1], pb, (size_t)b->dims[1],
                          pc ? beta : 0.0f, fy, n);
        if (!rc && a->dtype != TDM_FLOAT)
            op_nn_from_f32(y, fy);
        if (a->dtype != TDM_FLOAT) {
            mem_free(fa);
            mem_free(fb);
            mem_free(fc);
            mem_free(fy);
        }
        return rc ? op_fail(ctx, TDM_E_NOMEM, "out of memory") : TDM_OK;
    }
    if (!(DT_BIT(a->dtype) & (DT_BIT(TDM_DOUBLE) | DT_BIT(TDM_INT32) | DT_BIT(TDM_INT64) | DT_BIT(TDM_UINT32) |
                              DT_BIT(TDM_UINT64))))
        return op_fail(ctx, TDM_E_UNSUPPORTED, "Gemm does not take %s", tdm_dtype_name(a->dtype));
    /* Other types: simple loops through double / int64 accessors. */
    int is_f = a->dtype == TDM_DOUBLE;
    size_t lda = (size_t)a->dims[1], ldb = (size_t)b->dims[1];
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++) {
            size_t cidx = c ? (size_t)((int64_t)i * cs[0] + (int64_t)j * cs[1]) : 0;
            if (is_f) {
                double sum = 0;
                for (size_t p = 0; p < k; p++)
                    sum += tensor_get_f64(a, ta ? p * lda + i : i * lda + p) *
                           tensor_get_f64(b, tb ? j * ldb + p : p * ldb + j);
                double v = alpha * sum + (c ? beta * tensor_get_f64(c, cidx) : 0.0);
                tensor_set_f64(y, i * n + j, v);
            } else {
                int64_t sum = 0;
                for (size_t p = 0; p < k; p++)
                    sum += tensor_get_i64(a, ta ? p * lda + i : i * lda + p) *
                           tensor_get_i64(b, tb ? j * ldb + p : p * ldb + j);
                double v = alpha * (double)sum + (c ? beta * (double)tensor_get_i64(c, cidx) : 0.0);
                tensor_set_i64(y, i * n + j, (int64_t)v);
            }
        }
    return TDM_OK;
}

/* ------------------------------------------------------ integer products */

static int is_int8(tdm_dtype dt) { return dt == TDM_INT8 || dt == TDM_UINT8; }

static int32_t ld8(const tdm_tensor *t, size_t i)
{
    return t->dtype == TDM_INT8 ? (int32_t)((const int8_t *)t->data)[i] : (int32_t)((const uint8_t *)t->data)[i];
}

/* A zero point (or scale) that is a scalar or a 1-D tensor of len values:
 * checks it and returns its length (1 or len). */
static tdm_status per_axis_len(op_ctx *ctx, const tdm_tensor *t, size_t len, const char *what, size_t *out)
{
    *out = 1;
    if (!t)
        return TDM_OK;
    if (t->count == 1)
        return TDM_OK;
    if (t->rank == 1 && t->count == len) {
        *out = len;
        return TDM_OK;
    }
    return op_fail(ctx, TDM_E_RUNTIME, "%s must be a scalar or hold %zu values, not %zu", what, len, t->count);
}

/* int32 accumulations of (A - azp)(B - bzp) for every batch into acc. */
static tdm_status mm_int(op_ctx *ctx, const mm_shape *s, const tdm_tensor *a, const tdm_tensor *b,
                         const tdm_tensor *azp, const tdm_tensor *bzp, int32_t *acc)
{
    size_t na, nb;
    tdm_status st = per_axis_len(ctx, azp, s->m, "a_zero_point", &na);
    if (st)
        return st;
    st = per_axis_len(ctx, bzp, s->n, "b_zero_point", &nb);
    if (st)
        return st;
    int32_t *bcol = mem_alloc(s->k * sizeof *bcol + 1);
    if (!bcol)
        return op_fail(ctx, TDM_E_NOMEM, "out of memory");
    for (size_t bi = 0; bi < s->batches; bi++) {
        size_t oa, ob;
        mm_offsets(s, bi, &oa, &ob);
        int32_t *y = acc + bi * s->m * s->n;
        for (size_t j = 0; j < s->n; j++) {
            int32_t zb = bzp ? ld8(bzp, nb > 1 ? j : 0) : 0;
            for (size_t p = 0; p < s->k; p++)
                bcol[p] = ld8(b, ob + p * s->n + j) - zb;
            for (size_t i = 0; i < s->m; i++) {
                int32_t za = azp ? ld8(azp, na > 1 ? i : 0) : 0;
                int64_t sum = 0;
                for (size_t p = 0; p < s->k; p++)
                    sum += (int64_t)(ld8(a, oa + i * s->k + p) - za) * bcol[p];
                y[i * s->n + j] = (int32_t)(uint32_t)(uint64_t)sum; /* wraps like int32 hardware */
            }
        }
    }
    mem_free(bcol);
    return TDM_OK;
}

tdm_status op_run_MatMulInteger(op_ctx *ctx)
{
    const tdm_tensor *a = op_nn_in(ctx, 0), *b = op_nn_in(ctx, 1);
    const tdm_tensor *azp = op_nn_in(ctx, 2), *bzp = op_nn_in(ctx, 3);
    if (!a || !b)
        return op_fail(ctx, TDM_E_MODEL, "inputs A and B are required");
    if (!is_int8(a->dtype) || !is_int8(b->dtype) || (azp && azp->dtype != a->dtype) ||
        (bzp && bzp->dtype != b->dtype))
        return op_fail(ctx, TDM_E_RUNTIME, "A, B and their zero points must be int8 or uint8 (zero points matching)");
    mm_shape s;
    tdm_status st = mm_plan(ctx, a, b, &s);
    if (st)
        return st;
    st = op_out(ctx, 0, TDM_INT32, s.rank, s.dims);
    if (st)
        return st;
    return mm_int(ctx, &s, a, b, azp, bzp, ctx->out[0]->data);
}

/* Rounds half to even and saturates to the range of dt (int8 / uint8). */
static void store_q(tdm_tensor *y, size_t i, double v)
{
    v = nearbyint(v);
    if (y->dtype == TDM_UINT8) {
        v = v < 0 ? 0 : v > 255 ? 255 : v;
        ((uint8_t *)y->data)[i] = (uint8_t)v;
    } else {
        v = v < -128 ? -128 : v > 127 ? 127 : v;
        ((int8_t *)y->data)[i] = (int8_t)v;
    }
}

static double ldf(const tdm_tensor *t, size_t i) { return tensor_get_f64(t, i); }

tdm_status op_run_QLinearMatMul(op_ctx *ctx)
{
    const tdm_tensor *a = op_nn_in(ctx, 0), *as = op_nn_in(ctx, 1), *azp = op_nn_in(ctx, 2);
    const tdm_tensor *b = op_nn_in(ctx, 3), *bs = op_nn_in(ctx, 4), *bzp = op_nn_in(ctx, 5);
    const tdm_tensor *ys = op_nn_in(ctx, 6), *yzp = op_nn_in(ctx, 7);
    if (!a || !as || !azp || !b || !bs || !bzp || !ys || !yzp)
        return op_fail(ctx, TDM_E_MODEL, "QLinearMatMul needs all 8 inputs");
    if (!is_int8(a->dtype) || !is_int8(b->dtype) || !is_int8(yzp->dtype) || azp->dtype != a->dtype ||
        bzp->dtype != b->dtype)
        return op_fail(ctx, TDM_E_RUNTIME, "a, b, y and their zero points must be int8 or uint8");
    if (!dtype_is_float(as->dtype) || !dtype_is_float(bs->dtype) || !dtype_is_float(ys->dtype))
        return op_fail(ctx, TDM_E_RUNTIME, "the scales must be floating-point tensors");
    if (ys->count != 1 || yzp->count != 1)
        return op_fail(ctx, TDM_E_RUNTIME, "y_scale and y_zero_point must be scalars");
    mm_shape s;
    tdm_status st = mm_plan(ctx, a, b, &s);
    if (st)
        return st;
    size_t nas, nbs;
    if ((st = per_axis_len(ctx, as, s.m, "a_scale", &nas)) || (st = per_axis_len(ctx, bs, s.n, "b_scale", &nbs)))
        return st;
    size_t cnt;
    if (shape_count(s.rank, s.dims, &cnt))
        return op_fail(ctx, TDM_E_NOMEM, "the output is too large");
    int32_t *acc = mem_alloc(cnt * sizeof *acc + 1);
    if (!acc)
        return op_fail(ctx, TDM_E_NOMEM, "out of memory");
    st = mm_int(ctx, &s, a, b, azp, bzp, acc);
    if (!st)
        st = op_out(ctx, 0, yzp->dtype, s.rank, s.dims);
    if (!st) {
        tdm_tensor *y = ctx->out[0];
        double ysc = ldf(ys, 0), yz = ldf(yzp, 0);
        for (size_t bi = 0; bi < s.batches; bi++)
            for (size_t i = 0; i < s.m; i++)
                for (size_t j = 0; j < s.n; j++) {
                    size_t o = (bi * s.m + i) * s.n + j;
                    double sc = (double)(float)(ldf(as, nas > 1 ? i : 0) * ldf(bs, nbs > 1 ? j : 0) / ysc);
                    store_q(y, o, (double)acc[o] * sc + yz);
                }
    }
    mem_free(acc);
    return st;
}

/* ------------------------------------------------------------ infer hooks */

static void infer_matmul_as(op_infer_ctx *ctx, int ib, tdm_dtype dtype)
{
    const gr_type *a = ctx->n_in > 0 ? ctx->in[0] : NULL;
    const gr_type *b = ctx->n_in > ib ? ctx->in[ib] : NULL;
    gr_type *o = &ctx->out[0];
    o->kind = TDM_KIND_TENSOR;
    o->dtype = dtype;
    if (!a || !b || a->rank < 1 || b->rank < 1)
        return;
    gr_dim ad[TDM_MAX_RANK + 1], bd[TDM_MAX_RANK + 1];
    int ra = a->rank, rb = b->rank;
    memcpy(ad, a->dims, sizeof(gr_dim) * (size_t)ra);
    memcpy(bd, b->dims, sizeof(gr_dim) * (size_t)rb);
    if (ra == 1) {
        ad[1] = ad[0];
        ad[0] = (gr_dim){1, NULL};
        ra = 2;
    }
    if (rb == 1) {
        bd[1] = (gr_dim){1, NULL};
        rb = 2;
    }
    int nb = ra - 2 > rb - 2 ? ra - 2 : rb - 2;
    if (nb + 2 > TDM_MAX_RANK)
        return;
    int r = 0;
    for (int i = 0; i < nb; i++) {
        int xa = i - (nb - (ra - 2)), xb = i - (nb - (rb - 2));
        gr_dim da = xa >= 0 ? ad[xa] : (gr_dim){1, NULL};
        gr_dim db = xb >= 0 ? bd[xb] : (gr_dim){1, NULL};
        if (da.v == 1)
            o->dims[r++] = db;
        else if (db.v == 1)
            o->dims[r++] = da;
        else if (da.v >= 0)
            o->dims[r++] = da;
        else if (db.v >= 0)
            o->dims[r++] = db;
        else if (da.sym && db.sym && strcmp(da.sym, db.sym) == 0)
            o->dims[r++] = da;
        else
            o->dims[r++] = (gr_dim){-1, NULL};
    }
    if (a->rank > 1)
        o->dims[r++] = ad[ra - 2];
    if (b->rank > 1)
        o->dims[r++] = bd[rb - 1];
    o->rank = r;
}

tdm_status op_infer_MatMul(op_infer_ctx *ctx)
{
    infer_matmul_as(ctx, 1, ctx->n_in > 0 && ctx->in[0] ? ctx->in[0]->dtype : TDM_UNDEFINED);
    return TDM_OK;
}

tdm_status op_infer_MatMulInteger(op_infer_ctx *ctx)
{
    infer_matmul_as(ctx, 1, TDM_INT32);
    return TDM_OK;
}

tdm_status op_infer_QLinearMatMul(op_infer_ctx *ctx)
{
    infer_matmul_as(ctx, 3, ctx->n_in > 7 && ctx->in[7] ? ctx->in[7]->dtype : TDM_UNDEFINED);
    return TDM_OK;
}

tdm_status op_infer_Gemm(op_infer_ctx *ctx)
{
    const gr_type *a = ctx->n_in > 0 ? ctx->in[0] : NULL;
    const gr_type *b = ctx->n_in > 1 ? ctx->in[1] : NULL;
    gr_type *o = &ctx->out[0];
    o->kind = TDM_KIND_TENSOR;
    o->dtype = a ? a->dtype : TDM_UNDEFINED;
    if (!a || !b || a->rank != 2 || b->rank != 2)
        return TDM_OK;
    int ta = gr_attr_int(ctx->node, "transA", 0) != 0, tb = gr_attr_int(ctx->node, "transB", 0) != 0;
    o->rank = 2;
    o->dims[0] = a->dims[ta ? 1 : 0];
    o->dims[1] = b->dims[tb ? 0 : 1];
    return TDM_OK;
}
