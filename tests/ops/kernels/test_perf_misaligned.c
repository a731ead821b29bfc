/* A Conv whose float32 W lies misaligned (as ONNX raw_data inside a mapped
 * protobuf does, issue 20 item 5) gives the bits of the same Conv with W
 * aligned, through op_run, on the first call (W packed) and the next (the
 * packed form found), on the GEMM, Winograd, depthwise and direct paths.
 * The packers read W where it lies: no aligned copy is made for the GEMM
 * and Winograd paths (W->aligned stays NULL, W->data unchanged), and one,
 * kept, for the depthwise and direct kernels, which load W as it is
 * (core/tensor.h tensor_align). */
#include "core/mem.h"
#include "graph/graph.h"
#include "graph/model.h"
#include "ops/nn.h"
#include "ops/op.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf_graph.h"

typedef struct mcase {
    const char *name;
    int64_t c, m, h, k, group, pad;
    int copied; /* 1: the kernel loads W as it is (an aligned copy is kept) */
} mcase;

/* W (input 1) is a constant, as an executor says of an initializer. */
static int w_const(const op_ctx *ctx, int i)
{
    (void)ctx;
    return i == 1;
}

static const op_calls calls = {.input_const = w_const};
static const op_caller caller = {&calls};

/* Conv(x, w) through op_run with fusion's fast kernels (Winograd where it applies). */
static tdm_tensor *conv_run(gr_node *nd, const tdm_tensor *x, const tdm_tensor *w)
{
    const tdm_tensor *in[2] = {x, w};
    tdm_tensor *out = mem_calloc(1, sizeof *out);
    tdm_tensor *outs[1] = {out};
    op_ctx ctx;
    op_ctx_init(&ctx, nd, in, outs, &err, &caller, 1, NULL);
    ctx.fast = 1;
    MUST(op_run(&ctx));
    return out;
}

static void check_case(const mcase *c)
{
    gr_model *gm = model_new(13);
    gr_graph *g = gm->main;
    int64_t xd[4] = {1, c->c, c->h, c->h}, wd[4] = {c->m, c->c / c->group, c->k, c->k};
    input(g, "x", 4, xd);
    init(g, "w", 4, wd, NULL);
    int n = node(g, "conv", "Conv", "x,w", "y");
    int64_t pads[4] = {c->pad, c->pad, c->pad, c->pad}, ks[2] = {c->k, c->k};
    attr_ints(g, n, "pads", 4, pads);
    attr_ints(g, n, "kernel_shape", 2, ks);
    if (c->group > 1) {
        gr_attr *a = gr_attr_add(&err, g, n, "group");
        a->type = GA_INT;
        a->i = c->group;
    }
    output(g, "y");
    gr_node *nd = &g->nodes[n];
    int op, ver;
    MUST(op_resolve(&err, "", "Conv", 13, &op, &ver));
    nd->op = op;
    nd->version = ver;
    const tdm_tensor *aw = NULL;
    for (int v = 0; v < g->n_values; v++)
        if (g->values[v].init && !strcmp(g->values[v].name, "w"))
            aw = g->values[v].init;
    CHECK(aw);
    if (!aw)
        return;
    /* the same values 2 bytes past an aligned address, borrowed */
    char *buf = mem_alloc(aw->nbytes + 8);
    memcpy(buf + 2, aw->data, aw->nbytes);
    tdm_tensor *mw;
    MUST(tensor_new(&err, TDM_FLOAT, 4, wd, &mw));
    mem_free(mw->data);
    mw->data = buf + 2;
    mw->borrowed = 1;
    mw->immutable = 1; /* an initializer's data never change */
    CHECK(tensor_misaligned(mw) && !tensor_misaligned(aw));
    tdm_tensor *x;
    MUST(tensor_new(&err, TDM_FLOAT, 4, xd, &x));
    for (size_t i = 0; i < x->count; i++)
        ((float *)x->data)[i] = (float)rnd();
    for (int call = 0; call < 2; call++) {
        tdm_tensor *ya = conv_run(nd, x, aw), *ym = conv_run(nd, x, mw);
        int same = ya->count && ya->count == ym->count && !memcmp(ya->data, ym->data, ya->nbytes);
        fprintf(stderr, "%-10s call %d: %zu outputs %s, W %s\n", c->name, call + 1, ya->count,
                same ? "bit-identical" : "DIFFER", mw->aligned ? "aligned (a copy kept)" : "where it lies");
        CHECK(same);
        if (c->copied)
            CHECK(mw->aligned && mw->data == mw->aligned && !memcmp(mw->data, aw->data, aw->nbytes));
        else
            CHECK(!mw->aligned && mw->data == buf + 2 && atomic_load(&mw->aux));
        tdm_tensor_destroy(ya);
        tdm_tensor_destroy(ym);
    }
    tdm_tensor_destroy(mw); /* frees the aligned copy, not buf */
    mem_free(buf);
    tdm_tensor_destroy(x);
    gr_model_free(gm);
}

int main(void)
{
    static const mcase cases[] = {
        {"winograd", 16, 16, 12, 3, 1, 1, 0}, /* F(4x4, 3x3): 3x3 tiles */
        {"gemm", 8, 12, 6, 1, 1, 0, 0},      /* 1x1: the packed GEMM */
        {"depthwise", 8, 8, 6, 3, 8, 1, 1},
        {"direct", 3, 8, 20, 3, 1, 1, 1},    /* 3 channels in: the direct kernel when AVX2 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (!strcmp(cases[i].name, "direct") && !gemm_avx2_usable())
            continue; /* without AVX2 it is the GEMM's: W packed, the case above */
        check_case(&cases[i]);
    }
    printf("misaligned: %s\n", failures ? "FAIL" : "ok");
    return failures ? 1 : 0;
}
