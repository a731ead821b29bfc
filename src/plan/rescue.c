/* The rescue pass (rules in rescue.h). */
#include "plan/rescue.h"
#include "core/mem.h"
#include "devices/rescue.h"
#include "graph/rewrite.h"
#include "plan/rescue_dev.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

const char *plan_rescue_mode_str(int mode)
{
    switch (mode) {
    case PLAN_RESCUE_OFF:
        return "off";
    case PLAN_RESCUE_ALL:
        return "all";
    default:
        return "safe";
    }
}

int plan_rescue_mode_parse(const char *word)
{
    if (!word)
        return -1;
    if (strcmp(word, "off") == 0)
        return PLAN_RESCUE_OFF;
    if (strcmp(word, "safe") == 0)
        return PLAN_RESCUE_SAFE;
    if (strcmp(word, "all") == 0)
        return PLAN_RESCUE_ALL;
    return -1;
}

void plan_rescue_free(plan_rescue *r)
{
    if (!r)
        return;
    for (size_t k = 0; k < r->n; k++) {
        tdm_model_destroy(r->entries[k].orig_m); /* view the base's constants */
        tdm_model_destroy(r->entries[k].rw_m);
    }
    tdm_model_destroy(r->model); /* views the inlined models' constants */
    gr_unroll_free(&r->unr);
    gr_inline_free(&r->inl);
    mem_free(r->entries);
    mem_free(r->entry_of);
    mem_free(r);
}

static int has_subgraphs(const gr_node *n)
{
    for (int a = 0; a < n->n_attrs; a++)
        if (n->attrs[a].type == GA_GRAPH || n->attrs[a].type == GA_GRAPHS)
            return 1;
    return 0;
}

static plan_rescue_entry *add_entry(plan_rescue *r)
{
    if (mem_grow((void **)&r->entries, &r->cap, r->n + 1, sizeof *r->entries))
        return NULL;
    plan_rescue_entry *x = &r->entries[r->n++];
    memset(x, 0, sizeof *x);
    x->device = -1;
    return x;
}

/* A model from a raw rewrite model (takes gm). */
static tdm_status build(tdm_err *e, gr_model *gm, const tdm_model *src, tdm_model **out)
{
    return model_build(e, gm, src->path ? src->path : "rescue", out);
}

/* Every node of m supported by device di: 1, or 0 with why. */
static tdm_status all_supported(tdm_err *e, const dev_instance *di, const tdm_model *m, int *ok, char *why, size_t n)
{
    plan_arena a;
    const gr_graph *g = m->gm->main;
    tdm_status st = TDM_OK;
    plan_arena_init(&a);
    *ok = 1;
    for (int k = 0; k < g->n_nodes && *ok; k++) {
        tdm_node_desc d;
        tdm_verdict v;
        if ((st = plan_desc_build(e, &a, g, &g->nodes[k], &d)) != TDM_OK)
            break;
        memset(&v, 0, sizeof v);
        if (has_subgraphs(&g->nodes[k]) ||
            di->dev.iface->supports(di->dev.ctx, &d, &v) != TDM_REASON_OK) {
            v.detail[sizeof v.detail - 1] = '\0';
            snprintf(why, n, "its %s node is not supported there (%s%s%s)", g->nodes[k].op_type,
                     tdm_reason_str(v.reason), v.detail[0] ? ": " : "", v.detail);
            *ok = 0;
        }
    }
    plan_arena_free(&a);
    return st;
}

const char *plan_rescue_check_where(const plan_rescue_check *c, char *buf, size_t size)
{
    if (strcmp(c->inputs, "calibration") == 0)
        snprintf(buf, size, "calibration input set %d", c->set);
    else
        snprintf(buf, size, "the first run's inputs");
    return buf;
}

int plan_rescue_checked_on(const plan_rescue_entry *x, const char *inputs, int set)
{
    for (int k = 0; k < x->n_checks; k++)
        if (strcmp(x->checks[k]->inputs, inputs) == 0 && x->checks[k]->set == set)
            return 1;
    return 0;
}

/* The synthetic figures of x (for device d) a previous plan of this model
 * found (carried by a re-plan's options: the check is deterministic), or
 * NULL. */
static const plan_rescue_check *known_synthetic(const tdm_plan *p, const plan_rescue_entry *x, int d)
{
    const plan_options *o = &p->opts;
    for (size_t k = 0; k < o->n_rescue_checks; k++) {
        const plan_rescue_check *rc = &o->rescue_checks[k];
        if (strcmp(rc->inputs, "synthetic") == 0 && strcmp(rc->node, x->node) == 0 && strcmp(rc->rule, x->rule) == 0 &&
            strcmp(rc->device, plan_device_name(p, d)) == 0)
            return rc;
    }
    return NULL;
}

/* The run-time checks of x (made for device d) in the plan's options
 * (rescue.h "verified when"); a failed one: its sentence in why, 1. */
static int attach_checks(tdm_plan *p, plan_rescue_entry *x, int d, char *why, size_t n)
{
    const plan_options *o = &p->opts;
    const char *dev = plan_device_name(p, d);
    int c = 0, failed = 0;
    for (size_t k = 0; k < o->n_rescue_checks; k++)
        c += strcmp(o->rescue_checks[k].node, x->node) == 0 && strcmp(o->rescue_checks[k].rule, x->rule) == 0 &&
             strcmp(o->rescue_checks[k].device, dev) == 0 && strcmp(o->rescue_checks[k].inputs, "synthetic") != 0;
    if (!c)
        return 0;
    if (!(x->checks = plan_arena_array(&p->arena, (size_t)c, sizeof *x->checks)))
        return -1;
    for (size_t k = 0; k < o->n_rescue_checks; k++) {
        const plan_rescue_check *rc = &o->rescue_checks[k];
        if (strcmp(rc->node, x->node) != 0 || strcmp(rc->rule, x->rule) != 0 || strcmp(rc->device, dev) != 0 ||
            strcmp(rc->inputs, "synthetic") == 0)
            continue;
        x->checks[x->n_checks++] = rc;
        if (!rc->figs.pass && !failed) {
            char where[64];
            snprintf(why, n, "rescue %s failed verification on %s: %s", x->rule,
                     plan_rescue_check_where(rc, where, sizeof where), rc->figs.why);
            failed = 1;
        }
    }
    return failed;
}

/* Tries rw on device d for the node: fills x; *kept when it is. */
static tdm_status try_rewrite(tdm_err *e, tdm_plan *p, const gr_rw *rw, int d, plan_rescue_entry *x)
{
    const dev_instance *di = &p->devs->items[d];
    const plan_rescue_hooks *h = p->opts.rescue_hooks;
    tdm_model *rwm = NULL, *orm = NULL;
    gr_model *gm = NULL;
    char why[400];
    int ok = 0;
    tdm_status st;
    tdm_err local;
    err_clear(&local);
    /* a rewrite that does not build is refused, not an error */
    if ((st = gr_rw_extract(&local, p->rescue->base->gm, rw, 0, &gm)) != TDM_OK ||
        (st = build(&local, gm, p->model, &rwm)) != TDM_OK) {
        if (st == TDM_E_NOMEM)
            return err_set(e, st, "out of memory");
        snprintf(why, sizeof why, "the rewrite does not build: %.300s", local.msg);
        goto refuse;
    }
    if ((st = all_supported(e, di, rwm, &ok, why, sizeof why)) != TDM_OK)
        goto done;
    if (!ok)
        goto refuse;
    if (!h || !h->verify) {
        snprintf(why, sizeof why, "nothing can verify it here (plans made through the public API verify rescues)");
        goto refuse;
    }
    if ((st = gr_rw_extract(&local, p->rescue->base->gm, rw, 1, &gm)) != TDM_OK ||
        (st = build(&local, gm, p->model, &orm)) != TDM_OK) {
        if (st == TDM_E_NOMEM)
            return err_set(e, st, "out of memory");
        snprintf(why, sizeof why, "the original node alone does not build: %.300s", local.msg);
        goto refuse;
    }
    x->approx = rw->kind == GR_RW_APPROX;
    const plan_rescue_check *known = known_synthetic(p, x, d);
    if (known)
        x->figs = known->figs;
    else if ((st = h->verify(e, orm, rwm, x->approx, &x->figs)) != TDM_OK)
        goto done;
    x->verified = 1;
    if (!x->figs.pass) {
        snprintf(why, sizeof why, "verification on cpu fp32 failed: %s", x->figs.why);
        goto refuse;
    }
    {
        int failed = attach_checks(p, x, d, why, sizeof why);
        if (failed < 0) {
            st = err_set(e, TDM_E_NOMEM, "out of memory");
            goto done;
        }
        if (failed) {
            x->dropped = 1;
            goto refuse;
        }
    }
    x->kept = 1;
    /* kept for the run-time checks (rescue.h "verified when") */
    x->orig_m = orm;
    x->rw_m = rwm;
    orm = rwm = NULL;
    {
        const gr_graph *g = x->rw_m->gm->main;
        x->n_nodes = g->n_nodes;
        x->nodes = plan_arena_array(&p->arena, (size_t)g->n_nodes + 1, sizeof *x->nodes);
        x->ops = plan_arena_array(&p->arena, (size_t)g->n_nodes + 1, sizeof *x->ops);
        if (!x->nodes || !x->ops) {
            st = err_set(e, TDM_E_NOMEM, "out of memory");
            goto done;
        }
        for (int k = 0; k < g->n_nodes; k++) {
            int n = g->order ? g->order[k] : k;
            if (!(x->nodes[k] = plan_arena_strdup(&p->arena, g->nodes[n].name)) ||
                !(x->ops[k] = plan_arena_strdup(&p->arena, g->nodes[n].op_type))) {
                st = err_set(e, TDM_E_NOMEM, "out of memory");
                goto done;
            }
        }
    }
    goto done;
refuse:
    st = TDM_OK;
    if (!(x->why = plan_arena_strdup(&p->arena, why)))
        st = err_set(e, TDM_E_NOMEM, "out of memory");
done:
    tdm_model_destroy(rwm);
    tdm_model_destroy(orm);
    return st;
}

/* The device's refusal is one rule answers. */
static int rescuable(tdm_reason r, gr_rw_when when)
{
    switch (when) {
    case GR_RW_WHEN_SHAPE:
        return r == TDM_REASON_SHAPE_UNSUPPORTED || r == TDM_REASON_ATTR_UNSUPPORTED;
    case GR_RW_WHEN_DTYPE:
        return r == TDM_REASON_DTYPE_UNSUPPORTED;
    case GR_RW_WHEN_OP:
        break;
    }
    return r == TDM_REASON_OP_UNSUPPORTED || r == TDM_REASON_DTYPE_UNSUPPORTED || r == TDM_REASON_ATTR_UNSUPPORTED;
}

/* Rule applies to node's op type ("*": a node with an int64 input or
 * output; "*float": one with a float32 input or output). */
static int rule_for(const gr_rw_rule *rule, const gr_graph *g, const gr_node *node)
{
    if (rule->op[0] != '*')
        return strcmp(rule->op, node->op_type) == 0;
    tdm_dtype want = strcmp(rule->op, "*float") == 0 ? TDM_FLOAT : TDM_INT64;
    for (int i = 0; i < node->n_inputs; i++)
        if (node->inputs[i] >= 0 && g->values[node->inputs[i]].type.dtype == want)
            return 1;
    for (int i = 0; i < node->n_outputs; i++)
        if (node->outputs[i] >= 0 && g->values[node->outputs[i]].type.dtype == want)
            return 1;
    return 0;
}

static plan_rescue_entry *node_entry(tdm_plan *p, plan_rescue *r, const gr_node *node, const gr_rw *rw, int d)
{
    plan_rescue_entry *x = add_entry(r);
    if (!x || !(x->node = plan_arena_strdup(&p->arena, node->name)) ||
        !(x->op = plan_arena_strdup(&p->arena, node->op_type)))
        return NULL;
    x->rule = rw->rule;
    x->kind = gr_rw_kind_str(rw->kind);
    x->device = d;
    return x;
}

static int overlaps(const unsigned char *taken, const gr_rw *rw)
{
    for (int k = 0; k < rw->n_orig; k++)
        if (taken[rw->orig[k]])
            return 1;
    return 0;
}

/* Records an attempt of rw (b: what building it returned) for node n on
 * device d and tries it; *done when it is kept (rw moved into
 * kept[*n_kept]), else rw is freed. */
static tdm_status attempt(tdm_err *e, tdm_plan *p, plan_rescue *r, int n, int d, gr_rw *rw, int b,
                          unsigned char *taken, gr_rw *kept, int *n_kept, int *done)
{
    const gr_node *node = &p->rescue->base->gm->main->nodes[n];
    plan_rescue_entry *x;
    tdm_status st;
    *done = 0;
    if (b < 0) {
        gr_rw_free(rw);
        return err_set(e, TDM_E_NOMEM, "out of memory");
    }
    if (b == 0 && rw->why[0]) {
        /* a form of the op the rule does not take: recorded with its sentence */
        if (!(x = node_entry(p, r, node, rw, d)) || !(x->why = plan_arena_strdup(&p->arena, rw->why))) {
            gr_rw_free(rw);
            return err_set(e, TDM_E_NOMEM, "out of memory");
        }
    }
    if (b == 0 || overlaps(taken, rw)) {
        gr_rw_free(rw);
        return TDM_OK;
    }
    if (!(x = node_entry(p, r, node, rw, d))) {
        gr_rw_free(rw);
        return err_set(e, TDM_E_NOMEM, "out of memory");
    }
    if ((st = try_rewrite(e, p, rw, d, x)) == TDM_OK && x->kept) {
        for (int j = 0; j < rw->n_orig; j++)
            taken[rw->orig[j]] = 1;
        kept[(*n_kept)++] = *rw;
        *done = 1;
        return TDM_OK;
    }
    gr_rw_free(rw);
    return st;
}

/* Tries the rules for node n on the devices before the first one that
 * supports it; appends entries to r and, when one is kept, moves the
 * rewrite into kept[*n_kept]. */
static tdm_status rescue_node(tdm_err *e, tdm_plan *p, plan_rescue *r, int n, unsigned char *taken, gr_rw *kept,
                              int *n_kept)
{
    const gr_graph *g = p->rescue->base->gm->main;
    const gr_node *node = &g->nodes[n];
    size_t nr;
    const gr_rw_rule *rules = gr_rw_rules(&nr);
    tdm_node_desc desc;
    tdm_status st;
    int any = 0;
    for (size_t k = 0; k < nr; k++)
        any |= rule_for(&rules[k], g, node);
    for (int d = 0; d + 1 < (int)p->devs->n; d++)
        any |= dev_has_rewrite(&p->devs->items[d]);
    if (!any || *node->domain || has_subgraphs(node) || taken[n])
        return TDM_OK;
    if ((st = plan_desc_build(e, &p->arena, g, node, &desc)) != TDM_OK)
        return st;
    for (int d = 0; d + 1 < (int)p->devs->n; d++) {
        const dev_instance *di = &p->devs->items[d];
        tdm_verdict v;
        memset(&v, 0, sizeof v);
        tdm_reason why = di->dev.iface->supports(di->dev.ctx, &desc, &v);
        if (why == TDM_REASON_OK)
            return TDM_OK;
        for (size_t k = 0; k < nr; k++) {
            const gr_rw_rule *rule = &rules[k];
            if (!rescuable(why, rule->when) || !rule_for(rule, g, node) || !dev_rescue_wants(di, rule->name) ||
                (rule->kind == GR_RW_APPROX && r->mode != PLAN_RESCUE_ALL))
                continue;
            gr_rw rw;
            gr_rw_init(&rw, rule->name, rule->kind);
            int done = 0;
            if ((st = attempt(e, p, r, n, d, &rw, rule->build(g, n, &rw), taken, kept, n_kept, &done)) || done)
                return st;
        }
        /* the device's own rewrite (device ABI 3), after the built-in rules */
        if (dev_has_rewrite(di)) {
            gr_rw rw;
            int done = 0, b = plan_rescue_dev_rewrite(p, d, g, n, &desc, &rw);
            if (b == 1 && rw.kind == GR_RW_APPROX && r->mode != PLAN_RESCUE_ALL)
                b = 0;
            if ((st = attempt(e, p, r, n, d, &rw, b, taken, kept, n_kept, &done)) || done)
                return st;
        }
    }
    return TDM_OK;
}

/* The model-local function calls the loader inlined (gr_model.fn_calls):
 * entries of rule "function-inline" (branch "function"; new nodes named
 * "<call>/fn/..."). */
static tdm_status function_entries(tdm_err *e, tdm_plan *p, plan_rescue *r)
{
    const gr_model *gm = p->model->gm;
    for (int k = 0; k < gm->n_fn_calls; k++) {
        plan_rescue_entry *x = add_entry(r);
        char why[64];
        snprintf(why, sizeof why, "%d nodes", gm->fn_calls[k].n_nodes);
        if (!x || !(x->why = plan_arena_strdup(&p->arena, why)) ||
            !(x->node = plan_arena_strdup(&p->arena, gm->fn_calls[k].node)) ||
            !(x->op = plan_arena_strdup(&p->arena, gm->fn_calls[k].function)))
            return err_set(e, TDM_E_NOMEM, "out of memory");
        x->rule = "function-inline";
        x->kind = "inline";
        x->branch = "function";
        x->kept = 1;
    }
    return TDM_OK;
}

/* Loop unrolling for the device asking for the most iterations (rescue.h,
 * graph/unroll_loop.h): may set r->base and p->g. */
static tdm_status unroll_loops(tdm_err *e, tdm_plan *p, plan_rescue *r)
{
    int64_t most = 0;
    int dev = -1;
    tdm_err local;
    for (int d = 0; d + 1 < (int)p->devs->n; d++)
        if (dev_rescue_unroll(&p->devs->items[d]) > most) {
            most = dev_rescue_unroll(&p->devs->items[d]);
            dev = d;
        }
    if (dev < 0)
        return TDM_OK;
    err_clear(&local);
    tdm_status st = gr_unroll_loops(&local, r->base, most, &r->unr);
    if (st == TDM_E_NOMEM)
        return err_set(e, st, "out of memory");
    if (st) {
        char note[400];
        snprintf(note, sizeof note, "the model with its Loops unrolled did not build (%.300s); nothing was unrolled",
                 local.msg);
        r->note = plan_arena_strdup(&p->arena, note);
        return TDM_OK;
    }
    for (int k = 0; k < r->unr.n_loops; k++) {
        const gr_unrolled *u = &r->unr.loops[k];
        plan_rescue_entry *x = add_entry(r);
        char why[300];
        if (u->why)
            snprintf(why, sizeof why, "%s", u->why);
        else if (u->runs < u->trips)
            snprintf(why, sizeof why, "%lld of %lld iterations, its condition false after iteration %lld",
                     (long long)u->runs, (long long)u->trips, (long long)u->runs - 1);
        else
            snprintf(why, sizeof why, "%lld iterations", (long long)u->trips);
        if (!x || !(x->node = plan_arena_strdup(&p->arena, u->node)) || !(x->why = plan_arena_strdup(&p->arena, why)))
            return err_set(e, TDM_E_NOMEM, "out of memory");
        x->op = "Loop";
        x->rule = "loop-unroll";
        x->kind = "inline";
        x->device = dev;
        x->branch = u->why ? NULL : "loop";
        x->kept = !u->why;
    }
    if (r->unr.model) {
        r->base = r->unr.model;
        p->g = r->base->gm->main;
    }
    return TDM_OK;
}

/* Binds and If inlining (rescue.h): may set r->base and p->g. */
static tdm_status inline_ifs(tdm_err *e, tdm_plan *p, plan_rescue *r)
{
    gr_bind *binds = mem_calloc(p->opts.n_binds + 1, sizeof *binds);
    tdm_err local;
    tdm_status st;
    if (!binds)
        return err_set(e, TDM_E_NOMEM, "out of memory");
    for (size_t k = 0; k < p->opts.n_binds; k++) {
        binds[k].name = p->opts.binds[k].name;
        binds[k].value = p->opts.binds[k].value;
    }
    err_clear(&local);
    st = gr_inline_ifs(&local, p->model, binds, (int)p->opts.n_binds, &r->inl);
    mem_free(binds);
    if (st == TDM_E_NOMEM)
        return err_set(e, st, "out of memory");
    if (st) {
        char note[400];
        snprintf(note, sizeof note, "the model with its Ifs inlined did not build (%.300s); nothing was inlined",
                 local.msg);
        r->note = plan_arena_strdup(&p->arena, note);
        return TDM_OK;
    }
    if (!r->inl.n_models)
        return TDM_OK;
    r->base = r->inl.models[r->inl.n_models - 1];
    p->g = r->base->gm->main;
    for (int k = 0; k < r->inl.n_ifs; k++) {
        plan_rescue_entry *x = add_entry(r);
        char why[64];
        snprintf(why, sizeof why, "%s branch, %d nodes", r->inl.ifs[k].then ? "then" : "else",
                 r->inl.ifs[k].n_nodes);
        if (!x || !(x->node = plan_arena_strdup(&p->arena, r->inl.ifs[k].node)) ||
            !(x->why = plan_arena_strdup(&p->arena, why)))
            return err_set(e, TDM_E_NOMEM, "out of memory");
        x->op = "If";
        x->rule = "if-inline";
        x->kind = "inline";
        x->branch = r->inl.ifs[k].then ? "then" : "else";
        x->kept = 1;
    }
    return TDM_OK;
}

/* Per node of the plan's graph, the kept entry whose new nodes it is
 * ("<node>/rescue/" for a rule, "<If>/inline/" for an inlining). */
static tdm_status mark_entries(tdm_err *e, tdm_plan *p, plan_rescue *r)
{
    const gr_graph *ng = p->g;
    r->n_graph = ng->n_nodes;
    mem_free(r->entry_of);
    if (!(r->entry_of = mem_calloc((size_t)ng->n_nodes + 1, sizeof *r->entry_of)))
        return err_set(e, TDM_E_NOMEM, "out of memory");
    for (int n = 0; n < ng->n_nodes; n++) {
        size_t best = 0;
        r->entry_of[n] = -1;
        /* the longest match: a nested If's or a rewritten inlined node's entry */
        for (size_t k = 0; k < r->n; k++) {
            const plan_rescue_entry *x = &r->entries[k];
            size_t len = strlen(x->node);
            const char *tail = !x->branch                          ? "/rescue/"
                               : strcmp(x->branch, "function") == 0 ? "/fn/"
                               : strcmp(x->branch, "loop") == 0     ? "/unroll/"
                                                                    : "/inline/";
            if (x->kept && len > best && strncmp(ng->nodes[n].name, x->node, len) == 0 &&
                strncmp(ng->nodes[n].name + len, tail, strlen(tail)) == 0) {
                r->entry_of[n] = (int)k;
                best = len;
            }
        }
    }
    /* an inlining's node list, for the report */
    for (size_t k = 0; k < r->n; k++) {
        plan_rescue_entry *x = &r->entries[k];
        if (!x->branch)
            continue;
        int c = 0;
        for (int n = 0; n < ng->n_nodes; n++)
            c += r->entry_of[n] == (int)k;
        x->n_nodes = c;
        x->nodes = plan_arena_array(&p->arena, (size_t)c + 1, sizeof *x->nodes);
        x->ops = plan_arena_array(&p->arena, (size_t)c + 1, sizeof *x->ops);
        if (!x->nodes || !x->ops)
            return err_set(e, TDM_E_NOMEM, "out of memory");
        c = 0;
        for (int n = 0; n < ng->n_nodes; n++)
            if (r->entry_of[n] == (int)k) {
                x->nodes[c] = ng->nodes[n].name;
                x->ops[c++] = ng->nodes[n].op_type;
            }
    }
    return TDM_OK;
}

tdm_status plan_rescue_run(tdm_err *e, tdm_plan *p)
{
    const gr_graph *g = p->model->gm->main;
    plan_rescue *r = mem_calloc(1, sizeof *r);
    gr_rw *kept = NULL;
    unsigned char *taken = NULL;
    int n_kept = 0;
    tdm_status st = TDM_OK;
    if (!r)
        return err_set(e, TDM_E_NOMEM, "out of memory");
    p->rescue = r;
    r->mode = p->opts.rescue ? p->opts.rescue : PLAN_RESCUE_SAFE;
    if (r->mode == PLAN_RESCUE_OFF)
        return TDM_OK;
    if (p->opts.device_fault) {
        r->note = "the devices are out of service (circuit breaker)";
        return TDM_OK;
    }
    if (p->devs->n < 2 || g->n_nodes == 0)
        return TDM_OK;
    r->base = p->model;
    if ((st = function_entries(e, p, r)) != TDM_OK || (st = inline_ifs(e, p, r)) != TDM_OK ||
        (st = unroll_loops(e, p, r)) != TDM_OK)
        return st;
    g = r->base->gm->main;
    kept = mem_calloc((size_t)g->n_nodes, sizeof *kept);
    taken = mem_calloc((size_t)g->n_nodes, 1);
    if (!kept || !taken) {
        st = err_set(e, TDM_E_NOMEM, "out of memory");
        goto done;
    }
    for (int k = 0; k < g->n_nodes; k++) {
        int n = g->order ? g->order[k] : k;
        if ((st = rescue_node(e, p, r, n, taken, kept, &n_kept)) != TDM_OK)
            goto done;
    }
    if (n_kept) {
        const gr_rw **list = mem_calloc((size_t)n_kept, sizeof *list);
        gr_model *gm = NULL;
        tdm_err local;
        err_clear(&local);
        if (!list) {
            st = err_set(e, TDM_E_NOMEM, "out of memory");
            goto done;
        }
        for (int k = 0; k < n_kept; k++)
            list[k] = &kept[k];
        st = gr_rw_apply(&local, r->base->gm, list, n_kept, &gm);
        mem_free(list);
        if (!st)
            st = build(&local, gm, p->model, &r->model);
        if (st == TDM_E_NOMEM) {
            st = err_set(e, st, "out of memory");
            goto done;
        }
        if (st) {
            /* never a half-applied rescue: the plan runs the model as written */
            char note[400];
            snprintf(note, sizeof note, "the model with the rewrites did not build (%.300s); nothing was rescued",
                     local.msg);
            r->note = plan_arena_strdup(&p->arena, note);
            for (size_t k = 0; k < r->n; k++)
                r->entries[k].kept = r->entries[k].branch != NULL;
            st = TDM_OK;
        } else {
            p->g = r->model->gm->main;
        }
    }
    if (p->g != p->model->gm->main || p->model->gm->n_fn_calls)
        st = mark_entries(e, p, r);
done:
    for (int k = 0; kept && k < n_kept; k++)
        gr_rw_free(&kept[k]);
    mem_free(kept);
    mem_free(taken);
    return st;
}

/* The last run-time check of x as "; on the first run's inputs: max
 * |diff| X, cosine Z" into buf ("" when none). */
static const char *check_tail(const plan_rescue_entry *x, char *buf, size_t n)
{
    char where[64];
    buf[0] = '\0';
    if (x->n_checks) {
        const plan_rescue_check *c = x->checks[x->n_checks - 1];
        snprintf(buf, n, "; on %s: max |diff| %.3g, cosine %.7f", plan_rescue_check_where(c, where, sizeof where),
                 c->figs.max_abs, c->figs.cosine);
    }
    return buf;
}

/* A rescue dropped by a run-time check: its sentence after the original
 * node's detail (the node runs as written, where it was placed). */
static void mark_dropped(tdm_plan *p)
{
    const plan_rescue *r = p->rescue;
    for (size_t k = 0; r && k < r->n; k++) {
        const plan_rescue_entry *x = &r->entries[k];
        if (!x->dropped || !x->why)
            continue;
        for (int n = 0; n < p->n_nodes; n++) {
            plan_node *pn = &p->nodes[n];
            if (strcmp(p->g->nodes[n].name, x->node) != 0 || strstr(pn->detail ? pn->detail : "", x->why))
                continue;
            size_t len = strlen(pn->detail ? pn->detail : "") + strlen(x->why) + 4;
            char *d = plan_arena_array(&p->arena, len, 1);
            if (d) {
                snprintf(d, len, "%s%s%s", pn->detail ? pn->detail : "", pn->detail && *pn->detail ? "; " : "",
                         x->why);
                pn->detail = d;
            }
        }
    }
}

void plan_rescue_mark(tdm_plan *p)
{
    const plan_rescue *r = p->rescue;
    mark_dropped(p);
    if (!r || !r->entry_of)
        return;
    for (int n = 0; n < p->n_nodes && n < r->n_graph; n++) {
        int k = r->entry_of[n];
        plan_node *pn = &p->nodes[n];
        if (k < 0 || pn->reason == TDM_REASON_USER)
            continue;
        const plan_rescue_entry *x = &r->entries[k];
        char buf[400];
        if (x->branch) {
            if (pn->device == (int)p->devs->n - 1)
                continue;
            if (strcmp(x->branch, "function") == 0)
                snprintf(buf, sizeof buf, "from function %s called by '%s', inlined at load", x->op, x->node);
            else if (strcmp(x->branch, "loop") == 0)
                snprintf(buf, sizeof buf, "from Loop '%s', unrolled (%s) for %s", x->node, x->why,
                         plan_device_name(p, x->device));
            else
                snprintf(buf, sizeof buf,
                         "from the %s branch of If '%s', inlined because its condition is known at plan time",
                         x->branch, x->node);
            const char *d = plan_arena_strdup(&p->arena, buf);
            pn->reason = TDM_REASON_RESCUED;
            pn->detail = d ? d : "";
            continue;
        }
        if (pn->device != x->device)
            continue;
        char tail[160];
        snprintf(buf, sizeof buf,
                 "%s '%s' rewritten by rule %s (%s) for %s; verified on cpu fp32: max |diff| %.3g, cosine %.7f%s", x->op,
                 x->node, x->rule, x->kind, plan_device_name(p, x->device), x->figs.max_abs, x->figs.cosine,
                 check_tail(x, tail, sizeof tail));
        const char *d = plan_arena_strdup(&p->arena, buf);
        pn->reason = TDM_REASON_RESCUED;
        pn->detail = d ? d : "";
    }
}

size_t plan_rescue_checkable(const tdm_plan *p)
{
    size_t n = 0;
    for (size_t k = 0; p->rescue && k < p->rescue->n; k++)
        n += p->rescue->entries[k].kept && p->rescue->entries[k].orig_m != NULL;
    return n;
}

size_t plan_rescue_kept(const tdm_plan *p)
{
    size_t n = 0;
    for (size_t k = 0; p->rescue && k < p->rescue->n; k++)
        n += p->rescue->entries[k].kept != 0;
    return n;
}

/* Where the new nodes of entry k run: "vnpu:x" when all on one device,
 * else "mixed". */
static const char *placed(const tdm_plan *p, size_t k, int *on_target)
{
    int dev = -2;
    *on_target = 0;
    for (int n = 0; n < p->n_nodes && n < p->rescue->n_graph; n++) {
        if (p->rescue->entry_of[n] != (int)k)
            continue;
        int d = p->nodes[n].device;
        *on_target += d == p->rescue->entries[k].device;
        dev = dev == -2 ? d : dev == d ? d : -1;
    }
    return dev == -1 ? "mixed" : dev < 0 ? "-" : plan_device_name(p, dev);
}

static int figs_json(cJSON *o, const char *inputs, int set, const plan_rescue_figs *f)
{
    if (!o)
        return -1;
    cJSON_AddStringToObject(o, "inputs", inputs);
    if (set)
        cJSON_AddNumberToObject(o, "set", set);
    cJSON_AddBoolToObject(o, "pass", f->pass);
    if (isfinite(f->max_abs))
        cJSON_AddNumberToObject(o, "max_abs", f->max_abs);
    else
        cJSON_AddNullToObject(o, "max_abs");
    cJSON_AddNumberToObject(o, "allowed", f->tolerance * (f->ref_max > 1 ? f->ref_max : 1));
    cJSON_AddNumberToObject(o, "cosine", f->cosine);
    cJSON_AddNumberToObject(o, "ref_max_abs", f->ref_max);
    cJSON_AddNumberToObject(o, "values", (double)f->values);
    if (!f->pass && f->why[0])
        cJSON_AddStringToObject(o, "why", f->why);
    return 0;
}

/* Which inputs verified the rescue (rescue.h "verified when"): "checks"
 * (synthetic, then each run-time check with its figures) and "run_check"
 * (what the session does, or did). */
static int verification_json(const tdm_plan *p, const plan_rescue_entry *x, cJSON *v)
{
    cJSON *a = cJSON_AddArrayToObject(v, "checks");
    int run = 0, cal = 0;
    if (!a)
        return -1;
    cJSON *it = cJSON_CreateObject();
    if (!it || !cJSON_AddItemToArray(a, it) || figs_json(it, "synthetic", 0, &x->figs))
        return -1;
    for (int k = 0; k < x->n_checks; k++) {
        const plan_rescue_check *c = x->checks[k];
        run |= strcmp(c->inputs, "first-run") == 0;
        cal += strcmp(c->inputs, "calibration") == 0;
        if (!(it = cJSON_CreateObject()) || !cJSON_AddItemToArray(a, it) || figs_json(it, c->inputs, c->set, &c->figs))
            return -1;
    }
    const char *state = !x->branch && !x->kept && !x->dropped ? NULL
                        : x->dropped                         ? "dropped: a run-time check failed"
                        : run                                ? "done: verified on the first run's inputs"
                        : cal ? "calibration: verified on the calibration input sets; the first run's inputs next"
                        : p->opts.rescue_unchecked
                            ? "off (--verify off): verified on synthetic inputs only"
                            : "pending: a session checks it on its calibration input sets and its first run's inputs";
    return state && !cJSON_AddStringToObject(v, "run_check", state) ? -1 : 0;
}

int plan_rescue_json(const tdm_plan *p, cJSON *root)
{
    const plan_rescue *r = p->rescue;
    cJSON *o, *a;
    /* only when something was tried, or the mode is not the default */
    if (!r || (!r->n && !r->note && r->mode == PLAN_RESCUE_SAFE))
        return 0;
    if (!(o = cJSON_AddObjectToObject(root, "rescue")) ||
        !cJSON_AddStringToObject(o, "mode", plan_rescue_mode_str(r->mode)) ||
        !cJSON_AddNumberToObject(o, "kept", (double)plan_rescue_kept(p)) ||
        (r->note && !cJSON_AddStringToObject(o, "note", r->note)) || !(a = cJSON_AddArrayToObject(o, "attempts")))
        return -1;
    for (size_t k = 0; k < r->n; k++) {
        const plan_rescue_entry *x = &r->entries[k];
        cJSON *it = cJSON_CreateObject(), *nodes;
        if (!it || !cJSON_AddItemToArray(a, it))
            return -1;
        cJSON_AddStringToObject(it, "node", x->node);
        cJSON_AddStringToObject(it, "op", x->op);
        cJSON_AddStringToObject(it, "rule", x->rule);
        cJSON_AddStringToObject(it, "kind", x->kind);
        cJSON_AddStringToObject(it, "device", x->device < 0 ? "-" : plan_device_name(p, x->device));
        cJSON_AddBoolToObject(it, "kept", x->kept);
        if (x->branch)
            cJSON_AddStringToObject(it, "branch", x->branch);
        if (!x->kept && x->why)
            cJSON_AddStringToObject(it, "why", x->why);
        if (x->kept && r->entry_of && (nodes = cJSON_AddArrayToObject(it, "became"))) {
            for (int n = 0; n < p->n_nodes && n < r->n_graph; n++) {
                if (r->entry_of[n] != (int)k)
                    continue;
                cJSON *y = cJSON_CreateObject();
                if (!y || !cJSON_AddItemToArray(nodes, y))
                    return -1;
                cJSON_AddStringToObject(y, "name", p->g->nodes[n].name);
                cJSON_AddStringToObject(y, "op", p->g->nodes[n].op_type);
                cJSON_AddStringToObject(y, "device", plan_device_name(p, p->nodes[n].device));
                cJSON_AddStringToObject(y, "reason", tdm_reason_str(p->nodes[n].reason));
            }
        }
        if (x->verified) {
            cJSON *v = cJSON_AddObjectToObject(it, "verification");
            if (!v)
                return -1;
            cJSON_AddStringToObject(v, "reference", "the original node on cpu fp32");
            cJSON_AddBoolToObject(v, "pass", x->figs.pass && !x->dropped);
            if (isfinite(x->figs.max_abs))
                cJSON_AddNumberToObject(v, "max_abs", x->figs.max_abs);
            else
                cJSON_AddNullToObject(v, "max_abs");
            cJSON_AddNumberToObject(v, "cosine", x->figs.cosine);
            cJSON_AddNumberToObject(v, "tolerance", x->figs.tolerance);
            cJSON_AddNumberToObject(v, "ref_max_abs", x->figs.ref_max);
            cJSON_AddNumberToObject(v, "values", (double)x->figs.values);
            cJSON_AddNumberToObject(v, "input_sets", x->figs.inputs);
            if (x->figs.pass && verification_json(p, x, v))
                return -1;
        }
    }
    return 0;
}

char *plan_rescue_report(const tdm_plan *p)
{
    const plan_rescue *r = p->rescue;
    size_t cap = 512, len = 0;
    char *s;
    if (!r || (!r->n && !r->note))
        return NULL;
    for (size_t k = 0; k < r->n; k++)
        cap += 512 + (r->entries[k].kept ? (size_t)r->entries[k].n_nodes * 40 : 0);
    if (!(s = mem_alloc(cap)))
        return NULL;
#define ADD(...)                                                                                                     \
    do {                                                                                                             \
        int w_ = snprintf(s + len, cap - len, __VA_ARGS__);                                                          \
        if (w_ > 0)                                                                                                  \
            len += (size_t)w_ < cap - len ? (size_t)w_ : cap - len - 1;                                              \
    } while (0)
    ADD("\nrescued (%zu of %zu tried, --rescue %s):\n", plan_rescue_kept(p), r->n, plan_rescue_mode_str(r->mode));
    if (r->note)
        ADD("  %s\n", r->note);
    for (size_t k = 0; k < r->n; k++) {
        const plan_rescue_entry *x = &r->entries[k];
        if (x->branch) {
            int on = 0, dev = 0;
            for (int n = 0; n < p->n_nodes && n < r->n_graph; n++)
                if (r->entry_of && r->entry_of[n] == (int)k) {
                    on++;
                    dev += p->nodes[n].device != (int)p->devs->n - 1;
                }
            if (strcmp(x->branch, "function") == 0)
                ADD("  %-40s %-20s RESCUED function-inline: %d nodes (", x->node, x->op, on);
            else if (strcmp(x->branch, "loop") == 0)
                ADD("  %-40s %-20s RESCUED loop-unroll (%s): %d nodes (", x->node, x->op, x->why, on);
            else
                ADD("  %-40s %-20s RESCUED if-inline (%s branch): %d nodes (", x->node, x->op, x->branch, on);
            for (int j = 0; j < x->n_nodes && j < 12; j++)
                ADD("%s%s", j ? " " : "", x->ops[j]);
            ADD("%s) -> %d of them off cpu\n", x->n_nodes > 12 ? " ..." : "", dev);
        } else if (x->kept) {
            int on = 0;
            const char *where = placed(p, k, &on);
            ADD("  %-40s %-20s RESCUED %s (%s) for %s: %d nodes (", x->node, x->op, x->rule, x->kind,
                plan_device_name(p, x->device), x->n_nodes);
            for (int j = 0; j < x->n_nodes && j < 12; j++)
                ADD("%s%s", j ? " " : "", x->ops[j]);
            char tail[160];
            ADD("%s) -> %s; max |diff| %.3g, cosine %.7f on cpu fp32%s%s\n", x->n_nodes > 12 ? " ..." : "", where,
                x->figs.max_abs, x->figs.cosine, check_tail(x, tail, sizeof tail),
                x->n_checks || !p->opts.rescue_unchecked ? "" : " (synthetic inputs only: --verify off)");
        } else {
            ADD("  %-40s %-20s not rescued by %s for %s: %s\n", x->node, x->op, x->rule, plan_device_name(p, x->device),
                x->why ? x->why : "");
        }
    }
#undef ADD
    return s;
}
