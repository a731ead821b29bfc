/* Run-time adaptation of a session: the circuit breaker.
 *
 * Closed (the default state): runs use the session's plan. A run that
 * fails with TDM_E_DEVICE is re-executed at once on the fallback plan — the
 * same devices, every node refused by every device but cpu with reason
 * DEVICE_FAULT and the fault's sentence (plan_options.device_fault) — so it
 * returns correct outputs and no request is lost. K such faults within
 * window_ms open the breaker: runs then go to the fallback plan directly.
 * After cooldown_ms the next run is a half-open probe on the session's
 * plan: success closes the breaker (the fault history is cleared), a fault
 * re-opens it (and that run is re-executed on the fallback plan). Only one
 * probe is in flight at a time; concurrent runs keep the fallback plan.
 * K = 0 disables the breaker (faults are returned, as before). */
#ifndef TDM_RUN_ADAPT_H
#define TDM_RUN_ADAPT_H

#include "run/hexec.h"

#include <pthread.h>

typedef struct adapt_opts {
    int faults;            /* K; 0: off */
    double window_ms, cooldown_ms;
} adapt_opts;

typedef struct adapt_state {
    adapt_opts o;
    int on;
    pthread_mutex_t lock;
    double *times;         /* fault times in the window (ms, monotonic), ring of K */
    int n_times, head;
    int state;             /* 0 closed, 1 open, 2 half-open (probe in flight) */
    double opened_at;
    tdm_plan *fallback;    /* built at the first fault */
    exec_prog *fallback_prog;
    uint64_t runs, device_runs, faults, reexecuted, fallback_runs, opened, probes, closed;
    char last_fault[512];
} adapt_state;

tdm_status adapt_init(tdm_err *e, adapt_state *a, const adapt_opts *o);
void adapt_free(adapt_state *a);

/* Runs plan (program prog) through the breaker; in[] as exec_prog_run. */
tdm_status adapt_run(tdm_err *e, adapt_state *a, const tdm_plan *plan, const exec_prog *prog,
                     const tdm_tensor *const *in, tdm_tensor **out, int threads, exec_stats *stats);

/* The breaker's state and counters, and the fallback plan's ledger when it
 * exists, as a JSON object text (mem_alloc). */
char *adapt_json(adapt_state *a);

#endif
