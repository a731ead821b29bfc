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

#endif
