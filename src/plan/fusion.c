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

/* fused[n] = 1 for the nodes fuse_plan_build_in over order[0 .. n_order)
 * fuses away (chain members, folded BatchNormalizations). */
static tdm_status mark_fused(pstate *s, const int *order, int n_order, const unsigned char *esc, unsigned char *fused)
{
    fuse_plan *fp;
    tdm_status st = fuse_plan_build_in(s->e, s->g, order, n_order, esc, 0, &fp);
    if (st)
        return st;
    for (int i = 0; i < n_order; i++)
        if (fuse_is_member(fp, order[i]))
            fused[order[i]] = 1;
    fuse_plan_free(fp);
    return TDM_OK;
}

tdm_status plan_cpu_fusion(pstate *s, unsigned char *fused)
{
    const tdm_plan *p = s->p;
    int N = s->N;
    memset(fused, 0, (size_t)N);
    if (p->opts.unfused)
        return TDM_OK;
    int *last = plan_last_reads(p, s->rd_start, s->rd);
    unsigned char *esc = mem_alloc((size_t)s->V + 1);
    tdm_status st = TDM_OK;
    if (!last || !esc)
        st = err_set(s->e, TDM_E_NOMEM, "out of memory");
    for (int pos = 0; pos < N && !st; pos++) {
        if (p->nodes[p->order[pos]].device != s->cpu)
            continue;
        int end = pos;
        while (end < N && p->nodes[p->order[end]].device == s->cpu)
            end++;
        for (int v = 0; v < s->V; v++)
            esc[v] = last[v] >= end;
        st = mark_fused(s, p->order + pos, end - pos, esc, fused);
        pos = end - 1;
    }
    mem_free(last);
    mem_free(esc);
    return st;
}

tdm_status plan_whole_fusion(pstate *s)
{
    if (s->whole_fused || !s->g->order)
        return TDM_OK;
    unsigned char *f = plan_arr(s, (size_t)s->N, 1);
    if (!f)
        return err_set(s->e, TDM_E_NOMEM, "out of memory");
    tdm_status st = mark_fused(s, s->g->order, s->N, NULL, f);
    if (!st)
        s->whole_fused = f;
    return st;
}
