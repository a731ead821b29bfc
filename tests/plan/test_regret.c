/* Unit tests of auto's cost with partition round trips (plan/auto.h):
 *   test_regret order    400 random DAGs of 1..40 nodes on two and three
 *                        devices under random placements: the partitions
 *                        plan_cost_eval_parts counts (and their round trips)
 *                        equal those of a plain O(N^2) device-sticky order
 *                        (memory.c's make_order, written out again here).
 *   test_regret search   300 random DAGs of 1..12 nodes on two devices with
 *                        round trips of 0..5 ms: the search's placement is
 *                        allowed, never worse than the first-able-device and
 *                        the all-cpu placements, never better than the
 *                        brute-force optimum over 2^n (same cost function);
 *                        at most 1.05 x the optimum in 95 % of the cases
 *                        (the figures are printed). */
#include "plan/auto.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXN 40
#define MAXV 128

static unsigned long long rng_state = 0x2545F4914F6CDD1DULL;
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
    double up[MAXV * 3], down[MAXV * 3], part[3];
    plan_cost_problem pr;
} dag;

static void make_dag(dag *g, int N, int D)
{
    memset(g, 0, sizeof *g);
    g->N = N;
    g->D = D;
    int n_host = 1 + irand(3), k = 0;
    for (int h = 0; h < n_host; h++)
        g->prod[g->V++] = -1;
    for (int n = 0; n < N; n++) {
        g->rd_start[n] = k;
        int nr = 1 + irand(3);
        for (int r = 0; r < nr; r++) {
            int v = irand(g->V), dup = 0;
            if (urand() < 0.6 && g->V > n_host)
                v = g->V - 1 - irand(g->V - n_host < 3 ? g->V - n_host : 3);
            for (int j = g->rd_start[n]; j < k; j++)
                dup |= g->rd[j] == v;
            if (!dup)
                g->rd[k++] = v;
        }
        g->prod[g->V++] = n;
        for (int d = 0; d < D; d++)
            g->node_ms[n * D + d] = d < D - 1 && urand() < 0.15 ? -1 : urand() * 10;
        if (g->node_ms[n * D + D - 1] < 0)
            g->node_ms[n * D + D - 1] = urand() * 10;
    }
    g->rd_start[N] = k;
    for (int v = 0; v < g->V; v++)
        for (int d = 0; d < D - 1; d++) {
            g->up[v * D + d] = urand() * 2;
            g->down[v * D + d] = urand() * 2;
        }
    g->is_output[g->V - 1] = 1;
    for (int d = 0; d < D - 1; d++)
        g->part[d] = urand() * 5;
    g->pr = (plan_cost_problem){N, D, g->node_ms, g->V, g->prod, g->rd_start, g->rd, g->is_output, g->up, g->down,
                                g->part, NULL};
}

/* memory.c's make_order: the first ready node (graph order) on the current
 * device, else the first ready node; partitions are its device runs. */
static int plain_parts(const dag *g, const int *dev, double *trips)
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
                *trips += g->part[dev[pick]];
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

static int allowed(const dag *g, int n, int d) { return g->node_ms[n * g->D + d] >= 0; }

static int test_order(void)
{
    int bad = 0;
    for (int t = 0; t < 400; t++) {
        dag g;
        int dev[MAXN];
        make_dag(&g, 1 + irand(MAXN), 2 + (t & 1));
        for (int n = 0; n < g.N; n++)
            do
                dev[n] = irand(g.D);
            while (!allowed(&g, n, dev[n]));
        double copies, trips, want_trips;
        int np = -1, want = plain_parts(&g, dev, &want_trips);
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
        make_dag(&g, 1 + irand(12), 2);
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
            cand[n] = allowed(&g, n, 0) ? 0 : 1;
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
    if (argc < 2) {
        fprintf(stderr, "usage: test_regret order|search\n");
        return 2;
    }
    if (!strcmp(argv[1], "order"))
        return test_order();
    if (!strcmp(argv[1], "search"))
        return test_search();
    fprintf(stderr, "unknown case %s\n", argv[1]);
    return 2;
}
