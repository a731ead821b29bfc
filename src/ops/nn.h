/* Run and infer hooks of the nn ops (see ops.def), the single-precision
 * GEMM every float32 Conv/MatMul/Gemm goes through, and the helpers the
 * nn_*.c files share. */
#ifndef TDM_OPS_NN_H
#define TDM_OPS_NN_H

#include "ops/op.h"

#include <stddef.h>
#include <stdint.h>

/* ---- GEMM (ops/nn_gemm.c) ---- */

void op_act_apply(const op_act *act, float *x, size_t n);

/* Reads the fused activation recorded on a Conv node by the graph
 * optimiser (string attribute "tandem_fused_act": "Relu", "Clip",
 * "LeakyRelu", "HardSigmoid" or "HardSwish"; float attributes
 * "tandem_fused_alpha" / "tandem_fused_beta" hold the parameters, see
 * graph/optimize.c). OP_ACT_NONE when absent; fails on an unknown name. */
tdm_status op_nn_fused_act(op_ctx *ctx, op_act *act);

/* A float32 product C = act(alpha * op(A) * op(B) + beta * C + bias),
 * row-major, op(X) = X or X^T; op(A) is M x K, op(B) K x N, C M x N.
 * lda/ldb/ldc are row strides in elements as stored. When beta == 0, C is
 * written without being read. */
typedef struct op_gemm {
    int trans_a, trans_b;
    size_t m, n, k;
    float alpha;
    const float *a;
    size_t lda;
    const float *b;       /* op(B), unless bpack is set */
    size_t ldb;
    const float *bpack;   /* (optional) op(B) already packed in op_sgemm_layout()'s layout, all N columns */
    float beta;
    float *c;
    size_t ldc;
    const float *bias;    /* (optional) M values, bias[i] added to row i */
    op_act act;           /* applied last */
    int threads;          /* worker threads (core/pool.h); the result does not depend on it */
} op_gemm;

/* The packed layout of a K x N operand B: K block b holds rows p0 = b * kc
 * up to p0 + kcb (kcb = min(kc, K - p0)) and starts at element p0 * Npad,
 * Npad = N rounded up to nr; in it, column panel q starts at q * kcb * nr
 * and holds element (p, j) at (p - p0) * nr + (j - q * nr); padding zero. */
typedef struct op_gemm_layout {
    size_t kc, nr;
} op_gemm_layout;
op_gemm_layout op_sgemm_layout(void);

/* Cache-blocked, packed, multi-threaded; AVX2/FMA micro-kernel chosen at
 * run time when the CPU has it, else a portable one. The one float32 GEMM
 * of tandem. Returns 0, or -1 when the packing buffers cannot be
 * allocated (C is then unspecified). */
int op_sgemm_run(const op_gemm *g);

/* op_sgemm_run on one thread, no bias, no activation. */
int op_sgemm(int trans_a, int trans_b, size_t m, size_t n, size_t k, float alpha, const float *a, size_t lda,
             const float *b, size_t ldb, float beta, float *c, size_t ldc);

/* "avx2-fma 6x16" or "portable": the micro-kernel op_sgemm_run uses. */
const char *op_sgemm_kernel_name(void);

/* The AVX2/FMA kernels (ops/gemm_avx2.c); usable() checks the CPU and the OS. */
int gemm_avx2_usable(void);
/* Depthwise row (see nn_conv.c): dst[i] += sum_t w[t] * src[t][i * stride]
 * for i < n, taps in order, stride 1 or 2 vectorised. */
void dw_row_avx2(float *dst, size_t n, const float *const *src, const float *w, int ntaps, int stride);
/* The GEMM micro-kernel: a 6 x 16 tile over kc packed steps, stored into c
 * (row stride ldc), or added to c's values when add is set; when add == 0
 * and bias is set, bias[r] (r < 6) is added to tile row r after the sum,
 * before the store. The _rows variant reads A unpacked: row i of the tile at
 * a + i * lda. */
void gemm_ukr_avx2_bias(size_t kc, const float *a, const float *b, float *c, size_t ldc, int add, const float *bias);
void gemm_ukr_avx2_rows_bias(size_t kc, const float *a, size_t lda, const float *b, float *c, size_t ldc, int add,
                             const float *bias);
/* sum over p < k of a[p] b[p], in a fixed order of 32 partial sums. */
float gemm_dot_avx2(const float *a, const float *b, size_t k);
/* Depthwise kh x kw (both 1 to 7), dilation 1, strides sh, sw in {1, 2}
 * (gemm_avx2_dw.c): the output plane y (oh x ow) of the input plane x
 * (h x w) with top/left pads pt, pl (everything outside x reads zero) and
 * kernel k[kh * kw], started at bias, taps in order, then clamped to
 * [lo, hi] when clamp is set (NaN stays NaN). pad is scratch of
 * dw_pad_floats(...) floats (0 when that overflows or oh or ow is 0). */
size_t dw_pad_floats(size_t oh, size_t ow, int kh, int kw, int sh, int sw);
void dw_plane_avx2(const float *x, size_t h, size_t w, float *y, size_t oh, size_t ow, int kh, int kw, int sh,
                   int sw, size_t pt, size_t pl, const float *k, float bias, int clamp, float lo, float hi, float *pad);

/* ---- helpers shared by the nn files (ops/nn_util.c) ---- */

/* Input i, or NULL when omitted or beyond the node's inputs. */
const tdm_tensor *op_nn_in(const op_ctx *ctx, int i);

/* A float copy of a float/double/float16/bfloat16 (or integer) tensor's
 * data (count elements), allocated with mem_alloc; NULL on out of memory. */
float *op_nn_to_f32(const tdm_tensor *t);
/* Writes count floats into t's data converted to its element type. */
void op_nn_from_f32(tdm_tensor *t, const float *src);

/* Geometry of a convolution or pooling window over up to 3 spatial dims,
 * stored right-aligned in 3 slots (a 1-D op has d = h = 1). */
#define NN_MAX_SP 3
typedef struct nn_geom {
    int nsp;                  /* spatial rank as in the model (1..3) */
    int64_t in[NN_MAX_SP];    /* input spatial size (-1 unknown, infer only) */
    int64_t k[NN_MAX_SP];     /* kernel */
    int64_t s[NN_MAX_SP];     /* strides */
    int64_t d[NN_MAX_SP];     /* dilations */
    int64_t pb[NN_MAX_SP];    /* pads at the beginning */
    int64_t pe[NN_MAX_SP];    /* pads at the end */
    int64_t out[NN_MAX_SP];   /* output spatial size (-1 unknown) */
} nn_geom;

/* Input checks and geometry shared by Conv, ConvInteger, QLinearConv and
 * ConvTranspose. */
typedef struct conv_plan {
    nn_geom g;
    int64_t n, c, m, group, cg, mg;
    size_t in_sz, out_sz, k_sz; /* spatial element counts */
    int64_t ydims[2 + NN_MAX_SP];
    int yrank;
} conv_plan;

/* The depthwise float32 Conv (nn_dwconv.c): cg == 1, mg <= 4, group > 1;
 * y = act(conv(x, w) + bias). */
tdm_status op_conv_depthwise_f32(op_ctx *ctx, const conv_plan *p, const float *x, const float *w, const float *bias,
                                 const op_act *act, float *y);

/* Fills g from the node's kernel_shape (or kernel, when kernel != NULL and
 * the attribute is absent), strides, dilations (when use_dil), pads,
 * auto_pad and (when use_ceil) ceil_mode, for spatial input sizes in[nsp]
 * (-1 = unknown). Output sizes follow the Conv/pool rules. Fails with a
 * sentence naming the attribute. e may be NULL (infer hooks). */
tdm_status op_nn_geom(tdm_err *e, const gr_node *node, int nsp, const int64_t *in, const int64_t *kernel,
                      int use_dil, int use_ceil, nn_geom *g);

/* Element i of an int8 or uint8 tensor (quantized ops; the inner loops need
 * this narrower, inlined form of tensor_get_i64). */
static inline int32_t nn_ld8(const tdm_tensor *t, size_t i)
{
    return t->dtype == TDM_INT8 ? (int32_t)((const int8_t *)t->data)[i] : (int32_t)((const uint8_t *)t->data)[i];
}

/* The first and one-past-last i in [0, n) for which i * s + c lies in
 * [0, lim): output positions of a tap (s = stride) or taps of an output
 * position (s = dilation). Inline: called per row in the window loops. */
static inline void nn_index_range(int64_t n, int64_t lim, int64_t s, int64_t c, int64_t *lo, int64_t *hi)
{
    /* i >= ceil(-c / s) and i <= floor((lim - 1 - c) / s) */
    int64_t l = -c <= 0 ? 0 : (-c + s - 1) / s;
    int64_t top = lim - 1 - c;
    int64_t h = top < 0 ? 0 : top / s + 1;
    if (l > n)
        l = n;
    if (h > n)
        h = n;
    if (h < l)
        h = l;
    *lo = l;
    *hi = h;
}

/* ---- run hooks ---- */

tdm_status op_run_MatMul(op_ctx *ctx);
tdm_status op_run_Gemm(op_ctx *ctx);
tdm_status op_run_MatMulInteger(op_ctx *ctx);
tdm_status op_run_QLinearMatMul(op_ctx *ctx);

tdm_status op_run_Conv(op_ctx *ctx);
tdm_status op_run_ConvTranspose(op_ctx *ctx);
tdm_status op_run_ConvInteger(op_ctx *ctx);
tdm_status op_run_QLinearConv(op_ctx *ctx);

tdm_status op_run_MaxPool(op_ctx *ctx);
tdm_status op_run_AveragePool(op_ctx *ctx);
tdm_status op_run_LpPool(op_ctx *ctx);
tdm_status op_run_GlobalAveragePool(op_ctx *ctx);
tdm_status op_run_GlobalMaxPool(op_ctx *ctx);
tdm_status op_run_GlobalLpPool(op_ctx *ctx);
tdm_status op_run_MaxUnpool(op_ctx *ctx);
tdm_status op_run_MaxRoiPool(op_ctx *ctx);
tdm_status op_run_RoiAlign(op_ctx *ctx);

tdm_status op_run_QuantizeLinear(op_ctx *ctx);
tdm_status op_run_DequantizeLinear(op_ctx *ctx);
tdm_status op_run_DynamicQuantizeLinear(op_ctx *ctx);

tdm_status op_run_RNN(op_ctx *ctx);
tdm_status op_run_GRU(op_ctx *ctx);
tdm_status op_run_LSTM(op_ctx *ctx);

tdm_status op_run_GridSample(op_ctx *ctx);
tdm_status op_run_NonMaxSuppression(op_ctx *ctx);

/* ---- infer hooks ---- */

tdm_status op_infer_MatMul(op_infer_ctx *ctx);
tdm_status op_infer_Gemm(op_infer_ctx *ctx);
tdm_status op_infer_MatMulInteger(op_infer_ctx *ctx);
tdm_status op_infer_QLinearMatMul(op_infer_ctx *ctx);
tdm_status op_infer_Conv(op_infer_ctx *ctx);
tdm_status op_infer_ConvTranspose(op_infer_ctx *ctx);
tdm_status op_infer_ConvInteger(op_infer_ctx *ctx);
tdm_status op_infer_QLinearConv(op_infer_ctx *ctx);
tdm_status op_infer_Pool(op_infer_ctx *ctx);        /* MaxPool, AveragePool, LpPool */
tdm_status op_infer_GlobalPool(op_infer_ctx *ctx);  /* Global*Pool */
tdm_status op_infer_QuantizeLinear(op_infer_ctx *ctx);
tdm_status op_infer_DequantizeLinear(op_infer_ctx *ctx);
tdm_status op_infer_DynamicQuantizeLinear(op_infer_ctx *ctx);
tdm_status op_infer_GridSample(op_infer_ctx *ctx);
tdm_status op_infer_RoiAlign(op_infer_ctx *ctx);

#endif
