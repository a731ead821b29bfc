/* vnpu profiles: JSON (cJSON) → struct vnpu_ctx, with every field
 * validated. A bad or unknown field is refused with its path and why
 * ("edge-npu.json: ops.Conv.max_rank must be a positive integer, got \"x\"")
 * so that a typo never silently widens or narrows what the device runs. */
#include "devices/vnpu/vnpu.h"
#include "core/mem.h"
#include "graph/rewrite.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* cJSON allocates through core/mem.h (failure injection, one allocator). */
static void *cjson_malloc(size_t n) { return mem_alloc(n); }
static void cjson_free(void *p) { mem_free(p); }
static pthread_once_t cjson_once = PTHREAD_ONCE_INIT;
static void cjson_hooks(void)
{
    cJSON_Hooks h = {cjson_malloc, cjson_free};
    cJSON_InitHooks(&h);
}

/* Parse state: the label and the error. */
typedef struct pctx {
    tdm_err *e;
    const char *label;
} pctx;

/* A JSON value, shortened, for "got …" (into buf). */
static const char *got(const cJSON *v, char *buf, size_t size)
{
    if (!v) {
        snprintf(buf, size, "nothing");
        return buf;
    }
    char *s = cJSON_PrintUnformatted(v);
    if (!s) {
        snprintf(buf, size, "a value");
        return buf;
    }
    if (strlen(s) > 40)
        snprintf(buf, size, "%.37s...", s);
    else
        snprintf(buf, size, "%s", s);
    mem_free(s);
    return buf;
}

static tdm_status bad(pctx *p, const char *path, const char *must, const cJSON *v)
{
    char g[64];
    return err_set(p->e, TDM_E_DEVICE, "%s: %s must be %s, got %s", p->label, path, must, got(v, g, sizeof g));
}

/* Refuses keys not in allowed (NULL-terminated) and keys given twice. */
static tdm_status check_keys(pctx *p, const char *path, const cJSON *obj, const char *const *allowed)
{
    for (const cJSON *k = obj->child; k; k = k->next) {
        int ok = 0;
        for (size_t i = 0; allowed[i]; i++)
            ok |= strcmp(k->string, allowed[i]) == 0;
        if (!ok) {
            char list[512] = "";
            size_t used = 0;
            for (size_t i = 0; allowed[i] && used < sizeof list; i++) {
                int w = snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", allowed[i]);
                if (w < 0)
                    break;
                used += (size_t)w;
            }
            return err_set(p->e, TDM_E_DEVICE, "%s: %s%s%s is not a known field (known: %s)", p->label, path,
                           *path ? "." : "", k->string, list);
        }
        for (const cJSON *j = obj->child; j != k; j = j->next)
            if (strcmp(j->string, k->string) == 0)
                return err_set(p->e, TDM_E_DEVICE, "%s: %s%s%s is given twice", p->label, path, *path ? "." : "",
                               k->string);
    }
    return TDM_OK;
}

/* path + "." + key (path alone when empty), truncated to size. */
static void path_join(char *out, size_t size, const char *path, const char *key)
{
    size_t used = 0;
    for (const char *s = path; *s && used + 1 < size; s++)
        out[used++] = *s;
    if (*path && used + 1 < size)
        out[used++] = '.';
    for (const char *s = key; *s && used + 1 < size; s++)
        out[used++] = *s;
    out[used] = 0;
}

/* path + "[idx]", truncated to size. */
static void path_index(char *out, size_t size, const char *path, int idx)
{
    char num[24];
    snprintf(num, sizeof num, "[%d]", idx);
    size_t used = 0;
    for (const char *s = path; *s && used + 1 < size; s++)
        out[used++] = *s;
    for (const char *s = num; *s && used + 1 < size; s++)
        out[used++] = *s;
    out[used] = 0;
}

/* Numbers: finite, and for integers integral and within ±2^53. */
static int is_int(const cJSON *v)
{
    return cJSON_IsNumber(v) && isfinite(v->valuedouble) && floor(v->valuedouble) == v->valuedouble &&
           fabs(v->valuedouble) <= 9007199254740992.0;
}

static tdm_status get_pos_int(pctx *p, const char *path, const cJSON *v, int64_t max, int64_t *out)
{
    if (!is_int(v) || v->valuedouble < 1 || v->valuedouble > (double)max) {
        if (max < INT64_MAX / 2 && is_int(v) && v->valuedouble > (double)max) {
            char must[80];
            snprintf(must, sizeof must, "a positive integer of at most %lld", (long long)max);
            return bad(p, path, must, v);
        }
        return bad(p, path, "a positive integer", v);
    }
    *out = (int64_t)v->valuedouble;
    return TDM_OK;
}

static tdm_status get_pos_num(pctx *p, const char *path, const cJSON *v, double *out)
{
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble <= 0)
        return bad(p, path, "a positive number", v);
    *out = v->valuedouble;
    return TDM_OK;
}

static tdm_status get_nonneg_num(pctx *p, const char *path, const cJSON *v, double *out)
{
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < 0)
        return bad(p, path, "a number >= 0", v);
    *out = v->valuedouble;
    return TDM_OK;
}

static tdm_status get_str(pctx *p, const char *path, const cJSON *v, int nonempty, char **out)
{
    if (!cJSON_IsString(v) || !v->valuestring || (nonempty && !*v->valuestring))
        return bad(p, path, nonempty ? "a non-empty string" : "a string", v);
    *out = mem_strdup(v->valuestring);
    if (!*out)
        return err_set(p->e, TDM_E_NOMEM, "out of memory");
    return TDM_OK;
}

static const cJSON *require(pctx *p, const char *path, const cJSON *obj, const char *key, tdm_status *st)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v)
        *st = err_set(p->e, TDM_E_DEVICE, "%s: %s%s%s is missing", p->label, path, *path ? "." : "", key);
    return v;
}

/* An op type tandem knows (any domain). */
static int op_known(const char *name)
{
    for (int i = 0; i < OP_COUNT; i++)
        if (strcmp(op_table[i].name, name) == 0)
            return 1;
    return 0;
}

static tdm_status parse_dtypes(pctx *p, const char *path, const cJSON *v, uint32_t *mask)
{
    char sub[256];
    if (cJSON_IsString(v) && strcmp(v->valuestring, "*") == 0) {
        *mask = DT_ALL;
        return TDM_OK;
    }
    if (!cJSON_IsArray(v) || !v->child)
        return bad(p, path, "\"*\" or a non-empty array of element type names (\"float\", \"float16\", …)", v);
    *mask = 0;
    int idx = 0;
    for (const cJSON *it = v->child; it; it = it->next, idx++) {
        path_index(sub, sizeof sub, path, idx);
        int found = -1;
        if (cJSON_IsString(it))
            for (int dt = 1; dt < TDM_DTYPE_COUNT; dt++)
                if (strcmp(tdm_dtype_name((tdm_dtype)dt), it->valuestring) == 0)
                    found = dt;
        if (found < 0)
            return bad(p, sub, "an element type name (float, float16, bfloat16, double, int8, …, bool, string)", it);
        *mask |= DT_BIT(found);
    }
    return TDM_OK;
}

static tdm_status parse_val(pctx *p, const char *path, const cJSON *v, vnpu_val *out, int allow_channels)
{
    memset(out, 0, sizeof *out);
    if (cJSON_IsNumber(v) && isfinite(v->valuedouble)) {
        out->num = v->valuedouble;
        return TDM_OK;
    }
    if (cJSON_IsString(v) && v->valuestring) {
        if (strcmp(v->valuestring, "$channels") == 0) {
            if (!allow_channels)
                return bad(p, path, "a number or a string (\"$channels\" only in one_of)", v);
            out->is_channels = 1;
            return TDM_OK;
        }
        out->is_str = 1;
        out->str = mem_strdup(v->valuestring);
        return out->str ? TDM_OK : err_set(p->e, TDM_E_NOMEM, "out of memory");
    }
    return bad(p, path, "a number or a string", v);
}

static tdm_status parse_vals(pctx *p, const char *path, const cJSON *v, int allow_channels, int allow_scalar,
                             vnpu_val **out, size_t *n)
{
    char sub[256];
    if (allow_scalar && !cJSON_IsArray(v)) {
        *out = mem_calloc(1, sizeof **out);
        if (!*out)
            return err_set(p->e, TDM_E_NOMEM, "out of memory");
        *n = 1;
        return parse_val(p, path, v, *out, allow_channels);
    }
    if (!cJSON_IsArray(v) || (!allow_scalar && !v->child))
        return bad(p, path, allow_scalar ? "a number, a string or an array of them" : "a non-empty array", v);
    size_t count = (size_t)cJSON_GetArraySize(v);
    *out = mem_calloc(count ? count : 1, sizeof **out);
    if (!*out)
        return err_set(p->e, TDM_E_NOMEM, "out of memory");
    *n = 0;
    int idx = 0;
    for (const cJSON *it = v->child; it; it = it->next, idx++) {
        path_index(sub, sizeof sub, path, idx);
        tdm_status st = parse_val(p, sub, it, &(*out)[*n], allow_channels);
        if (st)
            return st;
        (*n)++;
    }
    return TDM_OK;
}

static tdm_status parse_attr(pctx *p, const char *path, const cJSON *v, vnpu_attr_rule *r)
{
    static const char *const keys[] = {"one_of", "min", "max", "default", "comment", NULL};
    char sub[256];
    tdm_status st;
    if (!cJSON_IsObject(v))
        return bad(p, path, "an object with one_of, min, max or default", v);
    if ((st = check_keys(p, path, v, keys)) != TDM_OK)
        return st;
    const cJSON *x;
    if ((x = cJSON_GetObjectItemCaseSensitive(v, "one_of")) != NULL) {
        path_join(sub, sizeof sub, path, "one_of");
        if ((st = parse_vals(p, sub, x, 1, 0, &r->one_of, &r->n_one_of)) != TDM_OK)
            return st;
    }
    if ((x = cJSON_GetObjectItemCaseSensitive(v, "min")) != NULL) {
        path_join(sub, sizeof sub, path, "min");
        if (!cJSON_IsNumber(x) || !isfinite(x->valuedouble))
            return bad(p, sub, "a number", x);
        r->has_min = 1;
        r->min = x->valuedouble;
    }
    if ((x = cJSON_GetObjectItemCaseSensitive(v, "max")) != NULL) {
        path_join(sub, sizeof sub, path, "max");
        if (!cJSON_IsNumber(x) || !isfinite(x->valuedouble))
            return bad(p, sub, "a number", x);
        if (r->has_min && x->valuedouble < r->min) {
            char must[64];
            snprintf(must, sizeof must, "at least min (%g)", r->min);
            return bad(p, sub, must, x);
        }
        r->has_max = 1;
        r->max = x->valuedouble;
    }
    if ((x = cJSON_GetObjectItemCaseSensitive(v, "default")) != NULL) {
        path_join(sub, sizeof sub, path, "default");
        if ((st = parse_vals(p, sub, x, 0, 1, &r->dflt, &r->n_dflt)) != TDM_OK)
            return st;
        r->has_dflt = 1;
    }
    if (x = cJSON_GetObjectItemCaseSensitive(v, "comment"), x && !cJSON_IsString(x)) {
        path_join(sub, sizeof sub, path, "comment");
        return bad(p, sub, "a string", x);
    }
    if (!r->n_one_of && !r->has_min && !r->has_max)
        return err_set(p->e, TDM_E_DEVICE, "%s: %s sets no limit: give one_of, min or max", p->label, path);
    return TDM_OK;
}

static tdm_status parse_op(pctx *p, const char *path, const cJSON *v, const vnpu_op_rule *dflt, int wildcard,
                           vnpu_op_rule *r)
{
    static const char *const keys[] = {"dtypes", "max_rank", "max_dim", "attrs", "opset_min", "opset_max",
                                       "comment", "const_inputs", NULL};
    char sub[256];
    tdm_status st;
    const cJSON *x;
    int64_t iv;

    if (!cJSON_IsObject(v))
        return bad(p, path, "an object (use {} for the profile's defaults)", v);
    if ((st = check_keys(p, path, v, keys)) != TDM_OK)
        return st;
    r->dtypes = dflt->dtypes;
    r->max_rank = dflt->max_rank;
    r->max_dim = dflt->max_dim;
    if ((x = cJSON_GetObjectItemCaseSensitive(v, "dtypes")) != NULL) {
        path_join(sub, sizeof sub, path, "dtypes");
        if ((st = parse_dtypes(p, sub, x, &r->dtypes)) != TDM_OK)
            return st;
    }
    if ((x = cJSON_GetObjectItemCaseSensitive(v, "max_rank")) != NULL) {
        path_join(sub, sizeof sub, path, "max_rank");
        if ((st = get_pos_int(p, sub, x, TDM_MAX_RANK, &iv)) != TDM_OK)
            return st;
        r->max_rank = (int)iv;
    }
    if ((x = cJSON_GetObjectItemCaseSensitive(v, "max_dim")) != NULL) {
        path_join(sub, sizeof sub, path, "max_dim");
        if ((st = get_pos_int(p, sub, x, INT64_MAX, &r->max_dim)) != TDM_OK)
            return st;
    }
    if ((x = cJSON_GetObjectItemCaseSensitive(v, "opset_min")) != NULL) {
        path_join(sub, sizeof sub, path, "opset_min");
        if ((st = get_pos_int(p, sub, x, 1000, &r->opset_min)) != TDM_OK)
            return st;
    }
    if ((x = cJSON_GetObjectItemCaseSensitive(v, "opset_max")) != NULL) {
        path_join(sub, sizeof sub, path, "opset_max");
        if ((st = get_pos_int(p, sub, x, 1000, &r->opset_max)) != TDM_OK)
            return st;
        if (r->opset_min && r->opset_max < r->opset_min) {
            char must[64];
            snprintf(must, sizeof must, "at least opset_min (%lld)", (long long)r->opset_min);
            return bad(p, sub, must, x);
        }
    }
    if ((x = cJSON_GetObjectItemCaseSensitive(v, "const_inputs")) != NULL) {
        path_join(sub, sizeof sub, path, "const_inputs");
        if (wildcard)
            return err_set(p->e, TDM_E_DEVICE, "%s: %s is not allowed in \"*\"", p->label, sub);
        if (!cJSON_IsArray(x) || cJSON_GetArraySize(x) == 0)
            return bad(p, sub, "a non-empty array of input indices (0..31)", x);
        const cJSON *it;
        cJSON_ArrayForEach(it, x)
        {
            if (!cJSON_IsNumber(it) || it->valuedouble != (double)(int)it->valuedouble || it->valuedouble < 0 ||
                it->valuedouble > 31)
                return bad(p, sub, "a non-empty array of input indices (0..31)", x);
            r->const_inputs |= (uint32_t)1 << (int)it->valuedouble;
        }
    }
    if ((x = cJSON_GetObjectItemCaseSensitive(v, "comment")) != NULL && !cJSON_IsString(x)) {
        path_join(sub, sizeof sub, path, "comment");
        return bad(p, sub, "a string", x);
    }
    if ((x = cJSON_GetObjectItemCaseSensitive(v, "attrs")) != NULL) {
        path_join(sub, sizeof sub, path, "attrs");
        if (wildcard)
            return err_set(p->e, TDM_E_DEVICE, "%s: %s is not allowed: attribute limits are per operator", p->label,
                           sub);
        if (!cJSON_IsObject(x))
            return bad(p, sub, "an object of attribute name → limit", x);
        size_t count = (size_t)cJSON_GetArraySize(x);
        r->attrs = mem_calloc(count ? count : 1, sizeof *r->attrs);
        if (!r->attrs)
            return err_set(p->e, TDM_E_NOMEM, "out of memory");
        for (const cJSON *a = x->child; a; a = a->next) {
            char apath[256];
            path_join(apath, sizeof apath, sub, a->string);
            for (const cJSON *b = x->child; b != a; b = b->next)
                if (strcmp(a->string, b->string) == 0)
                    return err_set(p->e, TDM_E_DEVICE, "%s: %s is given twice", p->label, apath);
            vnpu_attr_rule *ar = &r->attrs[r->n_attrs++];
            if (!(ar->name = mem_strdup(a->string)))
                return err_set(p->e, TDM_E_NOMEM, "out of memory");
            if ((st = parse_attr(p, apath, a, ar)) != TDM_OK)
                return st;
        }
    }
    return TDM_OK;
}

static void free_vals(vnpu_val *v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        mem_free(v[i].str);
    mem_free(v);
}

static void free_rule(vnpu_op_rule *r)
{
    mem_free(r->op);
    for (size_t i = 0; i < r->n_attrs; i++) {
        mem_free(r->attrs[i].name);
        free_vals(r->attrs[i].one_of, r->attrs[i].n_one_of);
        free_vals(r->attrs[i].dflt, r->attrs[i].n_dflt);
    }
    mem_free(r->attrs);
}

void vnpu_ctx_free(struct vnpu_ctx *c)
{
    if (!c)
        return;
    mem_free(c->name);
    mem_free(c->dev_name);
    mem_free(c->label);
    mem_free(c->description);
    mem_free(c->summary);
    for (size_t i = 0; i < c->n_ops; i++)
        free_rule(&c->ops[i]);
    mem_free(c->ops);
    if (c->all)
        free_rule(c->all);
    mem_free(c->all);
    for (size_t i = 0; i < c->n_exclude; i++)
        mem_free(c->exclude[i]);
    mem_free(c->exclude);
    for (size_t i = 0; i < c->n_sensitive; i++)
        mem_free(c->sensitive[i]);
    mem_free(c->sensitive);
    mem_free(c->image_sizes);
    for (size_t i = 0; i < c->n_rescue; i++)
        mem_free(c->rescue[i]);
    mem_free(c->rescue);
    pthread_mutex_destroy(&c->lock);
    mem_free(c);
}

const vnpu_op_rule *vnpu_rule(const struct vnpu_ctx *c, const char *op_type)
{
    for (size_t i = 0; i < c->n_ops; i++)
        if (strcmp(c->ops[i].op, op_type) == 0)
            return &c->ops[i];
    if (!c->all)
        return NULL;
    for (size_t i = 0; i < c->n_exclude; i++)
        if (strcmp(c->exclude[i], op_type) == 0)
            return NULL;
    return c->all;
}

static int name_ok(const char *s)
{
    if (!*s || strlen(s) > 64)
        return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '-' ||
              *s == '_' || *s == '.'))
            return 0;
    return 1;
}

/* Line and column of offset off in text. */
static void line_col(const char *text, size_t off, int *line, int *col)
{
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < off; i++) {
        if (text[i] == '\n') {
            (*line)++;
            *col = 1;
        } else {
            (*col)++;
        }
    }
}

static const char *human_bytes(uint64_t b, char *buf, size_t size)
{
    if (b >= ((uint64_t)1 << 30))
        snprintf(buf, size, "%.1f GiB", (double)b / (double)((uint64_t)1 << 30));
    else if (b >= ((uint64_t)1 << 20))
        snprintf(buf, size, "%.1f MiB", (double)b / (double)((uint64_t)1 << 20));
    else
        snprintf(buf, size, "%llu bytes", (unsigned long long)b);
    return buf;
}

/* "fp16", "bf16", "fp32" → the element type; anything else TDM_UNDEFINED. */
static tdm_dtype float_type(const cJSON *v)
{
    if (!cJSON_IsString(v))
        return TDM_UNDEFINED;
    if (strcmp(v->valuestring, "fp16") == 0)
        return TDM_FLOAT16;
    if (strcmp(v->valuestring, "bf16") == 0)
        return TDM_BFLOAT16;
    if (strcmp(v->valuestring, "fp32") == 0)
        return TDM_FLOAT;
    return TDM_UNDEFINED;
}

/* "rescue": the names of the rewrite rules (graph/rewrite.h) the device
 * wants tried on the nodes it rejects; absent: every rule. */
static tdm_status parse_rescue(pctx *p, const cJSON *root, struct vnpu_ctx *c)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "rescue");
    char sub[256];
    size_t nr;
    const gr_rw_rule *rules = gr_rw_rules(&nr);
    if (!v)
        return TDM_OK;
    if (!cJSON_IsArray(v))
        return bad(p, "rescue", "an array of rescue rule names", v);
    size_t n = (size_t)cJSON_GetArraySize(v);
    if (!(c->rescue = mem_calloc(n ? n : 1, sizeof *c->rescue)))
        return err_set(p->e, TDM_E_NOMEM, "out of memory");
    c->has_rescue = 1;
    int idx = 0;
    for (const cJSON *it = v->child; it; it = it->next, idx++) {
        int known = 0;
        path_index(sub, sizeof sub, "rescue", idx);
        for (size_t k = 0; cJSON_IsString(it) && k < nr; k++)
            known |= strcmp(rules[k].name, it->valuestring) == 0;
        if (!known)
            return bad(p, sub, "the name of a rescue rule (layernorm, gelu, pad, ...: README \"Rescue\")", it);
        if (!(c->rescue[c->n_rescue++] = mem_strdup(it->valuestring)))
            return err_set(p->e, TDM_E_NOMEM, "out of memory");
    }
    return TDM_OK;
}

/* "quantized": {"accumulate": "int32", "rounding": "half_even" | "half_away"}:
 * QDQ groups run as integer arithmetic (vnpu_qdq.c). */
static tdm_status parse_quantized(pctx *p, const cJSON *root, struct vnpu_ctx *c)
{
    static const char *const qkeys[] = {"accumulate", "rounding", "comment", NULL};
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "quantized"), *x;
    tdm_status st = TDM_OK;
    if (!v)
        return TDM_OK;
    if (!cJSON_IsObject(v))
        return bad(p, "quantized", "an object with accumulate and rounding", v);
    if ((st = check_keys(p, "quantized", v, qkeys)) != TDM_OK)
        return st;
    if (!(x = require(p, "quantized", v, "accumulate", &st)))
        return st;
    if (!cJSON_IsString(x) || strcmp(x->valuestring, "int32") != 0)
        return bad(p, "quantized.accumulate", "\"int32\"", x);
    if (!(x = require(p, "quantized", v, "rounding", &st)))
        return st;
    if (cJSON_IsString(x) && strcmp(x->valuestring, "half_even") == 0)
        c->q_round = VNPU_ROUND_HALF_EVEN;
    else if (cJSON_IsString(x) && strcmp(x->valuestring, "half_away") == 0)
        c->q_round = VNPU_ROUND_HALF_AWAY;
    else
        return bad(p, "quantized.rounding", "\"half_even\" or \"half_away\"", x);
    if ((x = cJSON_GetObjectItemCaseSensitive(v, "comment")) != NULL && !cJSON_IsString(x))
        return bad(p, "quantized.comment", "a string", x);
    c->quantized = 1;
    return TDM_OK;
}

static tdm_status parse_root(pctx *p, const cJSON *root, struct vnpu_ctx *c)
{
    static const char *const keys[] = {"name", "description", "precision", "memory_bytes", "onchip_bytes", "peak_tops",
                                       "peak_gflops", "launch_overhead_us", "memory_bandwidth_gbps",
                                       "host_bandwidth_gbps", "host_latency_us", "static_shapes", "image_sizes", "defaults",
                                       "ops", "exclude", "precision_sensitive", "comment", "storage", "partition_overhead_us",
                                       "source", "rescue", "quantized", "unroll_loops", "fusion", NULL};
    static const char *const dkeys[] = {"dtypes", "max_rank", "max_dim", NULL};
    tdm_status st = TDM_OK;
    const cJSON *v;
    char sub[256];
    int64_t iv;

    if (!cJSON_IsObject(root))
        return err_set(p->e, TDM_E_DEVICE, "%s: the profile must be a JSON object", p->label);
    if ((st = check_keys(p, "", root, keys)) != TDM_OK)
        return st;

    if (!(v = require(p, "", root, "name", &st)))
        return st;
    if (!cJSON_IsString(v) || !name_ok(v->valuestring))
        return bad(p, "name", "a name of letters, digits, '-', '_' or '.' (at most 64)", v);
    if ((st = get_str(p, "name", v, 1, &c->name)) != TDM_OK)
        return st;
    size_t dn = strlen(c->name) + 6;
    if (!(c->dev_name = mem_alloc(dn)))
        return err_set(p->e, TDM_E_NOMEM, "out of memory");
    snprintf(c->dev_name, dn, "vnpu:%s", c->name);

    if ((v = cJSON_GetObjectItemCaseSensitive(root, "description")) != NULL) {
        if ((st = get_str(p, "description", v, 0, &c->description)) != TDM_OK)
            return st;
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "comment")) != NULL && !cJSON_IsString(v))
        return bad(p, "comment", "a string", v);

    if (!(v = require(p, "", root, "precision", &st)))
        return st;
    if ((c->precision = float_type(v)) == TDM_UNDEFINED)
        return bad(p, "precision", "one of \"fp16\", \"bf16\", \"fp32\"", v);
    c->storage = c->precision;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "storage")) != NULL) {
        if ((c->storage = float_type(v)) == TDM_UNDEFINED)
            return bad(p, "storage", "one of \"fp16\", \"bf16\", \"fp32\"", v);
        /* numerics round at precision only: a storage type narrower than
         * (or other than) the precision is not modeled */
        if (c->storage != c->precision && c->storage != TDM_FLOAT)
            return err_set(p->e, TDM_E_DEVICE, "%s: storage must be \"fp32\" or the precision (\"%s\"), got \"%s\"",
                           p->label, c->precision == TDM_FLOAT16 ? "fp16" : c->precision == TDM_BFLOAT16 ? "bf16" : "fp32",
                           v->valuestring);
    }

    if (!(v = require(p, "", root, "memory_bytes", &st)))
        return st;
    if ((st = get_pos_int(p, "memory_bytes", v, INT64_MAX, &iv)) != TDM_OK)
        return st;
    c->memory_bytes = (uint64_t)iv;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "onchip_bytes")) != NULL) {
        if ((st = get_pos_int(p, "onchip_bytes", v, INT64_MAX, &iv)) != TDM_OK)
            return st;
        if ((uint64_t)iv > c->memory_bytes)
            return err_set(p->e, TDM_E_DEVICE, "%s: onchip_bytes (%lld) is larger than memory_bytes (%llu)", p->label,
                           (long long)iv, (unsigned long long)c->memory_bytes);
        c->onchip_bytes = (uint64_t)iv;
    }

    const cJSON *tops = cJSON_GetObjectItemCaseSensitive(root, "peak_tops");
    const cJSON *gfl = cJSON_GetObjectItemCaseSensitive(root, "peak_gflops");
    if (tops && gfl)
        return err_set(p->e, TDM_E_DEVICE, "%s: give peak_tops or peak_gflops, not both", p->label);
    if (!tops && !gfl)
        return err_set(p->e, TDM_E_DEVICE, "%s: peak_tops (or peak_gflops) is missing", p->label);
    if (tops) {
        if ((st = get_pos_num(p, "peak_tops", tops, &c->peak_gflops)) != TDM_OK)
            return st;
        c->peak_gflops *= 1000.0;
    } else if ((st = get_pos_num(p, "peak_gflops", gfl, &c->peak_gflops)) != TDM_OK) {
        return st;
    }

    if (!(v = require(p, "", root, "launch_overhead_us", &st)))
        return st;
    if ((st = get_nonneg_num(p, "launch_overhead_us", v, &c->launch_us)) != TDM_OK)
        return st;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "partition_overhead_us")) != NULL &&
        (st = get_nonneg_num(p, "partition_overhead_us", v, &c->partition_us)) != TDM_OK)
        return st;
    /* "fusion": what the device's compiler fuses within a partition (the estimates; profiles/README.md) */
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "fusion")) != NULL) {
        if (!cJSON_IsString(v) || (strcmp(v->valuestring, "none") != 0 && strcmp(v->valuestring, "epilogue") != 0))
            return bad(p, "fusion", "one of \"none\", \"epilogue\"", v);
        c->fusion = strcmp(v->valuestring, "epilogue") == 0 ? DEV_FUSION_EPILOGUE : DEV_FUSION_NONE;
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "source")) != NULL) {
        static const char *const skeys[] = {"document", "version", "url", "comment", NULL};
        if (!cJSON_IsObject(v))
            return bad(p, "source", "an object with document, version (and url)", v);
        if ((st = check_keys(p, "source", v, skeys)) != TDM_OK)
            return st;
        for (int k = 0; skeys[k]; k++) {
            const cJSON *x = cJSON_GetObjectItemCaseSensitive(v, skeys[k]);
            char sname[64];
            snprintf(sname, sizeof sname, "source.%s", skeys[k]);
            if (!x && k < 2)
                return err_set(p->e, TDM_E_DEVICE, "%s: %s is missing", p->label, sname);
            if (x && (!cJSON_IsString(x) || !*x->valuestring))
                return bad(p, sname, "a non-empty string", x);
        }
    }
    if (!(v = require(p, "", root, "memory_bandwidth_gbps", &st)))
        return st;
    if ((st = get_pos_num(p, "memory_bandwidth_gbps", v, &c->mem_bw_gbps)) != TDM_OK)
        return st;
    if (!(v = require(p, "", root, "host_bandwidth_gbps", &st)))
        return st;
    if ((st = get_pos_num(p, "host_bandwidth_gbps", v, &c->host_bw_gbps)) != TDM_OK)
        return st;
    if (!(v = require(p, "", root, "host_latency_us", &st)))
        return st;
    if ((st = get_nonneg_num(p, "host_latency_us", v, &c->host_latency_us)) != TDM_OK)
        return st;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "static_shapes")) != NULL) {
        if (!cJSON_IsBool(v))
            return bad(p, "static_shapes", "true or false", v);
        c->static_shapes = cJSON_IsTrue(v);
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "image_sizes")) != NULL) {
        /* ["640x640", "960x960"]: the H x W a model's 4-D inputs must have */
        size_t n = cJSON_IsArray(v) ? (size_t)cJSON_GetArraySize(v) : 0;
        if (!n)
            return bad(p, "image_sizes", "a non-empty array of \"HxW\" strings", v);
        if (!(c->image_sizes = mem_calloc(n, sizeof *c->image_sizes)))
            return err_set(p->e, TDM_E_NOMEM, "out of memory");
        const cJSON *it;
        cJSON_ArrayForEach(it, v)
        {
            char at[64], tail;
            long long h, w;
            snprintf(at, sizeof at, "image_sizes[%zu]", c->n_image_sizes);
            if (!cJSON_IsString(it) || sscanf(it->valuestring, "%lldx%lld%c", &h, &w, &tail) != 2 || h <= 0 || w <= 0)
                return bad(p, at, "\"HxW\" with positive H and W, such as \"640x640\"", it);
            c->image_sizes[c->n_image_sizes][0] = h;
            c->image_sizes[c->n_image_sizes++][1] = w;
        }
        c->static_shapes = 1; /* compiled shapes: nothing dynamic either */
    }
    if ((st = parse_quantized(p, root, c)) != TDM_OK)
        return st;

    vnpu_op_rule dflt = {NULL, DT_ALL, 0, 0, 0, 0, NULL, 0, 0};
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "defaults")) != NULL) {
        if (!cJSON_IsObject(v))
            return bad(p, "defaults", "an object with dtypes, max_rank or max_dim", v);
        if ((st = check_keys(p, "defaults", v, dkeys)) != TDM_OK)
            return st;
        const cJSON *x;
        if ((x = cJSON_GetObjectItemCaseSensitive(v, "dtypes")) != NULL &&
            (st = parse_dtypes(p, "defaults.dtypes", x, &dflt.dtypes)) != TDM_OK)
            return st;
        if ((x = cJSON_GetObjectItemCaseSensitive(v, "max_rank")) != NULL) {
            if ((st = get_pos_int(p, "defaults.max_rank", x, TDM_MAX_RANK, &iv)) != TDM_OK)
                return st;
            dflt.max_rank = (int)iv;
        }
        if ((x = cJSON_GetObjectItemCaseSensitive(v, "max_dim")) != NULL &&
            (st = get_pos_int(p, "defaults.max_dim", x, INT64_MAX, &dflt.max_dim)) != TDM_OK)
            return st;
    }

    if (!(v = require(p, "", root, "ops", &st)))
        return st;
    if (!cJSON_IsObject(v) || !v->child)
        return bad(p, "ops", "a non-empty object of operator → limits", v);
    size_t count = (size_t)cJSON_GetArraySize(v);
    if (!(c->ops = mem_calloc(count, sizeof *c->ops)))
        return err_set(p->e, TDM_E_NOMEM, "out of memory");
    for (const cJSON *o = v->child; o; o = o->next) {
        path_join(sub, sizeof sub, "ops", o->string);
        for (const cJSON *b = v->child; b != o; b = b->next)
            if (strcmp(o->string, b->string) == 0)
                return err_set(p->e, TDM_E_DEVICE, "%s: %s is given twice", p->label, sub);
        int wild = strcmp(o->string, "*") == 0;
        if (!wild && !op_known(o->string))
            return err_set(p->e, TDM_E_DEVICE, "%s: %s names an operator tandem does not know", p->label, sub);
        vnpu_op_rule *r;
        if (wild) {
            if (!(c->all = mem_calloc(1, sizeof *c->all)))
                return err_set(p->e, TDM_E_NOMEM, "out of memory");
            r = c->all;
        } else {
            r = &c->ops[c->n_ops++];
        }
        if (!(r->op = mem_strdup(o->string)))
            return err_set(p->e, TDM_E_NOMEM, "out of memory");
        if ((st = parse_op(p, sub, o, &dflt, wild, r)) != TDM_OK)
            return st;
    }

    if ((v = cJSON_GetObjectItemCaseSensitive(root, "exclude")) != NULL) {
        if (!c->all)
            return err_set(p->e, TDM_E_DEVICE, "%s: exclude needs the \"*\" entry in ops (it removes operators from it)",
                           p->label);
        if (!cJSON_IsArray(v))
            return bad(p, "exclude", "an array of operator names", v);
        size_t ne = (size_t)cJSON_GetArraySize(v);
        if (!(c->exclude = mem_calloc(ne ? ne : 1, sizeof *c->exclude)))
            return err_set(p->e, TDM_E_NOMEM, "out of memory");
        int idx = 0;
        for (const cJSON *it = v->child; it; it = it->next, idx++) {
            path_index(sub, sizeof sub, "exclude", idx);
            if (!cJSON_IsString(it) || !op_known(it->valuestring))
                return bad(p, sub, "the name of an operator tandem knows", it);
            for (size_t k = 0; k < c->n_ops; k++)
                if (strcmp(c->ops[k].op, it->valuestring) == 0)
                    return err_set(p->e, TDM_E_DEVICE, "%s: %s (%s) is also listed in ops", p->label, sub,
                                   it->valuestring);
            if (!(c->exclude[c->n_exclude++] = mem_strdup(it->valuestring)))
                return err_set(p->e, TDM_E_NOMEM, "out of memory");
        }
    }

    if ((v = cJSON_GetObjectItemCaseSensitive(root, "precision_sensitive")) != NULL) {
        if (!cJSON_IsArray(v))
            return bad(p, "precision_sensitive", "an array of operator names", v);
        size_t ns = (size_t)cJSON_GetArraySize(v);
        if (!(c->sensitive = mem_calloc(ns ? ns : 1, sizeof *c->sensitive)))
            return err_set(p->e, TDM_E_NOMEM, "out of memory");
        int idx = 0;
        for (const cJSON *it = v->child; it; it = it->next, idx++) {
            path_index(sub, sizeof sub, "precision_sensitive", idx);
            if (!cJSON_IsString(it) || !op_known(it->valuestring))
                return bad(p, sub, "the name of an operator tandem knows", it);
            if (!(c->sensitive[c->n_sensitive++] = mem_strdup(it->valuestring)))
                return err_set(p->e, TDM_E_NOMEM, "out of memory");
        }
    }

    if ((st = parse_rescue(p, root, c)) != TDM_OK)
        return st;
    /* "unroll_loops": N, the rescue pass unrolls a Loop of at most N iterations (graph/unroll_loop.h) */
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "unroll_loops")) != NULL) {
        if (!is_int(v) || v->valuedouble < 0 || v->valuedouble > 4096)
            return bad(p, "unroll_loops", "an integer from 0 to 4096", v);
        c->unroll_loops = (int64_t)v->valuedouble;
    }

    char mem[32], line[512];
    const char *prec = c->precision == TDM_FLOAT16 ? "fp16" : c->precision == TDM_BFLOAT16 ? "bf16" : "fp32";
    double peak = c->peak_gflops;
    snprintf(line, sizeof line, "%s%s (%s%s, %s, %.4g %s peak, modeled)",
             c->description && *c->description ? c->description : "virtual NPU ",
             c->description && *c->description ? "" : c->name, prec,
             !c->quantized ? "" : c->q_round == VNPU_ROUND_HALF_AWAY ? "; QDQ groups int8, half_away"
                                                                     : "; QDQ groups int8, half_even",
             human_bytes(c->memory_bytes, mem, sizeof mem), peak >= 1000 ? peak / 1000 : peak,
             peak >= 1000 ? "TOPS" : "GFLOP/s");
    if (!(c->summary = mem_strdup(line)))
        return err_set(p->e, TDM_E_NOMEM, "out of memory");
    return TDM_OK;
}

tdm_status vnpu_parse(tdm_err *e, const char *label, const char *text, size_t len, struct vnpu_ctx **out)
{
    *out = NULL;
    pthread_once(&cjson_once, cjson_hooks);
    pctx p = {e, label};
    struct vnpu_ctx *c = mem_calloc(1, sizeof *c);
    if (!c)
        return err_set(e, TDM_E_NOMEM, "out of memory");
    if (pthread_mutex_init(&c->lock, NULL) != 0) {
        mem_free(c);
        return err_set(e, TDM_E_DEVICE, "%s: cannot create a lock", label);
    }
    if (!(c->label = mem_strdup(label))) {
        vnpu_ctx_free(c);
        return err_set(e, TDM_E_NOMEM, "out of memory");
    }
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!root) {
        int line, col;
        size_t off = end && end >= text && end <= text + len ? (size_t)(end - text) : 0;
        line_col(text, off, &line, &col);
        vnpu_ctx_free(c);
        return err_set(e, TDM_E_DEVICE, "%s: not valid JSON (line %d, column %d)", label, line, col);
    }
    tdm_status st = parse_root(&p, root, c);
    cJSON_Delete(root);
    if (st) {
        vnpu_ctx_free(c);
        return st;
    }
    c->ext.precision = c->precision;
    c->ext.storage = c->storage;
    c->ext.partition_ms = c->partition_us / 1000.0;
    c->ext.fusion = c->fusion;
    *out = c;
    return TDM_OK;
}
