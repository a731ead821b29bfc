/* The planner's granularity (plan.h): op, subgraph, graph and auto
 * (the cost search of plan/auto.h with the memory rule). */
#include "plan/plan_internal.h"
#include "plan/auto.h"
#include "core/mem.h"

#include <math.h>
#include <string.h>

/* ------------------------------------------------------------- granularity */

tdm_status plan_initial_placement(pstate *s)
{
    for (int n = 0; n < s->N; n++) {
        int d = s->p->nodes[n].preferred;
        if (s->pin[n] >= 0 && s->sup[(size_t)n * (size_t)s->D + (size_t)s->pin[n]] == TDM_REASON_OK)
            d = s->pin[n];
        else
            s->pin[n] = s->pin[n] >= 0 ? s->pin[n] : -1;
        tdm_status st = plan_assign(s, n, d);
        if (st)
            return st;
    }
    return TDM_OK;
}

static int is_pinned_here(const pstate *s, int n) { return s->pin[n] >= 0 && s->p->nodes[n].device == s->pin[n]; }

static tdm_status granularity_graph(pstate *s)
{
    int D = s->D, target = s->cpu;
    int unsup = 0;
    for (int d = 0; d < D; d++) {
        int all = 1;
        for (int n = 0; n < s->N && all; n++)
            all = is_pinned_here(s, n) || s->sup[(size_t)n * (size_t)D + (size_t)d] == TDM_REASON_OK;
        if (all) {
            target = d;
            break;
        }
    }
    for (int n = 0; n < s->N; n++)
        unsup += s->sup[(size_t)n * (size_t)D] != TDM_REASON_OK && !is_pinned_here(s, n);
    for (int n = 0; n < s->N; n++) {
        if (is_pinned_here(s, n))
            continue;
        for (int d = 0; d < target; d++) {
            size_t i = (size_t)n * (size_t)D + (size_t)d;
            if (s->sup[i] == TDM_REASON_OK) {
                s->over[i] = TDM_REASON_GRANULARITY;
                s->overdet[i] = plan_fmt(s,
                                          "graph granularity: %s cannot run every node (%d on %s are unsupported), "
                                          "so the whole graph runs on %s",
                                          s->p->devs->items[d].name, unsup, s->p->devs->items[0].name,
                                          s->p->devs->items[target].name);
                if (!s->overdet[i])
                    return err_set(s->e, TDM_E_NOMEM, "out of memory");
            }
        }
        tdm_status st = plan_assign(s, n, target);
        if (st)
            return st;
    }
    return TDM_OK;
}

static tdm_status granularity_subgraph(pstate *s)
{
    int N = s->N, D = s->D;
    int *comp = mem_alloc((size_t)N * sizeof *comp + 1);
    int *queue = mem_alloc((size_t)N * sizeof *queue + 1);
    int *nbdev = mem_alloc((size_t)D * sizeof *nbdev + 1);
    int *vmark = mem_calloc((size_t)s->V + 1, sizeof *vmark);
    tdm_status st = TDM_OK;
    if (!comp || !queue || !nbdev || !vmark) {
        st = err_set(s->e, TDM_E_NOMEM, "out of memory");
        goto done;
    }
    int vstamp = 0;
    for (int round = 0; round < N + 1; round++) {
        int moved = 0;
        for (int n = 0; n < N; n++)
            comp[n] = -1;
        for (int pos = 0; pos < N; pos++) {
            int seed = s->g->order ? s->g->order[pos] : pos;
            int dev = s->p->nodes[seed].device;
            if (comp[seed] >= 0 || dev == s->cpu || is_pinned_here(s, seed))
                continue;
            /* BFS over activation edges between same-device, unpinned nodes */
            int qh = 0, qt = 0;
            queue[qt++] = seed;
            comp[seed] = seed;
            while (qh < qt) {
                int n = queue[qh++];
                for (int j = s->rd_start[n]; j < s->rd_start[n + 1]; j++) {
                    int pr = s->prod[s->rd[j]];
                    if (pr >= 0 && comp[pr] < 0 && s->p->nodes[pr].device == dev && !is_pinned_here(s, pr)) {
                        comp[pr] = seed;
                        queue[qt++] = pr;
                    }
                }
                const gr_node *node = &s->g->nodes[n];
                for (int o = 0; o < node->n_outputs; o++) {
                    int v = node->outputs[o];
                    if (v < 0)
                        continue;
                    for (int j = s->cs_start[v]; j < s->cs_start[v + 1]; j++) {
                        int c = s->cs[j];
                        if (comp[c] < 0 && s->p->nodes[c].device == dev && !is_pinned_here(s, c)) {
                            comp[c] = seed;
                            queue[qt++] = c;
                        }
                    }
                }
            }
            /* neighbours */
            for (int d = 0; d < D; d++)
                nbdev[d] = 0;
            int n_nb = 0;
            vstamp++;
            double copies = 0;
            for (int q = 0; q < qt; q++) {
                int n = queue[q];
                for (int j = s->rd_start[n]; j < s->rd_start[n + 1]; j++) {
                    int v = s->rd[j], pr = s->prod[v];
                    if (pr >= 0 && comp[pr] == seed)
                        continue;
                    if (pr >= 0) {
                        nbdev[s->p->nodes[pr].device]++;
                        n_nb++;
                    }
                    if (vmark[v] != vstamp) {
                        int known, m = 0;
                        size_t b = plan_value_bytes(s->g, v, &known);
                        vmark[v] = vstamp;
                        copies += plan_copy_est(s, pr >= 0 ? s->p->nodes[pr].device : s->cpu, dev, b, &m);
                    }
                }
                const gr_node *node = &s->g->nodes[n];
                for (int o = 0; o < node->n_outputs; o++) {
                    int v = node->outputs[o], out_copy = 0;
                    if (v < 0)
                        continue;
                    for (int j = s->cs_start[v]; j < s->cs_start[v + 1]; j++) {
                        int c = s->cs[j];
                        if (comp[c] == seed)
                            continue;
                        nbdev[s->p->nodes[c].device]++;
                        n_nb++;
                        out_copy = 1;
                    }
                    if (out_copy) {
                        int known, m = 0;
                        size_t b = plan_value_bytes(s->g, v, &known);
                        copies += plan_copy_est(s, dev, s->cpu, b, &m);
                    }
                }
            }
            if (!n_nb)
                continue;
            int target = -1;
            for (int d = 0; d < D; d++)
                if (nbdev[d])
                    target = target < 0 ? d : -2;
            if (target < 0 || target <= dev)
                continue;
            int ok = 1;
            for (int q = 0; q < qt && ok; q++)
                ok = s->sup[(size_t)queue[q] * (size_t)D + (size_t)target] == TDM_REASON_OK;
            if (!ok)
                continue;
            double on_dev = 0, on_target = 0;
            int have = 1;
            for (int q = 0; q < qt && have; q++) {
                double a = plan_node_est(s, queue[q], dev, NULL), b = plan_node_est(s, queue[q], target, NULL);
                have = a >= 0 && b >= 0;
                on_dev += a;
                on_target += b;
            }
            int move = have ? on_target <= on_dev + copies : qt < PLAN_ISLAND_NODES;
            if (!move)
                continue;
            const char *why =
                have ? plan_fmt(s,
                                 "subgraph granularity: an island of %d node%s surrounded by %s, estimated %.3f ms "
                                 "there against %.3f ms here plus %.3f ms of copies",
                                 qt, qt == 1 ? "" : "s", s->p->devs->items[target].name, on_target, on_dev, copies)
                     : plan_fmt(s,
                                 "subgraph granularity: an island of %d node%s (fewer than %d) surrounded by %s "
                                 "is kept with its neighbours",
                                 qt, qt == 1 ? "" : "s", PLAN_ISLAND_NODES, s->p->devs->items[target].name);
            if (!why) {
                st = err_set(s->e, TDM_E_NOMEM, "out of memory");
                goto done;
            }
            for (int q = 0; q < qt; q++) {
                int n = queue[q];
                for (int d = dev; d < target; d++) {
                    size_t i = (size_t)n * (size_t)D + (size_t)d;
                    if (s->sup[i] == TDM_REASON_OK) {
                        s->over[i] = TDM_REASON_GRANULARITY;
                        s->overdet[i] = why;
                    }
                }
                if ((st = plan_assign(s, n, target)) != TDM_OK)
                    goto done;
            }
            moved = 1;
        }
        if (!moved)
            break;
    }
done:
    mem_free(comp);
    mem_free(queue);
    mem_free(nbdev);
    mem_free(vmark);
    return st;
}

/* The buffers of a cost problem (plan/auto.h) over the current graph. */
typedef struct cost_bufs {
    double *ms, *up, *down, *part;
    unsigned char *outs;
    int *dev;
} cost_bufs;

static void cost_bufs_free(cost_bufs *b)
{
    mem_free(b->ms);
    mem_free(b->up);
    mem_free(b->down);
    mem_free(b->part);
    mem_free(b->outs);
    mem_free(b->dev);
}

/* Allocates b and fills *pr with everything but node_ms's values: the
 * host↔device copy estimates of each known value, the graph-output marks,
 * each device's per-partition round trip (plan_part_est, as plan_summarize
 * adds it) and the graph order. Returns 0 on out of memory
 * (b is then freed). */
static int cost_bufs_init(pstate *s, cost_bufs *b, plan_cost_problem *pr)
{
    int N = s->N, D = s->D, V = s->V;
    b->ms = mem_alloc((size_t)N * (size_t)D * sizeof *b->ms + sizeof *b->ms);
    b->up = mem_calloc((size_t)V * (size_t)D + 1, sizeof *b->up);
    b->down = mem_calloc((size_t)V * (size_t)D + 1, sizeof *b->down);
    b->part = mem_calloc((size_t)D + 1, sizeof *b->part);
    b->outs = mem_calloc((size_t)V + 1, 1);
    b->dev = mem_alloc((size_t)N * sizeof *b->dev + sizeof *b->dev);
    if (!b->ms || !b->up || !b->down || !b->part || !b->outs || !b->dev) {
        cost_bufs_free(b);
        return 0;
    }
    for (int v = 0; v < V; v++)
        for (int d = 0; d < D && s->vknown[v]; d++) {
            int m = 0;
            if (d == s->cpu) /* copy_est: cpu's copies are free */
                continue;
            b->up[(size_t)v * (size_t)D + (size_t)d] = plan_copy_est(s, s->cpu, d, s->vbytes[v], &m);
            b->down[(size_t)v * (size_t)D + (size_t)d] = plan_copy_est(s, d, s->cpu, s->vbytes[v], &m);
        }
    for (int k = 0; k < s->g->n_outputs; k++)
        if (s->g->outputs[k] >= 0)
            b->outs[s->g->outputs[k]] = 1;
    for (int d = 0; d < s->cpu; d++)
        b->part[d] = plan_part_est(s, d);
    *pr = (plan_cost_problem){N, D, b->ms, V, s->prod, s->rd_start, s->rd, b->outs, b->up, b->down, b->part, s->gpos};
    return 1;
}

/* Granularity auto (plan.h, plan/auto.h). Nodes stay excluded from the
 * devices the memory rule moved them off (over == MEMORY) and from those a
 * pin or a precision verdict keeps them off. */
static tdm_status granularity_auto(pstate *s)
{
    int N = s->N, D = s->D;
    tdm_plan *p = s->p;
    tdm_status st = TDM_OK;
    /* COST marks of an earlier round are recomputed */
    for (size_t k = 0; k < (size_t)N * (size_t)D; k++)
        if (s->over[k] == TDM_REASON_COST)
            s->over[k] = TDM_REASON_OK;
    for (int n = 0; n < N; n++)
        for (int d = 0; d < D; d++) {
            size_t k = (size_t)n * (size_t)D + (size_t)d;
            if (s->sup[k] == TDM_REASON_OK && plan_node_est(s, n, d, NULL) < 0) {
                p->auto_method = "subgraph (a device gives no estimates, so the subgraph rules apply)";
                return granularity_subgraph(s);
            }
        }
    cost_bufs cb;
    plan_cost_problem pr;
    if (!cost_bufs_init(s, &cb, &pr))
        return err_set(s->e, TDM_E_NOMEM, "out of memory");
    double *ms = cb.ms;
    int *dev = cb.dev;
    for (int n = 0; n < N; n++)
        for (int d = 0; d < D; d++) {
            size_t k = (size_t)n * (size_t)D + (size_t)d;
            int ok = s->sup[k] == TDM_REASON_OK && s->over[k] == TDM_REASON_OK;
            if (s->pin[n] >= 0 && s->sup[(size_t)n * (size_t)D + (size_t)s->pin[n]] == TDM_REASON_OK &&
                s->over[(size_t)n * (size_t)D + (size_t)s->pin[n]] == TDM_REASON_OK)
                ok = ok && d == s->pin[n];
            /* the second search: cpu nodes priced inside an all-cpu
             * fusion, a fusing vnpu's inside its epilogue fusion of the
             * whole graph */
            const int *head = !s->search_fused ? NULL : d == s->cpu ? s->whole_head : s->whole_epi_head;
            ms[k] = !ok ? -1 : head ? plan_node_est_in(s, n, d, head, NULL) : plan_node_est(s, n, d, NULL);
        }
    /* a node every device refused by over-marks keeps cpu */
    for (int n = 0; n < N; n++) {
        int any = 0;
        for (int d = 0; d < D; d++)
            any |= ms[(size_t)n * (size_t)D + (size_t)d] >= 0;
        if (!any) {
            double c = plan_node_est(s, n, s->cpu, NULL);
            ms[(size_t)n * (size_t)D + (size_t)s->cpu] = c >= 0 ? c : 0;
        }
    }
    if ((st = plan_cost_solve(s->e, &pr, dev, &p->auto_method, &p->auto_cut_ms)) != TDM_OK)
        goto done;
    p->auto_cost_ms = plan_cost_eval(&pr, dev);
    p->auto_rounds++;
    for (int n = 0; n < N; n++) {
        int d = dev[n];
        for (int e = 0; e < d; e++) {
            size_t k = (size_t)n * (size_t)D + (size_t)e;
            if (s->sup[k] != TDM_REASON_OK || s->over[k] != TDM_REASON_OK)
                continue;
            s->over[k] = TDM_REASON_COST;
            s->overdet[k] = plan_fmt(s,
                                      "granularity auto: estimated %.4f ms on %s against %.4f ms on %s; the "
                                      "placement of least estimated time (%.4f ms with copies, %s) puts it on %s",
                                      ms[(size_t)n * (size_t)D + (size_t)d], p->devs->items[d].name,
                                      ms[k], p->devs->items[e].name, p->auto_cost_ms, p->auto_method,
                                      p->devs->items[d].name);
            if (!s->overdet[k]) {
                st = err_set(s->e, TDM_E_NOMEM, "out of memory");
                goto done;
            }
        }
        if ((st = plan_assign(s, n, d)) != TDM_OK)
            goto done;
    }
done:
    cost_bufs_free(&cb);
    return st;
}

/* auto: search, apply the memory rule, exclude what it moved, search
 * again until it moves nothing (exclusions only grow, so this ends). */
static tdm_status auto_with_memory(pstate *s)
{
    tdm_status st;
    size_t nd = (size_t)s->N * (size_t)s->D;
    for (int round = 0; round <= s->N * s->D + 1; round++) {
        size_t before = 0, after = 0;
        for (size_t k = 0; k < nd; k++)
            before += s->over[k] == TDM_REASON_MEMORY;
        if ((st = granularity_auto(s)) != TDM_OK || (st = plan_memory_pass(s)) != TDM_OK)
            return st;
        for (size_t k = 0; k < nd; k++)
            after += s->over[k] == TDM_REASON_MEMORY;
        s->p->auto_memory_moves = (int)after;
        if (after == before)
            break;
    }
    return TDM_OK;
}

/* Granularity g from the initial placement, the memory rule included. */
tdm_status plan_place(pstate *s, plan_granularity g)
{
    tdm_status st = TDM_OK;
    if (g == PLAN_GRAN_AUTO)
        return auto_with_memory(s);
    if (g == PLAN_GRAN_GRAPH)
        st = granularity_graph(s);
    else if (g == PLAN_GRAN_SUBGRAPH)
        st = granularity_subgraph(s);
    if (st || (st = plan_memory_pass(s)) != TDM_OK)
        return st;
    /* memory moves can leave islands behind: absorb them and check again
     * (both passes only move nodes to later devices, so this ends) */
    for (int round = 0; g == PLAN_GRAN_SUBGRAPH && round < s->D * 4; round++) {
        int before = 0, after = 0;
        for (int n = 0; n < s->N; n++)
            before += s->p->nodes[n].device;
        if ((st = granularity_subgraph(s)) != TDM_OK || (st = plan_memory_pass(s)) != TDM_OK)
            return st;
        for (int n = 0; n < s->N; n++)
            after += s->p->nodes[n].device;
        if (after == before)
            break;
    }
    return TDM_OK;
}

typedef struct place_snap {
    tdm_reason *over;
    const char **overdet;
    int *pin, *dev;
} place_snap;

static int snap_alloc(pstate *s, place_snap *x)
{
    size_t nd = (size_t)s->N * (size_t)s->D;
    x->over = plan_arr(s, nd, sizeof *x->over);
    x->overdet = plan_arr(s, nd, sizeof *x->overdet);
    x->pin = plan_arr(s, (size_t)s->N, sizeof *x->pin);
    x->dev = plan_arr(s, (size_t)s->N, sizeof *x->dev);
    return x->over && x->overdet && x->pin && x->dev ? 0 : -1;
}

static void snap_save(pstate *s, place_snap *x)
{
    size_t nd = (size_t)s->N * (size_t)s->D;
    memcpy(x->over, s->over, nd * sizeof *x->over);
    memcpy(x->overdet, s->overdet, nd * sizeof *x->overdet);
    memcpy(x->pin, s->pin, (size_t)s->N * sizeof *x->pin);
    for (int n = 0; n < s->N; n++)
        x->dev[n] = s->p->nodes[n].device;
}

static tdm_status snap_restore(pstate *s, const place_snap *x)
{
    size_t nd = (size_t)s->N * (size_t)s->D;
    tdm_status st;
    memcpy(s->over, x->over, nd * sizeof *x->over);
    memcpy(s->overdet, x->overdet, nd * sizeof *x->overdet);
    memcpy(s->pin, x->pin, (size_t)s->N * sizeof *x->pin);
    for (int n = 0; n < s->N; n++)
        if ((st = plan_assign(s, n, x->dev[n])) != TDM_OK)
            return st;
    return TDM_OK;
}

/* The plan's estimated total for the current placement, whose order and
 * partitions plan_memory_pass left: what plan_summarize reports (node
 * estimates + copies + each device partition's round trip). */
static double plan_total_now(pstate *s, tdm_status *st)
{
    if ((*st = plan_make_copies(s)) != TDM_OK)
        return INFINITY;
    if ((*st = plan_summarize(s)) != TDM_OK)
        return INFINITY;
    return s->p->est_total;
}

/* Every node cpu may run on cpu (pins kept), the memory rule applied. */
static tdm_status place_cpu_only(pstate *s)
{
    int D = s->D;
    tdm_status st;
    for (int n = 0; n < s->N; n++) {
        if (is_pinned_here(s, n) || s->sup[(size_t)n * (size_t)D + (size_t)s->cpu] != TDM_REASON_OK)
            continue;
        for (int d = 0; d < s->cpu; d++) {
            size_t k = (size_t)n * (size_t)D + (size_t)d;
            if (s->sup[k] == TDM_REASON_OK && s->over[k] == TDM_REASON_OK) {
                s->over[k] = TDM_REASON_COST;
                s->overdet[k] = "granularity auto: the all-cpu placement has the least estimated time of the "
                                "placements evaluated (the ledger's auto.method gives the figures)";
            }
        }
        if ((st = plan_assign(s, n, s->cpu)) != TDM_OK)
            return st;
    }
    return plan_memory_pass(s);
}

/* auto: the search with the memory rule; the memory rule, the
 * partitions' round trips and the cpu partitions' fusion make the problem
 * non-linear, so the search is run twice — cpu nodes at their unfused
 * prices, and at what they cost inside an all-cpu fusion (a node fused
 * away there 0; a fusing vnpu's nodes likewise inside its epilogue fusion
 * of the whole graph) — and the placements of op (greedy), subgraph, graph and
 * cpu-only are evaluated too, each by the plan's own estimated total
 * (plan_summarize: cpu partitions fused as they run); the cheapest wins
 * (ties: the first search's); p->auto_method says which and gives every
 * figure. */
tdm_status plan_auto_best(pstate *s)
{
    tdm_plan *p = s->p;
    place_snap base, best;
    tdm_status st;
    if (snap_alloc(s, &base) || snap_alloc(s, &best))
        return err_set(s->e, TDM_E_NOMEM, "out of memory");
    snap_save(s, &base);
    if ((st = plan_place(s, PLAN_GRAN_AUTO)) != TDM_OK)
        return st;
    double search = plan_total_now(s, &st), best_cost = search, cost[5];
    if (st != TDM_OK)
        return st;
    const char *method = p->auto_method;
    snap_save(s, &best);
    static const char *const names[] = {"op (greedy)", "subgraph", "graph", "cpu-only", "search at fused cpu prices"};
    static const plan_granularity others[] = {PLAN_GRAN_OP, PLAN_GRAN_SUBGRAPH, PLAN_GRAN_GRAPH};
    int winner = -1;
    for (int k = 0; k < 5; k++) {
        if ((st = snap_restore(s, &base)) != TDM_OK)
            return st;
        if (k == 4 && (st = plan_whole_fusion(s)) == TDM_OK) {
            s->search_fused = 1;
            st = plan_place(s, PLAN_GRAN_AUTO);
            s->search_fused = 0;
        } else if (k < 4) {
            st = k < 3 ? plan_place(s, others[k]) : place_cpu_only(s);
        }
        if (st != TDM_OK)
            return st;
        cost[k] = plan_total_now(s, &st);
        if (st != TDM_OK)
            return st;
        if (cost[k] < best_cost - 1e-9 * (1 + best_cost)) {
            best_cost = cost[k];
            winner = k;
            snap_save(s, &best);
        }
    }
    if ((st = snap_restore(s, &best)) != TDM_OK || (st = plan_memory_pass(s)) != TDM_OK)
        return st;
    if (winner >= 0)
        p->auto_method = plan_fmt(s,
                                   "the %s placement: its estimated %.4f ms (nodes, copies and partition round trips) "
                                   "is below the %s search's %.4f ms, so auto takes it (op %.4f, subgraph %.4f, "
                                   "graph %.4f, cpu-only %.4f, search at fused cpu prices %.4f ms)",
                                   names[winner], best_cost, method, search, cost[0], cost[1], cost[2], cost[3],
                                   cost[4]);
    else
        p->auto_method = plan_fmt(s,
                                   "%s: estimated %.4f ms (nodes, copies and partition round trips), no more than "
                                   "op %.4f, subgraph %.4f, graph %.4f, cpu-only %.4f, the search at fused cpu "
                                   "prices %.4f ms",
                                   method, best_cost, cost[0], cost[1], cost[2], cost[3], cost[4]);
    if (!p->auto_method)
        return err_set(s->e, TDM_E_NOMEM, "out of memory");
    p->auto_cost_ms = best_cost;
    return TDM_OK;
}
