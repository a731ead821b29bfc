/* The OpenCL elementwise operators: unary, binary (Add … PRelu, the
 * variadic Max, Min, Sum, Mean), BatchNormalization. Kernels: the
 * "elementwise" section of kernels.cl. */
#ifdef TDM_HAVE_OPENCL

#include "devices/opencl/ocl_ops.h"
#include "core/mem.h"
#include "core/tensor.h"
#include "graph/graph.h"
#include "ops/nn.h"
#include "ops/op.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------ elementwise */

static tdm_status run_unary_code(orun *r, int code, float a_, float b_, float g_)
{
    const tdm_device_tensor *x = &r->in[0];
    tdm_status st = ocl_out_new(r, 0, x->dtype, x->rank, x->dims);
    if (st)
        return st;
    size_t n = tcount(x);
    ocl_args a;
    if ((st = ocl_kern(r, r->prog, K_UNARY, &a)))
        return st;
    ocl_arg_mem(&a, MEM(x));
    ocl_arg_mem(&a, MEM(&r->out[0]));
    ocl_arg_int(&a, (int)n);
    ocl_arg_int(&a, code);
    ocl_arg_float(&a, a_);
    ocl_arg_float(&a, b_);
    ocl_arg_float(&a, g_);
    return ocl_launch1(r, &a, r->o->d->op_type, n);
}

tdm_status ocl_run_unary(orun *r)
{
    const gr_node *n = &r->o->gn;
    float a = 0, b = 0, g = 0;
    switch (r->def->code) {
    case U_LEAKY: a = gr_attr_float(n, "alpha", 0.01f); break;
    case U_ELU: case U_CELU: case U_THRELU: a = gr_attr_float(n, "alpha", 1.0f); break;
    case U_SELU:
        a = gr_attr_float(n, "alpha", 1.67326319217681884765625f);
        g = gr_attr_float(n, "gamma", 1.05070102214813232421875f);
        break;
    case U_HSIGMOID:
        a = gr_attr_float(n, "alpha", 0.2f);
        b = gr_attr_float(n, "beta", 0.5f);
        break;
    case U_HSWISH:
        a = (float)(1.0 / 6);
        b = 0.5f;
        break;
    case U_CLIP:
        if (r->o->version < 11) {
            a = gr_attr_float(n, "min", -FLT_MAX);
            b = gr_attr_float(n, "max", FLT_MAX);
        } else {
            double *v;
            int64_t cnt;
            a = -INFINITY;
            b = INFINITY;
            for (int i = 1; i <= 2; i++) {
                tdm_status st = ocl_in_floats(r, i, &v, &cnt);
                if (st)
                    return st;
                if (cnt >= 0 && cnt != 1) {
                    mem_free(v);
                    return ocl_fail(r, TDM_E_RUNTIME, "input %d (%s) must be a scalar", i, i == 1 ? "min" : "max");
                }
                if (cnt == 1) {
                    if (i == 1)
                        a = (float)v[0];
                    else
                        b = (float)v[0];
                }
                mem_free(v);
            }
        }
        break;
    default: break;
    }
    if (r->def->code == U_CELU && a == 0)
        return ocl_fail(r, TDM_E_MODEL, "attribute 'alpha' must not be 0");
    return run_unary_code(r, r->def->code, a, b, g);
}

/* y (shape od) = a op b with broadcasting. */
static tdm_status binary_launch(orun *r, int op, const tdm_device_tensor *A, const tdm_device_tensor *B, cl_mem y,
                                int orank, const int64_t *od)
{
    size_t n = 1, na = tcount(A), nb = tcount(B);
    for (int k = 0; k < orank; k++)
        n *= (size_t)od[k];
    if (n == 0)
        return TDM_OK;
    ocl_args a;
    tdm_status st;
    int mode = -1;
    if (na == n && nb == n)
        mode = 0;
    else if (na == n && nb == 1)
        mode = 1;
    else if (na == 1 && nb == n)
        mode = 2;
    if (mode >= 0) {
        if ((st = ocl_kern(r, r->prog, K_BINARY_FLAT, &a)))
            return st;
        ocl_arg_mem(&a, MEM(A));
        ocl_arg_mem(&a, MEM(B));
        ocl_arg_mem(&a, y);
        ocl_arg_int(&a, (int)n);
        ocl_arg_int(&a, op);
        ocl_arg_int(&a, mode);
        return ocl_launch1(r, &a, r->o->d->op_type, n);
    }
    int64_t d[TDM_MAX_RANK], s[2][TDM_MAX_RANK];
    memcpy(d, od, sizeof d[0] * (size_t)orank);
    op_bcast_strides(orank, od, A->rank, A->dims, s[0]);
    op_bcast_strides(orank, od, B->rank, B->dims, s[1]);
    int nr = ocl_coalesce(orank, d, 2, s);
    if (nr > OCL_MAX_RANK)
        return ocl_fail(r, TDM_E_UNSUPPORTED, "broadcasts over %d dimensions after merging; opencl kernels take %d", nr,
                    OCL_MAX_RANK);
    int di[8], sa[8], sb[8];
    to_int8(d, nr, di);
    for (int i = 0; i < 8; i++) {
        sa[i] = i < nr ? (int)s[0][i] : 0;
        sb[i] = i < nr ? (int)s[1][i] : 0;
    }
    if ((st = ocl_kern(r, r->prog, K_BINARY_BCAST, &a)))
        return st;
    ocl_arg_mem(&a, MEM(A));
    ocl_arg_mem(&a, MEM(B));
    ocl_arg_mem(&a, y);
    ocl_arg_int(&a, (int)n);
    ocl_arg_int(&a, op);
    ocl_arg_int(&a, nr);
    ocl_arg_int8(&a, di);
    ocl_arg_int8(&a, sa);
    ocl_arg_int8(&a, sb);
    return ocl_launch1(r, &a, r->o->d->op_type, n);
}

/* Add … PRelu, and the variadic Max, Min, Sum, Mean. */
tdm_status ocl_run_binary(orun *r)
{
    const char *opn = r->o->d->op_type;
    int variadic = !strcmp(opn, "Max") || !strcmp(opn, "Min") || !strcmp(opn, "Sum") || !strcmp(opn, "Mean");
    int n_in = 0;
    for (int i = 0; i < r->n_in; i++) {
        if (!in_present(r, i))
            return ocl_fail(r, TDM_E_RUNTIME, "input %d is missing", i);
        if (r->in[i].dtype != r->in[0].dtype)
            return ocl_fail(r, TDM_E_RUNTIME, "inputs have different element types, %s and %s",
                        tdm_dtype_name(r->in[0].dtype), tdm_dtype_name(r->in[i].dtype));
        n_in++;
    }
    if (n_in < 1 || (!variadic && n_in != 2))
        return ocl_fail(r, TDM_E_RUNTIME, "takes %s inputs, not %d", variadic ? "1 or more" : "2", n_in);
    int rank = r->in[0].rank;
    int64_t dims[TDM_MAX_RANK];
    memcpy(dims, r->in[0].dims, sizeof dims[0] * (size_t)rank);
    for (int i = 1; i < n_in; i++) {
        int64_t nd[TDM_MAX_RANK];
        int nr;
        if (op_broadcast(rank, dims, r->in[i].rank, r->in[i].dims, &nr, nd))
            return ocl_fail(r, TDM_E_RUNTIME, "input %d does not broadcast with the others", i);
        rank = nr;
        memcpy(dims, nd, sizeof dims[0] * (size_t)nr);
    }
    if (r->def->code == B_PRELU && !shape_equal(rank, dims, r->in[0].rank, r->in[0].dims))
        return ocl_fail(r, TDM_E_RUNTIME, "slope does not broadcast to X");
    tdm_status st = ocl_out_new(r, 0, r->in[0].dtype, rank, dims);
    if (st)
        return st;
    tdm_device_tensor *y = &r->out[0];
    if (n_in == 1)
        return ocl_copy(r->c, r->e, MEM(&r->in[0]), 0, MEM(y), 0, y->bytes);
    if ((st = binary_launch(r, r->def->code, &r->in[0], &r->in[1], MEM(y), rank, dims)))
        return st;
    for (int i = 2; i < n_in; i++)
        if ((st = binary_launch(r, r->def->code, y, &r->in[i], MEM(y), rank, dims)))
            return st;
    if (!strcmp(opn, "Mean") && n_in > 1) {
        size_t n = tcount(y);
        ocl_args a;
        if ((st = ocl_kern(r, r->prog, K_UNARY, &a)))
            return st;
        ocl_arg_mem(&a, MEM(y));
        ocl_arg_mem(&a, MEM(y));
        ocl_arg_int(&a, (int)n);
        ocl_arg_int(&a, U_DIVC);
        ocl_arg_float(&a, (float)n_in);
        ocl_arg_float(&a, 0);
        ocl_arg_float(&a, 0);
        return ocl_launch1(r, &a, "Mean", n);
    }
    return TDM_OK;
}

tdm_reason ocl_check_pow(const onode *o, tdm_verdict *v)
{
    const tdm_node_desc *d = o->d;
    if (d->n_inputs >= 2 && d->inputs[1].dtype != d->inputs[0].dtype && d->inputs[1].dtype != TDM_UNDEFINED)
        return ocl_verdict(v, TDM_REASON_DTYPE_UNSUPPORTED, "opencl Pow takes an exponent of the base's type (%s), not %s",
                       tdm_dtype_name(d->inputs[0].dtype), tdm_dtype_name(d->inputs[1].dtype));
    return TDM_REASON_OK;
}

tdm_reason ocl_check_celu(const onode *o, tdm_verdict *v)
{
    if (gr_attr_float(&o->gn, "alpha", 1.0f) == 0)
        return ocl_verdict(v, TDM_REASON_ATTR_UNSUPPORTED, "opencl Celu needs a non-zero alpha");
    return TDM_REASON_OK;
}

/* BatchNormalization, inference form. */
tdm_reason ocl_check_bn(const onode *o, tdm_verdict *v)
{
    if (o->version >= 14 && gr_attr_int(&o->gn, "training_mode", 0))
        return ocl_verdict(v, TDM_REASON_ATTR_UNSUPPORTED, "opencl BatchNormalization runs inference only, not training_mode=1");
    if (o->version < 9 && gr_attr_int(&o->gn, "spatial", 1) == 0)
        return ocl_verdict(v, TDM_REASON_ATTR_UNSUPPORTED, "opencl BatchNormalization does not take spatial=0");
    for (int i = 1; i < o->d->n_outputs; i++)
        if (ocl_desc_out_present(o->d, i))
            return ocl_verdict(v, TDM_REASON_ATTR_UNSUPPORTED,
                           "opencl BatchNormalization does not produce the running mean and variance outputs");
    for (int i = 1; i < 5 && i < o->d->n_inputs; i++)
        if (o->d->inputs[i].dtype != o->d->inputs[0].dtype)
            return ocl_verdict(v, TDM_REASON_DTYPE_UNSUPPORTED,
                           "opencl BatchNormalization takes parameters of X's type (%s), not %s",
                           tdm_dtype_name(o->d->inputs[0].dtype), tdm_dtype_name(o->d->inputs[i].dtype));
    return TDM_REASON_OK;
}

tdm_status ocl_run_bn(orun *r)
{
    const tdm_device_tensor *x = &r->in[0];
    if (r->n_in < 5)
        return ocl_fail(r, TDM_E_MODEL, "needs 5 inputs");
    for (int i = 1; i < 5; i++)
        if (!in_present(r, i))
            return ocl_fail(r, TDM_E_MODEL, "input %d is missing", i);
    if (x->rank < 2)
        return ocl_fail(r, TDM_E_UNSUPPORTED, "takes X of rank 2 or more, not %d", x->rank);
    int64_t C = x->dims[1];
    size_t inner = 1;
    for (int k = 2; k < x->rank; k++)
        inner *= (size_t)x->dims[k];
    for (int i = 1; i < 5; i++)
        if ((int64_t)tcount(&r->in[i]) != C)
            return ocl_fail(r, TDM_E_RUNTIME, "input %d has %zu values for %lld channels", i, tcount(&r->in[i]),
                        (long long)C);
    tdm_status st = ocl_out_new(r, 0, x->dtype, x->rank, x->dims);
    if (st)
        return st;
    size_t n = tcount(x);
    ocl_args a;
    if ((st = ocl_kern(r, r->prog, K_BATCHNORM, &a)))
        return st;
    ocl_arg_mem(&a, MEM(x));
    for (int i = 1; i < 5; i++)
        ocl_arg_mem(&a, MEM(&r->in[i]));
    ocl_arg_mem(&a, MEM(&r->out[0]));
    ocl_arg_int(&a, (int)n);
    ocl_arg_int(&a, (int)C);
    ocl_arg_int(&a, (int)(inner ? inner : 1));
    ocl_arg_float(&a, gr_attr_float(&r->o->gn, "epsilon", 1e-5f));
    return ocl_launch1(r, &a, "batchnorm", n);
}

#else

typedef int ocl_elementwise_unused;

#endif
