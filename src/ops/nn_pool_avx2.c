/* AVX2 loops of the pooling kernels (see nn_pool_avx2.h). On other targets
 * the file compiles to a stub that is never called. */
#include "ops/nn_pool_avx2.h"

#if defined(__x86_64__) && defined(__AVX2__)
#include <immintrin.h>

/* src[0], src[2], …, src[14] */
static __m256 even8(const float *src)
{
    __m256 lo = _mm256_loadu_ps(src), hi = _mm256_loadu_ps(src + 8);
    __m256 e = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), _MM_SHUFFLE(3, 1, 2, 0)));
}

void op_maxpool_tap_avx2(const float *src, float *y, int64_t n, int64_t sw, int first)
{
    int64_t i = 0;
    /* _mm256_max_ps(a, b) is a > b ? a : b, the portable test. */
    if (sw == 1) {
        for (; i + 8 <= n; i += 8) {
            __m256 v = _mm256_loadu_ps(src + i);
            _mm256_storeu_ps(y + i, first ? v : _mm256_max_ps(v, _mm256_loadu_ps(y + i)));
        }
    } else if (sw == 2) {
        /* even8 reads src[2i .. 2i + 15]: keep 2i + 15 <= 2(n - 1) */
        for (; i + 9 <= n; i += 8) {
            __m256 v = even8(src + 2 * i);
            _mm256_storeu_ps(y + i, first ? v : _mm256_max_ps(v, _mm256_loadu_ps(y + i)));
        }
    }
    for (; i < n; i++) {
        float v = src[i * sw];
        y[i] = first || v > y[i] ? v : y[i];
    }
}

#else

void op_maxpool_tap_avx2(const float *src, float *y, int64_t n, int64_t sw, int first)
{
    (void)src;
    (void)y;
    (void)n;
    (void)sw;
    (void)first;
}

#endif
