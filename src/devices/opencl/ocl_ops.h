/* Internals of the OpenCL operators, shared by ocl_ops.c (the op table,
 * supports() and run()) and the files of the op families: ocl_helpers.c
 * (output buffers, small inputs, launches), ocl_elementwise.c, ocl_gemm.c,
 * ocl_conv.c (convolution and pooling), ocl_reduce.c (reductions, softmax,
 * LayerNormalization), ocl_move.c (data movement) and ocl_resize.c. Each
 * family's kernels are the section of the same name in kernels.cl. Only
 * built with OpenCL (TDM_HAVE_OPENCL). */
#ifndef TDM_DEVICES_OPENCL_OCL_OPS_H
#define TDM_DEVICES_OPENCL_OCL_OPS_H

#include "devices/opencl/ocl_internal.h"
#include "graph/graph.h"

#include <stddef.h>
#include <stdint.h>

/* Unary codes of un_op in kernels.cl. */
enum ocl_unary {
    U_ABS, U_NEG, U_EXP, U_LOG, U_SQRT, U_RECIP, U_FLOOR, U_CEIL, U_ROUND, U_SIGN, U_ERF, U_SIN, U_COS, U_TAN,
    U_ASIN, U_ACOS, U_ATAN, U_SINH, U_COSH, U_ASINH, U_ACOSH, U_ATANH, U_RELU, U_LEAKY, U_ELU, U_SELU, U_CELU,
    U_SIGMOID, U_HSIGMOID, U_HSWISH, U_SOFTPLUS, U_SOFTSIGN, U_TANH, U_THRELU, U_CLIP, U_MULC, U_DIVC
};

/* Binary codes of bin_op in kernels.cl. */
enum ocl_binary { B_ADD, B_SUB, B_MUL, B_DIV, B_POW, B_MAX, B_MIN, B_PRELU };

/* A node description seen as a gr_node (ocl_ops.c). */
typedef struct onode {
    const tdm_node_desc *d;
    gr_node gn;
    gr_attr *attrs;
    int op, version;
} onode;

typedef struct orun orun;
typedef struct ocl_opdef ocl_opdef;

enum { KIND_FLOAT, KIND_ANY, KIND_SHAPE };

struct ocl_opdef {
    const char *name;
    int kind;
    int code;
    /* (optional) op-specific verdict beyond op, dtype and rank */
    tdm_reason (*check)(const onode *o, tdm_verdict *v);
    tdm_status (*run)(orun *r);
    int max_rank;  /* ranks above are SHAPE_UNSUPPORTED (0: OCL_MAX_RANK) */
};

struct orun {
    ocl_ctx *c;
    tdm_err *e;
    onode *o;
    const ocl_opdef *def;
    const tdm_device_tensor *in;
    int n_in;
    tdm_device_tensor *out;
    int n_out;
    int prog;
};

/* ---- GEMM (ocl_gemm.c), also under Conv (ocl_conv.c) ---- */

typedef struct ocl_gemm_p {
    int M, N, K, sam, sak, sbk, sbn, offa, offb, nb;
    int bd[4], bsa[4], bsb[4];
    float alpha, beta;
    int has_c, scm, scn;
} ocl_gemm_p;

/* ---- functions of ocl_*.c: helpers, then the op table's check/run ---- */

int ocl_desc_present(const tdm_node_desc *d, int i);
int ocl_desc_out_present(const tdm_node_desc *d, int i);
tdm_reason ocl_verdict(tdm_verdict *v, tdm_reason r, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
tdm_status ocl_fail(orun *r, tdm_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
tdm_status ocl_out_new(orun *r, int i, tdm_dtype dt, int rank, const int64_t *dims);
tdm_status ocl_in_ints(orun *r, int i, int64_t **v, int64_t *n);
tdm_status ocl_in_floats(orun *r, int i, double **v, int64_t *n);
tdm_status ocl_kern(orun *r, int prog, ocl_kid k, ocl_args *a);
tdm_status ocl_launch1(orun *r, ocl_args *a, const char *what, size_t n);
int ocl_coalesce(int rank, int64_t *d, int ns, int64_t st[][TDM_MAX_RANK]);
tdm_status ocl_copy_strided(orun *r, cl_mem x, cl_mem y, size_t es, int rank, const int64_t *od,
                            const int64_t *is, int64_t base);
tdm_status ocl_run_unary(orun *r);
tdm_status ocl_run_binary(orun *r);
tdm_reason ocl_check_pow(const onode *o, tdm_verdict *v);
tdm_reason ocl_check_celu(const onode *o, tdm_verdict *v);
tdm_reason ocl_check_bn(const onode *o, tdm_verdict *v);
tdm_status ocl_run_bn(orun *r);
tdm_status ocl_gemm_launch(orun *r, cl_mem A, cl_mem B, cl_mem C, cl_mem Y, const ocl_gemm_p *p, size_t batch);
void ocl_gemm_init(ocl_gemm_p *p);
tdm_status ocl_run_gemm(orun *r);
tdm_status ocl_run_matmul(orun *r);
tdm_reason ocl_check_matmul(const onode *o, tdm_verdict *v);
tdm_reason ocl_check_conv(const onode *o, tdm_verdict *v);
tdm_status ocl_run_conv(orun *r);
tdm_status ocl_run_convt(orun *r);
tdm_reason ocl_check_pool(const onode *o, tdm_verdict *v);
tdm_status ocl_run_pool(orun *r);
tdm_status ocl_run_global_pool(orun *r);
tdm_status ocl_run_reduce(orun *r);
tdm_status ocl_run_softmax(orun *r);
tdm_reason ocl_check_layernorm(const onode *o, tdm_verdict *v);
tdm_status ocl_run_layernorm(orun *r);
tdm_status ocl_run_identity(orun *r);
tdm_status ocl_run_reshape(orun *r);
tdm_status ocl_run_flatten(orun *r);
tdm_status ocl_run_squeeze(orun *r);
tdm_status ocl_run_unsqueeze(orun *r);
tdm_status ocl_run_transpose(orun *r);
tdm_status ocl_run_expand(orun *r);
tdm_status ocl_run_slice(orun *r);
tdm_status ocl_run_concat(orun *r);
tdm_status ocl_run_split(orun *r);
tdm_status ocl_run_gather(orun *r);
tdm_status ocl_run_shape(orun *r);
tdm_reason ocl_check_resize(const onode *o, tdm_verdict *v);
tdm_status ocl_run_resize(orun *r);

/* ---- small run helpers ---- */

static inline cl_mem MEM(const tdm_device_tensor *t) { return (cl_mem)t->buf; }

static inline int in_present(const orun *r, int i) { return i < r->n_in && r->in[i].buf != NULL; }

static inline int out_wanted(const orun *r, int i) { return i < r->n_out && ocl_desc_out_present(r->o->d, i); }

static inline size_t tcount(const tdm_device_tensor *t)
{
    size_t n = 1;
    for (int i = 0; i < t->rank; i++)
        n *= (size_t)t->dims[i];
    return n;
}

static inline void to_int8(const int64_t *v, int n, int *o)
{
    for (int i = 0; i < 8; i++)
        o[i] = i < n ? (int)v[i] : 1;
}

static inline ocl_kid by_size(ocl_kid base, size_t es)
{
    return (ocl_kid)(base + (es == 1 ? 0 : es == 2 ? 1 : es == 4 ? 2 : 3));
}

#endif
