/* The heterogeneous executor: runs a plan (src/plan) — nodes on their
 * devices in the plan's execution order, boundary copies once per tensor
 * per destination device, device memory accounted and released after each
 * tensor's last use there. A plan whose nodes all run on cpu goes through
 * exec_graph_cached unchanged; in any other plan each maximal run of cpu
 * positions (a cpu partition, hpart.h) runs as one graph through the same
 * path: fused, from the program's arena, with its own cache.
 *
 * The program is built once per session and only read by runs: every
 * run keeps its state (tensors, residency, device buffers, statistics) to
 * itself, so runs may proceed from several threads at once. Calls into a
 * plugin (run, take_fallbacks) are serialised per program, since the
 * public device ABI does not promise thread safety. */
#ifndef TDM_RUN_HEXEC_H
#define TDM_RUN_HEXEC_H

#include "plan/plan.h"

#include <pthread.h>

typedef struct exec_prog exec_prog;

/* A fallback a plugin reported during a run. */
typedef struct exec_fallback {
    char *device;
    char *node;
    tdm_reason reason;
    char *detail;
} exec_fallback;

/* Figures of one run. */
typedef struct exec_stats {
    uint64_t copies;          /* copies made */
    uint64_t copy_bytes;      /* bytes of activation copies (inputs and outputs included) */
    uint64_t weight_bytes;    /* bytes of weights uploaded */
    size_t nodes;             /* nodes run */
    size_t *nodes_by_device;  /* per device of the plan */
    size_t n_devices;
    exec_fallback *fallbacks; /* reported by plugins */
    size_t n_fallbacks, cap_fallbacks;
} exec_stats;

tdm_status exec_prog_build(tdm_err *e, const tdm_plan *plan, exec_prog **out);
void exec_prog_free(exec_prog *p);
/* The observer registered on p (NULL when none). */
void exec_prog_get_observer(const exec_prog *p, tdm_observer_fn *fn, void **user);

/* Runs the plan's graph. in[] has g->n_inputs entries (as exec_graph),
 * out[] receives g->n_outputs new values. stats (may be NULL) is filled
 * and must be released with exec_stats_free. A device failure returns
 * TDM_E_DEVICE with a sentence naming the device and the node. */
tdm_status exec_prog_run(tdm_err *e, const exec_prog *p, const tdm_tensor *const *in, tdm_tensor **out, int threads,
                         exec_stats *stats);

/* The cpu partitions of a program with nodes off cpu (hpart.h; *n 0 and
 * NULL for an all-cpu program, which runs its graph whole). */
struct hpart;
const struct hpart *exec_prog_parts(const exec_prog *p, int *n);

void exec_stats_free(exec_stats *s);
/* The stats as a JSON object text for the ledger's "run" (mem_alloc). */
char *exec_stats_json(const exec_stats *s, const tdm_plan *plan);

#endif
