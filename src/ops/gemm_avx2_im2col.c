/* The im2col panels of the float32 Conv (nn_conv.c) with AVX2 masked
 * loads (stride 1) and gathers (any strides), compiled with -mavx2 -mfma (CMakeLists.txt) and called only
 * when gemm_avx2_usable() says so; elsewhere a stub that is never called. */
#include "ops/nn.h"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

/* Lanes of bits b (bit l = lane l) as an all-ones/zero mask. */
static inline __m256i lane_mask(unsigned b)
{
    const __m256i sel = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    return _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32((int)b), sel), sel);
}

void gemm_im2col_s1_avx2(const op_im2col_s1 *c, size_t j, size_t cols, float *dst, size_t kc, size_t kk,
                         size_t npad, size_t q)
{
    enum { NR = 16 };
    unsigned rmask[OP_IM2COL_MAX_K] = {0}, cmask[OP_IM2COL_MAX_K] = {0};
    for (size_t t = 0; t < cols && t < NR; t++) {
        int64_t o = (int64_t)(j + t), oh = o / c->w, ow = o % c->w;
        for (int64_t kh = 0; kh < c->kh; kh++) {
            int64_t ih = oh + kh * c->dh - c->pt;
            if (ih >= 0 && ih < c->h)
                rmask[kh] |= 1u << t;
        }
        for (int64_t kw = 0; kw < c->kw; kw++) {
            int64_t iw = ow + kw * c->dw - c->pl;
            if (iw >= 0 && iw < c->w)
                cmask[kw] |= 1u << t;
        }
    }
    size_t kin = 0, p0 = 0, kcb = kk < kc ? kk : kc;
    float *d = dst + q * kcb * NR;
    for (size_t ch = 0; ch < c->cg; ch++) {
        const uintptr_t xc = (uintptr_t)(c->x + ch * c->in_sz);
        for (int64_t kh = 0; kh < c->kh; kh++) {
            /* The input rows of the next panels (the task's next calls): the
             * planes are far apart, too many streams for the prefetcher. */
            int64_t poff = (int64_t)j + (kh * c->dh - c->pt) * c->w - c->pl + 2 * NR;
            _mm_prefetch((const char *)(xc + (uintptr_t)(poff * (int64_t)sizeof(float))), _MM_HINT_T0);
            _mm_prefetch((const char *)(xc + (uintptr_t)((poff + NR) * (int64_t)sizeof(float))), _MM_HINT_T0);
            for (int64_t kw = 0; kw < c->kw; kw++) {
                unsigned m = rmask[kh] & cmask[kw];
                /* element t reads x[j + t + off] of the plane (OW == W) */
                int64_t off = (int64_t)j + (kh * c->dh - c->pt) * c->w + (kw * c->dw - c->pl);
                const float *s = (const float *)(xc + (uintptr_t)(off * (int64_t)sizeof(float)));
                __m256 v0, v1;
                if (m == 0xffffu) {
                    v0 = _mm256_loadu_ps(s);
                    v1 = _mm256_loadu_ps(s + 8);
                } else {
                        /* masked-out lanes are not read (they may lie outside x) */
                        v0 = _mm256_maskload_ps(s, lane_mask(m & 0xffu));
                        v1 = _mm256_maskload_ps(s + 8, lane_mask(m >> 8));
                }
                _mm256_storeu_ps(d, v0);
                _mm256_storeu_ps(d + 8, v1);
                d += NR;
                if (++kin == kcb) {
                    p0 += kcb;
                    kin = 0;
                    kcb = kk - p0 < kc ? kk - p0 : kc;
                    d = dst + p0 * npad + q * kcb * NR;
                }
            }
        }
    }
}

void gemm_im2col_avx2(const op_im2col *c, size_t j, size_t cols, float *dst, size_t kc, size_t kk, size_t npad,
                      size_t q)
{
    enum { NR = 16 };
    /* per lane: the input coordinates of its output before the tap offsets */
    int32_t ih0[NR], iw0[NR], live[NR];
    for (size_t t = 0; t < NR; t++) {
        int64_t o = (int64_t)(j + (t < cols ? t : 0)), oh = o / c->ow, ow = o % c->ow;
        ih0[t] = (int32_t)(oh * c->sh - c->pt);
        iw0[t] = (int32_t)(ow * c->sw - c->pl);
        live[t] = t < cols ? -1 : 0;
    }
    const __m256i zero = _mm256_setzero_si256(), h = _mm256_set1_epi32((int)c->h), w = _mm256_set1_epi32((int)c->w);
    __m256i ih_lo = _mm256_loadu_si256((const __m256i *)ih0), ih_hi = _mm256_loadu_si256((const __m256i *)(ih0 + 8));
    __m256i iw_lo = _mm256_loadu_si256((const __m256i *)iw0), iw_hi = _mm256_loadu_si256((const __m256i *)(iw0 + 8));
    const __m256i live_lo = _mm256_loadu_si256((const __m256i *)live);
    const __m256i live_hi = _mm256_loadu_si256((const __m256i *)(live + 8));
    /* Stride 2 with the 16 columns in one output row: each tap's row of the
     * panel is every other element of 31 consecutive inputs, read with
     * plain loads where they lie inside the input row. */
    const int s2row = c->sw == 2 && cols == NR && ih0[0] == ih0[NR - 1];
    size_t kin = 0, p0 = 0, kcb = kk < kc ? kk : kc;
    float *d = dst + q * kcb * NR;
    for (size_t ch = 0; ch < c->cg; ch++) {
        const float *xc = c->x + ch * c->in_sz;
        for (int64_t kh = 0; kh < c->kh; kh++) {
            /* The input row the panel after next reads (lane 0, if in the
             * same output row): too many streams for the prefetcher. */
            int64_t pf = (ih0[0] + kh * c->dh) * c->w + iw0[0] + 2 * NR * c->sw;
            for (int64_t f = 0; f < NR * c->sw && f < 64; f += 16)
                _mm_prefetch((const char *)((uintptr_t)xc + (uintptr_t)((pf + f) * (int64_t)sizeof(float))),
                             _MM_HINT_T0);
            const __m256i dh = _mm256_set1_epi32((int)(kh * c->dh));
            __m256i r_lo = _mm256_add_epi32(ih_lo, dh), r_hi = _mm256_add_epi32(ih_hi, dh);
            /* 0 <= ih < h, as (ih > -1) & (h > ih) */
            __m256i ok_lo = _mm256_and_si256(_mm256_cmpgt_epi32(r_lo, _mm256_set1_epi32(-1)), _mm256_cmpgt_epi32(h, r_lo));
            __m256i ok_hi = _mm256_and_si256(_mm256_cmpgt_epi32(r_hi, _mm256_set1_epi32(-1)), _mm256_cmpgt_epi32(h, r_hi));
            ok_lo = _mm256_and_si256(ok_lo, live_lo);
            ok_hi = _mm256_and_si256(ok_hi, live_hi);
            const __m256i base_lo = _mm256_mullo_epi32(r_lo, w), base_hi = _mm256_mullo_epi32(r_hi, w);
            const int64_t row = ih0[0] + kh * c->dh;
            const int row_in = s2row && row >= 0 && row < c->h;
            for (int64_t kw = 0; kw < c->kw; kw++) {
                const int64_t iw = iw0[0] + kw * c->dw;
                if (row_in && iw >= 0 && iw + 2 * NR <= c->w) {
                    const float *sp = xc + row * c->w + iw;
                    __m256 a0 = _mm256_loadu_ps(sp), a1 = _mm256_loadu_ps(sp + 8);
                    __m256 a2 = _mm256_loadu_ps(sp + 16), a3 = _mm256_loadu_ps(sp + 24);
                    /* even elements: shuffle to a0 a2 a4 a6 | ..., then order the 64-bit pairs */
                    __m256 e0 = _mm256_shuffle_ps(a0, a1, 0x88), e1 = _mm256_shuffle_ps(a2, a3, 0x88);
                    e0 = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e0), 0xD8));
                    e1 = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e1), 0xD8));
                    _mm256_storeu_ps(d, e0);
                    _mm256_storeu_ps(d + 8, e1);
                } else {
                const __m256i dw = _mm256_set1_epi32((int)(kw * c->dw));
                __m256i cl = _mm256_add_epi32(iw_lo, dw), chh = _mm256_add_epi32(iw_hi, dw);
                __m256i m_lo = _mm256_and_si256(ok_lo, _mm256_and_si256(_mm256_cmpgt_epi32(cl, _mm256_set1_epi32(-1)),
                                                                        _mm256_cmpgt_epi32(w, cl)));
                __m256i m_hi = _mm256_and_si256(ok_hi, _mm256_and_si256(_mm256_cmpgt_epi32(chh, _mm256_set1_epi32(-1)),
                                                                        _mm256_cmpgt_epi32(w, chh)));
                /* masked-out lanes are not read */
                __m256 v0 = _mm256_mask_i32gather_ps(_mm256_castsi256_ps(zero), xc, _mm256_add_epi32(base_lo, cl),
                                                     _mm256_castsi256_ps(m_lo), 4);
                __m256 v1 = _mm256_mask_i32gather_ps(_mm256_castsi256_ps(zero), xc, _mm256_add_epi32(base_hi, chh),
                                                     _mm256_castsi256_ps(m_hi), 4);
                _mm256_storeu_ps(d, v0);
                _mm256_storeu_ps(d + 8, v1);
                }
                d += NR;
                if (++kin == kcb) {
                    p0 += kcb;
                    kin = 0;
                    kcb = kk - p0 < kc ? kk - p0 : kc;
                    d = dst + p0 * npad + q * kcb * NR;
                }
            }
        }
    }
}

#else

void gemm_im2col_avx2(const op_im2col *c, size_t j, size_t cols, float *dst, size_t kc, size_t kk, size_t npad,
                      size_t q)
{
    (void)c;
    (void)j;
    (void)cols;
    (void)dst;
    (void)kc;
    (void)kk;
    (void)npad;
    (void)q;
}

void gemm_im2col_s1_avx2(const op_im2col_s1 *c, size_t j, size_t cols, float *dst, size_t kc, size_t kk,
                         size_t npad, size_t q)
{
    (void)c;
    (void)j;
    (void)cols;
    (void)dst;
    (void)kc;
    (void)kk;
    (void)npad;
    (void)q;
}

#endif
