/* The precision guard (rules in guard.h). */
#define _POSIX_C_SOURCE 200809L
#include "run/guard.h"
#include "core/mem.h"
#include "run/calibrate.h"
#include "run/exec.h"
#include "run/rescue_check.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

void guard_opts_init(guard_opts *o)
{
    o->mode = GUARD_DEFAULT;
    o->every = 0;
    o->out_cosine = 0.999;
    o->rounds = 8;
}

/* A node on a device whose compute type is narrower than float32. */
static int narrow(const tdm_plan *p, int d)
{
    const dev_instance *di = &p->devs->items[d];
    return di->ext && di->ext->precision != TDM_FLOAT && di->ext->precision != TDM_DOUBLE &&
           di->ext->precision != TDM_UNDEFINED;
}

static int plan_is_narrow(const tdm_plan *p)
{
    for (int n = 0; n < p->n_nodes; n++)
        if (narrow(p, p->nodes[n].device))
            return 1;
    return 0;
}

tdm_status guard_init(tdm_err *e, guard_state *g, const guard_opts *o, const tdm_plan *plan)
{
    memset(g, 0, sizeof *g);
    g->o = *o;
    g->original = plan;
    g->out_cosine_before = g->out_cosine_after = NAN;
    int narrow_plan = plan_is_narrow(plan);
    size_t rescues = plan_rescue_checkable(plan);
    if (g->o.mode == GUARD_DEFAULT)
        g->o.mode = narrow_plan || rescues ? GUARD_FIRST : GUARD_OFF;
    g->narrow = g->o.mode != GUARD_OFF && narrow_plan;
    g->rescues = g->o.mode != GUARD_OFF && rescues;
    g->active = g->narrow || g->rescues;
    if (g->o.mode == GUARD_OFF)
        g->rescues_unchecked = rescues;
    if (pthread_mutex_init(&g->lock, NULL))
        return err_set(e, TDM_E_NOMEM, "cannot create a mutex");
    g->have_lock = 1;
    return TDM_OK;
}

void guard_free(guard_state *g)
{
    if (!g)
        return;
    cJSON_Delete(g->history);
    if (g->have_lock)
        pthread_mutex_destroy(&g->lock);
    memset(g, 0, sizeof *g);
}

int guard_due(guard_state *g)
{
    if (!g->active)
        return 0;
    pthread_mutex_lock(&g->lock);
    uint64_t k = g->runs++;
    int due = !g->first_done || (g->o.mode == GUARD_EVERY && k % (uint64_t)g->o.every == 0);
    pthread_mutex_unlock(&g->lock);
    return due;
}

static void free_outs(tdm_tensor **t, int n)
{
    for (int k = 0; t && k < n; k++) {
        tdm_tensor_destroy(t[k]);
        t[k] = NULL;
    }
}

/* A score output (a classifier's or a sequence head's): produced, through
 * shape-only ops, by Gemm, MatMul, Conv, Softmax, LogSoftmax, Sigmoid or a
 * pooling/mean — where the answer is the top-1. Hidden states (Add,
 * LayerNormalization, …) and arbitrary tensors are judged by cosine only. */
static int score_output(const gr_graph *g, int v)
{
    static const char *const heads[] = {"Gemm", "MatMul", "Conv", "Softmax", "LogSoftmax", "Sigmoid",
                                        "GlobalAveragePool", "AveragePool", "ReduceMean"};
    static const char *const shape_only[] = {"Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze"};
    for (int hop = 0; hop < 8 && v >= 0; hop++) {
        int prod = -1;
        for (int n = 0; n < g->n_nodes && prod < 0; n++)
            for (int o = 0; o < g->nodes[n].n_outputs; o++)
                if (g->nodes[n].outputs[o] == v)
                    prod = n;
        if (prod < 0)
            return 0;
        const char *op = g->nodes[prod].op_type;
        for (size_t i = 0; i < sizeof heads / sizeof heads[0]; i++)
            if (strcmp(op, heads[i]) == 0)
                return 1;
        int pass = 0;
        for (size_t i = 0; i < sizeof shape_only / sizeof shape_only[0]; i++)
            pass |= strcmp(op, shape_only[i]) == 0;
        if (!pass || g->nodes[prod].n_inputs < 1)
            return 0;
        v = g->nodes[prod].inputs[0];
    }
    return 0;
}

/* The end-to-end rule over every output: 1 on a breach (*why names it). */
static int breach(const guard_state *g, const tdm_plan *p, tdm_tensor *const *ref, tdm_tensor *const *got, double *worst,
                  char *why, size_t n)
{
    int bad = 0;
    *worst = 1;
    for (int k = 0; k < p->g->n_outputs; k++) {
        double c;
        char w[300];
        if (!ref[k] || !got[k])
            continue;
        if (plan_output_check(ref[k], got[k], score_output(p->g, p->g->outputs[k]), g->o.out_cosine, &c, w, sizeof w) &&
            !bad) {
            bad = 1;
            snprintf(why, n, "output '%s': %s", p->g->values[p->g->outputs[k]].name, w);
        }
        if (c < *worst)
            *worst = c;
    }
    return bad;
}

static cJSON *history(guard_state *g)
{
    if (!g->history)
        g->history = cJSON_CreateArray();
    return g->history;
}

/* Plans p's model again with po; adopts it into v when placement moved.
 * *moved: nodes whose device differs from p's. */
static tdm_status replan_as(tdm_err *e, adapt_state *a, adapt_variant *v, const tdm_plan *p, plan_options *po,
                            const char *detail, int always, size_t *moved, const tdm_plan **now)
{
    dev_list *devs = NULL;
    tdm_plan *cand = NULL;
    exec_prog *prog = NULL;
    tdm_status st;
    *moved = 0;
    *now = p;
    if ((st = dev_list_open(e, po->devices, (const char *const *)po->plugins, po->n_plugins, &devs)) != TDM_OK ||
        (st = plan_build(e, p->model, po, devs, &cand)) != TDM_OK)
        return st;
    if (cand->n_violations) {
        session_policy_message(e, cand);
        plan_free(cand);
        return TDM_E_POLICY;
    }
    for (int n = 0; n < p->n_nodes && n < cand->n_nodes; n++)
        *moved += strcmp(plan_device_name(p, p->nodes[n].device), plan_device_name(cand, cand->nodes[n].device)) != 0;
    if (!always && !*moved && !cand->n_precision) {
        plan_free(cand);
        return TDM_OK;
    }
    if ((st = exec_prog_build(e, cand, &prog)) != TDM_OK) {
        plan_free(cand);
        return st;
    }
    exec_prog_set_fusion(prog, a->fusion);
    if ((st = adapt_adopt(e, a, v, cand, prog, detail)) != TDM_OK) {
        exec_prog_free(prog);
        plan_free(cand);
        return st;
    }
    *now = cand;
    return TDM_OK;
}

static tdm_status replan(tdm_err *e, adapt_state *a, adapt_variant *v, const tdm_plan *p, plan_options *po,
                         const char *detail, size_t *moved, const tdm_plan **now)
{
    return replan_as(e, a, v, p, po, detail, 0, moved, now);
}

static void record(guard_state *g, const char *kind, const char *why, const tdm_plan *p, size_t moved, int node,
                   double cos_before)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return;
    cJSON_AddStringToObject(o, "kind", kind);
    cJSON_AddNumberToObject(o, "run", (double)g->runs);
    if (why)
        cJSON_AddStringToObject(o, "why", why);
    if (node >= 0)
        cJSON_AddStringToObject(o, "node", p->g->nodes[node].name);
    if (isfinite(cos_before))
        cJSON_AddNumberToObject(o, "output_cosine", cos_before);
    cJSON_AddNumberToObject(o, "moved_nodes", (double)moved);
    cJSON *pr = cJSON_AddArrayToObject(o, "refused");
    for (size_t k = 0; pr && k < p->n_precision; k++) {
        const plan_precision *pp = &p->precision[k];
        if (!pp->guard)
            continue;
        cJSON *x = cJSON_CreateObject();
        if (!x)
            break;
        cJSON_AddStringToObject(x, "node", p->g->nodes[pp->node].name);
        cJSON_AddStringToObject(x, "device", plan_device_name(p, pp->device));
        for (int r = 0; r < p->nodes[pp->node].n_rejected; r++)
            if (p->nodes[pp->node].rejected[r].device == pp->device)
                cJSON_AddStringToObject(x, "detail", p->nodes[pp->node].rejected[r].detail);
        cJSON_AddItemToArray(pr, x);
    }
    if (history(g))
        cJSON_AddItemToArray(g->history, o);
    else
        cJSON_Delete(o);
}

/* The run-time check of the kept rescues (rules in guard.h) on in[]
 * (inputs "first-run" or "calibration", set): the figures go into the
 * plan's options and the plan made with them is adopted into v (*pp
 * follows) — a failed rescue dropped (TDM_EVENT_REPLAN with the sentence),
 * or the same placement with the figures in its ledger (no event).
 * Repeated while the new plan keeps a rescue not yet checked on these
 * inputs (the next rule or device that took a dropped one's place). */
static tdm_status check_rescues(tdm_err *e, guard_state *g, adapt_state *a, adapt_variant *v, const tdm_plan **pp,
                                const tdm_tensor *const *in, int threads, const char *inputs, int set)
{
    tdm_status st = TDM_OK;
    for (int round = 0; round < 8 && !st; round++) {
        const tdm_plan *p = *pp;
        plan_options po;
        rescue_check_sum sum;
        size_t moved = 0;
        char detail[600];
        plan_options_init(&po);
        if (plan_options_copy(&p->opts, &po) != TDM_OK) {
            plan_options_free(&po);
            return err_set(e, TDM_E_NOMEM, "out of memory");
        }
        if ((st = rescue_check_run(e, p, in, threads, inputs, set, &po, &sum)) == TDM_OK && sum.checked) {
            snprintf(detail, sizeof detail, "%.440s; the session re-plans without it", sum.first);
            st = replan_as(e, a, v, p, &po, sum.failed ? detail : NULL, 1, &moved, pp);
        }
        plan_options_free(&po);
        if (st || !sum.checked)
            break;
        g->rescue_checks += sum.checked;
        g->rescues_dropped += sum.failed;
        if (sum.failed && !g->rescue_first[0])
            snprintf(g->rescue_first, sizeof g->rescue_first, "%s", sum.first);
        cJSON *o = cJSON_CreateObject();
        if (o) {
            char where[64];
            plan_rescue_check c = {.inputs = inputs, .set = set};
            cJSON_AddStringToObject(o, "kind", "rescue");
            cJSON_AddStringToObject(o, "inputs", plan_rescue_check_where(&c, where, sizeof where));
            cJSON_AddNumberToObject(o, "checked", (double)sum.checked);
            cJSON_AddNumberToObject(o, "passed", (double)sum.passed);
            cJSON_AddNumberToObject(o, "dropped", (double)sum.failed);
            if (sum.failed)
                cJSON_AddStringToObject(o, "why", sum.first);
            if (sum.passed && isfinite(sum.worst.max_abs))
                cJSON_AddNumberToObject(o, "worst_passing_max_abs", sum.worst.max_abs);
            cJSON_AddNumberToObject(o, "moved_nodes", (double)moved);
            if (history(g))
                cJSON_AddItemToArray(g->history, o);
            else
                cJSON_Delete(o);
        }
    }
    /* a dropped rescue may leave its node on a narrower device */
    if (!st && g->o.mode != GUARD_OFF && plan_is_narrow(*pp))
        g->narrow = 1;
    return st;
}

/* The first node (in p's order) whose device, with every device node
 * before it, makes the outputs breach: bisection over positions. -1 when
 * none is found (the rule is not monotone here). */
static tdm_status locate(tdm_err *e, const guard_state *g, const tdm_plan *p, const tdm_tensor *const *in,
                         tdm_tensor *const *ref, int threads, int *node)
{
    int nout = p->g->n_outputs, lo = -1, hi = p->n_nodes - 1;
    tdm_tensor **o = mem_calloc((size_t)nout + 1, sizeof *o);
    tdm_status st = TDM_OK;
    *node = -1;
    if (!o)
        return err_set(e, TDM_E_NOMEM, "out of memory");
    while (hi - lo > 1) {
        int mid = lo + (hi - lo) / 2;
        double c;
        char why[8];
        if ((st = plan_run_mixed(e, p, in, mid, threads, o)) != TDM_OK)
            break;
        if (breach(g, p, ref, o, &c, why, sizeof why))
            hi = mid;
        else
            lo = mid;
        free_outs(o, nout);
    }
    mem_free(o);
    if (st)
        return st;
    /* the device node at or before hi */
    for (int pos = hi; pos >= 0; pos--)
        if (narrow(p, p->nodes[p->order[pos]].device)) {
            *node = p->order[pos];
            break;
        }
    return TDM_OK;
}

/* Counts the nodes p moved off a narrow device of the session's original
 * plan (a node a profile kept off it and the probe showed safe comes back:
 * not counted) and names the first. */
static void count_moved(guard_state *g, const tdm_plan *p)
{
    g->moved = 0;
    g->first[0] = '\0';
    for (int pos = 0; pos < p->n_nodes; pos++) {
        int n = p->order[pos];
        if (n < g->original->n_nodes && narrow(g->original, g->original->nodes[n].device) &&
            !narrow(p, p->nodes[n].device) && !g->moved++)
            snprintf(g->first, sizeof g->first, "%s", p->g->nodes[n].name);
    }
}

/* The last resort when the rounds run out (or no single node can be
 * blamed) and the outputs still breach: every node left on a narrow device
 * is refused there, so the answer returned is cpu fp32's (or a full-width
 * device's), never one that failed verification. Recorded as
 * "fallback_all" with the breach that caused it. */
static tdm_status give_up(tdm_err *e, guard_state *g, adapt_state *a, adapt_variant *v, plan_options *po,
                          const tdm_plan **pp, const char *why, double c)
{
    const tdm_plan *p = *pp;
    char detail[700];
    size_t moved = 0;
    snprintf(detail, sizeof detail,
             "precision guard: the outputs still breach the end-to-end rule after %d round%s (%.400s); every node on "
             "a reduced-precision device moves off it",
             g->o.rounds, g->o.rounds == 1 ? "" : "s", why);
    /* a refused node may land on another narrow device: a pass per device */
    for (size_t pass = 0; pass < p->devs->n && plan_is_narrow(p); pass++) {
        for (int n = 0; n < p->n_nodes; n++)
            if (narrow(p, p->nodes[n].device) &&
                plan_options_add_refusal(po, p->g->nodes[n].name, plan_device_name(p, p->nodes[n].device), detail))
                return err_set(e, TDM_E_NOMEM, "out of memory");
        size_t m = 0;
        const tdm_plan *before = p;
        tdm_status st = replan(e, a, v, p, po, detail, &m, &p);
        *pp = p;
        if (st != TDM_OK)
            return st;
        moved += m;
        if (p == before)
            break;
    }
    g->gave_up = 1;
    record(g, "fallback_all", why, p, moved, -1, c);
    return TDM_OK;
}

/* Verification rounds on in[] against ref[] (rules in guard.h): the plan
 * runs node by node; on a breach the first crossing node is refused (po),
 * re-planned into v (*pp follows) and checked again. `where` names the
 * inputs in the refusal's sentence. */
static tdm_status verify(tdm_err *e, guard_state *g, adapt_state *a, adapt_variant *v, plan_options *po,
                         const tdm_plan **pp, const tdm_plan *start, const tdm_tensor *const *in,
                         tdm_tensor *const *ref, int threads, const char *where)
{
    const tdm_plan *p = *pp;
    int nout = p->g->n_outputs;
    tdm_status st = TDM_OK;
    tdm_tensor **mixed = mem_calloc((size_t)nout + 1, sizeof *mixed);
    if (!mixed)
        return err_set(e, TDM_E_NOMEM, "out of memory");
    g->checks++;
    int gave_up = 0;
    for (int round = 0;; round++) {
        double c;
        char why[400];
        if ((st = plan_run_mixed(e, p, in, p->n_nodes - 1, threads, mixed)) != TDM_OK)
            break;
        int bad = breach(g, p, ref, mixed, &c, why, sizeof why);
        free_outs(mixed, nout);
        if (round == 0 && p == start)
            g->out_cosine_before = c;
        if (!bad)
            break;
        g->breaches++;
        if (gave_up || !plan_is_narrow(p)) {
            /* nothing narrow left to move: the breach is not the narrow type's */
            record(g, "unverified", why, p, 0, -1, c);
            break;
        }
        int node = -1;
        if (round < g->o.rounds && (st = locate(e, g, p, in, ref, threads, &node)) != TDM_OK)
            break;
        if (node < 0) {
            /* the rounds ran out, or no single node crosses: all off */
            if ((st = give_up(e, g, a, v, po, &p, why, c)) != TDM_OK)
                break;
            gave_up = 1;
            continue;
        }
        char detail[700];
        snprintf(detail, sizeof detail,
                 "precision guard: output verification on %s: with this node and those before it on %s the "
                 "outputs breach the end-to-end rule (%.400s)",
                 where, plan_device_name(p, p->nodes[node].device), why);
        if (plan_options_add_refusal(po, p->g->nodes[node].name, plan_device_name(p, p->nodes[node].device), detail)) {
            st = err_set(e, TDM_E_NOMEM, "out of memory");
            break;
        }
        size_t m = 0;
        const tdm_plan *before = p;
        if ((st = replan(e, a, v, p, po, detail, &m, &p)) != TDM_OK)
            break;
        record(g, "verify", why, p, m, node, c);
        if (p == before) {
            if ((st = give_up(e, g, a, v, po, &p, "re-planning did not move the node", c)) != TDM_OK)
                break;
            gave_up = 1;
        }
    }
    free_outs(mixed, nout);
    mem_free(mixed);
    *pp = p;
    return st;
}

tdm_status guard_calibrate(tdm_err *e, guard_state *g, adapt_state *a, adapt_variant *v,
                           const tdm_tensor *const *const *sets, size_t n_sets, int threads)
{
    if (!g->active || !n_sets)
        return TDM_OK;
    pthread_mutex_lock(&g->lock);
    double t0 = now_ms();
    const tdm_plan *p = adapt_variant_plan(a, v), *start = p;
    int nout = p->g->n_outputs;
    tdm_tensor **ref = NULL;
    char *probe = NULL, *more = NULL;
    plan_options po;
    tdm_status st = TDM_OK;
    size_t moved = 0, i;
    plan_options_init(&po);
    /* the kept rescues first, on every set */
    for (i = 0; g->rescues && i < n_sets && !st; i++)
        st = check_rescues(e, g, a, v, &p, sets[i], threads, "calibration", (int)i + 1);
    if (st || !g->narrow)
        goto finish;
    start = p;
    ref = mem_calloc(n_sets * ((size_t)nout + 1), sizeof *ref);
    if (!ref || plan_options_copy(&p->opts, &po) != TDM_OK) {
        st = err_set(e, TDM_E_NOMEM, "out of memory");
        goto done;
    }
    /* the probe on every set, its figures combined worst-first */
    for (i = 0; i < n_sets; i++) {
        if ((st = plan_probe(e, p, sets[i], threads, probe ? &more : &probe, ref + i * ((size_t)nout + 1))) !=
                TDM_OK ||
            (more && (st = plan_probe_merge(e, &probe, more)) != TDM_OK))
            goto done;
        mem_free(more);
        more = NULL;
    }
    mem_free(po.probe);
    po.probe = probe;
    probe = NULL;
    {
        char detail[300], why[80];
        snprintf(detail, sizeof detail, "precision guard: the probe on %zu calibration input set%s refuses nodes whose "
                 "range or error does not fit a narrower device type", n_sets, n_sets == 1 ? "" : "s");
        if ((st = replan(e, a, v, p, &po, detail, &moved, &p)) != TDM_OK)
            goto done;
        snprintf(why, sizeof why, "probe on %zu calibration input set%s", n_sets, n_sets == 1 ? "" : "s");
        record(g, "probe", why, p, moved, -1, NAN);
    }
    for (i = 0; i < n_sets; i++) {
        char where[64];
        snprintf(where, sizeof where, "calibration input set %zu", i + 1);
        if ((st = verify(e, g, a, v, &po, &p, start, sets[i], ref + i * ((size_t)nout + 1), threads, where)) !=
            TDM_OK)
            goto done;
    }
    g->probed = 1;
finish:
    if (st)
        goto done;
    g->calib_sets = n_sets;
    g->calib_ms = now_ms() - t0;
    if (p != start)
        count_moved(g, p);
done:
    for (i = 0; ref && i < n_sets; i++)
        free_outs(ref + i * ((size_t)nout + 1), nout);
    mem_free(ref);
    mem_free(probe);
    mem_free(more);
    plan_options_free(&po);
    pthread_mutex_unlock(&g->lock);
    return st;
}

tdm_status guard_run(tdm_err *e, guard_state *g, adapt_state *a, adapt_variant *v, const tdm_tensor *const *in,
                     tdm_tensor **out, int threads, exec_stats *stats)
{
    pthread_mutex_lock(&g->lock);
    double t0 = now_ms(), run_ms = 0;
    const tdm_plan *p = adapt_variant_plan(a, v), *start = p;
    int nout = p->g->n_outputs, first = !g->first_done, probe_now = first && !g->probed;
    tdm_tensor **ref = NULL;
    plan_options po;
    char *probe = NULL;
    tdm_status st = TDM_OK;
    size_t moved = 0;
    plan_options_init(&po);
    /* the kept rescues on the values this run sends them, before anything runs */
    if (first && g->rescues && (st = check_rescues(e, g, a, v, &p, in, threads, "first-run", 0)) != TDM_OK)
        goto done;
    if (!g->narrow) {
        double r0 = now_ms();
        if ((st = adapt_run(e, a, v, in, out, threads, stats)) == TDM_OK)
            run_ms = now_ms() - r0;
        goto done;
    }
    start = p;
    ref = mem_calloc((size_t)nout + 1, sizeof *ref);
    if (!ref) {
        st = err_set(e, TDM_E_NOMEM, "out of memory");
        goto done;
    }
    if ((st = plan_options_copy(&p->opts, &po)) != TDM_OK) {
        st = err_set(e, TDM_E_NOMEM, "out of memory");
        goto done;
    }
    if (probe_now) {
        /* the probe: ranges and per-node errors on these inputs */
        if ((st = plan_probe(e, p, in, threads, &probe, ref)) != TDM_OK)
            goto done;
        mem_free(po.probe);
        po.probe = probe;
        probe = NULL;
        char detail[300];
        snprintf(detail, sizeof detail, "precision guard: the probe on the first run's inputs refuses nodes whose "
                 "range or error does not fit a narrower device type");
        if ((st = replan(e, a, v, p, &po, detail, &moved, &p)) != TDM_OK)
            goto done;
        record(g, "probe", NULL, p, moved, -1, NAN);
    }
    if (!probe_now && (st = plan_run_mixed(e, p, in, -1, threads, ref)) != TDM_OK)
        goto done;
    /* verification rounds run the plan node by node (plan_run_mixed: the
     * executors' kernels and rounding, no events); the run the caller gets
     * is made once, after them */
    {
        char where[64];
        snprintf(where, sizeof where, "run %llu", (unsigned long long)g->runs);
        if ((st = verify(e, g, a, v, &po, &p, start, in, ref, threads, where)) != TDM_OK)
            goto done;
    }
    {
        double c, r0 = now_ms();
        char why[400];
        if ((st = adapt_run(e, a, v, in, out, threads, stats)) != TDM_OK)
            goto done;
        run_ms = now_ms() - r0;
        int bad = breach(g, p, ref, out, &c, why, sizeof why);
        if (bad && plan_is_narrow(p)) {
            /* the executor's run breaches where the node-by-node check did
             * not: move every narrow node off and run again */
            free_outs(out, nout);
            if ((st = give_up(e, g, a, v, &po, &p, why, c)) != TDM_OK)
                goto done;
            r0 = now_ms();
            if ((st = adapt_run(e, a, v, in, out, threads, stats)) != TDM_OK)
                goto done;
            run_ms = now_ms() - r0;
            if (breach(g, p, ref, out, &c, why, sizeof why))
                record(g, "unverified", why, p, 0, -1, c);
        } else if (bad) {
            record(g, "unverified", why, p, 0, -1, c);
        }
        g->out_cosine_after = c;
    }
done:
    if (!st) {
        double extra = now_ms() - t0 - run_ms;
        if (first)
            g->first_ms = extra;
        g->guard_ms += extra;
        g->first_done = 1;
        if (p != start && g->narrow)
            count_moved(g, p);
    }
    free_outs(ref, nout);
    mem_free(ref);
    mem_free(probe);
    plan_options_free(&po);
    pthread_mutex_unlock(&g->lock);
    return st;
}

char *guard_json(guard_state *g)
{
    cJSON *o = cJSON_CreateObject();
    char *text = NULL, *s = NULL;
    if (!o)
        return NULL;
    pthread_mutex_lock(&g->lock);
    cJSON_AddBoolToObject(o, "active", g->active);
    cJSON_AddStringToObject(o, "verify", tdm_verify_mode_name((tdm_verify_mode)g->o.mode));
    if (g->o.mode == GUARD_EVERY)
        cJSON_AddNumberToObject(o, "every", g->o.every);
    cJSON_AddNumberToObject(o, "output_min_cosine", g->o.out_cosine);
    cJSON_AddNumberToObject(o, "rounds", g->o.rounds);
    cJSON_AddNumberToObject(o, "checks", (double)g->checks);
    cJSON_AddNumberToObject(o, "breaches", (double)g->breaches);
    cJSON_AddNumberToObject(o, "moved_nodes", (double)g->moved);
    cJSON_AddBoolToObject(o, "fallback_all", g->gave_up);
    if (g->first[0])
        cJSON_AddStringToObject(o, "first_moved", g->first);
    if (g->rescue_checks || g->rescues) {
        cJSON_AddNumberToObject(o, "rescue_checks", (double)g->rescue_checks);
        cJSON_AddNumberToObject(o, "rescues_dropped", (double)g->rescues_dropped);
        if (g->rescue_first[0])
            cJSON_AddStringToObject(o, "rescue_dropped_first", g->rescue_first);
    }
    if (g->rescues_unchecked)
        cJSON_AddNumberToObject(o, "rescues_unchecked", (double)g->rescues_unchecked);
    if (g->calib_sets) {
        cJSON_AddNumberToObject(o, "calibration_input_sets", (double)g->calib_sets);
        cJSON_AddNumberToObject(o, "calibration_ms", g->calib_ms);
    }
    if (g->first_done) {
        cJSON_AddNumberToObject(o, "first_run_extra_ms", g->first_ms);
        cJSON_AddNumberToObject(o, "extra_ms", g->guard_ms);
    }
    if (isfinite(g->out_cosine_before))
        cJSON_AddNumberToObject(o, "output_cosine_before", g->out_cosine_before);
    if (isfinite(g->out_cosine_after))
        cJSON_AddNumberToObject(o, "output_cosine_after", g->out_cosine_after);
    if (g->history)
        cJSON_AddItemReferenceToObject(o, "decisions", g->history);
    pthread_mutex_unlock(&g->lock);
    text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (text) {
        s = mem_strdup(text);
        cJSON_free(text);
    }
    return s;
}
