/* The AVX2 depthwise plane kernel (dw_plane_avx2) against a double
 * reference over kernel sizes, strides, pads, odd widths, the fused
 * clamp and the post callback, with sentinels after the output; the whole
 * depthwise Conv (op_conv_depthwise_f32: batches, 2 outputs per channel,
 * activations, 1 and 2 threads, the other paths); and the AVX2 Sigmoid
 * (op_ew_sigmoid_avx2) against 1 / (1 + exp(-x)) in double and the AVX2 erf
 * (op_ew_erf_avx2) against erf in double and the AVX2 exp
 * (op_ew_exp_shift_avx2) against exp in double, including the tails, infinities
 * and NaN; and sessions of a depthwise Conv followed by a Clip or a Relu
 * that the kernels apply as they store (op_fuse_clamp), fused on 1 and 2
 * threads against unfused, bit for bit, with NaN, infinities and -0.
 * Skipped (exit 77) on CPUs without AVX2/FMA. */
#include "core/err.h"
#include "core/pool.h"
#include "ops/elementwise.h"
#include "ops/nn.h"
#include "graph/fuse.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the graph builders and session runs (its CHECK replaced below) */
#include "perf_graph.h"
#undef CHECK

static int fails, checks;

#define CHECK(cond, ...)                                                                                         \
    do {                                                                                                         \
        checks++;                                                                                                \
        if (!(cond)) {                                                                                           \
            fails++;                                                                                             \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                                          \
            printf(__VA_ARGS__);                                                                                 \
            printf("\n");                                                                                        \
        }                                                                                                        \
    } while (0)

static unsigned long long rng = 0x9E3779B97F4A7C15ULL;

static float frand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 11) % 2001) / 1000.0f - 1.0f;
}

#define SENT 12345.0f

/* The post callback under test: doubles the outputs it is handed and
 * checks that they come in order, once each. */
typedef struct post_rec {
    size_t next; /* the next offset expected */
    int bad;
} post_rec;

static void post_double(void *ctx, float *y, size_t off, size_t n)
{
    post_rec *r = ctx;
    if (off != r->next || !n)
        r->bad = 1;
    r->next = off + n;
    for (size_t i = 0; i < n; i++)
        y[i] *= 2.0f;
}

static int use_post; /* alternates between check_dw calls */
static int flat_mode; /* check_dw runs dw_flat_avx2 (no post) instead */

/* One plane: h x w input, kh x kw kernel, strides, pads (top, left,
 * bottom, right), clamp to [lo, hi] when clamp. */
static void check_dw(size_t h, size_t w, int kh, int kw, int sh, int sw, size_t pt, size_t pl, size_t pb, size_t pr,
                     int clamp)
{
    if (h + pt + pb < (size_t)kh || w + pl + pr < (size_t)kw)
        return;
    size_t oh = (h + pt + pb - (size_t)kh) / (size_t)sh + 1, ow = (w + pl + pr - (size_t)kw) / (size_t)sw + 1;
    float *x = malloc(h * w * sizeof *x), *y = malloc((oh * ow + 16) * sizeof *y), k[49];
    size_t np = flat_mode ? dw_flat_floats(oh, ow, kh, kw, sh, sw) : dw_pad_floats(oh, ow, kh, kw, sh, sw);
    if (flat_mode && !np) { /* not supported (sh != sw) */
        CHECK(sh != sw, "dw_flat_floats: 0 for strides %d, %d", sh, sw);
        free(x);
        free(y);
        return;
    }
    float *pad = malloc(np * sizeof *pad);
    float bias = frand(), lo = -0.25f, hi = 0.5f;
    for (size_t i = 0; i < h * w; i++)
        x[i] = frand();
    for (int t = 0; t < kh * kw; t++)
        k[t] = frand();
    for (size_t i = 0; i < oh * ow + 16; i++)
        y[i] = SENT;
    CHECK(np > 0 && pad, "dw_pad_floats");
    if (!pad || !np) {
        free(x);
        free(y);
        free(pad);
        return;
    }
    post_rec rec = {0, 0};
    const int posted = flat_mode ? 0 : use_post;
    if (!flat_mode)
        use_post = !use_post;
    for (size_t i = 0; i < np; i++) /* garbage in the scratch */
        pad[i] = (i % 3) ? NAN : 1e30f;
    if (flat_mode)
        dw_flat_avx2(x, h, w, y, oh, ow, kh, kw, sh, sw, pt, pl, k, bias, clamp, lo, hi, pad);
    else
        dw_plane_avx2(x, h, w, y, oh, ow, kh, kw, sh, sw, pt, pl, k, bias, clamp, lo, hi, pad,
                      posted ? post_double : NULL, &rec);
    CHECK(!posted || (!rec.bad && rec.next == oh * ow), "h=%zu w=%zu k=%dx%d s=%d,%d: post calls out of order", h, w,
          kh, kw, sh, sw);
    int bad = 0;
    for (size_t o = 0; o < oh && !bad; o++)
        for (size_t q = 0; q < ow && !bad; q++) {
            double ref = bias, mag = fabs(bias);
            for (int a = 0; a < kh; a++)
                for (int b = 0; b < kw; b++) {
                    long ih = (long)(o * (size_t)sh) + a - (long)pt, iw = (long)(q * (size_t)sw) + b - (long)pl;
                    if (ih < 0 || iw < 0 || ih >= (long)h || iw >= (long)w)
                        continue;
                    double v = (double)k[a * kw + b] * x[(size_t)ih * w + (size_t)iw];
                    ref += v;
                    mag += fabs(v);
                }
            if (clamp)
                ref = ref < lo ? lo : ref > hi ? hi : ref;
            if (posted) {
                ref *= 2;
                mag *= 2;
            }
            double got = y[o * ow + q];
            if (fabs(got - ref) > 1e-6 * mag + 1e-7) {
                CHECK(0, "h=%zu w=%zu k=%dx%d s=%d,%d pads=%zu,%zu,%zu,%zu clamp=%d: y[%zu,%zu] = %.7g, want %.7g",
                      h, w, kh, kw, sh, sw, pt, pl, pb, pr, clamp, o, q, got, ref);
                bad = 1;
            }
        }
    if (!bad)
        CHECK(1, "plane");
    for (size_t i = oh * ow; i < oh * ow + 16; i++)
        if (y[i] != SENT) {
            CHECK(0, "h=%zu w=%zu k=%dx%d s=%d,%d: written past the output plane", h, w, kh, kw, sh, sw);
            break;
        }
    free(x);
    free(y);
    free(pad);
}

/* The whole depthwise Conv (op_conv_depthwise_f32): batch nb, c input
 * channels, mg outputs per channel, kh x kw at strides sh, sw with pads
 * (top, left, bottom, right), dilation dil, activation act, on threads
 * threads, against a double reference; y's tail is a sentinel. */
static void check_conv(int nb, int c, int mg, int h, int w, int kh, int kw, int sh, int sw, int pt, int pl, int pb,
                       int pr, int dil, const op_act *act, int threads)
{
    conv_plan p;
    memset(&p, 0, sizeof p);
    p.g.nsp = 2;
    p.g.in[0] = 1;
    p.g.in[1] = h;
    p.g.in[2] = w;
    p.g.k[0] = 1;
    p.g.k[1] = kh;
    p.g.k[2] = kw;
    p.g.s[0] = 1;
    p.g.s[1] = sh;
    p.g.s[2] = sw;
    p.g.d[0] = 1;
    p.g.d[1] = dil;
    p.g.d[2] = dil;
    p.g.pb[1] = pt;
    p.g.pb[2] = pl;
    p.g.pe[1] = pb;
    p.g.pe[2] = pr;
    int ekh = (kh - 1) * dil + 1, ekw = (kw - 1) * dil + 1;
    if (h + pt + pb < ekh || w + pl + pr < ekw)
        return;
    int oh = (h + pt + pb - ekh) / sh + 1, ow = (w + pl + pr - ekw) / sw + 1;
    p.g.out[0] = 1;
    p.g.out[1] = oh;
    p.g.out[2] = ow;
    p.n = nb;
    p.c = c;
    p.m = (int64_t)c * mg;
    p.group = c;
    p.cg = 1;
    p.mg = mg;
    p.in_sz = (size_t)h * (size_t)w;
    p.out_sz = (size_t)oh * (size_t)ow;
    p.k_sz = (size_t)kh * (size_t)kw;
    size_t nx = (size_t)nb * (size_t)c * p.in_sz, ny = (size_t)nb * (size_t)p.m * p.out_sz;
    float *x = malloc(nx * sizeof *x), *y = malloc((ny + 16) * sizeof *y);
    float *wt = malloc((size_t)p.m * p.k_sz * sizeof *wt), *bias = malloc((size_t)p.m * sizeof *bias);
    for (size_t i = 0; i < nx; i++)
        x[i] = frand();
    for (size_t i = 0; i < (size_t)p.m * p.k_sz; i++)
        wt[i] = frand();
    for (int64_t i = 0; i < p.m; i++)
        bias[i] = frand();
    for (size_t i = 0; i < ny + 16; i++)
        y[i] = SENT;
    tdm_err e;
    memset(&e, 0, sizeof e);
    op_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.threads = threads;
    ctx.err = &e;
    tdm_status st = op_conv_depthwise_f32(&ctx, &p, x, wt, bias, act, y);
    CHECK(st == TDM_OK, "op_conv_depthwise_f32 failed");
    int bad = 0;
    for (int n = 0; n < nb && !bad; n++)
        for (int64_t m = 0; m < p.m && !bad; m++)
            for (int o = 0; o < oh && !bad; o++)
                for (int q = 0; q < ow && !bad; q++) {
                    const float *xp = x + ((size_t)n * (size_t)c + (size_t)(m / mg)) * p.in_sz;
                    double ref = bias[m], mag = fabs(bias[m]);
                    for (int a = 0; a < kh; a++)
                        for (int b = 0; b < kw; b++) {
                            int ih = o * sh + a * dil - pt, iw = q * sw + b * dil - pl;
                            if (ih < 0 || iw < 0 || ih >= h || iw >= w)
                                continue;
                            double v = (double)wt[(size_t)m * p.k_sz + (size_t)(a * kw + b)] * xp[ih * w + iw];
                            ref += v;
                            mag += fabs(v);
                        }
                    switch (act->kind) {
                    case OP_ACT_RELU:
                        ref = ref < 0 ? 0 : ref;
                        break;
                    case OP_ACT_CLIP:
                        ref = ref < act->a ? act->a : ref > act->b ? act->b : ref;
                        break;
                    case OP_ACT_LEAKY_RELU:
                        ref = ref < 0 ? act->a * ref : ref;
                        break;
                    case OP_ACT_HARD_SWISH: {
                        double t = act->a * ref + act->b;
                        ref *= t < 0 ? 0 : t > 1 ? 1 : t;
                        break;
                    }
                    default:
                        break;
                    }
                    double got = y[(((size_t)n * (size_t)p.m + (size_t)m) * (size_t)oh + (size_t)o) * (size_t)ow +
                                   (size_t)q];
                    if (fabs(got - ref) > 1e-5 * mag + 1e-6) {
                        CHECK(0,
                              "conv n=%d c=%d mg=%d %dx%d k=%dx%d s=%d,%d pads=%d,%d,%d,%d d=%d act=%d threads=%d: "
                              "y[%d,%lld,%d,%d] = %.7g, want %.7g",
                              nb, c, mg, h, w, kh, kw, sh, sw, pt, pl, pb, pr, dil, act->kind, threads, n,
                              (long long)m, o, q, got, ref);
                        bad = 1;
                    }
                }
    if (!bad)
        CHECK(1, "conv");
    for (size_t i = ny; i < ny + 16; i++)
        if (y[i] != SENT) {
            CHECK(0, "conv %dx%d k=%dx%d: written past the output", h, w, kh, kw);
            break;
        }
    free(x);
    free(y);
    free(wt);
    free(bias);
}

/* The whole depthwise Conv on 1 and 2 threads (and 4 tasks' worth of
 * planes): bit-identical outputs. */
static void check_threads_same(int nb, int c, int h, int w, int k, int st, int pt, int pl, int pb, int pr,
                               const op_act *act)
{
    conv_plan p;
    memset(&p, 0, sizeof p);
    p.g.nsp = 2;
    p.g.in[0] = 1;
    p.g.in[1] = h;
    p.g.in[2] = w;
    p.g.k[0] = 1;
    p.g.k[1] = k;
    p.g.k[2] = k;
    p.g.s[0] = 1;
    p.g.s[1] = st;
    p.g.s[2] = st;
    p.g.d[0] = p.g.d[1] = p.g.d[2] = 1;
    p.g.pb[1] = pt;
    p.g.pb[2] = pl;
    p.g.pe[1] = pb;
    p.g.pe[2] = pr;
    int oh = (h + pt + pb - k) / st + 1, ow = (w + pl + pr - k) / st + 1;
    p.g.out[0] = 1;
    p.g.out[1] = oh;
    p.g.out[2] = ow;
    p.n = nb;
    p.c = c;
    p.m = c;
    p.group = c;
    p.cg = 1;
    p.mg = 1;
    p.in_sz = (size_t)h * (size_t)w;
    p.out_sz = (size_t)oh * (size_t)ow;
    p.k_sz = (size_t)k * (size_t)k;
    size_t nx = (size_t)nb * (size_t)c * p.in_sz, ny = (size_t)nb * (size_t)c * p.out_sz;
    float *x = malloc(nx * sizeof *x), *y1 = malloc(ny * sizeof *y1), *y2 = malloc(ny * sizeof *y2);
    float *wt = malloc((size_t)c * p.k_sz * sizeof *wt), *bias = malloc((size_t)c * sizeof *bias);
    for (size_t i = 0; i < nx; i++)
        x[i] = frand();
    for (size_t i = 0; i < (size_t)c * p.k_sz; i++)
        wt[i] = frand();
    for (int i = 0; i < c; i++)
        bias[i] = frand();
    tdm_err e;
    memset(&e, 0, sizeof e);
    op_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.err = &e;
    ctx.threads = 1;
    tdm_status s1 = op_conv_depthwise_f32(&ctx, &p, x, wt, bias, act, y1);
    ctx.threads = 2;
    tdm_status s2 = op_conv_depthwise_f32(&ctx, &p, x, wt, bias, act, y2);
    CHECK(s1 == TDM_OK && s2 == TDM_OK && memcmp(y1, y2, ny * sizeof *y1) == 0,
          "depthwise n=%d c=%d %dx%d k=%d s=%d pads=%d,%d,%d,%d: 1 and 2 threads differ", nb, c, h, w, k, st, pt, pl,
          pb, pr);
    free(x);
    free(y1);
    free(y2);
    free(wt);
    free(bias);
}

static void check_convs(void)
{
    static const int planes[][2] = {{1, 1}, {2, 3}, {7, 7}, {14, 14}, {9, 31}, {28, 17}, {40, 40}, {33, 70}};
    static const int pads[][4] = {{1, 1, 1, 1}, {0, 0, 0, 0}, {2, 2, 2, 2}, {0, 1, 2, 0}, {2, 0, 1, 2}};
    const op_act none = {OP_ACT_NONE, 0, 0}, relu = {OP_ACT_RELU, 0, 0}, clip = {OP_ACT_CLIP, 0.0f, 6.0f};
    const op_act leaky = {OP_ACT_LEAKY_RELU, 0.1f, 0}, hsw = {OP_ACT_HARD_SWISH, 1.0f / 6, 0.5f};
    const op_act *acts[] = {&none, &relu, &clip, &leaky, &hsw};
    int i = 0;
    for (size_t s = 0; s < sizeof planes / sizeof planes[0]; s++)
        for (int k = 3; k <= 5; k += 2)
            for (int st = 1; st <= 2; st++)
                for (size_t q = 0; q < sizeof pads / sizeof pads[0]; q++, i++) {
                    const int *pd = pads[q];
                    check_conv(1 + i % 2, 3 + i % 5, 1 + (i / 3) % 2, planes[s][0], planes[s][1], k, k, st, st, pd[0],
                               pd[1], pd[2], pd[3], 1, acts[i % 5], 1 + (i / 2) % 2);
                }
    /* many small planes split over tasks (8 planes at a time up to 64
     * outputs a plane, the rest one by one), both thread counts */
    for (int threads = 1; threads <= 2; threads++) {
        check_conv(2, 13, 2, 5, 6, 5, 5, 2, 2, 2, 1, 0, 2, 1, &leaky, threads);
        check_conv(3, 11, 1, 9, 17, 3, 3, 2, 2, 0, 1, 1, 0, 1, &relu, threads);
        check_conv(1, 24, 1, 1, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, &clip, threads);
        check_conv(1, 17, 1, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, &none, threads);
        check_conv(2, 96, 1, 7, 7, 5, 5, 1, 1, 2, 2, 2, 2, 1, &hsw, threads);
        check_conv(1, 200, 1, 14, 14, 3, 3, 2, 2, 1, 1, 1, 1, 1, &clip, threads);
        check_conv(1, 16, 1, 61, 83, 3, 3, 1, 1, 1, 1, 1, 1, 1, &none, threads);
    }
    /* 5 x 5 rows 16 outputs wide or more, two vectors across: odd and
     * even widths, pads 1 and 2, strides 1 and 2 (and mixed), both thread counts */
    check_conv(1, 5, 1, 23, 16, 5, 5, 1, 1, 2, 2, 2, 2, 1, &clip, 1);
    check_conv(2, 3, 2, 19, 31, 5, 5, 1, 1, 1, 1, 1, 1, 1, &none, 2);
    check_conv(1, 4, 1, 21, 34, 5, 5, 2, 2, 2, 2, 2, 2, 1, &leaky, 2);
    check_conv(1, 3, 1, 20, 37, 5, 5, 2, 2, 1, 2, 1, 1, 1, &hsw, 1);
    check_conv(1, 3, 1, 18, 40, 5, 5, 1, 2, 2, 1, 2, 2, 1, &relu, 2);
    check_conv(1, 3, 1, 18, 21, 5, 5, 2, 1, 0, 1, 0, 2, 1, &clip, 1);
    /* the other paths: unequal strides, non-square kernels, 7 x 7, dilation 2, 3 x 3 stride 3 */
    check_conv(2, 5, 2, 17, 19, 3, 3, 1, 2, 1, 1, 1, 1, 1, &relu, 2);
    check_conv(1, 4, 1, 17, 19, 5, 3, 2, 1, 2, 1, 2, 1, 1, &none, 1);
    check_conv(1, 4, 1, 20, 23, 1, 5, 1, 1, 0, 2, 0, 2, 1, &leaky, 2);
    check_conv(1, 4, 1, 20, 23, 7, 7, 2, 2, 3, 3, 3, 3, 1, &clip, 1);
    check_conv(1, 4, 2, 20, 23, 3, 3, 1, 1, 2, 2, 2, 2, 2, &none, 2);
    check_conv(1, 4, 1, 20, 23, 3, 3, 3, 3, 1, 1, 1, 1, 1, &relu, 1);
    /* 8 small planes at a time with pads on some sides only, the models'
     * shapes (mobilenet_v2, efficientnet_b0), on 1 and 2 threads */
    check_conv(1, 24, 1, 14, 14, 3, 3, 1, 1, 0, 2, 1, 0, 1, &clip, 2);
    check_conv(1, 16, 1, 13, 11, 5, 5, 2, 2, 2, 0, 0, 2, 1, &none, 1);
    check_conv(1, 16, 1, 15, 9, 3, 3, 2, 2, 0, 0, 0, 0, 1, &relu, 2);
    /* 8 at a time, planes of 8 k + 1 outputs (7 x 7, 5 x 5, 9 x 9, 3 x 3):
     * the last 9 outputs of a plane in one group */
    check_conv(1, 16, 1, 7, 7, 5, 5, 1, 1, 2, 2, 2, 2, 1, &clip, 2);
    check_conv(1, 9, 1, 14, 14, 5, 5, 2, 2, 2, 2, 1, 1, 1, &none, 1);
    check_conv(2, 8, 1, 9, 9, 5, 5, 1, 1, 2, 1, 2, 3, 1, &relu, 2);
    check_conv(1, 24, 1, 5, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, &hsw, 1);
    check_conv(1, 8, 1, 17, 17, 3, 3, 2, 2, 1, 1, 1, 1, 1, &leaky, 1);
    /* 3 x 3 planes 12 or more wide, 8 at a time flat (dw_flat8_avx2) */
    check_conv(1, 20, 1, 16, 13, 3, 3, 1, 1, 0, 1, 2, 0, 1, &clip, 2);
    check_conv(2, 10, 2, 28, 27, 3, 3, 2, 2, 1, 0, 0, 1, 1, &hsw, 1);
    check_conv(1, 19, 1, 12, 15, 3, 3, 1, 1, 1, 1, 1, 1, 1, &none, 2);
    check_threads_same(1, 384, 14, 14, 3, 1, 1, 1, 1, 1, &clip);
    check_threads_same(1, 576, 14, 14, 3, 2, 1, 1, 1, 1, &clip);
    check_threads_same(1, 960, 7, 7, 3, 1, 1, 1, 1, 1, &clip);
    check_threads_same(1, 96, 112, 112, 3, 2, 1, 1, 1, 1, &clip);
    check_threads_same(1, 144, 56, 56, 3, 1, 1, 1, 1, 1, &clip);
    check_threads_same(1, 240, 28, 28, 5, 2, 2, 2, 2, 2, &none);
    check_threads_same(1, 1152, 7, 7, 5, 1, 2, 2, 2, 2, &none);
    check_threads_same(2, 21, 9, 10, 3, 1, 0, 1, 2, 0, &relu);
    /* 5 x 5 two vectors across (efficientnet_b0's 56 -> 28 and 28 x 28) */
    check_threads_same(1, 144, 56, 56, 5, 2, 2, 2, 2, 2, &none);
    check_threads_same(1, 40, 28, 28, 5, 1, 2, 2, 2, 2, &relu);
    check_threads_same(1, 9, 35, 37, 5, 2, 1, 2, 2, 1, &hsw);
}

static void check_sigmoid(void)
{
    enum { N = 4099 };
    float *x = malloc(N * sizeof *x), *y = malloc((N + 8) * sizeof *y);
    for (size_t i = 0; i < N; i++)
        x[i] = (float)(((double)i - N / 2) * 0.05); /* -102.45 .. 102.45 */
    x[0] = INFINITY;
    x[1] = -INFINITY;
    x[2] = NAN;
    x[3] = -0.0f;
    x[4] = 1e-30f;
    for (size_t i = 0; i < N + 8; i++)
        y[i] = SENT;
    op_ew_sigmoid_avx2(x, y, N);
    int bad = 0;
    for (size_t i = 0; i < N && !bad; i++) {
        double ref = 1.0 / (1.0 + exp(-(double)x[i]));
        if (isnan(x[i])) {
            if (!isnan(y[i])) {
                CHECK(0, "Sigmoid(NaN) = %g", (double)y[i]);
                bad = 1;
            }
            continue;
        }
        /* relative 1e-6; in the far negative tail (|x| > 87, clamped)
         * an absolute 2e-38 */
        if (fabs(y[i] - ref) > 1e-6 * ref && fabs(y[i] - ref) > 2e-38) {
            CHECK(0, "Sigmoid(%.9g) = %.9g, want %.9g", (double)x[i], (double)y[i], ref);
            bad = 1;
        }
    }
    if (!bad)
        CHECK(1, "sigmoid");
    for (size_t i = N; i < N + 8; i++)
        if (y[i] != SENT) {
            CHECK(0, "Sigmoid written past n");
            break;
        }
    /* in place, a short tail only */
    float z[5] = {-1, 0, 1, 2, 3};
    op_ew_sigmoid_avx2(z, z, 5);
    CHECK(fabs(z[1] - 0.5f) < 1e-7 && fabs(z[2] - 0.7310585786f) < 1e-6, "Sigmoid in place");
    free(x);
    free(y);
}

static void check_erf(void)
{
    enum { N = 20001 };
    float *x = malloc(N * sizeof *x), *y = malloc((N + 8) * sizeof *y);
    for (size_t i = 0; i < N; i++)
        x[i] = (float)(((double)i - N / 2) * 0.0006); /* -6 .. 6 */
    x[0] = INFINITY;
    x[1] = -INFINITY;
    x[2] = NAN;
    x[3] = 1e-30f;
    x[4] = -0.0f;
    for (size_t i = 0; i < N + 8; i++)
        y[i] = SENT;
    op_ew_erf_avx2(x, y, N);
    int bad = 0;
    for (size_t i = 0; i < N && !bad; i++) {
        if (isnan(x[i])) {
            if (!isnan(y[i])) {
                CHECK(0, "erf(NaN) = %g", (double)y[i]);
                bad = 1;
            }
            continue;
        }
        double ref = erf((double)x[i]);
        /* a few float ulps: relative 5e-7 */
        if (fabs(y[i] - ref) > 5e-7 * fabs(ref)) {
            CHECK(0, "erf(%.9g) = %.9g, want %.9g", (double)x[i], (double)y[i], ref);
            bad = 1;
        }
    }
    if (!bad)
        CHECK(1, "erf");
    for (size_t i = N; i < N + 8; i++)
        if (y[i] != SENT) {
            CHECK(0, "erf written past n");
            break;
        }
    free(x);
    free(y);
}

static void check_exp(void)
{
    enum { N = 30001 };
    float *x = malloc(N * sizeof *x), *y = malloc((N + 8) * sizeof *y);
    const float m = 3.5f;
    for (size_t i = 0; i < N; i++)
        x[i] = m + (float)(((double)i - (N - 100)) * 0.0035); /* x - m in -104.7 .. 0.35 */
    x[0] = -INFINITY;
    x[1] = NAN;
    for (size_t i = 0; i < N + 8; i++)
        y[i] = SENT;
    op_ew_exp_shift_avx2(x, y, N, m);
    int bad = 0;
    for (size_t i = 0; i < N && !bad; i++) {
        double d = (double)(x[i] - m), ref = exp(d);
        int ok;
        if (isnan(x[i]))
            ok = isnan(y[i]);
        else if (d < -87.33)
            ok = y[i] == 0.0f;
        else
            ok = fabs(y[i] - ref) <= 3e-7 * ref;
        if (!ok) {
            CHECK(0, "exp(%.9g) = %.9g, want %.9g", d, (double)y[i], ref);
            bad = 1;
        }
    }
    if (!bad)
        CHECK(1, "exp");
    for (size_t i = N; i < N + 8; i++)
        if (y[i] != SENT) {
            CHECK(0, "exp written past n");
            break;
        }
    free(x);
    free(y);
}

/* ---- a fused Clip, Relu or SiLU on the depthwise Conv ---- */

static void attr_int(gr_graph *g, int n, const char *name, int64_t v)
{
    gr_attr *a = gr_attr_add(&err, g, n, name);
    a->type = GA_INT;
    a->i = v;
}

/* A depthwise Conv (nb x c planes h x w, k x k at stride st, pads pad,
 * dilation dil) then op: "Clip" to [lo, hi], "Relu", or "SiLU" (Sigmoid
 * then Mul by the Conv's output). Run fused (a clamp the kernels apply
 * as they store; SiLU by the program on the rows just stored) on 1 and 2
 * threads and unfused (the standalone ops): the same bits. The input has
 * NaN, infinities and a plane of -0 (whose channel has positive taps and
 * bias -0: -0 outputs inside the padding). */
static void check_fused(int nb, int c, int h, int w, int k, int st, int pad, int dil, const char *op, float lo,
                        float hi)
{
    gr_model *gm = model_new(13);
    gr_graph *g = gm->main;
    int64_t xd[4] = {nb, c, h, w}, wd[4] = {c, 1, k, k}, bd[1] = {c};
    input(g, "x", 4, xd);
    float *wv = malloc((size_t)c * (size_t)(k * k) * sizeof *wv), *bv = malloc((size_t)c * sizeof *bv);
    for (int i = 0; i < c * k * k; i++)
        wv[i] = i < k * k ? 0.25f + 0.5f * (frand() + 1.0f) : frand();
    for (int i = 0; i < c; i++)
        bv[i] = i == 0 ? -0.0f : frand();
    init(g, "w", 4, wd, wv);
    init(g, "b", 1, bd, bv);
    int n = node(g, "dw", "Conv", "x,w,b", "c");
    int64_t ks[2] = {k, k}, ss[2] = {st, st}, ds[2] = {dil, dil}, ps[4] = {pad, pad, pad, pad};
    attr_ints(g, n, "kernel_shape", 2, ks);
    attr_ints(g, n, "strides", 2, ss);
    attr_ints(g, n, "dilations", 2, ds);
    attr_ints(g, n, "pads", 4, ps);
    attr_int(g, n, "group", c);
    int want_fused = 1;
    if (!strcmp(op, "Clip")) {
        scalar(g, "lo", lo);
        scalar(g, "hi", hi);
        node(g, "act", op, "c,lo,hi", "y");
    } else if (!strcmp(op, "SiLU")) {
        node(g, "sig", "Sigmoid", "c", "s");
        node(g, "act", "Mul", "c,s", "y");
        hi = INFINITY;
        want_fused = 2;
    } else {
        node(g, "act", op, "c", "y");
        hi = INFINITY;
    }
    output(g, "y");
    tdm_model *m;
    MUST(model_build(&err, gm, "dwclamp", &m));
    fuse_plan *fp;
    MUST(fuse_plan_build(&err, m->gm->main, &fp));
    int chains = fuse_plan_chains(fp), fused = fuse_plan_fused_nodes(fp);
    fuse_plan_free(fp);
    CHECK(chains == 1 && fused == want_fused, "dw %s: %d chains, %d nodes fused away, want 1 and %d", op, chains,
          fused, want_fused);

    tdm_tensor *in, *ref = NULL, *got = NULL;
    MUST(tdm_tensor_create(TDM_FLOAT, 4, xd, &in));
    float *x = tdm_tensor_data(in);
    size_t nx = tdm_tensor_count(in), plane = (size_t)h * (size_t)w;
    for (size_t i = 0; i < nx; i++) {
        x[i] = 4.0f * frand();
        if (i < plane)
            x[i] = -0.0f;
        else if (i % 101 == 7)
            x[i] = NAN;
        else if (i % 211 == 5)
            x[i] = INFINITY;
        else if (i % 223 == 9)
            x[i] = -INFINITY;
    }
    const tdm_tensor *ins[1] = {in};
    run(m, TDM_FUSION_OFF, NULL, 1, ins, &ref);
    const float *r = tdm_tensor_cdata(ref);
    size_t ny = tdm_tensor_count(ref), nan = 0, negz = 0, at_hi = 0;
    for (size_t i = 0; i < ny; i++) {
        nan += isnan(r[i]) != 0;
        negz += r[i] == 0 && signbit(r[i]);
        at_hi += r[i] == hi;
    }
    /* the cases exercise what they should (5 x 5 kernels add a second
     * sum from +0: no -0 out) */
    CHECK(nan > 0 && (negz > 0 || k == 5) && (at_hi > 0 || isinf(hi)), "dw %s %dx%d k=%d s=%d: %zu NaN, %zu -0, %zu at hi", op, h,
          w, k, st, nan, negz, at_hi);
    for (int threads = 1; threads <= 2; threads++) {
        run(m, TDM_FUSION_ON, NULL, threads, ins, &got);
        const float *a = tdm_tensor_cdata(got);
        size_t bad = ny;
        for (size_t i = 0; i < ny && bad == ny; i++)
            if (memcmp(&a[i], &r[i], sizeof *a) && !(want_fused == 2 && isnan(a[i]) && isnan(r[i])))
                bad = i; /* SiLU: which NaN a NaN's product keeps (its own or Sigmoid's, of
                          * the other sign) differs between the fused pass and the unfused
                          * Mul's tail: a NaN for a NaN */
        CHECK(tdm_tensor_count(got) == ny && bad == ny,
              "dw %s n=%d c=%d %dx%d k=%d s=%d pad=%d d=%d, %d thread(s): fused y[%zu] = %.9g, unfused %.9g", op, nb,
              c, h, w, k, st, pad, dil, threads, bad, bad < ny ? a[bad] : 0.0, bad < ny ? r[bad] : 0.0);
        tdm_tensor_destroy(got);
        got = NULL;
    }
    tdm_tensor_destroy(ref);
    tdm_tensor_destroy(in);
    tdm_model_destroy(m);
    free(wv);
    free(bv);
}

static void check_fused_all(void)
{
    static const char *ops[3] = {"Clip", "Relu", "SiLU"};
    for (int o = 0; o < 3; o++) {
        const char *op = ops[o];
        check_fused(1, 12, 57, 61, 3, 1, 1, 1, op, 0.0f, 6.0f); /* rows of the padded-row ring */
        check_fused(2, 6, 61, 59, 3, 2, 1, 1, op, 0.0f, 6.0f);  /* stride 2, deinterleaved */
        check_fused(1, 20, 14, 14, 3, 1, 1, 1, op, 0.0f, 6.0f); /* 8 planes at once and 4 alone */
        check_fused(1, 16, 15, 15, 3, 2, 1, 1, op, 0.0f, 6.0f);
        check_fused(2, 8, 7, 7, 5, 1, 2, 1, op, 0.0f, 6.0f);
        check_fused(1, 5, 23, 29, 5, 2, 2, 1, op, 0.0f, 6.0f);
        check_fused(1, 3, 20, 21, 7, 1, 3, 1, op, 0.0f, 6.0f);  /* 7 x 7: row by row */
        check_fused(1, 4, 19, 22, 3, 1, 2, 2, op, 0.0f, 6.0f);  /* dilation 2: the portable path */
        check_fused(1, 4, 19, 22, 3, 3, 1, 1, op, 0.0f, 6.0f);  /* stride 3: the portable path */
    }
    check_fused(1, 12, 30, 31, 3, 1, 1, 1, "Clip", -0.5f, 0.25f);
    check_fused(1, 24, 14, 14, 3, 1, 1, 1, "Clip", -0.5f, 0.25f);
    /* SiLU on efficientnet_b0's kinds of planes: 7 x 7 and 14 x 14 by 8
     * (dw_planes8_avx2; 3 x 3 at 14 wide flat, dw_flat8_avx2), rows
     * narrower than 8 spilling into the next, odd sizes, 5 x 5 at stride 2 */
    check_fused(1, 16, 7, 7, 3, 1, 1, 1, "SiLU", 0.0f, 0.0f);
    check_fused(1, 16, 14, 14, 5, 1, 2, 1, "SiLU", 0.0f, 0.0f);
    check_fused(1, 17, 28, 28, 3, 2, 1, 1, "SiLU", 0.0f, 0.0f);
    check_fused(1, 9, 5, 6, 3, 1, 1, 1, "SiLU", 0.0f, 0.0f);
    check_fused(1, 8, 29, 31, 5, 2, 2, 1, "SiLU", 0.0f, 0.0f);
    check_fused(1, 6, 33, 35, 5, 1, 2, 1, "SiLU", 0.0f, 0.0f); /* 5 x 5 two vectors across */
    check_fused(2, 3, 57, 56, 5, 2, 2, 1, "SiLU", 0.0f, 0.0f);
    fails += failures; /* perf_graph.h's CHECK (not used here) counts there */
}

int main(void)
{
    if (!gemm_avx2_usable()) {
        printf("no AVX2/FMA on this CPU: the kernels under test are never called (skipped)\n");
        return 77;
    }
    /* rows of 16 outputs or more (5 x 5 two vectors across): 40, 28, 57,
     * 33 and 35 wide, at strides 1 and 2 (17 and 18 wide) */
    static const int shapes[][2] = {{1, 1},   {2, 3},  {7, 7},   {8, 9},   {14, 14}, {17, 5},
                                    {3, 40},  {28, 28}, {9, 13}, {56, 57}, {11, 33}, {6, 35}};
    static const int ks[][2] = {{3, 3}, {5, 5}, {1, 1}, {3, 1}, {7, 7}, {1, 5}};
    for (flat_mode = 0; flat_mode < 2; flat_mode++)
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (size_t q = 0; q < sizeof ks / sizeof ks[0]; q++)
            for (int sh = 1; sh <= 2; sh++)
                for (int sw = 1; sw <= 2; sw++) {
                    size_t h = (size_t)shapes[s][0], w = (size_t)shapes[s][1];
                    int kh = ks[q][0], kw = ks[q][1];
                    size_t ph = (size_t)kh / 2, pw = (size_t)kw / 2;
                    if (h + 2 * ph < (size_t)kh || w + 2 * pw < (size_t)kw)
                        continue;
                    check_dw(h, w, kh, kw, sh, sw, ph, pw, ph, pw, 0);
                    check_dw(h, w, kh, kw, sh, sw, ph, pw, ph, pw, 1);
                    if (h >= (size_t)kh && w >= (size_t)kw)
                        check_dw(h, w, kh, kw, sh, sw, 0, 0, 0, 0, 0); /* no pads */
                    check_dw(h, w, kh, kw, sh, sw, 0, pw, ph + 1, 0, 0); /* asymmetric */
                    check_dw(h, w, kh, kw, sh, sw, 2, 0, 1, 2, 1);
                }
    check_convs();
    check_sigmoid();
    check_erf();
    check_exp();
    check_fused_all();
    printf("%d of %d checks passed\n", checks - fails, checks);
    return fails ? 1 : 0;
}
