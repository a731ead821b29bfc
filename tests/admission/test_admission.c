/* Admission of concurrent runs to a device's memory (src/run/admit.h; ctest
 * admission.*):
 *   test_admission MODEL INPUTS_TXT CASE [DEVICES [RUNS]]
 *   threads  one session on DEVICES (default vnpu:edge-npu,cpu) run from 8
 *            threads, RUNS runs each (default 50), all starting together: every run
 *            succeeds with outputs bitwise equal to a single run's; the
 *            session's metrics count admission waits (runs queued for the
 *            device's memory) with a non-zero total wait, and no refusal.
 *            Prints the figures (failed runs, waits, mean and max wait).
 *   bound    max_queue 0: while one run holds the device (its observer
 *            blocks it at its first node), a second run is refused at once
 *            with TDM_E_DEVICE and a sentence naming the device and the
 *            bound, counted as refused by the metrics; once the first run
 *            ends, both it and a new run succeed with the single run's
 *            outputs. max_queue 1: while one run holds the device, of
 *            two more started together one waits (and then succeeds) and
 *            the other is refused.
 *            tdm_session_options_set_max_queue refuses -1 and 1000001.
 * A missing model or input list exits 77. */
#define _POSIX_C_SOURCE 200809L
#include <tandem/tandem.h>

#include "../common/model_inputs.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAXIO 8
#define THREADS 8

static tdm_ctx *ctx;
static tdm_model *m;
static tdm_tensor *in[MAXIO], *ref[MAXIO];
static size_t nin, nout;
static tdm_metrics *metrics;
static int runs = 50; /* per thread */

/* the observer: the metrics, and a hold on the run of the thread that asks for it */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static _Thread_local int hold_me;
static int holding, released;

static void observe(void *user, const tdm_event *ev)
{
    tdm_metrics_observe(user, ev);
    if (hold_me && ev->kind == TDM_EVENT_NODE) {
        hold_me = 0;
        pthread_mutex_lock(&mu);
        holding++;
        pthread_cond_broadcast(&cv);
        while (!released)
            pthread_cond_wait(&cv, &mu);
        pthread_mutex_unlock(&mu);
    }
}

static tdm_session *open_session(const char *devices, int max_queue)
{
    tdm_session_options *o = NULL;
    tdm_session *s = NULL;
    if (tdm_session_options_create(&o) != TDM_OK || tdm_session_options_set_devices(o, devices) != TDM_OK ||
        (max_queue >= 0 && tdm_session_options_set_max_queue(o, max_queue) != TDM_OK)) {
        printf("FAIL: session options\n");
        tdm_session_options_destroy(o);
        return NULL;
    }
    if (tdm_session_create(ctx, m, o, &s) != TDM_OK)
        printf("FAIL: session on %s: %s\n", devices, tdm_ctx_error(ctx));
    tdm_session_options_destroy(o);
    if (s)
        tdm_session_set_observer(s, observe, metrics);
    return s;
}

/* 0 when out equals the single run's outputs bit for bit */
static int same(tdm_tensor **out)
{
    for (size_t k = 0; k < nout; k++) {
        if (!out[k] || tdm_tensor_count(out[k]) != tdm_tensor_count(ref[k]) ||
            tdm_tensor_dtype(out[k]) != tdm_tensor_dtype(ref[k]) ||
            tdm_tensor_nbytes(out[k]) != tdm_tensor_nbytes(ref[k]) ||
            memcmp(tdm_tensor_cdata(out[k]), tdm_tensor_cdata(ref[k]), tdm_tensor_nbytes(ref[k])) != 0)
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

/* A single run of s: its outputs become the reference (ref[]). */
static int take_reference(tdm_session *s)
{
    tdm_tensor *out[MAXIO] = {0};
    if (tdm_session_run(s, (const tdm_tensor *const *)in, out) != TDM_OK) {
        printf("FAIL: the single run: %s\n", tdm_session_error(s));
        return 1;
    }
    for (size_t k = 0; k < nout; k++) {
        tdm_tensor_destroy(ref[k]);
        ref[k] = out[k];
    }
    return 0;
}

/* One run: 0 ok and equal, 1 wrong outputs, else its status (sentence in msg). */
static int run_once(tdm_session *s, char *msg, size_t size)
{
    tdm_tensor *out[MAXIO] = {0};
    tdm_status st = tdm_session_run(s, (const tdm_tensor *const *)in, out);
    int r = st;
    if (st)
        tdm_session_error_copy(s, msg, size);
    else if (same(out)) {
        snprintf(msg, size, "outputs differ from the single run's");
        r = 1000;
    }
    free_outs(out);
    return r;
}

/* ------------------------------------------------------------ threads */

typedef struct worker {
    tdm_session *s;
    pthread_barrier_t *start;
    int failed, wrong;
    char first[512];
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    char msg[512];
    pthread_barrier_wait(w->start);
    for (int i = 0; i < runs; i++) {
        int r = run_once(w->s, msg, sizeof msg);
        if (!r)
            continue;
        if (r == 1000)
            w->wrong++;
        else
            w->failed++;
        if (!w->first[0])
            snprintf(w->first, sizeof w->first, "%s", msg);
    }
    return NULL;
}

static int case_threads(const char *devices)
{
    tdm_session *s = open_session(devices, -1);
    if (!s || take_reference(s))
        return 1;
    uint64_t w0 = 0, ns0 = 0;
    tdm_metrics_admission(metrics, &w0, &ns0, NULL, NULL);
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, THREADS);
    worker w[THREADS];
    pthread_t th[THREADS];
    memset(w, 0, sizeof w);
    for (int t = 0; t < THREADS; t++) {
        w[t].s = s;
        w[t].start = &start;
        pthread_create(&th[t], NULL, work, &w[t]);
    }
    int failed = 0, wrong = 0;
    const char *first = "";
    for (int t = 0; t < THREADS; t++) {
        pthread_join(th[t], NULL);
        failed += w[t].failed;
        wrong += w[t].wrong;
        if (!first[0] && w[t].first[0])
            first = w[t].first;
    }
    pthread_barrier_destroy(&start);
    uint64_t waits = 0, wait_ns = 0, max_ns = 0, refused = 0;
    tdm_metrics_admission(metrics, &waits, &wait_ns, &max_ns, &refused);
    waits -= w0;
    wait_ns -= ns0;
    printf("%s: %d threads x %d runs: %d failed, %d with other outputs; %llu runs waited for admission, "
           "mean wait %.2f ms, max %.2f ms, %llu refused\n",
           devices, THREADS, runs, failed, wrong, (unsigned long long)waits,
           waits ? (double)wait_ns / 1e6 / (double)waits : 0.0, (double)max_ns / 1e6, (unsigned long long)refused);
    int rc = 0;
    if (failed || wrong) {
        printf("FAIL: %d runs failed, %d had other outputs; the first: %s\n", failed, wrong, first);
        rc = 1;
    }
    if (!waits || !wait_ns) {
        printf("FAIL: 8 threads on one session and no run waited for admission\n");
        rc = 1;
    }
    if (refused) {
        printf("FAIL: %llu runs refused with the default queue bound\n", (unsigned long long)refused);
        rc = 1;
    }
    char *text = NULL;
    if (tdm_metrics_prometheus(metrics, &text) != TDM_OK || !strstr(text, "tandem_run_admission_waits_total ") ||
        strstr(text, "tandem_run_admission_waits_total 0\n") ||
        !strstr(text, "tandem_run_admission_wait_seconds_total ") ||
        !strstr(text, "tandem_run_admission_wait_seconds_max ")) {
        printf("FAIL: the Prometheus text lacks the admission figures:\n%s\n", text ? text : "(none)");
        rc = 1;
    }
    tdm_free(text);
    tdm_session_destroy(s);
    return rc;
}

/* -------------------------------------------------------------- bound */

typedef struct holder {
    tdm_session *s;
    int hold;
    int rc;
    char msg[512];
} holder;

static void *hold_run(void *arg)
{
    holder *h = arg;
    hold_me = h->hold;
    h->rc = run_once(h->s, h->msg, sizeof h->msg);
    return NULL;
}

static void wait_holding(int n)
{
    pthread_mutex_lock(&mu);
    while (holding < n)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
}

static void release(void)
{
    pthread_mutex_lock(&mu);
    released = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

static int expect_refused(tdm_session *s, int bound, uint64_t refused_before)
{
    char msg[512] = "";
    char want[64];
    int r = run_once(s, msg, sizeof msg);
    snprintf(want, sizeof want, "max_queue %d", bound);
    if (r != TDM_E_DEVICE || !strstr(msg, "vnpu:edge-npu") || !strstr(msg, want)) {
        printf("FAIL: max_queue %d: a run while the device is taken returned %d (%s), not TDM_E_DEVICE naming "
               "vnpu:edge-npu and the bound\n",
               bound, r, msg);
        return 1;
    }
    printf("max_queue %d, refused: %s\n", bound, msg);
    uint64_t refused = 0;
    tdm_metrics_admission(metrics, NULL, NULL, NULL, &refused);
    if (refused != refused_before + 1) {
        printf("FAIL: the metrics count %llu refusals, %llu expected\n", (unsigned long long)refused,
               (unsigned long long)refused_before + 1);
        return 1;
    }
    return 0;
}

static int case_bound(void)
{
    int rc = 0;
    tdm_session_options *o = NULL;
    tdm_session_options_create(&o);
    if (tdm_session_options_set_max_queue(o, -1) != TDM_E_USAGE ||
        tdm_session_options_set_max_queue(o, 1000001) != TDM_E_USAGE ||
        tdm_session_options_set_max_queue(NULL, 1) != TDM_E_USAGE) {
        printf("FAIL: tdm_session_options_set_max_queue accepts a value out of range\n");
        rc = 1;
    }
    tdm_session_options_destroy(o);

    /* the reference: a single run */
    tdm_session *s = open_session("vnpu:edge-npu,cpu", 0);
    if (!s || take_reference(s))
        return 1;

    /* max_queue 0: A holds the device, B is refused */
    holder a = {s, 1, -1, ""};
    pthread_t ta, tb;
    holding = released = 0;
    pthread_create(&ta, NULL, hold_run, &a);
    wait_holding(1);
    rc |= expect_refused(s, 0, 0);
    release();
    pthread_join(ta, NULL);
    if (a.rc) {
        printf("FAIL: the run that held the device: %s\n", a.msg);
        rc = 1;
    }
    char msg[512];
    if (run_once(s, msg, sizeof msg)) {
        printf("FAIL: a run after the device was free again: %s\n", msg);
        rc = 1;
    }
    tdm_session_destroy(s);

    /* max_queue 1: A holds the device; of B and C, started together, the
     * first to arrive waits and the other is refused; once A ends, the
     * waiting one succeeds */
    if (!(s = open_session("vnpu:edge-npu,cpu", 1)))
        return 1;
    uint64_t refused0 = 0, waits0 = 0, refused = 0;
    tdm_metrics_admission(metrics, &waits0, NULL, NULL, &refused0);
    holder h = {s, 1, -1, ""}, b = {s, 0, -1, ""}, c = {s, 0, -1, ""};
    pthread_t tc;
    holding = released = 0;
    pthread_create(&ta, NULL, hold_run, &h);
    wait_holding(1);
    pthread_create(&tb, NULL, hold_run, &b);
    pthread_create(&tc, NULL, hold_run, &c);
    struct timespec pause = {0, 1000 * 1000};
    while (tdm_metrics_admission(metrics, NULL, NULL, NULL, &refused) == TDM_OK && refused == refused0)
        nanosleep(&pause, NULL);
    release();
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    pthread_join(tc, NULL);
    holder *lost = b.rc ? &b : &c, *won = b.rc ? &c : &b;
    if (h.rc || won->rc || lost->rc != TDM_E_DEVICE || !strstr(lost->msg, "max_queue 1")) {
        printf("FAIL: max_queue 1: the holding run (%s), the waiting one (%s), the refused one (%d: %s)\n",
               h.rc ? h.msg : "ok", won->rc ? won->msg : "ok", lost->rc, lost->msg);
        rc = 1;
    } else {
        printf("max_queue 1, refused: %s\n", lost->msg);
    }
    uint64_t waits = 0;
    tdm_metrics_admission(metrics, &waits, NULL, NULL, &refused);
    if (waits != waits0 + 1 || refused != refused0 + 1) {
        printf("FAIL: max_queue 1: %llu runs waited and %llu were refused, 1 and 1 expected\n",
               (unsigned long long)(waits - waits0), (unsigned long long)(refused - refused0));
        rc = 1;
    }
    tdm_session_destroy(s);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: test_admission MODEL INPUTS_TXT threads|bound [DEVICES [RUNS]]\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "rb");
    if (!f) {
        printf("SKIP: %s is missing (make data)\n", argv[1]);
        return 77;
    }
    fclose(f);
    if (tdm_ctx_create(&ctx) != TDM_OK || tdm_model_load(ctx, argv[1], &m) != TDM_OK) {
        printf("FAIL: %s: %s\n", argv[1], ctx ? tdm_ctx_error(ctx) : "no context");
        return 1;
    }
    nin = tdm_model_input_count(m);
    nout = tdm_model_output_count(m);
    if (nin > MAXIO || nout > MAXIO) {
        printf("FAIL: too many inputs or outputs\n");
        return 1;
    }
    int rc = test_load_inputs(ctx, m, argv[2], in, nin);
    if (rc == 77)
        printf("SKIP: %s is missing (make data)\n", argv[2]);
    if (rc)
        return rc;
    if (tdm_metrics_create(&metrics) != TDM_OK)
        return 1;
    if (argc > 5 && (runs = atoi(argv[5])) < 1) {
        fprintf(stderr, "RUNS must be at least 1\n");
        return 2;
    }
    if (strcmp(argv[3], "threads") == 0)
        rc = case_threads(argc > 4 ? argv[4] : "vnpu:edge-npu,cpu");
    else if (strcmp(argv[3], "bound") == 0)
        rc = case_bound();
    else {
        fprintf(stderr, "unknown case '%s'\n", argv[3]);
        rc = 2;
    }
    for (size_t k = 0; k < MAXIO; k++) {
        tdm_tensor_destroy(in[k]);
        tdm_tensor_destroy(ref[k]);
    }
    tdm_metrics_destroy(metrics);
    tdm_model_destroy(m);
    tdm_ctx_destroy(ctx);
    if (!rc)
        printf("ok\n");
    return rc;
}
