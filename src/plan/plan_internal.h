/* The planner's private state and the helpers its passes share. The
 * planner (rules in plan.h) is one entry, plan_build (plan.c: the state,
 * the graph structure and the devices' verdicts), and one file per pass:
 * options.c, triggers.c, granularity.c (+ the cost search of auto.c),
 * memory.c, copies.c. Not for use outside src/plan/. */
#ifndef TDM_PLAN_PLAN_INTERNAL_H
#define TDM_PLAN_PLAN_INTERNAL_H

#include "plan/plan.h"

#include <stddef.h>
#include <stdint.h>

typedef struct pstate {
    tdm_err *e;
    tdm_plan *p;
    const gr_graph *g;
    int N, D, V, cpu;
    /* graph structure */
    int *prod;              /* value → producing node, -1 */
    int *is_weight;         /* value is a constant */
    int *rd_start, *rd;     /* CSR: distinct values node n reads (explicit + implicit) */
    int *cs_start, *cs;     /* CSR: distinct nodes reading value v */
    int *gpos;              /* node → position in g->order */
    /* verdicts */
    tdm_reason *sup;        /* n*D+d */
    const char **supdet;
    tdm_reason *over;       /* n*D+d: why the device was passed over (OK: not) */
    const char **overdet;
    double *est;            /* n*D+d: estimate, NAN: not asked yet, < 0: none */
    int *estmod;
    /* n*D+d, a node with subgraphs (If, Loop, Scan): what its estimate
     * rests on (plan.c cf_node_est; NULL: not computed there) and whether
     * a trip count or scan length in it was unknown (priced as one pass) */
    const char **estwhy;
    unsigned char *estunk;
    int *pin;               /* node → pinned device, -1 */
    const char **pinspec;
    int *brk;               /* node starts a partition (memory split) */
    /* scratch */
    int *stamp, cur_stamp;
    int *rs, *re;           /* v*D+d: residency (plan_compute_residency) */
    size_t *vbytes;         /* static bytes of each value */
    int *vknown;
    int64_t *diff;
    /* from the calibration file (plan.c; NULL without one): per device the
     * measured copy figures (d*4: to device per copy, per byte, to host per
     * copy, per byte; NAN: none) and round trip (< 0: none); per node
     * cpu's time when the plan runs wholly on cpu, fused (< 0: none) */
    double *cal_copy, *cal_trip, *fused;
    /* fusion (fusion.c): per node, the head node of the chain it is fused
     * into (-1: none) in the all-cpu session's fusion and in an all-vnpu
     * epilogue fusion of the whole graph (NULL until plan_whole_fusion),
     * and in its partition of the current placement (plan_summarize) */
    int *whole_head, *whole_epi_head, *run_head;
    int search_fused;       /* auto's search prices cpu nodes by whole_head, fusing vnpus' by whole_epi_head */
} pstate;

/* ---- state helpers (plan.c) ---- */

/* n (at least 1) zeroed elements of size bytes in the plan's arena. */
void *plan_arr(pstate *s, size_t n, size_t size);
/* A formatted sentence (at most 511 bytes) in the plan's arena; NULL when
 * out of memory. */
const char *plan_fmt(pstate *s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Device d's estimate for node n (asked once, then kept in s->est), < 0
 * when none; *modeled (may be NULL): a modeled, not measured, figure. */
double plan_node_est(pstate *s, int n, int d, int *modeled);
/* The estimated time of copying bytes from device `from` to `to` (the
 * devices' copy_ms, 0 for cpu's side; 0 when neither gives one). */
double plan_copy_est(pstate *s, int from, int to, size_t bytes, int *modeled);
/* Device d's per-partition round trip in ms (0 on cpu): the device's
 * modeled partition_ms, else the calibration's measured one, else 0. */
double plan_part_est(const pstate *s, int d);
/* Node n's estimate on d as the plan runs it, head[] (may be NULL: no
 * fusion) the heads its partitions' fusion gives (plan_run_fusion). Off
 * cpu: plan_node_est, or for a node fused away on a device whose compiler
 * fuses (dev_ext.fusion EPILOGUE) dev_ext.estimate_fused_away_ms, with the
 * inputs read from memory (plan_fused_mem_inputs). On cpu, when the
 * session runs unfused (opts.unfused): plan_node_est. On
 * cpu, where each partition runs fused (run/hpart.h): 0 when fused away
 * (a chain member, a BatchNormalization folded into its
 * Conv); else, with a calibration file, cpu's fused time ("fused_ms":
 * Winograd, the chain it heads) unless the all-cpu session fused the node
 * away (its fused time is 0 there: then the unfused "threaded_ms"); a
 * measured time (calibration without fused_ms, run-time adaptation) as
 * it is; else the device's estimate of the fused program
 * (dev_ext.estimate_fused_ms, else estimate_ms). */
double plan_node_est_in(pstate *s, int n, int d, const int *head, int *modeled);
/* Puts node n on device d and rebuilds its rejected list and reason. */
tdm_status plan_assign(pstate *s, int n, int d);

/* ---- the passes, in the order plan_build runs them ---- */

/* options.c: the fallback policy in effect (the option, else
 * TANDEM_FALLBACK, else allow) into p->fallback. */
tdm_status plan_resolve_fallback(tdm_err *e, tdm_plan *p);

/* triggers.c: what refuses nodes before placement (plan.h "precision",
 * "device_fault"): the calibration file, the precision guard's probe and
 * refusals, precision-sensitive op types, or the circuit breaker. */
tdm_status plan_apply_precision(pstate *s);
/* triggers.c: run-time measurements (opts.measured) replace estimates. */
void plan_apply_measured(pstate *s);
/* triggers.c: --pin OP_OR_NODE=DEVICE into s->pin and s->pinspec. */
tdm_status plan_apply_pins(pstate *s);

/* granularity.c: every node on its preferred (or pinned) device. */
tdm_status plan_initial_placement(pstate *s);
/* granularity.c: granularity g (op, subgraph, graph, greedy; auto's
 * search) from the current placement, the memory rule included. */
tdm_status plan_place(pstate *s, plan_granularity g);
/* granularity.c: auto: the search, then the cheapest of it and the op,
 * subgraph and graph placements once the memory rule applied. */
tdm_status plan_auto_best(pstate *s);

/* memory.c: order, partitions and the memory rule (plan.h "order",
 * "memory"); leaves p->order and p->parts final for the placement. */
tdm_status plan_memory_pass(pstate *s);
/* memory.c: s->rs/s->re, where each value is resident in the order. */
void plan_compute_residency(pstate *s);
/* memory.c: peak bytes on the device of the nodes at positions [a, b) of
 * the order (after plan_compute_residency); *unknown (may be NULL): some
 * tensor of unknown size was left out. */
uint64_t plan_range_peak(pstate *s, int a, int b, int *unknown);
/* memory.c: every partition edge goes forward. */
tdm_status plan_check_acyclic(pstate *s);

/* copies.c: the boundary copies (plan.h "copies"). */
tdm_status plan_make_copies(pstate *s);
/* copies.c: fallback counts, peaks, estimates and copy bytes (fails only
 * when out of memory). */
tdm_status plan_summarize(pstate *s);

/* fusion.c: head[n] (N entries), the head node of the chain the fusion of
 * its partition in the current order fuses node n into, -1 when none:
 * on cpu each maximal run of cpu nodes (as run/hpart.c builds them), on a
 * device with dev_ext.fusion EPILOGUE each of its partitions, restricted
 * to epilogue chains (graph/fuse.h fuse_plan_build_heads). */
tdm_status plan_run_fusion(pstate *s, int *head);
/* fusion.c: s->whole_head, what the fusion of the whole graph in its own
 * order (an all-cpu session's, which calibration's fused_ms measured)
 * fuses away, and s->whole_epi_head, its epilogue chains only; once per
 * plan. */
tdm_status plan_whole_fusion(pstate *s);
/* fusion.c: bit i set for the inputs of node n (fused away, head[n] >= 0)
 * that are not values of its chain: read from memory. */
uint32_t plan_fused_mem_inputs(const pstate *s, int n, const int *head);
/* copies.c: the fallback policy's violations and sentence. */
tdm_status plan_check_policy(pstate *s);

#endif
