/* Running a calibration (`tandem calibrate`, tdm_calibrate) and the
 * precision guard's node-by-node runs: the running half of calibration,
 * whose rules and file format plan/calib.h describes. Every node runs
 * through the node runner (run/node.h), on the devices of a plan. */
#ifndef TDM_RUN_CALIBRATE_H
#define TDM_RUN_CALIBRATE_H

#include "plan/calib.h"

typedef void (*calib_progress_fn)(void *user, size_t done, size_t total, const char *what);

/* Calibrates plan's graph on plan's devices (rules above). in[] has one
 * entry per graph input (NULL: its initializer). repeat >= 1. *json is
 * mem_alloc'ed. */
tdm_status plan_calibrate(tdm_err *e, const tdm_plan *p, const tdm_tensor *const *in, int repeat, int threads,
                          calib_progress_fn fn, void *user, char **json);

/* The precision guard's probe (run/guard.h): calibration of the plan's
 * narrow (fp16/bf16) devices on in[] without times and without the node-alone
 * error (the chain's figures and the reference's ranges only), and the cpu
 * fp32 reference's graph outputs in ref_out[] (new tensors). Its entries are
 * keyed "#NODE_NAME" (figures of this model's nodes, not merged by
 * signature). */
tdm_status plan_probe(tdm_err *e, const tdm_plan *p, const tdm_tensor *const *in, int threads, char **json,
                      tdm_tensor **ref_out);

/* Combines the probe text more into *acc (both plan_probe's, of the same
 * plan): per node and device the worst figures of each (lowest cosine,
 * largest errors and ranges), entries only in more added. *acc is replaced
 * (mem_alloc). */
tdm_status plan_probe_merge(tdm_err *e, char **acc, const char *more);

/* The precision guard (run/guard.h). Runs p's graph node by node in p's
 * order on in[] (as plan_calibrate): the nodes at positions <= upto on their
 * planned device (the same kernels and rounding the executors use), the
 * rest on cpu in fp32 — upto -1 is the cpu fp32 reference, n_nodes - 1 the
 * plan. outs[] (one per graph output) receives new tensors. */
tdm_status plan_run_mixed(tdm_err *e, const tdm_plan *p, const tdm_tensor *const *in, int upto, int threads,
                          tdm_tensor **outs);
/* The rescue check's reference (run/rescue_check.h): p's graph on cpu in
 * fp32 (plan_run_mixed, upto -1) on in[], keeping a copy of each value
 * named names[k] in got[k] (new tensors; NULL for a name no value of the
 * graph has, or one never computed). */
tdm_status plan_run_capture(tdm_err *e, const tdm_plan *p, const tdm_tensor *const *in, int threads,
                            const char *const *names, int n, tdm_tensor **got);
#endif
