/* The planner's options (plan.h): names, init, copy, free, and the
 * fallback policy in effect (TANDEM_FALLBACK). */
#include "plan/plan_internal.h"
#include "core/ctx.h"
#include "core/mem.h"
#include "core/tensor.h"
#include "plan/rescue.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- options */

/* The public words (src/core/choice.c); the numbers are the same
 * (static assertions in run/session.c). */
const char *plan_granularity_str(plan_granularity g) { return tdm_granularity_name((tdm_granularity)g); }

const char *plan_fallback_str(plan_fallback f) { return tdm_fallback_mode_name((tdm_fallback_mode)f); }

void plan_options_init(plan_options *o)
{
    memset(o, 0, sizeof *o);
    o->granularity = PLAN_GRAN_SUBGRAPH;
    o->fallback = PLAN_FB_ALLOW;
    o->max_fallback_ratio = -1;
    o->max_boundary_bytes = -1;
    o->min_cosine = 0.99;
    o->max_abs = -1;
}

void plan_options_free(plan_options *o)
{
    if (!o)
        return;
    mem_free(o->devices);
    for (size_t i = 0; i < o->n_plugins; i++)
        mem_free(o->plugins[i]);
    mem_free(o->plugins);
    for (size_t i = 0; i < o->n_pins; i++) {
        mem_free(o->pins[i].what);
        mem_free(o->pins[i].device);
    }
    mem_free(o->pins);
    mem_free(o->calibration);
    mem_free(o->probe);
    for (size_t i = 0; i < o->n_refuse; i++) {
        mem_free(o->refuse[i].node);
        mem_free(o->refuse[i].device);
        mem_free(o->refuse[i].detail);
    }
    mem_free(o->refuse);
    mem_free(o->device_fault);
    for (size_t i = 0; i < o->n_binds; i++) {
        mem_free(o->binds[i].name);
        tdm_tensor_destroy(o->binds[i].value);
    }
    mem_free(o->binds);
    for (size_t i = 0; i < o->n_rescue_checks; i++) {
        mem_free(o->rescue_checks[i].node);
        mem_free(o->rescue_checks[i].rule);
        mem_free(o->rescue_checks[i].device);
    }
    mem_free(o->rescue_checks);
    for (size_t i = 0; i < o->n_measured; i++) {
        mem_free(o->measured[i].node);
        mem_free(o->measured[i].device);
    }
    mem_free(o->measured);
    mem_free(o->replan_reason);
    plan_options_init(o);
}

tdm_status plan_options_add_measured(plan_options *o, const char *node, const char *device, double ms, double est_ms)
{
    for (size_t i = 0; i < o->n_measured; i++)
        if (strcmp(o->measured[i].node, node) == 0 && strcmp(o->measured[i].device, device) == 0) {
            o->measured[i].ms = ms;
            o->measured[i].est_ms = est_ms;
            return TDM_OK;
        }
    if (mem_grow((void **)&o->measured, &o->cap_measured, o->n_measured + 1, sizeof *o->measured))
        return TDM_E_NOMEM;
    plan_measured *m = &o->measured[o->n_measured];
    m->node = mem_strdup(node);
    m->device = mem_strdup(device);
    m->ms = ms;
    m->est_ms = est_ms;
    if (!m->node || !m->device) {
        mem_free(m->node);
        mem_free(m->device);
        return TDM_E_NOMEM;
    }
    o->n_measured++;
    return TDM_OK;
}

tdm_status plan_options_add_refusal(plan_options *o, const char *node, const char *device, const char *detail)
{
    if (mem_grow((void **)&o->refuse, &o->cap_refuse, o->n_refuse + 1, sizeof *o->refuse))
        return TDM_E_NOMEM;
    plan_refusal *r = &o->refuse[o->n_refuse];
    r->node = mem_strdup(node);
    r->device = mem_strdup(device);
    r->detail = mem_strdup(detail);
    if (!r->node || !r->device || !r->detail) {
        mem_free(r->node);
        mem_free(r->device);
        mem_free(r->detail);
        return TDM_E_NOMEM;
    }
    o->n_refuse++;
    return TDM_OK;
}

tdm_status plan_options_bind(plan_options *o, const char *name, const tdm_tensor *value)
{
    tdm_tensor *t = NULL;
    tdm_err e;
    size_t i = 0;
    while (i < o->n_binds && strcmp(o->binds[i].name, name) != 0)
        i++;
    if (tensor_clone(&e, value, &t) != TDM_OK)
        return TDM_E_NOMEM;
    if (i < o->n_binds) {
        tdm_tensor_destroy(o->binds[i].value);
        o->binds[i].value = t;
        return TDM_OK;
    }
    char *n = mem_strdup(name);
    if (!n || mem_grow((void **)&o->binds, &o->cap_binds, o->n_binds + 1, sizeof *o->binds)) {
        mem_free(n);
        tdm_tensor_destroy(t);
        return TDM_E_NOMEM;
    }
    o->binds[o->n_binds].name = n;
    o->binds[o->n_binds++].value = t;
    return TDM_OK;
}

/* Appends a copy of c (plan/rescue.h); a synthetic one already there for
 * the same (node, rule, device) is not added twice. */
tdm_status plan_options_add_rescue_check(plan_options *o, const plan_rescue_check *c)
{
    for (size_t i = 0; strcmp(c->inputs, "synthetic") == 0 && i < o->n_rescue_checks; i++) {
        const plan_rescue_check *h = &o->rescue_checks[i];
        if (strcmp(h->inputs, "synthetic") == 0 && strcmp(h->node, c->node) == 0 && strcmp(h->rule, c->rule) == 0 &&
            strcmp(h->device, c->device) == 0)
            return TDM_OK;
    }
    if (mem_grow((void **)&o->rescue_checks, &o->cap_rescue_checks, o->n_rescue_checks + 1, sizeof *o->rescue_checks))
        return TDM_E_NOMEM;
    plan_rescue_check *d = &o->rescue_checks[o->n_rescue_checks];
    *d = *c;
    d->node = mem_strdup(c->node);
    d->rule = mem_strdup(c->rule);
    d->device = mem_strdup(c->device);
    if (!d->node || !d->rule || !d->device) {
        mem_free(d->node);
        mem_free(d->rule);
        mem_free(d->device);
        return TDM_E_NOMEM;
    }
    o->n_rescue_checks++;
    return TDM_OK;
}

tdm_status plan_options_copy(const plan_options *src, plan_options *dst)
{
    plan_options_init(dst);
    dst->granularity = src->granularity;
    dst->fallback = src->fallback;
    dst->fallback_set = src->fallback_set;
    dst->max_fallback_ratio = src->max_fallback_ratio;
    dst->max_boundary_bytes = src->max_boundary_bytes;
    dst->unfused = src->unfused;
    if (src->devices && !(dst->devices = mem_strdup(src->devices)))
        goto nomem;
    dst->min_cosine = src->min_cosine;
    dst->max_abs = src->max_abs;
    dst->rescue = src->rescue;
    dst->rescue_hooks = src->rescue_hooks;
    dst->rescue_unchecked = src->rescue_unchecked;
    for (size_t i = 0; i < src->n_rescue_checks; i++)
        if (plan_options_add_rescue_check(dst, &src->rescue_checks[i]))
            goto nomem;
    for (size_t i = 0; i < src->n_binds; i++)
        if (plan_options_bind(dst, src->binds[i].name, src->binds[i].value))
            goto nomem;
    if (src->calibration && !(dst->calibration = mem_strdup(src->calibration)))
        goto nomem;
    if (src->probe && !(dst->probe = mem_strdup(src->probe)))
        goto nomem;
    for (size_t i = 0; i < src->n_refuse; i++)
        if (plan_options_add_refusal(dst, src->refuse[i].node, src->refuse[i].device, src->refuse[i].detail))
            goto nomem;
    if (src->device_fault && !(dst->device_fault = mem_strdup(src->device_fault)))
        goto nomem;
    if (src->replan_reason && !(dst->replan_reason = mem_strdup(src->replan_reason)))
        goto nomem;
    for (size_t i = 0; i < src->n_measured; i++)
        if (plan_options_add_measured(dst, src->measured[i].node, src->measured[i].device, src->measured[i].ms,
                                      src->measured[i].est_ms))
            goto nomem;
    if (src->n_plugins) {
        if (!(dst->plugins = mem_calloc(src->n_plugins, sizeof *dst->plugins)))
            goto nomem;
        dst->cap_plugins = src->n_plugins;
        for (size_t i = 0; i < src->n_plugins; i++, dst->n_plugins++)
            if (!(dst->plugins[i] = mem_strdup(src->plugins[i])))
                goto nomem;
    }
    if (src->n_pins) {
        if (!(dst->pins = mem_calloc(src->n_pins, sizeof *dst->pins)))
            goto nomem;
        dst->cap_pins = src->n_pins;
        for (size_t i = 0; i < src->n_pins; i++, dst->n_pins++) {
            dst->pins[i].what = mem_strdup(src->pins[i].what);
            dst->pins[i].device = mem_strdup(src->pins[i].device);
            if (!dst->pins[i].what || !dst->pins[i].device) {
                dst->n_pins++;
                goto nomem;
            }
        }
    }
    return TDM_OK;
nomem:
    plan_options_free(dst);
    return TDM_E_NOMEM;
}

tdm_status plan_resolve_fallback(tdm_err *e, tdm_plan *p)
{
    p->fallback = p->opts.fallback;
    if (p->opts.fallback_set)
        return TDM_OK;
    const char *env = getenv("TANDEM_FALLBACK");
    if (!env || !*env)
        return TDM_OK;
    /* the words are the public parser's (src/core/choice.c) */
    tdm_ctx c;
    tdm_fallback_mode m;
    memset(&c, 0, sizeof c);
    if (tdm_fallback_mode_parse(&c, env, &m) != TDM_OK)
        return err_set(e, TDM_E_USAGE, "TANDEM_FALLBACK: %s", c.err.msg);
    p->fallback = (plan_fallback)m;
    return TDM_OK;
}
