/* The precision guard: a reduced-precision device never changes an answer
 * silently (DESIGN.md "Placement"), nor does a rescue.
 *
 * Active when verification is not off (--verify,
 * tdm_session_options_set_verify; default "first" then, "off" otherwise)
 * and the session's plan puts a node on a device whose compute type is
 * narrower than float32 (vnpu fp16/bf16: the precision part below), or
 * keeps a rule rescue (plan/rescue.h; a built-in rule or a plugin's
 * rewrite, not an If/function/Loop inlining: the rescue part), on any
 * device — fp32 ones too.
 *   rescues   (first, before the precision part; calibration sets at
 *             creation, then the first run) every kept rescued group is
 *             checked against its original node(s) on cpu fp32 on the
 *             values the run's inputs send there (run/rescue_check.h
 *             rescue_check_run: the same reference runner and tolerances as
 *             the plan-time synthetic check). The figures go into the plan
 *             options (plan_options.rescue_checks) and the plan made with
 *             them is adopted: a failed rescue is dropped (its node falls
 *             back, or goes to the next device or rule, with the figures in
 *             its sentence; TDM_EVENT_REPLAN), a passing one is kept with
 *             its figures in the ledger (the same placement, no event).
 *             every:N does not check rescues again. Off: the ledger says the
 *             rescues were verified on synthetic inputs only.
 * A guarded run's precision part, before it returns any output:
 *   probe     (first run) calibrates the plan on the run's inputs
 *             (plan/calib.h plan_calibrate, one repeat): the cpu fp32
 *             reference's ranges and each node's error alone and along the
 *             chain on every device. Re-planned with those figures
 *             (plan_options.probe): a node whose output overflows the
 *             device's type, whose error crosses the per-node threshold
 *             (cosine 0.99, tdm_session_options_set_precision) — with the
 *             cause: an input constant that overflows, values that flush to
 *             zero, or plain loss — or where the chain's error crosses it,
 *             is refused there with PRECISION and the figures.
 *   verify    runs the plan node by node (plan_run_mixed: the executors'
 *             kernels and rounding, no events) and checks every output
 *             against the cpu fp32 reference with the end-to-end rule
 *             (plan_output_check: no non-finite values where cpu's are
 *             finite, cosine >= 0.999 — settable —, and cpu's top-1 along
 *             the last axis of score outputs: those produced, through
 *             shape-only ops, by Gemm, MatMul, Conv, Softmax, LogSoftmax,
 *             Sigmoid or a pooling/mean). On a breach, the first node that crosses is found
 *             by bisection over the execution order (the plan's devices up
 *             to position k, cpu after: the smallest k whose outputs breach
 *             — the point where accumulated error crosses, as compare's
 *             first crossing), refused there with PRECISION
 *             (plan_options.refuse), re-planned and re-run; at most
 *             `rounds` (default 8) times. When the rounds run out, no
 *             single node can be blamed, or re-planning does not move the
 *             node, every node left on a narrow device is refused there
 *             ("fallback_all": the answer is cpu fp32's, never one that
 *             failed). Then the plan runs once through the executor (one
 *             run's events for observers); its outputs are checked again,
 *             and if they breach on a plan that still has narrow nodes,
 *             those move off too and the run is made again ("unverified"
 *             only when a plan with no narrow node still breaches).
 *   every:N   later runs, one in N, are verified the same way (no probe).
 *   calibration inputs (tdm_session_options_add_calibration_input): at
 *             session creation, guard_calibrate probes the plan on every
 *             set, combines the figures (plan_probe_merge: worst of each,
 *             so a node is refused when any set shows a problem), re-plans
 *             once, then verifies every set as above; the first run is then
 *             verified on its own inputs without a second probe.
 * Every change is adopted through the session's adaptation (run/adapt.h
 * adapt_adopt: TDM_EVENT_REPLAN with the sentence) and kept in the guard's
 * JSON (tdm_session_guard_json): each decision with its figures, the nodes
 * that moved, the first, and what the guarded run cost. */
#ifndef TDM_RUN_GUARD_H
#define TDM_RUN_GUARD_H

#include "run/adapt.h"

#include <pthread.h>

enum { GUARD_DEFAULT = -1, GUARD_OFF = 0, GUARD_FIRST = 1, GUARD_EVERY = 2 };

typedef struct guard_opts {
    int mode;              /* GUARD_* */
    int every;             /* GUARD_EVERY: N */
    double out_cosine;     /* end-to-end minimum cosine (0.999) */
    int rounds;            /* verification rounds (8) */
} guard_opts;

void guard_opts_init(guard_opts *o);

typedef struct guard_state {
    guard_opts o;
    int active;            /* narrow or rescues */
    int narrow;            /* a narrow device in the plan, and not off: the precision part */
    int rescues;           /* kept rescues to check (plan_rescue_checkable), and not off */
    size_t rescues_unchecked; /* off: the kept rescues left with their synthetic check only */
    size_t rescue_checks, rescues_dropped;
    char rescue_first[400];   /* the first dropped rescue's sentence */
    pthread_mutex_t lock;
    int have_lock;
    uint64_t runs, checks, breaches;
    int first_done;
    int probed;            /* guard_calibrate ran the probe at creation */
    int gave_up;           /* the rounds ran out: every narrow node moved off */
    size_t calib_sets;     /* its calibration input sets */
    double calib_ms;       /* what it cost at creation */
    const tdm_plan *original; /* the session's plan before the guard */
    void *history;         /* cJSON array of decisions */
    size_t moved;          /* nodes whose device the guard changed */
    char first[256];       /* the first of them */
    double first_ms;       /* what the first guarded run cost beyond a run */
    double guard_ms;       /* all guarded runs' extra time */
    double out_cosine_before, out_cosine_after;
} guard_state;

tdm_status guard_init(tdm_err *e, guard_state *g, const guard_opts *o, const tdm_plan *plan);
void guard_free(guard_state *g);
/* 1 when this run (counted) is to be guarded. */
int guard_due(guard_state *g);
/* A guarded run of variant v (in[] and out[] as exec_prog_run). */
tdm_status guard_run(tdm_err *e, guard_state *g, adapt_state *a, adapt_variant *v, const tdm_tensor *const *in,
                     tdm_tensor **out, int threads, exec_stats *stats);
/* The creation-time pass over calibration input sets (rules above; the
 * rescue part on each set first, then the precision part):
 * sets[i] holds one tensor per graph input of v's plan (as guard_run's
 * in[]), every set of the same shapes. A no-op when the guard is not
 * active. */
tdm_status guard_calibrate(tdm_err *e, guard_state *g, adapt_state *a, adapt_variant *v,
                           const tdm_tensor *const *const *sets, size_t n_sets, int threads);
/* The fallback-policy failure of plan p as the session reports it
 * (session.c). */
void session_policy_message(tdm_err *e, const tdm_plan *p);
/* The guard's record as JSON text (mem_alloc). */
char *guard_json(guard_state *g);

#endif
