/* Winograd convolution (ops/nn_winograd.c, F(4x4, 3x3) and F(2x2, 3x3))
 * against the direct im2col one:
 * single-Conv graphs (odd sizes, pads 0, 1 and uneven, channel counts not
 * multiples of 8, batch 2, with and without bias, a fused Relu, a fused
 * residual Add) run with fusion on (Winograd where it applies) on 1, 2 and 3
 * threads and with fusion off (the reference arithmetic). Fused results
 * are within 1e-4 x max|ref| of a double-precision loop and of the
 * unfused run, and bit-identical between 1, 2 and 3 threads; unfused runs
 * are exactly what the Conv kernel computes with ctx->fast = 0.
 *
 * usage: test_perf_wino            (the checks)
 *        test_perf_wino bench T    (times of fused vs unfused sessions of
 *                                   model-sized convolutions on T threads) */
#define _POSIX_C_SOURCE 199309L
#include "core/mem.h"
#include "graph/graph.h"
#include "graph/model.h"
#include "ops/nn.h"
#include "ops/op.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "perf_graph.h"

typedef struct wcase {
    const char *name;
    int64_t n, c, m, h, w;
    int64_t pads[4]; /* top, left, bottom, right */
    int bias;
    int post;        /* 0 none, 1 Relu, 2 residual Add of input r */
    int wino;        /* Winograd expected (op_conv_winograd_ok) */
} wcase;

static gr_model *build(const wcase *c)
{
    gr_model *m = model_new(13);
    gr_graph *g = m->main;
    int64_t xd[4] = {c->n, c->c, c->h, c->w};
    int64_t oh = c->h + c->pads[0] + c->pads[2] - 2, ow = c->w + c->pads[1] + c->pads[3] - 2;
    int64_t yd[4] = {c->n, c->m, oh, ow};
    input(g, "x", 4, xd);
    if (c->post == 2)
        input(g, "r", 4, yd);
    int64_t wd[4] = {c->m, c->c, 3, 3}, bd[1] = {c->m};
    init(g, "w", 4, wd, NULL);
    if (c->bias)
        init(g, "b", 1, bd, NULL);
    const char *conv_out = c->post ? "t" : "y";
    int n = node(g, "conv", "Conv", c->bias ? "x,w,b" : "x,w", conv_out);
    int64_t ks[2] = {3, 3};
    attr_ints(g, n, "pads", 4, c->pads);
    attr_ints(g, n, "kernel_shape", 2, ks);
    if (c->post == 1)
        node(g, "relu", "Relu", "t", "y");
    else if (c->post == 2)
        node(g, "res", "Add", "t,r", "y");
    output(g, "y");
    return m;
}

/* The double-precision convolution of the model's initializers. */
static double *reference(const wcase *c, const float *x, const float *w, const float *b, const float *r)
{
    int64_t oh = c->h + c->pads[0] + c->pads[2] - 2, ow = c->w + c->pads[1] + c->pads[3] - 2;
    double *y = malloc(sizeof *y * (size_t)(c->n * c->m * oh * ow));
    size_t i = 0;
    for (int64_t n = 0; n < c->n; n++)
        for (int64_t m = 0; m < c->m; m++)
            for (int64_t a = 0; a < oh; a++)
                for (int64_t bb = 0; bb < ow; bb++, i++) {
                    double s = b ? b[m] : 0.0;
                    for (int64_t ch = 0; ch < c->c; ch++)
                        for (int kh = 0; kh < 3; kh++)
                            for (int kw = 0; kw < 3; kw++) {
                                int64_t ih = a + kh - c->pads[0], iw = bb + kw - c->pads[1];
                                if (ih < 0 || ih >= c->h || iw < 0 || iw >= c->w)
                                    continue;
                                s += (double)x[((n * c->c + ch) * c->h + ih) * c->w + iw] *
                                     w[((m * c->c + ch) * 3 + kh) * 3 + kw];
                            }
                    if (c->post == 1)
                        s = s < 0 ? 0 : s;
                    else if (c->post == 2)
                        s += r[i];
                    y[i] = s;
                }
    return y;
}

static void check_case(const wcase *c)
{
    gr_model *gm = build(c);
    tdm_model *m;
    MUST(model_build(&err, gm, c->name, &m));
    size_t n_in = tdm_model_input_count(m);
    tdm_tensor *ins[2] = {NULL, NULL};
    make_inputs(m, ins, 2);
    tdm_tensor *off[1], *on1[1], *on2[1], *on3[1];
    run(m, TDM_FUSION_OFF, NULL, 1, (const tdm_tensor *const *)ins, off);
    run(m, TDM_FUSION_ON, NULL, 1, (const tdm_tensor *const *)ins, on1);
    run(m, TDM_FUSION_ON, NULL, 2, (const tdm_tensor *const *)ins, on2);
    run(m, TDM_FUSION_ON, NULL, 3, (const tdm_tensor *const *)ins, on3);
    size_t cnt = tdm_tensor_count(off[0]);
    CHECK(tdm_tensor_count(on1[0]) == cnt && tdm_tensor_count(on2[0]) == cnt && tdm_tensor_count(on3[0]) == cnt);
    const float *yo = tdm_tensor_cdata(off[0]), *y1 = tdm_tensor_cdata(on1[0]), *y2 = tdm_tensor_cdata(on2[0]);
    double *ref = reference(c, tdm_tensor_cdata(ins[0]), init_data(m, "w"), c->bias ? init_data(m, "b") : NULL,
                            c->post == 2 ? tdm_tensor_cdata(ins[1]) : NULL);
    double big = 0, e_off = 0, e_on = 0, e_on_off = 0;
    size_t differ = 0;
    for (size_t i = 0; i < cnt; i++) {
        big = fabs(ref[i]) > big ? fabs(ref[i]) : big;
        e_off = fmax(e_off, fabs(yo[i] - ref[i]));
        e_on = fmax(e_on, fabs(y1[i] - ref[i]));
        e_on_off = fmax(e_on_off, fabs((double)y1[i] - yo[i]));
        differ += y1[i] != yo[i];
    }
    double rel_on = e_on / big, rel_off = e_off / big;
    fprintf(stderr, "%-14s %lldx%lldx%lldx%lld -> %lld  max|ref| %.3g  rel err: fused %.2e, unfused %.2e, "
                    "fused vs unfused %.2e (%zu of %zu differ)\n",
            c->name, (long long)c->n, (long long)c->c, (long long)c->h, (long long)c->w, (long long)c->m, big, rel_on,
            rel_off, e_on_off / big, differ, cnt);
    CHECK(big > 0);
    CHECK(rel_off <= 1e-5);
    CHECK(rel_on <= 1e-4);
    CHECK(e_on_off <= 1e-4 * big);
    CHECK(memcmp(y1, y2, cnt * sizeof *y1) == 0); /* independent of the thread count */
    CHECK(memcmp(y1, tdm_tensor_cdata(on3[0]), cnt * sizeof *y1) == 0);
    if (c->wino)
        CHECK(differ > 0); /* the Winograd path ran (it rounds differently) */
    if (!c->post) {
        /* unfused: exactly the kernel with fast = 0; fused: with fast = 1 */
        for (int fast = 0; fast < 2; fast++)
            for (int th = 1; th <= 3; th++) {
                tdm_tensor *k = run_kernel(m, ins[0], fast, th);
                CHECK(k->count == cnt);
                CHECK(memcmp(tdm_tensor_cdata(k), fast ? y1 : yo, cnt * sizeof(float)) == 0);
                tdm_tensor_destroy(k);
            }
    }
    free(ref);
    tdm_tensor_destroy(off[0]);
    tdm_tensor_destroy(on1[0]);
    tdm_tensor_destroy(on2[0]);
    tdm_tensor_destroy(on3[0]);
    for (size_t k = 0; k < n_in; k++)
        tdm_tensor_destroy(ins[k]);
    tdm_model_destroy(m);
}

/* ---- bench ---- */

static int bench_cpu; /* 1 thread: the thread's CPU time (steadier on a busy machine) */

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(bench_cpu ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int bench_only = -1; /* 0 or 1: time only the unfused or only the fused session */

static void bench_case(const wcase *c, int threads, int rounds)
{
    gr_model *gm = build(c);
    tdm_model *m;
    MUST(model_build(&err, gm, c->name, &m));
    tdm_tensor *x;
    int64_t xd[4] = {c->n, c->c, c->h, c->w};
    MUST(tdm_tensor_create(TDM_FLOAT, 4, xd, &x));
    float *xp = tdm_tensor_data(x);
    for (size_t i = 0; i < tdm_tensor_count(x); i++)
        xp[i] = (float)rnd();
    tdm_ctx *ctx[2];
    tdm_session *s[2];
    double *t[2];
    for (int v = 0; v < 2; v++) {
        tdm_session_options *so;
        MUST(tdm_ctx_create(&ctx[v]));
        MUST(tdm_session_options_create(&so));
        MUST(tdm_session_options_set_fusion(so, v ? TDM_FUSION_ON : TDM_FUSION_OFF));
        MUST(tdm_session_options_set_threads(so, threads));
        MUST(tdm_session_create(ctx[v], m, so, &s[v]));
        tdm_session_options_destroy(so);
        t[v] = malloc(sizeof(double) * (size_t)rounds);
    }
    const tdm_tensor *ins[1] = {x};
    for (int r = -2; r < rounds; r++)
        for (int v = 0; v < 2; v++) {
            if (bench_only >= 0 && v != bench_only) {
                if (r >= 0)
                    t[v][r] = 1;
                continue;
            }
            tdm_tensor *out[1];
            double t0 = now_ms();
            MUST(tdm_session_run(s[v], ins, out));
            double dt = now_ms() - t0;
            if (r >= 0)
                t[v][r] = dt;
            tdm_tensor_destroy(out[0]);
        }
    for (int v = 0; v < 2; v++)
        qsort(t[v], (size_t)rounds, sizeof(double), cmp_d);
    double oh = (double)(c->h + c->pads[0] + c->pads[2] - 2), ow = (double)(c->w + c->pads[1] + c->pads[3] - 2);
    double gfl = 2.0 * c->n * c->m * c->c * 9 * oh * ow / 1e9;
    printf("%-22s %lldx%lldx%lldx%lld->%lld  %d thr  direct %7.3f ms (%5.1f GF/s)  wino %7.3f ms  x%.2f\n", c->name,
           (long long)c->n, (long long)c->c, (long long)c->h, (long long)c->w, (long long)c->m, threads,
           t[0][rounds / 2], gfl / t[0][rounds / 2] * 1e3, t[1][rounds / 2], t[0][rounds / 2] / t[1][rounds / 2]);
    for (int v = 0; v < 2; v++) {
        tdm_session_destroy(s[v]);
        tdm_ctx_destroy(ctx[v]);
        free(t[v]);
    }
    tdm_tensor_destroy(x);
    tdm_model_destroy(m);
}

int main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "bench")) {
        int threads = argc >= 3 ? atoi(argv[2]) : 1;
        bench_cpu = threads == 1;
        static const wcase bc[] = {
            {"resnet18 64@56", 1, 64, 64, 56, 56, {1, 1, 1, 1}, 1, 0, 1},
            {"resnet18 128@28", 1, 128, 128, 28, 28, {1, 1, 1, 1}, 1, 0, 1},
            {"resnet18 256@14", 1, 256, 256, 14, 14, {1, 1, 1, 1}, 1, 0, 1},
            {"resnet18 512@7", 1, 512, 512, 7, 7, {1, 1, 1, 1}, 1, 0, 1},
            {"ppocr 96->24@160", 1, 96, 24, 160, 160, {1, 1, 1, 1}, 1, 0, 1},
            {"ppocr 96->24@80", 1, 96, 24, 80, 80, {1, 1, 1, 1}, 1, 0, 1},
            {"squeeze 16->64@55", 1, 16, 64, 55, 55, {1, 1, 1, 1}, 1, 0, 1},
            {"squeeze 32->128@27", 1, 32, 128, 27, 27, {1, 1, 1, 1}, 1, 0, 1},
            {"squeeze 48->192@13", 1, 48, 192, 13, 13, {1, 1, 1, 1}, 1, 0, 1},
            {"squeeze 64->256@13", 1, 64, 256, 13, 13, {1, 1, 1, 1}, 1, 0, 1},
        };
        int rounds = argc >= 4 ? atoi(argv[3]) : 21;
        if (argc >= 6)
            bench_only = atoi(argv[5]);
        for (size_t i = 0; i < sizeof bc / sizeof bc[0]; i++)
            if (argc < 5 || strstr(bc[i].name, argv[4]))
                bench_case(&bc[i], threads, rounds);
        return 0;
    }
    static const wcase cases[] = {
        {"odd55", 1, 16, 24, 55, 55, {1, 1, 1, 1}, 1, 0, 1},
        {"wide-row", 1, 20, 18, 9, 150, {1, 1, 1, 1}, 1, 1, 1},
        {"pad0-batch2", 2, 17, 21, 13, 13, {0, 0, 0, 0}, 0, 0, 1},
        {"8-channels", 1, 8, 8, 32, 32, {1, 1, 1, 1}, 0, 1, 0},
        {"7x7-relu", 1, 64, 64, 7, 7, {1, 1, 1, 1}, 1, 1, 0},
        {"7x7-batch2", 2, 72, 40, 7, 7, {1, 1, 1, 1}, 0, 0, 0},
        {"residual", 1, 32, 20, 28, 30, {1, 1, 1, 1}, 1, 2, 1},
        {"uneven-pads", 2, 19, 17, 20, 11, {2, 0, 1, 2}, 0, 1, 1},
        {"13x13-res-b2", 2, 48, 33, 13, 13, {1, 1, 1, 1}, 0, 2, 1},
        {"ppocr-like", 1, 96, 24, 40, 40, {1, 1, 1, 1}, 1, 0, 1},
        {"wide-k", 1, 400, 20, 9, 17, {1, 1, 1, 1}, 1, 0, 1},
        {"tall", 1, 24, 16, 100, 9, {1, 1, 1, 1}, 1, 2, 1},
        {"tiny", 1, 3, 2, 5, 5, {1, 1, 1, 1}, 1, 0, 0},
        /* F(2x2, 3x3): small planes, many channels */
        {"7x7-f23-relu", 1, 144, 136, 7, 7, {1, 1, 1, 1}, 1, 1, 1},
        {"8x8-f23-res-b2", 2, 128, 130, 8, 8, {1, 1, 1, 1}, 0, 2, 1},
        {"5x6-direct", 1, 130, 128, 7, 8, {0, 0, 0, 0}, 1, 0, 0},
        /* one block per image: the output channels split on 2 and 3
         * threads, V made once in a pass split over the input channels */
        {"13x13-msplit", 1, 50, 100, 13, 13, {1, 1, 1, 1}, 1, 0, 1},
        {"13x13-msplit-relu", 1, 37, 70, 13, 13, {1, 1, 1, 1}, 0, 1, 1},
        {"7x7-f23-msplit-b2", 2, 300, 140, 7, 7, {1, 1, 1, 1}, 1, 2, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_case(&cases[i]);
    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    return failures ? 1 : 0;
}
