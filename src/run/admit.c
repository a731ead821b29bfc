/* Admission of concurrent runs to the devices' memory (see admit.h). */
#include "run/admit.h"
#include "core/mem.h"
#include "run/observe.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

struct admit_ctl {
    pthread_mutex_t lock;
    pthread_cond_t turn;
    size_t n;              /* devices with a finite capacity (cpu never) */
    char **names;
    uint64_t *cap, *used;  /* capacity; needs of the runs admitted */
    uint64_t next, serving; /* tickets: the next to hand out, the oldest not yet admitted */
    int max_queue;
};

void admit_free(admit_ctl *a)
{
    if (!a)
        return;
    for (size_t i = 0; i < a->n; i++)
        mem_free(a->names[i]);
    mem_free(a->names);
    mem_free(a->cap);
    mem_free(a->used);
    pthread_cond_destroy(&a->turn);
    pthread_mutex_destroy(&a->lock);
    mem_free(a);
}

static uint64_t capacity(const dev_instance *di)
{
    if (!di->dev.iface->memory_capacity)
        return 0;
    uint64_t c = di->dev.iface->memory_capacity(di->dev.ctx);
    return c == UINT64_MAX ? 0 : c;
}

tdm_status admit_create(tdm_err *e, const tdm_plan *plan, int max_queue, admit_ctl **out)
{
    *out = NULL;
    size_t D = plan->devs->n, n = 0;
    for (size_t d = 0; d + 1 < D; d++)
        n += capacity(&plan->devs->items[d]) > 0;
    if (!n)
        return TDM_OK;
    admit_ctl *a = mem_calloc(1, sizeof *a);
    if (!a)
        return err_set(e, TDM_E_NOMEM, "out of memory");
    if (pthread_mutex_init(&a->lock, NULL)) {
        mem_free(a);
        return err_set(e, TDM_E_NOMEM, "cannot create a mutex");
    }
    if (pthread_cond_init(&a->turn, NULL)) {
        pthread_mutex_destroy(&a->lock);
        mem_free(a);
        return err_set(e, TDM_E_NOMEM, "cannot create a condition variable");
    }
    a->max_queue = max_queue < 0 ? ADMIT_DEFAULT_QUEUE : max_queue;
    a->names = mem_calloc(n, sizeof *a->names);
    a->cap = mem_calloc(n, sizeof *a->cap);
    a->used = mem_calloc(n, sizeof *a->used);
    if (!a->names || !a->cap || !a->used)
        goto nomem;
    for (size_t d = 0; d + 1 < D; d++) {
        uint64_t c = capacity(&plan->devs->items[d]);
        if (!c)
            continue;
        if (!(a->names[a->n] = mem_strdup(plan_device_name(plan, (int)d))))
            goto nomem;
        a->cap[a->n++] = c;
    }
    *out = a;
    return TDM_OK;
nomem:
    admit_free(a);
    return err_set(e, TDM_E_NOMEM, "out of memory");
}

static uint64_t sat_add(uint64_t x, uint64_t y) { return x > UINT64_MAX - y ? UINT64_MAX : x + y; }

/* Bytes value v takes on device d of plan (as the executor reserves it:
 * at the device's storage type); *known 0 when its size is unknown. */
static uint64_t stored(const tdm_plan *plan, int v, int d, int *known)
{
    const gr_value *gv = &plan->g->values[v];
    size_t b = plan_value_bytes(plan->g, v, known);
    tdm_dtype dt = gv->init && gv->init->kind == TDM_KIND_TENSOR && !gv->is_input ? gv->init->dtype : gv->type.dtype;
    return *known ? dev_stored_bytes(&plan->devs->items[d], dt, b) : 0;
}

/* A run's need on each device of a (need[], a->n entries): everything it
 * may hold there at once, capped at the capacity. */
static tdm_status run_need(tdm_err *e, const admit_ctl *a, const tdm_plan *plan, uint64_t *need)
{
    int D = (int)plan->devs->n, cpu = D - 1;
    int *slot = mem_alloc((size_t)D * sizeof *slot);
    unsigned char *unknown = mem_calloc(a->n + 1, 1);
    if (!slot || !unknown) {
        mem_free(slot);
        mem_free(unknown);
        return err_set(e, TDM_E_NOMEM, "out of memory");
    }
    for (int d = 0; d < D; d++) {
        slot[d] = -1;
        for (size_t i = 0; d != cpu && i < a->n; i++)
            if (strcmp(a->names[i], plan_device_name(plan, d)) == 0)
                slot[d] = (int)i;
    }
    memset(need, 0, a->n * sizeof *need);
    int known;
    for (int c = 0; c < plan->n_copies; c++) {
        const plan_copy *pc = &plan->copies[c];
        if (pc->to == cpu || slot[pc->to] < 0)
            continue;
        uint64_t b = stored(plan, pc->value, pc->to, &known);
        need[slot[pc->to]] = sat_add(need[slot[pc->to]], b);
        unknown[slot[pc->to]] |= !known;
    }
    for (int n = 0; n < plan->n_nodes; n++) {
        int d = plan->nodes[n].device;
        if (d == cpu || slot[d] < 0)
            continue;
        const gr_node *node = &plan->g->nodes[n];
        for (int o = 0; o < node->n_outputs; o++) {
            if (node->outputs[o] < 0)
                continue;
            uint64_t b = stored(plan, node->outputs[o], d, &known);
            need[slot[d]] = sat_add(need[slot[d]], b);
            unknown[slot[d]] |= !known;
        }
    }
    for (size_t i = 0; i < a->n; i++)
        if (unknown[i] || need[i] > a->cap[i])
            need[i] = a->cap[i];
    mem_free(slot);
    mem_free(unknown);
    return TDM_OK;
}

/* The first device where need does not fit beside the admitted runs; -1: it fits. */
static int short_on(const admit_ctl *a, const uint64_t *need)
{
    for (size_t i = 0; i < a->n; i++)
        if (need[i] > a->cap[i] - a->used[i])
            return (int)i;
    return -1;
}

static void emit(tdm_observer_fn fn, void *user, const char *device, uint64_t bytes, uint64_t t0, uint64_t t1,
                 tdm_status st, const char *detail)
{
    if (!fn)
        return;
    tdm_event ev;
    memset(&ev, 0, sizeof ev);
    ev.kind = TDM_EVENT_ADMIT;
    ev.name = ev.op_type = ev.from = ev.direction = ev.reason = ev.preferred = "";
    ev.device = device;
    ev.start_ns = t0;
    ev.end_ns = t1;
    ev.bytes_in = bytes;
    ev.modeled_ms = -1;
    ev.device_ms = -1;
    ev.status = (int)st;
    ev.detail = detail ? detail : "";
    fn(user, &ev);
}

tdm_status admit_enter(tdm_err *e, admit_ctl *a, const tdm_plan *plan, tdm_observer_fn fn, void *user,
                       admit_ticket *t)
{
    t->held = NULL;
    if (!a)
        return TDM_OK;
    uint64_t *need = mem_calloc(a->n, sizeof *need);
    if (!need)
        return err_set(e, TDM_E_NOMEM, "out of memory");
    tdm_status st = run_need(e, a, plan, need);
    if (st) {
        mem_free(need);
        return st;
    }
    int any = 0;
    for (size_t i = 0; i < a->n; i++)
        any |= need[i] > 0;
    if (!any) {
        mem_free(need);
        return TDM_OK;
    }
    pthread_mutex_lock(&a->lock);
    uint64_t waiting = a->next - a->serving;
    int dev = short_on(a, need);
    if (!waiting && dev < 0) {
        /* nobody ahead and it fits: admitted at once */
        for (size_t i = 0; i < a->n; i++)
            a->used[i] += need[i];
        pthread_mutex_unlock(&a->lock);
        t->held = need;
        return TDM_OK;
    }
    if (dev < 0) /* queued behind others: name the first device it needs */
        for (size_t i = 0; i < a->n && dev < 0; i++)
            if (need[i])
                dev = (int)i;
    if (waiting >= (uint64_t)a->max_queue) {
        if (a->max_queue == 0)
            err_set(e, TDM_E_DEVICE,
                    "%s has %llu bytes free and this run needs %llu; the session queues no runs (max_queue 0)",
                    a->names[dev], (unsigned long long)(a->cap[dev] - a->used[dev]), (unsigned long long)need[dev]);
        else
            err_set(e, TDM_E_DEVICE,
                    "%s is busy: %llu run%s already wait%s for its memory, the session's bound (max_queue %d)",
                    a->names[dev], (unsigned long long)waiting, waiting == 1 ? "" : "s", waiting == 1 ? "s" : "",
                    a->max_queue);
        char device[128];
        snprintf(device, sizeof device, "%s", a->names[dev]);
        uint64_t bytes = need[dev];
        pthread_mutex_unlock(&a->lock);
        mem_free(need);
        uint64_t now = obs_now_ns();
        emit(fn, user, device, bytes, now, now, TDM_E_DEVICE, e->msg);
        return TDM_E_DEVICE;
    }
    uint64_t mine = a->next++, t0 = obs_now_ns();
    while (a->serving != mine || short_on(a, need) >= 0)
        pthread_cond_wait(&a->turn, &a->lock);
    a->serving++;
    for (size_t i = 0; i < a->n; i++)
        a->used[i] += need[i];
    /* the next in line may fit too */
    pthread_cond_broadcast(&a->turn);
    const char *name = a->names[dev]; /* owned by a, which outlives the run */
    pthread_mutex_unlock(&a->lock);
    t->held = need;
    emit(fn, user, name, need[dev], t0, obs_now_ns(), TDM_OK, NULL);
    return TDM_OK;
}

void admit_leave(admit_ctl *a, admit_ticket *t)
{
    if (!a || !t || !t->held)
        return;
    pthread_mutex_lock(&a->lock);
    for (size_t i = 0; i < a->n; i++)
        a->used[i] = t->held[i] > a->used[i] ? 0 : a->used[i] - t->held[i];
    pthread_cond_broadcast(&a->turn);
    pthread_mutex_unlock(&a->lock);
    mem_free(t->held);
    t->held = NULL;
}
