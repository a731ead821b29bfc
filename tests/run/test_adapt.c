/* Run-time adaptation (ctest cost.adapt.*):
 *   test_adapt MODEL INPUTS_TXT CASE
 *   replan   faulty:vnpu:fp32-all?slow=20 with --granularity auto and
 *            re-planning at 1.5x for 3 runs (at most once per 10): the
 *            device's measured node times are 20x its estimates (the slow=
 *            factor: deterministic, no timing involved), so after run 2 there
 *            is no re-plan and no TDM_EVENT_REPLAN, after run 3 exactly one,
 *            adopted, moving nodes to cpu, with the measured and estimated
 *            figures in the adaptation JSON and the session's ledger
 *            ("replan" of the new plan, "adaptation" with the decision);
 *            runs 4..15 do not re-plan again (the new plan's
 *            estimates are the measured times: no flip back); every run's
 *            outputs equal cpu's.
 *   steady   slow=1 (the device meets its estimates) and slow=1.4 (below
 *            the ratio): 12 runs, no re-plan.
 *   kept     slow=2 with op granularity: the re-plan is evaluated after 3
 *            runs but cannot move anything; it is recorded as kept and the
 *            baseline becomes the measured time (no second attempt at 2x).
 *   shapes   PP-OCRv4 det (dynamic H/W) on vnpu:edge-npu,cpu with the plan
 *            cache (size 4): 1x3x640x640 and 1x3x960x960 get different
 *            placements (at 960 the tensors do not fit edge-npu's memory),
 *            reported as a shape-dependent fallback naming the moved nodes
 *            and the reason; both plans are cached; switching back to 640
 *            hits the cache; outputs match cpu (cosine >= 0.999).
 * A missing model exits 77. */
#include <tandem/tandem.h>

#include "../common/replan_count.h"

#include "../common/model_inputs.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXIO 8

static tdm_ctx *ctx;
static tdm_model *m;
static tdm_tensor *in[MAXIO];
static tdm_tensor *ref[MAXIO];
static size_t nin, nout;

static int fail(const char *what, const char *msg)
{
    printf("FAIL: %s: %s\n", what, msg);
    return 1;
}

static double jget(const char *json, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = json ? strstr(json, pat) : NULL;
    return p ? strtod(p + strlen(pat), NULL) : -1;
}

static tdm_session *open_session(const char *devices, const char *gran, double ratio, int cache, int fix_shapes)
{
    tdm_session_options *o = NULL;
    tdm_session *s = NULL;
    tdm_session_options_create(&o);
    tdm_session_options_set_devices(o, devices);
    tdm_granularity g = TDM_GRANULARITY_SUBGRAPH;
    tdm_granularity_parse(NULL, gran, &g);
    tdm_session_options_set_granularity(o, g);
    if (ratio > 0)
        tdm_session_options_set_adaptation(o, ratio, 3, 10);
    if (cache)
        tdm_session_options_set_plan_cache(o, cache);
    if (strstr(devices, "edge-npu"))
        tdm_session_options_add_pin(o, "BatchNormalization=cpu");
    for (size_t k = 0; fix_shapes && k < nin; k++) {
        tdm_value_info vi;
        tdm_model_input(m, k, &vi);
        tdm_session_options_set_shape(o, vi.name, tdm_tensor_rank(in[k]), tdm_tensor_dims(in[k]));
    }
    if (tdm_session_create(ctx, m, o, &s) != TDM_OK)
        printf("session on %s: %s\n", devices, tdm_ctx_error(ctx));
    tdm_session_options_destroy(o);
    return s;
}

/* cosine and max |diff| / max |ref| of out against r */
static void compare(tdm_tensor *const *r, tdm_tensor *const *out, double *cosine, double *rel)
{
    double dot = 0, na = 0, nb = 0, mx = 0, diff = 0;
    int bad = 0;
    for (size_t k = 0; k < nout; k++) {
        size_t n = tdm_tensor_count(r[k]);
        if (!out[k] || tdm_tensor_count(out[k]) != n || tdm_tensor_dtype(out[k]) != TDM_FLOAT) {
            bad = 1;
            continue;
        }
        const float *a = tdm_tensor_cdata(r[k]), *b = tdm_tensor_cdata(out[k]);
        for (size_t i = 0; i < n; i++) {
            dot += (double)a[i] * b[i];
            na += (double)a[i] * a[i];
            nb += (double)b[i] * b[i];
            if (fabs(a[i]) > mx)
                mx = fabs(a[i]);
            if (!(fabs((double)a[i] - b[i]) <= diff))
                diff = fabs((double)a[i] - b[i]);
        }
    }
    *cosine = bad ? 0 : na == 0 && nb == 0 ? 1 : dot / sqrt(na * nb);
    *rel = bad ? INFINITY : mx > 0 ? diff / mx : diff;
}

static void free_outs(tdm_tensor **out)
{
    for (size_t k = 0; k < nout; k++) {
        tdm_tensor_destroy(out[k]);
        out[k] = NULL;
    }
}

static int run_check(tdm_session *s, int r, double min_cos, double max_rel)
{
    tdm_tensor *out[MAXIO] = {0};
    tdm_status st = tdm_session_run(s, (const tdm_tensor *const *)in, out);
    double cs = 0, rel = INFINITY;
    if (st == TDM_OK)
        compare(ref, out, &cs, &rel);
    free_outs(out);
    if (st != TDM_OK || !(cs >= min_cos) || !(rel <= max_rel)) {
        printf("run %d: %s %s; cosine %.9f, max|diff|/max|ref| %g\n", r, tdm_status_str(st), tdm_session_error(s), cs,
               rel);
        return 1;
    }
    return 0;
}

static int case_replan(void)
{
    obs_count c;
    memset(&c, 0, sizeof c);
    tdm_session *s = open_session("faulty:vnpu:fp32-all?slow=20,cpu", "auto", 1.5, 0, 1);
    if (!s)
        return 1;
    tdm_session_set_observer(s, on_event, &c);
    int bad = 0;
    size_t dev0 = tdm_plan_device_nodes(tdm_session_plan(s), 0);
    for (int r = 1; r <= 2; r++)
        bad |= run_check(s, r, 0.999999, 1e-5);
    char *json = NULL;
    tdm_session_adaptation_json(s, &json);
    double adopted2 = jget(json, "replans_adopted"), kept2 = jget(json, "replans_kept");
    int ev2 = c.replans;
    tdm_free(json);
    bad |= run_check(s, 3, 0.999999, 1e-5);
    tdm_session_adaptation_json(s, &json);
    double adopted3 = jget(json, "replans_adopted"), meas = jget(json, "measured_ms"), est = jget(json, "estimated_ms");
    double ratio = jget(json, "ratio"), moved = jget(json, "moved_nodes"), cur = jget(json, "plan_with_measured_ms");
    double newest = jget(json, "replan_estimated_ms");
    int ev3 = c.replans;
    int has_reason = json && strstr(json, "\"decision\":\"adopted\"") && strstr(json, "consecutive runs");
    tdm_free(json);
    size_t dev3 = tdm_plan_device_nodes(tdm_session_plan(s), 0);
    char *ledger = NULL;
    tdm_session_ledger_json(s, &ledger);
    int ledger_ok = ledger && strstr(ledger, "\"replan\"") && strstr(ledger, "\"measured_ms\"") &&
                    strstr(ledger, "\"estimated_ms\"") && strstr(ledger, "\"adaptation\"") &&
                    strstr(ledger, "\"adopted\"");
    tdm_free(ledger);
    for (int r = 4; r <= 15; r++)
        bad |= run_check(s, r, 0.999999, 1e-5);
    tdm_session_adaptation_json(s, &json);
    double adopted15 = jget(json, "replans_adopted"), kept15 = jget(json, "replans_kept");
    tdm_free(json);
    printf("replan: after run 2: %.0f adopted, %.0f kept, %d REPLAN events; after run 3: %.0f adopted, %d events "
           "(%s)\n",
           adopted2, kept2, ev2, adopted3, ev3, c.last);
    printf("  partition measured %.4f ms vs estimate %.4f ms (x%.2f); plan with measured %.4f ms -> re-plan %.4f ms; "
           "%.0f nodes moved; device nodes %zu -> %zu; ledger replan section %s; after run 15: %.0f adopted, %.0f kept\n",
           meas, est, ratio, cur, newest, moved, dev0, dev3, ledger_ok ? "yes" : "no", adopted15, kept15);
    tdm_session_destroy(s);
    if (bad || adopted2 != 0 || kept2 != 0 || ev2 != 0 || adopted3 != 1 || ev3 != 1 || !has_reason || !(ratio >= 19.9) ||
        !(moved >= 1) || dev3 >= dev0 || !ledger_ok || adopted15 != 1 || kept15 != 0 || !(newest < cur))
        return fail("replan", "see the figures above");
    return 0;
}

static int case_steady(void)
{
    int bad = 0;
    const char *devs[] = {"faulty:vnpu:fp32-all?slow=1,cpu", "faulty:vnpu:fp32-all?slow=1.4,cpu"};
    for (int k = 0; k < 2; k++) {
        obs_count c;
        memset(&c, 0, sizeof c);
        tdm_session *s = open_session(devs[k], "auto", 1.5, 0, 1);
        if (!s)
            return 1;
        tdm_session_set_observer(s, on_event, &c);
        for (int r = 1; r <= 12; r++)
            bad |= run_check(s, r, 0.999999, 1e-5);
        char *json = NULL;
        tdm_session_adaptation_json(s, &json);
        double a = jget(json, "replans_adopted"), kp = jget(json, "replans_kept");
        printf("steady %s: 12 runs, %.0f adopted, %.0f kept, %d REPLAN events\n", devs[k], a, kp, c.replans);
        bad |= a != 0 || kp != 0 || c.replans != 0;
        tdm_free(json);
        tdm_session_destroy(s);
    }
    return bad ? fail("steady", "a device within the ratio must not trigger a re-plan") : 0;
}

static int case_kept(void)
{
    obs_count c;
    memset(&c, 0, sizeof c);
    tdm_session *s = open_session("faulty:vnpu:fp32-all?slow=2,cpu", "op", 1.5, 0, 1);
    if (!s)
        return 1;
    tdm_session_set_observer(s, on_event, &c);
    int bad = 0;
    for (int r = 1; r <= 20; r++)
        bad |= run_check(s, r, 0.999999, 1e-5);
    char *json = NULL;
    tdm_session_adaptation_json(s, &json);
    double a = jget(json, "replans_adopted"), kp = jget(json, "replans_kept"), ratio = jget(json, "ratio");
    int why = json && strstr(json, "\"decision\":\"kept\"") != NULL;
    printf("kept: 20 runs at 2x with op granularity: %.0f adopted, %.0f kept (ratio %.3f), %d REPLAN events\n", a, kp,
           ratio, c.replans);
    tdm_free(json);
    tdm_session_destroy(s);
    if (bad || a != 0 || kp != 1 || c.replans != 1 || !why || !(ratio >= 1.99))
        return fail("kept", "expected one kept re-plan and no second attempt");
    return 0;
}

static int make_input(int64_t h, int64_t w, tdm_tensor **t)
{
    int64_t dims[4] = {1, 3, h, w};
    if (tdm_tensor_create(TDM_FLOAT, 4, dims, t) != TDM_OK)
        return 1;
    float *p = tdm_tensor_data(*t);
    uint64_t x = 12345;
    for (size_t i = 0; i < tdm_tensor_count(*t); i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        p[i] = (float)((double)(x >> 11) / 9007199254740992.0 * 2 - 1);
    }
    return 0;
}

static int case_shapes(void)
{
    tdm_tensor *x640 = NULL, *x960 = NULL;
    tdm_tensor *r640[MAXIO] = {0}, *r960[MAXIO] = {0};
    if (nin != 1 || make_input(640, 640, &x640) || make_input(960, 960, &x960))
        return fail("shapes", "a model with one 4-d input is expected");
    tdm_session *cpu = open_session("cpu", "subgraph", 0, 0, 0);
    if (!cpu || tdm_session_run(cpu, (const tdm_tensor *const *)&x640, r640) ||
        tdm_session_run(cpu, (const tdm_tensor *const *)&x960, r960))
        return fail("shapes", "cpu reference runs failed");
    tdm_session_destroy(cpu);
    obs_count c;
    memset(&c, 0, sizeof c);
    tdm_session *s = open_session("vnpu:edge-npu,cpu", "auto", 0, 4, 0);
    if (!s)
        return 1;
    tdm_session_set_observer(s, on_event, &c);
    tdm_tensor *seq[3] = {x640, x960, x640};
    tdm_tensor **refs[3] = {r640, r960, r640};
    size_t devnodes[3];
    int bad = 0;
    for (int r = 0; r < 3; r++) {
        tdm_tensor *out[MAXIO] = {0};
        tdm_status st = tdm_session_run(s, (const tdm_tensor *const *)&seq[r], out);
        double cs = 0, rel = 0;
        if (st == TDM_OK)
            compare(refs[r], out, &cs, &rel);
        devnodes[r] = tdm_plan_device_nodes(tdm_session_plan(s), 0);
        printf("run %d (%s): %s, cosine vs cpu %.6f, %zu nodes on edge-npu\n", r + 1, r == 1 ? "960x960" : "640x640",
               tdm_status_str(st), cs, devnodes[r]);
        if (st != TDM_OK) {
            printf("  %s\n", tdm_session_error(s));
            bad = 1;
        }
        bad |= !(cs >= 0.999);
        free_outs(out);
    }
    char *json = NULL;
    tdm_session_adaptation_json(s, &json);
    double hits = jget(json, "hits"), misses = jget(json, "misses"), sdf = jget(json, "shape_dependent_fallbacks");
    const char *mv = json ? strstr(json, "\"moved\":[") : NULL;
    char first[600] = "";
    if (mv)
        snprintf(first, sizeof first, "%.500s", mv);
    int reason = mv && (strstr(mv, "MEMORY") || strstr(mv, "memory"));
    printf("plan cache: %.0f hits, %.0f misses, %.0f shape-dependent fallbacks, %d REPLAN events\n  %s\n  event: %.300s\n",
           hits, misses, sdf, c.replans, first, c.last);
    int two = json && strstr(json, "x=1x3x640x640") && strstr(json, "x=1x3x960x960");
    tdm_free(json);
    tdm_session_destroy(s);
    for (size_t k = 0; k < nout; k++) {
        tdm_tensor_destroy(r640[k]);
        tdm_tensor_destroy(r960[k]);
    }
    tdm_tensor_destroy(x640);
    tdm_tensor_destroy(x960);
    if (bad || hits != 1 || misses != 2 || sdf != 1 || c.replans != 1 || !reason || !two || devnodes[0] == devnodes[1] ||
        devnodes[2] != devnodes[0])
        return fail("shapes", "see the figures above");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 4)
        return 2;
    FILE *f = fopen(argv[1], "rb");
    if (!f) {
        printf("%s is missing (skipped)\n", argv[1]);
        return 77;
    }
    fclose(f);
    if (tdm_ctx_create(&ctx) || tdm_model_load(ctx, argv[1], &m))
        return fail(argv[1], "cannot load");
    nin = tdm_model_input_count(m);
    nout = tdm_model_output_count(m);
    if (nin > MAXIO || nout > MAXIO)
        return fail(argv[1], "too many inputs");
    int rc;
    if (strcmp(argv[3], "shapes") == 0) {
        rc = case_shapes();
    } else {
        if ((rc = test_load_inputs(ctx, m, argv[2], in, nin)) != 0)
            return rc;
        tdm_session *cpu = open_session("cpu", "subgraph", 0, 0, 1);
        if (!cpu || tdm_session_run(cpu, (const tdm_tensor *const *)in, ref) != TDM_OK)
            return fail("cpu", "reference run failed");
        tdm_session_destroy(cpu);
        if (strcmp(argv[3], "replan") == 0)
            rc = case_replan();
        else if (strcmp(argv[3], "steady") == 0)
            rc = case_steady();
        else if (strcmp(argv[3], "kept") == 0)
            rc = case_kept();
        else
            rc = fail(argv[3], "unknown case");
    }
    for (size_t k = 0; k < nin; k++)
        tdm_tensor_destroy(in[k]);
    for (size_t k = 0; k < nout; k++)
        tdm_tensor_destroy(ref[k]);
    tdm_model_destroy(m);
    tdm_ctx_destroy(ctx);
    if (!rc)
        printf("PASS\n");
    return rc;
}
