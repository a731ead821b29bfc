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


/* Tap b of one input row for 8 stride-2 outputs whose first tap is p[0]:
 * p[b], p[b + 2], ..., p[b + 14] in lane order 0 1 4 5 2 3 6 7 (shuffle_ps
 * of two loads works within 128-bit halves; s2_store puts them back).
 * Taps b and b + 1 are the even (0x88) and odd (0xDD) lanes of the 16
 * floats at p + b; at odd kw tap 0 comes alone first (the even lanes at p)
 * and the pairs from b = 1, so that at kw >= 2 no load reads past
 * p[14 + kw - 1], the last tap of output 7. s2_rows folds the taps of one
 * input row into two sets of 8 outputs at p0 and p1 (two chains of maxes
 * in flight), in tap order: the first tap, then v > acc ? v : acc, which
 * is _mm256_max_ps(v, acc). */
static void s2_rows(const float *p0, const float *p1, int64_t kw, __m256 *acc0, __m256 *acc1, int first)
{
    int64_t b = 0;
    if (kw & 1) {
        __m256 v0 = _mm256_shuffle_ps(_mm256_loadu_ps(p0), _mm256_loadu_ps(p0 + 8), 0x88);
        __m256 v1 = _mm256_shuffle_ps(_mm256_loadu_ps(p1), _mm256_loadu_ps(p1 + 8), 0x88);
        *acc0 = first ? v0 : _mm256_max_ps(v0, *acc0);
        *acc1 = first ? v1 : _mm256_max_ps(v1, *acc1);
        first = 0;
        b = 1;
    }
    for (; b < kw; b += 2) {
        __m256 l0 = _mm256_loadu_ps(p0 + b), h0 = _mm256_loadu_ps(p0 + b + 8);
        __m256 l1 = _mm256_loadu_ps(p1 + b), h1 = _mm256_loadu_ps(p1 + b + 8);
        __m256 e0 = _mm256_shuffle_ps(l0, h0, 0x88), e1 = _mm256_shuffle_ps(l1, h1, 0x88);
        *acc0 = first ? e0 : _mm256_max_ps(e0, *acc0);
        *acc1 = first ? e1 : _mm256_max_ps(e1, *acc1);
        first = 0;
        *acc0 = _mm256_max_ps(_mm256_shuffle_ps(l0, h0, 0xDD), *acc0);
        *acc1 = _mm256_max_ps(_mm256_shuffle_ps(l1, h1, 0xDD), *acc1);
    }
}

static void s2_store(float *y, __m256 a)
{
    _mm256_storeu_ps(y, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(a), _MM_SHUFFLE(3, 1, 2, 0))));
}

/* The 3 taps of one input row for 8 outputs at p (as in s2_rows). */
typedef struct s2_taps {
    __m256 t[3];
} s2_taps;

static s2_taps s2_taps3(const float *p)
{
    s2_taps r;
    __m256 l = _mm256_loadu_ps(p + 1), h = _mm256_loadu_ps(p + 9);
    r.t[0] = _mm256_shuffle_ps(_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8), 0x88);
    r.t[1] = _mm256_shuffle_ps(l, h, 0x88);
    r.t[2] = _mm256_shuffle_ps(l, h, 0xDD);
    return r;
}

static __m256 s2_fold3(__m256 acc, s2_taps v)
{
    return _mm256_max_ps(v.t[2], _mm256_max_ps(v.t[1], _mm256_max_ps(v.t[0], acc)));
}

static __m256 s2_first3(s2_taps v)
{
    return _mm256_max_ps(v.t[2], _mm256_max_ps(v.t[1], v.t[0]));
}

/* 3x3 windows at stride 2 down and across, two output rows x 16 outputs
 * (blocks at columns c0 and c1): the 5 input rows below p each read once,
 * row 2 being the last of the first output row's window and the first of
 * the second's. */
static void s2_k3_pair(const float *p, int64_t W, int64_t c0, int64_t c1, float *y, int64_t ystep)
{
    const float *q0 = p + 2 * c0, *q1 = p + 2 * c1;
    __m256 a0 = s2_first3(s2_taps3(q0)), a1 = s2_first3(s2_taps3(q1));
    a0 = s2_fold3(a0, s2_taps3(q0 + W));
    a1 = s2_fold3(a1, s2_taps3(q1 + W));
    s2_taps m0 = s2_taps3(q0 + 2 * W), m1 = s2_taps3(q1 + 2 * W);
    a0 = s2_fold3(a0, m0);
    a1 = s2_fold3(a1, m1);
    __m256 b0 = s2_first3(m0), b1 = s2_first3(m1);
    b0 = s2_fold3(b0, s2_taps3(q0 + 3 * W));
    b1 = s2_fold3(b1, s2_taps3(q1 + 3 * W));
    b0 = s2_fold3(b0, s2_taps3(q0 + 4 * W));
    b1 = s2_fold3(b1, s2_taps3(q1 + 4 * W));
    s2_store(y + c0, a0);
    s2_store(y + c1, a1);
    s2_store(y + ystep + c0, b0);
    s2_store(y + ystep + c1, b1);
}

void op_maxpool_s2_avx2(const float *src, int64_t W, int64_t sh, int64_t nr, int64_t kw, float *y, int64_t ystep,
                        int64_t rows, int64_t n)
{
    for (int64_t r = 0; r < rows; r++) {
        const float *s = src + r * sh * W;
        float *yr = y + r * ystep;
        if (n < 8) {
            for (int64_t i = 0; i < n; i++) {
                float b = s[2 * i];
                for (int64_t a = 0; a < nr; a++)
                    for (int64_t c = 0; c < kw; c++) {
                        float v = s[a * W + 2 * i + c];
                        b = v > b ? v : b;
                    }
                yr[i] = b;
            }
            continue;
        }
        /* 16 outputs at a time; at the end vectors at n - 8, which overlap
         * the ones before them (the same values again) */
        if (sh == 2 && nr == 3 && kw == 3 && r + 1 < rows) {
            for (int64_t i = 0; i < n; i += 16)
                s2_k3_pair(s, W, i + 8 <= n ? i : n - 8, i + 16 <= n ? i + 8 : n - 8, yr, ystep);
            r++;
            continue;
        }
        for (int64_t i = 0; i < n; i += 16) {
            const int64_t c0 = i + 8 <= n ? i : n - 8, c1 = i + 16 <= n ? i + 8 : n - 8;
            __m256 a0 = _mm256_setzero_ps(), a1 = a0;
            const float *p0 = s + 2 * c0, *p1 = s + 2 * c1;
            if (kw == 3) {
                a0 = s2_first3(s2_taps3(p0));
                a1 = s2_first3(s2_taps3(p1));
                for (int64_t a = 1; a < nr; a++) {
                    a0 = s2_fold3(a0, s2_taps3(p0 + a * W));
                    a1 = s2_fold3(a1, s2_taps3(p1 + a * W));
                }
            } else {
                for (int64_t a = 0; a < nr; a++)
                    s2_rows(p0 + a * W, p1 + a * W, kw, &a0, &a1, a == 0);
            }
            s2_store(yr + c0, a0);
            s2_store(yr + c1, a1);
        }
    }
}

/* The fold of one vector of outputs at column c of a row whose taps are
 * at s + off[t]. */
static __m256 max_taps(const float *s, const int64_t *off, int nt, int64_t c)
{
    __m256 a = _mm256_loadu_ps(s + off[0] + c);
    for (int t = 1; t < nt; t++)
        a = _mm256_max_ps(_mm256_loadu_ps(s + off[t] + c), a);
    return a;
}

void op_maxpool_rows_avx2(const float *src, int64_t rstep, const int64_t *off, int nt, float *y, int64_t ystep,
                          int64_t rows, int64_t n)
{
    for (int64_t r = 0; r < rows; r++) {
        const float *s = src + r * rstep;
        float *yr = y + r * ystep;
        int64_t i = 0;
        for (; i + 32 <= n; i += 32) {
            const float *t0 = s + off[0] + i;
            __m256 a0 = _mm256_loadu_ps(t0), a1 = _mm256_loadu_ps(t0 + 8), a2 = _mm256_loadu_ps(t0 + 16),
                   a3 = _mm256_loadu_ps(t0 + 24);
            for (int t = 1; t < nt; t++) {
                const float *q = s + off[t] + i;
                a0 = _mm256_max_ps(_mm256_loadu_ps(q), a0);
                a1 = _mm256_max_ps(_mm256_loadu_ps(q + 8), a1);
                a2 = _mm256_max_ps(_mm256_loadu_ps(q + 16), a2);
                a3 = _mm256_max_ps(_mm256_loadu_ps(q + 24), a3);
            }
            _mm256_storeu_ps(yr + i, a0);
            _mm256_storeu_ps(yr + i + 8, a1);
            _mm256_storeu_ps(yr + i + 16, a2);
            _mm256_storeu_ps(yr + i + 24, a3);
        }
        for (; i + 16 <= n; i += 16) {
            const float *t0 = s + off[0] + i;
            __m256 a0 = _mm256_loadu_ps(t0), a1 = _mm256_loadu_ps(t0 + 8);
            for (int t = 1; t < nt; t++) {
                const float *q = s + off[t] + i;
                a0 = _mm256_max_ps(_mm256_loadu_ps(q), a0);
                a1 = _mm256_max_ps(_mm256_loadu_ps(q + 8), a1);
            }
            _mm256_storeu_ps(yr + i, a0);
            _mm256_storeu_ps(yr + i + 8, a1);
        }
        if (i < n && n >= 8) {
            if (i + 8 < n) {
                _mm256_storeu_ps(yr + i, max_taps(s, off, nt, i));
                i += 8;
            }
            /* the last vector overlaps the one before it (same values again) */
            _mm256_storeu_ps(yr + n - 8, max_taps(s, off, nt, n - 8));
        } else if (i < n) { /* n < 8 */
            for (int64_t c = 0; c < n; c++) {
                float b = s[off[0] + c];
                for (int t = 1; t < nt; t++)
                    b = s[off[t] + c] > b ? s[off[t] + c] : b;
                yr[c] = b;
            }
        }
    }
}

/* Means of 4 planes at once (4 independent sums), lane l of a plane's sum
 * taking its elements l, l + 8, ... then the tail element j into lane j,
 * combined as the portable loop does. */
void op_gap_avx2(const float *x, size_t sp, float *y, size_t planes)
{
    size_t pl = 0;
    for (; pl < planes; pl += 4) {
        size_t np = planes - pl < 4 ? planes - pl : 4;
        const float *v0 = x + pl * sp, *v1 = np > 1 ? v0 + sp : v0, *v2 = np > 2 ? v0 + 2 * sp : v0,
                    *v3 = np > 3 ? v0 + 3 * sp : v0;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        size_t i = 0;
        for (; i + 8 <= sp; i += 8) {
            a0 = _mm256_add_ps(a0, _mm256_loadu_ps(v0 + i));
            a1 = _mm256_add_ps(a1, _mm256_loadu_ps(v1 + i));
            a2 = _mm256_add_ps(a2, _mm256_loadu_ps(v2 + i));
            a3 = _mm256_add_ps(a3, _mm256_loadu_ps(v3 + i));
        }
        float acc[4][8];
        _mm256_storeu_ps(acc[0], a0);
        _mm256_storeu_ps(acc[1], a1);
        _mm256_storeu_ps(acc[2], a2);
        _mm256_storeu_ps(acc[3], a3);
        const float *vs[4] = {v0, v1, v2, v3};
        for (size_t k = 0; k < np; k++) {
            float *a = acc[k];
            for (size_t j = i, l = 0; j < sp; j++, l++)
                a[l] += vs[k][j];
            float s = ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]));
            y[pl + k] = sp ? s / (float)sp : 0.0f;
        }
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

void op_maxpool_rows_avx2(const float *src, int64_t rstep, const int64_t *off, int nt, float *y, int64_t ystep,
                          int64_t rows, int64_t n)
{
    (void)src;
    (void)rstep;
    (void)off;
    (void)nt;
    (void)y;
    (void)ystep;
    (void)rows;
    (void)n;
}

void op_maxpool_s2_avx2(const float *src, int64_t W, int64_t sh, int64_t nr, int64_t kw, float *y, int64_t ystep,
                        int64_t rows, int64_t n)
{
    (void)src;
    (void)W;
    (void)sh;
    (void)nr;
    (void)kw;
    (void)y;
    (void)ystep;
    (void)rows;
    (void)n;
}

void op_gap_avx2(const float *x, size_t sp, float *y, size_t planes)
{
    (void)x;
    (void)sp;
    (void)y;
    (void)planes;
}

#endif
