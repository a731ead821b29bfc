/* The planner's boundary copies, summary and fallback policy (plan.h). */
#include "plan/plan_internal.h"
#include "core/mem.h"
#include "ops/op.h"

#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------- copies */

static tdm_status add_copy(pstate *s, size_t *cap, int v, int from, int to, int pos, int output)
{
    tdm_plan *p = s->p;
    if (mem_grow((void **)&p->copies, cap, (size_t)p->n_copies + 1, sizeof *p->copies))
        return err_set(s->e, TDM_E_NOMEM, "out of memory");
    plan_copy *c = &p->copies[p->n_copies++];
    memset(c, 0, sizeof *c);
    c->value = v;
    c->from = from;
    c->to = to;
    c->pos = pos;
    c->partition = pos < s->N ? p->nodes[p->order[pos]].partition : -1;
    c->from_partition = s->prod[v] >= 0 ? p->nodes[s->prod[v]].partition : -1;
    c->bytes = plan_value_bytes(s->g, v, &c->known);
    c->weight = s->is_weight[v];
    c->output = output;
    c->est_ms = c->known ? plan_copy_est(s, from, to, c->bytes, &c->est_modeled) : -1;
    return TDM_OK;
}

tdm_status plan_make_copies(pstate *s)
{
    int V = s->V, D = s->D, N = s->N;
    size_t cap = 0;
    tdm_status st = TDM_OK;
    unsigned char *res = mem_calloc((size_t)V * (size_t)D + 1, 1);
    if (!res)
        return err_set(s->e, TDM_E_NOMEM, "out of memory");
    mem_free(s->p->copies);
    s->p->copies = NULL;
    s->p->n_copies = 0;
    for (int pos = 0; pos < N; pos++) {
        int n = s->p->order[pos], d = s->p->nodes[n].device;
        for (int j = s->rd_start[n]; j < s->rd_start[n + 1]; j++) {
            int v = s->rd[j];
            int home = s->prod[v] >= 0 ? s->p->nodes[s->prod[v]].device : s->cpu;
            size_t k = (size_t)v * (size_t)D + (size_t)d;
            if (home == d || res[k])
                continue;
            if ((st = add_copy(s, &cap, v, home, d, pos, 0)) != TDM_OK)
                goto done;
            res[k] = 1;
        }
    }
    for (int k = 0; k < s->g->n_outputs; k++) {
        int v = s->g->outputs[k];
        int home = s->prod[v] >= 0 ? s->p->nodes[s->prod[v]].device : s->cpu;
        int dup = 0;
        for (int j = 0; j < k; j++)
            dup |= s->g->outputs[j] == v;
        if (home == s->cpu || dup || res[(size_t)v * (size_t)D + (size_t)s->cpu])
            continue;
        if ((st = add_copy(s, &cap, v, home, s->cpu, N, 1)) != TDM_OK)
            goto done;
    }
done:
    mem_free(res);
    return st;
}

/* ------------------------------------------------------------- summary */

tdm_status plan_summarize(pstate *s)
{
    tdm_plan *p = s->p;
    tdm_status st;
    if (!s->run_head && !(s->run_head = plan_arr(s, (size_t)s->N, sizeof *s->run_head)))
        return err_set(s->e, TDM_E_NOMEM, "out of memory");
    if ((s->fused && (st = plan_whole_fusion(s)) != TDM_OK) || (st = plan_run_fusion(s, s->run_head)) != TDM_OK)
        return st;
    p->fallback_nodes = 0;
    p->boundary_bytes = p->weight_bytes = 0;
    p->boundary_unknown = 0;
    p->est_total = p->est_copies = 0;
    p->est_modeled = 0;
    p->est_complete = 1;
    p->est_trips_unknown = 0;
    plan_compute_residency(s);
    for (int q = 0; q < p->n_parts; q++) {
        plan_part *pp = &p->parts[q];
        int unk = 0;
        pp->peak_bytes = plan_range_peak(s, pp->first, pp->first + pp->count, &unk);
        pp->peak_unknown = unk;
        pp->est_ms = 0;
        pp->est_nodes = 0;
    }
    for (int n = 0; n < s->N; n++) {
        plan_node *pn = &p->nodes[n];
        pn->fallback = s->D > 1 && pn->device != 0 && pn->reason != TDM_REASON_USER;
        p->fallback_nodes += (size_t)pn->fallback;
        pn->fused = s->run_head[n] >= 0;
        pn->est_ms = plan_node_est_in(s, n, pn->device, s->run_head, &pn->est_modeled);
        /* the subgraphs' pricing, when est_ms is that figure (not a calibrated cpu time) */
        size_t k = (size_t)n * (size_t)s->D + (size_t)pn->device;
        int own = pn->est_ms >= 0 && pn->est_ms == s->est[k];
        pn->est_basis = own ? s->estwhy[k] : NULL;
        pn->est_trips_unknown = own && s->estunk[k];
        p->est_trips_unknown += pn->est_trips_unknown;
        if (pn->est_ms >= 0) {
            p->est_total += pn->est_ms;
            p->est_modeled |= pn->est_modeled;
            p->parts[pn->partition].est_ms += pn->est_ms;
            p->parts[pn->partition].est_nodes++;
        } else {
            p->est_complete = 0;
        }
    }
    for (int q = 0; q < p->n_parts; q++) {
        /* a device's per-partition round trip (submit, synchronise) */
        double rt = plan_part_est(s, p->parts[q].device);
        p->parts[q].est_ms += rt;
        p->est_total += rt;
    }
    for (int c = 0; c < p->n_copies; c++) {
        plan_copy *pc = &p->copies[c];
        if (!pc->known)
            p->boundary_unknown++;
        else if (pc->weight)
            p->weight_bytes += pc->bytes;
        else
            p->boundary_bytes += pc->bytes;
        if (pc->est_ms >= 0) {
            p->est_copies += pc->est_ms;
            p->est_modeled |= pc->est_modeled;
        }
    }
    p->est_total += p->est_copies;
    return TDM_OK;
}

/* ------------------------------------------------------------- policy */

static tdm_status add_violation(pstate *s, size_t *cap, int node, tdm_reason reason, const char *detail)
{
    tdm_plan *p = s->p;
    if (mem_grow((void **)&p->violations, cap, p->n_violations + 1, sizeof *p->violations))
        return err_set(s->e, TDM_E_NOMEM, "out of memory");
    plan_violation *v = &p->violations[p->n_violations++];
    v->node = node;
    v->reason = reason;
    v->detail = detail ? detail : "";
    return TDM_OK;
}

tdm_status plan_check_policy(pstate *s)
{
    tdm_plan *p = s->p;
    size_t cap = 0;
    char sentence[1024];
    size_t off = 0;
    tdm_status st;
    sentence[0] = '\0';
#define SAY(...)                                                                                                     \
    do {                                                                                                             \
        if (off < sizeof sentence) {                                                                                 \
            int w_ = snprintf(sentence + off, sizeof sentence - off, __VA_ARGS__);                                   \
            if (w_ > 0)                                                                                              \
                off += (size_t)w_;                                                                                   \
        }                                                                                                            \
    } while (0)
    const char *first = p->devs->items[0].name;
    if (p->fallback != PLAN_FB_ALLOW) {
        size_t cnt = 0;
        for (int pos = 0; pos < s->N; pos++) {
            int n = p->order[pos];
            const plan_node *pn = &p->nodes[n];
            if (!pn->fallback)
                continue;
            int op = s->g->nodes[n].op;
            if (p->fallback == PLAN_FB_DENY_COMPUTE && op >= 0 && (op_table[op].flags & OPF_SHAPE))
                continue;
            const char *d = plan_fmt(s, "runs on %s instead of %s: %s", plan_device_name(p, pn->device), first,
                                      pn->detail && pn->detail[0] ? pn->detail : tdm_reason_str(pn->reason));
            if (!d || (st = add_violation(s, &cap, n, pn->reason, d)) != TDM_OK)
                return d ? st : err_set(s->e, TDM_E_NOMEM, "out of memory");
            cnt++;
        }
        if (cnt)
            SAY("fallback policy '%s' is violated: %zu %snode%s would not run on %s", plan_fallback_str(p->fallback),
                cnt, p->fallback == PLAN_FB_DENY_COMPUTE ? "compute " : "", cnt == 1 ? "" : "s", first);
    }
    {
        double fb = 0, all = 0;
        p->ratio_by_count = !p->est_complete;
        for (int n = 0; n < s->N; n++) {
            double w = p->ratio_by_count ? 1.0 : p->nodes[n].est_ms;
            all += w;
            if (p->nodes[n].fallback)
                fb += w;
        }
        p->fallback_ratio = all > 0 ? fb / all : 0;
    }
    if (p->opts.max_fallback_ratio >= 0 && s->D > 1) {
        if (p->fallback_ratio > p->opts.max_fallback_ratio) {
            SAY("%sthe fallback ratio %.3f (%s) exceeds --max-fallback-ratio %g", off ? "; " : "", p->fallback_ratio,
                p->ratio_by_count ? "by node count" : "by estimated time", p->opts.max_fallback_ratio);
            for (int pos = 0; pos < s->N; pos++) {
                int n = p->order[pos];
                const plan_node *pn = &p->nodes[n];
                int dup = 0;
                for (size_t k = 0; k < p->n_violations && !dup; k++)
                    dup = p->violations[k].node == n;
                if (!pn->fallback || dup)
                    continue;
                const char *d = plan_fmt(s, "runs on %s instead of %s: %s", plan_device_name(p, pn->device), first,
                                          pn->detail && pn->detail[0] ? pn->detail : tdm_reason_str(pn->reason));
                if (!d || (st = add_violation(s, &cap, n, pn->reason, d)) != TDM_OK)
                    return d ? st : err_set(s->e, TDM_E_NOMEM, "out of memory");
            }
        }
    }
    if (p->opts.max_boundary_bytes >= 0 && p->boundary_bytes > (uint64_t)p->opts.max_boundary_bytes) {
        SAY("%sthe boundary copies move %llu bytes, more than --max-boundary-bytes %lld", off ? "; " : "",
            (unsigned long long)p->boundary_bytes, (long long)p->opts.max_boundary_bytes);
        for (int c = 0; c < p->n_copies; c++) {
            const plan_copy *pc = &p->copies[c];
            if (pc->weight || !pc->known)
                continue;
            int n = pc->pos < s->N ? p->order[pc->pos] : -1;
            const char *d = plan_fmt(s, "%s '%s' (%zu bytes) from %s to %s", n >= 0 ? "reads" : "output",
                                      s->g->values[pc->value].name, pc->bytes, plan_device_name(p, pc->from),
                                      pc->output ? "host" : plan_device_name(p, pc->to));
            if (!d || (st = add_violation(s, &cap, n, n >= 0 ? p->nodes[n].reason : TDM_REASON_OK, d)) != TDM_OK)
                return d ? st : err_set(s->e, TDM_E_NOMEM, "out of memory");
        }
    }
#undef SAY
    p->policy_error = plan_arena_strdup(&p->arena, sentence);
    if (!p->policy_error)
        return err_set(s->e, TDM_E_NOMEM, "out of memory");
    return TDM_OK;
}
