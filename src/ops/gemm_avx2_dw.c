/* The AVX2 + FMA depthwise plane kernel (kernels up to 7 x 7, strides 1
 * and 2, 3 x 3 unrolled), compiled
 * with -mavx2 -mfma (CMakeLists.txt, as gemm_avx2.c) and called only when
 * gemm_avx2_usable() returns 1. The input plane is first copied into a
 * zero-padded buffer so that every output, border or not, runs the same
 * branch-free vector loop. */
#include "ops/nn.h"
#include "core/mem.h"

#include <stdint.h>
#include <string.h>

/* The padded buffer's row stride: room for the vector loop's reads. */
static size_t pad_ld(size_t ow, int kw, int sw) { return (size_t)sw * ((ow + 7) / 8 * 8) + (size_t)kw + 8; }

size_t dw_pad_floats(size_t oh, size_t ow, int kh, int kw, int sh, int sw)
{
    size_t ldp, ph, r;
    if (!oh || !ow || (ow + 7) / 8 * 8 > SIZE_MAX / 4 - 64)
        return 0;
    ldp = pad_ld(ow, kw, sw);
    if (mem_mul(oh - 1, (size_t)sh, &ph) || mem_add(ph, (size_t)kh, &ph) || mem_mul(ph, ldp, &r) ||
        mem_add(r, 16, &r))
        return 0;
    return r;
}

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

/* The even elements of s[0..16) (stride-2 columns). */
static __m256 even16(const float *s)
{
    __m256 lo = _mm256_loadu_ps(s), hi = _mm256_loadu_ps(s + 8);
    __m256 ev = _mm256_shuffle_ps(lo, hi, 0x88); /* lo0 lo2 hi0 hi2 | lo4 lo6 hi4 hi6 */
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(ev), 0xD8));
}

static __m256 odd16(const float *s)
{
    __m256 lo = _mm256_loadu_ps(s), hi = _mm256_loadu_ps(s + 8);
    __m256 od = _mm256_shuffle_ps(lo, hi, 0xDD);
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(od), 0xD8));
}

void dw_plane_avx2(const float *x, size_t h, size_t w, float *y, size_t oh, size_t ow, int kh, int kw, int sh,
                   int sw, size_t pt, size_t pl, const float *k, float bias, int clamp, float lo, float hi, float *pad)
{
    const size_t ldp = pad_ld(ow, kw, sw);
    const size_t ph = (oh - 1) * (size_t)sh + (size_t)kh;
    /* Padded row r holds input row r - pt, column c input column c - pl. */
    for (size_t r = 0; r < ph; r++) {
        float *d = pad + r * ldp;
        if (r < pt || r - pt >= h) {
            memset(d, 0, ldp * sizeof(float));
            continue;
        }
        const float *s = x + (r - pt) * w;
        size_t c0 = pl < ldp ? pl : ldp; /* first column holding input */
        size_t nc = w < ldp - c0 ? w : ldp - c0;
        memset(d, 0, c0 * sizeof(float));
        memcpy(d + c0, s, nc * sizeof(float));
        memset(d + c0 + nc, 0, (ldp - c0 - nc) * sizeof(float));
    }
    memset(pad + ph * ldp, 0, 16 * sizeof(float));
    __m256 wv[49];
    const int nt = kh * kw, k3 = kh == 3 && kw == 3;
    for (int t = 0; t < nt; t++)
        wv[t] = _mm256_set1_ps(k[t]);
    const __m256 vb = _mm256_set1_ps(bias), vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
    const size_t full = ow / 8 * 8, rem = ow - full;
    __m256i tail = _mm256_setzero_si256();
    {
        int m[8];
        for (int i = 0; i < 8; i++)
            m[i] = (size_t)i < rem ? -1 : 0;
        tail = _mm256_loadu_si256((const __m256i *)m);
    }
    for (size_t o = 0; o < oh; o++) {
        const float *r0 = pad + o * (size_t)sh * ldp, *r1 = r0 + ldp, *r2 = r1 + ldp;
        float *dst = y + o * ow;
        for (size_t i = 0; i < ow; i += 8) {
            __m256 acc = vb;
            if (!k3) {
                /* any kernel: taps in (kh, kw) order */
                for (int a = 0; a < kh; a++) {
                    const float *ra = r0 + (size_t)a * ldp;
                    if (sw == 1)
                        for (int b = 0; b < kw; b++)
                            acc = _mm256_fmadd_ps(wv[a * kw + b], _mm256_loadu_ps(ra + i + (size_t)b), acc);
                    else
                        for (int b = 0; b < kw; b++)
                            acc = _mm256_fmadd_ps(wv[a * kw + b], even16(ra + 2 * i + (size_t)b), acc);
                }
            } else if (sw == 1) {
                acc = _mm256_fmadd_ps(wv[0], _mm256_loadu_ps(r0 + i), acc);
                acc = _mm256_fmadd_ps(wv[1], _mm256_loadu_ps(r0 + i + 1), acc);
                acc = _mm256_fmadd_ps(wv[2], _mm256_loadu_ps(r0 + i + 2), acc);
                acc = _mm256_fmadd_ps(wv[3], _mm256_loadu_ps(r1 + i), acc);
                acc = _mm256_fmadd_ps(wv[4], _mm256_loadu_ps(r1 + i + 1), acc);
                acc = _mm256_fmadd_ps(wv[5], _mm256_loadu_ps(r1 + i + 2), acc);
                acc = _mm256_fmadd_ps(wv[6], _mm256_loadu_ps(r2 + i), acc);
                acc = _mm256_fmadd_ps(wv[7], _mm256_loadu_ps(r2 + i + 1), acc);
                acc = _mm256_fmadd_ps(wv[8], _mm256_loadu_ps(r2 + i + 2), acc);
            } else {
                const size_t c = 2 * i;
                acc = _mm256_fmadd_ps(wv[0], even16(r0 + c), acc);
                acc = _mm256_fmadd_ps(wv[1], odd16(r0 + c), acc);
                acc = _mm256_fmadd_ps(wv[2], even16(r0 + c + 2), acc);
                acc = _mm256_fmadd_ps(wv[3], even16(r1 + c), acc);
                acc = _mm256_fmadd_ps(wv[4], odd16(r1 + c), acc);
                acc = _mm256_fmadd_ps(wv[5], even16(r1 + c + 2), acc);
                acc = _mm256_fmadd_ps(wv[6], even16(r2 + c), acc);
                acc = _mm256_fmadd_ps(wv[7], odd16(r2 + c), acc);
                acc = _mm256_fmadd_ps(wv[8], even16(r2 + c + 2), acc);
            }
            if (clamp)
                acc = _mm256_min_ps(vhi, _mm256_max_ps(vlo, acc)); /* NaN stays NaN */
            if (i < full)
                _mm256_storeu_ps(dst + i, acc);
            else
                _mm256_maskstore_ps(dst + i, tail, acc);
        }
    }
}

#else

void dw_plane_avx2(const float *x, size_t h, size_t w, float *y, size_t oh, size_t ow, int kh, int kw, int sh,
                   int sw, size_t pt, size_t pl, const float *k, float bias, int clamp, float lo, float hi, float *pad)
{
    (void)kh;
    (void)kw;
    (void)x;
    (void)h;
    (void)w;
    (void)y;
    (void)oh;
    (void)ow;
    (void)sh;
    (void)sw;
    (void)pt;
    (void)pl;
    (void)k;
    (void)bias;
    (void)clamp;
    (void)lo;
    (void)hi;
    (void)pad;
}

#endif
