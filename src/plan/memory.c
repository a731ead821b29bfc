/* The planner's order, partitions and memory rule (plan.h). */
#include "plan/plan_internal.h"
#include "core/mem.h"

#include <string.h>

/* ------------------------------------------------------------- order */

static tdm_status make_order(pstate *s)
{
    int N = s->N;
    int *indeg = mem_calloc((size_t)N + 1, sizeof *indeg);
    unsigned char *ready = mem_calloc((size_t)N + 1, 1);
    int *byg = mem_alloc((size_t)N * sizeof *byg + 1);
    if (!indeg || !ready || !byg) {
        mem_free(indeg);
        mem_free(ready);
        mem_free(byg);
        return err_set(s->e, TDM_E_NOMEM, "out of memory");
    }
    for (int i = 0; i < N; i++)
        byg[i] = s->g->order ? s->g->order[i] : i;
    for (int n = 0; n < N; n++)
        for (int j = s->rd_start[n]; j < s->rd_start[n + 1]; j++)
            indeg[n] += s->prod[s->rd[j]] >= 0 && s->prod[s->rd[j]] != n;
    for (int n = 0; n < N; n++)
        ready[n] = indeg[n] == 0;
    int cur = -1;
    for (int k = 0; k < N; k++) {
        int pick = -1, any = -1;
        for (int i = 0; i < N; i++) {
            int n = byg[i];
            if (ready[n] != 1)
                continue;
            if (any < 0)
                any = n;
            if (s->p->nodes[n].device == cur) {
                pick = n;
                break;
            }
        }
        if (pick < 0)
            pick = any;
        if (pick < 0) {
            mem_free(indeg);
            mem_free(ready);
            mem_free(byg);
            return err_set(s->e, TDM_E_INTERNAL, "the graph has a cycle the planner cannot order");
        }
        cur = s->p->nodes[pick].device;
        ready[pick] = 2;
        s->p->order[k] = pick;
        s->p->nodes[pick].pos = k;
        const gr_node *node = &s->g->nodes[pick];
        for (int o = 0; o < node->n_outputs; o++) {
            int v = node->outputs[o];
            int dup = v < 0;
            for (int q = 0; q < o && !dup; q++)
                dup = node->outputs[q] == v;
            if (dup)
                continue;
            for (int j = s->cs_start[v]; j < s->cs_start[v + 1]; j++) {
                int c = s->cs[j];
                if (c != pick && --indeg[c] == 0 && ready[c] == 0)
                    ready[c] = 1;
            }
        }
    }
    mem_free(indeg);
    mem_free(ready);
    mem_free(byg);
    return TDM_OK;
}

/* Where each value is resident on each device in the current order: from
 * its production there (or its first reader there) to its last reader
 * there, or to the copy that takes it elsewhere, or to the end for a graph
 * output; rs/re are positions, -1 for none. This is what the executor
 * holds, since it releases a tensor on a device after its last use there. */
void plan_compute_residency(pstate *s)
{
    int N = s->N, D = s->D;
    size_t nvd = (size_t)s->V * (size_t)D;
    for (size_t k = 0; k < nvd; k++)
        s->rs[k] = s->re[k] = -1;
    for (int pos = 0; pos < N; pos++) {
        int n = s->p->order[pos], d = s->p->nodes[n].device;
        for (int j = s->rd_start[n]; j < s->rd_start[n + 1]; j++) {
            int v = s->rd[j];
            size_t k = (size_t)v * (size_t)D + (size_t)d;
            int h = s->prod[v] >= 0 ? s->p->nodes[s->prod[v]].device : s->cpu;
            if (s->rs[k] < 0)
                s->rs[k] = pos;
            s->re[k] = pos;
            if (h != d) {
                size_t kh = (size_t)v * (size_t)D + (size_t)h;
                if (s->rs[kh] < 0)
                    s->rs[kh] = 0; /* a graph input or weight on the host */
                if (s->re[kh] < pos)
                    s->re[kh] = pos;
            }
        }
        const gr_node *node = &s->g->nodes[n];
        for (int o = 0; o < node->n_outputs; o++) {
            int v = node->outputs[o];
            if (v < 0)
                continue;
            size_t k = (size_t)v * (size_t)D + (size_t)d;
            if (s->rs[k] < 0)
                s->rs[k] = pos;
            if (s->re[k] < pos)
                s->re[k] = pos;
        }
    }
    for (int q = 0; q < s->g->n_outputs; q++) {
        int v = s->g->outputs[q];
        int h = s->prod[v] >= 0 ? s->p->nodes[s->prod[v]].device : s->cpu;
        size_t k = (size_t)v * (size_t)D + (size_t)h;
        if (s->rs[k] >= 0)
            s->re[k] = N - 1;
    }
}

/* Bytes value v occupies on device d: float tensors at the device's
 * storage type (an fp16 NPU holds a float tensor in half its host size). */
static size_t dev_value_bytes(const pstate *s, int v, int d)
{
    const gr_value *gv = &s->g->values[v];
    tdm_dtype dt = gv->init && gv->init->kind == TDM_KIND_TENSOR && !gv->is_input ? gv->init->dtype : gv->type.dtype;
    return dev_stored_bytes(&s->p->devs->items[d], dt, s->vbytes[v]);
}

/* Peak bytes on the device of the nodes at positions [a, b) of the order
 * (one device): the weights they read, held for the whole range (as a
 * device holds a compiled partition's weights), plus the largest sum, over
 * the range, of the other tensors resident on the device (compute_residency:
 * including tensors passing through, produced before and read after). */
uint64_t plan_range_peak(pstate *s, int a, int b, int *unknown)
{
    int *order = s->p->order;
    int D = s->D, d = s->p->nodes[order[a]].device;
    uint64_t weights = 0;
    int unk = 0;
    int stamp = ++s->cur_stamp;
    for (int i = a; i < b; i++) {
        int n = order[i];
        for (int j = s->rd_start[n]; j < s->rd_start[n + 1]; j++)
            if (s->is_weight[s->rd[j]])
                s->stamp[s->rd[j]] = stamp;
    }
    int len = b - a;
    for (int i = 0; i <= len; i++)
        s->diff[i] = 0;
    for (int v = 0; v < s->V; v++) {
        size_t k = (size_t)v * (size_t)D + (size_t)d;
        if (s->rs[k] < 0 || s->rs[k] > b - 1 || s->re[k] < a)
            continue;
        if (!s->vknown[v]) {
            unk = 1;
            continue;
        }
        size_t vb = dev_value_bytes(s, v, d);
        if (s->is_weight[v] && s->stamp[v] == stamp) {
            weights += vb;
            continue;
        }
        int lo = s->rs[k] > a ? s->rs[k] : a, hi = s->re[k] < b - 1 ? s->re[k] : b - 1;
        s->diff[lo - a] += (int64_t)vb;
        s->diff[hi - a + 1] -= (int64_t)vb;
    }
    int64_t live = 0, peak = 0;
    for (int i = 0; i < len; i++) {
        live += s->diff[i];
        if (live > peak)
            peak = live;
    }
    if (unknown)
        *unknown = unk;
    return weights + (uint64_t)peak;
}

static uint64_t dev_capacity(const pstate *s, int d)
{
    const dev_instance *di = &s->p->devs->items[d];
    if (!di->dev.iface->memory_capacity)
        return UINT64_MAX;
    uint64_t c = di->dev.iface->memory_capacity(di->dev.ctx);
    return c ? c : UINT64_MAX;
}

static tdm_status make_parts(pstate *s)
{
    int N = s->N;
    s->p->n_parts = 0;
    for (int i = 0; i < N; i++) {
        int n = s->p->order[i];
        int d = s->p->nodes[n].device;
        if (i == 0 || d != s->p->nodes[s->p->order[i - 1]].device || s->brk[n]) {
            plan_part *pp = &s->p->parts[s->p->n_parts++];
            memset(pp, 0, sizeof *pp);
            pp->device = d;
            pp->first = i;
        }
        s->p->parts[s->p->n_parts - 1].count++;
        s->p->nodes[n].partition = s->p->n_parts - 1;
    }
    return TDM_OK;
}

tdm_status plan_memory_pass(pstate *s)
{
    tdm_status st;
    memset(s->brk, 0, (size_t)s->N * sizeof *s->brk);
    for (int round = 0; round <= s->N * s->D; round++) {
        if ((st = make_order(s)) != TDM_OK || (st = make_parts(s)) != TDM_OK)
            return st;
        plan_compute_residency(s);
        int moved = 0;
        for (int i = 0; i < s->N; i++) {
            int n = s->p->order[i], d = s->p->nodes[n].device;
            uint64_t cap = dev_capacity(s, d);
            if (cap == UINT64_MAX)
                continue;
            uint64_t need = plan_range_peak(s, i, i + 1, NULL);
            if (need <= cap)
                continue;
            int e = d + 1;
            while (e < s->D && s->sup[(size_t)n * (size_t)s->D + (size_t)e] != TDM_REASON_OK)
                e++;
            if (e >= s->D)
                e = s->cpu;
            size_t k = (size_t)n * (size_t)s->D + (size_t)d;
            s->over[k] = TDM_REASON_MEMORY;
            const dev_ext *dx = s->p->devs->items[d].ext;
            tdm_dtype sto = dx ? dx->storage : TDM_UNDEFINED;
            s->overdet[k] = plan_fmt(s, "%llu bytes would be resident on %s while this node runs (its weights and the tensors live then%s), "
                                      "more than its capacity of %llu",
                                      (unsigned long long)need, s->p->devs->items[d].name,
                                      sto == TDM_FLOAT16 ? ", float tensors at fp16 storage"
                                      : sto == TDM_BFLOAT16 ? ", float tensors at bf16 storage" : "",
                                      (unsigned long long)cap);
            if (!s->overdet[k])
                return err_set(s->e, TDM_E_NOMEM, "out of memory");
            if (s->pin[n] == d)
                s->pin[n] = -1; /* a pin cannot beat the capacity */
            if ((st = plan_assign(s, n, e)) != TDM_OK)
                return st;
            moved = 1;
        }
        if (!moved)
            break;
    }
    /* split partitions over capacity before the node that overflows */
    int split = 0;
    for (int q = 0; q < s->p->n_parts; q++) {
        plan_part *pp = &s->p->parts[q];
        uint64_t cap = dev_capacity(s, pp->device);
        if (cap == UINT64_MAX)
            continue;
        int a = pp->first, b = pp->first + pp->count;
        if (plan_range_peak(s, a, b, NULL) <= cap)
            continue;
        int start = a;
        for (int i = a + 1; i < b; i++) {
            if (plan_range_peak(s, start, i + 1, NULL) > cap) {
                s->brk[s->p->order[i]] = 1;
                start = i;
                split = 1;
            }
        }
    }
    if (split)
        return make_parts(s);
    return TDM_OK;
}

/* Every partition edge goes forward (the partition graph is a DAG). */
tdm_status plan_check_acyclic(pstate *s)
{
    for (int n = 0; n < s->N; n++)
        for (int j = s->rd_start[n]; j < s->rd_start[n + 1]; j++) {
            int pr = s->prod[s->rd[j]];
            if (pr >= 0 && s->p->nodes[pr].partition > s->p->nodes[n].partition)
                return err_set(s->e, TDM_E_INTERNAL, "partition %d reads from the later partition %d",
                               s->p->nodes[n].partition, s->p->nodes[pr].partition);
        }
    return TDM_OK;
}
