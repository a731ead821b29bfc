/* The direct convolution for few input channels (ops/nn_conv_direct.c)
 * against a double-precision loop and against im2col + GEMM (an explicit
 * im2col matrix through op_sgemm, the bias and the activation added in
 * float as the GEMM path does): single-Conv graphs with 1 to 4 input
 * channels, kernels 1x1 to 7x7 (square and not), strides 1 and 2, every
 * kind of padding, odd sizes, output channel counts not multiples of 4,
 * batch 2, with and without bias, followed by a Relu, a Clip, a residual
 * Add, a SiLU (Sigmoid, Mul) or a LeakyRelu, run unfused (fusion off) and
 * fused on 1 and 2 threads. The direct kernel sums in the GEMM's order, so
 * every run must equal the im2col result bit for bit (but after a SiLU,
 * whose AVX2 Sigmoid the float loop here does not reproduce), fused runs
 * the unfused ones, and be within 1e-5 x max|ref| of the double loop.
 *
 * usage: test_perf_direct */
#include "core/mem.h"
#include "graph/graph.h"
#include "graph/model.h"
#include "ops/nn.h"
#include "ops/op.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf_graph.h"

typedef struct dcase {
    const char *name;
    int64_t n, c, m, h, w, kh, kw, sh, sw;
    int64_t pads[4]; /* top, left, bottom, right */
    int bias;
    int post;        /* 0 none, 1 Relu, 2 Clip(0, 6), 3 residual Add of input r, 4 SiLU, 5 LeakyRelu(0.01) */
    int direct;      /* op_conv_direct_ok expected */
} dcase;

static int64_t out_h(const dcase *c) { return (c->h + c->pads[0] + c->pads[2] - c->kh) / c->sh + 1; }
static int64_t out_w(const dcase *c) { return (c->w + c->pads[1] + c->pads[3] - c->kw) / c->sw + 1; }

static gr_model *build(const dcase *c)
{
    gr_model *m = model_new(13);
    gr_graph *g = m->main;
    int64_t xd[4] = {c->n, c->c, c->h, c->w};
    int64_t yd[4] = {c->n, c->m, out_h(c), out_w(c)};
    input(g, "x", 4, xd);
    if (c->post == 3)
        input(g, "r", 4, yd);
    int64_t wd[4] = {c->m, c->c, c->kh, c->kw}, bd[1] = {c->m};
    init(g, "w", 4, wd, NULL);
    if (c->bias)
        init(g, "b", 1, bd, NULL);
    const char *conv_out = c->post ? "t" : "y";
    int n = node(g, "conv", "Conv", c->bias ? "x,w,b" : "x,w", conv_out);
    int64_t ks[2] = {c->kh, c->kw}, st[2] = {c->sh, c->sw};
    attr_ints(g, n, "pads", 4, c->pads);
    attr_ints(g, n, "kernel_shape", 2, ks);
    attr_ints(g, n, "strides", 2, st);
    if (c->post == 1) {
        node(g, "relu", "Relu", "t", "y");
    } else if (c->post == 2) {
        scalar(g, "lo", 0.0f);
        scalar(g, "hi", 6.0f);
        node(g, "clip", "Clip", "t,lo,hi", "y");
    } else if (c->post == 3) {
        node(g, "res", "Add", "t,r", "y");
    } else if (c->post == 4) {
        node(g, "sig", "Sigmoid", "t", "s");
        node(g, "mul", "Mul", "t,s", "y");
    } else if (c->post == 5) {
        node(g, "leaky", "LeakyRelu", "t", "y");
    }
    output(g, "y");
    return m;
}

static float post_f(const dcase *c, float v, float r)
{
    if (c->post == 1)
        return v < 0 ? 0.0f : v;
    if (c->post == 2) {
        v = v < 0.0f ? 0.0f : v;
        return v > 6.0f ? 6.0f : v;
    }
    if (c->post == 3)
        return v + r;
    if (c->post == 4) /* not the AVX2 Sigmoid's rounding: not compared bit for bit */
        return v / (1.0f + expf(-v));
    if (c->post == 5)
        return v < 0 ? v * 0.01f : v;
    return v;
}

/* The double-precision convolution (and the post op). */
static double *reference(const dcase *c, const float *x, const float *w, const float *b, const float *r)
{
    int64_t oh = out_h(c), ow = out_w(c);
    double *y = malloc(sizeof *y * (size_t)(c->n * c->m * oh * ow));
    size_t i = 0;
    for (int64_t n = 0; n < c->n; n++)
        for (int64_t m = 0; m < c->m; m++)
            for (int64_t a = 0; a < oh; a++)
                for (int64_t bb = 0; bb < ow; bb++, i++) {
                    double s = b ? b[m] : 0.0;
                    for (int64_t ch = 0; ch < c->c; ch++)
                        for (int64_t kh = 0; kh < c->kh; kh++)
                            for (int64_t kw = 0; kw < c->kw; kw++) {
                                int64_t ih = a * c->sh + kh - c->pads[0], iw = bb * c->sw + kw - c->pads[1];
                                if (ih < 0 || ih >= c->h || iw < 0 || iw >= c->w)
                                    continue;
                                s += (double)x[((n * c->c + ch) * c->h + ih) * c->w + iw] *
                                     w[((m * c->c + ch) * c->kh + kh) * c->kw + kw];
                            }
                    if (c->post == 1)
                        s = s < 0 ? 0 : s;
                    else if (c->post == 2)
                        s = s < 0 ? 0 : s > 6 ? 6 : s;
                    else if (c->post == 3)
                        s += r[i];
                    else if (c->post == 4)
                        s = s / (1.0 + exp(-s));
                    else if (c->post == 5)
                        s = s < 0 ? s * (double)0.01f : s;
                    y[i] = s;
                }
    return y;
}

/* im2col + op_sgemm, then the bias and the post op in float. */
static float *im2col_gemm(const dcase *c, const float *x, const float *w, const float *b, const float *r)
{
    int64_t oh = out_h(c), ow = out_w(c);
    size_t kk = (size_t)(c->c * c->kh * c->kw), np = (size_t)(oh * ow);
    float *col = malloc(sizeof *col * kk * np);
    float *y = malloc(sizeof *y * (size_t)c->n * (size_t)c->m * np);
    for (int64_t n = 0; n < c->n; n++) {
        size_t k = 0;
        for (int64_t ch = 0; ch < c->c; ch++)
            for (int64_t kh = 0; kh < c->kh; kh++)
                for (int64_t kw = 0; kw < c->kw; kw++, k++)
                    for (int64_t a = 0; a < oh; a++)
                        for (int64_t bb = 0; bb < ow; bb++) {
                            int64_t ih = a * c->sh + kh - c->pads[0], iw = bb * c->sw + kw - c->pads[1];
                            col[k * np + (size_t)(a * ow + bb)] =
                                ih < 0 || ih >= c->h || iw < 0 || iw >= c->w
                                    ? 0.0f
                                    : x[((n * c->c + ch) * c->h + ih) * c->w + iw];
                        }
        float *yn = y + (size_t)n * (size_t)c->m * np;
        CHECK(op_sgemm(0, 0, (size_t)c->m, np, kk, 1.0f, w, kk, col, np, 0.0f, yn, np) == 0);
        for (int64_t m = 0; m < c->m; m++)
            for (size_t i = 0; i < np; i++) {
                size_t at = (size_t)m * np + i;
                float v = b ? yn[at] + b[m] : yn[at];
                yn[at] = post_f(c, v, r ? r[(size_t)n * (size_t)c->m * np + at] : 0.0f);
            }
    }
    free(col);
    return y;
}

/* Whether the direct kernel takes the case (its plan built by hand). */
static int takes(const dcase *c)
{
    conv_plan p;
    memset(&p, 0, sizeof p);
    p.g.nsp = 2;
    int64_t in[3] = {1, c->h, c->w}, k[3] = {1, c->kh, c->kw}, s[3] = {1, c->sh, c->sw};
    int64_t pb[3] = {0, c->pads[0], c->pads[1]}, pe[3] = {0, c->pads[2], c->pads[3]};
    int64_t out[3] = {1, out_h(c), out_w(c)};
    for (int i = 0; i < 3; i++) {
        p.g.in[i] = in[i];
        p.g.k[i] = k[i];
        p.g.s[i] = s[i];
        p.g.d[i] = 1;
        p.g.pb[i] = pb[i];
        p.g.pe[i] = pe[i];
        p.g.out[i] = out[i];
    }
    p.n = c->n;
    p.c = c->c;
    p.m = c->m;
    p.group = 1;
    p.cg = c->c;
    p.mg = c->m;
    op_nn_conv_plan_sizes(&p, 2);
    op_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.threads = 1;
    return op_conv_direct_ok(&ctx, &p);
}

static void check_case(const dcase *c)
{
    gr_model *gm = build(c);
    tdm_model *m;
    MUST(model_build(&err, gm, c->name, &m));
    size_t n_in = tdm_model_input_count(m);
    tdm_tensor *ins[2] = {NULL, NULL};
    make_inputs(m, ins, 4);
    tdm_tensor *off[1], *on1[1], *on2[1], *off2[1];
    run(m, TDM_FUSION_OFF, NULL, 1, (const tdm_tensor *const *)ins, off);
    run(m, TDM_FUSION_OFF, NULL, 2, (const tdm_tensor *const *)ins, off2);
    run(m, TDM_FUSION_ON, NULL, 1, (const tdm_tensor *const *)ins, on1);
    run(m, TDM_FUSION_ON, NULL, 2, (const tdm_tensor *const *)ins, on2);
    size_t cnt = tdm_tensor_count(off[0]);
    CHECK(cnt == (size_t)(c->n * c->m * out_h(c) * out_w(c)));
    CHECK(tdm_tensor_count(on1[0]) == cnt && tdm_tensor_count(on2[0]) == cnt && tdm_tensor_count(off2[0]) == cnt);
    const float *yo = tdm_tensor_cdata(off[0]), *y1 = tdm_tensor_cdata(on1[0]), *y2 = tdm_tensor_cdata(on2[0]);
    const float *x = tdm_tensor_cdata(ins[0]), *w = init_data(m, "w"), *b = c->bias ? init_data(m, "b") : NULL;
    const float *r = c->post == 3 ? tdm_tensor_cdata(ins[1]) : NULL;
    double *ref = reference(c, x, w, b, r);
    float *ic = im2col_gemm(c, x, w, b, r);
    double big = 0, e_off = 0, e_on = 0;
    size_t differ = 0;
    for (size_t i = 0; i < cnt; i++) {
        big = fabs(ref[i]) > big ? fabs(ref[i]) : big;
        e_off = fmax(e_off, fabs(yo[i] - ref[i]));
        e_on = fmax(e_on, fabs(y1[i] - ref[i]));
        differ += memcmp(&yo[i], &ic[i], sizeof(float)) != 0;
    }
    int direct = takes(c);
    fprintf(stderr, "%-16s %lldx%lldx%lldx%lld k%lldx%lld s%lldx%lld -> %lld  %s  max|ref| %.3g  rel err %.2e / %.2e, "
                    "%zu of %zu differ from im2col\n",
            c->name, (long long)c->n, (long long)c->c, (long long)c->h, (long long)c->w, (long long)c->kh,
            (long long)c->kw, (long long)c->sh, (long long)c->sw, (long long)c->m, direct ? "direct" : "gemm  ", big,
            e_off / big, e_on / big, differ, cnt);
    CHECK(direct == c->direct);
    CHECK(big > 0);
    CHECK(e_off <= 1e-5 * big);
    CHECK(e_on <= 1e-5 * big);
    CHECK(differ == 0 || c->post == 4); /* the GEMM's summation order: identical to im2col */
    CHECK(memcmp(yo, y1, cnt * sizeof *y1) == 0); /* fused = unfused */
    CHECK(memcmp(y1, y2, cnt * sizeof *y1) == 0); /* independent of the thread count */
    CHECK(memcmp(yo, tdm_tensor_cdata(off2[0]), cnt * sizeof *y1) == 0);
    if (!c->post)
        for (int fast = 0; fast < 2; fast++)
            for (int th = 1; th <= 3; th++) {
                tdm_tensor *k = run_kernel(m, ins[0], fast, th);
                CHECK(k->count == cnt);
                CHECK(memcmp(tdm_tensor_cdata(k), yo, cnt * sizeof(float)) == 0);
                tdm_tensor_destroy(k);
            }
    free(ref);
    free(ic);
    tdm_tensor_destroy(off[0]);
    tdm_tensor_destroy(off2[0]);
    tdm_tensor_destroy(on1[0]);
    tdm_tensor_destroy(on2[0]);
    for (size_t k = 0; k < n_in; k++)
        tdm_tensor_destroy(ins[k]);
    tdm_model_destroy(m);
}

int main(void)
{
    static const dcase cases[] = {
        /* name, n, c, m, h, w, kh, kw, sh, sw, pads t l b r, bias, post, direct */
        {"mobilenet-like", 1, 3, 32, 64, 64, 3, 3, 2, 2, {1, 1, 1, 1}, 1, 2, 1},
        {"squeeze-like", 1, 3, 64, 47, 47, 3, 3, 2, 2, {0, 0, 0, 0}, 1, 1, 1},
        {"resnet-like", 1, 3, 64, 50, 50, 7, 7, 2, 2, {3, 3, 3, 3}, 1, 1, 1},
        {"shuffle-like", 2, 3, 24, 45, 45, 3, 3, 2, 2, {1, 1, 1, 1}, 1, 1, 1},
        {"odd-m-s1", 1, 3, 13, 37, 41, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 0, 1},
        {"c1-k5-s1", 2, 1, 9, 33, 29, 5, 5, 1, 1, {2, 2, 2, 2}, 0, 0, 1},
        {"c2-k7-s1", 1, 2, 10, 30, 31, 7, 7, 1, 1, {3, 3, 3, 3}, 1, 3, 1},
        {"c4-k4-s2", 2, 4, 17, 40, 39, 4, 4, 2, 2, {1, 2, 2, 1}, 0, 2, 1},
        {"uneven-pads", 1, 3, 11, 35, 50, 3, 5, 2, 1, {0, 2, 3, 1}, 1, 1, 1},
        {"mixed-stride", 1, 3, 8, 27, 60, 5, 3, 1, 2, {2, 0, 1, 1}, 1, 3, 1},
        {"big-pads", 2, 3, 12, 20, 40, 3, 3, 2, 2, {3, 3, 3, 3}, 0, 1, 1},
        {"k7x1", 1, 3, 16, 30, 70, 7, 1, 2, 1, {3, 0, 3, 0}, 1, 0, 1},
        {"k1x7", 1, 2, 16, 30, 70, 1, 7, 1, 2, {0, 3, 0, 3}, 1, 2, 1},
        {"k6-even", 1, 3, 20, 33, 66, 6, 6, 2, 2, {2, 2, 3, 3}, 1, 3, 1},
        {"narrow-24", 1, 3, 8, 24, 48, 3, 3, 2, 2, {1, 1, 1, 1}, 0, 0, 1},
        {"pix-25", 1, 3, 8, 9, 25, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 1, 1},
        {"effnet-like", 1, 3, 32, 64, 64, 3, 3, 2, 2, {1, 1, 1, 1}, 1, 4, 1},
        {"silu-odd-s1", 2, 3, 13, 21, 43, 3, 3, 1, 1, {1, 1, 1, 1}, 0, 4, 1},
        {"silu-k7-s2", 1, 3, 10, 37, 51, 7, 7, 2, 2, {3, 2, 3, 3}, 1, 4, 1},
        {"leaky-s2", 1, 3, 16, 33, 47, 3, 3, 2, 2, {0, 1, 1, 0}, 1, 5, 1},
        {"leaky-s1", 1, 2, 9, 19, 35, 5, 5, 1, 1, {2, 2, 2, 2}, 1, 5, 1},
        /* not taken: the GEMM path */
        {"1x1", 1, 3, 16, 20, 40, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 0, 0},
        {"few-m", 1, 3, 4, 20, 40, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 0, 0},
        {"narrow", 1, 3, 16, 20, 10, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 1, 0},
        {"c5", 1, 5, 16, 20, 40, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 0, 0},
        {"stride3", 1, 3, 16, 30, 60, 3, 3, 3, 3, {1, 1, 1, 1}, 1, 0, 0},
        {"k9", 1, 3, 16, 30, 60, 9, 9, 1, 1, {4, 4, 4, 4}, 1, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_case(&cases[i]);
    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    return failures ? 1 : 0;
}
