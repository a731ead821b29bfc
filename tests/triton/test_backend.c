/* Unit tests of libtriton_tandem.so driven by the fake server
 * (fake_server.c): load, policy at load, batching of several requests into
 * one run and the split of its outputs, fixed-batch models run row by row,
 * errors as Triton errors with tandem's sentence, metrics.
 *
 * usage: test_triton_backend WORKDIR [SQUEEZENET.onnx]
 * The tiny model is written by the test itself (an ONNX protobuf encoded
 * here): X float [N, 4] -> Relu "relu" -> Erf "erf" -> Y [N, 4]. */
#define _POSIX_C_SOURCE 200809L
#include "fake_server.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int failures;
#define CHECK(cond)                                                                                                    \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);                                   \
            failures++;                                                                                                \
        }                                                                                                              \
    } while (0)

/* ------------------------------------------------------ a tiny ONNX writer */

typedef struct pb {
    unsigned char *b;
    size_t n, cap;
} pb;

static void pb_bytes(pb *p, const void *d, size_t n)
{
    if (p->n + n > p->cap) {
        p->cap = (p->n + n) * 2 + 64;
        p->b = realloc(p->b, p->cap);
        if (!p->b)
            abort();
    }
    memcpy(p->b + p->n, d, n);
    p->n += n;
}

static void pb_varint(pb *p, uint64_t v)
{
    unsigned char c;
    do {
        c = (unsigned char)(v & 0x7f);
        v >>= 7;
        if (v)
            c |= 0x80;
        pb_bytes(p, &c, 1);
    } while (v);
}

static void pb_int(pb *p, int field, uint64_t v)
{
    pb_varint(p, (uint64_t)field << 3);
    pb_varint(p, v);
}

static void pb_str(pb *p, int field, const char *s)
{
    pb_varint(p, (uint64_t)field << 3 | 2);
    pb_varint(p, strlen(s));
    pb_bytes(p, s, strlen(s));
}

static void pb_msg(pb *p, int field, pb *m)
{
    pb_varint(p, (uint64_t)field << 3 | 2);
    pb_varint(p, m->n);
    pb_bytes(p, m->b, m->n);
    free(m->b);
    memset(m, 0, sizeof *m);
}

/* ValueInfoProto: name, a tensor of ONNX element type elem and shape
 * [N, d1] (or [1, d1] when batch_one). */
static void pb_value_of(pb *graph, int field, const char *name, int elem, int batch_one, int64_t d1v)
{
    pb d0 = {0}, d1 = {0}, shape = {0}, tensor = {0}, type = {0}, vi = {0};
    if (batch_one)
        pb_int(&d0, 1, 1);
    else
        pb_str(&d0, 2, "N");
    pb_int(&d1, 1, (uint64_t)d1v);
    pb_msg(&shape, 1, &d0);
    pb_msg(&shape, 1, &d1);
    pb_int(&tensor, 1, (uint64_t)elem);
    pb_msg(&tensor, 2, &shape);
    pb_msg(&type, 1, &tensor);
    pb_str(&vi, 1, name);
    pb_msg(&vi, 2, &type);
    pb_msg(graph, field, &vi);
}

/* ValueInfoProto: name, float tensor [N, 4]. */
static void pb_value(pb *graph, int field, const char *name)
{
    pb_value_of(graph, field, name, 1 /* FLOAT */, 0, 4);
}

/* The model (graph, opset 13) written to path; 1 on success. */
static int pb_save_model(pb *graph, const char *path)
{
    pb model = {0}, opset = {0};
    pb_int(&model, 1, 8); /* ir_version */
    pb_str(&model, 2, "tandem-triton-test");
    pb_msg(&model, 7, graph);
    pb_str(&opset, 1, "");
    pb_int(&opset, 2, 13);
    pb_msg(&model, 8, &opset);
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(model.b, 1, model.n, f) == model.n;
    if (f)
        ok = fclose(f) == 0 && ok;
    free(model.b);
    return ok;
}

static void pb_node(pb *graph, const char *in, const char *out, const char *name, const char *op)
{
    pb n = {0};
    pb_str(&n, 1, in);
    pb_str(&n, 2, out);
    pb_str(&n, 3, name);
    pb_str(&n, 4, op);
    pb_msg(graph, 1, &n);
}

static int write_tiny_model(const char *path)
{
    pb graph = {0};
    pb_node(&graph, "X", "H", "relu", "Relu");
    pb_node(&graph, "H", "Y", "erf", "Erf");
    pb_str(&graph, 2, "tiny");
    pb_value(&graph, 11, "X");
    pb_value(&graph, 12, "Y");
    return pb_save_model(&graph, path);
}

/* A string model: X string [N, 3] -> Identity "id" -> Y; and, with normalize,
 * X string [1, 3] -> StringNormalizer (UPPER) "up" -> Y [1, 3]. */
static int write_string_model(const char *path, int normalize)
{
    pb graph = {0}, node = {0}, attr = {0};
    pb_str(&node, 1, "X");
    pb_str(&node, 2, "Y");
    pb_str(&node, 3, normalize ? "up" : "id");
    pb_str(&node, 4, normalize ? "StringNormalizer" : "Identity");
    if (normalize) {
        pb_str(&attr, 1, "case_change_action");
        pb_str(&attr, 4, "UPPER");
        pb_int(&attr, 20, 3); /* STRING */
        pb_msg(&node, 5, &attr);
    }
    pb_msg(&graph, 1, &node);
    pb_str(&graph, 2, "strings");
    pb_value_of(&graph, 11, "X", 8 /* STRING */, normalize, 3);
    pb_value_of(&graph, 12, "Y", 8, normalize, 3);
    return pb_save_model(&graph, path);
}

/* Triton's BYTES: each element a 4-byte little-endian length, then the bytes. */
static size_t bytes_pack(unsigned char *buf, const char *const *s, size_t n)
{
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(s[i]);
        unsigned char h[4] = {(unsigned char)len, (unsigned char)(len >> 8), (unsigned char)(len >> 16),
                              (unsigned char)(len >> 24)};
        memcpy(buf + at, h, 4);
        memcpy(buf + at + 4, s[i], len);
        at += 4 + len;
    }
    return at;
}

/* --------------------------------------------------------------- fixtures */

static char workdir[1024];
static TRITONBACKEND_Backend backend;

/* A model folder WORKDIR/NAME with 1/model.onnx (a copy of src or the tiny
 * model) and the given config JSON (as the server serializes config.pbtxt). */
static void make_model(TRITONBACKEND_Model *m, const char *name, const char *onnx, const char *config)
{
    static char dirs[16][1200];
    static int nd;
    char *dir = dirs[nd++ % 16];
    snprintf(dir, 1200, "%s/%s", workdir, name);
    char path[1300];
    mkdir(dir, 0777);
    snprintf(path, sizeof path, "%s/1", dir);
    mkdir(path, 0777);
    snprintf(path, sizeof path, "%s/1/model.onnx", dir);
    if (onnx) {
        unlink(path);
        if (symlink(onnx, path) != 0)
            perror(path);
    } else if (!write_tiny_model(path)) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
    memset(m, 0, sizeof *m);
    m->name = name;
    m->version = 1;
    m->repository = dir;
    m->config_json = config;
    m->backend = &backend;
}

static void make_request(TRITONBACKEND_Request *r, const char *in_name, TRITONSERVER_DataType dt, const int64_t *shape,
                         uint32_t rank, const void *data, uint64_t bytes, const char *out_name)
{
    memset(r, 0, sizeof *r);
    r->n_inputs = 1;
    r->inputs[0].name = in_name;
    r->inputs[0].dtype = dt;
    memcpy(r->inputs[0].shape, shape, sizeof *shape * rank);
    r->inputs[0].rank = rank;
    r->inputs[0].data = data;
    r->inputs[0].bytes = bytes;
    r->inputs[0].buffers = 2; /* the backend must gather pieces */
    r->n_outputs = 1;
    r->outputs[0] = out_name;
}

static float tiny_ref(float x)
{
    return erff(x > 0 ? x : 0);
}

static int check_tiny_response(const TRITONBACKEND_Request *r, const float *x, int64_t rows)
{
    const TRITONBACKEND_Response *resp = r->response;
    if (!resp || !resp->sent || resp->error || resp->n_outputs != 1) {
        fprintf(stderr, "  response: %s\n", resp && resp->error ? resp->error : "missing or not sent");
        return 0;
    }
    const TRITONBACKEND_Output *o = resp->outputs[0];
    if (strcmp(o->name, "Y") || o->dtype != TRITONSERVER_TYPE_FP32 || o->rank != 2 || o->shape[0] != rows ||
        o->shape[1] != 4 || o->size != (uint64_t)rows * 16)
        return 0;
    const float *y = o->buf;
    for (int64_t i = 0; i < rows * 4; i++)
        if (fabsf(y[i] - tiny_ref(x[i])) > 1e-5f)
            return 0;
    return r->released && r->stats_reported == 1;
}

static const char *tiny_config(char *buf, size_t n, int max_batch, const char *params)
{
    snprintf(buf, n,
             "{\"name\":\"tiny\",\"backend\":\"tandem\",\"max_batch_size\":%d,"
             "\"input\":[{\"name\":\"X\",\"data_type\":\"TYPE_FP32\",\"dims\":[\"4\"]}],"
             "\"output\":[{\"name\":\"Y\",\"data_type\":\"TYPE_FP32\",\"dims\":[\"4\"]}],"
             "\"parameters\":{%s}}",
             max_batch, params);
    return buf;
}

static void release_responses(TRITONBACKEND_Request *r, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        fake_response_free(r[i].response);
        r[i].response = NULL;
    }
}

/* ModelInitialize then ModelInstanceInitialize (instance name NAME_0);
 * 0, with the sentence on stderr, when either fails. */
static int open_model(TRITONBACKEND_Model *m, TRITONBACKEND_ModelInstance *inst)
{
    static char names[16][128];
    static int nn;
    char *name = names[nn++ % 16];
    snprintf(name, 128, "%s_0", m->name);
    *inst = (TRITONBACKEND_ModelInstance){name, m, NULL};
    TRITONSERVER_Error *e = TRITONBACKEND_ModelInitialize(m);
    if (!e && (e = TRITONBACKEND_ModelInstanceInitialize(inst)) != NULL)
        TRITONSERVER_ErrorDelete(TRITONBACKEND_ModelFinalize(m));
    if (e) {
        fprintf(stderr, "  %s: %s\n", m->name, e->msg);
        TRITONSERVER_ErrorDelete(e);
        return 0;
    }
    return 1;
}

static void close_model(TRITONBACKEND_Model *m, TRITONBACKEND_ModelInstance *inst)
{
    CHECK(TRITONBACKEND_ModelInstanceFinalize(inst) == NULL);
    CHECK(TRITONBACKEND_ModelFinalize(m) == NULL);
}

/* ------------------------------------------------------------------ tests */

static void test_api_version(void)
{
    TRITONBACKEND_Backend b = {0};
    fake_api_minor = 5;
    TRITONSERVER_Error *e = TRITONBACKEND_Initialize(&b);
    CHECK(e && e->code == TRITONSERVER_ERROR_UNSUPPORTED && strstr(e->msg, "1.10") && strstr(e->msg, "1.5"));
    TRITONSERVER_ErrorDelete(e);
    fake_api_minor = 19;
}

/* Three requests of 1, 2 and 3 rows become one tandem run on a dynamic
 * batch dimension; each gets its own rows back. */
static void test_batching(void)
{
    char cfg[2048];
    TRITONBACKEND_Model m;
    make_model(&m, "tiny_cpu", NULL,
               tiny_config(cfg, sizeof cfg, 8,
                           "\"devices\":{\"string_value\":\"cpu\"},\"threads\":{\"string_value\":\"1\"}"));
    fake_log_clear();
    TRITONBACKEND_ModelInstance inst;
    CHECK(open_model(&m, &inst));
    if (!m.state)
        return;
    CHECK(strstr(fake_log(), "tandem: model 'tiny_cpu' version 1 planned: 2 nodes on cpu; 0 fallback nodes") != NULL);
    CHECK(strstr(fake_log(), "batch dynamic") != NULL);

    float x[6 * 4];
    for (int i = 0; i < 24; i++)
        x[i] = (float)(i - 10) / 7.0f;
    TRITONBACKEND_Request req[5];
    int64_t s1[2] = {1, 4}, s2[2] = {2, 4}, s3[2] = {3, 4}, bad[2] = {2, 5};
    double xd[8] = {0};
    make_request(&req[0], "X", TRITONSERVER_TYPE_FP32, s1, 2, x, 16, "Y");
    make_request(&req[1], "X", TRITONSERVER_TYPE_FP32, s2, 2, x + 4, 32, "Y");
    make_request(&req[2], "X", TRITONSERVER_TYPE_FP64, s2, 2, xd, 64, "Y");   /* wrong type */
    make_request(&req[3], "X", TRITONSERVER_TYPE_FP32, s3, 2, x + 12, 48, "Y");
    make_request(&req[4], "X", TRITONSERVER_TYPE_FP32, bad, 2, x, 40, "Y");   /* tandem refuses the shape */
    TRITONBACKEND_Request *rp[5] = {&req[0], &req[1], &req[2], &req[3], &req[4]};
    fake_batch_stats = 0;
    CHECK(TRITONBACKEND_ModelInstanceExecute(&inst, rp, 5) == NULL);
    CHECK(check_tiny_response(&req[0], x, 1));
    CHECK(check_tiny_response(&req[1], x + 4, 2));
    CHECK(check_tiny_response(&req[3], x + 12, 3));
    CHECK(req[2].response && req[2].response->error && req[2].response->code == TRITONSERVER_ERROR_INVALID_ARG &&
          strstr(req[2].response->error, "input 'X' is FP64 but the model takes FP32"));
    CHECK(req[2].released && req[2].stats_reported == 1 && !req[2].stats_success);
    /* The [2, 5] request cannot share the run; it runs alone and fails with
     * tandem's sentence naming the input. */
    CHECK(req[4].response && req[4].response->error && req[4].response->code == TRITONSERVER_ERROR_INVALID_ARG &&
          strstr(req[4].response->error, "TDM_E_INPUT") && strstr(req[4].response->error, "'X'"));
    if (req[4].response && req[4].response->error)
        printf("  a refused shape reads: %s\n", req[4].response->error);
    CHECK(fake_batch_stats == 6);
    /* One run for the three good requests; the refused input never
     * started a run (tandem checks inputs first). */
    CHECK(fake_metric("tandem_runs_total", "model=tiny_cpu,version=1") == 1);
    CHECK(fake_metric("tandem_run_failures_total", "model=tiny_cpu") == 0);
    CHECK(fake_metric("tandem_device_faults_total", "model=tiny_cpu") == 0);
    CHECK(fake_metric("tandem_plan_nodes", "model=tiny_cpu,device=cpu") == 2);
    CHECK(fake_metric("tandem_plan_boundary_bytes", "model=tiny_cpu") == 0);
    CHECK(fake_metric("tandem_device_busy_seconds_total", "model=tiny_cpu,device=cpu") > 0);
    release_responses(req, 5);

    /* A request without the input, and one asking for an unknown output. */
    make_request(&req[0], "Z", TRITONSERVER_TYPE_FP32, s1, 2, x, 16, "Y");
    make_request(&req[1], "X", TRITONSERVER_TYPE_FP32, s1, 2, x, 16, "nope");
    CHECK(TRITONBACKEND_ModelInstanceExecute(&inst, rp, 2) == NULL);
    CHECK(req[0].response->error && strstr(req[0].response->error, "the request has no input 'X'"));
    CHECK(req[1].response->error && strstr(req[1].response->error, "has no output 'nope'"));
    release_responses(req, 2);

    close_model(&m, &inst);
}

/* max_batch_size 0: the request's tensor is the model's, whole. */
static void test_no_batching(void)
{
    char cfg[4096], params[2048], ledger[1200];
    TRITONBACKEND_Model m;
    /* ledger_file: the plan's ledger is written there at load. */
    snprintf(ledger, sizeof ledger, "%s/tiny_nobatch.ledger.json", workdir);
    unlink(ledger);
    snprintf(params, sizeof params,
             "\"devices\":{\"string_value\":\"cpu\"},\"ledger_file\":{\"string_value\":\"%s\"}", ledger);
    make_model(&m, "tiny_nobatch", NULL, tiny_config(cfg, sizeof cfg, 0, params));
    TRITONBACKEND_ModelInstance inst;
    CHECK(open_model(&m, &inst));
    if (!m.state)
        return;
    FILE *f = fopen(ledger, "r");
    char text[256] = "";
    CHECK(f && fread(text, 1, sizeof text - 1, f) > 0 && strchr(text, '{'));
    if (f)
        fclose(f);
    float x[8] = {-1, 0.5f, 2, -3, 0.25f, 1, -0.5f, 3};
    int64_t s[2] = {2, 4};
    TRITONBACKEND_Request req[2];
    make_request(&req[0], "X", TRITONSERVER_TYPE_FP32, s, 2, x, 32, "Y");
    make_request(&req[1], "X", TRITONSERVER_TYPE_FP32, s, 2, x, 32, "Y");
    TRITONBACKEND_Request *rp[2] = {&req[0], &req[1]};
    CHECK(TRITONBACKEND_ModelInstanceExecute(&inst, rp, 2) == NULL);
    CHECK(check_tiny_response(&req[0], x, 2));
    CHECK(check_tiny_response(&req[1], x, 2));
    CHECK(fake_metric("tandem_runs_total", "model=tiny_nobatch") == 2);
    release_responses(req, 2);
    close_model(&m, &inst);
}

/* fallback deny: the load fails and names every offending node. */
static void test_deny(void)
{
    char cfg[2048];
    TRITONBACKEND_Model m;
    make_model(&m, "tiny_deny", NULL,
               tiny_config(cfg, sizeof cfg, 8,
                           "\"devices\":{\"string_value\":\"vnpu:edge-npu,cpu\"},"
                           "\"fallback\":{\"string_value\":\"deny\"}"));
    TRITONSERVER_Error *e = TRITONBACKEND_ModelInitialize(&m);
    CHECK(e && e->code == TRITONSERVER_ERROR_INVALID_ARG);
    if (e) {
        printf("  deny reads: %s\n", e->msg);
        CHECK(strstr(e->msg, "model 'tiny_deny'") && strstr(e->msg, "offending node") && strstr(e->msg, " erf (") &&
              strstr(e->msg, "OP_UNSUPPORTED"));
    }
    TRITONSERVER_ErrorDelete(e);
    CHECK(m.state == NULL);
}

/* allow: fallbacks by reason at plan time and per run. */
static void test_fallback_metrics(void)
{
    char cfg[2048];
    TRITONBACKEND_Model m;
    make_model(&m, "tiny_npu", NULL,
               tiny_config(cfg, sizeof cfg, 8, "\"devices\":{\"string_value\":\"vnpu:server-npu,cpu\"}"));
    fake_log_clear();
    TRITONBACKEND_ModelInstance inst;
    CHECK(open_model(&m, &inst));
    if (!m.state)
        return;
    static const char *const reasons[] = {"OP_UNSUPPORTED", "SHAPE_UNSUPPORTED", "DTYPE_UNSUPPORTED", "GRANULARITY",
                                          "COST", "MEMORY"};
    double plan_fb = 0;
    for (size_t i = 0; i < sizeof reasons / sizeof reasons[0]; i++) {
        char l[128];
        snprintf(l, sizeof l, "model=tiny_npu,reason=%s", reasons[i]);
        double v = fake_metric("tandem_plan_fallback_nodes", l);
        if (v > 0)
            plan_fb += v;
    }
    /* Erf has no kernel there; Relu joins it on cpu (granularity subgraph). */
    CHECK(fake_metric("tandem_plan_fallback_nodes", "model=tiny_npu,reason=OP_UNSUPPORTED") == 1);
    CHECK(plan_fb >= 1);
    CHECK(fake_metric("tandem_plan_nodes", "model=tiny_npu,device=vnpu:server-npu") >= 0);
    CHECK(strstr(fake_log(), "fallback nodes (") != NULL);
    float x[8] = {-1, 0.5f, 2, -3, 0.25f, 1, -0.5f, 3};
    int64_t s[2] = {2, 4};
    TRITONBACKEND_Request req;
    make_request(&req, "X", TRITONSERVER_TYPE_FP32, s, 2, x, 32, "Y");
    TRITONBACKEND_Request *rp = &req;
    CHECK(TRITONBACKEND_ModelInstanceExecute(&inst, &rp, 1) == NULL);
    CHECK(req.response && !req.response->error);
    double runs_fb = 0;
    for (size_t i = 0; i < sizeof reasons / sizeof reasons[0]; i++) {
        char l[128];
        snprintf(l, sizeof l, "model=tiny_npu,reason=%s", reasons[i]);
        double v = fake_metric("tandem_fallback_node_runs_total", l);
        if (v > 0)
            runs_fb += v;
    }
    CHECK(runs_fb == plan_fb);
    /* admission's metrics exist (one instance runs one request at a time: no wait) */
    CHECK(fake_metric("tandem_run_admission_waits_total", "model=tiny_npu") == 0);
    CHECK(fake_metric("tandem_run_admission_refused_total", "model=tiny_npu") == 0);
    printf("  tiny on vnpu:server-npu,cpu: %.0f fallback nodes in the plan, %.0f fallback node runs\n", plan_fb,
           runs_fb);
    release_responses(&req, 1);
    close_model(&m, &inst);
}

static void test_bad_config(void)
{
    char cfg[2048];
    TRITONBACKEND_Model m;
    make_model(&m, "tiny_bad", NULL, tiny_config(cfg, sizeof cfg, 8, "\"device\":{\"string_value\":\"cpu\"}"));
    TRITONSERVER_Error *e = TRITONBACKEND_ModelInitialize(&m);
    CHECK(e && strstr(e->msg, "parameter 'device' is not a tandem option"));
    TRITONSERVER_ErrorDelete(e);
    make_model(&m, "tiny_bad2", NULL, tiny_config(cfg, sizeof cfg, 8, "\"devices\":{\"string_value\":\"gpu9\"}"));
    e = TRITONBACKEND_ModelInitialize(&m);
    CHECK(e && strstr(e->msg, "gpu9"));
    if (e)
        printf("  an unknown device reads: %s\n", e->msg);
    TRITONSERVER_ErrorDelete(e);
    make_model(&m, "tiny_bad3", NULL,
               tiny_config(cfg, sizeof cfg, 8, "\"shapes\":{\"string_value\":\"X=2xq\"}"));
    e = TRITONBACKEND_ModelInitialize(&m);
    CHECK(e && strstr(e->msg, "parameter 'shapes'"));
    TRITONSERVER_ErrorDelete(e);
    make_model(&m, "tiny_bad4", NULL, tiny_config(cfg, sizeof cfg, 8, "\"verify\":{\"string_value\":\"sometimes\"}"));
    e = TRITONBACKEND_ModelInitialize(&m);
    CHECK(e && strstr(e->msg, "parameter 'verify': 'sometimes'"));
    TRITONSERVER_ErrorDelete(e);
    make_model(&m, "tiny_bad5", NULL, tiny_config(cfg, sizeof cfg, 8, "\"max_queue\":{\"string_value\":\"-2\"}"));
    e = TRITONBACKEND_ModelInitialize(&m);
    CHECK(e && strstr(e->msg, "parameter 'max_queue': '-2'"));
    TRITONSERVER_ErrorDelete(e);
}

/* A float32 [1, 4] .npy of value v at path; 1 on success. */
static int write_npy(const char *path, float v)
{
    /* magic, version 1.0, the header's length (little-endian), the header
     * padded with spaces to 128 bytes in all, ending in a newline */
    static const char dict[] = "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 4), }";
    char head[128];
    memset(head, ' ', sizeof head);
    memcpy(head, "\x93NUMPY\x01\x00", 8);
    head[8] = (char)(sizeof head - 10);
    head[9] = 0;
    memcpy(head + 10, dict, sizeof dict - 1);
    head[sizeof head - 1] = '\n';
    float x[4] = {v, v, v, v};
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(head, 1, sizeof head, f) == sizeof head && fwrite(x, sizeof x, 1, f) == 1;
    if (f)
        ok = fclose(f) == 0 && ok;
    return ok;
}

/* Parameter calibration_inputs: the precision guard probes the plan on the
 * sets when the instance's session is created. The tiny model at
 * granularity op on server-npu (fp16) has Relu on the NPU; a set of 1e5
 * (beyond fp16's 65504) makes the guard keep Relu on cpu (PRECISION) before
 * any request, though the requests' small values would not show it. */
static double precision_runs(const char *model)
{
    char l[128];
    snprintf(l, sizeof l, "model=%s,reason=PRECISION", model);
    return fake_metric("tandem_fallback_node_runs_total", l);
}

static void test_calibration_inputs(void)
{
    char cfg[4096], params[2048], npy[1200];
    TRITONBACKEND_Model m;
    float x[8] = {-1, 0.5f, 2, -3, 0.25f, 1, -0.5f, 3};
    int64_t s[2] = {2, 4};
    for (int with = 0; with < 2; with++) {
        const char *name = with ? "tiny_cal" : "tiny_nocal";
        snprintf(params, sizeof params,
                 "\"devices\":{\"string_value\":\"vnpu:server-npu,cpu\"},\"granularity\":{\"string_value\":\"op\"}%s",
                 with ? ",\"calibration_inputs\":{\"string_value\":\"X=big.npy\"}" : "");
        make_model(&m, name, NULL, tiny_config(cfg, sizeof cfg, 8, params));
        snprintf(npy, sizeof npy, "%s/%s/big.npy", workdir, name); /* relative: in the model's folder */
        CHECK(write_npy(npy, 1e5f));
        TRITONBACKEND_ModelInstance inst;
        CHECK(open_model(&m, &inst));
        if (!m.state)
            return;
        TRITONBACKEND_Request req;
        make_request(&req, "X", TRITONSERVER_TYPE_FP32, s, 2, x, 32, "Y");
        TRITONBACKEND_Request *rp = &req;
        CHECK(TRITONBACKEND_ModelInstanceExecute(&inst, &rp, 1) == NULL);
        CHECK(check_tiny_response(&req, x, 2));
        double prec = precision_runs(name);
        printf("  %s: %.0f PRECISION fallback node runs after one request\n", name, prec > 0 ? prec : 0);
        CHECK(with ? prec == 1 : prec <= 0);
        release_responses(&req, 1);
        close_model(&m, &inst);
    }
    /* a missing file, a malformed set: the load fails naming the parameter */
    static const char *const bad[][2] = {{"X=missing.npy", "missing.npy"}, {"X", "is not NAME=FILE"}};
    for (size_t i = 0; i < 2; i++) {
        snprintf(params, sizeof params, "\"devices\":{\"string_value\":\"vnpu:server-npu,cpu\"},"
                 "\"calibration_inputs\":{\"string_value\":\"%s\"}", bad[i][0]);
        make_model(&m, "tiny_calbad", NULL, tiny_config(cfg, sizeof cfg, 8, params));
        TRITONSERVER_Error *e = TRITONBACKEND_ModelInitialize(&m);
        CHECK(e && strstr(e->msg, "calibration_inputs") && strstr(e->msg, bad[i][1]));
        if (e)
            printf("  calibration_inputs '%s' reads: %s\n", bad[i][0], e->msg);
        TRITONSERVER_ErrorDelete(e);
    }
}

/* squeezenet1_1 (batch fixed at 1) with max_batch_size 4: a request of 3
 * rows runs row by row and equals three single-row requests. */
static void test_fixed_batch(const char *onnx)
{
    if (!onnx || access(onnx, R_OK) != 0) {
        printf("  (no %s: the fixed-batch test is not run)\n", onnx ? onnx : "squeezenet");
        return;
    }
    const char *cfg = "{\"name\":\"sq\",\"max_batch_size\":4,"
                      "\"input\":[{\"name\":\"input\",\"data_type\":\"TYPE_FP32\",\"dims\":[\"3\",\"224\",\"224\"]}],"
                      "\"output\":[{\"name\":\"output\",\"data_type\":\"TYPE_FP32\",\"dims\":[\"1000\"]}],"
                      "\"parameters\":{\"devices\":{\"string_value\":\"cpu\"},\"threads\":{\"string_value\":\"1\"}}}";
    TRITONBACKEND_Model m;
    make_model(&m, "sq", onnx, cfg);
    TRITONBACKEND_ModelInstance inst;
    CHECK(open_model(&m, &inst));
    if (!m.state)
        return;
    size_t per = 3 * 224 * 224;
    float *x = malloc(sizeof *x * per * 3);
    if (!x)
        abort();
    for (size_t i = 0; i < per * 3; i++)
        x[i] = (float)((i * 2654435761u) % 1000) / 1000.0f;
    TRITONBACKEND_Request req[4];
    int64_t s3[4] = {3, 3, 224, 224}, s1[4] = {1, 3, 224, 224};
    make_request(&req[0], "input", TRITONSERVER_TYPE_FP32, s3, 4, x, per * 3 * 4, "output");
    for (int k = 0; k < 3; k++)
        make_request(&req[1 + k], "input", TRITONSERVER_TYPE_FP32, s1, 4, x + per * (size_t)k, per * 4, "output");
    TRITONBACKEND_Request *rp[4] = {&req[0], &req[1], &req[2], &req[3]};
    CHECK(TRITONBACKEND_ModelInstanceExecute(&inst, rp, 4) == NULL);
    int ok = 1;
    for (int k = 0; k < 4; k++)
        ok = ok && req[k].response && !req[k].response->error && req[k].response->n_outputs == 1;
    CHECK(ok);
    if (ok) {
        const TRITONBACKEND_Output *all = req[0].response->outputs[0];
        CHECK(all->rank == 2 && all->shape[0] == 3 && all->shape[1] == 1000);
        for (int k = 0; k < 3; k++)
            CHECK(memcmp((const float *)all->buf + 1000 * k, req[1 + k].response->outputs[0]->buf, 4000) == 0);
    }
    CHECK(fake_metric("tandem_runs_total", "model=sq") == 6);
    release_responses(req, 4);
    free(x);
    close_model(&m, &inst);
}

/* BYTES in and out: a batch of two requests (1 and 2 rows of 3 strings)
 * through Identity, each request getting its own strings back; a
 * StringNormalizer model upper-cases; a malformed BYTES input is refused
 * with a sentence. */
static void test_strings(void)
{
    static const char *const cfg_id =
        "{\"name\":\"strs\",\"max_batch_size\":4,"
        "\"input\":[{\"name\":\"X\",\"data_type\":\"TYPE_STRING\",\"dims\":[\"3\"]}],"
        "\"output\":[{\"name\":\"Y\",\"data_type\":\"TYPE_STRING\",\"dims\":[\"3\"]}],"
        "\"parameters\":{\"devices\":{\"string_value\":\"cpu\"}}}";
    char path[1400];
    TRITONBACKEND_Model m;
    make_model(&m, "strs", NULL, cfg_id);
    snprintf(path, sizeof path, "%s/1/model.onnx", m.repository);
    CHECK(write_string_model(path, 0));
    TRITONBACKEND_ModelInstance inst;
    CHECK(open_model(&m, &inst));
    if (!m.state)
        return;
    static const char *const a[] = {"alpha", "", "gamma"};
    static const char *const b[] = {"delta", "\xc3\xa9t\xc3\xa9", "zeta", "eta", "theta with spaces", "iota"};
    unsigned char ba[64], bb[128];
    size_t na = bytes_pack(ba, a, 3), nb = bytes_pack(bb, b, 6);
    int64_t s1[2] = {1, 3}, s2[2] = {2, 3};
    TRITONBACKEND_Request req[2];
    make_request(&req[0], "X", TRITONSERVER_TYPE_BYTES, s1, 2, ba, na, "Y");
    make_request(&req[1], "X", TRITONSERVER_TYPE_BYTES, s2, 2, bb, nb, "Y");
    TRITONBACKEND_Request *rp[2] = {&req[0], &req[1]};
    CHECK(TRITONBACKEND_ModelInstanceExecute(&inst, rp, 2) == NULL);
    for (int k = 0; k < 2; k++) {
        const TRITONBACKEND_Response *r = req[k].response;
        CHECK(r && !r->error && r->n_outputs == 1);
        if (!r || r->error || r->n_outputs != 1) {
            fprintf(stderr, "  strings request %d: %s\n", k, r && r->error ? r->error : "no output");
            continue;
        }
        const TRITONBACKEND_Output *o = r->outputs[0];
        CHECK(o->dtype == TRITONSERVER_TYPE_BYTES && o->rank == 2 && o->shape[0] == (k ? 2 : 1) && o->shape[1] == 3);
        CHECK(o->size == (k ? nb : na) && memcmp(o->buf, k ? bb : ba, k ? nb : na) == 0);
    }
    CHECK(fake_metric("tandem_runs_total", "model=strs") == 1); /* one run for both */
    release_responses(req, 2);
    /* an element whose length runs past the data */
    unsigned char bad[16];
    memcpy(bad, ba, 16);
    bad[0] = 200;
    make_request(&req[0], "X", TRITONSERVER_TYPE_BYTES, s1, 2, bad, 16, "Y");
    rp[0] = &req[0];
    CHECK(TRITONBACKEND_ModelInstanceExecute(&inst, rp, 1) == NULL);
    CHECK(req[0].response && req[0].response->error && req[0].response->code == TRITONSERVER_ERROR_INVALID_ARG &&
          strstr(req[0].response->error, "BYTES input 'X' ends inside element 0 of 3"));
    release_responses(req, 1);
    close_model(&m, &inst);

    static const char *const cfg_up =
        "{\"name\":\"upper\",\"max_batch_size\":0,"
        "\"input\":[{\"name\":\"X\",\"data_type\":\"TYPE_STRING\",\"dims\":[\"1\",\"3\"]}],"
        "\"output\":[{\"name\":\"Y\",\"data_type\":\"TYPE_STRING\",\"dims\":[\"1\",\"3\"]}],"
        "\"parameters\":{\"devices\":{\"string_value\":\"cpu\"}}}";
    make_model(&m, "upper", NULL, cfg_up);
    snprintf(path, sizeof path, "%s/1/model.onnx", m.repository);
    CHECK(write_string_model(path, 1));
    CHECK(open_model(&m, &inst));
    if (!m.state)
        return;
    static const char *const up[] = {"ALPHA", "", "GAMMA"};
    unsigned char bu[64];
    size_t nu = bytes_pack(bu, up, 3);
    make_request(&req[0], "X", TRITONSERVER_TYPE_BYTES, s1, 2, ba, na, "Y");
    CHECK(TRITONBACKEND_ModelInstanceExecute(&inst, rp, 1) == NULL);
    const TRITONBACKEND_Response *r = req[0].response;
    CHECK(r && !r->error && r->n_outputs == 1 && r->outputs[0]->size == nu &&
          memcmp(r->outputs[0]->buf, bu, nu) == 0);
    if (r && r->error)
        fprintf(stderr, "  upper: %s\n", r->error);
    release_responses(req, 1);
    close_model(&m, &inst);
}

/* Auto-complete: a config without inputs and outputs gets them from the
 * ONNX model when the server allows it, and serves; without the server's
 * leave nothing is handed back. */
static void test_autocomplete(void)
{
    static const char *const cfg = "{\"name\":\"tiny_ac\",\"backend\":\"tandem\",\"max_batch_size\":8,"
                                   "\"parameters\":{\"devices\":{\"string_value\":\"cpu\"}}}";
    TRITONBACKEND_Model m;
    TRITONBACKEND_ModelInstance inst;
    make_model(&m, "tiny_ac", NULL, cfg);
    m.autocomplete = 1;
    CHECK(open_model(&m, &inst));
    if (!m.state)
        return;
    CHECK(m.set_config && strstr(m.set_config, "\"input\":[{\"name\":\"X\",\"data_type\":\"TYPE_FP32\",\"dims\":[\"4\"]}]") &&
          strstr(m.set_config, "\"output\":[{\"name\":\"Y\",\"data_type\":\"TYPE_FP32\",\"dims\":[\"4\"]}]") &&
          strstr(m.set_config, "\"max_batch_size\":8"));
    if (m.set_config)
        printf("  auto-completed: %s\n", m.set_config);
    float x[4] = {-1, 0.5f, 2, -3};
    int64_t s[2] = {1, 4};
    TRITONBACKEND_Request req;
    make_request(&req, "X", TRITONSERVER_TYPE_FP32, s, 2, x, 16, "Y");
    TRITONBACKEND_Request *rp = &req;
    CHECK(TRITONBACKEND_ModelInstanceExecute(&inst, &rp, 1) == NULL);
    CHECK(check_tiny_response(&req, x, 1));
    release_responses(&req, 1);
    close_model(&m, &inst);
    free(m.set_config);
    /* max_batch_size 0: the batch dimension stays, dynamic (-1) */
    static const char *const cfg0 = "{\"name\":\"tiny_ac0\",\"max_batch_size\":0,\"parameters\":{}}";
    make_model(&m, "tiny_ac0", NULL, cfg0);
    m.autocomplete = 1;
    CHECK(open_model(&m, &inst));
    CHECK(m.set_config && strstr(m.set_config, "\"dims\":[\"-1\",\"4\"]"));
    if (m.state)
        close_model(&m, &inst);
    free(m.set_config);
    /* the server does not allow it: nothing handed back */
    make_model(&m, "tiny_ac1", NULL, cfg0);
    CHECK(open_model(&m, &inst));
    CHECK(m.set_config == NULL);
    if (m.state)
        close_model(&m, &inst);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s WORKDIR [SQUEEZENET.onnx]\n", argv[0]);
        return 2;
    }
    snprintf(workdir, sizeof workdir, "%s", argv[1]);
    mkdir(workdir, 0777);
    test_api_version();
    TRITONSERVER_Error *e = TRITONBACKEND_Initialize(&backend);
    CHECK(e == NULL);
    TRITONSERVER_ErrorDelete(e);
    test_batching();
    test_no_batching();
    test_deny();
    test_fallback_metrics();
    test_bad_config();
    test_calibration_inputs();
    test_strings();
    test_autocomplete();
    test_fixed_batch(argc > 2 ? argv[2] : NULL);
    CHECK(TRITONBACKEND_Finalize(&backend) == NULL);
    /* Metrics off: the backend still loads and serves. */
    fake_metrics_enabled = 0;
    TRITONBACKEND_Backend quiet = {0};
    CHECK((e = TRITONBACKEND_Initialize(&quiet)) == NULL);
    TRITONSERVER_ErrorDelete(e);
    CHECK(strstr(fake_log(), "tandem metrics are off") != NULL);
    CHECK(TRITONBACKEND_Finalize(&quiet) == NULL);
    fake_log_clear();
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("triton backend: all checks passed\n");
    return 0;
}
