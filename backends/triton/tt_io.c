/* The Triton backend's config and string-tensor helpers (see tt_io.h). */
#define _POSIX_C_SOURCE 200809L
#include "tt_io.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "NAME=DxDxD" (-1 keeps a dim dynamic), several separated by ';'. */
TRITONSERVER_Error *tt_shapes(tdm_session_options *o, const char *list)
{
    char *copy = tt_strdup(list), *save = NULL;
    if (!copy)
        return tt_error(TRITONSERVER_ERROR_INTERNAL, "out of memory");
    TRITONSERVER_Error *err = NULL;
    for (char *item = strtok_r(copy, "; ", &save); item && !err; item = strtok_r(NULL, "; ", &save)) {
        char *eq = strrchr(item, '=');
        if (!eq || eq == item || !eq[1]) {
            err = tt_error(TRITONSERVER_ERROR_INVALID_ARG,
                           "parameter 'shapes': '%s' is not NAME=DxD (for example input=1x3x224x224)", item);
            break;
        }
        *eq = '\0';
        int64_t dims[32];
        int rank = 0;
        char *p = eq + 1;
        while (*p) {
            char *end;
            errno = 0;
            long long d = strtoll(p, &end, 10);
            if (end == p || errno || d < -1 || rank == 32) {
                err = tt_error(TRITONSERVER_ERROR_INVALID_ARG, "parameter 'shapes': bad dimension list for '%s'", item);
                break;
            }
            dims[rank++] = (int64_t)d;
            p = end;
            if (*p == 'x')
                p++;
            else if (*p) {
                err = tt_error(TRITONSERVER_ERROR_INVALID_ARG, "parameter 'shapes': bad dimension list for '%s'", item);
                break;
            }
        }
        if (!err && tdm_session_options_set_shape(o, item, rank, dims) != TDM_OK)
            err = tt_error(TRITONSERVER_ERROR_INVALID_ARG, "parameter 'shapes': tandem refused the shape of '%s'", item);
    }
    free(copy);
    return err;
}

/* A 4-byte little-endian length (Triton's BYTES element header). */
uint32_t tt_le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Indexes count BYTES elements of data (see tt_io.h). */
TRITONSERVER_Error *tt_bytes_index(const char *model, const char *name, const unsigned char *data, size_t bytes,
                                   size_t count, size_t **eoff)
{
    size_t *o = malloc((count + 1) * sizeof *o);
    *eoff = o;
    if (!o)
        return tt_error(TRITONSERVER_ERROR_INTERNAL, "out of memory");
    size_t off = 0;
    for (size_t i = 0; i < count; i++) {
        o[i] = off;
        if (bytes - off < 4 || tt_le32(data + off) > bytes - off - 4)
            return tt_error(TRITONSERVER_ERROR_INVALID_ARG,
                            "model '%s': BYTES input '%s' ends inside element %zu of %zu (each element is a 4-byte "
                            "little-endian length and that many bytes)",
                            model, name, i, count);
        off += 4 + (size_t)tt_le32(data + off);
    }
    o[count] = off;
    if (off != bytes)
        return tt_error(TRITONSERVER_ERROR_INVALID_ARG,
                        "model '%s': BYTES input '%s' has %zu bytes after its %zu elements", model, name, bytes - off,
                        count);
    return NULL;
}

/* The type's name in a model configuration (TYPE_FP32, TYPE_STRING for
 * BYTES); NULL when Triton has none for it. */
const char *tt_config_type(tdm_dtype t)
{
    static const char *const names[] = {NULL, "TYPE_BOOL", "TYPE_UINT8", "TYPE_UINT16", "TYPE_UINT32",
                                        "TYPE_UINT64", "TYPE_INT8", "TYPE_INT16", "TYPE_INT32", "TYPE_INT64",
                                        "TYPE_FP16", "TYPE_FP32", "TYPE_FP64", "TYPE_STRING", "TYPE_BF16"};
    unsigned k = (unsigned)tt_triton_type(t);
    return k < sizeof names / sizeof names[0] ? names[k] : NULL;
}

/* Triton's auto-complete: when the server allows it, a configuration
 * without `input` or `output` gets them from the ONNX model (name, type,
 * dims; the batch dimension left out when max_batch_size > 0; -1 for a
 * dynamic one) and is handed back (TRITONBACKEND_ModelSetConfig); config
 * is updated in place. */
TRITONSERVER_Error *tt_autocomplete(TRITONBACKEND_Model *model, const char *name, const char *path,
                                   int64_t max_batch, const tdm_model *tm, cJSON *config)
{
    bool allowed = false;
    TRITONSERVER_Error *err = TRITONBACKEND_ModelAutoCompleteConfig(model, &allowed);
    if (err) {
        TRITONSERVER_ErrorDelete(err);
        return NULL;
    }
    if (!allowed)
        return NULL;
    int filled = 0;
    for (int io = 0; io < 2; io++) {
        const char *key = io ? "output" : "input";
        if (cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(config, key)) > 0)
            continue;
        cJSON_DeleteItemFromObjectCaseSensitive(config, key);
        cJSON *arr = cJSON_AddArrayToObject(config, key);
        if (!arr)
            return tt_error(TRITONSERVER_ERROR_INTERNAL, "out of memory");
        size_t n = io ? tdm_model_output_count(tm) : tdm_model_input_count(tm);
        for (size_t i = 0; i < n; i++) {
            tdm_value_info vi;
            if ((io ? tdm_model_output(tm, i, &vi) : tdm_model_input(tm, i, &vi)) != TDM_OK)
                return tt_error(TRITONSERVER_ERROR_INTERNAL, "model '%s': cannot read its inputs and outputs", name);
            const char *type = tt_config_type(vi.dtype);
            int d0 = max_batch > 0 ? 1 : 0;
            if (vi.kind != TDM_KIND_TENSOR || !type || vi.rank < d0)
                return tt_error(TRITONSERVER_ERROR_UNSUPPORTED,
                                "model '%s': config.pbtxt has no %s list and %s '%s' (%s of rank %d) cannot be "
                                "described to Triton; list the %ss in config.pbtxt",
                                name, key, key, vi.name, tdm_dtype_name(vi.dtype), vi.rank, key);
            cJSON *e = cJSON_CreateObject(), *dims;
            if (!e || !cJSON_AddItemToArray(arr, e) || !cJSON_AddStringToObject(e, "name", vi.name) ||
                !cJSON_AddStringToObject(e, "data_type", type) || !(dims = cJSON_AddArrayToObject(e, "dims")))
                return tt_error(TRITONSERVER_ERROR_INTERNAL, "out of memory");
            for (int d = d0; d < vi.rank; d++) {
                char num[32];
                snprintf(num, sizeof num, "%lld", (long long)(vi.dims[d].value >= 0 ? vi.dims[d].value : -1));
                if (!cJSON_AddItemToArray(dims, cJSON_CreateString(num)))
                    return tt_error(TRITONSERVER_ERROR_INTERNAL, "out of memory");
            }
        }
        filled = 1;
    }
    if (!filled)
        return NULL;
    char *text = cJSON_PrintUnformatted(config);
    if (!text)
        return tt_error(TRITONSERVER_ERROR_INTERNAL, "out of memory");
    TRITONSERVER_Message *msg = NULL;
    err = TRITONSERVER_MessageNewFromSerializedJson(&msg, text, strlen(text));
    if (!err)
        err = TRITONBACKEND_ModelSetConfig(model, 1, msg);
    if (msg)
        TRITONSERVER_MessageDelete(msg);
    if (!err)
        TT_LOG(TRITONSERVER_LOG_INFO, "tandem: model '%s': inputs and outputs filled from %s", name, path);
    cJSON_free(text);
    return err;
}


/* Serializes s[first .. first + n - 1] as BYTES (see tt_io.h). */
int tt_bytes_pack(const char *const *s, size_t first, size_t n, unsigned char **out, size_t *size)
{
    size_t total = 0;
    for (size_t i = first; i < first + n; i++)
        total += 4 + strlen(s[i] ? s[i] : "");
    unsigned char *b = malloc(total ? total : 1);
    *out = b;
    *size = total;
    if (!b)
        return -1;
    size_t at = 0;
    for (size_t i = first; i < first + n; i++) {
        size_t len = strlen(s[i] ? s[i] : "");
        unsigned char h[4] = {(unsigned char)len, (unsigned char)(len >> 8), (unsigned char)(len >> 16),
                              (unsigned char)(len >> 24)};
        memcpy(b + at, h, 4);
        if (len)
            memcpy(b + at + 4, s[i], len);
        at += 4 + len;
    }
    return 0;
}
