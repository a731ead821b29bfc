/* Public accessors of plans and the device listing. */
#include "plan/plan.h"
#include "core/ctx.h"
#include "core/mem.h"

#include <string.h>

void tdm_free(void *p) { mem_free(p); }

tdm_status tdm_plan_get_summary(const tdm_plan *p, tdm_plan_summary *out)
{
    if (!p || !out)
        return TDM_E_USAGE;
    memset(out, 0, sizeof *out);
    out->nodes = (size_t)p->n_nodes;
    out->partitions = (size_t)p->n_parts;
    out->fallback_nodes = p->fallback_nodes;
    out->boundary_bytes = p->boundary_bytes;
    out->boundary_unknown = p->boundary_unknown;
    out->weight_bytes = p->weight_bytes;
    out->copies = (size_t)p->n_copies;
    out->estimated_ms = p->est_total;
    out->copies_ms = p->est_copies;
    out->estimates_complete = p->est_complete;
    out->modeled = p->est_modeled;
    out->fallback_ratio = p->fallback_ratio;
    return TDM_OK;
}

size_t tdm_plan_device_count(const tdm_plan *p) { return p ? p->devs->n : 0; }

const char *tdm_plan_device_name(const tdm_plan *p, size_t i)
{
    return p && i < p->devs->n ? p->devs->items[i].name : NULL;
}

size_t tdm_plan_device_nodes(const tdm_plan *p, size_t i)
{
    size_t n = 0;
    if (!p)
        return 0;
    for (int k = 0; k < p->n_nodes; k++)
        n += (size_t)p->nodes[k].device == i;
    return n;
}

size_t tdm_plan_node_count(const tdm_plan *p) { return p ? (size_t)p->n_nodes : 0; }

tdm_status tdm_plan_node(const tdm_plan *p, size_t i, const char **name, const char **op_type, const char **device,
                         const char **reason, const char **detail)
{
    if (!p || i >= (size_t)p->n_nodes)
        return TDM_E_USAGE;
    const plan_node *pn = &p->nodes[i];
    if (name)
        *name = p->g->nodes[i].name;
    if (op_type)
        *op_type = p->g->nodes[i].op_type;
    if (device)
        *device = plan_device_name(p, pn->device);
    if (reason)
        *reason = tdm_reason_str(pn->reason);
    if (detail)
        *detail = pn->detail ? pn->detail : "";
    return TDM_OK;
}

tdm_status tdm_plan_calibration_match(const tdm_plan *p, size_t *entries, size_t *matched, size_t *missing)
{
    if (!p || !p->opts.calibration)
        return TDM_E_USAGE;
    if (entries)
        *entries = p->calib_entries;
    if (matched)
        *matched = p->calib_matched;
    if (missing)
        *missing = p->calib_missing;
    return TDM_OK;
}

/* The plan's verdict: the one message a plan keeps (tandem.h "Errors"). */
tdm_status tdm_plan_status(const tdm_plan *p)
{
    return !p ? TDM_E_USAGE : p->n_violations || (p->policy_error && p->policy_error[0]) ? TDM_E_POLICY : TDM_OK;
}

const char *tdm_plan_error(const tdm_plan *p) { return p && p->policy_error ? p->policy_error : ""; }

size_t tdm_plan_violation_count(const tdm_plan *p) { return p ? p->n_violations : 0; }

tdm_status tdm_plan_violation(const tdm_plan *p, size_t i, const char **node, const char **reason,
                              const char **detail)
{
    if (!p || i >= p->n_violations)
        return TDM_E_USAGE;
    const plan_violation *v = &p->violations[i];
    if (node)
        *node = v->node >= 0 ? p->g->nodes[v->node].name : "";
    if (reason)
        *reason = tdm_reason_str(v->reason);
    if (detail)
        *detail = v->detail;
    return TDM_OK;
}

tdm_status tdm_plan_ledger_json(const tdm_plan *p, char **json)
{
    tdm_err e;
    if (!p || !json)
        return TDM_E_USAGE;
    err_clear(&e);
    return plan_ledger_json(&e, p, NULL, json);
}

tdm_status tdm_plan_report(const tdm_plan *p, char **text)
{
    tdm_err e;
    if (!p || !text)
        return TDM_E_USAGE;
    err_clear(&e);
    return plan_report(&e, p, text);
}

/* ------------------------------------------------------------- devices */

struct tdm_device_list {
    dev_info *items;
    size_t n;
};

tdm_status tdm_devices_query(tdm_ctx *ctx, const char *const *plugin_paths, size_t n_plugins, tdm_device_list **out)
{
    tdm_err local;
    tdm_err *e = ctx ? &ctx->err : &local;
    if (!out)
        return err_set(e, TDM_E_USAGE, "tdm_devices_query needs an out pointer");
    *out = NULL;
    err_clear(e);
    tdm_device_list *l = mem_calloc(1, sizeof *l);
    if (!l)
        return err_set(e, TDM_E_NOMEM, "out of memory");
    tdm_status st = dev_list_known(e, plugin_paths, n_plugins, &l->items, &l->n);
    if (st) {
        mem_free(l);
        return st;
    }
    *out = l;
    return TDM_OK;
}

size_t tdm_device_list_count(const tdm_device_list *l) { return l ? l->n : 0; }

tdm_status tdm_device_list_get(const tdm_device_list *l, size_t i, tdm_device_info *out)
{
    if (!l || !out || i >= l->n)
        return TDM_E_USAGE;
    const dev_info *d = &l->items[i];
    out->name = d->name;
    out->kind = d->kind;
    out->available = d->available;
    out->description = d->description;
    out->why_not = d->why_not;
    out->memory_bytes = d->memory_bytes;
    out->precision = d->precision;
    out->source = d->source;
    return TDM_OK;
}

void tdm_device_list_destroy(tdm_device_list *l)
{
    if (!l)
        return;
    mem_free(l->items);
    mem_free(l);
}
