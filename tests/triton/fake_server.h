/* A fake Triton server for the backend's unit tests: our own
 * implementations of the TRITONSERVER_ and TRITONBACKEND_ functions that
 * libtriton_tandem.so calls (backends/triton/triton_api.h), with objects a
 * test builds and inspects. Not thread-safe; one test thread. */
#ifndef TDM_TRITON_FAKE_SERVER_H
#define TDM_TRITON_FAKE_SERVER_H

#include "triton_api.h"

struct TRITONSERVER_Error {
    TRITONSERVER_Error_Code code;
    char *msg;
};

struct TRITONBACKEND_Backend {
    void *state;
};

struct TRITONBACKEND_Model {
    const char *name;
    uint64_t version;
    const char *repository;  /* the model's folder */
    const char *config_json; /* what TRITONBACKEND_ModelConfig serializes */
    TRITONBACKEND_Backend *backend;
    void *state;
    int autocomplete;        /* what TRITONBACKEND_ModelAutoCompleteConfig reports */
    char *set_config;        /* the JSON given to TRITONBACKEND_ModelSetConfig (malloc'd; NULL: none) */
};

struct TRITONBACKEND_ModelInstance {
    const char *name;
    TRITONBACKEND_Model *model;
    void *state;
};

struct TRITONBACKEND_Input {
    const char *name;
    TRITONSERVER_DataType dtype;
    int64_t shape[8];
    uint32_t rank;
    const void *data;
    uint64_t bytes;
    uint32_t buffers; /* the data is handed out in this many pieces (>= 1) */
};

struct TRITONBACKEND_Output {
    char *name;
    TRITONSERVER_DataType dtype;
    int64_t shape[8];
    uint32_t rank;
    void *buf;
    uint64_t size;
};

struct TRITONBACKEND_Response {
    TRITONBACKEND_Request *request;
    TRITONBACKEND_Output *outputs[8];
    uint32_t n_outputs;
    int sent;
    TRITONSERVER_Error_Code code; /* when error */
    char *error;                  /* NULL: success */
};

struct TRITONBACKEND_Request {
    TRITONBACKEND_Input inputs[8];
    uint32_t n_inputs;
    const char *outputs[8];
    uint32_t n_outputs;
    int released;
    int stats_reported, stats_success;
    TRITONBACKEND_Response *response; /* the one the backend created */
};

/* The fake's knobs and records. */
extern uint32_t fake_api_minor;       /* what TRITONBACKEND_ApiVersion reports (default 19) */
extern int fake_metrics_enabled;      /* MetricFamilyNew fails when 0 */
extern uint64_t fake_batch_stats;     /* sum of ReportBatchStatistics batch sizes */

/* Everything logged so far, one message a line (owned by the fake). */
const char *fake_log(void);
void fake_log_clear(void);
/* The value of the metric of family `family` whose labels include every
 * "key=value" of `labels` (comma-separated; "" matches any); -1 when none. */
double fake_metric(const char *family, const char *labels);
/* Frees a response the backend sent (and its outputs). */
void fake_response_free(TRITONBACKEND_Response *r);

#endif
