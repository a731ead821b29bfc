/* The model set under --granularity auto:
 *   cost_models MODEL INPUTS_TXT PROFILE [--shape NAME=1x3x960x960] [--seed004] [--ledger FILE]
 * plans MODEL (static shapes from the inputs, or --shape) on vnpu:PROFILE,cpu
 * with op, subgraph, graph and auto, prints the estimated time of each and
 * fails when auto's exceeds the best of the others. --seed004 also requires
 * auto to keep nodes on the device and to move some off it for MEMORY, with
 * the first Conv (the backbone's stem) on the device, and prints the
 * figures; --ledger writes auto's ledger. A missing model exits 77. */
#include <tandem/tandem.h>

#include "../../common/model_inputs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXIO 16

static int fail(const char *what, tdm_status st, const char *msg)
{
    fprintf(stderr, "cost_models: %s: %s: %s\n", what, tdm_status_str(st), msg);
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: cost_models MODEL INPUTS_TXT PROFILE [--shape NAME=DIMS] [--seed004] [--ledger FILE]\n");
        return 2;
    }
    const char *model_path = argv[1], *inputs_txt = argv[2], *profile = argv[3];
    const char *shape = NULL, *ledger = NULL;
    int seed004 = 0;
    for (int a = 4; a < argc; a++) {
        if (strcmp(argv[a], "--shape") == 0 && a + 1 < argc)
            shape = argv[++a];
        else if (strcmp(argv[a], "--ledger") == 0 && a + 1 < argc)
            ledger = argv[++a];
        else if (strcmp(argv[a], "--seed004") == 0)
            seed004 = 1;
        else
            return 2;
    }
    FILE *probe = fopen(model_path, "rb");
    if (!probe) {
        fprintf(stderr, "cost_models: %s is missing: run 'make data' first (skipped)\n", model_path);
        return 77;
    }
    fclose(probe);
    tdm_ctx *ctx = NULL;
    tdm_model *m = NULL;
    tdm_status st;
    if ((st = tdm_ctx_create(&ctx)) != TDM_OK)
        return fail("ctx", st, "");
    if ((st = tdm_model_load(ctx, model_path, &m)) != TDM_OK)
        return fail(model_path, st, tdm_ctx_error(ctx));
    size_t nin = tdm_model_input_count(m);
    if (nin > MAXIO)
        return fail(model_path, TDM_E_USAGE, "too many inputs");
    /* static shapes from the inputs */
    int ranks[MAXIO] = {0};
    int64_t dims[MAXIO][8];
    tdm_tensor *in[MAXIO] = {0};
    int lrc = test_load_inputs(ctx, m, inputs_txt, in, nin);
    if (lrc)
        return lrc;
    for (size_t k = 0; k < nin; k++) {
        if (in[k] && tdm_tensor_kind(in[k]) == TDM_KIND_TENSOR && tdm_tensor_rank(in[k]) <= 8) {
            ranks[k] = tdm_tensor_rank(in[k]);
            memcpy(dims[k], tdm_tensor_dims(in[k]), (size_t)ranks[k] * sizeof(int64_t));
        }
        tdm_tensor_destroy(in[k]);
    }
    if (shape) {
        char name[256];
        const char *eq = strchr(shape, '=');
        if (!eq || (size_t)(eq - shape) >= sizeof name)
            return 2;
        memcpy(name, shape, (size_t)(eq - shape));
        name[eq - shape] = '\0';
        for (size_t k = 0; k < nin; k++) {
            tdm_value_info vi;
            tdm_model_input(m, k, &vi);
            if (strcmp(vi.name, name) != 0)
                continue;
            ranks[k] = 0;
            for (const char *q = eq + 1; *q && ranks[k] < 8;) {
                dims[k][ranks[k]++] = strtoll(q, NULL, 10);
                q = strchr(q, 'x');
                if (!q)
                    break;
                q++;
            }
        }
    }
    static const tdm_granularity grans[] = {TDM_GRANULARITY_OP, TDM_GRANULARITY_SUBGRAPH, TDM_GRANULARITY_GRAPH,
                                            TDM_GRANULARITY_AUTO};
    double est[4] = {0};
    char devices[128];
    snprintf(devices, sizeof devices, "vnpu:%s,cpu", profile);
    const tdm_plan *keep = NULL;
    tdm_plan *plans[4] = {0};
    for (int gi = 0; gi < 4; gi++) {
        tdm_session_options *o = NULL;
        tdm_session_options_create(&o);
        tdm_session_options_set_devices(o, devices);
        tdm_session_options_set_granularity(o, grans[gi]);
        for (size_t k = 0; k < nin; k++) {
            tdm_value_info vi;
            tdm_model_input(m, k, &vi);
            if (ranks[k] > 0)
                tdm_session_options_set_shape(o, vi.name, ranks[k], dims[k]);
        }
        if ((st = tdm_plan_create(ctx, m, o, &plans[gi])) != TDM_OK)
            return fail(tdm_granularity_name(grans[gi]), st, tdm_ctx_error(ctx));
        tdm_session_options_destroy(o);
        tdm_plan_summary sum;
        tdm_plan_get_summary(plans[gi], &sum);
        est[gi] = sum.estimated_ms;
        if (!sum.estimates_complete)
            return fail(tdm_granularity_name(grans[gi]), TDM_E_INTERNAL, "the estimates are incomplete");
    }
    keep = plans[3];
    double best = est[0] < est[1] ? est[0] : est[1];
    best = est[2] < best ? est[2] : best;
    const char *base = strrchr(model_path, '/');
    base = base ? base + 1 : model_path;
    printf("%s on %s: op %.3f ms, subgraph %.3f ms, graph %.3f ms, auto %.3f ms (", base, devices, est[0], est[1], est[2],
           est[3]);
    for (size_t d = 0; d < tdm_plan_device_count(keep); d++)
        printf("%s%s=%zu", d ? ", " : "", tdm_plan_device_name(keep, d), tdm_plan_device_nodes(keep, d));
    printf(")\n");
    {
        char *json = NULL;
        if (tdm_plan_ledger_json(keep, &json) == TDM_OK) {
            const char *mth = strstr(json, "\"method\"");
            const char *q = mth ? strchr(mth + 8, '"') : NULL;
            const char *r = q ? strchr(q + 1, '"') : NULL;
            if (q && r)
                printf("  auto method: %.*s\n", (int)(r - q - 1), q + 1);
        }
        tdm_free(json);
    }
    int bad = est[3] > best * (1 + 1e-9) + 1e-9;
    if (bad)
        printf("FAIL: auto's estimate %.6f ms exceeds the best fixed granularity's %.6f ms\n", est[3], best);
    if (seed004) {
        size_t mem = 0, cost = 0, on_dev = tdm_plan_device_nodes(keep, 0), on_cpu = tdm_plan_device_nodes(keep, 1);
        int stem_on_dev = -1;
        for (size_t i = 0; i < tdm_plan_node_count(keep); i++) {
            const char *name, *op, *dev, *reason, *detail;
            tdm_plan_node(keep, i, &name, &op, &dev, &reason, &detail);
            if (strcmp(reason, "MEMORY") == 0) {
                if (mem < 3)
                    printf("  MEMORY: %s (%s) on %s: %s\n", name, op, dev, detail);
                mem++;
            }
            cost += strcmp(reason, "COST") == 0;
            if (stem_on_dev < 0 && strcmp(op, "Conv") == 0)
                stem_on_dev = strcmp(dev, "cpu") != 0;
        }
        printf("seed-004: auto keeps %zu nodes on %s, %zu on cpu (%zu for MEMORY, %zu for COST); the first Conv is on %s\n",
               on_dev, tdm_plan_device_name(keep, 0), on_cpu, mem, cost, stem_on_dev == 1 ? "the device" : "cpu");
        if (!(on_dev > 0 && mem > 0 && stem_on_dev == 1)) {
            printf("FAIL: seed-004 expects the backbone on the device and nodes moved off it for MEMORY\n");
            bad = 1;
        }
    }
    if (ledger) {
        char *json = NULL;
        if (tdm_plan_ledger_json(keep, &json) == TDM_OK) {
            FILE *o = fopen(ledger, "w");
            if (o) {
                fputs(json, o);
                fclose(o);
            }
        }
        tdm_free(json);
    }
    for (int gi = 0; gi < 4; gi++)
        tdm_plan_destroy(plans[gi]);
    tdm_model_destroy(m);
    tdm_ctx_destroy(ctx);
    return bad;
}
