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


/* lane_tab + 8 - n (0 <= n <= 8): the first n lanes set. */
static const int lane_tab[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};

static __m256i lanes(int64_t n)
{
    n = n < 0 ? 0 : n > 8 ? 8 : n;
    return _mm256_loadu_si256((const __m256i *)(lane_tab + 8 - n));
}

void op_pool_deint_avx2(const float *src, int64_t n, float *d, int64_t lp)
{
    int64_t t = 0;
    float *e = d, *o = d + lp;
    for (; 2 * t < n; t += 8) {
        __m256 lo, hi;
        if (2 * t + 16 <= n) {
            lo = _mm256_loadu_ps(src + 2 * t);
            hi = _mm256_loadu_ps(src + 2 * t + 8);
        } else { /* the tail; zeros after it, in the slack */
            lo = _mm256_maskload_ps(src + 2 * t, lanes(n - 2 * t));
            hi = _mm256_maskload_ps(src + 2 * t + 8, lanes(n - 2 * t - 8));
        }
        __m256 ev = _mm256_shuffle_ps(lo, hi, 0x88), od = _mm256_shuffle_ps(lo, hi, 0xDD);
        _mm256_storeu_ps(e + t, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(ev), 0xD8)));
        _mm256_storeu_ps(o + t, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(od), 0xD8)));
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

void op_pool_deint_avx2(const float *src, int64_t n, float *d, int64_t lp)
{
    (void)src;
    (void)n;
    (void)d;
    (void)lp;
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

void op_gap_avx2(const float *x, size_t sp, float *y, size_t planes)
{
    (void)x;
    (void)sp;
    (void)y;
    (void)planes;
}

#endif
