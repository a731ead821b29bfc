/* The AVX2/FMA transforms of the Winograd convolution F(4x4, 3x3) (see
 * nn_winograd.c), 8 tiles across the vector. Compiled with -mavx2 -mfma;
 * called only when gemm_avx2_usable(). */
#include "ops/nn.h"

#include <immintrin.h>

/* B^T applied to 6 vectors d[0..5] (a column or a row of the patch). */
static inline void bt6(const __m256 *d, __m256 *r)
{
    const __m256 c4 = _mm256_set1_ps(4.0f), c5 = _mm256_set1_ps(-5.0f), c2 = _mm256_set1_ps(2.0f),
                 m4 = _mm256_set1_ps(-4.0f);
    __m256 d42 = _mm256_sub_ps(d[4], d[2]);
    r[0] = _mm256_fmadd_ps(c4, d[0], _mm256_fmadd_ps(c5, d[2], d[4]));
    r[1] = _mm256_fmadd_ps(m4, _mm256_add_ps(d[1], d[2]), _mm256_add_ps(d[3], d[4]));
    r[2] = _mm256_fmadd_ps(c4, _mm256_sub_ps(d[1], d[2]), _mm256_sub_ps(d[4], d[3]));
    r[3] = _mm256_fmadd_ps(c2, _mm256_sub_ps(d[3], d[1]), d42);
    r[4] = _mm256_fmadd_ps(c2, _mm256_sub_ps(d[1], d[3]), d42);
    r[5] = _mm256_fmadd_ps(c4, d[1], _mm256_fmadd_ps(c5, d[3], d[5]));
}

/* Row i of the 8 patches: d[j] lane k = s[off[k] + j], j < 6, by 128-bit
 * loads of 4 and 64-bit loads of 2 and 4x4 transposes in each half. */
static inline void load_row(const float *s, const int32_t *off, __m256 *d)
{
    __m256 a0 = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(s + off[0])), _mm_loadu_ps(s + off[4]), 1);
    __m256 a1 = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(s + off[1])), _mm_loadu_ps(s + off[5]), 1);
    __m256 a2 = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(s + off[2])), _mm_loadu_ps(s + off[6]), 1);
    __m256 a3 = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(s + off[3])), _mm_loadu_ps(s + off[7]), 1);
    __m256 u0 = _mm256_unpacklo_ps(a0, a1), u1 = _mm256_unpackhi_ps(a0, a1);
    __m256 u2 = _mm256_unpacklo_ps(a2, a3), u3 = _mm256_unpackhi_ps(a2, a3);
    d[0] = _mm256_castpd_ps(_mm256_unpacklo_pd(_mm256_castps_pd(u0), _mm256_castps_pd(u2)));
    d[1] = _mm256_castpd_ps(_mm256_unpackhi_pd(_mm256_castps_pd(u0), _mm256_castps_pd(u2)));
    d[2] = _mm256_castpd_ps(_mm256_unpacklo_pd(_mm256_castps_pd(u1), _mm256_castps_pd(u3)));
    d[3] = _mm256_castpd_ps(_mm256_unpackhi_pd(_mm256_castps_pd(u1), _mm256_castps_pd(u3)));
    /* j = 4, 5: [k0 k0 k1 k1 | k4 k4 k5 k5] and [k2 k2 k3 k3 | k6 k6 k7 k7] */
    __m128 l01 = _mm_castpd_ps(_mm_loadh_pd(_mm_load_sd((const double *)(const void *)(s + off[0] + 4)),
                                            (const double *)(const void *)(s + off[1] + 4)));
    __m128 l45 = _mm_castpd_ps(_mm_loadh_pd(_mm_load_sd((const double *)(const void *)(s + off[4] + 4)),
                                            (const double *)(const void *)(s + off[5] + 4)));
    __m128 l23 = _mm_castpd_ps(_mm_loadh_pd(_mm_load_sd((const double *)(const void *)(s + off[2] + 4)),
                                            (const double *)(const void *)(s + off[3] + 4)));
    __m128 l67 = _mm_castpd_ps(_mm_loadh_pd(_mm_load_sd((const double *)(const void *)(s + off[6] + 4)),
                                            (const double *)(const void *)(s + off[7] + 4)));
    __m256 x = _mm256_insertf128_ps(_mm256_castps128_ps256(l01), l45, 1);
    __m256 y = _mm256_insertf128_ps(_mm256_castps128_ps256(l23), l67, 1);
    d[4] = _mm256_shuffle_ps(x, y, _MM_SHUFFLE(2, 0, 2, 0));
    d[5] = _mm256_shuffle_ps(x, y, _MM_SHUFFLE(3, 1, 3, 1));
}

void wino_in43_avx2(const float *s, const int32_t *off, size_t ld, float *dst, size_t xs)
{
    __m256 d[6][6], r[6][6];
    for (int i = 0; i < 6; i++)
        load_row(s + (size_t)i * ld, off, d[i]);
    /* columns: r[k][j] = sum_i BT[k][i] d[i][j] */
    for (int j = 0; j < 6; j++) {
        __m256 col[6], o[6];
        for (int i = 0; i < 6; i++)
            col[i] = d[i][j];
        bt6(col, o);
        for (int i = 0; i < 6; i++)
            r[i][j] = o[i];
    }
    for (int i = 0; i < 6; i++) {
        __m256 o[6];
        bt6(r[i], o);
        for (int j = 0; j < 6; j++)
            _mm256_storeu_ps(dst + (size_t)(i * 6 + j) * xs, o[j]);
    }
}

/* A^T applied to 6 vectors m[0..5]: 4 vectors. */
static inline void at6(const __m256 *m, __m256 *o)
{
    const __m256 c2 = _mm256_set1_ps(2.0f), c4 = _mm256_set1_ps(4.0f), c8 = _mm256_set1_ps(8.0f);
    __m256 s12 = _mm256_add_ps(m[1], m[2]), d12 = _mm256_sub_ps(m[1], m[2]);
    __m256 s34 = _mm256_add_ps(m[3], m[4]), d34 = _mm256_sub_ps(m[3], m[4]);
    o[0] = _mm256_add_ps(_mm256_add_ps(m[0], s12), s34);
    o[1] = _mm256_fmadd_ps(c2, d34, d12);
    o[2] = _mm256_fmadd_ps(c4, s34, s12);
    o[3] = _mm256_add_ps(_mm256_fmadd_ps(c8, d34, d12), m[5]);
}

void wino_out43_avx2(const float *m, size_t xs, float bias, float *out)
{
    __m256 t[4][6];
    for (int j = 0; j < 6; j++) {
        __m256 col[6], o[4];
        for (int i = 0; i < 6; i++)
            col[i] = _mm256_loadu_ps(m + (size_t)(i * 6 + j) * xs);
        at6(col, o);
        for (int a = 0; a < 4; a++)
            t[a][j] = o[a];
    }
    const __m256 vb = _mm256_set1_ps(bias);
    for (int a = 0; a < 4; a++) {
        __m256 o[4];
        at6(t[a], o);
        for (int b = 0; b < 4; b++)
            o[b] = _mm256_add_ps(o[b], vb);
        /* to tile-major: row a of tile k at out + k * 16 + a * 4 */
        __m256 u0 = _mm256_unpacklo_ps(o[0], o[1]), u1 = _mm256_unpackhi_ps(o[0], o[1]);
        __m256 u2 = _mm256_unpacklo_ps(o[2], o[3]), u3 = _mm256_unpackhi_ps(o[2], o[3]);
        __m256 v0 = _mm256_castpd_ps(_mm256_unpacklo_pd(_mm256_castps_pd(u0), _mm256_castps_pd(u2)));
        __m256 v1 = _mm256_castpd_ps(_mm256_unpackhi_pd(_mm256_castps_pd(u0), _mm256_castps_pd(u2)));
        __m256 v2 = _mm256_castpd_ps(_mm256_unpacklo_pd(_mm256_castps_pd(u1), _mm256_castps_pd(u3)));
        __m256 v3 = _mm256_castpd_ps(_mm256_unpackhi_pd(_mm256_castps_pd(u1), _mm256_castps_pd(u3)));
        float *p = out + a * 4;
        _mm_storeu_ps(p + 0 * 16, _mm256_castps256_ps128(v0));
        _mm_storeu_ps(p + 4 * 16, _mm256_extractf128_ps(v0, 1));
        _mm_storeu_ps(p + 1 * 16, _mm256_castps256_ps128(v1));
        _mm_storeu_ps(p + 5 * 16, _mm256_extractf128_ps(v1, 1));
        _mm_storeu_ps(p + 2 * 16, _mm256_castps256_ps128(v2));
        _mm_storeu_ps(p + 6 * 16, _mm256_extractf128_ps(v2, 1));
        _mm_storeu_ps(p + 3 * 16, _mm256_castps256_ps128(v3));
        _mm_storeu_ps(p + 7 * 16, _mm256_extractf128_ps(v3, 1));
    }
}

/* ---- F(2x2, 3x3): 4x4 patches ---- */

void wino_in23_avx2(const float *s, const int32_t *off, size_t ld, float *dst, size_t xs)
{
    __m256 d[4][4], r[4][4];
    for (int i = 0; i < 4; i++) {
        const float *p = s + (size_t)i * ld;
        __m256 a0 = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(p + off[0])), _mm_loadu_ps(p + off[4]), 1);
        __m256 a1 = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(p + off[1])), _mm_loadu_ps(p + off[5]), 1);
        __m256 a2 = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(p + off[2])), _mm_loadu_ps(p + off[6]), 1);
        __m256 a3 = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(p + off[3])), _mm_loadu_ps(p + off[7]), 1);
        __m256 u0 = _mm256_unpacklo_ps(a0, a1), u1 = _mm256_unpackhi_ps(a0, a1);
        __m256 u2 = _mm256_unpacklo_ps(a2, a3), u3 = _mm256_unpackhi_ps(a2, a3);
        d[i][0] = _mm256_castpd_ps(_mm256_unpacklo_pd(_mm256_castps_pd(u0), _mm256_castps_pd(u2)));
        d[i][1] = _mm256_castpd_ps(_mm256_unpackhi_pd(_mm256_castps_pd(u0), _mm256_castps_pd(u2)));
        d[i][2] = _mm256_castpd_ps(_mm256_unpacklo_pd(_mm256_castps_pd(u1), _mm256_castps_pd(u3)));
        d[i][3] = _mm256_castpd_ps(_mm256_unpackhi_pd(_mm256_castps_pd(u1), _mm256_castps_pd(u3)));
    }
    /* B^T d: r0 = d0 - d2, r1 = d1 + d2, r2 = d2 - d1, r3 = d1 - d3 (over rows, then columns) */
    for (int j = 0; j < 4; j++) {
        r[0][j] = _mm256_sub_ps(d[0][j], d[2][j]);
        r[1][j] = _mm256_add_ps(d[1][j], d[2][j]);
        r[2][j] = _mm256_sub_ps(d[2][j], d[1][j]);
        r[3][j] = _mm256_sub_ps(d[1][j], d[3][j]);
    }
    for (int i = 0; i < 4; i++) {
        float *q = dst + (size_t)(i * 4) * xs;
        _mm256_storeu_ps(q, _mm256_sub_ps(r[i][0], r[i][2]));
        _mm256_storeu_ps(q + xs, _mm256_add_ps(r[i][1], r[i][2]));
        _mm256_storeu_ps(q + 2 * xs, _mm256_sub_ps(r[i][2], r[i][1]));
        _mm256_storeu_ps(q + 3 * xs, _mm256_sub_ps(r[i][1], r[i][3]));
    }
}

void wino_out23_avx2(const float *m, size_t xs, float bias, float *out)
{
    /* A^T: o0 = m0 + m1 + m2, o1 = m1 - m2 - m3 (over rows, then columns) */
    __m256 t[2][4];
    for (int j = 0; j < 4; j++) {
        __m256 m0 = _mm256_loadu_ps(m + (size_t)j * xs), m1 = _mm256_loadu_ps(m + (size_t)(4 + j) * xs);
        __m256 m2 = _mm256_loadu_ps(m + (size_t)(8 + j) * xs), m3 = _mm256_loadu_ps(m + (size_t)(12 + j) * xs);
        t[0][j] = _mm256_add_ps(_mm256_add_ps(m0, m1), m2);
        t[1][j] = _mm256_sub_ps(_mm256_sub_ps(m1, m2), m3);
    }
    const __m256 vb = _mm256_set1_ps(bias);
    __m256 o[4];
    for (int a = 0; a < 2; a++) {
        o[a * 2] = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(t[a][0], t[a][1]), t[a][2]), vb);
        o[a * 2 + 1] = _mm256_add_ps(_mm256_sub_ps(_mm256_sub_ps(t[a][1], t[a][2]), t[a][3]), vb);
    }
    /* to tile-major: tile k's 4 pixels at out + k * 4 */
    __m256 u0 = _mm256_unpacklo_ps(o[0], o[1]), u1 = _mm256_unpackhi_ps(o[0], o[1]);
    __m256 u2 = _mm256_unpacklo_ps(o[2], o[3]), u3 = _mm256_unpackhi_ps(o[2], o[3]);
    __m256 v0 = _mm256_castpd_ps(_mm256_unpacklo_pd(_mm256_castps_pd(u0), _mm256_castps_pd(u2)));
    __m256 v1 = _mm256_castpd_ps(_mm256_unpackhi_pd(_mm256_castps_pd(u0), _mm256_castps_pd(u2)));
    __m256 v2 = _mm256_castpd_ps(_mm256_unpacklo_pd(_mm256_castps_pd(u1), _mm256_castps_pd(u3)));
    __m256 v3 = _mm256_castpd_ps(_mm256_unpackhi_pd(_mm256_castps_pd(u1), _mm256_castps_pd(u3)));
    _mm_storeu_ps(out + 0 * 4, _mm256_castps256_ps128(v0));
    _mm_storeu_ps(out + 4 * 4, _mm256_extractf128_ps(v0, 1));
    _mm_storeu_ps(out + 1 * 4, _mm256_castps256_ps128(v1));
    _mm_storeu_ps(out + 5 * 4, _mm256_extractf128_ps(v1, 1));
    _mm_storeu_ps(out + 2 * 4, _mm256_castps256_ps128(v2));
    _mm_storeu_ps(out + 6 * 4, _mm256_extractf128_ps(v2, 1));
    _mm_storeu_ps(out + 3 * 4, _mm256_castps256_ps128(v3));
    _mm_storeu_ps(out + 7 * 4, _mm256_extractf128_ps(v3, 1));
}
