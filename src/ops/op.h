/* The operator table: every operator tandem knows is declared once, in one
 * of the src/ops/ X-macro files (.def) included by ops.def, with its ONNX
 * name, domain, the opset versions it implements (the "since" versions of
 * the ONNX definitions, ascending), its run and infer hooks, the element
 * types of its kernels and flags.
 *
 * A run hook computes a node on host tensors: it reads ctx->in, decides the
 * output shapes, allocates each output with op_out() and fills it. It never
 * prints; on failure it returns a status with a sentence in ctx->err (the
 * executor prefixes the node's label).
 *
 * An infer hook (optional) computes static output types from static input
 * types with possibly symbolic or unknown dims and, where known, constant
 * input values. It must not fail for unknowns: it leaves them unknown. */
#ifndef TDM_OPS_OP_H
#define TDM_OPS_OP_H

#include "core/err.h"
#include "core/tensor.h"
#include "ops/node.h"

/* An activation applied to a kernel's output in place (the activations the executor fuses
 * into Conv and Gemm, see op_fuse). Each computes exactly what
 * the standalone op computes in float. */
typedef enum op_act_kind {
    OP_ACT_NONE = 0,
    OP_ACT_RELU,         /* x < 0 ? 0 : x */
    OP_ACT_CLIP,         /* min(max(x, a), b) as Clip: a = min, b = max */
    OP_ACT_LEAKY_RELU,   /* x < 0 ? a x : x */
    OP_ACT_HARD_SIGMOID, /* max(0, min(1, a x + b)) */
    OP_ACT_HARD_SWISH    /* x max(0, min(1, a x + b)), a = 1/6, b = 0.5 */
} op_act_kind;

typedef struct op_act {
    int kind; /* op_act_kind */
    float a, b;
} op_act;

/* An elementwise program the executor fused into a node (built by
 * graph/fuse.c, interpreted by ops/fuse_prog.c):
 * the consumers of a float32 Conv, ConvTranspose, Gemm or MatMul output
 * that only apply elementwise ops (activations, Add/Mul/Div/Sub/Clip with
 * constants or with other tensors of the run, e.g. a residual Add) are
 * folded into the node, whose output becomes the chain's last value. */
typedef struct op_fuse op_fuse;

/* Applies the fused program in place to n consecutive float32 elements
 * of the node's output, y[0..n), the first of which has flat index at in
 * the output tensor. A kernel with ctx->fuse set calls it exactly once for
 * every output element, after the element's own value (bias included) is
 * final, preferably per tile while the tile is in cache. Thread-safe: pool
 * workers may call it at once on disjoint ranges. */
void op_fuse_apply(const op_fuse *f, float *y, size_t at, size_t n);

/* 1 when the whole program is one clamp, y = min(max(y, lo), hi) with
 * Clip's comparisons (a Relu: lo = 0, hi = +inf), setting *lo and *hi;
 * else 0. A kernel may then clamp in registers as it stores, as long as
 * a NaN stays NaN and -0 stays -0 (in AVX2: max(lo, v) then min(hi, v),
 * v the second operand), and instead of calling op_fuse_apply it calls
 * op_fuse_applied once after every element is stored. */
int op_fuse_clamp(const op_fuse *f, float *lo, float *hi);
void op_fuse_applied(const op_fuse *f);

typedef struct op_ctx op_ctx;
typedef struct op_infer_ctx op_infer_ctx;

/* What a kernel needs from whoever runs it (the executors, constant
 * folding, calibration), as a table of callbacks: ops sits below all of
 * them and calls none of them by name. The caller embeds an op_caller as
 * the first member of its own state and points ctx->caller at it; a
 * callback finds that state again from ctx->caller. Kernels do not call
 * the table directly: they call op_run_subgraph, op_input_const and
 * op_subgraph_io (ops/node_ctx.c), which answer for a caller without the
 * callback (ctx->caller NULL, as in constant folding and the kernel
 * tests): no subgraph runs, no input is known constant. */
typedef struct op_calls {
    /* Runs subgraph g (an attribute of ctx->node) on in[0 .. n_in) (n_in is
     * g's input count); out[] receives g's outputs, new values the kernel
     * owns. Outer-scope names resolve through the caller's scopes. */
    tdm_status (*run_subgraph)(op_ctx *ctx, const gr_graph *g, int n_in, const tdm_tensor *const *in,
                               tdm_tensor **out);
    /* 1 when ctx->in[i] is the node's input i as a value constant for the
     * caller's lifetime (an initializer of the graph), else 0. */
    int (*input_const)(const op_ctx *ctx, int i);
    /* g's input and output counts. */
    void (*subgraph_io)(const gr_graph *g, int *n_in, int *n_out);
    /* The element type declared for g's output k (TDM_UNDEFINED: unknown). */
    tdm_dtype (*subgraph_out_dtype)(const gr_graph *g, int k);
} op_calls;

typedef struct op_caller {
    const op_calls *calls;
} op_caller;

typedef tdm_status (*op_run_fn)(op_ctx *ctx);
typedef tdm_status (*op_infer_fn)(op_infer_ctx *ctx);

struct op_ctx {
    const gr_node *node;
    int version;                    /* node->version, the since-version in effect */
    int n_in;
    const tdm_tensor *const *in;    /* NULL for an omitted optional input */
    int n_out;
    tdm_tensor **out;               /* empty shells; fill with op_out() or by hand */
    tdm_err *err;
    const op_caller *caller;        /* the caller's callbacks (op_calls), or NULL */
    int threads;                    /* worker threads the kernel may use */
    uint64_t *rng;                  /* state for random ops (per session run) */
    const op_fuse *fuse;            /* fused elementwise consumers (see op_fuse_apply), or NULL */
    /* 1: the kernel may use a faster algorithm that rounds differently from
     * the reference one (Winograd convolution). Set when the session runs
     * fused (TDM_FUSION_ON or OBSERVED); 0 under TDM_FUSION_OFF, the
     * reference arithmetic that compare and extract use. */
    int fast;
};

struct op_infer_ctx {
    const gr_node *node;
    int version;
    int n_in;
    const gr_type *const *in;       /* NULL for an omitted input */
    const tdm_tensor *const *value; /* constant value of each input, or NULL */
    int n_out;
    gr_type *out;                   /* pre-set to unknown (rank -1, TDM_UNDEFINED) */
    gr_model *model;                /* for gr_intern of new symbols */
    tdm_err *err;
};

/* Flags */
#define OPF_SHAPE 0x1      /* shape/index bookkeeping (may run on CPU under deny-compute) */
#define OPF_SUBGRAPH 0x2   /* runs subgraphs (If, Loop, Scan, SequenceMap) */
#define OPF_RANDOM 0x4     /* nondeterministic: never constant-folded */
#define OPF_SEQUENCE 0x8   /* takes or produces sequences / optionals */

#define OP_MAX_SINCE 12

typedef struct op_def {
    const char *name;              /* ONNX op type */
    const char *domain;            /* "" for ai.onnx */
    op_run_fn run;
    op_infer_fn infer;             /* (optional) */
    uint32_t dtypes;               /* DT_BIT mask of the element types of input 0 its kernels take */
    unsigned flags;
    int since[OP_MAX_SINCE];       /* implemented since-versions, ascending, 0-terminated */
} op_def;

/* The op ids, from the X-macro table. */
enum op_id {
#define OP(id, domain, run, infer, dtypes, flags, ...) OP_##id,
#include "ops/ops.def"
#undef OP
    OP_COUNT
};

extern const op_def op_table[OP_COUNT];

/* Finds the op for (domain, op_type) and resolves the since-version for the
 * model's opset of that domain. Returns TDM_OK and sets *op and *version;
 * TDM_E_UNSUPPORTED with a sentence when the op is unknown or the opset is
 * older than any implemented version or newer than tandem knows. */
tdm_status op_resolve(tdm_err *e, const char *domain, const char *op_type, int64_t opset, int *op, int *version);

/* Why tandem refuses (domain, op_type) although it knows the operator
 * (DictVectorizer, CastMap: they take maps), or NULL. */
const char *op_refused(const char *domain, const char *op_type);

/* The newest opset of the default domain tandem implements. */
#define OP_MAX_OPSET 28
/* The newest opset of ai.onnx.ml tandem implements. */
#define OP_MAX_ML_OPSET 5

/* ---- helpers for run hooks ---- */

/* Allocates output i with the given type and shape (uninitialised data). */
tdm_status op_out(op_ctx *ctx, int i, tdm_dtype dtype, int rank, const int64_t *dims);
/* Output i is wanted (present in the node and consumed or a graph output). */
int op_out_wanted(const op_ctx *ctx, int i);
/* Runs subgraph g with the given inputs; outputs[] receive new values the
 * caller owns. Outer-scope names resolve through ctx's caller (op_calls);
 * without one it fails with a sentence. */
tdm_status op_run_subgraph(op_ctx *ctx, const gr_graph *g, int n_in, const tdm_tensor *const *in,
                           tdm_tensor **out);
/* 1 when input i is a value constant for the caller's lifetime (an
 * initializer, or a tensor marked immutable); 0 otherwise or unknown. */
int op_input_const(const op_ctx *ctx, int i);
/* Subgraph g's input and output counts; fails with a sentence when ctx has
 * no caller that runs subgraphs. */
tdm_status op_subgraph_io(op_ctx *ctx, const gr_graph *g, int *n_in, int *n_out);
/* The element type declared for subgraph g's output k, TDM_UNDEFINED when
 * unknown (or without a caller). */
tdm_dtype op_subgraph_out_dtype(const op_ctx *ctx, const gr_graph *g, int k);

/* ---- the one place an op_ctx is built (ops/node_ctx.c) ---- */

/* Fills ctx to run node on in[] (node->n_inputs entries) into out[]
 * (node->n_outputs empty shells, see op_out_shells): no fused program, the
 * reference arithmetic (fast 0); the caller sets ctx->fuse and ctx->fast
 * when it runs fused. caller may be NULL (no subgraphs, no constants). */
/* Aligns every input of ctx whose bytes lie misaligned in the model's file
 * (inline raw_data; core/tensor.h tensor_align: once, for good) before a
 * kernel loads them, but those the node's kernel reads only packed or
 * aligns itself (Conv's float32 W) when plain (the op's own kernel runs,
 * not a QDQ group's). op_run does it; a caller that runs op_table's kernel
 * itself (constant folding) calls it first. */
tdm_status op_align_inputs(op_ctx *ctx, int plain);
void op_ctx_init(op_ctx *ctx, const gr_node *node, const tdm_tensor *const *in, tdm_tensor **out, tdm_err *e,
                 const op_caller *caller, int threads, uint64_t *rng);
/* Allocates node's n empty output shells into out[0 .. n); on failure
 * destroys what it allocated, clears out[] and fails with a sentence. */
tdm_status op_out_shells(tdm_err *e, int n, tdm_tensor **out);
/* Runs ctx's node with its op's built-in kernel (op_table). */
tdm_status op_run(op_ctx *ctx);
/* Records an error naming the problem; returns status. */
#define op_fail(ctx, status, ...) err_set((ctx)->err, (status), __VA_ARGS__)

/* Broadcasting of two shapes (numpy rules). Returns 0 and the shape, or -1. */
int op_broadcast(int ra, const int64_t *a, int rb, const int64_t *b, int *rout, int64_t *out);

/* ---- helpers for infer hooks ---- */

/* out[i] = in[j]'s type. */
void op_infer_copy(op_infer_ctx *ctx, int i, int j);
/* Generic hooks */
tdm_status op_infer_same(op_infer_ctx *ctx);      /* output 0 has input 0's type */
tdm_status op_infer_broadcast(op_infer_ctx *ctx); /* output 0: broadcast of all inputs, dtype of input 0 */
/* The rank B takes in the binary ops before opset 7 (Add, Sub, Mul, Div
 * 1/6, Pow 1): with broadcast=1 and an 'axis', B's dimensions align with
 * A's from that axis, i.e. B gets trailing 1s up to rank_a - axis. */
int op_legacy_bcast_rank(const gr_node *n, int version, int rank_a, int rank_b);
tdm_status op_infer_bool_broadcast(op_infer_ctx *ctx); /* as above, dtype bool */

/* ---- shared kernel utilities (ops/util.c) ---- */

/* Strides (in elements) of an input of shape in_dims, aligned to an output
 * of rank r: 0 along broadcast dimensions. */
void op_bcast_strides(int r, const int64_t *out_dims, int rin, const int64_t *in_dims, int64_t *strides);

/* Offset in an input (strides from op_bcast_strides) of the output's flat
 * index i. */
int64_t op_bcast_offset(size_t i, int r, const int64_t *out_dims, const int64_t *strides);

/* Normalises axis (negative counts from the end) for a tensor of the given
 * rank; fails with a sentence naming the attribute when out of range. */
tdm_status op_axis(op_ctx *ctx, int64_t axis, int rank, const char *what, int *out);

/* Reads an integer tensor input (int32/int64/…) into a new int64 array the
 * caller frees with mem_free(); *n receives the element count. */
tdm_status op_in_ints(op_ctx *ctx, int i, int64_t **vals, size_t *n);

/* One splitmix64 step: advances *state and returns the next 64 random bits
 * (the stream behind ctx->rng). */
uint64_t op_splitmix64(uint64_t *state);

#endif
