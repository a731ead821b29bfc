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

/* ------------------------------------------------------ config parameters */

/* A parameter's string: config.pbtxt `parameters { key: "devices" value:
 * { string_value: "vnpu:server-npu,cpu" } }`, as JSON {"devices":
 * {"string_value": "..."}}. NULL when absent. */
const char *tt_param(const cJSON *params, const char *key)
{
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(params, key);
    const cJSON *v = p ? cJSON_GetObjectItemCaseSensitive(p, "string_value") : NULL;
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static const char *const tt_known_params[] = {
    "devices", "granularity", "fallback", "max_fallback_ratio", "max_boundary_bytes", "pins", "plugins",
    "threads", "shapes", "calibration", "calibration_inputs", "fusion", "breaker", "plan_cache", "verify",
    "ledger_file", "model_filename", "max_queue", NULL};

/* Parses "a,b,c" number lists; returns how many were read. */
static int tt_numbers(const char *s, double *out, int max)
{
    int n = 0;
    while (*s && n < max) {
        char *end;
        errno = 0;
        double v = strtod(s, &end);
        if (end == s || errno)
            return -1;
        out[n++] = v;
        s = end;
        if (*s == ',')
            s++;
        else if (*s)
            return -1;
    }
    return *s ? -1 : n;
}

int tt_integer(const char *s, long long lo, long long hi, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end || errno || v < lo || v > hi)
        return 0;
    *out = v;
    return 1;
}

/* A comma-separated list, each item given to add(). */
static TRITONSERVER_Error *tt_each(tdm_session_options *o, const char *key, const char *list,
                                   tdm_status (*add)(tdm_session_options *, const char *))
{
    char *copy = tt_strdup(list), *save = NULL;
    if (!copy)
        return tt_error(TRITONSERVER_ERROR_INTERNAL, "out of memory");
    TRITONSERVER_Error *err = NULL;
    for (char *item = strtok_r(copy, ",", &save); item && !err; item = strtok_r(NULL, ",", &save))
        if (add(o, item) != TDM_OK)
            err = tt_error(TRITONSERVER_ERROR_INVALID_ARG, "parameter '%s': tandem refused '%s'", key, item);
    free(copy);
    return err;
}

/* A choice parameter (granularity, fallback, fusion, verify): its word
 * through tandem's parser (tdm_*_parse), whose sentence a refusal quotes. */
static TRITONSERVER_Error *tt_choice(tdm_session_options *o, const char *key, const char *word)
{
    tdm_ctx *c = NULL;
    tdm_granularity g;
    tdm_fallback_mode f;
    tdm_fusion u;
    tdm_verify_mode m;
    int every = 0;
    tdm_status st = tdm_ctx_create(&c);
    if (st)
        return tt_error(TRITONSERVER_ERROR_INTERNAL, "out of memory");
    if (strcmp(key, "granularity") == 0) {
        if (!(st = tdm_granularity_parse(c, word, &g)))
            st = tdm_session_options_set_granularity(o, g);
    } else if (strcmp(key, "fallback") == 0) {
        if (!(st = tdm_fallback_mode_parse(c, word, &f)))
            st = tdm_session_options_set_fallback(o, f);
    } else if (strcmp(key, "fusion") == 0) {
        /* the metrics observer needs no node outputs: "on" stays fused under it */
        if (!(st = tdm_fusion_parse(c, word, &u)))
            st = tdm_session_options_set_fusion(o, u == TDM_FUSION_ON ? TDM_FUSION_OBSERVED : u);
    } else if (!(st = tdm_verify_mode_parse(c, word, &m, &every))) {
        st = tdm_session_options_set_verify(o, m, every);
    }
    TRITONSERVER_Error *err = NULL;
    if (st)
        err = tt_error(TRITONSERVER_ERROR_INVALID_ARG, "parameter '%s': %s", key,
                       tdm_ctx_error(c)[0] ? tdm_ctx_error(c) : "tandem refused the value");
    tdm_ctx_destroy(c);
    return err;
}

/* Parameter 'calibration_inputs': sets separated by ';', each
 * "NAME=FILE[,NAME=FILE...]" (.npy or .pb; a relative FILE is in dir), one
 * tdm_session_options_add_calibration_input per set. */
static TRITONSERVER_Error *tt_calibration_inputs(tdm_session_options *o, const char *dir, const char *list)
{
    char *copy = tt_strdup(list), *save = NULL;
    tdm_ctx *ctx = NULL;
    if (!copy || tdm_ctx_create(&ctx) != TDM_OK) {
        free(copy);
        return tt_error(TRITONSERVER_ERROR_INTERNAL, "out of memory");
    }
    TRITONSERVER_Error *err = NULL;
    int set = 0;
    for (char *item = strtok_r(copy, ";", &save); item && !err; item = strtok_r(NULL, ";", &save)) {
        enum { MAX_VALUES = 64 };
        const char *names[MAX_VALUES];
        tdm_tensor *vals[MAX_VALUES] = {0};
        size_t n = 0;
        char *save2 = NULL;
        set++;
        for (char *pair = strtok_r(item, ", ", &save2); pair && !err; pair = strtok_r(NULL, ", ", &save2)) {
            char *eq = strchr(pair, '=');
            if (!eq || eq == pair || !eq[1] || n == MAX_VALUES) {
                err = tt_error(TRITONSERVER_ERROR_INVALID_ARG,
                               "parameter 'calibration_inputs': '%s' in set %d is not NAME=FILE (sets separated by "
                               "';', the inputs of a set by ',')",
                               pair, set);
                break;
            }
            *eq = '\0';
            char path[4096];
            snprintf(path, sizeof path, "%s%s%s", eq[1] == '/' ? "" : dir, eq[1] == '/' ? "" : "/", eq + 1);
            names[n] = pair;
            if (tdm_value_load(ctx, path, NULL, &vals[n]) != TDM_OK)
                err = tt_error(TRITONSERVER_ERROR_INVALID_ARG, "parameter 'calibration_inputs', set %d: %s", set,
                               tdm_ctx_error(ctx));
            n++;
        }
        if (!err && n && tdm_session_options_add_calibration_input(o, names, (const tdm_tensor *const *)vals, n) != TDM_OK)
            err = tt_error(TRITONSERVER_ERROR_INVALID_ARG, "parameter 'calibration_inputs': tandem refused set %d", set);
        for (size_t k = 0; k < n; k++)
            tdm_tensor_destroy(vals[k]);
    }
    free(copy);
    tdm_ctx_destroy(ctx);
    return err;
}

/* tandem's run options from the config's parameters. dir is the model's
 * folder (relative calibration and plugin paths are resolved there). */
TRITONSERVER_Error *tt_options(const cJSON *params, const char *dir, tdm_session_options *o)
{
    const cJSON *it;
    cJSON_ArrayForEach(it, params)
    {
        int known = 0;
        for (size_t i = 0; tt_known_params[i]; i++)
            known = known || strcmp(it->string, tt_known_params[i]) == 0;
        if (!known)
            return tt_error(TRITONSERVER_ERROR_INVALID_ARG,
                            "config.pbtxt parameter '%s' is not a tandem option (devices, granularity, fallback, "
                            "max_fallback_ratio, max_boundary_bytes, pins, plugins, threads, shapes, calibration, "
                            "calibration_inputs, fusion, breaker, plan_cache, verify, ledger_file, model_filename, "
                            "max_queue)",
                            it->string);
    }
    const char *v;
    long long n;
    /* The metrics observer needs no node outputs: keep cpu fusion on. */
    if (tdm_session_options_set_fusion(o, TDM_FUSION_OBSERVED) != TDM_OK)
        return tt_error(TRITONSERVER_ERROR_INTERNAL, "tandem refused its fusion mode");
    if ((v = tt_param(params, "devices")) && tdm_session_options_set_devices(o, v) != TDM_OK)
        return tt_error(TRITONSERVER_ERROR_INVALID_ARG, "parameter 'devices': '%s' is not a device list", v);
    TRITONSERVER_Error *err;
    static const char *const choices[] = {"granularity", "fallback", "fusion", "verify", NULL};
    for (size_t i = 0; choices[i]; i++)
        if ((v = tt_param(params, choices[i])) && (err = tt_choice(o, choices[i], v)))
            return err;
    if ((v = tt_param(params, "max_fallback_ratio"))) {
        double r;
        if (tt_numbers(v, &r, 1) != 1 || tdm_session_options_set_max_fallback_ratio(o, r) != TDM_OK)
            return tt_error(TRITONSERVER_ERROR_INVALID_ARG, "parameter 'max_fallback_ratio': '%s' is not in [0, 1]", v);
    }
    if ((v = tt_param(params, "max_boundary_bytes"))) {
        if (!tt_integer(v, 0, INT64_MAX, &n) || tdm_session_options_set_max_boundary_bytes(o, (int64_t)n) != TDM_OK)
            return tt_error(TRITONSERVER_ERROR_INVALID_ARG, "parameter 'max_boundary_bytes': '%s' is not a byte count", v);
    }
    if ((v = tt_param(params, "threads"))) {
        if (!tt_integer(v, 0, 1024, &n) || tdm_session_options_set_threads(o, (int)n) != TDM_OK)
            return tt_error(TRITONSERVER_ERROR_INVALID_ARG, "parameter 'threads': '%s' is not 0..1024", v);
    }
    if ((v = tt_param(params, "breaker"))) {
        double b[3];
        if (tt_numbers(v, b, 3) != 3 || tdm_session_options_set_breaker(o, (int)b[0], b[1], b[2]) != TDM_OK)
            return tt_error(TRITONSERVER_ERROR_INVALID_ARG,
                            "parameter 'breaker': '%s' is not FAULTS,WINDOW_MS,COOLDOWN_MS", v);
    }
    if ((v = tt_param(params, "max_queue"))) {
        if (!tt_integer(v, 0, 1000000, &n) || tdm_session_options_set_max_queue(o, (int)n) != TDM_OK)
            return tt_error(TRITONSERVER_ERROR_INVALID_ARG, "parameter 'max_queue': '%s' is not 0..1000000", v);
    }
    if ((v = tt_param(params, "plan_cache"))) {
        if (!tt_integer(v, 0, 1 << 20, &n) || tdm_session_options_set_plan_cache(o, (int)n) != TDM_OK)
            return tt_error(TRITONSERVER_ERROR_INVALID_ARG, "parameter 'plan_cache': '%s' is not a plan count", v);
    }
    if ((v = tt_param(params, "pins")) && (err = tt_each(o, "pins", v, tdm_session_options_add_pin)))
        return err;
    if ((v = tt_param(params, "plugins")) && (err = tt_each(o, "plugins", v, tdm_session_options_add_plugin)))
        return err;
    if ((v = tt_param(params, "shapes")) && (err = tt_shapes(o, v)))
        return err;
    if ((v = tt_param(params, "calibration"))) {
        char path[4096];
        snprintf(path, sizeof path, "%s%s%s", v[0] == '/' ? "" : dir, v[0] == '/' ? "" : "/", v);
        if (tdm_session_options_set_calibration(o, path) != TDM_OK)
            return tt_error(TRITONSERVER_ERROR_INVALID_ARG, "parameter 'calibration': tandem refused '%s'", path);
    }
    if ((v = tt_param(params, "calibration_inputs")) && (err = tt_calibration_inputs(o, dir, v)))
        return err;
    return NULL;
}
