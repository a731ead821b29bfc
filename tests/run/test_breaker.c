/* The circuit breaker with fault injection (ctest cost.breaker.*):
 *   test_breaker MODEL INPUTS_TXT CASE
 *   runs1000   1,000 runs on faulty:vnpu:fp32-all with 10 % of runs hitting
 *              an injected device fault (the per-call probability is set
 *              from the plan's device node count); the breaker (2 faults
 *              within a window of 10^7 ms open it — wide, so that the test
 *              does not depend on how fast the machine runs (a sanitizer
 *              build takes ~0.3 s a run) —, 50 ms cool-down): every run returns
 *              TDM_OK with outputs equal to cpu's (1e-6 of max|cpu|), every
 *              fault was re-executed on cpu, the breaker opened, probed
 *              half-open and closed again; the fallback plan has every node
 *              on cpu with DEVICE_FAULT.
 *   off        without a breaker, fail_at=5 fails the run holding call 5
 *              with TDM_E_DEVICE naming the device (the old behaviour).
 *   hang       hang_at=3&hang_ms=30&timeout_ms=5: the hanging call times out
 *              and the run is re-executed on cpu with correct outputs.
 * A missing model exits 77. */
#include <tandem/tandem.h>

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
    const char *p = strstr(json, pat);
    return p ? strtod(p + strlen(pat), NULL) : -1;
}

static tdm_session *open_session(const char *devices, int breaker)
{
    tdm_session_options *o = NULL;
    tdm_session *s = NULL;
    tdm_session_options_create(&o);
    tdm_session_options_set_devices(o, devices);
    tdm_session_options_set_granularity(o, TDM_GRANULARITY_OP);
    if (breaker)
        tdm_session_options_set_breaker(o, 2, 1e7, 50);
    for (size_t k = 0; k < nin; k++) {
        tdm_value_info vi;
        tdm_model_input(m, k, &vi);
        tdm_session_options_set_shape(o, vi.name, tdm_tensor_rank(in[k]), tdm_tensor_dims(in[k]));
    }
    if (tdm_session_create(ctx, m, o, &s) != TDM_OK)
        printf("session on %s: %s\n", devices, tdm_ctx_error(ctx));
    tdm_session_options_destroy(o);
    return s;
}

/* 0 when the outputs equal the reference */
static int check(tdm_tensor **out)
{
    for (size_t k = 0; k < nout; k++) {
        size_t n = tdm_tensor_count(ref[k]);
        if (!out[k] || tdm_tensor_count(out[k]) != n || tdm_tensor_dtype(out[k]) != TDM_FLOAT)
            return 1;
        const float *a = tdm_tensor_cdata(ref[k]), *b = tdm_tensor_cdata(out[k]);
        double mx = 0, diff = 0;
        for (size_t i = 0; i < n; i++) {
            if (fabs(a[i]) > mx)
                mx = fabs(a[i]);
            if (!(fabs((double)a[i] - b[i]) <= diff))
                diff = fabs((double)a[i] - b[i]);
        }
        if (!(diff <= 1e-6 * mx))
            return 1;
    }
    return 0;
}

static void free_outs(tdm_tensor **out)
{
    for (size_t k = 0; k < nout; k++) {
        tdm_tensor_destroy(out[k]);
        out[k] = NULL;
    }
}

static int case_runs1000(void)
{
    /* the device's node count fixes the per-call probability */
    tdm_session *probe = open_session("vnpu:fp32-all", 0);
    if (!probe)
        return 1;
    size_t calls = tdm_plan_device_nodes(tdm_session_plan(probe), 0);
    tdm_session_destroy(probe);
    double p = 1 - pow(0.9, 1.0 / (double)calls);
    char devices[256];
    snprintf(devices, sizeof devices, "faulty:vnpu:fp32-all?fail_p=%.12g&seed=11", p);
    tdm_session *s = open_session(devices, 1);
    if (!s)
        return 1;
    int bad = 0;
    tdm_tensor *out[MAXIO] = {0};
    for (int r = 0; r < 1000; r++) {
        tdm_status st = tdm_session_run(s, (const tdm_tensor *const *)in, out);
        if (st != TDM_OK) {
            printf("run %d: %s: %s\n", r, tdm_status_str(st), tdm_session_error(s));
            bad++;
        } else if (check(out)) {
            printf("run %d: the outputs differ from cpu\n", r);
            bad++;
        }
        free_outs(out);
    }
    char *json = NULL;
    tdm_session_adaptation_json(s, &json);
    double runs = jget(json, "runs"), dev = jget(json, "device_runs"), faults = jget(json, "faults");
    double reexec = jget(json, "reexecuted_on_cpu"), opened = jget(json, "opened"), probes = jget(json, "half_open_probes");
    double closed = jget(json, "closed_again"), cpu_runs = jget(json, "runs_on_cpu_while_open");
    printf("%zu device nodes, fail_p %.5f per call: 1000 runs, %d lost or wrong; %.0f on the device, %.0f faults "
           "(%.1f %% of device runs), %.0f re-executed on cpu, %.0f on cpu while open; opened %.0f, half-open probes "
           "%.0f, closed again %.0f\n",
           calls, p, bad, dev, faults, dev > 0 ? 100 * faults / dev : 0, reexec, cpu_runs, opened, probes, closed);
    const char *fp = strstr(json, "\"fallback_plan\"");
    int dfault = fp && strstr(fp, "DEVICE_FAULT") != NULL;
    const char *nbd = fp ? strstr(fp, "\"nodes_by_device\":{\"cpu\":") : NULL;
    int notcpu = 1;
    if (nbd) {
        char *end = NULL;
        strtod(nbd + strlen("\"nodes_by_device\":{\"cpu\":"), &end);
        notcpu = !end || *end != '}';
    }
    printf("fallback plan: DEVICE_FAULT %s, every node on cpu %s\n", dfault ? "yes" : "no", notcpu ? "no" : "yes");
    tdm_free(json);
    tdm_session_destroy(s);
    if (bad || runs != 1000 || faults < 30 || reexec != faults || opened < 1 || probes < 1 || closed < 1 ||
        !dfault || notcpu || faults / dev < 0.05 || faults / dev > 0.15)
        return fail("runs1000", "see the figures above");
    return 0;
}

static int case_off(void)
{
    tdm_session *s = open_session("faulty:vnpu:fp32-all?fail_at=5", 0);
    if (!s)
        return 1;
    tdm_tensor *out[MAXIO] = {0};
    tdm_status st = tdm_session_run(s, (const tdm_tensor *const *)in, out);
    printf("fail_at=5 without a breaker: %s: %s\n", tdm_status_str(st), tdm_session_error(s));
    int bad = st != TDM_E_DEVICE || !strstr(tdm_session_error(s), "injected fault on call 5");
    free_outs(out);
    /* the next run does not fail (the fault was once) */
    st = tdm_session_run(s, (const tdm_tensor *const *)in, out);
    bad |= st != TDM_OK || check(out);
    free_outs(out);
    tdm_session_destroy(s);
    return bad ? fail("off", "expected a device fault on the first run only") : 0;
}

static int case_hang(void)
{
    tdm_session *s = open_session("faulty:vnpu:fp32-all?hang_at=3&hang_ms=30&timeout_ms=5", 1);
    if (!s)
        return 1;
    tdm_tensor *out[MAXIO] = {0};
    tdm_status st = tdm_session_run(s, (const tdm_tensor *const *)in, out);
    int bad = st != TDM_OK || check(out);
    free_outs(out);
    char *json = NULL;
    tdm_session_adaptation_json(s, &json);
    printf("hang: %s; %s\n", tdm_status_str(st), json);
    bad |= jget(json, "faults") != 1 || jget(json, "reexecuted_on_cpu") != 1 || !strstr(json, "did not answer within");
    tdm_free(json);
    tdm_session_destroy(s);
    return bad ? fail("hang", "expected one timed-out call, re-executed on cpu") : 0;
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
    int rc = test_load_inputs(ctx, m, argv[2], in, nin);
    if (rc)
        return rc;
    tdm_session *cpu = open_session("cpu", 0);
    if (!cpu || tdm_session_run(cpu, (const tdm_tensor *const *)in, ref) != TDM_OK)
        return fail("cpu", "reference run failed");
    tdm_session_destroy(cpu);
    if (strcmp(argv[3], "runs1000") == 0)
        rc = case_runs1000();
    else if (strcmp(argv[3], "off") == 0)
        rc = case_off();
    else if (strcmp(argv[3], "hang") == 0)
        rc = case_hang();
    else
        rc = 2;
    free_outs(ref);
    for (size_t k = 0; k < nin; k++)
        tdm_tensor_destroy(in[k]);
    tdm_model_destroy(m);
    tdm_ctx_destroy(ctx);
    if (!rc)
        printf("ok\n");
    return rc;
}
