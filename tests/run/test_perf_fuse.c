/* Elementwise fusion (graph/fuse.h) and the buffer arena (core/arena.h):
 * on small graphs built by hand, the pass fuses what it should (counted),
 * and sessions with fusion on compute what sessions with fusion off do
 * (within a few float ulps); observers see every node; the arena reuses
 * blocks within its bound.
 *
 * usage: test_perf_fuse CASE */
#include "core/arena.h"
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

static void attr_float(gr_graph *g, int n, const char *name, float f)
{
    gr_attr *a = gr_attr_add(&err, g, n, name);
    a->type = GA_FLOAT;
    a->f = f;
}

/* ---- running ---- */


/* Builds the model, checks the pass's counts, and compares fused against
 * unfused runs (1 and 2 threads) within max_ulps. */
/* (>= 0) the kernel (fuse_chain_kernel) the one chain of the next model must run with */
static int want_kernel = -1;
/* (> 0) the next model's outputs are compared within tol_rel * max|ref|
 * instead of in ulps (a folded BatchNormalization rounds differently) */
static double tol_rel = 0;

static void check_model(const char *what, gr_model *gm, int want_chains, int want_fused, long max_ulps)
{
    tdm_model *m;
    MUST(model_build(&err, gm, what, &m));
    fuse_plan *fp;
    MUST(fuse_plan_build(&err, m->gm->main, &fp));
    int chains = fuse_plan_chains(fp), fused = fuse_plan_fused_nodes(fp);
    fprintf(stderr, "%s: %d chains, %d nodes fused away\n", what, chains, fused);
    CHECK(chains == want_chains);
    CHECK(fused == want_fused);
    if (want_kernel >= 0 && gemm_avx2_usable()) { /* the one-pass programs are AVX2 only */
        int kernel = -1;
        for (int n = 0; n < m->gm->main->n_nodes; n++)
            if (fuse_head_chain(fp, n))
                kernel = fuse_chain_kernel(fuse_head_chain(fp, n));
        fprintf(stderr, "%s: program kernel %d\n", what, kernel);
        CHECK(kernel == want_kernel);
    }
    fuse_plan_free(fp);

    size_t n_in = tdm_model_input_count(m), n_out = tdm_model_output_count(m);
    tdm_tensor *ins[4] = {NULL}, *ref[4] = {NULL}, *got[4] = {NULL};
    make_inputs(m, ins, 3);
    /* the reference: unfused, and under an observer, so without in-place
     * reuse either; the observer sees every node with its value */
    obs_count oc;
    memset(&oc, 0, sizeof oc);
    run(m, TDM_FUSION_OFF, &oc, 1, (const tdm_tensor *const *)ins, ref);
    CHECK(oc.nodes == m->gm->main->n_nodes);
    CHECK(oc.no_output == 0);
    /* unfused with in-place reuse; fused on 1 and 2 threads; fused under
     * an observer (OBSERVED: every node reported, the heads and the nodes
     * fused away without a value but the last of each chain, which has
     * the chain's); ON under an observer: unfused, every value seen */
    static const int modes[5] = {TDM_FUSION_OFF, TDM_FUSION_ON, TDM_FUSION_ON, TDM_FUSION_OBSERVED, TDM_FUSION_ON};
    static const int nthreads[5] = {1, 1, 2, 1, 1};
    static const int observed[5] = {0, 0, 0, 1, 1};
    for (int v = 0; v < 5; v++) {
        memset(&oc, 0, sizeof oc);
        run(m, modes[v], observed[v] ? &oc : NULL, nthreads[v], (const tdm_tensor *const *)ins, got);
        for (size_t k = 0; k < n_out; k++) {
            CHECK(tdm_tensor_count(got[k]) == tdm_tensor_count(ref[k]));
            const float *a = tdm_tensor_cdata(got[k]), *b = tdm_tensor_cdata(ref[k]);
            long worst = 0;
            double big = 0, diff = 0;
            for (size_t i = 0; i < tdm_tensor_count(ref[k]); i++) {
                long u = ulps(a[i], b[i]);
                if (u > worst)
                    worst = u;
                big = fabs(b[i]) > big ? fabs(b[i]) : big;
                diff = fabs((double)a[i] - b[i]) > diff ? fabs((double)a[i] - b[i]) : diff;
            }
            if (tol_rel > 0) {
                fprintf(stderr, "%s: max abs diff %g, max |ref| %g\n", what, diff, big);
                CHECK(big > 0 && diff <= tol_rel * big);
                worst = 0;
            }
            fprintf(stderr, "%s: fusion %d, %d thread(s)%s: output %zu, max %ld ulps\n", what, modes[v],
                    nthreads[v], observed[v] ? ", observed" : "", k, worst);
            CHECK(worst <= max_ulps);
            tdm_tensor_destroy(got[k]);
            got[k] = NULL;
        }
        if (observed[v]) {
            CHECK(oc.nodes == m->gm->main->n_nodes);
            CHECK(oc.no_output == (modes[v] == TDM_FUSION_OBSERVED ? want_fused : 0));
        }
    }
    for (size_t k = 0; k < n_out; k++)
        tdm_tensor_destroy(ref[k]);
    for (size_t k = 0; k < n_in; k++)
        tdm_tensor_destroy(ins[k]);
    tdm_model_destroy(m);
}

/* ---- cases ---- */

/* Conv -> Mul(scalar) -> Add([1,C,1,1]) -> hardswish as
 * Add(x, 3) -> Clip(0, 6) -> Mul(x, clip) -> Div(6) (ppocr_det). */
static void t_hardswish(void)
{
    gr_model *m = model_new(13);
    gr_graph *g = m->main;
    int64_t xd[4] = {1, 3, 19, 21}, cd[4] = {1, 8, 1, 1};
    input(g, "x", 4, xd);
    conv(g, "conv", "x", "c", 3, 8);
    scalar(g, "k", 0.75f);
    init(g, "bias", 4, cd, NULL);
    scalar(g, "three", 3.0f);
    scalar(g, "zero", 0.0f);
    scalar(g, "six", 6.0f);
    node(g, "mul", "Mul", "c,k", "m");
    node(g, "add", "Add", "m,bias", "a");
    node(g, "add3", "Add", "a,three", "p");
    node(g, "clip", "Clip", "p,zero,six", "q");
    node(g, "mulx", "Mul", "a,q", "r");
    node(g, "div6", "Div", "r,six", "y");
    output(g, "y");
    check_model("hardswish", m, 1, 6, 0);
}

/* The one-pass programs (fuse_lin): Conv -> Mul(scalar, x) -> Add(scalar)
 * -> hardswish -> Mul(scalar, x) -> Add(scalar), exactly ppocr_det's
 * chain (a straight-line kernel), with pre and post (pre_post 3), one of
 * them or neither; output rows of 19 x 21 = 399 elements (vector tails). */
static void t_hardswish_lin(int pre_post)
{
    gr_model *m = model_new(13);
    gr_graph *g = m->main;
    int64_t xd[4] = {1, 3, 19, 21};
    input(g, "x", 4, xd);
    conv(g, "conv", "x", "c", 3, 8);
    scalar(g, "k", 1.25f);
    scalar(g, "b", -0.5f);
    scalar(g, "k2", 0.7f);
    scalar(g, "b2", 0.25f);
    scalar(g, "three", 3.0f);
    scalar(g, "zero", 0.0f);
    scalar(g, "six", 6.0f);
    const char *a = "c";
    int n = 4;
    if (pre_post & 1) {
        node(g, "mul", "Mul", "k,c", "m");
        node(g, "add", "Add", "m,b", "a");
        a = "a";
        n += 2;
    }
    char ins[64];
    snprintf(ins, sizeof ins, "%s,three", a);
    node(g, "add3", "Add", ins, "p");
    node(g, "clip", "Clip", "p,zero,six", "q");
    snprintf(ins, sizeof ins, "%s,q", a);
    node(g, "mulx", "Mul", ins, "r");
    node(g, "div6", "Div", "r,six", (pre_post & 2) ? "h" : "y");
    if (pre_post & 2) {
        node(g, "mul2", "Mul", "k2,h", "m2");
        node(g, "add2", "Add", "m2,b2", "y");
        n += 2;
    }
    output(g, "y");
    char what[64];
    snprintf(what, sizeof what, "hardswish_lin%d", pre_post);
    want_kernel = 2;
    check_model(what, m, 1, n, 0);
    want_kernel = -1;
}

/* Conv -> BatchNormalization -> Relu, and a Conv without bias ->
 * BatchNormalization -> hardswish (scalar operands): the BatchNormalizations
 * folded into the Convs' weights (fused away, counted), within 1e-5 of
 * max|ref| of the unfused run; a BatchNormalization after a Conv whose
 * output has a second reader is not folded. */
static void t_bn_fold(void)
{
    gr_model *m = model_new(15);
    gr_graph *g = m->main;
    int64_t xd[4] = {1, 3, 11, 13}, cd[1] = {6}, wd[4] = {6, 3, 1, 1};
    float sc[6], bi[6], mn[6], vr[6];
    for (int k = 0; k < 6; k++) {
        sc[k] = (float)(1 + 0.5 * rnd());
        bi[k] = (float)rnd();
        mn[k] = (float)(0.3 * rnd());
        vr[k] = (float)(0.5 + 0.4 * rnd());
    }
    input(g, "x", 4, xd);
    conv(g, "conv1", "x", "c1", 3, 6);
    init(g, "sc", 1, cd, sc);
    init(g, "bi", 1, cd, bi);
    init(g, "mn", 1, cd, mn);
    init(g, "vr", 1, cd, vr);
    node(g, "bn1", "BatchNormalization", "c1,sc,bi,mn,vr", "n1");
    node(g, "relu", "Relu", "n1", "r1");
    init(g, "w2", 4, wd, NULL);
    node(g, "conv2", "Conv", "x,w2", "c2"); /* 1x1, no bias */
    node(g, "bn2", "BatchNormalization", "c2,sc,bi,mn,vr", "n2");
    scalar(g, "three", 3.0f);
    scalar(g, "zero", 0.0f);
    scalar(g, "six", 6.0f);
    node(g, "add3", "Add", "n2,three", "p");
    node(g, "clip", "Clip", "p,zero,six", "q");
    node(g, "mulx", "Mul", "n2,q", "h");
    node(g, "div6", "Div", "h,six", "r2");
    node(g, "sum", "Add", "r1,r2", "s");
    /* conv3's output is read by bn3 and by the output Add: not folded */
    conv(g, "conv3", "s", "c3", 6, 6);
    node(g, "bn3", "BatchNormalization", "c3,sc,bi,mn,vr", "n3");
    node(g, "out", "Add", "n3,c3", "y");
    output(g, "y");
    /* chains: conv1 (bn1, relu), conv2 (bn2, add3, clip, mulx, div6; not
     * the Add of r1: after a folded BatchNormalization only scalar
     * initializer operands), bn3 (out; conv3 has none) */
    tol_rel = 1e-5;
    fuse_plan_fold_bn(1);
    check_model("bn_fold", m, 3, 2 + 5 + 1, 0);
    fuse_plan_fold_bn(1); /* the default */
    tol_rel = 0;
}

/* A short general one-pass program: Conv -> Sub(scalar, x) -> Max(x,
 * residual) -> Relu, the residual a full-size value computed before. */
static void t_lin_general(void)
{
    gr_model *m = model_new(13);
    gr_graph *g = m->main;
    int64_t xd[4] = {1, 4, 9, 7};
    input(g, "x", 4, xd);
    conv(g, "conv1", "x", "c1", 4, 4);
    conv(g, "conv2", "c1", "c2", 4, 4);
    scalar(g, "s", 0.5f);
    node(g, "sub", "Sub", "s,c2", "d");
    node(g, "max", "Max", "d,x", "e");
    node(g, "relu", "Relu", "e", "y");
    output(g, "y");
    want_kernel = 1;
    check_model("lin_general", m, 1, 3, 0);
    want_kernel = -1;
}

/* Conv -> Sigmoid, Mul(x, sigmoid) (SiLU), then Relu of a second Conv
 * added to the first's SiLU output (residual). */
static void t_silu_residual(void)
{
    gr_model *m = model_new(13);
    gr_graph *g = m->main;
    int64_t xd[4] = {1, 4, 7, 5};
    input(g, "x", 4, xd);
    conv(g, "conv1", "x", "c1", 4, 6);
    node(g, "sig", "Sigmoid", "c1", "s");
    node(g, "silu", "Mul", "c1,s", "h");
    conv(g, "conv2", "h", "c2", 6, 6);
    node(g, "res", "Add", "h,c2", "r");
    node(g, "relu", "Relu", "r", "y");
    output(g, "y");
    int avx2 = gemm_avx2_usable();
    /* conv1's chain needs the Sigmoid (AVX2 only); conv2 takes the
     * residual Add and the Relu */
    check_model("silu_residual", m, avx2 ? 2 : 1, avx2 ? 4 : 2, 0);
}

/* The one-pass programs with a Sigmoid (FL_SIGMOID): Conv -> SiLU as
 * Mul(x, Sigmoid(x)) and as Mul(Sigmoid(x), x) (the straight-line SiLU
 * kernel), and Conv -> Mul(scalar) -> Sigmoid (the general one-pass
 * loop); output planes of 7 x 9 = 63 elements (vector tails). 0 ulps: the
 * fused Sigmoid is the standalone op's function. */
static void t_silu_lin(void)
{
    for (int v = 0; v < 3; v++) {
        gr_model *m = model_new(13);
        gr_graph *g = m->main;
        int64_t xd[4] = {1, 3, 7, 9};
        input(g, "x", 4, xd);
        conv(g, "conv", "x", "c", 3, 5);
        if (v < 2) {
            node(g, "sig", "Sigmoid", "c", "s");
            node(g, "silu", "Mul", v == 0 ? "c,s" : "s,c", "y");
        } else {
            scalar(g, "k", 2.5f);
            node(g, "mul", "Mul", "c,k", "a");
            node(g, "sig", "Sigmoid", "a", "y");
        }
        output(g, "y");
        char what[64];
        snprintf(what, sizeof what, "silu_lin%d", v);
        want_kernel = v < 2 ? 2 : 1;
        check_model(what, m, 1, 2, 0);
        want_kernel = -1;
    }
}

/* MatMul -> Add(bias) -> GELU as Div, Erf, Add(1), Mul(x, .), Mul(0.5). */
static void t_gelu(void)
{
    gr_model *m = model_new(17);
    gr_graph *g = m->main;
    int64_t xd[3] = {2, 5, 8}, wd[2] = {8, 12}, bd[1] = {12};
    input(g, "x", 3, xd);
    init(g, "w", 2, wd, NULL);
    init(g, "b", 1, bd, NULL);
    scalar(g, "sqrt2", 1.4142135f);
    scalar(g, "one", 1.0f);
    scalar(g, "half", 0.5f);
    node(g, "mm", "MatMul", "x,w", "t");
    node(g, "bias", "Add", "b,t", "u"); /* constant first: operand order kept */
    node(g, "div", "Div", "u,sqrt2", "v");
    node(g, "erf", "Erf", "v", "e");
    node(g, "add1", "Add", "e,one", "f");
    node(g, "mulx", "Mul", "u,f", "h");
    node(g, "mulh", "Mul", "h,half", "y");
    output(g, "y");
    check_model("gelu", m, 1, 6, 0);
}

/* Heads that are not kernels taking fusion (in place after the head), the
 * other activations, operands broadcast along inner and middle axes, and
 * what must not fuse: a value used outside the chain, a graph output in
 * the middle, an operand computed after the head. */
static void t_inplace(void)
{
    gr_model *m = model_new(14);
    gr_graph *g = m->main;
    int64_t xd[3] = {2, 3, 400}, md[3] = {2, 1, 400}, rd[1] = {400}, cd[2] = {3, 1};
    input(g, "x", 3, xd);
    input(g, "z", 3, xd);
    init(g, "mid", 3, md, NULL);
    init(g, "row", 1, rd, NULL);
    init(g, "col", 2, cd, NULL);
    scalar(g, "two", 2.0f);
    /* chain 1: head Add(x, z), all in place */
    node(g, "add", "Add", "x,z", "a");
    node(g, "tanh", "Tanh", "a", "b");
    int n = node(g, "leaky", "LeakyRelu", "b", "c");
    attr_float(g, n, "alpha", 0.3f);
    node(g, "sub", "Sub", "two,c", "d");     /* operand first */
    node(g, "max", "Max", "d,mid", "e");     /* [2,1,40]: general broadcast */
    node(g, "min", "Min", "row,e", "f");     /* [40]: inner block */
    n = node(g, "hsig", "HardSigmoid", "f", "h");
    attr_float(g, n, "alpha", 0.3f);
    node(g, "mulc", "Mul", "h,col", "i");     /* [3,1]: middle block */
    node(g, "hswish", "HardSwish", "i", "j");
    node(g, "erf", "Erf", "j", "k");
    /* k feeds two nodes outside any chain of k: Relu(k) and an Add(k, r)
     * whose r is computed after Relu: k's chain stops at k */
    node(g, "relu", "Relu", "k", "r");
    node(g, "add2", "Add", "k,r", "s");
    /* s -> Neg (not fusable) -> Mul: a chain of the Neg with a graph
     * output in its middle does not fuse past it */
    node(g, "neg", "Neg", "s", "t");
    node(g, "clip", "Clip", "t", "u");       /* no bounds */
    node(g, "sig", "Relu", "u", "y2");
    /* an operand computed after the head: Neg(z) takes no chain (Abs(x) is
     * computed after it); Abs(x) takes the Add, Neg(z) being ready */
    node(g, "h", "Neg", "z", "hz");
    node(g, "late", "Abs", "x", "lx");
    node(g, "mix", "Add", "hz,lx", "y3");
    output(g, "u");
    output(g, "y2");
    output(g, "y3");
    /* chains: add takes tanh .. erf (9), then relu and add2 (k's two
     * consumers, 11 in all); neg takes clip only (its output u is a graph
     * output); late takes mix (1) */
    check_model("inplace", m, 3, 13, 0);
}

/* op_fuse_clamp: a chain of one Clip or Relu is a clamp a kernel may apply
 * as it stores; any other program is not. Each model runs fused and
 * unfused with 0 ulps between them (a kernel clamping in registers must
 * match the standalone op exactly). */
static void clamp_case(const char *what, const char *op, const float *bounds, int want, float lo, float hi)
{
    gr_model *m = model_new(14);
    gr_graph *g = m->main;
    int64_t xd[4] = {1, 5, 9, 11};
    input(g, "x", 4, xd);
    conv(g, "conv", "x", "c", 5, 7);
    if (bounds) {
        scalar(g, "lo", bounds[0]);
        scalar(g, "hi", bounds[1]);
        node(g, "act", op, "c,lo,hi", "y");
    } else {
        node(g, "act", op, "c", "y");
    }
    output(g, "y");
    tdm_model *tm;
    MUST(model_build(&err, m, what, &tm));
    fuse_plan *fp;
    MUST(fuse_plan_build(&err, tm->gm->main, &fp));
    const fuse_chain *c = NULL;
    for (int n = 0; n < tm->gm->main->n_nodes && !c; n++)
        c = fuse_head_chain(fp, n);
    CHECK(c != NULL);
    if (c) {
        op_fuse f = {.prog = fuse_chain_prog(c)};
        float l = -1.0f, h = -1.0f;
        int got = op_fuse_clamp(&f, &l, &h);
        fprintf(stderr, "%s: clamp %d [%g, %g]\n", what, got, l, h);
        CHECK(got == want);
        CHECK(!want || (l == lo && h == hi));
    }
    fuse_plan_free(fp);
    tdm_model_destroy(tm);
}

static void t_clamp(void)
{
    const float b6[2] = {0.0f, 6.0f}, bneg[2] = {-1.5f, 0.25f};
    clamp_case("clip06", "Clip", b6, 1, 0.0f, 6.0f);
    clamp_case("clipneg", "Clip", bneg, 1, -1.5f, 0.25f);
    clamp_case("relu", "Relu", NULL, 1, 0.0f, INFINITY);
    clamp_case("sigmoid", "Sigmoid", NULL, 0, 0.0f, 0.0f);
    /* and the results: fused (the kernels' clamp) against unfused */
    gr_model *m = model_new(14);
    gr_graph *g = m->main;
    int64_t xd[4] = {2, 6, 13, 17};
    input(g, "x", 4, xd);
    conv(g, "c1", "x", "a", 6, 16);
    scalar(g, "lo", 0.0f);
    scalar(g, "hi", 6.0f);
    node(g, "clip", "Clip", "a,lo,hi", "b");
    conv(g, "c2", "b", "d", 16, 8);
    node(g, "relu", "Relu", "d", "y");
    output(g, "y");
    check_model("clamp", m, 2, 2, 0);
}

/* The arena: a block given back is taken again; kept bytes stay within the
 * most that was in use; outside an arena nothing is kept. */
static void t_arena(void)
{
    arena *a = arena_new();
    CHECK(a != NULL);
    arena *prev = arena_enter(a);
    int64_t d1[1] = {100000}, d2[1] = {90000}, d3[1] = {10000};
    tdm_tensor *t1, *t2, *t3;
    MUST(tensor_new(&err, TDM_FLOAT, 1, d1, &t1));
    void *p1 = t1->data;
    memset(t1->data, 1, t1->nbytes);
    tdm_tensor_destroy(t1);
    size_t blocks, bytes, reused;
    arena_stats(a, &blocks, &bytes, &reused);
    CHECK(blocks == 1 && bytes >= 400000 && bytes < 400000 + 8192 && reused == 0); /* its real size */
    MUST(tensor_new(&err, TDM_FLOAT, 1, d2, &t2)); /* 90% of the block: reused */
    CHECK(t2->data == p1);
    memset(t2->data, 2, t2->nbytes);
    MUST(tensor_new(&err, TDM_FLOAT, 1, d3, &t3)); /* below half of any block: new */
    CHECK(t3->data != p1);
    arena_stats(a, &blocks, &bytes, &reused);
    CHECK(blocks == 0 && reused == 360000);
    tdm_tensor_destroy(t2);
    tdm_tensor_destroy(t3);
    arena_stats(a, &blocks, &bytes, &reused);
    CHECK(blocks == 2 && bytes >= 440000 && bytes < 440000 + 16384); /* real sizes: 400000 + 40000 */
    /* the bound: twice the most in use at once (400000 bytes) */
    int64_t d4[1] = {200000};
    tdm_tensor *t4;
    MUST(tensor_new(&err, TDM_FLOAT, 1, d4, &t4));
    arena_leave(prev);
    arena_enter(a);
    tdm_tensor_destroy(t4);
    arena_stats(a, &blocks, &bytes, &reused);
    CHECK(bytes <= 2 * 800000 + 40000);
    /* a donated block serves the next request of exactly its size */
    tdm_tensor *t5, *t6;
    MUST(tensor_new(&err, TDM_FLOAT, 1, d3, &t5));
    arena_donate(t5->data, t5->nbytes);
    MUST(tensor_new(&err, TDM_FLOAT, 1, d2, &t6)); /* another size: not the donor */
    CHECK(t6->data != t5->data);
    tdm_tensor_destroy(t6);
    MUST(tensor_new(&err, TDM_FLOAT, 1, d3, &t6));
    CHECK(t6->data == t5->data);
    CHECK(arena_donation_end() == 1);
    t5->data = NULL; /* the output owns it now */
    tdm_tensor_destroy(t5);
    tdm_tensor_destroy(t6);
    arena_donate(NULL, 0);
    CHECK(arena_donation_end() == 0);
    arena_leave(prev);
    /* outside the arena: plain memory */
    MUST(tensor_new(&err, TDM_FLOAT, 1, d1, &t1));
    tdm_tensor_destroy(t1);
    arena_stats(a, &blocks, &bytes, &reused);
    CHECK(bytes <= 2 * 800000 + 40000);
    arena_free(a);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_perf_fuse CASE\n");
        return 2;
    }
    const char *c = argv[1];
    if (!strcmp(c, "hardswish")) {
        t_hardswish();
        for (int pp = 0; pp < 4; pp++)
            t_hardswish_lin(pp);
        t_lin_general();
        t_bn_fold();
    }
    else if (!strcmp(c, "silu_residual")) {
        t_silu_residual();
        t_silu_lin();
    }
    else if (!strcmp(c, "gelu"))
        t_gelu();
    else if (!strcmp(c, "inplace"))
        t_inplace();
    else if (!strcmp(c, "arena"))
        t_arena();
    else if (!strcmp(c, "clamp"))
        t_clamp();
    else {
        fprintf(stderr, "unknown case %s\n", c);
        return 2;
    }
    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    return failures ? 1 : 0;
}
