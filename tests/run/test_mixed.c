/* Mixed plans run their cpu partitions fused (run/hpart.h, issue 20):
 *   test_mixed MODEL INPUTS_TXT CASE
 *   pins     vnpu:fp32-all with nodes 0-2, 5-7, 10-12, ... pinned to cpu
 *            (granularity op): dozens of cpu partitions, each crossed by
 *            boundary values both ways.
 *   opencl   the same on opencl (exit 77 when no OpenCL device).
 *   edge     vnpu:edge-npu,cpu as planned (the PP-OCRv4 det case).
 * Checks, in each case:
 *   - the program has cpu partitions and their fusion plans fuse nodes away;
 *     no value a partition hands on (to a node of another partition, a
 *     copy or the graph's outputs) is inside a fused chain;
 *   - a run's stats count every node, per device as the plan places them;
 *   - under an observer with fusion "observed", every node is reported
 *     once, by its plan index and name, on its device; some cpu nodes are
 *     fused away (reported without values) and every cpu node whose output
 *     another device or the graph's outputs read reports that value;
 *   - fp32 cases: the outputs (fusion on) equal the all-cpu session's
 *     within the fused path's bound (1e-4 of max|ref|, that of the model
 *     tests; the figure is printed) and, with fusion off on both, within
 *     1e-6 (vnpu: the reference arithmetic) or 1e-4 (opencl's own kernels);
 *   - edge: fused against unfused on the same plan, cosine >= 0.9999 and
 *     max|diff| <= 1e-2 of max|ref| (the npu computes in fp16 between the
 *     cpu partitions, so a rounding difference there may flip an fp16 ulp).
 * A missing model exits 77. */
#include <tandem/tandem.h>

#include "core/err.h"
#include "plan/plan.h"
#include "graph/fuse.h"
#include "run/hexec.h"
#include "run/hpart.h"

#include "../common/model_inputs.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXIO 8

static tdm_ctx *ctx;
static tdm_model *m;
static tdm_tensor *in[MAXIO];
static size_t nin, nout;
static int failures;

#define CHECK(c, ...)                                                                                                  \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            printf("FAIL (%s:%d): ", __FILE__, __LINE__);                                                              \
            printf(__VA_ARGS__);                                                                                       \
            printf("\n");                                                                                              \
            failures++;                                                                                                \
        }                                                                                                              \
    } while (0)

static tdm_session *open_session(const char *devices, int fusion, int pins, tdm_granularity gran)
{
    tdm_session_options *o = NULL;
    tdm_session *s = NULL;
    tdm_session_options_create(&o);
    tdm_session_options_set_devices(o, devices);
    tdm_session_options_set_granularity(o, gran);
    tdm_session_options_set_fusion(o, (tdm_fusion)fusion);
    for (size_t k = 0; k < nin; k++) {
        tdm_value_info vi;
        tdm_model_input(m, k, &vi);
        tdm_session_options_set_shape(o, vi.name, tdm_tensor_rank(in[k]), tdm_tensor_dims(in[k]));
    }
    if (pins) {
        /* nodes 0-2, 5-7, 10-12, ... on cpu; the names come from a plan */
        tdm_plan *probe = NULL;
        if (tdm_plan_create(ctx, m, o, &probe) != TDM_OK) {
            printf("plan on %s: %s\n", devices, tdm_ctx_error(ctx));
            tdm_session_options_destroy(o);
            return NULL;
        }
        for (size_t i = 0; i < tdm_plan_node_count(probe); i++) {
            const char *name = NULL;
            char pin[512];
            tdm_plan_node(probe, i, &name, NULL, NULL, NULL, NULL);
            if (i % 5 >= 3 || !name || strchr(name, '=') || strlen(name) > 400)
                continue;
            snprintf(pin, sizeof pin, "%s=cpu", name);
            tdm_session_options_add_pin(o, pin);
        }
        tdm_plan_destroy(probe);
    }
    if (tdm_session_create(ctx, m, o, &s) != TDM_OK)
        printf("session on %s: %s\n", devices, tdm_ctx_error(ctx));
    tdm_session_options_destroy(o);
    return s;
}

static int run(tdm_session *s, tdm_tensor **out)
{
    tdm_status st = tdm_session_run(s, (const tdm_tensor *const *)in, out);
    if (st != TDM_OK)
        printf("run: %s: %s\n", tdm_status_str(st), tdm_session_error(s));
    return st != TDM_OK;
}

static void free_outs(tdm_tensor **out)
{
    for (size_t k = 0; k < nout; k++) {
        tdm_tensor_destroy(out[k]);
        out[k] = NULL;
    }
}

/* The largest |a - b| over max|a| of the float outputs (and the smallest
 * cosine); -1 when they do not match in count or type. */
static double rel_diff(tdm_tensor **a, tdm_tensor **b, double *cosine)
{
    double worst = 0;
    *cosine = 1;
    for (size_t k = 0; k < nout; k++) {
        size_t n = tdm_tensor_count(a[k]);
        if (!a[k] || !b[k] || tdm_tensor_count(b[k]) != n || tdm_tensor_dtype(a[k]) != tdm_tensor_dtype(b[k]))
            return -1;
        if (tdm_tensor_dtype(a[k]) != TDM_FLOAT)
            continue;
        const float *x = tdm_tensor_cdata(a[k]), *y = tdm_tensor_cdata(b[k]);
        double mx = 0, diff = 0, xy = 0, xx = 0, yy = 0;
        for (size_t i = 0; i < n; i++) {
            mx = fmax(mx, fabs(x[i]));
            if (!(fabs((double)x[i] - y[i]) <= diff))
                diff = fabs((double)x[i] - y[i]);
            xy += (double)x[i] * y[i];
            xx += (double)x[i] * x[i];
            yy += (double)y[i] * y[i];
        }
        double r = mx > 0 ? diff / mx : diff;
        if (!(r <= worst))
            worst = r;
        if (xx > 0 && yy > 0 && xy / sqrt(xx * yy) < *cosine)
            *cosine = xy / sqrt(xx * yy);
    }
    return worst;
}

/* ---- the observer ---- */

typedef struct seen {
    int events, with_values, all_null;
    const char *name, *device;
    int bad_index;
} seen;

typedef struct watch {
    seen *nodes;
    size_t n;
    int bad;
} watch;

static void on_event(void *user, const tdm_event *ev)
{
    watch *w = user;
    if (ev->kind != TDM_EVENT_NODE)
        return;
    if (ev->node_index >= w->n) {
        w->bad++;
        return;
    }
    seen *s = &w->nodes[ev->node_index];
    s->events++;
    if (!s->name || strcmp(s->name, ev->name) != 0 || !s->device || strcmp(s->device, ev->device) != 0)
        s->bad_index = 1;
    int nonnull = 0;
    for (int k = 0; k < ev->n_outputs; k++)
        nonnull += ev->outputs && ev->outputs[k] != NULL;
    s->with_values = nonnull;
    s->all_null = ev->n_outputs > 0 && nonnull == 0;
}

/* A value name read by a node off cpu or among the graph's outputs. */
static int read_elsewhere(const tdm_plan *p, const char *value)
{
    for (size_t k = 0; k < nout; k++) {
        tdm_value_info vi;
        tdm_model_output(m, k, &vi);
        if (strcmp(vi.name, value) == 0)
            return 1;
    }
    for (size_t i = 0; i < tdm_plan_node_count(p); i++) {
        const char *dev = NULL;
        tdm_plan_node(p, i, NULL, NULL, &dev, NULL, NULL);
        if (strcmp(dev, "cpu") == 0)
            continue;
        for (size_t k = 0; k < tdm_plan_node_input_count(p, i); k++)
            if (strcmp(tdm_plan_node_input(p, i, k), value) == 0)
                return 1;
    }
    return 0;
}

/* One observed run with fusion "observed": every node once, by its index;
 * boundary values reported; the count of cpu nodes fused away. */
static int check_observed(tdm_session *s)
{
    const tdm_plan *p = tdm_session_plan(s);
    watch w = {calloc(tdm_plan_node_count(p) + 1, sizeof(seen)), tdm_plan_node_count(p), 0};
    for (size_t i = 0; i < w.n; i++)
        tdm_plan_node(p, i, &w.nodes[i].name, NULL, &w.nodes[i].device, NULL, NULL);
    tdm_session_set_observer(s, on_event, &w);
    tdm_tensor *out[MAXIO] = {0};
    CHECK(!run(s, out), "the observed run failed");
    free_outs(out);
    tdm_session_set_observer(s, NULL, NULL);
    int fused_away = 0, once = 1, named = 1, boundary = 0, boundary_missing = 0;
    for (size_t i = 0; i < w.n; i++) {
        once &= w.nodes[i].events == 1;
        named &= !w.nodes[i].bad_index;
        if (strcmp(w.nodes[i].device, "cpu") != 0)
            continue;
        fused_away += w.nodes[i].all_null;
        for (size_t k = 0; k < tdm_plan_node_output_count(p, i); k++) {
            const char *o = tdm_plan_node_output(p, i, k);
            if (!o[0] || !read_elsewhere(p, o))
                continue;
            boundary++;
            if (!w.nodes[i].with_values) {
                boundary_missing++;
                printf("boundary value '%s' of cpu node '%s' was not computed on its own\n", o, w.nodes[i].name);
            }
        }
    }
    printf("observed: %zu nodes, every one reported once: %s, by its index and device: %s; %d cpu nodes fused "
           "away; %d boundary values out of cpu nodes, %d not reported\n",
           w.n, once ? "yes" : "no", named ? "yes" : "no", fused_away, boundary, boundary_missing);
    CHECK(once && named && !w.bad, "the observer did not see every node once by its plan index");
    CHECK(fused_away > 0, "no cpu node was fused away");
    CHECK(boundary > 0 && boundary_missing == 0, "boundary values: %d, %d missing", boundary, boundary_missing);
    free(w.nodes);
    return fused_away;
}

/* The program of the session's plan: partitions, their fusion, the values
 * they hand on, and a run's stats. */
static void check_program(tdm_session *s, size_t min_parts)
{
    const tdm_plan *plan = tdm_session_plan(s);
    tdm_err e;
    memset(&e, 0, sizeof e);
    exec_prog *prog = NULL;
    if (exec_prog_build(&e, plan, &prog) != TDM_OK) {
        CHECK(0, "exec_prog_build: %s", e.msg);
        return;
    }
    int n_parts = 0, inner_out = 0, cpu_nodes = 0;
    const hpart *parts = exec_prog_parts(prog, &n_parts);
    for (int k = 0; k < n_parts; k++) {
        const hpart *hp = &parts[k];
        const gr_graph *sg = hp->g;
        cpu_nodes += sg->n_nodes;
        const fuse_plan *fp = hp->cache.fuse;
        for (int h = 0; fp && h < sg->n_nodes; h++) {
            const fuse_chain *c = fuse_head_chain(fp, h);
            if (!c)
                continue;
            int last = fuse_chain_out_value(c);
            /* the chain's values but its last: the head's and the members' outputs */
            int v = sg->nodes[h].outputs[0];
            inner_out += v >= 0 && v != last && sg->values[v].is_output;
            for (int j = 0; j < fuse_chain_n_members(c); j++) {
                const gr_node *mn = &sg->nodes[fuse_chain_member(c, j)];
                for (int o = 0; o < mn->n_outputs; o++)
                    inner_out += mn->outputs[o] >= 0 && mn->outputs[o] != last && sg->values[mn->outputs[o]].is_output;
            }
        }
    }
    int fused = hpart_fused_nodes(parts, n_parts);
    printf("program: %d cpu partitions, %d cpu nodes, %d fused away in their plans; %d values handed on from "
           "inside a chain\n",
           n_parts, cpu_nodes, fused, inner_out);
    CHECK((size_t)n_parts >= min_parts, "%d cpu partitions, expected at least %zu", n_parts, min_parts);
    CHECK(fused > 0, "no node fused away in the cpu partitions");
    CHECK(inner_out == 0, "%d values handed on from inside a chain", inner_out);
    CHECK((size_t)cpu_nodes == tdm_plan_device_nodes(plan, tdm_plan_device_count(plan) - 1),
          "the partitions hold %d nodes, the plan puts %zu on cpu", cpu_nodes,
          tdm_plan_device_nodes(plan, tdm_plan_device_count(plan) - 1));
    /* a run's stats (the ledger's "run"): every node, per device */
    const gr_graph *g = plan->g;
    const tdm_tensor *gin[MAXIO] = {0};
    tdm_tensor *out[MAXIO] = {0};
    for (int k = 0; k < g->n_inputs && k < MAXIO; k++)
        for (size_t j = 0; j < nin; j++) {
            tdm_value_info vi;
            tdm_model_input(m, j, &vi);
            if (strcmp(vi.name, g->values[g->inputs[k]].name) == 0)
                gin[k] = in[j];
        }
    exec_stats st;
    tdm_status rs = exec_prog_run(&e, prog, gin, out, 1, &st);
    CHECK(rs == TDM_OK, "exec_prog_run: %s", e.msg);
    if (rs == TDM_OK) {
        int same = st.nodes == (size_t)g->n_nodes;
        for (size_t d = 0; d < st.n_devices; d++)
            same &= st.nodes_by_device[d] == tdm_plan_device_nodes(plan, d);
        printf("stats: %zu nodes run, per device as planned: %s\n", st.nodes, same ? "yes" : "no");
        CHECK(same, "the run's stats do not count the plan's nodes");
        exec_stats_free(&st);
        for (int k = 0; k < g->n_outputs && k < MAXIO; k++)
            tdm_tensor_destroy(out[k]);
    }
    exec_prog_free(prog);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: test_mixed MODEL INPUTS_TXT pins|opencl|edge\n");
        return 2;
    }
    const char *cs = argv[3];
    FILE *f = fopen(argv[1], "rb");
    if (!f) {
        printf("SKIP: %s is missing\n", argv[1]);
        return 77;
    }
    fclose(f);
    tdm_ctx_create(&ctx);
    if (tdm_model_load(ctx, argv[1], &m) != TDM_OK) {
        printf("FAIL: %s\n", tdm_ctx_error(ctx));
        return 1;
    }
    nin = tdm_model_input_count(m);
    nout = tdm_model_output_count(m);
    if (nin > MAXIO || nout > MAXIO)
        return printf("FAIL: too many inputs or outputs\n"), 1;
    int lrc = test_load_inputs(ctx, m, argv[2], in, nin);
    if (lrc)
        return lrc;
    int pins = strcmp(cs, "edge") != 0;
    const char *devices = strcmp(cs, "pins") == 0 ? "vnpu:fp32-all" : strcmp(cs, "opencl") == 0 ? "opencl" : "vnpu:edge-npu";
    tdm_granularity gran = pins ? TDM_GRANULARITY_OP : TDM_GRANULARITY_SUBGRAPH;

    tdm_session *mixed = open_session(devices, TDM_FUSION_ON, pins, gran);
    if (!mixed && strcmp(cs, "opencl") == 0) {
        printf("SKIP: no OpenCL device\n");
        return 77;
    }
    if (!mixed)
        return printf("FAIL: the mixed session\n"), 1;
    tdm_plan_summary sum;
    tdm_plan_get_summary(tdm_session_plan(mixed), &sum);
    printf("%s on %s: %zu nodes, %zu on cpu, %zu partitions\n", argv[1], devices, sum.nodes,
           tdm_plan_device_nodes(tdm_session_plan(mixed), tdm_plan_device_count(tdm_session_plan(mixed)) - 1),
           sum.partitions);

    tdm_tensor *got[MAXIO] = {0}, *got_off[MAXIO] = {0}, *ref[MAXIO] = {0}, *ref_off[MAXIO] = {0};
    double cos = 1, d;
    if (run(mixed, got))
        return printf("FAIL: the mixed run\n"), 1;
    /* a second run reuses the partitions' caches (fusion, arena) */
    if (run(mixed, got_off))
        return printf("FAIL: the second mixed run\n"), 1;
    d = rel_diff(got, got_off, &cos);
    CHECK(d == 0, "the second run differs from the first by %.3g", d);
    free_outs(got_off);
    tdm_session *mixed_off = open_session(devices, TDM_FUSION_OFF, pins, gran);
    if (!mixed_off || run(mixed_off, got_off))
        return printf("FAIL: the mixed session without fusion\n"), 1;
    tdm_session_destroy(mixed_off);
    if (pins) {
        tdm_session *cpu = open_session("cpu", TDM_FUSION_ON, 0, TDM_GRANULARITY_SUBGRAPH);
        tdm_session *cpu_off = open_session("cpu", TDM_FUSION_OFF, 0, TDM_GRANULARITY_SUBGRAPH);
        if (!cpu || !cpu_off || run(cpu, ref) || run(cpu_off, ref_off))
            return printf("FAIL: the cpu sessions\n"), 1;
        tdm_session_destroy(cpu);
        tdm_session_destroy(cpu_off);
        d = rel_diff(ref, got, &cos);
        printf("fused: max|diff| / max|cpu| = %.3g (cosine %.9f)\n", d, cos);
        CHECK(d >= 0 && d <= 1e-4, "the fused mixed run differs from cpu by %.3g of max|cpu|", d);
        double bound = strcmp(cs, "opencl") == 0 ? 1e-4 : 1e-6;
        d = rel_diff(ref_off, got_off, &cos);
        printf("unfused: max|diff| / max|cpu| = %.3g (cosine %.9f)\n", d, cos);
        CHECK(d >= 0 && d <= bound, "the unfused mixed run differs from unfused cpu by %.3g of max|cpu|", d);
    } else {
        d = rel_diff(got_off, got, &cos);
        printf("fused against unfused: max|diff| / max|ref| = %.3g, cosine %.9f\n", d, cos);
        CHECK(d >= 0 && d <= 1e-2 && cos >= 0.9999, "fused against unfused: %.3g, cosine %.9f", d, cos);
    }
    free_outs(got);
    free_outs(got_off);
    free_outs(ref);
    free_outs(ref_off);

    check_program(mixed, pins ? 10 : 1);
    tdm_session_destroy(mixed);
    tdm_session *observed = open_session(devices, TDM_FUSION_OBSERVED, pins, gran);
    if (!observed)
        return printf("FAIL: the observed session\n"), 1;
    check_observed(observed);
    tdm_session_destroy(observed);

    for (size_t k = 0; k < nin; k++)
        tdm_tensor_destroy(in[k]);
    tdm_model_destroy(m);
    tdm_ctx_destroy(ctx);
    printf("%s\n", failures ? "FAIL" : "PASS");
    return failures ? 1 : 0;
}
