/* The ledger (DESIGN.md "The ledger") and the readable plan report. */
#include "plan/plan.h"
#include "core/mem.h"
#include "graph/qdq.h"
#include "plan/rescue.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *base_name(const char *path)
{
    const char *b = strrchr(path, '/');
    return b ? b + 1 : path;
}

/* cJSON allocates with malloc; the result is copied into mem_alloc memory. */
static tdm_status to_text(tdm_err *e, cJSON *root, char **out)
{
    char *txt = root ? cJSON_PrintBuffered(root, 1 << 16, 1) : NULL;
    cJSON_Delete(root);
    if (!txt)
        return err_set(e, TDM_E_NOMEM, "out of memory writing the ledger");
    *out = mem_strdup(txt);
    cJSON_free(txt);
    return *out ? TDM_OK : err_set(e, TDM_E_NOMEM, "out of memory writing the ledger");
}

#define CHK(x)                                                                                                       \
    do {                                                                                                             \
        if (!(x))                                                                                                    \
            goto nomem;                                                                                              \
    } while (0)

static cJSON *ms_number(double v) { return v >= 0 ? cJSON_CreateNumber(round(v * 1e6) / 1e6) : cJSON_CreateNull(); }

tdm_status plan_ledger_json(tdm_err *e, const tdm_plan *p, const char *run_json, char **json)
{
    return plan_ledger_json_adapt(e, p, run_json, NULL, json);
}

tdm_status plan_ledger_json_adapt(tdm_err *e, const tdm_plan *p, const char *run_json, const char *adapt_json,
                                  char **json)
{
    const gr_graph *g = p->g;
    int D = (int)p->devs->n;
    cJSON *root = cJSON_CreateObject(), *a, *o, *x;
    *json = NULL;
    CHK(root);
    CHK(cJSON_AddStringToObject(root, "model", base_name(p->model->path ? p->model->path : "")));
    CHK(a = cJSON_AddArrayToObject(root, "devices"));
    for (int d = 0; d < D; d++)
        CHK(cJSON_AddItemToArray(a, cJSON_CreateString(plan_device_name(p, d))));
    CHK(cJSON_AddStringToObject(root, "granularity", plan_granularity_str(p->opts.granularity)));
    CHK(cJSON_AddStringToObject(root, "fallback", plan_fallback_str(p->fallback)));
    if (p->auto_method) {
        cJSON *au;
        CHK(au = cJSON_AddObjectToObject(root, "auto"));
        CHK(cJSON_AddStringToObject(au, "method", p->auto_method));
        CHK(cJSON_AddItemToObject(au, "cut_ms", ms_number(p->auto_cut_ms)));
        CHK(cJSON_AddItemToObject(au, "cost_ms", ms_number(p->auto_cost_ms)));
        CHK(cJSON_AddNumberToObject(au, "rounds", p->auto_rounds));
        CHK(cJSON_AddNumberToObject(au, "memory_exclusions", p->auto_memory_moves));
    }
    if (p->opts.calibration || p->opts.probe || p->opts.n_refuse || p->n_precision) {
        cJSON *pr, *fl;
        CHK(pr = cJSON_AddObjectToObject(root, "precision"));
        if (p->opts.calibration)
            CHK(cJSON_AddStringToObject(pr, "calibration", p->opts.calibration));
        if (p->opts.probe || p->opts.n_refuse)
            CHK(cJSON_AddStringToObject(pr, "guard", "the precision guard's probe and verification on the first run's inputs"));
        CHK(cJSON_AddNumberToObject(pr, "min_cosine", p->opts.min_cosine));
        if (p->opts.max_abs >= 0)
            CHK(cJSON_AddNumberToObject(pr, "max_abs", p->opts.max_abs));
        CHK(cJSON_AddNumberToObject(pr, "nodes_without_figures", (double)p->calib_missing));
        CHK(cJSON_AddNumberToObject(pr, "calibration_entries", (double)p->calib_entries));
        CHK(cJSON_AddNumberToObject(pr, "matched_entries", (double)p->calib_matched));
        CHK(cJSON_AddNumberToObject(pr, "measured_estimates", (double)p->calib_measured));
        CHK(fl = cJSON_AddArrayToObject(pr, "refused"));
        for (size_t k = 0; k < p->n_precision; k++) {
            const plan_precision *pp = &p->precision[k];
            CHK(x = cJSON_CreateObject());
            CHK(cJSON_AddItemToArray(fl, x));
            CHK(cJSON_AddStringToObject(x, "node", g->nodes[pp->node].name));
            CHK(cJSON_AddStringToObject(x, "op", g->nodes[pp->node].op_type));
            CHK(cJSON_AddStringToObject(x, "device", plan_device_name(p, pp->device)));
            CHK(cJSON_AddStringToObject(x, "kind", pp->chain ? "accumulated" : "node"));
            CHK(cJSON_AddStringToObject(x, "source", pp->guard ? "guard" : "calibration"));
            CHK(cJSON_AddStringToObject(x, "cause", pp->cause == PLAN_PREC_OVERFLOW ? "overflow"
                                                    : pp->cause == PLAN_PREC_FLUSH  ? "flush to zero"
                                                    : pp->cause == PLAN_PREC_VERIFY ? "output verification"
                                                    : pp->cause == PLAN_PREC_STATIC ? "precision-sensitive op"
                                                                                    : "error"));
            if (pp->cause == PLAN_PREC_OVERFLOW)
                CHK(cJSON_AddNumberToObject(x, "max_abs_value", pp->range));
            if (pp->cause == PLAN_PREC_FLUSH)
                CHK(cJSON_AddNumberToObject(x, "flushed_fraction", pp->range));
            CHK(cJSON_AddNumberToObject(x, "cosine", pp->cosine));
            if (isfinite(pp->max_abs))
                CHK(cJSON_AddNumberToObject(x, "max_abs", pp->max_abs));
            else
                CHK(cJSON_AddNullToObject(x, "max_abs"));
            if (isfinite(pp->rmse))
                CHK(cJSON_AddNumberToObject(x, "rmse", pp->rmse));
            if (pp->chain)
                CHK(cJSON_AddNumberToObject(x, "alone_cosine", pp->alone_cosine));
        }
    }
    if (p->opts.replan_reason || p->opts.n_measured) {
        cJSON *rp, *ms;
        CHK(rp = cJSON_AddObjectToObject(root, "replan"));
        CHK(cJSON_AddStringToObject(rp, "reason", p->opts.replan_reason ? p->opts.replan_reason : ""));
        CHK(cJSON_AddNumberToObject(rp, "measured_estimates", (double)p->adapt_measured));
        CHK(ms = cJSON_AddArrayToObject(rp, "measured"));
        for (size_t k = 0; k < p->opts.n_measured; k++) {
            const plan_measured *pm = &p->opts.measured[k];
            CHK(x = cJSON_CreateObject());
            CHK(cJSON_AddItemToArray(ms, x));
            CHK(cJSON_AddStringToObject(x, "node", pm->node));
            CHK(cJSON_AddStringToObject(x, "device", pm->device));
            CHK(cJSON_AddItemToObject(x, "measured_ms", ms_number(pm->ms)));
            CHK(cJSON_AddItemToObject(x, "estimated_ms", ms_number(pm->est_ms)));
        }
    }
    CHK(a = cJSON_AddArrayToObject(root, "nodes"));
    for (int n = 0; n < p->n_nodes; n++) {
        const plan_node *pn = &p->nodes[n];
        CHK(o = cJSON_CreateObject());
        CHK(cJSON_AddItemToArray(a, o));
        CHK(cJSON_AddStringToObject(o, "name", g->nodes[n].name));
        CHK(cJSON_AddStringToObject(o, "op", g->nodes[n].op_type));
        CHK(cJSON_AddStringToObject(o, "device", plan_device_name(p, pn->device)));
        CHK(cJSON_AddStringToObject(o, "reason", tdm_reason_str(pn->reason)));
        if (pn->detail && pn->detail[0])
            CHK(cJSON_AddStringToObject(o, "detail", pn->detail));
        CHK(cJSON_AddNumberToObject(o, "partition", pn->partition));
        const dev_instance *nd = pn->device >= 0 ? &p->devs->items[pn->device] : NULL;
        if (nd && nd->ext && nd->ext->quantized && g->nodes[n].qdq && !g->nodes[n].qdq->wrapped)
            CHK(cJSON_AddStringToObject(o, "compute", "int8")); /* a QDQ group on an integer device */
        if (pn->est_ms >= 0)
            CHK(cJSON_AddItemToObject(o, "estimated_ms", ms_number(pn->est_ms)));
        if (pn->est_basis)
            CHK(cJSON_AddStringToObject(o, "estimate_basis", pn->est_basis));
        if (pn->est_trips_unknown)
            CHK(cJSON_AddTrueToObject(o, "trip_count_unknown"));
        if (pn->fused) /* fused away in its partition: priced 0 (cpu) or without a launch (a fusing vnpu) */
            CHK(cJSON_AddTrueToObject(o, "fused"));
        if (pn->n_rejected) {
            cJSON *r;
            CHK(r = cJSON_AddArrayToObject(o, "rejected"));
            for (int k = 0; k < pn->n_rejected; k++) {
                CHK(x = cJSON_CreateObject());
                CHK(cJSON_AddItemToArray(r, x));
                CHK(cJSON_AddStringToObject(x, "device", plan_device_name(p, pn->rejected[k].device)));
                CHK(cJSON_AddStringToObject(x, "reason", tdm_reason_str(pn->rejected[k].reason)));
                CHK(cJSON_AddStringToObject(x, "detail", pn->rejected[k].detail ? pn->rejected[k].detail : ""));
            }
        }
    }
    CHK(a = cJSON_AddArrayToObject(root, "partitions"));
    for (int q = 0; q < p->n_parts; q++) {
        const plan_part *pp = &p->parts[q];
        cJSON *ins, *outs = NULL;
        CHK(o = cJSON_CreateObject());
        CHK(cJSON_AddItemToArray(a, o));
        CHK(cJSON_AddNumberToObject(o, "id", q));
        CHK(cJSON_AddStringToObject(o, "device", plan_device_name(p, pp->device)));
        CHK(cJSON_AddNumberToObject(o, "nodes", pp->count));
        CHK(cJSON_AddNumberToObject(o, "peak_bytes", (double)pp->peak_bytes));
        if (pp->peak_unknown)
            CHK(cJSON_AddBoolToObject(o, "peak_incomplete", 1));
        if (pp->est_nodes)
            CHK(cJSON_AddItemToObject(o, "estimated_ms", ms_number(pp->est_ms)));
        CHK(ins = cJSON_AddArrayToObject(o, "inputs"));
        for (int c = 0; c < p->n_copies; c++) {
            const plan_copy *pc = &p->copies[c];
            cJSON *dst;
            if (pc->output && pc->from_partition == q) {
                if (!outs)
                    CHK(outs = cJSON_AddArrayToObject(o, "outputs"));
                dst = outs;
            } else if (!pc->output && pc->partition == q) {
                dst = ins;
            } else {
                continue;
            }
            CHK(x = cJSON_CreateObject());
            CHK(cJSON_AddItemToArray(dst, x));
            CHK(cJSON_AddStringToObject(x, "tensor", g->values[pc->value].name));
            if (pc->known)
                CHK(cJSON_AddNumberToObject(x, "bytes", (double)pc->bytes));
            else
                CHK(cJSON_AddNullToObject(x, "bytes"));
            if (pc->output) {
                CHK(cJSON_AddStringToObject(x, "to", "host"));
            } else {
                CHK(cJSON_AddStringToObject(x, "from", pc->from_partition < 0 ? "host" : plan_device_name(p, pc->from)));
                if (pc->from_partition >= 0)
                    CHK(cJSON_AddNumberToObject(x, "from_partition", pc->from_partition));
            }
            if (pc->weight)
                CHK(cJSON_AddBoolToObject(x, "weight", 1));
            if (pc->est_ms >= 0)
                CHK(cJSON_AddItemToObject(x, "estimated_ms", ms_number(pc->est_ms)));
        }
    }
    cJSON *sum, *nbd, *est, *byd;
    CHK(sum = cJSON_AddObjectToObject(root, "summary"));
    CHK(nbd = cJSON_AddObjectToObject(sum, "nodes_by_device"));
    double *dev_ms = mem_calloc((size_t)D + 1, sizeof *dev_ms);
    int *dev_n = mem_calloc((size_t)D + 1, sizeof *dev_n), *dev_est = mem_calloc((size_t)D + 1, sizeof *dev_est);
    if (!dev_ms || !dev_n || !dev_est) {
        mem_free(dev_ms);
        mem_free(dev_n);
        mem_free(dev_est);
        goto nomem;
    }
    for (int n = 0; n < p->n_nodes; n++) {
        dev_n[p->nodes[n].device]++;
        if (p->nodes[n].est_ms >= 0) {
            dev_ms[p->nodes[n].device] += p->nodes[n].est_ms;
            dev_est[p->nodes[n].device]++;
        }
    }
    int ok = 1;
    for (int d = 0; d < D && ok; d++)
        ok = dev_n[d] == 0 || cJSON_AddNumberToObject(nbd, plan_device_name(p, d), dev_n[d]) != NULL;
    ok = ok && cJSON_AddNumberToObject(sum, "nodes", p->n_nodes) && cJSON_AddNumberToObject(sum, "fallback_nodes", (double)p->fallback_nodes) &&
         cJSON_AddNumberToObject(sum, "boundary_bytes", (double)p->boundary_bytes) &&
         cJSON_AddNumberToObject(sum, "boundary_unknown", (double)p->boundary_unknown) &&
         cJSON_AddNumberToObject(sum, "weight_bytes", (double)p->weight_bytes) &&
         cJSON_AddNumberToObject(sum, "copies", p->n_copies) && cJSON_AddNumberToObject(sum, "partitions", p->n_parts) &&
         cJSON_AddNumberToObject(sum, "fallback_ratio", round(p->fallback_ratio * 1e6) / 1e6) &&
         cJSON_AddStringToObject(sum, "fallback_ratio_by", p->ratio_by_count ? "node count" : "estimated time");
    if (ok && (est = cJSON_AddObjectToObject(sum, "estimated_ms")) != NULL) {
        ok = cJSON_AddItemToObject(est, "total", ms_number(p->est_total)) &&
             cJSON_AddItemToObject(est, "copies", ms_number(p->est_copies)) &&
             cJSON_AddBoolToObject(est, "modeled", p->est_modeled) &&
             cJSON_AddBoolToObject(est, "complete", p->est_complete) &&
             cJSON_AddNumberToObject(est, "trip_counts_unknown", p->est_trips_unknown) &&
             (byd = cJSON_AddObjectToObject(est, "by_device")) != NULL;
        for (int d = 0; d < D && ok; d++)
            ok = dev_est[d] == 0 || cJSON_AddItemToObject(byd, plan_device_name(p, d), ms_number(dev_ms[d]));
    } else {
        ok = 0;
    }
    mem_free(dev_ms);
    mem_free(dev_n);
    mem_free(dev_est);
    CHK(ok);
    cJSON *pol;
    CHK(plan_rescue_json(p, root) == 0);
    CHK(pol = cJSON_AddObjectToObject(root, "policy"));
    CHK(cJSON_AddStringToObject(pol, "fallback", plan_fallback_str(p->fallback)));
    if (p->opts.max_fallback_ratio >= 0)
        CHK(cJSON_AddNumberToObject(pol, "max_fallback_ratio", p->opts.max_fallback_ratio));
    if (p->opts.max_boundary_bytes >= 0)
        CHK(cJSON_AddNumberToObject(pol, "max_boundary_bytes", (double)p->opts.max_boundary_bytes));
    CHK(cJSON_AddBoolToObject(pol, "ok", p->n_violations == 0));
    if (p->n_violations) {
        CHK(cJSON_AddStringToObject(pol, "error", p->policy_error));
        CHK(a = cJSON_AddArrayToObject(pol, "violations"));
        for (size_t k = 0; k < p->n_violations; k++) {
            const plan_violation *v = &p->violations[k];
            CHK(x = cJSON_CreateObject());
            CHK(cJSON_AddItemToArray(a, x));
            CHK(cJSON_AddStringToObject(x, "node", v->node >= 0 ? g->nodes[v->node].name : ""));
            CHK(cJSON_AddStringToObject(x, "reason", tdm_reason_str(v->reason)));
            CHK(cJSON_AddStringToObject(x, "detail", v->detail));
        }
    }
    if (run_json) {
        cJSON *r = cJSON_Parse(run_json);
        CHK(r);
        if (!cJSON_AddItemToObject(root, "run", r)) {
            cJSON_Delete(r);
            goto nomem;
        }
    }
    if (adapt_json) {
        cJSON *r = cJSON_Parse(adapt_json);
        CHK(r);
        if (!cJSON_AddItemToObject(root, "adaptation", r)) {
            cJSON_Delete(r);
            goto nomem;
        }
    }
    return to_text(e, root, json);
nomem:
    cJSON_Delete(root);
    return err_set(e, TDM_E_NOMEM, "out of memory writing the ledger");
}

/* ------------------------------------------------------------- report */

typedef struct sbuf {
    char *s;
    size_t n, cap;
    int oom;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void sb_printf(sbuf *b, const char *fmt, ...)
{
    va_list ap;
    if (b->oom)
        return;
    va_start(ap, fmt);
    int w = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (w < 0 || mem_grow((void **)&b->s, &b->cap, b->n + (size_t)w + 1, 1)) {
        b->oom = 1;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(b->s + b->n, b->cap - b->n, fmt, ap);
    va_end(ap);
    b->n += (size_t)w;
}

static const char *human_bytes(uint64_t b, char *buf, size_t size)
{
    if (b < 1024)
        snprintf(buf, size, "%llu B", (unsigned long long)b);
    else if (b < (uint64_t)1 << 20)
        snprintf(buf, size, "%.1f KiB", (double)b / 1024.0);
    else if (b < (uint64_t)1 << 30)
        snprintf(buf, size, "%.1f MiB", (double)b / 1048576.0);
    else
        snprintf(buf, size, "%.2f GiB", (double)b / 1073741824.0);
    return buf;
}

tdm_status plan_report(tdm_err *e, const tdm_plan *p, char **text)
{
    const gr_graph *g = p->g;
    int D = (int)p->devs->n;
    sbuf b = {NULL, 0, 0, 0};
    char h1[64];
    *text = NULL;
    sb_printf(&b, "plan for %s on ", base_name(p->model->path ? p->model->path : ""));
    for (int d = 0; d < D; d++)
        sb_printf(&b, "%s%s", d ? ", " : "", plan_device_name(p, d));
    sb_printf(&b, " (granularity %s, fallback %s)\n\n", plan_granularity_str(p->opts.granularity),
              plan_fallback_str(p->fallback));

    sb_printf(&b, "nodes per device:\n");
    for (int d = 0; d < D; d++) {
        int cnt = 0;
        double ms = 0;
        int est = 0, mod = 0;
        for (int n = 0; n < p->n_nodes; n++)
            if (p->nodes[n].device == d) {
                cnt++;
                if (p->nodes[n].est_ms >= 0) {
                    ms += p->nodes[n].est_ms;
                    est++;
                    mod |= p->nodes[n].est_modeled;
                }
            }
        sb_printf(&b, "  %-24s %5d node%s", plan_device_name(p, d), cnt, cnt == 1 ? " " : "s");
        if (est)
            sb_printf(&b, "   est. %.3f ms%s%s", ms, mod ? " (modeled)" : "", est < cnt ? " (partial)" : "");
        sb_printf(&b, "\n");
    }
    /* the device columns as wide as the longest device name of the plan,
     * so that two long vnpu names never run into the next column */
    int dw = 8;
    for (int d = 0; d < (int)p->devs->n; d++) {
        size_t l = strlen(plan_device_name(p, d));
        dw = l > (size_t)dw ? (int)l : dw;
    }
    sb_printf(&b, "\npartitions (%d):\n", p->n_parts);
    for (int q = 0; q < p->n_parts; q++) {
        const plan_part *pp = &p->parts[q];
        sb_printf(&b, "  #%-3d %-*s %5d node%s  peak %s%s", q, dw < 20 ? 20 : dw, plan_device_name(p, pp->device), pp->count,
                  pp->count == 1 ? " " : "s", human_bytes(pp->peak_bytes, h1, sizeof h1),
                  pp->peak_unknown ? " (+ tensors of unknown size)" : "");
        if (pp->est_nodes)
            sb_printf(&b, "  est. %.3f ms", pp->est_ms);
        int nin = 0, nw = 0;
        uint64_t win = 0, bin = 0;
        for (int c = 0; c < p->n_copies; c++)
            if (!p->copies[c].output && p->copies[c].partition == q) {
                if (p->copies[c].weight) {
                    nw++;
                    win += p->copies[c].bytes;
                } else {
                    nin++;
                    bin += p->copies[c].bytes;
                }
            }
        if (nin)
            sb_printf(&b, "  in: %d tensor%s, %s", nin, nin == 1 ? "" : "s", human_bytes(bin, h1, sizeof h1));
        if (nw)
            sb_printf(&b, "  weights: %d, %s", nw, human_bytes(win, h1, sizeof h1));
        sb_printf(&b, "\n");
    }
    sb_printf(&b, "\nfallback nodes (%zu):\n", p->fallback_nodes);
    for (int pos = 0; pos < p->n_nodes; pos++) {
        int n = p->order[pos];
        const plan_node *pn = &p->nodes[n];
        if (!pn->fallback)
            continue;
        sb_printf(&b, "  %-40s %-20s -> %-*s %-18s %s\n", g->nodes[n].name, g->nodes[n].op_type, dw,
                  plan_device_name(p, pn->device), tdm_reason_str(pn->reason), pn->detail ? pn->detail : "");
    }
    if (!p->fallback_nodes)
        sb_printf(&b, "  none\n");
    int pinned = 0;
    for (int n = 0; n < p->n_nodes; n++)
        pinned += p->nodes[n].reason == TDM_REASON_USER;
    if (pinned) {
        sb_printf(&b, "\npinned nodes (%d):\n", pinned);
        for (int n = 0; n < p->n_nodes; n++)
            if (p->nodes[n].reason == TDM_REASON_USER)
                sb_printf(&b, "  %-40s %-20s -> %s  USER %s\n", g->nodes[n].name, g->nodes[n].op_type,
                          plan_device_name(p, p->nodes[n].device), p->nodes[n].detail);
    }
    int nb = 0;
    for (int c = 0; c < p->n_copies; c++)
        nb += !p->copies[c].weight;
    sb_printf(&b, "\nboundary tensors (%d, %s per run", nb, human_bytes(p->boundary_bytes, h1, sizeof h1));
    if (p->boundary_unknown)
        sb_printf(&b, ", %zu of unknown size", p->boundary_unknown);
    sb_printf(&b, "; weights uploaded: %s):\n", human_bytes(p->weight_bytes, h1, sizeof h1));
    for (int c = 0; c < p->n_copies; c++) {
        const plan_copy *pc = &p->copies[c];
        if (pc->weight)
            continue;
        char bytes[64];
        if (pc->known)
            snprintf(bytes, sizeof bytes, "%zu B", pc->bytes);
        else
            snprintf(bytes, sizeof bytes, "? B");
        sb_printf(&b, "  %-40s %14s  %s -> %s", g->values[pc->value].name, bytes,
                  pc->from_partition < 0 ? "host" : plan_device_name(p, pc->from),
                  pc->output ? "host" : plan_device_name(p, pc->to));
        if (pc->partition >= 0)
            sb_printf(&b, " (partition %d)", pc->partition);
        if (pc->est_ms > 0)
            sb_printf(&b, "  %.3f ms%s", pc->est_ms, pc->est_modeled ? " (modeled)" : "");
        sb_printf(&b, "\n");
    }
    if (!nb)
        sb_printf(&b, "  none\n");
    sb_printf(&b, "\nestimated time per run:\n");
    for (int d = 0; d < D; d++) {
        double ms = 0;
        int est = 0, cnt = 0, mod = 0;
        for (int n = 0; n < p->n_nodes; n++)
            if (p->nodes[n].device == d) {
                cnt++;
                if (p->nodes[n].est_ms >= 0) {
                    ms += p->nodes[n].est_ms;
                    est++;
                    mod |= p->nodes[n].est_modeled;
                }
            }
        if (!cnt)
            continue;
        if (est)
            sb_printf(&b, "  %-24s %10.3f ms%s%s\n", plan_device_name(p, d), ms, mod ? " (modeled)" : "",
                      est < cnt ? " (some nodes without an estimate)" : "");
        else
            sb_printf(&b, "  %-24s %10s    (no estimate)\n", plan_device_name(p, d), "-");
    }
    int cmod = 0;
    for (int c = 0; c < p->n_copies; c++)
        cmod |= p->copies[c].est_modeled;
    sb_printf(&b, "  %-24s %10.3f ms%s\n", "copies", p->est_copies, cmod ? " (modeled)" : "");
    sb_printf(&b, "  %-24s %10.3f ms%s%s\n", "total", p->est_total, p->est_modeled ? " (modeled)" : "",
              p->est_complete ? "" : " (incomplete: some nodes have no estimate)");
    if (p->est_trips_unknown)
        sb_printf(&b, "  %d control-flow node%s priced at one pass: trip count or scan length unknown\n",
                  p->est_trips_unknown, p->est_trips_unknown == 1 ? "" : "s");
    {
        char *rs = plan_rescue_report(p);
        if (rs)
            sb_printf(&b, "%s", rs);
        mem_free(rs);
    }
    sb_printf(&b, "\nsummary: %d node%s, %zu fallback, %d partition%s, %llu boundary bytes\n", p->n_nodes,
              p->n_nodes == 1 ? "" : "s", p->fallback_nodes, p->n_parts, p->n_parts == 1 ? "" : "s",
              (unsigned long long)p->boundary_bytes);
    if (p->n_violations) {
        sb_printf(&b, "\npolicy: %s\n", p->policy_error);
        for (size_t k = 0; k < p->n_violations; k++) {
            const plan_violation *v = &p->violations[k];
            sb_printf(&b, "  %s: %s: %s\n", v->node >= 0 ? g->nodes[v->node].name : "(graph output)",
                      tdm_reason_str(v->reason), v->detail);
        }
    } else {
        sb_printf(&b, "policy: within the fallback policy (%s)\n", plan_fallback_str(p->fallback));
    }
    if (b.oom) {
        mem_free(b.s);
        return err_set(e, TDM_E_NOMEM, "out of memory writing the plan report");
    }
    *text = b.s;
    return TDM_OK;
}
