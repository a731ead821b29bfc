/* Graph rewrites: building them, and models with them in place (rewrite.h). */
#include "graph/rewrite.h"
#include "core/mem.h"
#include "graph/qdq.h"

#include <stdio.h>
#include <string.h>

const char *gr_rw_kind_str(gr_rw_kind k)
{
    switch (k) {
    case GR_RW_DECOMPOSE:
        return "decompose";
    case GR_RW_FUSE:
        return "fuse";
    case GR_RW_APPROX:
        return "approximate";
    case GR_RW_DTYPE:
        return "dtype";
    }
    return "?";
}

void gr_rw_init(gr_rw *r, const char *rule, gr_rw_kind kind)
{
    memset(r, 0, sizeof *r);
    r->rule = rule;
    r->kind = kind;
}

void gr_rw_free(gr_rw *r)
{
    if (!r)
        return;
    for (int k = 0; k < r->n_nodes; k++) {
        for (int i = 0; i < r->nodes[k].n_in; i++)
            mem_free(r->nodes[k].in[i]);
        for (int i = 0; i < r->nodes[k].n_out; i++)
            mem_free(r->nodes[k].out[i]);
    }
    mem_free(r->nodes);
    for (int k = 0; k < r->n_consts; k++) {
        mem_free(r->cnames[k]);
        tdm_tensor_destroy(r->cvals[k]);
    }
    mem_free(r->cnames);
    mem_free(r->cvals);
    const char *rule = r->rule;
    gr_rw_kind kind = r->kind;
    gr_rw_init(r, rule, kind);
}

/* ------------------------------------------------------------- building */

const char *gr_rw_tmp(gr_rw *r, const gr_graph *g, char *buf, size_t size)
{
    const char *base = r->n_orig ? g->nodes[r->orig[0]].name : "rw";
    snprintf(buf, size, "%.150s/rescue/%d", base, r->counter++);
    return buf;
}

gr_rw_node *gr_rw_node_add(gr_rw *r, const char *op, int n_in, const char *const *in, int n_out,
                           const char *const *out)
{
    size_t cap = (size_t)r->cap_nodes;
    if (n_in > GR_RW_MAX_IO || n_out > GR_RW_MAX_IO ||
        mem_grow((void **)&r->nodes, &cap, (size_t)r->n_nodes + 1, sizeof *r->nodes))
        return NULL;
    r->cap_nodes = (int)cap;
    gr_rw_node *n = &r->nodes[r->n_nodes];
    memset(n, 0, sizeof *n);
    snprintf(n->op, sizeof n->op, "%s", op);
    for (int i = 0; i < n_in; i++) {
        if (!(n->in[i] = mem_strdup(in[i] ? in[i] : "")))
            goto fail;
        n->n_in = i + 1;
    }
    for (int i = 0; i < n_out; i++) {
        if (!(n->out[i] = mem_strdup(out[i] ? out[i] : "")))
            goto fail;
        n->n_out = i + 1;
    }
    r->n_nodes++;
    return n;
fail:
    for (int i = 0; i < n->n_in; i++)
        mem_free(n->in[i]);
    for (int i = 0; i < n->n_out; i++)
        mem_free(n->out[i]);
    return NULL;
}

static gr_rw_attr *attr_new(gr_rw_node *n, const char *name, gr_attr_type type)
{
    if (!n || n->n_attrs >= GR_RW_MAX_ATTRS)
        return NULL;
    gr_rw_attr *a = &n->attrs[n->n_attrs++];
    memset(a, 0, sizeof *a);
    snprintf(a->name, sizeof a->name, "%s", name);
    a->type = type;
    return a;
}

void gr_rw_attr_int(gr_rw_node *n, const char *name, int64_t v)
{
    gr_rw_attr *a = attr_new(n, name, GA_INT);
    if (a)
        a->i = v;
}

void gr_rw_attr_float(gr_rw_node *n, const char *name, float v)
{
    gr_rw_attr *a = attr_new(n, name, GA_FLOAT);
    if (a)
        a->f = v;
}

void gr_rw_attr_str(gr_rw_node *n, const char *name, const char *v)
{
    gr_rw_attr *a = attr_new(n, name, GA_STRING);
    if (a)
        snprintf(a->s, sizeof a->s, "%s", v);
}

void gr_rw_attr_ints(gr_rw_node *n, const char *name, int n_v, const int64_t *v)
{
    gr_rw_attr *a = attr_new(n, name, GA_INTS);
    if (!a)
        return;
    a->n = n_v < TDM_MAX_RANK ? n_v : TDM_MAX_RANK;
    for (int k = 0; k < a->n; k++)
        a->ints[k] = v[k];
}

static int add_const(gr_rw *r, const gr_graph *g, tdm_tensor *t, char *name, size_t size)
{
    size_t cap = (size_t)r->cap_consts;
    size_t cap2 = cap;
    char buf[200];
    gr_rw_tmp(r, g, buf, sizeof buf);
    if (mem_grow((void **)&r->cnames, &cap, (size_t)r->n_consts + 1, sizeof *r->cnames) ||
        mem_grow((void **)&r->cvals, &cap2, (size_t)r->n_consts + 1, sizeof *r->cvals)) {
        tdm_tensor_destroy(t);
        return -1;
    }
    r->cap_consts = (int)(cap < cap2 ? cap : cap2);
    if (!(r->cnames[r->n_consts] = mem_strdup(buf))) {
        tdm_tensor_destroy(t);
        return -1;
    }
    r->cvals[r->n_consts++] = t;
    snprintf(name, size, "%s", buf);
    return 0;
}

int gr_rw_const(gr_rw *r, const gr_graph *g, tdm_dtype dtype, int rank, const int64_t *dims, const double *vals,
                char *name, size_t size)
{
    tdm_tensor *t = NULL;
    if (tensor_new(NULL, dtype, rank, dims, &t))
        return -1;
    size_t n = tdm_tensor_count(t);
    for (size_t k = 0; k < n; k++)
        tensor_set_f64(t, k, vals[k]);
    return add_const(r, g, t, name, size);
}

int gr_rw_const_i64(gr_rw *r, const gr_graph *g, int n, const int64_t *vals, char *name, size_t size)
{
    tdm_tensor *t = NULL;
    int64_t dims[1] = {n};
    if (tensor_new(NULL, TDM_INT64, 1, dims, &t))
        return -1;
    for (int k = 0; k < n; k++)
        tensor_set_i64(t, (size_t)k, vals[k]);
    return add_const(r, g, t, name, size);
}

/* ------------------------------------------------------------- copying */

static void copy_type(gr_model *m, gr_type *dst, const gr_type *src)
{
    *dst = *src;
    for (int d = 0; d < src->rank && d < TDM_MAX_RANK; d++)
        if (src->dims[d].sym)
            dst->dims[d].sym = gr_intern(m, src->dims[d].sym);
}

static tdm_status clone_graph(tdm_err *e, gr_model *m, gr_graph *parent, const gr_graph *src, const gr_rw *const *rws,
                              int n_rws, gr_graph **out);

static tdm_status copy_attr(tdm_err *e, gr_model *m, gr_graph *g, gr_attr *d, const gr_attr *s)
{
    tdm_status st = TDM_OK;
    d->type = s->type;
    d->f = s->f;
    d->i = s->i;
    d->n = s->n;
    copy_type(m, &d->tp, &s->tp);
    if (s->s) {
        if (!(d->s = mem_alloc(s->s_len + 1)))
            return err_set(e, TDM_E_NOMEM, "out of memory");
        memcpy(d->s, s->s, s->s_len + 1);
        d->s_len = s->s_len;
    }
    if (s->t && (st = tensor_clone(e, s->t, &d->t)) != TDM_OK)
        return st;
    if (s->g && (st = clone_graph(e, m, g, s->g, NULL, 0, &d->g)) != TDM_OK)
        return st;
    if (s->floats) {
        if (!(d->floats = mem_calloc(s->n + 1, sizeof *d->floats)))
            return err_set(e, TDM_E_NOMEM, "out of memory");
        memcpy(d->floats, s->floats, s->n * sizeof *d->floats);
    }
    if (s->ints) {
        if (!(d->ints = mem_calloc(s->n + 1, sizeof *d->ints)))
            return err_set(e, TDM_E_NOMEM, "out of memory");
        memcpy(d->ints, s->ints, s->n * sizeof *d->ints);
    }
    if (s->strings) {
        if (!(d->strings = mem_calloc(s->n + 1, sizeof *d->strings)) ||
            !(d->string_lens = mem_calloc(s->n + 1, sizeof *d->string_lens)))
            return err_set(e, TDM_E_NOMEM, "out of memory");
        for (size_t k = 0; k < s->n; k++) {
            size_t len = s->string_lens ? s->string_lens[k] : strlen(s->strings[k]);
            if (!(d->strings[k] = mem_alloc(len + 1)))
                return err_set(e, TDM_E_NOMEM, "out of memory");
            memcpy(d->strings[k], s->strings[k], len);
            d->strings[k][len] = '\0';
            d->string_lens[k] = len;
        }
    }
    if (s->tensors) {
        if (!(d->tensors = mem_calloc(s->n + 1, sizeof *d->tensors)))
            return err_set(e, TDM_E_NOMEM, "out of memory");
        for (size_t k = 0; k < s->n; k++)
            if (s->tensors[k] && (st = tensor_clone(e, s->tensors[k], &d->tensors[k])) != TDM_OK)
                return st;
    }
    if (s->graphs) {
        if (!(d->graphs = mem_calloc(s->n + 1, sizeof *d->graphs)))
            return err_set(e, TDM_E_NOMEM, "out of memory");
        for (size_t k = 0; k < s->n; k++)
            if (s->graphs[k] && (st = clone_graph(e, m, g, s->graphs[k], NULL, 0, &d->graphs[k])) != TDM_OK)
                return st;
    }
    return TDM_OK;
}

/* The value named name (NULL: src's name) in g, with src's type (when
 * declared or constant) and constant (a view). */
tdm_status gr_rw_take_value(tdm_err *e, gr_graph *g, const gr_graph *src, int sv, const char *name, int *id)
{
    const gr_value *s = &src->values[sv];
    tdm_status st = gr_value_get(e, g, name ? name : s->name, id);
    if (st)
        return st;
    gr_value *d = &g->values[*id];
    if (s->has_type || s->init || s->is_input) {
        copy_type(g->model, &d->type, &s->type);
        d->has_type = 1;
    }
    if (s->init && !d->init) {
        if ((st = tensor_view(e, s->init, &d->init)) != TDM_OK)
            return st;
        d->is_initializer = 1;
    }
    return TDM_OK;
}

static tdm_status take_value(tdm_err *e, gr_graph *g, const gr_graph *src, int sv, int *id)
{
    return gr_rw_take_value(e, g, src, sv, NULL, id);
}

tdm_status gr_rw_copy_node(tdm_err *e, gr_graph *g, const gr_graph *src, const gr_node *n, const char *name,
                           const gr_rw_names *map)
{
    const char *in[64], *out[64];
    const char **pin = in, **pout = out;
    tdm_status st = TDM_OK;
    int idx, id;
    if (n->n_inputs > 64)
        pin = mem_calloc((size_t)n->n_inputs, sizeof *pin);
    if (n->n_outputs > 64)
        pout = mem_calloc((size_t)n->n_outputs, sizeof *pout);
    if (!pin || !pout) {
        st = err_set(e, TDM_E_NOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < n->n_inputs; i++) {
        const char *to = n->inputs[i] >= 0 && map ? map->name(map->user, src, n->inputs[i]) : NULL;
        pin[i] = n->inputs[i] >= 0 ? (to ? to : src->values[n->inputs[i]].name) : "";
        if (n->inputs[i] >= 0 && (st = gr_rw_take_value(e, g, src, n->inputs[i], to, &id)) != TDM_OK)
            goto done;
    }
    for (int i = 0; i < n->n_outputs; i++) {
        const char *to = n->outputs[i] >= 0 && map ? map->name(map->user, src, n->outputs[i]) : NULL;
        pout[i] = n->outputs[i] >= 0 ? (to ? to : src->values[n->outputs[i]].name) : "";
    }
    if ((st = gr_node_add(e, g, name ? name : n->name, n->op_type, n->domain, n->n_inputs, pin, n->n_outputs, pout,
                          &idx)) != TDM_OK)
        goto done;
    for (int a = 0; a < n->n_attrs; a++) {
        gr_attr *d = gr_attr_add(e, g, idx, n->attrs[a].name);
        if (!d) {
            st = err_set(e, TDM_E_NOMEM, "out of memory");
            goto done;
        }
        if ((st = copy_attr(e, g->model, g, d, &n->attrs[a])) != TDM_OK)
            goto done;
    }
    if (n->qdq && !(g->nodes[idx].qdq = gr_qdq_clone(n->qdq)))
        st = err_set(e, TDM_E_NOMEM, "out of memory");
done:
    if (pin != in)
        mem_free(pin);
    if (pout != out)
        mem_free(pout);
    return st;
}

static tdm_status copy_node(tdm_err *e, gr_graph *g, const gr_graph *src, const gr_node *n)
{
    return gr_rw_copy_node(e, g, src, n, NULL, NULL);
}

static tdm_status emit_rw(tdm_err *e, gr_graph *g, const gr_graph *src, const gr_rw *r)
{
    tdm_status st;
    int id, idx;
    for (int k = 0; k < r->n_consts; k++) {
        if ((st = gr_value_get(e, g, r->cnames[k], &id)) != TDM_OK)
            return st;
        gr_value *v = &g->values[id];
        if ((st = tensor_clone(e, r->cvals[k], &v->init)) != TDM_OK)
            return st;
        v->is_initializer = 1;
        gr_type_from_tensor(&v->type, v->init);
        v->has_type = 1;
    }
    for (int k = 0; k < r->n_nodes; k++) {
        const gr_rw_node *n = &r->nodes[k];
        char name[256];
        for (int i = 0; i < n->n_in; i++) {
            int sv = n->in[i][0] ? gr_value_find(src, n->in[i]) : -1;
            if (sv >= 0 && (st = take_value(e, g, src, sv, &id)) != TDM_OK)
                return st;
        }
        snprintf(name, sizeof name, "%.150s/rescue/%s_%d", src->nodes[r->orig[0]].name, n->op, k);
        if ((st = gr_node_add(e, g, name, n->op, "", n->n_in, (const char *const *)n->in, n->n_out,
                              (const char *const *)n->out, &idx)) != TDM_OK)
            return st;
        for (int a = 0; a < n->n_attrs; a++) {
            const gr_rw_attr *s = &n->attrs[a];
            gr_attr *d = gr_attr_add(e, g, idx, s->name);
            if (!d)
                return err_set(e, TDM_E_NOMEM, "out of memory");
            d->type = s->type;
            d->i = s->i;
            d->f = s->f;
            if (s->type == GA_STRING) {
                if (!(d->s = mem_strdup(s->s)))
                    return err_set(e, TDM_E_NOMEM, "out of memory");
                d->s_len = strlen(s->s);
            }
            if (s->type == GA_INTS) {
                if (!(d->ints = mem_calloc((size_t)s->n + 1, sizeof *d->ints)))
                    return err_set(e, TDM_E_NOMEM, "out of memory");
                memcpy(d->ints, s->ints, (size_t)s->n * sizeof *d->ints);
                d->n = (size_t)s->n;
            }
        }
    }
    return TDM_OK;
}

static tdm_status set_io(tdm_err *e, gr_graph *g, const gr_graph *src, const int *ins, int n_ins, const int *outs,
                         int n_outs)
{
    tdm_status st;
    int id;
    if (!(g->inputs = mem_calloc((size_t)n_ins + 1, sizeof *g->inputs)) ||
        !(g->outputs = mem_calloc((size_t)n_outs + 1, sizeof *g->outputs)))
        return err_set(e, TDM_E_NOMEM, "out of memory");
    for (int i = 0; i < n_ins; i++) {
        if ((st = take_value(e, g, src, ins[i], &id)) != TDM_OK)
            return st;
        /* an inner value made a graph input keeps what inference found */
        copy_type(g->model, &g->values[id].type, &src->values[ins[i]].type);
        g->values[id].has_type = 1;
        g->values[id].is_input = 1;
        g->inputs[g->n_inputs++] = id;
    }
    for (int i = 0; i < n_outs; i++) {
        if ((st = take_value(e, g, src, outs[i], &id)) != TDM_OK)
            return st;
        g->values[id].is_output = 1;
        g->outputs[g->n_outputs++] = id;
    }
    return TDM_OK;
}

static const gr_rw *rw_of(const gr_rw *const *rws, int n_rws, int node, int *first)
{
    for (int k = 0; k < n_rws; k++)
        for (int j = 0; j < rws[k]->n_orig; j++)
            if (rws[k]->orig[j] == node) {
                int lo = rws[k]->orig[0];
                for (int i = 1; i < rws[k]->n_orig; i++)
                    lo = rws[k]->orig[i] < lo ? rws[k]->orig[i] : lo;
                *first = lo == node;
                return rws[k];
            }
    return NULL;
}

static tdm_status clone_graph(tdm_err *e, gr_model *m, gr_graph *parent, const gr_graph *src, const gr_rw *const *rws,
                              int n_rws, gr_graph **out)
{
    gr_graph *g = NULL;
    tdm_status st = gr_graph_new(e, m, parent, src->name, &g);
    int id;
    if (st)
        return st;
    for (int v = 0; v < src->n_values; v++)
        if (src->values[v].init && !src->values[v].is_input && (st = take_value(e, g, src, v, &id)) != TDM_OK)
            goto fail;
    if ((st = set_io(e, g, src, src->inputs, src->n_inputs, src->outputs, src->n_outputs)) != TDM_OK)
        goto fail;
    for (int n = 0; n < src->n_nodes; n++) {
        int first = 0;
        const gr_rw *r = rw_of(rws, n_rws, n, &first);
        if (r && first)
            st = emit_rw(e, g, src, r);
        else if (!r)
            st = copy_node(e, g, src, &src->nodes[n]);
        if (st)
            goto fail;
    }
    *out = g;
    return TDM_OK;
fail:
    gr_graph_free(g);
    return st;
}

tdm_status gr_rw_model_shell(tdm_err *e, const gr_model *src, gr_model **out)
{
    gr_model *m = NULL;
    tdm_status st = gr_model_new(e, &m);
    if (st)
        return st;
    m->ir_version = src->ir_version;
    m->model_version = src->model_version;
    if ((src->path && !(m->path = mem_strdup(src->path))) || (src->dir && !(m->dir = mem_strdup(src->dir))) ||
        (src->producer_name && !(m->producer_name = mem_strdup(src->producer_name))) ||
        (src->producer_version && !(m->producer_version = mem_strdup(src->producer_version))) ||
        !(m->opsets = mem_calloc((size_t)src->n_opsets + 1, sizeof *m->opsets)))
        goto nomem;
    for (int k = 0; k < src->n_opsets; k++) {
        if (!(m->opsets[k].domain = mem_strdup(src->opsets[k].domain ? src->opsets[k].domain : "")))
            goto nomem;
        m->opsets[k].version = src->opsets[k].version;
        m->n_opsets = k + 1;
    }
    *out = m;
    return TDM_OK;
nomem:
    gr_model_free(m);
    return err_set(e, TDM_E_NOMEM, "out of memory");
}

tdm_status gr_rw_apply(tdm_err *e, const gr_model *src, const gr_rw *const *rws, int n_rws, gr_model **out)
{
    gr_model *m = NULL;
    tdm_status st;
    *out = NULL;
    if ((st = gr_rw_model_shell(e, src, &m)) != TDM_OK)
        return st;
    if ((st = clone_graph(e, m, NULL, src->main, rws, n_rws, &m->main)) != TDM_OK) {
        gr_model_free(m);
        return st;
    }
    *out = m;
    return TDM_OK;
}

static int in_set(const int *set, int n, int v)
{
    for (int k = 0; k < n; k++)
        if (set[k] == v)
            return 1;
    return 0;
}

tdm_status gr_rw_extract(tdm_err *e, const gr_model *src, const gr_rw *rw, int orig, gr_model **out)
{
    const gr_graph *s = src->main;
    gr_model *m = NULL;
    gr_graph *g = NULL;
    int ins[GR_RW_MAX_ORIG * GR_RW_MAX_IO * 4], outs[GR_RW_MAX_ORIG * GR_RW_MAX_IO];
    int n_ins = 0, n_outs = 0, id;
    tdm_status st;
    *out = NULL;
    for (int k = 0; k < rw->n_orig; k++) {
        const gr_node *n = &s->nodes[rw->orig[k]];
        for (int i = 0; i < n->n_inputs; i++) {
            int v = n->inputs[i];
            if (v < 0 || in_set(ins, n_ins, v))
                continue;
            int internal = 0;
            for (int j = 0; j < rw->n_orig; j++)
                internal |= in_set(s->nodes[rw->orig[j]].outputs, s->nodes[rw->orig[j]].n_outputs, v);
            if (!internal && !(s->values[v].init && !s->values[v].is_input)) {
                if (n_ins >= (int)(sizeof ins / sizeof ins[0]))
                    return err_set(e, TDM_E_UNSUPPORTED, "a rewrite reads too many values");
                ins[n_ins++] = v;
            }
        }
        for (int o = 0; o < n->n_outputs; o++) {
            int v = n->outputs[o], read = s->values[v < 0 ? 0 : v].is_output;
            if (v < 0)
                continue;
            for (int c = 0; c < s->n_nodes && !read; c++)
                if (!in_set(rw->orig, rw->n_orig, c))
                    read = in_set(s->nodes[c].inputs, s->nodes[c].n_inputs, v);
            if (read && n_outs < (int)(sizeof outs / sizeof outs[0]))
                outs[n_outs++] = v;
        }
    }
    if ((st = gr_rw_model_shell(e, src, &m)) != TDM_OK)
        return st;
    if ((st = gr_graph_new(e, m, NULL, "rescue", &g)) != TDM_OK)
        goto fail;
    m->main = g;
    if ((st = set_io(e, g, s, ins, n_ins, outs, n_outs)) != TDM_OK)
        goto fail;
    if (orig) {
        for (int k = 0; k < rw->n_orig; k++)
            if ((st = copy_node(e, g, s, &s->nodes[rw->orig[k]])) != TDM_OK)
                goto fail;
    } else if ((st = emit_rw(e, g, s, rw)) != TDM_OK) {
        goto fail;
    }
    (void)id;
    *out = m;
    return TDM_OK;
fail:
    gr_model_free(m);
    return st;
}
