/* Loop unrolling (unroll_loop.h). */
#include "graph/unroll_loop.h"
#include "core/mem.h"
#include "graph/rebuild.h"

#include <stdio.h>
#include <string.h>

void gr_unroll_free(gr_unroll *x)
{
    if (!x)
        return;
    tdm_model_destroy(x->model);
    for (int k = 0; k < x->n_loops; k++) {
        mem_free(x->loops[k].node);
        mem_free(x->loops[k].why);
    }
    mem_free(x->loops);
    memset(x, 0, sizeof *x);
}

static char *joined(const char *a, const char *b, int i)
{
    size_t len = strlen(a) + strlen(b) + 40;
    char *s = mem_alloc(len);
    if (s)
        snprintf(s, len, "%s/unroll/%d/%s", a, i, b);
    return s;
}

static const gr_graph *body_of(const gr_node *n)
{
    for (int a = 0; a < n->n_attrs; a++)
        if (n->attrs[a].type == GA_GRAPH && strcmp(n->attrs[a].name, "body") == 0)
            return n->attrs[a].g;
    return NULL;
}

/* A constant scalar of g (or of s for an outer value of b): 1 and *v, else 0. */
static int const_scalar(const gr_graph *g, int v, double *out)
{
    if (v < 0)
        return 0;
    const gr_value *x = &g->values[v];
    if (!x->init || x->is_input || x->init->kind != TDM_KIND_TENSOR || x->init->count != 1)
        return 0;
    *out = tensor_get_f64(x->init, 0);
    return 1;
}

static int same_static(const gr_type *a, const gr_type *b)
{
    if (gr_type_static_dims(a, NULL) || gr_type_static_dims(b, NULL) || a->dtype != b->dtype || a->rank != b->rank)
        return 0;
    for (int d = 0; d < a->rank; d++)
        if (a->dims[d].v != b->dims[d].v)
            return 0;
    return 1;
}

/* Why Loop node n of s cannot be unrolled (NULL: it can; *trips set;
 * *computed set when its body computes its condition: each copy's must
 * then fold to a constant). */
static const char *why_not(const gr_graph *s, const gr_node *n, int64_t max_trips, int64_t *trips, int *computed,
                           char *buf, size_t cap)
{
    const gr_graph *b = body_of(n);
    double v;
    *trips = -1;
    *computed = 0;
    if (!b)
        return "it has no body";
    int n_carried = n->n_inputs - 2;
    if (n_carried < 0 || b->n_inputs != n_carried + 2 || b->n_outputs < n_carried + 1)
        return "its body's inputs and outputs do not match its own";
    if (n->n_inputs < 1 || n->inputs[0] < 0 || !const_scalar(s, n->inputs[0], &v))
        return "its trip count M is not a constant at plan time (bind the input it comes from)";
    *trips = (int64_t)v;
    if (*trips < 1 || *trips > max_trips) {
        snprintf(buf, cap, "its trip count %lld is not within 1..%lld (the device's unroll_loops)",
                 (long long)*trips, (long long)max_trips);
        return buf;
    }
    if (n->n_inputs > 1 && n->inputs[1] >= 0 && !(const_scalar(s, n->inputs[1], &v) && v != 0))
        return "its condition input is neither empty nor a constant true";
    int co = b->outputs[0];
    for (int hops = 0; hops < b->n_nodes && co >= 0 && b->values[co].producer >= 0; hops++) {
        const gr_node *pn = &b->nodes[b->values[co].producer];
        if (strcmp(pn->op_type, "Identity") != 0 || pn->n_inputs < 1)
            break;
        co = pn->inputs[0]; /* cond_out = Identity(cond_in), as exporters write it */
    }
    if (co < 0)
        return "its body's condition output is empty";
    int co_true = co == b->inputs[1] || (const_scalar(b, co, &v) && v != 0);
    if (!co_true && b->values[co].outer) {
        int ov = gr_value_find(s, b->values[co].name);
        co_true = const_scalar(s, ov, &v) && v != 0;
    }
    *computed = !co_true;
    for (int k = 0; k < b->n_nodes; k++)
        for (int a = 0; a < b->nodes[k].n_attrs; a++)
            if (b->nodes[k].attrs[a].type == GA_GRAPH || b->nodes[k].attrs[a].type == GA_GRAPHS)
                return "its body holds a subgraph";
    for (int j = 0; j < n_carried; j++) {
        const gr_type *init = n->inputs[2 + j] >= 0 ? &s->values[n->inputs[2 + j]].type : NULL;
        const gr_type *bin = &b->values[b->inputs[2 + j]].type, *bout = &b->values[b->outputs[1 + j]].type;
        if (!init || j >= n->n_outputs || n->outputs[j] < 0 ||
            !(same_static(init, &s->values[n->outputs[j]].type) || (same_static(init, bin) && same_static(bin, bout)))) {
            snprintf(buf, cap, "its carried value #%d does not keep a known static shape", j);
            return buf;
        }
    }
    return NULL;
}

/* A constant of g: a scalar (rank 0) or a one-element vector (rank 1). */
static tdm_status const_value(tdm_err *e, gr_graph *g, const char *name, tdm_dtype dt, double v, int rank)
{
    int id;
    int64_t one = 1;
    tdm_status st = gr_value_get(e, g, name, &id);
    if (st)
        return st;
    gr_value *c = &g->values[id];
    if ((st = tensor_new(e, dt, rank, &one, &c->init)) != TDM_OK)
        return st;
    tensor_set_f64(c->init, 0, v);
    c->is_initializer = 1;
    gr_type_from_tensor(&c->type, c->init);
    c->has_type = 1;
    return TDM_OK;
}

/* Scan output k of Loop n: each iteration's value (names[i]) with a new
 * axis 0 (Unsqueeze), concatenated along it into the Loop's output. */
static tdm_status scan_output(tdm_err *e, gr_graph *g, const gr_graph *s, const gr_node *n, int k, char **names,
                              int64_t trips, int64_t opset)
{
    int o = n->n_inputs - 2 + k, idx;
    char axes[300], name[300], **parts = mem_calloc((size_t)trips + 1, sizeof *parts);
    const char *out = s->values[n->outputs[o]].name;
    tdm_status st = TDM_OK;
    gr_attr *a;
    if (!parts)
        return err_set(e, TDM_E_NOMEM, "out of memory");
    snprintf(axes, sizeof axes, "%s/unroll/axes", n->name);
    if (opset >= 13 && gr_value_find(g, axes) < 0 && (st = const_value(e, g, axes, TDM_INT64, 0, 1)) != TDM_OK)
        goto done;
    for (int64_t i = 0; i < trips; i++) {
        const char *in[2] = {names[i], axes};
        snprintf(name, sizeof name, "%s/unroll/%lld/scan_%d", n->name, (long long)i, k);
        if (!(parts[i] = mem_strdup(name))) {
            st = err_set(e, TDM_E_NOMEM, "out of memory");
            goto done;
        }
        if ((st = gr_node_add(e, g, name, "Unsqueeze", "", opset >= 13 ? 2 : 1, in, 1, (const char *const *)&parts[i],
                              &idx)) != TDM_OK)
            goto done;
        if (opset < 13) {
            if (!(a = gr_attr_add(e, g, idx, "axes")) || !(a->ints = mem_calloc(1, sizeof *a->ints))) {
                st = err_set(e, TDM_E_NOMEM, "out of memory");
                goto done;
            }
            a->type = GA_INTS;
            a->n = 1;
        }
    }
    snprintf(name, sizeof name, "%s/unroll/scan_%d", n->name, k);
    if ((st = gr_node_add(e, g, name, "Concat", "", (int)trips, (const char *const *)parts, 1, &out, &idx)) != TDM_OK)
        goto done;
    if (!(a = gr_attr_add(e, g, idx, "axis"))) {
        st = err_set(e, TDM_E_NOMEM, "out of memory");
        goto done;
    }
    a->type = GA_INT;
    a->i = 0;
done:
    for (int64_t i = 0; i < trips; i++)
        mem_free(parts[i]);
    mem_free(parts);
    return st;
}

/* M copies of Loop n's body (of s) into g (rules in unroll_loop.h);
 * conds (trips entries, or NULL) receives each copy's condition output's
 * name: a probe, the copies' results left unread (the Loop, copied too,
 * makes its outputs, so that a declared scan length holds). */
static tdm_status unroll(tdm_err *e, gr_graph *g, const gr_graph *s, const gr_node *n, int64_t trips, int64_t opset,
                         char **conds)
{
    const gr_graph *b = body_of(n);
    int n_carried = n->n_inputs - 2, n_scan = b->n_outputs - 1 - n_carried;
    char **cur = mem_calloc((size_t)n_carried + 1, sizeof *cur);
    char **scan = mem_calloc((size_t)n_scan * (size_t)trips + 1, sizeof *scan);
    gr_names m = {0};
    tdm_status st = TDM_OK;
    int id;
    if (!cur || !scan)
        goto nomem;
    for (int j = 0; j < n_carried; j++)
        if (!(cur[j] = mem_strdup(s->values[n->inputs[2 + j]].name)))
            goto nomem;
    for (int i = 0; i < (int)trips; i++) {
        m.n = b->n_values;
        if (!(m.to = mem_calloc((size_t)b->n_values + 1, sizeof *m.to)))
            goto nomem;
        for (int v = 0; v < b->n_values; v++) {
            const gr_value *x = &b->values[v];
            if (!x->outer && !(m.to[v] = joined(n->name, x->name, i)))
                goto nomem;
        }
        mem_free(m.to[b->inputs[0]]);
        mem_free(m.to[b->inputs[1]]);
        if (!(m.to[b->inputs[0]] = joined(n->name, "iter", i)) || !(m.to[b->inputs[1]] = joined(n->name, "cond", i)))
            goto nomem;
        if ((st = const_value(e, g, m.to[b->inputs[0]], TDM_INT64, i, 0)) != TDM_OK ||
            (st = const_value(e, g, m.to[b->inputs[1]], TDM_BOOL, 1, 0)) != TDM_OK)
            goto done;
        for (int j = 0; j < n_carried; j++) {
            mem_free(m.to[b->inputs[2 + j]]);
            m.to[b->inputs[2 + j]] = cur[j];
            cur[j] = NULL;
        }
        for (int v = 0; v < b->n_values; v++)
            if (b->values[v].init && !b->values[v].is_input && !b->values[v].outer &&
                (st = gr_rw_take_value(e, g, b, v, m.to[v], &id)) != TDM_OK)
                goto done;
        gr_rw_names map = {gr_names_get, &m};
        for (int k = 0; k < b->n_nodes; k++) {
            const gr_node *x = &b->nodes[b->order ? b->order[k] : k];
            char name[512];
            if (x->name && *x->name)
                snprintf(name, sizeof name, "%s/unroll/%d/%s", n->name, i, x->name);
            else
                snprintf(name, sizeof name, "%s/unroll/%d/%s_%d", n->name, i, x->op_type, k);
            if ((st = gr_rw_copy_node(e, g, b, x, name, &map)) != TDM_OK)
                goto done;
        }
        int bc = b->outputs[0];
        if (conds && !conds[i] && !(conds[i] = mem_strdup(m.to[bc] ? m.to[bc] : b->values[bc].name)))
            goto nomem;
        for (int j = 0; j < n_carried + n_scan; j++) {
            int bv = b->outputs[1 + j];
            char **to = j < n_carried ? &cur[j] : &scan[(size_t)(j - n_carried) * (size_t)trips + (size_t)i];
            if (!(*to = mem_strdup(m.to[bv] ? m.to[bv] : b->values[bv].name)))
                goto nomem;
        }
        gr_names_free(&m);
    }
    if (conds)
        goto done; /* a probe of the conditions: the Loop itself still makes its outputs */
    for (int j = 0; j < n_carried && j < n->n_outputs; j++) {
        if (n->outputs[j] < 0)
            continue;
        const char *in = cur[j], *out = s->values[n->outputs[j]].name;
        char name[512];
        int idx;
        snprintf(name, sizeof name, "%s/unroll/output_%d", n->name, j);
        if ((st = gr_node_add(e, g, name, "Identity", "", 1, &in, 1, &out, &idx)) != TDM_OK)
            goto done;
    }
    for (int k = 0; k < n_scan; k++)
        if (n_carried + k < n->n_outputs && n->outputs[n_carried + k] >= 0 &&
            (st = scan_output(e, g, s, n, k, &scan[(size_t)k * (size_t)trips], trips, opset)) != TDM_OK)
            goto done;
    goto done;
nomem:
    st = err_set(e, TDM_E_NOMEM, "out of memory");
done:
    gr_names_free(&m);
    for (int j = 0; cur && j < n_carried; j++)
        mem_free(cur[j]);
    for (size_t j = 0; scan && j < (size_t)n_scan * (size_t)trips; j++)
        mem_free(scan[j]);
    mem_free(cur);
    mem_free(scan);
    return st;
}

/* s's main graph with the Loops whose trips[n] > 0 unrolled, as a raw
 * model; conds[n] (or NULL) receives Loop n's condition names (a probe:
 * the copies beside the Loop). */
static tdm_status unrolled_model(tdm_err *e, const tdm_model *src, const int64_t *trips, char ***conds,
                                 gr_model **out)
{
    const gr_graph *s = src->gm->main;
    gr_graph *g;
    tdm_status st = gr_rebuild_begin(e, src->gm, out, &g);
    for (int k = 0; !st && k < s->n_nodes; k++) {
        int n = s->order ? s->order[k] : k;
        char **probe = conds ? conds[n] : NULL;
        st = trips[n] > 0 ? unroll(e, g, s, &s->nodes[n], trips[n], gr_opset_version(src->gm, ""), probe)
                          : gr_rw_copy_node(e, g, s, &s->nodes[n], NULL, NULL);
        if (!st && trips[n] > 0 && probe)
            st = gr_rw_copy_node(e, g, s, &s->nodes[n], NULL, NULL);
    }
    if (!st)
        st = gr_rebuild_end(e, s, g);
    if (st) {
        gr_model_free(*out);
        *out = NULL;
    }
    return st;
}

/* How many copies of a Loop with a computed condition run, from the model
 * built with all M (g): up to the first whose condition folded to false,
 * or M; -1 (why in buf) when one before it is not a constant. */
static int64_t runs_of(const gr_graph *g, char **conds, int64_t trips, char *buf, size_t cap)
{
    for (int64_t i = 0; i < trips; i++) {
        int v = gr_value_find(g, conds[i]);
        double c;
        if (!const_scalar(g, v, &c)) {
            snprintf(buf, cap,
                     "its body computes its condition and it is not a constant at plan time in iteration %lld",
                     (long long)i);
            return -1;
        }
        if (c == 0)
            return i + 1;
    }
    return trips;
}

static void free_conds(char ***conds, int n_nodes, const int64_t *trips)
{
    for (int n = 0; conds && n < n_nodes; n++) {
        for (int64_t i = 0; conds[n] && i < trips[n]; i++)
            mem_free(conds[n][i]);
        mem_free(conds[n]);
    }
    mem_free(conds);
}

tdm_status gr_unroll_loops(tdm_err *e, const tdm_model *m, int64_t max_trips, gr_unroll *out)
{
    const gr_graph *s = m->gm->main;
    int64_t *trips = NULL, *first = NULL;
    char ***conds = NULL;
    gr_model *gm = NULL;
    tdm_status st = TDM_OK;
    int any = 0, computed_any = 0;
    memset(out, 0, sizeof *out);
    if (!(trips = mem_calloc((size_t)s->n_nodes + 1, sizeof *trips)) ||
        !(first = mem_calloc((size_t)s->n_nodes + 1, sizeof *first)) ||
        !(conds = mem_calloc((size_t)s->n_nodes + 1, sizeof *conds)))
        goto nomem;
    for (int n = 0; n < s->n_nodes; n++) {
        const gr_node *x = &s->nodes[n];
        char buf[160];
        int computed = 0;
        if (strcmp(x->op_type, "Loop") != 0 || *x->domain)
            continue;
        gr_unrolled *grown = mem_realloc(out->loops, ((size_t)out->n_loops + 1) * sizeof *grown);
        if (!grown)
            goto nomem;
        out->loops = grown;
        gr_unrolled *r = &out->loops[out->n_loops++];
        memset(r, 0, sizeof *r);
        const char *why = why_not(s, x, max_trips, &r->trips, &computed, buf, sizeof buf);
        if (!(r->node = mem_strdup(x->name)) || (why && !(r->why = mem_strdup(why))))
            goto nomem;
        if (!why) {
            trips[n] = first[n] = r->runs = r->trips;
            r->n_nodes = (int)r->trips * body_of(x)->n_nodes + (x->n_inputs - 2);
            if (computed && !(conds[n] = mem_calloc((size_t)r->trips + 1, sizeof *conds[n])))
                goto nomem;
            computed_any |= computed;
            any = 1;
        }
    }
    if (any && ((st = unrolled_model(e, m, trips, conds, &gm)) != TDM_OK ||
                (st = model_build(e, gm, m->gm->path ? m->gm->path : "unroll", &out->model)) != TDM_OK))
        goto fail;
    if (computed_any) {
        /* each copy's condition in the probe: stop at the first false, or leave the Loop alone; then the
         * model again without the probe */
        int left = 0;
        for (int n = 0, k = 0; n < s->n_nodes; n++) {
            if (strcmp(s->nodes[n].op_type, "Loop") != 0 || *s->nodes[n].domain)
                continue;
            gr_unrolled *r = &out->loops[k++];
            char buf[160];
            if (conds[n]) {
                int64_t runs = runs_of(out->model->gm->main, conds[n], trips[n], buf, sizeof buf);
                trips[n] = r->runs = runs > 0 ? runs : 0;
                r->n_nodes = runs > 0 ? (int)runs * body_of(&s->nodes[n])->n_nodes + (s->nodes[n].n_inputs - 2) : 0;
                if (runs < 0 && !(r->why = mem_strdup(buf)))
                    goto nomem;
            }
            left |= trips[n] > 0;
        }
        tdm_model_destroy(out->model);
        out->model = NULL;
        if (left && ((st = unrolled_model(e, m, trips, NULL, &gm)) != TDM_OK ||
                     (st = model_build(e, gm, m->gm->path ? m->gm->path : "unroll", &out->model)) != TDM_OK))
            goto fail;
    }
    free_conds(conds, s->n_nodes, first);
    mem_free(trips);
    mem_free(first);
    return TDM_OK;
nomem:
    st = err_set(e, TDM_E_NOMEM, "out of memory");
fail:
    free_conds(conds, s ? s->n_nodes : 0, first);
    mem_free(trips);
    mem_free(first);
    gr_unroll_free(out);
    return st;
}
