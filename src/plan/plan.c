/* The planner's entry (plan_build), its state helpers and the graph
 * structure and device verdicts every pass reads (rules in plan.h; the
 * passes: triggers.c, granularity.c, memory.c, copies.c; options.c). */
#include "plan/plan_internal.h"
#include "core/mem.h"
#include "plan/calib.h"
#include "plan/rescue.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------- helpers */

const char *plan_device_name(const tdm_plan *p, int d)
{
    if (d < 0)
        return "host";
    return p->devs->items[d].name;
}

size_t plan_value_bytes(const gr_graph *g, int v, int *known)
{
    const gr_type *t = &g->values[v].type;
    size_t n = 1, b;
    *known = 0;
    if (g->values[v].init && g->values[v].init->kind == TDM_KIND_TENSOR && !g->values[v].is_input &&
        g->values[v].init->dtype != TDM_STRING) {
        *known = 1;
        return g->values[v].init->nbytes;
    }
    if (t->kind != TDM_KIND_TENSOR || t->rank < 0 || tdm_dtype_size(t->dtype) == 0)
        return 0;
    for (int d = 0; d < t->rank; d++) {
        if (t->dims[d].v < 0 || mem_mul(n, (size_t)t->dims[d].v, &n))
            return 0;
    }
    if (mem_mul(n, tdm_dtype_size(t->dtype), &b))
        return 0;
    *known = 1;
    return b;
}

static int add_id(int **ids, size_t *n, size_t *cap, int v)
{
    for (size_t i = 0; i < *n; i++)
        if ((*ids)[i] == v)
            return 0;
    if (mem_grow((void **)ids, cap, *n + 1, sizeof **ids))
        return -1;
    (*ids)[(*n)++] = v;
    return 0;
}

static int collect_outer(const gr_graph *g, const gr_graph *sub, int **ids, size_t *n, size_t *cap)
{
    for (int v = 0; v < sub->n_values; v++) {
        if (!sub->values[v].outer)
            continue;
        int id = gr_value_find(g, sub->values[v].name);
        if (id >= 0 && add_id(ids, n, cap, id))
            return -1;
    }
    for (int k = 0; k < sub->n_nodes; k++) {
        const gr_node *node = &sub->nodes[k];
        for (int a = 0; a < node->n_attrs; a++) {
            const gr_attr *at = &node->attrs[a];
            if (at->type == GA_GRAPH && at->g && collect_outer(g, at->g, ids, n, cap))
                return -1;
            for (size_t j = 0; at->type == GA_GRAPHS && j < at->n; j++)
                if (collect_outer(g, at->graphs[j], ids, n, cap))
                    return -1;
        }
    }
    return 0;
}

int plan_implicit_inputs(const gr_graph *g, const gr_node *n, int **ids)
{
    size_t cnt = 0, cap = 0;
    *ids = NULL;
    for (int a = 0; a < n->n_attrs; a++) {
        const gr_attr *at = &n->attrs[a];
        if (at->type == GA_GRAPH && at->g && collect_outer(g, at->g, ids, &cnt, &cap))
            goto nomem;
        for (size_t j = 0; at->type == GA_GRAPHS && j < at->n; j++)
            if (collect_outer(g, at->graphs[j], ids, &cnt, &cap))
                goto nomem;
    }
    return (int)cnt;
nomem:
    mem_free(*ids);
    *ids = NULL;
    return -1;
}

static int node_has_subgraphs(const gr_node *n)
{
    for (int a = 0; a < n->n_attrs; a++)
        if (n->attrs[a].type == GA_GRAPH || n->attrs[a].type == GA_GRAPHS)
            return 1;
    return 0;
}

/* ------------------------------------------------------------- state */

void *plan_arr(pstate *s, size_t n, size_t size) { return plan_arena_array(&s->p->arena, n ? n : 1, size); }

const char *plan_fmt(pstate *s, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return plan_arena_strdup(&s->p->arena, buf);
}

/* ------------------------------------------------------------- control flow */

/* Subgraphs nested deeper than this get no estimate (the loader refuses
 * more than ONNX_MAX_GRAPH_DEPTH, 64, levels; this bounds the recursion
 * for graphs built otherwise). */
enum { CF_MAX_DEPTH = 64 };
/* A Loop's M at or above this (INT64_MAX: what exporters write for "no
 * limit", the condition ending the loop) is no trip count. */
#define CF_NO_LIMIT 9.2e18

/* A graph and the graphs enclosing it, to find an outer value's constant. */
typedef struct cf_scope {
    const gr_graph *g;
    const struct cf_scope *up;
    int depth;
} cf_scope;

/* What a subgraph's estimate rests on: a modeled figure among its nodes',
 * a trip count or scan length not known somewhere (priced as one pass). */
typedef struct cf_note {
    int modeled, unknown;
} cf_note;

/* The constant scalar value v of sc->g holds, looked up by name in the
 * enclosing graphs when it is an outer value: 1 and *out, else 0. */
static int cf_const(const cf_scope *sc, int v, double *out)
{
    while (sc && v >= 0) {
        const gr_value *x = &sc->g->values[v];
        const tdm_tensor *c = x->init;
        if (c && !x->is_input && c->kind == TDM_KIND_TENSOR && c->count == 1 && c->data) {
            *out = tensor_get_f64(c, 0);
            return 1;
        }
        if (!x->outer || !sc->up)
            return 0;
        v = gr_value_find(sc->up->g, x->name);
        sc = sc->up;
    }
    return 0;
}

static double cf_graph_est(pstate *s, const cf_scope *sc, int d, cf_note *note);

/* The scan length of Scan node nd of sc->g (Scan-8: batch x length), < 0
 * when a dimension is not known. */
static double cf_scan_length(const cf_scope *sc, const gr_node *nd)
{
    int64_t ns = gr_attr_int(nd, "num_scan_inputs", 0), axis = nd->opset < 9 ? 1 : 0;
    const int64_t *axes = NULL;
    int k = ns > 0 && ns <= nd->n_inputs ? nd->n_inputs - (int)ns : -1;
    if (k < 0 || nd->inputs[k] < 0)
        return -1;
    if (nd->opset >= 9 && gr_attr_ints(nd, "scan_input_axes", &axes) > 0 && axes)
        axis = axes[0];
    const gr_type *t = &sc->g->values[nd->inputs[k]].type;
    if (axis < 0)
        axis += t->rank;
    if (t->rank <= 0 || axis < 0 || axis >= t->rank || t->dims[axis].v < 0)
        return -1;
    double len = (double)t->dims[axis].v;
    if (nd->opset < 9)
        len = t->dims[0].v >= 0 ? len * (double)t->dims[0].v : -1;
    return len;
}

/* The work node nd of sc->g runs in its subgraphs on device d (0 without
 * subgraphs; < 0: unknown), and what it rests on in why (may be NULL):
 * If: the branch a constant condition takes, else the more expensive one
 * (an upper bound); Loop: the body times a constant trip count M (at most M
 * iterations run: an upper bound; 0 when the initial condition is a
 * constant false), else once; Scan: the body times the scan length, else
 * once; any other op with a body (SequenceMap): once. "Once" is neither
 * bound: note->unknown says a figure rests on it. */
static double cf_node_est(pstate *s, const cf_scope *sc, const gr_node *nd, int d, cf_note *note, char *why,
                          size_t why_size)
{
    if (!node_has_subgraphs(nd))
        return 0;
    if (sc->depth >= CF_MAX_DEPTH)
        return -1;
    double c;
    if (strcmp(nd->op_type, "If") == 0) {
        const gr_attr *th = gr_attr_find(nd, "then_branch"), *el = gr_attr_find(nd, "else_branch");
        if (!th || !el || !th->g || !el->g)
            return -1;
        cf_scope ts = {th->g, sc, sc->depth + 1}, es = {el->g, sc, sc->depth + 1};
        if (nd->n_inputs > 0 && cf_const(sc, nd->inputs[0], &c)) {
            if (why)
                snprintf(why, why_size, "the %s branch (constant condition)", c != 0 ? "then" : "else");
            return cf_graph_est(s, c != 0 ? &ts : &es, d, note);
        }
        cf_note tn = {0, 0}, en = {0, 0};
        double a = cf_graph_est(s, &ts, d, &tn), b = cf_graph_est(s, &es, d, &en);
        if (a < 0 || b < 0)
            return -1;
        const cf_note *taken = a >= b ? &tn : &en;
        note->modeled |= taken->modeled;
        note->unknown |= taken->unknown;
        if (why)
            snprintf(why, why_size, "the more expensive branch (%s; the condition is not constant)",
                     a >= b ? "then" : "else");
        return a >= b ? a : b;
    }
    const gr_attr *body = gr_attr_find(nd, "body");
    if (!body || !body->g)
        return -1;
    cf_scope bs = {body->g, sc, sc->depth + 1};
    double w = cf_graph_est(s, &bs, d, note), times = -1;
    if (w < 0)
        return -1;
    const char *what = "iteration count";
    if (strcmp(nd->op_type, "Loop") == 0) {
        what = "trip count";
        if (nd->n_inputs > 1 && cf_const(sc, nd->inputs[1], &c) && c == 0) {
            times = 0;
            if (why)
                snprintf(why, why_size, "the body x 0 (the initial condition is a constant false)");
        } else if (nd->n_inputs > 0 && cf_const(sc, nd->inputs[0], &c) && c >= 0 && c < CF_NO_LIMIT) {
            times = c;
            if (why)
                snprintf(why, why_size, "the body x %.0f (constant trip count; at most that many iterations)", c);
        }
    } else if (strcmp(nd->op_type, "Scan") == 0) {
        what = "scan length";
        times = cf_scan_length(sc, nd);
        if (why && times >= 0)
            snprintf(why, why_size, "the body x %.0f (%s)", times, nd->opset < 9 ? "batch x scan length" : "scan length");
    }
    if (times < 0) {
        note->unknown = 1;
        if (why)
            snprintf(why, why_size, "the body x 1 (%s unknown)", what);
        times = 1;
    }
    return w * times;
}

/* The summed estimates of sc->g's nodes on device d (their own and their
 * subgraphs' work), < 0 when one has none. */
static double cf_graph_est(pstate *s, const cf_scope *sc, int d, cf_note *note)
{
    const dev_instance *di = &s->p->devs->items[d];
    const gr_graph *g = sc->g;
    double t = 0;
    if (!di->dev.iface->estimate_ms)
        return -1;
    for (int pos = 0; pos < g->n_nodes; pos++) {
        const gr_node *nd = &g->nodes[g->order ? g->order[pos] : pos];
        tdm_node_desc desc;
        tdm_err local;
        int m = 0;
        err_clear(&local);
        if (plan_desc_build(&local, &s->p->arena, g, nd, &desc) != TDM_OK)
            return -1;
        double v = di->dev.iface->estimate_ms(di->dev.ctx, &desc, &m);
        double w = cf_node_est(s, sc, nd, d, note, NULL, 0);
        if (!(v >= 0 && isfinite(v)) || w < 0)
            return -1;
        note->modeled |= m != 0;
        t += v + w;
    }
    return t;
}

double plan_node_est(pstate *s, int n, int d, int *modeled)
{
    size_t k = (size_t)n * (size_t)s->D + (size_t)d;
    if (isnan(s->est[k])) {
        const dev_instance *di = &s->p->devs->items[d];
        int m = 0;
        double v = -1;
        if (di->dev.iface->estimate_ms && s->sup[k] == TDM_REASON_OK)
            v = di->dev.iface->estimate_ms(di->dev.ctx, &s->p->descs[n], &m);
        if (v >= 0 && isfinite(v) && node_has_subgraphs(&s->g->nodes[n])) {
            cf_scope top = {s->g, NULL, 0};
            cf_note note = {m, 0};
            char why[160];
            double w = cf_node_est(s, &top, &s->g->nodes[n], d, &note, why, sizeof why);
            v = w >= 0 ? v + w : -1;
            m = note.modeled;
            s->estunk[k] = note.unknown;
            s->estwhy[k] = v >= 0 ? plan_arena_strdup(&s->p->arena, why) : NULL;
        }
        s->est[k] = v >= 0 && isfinite(v) ? v : -1;
        s->estmod[k] = m != 0;
    }
    if (modeled)
        *modeled = s->estmod[k];
    return s->est[k];
}

double plan_part_est(const pstate *s, int d)
{
    if (d == s->cpu)
        return 0;
    const dev_ext *dx = s->p->devs->items[d].ext;
    if (dx && dx->partition_ms > 0)
        return dx->partition_ms;
    return s->cal_trip && s->cal_trip[d] > 0 ? s->cal_trip[d] : 0;
}

double plan_node_est_in(pstate *s, int n, int d, const int *head, int *modeled)
{
    int m = 0;
    double v = plan_node_est(s, n, d, &m);
    int fused_away = head && head[n] >= 0;
    if (d != s->cpu && v >= 0 && fused_away) {
        const dev_instance *di = &s->p->devs->items[d];
        if (di->ext && di->ext->fusion == DEV_FUSION_EPILOGUE) {
            double f = di->ext->estimate_fused_away_ms
                           ? di->ext->estimate_fused_away_ms(di->dev.ctx, &s->p->descs[n],
                                                             plan_fused_mem_inputs(s, n, head), &m)
                           : 0;
            v = f >= 0 && isfinite(f) ? f : v;
        }
    }
    if (d != s->cpu || v < 0 || s->p->opts.unfused) {
        if (modeled)
            *modeled = m;
        return v;
    }
    if (fused_away) {
        v = 0;
    } else if (s->fused && s->fused[n] >= 0 && !(s->whole_head && s->whole_head[n] >= 0)) {
        v = s->fused[n];
        m = 0;
    } else if (m && s->p->devs->items[d].ext && s->p->devs->items[d].ext->estimate_fused_ms &&
               !node_has_subgraphs(&s->g->nodes[n])) {
        const dev_instance *di = &s->p->devs->items[d];
        double f = di->ext->estimate_fused_ms(di->dev.ctx, &s->p->descs[n], &m);
        v = f >= 0 && isfinite(f) ? f : v;
    }
    if (modeled)
        *modeled = m;
    return v;
}

/* The calibration's measured copy of bytes on device d (dir 0: to it,
 * 1: to the host); < 0 when the file has none. */
static double cal_copy_est(const pstate *s, int d, int dir, size_t bytes)
{
    const double *c = s->cal_copy ? s->cal_copy + (size_t)d * 4 + (size_t)dir * 2 : NULL;
    return c && !isnan(c[0]) ? c[0] + c[1] * (double)bytes : -1;
}

double plan_copy_est(pstate *s, int from, int to, size_t bytes, int *modeled)
{
    double t = 0;
    int m = 0, any = 0;
    double cf = from != s->cpu ? cal_copy_est(s, from, 1, bytes) : -1, ct = to != s->cpu ? cal_copy_est(s, to, 0, bytes) : -1;
    if (from != s->cpu && !s->p->devs->items[from].dev.iface->copy_ms && cf >= 0) {
        t += cf;
        any = 1;
    }
    if (to != s->cpu && !s->p->devs->items[to].dev.iface->copy_ms && ct >= 0) {
        t += ct;
        any = 1;
    }
    if (from != s->cpu) {
        const dev_instance *di = &s->p->devs->items[from];
        if (di->dev.iface->copy_ms) {
            int mm = 0;
            double v = di->dev.iface->copy_ms(di->dev.ctx, bytes, 0, &mm);
            if (v >= 0 && isfinite(v)) {
                t += v;
                m |= mm;
                any = 1;
            }
        }
    }
    if (to != s->cpu) {
        const dev_instance *di = &s->p->devs->items[to];
        if (di->dev.iface->copy_ms) {
            int mm = 0;
            double v = di->dev.iface->copy_ms(di->dev.ctx, bytes, 1, &mm);
            if (v >= 0 && isfinite(v)) {
                t += v;
                m |= mm;
                any = 1;
            }
        }
    }
    *modeled = m;
    return any ? t : 0;
}

/* Puts node n on device d and rebuilds its rejected list and reason. */
tdm_status plan_assign(pstate *s, int n, int d)
{
    plan_node *pn = &s->p->nodes[n];
    int D = s->D;
    plan_reject *rj = plan_arr(s, (size_t)D + 1, sizeof *rj);
    if (!rj)
        return err_set(s->e, TDM_E_NOMEM, "out of memory");
    int k = 0;
    for (int e = 0; e < D; e++) {
        size_t i = (size_t)n * (size_t)D + (size_t)e;
        if (e == d)
            continue;
        if (e > d && !(s->pin[n] == e && s->sup[i] != TDM_REASON_OK))
            continue;
        rj[k].device = e;
        if (s->over[i] != TDM_REASON_OK) {
            rj[k].reason = s->over[i];
            rj[k].detail = s->overdet[i];
        } else if (s->sup[i] != TDM_REASON_OK) {
            rj[k].reason = s->sup[i];
            rj[k].detail = s->supdet[i];
        } else if (s->pin[n] >= 0) {
            rj[k].reason = TDM_REASON_USER;
            rj[k].detail = s->pinspec[n];
        } else {
            rj[k].reason = TDM_REASON_GRANULARITY;
            rj[k].detail = "";
        }
        k++;
    }
    pn->device = d;
    pn->rejected = rj;
    pn->n_rejected = k;
    if (s->pin[n] == d) {
        pn->reason = TDM_REASON_USER;
        pn->detail = s->pinspec[n];
    } else if (k && rj[0].device < d) {
        pn->reason = rj[0].reason;
        pn->detail = rj[0].detail;
    } else {
        pn->reason = TDM_REASON_OK;
        pn->detail = "";
    }
    return TDM_OK;
}

/* ------------------------------------------------------------- structure */

static tdm_status build_structure(pstate *s)
{
    const gr_graph *g = s->g;
    int N = s->N, V = s->V;
    int **imp = NULL;
    int *nimp = NULL;
    tdm_status st = TDM_OK;
    s->prod = plan_arr(s, (size_t)V, sizeof *s->prod);
    s->is_weight = plan_arr(s, (size_t)V, sizeof *s->is_weight);
    s->gpos = plan_arr(s, (size_t)N, sizeof *s->gpos);
    s->rd_start = plan_arr(s, (size_t)N + 1, sizeof *s->rd_start);
    s->cs_start = plan_arr(s, (size_t)V + 1, sizeof *s->cs_start);
    imp = mem_calloc((size_t)N + 1, sizeof *imp);
    nimp = mem_calloc((size_t)N + 1, sizeof *nimp);
    if (!s->prod || !s->is_weight || !s->gpos || !s->rd_start || !s->cs_start || !imp || !nimp)
        goto nomem;
    for (int v = 0; v < V; v++) {
        s->prod[v] = -1;
        s->is_weight[v] = g->values[v].init && !g->values[v].is_input;
    }
    for (int n = 0; n < N; n++)
        for (int o = 0; o < g->nodes[n].n_outputs; o++)
            if (g->nodes[n].outputs[o] >= 0)
                s->prod[g->nodes[n].outputs[o]] = n;
    for (int i = 0; i < N; i++)
        s->gpos[g->order ? g->order[i] : i] = i;
    /* distinct reads per node */
    size_t total = 0;
    for (int n = 0; n < N; n++) {
        if (node_has_subgraphs(&g->nodes[n]) && (nimp[n] = plan_implicit_inputs(g, &g->nodes[n], &imp[n])) < 0)
            goto nomem;
        if (mem_add(total, (size_t)g->nodes[n].n_inputs + (size_t)nimp[n], &total))
            goto nomem;
    }
    s->rd = plan_arr(s, total, sizeof *s->rd);
    if (!s->rd)
        goto nomem;
    int k = 0;
    for (int n = 0; n < N; n++) {
        const gr_node *node = &g->nodes[n];
        s->rd_start[n] = k;
        for (int i = 0; i < node->n_inputs + nimp[n]; i++) {
            int v = i < node->n_inputs ? node->inputs[i] : imp[n][i - node->n_inputs];
            int dup = v < 0;
            for (int j = s->rd_start[n]; !dup && j < k; j++)
                dup = s->rd[j] == v;
            if (!dup)
                s->rd[k++] = v;
        }
    }
    s->rd_start[N] = k;
    /* consumers */
    int *cnt = plan_arr(s, (size_t)V + 1, sizeof *cnt);
    s->cs = plan_arr(s, (size_t)k, sizeof *s->cs);
    if (!cnt || !s->cs)
        goto nomem;
    for (int j = 0; j < k; j++)
        s->cs_start[s->rd[j] + 1]++;
    for (int v = 0; v < V; v++)
        s->cs_start[v + 1] += s->cs_start[v];
    for (int n = 0; n < N; n++)
        for (int j = s->rd_start[n]; j < s->rd_start[n + 1]; j++) {
            int v = s->rd[j];
            s->cs[s->cs_start[v] + cnt[v]++] = n;
        }
    goto done;
nomem:
    st = err_set(s->e, TDM_E_NOMEM, "out of memory");
done:
    for (int n = 0; imp && n < N; n++)
        mem_free(imp[n]);
    mem_free(imp);
    mem_free(nimp);
    return st;
}

/* Node n reads or writes a value a plugin cannot hold. */
static int needs_host_device(const pstate *s, int n)
{
    const gr_node *node = &s->g->nodes[n];
    if (node_has_subgraphs(node))
        return 1;
    for (int i = 0; i < node->n_inputs; i++)
        if (node->inputs[i] >= 0 && s->g->values[node->inputs[i]].type.kind != TDM_KIND_TENSOR)
            return 1;
    for (int i = 0; i < node->n_outputs; i++)
        if (node->outputs[i] >= 0 && s->g->values[node->outputs[i]].type.kind != TDM_KIND_TENSOR)
            return 1;
    return 0;
}

/* A device compiled for a finite set of image sizes (dev_ext.image_sizes)
 * takes the model only when every float 4-D input of the main graph has one
 * of them as H x W: "" when it does (or the device lists none), else the
 * sentence every node gets there with SHAPE_UNSUPPORTED, in buf. */
static const char *image_size_refusal(const pstate *s, const dev_instance *di, char *buf, size_t size)
{
    const dev_ext *x = di->ext;
    if (!x || !x->n_image_sizes)
        return "";
    char list[160];
    size_t n = 0;
    list[0] = '\0';
    for (size_t k = 0; k < x->n_image_sizes && n < sizeof list; k++)
        n += (size_t)snprintf(list + n, sizeof list - n, "%s%lldx%lld", k ? ", " : "", (long long)x->image_sizes[k][0],
                              (long long)x->image_sizes[k][1]);
    for (int i = 0; i < s->g->n_inputs; i++) {
        const gr_value *v = &s->g->values[s->g->inputs[i]];
        if (v->type.kind != TDM_KIND_TENSOR || v->type.rank != 4 ||
            (v->type.dtype != TDM_FLOAT && v->type.dtype != TDM_FLOAT16))
            continue;
        int64_t h = v->type.dims[2].v, w = v->type.dims[3].v;
        int ok = 0;
        for (size_t k = 0; k < x->n_image_sizes && !ok; k++)
            ok = h == x->image_sizes[k][0] && w == x->image_sizes[k][1];
        if (ok)
            continue;
        if (h < 0 || w < 0)
            snprintf(buf, size, "%s runs the model only at the image sizes it was compiled for (%s); input '%s' has a "
                     "dynamic size: give --shape, or --bucket profile to pad images to those sizes",
                     di->name, list, v->name);
        else
            snprintf(buf, size, "%s runs the model only at the image sizes it was compiled for (%s); input '%s' is "
                     "%lldx%lld: --bucket profile pads it to the smallest that holds it",
                     di->name, list, v->name, (long long)h, (long long)w);
        return buf;
    }
    return "";
}

static tdm_status ask_devices(pstate *s)
{
    int N = s->N, D = s->D;
    size_t nd = (size_t)N * (size_t)D;
    s->sup = plan_arr(s, nd, sizeof *s->sup);
    s->supdet = plan_arr(s, nd, sizeof *s->supdet);
    s->over = plan_arr(s, nd, sizeof *s->over);
    s->overdet = plan_arr(s, nd, sizeof *s->overdet);
    s->est = plan_arr(s, nd, sizeof *s->est);
    s->estmod = plan_arr(s, nd, sizeof *s->estmod);
    s->estwhy = plan_arr(s, nd, sizeof *s->estwhy);
    s->estunk = plan_arr(s, nd, sizeof *s->estunk);
    if (!s->sup || !s->supdet || !s->over || !s->overdet || !s->est || !s->estmod || !s->estwhy || !s->estunk)
        return err_set(s->e, TDM_E_NOMEM, "out of memory");
    for (size_t i = 0; i < nd; i++)
        s->est[i] = NAN;
    /* a device compiled for fixed image sizes refuses every node alike:
     * its sentence once per device */
    const char **img = plan_arr(s, (size_t)D, sizeof *img);
    if (!img)
        return err_set(s->e, TDM_E_NOMEM, "out of memory");
    for (int d = 0; d < D; d++) {
        char buf[sizeof ((tdm_verdict *)0)->detail];
        img[d] = image_size_refusal(s, &s->p->devs->items[d], buf, sizeof buf);
        if (*img[d] && !(img[d] = plan_arena_strdup(&s->p->arena, buf)))
            return err_set(s->e, TDM_E_NOMEM, "out of memory");
    }
    int bad = -1, n_bad = 0;
    for (int pos = 0; pos < N; pos++) {
        int n = s->g->order ? s->g->order[pos] : pos;
        int first = -1;
        for (int d = 0; d < D; d++) {
            const dev_instance *di = &s->p->devs->items[d];
            size_t i = (size_t)n * (size_t)D + (size_t)d;
            tdm_verdict v;
            memset(&v, 0, sizeof v);
            if (*img[d]) {
                v.reason = TDM_REASON_SHAPE_UNSUPPORTED;
                snprintf(v.detail, sizeof v.detail, "%s", img[d]);
            } else if (!di->ext && needs_host_device(s, n)) {
                v.reason = TDM_REASON_OP_UNSUPPORTED;
                snprintf(v.detail, sizeof v.detail, "%s runs through the device ABI, which takes tensor nodes without subgraphs only",
                         di->name);
            } else {
                v.reason = di->dev.iface->supports(di->dev.ctx, &s->p->descs[n], &v);
                v.detail[sizeof v.detail - 1] = '\0';
                if ((int)v.reason < 0 || (int)v.reason >= TDM_REASON_COUNT)
                    v.reason = TDM_REASON_OP_UNSUPPORTED;
            }
            s->sup[i] = v.reason;
            s->supdet[i] = "";
            if (v.reason != TDM_REASON_OK) {
                if (!v.detail[0])
                    snprintf(v.detail, sizeof v.detail, "%s cannot run %s (%s)", di->name, s->g->nodes[n].op_type,
                             tdm_reason_str(v.reason));
                if (!(s->supdet[i] = plan_arena_strdup(&s->p->arena, v.detail)))
                    return err_set(s->e, TDM_E_NOMEM, "out of memory");
            } else if (first < 0) {
                first = d;
            }
        }
        s->p->nodes[n].preferred = first;
        if (first < 0) {
            if (bad < 0)
                bad = n;
            n_bad++;
        }
    }
    if (bad >= 0) {
        char label[256];
        const char *why = s->supdet[(size_t)bad * (size_t)D + (size_t)s->cpu];
        if (n_bad > 1)
            return err_set(s->e, TDM_E_UNSUPPORTED, "node %s cannot run on any device (cpu: %s), nor can %d other nodes",
                           gr_node_label(&s->g->nodes[bad], label, sizeof label), why, n_bad - 1);
        return err_set(s->e, TDM_E_UNSUPPORTED, "node %s cannot run on any device (cpu: %s)",
                       gr_node_label(&s->g->nodes[bad], label, sizeof label), why);
    }
    return TDM_OK;
}

/* ------------------------------------------------------------- build */

/* The calibration file's measured device costs and cpu's fused times
 * (pstate cal_copy, cal_trip, fused); nothing without a file. */
static tdm_status load_calib_costs(pstate *s)
{
    tdm_plan *p = s->p;
    calib_data *c = NULL;
    tdm_status st;
    if (!p->opts.calibration)
        return TDM_OK;
    if ((st = calib_load(s->e, p->opts.calibration, &c)) != TDM_OK)
        return st;
    s->cal_copy = plan_arr(s, (size_t)s->D * 4, sizeof *s->cal_copy);
    s->cal_trip = plan_arr(s, (size_t)s->D, sizeof *s->cal_trip);
    s->fused = plan_arr(s, (size_t)s->N, sizeof *s->fused);
    if (!s->cal_copy || !s->cal_trip || !s->fused) {
        calib_free(c);
        return err_set(s->e, TDM_E_NOMEM, "out of memory");
    }
    for (int d = 0; d < s->D; d++) {
        calib_dev_costs dc;
        int have = d != s->cpu && calib_device_costs(c, p->devs->items[d].name, &dc);
        double *cc = s->cal_copy + (size_t)d * 4;
        cc[0] = have && dc.has_copy ? dc.to_device_copy_ms : NAN;
        cc[1] = have && dc.has_copy ? dc.to_device_byte_ms : NAN;
        cc[2] = have && dc.has_copy ? dc.to_host_copy_ms : NAN;
        cc[3] = have && dc.has_copy ? dc.to_host_byte_ms : NAN;
        s->cal_trip[d] = have ? dc.round_trip_ms : -1;
    }
    for (int n = 0; n < s->N; n++) {
        char key[128];
        double ms;
        s->fused[n] = -1;
        if ((st = plan_node_signature(s->e, &p->descs[n], 1, key, sizeof key, NULL)) != TDM_OK) {
            calib_free(c);
            return st;
        }
        if (s->sup[(size_t)n * (size_t)s->D + (size_t)s->cpu] == TDM_REASON_OK && calib_find_fused(c, key, &ms) && ms >= 0)
            s->fused[n] = ms;
    }
    calib_free(c);
    return TDM_OK;
}

tdm_status plan_build(tdm_err *e, const tdm_model *model, const plan_options *opts, dev_list *devs, tdm_plan **out)
{
    tdm_status st;
    *out = NULL;
    if (!devs || devs->n == 0) {
        dev_list_close(devs);
        return err_set(e, TDM_E_INTERNAL, "the planner was given no devices");
    }
    tdm_plan *p = mem_calloc(1, sizeof *p);
    if (!p) {
        dev_list_close(devs);
        return err_set(e, TDM_E_NOMEM, "out of memory");
    }
    p->devs = devs;
    p->model = model;
    p->g = model->gm->main;
    plan_arena_init(&p->arena);
    if (plan_options_copy(opts, &p->opts)) {
        plan_free(p);
        return err_set(e, TDM_E_NOMEM, "out of memory");
    }
    if ((st = plan_resolve_fallback(e, p)) != TDM_OK) {
        plan_free(p);
        return st;
    }
    if ((st = plan_rescue_run(e, p)) != TDM_OK) {
        plan_free(p);
        return st;
    }
    const gr_graph *g = p->g;
    pstate s;
    memset(&s, 0, sizeof s);
    s.e = e;
    s.p = p;
    s.g = g;
    s.N = g->n_nodes;
    s.D = (int)devs->n;
    s.V = g->n_values;
    s.cpu = s.D - 1;
    p->n_nodes = s.N;
    p->descs = plan_arr(&s, (size_t)s.N, sizeof *p->descs);
    p->nodes = plan_arr(&s, (size_t)s.N, sizeof *p->nodes);
    p->order = plan_arr(&s, (size_t)s.N, sizeof *p->order);
    p->parts = plan_arr(&s, (size_t)s.N, sizeof *p->parts);
    s.brk = plan_arr(&s, (size_t)s.N, sizeof *s.brk);
    s.stamp = plan_arr(&s, (size_t)s.V, sizeof *s.stamp);
    s.rs = plan_arr(&s, (size_t)s.V * (size_t)s.D, sizeof *s.rs);
    s.re = plan_arr(&s, (size_t)s.V * (size_t)s.D, sizeof *s.re);
    s.vbytes = plan_arr(&s, (size_t)s.V, sizeof *s.vbytes);
    s.vknown = plan_arr(&s, (size_t)s.V, sizeof *s.vknown);
    s.diff = plan_arr(&s, (size_t)s.N + 1, sizeof *s.diff);
    if (!p->descs || !p->nodes || !p->order || !p->parts || !s.brk || !s.stamp || !s.rs || !s.re || !s.vbytes || !s.vknown || !s.diff) {
        plan_free(p);
        return err_set(e, TDM_E_NOMEM, "out of memory");
    }
    for (int v = 0; v < s.V; v++)
        s.vbytes[v] = plan_value_bytes(g, v, &s.vknown[v]);
    for (int n = 0; n < s.N; n++)
        if ((st = plan_desc_build(e, &p->arena, g, &g->nodes[n], &p->descs[n])) != TDM_OK)
            goto fail;
    if ((st = build_structure(&s)) != TDM_OK || (st = ask_devices(&s)) != TDM_OK || (st = plan_apply_precision(&s)) != TDM_OK ||
        (st = load_calib_costs(&s)) != TDM_OK || (plan_apply_measured(&s), (st = plan_apply_pins(&s)) != TDM_OK) ||
        (st = plan_initial_placement(&s)) != TDM_OK)
        goto fail;
    if ((st = p->opts.granularity == PLAN_GRAN_AUTO ? plan_auto_best(&s) : plan_place(&s, p->opts.granularity)) != TDM_OK)
        goto fail;
    plan_rescue_mark(p);
    if ((st = plan_check_acyclic(&s)) != TDM_OK || (st = plan_make_copies(&s)) != TDM_OK)
        goto fail;
    if ((st = plan_summarize(&s)) != TDM_OK || (st = plan_check_policy(&s)) != TDM_OK)
        goto fail;
    *out = p;
    return TDM_OK;
fail:
    plan_free(p);
    return st;
}

void plan_free(tdm_plan *p)
{
    if (!p)
        return;
    dev_list_close(p->devs);
    plan_rescue_free(p->rescue); /* its model views own_model's constants */
    tdm_model_destroy(p->own_model);
    plan_options_free(&p->opts);
    mem_free(p->copies);
    mem_free(p->violations);
    mem_free(p->precision);
    plan_arena_free(&p->arena);
    mem_free(p);
}
