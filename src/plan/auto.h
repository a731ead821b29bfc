/* `--granularity auto`: the placement that minimises the plan's estimated
 * end-to-end time, as an abstract problem the planner fills in (plan.c)
 * and the tests can build by hand (tests/plan/cost).
 *
 * Cost of a placement dev[] (the same formula as the plan's summary:
 * est_total = node estimates + copy estimates):
 *   Σ_n node_ms[n][dev[n]]
 * + Σ_v Σ_{t ∈ T(v), t ≠ home(v)} (down_ms[v][home(v)] + up_ms[v][t])
 * where home(v) is the device of v's producer (cpu for graph inputs and
 * weights), T(v) the set of devices of v's readers plus cpu when v is a
 * graph output: one copy per tensor per destination device. cpu's up/down
 * terms are 0 (the host is cpu's memory). The planner forms partitions from
 * ANY placement as the maximal runs of one device in a device-sticky
 * topological order (plan.h "order"), which is acyclic by construction, so
 * every placement is executable and the cost depends on the placement
 * alone; when part_ms is given the cost adds
 * + Σ_q part_ms[device(q)]
 * over the partitions q of that order (each device's per-partition round
 * trip: submit, synchronise; cpu's is 0) — the plan's est_total exactly,
 * short of the memory rule's splits. With part_ms the cost is no longer a
 * sum over cut edges, so the search below becomes a heuristic for two
 * devices too.
 *
 * Two devices (accelerator A, cpu) — exact, a minimum s–t cut. Source side
 * = A, sink side = cpu. Vertices: s, t, one per node, and per value v two
 * auxiliary vertices d_v (the A→cpu copy) and u_v (the cpu→A copy).
 *   s → n   capacity node_ms[n][cpu]   (cut when n is on cpu)
 *   n → t   capacity node_ms[n][A]     (cut when n is on A; ∞ when A cannot
 *                                       run n or n is forced to cpu; s → n
 *                                       is ∞ when n is forced to A)
 *   produced by node p:  p → d_v  cap down_ms[v][A];  d_v → r  ∞ for every
 *                        reader r;  d_v → t ∞ when v is a graph output.
 *                        (p on A and any reader on cpu puts d_v on the sink
 *                        side and cuts p → d_v exactly once.)
 *                        r → u_v  ∞ for every reader r;  u_v → p  cap
 *                        up_ms[v][A]. (p on cpu and any reader on A puts u_v
 *                        on the source side and cuts u_v → p exactly once.)
 *   graph input/weight:  r → u_v  ∞;  u_v → t  cap up_ms[v][A].
 * A cut's value equals the cost of the placement read off it (nodes on the
 * source side run on A), and every placement has a cut of that value, so
 * the minimum cut is an optimal placement. Solved with Dinic's algorithm.
 *
 * More devices — a heuristic: the exact two-device cut of each accelerator
 * against cpu (nodes it cannot run on cpu), the first-able-device placement
 * and each single-device placement are evaluated; the cheapest is improved
 * by sweeps of single-node moves to any allowed device while the cost
 * drops (at most 32 sweeps).
 *
 * Partition round trips (part_ms given, some > 0) — the cut cannot count
 * partitions, so each accelerator's cut is also solved with the round trip
 * charged (×0.5, ×1) on every copy of a produced tensor out of it (an
 * accelerator partition sends at least one), and on those into it; every
 * cut, the first-able-device and the single-device placements are
 * evaluated with the full cost, and the cheapest is improved by sweeps of
 * single-node moves and whole-partition moves (a partition of the order to
 * another device that may run all of it) while the cost drops. */
#ifndef TDM_PLAN_AUTO_H
#define TDM_PLAN_AUTO_H

#include "core/err.h"

typedef struct plan_cost_problem {
    int n_nodes, n_dev;          /* device n_dev - 1 is cpu (the host) */
    const double *node_ms;       /* n*n_dev+d; < 0 or not finite: not allowed there */
    int n_values;
    const int *prod;             /* value → producing node, -1: the host (input, weight) */
    const int *rd_start, *rd;    /* CSR: the distinct values node n reads */
    const unsigned char *is_output; /* value is a graph output (may be NULL) */
    const double *up_ms;         /* v*n_dev+d: host → d (cpu: 0) */
    const double *down_ms;       /* v*n_dev+d: d → host (cpu: 0) */
    const double *part_ms;       /* d: one partition's round trip on d (cpu: 0); NULL: none */
    const int *gpos;             /* node → position in the graph's order (the order's
                                    tie-break); NULL: the node's index */
} plan_cost_problem;

/* The cost of placement dev (formula above); INFINITY when a node sits on a
 * device it is not allowed on (or out of memory). */
double plan_cost_eval(const plan_cost_problem *pr, const int *dev);

/* Its parts: *copies_ms the copies, *parts_ms the partitions' round trips
 * (0 without part_ms), *n_parts the partitions of the order (may be NULL). */
double plan_cost_eval_parts(const plan_cost_problem *pr, const int *dev, double *copies_ms, double *parts_ms, int *n_parts);

/* Writes the cheapest placement found into dev (n_nodes entries): exact
 * for n_dev == 2 without round trips, the heuristics above otherwise.
 * *method receives "min-cut", "min-cut+local-search" or
 * "min-cut+partition-search"; *cut_ms the minimum cut's value (the optimum
 * for two devices; the best cut for more). Fails on out of memory, or with
 * TDM_E_UNSUPPORTED when a node has no allowed device. */
tdm_status plan_cost_solve(tdm_err *e, const plan_cost_problem *pr, int *dev, const char **method, double *cut_ms);

#endif
