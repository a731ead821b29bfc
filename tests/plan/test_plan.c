/* Planner tests (ctest plan.*): reason codes, granularity, memory splits,
 * pins, fallback policies and budgets, acyclic partitions, copies once per
 * destination, plugins, device faults, concurrent runs and the estimates of
 * fused partitions and of control flow (If, Loop, Scan).
 *   test_plan CASE MODELS_DIR TEST_PROFILE PLUGIN_DIR
 * MODELS_DIR holds the models of make_models.py. */
#define _POSIX_C_SOURCE 200809L
#include <tandem/tandem.h>

#include "graph/fuse.h"
#include "plan/calib.h"
#include "plan/plan.h"
#include "run/hexec.h"
#include "run/hpart.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *models_dir, *test_profile, *plugin_dir;
static int failures;

#define CHECK(cond, ...)                                                                                             \
    do {                                                                                                             \
        if (!(cond)) {                                                                                               \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);                                 \
            fprintf(stderr, __VA_ARGS__);                                                                            \
            fputc('\n', stderr);                                                                                     \
            failures++;                                                                                              \
        }                                                                                                            \
    } while (0)

static tdm_ctx *ctx;

static tdm_model *load(const char *name)
{
    char path[1024];
    tdm_model *m = NULL;
    snprintf(path, sizeof path, "%s/%s.onnx", models_dir, name);
    tdm_status st = tdm_model_load(ctx, path, &m);
    if (st) {
        fprintf(stderr, "cannot load %s: %s\n", path, tdm_ctx_error(ctx));
        exit(1);
    }
    return m;
}

static tdm_session_options *opts(const char *devices, const char *gran)
{
    tdm_session_options *o = NULL;
    tdm_granularity g;
    if (tdm_session_options_create(&o) || (devices && tdm_session_options_set_devices(o, devices)) ||
        (gran && (tdm_granularity_parse(NULL, gran, &g) || tdm_session_options_set_granularity(o, g)))) {
        fprintf(stderr, "options\n");
        exit(1);
    }
    return o;
}

static tdm_plan *plan_of(const tdm_model *m, const tdm_session_options *o)
{
    tdm_plan *p = NULL;
    tdm_status st = tdm_plan_create(ctx, m, o, &p);
    if (st) {
        fprintf(stderr, "plan: %s: %s\n", tdm_status_str(st), tdm_ctx_error(ctx));
        exit(1);
    }
    return p;
}

/* Device and reason of the node named name. */
static int node_is(const tdm_plan *p, const char *name, const char *device, const char *reason)
{
    for (size_t i = 0; i < tdm_plan_node_count(p); i++) {
        const char *n, *d, *r, *det;
        tdm_plan_node(p, i, &n, NULL, &d, &r, &det);
        if (strcmp(n, name) != 0)
            continue;
        if (strcmp(d, device) != 0 || strcmp(r, reason) != 0) {
            fprintf(stderr, "  node %s: %s %s (%s), expected %s %s\n", name, d, r, det, device, reason);
            return 0;
        }
        if (strcmp(reason, "OK") != 0 && !det[0]) {
            fprintf(stderr, "  node %s: reason %s without a detail sentence\n", name, r);
            return 0;
        }
        return 1;
    }
    fprintf(stderr, "  no node %s\n", name);
    return 0;
}

static cJSON *ledger(const tdm_plan *p)
{
    char *txt = NULL;
    if (tdm_plan_ledger_json(p, &txt)) {
        fprintf(stderr, "ledger\n");
        exit(1);
    }
    cJSON *j = cJSON_Parse(txt);
    tdm_free(txt);
    if (!j) {
        fprintf(stderr, "the ledger is not JSON\n");
        exit(1);
    }
    return j;
}

static cJSON *ledger_node(cJSON *j, const char *name)
{
    cJSON *n;
    cJSON_ArrayForEach(n, cJSON_GetObjectItem(j, "nodes"))
    {
        if (strcmp(cJSON_GetObjectItem(n, "name")->valuestring, name) == 0)
            return n;
    }
    return NULL;
}

/* The node's first rejection in the ledger is (device, reason). */
static int rejected_first(const tdm_plan *p, const char *name, const char *device, const char *reason)
{
    cJSON *j = ledger(p), *n = ledger_node(j, name);
    cJSON *r = n ? cJSON_GetArrayItem(cJSON_GetObjectItem(n, "rejected"), 0) : NULL;
    int ok = r && strcmp(cJSON_GetObjectItem(r, "device")->valuestring, device) == 0 &&
             strcmp(cJSON_GetObjectItem(r, "reason")->valuestring, reason) == 0 &&
             cJSON_GetObjectItem(r, "detail")->valuestring[0];
    if (!ok)
        fprintf(stderr, "  node %s: the ledger's first rejection is not %s %s\n", name, device, reason);
    cJSON_Delete(j);
    return ok;
}

/* Random input of the model's declared (static) shape. */
static tdm_tensor *input_for(const tdm_model *m, size_t i, unsigned seed)
{
    tdm_value_info vi;
    tdm_tensor *t = NULL;
    int64_t dims[16];
    tdm_model_input(m, i, &vi);
    for (int d = 0; d < vi.rank; d++)
        dims[d] = vi.dims[d].value < 0 ? 2 : vi.dims[d].value;
    if (tdm_tensor_create(vi.dtype, vi.rank, dims, &t))
        exit(1);
    size_t n = tdm_tensor_count(t);
    for (size_t k = 0; k < n; k++) {
        seed = seed * 1103515245u + 12345u;
        double v = (double)(seed >> 8 & 0xffff) / 32768.0 - 1.0;
        if (vi.dtype == TDM_FLOAT)
            ((float *)tdm_tensor_data(t))[k] = (float)v;
        else if (vi.dtype == TDM_DOUBLE)
            ((double *)tdm_tensor_data(t))[k] = v;
    }
    return t;
}

/* Runs m with opts o and on cpu; 1 when the outputs agree (cosine >= min_cos
 * and, for min_cos == 1, max |diff| <= 1e-6 relative). */
static int agrees(const tdm_model *m, const tdm_session_options *o, double min_cos)
{
    tdm_session_options *oc = opts("cpu", NULL);
    tdm_session *sc = NULL, *sp = NULL;
    tdm_tensor *in[4] = {0}, *a[4] = {0}, *b[4] = {0};
    int ok = 1;
    size_t nin = tdm_model_input_count(m), nout = tdm_model_output_count(m);
    for (size_t i = 0; i < nin; i++)
        in[i] = input_for(m, i, 7 + (unsigned)i);
    if (tdm_session_create(ctx, m, oc, &sc) || tdm_session_create(ctx, m, o, &sp)) {
        fprintf(stderr, "  session: %s\n", tdm_ctx_error(ctx));
        ok = 0;
        goto done;
    }
    if (tdm_session_run(sc, (const tdm_tensor *const *)in, a) ||
        tdm_session_run(sp, (const tdm_tensor *const *)in, b)) {
        fprintf(stderr, "  run: %s %s\n", tdm_session_error(sc), tdm_session_error(sp));
        ok = 0;
        goto done;
    }
    for (size_t k = 0; k < nout; k++) {
        size_t n = tdm_tensor_count(a[k]);
        tdm_dtype dt = tdm_tensor_dtype(a[k]);
        if (n != tdm_tensor_count(b[k]) || dt != tdm_tensor_dtype(b[k]) || (dt != TDM_FLOAT && dt != TDM_DOUBLE)) {
            fprintf(stderr, "  output %zu: shape or type differs\n", k);
            ok = 0;
            continue;
        }
        double dot = 0, nx = 0, ny = 0, mx = 0, md = 0;
        for (size_t i = 0; i < n; i++) {
            double x = dt == TDM_FLOAT ? ((const float *)tdm_tensor_cdata(a[k]))[i]
                                       : ((const double *)tdm_tensor_cdata(a[k]))[i];
            double y = dt == TDM_FLOAT ? ((const float *)tdm_tensor_cdata(b[k]))[i]
                                       : ((const double *)tdm_tensor_cdata(b[k]))[i];
            dot += x * y;
            nx += x * x;
            ny += y * y;
            mx = fmax(mx, fabs(x));
            md = fmax(md, fabs(x - y));
        }
        double cosv = nx > 0 && ny > 0 ? dot / sqrt(nx * ny) : (nx == ny);
        if (cosv < min_cos || (min_cos >= 1 && md > 1e-6 * mx) || md != md) {
            fprintf(stderr, "  output %zu: cosine %.7f, max|diff| %g\n", k, cosv, md);
            ok = 0;
        }
    }
done:
    for (size_t i = 0; i < 4; i++) {
        tdm_tensor_destroy(in[i]);
        tdm_tensor_destroy(a[i]);
        tdm_tensor_destroy(b[i]);
    }
    tdm_session_destroy(sc);
    tdm_session_destroy(sp);
    tdm_session_options_destroy(oc);
    return ok;
}

/* ------------------------------------------------------------- cases */

static void reason_case(const char *model, const char *node, const char *reason, const char *gran)
{
    tdm_model *m = load(model);
    tdm_session_options *o = opts("vnpu:edge-npu,cpu", gran);
    tdm_plan *p = plan_of(m, o);
    CHECK(node_is(p, node, "cpu", reason), "%s: %s", model, node);
    CHECK(rejected_first(p, node, "vnpu:edge-npu", reason), "%s", node);
    CHECK(agrees(m, o, 0.999), "%s: the plan's outputs differ from cpu's", model);
    tdm_plan_destroy(p);
    tdm_session_options_destroy(o);
    tdm_model_destroy(m);
}

static void case_ok(void)
{
    tdm_model *m = load("ok");
    tdm_session_options *o = opts("vnpu:edge-npu,cpu", "subgraph");
    tdm_plan *p = plan_of(m, o);
    tdm_plan_summary s;
    CHECK(node_is(p, "conv", "vnpu:edge-npu", "OK"), "conv");
    CHECK(node_is(p, "relu", "vnpu:edge-npu", "OK"), "relu");
    tdm_plan_get_summary(p, &s);
    CHECK(s.fallback_nodes == 0 && s.partitions == 1, "%zu fallbacks, %zu partitions", s.fallback_nodes,
          s.partitions);
    /* x (1x3x8x8 float) in, y (1x4x8x8 float) out */
    CHECK(s.boundary_bytes == 768 + 1024, "boundary %llu", (unsigned long long)s.boundary_bytes);
    CHECK(s.modeled && s.estimated_ms > 0, "estimates %g modeled %d", s.estimated_ms, s.modeled);
    CHECK(agrees(m, o, 0.999), "outputs");
    tdm_plan_destroy(p);
    tdm_session_options_destroy(o);
    tdm_model_destroy(m);
}

static void case_memory(void)
{
    reason_case("memory", "big_matmul", "MEMORY", "op");
    tdm_model *m = load("memory");
    tdm_session_options *o = opts("vnpu:edge-npu,cpu", "op");
    tdm_plan *p = plan_of(m, o);
    CHECK(node_is(p, "relu", "vnpu:edge-npu", "OK"), "the relu after the moved matmul stays");
    tdm_plan_destroy(p);
    tdm_session_options_destroy(o);
    tdm_model_destroy(m);
}

static void case_split(void)
{
    tdm_model *m = load("split");
    tdm_session_options *o = opts("vnpu:edge-npu,cpu", "subgraph");
    tdm_plan *p = plan_of(m, o);
    const char *names[] = {"conv1", "relu1", "conv2", "relu2"};
    for (int i = 0; i < 4; i++)
        CHECK(node_is(p, names[i], "vnpu:edge-npu", "OK"), "%s stays on the NPU", names[i]);
    CHECK(p->n_parts >= 2, "%d partitions: the partition over capacity was not split", p->n_parts);
    for (int q = 0; q < p->n_parts; q++)
        CHECK(p->parts[q].peak_bytes <= 4194304, "partition %d peak %llu", q,
              (unsigned long long)p->parts[q].peak_bytes);
    CHECK(agrees(m, o, 0.999), "outputs");
    tdm_plan_destroy(p);
    tdm_session_options_destroy(o);
    tdm_model_destroy(m);
}

/* Memory is counted at the device's storage type: edge-npu (fp16) holds
 * the Relu's 6 MiB of float32 tensors in 3 MiB and runs it (the executor
 * reserves the same 3 MiB); test-npu (fp32, 4 MiB) cannot. */
static void case_storage(void)
{
    tdm_model *m = load("storage");
    tdm_session_options *o = opts("vnpu:edge-npu,cpu", "op");
    tdm_plan *p = plan_of(m, o);
    CHECK(node_is(p, "relu", "vnpu:edge-npu", "OK"), "fp16 storage: the relu fits");
    CHECK(p->n_parts == 1 && p->parts[0].peak_bytes == 2u * 768u * 1024u * 2u, "peak %llu at fp16",
          p->n_parts ? (unsigned long long)p->parts[0].peak_bytes : 0ULL);
    CHECK(agrees(m, o, 0.999), "the run reserves what the plan counted");
    tdm_plan_destroy(p);
    tdm_session_options_destroy(o);
    char spec[1024];
    snprintf(spec, sizeof spec, "vnpu:%s,cpu", test_profile);
    o = opts(spec, "op");
    p = plan_of(m, o);
    CHECK(node_is(p, "relu", "cpu", "MEMORY"), "fp32 storage: 6 MiB does not fit 4 MiB");
    tdm_plan_destroy(p);
    tdm_session_options_destroy(o);
    tdm_model_destroy(m);
}

/* greedy: each device claims every node it supports (the island relu
 * stays on the NPU where subgraph would absorb it); the ledger names it;
 * a vendor profile's per-partition round trip is in the estimate. */
static void case_greedy(void)
{
    tdm_model *m = load("island");
    tdm_session_options *o = opts("vnpu:edge-npu,cpu", "greedy");
    tdm_plan *p = plan_of(m, o);
    CHECK(p->opts.granularity == PLAN_GRAN_GREEDY, "granularity %d", (int)p->opts.granularity);
    CHECK(node_is(p, "island_relu", "vnpu:edge-npu", "OK"), "greedy: the island is claimed by the NPU");
    CHECK(node_is(p, "ln1", "cpu", "OP_UNSUPPORTED"), "ln1");
    CHECK(p->n_parts == 3, "%d partitions", p->n_parts);
    CHECK(strcmp(plan_granularity_str(p->opts.granularity), "greedy") == 0, "name");
    CHECK(agrees(m, o, 0.999), "outputs");
    tdm_plan_destroy(p);
    tdm_session_options_destroy(o);
    tdm_model_destroy(m);

    m = load("ok");
    o = opts("vnpu:coreml-ane,cpu", "greedy");
    p = plan_of(m, o);
    double nodes = 0;
    for (int n = 0; n < p->n_nodes; n++)
        nodes += p->nodes[n].est_ms;
    CHECK(p->n_parts == 1 && fabs(p->parts[0].est_ms - (nodes + 0.075)) < 1e-9,
          "partition estimate %g: nodes %g + the 75 us round trip", p->n_parts ? p->parts[0].est_ms : -1, nodes);
    tdm_plan_destroy(p);
    tdm_session_options_destroy(o);
    tdm_model_destroy(m);
}

static void case_granularity(void)
{
    tdm_model *m = load("island");
    tdm_session_options *o = opts("vnpu:edge-npu,cpu", "subgraph");
    tdm_plan *p = plan_of(m, o);
    CHECK(node_is(p, "island_relu", "cpu", "GRANULARITY"), "subgraph: the island joins its neighbours");
    CHECK(rejected_first(p, "island_relu", "vnpu:edge-npu", "GRANULARITY"), "island rejection");
    CHECK(p->n_parts == 1, "%d partitions", p->n_parts);
    tdm_plan_destroy(p);
    tdm_session_options_destroy(o);
    o = opts("vnpu:edge-npu,cpu", "op");
    p = plan_of(m, o);
    CHECK(node_is(p, "island_relu", "vnpu:edge-npu", "OK"), "op: the island stays on the NPU");
    CHECK(agrees(m, o, 0.999), "outputs");
    tdm_plan_destroy(p);
    tdm_session_options_destroy(o);
    tdm_model_destroy(m);

    m = load("op_unsupported");
    o = opts("vnpu:edge-npu,cpu", "graph");
    p = plan_of(m, o);
    CHECK(node_is(p, "conv", "cpu", "GRANULARITY"), "graph: conv");
    CHECK(node_is(p, "relu", "cpu", "GRANULARITY"), "graph: relu");
    CHECK(node_is(p, "ln", "cpu", "OP_UNSUPPORTED"), "graph: ln");
    CHECK(p->n_parts == 1, "graph: %d partitions", p->n_parts);
    tdm_plan_destroy(p);
    tdm_session_options_destroy(o);
    tdm_model_destroy(m);

    m = load("ok");
    o = opts("vnpu:edge-npu,cpu", "graph");
    p = plan_of(m, o);
    CHECK(node_is(p, "conv", "vnpu:edge-npu", "OK") && node_is(p, "relu", "vnpu:edge-npu", "OK"),
          "graph: all on the NPU when it runs everything");
    tdm_plan_destroy(p);
    tdm_session_options_destroy(o);
    tdm_model_destroy(m);
}

static void case_user(void)
{
    tdm_model *m = load("ok");
    tdm_session_options *o = opts("vnpu:edge-npu,cpu", "op");
    tdm_session_options_add_pin(o, "relu=cpu");
    tdm_plan *p = plan_of(m, o);
    tdm_plan_summary s;
    CHECK(node_is(p, "relu", "cpu", "USER"), "pin by node name");
    CHECK(node_is(p, "conv", "vnpu:edge-npu", "OK"), "conv");
    tdm_plan_get_summary(p, &s);
    CHECK(s.fallback_nodes == 0, "a pinned node is not a fallback (%zu)", s.fallback_nodes);
    CHECK(agrees(m, o, 0.999), "outputs");
    tdm_plan_destroy(p);
    tdm_session_options_destroy(o);

    o = opts("vnpu:edge-npu,cpu", "op");
    tdm_session_options_add_pin(o, "Conv=cpu");
    tdm_session_options_add_pin(o, "conv=vnpu:edge-npu");
    p = plan_of(m, o);
    CHECK(node_is(p, "conv", "vnpu:edge-npu", "USER"), "a node pin beats an op pin");
    tdm_plan_destroy(p);
    tdm_session_options_destroy(o);

    o = opts("vnpu:edge-npu,cpu", "op");
    tdm_session_options_add_pin(o, "Relu=opencl");
    CHECK(tdm_plan_create(ctx, m, o, &p) == TDM_E_USAGE && strstr(tdm_ctx_error(ctx), "opencl"),
          "a pin to a device outside the list: %s", tdm_ctx_error(ctx));
    tdm_session_options_destroy(o);
    o = opts("vnpu:edge-npu,cpu", "op");
    tdm_session_options_add_pin(o, "NoSuchThing=cpu");
    CHECK(tdm_plan_create(ctx, m, o, &p) == TDM_E_USAGE && strstr(tdm_ctx_error(ctx), "NoSuchThing"),
          "a pin naming nothing: %s", tdm_ctx_error(ctx));
    tdm_session_options_destroy(o);
    CHECK(tdm_session_options_add_pin(NULL, "a=b") == TDM_E_USAGE, "NULL options");
    tdm_model_destroy(m);
}

static void case_nodevice(void)
{
    tdm_model *m = load("nodevice");
    tdm_plan *p = NULL;
    tdm_session *s = NULL;
    tdm_session_options *o = opts("vnpu:edge-npu,cpu", NULL);
    CHECK(tdm_plan_create(ctx, m, o, &p) == TDM_E_UNSUPPORTED && !p, "plan-time error");
    CHECK(strstr(tdm_ctx_error(ctx), "conv_int8") != NULL, "names the node: %s", tdm_ctx_error(ctx));
    CHECK(tdm_session_create(ctx, m, o, &s) == TDM_E_UNSUPPORTED && !s, "session: plan-time error");
    tdm_session_options_destroy(o);
    tdm_model_destroy(m);
}

static int violation_names(const tdm_plan *p, const char *const *names, size_t n)
{
    if (tdm_plan_violation_count(p) != n) {
        fprintf(stderr, "  %zu violations, expected %zu\n", tdm_plan_violation_count(p), n);
        return 0;
    }
    for (size_t k = 0; k < n; k++) {
        int found = 0;
        for (size_t i = 0; i < n; i++) {
            const char *node, *reason, *detail;
            tdm_plan_violation(p, i, &node, &reason, &detail);
            found |= strcmp(node, names[k]) == 0 && reason[0] && detail[0];
        }
        if (!found) {
            fprintf(stderr, "  %s is not listed\n", names[k]);
            return 0;
        }
    }
    return 1;
}

static void case_policy(void)
{
    const char *three[] = {"ln_a", "ln_b", "ln_c"};
    tdm_model *m = load("three_ln");
    tdm_session *s = NULL;
    tdm_plan *p;
    tdm_session_options *o = opts("vnpu:edge-npu,cpu", "op");

    /* allow */
    p = plan_of(m, o);
    CHECK(tdm_plan_violation_count(p) == 0 && !tdm_plan_error(p)[0] && tdm_plan_status(p) == TDM_OK, "allow");
    tdm_plan_destroy(p);
    /* deny: every offender, and the session refuses */
    tdm_session_options_set_fallback(o, TDM_FALLBACK_DENY);
    p = plan_of(m, o);
    CHECK(violation_names(p, three, 3), "deny lists all three");
    CHECK(strstr(tdm_plan_error(p), "deny") != NULL && tdm_plan_status(p) == TDM_E_POLICY, "sentence: %s",
          tdm_plan_error(p));
    tdm_plan_destroy(p);
    CHECK(tdm_session_create(ctx, m, o, &s) == TDM_E_POLICY && !s, "deny: the session fails");
    CHECK(strstr(tdm_ctx_error(ctx), "ln_a") && strstr(tdm_ctx_error(ctx), "ln_c"), "session error lists: %s",
          tdm_ctx_error(ctx));
    /* deny-compute: LayerNormalization is compute */
    tdm_session_options_set_fallback(o, TDM_FALLBACK_DENY_COMPUTE);
    p = plan_of(m, o);
    CHECK(violation_names(p, three, 3), "deny-compute lists compute offenders");
    tdm_plan_destroy(p);
    tdm_session_options_destroy(o);

    /* ratio budget */
    o = opts("vnpu:edge-npu,cpu", "op");
    tdm_session_options_set_max_fallback_ratio(o, 0.01);
    p = plan_of(m, o);
    CHECK(violation_names(p, three, 3), "ratio 0.01");
    CHECK(strstr(tdm_plan_error(p), "ratio") != NULL && tdm_plan_status(p) == TDM_E_POLICY, "%s", tdm_plan_error(p));
    tdm_plan_destroy(p);
    tdm_session_options_set_max_fallback_ratio(o, 0.99);
    p = plan_of(m, o);
    CHECK(tdm_plan_violation_count(p) == 0, "ratio 0.99");
    tdm_plan_destroy(p);
    CHECK(tdm_session_options_set_max_fallback_ratio(o, 1.5) == TDM_E_USAGE, "ratio > 1");
    tdm_session_options_destroy(o);

    /* environment */
    o = opts("vnpu:edge-npu,cpu", "op");
    setenv("TANDEM_FALLBACK", "deny", 1);
    p = plan_of(m, o);
    CHECK(violation_names(p, three, 3), "TANDEM_FALLBACK=deny");
    tdm_plan_destroy(p);
    tdm_session_options_set_fallback(o, TDM_FALLBACK_ALLOW);
    p = plan_of(m, o);
    CHECK(tdm_plan_violation_count(p) == 0, "an explicit allow beats the environment");
    tdm_plan_destroy(p);
    tdm_session_options_destroy(o);
    o = opts("vnpu:edge-npu,cpu", "op");
    setenv("TANDEM_FALLBACK", "sometimes", 1);
    CHECK(tdm_plan_create(ctx, m, o, &p) == TDM_E_USAGE && strstr(tdm_ctx_error(ctx), "TANDEM_FALLBACK"),
          "a bad TANDEM_FALLBACK: %s", tdm_ctx_error(ctx));
    unsetenv("TANDEM_FALLBACK");
    tdm_session_options_destroy(o);
    tdm_model_destroy(m);

    /* deny-compute lets bookkeeping ops fall back */
    char dev[1200];
    snprintf(dev, sizeof dev, "vnpu:%s,cpu", test_profile);
    m = load("shape_op");
    o = opts(dev, "op");
    tdm_session_options_set_fallback(o, TDM_FALLBACK_DENY_COMPUTE);
    p = plan_of(m, o);
    CHECK(node_is(p, "shape_of_x", "cpu", "OP_UNSUPPORTED"), "Shape falls back");
    CHECK(node_is(p, "relu", "vnpu:test-npu", "OK"), "relu");
    CHECK(tdm_plan_violation_count(p) == 0, "deny-compute allows Shape");
    tdm_plan_destroy(p);
    tdm_session_options_set_fallback(o, TDM_FALLBACK_DENY);
    p = plan_of(m, o);
    const char *shape_only[] = {"shape_of_x"};
    CHECK(violation_names(p, shape_only, 1), "deny refuses Shape");
    tdm_plan_destroy(p);
    tdm_session_options_destroy(o);
    tdm_model_destroy(m);

    /* boundary budget */
    m = load("ok");
    o = opts("vnpu:edge-npu,cpu", "op");
    tdm_session_options_set_max_boundary_bytes(o, 1000);
    p = plan_of(m, o);
    CHECK(tdm_plan_violation_count(p) == 2 && strstr(tdm_plan_error(p), "1792"),
          "boundary 1792 > 1000: %s (%zu)", tdm_plan_error(p), tdm_plan_violation_count(p));
    tdm_plan_destroy(p);
    tdm_session_options_set_max_boundary_bytes(o, 1792);
    p = plan_of(m, o);
    CHECK(tdm_plan_violation_count(p) == 0, "boundary 1792 <= 1792");
    tdm_plan_destroy(p);
    tdm_session_options_destroy(o);
    tdm_model_destroy(m);
}

/* The partition graph of p is a DAG, each partition one device, and every
 * (tensor, destination) copied once. */
static int plan_sane(const tdm_plan *p)
{
    int ok = 1, P = p->n_parts;
    const gr_graph *g = p->g;
    unsigned char *edge = calloc((size_t)P * (size_t)P + 1, 1);
    for (int n = 0; n < g->n_nodes; n++) {
        const plan_node *pn = &p->nodes[n];
        if (p->parts[pn->partition].device != pn->device)
            ok = 0;
        for (int i = 0; i < g->nodes[n].n_inputs; i++) {
            int v = g->nodes[n].inputs[i];
            for (int q = 0; v >= 0 && q < g->n_nodes; q++)
                for (int o = 0; o < g->nodes[q].n_outputs; o++)
                    if (g->nodes[q].outputs[o] == v && p->nodes[q].partition != pn->partition)
                        edge[(size_t)p->nodes[q].partition * (size_t)P + (size_t)pn->partition] = 1;
        }
    }
    /* cycle check: repeatedly remove partitions without incoming edges */
    unsigned char *gone = calloc((size_t)P + 1, 1);
    for (int round = 0; round < P; round++)
        for (int a = 0; a < P; a++) {
            if (gone[a])
                continue;
            int indeg = 0;
            for (int b = 0; b < P; b++)
                indeg += !gone[b] && edge[(size_t)b * (size_t)P + (size_t)a];
            if (!indeg)
                gone[a] = 1;
        }
    for (int a = 0; a < P; a++)
        if (!gone[a]) {
            fprintf(stderr, "  partition %d is on a cycle\n", a);
            ok = 0;
        }
    for (int c = 0; c < p->n_copies; c++)
        for (int d = 0; d < c; d++)
            if (p->copies[c].value == p->copies[d].value && p->copies[c].to == p->copies[d].to) {
                fprintf(stderr, "  '%s' is copied twice to device %d\n", g->values[p->copies[c].value].name,
                        p->copies[c].to);
                ok = 0;
            }
    free(edge);
    free(gone);
    return ok;
}

static void case_acyclic(void)
{
    const char *models[] = {"ok", "op_unsupported", "island", "three_ln", "diamond", "memory", "split", "mixed"};
    const char *grans[] = {"op", "subgraph", "graph"};
    for (size_t k = 0; k < sizeof models / sizeof *models; k++) {
        tdm_model *m = load(models[k]);
        for (int gi = 0; gi < 3; gi++) {
            tdm_session_options *o = opts("vnpu:edge-npu,cpu", grans[gi]);
            tdm_plan *p = plan_of(m, o);
            CHECK(plan_sane(p), "%s (%s)", models[k], grans[gi]);
            tdm_plan_destroy(p);
            tdm_session_options_destroy(o);
        }
        tdm_model_destroy(m);
    }
    /* the diamond: the NPU partitions on both sides of the cpu branch */
    tdm_model *m = load("diamond");
    tdm_session_options *o = opts("vnpu:edge-npu,cpu", "op");
    tdm_plan *p = plan_of(m, o);
    CHECK(node_is(p, "left_ln", "cpu", "OP_UNSUPPORTED") && node_is(p, "join", "vnpu:edge-npu", "OK"), "diamond");
    CHECK(p->n_parts == 3, "diamond: %d partitions (npu, cpu, npu expected)", p->n_parts);
    CHECK(agrees(m, o, 0.999), "outputs");
    /* the executor makes exactly the plan's copies */
    tdm_session *s = NULL;
    tdm_tensor *in = input_for(m, 0, 3), *out = NULL;
    CHECK(tdm_session_create(ctx, m, o, &s) == TDM_OK, "session");
    CHECK(tdm_session_run(s, (const tdm_tensor *const *)&in, &out) == TDM_OK, "run");
    char *txt = NULL;
    tdm_session_ledger_json(s, &txt);
    cJSON *j = cJSON_Parse(txt);
    cJSON *run = cJSON_GetObjectItem(j, "run"), *sum = cJSON_GetObjectItem(j, "summary");
    CHECK(run && sum &&
              cJSON_GetObjectItem(run, "copies")->valuedouble == cJSON_GetObjectItem(sum, "copies")->valuedouble &&
              cJSON_GetObjectItem(run, "boundary_bytes")->valuedouble ==
                  cJSON_GetObjectItem(sum, "boundary_bytes")->valuedouble,
          "run copies and bytes equal the plan's");
    cJSON_Delete(j);
    tdm_free(txt);
    tdm_tensor_destroy(in);
    tdm_tensor_destroy(out);
    tdm_session_destroy(s);
    tdm_plan_destroy(p);
    tdm_session_options_destroy(o);
    tdm_model_destroy(m);
}

static void case_ledger(void)
{
    tdm_model *m = load("op_unsupported");
    tdm_session_options *o = opts("vnpu:edge-npu,cpu", "op");
    tdm_plan *p = plan_of(m, o);
    cJSON *j = ledger(p);
    const char *keys[] = {"model", "devices", "granularity", "nodes", "partitions", "summary"};
    for (size_t k = 0; k < 6; k++)
        CHECK(cJSON_GetObjectItem(j, keys[k]) != NULL, "ledger key %s", keys[k]);
    CHECK(strcmp(cJSON_GetObjectItem(j, "model")->valuestring, "op_unsupported.onnx") == 0, "model name");
    cJSON *sum = cJSON_GetObjectItem(j, "summary"), *est = cJSON_GetObjectItem(sum, "estimated_ms");
    const char *skeys[] = {"nodes_by_device", "fallback_nodes", "boundary_bytes", "partitions", "estimated_ms"};
    for (size_t k = 0; k < 5; k++)
        CHECK(cJSON_GetObjectItem(sum, skeys[k]) != NULL, "summary key %s", skeys[k]);
    CHECK(est && cJSON_GetObjectItem(est, "total") && cJSON_GetObjectItem(est, "copies") &&
              cJSON_IsTrue(cJSON_GetObjectItem(est, "modeled")) && cJSON_GetObjectItem(est, "by_device"),
          "estimated_ms");
    CHECK(cJSON_GetObjectItem(sum, "fallback_nodes")->valueint == 1, "one fallback");
    cJSON *part;
    int n_in = 0;
    cJSON_ArrayForEach(part, cJSON_GetObjectItem(j, "partitions"))
    {
        cJSON *x;
        CHECK(cJSON_GetObjectItem(part, "peak_bytes") && cJSON_GetObjectItem(part, "device"), "partition keys");
        cJSON_ArrayForEach(x, cJSON_GetObjectItem(part, "inputs"))
        {
            CHECK(cJSON_GetObjectItem(x, "tensor") && cJSON_GetObjectItem(x, "bytes") && cJSON_GetObjectItem(x, "from"),
                  "input keys");
            n_in++;
        }
    }
    CHECK(n_in >= 3, "copies listed as partition inputs (%d)", n_in);
    cJSON_Delete(j);
    char *txt = NULL;
    CHECK(tdm_plan_report(p, &txt) == TDM_OK && strstr(txt, "fallback nodes (1)") && strstr(txt, "OP_UNSUPPORTED") &&
              strstr(txt, "modeled") && strstr(txt, "boundary tensors"),
          "report:\n%s", txt ? txt : "");
    tdm_free(txt);
    tdm_plan_destroy(p);
    tdm_session_options_destroy(o);
    tdm_model_destroy(m);
}

static void case_plugin(void)
{
    char lib[1200];
    snprintf(lib, sizeof lib, "%s/libtandem-example.so", plugin_dir);
    tdm_model *m = load("plugin");
    tdm_session_options *o = opts("example:sigmoid_limit=16", "op");
    tdm_session_options_add_plugin(o, lib);
    tdm_plan *p = plan_of(m, o);
    CHECK(node_is(p, "p_relu", "example", "OK") && node_is(p, "p_sigmoid", "example", "OK") &&
              node_is(p, "p_mul", "example", "OK"),
          "plugin nodes");
    CHECK(node_is(p, "p_ln", "cpu", "OP_UNSUPPORTED"), "LayerNormalization on cpu");
    CHECK(plan_sane(p), "plugin plan");
    tdm_plan_destroy(p);
    CHECK(agrees(m, o, 0.99999), "plugin outputs");
    /* the plugin's internal fallback (Sigmoid over 16 elements) reaches the ledger */
    tdm_session *s = NULL;
    tdm_tensor *in = input_for(m, 0, 5), *out = NULL;
    CHECK(tdm_session_create(ctx, m, o, &s) == TDM_OK, "session: %s", tdm_ctx_error(ctx));
    CHECK(s && tdm_session_run(s, (const tdm_tensor *const *)&in, &out) == TDM_OK, "run: %s",
          s ? tdm_session_error(s) : "");
    char *txt = NULL;
    if (s)
        tdm_session_ledger_json(s, &txt);
    CHECK(txt && strstr(txt, "device_fallbacks") && strstr(txt, "p_sigmoid"), "device fallbacks in the ledger");
    tdm_free(txt);
    tdm_tensor_destroy(out);
    out = NULL;
    tdm_session_destroy(s);
    tdm_session_options_destroy(o);
    tdm_tensor_destroy(in);
    tdm_model_destroy(m);
}

/* A device that fails at run time (its memory taken by someone else):
 * TDM_E_DEVICE naming the device and the node; the next run, with the
 * memory back, works. */
static void case_fault(void)
{
    tdm_model *m = load("ok");
    tdm_session_options *o = opts("vnpu:edge-npu,cpu", "op");
    tdm_session *s = NULL;
    tdm_tensor *in = input_for(m, 0, 5), *out = NULL;
    tdm_err e;
    CHECK(tdm_session_create(ctx, m, o, &s) == TDM_OK, "session: %s", tdm_ctx_error(ctx));
    if (!s)
        return;
    const dev_instance *d = &tdm_session_plan(s)->devs->items[0];
    CHECK(d->ext && d->ext->reserve(d->dev.ctx, 4194304 - 16, &e) == TDM_OK, "taking the device's memory");
    tdm_status st = tdm_session_run(s, (const tdm_tensor *const *)&in, &out);
    CHECK(st == TDM_E_DEVICE && strstr(tdm_session_error(s), "vnpu:edge-npu"), "device fault: %s: %s",
          tdm_status_str(st), tdm_session_error(s));
    CHECK(!out, "no output on failure");
    d->ext->release(d->dev.ctx, 4194304 - 16);
    CHECK(tdm_session_run(s, (const tdm_tensor *const *)&in, &out) == TDM_OK, "after release: %s",
          tdm_session_error(s));
    tdm_tensor_destroy(out);
    tdm_tensor_destroy(in);
    tdm_session_destroy(s);
    tdm_session_options_destroy(o);
    tdm_model_destroy(m);
}

/* ------------------------------------------------------------- threads */

typedef struct worker {
    tdm_session *s;
    const tdm_tensor *in;
    const tdm_tensor *ref;
    int runs, bad;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    for (int r = 0; r < w->runs; r++) {
        tdm_tensor *out = NULL;
        if (tdm_session_run(w->s, &w->in, &out) != TDM_OK) {
            w->bad++;
            continue;
        }
        if (tdm_tensor_nbytes(out) != tdm_tensor_nbytes(w->ref) ||
            memcmp(tdm_tensor_cdata(out), tdm_tensor_cdata(w->ref), tdm_tensor_nbytes(out)) != 0)
            w->bad++;
        tdm_tensor_destroy(out);
    }
    return NULL;
}

static void case_threads(void)
{
    tdm_model *m = load("mixed");
    tdm_session_options *o = opts("vnpu:server-npu,cpu", "op");
    tdm_session *s = NULL;
    tdm_tensor *in = input_for(m, 0, 11), *ref = NULL;
    if (tdm_session_create(ctx, m, o, &s) != TDM_OK) {
        CHECK(0, "session: %s", tdm_ctx_error(ctx));
        return;
    }
    const tdm_plan *p = tdm_session_plan(s);
    CHECK(node_is(p, "erf", "cpu", "OP_UNSUPPORTED") && node_is(p, "conv1", "vnpu:server-npu", "OK"),
          "a mixed plan");
    CHECK(tdm_session_run(s, (const tdm_tensor *const *)&in, &ref) == TDM_OK, "single run");
    worker w[8];
    pthread_t t[8];
    for (int k = 0; k < 8; k++) {
        w[k] = (worker){s, in, ref, 100, 0};
        pthread_create(&t[k], NULL, work, &w[k]);
    }
    int bad = 0;
    for (int k = 0; k < 8; k++) {
        pthread_join(t[k], NULL);
        bad += w[k].bad;
    }
    CHECK(bad == 0, "%d of 800 concurrent runs differ from the single-thread output", bad);
    char buf[64];
    CHECK(tdm_session_error_copy(s, buf, sizeof buf) == TDM_OK && buf[0] == '\0', "no error after the runs");
    tdm_tensor_destroy(in);
    tdm_tensor_destroy(ref);
    tdm_session_destroy(s);
    tdm_session_options_destroy(o);
    tdm_model_destroy(m);
}

static void case_cpu_default(void)
{
    /* no options: cpu only, one partition, no copies, no fallback */
    tdm_model *m = load("op_unsupported");
    tdm_plan *p = plan_of(m, NULL);
    tdm_plan_summary s;
    tdm_plan_get_summary(p, &s);
    CHECK(tdm_plan_device_count(p) >= 1 && strcmp(tdm_plan_device_name(p, tdm_plan_device_count(p) - 1), "cpu") == 0,
          "cpu last");
    CHECK(s.partitions == 1 && s.copies == 0 && s.fallback_nodes == 0, "cpu only: %zu partitions, %zu copies",
          s.partitions, s.copies);
    CHECK(node_is(p, "ln", "cpu", "OK"), "cpu is the first device");
    tdm_plan_destroy(p);
    tdm_model_destroy(m);
}

static int node_named(const tdm_plan *p, const char *name)
{
    for (int n = 0; n < p->n_nodes; n++)
        if (strcmp(p->g->nodes[n].name, name) == 0)
            return n;
    fprintf(stderr, "no node %s\n", name);
    exit(1);
}

/* The cpu nodes the plan prices as fused away are the nodes the executor's
 * fusion swallows: in a mixed plan each cpu partition's (run/hpart.c:
 * fuse_plan_build on the partition's own graph), in an all-cpu plan the
 * whole graph's. A vnpu node is priced fused only on a profile whose
 * compiler fuses ("fusion": "epilogue"; plan.vnpu_fusion prices it).
 * *n_fused: how many cpu nodes. */
static int fusion_agrees(const tdm_plan *p, int *n_fused)
{
    tdm_err e;
    exec_prog *x = NULL;
    int ok = 1, n_parts = 0, cpu = (int)p->devs->n - 1;
    *n_fused = 0;
    if (exec_prog_build(&e, p, &x) != TDM_OK) {
        fprintf(stderr, "  exec_prog_build: %s\n", e.msg);
        return 0;
    }
    const hpart *hp = exec_prog_parts(x, &n_parts);
    unsigned char *exec = calloc((size_t)p->n_nodes + 1, 1);
    fuse_plan *whole = NULL;
    int all_cpu = 1;
    for (int n = 0; n < p->n_nodes; n++)
        all_cpu &= p->nodes[n].device == cpu;
    if (all_cpu && fuse_plan_build(&e, p->g, &whole) != TDM_OK)
        ok = 0;
    for (int n = 0; all_cpu && n < p->n_nodes; n++)
        exec[n] = (unsigned char)fuse_is_member(whole, n);
    for (int k = 0; k < n_parts; k++)
        for (int i = 0; i < hp[k].g->n_nodes; i++)
            exec[hp[k].node_of[i]] = (unsigned char)fuse_is_member(hp[k].cache.fuse, i);
    for (int n = 0; n < p->n_nodes; n++) {
        if (p->nodes[n].device != cpu) {
            const dev_ext *dx = p->devs->items[p->nodes[n].device].ext;
            if (p->nodes[n].fused && !(dx && dx->fusion == DEV_FUSION_EPILOGUE)) {
                fprintf(stderr, "  node %s: priced fused on %s, which fuses nothing\n", p->g->nodes[n].name,
                        p->devs->items[p->nodes[n].device].name);
                ok = 0;
            }
            continue;
        }
        if (exec[n] != (p->nodes[n].fused != 0)) {
            fprintf(stderr, "  node %s: the executor %s it, the estimate %s\n", p->g->nodes[n].name,
                    exec[n] ? "fuses" : "runs", p->nodes[n].fused ? "prices it fused (0)" : "prices it run");
            ok = 0;
        }
        *n_fused += exec[n];
    }
    fuse_plan_free(whole);
    free(exec);
    exec_prog_free(x);
    return ok;
}

/* The plan's total is its nodes + copies + one round trip per device
 * partition. */
static int total_is_sum(const tdm_plan *p)
{
    double nodes = 0, trips = 0;
    for (int n = 0; n < p->n_nodes; n++)
        nodes += p->nodes[n].est_ms >= 0 ? p->nodes[n].est_ms : 0;
    for (int q = 0; q < p->n_parts; q++) {
        const dev_instance *di = &p->devs->items[p->parts[q].device];
        trips += di->ext && di->ext->partition_ms > 0 ? di->ext->partition_ms : 0;
    }
    double want = nodes + p->est_copies + trips;
    if (fabs(p->est_total - want) > 1e-9 * (1 + want)) {
        fprintf(stderr, "  total %.9f ms, nodes %.9f + copies %.9f + round trips %.9f = %.9f\n", p->est_total, nodes,
                p->est_copies, trips, want);
        return 0;
    }
    return 1;
}

/* A calibration file with cpu's threaded and fused times of the Conv,
 * BatchNormalization and Relu of fused_part (keys from plan p). */
static void write_calibration(const tdm_plan *p, const char *path)
{
    static const char *names[] = {"cbr_conv", "cbr_bn", "cbr_relu"};
    static const double threaded[] = {2.0, 0.5, 0.25}, fused[] = {1.0, 0, 0};
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
    fprintf(f, "{\"tandem_calibration\": 1, \"nodes\": {");
    for (int k = 0; k < 3; k++) {
        char key[128];
        tdm_err e;
        if (plan_node_signature(&e, &p->descs[node_named(p, names[k])], 1, key, sizeof key, NULL) != TDM_OK)
            exit(1);
        fprintf(f, "%s\"%s\": {\"op\": \"x\", \"devices\": {\"cpu\": {\"supported\": true, \"ms\": 9, "
                "\"threaded_ms\": %g, \"fused_ms\": %g}}}", k ? ", " : "", key, threaded[k], fused[k]);
    }
    fprintf(f, "}}\n");
    fclose(f);
}

/* A cpu partition of a mixed plan is priced as it runs, fused (the rescue
 * off, which would fold the BatchNormalization for the NPU): the Conv
 * as the Winograd Conv (the cpu device's fused estimate, or its fused_ms),
 * the BatchNormalization folded into it and the Relu in its epilogue at 0;
 * the estimate's fusion is the executor's; the total is nodes + copies +
 * round trips. */
static void case_fused_estimate(void)
{
    tdm_model *m = load("fused_part");
    char spec[1100], cal[1100];
    snprintf(spec, sizeof spec, "vnpu:%s,cpu", test_profile);
    tdm_session_options *o = opts(spec, "op");
    tdm_session_options_set_rescue(o, TDM_RESCUE_OFF); /* no conv-bn rewrite for the NPU */
    tdm_session_options_add_pin(o, "cbr_conv=cpu");
    tdm_session_options_add_pin(o, "cbr_relu=cpu");
    tdm_plan *p = plan_of(m, o);
    int cpu = (int)p->devs->n - 1, conv = node_named(p, "cbr_conv"), bn = node_named(p, "cbr_bn"),
        relu = node_named(p, "cbr_relu"), n_fused = 0;
    const dev_instance *cd = &p->devs->items[cpu];
    CHECK(p->nodes[conv].device == cpu && p->nodes[bn].device == cpu && p->nodes[relu].device == cpu &&
              p->nodes[node_named(p, "pre_mul")].device == 0 && p->nodes[node_named(p, "post_add")].device == 0,
          "npu, cpu x 3, npu");
    CHECK(p->nodes[bn].fused && p->nodes[bn].est_ms == 0, "the BatchNormalization folded: %g ms", p->nodes[bn].est_ms);
    CHECK(p->nodes[relu].fused && p->nodes[relu].est_ms == 0, "the Relu fused: %g ms", p->nodes[relu].est_ms);
    double unfused = cd->dev.iface->estimate_ms(cd->dev.ctx, &p->descs[conv], NULL);
    double wino = cd->ext->estimate_fused_ms(cd->dev.ctx, &p->descs[conv], NULL);
    CHECK(!p->nodes[conv].fused && p->nodes[conv].est_ms == wino && wino < unfused,
          "the Conv at its Winograd estimate: %g ms (fused estimate %g, unfused %g)", p->nodes[conv].est_ms, wino,
          unfused);
    CHECK(dev_conv_winograd_tile(&p->descs[conv]) == 4, "F(4x4, 3x3) for 16 -> 16 channels at 12x12");
    CHECK(p->est_copies > 0 && total_is_sum(p), "copies %g ms; total %g", p->est_copies, p->est_total);
    CHECK(fusion_agrees(p, &n_fused) && n_fused == 2, "the executor fuses the same %d nodes", n_fused);
    /* with --no-fusion the same partition is priced unfused */
    tdm_session_options_set_fusion(o, TDM_FUSION_OFF);
    tdm_plan *q = plan_of(m, o);
    CHECK(!q->nodes[bn].fused && q->nodes[bn].est_ms > 0 && q->nodes[conv].est_ms == unfused, "unfused: bn %g, conv %g",
          q->nodes[bn].est_ms, q->nodes[conv].est_ms);
    tdm_plan_destroy(q);
    tdm_session_options_set_fusion(o, TDM_FUSION_ON);

    /* calibrated: cpu's fused_ms for what runs, 0 for what fuses away */
    snprintf(cal, sizeof cal, "%s/fused_part.cal.json", models_dir);
    write_calibration(p, cal);
    tdm_plan_destroy(p);
    tdm_session_options_set_calibration(o, cal);
    p = plan_of(m, o);
    CHECK(p->nodes[conv].est_ms == 1.0 && p->nodes[bn].est_ms == 0 && p->nodes[relu].est_ms == 0,
          "calibrated: conv %g (fused_ms 1), bn %g, relu %g", p->nodes[conv].est_ms, p->nodes[bn].est_ms,
          p->nodes[relu].est_ms);
    CHECK(total_is_sum(p) && fusion_agrees(p, &n_fused) && n_fused == 2, "calibrated total and fusion");
    tdm_plan_destroy(p);
    tdm_session_options_destroy(o);
    /* the Conv on the NPU: the BatchNormalization heads the cpu partition,
     * not folded there (the all-cpu session folded it: its fused_ms 0 does
     * not apply), so it costs its threaded_ms; the Relu still fuses */
    o = opts(spec, "op");
    tdm_session_options_set_rescue(o, TDM_RESCUE_OFF);
    tdm_session_options_add_pin(o, "cbr_relu=cpu");
    tdm_session_options_set_calibration(o, cal);
    p = plan_of(m, o);
    CHECK(p->nodes[conv].device == 0 && !p->nodes[bn].fused && p->nodes[bn].est_ms == 0.5 && p->nodes[relu].fused &&
              p->nodes[relu].est_ms == 0,
          "conv on the NPU: bn %g (threaded_ms 0.5), relu %g", p->nodes[bn].est_ms, p->nodes[relu].est_ms);
    CHECK(total_is_sum(p) && fusion_agrees(p, &n_fused) && n_fused == 1, "fusion: %d", n_fused);
    tdm_plan_destroy(p);
    tdm_session_options_destroy(o);
    /* the Conv's output also read on the NPU after the partition: the Relu
     * runs (the value escapes the partition; all on cpu it fuses) */
    tdm_model *me = load("fused_escape");
    o = opts(spec, "op");
    tdm_session_options_add_pin(o, "cbr_conv=cpu");
    tdm_session_options_add_pin(o, "cbr_relu=cpu");
    p = plan_of(me, o);
    relu = node_named(p, "cbr_relu");
    CHECK(p->nodes[relu].device == cpu && !p->nodes[relu].fused && p->nodes[relu].est_ms > 0 &&
              fusion_agrees(p, &n_fused) && n_fused == 0 && total_is_sum(p),
          "escape: relu %g ms, %d fused", p->nodes[relu].est_ms, n_fused);
    tdm_plan_destroy(p);
    tdm_session_options_destroy(o);
    o = opts("cpu", "op");
    p = plan_of(me, o);
    CHECK(p->nodes[relu].fused && fusion_agrees(p, &n_fused) && n_fused == 2, "escape, all cpu: %d fused", n_fused);
    tdm_plan_destroy(p);
    tdm_session_options_destroy(o);
    tdm_model_destroy(me);
    /* all on cpu: the whole graph's fusion */
    o = opts("cpu", "op");
    tdm_session_options_set_calibration(o, cal);
    p = plan_of(m, o);
    CHECK(p->nodes[conv].est_ms == 1.0 && p->nodes[bn].est_ms == 0 && p->nodes[relu].est_ms == 0 &&
              fusion_agrees(p, &n_fused) && n_fused == 3 && total_is_sum(p),
          "all cpu: conv %g, %d fused (BN, Relu, post_add)", p->nodes[conv].est_ms, n_fused);
    tdm_plan_destroy(p);
    tdm_session_options_destroy(o);
    tdm_model_destroy(m);
}

/* The estimates' fusion is the executor's on the plans of the synthetic
 * models and of the models in TDM_FUSE_MODELS (paths, ':'-separated), for
 * op, subgraph and graph on edge-npu and rk3588 and all on cpu. */
static void case_fused_agree(void)
{
    const char *models[] = {"ok", "island", "three_ln", "diamond", "split", "mixed", "fused_part"};
    const char *grans[] = {"op", "subgraph", "graph"}, *devs[] = {"vnpu:edge-npu,cpu", "vnpu:rk3588,cpu"};
    char list[4096];
    snprintf(list, sizeof list, "%s", getenv("TDM_FUSE_MODELS") ? getenv("TDM_FUSE_MODELS") : "");
    size_t n_syn = sizeof models / sizeof *models;
    char *save = NULL, *next = strtok_r(list, ":", &save);
    for (size_t k = 0; k < n_syn || next; k++) {
        tdm_model *m = NULL;
        const char *name = k < n_syn ? models[k] : next;
        if (k < n_syn)
            m = load(models[k]);
        else if (tdm_model_load(ctx, next, &m) != TDM_OK) {
            CHECK(0, "cannot load %s: %s", next, tdm_ctx_error(ctx));
            break;
        }
        int total = 0;
        for (int di = 0; di < 3; di++)
            for (int gi = 0; gi < (di < 2 ? 3 : 1); gi++) {
                tdm_session_options *o = opts(di < 2 ? devs[di] : "cpu", grans[gi]);
                tdm_plan *p = plan_of(m, o);
                int n_fused;
                CHECK(fusion_agrees(p, &n_fused), "%s (%s, %s)", name, di < 2 ? devs[di] : "cpu", grans[gi]);
                total += n_fused;
                tdm_plan_destroy(p);
                tdm_session_options_destroy(o);
            }
        printf("%s: %d nodes fused over its 7 plans, as the executor fuses them\n", name, total);
        tdm_model_destroy(m);
        if (k >= n_syn)
            next = strtok_r(NULL, ":", &save);
    }
}

/* The subgraph attribute name of node nd. */
static const gr_graph *sub_of(const gr_node *nd, const char *name)
{
    for (int a = 0; a < nd->n_attrs; a++)
        if (nd->attrs[a].type == GA_GRAPH && strcmp(nd->attrs[a].name, name) == 0)
            return nd->attrs[a].g;
    fprintf(stderr, "no subgraph %s on %s\n", name, nd->name);
    exit(1);
}

/* The summed per-node price of g's own nodes on device d, as the device
 * prices each node the planner describes (their subgraphs not included). */
static double own_price(const tdm_plan *p, const gr_graph *g, int d)
{
    const dev_instance *di = &p->devs->items[d];
    plan_arena a;
    tdm_err e;
    double t = 0;
    plan_arena_init(&a);
    err_clear(&e);
    for (int k = 0; k < g->n_nodes; k++) {
        tdm_node_desc desc;
        if (plan_desc_build(&e, &a, g, &g->nodes[k], &desc) != TDM_OK) {
            fprintf(stderr, "desc %s\n", g->nodes[k].name);
            exit(1);
        }
        t += di->dev.iface->estimate_ms(di->dev.ctx, &desc, NULL);
    }
    plan_arena_free(&a);
    return t;
}

static int near(double a, double b) { return fabs(a - b) <= 1e-9 * (1 + fabs(b)); }

/* One control-flow node's plan on cpu: the node, the device's price of the
 * node itself, and the plan's ledger. */
typedef struct cf_case {
    tdm_model *m;
    tdm_plan *p;
    cJSON *j;
    int n, cpu;
    const gr_node *nd;
    double own;
    const char *basis; /* the ledger's estimate_basis ("": none) */
    int unknown;       /* the summary's trip_counts_unknown */
} cf_case;

static void cf_open(cf_case *c, const char *model, const char *node)
{
    c->m = load(model);
    tdm_session_options *o = opts("cpu", "op");
    c->p = plan_of(c->m, o);
    tdm_session_options_destroy(o);
    c->j = ledger(c->p);
    c->n = node_named(c->p, node);
    c->cpu = (int)c->p->devs->n - 1;
    c->nd = &c->p->g->nodes[c->n];
    const dev_instance *cd = &c->p->devs->items[c->cpu];
    c->own = cd->dev.iface->estimate_ms(cd->dev.ctx, &c->p->descs[c->n], NULL);
    cJSON *b = cJSON_GetObjectItem(ledger_node(c->j, node), "estimate_basis");
    c->basis = cJSON_IsString(b) ? b->valuestring : "";
    cJSON *est = cJSON_GetObjectItem(cJSON_GetObjectItem(c->j, "summary"), "estimated_ms");
    c->unknown = cJSON_GetObjectItem(est, "trip_counts_unknown")->valueint;
}

static double cf_price(const cf_case *c, const gr_graph *g) { return own_price(c->p, g, c->cpu); }

static void cf_close(cf_case *c)
{
    cJSON_Delete(c->j);
    tdm_plan_destroy(c->p);
    tdm_model_destroy(c->m);
}

/* Control flow priced as it runs: an If at its constant condition's branch,
 * else its more expensive one; a Loop at its body x a constant trip count,
 * x 1 (flagged) when unknown; a Scan at its body x the scan length; an If
 * inside a Loop recursively, its condition an outer constant. The expected
 * figures are the device's own prices of the subgraphs' nodes. */
static void case_cf_estimate(void)
{
    cf_case c;
    cf_open(&c, "cf_if_const", "cf_if");
    double th = cf_price(&c, sub_of(c.nd, "then_branch")), el = cf_price(&c, sub_of(c.nd, "else_branch"));
    CHECK(th > 2 * el && el > 0, "the then branch (a 64x64 MatMul) costs more than the else (a Relu): %g, %g", th, el);
    CHECK(near(c.p->nodes[c.n].est_ms, c.own + el) && c.p->nodes[c.n].est_modeled,
          "If on a constant false: %g ms, want %g + else %g", c.p->nodes[c.n].est_ms, c.own, el);
    CHECK(strstr(c.basis, "else branch (constant condition)") && c.unknown == 0, "basis '%s'", c.basis);
    CHECK(near(c.p->est_total, c.p->nodes[c.n].est_ms), "total %g", c.p->est_total);
    cf_close(&c);

    cf_open(&c, "cf_if_var", "cf_if");
    CHECK(near(c.p->nodes[c.n].est_ms, c.own + th), "If on an input: %g ms, want %g + the dearer then %g",
          c.p->nodes[c.n].est_ms, c.own, th);
    CHECK(strstr(c.basis, "more expensive branch (then;") != NULL, "basis '%s'", c.basis);
    cf_close(&c);

    cf_open(&c, "cf_loop_const", "cf_loop");
    double body = cf_price(&c, sub_of(c.nd, "body"));
    CHECK(body > 0 && near(c.p->nodes[c.n].est_ms, c.own + 5 * body), "Loop M=5: %g ms, want %g + 5 x %g",
          c.p->nodes[c.n].est_ms, c.own, body);
    CHECK(strstr(c.basis, "body x 5 (constant trip count") && c.unknown == 0 &&
              !cJSON_GetObjectItem(ledger_node(c.j, "cf_loop"), "trip_count_unknown"),
          "basis '%s'", c.basis);
    cf_close(&c);

    cf_open(&c, "cf_loop_unknown", "cf_loop");
    CHECK(near(c.p->nodes[c.n].est_ms, c.own + body) && c.p->nodes[c.n].est_trips_unknown && c.p->est_trips_unknown == 1,
          "Loop, M an input: %g ms, want %g + 1 x %g, flagged", c.p->nodes[c.n].est_ms, c.own, body);
    CHECK(strstr(c.basis, "body x 1 (trip count unknown)") && c.unknown == 1 &&
              cJSON_IsTrue(cJSON_GetObjectItem(ledger_node(c.j, "cf_loop"), "trip_count_unknown")),
          "basis '%s', %d unknown", c.basis, c.unknown);
    cf_close(&c);
    cf_open(&c, "cf_loop_nolimit", "cf_loop");
    CHECK(near(c.p->nodes[c.n].est_ms, c.own + body) && c.unknown == 1 && strstr(c.basis, "trip count unknown"),
          "Loop, M = INT64_MAX: %g ms, want %g + 1 x %g, flagged ('%s')", c.p->nodes[c.n].est_ms, c.own, body, c.basis);
    cf_close(&c);
    cf_open(&c, "cf_loop_false", "cf_loop");
    CHECK(near(c.p->nodes[c.n].est_ms, c.own) && c.unknown == 0 && strstr(c.basis, "body x 0"),
          "Loop on a constant false: %g ms, want %g alone ('%s')", c.p->nodes[c.n].est_ms, c.own, c.basis);
    cf_close(&c);

    cf_open(&c, "cf_nested", "cf_loop");
    const gr_graph *bg = sub_of(c.nd, "body");
    const gr_node *inner = NULL;
    for (int k = 0; k < bg->n_nodes; k++)
        if (strcmp(bg->nodes[k].name, "body_if") == 0)
            inner = &bg->nodes[k];
    CHECK(inner != NULL, "the body's If");
    if (inner) {
        body = cf_price(&c, bg) + cf_price(&c, sub_of(inner, "else_branch"));
        CHECK(near(c.p->nodes[c.n].est_ms, c.own + 3 * body),
              "Loop M=3 over an If on the outer constant false: %g ms, want %g + 3 x %g (the body's nodes and the "
              "else branch)",
              c.p->nodes[c.n].est_ms, c.own, body);
    }
    cf_close(&c);

    cf_open(&c, "cf_scan", "cf_scan");
    body = cf_price(&c, sub_of(c.nd, "body"));
    CHECK(body > 0 && near(c.p->nodes[c.n].est_ms, c.own + 6 * body), "Scan over 6 rows: %g ms, want %g + 6 x %g",
          c.p->nodes[c.n].est_ms, c.own, body);
    CHECK(strstr(c.basis, "body x 6 (scan length)") != NULL, "basis '%s'", c.basis);
    CHECK(total_is_sum(c.p), "total %g", c.p->est_total);
    cf_close(&c);
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: test_plan CASE MODELS_DIR TEST_PROFILE PLUGIN_DIR\n");
        return 2;
    }
    const char *c = argv[1];
    models_dir = argv[2];
    test_profile = argv[3];
    plugin_dir = argv[4];
    if (tdm_ctx_create(&ctx))
        return 1;
    if (strcmp(c, "reason.ok") == 0)
        case_ok();
    else if (strcmp(c, "reason.op_unsupported") == 0)
        reason_case("op_unsupported", "ln", "OP_UNSUPPORTED", "op");
    else if (strcmp(c, "reason.dtype_unsupported") == 0)
        reason_case("dtype", "relu64", "DTYPE_UNSUPPORTED", "op");
    else if (strcmp(c, "reason.attr_unsupported") == 0)
        reason_case("attr", "dilated", "ATTR_UNSUPPORTED", "op");
    else if (strcmp(c, "reason.shape_unsupported") == 0)
        reason_case("shape", "relu6d", "SHAPE_UNSUPPORTED", "op");
    else if (strcmp(c, "reason.memory") == 0)
        case_memory();
    else if (strcmp(c, "memory.split") == 0)
        case_split();
    else if (strcmp(c, "memory.storage") == 0)
        case_storage();
    else if (strcmp(c, "greedy") == 0)
        case_greedy();
    else if (strcmp(c, "reason.granularity") == 0)
        case_granularity();
    else if (strcmp(c, "reason.user") == 0)
        case_user();
    else if (strcmp(c, "nodevice") == 0)
        case_nodevice();
    else if (strcmp(c, "policy") == 0)
        case_policy();
    else if (strcmp(c, "acyclic") == 0)
        case_acyclic();
    else if (strcmp(c, "ledger") == 0)
        case_ledger();
    else if (strcmp(c, "plugin") == 0)
        case_plugin();
    else if (strcmp(c, "fault") == 0)
        case_fault();
    else if (strcmp(c, "threads") == 0)
        case_threads();
    else if (strcmp(c, "cpu_default") == 0)
        case_cpu_default();
    else if (strcmp(c, "fused_estimate") == 0)
        case_fused_estimate();
    else if (strcmp(c, "cf_estimate") == 0)
        case_cf_estimate();
    else if (strcmp(c, "fused_agree") == 0)
        case_fused_agree();
    else {
        fprintf(stderr, "unknown case %s\n", c);
        return 2;
    }
    tdm_ctx_destroy(ctx);
    if (failures)
        fprintf(stderr, "%s: %d check(s) failed\n", c, failures);
    return failures ? 1 : 0;
}
