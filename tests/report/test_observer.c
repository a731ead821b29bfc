/* The event hook through the public API: a registered observer sees one
 * node event per node per run (with device, reason, times and values), the
 * copies between devices, one run event per run; the metrics observer
 * counts them and renders Prometheus text; removing the observer stops the
 * events. argv[1]: small.onnx (make_model.py). */
#include <tandem/tandem.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c);                  \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

typedef struct seen {
    int nodes, copies, runs, bad_time, fallback_on_cpu, erf_on_cpu, with_values, modeled;
    tdm_metrics *m;
} seen;

static void observe(void *user, const tdm_event *ev)
{
    seen *s = user;
    tdm_metrics_observe(s->m, ev);
    if (ev->end_ns < ev->start_ns)
        s->bad_time++;
    if (ev->kind == TDM_EVENT_NODE) {
        s->nodes++;
        if (ev->fallback && strcmp(ev->device, "cpu") == 0)
            s->fallback_on_cpu++;
        if (strcmp(ev->name, "erf") == 0 && strcmp(ev->device, "cpu") == 0 &&
            strcmp(ev->reason, "OP_UNSUPPORTED") == 0 && strcmp(ev->op_type, "Erf") == 0)
            s->erf_on_cpu++;
        if (ev->n_outputs == 1 && ev->outputs && ev->outputs[0] && ev->bytes_out == tdm_tensor_nbytes(ev->outputs[0]))
            s->with_values++;
        if (ev->modeled_ms >= 0)
            s->modeled++;
    } else if (ev->kind == TDM_EVENT_COPY) {
        s->copies++;
        if (ev->bytes_in == 0 || !*ev->from || !*ev->direction)
            s->bad_time++;
    } else if (ev->kind == TDM_EVENT_RUN) {
        s->runs++;
    }
}

static void run_n(tdm_session *s, const tdm_tensor *x, int n)
{
    for (int k = 0; k < n; k++) {
        tdm_tensor *y = NULL;
        CHECK(tdm_session_run(s, &x, &y) == TDM_OK);
        tdm_tensor_destroy(y);
    }
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_observer small.onnx\n");
        return 2;
    }
    tdm_ctx *ctx = NULL;
    tdm_model *model = NULL;
    tdm_session_options *so = NULL;
    tdm_session *s = NULL;
    tdm_tensor *x = NULL;
    int64_t dims[4] = {1, 3, 16, 16};
    CHECK(tdm_ctx_create(&ctx) == TDM_OK);
    CHECK(tdm_model_load(ctx, argv[1], &model) == TDM_OK);
    CHECK(tdm_session_options_create(&so) == TDM_OK);
    CHECK(tdm_session_options_set_devices(so, "vnpu:edge-npu,cpu") == TDM_OK);
    CHECK(tdm_session_options_set_granularity(so, TDM_GRANULARITY_OP) == TDM_OK);
    CHECK(tdm_session_create(ctx, model, so, &s) == TDM_OK);
    CHECK(tdm_tensor_create(TDM_FLOAT, 4, dims, &x) == TDM_OK);
    if (failures)
        return 1;
    float *xd = tdm_tensor_data(x);
    for (size_t i = 0; i < tdm_tensor_count(x); i++)
        xd[i] = (float)((int)(i % 17) - 8) / 8.0f;

    seen sn;
    memset(&sn, 0, sizeof sn);
    CHECK(tdm_metrics_create(&sn.m) == TDM_OK);
    CHECK(tdm_session_set_observer(NULL, observe, &sn) == TDM_E_USAGE);
    CHECK(tdm_session_set_observer(s, observe, &sn) == TDM_OK);
    run_n(s, x, 3);
    size_t nn = tdm_plan_node_count(tdm_session_plan(s));
    CHECK(nn == 6);
    CHECK(sn.nodes == 3 * (int)nn);
    CHECK(sn.runs == 3);
    CHECK(sn.copies >= 3 * 3); /* x to the npu, r to cpu, e back, y to the host: per run */
    CHECK(sn.bad_time == 0);
    CHECK(sn.erf_on_cpu == 3);
    CHECK(sn.fallback_on_cpu == 3);
    CHECK(sn.with_values == 3 * (int)nn);
    CHECK(sn.modeled >= 3 * 5); /* the vnpu nodes carry the modeled duration */

    tdm_metrics_summary ms;
    CHECK(tdm_metrics_get(sn.m, &ms) == TDM_OK);
    CHECK(ms.runs == 3 && ms.run_failures == 0);
    CHECK(ms.nodes == 3 * nn);
    CHECK(ms.copies == (uint64_t)sn.copies);
    CHECK(ms.copy_bytes > 0);
    CHECK(ms.nodes_by_reason[0] == 3 * 5 && ms.nodes_by_reason[1] == 3);
    CHECK(ms.fallback_ratio > 0 && ms.fallback_ratio < 1);
    CHECK(tdm_metrics_device_count(sn.m) == 2);
    const char *dn = NULL;
    uint64_t busy = 0, nodes = 0;
    CHECK(tdm_metrics_device(sn.m, 0, &dn, &busy, &nodes) == TDM_OK);
    CHECK(dn && strcmp(dn, "vnpu:edge-npu") == 0 && nodes == 15 && busy > 0);
    char *text = NULL;
    CHECK(tdm_metrics_prometheus(sn.m, &text) == TDM_OK);
    CHECK(text && strstr(text, "# TYPE tandem_runs_total counter\ntandem_runs_total 3\n"));
    CHECK(text && strstr(text, "tandem_device_nodes_total{device=\"cpu\"} 3\n"));
    CHECK(text && strstr(text, "tandem_nodes_by_reason_total{reason=\"OP_UNSUPPORTED\"} 3\n"));
    tdm_free(text);

    /* removed: no more events */
    CHECK(tdm_session_set_observer(s, NULL, NULL) == TDM_OK);
    run_n(s, x, 1);
    CHECK(sn.runs == 3 && sn.nodes == 3 * (int)nn);

    /* an all-cpu plan goes through the plain executor: events too */
    tdm_session *c = NULL;
    CHECK(tdm_session_options_set_devices(so, "cpu") == TDM_OK);
    CHECK(tdm_session_create(ctx, model, so, &c) == TDM_OK);
    tdm_metrics *keep = sn.m;
    memset(&sn, 0, sizeof sn);
    sn.m = keep;
    CHECK(tdm_session_set_observer(c, observe, &sn) == TDM_OK);
    run_n(c, x, 2);
    CHECK(sn.nodes == 2 * (int)nn && sn.runs == 2 && sn.copies == 0 && sn.with_values == 2 * (int)nn);
    CHECK(sn.fallback_on_cpu == 0);

    tdm_session_destroy(c);
    tdm_metrics_destroy(sn.m);
    tdm_tensor_destroy(x);
    tdm_session_destroy(s);
    tdm_session_options_destroy(so);
    tdm_model_destroy(model);
    tdm_ctx_destroy(ctx);
    if (failures)
        fprintf(stderr, "%d checks failed\n", failures);
    else
        printf("observer: all checks passed\n");
    return failures ? 1 : 0;
}
