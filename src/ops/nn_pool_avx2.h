/* AVX2 loops of the pooling kernels (nn_pool_avx2.c, compiled with -mavx2
 * -mfma; call only when gemm_avx2_usable() in ops/nn.h returns 1). */
#ifndef TDM_OPS_NN_POOL_AVX2_H
#define TDM_OPS_NN_POOL_AVX2_H

#include <stddef.h>
#include <stdint.h>

/* One tap of a max-pool row: y[i] = src[i * sw] when first, else
 * src[i * sw] > y[i] ? src[i * sw] : y[i] (the portable loop's test, so
 * NaNs and ties come out the same), for i < n. Reads no element past
 * src[(n - 1) * sw]. */
void op_maxpool_tap_avx2(const float *src, float *y, int64_t n, int64_t sw, int first);

/* rows x n max-pool outputs, output i of row r at y[r * ystep + i] from
 * nt >= 1 taps, tap t of it being src[r * rstep + off[t] + i]: the first
 * tap, then for each later tap v > y ? v : y (the portable fold, so NaNs
 * and ties come out the same). Reads only the taps of the outputs (when
 * n >= 8; overlapping vectors recompute some outputs). */
void op_maxpool_rows_avx2(const float *src, int64_t rstep, const int64_t *off, int nt, float *y, int64_t ystep,
                          int64_t rows, int64_t n);

/* rows x n max-pool outputs at stride 2 across, dilation 1: output i of
 * row r at y[r * ystep + i] from the nr x kw taps src[(r * sh + a) * W + 2i
 * + b] (a < nr, b < kw), folded in (a, b) order as the portable loop does
 * (first tap, then v > y ? v : y), so NaNs and ties come out the same.
 * Every input row is read straight from src, 8 outputs at a time (the even
 * and odd columns taken apart in registers). kw >= 2; reads only the taps
 * of the outputs (when n >= 8, overlapping vectors recompute some). */
void op_maxpool_s2_avx2(const float *src, int64_t W, int64_t sh, int64_t nr, int64_t kw, float *y, int64_t ystep,
                        int64_t rows, int64_t n);

/* Global average pool of `planes` planes of sp floats: the portable sum
 * (lane l of 8 partial sums taking elements l, l + 8, ..., the tail
 * element i + j into lane j, combined as ((0+4)+(1+5))+((2+6)+(3+7))),
 * divided by sp; bit-identical to it. */
void op_gap_avx2(const float *x, size_t sp, float *y, size_t planes);

#endif
