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

double plan_cost_eval(const plan_cost_problem *pr, const int *dev)
{
    int D = pr->n_dev, cpu = D - 1;
    double total = 0;
    unsigned char seen[64];
    for (int n = 0; n < pr->n_nodes; n++) {
        if (dev[n] < 0 || dev[n] >= D || !allowed(pr, n, dev[n]))
            return INFINITY;
        total += pr->node_ms[(size_t)n * (size_t)D + (size_t)dev[n]];
    }
    /* readers' devices per value: walk nodes once, mark (value, device) */
    if (D > 64)
        return INFINITY;
    unsigned char *mark = mem_calloc((size_t)pr->n_values * (size_t)D + 1, 1);
    if (!mark)
        return INFINITY;
    for (int n = 0; n < pr->n_nodes; n++)
        for (int j = pr->rd_start[n]; j < pr->rd_start[n + 1]; j++)
            mark[(size_t)pr->rd[j] * (size_t)D + (size_t)dev[n]] = 1;
    for (int v = 0; v < pr->n_values; v++) {
        int home = pr->prod[v] >= 0 ? dev[pr->prod[v]] : cpu;
        memset(seen, 0, sizeof seen);
        for (int d = 0; d < D; d++)
            seen[d] = mark[(size_t)v * (size_t)D + (size_t)d];
        if (pr->is_output && pr->is_output[v])
            seen[cpu] = 1;
        for (int d = 0; d < D; d++)
            if (seen[d] && d != home)
                total += pr->down_ms[(size_t)v * (size_t)D + (size_t)home] + pr->up_ms[(size_t)v * (size_t)D + (size_t)d];
    }
    mem_free(mark);
    return total;
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
 * a or cpu (nodes a cannot take are on cpu). */
static tdm_status cut_two(tdm_err *e, const plan_cost_problem *pr, int a, int *dev, double *cut)
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
        big += pr->up_ms[(size_t)v * (size_t)D + (size_t)a] + pr->down_ms[(size_t)v * (size_t)D + (size_t)a];
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

tdm_status plan_cost_solve(tdm_err *e, const plan_cost_problem *pr, int *dev, const char **method, double *cut_ms)
{
    int N = pr->n_nodes, D = pr->n_dev, cpu = D - 1;
    tdm_status st;
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
    if (D == 2) {
        if ((st = cut_two(e, pr, 0, dev, cut_ms)) != TDM_OK)
            return st;
        /* a node only cpu may run was put on cpu by its infinite edge; a node
         * cpu cannot run but the accelerator can likewise sits on it */
        return TDM_OK;
    }
    *method = "min-cut+local-search";
    int *cand = mem_alloc((size_t)N * sizeof *cand + sizeof *cand);
    if (!cand)
        return err_set(e, TDM_E_NOMEM, "out of memory");
    double best = INFINITY;
    /* candidates: each accelerator's exact cut against cpu */
    for (int a = 0; a < cpu; a++) {
        double cut = 0;
        if ((st = cut_two(e, pr, a, cand, &cut)) != TDM_OK) {
            mem_free(cand);
            return st;
        }
        for (int n = 0; n < N; n++)
            if (!allowed(pr, n, cand[n])) /* cpu cannot run it: first allowed device */
                for (int d = 0; d < D; d++)
                    if (allowed(pr, n, d)) {
                        cand[n] = d;
                        break;
                    }
        double c = plan_cost_eval(pr, cand);
        if (c < best) {
            best = c;
            *cut_ms = cut;
            memcpy(dev, cand, (size_t)N * sizeof *dev);
        }
    }
    /* first-able device, and each single device where allowed */
    for (int k = -1; k < D; k++) {
        for (int n = 0; n < N; n++) {
            int first = -1;
            for (int d = 0; d < D && first < 0; d++)
                if (allowed(pr, n, d))
                    first = d;
            cand[n] = k >= 0 && allowed(pr, n, k) ? k : first;
        }
        double c = plan_cost_eval(pr, cand);
        if (c < best) {
            best = c;
            memcpy(dev, cand, (size_t)N * sizeof *dev);
        }
    }
    /* local search */
    for (int sweep = 0; sweep < 32; sweep++) {
        int improved = 0;
        for (int n = 0; n < N; n++) {
            for (int d = 0; d < D; d++) {
                if (d == dev[n] || !allowed(pr, n, d))
                    continue;
                int was = dev[n];
                dev[n] = d;
                double c = plan_cost_eval(pr, dev);
                if (c < best - 1e-12 * (1 + fabs(best))) {
                    best = c;
                    improved = 1;
                } else {
                    dev[n] = was;
                }
            }
        }
        if (!improved)
            break;
    }
    mem_free(cand);
    return TDM_OK;
}
