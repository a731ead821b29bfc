/* `tandem profile`, and the helpers the diagnostic commands share (cli.h
 * "diagnostics"): options, inputs, sessions, and the collector that turns
 * the session's events (tdm_session_set_observer) into per-node and
 * per-device figures and a Chrome trace. */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"
#include "json.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------ shared options */


void diag_common_init(diag_common *d)
{
    memset(d, 0, sizeof *d);
    cli_runopts_init(&d->ro);
}

void diag_common_free(diag_common *d)
{
    free((void *)d->inputs);
    free((void *)d->shapes);
    cli_runopts_free(&d->ro);
    memset(d, 0, sizeof *d);
}

int diag_common_opt(const char *cmd, int argc, char **argv, int *i, diag_common *d, int *rc)
{
    const char *val;
    int r;
    *rc = 0;
    if (cli_runopts_parse(cmd, argc, argv, i, &d->ro, rc))
        return 1;
    if (cli_adaptopts_parse(cmd, argc, argv, i, &d->ao, rc))
        return 1;
    if ((r = cli_opt_value(cmd, argc, argv, i, "--input", &val)) != 0) {
        const char *eq = r > 0 ? strrchr(val, '=') : NULL;
        if (r < 0 || !eq || eq == val || !eq[1]) {
            if (r > 0)
                cli_error("%s: --input expects NAME=FILE, not '%s'", cmd, val);
            *rc = EXIT_USAGE;
        } else if (cli_push_str(&d->inputs, &d->n_inputs, val)) {
            *rc = EXIT_INTERNAL;
        }
        return 1;
    }
    if ((r = cli_opt_value(cmd, argc, argv, i, "--shape", &val)) != 0) {
        const char *eq = r > 0 ? strrchr(val, '=') : NULL;
        if (r < 0 || !eq || eq == val) {
            if (r > 0)
                cli_error("%s: --shape expects NAME=DxD..., not '%s'", cmd, val);
            *rc = EXIT_USAGE;
        } else if (cli_push_str(&d->shapes, &d->n_shapes, val)) {
            *rc = EXIT_INTERNAL;
        }
        return 1;
    }
    if ((r = cli_opt_value(cmd, argc, argv, i, "--threads", &val)) != 0) {
        if (r < 0)
            *rc = EXIT_USAGE;
        d->threads_arg = val;
        return 1;
    }
    if (strcmp(argv[*i], "--random") == 0) /* the default: accepted for symmetry with run */
        return 1;
    return 0;
}

/* --shape NAME=... for input name: rank (or -1) and dims. */
static int shape_for(const char *cmd, const diag_common *d, const char *name, int *rank, int64_t *dims)
{
    *rank = -1;
    for (size_t k = 0; k < d->n_shapes; k++) {
        const char *eq = strrchr(d->shapes[k], '=');
        size_t l = (size_t)(eq - d->shapes[k]);
        if (strlen(name) == l && strncmp(d->shapes[k], name, l) == 0) {
            char nm[256];
            snprintf(nm, sizeof nm, "%.*s", (int)l, d->shapes[k]);
            if (cli_parse_dims(cmd, nm, eq + 1, rank, dims))
                return EXIT_USAGE;
        }
    }
    return 0;
}

void diag_close(diag_setup *x)
{
    for (size_t i = 0; x->ins && i < x->n_in; i++)
        tdm_tensor_destroy(x->ins[i]);
    free(x->ins);
    tdm_session_destroy(x->s);
    tdm_session_options_destroy(x->so);
    tdm_model_destroy(x->model);
    tdm_ctx_destroy(x->ctx);
    memset(x, 0, sizeof *x);
}

int diag_session(const char *cmd, diag_setup *x, const diag_common *d, const char *devices, tdm_session **out)
{
    tdm_session_options *so = NULL;
    tdm_status st;
    int rc = 0;
    *out = NULL;
    if ((st = tdm_session_options_create(&so)) != TDM_OK)
        return cli_fail(st, NULL, "out of memory");
    if (devices) {
        if ((st = tdm_session_options_set_devices(so, devices)) != TDM_OK)
            rc = cli_fail(st, NULL, "--devices: the list is not accepted");
    } else {
        /* profile times the fused execution and reports each fused-away
         * node right after its head (zero time, counted in the head's);
         * compare and extract need every value, so they run unfused. */
        if (strcmp(cmd, "profile") == 0 && tdm_session_options_set_fusion(so, TDM_FUSION_OBSERVED) != TDM_OK)
            rc = cli_fail(TDM_E_NOMEM, NULL, "out of memory");
        else
            rc = cli_runopts_apply(&d->ro, so);
        if (!rc)
            rc = cli_adaptopts_apply(&d->ao, so);
    }
    long long threads = 0;
    if (!rc && cli_threads(cmd, d->threads_arg, &threads))
        rc = EXIT_USAGE;
    if (!rc && threads && (st = tdm_session_options_set_threads(so, (int)threads)) != TDM_OK)
        rc = cli_fail(st, NULL, "--threads: the value is not accepted");
    /* the inputs' shapes fix the dynamic dimensions the plan sees */
    for (size_t i = 0; !rc && i < x->n_in; i++) {
        tdm_value_info vi;
        if (!x->ins[i] || tdm_model_input(x->model, i, &vi) != TDM_OK ||
            tdm_tensor_kind(x->ins[i]) != TDM_KIND_TENSOR)
            continue;
        int dyn = vi.rank < 0;
        for (int k = 0; k < vi.rank; k++)
            dyn |= vi.dims[k].value < 0;
        if (!devices && d->ao.has_cache && d->ao.cache > 0)
            dyn = 0; /* the plan cache plans per shape */
        if (dyn && (st = tdm_session_options_set_shape(so, vi.name, tdm_tensor_rank(x->ins[i]),
                                                       tdm_tensor_dims(x->ins[i]))) != TDM_OK)
            rc = cli_fail(st, NULL, "out of memory");
    }
    (void)cmd;
    if (!rc && (st = tdm_session_create(x->ctx, x->model, so, out)) != TDM_OK)
        rc = cli_session_fail(x->ctx, x->model, so, st);
    tdm_session_options_destroy(so);
    return rc;
}

int diag_open(const char *cmd, const diag_common *d, diag_setup *x)
{
    tdm_status st;
    int rc;
    memset(x, 0, sizeof *x);
    if ((st = tdm_ctx_create(&x->ctx)) != TDM_OK)
        return cli_fail(st, NULL, "out of memory");
    if ((st = tdm_model_load(x->ctx, d->model, &x->model)) != TDM_OK)
        return cli_fail(st, NULL, tdm_ctx_error(x->ctx));
    x->n_in = tdm_model_input_count(x->model);
    x->n_out = tdm_model_output_count(x->model);
    x->ins = calloc(x->n_in + 1, sizeof *x->ins);
    if (!x->ins)
        return cli_fail(TDM_E_NOMEM, NULL, "out of memory");
    for (size_t k = 0; k < d->n_inputs; k++) {
        const char *eq = strrchr(d->inputs[k], '=');
        size_t l = (size_t)(eq - d->inputs[k]), j;
        for (j = 0; j < x->n_in; j++) {
            tdm_value_info vi;
            if (tdm_model_input(x->model, j, &vi) == TDM_OK && strlen(vi.name) == l &&
                strncmp(vi.name, d->inputs[k], l) == 0)
                break;
        }
        if (j == x->n_in) {
            cli_error("%s: --input names '%.*s', which is not an input of the model", cmd, (int)l, d->inputs[k]);
            return EXIT_INVALID;
        }
        tdm_tensor_destroy(x->ins[j]);
        x->ins[j] = NULL;
        if ((st = tdm_value_load(x->ctx, eq + 1, NULL, &x->ins[j])) != TDM_OK)
            return cli_fail(st, NULL, tdm_ctx_error(x->ctx));
    }
    uint64_t rng = 42;
    for (size_t j = 0; j < x->n_in; j++) {
        tdm_value_info vi;
        int rank;
        int64_t dims[CLI_MAX_RANK];
        if (x->ins[j] || tdm_model_input(x->model, j, &vi) != TDM_OK)
            continue;
        if ((rc = shape_for(cmd, d, vi.name, &rank, dims)) != 0)
            return rc;
        if ((rc = cli_random_input(&vi, rank, dims, "the random filler", &rng, &x->ins[j])) != 0)
            return rc;
    }
    if ((rc = diag_session(cmd, x, d, NULL, &x->s)) == 0)
        cli_calibration_note(&d->ro, tdm_session_plan(x->s));
    return rc;
}

int diag_run(diag_setup *x, tdm_session *s)
{
    tdm_tensor **outs = calloc(x->n_out + 1, sizeof *outs);
    if (!outs)
        return cli_fail(TDM_E_NOMEM, NULL, "out of memory");
    tdm_status st = tdm_session_run(s, (const tdm_tensor *const *)x->ins, outs);
    for (size_t k = 0; k < x->n_out; k++)
        tdm_tensor_destroy(outs[k]);
    free(outs);
    if (st)
        return cli_fail(st, NULL, tdm_session_error(s));
    return 0;
}

/* ----------------------------------------------------------- collector */

static int grow(void **arr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap * 2 : 64;
    while (n < need)
        n *= 2;
    void *p = realloc(*arr, n * elem);
    if (!p)
        return -1;
    *arr = p;
    *cap = n;
    return 0;
}

static int dev_index(const diag_collector *c, const char *name)
{
    size_t n = tdm_plan_device_count(c->plan);
    for (size_t d = 0; d < n; d++)
        if (strcmp(tdm_plan_device_name(c->plan, d), name) == 0)
            return (int)d;
    return -1;
}

int diag_collector_init(diag_collector *c, const tdm_plan *plan, int keep_trace)
{
    memset(c, 0, sizeof *c);
    c->plan = plan;
    c->keep_trace = keep_trace;
    c->n_nodes = tdm_plan_node_count(plan);
    c->n_devs = tdm_plan_device_count(plan);
    c->nodes = calloc(c->n_nodes + 1, sizeof *c->nodes);
    c->devs = calloc(c->n_devs + 1, sizeof *c->devs);
    return c->nodes && c->devs ? 0 : -1;
}

int diag_collector_rebind(diag_collector *c, const tdm_plan *plan)
{
    if (plan == c->plan)
        return 0;
    size_t nn = tdm_plan_node_count(plan), nd = tdm_plan_device_count(plan);
    if (nn != c->n_nodes || nd != c->n_devs) {
        diag_node *nodes = calloc(nn + 1, sizeof *nodes);
        diag_dev *devs = calloc(nd + 1, sizeof *devs);
        if (!nodes || !devs) {
            free(nodes);
            free(devs);
            return -1;
        }
        free(c->nodes);
        free(c->devs);
        for (size_t k = 0; k < c->n_trace; k++)
            free(c->trace[k].tensor);
        c->n_trace = 0;
        c->nodes = nodes;
        c->devs = devs;
        c->n_nodes = nn;
        c->n_devs = nd;
    }
    c->plan = plan;
    return 0;
}

void diag_collector_free(diag_collector *c)
{
    for (size_t k = 0; k < c->n_trace; k++)
        free(c->trace[k].tensor);
    for (size_t k = 0; k < c->n_faults; k++) {
        free(c->faults[k].node);
        free(c->faults[k].detail);
    }
    free(c->faults);
    free(c->trace);
    free(c->nodes);
    free(c->devs);
    memset(c, 0, sizeof *c);
}

void diag_collect(void *user, const tdm_event *ev)
{
    diag_collector *c = user;
    if (c->metrics)
        tdm_metrics_observe(c->metrics, ev);
    if (c->chain)
        c->chain(c->chain_user, ev);
    if (ev->kind == TDM_EVENT_FAULT) {
        if (!grow((void **)&c->faults, &c->cap_faults, c->n_faults + 1, sizeof *c->faults)) {
            diag_fault *f = &c->faults[c->n_faults++];
            f->node = strdup(ev->name);
            f->detail = strdup(ev->detail);
            f->device = dev_index(c, ev->device);
            f->reason = ev->reason;
        }
        return;
    }
    if (!c->recording)
        return;
    uint64_t dt = ev->end_ns > ev->start_ns ? ev->end_ns - ev->start_ns : 0;
    if (!c->t_origin || ev->start_ns < c->t_origin)
        c->t_origin = ev->start_ns;
    if (ev->kind == TDM_EVENT_RUN) {
        c->runs++;
        c->wall_ns += dt;
        return;
    }
    int d = dev_index(c, ev->device);
    if (ev->kind == TDM_EVENT_NODE && ev->node_index < c->n_nodes) {
        diag_node *n = &c->nodes[ev->node_index];
        n->calls++;
        n->ns += dt;
        n->bytes_in = ev->bytes_in;
        n->bytes_out = ev->bytes_out;
        n->fallback = ev->fallback;
        if (ev->modeled_ms >= 0) {
            n->modeled_ms += ev->modeled_ms;
            n->modeled = 1;
        }
        c->node_ns += dt;
        if (d >= 0) {
            c->devs[d].ns += dt;
            c->devs[d].nodes++;
            if (ev->modeled_ms >= 0) {
                c->devs[d].modeled_ms += ev->modeled_ms;
                c->devs[d].modeled = 1;
            }
        }
        int fb = ev->fallback && strcmp(ev->device, "cpu") == 0;
        if (fb)
            c->fallback_ns += dt;
        c->node_events++;
        if (ev->modeled_ms >= 0) {
            c->modeled_nodes++;
            c->node_modeled_ms += ev->modeled_ms;
            if (fb)
                c->fallback_modeled_ms += ev->modeled_ms;
        }
    } else if (ev->kind == TDM_EVENT_COPY) {
        c->copies++;
        c->copy_bytes += ev->bytes_in;
        c->copy_ns += dt;
        if (ev->modeled_ms >= 0) {
            c->copy_modeled_ms += ev->modeled_ms;
            c->copy_modeled = 1;
        }
    }
    if (c->keep_trace && (ev->kind == TDM_EVENT_NODE || ev->kind == TDM_EVENT_COPY) &&
        !grow((void **)&c->trace, &c->cap_trace, c->n_trace + 1, sizeof *c->trace)) {
        diag_trace_ev *t = &c->trace[c->n_trace++];
        memset(t, 0, sizeof *t);
        t->copy = ev->kind == TDM_EVENT_COPY;
        t->node = ev->node_index;
        t->device = d;
        t->from = t->copy ? dev_index(c, ev->from) : -1;
        t->start_ns = ev->start_ns;
        t->end_ns = ev->end_ns;
        t->bytes_in = ev->bytes_in;
        t->bytes_out = ev->bytes_out;
        t->modeled_ms = ev->modeled_ms;
        t->device_ms = ev->device_ms;
        t->direction = ev->direction;  /* static strings */
        if (t->copy)
            t->tensor = strdup(ev->name);
    }
}

/* ---------------------------------------------------------- the trace */

static FILE *open_out(const char *what, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        cli_error("cannot write the %s to '%s': %s", what, path, strerror(errno));
    return f;
}

static int close_out(const char *what, const char *path, FILE *f)
{
    int bad = ferror(f);
    bad |= fclose(f) != 0;
    if (bad) {
        cli_error("cannot write the %s to '%s'", what, path);
        return EXIT_IO;
    }
    return 0;
}

int diag_write_trace(const diag_collector *c, const char *path)
{
    FILE *f = open_out("trace", path);
    if (!f)
        return EXIT_IO;
    jw w;
    jw_init(&w, f);
    jw_obj_begin(&w);
    jw_key(&w, "displayTimeUnit");
    jw_str(&w, "ms");
    jw_key(&w, "traceEvents");
    jw_arr_begin(&w);
    /* track names: one per device (tid = device index + 1), copies last */
    for (size_t d = 0; d <= c->n_devs; d++) {
        char nm[300];
        if (d < c->n_devs)
            snprintf(nm, sizeof nm, "%s", tdm_plan_device_name(c->plan, d));
        else
            snprintf(nm, sizeof nm, "copies");
        jw_obj_begin(&w);
        jw_key(&w, "name");
        jw_str(&w, "thread_name");
        jw_key(&w, "ph");
        jw_str(&w, "M");
        jw_key(&w, "pid");
        jw_int(&w, 1);
        jw_key(&w, "tid");
        jw_int(&w, (long long)d + 1);
        jw_key(&w, "args");
        jw_obj_begin(&w);
        jw_key(&w, "name");
        jw_str(&w, nm);
        jw_obj_end(&w);
        jw_obj_end(&w);
    }
    jw_obj_begin(&w);
    jw_key(&w, "name");
    jw_str(&w, "process_name");
    jw_key(&w, "ph");
    jw_str(&w, "M");
    jw_key(&w, "pid");
    jw_int(&w, 1);
    jw_key(&w, "args");
    jw_obj_begin(&w);
    jw_key(&w, "name");
    jw_str(&w, "tandem");
    jw_obj_end(&w);
    jw_obj_end(&w);
    for (size_t k = 0; k < c->n_trace; k++) {
        const diag_trace_ev *t = &c->trace[k];
        const char *name = "", *op = "", *reason = "", *detail = "";
        if (!t->copy)
            tdm_plan_node(c->plan, t->node, &name, &op, NULL, &reason, &detail);
        jw_obj_begin(&w);
        jw_key(&w, "name");
        jw_str(&w, t->copy ? (t->tensor ? t->tensor : "") : name);
        jw_key(&w, "cat");
        jw_str(&w, t->copy ? "copy" : op);
        jw_key(&w, "ph");
        jw_str(&w, "X");
        jw_key(&w, "ts");
        jw_num(&w, t->start_ns >= c->t_origin ? (double)(t->start_ns - c->t_origin) / 1e3 : 0.0);
        jw_key(&w, "dur");
        jw_num(&w, (double)(t->end_ns - t->start_ns) / 1e3);
        jw_key(&w, "pid");
        jw_int(&w, 1);
        jw_key(&w, "tid");
        jw_int(&w, t->copy ? (long long)c->n_devs + 1 : (long long)t->device + 1);
        jw_key(&w, "args");
        jw_obj_begin(&w);
        if (t->copy) {
            jw_key(&w, "from");
            jw_str(&w, t->from >= 0 ? tdm_plan_device_name(c->plan, (size_t)t->from) : "");
            jw_key(&w, "to");
            jw_str(&w, t->device >= 0 ? tdm_plan_device_name(c->plan, (size_t)t->device) : "");
            jw_key(&w, "direction");
            jw_str(&w, t->direction);
            jw_key(&w, "bytes");
            jw_uint(&w, t->bytes_in);
        } else {
            jw_key(&w, "device");
            jw_str(&w, t->device >= 0 ? tdm_plan_device_name(c->plan, (size_t)t->device) : "");
            jw_key(&w, "reason");
            jw_str(&w, reason);
            jw_key(&w, "bytes_in");
            jw_uint(&w, t->bytes_in);
            jw_key(&w, "bytes_out");
            jw_uint(&w, t->bytes_out);
        }
        if (t->device_ms >= 0) {
            jw_key(&w, "device_ms");
            jw_num(&w, t->device_ms);
        }
        if (t->modeled_ms >= 0) {
            jw_key(&w, "modeled_ms");
            jw_num(&w, t->modeled_ms);
        }
        jw_obj_end(&w);
        jw_obj_end(&w);
    }
    jw_arr_end(&w);
    jw_obj_end(&w);
    jw_finish(&w);
    return close_out("trace", path, f);
}

int diag_write_metrics(const tdm_metrics *m, const char *path)
{
    char *text = NULL;
    tdm_status st = tdm_metrics_prometheus(m, &text);
    if (st)
        return cli_fail(st, NULL, "cannot render the metrics");
    FILE *f = open_out("metrics", path);
    if (!f) {
        tdm_free(text);
        return EXIT_IO;
    }
    fputs(text, f);
    tdm_free(text);
    return close_out("metrics", path, f);
}

/* A JSON string on one line. */
void diag_json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20 || *p == 0x7f)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

/* ,"time":"2026-12-04T14:20:51Z","host":"NAME" (when the log is written):
 * what `tandem logs` buckets and groups the records of many runs by. */
static void log_stamp(FILE *f)
{
    char when[32] = "", host[256] = "";
    time_t now = time(NULL);
    struct tm tm;
    if (now != (time_t)-1 && gmtime_r(&now, &tm))
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    if (gethostname(host, sizeof host - 1) != 0)
        host[0] = '\0';
    fputs(",\"time\":", f);
    diag_json_str(f, when);
    fputs(",\"host\":", f);
    diag_json_str(f, host);
}

/* One JSON line per fallback decision of the plan and per device fault. */
int diag_write_fallback_log(const diag_collector *c, const char *model, const char *path)
{
    FILE *f = open_out("fallback log", path);
    if (!f)
        return EXIT_IO;
    const char *first = tdm_plan_device_name(c->plan, 0);
    for (size_t n = 0; n < c->n_nodes; n++) {
        const char *name, *op, *dev, *reason, *detail;
        if (tdm_plan_node(c->plan, n, &name, &op, &dev, &reason, &detail) != TDM_OK)
            continue;
        if (strcmp(dev, first) == 0 || strcmp(reason, "USER") == 0)
            continue;
        fputs("{\"event\":\"fallback\",\"model\":", f);
        diag_json_str(f, model);
        fputs(",\"node\":", f);
        diag_json_str(f, name);
        fputs(",\"op\":", f);
        diag_json_str(f, op);
        fputs(",\"preferred\":", f);
        diag_json_str(f, first);
        fputs(",\"device\":", f);
        diag_json_str(f, dev);
        fputs(",\"reason\":", f);
        diag_json_str(f, reason);
        fputs(",\"detail\":", f);
        diag_json_str(f, detail);
        const diag_node *dn = &c->nodes[n];
        fprintf(f, ",\"calls\":%llu,\"total_ms\":%.6f", (unsigned long long)dn->calls, (double)dn->ns / 1e6);
        if (dn->modeled)
            fprintf(f, ",\"modeled_ms\":%.6f", dn->modeled_ms);
        log_stamp(f);
        fputs("}\n", f);
    }
    for (size_t k = 0; k < c->n_faults; k++) {
        const diag_fault *x = &c->faults[k];
        fputs("{\"event\":\"device_fault\",\"model\":", f);
        diag_json_str(f, model);
        fputs(",\"node\":", f);
        diag_json_str(f, x->node);
        fputs(",\"device\":", f);
        diag_json_str(f, x->device >= 0 ? tdm_plan_device_name(c->plan, (size_t)x->device) : "");
        fputs(",\"detail\":", f);
        diag_json_str(f, x->detail);
        log_stamp(f);
        fputs("}\n", f);
    }
    return close_out("fallback log", path, f);
}

/* ------------------------------------------------------------ profile */

void usage_profile(FILE *f)
{
    fputs("usage: tandem profile MODEL [--warmup N] [--iterations N] [--json] [--top N] [--trace FILE]\n"
          "                      [--metrics FILE] [--fallback-log FILE] [--alert-fallback-ratio R]\n"
          "                      [--input NAME=FILE]... [--shape NAME=DxD]... [--threads N] [RUN OPTIONS]\n"
          "\n"
          "Runs the model N times after the warm-up and prints where the time goes: one row per\n"
          "node sorted by time (node, op, device, calls, total and mean ms, share of node time,\n"
          "the modeled ms per call of a virtual device), then per device its nodes, busy time\n"
          "and utilisation (busy / wall), the copies between devices (count, bytes, time), the\n"
          "fallback ratio (time on cpu of nodes that fell back from another device, over all\n"
          "node time) and the copy share (copy time over wall time). Times of a vnpu are\n"
          "measured host emulation; the figures marked 'modeled' come from its profile,\n"
          "and a line per vnpu gives both: its modeled ms per run (the device's figure) and\n"
          "the emulation's (--json: emulation_ms_per_run and device_ms_per_run per device,\n"
          "emulation_ms_per_run and emulated_modeled_ms_per_run for the run).\n"
          "Inputs not given are fixed-seed random.\n"
          "\n"
          "  --warmup N               untimed runs first (default 10)\n"
          "  --iterations N           timed runs (default 100)\n"
          "  --json                   one JSON document on stdout instead of the table\n"
          "  --top N                  print only the N slowest nodes (default and 0: all)\n"
          "  --trace FILE             Chrome trace-event JSON of the timed runs (Perfetto,\n"
          "                           chrome://tracing): one track per device, one for copies\n"
          "  --metrics FILE           the counters in Prometheus text format\n"
          "  --fallback-log FILE      JSON lines: one per fallback decision and per device fault\n"
          "  --alert-fallback-ratio R exit 6 with a sentence when the fallback ratio exceeds R\n"
          "\n",
          f);
    usage_runopts(f);
    usage_adaptopts(f);
}

typedef struct prof_args {
    diag_common c;
    long long warmup, iterations, top;
    int json, has_alert;
    double alert;
    const char *trace, *metrics, *fallback_log;
} prof_args;

static int parse_count(const char *cmd, const char *opt, const char *val, long long lo, long long *out)
{
    long long v = 0;
    if (cli_parse_i64(val, &v) || v < lo || v > 100000000) {
        cli_error("%s: %s expects a whole number of at least %lld, not '%s'", cmd, opt, lo, val);
        return EXIT_USAGE;
    }
    *out = v;
    return 0;
}

int diag_parse_ratio(const char *cmd, const char *opt, const char *val, double *out)
{
    char *end = NULL;
    double d = strtod(val, &end);
    if (!*val || *end || !(d >= 0 && d <= 1)) {
        cli_error("%s: %s expects a number from 0 to 1, not '%s'", cmd, opt, val);
        return EXIT_USAGE;
    }
    *out = d;
    return 0;
}

static int prof_parse(int argc, char **argv, prof_args *a)
{
    const char *cmd = "profile", *val;
    int rc, r;
    a->warmup = 10;
    a->iterations = 100;
    for (int i = 1; i < argc; i++) {
        if ((r = cli_opt_value(cmd, argc, argv, &i, "--warmup", &val)) != 0) {
            if (r < 0 || (rc = parse_count(cmd, "--warmup", val, 0, &a->warmup)) != 0)
                return EXIT_USAGE;
        } else if ((r = cli_opt_value(cmd, argc, argv, &i, "--iterations", &val)) != 0) {
            if (r < 0 || (rc = parse_count(cmd, "--iterations", val, 1, &a->iterations)) != 0)
                return EXIT_USAGE;
        } else if ((r = cli_opt_value(cmd, argc, argv, &i, "--top", &val)) != 0) {
            if (r < 0 || (rc = parse_count(cmd, "--top", val, 0, &a->top)) != 0)
                return EXIT_USAGE;
        } else if ((r = cli_opt_value(cmd, argc, argv, &i, "--trace", &val)) != 0) {
            if (r < 0)
                return EXIT_USAGE;
            a->trace = val;
        } else if ((r = cli_opt_value(cmd, argc, argv, &i, "--metrics", &val)) != 0) {
            if (r < 0)
                return EXIT_USAGE;
            a->metrics = val;
        } else if ((r = cli_opt_value(cmd, argc, argv, &i, "--fallback-log", &val)) != 0) {
            if (r < 0)
                return EXIT_USAGE;
            a->fallback_log = val;
        } else if ((r = cli_opt_value(cmd, argc, argv, &i, "--alert-fallback-ratio", &val)) != 0) {
            if (r < 0 || diag_parse_ratio(cmd, "--alert-fallback-ratio", val, &a->alert))
                return EXIT_USAGE;
            a->has_alert = 1;
        } else if (strcmp(argv[i], "--json") == 0) {
            a->json = 1;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage_profile(stdout);
            return -1;
        } else if (diag_common_opt(cmd, argc, argv, &i, &a->c, &rc)) {
            if (rc)
                return rc;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            cli_error("profile: unknown option '%s'; `tandem profile --help` lists the options", argv[i]);
            return EXIT_USAGE;
        } else if (!a->c.model) {
            a->c.model = argv[i];
        } else {
            cli_error("profile: one model only ('%s' and '%s')", a->c.model, argv[i]);
            return EXIT_USAGE;
        }
    }
    if (!a->c.model) {
        cli_error("profile: no model given; usage: tandem profile MODEL [OPTIONS]");
        return EXIT_USAGE;
    }
    return 0;
}

static const diag_collector *sort_ctx;

static int by_time(const void *x, const void *y)
{
    size_t a = *(const size_t *)x, b = *(const size_t *)y;
    uint64_t ta = sort_ctx->nodes[a].ns, tb = sort_ctx->nodes[b].ns;
    if (ta != tb)
        return ta < tb ? 1 : -1;
    return a < b ? -1 : a > b;
}

double diag_fallback_ratio(const diag_collector *c)
{
    return c->node_ns ? (double)c->fallback_ns / (double)c->node_ns : 0;
}

double diag_fallback_ratio_modeled(const diag_collector *c)
{
    if (!c->node_events || c->modeled_nodes != c->node_events || c->node_modeled_ms <= 0)
        return -1;
    return c->fallback_modeled_ms / c->node_modeled_ms;
}

/* The precision guard's first-run overhead (cli_guard_figures), for the report. */
static struct {
    int active;
    double moved, extra_ms;
} prof_guard;

/* Device d of plan is virtual: its measured time is host emulation. */
static int is_emulated(const tdm_plan *plan, size_t d)
{
    return strncmp(tdm_plan_device_name(plan, d), "vnpu:", 5) == 0;
}

static void prof_json(const prof_args *a, const diag_collector *c, const size_t *idx)
{
    double it = (double)c->runs ? (double)c->runs : 1;
    jw w;
    jw_init(&w, stdout);
    jw_obj_begin(&w);
    jw_key(&w, "model");
    jw_str(&w, a->c.model);
    jw_key(&w, "devices");
    jw_arr_begin_inline(&w);
    for (size_t d = 0; d < c->n_devs; d++)
        jw_str(&w, tdm_plan_device_name(c->plan, d));
    jw_arr_end(&w);
    jw_key(&w, "warmup");
    jw_int(&w, a->warmup);
    jw_key(&w, "iterations");
    jw_uint(&w, c->runs);
    jw_key(&w, "wall_ms_per_run");
    jw_num(&w, (double)c->wall_ns / 1e6 / it);
    jw_key(&w, "node_ms_per_run");
    jw_num(&w, (double)c->node_ns / 1e6 / it);
    jw_key(&w, "fallback_ratio");
    jw_num(&w, diag_fallback_ratio(c));
    jw_key(&w, "fallback_ratio_modeled");
    if (diag_fallback_ratio_modeled(c) >= 0)
        jw_num(&w, diag_fallback_ratio_modeled(c));
    else
        jw_null(&w);
    jw_key(&w, "copy_share");
    jw_num(&w, c->wall_ns ? (double)c->copy_ns / (double)c->wall_ns : 0);
    /* the emulated devices' two figures: the host's time emulating them and
     * their modeled time (the device's figure) for the same nodes */
    double emu_ms = 0, emu_modeled = 0;
    int any_emu = 0, all_modeled = 1;
    for (size_t d = 0; d < c->n_devs; d++)
        if (is_emulated(c->plan, d) && c->devs[d].nodes) {
            any_emu = 1;
            emu_ms += (double)c->devs[d].ns / 1e6 / it;
            emu_modeled += c->devs[d].modeled_ms / it;
            all_modeled &= c->devs[d].modeled;
        }
    jw_key(&w, "emulated");
    jw_bool(&w, any_emu);
    jw_key(&w, "emulation_ms_per_run");
    if (any_emu)
        jw_num(&w, emu_ms);
    else
        jw_null(&w);
    jw_key(&w, "emulated_modeled_ms_per_run");
    if (any_emu && all_modeled)
        jw_num(&w, emu_modeled);
    else
        jw_null(&w);
    if (prof_guard.active && prof_guard.extra_ms >= 0) {
        jw_key(&w, "guard_first_run_extra_ms");
        jw_num(&w, prof_guard.extra_ms);
        jw_key(&w, "guard_moved_nodes");
        jw_num(&w, prof_guard.moved);
    }
    jw_key(&w, "nodes");
    jw_arr_begin(&w);
    for (size_t k = 0; k < c->n_nodes; k++) {
        const diag_node *n = &c->nodes[idx[k]];
        const char *name = "", *op = "", *dev = "", *reason = "", *detail = "";
        tdm_plan_node(c->plan, idx[k], &name, &op, &dev, &reason, &detail);
        jw_obj_begin(&w);
        jw_key(&w, "node");
        jw_str(&w, name);
        jw_key(&w, "op");
        jw_str(&w, op);
        jw_key(&w, "device");
        jw_str(&w, dev);
        jw_key(&w, "reason");
        jw_str(&w, reason);
        jw_key(&w, "fallback");
        jw_bool(&w, n->fallback);
        jw_key(&w, "calls");
        jw_uint(&w, n->calls);
        jw_key(&w, "total_ms");
        jw_num(&w, (double)n->ns / 1e6);
        jw_key(&w, "mean_ms");
        jw_num(&w, n->calls ? (double)n->ns / 1e6 / (double)n->calls : 0);
        jw_key(&w, "share");
        jw_num(&w, c->node_ns ? (double)n->ns / (double)c->node_ns : 0);
        jw_key(&w, "modeled_ms_per_call");
        if (n->modeled && n->calls)
            jw_num(&w, n->modeled_ms / (double)n->calls);
        else
            jw_null(&w);
        jw_key(&w, "bytes_in");
        jw_uint(&w, n->bytes_in);
        jw_key(&w, "bytes_out");
        jw_uint(&w, n->bytes_out);
        jw_obj_end(&w);
    }
    jw_arr_end(&w);
    jw_key(&w, "device_totals");
    jw_arr_begin(&w);
    for (size_t d = 0; d < c->n_devs; d++) {
        const diag_dev *x = &c->devs[d];
        jw_obj_begin(&w);
        jw_key(&w, "device");
        jw_str(&w, tdm_plan_device_name(c->plan, d));
        jw_key(&w, "nodes_per_run");
        jw_num(&w, (double)x->nodes / it);
        jw_key(&w, "busy_ms_per_run");
        jw_num(&w, (double)x->ns / 1e6 / it);
        jw_key(&w, "utilisation");
        jw_num(&w, c->wall_ns ? (double)x->ns / (double)c->wall_ns : 0);
        jw_key(&w, "modeled_ms_per_run");
        if (x->modeled)
            jw_num(&w, x->modeled_ms / it);
        else
            jw_null(&w);
        jw_key(&w, "modeled");
        jw_bool(&w, x->modeled);
        jw_key(&w, "emulated"); /* busy time is this host emulating the device */
        jw_bool(&w, is_emulated(c->plan, d));
        jw_key(&w, "emulation_ms_per_run"); /* busy time, by its name, when emulated */
        if (is_emulated(c->plan, d))
            jw_num(&w, (double)x->ns / 1e6 / it);
        else
            jw_null(&w);
        jw_key(&w, "device_ms_per_run"); /* the device's figure: modeled when emulated, else measured */
        if (!is_emulated(c->plan, d))
            jw_num(&w, (double)x->ns / 1e6 / it);
        else if (x->modeled)
            jw_num(&w, x->modeled_ms / it);
        else
            jw_null(&w);
        jw_obj_end(&w);
    }
    jw_arr_end(&w);
    jw_key(&w, "copies");
    jw_obj_begin(&w);
    jw_key(&w, "count_per_run");
    jw_num(&w, (double)c->copies / it);
    jw_key(&w, "bytes_per_run");
    jw_num(&w, (double)c->copy_bytes / it);
    jw_key(&w, "ms_per_run");
    jw_num(&w, (double)c->copy_ns / 1e6 / it);
    jw_key(&w, "modeled_ms_per_run");
    if (c->copy_modeled)
        jw_num(&w, c->copy_modeled_ms / it);
    else
        jw_null(&w);
    jw_obj_end(&w);
    jw_key(&w, "device_faults");
    jw_uint(&w, c->n_faults);
    jw_obj_end(&w);
    jw_finish(&w);
}

static void prof_text(const prof_args *a, const diag_collector *c, const size_t *idx)
{
    double it = (double)c->runs ? (double)c->runs : 1;
    int any_modeled = 0, any_emulated = 0;
    size_t show = a->top && (size_t)a->top < c->n_nodes ? (size_t)a->top : c->n_nodes;
    char emu[160];
    double modeled_ms;
    int dw = (int)cli_device_width(c->plan);
    cli_emulated(c->plan, emu, sizeof emu, &modeled_ms);
    printf("profile of %s: %llu timed runs after %lld warm-up, wall %.3f ms per run%s\n", a->c.model,
           (unsigned long long)c->runs, a->warmup, (double)c->wall_ns / 1e6 / it, emu[0] ? " (emulated)" : "");
    if (emu[0])
        printf("emulated on this host's cpu: %s; measured times there (marked ~) are the emulation's, not the "
               "device's speed: read the modeled times\n",
               emu);
    printf("\n%-32s %-18s %-*s %6s %10s %10s %7s %14s\n", "node", "op", dw, "device", "calls", "total ms", "mean ms",
           "share", "modeled ms/call");
    for (size_t k = 0; k < show; k++) {
        const diag_node *n = &c->nodes[idx[k]];
        const char *name = "", *op = "", *dev = "", *reason = "", *detail = "";
        char mod[32] = "-";
        tdm_plan_node(c->plan, idx[k], &name, &op, &dev, &reason, &detail);
        if (n->modeled && n->calls) {
            snprintf(mod, sizeof mod, "%.4f*", n->modeled_ms / (double)n->calls);
            any_modeled = 1;
        }
        size_t nl = strlen(name);
        int em = strncmp(dev, "vnpu:", 5) == 0;
        any_emulated |= em;
        printf("%-32.32s %-18.18s %-*s %6llu %10.3f %9.4f%s %6.1f%% %14s\n", nl > 32 ? name + nl - 32 : name, op, dw,
               dev, (unsigned long long)n->calls, (double)n->ns / 1e6,
               n->calls ? (double)n->ns / 1e6 / (double)n->calls : 0, em ? "~" : " ",
               c->node_ns ? 100.0 * (double)n->ns / (double)c->node_ns : 0.0, mod);
    }
    if (show < c->n_nodes)
        printf("(%zu more nodes; --top shows more)\n", c->n_nodes - show);
    printf("\n%-*s %8s %14s %12s %18s\n", dw, "device", "nodes", "busy ms/run", "utilisation", "modeled ms/run");
    for (size_t d = 0; d < c->n_devs; d++) {
        const diag_dev *x = &c->devs[d];
        char mod[40] = "-";
        if (x->modeled)
            snprintf(mod, sizeof mod, "%.4f (modeled)", x->modeled_ms / it);
        int em = is_emulated(c->plan, d);
        any_emulated |= em;
        printf("%-*s %8.0f %13.3f%s %11.1f%% %18s\n", dw, tdm_plan_device_name(c->plan, d), (double)x->nodes / it,
               (double)x->ns / 1e6 / it, em ? "~" : " ", c->wall_ns ? 100.0 * (double)x->ns / (double)c->wall_ns : 0.0,
               mod);
    }
    for (size_t d = 0; d < c->n_devs; d++) {
        const diag_dev *x = &c->devs[d];
        if (!is_emulated(c->plan, d) || !x->nodes)
            continue;
        if (x->modeled)
            printf("%s: %.4f ms per run modeled (the device's figure), %.3f ms per run emulation (this host)\n",
                   tdm_plan_device_name(c->plan, d), x->modeled_ms / it, (double)x->ns / 1e6 / it);
        else
            printf("%s: no modeled figure, %.3f ms per run emulation (this host)\n",
                   tdm_plan_device_name(c->plan, d), (double)x->ns / 1e6 / it);
    }
    printf("\ncopies: %.0f per run, %.0f bytes per run, %.3f ms per run", (double)c->copies / it,
           (double)c->copy_bytes / it, (double)c->copy_ns / 1e6 / it);
    if (c->copy_modeled)
        printf(" (%.4f ms modeled)", c->copy_modeled_ms / it);
    printf("\nfallback ratio: %.1f%% (cpu time of nodes that fell back, over node time%s)\n",
           100.0 * diag_fallback_ratio(c), emu[0] ? ", the emulated times included: the modeled ratio is the device's" : "");
    if (diag_fallback_ratio_modeled(c) >= 0)
        printf("fallback ratio (modeled): %.1f%% (the same from the devices' modeled times)\n",
               100.0 * diag_fallback_ratio_modeled(c));
    printf("copy share: %.1f%% (copy time over wall time)\n",
           c->wall_ns ? 100.0 * (double)c->copy_ns / (double)c->wall_ns : 0.0);
    if (c->n_faults)
        printf("device faults: %zu\n", c->n_faults);
    if (prof_guard.active && prof_guard.extra_ms >= 0)
        printf("precision guard: the first run cost %.3f ms more (probe and verification against cpu fp32; not in "
               "the figures above); %.0f nodes moved\n", prof_guard.extra_ms, prof_guard.moved);
    if (any_modeled)
        printf("* modeled: the virtual device's profile figure, not a measurement\n");
    if (any_emulated)
        printf("~ emulated: this host's time emulating the virtual device, not the device's speed\n");
}

int cmd_profile(int argc, char **argv)
{
    prof_args a;
    memset(&a, 0, sizeof a);
    diag_common_init(&a.c);
    diag_setup x;
    memset(&x, 0, sizeof x);
    diag_collector c;
    memset(&c, 0, sizeof c);
    tdm_metrics *m = NULL;
    size_t *idx = NULL;
    int rc = prof_parse(argc, argv, &a);
    if (rc) {
        diag_common_free(&a.c);
        return rc < 0 ? 0 : rc;
    }
    if ((rc = diag_open("profile", &a.c, &x)) != 0)
        goto done;
    if (diag_collector_init(&c, tdm_session_plan(x.s), a.trace != NULL) ||
        (a.metrics && tdm_metrics_create(&m) != TDM_OK)) {
        rc = cli_fail(TDM_E_NOMEM, NULL, "out of memory");
        goto done;
    }
    c.metrics = m;
    tdm_session_set_observer(x.s, diag_collect, &c);
    cli_progress pr;
    cli_progress_begin(&pr, "profile");
    for (long long k = 0; k < a.warmup && !rc; k++) {
        rc = diag_run(&x, x.s);
        if (!rc && k == 0 && diag_collector_rebind(&c, tdm_session_plan(x.s)))
            rc = cli_fail(TDM_E_NOMEM, NULL, "out of memory");
        cli_progress_step(&pr, (size_t)k + 1, (size_t)(a.warmup + a.iterations), "runs (warm-up)");
    }
    c.recording = 1;
    for (long long k = 0; k < a.iterations && !rc; k++) {
        rc = diag_run(&x, x.s);
        if (!rc && k == 0 && !a.warmup && diag_collector_rebind(&c, tdm_session_plan(x.s)))
            rc = cli_fail(TDM_E_NOMEM, NULL, "out of memory");
        cli_progress_step(&pr, (size_t)(a.warmup + k) + 1, (size_t)(a.warmup + a.iterations), "runs");
    }
    cli_progress_end(&pr);
    if (rc)
        goto done;
    if (!(idx = calloc(c.n_nodes + 1, sizeof *idx))) {
        rc = cli_fail(TDM_E_NOMEM, NULL, "out of memory");
        goto done;
    }
    for (size_t k = 0; k < c.n_nodes; k++)
        idx[k] = k;
    sort_ctx = &c;
    qsort(idx, c.n_nodes, sizeof *idx, by_time);
    {
        int unverified = 0;
        char first[256];
        prof_guard.active = cli_guard_figures(x.s, &prof_guard.moved, &prof_guard.extra_ms, first, sizeof first,
                                              &unverified);
    }
    if (a.json)
        prof_json(&a, &c, idx);
    else
        prof_text(&a, &c, idx);
    if (a.trace && (rc = diag_write_trace(&c, a.trace)) != 0)
        goto done;
    if (a.metrics && (rc = diag_write_metrics(m, a.metrics)) != 0)
        goto done;
    if (a.fallback_log && (rc = diag_write_fallback_log(&c, a.c.model, a.fallback_log)) != 0)
        goto done;
    if ((rc = cli_adaptopts_write(&a.c.ao, x.s)) != 0)
        goto done;
    if (a.has_alert && diag_fallback_ratio(&c) > a.alert) {
        cli_error("the fallback ratio %.4f exceeds --alert-fallback-ratio %.4f", diag_fallback_ratio(&c), a.alert);
        rc = EXIT_ALERT;
    }
done:
    free(idx);
    if (x.s)
        tdm_session_set_observer(x.s, NULL, NULL);
    diag_collector_free(&c);
    tdm_metrics_destroy(m);
    diag_close(&x);
    diag_common_free(&a.c);
    return rc;
}

/* ------------------------------------- --trace/--metrics/... on run, bench */

int diag_flags_parse(const char *cmd, int argc, char **argv, int *i, diag_flags *f, int *rc)
{
    const char *val;
    int r;
    *rc = 0;
    if ((r = cli_opt_value(cmd, argc, argv, i, "--trace", &val)) != 0)
        f->trace = val;
    else if ((r = cli_opt_value(cmd, argc, argv, i, "--metrics", &val)) != 0)
        f->metrics = val;
    else if ((r = cli_opt_value(cmd, argc, argv, i, "--fallback-log", &val)) != 0)
        f->fallback_log = val;
    else if ((r = cli_opt_value(cmd, argc, argv, i, "--alert-fallback-ratio", &val)) != 0) {
        if (r > 0 && diag_parse_ratio(cmd, "--alert-fallback-ratio", val, &f->alert))
            r = -1;
        f->has_alert = 1;
    } else
        return 0;
    if (r < 0)
        *rc = EXIT_USAGE;
    return 1;
}

int diag_flags_begin(diag_flags *f, tdm_session *s)
{
    if (!f->trace && !f->metrics && !f->fallback_log && !f->has_alert)
        return 0;
    if (!f->c) {
        if (!(f->c = calloc(1, sizeof *f->c)) || diag_collector_init(f->c, tdm_session_plan(s), f->trace != NULL) ||
            (f->metrics && tdm_metrics_create(&f->m) != TDM_OK))
            return cli_fail(TDM_E_NOMEM, NULL, "out of memory");
        f->c->metrics = f->m;
        f->c->recording = 1;
    }
    tdm_session_set_observer(s, diag_collect, f->c);
    return 0;
}

int diag_flags_end(diag_flags *f, const char *model)
{
    int rc;
    if (!f->c)
        return 0;
    if (f->trace && (rc = diag_write_trace(f->c, f->trace)) != 0)
        return rc;
    if (f->metrics && (rc = diag_write_metrics(f->m, f->metrics)) != 0)
        return rc;
    if (f->fallback_log && (rc = diag_write_fallback_log(f->c, model, f->fallback_log)) != 0)
        return rc;
    if (f->has_alert && diag_fallback_ratio(f->c) > f->alert) {
        cli_error("the fallback ratio %.4f exceeds --alert-fallback-ratio %.4f", diag_fallback_ratio(f->c), f->alert);
        return EXIT_ALERT;
    }
    return 0;
}

void diag_flags_free(diag_flags *f, tdm_session *s)
{
    if (s && f->c)
        tdm_session_set_observer(s, NULL, NULL);
    if (f->c)
        diag_collector_free(f->c);
    free(f->c);
    tdm_metrics_destroy(f->m);
    f->c = NULL;
    f->m = NULL;
}
