/* Node signatures, the figures two tensors compare by, calibration files
 * and the end-to-end output rule (rules in calib.h; the running half is
 * run/calibrate.c). */
#define _POSIX_C_SOURCE 200809L
#include "plan/calib.h"
#include "core/file.h"
#include "core/mem.h"
#include "core/tensor.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- signature */

typedef struct sbuf {
    char *s;
    size_t n, cap;
    int oom;
} sbuf;

static void sb_add(sbuf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void sb_add(sbuf *b, const char *fmt, ...)
{
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (w < 0 || b->oom)
        return;
    size_t len = (size_t)w < sizeof tmp ? (size_t)w : sizeof tmp - 1;
    if (mem_grow((void **)&b->s, &b->cap, b->n + len + 1, 1)) {
        b->oom = 1;
        return;
    }
    memcpy(b->s + b->n, tmp, len);
    b->n += len;
    b->s[b->n] = '\0';
}

static uint64_t fnv(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 1099511628211ULL;
    }
    return h;
}

const char *calib_dtype_name(tdm_dtype dt)
{
    switch (dt) {
    case TDM_FLOAT:
        return "f32";
    case TDM_FLOAT16:
        return "f16";
    case TDM_BFLOAT16:
        return "bf16";
    case TDM_DOUBLE:
        return "f64";
    case TDM_INT64:
        return "i64";
    case TDM_INT32:
        return "i32";
    case TDM_INT8:
        return "i8";
    case TDM_UINT8:
        return "u8";
    case TDM_BOOL:
        return "bool";
    case TDM_UNDEFINED:
        return "none";
    default:
        return "t";
    }
}

static void sb_tensor(sbuf *b, const tdm_tensor_desc *t, int contents)
{
    sb_add(b, "%s", calib_dtype_name(t->dtype));
    if (t->rank < 0) {
        sb_add(b, "[?]");
    } else {
        sb_add(b, "[");
        for (int d = 0; d < t->rank; d++)
            sb_add(b, d ? ",%lld" : "%lld", (long long)t->dims[d]);
        sb_add(b, "]");
    }
    if (contents && t->data && t->rank >= 0 && t->dtype != TDM_STRING) {
        size_t n = tdm_dtype_size(t->dtype);
        int ok = n > 0;
        for (int d = 0; ok && d < t->rank; d++)
            ok = t->dims[d] >= 0 && !mem_mul(n, (size_t)t->dims[d], &n);
        if (ok)
            sb_add(b, "#%08llx", (unsigned long long)(fnv(14695981039346656037ULL, t->data, n) & 0xffffffffULL));
    }
}

tdm_status plan_node_signature(tdm_err *e, const tdm_node_desc *d, int contents, char *key, size_t key_size,
                               char **readable)
{
    sbuf b;
    memset(&b, 0, sizeof b);
    sb_add(&b, "%s%s%s@%lld(", d->domain && d->domain[0] ? d->domain : "", d->domain && d->domain[0] ? "." : "",
           d->op_type, (long long)d->opset);
    for (int a = 0; a < d->n_attrs; a++) {
        const tdm_attr_desc *at = &d->attrs[a];
        sb_add(&b, "%s%s=", a ? " " : "", at->name);
        switch (at->type) {
        case TDM_ATTR_FLOAT:
            sb_add(&b, "%.9g", (double)at->f);
            break;
        case TDM_ATTR_INT:
            sb_add(&b, "%lld", (long long)at->i);
            break;
        case TDM_ATTR_STRING:
            sb_add(&b, "'%.64s'", at->s ? at->s : "");
            break;
        case TDM_ATTR_INTS:
            for (size_t k = 0; k < at->n; k++)
                sb_add(&b, k ? ",%lld" : "%lld", (long long)at->ints[k]);
            break;
        case TDM_ATTR_FLOATS:
            for (size_t k = 0; k < at->n; k++)
                sb_add(&b, k ? ",%.9g" : "%.9g", (double)at->floats[k]);
            break;
        case TDM_ATTR_STRINGS:
            for (size_t k = 0; k < at->n; k++)
                sb_add(&b, k ? ",'%.32s'" : "'%.32s'", at->strings[k] ? at->strings[k] : "");
            break;
        case TDM_ATTR_TENSOR:
            if (at->t)
                sb_tensor(&b, at->t, contents);
            break;
        default:
            sb_add(&b, "<%d>", (int)at->type);
            break;
        }
    }
    sb_add(&b, ")");
    for (int i = 0; i < d->n_inputs; i++) {
        sb_add(&b, " ");
        sb_tensor(&b, &d->inputs[i], contents);
    }
    sb_add(&b, " ->");
    for (int i = 0; i < d->n_outputs; i++)
        sb_add(&b, " %s", calib_dtype_name(d->outputs[i].dtype));
    if (b.oom) {
        mem_free(b.s);
        return err_set(e, TDM_E_NOMEM, "out of memory");
    }
    uint64_t h = fnv(14695981039346656037ULL, b.s, b.n);
    snprintf(key, key_size, "%.64s:%016llx", d->op_type, (unsigned long long)h);
    if (readable)
        *readable = b.s;
    else
        mem_free(b.s);
    return TDM_OK;
}

/* ------------------------------------------------------------- metrics */

void calib_compare(const tdm_tensor *ref, const tdm_tensor *got, calib_metrics *m)
{
    memset(m, 0, sizeof *m);
    if (!ref || !got || ref->kind != TDM_KIND_TENSOR || got->kind != TDM_KIND_TENSOR || ref->dtype == TDM_STRING)
        return;
    m->valid = 1;
    if (ref->count != got->count || !shape_equal(ref->rank, ref->dims, got->rank, got->dims)) {
        m->cosine = 0;
        m->max_abs = INFINITY;
        m->rmse = INFINITY;
        return;
    }
    double dot = 0, na = 0, nb = 0, se = 0, mx = 0;
    int nonfin = 0;
    for (size_t i = 0; i < ref->count; i++) {
        double a = tensor_get_f64(ref, i), b = tensor_get_f64(got, i);
        if (!isfinite(b) && isfinite(a)) {
            nonfin = 1;
            continue;
        }
        if (!isfinite(a))
            continue;
        double d = fabs(a - b);
        if (d > mx)
            mx = d;
        se += d * d;
        dot += a * b;
        na += a * a;
        nb += b * b;
    }
    m->nonfinite = nonfin;
    m->max_abs = nonfin ? INFINITY : mx;
    m->rmse = ref->count ? sqrt(se / (double)ref->count) : 0;
    if (nonfin)
        m->cosine = 0;
    else if (na > 0 && nb > 0)
        m->cosine = dot / sqrt(na * nb);
    else
        m->cosine = na == nb ? 1 : 0;
}

void calib_merge_metrics(calib_metrics *acc, const calib_metrics *m)
{
    if (!m->valid)
        return;
    if (!acc->valid) {
        *acc = *m;
        return;
    }
    if (m->max_abs > acc->max_abs)
        acc->max_abs = m->max_abs;
    if (m->rmse > acc->rmse)
        acc->rmse = m->rmse;
    if (m->cosine < acc->cosine)
        acc->cosine = m->cosine;
    acc->nonfinite |= m->nonfinite;
}

/* ------------------------------------------------------------- files */

double calib_json_num(const struct cJSON *o, const char *name, double dflt)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, name);
    if (cJSON_IsNumber(x))
        return x->valuedouble;
    if (cJSON_IsNull(x))
        return INFINITY;
    return dflt;
}


struct calib_data {
    cJSON *root;
    cJSON *nodes;
    size_t entries;      /* members of "nodes" */
    unsigned char *used; /* per entry: a node of the model matched it */
};

static tdm_status calib_parse(tdm_err *e, const char *name, const char *text, size_t n, calib_data **out);

tdm_status calib_load_text(tdm_err *e, const char *name, const char *text, calib_data **out)
{
    *out = NULL;
    return calib_parse(e, name, text, strlen(text), out);
}

tdm_status calib_load(tdm_err *e, const char *path, calib_data **out)
{
    *out = NULL;
    char *text;
    size_t n;
    tdm_status st = file_read_text(e, &file_calibration, path, &text, &n);
    if (st)
        return st;
    if (n == 0) {
        mem_free(text);
        return err_set(e, TDM_E_INPUT, "the calibration file %s is empty", path);
    }
    st = calib_parse(e, path, text, n, out);
    mem_free(text);
    return st;
}

static tdm_status calib_parse(tdm_err *e, const char *path, const char *text, size_t n, calib_data **out)
{
    cJSON *root = cJSON_ParseWithLength(text, n);
    cJSON *nodes = root ? cJSON_GetObjectItemCaseSensitive(root, "nodes") : NULL;
    if (!root || !cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(root, "tandem_calibration")) || !cJSON_IsObject(nodes)) {
        cJSON_Delete(root);
        return err_set(e, TDM_E_INPUT, "%s is not a tandem calibration file (JSON with tandem_calibration and nodes)", path);
    }
    calib_data *c = mem_calloc(1, sizeof *c);
    if (!c) {
        cJSON_Delete(root);
        return err_set(e, TDM_E_NOMEM, "out of memory");
    }
    c->root = root;
    c->nodes = nodes;
    c->entries = (size_t)cJSON_GetArraySize(nodes);
    if (!(c->used = mem_calloc(c->entries + 1, 1))) {
        calib_free(c);
        return err_set(e, TDM_E_NOMEM, "out of memory");
    }
    *out = c;
    return TDM_OK;
}

void calib_match(calib_data *c, const char *key)
{
    size_t i = 0;
    for (const cJSON *it = c->nodes->child; it; it = it->next, i++)
        if (i < c->entries && it->string && strcmp(it->string, key) == 0) {
            c->used[i] = 1;
            return;
        }
}

void calib_counts(const calib_data *c, size_t *entries, size_t *matched)
{
    *entries = c->entries;
    *matched = 0;
    for (size_t i = 0; i < c->entries; i++)
        *matched += c->used[i];
}

int calib_find(const calib_data *c, const char *key, const char *device, calib_figs *out)
{
    memset(out, 0, sizeof *out);
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(c->nodes, key);
    const cJSON *dv = n ? cJSON_GetObjectItemCaseSensitive(n, "devices") : NULL;
    const cJSON *o = dv ? cJSON_GetObjectItemCaseSensitive(dv, device) : NULL;
    if (!o)
        return 0;
    const cJSON *er = cJSON_GetObjectItemCaseSensitive(o, "error"), *ch = cJSON_GetObjectItemCaseSensitive(o, "chain");
    const cJSON *ms = cJSON_GetObjectItemCaseSensitive(o, "ms");
    if (cJSON_IsObject(er)) {
        out->has_error = 1;
        out->cosine = calib_json_num(er, "cosine", 1);
        out->max_abs = calib_json_num(er, "max_abs", 0);
        out->rmse = calib_json_num(er, "rmse", 0);
    }
    if (cJSON_IsObject(ch)) {
        out->has_chain = 1;
        out->chain_cosine = calib_json_num(ch, "cosine", 1);
        out->chain_max_abs = calib_json_num(ch, "max_abs", 0);
        out->chain_rmse = calib_json_num(ch, "rmse", 0);
    }
    const cJSON *rg = cJSON_GetObjectItemCaseSensitive(n, "range");
    if (cJSON_IsObject(rg)) {
        out->has_range = 1;
        out->in_max = calib_json_num(rg, "in_max_abs", 0);
        out->out_max = calib_json_num(rg, "out_max_abs", 0);
        out->flush_fp16 = calib_json_num(rg, "flush_fp16", 0);
        out->flush_bf16 = calib_json_num(rg, "flush_bf16", 0);
    }
    /* cpu: the time in a whole-model session (unfused, threaded), when the
     * file has it, rather than the node run alone on one thread */
    const cJSON *th = cJSON_GetObjectItemCaseSensitive(o, "threaded_ms");
    if (cJSON_IsNumber(th))
        ms = th;
    if (cJSON_IsNumber(ms)) {
        out->has_ms = 1;
        out->ms = ms->valuedouble;
        out->measured = !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "modeled"));
    }
    return 1;
}

int calib_find_fused(const calib_data *c, const char *key, double *ms)
{
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(c->nodes, key);
    const cJSON *dv = n ? cJSON_GetObjectItemCaseSensitive(n, "devices") : NULL;
    const cJSON *o = dv ? cJSON_GetObjectItemCaseSensitive(dv, "cpu") : NULL;
    const cJSON *f = o ? cJSON_GetObjectItemCaseSensitive(o, "fused_ms") : NULL;
    if (!cJSON_IsNumber(f))
        return 0;
    *ms = f->valuedouble;
    return 1;
}

int calib_device_costs(const calib_data *c, const char *device, calib_dev_costs *out)
{
    const cJSON *devs = cJSON_GetObjectItemCaseSensitive(c->root, "devices"), *d;
    memset(out, 0, sizeof *out);
    out->round_trip_ms = -1;
    cJSON_ArrayForEach(d, devs) {
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(d, "name");
        if (!cJSON_IsString(nm) || strcmp(nm->valuestring, device) != 0)
            continue;
        const cJSON *cp = cJSON_GetObjectItemCaseSensitive(d, "copy");
        if (cJSON_IsObject(cp) && !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cp, "modeled")) &&
            cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(cp, "to_device_per_copy_ms"))) {
            out->has_copy = 1;
            out->to_device_copy_ms = fmax(0, calib_json_num(cp, "to_device_per_copy_ms", 0));
            out->to_device_byte_ms = fmax(0, calib_json_num(cp, "to_device_per_byte_ms", 0));
            out->to_host_copy_ms = fmax(0, calib_json_num(cp, "to_host_per_copy_ms", 0));
            out->to_host_byte_ms = fmax(0, calib_json_num(cp, "to_host_per_byte_ms", 0));
        }
        out->round_trip_ms = calib_json_num(d, "round_trip_ms", -1);
        return 1;
    }
    return 0;
}

void calib_free(calib_data *c)
{
    if (!c)
        return;
    cJSON_Delete(c->root);
    mem_free(c->used);
    mem_free(c);
}

int plan_output_check(const tdm_tensor *ref, const tdm_tensor *got, int scores, double min_cosine, double *cosine,
                      char *why, size_t why_size)
{
    calib_metrics m;
    calib_compare(ref, got, &m);
    *cosine = m.valid ? m.cosine : 1;
    if (why_size)
        why[0] = '\0';
    if (!m.valid)
        return 0;
    if (m.nonfinite) {
        snprintf(why, why_size, "non-finite values where cpu's are finite");
        return 1;
    }
    if (!(m.cosine >= min_cosine)) {
        snprintf(why, why_size, "cosine %.6f against cpu fp32 (minimum %g)", m.cosine, min_cosine);
        return 1;
    }
    /* scores: top-1 along the last axis at every position with a
     * reference winner (ahead by more than 1e-6 of the row's largest |x|:
     * not a tie within float32 noise) */
    if (!scores || ref->rank < 1 || ref->rank > 3 || !dtype_is_float(ref->dtype) || ref->dims[ref->rank - 1] < 2)
        return 0;
    size_t C = (size_t)ref->dims[ref->rank - 1], rows = ref->count / C, flips = 0, first = 0;
    for (size_t r = 0; r < rows; r++) {
        size_t ia = 0, ib = 0;
        double top = -INFINITY, second = -INFINITY, mx = 0, gt = -INFINITY;
        for (size_t j = 0; j < C; j++) {
            double a = tensor_get_f64(ref, r * C + j), b = tensor_get_f64(got, r * C + j);
            if (fabs(a) > mx)
                mx = fabs(a);
            if (a > top) {
                second = top;
                top = a;
                ia = j;
            } else if (a > second) {
                second = a;
            }
            if (b > gt) {
                gt = b;
                ib = j;
            }
        }
        if (ia != ib && top - second > 1e-6 * mx) {
            if (!flips)
                first = r;
            flips++;
        }
    }
    if (flips) {
        snprintf(why, why_size, "top-1 differs from cpu's at %zu of %zu positions (first at %zu); cosine %.6f", flips,
                 rows, first, m.cosine);
        return 1;
    }
    return 0;
}
