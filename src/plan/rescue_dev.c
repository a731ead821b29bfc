/* A device's own rescue rewrites (rescue_dev.h). */
#include "plan/rescue_dev.h"
#include "core/mem.h"

#include <stdio.h>
#include <string.h>

#define DEV_RW_MAX_NODES 256

/* The plugin's value names and the names they take in the model. */
typedef struct name_map {
    const char **from;
    char **to;
    size_t n, cap;
} name_map;

static void map_free(name_map *m)
{
    for (size_t k = 0; k < m->n; k++)
        mem_free(m->to[k]);
    mem_free(m->from);
    mem_free(m->to);
}

static const char *map_find(const name_map *m, const char *from)
{
    for (size_t k = 0; k < m->n; k++)
        if (strcmp(m->from[k], from) == 0)
            return m->to[k];
    return NULL;
}

/* 0, or -1 when out of memory. */
static int map_add(name_map *m, const char *from, const char *to)
{
    size_t cap = m->cap;
    if (mem_grow((void **)&m->from, &cap, m->n + 1, sizeof *m->from))
        return -1;
    cap = m->cap;
    if (mem_grow((void **)&m->to, &cap, m->n + 1, sizeof *m->to))
        return -1;
    m->cap = cap;
    if (!(m->to[m->n] = mem_strdup(to)))
        return -1;
    m->from[m->n++] = from;
    return 0;
}

static int is_node_value(const tdm_node_desc *d, const char *name, int outputs)
{
    int n = outputs ? d->n_outputs : d->n_inputs;
    const tdm_tensor_desc *t = outputs ? d->outputs : d->inputs;
    for (int k = 0; k < n; k++)
        if (t[k].name && *t[k].name && strcmp(t[k].name, name) == 0)
            return 1;
    return 0;
}

/* The model's name of the plugin's value name: the node's own, a constant,
 * or a fresh intermediate. NULL when out of memory. */
static const char *value_name(gr_rw *rw, const gr_graph *g, name_map *m, const tdm_node_desc *d, const char *name)
{
    const char *to;
    char buf[200];
    if (!*name || is_node_value(d, name, 0) || is_node_value(d, name, 1))
        return name;
    if ((to = map_find(m, name)) != NULL)
        return to;
    gr_rw_tmp(rw, g, buf, sizeof buf);
    return map_add(m, name, buf) ? NULL : m->to[m->n - 1];
}

/* The constants: 1, 0 with rw->why, -1 out of memory. */
static int take_consts(gr_rw *rw, const gr_graph *g, name_map *m, const tdm_rewrite *t)
{
    if (t->n_consts < 0 || t->n_consts > DEV_RW_MAX_NODES || (t->n_consts && !t->consts)) {
        snprintf(rw->why, sizeof rw->why, "it has %d constants (0 to %d)", t->n_consts, DEV_RW_MAX_NODES);
        return 0;
    }
    for (int k = 0; k < t->n_consts; k++) {
        const tdm_tensor_desc *c = &t->consts[k];
        char name[200];
        size_t count = 1;
        if (!c->name || !*c->name || !c->data || c->rank < 0 || c->rank > TDM_MAX_RANK || (c->rank && !c->dims)) {
            snprintf(rw->why, sizeof rw->why, "its constant %d has no name, data or shape", k);
            return 0;
        }
        for (int i = 0; i < c->rank; i++) {
            if (c->dims[i] < 0 || c->dims[i] > (int64_t)1 << 24 || (c->dims[i] && count > ((size_t)1 << 24) / (size_t)c->dims[i])) {
                snprintf(rw->why, sizeof rw->why, "its constant '%.60s' has a negative or too large dimension", c->name);
                return 0;
            }
            count *= (size_t)c->dims[i];
        }
        int r;
        if (c->dtype == TDM_FLOAT || c->dtype == TDM_DOUBLE) {
            double *v = mem_calloc(count + 1, sizeof *v);
            if (!v)
                return -1;
            for (size_t i = 0; i < count; i++)
                v[i] = c->dtype == TDM_FLOAT ? (double)((const float *)c->data)[i] : ((const double *)c->data)[i];
            r = gr_rw_const(rw, g, c->dtype, c->rank, c->dims, v, name, sizeof name);
            mem_free(v);
        } else if (c->dtype == TDM_INT64 && c->rank == 1 && count <= TDM_MAX_RANK) {
            r = gr_rw_const_i64(rw, g, (int)count, c->data, name, sizeof name);
        } else {
            snprintf(rw->why, sizeof rw->why,
                     "its constant '%.60s' is not float32, double or a 1-D int64 list of at most %d", c->name,
                     TDM_MAX_RANK);
            return 0;
        }
        if (r || map_add(m, c->name, name))
            return -1;
    }
    return 1;
}

static int take_attrs(gr_rw *rw, gr_rw_node *out, const tdm_rewrite_node *n, int k)
{
    for (int a = 0; a < n->n_attrs; a++) {
        const tdm_attr_desc *at = &n->attrs[a];
        if (!at->name || strlen(at->name) >= sizeof out->attrs[0].name) {
            snprintf(rw->why, sizeof rw->why, "node %d (%s) has an attribute without a name or one too long", k,
                     n->op_type);
            return 0;
        }
        switch (at->type) {
        case TDM_ATTR_INT:
            gr_rw_attr_int(out, at->name, at->i);
            break;
        case TDM_ATTR_FLOAT:
            gr_rw_attr_float(out, at->name, at->f);
            break;
        case TDM_ATTR_STRING:
            if (at->s && strlen(at->s) < sizeof out->attrs[0].s) {
                gr_rw_attr_str(out, at->name, at->s);
                break;
            }
            snprintf(rw->why, sizeof rw->why, "node %d (%s): attribute %s is not a string of at most %zu bytes", k,
                     n->op_type, at->name, sizeof out->attrs[0].s - 1);
            return 0;
        case TDM_ATTR_INTS:
            if (at->n <= TDM_MAX_RANK && (at->ints || !at->n)) {
                gr_rw_attr_ints(out, at->name, (int)at->n, at->ints);
                break;
            }
            snprintf(rw->why, sizeof rw->why, "node %d (%s): attribute %s has more than %d ints", k, n->op_type,
                     at->name, TDM_MAX_RANK);
            return 0;
        default:
            snprintf(rw->why, sizeof rw->why, "node %d (%s): attribute %s is not an int, float, string or ints", k,
                     n->op_type, at->name);
            return 0;
        }
    }
    return 1;
}

/* The nodes: 1, 0 with rw->why, -1 out of memory. */
static int take_nodes(gr_rw *rw, const gr_graph *g, name_map *m, const tdm_node_desc *d, const tdm_rewrite *t)
{
    if (t->n_nodes < 1 || t->n_nodes > DEV_RW_MAX_NODES || !t->nodes) {
        snprintf(rw->why, sizeof rw->why, "it has %d nodes (1 to %d)", t->n_nodes, DEV_RW_MAX_NODES);
        return 0;
    }
    for (int k = 0; k < t->n_nodes; k++) {
        const tdm_rewrite_node *n = &t->nodes[k];
        const char *in[GR_RW_MAX_IO], *out[GR_RW_MAX_IO];
        if (!n->op_type || !*n->op_type || strlen(n->op_type) >= sizeof rw->nodes[0].op ||
            n->n_inputs < 0 || n->n_inputs > GR_RW_MAX_IO || n->n_outputs < 1 || n->n_outputs > GR_RW_MAX_IO ||
            n->n_attrs < 0 || n->n_attrs > GR_RW_MAX_ATTRS || (n->n_inputs && !n->inputs) || !n->outputs ||
            (n->n_attrs && !n->attrs)) {
            snprintf(rw->why, sizeof rw->why,
                     "node %d has no op type, or not 0 to %d inputs, 1 to %d outputs and 0 to %d attributes", k,
                     GR_RW_MAX_IO, GR_RW_MAX_IO, GR_RW_MAX_ATTRS);
            return 0;
        }
        for (int i = 0; i < n->n_inputs + n->n_outputs; i++) {
            int is_out = i >= n->n_inputs;
            const char *name = is_out ? n->outputs[i - n->n_inputs] : n->inputs[i];
            if (!name || (is_out && !*name)) {
                snprintf(rw->why, sizeof rw->why, "node %d (%s) has a missing value name", k, n->op_type);
                return 0;
            }
            if (is_out && is_node_value(d, name, 0)) {
                snprintf(rw->why, sizeof rw->why, "node %d (%s) writes '%.60s', an input of the node", k, n->op_type,
                         name);
                return 0;
            }
            const char *v = value_name(rw, g, m, d, name);
            if (!v)
                return -1;
            if (is_out)
                out[i - n->n_inputs] = v;
            else
                in[i] = v;
        }
        gr_rw_node *gn = gr_rw_node_add(rw, n->op_type, n->n_inputs, in, n->n_outputs, out);
        if (!gn)
            return -1;
        int r = take_attrs(rw, gn, n, k);
        if (r <= 0)
            return r;
    }
    return 1;
}

int plan_rescue_dev_rewrite(tdm_plan *p, int d, const gr_graph *g, int n, const tdm_node_desc *desc, gr_rw *rw)
{
    const dev_instance *di = &p->devs->items[d];
    tdm_rewrite t;
    char rule[200];
    name_map m;
    int r;
    gr_rw_init(rw, "plugin", GR_RW_DECOMPOSE);
    rw->orig[0] = n;
    rw->n_orig = 1;
    r = dev_rewrite_get(di, desc, &t);
    if (r == 0)
        return 0;
    if (r < 0) {
        snprintf(rw->why, sizeof rw->why, "%s's rewrite() failed (%d)", plan_device_name(p, d), r);
        return 0;
    }
    snprintf(rule, sizeof rule, "plugin:%s:%.80s", plan_device_name(p, d), t.name && *t.name ? t.name : "unnamed");
    if (!(rw->rule = plan_arena_strdup(&p->arena, rule))) {
        dev_rewrite_release(di, &t);
        return -1;
    }
    rw->kind = t.approximate ? GR_RW_APPROX : GR_RW_DECOMPOSE;
    memset(&m, 0, sizeof m);
    /* constants first, so that the nodes find their names */
    if ((r = take_consts(rw, g, &m, &t)) == 1)
        r = take_nodes(rw, g, &m, desc, &t);
    dev_rewrite_release(di, &t);
    map_free(&m);
    if (r < 0)
        return -1;
    if (r == 0 && !rw->why[0])
        snprintf(rw->why, sizeof rw->why, "the device's rewrite is malformed");
    if (r == 0) {
        /* keep the sentence, drop the half-made nodes */
        char why[sizeof rw->why];
        const char *name = rw->rule;
        gr_rw_kind kind = rw->kind;
        memcpy(why, rw->why, sizeof why);
        gr_rw_free(rw);
        gr_rw_init(rw, name, kind);
        rw->orig[0] = n;
        rw->n_orig = 1;
        memcpy(rw->why, why, sizeof why);
    }
    return r;
}
