/* `--granularity auto`: minimum-cut placement (construction in auto.h). */
#include "plan/auto.h"
#include "core/mem.h"

#include <math.h>
#include <string.h>

static int allowed(const plan_cost_problem *pr, int n, int d)
{
    double v = pr->node_ms[(size_t)n * (size_t)pr->n_dev + (size_t)d];
    return v >= 0 && isfinite(v);
}

/* Scratch of the cost function: the copy marks and the device-sticky
 * order's ready heaps (one per device, keyed by graph position). */
typedef struct cost_ws {
    int N, D;
    unsigned char *mark; /* v*D+d: v is read on d */
    int *succ_start, *succ; /* CSR: producer → reader, once per value read */
    int *indeg0, *indeg;
    int *heap, *hn;       /* d*N + i; hn[d] */
} cost_ws;

static void ws_free(cost_ws *w)
{
    mem_free(w->mark);
    mem_free(w->succ_start);
    mem_free(w->succ);
    mem_free(w->indeg0);
    mem_free(w->indeg);
    mem_free(w->heap);
    mem_free(w->hn);
    memset(w, 0, sizeof *w);
}

static int ws_init(const plan_cost_problem *pr, cost_ws *w)
{
    int N = pr->n_nodes, D = pr->n_dev;
    size_t nrd = (size_t)pr->rd_start[N];
    memset(w, 0, sizeof *w);
    w->N = N;
    w->D = D;
    w->mark = mem_calloc((size_t)pr->n_values * (size_t)D + 1, 1);
    w->succ_start = mem_calloc((size_t)N + 2, sizeof *w->succ_start);
    w->succ = mem_alloc(nrd * sizeof *w->succ + sizeof *w->succ);
    w->indeg0 = mem_calloc((size_t)N + 1, sizeof *w->indeg0);
    w->indeg = mem_alloc((size_t)N * sizeof *w->indeg + sizeof *w->indeg);
    w->heap = mem_alloc((size_t)N * (size_t)D * sizeof *w->heap + sizeof *w->heap);
    w->hn = mem_alloc((size_t)D * sizeof *w->hn + sizeof *w->hn);
    if (!w->mark || !w->succ_start || !w->succ || !w->indeg0 || !w->indeg || !w->heap || !w->hn) {
        ws_free(w);
        return -1;
    }
    for (int n = 0; n < N; n++)
        for (int j = pr->rd_start[n]; j < pr->rd_start[n + 1]; j++) {
            int p = pr->prod[pr->rd[j]];
            if (p >= 0 && p != n) {
                w->succ_start[p + 2]++;
                w->indeg0[n]++;
            }
        }
    for (int n = 0; n < N; n++)
        w->succ_start[n + 2] += w->succ_start[n + 1];
    for (int n = 0; n < N; n++)
        for (int j = pr->rd_start[n]; j < pr->rd_start[n + 1]; j++) {
            int p = pr->prod[pr->rd[j]];
            if (p >= 0 && p != n)
                w->succ[w->succ_start[p + 1]++] = n;
        }
    return 0;
}

static int gpos_of(const plan_cost_problem *pr, int n) { return pr->gpos ? pr->gpos[n] : n; }

static void heap_push(const plan_cost_problem *pr, int *h, int *cnt, int n)
{
    int i = (*cnt)++;
    while (i > 0) {
        int up = (i - 1) / 2;
        if (gpos_of(pr, h[up]) <= gpos_of(pr, n))
            break;
        h[i] = h[up];
        i = up;
    }
    h[i] = n;
}

static int heap_pop(const plan_cost_problem *pr, int *h, int *cnt)
{
    int top = h[0], last = h[--(*cnt)], i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= *cnt)
            break;
        if (c + 1 < *cnt && gpos_of(pr, h[c + 1]) < gpos_of(pr, h[c]))
            c++;
        if (gpos_of(pr, last) <= gpos_of(pr, h[c]))
            break;
        h[i] = h[c];
        i = c;
    }
    if (*cnt)
        h[i] = last;
    return top;
}

/* The device-sticky order of plan.h "order" (memory.c's make_order, the
 * same picks in O((N+E) log N)): order[k] (may be NULL) and the partitions'
 * round trips; *n_parts the partitions. INFINITY on a cycle. */
static double ws_order(const plan_cost_problem *pr, const int *dev, cost_ws *w, int *order, int *n_parts)
{
    int N = pr->n_nodes, D = pr->n_dev, cur = -1, parts = 0;
    double total = 0;
    memcpy(w->indeg, w->indeg0, (size_t)N * sizeof *w->indeg);
    for (int d = 0; d < D; d++)
        w->hn[d] = 0;
    for (int n = 0; n < N; n++)
        if (!w->indeg[n])
            heap_push(pr, w->heap + (size_t)dev[n] * (size_t)N, &w->hn[dev[n]], n);
    for (int k = 0; k < N; k++) {
        int d = cur >= 0 && w->hn[cur] ? cur : -1;
        for (int e = 0; !(cur >= 0 && w->hn[cur]) && e < D; e++) /* else the first ready node */
            if (w->hn[e] && (d < 0 || gpos_of(pr, w->heap[(size_t)e * (size_t)N]) < gpos_of(pr, w->heap[(size_t)d * (size_t)N])))
                d = e;
        if (d < 0)
            return INFINITY;
        int n = heap_pop(pr, w->heap + (size_t)d * (size_t)N, &w->hn[d]);
        if (order)
            order[k] = n;
        if (d != cur) {
            parts++;
            if (pr->part_ms && d != D - 1)
                total += pr->part_ms[d];
            cur = d;
        }
        for (int j = w->succ_start[n]; j < w->succ_start[n + 1]; j++) {
            int c = w->succ[j];
            if (--w->indeg[c] == 0)
                heap_push(pr, w->heap + (size_t)dev[c] * (size_t)N, &w->hn[dev[c]], c);
        }
    }
    if (n_parts)
        *n_parts = parts;
    return total;
}

static double ws_eval(const plan_cost_problem *pr, const int *dev, cost_ws *w, double *copies_ms, double *parts_ms,
                      int *n_parts)
{
    int D = pr->n_dev, cpu = D - 1;
    double nodes = 0, copies = 0;
    for (int n = 0; n < pr->n_nodes; n++) {
        if (dev[n] < 0 || dev[n] >= D || !allowed(pr, n, dev[n]))
            return INFINITY;
        nodes += pr->node_ms[(size_t)n * (size_t)D + (size_t)dev[n]];
    }
    /* readers' devices per value: walk nodes once, mark (value, device) */
    memset(w->mark, 0, (size_t)pr->n_values * (size_t)D);
    for (int n = 0; n < pr->n_nodes; n++)
        for (int j = pr->rd_start[n]; j < pr->rd_start[n + 1]; j++)
            w->mark[(size_t)pr->rd[j] * (size_t)D + (size_t)dev[n]] = 1;
    for (int v = 0; v < pr->n_values; v++) {
        int home = pr->prod[v] >= 0 ? dev[pr->prod[v]] : cpu;
        if (pr->is_output && pr->is_output[v])
            w->mark[(size_t)v * (size_t)D + (size_t)cpu] = 1;
        for (int d = 0; d < D; d++)
            if (w->mark[(size_t)v * (size_t)D + (size_t)d] && d != home)
                copies += pr->down_ms[(size_t)v * (size_t)D + (size_t)home] + pr->up_ms[(size_t)v * (size_t)D + (size_t)d];
    }
    double parts = 0;
    if (pr->part_ms || n_parts)
        parts = ws_order(pr, dev, w, NULL, n_parts);
    if (copies_ms)
        *copies_ms = copies;
    if (parts_ms)
        *parts_ms = parts;
    return nodes + copies + parts;
}

double plan_cost_eval_parts(const plan_cost_problem *pr, const int *dev, double *copies_ms, double *parts_ms, int *n_parts)
{
    cost_ws w;
    if (pr->n_dev < 1 || pr->n_dev > 64 || ws_init(pr, &w))
        return INFINITY;
    double c = ws_eval(pr, dev, &w, copies_ms, parts_ms, n_parts);
    ws_free(&w);
    return c;
}

double plan_cost_eval(const plan_cost_problem *pr, const int *dev)
{
    return plan_cost_eval_parts(pr, dev, NULL, NULL, NULL);
}

/* ------------------------------------------------------------- max flow */

typedef struct flow {
    int nv, ne, cap_e;
    int *head, *next, *to;
    double *cap;
    int *level, *it, *queue;
} flow;

static int flow_edge(flow *f, int a, int b, double c)
{
    if (f->ne + 2 > f->cap_e) {
        size_t cap = (size_t)f->cap_e;
        size_t c1 = cap, c2 = cap, c3 = cap;
        if (mem_grow((void **)&f->next, &c1, (size_t)f->ne + 2, sizeof *f->next) ||
            mem_grow((void **)&f->to, &c2, (size_t)f->ne + 2, sizeof *f->to) ||
            mem_grow((void **)&f->cap, &c3, (size_t)f->ne + 2, sizeof *f->cap))
            return -1;
        f->cap_e = (int)(c1 < c2 ? (c1 < c3 ? c1 : c3) : (c2 < c3 ? c2 : c3));
    }
    f->to[f->ne] = b;
    f->cap[f->ne] = c;
    f->next[f->ne] = f->head[a];
    f->head[a] = f->ne++;
    f->to[f->ne] = a;
    f->cap[f->ne] = 0;
    f->next[f->ne] = f->head[b];
    f->head[b] = f->ne++;
    return 0;
}

static void flow_free(flow *f)
{
    mem_free(f->head);
    mem_free(f->next);
    mem_free(f->to);
    mem_free(f->cap);
    mem_free(f->level);
    mem_free(f->it);
    mem_free(f->queue);
}

static int flow_bfs(flow *f, int s, int t, double eps)
{
    for (int i = 0; i < f->nv; i++)
        f->level[i] = -1;
    int qh = 0, qt = 0;
    f->queue[qt++] = s;
    f->level[s] = 0;
    while (qh < qt) {
        int a = f->queue[qh++];
        for (int e = f->head[a]; e >= 0; e = f->next[e])
            if (f->cap[e] > eps && f->level[f->to[e]] < 0) {
                f->level[f->to[e]] = f->level[a] + 1;
                f->queue[qt++] = f->to[e];
            }
    }
    return f->level[t] >= 0;
}

/* Iterative blocking-flow DFS (no recursion: graphs have thousands of
 * vertices). Returns the flow pushed along one path, 0 when none. */
static double flow_path(flow *f, int s, int t, double eps, int *stack_v, int *stack_e)
{
    int depth = 0;
    stack_v[0] = s;
    while (depth >= 0) {
        int a = stack_v[depth];
        if (a == t) {
            double push = INFINITY;
            for (int k = 0; k < depth; k++)
                if (f->cap[stack_e[k]] < push)
                    push = f->cap[stack_e[k]];
            for (int k = 0; k < depth; k++) {
                f->cap[stack_e[k]] -= push;
                f->cap[stack_e[k] ^ 1] += push;
            }
            return push;
        }
        int e = f->it[a];
        while (e >= 0 && !(f->cap[e] > eps && f->level[f->to[e]] == f->level[a] + 1))
            e = f->next[e];
        f->it[a] = e;
        if (e < 0) {
            f->level[a] = -1; /* dead end */
            depth--;
            if (depth >= 0)
                f->it[stack_v[depth]] = f->next[f->it[stack_v[depth]]];
            continue;
        }
        stack_e[depth] = e;
        stack_v[++depth] = f->to[e];
    }
    return 0;
}

static tdm_status flow_run(tdm_err *e, flow *f, int s, int t, double eps, double *value)
{
    int *sv = mem_alloc((size_t)f->nv * sizeof *sv + sizeof *sv);
    int *se = mem_alloc((size_t)f->nv * sizeof *se + sizeof *se);
    if (!sv || !se) {
        mem_free(sv);
        mem_free(se);
        return err_set(e, TDM_E_NOMEM, "out of memory");
    }
    double total = 0;
    while (flow_bfs(f, s, t, eps)) {
        for (int i = 0; i < f->nv; i++)
            f->it[i] = f->head[i];
        double push;
        while ((push = flow_path(f, s, t, eps, sv, se)) > 0)
            total += push;
    }
    /* source side: reachable in the residual graph */
    flow_bfs(f, s, t, eps);
    mem_free(sv);
    mem_free(se);
    *value = total;
    return TDM_OK;
}

/* The exact two-device placement between accelerator a and cpu: dev[n] is
 * a or cpu (nodes a cannot take are on cpu). pen_down / pen_up (ms) are
 * added to every copy of a produced tensor out of / into a (0: the cost of
 * plan/auto.h without round trips). */
static tdm_status cut_two(tdm_err *e, const plan_cost_problem *pr, int a, double pen_down, double pen_up, int *dev,
                          double *cut)
{
    int N = pr->n_nodes, V = pr->n_values, D = pr->n_dev, cpu = D - 1;
    flow f;
    tdm_status st = TDM_OK;
    memset(&f, 0, sizeof f);
    /* vertices: s, t, nodes, d_v, u_v */
    size_t nv = 2 + (size_t)N + 2 * (size_t)V;
    if (nv > 0x3fffffff)
        return err_set(e, TDM_E_NOMEM, "the graph is too large for the min-cut placement");
    f.nv = (int)nv;
    f.head = mem_alloc(nv * sizeof *f.head);
    f.level = mem_alloc(nv * sizeof *f.level);
    f.it = mem_alloc(nv * sizeof *f.it);
    f.queue = mem_alloc(nv * sizeof *f.queue);
    int *nread = mem_calloc((size_t)V + 1, sizeof *nread);
    if (!f.head || !f.level || !f.it || !f.queue || !nread)
        goto nomem;
    for (size_t i = 0; i < nv; i++)
        f.head[i] = -1;
    /* infinity: more than every finite capacity together */
    double big = 1;
    for (int n = 0; n < N; n++) {
        if (allowed(pr, n, a))
            big += pr->node_ms[(size_t)n * (size_t)D + (size_t)a];
        if (allowed(pr, n, cpu))
            big += pr->node_ms[(size_t)n * (size_t)D + (size_t)cpu];
    }
    for (int v = 0; v < V; v++)
        big += pr->up_ms[(size_t)v * (size_t)D + (size_t)a] + pr->down_ms[(size_t)v * (size_t)D + (size_t)a] + pen_down +
               pen_up;
    double inf = big * 4;
    int S = 0, T = 1;
    for (int n = 0; n < N; n++) {
        int on_a = allowed(pr, n, a), on_c = allowed(pr, n, cpu);
        double ca = on_a ? pr->node_ms[(size_t)n * (size_t)D + (size_t)a] : inf;
        double cc = on_c ? pr->node_ms[(size_t)n * (size_t)D + (size_t)cpu] : inf;
        if (!on_a && !on_c) {
            if (D == 2) {
                st = err_set(e, TDM_E_UNSUPPORTED, "node %d has no device it may run on", n);
                goto done;
            }
            cc = 0; /* a third device's node: held on the cpu side, placed by the caller */
        }
        if (flow_edge(&f, S, 2 + n, cc) || flow_edge(&f, 2 + n, T, ca))
            goto nomem;
        for (int j = pr->rd_start[n]; j < pr->rd_start[n + 1]; j++)
            nread[pr->rd[j]]++;
    }
    for (int v = 0; v < V; v++) {
        int p = pr->prod[v], out = pr->is_output && pr->is_output[v];
        int dv = 2 + N + v, uv = 2 + N + V + v;
        double down = pr->down_ms[(size_t)v * (size_t)D + (size_t)a], up = pr->up_ms[(size_t)v * (size_t)D + (size_t)a];
        if (p >= 0) {
            down += pen_down;
            up += pen_up;
        }
        if (!nread[v] && !out)
            continue;
        if (p >= 0 && (down > 0) && flow_edge(&f, 2 + p, dv, down))
            goto nomem;
        if (p >= 0 && out && down > 0 && flow_edge(&f, dv, T, inf))
            goto nomem;
        if (up > 0 && nread[v] && flow_edge(&f, uv, p >= 0 ? 2 + p : T, up))
            goto nomem;
    }
    for (int n = 0; n < N; n++)
        for (int j = pr->rd_start[n]; j < pr->rd_start[n + 1]; j++) {
            int v = pr->rd[j], p = pr->prod[v];
            double down = pr->down_ms[(size_t)v * (size_t)D + (size_t)a], up = pr->up_ms[(size_t)v * (size_t)D + (size_t)a];
            if (p >= 0) {
                down += pen_down;
                up += pen_up;
            }
            if (p == n)
                continue;
            if (p >= 0 && down > 0 && flow_edge(&f, 2 + N + v, 2 + n, inf))
                goto nomem;
            if (up > 0 && flow_edge(&f, 2 + n, 2 + N + V + v, inf))
                goto nomem;
        }
    if ((st = flow_run(e, &f, S, T, big * 1e-13, cut)) != TDM_OK)
        goto done;
    for (int n = 0; n < N; n++)
        dev[n] = f.level[2 + n] >= 0 && allowed(pr, n, a) ? a : cpu;
    goto done;
nomem:
    st = err_set(e, TDM_E_NOMEM, "out of memory");
done:
    mem_free(nread);
    flow_free(&f);
    return st;
}

/* Moves every node of each run of one device in the order (a partition)
 * to another device that may run all of it, keeping a move that lowers
 * the cost; returns 1 when one did. */
static int partition_moves(const plan_cost_problem *pr, int *dev, cost_ws *w, int *order, double *best)
{
    int N = pr->n_nodes, D = pr->n_dev, improved = 0;
    for (int round = 0; round < N + 1; round++) {
        int moved = 0;
        if (!isfinite(ws_order(pr, dev, w, order, NULL)))
            return improved;
        for (int i = 0; i < N && !moved;) {
            int j = i, d = dev[order[i]];
            while (j < N && dev[order[j]] == d)
                j++;
            for (int t = 0; t < D && !moved; t++) {
                int ok = t != d;
                for (int k = i; k < j && ok; k++)
                    ok = allowed(pr, order[k], t);
                if (!ok)
                    continue;
                for (int k = i; k < j; k++)
                    dev[order[k]] = t;
                double c = ws_eval(pr, dev, w, NULL, NULL, NULL);
                if (c < *best - 1e-12 * (1 + fabs(*best))) {
                    *best = c;
                    moved = improved = 1;
                } else {
                    for (int k = i; k < j; k++)
                        dev[order[k]] = d;
                }
            }
            i = j;
        }
        if (!moved)
            break;
    }
    return improved;
}

/* Sweeps of single-node moves to any allowed device while the cost drops;
 * returns 1 when one did. */
static int node_moves(const plan_cost_problem *pr, int *dev, cost_ws *w, double *best)
{
    int N = pr->n_nodes, D = pr->n_dev, any = 0;
    for (int sweep = 0; sweep < 32; sweep++) {
        int improved = 0;
        for (int n = 0; n < N; n++) {
            for (int d = 0; d < D; d++) {
                if (d == dev[n] || !allowed(pr, n, d))
                    continue;
                int was = dev[n];
                dev[n] = d;
                double c = ws_eval(pr, dev, w, NULL, NULL, NULL);
                if (c < *best - 1e-12 * (1 + fabs(*best))) {
                    *best = c;
                    improved = any = 1;
                } else {
                    dev[n] = was;
                }
            }
        }
        if (!improved)
            break;
    }
    return any;
}

tdm_status plan_cost_solve(tdm_err *e, const plan_cost_problem *pr, int *dev, const char **method, double *cut_ms)
{
    int N = pr->n_nodes, D = pr->n_dev, cpu = D - 1, rt = 0;
    tdm_status st = TDM_OK;
    *method = "min-cut";
    *cut_ms = 0;
    if (D < 1 || D > 64)
        return err_set(e, TDM_E_INTERNAL, "the placement search takes 1 to 64 devices, not %d", D);
    for (int n = 0; n < N; n++) {
        int any = 0;
        for (int d = 0; d < D; d++)
            any |= allowed(pr, n, d);
        if (!any)
            return err_set(e, TDM_E_UNSUPPORTED, "node %d has no device it may run on", n);
    }
    if (D == 1) {
        for (int n = 0; n < N; n++)
            dev[n] = 0;
        *cut_ms = plan_cost_eval(pr, dev);
        return TDM_OK;
    }
    for (int d = 0; pr->part_ms && d < cpu; d++)
        rt |= pr->part_ms[d] > 0;
    if (D == 2 && !rt)
        /* a node only cpu may run was put on cpu by its infinite edge; a node
         * cpu cannot run but the accelerator can likewise sits on it */
        return cut_two(e, pr, 0, 0, 0, dev, cut_ms);
    *method = rt ? "min-cut+partition-search" : "min-cut+local-search";
    cost_ws w;
    int *cand = mem_alloc((size_t)N * sizeof *cand + sizeof *cand);
    int *order = mem_alloc((size_t)N * sizeof *order + sizeof *order);
    if (!cand || !order || ws_init(pr, &w)) {
        mem_free(cand);
        mem_free(order);
        return err_set(e, TDM_E_NOMEM, "out of memory");
    }
    double best = INFINITY, best_cut = INFINITY;
    /* candidates: each accelerator's exact cut against cpu, with the round
     * trips charged on its copies at a few weights */
    static const double pen[][2] = {{0, 0}, {0.5, 0}, {1, 0}, {0.5, 0.5}, {1, 1}};
    for (int a = 0; a < cpu; a++)
        for (int k = 0; k < (rt ? 5 : 1); k++) {
            double cut = 0, r = rt ? pr->part_ms[a] : 0;
            if ((st = cut_two(e, pr, a, pen[k][0] * r, pen[k][1] * r, cand, &cut)) != TDM_OK)
                goto done;
            for (int n = 0; n < N; n++)
                if (!allowed(pr, n, cand[n])) /* cpu cannot run it: first allowed device */
                    for (int d = 0; d < D; d++)
                        if (allowed(pr, n, d)) {
                            cand[n] = d;
                            break;
                        }
            double c = ws_eval(pr, cand, &w, NULL, NULL, NULL);
            if (k == 0 && cut < best_cut)
                best_cut = cut;
            if (c < best) {
                best = c;
                memcpy(dev, cand, (size_t)N * sizeof *dev);
            }
        }
    *cut_ms = best_cut;
    /* first-able device, and each single device where allowed */
    for (int k = -1; k < D; k++) {
        for (int n = 0; n < N; n++) {
            int first = -1;
            for (int d = 0; d < D && first < 0; d++)
                if (allowed(pr, n, d))
                    first = d;
            cand[n] = k >= 0 && allowed(pr, n, k) ? k : first;
        }
        double c = ws_eval(pr, cand, &w, NULL, NULL, NULL);
        if (c < best) {
            best = c;
            memcpy(dev, cand, (size_t)N * sizeof *dev);
        }
    }
    /* local search: single nodes, and with round trips whole partitions */
    for (int round = 0; round < 8; round++) {
        int moved = node_moves(pr, dev, &w, &best);
        if (rt)
            moved |= partition_moves(pr, dev, &w, order, &best);
        if (!moved || !rt)
            break;
    }
done:
    ws_free(&w);
    mem_free(cand);
    mem_free(order);
    return st;
}
