/* Sessions: a prepared model and the options it runs with. */
#include "core/ctx.h"
#include "core/mem.h"
#include "graph/model.h"
#include "run/exec.h"

#include <stdio.h>
#include <string.h>

typedef struct shape_override {
    char *input;
    int rank;
    int64_t dims[TDM_MAX_RANK];
} shape_override;

struct tdm_session_options {
    int threads;
    shape_override *shapes;
    size_t n_shapes, cap_shapes;
};

struct tdm_session {
    const tdm_model *model;
    tdm_err err;
    int threads;
    shape_override *shapes;
    size_t n_shapes;
};

tdm_status tdm_session_options_create(tdm_session_options **out)
{
    if (!out)
        return TDM_E_USAGE;
    *out = mem_calloc(1, sizeof **out);
    return *out ? TDM_OK : TDM_E_NOMEM;
}

void tdm_session_options_destroy(tdm_session_options *opts)
{
    if (!opts)
        return;
    for (size_t i = 0; i < opts->n_shapes; i++)
        mem_free(opts->shapes[i].input);
    mem_free(opts->shapes);
    mem_free(opts);
}

tdm_status tdm_session_options_set_threads(tdm_session_options *opts, int threads)
{
    if (!opts || threads < 0)
        return TDM_E_USAGE;
    opts->threads = threads;
    return TDM_OK;
}

tdm_status tdm_session_options_set_shape(tdm_session_options *opts, const char *input, int rank,
                                         const int64_t *dims)
{
    if (!opts || !input || rank < 0 || rank > TDM_MAX_RANK || (rank && !dims))
        return TDM_E_USAGE;
    if (mem_grow((void **)&opts->shapes, &opts->cap_shapes, opts->n_shapes + 1, sizeof *opts->shapes))
        return TDM_E_NOMEM;
    shape_override *o = &opts->shapes[opts->n_shapes];
    memset(o, 0, sizeof *o);
    if (!(o->input = mem_strdup(input)))
        return TDM_E_NOMEM;
    o->rank = rank;
    for (int i = 0; i < rank; i++)
        o->dims[i] = dims[i];
    opts->n_shapes++;
    return TDM_OK;
}

tdm_status tdm_session_create(tdm_ctx *ctx, const tdm_model *model, const tdm_session_options *opts,
                              tdm_session **out)
{
    tdm_err *e = ctx ? &ctx->err : NULL;
    if (!out || !model)
        return err_set(e, TDM_E_USAGE, "tdm_session_create needs a model and an out pointer");
    *out = NULL;
    err_clear(e);
    tdm_session *s = mem_calloc(1, sizeof *s);
    if (!s)
        return err_set(e, TDM_E_NOMEM, "out of memory");
    s->model = model;
    s->threads = opts && opts->threads ? opts->threads : 1;
    if (opts && opts->n_shapes) {
        s->shapes = mem_calloc(opts->n_shapes, sizeof *s->shapes);
        if (!s->shapes) {
            tdm_session_destroy(s);
            return err_set(e, TDM_E_NOMEM, "out of memory");
        }
        for (size_t i = 0; i < opts->n_shapes; i++) {
            const shape_override *o = &opts->shapes[i];
            size_t k;
            for (k = 0; k < model->n_inputs; k++)
                if (strcmp(model->inputs[k].info.name, o->input) == 0)
                    break;
            if (k == model->n_inputs) {
                tdm_session_destroy(s);
                return err_set(e, TDM_E_INPUT, "--shape names '%s', which is not an input of the model",
                               o->input);
            }
            const tdm_value_info *vi = &model->inputs[k].info;
            if (vi->rank >= 0 && vi->rank != o->rank) {
                tdm_session_destroy(s);
                return err_set(e, TDM_E_INPUT, "--shape gives input '%s' rank %d, the model declares rank %d",
                               o->input, o->rank, vi->rank);
            }
            for (int d = 0; vi->rank >= 0 && d < o->rank; d++) {
                if (o->dims[d] >= 0 && vi->dims[d].value >= 0 && vi->dims[d].value != o->dims[d]) {
                    tdm_session_destroy(s);
                    return err_set(e, TDM_E_INPUT,
                                   "--shape gives input '%s' dimension %d = %lld, the model fixes it to %lld",
                                   o->input, d, (long long)o->dims[d], (long long)vi->dims[d].value);
                }
            }
            s->shapes[i] = *o;
            s->shapes[i].input = NULL;
            if (!(s->shapes[i].input = mem_strdup(o->input))) {
                tdm_session_destroy(s);
                return err_set(e, TDM_E_NOMEM, "out of memory");
            }
            s->n_shapes = i + 1;
        }
    }
    *out = s;
    return TDM_OK;
}

void tdm_session_destroy(tdm_session *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n_shapes; i++)
        mem_free(s->shapes[i].input);
    mem_free(s->shapes);
    mem_free(s);
}

const char *tdm_session_error(const tdm_session *s) { return s ? s->err.msg : ""; }

/* Checks a given input against the model's declared type (and --shape). */
static tdm_status check_input(tdm_session *s, const model_io *io, const tdm_tensor *t)
{
    const tdm_value_info *vi = &io->info;
    char got[256], want[256];
    if (!t)
        return TDM_OK;
    if (t->kind != vi->kind && !(vi->optional && t->kind == TDM_KIND_NONE))
        return err_set(&s->err, TDM_E_INPUT, "input '%s' must be a %s, not a %s", vi->name,
                       vi->kind == TDM_KIND_SEQUENCE ? "sequence" : vi->kind == TDM_KIND_NONE ? "optional" : "tensor",
                       t->kind == TDM_KIND_SEQUENCE ? "sequence" : t->kind == TDM_KIND_NONE ? "none" : "tensor");
    if (t->kind != TDM_KIND_TENSOR)
        return TDM_OK;
    if (vi->dtype != TDM_UNDEFINED && t->dtype != vi->dtype)
        return err_set(&s->err, TDM_E_INPUT, "input '%s' must have element type %s, not %s", vi->name,
                       tdm_dtype_name(vi->dtype), tdm_dtype_name(t->dtype));
    int rank = vi->rank;
    int64_t dims[TDM_MAX_RANK];
    for (int d = 0; d < rank; d++)
        dims[d] = vi->dims[d].value;
    for (size_t i = 0; i < s->n_shapes; i++) {
        if (strcmp(s->shapes[i].input, vi->name) != 0)
            continue;
        rank = s->shapes[i].rank;
        for (int d = 0; d < rank; d++)
            if (s->shapes[i].dims[d] >= 0)
                dims[d] = s->shapes[i].dims[d];
    }
    if (rank < 0)
        return TDM_OK;
    int bad = t->rank != rank;
    for (int d = 0; !bad && d < rank; d++)
        bad = dims[d] >= 0 && dims[d] != t->dims[d];
    if (bad) {
        size_t off = 0;
        want[0] = '\0';
        for (int d = 0; d < rank && off < sizeof want; d++) {
            const char *sym = d < vi->rank ? vi->dims[d].symbol : NULL;
            int n = dims[d] >= 0 ? snprintf(want + off, sizeof want - off, d ? "x%lld" : "%lld", (long long)dims[d])
                                 : snprintf(want + off, sizeof want - off, d ? "x%s" : "%s", sym ? sym : "?");
            if (n < 0)
                break;
            off += (size_t)n;
        }
        if (rank == 0)
            snprintf(want, sizeof want, "scalar");
        return err_set(&s->err, TDM_E_INPUT, "input '%s' has shape %s, the model expects %s", vi->name,
                       shape_str(t->rank, t->dims, got, sizeof got), want);
    }
    return TDM_OK;
}

tdm_status tdm_session_run(tdm_session *s, const tdm_tensor *const *inputs, tdm_tensor **outputs)
{
    if (!s)
        return TDM_E_USAGE;
    err_clear(&s->err);
    const tdm_model *m = s->model;
    if ((m->n_inputs && !inputs) || (m->n_outputs && !outputs))
        return err_set(&s->err, TDM_E_USAGE, "tdm_session_run needs input and output arrays");
    for (size_t k = 0; k < m->n_inputs; k++) {
        tdm_status st = check_input(s, &m->inputs[k], inputs[k]);
        if (st)
            return st;
    }
    const gr_graph *g = m->gm->main;
    /* The graph's input list may include initializer-backed inputs that the
     * model API hides; map API inputs onto graph inputs by value id. */
    const tdm_tensor **gin = mem_calloc((size_t)g->n_inputs + 1, sizeof *gin);
    if (!gin)
        return err_set(&s->err, TDM_E_NOMEM, "out of memory");
    for (int k = 0; k < g->n_inputs; k++)
        for (size_t j = 0; j < m->n_inputs; j++)
            if (m->inputs[j].value == g->inputs[k])
                gin[k] = inputs[j];
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    tdm_status st = exec_graph(&s->err, g, NULL, gin, outputs, s->threads, &rng);
    mem_free(gin);
    return st;
}
