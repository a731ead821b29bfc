/* Loop unrolling for a device that asks for it (unroll_loop.c; issue 18,
 * rule "loop-unroll" of the rescue pass).
 *
 * Rules:
 *   which Loops  every Loop of the main graph (ai.onnx) whose trip count M
 *                is a constant (an initializer, a folded Constant or a
 *                bound input) with 1 <= M <= max_trips, whose condition
 *                input is empty or a constant true, whose body's condition
 *                output is its condition input (also through Identity), a
 *                constant true, or computed by the body and a constant in
 *                each copy once a probe (the model with M copies beside
 *                the Loop, which still makes the outputs) is folded (e.g.
 *                i < 3 of the iteration number): then the copies stop at
 *                the first whose condition is false (it runs, the next do
 *                not) and the model is built again with that many; whose
 *                carried values keep their (static) shapes (the Loop's
 *                output types equal its initial values', or the body's
 *                carried inputs and outputs have their types), without
 *                subgraphs in its body. Any other Loop
 *                is left alone with one sentence saying why (a computed
 *                condition that does not fold: the first such iteration).
 *   the copies   iteration i's nodes are the body's, named
 *                "<Loop>/unroll/<i>/<node>"; its values
 *                "<Loop>/unroll/<i>/<name>"; the iteration number a
 *                constant int64 "<Loop>/unroll/<i>/iter"; the condition a
 *                constant true; carried inputs the Loop's initial values
 *                (i = 0) or the previous iteration's carried outputs;
 *                outer-scope names kept. The Loop's outputs are Identity
 *                nodes ("<Loop>/unroll/output_<j>") of the last carried
 *                values; a scan output is each iteration's value with a new
 *                axis 0 (Unsqueeze "<Loop>/unroll/<i>/scan_<k>"), Concat
 *                along it ("<Loop>/unroll/scan_<k>").
 *   the result   a new model (model_build: validation, inference and
 *                folding), viewing the constants of m (keep m alive). */
#ifndef TDM_GRAPH_UNROLL_LOOP_H
#define TDM_GRAPH_UNROLL_LOOP_H

#include "graph/model.h"

typedef struct gr_unrolled {
    char *node;                /* the Loop's name */
    int64_t trips;             /* M, or -1 when not a constant */
    int64_t runs;              /* the copies made: M, or fewer when the condition folds to false earlier */
    int n_nodes;               /* nodes the copies brought (unrolled) */
    char *why;                 /* NULL: unrolled; else why not (one sentence) */
} gr_unrolled;

typedef struct gr_unroll {
    tdm_model *model;          /* owned: the result; NULL when nothing was unrolled */
    gr_unrolled *loops;        /* every Loop of the main graph, in order */
    int n_loops;
} gr_unroll;

/* Unrolls m's Loops (rules above). A model that does not build fails with
 * its sentence (and nothing in out). */
tdm_status gr_unroll_loops(tdm_err *e, const tdm_model *m, int64_t max_trips, gr_unroll *out);
void gr_unroll_free(gr_unroll *x);

#endif
