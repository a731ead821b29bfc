/* Unit tests of src/devices: profiles, supports() verdicts, vnpu memory and
 * numerics, estimates, node descriptions, the registry and plugins.
 *
 * usage: test_devices CASE [PLUGIN_DIR]   (exit 0 pass, 1 fail) */
#define _POSIX_C_SOURCE 200809L
#include "core/mem.h"
#include "devices/device_internal.h"
#include "devices/opencl/opencl.h"
#include "devices/vnpu/vnpu.h"
#include "graph/graph.h"
#include "plan/desc.h"
#include "ops/op.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
static int checks;

#define CHECK(c)                                                                                         \
    do {                                                                                                 \
        checks++;                                                                                        \
        if (!(c)) {                                                                                      \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c);                        \
            failures++;                                                                                  \
        }                                                                                                \
    } while (0)

/* The sentence contains every fragment. */
#define CHECK_HAS(msg, ...)                                                                              \
    do {                                                                                                 \
        const char *frags_[] = {__VA_ARGS__, NULL};                                                      \
        for (int k_ = 0; frags_[k_]; k_++) {                                                             \
            checks++;                                                                                    \
            if (!strstr((msg), frags_[k_])) {                                                            \
                fprintf(stderr, "%s:%d: message lacks \"%s\": %s\n", __FILE__, __LINE__, frags_[k_], (msg)); \
                failures++;                                                                              \
            }                                                                                            \
        }                                                                                                \
    } while (0)

#define MUST(x)                                                                                          \
    do {                                                                                                 \
        tdm_status st_ = (x);                                                                            \
        if (st_) {                                                                                       \
            fprintf(stderr, "%s:%d: %s failed: %s %s\n", __FILE__, __LINE__, #x, tdm_status_str(st_),    \
                    err.msg);                                                                            \
            exit(1);                                                                                     \
        }                                                                                                \
    } while (0)

static tdm_err err;
static const char *plugin_dir = ".";

/* ---- hand-built node descriptions ---- */

typedef struct tnode {
    tdm_node_desc d;
    tdm_tensor_desc in[6], out[3];
    int64_t dims[9][TDM_MAX_RANK];
    tdm_attr_desc attrs[6];
    int64_t ints[6][8];
} tnode;

static void tn_init(tnode *t, const char *op, int64_t opset)
{
    memset(t, 0, sizeof *t);
    t->d.name = "n0";
    t->d.op_type = op;
    t->d.domain = "";
    t->d.opset = opset;
    t->d.inputs = t->in;
    t->d.outputs = t->out;
    t->d.attrs = t->attrs;
}

/* shape: "1x3x8x8", "" (scalar), "?" unknown dims as "1x?x8", "*" unknown rank */
static void set_shape(tdm_tensor_desc *d, int64_t *dims, const char *shape)
{
    d->dims = dims;
    if (strcmp(shape, "*") == 0) {
        d->rank = -1;
        return;
    }
    d->rank = 0;
    for (const char *s = shape; *s;) {
        if (*s == '?') {
            dims[d->rank++] = -1;
            s++;
        } else {
            char *end;
            dims[d->rank++] = strtoll(s, &end, 10);
            s = end;
        }
        if (*s == 'x')
            s++;
    }
}

static void tn_in(tnode *t, const char *name, tdm_dtype dt, const char *shape)
{
    int i = t->d.n_inputs++;
    t->in[i].name = name;
    t->in[i].dtype = dt;
    set_shape(&t->in[i], t->dims[i], shape);
}

static void tn_out(tnode *t, const char *name, tdm_dtype dt, const char *shape)
{
    int i = t->d.n_outputs++;
    t->out[i].name = name;
    t->out[i].dtype = dt;
    set_shape(&t->out[i], t->dims[6 + i], shape);
}

static void tn_int(tnode *t, const char *name, int64_t v)
{
    tdm_attr_desc *a = &t->attrs[t->d.n_attrs++];
    a->name = name;
    a->type = TDM_ATTR_INT;
    a->i = v;
}

static void tn_ints(tnode *t, const char *name, int n, int64_t v0, int64_t v1)
{
    int k = t->d.n_attrs++;
    tdm_attr_desc *a = &t->attrs[k];
    a->name = name;
    a->type = TDM_ATTR_INTS;
    a->n = (size_t)n;
    t->ints[k][0] = v0;
    t->ints[k][1] = v1;
    a->ints = t->ints[k];
}

static void tn_str(tnode *t, const char *name, const char *s)
{
    tdm_attr_desc *a = &t->attrs[t->d.n_attrs++];
    a->name = name;
    a->type = TDM_ATTR_STRING;
    a->s = s;
}

static tdm_reason ask(const dev_instance *d, const tnode *t, tdm_verdict *v)
{
    memset(v, 0, sizeof *v);
    tdm_reason r = d->dev.iface->supports(d->dev.ctx, &t->d, v);
    fprintf(stderr, "  %s %s: %s: %s\n", d->name, t->d.op_type, tdm_reason_str(r), v->detail);
    CHECK(r == v->reason);
    return r;
}

#define EXPECT(dev, t, want, ...)                                                                        \
    do {                                                                                                 \
        tdm_verdict v_;                                                                                  \
        tdm_reason r_ = ask((dev), (t), &v_);                                                            \
        checks++;                                                                                        \
        if (r_ != (want)) {                                                                              \
            fprintf(stderr, "%s:%d: verdict %s, expected %s\n", __FILE__, __LINE__, tdm_reason_str(r_),  \
                    tdm_reason_str(want));                                                               \
            failures++;                                                                                  \
        }                                                                                                \
        CHECK_HAS(v_.detail, __VA_ARGS__);                                                               \
    } while (0)

static void open_dev(const char *entry, dev_instance *d)
{
    err_clear(&err);
    MUST(dev_open(&err, entry, d));
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
    fputs(text, f);
    fclose(f);
}

/* ---- cases ---- */

static int t_reason_str(void)
{
    static const char *const want[TDM_REASON_COUNT] = {
        "OK", "OP_UNSUPPORTED", "DTYPE_UNSUPPORTED", "ATTR_UNSUPPORTED", "SHAPE_UNSUPPORTED", "MEMORY",
        "PRECISION", "COST", "GRANULARITY", "USER", "DEVICE_FAULT", "RESCUED"};
    for (int r = 0; r < TDM_REASON_COUNT; r++)
        CHECK(strcmp(tdm_reason_str((tdm_reason)r), want[r]) == 0);
    CHECK(strcmp(tdm_reason_str((tdm_reason)99), "UNKNOWN") == 0);
    CHECK(strcmp(dev_kind_str(DEV_KIND_VNPU), "vnpu") == 0);
    return 0;
}

static int t_profiles_shipped(void)
{
    const char *const *names = vnpu_shipped_profiles();
    int edge = 0, server = 0, all = 0;
    for (size_t i = 0; names[i]; i++) {
        dev_instance d;
        char entry[128];
        snprintf(entry, sizeof entry, "vnpu:%s", names[i]);
        open_dev(entry, &d);
        CHECK(strcmp(d.name, entry) == 0);
        CHECK(d.kind == DEV_KIND_VNPU && d.ext && d.ext->run_host);
        CHECK(d.dev.iface->api_version == TDM_DEVICE_API_VERSION);
        uint64_t cap = d.dev.iface->memory_capacity(d.dev.ctx);
        fprintf(stderr, "  %s: %s, %llu bytes\n", d.name, d.dev.iface->description(d.dev.ctx),
                (unsigned long long)cap);
        if (strcmp(names[i], "edge-npu") == 0) {
            edge = 1;
            CHECK(cap == 4194304);
            CHECK(d.ext->precision == TDM_FLOAT16);
        } else if (strcmp(names[i], "server-npu") == 0) {
            server = 1;
            CHECK(cap >= ((uint64_t)1 << 30));
            CHECK(d.ext->precision == TDM_FLOAT16);
        } else if (strcmp(names[i], "fp32-all") == 0) {
            all = 1;
            CHECK(d.ext->precision == TDM_FLOAT);
        }
        CHECK_HAS(d.dev.iface->description(d.dev.ctx), "modeled");
        dev_instance_close(&d);
    }
    CHECK(edge && server && all);
    /* an unknown profile name lists the shipped ones */
    dev_instance d;
    err_clear(&err);
    CHECK(dev_open(&err, "vnpu:edge-npv", &d) == TDM_E_DEVICE);
    CHECK_HAS(err.msg, "edge-npv", "edge-npu", "fp32-all", "server-npu", ".json");
    err_clear(&err);
    CHECK(dev_open(&err, "vnpu", &d) == TDM_E_DEVICE);
    CHECK_HAS(err.msg, "vnpu needs a profile");
    return 0;
}

/* A valid minimal profile with one field replaced: "%s" is where the
 * variable part goes (top-level fields, then the ops object). */
static const char *base_profile =
    "{\"name\": \"t\", \"precision\": \"fp16\", \"memory_bytes\": 1024, \"peak_tops\": 1,"
    " \"launch_overhead_us\": 1, \"memory_bandwidth_gbps\": 1, \"host_bandwidth_gbps\": 1,"
    " \"host_latency_us\": 1%s, \"ops\": %s}";

static void expect_bad(const char *top, const char *ops, const char *frag1, const char *frag2)
{
    char text[2048];
    snprintf(text, sizeof text, base_profile, top, ops);
    struct vnpu_ctx *c = NULL;
    err_clear(&err);
    tdm_status st = vnpu_parse(&err, "t.json", text, strlen(text), &c);
    checks++;
    if (st != TDM_E_DEVICE || c) {
        fprintf(stderr, "accepted or wrong status %s for: %s\n", tdm_status_str(st), text);
        failures++;
        vnpu_ctx_free(c);
        return;
    }
    fprintf(stderr, "  refused: %s\n", err.msg);
    CHECK_HAS(err.msg, "t.json: ", frag1, frag2);
}

static int t_profiles_bad(void)
{
    /* the valid base parses */
    char text[2048];
    snprintf(text, sizeof text, base_profile, "", "{\"Relu\": {}}");
    struct vnpu_ctx *c = NULL;
    err_clear(&err);
    MUST(vnpu_parse(&err, "t.json", text, strlen(text), &c));
    CHECK(c && c->memory_bytes == 1024 && c->peak_gflops == 1000.0);
    /* storage defaults to the precision; memory is counted at it */
    CHECK(c && c->storage == TDM_FLOAT16 && c->ext.storage == TDM_FLOAT16);
    vnpu_ctx_free(c);
    snprintf(text, sizeof text, base_profile, ", \"storage\": \"fp32\"", "{\"Relu\": {}}");
    c = NULL;
    MUST(vnpu_parse(&err, "t.json", text, strlen(text), &c));
    CHECK(c && c->precision == TDM_FLOAT16 && c->storage == TDM_FLOAT && c->ext.storage == TDM_FLOAT);
    if (c) {
        dev_instance di = {.ext = &c->ext};
        CHECK(dev_stored_bytes(&di, TDM_FLOAT, 400) == 400);
        c->ext.storage = TDM_FLOAT16;
        CHECK(dev_stored_bytes(&di, TDM_FLOAT, 400) == 200 && dev_stored_bytes(&di, TDM_DOUBLE, 800) == 200);
        CHECK(dev_stored_bytes(&di, TDM_INT8, 400) == 400 && dev_stored_bytes(&di, TDM_INT64, 400) == 400);
        CHECK(dev_stored_bytes(&di, TDM_FLOAT16, 400) == 400);
    }
    vnpu_ctx_free(c);

    /* the example from the issue, exactly */
    expect_bad("", "{\"Conv\": {\"max_rank\": \"x\"}}", "ops.Conv.max_rank must be a positive integer, got \"x\"",
               "");
    expect_bad("", "{\"Conv\": {\"max_rank\": 0}}", "ops.Conv.max_rank must be a positive integer, got 0", "");
    expect_bad("", "{\"Conv\": {\"max_rank\": 2.5}}", "ops.Conv.max_rank", "2.5");
    expect_bad("", "{\"Conv\": {\"max_rank\": 17}}", "ops.Conv.max_rank", "at most 16");
    expect_bad("", "{\"Conv\": {\"max_dim\": -3}}", "ops.Conv.max_dim must be a positive integer", "-3");
    expect_bad("", "{\"Conv\": {\"max_ranks\": 4}}", "ops.Conv.max_ranks is not a known field", "max_rank");
    expect_bad("", "{\"Sigmod\": {}}", "ops.Sigmod names an operator tandem does not know", "");
    expect_bad("", "{\"Relu\": 1}", "ops.Relu must be an object", "");
    expect_bad("", "{}", "ops must be a non-empty object", "");
    expect_bad("", "{\"Relu\": {}, \"Relu\": {}}", "ops.Relu is given twice", "");
    expect_bad("", "{\"Relu\": {\"dtypes\": [\"float\", \"flaot\"]}}", "ops.Relu.dtypes[1] must be an element type",
               "\"flaot\"");
    expect_bad("", "{\"Relu\": {\"dtypes\": []}}", "ops.Relu.dtypes must be", "[]");
    expect_bad("", "{\"Relu\": {\"opset_min\": 13, \"opset_max\": 11}}", "ops.Relu.opset_max must be at least", "11");
    expect_bad("", "{\"Conv\": {\"attrs\": {\"group\": {}}}}", "ops.Conv.attrs.group sets no limit", "");
    expect_bad("", "{\"Conv\": {\"attrs\": {\"group\": {\"one_of\": []}}}}", "ops.Conv.attrs.group.one_of must be",
               "");
    expect_bad("", "{\"Conv\": {\"attrs\": {\"group\": {\"one_of\": [true]}}}}",
               "ops.Conv.attrs.group.one_of[0] must be a number or a string", "true");
    expect_bad("", "{\"Conv\": {\"attrs\": {\"group\": {\"min\": 2, \"max\": 1}}}}", "ops.Conv.attrs.group.max",
               "at least min");
    expect_bad("", "{\"Conv\": {\"attrs\": {\"group\": {\"one_of\": [1], \"defualt\": 1}}}}",
               "ops.Conv.attrs.group.defualt is not a known field", "");
    expect_bad("", "{\"Conv\": {\"attrs\": {\"group\": {\"one_of\": [1], \"default\": \"$channels\"}}}}",
               "ops.Conv.attrs.group.default", "$channels");
    expect_bad("", "{\"*\": {\"attrs\": {\"group\": {\"one_of\": [1]}}}}", "ops.*.attrs is not allowed", "");
    expect_bad(", \"precison\": \"fp16\"", "{\"Relu\": {}}", "precison is not a known field", "precision");
    expect_bad(", \"precision\": \"fp8\"", "{\"Relu\": {}}", "given twice", "precision");
    expect_bad(", \"static_shapes\": \"yes\"", "{\"Relu\": {}}", "static_shapes must be true or false", "\"yes\"");
    expect_bad(", \"peak_gflops\": 5", "{\"Relu\": {}}", "peak_tops or peak_gflops, not both", "");
    expect_bad(", \"defaults\": {\"max_rank\": -1}", "{\"Relu\": {}}", "defaults.max_rank must be a positive integer",
               "");
    expect_bad(", \"defaults\": {\"rank\": 2}", "{\"Relu\": {}}", "defaults.rank is not a known field", "");
    expect_bad(", \"exclude\": [\"Relu\"]", "{\"Relu\": {}}", "exclude needs the \"*\" entry", "");
    expect_bad(", \"exclude\": [\"Reluu\"]", "{\"*\": {}}", "exclude[0] must be the name of an operator", "Reluu");
    expect_bad(", \"exclude\": [\"Relu\"]", "{\"*\": {}, \"Relu\": {}}", "exclude[0] (Relu) is also listed in ops", "");
    expect_bad(", \"description\": 5", "{\"Relu\": {}}", "description must be a string", "");
    expect_bad(", \"storage\": \"fp8\"", "{\"Relu\": {}}", "storage must be one of", "\"fp8\"");
    expect_bad(", \"storage\": \"bf16\"", "{\"Relu\": {}}", "storage must be \"fp32\" or the precision (\"fp16\")",
               "\"bf16\"");

    /* top-level fields: wrong type, out of range, missing */
    static const struct {
        const char *field, *bad, *frag;
    } fields[] = {
        {"name", "\"has space\"", "name must be a name"},
        {"precision", "\"fp64\"", "precision must be one of"},
        {"memory_bytes", "-1", "memory_bytes must be a positive integer, got -1"},
        {"memory_bytes", "\"4MiB\"", "memory_bytes must be a positive integer, got \"4MiB\""},
        {"peak_tops", "0", "peak_tops must be a positive number, got 0"},
        {"launch_overhead_us", "-5", "launch_overhead_us must be a number >= 0, got -5"},
        {"memory_bandwidth_gbps", "null", "memory_bandwidth_gbps must be a positive number, got null"},
        {"host_bandwidth_gbps", "[]", "host_bandwidth_gbps must be a positive number"},
        {"host_latency_us", "\"1\"", "host_latency_us must be a number >= 0"},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        /* replace the field's value in the base text */
        char t2[2048];
        snprintf(t2, sizeof t2, base_profile, "", "{\"Relu\": {}}");
        char key[64];
        snprintf(key, sizeof key, "\"%s\": ", fields[i].field);
        char *at = strstr(t2, key);
        CHECK(at != NULL);
        if (!at)
            continue;
        char *val = at + strlen(key);
        char *end = strpbrk(val, ",}");
        char out[2048];
        snprintf(out, sizeof out, "%.*s%s%s", (int)(val - t2), t2, fields[i].bad, end);
        c = NULL;
        err_clear(&err);
        CHECK(vnpu_parse(&err, "t.json", out, strlen(out), &c) == TDM_E_DEVICE && !c);
        fprintf(stderr, "  refused: %s\n", err.msg);
        CHECK_HAS(err.msg, "t.json: ", fields[i].frag);
        /* and missing */
        size_t klen = (size_t)(end - at) + (*end == ',' ? 1 : 0);
        snprintf(out, sizeof out, "%.*s%s", (int)(at - t2), t2, at + klen);
        c = NULL;
        err_clear(&err);
        tdm_status st = vnpu_parse(&err, "t.json", out, strlen(out), &c);
        if (strcmp(fields[i].field, "peak_tops") == 0) {
            CHECK(st == TDM_E_DEVICE);
            CHECK_HAS(err.msg, "peak_tops (or peak_gflops) is missing");
        } else {
            CHECK(st == TDM_E_DEVICE && !c);
            CHECK_HAS(err.msg, fields[i].field, "is missing");
        }
        vnpu_ctx_free(c);
    }

    /* not JSON, not an object */
    c = NULL;
    err_clear(&err);
    CHECK(vnpu_parse(&err, "t.json", "{\n  \"name\": \"t\",\n  oops\n}", 27, &c) == TDM_E_DEVICE);
    CHECK_HAS(err.msg, "t.json: not valid JSON (line 3");
    err_clear(&err);
    CHECK(vnpu_parse(&err, "t.json", "[1,2]", 5, &c) == TDM_E_DEVICE);
    CHECK_HAS(err.msg, "must be a JSON object");
    err_clear(&err);
    CHECK(vnpu_parse(&err, "t.json", "", 0, &c) == TDM_E_DEVICE);
    CHECK_HAS(err.msg, "not valid JSON");
    return 0;
}

static int t_profiles_path(void)
{
    const char *path = "devices-path-test.json";
    char text[2048];
    snprintf(text, sizeof text, base_profile, ", \"description\": \"from a file\"", "{\"Relu\": {}}");
    write_file(path, text);
    dev_instance d;
    char entry[256];
    snprintf(entry, sizeof entry, "vnpu:./%s", path);
    open_dev(entry, &d);
    CHECK(strcmp(d.name, "vnpu:t") == 0);
    CHECK_HAS(d.dev.iface->description(d.dev.ctx), "from a file");
    dev_instance_close(&d);
    /* a bare name ending in .json is a path too */
    snprintf(entry, sizeof entry, "vnpu:%s", path);
    open_dev(entry, &d);
    dev_instance_close(&d);
    remove(path);
    /* a bad field in a file names the file */
    snprintf(text, sizeof text, base_profile, "", "{\"Conv\": {\"max_rank\": \"x\"}}");
    write_file("edge-npu.json", text);
    err_clear(&err);
    CHECK(dev_open(&err, "vnpu:./edge-npu.json", &d) == TDM_E_DEVICE);
    CHECK_HAS(err.msg, "edge-npu.json: ops.Conv.max_rank must be a positive integer, got \"x\"");
    remove("edge-npu.json");
    err_clear(&err);
    CHECK(dev_open(&err, "vnpu:/nonexistent/p.json", &d) == TDM_E_IO);
    CHECK_HAS(err.msg, "vnpu profile '/nonexistent/p.json' does not exist");
    return 0;
}

static int t_supports_cpu(void)
{
    dev_instance cpu;
    open_dev("cpu", &cpu);
    tnode t;
    tn_init(&t, "Conv", 13);
    tn_in(&t, "x", TDM_FLOAT, "1x3x8x8");
    tn_in(&t, "w", TDM_FLOAT, "4x3x3x3");
    tn_out(&t, "y", TDM_FLOAT, "1x4x6x6");
    EXPECT(&cpu, &t, TDM_REASON_OK, "cpu");
    t.in[0].dtype = TDM_INT64;
    EXPECT(&cpu, &t, TDM_REASON_DTYPE_UNSUPPORTED, "cpu has no int64 kernel for Conv", "'x'");
    tn_init(&t, "FancyOp", 13);
    tn_in(&t, "x", TDM_FLOAT, "4");
    EXPECT(&cpu, &t, TDM_REASON_OP_UNSUPPORTED, "cpu has no kernel for FancyOp");
    tn_init(&t, "Relu", 99);
    tn_in(&t, "x", TDM_FLOAT, "4");
    EXPECT(&cpu, &t, TDM_REASON_OP_UNSUPPORTED, "opset 99");
    /* unknown shapes, any rank: fine on cpu */
    tn_init(&t, "Relu", 14);
    tn_in(&t, "x", TDM_FLOAT, "*");
    tn_out(&t, "y", TDM_FLOAT, "*");
    EXPECT(&cpu, &t, TDM_REASON_OK, "cpu");
    CHECK(cpu.dev.iface->memory_capacity(NULL) == UINT64_MAX);
    /* public run() is not the cpu's path */
    char msg[256] = "";
    CHECK(cpu.dev.iface->run(NULL, &t.d, NULL, NULL, msg, sizeof msg) == TDM_E_UNSUPPORTED);
    CHECK_HAS(msg, "run_host");
    void *b = NULL;
    CHECK(cpu.dev.iface->buffer_alloc(NULL, 100, &b) == TDM_OK && b);
    cpu.dev.iface->buffer_free(NULL, b);
    dev_instance_close(&cpu);
    return 0;
}

static void conv_node(tnode *t, const char *x_shape, int64_t w0, int64_t w1)
{
    tn_init(t, "Conv", 13);
    tn_in(t, "x", TDM_FLOAT, x_shape);
    char ws[64];
    snprintf(ws, sizeof ws, "%lldx%lldx3x3", (long long)w0, (long long)w1);
    tn_in(t, "w", TDM_FLOAT, ws);
    tn_out(t, "y", TDM_FLOAT, "1x8x6x6");
}

static int t_supports_vnpu(void)
{
    dev_instance edge, server, all;
    open_dev("vnpu:edge-npu", &edge);
    open_dev("vnpu:server-npu", &server);
    open_dev("vnpu:fp32-all", &all);
    tnode t;

    /* Conv: plain OK; dilated; grouped; depthwise */
    conv_node(&t, "1x8x8x8", 8, 8);
    EXPECT(&edge, &t, TDM_REASON_OK, "edge-npu runs Conv");
    tn_ints(&t, "dilations", 2, 1, 1);
    EXPECT(&edge, &t, TDM_REASON_OK, "edge-npu");
    t.ints[0][0] = 2;
    t.ints[0][1] = 2;
    EXPECT(&edge, &t, TDM_REASON_ATTR_UNSUPPORTED, "edge-npu runs Conv only with dilations in {1}; this node has [2, 2]");
    EXPECT(&server, &t, TDM_REASON_OK, "server-npu");
    conv_node(&t, "1x8x8x8", 8, 4);
    tn_int(&t, "group", 2);
    EXPECT(&edge, &t, TDM_REASON_ATTR_UNSUPPORTED, "group", "input channel count (8)", "this node has 2");
    conv_node(&t, "1x8x8x8", 8, 1);
    tn_int(&t, "group", 8);
    EXPECT(&edge, &t, TDM_REASON_OK, "edge-npu");

    /* op lists */
    tn_init(&t, "LayerNormalization", 17);
    tn_in(&t, "x", TDM_FLOAT, "1x4x8");
    tn_in(&t, "scale", TDM_FLOAT, "8");
    tn_out(&t, "y", TDM_FLOAT, "1x4x8");
    EXPECT(&edge, &t, TDM_REASON_OP_UNSUPPORTED, "edge-npu has no LayerNormalization kernel");
    EXPECT(&server, &t, TDM_REASON_OP_UNSUPPORTED, "server-npu has no LayerNormalization kernel");
    EXPECT(&all, &t, TDM_REASON_OK, "fp32-all");
    static const char *const server_lacks[] = {"Erf", "TopK", "ScatterND", "NonZero"};
    for (size_t i = 0; i < 4; i++) {
        tn_init(&t, server_lacks[i], 13);
        tn_in(&t, "x", TDM_FLOAT, "4");
        tn_out(&t, "y", TDM_FLOAT, "4");
        EXPECT(&server, &t, TDM_REASON_OP_UNSUPPORTED, "server-npu has no", server_lacks[i]);
        EXPECT(&edge, &t, TDM_REASON_OP_UNSUPPORTED, "edge-npu has no", server_lacks[i]);
        EXPECT(&all, &t, TDM_REASON_OK, "fp32-all");
    }
    tn_init(&t, "NoSuchOp", 13);
    EXPECT(&all, &t, TDM_REASON_OP_UNSUPPORTED, "fp32-all has no NoSuchOp kernel");

    /* dtypes */
    tn_init(&t, "Add", 14);
    tn_in(&t, "a", TDM_DOUBLE, "2x3");
    tn_in(&t, "b", TDM_DOUBLE, "2x3");
    tn_out(&t, "c", TDM_DOUBLE, "2x3");
    EXPECT(&edge, &t, TDM_REASON_DTYPE_UNSUPPORTED, "edge-npu has no double kernel for Add", "input 'a'");
    EXPECT(&server, &t, TDM_REASON_DTYPE_UNSUPPORTED, "server-npu has no double kernel for Add");
    EXPECT(&all, &t, TDM_REASON_OK, "fp32-all");
    t.in[0].dtype = t.in[1].dtype = t.out[0].dtype = TDM_INT32;
    EXPECT(&edge, &t, TDM_REASON_DTYPE_UNSUPPORTED, "int32");
    EXPECT(&server, &t, TDM_REASON_OK, "server-npu");
    /* a float output of an op whose input 0 is allowed */
    t.in[0].dtype = t.in[1].dtype = TDM_FLOAT;
    t.out[0].dtype = TDM_DOUBLE;
    EXPECT(&edge, &t, TDM_REASON_DTYPE_UNSUPPORTED, "output 'c'");
    /* integer secondary inputs (shapes) are not data: Reshape is fine */
    tn_init(&t, "Reshape", 14);
    tn_in(&t, "x", TDM_FLOAT, "2x3");
    tn_in(&t, "shape", TDM_INT64, "1");
    tn_out(&t, "y", TDM_FLOAT, "6");
    EXPECT(&edge, &t, TDM_REASON_OK, "edge-npu");
    /* the kernel's own mask: Conv on int8 even where the profile allows int8 */
    conv_node(&t, "1x8x8x8", 8, 8);
    t.in[0].dtype = t.in[1].dtype = t.out[0].dtype = TDM_INT8;
    EXPECT(&server, &t, TDM_REASON_DTYPE_UNSUPPORTED, "int8", "tandem's kernels");

    /* shapes */
    conv_node(&t, "?x8x8x8", 8, 8);
    EXPECT(&edge, &t, TDM_REASON_SHAPE_UNSUPPORTED, "edge-npu takes static shapes only", "?x8x8x8");
    EXPECT(&server, &t, TDM_REASON_OK, "server-npu");
    tn_init(&t, "Relu", 14);
    tn_in(&t, "x", TDM_FLOAT, "*");
    tn_out(&t, "y", TDM_FLOAT, "*");
    EXPECT(&edge, &t, TDM_REASON_SHAPE_UNSUPPORTED, "static shapes only", "rank");
    tn_init(&t, "Transpose", 13);
    tn_in(&t, "x", TDM_FLOAT, "1x2x3x4x5x6");
    tn_out(&t, "y", TDM_FLOAT, "6x5x4x3x2x1");
    EXPECT(&edge, &t, TDM_REASON_SHAPE_UNSUPPORTED, "edge-npu runs Transpose up to rank 5", "rank 6");
    EXPECT(&server, &t, TDM_REASON_OK, "server-npu");
    tn_init(&t, "Relu", 14);
    tn_in(&t, "x", TDM_FLOAT, "1x40000");
    tn_out(&t, "y", TDM_FLOAT, "1x40000");
    EXPECT(&edge, &t, TDM_REASON_SHAPE_UNSUPPORTED, "dimensions up to 32768", "dimension 1 of input 'x' is 40000");

    /* Resize: nearest only; the absent mode is the default (nearest) */
    tn_init(&t, "Resize", 13);
    tn_in(&t, "x", TDM_FLOAT, "1x3x8x8");
    tn_in(&t, "roi", TDM_UNDEFINED, "");
    t.in[1].name = "";
    tn_in(&t, "scales", TDM_FLOAT, "4");
    tn_out(&t, "y", TDM_FLOAT, "1x3x16x16");
    EXPECT(&edge, &t, TDM_REASON_OK, "edge-npu");
    tn_str(&t, "mode", "linear");
    EXPECT(&edge, &t, TDM_REASON_ATTR_UNSUPPORTED, "edge-npu runs Resize only with mode in {\"nearest\"}",
           "\"linear\"");
    EXPECT(&server, &t, TDM_REASON_OK, "server-npu");

    /* opset range (a profile of our own) */
    char text[2048];
    snprintf(text, sizeof text, base_profile, "",
             "{\"Relu\": {\"opset_min\": 13, \"opset_max\": 14},"
             " \"Resize\": {\"attrs\": {\"mode\": {\"one_of\": [\"linear\"], \"default\": \"nearest\"}}},"
             " \"Clip\": {\"attrs\": {\"min\": {\"min\": -10, \"max\": 0}}}}");
    write_file("devices-opset.json", text);
    dev_instance own;
    open_dev("vnpu:devices-opset.json", &own);
    remove("devices-opset.json");
    tn_init(&t, "Relu", 6);
    tn_in(&t, "x", TDM_FLOAT, "4");
    tn_out(&t, "y", TDM_FLOAT, "4");
    EXPECT(&own, &t, TDM_REASON_OP_UNSUPPORTED, "t runs Relu from opset 13; the model uses opset 6");
    t.d.opset = 16;
    EXPECT(&own, &t, TDM_REASON_OP_UNSUPPORTED, "up to opset 14");
    t.d.opset = 14;
    EXPECT(&own, &t, TDM_REASON_OK, "t runs Relu");
    tn_init(&t, "Resize", 13);
    tn_in(&t, "x", TDM_FLOAT, "1x3x8x8");
    tn_out(&t, "y", TDM_FLOAT, "1x3x16x16");
    EXPECT(&own, &t, TDM_REASON_ATTR_UNSUPPORTED, "mode", "(the default)");
    tn_init(&t, "Clip", 6);
    tn_in(&t, "x", TDM_FLOAT, "4");
    tn_out(&t, "y", TDM_FLOAT, "4");
    t.attrs[0].name = "min";
    t.attrs[0].type = TDM_ATTR_FLOAT;
    t.attrs[0].f = -20.0f;
    t.d.n_attrs = 1;
    EXPECT(&own, &t, TDM_REASON_ATTR_UNSUPPORTED, "min in [-10, 0]", "-20");
    t.attrs[0].f = -5.0f;
    EXPECT(&own, &t, TDM_REASON_OK, "t runs Clip");
    dev_instance_close(&own);

    dev_instance_close(&edge);
    dev_instance_close(&server);
    dev_instance_close(&all);
    return 0;
}

static int t_memory(void)
{
    dev_instance edge;
    open_dev("vnpu:edge-npu", &edge);
    const tdm_device_iface *f = edge.dev.iface;
    void *a = NULL, *b = NULL, *c = NULL;
    CHECK(f->buffer_alloc(edge.dev.ctx, 3 << 20, &a) == TDM_OK && a);
    memset(a, 0x5a, 3 << 20); /* really usable */
    CHECK(f->buffer_alloc(edge.dev.ctx, 2 << 20, &b) == TDM_E_DEVICE && !b);
    CHECK(f->buffer_alloc(edge.dev.ctx, 1 << 20, &c) == TDM_OK && c);
    CHECK(f->buffer_alloc(edge.dev.ctx, 1, &b) == TDM_E_DEVICE);
    f->buffer_free(edge.dev.ctx, a);
    f->buffer_free(edge.dev.ctx, c);
    /* all free again: the whole capacity fits, one byte more does not */
    CHECK(f->buffer_alloc(edge.dev.ctx, 4194304, &a) == TDM_OK);
    f->buffer_free(edge.dev.ctx, a);
    CHECK(f->buffer_alloc(edge.dev.ctx, 4194305, &a) == TDM_E_DEVICE);
    /* the accounting of host-resident tensors, with its sentence */
    err_clear(&err);
    CHECK(edge.ext->reserve(edge.dev.ctx, 5242880, &err) == TDM_E_DEVICE);
    CHECK_HAS(err.msg, "vnpu:edge-npu is out of memory: 5242880 bytes requested, 4194304 free");
    CHECK(edge.ext->reserve(edge.dev.ctx, 1 << 20, &err) == TDM_OK);
    err_clear(&err);
    CHECK(edge.ext->reserve(edge.dev.ctx, 5242880, &err) == TDM_E_DEVICE);
    CHECK_HAS(err.msg, "5242880 bytes requested, 3145728 free");
    CHECK(f->buffer_alloc(edge.dev.ctx, 3 << 20, &a) == TDM_OK);
    CHECK(f->buffer_alloc(edge.dev.ctx, 1, &b) == TDM_E_DEVICE);
    edge.ext->release(edge.dev.ctx, 1 << 20);
    f->buffer_free(edge.dev.ctx, a);
    CHECK(edge.ext->reserve(edge.dev.ctx, 4194304, &err) == TDM_OK);
    edge.ext->release(edge.dev.ctx, 4194304);
    /* copies */
    float src[4] = {1, 2, 3, 4}, dst[4] = {0};
    CHECK(f->buffer_alloc(edge.dev.ctx, sizeof src, &a) == TDM_OK);
    CHECK(f->copy_to_device(edge.dev.ctx, a, src, sizeof src) == TDM_OK);
    CHECK(f->copy_to_host(edge.dev.ctx, dst, a, sizeof dst) == TDM_OK);
    CHECK(memcmp(src, dst, sizeof src) == 0);
    f->buffer_free(edge.dev.ctx, a);
    /* capacity reported */
    CHECK(f->memory_capacity(edge.dev.ctx) == 4194304);
    dev_instance_close(&edge);
    return 0;
}

/* ---- numerics: real nodes through run_host ---- */

static uint64_t rng_state = 12345;
static float frand(void)
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((rng_state >> 40) & 0xffffff) / (float)0x1000000 * 2.0f - 1.0f;
}

typedef struct onenode {
    gr_model *m;
    const gr_node *n;
} onenode;

static void build(onenode *o, const char *op, int n_in, const char *const *ins, int64_t opset)
{
    MUST(gr_model_new(&err, &o->m));
    o->m->opsets = mem_calloc(1, sizeof *o->m->opsets);
    o->m->opsets[0].domain = mem_strdup("");
    o->m->opsets[0].version = opset;
    o->m->n_opsets = 1;
    MUST(gr_graph_new(&err, o->m, NULL, "main", &o->m->main));
    const char *outs[] = {"y"};
    int idx;
    MUST(gr_node_add(&err, o->m->main, "node", op, "", n_in, ins, 1, outs, &idx));
    if (strcmp(op, "Conv") == 0) {
        gr_attr *a = gr_attr_add(&err, o->m->main, idx, "pads");
        a->type = GA_INTS;
        a->n = 4;
        a->ints = mem_calloc(4, sizeof *a->ints);
        for (int k = 0; k < 4; k++)
            a->ints[k] = 1;
    }
    MUST(gr_finalize(&err, o->m));
    o->n = &o->m->main->nodes[idx];
    CHECK(o->n->op >= 0);
}

static tdm_tensor *rand_tensor(tdm_dtype dt, int rank, const int64_t *dims, float scale)
{
    tdm_tensor *t;
    MUST(tensor_new(&err, dt, rank, dims, &t));
    for (size_t i = 0; i < t->count; i++) {
        float v = frand() * scale;
        if (dt == TDM_FLOAT)
            ((float *)t->data)[i] = v;
        else
            tensor_set_f64(t, i, dt == TDM_INT32 ? (double)(int)(v * 100) : (double)v);
    }
    return t;
}

static tdm_tensor *run_dev(const dev_instance *d, const onenode *o, int n_in, const tdm_tensor *const *in)
{
    tdm_tensor *out[1];
    out[0] = mem_calloc(1, sizeof(tdm_tensor));
    uint64_t rng = 1;
    op_ctx ctx = {o->n, o->n->version, n_in, in, 1, out, &err, NULL, 1, &rng, NULL, 0};
    err_clear(&err);
    MUST(d->ext->run_host(d->dev.ctx, &ctx));
    CHECK(ctx.in == in); /* the device restored the caller's inputs */
    return out[0];
}

static float round_to(float x, tdm_dtype p)
{
    return p == TDM_FLOAT16 ? fp16_to_f32(f32_to_fp16(x)) : p == TDM_BFLOAT16 ? bf16_to_f32(f32_to_bf16(x)) : x;
}

/* cpu(round(x)): node o on dev with the float inputs rounded to p. */
static tdm_tensor *run_rounded(const dev_instance *dev, const onenode *o, int n_in, tdm_tensor **in, tdm_dtype p)
{
    tdm_tensor *rin[16];
    for (int i = 0; i < n_in; i++) {
        MUST(tensor_clone(&err, in[i], &rin[i]));
        if (rin[i]->dtype == TDM_FLOAT)
            for (size_t k = 0; k < rin[i]->count; k++)
                ((float *)rin[i]->data)[k] = round_to(((float *)rin[i]->data)[k], p);
    }
    tdm_tensor *y = run_dev(dev, o, n_in, (const tdm_tensor *const *)rin);
    for (int i = 0; i < n_in; i++)
        tdm_tensor_destroy(rin[i]);
    return y;
}

/* vnpu(x) == round(cpu(round(x))) bit for bit, differs from cpu(x), and
 * stays within the precision's relative error. */
static void check_rounded(const dev_instance *npu, const dev_instance *cpu, const onenode *o, int n_in,
                          tdm_tensor **in, double tol)
{
    tdm_dtype p = npu->ext->precision;
    tdm_tensor *y_npu = run_dev(npu, o, n_in, (const tdm_tensor *const *)in);
    tdm_tensor *y_ref = run_rounded(cpu, o, n_in, in, p);
    tdm_tensor *y_cpu = run_dev(cpu, o, n_in, (const tdm_tensor *const *)in);
    CHECK(y_npu->count == y_ref->count && y_npu->count > 0);
    size_t same = 0, differs = 0;
    double max_err = 0, max_ref = 0, max_rel;
    for (size_t k = 0; k < y_npu->count && k < y_ref->count; k++) {
        float a = ((float *)y_npu->data)[k];
        float want = round_to(((float *)y_ref->data)[k], p);
        float exact = ((float *)y_cpu->data)[k];
        same += memcmp(&a, &want, sizeof a) == 0;
        differs += a != exact;
        if (fabs((double)a - exact) > max_err)
            max_err = fabs((double)a - exact);
        if (fabs((double)exact) > max_ref)
            max_ref = fabs((double)exact);
    }
    max_rel = max_err / (max_ref > 0 ? max_ref : 1); /* normalised: error over the output's scale */
    fprintf(stderr, "  %s %s: %zu/%zu equal round(cpu(round(x))), %zu differ from cpu(x), max normalised err %.3g\n",
            npu->name, o->n->op_type, same, y_npu->count, differs, max_rel);
    CHECK(same == y_npu->count);
    CHECK(differs > 0);
    CHECK(max_rel < tol);
    tdm_tensor_destroy(y_npu);
    tdm_tensor_destroy(y_ref);
    tdm_tensor_destroy(y_cpu);
}

static void numerics_for(const char *entry, double tol)
{
    dev_instance npu, cpu;
    open_dev(entry, &npu);
    open_dev("cpu", &cpu);
    onenode conv, add;
    const char *cin[] = {"x", "w", "b"};
    build(&conv, "Conv", 3, cin, 13);
    int64_t xd[] = {1, 4, 9, 9}, wd[] = {8, 4, 3, 3}, bd[] = {8};
    tdm_tensor *in[3] = {rand_tensor(TDM_FLOAT, 4, xd, 3.0f), rand_tensor(TDM_FLOAT, 4, wd, 0.5f),
                         rand_tensor(TDM_FLOAT, 1, bd, 1.0f)};
    tdm_tensor *keep;
    MUST(tensor_clone(&err, in[0], &keep));
    check_rounded(&npu, &cpu, &conv, 3, in, tol);
    CHECK(memcmp(keep->data, in[0]->data, keep->nbytes) == 0);
    tdm_tensor_destroy(keep);
    for (int i = 0; i < 3; i++)
        tdm_tensor_destroy(in[i]);

    const char *ain[] = {"a", "b"};
    build(&add, "Add", 2, ain, 14);
    int64_t ad[] = {2, 3, 50};
    tdm_tensor *ai[2] = {rand_tensor(TDM_FLOAT, 3, ad, 10.0f), rand_tensor(TDM_FLOAT, 3, ad, 10.0f)};
    check_rounded(&npu, &cpu, &add, 2, ai, tol);
    tdm_tensor_destroy(ai[0]);
    tdm_tensor_destroy(ai[1]);

    /* integers pass unchanged */
    tdm_tensor *ii[2] = {rand_tensor(TDM_INT32, 3, ad, 10.0f), rand_tensor(TDM_INT32, 3, ad, 10.0f)};
    tdm_tensor *yn = run_dev(&npu, &add, 2, (const tdm_tensor *const *)ii);
    tdm_tensor *yc = run_dev(&cpu, &add, 2, (const tdm_tensor *const *)ii);
    CHECK(yn->dtype == TDM_INT32 && yn->nbytes == yc->nbytes && memcmp(yn->data, yc->data, yn->nbytes) == 0);
    tdm_tensor_destroy(yn);
    tdm_tensor_destroy(yc);
    tdm_tensor_destroy(ii[0]);
    tdm_tensor_destroy(ii[1]);

    gr_model_free(conv.m);
    gr_model_free(add.m);
    dev_instance_close(&npu);
    dev_instance_close(&cpu);
}

static int t_numerics_fp16(void)
{
    numerics_for("vnpu:edge-npu", 3e-3);
    numerics_for("vnpu:server-npu", 3e-3);
    return 0;
}

static int t_numerics_bf16(void)
{
    char text[2048];
    snprintf(text, sizeof text,
             "{\"name\": \"bf\", \"precision\": \"bf16\", \"memory_bytes\": 1048576, \"peak_tops\": 1,"
             " \"launch_overhead_us\": 1, \"memory_bandwidth_gbps\": 1, \"host_bandwidth_gbps\": 1,"
             " \"host_latency_us\": 1, \"ops\": {\"Conv\": {}, \"Add\": {}}}");
    write_file("devices-bf16.json", text);
    numerics_for("vnpu:devices-bf16.json", 3e-2);
    remove("devices-bf16.json");
    return 0;
}

/* Float inputs with the edge values: zeros of both signs, float and fp16
 * subnormals, ties at fp16 and bf16, the largest fp16 and past it,
 * infinities, a quiet and a signalling NaN; the rest random. */
static tdm_tensor *edge_tensor(int rank, const int64_t *dims, float scale)
{
    static const uint32_t edges[] = {0x00000000, 0x80000000, 0x00000001, 0x807fffff, 0x33800000, 0x33000000,
                                     0x387fc000, 0x3f801000, 0x3f803000, 0x3f808000, 0x3f818000, 0x477fe000,
                                     0x477ff000, 0xc77ff000, 0x7f7fffff, 0x7f800000, 0xff800000, 0x7fc00000,
                                     0x7f800001, 0xffa00001};
    tdm_tensor *t = rand_tensor(TDM_FLOAT, rank, dims, scale);
    for (size_t k = 0; k < sizeof edges / sizeof edges[0] && k * 3 < t->count; k++)
        memcpy((float *)t->data + k * 3, &edges[k], sizeof(float));
    return t;
}

/* vnpu(x) == round(cpu(round(x))) bit for bit, and its float output is
 * marked held at the precision; returns the vnpu's output. */
static tdm_tensor *check_exact(const dev_instance *npu, const dev_instance *cpu, const onenode *o, int n_in,
                               tdm_tensor **in)
{
    tdm_dtype p = npu->ext->precision;
    tdm_tensor *y_npu = run_dev(npu, o, n_in, (const tdm_tensor *const *)in);
    tdm_tensor *y_ref = run_rounded(cpu, o, n_in, in, p);
    size_t same = 0;
    CHECK(y_npu->count == y_ref->count && y_npu->count > 0 && y_npu->dtype == TDM_FLOAT);
    for (size_t k = 0; k < y_npu->count && k < y_ref->count; k++) {
        float a = ((float *)y_npu->data)[k], want = round_to(((float *)y_ref->data)[k], p);
        same += memcmp(&a, &want, sizeof a) == 0;
    }
    if (same != y_npu->count)
        fprintf(stderr, "  %s %s: %zu/%zu equal round(cpu(round(x)))\n", npu->name, o->n->op_type, same,
                y_npu->count);
    CHECK(same == y_npu->count);
    CHECK(y_npu->held == p);
    CHECK(y_ref->held == TDM_UNDEFINED); /* the cpu marks nothing */
    tdm_tensor_destroy(y_ref);
    return y_npu;
}

/* The held mark (tdm_tensor.held): the ops whose output rounding the vnpu
 * skips (they only move, select or compare their inputs) give
 * round(cpu(round(x))) bit for bit on the edge values; every float output
 * is marked; a marked input is taken as it is (a chain of two nodes
 * equals the chain of references); an unmarked one is rounded; nodes of
 * 11 inputs (their input lists allocated) too. */
static void held_for(const char *entry)
{
    dev_instance npu, cpu;
    open_dev(entry, &npu);
    open_dev("cpu", &cpu);
    tdm_dtype p = npu.ext->precision;
    static const char *const unary[] = {"Relu", "Identity", "Transpose", "Flatten", "ReduceMax", "ReduceMin",
                                        "Sigmoid", NULL};
    static const char *const binary[] = {"Max", "Min", "Add", NULL};
    int64_t d[] = {2, 3, 41};
    const char *xin[] = {"x", "y"};
    for (int u = 0; unary[u]; u++) {
        onenode o;
        build(&o, unary[u], 1, xin, 13);
        tdm_tensor *x = edge_tensor(3, d, 70000.0f);
        tdm_tensor_destroy(check_exact(&npu, &cpu, &o, 1, &x));
        tdm_tensor_destroy(x);
        gr_model_free(o.m);
    }
    for (int b = 0; binary[b]; b++) {
        onenode o;
        build(&o, binary[b], 2, xin, 13);
        tdm_tensor *x[2] = {edge_tensor(3, d, 70000.0f), rand_tensor(TDM_FLOAT, 3, d, 3.0f)};
        tdm_tensor_destroy(check_exact(&npu, &cpu, &o, 2, x));
        tdm_tensor_destroy(x[0]);
        tdm_tensor_destroy(x[1]);
        gr_model_free(o.m);
    }

    /* more inputs than the device keeps without an allocation (Sum and Max of 11) */
    static const char *const many[] = {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k"};
    for (int v = 0; v < 2; v++) {
        onenode o;
        build(&o, v ? "Max" : "Sum", 11, many, 13);
        tdm_tensor *x11[11];
        for (int i = 0; i < 11; i++)
            x11[i] = i % 2 ? edge_tensor(3, d, 300.0f) : rand_tensor(TDM_FLOAT, 3, d, 3.0f);
        tdm_tensor_destroy(check_exact(&npu, &cpu, &o, 11, x11));
        for (int i = 0; i < 11; i++)
            tdm_tensor_destroy(x11[i]);
        gr_model_free(o.m);
    }

    /* a chain: Add's marked output into Sigmoid equals the references' chain */
    onenode add, sig;
    build(&add, "Add", 2, xin, 13);
    build(&sig, "Sigmoid", 1, xin, 13);
    tdm_tensor *x[2] = {edge_tensor(3, d, 8.0f), rand_tensor(TDM_FLOAT, 3, d, 3.0f)};
    tdm_tensor *h = check_exact(&npu, &cpu, &add, 2, x);
    tdm_tensor *y = check_exact(&npu, &cpu, &sig, 1, &h);
    tdm_tensor *ref = run_dev(&cpu, &sig, 1, (const tdm_tensor *const *)&h);
    size_t same = 0;
    for (size_t k = 0; k < y->count; k++) {
        float want = round_to(((float *)ref->data)[k], p);
        same += memcmp((float *)y->data + k, &want, sizeof want) == 0;
    }
    CHECK(same == y->count);
    tdm_tensor_destroy(y);
    tdm_tensor_destroy(ref);

    /* the mark is what decides: an unrounded input marked held is used as it is (Identity copies it) ... */
    onenode id;
    build(&id, "Identity", 1, xin, 13);
    tdm_tensor *raw = rand_tensor(TDM_FLOAT, 3, d, 3.0f);
    raw->held = p;
    tdm_tensor *out = run_dev(&npu, &id, 1, (const tdm_tensor *const *)&raw);
    CHECK(out->nbytes == raw->nbytes && memcmp(out->data, raw->data, raw->nbytes) == 0);
    tdm_tensor_destroy(out);
    /* ... and without the mark it is rounded */
    raw->held = TDM_UNDEFINED;
    out = run_dev(&npu, &id, 1, (const tdm_tensor *const *)&raw);
    size_t rounded = 0, changed = 0;
    for (size_t k = 0; k < out->count; k++) {
        float v = ((float *)raw->data)[k], want = round_to(v, p);
        rounded += memcmp((float *)out->data + k, &want, sizeof want) == 0;
        changed += want != v;
    }
    CHECK(rounded == out->count && changed > 0);
    CHECK(out->held == p);
    tdm_tensor_destroy(out);
    tdm_tensor_destroy(raw);

    tdm_tensor_destroy(h);
    tdm_tensor_destroy(x[0]);
    tdm_tensor_destroy(x[1]);
    gr_model_free(add.m);
    gr_model_free(sig.m);
    gr_model_free(id.m);
    dev_instance_close(&npu);
    dev_instance_close(&cpu);
}

static int t_numerics_held(void)
{
    held_for("vnpu:edge-npu");
    write_file("devices-held-bf16.json",
               "{\"name\": \"bf\", \"precision\": \"bf16\", \"memory_bytes\": 1048576, \"peak_tops\": 1,"
               " \"launch_overhead_us\": 1, \"memory_bandwidth_gbps\": 1, \"host_bandwidth_gbps\": 1,"
               " \"host_latency_us\": 1, \"ops\": {\"Add\": {}}}");
    held_for("vnpu:devices-held-bf16.json");
    remove("devices-held-bf16.json");
    return 0;
}

static int t_numerics_fp32(void)
{
    dev_instance all, cpu;
    open_dev("vnpu:fp32-all", &all);
    open_dev("cpu", &cpu);
    onenode conv;
    const char *cin[] = {"x", "w", "b"};
    build(&conv, "Conv", 3, cin, 13);
    int64_t xd[] = {1, 4, 9, 9}, wd[] = {8, 4, 3, 3}, bd[] = {8};
    tdm_tensor *in[3] = {rand_tensor(TDM_FLOAT, 4, xd, 3.0f), rand_tensor(TDM_FLOAT, 4, wd, 0.5f),
                         rand_tensor(TDM_FLOAT, 1, bd, 1.0f)};
    tdm_tensor *a = run_dev(&all, &conv, 3, (const tdm_tensor *const *)in);
    tdm_tensor *b = run_dev(&cpu, &conv, 3, (const tdm_tensor *const *)in);
    CHECK(a->nbytes == b->nbytes && a->nbytes == 8 * 9 * 9 * sizeof(float));
    CHECK(memcmp(a->data, b->data, a->nbytes) == 0);
    /* and fp16 rounding would have changed it: the comparison has teeth */
    size_t changed = 0;
    for (size_t k = 0; k < a->count; k++)
        changed += round_to(((float *)a->data)[k], TDM_FLOAT16) != ((float *)a->data)[k];
    CHECK(changed > 0);
    tdm_tensor_destroy(a);
    tdm_tensor_destroy(b);
    for (int i = 0; i < 3; i++)
        tdm_tensor_destroy(in[i]);
    gr_model_free(conv.m);
    dev_instance_close(&all);
    dev_instance_close(&cpu);
    return 0;
}

static int t_estimate(void)
{
    dev_instance edge, cpu;
    open_dev("vnpu:edge-npu", &edge);
    open_dev("cpu", &cpu);
    tnode t;
    /* Conv 1x8x8x8 → 1x8x6x6 with 8x8x3x3 weights: 2 * 288 * 72 FLOPs */
    conv_node(&t, "1x8x8x8", 8, 8);
    CHECK(dev_node_flops(&t.d) == 2.0 * 288 * 72);
    CHECK(dev_node_bytes(&t.d) == (512.0 + 576 + 288) * 4);
    int modeled = 0;
    double ms = edge.dev.iface->estimate_ms(edge.dev.ctx, &t.d, &modeled);
    double want = 2.0 * 288 * 72 / 2e9 + 10e-3 + (512.0 + 576 + 288) * 4 / 25e6;
    fprintf(stderr, "  Conv on edge-npu: %.6f ms (modeled %d), expected %.6f\n", ms, modeled, want);
    CHECK(modeled == 1);
    CHECK(fabs(ms - want) < 1e-9);
    modeled = 0;
    double cms = edge.dev.iface->copy_ms(edge.dev.ctx, 2000000, 1, &modeled);
    CHECK(modeled == 1 && fabs(cms - (0.020 + 1.0)) < 1e-9); /* 20 µs + 2 MB at 2 GB/s */
    CHECK(cpu.dev.iface->estimate_ms(NULL, &t.d, &modeled) > 0 && modeled == 1);
    /* Gemm with transA, MatMul batched */
    tn_init(&t, "Gemm", 13);
    tn_in(&t, "a", TDM_FLOAT, "64x32");
    tn_in(&t, "b", TDM_FLOAT, "64x16");
    tn_out(&t, "y", TDM_FLOAT, "32x16");
    tn_int(&t, "transA", 1);
    CHECK(dev_node_flops(&t.d) == 2.0 * 32 * 16 * 64);
    tn_init(&t, "MatMul", 13);
    tn_in(&t, "a", TDM_FLOAT, "4x8x16");
    tn_in(&t, "b", TDM_FLOAT, "16x5");
    tn_out(&t, "y", TDM_FLOAT, "4x8x5");
    CHECK(dev_node_flops(&t.d) == 2.0 * 160 * 16);
    tn_init(&t, "ConvTranspose", 13);
    tn_in(&t, "x", TDM_FLOAT, "1x4x5x5");
    tn_in(&t, "w", TDM_FLOAT, "4x2x3x3");
    tn_out(&t, "y", TDM_FLOAT, "1x2x7x7");
    CHECK(dev_node_flops(&t.d) == 2.0 * 100 * 18);
    tn_init(&t, "Relu", 14);
    tn_in(&t, "x", TDM_FLOAT, "?x10");
    tn_out(&t, "y", TDM_FLOAT, "?x10");
    CHECK(dev_node_flops(&t.d) == 10);
    dev_instance_close(&edge);
    dev_instance_close(&cpu);
    return 0;
}

static int t_desc(void)
{
    /* a node of a real graph, with inferred types and an initializer */
    gr_model *m;
    MUST(gr_model_new(&err, &m));
    m->opsets = mem_calloc(1, sizeof *m->opsets);
    m->opsets[0].domain = mem_strdup("");
    m->opsets[0].version = 13;
    m->n_opsets = 1;
    MUST(gr_graph_new(&err, m, NULL, "main", &m->main));
    gr_graph *g = m->main;
    const char *ins[] = {"x", "w"}, *outs[] = {"y"};
    int idx, xv, wv;
    MUST(gr_node_add(&err, g, "conv1", "Conv", "", 2, ins, 1, outs, &idx));
    gr_attr *a = gr_attr_add(&err, g, idx, "dilations");
    a->type = GA_INTS;
    a->n = 2;
    a->ints = mem_calloc(2, sizeof *a->ints);
    a->ints[0] = a->ints[1] = 2;
    a = gr_attr_add(&err, g, idx, "auto_pad");
    a->type = GA_STRING;
    a->s = mem_strdup("NOTSET");
    a->s_len = 6;
    MUST(gr_value_get(&err, g, "x", &xv));
    MUST(gr_value_get(&err, g, "w", &wv));
    g->values[xv].type.kind = TDM_KIND_TENSOR;
    g->values[xv].type.dtype = TDM_FLOAT;
    g->values[xv].type.rank = 4;
    int64_t xd[] = {-1, 3, 16, 16};
    for (int k = 0; k < 4; k++)
        g->values[xv].type.dims[k].v = xd[k];
    int64_t wd[] = {4, 3, 3, 3};
    MUST(tensor_new(&err, TDM_FLOAT, 4, wd, &g->values[wv].init));
    memset(g->values[wv].init->data, 0, g->values[wv].init->nbytes);
    MUST(gr_finalize(&err, m));

    /* the planner builds every description a device sees (plan/desc.h) */
    plan_arena arena;
    plan_arena_init(&arena);
    struct {
        tdm_node_desc d;
    } d;
    MUST(plan_desc_build(&err, &arena, g, &g->nodes[idx], &d.d));
    CHECK(strcmp(d.d.name, "conv1") == 0 && strcmp(d.d.op_type, "Conv") == 0 && d.d.opset == 13);
    CHECK(d.d.n_inputs == 2 && d.d.n_outputs == 1 && d.d.n_attrs == 2);
    CHECK(strcmp(d.d.inputs[0].name, "x") == 0 && d.d.inputs[0].rank == 4 && d.d.inputs[0].dims[0] == -1 &&
          d.d.inputs[0].dims[3] == 16 && !d.d.inputs[0].data);
    CHECK(d.d.inputs[1].data != NULL && d.d.inputs[1].dims[0] == 4 && d.d.inputs[1].dtype == TDM_FLOAT);
    CHECK(d.d.attrs[0].type == TDM_ATTR_INTS && d.d.attrs[0].n == 2 && d.d.attrs[0].ints[1] == 2);
    CHECK(d.d.attrs[1].type == TDM_ATTR_STRING && strcmp(d.d.attrs[1].s, "NOTSET") == 0);
    dev_instance edge, cpu;
    open_dev("vnpu:edge-npu", &edge);
    open_dev("cpu", &cpu);
    tdm_verdict v;
    /* static shapes first (x has an unknown batch), then the dilation */
    CHECK(edge.dev.iface->supports(edge.dev.ctx, &d.d, &v) == TDM_REASON_SHAPE_UNSUPPORTED);
    fprintf(stderr, "  %s\n", v.detail);
    CHECK(cpu.dev.iface->supports(NULL, &d.d, &v) == TDM_REASON_OK);
    g->values[xv].type.dims[0].v = 1;
    MUST(plan_desc_build(&err, &arena, g, &g->nodes[idx], &d.d));
    CHECK(edge.dev.iface->supports(edge.dev.ctx, &d.d, &v) == TDM_REASON_ATTR_UNSUPPORTED);
    fprintf(stderr, "  %s\n", v.detail);
    CHECK_HAS(v.detail, "dilations");
    plan_arena_free(&arena);
    dev_instance_close(&edge);
    dev_instance_close(&cpu);
    gr_model_free(m);
    return 0;
}

static int t_list_open(void)
{
    dev_list *l;
    unsetenv("TANDEM_PLUGINS");
    err_clear(&err);
    MUST(dev_list_open(&err, NULL, NULL, 0, &l));
    CHECK(l->n == 1 && strcmp(l->items[0].name, "cpu") == 0 && l->items[0].kind == DEV_KIND_CPU);
    dev_list_close(l);
    MUST(dev_list_open(&err, "vnpu:edge-npu", NULL, 0, &l));
    CHECK(l->n == 2 && strcmp(l->items[0].name, "vnpu:edge-npu") == 0 && strcmp(l->items[1].name, "cpu") == 0);
    dev_list_close(l);
    MUST(dev_list_open(&err, " vnpu:edge-npu , vnpu:fp32-all,cpu", NULL, 0, &l));
    CHECK(l->n == 3 && l->items[1].kind == DEV_KIND_VNPU && l->items[2].kind == DEV_KIND_CPU);
    dev_list_close(l);

    static const struct {
        const char *spec;
        tdm_status st;
        const char *frag;
    } bad[] = {
        {"opencl:99", TDM_E_DEVICE, "opencl"},
        {"opencl:x", TDM_E_USAGE, "must be a device number"},
        {"vnpu:edge-npu,tpu", TDM_E_DEVICE, "unknown device 'tpu'"},
        {"vnpu:edge-npu,,cpu", TDM_E_USAGE, "has an empty entry"},
        {"vnpu:edge-npu,vnpu:edge-npu", TDM_E_USAGE, "names vnpu:edge-npu twice"},
        {"cpu,vnpu:edge-npu", TDM_E_USAGE, "cpu must be last"},
        {"cpu:4", TDM_E_USAGE, "takes no argument"},
        {"vnpu:nope", TDM_E_DEVICE, "no shipped profile"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err_clear(&err);
        l = (dev_list *)&err; /* must be reset to NULL */
        tdm_status st = dev_list_open(&err, bad[i].spec, NULL, 0, &l);
        fprintf(stderr, "  '%s': [%s] %s\n", bad[i].spec, tdm_status_str(st), err.msg);
        CHECK(st == bad[i].st && l == NULL);
        CHECK_HAS(err.msg, bad[i].frag);
    }
    dev_list_close(NULL);

    /* opencl: opened through src/devices/opencl when a device exists, else refused with why */
    ocl_info *oi = NULL;
    size_t noi = 0;
    char why[256] = "";
    MUST(ocl_probe(&err, &oi, &noi, why, sizeof why));
    mem_free(oi);
    err_clear(&err);
    tdm_status st = dev_list_open(&err, "opencl", NULL, 0, &l);
    fprintf(stderr, "  'opencl' (%zu devices%s%s): [%s] %s\n", noi, *why ? ": " : "", why, tdm_status_str(st),
            err.msg);
    if (noi) {
        CHECK(st == TDM_OK && l && l->n == 2 && l->items[0].kind == DEV_KIND_OPENCL &&
              strcmp(l->items[0].name, "opencl") == 0 && !l->items[0].ext);
        dev_list_close(l);
    } else {
        CHECK(st == TDM_E_DEVICE && !l);
        CHECK_HAS(err.msg, "opencl is not available");
    }
    return 0;
}

static void plugin_path(char *buf, size_t size, const char *variant)
{
    snprintf(buf, size, "%s/libtandem-example%s.so", plugin_dir, variant);
}

static int t_plugin_load(void)
{
    char path[1024];
    plugin_path(path, sizeof path, "");
    dev_plugin *p;
    err_clear(&err);
    MUST(dev_plugin_load(&err, path, &p));
    CHECK(strcmp(dev_plugin_stem(p), "tandem-example") == 0);
    CHECK(strcmp(dev_plugin_path(p), path) == 0);
    dev_instance d;
    MUST(dev_plugin_open(&err, p, "", &d));
    CHECK(strcmp(d.name, "example") == 0 && d.kind == DEV_KIND_PLUGIN && !d.ext);
    CHECK(d.dev.iface->memory_capacity(d.dev.ctx) == ((uint64_t)64 << 20));
    dev_instance_close(&d);
    err_clear(&err);
    CHECK(dev_plugin_open(&err, p, "colour=3", &d) == TDM_E_DEVICE);
    CHECK_HAS(err.msg, "libtandem-example.so failed to start", "unknown option 'colour'");
    err_clear(&err);
    CHECK(dev_plugin_open(&err, p, "memory=lots", &d) == TDM_E_DEVICE);
    CHECK_HAS(err.msg, "must be KEY=NUMBER");
    MUST(dev_plugin_open(&err, p, "memory=1024", &d));
    CHECK(d.dev.iface->memory_capacity(d.dev.ctx) == 1024);
    dev_instance_close(&d);
    dev_plugin_unload(p);
    return 0;
}

static int t_plugin_version(void)
{
    char path[1024];
    plugin_path(path, sizeof path, "-v4");
    dev_plugin *p;
    err_clear(&err);
    MUST(dev_plugin_load(&err, path, &p));
    dev_instance d;
    err_clear(&err);
    CHECK(dev_plugin_open(&err, p, "", &d) == TDM_E_DEVICE);
    fprintf(stderr, "  %s\n", err.msg);
    CHECK_HAS(err.msg, "plugin libtandem-example-v4.so was built for device API 4, tandem speaks 3");
    dev_plugin_unload(p);
    /* through the registry too */
    const char *paths[] = {path};
    dev_list *l;
    err_clear(&err);
    CHECK(dev_list_open(&err, NULL, paths, 1, &l) == TDM_E_DEVICE && !l);
    CHECK_HAS(err.msg, "was built for device API 4, tandem speaks 3");
    return 0;
}

/* Runs Relu on 8 elements through d's public run(); 0 when the results
 * are right. */
static int relu_on(const dev_instance *d)
{
    const tdm_device_iface *f = d->dev.iface;
    tnode t;
    tn_init(&t, "Relu", 14);
    t.d.name = "relu";
    tn_in(&t, "x", TDM_FLOAT, "8");
    tn_out(&t, "y", TDM_FLOAT, "8");
    float host[8], back[8];
    for (int i = 0; i < 8; i++)
        host[i] = (float)(i - 4);
    tdm_device_tensor in = {TDM_FLOAT, 1, {8}, NULL, sizeof host}, out;
    memset(&out, 0, sizeof out);
    char msg[256] = "";
    if (f->buffer_alloc(d->dev.ctx, sizeof host, &in.buf) ||
        f->copy_to_device(d->dev.ctx, in.buf, host, sizeof host) ||
        f->run(d->dev.ctx, &t.d, &in, &out, msg, sizeof msg) || !out.buf ||
        f->copy_to_host(d->dev.ctx, back, out.buf, sizeof back))
        return -1;
    f->buffer_free(d->dev.ctx, out.buf);
    f->buffer_free(d->dev.ctx, in.buf);
    for (int i = 0; i < 8; i++)
        if (back[i] != (host[i] > 0 ? host[i] : 0))
            return -1;
    return 0;
}

/* Device API versions: a version-1 plugin loads and runs, and its table is
 * read only as far as version 1 goes (the example's v1 build still carries
 * last_run_ms, which tandem must not call); a plugin of tandem's version
 * gives its device time of the last run. */
static int t_plugin_v1(void)
{
    char path[1024], v1[1024];
    plugin_path(path, sizeof path, "");
    plugin_path(v1, sizeof v1, "-v1");
    const char *paths[] = {v1};
    dev_list *l;
    unsetenv("TANDEM_PLUGINS");
    err_clear(&err);
    MUST(dev_list_open(&err, "example", paths, 1, &l));
    const dev_instance *d = &l->items[0];
    CHECK(l->n == 2 && strcmp(d->name, "example") == 0 && d->dev.iface->api_version == 1);
    CHECK(relu_on(d) == 0);
    CHECK(d->dev.iface->last_run_ms != NULL); /* there, but not version 1's */
    CHECK(!dev_has_run_timer(d) && dev_last_run_ms(d) == -1);
    CHECK(d->dev.iface->rewrite != NULL && !dev_has_rewrite(d)); /* version 3's member, not read */
    dev_list_close(l);
    paths[0] = path;
    MUST(dev_list_open(&err, "example", paths, 1, &l));
    d = &l->items[0];
    CHECK(d->dev.iface->api_version == TDM_DEVICE_API_VERSION && TDM_DEVICE_API_VERSION == 3);
    CHECK(dev_has_rewrite(d));
    CHECK(dev_has_run_timer(d) && dev_last_run_ms(d) == -1); /* no run yet */
    CHECK(relu_on(d) == 0);
    CHECK(dev_last_run_ms(d) >= 0);
    fprintf(stderr, "  example's device time of a Relu: %g ms\n", dev_last_run_ms(d));
    dev_list_close(l);
    return 0;
}

static int t_plugin_nosym(void)
{
    char path[1024];
    plugin_path(path, sizeof path, "-nosym");
    dev_plugin *p = NULL;
    err_clear(&err);
    CHECK(dev_plugin_load(&err, path, &p) == TDM_E_DEVICE && !p);
    fprintf(stderr, "  %s\n", err.msg);
    CHECK_HAS(err.msg, "libtandem-example-nosym.so is not a tandem device", "tdm_device_plugin_init");
    return 0;
}

static int t_plugin_missing(void)
{
    dev_plugin *p = NULL;
    err_clear(&err);
    CHECK(dev_plugin_load(&err, "/nonexistent/libnothing.so", &p) == TDM_E_IO && !p);
    CHECK_HAS(err.msg, "plugin '/nonexistent/libnothing.so' does not exist");
    /* a file that is not a shared library */
    write_file("devices-not-a-plugin.so", "hello");
    err_clear(&err);
    CHECK(dev_plugin_load(&err, "devices-not-a-plugin.so", &p) == TDM_E_DEVICE && !p);
    fprintf(stderr, "  %s\n", err.msg);
    CHECK_HAS(err.msg, "devices-not-a-plugin.so cannot be loaded");
    remove("devices-not-a-plugin.so");
    const char *paths[] = {"/nonexistent/libnothing.so"};
    dev_list *l;
    err_clear(&err);
    CHECK(dev_list_open(&err, "cpu", paths, 1, &l) == TDM_E_IO && !l);
    CHECK_HAS(err.msg, "libnothing.so");
    return 0;
}

/* The plugin through its public entry points, as the executor drives it. */
static int t_plugin_run(void)
{
    char path[1024];
    plugin_path(path, sizeof path, "");
    const char *paths[] = {path};
    dev_list *l;
    unsetenv("TANDEM_PLUGINS");
    err_clear(&err);
    MUST(dev_list_open(&err, "example:sigmoid_limit=16,vnpu:edge-npu", paths, 1, &l));
    CHECK(l->n == 3 && strcmp(l->items[0].name, "example") == 0 && l->items[0].plugin != NULL);
    const dev_instance *ex = &l->items[0];
    const tdm_device_iface *f = ex->dev.iface;

    tnode t;
    tn_init(&t, "Sigmoid", 13);
    tn_in(&t, "x", TDM_FLOAT, "4x8");
    tn_out(&t, "y", TDM_FLOAT, "4x8");
    EXPECT(ex, &t, TDM_REASON_OK, "example runs Sigmoid");
    t.in[0].dtype = TDM_FLOAT16;
    EXPECT(ex, &t, TDM_REASON_DTYPE_UNSUPPORTED, "float32 only");
    t.in[0].dtype = TDM_FLOAT;
    t.dims[0][0] = -1;
    EXPECT(ex, &t, TDM_REASON_SHAPE_UNSUPPORTED, "static shapes");
    t.d.op_type = "Tanh";
    EXPECT(ex, &t, TDM_REASON_OP_UNSUPPORTED, "example has no Tanh kernel");
    tn_init(&t, "Add", 14);
    tn_in(&t, "a", TDM_FLOAT, "4x8");
    tn_in(&t, "b", TDM_FLOAT, "8");
    tn_out(&t, "y", TDM_FLOAT, "4x8");
    EXPECT(ex, &t, TDM_REASON_SHAPE_UNSUPPORTED, "equal shapes");

    /* run Sigmoid on 32 elements (limit 16): computed, and reported as a fallback */
    tn_init(&t, "Sigmoid", 13);
    t.d.name = "sig_big";
    tn_in(&t, "x", TDM_FLOAT, "4x8");
    tn_out(&t, "y", TDM_FLOAT, "4x8");
    float host[32], back[32];
    for (int i = 0; i < 32; i++)
        host[i] = (float)(i - 16) / 4.0f;
    tdm_device_tensor in = {TDM_FLOAT, 2, {4, 8}, NULL, sizeof host}, out;
    memset(&out, 0, sizeof out);
    MUST(f->buffer_alloc(ex->dev.ctx, sizeof host, &in.buf));
    MUST(f->copy_to_device(ex->dev.ctx, in.buf, host, sizeof host));
    char msg[256] = "";
    CHECK(f->run(ex->dev.ctx, &t.d, &in, &out, msg, sizeof msg) == TDM_OK);
    CHECK(out.rank == 2 && out.dims[1] == 8 && out.bytes == sizeof back && out.buf);
    MUST(f->copy_to_host(ex->dev.ctx, back, out.buf, sizeof back));
    double maxd = 0;
    for (int i = 0; i < 32; i++) {
        double d = fabs(back[i] - 1.0 / (1.0 + exp(-(double)host[i])));
        if (d > maxd)
            maxd = d;
    }
    CHECK(maxd < 1e-6);
    f->buffer_free(ex->dev.ctx, out.buf);
    size_t nf = 99;
    const tdm_device_fallback *fb = f->take_fallbacks(ex->dev.ctx, &nf);
    CHECK(nf == 1 && fb && strcmp(fb[0].node, "sig_big") == 0 && fb[0].reason == TDM_REASON_SHAPE_UNSUPPORTED);
    if (nf == 1)
        fprintf(stderr, "  fallback: %s %s: %s\n", fb[0].node, tdm_reason_str(fb[0].reason), fb[0].detail);
    if (nf == 1)
        CHECK_HAS(fb[0].detail, "at most 16 elements");
    fb = f->take_fallbacks(ex->dev.ctx, &nf);
    CHECK(nf == 0); /* taken once */
    /* Add with a one-element operand: no fallback */
    tn_init(&t, "Mul", 14);
    tn_in(&t, "a", TDM_FLOAT, "4x8");
    tn_in(&t, "b", TDM_FLOAT, "1");
    tn_out(&t, "y", TDM_FLOAT, "4x8");
    float two = 2.0f;
    tdm_device_tensor ins[2] = {in, {TDM_FLOAT, 1, {1}, NULL, sizeof two}};
    MUST(f->buffer_alloc(ex->dev.ctx, sizeof two, &ins[1].buf));
    MUST(f->copy_to_device(ex->dev.ctx, ins[1].buf, &two, sizeof two));
    CHECK(f->run(ex->dev.ctx, &t.d, ins, &out, msg, sizeof msg) == TDM_OK);
    MUST(f->copy_to_host(ex->dev.ctx, back, out.buf, sizeof back));
    CHECK(back[3] == host[3] * 2 && back[31] == host[31] * 2);
    f->buffer_free(ex->dev.ctx, out.buf);
    f->buffer_free(ex->dev.ctx, ins[1].buf);
    f->buffer_free(ex->dev.ctx, in.buf);
    fb = f->take_fallbacks(ex->dev.ctx, &nf);
    CHECK(nf == 0);
    dev_list_close(l);

    /* TANDEM_PLUGINS, and a NULL spec: every plugin, then cpu */
    setenv("TANDEM_PLUGINS", path, 1);
    err_clear(&err);
    MUST(dev_list_open(&err, NULL, NULL, 0, &l));
    CHECK(l->n == 2 && strcmp(l->items[0].name, "example") == 0 && l->items[1].kind == DEV_KIND_CPU);
    dev_list_close(l);
    /* by file stem */
    MUST(dev_list_open(&err, "tandem-example,cpu", NULL, 0, &l));
    CHECK(l->n == 2 && strcmp(l->items[0].name, "example") == 0);
    dev_list_close(l);
    /* a plugin loaded but not named is unused */
    MUST(dev_list_open(&err, "vnpu:edge-npu", NULL, 0, &l));
    CHECK(l->n == 2 && l->items[0].kind == DEV_KIND_VNPU);
    dev_list_close(l);
    err_clear(&err);
    CHECK(dev_list_open(&err, "example,example", NULL, 0, &l) == TDM_E_USAGE);
    CHECK_HAS(err.msg, "twice");
    unsetenv("TANDEM_PLUGINS");
    return 0;
}

static int t_list_known(void)
{
    char path[1024], v3[1024];
    plugin_path(path, sizeof path, "");
    plugin_path(v3, sizeof v3, "-v4");
    const char *paths[] = {path, v3};
    unsetenv("TANDEM_PLUGINS");
    dev_info *info;
    size_t n;
    err_clear(&err);
    MUST(dev_list_known(&err, paths, 2, &info, &n));
    int cpu = 0, edge = 0, server = 0, all = 0, ocl = 0, ex = 0, exv3 = 0;
    for (size_t i = 0; i < n; i++) {
        dev_info *d = &info[i];
        fprintf(stderr, "  %-18s %-7s %-3s mem=%llu prec=%s src=%s | %s%s\n", d->name, d->kind,
                d->available ? "yes" : "no", (unsigned long long)d->memory_bytes, d->precision, d->source,
                d->description, d->why_not);
        CHECK(d->available ? !*d->why_not && *d->description : *d->why_not != 0);
        if (strcmp(d->name, "cpu") == 0)
            cpu = d->available && d->memory_bytes == UINT64_MAX && strcmp(d->precision, "fp32") == 0;
        if (strcmp(d->name, "vnpu:edge-npu") == 0)
            edge = d->available && d->memory_bytes == 4194304 && strcmp(d->precision, "fp16") == 0 &&
                   strcmp(d->source, "embedded") == 0;
        if (strcmp(d->name, "vnpu:server-npu") == 0)
            server = d->available;
        if (strcmp(d->name, "vnpu:fp32-all") == 0)
            all = d->available && strcmp(d->precision, "fp32") == 0;
        if (strcmp(d->name, "opencl") == 0)
            ocl = strcmp(d->kind, "opencl") == 0 &&
                  (d->available ? d->memory_bytes > 0 : strstr(d->why_not, "opencl is not available") != NULL);
        if (strcmp(d->name, "example") == 0)
            ex = d->available && strcmp(d->kind, "plugin") == 0 && strcmp(d->source, path) == 0;
        if (strcmp(d->name, "tandem-example-v4") == 0)
            exv3 = !d->available && strstr(d->why_not, "built for device API 4, tandem speaks 3") != NULL;
    }
    CHECK(cpu && edge && server && all && ocl && ex && exv3);
    CHECK(n >= 7); /* cpu, 3 profiles, opencl (one or more entries), 2 plugins */
    mem_free(info);
    return 0;
}

/* The vendor profiles (issue 17): each names its source document and
 * version, has a per-partition round trip, and enforces its constant
 * inputs as its document says (coreml-ane: Gemm's B; qnn-htp: Slice's
 * starts and ends, while its Gemm takes a computed B). */
static int t_profiles_vendor(void)
{
    static const char *const names[] = {"rk3588", "qnn-htp", "coreml-ane", "intel-npu"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const vnpu_embedded_profile *p = NULL;
        for (size_t k = 0; vnpu_embedded[k].name; k++)
            if (strcmp(vnpu_embedded[k].name, names[i]) == 0)
                p = &vnpu_embedded[k];
        CHECK(p != NULL);
        if (!p)
            continue;
        CHECK_HAS(p->text, "\"source\"", "\"document\"", "\"version\"", "estimate");
        char entry[64];
        snprintf(entry, sizeof entry, "vnpu:%s", names[i]);
        dev_instance d;
        open_dev(entry, &d);
        const struct vnpu_ctx *c = d.dev.ctx;
        CHECK(c->partition_us > 0 && d.ext->partition_ms == c->partition_us / 1000.0);
        CHECK(d.ext->storage == TDM_FLOAT16 && c->static_shapes);
        dev_instance_close(&d);
    }
    dev_instance htp, ane;
    open_dev("vnpu:qnn-htp", &htp);
    open_dev("vnpu:coreml-ane", &ane);
    tnode t;
    tn_init(&t, "Gemm", 13);
    tn_in(&t, "a", TDM_FLOAT, "2x4");
    tn_in(&t, "b", TDM_FLOAT, "4x3");
    tn_out(&t, "y", TDM_FLOAT, "2x3");
    EXPECT(&ane, &t, TDM_REASON_ATTR_UNSUPPORTED, "coreml-ane runs Gemm only with input 1 constant; 'b' is computed");
    EXPECT(&htp, &t, TDM_REASON_OK, "qnn-htp runs Gemm");
    static const float bw[12] = {0};
    t.in[1].data = bw;
    EXPECT(&ane, &t, TDM_REASON_OK, "coreml-ane runs Gemm");
    tn_init(&t, "Slice", 13);
    tn_in(&t, "x", TDM_FLOAT, "4x4");
    tn_in(&t, "starts", TDM_INT64, "1");
    tn_in(&t, "ends", TDM_INT64, "1");
    tn_out(&t, "y", TDM_FLOAT, "2x4");
    static const int64_t se[1] = {0};
    t.in[1].data = se;
    EXPECT(&htp, &t, TDM_REASON_ATTR_UNSUPPORTED, "qnn-htp runs Slice only with input 2 constant; 'ends' is computed");
    t.in[2].data = se;
    EXPECT(&htp, &t, TDM_REASON_OK, "qnn-htp runs Slice");
    dev_instance_close(&ane);
    dev_instance_close(&htp);
    expect_bad("", "{\"Gemm\": {\"const_inputs\": [32]}}", "ops.Gemm.const_inputs must be a non-empty array", "");
    expect_bad("", "{\"*\": {\"const_inputs\": [1]}}", "ops.*.const_inputs is not allowed", "");
    expect_bad(", \"source\": {\"document\": \"x\"}", "{\"Relu\": {}}", "source.version is missing", "");
    expect_bad(", \"partition_overhead_us\": -1", "{\"Relu\": {}}", "partition_overhead_us must be a number >= 0", "");
    return 0;
}

static const struct {
    const char *name;
    int (*fn)(void);
} cases[] = {
    {"reason_str", t_reason_str},
    {"profiles.shipped", t_profiles_shipped},
    {"profiles.bad", t_profiles_bad},
    {"profiles.path", t_profiles_path},
    {"profiles.vendor", t_profiles_vendor},
    {"supports.cpu", t_supports_cpu},
    {"supports.vnpu", t_supports_vnpu},
    {"memory", t_memory},
    {"numerics.fp16", t_numerics_fp16},
    {"numerics.bf16", t_numerics_bf16},
    {"numerics.fp32", t_numerics_fp32},
    {"numerics.held", t_numerics_held},
    {"estimate", t_estimate},
    {"desc", t_desc},
    {"list.open", t_list_open},
    {"list.known", t_list_known},
    {"plugin.load", t_plugin_load},
    {"plugin.version", t_plugin_version},
    {"plugin.v1", t_plugin_v1},
    {"plugin.nosym", t_plugin_nosym},
    {"plugin.missing", t_plugin_missing},
    {"plugin.run", t_plugin_run},
};

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_devices CASE [PLUGIN_DIR]\n");
        return 2;
    }
    if (argc > 2)
        plugin_dir = argv[2];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (strcmp(cases[i].name, argv[1]) == 0) {
            int rc = cases[i].fn();
            fprintf(stderr, "%s: %d checks, %d failed\n", argv[1], checks, failures);
            return rc || failures || !checks ? 1 : 0;
        }
    fprintf(stderr, "unknown case %s\n", argv[1]);
    return 2;
}
