/* The rescue pass: before placement, what a device rejects is rewritten
 * into nodes it supports, when the rewrite is verified (DESIGN.md
 * "Placement", reason RESCUED).
 *
 * Rules (plan_rescue_run, called by plan_build before the devices are
 * asked about the plan's graph):
 *   which nodes  every node of the main graph without subgraphs that a
 *                device placed before the first device supporting it
 *                (cpu excluded) rejects with OP_UNSUPPORTED,
 *                DTYPE_UNSUPPORTED or ATTR_UNSUPPORTED.
 *   which rules  the rewrite rules (graph/rewrite.h) for the node's op
 *                type that the device wants (devices/rescue.h: a vnpu
 *                profile's "rescue" list, every rule when absent), in the
 *                rule table's order; approximations (gelu-tanh, erf-tanh)
 *                only with mode all. A rule answers the refusals its
 *                "when" names (gather-scalar: SHAPE_ and ATTR_UNSUPPORTED;
 *                cast-insert, for any op with an int64 input or output:
 *                DTYPE_UNSUPPORTED only). A rule that does not take the
 *                node's form and says why (gr_rw.why) is an entry, not
 *                kept, with that sentence. The devices are tried in priority
 *                order and the first rewrite kept wins.
 *   kept when    every node of the rewrite (after constant folding) is
 *                supported by that device (its supports() answer), and
 *                the verification hook (plan_rescue_hooks, set by the run
 *                layer: run/rescue_check.h) passes: the rewrite and the
 *                original node run on cpu in float32 on the same inputs,
 *                the rewrite's outputs within the tolerance of the
 *                original's. Without a hook nothing is kept (never an
 *                unverified rewrite). A rewrite that fails either test is
 *                recorded with the sentence and the figures, and the node
 *                is placed as it would have been.
 *   verified when  at plan time on synthetic inputs made from the node's
 *                static types (the hook above: "synthetic"); then, in a
 *                session, on the values that actually reach the original
 *                node(s): every calibration input set at creation and the
 *                first run, before any output is returned (run/guard.h,
 *                run/rescue_check.h rescue_check_run; default on, off with
 *                --verify off: plan_options.rescue_unchecked, and the
 *                ledger says the rescue was verified on synthetic inputs
 *                only). Those figures come back to the planner as
 *                plan_options.rescue_checks (per node, rule, device and
 *                inputs): a rewrite with a failed check is not kept (why:
 *                "rescue <rule> failed verification on the first run's
 *                inputs: max |diff| X over the allowed Y, cosine Z", the
 *                same sentence appended to the node's detail), the next
 *                rule or device is tried as usual; a passing check is
 *                listed with the entry's figures. If, function and Loop
 *                inlining are not checked: they copy the same nodes with
 *                the same kernels (no new arithmetic), not rewrites.
 *   the graph    the plan's graph (tdm_plan.g) becomes a copy of the
 *                model's with every kept rewrite in place (its nodes are
 *                named "<original>/rescue/<Op>_<k>"); p->model stays the
 *                user's model.
 *   ledger       a new node placed on the device it was made for gets
 *                reason RESCUED (plan_rescue_mark) with the rule and the
 *                figures; "rescue" lists every attempt (kept or not).
 * Before the rules (all modes but off, with a device besides cpu): the
 * bound inputs (plan_options.binds) become constants and every If whose
 * condition is a constant is replaced by its taken branch
 * (graph/inline_if.h); each is an entry of rule "if-inline" (kind
 * "inline", device "-": no device asked for it) whose new nodes are named
 * "<If>/inline/..."; those placed on a device other than cpu get reason
 * RESCUED. The rules then work on that graph. An inlining that does not
 * build leaves the graph as written, with a note.
 * Modes (--rescue, tdm_session_options_set_rescue): off, safe (exact
 * rewrites: decompositions and fusions; the default), all (also
 * approximations). */
#ifndef TDM_PLAN_RESCUE_H
#define TDM_PLAN_RESCUE_H

#include "graph/inline_if.h"
#include "graph/unroll_loop.h"
#include "plan/plan.h"

enum { PLAN_RESCUE_DEFAULT = 0, PLAN_RESCUE_OFF = 1, PLAN_RESCUE_SAFE = 2, PLAN_RESCUE_ALL = 3 };

/* "off", "safe", "all" (DEFAULT is "safe"). */
const char *plan_rescue_mode_str(int mode);
/* PLAN_RESCUE_OFF/SAFE/ALL, or -1 for another word. */
int plan_rescue_mode_parse(const char *word);

/* What verification found. */
typedef struct plan_rescue_figs {
    int pass;
    double max_abs;        /* max |rewrite - original| over every output */
    double cosine;         /* worst cosine over the outputs */
    double ref_max;        /* max |original| */
    double tolerance;      /* the max_abs allowed */
    size_t values;         /* elements compared */
    int inputs;            /* input sets run */
    char why[240];         /* failed: one sentence */
} plan_rescue_figs;

/* One run-time check of a kept rescue (rules above, "verified when"):
 * inputs "first-run" or "calibration" (set: its 1-based number); or
 * "synthetic": the plan-time figures a previous plan of the same model
 * found, which a re-plan takes instead of verifying again (deterministic).
 * Strings owned by the options that hold it. */
typedef struct plan_rescue_check {
    char *node, *rule, *device;
    const char *inputs;    /* static: "first-run", "calibration" */
    int set;
    plan_rescue_figs figs;
} plan_rescue_check;

/* Appends a copy of c to o->rescue_checks (a synthetic one once per node,
 * rule and device). */
tdm_status plan_options_add_rescue_check(plan_options *o, const plan_rescue_check *c);
/* "the first run's inputs", "calibration input set 2" into buf. */
const char *plan_rescue_check_where(const plan_rescue_check *c, char *buf, size_t size);

/* Set by the run layer (run/rescue_check.h) in the plan options. */
typedef struct plan_rescue_hooks {
    /* Runs orig and rw (models with the same graph inputs and outputs) on
     * cpu in float32 on the same inputs and fills *f; approx: 1 for an
     * approximation (its wider tolerance). A rewrite that fails to run is a
     * failed verification (pass 0 and why), not an error; a status only for
     * out of memory. */
    tdm_status (*verify)(tdm_err *e, const tdm_model *orig, const tdm_model *rw, int approx, plan_rescue_figs *f);
} plan_rescue_hooks;

typedef struct plan_rescue_entry {
    const char *node, *op;     /* the original node (the first one, for a fusion) */
    const char *rule, *kind;   /* "layernorm", "decompose" */
    int device;                /* index in the plan's device list */
    int kept;
    const char *why;           /* not kept: why */
    const char **nodes;        /* kept: the new nodes' names in the plan's graph */
    int n_nodes;
    const char **ops;          /* their op types */
    const char *branch;        /* an If inlining: "then" or "else"; a function call inlined at
                                * load (rule "function-inline"): "function"; a Loop
                                * unrolled ("loop-unroll"): "loop"; NULL: a rule */
    int verified;              /* figs are set (the synthetic inputs') */
    plan_rescue_figs figs;
    int approx;                /* an approximation (its tolerance) */
    tdm_model *orig_m, *rw_m;  /* owned (a kept rule's): the original node(s) and the rewrite alone, as
                                * verified, for the run-time checks */
    const plan_rescue_check **checks; /* the run-time checks of this rewrite (in p->opts) */
    int n_checks;
    int dropped;               /* not kept: a run-time check failed (why says which) */
} plan_rescue_entry;

typedef struct plan_rescue {
    int mode;
    const tdm_model *base;     /* what the rules rewrite: p->model, or the last of inl */
    gr_inline inl;             /* owned: the If inlining's models (graph/inline_if.h) */
    gr_unroll unr;             /* owned: the Loop unrolling's model (graph/unroll_loop.h) */
    tdm_model *model;          /* owned: the model with the kept rewrites, NULL when none */
    plan_rescue_entry *entries;
    size_t n, cap;
    int *entry_of;             /* per node of the plan's graph: kept entry, or -1 */
    int n_graph;
    const char *note;          /* why the pass did not run, or NULL */
} plan_rescue;

/* The pass (rules above): fills p->rescue and may replace p->g. Fails
 * only on out of memory. */
tdm_status plan_rescue_run(tdm_err *e, tdm_plan *p);
/* After placement: RESCUED on the new nodes placed where they were made for. */
void plan_rescue_mark(tdm_plan *p);
void plan_rescue_free(plan_rescue *r);

/* The ledger's "rescue" section (a cJSON object added to root) and the
 * plan report's lines (appended text, mem_alloc'ed; NULL when nothing was
 * tried). */
struct cJSON;
int plan_rescue_json(const tdm_plan *p, struct cJSON *root);
char *plan_rescue_report(const tdm_plan *p);
/* Kept rescues and new nodes of the plan (for summaries). */
size_t plan_rescue_kept(const tdm_plan *p);
/* Kept rule rescues (entries with orig_m) the run-time checks apply to. */
size_t plan_rescue_checkable(const tdm_plan *p);
/* 1 when entry x has a check on inputs (and set). */
int plan_rescue_checked_on(const plan_rescue_entry *x, const char *inputs, int set);

#endif
