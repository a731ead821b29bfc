/* Unit tests of the auto placement (plan/auto.h):
 *   test_cost optimal     500 random DAGs of 1..16 nodes on two devices with
 *                         random node and copy costs, unsupported and pinned
 *                         nodes, multi-reader tensors and graph outputs: the
 *                         min-cut placement's cost equals the brute-force
 *                         optimum over all 2^n placements (same cost
 *                         function, plan_cost_eval), and the cut value equals
 *                         that cost.
 *   test_cost heuristic   200 random DAGs of 1..9 nodes on three devices: the
 *                         heuristic's placement is allowed, never worse than
 *                         the first-able-device and single-device placements,
 *                         never better than the brute-force optimum over 3^n;
 *                         the gap to the optimum is reported.
 *   test_cost copies      hand-made cases: a tensor read by three cpu nodes
 *                         is copied once; a graph output on the accelerator
 *                         pays its copy to the host once.
 *   test_cost order       400 random DAGs on two and three devices with
 *                         round trips (part_ms) under random placements: the
 *                         partitions plan_cost_eval_parts counts, and their
 *                         round trips, equal those of a plain O(N^2)
 *                         device-sticky order (memory.c's make_order again).
 *   test_cost roundtrip   300 random DAGs of 1..12 nodes on two devices with
 *                         round trips of 0..5 ms: the search's placement is
 *                         allowed, never worse than the first-able-device and
 *                         the all-cpu placements, never better than the
 *                         brute-force optimum; within 1.05 of it in 95 % of
 *                         the cases (the figures are printed). */
#include "plan/auto.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXN 16
#define MAXV 64

static unsigned long long rng_state = 88172645463325252ULL;
static double urand(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}
static int irand(int n) { return (int)(urand() * n) % n; }

typedef struct dag {
    int N, V, D;
    double node_ms[MAXN * 3];
    int prod[MAXV];
    int rd_start[MAXN + 1], rd[MAXN * 4];
    unsigned char is_output[MAXV];
    double up[MAXV * 3], down[MAXV * 3];
    plan_cost_problem pr;
} dag;

static void make_dag(dag *g, int N, int D)
{
    memset(g, 0, sizeof *g);
    g->N = N;
    g->D = D;
    int n_host = 1 + irand(3);
    g->V = 0;
    for (int h = 0; h < n_host; h++)
        g->prod[g->V++] = -1; /* graph inputs / weights */
    int k = 0;
    for (int n = 0; n < N; n++) {
        g->rd_start[n] = k;
        int nr = 1 + irand(3);
        for (int r = 0; r < nr; r++) {
            int v = irand(g->V), dup = 0;
            /* prefer recent values, to make chains */
            if (urand() < 0.5 && g->V > n_host)
                v = g->V - 1 - irand(g->V - n_host < 3 ? g->V - n_host : 3);
            for (int j = g->rd_start[n]; j < k; j++)
                dup |= g->rd[j] == v;
            if (!dup)
                g->rd[k++] = v;
        }
        int no = 1 + (urand() < 0.2);
        for (int o = 0; o < no; o++)
            g->prod[g->V++] = n;
        for (int d = 0; d < D; d++) {
            double c = urand() * 10;
            if (d < D - 1 && urand() < 0.15)
                c = -1; /* unsupported on the accelerator */
            g->node_ms[n * D + d] = c;
        }
        double pin = urand();
        if (pin < 0.07) /* pinned to the first accelerator */
            for (int d = 0; d < D; d++)
                if (d != 0)
                    g->node_ms[n * D + d] = -1;
        if (pin > 0.93) /* pinned to cpu (a precision pin) */
            for (int d = 0; d < D - 1; d++)
                g->node_ms[n * D + d] = -1;
        if (g->node_ms[n * D + 0] < 0 && g->node_ms[n * D + D - 1] < 0 && (D == 2 || g->node_ms[n * D + 1] < 0))
            g->node_ms[n * D + D - 1] = urand() * 10;
    }
    g->rd_start[N] = k;
    for (int v = 0; v < g->V; v++) {
        g->is_output[v] = g->prod[v] >= 0 && urand() < 0.25;
        for (int d = 0; d < D - 1; d++) {
            g->up[v * D + d] = urand() < 0.1 ? 0 : urand() * 4;
            g->down[v * D + d] = urand() < 0.1 ? 0 : urand() * 4;
        }
    }
    /* the last node's first output is always an output */
    g->is_output[g->V - 1] = 1;
    g->pr.n_nodes = N;
    g->pr.n_dev = D;
    g->pr.node_ms = g->node_ms;
    g->pr.n_values = g->V;
    g->pr.prod = g->prod;
    g->pr.rd_start = g->rd_start;
    g->pr.rd = g->rd;
    g->pr.is_output = g->is_output;
    g->pr.up_ms = g->up;
    g->pr.down_ms = g->down;
}

static double brute(const dag *g, int *best_dev)
{
    int dev[MAXN];
    double best = INFINITY;
    long total = 1;
    for (int n = 0; n < g->N; n++)
        total *= g->D;
    for (long code = 0; code < total; code++) {
        long c = code;
        for (int n = 0; n < g->N; n++) {
            dev[n] = (int)(c % g->D);
            c /= g->D;
        }
        double v = plan_cost_eval(&g->pr, dev);
        if (v < best) {
            best = v;
            if (best_dev)
                memcpy(best_dev, dev, sizeof dev);
        }
    }
    return best;
}

static int close_enough(double a, double b) { return fabs(a - b) <= 1e-9 * (1 + fabs(a) + fabs(b)); }

static int test_optimal(void)
{
    int bad = 0, cases = 0, moved = 0;
    for (int t = 0; t < 500; t++) {
        dag g;
        int N = 1 + t % 16;
        make_dag(&g, N, 2);
        int dev[MAXN];
        const char *method;
        double cut = 0;
        tdm_err e;
        memset(&e, 0, sizeof e);
        if (plan_cost_solve(&e, &g.pr, dev, &method, &cut) != TDM_OK) {
            printf("case %d: solve failed\n", t);
            bad++;
            continue;
        }
        double got = plan_cost_eval(&g.pr, dev), opt = brute(&g, NULL);
        cases++;
        int split = 0;
        for (int n = 0; n < N; n++)
            split |= dev[n] != dev[0];
        moved += split;
        if (!close_enough(got, opt) || !close_enough(cut, got)) {
            printf("case %d (%d nodes): min-cut placement costs %.9f (cut %.9f), brute-force optimum %.9f\n", t, N, got,
                   cut, opt);
            bad++;
        }
    }
    printf("optimal: %d random DAGs (1..16 nodes), %d with a split placement, %d mismatches\n", cases, moved, bad);
    return bad != 0 || cases != 500 || moved < 50;
}

static int test_heuristic(void)
{
    int bad = 0, exact = 0;
    double worst = 0;
    for (int t = 0; t < 200; t++) {
        dag g;
        int N = 1 + t % 9;
        make_dag(&g, N, 3);
        int dev[MAXN], cand[MAXN];
        const char *method;
        double cut = 0;
        tdm_err e;
        memset(&e, 0, sizeof e);
        if (plan_cost_solve(&e, &g.pr, dev, &method, &cut) != TDM_OK) {
            bad++;
            continue;
        }
        double got = plan_cost_eval(&g.pr, dev), opt = brute(&g, NULL);
        if (!isfinite(got) || got < opt - 1e-9) {
            printf("case %d: heuristic %.9f, optimum %.9f\n", t, got, opt);
            bad++;
        }
        for (int k = -1; k < 3; k++) {
            for (int n = 0; n < N; n++) {
                int first = -1;
                for (int d = 0; d < 3 && first < 0; d++)
                    if (g.node_ms[n * 3 + d] >= 0)
                        first = d;
                cand[n] = k >= 0 && g.node_ms[n * 3 + k] >= 0 ? k : first;
            }
            double c = plan_cost_eval(&g.pr, cand);
            if (got > c + 1e-9) {
                printf("case %d: heuristic %.9f worse than baseline %d (%.9f)\n", t, got, k, c);
                bad++;
            }
        }
        exact += close_enough(got, opt);
        if (opt > 0 && (got - opt) / opt > worst)
            worst = (got - opt) / opt;
    }
    printf("heuristic (3 devices): 200 random DAGs, optimal in %d, worst gap %.2f%%, %d failures\n", exact,
           worst * 100, bad);
    return bad != 0;
}

static int test_copies(void)
{
    /* v0 host input; node 0 (accelerator-only) makes v1; nodes 1..3 (cpu
     * only) read v1; node 3's output v4 is the graph output. */
    double node_ms[8] = {1, -1, -1, 1, -1, 1, -1, 1};
    int prod[5] = {-1, 0, 1, 2, 3};
    int rd_start[5] = {0, 1, 2, 3, 4};
    int rd[4] = {0, 1, 1, 1};
    unsigned char out[5] = {0, 0, 0, 0, 1};
    double up[10] = {2, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    double down[10] = {0, 0, 3, 0, 0, 0, 0, 0, 0, 0};
    plan_cost_problem pr = {4, 2, node_ms, 5, prod, rd_start, rd, out, up, down, NULL, NULL};
    int dev[4] = {0, 1, 1, 1};
    double c = plan_cost_eval(&pr, dev);
    /* 1 + 1 + 1 + 1 nodes, up 2 for v0, down 3 once for v1 */
    int bad = !close_enough(c, 9);
    printf("copies: one copy for a tensor read by three cpu nodes: cost %.3f (expected 9)\n", c);
    /* output on the accelerator: node 3 allowed there */
    node_ms[6] = 0.5;
    down[8] = 4;
    int dev2[4] = {0, 1, 1, 0};
    c = plan_cost_eval(&pr, dev2);
    /* nodes 1+1+1+0.5, up v0 2, down v1 3, v1 to node 3 on the accelerator: home is
     * accelerator, no copy; output v4 to host: 4 */
    bad |= !close_enough(c, 12.5);
    printf("copies: an output on the accelerator pays one copy to the host: cost %.3f (expected 12.5)\n", c);
    const char *method;
    double cut;
    tdm_err e;
    memset(&e, 0, sizeof e);
    if (plan_cost_solve(&e, &pr, dev2, &method, &cut) != TDM_OK)
        return 1;
    printf("copies: min-cut %s cost %.3f, cut %.3f, node 3 on %s\n", method, plan_cost_eval(&pr, dev2), cut,
           dev2[3] == 0 ? "the accelerator" : "cpu");
    bad |= !close_enough(plan_cost_eval(&pr, dev2), 9) || dev2[3] != 1;
    return bad;
}

/* memory.c's make_order: the first ready node (graph order) on the current
 * device, else the first ready node; partitions are its device runs. */
static int plain_parts(const dag *g, const double *part, const int *dev, double *trips)
{
    int indeg[MAXN] = {0}, state[MAXN] = {0}, cur = -1, parts = 0;
    *trips = 0;
    for (int n = 0; n < g->N; n++)
        for (int j = g->rd_start[n]; j < g->rd_start[n + 1]; j++)
            indeg[n] += g->prod[g->rd[j]] >= 0 && g->prod[g->rd[j]] != n;
    for (int k = 0; k < g->N; k++) {
        int pick = -1, any = -1;
        for (int n = 0; n < g->N && pick < 0; n++) {
            if (state[n] || indeg[n])
                continue;
            if (any < 0)
                any = n;
            if (dev[n] == cur)
                pick = n;
        }
        if (pick < 0)
            pick = any;
        if (dev[pick] != cur) {
            parts++;
            if (dev[pick] != g->D - 1)
                *trips += part[dev[pick]];
            cur = dev[pick];
        }
        state[pick] = 1;
        for (int n = 0; n < g->N; n++)
            for (int j = g->rd_start[n]; j < g->rd_start[n + 1]; j++)
                if (g->prod[g->rd[j]] == pick && n != pick)
                    indeg[n]--;
    }
    return parts;
}

static int allowed_on(const dag *g, int n, int d) { return g->node_ms[n * g->D + d] >= 0; }

static int test_order(void)
{
    int bad = 0;
    for (int t = 0; t < 400; t++) {
        dag g;
        int dev[MAXN];
        double part[3] = {urand() * 5, urand() * 5, 0};
        make_dag(&g, 1 + irand(MAXN), 2 + (t & 1));
        g.pr.part_ms = part;
        for (int n = 0; n < g.N; n++)
            do
                dev[n] = irand(g.D);
            while (!allowed_on(&g, n, dev[n]));
        double copies, trips, want_trips;
        int np = -1, want = plain_parts(&g, part, dev, &want_trips);
        double c = plan_cost_eval_parts(&g.pr, dev, &copies, &trips, &np);
        if (np != want || fabs(trips - want_trips) > 1e-9 || !isfinite(c)) {
            printf("order case %d: %d partitions, round trips %.6f; the plain order gives %d, %.6f\n", t, np, trips,
                   want, want_trips);
            bad++;
        }
    }
    printf("order: 400 placements, %d mismatches\n", bad);
    return bad != 0;
}

static int test_search(void)
{
    int bad = 0, within = 0, exact = 0, cases = 300;
    double worst = 1, sum = 0;
    for (int t = 0; t < cases; t++) {
        dag g;
        int dev[MAXN], cand[MAXN];
        double part[2] = {urand() * 5, 0};
        make_dag(&g, 1 + irand(12), 2);
        g.pr.part_ms = part;
        const char *method;
        double cut;
        tdm_err e;
        memset(&e, 0, sizeof e);
        if (plan_cost_solve(&e, &g.pr, dev, &method, &cut) != TDM_OK) {
            printf("search case %d: the solve failed\n", t);
            bad++;
            continue;
        }
        double got = plan_cost_eval(&g.pr, dev);
        for (int n = 0; n < g.N; n++)
            cand[n] = allowed_on(&g, n, 0) ? 0 : 1;
        double first = plan_cost_eval(&g.pr, cand);
        for (int n = 0; n < g.N; n++)
            cand[n] = 1;
        double cpu = plan_cost_eval(&g.pr, cand);
        double best = INFINITY;
        for (long code = 0; code < (1L << g.N); code++) {
            for (int n = 0; n < g.N; n++)
                cand[n] = (int)((code >> n) & 1);
            double v = plan_cost_eval(&g.pr, cand);
            if (v < best)
                best = v;
        }
        double r = got / best;
        if (!isfinite(got) || got > first + 1e-9 || got > cpu + 1e-9 || got < best - 1e-9) {
            printf("search case %d (%d nodes): %.6f against first-able %.6f, cpu %.6f, optimum %.6f\n", t, g.N, got,
                   first, cpu, best);
            bad++;
        }
        within += r <= 1.05;
        exact += r <= 1 + 1e-9;
        sum += r;
        if (r > worst)
            worst = r;
    }
    printf("search: %d cases, optimum found in %d, within 1.05 in %d, mean ratio %.4f, worst %.4f\n", cases, exact,
           within, sum / cases, worst);
    return bad != 0 || within < cases * 95 / 100;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    if (strcmp(argv[1], "optimal") == 0)
        return test_optimal();
    if (strcmp(argv[1], "heuristic") == 0)
        return test_heuristic();
    if (strcmp(argv[1], "copies") == 0)
        return test_copies();
    if (strcmp(argv[1], "order") == 0)
        return test_order();
    if (strcmp(argv[1], "roundtrip") == 0)
        return test_search();
    fprintf(stderr, "unknown case %s\n", argv[1]);
    return 2;
}
