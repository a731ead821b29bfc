/* The AVX2 + FMA depthwise plane kernel (kernels up to 7 x 7, strides 1
 * and 2), compiled with -mavx2 -mfma (CMakeLists.txt, as gemm_avx2.c) and
 * called only when gemm_avx2_usable() returns 1.
 *
 * The input rows are copied, as they are first needed, into a small ring
 * of zero-padded rows (16 rows, in L1), so that every output, border or
 * not, runs the same branch-free vector loop. For stride 2 a padded row is
 * stored deinterleaved (its even columns, then its odd columns), so that
 * every tap reads 8 consecutive floats. 3 x 3 and 5 x 5 kernels compute 4
 * output rows at once (fewer at the end): each input vector loaded feeds
 * every output row whose window holds it; other kernels go row by row.
 * 5 x 5 on rows of 16 outputs or more goes 3 rows at once, two vectors
 * across, each tap's weights loaded once for both (measured 1 thread,
 * efficientnet_b0's 56 -> 28 at stride 2 15% faster, 28 x 28 4% faster).
 * Tasks of several planes share one scratch. No masked stores (slow on
 * AMD; masked loads only for the tail of an input row): a row's last
 * vector overlaps the one before it, a row narrower than 8 spills into
 * the next rows (written after it), and only rows closer than 8 floats to
 * the plane's end store through a copy.
 * The order of the sums is fixed (see the block kernels, generated into
 * dwconv_avx2_gen.c by scripts/gen-dw-kernels.py; their shared macros are
 * in dwconv_avx2.h): the result does not depend on the thread count.
 *
 * Small planes (7 x 7, 14 x 14) go 8 at a time (dw_planes8_avx2): the 8
 * input planes are transposed into one zero-padded plane of 8-channel
 * pixels, each tap is then one multiply-add of 8 channels with no borders
 * or tails, and the outputs are transposed back. 3 x 3 planes 12 or more
 * wide go flat instead (dw_flat8_avx2, faster there, slower at 7 x 7):
 * each plane is copied whole into a zero-padded plane (4 sub-planes of
 * even/odd rows and columns at stride 2), whose rows laid end to end make
 * one long row: every tap is then one multiply-add on 8 consecutive flat
 * outputs, with no borders or tails, and the extra columns of the flat
 * outputs (kw - 1 per row, fewer at stride 2) are dropped as the rows are
 * stored. Two planes in turn, so a plane's loads never wait on its stores. */
#include "ops/dwconv_avx2.h"
#include "ops/nn.h"
#include "core/mem.h"

#include <stdint.h>
#include <string.h>

#define DW_RING 16 /* padded rows kept; a power of 2 >= 3 * 2 + 7 */

/* Floats in one phase of a padded row: the vector loop reads up to
 * max(ow, 8) + (kw - 1) / sw <= ceil8(ow) + 8 floats, and the row fill
 * may write 8 floats of slack after those. */
static size_t phase_len(size_t ow) { return (ow + 7) / 8 * 8 + 16; }

size_t dw_pad_floats(size_t oh, size_t ow, int kh, int kw, int sh, int sw)
{
    size_t lp, r;
    (void)kh;
    (void)kw;
    (void)sh;
    if (!oh || !ow || ow > SIZE_MAX / 64 || sw < 1 || sw > 2)
        return 0;
    lp = phase_len(ow);
    /* the ring and a zero row (the rows of the top and bottom pads) */
    if (mem_mul(lp * (size_t)sw, DW_RING + 1, &r) || mem_add(r, 16, &r))
        return 0;
    return r;
}

/* The flat layout of dw_flat_avx2: strides sh == sw in {1, 2}, kernels up
 * to 7 x 7. The padded plane (hp x wp) is stored whole at stride 1, as 4
 * sub-planes (even/odd rows x even/odd columns, hq x wq each) at stride 2;
 * ws is the row stride of the flat outputs, sp the floats of one
 * (sub-)plane with its slack, nt the floats of the flat outputs. 0 when
 * not supported. */
static int flat_geom(size_t oh, size_t ow, int kh, int kw, int sh, int sw, size_t *ws, size_t *sp, size_t *nt)
{
    if (!oh || !ow || oh > 4096 || ow > 4096 || kh < 1 || kw < 1 || kh > 7 || kw > 7 || sh != sw ||
        (sh != 1 && sh != 2))
        return 0;
    size_t hp = (oh - 1) * (size_t)sh + (size_t)kh, wp = (ow - 1) * (size_t)sw + (size_t)kw;
    size_t hq = sh == 1 ? hp : (hp + 1) / 2, wq = sh == 1 ? wp : (wp + 1) / 2;
    *ws = wq;
    *sp = (hq * wq + 16 + 7) / 8 * 8;
    *nt = ((oh - 1) * wq + ow + 7) / 8 * 8 + 8;
    return 1;
}

size_t dw_flat_floats(size_t oh, size_t ow, int kh, int kw, int sh, int sw)
{
    size_t ws, sp, nt;
    if (!flat_geom(oh, ow, kh, kw, sh, sw, &ws, &sp, &nt))
        return 0;
    return sp * (sh == 1 ? 1 : 4) + nt + 16;
}

#if TDM_DW_AVX2

/* lane_tab + 8 - n (n <= 8): the first n lanes set. */
static const int lane_tab[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};

/* A zero vector the compiler cannot see is zero: it would turn the short
 * zero-fill loops below into memset calls (a call and a vzeroupper per
 * padded row). */
static volatile float dw_zero;

/* Input row xr (w floats) at column pl of a padded row d (n >= 8 floats,
 * with 8 floats of slack after them that may be overwritten), zeros
 * around it, at stride 1. */
static void pad_row(float *d, size_t n, const float *xr, size_t w, size_t pl)
{
    const __m256 z = _mm256_set1_ps(dw_zero);
    size_t nc = pl < n ? (w < n - pl ? w : n - pl) : 0, c;
    for (c = 0; c < pl; c += 8) /* the copy below overwrites what passes pl */
        _mm256_storeu_ps(d + c, z);
    float *o = d + pl;
    for (c = 0; c + 8 <= nc; c += 8)
        _mm256_storeu_ps(o + c, _mm256_loadu_ps(xr + c));
    if (c < nc) { /* the tail, and zeros after it */
        __m256i m = _mm256_loadu_si256((const __m256i *)(lane_tab + 8 - (nc - c)));
        _mm256_storeu_ps(o + c, _mm256_maskload_ps(xr + c, m));
        c += 8;
    }
    for (c += pl; c < n; c += 8)
        _mm256_storeu_ps(d + c, z);
}

/* The first n lanes (n clamped to [0, 8]) set. */
static __m256i lanes(ptrdiff_t n)
{
    n = n < 0 ? 0 : n > 8 ? 8 : n;
    return _mm256_loadu_si256((const __m256i *)(lane_tab + 8 - n));
}

/* Input row xr (w floats) padded by pl into d, cap floats of each phase
 * (8 more of slack may be overwritten): stride 1 as it is (pad_row);
 * stride 2 as its even columns (d[0..cap)) then its odd columns
 * (d[lp..lp + cap)), deinterleaved
 * straight from the input row: with pl = 2 q + p, input column 2 t lands
 * in phase p at q + t and column 2 t + 1 in phase 1 - p at q + p + t. */
static void fill_row_cap(float *d, size_t lp, size_t cap, int sw, const float *xr, size_t w, size_t pl)
{
    if (sw == 1) {
        pad_row(d, cap, xr, w, pl);
        return;
    }
    const __m256 z = _mm256_set1_ps(dw_zero);
    size_t q = pl / 2, p = pl % 2, c;
    float *pe = d + p * lp + q, *po = d + (1 - p) * lp + q + p; /* input columns 2t, 2t + 1 */
    size_t nx = q + p < cap ? (w < 2 * (cap - q - p) ? w : 2 * (cap - q - p)) : 0;
    for (c = 0; c < q + p; c += 8) { /* left zeros (the data overwrites what passes) */
        _mm256_storeu_ps(d + c, z);
        _mm256_storeu_ps(d + lp + c, z);
    }
    size_t t = 0;
    for (; 2 * t + 16 <= nx; t += 8) {
        __m256 lo = _mm256_loadu_ps(xr + 2 * t), hi = _mm256_loadu_ps(xr + 2 * t + 8);
        __m256 ev = _mm256_shuffle_ps(lo, hi, 0x88); /* lo0 lo2 hi0 hi2 | lo4 lo6 hi4 hi6 */
        __m256 od = _mm256_shuffle_ps(lo, hi, 0xDD);
        _mm256_storeu_ps(pe + t, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(ev), 0xD8)));
        _mm256_storeu_ps(po + t, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(od), 0xD8)));
    }
    if (2 * t < nx) { /* the tail, zeros after it */
        ptrdiff_t rem = (ptrdiff_t)(nx - 2 * t);
        __m256 lo = _mm256_maskload_ps(xr + 2 * t, lanes(rem)), hi = _mm256_maskload_ps(xr + 2 * t + 8, lanes(rem - 8));
        __m256 ev = _mm256_shuffle_ps(lo, hi, 0x88);
        __m256 od = _mm256_shuffle_ps(lo, hi, 0xDD);
        _mm256_storeu_ps(pe + t, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(ev), 0xD8)));
        _mm256_storeu_ps(po + t, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(od), 0xD8)));
        t += 8;
    }
    for (c = q + t; c < cap; c += 8) /* right zeros of the even-column phase */
        _mm256_storeu_ps(pe - q + c, z);
    for (c = q + p + t; c < cap; c += 8)
        _mm256_storeu_ps(po - q - p + c, z);
}

/* fill_row_cap with the phase length the ring uses: each phase reads
 * lp - 8 floats. */
static void fill_row(float *d, size_t lp, int sw, const float *xr, size_t w, size_t pl)
{
    fill_row_cap(d, lp, lp - 8, sw, xr, w, pl);
}

/* Any kh x kw (up to 7 x 7), stride sw across, one output row. */
static void dw_any_row(const dw_run *q, const __m256 *wv, int kh, int kw, int sw)
{
    const size_t lp = q->lp, ow = q->ow;
    for (size_t i = 0; i < ow; i += 8) {
        const size_t c = i + 8 <= ow || ow < 8 ? i : ow - 8;
        __m256 acc = q->vb;
        for (int a = 0; a < kh; a++) {
            const float *ra = q->row[a] + c;
            for (int b = 0; b < kw; b++)
                acc = _mm256_fmadd_ps(wv[a * kw + b], _mm256_loadu_ps(ra + (size_t)(b % sw) * lp + (size_t)(b / sw)),
                                      acc);
        }
        if (q->clamp)
            acc = _mm256_min_ps(q->vhi, _mm256_max_ps(q->vlo, acc)); /* NaN stays NaN */
        if (ow >= 8 || q->room >= 8)
            _mm256_storeu_ps(q->dst + c, acc);
        else
            store_part(q->dst, ow, acc);
    }
}

void dw_plane_avx2(const float *x, size_t h, size_t w, float *y, size_t oh, size_t ow, int kh, int kw, int sh,
                   int sw, size_t pt, size_t pl, const float *k, float bias, int clamp, float lo, float hi, float *pad,
                   dw_post_fn post, void *post_ctx)
{
    const size_t lp = phase_len(ow), ldp = lp * (size_t)sw;
    __m256 wv[49];
    const int nt = kh * kw;
    for (int t = 0; t < nt; t++)
        wv[t] = _mm256_set1_ps(k[t]);
    dw_run q;
    q.ow = ow;
    q.lp = lp;
    q.vb = _mm256_set1_ps(bias);
    q.vlo = _mm256_set1_ps(lo);
    q.vhi = _mm256_set1_ps(hi);
    q.clamp = clamp;
    const dw_block_fn *blk = NULL; /* by rows per block */
    size_t maxr = 4;
    if (kh == kw && kh == 3) {
        blk = dw_k3[sh - 1][sw - 1];
    } else if (kh == kw && kh == 5 && ow >= 16) {
        blk = dw_k5w[sh - 1][sw - 1];
        maxr = DW_WIDE_ROWS;
    } else if (kh == kw && kh == 5) {
        blk = dw_k5[sh - 1][sw - 1];
    }
    const float *rows[3 * 2 + 7];
    q.row = rows;
    float *zrow = pad + DW_RING * ldp;
    int zset = 0;
    size_t filled = 0, posted = 0; /* padded rows made; outputs handed to post */
    for (size_t o = 0; o < oh;) {
        const size_t nr = !blk ? 1 : oh - o >= maxr ? maxr : oh - o;
        const size_t r0 = o * (size_t)sh, nrows = (nr - 1) * (size_t)sh + (size_t)kh;
        for (; filled < r0 + nrows; filled++)
            if (filled >= pt && filled - pt < h)
                fill_row(pad + (filled % DW_RING) * ldp, lp, sw, x + (filled - pt) * w, w, pl);
        for (size_t a = 0; a < nrows; a++) {
            size_t r = r0 + a;
            if (r >= pt && r - pt < h) {
                rows[a] = pad + (r % DW_RING) * ldp;
                continue;
            }
            if (!zset) {
                const __m256 z = _mm256_set1_ps(dw_zero);
                for (size_t c = 0; c < ldp; c += 8)
                    _mm256_storeu_ps(zrow + c, z);
                zset = 1;
            }
            rows[a] = zrow;
        }
        q.dst = y + o * ow;
        q.room = (oh - o) * ow;
        if (blk)
            blk[nr](&q, wv);
        else
            dw_any_row(&q, wv, kh, kw, sw);
        o += nr;
        if (post && (o * ow - posted >= 1024 || o == oh)) {
            post(post_ctx, y + posted, posted, o * ow - posted);
            posted = o * ow;
        }
    }
}



/* ---- small planes, flat ---- */

/* nv vectors of flat outputs T[i] = bias + sum_t wv[t] B[off[t] + i],
 * taps in order, 8 (then 4, then 1) vectors at a time. */
static void flat_run(const float *b, const size_t *off, const __m256 *wv, int nt, __m256 vb, float *tv, size_t nv)
{
    size_t v = 0;
    for (; v + 8 <= nv; v += 8) {
        const float *p = b + v * 8;
        __m256 a0 = vb, a1 = vb, a2 = vb, a3 = vb, a4 = vb, a5 = vb, a6 = vb, a7 = vb;
        for (int t = 0; t < nt; t++) {
            const float *q = p + off[t];
            const __m256 wt = wv[t];
            a0 = _mm256_fmadd_ps(wt, _mm256_loadu_ps(q), a0);
            a1 = _mm256_fmadd_ps(wt, _mm256_loadu_ps(q + 8), a1);
            a2 = _mm256_fmadd_ps(wt, _mm256_loadu_ps(q + 16), a2);
            a3 = _mm256_fmadd_ps(wt, _mm256_loadu_ps(q + 24), a3);
            a4 = _mm256_fmadd_ps(wt, _mm256_loadu_ps(q + 32), a4);
            a5 = _mm256_fmadd_ps(wt, _mm256_loadu_ps(q + 40), a5);
            a6 = _mm256_fmadd_ps(wt, _mm256_loadu_ps(q + 48), a6);
            a7 = _mm256_fmadd_ps(wt, _mm256_loadu_ps(q + 56), a7);
        }
        float *d = tv + v * 8;
        _mm256_storeu_ps(d, a0);
        _mm256_storeu_ps(d + 8, a1);
        _mm256_storeu_ps(d + 16, a2);
        _mm256_storeu_ps(d + 24, a3);
        _mm256_storeu_ps(d + 32, a4);
        _mm256_storeu_ps(d + 40, a5);
        _mm256_storeu_ps(d + 48, a6);
        _mm256_storeu_ps(d + 56, a7);
    }
    for (; v + 4 <= nv; v += 4) {
        const float *p = b + v * 8;
        __m256 a0 = vb, a1 = vb, a2 = vb, a3 = vb;
        for (int t = 0; t < nt; t++) {
            const float *q = p + off[t];
            const __m256 wt = wv[t];
            a0 = _mm256_fmadd_ps(wt, _mm256_loadu_ps(q), a0);
            a1 = _mm256_fmadd_ps(wt, _mm256_loadu_ps(q + 8), a1);
            a2 = _mm256_fmadd_ps(wt, _mm256_loadu_ps(q + 16), a2);
            a3 = _mm256_fmadd_ps(wt, _mm256_loadu_ps(q + 24), a3);
        }
        float *d = tv + v * 8;
        _mm256_storeu_ps(d, a0);
        _mm256_storeu_ps(d + 8, a1);
        _mm256_storeu_ps(d + 16, a2);
        _mm256_storeu_ps(d + 24, a3);
    }
    for (; v < nv; v++) {
        const float *p = b + v * 8;
        __m256 a0 = vb;
        for (int t = 0; t < nt; t++)
            a0 = _mm256_fmadd_ps(wv[t], _mm256_loadu_ps(p + off[t]), a0);
        _mm256_storeu_ps(tv + v * 8, a0);
    }
}

/* The geometry of one flat run. */
typedef struct dw_flat {
    size_t h, w, oh, ow, pt, pl, ws, sp, hp;
    int kh, kw, sh, sw;
} dw_flat;

/* Zeros on the (sub-)planes at buf (n floats). */
static void flat_clear(float *buf, size_t n)
{
    const __m256 z = _mm256_set1_ps(dw_zero);
    for (size_t c = 0; c < n; c += 8)
        _mm256_storeu_ps(buf + c, z);
}

/* Input plane x into the padded (sub-)planes at buf, cleared by
 * flat_clear or by an earlier flat_fill of the same geometry: only the
 * input's columns are written, row after row, and what a row's last
 * vector stores past them is zero (on the padding, or on the next row's
 * padding, or on data written after it). */
static void flat_fill(const dw_flat *f, const float *x, float *buf)
{
    const size_t ws = f->ws, sp = f->sp, hp = f->hp, pt = f->pt, pl = f->pl, w = f->w;
    const size_t nr = f->h < hp - (pt < hp ? pt : hp) ? f->h : hp - (pt < hp ? pt : hp);
    if (f->sh == 1) {
        const size_t nc = pl < ws ? (w < ws - pl ? w : ws - pl) : 0;
        const __m256i m = lanes((ptrdiff_t)(nc % 8));
        for (size_t r = 0; r < nr; r++) {
            const float *xr = x + r * w;
            float *d = buf + (r + pt) * ws + pl;
            size_t c = 0;
            for (; c + 8 <= nc; c += 8)
                _mm256_storeu_ps(d + c, _mm256_loadu_ps(xr + c));
            if (c < nc)
                _mm256_storeu_ps(d + c, _mm256_maskload_ps(xr + c, m));
        }
        return;
    }
    const size_t q = pl / 2, p = pl % 2;
    const size_t nx = q + p < ws ? (w < 2 * (ws - q - p) ? w : 2 * (ws - q - p)) : 0;
    for (size_t r = 0; r < nr; r++) {
        const size_t pr = r + pt;
        const float *xr = x + r * w;
        float *d = buf + (pr & 1) * 2 * sp + (pr >> 1) * ws;
        float *pe = d + p * sp + q, *po = d + (1 - p) * sp + q + p; /* input columns 2t, 2t + 1 */
        size_t t = 0;
        for (; 2 * t + 16 <= nx; t += 8) {
            __m256 lo = _mm256_loadu_ps(xr + 2 * t), hi = _mm256_loadu_ps(xr + 2 * t + 8);
            __m256 ev = _mm256_shuffle_ps(lo, hi, 0x88), od = _mm256_shuffle_ps(lo, hi, 0xDD);
            _mm256_storeu_ps(pe + t, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(ev), 0xD8)));
            _mm256_storeu_ps(po + t, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(od), 0xD8)));
        }
        if (2 * t < nx) {
            ptrdiff_t rem = (ptrdiff_t)(nx - 2 * t);
            __m256 lo = _mm256_maskload_ps(xr + 2 * t, lanes(rem)), hi = _mm256_maskload_ps(xr + 2 * t + 8, lanes(rem - 8));
            __m256 ev = _mm256_shuffle_ps(lo, hi, 0x88), od = _mm256_shuffle_ps(lo, hi, 0xDD);
            _mm256_storeu_ps(pe + t, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(ev), 0xD8)));
            _mm256_storeu_ps(po + t, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(od), 0xD8)));
        }
    }
}

/* flat_run for 9 taps: the taps in registers, 4 vectors at a time. */
static void flat_run9(const float *b, const size_t *off, const __m256 *wv, __m256 vb, float *tv, size_t nv)
{
    const float *q0 = b + off[0], *q1 = b + off[1], *q2 = b + off[2], *q3 = b + off[3], *q4 = b + off[4];
    const float *q5 = b + off[5], *q6 = b + off[6], *q7 = b + off[7], *q8 = b + off[8];
    const __m256 w0 = wv[0], w1 = wv[1], w2 = wv[2], w3 = wv[3], w4 = wv[4], w5 = wv[5], w6 = wv[6], w7 = wv[7],
                 w8 = wv[8];
    size_t i = 0, n = nv * 8;
#define F9(acc, o)                                                                                                 \
    acc = _mm256_fmadd_ps(w0, _mm256_loadu_ps(q0 + i + (o)), acc);                                                \
    acc = _mm256_fmadd_ps(w1, _mm256_loadu_ps(q1 + i + (o)), acc);                                                \
    acc = _mm256_fmadd_ps(w2, _mm256_loadu_ps(q2 + i + (o)), acc);                                                \
    acc = _mm256_fmadd_ps(w3, _mm256_loadu_ps(q3 + i + (o)), acc);                                                \
    acc = _mm256_fmadd_ps(w4, _mm256_loadu_ps(q4 + i + (o)), acc);                                                \
    acc = _mm256_fmadd_ps(w5, _mm256_loadu_ps(q5 + i + (o)), acc);                                                \
    acc = _mm256_fmadd_ps(w6, _mm256_loadu_ps(q6 + i + (o)), acc);                                                \
    acc = _mm256_fmadd_ps(w7, _mm256_loadu_ps(q7 + i + (o)), acc);                                                \
    acc = _mm256_fmadd_ps(w8, _mm256_loadu_ps(q8 + i + (o)), acc)
    for (; i + 32 <= n; i += 32) {
        __m256 a0 = vb, a1 = vb, a2 = vb, a3 = vb;
        F9(a0, 0);
        F9(a1, 8);
        F9(a2, 16);
        F9(a3, 24);
        _mm256_storeu_ps(tv + i, a0);
        _mm256_storeu_ps(tv + i + 8, a1);
        _mm256_storeu_ps(tv + i + 16, a2);
        _mm256_storeu_ps(tv + i + 24, a3);
    }
    for (; i < n; i += 8) {
        __m256 a0 = vb;
        F9(a0, 0);
        _mm256_storeu_ps(tv + i, a0);
    }
#undef F9
}

/* The flat outputs of the padded plane at buf, kernel k, into tv. */
static void flat_compute(const dw_flat *f, const float *buf, const float *k, float bias, float *tv)
{
    __m256 wv[49];
    size_t off[49];
    const size_t ws = f->ws, sp = f->sp;
    for (size_t kr = 0, t = 0; kr < (size_t)f->kh; kr++) /* no divisions: per plane */
        for (size_t kc = 0; kc < (size_t)f->kw; kc++, t++) {
            wv[t] = _mm256_set1_ps(k[t]);
            off[t] = f->sh == 1 ? kr * ws + kc : ((kr & 1) * 2 + (kc & 1)) * sp + (kr >> 1) * ws + (kc >> 1);
        }
    const size_t nflat = (f->oh - 1) * ws + f->ow;
    if (f->kh * f->kw == 9)
        flat_run9(buf, off, wv, _mm256_set1_ps(bias), tv, (nflat + 7) / 8);
    else
        flat_run(buf, off, wv, f->kh * f->kw, _mm256_set1_ps(bias), tv, (nflat + 7) / 8);
}

/* The rows of the output plane y out of the flat outputs tv, clamped
 * when asked. */
static void flat_store(const dw_flat *f, const float *tv, float *y, int clamp, float lo, float hi)
{
    const size_t ws = f->ws, oh = f->oh, ow = f->ow;
    const __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
    for (size_t r = 0; r < oh; r++) {
        const float *s = tv + r * ws;
        float *d = y + r * ow;
        for (size_t c = 0; c < ow; c += 8) {
            const size_t cc = c + 8 <= ow || ow < 8 ? c : ow - 8;
            __m256 v = _mm256_loadu_ps(s + cc);
            if (clamp)
                v = _mm256_min_ps(vhi, _mm256_max_ps(vlo, v)); /* NaN stays NaN */
            if (ow >= 8 || (r * ow + 8 <= oh * ow))
                _mm256_storeu_ps(d + cc, v); /* ow < 8: spills into the next rows, written after */
            else
                store_part(d, ow, v);
        }
    }
}

static int flat_init(dw_flat *f, size_t h, size_t w, size_t oh, size_t ow, int kh, int kw, int sh, int sw, size_t pt,
                     size_t pl, size_t *ntf)
{
    if (!flat_geom(oh, ow, kh, kw, sh, sw, &f->ws, &f->sp, ntf))
        return 0;
    f->h = h;
    f->w = w;
    f->oh = oh;
    f->ow = ow;
    f->pt = pt;
    f->pl = pl;
    f->kh = kh;
    f->kw = kw;
    f->sh = sh;
    f->sw = sw;
    f->hp = (oh - 1) * (size_t)sh + (size_t)kh;
    return 1;
}

void dw_flat_avx2(const float *x, size_t h, size_t w, float *y, size_t oh, size_t ow, int kh, int kw, int sh,
                  int sw, size_t pt, size_t pl, const float *k, float bias, int clamp, float lo, float hi, float *buf)
{
    dw_flat f;
    size_t ntf;
    if (!flat_init(&f, h, w, oh, ow, kh, kw, sh, sw, pt, pl, &ntf))
        return;
    float *tv = buf + f.sp * (sh == 1 ? 1 : 4);
    flat_clear(buf, f.sp * (sh == 1 ? 1 : 4));
    flat_fill(&f, x, buf);
    flat_compute(&f, buf, k, bias, tv);
    flat_store(&f, tv, y, clamp, lo, hi);
}

size_t dw_flat8_floats(size_t oh, size_t ow, int kh, int kw, int sh, int sw)
{
    size_t n = dw_flat_floats(oh, ow, kh, kw, sh, sw);
    return n && n < SIZE_MAX / 2 ? 2 * n : 0;
}

void dw_flat8_avx2(const float *const *x, size_t h, size_t w, float *y, size_t oh, size_t ow, int kh, int kw,
                   int sh, int sw, size_t pt, size_t pl, const float *const *k, const float *bias, int clamp,
                   float lo, float hi, float *buf)
{
    dw_flat f;
    size_t ntf;
    if (!flat_init(&f, h, w, oh, ow, kh, kw, sh, sw, pt, pl, &ntf))
        return;
    /* two planes and two flat outputs, in turn: a plane is read, and a
     * flat output stored, one plane after it was written (its stores
     * retired, not forwarded piecewise to the unaligned loads) */
    const size_t psz = f.sp * (sh == 1 ? 1 : 4), npx = oh * ow;
    float *pb[2] = {buf, buf + psz}, *tb[2] = {buf + 2 * psz, buf + 2 * psz + ntf};
    flat_clear(buf, 2 * psz);
    flat_fill(&f, x[0], pb[0]);
    for (size_t ch = 0; ch < 8; ch++) {
        if (ch + 1 < 8)
            flat_fill(&f, x[ch + 1], pb[(ch + 1) & 1]);
        flat_compute(&f, pb[ch & 1], k[ch], bias[ch], tb[ch & 1]);
        if (ch)
            flat_store(&f, tb[(ch - 1) & 1], y + (ch - 1) * npx, clamp, lo, hi);
    }
    flat_store(&f, tb[1], y + 7 * npx, clamp, lo, hi);
}

/* ---- 8 small planes at once, channels across the vector ---- */

/* Transposes the 8 x 8 block v[0..8) in place. */
static void transpose8(__m256 *v)
{
    __m256 t0 = _mm256_unpacklo_ps(v[0], v[1]), t1 = _mm256_unpackhi_ps(v[0], v[1]);
    __m256 t2 = _mm256_unpacklo_ps(v[2], v[3]), t3 = _mm256_unpackhi_ps(v[2], v[3]);
    __m256 t4 = _mm256_unpacklo_ps(v[4], v[5]), t5 = _mm256_unpackhi_ps(v[4], v[5]);
    __m256 t6 = _mm256_unpacklo_ps(v[6], v[7]), t7 = _mm256_unpackhi_ps(v[6], v[7]);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    v[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
    v[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
    v[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
    v[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
    v[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
    v[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
    v[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
    v[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

size_t dw8_floats(size_t oh, size_t ow, int kh, int kw, int sh, int sw)
{
    if (!oh || !ow || oh > 4096 || ow > 4096 || kh < 1 || kw < 1 || kh > 7 || kw > 7)
        return 0;
    size_t hp = (oh - 1) * (size_t)sh + (size_t)kh, wp = (ow - 1) * (size_t)sw + (size_t)kw;
    /* the padded planes, the outputs, slack for the 8-column blocks */
    return (hp * wp + oh * ow) * 8 + 128;
}

void dw_planes8_avx2(const float *const *x, size_t h, size_t w, float *y, size_t oh, size_t ow, int kh, int kw,
                     int sh, int sw, size_t pt, size_t pl, const float *const *k, const float *bias, int clamp,
                     float lo, float hi, float *buf)
{
    const size_t hp = (oh - 1) * (size_t)sh + (size_t)kh, wp = (ow - 1) * (size_t)sw + (size_t)kw;
    const size_t npx = oh * ow;
    float *pp = buf, *po = buf + hp * wp * 8;
    const __m256 z = _mm256_set1_ps(dw_zero);
    const size_t nc = pl < wp ? (w < wp - pl ? w : wp - pl) : 0;
    /* zeros on the padding only (the input columns below fill the rest) */
    for (size_t r = 0; r < hp; r++) {
        float *d = pp + r * wp * 8;
        if (r < pt || r - pt >= h) {
            for (size_t i = 0; i < wp; i++)
                _mm256_storeu_ps(d + i * 8, z);
            continue;
        }
        for (size_t i = 0; i < pl && i < wp; i++)
            _mm256_storeu_ps(d + i * 8, z);
        for (size_t i = pl + nc; i < wp; i++)
            _mm256_storeu_ps(d + i * 8, z);
    }
    /* the 8 padded planes interleaved, pp[(r * wp + c) * 8 + ch], by 8 x 8
     * transposes of 8 input columns; the columns past an input row (zeros)
     * may land on the padding after it and on the next padded row, or in
     * the slack */
    for (size_t r = 0; r < h && r + pt < hp; r++)
        for (size_t c = 0; c < nc; c += 8) {
            __m256 v[8];
            if (c + 8 <= nc) {
                for (int ch = 0; ch < 8; ch++)
                    v[ch] = _mm256_loadu_ps(x[ch] + r * w + c);
            } else {
                __m256i m = lanes((ptrdiff_t)(nc - c));
                for (int ch = 0; ch < 8; ch++)
                    v[ch] = _mm256_maskload_ps(x[ch] + r * w + c, m);
            }
            transpose8(v);
            float *d = pp + ((r + pt) * wp + pl + c) * 8;
            for (int i = 0; i < 8; i++)
                _mm256_storeu_ps(d + i * 8, v[i]);
        }
    __m256 wv[49];
    size_t off[49];
    const int nt = kh * kw;
    for (size_t kr = 0, t = 0; kr < (size_t)kh; kr++) /* no divisions: per 8 planes */
        for (size_t kc = 0; kc < (size_t)kw; kc++, t++) {
            wv[t] = _mm256_setr_ps(k[0][t], k[1][t], k[2][t], k[3][t], k[4][t], k[5][t], k[6][t], k[7][t]);
            off[t] = (kr * wp + kc) * 8;
        }
    const __m256 vb = _mm256_loadu_ps(bias);
    size_t p = 0;
    /* the window of the next output pixel (row pr, column pc): its float
     * offset in pp, stepped without divisions; tap t of it is at
     * pp + off[t] + that offset (one base per tap and the windows as index
     * registers: a multiply-add per load, no address arithmetic) */
    const size_t rstep = (size_t)sh * wp * 8, cstep = (size_t)sw * 8;
    size_t pr = 0, pc = 0;
#define DW8_NEXT(b)                                                                                               \
    const size_t b = pr * rstep + pc * cstep;                                                                     \
    if (++pc == ow) {                                                                                             \
        pc = 0;                                                                                                   \
        pr++;                                                                                                     \
    }
/* the 8 sums a0..a7 of the windows at b0..b7, taps in order, and the
 * extra statement X once per tap (q: the tap's base, wt its weights) */
#define DW8_GROUP(X)                                                                                              \
    __m256 a0 = vb, a1 = vb, a2 = vb, a3 = vb, a4 = vb, a5 = vb, a6 = vb, a7 = vb;                                \
    for (int t = 0; t < nt; t++) {                                                                                \
        const __m256 wt = wv[t];                                                                                  \
        const float *q = pp + off[t];                                                                             \
        a0 = _mm256_fmadd_ps(wt, _mm256_loadu_ps(q + b0), a0);                                                    \
        a1 = _mm256_fmadd_ps(wt, _mm256_loadu_ps(q + b1), a1);                                                    \
        a2 = _mm256_fmadd_ps(wt, _mm256_loadu_ps(q + b2), a2);                                                    \
        a3 = _mm256_fmadd_ps(wt, _mm256_loadu_ps(q + b3), a3);                                                    \
        a4 = _mm256_fmadd_ps(wt, _mm256_loadu_ps(q + b4), a4);                                                    \
        a5 = _mm256_fmadd_ps(wt, _mm256_loadu_ps(q + b5), a5);                                                    \
        a6 = _mm256_fmadd_ps(wt, _mm256_loadu_ps(q + b6), a6);                                                    \
        a7 = _mm256_fmadd_ps(wt, _mm256_loadu_ps(q + b7), a7);                                                    \
        X;                                                                                                        \
    }                                                                                                             \
    float *d = po + p * 8;                                                                                        \
    _mm256_storeu_ps(d, a0);                                                                                      \
    _mm256_storeu_ps(d + 8, a1);                                                                                  \
    _mm256_storeu_ps(d + 16, a2);                                                                                 \
    _mm256_storeu_ps(d + 24, a3);                                                                                 \
    _mm256_storeu_ps(d + 32, a4);                                                                                 \
    _mm256_storeu_ps(d + 40, a5);                                                                                 \
    _mm256_storeu_ps(d + 48, a6);                                                                                 \
    _mm256_storeu_ps(d + 56, a7)
    for (; p + 8 <= npx; p += 8) { /* 8 output pixels, taps in order: 8 sums in flight */
        DW8_NEXT(b0)
        DW8_NEXT(b1)
        DW8_NEXT(b2)
        DW8_NEXT(b3)
        DW8_NEXT(b4)
        DW8_NEXT(b5)
        DW8_NEXT(b6)
        DW8_NEXT(b7)
        if (p + 9 != npx) {
            DW8_GROUP((void)0);
            continue;
        }
        /* the last 9 (7 x 7 planes): the ninth a ninth sum in flight
         * (measured: alone, its chain of multiply-adds cost as much as 8) */
        DW8_NEXT(b8)
        __m256 a8 = vb;
        DW8_GROUP(a8 = _mm256_fmadd_ps(wt, _mm256_loadu_ps(q + b8), a8));
        _mm256_storeu_ps(d + 64, a8);
        p++;
    }
#undef DW8_GROUP
    for (; p + 4 <= npx; p += 4) { /* 4 output pixels, taps in order */
        DW8_NEXT(b0)
        DW8_NEXT(b1)
        DW8_NEXT(b2)
        DW8_NEXT(b3)
        __m256 a0 = vb, a1 = vb, a2 = vb, a3 = vb;
        for (int t = 0; t < nt; t++) {
            const float *q = pp + off[t];
            a0 = _mm256_fmadd_ps(wv[t], _mm256_loadu_ps(q + b0), a0);
            a1 = _mm256_fmadd_ps(wv[t], _mm256_loadu_ps(q + b1), a1);
            a2 = _mm256_fmadd_ps(wv[t], _mm256_loadu_ps(q + b2), a2);
            a3 = _mm256_fmadd_ps(wv[t], _mm256_loadu_ps(q + b3), a3);
        }
        _mm256_storeu_ps(po + p * 8, a0);
        _mm256_storeu_ps(po + p * 8 + 8, a1);
        _mm256_storeu_ps(po + p * 8 + 16, a2);
        _mm256_storeu_ps(po + p * 8 + 24, a3);
    }
    for (; p < npx; p++) {
        DW8_NEXT(b0)
        __m256 a0 = vb;
        for (int t = 0; t < nt; t++)
            a0 = _mm256_fmadd_ps(wv[t], _mm256_loadu_ps(pp + off[t] + b0), a0);
        _mm256_storeu_ps(po + p * 8, a0);
    }
#undef DW8_NEXT
    /* back to 8 planes, 8 outputs at a time */
    for (p = 0; p < npx; p += 8) {
        __m256 v[8];
        for (int i = 0; i < 8; i++)
            v[i] = _mm256_loadu_ps(po + (p + (size_t)i) * 8); /* past npx: slack, not stored */
        transpose8(v);
        if (clamp) {
            const __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
            for (int i = 0; i < 8; i++)
                v[i] = _mm256_min_ps(vhi, _mm256_max_ps(vlo, v[i])); /* NaN stays NaN */
        }
        for (int ch = 0; ch < 8; ch++) {
            float *d = y + (size_t)ch * npx + p;
            if (p + 8 <= npx)
                _mm256_storeu_ps(d, v[ch]);
            else
                store_part(d, npx - p, v[ch]);
        }
    }
}

#else

size_t dw_flat8_floats(size_t oh, size_t ow, int kh, int kw, int sh, int sw)
{
    (void)oh;
    (void)ow;
    (void)kh;
    (void)kw;
    (void)sh;
    (void)sw;
    return 0;
}

void dw_flat8_avx2(const float *const *x, size_t h, size_t w, float *y, size_t oh, size_t ow, int kh, int kw,
                   int sh, int sw, size_t pt, size_t pl, const float *const *k, const float *bias, int clamp,
                   float lo, float hi, float *buf)
{
    (void)x;
    (void)h;
    (void)w;
    (void)y;
    (void)oh;
    (void)ow;
    (void)kh;
    (void)kw;
    (void)sh;
    (void)sw;
    (void)pt;
    (void)pl;
    (void)k;
    (void)bias;
    (void)clamp;
    (void)lo;
    (void)hi;
    (void)buf;
}

void dw_flat_avx2(const float *x, size_t h, size_t w, float *y, size_t oh, size_t ow, int kh, int kw, int sh,
                  int sw, size_t pt, size_t pl, const float *k, float bias, int clamp, float lo, float hi, float *buf)
{
    (void)x;
    (void)h;
    (void)w;
    (void)y;
    (void)oh;
    (void)ow;
    (void)kh;
    (void)kw;
    (void)sh;
    (void)sw;
    (void)pt;
    (void)pl;
    (void)k;
    (void)bias;
    (void)clamp;
    (void)lo;
    (void)hi;
    (void)buf;
}

void dw_plane_avx2(const float *x, size_t h, size_t w, float *y, size_t oh, size_t ow, int kh, int kw, int sh,
                   int sw, size_t pt, size_t pl, const float *k, float bias, int clamp, float lo, float hi, float *pad,
                   dw_post_fn post, void *post_ctx)
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
    (void)post;
    (void)post_ctx;
}

size_t dw8_floats(size_t oh, size_t ow, int kh, int kw, int sh, int sw)
{
    (void)oh;
    (void)ow;
    (void)kh;
    (void)kw;
    (void)sh;
    (void)sw;
    return 0;
}

void dw_planes8_avx2(const float *const *x, size_t h, size_t w, float *y, size_t oh, size_t ow, int kh, int kw,
                     int sh, int sw, size_t pt, size_t pl, const float *const *k, const float *bias, int clamp,
                     float lo, float hi, float *buf)
{
    (void)clamp;
    (void)lo;
    (void)hi;
    (void)x;
    (void)h;
    (void)w;
    (void)y;
    (void)oh;
    (void)ow;
    (void)kh;
    (void)kw;
    (void)sh;
    (void)sw;
    (void)pt;
    (void)pl;
    (void)k;
    (void)bias;
    (void)buf;
}

#endif
