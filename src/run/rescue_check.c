/* Verification of rescues (run/rescue_check.h). */
#include "run/rescue_check.h"
#include "core/mem.h"
#include "plan/calib.h"
#include "run/calibrate.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define SETS 2

static double tolerance(tdm_dtype dt, int approx)
{
    double t = dt == TDM_FLOAT16 ? 4e-3 : dt == TDM_BFLOAT16 ? 3e-2 : 1e-5;
    return approx && t < 1e-3 ? 1e-3 : t;
}

static int is_float_type(tdm_dtype dt)
{
    return dt == TDM_FLOAT || dt == TDM_FLOAT16 || dt == TDM_BFLOAT16 || dt == TDM_DOUBLE || dt == TDM_UNDEFINED;
}

/* Input set k for a value of type t: a new tensor, or NULL (out of memory).
 * Integers (indices, sizes) follow pattern ints: 0 values in [0, 5), 1
 * every one 1, 2 every one 0 (the original may not run on the first). */
static tdm_tensor *make_input(const gr_type *t, int set, int ints, uint64_t seed)
{
    static const double edge[] = {0.0, -0.0, 1e-4, -1e-4, 1.0, -1.0, 8.0, -8.0, 40.0, -40.0, 300.0, -300.0, 0.5, -2.5};
    int64_t dims[TDM_MAX_RANK];
    int rank = t->rank < 0 ? 1 : t->rank;
    tdm_tensor *x = NULL;
    for (int d = 0; d < rank; d++)
        dims[d] = t->rank < 0 || t->dims[d].v < 0 ? 2 : t->dims[d].v;
    if (tensor_new(NULL, t->dtype == TDM_UNDEFINED ? TDM_FLOAT : t->dtype, rank, dims, &x))
        return NULL;
    size_t n = tdm_tensor_count(x);
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    int fl = is_float_type(x->dtype);
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        double u = (double)(s >> 11) / 9007199254740992.0;
        if (!fl)
            tensor_set_i64(x, i, ints == 0 ? (int64_t)(u * 5) : ints == 1 ? 1 : 0);
        else if (set == 0)
            tensor_set_f64(x, i, -3.0 + 6.0 * u);
        else
            tensor_set_f64(x, i, edge[(i + (size_t)(u * 3)) % (sizeof edge / sizeof edge[0])]);
    }
    return x;
}

/* m planned on cpu alone, nothing rescued: the reference's plan. */
static tdm_status cpu_plan(tdm_err *e, const tdm_model *m, tdm_plan **out)
{
    dev_list *devs = NULL;
    plan_options po;
    tdm_status st;
    plan_options_init(&po);
    po.rescue = PLAN_RESCUE_OFF;
    if ((st = dev_list_open(e, "cpu", NULL, 0, &devs)) != TDM_OK)
        return st;
    return plan_build(e, m, &po, devs, out);
}

/* Runs m on cpu in float32 on in[]: outs[] (graph outputs) new tensors. */
static tdm_status run_cpu(tdm_err *e, const tdm_model *m, const tdm_tensor *const *in, tdm_tensor **outs)
{
    tdm_plan *p = NULL;
    tdm_status st = cpu_plan(e, m, &p);
    if (st)
        return st;
    st = plan_run_mixed(e, p, in, -1, 1, outs);
    plan_free(p);
    return st;
}

static void compare(const tdm_tensor *ref, const tdm_tensor *got, plan_rescue_figs *f, int *nan_mismatch)
{
    calib_metrics m;
    calib_compare(ref, got, &m);
    if (!m.valid)
        return;
    if (m.cosine < f->cosine)
        f->cosine = m.cosine;
    if (!(m.max_abs <= f->max_abs))
        f->max_abs = m.max_abs;
    if (ref->count == got->count && ref->kind == TDM_KIND_TENSOR)
        for (size_t i = 0; i < ref->count; i++) {
            double a = tensor_get_f64(ref, i), b = tensor_get_f64(got, i);
            *nan_mismatch += isnan(a) != isnan(b);
            if (isfinite(a) && fabs(a) > f->ref_max)
                f->ref_max = fabs(a);
        }
    f->values += ref->count;
}

/* Compares rw with orig on cpu fp32 (the rules in rescue_check.h) on the
 * synthetic input sets (given NULL) or on given[] (one tensor per graph
 * input of orig: one set, the values a run sent there). */
static tdm_status judge(tdm_err *e, const tdm_model *orig, const tdm_model *rw, int approx,
                        const tdm_tensor *const *given, plan_rescue_figs *f)
{
    const gr_graph *g = orig->gm->main;
    int ni = g->n_inputs, no = g->n_outputs, nan_mismatch = 0;
    tdm_tensor **in = mem_calloc((size_t)ni + 1, sizeof *in), **ref = mem_calloc((size_t)no + 1, sizeof *ref),
               **got = mem_calloc((size_t)no + 1, sizeof *got);
    tdm_status st = TDM_OK;
    tdm_dtype dt = TDM_FLOAT;
    memset(f, 0, sizeof *f);
    f->cosine = 1;
    if (!in || !ref || !got) {
        st = err_set(e, TDM_E_NOMEM, "out of memory");
        goto done;
    }
    for (int k = 0; k < no; k++)
        if (g->values[g->outputs[k]].type.dtype != TDM_UNDEFINED)
            dt = g->values[g->outputs[k]].type.dtype;
    f->tolerance = tolerance(dt, approx);
    if (rw->gm->main->n_outputs != no) {
        snprintf(f->why, sizeof f->why, "the rewrite has %d outputs, the original %d", rw->gm->main->n_outputs, no);
        goto done;
    }
    for (int set = 0; set < (given ? 1 : SETS); set++) {
        tdm_err local;
        int has_ints = 0;
        for (int k = 0; k < ni && !given; k++)
            has_ints |= !is_float_type(g->values[g->inputs[k]].type.dtype);
        for (int ints = 0; ints < 3; ints++) {
            err_clear(&local);
            for (int k = 0; k < ni; k++) {
                tdm_tensor_destroy(in[k]);
                in[k] = NULL;
                if (given ? given[k] && tensor_clone(e, given[k], &in[k]) != TDM_OK
                          : !(in[k] = make_input(&g->values[g->inputs[k]].type, set, ints,
                                                 (uint64_t)(k + 1) * 7919u + (uint64_t)set))) {
                    st = err_set(e, TDM_E_NOMEM, "out of memory");
                    goto done;
                }
            }
            if ((st = run_cpu(&local, orig, (const tdm_tensor *const *)in, ref)) == TDM_OK || st == TDM_E_NOMEM ||
                !has_ints)
                break;
        }
        if (st != TDM_OK) {
            if (st == TDM_E_NOMEM)
                goto nomem;
            snprintf(f->why, sizeof f->why, "the original node does not run on the verification inputs: %.180s",
                     local.msg);
            st = TDM_OK;
            goto done;
        }
        if ((st = run_cpu(&local, rw, (const tdm_tensor *const *)in, got)) != TDM_OK) {
            if (st == TDM_E_NOMEM)
                goto nomem;
            snprintf(f->why, sizeof f->why, "the rewrite does not run: %.200s", local.msg);
            st = TDM_OK;
            goto done;
        }
        for (int k = 0; k < no; k++) {
            compare(ref[k], got[k], f, &nan_mismatch);
            tdm_tensor_destroy(ref[k]);
            tdm_tensor_destroy(got[k]);
            ref[k] = got[k] = NULL;
        }
        for (int k = 0; k < ni; k++) {
            tdm_tensor_destroy(in[k]);
            in[k] = NULL;
        }
        f->inputs++;
    }
    {
        double allowed = f->tolerance * (f->ref_max > 1 ? f->ref_max : 1), min_cos = approx ? 0.9999 : 0.99999;
        if (nan_mismatch)
            snprintf(f->why, sizeof f->why, "NaN at %d positions where the original has none (or the reverse)",
                     nan_mismatch);
        else if (!(f->max_abs <= allowed))
            snprintf(f->why, sizeof f->why, "max |diff| %.3g over the allowed %.3g, cosine %.7f", f->max_abs, allowed,
                     f->cosine);
        else if (!(f->cosine >= min_cos))
            snprintf(f->why, sizeof f->why, "cosine %.7f under %g", f->cosine, min_cos);
        else
            f->pass = 1;
    }
    goto done;
nomem:
    st = err_set(e, TDM_E_NOMEM, "out of memory");
done:
    for (int k = 0; in && k < ni; k++)
        tdm_tensor_destroy(in[k]);
    for (int k = 0; ref && got && k < no; k++) {
        tdm_tensor_destroy(ref[k]);
        tdm_tensor_destroy(got[k]);
    }
    mem_free(in);
    mem_free(ref);
    mem_free(got);
    return st;
}

static tdm_status verify(tdm_err *e, const tdm_model *orig, const tdm_model *rw, int approx, plan_rescue_figs *f)
{
    return judge(e, orig, rw, approx, NULL, f);
}

const plan_rescue_hooks rescue_check_hooks = {.verify = verify};

/* Index of name in names[0..n), or -1. */
static int name_at(const char *const *names, int n, const char *name)
{
    for (int k = 0; k < n; k++)
        if (strcmp(names[k], name) == 0)
            return k;
    return -1;
}

/* The original node(s)' graph of x when x is a kept rule rescue without a
 * check on these inputs yet, else NULL. */
static const gr_graph *due(const plan_rescue_entry *x, const char *inputs, int set)
{
    return x->kept && x->orig_m && !plan_rescue_checked_on(x, inputs, set) ? x->orig_m->gm->main : NULL;
}

tdm_status rescue_check_run(tdm_err *e, const tdm_plan *p, const tdm_tensor *const *in, int threads,
                            const char *inputs, int set, plan_options *po, rescue_check_sum *sum)
{
    const plan_rescue *r = p->rescue;
    const tdm_model *base = r ? r->base : NULL;
    const gr_graph *bg = base ? base->gm->main : NULL;
    const char **names = NULL;
    const tdm_tensor **bin = NULL, **given = NULL;
    tdm_tensor **got = NULL;
    tdm_plan *bp = NULL;
    tdm_status st = TDM_OK;
    int n = 0, cap = 0, todo = 0;
    memset(sum, 0, sizeof *sum);
    for (size_t k = 0; r && k < r->n; k++) {
        const gr_graph *og = due(&r->entries[k], inputs, set);
        todo += og != NULL;
        cap += og ? og->n_inputs : 0;
    }
    if (!todo)
        return TDM_OK;
    /* the plan-time figures, so that the re-plan does not verify again */
    for (size_t k = 0; k < r->n; k++) {
        const plan_rescue_entry *x = &r->entries[k];
        plan_rescue_check c = {.node = (char *)x->node, .rule = (char *)x->rule, .inputs = "synthetic"};
        if (!x->verified || x->device < 0)
            continue;
        c.device = (char *)plan_device_name(p, x->device);
        c.figs = x->figs;
        if (plan_options_add_rescue_check(po, &c))
            return err_set(e, TDM_E_NOMEM, "out of memory");
    }
    names = mem_calloc((size_t)cap + 1, sizeof *names);
    got = mem_calloc((size_t)cap + 1, sizeof *got);
    given = mem_calloc((size_t)cap + 1, sizeof *given);
    bin = mem_calloc((size_t)bg->n_inputs + 1, sizeof *bin);
    if (!names || !got || !given || !bin) {
        st = err_set(e, TDM_E_NOMEM, "out of memory");
        goto done;
    }
    /* the values that reach the original nodes, by name in the base model */
    for (size_t k = 0; k < r->n; k++) {
        const gr_graph *og = due(&r->entries[k], inputs, set);
        for (int i = 0; og && i < og->n_inputs; i++)
            if (name_at(names, n, og->values[og->inputs[i]].name) < 0)
                names[n++] = og->values[og->inputs[i]].name;
    }
    /* the base model's graph inputs from the plan's, by name (a bound input
     * became a constant there) */
    for (int k = 0; k < bg->n_inputs; k++)
        for (int j = 0; j < p->g->n_inputs && !bin[k]; j++)
            if (strcmp(p->g->values[p->g->inputs[j]].name, bg->values[bg->inputs[k]].name) == 0)
                bin[k] = in[j];
    if ((st = cpu_plan(e, base, &bp)) != TDM_OK ||
        (st = plan_run_capture(e, bp, bin, threads, names, n, got)) != TDM_OK)
        goto done;
    for (size_t k = 0; k < r->n; k++) {
        const plan_rescue_entry *x = &r->entries[k];
        const gr_graph *og = due(x, inputs, set);
        if (!og)
            continue;
        plan_rescue_check c;
        memset(&c, 0, sizeof c);
        c.node = (char *)x->node;
        c.rule = (char *)x->rule;
        c.device = (char *)plan_device_name(p, x->device);
        c.inputs = inputs;
        c.set = set;
        int missing = -1;
        for (int i = 0; i < og->n_inputs; i++) {
            given[i] = got[name_at(names, n, og->values[og->inputs[i]].name)];
            if (!given[i] && missing < 0)
                missing = i;
        }
        if (missing >= 0) {
            c.figs.cosine = 1;
            snprintf(c.figs.why, sizeof c.figs.why, "the run did not compute '%.120s', an input of the node",
                     og->values[og->inputs[missing]].name);
        } else if ((st = judge(e, x->orig_m, x->rw_m, x->approx, given, &c.figs)) != TDM_OK) {
            goto done;
        }
        if (plan_options_add_rescue_check(po, &c)) {
            st = err_set(e, TDM_E_NOMEM, "out of memory");
            goto done;
        }
        sum->checked++;
        if (!c.figs.pass && !sum->failed++) {
            char where[64];
            snprintf(sum->first, sizeof sum->first, "rescue %s of '%.120s' failed verification on %s: %s", x->rule,
                     x->node, plan_rescue_check_where(&c, where, sizeof where), c.figs.why);
        }
        if (c.figs.pass && (!sum->passed++ || c.figs.max_abs > sum->worst.max_abs))
            sum->worst = c.figs;
    }
done:
    for (int k = 0; got && k < n; k++)
        tdm_tensor_destroy(got[k]);
    plan_free(bp);
    mem_free((void *)names);
    mem_free(got);
    mem_free((void *)given);
    mem_free((void *)bin);
    return st;
}
