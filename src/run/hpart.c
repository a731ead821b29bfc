/* The cpu partitions of a heterogeneous plan (see hpart.h). */
#include "run/hpart.h"
#include "core/arena.h"
#include "core/mem.h"
#include "graph/fuse.h"
#include "run/observe.h"

#include <stdio.h>
#include <string.h>

/* What building one partition's graph keeps. */
typedef struct part_builder {
    tdm_err *e;
    const gr_graph *g;      /* the plan's graph */
    gr_graph *sg;           /* the partition's */
    int *vmap;              /* plan value → partition value, -1 */
    int *touched;           /* plan values mapped, to reset vmap */
    int n_touched;
    size_t cap_values, cap_inputs, cap_in_vals, cap_outputs, cap_out_vals;
    hpart *hp;
} part_builder;

/* The partition's graph: what its build allocated (the rest is borrowed). */
static void sub_graph_free(gr_graph *sg)
{
    if (!sg)
        return;
    for (int i = 0; i < sg->n_nodes; i++) {
        mem_free(sg->nodes[i].inputs);
        mem_free(sg->nodes[i].outputs);
    }
    mem_free(sg->nodes);
    mem_free(sg->values);
    strmap_free(&sg->value_ids);
    mem_free(sg->inputs);
    mem_free(sg->outputs);
    mem_free(sg->order);
    mem_free(sg->name);
    mem_free(sg);
}

/* The partition's value for plan value v, added (a copy of v's entry with
 * no producer, not an input nor an output) on first use; -1 when out of memory. */
static int sub_value(part_builder *b, int v)
{
    if (b->vmap[v] >= 0)
        return b->vmap[v];
    gr_graph *sg = b->sg;
    if (mem_grow((void **)&sg->values, &b->cap_values, (size_t)sg->n_values + 1, sizeof *sg->values))
        return -1;
    int id = sg->n_values;
    gr_value *sv = &sg->values[id];
    *sv = b->g->values[v];
    sv->producer = -1;
    sv->is_input = sv->is_output = sv->outer = 0;
    sv->n_consumers = 0;
    if (sv->name && strmap_put(&sg->value_ids, sv->name, id))
        return -1;
    sg->n_values++;
    b->vmap[v] = id;
    b->touched[b->n_touched++] = v;
    return id;
}

/* A value the partition reads: from inside (a producer among its nodes),
 * a constant of the plan's graph, or else an input of the partition. */
static int sub_read(part_builder *b, int v)
{
    int fresh = b->vmap[v] < 0;
    int id = sub_value(b, v);
    if (id < 0 || !fresh)
        return id;
    const gr_value *pv = &b->g->values[v];
    if (pv->init && !pv->is_input)
        return id; /* a constant: borrowed as the partition's own */
    gr_graph *sg = b->sg;
    if (mem_grow((void **)&sg->inputs, &b->cap_inputs, (size_t)sg->n_inputs + 1, sizeof *sg->inputs) ||
        mem_grow((void **)&b->hp->in_vals, &b->cap_in_vals, (size_t)sg->n_inputs + 1, sizeof *b->hp->in_vals))
        return -1;
    sg->values[id].is_input = 1;
    sg->inputs[sg->n_inputs] = id;
    b->hp->in_vals[sg->n_inputs++] = v;
    return id;
}

/* Node i of the partition: plan node n, its value lists remapped. */
static tdm_status sub_node(part_builder *b, int i, int n, const int *rd_start, const int *rd)
{
    const gr_node *pn = &b->g->nodes[n];
    gr_node *sn = &b->sg->nodes[i];
    *sn = *pn;
    sn->inputs = mem_alloc(((size_t)pn->n_inputs + 1) * sizeof *sn->inputs);
    sn->outputs = mem_alloc(((size_t)pn->n_outputs + 1) * sizeof *sn->outputs);
    if (!sn->inputs || !sn->outputs) {
        mem_free(sn->inputs);
        mem_free(sn->outputs);
        sn->inputs = sn->outputs = NULL;
        return err_set(b->e, TDM_E_NOMEM, "out of memory");
    }
    /* the reads first (explicit and outer-scope), then the slots */
    for (int j = rd_start[n]; j < rd_start[n + 1]; j++)
        if (sub_read(b, rd[j]) < 0)
            return err_set(b->e, TDM_E_NOMEM, "out of memory");
    for (int k = 0; k < pn->n_inputs; k++) {
        int v = pn->inputs[k];
        sn->inputs[k] = v >= 0 ? b->vmap[v] : -1;
        if (v >= 0)
            b->sg->values[sn->inputs[k]].n_consumers++;
    }
    for (int k = 0; k < pn->n_outputs; k++) {
        int v = pn->outputs[k], id = v >= 0 ? sub_value(b, v) : -1;
        if (v >= 0 && id < 0)
            return err_set(b->e, TDM_E_NOMEM, "out of memory");
        sn->outputs[k] = id;
        if (id >= 0 && b->sg->values[id].producer < 0)
            b->sg->values[id].producer = i;
    }
    return TDM_OK;
}

/* Builds the graph of positions [start, end). last_read[v]: the last
 * position that reads v (a node; INT_MAX for a value some copy moves or
 * a graph output), so that v leaves the partition when it is read at or
 * after end. */
static tdm_status part_build(part_builder *b, const tdm_plan *plan, const int *rd_start, const int *rd,
                             const int *last_read, int start, int end)
{
    hpart *hp = b->hp;
    int K = end - start;
    gr_graph *sg = b->sg = hp->g = mem_calloc(1, sizeof *sg);
    if (!sg)
        return err_set(b->e, TDM_E_NOMEM, "out of memory");
    strmap_init(&sg->value_ids);
    char name[64];
    snprintf(name, sizeof name, "cpu partition at positions %d-%d", start, end - 1);
    sg->name = mem_strdup(name);
    sg->model = b->g->model;
    sg->nodes = mem_calloc((size_t)K, sizeof *sg->nodes);
    sg->order = mem_alloc((size_t)K * sizeof *sg->order);
    hp->node_of = mem_alloc((size_t)K * sizeof *hp->node_of);
    hp->view.nodes = mem_alloc((size_t)K * sizeof *hp->view.nodes);
    if (!sg->name || !sg->nodes || !sg->order || !hp->node_of || !hp->view.nodes)
        return err_set(b->e, TDM_E_NOMEM, "out of memory");
    sg->cap_nodes = (size_t)K;
    hp->start = start;
    hp->end = end;
    b->cap_values = b->cap_inputs = b->cap_in_vals = b->cap_outputs = b->cap_out_vals = 0;
    hp->plan_g = b->g;
    for (int i = 0; i < K; i++) {
        int n = plan->order[start + i];
        tdm_status st = sub_node(b, i, n, rd_start, rd);
        sg->n_nodes = i + 1; /* its lists are the graph's to free now */
        if (st)
            return st;
        sg->order[i] = i;
        hp->node_of[i] = n;
        hp->view.nodes[i] = plan->nodes[n];
    }
    /* outputs: the values its nodes produce that are read at or after end */
    for (int i = 0; i < K; i++) {
        const gr_node *pn = &b->g->nodes[hp->node_of[i]];
        for (int k = 0; k < pn->n_outputs; k++) {
            int v = pn->outputs[k];
            if (v < 0 || last_read[v] < end || sg->values[b->vmap[v]].is_output)
                continue;
            if (mem_grow((void **)&sg->outputs, &b->cap_outputs, (size_t)sg->n_outputs + 1, sizeof *sg->outputs) ||
                mem_grow((void **)&hp->out_vals, &b->cap_out_vals, (size_t)sg->n_outputs + 1, sizeof *hp->out_vals))
                return err_set(b->e, TDM_E_NOMEM, "out of memory");
            sg->values[b->vmap[v]].is_output = 1;
            sg->outputs[sg->n_outputs] = b->vmap[v];
            hp->out_vals[sg->n_outputs++] = v;
        }
    }
    hp->view.devs = plan->devs;
    hp->view.model = plan->model;
    hp->view.g = sg;
    hp->view.n_nodes = K;
    return TDM_OK;
}

tdm_status hpart_build(tdm_err *e, const tdm_plan *plan, const int *rd_start, const int *rd, arena *shared,
                       hpart **parts, int *n_parts, int *part_at)
{
    const gr_graph *g = plan->g;
    int N = plan->n_nodes, cpu = (int)plan->devs->n - 1, count = 0;
    *parts = NULL;
    *n_parts = 0;
    for (int pos = 0; pos < N; pos++) {
        part_at[pos] = -1;
        if (plan->nodes[plan->order[pos]].device == cpu && (pos == 0 || plan->nodes[plan->order[pos - 1]].device != cpu))
            count++;
    }
    if (!count)
        return TDM_OK;
    part_builder b;
    memset(&b, 0, sizeof b);
    b.e = e;
    b.g = g;
    b.vmap = mem_alloc(((size_t)g->n_values + 1) * sizeof *b.vmap);
    b.touched = mem_alloc(((size_t)g->n_values + 1) * sizeof *b.touched);
    int *last = plan_last_reads(plan, rd_start, rd); /* what the estimates fuse by too */
    hpart *hp = mem_calloc((size_t)count, sizeof *hp);
    if (!b.vmap || !b.touched || !last || !hp) {
        mem_free(b.vmap);
        mem_free(b.touched);
        mem_free(last);
        mem_free(hp);
        return err_set(e, TDM_E_NOMEM, "out of memory");
    }
    for (int v = 0; v < g->n_values; v++)
        b.vmap[v] = -1;
    tdm_status st = TDM_OK;
    int k = 0;
    for (int pos = 0; pos < N && !st; pos++) {
        if (plan->nodes[plan->order[pos]].device != cpu)
            continue;
        int end = pos;
        while (end < N && plan->nodes[plan->order[end]].device == cpu)
            end++;
        b.hp = &hp[k];
        b.n_touched = 0;
        st = part_build(&b, plan, rd_start, rd, last, pos, end);
        for (int t = 0; t < b.n_touched; t++)
            b.vmap[b.touched[t]] = -1;
        *n_parts = ++k; /* hpart_free frees what it holds */
        if (!st)
            st = exec_cache_init(e, hp[k - 1].g, &hp[k - 1].cache);
        if (!st && shared) {
            arena_free(hp[k - 1].cache.arena);
            hp[k - 1].cache.arena = shared;
            hp[k - 1].arena_shared = 1;
        }
        part_at[pos] = k - 1;
        pos = end - 1;
    }
    mem_free(b.vmap);
    mem_free(b.touched);
    mem_free(last);
    *parts = hp;
    if (st) {
        hpart_free(hp, *n_parts);
        *parts = NULL;
        *n_parts = 0;
        for (int pos = 0; pos < N; pos++)
            part_at[pos] = -1;
    }
    return st;
}

void hpart_free(hpart *parts, int n_parts)
{
    for (int k = 0; parts && k < n_parts; k++) {
        hpart *hp = &parts[k];
        if (hp->arena_shared) /* the arena is the program's */
            hp->cache.arena = NULL;
        exec_cache_free(&hp->cache);
        sub_graph_free(hp->g);
        mem_free(hp->node_of);
        mem_free(hp->in_vals);
        mem_free(hp->out_vals);
        mem_free(hp->view.nodes);
    }
    mem_free(parts);
}

/* The observer of a partition's run: its events carry the plan's node index. */
typedef struct part_obs {
    const hpart *hp;
    const obs_hook *outer;
} part_obs;

static void part_event(void *user, const tdm_event *ev)
{
    const part_obs *po = user;
    tdm_event x = *ev;
    if (ev->node_index < (size_t)po->hp->g->n_nodes)
        x.node_index = (size_t)po->hp->node_of[ev->node_index];
    po->outer->fn(po->outer->user, &x);
}

tdm_status hpart_run(tdm_err *e, const hpart *hp, tdm_tensor *const *vals, tdm_tensor **out, int threads,
                     uint64_t *rng, const obs_hook *obs)
{
    const gr_graph *sg = hp->g;
    const tdm_tensor *small[16];
    const tdm_tensor **in = small;
    if (sg->n_inputs > 16 && !(in = mem_calloc((size_t)sg->n_inputs, sizeof *in)))
        return err_set(e, TDM_E_NOMEM, "out of memory");
    tdm_status st = TDM_OK;
    for (int k = 0; k < sg->n_inputs && !st; k++) {
        const gr_value *sv = &sg->values[sg->inputs[k]];
        in[k] = vals[hp->in_vals[k]];
        if (!in[k] && !sv->init && !sv->type.optional && !hp->plan_g->values[hp->in_vals[k]].is_input)
            st = err_set(e, TDM_E_INTERNAL, "value '%s' read by the %s has no value", sv->name ? sv->name : "",
                         sg->name);
    }
    for (int k = 0; k < sg->n_outputs; k++)
        out[k] = NULL;
    if (!st) {
        part_obs po = {hp, obs};
        obs_hook h = {part_event, &po, &hp->view};
        st = exec_graph_cached(e, sg, in, out, threads, rng, obs && obs->fn ? &h : NULL, &hp->cache);
    }
    if (in != small)
        mem_free((void *)in);
    return st;
}

int hpart_fused_nodes(const hpart *parts, int n_parts)
{
    int n = 0;
    for (int k = 0; k < n_parts; k++)
        if (parts[k].cache.fuse)
            n += fuse_plan_fused_nodes(parts[k].cache.fuse);
    return n;
}
