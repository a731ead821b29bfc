/* Run-time adaptation: the circuit breaker, re-planning with measured
 * costs and the plan cache (rules in adapt.h). */
#define _POSIX_C_SOURCE 200809L
#include "run/adapt.h"
#include "run/observe.h"
#include "run/exec.h"
#include "core/mem.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

struct adapt_variant {
    char *sig;               /* shape signature; "" for the session's plan */
    tdm_model *model;        /* owned; NULL: the session's */
    tdm_plan *plan;          /* current */
    exec_prog *prog;
    int own;                 /* plan and prog owned (not the session's) */
    tdm_plan **old;          /* replaced plans and programs, kept until the end */
    exec_prog **old_prog;
    size_t n_old, cap_old, cap_old_prog;
    int busy;                /* runs in flight */
    uint64_t last_use, runs, hits, last_replan;
    int replanned;
    /* the watch, per partition / node of plan */
    int *streak;
    double *base;            /* per partition: the baseline (ms) */
    double *acc;             /* per node: measured ms summed over its partition's streak */
    plan_options meas;       /* measured figures so far (only .measured used) */
};

/* The measurements of the run in flight on this thread (the observer hook
 * adds to it). */
typedef struct run_rec {
    adapt_state *a;
    const tdm_plan *plan;
    double *node_ms;         /* per node, < 0: not measured */
    int active;
} run_rec;

static _Thread_local run_rec *cur_rec;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int perf_on(const adapt_state *a) { return a->o.slow_ratio > 0 && a->o.slow_runs > 0; }

/* ------------------------------------------------------------- observer */

/* The hook installed on every program when re-planning is on: measures
 * nodes for the run in flight, then forwards to the session observer. */
static void hook(void *user, const tdm_event *ev)
{
    adapt_state *a = user;
    run_rec *r = cur_rec;
    if (r && r->active && r->a == a && ev->kind == TDM_EVENT_NODE && ev->node_index < (size_t)r->plan->n_nodes) {
        const tdm_plan *p = r->plan;
        int n = (int)ev->node_index, d = p->nodes[n].device;
        const dev_instance *di = &p->devs->items[d];
        if (d != (int)p->devs->n - 1) {
            double ms = -1;
            if (ev->device_ms >= 0) {
                ms = ev->device_ms;
            } else if (di->kind == DEV_KIND_VNPU && di->dev.iface->estimate_ms) {
                int m = 0;
                ms = di->dev.iface->estimate_ms(di->dev.ctx, &p->descs[n], &m);
            }
            if (!(ms >= 0) || !isfinite(ms))
                ms = (double)(ev->end_ns - ev->start_ns) / 1e6;
            r->node_ms[n] = ms * dev_slowdown(di);
        }
    }
    if (a->user_fn)
        a->user_fn(a->user_data, ev);
}

static void install(adapt_state *a, exec_prog *p)
{
    if (!p)
        return;
    if (perf_on(a))
        exec_prog_set_observer(p, hook, a);
    else
        exec_prog_set_observer(p, a->user_fn, a->user_data);
}

void adapt_set_observer(adapt_state *a, tdm_observer_fn fn, void *user)
{
    if (a->have_lock)
        pthread_mutex_lock(&a->lock);
    a->user_fn = fn;
    a->user_data = user;
    install(a, a->fallback_prog);
    for (size_t i = 0; i < a->n_vars; i++) {
        adapt_variant *v = a->vars[i];
        install(a, v->prog);
        for (size_t k = 0; k < v->n_old; k++)
            install(a, v->old_prog[k]);
    }
    if (a->have_lock)
        pthread_mutex_unlock(&a->lock);
}

struct adapt_variant;
static int adopt_locked(adapt_state *a, adapt_variant *v, tdm_plan *plan, exec_prog *prog);

static void emit_replan(adapt_state *a, const char *device, const char *detail)
{
    if (!a->user_fn)
        return;
    tdm_event ev;
    memset(&ev, 0, sizeof ev);
    ev.kind = TDM_EVENT_REPLAN;
    ev.name = ev.op_type = ev.from = ev.direction = ev.reason = ev.preferred = "";
    ev.device = device;
    ev.detail = detail;
    ev.modeled_ms = -1;
    ev.device_ms = -1;
    ev.start_ns = ev.end_ns = (uint64_t)(now_ms() * 1e6);
    a->user_fn(a->user_data, &ev);
}

/* ------------------------------------------------------------- variants */

static tdm_status watch_reset(adapt_variant *v)
{
    const tdm_plan *p = v->plan;
    mem_free(v->streak);
    mem_free(v->base);
    mem_free(v->acc);
    v->streak = mem_calloc((size_t)p->n_parts + 1, sizeof *v->streak);
    v->base = mem_calloc((size_t)p->n_parts + 1, sizeof *v->base);
    v->acc = mem_calloc((size_t)p->n_nodes + 1, sizeof *v->acc);
    if (!v->streak || !v->base || !v->acc)
        return TDM_E_NOMEM;
    for (int q = 0; q < p->n_parts; q++)
        v->base[q] = p->parts[q].est_nodes ? p->parts[q].est_ms : -1;
    return TDM_OK;
}

static void variant_free(adapt_variant *v)
{
    if (!v)
        return;
    for (size_t k = 0; k < v->n_old; k++) {
        exec_prog_free(v->old_prog[k]);
        plan_free(v->old[k]);
    }
    mem_free(v->old);
    mem_free(v->old_prog);
    if (v->own) {
        exec_prog_free(v->prog);
        plan_free(v->plan);
    }
    tdm_model_destroy(v->model);
    mem_free(v->streak);
    mem_free(v->base);
    mem_free(v->acc);
    plan_options_free(&v->meas);
    mem_free(v->sig);
    mem_free(v);
}

static adapt_variant *variant_new(const char *sig)
{
    adapt_variant *v = mem_calloc(1, sizeof *v);
    if (!v)
        return NULL;
    plan_options_init(&v->meas);
    if (!(v->sig = mem_strdup(sig))) {
        mem_free(v);
        return NULL;
    }
    return v;
}

static int vars_push(adapt_state *a, adapt_variant *v)
{
    if (mem_grow((void **)&a->vars, &a->cap_vars, a->n_vars + 1, sizeof *a->vars))
        return -1;
    a->vars[a->n_vars++] = v;
    return 0;
}

static cJSON *history(adapt_state *a)
{
    if (!a->history)
        a->history = cJSON_CreateArray();
    return a->history;
}

tdm_status adapt_init(tdm_err *e, adapt_state *a, const adapt_opts *o, const tdm_plan *base_plan, exec_prog *base_prog,
                      adapt_build_fn build, void *build_user)
{
    memset(a, 0, sizeof *a);
    a->o = *o;
    a->on = o->faults > 0;
    a->base_plan = base_plan;
    a->base_prog = base_prog;
    a->build = build;
    a->build_user = build_user;
    a->fusion = TDM_FUSION_ON;
    if (a->o.min_runs < 1)
        a->o.min_runs = 1;
    if (pthread_mutex_init(&a->lock, NULL))
        return err_set(e, TDM_E_NOMEM, "cannot create a mutex");
    a->have_lock = 1;
    adapt_variant *v = variant_new("");
    if (!v || vars_push(a, v)) {
        variant_free(v);
        adapt_free(a);
        return err_set(e, TDM_E_NOMEM, "out of memory");
    }
    v->plan = (tdm_plan *)base_plan;
    v->prog = base_prog;
    if (perf_on(a) && watch_reset(v)) {
        adapt_free(a);
        return err_set(e, TDM_E_NOMEM, "out of memory");
    }
    if (a->on && !(a->times = mem_calloc((size_t)o->faults, sizeof *a->times))) {
        adapt_free(a);
        return err_set(e, TDM_E_NOMEM, "out of memory");
    }
    install(a, base_prog);
    return TDM_OK;
}

void adapt_free(adapt_state *a)
{
    if (!a)
        return;
    exec_prog_free(a->fallback_prog);
    plan_free(a->fallback);
    mem_free(a->times);
    for (size_t i = 0; i < a->n_vars; i++)
        variant_free(a->vars[i]);
    mem_free(a->vars);
    cJSON_Delete(a->history);
    if (a->have_lock)
        pthread_mutex_destroy(&a->lock);
    memset(a, 0, sizeof *a);
}

void adapt_set_fusion(adapt_state *a, int mode) { a->fusion = mode; }

const tdm_model *adapt_variant_model(const adapt_variant *v) { return v ? v->model : NULL; }

const tdm_plan *adapt_current_plan(adapt_state *a)
{
    const tdm_plan *p = a->base_plan;
    if (!a->have_lock)
        return p;
    pthread_mutex_lock(&a->lock);
    if (a->last_var)
        p = a->last_var->plan;
    else if (a->n_vars)
        p = a->vars[0]->plan;
    pthread_mutex_unlock(&a->lock);
    return p;
}

/* "name=1x3x640x640;name2=..." of the tensor inputs */
static char *signature(const tdm_plan *base, const tdm_tensor *const *inputs, size_t n)
{
    size_t cap = 64, len = 0;
    char *s = mem_alloc(cap);
    if (!s)
        return NULL;
    s[0] = '\0';
    for (size_t k = 0; k < n; k++) {
        const tdm_tensor *t = inputs[k];
        char part[64 + 24 * TDM_MAX_RANK];
        const char *name = k < base->model->n_inputs ? base->model->inputs[k].info.name : "?";
        int w = snprintf(part, sizeof part, "%s%.40s=", k ? ";" : "", name);
        if (t && t->kind == TDM_KIND_TENSOR) {
            for (int d = 0; d < t->rank && w > 0 && (size_t)w < sizeof part; d++)
                w += snprintf(part + w, sizeof part - (size_t)w, d ? "x%lld" : "%lld", (long long)t->dims[d]);
            if (t->rank == 0 && (size_t)w < sizeof part)
                w += snprintf(part + w, sizeof part - (size_t)w, "scalar");
        } else if ((size_t)w < sizeof part) {
            w += snprintf(part + w, sizeof part - (size_t)w, "-");
        }
        size_t pl = strlen(part);
        if (len + pl + 1 > cap) {
            size_t nc = (len + pl + 1) * 2;
            char *ns = mem_realloc(s, nc);
            if (!ns) {
                mem_free(s);
                return NULL;
            }
            s = ns;
            cap = nc;
        }
        memcpy(s + len, part, pl + 1);
        len += pl;
    }
    return s;
}

/* Reports the nodes whose device differs between the plans of two
 * signatures (same graph: matched by node name). Under the lock. */
static void shape_fallback(adapt_state *a, const adapt_variant *from, const adapt_variant *to)
{
    const tdm_plan *p = from->plan, *q = to->plan;
    size_t moved = 0;
    cJSON *o = cJSON_CreateObject(), *arr = NULL;
    if (!o)
        return;
    cJSON_AddStringToObject(o, "kind", "shape-dependent fallback");
    cJSON_AddNumberToObject(o, "run", (double)a->clock);
    cJSON_AddStringToObject(o, "from_signature", from->sig);
    cJSON_AddStringToObject(o, "to_signature", to->sig);
    arr = cJSON_AddArrayToObject(o, "moved");
    char first[400] = "";
    for (int n = 0; n < q->n_nodes && arr; n++) {
        const char *name = q->g->nodes[n].name;
        int m = -1;
        if (n < p->n_nodes && p->g->nodes[n].name && name && strcmp(p->g->nodes[n].name, name) == 0)
            m = n;
        for (int k = 0; k < p->n_nodes && m < 0 && name; k++)
            if (p->g->nodes[k].name && strcmp(p->g->nodes[k].name, name) == 0)
                m = k;
        if (m < 0)
            continue;
        const char *df = plan_device_name(p, p->nodes[m].device), *dt = plan_device_name(q, q->nodes[n].device);
        if (strcmp(df, dt) == 0)
            continue;
        const plan_node *pn = &q->nodes[n];
        /* why it moved: the new placement's reason, or the new device's
         * rejection of the old device */
        tdm_reason why = pn->reason;
        const char *det = pn->detail ? pn->detail : "";
        for (int r = 0; r < pn->n_rejected; r++)
            if (strcmp(plan_device_name(q, pn->rejected[r].device), df) == 0) {
                why = pn->rejected[r].reason;
                det = pn->rejected[r].detail ? pn->rejected[r].detail : "";
            }
        if (moved < 200) {
            cJSON *x = cJSON_CreateObject();
            if (x) {
                cJSON_AddStringToObject(x, "node", name);
                cJSON_AddStringToObject(x, "op", q->g->nodes[n].op_type);
                cJSON_AddStringToObject(x, "from", df);
                cJSON_AddStringToObject(x, "to", dt);
                cJSON_AddStringToObject(x, "reason", tdm_reason_str(why));
                cJSON_AddStringToObject(x, "detail", det);
                cJSON_AddItemToArray(arr, x);
            }
        }
        if (!moved)
            snprintf(first, sizeof first, "first %s (%s) %s -> %s: %s: %.200s", name, q->g->nodes[n].op_type, df, dt,
                     tdm_reason_str(why), det);
        moved++;
    }
    if (!moved) {
        cJSON_Delete(o);
        return;
    }
    cJSON_AddNumberToObject(o, "moved_nodes", (double)moved);
    cJSON_AddNumberToObject(o, "from_estimated_ms", p->est_total);
    cJSON_AddNumberToObject(o, "to_estimated_ms", q->est_total);
    char detail[900];
    snprintf(detail, sizeof detail, "shape-dependent fallback: %.120s -> %.120s moves %zu nodes; %s", from->sig, to->sig,
             moved, first);
    cJSON_AddStringToObject(o, "detail", detail);
    if (history(a))
        cJSON_AddItemToArray(a->history, o);
    else
        cJSON_Delete(o);
    a->shape_fallbacks++;
    emit_replan(a, "", detail);
}

tdm_status adapt_select(tdm_err *e, adapt_state *a, const tdm_tensor *const *inputs, size_t n, adapt_variant **out)
{
    *out = NULL;
    pthread_mutex_lock(&a->lock);
    a->clock++;
    if (a->o.cache_size <= 0 || !a->build) {
        adapt_variant *v = a->vars[0];
        v->busy++;
        v->last_use = a->clock;
        a->last_var = v;
        *out = v;
        pthread_mutex_unlock(&a->lock);
        return TDM_OK;
    }
    char *sig = signature(a->base_plan, inputs, n);
    if (!sig) {
        pthread_mutex_unlock(&a->lock);
        return err_set(e, TDM_E_NOMEM, "out of memory");
    }
    adapt_variant *v = NULL;
    for (size_t i = 1; i < a->n_vars && !v; i++)
        if (strcmp(a->vars[i]->sig, sig) == 0)
            v = a->vars[i];
    tdm_status st = TDM_OK;
    if (v) {
        a->cache_hits++;
        v->hits++;
    } else {
        /* a miss: build outside no lock would allow duplicate builds; plans
         * are built under the lock (one at a time) */
        tdm_model *model = NULL;
        tdm_plan *plan = NULL;
        exec_prog *prog = NULL;
        if ((st = a->build(a->build_user, e, inputs, n, &model, &plan)) == TDM_OK &&
            (st = exec_prog_build(e, plan, &prog)) == TDM_OK) {
            if (!(v = variant_new(sig)) || vars_push(a, v)) {
                variant_free(v);
                v = NULL;
                st = err_set(e, TDM_E_NOMEM, "out of memory");
            } else {
                v->model = model;
                v->plan = plan;
                v->prog = prog;
                v->own = 1;
                exec_prog_set_fusion(v->prog, a->fusion);
                model = NULL;
                plan = NULL;
                prog = NULL;
                install(a, v->prog);
                if (perf_on(a) && watch_reset(v))
                    st = err_set(e, TDM_E_NOMEM, "out of memory");
            }
        }
        exec_prog_free(prog);
        plan_free(plan);
        tdm_model_destroy(model);
        if (!st) {
            a->cache_misses++;
            if (a->last_var && a->last_var != a->vars[0] && a->last_var != v)
                shape_fallback(a, a->last_var, v);
            /* evict the least recently used idle entries past the size */
            while (a->n_vars - 1 > (size_t)a->o.cache_size) {
                size_t lru = 0;
                for (size_t i = 1; i < a->n_vars; i++)
                    if (a->vars[i] != v && !a->vars[i]->busy && a->vars[i] != a->last_var &&
                        (!lru || a->vars[i]->last_use < a->vars[lru]->last_use))
                        lru = i;
                if (!lru)
                    break;
                variant_free(a->vars[lru]);
                memmove(a->vars + lru, a->vars + lru + 1, (a->n_vars - lru - 1) * sizeof *a->vars);
                a->n_vars--;
                a->cache_evictions++;
            }
        }
    }
    mem_free(sig);
    if (!st) {
        v->busy++;
        v->last_use = a->clock;
        a->last_var = v;
        *out = v;
    }
    pthread_mutex_unlock(&a->lock);
    if (st)
        err_prefix(e, "planning for the input shapes: ");
    return st;
}

void adapt_release(adapt_state *a, adapt_variant *v)
{
    if (!v)
        return;
    pthread_mutex_lock(&a->lock);
    v->busy--;
    pthread_mutex_unlock(&a->lock);
}

/* ------------------------------------------------------------- breaker */

/* Under the lock: builds the fallback plan and program once. */
static tdm_status ensure_fallback(tdm_err *e, adapt_state *a, const tdm_plan *plan)
{
    if (a->fallback_prog)
        return TDM_OK;
    plan_options po;
    dev_list *devs = NULL;
    tdm_status st;
    char why[700];
    if (plan_options_copy(&plan->opts, &po))
        return err_set(e, TDM_E_NOMEM, "out of memory");
    snprintf(why, sizeof why,
             "the circuit breaker moved the graph to cpu after a device fault (%d within %g ms open it; "
             "first fault: %.480s)",
             a->o.faults, a->o.window_ms, a->last_fault);
    if (!(po.device_fault = mem_strdup(why))) {
        plan_options_free(&po);
        return err_set(e, TDM_E_NOMEM, "out of memory");
    }
    /* the fallback must run whatever the policy says */
    po.fallback = PLAN_FB_ALLOW;
    po.fallback_set = 1;
    po.max_fallback_ratio = -1;
    po.max_boundary_bytes = -1;
    if ((st = dev_list_open(e, po.devices, (const char *const *)po.plugins, po.n_plugins, &devs)) == TDM_OK &&
        (st = plan_build(e, plan->model, &po, devs, &a->fallback)) == TDM_OK &&
        (st = exec_prog_build(e, a->fallback, &a->fallback_prog)) != TDM_OK) {
        plan_free(a->fallback);
        a->fallback = NULL;
    }
    plan_options_free(&po);
    /* unfused, with the reference kernels (no Winograd, no folding): the
     * arithmetic of the device plan's cpu partitions, so that a run the
     * breaker moves to cpu gives what a fallback inside the plan gives */
    if (!st)
        exec_prog_set_fusion(a->fallback_prog, TDM_FUSION_OFF);
    if (st)
        err_prefix(e, "the circuit breaker's cpu plan: ");
    return st;
}

/* ------------------------------------------------------------- re-planning */

/* Under the lock, after a successful run of v's current plan with the
 * measurements r: updates the watch and re-plans when a partition has been
 * slow for slow_runs runs. Failures to re-plan are recorded, not returned
 * (the run itself succeeded). */
static void watch(adapt_state *a, adapt_variant *v, const run_rec *r)
{
    const tdm_plan *p = v->plan;
    int cpu = (int)p->devs->n - 1;
    if (r->plan != p || !v->streak)
        return; /* the plan changed while this run was in flight */
    v->runs++;
    int hit = -1;
    double hit_ratio = 0;
    for (int q = 0; q < p->n_parts; q++) {
        const plan_part *pp = &p->parts[q];
        if (pp->device == cpu || !(v->base[q] > 0))
            continue;
        double meas = 0;
        int complete = 1;
        for (int k = pp->first; k < pp->first + pp->count; k++) {
            int n = p->order[k];
            if (p->nodes[n].est_ms < 0)
                continue;
            if (r->node_ms[n] < 0)
                complete = 0;
            else
                meas += r->node_ms[n];
        }
        if (complete && meas >= a->o.slow_ratio * v->base[q]) {
            v->streak[q]++;
            for (int k = pp->first; k < pp->first + pp->count; k++)
                v->acc[p->order[k]] += r->node_ms[p->order[k]] >= 0 ? r->node_ms[p->order[k]] : 0;
        } else {
            v->streak[q] = 0;
            for (int k = pp->first; k < pp->first + pp->count; k++)
                v->acc[p->order[k]] = 0;
        }
        if (v->streak[q] >= a->o.slow_runs && meas / v->base[q] > hit_ratio) {
            hit = q;
            hit_ratio = meas / v->base[q];
        }
    }
    if (hit < 0 || (v->replanned && v->runs - v->last_replan < (uint64_t)a->o.min_runs))
        return;
    /* re-plan with the measured figures of partition hit */
    const plan_part *pp = &p->parts[hit];
    int N = v->streak[hit];
    const char *dev = plan_device_name(p, pp->device);
    double meas = 0;
    for (int k = pp->first; k < pp->first + pp->count; k++) {
        int n = p->order[k];
        if (p->nodes[n].est_ms < 0)
            continue;
        double ms = v->acc[n] / N;
        meas += ms;
        plan_options_add_measured(&v->meas, p->g->nodes[n].name, dev, ms, p->nodes[n].est_ms);
    }
    double est = pp->est_ms, base = v->base[hit];
    double current = p->est_total - est + meas;
    char reason[700];
    snprintf(reason, sizeof reason,
             "partition %d on %s (%d nodes) measured %.6g ms a run (mean of %d consecutive runs) against %.6g ms "
             "expected (estimate %.6g ms): %.3gx >= %.3gx",
             hit, dev, pp->count, meas, N, base, est, meas / base, a->o.slow_ratio);
    plan_options po;
    dev_list *devs = NULL;
    tdm_plan *cand = NULL;
    exec_prog *prog = NULL;
    tdm_err e;
    err_clear(&e);
    tdm_status st = TDM_OK;
    if (plan_options_copy(&p->opts, &po)) {
        st = TDM_E_NOMEM;
    } else {
        for (size_t i = 0; i < v->meas.n_measured && !st; i++)
            st = plan_options_add_measured(&po, v->meas.measured[i].node, v->meas.measured[i].device,
                                           v->meas.measured[i].ms, v->meas.measured[i].est_ms);
        mem_free(po.replan_reason);
        if (!st && !(po.replan_reason = mem_strdup(reason)))
            st = TDM_E_NOMEM;
        if (!st && (st = dev_list_open(&e, po.devices, (const char *const *)po.plugins, po.n_plugins, &devs)) == TDM_OK)
            st = plan_build(&e, p->model, &po, devs, &cand);
        plan_options_free(&po);
    }
    int adopt = !st && cand && !cand->n_violations && cand->est_total <= current * (1 - ADAPT_GAIN);
    size_t moved = 0;
    if (!st && cand)
        for (int n = 0; n < p->n_nodes && n < cand->n_nodes; n++)
            moved += strcmp(plan_device_name(p, p->nodes[n].device), plan_device_name(cand, cand->nodes[n].device)) != 0;
    if (adopt && !moved)
        adopt = 0;
    if (adopt && (st = exec_prog_build(&e, cand, &prog)) != TDM_OK)
        adopt = 0;
    if (adopt)
        exec_prog_set_fusion(prog, a->fusion);
    cJSON *o = cJSON_CreateObject();
    if (o) {
        cJSON_AddStringToObject(o, "kind", "measured costs");
        cJSON_AddNumberToObject(o, "run", (double)a->clock);
        cJSON_AddNumberToObject(o, "signature_run", (double)v->runs);
        cJSON_AddStringToObject(o, "signature", v->sig);
        cJSON_AddNumberToObject(o, "partition", hit);
        cJSON_AddStringToObject(o, "device", dev);
        cJSON_AddNumberToObject(o, "nodes", pp->count);
        cJSON_AddNumberToObject(o, "consecutive_runs", N);
        cJSON_AddNumberToObject(o, "measured_ms", meas);
        cJSON_AddNumberToObject(o, "estimated_ms", est);
        cJSON_AddNumberToObject(o, "baseline_ms", base);
        cJSON_AddNumberToObject(o, "ratio", meas / base);
        cJSON_AddNumberToObject(o, "threshold", a->o.slow_ratio);
        cJSON_AddNumberToObject(o, "plan_estimated_ms", p->est_total);
        cJSON_AddNumberToObject(o, "plan_with_measured_ms", current);
        if (cand)
            cJSON_AddNumberToObject(o, "replan_estimated_ms", cand->est_total);
        cJSON_AddNumberToObject(o, "moved_nodes", (double)moved);
        cJSON_AddStringToObject(o, "decision", adopt ? "adopted" : "kept");
        char why[300];
        if (st)
            snprintf(why, sizeof why, "re-planning failed: %.250s", e.msg[0] ? e.msg : "out of memory");
        else if (adopt)
            snprintf(why, sizeof why, "the new placement's estimate is at least %g%% below the current one's", ADAPT_GAIN * 100);
        else if (cand && cand->n_violations)
            snprintf(why, sizeof why, "the new placement violates the fallback policy");
        else if (!moved)
            snprintf(why, sizeof why, "the measured figures do not change the placement");
        else
            snprintf(why, sizeof why, "the new placement is not %g%% cheaper (hysteresis): the baseline becomes the measured time",
                     ADAPT_GAIN * 100);
        cJSON_AddStringToObject(o, "why", why);
        cJSON_AddStringToObject(o, "reason", reason);
        if (history(a))
            cJSON_AddItemToArray(a->history, o);
        else
            cJSON_Delete(o);
    }
    v->replanned = 1;
    v->last_replan = v->runs;
    char detail[1000];
    snprintf(detail, sizeof detail, "re-plan with measured costs (%s, %zu nodes move): %s", adopt ? "adopted" : "kept",
             moved, reason);
    if (adopt && adopt_locked(a, v, cand, prog) == 0) {
        cand = NULL;
        prog = NULL;
        a->replans++;
        watch_reset(v);
    } else {
        if (adopt)
            adopt = 0;
        a->replans_kept++;
        v->base[hit] = meas;
        v->streak[hit] = 0;
        for (int k = pp->first; k < pp->first + pp->count; k++)
            v->acc[p->order[k]] = 0;
    }
    exec_prog_free(prog);
    plan_free(cand);
    emit_replan(a, dev, detail);
}

/* v runs plan/prog from now on (ownership moves in); the replaced ones
 * stay alive until the end. a's lock is held. 0, or -1 when out of memory
 * (nothing changed). */
static int adopt_locked(adapt_state *a, adapt_variant *v, tdm_plan *plan, exec_prog *prog)
{
    if (mem_grow((void **)&v->old, &v->cap_old, v->n_old + 1, sizeof *v->old) ||
        mem_grow((void **)&v->old_prog, &v->cap_old_prog, v->n_old + 1, sizeof *v->old_prog))
        return -1;
    v->old[v->n_old] = v->own ? v->plan : NULL;
    v->old_prog[v->n_old] = v->own ? v->prog : NULL;
    v->n_old++;
    v->plan = plan;
    v->prog = prog;
    v->own = 1;
    install(a, v->prog);
    return 0;
}

tdm_status adapt_adopt(tdm_err *e, adapt_state *a, adapt_variant *v, tdm_plan *plan, exec_prog *prog,
                       const char *detail)
{
    pthread_mutex_lock(&a->lock);
    int r = adopt_locked(a, v, plan, prog);
    if (!r && perf_on(a))
        watch_reset(v);
    pthread_mutex_unlock(&a->lock);
    if (r)
        return err_set(e, TDM_E_NOMEM, "out of memory");
    if (detail)
        emit_replan(a, plan_device_name(plan, (int)plan->devs->n - 1), detail);
    return TDM_OK;
}

const tdm_plan *adapt_variant_plan(adapt_state *a, const adapt_variant *v)
{
    pthread_mutex_lock(&a->lock);
    const tdm_plan *p = v->plan;
    pthread_mutex_unlock(&a->lock);
    return p;
}

/* ------------------------------------------------------------- runs */

tdm_status adapt_run(tdm_err *e, adapt_state *a, adapt_variant *v, const tdm_tensor *const *in, tdm_tensor **out,
                     int threads, exec_stats *stats)
{
    run_rec rec, *saved = cur_rec;
    memset(&rec, 0, sizeof rec);
    pthread_mutex_lock(&a->lock);
    const tdm_plan *plan = v->plan;
    const exec_prog *prog = v->prog;
    pthread_mutex_unlock(&a->lock);
    if (perf_on(a)) {
        rec.a = a;
        rec.plan = plan;
        if ((rec.node_ms = mem_alloc(((size_t)plan->n_nodes + 1) * sizeof *rec.node_ms)) != NULL) {
            for (int n = 0; n < plan->n_nodes; n++)
                rec.node_ms[n] = -1;
            rec.active = 1;
        }
        cur_rec = &rec;
    }
    tdm_status st;
    if (!a->on) {
        st = exec_prog_run(e, prog, in, out, threads, stats);
        rec.active = rec.active && st == TDM_OK;
        goto finish;
    }
    int use_device, probe = 0;
    double t = now_ms();
    pthread_mutex_lock(&a->lock);
    a->runs++;
    if (a->state == 1 && t - a->opened_at >= a->o.cooldown_ms) {
        a->state = 2;
        probe = 1;
        a->probes++;
    }
    use_device = a->state == 0 || probe;
    pthread_mutex_unlock(&a->lock);
    int reexec = 0;
    if (use_device) {
        st = exec_prog_run(e, prog, in, out, threads, stats);
        pthread_mutex_lock(&a->lock);
        a->device_runs++;
        if (st != TDM_E_DEVICE) {
            if (probe && st == TDM_OK) {
                a->state = 0;
                a->n_times = 0;
                a->closed++;
            } else if (probe) {
                a->state = 1; /* not a device fault, but the probe is over */
                a->opened_at = now_ms();
            }
            pthread_mutex_unlock(&a->lock);
            rec.active = rec.active && st == TDM_OK;
            goto finish;
        }
        /* a device fault */
        double tf = now_ms();
        a->faults++;
        if (!a->last_fault[0] || a->state == 0)
            snprintf(a->last_fault, sizeof a->last_fault, "%.500s", e->msg);
        /* drop faults older than the window, add this one */
        int kept = 0;
        for (int i = 0; i < a->n_times; i++)
            if (tf - a->times[i] <= a->o.window_ms)
                a->times[kept++] = a->times[i];
        a->n_times = kept;
        if (a->n_times == a->o.faults) {
            memmove(a->times, a->times + 1, (size_t)(a->n_times - 1) * sizeof *a->times);
            a->n_times--;
        }
        a->times[a->n_times++] = tf;
        if (probe || a->n_times >= a->o.faults) {
            if (a->state != 1)
                a->opened++;
            a->state = 1;
            a->opened_at = tf;
        }
        reexec = 1;
        pthread_mutex_unlock(&a->lock);
        exec_stats_free(stats);
    }
    rec.active = 0; /* the fallback plan is not watched */
    pthread_mutex_lock(&a->lock);
    if (!a->fallback_prog && !a->last_fault[0])
        snprintf(a->last_fault, sizeof a->last_fault, "none yet");
    int built = !a->fallback_prog;
    st = ensure_fallback(e, a, a->base_plan);
    /* The fallback program reports to the same observer, and its creation
     * is a re-plan. */
    if (!st && built) {
        install(a, a->fallback_prog);
        emit_replan(a, "cpu", a->last_fault);
    }
    if (reexec)
        a->reexecuted++;
    else
        a->fallback_runs++;
    const exec_prog *fp = a->fallback_prog;
    pthread_mutex_unlock(&a->lock);
    if (!st) {
        err_clear(e);
        st = exec_prog_run(e, fp, in, out, threads, stats);
    }
finish:
    if (perf_on(a)) {
        cur_rec = saved;
        if (rec.active) {
            pthread_mutex_lock(&a->lock);
            watch(a, v, &rec);
            pthread_mutex_unlock(&a->lock);
        }
        mem_free(rec.node_ms);
    }
    return st;
}

/* ------------------------------------------------------------- report */

char *adapt_json(adapt_state *a)
{
    cJSON *o = cJSON_CreateObject(), *x;
    char *text = NULL, *ledger = NULL;
    if (!o)
        return NULL;
    if (a->have_lock)
        pthread_mutex_lock(&a->lock);
    static const char *const states[] = {"closed", "open", "half-open"};
    cJSON_AddBoolToObject(o, "enabled", a->on);
    if (a->on) {
        cJSON_AddNumberToObject(o, "faults_to_open", a->o.faults);
        cJSON_AddNumberToObject(o, "window_ms", a->o.window_ms);
        cJSON_AddNumberToObject(o, "cooldown_ms", a->o.cooldown_ms);
        cJSON_AddStringToObject(o, "state", states[a->state]);
        cJSON_AddNumberToObject(o, "runs", (double)a->runs);
        cJSON_AddNumberToObject(o, "device_runs", (double)a->device_runs);
        cJSON_AddNumberToObject(o, "faults", (double)a->faults);
        cJSON_AddNumberToObject(o, "reexecuted_on_cpu", (double)a->reexecuted);
        cJSON_AddNumberToObject(o, "runs_on_cpu_while_open", (double)a->fallback_runs);
        cJSON_AddNumberToObject(o, "opened", (double)a->opened);
        cJSON_AddNumberToObject(o, "half_open_probes", (double)a->probes);
        cJSON_AddNumberToObject(o, "closed_again", (double)a->closed);
        if (a->last_fault[0])
            cJSON_AddStringToObject(o, "first_fault", a->last_fault);
        tdm_err e;
        err_clear(&e);
        if (a->fallback && plan_ledger_json(&e, a->fallback, NULL, &ledger) == TDM_OK) {
            cJSON *l = cJSON_Parse(ledger);
            if (l)
                cJSON_AddItemToObject(o, "fallback_plan", l);
            mem_free(ledger);
        }
    }
    if ((x = cJSON_AddObjectToObject(o, "replanning")) != NULL) {
        cJSON_AddBoolToObject(x, "enabled", perf_on(a));
        if (perf_on(a)) {
            cJSON_AddNumberToObject(x, "slow_ratio", a->o.slow_ratio);
            cJSON_AddNumberToObject(x, "consecutive_runs", a->o.slow_runs);
            cJSON_AddNumberToObject(x, "min_runs_between", a->o.min_runs);
            cJSON_AddNumberToObject(x, "min_gain", ADAPT_GAIN);
        }
        cJSON_AddNumberToObject(x, "replans_adopted", (double)a->replans);
        cJSON_AddNumberToObject(x, "replans_kept", (double)a->replans_kept);
    }
    if ((x = cJSON_AddObjectToObject(o, "shapes")) != NULL) {
        cJSON_AddBoolToObject(x, "plan_cache", a->o.cache_size > 0);
        cJSON_AddNumberToObject(x, "capacity", a->o.cache_size);
        cJSON_AddNumberToObject(x, "hits", (double)a->cache_hits);
        cJSON_AddNumberToObject(x, "misses", (double)a->cache_misses);
        cJSON_AddNumberToObject(x, "evictions", (double)a->cache_evictions);
        cJSON_AddNumberToObject(x, "shape_dependent_fallbacks", (double)a->shape_fallbacks);
        cJSON *ents = cJSON_AddArrayToObject(x, "cached");
        for (size_t i = 1; ents && i < a->n_vars; i++) {
            const adapt_variant *v = a->vars[i];
            cJSON *y = cJSON_CreateObject();
            if (!y)
                break;
            const tdm_plan *p = v->plan;
            cJSON *nb = cJSON_CreateObject();
            for (size_t d = 0; nb && d < p->devs->n; d++) {
                int cnt = 0;
                for (int n = 0; n < p->n_nodes; n++)
                    cnt += p->nodes[n].device == (int)d;
                cJSON_AddNumberToObject(nb, plan_device_name(p, (int)d), cnt);
            }
            cJSON_AddStringToObject(y, "signature", v->sig);
            cJSON_AddNumberToObject(y, "hits", (double)v->hits);
            cJSON_AddNumberToObject(y, "runs_watched", (double)v->runs);
            cJSON_AddNumberToObject(y, "estimated_ms", p->est_total);
            cJSON_AddNumberToObject(y, "partitions", p->n_parts);
            if (nb)
                cJSON_AddItemToObject(y, "nodes_by_device", nb);
            cJSON_AddItemToArray(ents, y);
        }
    }
    if (a->history)
        cJSON_AddItemReferenceToObject(o, "decisions", a->history);
    else
        cJSON_AddArrayToObject(o, "decisions");
    if (a->have_lock)
        pthread_mutex_unlock(&a->lock);
    char *t = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (t) {
        text = mem_strdup(t);
        cJSON_free(t);
    }
    return text;
}
