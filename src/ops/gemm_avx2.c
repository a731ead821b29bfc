/* The AVX2 + FMA single-precision GEMM micro-kernel (6 x 16) and the
 * depthwise-row helper, compiled with -mavx2 -mfma -mxsave (CMakeLists.txt) and
 * called only when gemm_avx2_usable() says the CPU and the OS support them.
 * On other targets (or compilers without those flags) the file compiles to
 * stubs that are never called. */
#include "ops/nn.h"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__) && defined(__XSAVE__)
#include <cpuid.h>
#include <immintrin.h>
#include <math.h>
#include <stdatomic.h>

/* The check itself: cpuid traps to the hypervisor in virtual machines and
 * costs microseconds, so gemm_avx2_cpu caches its answer. */
static int avx2_check(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return 0;
    int fma = (c >> 12) & 1, osxsave = (c >> 27) & 1, avx = (c >> 28) & 1;
    if (!fma || !osxsave || !avx)
        return 0;
    /* XCR0: the OS saves the XMM and YMM state. */
    if ((_xgetbv(0) & 6) != 6)
        return 0;
    if (__get_cpuid_max(0, NULL) < 7)
        return 0;
    __cpuid_count(7, 0, a, b, c, d);
    return (b >> 5) & 1; /* AVX2 */
}

int gemm_avx2_usable(void) { return gemm_avx2_cpu() && op_isa_level() >= OP_ISA_AVX2; }

int gemm_avx2_cpu(void)
{
    static atomic_int cached = -1; /* racing first calls store the same value */
    int v = atomic_load_explicit(&cached, memory_order_relaxed);
    if (v < 0) {
        v = avx2_check();
        atomic_store_explicit(&cached, v, memory_order_relaxed);
    }
    return v;
}

/* c[6][16] (row stride ldc) = or += A x b-panel over kc steps, row r of A at
 * a + r * as, advancing by ap per step, the b-panel's rows bs floats apart
 * (16 packed, ldb read in place); when storing (add == 0) and bias is set,
 * bias[r] is added to row r; then, when clamp is set, every value goes to
 * [clamp[0], clamp[1]] (Relu / Clip). Only rows r < rows of c are read or
 * written (the others are not computed either when rows is a constant).
 * as, ap and rows are constants at every call, so each caller gets its own
 * specialised copy. */
static inline void ukr_6x16(size_t kc, const float *a, size_t as, size_t ap, const float *b, size_t bs, float *c,
                            size_t ldc, int add, const float *bias, const float *clamp, size_t rows)
{
    __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps();
    __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();
    __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps();
    __m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();
    __m256 c40 = _mm256_setzero_ps(), c41 = _mm256_setzero_ps();
    __m256 c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
    for (size_t p = 0; p < kc; p++) {
        __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
        __m256 a0 = _mm256_broadcast_ss(a), a1 = _mm256_broadcast_ss(a + as);
        c00 = _mm256_fmadd_ps(a0, b0, c00);
        c01 = _mm256_fmadd_ps(a0, b1, c01);
        c10 = _mm256_fmadd_ps(a1, b0, c10);
        c11 = _mm256_fmadd_ps(a1, b1, c11);
        a0 = _mm256_broadcast_ss(a + 2 * as);
        a1 = _mm256_broadcast_ss(a + 3 * as);
        c20 = _mm256_fmadd_ps(a0, b0, c20);
        c21 = _mm256_fmadd_ps(a0, b1, c21);
        c30 = _mm256_fmadd_ps(a1, b0, c30);
        c31 = _mm256_fmadd_ps(a1, b1, c31);
        a0 = _mm256_broadcast_ss(a + 4 * as);
        a1 = _mm256_broadcast_ss(a + 5 * as);
        c40 = _mm256_fmadd_ps(a0, b0, c40);
        c41 = _mm256_fmadd_ps(a0, b1, c41);
        c50 = _mm256_fmadd_ps(a1, b0, c50);
        c51 = _mm256_fmadd_ps(a1, b1, c51);
        a += ap;
        b += bs;
    }
    if (add) {
        /* rows of c from rows on are neither read nor written */
        c00 = _mm256_add_ps(c00, _mm256_loadu_ps(c + 0 * ldc));
        c01 = _mm256_add_ps(c01, _mm256_loadu_ps(c + 0 * ldc + 8));
        if (rows > 1) {
            c10 = _mm256_add_ps(c10, _mm256_loadu_ps(c + 1 * ldc));
            c11 = _mm256_add_ps(c11, _mm256_loadu_ps(c + 1 * ldc + 8));
        }
        if (rows > 2) {
            c20 = _mm256_add_ps(c20, _mm256_loadu_ps(c + 2 * ldc));
            c21 = _mm256_add_ps(c21, _mm256_loadu_ps(c + 2 * ldc + 8));
        }
        if (rows > 3) {
            c30 = _mm256_add_ps(c30, _mm256_loadu_ps(c + 3 * ldc));
            c31 = _mm256_add_ps(c31, _mm256_loadu_ps(c + 3 * ldc + 8));
        }
        if (rows > 4) {
            c40 = _mm256_add_ps(c40, _mm256_loadu_ps(c + 4 * ldc));
            c41 = _mm256_add_ps(c41, _mm256_loadu_ps(c + 4 * ldc + 8));
        }
        if (rows > 5) {
            c50 = _mm256_add_ps(c50, _mm256_loadu_ps(c + 5 * ldc));
            c51 = _mm256_add_ps(c51, _mm256_loadu_ps(c + 5 * ldc + 8));
        }
    } else if (bias) {
        __m256 v = _mm256_broadcast_ss(bias + 0);
        c00 = _mm256_add_ps(c00, v);
        c01 = _mm256_add_ps(c01, v);
        v = _mm256_broadcast_ss(bias + 1);
        c10 = _mm256_add_ps(c10, v);
        c11 = _mm256_add_ps(c11, v);
        v = _mm256_broadcast_ss(bias + 2);
        c20 = _mm256_add_ps(c20, v);
        c21 = _mm256_add_ps(c21, v);
        v = _mm256_broadcast_ss(bias + 3);
        c30 = _mm256_add_ps(c30, v);
        c31 = _mm256_add_ps(c31, v);
        v = _mm256_broadcast_ss(bias + 4);
        c40 = _mm256_add_ps(c40, v);
        c41 = _mm256_add_ps(c41, v);
        v = _mm256_broadcast_ss(bias + 5);
        c50 = _mm256_add_ps(c50, v);
        c51 = _mm256_add_ps(c51, v);
    }
    if (clamp) {
        /* max(lo, x) then min(hi, x): x itself when NaN or equal (as
         * op_act_apply's Relu / Clip) */
        const __m256 lo = _mm256_broadcast_ss(clamp), hi = _mm256_broadcast_ss(clamp + 1);
        c00 = _mm256_min_ps(hi, _mm256_max_ps(lo, c00));
        c01 = _mm256_min_ps(hi, _mm256_max_ps(lo, c01));
        c10 = _mm256_min_ps(hi, _mm256_max_ps(lo, c10));
        c11 = _mm256_min_ps(hi, _mm256_max_ps(lo, c11));
        c20 = _mm256_min_ps(hi, _mm256_max_ps(lo, c20));
        c21 = _mm256_min_ps(hi, _mm256_max_ps(lo, c21));
        c30 = _mm256_min_ps(hi, _mm256_max_ps(lo, c30));
        c31 = _mm256_min_ps(hi, _mm256_max_ps(lo, c31));
        c40 = _mm256_min_ps(hi, _mm256_max_ps(lo, c40));
        c41 = _mm256_min_ps(hi, _mm256_max_ps(lo, c41));
        c50 = _mm256_min_ps(hi, _mm256_max_ps(lo, c50));
        c51 = _mm256_min_ps(hi, _mm256_max_ps(lo, c51));
    }
    _mm256_storeu_ps(c + 0 * ldc, c00);
    _mm256_storeu_ps(c + 0 * ldc + 8, c01);
    if (rows > 1) {
        _mm256_storeu_ps(c + 1 * ldc, c10);
        _mm256_storeu_ps(c + 1 * ldc + 8, c11);
    }
    if (rows > 2) {
        _mm256_storeu_ps(c + 2 * ldc, c20);
        _mm256_storeu_ps(c + 2 * ldc + 8, c21);
    }
    if (rows > 3) {
        _mm256_storeu_ps(c + 3 * ldc, c30);
        _mm256_storeu_ps(c + 3 * ldc + 8, c31);
    }
    if (rows > 4) {
        _mm256_storeu_ps(c + 4 * ldc, c40);
        _mm256_storeu_ps(c + 4 * ldc + 8, c41);
    }
    if (rows > 5) {
        _mm256_storeu_ps(c + 5 * ldc, c50);
        _mm256_storeu_ps(c + 5 * ldc + 8, c51);
    }
}

/* c[6][8] = or += A x the first 8 columns of a 16-wide b-panel, as
 * ukr_6x16 (A packed): the last, narrow panel of a product. */
static inline void ukr_6x8(size_t kc, const float *a, const float *b, float *c, size_t ldc, int add,
                           const float *bias)
{
    __m256 c0 = _mm256_setzero_ps(), c1 = _mm256_setzero_ps(), c2 = _mm256_setzero_ps();
    __m256 c3 = _mm256_setzero_ps(), c4 = _mm256_setzero_ps(), c5 = _mm256_setzero_ps();
    for (size_t p = 0; p < kc; p++) {
        __m256 b0 = _mm256_loadu_ps(b);
        c0 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 0), b0, c0);
        c1 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 1), b0, c1);
        c2 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 2), b0, c2);
        c3 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 3), b0, c3);
        c4 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 4), b0, c4);
        c5 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 5), b0, c5);
        a += 6;
        b += 16;
    }
    if (add) {
        c0 = _mm256_add_ps(c0, _mm256_loadu_ps(c + 0 * ldc));
        c1 = _mm256_add_ps(c1, _mm256_loadu_ps(c + 1 * ldc));
        c2 = _mm256_add_ps(c2, _mm256_loadu_ps(c + 2 * ldc));
        c3 = _mm256_add_ps(c3, _mm256_loadu_ps(c + 3 * ldc));
        c4 = _mm256_add_ps(c4, _mm256_loadu_ps(c + 4 * ldc));
        c5 = _mm256_add_ps(c5, _mm256_loadu_ps(c + 5 * ldc));
    } else if (bias) {
        c0 = _mm256_add_ps(c0, _mm256_broadcast_ss(bias + 0));
        c1 = _mm256_add_ps(c1, _mm256_broadcast_ss(bias + 1));
        c2 = _mm256_add_ps(c2, _mm256_broadcast_ss(bias + 2));
        c3 = _mm256_add_ps(c3, _mm256_broadcast_ss(bias + 3));
        c4 = _mm256_add_ps(c4, _mm256_broadcast_ss(bias + 4));
        c5 = _mm256_add_ps(c5, _mm256_broadcast_ss(bias + 5));
    }
    _mm256_storeu_ps(c + 0 * ldc, c0);
    _mm256_storeu_ps(c + 1 * ldc, c1);
    _mm256_storeu_ps(c + 2 * ldc, c2);
    _mm256_storeu_ps(c + 3 * ldc, c3);
    _mm256_storeu_ps(c + 4 * ldc, c4);
    _mm256_storeu_ps(c + 5 * ldc, c5);
}

void gemm_ukr_avx2_6x8_bias(size_t kc, const float *a, const float *b, float *c, size_t ldc, int add,
                            const float *bias)
{
    ukr_6x8(kc, a, b, c, ldc, add, bias);
}

/* Row r < rows of a tile column held in lanes 0..5 of v into c (row
 * stride ldc): stored, added to c, or stored plus bias[r]. */
static void narrow_store(__m256 v, float *c, size_t ldc, size_t rows, int add, const float *bias)
{
    float t[8];
    _mm256_storeu_ps(t, v);
    for (size_t r = 0; r < rows && r < 6; r++) {
        float *cr = c + r * ldc;
        *cr = add ? *cr + t[r] : bias ? t[r] + bias[r] : t[r];
    }
}

/* Columns col and col + 1 (when two) of up to 4 consecutive packed row
 * panels (g of them real; the others repeat the last one, not stored). */
static void narrow_group(size_t kc, const float *a, size_t g, const float *b, size_t col, int two, float *c,
                         size_t ldc, size_t rows, int add, const float *bias)
{
    const __m256i m6 = _mm256_setr_epi32(-1, -1, -1, -1, -1, -1, 0, 0);
    const size_t ps = kc * 6;
    const float *a0 = a, *a1 = a + (g > 1 ? 1 : 0) * ps, *a2 = a + (g > 2 ? 2 : g - 1) * ps,
                *a3 = a + (g > 3 ? 3 : g - 1) * ps;
    __m256 s00 = _mm256_setzero_ps(), s10 = _mm256_setzero_ps(), s20 = _mm256_setzero_ps(), s30 = _mm256_setzero_ps();
    __m256 s01 = _mm256_setzero_ps(), s11 = _mm256_setzero_ps(), s21 = _mm256_setzero_ps(), s31 = _mm256_setzero_ps();
    const float *bp = b + col;
    const size_t c1 = two ? 1 : 0;
    /* every step but the last read whole (lanes 6 and 7 hold the next
     * step's values, unused), the last masked: nothing past a panel */
    size_t p = 0;
    for (; p + 1 < kc; p++) {
        const __m256 b0 = _mm256_broadcast_ss(bp + p * 16), b1 = _mm256_broadcast_ss(bp + p * 16 + c1);
        __m256 x = _mm256_loadu_ps(a0 + p * 6);
        s00 = _mm256_fmadd_ps(x, b0, s00);
        s01 = _mm256_fmadd_ps(x, b1, s01);
        x = _mm256_loadu_ps(a1 + p * 6);
        s10 = _mm256_fmadd_ps(x, b0, s10);
        s11 = _mm256_fmadd_ps(x, b1, s11);
        x = _mm256_loadu_ps(a2 + p * 6);
        s20 = _mm256_fmadd_ps(x, b0, s20);
        s21 = _mm256_fmadd_ps(x, b1, s21);
        x = _mm256_loadu_ps(a3 + p * 6);
        s30 = _mm256_fmadd_ps(x, b0, s30);
        s31 = _mm256_fmadd_ps(x, b1, s31);
    }
    if (p < kc) {
        const __m256 b0 = _mm256_broadcast_ss(bp + p * 16), b1 = _mm256_broadcast_ss(bp + p * 16 + c1);
        __m256 x = _mm256_maskload_ps(a0 + p * 6, m6);
        s00 = _mm256_fmadd_ps(x, b0, s00);
        s01 = _mm256_fmadd_ps(x, b1, s01);
        x = _mm256_maskload_ps(a1 + p * 6, m6);
        s10 = _mm256_fmadd_ps(x, b0, s10);
        s11 = _mm256_fmadd_ps(x, b1, s11);
        x = _mm256_maskload_ps(a2 + p * 6, m6);
        s20 = _mm256_fmadd_ps(x, b0, s20);
        s21 = _mm256_fmadd_ps(x, b1, s21);
        x = _mm256_maskload_ps(a3 + p * 6, m6);
        s30 = _mm256_fmadd_ps(x, b0, s30);
        s31 = _mm256_fmadd_ps(x, b1, s31);
    }
    const __m256 sc[4][2] = {{s00, s01}, {s10, s11}, {s20, s21}, {s30, s31}};
    for (size_t i = 0; i < g; i++) {
        size_t r0 = i * 6;
        const float *bi = bias ? bias + r0 : NULL;
        narrow_store(sc[i][0], c + r0 * ldc + col, ldc, rows - r0, add, bi);
        if (two)
            narrow_store(sc[i][1], c + r0 * ldc + col + 1, ldc, rows - r0, add, bi);
    }
}

void gemm_ukr_avx2_narrow(size_t kc, const float *a, size_t np, const float *b, size_t cols, float *c, size_t ldc,
                          size_t rows, int add, const float *bias)
{
    for (size_t pi = 0; pi < np; pi += 4) {
        size_t g = np - pi < 4 ? np - pi : 4, r0 = pi * 6;
        const float *ap = a + pi * kc * 6, *bi = bias ? bias + r0 : NULL;
        float *cp = c + r0 * ldc;
        for (size_t col = 0; col < cols; col += 2)
            narrow_group(kc, ap, g, b, col, col + 1 < cols, cp, ldc, rows - r0, add, bi);
    }
}

/* A packed: the 6 row values of each step stored together. */
void gemm_ukr_avx2_bias(size_t kc, const float *a, const float *b, float *c, size_t ldc, int add, const float *bias)
{
    ukr_6x16(kc, a, 1, 6, b, 16, c, ldc, add, bias, NULL, 6);
}

/* A read unpacked: 6 rows of stride lda. */
void gemm_ukr_avx2_rows_bias(size_t kc, const float *a, size_t lda, const float *b, float *c, size_t ldc, int add,
                             const float *bias)
{
    ukr_6x16(kc, a, lda, 1, b, 16, c, ldc, add, bias, NULL, 6);
}

/* A packed, B rows of stride ldb (16 when packed), clamped when asked. */
void gemm_ukr_avx2_bs(size_t kc, const float *a, const float *b, size_t ldb, float *c, size_t ldc, int add,
                      const float *bias, const float *clamp)
{
    ukr_6x16(kc, a, 1, 6, b, ldb, c, ldc, add, bias, clamp, 6);
}

/* np full row panels of A packed one after the other (kc * 6 floats
 * each) against one b-panel: gemm_ukr_avx2_bs on each, rows 6 i of c and
 * of bias for panel i. */
void gemm_ukr_avx2_strips(size_t kc, const float *a, size_t np, const float *b, size_t ldb, float *c, size_t ldc,
                          int add, const float *bias, const float *clamp)
{
    for (size_t i = 0; i < np; i++)
        ukr_6x16(kc, a + i * kc * 6, 1, 6, b, ldb, c + i * 6 * ldc, ldc, add, bias ? bias + i * 6 : NULL, clamp, 6);
}

/* gemm_ukr_avx2_bs for a last, partial row panel: rows (1 to 6) of the
 * tile stored (or added to), the others neither read nor written. */
void gemm_ukr_avx2_bs_rows(size_t kc, const float *a, const float *b, size_t ldb, float *c, size_t ldc, int add,
                           const float *bias, const float *clamp, size_t rows)
{
    /* a copy per row count: the rows not stored are not computed */
    switch (rows) {
    case 1: ukr_6x16(kc, a, 1, 6, b, ldb, c, ldc, add, bias, clamp, 1); break;
    case 2: ukr_6x16(kc, a, 1, 6, b, ldb, c, ldc, add, bias, clamp, 2); break;
    case 3: ukr_6x16(kc, a, 1, 6, b, ldb, c, ldc, add, bias, clamp, 3); break;
    case 4: ukr_6x16(kc, a, 1, 6, b, ldb, c, ldc, add, bias, clamp, 4); break;
    case 5: ukr_6x16(kc, a, 1, 6, b, ldb, c, ldc, add, bias, clamp, 5); break;
    default: ukr_6x16(kc, a, 1, 6, b, ldb, c, ldc, add, bias, clamp, 6); break;
    }
}

/* A read unpacked (rows of stride lda), B packed, clamped when asked. */
void gemm_ukr_avx2_rows_act(size_t kc, const float *a, size_t lda, const float *b, float *c, size_t ldc, int add,
                            const float *bias, const float *clamp)
{
    ukr_6x16(kc, a, lda, 1, b, 16, c, ldc, add, bias, clamp, 6);
}

/* sum_p a[p] b[p] over p < k: 32 partial sums (lane l of accumulator r
 * takes p = 32 i + 8 r + l), added in a fixed order, then the tail in
 * order. */
float gemm_dot_avx2(const float *a, const float *b, size_t k)
{
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps(), s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
    size_t p = 0;
    for (; p + 32 <= k; p += 32) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + p), _mm256_loadu_ps(b + p), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + p + 8), _mm256_loadu_ps(b + p + 8), s1);
        s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + p + 16), _mm256_loadu_ps(b + p + 16), s2);
        s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + p + 24), _mm256_loadu_ps(b + p + 24), s3);
    }
    for (; p + 8 <= k; p += 8)
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + p), _mm256_loadu_ps(b + p), s0);
    __m256 s = _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3));
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    float r = _mm_cvtss_f32(h);
    for (; p < k; p++)
        r = fmaf(a[p], b[p], r);
    return r;
}

/* Depthwise convolution, interior of one output row: for i in [0, n),
 * dst[i] += sum over taps t (in order) of w[t] * src[t][i * stride], all
 * taps in bounds. 8 outputs at a time in a register over every tap. */
void dw_row_avx2(float *dst, size_t n, const float *const *src, const float *w, int ntaps, int stride)
{
    size_t i = 0;
    if (stride == 1) {
        for (; i + 8 <= n; i += 8) {
            __m256 acc = _mm256_loadu_ps(dst + i);
            for (int t = 0; t < ntaps; t++)
                acc = _mm256_fmadd_ps(_mm256_set1_ps(w[t]), _mm256_loadu_ps(src[t] + i), acc);
            _mm256_storeu_ps(dst + i, acc);
        }
    } else if (stride == 2) {
        for (; i + 8 <= n; i += 8) {
            __m256 acc = _mm256_loadu_ps(dst + i);
            for (int t = 0; t < ntaps; t++) {
                const float *s = src[t] + 2 * i;
                __m256 lo = _mm256_loadu_ps(s), hi = _mm256_loadu_ps(s + 8);
                /* even elements: lo0 lo2 lo4 lo6 hi0 hi2 hi4 hi6 */
                __m256 ev = _mm256_shuffle_ps(lo, hi, 0x88); /* lo0 lo2 hi0 hi2 | lo4 lo6 hi4 hi6 */
                ev = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(ev), 0xD8));
                acc = _mm256_fmadd_ps(_mm256_set1_ps(w[t]), ev, acc);
            }
            _mm256_storeu_ps(dst + i, acc);
        }
    }
    for (; i < n; i++) {
        float acc = dst[i];
        for (int t = 0; t < ntaps; t++)
            acc = fmaf(w[t], src[t][i * (size_t)stride], acc);
        dst[i] = acc;
    }
}

#else

int gemm_avx2_usable(void) { return 0; }

int gemm_avx2_cpu(void) { return 0; }

void gemm_ukr_avx2_bias(size_t kc, const float *a, const float *b, float *c, size_t ldc, int add, const float *bias)
{
    (void)kc;
    (void)a;
    (void)b;
    (void)c;
    (void)ldc;
    (void)add;
    (void)bias;
}

void gemm_ukr_avx2_6x8_bias(size_t kc, const float *a, const float *b, float *c, size_t ldc, int add,
                            const float *bias)
{
    (void)kc;
    (void)a;
    (void)b;
    (void)c;
    (void)ldc;
    (void)add;
    (void)bias;
}

void gemm_ukr_avx2_narrow(size_t kc, const float *a, size_t np, const float *b, size_t cols, float *c, size_t ldc,
                          size_t rows, int add, const float *bias)
{
    (void)kc;
    (void)a;
    (void)np;
    (void)b;
    (void)cols;
    (void)c;
    (void)ldc;
    (void)rows;
    (void)add;
    (void)bias;
}

void gemm_ukr_avx2_rows_bias(size_t kc, const float *a, size_t lda, const float *b, float *c, size_t ldc, int add,
                             const float *bias)
{
    (void)kc;
    (void)a;
    (void)lda;
    (void)b;
    (void)c;
    (void)ldc;
    (void)add;
    (void)bias;
}

void gemm_ukr_avx2_bs(size_t kc, const float *a, const float *b, size_t ldb, float *c, size_t ldc, int add,
                      const float *bias, const float *clamp)
{
    (void)kc;
    (void)a;
    (void)b;
    (void)ldb;
    (void)c;
    (void)ldc;
    (void)add;
    (void)bias;
    (void)clamp;
}

void gemm_ukr_avx2_strips(size_t kc, const float *a, size_t np, const float *b, size_t ldb, float *c, size_t ldc,
                          int add, const float *bias, const float *clamp)
{
    (void)kc;
    (void)a;
    (void)np;
    (void)b;
    (void)ldb;
    (void)c;
    (void)ldc;
    (void)add;
    (void)bias;
    (void)clamp;
}

void gemm_ukr_avx2_bs_rows(size_t kc, const float *a, const float *b, size_t ldb, float *c, size_t ldc, int add,
                           const float *bias, const float *clamp, size_t rows)
{
    (void)kc;
    (void)a;
    (void)b;
    (void)ldb;
    (void)c;
    (void)ldc;
    (void)add;
    (void)bias;
    (void)clamp;
    (void)rows;
}

void gemm_ukr_avx2_rows_act(size_t kc, const float *a, size_t lda, const float *b, float *c, size_t ldc, int add,
                            const float *bias, const float *clamp)
{
    (void)kc;
    (void)a;
    (void)lda;
    (void)b;
    (void)c;
    (void)ldc;
    (void)add;
    (void)bias;
    (void)clamp;
}

float gemm_dot_avx2(const float *a, const float *b, size_t k)
{
    (void)a;
    (void)b;
    (void)k;
    return 0.0f;
}

void dw_row_avx2(float *dst, size_t n, const float *const *src, const float *w, int ntaps, int stride)
{
    (void)dst;
    (void)n;
    (void)src;
    (void)w;
    (void)ntaps;
    (void)stride;
}

#endif
