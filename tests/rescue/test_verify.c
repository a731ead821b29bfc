/* The run-time check of kept rescues through the C API (ctest
 * rescue.verify, driven by cli_verify.py, which makes the model):
 *   test_verify MODEL PLUGIN
 * MODEL is Y = HardSwish(X) + X (X float32 [2,3,16]); PLUGIN the example
 * plugin, whose rewrite=4 ("hardswish-upto1000") is exact for x <= 1000
 * and wrong above (the synthetic edge values reach only 300), rewrite=1 the
 * right one. X holds values of N(0, 4) and six of 5000 and more.
 *   rewrite=4  the first run drops the rescue before returning: exactly one
 *              TDM_EVENT_REPLAN whose sentence has the figures ("failed
 *              verification on the first run's inputs: max |diff| ... over
 *              the allowed ..., cosine ..."), outputs equal cpu's (both run
 *              cpu's HardSwish), the ledger's attempt "dropped"; a second
 *              run re-plans no more.
 *   rewrite=1  kept: no TDM_EVENT_REPLAN, the ledger's attempt "done:
 *              verified on the first run's inputs", outputs within 1e-5 x
 *              max |cpu| of cpu's.
 *   calibration rewrite=4 with X as a calibration input set: dropped at
 *              tdm_session_create (the plan before any run has HardSwish on
 *              cpu with the figures in its detail), the first run re-plans
 *              no more.
 *   verify off rewrite=4: kept, unchecked (the ledger says "synthetic inputs
 *              only"), and its outputs are wrong (the check is what catches
 *              it): max |diff| against cpu near 4000. */
#include <tandem/tandem.h>

#include "../common/replan_count.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 96

static const char *model_path, *plugin;
static tdm_ctx *ctx;
static tdm_model *m;
static tdm_tensor *x;
static int failures;

static void check(int cond, const char *what)
{
    printf("%s %s\n", cond ? "ok  " : "FAIL", what);
    failures += !cond;
}

/* A session on devices (verify: -1 default, else the mode), calibration
 * input X when cal; *obs counts its events. */
static tdm_session *session(const char *devices, int verify, int cal, obs_count *obs)
{
    tdm_session_options *so = NULL;
    tdm_session *s = NULL;
    const char *names[1] = {"X"};
    const tdm_tensor *vals[1] = {x};
    if (tdm_session_options_create(&so) || tdm_session_options_set_devices(so, devices) ||
        tdm_session_options_add_plugin(so, plugin) ||
        (verify >= 0 && tdm_session_options_set_verify(so, (tdm_verify_mode)verify, 0)) ||
        (cal && tdm_session_options_add_calibration_input(so, names, vals, 1))) {
        printf("FAIL options for %s\n", devices);
        exit(1);
    }
    if (tdm_session_create(ctx, m, so, &s) != TDM_OK) {
        printf("FAIL session on %s: %s\n", devices, tdm_ctx_error(ctx));
        exit(1);
    }
    tdm_session_options_destroy(so);
    if (obs && tdm_session_set_observer(s, on_event, obs) != TDM_OK) {
        printf("FAIL observer\n");
        exit(1);
    }
    return s;
}

/* One run: Y into y[N]. */
static void run(tdm_session *s, float *y)
{
    const tdm_tensor *in[1] = {x};
    tdm_tensor *out[1] = {NULL};
    if (tdm_session_run(s, in, out) != TDM_OK) {
        printf("FAIL run: %s\n", tdm_session_error(s));
        exit(1);
    }
    memcpy(y, tdm_tensor_data(out[0]), N * sizeof *y);
    tdm_tensor_destroy(out[0]);
}

static double max_diff(const float *a, const float *b)
{
    double d = 0;
    for (int i = 0; i < N; i++)
        if (fabs((double)a[i] - b[i]) > d)
            d = fabs((double)a[i] - b[i]);
    return d;
}

static int ledger_has(tdm_session *s, const char *what)
{
    char *j = NULL;
    int has = tdm_session_ledger_json(s, &j) == TDM_OK && j && strstr(j, what) != NULL;
    tdm_free(j);
    return has;
}

/* The plan's detail of node name (from its ledger) contains what. */
static int plan_detail_has(tdm_session *s, const char *what)
{
    char *j = NULL;
    int has = tdm_plan_ledger_json(tdm_session_plan(s), &j) == TDM_OK && j && strstr(j, what) != NULL;
    tdm_free(j);
    return has;
}

int main(int argc, char **argv)
{
    float ref[N], y[N];
    double mx = 0;
    char what[1600];
    if (argc != 3) {
        fprintf(stderr, "usage: test_verify MODEL PLUGIN\n");
        return 2;
    }
    model_path = argv[1];
    plugin = argv[2];
    const int64_t dims[3] = {2, 3, 16};
    if (tdm_ctx_create(&ctx) || tdm_model_load(ctx, model_path, &m) || tdm_tensor_create(TDM_FLOAT, 3, dims, &x)) {
        printf("FAIL load %s\n", model_path);
        return 1;
    }
    float *xv = tdm_tensor_data(x);
    unsigned s = 18;
    for (int i = 0; i < N; i++) {
        s = s * 1103515245u + 12345u;
        xv[i] = ((float)((s >> 8) & 0xffff) / 65535.0f - 0.5f) * 16.0f;
    }
    const float big[6] = {5000, -5000, 2000, 999, 1000, 1001};
    for (int i = 0; i < 6; i++)
        xv[10 + i] = big[i];

    tdm_session *cpu = session("cpu", -1, 0, NULL);
    run(cpu, ref);
    tdm_session_destroy(cpu);
    for (int i = 0; i < N; i++)
        mx = fabs(ref[i]) > mx ? fabs(ref[i]) : mx;

    /* a rewrite the synthetic check passes, wrong on these inputs */
    obs_count c4 = {0};
    tdm_session *s4 = session("example:rewrite=4,cpu", -1, 0, &c4);
    check(plan_detail_has(s4, "pending: a session checks it"), "rewrite=4: kept at plan time (synthetic check passed)");
    run(s4, y);
    printf("rewrite=4 first run: %d REPLAN, max |diff| against cpu %.3g; event: %s\n", c4.replans, max_diff(y, ref),
           c4.last);
    check(c4.replans == 1 && strstr(c4.last, "hardswish-upto1000") &&
              strstr(c4.last, "failed verification on the first run's inputs: max |diff| 4e+03 over the allowed") &&
              strstr(c4.last, "cosine"),
          "rewrite=4: one TDM_EVENT_REPLAN with the figures");
    check(max_diff(y, ref) == 0, "rewrite=4: the first run's outputs equal cpu's");
    check(ledger_has(s4, "dropped: a run-time check failed"), "rewrite=4: the ledger's attempt says dropped");
    run(s4, y);
    check(c4.replans == 1 && max_diff(y, ref) == 0, "rewrite=4: the second run re-plans no more, outputs equal cpu's");
    tdm_session_destroy(s4);

    /* the right rewrite: kept, checked, no event */
    obs_count c1 = {0};
    tdm_session *s1 = session("example:rewrite=1,cpu", -1, 0, &c1);
    run(s1, y);
    snprintf(what, sizeof what, "rewrite=1: kept without TDM_EVENT_REPLAN (%d), outputs within 1e-5 of cpu's (%.3g)",
             c1.replans, max_diff(y, ref));
    check(c1.replans == 0 && max_diff(y, ref) <= 1e-5 * (mx > 1 ? mx : 1), what);
    check(ledger_has(s1, "done: verified on the first run's inputs") &&
              plan_detail_has(s1, "on the first run's inputs: max |diff|"),
          "rewrite=1: first-run figures in the ledger and the RESCUED nodes' detail");
    tdm_session_destroy(s1);

    /* calibration input sets: checked at creation */
    obs_count cc = {0};
    tdm_session *sc = session("example:rewrite=4,cpu", -1, 1, &cc);
    check(plan_detail_has(sc, "example has no HardSwish kernel; rescue plugin:example:hardswish-upto1000 failed "
                              "verification on calibration input set 1: max |diff|"),
          "calibration: dropped at creation, the node's detail carries the figures");
    tdm_session_set_observer(sc, on_event, &cc);
    run(sc, y);
    check(cc.replans == 0 && max_diff(y, ref) == 0, "calibration: the first run re-plans no more, outputs equal cpu's");
    tdm_session_destroy(sc);

    /* verify off: kept unchecked, and wrong */
    tdm_session *so = session("example:rewrite=4,cpu", TDM_VERIFY_OFF, 0, NULL);
    run(so, y);
    printf("verify off: max |diff| against cpu %.3g\n", max_diff(y, ref));
    check(ledger_has(so, "off (--verify off): verified on synthetic inputs only") && fabs(max_diff(y, ref) - 4000) < 1,
          "verify off: the rescue stays unchecked (the ledger says so) and its outputs are off by 4000");
    tdm_session_destroy(so);

    tdm_tensor_destroy(x);
    tdm_model_destroy(m);
    tdm_ctx_destroy(ctx);
    printf(failures ? "%d checks failed\n" : "all ok\n", failures);
    return failures != 0;
}
