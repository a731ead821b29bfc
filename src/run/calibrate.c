/* tdm_calibrate: plans the model on the session options' devices (for the
 * devices, shapes and node descriptions) and runs the calibration of
 * src/plan/calib.c. */
#include "plan/calib.h"
#include "core/ctx.h"
#include "core/mem.h"

typedef struct progress_fwd {
    tdm_progress_fn fn;
    void *user;
} progress_fwd;

static void forward(void *user, size_t done, size_t total, const char *what)
{
    const progress_fwd *f = user;
    f->fn(f->user, done, total, what);
}

tdm_status tdm_calibrate(tdm_ctx *ctx, const tdm_model *model, const tdm_session_options *opts,
                         const tdm_tensor *const *inputs, int repeat, tdm_progress_fn progress, void *user,
                         char **json)
{
    tdm_err local;
    tdm_err *e = ctx ? &ctx->err : &local;
    tdm_plan *p = NULL;
    tdm_status st;
    if (!model || !json || !inputs)
        return err_set(e, TDM_E_USAGE, "tdm_calibrate needs a model, inputs and a json pointer");
    *json = NULL;
    if ((st = tdm_plan_create(ctx, model, opts, &p)) != TDM_OK)
        return st;
    /* API inputs onto graph inputs by value id (as tdm_session_run) */
    const tdm_model *rm = p->model;
    const gr_graph *g = p->g;
    const tdm_tensor **gin = mem_calloc((size_t)g->n_inputs + 1, sizeof *gin);
    if (!gin) {
        tdm_plan_destroy(p);
        return err_set(e, TDM_E_NOMEM, "out of memory");
    }
    for (int k = 0; k < g->n_inputs; k++)
        for (size_t j = 0; j < rm->n_inputs; j++)
            if (rm->inputs[j].value == g->inputs[k])
                gin[k] = inputs[j];
    progress_fwd f = {progress, user};
    st = plan_calibrate(e, p, gin, repeat < 1 ? 1 : repeat, 1, progress ? forward : NULL, &f, json);
    mem_free((void *)gin);
    tdm_plan_destroy(p);
    return st;
}
