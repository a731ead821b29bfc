/* What a plan's cpu partitions fuse (run/hpart.h runs each maximal run of
 * cpu nodes in the order as one fused graph), for their estimates: the
 * fusion pass itself (graph/fuse.h, fuse_plan_build_in) on each run, with
 * the values read after it (plan_last_reads, which hpart.c uses too) as
 * its escapes. */
#include "plan/plan_internal.h"
#include "core/mem.h"
#include "graph/fuse.h"

#include <limits.h>
#include <string.h>

int *plan_last_reads(const tdm_plan *plan, const int *rd_start, const int *rd)
{
    const gr_graph *g = plan->g;
    int *last = mem_alloc(((size_t)g->n_values + 1) * sizeof *last);
    if (!last)
        return NULL;
    for (int v = 0; v < g->n_values; v++)
        last[v] = -1;
    for (int pos = 0; pos < plan->n_nodes; pos++) {
        int n = plan->order[pos];
        for (int j = rd_start[n]; j < rd_start[n + 1]; j++)
            if (last[rd[j]] < pos)
                last[rd[j]] = pos;
    }
    for (int c = 0; c < plan->n_copies; c++)
        last[plan->copies[c].value] = INT_MAX;
    for (int k = 0; k < g->n_outputs; k++)
        last[g->outputs[k]] = INT_MAX;
    return last;
}

/* head[n] = the head node of the chain that fuse_plan_build_heads over
 * order[0 .. n_order) fuses node n into (a chain member, a folded
 * BatchNormalization); other entries unchanged. */
static tdm_status mark_fused(pstate *s, const int *order, int n_order, const unsigned char *esc, int epilogue, int *head)
{
    fuse_plan *fp;
    tdm_status st = fuse_plan_build_heads(s->e, s->g, order, n_order, esc, 0, epilogue, &fp);
    if (st)
        return st;
    for (int i = 0; i < n_order; i++) {
        const fuse_chain *c = fuse_head_chain(fp, order[i]);
        for (int m = 0; c && m < fuse_chain_n_members(c); m++)
            head[fuse_chain_member(c, m)] = order[i];
    }
    fuse_plan_free(fp);
    return TDM_OK;
}

/* How device d's partitions fuse: -1 not at all, else fuse_plan_build_heads'
 * epilogue argument (cpu 0: its executor's fusion, unless the session
 * runs unfused; a vnpu with "fusion": "epilogue" 1). */
static int dev_fuses(const pstate *s, int d)
{
    if (d == s->cpu)
        return s->p->opts.unfused ? -1 : 0;
    const dev_ext *x = s->p->devs->items[d].ext;
    return x && x->fusion == DEV_FUSION_EPILOGUE ? 1 : -1;
}

tdm_status plan_run_fusion(pstate *s, int *head)
{
    const tdm_plan *p = s->p;
    int N = s->N;
    for (int n = 0; n < N; n++)
        head[n] = -1;
    int any = 0;
    for (int d = 0; d < s->D; d++)
        any |= dev_fuses(s, d) >= 0;
    if (!any)
        return TDM_OK;
    int *last = plan_last_reads(p, s->rd_start, s->rd);
    unsigned char *esc = mem_alloc((size_t)s->V + 1);
    tdm_status st = TDM_OK;
    if (!last || !esc)
        st = err_set(s->e, TDM_E_NOMEM, "out of memory");
    /* cpu: each maximal run of cpu nodes in the order (run/hpart.c's
     * graphs); another device: each of its partitions (one compiled
     * program each) */
    for (int q = 0; q < p->n_parts && !st; q++) {
        int d = p->parts[q].device, how = dev_fuses(s, d);
        int pos = p->parts[q].first, end = pos + p->parts[q].count;
        if (d == s->cpu)
            while (q + 1 < p->n_parts && p->parts[q + 1].device == d && p->parts[q + 1].first == end)
                end += p->parts[++q].count;
        if (how < 0 || end <= pos)
            continue;
        for (int v = 0; v < s->V; v++)
            esc[v] = last[v] >= end;
        st = mark_fused(s, p->order + pos, end - pos, esc, how, head);
    }
    mem_free(last);
    mem_free(esc);
    return st;
}

tdm_status plan_whole_fusion(pstate *s)
{
    if (s->whole_head || !s->g->order)
        return TDM_OK;
    int *h = plan_arr(s, (size_t)s->N, sizeof *h), *eh = plan_arr(s, (size_t)s->N, sizeof *eh);
    if (!h || !eh)
        return err_set(s->e, TDM_E_NOMEM, "out of memory");
    for (int n = 0; n < s->N; n++)
        h[n] = eh[n] = -1;
    tdm_status st = mark_fused(s, s->g->order, s->N, NULL, 0, h);
    if (!st)
        st = mark_fused(s, s->g->order, s->N, NULL, 1, eh);
    if (!st) {
        s->whole_head = h;
        s->whole_epi_head = eh;
    }
    return st;
}

uint32_t plan_fused_mem_inputs(const pstate *s, int n, const int *head)
{
    const gr_node *node = &s->g->nodes[n];
    uint32_t mask = 0;
    for (int i = 0; i < node->n_inputs && i < 32; i++) {
        int v = node->inputs[i];
        int pr = v >= 0 ? s->prod[v] : -1;
        int chain = pr >= 0 && (pr == head[n] || head[pr] == head[n]);
        if (v >= 0 && !chain)
            mask |= 1u << i;
    }
    return mask;
}
