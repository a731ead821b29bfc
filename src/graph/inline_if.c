/* Control flow known at plan time (inline_if.h). */
#include "graph/inline_if.h"
#include "core/mem.h"
#include "graph/rebuild.h"

#include <stdio.h>
#include <string.h>

enum { MAX_ROUNDS = 8 };

void gr_inline_free(gr_inline *x)
{
    if (!x)
        return;
    for (int k = x->n_models - 1; k >= 0; k--)
        tdm_model_destroy(x->models[k]);
    for (int k = 0; k < x->n_ifs; k++)
        mem_free(x->ifs[k].node);
    mem_free(x->models);
    mem_free(x->ifs);
    memset(x, 0, sizeof *x);
}

static int taken_name(const gr_graph *s, const gr_graph *g, const char *name)
{
    return gr_value_find(s, name) >= 0 || gr_value_find(g, name) >= 0;
}

/* A name for a value of the branch of If node ifn not used by the outer
 * graph s nor by g (NULL: out of memory). */
static char *fresh(const gr_graph *s, const gr_graph *g, const char *ifn, const char *name)
{
    size_t len = strlen(ifn) + strlen(name) + 32;
    char *b = mem_alloc(len);
    if (!b)
        return NULL;
    snprintf(b, len, "%s/%s", ifn, name);
    for (int k = 1; taken_name(s, g, b); k++)
        snprintf(b, len, "%s/%s#%d", ifn, name, k);
    return b;
}

static int is_if(const gr_node *n)
{
    return strcmp(n->op_type, "If") == 0 && !*n->domain;
}

/* The branch an If of g takes when its condition is constant: 1 then, 0
 * else, -1 not known. */
static int branch_of(const gr_graph *g, const gr_node *n)
{
    if (!is_if(n) || n->n_inputs < 1 || n->inputs[0] < 0)
        return -1;
    const gr_value *c = &g->values[n->inputs[0]];
    if (!c->init || c->is_input || c->init->kind != TDM_KIND_TENSOR || c->init->count != 1)
        return -1;
    return tensor_get_f64(c->init, 0) != 0;
}

static const gr_graph *branch_graph(const gr_node *n, int then)
{
    for (int a = 0; a < n->n_attrs; a++)
        if (n->attrs[a].type == GA_GRAPH && strcmp(n->attrs[a].name, then ? "then_branch" : "else_branch") == 0)
            return n->attrs[a].g;
    return NULL;
}

/* The nodes of branch b of If node n (of s) into g; outer names through
 * outer (s's names in g). */
static tdm_status inline_branch(tdm_err *e, gr_graph *g, const gr_graph *s, const gr_node *n, const gr_graph *b,
                                const gr_names *outer)
{
    gr_names m = {0};
    tdm_status st = TDM_OK;
    unsigned char *used = NULL;
    if (gr_names_init(&m, b->n_values) || !(used = mem_calloc((size_t)b->n_values + 1, 1)))
        goto nomem;
    for (int v = 0; v < b->n_values; v++) {
        const gr_value *x = &b->values[v];
        if (x->outer) {
            int ov = gr_value_find(s, x->name);
            const char *to = ov >= 0 ? gr_names_get((void *)outer, s, ov) : NULL;
            if (to && !(m.to[v] = mem_strdup(to)))
                goto nomem;
        } else if (taken_name(s, g, x->name) && !(m.to[v] = fresh(s, g, n->name, x->name))) {
            goto nomem;
        }
    }
    /* outputs made by a node of the branch take the If's names */
    for (int o = 0; o < b->n_outputs && o < n->n_outputs; o++) {
        int bv = b->outputs[o];
        if (n->outputs[o] < 0 || b->values[bv].producer < 0 || used[bv])
            continue;
        used[bv] = 1;
        mem_free(m.to[bv]);
        if (!(m.to[bv] = mem_strdup(s->values[n->outputs[o]].name)))
            goto nomem;
    }
    /* the branch's constants, also those only its own subgraphs read */
    for (int v = 0; v < b->n_values; v++) {
        int id;
        if (b->values[v].init && !b->values[v].is_input && !b->values[v].outer &&
            (st = gr_rw_take_value(e, g, b, v, m.to[v], &id)) != TDM_OK)
            goto done;
    }
    gr_rw_names map = {gr_names_get, &m};
    for (int k = 0; k < b->n_nodes; k++) {
        const gr_node *x = &b->nodes[b->order ? b->order[k] : k];
        char name[512];
        if (x->name && *x->name)
            snprintf(name, sizeof name, "%s/inline/%s", n->name, x->name);
        else
            snprintf(name, sizeof name, "%s/inline/%s_%d", n->name, x->op_type, k);
        if ((st = gr_rw_copy_node(e, g, b, x, name, &map)) != TDM_OK)
            goto done;
    }
    for (int o = 0; o < b->n_outputs && o < n->n_outputs; o++) {
        int bv = b->outputs[o], id, idx;
        if (n->outputs[o] < 0 || (used[bv] && m.to[bv] && strcmp(m.to[bv], s->values[n->outputs[o]].name) == 0))
            continue;
        const char *in = m.to[bv] ? m.to[bv] : b->values[bv].name;
        const char *out = s->values[n->outputs[o]].name;
        char name[512];
        snprintf(name, sizeof name, "%s/inline/output_%d", n->name, o);
        if (b->values[bv].outer) {
            int ov = gr_value_find(s, b->values[bv].name);
            if (ov >= 0 && (st = gr_rw_take_value(e, g, s, ov, in, &id)) != TDM_OK)
                goto done;
        } else if ((st = gr_rw_take_value(e, g, b, bv, in, &id)) != TDM_OK) {
            goto done;
        }
        if ((st = gr_node_add(e, g, name, "Identity", "", 1, &in, 1, &out, &idx)) != TDM_OK)
            goto done;
    }
    goto done;
nomem:
    st = err_set(e, TDM_E_NOMEM, "out of memory");
done:
    gr_names_free(&m);
    mem_free(used);
    return st;
}

/* One round: m's main graph with binds made constants and the Ifs with
 * take[n] >= 0 inlined, as a raw model. */
static tdm_status round_model(tdm_err *e, const tdm_model *src, const gr_bind *binds, int n_binds,
                              const int *take, gr_model **out)
{
    const gr_graph *s = src->gm->main;
    gr_model *m = NULL;
    gr_graph *g = NULL;
    gr_names outer = {0};
    tdm_status st;
    int id;
    *out = NULL;
    if ((st = gr_rebuild_begin(e, src->gm, &m, &g)) != TDM_OK)
        return st;
    if (gr_names_init(&outer, s->n_values))
        goto nomem;
    for (int k = 0; k < n_binds; k++) {
        int v = gr_value_find(s, binds[k].name);
        if (v < 0 || !s->values[v].is_input || outer.to[v])
            continue;
        if (!(outer.to[v] = fresh(s, g, binds[k].name, "bound")) ||
            (st = gr_value_get(e, g, outer.to[v], &id)) != TDM_OK)
            goto nomem;
        gr_value *c = &g->values[id];
        if ((st = tensor_clone(e, binds[k].value, &c->init)) != TDM_OK)
            goto fail;
        c->is_initializer = 1;
        gr_type_from_tensor(&c->type, c->init);
        c->has_type = 1;
    }
    gr_rw_names map = {gr_names_get, &outer};
    for (int k = 0; k < s->n_nodes; k++) {
        int n = s->order ? s->order[k] : k;
        const gr_node *x = &s->nodes[n];
        const gr_graph *b = take && take[n] >= 0 ? branch_graph(x, take[n]) : NULL;
        st = b ? inline_branch(e, g, s, x, b, &outer) : gr_rw_copy_node(e, g, s, x, NULL, &map);
        if (st)
            goto fail;
    }
    if ((st = gr_rebuild_end(e, s, g)) != TDM_OK)
        goto fail;
    gr_names_free(&outer);
    *out = m;
    return TDM_OK;
nomem:
    st = err_set(e, TDM_E_NOMEM, "out of memory");
fail:
    gr_names_free(&outer);
    gr_model_free(m);
    return st;
}

static tdm_status push_model(tdm_err *e, gr_inline *x, gr_model *gm, const tdm_model *src)
{
    tdm_model *m = NULL;
    tdm_status st = model_build(e, gm, src->gm->path ? src->gm->path : "inline", &m);
    if (st)
        return st;
    tdm_model **grown = mem_realloc(x->models, ((size_t)x->n_models + 1) * sizeof *grown);
    if (!grown) {
        tdm_model_destroy(m);
        return err_set(e, TDM_E_NOMEM, "out of memory");
    }
    x->models = grown;
    x->models[x->n_models++] = m;
    return TDM_OK;
}

static int binds_any(const tdm_model *m, const gr_bind *binds, int n_binds)
{
    for (int k = 0; k < n_binds; k++) {
        int v = gr_value_find(m->gm->main, binds[k].name);
        if (v >= 0 && m->gm->main->values[v].is_input)
            return 1;
    }
    return 0;
}

tdm_status gr_inline_ifs(tdm_err *e, const tdm_model *m, const gr_bind *binds, int n_binds, gr_inline *out)
{
    gr_model *gm = NULL;
    int *take = NULL;
    tdm_status st = TDM_OK;
    memset(out, 0, sizeof *out);
    if (binds_any(m, binds, n_binds)) {
        if ((st = round_model(e, m, binds, n_binds, NULL, &gm)) != TDM_OK || (st = push_model(e, out, gm, m)) != TDM_OK)
            goto fail;
    }
    for (int round = 0; round < MAX_ROUNDS; round++) {
        const tdm_model *cur = out->n_models ? out->models[out->n_models - 1] : m;
        const gr_graph *g = cur->gm->main;
        int any = 0;
        mem_free(take);
        if (!(take = mem_calloc((size_t)g->n_nodes + 1, sizeof *take)))
            goto nomem;
        for (int n = 0; n < g->n_nodes; n++) {
            take[n] = branch_of(g, &g->nodes[n]);
            if (take[n] < 0 || !branch_graph(&g->nodes[n], take[n])) {
                take[n] = -1;
                continue;
            }
            gr_inlined *grown = mem_realloc(out->ifs, ((size_t)out->n_ifs + 1) * sizeof *grown);
            if (!grown)
                goto nomem;
            out->ifs = grown;
            gr_inlined *r = &out->ifs[out->n_ifs];
            if (!(r->node = mem_strdup(g->nodes[n].name)))
                goto nomem;
            r->then = take[n];
            r->n_nodes = branch_graph(&g->nodes[n], take[n])->n_nodes;
            out->n_ifs++;
            any = 1;
        }
        if (!any)
            break;
        if ((st = round_model(e, cur, NULL, 0, take, &gm)) != TDM_OK || (st = push_model(e, out, gm, cur)) != TDM_OK)
            goto fail;
    }
    mem_free(take);
    return TDM_OK;
nomem:
    st = err_set(e, TDM_E_NOMEM, "out of memory");
fail:
    mem_free(take);
    gr_inline_free(out);
    return st;
}
