/* What libtriton_tandem.so's files share: the helpers of triton_tandem.c
 * (sentences as Triton errors and log lines, types) and those of tt_io.c
 * (config parameters, config auto-complete, string tensors as BYTES). */
#ifndef TDM_TRITON_TT_IO_H
#define TDM_TRITON_TT_IO_H

#include "triton_api.h"

#include <tandem/tandem.h>

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#define TT_SENTENCE 1024

/* triton_tandem.c */
void tt_log(TRITONSERVER_LogLevel level, int line, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
#define TT_LOG(level, ...) tt_log(level, __LINE__, __VA_ARGS__)
/* A Triton error carrying one sentence. */
TRITONSERVER_Error *tt_error(TRITONSERVER_Error_Code code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
char *tt_strdup(const char *s);
/* Triton's type for a tandem element type (TDM_STRING: BYTES); INVALID when none. */
TRITONSERVER_DataType tt_triton_type(tdm_dtype t);

/* tt_io.c */
/* A config parameter's string: config.pbtxt `parameters { key: "devices"
 * value: { string_value: "vnpu:server-npu,cpu" } }`, as JSON; NULL when absent. */
const char *tt_param(const cJSON *params, const char *key);
/* 1 and *out when s is an integer in [lo, hi]; 0 otherwise. */
int tt_integer(const char *s, long long lo, long long hi, long long *out);
/* tandem's run options from the config's parameters. dir is the model's
 * folder (relative calibration, calibration input and plugin paths are
 * resolved there). NULL, or the error naming the parameter. */
TRITONSERVER_Error *tt_options(const cJSON *params, const char *dir, tdm_session_options *o);
/* Parameter 'shapes': "NAME=DxDxD" (-1 keeps a dim dynamic), several separated by ';'. */
TRITONSERVER_Error *tt_shapes(tdm_session_options *o, const char *list);
/* The type's name in a model configuration (TYPE_FP32, TYPE_STRING for
 * BYTES); NULL when Triton has none for it. */
const char *tt_config_type(tdm_dtype t);
/* Triton's auto-complete: when the server allows it, a configuration
 * without `input` or `output` gets them from the ONNX model tm (name, type,
 * dims; the batch dimension left out when max_batch > 0; -1 for a dynamic
 * one), handed back with TRITONBACKEND_ModelSetConfig; config is updated in
 * place. name and path name the model in sentences. */
TRITONSERVER_Error *tt_autocomplete(TRITONBACKEND_Model *model, const char *name, const char *path, int64_t max_batch,
                                   const tdm_model *tm, cJSON *config);
/* Triton's BYTES: each element a 4-byte little-endian length and that many
 * bytes. tt_le32 reads a length; tt_bytes_index finds where each of count
 * elements of data starts (*eoff, count + 1 entries, malloc'd even on
 * failure) or says where data is not that (model, name: for the
 * sentence); tt_bytes_pack serializes s[first .. first + n - 1] into a
 * malloc'd *out of *size bytes (-1: out of memory). */
uint32_t tt_le32(const unsigned char *p);
TRITONSERVER_Error *tt_bytes_index(const char *model, const char *name, const unsigned char *data, size_t bytes,
                                   size_t count, size_t **eoff);
int tt_bytes_pack(const char *const *s, size_t first, size_t n, unsigned char **out, size_t *size);

#endif
