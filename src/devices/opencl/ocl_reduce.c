/* The OpenCL reductions: ReduceMean/Sum/Max/Min, the global pools,
 * Softmax, LogSoftmax, LayerNormalization. Kernels: the "reductions"
 * section of kernels.cl. */
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

/* ------------------------------------------------------------- reductions */

/* Reduces x over the marked axes (red[k]) into out 0 with the given
 * output shape: op 0 sum (× 1/count when mean), 1 max, 2 min (a NaN
 * propagates), 3 max keeping a NaN only as the first element. */
static tdm_status reduce_launch(orun *r, const tdm_device_tensor *x, const unsigned char *red, int op, int mean)
{
    int64_t strides[TDM_MAX_RANK], kd[TDM_MAX_RANK], ks[1][TDM_MAX_RANK], rd[TDM_MAX_RANK], rs[1][TDM_MAX_RANK];
    int nk = 0, nr = 0;
    size_t rcount = 1, nout = 1;
    shape_strides(x->rank, x->dims, strides);
    for (int k = 0; k < x->rank; k++) {
        if (red[k]) {
            rd[nr] = x->dims[k];
            rs[0][nr++] = strides[k];
            rcount *= (size_t)x->dims[k];
        } else {
            kd[nk] = x->dims[k];
            ks[0][nk++] = strides[k];
            nout *= (size_t)x->dims[k];
        }
    }
    if (nout == 0)
        return TDM_OK;
    if (rcount == 0)
        return ocl_fail(r, TDM_E_UNSUPPORTED, "over an empty axis is not supported on opencl");
    nk = ocl_coalesce(nk, kd, 1, ks);
    nr = ocl_coalesce(nr, rd, 1, rs);
    if (nk > OCL_MAX_RANK || nr > OCL_MAX_RANK)
        return ocl_fail(r, TDM_E_UNSUPPORTED, "needs more than %d dimensions after merging", OCL_MAX_RANK);
    int kdi[8], ksi[8], rdi[8], rsi[8];
    to_int8(kd, nk, kdi);
    to_int8(rd, nr, rdi);
    for (int i = 0; i < 8; i++) {
        ksi[i] = i < nk ? (int)ks[0][i] : 0;
        rsi[i] = i < nr ? (int)rs[0][i] : 0;
    }
    ocl_args a;
    tdm_status st = ocl_kern(r, r->prog, K_REDUCE_GEN, &a);
    if (st)
        return st;
    ocl_arg_mem(&a, MEM(x));
    ocl_arg_mem(&a, MEM(&r->out[0]));
    ocl_arg_int(&a, (int)nout);
    ocl_arg_int(&a, op);
    ocl_arg_float(&a, mean ? (float)(1.0 / (double)rcount) : 1.0f);
    ocl_arg_int(&a, nk);
    ocl_arg_int8(&a, kdi);
    ocl_arg_int8(&a, ksi);
    ocl_arg_int(&a, nr);
    ocl_arg_int8(&a, rdi);
    ocl_arg_int8(&a, rsi);
    ocl_arg_int(&a, (int)rcount);
    return ocl_launch1(r, &a, r->o->d->op_type, nout);
}

tdm_status ocl_run_global_pool(orun *r)
{
    const tdm_device_tensor *x = &r->in[0];
    if (x->rank < 2)
        return ocl_fail(r, TDM_E_RUNTIME, "takes X of rank 2 or more, not %d", x->rank);
    int64_t od[TDM_MAX_RANK];
    unsigned char red[TDM_MAX_RANK];
    for (int k = 0; k < x->rank; k++) {
        od[k] = k < 2 ? x->dims[k] : 1;
        red[k] = k >= 2;
    }
    tdm_status st = ocl_out_new(r, 0, x->dtype, x->rank, od);
    if (st)
        return st;
    if (x->rank == 2)
        return ocl_copy(r->c, r->e, MEM(x), 0, MEM(&r->out[0]), 0, r->out[0].bytes);
    int is_max = !strcmp(r->o->d->op_type, "GlobalMaxPool");
    return reduce_launch(r, x, red, is_max ? 3 : 0, !is_max);
}

static int reduce_axes_from_input(const onode *o)
{
    return !strcmp(o->d->op_type, "ReduceSum") && o->version >= 13;
}

tdm_status ocl_run_reduce(orun *r)
{
    const tdm_device_tensor *x = &r->in[0];
    const gr_node *n = &r->o->gn;
    const char *opn = r->o->d->op_type;
    int op = !strcmp(opn, "ReduceMax") ? 1 : !strcmp(opn, "ReduceMin") ? 2 : 0;
    int mean = !strcmp(opn, "ReduceMean");
    int64_t *axes = NULL, na = -1;
    const int64_t *aa = NULL;
    tdm_status st;
    if (reduce_axes_from_input(r->o)) {
        if ((st = ocl_in_ints(r, 1, &axes, &na)))
            return st;
        aa = axes;
    } else {
        na = gr_attr_ints(n, "axes", &aa);
    }
    unsigned char red[TDM_MAX_RANK];
    int noop = 0;
    memset(red, 0, sizeof red);
    if (na <= 0) {
        if (gr_attr_int(n, "noop_with_empty_axes", 0))
            noop = 1;
        else
            memset(red, 1, sizeof red);
    } else {
        for (int64_t k = 0; k < na; k++) {
            int64_t ax = aa[k] < 0 ? aa[k] + x->rank : aa[k];
            if (ax < 0 || ax >= x->rank) {
                mem_free(axes);
                return ocl_fail(r, TDM_E_RUNTIME, "axis %lld is out of range for rank %d", (long long)aa[k], x->rank);
            }
            red[ax] = 1;
        }
    }
    mem_free(axes);
    if (noop) {
        if ((st = ocl_out_new(r, 0, x->dtype, x->rank, x->dims)))
            return st;
        return ocl_copy(r->c, r->e, MEM(x), 0, MEM(&r->out[0]), 0, r->out[0].bytes);
    }
    int keep = gr_attr_int(n, "keepdims", 1) != 0;
    int64_t od[TDM_MAX_RANK];
    int orank = 0;
    for (int k = 0; k < x->rank; k++) {
        if (!red[k])
            od[orank++] = x->dims[k];
        else if (keep)
            od[orank++] = 1;
    }
    if ((st = ocl_out_new(r, 0, x->dtype, orank, od)))
        return st;
    return reduce_launch(r, x, red, op, mean);
}

tdm_status ocl_run_softmax(orun *r)
{
    const tdm_device_tensor *x = &r->in[0];
    int v13 = r->o->version >= 13;
    int64_t axis = gr_attr_int(&r->o->gn, "axis", v13 ? -1 : 1);
    tdm_status st = ocl_out_new(r, 0, x->dtype, x->rank, x->dims);
    if (st)
        return st;
    size_t outer = 1, n = 1, inner = 1;
    if (x->rank > 0) {
        if (axis < 0)
            axis += x->rank;
        if (axis < 0 || axis >= x->rank)
            return ocl_fail(r, TDM_E_RUNTIME, "attribute 'axis' is out of range for rank %d", x->rank);
        for (int k = 0; k < axis; k++)
            outer *= (size_t)x->dims[k];
        if (v13) {
            n = (size_t)x->dims[axis];
            for (int k = (int)axis + 1; k < x->rank; k++)
                inner *= (size_t)x->dims[k];
        } else {
            for (int k = (int)axis; k < x->rank; k++)
                n *= (size_t)x->dims[k];
        }
    }
    size_t rows = outer * inner;
    if (rows == 0 || n == 0)
        return TDM_OK;
    ocl_args a;
    if ((st = ocl_kern(r, r->prog, K_SOFTMAX, &a)))
        return st;
    ocl_arg_mem(&a, MEM(x));
    ocl_arg_mem(&a, MEM(&r->out[0]));
    ocl_arg_int(&a, (int)rows);
    ocl_arg_int(&a, (int)n);
    ocl_arg_int(&a, (int)inner);
    ocl_arg_int(&a, !strcmp(r->o->d->op_type, "LogSoftmax"));
    return ocl_launch1(r, &a, r->o->d->op_type, rows);
}

tdm_reason ocl_check_layernorm(const onode *o, tdm_verdict *v)
{
    for (int i = 1; i < 3; i++)
        if (ocl_desc_out_present(o->d, i))
            return ocl_verdict(v, TDM_REASON_ATTR_UNSUPPORTED,
                           "opencl LayerNormalization does not produce the Mean and InvStdDev outputs");
    for (int i = 1; i < 3 && i < o->d->n_inputs; i++)
        if (ocl_desc_present(o->d, i) && o->d->inputs[i].dtype != o->d->inputs[0].dtype)
            return ocl_verdict(v, TDM_REASON_DTYPE_UNSUPPORTED,
                           "opencl LayerNormalization takes Scale and B of X's type (%s), not %s",
                           tdm_dtype_name(o->d->inputs[0].dtype), tdm_dtype_name(o->d->inputs[i].dtype));
    /* Scale and B must hold one value per normalised element, or one */
    const tdm_tensor_desc *x = &o->d->inputs[0];
    if (x->rank > 0) {
        int64_t axis = gr_attr_int(&o->gn, "axis", -1);
        if (axis < 0)
            axis += x->rank;
        int64_t cols = 1;
        for (int k = (int)axis; k >= 0 && k < x->rank; k++)
            cols = x->dims[k] < 0 || cols < 0 ? -1 : cols * x->dims[k];
        for (int i = 1; i < 3 && i < o->d->n_inputs && cols >= 0; i++) {
            const tdm_tensor_desc *p = &o->d->inputs[i];
            if (!ocl_desc_present(o->d, i) || p->rank < 0)
                continue;
            int64_t pc = 1;
            for (int k = 0; k < p->rank; k++)
                pc = p->dims[k] < 0 || pc < 0 ? -1 : pc * p->dims[k];
            if (pc >= 0 && pc != cols && pc != 1)
                return ocl_verdict(v, TDM_REASON_SHAPE_UNSUPPORTED,
                               "opencl LayerNormalization takes %s with one value per normalised element (%lld) or "
                               "one, not %lld",
                               i == 1 ? "Scale" : "B", (long long)cols, (long long)pc);
        }
    }
    return TDM_REASON_OK;
}

tdm_status ocl_run_layernorm(orun *r)
{
    const tdm_device_tensor *x = &r->in[0];
    if (!in_present(r, 1))
        return ocl_fail(r, TDM_E_MODEL, "input 1 ('Scale') is missing");
    if (x->rank < 1)
        return ocl_fail(r, TDM_E_RUNTIME, "takes X of rank 1 or more");
    int64_t axis = gr_attr_int(&r->o->gn, "axis", -1);
    if (axis < 0)
        axis += x->rank;
    if (axis < 0 || axis >= x->rank)
        return ocl_fail(r, TDM_E_RUNTIME, "attribute 'axis' is out of range for rank %d", x->rank);
    size_t rows = 1, cols = 1;
    for (int k = 0; k < x->rank; k++) {
        if (k < axis)
            rows *= (size_t)x->dims[k];
        else
            cols *= (size_t)x->dims[k];
    }
    size_t nsc = tcount(&r->in[1]);
    int has_b = in_present(r, 2);
    if ((nsc != cols && nsc != 1) || (has_b && tcount(&r->in[2]) != nsc))
        return ocl_fail(r, TDM_E_UNSUPPORTED, "takes Scale and B of %zu values (or one), not %zu", cols, nsc);
    tdm_status st = ocl_out_new(r, 0, x->dtype, x->rank, x->dims);
    if (st)
        return st;
    if (rows == 0 || cols == 0)
        return TDM_OK;
    ocl_args a;
    if ((st = ocl_kern(r, r->prog, K_LAYERNORM, &a)))
        return st;
    ocl_arg_mem(&a, MEM(x));
    ocl_arg_mem(&a, MEM(&r->in[1]));
    ocl_arg_mem(&a, has_b ? MEM(&r->in[2]) : MEM(&r->in[1]));
    ocl_arg_mem(&a, MEM(&r->out[0]));
    ocl_arg_int(&a, (int)cols);
    ocl_arg_float(&a, gr_attr_float(&r->o->gn, "epsilon", 1e-5f));
    ocl_arg_int(&a, has_b);
    ocl_arg_int(&a, (int)nsc);
    size_t g[1] = {rows * OCL_LN_WG}, l[1] = {OCL_LN_WG};
    return ocl_launch(r->c, r->e, &a, "layernorm", 1, g, l);
}

#else

typedef int ocl_reduce_unused;

#endif
