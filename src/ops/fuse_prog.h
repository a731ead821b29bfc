/* The fused elementwise program a kernel applies (op_fuse of ops/op.h) and
 * its interpreter (ops/fuse_prog.c, the AVX2 loops in ops/fuse_avx2.c).
 *
 * The program is built by the executor's fusion pass (graph/fuse.c), which
 * finds the chains of elementwise nodes after a head node; here it is only
 * data: a list of register steps (fuse_ins), the count of its operands and,
 * in AVX2 builds, the one-pass form of the same steps (fuse_lin). A run binds
 * it to the head's output and the operands' values (struct op_fuse), and the
 * head's kernel, or the executor after the head ran, applies it. */
#ifndef TDM_OPS_FUSE_PROG_H
#define TDM_OPS_FUSE_PROG_H

#include "ops/op.h"

#include <stdatomic.h>

#define FUSE_MAX_NODES 16   /* nodes of one chain, head included */
#define FUSE_MAX_OPERANDS 8 /* operands of one chain */

/* The kinds of step: unary ones first (FK_ADD is the first binary one). */
enum fuse_kind {
    FK_RELU, FK_CLIP, FK_LEAKY, FK_SIGMOID, FK_HSIGMOID, FK_HSWISH, FK_TANH, FK_ERF,
    FK_ADD, FK_SUB, FK_MUL, FK_DIV, FK_MAX, FK_MIN
};

/* One step: reg[dst] = kind(a[, b]). a, b >= 0 name registers (0 is the
 * head's output), < 0 operand -1 - a. p, q: the step's parameters (Clip's
 * bounds, LeakyRelu's alpha, HardSigmoid's alpha and beta). */
typedef struct fuse_ins {
    int kind, dst, a, b;
    float p, q;
} fuse_ins;

/* One-pass programs: a chain whose steps each read the current value (the
 * previous step's result), at most one saved earlier value, and scalar or
 * full-size operands, run in one pass over the block in registers
 * (FL_SIGMOID by op_ew_sigmoid8, the standalone AVX2 Sigmoid's function;
 * AVX2 builds only). */
enum fuse_lin_op {
    FL_SAVE,                                            /* saved = cur */
    FL_RELU, FL_CLIP, FL_SIGMOID,                       /* cur = f(cur) (p, q: Clip bounds) */
    FL_ADD, FL_SUB, FL_MUL, FL_DIV, FL_MAX, FL_MIN,     /* cur = cur op k */
    FL_RADD, FL_RSUB, FL_RMUL, FL_RDIV, FL_RMAX, FL_RMIN /* cur = k op cur */
};
#define FUSE_LIN_MAX (2 * FUSE_MAX_NODES)
typedef struct fuse_lin {
    int op;
    int src;    /* the second value k: 0 the saved value, 1 a scalar, 2 a full-size operand */
    int opd;    /* operand index (src 1, 2) */
    float p, q; /* Clip bounds */
} fuse_lin;

/* A program: n_members steps (ins[i].dst == i + 1; the last one writes
 * the output itself), n_opd operands, and its one-pass form when n_lin > 0.
 * avx2: the steps run with the AVX2 loops (set when gemm_avx2_usable()). */
typedef struct fuse_prog {
    int avx2;
    int n_members;
    fuse_ins ins[FUSE_MAX_NODES];
    int n_opd;
    int n_lin;
    fuse_lin lin[FUSE_LIN_MAX];
} fuse_prog;

/* A program bound to one run: what ctx->fuse points to. */
struct op_fuse {
    const fuse_prog *prog;
    const tdm_tensor *y;                        /* the head's output (its dims are read when applied) */
    const tdm_tensor *opd[FUSE_MAX_OPERANDS];   /* the operands' values */
    atomic_size_t done;                         /* 0 until the program was applied, then the output's count */
};

/* Applies f to the whole of f->y in place (pool threads). */
void fuse_apply_all(const op_fuse *f, int threads);

/* The AVX2 loops (fuse_avx2.c; call only when gemm_avx2_usable()). */
void fuse_relu_avx2(float *y, const float *x, size_t n);
void fuse_clip_avx2(float *y, const float *x, size_t n, float lo, float hi);
void fuse_bin_avx2(int kind, float *y, const float *a, const float *b, size_t n);
/* y = a op s (s_first: s op a). */
void fuse_bin_scalar_avx2(int kind, float *y, const float *a, float s, int s_first, size_t n);
/* Runs prog[0 .. n_prog) on y[0 .. n) in place: sv[s] is the scalar of
 * step s (src 1), pv[s] the operand's elements for y[0 ..] (src 2). */
void fuse_lin_avx2(const fuse_lin *prog, int n_prog, const float *sv, const float *const *pv, float *y, size_t n);
/* 1 when prog has a straight-line kernel (affine-hardswish-affine,
 * residual Add then Relu, SiLU x * Sigmoid(x)) in fuse_lin_avx2. */
int fuse_lin_special(const fuse_lin *prog, int n_prog);

#endif
