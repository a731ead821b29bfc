/* AVX2 float32 loops of the broadcast binary ops (elementwise_binary.c),
 * compiled with -mavx2 -mfma -O3 and called only when gemm_avx2_usable().
 * Every element gets the portable kernel's own IEEE operation (one add,
 * subtract, multiply or divide, or the same comparisons), so results are
 * bit-identical. On other targets the file compiles to a stub. */
#include "ops/elementwise.h"

#if defined(__x86_64__) && defined(__AVX2__)
#include <immintrin.h>

#define VLOOP(VOP, SOP)                                                                                       \
    do {                                                                                                      \
        size_t i = 0;                                                                                         \
        if (sa && sb) {                                                                                       \
            for (; i + 8 <= n; i += 8)                                                                        \
                _mm256_storeu_ps(o + i, VOP(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));                 \
            for (; i < n; i++)                                                                                \
                o[i] = a[i] SOP b[i];                                                                         \
        } else if (sa) {                                                                                      \
            const __m256 vb = _mm256_set1_ps(b[0]);                                                           \
            const float y = b[0];                                                                             \
            for (; i + 8 <= n; i += 8)                                                                        \
                _mm256_storeu_ps(o + i, VOP(_mm256_loadu_ps(a + i), vb));                                     \
            for (; i < n; i++)                                                                                \
                o[i] = a[i] SOP y;                                                                            \
        } else if (sb) {                                                                                      \
            const __m256 va = _mm256_set1_ps(a[0]);                                                           \
            const float x = a[0];                                                                             \
            for (; i + 8 <= n; i += 8)                                                                        \
                _mm256_storeu_ps(o + i, VOP(va, _mm256_loadu_ps(b + i)));                                     \
            for (; i < n; i++)                                                                                \
                o[i] = x SOP b[i];                                                                            \
        } else {                                                                                              \
            const float v = a[0] SOP b[0];                                                                    \
            for (; i < n; i++)                                                                                \
                o[i] = v;                                                                                     \
        }                                                                                                     \
    } while (0)

/* max: (x != x || x > y) ? x : y; min: (x != x || x < y) ? x : y */
static __m256 vmax(__m256 x, __m256 y)
{
    __m256 m = _mm256_or_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q), _mm256_cmp_ps(x, y, _CMP_GT_OQ));
    return _mm256_blendv_ps(y, x, m);
}

static __m256 vmin(__m256 x, __m256 y)
{
    __m256 m = _mm256_or_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q), _mm256_cmp_ps(x, y, _CMP_LT_OQ));
    return _mm256_blendv_ps(y, x, m);
}

static float smax(float x, float y) { return (x != x || x > y) ? x : y; }
static float smin(float x, float y) { return (x != x || x < y) ? x : y; }

#define FLOOP(VF, SF)                                                                                         \
    do {                                                                                                      \
        size_t i = 0;                                                                                         \
        const __m256 va = _mm256_set1_ps(a[0]), vb = _mm256_set1_ps(b[0]);                                   \
        for (; i + 8 <= n; i += 8)                                                                            \
            _mm256_storeu_ps(o + i, VF(sa ? _mm256_loadu_ps(a + i) : va, sb ? _mm256_loadu_ps(b + i) : vb));  \
        for (; i < n; i++)                                                                                    \
            o[i] = SF(a[sa ? i : 0], b[sb ? i : 0]);                                                          \
    } while (0)

int op_ew_binary_f32_avx2(int op, const float *a, int sa, const float *b, int sb, float *o, size_t n)
{
    switch (op) {
    case EW_BIN_ADD: VLOOP(_mm256_add_ps, +); return 1;
    case EW_BIN_SUB: VLOOP(_mm256_sub_ps, -); return 1;
    case EW_BIN_MUL: VLOOP(_mm256_mul_ps, *); return 1;
    case EW_BIN_DIV: VLOOP(_mm256_div_ps, /); return 1;
    case EW_BIN_MAX: FLOOP(vmax, smax); return 1;
    case EW_BIN_MIN: FLOOP(vmin, smin); return 1;
    default: return 0;
    }
}

#else

int op_ew_binary_f32_avx2(int op, const float *a, int sa, const float *b, int sb, float *o, size_t n)
{
    (void)op;
    (void)a;
    (void)sa;
    (void)b;
    (void)sb;
    (void)o;
    (void)n;
    return 0;
}

#endif
