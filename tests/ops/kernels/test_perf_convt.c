/* ConvTranspose (ops/nn_convt.c) against a reference loop in double: the
 * scatter path (kernel == stride, no padding) and the general col2im path,
 * with and without bias, 1-D to 3-D, groups, with a fused elementwise chain
 * (fusion on) and without (fusion off); results bit-identical on 1 and 2
 * threads. Resize nearest (ops/tensor_resize.c) against its reference
 * loop likewise; BatchNormalization (ops/reduce_norm.c) and binary ops
 * (ops/elementwise_binary.c) with a chain after them.
 *
 * usage: test_perf_convt */
#include "core/mem.h"
#include "graph/graph.h"
#include "graph/model.h"
#include "ops/nn.h"
#include "ops/op.h"
#include "graph/fuse.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf_graph.h"

static void attr_int(gr_graph *g, int n, const char *name, int64_t v)
{
    gr_attr *a = gr_attr_add(&err, g, n, name);
    a->type = GA_INT;
    a->i = v;
}

static void attr_str(gr_graph *g, int n, const char *name, const char *v)
{
    gr_attr *a = gr_attr_add(&err, g, n, name);
    a->type = GA_STRING;
    a->s = mem_strdup(v);
}

/* Runs m on ins under mode and threads; returns output 0 (the caller
 * destroys it). */
static tdm_tensor *run1(tdm_model *m, int mode, int threads, tdm_tensor **ins)
{
    tdm_tensor *outs[2] = {NULL, NULL};
    run(m, mode, NULL, threads, (const tdm_tensor *const *)ins, outs);
    return outs[0];
}

static int same_bits(const tdm_tensor *a, const tdm_tensor *b)
{
    return tdm_tensor_count(a) == tdm_tensor_count(b) &&
           !memcmp(tdm_tensor_cdata(a), tdm_tensor_cdata(b), tdm_tensor_count(a) * sizeof(float));
}

/* ---- ConvTranspose ---- */

typedef struct ct_case {
    const char *name;
    int nsp;
    int64_t n, c, m, group;
    int64_t in[3], k[3], s[3], pads[6], opad[3];
    int bias;
    int chain; /* 0 none, 1 Add(residual input) -> Relu, 2 Add(per-channel constant) -> Sigmoid */
} ct_case;

static void ct_geom(const ct_case *t, int64_t *out)
{
    for (int i = 0; i < t->nsp; i++)
        out[i] = t->s[i] * (t->in[i] - 1) + t->opad[i] + t->k[i] - t->pads[i] - t->pads[i + t->nsp];
}

static void t_convt(const ct_case *t)
{
    const int nsp = t->nsp, rank = nsp + 2;
    int64_t out[3], xd[5] = {t->n, t->c}, wd[5] = {t->c, t->m / t->group}, yd[5] = {t->n, t->m};
    int64_t cd[5] = {1, t->m, 1, 1, 1}, bd[1] = {t->m};
    ct_geom(t, out);
    size_t in_sz = 1, out_sz = 1, k_sz = 1;
    for (int i = 0; i < nsp; i++) {
        xd[2 + i] = t->in[i];
        wd[2 + i] = t->k[i];
        yd[2 + i] = out[i];
        in_sz *= (size_t)t->in[i];
        out_sz *= (size_t)out[i];
        k_sz *= (size_t)t->k[i];
    }
    gr_model *gm = model_new(13);
    gr_graph *g = gm->main;
    input(g, "x", rank, xd);
    init(g, "W", rank, wd, NULL);
    if (t->bias)
        init(g, "B", 1, bd, NULL);
    int nd = node(g, "ct", "ConvTranspose", t->bias ? "x,W,B" : "x,W", t->chain ? "c" : "y");
    attr_ints(g, nd, "kernel_shape", nsp, t->k);
    attr_ints(g, nd, "strides", nsp, t->s);
    attr_ints(g, nd, "pads", 2 * nsp, t->pads);
    attr_ints(g, nd, "output_padding", nsp, t->opad);
    attr_int(g, nd, "group", t->group);
    if (t->chain == 1) {
        input(g, "r", rank, yd);
        node(g, "add", "Add", "c,r", "a");
        node(g, "relu", "Relu", "a", "y");
    } else if (t->chain == 2) {
        init(g, "cb", rank, cd, NULL);
        node(g, "add", "Add", "c,cb", "a");
        node(g, "sig", "Sigmoid", "a", "y");
    }
    output(g, "y");
    /* the constants, read back before the model owns the graph */
    const size_t wn = (size_t)(t->c * (t->m / t->group)) * k_sz;
    float *w = mem_alloc(wn * sizeof *w), *b = mem_calloc((size_t)t->m, sizeof *b);
    float *cb = mem_calloc((size_t)t->m, sizeof *cb);
    for (int v = 0; v < g->n_values; v++) {
        const tdm_tensor *iv = g->values[v].init;
        if (!iv)
            continue;
        if (!strcmp(g->values[v].name, "W"))
            memcpy(w, iv->data, wn * sizeof *w);
        else if (!strcmp(g->values[v].name, "B"))
            memcpy(b, iv->data, (size_t)t->m * sizeof *b);
        else if (!strcmp(g->values[v].name, "cb"))
            memcpy(cb, iv->data, (size_t)t->m * sizeof *cb);
    }
    tdm_model *m;
    MUST(model_build(&err, gm, t->name, &m));
    if (t->chain) {
        fuse_plan *fp;
        MUST(fuse_plan_build(&err, m->gm->main, &fp));
        CHECK(fuse_plan_chains(fp) == 1);
        /* Sigmoid joins a chain only with the AVX2 loops (graph/fuse.c;
         * TANDEM_ISA=portable or a CPU without AVX2: Add alone) */
        CHECK(fuse_plan_fused_nodes(fp) == (t->chain == 2 && !gemm_avx2_usable() ? 1 : 2));
        fuse_plan_free(fp);
    }
    tdm_tensor *ins[2] = {NULL, NULL};
    MUST(tdm_tensor_create(TDM_FLOAT, rank, xd, &ins[0]));
    float *x = tdm_tensor_data(ins[0]);
    for (size_t i = 0; i < tdm_tensor_count(ins[0]); i++)
        x[i] = (float)(3 * rnd());
    const float *r = NULL;
    if (t->chain == 1) {
        MUST(tdm_tensor_create(TDM_FLOAT, rank, yd, &ins[1]));
        float *rv = tdm_tensor_data(ins[1]);
        for (size_t i = 0; i < tdm_tensor_count(ins[1]); i++)
            rv[i] = (float)(3 * rnd());
        r = rv;
    }
    /* the reference: sums in double, and the sum of |terms| for the bound */
    const size_t ycount = (size_t)(t->n * t->m) * out_sz;
    double *ref = mem_calloc(ycount, sizeof *ref), *mag = mem_calloc(ycount, sizeof *mag);
    const int64_t cg = t->c / t->group, mg = t->m / t->group;
    int64_t in3[3] = {1, 1, 1}, out3[3] = {1, 1, 1}, k3[3] = {1, 1, 1}, s3[3] = {1, 1, 1}, p3[3] = {0, 0, 0};
    for (int i = 0; i < nsp; i++) {
        int j = 3 - nsp + i;
        in3[j] = t->in[i];
        out3[j] = out[i];
        k3[j] = t->k[i];
        s3[j] = t->s[i];
        p3[j] = t->pads[i];
    }
    for (int64_t n = 0; n < t->n; n++)
        for (int64_t oc = 0; oc < t->m; oc++) {
            const int64_t gi = oc / mg, mo = oc % mg;
            double *yr = ref + (size_t)(n * t->m + oc) * out_sz, *mr = mag + (size_t)(n * t->m + oc) * out_sz;
            for (size_t o = 0; o < out_sz; o++)
                yr[o] = b[oc];
            for (int64_t ci = 0; ci < cg; ci++) {
                const int64_t ic = gi * cg + ci;
                const float *xp = x + (size_t)(n * t->c + ic) * in_sz;
                const float *wp = w + (size_t)(ic * mg + mo) * k_sz;
                for (int64_t id = 0; id < in3[0]; id++)
                    for (int64_t ih = 0; ih < in3[1]; ih++)
                        for (int64_t iw = 0; iw < in3[2]; iw++)
                            for (int64_t kd = 0; kd < k3[0]; kd++)
                                for (int64_t kh = 0; kh < k3[1]; kh++)
                                    for (int64_t kw = 0; kw < k3[2]; kw++) {
                                        int64_t od = id * s3[0] + kd - p3[0], oh = ih * s3[1] + kh - p3[1];
                                        int64_t ow = iw * s3[2] + kw - p3[2];
                                        if (od < 0 || od >= out3[0] || oh < 0 || oh >= out3[1] || ow < 0 ||
                                            ow >= out3[2])
                                            continue;
                                        double v = (double)xp[(id * in3[1] + ih) * in3[2] + iw] *
                                                   wp[(kd * k3[1] + kh) * k3[2] + kw];
                                        size_t o = (size_t)((od * out3[1] + oh) * out3[2] + ow);
                                        yr[o] += v;
                                        mr[o] += fabs(v);
                                    }
            }
            for (size_t o = 0; o < out_sz; o++) {
                if (t->chain == 1) {
                    yr[o] += r[(size_t)(n * t->m + oc) * out_sz + o];
                    yr[o] = yr[o] > 0 ? yr[o] : 0;
                } else if (t->chain == 2) {
                    yr[o] = 1 / (1 + exp(-(yr[o] + cb[oc])));
                }
            }
        }
    tdm_tensor *off1 = run1(m, TDM_FUSION_OFF, 1, ins), *off2 = run1(m, TDM_FUSION_OFF, 2, ins);
    tdm_tensor *on1 = run1(m, TDM_FUSION_ON, 1, ins), *on2 = run1(m, TDM_FUSION_ON, 2, ins);
    CHECK(tdm_tensor_count(off1) == ycount);
    CHECK(same_bits(off1, off2));
    CHECK(same_bits(on1, on2));
    long worst = 0;
    size_t bad = 0;
    const float *a = tdm_tensor_cdata(off1), *f = tdm_tensor_cdata(on1);
    for (size_t i = 0; i < ycount && tdm_tensor_count(off1) == ycount && tdm_tensor_count(on1) == ycount; i++) {
        long u = ulps(a[i], f[i]);
        worst = u > worst ? u : worst;
        /* float sums of the same terms; the chain's Sigmoid within 1e-6 */
        double tol = 1e-6 * (mag[i] + fabs(b[i / out_sz % (size_t)t->m]) + 1) + (t->chain == 2 ? 1e-6 : 0);
        bad += fabs(a[i] - ref[i]) > tol;
    }
    fprintf(stderr, "%s: %zu outputs, %zu off the reference, fused vs unfused max %ld ulps\n", t->name, ycount, bad,
            worst);
    CHECK(bad == 0);
    CHECK(worst <= 4);
    tdm_tensor_destroy(off1);
    tdm_tensor_destroy(off2);
    tdm_tensor_destroy(on1);
    tdm_tensor_destroy(on2);
    tdm_tensor_destroy(ins[0]);
    tdm_tensor_destroy(ins[1]);
    mem_free(ref);
    mem_free(mag);
    mem_free(w);
    mem_free(b);
    mem_free(cb);
    tdm_model_destroy(m);
}

static const ct_case ct_cases[] = {
    /* the scatter path */
    {"k2s2_bias_residual_relu", 2, 1, 5, 7, 1, {9, 11}, {2, 2}, {2, 2}, {0}, {0}, 1, 1},
    {"k2s2_nobias", 2, 2, 5, 7, 1, {9, 11}, {2, 2}, {2, 2}, {0}, {0}, 0, 0},
    {"k2s2_nobias_sigmoid", 2, 1, 6, 1, 1, {13, 17}, {2, 2}, {2, 2}, {0}, {0}, 0, 2},
    {"k3s3_bias_sigmoid", 2, 1, 4, 3, 1, {7, 5}, {3, 3}, {3, 3}, {0}, {0}, 1, 2},
    {"k2s2_3d_group2", 3, 1, 4, 6, 2, {3, 4, 5}, {2, 2, 2}, {2, 2, 2}, {0}, {0}, 1, 0},
    {"k4s4_1d", 1, 2, 3, 5, 1, {19}, {4}, {4}, {0}, {0}, 0, 1},
    {"k1s1", 2, 1, 8, 9, 1, {6, 7}, {1, 1}, {1, 1}, {0}, {0}, 1, 1},
    {"k2s2_24ch_blocks", 2, 1, 24, 24, 1, {40, 40}, {2, 2}, {2, 2}, {0}, {0}, 1, 1},
    {"k2s2_wide_rows", 2, 1, 16, 4, 1, {70, 300}, {2, 2}, {2, 2}, {0}, {0}, 1, 2},
    /* the general col2im path: overlapping taps, pads, output padding */
    {"k3s2_pads_opad", 2, 1, 5, 6, 1, {8, 9}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1, 1},
    {"k2s2_pads", 2, 1, 3, 4, 1, {6, 6}, {2, 2}, {2, 2}, {1, 0, 0, 1}, {0}, 0, 0},
    {"k2s2_opad", 2, 1, 3, 4, 1, {6, 5}, {2, 2}, {2, 2}, {0}, {1, 0}, 1, 2},
};

/* ---- Resize nearest ---- */

typedef struct rz_case {
    const char *name;
    int rank;
    int64_t in[4], out[4];
    const char *ctm, *nearest;
} rz_case;

/* The ONNX reference's source index of output index o (size in -> out). */
static int64_t rz_src(const rz_case *t, int64_t o, int64_t in, int64_t out)
{
    double scale = (double)out / (double)in, x;
    if (!strcmp(t->ctm, "asymmetric"))
        x = o / scale;
    else if (!strcmp(t->ctm, "half_pixel"))
        x = (o + 0.5) / scale - 0.5;
    else /* align_corners */
        x = out == 1 ? 0 : o * (double)(in - 1) / (double)(out - 1);
    double v;
    if (!strcmp(t->nearest, "floor"))
        v = floor(x);
    else if (!strcmp(t->nearest, "ceil"))
        v = ceil(x);
    else if (!strcmp(t->nearest, "round_prefer_ceil"))
        v = x == floor(x) + 0.5 ? ceil(x) : nearbyint(x);
    else /* round_prefer_floor */
        v = x == floor(x) + 0.5 ? floor(x) : nearbyint(x);
    int64_t i = (int64_t)v;
    return i < 0 ? 0 : i >= in ? in - 1 : i;
}

/* chain: the Resize followed by Add(residual input) (ppocr_det's FPN). */
static void t_resize(const rz_case *t, int chain)
{
    gr_model *gm = model_new(13);
    gr_graph *g = gm->main;
    input(g, "x", t->rank, t->in);
    int64_t one = t->rank, zd[1] = {0};
    float sc[4];
    for (int d = 0; d < t->rank; d++)
        sc[d] = (float)t->out[d] / (float)t->in[d];
    init(g, "roi", 1, zd, NULL);
    init(g, "scales", 1, &one, sc);
    int nd = node(g, "rz", "Resize", "x,roi,scales", chain ? "z" : "y");
    attr_str(g, nd, "mode", "nearest");
    attr_str(g, nd, "coordinate_transformation_mode", t->ctm);
    attr_str(g, nd, "nearest_mode", t->nearest);
    if (chain) {
        input(g, "r", t->rank, t->out);
        node(g, "add", "Add", "z,r", "y");
    }
    output(g, "y");
    tdm_model *m;
    MUST(model_build(&err, gm, t->name, &m));
    tdm_tensor *ins[2] = {NULL, NULL};
    MUST(tdm_tensor_create(TDM_FLOAT, t->rank, t->in, &ins[0]));
    float *x = tdm_tensor_data(ins[0]);
    for (size_t i = 0; i < tdm_tensor_count(ins[0]); i++)
        x[i] = (float)rnd();
    const float *res = NULL;
    if (chain) {
        MUST(tdm_tensor_create(TDM_FLOAT, t->rank, t->out, &ins[1]));
        float *rv = tdm_tensor_data(ins[1]);
        for (size_t i = 0; i < tdm_tensor_count(ins[1]); i++)
            rv[i] = (float)rnd();
        res = rv;
    }
    tdm_tensor *y1 = run1(m, TDM_FUSION_ON, 1, ins), *y2 = run1(m, TDM_FUSION_ON, 2, ins);
    tdm_tensor *y3 = run1(m, TDM_FUSION_OFF, 1, ins), *y4 = run1(m, TDM_FUSION_OFF, 2, ins);
    CHECK(same_bits(y1, y2));
    CHECK(same_bits(y1, y3));
    CHECK(same_bits(y3, y4));
    size_t count = 1;
    for (int d = 0; d < t->rank; d++)
        count *= (size_t)t->out[d];
    CHECK(tdm_tensor_count(y1) == count);
    size_t bad = 0;
    if (tdm_tensor_count(y1) == count) {
        const float *y = tdm_tensor_cdata(y1);
        int64_t idx[4] = {0, 0, 0, 0};
        for (size_t i = 0; i < count; i++) {
            size_t src = 0;
            for (int d = 0; d < t->rank; d++)
                src = src * (size_t)t->in[d] + (size_t)rz_src(t, idx[d], t->in[d], t->out[d]);
            float want = res ? x[src] + res[i] : x[src];
            bad += memcmp(&y[i], &want, sizeof *y) != 0;
            for (int d = t->rank - 1; d >= 0 && ++idx[d] == t->out[d]; d--)
                idx[d] = 0;
        }
    }
    fprintf(stderr, "%s%s: %zu outputs, %zu wrong\n", t->name, chain ? " + Add" : "", count, bad);
    CHECK(bad == 0);
    tdm_tensor_destroy(y1);
    tdm_tensor_destroy(y2);
    tdm_tensor_destroy(y3);
    tdm_tensor_destroy(y4);
    tdm_tensor_destroy(ins[0]);
    tdm_tensor_destroy(ins[1]);
    tdm_model_destroy(m);
}

static const rz_case rz_cases[] = {
    {"nearest_x2_asym_floor", 4, {1, 3, 20, 33}, {1, 3, 40, 66}, "asymmetric", "floor"},
    {"nearest_x4_asym_floor", 4, {2, 5, 7, 9}, {2, 5, 28, 36}, "asymmetric", "floor"},
    {"nearest_x2_big", 4, {1, 24, 80, 80}, {1, 24, 160, 160}, "asymmetric", "floor"},
    {"nearest_x3_half_pixel", 4, {1, 2, 5, 6}, {1, 2, 15, 18}, "half_pixel", "round_prefer_floor"},
    {"nearest_down_align", 4, {1, 2, 9, 12}, {1, 2, 3, 4}, "align_corners", "round_prefer_ceil"},
    {"nearest_mixed_ceil", 4, {1, 3, 6, 8}, {1, 3, 9, 20}, "asymmetric", "ceil"},
    {"nearest_rank3_w_only", 3, {4, 5, 6}, {4, 5, 12}, "asymmetric", "floor"},
    {"nearest_rank2", 2, {7, 3}, {14, 9}, "asymmetric", "floor"},
};

/* ---- BatchNormalization (inference) with a chain after it ---- */

/* BatchNormalization -> Add(residual input) -> Relu on [2, 5, 37, 61]
 * (planes longer than the kernel's pieces): fused and unfused runs on 1 and
 * 2 threads against the formula in double. */
static void t_bn_chain(void)
{
    gr_model *gm = model_new(15);
    gr_graph *g = gm->main;
    int64_t xd[4] = {2, 5, 37, 61}, cd[1] = {5};
    float sc[5], bi[5], mn[5], vr[5];
    for (int c = 0; c < 5; c++) {
        sc[c] = (float)rnd();
        bi[c] = (float)rnd();
        mn[c] = (float)rnd();
        vr[c] = (float)(rnd() + 1.5);
    }
    input(g, "x", 4, xd);
    input(g, "r", 4, xd);
    init(g, "s", 1, cd, sc);
    init(g, "b", 1, cd, bi);
    init(g, "m", 1, cd, mn);
    init(g, "v", 1, cd, vr);
    node(g, "bn", "BatchNormalization", "x,s,b,m,v", "t");
    node(g, "add", "Add", "t,r", "a");
    node(g, "relu", "Relu", "a", "y");
    output(g, "y");
    tdm_model *m;
    MUST(model_build(&err, gm, "bn_chain", &m));
    tdm_tensor *ins[2];
    for (int k = 0; k < 2; k++) {
        MUST(tdm_tensor_create(TDM_FLOAT, 4, xd, &ins[k]));
        float *v = tdm_tensor_data(ins[k]);
        for (size_t i = 0; i < tdm_tensor_count(ins[k]); i++)
            v[i] = (float)(3 * rnd());
    }
    tdm_tensor *off1 = run1(m, TDM_FUSION_OFF, 1, ins), *off2 = run1(m, TDM_FUSION_OFF, 2, ins);
    tdm_tensor *on1 = run1(m, TDM_FUSION_ON, 1, ins), *on2 = run1(m, TDM_FUSION_ON, 2, ins);
    CHECK(same_bits(off1, off2));
    CHECK(same_bits(on1, on2));
    CHECK(same_bits(on1, off1));
    const float *x = tdm_tensor_cdata(ins[0]), *r = tdm_tensor_cdata(ins[1]), *y = tdm_tensor_cdata(on1);
    const size_t inner = 37 * 61, count = tdm_tensor_count(ins[0]);
    size_t bad = 0;
    for (size_t i = 0; i < count && tdm_tensor_count(on1) == count; i++) {
        size_t c = i / inner % 5;
        double a = sc[c] / sqrt((double)vr[c] + 1e-5), v = (x[i] - mn[c]) * a + bi[c] + r[i];
        v = v > 0 ? v : 0;
        bad += fabs(y[i] - v) > 1e-5 * (fabs(x[i] * a) + fabs(bi[c] - mn[c] * a) + fabs(r[i]) + 1);
    }
    fprintf(stderr, "bn_chain: %zu outputs, %zu off the formula\n", count, bad);
    CHECK(bad == 0);
    tdm_tensor_destroy(off1);
    tdm_tensor_destroy(off2);
    tdm_tensor_destroy(on1);
    tdm_tensor_destroy(on2);
    tdm_tensor_destroy(ins[0]);
    tdm_tensor_destroy(ins[1]);
    tdm_model_destroy(m);
}

/* ---- binary ops heading a chain ---- */

/* Mul(x, s[1,C,1,1]) -> Add(x) -> Relu (ppocr_det's attention blocks) and
 * Add(a, b) -> Sigmoid on same shapes (one merged row, cut into pieces):
 * fused and unfused runs on 1 and 2 threads against the formula. */
static void t_binary_chain(int same_shape)
{
    gr_model *gm = model_new(13);
    gr_graph *g = gm->main;
    int64_t xd[4] = {1, 6, 121, 131}, sd[4] = {1, 6, 1, 1}; /* 5 tasks on 2 threads */
    input(g, "x", 4, xd);
    input(g, "s", 4, same_shape ? xd : sd);
    if (same_shape) {
        node(g, "add", "Add", "x,s", "a");
        node(g, "sig", "Sigmoid", "a", "y");
    } else {
        node(g, "mul", "Mul", "x,s", "m");
        node(g, "add", "Add", "x,m", "a");
        node(g, "relu", "Relu", "a", "y");
    }
    output(g, "y");
    tdm_model *m;
    const char *name = same_shape ? "add_sigmoid" : "mul_add_relu";
    MUST(model_build(&err, gm, name, &m));
    tdm_tensor *ins[2];
    MUST(tdm_tensor_create(TDM_FLOAT, 4, xd, &ins[0]));
    MUST(tdm_tensor_create(TDM_FLOAT, 4, same_shape ? xd : sd, &ins[1]));
    for (int k = 0; k < 2; k++) {
        float *v = tdm_tensor_data(ins[k]);
        for (size_t i = 0; i < tdm_tensor_count(ins[k]); i++)
            v[i] = (float)(3 * rnd());
    }
    tdm_tensor *off1 = run1(m, TDM_FUSION_OFF, 1, ins), *off2 = run1(m, TDM_FUSION_OFF, 2, ins);
    tdm_tensor *on1 = run1(m, TDM_FUSION_ON, 1, ins), *on2 = run1(m, TDM_FUSION_ON, 2, ins);
    CHECK(same_bits(off1, off2));
    CHECK(same_bits(on1, on2));
    const float *x = tdm_tensor_cdata(ins[0]), *sv = tdm_tensor_cdata(ins[1]), *y = tdm_tensor_cdata(on1);
    const float *u = tdm_tensor_cdata(off1);
    const size_t inner = 121 * 131, count = tdm_tensor_count(ins[0]);
    size_t bad = 0;
    long worst = 0;
    for (size_t i = 0; i < count && tdm_tensor_count(on1) == count && tdm_tensor_count(off1) == count; i++) {
        double v;
        if (same_shape) {
            v = 1 / (1 + exp(-((double)x[i] + sv[i])));
        } else {
            v = (double)x[i] + (double)x[i] * sv[i / inner];
            v = v > 0 ? v : 0;
        }
        bad += fabs(y[i] - v) > 1e-6 * (fabs(v) + 10);
        long d = ulps(y[i], u[i]);
        worst = d > worst ? d : worst;
    }
    fprintf(stderr, "%s: %zu outputs, %zu off the formula, fused vs unfused max %ld ulps\n", name, count, bad, worst);
    CHECK(bad == 0);
    CHECK(worst == 0);
    tdm_tensor_destroy(off1);
    tdm_tensor_destroy(off2);
    tdm_tensor_destroy(on1);
    tdm_tensor_destroy(on2);
    tdm_tensor_destroy(ins[0]);
    tdm_tensor_destroy(ins[1]);
    tdm_model_destroy(m);
}

int main(void)
{
    t_bn_chain();
    t_binary_chain(0);
    t_binary_chain(1);
    for (size_t i = 0; i < sizeof ct_cases / sizeof ct_cases[0]; i++)
        t_convt(&ct_cases[i]);
    for (size_t i = 0; i < sizeof rz_cases / sizeof rz_cases[0]; i++)
        for (int chain = 0; chain < 2; chain++)
            t_resize(&rz_cases[i], chain);
    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    return failures ? 1 : 0;
}
