/* The planner: every node of a model's main graph gets a device from the
 * session's priority list, a reason code and the devices that rejected it;
 * nodes are ordered and grouped into acyclic partitions; boundary copies,
 * peak memory and estimated times are derived; the fallback policy is
 * checked. The plan is immutable once built and shared by concurrent runs.
 *
 * Rules (documented for users in the ledger and `tandem plan`):
 *   placement   each device in priority order is asked supports(); the first
 *               that accepts gets the node. reason = OK on the first device,
 *               else the reason of the first rejection. Plugins are never
 *               offered nodes with subgraphs or sequence/optional values.
 *   precision   with a calibration file (plan/calib.h), a device refuses a
 *               node whose calibrated error there is outside the thresholds
 *               (cosine < min_cosine, default 0.99; max |diff| > max_abs
 *               when set) with PRECISION and the figures, and the node where
 *               error accumulated along a chain first crosses them; measured
 *               times from the file replace the devices' estimates. A
 *               refusal is like an unsupported op: pins cannot override it.
 *   device_fault (the circuit breaker's cpu plan, run/adapt.h) every device
 *               but cpu refuses every node with DEVICE_FAULT.
 *   pins        OP_OR_NODE=DEVICE (a node name beats an op type): the node
 *               goes to DEVICE with reason USER when DEVICE supports it;
 *               otherwise it is placed normally and DEVICE's refusal is
 *               recorded. Pinned nodes are never moved by granularity.
 *   op          each node stays on the first device that supports it.
 *   subgraph    an island (a maximal connected set of nodes on one device
 *               D, connected through activations) whose every neighbour node
 *               is on one later device N that supports all of it moves to N
 *               (GRANULARITY) when it is not worth its copies: with
 *               estimates from both devices, when its time on N is at most
 *               its time on D plus the modeled time of the copies it causes;
 *               without estimates, when it has fewer than
 *               PLAN_ISLAND_NODES nodes. Graph inputs and outputs are not
 *               neighbours. Repeated until nothing moves.
 *   graph       every node on the first device that supports all of them
 *               (cpu at worst); nodes an earlier device could run get
 *               GRANULARITY.
 *   auto        the placement minimising the plan's estimated time (nodes
 *               on their devices + copies, one per tensor per destination;
 *               plan/auto.h: an exact minimum s-t cut for two devices, a
 *               documented heuristic for more). Pins and precision pins are
 *               fixed; a node the memory rule moves off a device (MEMORY)
 *               is excluded from it and the search is repeated until the
 *               memory rule moves nothing. A node kept off an earlier
 *               device that supports it gets COST with both estimates.
 *               Without estimates for every (node, able device), the
 *               subgraph rules are used and the ledger says so.
 *   order       a topological order that stays on the current device while
 *               it can (Kahn's algorithm, ties broken by the graph's order);
 *               partitions are the maximal runs of one device in it, so the
 *               partition graph is acyclic by construction (checked).
 *   memory      a partition's peak = weights it reads (resident for the
 *               partition) + the largest sum of live activations at any
 *               node (inputs live from the partition's start, outputs until
 *               their last use in it, or its end when read elsewhere), at the
 *               host element size. A node whose own peak exceeds the
 *               device's capacity moves to the next device that supports it
 *               (MEMORY); a partition over capacity is then split before
 *               the node that would overflow it (never abandoned).
 *   copies      a tensor is copied once per destination device, from the
 *               device that produced it (host for graph inputs and
 *               weights), just before its first reader there; graph outputs
 *               produced on a device are copied to the host at the end.
 *               boundary bytes = activation copies (graph inputs and
 *               outputs included); weight uploads are counted apart.
 *   fallback    a node is a fallback when it is not on the first device and
 *               not pinned. deny: every fallback is a violation;
 *               deny-compute: every fallback of an op without OPF_SHAPE;
 *               max-fallback-ratio R: estimated time of fallback nodes over
 *               the estimated time of all nodes (on their devices), or the
 *               node-count ratio when any node lacks an estimate;
 *               max-boundary-bytes B: boundary bytes of known size.
 */
#ifndef TDM_PLAN_PLAN_H
#define TDM_PLAN_PLAN_H

#include "devices/device_internal.h"
#include "graph/model.h"
#include "plan/desc.h"

#include <stddef.h>
#include <stdint.h>

#define PLAN_ISLAND_NODES 4

typedef enum plan_granularity {
    PLAN_GRAN_OP = 0,
    PLAN_GRAN_SUBGRAPH = 1,
    PLAN_GRAN_GRAPH = 2,
    PLAN_GRAN_AUTO = 3, /* minimum estimated time (plan/auto.h) */
    PLAN_GRAN_GREEDY = 4 /* the baseline: each device claims, in priority order, every node it
                          * supports (onnxruntime's EPs, TVM BYOC, OpenVINO HETERO); no
                          * island absorption, no cost; the memory rule still applies */
} plan_granularity;
typedef enum plan_fallback { PLAN_FB_ALLOW = 0, PLAN_FB_DENY = 1, PLAN_FB_DENY_COMPUTE = 2 } plan_fallback;

const char *plan_granularity_str(plan_granularity g);
const char *plan_fallback_str(plan_fallback f);

typedef struct plan_pin {
    char *what;    /* node name or op type */
    char *device;  /* device list entry name */
} plan_pin;

/* What the planner takes from the session options. */
typedef struct plan_options {
    char *devices;          /* NULL: default list */
    char **plugins;
    size_t n_plugins, cap_plugins;
    plan_granularity granularity;
    plan_fallback fallback;
    int fallback_set;       /* set explicitly (else TANDEM_FALLBACK, else allow) */
    double max_fallback_ratio;  /* < 0: none */
    int64_t max_boundary_bytes; /* < 0: none */
    plan_pin *pins;
    size_t n_pins, cap_pins;
    /* precision trigger (plan/calib.h) */
    char *calibration;      /* calibration file, NULL: none */
    double min_cosine;      /* default 0.99 */
    double max_abs;         /* < 0: none (the default) */
    /* the precision guard (run/guard.h): its probe, a calibration JSON text
     * made on the run's inputs (figures only, its times are not used), and
     * the nodes its verification refused (PRECISION with the sentence) */
    char *probe;
    struct plan_refusal *refuse;
    size_t n_refuse, cap_refuse;
    /* circuit breaker (run/adapt.h): when set, every device but cpu
     * refuses every node with DEVICE_FAULT and this sentence */
    char *device_fault;
    /* run-time adaptation (run/adapt.h): measured times that replace the
     * devices' estimates of (node, device), and why the plan was made */
    struct plan_measured *measured;
    size_t n_measured, cap_measured;
    char *replan_reason;    /* NULL: not a re-plan */
    /* 1: the session runs its cpu nodes unfused (TDM_FUSION_OFF), so cpu
     * estimates are the unfused nodes'; 0: each cpu partition fused */
    int unfused;
    /* the rescue pass (plan/rescue.h): PLAN_RESCUE_* (0: default, safe),
     * and the run layer's verification (NULL: nothing is rescued) */
    int rescue;
    const struct plan_rescue_hooks *rescue_hooks;
    /* the run-time checks of kept rescues (plan/rescue.h "verified when"):
     * their figures on the inputs that reached the original nodes, carried
     * into re-plans (a failed one drops its rescue); rescue_unchecked: the
     * session does not check them (--verify off), the ledger says so */
    struct plan_rescue_check *rescue_checks;
    size_t n_rescue_checks, cap_rescue_checks;
    int rescue_unchecked;
    /* graph inputs bound to fixed values (--bind, tdm_session_options_bind):
     * constants for the If inlining (graph/inline_if.h); owned copies */
    struct plan_bind *binds;
    size_t n_binds, cap_binds;
} plan_options;

/* A graph input bound to a value (owned). */
typedef struct plan_bind {
    char *name;
    tdm_tensor *value;
} plan_bind;

/* Sets (or replaces) the bound value of input name (copies both). */
tdm_status plan_options_bind(plan_options *o, const char *name, const tdm_tensor *value);

/* A measured node time (node and device by name; ms per run). est_ms is
 * the estimate it replaces (recorded in the ledger). */
typedef struct plan_measured {
    char *node, *device;
    double ms, est_ms;
} plan_measured;

/* A node the precision guard refused on a device (verification). */
typedef struct plan_refusal {
    char *node, *device, *detail;
} plan_refusal;

/* Appends a refusal (copies the strings). */
tdm_status plan_options_add_refusal(plan_options *o, const char *node, const char *device, const char *detail);

/* Appends (node, device, ms, est_ms) to o->measured, replacing an entry
 * for the same (node, device). */
tdm_status plan_options_add_measured(plan_options *o, const char *node, const char *device, double ms, double est_ms);

void plan_options_init(plan_options *o);
void plan_options_free(plan_options *o);
tdm_status plan_options_copy(const plan_options *src, plan_options *dst);

typedef struct plan_reject {
    int device;
    tdm_reason reason;
    const char *detail;
} plan_reject;

typedef struct plan_node {
    int device;             /* index in the device list */
    int preferred;          /* the first device that supports it */
    tdm_reason reason;
    const char *detail;     /* "" when none */
    plan_reject *rejected;
    int n_rejected;
    int partition;
    int pos;                /* position in the execution order */
    int pinned;
    int fallback;           /* counted as a fallback */
    double est_ms;          /* < 0: no estimate */
    int est_modeled;
    int fused;              /* fused away in its partition: on cpu est_ms 0, on a vnpu with "fusion": "epilogue" its arithmetic only */
    const char *est_basis;  /* If, Loop, Scan: what est_ms prices of its subgraphs (NULL: none, or a measured figure) */
    int est_trips_unknown;  /* est_ms priced a Loop or Scan whose trip count or length is unknown as one pass */
} plan_node;

/* A copy of value `value` from device `from` to device `to`, made just
 * before the node at execution position pos (pos == n_nodes: after the
 * last node, for graph outputs going to the host). */
typedef struct plan_copy {
    int value;
    int from, to;
    int pos;
    int partition;          /* destination partition (-1: host at the end) */
    int from_partition;     /* producing partition, -1: host (input, weight) */
    size_t bytes;
    int known;              /* bytes known from static shapes */
    int weight;             /* a constant (initializer or folded value) */
    int output;             /* a graph output going to the host */
    double est_ms;          /* < 0: none */
    int est_modeled;
} plan_copy;

typedef struct plan_part {
    int device;
    int first, count;       /* positions in the execution order */
    uint64_t peak_bytes;
    int peak_unknown;       /* tensors of unknown size were left out */
    double est_ms;
    int est_nodes;          /* nodes with an estimate */
} plan_part;

typedef struct plan_violation {
    int node;               /* node index, or -1 */
    tdm_reason reason;
    const char *detail;
} plan_violation;

struct tdm_plan {
    tdm_err err;
    dev_list *devs;         /* owned */
    const tdm_model *model;
    tdm_model *own_model;   /* owned: the model reloaded with fixed shapes (tdm_plan_create) */
    const gr_graph *g;
    plan_options opts;      /* a copy */
    plan_fallback fallback; /* in effect */
    plan_arena arena;
    tdm_node_desc *descs;   /* per node index */
    plan_node *nodes;       /* per node index */
    int n_nodes;
    int *order;             /* node indices in execution order */
    plan_part *parts;
    int n_parts;
    plan_copy *copies;      /* by pos */
    int n_copies;
    /* summary */
    size_t fallback_nodes;
    uint64_t boundary_bytes, weight_bytes;
    size_t boundary_unknown;
    double est_total, est_copies;
    int est_modeled, est_complete;
    int est_trips_unknown;  /* nodes whose est_ms priced an unknown trip count or scan length as one pass */
    double fallback_ratio;
    int ratio_by_count;
    /* policy */
    char *policy_error;     /* "" when within policy */
    plan_violation *violations;
    size_t n_violations;
    /* granularity auto (ledger "auto") */
    const char *auto_method;    /* "min-cut", "min-cut+local-search", "subgraph (…)"; NULL: not auto */
    double auto_cut_ms;         /* the minimum cut's value in the last round */
    double auto_cost_ms;        /* the cost function's value of the final placement */
    int auto_rounds;            /* searches (1 + memory re-plans) */
    int auto_memory_moves;      /* (node, device) exclusions by the memory rule */
    /* precision trigger (ledger "precision") */
    struct plan_precision *precision; /* findings */
    size_t n_precision;
    size_t calib_missing;       /* nodes the calibration file has no figures for */
    size_t calib_entries;       /* node entries in the calibration file */
    size_t calib_matched;       /* of those, entries some node of the model matched */
    size_t calib_measured;      /* (node, device) estimates replaced by measured times */
    size_t adapt_measured;      /* of those, from run-time measurements (opts.measured) */
    struct plan_rescue *rescue; /* owned: the rescue pass's record (plan/rescue.h) */
};

/* A node refused by a device for its calibrated error. */
typedef struct plan_precision {
    int node, device;
    int chain;                  /* 1: accumulated error crossing here */
    double cosine, max_abs, rmse; /* max_abs INFINITY: non-finite */
    double alone_cosine;        /* chain: the node alone */
    int guard;                  /* 1: found by the precision guard (probe or verification), 0: calibration file */
    int cause;                  /* PLAN_PREC_ERROR, _OVERFLOW, _FLUSH, _VERIFY, _STATIC (a profile's
                                 * precision-sensitive op not shown safe) */
    double range;               /* overflow: the max |x|; flush: the fraction flushed */
} plan_precision;

enum { PLAN_PREC_ERROR = 0, PLAN_PREC_OVERFLOW = 1, PLAN_PREC_FLUSH = 2, PLAN_PREC_VERIFY = 3, PLAN_PREC_STATIC = 4 };

/* Plans model on the devices devs (ownership moves to the plan, also on
 * failure). Fails only when planning is impossible (a node no device can
 * run, a bad pin, out of memory); a policy violation is recorded in the
 * plan (policy_error, violations), not returned. */
tdm_status plan_build(tdm_err *e, const tdm_model *model, const plan_options *opts, dev_list *devs,
                      tdm_plan **out);
void plan_free(tdm_plan *p);

/* Devices and names. */
const char *plan_device_name(const tdm_plan *p, int d);
/* Value v's bytes from its static type; 0 and *known = 0 when unknown. */
size_t plan_value_bytes(const gr_graph *g, int v, int *known);
/* The node's values read implicitly by its subgraphs (outer-scope names):
 * appends value ids of g to ids (capacity cap); returns the count, or -1
 * when out of memory. *ids is allocated with mem_*. */
int plan_implicit_inputs(const gr_graph *g, const gr_node *n, int **ids);
/* The last position of plan's order that reads each value (rd_start / rd:
 * the distinct values each node reads, outer-scope names included), INT_MAX
 * for a value a copy moves (made from the host, so it leaves its
 * partition) or a graph output; -1: never read. g->n_values entries,
 * mem_alloc'ed; NULL when out of memory (plan/fusion.c; run/hpart.c cuts
 * its cpu partitions' outputs by it, the estimates their fusion). */
int *plan_last_reads(const tdm_plan *plan, const int *rd_start, const int *rd);

/* Ledger (ledger.c): the plan as JSON (cJSON); run_json, when not NULL, is
 * a JSON object text added as "run". *json is allocated with mem_alloc. */
tdm_status plan_ledger_json(tdm_err *e, const tdm_plan *p, const char *run_json, char **json);
/* The same with adapt_json (when not NULL: the session's run-time
 * adaptation, run/adapt.h adapt_json) added as "adaptation": the breaker,
 * the re-planning decisions with their figures, the plan cache. */
tdm_status plan_ledger_json_adapt(tdm_err *e, const tdm_plan *p, const char *run_json, const char *adapt_json,
                                  char **json);
/* The readable report of `tandem plan`. */
tdm_status plan_report(tdm_err *e, const tdm_plan *p, char **text);

#endif
