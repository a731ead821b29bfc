/* Running a calibration and the precision guard's node-by-node runs
 * (run/calibrate.h), and tdm_calibrate: plans the model on the session
 * options' devices (for the devices, shapes and node descriptions) and
 * calibrates it. */
#define _POSIX_C_SOURCE 200809L
#include "run/calibrate.h"
#include "core/ctx.h"
#include "core/mem.h"
#include "core/tensor.h"
#include "graph/fuse.h"
#include "run/node.h"
#include "run/observe.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

/* ------------------------------------------------------------- running */

static double now_ms(void) { return (double)obs_now_ns() / 1e6; }

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

/* The inputs of node n from vals into in[] (n_inputs entries). */
static void node_inputs(const gr_node *node, tdm_tensor *const *vals, const tdm_tensor **in)
{
    for (int i = 0; i < node->n_inputs; i++)
        in[i] = node->inputs[i] >= 0 ? vals[node->inputs[i]] : NULL;
}

/* Runs node n on built-in device d with inputs from vals; out[] receives
 * new tensors (n_outputs). */
static tdm_status run_node(calrun *c, int n, int d, tdm_tensor **vals, unsigned char *owned, tdm_tensor **out)
{
    const gr_node *node = &c->g->nodes[n];
    const dev_instance *di = &c->p->devs->items[d];
    const tdm_tensor **in = mem_calloc((size_t)node->n_inputs + 1, sizeof *in);
    if (!in)
        return err_set(c->e, TDM_E_NOMEM, "out of memory");
    node_inputs(node, vals, in);
    exec_scope scope;
    exec_scope_init(&scope, c->g, vals, owned, NULL, c->e, c->threads, &c->rng);
    tdm_status st = node_run_builtin(c->e, di, node, &scope, in, out, c->threads, &c->rng);
    if (st) {
        char label[256];
        err_prefix(c->e, "calibrating node %s on %s: ", gr_node_label(node, label, sizeof label), di->name);
    }
    mem_free((void *)in);
    return st;
}

/* Runs node n on device d through the public ABI (OpenCL, plugins) with
 * inputs from vals (node_run_plugin_host): out[] receives new host tensors;
 * *ms the node's time on the device: its own timer when it has one (ABI
 * version 2's last_run_ms, e.g. OpenCL profiling events), else the wall
 * time of run(). */
static tdm_status run_node_device(calrun *c, int n, int d, tdm_tensor **vals, tdm_tensor **out, double *ms)
{
    const gr_node *node = &c->g->nodes[n];
    const tdm_tensor **in = mem_calloc((size_t)node->n_inputs + 1, sizeof *in);
    if (!in)
        return err_set(c->e, TDM_E_NOMEM, "out of memory");
    node_inputs(node, vals, in);
    tdm_status st = node_run_plugin_host(c->e, &c->p->devs->items[d], node, &c->p->descs[n], in, out, ms);
    if (st)
        err_prefix(c->e, "calibrating: ");
    mem_free((void *)in);
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

static cJSON *metrics_json(const calib_metrics *m)
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


/* Merges figures into an existing entry for the same key (worst kept). */
static void merge_entry(cJSON *dst, const char *what, const calib_metrics *m)
{
    cJSON *old = cJSON_GetObjectItemCaseSensitive(dst, what);
    if (!old) {
        cJSON_AddItemToObject(dst, what, metrics_json(m));
        return;
    }
    calib_metrics cur = {1, calib_json_num(old, "max_abs", 0), calib_json_num(old, "rmse", 0), calib_json_num(old, "cosine", 1),
                   cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(old, "nonfinite"))};
    calib_merge_metrics(&cur, m);
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

/* The measured copies of one node run through the ABI (every input to
 * the device, every output back), from the device's "copy" figures. */
static double node_copy_ms(const cJSON *dev, const gr_node *node, tdm_tensor *const *vals, tdm_tensor *const *out)
{
    const cJSON *cp = dev ? cJSON_GetObjectItemCaseSensitive(dev, "copy") : NULL;
    if (!cJSON_IsObject(cp))
        return 0;
    double t = 0;
    for (int i = 0; i < node->n_inputs; i++) {
        const tdm_tensor *x = node->inputs[i] >= 0 ? vals[node->inputs[i]] : NULL;
        if (x && x->kind == TDM_KIND_TENSOR)
            t += calib_json_num(cp, "to_device_per_copy_ms", 0) + calib_json_num(cp, "to_device_per_byte_ms", 0) * (double)x->nbytes;
    }
    for (int o = 0; o < node->n_outputs; o++)
        if (out[o] && out[o]->kind == TDM_KIND_TENSOR)
            t += calib_json_num(cp, "to_host_per_copy_ms", 0) + calib_json_num(cp, "to_host_per_byte_ms", 0) * (double)out[o]->nbytes;
    return t;
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
    /* float32 read in place, without a conversion call per element (the
     * probe's ranges read every value of every node), as bytes: a weight
     * may lie misaligned in the model's file; the other types by
     * tensor_get_f64, which reads bytes too */
    const unsigned char *f = t->dtype == TDM_FLOAT ? t->data : NULL;
    for (size_t i = 0; i < t->count; i++) {
        float v = 0;
        if (f)
            memcpy(&v, f + i * sizeof v, sizeof v);
        double a = fabs(f ? (double)v : tensor_get_f64(t, i));
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
        in_max = fmax(in_max, calib_json_num(r, "in_max_abs", 0));
        out_max = fmax(out_max, calib_json_num(r, "out_max_abs", 0));
        f16 = fmax(f16, calib_json_num(r, "flush_fp16", 0));
        fbf = fmax(fbf, calib_json_num(r, "flush_bf16", 0));
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

tdm_status plan_probe_merge(tdm_err *e, char **acc, const char *more)
{
    static const char *const figs[] = {"chain", "error"};
    cJSON *a = cJSON_Parse(*acc), *b = cJSON_Parse(more), *be;
    cJSON *an = cJSON_GetObjectItemCaseSensitive(a, "nodes"), *bn = cJSON_GetObjectItemCaseSensitive(b, "nodes");
    tdm_status st = TDM_OK;
    if (!a || !b || !cJSON_IsObject(an) || !cJSON_IsObject(bn)) {
        st = err_set(e, TDM_E_NOMEM, "out of memory (or a malformed probe) while combining the guard's probes");
        goto done;
    }
    cJSON_ArrayForEach(be, bn) {
        cJSON *ae = cJSON_GetObjectItemCaseSensitive(an, be->string), *bx;
        if (!ae) {
            cJSON *dup = cJSON_Duplicate(be, 1);
            if (!dup || !cJSON_AddItemToObject(an, be->string, dup)) {
                cJSON_Delete(dup);
                goto nomem;
            }
            continue;
        }
        cJSON *r = cJSON_GetObjectItemCaseSensitive(be, "range");
        if (r)
            range_entry(ae, calib_json_num(r, "in_max_abs", 0), calib_json_num(r, "out_max_abs", 0),
                        calib_json_num(r, "flush_fp16", 0), calib_json_num(r, "flush_bf16", 0));
        cJSON *ad = cJSON_GetObjectItemCaseSensitive(ae, "devices");
        cJSON_ArrayForEach(bx, cJSON_GetObjectItemCaseSensitive(be, "devices")) {
            cJSON *ax = ad ? cJSON_GetObjectItemCaseSensitive(ad, bx->string) : NULL;
            if (!ax) {
                cJSON *dup = cJSON_Duplicate(bx, 1);
                if (!ad || !dup || !cJSON_AddItemToObject(ad, bx->string, dup)) {
                    cJSON_Delete(dup);
                    goto nomem;
                }
                continue;
            }
            for (size_t k = 0; k < sizeof figs / sizeof figs[0]; k++) {
                cJSON *m = cJSON_GetObjectItemCaseSensitive(bx, figs[k]);
                if (!m)
                    continue;
                calib_metrics cm = {1, calib_json_num(m, "max_abs", 0), calib_json_num(m, "rmse", 0),
                                    calib_json_num(m, "cosine", 1),
                                    cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(m, "nonfinite"))};
                merge_entry(ax, figs[k], &cm);
            }
        }
    }
    {
        char *text = cJSON_PrintUnformatted(a), *copy = text ? mem_strdup(text) : NULL;
        cJSON_free(text);
        if (!copy)
            goto nomem;
        mem_free(*acc);
        *acc = copy;
    }
    goto done;
nomem:
    st = err_set(e, TDM_E_NOMEM, "out of memory");
done:
    cJSON_Delete(a);
    cJSON_Delete(b);
    return st;
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
    double *walls = mem_calloc((size_t)repeat + 1, sizeof *walls);
    double *trips = mem_calloc((size_t)N * (size_t)D + 1, sizeof *trips);
    int *n_trips = mem_calloc((size_t)D + 1, sizeof *n_trips);
    tdm_tensor **out = NULL, **out2 = NULL;
    cJSON *root = cJSON_CreateObject(), *nodes = NULL, *devs = NULL;
    int max_out = 1;
    for (int n = 0; n < N; n++)
        if (g->nodes[n].n_outputs > max_out)
            max_out = g->nodes[n].n_outputs;
    out = mem_calloc((size_t)max_out, sizeof *out);
    out2 = mem_calloc((size_t)max_out, sizeof *out2);
    if (!vals || !owned || !last || !times || !walls || !trips || !n_trips || !root || !out || !out2)
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
            cJSON_AddStringToObject(o, "precision", calib_dtype_name(di->ext->precision));
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
        if ((st = plan_node_signature(e, &p->descs[n], !probe, key, sizeof key, &readable)) != TDM_OK)
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
                if (node->inputs[i] >= 0) {
                    range_of(vals[cpu][node->inputs[i]], &in_max, NULL, NULL, NULL);
                    /* a weight in a file mapping is read once here: not
                     * kept resident beside its packed form (issue 20 item 5) */
                    tensor_drop_pages(vals[cpu][node->inputs[i]]);
                }
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
            calib_metrics alone, chain, m;
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
                        double t0 = now_ms();
                        if ((st = run_node_device(&c, n, d, vals[cpu], out2, &times[r])) != TDM_OK)
                            goto done;
                        walls[r] = now_ms() - t0 - times[r];
                        if (r + 1 < repeat)
                            free_outs(out2, node->n_outputs);
                    }
                    qsort(walls, (size_t)repeat, sizeof *walls, cmp_double);
                    trips[(size_t)d * (size_t)N + (size_t)n_trips[d]++] =
                        walls[repeat / 2] - node_copy_ms(cJSON_GetArrayItem(devs, d), node, vals[cpu], out2);
                    qsort(times, (size_t)repeat, sizeof *times, cmp_double);
                    cJSON_AddNumberToObject(o, "ms", times[repeat / 2]);
                    cJSON_AddBoolToObject(o, "modeled", 0);
                    cJSON_AddStringToObject(o, "timer", dev_has_run_timer(di) ? "device" : "wall");
                    if (est >= 0 && isfinite(est))
                        cJSON_AddNumberToObject(o, "estimate_ms", est);
                    for (int k = 0; k < node->n_outputs; k++) {
                        calib_compare(out[k], out2[k], &m);
                        calib_merge_metrics(&alone, &m);
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
                    calib_compare(out[k], out2[k], &m);
                    calib_merge_metrics(&alone, &m);
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
                calib_compare(out[k], out2[k], &m);
                calib_merge_metrics(&chain, &m);
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
    /* the round trip of a device through the ABI: the median over its nodes
     * of wall time - device time - copies */
    for (int d = 0; d < cpu; d++)
        if (n_trips[d]) {
            double *t = trips + (size_t)d * (size_t)N;
            qsort(t, (size_t)n_trips[d], sizeof *t, cmp_double);
            cJSON_AddNumberToObject(cJSON_GetArrayItem(devs, d), "round_trip_ms", t[n_trips[d] / 2] > 0 ? t[n_trips[d] / 2] : 0);
        }
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
    mem_free(walls);
    mem_free(trips);
    mem_free(n_trips);
    mem_free(out);
    mem_free(out2);
    cJSON_Delete(root);
    return st;
}

/* ------------------------------------------------------------- guard */

/* Clones value v into got[slot[v]] when it is wanted and not taken yet. */
static tdm_status capture(tdm_err *e, const int *slot, int v, const tdm_tensor *t, tdm_tensor **got)
{
    if (!slot || v < 0 || slot[v] < 0 || !t || got[slot[v]])
        return TDM_OK;
    return tensor_clone(e, t, &got[slot[v]]);
}

/* plan_run_mixed; slot (per value of p->g, NULL: none): the index in got[]
 * of a value to capture, or -1. */
static tdm_status run_mixed(tdm_err *e, const tdm_plan *p, const tdm_tensor *const *in, int upto, int threads,
                            tdm_tensor **outs, const int *slot, tdm_tensor **got)
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
    for (int v = 0; slot && v < V; v++)
        if ((st = capture(e, slot, v, vals[v], got)) != TDM_OK)
            goto done;
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
        for (int o = 0; slot && o < node->n_outputs; o++)
            if (node->outputs[o] >= 0 && (st = capture(e, slot, node->outputs[o], vals[node->outputs[o]], got)) != TDM_OK)
                goto done;
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

tdm_status plan_run_mixed(tdm_err *e, const tdm_plan *p, const tdm_tensor *const *in, int upto, int threads,
                          tdm_tensor **outs)
{
    return run_mixed(e, p, in, upto, threads, outs, NULL, NULL);
}

tdm_status plan_run_capture(tdm_err *e, const tdm_plan *p, const tdm_tensor *const *in, int threads,
                            const char *const *names, int n, tdm_tensor **got)
{
    const gr_graph *g = p->g;
    int *slot = mem_alloc(((size_t)g->n_values + 1) * sizeof *slot);
    tdm_tensor **outs = mem_calloc((size_t)g->n_outputs + 1, sizeof *outs);
    tdm_status st = TDM_OK;
    for (int k = 0; k < n; k++)
        got[k] = NULL;
    if (!slot || !outs) {
        st = err_set(e, TDM_E_NOMEM, "out of memory");
        goto done;
    }
    for (int v = 0; v < g->n_values; v++) {
        slot[v] = -1;
        for (int k = 0; k < n && slot[v] < 0; k++)
            if (g->values[v].name && strcmp(g->values[v].name, names[k]) == 0)
                slot[v] = k;
    }
    st = run_mixed(e, p, in, -1, threads, outs, slot, got);
    for (int k = 0; k < g->n_outputs; k++)
        tdm_tensor_destroy(outs[k]);
    if (st)
        for (int k = 0; k < n; k++) {
            tdm_tensor_destroy(got[k]);
            got[k] = NULL;
        }
done:
    mem_free(slot);
    mem_free(outs);
    return st;
}

/* ------------------------------------------------------------- sessions */

/* Per-node times of whole-model cpu sessions, by node name. */
typedef struct sess_times {
    size_t n_nodes;
    int run;           /* the run being observed; -1: warm-up */
    double *ms;        /* run * n_nodes + node_index */
    char **names;      /* node_index → name (first seen) */
    int oom;
} sess_times;

static void sess_observe(void *user, const tdm_event *ev)
{
    sess_times *t = user;
    if (ev->kind != TDM_EVENT_NODE || t->run < 0 || ev->node_index >= t->n_nodes)
        return;
    t->ms[(size_t)t->run * t->n_nodes + ev->node_index] += (double)(ev->end_ns - ev->start_ns) / 1e6;
    if (!t->names[ev->node_index] && ev->name && !(t->names[ev->node_index] = mem_strdup(ev->name)))
        t->oom = 1;
}

/* Runs model (every node on cpu, the session's default threads, fusion as
 * given) 2 times untimed and `runs` times observed; med[] (by node index)
 * receives each node's median time and *run_ms the median run. */
static tdm_status sess_measure(tdm_ctx *ctx, tdm_err *e, const tdm_model *model, const tdm_tensor *const *inputs,
                               int runs, tdm_fusion fusion, sess_times *t, double *med, double *run_ms)
{
    tdm_session_options *o = NULL;
    tdm_session *ss = NULL;
    size_t nout = model->n_outputs;
    tdm_tensor **outs = mem_calloc(nout + 1, sizeof *outs);
    double *col = mem_calloc((size_t)runs + 1, sizeof *col), *walls = mem_calloc((size_t)runs + 1, sizeof *walls);
    tdm_status st;
    if (!outs || !col || !walls) {
        st = err_set(e, TDM_E_NOMEM, "out of memory");
        goto done;
    }
    memset(t->ms, 0, (size_t)runs * t->n_nodes * sizeof *t->ms);
    if ((st = tdm_session_options_create(&o)) != TDM_OK || (st = tdm_session_options_set_devices(o, "cpu")) != TDM_OK ||
        (st = tdm_session_options_set_fusion(o, fusion)) != TDM_OK) {
        st = err_set(e, st, "calibrating: cannot set up the cpu session's options");
        goto done;
    }
    if ((st = tdm_session_create(ctx, model, o, &ss)) != TDM_OK || (st = tdm_session_set_observer(ss, sess_observe, t)) != TDM_OK) {
        err_prefix(e, "calibrating the cpu session: ");
        goto done;
    }
    for (int r = -2; r < runs; r++) {
        t->run = r;
        double t0 = now_ms();
        if ((st = tdm_session_run(ss, inputs, outs)) != TDM_OK) {
            err_set(e, st, "calibrating the cpu session: %s", tdm_session_error(ss));
            goto done;
        }
        if (r >= 0)
            walls[r] = now_ms() - t0;
        for (size_t k = 0; k < nout; k++) {
            tdm_tensor_destroy(outs[k]);
            outs[k] = NULL;
        }
    }
    t->run = -1;
    if (t->oom) {
        st = err_set(e, TDM_E_NOMEM, "out of memory");
        goto done;
    }
    for (size_t n = 0; n < t->n_nodes; n++) {
        for (int r = 0; r < runs; r++)
            col[r] = t->ms[(size_t)r * t->n_nodes + n];
        qsort(col, (size_t)runs, sizeof *col, cmp_double);
        med[n] = col[runs / 2];
    }
    qsort(walls, (size_t)runs, sizeof *walls, cmp_double);
    *run_ms = walls[runs / 2];
done:
    tdm_session_destroy(ss);
    tdm_session_options_destroy(o);
    mem_free(outs);
    mem_free(col);
    mem_free(walls);
    return st;
}

/* Whether fp (the fusion of g) swallows the node named name, which the
 * session's events gave index n. */
static int fused_away_named(const gr_graph *g, const fuse_plan *fp, size_t n, const char *name)
{
    if (n < (size_t)g->n_nodes && g->nodes[n].name && strcmp(g->nodes[n].name, name) == 0)
        return fuse_is_member(fp, (int)n);
    for (int k = 0; k < g->n_nodes; k++)
        if (g->nodes[k].name && strcmp(g->nodes[k].name, name) == 0)
            return fuse_is_member(fp, k);
    return 0;
}

/* cpu's times as the executor runs a whole model (README "Regret on a real
 * device"): every node's median time in an all-cpu session with fusion
 * (fused_ms: a node fused away costs 0, its time is in the node it was
 * fused into) and without (threaded_ms: the node unfused), both with the
 * default threads. An entry shared by several nodes gets their mean, the
 * fused_ms that of the nodes the session's fusion (graph/fuse.h) does not
 * swallow (0 when it swallows all): the planner prices what a plan's cpu
 * partitions fuse away at 0 itself and the rest at fused_ms, or at
 * threaded_ms when the whole graph's fusion swallowed it (plan_node_est_in).
 * "cpu_session" holds the runs' medians. */
static tdm_status session_figures(tdm_ctx *ctx, tdm_err *e, const tdm_model *model, const tdm_tensor *const *inputs,
                                  int repeat, char **json)
{
    const gr_graph *g = model->gm->main;
    size_t N = (size_t)g->n_nodes;
    int runs = repeat < 5 ? 5 : repeat;
    sess_times t = {N, -1, NULL, NULL, 0};
    double *med = mem_calloc(2 * N + 1, sizeof *med), run_ms[2] = {0, 0};
    cJSON *root = cJSON_Parse(*json), *nodes = root ? cJSON_GetObjectItemCaseSensitive(root, "nodes") : NULL, *en;
    tdm_status st = TDM_OK;
    fuse_plan *fp = NULL;
    t.ms = mem_calloc((size_t)runs * N + 1, sizeof *t.ms);
    t.names = mem_calloc(N + 1, sizeof *t.names);
    if (!med || !root || !nodes || !t.ms || !t.names) {
        st = err_set(e, TDM_E_NOMEM, "out of memory");
        goto done;
    }
    if ((st = fuse_plan_build_in(e, g, g->order, g->order ? g->n_nodes : 0, NULL, 0, &fp)) != TDM_OK ||
        (st = sess_measure(ctx, e, model, inputs, runs, TDM_FUSION_OBSERVED, &t, med, &run_ms[0])) != TDM_OK ||
        (st = sess_measure(ctx, e, model, inputs, runs, TDM_FUSION_OFF, &t, med + N, &run_ms[1])) != TDM_OK)
        goto done;
    cJSON_ArrayForEach(en, nodes) {
        cJSON *names = cJSON_GetObjectItemCaseSensitive(en, "names"), *nm;
        cJSON *dv = cJSON_GetObjectItemCaseSensitive(en, "devices");
        cJSON *cpu = dv ? cJSON_GetObjectItemCaseSensitive(dv, "cpu") : NULL;
        double sum[2] = {0, 0};
        int cnt = 0, runs_fused = 0;
        if (!cpu)
            continue;
        cJSON_ArrayForEach(nm, names) {
            for (size_t n = 0; cJSON_IsString(nm) && n < N; n++)
                if (t.names[n] && strcmp(t.names[n], nm->valuestring) == 0) {
                    if (!fused_away_named(g, fp, n, t.names[n])) {
                        sum[0] += med[n];
                        runs_fused++;
                    }
                    sum[1] += med[N + n];
                    cnt++;
                    break;
                }
        }
        if (cnt) {
            cJSON_AddNumberToObject(cpu, "fused_ms", runs_fused ? sum[0] / runs_fused : 0);
            cJSON_AddNumberToObject(cpu, "threaded_ms", sum[1] / cnt);
        }
    }
    {
        cJSON *cs = cJSON_AddObjectToObject(root, "cpu_session");
        cJSON_AddNumberToObject(cs, "runs", runs);
        cJSON_AddNumberToObject(cs, "fused_run_ms", run_ms[0]);
        cJSON_AddNumberToObject(cs, "unfused_run_ms", run_ms[1]);
        char *text = cJSON_Print(root);
        if (!cs || !text) {
            cJSON_free(text);
            st = err_set(e, TDM_E_NOMEM, "out of memory");
            goto done;
        }
        char *copy = mem_strdup(text);
        cJSON_free(text);
        if (!copy) {
            st = err_set(e, TDM_E_NOMEM, "out of memory");
            goto done;
        }
        mem_free(*json);
        *json = copy;
    }
done:
    fuse_plan_free(fp);
    for (size_t n = 0; t.names && n < N; n++)
        mem_free(t.names[n]);
    mem_free(t.names);
    mem_free(t.ms);
    mem_free(med);
    cJSON_Delete(root);
    return st;
}

typedef struct progress_fwd {
    tdm_progress_fn fn;
    void *user;
} progress_fwd;

static void forward(void *user, size_t done, size_t total, const char *what)
{
    const progress_fwd *f = user;
    f->fn(f->user, done, total, what);
}

tdm_status tdm_calibrate(tdm_ctx *ctx, const tdm_model *model, const tdm_session_options *opts,
                         const tdm_tensor *const *inputs, int repeat, tdm_progress_fn progress, void *user,
                         char **json)
{
    tdm_err local;
    tdm_err *e = ctx ? &ctx->err : &local;
    tdm_plan *p = NULL;
    tdm_status st;
    if (!model || !json || !inputs)
        return err_set(e, TDM_E_USAGE, "tdm_calibrate needs a model, inputs and a json pointer");
    *json = NULL;
    if ((st = tdm_plan_create(ctx, model, opts, &p)) != TDM_OK)
        return st;
    /* API inputs onto graph inputs by value id (as tdm_session_run) */
    const tdm_model *rm = p->model;
    const gr_graph *g = p->g;
    const tdm_tensor **gin = mem_calloc((size_t)g->n_inputs + 1, sizeof *gin);
    if (!gin) {
        tdm_plan_destroy(p);
        return err_set(e, TDM_E_NOMEM, "out of memory");
    }
    for (int k = 0; k < g->n_inputs; k++)
        for (size_t j = 0; j < rm->n_inputs; j++)
            if (rm->inputs[j].value == g->inputs[k])
                gin[k] = inputs[j];
    progress_fwd f = {progress, user};
    st = plan_calibrate(e, p, gin, repeat < 1 ? 1 : repeat, 1, progress ? forward : NULL, &f, json);
    if (st == TDM_OK && (st = session_figures(ctx, e, p->own_model ? p->own_model : model, inputs, repeat, json)) != TDM_OK) {
        mem_free(*json);
        *json = NULL;
    }
    mem_free((void *)gin);
    tdm_plan_destroy(p);
    return st;
}
