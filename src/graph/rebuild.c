/* Copies of a main graph (rebuild.h). */
#include "graph/rebuild.h"
#include "core/mem.h"

#include <string.h>

int gr_names_init(gr_names *m, int n)
{
    m->n = n;
    return (m->to = mem_calloc((size_t)n + 1, sizeof *m->to)) ? 0 : -1;
}

void gr_names_free(gr_names *m)
{
    for (int k = 0; m->to && k < m->n; k++)
        mem_free(m->to[k]);
    mem_free(m->to);
    m->to = NULL;
}

const char *gr_names_get(void *user, const gr_graph *src, int v)
{
    const gr_names *m = user;
    (void)src;
    return v >= 0 && v < m->n ? m->to[v] : NULL;
}

tdm_status gr_rebuild_begin(tdm_err *e, const gr_model *src, gr_model **out, gr_graph **g)
{
    const gr_graph *s = src->main;
    gr_model *m = NULL;
    tdm_status st;
    int id;
    *out = NULL;
    *g = NULL;
    if ((st = gr_rw_model_shell(e, src, &m)) != TDM_OK)
        return st;
    if ((st = gr_graph_new(e, m, NULL, s->name, &m->main)) != TDM_OK)
        goto fail;
    gr_graph *c = m->main;
    if (!(c->inputs = mem_calloc((size_t)s->n_inputs + 1, sizeof *c->inputs)) ||
        !(c->outputs = mem_calloc((size_t)s->n_outputs + 1, sizeof *c->outputs))) {
        st = err_set(e, TDM_E_NOMEM, "out of memory");
        goto fail;
    }
    for (int v = 0; v < s->n_values; v++)
        if (s->values[v].init && !s->values[v].is_input && (st = gr_rw_take_value(e, c, s, v, NULL, &id)) != TDM_OK)
            goto fail;
    for (int i = 0; i < s->n_inputs; i++) {
        if ((st = gr_rw_take_value(e, c, s, s->inputs[i], NULL, &id)) != TDM_OK)
            goto fail;
        c->values[id].is_input = 1;
        c->inputs[c->n_inputs++] = id;
    }
    *out = m;
    *g = c;
    return TDM_OK;
fail:
    gr_model_free(m);
    return st;
}

tdm_status gr_rebuild_end(tdm_err *e, const gr_graph *src, gr_graph *g)
{
    int id;
    tdm_status st;
    for (int i = 0; i < src->n_outputs; i++) {
        if ((st = gr_rw_take_value(e, g, src, src->outputs[i], NULL, &id)) != TDM_OK)
            return st;
        g->values[id].is_output = 1;
        g->outputs[g->n_outputs++] = id;
    }
    return TDM_OK;
}
