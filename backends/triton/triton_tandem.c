/* libtriton_tandem.so: tandem as a Triton Inference Server backend.
 *
 * A client of include/tandem/tandem.h only. Each model of the repository
 * is an ONNX file (<version>/model.onnx, or the config's
 * default_model_filename) with a config.pbtxt whose `parameters` carry
 * tandem's run options. At model load the plan is made once: its summary
 * goes to the server's log, a plan that violates the fallback policy
 * (`deny`, budgets) fails the load with every offending node listed, and
 * the plan's figures become metrics. Each model instance owns one tandem
 * session. ModelInstanceExecute runs the requests Triton hands it: when
 * the model's batch dimension is dynamic, the requests are concatenated
 * into one run and the outputs split back; a model with a fixed batch of F
 * runs F rows at a time. Failures reach the client as Triton errors
 * carrying tandem's sentence.
 *
 * Metrics (Triton custom metrics, on the server's /metrics endpoint),
 * labelled model and version: tandem_plan_nodes{device},
 * tandem_plan_fallback_nodes{reason}, tandem_plan_boundary_bytes,
 * tandem_runs_total, tandem_run_failures_total,
 * tandem_fallback_node_runs_total{reason} (node executions on a fallback
 * device), tandem_device_busy_seconds_total{device},
 * tandem_copy_bytes_total, tandem_device_faults_total, and admission
 * (runs of one session waiting for a device's memory, src/run/admit.h):
 * tandem_run_admission_waits_total, tandem_run_admission_wait_seconds_total,
 * tandem_run_admission_refused_total.
 *
 * String tensors travel as Triton's BYTES: each element a 4-byte
 * little-endian length and that many bytes. A config.pbtxt may leave out
 * `input` and `output` (Triton's auto-complete, --strict-model-config=false,
 * the default): the backend fills them from the ONNX model. */
#define _POSIX_C_SOURCE 200809L
#include "tt_io.h"

#include <tandem/tandem.h>

#include <cjson/cJSON.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


/* ----------------------------------------------------------------- helpers */

static uint64_t tt_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void tt_log(TRITONSERVER_LogLevel level, int line, const char *fmt, ...)
{
    char msg[TT_SENTENCE * 2];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    TRITONSERVER_Error *e = TRITONSERVER_LogMessage(level, __FILE__, line, msg);
    if (e)
        TRITONSERVER_ErrorDelete(e);
}

TRITONSERVER_Error *tt_error(TRITONSERVER_Error_Code code, const char *fmt, ...)
{
    char raw[TT_SENTENCE * 4], msg[TT_SENTENCE * 4];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    tdm_sentence_shorten(msg, sizeof msg, raw);
    return TRITONSERVER_ErrorNew(code, msg);
}

static TRITONSERVER_Error_Code tt_code(tdm_status st)
{
    switch (st) {
    case TDM_OK:
    case TDM_E_INTERNAL:
    case TDM_E_RUNTIME:
        return TRITONSERVER_ERROR_INTERNAL;
    case TDM_E_USAGE:
    case TDM_E_MODEL:
    case TDM_E_INPUT:
    case TDM_E_POLICY:
        return TRITONSERVER_ERROR_INVALID_ARG;
    case TDM_E_UNSUPPORTED:
        return TRITONSERVER_ERROR_UNSUPPORTED;
    case TDM_E_IO:
        return TRITONSERVER_ERROR_NOT_FOUND;
    case TDM_E_NOMEM:
    case TDM_E_DEVICE:
        return TRITONSERVER_ERROR_UNAVAILABLE;
    }
    return TRITONSERVER_ERROR_UNKNOWN;
}

char *tt_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

/* tandem element type <-> Triton data type; INVALID when Triton has none. */
TRITONSERVER_DataType tt_triton_type(tdm_dtype t)
{
    switch (t) {
    case TDM_FLOAT: return TRITONSERVER_TYPE_FP32;
    case TDM_UINT8: return TRITONSERVER_TYPE_UINT8;
    case TDM_INT8: return TRITONSERVER_TYPE_INT8;
    case TDM_UINT16: return TRITONSERVER_TYPE_UINT16;
    case TDM_INT16: return TRITONSERVER_TYPE_INT16;
    case TDM_INT32: return TRITONSERVER_TYPE_INT32;
    case TDM_INT64: return TRITONSERVER_TYPE_INT64;
    case TDM_BOOL: return TRITONSERVER_TYPE_BOOL;
    case TDM_FLOAT16: return TRITONSERVER_TYPE_FP16;
    case TDM_DOUBLE: return TRITONSERVER_TYPE_FP64;
    case TDM_UINT32: return TRITONSERVER_TYPE_UINT32;
    case TDM_UINT64: return TRITONSERVER_TYPE_UINT64;
    case TDM_BFLOAT16: return TRITONSERVER_TYPE_BF16;
    case TDM_STRING: return TRITONSERVER_TYPE_BYTES;
    default: return TRITONSERVER_TYPE_INVALID;
    }
}

static const char *tt_triton_type_name(TRITONSERVER_DataType t)
{
    static const char *const names[] = {"INVALID", "BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16",
                                        "INT32", "INT64", "FP16", "FP32", "FP64", "BYTES", "BF16"};
    return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "INVALID";
}

/* Elements of a shape, 0 with *ok = 0 on a negative dim or overflow. */
static size_t tt_count(const int64_t *dims, size_t rank, int *ok)
{
    size_t n = 1;
    *ok = 1;
    for (size_t i = 0; i < rank; i++) {
        if (dims[i] < 0 || (dims[i] > 0 && n > SIZE_MAX / (size_t)dims[i])) {
            *ok = 0;
            return 0;
        }
        n *= (size_t)dims[i];
    }
    return n;
}

/* ----------------------------------------------------------------- metrics */

enum {
    TT_FAM_PLAN_NODES,
    TT_FAM_PLAN_FALLBACK,
    TT_FAM_PLAN_BOUNDARY,
    TT_FAM_RUNS,
    TT_FAM_RUN_FAILURES,
    TT_FAM_FALLBACK_RUNS,
    TT_FAM_DEVICE_SECONDS,
    TT_FAM_COPY_BYTES,
    TT_FAM_FAULTS,
    TT_FAM_ADMIT_WAITS,
    TT_FAM_ADMIT_WAIT_SECONDS,
    TT_FAM_ADMIT_REFUSED,
    TT_FAM_COUNT
};

static const struct {
    const char *name;
    TRITONSERVER_MetricKind kind;
    const char *help;
} tt_families[TT_FAM_COUNT] = {
    {"tandem_plan_nodes", TRITONSERVER_METRIC_KIND_GAUGE, "Nodes the tandem plan places on each device"},
    {"tandem_plan_fallback_nodes", TRITONSERVER_METRIC_KIND_GAUGE,
     "Nodes the tandem plan moved off the first device, by reason code"},
    {"tandem_plan_boundary_bytes", TRITONSERVER_METRIC_KIND_GAUGE,
     "Bytes the tandem plan copies between devices per run"},
    {"tandem_runs_total", TRITONSERVER_METRIC_KIND_COUNTER, "tandem session runs"},
    {"tandem_run_failures_total", TRITONSERVER_METRIC_KIND_COUNTER,
     "tandem session runs that failed (including those the breaker then re-ran on cpu)"},
    {"tandem_fallback_node_runs_total", TRITONSERVER_METRIC_KIND_COUNTER,
     "Node executions on a fallback device, by reason code"},
    {"tandem_device_busy_seconds_total", TRITONSERVER_METRIC_KIND_COUNTER, "Time each device spent running nodes"},
    {"tandem_copy_bytes_total", TRITONSERVER_METRIC_KIND_COUNTER, "Bytes copied between devices"},
    {"tandem_device_faults_total", TRITONSERVER_METRIC_KIND_COUNTER,
     "Device faults during runs (with the breaker on, each such run is re-executed on cpu)"},
    {"tandem_run_admission_waits_total", TRITONSERVER_METRIC_KIND_COUNTER,
     "Runs that waited for a device's memory (admission: concurrent runs of one session)"},
    {"tandem_run_admission_wait_seconds_total", TRITONSERVER_METRIC_KIND_COUNTER,
     "Time runs waited for a device's memory"},
    {"tandem_run_admission_refused_total", TRITONSERVER_METRIC_KIND_COUNTER,
     "Runs refused because the admission queue was full (max_queue)"},
};

typedef struct tt_backend {
    TRITONSERVER_MetricFamily *fam[TT_FAM_COUNT]; /* NULL entries: metrics off */
} tt_backend;

/* One labelled metric: its label value, the cumulative figure tandem
 * reports and what was already added to Triton's counter. */
typedef struct tt_labelled {
    char *label;
    TRITONSERVER_Metric *metric;
    double value, reported;
} tt_labelled;

typedef struct tt_labelled_set {
    tt_labelled *v;
    size_t n, cap;
} tt_labelled_set;

/* ------------------------------------------------------------------ models */

typedef struct tt_model {
    tt_backend *backend;
    char *name;
    uint64_t version;
    char *path;             /* the ONNX file */
    int64_t max_batch;      /* config max_batch_size */
    int64_t fixed_batch;    /* > 0: the model's batch dim is fixed at this; 0: dynamic */
    tdm_session_options *opts;
    size_t n_in, n_out;
    char **in_names, **out_names;
    tdm_dtype *in_types;
    char *first_device;
    pthread_mutex_t mu;     /* the metrics below and the fallback table */
    tdm_metrics *metrics;
    tdm_metrics_summary last;
    TRITONSERVER_Metric *m_runs, *m_failures, *m_copy_bytes, *m_faults, *m_boundary;
    TRITONSERVER_Metric *m_admit_waits, *m_admit_seconds, *m_admit_refused;
    uint64_t admit_last[3]; /* waits, wait ns, refused already added */
    tt_labelled_set plan_nodes, plan_fallback, fallback_runs, device_seconds;
} tt_model;

typedef struct tt_instance {
    tt_model *model;
    char *name;
    tdm_ctx *ctx;
    tdm_model *tm;
    tdm_session *session;
} tt_instance;

static TRITONSERVER_Metric *tt_metric_new(tt_model *m, int fam, const char *key, const char *value)
{
    TRITONSERVER_MetricFamily *family = m->backend ? m->backend->fam[fam] : NULL;
    if (!family)
        return NULL;
    char version[32];
    snprintf(version, sizeof version, "%llu", (unsigned long long)m->version);
    const TRITONSERVER_Parameter *labels[3];
    uint64_t n = 0;
    labels[n++] = TRITONSERVER_ParameterNew("model", TRITONSERVER_PARAMETER_STRING, m->name);
    labels[n++] = TRITONSERVER_ParameterNew("version", TRITONSERVER_PARAMETER_STRING, version);
    if (key)
        labels[n++] = TRITONSERVER_ParameterNew(key, TRITONSERVER_PARAMETER_STRING, value);
    TRITONSERVER_Metric *metric = NULL;
    int ok = 1;
    for (uint64_t i = 0; i < n; i++)
        ok = ok && labels[i];
    if (ok) {
        TRITONSERVER_Error *e = TRITONSERVER_MetricNew(&metric, family, labels, n);
        if (e) {
            TT_LOG(TRITONSERVER_LOG_WARN, "tandem: metric %s of model '%s' not created: %s", tt_families[fam].name,
                   m->name, TRITONSERVER_ErrorMessage(e));
            TRITONSERVER_ErrorDelete(e);
            metric = NULL;
        }
    }
    for (uint64_t i = 0; i < n; i++)
        if (labels[i])
            TRITONSERVER_ParameterDelete((TRITONSERVER_Parameter *)labels[i]);
    return metric;
}

static void tt_metric_delete(TRITONSERVER_Metric *metric)
{
    if (metric) {
        TRITONSERVER_Error *e = TRITONSERVER_MetricDelete(metric);
        if (e)
            TRITONSERVER_ErrorDelete(e);
    }
}

static void tt_metric_add(TRITONSERVER_Metric *metric, double delta)
{
    if (metric && delta > 0) {
        TRITONSERVER_Error *e = TRITONSERVER_MetricIncrement(metric, delta);
        if (e)
            TRITONSERVER_ErrorDelete(e);
    }
}

static void tt_metric_set(TRITONSERVER_Metric *metric, double value)
{
    if (metric) {
        TRITONSERVER_Error *e = TRITONSERVER_MetricSet(metric, value);
        if (e)
            TRITONSERVER_ErrorDelete(e);
    }
}

/* The entry of set labelled label, created (value 0) when absent; NULL
 * when out of memory. */
static tt_labelled *tt_labelled_get(tt_labelled_set *set, const char *label)
{
    for (size_t i = 0; i < set->n; i++)
        if (strcmp(set->v[i].label, label) == 0)
            return &set->v[i];
    if (set->n == set->cap) {
        size_t cap = set->cap ? set->cap * 2 : 8;
        tt_labelled *v = realloc(set->v, cap * sizeof *v);
        if (!v)
            return NULL;
        set->v = v;
        set->cap = cap;
    }
    tt_labelled *e = &set->v[set->n];
    memset(e, 0, sizeof *e);
    e->label = tt_strdup(label);
    if (!e->label)
        return NULL;
    set->n++;
    return e;
}

static void tt_labelled_free(tt_labelled_set *set)
{
    for (size_t i = 0; i < set->n; i++) {
        tt_metric_delete(set->v[i].metric);
        free(set->v[i].label);
    }
    free(set->v);
    memset(set, 0, sizeof *set);
}

/* Pushes the labelled counters' growth to Triton (creating a metric the
 * first time a label appears). Under m->mu. */
static void tt_labelled_push(tt_model *m, tt_labelled_set *set, int fam, const char *key)
{
    for (size_t i = 0; i < set->n; i++) {
        tt_labelled *e = &set->v[i];
        if (!e->metric && e->value > 0)
            e->metric = tt_metric_new(m, fam, key, e->label);
        if (e->metric && e->value > e->reported) {
            tt_metric_add(e->metric, e->value - e->reported);
            e->reported = e->value;
        }
    }
}

/* The session observer: tandem's counters, plus node runs on a fallback
 * device counted by reason. Called concurrently by the instances. */
static void tt_observe(void *user, const tdm_event *ev)
{
    tt_model *m = user;
    tdm_metrics_observe(m->metrics, ev);
    if (ev->kind == TDM_EVENT_NODE && ev->fallback && ev->reason && ev->reason[0]) {
        pthread_mutex_lock(&m->mu);
        tt_labelled *e = tt_labelled_get(&m->fallback_runs, ev->reason);
        if (e)
            e->value += 1;
        pthread_mutex_unlock(&m->mu);
    }
}

/* After each execute: tandem's cumulative counters to Triton's. */
static void tt_metrics_sync(tt_model *m)
{
    tdm_metrics_summary s;
    pthread_mutex_lock(&m->mu);
    if (tdm_metrics_get(m->metrics, &s) == TDM_OK) {
        tt_metric_add(m->m_runs, (double)(s.runs - m->last.runs));
        tt_metric_add(m->m_failures, (double)(s.run_failures - m->last.run_failures));
        tt_metric_add(m->m_copy_bytes, (double)(s.copy_bytes - m->last.copy_bytes));
        tt_metric_add(m->m_faults, (double)(s.faults - m->last.faults));
        m->last = s;
        uint64_t a[3] = {0, 0, 0};
        if (tdm_metrics_admission(m->metrics, &a[0], &a[1], NULL, &a[2]) == TDM_OK) {
            tt_metric_add(m->m_admit_waits, (double)(a[0] - m->admit_last[0]));
            tt_metric_add(m->m_admit_seconds, (double)(a[1] - m->admit_last[1]) / 1e9);
            tt_metric_add(m->m_admit_refused, (double)(a[2] - m->admit_last[2]));
            memcpy(m->admit_last, a, sizeof a);
        }
        size_t nd = tdm_metrics_device_count(m->metrics);
        for (size_t i = 0; i < nd; i++) {
            const char *name = NULL;
            uint64_t busy = 0, nodes = 0;
            if (tdm_metrics_device(m->metrics, i, &name, &busy, &nodes) != TDM_OK || !name)
                continue;
            tt_labelled *e = tt_labelled_get(&m->device_seconds, name);
            if (e)
                e->value = (double)busy / 1e9;
        }
        tt_labelled_push(m, &m->device_seconds, TT_FAM_DEVICE_SECONDS, "device");
    }
    tt_labelled_push(m, &m->fallback_runs, TT_FAM_FALLBACK_RUNS, "reason");
    pthread_mutex_unlock(&m->mu);
}

/* ------------------------------------------------------- backend lifetime */

TRITONSERVER_Error *TRITONBACKEND_Initialize(TRITONBACKEND_Backend *backend)
{
    uint32_t major = 0, minor = 0;
    TRITONSERVER_Error *err = TRITONBACKEND_ApiVersion(&major, &minor);
    if (err)
        return err;
    if (major != TDM_TRITONBACKEND_API_MAJOR || minor < TDM_TRITONBACKEND_API_MINOR)
        return tt_error(TRITONSERVER_ERROR_UNSUPPORTED,
                        "the tandem backend needs Triton's backend API %u.%u or a later 1.x; this server has %u.%u",
                        TDM_TRITONBACKEND_API_MAJOR, TDM_TRITONBACKEND_API_MINOR, major, minor);
    tt_backend *b = calloc(1, sizeof *b);
    if (!b)
        return tt_error(TRITONSERVER_ERROR_INTERNAL, "tandem backend: out of memory");
    for (int i = 0; i < TT_FAM_COUNT; i++) {
        err = TRITONSERVER_MetricFamilyNew(&b->fam[i], tt_families[i].kind, tt_families[i].name, tt_families[i].help);
        if (err) {
            /* Metrics off (--allow-metrics=false) or an older server: the
             * plan summary is still logged at load. */
            TT_LOG(TRITONSERVER_LOG_WARN, "tandem: metric family %s not created (%s); tandem metrics are off",
                   tt_families[i].name, TRITONSERVER_ErrorMessage(err));
            TRITONSERVER_ErrorDelete(err);
            b->fam[i] = NULL;
        }
    }
    err = TRITONBACKEND_BackendSetState(backend, b);
    if (err) {
        for (int i = 0; i < TT_FAM_COUNT; i++)
            if (b->fam[i])
                TRITONSERVER_ErrorDelete(TRITONSERVER_MetricFamilyDelete(b->fam[i]));
        free(b);
        return err;
    }
    TT_LOG(TRITONSERVER_LOG_INFO, "tandem backend %s (Triton backend API %u.%u)", tdm_version(), major, minor);
    return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_Finalize(TRITONBACKEND_Backend *backend)
{
    void *state = NULL;
    TRITONSERVER_Error *err = TRITONBACKEND_BackendState(backend, &state);
    if (err)
        return err;
    tt_backend *b = state;
    if (b) {
        for (int i = 0; i < TT_FAM_COUNT; i++)
            if (b->fam[i]) {
                TRITONSERVER_Error *e = TRITONSERVER_MetricFamilyDelete(b->fam[i]);
                if (e)
                    TRITONSERVER_ErrorDelete(e);
            }
        free(b);
    }
    return NULL;
}

/* --------------------------------------------------------- model lifetime */

static void tt_model_free(tt_model *m)
{
    if (!m)
        return;
    tt_metric_delete(m->m_runs);
    tt_metric_delete(m->m_failures);
    tt_metric_delete(m->m_copy_bytes);
    tt_metric_delete(m->m_faults);
    tt_metric_delete(m->m_boundary);
    tt_metric_delete(m->m_admit_waits);
    tt_metric_delete(m->m_admit_seconds);
    tt_metric_delete(m->m_admit_refused);
    tt_labelled_free(&m->plan_nodes);
    tt_labelled_free(&m->plan_fallback);
    tt_labelled_free(&m->fallback_runs);
    tt_labelled_free(&m->device_seconds);
    for (size_t i = 0; m->in_names && i < m->n_in; i++)
        free(m->in_names[i]);
    for (size_t i = 0; m->out_names && i < m->n_out; i++)
        free(m->out_names[i]);
    free(m->in_names);
    free(m->out_names);
    free(m->in_types);
    free(m->first_device);
    tdm_metrics_destroy(m->metrics);
    tdm_session_options_destroy(m->opts);
    pthread_mutex_destroy(&m->mu);
    free(m->name);
    free(m->path);
    free(m);
}

/* A JSON number that protobuf's JSON form may give as a string (int64). */
static int64_t tt_json_int(const cJSON *v, int64_t dflt)
{
    if (cJSON_IsNumber(v))
        return (int64_t)v->valuedouble;
    if (cJSON_IsString(v)) {
        long long n;
        if (tt_integer(v->valuestring, INT64_MIN, INT64_MAX, &n))
            return (int64_t)n;
    }
    return dflt;
}

/* The model's inputs and outputs, its batch dimension, the config's input
 * names checked against the model's. */
static TRITONSERVER_Error *tt_model_io(tt_model *m, const tdm_model *tm, const cJSON *config)
{
    m->n_in = tdm_model_input_count(tm);
    m->n_out = tdm_model_output_count(tm);
    m->in_names = calloc(m->n_in ? m->n_in : 1, sizeof *m->in_names);
    m->in_types = calloc(m->n_in ? m->n_in : 1, sizeof *m->in_types);
    m->out_names = calloc(m->n_out ? m->n_out : 1, sizeof *m->out_names);
    if (!m->in_names || !m->in_types || !m->out_names)
        return tt_error(TRITONSERVER_ERROR_INTERNAL, "out of memory");
    int64_t fixed = -2; /* -2: not seen yet; -1: dynamic; 0: no batch dim; > 0: fixed */
    for (size_t i = 0; i < m->n_in + m->n_out; i++) {
        tdm_value_info vi;
        int is_in = i < m->n_in;
        if ((is_in ? tdm_model_input(tm, i, &vi) : tdm_model_output(tm, i - m->n_in, &vi)) != TDM_OK)
            return tt_error(TRITONSERVER_ERROR_INTERNAL, "model '%s': cannot read its inputs and outputs", m->name);
        char *name = tt_strdup(vi.name ? vi.name : "");
        if (!name)
            return tt_error(TRITONSERVER_ERROR_INTERNAL, "out of memory");
        if (is_in) {
            m->in_names[i] = name;
            m->in_types[i] = vi.dtype;
        } else {
            m->out_names[i - m->n_in] = name;
        }
        if (vi.kind != TDM_KIND_TENSOR || tt_triton_type(vi.dtype) == TRITONSERVER_TYPE_INVALID)
            return tt_error(TRITONSERVER_ERROR_UNSUPPORTED,
                            "model '%s': %s '%s' is a %s of %s, which the tandem backend cannot pass to Triton",
                            m->name, is_in ? "input" : "output", vi.name, vi.kind == TDM_KIND_TENSOR ? "tensor" : "sequence or optional",
                            tdm_dtype_name(vi.dtype));
        int64_t d0 = vi.rank >= 1 ? (vi.dims[0].value >= 0 ? vi.dims[0].value : -1) : 0;
        if (!is_in && d0 != 0 && fixed == -1)
            continue; /* outputs follow a dynamic batch */
        if (fixed == -2)
            fixed = d0;
        else if (fixed != d0 && is_in)
            fixed = 0;
    }
    if (m->max_batch > 0) {
        if (fixed == 0 || fixed == -2)
            return tt_error(TRITONSERVER_ERROR_INVALID_ARG,
                            "model '%s': max_batch_size is %lld but its inputs share no first (batch) dimension; set "
                            "max_batch_size: 0 in config.pbtxt",
                            m->name, (long long)m->max_batch);
        m->fixed_batch = fixed > 0 ? fixed : 0;
    }
    /* The config's inputs must be the model's. */
    const cJSON *ins = cJSON_GetObjectItemCaseSensitive(config, "input"), *it;
    cJSON_ArrayForEach(it, ins)
    {
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(it, "name");
        if (!cJSON_IsString(nm))
            continue;
        int found = 0;
        for (size_t i = 0; i < m->n_in; i++)
            found = found || strcmp(m->in_names[i], nm->valuestring) == 0;
        if (!found)
            return tt_error(TRITONSERVER_ERROR_INVALID_ARG,
                            "model '%s': config.pbtxt input '%s' is not an input of %s (its first input is '%s')",
                            m->name, nm->valuestring, m->path, m->n_in ? m->in_names[0] : "");
    }
    return NULL;
}

/* The plan at load: summary to the log, policy enforced, plan metrics,
 * the ledger to ledger_file when asked. */
static TRITONSERVER_Error *tt_model_plan(tt_model *m, const tdm_model *tm, tdm_ctx *ctx, const char *ledger_file)
{
    tdm_plan *plan = NULL;
    tdm_status st = tdm_plan_create(ctx, tm, m->opts, &plan);
    if (st != TDM_OK)
        return tt_error(tt_code(st), "model '%s': tandem cannot plan %s: %s", m->name, m->path, tdm_ctx_error(ctx));
    TRITONSERVER_Error *err = NULL;
    char *report = NULL, *ledger = NULL;
    tdm_plan_summary s;
    memset(&s, 0, sizeof s);
    tdm_plan_get_summary(plan, &s);
    size_t nd = tdm_plan_device_count(plan);
    m->first_device = tt_strdup(nd ? tdm_plan_device_name(plan, 0) : "cpu");
    if (!m->first_device) {
        err = tt_error(TRITONSERVER_ERROR_INTERNAL, "out of memory");
        goto done;
    }
    /* One line: nodes per device, fallbacks by reason. */
    char line[TT_SENTENCE];
    size_t off = (size_t)snprintf(line, sizeof line, "tandem: model '%s' version %llu planned:", m->name,
                                  (unsigned long long)m->version);
    for (size_t i = 0; i < nd; i++) {
        const char *dev = tdm_plan_device_name(plan, i);
        tt_labelled *e = tt_labelled_get(&m->plan_nodes, dev);
        if (e)
            e->value = (double)tdm_plan_device_nodes(plan, i);
        if (off < sizeof line)
            off += (size_t)snprintf(line + off, sizeof line - off, " %zu nodes on %s%s", tdm_plan_device_nodes(plan, i),
                                    dev, i + 1 < nd ? "," : ";");
    }
    size_t nn = tdm_plan_node_count(plan);
    for (size_t i = 0; i < nn; i++) {
        const char *dev = NULL, *reason = NULL;
        if (tdm_plan_node(plan, i, NULL, NULL, &dev, &reason, NULL) != TDM_OK || !dev || !reason)
            continue;
        if (strcmp(dev, m->first_device) != 0 && strcmp(reason, "USER") != 0) {
            tt_labelled *e = tt_labelled_get(&m->plan_fallback, reason);
            if (e)
                e->value += 1;
        }
    }
    if (off < sizeof line)
        off += (size_t)snprintf(line + off, sizeof line - off, " %zu fallback nodes", s.fallback_nodes);
    for (size_t i = 0; i < m->plan_fallback.n && off < sizeof line; i++)
        off += (size_t)snprintf(line + off, sizeof line - off, "%s%s %.0f", i ? ", " : " (",
                                m->plan_fallback.v[i].label, m->plan_fallback.v[i].value);
    if (off < sizeof line)
        snprintf(line + off, sizeof line - off, "%s; %zu partitions; %llu boundary bytes per run",
                 m->plan_fallback.n ? ")" : "", s.partitions, (unsigned long long)s.boundary_bytes);
    TT_LOG(TRITONSERVER_LOG_INFO, "%s", line);
    if (tdm_plan_report(plan, &report) == TDM_OK && report)
        TT_LOG(TRITONSERVER_LOG_INFO, "tandem plan of model '%s':\n%s", m->name, report);

    if (ledger_file) {
        FILE *f = NULL;
        if (tdm_plan_ledger_json(plan, &ledger) != TDM_OK || !(f = fopen(ledger_file, "w")) ||
            fputs(ledger, f) < 0 || fclose(f) != 0) {
            err = tt_error(TRITONSERVER_ERROR_NOT_FOUND, "model '%s': cannot write the ledger to '%s'", m->name,
                           ledger_file);
            goto done;
        }
    }

    /* The fallback policy, enforced at load with every offender. */
    const char *policy = tdm_plan_error(plan);
    if (tdm_plan_status(plan) == TDM_E_POLICY) {
        char msg[TT_SENTENCE * 4];
        size_t nv = tdm_plan_violation_count(plan);
        size_t o = (size_t)snprintf(msg, sizeof msg, "model '%s': %s; %zu offending node%s:", m->name, policy, nv,
                                    nv == 1 ? "" : "s");
        for (size_t i = 0; i < nv && o < sizeof msg; i++) {
            const char *node = NULL, *reason = NULL, *detail = NULL;
            tdm_plan_violation(plan, i, &node, &reason, &detail);
            o += (size_t)snprintf(msg + o, sizeof msg - o, "%s %s (%s%s%s)", i ? ";" : "",
                                  node && node[0] ? node : "(graph output)", reason ? reason : "",
                                  detail && detail[0] ? ": " : "", detail ? detail : "");
        }
        /* Not shortened: the list is the point. */
        err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, msg);
        goto done;
    }

    m->m_boundary = tt_metric_new(m, TT_FAM_PLAN_BOUNDARY, NULL, NULL);
    tt_metric_set(m->m_boundary, (double)s.boundary_bytes);
    for (size_t i = 0; i < m->plan_nodes.n; i++) {
        m->plan_nodes.v[i].metric = tt_metric_new(m, TT_FAM_PLAN_NODES, "device", m->plan_nodes.v[i].label);
        tt_metric_set(m->plan_nodes.v[i].metric, m->plan_nodes.v[i].value);
    }
    for (size_t i = 0; i < m->plan_fallback.n; i++) {
        m->plan_fallback.v[i].metric = tt_metric_new(m, TT_FAM_PLAN_FALLBACK, "reason", m->plan_fallback.v[i].label);
        tt_metric_set(m->plan_fallback.v[i].metric, m->plan_fallback.v[i].value);
    }
done:
    tdm_free(report);
    tdm_free(ledger);
    tdm_plan_destroy(plan);
    return err;
}

TRITONSERVER_Error *TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model *model)
{
    TRITONSERVER_Error *err = NULL;
    TRITONSERVER_Message *msg = NULL;
    cJSON *config = NULL;
    tdm_ctx *ctx = NULL;
    tdm_model *tm = NULL;
    tt_model *m = calloc(1, sizeof *m);
    if (!m)
        return tt_error(TRITONSERVER_ERROR_INTERNAL, "tandem backend: out of memory");
    pthread_mutex_init(&m->mu, NULL);

    const char *name = NULL, *location = NULL;
    TRITONBACKEND_ArtifactType artifact = TRITONBACKEND_ARTIFACT_FILESYSTEM;
    TRITONBACKEND_Backend *backend = NULL;
    void *bstate = NULL;
    if ((err = TRITONBACKEND_ModelName(model, &name)) || (err = TRITONBACKEND_ModelVersion(model, &m->version)) ||
        (err = TRITONBACKEND_ModelRepository(model, &artifact, &location)) ||
        (err = TRITONBACKEND_ModelBackend(model, &backend)) || (err = TRITONBACKEND_BackendState(backend, &bstate)))
        goto fail;
    m->backend = bstate;
    m->name = tt_strdup(name ? name : "");
    if (!m->name) {
        err = tt_error(TRITONSERVER_ERROR_INTERNAL, "out of memory");
        goto fail;
    }
    if (artifact != TRITONBACKEND_ARTIFACT_FILESYSTEM || !location) {
        err = tt_error(TRITONSERVER_ERROR_UNSUPPORTED, "model '%s': the tandem backend reads models from a file system only",
                       m->name);
        goto fail;
    }

    const char *base = NULL;
    size_t size = 0;
    if ((err = TRITONBACKEND_ModelConfig(model, 1, &msg)) || (err = TRITONSERVER_MessageSerializeToJson(msg, &base, &size)))
        goto fail;
    config = cJSON_ParseWithLength(base, size);
    if (!config) {
        err = tt_error(TRITONSERVER_ERROR_INTERNAL, "model '%s': the server's model configuration is not JSON", m->name);
        goto fail;
    }
    m->max_batch = tt_json_int(cJSON_GetObjectItemCaseSensitive(config, "max_batch_size"), 0);
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(config, "parameters");

    const char *file = tt_param(params, "model_filename");
    const cJSON *dflt = cJSON_GetObjectItemCaseSensitive(config, "default_model_filename");
    if (!file && cJSON_IsString(dflt) && dflt->valuestring[0])
        file = dflt->valuestring;
    if (!file)
        file = "model.onnx";
    size_t plen = strlen(location) + strlen(file) + 32;
    m->path = malloc(plen);
    if (!m->path) {
        err = tt_error(TRITONSERVER_ERROR_INTERNAL, "out of memory");
        goto fail;
    }
    snprintf(m->path, plen, "%s/%llu/%s", location, (unsigned long long)m->version, file);

    if (tdm_session_options_create(&m->opts) != TDM_OK || tdm_metrics_create(&m->metrics) != TDM_OK ||
        tdm_ctx_create(&ctx) != TDM_OK) {
        err = tt_error(TRITONSERVER_ERROR_INTERNAL, "out of memory");
        goto fail;
    }
    if ((err = tt_options(params, location, m->opts)))
        goto fail;
    tdm_status st = tdm_model_load(ctx, m->path, &tm);
    if (st != TDM_OK) {
        err = tt_error(tt_code(st), "model '%s': %s", m->name, tdm_ctx_error(ctx));
        goto fail;
    }
    if ((err = tt_autocomplete(model, m->name, m->path, m->max_batch, tm, config)) || (err = tt_model_io(m, tm, config)))
        goto fail;
    const char *ledger_file = tt_param(params, "ledger_file");
    if ((err = tt_model_plan(m, tm, ctx, ledger_file)))
        goto fail;
    m->m_runs = tt_metric_new(m, TT_FAM_RUNS, NULL, NULL);
    m->m_failures = tt_metric_new(m, TT_FAM_RUN_FAILURES, NULL, NULL);
    m->m_copy_bytes = tt_metric_new(m, TT_FAM_COPY_BYTES, NULL, NULL);
    m->m_faults = tt_metric_new(m, TT_FAM_FAULTS, NULL, NULL);
    m->m_admit_waits = tt_metric_new(m, TT_FAM_ADMIT_WAITS, NULL, NULL);
    m->m_admit_seconds = tt_metric_new(m, TT_FAM_ADMIT_WAIT_SECONDS, NULL, NULL);
    m->m_admit_refused = tt_metric_new(m, TT_FAM_ADMIT_REFUSED, NULL, NULL);
    if ((err = TRITONBACKEND_ModelSetState(model, m)))
        goto fail;
    TT_LOG(TRITONSERVER_LOG_INFO, "tandem: model '%s' version %llu loaded from %s (max_batch_size %lld, batch %s)",
           m->name, (unsigned long long)m->version, m->path, (long long)m->max_batch,
           m->max_batch <= 0 ? "none" : m->fixed_batch ? "fixed: runs of that many rows" : "dynamic: requests run together");
    tdm_model_destroy(tm);
    tdm_ctx_destroy(ctx);
    cJSON_Delete(config);
    TRITONSERVER_MessageDelete(msg);
    return NULL;
fail:
    tdm_model_destroy(tm);
    tdm_ctx_destroy(ctx);
    cJSON_Delete(config);
    if (msg)
        TRITONSERVER_MessageDelete(msg);
    tt_model_free(m);
    return err;
}

TRITONSERVER_Error *TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model *model)
{
    void *state = NULL;
    TRITONSERVER_Error *err = TRITONBACKEND_ModelState(model, &state);
    if (err)
        return err;
    tt_model_free(state);
    return NULL;
}

/* ------------------------------------------------------ instance lifetime */

static void tt_instance_free(tt_instance *in)
{
    if (!in)
        return;
    tdm_session_destroy(in->session);
    tdm_model_destroy(in->tm);
    tdm_ctx_destroy(in->ctx);
    free(in->name);
    free(in);
}

TRITONSERVER_Error *TRITONBACKEND_ModelInstanceInitialize(TRITONBACKEND_ModelInstance *instance)
{
    TRITONBACKEND_Model *model = NULL;
    void *state = NULL;
    const char *name = NULL;
    TRITONSERVER_Error *err;
    if ((err = TRITONBACKEND_ModelInstanceModel(instance, &model)) || (err = TRITONBACKEND_ModelState(model, &state)) ||
        (err = TRITONBACKEND_ModelInstanceName(instance, &name)))
        return err;
    tt_model *m = state;
    tt_instance *in = calloc(1, sizeof *in);
    if (!in || !(in->name = tt_strdup(name ? name : "")) || tdm_ctx_create(&in->ctx) != TDM_OK) {
        tt_instance_free(in);
        return tt_error(TRITONSERVER_ERROR_INTERNAL, "tandem backend: out of memory");
    }
    in->model = m;
    tdm_status st = tdm_model_load(in->ctx, m->path, &in->tm);
    if (st == TDM_OK)
        st = tdm_session_create(in->ctx, in->tm, m->opts, &in->session);
    if (st != TDM_OK) {
        err = tt_error(tt_code(st), "model '%s' instance '%s': %s", m->name, in->name, tdm_ctx_error(in->ctx));
        tt_instance_free(in);
        return err;
    }
    tdm_session_set_observer(in->session, tt_observe, m);
    if ((err = TRITONBACKEND_ModelInstanceSetState(instance, in))) {
        tt_instance_free(in);
        return err;
    }
    return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_ModelInstanceFinalize(TRITONBACKEND_ModelInstance *instance)
{
    void *state = NULL;
    TRITONSERVER_Error *err = TRITONBACKEND_ModelInstanceState(instance, &state);
    if (err)
        return err;
    tt_instance_free(state);
    return NULL;
}

/* ---------------------------------------------------------------- execute */

typedef struct tt_in {
    const int64_t *shape;
    uint32_t rank;
    const unsigned char *data;
    unsigned char *owned; /* data gathered from several buffers */
    size_t bytes;
    size_t *eoff;         /* BYTES: where each element's 4-byte length starts (count + 1 entries) */
    size_t count;         /* BYTES: elements */
} tt_in;

typedef struct tt_out {
    int64_t *dims;
    int rank;
    tdm_dtype dtype;
    unsigned char *buf;
    size_t size, cap;
} tt_out;

typedef struct tt_req {
    TRITONBACKEND_Request *req;
    TRITONBACKEND_Response *resp;
    TRITONSERVER_Error *err;
    int64_t rows;
    tt_in *in;
    tt_out *out;
} tt_req;

/* One run's slice of a request: rows row0 .. row0 + rows - 1. */
typedef struct tt_seg {
    tt_req *r;
    int64_t row0, rows;
} tt_seg;

static TRITONSERVER_Error *tt_read_inputs(const tt_model *m, tt_req *r)
{
    for (size_t k = 0; k < m->n_in; k++) {
        TRITONBACKEND_Input *input = NULL;
        TRITONSERVER_Error *err = TRITONBACKEND_RequestInput(r->req, m->in_names[k], &input);
        if (err) {
            TRITONSERVER_ErrorDelete(err);
            return tt_error(TRITONSERVER_ERROR_INVALID_ARG, "model '%s': the request has no input '%s'", m->name,
                            m->in_names[k]);
        }
        TRITONSERVER_DataType type = TRITONSERVER_TYPE_INVALID;
        const int64_t *shape = NULL;
        uint32_t rank = 0, nbuf = 0;
        uint64_t byte_size = 0;
        if ((err = TRITONBACKEND_InputProperties(input, NULL, &type, &shape, &rank, &byte_size, &nbuf)))
            return err;
        TRITONSERVER_DataType want = tt_triton_type(m->in_types[k]);
        if (type != want)
            return tt_error(TRITONSERVER_ERROR_INVALID_ARG, "model '%s': input '%s' is %s but the model takes %s (%s)",
                            m->name, m->in_names[k], tt_triton_type_name(type), tt_triton_type_name(want),
                            tdm_dtype_name(m->in_types[k]));
        int ok;
        size_t count = tt_count(shape, rank, &ok);
        size_t esize = tdm_dtype_size(m->in_types[k]);
        int strings = m->in_types[k] == TDM_STRING;
        if (!ok || (!strings && ((esize && count > SIZE_MAX / esize) || byte_size != (uint64_t)(count * esize))))
            return tt_error(TRITONSERVER_ERROR_INVALID_ARG,
                            "model '%s': input '%s' holds %llu bytes, which is not what its shape and type need",
                            m->name, m->in_names[k], (unsigned long long)byte_size);
        if (m->max_batch > 0) {
            if (rank < 1)
                return tt_error(TRITONSERVER_ERROR_INVALID_ARG, "model '%s': input '%s' has no batch dimension",
                                m->name, m->in_names[k]);
            if (k > 0 && shape[0] != r->rows)
                return tt_error(TRITONSERVER_ERROR_INVALID_ARG,
                                "model '%s': input '%s' has a batch of %lld but '%s' has %lld", m->name,
                                m->in_names[k], (long long)shape[0], m->in_names[0], (long long)r->rows);
            r->rows = shape[0];
        }
        tt_in *in = &r->in[k];
        in->shape = shape;
        in->rank = rank;
        in->bytes = (size_t)byte_size;
        size_t off = 0;
        for (uint32_t b = 0; b < nbuf; b++) {
            const void *p = NULL;
            uint64_t n = 0;
            TRITONSERVER_MemoryType mt = TRITONSERVER_MEMORY_CPU;
            int64_t mid = 0;
            if ((err = TRITONBACKEND_InputBuffer(input, b, &p, &n, &mt, &mid)))
                return err;
            if (mt == TRITONSERVER_MEMORY_GPU)
                return tt_error(TRITONSERVER_ERROR_UNSUPPORTED, "model '%s': input '%s' is in GPU memory; tandem reads host memory",
                                m->name, m->in_names[k]);
            if (n > in->bytes - off)
                return tt_error(TRITONSERVER_ERROR_INVALID_ARG, "model '%s': input '%s' has more bytes than its shape",
                                m->name, m->in_names[k]);
            if (nbuf == 1) {
                in->data = p;
            } else {
                if (!in->owned && !(in->owned = malloc(in->bytes ? in->bytes : 1)))
                    return tt_error(TRITONSERVER_ERROR_INTERNAL, "out of memory");
                memcpy(in->owned + off, p, (size_t)n);
                in->data = in->owned;
            }
            off += (size_t)n;
        }
        if (off != in->bytes)
            return tt_error(TRITONSERVER_ERROR_INVALID_ARG, "model '%s': input '%s' has fewer bytes than its shape",
                            m->name, m->in_names[k]);
        if (strings && (err = tt_bytes_index(m->name, m->in_names[k], in->data, in->bytes, count, &in->eoff)))
            return err;
        in->count = strings ? count : 0;
    }
    return NULL;
}

/* Appends rows row0 .. row0 + rows - 1 of output o (the tensor t, of a run
 * over total rows) to a request's staging. */
static TRITONSERVER_Error *tt_append(const tt_model *m, tt_out *out, const tdm_tensor *t, size_t o, int64_t row0,
                                     int64_t rows, int64_t total)
{
    int rank = tdm_tensor_rank(t);
    const int64_t *dims = tdm_tensor_dims(t);
    size_t bytes = tdm_tensor_nbytes(t);
    const unsigned char *data = tdm_tensor_cdata(t);
    int strings = tdm_tensor_dtype(t) == TDM_STRING;
    unsigned char *ser = NULL; /* strings: the rows taken, as BYTES */
    if (strings) {
        /* the elements of rows row0 .. row0 + rows - 1, serialized */
        size_t count = tdm_tensor_count(t), per = count, first = 0;
        if (m->max_batch > 0 && rank >= 1 && dims[0] == total && total > 0) {
            per = count / (size_t)total * (size_t)rows;
            first = count / (size_t)total * (size_t)row0;
        }
        size_t n = 0;
        if (tt_bytes_pack((const char *const *)(const void *)data, first, per, &ser, &n))
            return tt_error(TRITONSERVER_ERROR_INTERNAL, "out of memory");
        data = ser;
        bytes = n;
    }
    size_t take = bytes, from = 0;
    if (m->max_batch > 0 && !strings) {
        if (rank < 1 || dims[0] != total)
            return tt_error(TRITONSERVER_ERROR_INTERNAL,
                            "model '%s': output '%s' has %lld rows for a batch of %lld; it cannot be split by request",
                            m->name, m->out_names[o], rank < 1 ? 0LL : (long long)dims[0], (long long)total);
        size_t row = total ? bytes / (size_t)total : 0;
        take = row * (size_t)rows;
        from = row * (size_t)row0;
    }
    if (!out->dims) {
        out->dims = malloc(sizeof *out->dims * (size_t)(rank > 0 ? rank : 1));
        if (!out->dims)
            return tt_error(TRITONSERVER_ERROR_INTERNAL, "out of memory");
        memcpy(out->dims, dims, sizeof *dims * (size_t)rank);
        out->rank = rank;
        out->dtype = tdm_tensor_dtype(t);
        if (m->max_batch > 0)
            out->dims[0] = 0;
    } else if (out->rank != rank || (rank > 1 && memcmp(out->dims + 1, dims + 1, sizeof *dims * (size_t)(rank - 1)))) {
        free(ser);
        return tt_error(TRITONSERVER_ERROR_INTERNAL, "model '%s': output '%s' changed shape between the runs of one request",
                        m->name, m->out_names[o]);
    }
    if (m->max_batch > 0)
        out->dims[0] += rows;
    if (take > out->cap - out->size) {
        size_t cap = out->size + take;
        unsigned char *b = realloc(out->buf, cap ? cap : 1);
        if (!b) {
            free(ser);
            return tt_error(TRITONSERVER_ERROR_INTERNAL, "out of memory");
        }
        out->buf = b;
        out->cap = cap;
    }
    if (take)
        memcpy(out->buf + out->size, data + from, take);
    out->size += take;
    free(ser);
    return NULL;
}

/* One tandem run over segs: inputs gathered row-wise, outputs scattered. */
static TRITONSERVER_Error *tt_run(tt_instance *inst, tt_seg *segs, size_t nseg)
{
    tt_model *m = inst->model;
    TRITONSERVER_Error *err = NULL;
    int64_t total = 0;
    for (size_t s = 0; s < nseg; s++)
        total += segs[s].rows;
    tdm_tensor **ins = calloc(m->n_in ? m->n_in : 1, sizeof *ins);
    tdm_tensor **outs = calloc(m->n_out ? m->n_out : 1, sizeof *outs);
    if (!ins || !outs) {
        err = tt_error(TRITONSERVER_ERROR_INTERNAL, "out of memory");
        goto done;
    }
    for (size_t k = 0; k < m->n_in; k++) {
        const tt_in *first = &segs[0].r->in[k];
        int64_t *dims = malloc(sizeof *dims * (first->rank ? first->rank : 1));
        if (!dims) {
            err = tt_error(TRITONSERVER_ERROR_INTERNAL, "out of memory");
            goto done;
        }
        memcpy(dims, first->shape, sizeof *dims * first->rank);
        if (m->max_batch > 0)
            dims[0] = total;
        tdm_status st = tdm_tensor_create(m->in_types[k], (int)first->rank, dims, &ins[k]);
        free(dims);
        if (st != TDM_OK) {
            err = tt_error(tt_code(st), "model '%s': input '%s' cannot be made (%s)", m->name, m->in_names[k],
                           tdm_status_str(st));
            goto done;
        }
        unsigned char *dst = tdm_tensor_data(ins[k]);
        size_t off = 0;
        for (size_t s = 0; s < nseg && m->in_types[k] == TDM_STRING; s++) {
            /* BYTES: the segment's elements, one string each */
            const tt_in *in = &segs[s].r->in[k];
            size_t per = in->count, e0 = 0;
            if (m->max_batch > 0 && segs[s].r->rows > 0) {
                per = in->count / (size_t)segs[s].r->rows * (size_t)segs[s].rows;
                e0 = in->count / (size_t)segs[s].r->rows * (size_t)segs[s].row0;
            }
            for (size_t i = e0; i < e0 + per && !err; i++) {
                const unsigned char *p = in->data + in->eoff[i];
                if ((st = tdm_tensor_set_string(ins[k], off++, (const char *)p + 4, tt_le32(p))) != TDM_OK)
                    err = tt_error(tt_code(st), "model '%s': input '%s': %s", m->name, m->in_names[k],
                                   tdm_status_str(st));
            }
            if (err)
                goto done;
        }
        for (size_t s = 0; s < nseg && m->in_types[k] != TDM_STRING; s++) {
            const tt_in *in = &segs[s].r->in[k];
            size_t take = in->bytes, from = 0;
            if (m->max_batch > 0 && segs[s].r->rows > 0) {
                size_t row = in->bytes / (size_t)segs[s].r->rows;
                take = row * (size_t)segs[s].rows;
                from = row * (size_t)segs[s].row0;
            }
            if (take)
                memcpy(dst + off, in->data + from, take);
            off += take;
        }
    }
    tdm_status st = tdm_session_run(inst->session, (const tdm_tensor *const *)ins, outs);
    if (st != TDM_OK) {
        char sentence[TT_SENTENCE];
        tdm_session_error_copy(inst->session, sentence, sizeof sentence);
        err = tt_error(tt_code(st), "model '%s': %s (%s)", m->name, sentence, tdm_status_str(st));
        goto done;
    }
    for (size_t o = 0; o < m->n_out && !err; o++) {
        if (!outs[o] || tdm_tensor_kind(outs[o]) != TDM_KIND_TENSOR) {
            err = tt_error(TRITONSERVER_ERROR_UNSUPPORTED, "model '%s': output '%s' is not a tensor", m->name,
                           m->out_names[o]);
            break;
        }
        int64_t at = 0; /* the segment's first row in this run's output */
        for (size_t s = 0; s < nseg && !err; s++) {
            err = tt_append(m, &segs[s].r->out[o], outs[o], o, at, segs[s].rows, total);
            at += segs[s].rows;
        }
    }
done:
    for (size_t k = 0; ins && k < m->n_in; k++)
        tdm_tensor_destroy(ins[k]);
    for (size_t o = 0; outs && o < m->n_out; o++)
        tdm_tensor_destroy(outs[o]);
    free(ins);
    free(outs);
    return err;
}

/* A failed run fails every request it carried, each with its own copy. */
static void tt_fail_segs(tt_seg *segs, size_t nseg, TRITONSERVER_Error *err)
{
    for (size_t s = 0; s < nseg; s++)
        if (!segs[s].r->err)
            segs[s].r->err = TRITONSERVER_ErrorNew(TRITONSERVER_ErrorCode(err), TRITONSERVER_ErrorMessage(err));
    TRITONSERVER_ErrorDelete(err);
}

/* Whether requests a and b can share one run: same non-batch dims. */
static int tt_compatible(const tt_model *m, const tt_req *a, const tt_req *b)
{
    for (size_t k = 0; k < m->n_in; k++) {
        if (a->in[k].rank != b->in[k].rank)
            return 0;
        for (uint32_t d = 1; d < a->in[k].rank; d++)
            if (a->in[k].shape[d] != b->in[k].shape[d])
                return 0;
    }
    return 1;
}

static TRITONSERVER_Error *tt_respond(const tt_model *m, tt_req *r)
{
    uint32_t n = 0;
    TRITONSERVER_Error *err = TRITONBACKEND_RequestOutputCount(r->req, &n);
    if (err)
        return err;
    for (uint32_t i = 0; i < n; i++) {
        const char *name = NULL;
        if ((err = TRITONBACKEND_RequestOutputName(r->req, i, &name)))
            return err;
        size_t o = 0;
        while (o < m->n_out && strcmp(m->out_names[o], name) != 0)
            o++;
        if (o == m->n_out)
            return tt_error(TRITONSERVER_ERROR_INVALID_ARG, "model '%s' has no output '%s'", m->name, name);
        const tt_out *out = &r->out[o];
        TRITONBACKEND_Output *output = NULL;
        if ((err = TRITONBACKEND_ResponseOutput(r->resp, &output, name, tt_triton_type(out->dtype), out->dims,
                                                (uint32_t)out->rank)))
            return err;
        void *buf = NULL;
        TRITONSERVER_MemoryType mt = TRITONSERVER_MEMORY_CPU;
        int64_t mid = 0;
        if ((err = TRITONBACKEND_OutputBuffer(output, &buf, out->size, &mt, &mid)))
            return err;
        if (mt == TRITONSERVER_MEMORY_GPU)
            return tt_error(TRITONSERVER_ERROR_UNSUPPORTED, "model '%s': the server gave GPU memory for output '%s'",
                            m->name, name);
        if (out->size)
            memcpy(buf, out->buf, out->size);
    }
    return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_ModelInstanceExecute(TRITONBACKEND_ModelInstance *instance,
                                                       TRITONBACKEND_Request **requests, const uint32_t request_count)
{
    uint64_t exec_start = tt_now_ns();
    void *state = NULL;
    TRITONSERVER_Error *err = TRITONBACKEND_ModelInstanceState(instance, &state);
    if (err)
        return err; /* the requests are still Triton's */
    tt_instance *inst = state;
    tt_model *m = inst->model;
    tt_req *reqs = calloc(request_count ? request_count : 1, sizeof *reqs);
    tt_seg *segs = calloc(request_count ? request_count : 1, sizeof *segs);
    int oom = !reqs || !segs;
    for (uint32_t i = 0; !oom && i < request_count; i++) {
        tt_req *r = &reqs[i];
        r->req = requests[i];
        r->in = calloc(m->n_in ? m->n_in : 1, sizeof *r->in);
        r->out = calloc(m->n_out ? m->n_out : 1, sizeof *r->out);
        if (!r->in || !r->out) {
            oom = 1;
            break;
        }
        if ((err = TRITONBACKEND_ResponseNew(&r->resp, r->req))) {
            TT_LOG(TRITONSERVER_LOG_ERROR, "tandem: model '%s': no response for a request: %s", m->name,
                   TRITONSERVER_ErrorMessage(err));
            TRITONSERVER_ErrorDelete(err);
            r->resp = NULL;
            continue;
        }
        r->err = tt_read_inputs(m, r);
    }
    if (oom) {
        /* Nothing was sent: hand the requests back to Triton. */
        for (uint32_t i = 0; reqs && i < request_count; i++) {
            if (reqs[i].resp)
                TRITONBACKEND_ResponseDelete(reqs[i].resp);
            free(reqs[i].in);
            free(reqs[i].out);
        }
        free(reqs);
        free(segs);
        return tt_error(TRITONSERVER_ERROR_UNAVAILABLE, "tandem backend: out of memory");
    }

    uint64_t compute_start = tt_now_ns();
    uint64_t batch = 0;
    if (m->max_batch > 0 && m->fixed_batch == 0) {
        /* A dynamic batch dimension: compatible requests run together. */
        int *done = calloc(request_count ? request_count : 1, sizeof *done);
        for (uint32_t i = 0; i < request_count; i++) {
            if (!reqs[i].resp || reqs[i].err || (done && done[i]))
                continue;
            size_t n = 0;
            for (uint32_t j = i; j < request_count; j++) {
                if (!reqs[j].resp || reqs[j].err || (done && done[j]) || (j != i && !done) ||
                    !tt_compatible(m, &reqs[i], &reqs[j]))
                    continue;
                segs[n++] = (tt_seg){&reqs[j], 0, reqs[j].rows};
                if (done)
                    done[j] = 1;
            }
            if ((err = tt_run(inst, segs, n)))
                tt_fail_segs(segs, n, err);
            else
                for (size_t s = 0; s < n; s++)
                    batch += (uint64_t)segs[s].rows;
        }
        free(done);
    } else {
        for (uint32_t i = 0; i < request_count; i++) {
            tt_req *r = &reqs[i];
            if (!r->resp || r->err)
                continue;
            int64_t step = m->max_batch > 0 ? m->fixed_batch : 1, rows = m->max_batch > 0 ? r->rows : 1;
            if (m->max_batch > 0 && (rows == 0 || rows % step != 0)) {
                r->err = tt_error(TRITONSERVER_ERROR_INVALID_ARG,
                                  "model '%s' runs batches of %lld rows; a request of %lld rows cannot be split so",
                                  m->name, (long long)step, (long long)rows);
                continue;
            }
            for (int64_t row = 0; row < rows && !r->err; row += step) {
                tt_seg seg = {r, row, step};
                if ((err = tt_run(inst, &seg, 1)))
                    tt_fail_segs(&seg, 1, err);
            }
            if (!r->err)
                batch += (uint64_t)(m->max_batch > 0 ? rows : 1);
        }
    }
    uint64_t compute_end = tt_now_ns();

    for (uint32_t i = 0; i < request_count; i++) {
        tt_req *r = &reqs[i];
        if (r->resp && !r->err)
            r->err = tt_respond(m, r);
        if (r->resp) {
            TRITONSERVER_Error *e = TRITONBACKEND_ResponseSend(r->resp, TDM_TRITON_RESPONSE_COMPLETE_FINAL, r->err);
            if (e) {
                TT_LOG(TRITONSERVER_LOG_ERROR, "tandem: model '%s': response not sent: %s", m->name,
                       TRITONSERVER_ErrorMessage(e));
                TRITONSERVER_ErrorDelete(e);
            }
        }
    }
    uint64_t exec_end = tt_now_ns();
    for (uint32_t i = 0; i < request_count; i++) {
        tt_req *r = &reqs[i];
        TRITONSERVER_Error *e = TRITONBACKEND_ModelInstanceReportStatistics(instance, r->req, r->resp && !r->err,
                                                                            exec_start, compute_start, compute_end,
                                                                            exec_end);
        if (e)
            TRITONSERVER_ErrorDelete(e);
        e = TRITONBACKEND_RequestRelease(r->req, TDM_TRITON_REQUEST_RELEASE_ALL);
        if (e) {
            TT_LOG(TRITONSERVER_LOG_ERROR, "tandem: model '%s': request not released: %s", m->name,
                   TRITONSERVER_ErrorMessage(e));
            TRITONSERVER_ErrorDelete(e);
        }
        if (r->err)
            TRITONSERVER_ErrorDelete(r->err);
        for (size_t k = 0; k < m->n_in; k++) {
            free(r->in[k].owned);
            free(r->in[k].eoff);
        }
        for (size_t o = 0; o < m->n_out; o++) {
            free(r->out[o].dims);
            free(r->out[o].buf);
        }
        free(r->in);
        free(r->out);
    }
    if (batch) {
        TRITONSERVER_Error *e = TRITONBACKEND_ModelInstanceReportBatchStatistics(instance, batch, exec_start,
                                                                                 compute_start, compute_end, exec_end);
        if (e)
            TRITONSERVER_ErrorDelete(e);
    }
    free(reqs);
    free(segs);
    tt_metrics_sync(m);
    return NULL;
}
