/* Run-time adaptation of a session: the circuit breaker, re-planning with
 * measured costs, and plans cached per input-shape signature.
 *
 * Circuit breaker. Closed (the default state): runs use the session's
 * plan. A run that fails with TDM_E_DEVICE is re-executed at once on the
 * fallback plan — the same devices, every node refused by every device but
 * cpu with reason DEVICE_FAULT and the fault's sentence
 * (plan_options.device_fault) — so it returns correct outputs and no
 * request is lost. K such faults within window_ms open the breaker: runs
 * then go to the fallback plan directly. After cooldown_ms the next run is
 * a half-open probe on the session's plan: success closes the breaker (the
 * fault history is cleared), a fault re-opens it (and that run is
 * re-executed on the fallback plan). Only one probe is in flight at a time;
 * concurrent runs keep the fallback plan. K = 0 disables the breaker
 * (faults are returned, as before). The fallback plan is built from the
 * session's own plan (with dynamic shapes when the plan cache is on), so it
 * serves every input shape.
 *
 * Re-planning with measured costs (slow_ratio > 0). Every run of a plan
 * measures each node on a non-cpu device: the device's own timer when it
 * has one (OpenCL profiling events), the device's model for a simulated
 * device (vnpu: its estimate_ms is its clock), else the wall time; times
 * the slow=F factor of a faulty: device (dev_slowdown), so that tests
 * can make a device miss its estimates deterministically. Per partition on
 * a non-cpu device (cpu is the fallback whose figures are the reference,
 * not watched), the sum over its nodes is compared with its baseline (the
 * plan's estimate for it). A partition at >= slow_ratio times its baseline
 * in slow_runs consecutive runs triggers a re-plan: the plan's options plus
 * the measured per-node times (the mean over those runs) replacing the
 * estimates of (node, device) (plan_options.measured, ledger "replan").
 * Hysteresis: the new plan is adopted only when its estimate is at least
 * ADAPT_GAIN (10 %) below the current placement's estimate with the same
 * measured figures (the plan's total with the partition's estimate
 * replaced by its measured time); otherwise the plan is kept and the
 * partition's baseline becomes its measured time (it must get slower by
 * the ratio again to trigger). At most one re-plan per min_runs runs (of
 * that signature). Measured figures accumulate: a later re-plan keeps the
 * earlier ones, so placement does not flip back on estimates alone. Every
 * decision (adopted or kept) is in tdm_session_adaptation_json with the
 * figures and emitted as TDM_EVENT_REPLAN; an adopted plan's ledger has a
 * "replan" section. Replaced plans stay alive until the session ends
 * (runs in flight may use them; one re-plan per min_runs runs bounds them).
 *
 * Plan cache (cache_size > 0). The session's inputs are planned per
 * concrete shape signature ("x=1x3x640x640"): a miss specializes the model
 * to the shapes (the builder the session gives), plans and builds it; up to
 * cache_size plans are kept (least recently used evicted, never one in
 * use). When the plan made for a new signature places nodes differently
 * from the plan of the previous signature, the change is reported as a
 * shape-dependent fallback: the nodes that moved, from and to which
 * device, and the new placement's reason and sentence (e.g. MEMORY: the
 * tensor does not fit the device at that size) — in the adaptation JSON
 * ("shapes") and as TDM_EVENT_REPLAN. */
#ifndef TDM_RUN_ADAPT_H
#define TDM_RUN_ADAPT_H

#include "run/hexec.h"

#include <pthread.h>

#define ADAPT_GAIN 0.10

typedef struct adapt_opts {
    int faults;            /* breaker: K; 0: off */
    double window_ms, cooldown_ms;
    double slow_ratio;     /* re-planning: ratio (e.g. 1.5); 0: off */
    int slow_runs;         /* N consecutive runs */
    int min_runs;          /* at most one re-plan per min_runs runs */
    int cache_size;        /* plans cached per input-shape signature; 0: off */
} adapt_opts;

/* Builds a model specialized to the shapes of inputs (API order, n of
 * them) and its plan, for the plan cache. */
typedef tdm_status (*adapt_build_fn)(void *user, tdm_err *e, const tdm_tensor *const *inputs, size_t n,
                                     tdm_model **model, tdm_plan **plan);

typedef struct adapt_variant adapt_variant;

typedef struct adapt_state {
    adapt_opts o;
    int on;                /* breaker on */
    pthread_mutex_t lock;
    int have_lock;
    /* breaker */
    double *times;         /* fault times in the window (ms, monotonic), ring of K */
    int n_times, head;
    int state;             /* 0 closed, 1 open, 2 half-open (probe in flight) */
    double opened_at;
    tdm_plan *fallback;    /* built at the first fault */
    exec_prog *fallback_prog;
    uint64_t runs, device_runs, faults, reexecuted, fallback_runs, opened, probes, closed;
    char last_fault[512];
    /* the session's plan and the observer */
    const tdm_plan *base_plan;
    exec_prog *base_prog;
    tdm_observer_fn user_fn;
    void *user_data;
    /* variants: [0] the session's plan; then the cache */
    adapt_variant **vars;
    size_t n_vars, cap_vars;
    adapt_variant *last_var; /* of the last run */
    uint64_t clock, cache_hits, cache_misses, cache_evictions;
    adapt_build_fn build;
    void *build_user;
    void *history;         /* cJSON array of decisions (re-plans, shape-dependent fallbacks) */
    uint64_t replans, replans_kept, shape_fallbacks;
    int fusion;            /* TDM_FUSION_* of the programs built here */
} adapt_state;

/* base_plan/base_prog: the session's (not owned). build: the plan cache's
 * builder (may be NULL when o->cache_size is 0). */
tdm_status adapt_init(tdm_err *e, adapt_state *a, const adapt_opts *o, const tdm_plan *base_plan, exec_prog *base_prog,
                      adapt_build_fn build, void *build_user);
void adapt_free(adapt_state *a);
/* The fusion mode (exec.h exec_prog_set_fusion) of every program built here
 * (the fallback, re-plans, cached plans); default TDM_FUSION_ON. */
void adapt_set_fusion(adapt_state *a, int mode);

/* The variant for a run with inputs (API order, n): the session's plan, or
 * with the cache on, the plan of the inputs' shape signature (built on a
 * miss). Release it with adapt_release after the run. */
tdm_status adapt_select(tdm_err *e, adapt_state *a, const tdm_tensor *const *inputs, size_t n, adapt_variant **out);
void adapt_release(adapt_state *a, adapt_variant *v);
/* The model a variant plans (NULL: the session's own). */
const tdm_model *adapt_variant_model(const adapt_variant *v);

/* Runs variant v through the breaker and the performance watch; in[] as
 * exec_prog_run. */
tdm_status adapt_run(tdm_err *e, adapt_state *a, adapt_variant *v, const tdm_tensor *const *in, tdm_tensor **out,
                     int threads, exec_stats *stats);

/* Replaces variant v's plan and program with plan/prog (ownership moves in
 * on success; the replaced ones stay alive until adapt_free) and emits
 * TDM_EVENT_REPLAN with detail (the precision guard, run/guard.h); detail
 * NULL: no event (the same placement, only the ledger's figures differ: a
 * rescue's passing run-time check). */
tdm_status adapt_adopt(tdm_err *e, adapt_state *a, adapt_variant *v, tdm_plan *plan, exec_prog *prog,
                       const char *detail);
/* The plan variant v runs now. */
const tdm_plan *adapt_variant_plan(adapt_state *a, const adapt_variant *v);

/* Sets the session observer on every program of a. */
void adapt_set_observer(adapt_state *a, tdm_observer_fn fn, void *user);
/* The plan the last run used (the session's plan before any run). */
const tdm_plan *adapt_current_plan(adapt_state *a);

/* The breaker's state and counters, the fallback plan's ledger when it
 * exists, the re-plans and the plan cache, as a JSON object text
 * (mem_alloc). */
char *adapt_json(adapt_state *a);

#endif
