/* The planner's private state and the helpers its passes share
 * (src/plan/: plan.c builds, options.c, triggers.c, granularity.c,
 * memory.c, copies.c). Not for use outside src/plan/. */
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
    int *pin;               /* node → pinned device, -1 */
    const char **pinspec;
    int *brk;               /* node starts a partition (memory split) */
    /* scratch */
    int *stamp, cur_stamp;
    int *rs, *re;           /* v*D+d: residency (compute_residency) */
    size_t *vbytes;         /* static bytes of each value */
    int *vknown;
    int64_t *diff;
} pstate;

/* state helpers (plan.c) */
void *plan_arr(pstate *s, size_t n, size_t size);
const char *plan_fmt(pstate *s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
double plan_node_est(pstate *s, int n, int d, int *modeled);
double plan_copy_est(pstate *s, int from, int to, size_t bytes, int *modeled);
tdm_status plan_assign(pstate *s, int n, int d);

/* options.c */
tdm_status plan_resolve_fallback(tdm_err *e, tdm_plan *p);

/* triggers.c */
tdm_status plan_apply_precision(pstate *s);
void plan_apply_measured(pstate *s);
tdm_status plan_apply_pins(pstate *s);

/* granularity.c */
tdm_status plan_initial_placement(pstate *s);
tdm_status plan_place(pstate *s, plan_granularity g);
tdm_status plan_auto_best(pstate *s);

/* memory.c */
tdm_status plan_memory_pass(pstate *s);
void plan_compute_residency(pstate *s);
uint64_t plan_range_peak(pstate *s, int a, int b, int *unknown);
tdm_status plan_check_acyclic(pstate *s);

/* copies.c */
tdm_status plan_make_copies(pstate *s);
void plan_summarize(pstate *s);
tdm_status plan_check_policy(pstate *s);

#endif
