/* Inputs bound to fixed values (tdm_session_options_bind, --bind): the
 * checks of the run layer. The planner turns them into constants
 * (plan/rescue.h, graph/inline_if.h). */
#ifndef TDM_RUN_BIND_H
#define TDM_RUN_BIND_H

#include "plan/plan.h"

/* Every bind names an input of m (TDM_E_INPUT naming the inputs
 * otherwise), of its element type and shape (its static dimensions). */
tdm_status bind_check(tdm_err *e, const tdm_model *m, const plan_options *po);

/* The run's inputs with the bound values in place of omitted (NULL) ones:
 * a new array of m->n_inputs (mem_free it), or NULL with *st set. A
 * bound input given with another value (type, shape or contents) is
 * refused with TDM_E_INPUT and one sentence. */
const tdm_tensor **bind_inputs(tdm_err *e, const tdm_model *m, const plan_options *po,
                               const tdm_tensor *const *inputs, tdm_status *st);

#endif
