/* The heterogeneous executor (see hexec.h). */
#include "run/hexec.h"
#include "core/arena.h"
#include "core/mem.h"
#include "run/exec.h"
#include "run/hpart.h"
#include "run/node.h"
#include "run/observe.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

struct exec_prog {
    const tdm_plan *plan;
    const gr_graph *g;
    int N, D, V, cpu;
    int all_cpu;             /* every node on cpu: exec_graph */
    int any_plugin;
    int *rd_start, *rd;      /* distinct values each node reads (explicit + implicit) */
    int *copy_start;         /* per pos (N + 2): index range into plan->copies */
    int *free_start, *frees; /* per pos (N + 1): residencies (v * D + d) released after the node */
    int max_in, max_out;
    pthread_mutex_t plugin_lock;
    obs_hook obs;            /* the session observer (observe.h); fn NULL: none */
    exec_cache cache;        /* all_cpu: fusion and arena kept across runs (exec.h) */
    /* otherwise: each maximal run of cpu positions (a cpu partition) runs as
     * one graph, fused and from the arena as an all-cpu plan (hpart.h) */
    hpart *parts;
    int n_parts;
    int *part_at;            /* per pos: the partition starting there, or -1 */
    arena *arena;            /* the runs' blocks (the partitions' and the devices') */
};

static int is_builtin(const exec_prog *p, int d) { return p->plan->devs->items[d].ext != NULL; }

void exec_prog_free(exec_prog *p)
{
    if (!p)
        return;
    mem_free(p->rd_start);
    mem_free(p->rd);
    mem_free(p->copy_start);
    mem_free(p->free_start);
    mem_free(p->frees);
    pthread_mutex_destroy(&p->plugin_lock);
    exec_cache_free(&p->cache);
    hpart_free(p->parts, p->n_parts);
    mem_free(p->part_at);
    arena_free(p->arena);
    mem_free(p);
}

/* The distinct values each node reads, explicit and implicit (a
 * subgraph's outer-scope names): rd[rd_start[n] .. rd_start[n + 1]). -1
 * when out of memory. */
static int prog_reads(exec_prog *p)
{
    const gr_graph *g = p->g;
    int N = p->N;
    size_t cap = 0, k = 0;
    if (!(p->rd_start = mem_calloc((size_t)N + 1, sizeof *p->rd_start)))
        return -1;
    for (int n = 0; n < N; n++) {
        const gr_node *node = &g->nodes[n];
        int *imp = NULL;
        int nimp = 0;
        p->rd_start[n] = (int)k;
        for (int a = 0; a < node->n_attrs; a++)
            if (node->attrs[a].type == GA_GRAPH || node->attrs[a].type == GA_GRAPHS) {
                if ((nimp = plan_implicit_inputs(g, node, &imp)) < 0)
                    return -1;
                break;
            }
        for (int i = 0; i < node->n_inputs + nimp; i++) {
            int v = i < node->n_inputs ? node->inputs[i] : imp[i - node->n_inputs];
            int dup = v < 0;
            for (size_t j = (size_t)p->rd_start[n]; !dup && j < k; j++)
                dup = p->rd[j] == v;
            if (dup)
                continue;
            if (mem_grow((void **)&p->rd, &cap, k + 1, sizeof *p->rd)) {
                mem_free(imp);
                return -1;
            }
            p->rd[k++] = v;
        }
        mem_free(imp);
    }
    p->rd_start[N] = (int)k;
    return 0;
}

/* The plan's copies by position (copy_start), and the residencies (v * D +
 * d) released after each position: frees[free_start[pos] ..
 * free_start[pos + 1]), after the last position that reads them (node
 * inputs, outputs, copy sources; graph outputs are kept to the end). -1
 * when out of memory. */
static int prog_frees(exec_prog *p)
{
    const tdm_plan *plan = p->plan;
    const gr_graph *g = p->g;
    int N = p->N, D = p->D;
    size_t nvd = (size_t)p->V * (size_t)D;
    p->copy_start = mem_calloc((size_t)N + 2, sizeof *p->copy_start);
    p->free_start = mem_calloc((size_t)N + 2, sizeof *p->free_start);
    int *last = mem_alloc(nvd * sizeof *last + 1);
    if (!p->copy_start || !p->free_start || !last) {
        mem_free(last);
        return -1;
    }
    /* copies by position (the plan lists them in position order) */
    for (int c = 0; c < plan->n_copies; c++)
        p->copy_start[plan->copies[c].pos + 1]++;
    for (int q = 0; q <= N; q++)
        p->copy_start[q + 1] += p->copy_start[q];
    /* last position reading each residency */
    for (size_t i = 0; i < nvd; i++)
        last[i] = -1;
    for (int pos = 0; pos < N; pos++) {
        int n = plan->order[pos], d = plan->nodes[n].device;
        for (int j = p->rd_start[n]; j < p->rd_start[n + 1]; j++)
            last[(size_t)p->rd[j] * (size_t)D + (size_t)d] = pos;
        for (int o = 0; o < g->nodes[n].n_outputs; o++) {
            int v = g->nodes[n].outputs[o];
            if (v >= 0 && last[(size_t)v * (size_t)D + (size_t)d] < pos)
                last[(size_t)v * (size_t)D + (size_t)d] = pos;
        }
        for (int c = p->copy_start[pos]; c < p->copy_start[pos + 1]; c++) {
            const plan_copy *pc = &plan->copies[c];
            size_t i = (size_t)pc->value * (size_t)D + (size_t)pc->from;
            if (last[i] < pos)
                last[i] = pos;
        }
    }
    for (int q = 0; q < g->n_outputs; q++) {
        int v = g->outputs[q];
        for (int d = 0; d < D; d++)
            if (last[(size_t)v * (size_t)D + (size_t)d] >= 0)
                last[(size_t)v * (size_t)D + (size_t)d] = INT_MAX; /* kept to the end */
    }
    for (size_t i = 0; i < nvd; i++)
        if (last[i] >= 0 && last[i] < N)
            p->free_start[last[i] + 1]++;
    for (int q = 0; q <= N; q++)
        p->free_start[q + 1] += p->free_start[q];
    size_t nf = (size_t)p->free_start[N + 1];
    p->frees = mem_alloc(nf * sizeof *p->frees + 1);
    int *fill = mem_calloc((size_t)N + 1, sizeof *fill);
    if (!p->frees || !fill) {
        mem_free(fill);
        mem_free(last);
        return -1;
    }
    for (size_t i = 0; i < nvd; i++)
        if (last[i] >= 0 && last[i] < N)
            p->frees[p->free_start[last[i]] + fill[last[i]]++] = (int)i;
    mem_free(fill);
    mem_free(last);
    return 0;
}

tdm_status exec_prog_build(tdm_err *e, const tdm_plan *plan, exec_prog **out)
{
    *out = NULL;
    exec_prog *p = mem_calloc(1, sizeof *p);
    if (!p)
        return err_set(e, TDM_E_NOMEM, "out of memory");
    if (pthread_mutex_init(&p->plugin_lock, NULL)) {
        mem_free(p);
        return err_set(e, TDM_E_NOMEM, "cannot create a mutex");
    }
    const gr_graph *g = plan->g;
    p->plan = plan;
    p->g = g;
    p->N = g->n_nodes;
    p->D = (int)plan->devs->n;
    p->V = g->n_values;
    p->cpu = p->D - 1;
    p->all_cpu = 1;
    for (int n = 0; n < p->N; n++)
        p->all_cpu &= plan->nodes[n].device == p->cpu;
    for (int d = 0; d < p->D; d++)
        p->any_plugin |= !is_builtin(p, d);
    for (int n = 0; n < p->N; n++) {
        if (g->nodes[n].n_inputs > p->max_in)
            p->max_in = g->nodes[n].n_inputs;
        if (g->nodes[n].n_outputs > p->max_out)
            p->max_out = g->nodes[n].n_outputs;
    }
    if (p->all_cpu) {
        tdm_status st = exec_cache_init(e, g, &p->cache);
        if (st) {
            exec_prog_free(p);
            return st;
        }
        *out = p;
        return TDM_OK;
    }
    if (prog_reads(p) || prog_frees(p) || !(p->arena = arena_new()) ||
        !(p->part_at = mem_alloc(((size_t)p->N + 1) * sizeof *p->part_at))) {
        exec_prog_free(p);
        return err_set(e, TDM_E_NOMEM, "out of memory");
    }
    tdm_status st = hpart_build(e, plan, p->rd_start, p->rd, p->arena, &p->parts, &p->n_parts, p->part_at);
    if (st) {
        exec_prog_free(p);
        return st;
    }
    *out = p;
    return TDM_OK;
}

/* ------------------------------------------------------------- run */

typedef struct run_state {
    const exec_prog *p;
    tdm_err *e;
    tdm_tensor **vals;
    unsigned char *owned;
    unsigned char *res;         /* v * D + d */
    size_t *resb;               /* bytes reserved on a built-in device */
    tdm_device_tensor *pbuf;    /* plugin buffers (v * D + d), NULL without plugins */
    exec_stats *st;
    const tdm_tensor **nin;     /* a node's inputs and outputs (max_in, max_out) */
    tdm_tensor **nout;
} run_state;

static const dev_instance *devi(const run_state *r, int d) { return &r->p->plan->devs->items[d]; }

static int has_builtin_residency(const run_state *r, int v)
{
    for (int d = 0; d < r->p->D; d++)
        if (r->res[(size_t)v * (size_t)r->p->D + (size_t)d] && is_builtin(r->p, d))
            return 1;
    return 0;
}

static void drop_host(run_state *r, int v)
{
    if (r->owned[v])
        tdm_tensor_destroy(r->vals[v]);
    r->vals[v] = NULL;
    r->owned[v] = 0;
}

static void release_res(run_state *r, int v, int d)
{
    size_t i = (size_t)v * (size_t)r->p->D + (size_t)d;
    if (!r->res[i])
        return;
    r->res[i] = 0;
    const dev_instance *di = devi(r, d);
    if (di->ext) {
        if (r->resb[i] && di->ext->release)
            di->ext->release(di->dev.ctx, r->resb[i]);
        r->resb[i] = 0;
        if (!has_builtin_residency(r, v) && !r->p->g->values[v].is_output)
            drop_host(r, v);
    } else if (r->pbuf) {
        if (r->pbuf[i].buf && di->dev.iface->buffer_free)
            di->dev.iface->buffer_free(di->dev.ctx, r->pbuf[i].buf);
        memset(&r->pbuf[i], 0, sizeof r->pbuf[i]);
    }
}

static tdm_status reserve(run_state *r, int v, int d, size_t bytes, const char *what)
{
    const dev_instance *di = devi(r, d);
    size_t i = (size_t)v * (size_t)r->p->D + (size_t)d;
    if (d == r->p->cpu || !di->ext || !di->ext->reserve || !bytes)
        return TDM_OK;
    /* at the device's storage type, as the planner counted it */
    tdm_dtype dt = r->vals[v] ? r->vals[v]->dtype : r->p->g->values[v].type.dtype;
    bytes = dev_stored_bytes(di, dt, bytes);
    tdm_status st = di->ext->reserve(di->dev.ctx, bytes, r->e);
    if (st) {
        err_prefix(r->e, "%s: ", what);
        r->e->status = TDM_E_DEVICE;
        return TDM_E_DEVICE;
    }
    r->resb[i] += bytes;
    return TDM_OK;
}

/* Plugin buffer → new host tensor in vals[v]. */
static tdm_status to_host(run_state *r, int v, int from)
{
    const dev_instance *di = devi(r, from);
    tdm_device_tensor *t = &r->pbuf[(size_t)v * (size_t)r->p->D + (size_t)from];
    tdm_tensor *h = NULL;
    tdm_status st = tensor_new(r->e, t->dtype, t->rank, t->dims, &h);
    if (st)
        return st;
    if (h->nbytes > t->bytes) {
        tdm_tensor_destroy(h);
        return err_set(r->e, TDM_E_DEVICE, "device '%s' returned %zu bytes for '%s', %zu expected", di->name,
                       t->bytes, r->p->g->values[v].name, h->nbytes);
    }
    if (h->nbytes && (st = di->dev.iface->copy_to_host(di->dev.ctx, h->data, t->buf, h->nbytes)) != TDM_OK) {
        tdm_tensor_destroy(h);
        return err_set(r->e, TDM_E_DEVICE, "device '%s' failed to copy '%s' to the host (%s)", di->name,
                       r->p->g->values[v].name, tdm_status_str(st));
    }
    r->vals[v] = h;
    r->owned[v] = 1;
    return TDM_OK;
}

/* Host tensor vals[v] → new buffer on plugin to. */
static tdm_status to_plugin(run_state *r, int v, int to)
{
    const dev_instance *di = devi(r, to);
    const tdm_tensor *h = r->vals[v];
    tdm_device_tensor *t = &r->pbuf[(size_t)v * (size_t)r->p->D + (size_t)to];
    if (h->kind != TDM_KIND_TENSOR || h->dtype == TDM_STRING)
        return err_set(r->e, TDM_E_DEVICE, "device '%s' cannot hold '%s' (not a numeric tensor)", di->name,
                       r->p->g->values[v].name);
    memset(t, 0, sizeof *t);
    tdm_status st = di->dev.iface->buffer_alloc(di->dev.ctx, h->nbytes ? h->nbytes : 1, &t->buf);
    if (st || !t->buf) {
        t->buf = NULL;
        return err_set(r->e, TDM_E_DEVICE, "device '%s' could not allocate %zu bytes for '%s' (%s)", di->name,
                       h->nbytes, r->p->g->values[v].name, tdm_status_str(st ? st : TDM_E_NOMEM));
    }
    t->dtype = h->dtype;
    t->rank = h->rank;
    for (int k = 0; k < h->rank; k++)
        t->dims[k] = h->dims[k];
    t->bytes = h->nbytes;
    if (h->nbytes && (st = di->dev.iface->copy_to_device(di->dev.ctx, t->buf, h->data, h->nbytes)) != TDM_OK)
        return err_set(r->e, TDM_E_DEVICE, "device '%s' failed to copy '%s' from the host (%s)", di->name,
                       r->p->g->values[v].name, tdm_status_str(st));
    return TDM_OK;
}

static tdm_status do_copy(run_state *r, const plan_copy *c)
{
    int D = r->p->D, v = c->value;
    size_t di = (size_t)v * (size_t)D + (size_t)c->to;
    int from_builtin = is_builtin(r->p, c->from), to_builtin = is_builtin(r->p, c->to);
    tdm_status st;
    int staged = 0;
    if (r->res[di])
        return TDM_OK;
    if (!from_builtin && !r->vals[v]) {
        if ((st = to_host(r, v, c->from)) != TDM_OK)
            return st;
        staged = 1;
    }
    size_t bytes = 0;
    if (r->vals[v])
        bytes = r->vals[v]->nbytes;
    else if (!from_builtin)
        bytes = r->pbuf[(size_t)v * (size_t)D + (size_t)c->from].bytes;
    if (!r->vals[v] && from_builtin) {
        /* an absent optional input: nothing to copy */
        r->res[di] = 1;
        return TDM_OK;
    }
    if (to_builtin) {
        char what[300];
        snprintf(what, sizeof what, "copying '%s' to %s", r->p->g->values[v].name, devi(r, c->to)->name);
        if ((st = reserve(r, v, c->to, bytes, what)) != TDM_OK)
            return st;
        staged = 0;
    } else {
        if ((st = to_plugin(r, v, c->to)) != TDM_OK)
            return st;
    }
    r->res[di] = 1;
    if (staged && !has_builtin_residency(r, v))
        drop_host(r, v);
    if (r->st) {
        r->st->copies++;
        if (c->weight)
            r->st->weight_bytes += bytes;
        else
            r->st->copy_bytes += bytes;
    }
    return TDM_OK;
}

static tdm_status collect_fallbacks(run_state *r, int d)
{
    const dev_instance *di = devi(r, d);
    size_t n = 0;
    if (!di->dev.iface->take_fallbacks)
        return TDM_OK;
    const tdm_device_fallback *f = di->dev.iface->take_fallbacks(di->dev.ctx, &n);
    for (size_t k = 0; f && k < n && r->st; k++) {
        if (mem_grow((void **)&r->st->fallbacks, &r->st->cap_fallbacks, r->st->n_fallbacks + 1,
                     sizeof *r->st->fallbacks))
            return err_set(r->e, TDM_E_NOMEM, "out of memory");
        exec_fallback *x = &r->st->fallbacks[r->st->n_fallbacks++];
        memset(x, 0, sizeof *x);
        x->device = mem_strdup(di->name);
        x->node = mem_strdup(f[k].node ? f[k].node : "");
        x->detail = mem_strdup(f[k].detail ? f[k].detail : "");
        x->reason = f[k].reason;
        if (!x->device || !x->node || !x->detail)
            return err_set(r->e, TDM_E_NOMEM, "out of memory");
    }
    return TDM_OK;
}

/* Runs node n on plugin device d on its resident buffers; *dev_ms (may be
 * NULL): the device's own time of the run. */
static tdm_status run_plugin_node(run_state *r, int n, int d, double *dev_ms)
{
    const exec_prog *p = r->p;
    const gr_node *node = &p->g->nodes[n];
    const dev_instance *di = devi(r, d);
    int D = p->D;
    char label[256];
    tdm_device_tensor *in = mem_calloc((size_t)node->n_inputs + 1, sizeof *in);
    tdm_device_tensor *out = mem_calloc((size_t)node->n_outputs + 1, sizeof *out);
    tdm_status st = TDM_OK;
    if (!in || !out) {
        st = err_set(r->e, TDM_E_NOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < node->n_inputs; i++)
        if (node->inputs[i] >= 0)
            in[i] = r->pbuf[(size_t)node->inputs[i] * (size_t)D + (size_t)d];
    pthread_mutex_lock((pthread_mutex_t *)&p->plugin_lock);
    st = node_run_plugin(r->e, di, node, &p->plan->descs[n], in, out, dev_ms);
    tdm_status fst = collect_fallbacks(r, d);
    pthread_mutex_unlock((pthread_mutex_t *)&p->plugin_lock);
    if (st)
        goto done;
    for (int i = 0; i < node->n_outputs; i++) {
        int v = node->outputs[i];
        if (v < 0) {
            if (out[i].buf)
                di->dev.iface->buffer_free(di->dev.ctx, out[i].buf);
            continue;
        }
        size_t k = (size_t)v * (size_t)D + (size_t)d;
        if (r->res[k])
            release_res(r, v, d);
        r->pbuf[k] = out[i];
        r->res[k] = 1;
        if (!out[i].buf && node->n_outputs)
            st = err_set(r->e, TDM_E_DEVICE, "device '%s' produced no buffer for output '%s' of node %s", di->name,
                         p->g->values[v].name, gr_node_label(node, label, sizeof label));
    }
    if (!st)
        st = fst;
done:
    mem_free(in);
    mem_free(out);
    return st;
}

static tdm_status run_builtin_node(run_state *r, exec_scope *scope, const tdm_tensor **nin, tdm_tensor **nout, int n,
                                   int d, int threads, uint64_t *rng)
{
    const exec_prog *p = r->p;
    const gr_node *node = &p->g->nodes[n];
    const dev_instance *di = devi(r, d);
    char label[256];
    tdm_status st = TDM_OK;
    for (int i = 0; i < node->n_inputs; i++) {
        int v = node->inputs[i];
        nin[i] = v >= 0 ? r->vals[v] : NULL;
        if (v >= 0 && !nin[i] && !p->g->values[v].type.optional && !p->g->values[v].is_input)
            return err_set(r->e, TDM_E_INTERNAL, "node %s: input '%s' has no value",
                           gr_node_label(node, label, sizeof label), p->g->values[v].name);
    }
    st = node_run_builtin(r->e, di, node, scope, nin, nout, threads, rng);
    if (st) {
        if (st == TDM_E_DEVICE)
            err_prefix(r->e, "device '%s' failed on node %s: ", di->name, gr_node_label(node, label, sizeof label));
        else
            err_prefix(r->e, "node %s: ", gr_node_label(node, label, sizeof label));
        return st;
    }
    for (int i = 0; i < node->n_outputs; i++) {
        int v = node->outputs[i];
        if (v < 0) {
            tdm_tensor_destroy(nout[i]);
            nout[i] = NULL;
            continue;
        }
        size_t k = (size_t)v * (size_t)p->D + (size_t)d;
        if (r->vals[v])
            drop_host(r, v);
        r->vals[v] = nout[i];
        r->owned[v] = 1;
        nout[i] = NULL;
        r->res[k] = 1;
        if (d != p->cpu) {
            char what[300];
            snprintf(what, sizeof what, "device '%s' failed on node %s", di->name,
                     gr_node_label(node, label, sizeof label));
            if ((st = reserve(r, v, d, r->vals[v]->nbytes, what)) != TDM_OK)
                goto fail;
        }
    }
    return TDM_OK;
fail:
    for (int i = 0; i < node->n_outputs; i++) {
        tdm_tensor_destroy(nout[i]);
        nout[i] = NULL;
    }
    return st;
}

/* The run's tables, and the values it starts from: initializers and the
 * inputs, resident on cpu. out[] cleared. */
static tdm_status run_open(run_state *r, const exec_prog *p, tdm_err *e, exec_stats *stats,
                           const tdm_tensor *const *in, tdm_tensor **out)
{
    const gr_graph *g = p->g;
    int D = p->D, V = p->V;
    size_t nvd = (size_t)V * (size_t)D;
    memset(r, 0, sizeof *r);
    r->p = p;
    r->e = e;
    r->st = stats;
    r->vals = mem_calloc((size_t)V + 1, sizeof *r->vals);
    r->owned = mem_calloc((size_t)V + 1, 1);
    r->res = mem_calloc(nvd + 1, 1);
    r->resb = mem_calloc(nvd + 1, sizeof *r->resb);
    if (p->any_plugin)
        r->pbuf = mem_calloc(nvd + 1, sizeof *r->pbuf);
    r->nin = mem_calloc((size_t)p->max_in + 1, sizeof *r->nin);
    r->nout = mem_calloc((size_t)p->max_out + 1, sizeof *r->nout);
    for (int k = 0; k < g->n_outputs; k++)
        out[k] = NULL;
    if (!r->vals || !r->owned || !r->res || !r->resb || (p->any_plugin && !r->pbuf) || !r->nin || !r->nout)
        return err_set(e, TDM_E_NOMEM, "out of memory");
    for (int v = 0; v < V; v++) {
        if (g->values[v].init) {
            r->vals[v] = g->values[v].init;
            r->res[(size_t)v * (size_t)D + (size_t)p->cpu] = 1;
        }
    }
    for (int k = 0; k < g->n_inputs; k++) {
        int v = g->inputs[k];
        if (in[k])
            r->vals[v] = (tdm_tensor *)in[k];
        else if (!g->values[v].init && !g->values[v].type.optional)
            return err_set(e, TDM_E_INPUT, "input '%s' was not given", g->values[v].name);
        r->res[(size_t)v * (size_t)D + (size_t)p->cpu] = 1;
    }
    return TDM_OK;
}

/* Which of a position's copies run_copies makes. */
enum { COPIES_ALL, COPIES_TO_CPU, COPIES_NOT_TO_CPU };

/* The plan's copies before position pos (pos == N: the outputs'), all or
 * only those to cpu or to another device (which). */
static tdm_status run_copies(run_state *r, int pos, int which)
{
    const exec_prog *p = r->p;
    for (int c = p->copy_start[pos]; c < p->copy_start[pos + 1]; c++) {
        if (which != COPIES_ALL && (p->plan->copies[c].to == p->cpu) != (which == COPIES_TO_CPU))
            continue;
        obs_mark om;
        if (p->obs.fn)
            obs_begin(&om, r->st);
        tdm_status st = do_copy(r, &p->plan->copies[c]);
        if (st)
            return st;
        if (p->obs.fn)
            obs_copy(&p->obs, &p->plan->copies[c], &om, r->st);
    }
    return TDM_OK;
}

/* Releases the residencies whose last reader is position pos. */
static void run_frees(run_state *r, int pos)
{
    const exec_prog *p = r->p;
    for (int f = p->free_start[pos]; f < p->free_start[pos + 1]; f++) {
        int i = p->frees[f];
        int v = i / p->D, dd = i % p->D;
        if (dd == p->cpu && !r->res[i])
            continue;
        if (dd == p->cpu) {
            r->res[i] = 0;
            if (!has_builtin_residency(r, v) && !p->g->values[v].is_output)
                drop_host(r, v);
        } else {
            release_res(r, v, dd);
        }
    }
}

/* Releases every device residency, the values the run owns and its tables. */
static void run_close(run_state *r)
{
    const exec_prog *p = r->p;
    size_t nvd = (size_t)p->V * (size_t)p->D;
    if (r->res) {
        for (size_t i = 0; i < nvd; i++) {
            int d = (int)(i % (size_t)p->D);
            if (r->res[i] && d != p->cpu) {
                const dev_instance *di = devi(r, d);
                if (di->ext) {
                    if (r->resb[i] && di->ext->release)
                        di->ext->release(di->dev.ctx, r->resb[i]);
                } else if (r->pbuf && r->pbuf[i].buf) {
                    di->dev.iface->buffer_free(di->dev.ctx, r->pbuf[i].buf);
                }
            }
        }
    }
    if (r->vals)
        for (int v = 0; v < p->V; v++)
            if (r->owned[v])
                tdm_tensor_destroy(r->vals[v]);
    mem_free(r->vals);
    mem_free(r->owned);
    mem_free(r->res);
    mem_free(r->resb);
    mem_free(r->pbuf);
    mem_free((void *)r->nin);
    mem_free(r->nout);
}

/* Reports plugin node n to the observer. Unless the session runs fused even
 * under an observer (TDM_FUSION_OBSERVED), its outputs are copied to the
 * host for the event, as every other node's are (tdm_event: compare, report
 * and trace read them), and dropped again; the node's interval ends before
 * the copies. A copy that fails leaves that output NULL and the run as it was. */
static void observe_plugin_node(run_state *r, int n, int d, uint64_t t0, double dev_ms)
{
    const exec_prog *p = r->p;
    const gr_node *node = &p->g->nodes[n];
    uint64_t t1 = obs_now_ns();
    if (p->cache.fusion == TDM_FUSION_OBSERVED || !r->pbuf) {
        obs_node_ended(&p->obs, n, d, t0, t1, NULL, dev_ms);
        return;
    }
    tdm_err keep = *r->e;
    for (int i = 0; i < node->n_outputs; i++) {
        int v = node->outputs[i];
        if (v < 0 || r->vals[v] || !r->pbuf[(size_t)v * (size_t)p->D + (size_t)d].buf)
            continue;
        if (to_host(r, v, d) == TDM_OK)
            r->owned[v] = 2; /* 2: staged for the observer only */
    }
    *r->e = keep;
    obs_node_ended(&p->obs, n, d, t0, t1, r->vals, dev_ms);
    for (int i = 0; i < node->n_outputs; i++) {
        int v = node->outputs[i];
        if (v >= 0 && r->owned[v] == 2) {
            tdm_tensor_destroy(r->vals[v]);
            r->vals[v] = NULL;
            r->owned[v] = 0;
        }
    }
}

/* Runs cpu partition hp: the copies to the host it waits for, its graph
 * (hpart_run), then, position by position, the other copies planned
 * inside it (to devices: for values it produced) and the releases. */
static tdm_status run_part(run_state *r, const hpart *hp, int threads, uint64_t *rng)
{
    const exec_prog *p = r->p;
    tdm_status st;
    for (int pos = hp->start; pos < hp->end; pos++)
        if ((st = run_copies(r, pos, pos == hp->start ? COPIES_ALL : COPIES_TO_CPU)) != TDM_OK)
            return st;
    int n_out = hp->g->n_outputs;
    tdm_tensor *small[16], **out = small;
    if (n_out > 16 && !(out = mem_calloc((size_t)n_out, sizeof *out)))
        return err_set(r->e, TDM_E_NOMEM, "out of memory");
    st = hpart_run(r->e, hp, r->vals, out, threads, rng, p->obs.fn ? &p->obs : NULL);
    for (int k = 0; !st && k < n_out; k++) {
        int v = hp->out_vals[k];
        if (r->vals[v])
            drop_host(r, v);
        r->vals[v] = out[k];
        r->owned[v] = 1;
        r->res[(size_t)v * (size_t)p->D + (size_t)p->cpu] = 1;
    }
    if (out != small)
        mem_free(out);
    for (int pos = hp->start; !st && pos < hp->end; pos++) {
        if (pos > hp->start && (st = run_copies(r, pos, COPIES_NOT_TO_CPU)) != TDM_OK)
            break;
        if (r->st) {
            r->st->nodes++;
            r->st->nodes_by_device[p->cpu]++;
        }
        run_frees(r, pos);
    }
    return st;
}

tdm_status exec_prog_run(tdm_err *e, const exec_prog *p, const tdm_tensor *const *in, tdm_tensor **out, int threads,
                         exec_stats *stats)
{
    const gr_graph *g = p->g;
    const tdm_plan *plan = p->plan;
    int N = p->N, D = p->D;
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    tdm_status st = TDM_OK;
    if (stats) {
        memset(stats, 0, sizeof *stats);
        stats->nodes_by_device = mem_calloc((size_t)D + 1, sizeof *stats->nodes_by_device);
        if (!stats->nodes_by_device)
            return err_set(e, TDM_E_NOMEM, "out of memory");
        stats->n_devices = (size_t)D;
    }
    uint64_t obs_t0 = p->obs.fn ? obs_now_ns() : 0;
    if (p->all_cpu) {
        st = exec_graph_cached(e, g, in, out, threads, &rng, &p->obs, &p->cache);
        obs_run(&p->obs, obs_t0, st);
        if (!st && stats) {
            stats->nodes = (size_t)N;
            stats->nodes_by_device[p->cpu] = (size_t)N;
        }
        return st;
    }
    run_state r;
    exec_scope scope;
    arena *prev_arena = arena_enter(p->arena);
    if ((st = run_open(&r, p, e, stats, in, out)) != TDM_OK)
        goto done;
    exec_scope_init(&scope, g, r.vals, r.owned, NULL, e, threads, &rng);
    for (int pos = 0; pos <= N; pos++) {
        if (pos < N && p->part_at[pos] >= 0) {
            const hpart *hp = &p->parts[p->part_at[pos]];
            if ((st = run_part(&r, hp, threads, &rng)) != TDM_OK)
                goto done;
            pos = hp->end - 1;
            continue;
        }
        if ((st = run_copies(&r, pos, COPIES_ALL)) != TDM_OK)
            goto done;
        if (pos == N)
            break;
        int n = plan->order[pos], d = plan->nodes[n].device;
        uint64_t node_t0 = p->obs.fn ? obs_now_ns() : 0;
        /* A device with its own timer (ABI version 2, last_run_ms; OpenCL's
         * run() only enqueues) is waited for under an observer, so that
         * profile and trace show the node's real duration. */
        double dev_ms = -1;
        if (is_builtin(p, d))
            st = run_builtin_node(&r, &scope, r.nin, r.nout, n, d, threads, &rng);
        else
            st = run_plugin_node(&r, n, d, p->obs.fn ? &dev_ms : NULL);
        if (st && st == TDM_E_DEVICE && p->obs.fn)
            obs_fault(&p->obs, n, d, node_t0, e->msg);
        if (st)
            goto done;
        if (p->obs.fn && is_builtin(p, d))
            obs_node_timed(&p->obs, n, d, node_t0, r.vals, dev_ms);
        else if (p->obs.fn)
            observe_plugin_node(&r, n, d, node_t0, dev_ms);
        if (stats) {
            stats->nodes++;
            stats->nodes_by_device[d]++;
        }
        run_frees(&r, pos);
    }
    st = exec_hand_outputs(e, g, r.vals, r.owned, out);
done:
    run_close(&r);
    arena_leave(prev_arena);
    obs_run(&p->obs, obs_t0, st);
    return st;
}

void exec_stats_free(exec_stats *s)
{
    if (!s)
        return;
    for (size_t k = 0; k < s->n_fallbacks; k++) {
        mem_free(s->fallbacks[k].device);
        mem_free(s->fallbacks[k].node);
        mem_free(s->fallbacks[k].detail);
    }
    mem_free(s->fallbacks);
    mem_free(s->nodes_by_device);
    memset(s, 0, sizeof *s);
}

char *exec_stats_json(const exec_stats *s, const tdm_plan *plan)
{
    cJSON *o = cJSON_CreateObject(), *nb, *fb;
    if (!o)
        return NULL;
    int ok = cJSON_AddNumberToObject(o, "nodes", (double)s->nodes) && cJSON_AddNumberToObject(o, "copies", (double)s->copies) &&
             cJSON_AddNumberToObject(o, "boundary_bytes", (double)s->copy_bytes) &&
             cJSON_AddNumberToObject(o, "weight_bytes", (double)s->weight_bytes) &&
             (nb = cJSON_AddObjectToObject(o, "nodes_by_device")) != NULL &&
             (fb = cJSON_AddArrayToObject(o, "device_fallbacks")) != NULL;
    for (size_t d = 0; ok && d < s->n_devices; d++)
        if (s->nodes_by_device[d])
            ok = cJSON_AddNumberToObject(nb, plan_device_name(plan, (int)d), (double)s->nodes_by_device[d]) != NULL;
    for (size_t k = 0; ok && k < s->n_fallbacks; k++) {
        cJSON *x = cJSON_CreateObject();
        ok = x && cJSON_AddItemToArray(fb, x) && cJSON_AddStringToObject(x, "device", s->fallbacks[k].device) &&
             cJSON_AddStringToObject(x, "node", s->fallbacks[k].node) &&
             cJSON_AddStringToObject(x, "reason", tdm_reason_str(s->fallbacks[k].reason)) &&
             cJSON_AddStringToObject(x, "detail", s->fallbacks[k].detail);
    }
    char *txt = ok ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    if (!txt)
        return NULL;
    char *r = mem_strdup(txt);
    cJSON_free(txt);
    return r;
}

const hpart *exec_prog_parts(const exec_prog *p, int *n)
{
    *n = p->n_parts;
    return p->parts;
}

void exec_prog_get_observer(const exec_prog *p, tdm_observer_fn *fn, void **user)
{
    *fn = p->obs.fn;
    *user = p->obs.user;
}

void exec_prog_set_fusion(exec_prog *p, int mode)
{
    if (!p)
        return;
    p->cache.fusion = mode;
    for (int k = 0; k < p->n_parts; k++)
        p->parts[k].cache.fusion = mode;
}

void exec_prog_set_observer(exec_prog *p, tdm_observer_fn fn, void *user)
{
    p->obs.fn = fn;
    p->obs.user = user;
    p->obs.plan = p->plan;
}
