/* Rescue rule gather-scalar (ctest rescue.gather_scalar.*): no shipped
 * profile can say "indices of rank 1 or more", so this test wraps the vnpu
 * device of PROFILE: its supports() refuses a Gather whose index has rank 0
 * with SHAPE_UNSUPPORTED, as such NPUs do, and asks the profile about
 * everything else. The plan (rescue safe, the run layer's verification)
 * must keep gather-scalar for the node, the new nodes on the device with
 * reason RESCUED and no fallback left; the plan run node by node on its
 * devices must equal the model on cpu alone, exactly, on inputs with edge
 * values (0, -0, ±1e-4, ±1, ±300, ±inf, NaN) and, for an index that is a
 * graph input, the indices 0, -1 and 2.
 *
 * With "refused" the rule must be tried and not kept (a node of the
 * rewrite the device does not take: an index computed at run time needs an
 * int64 Unsqueeze, which rescue-npu.json's float-only dtypes refuse), and
 * the plan, unchanged, must still equal cpu's.
 *
 *   test_gather_scalar MODEL PROFILE kept|refused */
#include "core/ctx.h"
#include "core/tensor.h"
#include "devices/device_internal.h"
#include "graph/model.h"
#include "plan/plan.h"
#include "plan/rescue.h"
#include "run/calibrate.h"
#include "run/rescue_check.h"
#include "tandem/tandem.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static tdm_reason (*profile_supports)(void *ctx, const tdm_node_desc *n, tdm_verdict *out);

static tdm_reason no_scalar_index(void *ctx, const tdm_node_desc *n, tdm_verdict *out)
{
    if (strcmp(n->op_type, "Gather") == 0 && n->n_inputs > 1 && n->inputs[1].rank == 0) {
        out->reason = TDM_REASON_SHAPE_UNSUPPORTED;
        snprintf(out->detail, sizeof out->detail, "the test device takes Gather indices of rank 1 or more");
        return out->reason;
    }
    return profile_supports(ctx, n, out);
}

static int fail(const char *what, const char *detail)
{
    fprintf(stderr, "FAIL: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    return 1;
}

static tdm_status plan_on(tdm_err *e, const tdm_model *m, const char *spec, int wrap, int rescue, tdm_plan **p)
{
    static tdm_device_iface iface;
    dev_list *devs = NULL;
    plan_options po;
    tdm_status st = dev_list_open(e, spec, NULL, 0, &devs);
    if (st)
        return st;
    if (wrap) {
        iface = *devs->items[0].dev.iface;
        profile_supports = iface.supports;
        iface.supports = no_scalar_index;
        devs->items[0].dev.iface = &iface;
    }
    plan_options_init(&po);
    po.rescue = rescue;
    po.rescue_hooks = &rescue_check_hooks;
    return plan_build(e, m, &po, devs, p);
}

int main(int argc, char **argv)
{
    static const double edge[] = {0.0, -0.0, 1e-4, -1e-4, 1.0, -1.0, 300.0, -300.0, INFINITY, -INFINITY, NAN, 2.5};
    static const int64_t idx[] = {0, -1, 2};
    if (argc != 4)
        return fail("usage: test_gather_scalar MODEL PROFILE kept|refused", NULL);
    int want_kept = strcmp(argv[3], "kept") == 0;
    char spec[1200];
    snprintf(spec, sizeof spec, "vnpu:%s,cpu", argv[2]);
    tdm_ctx *ctx = NULL;
    tdm_model *m = NULL;
    tdm_plan *p = NULL, *off = NULL, *ref = NULL;
    tdm_tensor *in[4] = {NULL}, *got[4] = {NULL}, *want[4] = {NULL};
    tdm_err e;
    int rc = 1, kept = 0, refused = 0, rescued = 0, fallbacks = 0, fallbacks_off = 0;
    err_clear(&e);
    if (tdm_ctx_create(&ctx) || tdm_model_load(ctx, argv[1], &m))
        return fail("load", ctx ? tdm_ctx_error(ctx) : NULL);
    if (plan_on(&e, m, spec, 1, PLAN_RESCUE_SAFE, &p) || plan_on(&e, m, spec, 1, PLAN_RESCUE_OFF, &off) ||
        plan_on(&e, m, "cpu", 0, PLAN_RESCUE_OFF, &ref)) {
        fail("plan", e.msg);
        goto done;
    }
    for (size_t k = 0; p->rescue && k < p->rescue->n; k++) {
        const plan_rescue_entry *x = &p->rescue->entries[k];
        printf("%s %s: %s%s", x->rule, x->node, x->kept ? "kept" : "not kept: ", x->kept ? "" : x->why);
        if (x->verified)
            printf(" (max |diff| %g, cosine %.9f, %d input sets, %zu values)", x->figs.max_abs, x->figs.cosine,
                   x->figs.inputs, x->figs.values);
        printf("\n");
        kept += x->kept && strcmp(x->rule, "gather-scalar") == 0 && x->verified && x->figs.pass;
        refused += !x->kept && strcmp(x->rule, "gather-scalar") == 0 && x->why && strstr(x->why, "not supported there");
    }
    for (int n = 0; n < p->n_nodes; n++) {
        const plan_node *pn = &p->nodes[n];
        fallbacks += pn->device == (int)p->devs->n - 1;
        if (strstr(p->g->nodes[n].name, "/rescue/")) {
            printf("  %-28s %-10s %s %s\n", p->g->nodes[n].name, p->g->nodes[n].op_type,
                   plan_device_name(p, pn->device), tdm_reason_str(pn->reason));
            rescued += pn->device == 0 && pn->reason == TDM_REASON_RESCUED;
        }
    }
    for (int n = 0; n < off->n_nodes; n++)
        fallbacks_off += off->nodes[n].device == (int)off->devs->n - 1;
    printf("fallback nodes: %d with rescue, %d without\n", fallbacks, fallbacks_off);
    if (want_kept && (!kept || rescued < 2 || fallbacks != 0 || fallbacks_off == 0)) {
        fail("gather-scalar was not kept with its nodes on the device (and none left on cpu)", NULL);
        goto done;
    }
    if (!want_kept && (kept || !refused || rescued || fallbacks != fallbacks_off)) {
        fail("gather-scalar was expected to be tried and refused, the plan unchanged", NULL);
        goto done;
    }
    const gr_graph *g = m->gm->main;
    if (g->n_inputs > 4 || g->n_outputs > 4) {
        fail("the test model has too many inputs or outputs", NULL);
        goto done;
    }
    for (int set = 0; set < 3; set++) {
        for (int i = 0; i < g->n_inputs; i++) {
            const gr_type *t = &g->values[g->inputs[i]].type;
            int64_t dims[TDM_MAX_RANK];
            for (int d = 0; d < t->rank; d++)
                dims[d] = t->dims[d].v;
            tdm_tensor_destroy(in[i]);
            in[i] = NULL;
            if (tdm_tensor_create(t->dtype, t->rank, dims, &in[i])) {
                fail("input tensor", NULL);
                goto done;
            }
            for (size_t k = 0; k < tdm_tensor_count(in[i]); k++) {
                if (t->dtype == TDM_INT64 || t->dtype == TDM_INT32)
                    tensor_set_i64(in[i], k, idx[set]);
                else
                    tensor_set_f64(in[i], k, edge[(k + (size_t)set * 5) % (sizeof edge / sizeof edge[0])]);
            }
        }
        if (plan_run_mixed(&e, p, (const tdm_tensor *const *)in, p->n_nodes - 1, 1, got) ||
            plan_run_mixed(&e, ref, (const tdm_tensor *const *)in, -1, 1, want)) {
            fail("run", e.msg);
            goto done;
        }
        for (int o = 0; o < g->n_outputs; o++) {
            size_t n = tdm_tensor_count(want[o]), same = 0;
            if (tdm_tensor_count(got[o]) != n || got[o]->rank != want[o]->rank) {
                fail("the output's shape differs from cpu's", NULL);
                goto done;
            }
            for (size_t k = 0; k < n; k++) {
                double a = tensor_get_f64(want[o], k), b = tensor_get_f64(got[o], k);
                same += (isnan(a) && isnan(b)) || (a == b && signbit(a) == signbit(b));
            }
            printf("set %d output %d: %zu of %zu values equal cpu's\n", set, o, same, n);
            if (same != n) {
                fail("the rescued plan's output differs from cpu's", NULL);
                goto done;
            }
            tdm_tensor_destroy(got[o]);
            tdm_tensor_destroy(want[o]);
            got[o] = want[o] = NULL;
        }
    }
    rc = 0;
    printf("ok\n");
done:
    for (int k = 0; k < 4; k++) {
        tdm_tensor_destroy(in[k]);
        tdm_tensor_destroy(got[k]);
        tdm_tensor_destroy(want[k]);
    }
    plan_free(p);
    plan_free(off);
    plan_free(ref);
    tdm_model_destroy(m);
    tdm_ctx_destroy(ctx);
    return rc;
}
