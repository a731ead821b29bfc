/* The AVX2 loops of the fused programs (fuse.h): the same comparisons and
 * the same single float operations as the portable loops, 8 at a time
 * (no FMA: each product is rounded before its sum, as the standalone
 * kernels compute). */
#include "run/fuse.h"

#if defined(__AVX2__)
#include <immintrin.h>

void fuse_relu_avx2(float *y, const float *x, size_t n)
{
    const __m256 z = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        _mm256_storeu_ps(y + i, _mm256_blendv_ps(v, z, _mm256_cmp_ps(v, z, _CMP_LT_OQ)));
    }
    for (; i < n; i++)
        y[i] = x[i] < 0 ? 0.0f : x[i];
}

void fuse_clip_avx2(float *y, const float *x, size_t n, float lo, float hi)
{
    const __m256 l = _mm256_set1_ps(lo), h = _mm256_set1_ps(hi);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        v = _mm256_blendv_ps(v, l, _mm256_cmp_ps(v, l, _CMP_LT_OQ));
        _mm256_storeu_ps(y + i, _mm256_blendv_ps(v, h, _mm256_cmp_ps(v, h, _CMP_GT_OQ)));
    }
    for (; i < n; i++) {
        float v = x[i];
        v = v < lo ? lo : v;
        y[i] = v > hi ? hi : v;
    }
}

/* The binary ops as the binary kernel computes them (Max is
 * (x != x || x > z) ? x : z), on two vectors (vv), a vector and a scalar
 * second (vs) or a scalar first (sv). */
#define FUSE_BIN(NAME, V, S)                                                                                  \
    static void NAME##_vv(float *y, const float *a, const float *b, size_t n)                                 \
    {                                                                                                         \
        size_t i = 0;                                                                                         \
        for (; i + 8 <= n; i += 8) {                                                                          \
            __m256 x = _mm256_loadu_ps(a + i), z = _mm256_loadu_ps(b + i);                                    \
            _mm256_storeu_ps(y + i, V);                                                                       \
        }                                                                                                     \
        for (; i < n; i++) {                                                                                  \
            float x = a[i], z = b[i];                                                                         \
            y[i] = S;                                                                                         \
        }                                                                                                     \
    }                                                                                                         \
    static void NAME##_vs(float *y, const float *a, float s, size_t n)                                        \
    {                                                                                                         \
        const __m256 zs = _mm256_set1_ps(s);                                                                  \
        size_t i = 0;                                                                                         \
        for (; i + 8 <= n; i += 8) {                                                                          \
            __m256 x = _mm256_loadu_ps(a + i), z = zs;                                                        \
            _mm256_storeu_ps(y + i, V);                                                                       \
        }                                                                                                     \
        for (; i < n; i++) {                                                                                  \
            float x = a[i], z = s;                                                                            \
            y[i] = S;                                                                                         \
        }                                                                                                     \
    }                                                                                                         \
    static void NAME##_sv(float *y, float s, const float *b, size_t n)                                        \
    {                                                                                                         \
        const __m256 xs = _mm256_set1_ps(s);                                                                  \
        size_t i = 0;                                                                                         \
        for (; i + 8 <= n; i += 8) {                                                                          \
            __m256 x = xs, z = _mm256_loadu_ps(b + i);                                                        \
            _mm256_storeu_ps(y + i, V);                                                                       \
        }                                                                                                     \
        for (; i < n; i++) {                                                                                  \
            float x = s, z = b[i];                                                                            \
            y[i] = S;                                                                                         \
        }                                                                                                     \
    }

FUSE_BIN(fadd, _mm256_add_ps(x, z), x + z)
FUSE_BIN(fsub, _mm256_sub_ps(x, z), x - z)
FUSE_BIN(fmul, _mm256_mul_ps(x, z), x * z)
FUSE_BIN(fdiv, _mm256_div_ps(x, z), x / z)
FUSE_BIN(fmax,
         _mm256_blendv_ps(z, x, _mm256_or_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q), _mm256_cmp_ps(x, z, _CMP_GT_OQ))),
         (x != x || x > z) ? x : z)
FUSE_BIN(fmin,
         _mm256_blendv_ps(z, x, _mm256_or_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q), _mm256_cmp_ps(x, z, _CMP_LT_OQ))),
         (x != x || x < z) ? x : z)

/* kind: 0 Add, 1 Sub, 2 Mul, 3 Div, 4 Max, 5 Min. */
void fuse_bin_avx2(int kind, float *y, const float *a, const float *b, size_t n)
{
    switch (kind) {
    case 0: fadd_vv(y, a, b, n); break;
    case 1: fsub_vv(y, a, b, n); break;
    case 2: fmul_vv(y, a, b, n); break;
    case 3: fdiv_vv(y, a, b, n); break;
    case 4: fmax_vv(y, a, b, n); break;
    default: fmin_vv(y, a, b, n); break;
    }
}

void fuse_bin_scalar_avx2(int kind, float *y, const float *a, float s, int s_first, size_t n)
{
    switch (kind * 2 + (s_first != 0)) {
    case 0: fadd_vs(y, a, s, n); break;
    case 1: fadd_sv(y, s, a, n); break;
    case 2: fsub_vs(y, a, s, n); break;
    case 3: fsub_sv(y, s, a, n); break;
    case 4: fmul_vs(y, a, s, n); break;
    case 5: fmul_sv(y, s, a, n); break;
    case 6: fdiv_vs(y, a, s, n); break;
    case 7: fdiv_sv(y, s, a, n); break;
    case 8: fmax_vs(y, a, s, n); break;
    case 9: fmax_sv(y, s, a, n); break;
    case 10: fmin_vs(y, a, s, n); break;
    default: fmin_sv(y, s, a, n); break;
    }
}

#else /* not built for AVX2: never called (gemm_avx2_usable() is 0) */

void fuse_relu_avx2(float *y, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = x[i] < 0 ? 0.0f : x[i];
}

void fuse_clip_avx2(float *y, const float *x, size_t n, float lo, float hi)
{
    for (size_t i = 0; i < n; i++) {
        float v = x[i];
        v = v < lo ? lo : v;
        y[i] = v > hi ? hi : v;
    }
}

void fuse_bin_avx2(int kind, float *y, const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float x = a[i], z = b[i];
        switch (kind) {
        case 0: y[i] = x + z; break;
        case 1: y[i] = x - z; break;
        case 2: y[i] = x * z; break;
        case 3: y[i] = x / z; break;
        case 4: y[i] = (x != x || x > z) ? x : z; break;
        default: y[i] = (x != x || x < z) ? x : z; break;
        }
    }
}
void fuse_bin_scalar_avx2(int kind, float *y, const float *a, float s, int s_first, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float x = s_first ? s : a[i], z = s_first ? a[i] : s;
        switch (kind) {
        case 0: y[i] = x + z; break;
        case 1: y[i] = x - z; break;
        case 2: y[i] = x * z; break;
        case 3: y[i] = x / z; break;
        case 4: y[i] = (x != x || x > z) ? x : z; break;
        default: y[i] = (x != x || x < z) ? x : z; break;
        }
    }
}
#endif
