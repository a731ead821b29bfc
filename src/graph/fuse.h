/* Elementwise fusion (the op_fuse of ops/op.h): a pass over a graph, built
 * once per execution program, that finds the chains of float32 elementwise
 * nodes following a node and turns each into a small register program the
 * executor applies per block of the head node's output:
 *
 * - in the kernel: when the head is an op whose kernel calls op_fuse_apply
 *   (the table fuse_kernel_ops in fuse.c), ctx->fuse carries the program
 *   and the kernel applies it per tile while the tile is in cache;
 * - in place: for any other float32 head, the executor applies the program
 *   to the head's output buffer once the head has run.
 *
 * A chain holds Relu, Clip, LeakyRelu, Sigmoid, HardSigmoid, HardSwish,
 * Tanh, Erf and Add/Sub/Mul/Div/Max/Min of two chain values or of a chain
 * value and an operand: a constant or a value computed before the head
 * (a residual), broadcast to the output without growing it. Chains may
 * be DAG-shaped (hardswish as x * Clip(x + 3, 0, 6) / 6, SiLU, GELU): every
 * value of a chain but its last has no consumer outside the chain and is
 * not a graph output. The head's output value becomes the chain's last
 * value; the other nodes of the chain are not run ("fused away").
 *
 * By default (fuse_plan_fold_bn(0) turns it off for the process), a Conv
 * with initializer weights whose output only an inference
 * BatchNormalization with initializer parameters reads gets the BatchNormalization folded into its weights and bias (the chain's
 * first member; the chain then goes on from the BatchNormalization's
 * output, with scalar initializer operands only, so that it always runs
 * fused). That changes the results by rounding, as onnxruntime's folding
 * does. The folded tensors are marked immutable, so the GEMM keeps them
 * packed across runs as it does initializers.
 *
 * Each step computes what the standalone kernel computes for an element,
 * in the same order, with the same functions (op_ew_sigmoid_avx2 /
 * op_ew_erf_avx2 when gemm_avx2_usable()). */
#ifndef TDM_RUN_FUSE_H
#define TDM_RUN_FUSE_H

#include "graph/graph.h"
#include "ops/fuse_prog.h"
#include "ops/op.h"

typedef struct fuse_plan fuse_plan;
typedef struct fuse_chain fuse_chain;

/* Builds the fusion of g (its main graph; subgraphs are not fused).
 * Never fails for lack of a fusable node: *out then has no chain. */
tdm_status fuse_plan_build(tdm_err *e, const gr_graph *g, fuse_plan **out);
/* The same pass over the nodes order[0 .. n_order) of g only, run in that
 * order as one program (a cpu partition of a plan, which run/hpart.c runs
 * as a graph of its own, fuse_plan_build on it): the other nodes' values
 * are inputs to it, escapes[v] (may be NULL) marks the values read after
 * it, which no chain may swallow, as graph outputs are. fuse_plan_build(g)
 * is fuse_plan_build_in(g, g->order, all, NULL, 1); on a partition it
 * makes the decisions fuse_plan_build makes on the partition's graph (the
 * planner prices cpu partitions by them, tests/plan checks the two agree).
 * fold 0: BatchNormalizations are still marked folded but their weights
 * are not computed (fuse_chain_inputs then gives NULL: a plan to price,
 * not to run). Indices are g's. */
tdm_status fuse_plan_build_in(tdm_err *e, const gr_graph *g, const int *order, int n_order,
                              const unsigned char *escapes, int fold, fuse_plan **out);
/* fuse_plan_build_in with the heads restricted when epilogue is 1 to the
 * ops fuse_epilogue_head accepts: the chains an NPU compiler fuses into a
 * convolution's or matrix product's epilogue (the BatchNormalization
 * folded into a Conv, the activations and elementwise steps after it),
 * which the planner prices a vnpu partition by ("fusion": "epilogue");
 * epilogue 0 is fuse_plan_build_in. */
tdm_status fuse_plan_build_heads(tdm_err *e, const gr_graph *g, const int *order, int n_order,
                                 const unsigned char *escapes, int fold, int epilogue, fuse_plan **out);
/* 1 for Conv, ConvTranspose, Gemm and MatMul: the heads of an epilogue. */
int fuse_epilogue_head(int op);
void fuse_plan_free(fuse_plan *fp);

/* Whether the plans built after the call fold BatchNormalizations into
 * Convs (see above; process-wide, off by default: the folding changes
 * results by rounding, ~1e-6 relative, more than the plan tests' fp32
 * bound of 1e-6 between a fused CPU session and an unfused plan allows). */
void fuse_plan_fold_bn(int on);

/* Counts: chains, and nodes fused away (heads excluded). */
int fuse_plan_chains(const fuse_plan *fp);
int fuse_plan_fused_nodes(const fuse_plan *fp);

/* The chain node n heads, or NULL. */
const fuse_chain *fuse_head_chain(const fuse_plan *fp, int n);
/* Node n is fused away into the chain of another node (its head). */
int fuse_is_member(const fuse_plan *fp, int n);

/* Chain queries. */
int fuse_chain_in_kernel(const fuse_chain *c);  /* applied by the head's kernel */
int fuse_chain_out_value(const fuse_chain *c);  /* value id of the chain's last value */
int fuse_chain_n_members(const fuse_chain *c);  /* nodes fused away, in execution order */
int fuse_chain_member(const fuse_chain *c, int i);
/* A chain whose head is a Conv with a BatchNormalization folded into it
 * (the BatchNormalization is its first member): sets in[1], in[2] to the
 * folded weights and bias the head runs with (*n_in raised to 3; in has
 * room for 3) and returns 1; else 0 and nothing changes. */
int fuse_chain_inputs(const fuse_chain *c, const tdm_tensor **in, int *n_in);
/* The chain's program (ops/fuse_prog.h), what fuse_bind binds. */
const fuse_prog *fuse_chain_prog(const fuse_chain *c);
/* How the chain's program runs: 0 the step-per-pass interpreter, 1 the
 * general one-pass loop, 2 a straight-line kernel (fuse_lin_special). */
int fuse_chain_kernel(const fuse_chain *c);

/* Binds chain c for a run: vals[] holds the current value of each value
 * id; y is the head's output tensor (dims set by the kernel before any
 * op_fuse_apply). Fails (TDM_E_INTERNAL) when an operand has no value. */
tdm_status fuse_bind(tdm_err *e, const fuse_chain *c, tdm_tensor *const *vals, const tdm_tensor *y, op_fuse *f);
/* (The program, its interpreter op_fuse_apply and fuse_apply_all: ops/fuse_prog.h.)
 * 1 when f's operands are float32 and broadcast to f->y's shape without
 * growing it (the condition of a fused run), else 0. */
int fuse_shapes_ok(const op_fuse *f);

#endif
