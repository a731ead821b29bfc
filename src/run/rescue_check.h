/* Verification of rescues (plan/rescue.h "verified when"): the run layer's
 * hook that the plans made through sessions and tdm_plan_create carry
 * (plan_options.rescue_hooks), and the sessions' run-time check.
 *
 * A rewrite and the original node(s), as two small models with the same
 * graph inputs and outputs, are planned on cpu alone and run with the
 * precision guard's reference runner (plan_run_mixed, upto -1: cpu in
 * float32) on the same inputs:
 *   synthetic  (plan time, the hook) two input sets made from the graph
 *          inputs' static types (unknown dimensions taken as 2): uniform
 *          values in [-3, 3] from a fixed seed, and edge values (0, -0,
 *          ±1e-4, ±1, ±8, ±40, ±300) in a fixed pattern; integer inputs
 *          (indices, sizes) in [0, 5), or all 1, or all 0: the first
 *          pattern the original runs on (an index within its axis).
 *   first-run, calibration  (rescue_check_run, from the precision guard,
 *          run/guard.h) one set: the values that reach the original
 *          node(s) when the plan's model before the rules (p->rescue->base:
 *          after If/function/Loop inlining) runs on cpu fp32 on the run's
 *          (or the calibration set's) inputs (plan_run_capture).
 * Constant inputs (weights, pads, axes) are the model's own.
 * Every output is compared:
 *   pass   the NaN positions agree, no non-finite value where the
 *          original's is finite, max |diff| <= tolerance x max(1, max
 *          |original|) and cosine >= 0.99999 (exact rules) / 0.9999
 *          (approximations).
 *   tolerance  exact: 1e-5 (float, double), 4e-3 (float16), 3e-2
 *          (bfloat16) — the rounding of the extra intermediate values;
 *          approximations: at least 1e-3.
 * A failure's sentence: "max |diff| X over the allowed Y, cosine Z" (or
 * the NaN count, or the cosine under its minimum). */
#ifndef TDM_RUN_RESCUE_CHECK_H
#define TDM_RUN_RESCUE_CHECK_H

#include "plan/rescue.h"

extern const plan_rescue_hooks rescue_check_hooks;

/* What one rescue_check_run found. */
typedef struct rescue_check_sum {
    size_t checked, passed, failed;
    plan_rescue_figs worst;   /* the passing check with the largest max |diff| */
    char first[400];          /* the first failure: "rescue R of 'N' failed verification on ...: ..." */
} rescue_check_sum;

/* Checks every kept rule rescue of p (plan_rescue_checkable) that has no
 * check on these inputs yet (inputs "first-run" or "calibration", set its
 * 1-based number) on the values in[] (one per graph input of p->g, as
 * plan_run_mixed) sends to its original node(s), and appends one
 * plan_rescue_check per rescue to po (a re-plan with po keeps the passing
 * ones and drops the failed). A rewrite that does not run is a failed
 * check, not an error; a status for out of memory or a reference that does
 * not run. */
tdm_status rescue_check_run(tdm_err *e, const tdm_plan *p, const tdm_tensor *const *in, int threads,
                            const char *inputs, int set, plan_options *po, rescue_check_sum *sum);

#endif
