/* AVX2 + FMA float32 loops of the unary ops, compiled with -mavx2 -mfma
 * (CMakeLists.txt) and called only when gemm_avx2_usable() says the CPU and
 * the OS support them. On other targets the file compiles to stubs that are
 * never called. */
#include "ops/elementwise.h"
#include "ops/elementwise_avx2.h"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#include <string.h>

/* Sigmoid by op_ew_sigmoid8 (elementwise_avx2.h), shared with the fused
 * programs (run/fuse_avx2.c). */
void op_ew_sigmoid_avx2(const float *x, float *y, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, op_ew_sigmoid8(_mm256_loadu_ps(x + i)));
    if (i < n) {
        float buf[8] = {0};
        memcpy(buf, x + i, (n - i) * sizeof(float));
        _mm256_storeu_ps(buf, op_ew_sigmoid8(_mm256_loadu_ps(buf)));
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

void op_ew_relu_avx2(const float *x, float *y, size_t n)
{
    const __m256 z = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        _mm256_storeu_ps(y + i, _mm256_andnot_ps(_mm256_cmp_ps(v, z, _CMP_LT_OQ), v)); /* -0 and NaN pass */
    }
    for (; i < n; i++)
        y[i] = x[i] < 0 ? 0.0f : x[i];
}

void op_ew_clip_avx2(const float *x, float *y, size_t n, float lo, float hi)
{
    /* max_ps(lo, v) is lo > v ? lo : v, min_ps(hi, v) is hi < v ? hi : v */
    const __m256 vl = _mm256_set1_ps(lo), vh = _mm256_set1_ps(hi);
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_min_ps(vh, _mm256_max_ps(vl, _mm256_loadu_ps(x + i))));
    for (; i < n; i++) {
        float v = x[i];
        v = v < lo ? lo : v;
        y[i] = v > hi ? hi : v;
    }
}

void op_ew_affine_avx2(const float *x, float *y, size_t n, float a, float b)
{
    const __m256 va = _mm256_set1_ps(a), vb = _mm256_set1_ps(b);
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(_mm256_loadu_ps(x + i), va, vb));
    for (; i < n; i++)
        y[i] = x[i] * a + b;
}

void op_ew_norm_row_avx2(const float *x, float *y, size_t n, float m, float s, const float *g, const float *b)
{
    for (size_t i = 0; i < n; i++)
        y[i] = (x[i] - m) * s * g[i] + b[i];
}

/* The largest x[i] by the test x[i] > m from m = x[0] (NaN only when x[0]
 * is NaN), n >= 1. */
float op_ew_max_avx2(const float *x, size_t n)
{
    __m256 m8 = _mm256_set1_ps(x[0]);
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        m8 = _mm256_max_ps(_mm256_loadu_ps(x + i), m8); /* x > m ? x : m */
    float l[8], m = x[0];
    _mm256_storeu_ps(l, m8);
    for (int k = 0; k < 8; k++)
        if (l[k] > m)
            m = l[k];
    for (; i < n; i++)
        if (x[i] > m)
            m = x[i];
    return m;
}

/* Sum of x[i] in double, in 8 partial sums. */
static double sum_f64(const float *x, size_t n)
{
    __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
        a1 = _mm256_add_pd(a1, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
    }
    double l[4], s;
    _mm256_storeu_pd(l, _mm256_add_pd(a0, a1));
    s = (l[0] + l[2]) + (l[1] + l[3]);
    for (; i < n; i++)
        s += x[i];
    return s;
}

void op_ew_softmax_row_avx2(const float *x, float *y, size_t n)
{
    if (!n)
        return;
    op_ew_exp_shift_avx2(x, y, n, op_ew_max_avx2(x, n));
    const __m256 r = _mm256_set1_ps((float)(1.0 / sum_f64(y, n)));
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), r));
    for (; i < n; i++)
        y[i] *= _mm256_cvtss_f32(r);
}

void op_ew_stats_avx2(const float *x, size_t n, double *mean, double *var)
{
    double m = n ? sum_f64(x, n) / (double)n : 0;
    const __m256d vm = _mm256_set1_pd(m);
    __m256d q0 = _mm256_setzero_pd(), q1 = _mm256_setzero_pd();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        __m256d d0 = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(v)), vm);
        __m256d d1 = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)), vm);
        q0 = _mm256_fmadd_pd(d0, d0, q0);
        q1 = _mm256_fmadd_pd(d1, d1, q1);
    }
    double l[4], q;
    _mm256_storeu_pd(l, _mm256_add_pd(q0, q1));
    q = (l[0] + l[2]) + (l[1] + l[3]);
    for (; i < n; i++)
        q += (x[i] - m) * (x[i] - m);
    *mean = m;
    *var = n ? q / (double)n : 0;
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

void op_ew_relu_avx2(const float *x, float *y, size_t n)
{
    (void)x;
    (void)y;
    (void)n;
}

void op_ew_clip_avx2(const float *x, float *y, size_t n, float lo, float hi)
{
    (void)x;
    (void)y;
    (void)n;
    (void)lo;
    (void)hi;
}

void op_ew_affine_avx2(const float *x, float *y, size_t n, float a, float b)
{
    (void)x;
    (void)y;
    (void)n;
    (void)a;
    (void)b;
}

void op_ew_norm_row_avx2(const float *x, float *y, size_t n, float m, float s, const float *g, const float *b)
{
    (void)x;
    (void)y;
    (void)n;
    (void)m;
    (void)s;
    (void)g;
    (void)b;
}

float op_ew_max_avx2(const float *x, size_t n)
{
    (void)n;
    return x[0];
}

void op_ew_softmax_row_avx2(const float *x, float *y, size_t n)
{
    (void)x;
    (void)y;
    (void)n;
}

void op_ew_stats_avx2(const float *x, size_t n, double *mean, double *var)
{
    (void)x;
    (void)n;
    *mean = *var = 0;
}

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
