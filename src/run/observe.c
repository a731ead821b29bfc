/* The event hook (observe.h) and the metrics observer (tandem.h). */
#define _POSIX_C_SOURCE 200809L
#include "run/observe.h"
#include "core/mem.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

uint64_t obs_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void obs_begin(obs_mark *m, const exec_stats *st)
{
    m->t0 = obs_now_ns();
    m->copies = st ? st->copies : 0;
    m->bytes = st ? st->copy_bytes + st->weight_bytes : 0;
}

static void event_init(tdm_event *ev, tdm_event_kind kind)
{
    memset(ev, 0, sizeof *ev);
    ev->kind = kind;
    ev->name = ev->op_type = ev->device = ev->from = ev->direction = ev->reason = ev->preferred = ev->detail = "";
    ev->modeled_ms = -1;
    ev->device_ms = -1;
}

static void node_fields(const obs_hook *h, tdm_event *ev, int n, int d, uint64_t t0, uint64_t t1)
{
    const tdm_plan *p = h->plan;
    const gr_node *node = &p->g->nodes[n];
    const plan_node *pn = &p->nodes[n];
    ev->name = node->name ? node->name : "";
    ev->op_type = node->op_type ? node->op_type : "";
    ev->device = plan_device_name(p, d);
    ev->reason = tdm_reason_str(pn->reason);
    ev->preferred = plan_device_name(p, pn->preferred >= 0 ? pn->preferred : d);
    ev->fallback = pn->fallback;
    ev->node_index = (size_t)n;
    ev->start_ns = t0;
    ev->end_ns = t1 ? t1 : obs_now_ns();
    if (pn->est_modeled && pn->est_ms >= 0 && d == pn->device)
        ev->modeled_ms = pn->est_ms;
}

void obs_node(const obs_hook *h, int n, int d, uint64_t t0, tdm_tensor *const *vals)
{
    obs_node_timed(h, n, d, t0, vals, -1);
}

void obs_node_timed(const obs_hook *h, int n, int d, uint64_t t0, tdm_tensor *const *vals, double device_ms)
{
    obs_node_ended(h, n, d, t0, 0, vals, device_ms);
}

void obs_node_ended(const obs_hook *h, int n, int d, uint64_t t0, uint64_t t1, tdm_tensor *const *vals,
                    double device_ms)
{
    if (!h || !h->fn)
        return;
    const gr_graph *g = h->plan->g;
    const gr_node *node = &g->nodes[n];
    const tdm_tensor *small[32];
    const tdm_tensor **arr = small;
    size_t need = (size_t)node->n_inputs + (size_t)node->n_outputs;
    tdm_event ev;
    event_init(&ev, TDM_EVENT_NODE);
    node_fields(h, &ev, n, d, t0, t1);
    ev.device_ms = device_ms;
    if (need > sizeof small / sizeof small[0] && !(arr = mem_calloc(need, sizeof *arr)))
        arr = NULL;
    for (int i = 0; i < node->n_inputs + node->n_outputs; i++) {
        int out = i >= node->n_inputs;
        int v = out ? node->outputs[i - node->n_inputs] : node->inputs[i];
        const tdm_tensor *t = v >= 0 && vals ? vals[v] : NULL;
        size_t bytes = 0;
        int known = 0;
        if (t)
            bytes = t->nbytes;
        else if (v >= 0)
            bytes = plan_value_bytes(g, v, &known);
        if (out)
            ev.bytes_out += bytes;
        else
            ev.bytes_in += bytes;
        if (arr)
            arr[i] = t;
    }
    if (arr) {
        ev.n_inputs = node->n_inputs;
        ev.n_outputs = node->n_outputs;
        ev.inputs = arr;
        ev.outputs = arr + node->n_inputs;
    }
    h->fn(h->user, &ev);
    if (arr != small)
        mem_free((void *)arr);
}

void obs_copy(const obs_hook *h, const plan_copy *c, const obs_mark *m, const exec_stats *st)
{
    if (!h || !h->fn || !st || st->copies == m->copies)
        return;
    const tdm_plan *p = h->plan;
    int cpu = (int)p->devs->n - 1;
    tdm_event ev;
    event_init(&ev, TDM_EVENT_COPY);
    ev.name = p->g->values[c->value].name ? p->g->values[c->value].name : "";
    ev.device = plan_device_name(p, c->to);
    ev.from = plan_device_name(p, c->from);
    ev.direction = c->from == cpu ? "h2d" : c->to == cpu ? "d2h" : "d2d";
    ev.weight = c->weight;
    ev.start_ns = m->t0;
    ev.end_ns = obs_now_ns();
    ev.bytes_in = ev.bytes_out = st->copy_bytes + st->weight_bytes - m->bytes;
    if (c->est_modeled && c->est_ms >= 0)
        ev.modeled_ms = c->est_ms;
    ev.node_index = (size_t)-1;
    h->fn(h->user, &ev);
}

void obs_fault(const obs_hook *h, int n, int d, uint64_t t0, const char *msg)
{
    if (!h || !h->fn)
        return;
    tdm_event ev;
    event_init(&ev, TDM_EVENT_FAULT);
    node_fields(h, &ev, n, d, t0, 0);
    ev.modeled_ms = -1;
    ev.status = TDM_E_DEVICE;
    ev.detail = msg ? msg : "";
    h->fn(h->user, &ev);
}

void obs_run(const obs_hook *h, uint64_t t0, tdm_status st)
{
    if (!h || !h->fn)
        return;
    tdm_event ev;
    event_init(&ev, TDM_EVENT_RUN);
    ev.start_ns = t0;
    ev.end_ns = obs_now_ns();
    ev.status = (int)st;
    ev.node_index = (size_t)-1;
    h->fn(h->user, &ev);
}

/* ------------------------------------------------------- node dataflow */

size_t tdm_plan_node_input_count(const tdm_plan *p, size_t i)
{
    return p && i < (size_t)p->n_nodes ? (size_t)p->g->nodes[i].n_inputs : 0;
}

size_t tdm_plan_node_output_count(const tdm_plan *p, size_t i)
{
    return p && i < (size_t)p->n_nodes ? (size_t)p->g->nodes[i].n_outputs : 0;
}

static const char *value_name(const gr_graph *g, int v) { return v >= 0 && g->values[v].name ? g->values[v].name : ""; }

const char *tdm_plan_node_input(const tdm_plan *p, size_t i, size_t k)
{
    if (k >= tdm_plan_node_input_count(p, i))
        return NULL;
    return value_name(p->g, p->g->nodes[i].inputs[k]);
}

const char *tdm_plan_node_output(const tdm_plan *p, size_t i, size_t k)
{
    if (k >= tdm_plan_node_output_count(p, i))
        return NULL;
    return value_name(p->g, p->g->nodes[i].outputs[k]);
}

/* ------------------------------------------------------------- metrics */

typedef struct metrics_dev {
    char *name;
    uint64_t busy_ns, nodes;
} metrics_dev;

struct tdm_metrics {
    pthread_mutex_t lock;
    tdm_metrics_summary s;
    metrics_dev *devs;
    size_t n_devs, cap_devs;
    int oom;
    uint64_t admit_waits, admit_wait_ns, admit_max_wait_ns, admit_refused; /* TDM_EVENT_ADMIT */
};

tdm_status tdm_metrics_create(tdm_metrics **out)
{
    if (!out)
        return TDM_E_USAGE;
    *out = mem_calloc(1, sizeof **out);
    if (!*out)
        return TDM_E_NOMEM;
    if (pthread_mutex_init(&(*out)->lock, NULL)) {
        mem_free(*out);
        *out = NULL;
        return TDM_E_NOMEM;
    }
    return TDM_OK;
}

void tdm_metrics_destroy(tdm_metrics *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n_devs; i++)
        mem_free(m->devs[i].name);
    mem_free(m->devs);
    pthread_mutex_destroy(&m->lock);
    mem_free(m);
}

static metrics_dev *metrics_device(tdm_metrics *m, const char *name)
{
    for (size_t i = 0; i < m->n_devs; i++)
        if (strcmp(m->devs[i].name, name) == 0)
            return &m->devs[i];
    if (mem_grow((void **)&m->devs, &m->cap_devs, m->n_devs + 1, sizeof *m->devs))
        return NULL;
    metrics_dev *d = &m->devs[m->n_devs];
    memset(d, 0, sizeof *d);
    if (!(d->name = mem_strdup(name)))
        return NULL;
    m->n_devs++;
    return d;
}

static int reason_index(const char *r)
{
    for (int k = 0; k < TDM_REASON_COUNT && k < 16; k++)
        if (strcmp(tdm_reason_str((tdm_reason)k), r) == 0)
            return k;
    return -1;
}

void tdm_metrics_observe(void *user, const tdm_event *ev)
{
    tdm_metrics *m = user;
    if (!m || !ev)
        return;
    uint64_t dt = ev->end_ns > ev->start_ns ? ev->end_ns - ev->start_ns : 0;
    pthread_mutex_lock(&m->lock);
    switch (ev->kind) {
    case TDM_EVENT_NODE: {
        m->s.nodes++;
        m->s.node_ns += dt;
        if (ev->fallback)
            m->s.fallback_ns += dt;
        int r = reason_index(ev->reason);
        if (r >= 0)
            m->s.nodes_by_reason[r]++;
        break;
    }
    case TDM_EVENT_COPY:
        m->s.copies++;
        m->s.copy_bytes += ev->bytes_in;
        m->s.copy_ns += dt;
        break;
    case TDM_EVENT_FAULT:
        m->s.faults++;
        break;
    case TDM_EVENT_RUN:
        m->s.runs++;
        if (ev->status)
            m->s.run_failures++;
        m->s.wall_ns += dt;
        break;
    case TDM_EVENT_REPLAN:
        m->s.replans++;
        break;
    case TDM_EVENT_ADMIT:
        if (ev->status) {
            m->admit_refused++;
            break;
        }
        m->admit_waits++;
        m->admit_wait_ns += dt;
        if (dt > m->admit_max_wait_ns)
            m->admit_max_wait_ns = dt;
        break;
    }
    if (ev->kind == TDM_EVENT_NODE) {
        metrics_dev *d = metrics_device(m, ev->device);
        if (d) {
            d->busy_ns += dt;
            d->nodes++;
        } else {
            m->oom = 1;
        }
    }
    m->s.fallback_ratio = m->s.node_ns ? (double)m->s.fallback_ns / (double)m->s.node_ns : 0;
    pthread_mutex_unlock(&m->lock);
}

tdm_status tdm_metrics_get(const tdm_metrics *m, tdm_metrics_summary *out)
{
    if (!m || !out)
        return TDM_E_USAGE;
    pthread_mutex_lock((pthread_mutex_t *)&m->lock);
    *out = m->s;
    pthread_mutex_unlock((pthread_mutex_t *)&m->lock);
    return TDM_OK;
}

tdm_status tdm_metrics_admission(const tdm_metrics *m, uint64_t *waits, uint64_t *wait_ns, uint64_t *max_wait_ns,
                                 uint64_t *refused)
{
    if (!m)
        return TDM_E_USAGE;
    pthread_mutex_lock((pthread_mutex_t *)&m->lock);
    if (waits)
        *waits = m->admit_waits;
    if (wait_ns)
        *wait_ns = m->admit_wait_ns;
    if (max_wait_ns)
        *max_wait_ns = m->admit_max_wait_ns;
    if (refused)
        *refused = m->admit_refused;
    pthread_mutex_unlock((pthread_mutex_t *)&m->lock);
    return TDM_OK;
}

size_t tdm_metrics_device_count(const tdm_metrics *m) { return m ? m->n_devs : 0; }

tdm_status tdm_metrics_device(const tdm_metrics *m, size_t i, const char **name, uint64_t *busy_ns, uint64_t *nodes)
{
    if (!m || i >= m->n_devs)
        return TDM_E_USAGE;
    if (name)
        *name = m->devs[i].name;
    if (busy_ns)
        *busy_ns = m->devs[i].busy_ns;
    if (nodes)
        *nodes = m->devs[i].nodes;
    return TDM_OK;
}

typedef struct sbuf {
    char *p;
    size_t n, cap;
    int bad;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...)
{
    va_list ap;
    if (b->bad)
        return;
    for (;;) {
        size_t room = b->cap - b->n;
        va_start(ap, fmt);
        int w = b->p ? vsnprintf(b->p + b->n, room, fmt, ap) : -2;
        va_end(ap);
        if (w == -1) {
            b->bad = 1;
            return;
        }
        if (w >= 0 && (size_t)w < room) {
            b->n += (size_t)w;
            return;
        }
        size_t want = b->cap ? b->cap * 2 : 1024;
        if (w >= 0 && want < b->n + (size_t)w + 1)
            want = b->n + (size_t)w + 1;
        char *q = mem_realloc(b->p, want);
        if (!q) {
            b->bad = 1;
            return;
        }
        b->p = q;
        b->cap = want;
    }
}

/* A label value with \, " and newline escaped. */
static void sb_label(sbuf *b, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\' || *s == '"')
            sb_printf(b, "\\%c", *s);
        else if (*s == '\n')
            sb_printf(b, "\\n");
        else
            sb_printf(b, "%c", *s);
    }
}

static void sb_metric(sbuf *b, const char *name, const char *type, const char *help, double v)
{
    sb_printf(b, "# HELP tandem_%s %s\n# TYPE tandem_%s %s\ntandem_%s %.9g\n", name, help, name, type, name, v);
}

tdm_status tdm_metrics_prometheus(const tdm_metrics *mc, char **text)
{
    if (!mc || !text)
        return TDM_E_USAGE;
    tdm_metrics *m = (tdm_metrics *)mc;
    sbuf b = {NULL, 0, 0, 0};
    *text = NULL;
    pthread_mutex_lock(&m->lock);
    const tdm_metrics_summary *s = &m->s;
    sb_metric(&b, "runs_total", "counter", "Runs completed (failed ones included).", (double)s->runs);
    sb_metric(&b, "run_failures_total", "counter", "Runs that failed.", (double)s->run_failures);
    sb_metric(&b, "run_seconds_total", "counter", "Wall time of the runs.", (double)s->wall_ns / 1e9);
    sb_metric(&b, "nodes_total", "counter", "Nodes run.", (double)s->nodes);
    sb_metric(&b, "copies_total", "counter", "Tensor copies between devices.", (double)s->copies);
    sb_metric(&b, "copy_bytes_total", "counter", "Bytes copied between devices.", (double)s->copy_bytes);
    sb_metric(&b, "copy_seconds_total", "counter", "Time spent copying between devices.", (double)s->copy_ns / 1e9);
    sb_metric(&b, "fallback_seconds_total", "counter", "Time of nodes that fell back from their first device.",
              (double)s->fallback_ns / 1e9);
    sb_metric(&b, "fallback_ratio", "gauge", "Fallback node time over all node time.", s->fallback_ratio);
    sb_metric(&b, "device_faults_total", "counter", "Device failures at run time.", (double)s->faults);
    sb_metric(&b, "replans_total", "counter", "Re-plans of the session.", (double)s->replans);
    sb_metric(&b, "run_admission_waits_total", "counter", "Runs that waited for device memory (admission).",
              (double)m->admit_waits);
    sb_metric(&b, "run_admission_wait_seconds_total", "counter", "Time runs waited for device memory.",
              (double)m->admit_wait_ns / 1e9);
    sb_metric(&b, "run_admission_wait_seconds_max", "gauge", "The longest wait of a run for device memory.",
              (double)m->admit_max_wait_ns / 1e9);
    sb_metric(&b, "run_admission_refused_total", "counter", "Runs refused because the admission queue was full.",
              (double)m->admit_refused);
    sb_printf(&b, "# HELP tandem_device_busy_seconds_total Time nodes ran on each device.\n"
                  "# TYPE tandem_device_busy_seconds_total counter\n");
    for (size_t i = 0; i < m->n_devs; i++) {
        sb_printf(&b, "tandem_device_busy_seconds_total{device=\"");
        sb_label(&b, m->devs[i].name);
        sb_printf(&b, "\"} %.9g\n", (double)m->devs[i].busy_ns / 1e9);
    }
    sb_printf(&b, "# HELP tandem_device_nodes_total Nodes run on each device.\n"
                  "# TYPE tandem_device_nodes_total counter\n");
    for (size_t i = 0; i < m->n_devs; i++) {
        sb_printf(&b, "tandem_device_nodes_total{device=\"");
        sb_label(&b, m->devs[i].name);
        sb_printf(&b, "\"} %llu\n", (unsigned long long)m->devs[i].nodes);
    }
    sb_printf(&b, "# HELP tandem_nodes_by_reason_total Nodes run, by the reason code of their placement.\n"
                  "# TYPE tandem_nodes_by_reason_total counter\n");
    for (int k = 0; k < TDM_REASON_COUNT && k < 16; k++)
        sb_printf(&b, "tandem_nodes_by_reason_total{reason=\"%s\"} %llu\n", tdm_reason_str((tdm_reason)k),
                  (unsigned long long)s->nodes_by_reason[k]);
    int oom = m->oom;
    pthread_mutex_unlock(&m->lock);
    if (b.bad || oom || !b.p) {
        mem_free(b.p);
        return TDM_E_NOMEM;
    }
    *text = b.p;
    return TDM_OK;
}
