/* The fake Triton server (fake_server.h): just enough of the server's side
 * of the C API for libtriton_tandem.so, recording what the backend does. */
#define _POSIX_C_SOURCE 200809L
#include "fake_server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint32_t fake_api_minor = 19;
int fake_metrics_enabled = 1;
uint64_t fake_batch_stats;

static char *fake_logbuf;
static size_t fake_loglen;

static char *fake_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

const char *fake_log(void)
{
    return fake_logbuf ? fake_logbuf : "";
}

void fake_log_clear(void)
{
    free(fake_logbuf);
    fake_logbuf = NULL;
    fake_loglen = 0;
}

/* ------------------------------------------------------------ tritonserver */

TRITONSERVER_Error *TRITONSERVER_ErrorNew(TRITONSERVER_Error_Code code, const char *msg)
{
    TRITONSERVER_Error *e = malloc(sizeof *e);
    if (!e)
        abort();
    e->code = code;
    e->msg = fake_strdup(msg ? msg : "");
    return e;
}

void TRITONSERVER_ErrorDelete(TRITONSERVER_Error *error)
{
    if (error) {
        free(error->msg);
        free(error);
    }
}

TRITONSERVER_Error_Code TRITONSERVER_ErrorCode(TRITONSERVER_Error *error)
{
    return error->code;
}

const char *TRITONSERVER_ErrorMessage(TRITONSERVER_Error *error)
{
    return error->msg;
}

bool TRITONSERVER_LogIsEnabled(TRITONSERVER_LogLevel level)
{
    (void)level;
    return true;
}

TRITONSERVER_Error *TRITONSERVER_LogMessage(TRITONSERVER_LogLevel level, const char *filename, const int line,
                                            const char *msg)
{
    (void)filename;
    (void)line;
    static const char tag[] = "IWEV";
    size_t n = strlen(msg) + 4;
    char *b = realloc(fake_logbuf, fake_loglen + n + 1);
    if (!b)
        abort();
    fake_logbuf = b;
    fake_loglen += (size_t)snprintf(b + fake_loglen, n + 1, "%c %s\n", tag[level & 3], msg);
    return NULL;
}

struct TRITONSERVER_Message {
    const char *json;
    char *owned; /* made by MessageNewFromSerializedJson */
};

TRITONSERVER_Error *TRITONSERVER_MessageSerializeToJson(TRITONSERVER_Message *message, const char **base,
                                                        size_t *byte_size)
{
    *base = message->json;
    *byte_size = strlen(message->json);
    return NULL;
}

TRITONSERVER_Error *TRITONSERVER_MessageDelete(TRITONSERVER_Message *message)
{
    if (message)
        free(message->owned);
    free(message);
    return NULL;
}

TRITONSERVER_Error *TRITONSERVER_MessageNewFromSerializedJson(TRITONSERVER_Message **message, const char *base,
                                                              size_t byte_size)
{
    TRITONSERVER_Message *m = calloc(1, sizeof *m);
    if (!m || !(m->owned = malloc(byte_size + 1)))
        abort();
    memcpy(m->owned, base, byte_size);
    m->owned[byte_size] = '\0';
    m->json = m->owned;
    *message = m;
    return NULL;
}

struct TRITONSERVER_Parameter {
    char *text; /* "name=value" */
};

TRITONSERVER_Parameter *TRITONSERVER_ParameterNew(const char *name, const TRITONSERVER_ParameterType type,
                                                  const void *value)
{
    if (type != TRITONSERVER_PARAMETER_STRING)
        return NULL;
    TRITONSERVER_Parameter *p = malloc(sizeof *p);
    size_t n = strlen(name) + strlen(value) + 2;
    if (!p || !(p->text = malloc(n)))
        abort();
    snprintf(p->text, n, "%s=%s", name, (const char *)value);
    return p;
}

void TRITONSERVER_ParameterDelete(TRITONSERVER_Parameter *parameter)
{
    if (parameter) {
        free(parameter->text);
        free(parameter);
    }
}

struct TRITONSERVER_MetricFamily {
    char *name;
    TRITONSERVER_MetricKind kind;
};

struct TRITONSERVER_Metric {
    TRITONSERVER_MetricFamily *family;
    char *labels; /* ",k=v,k=v," */
    double value;
    int live;
};

static TRITONSERVER_Metric *fake_metrics[4096];
static size_t fake_nmetrics;

TRITONSERVER_Error *TRITONSERVER_MetricFamilyNew(TRITONSERVER_MetricFamily **family, const TRITONSERVER_MetricKind kind,
                                                 const char *name, const char *description)
{
    (void)description;
    if (!fake_metrics_enabled)
        return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNAVAILABLE, "metrics are disabled");
    TRITONSERVER_MetricFamily *f = malloc(sizeof *f);
    if (!f)
        abort();
    f->name = fake_strdup(name);
    f->kind = kind;
    *family = f;
    return NULL;
}

TRITONSERVER_Error *TRITONSERVER_MetricFamilyDelete(TRITONSERVER_MetricFamily *family)
{
    for (size_t i = 0; i < fake_nmetrics; i++)
        if (fake_metrics[i]->family == family && fake_metrics[i]->live)
            return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "a metric of the family is still alive");
    free(family->name);
    free(family);
    return NULL;
}

TRITONSERVER_Error *TRITONSERVER_MetricNew(TRITONSERVER_Metric **metric, TRITONSERVER_MetricFamily *family,
                                           const TRITONSERVER_Parameter **labels, const uint64_t label_count)
{
    if (fake_nmetrics == sizeof fake_metrics / sizeof fake_metrics[0])
        return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "too many metrics");
    size_t n = 2;
    for (uint64_t i = 0; i < label_count; i++)
        n += strlen(labels[i]->text) + 1;
    TRITONSERVER_Metric *m = calloc(1, sizeof *m);
    if (!m || !(m->labels = malloc(n)))
        abort();
    strcpy(m->labels, ",");
    for (uint64_t i = 0; i < label_count; i++) {
        strcat(m->labels, labels[i]->text);
        strcat(m->labels, ",");
    }
    m->family = family;
    m->live = 1;
    fake_metrics[fake_nmetrics++] = m;
    *metric = m;
    return NULL;
}

TRITONSERVER_Error *TRITONSERVER_MetricDelete(TRITONSERVER_Metric *metric)
{
    /* Kept (not live) so tests can read a finalized model's figures. */
    metric->live = 0;
    return NULL;
}

TRITONSERVER_Error *TRITONSERVER_MetricIncrement(TRITONSERVER_Metric *metric, double value)
{
    if (metric->family->kind == TRITONSERVER_METRIC_KIND_COUNTER && value < 0)
        return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, "a counter cannot decrease");
    metric->value += value;
    return NULL;
}

TRITONSERVER_Error *TRITONSERVER_MetricSet(TRITONSERVER_Metric *metric, double value)
{
    if (metric->family->kind == TRITONSERVER_METRIC_KIND_COUNTER)
        return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNSUPPORTED, "a counter cannot be set");
    metric->value = value;
    return NULL;
}

double fake_metric(const char *family, const char *labels)
{
    for (size_t i = fake_nmetrics; i-- > 0;) {
        TRITONSERVER_Metric *m = fake_metrics[i];
        if (strcmp(m->family->name, family) != 0)
            continue;
        int all = 1;
        char want[256];
        snprintf(want, sizeof want, "%s", labels);
        char *save = NULL;
        for (char *kv = strtok_r(want, ",", &save); kv && all; kv = strtok_r(NULL, ",", &save)) {
            char pat[300];
            snprintf(pat, sizeof pat, ",%s,", kv);
            all = strstr(m->labels, pat) != NULL;
        }
        if (all)
            return m->value;
    }
    return -1;
}

/* ----------------------------------------------------------- tritonbackend */

TRITONSERVER_Error *TRITONBACKEND_ApiVersion(uint32_t *major, uint32_t *minor)
{
    *major = 1;
    *minor = fake_api_minor;
    return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_BackendName(TRITONBACKEND_Backend *backend, const char **name)
{
    (void)backend;
    *name = "tandem";
    return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_BackendState(TRITONBACKEND_Backend *backend, void **state)
{
    *state = backend->state;
    return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_BackendSetState(TRITONBACKEND_Backend *backend, void *state)
{
    backend->state = state;
    return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_ModelName(TRITONBACKEND_Model *model, const char **name)
{
    *name = model->name;
    return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_ModelVersion(TRITONBACKEND_Model *model, uint64_t *version)
{
    *version = model->version;
    return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_ModelRepository(TRITONBACKEND_Model *model, TRITONBACKEND_ArtifactType *artifact_type,
                                                  const char **location)
{
    *artifact_type = TRITONBACKEND_ARTIFACT_FILESYSTEM;
    *location = model->repository;
    return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_ModelConfig(TRITONBACKEND_Model *model, const uint32_t config_version,
                                              TRITONSERVER_Message **model_config)
{
    if (config_version != 1)
        return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNSUPPORTED, "config version");
    TRITONSERVER_Message *m = calloc(1, sizeof *m);
    if (!m)
        abort();
    m->json = model->config_json;
    *model_config = m;
    return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_ModelAutoCompleteConfig(TRITONBACKEND_Model *model, bool *auto_complete_config)
{
    *auto_complete_config = model->autocomplete != 0;
    return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_ModelSetConfig(TRITONBACKEND_Model *model, const uint32_t config_version,
                                                 TRITONSERVER_Message *model_config)
{
    if (config_version != 1)
        return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNSUPPORTED, "config version");
    if (!model->autocomplete)
        return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, "SetConfig without auto-complete");
    free(model->set_config);
    model->set_config = malloc(strlen(model_config->json) + 1);
    if (!model->set_config)
        abort();
    strcpy(model->set_config, model_config->json);
    return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_ModelBackend(TRITONBACKEND_Model *model, TRITONBACKEND_Backend **backend)
{
    *backend = model->backend;
    return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_ModelState(TRITONBACKEND_Model *model, void **state)
{
    *state = model->state;
    return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_ModelSetState(TRITONBACKEND_Model *model, void *state)
{
    model->state = state;
    return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_ModelInstanceName(TRITONBACKEND_ModelInstance *instance, const char **name)
{
    *name = instance->name;
    return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_ModelInstanceModel(TRITONBACKEND_ModelInstance *instance, TRITONBACKEND_Model **model)
{
    *model = instance->model;
    return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_ModelInstanceState(TRITONBACKEND_ModelInstance *instance, void **state)
{
    *state = instance->state;
    return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_ModelInstanceSetState(TRITONBACKEND_ModelInstance *instance, void *state)
{
    instance->state = state;
    return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_ModelInstanceReportStatistics(TRITONBACKEND_ModelInstance *instance,
                                                                TRITONBACKEND_Request *request, const bool success,
                                                                const uint64_t exec_start_ns,
                                                                const uint64_t compute_start_ns,
                                                                const uint64_t compute_end_ns,
                                                                const uint64_t exec_end_ns)
{
    (void)instance;
    if (!(exec_start_ns <= compute_start_ns && compute_start_ns <= compute_end_ns && compute_end_ns <= exec_end_ns))
        return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, "times out of order");
    request->stats_reported++;
    request->stats_success = success;
    return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_ModelInstanceReportBatchStatistics(TRITONBACKEND_ModelInstance *instance,
                                                                     const uint64_t batch_size,
                                                                     const uint64_t exec_start_ns,
                                                                     const uint64_t compute_start_ns,
                                                                     const uint64_t compute_end_ns,
                                                                     const uint64_t exec_end_ns)
{
    (void)instance;
    (void)exec_start_ns;
    (void)compute_start_ns;
    (void)compute_end_ns;
    (void)exec_end_ns;
    fake_batch_stats += batch_size;
    return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_RequestInput(TRITONBACKEND_Request *request, const char *name,
                                               TRITONBACKEND_Input **input)
{
    for (uint32_t i = 0; i < request->n_inputs; i++)
        if (strcmp(request->inputs[i].name, name) == 0) {
            *input = &request->inputs[i];
            return NULL;
        }
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, "no such input");
}

TRITONSERVER_Error *TRITONBACKEND_RequestOutputCount(TRITONBACKEND_Request *request, uint32_t *count)
{
    *count = request->n_outputs;
    return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_RequestOutputName(TRITONBACKEND_Request *request, const uint32_t index,
                                                    const char **output_name)
{
    if (index >= request->n_outputs)
        return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, "output index");
    *output_name = request->outputs[index];
    return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_RequestRelease(TRITONBACKEND_Request *request, uint32_t release_flags)
{
    if (release_flags != TDM_TRITON_REQUEST_RELEASE_ALL || request->released)
        return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, "released twice");
    request->released = 1;
    return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_InputProperties(TRITONBACKEND_Input *input, const char **name,
                                                  TRITONSERVER_DataType *datatype, const int64_t **shape,
                                                  uint32_t *dims_count, uint64_t *byte_size, uint32_t *buffer_count)
{
    if (name)
        *name = input->name;
    if (datatype)
        *datatype = input->dtype;
    if (shape)
        *shape = input->shape;
    if (dims_count)
        *dims_count = input->rank;
    if (byte_size)
        *byte_size = input->bytes;
    if (buffer_count)
        *buffer_count = input->buffers ? input->buffers : 1;
    return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_InputBuffer(TRITONBACKEND_Input *input, const uint32_t index, const void **buffer,
                                              uint64_t *buffer_byte_size, TRITONSERVER_MemoryType *memory_type,
                                              int64_t *memory_type_id)
{
    uint32_t n = input->buffers ? input->buffers : 1;
    if (index >= n)
        return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, "buffer index");
    /* n pieces: the first n - 1 of bytes / n, the last the rest. */
    uint64_t piece = input->bytes / n;
    *buffer = (const unsigned char *)input->data + piece * index;
    *buffer_byte_size = index + 1 < n ? piece : input->bytes - piece * (n - 1);
    *memory_type = TRITONSERVER_MEMORY_CPU;
    *memory_type_id = 0;
    return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_ResponseNew(TRITONBACKEND_Response **response, TRITONBACKEND_Request *request)
{
    if (request->response)
        return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_ALREADY_EXISTS, "a second response");
    TRITONBACKEND_Response *r = calloc(1, sizeof *r);
    if (!r)
        abort();
    r->request = request;
    request->response = r;
    *response = r;
    return NULL;
}

void fake_response_free(TRITONBACKEND_Response *r)
{
    if (!r)
        return;
    for (uint32_t i = 0; i < r->n_outputs; i++) {
        free(r->outputs[i]->name);
        free(r->outputs[i]->buf);
        free(r->outputs[i]);
    }
    free(r->error);
    free(r);
}

TRITONSERVER_Error *TRITONBACKEND_ResponseDelete(TRITONBACKEND_Response *response)
{
    response->request->response = NULL;
    fake_response_free(response);
    return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_ResponseOutput(TRITONBACKEND_Response *response, TRITONBACKEND_Output **output,
                                                 const char *name, const TRITONSERVER_DataType datatype,
                                                 const int64_t *shape, const uint32_t dims_count)
{
    if (response->n_outputs == 8 || dims_count > 8)
        return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "too many outputs or dims");
    TRITONBACKEND_Output *o = calloc(1, sizeof *o);
    if (!o)
        abort();
    o->name = fake_strdup(name);
    o->dtype = datatype;
    o->rank = dims_count;
    memcpy(o->shape, shape, sizeof *shape * dims_count);
    response->outputs[response->n_outputs++] = o;
    *output = o;
    return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_OutputBuffer(TRITONBACKEND_Output *output, void **buffer,
                                               const uint64_t buffer_byte_size, TRITONSERVER_MemoryType *memory_type,
                                               int64_t *memory_type_id)
{
    if (output->buf)
        return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_ALREADY_EXISTS, "a second buffer");
    output->buf = malloc(buffer_byte_size ? buffer_byte_size : 1);
    if (!output->buf)
        abort();
    output->size = buffer_byte_size;
    *buffer = output->buf;
    *memory_type = TRITONSERVER_MEMORY_CPU;
    *memory_type_id = 0;
    return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_ResponseSend(TRITONBACKEND_Response *response, const uint32_t send_flags,
                                               TRITONSERVER_Error *error)
{
    if (send_flags != TDM_TRITON_RESPONSE_COMPLETE_FINAL || response->sent)
        return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, "sent twice or not final");
    response->sent = 1;
    if (error) {
        response->code = error->code;
        response->error = fake_strdup(error->msg);
    }
    return NULL;
}
