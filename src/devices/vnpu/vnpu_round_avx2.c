/* The vector loop of vnpu_round.h: fp16 through F16C (VCVTPS2PH with round
 * to nearest even, VCVTPH2PS back: IEEE conversions, which the scalar
 * f32_to_fp16 / fp16_to_f32 implement bit for bit, NaN payloads included),
 * bf16 with AVX2 integer arithmetic (f32_to_bf16's formula, eight lanes at a
 * time). Compiled with -mavx2 -mf16c (src/devices/devices.cmake) and called
 * only when vnpu_round_avx2_usable(); elsewhere it compiles to stubs. */
#include "devices/vnpu/vnpu_round.h"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__F16C__)
#include <cpuid.h>
#include <immintrin.h>
#include <stdatomic.h>

static int check(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return 0;
    int osxsave = (c >> 27) & 1, avx = (c >> 28) & 1, f16c = (c >> 29) & 1;
    if (!osxsave || !avx || !f16c)
        return 0;
    if ((_xgetbv(0) & 6) != 6) /* the OS saves the YMM state */
        return 0;
    if (__get_cpuid_max(0, NULL) < 7)
        return 0;
    __cpuid_count(7, 0, a, b, c, d);
    return (b >> 5) & 1; /* AVX2 */
}

int vnpu_round_avx2_usable(void)
{
    static atomic_int cached = -1; /* racing first calls store the same value */
    int v = atomic_load_explicit(&cached, memory_order_relaxed);
    if (v < 0) {
        v = check();
        atomic_store_explicit(&cached, v, memory_order_relaxed);
    }
    return v;
}

/* Eight lanes of f32_to_bf16 and back: NaN keeps its top half, quieted;
 * otherwise x + 0x7fff + (bit 16 of x), truncated to the top half. */
static __m256i bf16_lanes(__m256i x)
{
    const __m256i abs = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
    const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff);
    const __m256i top = _mm256_set1_epi32((int)0xffff0000u), quiet = _mm256_set1_epi32(0x00400000);
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, abs), inf);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), one);
    __m256i r = _mm256_and_si256(_mm256_add_epi32(x, _mm256_add_epi32(bias, lsb)), top);
    __m256i q = _mm256_or_si256(_mm256_and_si256(x, top), quiet);
    return _mm256_blendv_epi8(r, q, nan);
}

/* Eight lanes of fp16 and back: F16C, round to nearest even. */
static __m256i fp16_lanes(__m256i x)
{
    __m128i h = _mm256_cvtps_ph(_mm256_castsi256_ps(x), _MM_FROUND_TO_NEAREST_INT);
    return _mm256_castps_si256(_mm256_cvtph_ps(h));
}

size_t vnpu_round_f32_avx2(float *dst, const float *src, size_t n, int bf16)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i x = _mm256_loadu_si256((const __m256i *)(const void *)(src + i));
        _mm256_storeu_si256((__m256i *)(void *)(dst + i), bf16 ? bf16_lanes(x) : fp16_lanes(x));
    }
    return i;
}

size_t vnpu_round_same_avx2(const float *src, size_t n, int bf16)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i x = _mm256_loadu_si256((const __m256i *)(const void *)(src + i));
        __m256i r = bf16 ? bf16_lanes(x) : fp16_lanes(x);
        if (_mm256_movemask_epi8(_mm256_cmpeq_epi32(r, x)) != -1)
            break;
    }
    return i;
}

#else

int vnpu_round_avx2_usable(void) { return 0; }

size_t vnpu_round_f32_avx2(float *dst, const float *src, size_t n, int bf16)
{
    (void)dst;
    (void)src;
    (void)n;
    (void)bf16;
    return 0;
}

size_t vnpu_round_same_avx2(const float *src, size_t n, int bf16)
{
    (void)src;
    (void)n;
    (void)bf16;
    return 0;
}

#endif
