/* Runs a model on cpu and on a heterogeneous plan and compares the outputs
 * within the plan's precision:
 *   plan_run MODEL INPUTS_TXT DEVICES GRANULARITY fp32|fp16 [--report] [--static] [--pin=X=DEV]...
 *                 [--expect-mismatch] [--verify=MODE] [--expect-guard=N]
 *
 * --static fixes the inputs' dynamic dimensions to the given inputs' shapes
 * (tdm_session_options_set_shape), so that the planner sees static shapes.
 * --expect-mismatch inverts the verdict (a known precision limit).
 * --verify=MODE sets the precision guard (off, first, every:N);
 * --expect-guard=N fails unless the guard moved exactly N nodes (0: it must
 * not fire; the guard's record is printed).
 * A missing model exits 77 (skipped).
 * INPUTS_TXT has NAME=FILE lines. fp32: max |diff| <= 1e-6 * max |cpu|;
 * fp16: cosine similarity >= 0.999 (and finite). Prints the plan summary
 * line; exits 0 on agreement, 1 otherwise. */
#include <tandem/tandem.h>

#include "../common/model_inputs.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXIO 16

static int fail(const char *what, tdm_status st, const char *msg)
{
    fprintf(stderr, "plan_run: %s: %s: %s\n", what, tdm_status_str(st), msg);
    return 1;
}

static double elem(const tdm_tensor *t, size_t i)
{
    const void *d = tdm_tensor_cdata(t);
    switch (tdm_tensor_dtype(t)) {
    case TDM_FLOAT:
        return ((const float *)d)[i];
    case TDM_DOUBLE:
        return ((const double *)d)[i];
    case TDM_INT64:
        return (double)((const int64_t *)d)[i];
    case TDM_INT32:
        return ((const int32_t *)d)[i];
    case TDM_BOOL:
    case TDM_UINT8:
        return ((const uint8_t *)d)[i];
    default:
        return NAN;
    }
}

int main(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr, "usage: plan_run MODEL INPUTS_TXT DEVICES GRANULARITY fp32|fp16 [--report]\n");
        return 2;
    }
    const char *model_path = argv[1], *inputs_txt = argv[2], *devices = argv[3], *gran = argv[4], *prec = argv[5];
    int report = 0, static_shapes = 0, expect_mismatch = 0, expect_guard = -1;
    tdm_verify_mode vmode;
    int vevery;
    tdm_ctx *ctx = NULL;
    tdm_model *m = NULL;
    tdm_status st;
    FILE *probe = fopen(model_path, "rb");
    if (!probe) {
        fprintf(stderr, "plan_run: %s is missing: run 'make data' first (skipped)\n", model_path);
        return 77;
    }
    fclose(probe);
    if ((st = tdm_ctx_create(&ctx)) != TDM_OK)
        return fail("ctx", st, "");
    if ((st = tdm_model_load(ctx, model_path, &m)) != TDM_OK)
        return fail(model_path, st, tdm_ctx_error(ctx));
    size_t nin = tdm_model_input_count(m), nout = tdm_model_output_count(m);
    if (nin > MAXIO || nout > MAXIO)
        return fail(model_path, TDM_E_USAGE, "too many inputs or outputs");
    tdm_tensor *in[MAXIO] = {0};
    int lrc = test_load_inputs(ctx, m, inputs_txt, in, nin);
    if (lrc == 77)
        return fail(inputs_txt, TDM_E_IO, "cannot open");
    if (lrc)
        return lrc;
    for (size_t k = 0; k < nin; k++)
        if (!in[k])
            return fail(inputs_txt, TDM_E_INPUT, "an input is missing");

    tdm_session_options *ocpu = NULL, *oplan = NULL;
    tdm_session *scpu = NULL, *splan = NULL;
    tdm_session_options_create(&ocpu);
    tdm_session_options_create(&oplan);
    tdm_session_options_set_devices(ocpu, "cpu");
    /* the reference runs node by node: folding BatchNormalization into a
     * Conv (fusion, on for all-cpu plans) rounds differently by ~1e-6,
     * and this test checks the plan's execution, not the fused kernels
     * (the model tests check those against onnxruntime) */
    tdm_session_options_set_fusion(ocpu, TDM_FUSION_OFF);
    tdm_session_options_set_devices(oplan, devices);
    for (int a = 6; a < argc; a++) {
        if (strcmp(argv[a], "--report") == 0)
            report = 1;
        else if (strcmp(argv[a], "--expect-mismatch") == 0)
            expect_mismatch = 1;
        else if (strncmp(argv[a], "--verify=", 9) == 0 &&
                 (tdm_verify_mode_parse(NULL, argv[a] + 9, &vmode, &vevery) != TDM_OK ||
                  tdm_session_options_set_verify(oplan, vmode, vevery) != TDM_OK))
            return fail(argv[a], TDM_E_USAGE, "bad --verify");
        else if (strncmp(argv[a], "--expect-guard=", 15) == 0)
            expect_guard = atoi(argv[a] + 15);
        else if (strncmp(argv[a], "--static", 8) == 0)
            static_shapes = 1;
        else if (strncmp(argv[a], "--pin=", 6) == 0 && tdm_session_options_add_pin(oplan, argv[a] + 6) != TDM_OK)
            return fail(argv[a], TDM_E_USAGE, "bad pin");
    }
    tdm_granularity g;
    if (tdm_granularity_parse(NULL, gran, &g) != TDM_OK || tdm_session_options_set_granularity(oplan, g) != TDM_OK)
        return fail(gran, TDM_E_USAGE, "bad granularity");
    for (size_t k = 0; static_shapes && k < nin; k++) {
        tdm_value_info vi;
        tdm_model_input(m, k, &vi);
        if (tdm_tensor_kind(in[k]) == TDM_KIND_TENSOR)
            tdm_session_options_set_shape(oplan, vi.name, tdm_tensor_rank(in[k]), tdm_tensor_dims(in[k]));
    }
    if ((st = tdm_session_create(ctx, m, ocpu, &scpu)) != TDM_OK)
        return fail("cpu session", st, tdm_ctx_error(ctx));
    if ((st = tdm_session_create(ctx, m, oplan, &splan)) != TDM_OK)
        return fail("plan session", st, tdm_ctx_error(ctx));
    tdm_plan_summary sum;
    const tdm_plan *plan = tdm_session_plan(splan);
    tdm_plan_get_summary(plan, &sum);
    printf("%s on %s (%s): ", model_path, devices, gran);
    for (size_t d = 0; d < tdm_plan_device_count(plan); d++)
        printf("%s%s=%zu", d ? ", " : "", tdm_plan_device_name(plan, d), tdm_plan_device_nodes(plan, d));
    printf("; fallback %zu; partitions %zu; boundary %llu bytes (%zu unknown); weights %llu bytes\n",
           sum.fallback_nodes, sum.partitions, (unsigned long long)sum.boundary_bytes, sum.boundary_unknown,
           (unsigned long long)sum.weight_bytes);
    if (report) {
        char *txt = NULL;
        if (tdm_plan_report(plan, &txt) == TDM_OK)
            fputs(txt, stdout);
        tdm_free(txt);
    }
    tdm_tensor *oc[MAXIO] = {0}, *op[MAXIO] = {0};
    if ((st = tdm_session_run(scpu, (const tdm_tensor *const *)in, oc)) != TDM_OK)
        return fail("cpu run", st, tdm_session_error(scpu));
    if ((st = tdm_session_run(splan, (const tdm_tensor *const *)in, op)) != TDM_OK)
        return fail("plan run", st, tdm_session_error(splan));
    int bad = 0;
    for (size_t k = 0; k < nout; k++) {
        size_t n = tdm_tensor_count(oc[k]);
        if (tdm_tensor_kind(oc[k]) != TDM_KIND_TENSOR || tdm_tensor_count(op[k]) != n ||
            tdm_tensor_dtype(oc[k]) != tdm_tensor_dtype(op[k])) {
            printf("output %zu: shape or type differs\n", k);
            bad = 1;
            continue;
        }
        double maxref = 0, maxdiff = 0, dot = 0, na = 0, nb = 0;
        for (size_t i = 0; i < n; i++) {
            double a = elem(oc[k], i), b = elem(op[k], i);
            if (!isfinite(b) && isfinite(a))
                maxdiff = INFINITY;
            if (fabs(a) > maxref)
                maxref = fabs(a);
            if (fabs(a - b) > maxdiff)
                maxdiff = fabs(a - b);
            dot += a * b;
            na += a * a;
            nb += b * b;
        }
        double cosine = na > 0 && nb > 0 ? dot / sqrt(na * nb) : (na == nb ? 1 : 0);
        double rel = maxref > 0 ? maxdiff / maxref : maxdiff;
        int ok = strcmp(prec, "fp32") == 0 ? rel <= 1e-6 : (cosine >= 0.999 && isfinite(maxdiff));
        printf("output %zu: %zu elements, max|diff| %.3g (relative %.3g), cosine %.7f: %s\n", k, n, maxdiff, rel,
               cosine, ok ? "ok" : "MISMATCH");
        bad |= !ok;
    }
    if (expect_guard >= 0) {
        char *gj = NULL;
        if (tdm_session_guard_json(splan, &gj) != TDM_OK || !gj)
            return fail("guard", TDM_E_NOMEM, "no guard record");
        const char *mv = strstr(gj, "\"moved_nodes\":");
        int moved = mv ? atoi(mv + strlen("\"moved_nodes\":")) : -1;
        printf("guard: %s\n", gj);
        if (moved != expect_guard) {
            printf("the guard moved %d nodes, expected %d: MISMATCH\n", moved, expect_guard);
            bad = 1;
        }
        tdm_free(gj);
    }
    for (size_t k = 0; k < nout; k++) {
        tdm_tensor_destroy(oc[k]);
        tdm_tensor_destroy(op[k]);
    }
    for (size_t k = 0; k < nin; k++)
        tdm_tensor_destroy(in[k]);
    tdm_session_destroy(scpu);
    tdm_session_destroy(splan);
    tdm_session_options_destroy(ocpu);
    tdm_session_options_destroy(oplan);
    tdm_model_destroy(m);
    tdm_ctx_destroy(ctx);
    if (expect_mismatch) {
        printf(bad ? "mismatch, as expected\n" : "the outputs agree, a mismatch was expected\n");
        return bad ? 0 : 1;
    }
    return bad;
}
