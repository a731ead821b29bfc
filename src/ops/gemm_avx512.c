/* The AVX-512 single-precision GEMM micro-kernels, compiled with -mavx512f
 * -mavx512vl -mavx512dq (CMakeLists.txt: every *_avx512*.c file of a src/
 * folder) and called only when gemm_avx512_usable() says the CPU and the OS
 * support them. They read the AVX2 kernels' layout (6-row packed A panels,
 * 16-column packed B panels: op_sgemm_layout stays 6 x 16, so the packed
 * weights, the im2col panels and Winograd's products are the same), one zmm
 * register per tile row: two row panels at a time (12 x 16, 12
 * accumulators, the B step loaded once, A broadcast from memory into the
 * FMA), and a last panel of 5 to 15 columns computed as an 8- or 16-column
 * tile stored with a mask (1 to 4: column sums, narrow8). Every element is the same FMA chain over the K steps in
 * order as the AVX2 kernel's, so the results are the same bits. On other
 * targets the file compiles to stubs that are never called. */
#include "ops/nn.h"

#if defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512VL__) && defined(__AVX512DQ__)
#include <cpuid.h>
#include <immintrin.h>

/* gemm_avx2_cpu's checks, then cpuid: AVX-512 F, DQ, VL; XCR0: the OS
 * also saves the opmask and both halves of the ZMM state (bits 5, 6, 7).
 * Not cached: op_isa_level calls it once. */
int gemm_avx512_cpu(void)
{
    if (!gemm_avx2_cpu() || (_xgetbv(0) & 0xe0) != 0xe0)
        return 0;
    unsigned a, b, c, d;
    __cpuid_count(7, 0, a, b, c, d);
    return ((b >> 16) & 1) && ((b >> 17) & 1) && ((b >> 31) & 1);
}

/* Row r of a tile into c: added to c's values (add), or plus bias[r]
 * (bias), then clamped to [lo, hi] (clamp); the columns where m is set. */
static inline __attribute__((always_inline)) void store_z(__m512 v, float *cr, __mmask16 m, int add,
                                                          const float *bias, int r, const float *clamp, __m512 lo,
                                                          __m512 hi)
{
    if (add)
        v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, cr));
    else if (bias)
        v = _mm512_add_ps(v, _mm512_set1_ps(bias[r]));
    /* max(lo, x) then min(hi, x): x itself when NaN or equal (as
     * op_act_apply's Relu / Clip) */
    if (clamp)
        v = _mm512_min_ps(hi, _mm512_max_ps(lo, v));
    _mm512_mask_storeu_ps(cr, m, v);
}

static inline __attribute__((always_inline)) void store_y(__m256 v, float *cr, __mmask8 m, int add,
                                                          const float *bias, int r)
{
    if (add)
        v = _mm256_add_ps(v, _mm256_maskz_loadu_ps(m, cr));
    else if (bias)
        v = _mm256_add_ps(v, _mm256_set1_ps(bias[r]));
    _mm256_mask_storeu_ps(cr, m, v);
}

/* The 12 accumulators as named variables (an array stays in memory). */
#define ROWS_12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define A_ROW(r) ((r) < 6 ? a[(r) * as] : a1[((r) - 6) * as])

/* c[R][16] (row stride ldc, columns where m is set) = or += A x b-panel
 * over kc steps: row r < 6 of A at a + r * as, row r >= 6 at a + a2 +
 * (r - 6) * as, advancing by ap per step; the b-panel's rows bs floats
 * apart. When storing (add == 0) and bias is set, bias[r] is added to row
 * r; then, when clamp is set, every value goes to [clamp[0], clamp[1]].
 * Only rows r < rows are read or written. R, as, ap are constants at every
 * call (one specialised copy each). */
static inline __attribute__((always_inline)) void ukr_z(size_t kc, const float *a, size_t as, size_t ap, size_t a2,
                                                        const float *b, size_t bs, float *c, size_t ldc, int add,
                                                        const float *bias, const float *clamp, const int R,
                                                        size_t rows, __mmask16 m)
{
#define DECL(r) __m512 c##r = _mm512_setzero_ps();
    ROWS_12(DECL)
#undef DECL
    const float *a1 = a + a2;
    for (size_t p = 0; p < kc; p++) {
        const __m512 bv = _mm512_loadu_ps(b);
#define FMA(r)                                                                                                   \
    if (R > (r))                                                                                                 \
        c##r = _mm512_fmadd_ps(_mm512_set1_ps(A_ROW(r)), bv, c##r);
        ROWS_12(FMA)
#undef FMA
        a += ap;
        a1 += ap;
        b += bs;
    }
    const __m512 lo = clamp ? _mm512_set1_ps(clamp[0]) : _mm512_setzero_ps();
    const __m512 hi = clamp ? _mm512_set1_ps(clamp[1]) : _mm512_setzero_ps();
#define ST(r)                                                                                                    \
    if (R > (r) && rows > (r))                                                                                   \
        store_z(c##r, c + (size_t)(r) * ldc, m, add, bias, r, clamp, lo, hi);
    ROWS_12(ST)
#undef ST
}

/* ukr_z for a last panel of at most 8 columns (A packed): the first 8
 * columns of each packed 16-wide step in a ymm register, columns where m
 * is set stored (rows < rows). */
static inline __attribute__((always_inline)) void ukr_y(size_t kc, const float *a, size_t a2, const float *b,
                                                        float *c, size_t ldc, int add, const float *bias, const int R,
                                                        size_t rows, __mmask8 m)
{
#define DECL(r) __m256 c##r = _mm256_setzero_ps();
    ROWS_12(DECL)
#undef DECL
    const size_t as = 1;
    const float *a1 = a + a2;
    for (size_t p = 0; p < kc; p++) {
        const __m256 bv = _mm256_loadu_ps(b);
#define FMA(r)                                                                                                   \
    if (R > (r))                                                                                                 \
        c##r = _mm256_fmadd_ps(_mm256_set1_ps(A_ROW(r)), bv, c##r);
        ROWS_12(FMA)
#undef FMA
        a += 6;
        a1 += 6;
        b += 16;
    }
#define ST(r)                                                                                                    \
    if (R > (r) && rows > (r))                                                                                   \
        store_y(c##r, c + (size_t)(r) * ldc, m, add, bias, r);
    ROWS_12(ST)
#undef ST
}

#define FULL ((__mmask16)0xffff)

/* np consecutive packed row panels (kc * 6 floats each) against the
 * b-panel: two at a time, the last alone; rows (<= 6 np) of them stored,
 * columns where m is set. */
static void panels(size_t kc, const float *a, size_t np, const float *b, size_t ldb, float *c, size_t ldc, int add,
                   const float *bias, const float *clamp, size_t rows, __mmask16 m)
{
    size_t i = 0;
    for (; i + 2 <= np; i += 2)
        ukr_z(kc, a + i * kc * 6, 1, 6, kc * 6, b, ldb, c + i * 6 * ldc, ldc, add, bias ? bias + i * 6 : NULL, clamp,
              12, rows - i * 6, m);
    if (i < np)
        ukr_z(kc, a + i * kc * 6, 1, 6, 0, b, ldb, c + i * 6 * ldc, ldc, add, bias ? bias + i * 6 : NULL, clamp, 6,
              rows - i * 6, m);
}

void gemm_ukr_avx512_bias(size_t kc, const float *a, const float *b, float *c, size_t ldc, int add, const float *bias)
{
    ukr_z(kc, a, 1, 6, 0, b, 16, c, ldc, add, bias, NULL, 6, 6, FULL);
}

void gemm_ukr_avx512_rows_bias(size_t kc, const float *a, size_t lda, const float *b, float *c, size_t ldc, int add,
                               const float *bias)
{
    ukr_z(kc, a, lda, 1, 0, b, 16, c, ldc, add, bias, NULL, 6, 6, FULL);
}

void gemm_ukr_avx512_bs(size_t kc, const float *a, const float *b, size_t ldb, float *c, size_t ldc, int add,
                        const float *bias, const float *clamp)
{
    ukr_z(kc, a, 1, 6, 0, b, ldb, c, ldc, add, bias, clamp, 6, 6, FULL);
}

void gemm_ukr_avx512_strips(size_t kc, const float *a, size_t np, const float *b, size_t ldb, float *c, size_t ldc,
                            int add, const float *bias, const float *clamp)
{
    panels(kc, a, np, b, ldb, c, ldc, add, bias, clamp, np * 6, FULL);
}

void gemm_ukr_avx512_bs_rows(size_t kc, const float *a, const float *b, size_t ldb, float *c, size_t ldc, int add,
                             const float *bias, const float *clamp, size_t rows)
{
    ukr_z(kc, a, 1, 6, 0, b, ldb, c, ldc, add, bias, clamp, 6, rows, FULL);
}

void gemm_ukr_avx512_rows_act(size_t kc, const float *a, size_t lda, const float *b, float *c, size_t ldc, int add,
                              const float *bias, const float *clamp)
{
    ukr_z(kc, a, lda, 1, 0, b, 16, c, ldc, add, bias, clamp, 6, 6, FULL);
}

/* Column col (and col + 1 when TWO) of up to 8 consecutive packed row
 * panels (g of them real; the others repeat the last one, not stored):
 * the 6 rows of each step in the low lanes of a ymm register (a masked
 * load: nothing past a panel is read), one FMA chain per panel and column
 * over the steps in order, as the whole tiles' sums. 8 panels make 8 (16)
 * independent chains where the AVX2 kernel's 4 wait on the FMA latency. */
static inline __attribute__((always_inline)) void narrow8(size_t kc, const float *a, size_t g, const float *b,
                                                          size_t col, const int TWO, float *c, size_t ldc,
                                                          size_t rows, int add, const float *bias)
{
    const size_t ps = kc * 6;
#define PAN(i) const float *a##i = a + (g > (i) ? (i) : g - 1) * ps;
    PAN(0) PAN(1) PAN(2) PAN(3) PAN(4) PAN(5) PAN(6) PAN(7)
#undef PAN
#define ACC(i) __m256 s##i##0 = _mm256_setzero_ps(), s##i##1 = _mm256_setzero_ps();
    ACC(0) ACC(1) ACC(2) ACC(3) ACC(4) ACC(5) ACC(6) ACC(7)
#undef ACC
    const float *bp = b + col;
    for (size_t p = 0; p < kc; p++) {
        const __m256 b0 = _mm256_set1_ps(bp[p * 16]);
        const __m256 b1 = TWO ? _mm256_set1_ps(bp[p * 16 + 1]) : b0;
#define STEP(i)                                                                                                  \
    {                                                                                                            \
        const __m256 x = _mm256_maskz_loadu_ps(0x3f, a##i + p * 6);                                              \
        s##i##0 = _mm256_fmadd_ps(x, b0, s##i##0);                                                               \
        if (TWO)                                                                                                 \
            s##i##1 = _mm256_fmadd_ps(x, b1, s##i##1);                                                           \
    }
        STEP(0) STEP(1) STEP(2) STEP(3) STEP(4) STEP(5) STEP(6) STEP(7)
#undef STEP
    }
    float t[8][2][8];
#define OUT(i)                                                                                                   \
    _mm256_storeu_ps(t[i][0], s##i##0);                                                                          \
    _mm256_storeu_ps(t[i][1], s##i##1);
    OUT(0) OUT(1) OUT(2) OUT(3) OUT(4) OUT(5) OUT(6) OUT(7)
#undef OUT
    for (size_t i = 0; i < g; i++)
        for (size_t r = 0; r < 6 && i * 6 + r < rows; r++)
            for (int h = 0; h <= TWO; h++) {
                float *cr = c + (i * 6 + r) * ldc + col + (size_t)h;
                const float v = t[i][h][r];
                *cr = add ? *cr + v : bias ? v + bias[i * 6 + r] : v;
            }
}

/* 1 to 4 columns: column sums (narrow8: less work than a whole panel);
 * 5 to 8: 8-column tiles; 9 to 15: whole tiles, stored masked. Measured
 * (op_sgemm_run, 1 thread, 160 x 49 x 960): one column as a whole
 * 16-column tile took 1.17x the AVX2 kernel's time; narrow8 0.96x. */
void gemm_ukr_avx512_narrow(size_t kc, const float *a, size_t np, const float *b, size_t cols, float *c, size_t ldc,
                            size_t rows, int add, const float *bias)
{
    if (cols <= 4) {
        for (size_t pi = 0; pi < np; pi += 8) {
            size_t g = np - pi < 8 ? np - pi : 8, r0 = pi * 6;
            const float *ap = a + pi * kc * 6, *bi = bias ? bias + r0 : NULL;
            float *cp = c + r0 * ldc;
            for (size_t col = 0; col < cols; col += 2) {
                if (col + 1 < cols)
                    narrow8(kc, ap, g, b, col, 1, cp, ldc, rows - r0, add, bi);
                else
                    narrow8(kc, ap, g, b, col, 0, cp, ldc, rows - r0, add, bi);
            }
        }
    } else if (cols <= 8) {
        const __mmask8 m = (__mmask8)((1u << cols) - 1);
        size_t i = 0;
        for (; i + 2 <= np; i += 2)
            ukr_y(kc, a + i * kc * 6, kc * 6, b, c + i * 6 * ldc, ldc, add, bias ? bias + i * 6 : NULL, 12,
                  rows - i * 6, m);
        if (i < np)
            ukr_y(kc, a + i * kc * 6, 0, b, c + i * 6 * ldc, ldc, add, bias ? bias + i * 6 : NULL, 6, rows - i * 6, m);
    } else {
        panels(kc, a, np, b, 16, c, ldc, add, bias, NULL, rows, (__mmask16)((1u << cols) - 1));
    }
}

int gemm_avx512_usable(void) { return gemm_avx512_cpu() && op_isa_level() >= OP_ISA_AVX512; }

#else /* not built for AVX-512: never called (gemm_avx512_cpu() is 0) */

int gemm_avx512_cpu(void) { return 0; }

int gemm_avx512_usable(void) { return 0; }

void gemm_ukr_avx512_bias(size_t kc, const float *a, const float *b, float *c, size_t ldc, int add, const float *bias)
{
    (void)kc, (void)a, (void)b, (void)c, (void)ldc, (void)add, (void)bias;
}

void gemm_ukr_avx512_rows_bias(size_t kc, const float *a, size_t lda, const float *b, float *c, size_t ldc, int add,
                               const float *bias)
{
    (void)kc, (void)a, (void)lda, (void)b, (void)c, (void)ldc, (void)add, (void)bias;
}

void gemm_ukr_avx512_bs(size_t kc, const float *a, const float *b, size_t ldb, float *c, size_t ldc, int add,
                        const float *bias, const float *clamp)
{
    (void)kc, (void)a, (void)b, (void)ldb, (void)c, (void)ldc, (void)add, (void)bias, (void)clamp;
}

void gemm_ukr_avx512_strips(size_t kc, const float *a, size_t np, const float *b, size_t ldb, float *c, size_t ldc,
                            int add, const float *bias, const float *clamp)
{
    (void)kc, (void)a, (void)np, (void)b, (void)ldb, (void)c, (void)ldc, (void)add, (void)bias, (void)clamp;
}

void gemm_ukr_avx512_bs_rows(size_t kc, const float *a, const float *b, size_t ldb, float *c, size_t ldc, int add,
                             const float *bias, const float *clamp, size_t rows)
{
    (void)kc, (void)a, (void)b, (void)ldb, (void)c, (void)ldc, (void)add, (void)bias, (void)clamp, (void)rows;
}

void gemm_ukr_avx512_rows_act(size_t kc, const float *a, size_t lda, const float *b, float *c, size_t ldc, int add,
                              const float *bias, const float *clamp)
{
    (void)kc, (void)a, (void)lda, (void)b, (void)c, (void)ldc, (void)add, (void)bias, (void)clamp;
}

void gemm_ukr_avx512_narrow(size_t kc, const float *a, size_t np, const float *b, size_t cols, float *c, size_t ldc,
                            size_t rows, int add, const float *bias)
{
    (void)kc, (void)a, (void)np, (void)b, (void)cols, (void)c, (void)ldc, (void)rows, (void)add, (void)bias;
}

#endif
