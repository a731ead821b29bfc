/* The Sigmoid of 8 floats shared by the standalone AVX2 Sigmoid
 * (elementwise_avx2.c) and the fused programs (run/fuse_avx2.c), so that
 * a fused chain computes exactly what the standalone op does. Include
 * only from files compiled with -mavx2 -mfma (*_avx2*.c). */
#ifndef TDM_OPS_ELEMENTWISE_AVX2_H
#define TDM_OPS_ELEMENTWISE_AVX2_H

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

/* Sigmoid of 8 floats: the algorithm of elementwise_unary.c's sigmoid_f32:
 * e = exp(-|v|) by Cephes' range reduction and polynomial (|v| clamped at
 * 87), then (v < 0 ? e : 1) / (1 + e), one correctly rounded division
 * (measured against float64 over every 53rd float in [-87, 87]: max 2.5
 * ulps, mean 0.08). NaN stays NaN (-|v| and the max pass it through). */
static inline __m256 op_ew_sigmoid8(__m256 v)
{
    /* -|v| clamped below at -87 (max_ps returns its second operand, a NaN v) */
    const __m256 x = _mm256_max_ps(_mm256_set1_ps(-87.0f), _mm256_or_ps(v, _mm256_set1_ps(-0.0f)));
    const __m256 magic = _mm256_set1_ps(12582912.0f); /* 1.5 * 2^23: t rounds to an integer k */
    const __m256 t = _mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), magic);
    const __m256 k = _mm256_sub_ps(t, magic);
    __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fmadd_ps(k, _mm256_set1_ps(2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    /* 2^k: (bits(t) - bits(magic) + 127) << 23, as (bits(t) << 23) + a constant */
    const __m256i sb = _mm256_add_epi32(_mm256_slli_epi32(_mm256_castps_si256(t), 23),
                                        _mm256_set1_epi32((int)((127u - 0x4B400000u) << 23)));
    const __m256 one = _mm256_set1_ps(1.0f);
    const __m256 e = _mm256_mul_ps(_mm256_fmadd_ps(_mm256_mul_ps(p, r), r, _mm256_add_ps(r, one)),
                                   _mm256_castsi256_ps(sb));
    /* the numerator by the sign bit of v */
    return _mm256_div_ps(_mm256_blendv_ps(one, e, v), _mm256_add_ps(one, e));
}
#endif

#endif
