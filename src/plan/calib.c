/* Calibration and calibration files (rules in calib.h). */
#define _POSIX_C_SOURCE 200809L
#include "plan/calib.h"
#include "core/file.h"
#include "core/mem.h"
#include "core/tensor.h"
#include "run/exec.h"
#include "devices/opencl/opencl.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

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

static const char *dt_name(tdm_dtype dt)
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

static void sb_tensor(sbuf *b, const tdm_tensor_desc *t)
{
    sb_add(b, "%s", dt_name(t->dtype));
    if (t->rank < 0) {
        sb_add(b, "[?]");
    } else {
        sb_add(b, "[");
        for (int d = 0; d < t->rank; d++)
            sb_add(b, d ? ",%lld" : "%lld", (long long)t->dims[d]);
        sb_add(b, "]");
    }
    if (t->data && t->rank >= 0 && t->dtype != TDM_STRING) {
        size_t n = tdm_dtype_size(t->dtype);
        int ok = n > 0;
        for (int d = 0; ok && d < t->rank; d++)
            ok = t->dims[d] >= 0 && !mem_mul(n, (size_t)t->dims[d], &n);
        if (ok)
            sb_add(b, "#%08llx", (unsigned long long)(fnv(14695981039346656037ULL, t->data, n) & 0xffffffffULL));
    }
}

tdm_status plan_node_signature(tdm_err *e, const tdm_node_desc *d, char *key, size_t key_size, char **readable)
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
                sb_tensor(&b, at->t);
            break;
        default:
            sb_add(&b, "<%d>", (int)at->type);
            break;
        }
    }
    sb_add(&b, ")");
    for (int i = 0; i < d->n_inputs; i++) {
        sb_add(&b, " ");
        sb_tensor(&b, &d->inputs[i]);
    }
    sb_add(&b, " ->");
    for (int i = 0; i < d->n_outputs; i++)
        sb_add(&b, " %s", dt_name(d->outputs[i].dtype));
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

typedef struct metrics {
    int valid;
    double max_abs, rmse, cosine;
    int nonfinite;
} metrics;

static void compare(const tdm_tensor *ref, const tdm_tensor *got, metrics *m)
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

/* worst of several outputs */
static void merge_metrics(metrics *acc, const metrics *m)
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

/* ------------------------------------------------------------- running */

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct calrun {
    tdm_err *e;
    const tdm_plan *p;
    const gr_graph *g;
    int threads;
    uint64_t rng;
} calrun;

/* last[v]: the position (in order, NULL: the graph's) of value v's last
 * reader, n_nodes for graph outputs (last[] preset to -1). -1 when out of
 * memory. */
static int last_uses(const gr_graph *g, const int *order, int *last)
{
    int N = g->n_nodes;
    for (int pos = 0; pos < N; pos++) {
        const gr_node *node = &g->nodes[order ? order[pos] : pos];
        for (int i = 0; i < node->n_inputs; i++)
            if (node->inputs[i] >= 0)
                last[node->inputs[i]] = pos;
        int *imp = NULL, ni = plan_implicit_inputs(g, node, &imp);
        if (ni < 0)
            return -1;
        for (int i = 0; i < ni; i++)
            last[imp[i]] = pos;
        mem_free(imp);
    }
    for (int k = 0; k < g->n_outputs; k++)
        if (g->outputs[k] >= 0)
            last[g->outputs[k]] = N;
    return 0;
}

/* Runs node n on device d with inputs from vals; out[] receives new
 * tensors (n_outputs). */
static tdm_status run_node(calrun *c, int n, int d, tdm_tensor **vals, unsigned char *owned, tdm_tensor **out)
{
    const gr_node *node = &c->g->nodes[n];
    const dev_instance *di = &c->p->devs->items[d];
    const tdm_tensor **in = mem_calloc((size_t)node->n_inputs + 1, sizeof *in);
    tdm_status st = TDM_OK;
    if (!in)
        return err_set(c->e, TDM_E_NOMEM, "out of memory");
    for (int i = 0; i < node->n_inputs; i++)
        in[i] = node->inputs[i] >= 0 ? vals[node->inputs[i]] : NULL;
    for (int o = 0; o < node->n_outputs; o++)
        out[o] = NULL;
    for (int o = 0; o < node->n_outputs; o++)
        if (!(out[o] = mem_calloc(1, sizeof **out))) {
            st = err_set(c->e, TDM_E_NOMEM, "out of memory");
            goto fail;
        }
    exec_scope scope = {c->g, vals, owned, NULL, c->e, c->threads, &c->rng};
    op_ctx ctx = {node, node->version, node->n_inputs, in, node->n_outputs, out, c->e, &scope, c->threads, &c->rng, NULL, 0};
    if ((st = di->ext->run_host(di->dev.ctx, &ctx)) != TDM_OK) {
        char label[256];
        err_prefix(c->e, "calibrating node %s on %s: ", gr_node_label(node, label, sizeof label), di->name);
        goto fail;
    }
    mem_free((void *)in);
    return TDM_OK;
fail:
    for (int o = 0; o < node->n_outputs; o++) {
        tdm_tensor_destroy(out[o]);
        out[o] = NULL;
    }
    mem_free((void *)in);
    return st;
}

/* Runs node n on device d through the public ABI (OpenCL, plugins): the
 * inputs from vals copied to device buffers, run(), the outputs copied back
 * into new host tensors out[]. *ms receives the node's time on the device:
 * its own timer when it has one (OpenCL profiling events), else the wall
 * time of run(). */
static tdm_status run_node_device(calrun *c, int n, int d, tdm_tensor **vals, tdm_tensor **out, double *ms)
{
    const gr_node *node = &c->g->nodes[n];
    const dev_instance *di = &c->p->devs->items[d];
    const tdm_device_iface *f = di->dev.iface;
    tdm_device_tensor *in = mem_calloc((size_t)node->n_inputs + 1, sizeof *in);
    tdm_device_tensor *dout = mem_calloc((size_t)node->n_outputs + 1, sizeof *dout);
    tdm_status st = TDM_OK;
    char label[256], msg[512];
    *ms = -1;
    for (int o = 0; o < node->n_outputs; o++)
        out[o] = NULL;
    if (!in || !dout) {
        st = err_set(c->e, TDM_E_NOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < node->n_inputs; i++) {
        const tdm_tensor *t = node->inputs[i] >= 0 ? vals[node->inputs[i]] : NULL;
        if (!t || t->kind != TDM_KIND_TENSOR)
            continue;
        size_t bytes = t->nbytes;
        in[i].dtype = t->dtype;
        in[i].rank = t->rank;
        for (int r = 0; r < t->rank && r < 16; r++)
            in[i].dims[r] = t->dims[r];
        in[i].bytes = bytes;
        if (f->buffer_alloc(di->dev.ctx, bytes ? bytes : 1, &in[i].buf) != TDM_OK ||
            (bytes && f->copy_to_device(di->dev.ctx, in[i].buf, t->data, bytes) != TDM_OK)) {
            st = err_set(c->e, TDM_E_DEVICE, "calibrating node %s on %s: cannot copy input %d to the device",
                         gr_node_label(node, label, sizeof label), di->name, i);
            goto done;
        }
    }
    msg[0] = '\0';
    double t0 = now_ms();
    st = f->run(di->dev.ctx, &c->p->descs[n], in, dout, msg, sizeof msg);
    double wall = now_ms() - t0;
    msg[sizeof msg - 1] = '\0';
    if (st) {
        st = err_set(c->e, TDM_E_DEVICE, "calibrating node %s on %s: %s", gr_node_label(node, label, sizeof label),
                     di->name, msg[0] ? msg : tdm_status_str(st));
        goto done;
    }
    if (ocl_is_device(&di->dev)) {
        double dm = ocl_last_run_ms(&di->dev);
        *ms = dm >= 0 ? dm : now_ms() - t0;
    } else {
        *ms = wall;
    }
    for (int o = 0; o < node->n_outputs; o++) {
        const tdm_device_tensor *x = &dout[o];
        if (!x->buf)
            continue;
        if ((st = tensor_new(c->e, x->dtype, x->rank, x->dims, &out[o])) != TDM_OK)
            goto done;
        size_t bytes = out[o]->nbytes;
        if (bytes != x->bytes && x->bytes) {
            st = err_set(c->e, TDM_E_DEVICE, "calibrating node %s on %s: output %d has %zu bytes, its shape needs %zu",
                         gr_node_label(node, label, sizeof label), di->name, o, x->bytes, bytes);
            goto done;
        }
        if (bytes && f->copy_to_host(di->dev.ctx, out[o]->data, x->buf, bytes) != TDM_OK) {
            st = err_set(c->e, TDM_E_DEVICE, "calibrating node %s on %s: cannot copy output %d to the host",
                         gr_node_label(node, label, sizeof label), di->name, o);
            goto done;
        }
    }
done:
    for (int i = 0; in && i < node->n_inputs; i++)
        if (in[i].buf)
            f->buffer_free(di->dev.ctx, in[i].buf);
    for (int o = 0; dout && o < node->n_outputs; o++)
        if (dout[o].buf)
            f->buffer_free(di->dev.ctx, dout[o].buf);
    if (st)
        for (int o = 0; o < node->n_outputs; o++) {
            tdm_tensor_destroy(out[o]);
            out[o] = NULL;
        }
    mem_free(in);
    mem_free(dout);
    return st;
}

static void free_outs(tdm_tensor **out, int n)
{
    for (int o = 0; o < n; o++) {
        tdm_tensor_destroy(out[o]);
        out[o] = NULL;
    }
}

static void put_outs(const gr_node *node, tdm_tensor **vals, unsigned char *owned, tdm_tensor **out)
{
    for (int o = 0; o < node->n_outputs; o++) {
        int v = node->outputs[o];
        if (v < 0 || !out[o]) {
            tdm_tensor_destroy(out[o]);
            out[o] = NULL;
            continue;
        }
        if (owned[v])
            tdm_tensor_destroy(vals[v]);
        vals[v] = out[o];
        owned[v] = 1;
        out[o] = NULL;
    }
}

static cJSON *metrics_json(const metrics *m)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    if (isfinite(m->max_abs))
        cJSON_AddNumberToObject(o, "max_abs", m->max_abs);
    else
        cJSON_AddNullToObject(o, "max_abs");
    if (isfinite(m->rmse))
        cJSON_AddNumberToObject(o, "rmse", m->rmse);
    else
        cJSON_AddNullToObject(o, "rmse");
    cJSON_AddNumberToObject(o, "cosine", m->cosine);
    if (m->nonfinite)
        cJSON_AddBoolToObject(o, "nonfinite", 1);
    return o;
}

static double jnum(const cJSON *o, const char *name, double dflt)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, name);
    if (cJSON_IsNumber(x))
        return x->valuedouble;
    if (cJSON_IsNull(x))
        return INFINITY;
    return dflt;
}

/* Merges figures into an existing entry for the same key (worst kept). */
static void merge_entry(cJSON *dst, const char *what, const metrics *m)
{
    cJSON *old = cJSON_GetObjectItemCaseSensitive(dst, what);
    if (!old) {
        cJSON_AddItemToObject(dst, what, metrics_json(m));
        return;
    }
    metrics cur = {1, jnum(old, "max_abs", 0), jnum(old, "rmse", 0), jnum(old, "cosine", 1),
                   cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(old, "nonfinite"))};
    merge_metrics(&cur, m);
    cJSON_ReplaceItemInObjectCaseSensitive(dst, what, metrics_json(&cur));
}

static void copy_figures(const tdm_plan *p, int d, int repeat, cJSON *dev)
{
    const dev_instance *di = &p->devs->items[d];
    cJSON *cp = cJSON_AddObjectToObject(dev, "copy");
    if (!cp)
        return;
    if (di->ext) {
        /* built-in: vnpu's copies are modeled */
        if (di->dev.iface->copy_ms) {
            int m0 = 0, m1 = 0;
            double a = di->dev.iface->copy_ms(di->dev.ctx, 0, 1, &m0), b = di->dev.iface->copy_ms(di->dev.ctx, 1 << 20, 1, &m1);
            double c = di->dev.iface->copy_ms(di->dev.ctx, 0, 0, &m0), dd = di->dev.iface->copy_ms(di->dev.ctx, 1 << 20, 0, &m1);
            cJSON_AddNumberToObject(cp, "to_device_per_copy_ms", a);
            cJSON_AddNumberToObject(cp, "to_device_per_byte_ms", (b - a) / (double)(1 << 20));
            cJSON_AddNumberToObject(cp, "to_host_per_copy_ms", c);
            cJSON_AddNumberToObject(cp, "to_host_per_byte_ms", (dd - c) / (double)(1 << 20));
            cJSON_AddBoolToObject(cp, "modeled", m0 || m1);
        }
        return;
    }
    /* through the public ABI: measured */
    size_t small = 4096, big = 4u << 20;
    void *buf = NULL;
    unsigned char *host = mem_calloc(big, 1);
    if (!host || !di->dev.iface->buffer_alloc || di->dev.iface->buffer_alloc(di->dev.ctx, big, &buf) != TDM_OK) {
        mem_free(host);
        cJSON_AddStringToObject(cp, "error", "could not allocate a 4 MiB device buffer");
        return;
    }
    double t[2][2];
    double *s = mem_calloc((size_t)repeat + 1, sizeof *s);
    for (int dir = 0; dir < 2 && s; dir++)
        for (int k = 0; k < 2; k++) {
            size_t bytes = k ? big : small;
            for (int r = 0; r < repeat; r++) {
                double t0 = now_ms();
                if (dir == 0)
                    di->dev.iface->copy_to_device(di->dev.ctx, buf, host, bytes);
                else
                    di->dev.iface->copy_to_host(di->dev.ctx, host, buf, bytes);
                s[r] = now_ms() - t0;
            }
            qsort(s, (size_t)repeat, sizeof *s, cmp_double);
            t[dir][k] = s[repeat / 2];
        }
    if (s) {
        double slope0 = (t[0][1] - t[0][0]) / (double)(big - small), slope1 = (t[1][1] - t[1][0]) / (double)(big - small);
        cJSON_AddNumberToObject(cp, "to_device_per_copy_ms", t[0][0] - slope0 * (double)small);
        cJSON_AddNumberToObject(cp, "to_device_per_byte_ms", slope0);
        cJSON_AddNumberToObject(cp, "to_host_per_copy_ms", t[1][0] - slope1 * (double)small);
        cJSON_AddNumberToObject(cp, "to_host_per_byte_ms", slope1);
        cJSON_AddBoolToObject(cp, "modeled", 0);
    }
    mem_free(s);
    di->dev.iface->buffer_free(di->dev.ctx, buf);
    mem_free(host);
}

static void machine_json(cJSON *root)
{
    cJSON *m = cJSON_AddObjectToObject(root, "machine");
    char host[256] = "";
    struct utsname u;
    if (!m)
        return;
    if (gethostname(host, sizeof host - 1) == 0)
        cJSON_AddStringToObject(m, "hostname", host);
    if (uname(&u) == 0) {
        char os[600];
        snprintf(os, sizeof os, "%s %s %s", u.sysname, u.release, u.machine);
        cJSON_AddStringToObject(m, "os", os);
    }
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[512];
        while (fgets(line, sizeof line, f)) {
            if (strncmp(line, "model name", 10) == 0) {
                char *c = strchr(line, ':');
                if (c) {
                    c++;
                    while (*c == ' ')
                        c++;
                    c[strcspn(c, "\n")] = '\0';
                    cJSON_AddStringToObject(m, "cpu", c);
                }
                break;
            }
        }
        fclose(f);
    }
    cJSON_AddNumberToObject(m, "cores", (double)sysconf(_SC_NPROCESSORS_ONLN));
}

/* The range figures of a float tensor: max |x| over finite values, and how
 * many nonzero values round to zero in float16 (|x| < 2^-25) and bfloat16
 * (|x| < 2^-134). */
static void range_of(const tdm_tensor *t, double *mx, size_t *nz, size_t *fl16, size_t *flbf)
{
    if (!t || t->kind != TDM_KIND_TENSOR || !dtype_is_float(t->dtype))
        return;
    for (size_t i = 0; i < t->count; i++) {
        double a = fabs(tensor_get_f64(t, i));
        if (!isfinite(a) || a == 0)
            continue;
        if (a > *mx)
            *mx = a;
        if (nz)
            (*nz)++;
        if (fl16 && a < 2.98023223876953125e-8)
            (*fl16)++;
        if (flbf && a < 4.5917748078995606e-41)
            (*flbf)++;
    }
}

/* "range" of a node entry: the reference's figures, worst of equal keys. */
static void range_entry(cJSON *entry, double in_max, double out_max, double f16, double fbf)
{
    cJSON *r = cJSON_GetObjectItemCaseSensitive(entry, "range");
    if (r) {
        in_max = fmax(in_max, jnum(r, "in_max_abs", 0));
        out_max = fmax(out_max, jnum(r, "out_max_abs", 0));
        f16 = fmax(f16, jnum(r, "flush_fp16", 0));
        fbf = fmax(fbf, jnum(r, "flush_bf16", 0));
        cJSON_DeleteItemFromObjectCaseSensitive(entry, "range");
    }
    if (!(r = cJSON_AddObjectToObject(entry, "range")))
        return;
    cJSON_AddNumberToObject(r, "in_max_abs", in_max);
    cJSON_AddNumberToObject(r, "out_max_abs", out_max);
    cJSON_AddNumberToObject(r, "flush_fp16", f16);
    cJSON_AddNumberToObject(r, "flush_bf16", fbf);
}

static tdm_status calibrate(tdm_err *e, const tdm_plan *p, const tdm_tensor *const *in, int repeat, int threads,
                           calib_progress_fn fn, void *user, char **json, tdm_tensor **ref_out);

tdm_status plan_calibrate(tdm_err *e, const tdm_plan *p, const tdm_tensor *const *in, int repeat, int threads,
                          calib_progress_fn fn, void *user, char **json)
{
    return calibrate(e, p, in, repeat, threads, fn, user, json, NULL);
}

tdm_status plan_probe(tdm_err *e, const tdm_plan *p, const tdm_tensor *const *in, int threads, char **json,
                      tdm_tensor **ref_out)
{
    return calibrate(e, p, in, 1, threads, NULL, NULL, json, ref_out);
}

/* A device whose float compute type is narrower than float32. */
static int narrow_device(const dev_instance *di)
{
    return di->ext && (di->ext->precision == TDM_FLOAT16 || di->ext->precision == TDM_BFLOAT16);
}

/* ref_out (not NULL: the guard's probe, plan_probe): no times, no error of
 * the node alone, chains only on narrow devices; ref_out receives the
 * reference's graph outputs. */
static tdm_status calibrate(tdm_err *e, const tdm_plan *p, const tdm_tensor *const *in, int repeat, int threads,
                           calib_progress_fn fn, void *user, char **json, tdm_tensor **ref_out)
{
    int probe = ref_out != NULL;
    const gr_graph *g = p->g;
    int N = g->n_nodes, V = g->n_values, D = (int)p->devs->n, cpu = D - 1;
    tdm_status st = TDM_OK;
    calrun c = {e, p, g, threads, 0x9e3779b97f4a7c15ull};
    *json = NULL;
    if (repeat < 1)
        repeat = 1;
    /* value storage: reference, and one chain per device */
    tdm_tensor ***vals = mem_calloc((size_t)D, sizeof *vals);
    unsigned char **owned = mem_calloc((size_t)D, sizeof *owned);
    int *last = mem_alloc((size_t)V * sizeof *last + sizeof *last);
    double *times = mem_calloc((size_t)repeat + 1, sizeof *times);
    tdm_tensor **out = NULL, **out2 = NULL;
    cJSON *root = cJSON_CreateObject(), *nodes = NULL, *devs = NULL;
    int max_out = 1;
    for (int n = 0; n < N; n++)
        if (g->nodes[n].n_outputs > max_out)
            max_out = g->nodes[n].n_outputs;
    out = mem_calloc((size_t)max_out, sizeof *out);
    out2 = mem_calloc((size_t)max_out, sizeof *out2);
    if (!vals || !owned || !last || !times || !root || !out || !out2)
        goto nomem;
    for (int d = 0; d < D; d++) {
        vals[d] = mem_calloc((size_t)V + 1, sizeof **vals);
        owned[d] = mem_calloc((size_t)V + 1, 1);
        if (!vals[d] || !owned[d])
            goto nomem;
    }
    for (int v = 0; v < V; v++) {
        last[v] = -1;
        for (int d = 0; d < D; d++)
            vals[d][v] = g->values[v].init;
    }
    for (int k = 0; k < g->n_inputs; k++)
        if (in[k])
            for (int d = 0; d < D; d++)
                vals[d][g->inputs[k]] = (tdm_tensor *)in[k];
    if (last_uses(g, g->order, last))
        goto nomem;
    /* header */
    if (!cJSON_AddNumberToObject(root, "tandem_calibration", 1))
        goto nomem;
    {
        const char *path = p->model->path ? p->model->path : "";
        const char *base = strrchr(path, '/');
        cJSON_AddStringToObject(root, "model", base ? base + 1 : path);
    }
    machine_json(root);
    cJSON_AddNumberToObject(root, "repeat", repeat);
    if (!(devs = cJSON_AddArrayToObject(root, "devices")))
        goto nomem;
    for (int d = 0; d < D; d++) {
        const dev_instance *di = &p->devs->items[d];
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddItemToArray(devs, o))
            goto nomem;
        cJSON_AddStringToObject(o, "name", di->name);
        cJSON_AddStringToObject(o, "kind", dev_kind_str(di->kind));
        if (di->ext)
            cJSON_AddStringToObject(o, "precision", dt_name(di->ext->precision));
        if (d != cpu)
            copy_figures(p, d, repeat, o);
    }
    {
        cJSON *ins = cJSON_AddArrayToObject(root, "inputs");
        for (int k = 0; ins && k < g->n_inputs; k++) {
            const tdm_tensor *t = in[k];
            cJSON *o = cJSON_CreateObject(), *sh;
            if (!o || !cJSON_AddItemToArray(ins, o))
                goto nomem;
            cJSON_AddStringToObject(o, "name", g->values[g->inputs[k]].name);
            if (t && t->kind == TDM_KIND_TENSOR && (sh = cJSON_AddArrayToObject(o, "shape")) != NULL)
                for (int r = 0; r < t->rank; r++)
                    cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)t->dims[r]));
        }
    }
    if (!(nodes = cJSON_AddObjectToObject(root, "nodes")))
        goto nomem;
    for (int pos = 0; pos < N; pos++) {
        int n = g->order ? g->order[pos] : pos;
        const gr_node *node = &g->nodes[n];
        char key[128];
        char *readable = NULL;
        if (fn)
            fn(user, (size_t)pos, (size_t)N, node->name);
        if ((st = plan_node_signature(e, &p->descs[n], key, sizeof key, &readable)) != TDM_OK)
            goto done;
        if (probe) /* one model's figures: by node, not merged by signature */
            snprintf(key, sizeof key, "#%.120s", node->name);
        cJSON *entry = cJSON_GetObjectItemCaseSensitive(nodes, key), *names, *dv;
        if (!entry) {
            entry = cJSON_AddObjectToObject(nodes, key);
            if (!entry) {
                mem_free(readable);
                goto nomem;
            }
            cJSON_AddStringToObject(entry, "op", node->op_type);
            cJSON_AddStringToObject(entry, "signature", readable);
            cJSON_AddArrayToObject(entry, "names");
            cJSON_AddObjectToObject(entry, "devices");
        }
        mem_free(readable);
        names = cJSON_GetObjectItemCaseSensitive(entry, "names");
        dv = cJSON_GetObjectItemCaseSensitive(entry, "devices");
        if (!names || !dv)
            goto nomem;
        cJSON_AddItemToArray(names, cJSON_CreateString(node->name));
        /* reference on cpu, timed */
        for (int r = 0; r < repeat; r++) {
            double t0 = now_ms();
            if ((st = run_node(&c, n, cpu, vals[cpu], owned[cpu], out)) != TDM_OK)
                goto done;
            times[r] = now_ms() - t0;
            if (r + 1 < repeat)
                free_outs(out, node->n_outputs);
        }
        {
            double in_max = 0, out_max = 0;
            size_t nz = 0, f16 = 0, fbf = 0;
            for (int i = 0; i < node->n_inputs; i++)
                if (node->inputs[i] >= 0)
                    range_of(vals[cpu][node->inputs[i]], &in_max, NULL, NULL, NULL);
            for (int k = 0; k < node->n_outputs; k++)
                range_of(out[k], &out_max, &nz, &f16, &fbf);
            range_entry(entry, in_max, out_max, nz ? (double)f16 / (double)nz : 0, nz ? (double)fbf / (double)nz : 0);
        }
        qsort(times, (size_t)repeat, sizeof *times, cmp_double);
        {
            cJSON *o = cJSON_GetObjectItemCaseSensitive(dv, "cpu");
            if (!o && (o = cJSON_AddObjectToObject(dv, p->devs->items[cpu].name)) != NULL) {
                cJSON_AddBoolToObject(o, "supported", 1);
                cJSON_AddNumberToObject(o, "ms", times[repeat / 2]);
                cJSON_AddBoolToObject(o, "modeled", 0);
            }
        }
        /* every other device: its time, the node alone, the chain */
        for (int d = 0; d < cpu; d++) {
            const dev_instance *di = &p->devs->items[d];
            if (probe && !narrow_device(di))
                continue;
            tdm_verdict vd;
            memset(&vd, 0, sizeof vd);
            int ok = di->dev.iface->supports(di->dev.ctx, &p->descs[n], &vd) == TDM_REASON_OK;
            cJSON *o = cJSON_GetObjectItemCaseSensitive(dv, di->name);
            int fresh = !o;
            if (!o && !(o = cJSON_AddObjectToObject(dv, di->name)))
                goto nomem;
            if (fresh)
                cJSON_AddBoolToObject(o, "supported", ok);
            metrics alone, chain, m;
            memset(&alone, 0, sizeof alone);
            memset(&chain, 0, sizeof chain);
            if (ok && fresh && !probe) {
                int mod = 0;
                double est = di->dev.iface->estimate_ms ? di->dev.iface->estimate_ms(di->dev.ctx, &p->descs[n], &mod) : -1;
                if (di->ext && di->kind != DEV_KIND_VNPU) {
                    for (int r = 0; r < repeat; r++) {
                        double t0 = now_ms();
                        if ((st = run_node(&c, n, d, vals[cpu], owned[cpu], out2)) != TDM_OK)
                            goto done;
                        times[r] = now_ms() - t0;
                        free_outs(out2, node->n_outputs);
                    }
                    qsort(times, (size_t)repeat, sizeof *times, cmp_double);
                    cJSON_AddNumberToObject(o, "ms", times[repeat / 2]);
                    cJSON_AddBoolToObject(o, "modeled", 0);
                } else if (!di->ext) {
                    /* through the public ABI: the median of repeated runs
                     * on the device, and the error of the last run */
                    for (int r = 0; r < repeat; r++) {
                        if ((st = run_node_device(&c, n, d, vals[cpu], out2, &times[r])) != TDM_OK)
                            goto done;
                        if (r + 1 < repeat)
                            free_outs(out2, node->n_outputs);
                    }
                    qsort(times, (size_t)repeat, sizeof *times, cmp_double);
                    cJSON_AddNumberToObject(o, "ms", times[repeat / 2]);
                    cJSON_AddBoolToObject(o, "modeled", 0);
                    cJSON_AddStringToObject(o, "timer", ocl_is_device(&di->dev) ? "device" : "wall");
                    if (est >= 0 && isfinite(est))
                        cJSON_AddNumberToObject(o, "estimate_ms", est);
                    for (int k = 0; k < node->n_outputs; k++) {
                        compare(out[k], out2[k], &m);
                        merge_metrics(&alone, &m);
                    }
                    free_outs(out2, node->n_outputs);
                    merge_entry(o, "error", &alone);
                } else if (est >= 0 && isfinite(est)) {
                    cJSON_AddNumberToObject(o, "ms", est);
                    cJSON_AddBoolToObject(o, "modeled", mod != 0);
                }
            }
            if (ok && di->ext && !probe) {
                if ((st = run_node(&c, n, d, vals[cpu], owned[cpu], out2)) != TDM_OK)
                    goto done;
                for (int k = 0; k < node->n_outputs; k++) {
                    compare(out[k], out2[k], &m);
                    merge_metrics(&alone, &m);
                }
                free_outs(out2, node->n_outputs);
                merge_entry(o, "error", &alone);
            }
            /* chain: on the device when it can, else cpu, from the chain's values */
            int cd = ok ? d : cpu;
            if (cd != cpu && !di->ext) {
                double ignored;
                if ((st = run_node_device(&c, n, d, vals[d], out2, &ignored)) != TDM_OK)
                    goto done;
            } else if ((st = run_node(&c, n, cd, vals[d], owned[d], out2)) != TDM_OK) {
                goto done;
            }
            for (int k = 0; k < node->n_outputs; k++) {
                compare(out[k], out2[k], &m);
                merge_metrics(&chain, &m);
            }
            put_outs(node, vals[d], owned[d], out2);
            if (chain.valid)
                merge_entry(o, "chain", &chain);
        }
        put_outs(node, vals[cpu], owned[cpu], out);
        /* release values after their last use */
        for (int v = 0; v < V; v++)
            if (last[v] == pos)
                for (int d = 0; d < D; d++)
                    if (owned[d][v]) {
                        tdm_tensor_destroy(vals[d][v]);
                        vals[d][v] = NULL;
                        owned[d][v] = 0;
                    }
    }
    if (fn)
        fn(user, (size_t)N, (size_t)N, "");
    for (int k = 0; probe && k < g->n_outputs; k++) {
        int v = g->outputs[k];
        ref_out[k] = NULL;
        if (v < 0 || !vals[cpu][v])
            continue;
        if ((st = tensor_clone(e, vals[cpu][v], &ref_out[k])) != TDM_OK) {
            for (int j = 0; j < k; j++) {
                tdm_tensor_destroy(ref_out[j]);
                ref_out[j] = NULL;
            }
            goto done;
        }
    }
    {
        char *text = probe ? cJSON_PrintUnformatted(root) : cJSON_Print(root);
        if (!text)
            goto nomem;
        *json = mem_strdup(text);
        cJSON_free(text);
        if (!*json)
            goto nomem;
    }
    goto done;
nomem:
    st = err_set(e, TDM_E_NOMEM, "out of memory");
done:
    if (out)
        free_outs(out, max_out);
    if (out2)
        free_outs(out2, max_out);
    for (int d = 0; vals && owned && d < D; d++) {
        for (int v = 0; vals[d] && owned[d] && v < V; v++)
            if (owned[d][v])
                tdm_tensor_destroy(vals[d][v]);
        if (vals[d])
            mem_free(vals[d]);
        if (owned[d])
            mem_free(owned[d]);
    }
    mem_free(vals);
    mem_free(owned);
    mem_free(last);
    mem_free(times);
    mem_free(out);
    mem_free(out2);
    cJSON_Delete(root);
    return st;
}

/* ------------------------------------------------------------- files */

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
        out->cosine = jnum(er, "cosine", 1);
        out->max_abs = jnum(er, "max_abs", 0);
        out->rmse = jnum(er, "rmse", 0);
    }
    if (cJSON_IsObject(ch)) {
        out->has_chain = 1;
        out->chain_cosine = jnum(ch, "cosine", 1);
        out->chain_max_abs = jnum(ch, "max_abs", 0);
        out->chain_rmse = jnum(ch, "rmse", 0);
    }
    const cJSON *rg = cJSON_GetObjectItemCaseSensitive(n, "range");
    if (cJSON_IsObject(rg)) {
        out->has_range = 1;
        out->in_max = jnum(rg, "in_max_abs", 0);
        out->out_max = jnum(rg, "out_max_abs", 0);
        out->flush_fp16 = jnum(rg, "flush_fp16", 0);
        out->flush_bf16 = jnum(rg, "flush_bf16", 0);
    }
    if (cJSON_IsNumber(ms)) {
        out->has_ms = 1;
        out->ms = ms->valuedouble;
        out->measured = !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "modeled"));
    }
    return 1;
}

void calib_free(calib_data *c)
{
    if (!c)
        return;
    cJSON_Delete(c->root);
    mem_free(c->used);
    mem_free(c);
}

/* ------------------------------------------------------------- guard */

tdm_status plan_run_mixed(tdm_err *e, const tdm_plan *p, const tdm_tensor *const *in, int upto, int threads,
                          tdm_tensor **outs)
{
    const gr_graph *g = p->g;
    int N = g->n_nodes, V = g->n_values, cpu = (int)p->devs->n - 1;
    calrun c = {e, p, g, threads, 0x9e3779b97f4a7c15ull};
    tdm_status st = TDM_OK;
    tdm_tensor **vals = mem_calloc((size_t)V + 1, sizeof *vals);
    unsigned char *owned = mem_calloc((size_t)V + 1, 1);
    int *last = mem_alloc(((size_t)V + 1) * sizeof *last);
    int max_out = 1;
    for (int n = 0; n < N; n++)
        if (g->nodes[n].n_outputs > max_out)
            max_out = g->nodes[n].n_outputs;
    tdm_tensor **out = mem_calloc((size_t)max_out, sizeof *out);
    for (int k = 0; k < g->n_outputs; k++)
        outs[k] = NULL;
    if (!vals || !owned || !last || !out) {
        st = err_set(e, TDM_E_NOMEM, "out of memory");
        goto done;
    }
    for (int v = 0; v < V; v++) {
        last[v] = -1;
        vals[v] = g->values[v].init;
    }
    for (int k = 0; k < g->n_inputs; k++)
        if (in[k])
            vals[g->inputs[k]] = (tdm_tensor *)in[k];
    if (last_uses(g, p->order, last)) {
        st = err_set(e, TDM_E_NOMEM, "out of memory");
        goto done;
    }
    for (int pos = 0; pos < N; pos++) {
        int n = p->order[pos];
        const gr_node *node = &g->nodes[n];
        int d = pos <= upto ? p->nodes[n].device : cpu;
        if (p->devs->items[d].ext) {
            st = run_node(&c, n, d, vals, owned, out);
        } else {
            double ignored;
            st = run_node_device(&c, n, d, vals, out, &ignored);
        }
        if (st)
            goto done;
        put_outs(node, vals, owned, out);
        for (int i = 0; i < node->n_inputs; i++) {
            int v = node->inputs[i];
            if (v >= 0 && last[v] == pos && owned[v]) {
                tdm_tensor_destroy(vals[v]);
                vals[v] = NULL;
                owned[v] = 0;
            }
        }
    }
    for (int k = 0; k < g->n_outputs; k++) {
        int v = g->outputs[k];
        if (v < 0 || !vals[v])
            continue;
        if (owned[v]) {
            outs[k] = vals[v];
            owned[v] = 0;
            for (int j = k + 1; j < g->n_outputs; j++)
                if (g->outputs[j] == v)
                    owned[v] = 1; /* the same value twice: clone it for the later one */
            if (owned[v]) {
                owned[v] = 0;
                if ((st = tensor_clone(e, outs[k], &outs[k])) != TDM_OK)
                    goto done;
                owned[v] = 1;
            }
        } else if ((st = tensor_clone(e, vals[v], &outs[k])) != TDM_OK) {
            goto done;
        }
    }
done:
    if (st)
        for (int k = 0; k < g->n_outputs; k++) {
            tdm_tensor_destroy(outs[k]);
            outs[k] = NULL;
        }
    for (int v = 0; vals && owned && v < V; v++)
        if (owned[v])
            tdm_tensor_destroy(vals[v]);
    mem_free(vals);
    mem_free(owned);
    mem_free(last);
    mem_free(out);
    return st;
}

int plan_output_check(const tdm_tensor *ref, const tdm_tensor *got, int scores, double min_cosine, double *cosine,
                      char *why, size_t why_size)
{
    metrics m;
    compare(ref, got, &m);
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
