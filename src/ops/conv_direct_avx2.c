/* The AVX2/FMA tile of the direct convolution for few input channels (see
 * nn_conv_direct.c): 4 output channels x 24 output pixels, the pixels in
 * the vector lanes. Compiled with -mavx2 -mfma; called only when
 * gemm_avx2_usable(). */
#include "ops/nn.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

/* y[0..nvalid) = the first nvalid lanes of a, b, c (nvalid <= 8 nv). */
static inline void store_row(float *y, __m256 a, __m256 b, __m256 c, size_t nvalid, const int nv)
{
    if (!y)
        return;
    if (nvalid == (size_t)nv * 8) {
        _mm256_storeu_ps(y, a);
        if (nv > 1)
            _mm256_storeu_ps(y + 8, b);
        if (nv > 2)
            _mm256_storeu_ps(y + 16, c);
        return;
    }
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    size_t full = nvalid / 8;
    __m256 last = full == 0 ? a : full == 1 ? b : c;
    if (full > 0)
        _mm256_storeu_ps(y, a);
    if (full > 1)
        _mm256_storeu_ps(y + 8, b);
    __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(nvalid % 8)), idx);
    _mm256_maskstore_ps(y + full * 8, mask, last);
}

#define CD_FMA(v, c0, c1, c2)                                                                                        \
    do {                                                                                                             \
        c0 = _mm256_fmadd_ps(v, x0, c0);                                                                             \
        if (nv > 1)                                                                                                  \
            c1 = _mm256_fmadd_ps(v, x1, c1);                                                                         \
        if (nv > 2)                                                                                                  \
            c2 = _mm256_fmadd_ps(v, x2, c2);                                                                         \
    } while (0)

#define CD_EPI(v, c0, c1, c2, op)                                                                                    \
    do {                                                                                                             \
        c0 = op(c0, v);                                                                                              \
        c1 = op(c1, v);                                                                                              \
        c2 = op(c2, v);                                                                                              \
    } while (0)

static inline __m256 clampv(__m256 v, __m256 lo, __m256 hi) { return _mm256_min_ps(hi, _mm256_max_ps(lo, v)); }

/* nv vectors of 8 pixels (1 to 3) x 4 channels. */
static inline void tile(size_t ntaps, const float *const *src, size_t off, const float *w, float *const *y,
                        size_t nvalid, const float *bias, const float *clamp, const int nv)
{
    __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps(), c02 = _mm256_setzero_ps();
    __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps(), c12 = _mm256_setzero_ps();
    __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps(), c22 = _mm256_setzero_ps();
    __m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps(), c32 = _mm256_setzero_ps();
    for (size_t t = 0; t < ntaps; t++) {
        const float *s = src[t] + off;
        const __m256 x0 = _mm256_loadu_ps(s);
        const __m256 x1 = nv > 1 ? _mm256_loadu_ps(s + 8) : x0;
        const __m256 x2 = nv > 2 ? _mm256_loadu_ps(s + 16) : x0;
        __m256 v = _mm256_broadcast_ss(w);
        CD_FMA(v, c00, c01, c02);
        v = _mm256_broadcast_ss(w + 1);
        CD_FMA(v, c10, c11, c12);
        v = _mm256_broadcast_ss(w + 2);
        CD_FMA(v, c20, c21, c22);
        v = _mm256_broadcast_ss(w + 3);
        CD_FMA(v, c30, c31, c32);
        w += 4;
    }
    if (bias) {
        __m256 v = _mm256_broadcast_ss(bias);
        CD_EPI(v, c00, c01, c02, _mm256_add_ps);
        v = _mm256_broadcast_ss(bias + 1);
        CD_EPI(v, c10, c11, c12, _mm256_add_ps);
        v = _mm256_broadcast_ss(bias + 2);
        CD_EPI(v, c20, c21, c22, _mm256_add_ps);
        v = _mm256_broadcast_ss(bias + 3);
        CD_EPI(v, c30, c31, c32, _mm256_add_ps);
    }
    if (clamp) {
        /* max(lo, v) then min(hi, v), v second: a NaN stays NaN */
        const __m256 lo = _mm256_broadcast_ss(clamp), hi = _mm256_broadcast_ss(clamp + 1);
        c00 = clampv(c00, lo, hi);
        c01 = clampv(c01, lo, hi);
        c02 = clampv(c02, lo, hi);
        c10 = clampv(c10, lo, hi);
        c11 = clampv(c11, lo, hi);
        c12 = clampv(c12, lo, hi);
        c20 = clampv(c20, lo, hi);
        c21 = clampv(c21, lo, hi);
        c22 = clampv(c22, lo, hi);
        c30 = clampv(c30, lo, hi);
        c31 = clampv(c31, lo, hi);
        c32 = clampv(c32, lo, hi);
    }
    store_row(y[0], c00, c01, c02, nvalid, nv);
    store_row(y[1], c10, c11, c12, nvalid, nv);
    store_row(y[2], c20, c21, c22, nvalid, nv);
    store_row(y[3], c30, c31, c32, nvalid, nv);
}

void conv_direct_tile_avx2(size_t ntaps, const float *const *src, size_t off, const float *w, float *const *y,
                           size_t nvalid, const float *bias, const float *clamp)
{
    if (nvalid > 16)
        tile(ntaps, src, off, w, y, nvalid, bias, clamp, 3);
    else if (nvalid > 8)
        tile(ntaps, src, off, w, y, nvalid, bias, clamp, 2);
    else
        tile(ntaps, src, off, w, y, nvalid, bias, clamp, 1);
}

void conv_direct_split_avx2(const float *p, size_t n, float *even, float *odd)
{
    for (size_t i = 0; i < n; i += 8) {
        __m256 a = _mm256_loadu_ps(p + 2 * i), b = _mm256_loadu_ps(p + 2 * i + 8);
        __m256 e = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));
        __m256 o = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1));
        _mm256_storeu_ps(even + i, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), _MM_SHUFFLE(3, 1, 2, 0))));
        _mm256_storeu_ps(odd + i, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(o), _MM_SHUFFLE(3, 1, 2, 0))));
    }
}

#else

void conv_direct_tile_avx2(size_t ntaps, const float *const *src, size_t off, const float *w, float *const *y,
                           size_t nvalid, const float *bias, const float *clamp)
{
    (void)ntaps;
    (void)src;
    (void)off;
    (void)w;
    (void)y;
    (void)nvalid;
    (void)bias;
    (void)clamp;
}

void conv_direct_split_avx2(const float *p, size_t n, float *even, float *odd)
{
    (void)p;
    (void)n;
    (void)even;
    (void)odd;
}

#endif
