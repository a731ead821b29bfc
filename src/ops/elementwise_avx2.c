/* AVX2 + FMA float32 loops of the unary ops, compiled with -mavx2 -mfma
 * (CMakeLists.txt) and called only when gemm_avx2_usable() says the CPU and
 * the OS support them. On other targets the file compiles to stubs that are
 * never called. */
#include "ops/elementwise.h"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#include <string.h>

/* Sigmoid of 8 floats: the algorithm of elementwise_unary.c's sigmoid_f32
 * (e = exp(-|v|) by Cephes' range reduction and polynomial, then 1 / (1 + e)
 * or e / (1 + e) by the sign of v; |v| clamped at 87; NaN stays NaN). */
static __m256 sigmoid8(__m256 v)
{
    const __m256i vb = _mm256_castps_si256(v);
    __m256i ab = _mm256_and_si256(vb, _mm256_set1_epi32(0x7fffffff));
    const __m256i nan = _mm256_cmpgt_epi32(ab, _mm256_set1_epi32(0x7f800000));
    ab = _mm256_min_epi32(ab, _mm256_set1_epi32(0x42ae0000));
    const __m256 a = _mm256_castsi256_ps(ab);
    const __m256 magic = _mm256_set1_ps(12582912.0f);
    const __m256 t = _mm256_fmadd_ps(a, _mm256_set1_ps(-1.44269504088896341f), magic);
    const __m256 k = _mm256_sub_ps(t, magic);
    __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693359375f), _mm256_sub_ps(_mm256_setzero_ps(), a));
    r = _mm256_fmadd_ps(k, _mm256_set1_ps(2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    const __m256i sb = _mm256_slli_epi32(
        _mm256_add_epi32(_mm256_sub_epi32(_mm256_castps_si256(t), _mm256_set1_epi32(0x4B400000)),
                         _mm256_set1_epi32(127)),
        23);
    const __m256 one = _mm256_set1_ps(1.0f);
    const __m256 e = _mm256_mul_ps(_mm256_fmadd_ps(_mm256_mul_ps(p, r), r, _mm256_add_ps(r, one)),
                                   _mm256_castsi256_ps(sb));
    const __m256 q = _mm256_div_ps(one, _mm256_add_ps(one, e));
    const __m256 eq = _mm256_mul_ps(e, q);
    __m256 y = _mm256_blendv_ps(q, eq, v); /* by the sign bit of v */
    return _mm256_or_ps(y, _mm256_castsi256_ps(_mm256_and_si256(nan, _mm256_set1_epi32(0x7fc00000))));
}

void op_ew_sigmoid_avx2(const float *x, float *y, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, sigmoid8(_mm256_loadu_ps(x + i)));
    if (i < n) {
        float buf[8] = {0};
        memcpy(buf, x + i, (n - i) * sizeof(float));
        _mm256_storeu_ps(buf, sigmoid8(_mm256_loadu_ps(buf)));
        memcpy(y + i, buf, (n - i) * sizeof(float));
    }
}

/* exp of 8 floats by Cephes' range reduction and polynomial (about 1 ulp);
 * below -87.33 (where the float result would be denormal or 0) the
 * result is 0; above 88.7, clamped (about 3.4e38). NaN stays NaN. */
static __m256 exp8(__m256 v)
{
    const __m256 x = _mm256_min_ps(_mm256_set1_ps(88.7f), _mm256_max_ps(_mm256_set1_ps(-87.33f), v));
    const __m256 under = _mm256_cmp_ps(v, _mm256_set1_ps(-87.33f), _CMP_LT_OQ);
    const __m256 magic = _mm256_set1_ps(12582912.0f);
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
    const __m256i sb = _mm256_slli_epi32(
        _mm256_add_epi32(_mm256_sub_epi32(_mm256_castps_si256(t), _mm256_set1_epi32(0x4B400000)),
                         _mm256_set1_epi32(127)),
        23);
    const __m256 e = _mm256_mul_ps(_mm256_fmadd_ps(_mm256_mul_ps(p, r), r, _mm256_add_ps(r, _mm256_set1_ps(1.0f))),
                                   _mm256_castsi256_ps(sb));
    return _mm256_andnot_ps(under, e);
}

void op_ew_exp_shift_avx2(const float *x, float *y, size_t n, float m)
{
    const __m256 vm = _mm256_set1_ps(m);
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm)));
    if (i < n) {
        float buf[8] = {0};
        memcpy(buf, x + i, (n - i) * sizeof(float));
        _mm256_storeu_ps(buf, exp8(_mm256_sub_ps(_mm256_loadu_ps(buf), vm)));
        memcpy(y + i, buf, (n - i) * sizeof(float));
    }
}

/* erf of 8 floats: a rational approximation in x on [-4, 4] (odd
 * numerator of degree 13, even denominator of degree 8, the one of XLA and
 * Eigen); outside, erf is +-1 in float. NaN stays NaN. */
static __m256 erf8(__m256 v)
{
    /* min/max return their second operand when one is NaN: NaN passes */
    const __m256 x = _mm256_max_ps(_mm256_set1_ps(-4.0f), _mm256_min_ps(_mm256_set1_ps(4.0f), v));
    const __m256 x2 = _mm256_mul_ps(x, x);
    __m256 p = _mm256_fmadd_ps(x2, _mm256_set1_ps(-2.72614225801306e-10f), _mm256_set1_ps(2.77068142495902e-08f));
    p = _mm256_fmadd_ps(x2, p, _mm256_set1_ps(-2.10102402082508e-06f));
    p = _mm256_fmadd_ps(x2, p, _mm256_set1_ps(-5.69250639462346e-05f));
    p = _mm256_fmadd_ps(x2, p, _mm256_set1_ps(-7.34990630326855e-04f));
    p = _mm256_fmadd_ps(x2, p, _mm256_set1_ps(-2.95459980854025e-03f));
    p = _mm256_fmadd_ps(x2, p, _mm256_set1_ps(-1.60960333262415e-02f));
    p = _mm256_mul_ps(x, p);
    __m256 q = _mm256_fmadd_ps(x2, _mm256_set1_ps(-1.45660718464996e-05f), _mm256_set1_ps(-2.13374055278905e-04f));
    q = _mm256_fmadd_ps(x2, q, _mm256_set1_ps(-1.68282697438203e-03f));
    q = _mm256_fmadd_ps(x2, q, _mm256_set1_ps(-7.37332916720468e-03f));
    q = _mm256_fmadd_ps(x2, q, _mm256_set1_ps(-1.42647390514189e-02f));
    return _mm256_div_ps(p, q);
}

void op_ew_erf_avx2(const float *x, float *y, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, erf8(_mm256_loadu_ps(x + i)));
    if (i < n) {
        float buf[8] = {0};
        memcpy(buf, x + i, (n - i) * sizeof(float));
        _mm256_storeu_ps(buf, erf8(_mm256_loadu_ps(buf)));
        memcpy(y + i, buf, (n - i) * sizeof(float));
    }
}

#else

void op_ew_exp_shift_avx2(const float *x, float *y, size_t n, float m)
{
    (void)x;
    (void)y;
    (void)n;
    (void)m;
}

void op_ew_erf_avx2(const float *x, float *y, size_t n)
{
    (void)x;
    (void)y;
    (void)n;
}

void op_ew_sigmoid_avx2(const float *x, float *y, size_t n)
{
    (void)x;
    (void)y;
    (void)n;
}

#endif
