/* The executors' event hook (tdm_session_set_observer): exec.c and
 * hexec.c call these helpers around each node and copy only when an
 * observer is registered (h->fn != NULL), so an unobserved run pays one
 * pointer test per node. The helpers build a tdm_event from the plan
 * (device, reason, modeled figures) and the host values, and call fn. */
#ifndef TDM_RUN_OBSERVE_H
#define TDM_RUN_OBSERVE_H

#include "run/exec.h"
#include "run/hexec.h"

typedef struct obs_hook {
    tdm_observer_fn fn;     /* NULL: no observer */
    void *user;
    const tdm_plan *plan;
} obs_hook;

/* What a copy changes in exec_stats, noted before it. */
typedef struct obs_mark {
    uint64_t t0, copies, bytes;
} obs_mark;

/* Sets the observer of a program (hexec.c). */
void exec_prog_set_observer(exec_prog *p, tdm_observer_fn fn, void *user);
uint64_t obs_now_ns(void);
/* exec_graph (exec.h) calling obs (may be NULL) after each node; obs->plan
 * must be the plan whose graph g is, with cpu as its last device. */
tdm_status exec_graph_obs(tdm_err *e, const gr_graph *g, exec_scope *parent, const tdm_tensor *const *in,
                          tdm_tensor **out, int threads, uint64_t *rng, const obs_hook *obs);
void obs_begin(obs_mark *m, const exec_stats *st);
/* Node n of h->plan's graph ran on device d from t0 to now; vals[] holds
 * the host value of each value id (NULL when not on the host; vals itself
 * may be NULL, e.g. for a plugin node). */
void obs_node(const obs_hook *h, int n, int d, uint64_t t0, tdm_tensor *const *vals);
/* The same with the device's own measurement of the node (ms, < 0: none). */
void obs_node_timed(const obs_hook *h, int n, int d, uint64_t t0, tdm_tensor *const *vals, double device_ms);
/* The same ended at t1 (0: now), for a caller that did work of its own
 * (copying a plugin's outputs to the host for the observer) after the node. */
void obs_node_ended(const obs_hook *h, int n, int d, uint64_t t0, uint64_t t1, tdm_tensor *const *vals,
                    double device_ms);
/* Copy c ran since m (a copy that moved nothing is not reported). */
void obs_copy(const obs_hook *h, const plan_copy *c, const obs_mark *m, const exec_stats *st);
/* Node n failed on device d with the sentence msg (status TDM_E_DEVICE). */
void obs_fault(const obs_hook *h, int n, int d, uint64_t t0, const char *msg);
/* A run started at t0 ended with st. */
void obs_run(const obs_hook *h, uint64_t t0, tdm_status st);

#endif
