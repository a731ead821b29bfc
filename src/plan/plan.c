/* The planner (rules in plan.h). */
#include "plan/plan.h"
#include "plan/auto.h"
#include "plan/calib.h"
#include "core/mem.h"
#include "ops/op.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- options */

const char *plan_granularity_str(plan_granularity g)
{
    switch (g) {
    case PLAN_GRAN_OP:
        return "op";
    case PLAN_GRAN_SUBGRAPH:
        return "subgraph";
    case PLAN_GRAN_GRAPH:
        return "graph";
    case PLAN_GRAN_AUTO:
        return "auto";
    case PLAN_GRAN_GREEDY:
        return "greedy";
    }
    return "?";
}

const char *plan_fallback_str(plan_fallback f)
{
    switch (f) {
    case PLAN_FB_ALLOW:
        return "allow";
    case PLAN_FB_DENY:
        return "deny";
    case PLAN_FB_DENY_COMPUTE:
        return "deny-compute";
    }
    return "?";
}

void plan_options_init(plan_options *o)
{
    memset(o, 0, sizeof *o);
    o->granularity = PLAN_GRAN_SUBGRAPH;
    o->fallback = PLAN_FB_ALLOW;
    o->max_fallback_ratio = -1;
    o->max_boundary_bytes = -1;
    o->min_cosine = 0.99;
    o->max_abs = -1;
}

void plan_options_free(plan_options *o)
{
    if (!o)
        return;
    mem_free(o->devices);
    for (size_t i = 0; i < o->n_plugins; i++)
        mem_free(o->plugins[i]);
    mem_free(o->plugins);
    for (size_t i = 0; i < o->n_pins; i++) {
        mem_free(o->pins[i].what);
        mem_free(o->pins[i].device);
    }
    mem_free(o->pins);
    mem_free(o->calibration);
    mem_free(o->probe);
    for (size_t i = 0; i < o->n_refuse; i++) {
        mem_free(o->refuse[i].node);
        mem_free(o->refuse[i].device);
        mem_free(o->refuse[i].detail);
    }
    mem_free(o->refuse);
    mem_free(o->device_fault);
    for (size_t i = 0; i < o->n_measured; i++) {
        mem_free(o->measured[i].node);
        mem_free(o->measured[i].device);
    }
    mem_free(o->measured);
    mem_free(o->replan_reason);
    plan_options_init(o);
}

tdm_status plan_options_add_measured(plan_options *o, const char *node, const char *device, double ms, double est_ms)
{
    for (size_t i = 0; i < o->n_measured; i++)
        if (strcmp(o->measured[i].node, node) == 0 && strcmp(o->measured[i].device, device) == 0) {
            o->measured[i].ms = ms;
            o->measured[i].est_ms = est_ms;
            return TDM_OK;
        }
    if (mem_grow((void **)&o->measured, &o->cap_measured, o->n_measured + 1, sizeof *o->measured))
        return TDM_E_NOMEM;
    plan_measured *m = &o->measured[o->n_measured];
    m->node = mem_strdup(node);
    m->device = mem_strdup(device);
    m->ms = ms;
    m->est_ms = est_ms;
    if (!m->node || !m->device) {
        mem_free(m->node);
        mem_free(m->device);
        return TDM_E_NOMEM;
    }
    o->n_measured++;
    return TDM_OK;
}

tdm_status plan_options_add_refusal(plan_options *o, const char *node, const char *device, const char *detail)
{
    if (mem_grow((void **)&o->refuse, &o->cap_refuse, o->n_refuse + 1, sizeof *o->refuse))
        return TDM_E_NOMEM;
    plan_refusal *r = &o->refuse[o->n_refuse];
    r->node = mem_strdup(node);
    r->device = mem_strdup(device);
    r->detail = mem_strdup(detail);
    if (!r->node || !r->device || !r->detail) {
        mem_free(r->node);
        mem_free(r->device);
        mem_free(r->detail);
        return TDM_E_NOMEM;
    }
    o->n_refuse++;
    return TDM_OK;
}

tdm_status plan_options_copy(const plan_options *src, plan_options *dst)
{
    plan_options_init(dst);
    dst->granularity = src->granularity;
    dst->fallback = src->fallback;
    dst->fallback_set = src->fallback_set;
    dst->max_fallback_ratio = src->max_fallback_ratio;
    dst->max_boundary_bytes = src->max_boundary_bytes;
    if (src->devices && !(dst->devices = mem_strdup(src->devices)))
        goto nomem;
    dst->min_cosine = src->min_cosine;
    dst->max_abs = src->max_abs;
    if (src->calibration && !(dst->calibration = mem_strdup(src->calibration)))
        goto nomem;
    if (src->probe && !(dst->probe = mem_strdup(src->probe)))
        goto nomem;
    for (size_t i = 0; i < src->n_refuse; i++)
        if (plan_options_add_refusal(dst, src->refuse[i].node, src->refuse[i].device, src->refuse[i].detail))
            goto nomem;
    if (src->device_fault && !(dst->device_fault = mem_strdup(src->device_fault)))
        goto nomem;
    if (src->replan_reason && !(dst->replan_reason = mem_strdup(src->replan_reason)))
        goto nomem;
    for (size_t i = 0; i < src->n_measured; i++)
        if (plan_options_add_measured(dst, src->measured[i].node, src->measured[i].device, src->measured[i].ms,
                                      src->measured[i].est_ms))
            goto nomem;
    if (src->n_plugins) {
        if (!(dst->plugins = mem_calloc(src->n_plugins, sizeof *dst->plugins)))
            goto nomem;
        dst->cap_plugins = src->n_plugins;
        for (size_t i = 0; i < src->n_plugins; i++, dst->n_plugins++)
            if (!(dst->plugins[i] = mem_strdup(src->plugins[i])))
                goto nomem;
    }
    if (src->n_pins) {
        if (!(dst->pins = mem_calloc(src->n_pins, sizeof *dst->pins)))
            goto nomem;
        dst->cap_pins = src->n_pins;
        for (size_t i = 0; i < src->n_pins; i++, dst->n_pins++) {
            dst->pins[i].what = mem_strdup(src->pins[i].what);
            dst->pins[i].device = mem_strdup(src->pins[i].device);
            if (!dst->pins[i].what || !dst->pins[i].device) {
                dst->n_pins++;
                goto nomem;
            }
        }
    }
    return TDM_OK;
nomem:
    plan_options_free(dst);
    return TDM_E_NOMEM;
}

/* ------------------------------------------------------------- helpers */

const char *plan_device_name(const tdm_plan *p, int d)
{
    if (d < 0)
        return "host";
    return p->devs->items[d].name;
}

size_t plan_value_bytes(const gr_graph *g, int v, int *known)
{
    const gr_type *t = &g->values[v].type;
    size_t n = 1, b;
    *known = 0;
    if (g->values[v].init && g->values[v].init->kind == TDM_KIND_TENSOR && !g->values[v].is_input &&
        g->values[v].init->dtype != TDM_STRING) {
        *known = 1;
        return g->values[v].init->nbytes;
    }
    if (t->kind != TDM_KIND_TENSOR || t->rank < 0 || tdm_dtype_size(t->dtype) == 0)
        return 0;
    for (int d = 0; d < t->rank; d++) {
        if (t->dims[d].v < 0 || mem_mul(n, (size_t)t->dims[d].v, &n))
            return 0;
    }
    if (mem_mul(n, tdm_dtype_size(t->dtype), &b))
        return 0;
    *known = 1;
    return b;
}

static int add_id(int **ids, size_t *n, size_t *cap, int v)
{
    for (size_t i = 0; i < *n; i++)
        if ((*ids)[i] == v)
            return 0;
    if (mem_grow((void **)ids, cap, *n + 1, sizeof **ids))
        return -1;
    (*ids)[(*n)++] = v;
    return 0;
}

static int collect_outer(const gr_graph *g, const gr_graph *sub, int **ids, size_t *n, size_t *cap)
{
    for (int v = 0; v < sub->n_values; v++) {
        if (!sub->values[v].outer)
            continue;
        int id = gr_value_find(g, sub->values[v].name);
        if (id >= 0 && add_id(ids, n, cap, id))
            return -1;
    }
    for (int k = 0; k < sub->n_nodes; k++) {
        const gr_node *node = &sub->nodes[k];
        for (int a = 0; a < node->n_attrs; a++) {
            const gr_attr *at = &node->attrs[a];
            if (at->type == GA_GRAPH && at->g && collect_outer(g, at->g, ids, n, cap))
                return -1;
            for (size_t j = 0; at->type == GA_GRAPHS && j < at->n; j++)
                if (collect_outer(g, at->graphs[j], ids, n, cap))
                    return -1;
        }
    }
    return 0;
}

int plan_implicit_inputs(const gr_graph *g, const gr_node *n, int **ids)
{
    size_t cnt = 0, cap = 0;
    *ids = NULL;
    for (int a = 0; a < n->n_attrs; a++) {
        const gr_attr *at = &n->attrs[a];
        if (at->type == GA_GRAPH && at->g && collect_outer(g, at->g, ids, &cnt, &cap))
            goto nomem;
        for (size_t j = 0; at->type == GA_GRAPHS && j < at->n; j++)
            if (collect_outer(g, at->graphs[j], ids, &cnt, &cap))
                goto nomem;
    }
    return (int)cnt;
nomem:
    mem_free(*ids);
    *ids = NULL;
    return -1;
}

static int node_has_subgraphs(const gr_node *n)
{
    for (int a = 0; a < n->n_attrs; a++)
        if (n->attrs[a].type == GA_GRAPH || n->attrs[a].type == GA_GRAPHS)
            return 1;
    return 0;
}

/* ------------------------------------------------------------- state */

typedef struct pstate {
    tdm_err *e;
    tdm_plan *p;
    const gr_graph *g;
    int N, D, V, cpu;
    /* graph structure */
    int *prod;              /* value → producing node, -1 */
    int *is_weight;         /* value is a constant */
    int *rd_start, *rd;     /* CSR: distinct values node n reads (explicit + implicit) */
    int *cs_start, *cs;     /* CSR: distinct nodes reading value v */
    int *gpos;              /* node → position in g->order */
    /* verdicts */
    tdm_reason *sup;        /* n*D+d */
    const char **supdet;
    tdm_reason *over;       /* n*D+d: why the device was passed over (OK: not) */
    const char **overdet;
    double *est;            /* n*D+d: estimate, NAN: not asked yet, < 0: none */
    int *estmod;
    int *pin;               /* node → pinned device, -1 */
    const char **pinspec;
    int *brk;               /* node starts a partition (memory split) */
    /* scratch */
    int *stamp, cur_stamp;
    int *rs, *re;           /* v*D+d: residency (compute_residency) */
    size_t *vbytes;         /* static bytes of each value */
    int *vknown;
    int64_t *diff;
} pstate;

static void *arena_arr(pstate *s, size_t n, size_t size) { return plan_arena_array(&s->p->arena, n ? n : 1, size); }

static const char *arena_fmt(pstate *s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static const char *arena_fmt(pstate *s, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return plan_arena_strdup(&s->p->arena, buf);
}

static double node_est(pstate *s, int n, int d, int *modeled)
{
    size_t k = (size_t)n * (size_t)s->D + (size_t)d;
    if (isnan(s->est[k])) {
        const dev_instance *di = &s->p->devs->items[d];
        int m = 0;
        double v = -1;
        if (di->dev.iface->estimate_ms && s->sup[k] == TDM_REASON_OK)
            v = di->dev.iface->estimate_ms(di->dev.ctx, &s->p->descs[n], &m);
        s->est[k] = v >= 0 && isfinite(v) ? v : -1;
        s->estmod[k] = m != 0;
    }
    if (modeled)
        *modeled = s->estmod[k];
    return s->est[k];
}

static double copy_est(pstate *s, int from, int to, size_t bytes, int *modeled)
{
    double t = 0;
    int m = 0, any = 0;
    if (from != s->cpu) {
        const dev_instance *di = &s->p->devs->items[from];
        if (di->dev.iface->copy_ms) {
            int mm = 0;
            double v = di->dev.iface->copy_ms(di->dev.ctx, bytes, 0, &mm);
            if (v >= 0 && isfinite(v)) {
                t += v;
                m |= mm;
                any = 1;
            }
        }
    }
    if (to != s->cpu) {
        const dev_instance *di = &s->p->devs->items[to];
        if (di->dev.iface->copy_ms) {
            int mm = 0;
            double v = di->dev.iface->copy_ms(di->dev.ctx, bytes, 1, &mm);
            if (v >= 0 && isfinite(v)) {
                t += v;
                m |= mm;
                any = 1;
            }
        }
    }
    *modeled = m;
    return any ? t : 0;
}

/* Puts node n on device d and rebuilds its rejected list and reason. */
static tdm_status assign(pstate *s, int n, int d)
{
    plan_node *pn = &s->p->nodes[n];
    int D = s->D;
    plan_reject *rj = arena_arr(s, (size_t)D + 1, sizeof *rj);
    if (!rj)
        return err_set(s->e, TDM_E_NOMEM, "out of memory");
    int k = 0;
    for (int e = 0; e < D; e++) {
        size_t i = (size_t)n * (size_t)D + (size_t)e;
        if (e == d)
            continue;
        if (e > d && !(s->pin[n] == e && s->sup[i] != TDM_REASON_OK))
            continue;
        rj[k].device = e;
        if (s->over[i] != TDM_REASON_OK) {
            rj[k].reason = s->over[i];
            rj[k].detail = s->overdet[i];
        } else if (s->sup[i] != TDM_REASON_OK) {
            rj[k].reason = s->sup[i];
            rj[k].detail = s->supdet[i];
        } else if (s->pin[n] >= 0) {
            rj[k].reason = TDM_REASON_USER;
            rj[k].detail = s->pinspec[n];
        } else {
            rj[k].reason = TDM_REASON_GRANULARITY;
            rj[k].detail = "";
        }
        k++;
    }
    pn->device = d;
    pn->rejected = rj;
    pn->n_rejected = k;
    if (s->pin[n] == d) {
        pn->reason = TDM_REASON_USER;
        pn->detail = s->pinspec[n];
    } else if (k && rj[0].device < d) {
        pn->reason = rj[0].reason;
        pn->detail = rj[0].detail;
    } else {
        pn->reason = TDM_REASON_OK;
        pn->detail = "";
    }
    return TDM_OK;
}

/* ------------------------------------------------------------- structure */

static tdm_status build_structure(pstate *s)
{
    const gr_graph *g = s->g;
    int N = s->N, V = s->V;
    int **imp = NULL;
    int *nimp = NULL;
    tdm_status st = TDM_OK;
    s->prod = arena_arr(s, (size_t)V, sizeof *s->prod);
    s->is_weight = arena_arr(s, (size_t)V, sizeof *s->is_weight);
    s->gpos = arena_arr(s, (size_t)N, sizeof *s->gpos);
    s->rd_start = arena_arr(s, (size_t)N + 1, sizeof *s->rd_start);
    s->cs_start = arena_arr(s, (size_t)V + 1, sizeof *s->cs_start);
    imp = mem_calloc((size_t)N + 1, sizeof *imp);
    nimp = mem_calloc((size_t)N + 1, sizeof *nimp);
    if (!s->prod || !s->is_weight || !s->gpos || !s->rd_start || !s->cs_start || !imp || !nimp)
        goto nomem;
    for (int v = 0; v < V; v++) {
        s->prod[v] = -1;
        s->is_weight[v] = g->values[v].init && !g->values[v].is_input;
    }
    for (int n = 0; n < N; n++)
        for (int o = 0; o < g->nodes[n].n_outputs; o++)
            if (g->nodes[n].outputs[o] >= 0)
                s->prod[g->nodes[n].outputs[o]] = n;
    for (int i = 0; i < N; i++)
        s->gpos[g->order ? g->order[i] : i] = i;
    /* distinct reads per node */
    size_t total = 0;
    for (int n = 0; n < N; n++) {
        if (node_has_subgraphs(&g->nodes[n]) && (nimp[n] = plan_implicit_inputs(g, &g->nodes[n], &imp[n])) < 0)
            goto nomem;
        if (mem_add(total, (size_t)g->nodes[n].n_inputs + (size_t)nimp[n], &total))
            goto nomem;
    }
    s->rd = arena_arr(s, total, sizeof *s->rd);
    if (!s->rd)
        goto nomem;
    int k = 0;
    for (int n = 0; n < N; n++) {
        const gr_node *node = &g->nodes[n];
        s->rd_start[n] = k;
        for (int i = 0; i < node->n_inputs + nimp[n]; i++) {
            int v = i < node->n_inputs ? node->inputs[i] : imp[n][i - node->n_inputs];
            int dup = v < 0;
            for (int j = s->rd_start[n]; !dup && j < k; j++)
                dup = s->rd[j] == v;
            if (!dup)
                s->rd[k++] = v;
        }
    }
    s->rd_start[N] = k;
    /* consumers */
    int *cnt = arena_arr(s, (size_t)V + 1, sizeof *cnt);
    s->cs = arena_arr(s, (size_t)k, sizeof *s->cs);
    if (!cnt || !s->cs)
        goto nomem;
    for (int j = 0; j < k; j++)
        s->cs_start[s->rd[j] + 1]++;
    for (int v = 0; v < V; v++)
        s->cs_start[v + 1] += s->cs_start[v];
    for (int n = 0; n < N; n++)
        for (int j = s->rd_start[n]; j < s->rd_start[n + 1]; j++) {
            int v = s->rd[j];
            s->cs[s->cs_start[v] + cnt[v]++] = n;
        }
    goto done;
nomem:
    st = err_set(s->e, TDM_E_NOMEM, "out of memory");
done:
    for (int n = 0; imp && n < N; n++)
        mem_free(imp[n]);
    mem_free(imp);
    mem_free(nimp);
    return st;
}

/* Node n reads or writes a value a plugin cannot hold. */
static int needs_host_device(const pstate *s, int n)
{
    const gr_node *node = &s->g->nodes[n];
    if (node_has_subgraphs(node))
        return 1;
    for (int i = 0; i < node->n_inputs; i++)
        if (node->inputs[i] >= 0 && s->g->values[node->inputs[i]].type.kind != TDM_KIND_TENSOR)
            return 1;
    for (int i = 0; i < node->n_outputs; i++)
        if (node->outputs[i] >= 0 && s->g->values[node->outputs[i]].type.kind != TDM_KIND_TENSOR)
            return 1;
    return 0;
}

static tdm_status ask_devices(pstate *s)
{
    int N = s->N, D = s->D;
    size_t nd = (size_t)N * (size_t)D;
    s->sup = arena_arr(s, nd, sizeof *s->sup);
    s->supdet = arena_arr(s, nd, sizeof *s->supdet);
    s->over = arena_arr(s, nd, sizeof *s->over);
    s->overdet = arena_arr(s, nd, sizeof *s->overdet);
    s->est = arena_arr(s, nd, sizeof *s->est);
    s->estmod = arena_arr(s, nd, sizeof *s->estmod);
    if (!s->sup || !s->supdet || !s->over || !s->overdet || !s->est || !s->estmod)
        return err_set(s->e, TDM_E_NOMEM, "out of memory");
    for (size_t i = 0; i < nd; i++)
        s->est[i] = NAN;
    int bad = -1, n_bad = 0;
    for (int pos = 0; pos < N; pos++) {
        int n = s->g->order ? s->g->order[pos] : pos;
        int first = -1;
        for (int d = 0; d < D; d++) {
            const dev_instance *di = &s->p->devs->items[d];
            size_t i = (size_t)n * (size_t)D + (size_t)d;
            tdm_verdict v;
            memset(&v, 0, sizeof v);
            if (!di->ext && needs_host_device(s, n)) {
                v.reason = TDM_REASON_OP_UNSUPPORTED;
                snprintf(v.detail, sizeof v.detail, "%s runs through the device ABI, which takes tensor nodes without subgraphs only",
                         di->name);
            } else {
                v.reason = di->dev.iface->supports(di->dev.ctx, &s->p->descs[n], &v);
                v.detail[sizeof v.detail - 1] = '\0';
                if ((int)v.reason < 0 || (int)v.reason >= TDM_REASON_COUNT)
                    v.reason = TDM_REASON_OP_UNSUPPORTED;
            }
            s->sup[i] = v.reason;
            s->supdet[i] = "";
            if (v.reason != TDM_REASON_OK) {
                if (!v.detail[0])
                    snprintf(v.detail, sizeof v.detail, "%s cannot run %s (%s)", di->name, s->g->nodes[n].op_type,
                             tdm_reason_str(v.reason));
                if (!(s->supdet[i] = plan_arena_strdup(&s->p->arena, v.detail)))
                    return err_set(s->e, TDM_E_NOMEM, "out of memory");
            } else if (first < 0) {
                first = d;
            }
        }
        s->p->nodes[n].preferred = first;
        if (first < 0) {
            if (bad < 0)
                bad = n;
            n_bad++;
        }
    }
    if (bad >= 0) {
        char label[256];
        const char *why = s->supdet[(size_t)bad * (size_t)D + (size_t)s->cpu];
        if (n_bad > 1)
            return err_set(s->e, TDM_E_UNSUPPORTED, "node %s cannot run on any device (cpu: %s), nor can %d other nodes",
                           gr_node_label(&s->g->nodes[bad], label, sizeof label), why, n_bad - 1);
        return err_set(s->e, TDM_E_UNSUPPORTED, "node %s cannot run on any device (cpu: %s)",
                       gr_node_label(&s->g->nodes[bad], label, sizeof label), why);
    }
    return TDM_OK;
}

/* The precision trigger (plan/calib.h): devices refuse nodes whose
 * calibrated error is outside the thresholds; measured times replace
 * estimates. */
static int outside(const plan_options *o, double cosine, double max_abs)
{
    return !(cosine >= o->min_cosine) || (o->max_abs >= 0 && !(max_abs <= o->max_abs));
}

static plan_precision *add_precision(pstate *s)
{
    tdm_plan *p = s->p;
    size_t cap = p->n_precision;
    if (mem_grow((void **)&p->precision, &cap, p->n_precision + 1, sizeof *p->precision))
        return NULL;
    plan_precision *pp = &p->precision[p->n_precision++];
    memset(pp, 0, sizeof *pp);
    return pp;
}

/* The largest finite value of a device's float type (0: fp32 or wider). */
static double narrow_max(const dev_instance *di, const char **type)
{
    tdm_dtype t = di->ext ? di->ext->precision : TDM_FLOAT;
    *type = tdm_dtype_name(t);
    return t == TDM_FLOAT16 ? 65504.0 : t == TDM_BFLOAT16 ? 3.3895313892515355e38 : 0;
}

/* One source of figures: the calibration file (probe 0) or the precision
 * guard's probe (probe 1: its times are not used; overflow of the device's
 * type is checked from the reference's ranges). */
static tdm_status apply_calib(pstate *s, calib_data *cd, int probe, unsigned char *safe)
{
    tdm_plan *p = s->p;
    const plan_options *o = &p->opts;
    int N = s->N, D = s->D;
    tdm_status st = TDM_OK;
    calib_figs *figs = mem_calloc((size_t)N * (size_t)D + 1, sizeof *figs);
    unsigned char *have = mem_calloc((size_t)N * (size_t)D + 1, 1);
    if (!figs || !have) {
        st = err_set(s->e, TDM_E_NOMEM, "out of memory");
        goto done;
    }
    for (int n = 0; n < N; n++) {
        char key[128];
        int any = 0;
        if ((st = plan_node_signature(s->e, &p->descs[n], key, sizeof key, NULL)) != TDM_OK)
            goto done;
        if (probe) /* the probe's entries are keyed by node name */
            snprintf(key, sizeof key, "#%.120s", s->g->nodes[n].name);
        calib_match(cd, key);
        for (int d = 0; d < D; d++) {
            size_t k = (size_t)n * (size_t)D + (size_t)d;
            have[k] = (unsigned char)calib_find(cd, key, p->devs->items[d].name, &figs[k]);
            any |= have[k];
            if (!probe && have[k] && figs[k].has_ms && figs[k].measured && s->sup[k] == TDM_REASON_OK) {
                s->est[k] = figs[k].ms;
                s->estmod[k] = 0;
                p->calib_measured++;
            }
        }
        if (!probe)
            p->calib_missing += !any;
    }
    if (!probe)
        calib_counts(cd, &p->calib_entries, &p->calib_matched);
    for (int pos = 0; pos < N; pos++) {
        int n = s->g->order ? s->g->order[pos] : pos;
        for (int d = 0; d < s->cpu; d++) {
            size_t k = (size_t)n * (size_t)D + (size_t)d;
            const calib_figs *f = &figs[k];
            const char *tname = "";
            double tmax = narrow_max(&p->devs->items[d], &tname);
            int chain = 0, cause = PLAN_PREC_ERROR;
            double range = 0;
            if (!have[k] || s->sup[k] != TDM_REASON_OK)
                continue;
            int bad = f->has_error && outside(o, f->cosine, f->max_abs);
            /* figures within the thresholds: shown safe (the static layer) */
            if ((f->has_error || f->has_chain) && !bad && !(f->has_chain && outside(o, f->chain_cosine, f->chain_max_abs)) &&
                !(probe && f->has_range && tmax > 0 && (f->out_max > tmax || f->in_max > tmax)))
                safe[k] = 1;
            if (probe && f->has_range && tmax > 0 && f->out_max > tmax) {
                cause = PLAN_PREC_OVERFLOW;
                range = f->out_max;
            } else if (probe && bad && f->has_range && tmax > 0 && f->in_max > tmax) {
                cause = PLAN_PREC_OVERFLOW;
                range = -f->in_max; /* an input's */
            } else if (bad) {
                double fl = tmax == 65504.0 ? f->flush_fp16 : tmax > 0 ? f->flush_bf16 : 0;
                if (probe && f->has_range && fl >= 0.01) {
                    cause = PLAN_PREC_FLUSH;
                    range = fl;
                }
            } else if (f->has_chain && outside(o, f->chain_cosine, f->chain_max_abs)) {
                /* the crossing point: every producer's chain is within */
                int crossing = 1;
                for (int j = s->rd_start[n]; j < s->rd_start[n + 1] && crossing; j++) {
                    int pr = s->prod[s->rd[j]];
                    if (pr < 0)
                        continue;
                    size_t kp = (size_t)pr * (size_t)D + (size_t)d;
                    crossing = !(have[kp] && figs[kp].has_chain && outside(o, figs[kp].chain_cosine, figs[kp].chain_max_abs));
                }
                if (!crossing)
                    continue;
                chain = 1;
                double fl = tmax == 65504.0 ? f->flush_fp16 : tmax > 0 ? f->flush_bf16 : 0;
                if (probe && f->has_range && tmax > 0 && f->in_max > tmax) {
                    cause = PLAN_PREC_OVERFLOW;
                    range = -f->in_max;
                } else if (probe && f->has_range && fl >= 0.01) {
                    cause = PLAN_PREC_FLUSH;
                    range = fl;
                }
            } else {
                continue;
            }
            double cs = chain ? f->chain_cosine : f->cosine, ma = chain ? f->chain_max_abs : f->max_abs;
            double rm = chain ? f->chain_rmse : f->rmse;
            const char *dn = p->devs->items[d].name;
            const char *who = probe ? "precision guard: " : "";
            const char *what = probe ? "error" : "calibrated error";
            char lim[64] = "";
            if (o->max_abs >= 0)
                snprintf(lim, sizeof lim, ", max |diff| limit %g", o->max_abs);
            const char *det;
            if (cause == PLAN_PREC_OVERFLOW)
                det = arena_fmt(s, "%s%s max |x| %.2g overflows %s on %s (largest finite %g); cosine %.6f against cpu fp32",
                                who, range > 0 ? "output" : "input", fabs(range), tname, dn, tmax, cs);
            else if (cause == PLAN_PREC_FLUSH)
                det = arena_fmt(s, "%s%.0f%% of the output's nonzero values flush to zero in %s on %s; cosine %.6f against "
                                "cpu fp32 (minimum %.9g)", who, range * 100, tname, dn, cs, o->min_cosine);
            else if (chain)
                det = arena_fmt(s, "%s%s%saccumulated error on %s crosses the threshold at this node: cosine %.9f, "
                                "max |diff| %.4g, RMSE %.4g along the chain (alone: cosine %.9f; minimum cosine %.9g%s)",
                                who, probe ? "" : "calibrated ", probe ? "the " : "", dn, cs, ma, rm, f->cosine,
                                o->min_cosine, lim);
            else
                det = arena_fmt(s, "%s%s on %s: cosine %.9f, max |diff| %.4g, RMSE %.4g against cpu fp32 "
                                "(minimum cosine %.9g%s)", who, what, dn, cs, ma, rm, o->min_cosine, lim);
            plan_precision *pp = det ? add_precision(s) : NULL;
            if (!pp) {
                st = err_set(s->e, TDM_E_NOMEM, "out of memory");
                goto done;
            }
            pp->node = n;
            pp->device = d;
            pp->chain = chain;
            pp->cosine = cs;
            pp->max_abs = ma;
            pp->rmse = rm;
            pp->alone_cosine = f->cosine;
            pp->guard = probe;
            pp->cause = cause;
            pp->range = fabs(range);
            s->sup[k] = TDM_REASON_PRECISION;
            s->supdet[k] = det;
        }
    }
done:
    mem_free(figs);
    mem_free(have);
    return st;
}

static tdm_status apply_sources(pstate *s, unsigned char *safe);

static tdm_status apply_precision(pstate *s)
{
    tdm_plan *p = s->p;
    const plan_options *o = &p->opts;
    int N = s->N, D = s->D;
    tdm_status st;
    if (o->device_fault) {
        for (int n = 0; n < N; n++) {
            for (int d = 0; d < s->cpu; d++) {
                size_t k = (size_t)n * (size_t)D + (size_t)d;
                if (s->sup[k] != TDM_REASON_OK)
                    continue;
                s->sup[k] = TDM_REASON_DEVICE_FAULT;
                s->supdet[k] = o->device_fault;
            }
            p->nodes[n].preferred = s->cpu;
        }
        return TDM_OK;
    }
    unsigned char *safe = mem_calloc((size_t)N * (size_t)D + 1, 1);
    if (!safe)
        return err_set(s->e, TDM_E_NOMEM, "out of memory");
    st = apply_sources(s, safe);
    mem_free(safe);
    return st;
}

/* The calibration file, the guard's probe and refusals, then the static
 * layer: a device's precision-sensitive op types are refused unless a
 * source showed the node safe there (safe[n*D+d]). */
static tdm_status apply_sources(pstate *s, unsigned char *safe)
{
    tdm_plan *p = s->p;
    const plan_options *o = &p->opts;
    int N = s->N, D = s->D;
    calib_data *cd = NULL;
    tdm_status st;
    if (o->calibration) {
        if ((st = calib_load(s->e, o->calibration, &cd)) != TDM_OK)
            return st;
        st = apply_calib(s, cd, 0, safe);
        calib_free(cd);
        cd = NULL;
        if (st)
            return st;
    }
    if (o->probe) {
        if ((st = calib_load_text(s->e, "the precision guard's probe", o->probe, &cd)) != TDM_OK)
            return st;
        st = apply_calib(s, cd, 1, safe);
        calib_free(cd);
        if (st)
            return st;
    }
    /* the guard's verification refusals: (node name, device) */
    for (size_t i = 0; i < o->n_refuse; i++) {
        const plan_refusal *r = &o->refuse[i];
        for (int n = 0; n < N; n++) {
            if (strcmp(s->g->nodes[n].name, r->node) != 0)
                continue;
            for (int d = 0; d < s->cpu; d++) {
                size_t k = (size_t)n * (size_t)D + (size_t)d;
                if (strcmp(p->devs->items[d].name, r->device) != 0 || s->sup[k] != TDM_REASON_OK)
                    continue;
                plan_precision *pp = add_precision(s);
                if (!pp)
                    return err_set(s->e, TDM_E_NOMEM, "out of memory");
                pp->node = n;
                pp->device = d;
                pp->cosine = pp->alone_cosine = NAN;
                pp->max_abs = pp->rmse = NAN;
                pp->guard = 1;
                pp->cause = PLAN_PREC_VERIFY;
                s->sup[k] = TDM_REASON_PRECISION;
                s->supdet[k] = r->detail;
            }
        }
    }
    int any_sensitive = 0;
    for (int d = 0; d < s->cpu; d++) {
        const dev_ext *x = p->devs->items[d].ext;
        if (!x || !x->n_sensitive)
            continue;
        any_sensitive = 1;
        for (int n = 0; n < N; n++) {
            size_t k = (size_t)n * (size_t)D + (size_t)d;
            int listed = 0;
            for (size_t i = 0; i < x->n_sensitive && !listed; i++)
                listed = strcmp(x->sensitive[i], s->g->nodes[n].op_type) == 0;
            if (!listed || s->sup[k] != TDM_REASON_OK || safe[k])
                continue;
            const char *det = arena_fmt(s, "%s declares %s precision-sensitive: kept off its %s until calibration or the "
                                        "precision guard's probe shows this node safe there",
                                        p->devs->items[d].name, s->g->nodes[n].op_type, tdm_dtype_name(x->precision));
            plan_precision *pp = det ? add_precision(s) : NULL;
            if (!pp)
                return err_set(s->e, TDM_E_NOMEM, "out of memory");
            pp->node = n;
            pp->device = d;
            pp->cosine = pp->alone_cosine = pp->max_abs = pp->rmse = NAN;
            pp->cause = PLAN_PREC_STATIC;
            s->sup[k] = TDM_REASON_PRECISION;
            s->supdet[k] = det;
        }
    }
    /* the first device that still takes each node */
    if (!o->calibration && !o->probe && !o->n_refuse && !any_sensitive)
        return TDM_OK;
    for (int n = 0; n < N; n++) {
        int first = -1;
        for (int d = 0; d < D && first < 0; d++)
            if (s->sup[(size_t)n * (size_t)D + (size_t)d] == TDM_REASON_OK)
                first = d;
        p->nodes[n].preferred = first;
    }
    return TDM_OK;
}

static int find_device(const tdm_plan *p, const char *name);

/* Run-time measurements (opts.measured) replace the estimates of (node,
 * device) — after the calibration file's, so the latest figure wins. */
static void apply_measured(pstate *s)
{
    tdm_plan *p = s->p;
    const plan_options *o = &p->opts;
    for (size_t i = 0; i < o->n_measured; i++) {
        int d = find_device(p, o->measured[i].device), n = -1;
        for (int k = 0; k < s->N && n < 0 && d >= 0; k++)
            if (strcmp(s->g->nodes[k].name, o->measured[i].node) == 0)
                n = k;
        if (n < 0 || !(o->measured[i].ms >= 0))
            continue;
        size_t k = (size_t)n * (size_t)s->D + (size_t)d;
        if (s->sup[k] != TDM_REASON_OK)
            continue;
        s->est[k] = o->measured[i].ms;
        s->estmod[k] = 0;
        p->adapt_measured++;
    }
}

static int find_device(const tdm_plan *p, const char *name)
{
    for (size_t d = 0; d < p->devs->n; d++)
        if (strcmp(p->devs->items[d].name, name) == 0)
            return (int)d;
    return -1;
}

static tdm_status apply_pins(pstate *s)
{
    const plan_options *o = &s->p->opts;
    s->pin = arena_arr(s, (size_t)s->N, sizeof *s->pin);
    s->pinspec = arena_arr(s, (size_t)s->N, sizeof *s->pinspec);
    if (!s->pin || !s->pinspec)
        return err_set(s->e, TDM_E_NOMEM, "out of memory");
    for (int n = 0; n < s->N; n++)
        s->pin[n] = -1;
    for (size_t k = 0; k < o->n_pins; k++) {
        const plan_pin *pp = &o->pins[k];
        int d = find_device(s->p, pp->device);
        if (d < 0) {
            char list[512];
            size_t off = 0;
            list[0] = '\0';
            for (size_t j = 0; j < s->p->devs->n && off < sizeof list; j++) {
                int w = snprintf(list + off, sizeof list - off, "%s%s", j ? ", " : "", s->p->devs->items[j].name);
                if (w < 0)
                    break;
                off += (size_t)w;
            }
            return err_set(s->e, TDM_E_USAGE, "--pin %s=%s names a device that is not in the session's list (%s)",
                           pp->what, pp->device, list);
        }
        int hits = 0;
        for (int pass = 0; pass < 2; pass++) {
            /* pass 0: node names; pass 1: op types (a node pin beats an op pin) */
            for (int n = 0; n < s->N; n++) {
                const gr_node *node = &s->g->nodes[n];
                int match = pass == 0 ? strcmp(node->name, pp->what) == 0 : strcmp(node->op_type, pp->what) == 0;
                if (!match)
                    continue;
                hits++;
                if (pass == 1 && s->pinspec[n] && s->pin[n] >= 0 && strcmp(s->pinspec[n], "") != 0) {
                    /* already pinned by name or by an earlier op pin */
                    continue;
                }
                s->pin[n] = d;
                s->pinspec[n] = arena_fmt(s, "pinned to %s by --pin %s=%s", pp->device, pp->what, pp->device);
                if (!s->pinspec[n])
                    return err_set(s->e, TDM_E_NOMEM, "out of memory");
            }
        }
        if (!hits)
            return err_set(s->e, TDM_E_USAGE, "--pin %s=%s: '%s' is neither a node name nor an op type of the model",
                           pp->what, pp->device, pp->what);
    }
    return TDM_OK;
}

/* ------------------------------------------------------------- granularity */

static tdm_status initial_placement(pstate *s)
{
    for (int n = 0; n < s->N; n++) {
        int d = s->p->nodes[n].preferred;
        if (s->pin[n] >= 0 && s->sup[(size_t)n * (size_t)s->D + (size_t)s->pin[n]] == TDM_REASON_OK)
            d = s->pin[n];
        else
            s->pin[n] = s->pin[n] >= 0 ? s->pin[n] : -1;
        tdm_status st = assign(s, n, d);
        if (st)
            return st;
    }
    return TDM_OK;
}

static int is_pinned_here(const pstate *s, int n) { return s->pin[n] >= 0 && s->p->nodes[n].device == s->pin[n]; }

static tdm_status granularity_graph(pstate *s)
{
    int D = s->D, target = s->cpu;
    int unsup = 0;
    for (int d = 0; d < D; d++) {
        int all = 1;
        for (int n = 0; n < s->N && all; n++)
            all = is_pinned_here(s, n) || s->sup[(size_t)n * (size_t)D + (size_t)d] == TDM_REASON_OK;
        if (all) {
            target = d;
            break;
        }
    }
    for (int n = 0; n < s->N; n++)
        unsup += s->sup[(size_t)n * (size_t)D] != TDM_REASON_OK && !is_pinned_here(s, n);
    for (int n = 0; n < s->N; n++) {
        if (is_pinned_here(s, n))
            continue;
        for (int d = 0; d < target; d++) {
            size_t i = (size_t)n * (size_t)D + (size_t)d;
            if (s->sup[i] == TDM_REASON_OK) {
                s->over[i] = TDM_REASON_GRANULARITY;
                s->overdet[i] = arena_fmt(s,
                                          "graph granularity: %s cannot run every node (%d on %s are unsupported), "
                                          "so the whole graph runs on %s",
                                          s->p->devs->items[d].name, unsup, s->p->devs->items[0].name,
                                          s->p->devs->items[target].name);
                if (!s->overdet[i])
                    return err_set(s->e, TDM_E_NOMEM, "out of memory");
            }
        }
        tdm_status st = assign(s, n, target);
        if (st)
            return st;
    }
    return TDM_OK;
}

static tdm_status granularity_subgraph(pstate *s)
{
    int N = s->N, D = s->D;
    int *comp = mem_alloc((size_t)N * sizeof *comp + 1);
    int *queue = mem_alloc((size_t)N * sizeof *queue + 1);
    int *nbdev = mem_alloc((size_t)D * sizeof *nbdev + 1);
    int *vmark = mem_calloc((size_t)s->V + 1, sizeof *vmark);
    tdm_status st = TDM_OK;
    if (!comp || !queue || !nbdev || !vmark) {
        st = err_set(s->e, TDM_E_NOMEM, "out of memory");
        goto done;
    }
    int vstamp = 0;
    for (int round = 0; round < N + 1; round++) {
        int moved = 0;
        for (int n = 0; n < N; n++)
            comp[n] = -1;
        for (int pos = 0; pos < N; pos++) {
            int seed = s->g->order ? s->g->order[pos] : pos;
            int dev = s->p->nodes[seed].device;
            if (comp[seed] >= 0 || dev == s->cpu || is_pinned_here(s, seed))
                continue;
            /* BFS over activation edges between same-device, unpinned nodes */
            int qh = 0, qt = 0;
            queue[qt++] = seed;
            comp[seed] = seed;
            while (qh < qt) {
                int n = queue[qh++];
                for (int j = s->rd_start[n]; j < s->rd_start[n + 1]; j++) {
                    int pr = s->prod[s->rd[j]];
                    if (pr >= 0 && comp[pr] < 0 && s->p->nodes[pr].device == dev && !is_pinned_here(s, pr)) {
                        comp[pr] = seed;
                        queue[qt++] = pr;
                    }
                }
                const gr_node *node = &s->g->nodes[n];
                for (int o = 0; o < node->n_outputs; o++) {
                    int v = node->outputs[o];
                    if (v < 0)
                        continue;
                    for (int j = s->cs_start[v]; j < s->cs_start[v + 1]; j++) {
                        int c = s->cs[j];
                        if (comp[c] < 0 && s->p->nodes[c].device == dev && !is_pinned_here(s, c)) {
                            comp[c] = seed;
                            queue[qt++] = c;
                        }
                    }
                }
            }
            /* neighbours */
            for (int d = 0; d < D; d++)
                nbdev[d] = 0;
            int n_nb = 0;
            vstamp++;
            double copies = 0;
            for (int q = 0; q < qt; q++) {
                int n = queue[q];
                for (int j = s->rd_start[n]; j < s->rd_start[n + 1]; j++) {
                    int v = s->rd[j], pr = s->prod[v];
                    if (pr >= 0 && comp[pr] == seed)
                        continue;
                    if (pr >= 0) {
                        nbdev[s->p->nodes[pr].device]++;
                        n_nb++;
                    }
                    if (vmark[v] != vstamp) {
                        int known, m = 0;
                        size_t b = plan_value_bytes(s->g, v, &known);
                        vmark[v] = vstamp;
                        copies += copy_est(s, pr >= 0 ? s->p->nodes[pr].device : s->cpu, dev, b, &m);
                    }
                }
                const gr_node *node = &s->g->nodes[n];
                for (int o = 0; o < node->n_outputs; o++) {
                    int v = node->outputs[o], out_copy = 0;
                    if (v < 0)
                        continue;
                    for (int j = s->cs_start[v]; j < s->cs_start[v + 1]; j++) {
                        int c = s->cs[j];
                        if (comp[c] == seed)
                            continue;
                        nbdev[s->p->nodes[c].device]++;
                        n_nb++;
                        out_copy = 1;
                    }
                    if (out_copy) {
                        int known, m = 0;
                        size_t b = plan_value_bytes(s->g, v, &known);
                        copies += copy_est(s, dev, s->cpu, b, &m);
                    }
                }
            }
            if (!n_nb)
                continue;
            int target = -1;
            for (int d = 0; d < D; d++)
                if (nbdev[d])
                    target = target < 0 ? d : -2;
            if (target < 0 || target <= dev)
                continue;
            int ok = 1;
            for (int q = 0; q < qt && ok; q++)
                ok = s->sup[(size_t)queue[q] * (size_t)D + (size_t)target] == TDM_REASON_OK;
            if (!ok)
                continue;
            double on_dev = 0, on_target = 0;
            int have = 1;
            for (int q = 0; q < qt && have; q++) {
                double a = node_est(s, queue[q], dev, NULL), b = node_est(s, queue[q], target, NULL);
                have = a >= 0 && b >= 0;
                on_dev += a;
                on_target += b;
            }
            int move = have ? on_target <= on_dev + copies : qt < PLAN_ISLAND_NODES;
            if (!move)
                continue;
            const char *why =
                have ? arena_fmt(s,
                                 "subgraph granularity: an island of %d node%s surrounded by %s, estimated %.3f ms "
                                 "there against %.3f ms here plus %.3f ms of copies",
                                 qt, qt == 1 ? "" : "s", s->p->devs->items[target].name, on_target, on_dev, copies)
                     : arena_fmt(s,
                                 "subgraph granularity: an island of %d node%s (fewer than %d) surrounded by %s "
                                 "is kept with its neighbours",
                                 qt, qt == 1 ? "" : "s", PLAN_ISLAND_NODES, s->p->devs->items[target].name);
            if (!why) {
                st = err_set(s->e, TDM_E_NOMEM, "out of memory");
                goto done;
            }
            for (int q = 0; q < qt; q++) {
                int n = queue[q];
                for (int d = dev; d < target; d++) {
                    size_t i = (size_t)n * (size_t)D + (size_t)d;
                    if (s->sup[i] == TDM_REASON_OK) {
                        s->over[i] = TDM_REASON_GRANULARITY;
                        s->overdet[i] = why;
                    }
                }
                if ((st = assign(s, n, target)) != TDM_OK)
                    goto done;
            }
            moved = 1;
        }
        if (!moved)
            break;
    }
done:
    mem_free(comp);
    mem_free(queue);
    mem_free(nbdev);
    mem_free(vmark);
    return st;
}

/* The buffers of a cost problem (plan/auto.h) over the current graph. */
typedef struct cost_bufs {
    double *ms, *up, *down;
    unsigned char *outs;
    int *dev;
} cost_bufs;

static void cost_bufs_free(cost_bufs *b)
{
    mem_free(b->ms);
    mem_free(b->up);
    mem_free(b->down);
    mem_free(b->outs);
    mem_free(b->dev);
}

/* Allocates b and fills *pr with everything but node_ms's values: the
 * host↔device copy estimates of each known value and the graph-output
 * marks. Returns 0 on out of memory (b is then freed). */
static int cost_bufs_init(pstate *s, cost_bufs *b, plan_cost_problem *pr)
{
    int N = s->N, D = s->D, V = s->V;
    b->ms = mem_alloc((size_t)N * (size_t)D * sizeof *b->ms + sizeof *b->ms);
    b->up = mem_calloc((size_t)V * (size_t)D + 1, sizeof *b->up);
    b->down = mem_calloc((size_t)V * (size_t)D + 1, sizeof *b->down);
    b->outs = mem_calloc((size_t)V + 1, 1);
    b->dev = mem_alloc((size_t)N * sizeof *b->dev + sizeof *b->dev);
    if (!b->ms || !b->up || !b->down || !b->outs || !b->dev) {
        cost_bufs_free(b);
        return 0;
    }
    for (int v = 0; v < V; v++)
        for (int d = 0; d < D && s->vknown[v]; d++) {
            int m = 0;
            if (d == s->cpu) /* copy_est: cpu's copies are free */
                continue;
            b->up[(size_t)v * (size_t)D + (size_t)d] = copy_est(s, s->cpu, d, s->vbytes[v], &m);
            b->down[(size_t)v * (size_t)D + (size_t)d] = copy_est(s, d, s->cpu, s->vbytes[v], &m);
        }
    for (int k = 0; k < s->g->n_outputs; k++)
        if (s->g->outputs[k] >= 0)
            b->outs[s->g->outputs[k]] = 1;
    *pr = (plan_cost_problem){N, D, b->ms, V, s->prod, s->rd_start, s->rd, b->outs, b->up, b->down};
    return 1;
}

/* Granularity auto (plan.h, plan/auto.h). Nodes stay excluded from the
 * devices the memory rule moved them off (over == MEMORY) and from those a
 * pin or a precision verdict keeps them off. */
static tdm_status granularity_auto(pstate *s)
{
    int N = s->N, D = s->D;
    tdm_plan *p = s->p;
    tdm_status st = TDM_OK;
    /* COST marks of an earlier round are recomputed */
    for (size_t k = 0; k < (size_t)N * (size_t)D; k++)
        if (s->over[k] == TDM_REASON_COST)
            s->over[k] = TDM_REASON_OK;
    for (int n = 0; n < N; n++)
        for (int d = 0; d < D; d++) {
            size_t k = (size_t)n * (size_t)D + (size_t)d;
            if (s->sup[k] == TDM_REASON_OK && node_est(s, n, d, NULL) < 0) {
                p->auto_method = "subgraph (a device gives no estimates, so the subgraph rules apply)";
                return granularity_subgraph(s);
            }
        }
    cost_bufs cb;
    plan_cost_problem pr;
    if (!cost_bufs_init(s, &cb, &pr))
        return err_set(s->e, TDM_E_NOMEM, "out of memory");
    double *ms = cb.ms;
    int *dev = cb.dev;
    for (int n = 0; n < N; n++)
        for (int d = 0; d < D; d++) {
            size_t k = (size_t)n * (size_t)D + (size_t)d;
            int ok = s->sup[k] == TDM_REASON_OK && s->over[k] == TDM_REASON_OK;
            if (s->pin[n] >= 0 && s->sup[(size_t)n * (size_t)D + (size_t)s->pin[n]] == TDM_REASON_OK &&
                s->over[(size_t)n * (size_t)D + (size_t)s->pin[n]] == TDM_REASON_OK)
                ok = ok && d == s->pin[n];
            ms[k] = ok ? node_est(s, n, d, NULL) : -1;
        }
    /* a node every device refused by over-marks keeps cpu */
    for (int n = 0; n < N; n++) {
        int any = 0;
        for (int d = 0; d < D; d++)
            any |= ms[(size_t)n * (size_t)D + (size_t)d] >= 0;
        if (!any) {
            double c = node_est(s, n, s->cpu, NULL);
            ms[(size_t)n * (size_t)D + (size_t)s->cpu] = c >= 0 ? c : 0;
        }
    }
    if ((st = plan_cost_solve(s->e, &pr, dev, &p->auto_method, &p->auto_cut_ms)) != TDM_OK)
        goto done;
    p->auto_cost_ms = plan_cost_eval(&pr, dev);
    p->auto_rounds++;
    for (int n = 0; n < N; n++) {
        int d = dev[n];
        for (int e = 0; e < d; e++) {
            size_t k = (size_t)n * (size_t)D + (size_t)e;
            if (s->sup[k] != TDM_REASON_OK || s->over[k] != TDM_REASON_OK)
                continue;
            s->over[k] = TDM_REASON_COST;
            s->overdet[k] = arena_fmt(s,
                                      "granularity auto: estimated %.4f ms on %s against %.4f ms on %s; the "
                                      "placement of least estimated time (%.4f ms with copies, %s) puts it on %s",
                                      ms[(size_t)n * (size_t)D + (size_t)d], p->devs->items[d].name,
                                      ms[k], p->devs->items[e].name, p->auto_cost_ms, p->auto_method,
                                      p->devs->items[d].name);
            if (!s->overdet[k]) {
                st = err_set(s->e, TDM_E_NOMEM, "out of memory");
                goto done;
            }
        }
        if ((st = assign(s, n, d)) != TDM_OK)
            goto done;
    }
done:
    cost_bufs_free(&cb);
    return st;
}

/* ------------------------------------------------------------- order */

static tdm_status make_order(pstate *s)
{
    int N = s->N;
    int *indeg = mem_calloc((size_t)N + 1, sizeof *indeg);
    unsigned char *ready = mem_calloc((size_t)N + 1, 1);
    int *byg = mem_alloc((size_t)N * sizeof *byg + 1);
    if (!indeg || !ready || !byg) {
        mem_free(indeg);
        mem_free(ready);
        mem_free(byg);
        return err_set(s->e, TDM_E_NOMEM, "out of memory");
    }
    for (int i = 0; i < N; i++)
        byg[i] = s->g->order ? s->g->order[i] : i;
    for (int n = 0; n < N; n++)
        for (int j = s->rd_start[n]; j < s->rd_start[n + 1]; j++)
            indeg[n] += s->prod[s->rd[j]] >= 0 && s->prod[s->rd[j]] != n;
    for (int n = 0; n < N; n++)
        ready[n] = indeg[n] == 0;
    int cur = -1;
    for (int k = 0; k < N; k++) {
        int pick = -1, any = -1;
        for (int i = 0; i < N; i++) {
            int n = byg[i];
            if (ready[n] != 1)
                continue;
            if (any < 0)
                any = n;
            if (s->p->nodes[n].device == cur) {
                pick = n;
                break;
            }
        }
        if (pick < 0)
            pick = any;
        if (pick < 0) {
            mem_free(indeg);
            mem_free(ready);
            mem_free(byg);
            return err_set(s->e, TDM_E_INTERNAL, "the graph has a cycle the planner cannot order");
        }
        cur = s->p->nodes[pick].device;
        ready[pick] = 2;
        s->p->order[k] = pick;
        s->p->nodes[pick].pos = k;
        const gr_node *node = &s->g->nodes[pick];
        for (int o = 0; o < node->n_outputs; o++) {
            int v = node->outputs[o];
            int dup = v < 0;
            for (int q = 0; q < o && !dup; q++)
                dup = node->outputs[q] == v;
            if (dup)
                continue;
            for (int j = s->cs_start[v]; j < s->cs_start[v + 1]; j++) {
                int c = s->cs[j];
                if (c != pick && --indeg[c] == 0 && ready[c] == 0)
                    ready[c] = 1;
            }
        }
    }
    mem_free(indeg);
    mem_free(ready);
    mem_free(byg);
    return TDM_OK;
}

/* Where each value is resident on each device in the current order: from
 * its production there (or its first reader there) to its last reader
 * there, or to the copy that takes it elsewhere, or to the end for a graph
 * output; rs/re are positions, -1 for none. This is what the executor
 * holds, since it releases a tensor on a device after its last use there. */
static void compute_residency(pstate *s)
{
    int N = s->N, D = s->D;
    size_t nvd = (size_t)s->V * (size_t)D;
    for (size_t k = 0; k < nvd; k++)
        s->rs[k] = s->re[k] = -1;
    for (int pos = 0; pos < N; pos++) {
        int n = s->p->order[pos], d = s->p->nodes[n].device;
        for (int j = s->rd_start[n]; j < s->rd_start[n + 1]; j++) {
            int v = s->rd[j];
            size_t k = (size_t)v * (size_t)D + (size_t)d;
            int h = s->prod[v] >= 0 ? s->p->nodes[s->prod[v]].device : s->cpu;
            if (s->rs[k] < 0)
                s->rs[k] = pos;
            s->re[k] = pos;
            if (h != d) {
                size_t kh = (size_t)v * (size_t)D + (size_t)h;
                if (s->rs[kh] < 0)
                    s->rs[kh] = 0; /* a graph input or weight on the host */
                if (s->re[kh] < pos)
                    s->re[kh] = pos;
            }
        }
        const gr_node *node = &s->g->nodes[n];
        for (int o = 0; o < node->n_outputs; o++) {
            int v = node->outputs[o];
            if (v < 0)
                continue;
            size_t k = (size_t)v * (size_t)D + (size_t)d;
            if (s->rs[k] < 0)
                s->rs[k] = pos;
            if (s->re[k] < pos)
                s->re[k] = pos;
        }
    }
    for (int q = 0; q < s->g->n_outputs; q++) {
        int v = s->g->outputs[q];
        int h = s->prod[v] >= 0 ? s->p->nodes[s->prod[v]].device : s->cpu;
        size_t k = (size_t)v * (size_t)D + (size_t)h;
        if (s->rs[k] >= 0)
            s->re[k] = N - 1;
    }
}

/* Bytes value v occupies on device d: float tensors at the device's
 * storage type (an fp16 NPU holds a float tensor in half its host size). */
static size_t dev_value_bytes(const pstate *s, int v, int d)
{
    const gr_value *gv = &s->g->values[v];
    tdm_dtype dt = gv->init && gv->init->kind == TDM_KIND_TENSOR && !gv->is_input ? gv->init->dtype : gv->type.dtype;
    return dev_stored_bytes(&s->p->devs->items[d], dt, s->vbytes[v]);
}

/* Peak bytes on the device of the nodes at positions [a, b) of the order
 * (one device): the weights they read, held for the whole range (as a
 * device holds a compiled partition's weights), plus the largest sum, over
 * the range, of the other tensors resident on the device (compute_residency:
 * including tensors passing through, produced before and read after). */
static uint64_t range_peak(pstate *s, int a, int b, int *unknown)
{
    int *order = s->p->order;
    int D = s->D, d = s->p->nodes[order[a]].device;
    uint64_t weights = 0;
    int unk = 0;
    int stamp = ++s->cur_stamp;
    for (int i = a; i < b; i++) {
        int n = order[i];
        for (int j = s->rd_start[n]; j < s->rd_start[n + 1]; j++)
            if (s->is_weight[s->rd[j]])
                s->stamp[s->rd[j]] = stamp;
    }
    int len = b - a;
    for (int i = 0; i <= len; i++)
        s->diff[i] = 0;
    for (int v = 0; v < s->V; v++) {
        size_t k = (size_t)v * (size_t)D + (size_t)d;
        if (s->rs[k] < 0 || s->rs[k] > b - 1 || s->re[k] < a)
            continue;
        if (!s->vknown[v]) {
            unk = 1;
            continue;
        }
        size_t vb = dev_value_bytes(s, v, d);
        if (s->is_weight[v] && s->stamp[v] == stamp) {
            weights += vb;
            continue;
        }
        int lo = s->rs[k] > a ? s->rs[k] : a, hi = s->re[k] < b - 1 ? s->re[k] : b - 1;
        s->diff[lo - a] += (int64_t)vb;
        s->diff[hi - a + 1] -= (int64_t)vb;
    }
    int64_t live = 0, peak = 0;
    for (int i = 0; i < len; i++) {
        live += s->diff[i];
        if (live > peak)
            peak = live;
    }
    if (unknown)
        *unknown = unk;
    return weights + (uint64_t)peak;
}

static uint64_t dev_capacity(const pstate *s, int d)
{
    const dev_instance *di = &s->p->devs->items[d];
    if (!di->dev.iface->memory_capacity)
        return UINT64_MAX;
    uint64_t c = di->dev.iface->memory_capacity(di->dev.ctx);
    return c ? c : UINT64_MAX;
}

static tdm_status make_parts(pstate *s)
{
    int N = s->N;
    s->p->n_parts = 0;
    for (int i = 0; i < N; i++) {
        int n = s->p->order[i];
        int d = s->p->nodes[n].device;
        if (i == 0 || d != s->p->nodes[s->p->order[i - 1]].device || s->brk[n]) {
            plan_part *pp = &s->p->parts[s->p->n_parts++];
            memset(pp, 0, sizeof *pp);
            pp->device = d;
            pp->first = i;
        }
        s->p->parts[s->p->n_parts - 1].count++;
        s->p->nodes[n].partition = s->p->n_parts - 1;
    }
    return TDM_OK;
}

static tdm_status memory_pass(pstate *s)
{
    tdm_status st;
    memset(s->brk, 0, (size_t)s->N * sizeof *s->brk);
    for (int round = 0; round <= s->N * s->D; round++) {
        if ((st = make_order(s)) != TDM_OK || (st = make_parts(s)) != TDM_OK)
            return st;
        compute_residency(s);
        int moved = 0;
        for (int i = 0; i < s->N; i++) {
            int n = s->p->order[i], d = s->p->nodes[n].device;
            uint64_t cap = dev_capacity(s, d);
            if (cap == UINT64_MAX)
                continue;
            uint64_t need = range_peak(s, i, i + 1, NULL);
            if (need <= cap)
                continue;
            int e = d + 1;
            while (e < s->D && s->sup[(size_t)n * (size_t)s->D + (size_t)e] != TDM_REASON_OK)
                e++;
            if (e >= s->D)
                e = s->cpu;
            size_t k = (size_t)n * (size_t)s->D + (size_t)d;
            s->over[k] = TDM_REASON_MEMORY;
            const dev_ext *dx = s->p->devs->items[d].ext;
            tdm_dtype sto = dx ? dx->storage : TDM_UNDEFINED;
            s->overdet[k] = arena_fmt(s, "%llu bytes would be resident on %s while this node runs (its weights and the tensors live then%s), "
                                      "more than its capacity of %llu",
                                      (unsigned long long)need, s->p->devs->items[d].name,
                                      sto == TDM_FLOAT16 ? ", float tensors at fp16 storage"
                                      : sto == TDM_BFLOAT16 ? ", float tensors at bf16 storage" : "",
                                      (unsigned long long)cap);
            if (!s->overdet[k])
                return err_set(s->e, TDM_E_NOMEM, "out of memory");
            if (s->pin[n] == d)
                s->pin[n] = -1; /* a pin cannot beat the capacity */
            if ((st = assign(s, n, e)) != TDM_OK)
                return st;
            moved = 1;
        }
        if (!moved)
            break;
    }
    /* split partitions over capacity before the node that overflows */
    int split = 0;
    for (int q = 0; q < s->p->n_parts; q++) {
        plan_part *pp = &s->p->parts[q];
        uint64_t cap = dev_capacity(s, pp->device);
        if (cap == UINT64_MAX)
            continue;
        int a = pp->first, b = pp->first + pp->count;
        if (range_peak(s, a, b, NULL) <= cap)
            continue;
        int start = a;
        for (int i = a + 1; i < b; i++) {
            if (range_peak(s, start, i + 1, NULL) > cap) {
                s->brk[s->p->order[i]] = 1;
                start = i;
                split = 1;
            }
        }
    }
    if (split)
        return make_parts(s);
    return TDM_OK;
}

/* ------------------------------------------------------------- copies */

static tdm_status add_copy(pstate *s, size_t *cap, int v, int from, int to, int pos, int output)
{
    tdm_plan *p = s->p;
    if (mem_grow((void **)&p->copies, cap, (size_t)p->n_copies + 1, sizeof *p->copies))
        return err_set(s->e, TDM_E_NOMEM, "out of memory");
    plan_copy *c = &p->copies[p->n_copies++];
    memset(c, 0, sizeof *c);
    c->value = v;
    c->from = from;
    c->to = to;
    c->pos = pos;
    c->partition = pos < s->N ? p->nodes[p->order[pos]].partition : -1;
    c->from_partition = s->prod[v] >= 0 ? p->nodes[s->prod[v]].partition : -1;
    c->bytes = plan_value_bytes(s->g, v, &c->known);
    c->weight = s->is_weight[v];
    c->output = output;
    c->est_ms = c->known ? copy_est(s, from, to, c->bytes, &c->est_modeled) : -1;
    return TDM_OK;
}

static tdm_status make_copies(pstate *s)
{
    int V = s->V, D = s->D, N = s->N;
    size_t cap = 0;
    tdm_status st = TDM_OK;
    unsigned char *res = mem_calloc((size_t)V * (size_t)D + 1, 1);
    if (!res)
        return err_set(s->e, TDM_E_NOMEM, "out of memory");
    mem_free(s->p->copies);
    s->p->copies = NULL;
    s->p->n_copies = 0;
    for (int pos = 0; pos < N; pos++) {
        int n = s->p->order[pos], d = s->p->nodes[n].device;
        for (int j = s->rd_start[n]; j < s->rd_start[n + 1]; j++) {
            int v = s->rd[j];
            int home = s->prod[v] >= 0 ? s->p->nodes[s->prod[v]].device : s->cpu;
            size_t k = (size_t)v * (size_t)D + (size_t)d;
            if (home == d || res[k])
                continue;
            if ((st = add_copy(s, &cap, v, home, d, pos, 0)) != TDM_OK)
                goto done;
            res[k] = 1;
        }
    }
    for (int k = 0; k < s->g->n_outputs; k++) {
        int v = s->g->outputs[k];
        int home = s->prod[v] >= 0 ? s->p->nodes[s->prod[v]].device : s->cpu;
        int dup = 0;
        for (int j = 0; j < k; j++)
            dup |= s->g->outputs[j] == v;
        if (home == s->cpu || dup || res[(size_t)v * (size_t)D + (size_t)s->cpu])
            continue;
        if ((st = add_copy(s, &cap, v, home, s->cpu, N, 1)) != TDM_OK)
            goto done;
    }
done:
    mem_free(res);
    return st;
}

/* ------------------------------------------------------------- summary */

static void summarize(pstate *s)
{
    tdm_plan *p = s->p;
    p->fallback_nodes = 0;
    p->boundary_bytes = p->weight_bytes = 0;
    p->boundary_unknown = 0;
    p->est_total = p->est_copies = 0;
    p->est_modeled = 0;
    p->est_complete = 1;
    compute_residency(s);
    for (int q = 0; q < p->n_parts; q++) {
        plan_part *pp = &p->parts[q];
        int unk = 0;
        pp->peak_bytes = range_peak(s, pp->first, pp->first + pp->count, &unk);
        pp->peak_unknown = unk;
        pp->est_ms = 0;
        pp->est_nodes = 0;
    }
    for (int n = 0; n < s->N; n++) {
        plan_node *pn = &p->nodes[n];
        pn->fallback = s->D > 1 && pn->device != 0 && pn->reason != TDM_REASON_USER;
        p->fallback_nodes += (size_t)pn->fallback;
        pn->est_ms = node_est(s, n, pn->device, &pn->est_modeled);
        if (pn->est_ms >= 0) {
            p->est_total += pn->est_ms;
            p->est_modeled |= pn->est_modeled;
            p->parts[pn->partition].est_ms += pn->est_ms;
            p->parts[pn->partition].est_nodes++;
        } else {
            p->est_complete = 0;
        }
    }
    for (int q = 0; q < p->n_parts; q++) {
        /* a device's per-partition round trip (submit, synchronise) */
        const dev_ext *dx = p->devs->items[p->parts[q].device].ext;
        if (dx && dx->partition_ms > 0 && p->parts[q].device != s->cpu) {
            p->parts[q].est_ms += dx->partition_ms;
            p->est_total += dx->partition_ms;
        }
    }
    for (int c = 0; c < p->n_copies; c++) {
        plan_copy *pc = &p->copies[c];
        if (!pc->known)
            p->boundary_unknown++;
        else if (pc->weight)
            p->weight_bytes += pc->bytes;
        else
            p->boundary_bytes += pc->bytes;
        if (pc->est_ms >= 0) {
            p->est_copies += pc->est_ms;
            p->est_modeled |= pc->est_modeled;
        }
    }
    p->est_total += p->est_copies;
}

/* ------------------------------------------------------------- policy */

static tdm_status add_violation(pstate *s, size_t *cap, int node, tdm_reason reason, const char *detail)
{
    tdm_plan *p = s->p;
    if (mem_grow((void **)&p->violations, cap, p->n_violations + 1, sizeof *p->violations))
        return err_set(s->e, TDM_E_NOMEM, "out of memory");
    plan_violation *v = &p->violations[p->n_violations++];
    v->node = node;
    v->reason = reason;
    v->detail = detail ? detail : "";
    return TDM_OK;
}

static tdm_status check_policy(pstate *s)
{
    tdm_plan *p = s->p;
    size_t cap = 0;
    char sentence[1024];
    size_t off = 0;
    tdm_status st;
    sentence[0] = '\0';
#define SAY(...)                                                                                                     \
    do {                                                                                                             \
        if (off < sizeof sentence) {                                                                                 \
            int w_ = snprintf(sentence + off, sizeof sentence - off, __VA_ARGS__);                                   \
            if (w_ > 0)                                                                                              \
                off += (size_t)w_;                                                                                   \
        }                                                                                                            \
    } while (0)
    const char *first = p->devs->items[0].name;
    if (p->fallback != PLAN_FB_ALLOW) {
        size_t cnt = 0;
        for (int pos = 0; pos < s->N; pos++) {
            int n = p->order[pos];
            const plan_node *pn = &p->nodes[n];
            if (!pn->fallback)
                continue;
            int op = s->g->nodes[n].op;
            if (p->fallback == PLAN_FB_DENY_COMPUTE && op >= 0 && (op_table[op].flags & OPF_SHAPE))
                continue;
            const char *d = arena_fmt(s, "runs on %s instead of %s: %s", plan_device_name(p, pn->device), first,
                                      pn->detail && pn->detail[0] ? pn->detail : tdm_reason_str(pn->reason));
            if (!d || (st = add_violation(s, &cap, n, pn->reason, d)) != TDM_OK)
                return d ? st : err_set(s->e, TDM_E_NOMEM, "out of memory");
            cnt++;
        }
        if (cnt)
            SAY("fallback policy '%s' is violated: %zu %snode%s would not run on %s", plan_fallback_str(p->fallback),
                cnt, p->fallback == PLAN_FB_DENY_COMPUTE ? "compute " : "", cnt == 1 ? "" : "s", first);
    }
    {
        double fb = 0, all = 0;
        p->ratio_by_count = !p->est_complete;
        for (int n = 0; n < s->N; n++) {
            double w = p->ratio_by_count ? 1.0 : p->nodes[n].est_ms;
            all += w;
            if (p->nodes[n].fallback)
                fb += w;
        }
        p->fallback_ratio = all > 0 ? fb / all : 0;
    }
    if (p->opts.max_fallback_ratio >= 0 && s->D > 1) {
        if (p->fallback_ratio > p->opts.max_fallback_ratio) {
            SAY("%sthe fallback ratio %.3f (%s) exceeds --max-fallback-ratio %g", off ? "; " : "", p->fallback_ratio,
                p->ratio_by_count ? "by node count" : "by estimated time", p->opts.max_fallback_ratio);
            for (int pos = 0; pos < s->N; pos++) {
                int n = p->order[pos];
                const plan_node *pn = &p->nodes[n];
                int dup = 0;
                for (size_t k = 0; k < p->n_violations && !dup; k++)
                    dup = p->violations[k].node == n;
                if (!pn->fallback || dup)
                    continue;
                const char *d = arena_fmt(s, "runs on %s instead of %s: %s", plan_device_name(p, pn->device), first,
                                          pn->detail && pn->detail[0] ? pn->detail : tdm_reason_str(pn->reason));
                if (!d || (st = add_violation(s, &cap, n, pn->reason, d)) != TDM_OK)
                    return d ? st : err_set(s->e, TDM_E_NOMEM, "out of memory");
            }
        }
    }
    if (p->opts.max_boundary_bytes >= 0 && p->boundary_bytes > (uint64_t)p->opts.max_boundary_bytes) {
        SAY("%sthe boundary copies move %llu bytes, more than --max-boundary-bytes %lld", off ? "; " : "",
            (unsigned long long)p->boundary_bytes, (long long)p->opts.max_boundary_bytes);
        for (int c = 0; c < p->n_copies; c++) {
            const plan_copy *pc = &p->copies[c];
            if (pc->weight || !pc->known)
                continue;
            int n = pc->pos < s->N ? p->order[pc->pos] : -1;
            const char *d = arena_fmt(s, "%s '%s' (%zu bytes) from %s to %s", n >= 0 ? "reads" : "output",
                                      s->g->values[pc->value].name, pc->bytes, plan_device_name(p, pc->from),
                                      pc->output ? "host" : plan_device_name(p, pc->to));
            if (!d || (st = add_violation(s, &cap, n, n >= 0 ? p->nodes[n].reason : TDM_REASON_OK, d)) != TDM_OK)
                return d ? st : err_set(s->e, TDM_E_NOMEM, "out of memory");
        }
    }
#undef SAY
    p->policy_error = plan_arena_strdup(&p->arena, sentence);
    if (!p->policy_error)
        return err_set(s->e, TDM_E_NOMEM, "out of memory");
    return TDM_OK;
}

static tdm_status resolve_fallback(tdm_err *e, tdm_plan *p)
{
    p->fallback = p->opts.fallback;
    if (p->opts.fallback_set)
        return TDM_OK;
    const char *env = getenv("TANDEM_FALLBACK");
    if (!env || !*env)
        return TDM_OK;
    if (strcmp(env, "allow") == 0)
        p->fallback = PLAN_FB_ALLOW;
    else if (strcmp(env, "deny") == 0)
        p->fallback = PLAN_FB_DENY;
    else if (strcmp(env, "deny-compute") == 0)
        p->fallback = PLAN_FB_DENY_COMPUTE;
    else
        return err_set(e, TDM_E_USAGE, "TANDEM_FALLBACK must be allow, deny or deny-compute, not '%.64s'", env);
    return TDM_OK;
}

/* auto: search, apply the memory rule, exclude what it moved, search
 * again until it moves nothing (exclusions only grow, so this ends). */
static tdm_status auto_with_memory(pstate *s)
{
    tdm_status st;
    size_t nd = (size_t)s->N * (size_t)s->D;
    for (int round = 0; round <= s->N * s->D + 1; round++) {
        size_t before = 0, after = 0;
        for (size_t k = 0; k < nd; k++)
            before += s->over[k] == TDM_REASON_MEMORY;
        if ((st = granularity_auto(s)) != TDM_OK || (st = memory_pass(s)) != TDM_OK)
            return st;
        for (size_t k = 0; k < nd; k++)
            after += s->over[k] == TDM_REASON_MEMORY;
        s->p->auto_memory_moves = (int)after;
        if (after == before)
            break;
    }
    return TDM_OK;
}

/* Granularity g from the initial placement, the memory rule included. */
static tdm_status place(pstate *s, plan_granularity g)
{
    tdm_status st = TDM_OK;
    if (g == PLAN_GRAN_AUTO)
        return auto_with_memory(s);
    if (g == PLAN_GRAN_GRAPH)
        st = granularity_graph(s);
    else if (g == PLAN_GRAN_SUBGRAPH)
        st = granularity_subgraph(s);
    if (st || (st = memory_pass(s)) != TDM_OK)
        return st;
    /* memory moves can leave islands behind: absorb them and check again
     * (both passes only move nodes to later devices, so this ends) */
    for (int round = 0; g == PLAN_GRAN_SUBGRAPH && round < s->D * 4; round++) {
        int before = 0, after = 0;
        for (int n = 0; n < s->N; n++)
            before += s->p->nodes[n].device;
        if ((st = granularity_subgraph(s)) != TDM_OK || (st = memory_pass(s)) != TDM_OK)
            return st;
        for (int n = 0; n < s->N; n++)
            after += s->p->nodes[n].device;
        if (after == before)
            break;
    }
    return TDM_OK;
}

typedef struct place_snap {
    tdm_reason *over;
    const char **overdet;
    int *pin, *dev;
} place_snap;

static int snap_alloc(pstate *s, place_snap *x)
{
    size_t nd = (size_t)s->N * (size_t)s->D;
    x->over = arena_arr(s, nd, sizeof *x->over);
    x->overdet = arena_arr(s, nd, sizeof *x->overdet);
    x->pin = arena_arr(s, (size_t)s->N, sizeof *x->pin);
    x->dev = arena_arr(s, (size_t)s->N, sizeof *x->dev);
    return x->over && x->overdet && x->pin && x->dev ? 0 : -1;
}

static void snap_save(pstate *s, place_snap *x)
{
    size_t nd = (size_t)s->N * (size_t)s->D;
    memcpy(x->over, s->over, nd * sizeof *x->over);
    memcpy(x->overdet, s->overdet, nd * sizeof *x->overdet);
    memcpy(x->pin, s->pin, (size_t)s->N * sizeof *x->pin);
    for (int n = 0; n < s->N; n++)
        x->dev[n] = s->p->nodes[n].device;
}

static tdm_status snap_restore(pstate *s, const place_snap *x)
{
    size_t nd = (size_t)s->N * (size_t)s->D;
    tdm_status st;
    memcpy(s->over, x->over, nd * sizeof *x->over);
    memcpy(s->overdet, x->overdet, nd * sizeof *x->overdet);
    memcpy(s->pin, x->pin, (size_t)s->N * sizeof *x->pin);
    for (int n = 0; n < s->N; n++)
        if ((st = assign(s, n, x->dev[n])) != TDM_OK)
            return st;
    return TDM_OK;
}

/* The cost (plan/auto.h) of the current placement with every supported
 * device's estimate: the plan's est_total when estimates are complete. */
static double placement_cost(pstate *s)
{
    int N = s->N, D = s->D;
    cost_bufs cb;
    plan_cost_problem pr;
    if (!cost_bufs_init(s, &cb, &pr))
        return INFINITY;
    for (int n = 0; n < N; n++) {
        cb.dev[n] = s->p->nodes[n].device;
        for (int d = 0; d < D; d++) {
            double v = node_est(s, n, d, NULL);
            cb.ms[(size_t)n * (size_t)D + (size_t)d] = v >= 0 ? v : (d == cb.dev[n] ? 0 : -1);
        }
    }
    double c = plan_cost_eval(&pr, cb.dev);
    cost_bufs_free(&cb);
    return c;
}

/* auto: the min-cut search with the memory rule; the memory rule makes the
 * problem non-linear (exclusions depend on what else is resident), so the
 * placements of op, subgraph and graph are evaluated with the same cost
 * function and the cheapest wins (ties: the search's). */
static tdm_status auto_best(pstate *s)
{
    tdm_plan *p = s->p;
    place_snap base, best;
    tdm_status st;
    if (snap_alloc(s, &base) || snap_alloc(s, &best))
        return err_set(s->e, TDM_E_NOMEM, "out of memory");
    snap_save(s, &base);
    if ((st = place(s, PLAN_GRAN_AUTO)) != TDM_OK)
        return st;
    double best_cost = placement_cost(s);
    const char *method = p->auto_method;
    p->auto_cost_ms = best_cost;
    snap_save(s, &best);
    static const plan_granularity others[] = {PLAN_GRAN_OP, PLAN_GRAN_SUBGRAPH, PLAN_GRAN_GRAPH};
    int winner = -1;
    for (int k = 0; k < 3; k++) {
        if ((st = snap_restore(s, &base)) != TDM_OK || (st = place(s, others[k])) != TDM_OK)
            return st;
        double c = placement_cost(s);
        if (c < best_cost - 1e-9 * (1 + best_cost)) {
            best_cost = c;
            winner = k;
            snap_save(s, &best);
        }
    }
    if ((st = snap_restore(s, &best)) != TDM_OK || (st = memory_pass(s)) != TDM_OK)
        return st;
    if (winner >= 0) {
        p->auto_method = arena_fmt(s, "%s placement (cheaper than the %s search's %.4f ms once the memory rule applied)",
                                   plan_granularity_str(others[winner]), method, p->auto_cost_ms);
        if (!p->auto_method)
            return err_set(s->e, TDM_E_NOMEM, "out of memory");
    }
    p->auto_cost_ms = best_cost;
    return TDM_OK;
}

/* Every partition edge goes forward (the partition graph is a DAG). */
static tdm_status check_acyclic(pstate *s)
{
    for (int n = 0; n < s->N; n++)
        for (int j = s->rd_start[n]; j < s->rd_start[n + 1]; j++) {
            int pr = s->prod[s->rd[j]];
            if (pr >= 0 && s->p->nodes[pr].partition > s->p->nodes[n].partition)
                return err_set(s->e, TDM_E_INTERNAL, "partition %d reads from the later partition %d",
                               s->p->nodes[n].partition, s->p->nodes[pr].partition);
        }
    return TDM_OK;
}

/* ------------------------------------------------------------- build */

tdm_status plan_build(tdm_err *e, const tdm_model *model, const plan_options *opts, dev_list *devs, tdm_plan **out)
{
    tdm_status st;
    *out = NULL;
    if (!devs || devs->n == 0) {
        dev_list_close(devs);
        return err_set(e, TDM_E_INTERNAL, "the planner was given no devices");
    }
    tdm_plan *p = mem_calloc(1, sizeof *p);
    if (!p) {
        dev_list_close(devs);
        return err_set(e, TDM_E_NOMEM, "out of memory");
    }
    p->devs = devs;
    p->model = model;
    p->g = model->gm->main;
    plan_arena_init(&p->arena);
    if (plan_options_copy(opts, &p->opts)) {
        plan_free(p);
        return err_set(e, TDM_E_NOMEM, "out of memory");
    }
    if ((st = resolve_fallback(e, p)) != TDM_OK) {
        plan_free(p);
        return st;
    }
    const gr_graph *g = p->g;
    pstate s;
    memset(&s, 0, sizeof s);
    s.e = e;
    s.p = p;
    s.g = g;
    s.N = g->n_nodes;
    s.D = (int)devs->n;
    s.V = g->n_values;
    s.cpu = s.D - 1;
    p->n_nodes = s.N;
    p->descs = arena_arr(&s, (size_t)s.N, sizeof *p->descs);
    p->nodes = arena_arr(&s, (size_t)s.N, sizeof *p->nodes);
    p->order = arena_arr(&s, (size_t)s.N, sizeof *p->order);
    p->parts = arena_arr(&s, (size_t)s.N, sizeof *p->parts);
    s.brk = arena_arr(&s, (size_t)s.N, sizeof *s.brk);
    s.stamp = arena_arr(&s, (size_t)s.V, sizeof *s.stamp);
    s.rs = arena_arr(&s, (size_t)s.V * (size_t)s.D, sizeof *s.rs);
    s.re = arena_arr(&s, (size_t)s.V * (size_t)s.D, sizeof *s.re);
    s.vbytes = arena_arr(&s, (size_t)s.V, sizeof *s.vbytes);
    s.vknown = arena_arr(&s, (size_t)s.V, sizeof *s.vknown);
    s.diff = arena_arr(&s, (size_t)s.N + 1, sizeof *s.diff);
    if (!p->descs || !p->nodes || !p->order || !p->parts || !s.brk || !s.stamp || !s.rs || !s.re || !s.vbytes || !s.vknown || !s.diff) {
        plan_free(p);
        return err_set(e, TDM_E_NOMEM, "out of memory");
    }
    for (int v = 0; v < s.V; v++)
        s.vbytes[v] = plan_value_bytes(g, v, &s.vknown[v]);
    for (int n = 0; n < s.N; n++)
        if ((st = plan_desc_build(e, &p->arena, g, &g->nodes[n], &p->descs[n])) != TDM_OK)
            goto fail;
    if ((st = build_structure(&s)) != TDM_OK || (st = ask_devices(&s)) != TDM_OK || (st = apply_precision(&s)) != TDM_OK ||
        (apply_measured(&s), (st = apply_pins(&s)) != TDM_OK) ||
        (st = initial_placement(&s)) != TDM_OK)
        goto fail;
    if ((st = p->opts.granularity == PLAN_GRAN_AUTO ? auto_best(&s) : place(&s, p->opts.granularity)) != TDM_OK)
        goto fail;
    if ((st = check_acyclic(&s)) != TDM_OK || (st = make_copies(&s)) != TDM_OK)
        goto fail;
    summarize(&s);
    if ((st = check_policy(&s)) != TDM_OK)
        goto fail;
    *out = p;
    return TDM_OK;
fail:
    plan_free(p);
    return st;
}

void plan_free(tdm_plan *p)
{
    if (!p)
        return;
    dev_list_close(p->devs);
    tdm_model_destroy(p->own_model);
    plan_options_free(&p->opts);
    mem_free(p->copies);
    mem_free(p->violations);
    mem_free(p->precision);
    plan_arena_free(&p->arena);
    mem_free(p);
}
