/* The cpu partitions of a heterogeneous plan (hexec.c): each maximal run
 * of consecutive cpu nodes in the plan's execution order becomes a graph
 * of its own, run by exec_graph_cached with its own fusion (graph/fuse.h),
 * as an all-cpu plan's graph is. Its inputs are the values it reads from
 * outside (graph inputs, values of earlier partitions on any device);
 * its outputs are the values read after it (by a later node on any
 * device, by a copy, or as graph outputs), which fusion therefore never
 * swallows (a chain's inner values are never graph outputs).
 *
 * The graphs are shallow: node names, attributes, value names, types and
 * constants are the plan graph's, borrowed for the program's lifetime. */
#ifndef TDM_RUN_HPART_H
#define TDM_RUN_HPART_H

#include "plan/plan.h"
#include "run/exec.h"

struct obs_hook;
struct arena;

typedef struct hpart {
    int start, end;     /* positions [start, end) of the plan's order */
    gr_graph *g;        /* the partition's graph (hpart_free frees it) */
    int *node_of;       /* its node i is the plan graph's node node_of[i] */
    int *in_vals;       /* its input k is the plan graph's value in_vals[k] */
    int *out_vals;      /* its output k is the plan graph's value out_vals[k] */
    exec_cache cache;   /* fusion kept across runs */
    int arena_shared;   /* cache.arena is the program's (not freed with it) */
    const gr_graph *plan_g;
    tdm_plan view;      /* what its observer events are built from: its graph,
                         * the plan's devices, the plan's entries of its nodes */
} hpart;

/* Builds the cpu partitions of plan (device cpu is the last of the plan's):
 * *parts gets *n_parts entries, part_at[pos] (plan->n_nodes entries) the
 * partition starting at position pos or -1. rd_start / rd: the distinct
 * values each node reads, subgraphs' outer-scope names included (hexec.c).
 * Every partition's cache takes its blocks from shared (may be NULL). */
tdm_status hpart_build(tdm_err *e, const tdm_plan *plan, const int *rd_start, const int *rd, struct arena *shared,
                       hpart **parts, int *n_parts, int *part_at);
void hpart_free(hpart *parts, int n_parts);

/* Runs partition hp on vals[] (the plan graph's current host values, of
 * which it reads its inputs); out[] receives hp->g->n_outputs new values
 * owned by the caller, in the order of out_vals. obs (may be NULL) sees
 * the partition's nodes by their plan index, as exec_graph_cached reports
 * them (fused-away nodes with zero time). */
tdm_status hpart_run(tdm_err *e, const hpart *hp, tdm_tensor *const *vals, tdm_tensor **out, int threads,
                     uint64_t *rng, const struct obs_hook *obs);

/* Nodes fused away in the partitions' fusion plans (for tests and stats). */
int hpart_fused_nodes(const hpart *parts, int n_parts);

#endif
