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

/* A float32 product C = fuse(act(alpha * op(A) * op(B) + beta * C + bias)),
 * row-major, op(X) = X or X^T; op(A) is M x K, op(B) K x N, C M x N.
 * lda/ldb/ldc are row strides in elements as stored. When beta == 0, C is
 * written without being read. */
typedef struct op_gemm op_gemm;

/* The packed layout of the GEMM's operands for a given K (op_sgemm_layout):
 * K is cut into blocks of kc rows (the last one kcb = K - p0 may be
 * shorter). A K x N operand B: block b (rows p0 = b * kc up to p0 + kcb)
 * starts at element p0 * Npad, Npad = N rounded up to nr; in it, column
 * panel q starts at q * kcb * nr and holds element (p, j) at
 * (p - p0) * nr + (j - q * nr). A (M x K) likewise with mr-row panels:
 * block b at p0 * Mpad, panel i at i * kcb * mr, element (r, p) at
 * (p - p0) * mr + (r - i * mr). Padding is zero. */
typedef struct op_gemm_layout {
    size_t kc, mr, nr;
} op_gemm_layout;
op_gemm_layout op_sgemm_layout(size_t k);

/* Fills panel q (nr columns from column j0 + q * nr of op(B)) of a packed
 * chunk of B (columns [j0, j0 + ncols), npad = ncols rounded up to nr,
 * layout of lay) at dst, the chunk's start. Called from pool workers, on
 * disjoint panels at once. */
typedef void (*op_gemm_pack_fn)(const void *arg, op_gemm_layout lay, size_t j0, size_t ncols, size_t npad, size_t q,
                                float *dst);

struct op_gemm {
    int trans_a, trans_b;
    size_t m, n, k;
    float alpha;
    const float *a;
    size_t lda;
    const float *apack;   /* (optional) alpha op(A) already packed (op_sgemm_pack_a); a and alpha unused then */
    const float *b;       /* op(B), unless bpack or pack_b is set */
    size_t ldb;
    const float *bpack;   /* (optional) op(B) already packed in the layout, all N columns */
    op_gemm_pack_fn pack_b; /* (optional) packs panels of op(B) on demand (Conv's im2col) */
    const void *pack_b_arg;
    float beta;
    float *c;
    size_t ldc;
    const float *bias;    /* (optional) M values, bias[i] added to row i */
    op_act act;           /* applied after the bias */
    /* (optional) applied last: fuse_fn (op_fuse_apply when NULL) on each
     * row piece of C, with flat index fuse_at + i * ldc + j for C[i][j],
     * exactly once per element, from the worker threads. */
    const op_fuse *fuse;
    size_t fuse_at;
    void (*fuse_fn)(const op_fuse *f, float *y, size_t at, size_t n);
    int threads;          /* worker threads (core/pool.h); the result does not depend on it */
};

/* Cache-blocked, packed, multi-threaded; AVX2/FMA micro-kernel chosen at
 * run time when the CPU has it, else a portable one. The one float32 GEMM
 * of tandem. Returns 0, or -1 when the packing buffers cannot be
 * allocated (C is then unspecified). */
int op_sgemm_run(const op_gemm *g);

/* Floats of alpha op(A) packed for g's M and K (0 on overflow), and the
 * packing itself (g->a, lda, trans_a, alpha, m, k) into dst. */
size_t op_sgemm_pack_a_floats(const op_gemm *g);
void op_sgemm_pack_a(const op_gemm *g, float *dst);
/* Likewise op(B), all N columns (g->b, ldb, trans_b, n, k). */
size_t op_sgemm_pack_b_floats(const op_gemm *g);
void op_sgemm_pack_b(const op_gemm *g, float *dst);
/* The same, K block by K block: after each, done (may be NULL) is given
 * the rows of B just packed (not for trans_b) and arg. */
void op_sgemm_pack_b_rows(const op_gemm *g, float *dst, void (*done)(void *arg, const float *rows, size_t floats),
                          void *arg);

/* The packed form of constant input `input` of ctx's node (a graph
 * initializer, see tensor_aux): found under key, or made by fill(arg, src,
 * dst) into `floats` floats and attached. src is the input's data: with
 * `as_bytes`, where they lie (maybe misaligned in the model's file: fill
 * reads them with memcpy), else aligned for loading its elements (a
 * temporary copy when they lie misaligned, core/tensor.h
 * tensor_read_aligned); either way a weight only a packer reads is never
 * copied for good. NULL when the input is not an initializer or memory is
 * short: the caller packs for this call then. */
const float *op_nn_packed_const(const op_ctx *ctx, int input, uint64_t key, size_t floats,
                                void (*fill)(const void *arg, const void *src, float *dst), const void *arg,
                                int as_bytes);
/* The float32 data p of input `input` of ctx's node (-1: p is a converted
 * copy, returned as it is) aligned for loading, for a kernel that reads
 * the elements of an input op_run left where it lies (ops/node_ctx.c
 * kernel_aligns): the aligned copy is kept with the input
 * (core/tensor.h tensor_align). NULL when out of memory. */
const float *op_nn_loadable(const op_ctx *ctx, int input, const float *p);
/* A key for op_nn_packed_const from the numbers that define a form. */
uint64_t op_nn_pack_key(const uint64_t *v, size_t n);

/* op_sgemm_run on one thread, no bias, no activation. */
int op_sgemm(int trans_a, int trans_b, size_t m, size_t n, size_t k, float alpha, const float *a, size_t lda,
             const float *b, size_t ldb, float beta, float *c, size_t ldc);

/* "avx512 12x16", "avx2-fma 6x16" or "portable": the micro-kernel op_sgemm_run uses. */
const char *op_sgemm_kernel_name(void);

/* The instruction set of the CPU kernels (ops/isa.c): the best the CPU and
 * the OS support, or the one the environment's TANDEM_ISA names
 * (portable, avx2, avx512). op_isa_error: NULL, or the sentence saying why
 * TANDEM_ISA is refused (an unknown word, or more than the CPU supports;
 * the kernels then use the best one). */
enum { OP_ISA_PORTABLE = 0, OP_ISA_AVX2 = 1, OP_ISA_AVX512 = 2 };
int op_isa_level(void);
const char *op_isa_error(void);
const char *op_isa_name(void);

/* The AVX2/FMA kernels (ops/gemm_avx2.c); cpu() checks the CPU and the OS,
 * usable() also that op_isa_level() allows them. */
int gemm_avx2_cpu(void);
int gemm_avx2_usable(void);
/* The AVX-512 GEMM kernels (ops/gemm_avx512.c), the AVX2 ones' signatures
 * and layout (6 x 16 tiles of 6-row A panels and 16-column B panels):
 * strips computes two row panels at a time; narrow takes 1 to 15 columns
 * (1 to 4 as column sums over 8 row panels at a time, more as 8- or
 * 16-column tiles of the zero-padded packed panel, stored masked).
 * cpu() checks the CPU (F, DQ, VL) and the OS (XCR0), usable() also that
 * op_isa_level() allows them. */
int gemm_avx512_cpu(void);
int gemm_avx512_usable(void);
void gemm_ukr_avx512_bias(size_t kc, const float *a, const float *b, float *c, size_t ldc, int add, const float *bias);
void gemm_ukr_avx512_rows_bias(size_t kc, const float *a, size_t lda, const float *b, float *c, size_t ldc, int add,
                               const float *bias);
void gemm_ukr_avx512_bs(size_t kc, const float *a, const float *b, size_t ldb, float *c, size_t ldc, int add,
                        const float *bias, const float *clamp);
void gemm_ukr_avx512_strips(size_t kc, const float *a, size_t np, const float *b, size_t ldb, float *c, size_t ldc,
                            int add, const float *bias, const float *clamp);
void gemm_ukr_avx512_bs_rows(size_t kc, const float *a, const float *b, size_t ldb, float *c, size_t ldc, int add,
                             const float *bias, const float *clamp, size_t rows);
void gemm_ukr_avx512_rows_act(size_t kc, const float *a, size_t lda, const float *b, float *c, size_t ldc, int add,
                              const float *bias, const float *clamp);
void gemm_ukr_avx512_narrow(size_t kc, const float *a, size_t np, const float *b, size_t cols, float *c, size_t ldc,
                            size_t rows, int add, const float *bias);
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
/* The 6 x 8 variant for a last panel of at most 8 columns: reads the first
 * 8 columns of each 16-wide packed step of b. */
void gemm_ukr_avx2_6x8_bias(size_t kc, const float *a, const float *b, float *c, size_t ldc, int add,
                            const float *bias);
/* A last panel of 1 to 4 columns, A packed: the first cols columns of np
 * consecutive packed row panels (kc steps each) times the b-panel, rows of
 * them (rows <= 6 np) stored into c as gemm_ukr_avx2_bias does, with the
 * same sums in the same order (so the same values): several row panels at
 * once make independent FMA chains, where the 6 x 8 kernel would wait on
 * each chain and compute 8 columns. */
void gemm_ukr_avx2_narrow(size_t kc, const float *a, size_t np, const float *b, size_t cols, float *c, size_t ldc,
                          size_t rows, int add, const float *bias);
/* The im2col of a 2-D float32 Conv with strides 1 and output rows as wide
 * as the input rows (OW == W), group planes at x, kernel kh x kw (each at
 * most OP_IM2COL_MAX_K), dilations dh, dw, top/left pads pt, pl, input
 * h x w: gemm_im2col_s1_avx2 writes panel q (16 columns from output index
 * j, cols of them real, the rest zero) of the GEMM's packed B layout (kc,
 * all kk = cg * kh * kw rows, npad columns in the chunk) at dst, the
 * chunk's start (ops/gemm_avx2_im2col.c). */
#define OP_IM2COL_MAX_K 16
typedef struct op_im2col_s1 {
    const float *x;
    size_t in_sz, cg;
    int64_t kh, kw, dh, dw, pt, pl, h, w;
} op_im2col_s1;
void gemm_im2col_s1_avx2(const op_im2col_s1 *c, size_t j, size_t cols, float *dst, size_t kc, size_t kk,
                         size_t npad, size_t q);
/* The same for any strides sh, sw and output width ow (a 2-D Conv whose
 * input plane has fewer than 2^31 elements), by masked gathers. */
typedef struct op_im2col {
    const float *x;
    size_t in_sz, cg;
    int64_t kh, kw, sh, sw, dh, dw, pt, pl, h, w, ow;
} op_im2col;
void gemm_im2col_avx2(const op_im2col *c, size_t j, size_t cols, float *dst, size_t kc, size_t kk, size_t npad,
                      size_t q);
/* sum over p < k of a[p] b[p], in a fixed order of 32 partial sums. */
float gemm_dot_avx2(const float *a, const float *b, size_t k);
/* Depthwise kh x kw (both 1 to 7), dilation 1, strides sh, sw in {1, 2}
 * (dwconv_avx2.c): the output plane y (oh x ow) of the input plane x
 * (h x w) with top/left pads pt, pl (everything outside x reads zero) and
 * kernel k[kh * kw], started at bias, taps in order, then clamped to
 * [lo, hi] when clamp is set (NaN stays NaN). pad is scratch of
 * dw_pad_floats(...) floats (0 when that overflows or oh or ow is 0).
 * When post is set, post(post_ctx, y + off, off, n) is called once for
 * every output, in order, on blocks of whole rows just computed. */
typedef void (*dw_post_fn)(void *ctx, float *y, size_t off, size_t n);
size_t dw_pad_floats(size_t oh, size_t ow, int kh, int kw, int sh, int sw);
void dw_plane_avx2(const float *x, size_t h, size_t w, float *y, size_t oh, size_t ow, int kh, int kw, int sh,
                   int sw, size_t pt, size_t pl, const float *k, float bias, int clamp, float lo, float hi, float *pad,
                   dw_post_fn post, void *post_ctx);
/* A small depthwise plane computed flat (dwconv_avx2.c): as dw_plane_avx2
 * (clamp included) without post, for strides sh == sw in {1, 2}: the
 * padded plane (as 4 sub-planes of even/odd rows and columns at stride 2)
 * is copied whole, then every output of it, borders or not, is one
 * multiply-add per tap on 8 consecutive outputs of the padded plane's rows
 * laid end to end, whose extra columns are dropped as the rows are stored.
 * buf is scratch of dw_flat_floats(...) floats (0 when not supported). */
size_t dw_flat_floats(size_t oh, size_t ow, int kh, int kw, int sh, int sw);
void dw_flat_avx2(const float *x, size_t h, size_t w, float *y, size_t oh, size_t ow, int kh, int kw, int sh,
                  int sw, size_t pt, size_t pl, const float *k, float bias, int clamp, float lo, float hi, float *buf);
/* 8 such planes (dw_flat_avx2) as dw_planes8_avx2 does them (same
 * arguments), two at a time in turn; buf of dw_flat8_floats(...) floats. */
size_t dw_flat8_floats(size_t oh, size_t ow, int kh, int kw, int sh, int sw);
void dw_flat8_avx2(const float *const *x, size_t h, size_t w, float *y, size_t oh, size_t ow, int kh, int kw,
                   int sh, int sw, size_t pt, size_t pl, const float *const *k, const float *bias, int clamp,
                   float lo, float hi, float *buf);
/* 8 small depthwise planes at once, channels across the vector
 * (dwconv_avx2.c): output plane ch (ch < 8) at y + ch * oh * ow of input
 * plane x[ch], kernel k[ch], bias[ch], as dw_plane_avx2 (clamp included)
 * without post; buf is scratch of dw8_floats(...) floats (0 when too
 * large). */
size_t dw8_floats(size_t oh, size_t ow, int kh, int kw, int sh, int sw);
void dw_planes8_avx2(const float *const *x, size_t h, size_t w, float *y, size_t oh, size_t ow, int kh, int kw,
                     int sh, int sw, size_t pt, size_t pl, const float *const *k, const float *bias, int clamp,
                     float lo, float hi, float *buf);

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

/* The spatial sizes and output shape from p->g, p->n and p->m (nn_conv.c;
 * shared by Conv's and ConvTranspose's preparation). */
void op_nn_conv_plan_sizes(conv_plan *p, int nsp);

/* A float32 convolution kernel (Conv's conv_f32, ConvTranspose's
 * convt_f32): w_in is the node's input holding w, or -1 for a copy. */
typedef tdm_status (*op_nn_conv_f32_fn)(op_ctx *ctx, const conv_plan *p, const float *x, const float *w, int w_in,
                                        const float *bias, float *y);
/* Runs fn on float32 copies of x, w and b (b may be NULL) and writes its
 * result into y converted to y's element type (nn_util.c). */
tdm_status op_nn_conv_via_f32(op_ctx *ctx, const conv_plan *p, const tdm_tensor *x, const tdm_tensor *w,
                              const tdm_tensor *b, tdm_tensor *y, op_nn_conv_f32_fn fn);

/* Geometry of ConvTranspose (nn_convt.c); works on known or unknown (-1)
 * input sizes (e may be NULL for infer hooks). */
tdm_status op_nn_convt_geom(tdm_err *e, const gr_node *node, int nsp, const int64_t *in, const int64_t *kernel,
                            nn_geom *g);

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

/* ---- Winograd convolution F(4x4, 3x3) and F(2x2, 3x3) (ops/nn_winograd.c) ---- */

/* Whether op_conv_winograd_f32 takes the float32 Conv p: ctx->fast, 2-D,
 * kernel 3x3, strides and dilations 1, one group, and large enough to pay. */
int op_conv_winograd_ok(const op_ctx *ctx, const conv_plan *p);
/* The output tile (4: F(4x4, 3x3), 2: F(2x2, 3x3)) op_conv_winograd_f32
 * uses for p when the session runs fused, or 0 when it takes direct or
 * im2col convolution there (what the planner's cpu estimates price). */
int op_conv_winograd_tile(const conv_plan *p);
/* y = fuse(conv(x, w) + bias) by Winograd; w_in as conv_f32's (nn_conv.c). */
tdm_status op_conv_winograd_f32(op_ctx *ctx, const conv_plan *p, const float *x, const float *w, int w_in,
                                const float *bias, float *y);
/* The input transform of 8 tiles of one channel (ops/conv_wino_avx2.c):
 * the 6x6 patch of lane k has its rows ld apart from s + off[k] (zero
 * padding already in place); B^T d B of lane k goes to dst[xi * xs + k]
 * for the 36 positions xi. */
void wino_in43_avx2(const float *s, const int32_t *off, size_t ld, float *dst, size_t xs);
/* The output transform of 8 tiles: A^T m A + bias of the 36 positions at
 * m + xi * xs (8 consecutive tiles each) into out[8][16] (tile k, pixel
 * a * 4 + b). */
void wino_out43_avx2(const float *m, size_t xs, float bias, float *out);
/* The same for F(2x2, 3x3): 4x4 patches, 16 positions, out[8][4]. */
void wino_in23_avx2(const float *s, const int32_t *off, size_t ld, float *dst, size_t xs);
void wino_out23_avx2(const float *m, size_t xs, float bias, float *out);

/* The 6 x 16 GEMM micro-kernel of gemm_ukr_avx2_bias with the rows of
 * the b-panel at stride ldb (16 packed, or op(B) read in place), and of
 * gemm_ukr_avx2_rows_bias; when clamp is set, each value v is stored as
 * min(clamp[1], max(clamp[0], v)) after the bias or the addition to c, NaN
 * kept (Relu / Clip as op_act_apply computes them) (ops/gemm_avx2.c). */
void gemm_ukr_avx2_bs(size_t kc, const float *a, const float *b, size_t ldb, float *c, size_t ldc, int add,
                      const float *bias, const float *clamp);
void gemm_ukr_avx2_rows_act(size_t kc, const float *a, size_t lda, const float *b, float *c, size_t ldc, int add,
                            const float *bias, const float *clamp);
/* gemm_ukr_avx2_bs on np full row panels of A packed one after the other
 * (kc * 6 floats each): c rows and bias values 6 i on for panel i. */
void gemm_ukr_avx2_strips(size_t kc, const float *a, size_t np, const float *b, size_t ldb, float *c, size_t ldc,
                          int add, const float *bias, const float *clamp);
/* gemm_ukr_avx2_bs for a partial row panel: rows (1 to 6) of c stored or
 * added to, the others neither read nor written (bias: 6 values). */
void gemm_ukr_avx2_bs_rows(size_t kc, const float *a, const float *b, size_t ldb, float *c, size_t ldc, int add,
                           const float *bias, const float *clamp, size_t rows);

/* ---- direct convolution for few input channels (ops/nn_conv_direct.c) ---- */

/* Whether op_conv_direct_f32 takes the float32 Conv p: AVX2, 2-D, one
 * group, at most 4 input channels, kernel up to 7x7, strides 1 or 2,
 * dilations 1, and a shape where it measured faster than im2col + GEMM.
 * It sums in the GEMM's order (c, kh, kw ascending, then the bias), so its
 * results are identical to the im2col path's: ctx->fast is not needed. */
int op_conv_direct_ok(const op_ctx *ctx, const conv_plan *p);
/* y = fuse(conv(x, w) + bias), directly; w_in as conv_f32's (nn_conv.c). */
tdm_status op_conv_direct_f32(op_ctx *ctx, const conv_plan *p, const float *x, const float *w, int w_in,
                              const float *bias, float *y);
/* 4 output channels x 24 output pixels (ops/conv_direct_avx2.c): y[i][j] =
 * clamp(sum_t w[4 t + i] src[t][off + j] + bias[i]) for j < nvalid (<= 24),
 * taps t in order; y[i] NULL: not stored; bias, clamp ({lo, hi}) optional.
 * src[t] + off must hold 24 readable floats. */
void conv_direct_tile_avx2(size_t ntaps, const float *const *src, size_t off, const float *w, float *const *y,
                           size_t nvalid, const float *bias, const float *clamp);
/* even[i] = p[2 i], odd[i] = p[2 i + 1] for i < n (a multiple of 8). */
void conv_direct_split_avx2(const float *p, size_t n, float *even, float *odd);

/* ---- Attention, RotaryEmbedding (ops/nn_attention.c) ---- */
tdm_status op_run_Attention(op_ctx *ctx);
tdm_status op_infer_Attention(op_infer_ctx *ctx);
tdm_status op_run_RotaryEmbedding(op_ctx *ctx);
tdm_status op_run_AffineGrid(op_ctx *ctx);
tdm_status op_run_Col2Im(op_ctx *ctx);
tdm_status op_infer_AffineGrid(op_infer_ctx *ctx);
tdm_status op_infer_Col2Im(op_infer_ctx *ctx);
/* nn_deform.c */
tdm_status op_run_DeformConv(op_ctx *ctx);
tdm_status op_infer_DeformConv(op_infer_ctx *ctx);

#endif
