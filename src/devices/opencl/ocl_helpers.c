/* The OpenCL operators' run helpers: output buffers, the values of small
 * inputs (constant or read back), launches, strided copies. */
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
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---------------------------------------------------------- run helpers */

tdm_status ocl_fail(orun *r, tdm_status st, const char *fmt, ...)
{
    char buf[TDM_ERR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return err_set(r->e, st, "%s: %s %s", r->c->name, r->o->d->op_type, buf);
}

/* Output i of the given type and shape, in a new device buffer. */
tdm_status ocl_out_new(orun *r, int i, tdm_dtype dt, int rank, const int64_t *dims)
{
    size_t n, bytes;
    if (i >= r->n_out)
        return ocl_fail(r, TDM_E_INTERNAL, "has no output %d", i);
    if (rank < 0 || rank > 16)
        return ocl_fail(r, TDM_E_UNSUPPORTED, "output %d would have rank %d", i, rank);
    if (shape_count(rank, dims, &n) || mem_mul(n, tdm_dtype_size(dt), &bytes))
        return ocl_fail(r, TDM_E_NOMEM, "output %d is too large", i);
    if (n > (size_t)INT_MAX)
        return ocl_fail(r, TDM_E_UNSUPPORTED, "output %d has %zu elements; opencl kernels index at most %d", i, n,
                    INT_MAX);
    cl_mem m;
    tdm_status st = ocl_buf_new(r->c, r->e, bytes, &m);
    if (st)
        return st;
    tdm_device_tensor *t = &r->out[i];
    t->dtype = dt;
    t->rank = rank;
    for (int k = 0; k < rank; k++)
        t->dims[k] = dims[k];
    t->buf = m;
    t->bytes = bytes;
    return TDM_OK;
}

/* The bytes of small input i (cnt values of es bytes): its constant value
 * from the description, or a read of the device buffer. *raw is allocated
 * (mem_free) with 8 spare bytes. */
static tdm_status in_raw(orun *r, int i, size_t cnt, size_t es, void **raw)
{
    *raw = NULL;
    if (cnt > (1u << 20))
        return ocl_fail(r, TDM_E_UNSUPPORTED, "input %d has %zu values; at most 1048576 are read back", i, cnt);
    void *buf = mem_alloc(cnt * es + 8);
    if (!buf)
        return ocl_fail(r, TDM_E_NOMEM, "out of memory");
    const tdm_tensor_desc *td = &r->o->d->inputs[i];
    tdm_status st = TDM_OK;
    if (td->data)
        memcpy(buf, td->data, cnt * es);
    else
        st = ocl_read(r->c, r->e, MEM(&r->in[i]), 0, buf, cnt * es);
    if (st) {
        mem_free(buf);
        return st;
    }
    *raw = buf;
    return TDM_OK;
}

/* Integer values of a small input (shape, axes, starts …). *v is
 * allocated (mem_free); *n = -1 when the input is omitted. */
tdm_status ocl_in_ints(orun *r, int i, int64_t **v, int64_t *n)
{
    *v = NULL;
    *n = -1;
    if (!in_present(r, i))
        return TDM_OK;
    const tdm_device_tensor *t = &r->in[i];
    size_t cnt = tcount(t);
    if (t->dtype != TDM_INT64 && t->dtype != TDM_INT32)
        return ocl_fail(r, TDM_E_RUNTIME, "input %d must be int64 or int32, not %s", i, tdm_dtype_name(t->dtype));
    void *raw;
    tdm_status st = in_raw(r, i, cnt, tdm_dtype_size(t->dtype), &raw);
    if (st)
        return st;
    int64_t *out = mem_calloc(cnt + 1, sizeof *out);
    if (!out) {
        mem_free(raw);
        return ocl_fail(r, TDM_E_NOMEM, "out of memory");
    }
    for (size_t k = 0; k < cnt; k++)
        out[k] = t->dtype == TDM_INT64 ? ((const int64_t *)raw)[k] : ((const int32_t *)raw)[k];
    mem_free(raw);
    *v = out;
    *n = (int64_t)cnt;
    return TDM_OK;
}

/* Float values of a small input (Clip bounds, Resize scales), as doubles. */
tdm_status ocl_in_floats(orun *r, int i, double **v, int64_t *n)
{
    *v = NULL;
    *n = -1;
    if (!in_present(r, i))
        return TDM_OK;
    const tdm_device_tensor *t = &r->in[i];
    size_t cnt = tcount(t);
    if (t->dtype != TDM_FLOAT && t->dtype != TDM_FLOAT16 && t->dtype != TDM_DOUBLE)
        return ocl_fail(r, TDM_E_RUNTIME, "input %d must be a float tensor, not %s", i, tdm_dtype_name(t->dtype));
    void *raw;
    tdm_status st = in_raw(r, i, cnt, tdm_dtype_size(t->dtype), &raw);
    if (st)
        return st;
    double *out = mem_calloc(cnt + 1, sizeof *out);
    if (!out) {
        mem_free(raw);
        return ocl_fail(r, TDM_E_NOMEM, "out of memory");
    }
    for (size_t k = 0; k < cnt; k++)
        out[k] = t->dtype == TDM_FLOAT    ? ((const float *)raw)[k]
                 : t->dtype == TDM_DOUBLE ? ((const double *)raw)[k]
                                          : fp16_to_f32(((const uint16_t *)raw)[k]);
    mem_free(raw);
    *v = out;
    *n = (int64_t)cnt;
    return TDM_OK;
}

tdm_status ocl_kern(orun *r, int prog, ocl_kid k, ocl_args *a)
{
    memset(a, 0, sizeof *a);
    return ocl_kernel(r->c, r->e, prog, k, &a->k);
}

tdm_status ocl_launch1(orun *r, ocl_args *a, const char *what, size_t n)
{
    size_t g[1] = {n};
    return ocl_launch(r->c, r->e, a, what, 1, g, NULL);
}

/* Merges adjacent dims whose every stride array continues (and drops dims
 * of size 1); returns the new rank (at least 1). st holds ns arrays. */
int ocl_coalesce(int rank, int64_t *d, int ns, int64_t st[][TDM_MAX_RANK])
{
    int n = 0;
    for (int k = 0; k < rank; k++) {
        if (d[k] == 1)
            continue;
        int merge = n > 0;
        for (int s = 0; s < ns && merge; s++)
            merge = st[s][n - 1] == st[s][k] * d[k];
        if (merge) {
            d[n - 1] *= d[k];
            for (int s = 0; s < ns; s++)
                st[s][n - 1] = st[s][k];
        } else {
            d[n] = d[k];
            for (int s = 0; s < ns; s++)
                st[s][n] = st[s][k];
            n++;
        }
    }
    if (n == 0) {
        d[0] = 1;
        for (int s = 0; s < ns; s++)
            st[s][0] = 0;
        n = 1;
    }
    return n;
}

/* y[i] = x[base + sum c_k is_k] over the output dims od (rank <= 16 before
 * coalescing). */
tdm_status ocl_copy_strided(orun *r, cl_mem x, cl_mem y, size_t es, int rank, const int64_t *od,
                            const int64_t *is, int64_t base)
{
    int64_t d[TDM_MAX_RANK], st[1][TDM_MAX_RANK];
    size_t n = 1;
    for (int k = 0; k < rank; k++) {
        d[k] = od[k];
        st[0][k] = is[k];
        n *= (size_t)od[k];
    }
    if (n == 0)
        return TDM_OK;
    int nr = ocl_coalesce(rank, d, 1, st);
    if (nr > OCL_MAX_RANK)
        return ocl_fail(r, TDM_E_UNSUPPORTED, "needs %d dimensions after merging; opencl kernels take %d", nr,
                    OCL_MAX_RANK);
    int di[8], si[8];
    to_int8(d, nr, di);
    for (int i = 0; i < 8; i++)
        si[i] = i < nr ? (int)st[0][i] : 0;
    ocl_args a;
    tdm_status s = ocl_kern(r, OCL_P32, by_size(K_COPY_STRIDED_1, es), &a);
    if (s)
        return s;
    ocl_arg_mem(&a, x);
    ocl_arg_mem(&a, y);
    ocl_arg_int(&a, (int)n);
    ocl_arg_int(&a, nr);
    ocl_arg_int8(&a, di);
    ocl_arg_int8(&a, si);
    ocl_arg_int(&a, (int)base);
    return ocl_launch1(r, &a, "copy_strided", n);
}

#else

typedef int ocl_helpers_unused;

#endif
