/* Rescue tests (ctest rescue.*): a model planned on a vnpu profile with
 * --rescue MODE must (or must not) keep RULE's rewrite — the ledger's
 * "rescue" section says so, and the new nodes run on the device with
 * reason RESCUED — and its outputs, on inputs with edge values (0, -0,
 * negatives, large values, NaN with --nan; integer inputs, indices, cycle
 * through 0, 1, 2, -1, 3), must equal those of the model on cpu alone
 * (rescue off): the same NaN positions, no non-finite value
 * where cpu's is finite, max |diff| <= TOL x max(1, max |cpu|).
 *
 *   test_rescue MODEL PROFILE MODE RULE kept|refused|none|untried [--tol T] [--nan]
 *               [--partitions-off N] [--partitions N] [--granularity G]
 *               [--fallbacks N] [--why TEXT]
 *
 * --partitions N: the plan with MODE has N partitions; --partitions-off N:
 * the same plan with rescue off has N; --fallbacks N: the plan with MODE has
 * N fallback nodes; --why TEXT: a refused attempt's sentence contains TEXT. */
#include "core/tensor.h"
#include "tandem/tandem.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char *what, const char *detail)
{
    fprintf(stderr, "FAIL: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    return 1;
}

static const char *granularity = "subgraph";

static tdm_session_options *options(const char *devices, tdm_rescue_mode mode)
{
    tdm_session_options *o = NULL;
    tdm_granularity g;
    if (tdm_granularity_parse(NULL, granularity, &g) || tdm_session_options_create(&o) ||
        tdm_session_options_set_devices(o, devices) || tdm_session_options_set_granularity(o, g) ||
        tdm_session_options_set_rescue(o, mode)) {
        tdm_session_options_destroy(o);
        return NULL;
    }
    return o;
}

/* The plan's ledger, parsed; *parts its partition count. */
static cJSON *ledger(tdm_ctx *ctx, const tdm_model *m, const tdm_session_options *o, int *parts, int *fallbacks)
{
    tdm_plan *p = NULL;
    char *json = NULL;
    cJSON *root = NULL;
    if (tdm_plan_create(ctx, m, o, &p) || tdm_plan_ledger_json(p, &json)) {
        fprintf(stderr, "plan: %s\n", tdm_ctx_error(ctx));
        tdm_plan_destroy(p);
        return NULL;
    }
    root = cJSON_Parse(json);
    tdm_free(json);
    tdm_plan_destroy(p);
    const cJSON *s = cJSON_GetObjectItem(root, "summary");
    *parts = s ? (int)cJSON_GetNumberValue(cJSON_GetObjectItem(s, "partitions")) : -1;
    *fallbacks = s ? (int)cJSON_GetNumberValue(cJSON_GetObjectItem(s, "fallback_nodes")) : -1;
    return root;
}

/* Checks the "rescue" section against the expectation. */
static int check_ledger(const cJSON *root, const char *rule, const char *expect, const char *device, const char *want_why)
{
    const cJSON *r = cJSON_GetObjectItem(root, "rescue");
    const cJSON *att = r ? cJSON_GetObjectItem(r, "attempts") : NULL, *it;
    int kept = 0, refused = 0, rescued_nodes = 0, why_found = 0;
    cJSON_ArrayForEach(it, att)
    {
        const char *rl = cJSON_GetStringValue(cJSON_GetObjectItem(it, "rule"));
        if (!rl || strcmp(rl, rule) != 0)
            continue;
        if (cJSON_IsTrue(cJSON_GetObjectItem(it, "kept"))) {
            const cJSON *v = cJSON_GetObjectItem(it, "verification"), *n;
            kept++;
            if (!v || !cJSON_IsTrue(cJSON_GetObjectItem(v, "pass")))
                return fail("a kept rescue without a passing verification", rl);
            printf("kept %s for %s: max_abs %g cosine %.9f over %g values\n", rl,
                   cJSON_GetStringValue(cJSON_GetObjectItem(it, "node")),
                   cJSON_GetNumberValue(cJSON_GetObjectItem(v, "max_abs")),
                   cJSON_GetNumberValue(cJSON_GetObjectItem(v, "cosine")),
                   cJSON_GetNumberValue(cJSON_GetObjectItem(v, "values")));
            cJSON_ArrayForEach(n, cJSON_GetObjectItem(it, "became"))
            {
                const char *dev = cJSON_GetStringValue(cJSON_GetObjectItem(n, "device"));
                const char *why = cJSON_GetStringValue(cJSON_GetObjectItem(n, "reason"));
                if (!dev || strcmp(dev, device) != 0 || !why || strcmp(why, "RESCUED") != 0)
                    return fail("a rescued node is not on the device with reason RESCUED",
                                cJSON_GetStringValue(cJSON_GetObjectItem(n, "name")));
                rescued_nodes++;
            }
            if (!rescued_nodes)
                return fail("a kept rescue lists no new nodes", rl);
        } else {
            const char *why = cJSON_GetStringValue(cJSON_GetObjectItem(it, "why"));
            refused++;
            why_found |= why && want_why && strstr(why, want_why) != NULL;
            printf("not kept %s: %s\n", rl, why ? why : "(no sentence)");
        }
    }
    /* every RESCUED node of the plan belongs to a kept attempt */
    int in_nodes = 0;
    cJSON_ArrayForEach(it, cJSON_GetObjectItem(root, "nodes"))
    {
        const char *why = cJSON_GetStringValue(cJSON_GetObjectItem(it, "reason"));
        in_nodes += why && strcmp(why, "RESCUED") == 0;
    }
    if (strcmp(expect, "kept") == 0 && !kept)
        return fail("the rule was not kept", rule);
    if (strcmp(expect, "refused") == 0 && (kept || !refused))
        return fail("the rule was expected to be tried and refused", rule);
    if (strcmp(expect, "none") == 0 && kept)
        return fail("the rule was kept where it must not be", rule);
    if (strcmp(expect, "untried") == 0 && (kept || refused))
        return fail("the rule was tried on a device that does not list it", rule);
    if (want_why && !why_found)
        return fail("no refusal gives the expected sentence", want_why);
    if (in_nodes < rescued_nodes)
        return fail("nodes[] has fewer RESCUED nodes than the rescue section", NULL);
    return 0;
}

static double edge_value(size_t i, int nan, double u)
{
    static const double e[] = {0.0, -0.0, -1.0, 2.5, -7.0, 1e-3, -1e-3, 30.0, -30.0, 600.0, -600.0};
    if (nan && i % 17 == 5)
        return NAN;
    if (i % 3 == 0)
        return e[(i / 3) % (sizeof e / sizeof e[0])];
    return -4.0 + 8.0 * u;
}

int main(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr, "usage: test_rescue MODEL PROFILE MODE RULE kept|refused|none [--tol T] [--nan] [--partitions N]"
                        " [--partitions-off N] [--granularity G]\n");
        return 2;
    }
    const char *model = argv[1], *profile = argv[2], *rule = argv[4], *expect = argv[5];
    double tol = 1e-5;
    const char *want_why = NULL;
    int nan = 0, want_parts = -1, want_parts_off = -1, want_fb = -1, rc = 1;
    for (int i = 6; i < argc; i++) {
        if (strcmp(argv[i], "--tol") == 0 && i + 1 < argc)
            tol = atof(argv[++i]);
        else if (strcmp(argv[i], "--nan") == 0)
            nan = 1;
        else if (strcmp(argv[i], "--partitions") == 0 && i + 1 < argc)
            want_parts = atoi(argv[++i]);
        else if (strcmp(argv[i], "--partitions-off") == 0 && i + 1 < argc)
            want_parts_off = atoi(argv[++i]);
        else if (strcmp(argv[i], "--fallbacks") == 0 && i + 1 < argc)
            want_fb = atoi(argv[++i]);
        else if (strcmp(argv[i], "--why") == 0 && i + 1 < argc)
            want_why = argv[++i];
        else if (strcmp(argv[i], "--granularity") == 0 && i + 1 < argc)
            granularity = argv[++i];
    }
    char devices[1200], device[600];
    snprintf(devices, sizeof devices, "vnpu:%s,cpu", profile);
    tdm_ctx *ctx = NULL;
    tdm_model *m = NULL;
    tdm_rescue_mode mode;
    tdm_session_options *o = NULL, *ocpu = NULL, *ooff = NULL;
    tdm_session *s = NULL, *scpu = NULL;
    cJSON *root = NULL, *root_off = NULL;
    size_t ni = 0, no = 0;
    tdm_tensor **in = NULL, **out = NULL, **ref = NULL;
    if (tdm_ctx_create(&ctx) || tdm_rescue_mode_parse(ctx, argv[3], &mode) || tdm_model_load(ctx, model, &m)) {
        fprintf(stderr, "FAIL: %s\n", ctx ? tdm_ctx_error(ctx) : "no ctx");
        goto done;
    }
    if (!(o = options(devices, mode)) || !(ocpu = options("cpu", TDM_RESCUE_OFF)) ||
        !(ooff = options(devices, TDM_RESCUE_OFF))) {
        fail("options", NULL);
        goto done;
    }
    int parts = -1, parts_off = -1, fb = -1, fb_off = -1;
    if (!(root = ledger(ctx, m, o, &parts, &fb)) || !(root_off = ledger(ctx, m, ooff, &parts_off, &fb_off)))
        goto done;
    {
        const cJSON *devs = cJSON_GetObjectItem(root, "devices");
        snprintf(device, sizeof device, "%s", cJSON_GetStringValue(cJSON_GetArrayItem(devs, 0)));
    }
    printf("partitions: %d with --rescue %s, %d with off; fallback nodes %d and %d\n", parts, argv[3], parts_off, fb,
           fb_off);
    if (check_ledger(root, rule, expect, device, want_why))
        goto done;
    if (want_parts >= 0 && parts != want_parts) {
        fail("partition count with rescue", argv[3]);
        goto done;
    }
    if (want_fb >= 0 && fb != want_fb) {
        fail("fallback node count with rescue", argv[3]);
        goto done;
    }
    if (want_parts_off >= 0 && parts_off != want_parts_off) {
        fail("partition count with rescue off", NULL);
        goto done;
    }
    if (cJSON_GetObjectItem(root_off, "rescue") &&
        cJSON_GetNumberValue(cJSON_GetObjectItem(cJSON_GetObjectItem(root_off, "rescue"), "kept")) != 0) {
        fail("--rescue off kept a rescue", NULL);
        goto done;
    }
    /* outputs against cpu alone */
    ni = tdm_model_input_count(m);
    no = tdm_model_output_count(m);
    in = calloc(ni + 1, sizeof *in);
    out = calloc(no + 1, sizeof *out);
    ref = calloc(no + 1, sizeof *ref);
    if (!in || !out || !ref || tdm_session_create(ctx, m, o, &s) || tdm_session_create(ctx, m, ocpu, &scpu)) {
        fail("session", tdm_ctx_error(ctx));
        goto done;
    }
    uint64_t seed = 88172645463325252ull;
    for (size_t i = 0; i < ni; i++) {
        tdm_value_info vi;
        int64_t dims[8];
        if (tdm_model_input(m, i, &vi) || vi.rank < 0 || vi.rank > 8) {
            fail("input info", NULL);
            goto done;
        }
        for (int d = 0; d < vi.rank; d++)
            dims[d] = vi.dims[d].value >= 0 ? vi.dims[d].value : 3;
        if (tdm_tensor_create(vi.dtype, vi.rank, dims, &in[i])) {
            fail("input tensor", NULL);
            goto done;
        }
        int fl = vi.dtype == TDM_FLOAT || vi.dtype == TDM_FLOAT16 || vi.dtype == TDM_DOUBLE || vi.dtype == TDM_BFLOAT16;
        for (size_t k = 0; k < tdm_tensor_count(in[i]); k++) {
            static const int ints[] = {0, 1, 2, -1, 3};
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            /* integers are indices: small, one negative */
            tensor_set_f64(in[i], k, fl ? edge_value(k, nan, (double)(seed >> 11) / 9007199254740992.0) : ints[k % 5]);
        }
    }
    if (tdm_session_run(s, (const tdm_tensor *const *)in, out)) {
        fail("run on the device", tdm_session_error(s));
        goto done;
    }
    if (tdm_session_run(scpu, (const tdm_tensor *const *)in, ref)) {
        fail("run on cpu", tdm_session_error(scpu));
        goto done;
    }
    for (size_t k = 0; k < no; k++) {
        size_t n = tdm_tensor_count(ref[k]), nans = 0;
        double mx = 0, ref_max = 0;
        if (tdm_tensor_count(out[k]) != n) {
            fail("output sizes differ", NULL);
            goto done;
        }
        for (size_t i = 0; i < n; i++) {
            double a = tensor_get_f64(ref[k], i), b = tensor_get_f64(out[k], i);
            if (isnan(a) != isnan(b) || (isfinite(a) && !isfinite(b)) || (isinf(a) && a != b)) {
                fprintf(stderr, "output %zu element %zu: cpu %g, rescued plan %g\n", k, i, a, b);
                fail("non-finite values differ", NULL);
                goto done;
            }
            nans += isnan(a);
            if (isfinite(a)) {
                mx = fmax(mx, fabs(a - b));
                ref_max = fmax(ref_max, fabs(a));
            }
        }
        printf("output %zu: %zu values (%zu NaN), max |diff| %.3g, max |cpu| %.3g\n", k, n, nans, mx, ref_max);
        if (!(mx <= tol * fmax(1.0, ref_max))) {
            fail("outputs differ from cpu's beyond the tolerance", NULL);
            goto done;
        }
    }
    rc = 0;
    printf("ok\n");
done:
    for (size_t i = 0; in && i < ni; i++)
        tdm_tensor_destroy(in[i]);
    for (size_t k = 0; out && ref && k < no; k++) {
        tdm_tensor_destroy(out[k]);
        tdm_tensor_destroy(ref[k]);
    }
    free(in);
    free(out);
    free(ref);
    cJSON_Delete(root);
    cJSON_Delete(root_off);
    tdm_session_destroy(s);
    tdm_session_destroy(scpu);
    tdm_session_options_destroy(o);
    tdm_session_options_destroy(ocpu);
    tdm_session_options_destroy(ooff);
    tdm_model_destroy(m);
    tdm_ctx_destroy(ctx);
    return rc;
}
