/* Run and infer hooks of the signal, random and string ops (see ops.def). */
#ifndef TDM_OPS_SIGNAL_H
#define TDM_OPS_SIGNAL_H

#include "ops/op.h"

/* Fourier transforms (signal_fft.c) */
tdm_status op_run_DFT(op_ctx *ctx);
tdm_status op_infer_DFT(op_infer_ctx *ctx);
tdm_status op_run_STFT(op_ctx *ctx);
tdm_status op_infer_STFT(op_infer_ctx *ctx);

/* RegexFullMatch (signal_regex.c) */
tdm_status op_run_RegexFullMatch(op_ctx *ctx);
tdm_status op_infer_RegexFullMatch(op_infer_ctx *ctx);

/* Windows and the mel filter bank (signal_window.c) */
tdm_status op_run_HannWindow(op_ctx *ctx);
tdm_status op_run_HammingWindow(op_ctx *ctx);
tdm_status op_run_BlackmanWindow(op_ctx *ctx);
tdm_status op_infer_window(op_infer_ctx *ctx);
tdm_status op_run_MelWeightMatrix(op_ctx *ctx);
tdm_status op_infer_MelWeightMatrix(op_infer_ctx *ctx);

/* Text (signal_text.c) */
tdm_status op_run_StringNormalizer(op_ctx *ctx);
tdm_status op_run_StringConcat(op_ctx *ctx);
tdm_status op_run_StringSplit(op_ctx *ctx);
tdm_status op_infer_StringSplit(op_infer_ctx *ctx);
tdm_status op_infer_StringNormalizer(op_infer_ctx *ctx);
tdm_status op_run_TfIdfVectorizer(op_ctx *ctx);
tdm_status op_infer_TfIdfVectorizer(op_infer_ctx *ctx);

/* Random generators (signal_random.c) */
tdm_status op_run_Bernoulli(op_ctx *ctx);
tdm_status op_infer_Bernoulli(op_infer_ctx *ctx);
tdm_status op_run_RandomNormal(op_ctx *ctx);
tdm_status op_run_RandomUniform(op_ctx *ctx);
tdm_status op_infer_random(op_infer_ctx *ctx);
tdm_status op_run_RandomNormalLike(op_ctx *ctx);
tdm_status op_run_RandomUniformLike(op_ctx *ctx);
tdm_status op_infer_random_like(op_infer_ctx *ctx);
tdm_status op_run_Multinomial(op_ctx *ctx);
tdm_status op_infer_Multinomial(op_infer_ctx *ctx);

/* Shared by the files above (signal_util.c) */

/* Reads a scalar (or one-element) integer input as int64. */
tdm_status sig_scalar_int(op_ctx *ctx, int i, const char *what, int64_t *out);
/* Reads a scalar (or one-element) numeric input as double. */
tdm_status sig_scalar_f64(op_ctx *ctx, int i, const char *what, double *out);
/* The value of a constant scalar integer input of an infer hook; 0 when unknown. */
int sig_infer_scalar_int(const op_infer_ctx *ctx, int i, int64_t *out);
/* Writes n doubles to a numeric tensor's data from element `at` on, rounding
 * per element (float16/bfloat16 via float; integers truncate; bool: != 0). */
void sig_store_f64(tdm_tensor *t, size_t at, const double *src, size_t n);
/* Reads n elements of a float tensor (float, double, float16, bfloat16) from
 * element `at` with the given stride (in elements) into dst as doubles. */
void sig_load_f64(const tdm_tensor *t, size_t at, size_t stride, size_t n, double *dst);
/* Whether dt may be the output_datatype of a window or mel matrix. */
int sig_numeric_dtype(int64_t dt);

#endif
