/* The circuit breaker (rules in adapt.h). */
#define _POSIX_C_SOURCE 200809L
#include "run/adapt.h"
#include "run/observe.h"
#include "core/mem.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

tdm_status adapt_init(tdm_err *e, adapt_state *a, const adapt_opts *o)
{
    memset(a, 0, sizeof *a);
    a->o = *o;
    a->on = o->faults > 0;
    if (!a->on)
        return TDM_OK;
    if (pthread_mutex_init(&a->lock, NULL))
        return err_set(e, TDM_E_NOMEM, "cannot create a mutex");
    if (!(a->times = mem_calloc((size_t)o->faults, sizeof *a->times))) {
        pthread_mutex_destroy(&a->lock);
        a->on = 0;
        return err_set(e, TDM_E_NOMEM, "out of memory");
    }
    return TDM_OK;
}

void adapt_free(adapt_state *a)
{
    if (!a || !a->on)
        return;
    exec_prog_free(a->fallback_prog);
    plan_free(a->fallback);
    mem_free(a->times);
    pthread_mutex_destroy(&a->lock);
    memset(a, 0, sizeof *a);
}

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
    if (st)
        err_prefix(e, "the circuit breaker's cpu plan: ");
    return st;
}

tdm_status adapt_run(tdm_err *e, adapt_state *a, const tdm_plan *plan, const exec_prog *prog,
                     const tdm_tensor *const *in, tdm_tensor **out, int threads, exec_stats *stats)
{
    if (!a->on)
        return exec_prog_run(e, prog, in, out, threads, stats);
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
    tdm_status st;
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
            return st;
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
    pthread_mutex_lock(&a->lock);
    if (!a->fallback_prog && !a->last_fault[0])
        snprintf(a->last_fault, sizeof a->last_fault, "none yet");
    int built = !a->fallback_prog;
    st = ensure_fallback(e, a, plan);
    /* The fallback program reports to the same observer, and its creation
     * is a re-plan. */
    tdm_observer_fn obs_fn = NULL;
    void *obs_user = NULL;
    exec_prog_get_observer(prog, &obs_fn, &obs_user);
    if (!st && built)
        exec_prog_set_observer(a->fallback_prog, obs_fn, obs_user);
    if (!st && built && obs_fn) {
        tdm_event ev;
        memset(&ev, 0, sizeof ev);
        ev.kind = TDM_EVENT_REPLAN;
        ev.name = ev.op_type = ev.device = ev.from = ev.direction = ev.reason = ev.preferred = "";
        ev.detail = a->last_fault;
        ev.device = "cpu";
        ev.modeled_ms = -1;
        ev.start_ns = ev.end_ns = (uint64_t)(now_ms() * 1e6);
        obs_fn(obs_user, &ev);
    }
    if (reexec)
        a->reexecuted++;
    else
        a->fallback_runs++;
    const exec_prog *fp = a->fallback_prog;
    pthread_mutex_unlock(&a->lock);
    if (st)
        return st;
    err_clear(e);
    return exec_prog_run(e, fp, in, out, threads, stats);
}

char *adapt_json(adapt_state *a)
{
    cJSON *o = cJSON_CreateObject();
    char *text = NULL, *ledger = NULL;
    if (!o)
        return NULL;
    if (a->on)
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
    if (a->on)
        pthread_mutex_unlock(&a->lock);
    char *t = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (t) {
        text = mem_strdup(t);
        cJSON_free(t);
    }
    return text;
}
