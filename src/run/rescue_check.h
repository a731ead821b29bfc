/* Verification of rescues (plan/rescue.h): the run layer's hook that the
 * plans made through sessions and tdm_plan_create carry
 * (plan_options.rescue_hooks).
 *
 * A rewrite and the original node(s), as two small models with the same
 * graph inputs and outputs, are planned on cpu alone and run with the
 * precision guard's reference runner (plan_run_mixed, upto -1: cpu in
 * float32) on two input sets made from the graph inputs' static types
 * (unknown dimensions taken as 2): uniform values in [-3, 3] from a fixed
 * seed, and edge values (0, -0, ±1e-4, ±1, ±8, ±40, ±300) in a fixed
 * pattern; integer inputs (indices, sizes) in [0, 5), or all 1, or all 0:
 * the first pattern the original runs on (an index within its axis).
 * Constant inputs (weights, pads, axes) are the model's own.
 * Every output is compared:
 *   pass   the NaN positions agree, no non-finite value where the
 *          original's is finite, max |diff| <= tolerance x max(1, max
 *          |original|) and cosine >= 0.99999 (exact rules) / 0.9999
 *          (approximations).
 *   tolerance  exact: 1e-5 (float, double), 4e-3 (float16), 3e-2
 *          (bfloat16) — the rounding of the extra intermediate values;
 *          approximations: at least 1e-3. */
#ifndef TDM_RUN_RESCUE_CHECK_H
#define TDM_RUN_RESCUE_CHECK_H

#include "plan/rescue.h"

extern const plan_rescue_hooks rescue_check_hooks;

#endif
