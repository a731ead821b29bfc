/* The virtual NPU's narrow-precision numerics: float32 values rounded to
 * fp16 or bf16 (round to nearest even, overflow to infinity, subnormals kept,
 * NaN quieted) and widened back, as an NPU computing in that precision
 * would hold them. One entry (vnpu_round_f32) picks the AVX2/F16C loop when
 * the CPU has it, else the scalar conversions of core/tensor.h; both give
 * the same bits for every input (tests/devices: devices.vnpu.round). */
#ifndef TDM_DEVICES_VNPU_ROUND_H
#define TDM_DEVICES_VNPU_ROUND_H

#include "core/tensor.h"

#include <stddef.h>

/* dst[i] = src[i] rounded to prec (TDM_FLOAT16 or TDM_BFLOAT16) and back to
 * float32, for i < n; dst may be src. Any other prec copies. */
void vnpu_round_f32(float *dst, const float *src, size_t n, tdm_dtype prec);
/* The same with the scalar conversions only (the reference the vector loop
 * is tested against). */
void vnpu_round_f32_scalar(float *dst, const float *src, size_t n, tdm_dtype prec);

/* The first i < n whose src[i] rounding to prec changes (in its bits: a
 * signalling NaN is quieted, so it changes), or n when none does: then
 * src is already held at prec and needs no copy. Any other prec: n. */
size_t vnpu_round_same(const float *src, size_t n, tdm_dtype prec);
/* The same with the scalar conversions only. */
size_t vnpu_round_same_scalar(const float *src, size_t n, tdm_dtype prec);

/* ---- vnpu_round_avx2.c (compiled with -mavx2 -mf16c: src/devices/devices.cmake) ---- */

/* 1 when the CPU and the OS run AVX2 and F16C. */
int vnpu_round_avx2_usable(void);
/* The first n - n % 8 elements of vnpu_round_f32 (bf16: 1 for bf16, 0 for
 * fp16); returns how many it did. Call only when vnpu_round_avx2_usable(). */
size_t vnpu_round_f32_avx2(float *dst, const float *src, size_t n, int bf16);
/* vnpu_round_same's vector part: how many whole groups of eight from the
 * start rounding leaves unchanged (a multiple of 8; the changed element,
 * if any, lies in the eight after). Call only when vnpu_round_avx2_usable(). */
size_t vnpu_round_same_avx2(const float *src, size_t n, int bf16);

#endif
