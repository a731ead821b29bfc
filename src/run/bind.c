/* Inputs bound to fixed values (run/bind.h). */
#include "run/bind.h"
#include "core/mem.h"
#include "core/tensor.h"

#include <stdio.h>
#include <string.h>

static int input_of(const tdm_model *m, const char *name)
{
    for (size_t k = 0; k < m->n_inputs; k++)
        if (strcmp(m->inputs[k].info.name, name) == 0)
            return (int)k;
    return -1;
}

/* The first values of t as text ("16000", "1, 2, 3, ..."). */
static const char *values_str(const tdm_tensor *t, char *buf, size_t size)
{
    size_t len = 0;
    buf[0] = '\0';
    if (!t || t->kind != TDM_KIND_TENSOR || t->dtype == TDM_STRING) {
        snprintf(buf, size, "a value of another kind");
        return buf;
    }
    for (size_t i = 0; i < t->count && i < 4 && len + 1 < size; i++) {
        int w = snprintf(buf + len, size - len, "%s%.9g", i ? ", " : "", tensor_get_f64(t, i));
        len += w > 0 ? (size_t)w : 0;
    }
    if (t->count > 4 && len + 6 < size)
        snprintf(buf + len, size - len, ", ...");
    return buf;
}

tdm_status bind_check(tdm_err *e, const tdm_model *m, const plan_options *po)
{
    for (size_t b = 0; b < po->n_binds; b++) {
        const plan_bind *x = &po->binds[b];
        int k = input_of(m, x->name);
        if (k < 0) {
            char names[512];
            size_t len = 0;
            names[0] = '\0';
            for (size_t i = 0; i < m->n_inputs && len + 1 < sizeof names; i++) {
                int w = snprintf(names + len, sizeof names - len, "%s%s", i ? ", " : "", m->inputs[i].info.name);
                len += w > 0 ? (size_t)w : 0;
            }
            return err_set(e, TDM_E_INPUT, "bind: '%s' is not an input of the model (its inputs: %s)", x->name,
                           names);
        }
        const tdm_value_info *vi = &m->inputs[k].info;
        const tdm_tensor *t = x->value;
        if (vi->kind != TDM_KIND_TENSOR || t->kind != TDM_KIND_TENSOR || t->dtype == TDM_STRING)
            return err_set(e, TDM_E_INPUT, "bind: input '%s' is not a numeric tensor; only those can be bound",
                           x->name);
        if (vi->dtype != TDM_UNDEFINED && t->dtype != vi->dtype)
            return err_set(e, TDM_E_INPUT, "bind: input '%s' is %s, the bound value %s", x->name,
                           tdm_dtype_name(vi->dtype), tdm_dtype_name(t->dtype));
        int ok = vi->rank < 0 || vi->rank == t->rank;
        for (int d = 0; ok && vi->rank > 0 && d < vi->rank; d++)
            ok = vi->dims[d].value < 0 || vi->dims[d].value == t->dims[d];
        if (!ok) {
            char got[128];
            return err_set(e, TDM_E_INPUT, "bind: input '%s' does not take the shape %s of the bound value", x->name,
                           shape_str(t->rank, t->dims, got, sizeof got));
        }
    }
    return TDM_OK;
}

static int same(const tdm_tensor *a, const tdm_tensor *b)
{
    return a->kind == TDM_KIND_TENSOR && a->kind == b->kind && a->dtype == b->dtype &&
           shape_equal(a->rank, a->dims, b->rank, b->dims) && a->nbytes == b->nbytes &&
           (a->nbytes == 0 || memcmp(a->data, b->data, a->nbytes) == 0);
}

const tdm_tensor **bind_inputs(tdm_err *e, const tdm_model *m, const plan_options *po,
                               const tdm_tensor *const *inputs, tdm_status *st)
{
    const tdm_tensor **ins = mem_calloc(m->n_inputs + 1, sizeof *ins);
    *st = TDM_OK;
    if (!ins) {
        *st = err_set(e, TDM_E_NOMEM, "out of memory");
        return NULL;
    }
    for (size_t k = 0; k < m->n_inputs; k++)
        ins[k] = inputs ? inputs[k] : NULL;
    for (size_t b = 0; b < po->n_binds; b++) {
        const plan_bind *x = &po->binds[b];
        int k = input_of(m, x->name);
        if (k < 0)
            continue;
        if (!ins[k]) {
            ins[k] = x->value;
        } else if (!same(ins[k], x->value)) {
            char want[128], got[128];
            *st = err_set(e, TDM_E_INPUT,
                          "input '%s' is bound to %s for this session (bind), and the run gave %s; a session "
                          "without the bind runs other values",
                          x->name, values_str(x->value, want, sizeof want), values_str(ins[k], got, sizeof got));
            mem_free((void *)ins);
            return NULL;
        }
    }
    return ins;
}
