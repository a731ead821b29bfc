/* The model API end to end on ONNX files that make_models.py writes:
 * tdm_model_load / tdm_model_load_memory, info, histogram, FLOPs, folding
 * and error sentences.
 *
 * usage: test_graph_load CASE MODEL_DIR   (exit 0 pass, 1 fail) */
#include "core/ctx.h"
#include "core/mem.h"
#include "graph/model.h"
#include "ops/op.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The newest default-domain opset tandem resolves, as the message prints it. */
#define OPSET_STR2(x) #x
#define OPSET_STR(x) OPSET_STR2(x)
#define OPSET_MAX_STR OPSET_STR(OP_MAX_OPSET)

static int failures;
static const char *dir;

#define CHECK(c)                                                                                         \
    do {                                                                                                 \
        if (!(c)) {                                                                                      \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c);                        \
            failures++;                                                                                  \
        }                                                                                                \
    } while (0)

static int have_op(const char *name)
{
    for (int i = 0; i < OP_COUNT; i++)
        if (strcmp(op_table[i].name, name) == 0 && !*op_table[i].domain)
            return 1;
    return 0;
}

static const char *path_of(const char *name)
{
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/%s", dir, name);
    return buf;
}

/* Loads name; expects status want and each fragment in the sentence. */
static void expect_fail(tdm_ctx *ctx, const char *name, tdm_status want, const char *const *frags)
{
    tdm_model *m = (tdm_model *)ctx;
    tdm_status st = tdm_model_load(ctx, path_of(name), &m);
    const char *msg = tdm_ctx_error(ctx);
    fprintf(stderr, "  %s: %s: %s\n", name, tdm_status_str(st), msg);
    CHECK(st == want);
    CHECK(m == NULL);
    for (int k = 0; frags[k]; k++)
        if (!strstr(msg, frags[k])) {
            fprintf(stderr, "message lacks \"%s\"\n", frags[k]);
            failures++;
        }
}

static int t_flatten(void)
{
    const char *need[] = {"Shape", "Gather", "Unsqueeze", "Concat", "Reshape", "MatMul"};
    for (int i = 0; i < 6; i++)
        if (!have_op(need[i])) {
            fprintf(stderr, "%s is not in the op table\n", need[i]);
            return 1;
        }
    tdm_ctx *ctx;
    tdm_model *m;
    tdm_ctx_create(&ctx);
    tdm_status st = tdm_model_load(ctx, path_of("flatten.onnx"), &m);
    CHECK(st == TDM_OK);
    if (st) {
        fprintf(stderr, "%s\n", tdm_ctx_error(ctx));
        tdm_ctx_destroy(ctx);
        return 1;
    }
    CHECK(strcmp(tdm_ctx_error(ctx), "") == 0);
    tdm_model_info info;
    CHECK(tdm_model_get_info(m, &info) == TDM_OK);
    CHECK(strstr(info.path, "flatten.onnx") != NULL);
    CHECK(strcmp(info.producer_name, "make_models.py") == 0);
    CHECK(strcmp(info.graph_name, "flatten") == 0);
    CHECK(info.node_count == 8);                  /* as in the file */
    CHECK(info.param_count == 1 + 1 + 1 + 60 + 5);
    CHECK(info.param_bytes == 3 * 8 + 65 * 4);
    /* MatMul [2,12]x[12,5]: its input shape is known only after folding */
    fprintf(stderr, "  flops %.0f, unknown %zu\n", info.flops, info.flops_unknown);
    CHECK(info.flops == 2.0 * 2 * 5 * 12);
    CHECK(info.flops_unknown == 0);
    CHECK(tdm_model_op_type_count(m) == 8);
    const char *dom, *op, *k, *v;
    size_t n;
    CHECK(tdm_model_op_type(m, 0, &dom, &op, &n) == TDM_OK && strcmp(op, "Add") == 0 && n == 1);
    CHECK(tdm_model_op_type(m, 7, &dom, &op, &n) == TDM_OK && strcmp(op, "Unsqueeze") == 0);
    CHECK(tdm_model_metadata_count(m) == 2);
    int found = 0;
    for (size_t i = 0; i < tdm_model_metadata_count(m); i++)
        if (tdm_model_metadata(m, i, &k, &v) == TDM_OK && strcmp(k, "purpose") == 0 && strcmp(v, "fold") == 0)
            found = 1;
    CHECK(found);
    /* folded: Reshape, MatMul, Add, Relu remain; the output shape is static */
    const gr_graph *g = m->gm->main;
    CHECK(g->n_nodes == 4);
    for (int i = 0; i < g->n_nodes; i++)
        fprintf(stderr, "  node %d: %s\n", i, g->nodes[g->order[i]].name);
    tdm_value_info vi;
    CHECK(tdm_model_output(m, 0, &vi) == TDM_OK && vi.rank == 2 && vi.dims[0].value == 2 && vi.dims[1].value == 5);
    CHECK(tdm_model_input_count(m) == 1);
    tdm_model_destroy(m);
    tdm_ctx_destroy(ctx);
    return failures;
}

static int t_symbolic(void)
{
    tdm_ctx *ctx;
    tdm_model *m;
    tdm_ctx_create(&ctx);
    tdm_status st = tdm_model_load(ctx, path_of("symbolic.onnx"), &m);
    CHECK(st == TDM_OK);
    if (st) {
        fprintf(stderr, "%s\n", tdm_ctx_error(ctx));
        tdm_ctx_destroy(ctx);
        return 1;
    }
    tdm_value_info vi;
    CHECK(tdm_model_input_count(m) == 2);
    CHECK(tdm_model_input(m, 0, &vi) == TDM_OK && vi.rank == 2 && vi.dims[0].value == -1 &&
          vi.dims[0].symbol && strcmp(vi.dims[0].symbol, "N") == 0);
    CHECK(tdm_model_output(m, 0, &vi) == TDM_OK && vi.dtype == TDM_FLOAT && vi.rank == 2 && vi.dims[0].symbol &&
          strcmp(vi.dims[0].symbol, "N") == 0 && vi.dims[1].value == 3);
    tdm_model_destroy(m);
    tdm_ctx_destroy(ctx);
    return failures;
}

static int t_errors(void)
{
    tdm_ctx *ctx;
    tdm_ctx_create(&ctx);
    const char *f1[] = {"opset999.onnx: ", "node 'relu' (Relu)",
                        "opset 999 of domain ai.onnx is newer than tandem supports (up to " OPSET_MAX_STR ")", NULL};
    expect_fail(ctx, "opset999.onnx", TDM_E_UNSUPPORTED, f1);
    const char *f2[] = {"unknown_op.onnx: ", "node 'frob'", "FrobnicateNoSuchOp", "ai.onnx", "13", NULL};
    expect_fail(ctx, "unknown_op.onnx", TDM_E_UNSUPPORTED, f2);
    const char *f3[] = {"cycle.onnx: ", "cycle", "'first'", "'second'", NULL};
    expect_fail(ctx, "cycle.onnx", TDM_E_MODEL, f3);
    const char *f4[] = {"missing.onnx", NULL};
    expect_fail(ctx, "missing.onnx", TDM_E_IO, f4);
    /* success clears the previous error */
    tdm_model *m;
    CHECK(tdm_model_load(ctx, path_of("symbolic.onnx"), &m) == TDM_OK && strcmp(tdm_ctx_error(ctx), "") == 0);
    tdm_model_destroy(m);
    CHECK(tdm_model_load(ctx, path_of("symbolic.onnx"), NULL) == TDM_E_USAGE);
    tdm_ctx_destroy(ctx);
    return failures;
}

static int t_memory(void)
{
    FILE *f = fopen(path_of("symbolic.onnx"), "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path_of("symbolic.onnx"));
        return 1;
    }
    static unsigned char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    tdm_ctx *ctx;
    tdm_model *m;
    tdm_ctx_create(&ctx);
    CHECK(tdm_model_load_memory(ctx, buf, n, "in-memory.onnx", &m) == TDM_OK);
    tdm_model_info info;
    CHECK(tdm_model_get_info(m, &info) == TDM_OK && strcmp(info.path, "in-memory.onnx") == 0);
    CHECK(info.node_count == 1);
    tdm_model_destroy(m);
    /* a truncated buffer is refused with the given name */
    tdm_status st = tdm_model_load_memory(ctx, buf, n / 2, "half.onnx", &m);
    fprintf(stderr, "  half.onnx: %s: %s\n", tdm_status_str(st), tdm_ctx_error(ctx));
    CHECK(st != TDM_OK && m == NULL && strstr(tdm_ctx_error(ctx), "half.onnx"));
    tdm_ctx_destroy(ctx);
    return failures;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: test_graph_load CASE MODEL_DIR\n");
        return 2;
    }
    dir = argv[2];
    int r;
    if (strcmp(argv[1], "flatten") == 0)
        r = t_flatten();
    else if (strcmp(argv[1], "symbolic") == 0)
        r = t_symbolic();
    else if (strcmp(argv[1], "errors") == 0)
        r = t_errors();
    else if (strcmp(argv[1], "memory") == 0)
        r = t_memory();
    else {
        fprintf(stderr, "unknown case %s\n", argv[1]);
        return 2;
    }
    if (r || failures) {
        fprintf(stderr, "%s: %d check(s) failed\n", argv[1], failures);
        return 1;
    }
    fprintf(stderr, "%s: ok\n", argv[1]);
    return 0;
}
