/* Run and infer hooks of the elementwise ops (see elementwise.def), and the
 * type-conversion helpers their kernels share. */
#ifndef TDM_OPS_ELEMENTWISE_H
#define TDM_OPS_ELEMENTWISE_H

#include "ops/op.h"

/* ---- shared by the elementwise kernels (elementwise_cast.c) ---- */

/* The type a kernel computes in: float32, float16 and bfloat16 in float;
 * double in double; signed integers and bool in int64; unsigned in uint64. */
typedef enum op_ew_ct { EW_F32, EW_F64, EW_I64, EW_U64 } op_ew_ct;

op_ew_ct op_ew_ctype(tdm_dtype dt);
size_t op_ew_ct_size(op_ew_ct ct);
/* Converts n numeric or bool elements starting at element off of src (of
 * type sdt) into dst of compute type ct. Float to integer conversions
 * truncate toward zero and saturate (NaN gives 0). */
void op_ew_load(const void *src, tdm_dtype sdt, size_t off, size_t n, op_ew_ct ct, void *dst);
/* Converts n elements of compute type ct into dst (of type ddt) from
 * element off on. Narrower integers wrap; bool is value != 0. */
void op_ew_store(const void *src, op_ew_ct ct, void *dst, tdm_dtype ddt, size_t off, size_t n);
/* Whole-tensor conversion into a new buffer of compute type ct (mem_free),
 * or NULL on out of memory. */
void *op_ew_to_ct(const tdm_tensor *t, op_ew_ct ct);

/* ---- AVX2 + FMA loops (elementwise_avx2.c; call only when
 * gemm_avx2_usable() in ops/nn.h returns 1) ---- */

/* y[i] = Sigmoid(x[i]) for i < n, the algorithm of the portable float
 * loop (relative error below 2e-7); x == y allowed. */
void op_ew_sigmoid_avx2(const float *x, float *y, size_t n);
/* y[i] = erf(x[i]) for i < n by a rational approximation (error within a
 * few float ulps); x == y allowed. */
void op_ew_erf_avx2(const float *x, float *y, size_t n);
/* y[i] = exp(x[i] - m) for i < n (about 1 ulp; 0 below -87.33, where
 * the float result would be denormal); x == y allowed. */
void op_ew_exp_shift_avx2(const float *x, float *y, size_t n, float m);
/* The largest of x[0..n), n >= 1, by the test x[i] > m from m = x[0]. */
float op_ew_max_avx2(const float *x, size_t n);
/* One Softmax row: y = exp(x - max) / sum, the sum in double (8 partial
 * sums), the division as one multiplication by the float reciprocal. */
void op_ew_softmax_row_avx2(const float *x, float *y, size_t n);
/* Mean and (population) variance of x[0..n) in double, 8 partial sums. */
void op_ew_stats_avx2(const float *x, size_t n, double *mean, double *var);

/* Binary float32 loops (elementwise_binary_avx2.c): o[i] = a[i] op b[i]
 * for i < n, where a stride flag of 0 holds the operand at element 0; the
 * portable kernel's exact per-element result. Returns 0 (nothing done) for
 * an op it does not have. */
enum { EW_BIN_ADD, EW_BIN_SUB, EW_BIN_MUL, EW_BIN_DIV, EW_BIN_MAX, EW_BIN_MIN };
int op_ew_binary_f32_avx2(int op, const float *a, int sa, const float *b, int sb, float *o, size_t n);
/* Relu (v < 0 ? 0 : v) and Clip (v < lo ? lo : v, then v > hi ? hi : v)
 * of n floats, as the portable loops; x == y allowed. */
void op_ew_relu_avx2(const float *x, float *y, size_t n);
void op_ew_clip_avx2(const float *x, float *y, size_t n, float lo, float hi);
/* y[i] = (x[i] - m) * s * g[i] + b[i] (LayerNormalization's row; the last
 * step may be fused into one rounding). */
void op_ew_norm_row_avx2(const float *x, float *y, size_t n, float m, float s, const float *g, const float *b);
/* y[i] = x[i] * a + b (may be fused into one rounding); x == y allowed. */
void op_ew_affine_avx2(const float *x, float *y, size_t n, float a, float b);

/* ---- unary math and activations (elementwise_unary.c) ---- */
tdm_status op_run_Abs(op_ctx *ctx);
tdm_status op_run_Neg(op_ctx *ctx);
tdm_status op_run_Exp(op_ctx *ctx);
tdm_status op_run_Log(op_ctx *ctx);
tdm_status op_run_Sqrt(op_ctx *ctx);
tdm_status op_run_Reciprocal(op_ctx *ctx);
tdm_status op_run_Floor(op_ctx *ctx);
tdm_status op_run_Ceil(op_ctx *ctx);
tdm_status op_run_Round(op_ctx *ctx);
tdm_status op_run_Sign(op_ctx *ctx);
tdm_status op_run_Erf(op_ctx *ctx);
tdm_status op_run_Sin(op_ctx *ctx);
tdm_status op_run_Cos(op_ctx *ctx);
tdm_status op_run_Tan(op_ctx *ctx);
tdm_status op_run_Asin(op_ctx *ctx);
tdm_status op_run_Acos(op_ctx *ctx);
tdm_status op_run_Atan(op_ctx *ctx);
tdm_status op_run_Sinh(op_ctx *ctx);
tdm_status op_run_Cosh(op_ctx *ctx);
tdm_status op_run_Asinh(op_ctx *ctx);
tdm_status op_run_Acosh(op_ctx *ctx);
tdm_status op_run_Atanh(op_ctx *ctx);
tdm_status op_run_IsNaN(op_ctx *ctx);
tdm_status op_run_IsInf(op_ctx *ctx);
tdm_status op_run_Not(op_ctx *ctx);
tdm_status op_run_Mish(op_ctx *ctx);
tdm_status op_run_Gelu(op_ctx *ctx);
tdm_status op_run_Swish(op_ctx *ctx);
/* float8 (e4m3fn, e4m3fnuz, e5m2, e5m2fnuz) codes, as Cast converts them
 * (ops/elementwise_cast.c): round to nearest even; saturate: beyond the
 * largest value (infinities too) is the largest, else NaN or infinity. */
int op_is_float8(tdm_dtype dt);
double op_float8_to_f64(uint8_t c, tdm_dtype dt);
uint8_t op_f64_to_float8(double v, tdm_dtype dt, int saturate);
/* float4e2m1, float8e8m0 and int2/uint2 (ops/elementwise_lowbit.c), and
 * every one-byte "low-bit" type at once: float8, float4e2m1, float8e8m0,
 * int4, uint4, int2, uint2, held one value per byte. */
enum { OP_E8M0_UP = 0, OP_E8M0_NEAREST = 1, OP_E8M0_DOWN = 2 };
double op_float4e2m1_to_f64(uint8_t c);
uint8_t op_f64_to_float4e2m1(double v);
double op_float8e8m0_to_f64(uint8_t c);
uint8_t op_f64_to_float8e8m0(double v, int saturate, int round_mode);
/* Cast's round_mode ("up", "nearest", "down"; NULL is "up"); -1 if unknown. */
int op_e8m0_round_mode(const char *s);
int op_is_lowbit(tdm_dtype dt);
/* The range of int4, uint4, int2, uint2 (returns 1); 0 for other types. */
int op_lowbit_int_range(tdm_dtype dt, int *lo, int *hi);
double op_lowbit_to_f64(uint8_t c, tdm_dtype dt);
/* Cast's conversion: float8 and float4e2m1 round to nearest even (see
 * above), float8e8m0 by round_mode, the integers truncate and are 0 when
 * out of range. */
uint8_t op_f64_to_lowbit(double v, tdm_dtype dt, int saturate, int round_mode);
tdm_status op_run_BitwiseNot(op_ctx *ctx);
tdm_status op_run_Relu(op_ctx *ctx);
tdm_status op_run_LeakyRelu(op_ctx *ctx);
tdm_status op_run_Elu(op_ctx *ctx);
tdm_status op_run_Selu(op_ctx *ctx);
tdm_status op_run_Celu(op_ctx *ctx);
tdm_status op_run_Sigmoid(op_ctx *ctx);
tdm_status op_run_HardSigmoid(op_ctx *ctx);
tdm_status op_run_HardSwish(op_ctx *ctx);
tdm_status op_run_Softplus(op_ctx *ctx);
tdm_status op_run_Softsign(op_ctx *ctx);
tdm_status op_run_Tanh(op_ctx *ctx);
tdm_status op_run_ThresholdedRelu(op_ctx *ctx);
tdm_status op_run_Shrink(op_ctx *ctx);
tdm_status op_run_Clip(op_ctx *ctx);
tdm_status op_run_Dropout(op_ctx *ctx);
tdm_status op_infer_bool_same(op_infer_ctx *ctx);
tdm_status op_infer_Dropout(op_infer_ctx *ctx);

/* ---- binary, variadic and ternary with broadcasting (elementwise_binary.c) ---- */
tdm_status op_run_Add(op_ctx *ctx);
tdm_status op_run_Sub(op_ctx *ctx);
tdm_status op_run_Mul(op_ctx *ctx);
tdm_status op_run_Div(op_ctx *ctx);
tdm_status op_run_Pow(op_ctx *ctx);
tdm_status op_run_Mod(op_ctx *ctx);
tdm_status op_run_BitShift(op_ctx *ctx);
tdm_status op_run_And(op_ctx *ctx);
tdm_status op_run_Or(op_ctx *ctx);
tdm_status op_run_Xor(op_ctx *ctx);
tdm_status op_run_BitwiseAnd(op_ctx *ctx);
tdm_status op_run_BitwiseOr(op_ctx *ctx);
tdm_status op_run_BitwiseXor(op_ctx *ctx);
tdm_status op_run_Equal(op_ctx *ctx);
tdm_status op_run_Less(op_ctx *ctx);
tdm_status op_run_Greater(op_ctx *ctx);
tdm_status op_run_LessOrEqual(op_ctx *ctx);
tdm_status op_run_GreaterOrEqual(op_ctx *ctx);
tdm_status op_run_PRelu(op_ctx *ctx);
tdm_status op_run_Max(op_ctx *ctx);
tdm_status op_run_Min(op_ctx *ctx);
tdm_status op_run_Sum(op_ctx *ctx);
tdm_status op_run_Mean(op_ctx *ctx);
tdm_status op_run_Where(op_ctx *ctx);
tdm_status op_infer_Where(op_infer_ctx *ctx);
tdm_status op_infer_PRelu(op_infer_ctx *ctx);

/* ---- conversions (elementwise_cast.c) ---- */
tdm_status op_run_Cast(op_ctx *ctx);
tdm_status op_run_CastLike(op_ctx *ctx);
tdm_status op_infer_Cast(op_infer_ctx *ctx);
tdm_status op_infer_CastLike(op_infer_ctx *ctx);

/* ---- optimizers of ai.onnx.preview.training (elementwise_train.c) ---- */
tdm_status op_run_Adagrad(op_ctx *ctx);
tdm_status op_run_Adam(op_ctx *ctx);
tdm_status op_run_Momentum(op_ctx *ctx);
tdm_status op_infer_optimizer(op_infer_ctx *ctx);

#endif
