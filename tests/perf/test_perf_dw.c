/* The AVX2 depthwise plane kernel (dw_plane_avx2) against a double
 * reference over kernel sizes, strides, pads, odd widths and the fused
 * clamp, with sentinels after the output; and the AVX2 Sigmoid
 * (op_ew_sigmoid_avx2) against 1 / (1 + exp(-x)) in double and the AVX2 erf
 * (op_ew_erf_avx2) against erf in double and the AVX2 exp
 * (op_ew_exp_shift_avx2) against exp in double, including the tails, infinities
 * and NaN. Skipped (exit 77) on CPUs without AVX2/FMA. */
#include "core/pool.h"
#include "ops/elementwise.h"
#include "ops/nn.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* One plane: h x w input, kh x kw kernel, strides, pads (top, left,
 * bottom, right), clamp to [lo, hi] when clamp. */
static void check_dw(size_t h, size_t w, int kh, int kw, int sh, int sw, size_t pt, size_t pl, size_t pb, size_t pr,
                     int clamp)
{
    if (h + pt + pb < (size_t)kh || w + pl + pr < (size_t)kw)
        return;
    size_t oh = (h + pt + pb - (size_t)kh) / (size_t)sh + 1, ow = (w + pl + pr - (size_t)kw) / (size_t)sw + 1;
    float *x = malloc(h * w * sizeof *x), *y = malloc((oh * ow + 16) * sizeof *y), k[49];
    size_t np = dw_pad_floats(oh, ow, kh, kw, sh, sw);
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
    dw_plane_avx2(x, h, w, y, oh, ow, kh, kw, sh, sw, pt, pl, k, bias, clamp, lo, hi, pad);
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

int main(void)
{
    if (!gemm_avx2_usable()) {
        printf("no AVX2/FMA on this CPU: the kernels under test are never called (skipped)\n");
        return 77;
    }
    static const int shapes[][2] = {{1, 1}, {7, 7}, {8, 9}, {14, 14}, {17, 5}, {3, 40}, {28, 28}, {56, 57}};
    static const int ks[][2] = {{3, 3}, {5, 5}, {1, 1}, {3, 1}, {7, 7}, {1, 5}};
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
                }
    check_sigmoid();
    check_erf();
    check_exp();
    printf("%d of %d checks passed\n", checks - fails, checks);
    return fails ? 1 : 0;
}
