/* The planner's triggers (plan.h): precision (calibration file, the
 * precision guard's probe and refusals, precision-sensitive op types),
 * the circuit breaker's device fault, run-time measurements and pins. */
#include "plan/plan_internal.h"
#include "plan/calib.h"
#include "core/mem.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* The precision trigger (plan/calib.h): devices refuse nodes whose
 * calibrated error is outside the thresholds; measured times replace
 * estimates. */
static int outside(const plan_options *o, double cosine, double max_abs)
{
    return !(cosine >= o->min_cosine) || (o->max_abs >= 0 && !(max_abs <= o->max_abs));
}

static plan_precision *add_precision(pstate *s)
{
    tdm_plan *p = s->p;
    size_t cap = p->n_precision;
    if (mem_grow((void **)&p->precision, &cap, p->n_precision + 1, sizeof *p->precision))
        return NULL;
    plan_precision *pp = &p->precision[p->n_precision++];
    memset(pp, 0, sizeof *pp);
    return pp;
}

/* The largest finite value of a device's float type (0: fp32 or wider). */
static double narrow_max(const dev_instance *di, const char **type)
{
    tdm_dtype t = di->ext ? di->ext->precision : TDM_FLOAT;
    *type = tdm_dtype_name(t);
    return t == TDM_FLOAT16 ? 65504.0 : t == TDM_BFLOAT16 ? 3.3895313892515355e38 : 0;
}

/* One source of figures: the calibration file (probe 0) or the precision
 * guard's probe (probe 1: its times are not used; overflow of the device's
 * type is checked from the reference's ranges). */
static tdm_status apply_calib(pstate *s, calib_data *cd, int probe, unsigned char *safe)
{
    tdm_plan *p = s->p;
    const plan_options *o = &p->opts;
    int N = s->N, D = s->D;
    tdm_status st = TDM_OK;
    calib_figs *figs = mem_calloc((size_t)N * (size_t)D + 1, sizeof *figs);
    unsigned char *have = mem_calloc((size_t)N * (size_t)D + 1, 1);
    if (!figs || !have) {
        st = err_set(s->e, TDM_E_NOMEM, "out of memory");
        goto done;
    }
    for (int n = 0; n < N; n++) {
        char key[128];
        int any = 0;
        if ((st = plan_node_signature(s->e, &p->descs[n], !probe, key, sizeof key, NULL)) != TDM_OK)
            goto done;
        if (probe) /* the probe's entries are keyed by node name */
            snprintf(key, sizeof key, "#%.120s", s->g->nodes[n].name);
        calib_match(cd, key);
        for (int d = 0; d < D; d++) {
            size_t k = (size_t)n * (size_t)D + (size_t)d;
            have[k] = (unsigned char)calib_find(cd, key, p->devs->items[d].name, &figs[k]);
            any |= have[k];
            if (!probe && have[k] && figs[k].has_ms && figs[k].measured && s->sup[k] == TDM_REASON_OK) {
                s->est[k] = figs[k].ms;
                s->estmod[k] = 0;
                s->estwhy[k] = NULL;
                s->estunk[k] = 0;
                p->calib_measured++;
            }
        }
        if (!probe)
            p->calib_missing += !any;
    }
    if (!probe)
        calib_counts(cd, &p->calib_entries, &p->calib_matched);
    for (int pos = 0; pos < N; pos++) {
        int n = s->g->order ? s->g->order[pos] : pos;
        for (int d = 0; d < s->cpu; d++) {
            size_t k = (size_t)n * (size_t)D + (size_t)d;
            const calib_figs *f = &figs[k];
            const char *tname = "";
            double tmax = narrow_max(&p->devs->items[d], &tname);
            int chain = 0, cause = PLAN_PREC_ERROR;
            double range = 0;
            if (!have[k] || s->sup[k] != TDM_REASON_OK)
                continue;
            int bad = f->has_error && outside(o, f->cosine, f->max_abs);
            /* figures within the thresholds: shown safe (the static layer) */
            if ((f->has_error || f->has_chain) && !bad && !(f->has_chain && outside(o, f->chain_cosine, f->chain_max_abs)) &&
                !(probe && f->has_range && tmax > 0 && (f->out_max > tmax || f->in_max > tmax)))
                safe[k] = 1;
            if (probe && f->has_range && tmax > 0 && f->out_max > tmax) {
                cause = PLAN_PREC_OVERFLOW;
                range = f->out_max;
            } else if (probe && bad && f->has_range && tmax > 0 && f->in_max > tmax) {
                cause = PLAN_PREC_OVERFLOW;
                range = -f->in_max; /* an input's */
            } else if (bad) {
                double fl = tmax == 65504.0 ? f->flush_fp16 : tmax > 0 ? f->flush_bf16 : 0;
                if (probe && f->has_range && fl >= 0.01) {
                    cause = PLAN_PREC_FLUSH;
                    range = fl;
                }
            } else if (f->has_chain && outside(o, f->chain_cosine, f->chain_max_abs)) {
                /* the crossing point: every producer's chain is within */
                int crossing = 1;
                for (int j = s->rd_start[n]; j < s->rd_start[n + 1] && crossing; j++) {
                    int pr = s->prod[s->rd[j]];
                    if (pr < 0)
                        continue;
                    size_t kp = (size_t)pr * (size_t)D + (size_t)d;
                    crossing = !(have[kp] && figs[kp].has_chain && outside(o, figs[kp].chain_cosine, figs[kp].chain_max_abs));
                }
                if (!crossing)
                    continue;
                chain = 1;
                double fl = tmax == 65504.0 ? f->flush_fp16 : tmax > 0 ? f->flush_bf16 : 0;
                if (probe && f->has_range && tmax > 0 && f->in_max > tmax) {
                    cause = PLAN_PREC_OVERFLOW;
                    range = -f->in_max;
                } else if (probe && f->has_range && fl >= 0.01) {
                    cause = PLAN_PREC_FLUSH;
                    range = fl;
                }
            } else {
                continue;
            }
            double cs = chain ? f->chain_cosine : f->cosine, ma = chain ? f->chain_max_abs : f->max_abs;
            double rm = chain ? f->chain_rmse : f->rmse;
            const char *dn = p->devs->items[d].name;
            const char *who = probe ? "precision guard: " : "";
            const char *what = probe ? "error" : "calibrated error";
            char lim[64] = "";
            if (o->max_abs >= 0)
                snprintf(lim, sizeof lim, ", max |diff| limit %g", o->max_abs);
            const char *det;
            if (cause == PLAN_PREC_OVERFLOW)
                det = plan_fmt(s, "%s%s max |x| %.2g overflows %s on %s (largest finite %g); cosine %.6f against cpu fp32",
                                who, range > 0 ? "output" : "input", fabs(range), tname, dn, tmax, cs);
            else if (cause == PLAN_PREC_FLUSH)
                det = plan_fmt(s, "%s%.0f%% of the output's nonzero values flush to zero in %s on %s; cosine %.6f against "
                                "cpu fp32 (minimum %.9g)", who, range * 100, tname, dn, cs, o->min_cosine);
            else if (chain)
                det = plan_fmt(s, "%s%s%saccumulated error on %s crosses the threshold at this node: cosine %.9f, "
                                "max |diff| %.4g, RMSE %.4g along the chain (alone: cosine %.9f; minimum cosine %.9g%s)",
                                who, probe ? "" : "calibrated ", probe ? "the " : "", dn, cs, ma, rm, f->cosine,
                                o->min_cosine, lim);
            else
                det = plan_fmt(s, "%s%s on %s: cosine %.9f, max |diff| %.4g, RMSE %.4g against cpu fp32 "
                                "(minimum cosine %.9g%s)", who, what, dn, cs, ma, rm, o->min_cosine, lim);
            plan_precision *pp = det ? add_precision(s) : NULL;
            if (!pp) {
                st = err_set(s->e, TDM_E_NOMEM, "out of memory");
                goto done;
            }
            pp->node = n;
            pp->device = d;
            pp->chain = chain;
            pp->cosine = cs;
            pp->max_abs = ma;
            pp->rmse = rm;
            pp->alone_cosine = f->cosine;
            pp->guard = probe;
            pp->cause = cause;
            pp->range = fabs(range);
            s->sup[k] = TDM_REASON_PRECISION;
            s->supdet[k] = det;
        }
    }
done:
    mem_free(figs);
    mem_free(have);
    return st;
}

/* The calibration file, the guard's probe and refusals, then the static
 * layer: a device's precision-sensitive op types are refused unless a
 * source showed the node safe there (safe[n*D+d]). */
static tdm_status apply_sources(pstate *s, unsigned char *safe)
{
    tdm_plan *p = s->p;
    const plan_options *o = &p->opts;
    int N = s->N, D = s->D;
    calib_data *cd = NULL;
    tdm_status st;
    if (o->calibration) {
        if ((st = calib_load(s->e, o->calibration, &cd)) != TDM_OK)
            return st;
        st = apply_calib(s, cd, 0, safe);
        calib_free(cd);
        cd = NULL;
        if (st)
            return st;
    }
    if (o->probe) {
        if ((st = calib_load_text(s->e, "the precision guard's probe", o->probe, &cd)) != TDM_OK)
            return st;
        st = apply_calib(s, cd, 1, safe);
        calib_free(cd);
        if (st)
            return st;
    }
    /* the guard's verification refusals: (node name, device) */
    for (size_t i = 0; i < o->n_refuse; i++) {
        const plan_refusal *r = &o->refuse[i];
        for (int n = 0; n < N; n++) {
            if (strcmp(s->g->nodes[n].name, r->node) != 0)
                continue;
            for (int d = 0; d < s->cpu; d++) {
                size_t k = (size_t)n * (size_t)D + (size_t)d;
                if (strcmp(p->devs->items[d].name, r->device) != 0 || s->sup[k] != TDM_REASON_OK)
                    continue;
                plan_precision *pp = add_precision(s);
                if (!pp)
                    return err_set(s->e, TDM_E_NOMEM, "out of memory");
                pp->node = n;
                pp->device = d;
                pp->cosine = pp->alone_cosine = NAN;
                pp->max_abs = pp->rmse = NAN;
                pp->guard = 1;
                pp->cause = PLAN_PREC_VERIFY;
                s->sup[k] = TDM_REASON_PRECISION;
                s->supdet[k] = r->detail;
            }
        }
    }
    int any_sensitive = 0;
    for (int d = 0; d < s->cpu; d++) {
        const dev_ext *x = p->devs->items[d].ext;
        if (!x || !x->n_sensitive)
            continue;
        any_sensitive = 1;
        for (int n = 0; n < N; n++) {
            size_t k = (size_t)n * (size_t)D + (size_t)d;
            int listed = 0;
            for (size_t i = 0; i < x->n_sensitive && !listed; i++)
                listed = strcmp(x->sensitive[i], s->g->nodes[n].op_type) == 0;
            if (!listed || s->sup[k] != TDM_REASON_OK || safe[k])
                continue;
            const char *det = plan_fmt(s, "%s declares %s precision-sensitive: kept off its %s until calibration or the "
                                        "precision guard's probe shows this node safe there",
                                        p->devs->items[d].name, s->g->nodes[n].op_type, tdm_dtype_name(x->precision));
            plan_precision *pp = det ? add_precision(s) : NULL;
            if (!pp)
                return err_set(s->e, TDM_E_NOMEM, "out of memory");
            pp->node = n;
            pp->device = d;
            pp->cosine = pp->alone_cosine = pp->max_abs = pp->rmse = NAN;
            pp->cause = PLAN_PREC_STATIC;
            s->sup[k] = TDM_REASON_PRECISION;
            s->supdet[k] = det;
        }
    }
    /* the first device that still takes each node */
    if (!o->calibration && !o->probe && !o->n_refuse && !any_sensitive)
        return TDM_OK;
    for (int n = 0; n < N; n++) {
        int first = -1;
        for (int d = 0; d < D && first < 0; d++)
            if (s->sup[(size_t)n * (size_t)D + (size_t)d] == TDM_REASON_OK)
                first = d;
        p->nodes[n].preferred = first;
    }
    return TDM_OK;
}

tdm_status plan_apply_precision(pstate *s)
{
    tdm_plan *p = s->p;
    const plan_options *o = &p->opts;
    int N = s->N, D = s->D;
    tdm_status st;
    if (o->device_fault) {
        for (int n = 0; n < N; n++) {
            for (int d = 0; d < s->cpu; d++) {
                size_t k = (size_t)n * (size_t)D + (size_t)d;
                if (s->sup[k] != TDM_REASON_OK)
                    continue;
                s->sup[k] = TDM_REASON_DEVICE_FAULT;
                s->supdet[k] = o->device_fault;
            }
            p->nodes[n].preferred = s->cpu;
        }
        return TDM_OK;
    }
    unsigned char *safe = mem_calloc((size_t)N * (size_t)D + 1, 1);
    if (!safe)
        return err_set(s->e, TDM_E_NOMEM, "out of memory");
    st = apply_sources(s, safe);
    mem_free(safe);
    return st;
}

/* The index of the device named name in the plan's list, or -1. */
static int find_device(const tdm_plan *p, const char *name)
{
    for (size_t d = 0; d < p->devs->n; d++)
        if (strcmp(p->devs->items[d].name, name) == 0)
            return (int)d;
    return -1;
}

/* Run-time measurements (opts.measured) replace the estimates of (node,
 * device) — after the calibration file's, so the latest figure wins. */
void plan_apply_measured(pstate *s)
{
    tdm_plan *p = s->p;
    const plan_options *o = &p->opts;
    for (size_t i = 0; i < o->n_measured; i++) {
        int d = find_device(p, o->measured[i].device), n = -1;
        for (int k = 0; k < s->N && n < 0 && d >= 0; k++)
            if (strcmp(s->g->nodes[k].name, o->measured[i].node) == 0)
                n = k;
        if (n < 0 || !(o->measured[i].ms >= 0))
            continue;
        size_t k = (size_t)n * (size_t)s->D + (size_t)d;
        if (s->sup[k] != TDM_REASON_OK)
            continue;
        s->est[k] = o->measured[i].ms;
        s->estmod[k] = 0;
        s->estwhy[k] = NULL;
        s->estunk[k] = 0;
        p->adapt_measured++;
    }
}

tdm_status plan_apply_pins(pstate *s)
{
    const plan_options *o = &s->p->opts;
    s->pin = plan_arr(s, (size_t)s->N, sizeof *s->pin);
    s->pinspec = plan_arr(s, (size_t)s->N, sizeof *s->pinspec);
    if (!s->pin || !s->pinspec)
        return err_set(s->e, TDM_E_NOMEM, "out of memory");
    for (int n = 0; n < s->N; n++)
        s->pin[n] = -1;
    for (size_t k = 0; k < o->n_pins; k++) {
        const plan_pin *pp = &o->pins[k];
        int d = find_device(s->p, pp->device);
        if (d < 0) {
            char list[512];
            size_t off = 0;
            list[0] = '\0';
            for (size_t j = 0; j < s->p->devs->n && off < sizeof list; j++) {
                int w = snprintf(list + off, sizeof list - off, "%s%s", j ? ", " : "", s->p->devs->items[j].name);
                if (w < 0)
                    break;
                off += (size_t)w;
            }
            return err_set(s->e, TDM_E_USAGE, "--pin %s=%s names a device that is not in the session's list (%s)",
                           pp->what, pp->device, list);
        }
        int hits = 0;
        for (int pass = 0; pass < 2; pass++) {
            /* pass 0: node names; pass 1: op types (a node pin beats an op pin) */
            for (int n = 0; n < s->N; n++) {
                const gr_node *node = &s->g->nodes[n];
                int match = pass == 0 ? strcmp(node->name, pp->what) == 0 : strcmp(node->op_type, pp->what) == 0;
                if (!match)
                    continue;
                hits++;
                if (pass == 1 && s->pinspec[n] && s->pin[n] >= 0 && strcmp(s->pinspec[n], "") != 0) {
                    /* already pinned by name or by an earlier op pin */
                    continue;
                }
                s->pin[n] = d;
                s->pinspec[n] = plan_fmt(s, "pinned to %s by --pin %s=%s", pp->device, pp->what, pp->device);
                if (!s->pinspec[n])
                    return err_set(s->e, TDM_E_NOMEM, "out of memory");
            }
        }
        if (!hits)
            return err_set(s->e, TDM_E_USAGE, "--pin %s=%s: '%s' is neither a node name nor an op type of the model",
                           pp->what, pp->device, pp->what);
    }
    return TDM_OK;
}
