/* The OpenCL data movement: Identity, Reshape, Flatten, Squeeze,
 * Unsqueeze, Transpose, Expand, Slice, Concat, Split, Gather, Shape.
 * Kernels: the "data movement" section of kernels.cl. */
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

/* ---------------------------------------------------------- data movement */

static tdm_status copy_out(orun *r, int rank, const int64_t *dims)
{
    const tdm_device_tensor *x = &r->in[0];
    size_t n;
    if (shape_count(rank, dims, &n) || n != tcount(x))
        return ocl_fail(r, TDM_E_RUNTIME, "cannot give %zu elements the requested shape", tcount(x));
    tdm_status st = ocl_out_new(r, 0, x->dtype, rank, dims);
    if (st)
        return st;
    return ocl_copy(r->c, r->e, MEM(x), 0, MEM(&r->out[0]), 0, r->out[0].bytes);
}

tdm_status ocl_run_identity(orun *r) { return copy_out(r, r->in[0].rank, r->in[0].dims); }

tdm_status ocl_run_reshape(orun *r)
{
    const tdm_device_tensor *x = &r->in[0];
    int64_t *shape, ns;
    tdm_status st = ocl_in_ints(r, 1, &shape, &ns);
    if (st)
        return st;
    if (ns < 0 || ns > TDM_MAX_RANK) {
        mem_free(shape);
        return ocl_fail(r, TDM_E_RUNTIME, "needs a shape of at most %d values", TDM_MAX_RANK);
    }
    int allowzero = r->o->version >= 14 && gr_attr_int(&r->o->gn, "allowzero", 0) != 0;
    int64_t od[TDM_MAX_RANK];
    int infer = -1;
    size_t known = 1;
    for (int k = 0; k < ns; k++) {
        od[k] = shape[k];
        if (shape[k] == 0 && !allowzero) {
            if (k >= x->rank) {
                mem_free(shape);
                return ocl_fail(r, TDM_E_RUNTIME, "shape copies dimension %d of an input of rank %d", k, x->rank);
            }
            od[k] = x->dims[k];
        }
        if (od[k] == -1) {
            if (infer >= 0) {
                mem_free(shape);
                return ocl_fail(r, TDM_E_RUNTIME, "shape has more than one -1");
            }
            infer = k;
        } else if (od[k] < 0) {
            mem_free(shape);
            return ocl_fail(r, TDM_E_RUNTIME, "shape has the invalid value %lld", (long long)od[k]);
        } else {
            known *= (size_t)od[k];
        }
    }
    mem_free(shape);
    if (infer >= 0) {
        if (known == 0 || tcount(x) % known)
            return ocl_fail(r, TDM_E_RUNTIME, "cannot infer the -1 of shape from %zu elements", tcount(x));
        od[infer] = (int64_t)(tcount(x) / known);
    }
    return copy_out(r, (int)ns, od);
}

tdm_status ocl_run_flatten(orun *r)
{
    const tdm_device_tensor *x = &r->in[0];
    int64_t axis = gr_attr_int(&r->o->gn, "axis", 1);
    if (axis < 0)
        axis += x->rank;
    if (axis < 0 || axis > x->rank)
        return ocl_fail(r, TDM_E_RUNTIME, "attribute 'axis' is out of range for rank %d", x->rank);
    int64_t od[2] = {1, 1};
    for (int k = 0; k < x->rank; k++)
        od[k < axis ? 0 : 1] *= x->dims[k];
    return copy_out(r, 2, od);
}

/* Axes of Squeeze/Unsqueeze: attribute before opset 13, input 1 after. */
static tdm_status squeeze_axes(orun *r, int64_t **axes, int64_t *na)
{
    if (r->o->version >= 13)
        return ocl_in_ints(r, 1, axes, na);
    const int64_t *a;
    int n = gr_attr_ints(&r->o->gn, "axes", &a);
    *axes = NULL;
    *na = n;
    if (n <= 0)
        return TDM_OK;
    if (!(*axes = mem_calloc((size_t)n, sizeof **axes)))
        return ocl_fail(r, TDM_E_NOMEM, "out of memory");
    memcpy(*axes, a, sizeof **axes * (size_t)n);
    return TDM_OK;
}

tdm_status ocl_run_squeeze(orun *r)
{
    const tdm_device_tensor *x = &r->in[0];
    int64_t *axes, na;
    tdm_status st = squeeze_axes(r, &axes, &na);
    if (st)
        return st;
    unsigned char drop[TDM_MAX_RANK];
    memset(drop, 0, sizeof drop);
    if (na <= 0) {
        for (int k = 0; k < x->rank; k++)
            drop[k] = x->dims[k] == 1;
    } else {
        for (int64_t i = 0; i < na; i++) {
            int64_t a = axes[i] < 0 ? axes[i] + x->rank : axes[i];
            if (a < 0 || a >= x->rank || x->dims[a] != 1) {
                mem_free(axes);
                return ocl_fail(r, TDM_E_RUNTIME, "axis %lld is out of range or not of size 1", (long long)axes[i]);
            }
            drop[a] = 1;
        }
    }
    mem_free(axes);
    int64_t od[TDM_MAX_RANK];
    int orank = 0;
    for (int k = 0; k < x->rank; k++)
        if (!drop[k])
            od[orank++] = x->dims[k];
    return copy_out(r, orank, od);
}

tdm_status ocl_run_unsqueeze(orun *r)
{
    const tdm_device_tensor *x = &r->in[0];
    int64_t *axes, na;
    tdm_status st = squeeze_axes(r, &axes, &na);
    if (st)
        return st;
    if (na <= 0 || x->rank + na > TDM_MAX_RANK) {
        mem_free(axes);
        return ocl_fail(r, TDM_E_RUNTIME, "needs 1 to %d axes", TDM_MAX_RANK - x->rank);
    }
    int orank = x->rank + (int)na;
    unsigned char ins[TDM_MAX_RANK];
    memset(ins, 0, sizeof ins);
    for (int64_t i = 0; i < na; i++) {
        int64_t a = axes[i] < 0 ? axes[i] + orank : axes[i];
        if (a < 0 || a >= orank || ins[a]) {
            mem_free(axes);
            return ocl_fail(r, TDM_E_RUNTIME, "axis %lld is out of range or repeated", (long long)axes[i]);
        }
        ins[a] = 1;
    }
    mem_free(axes);
    int64_t od[TDM_MAX_RANK];
    for (int k = 0, j = 0; k < orank; k++)
        od[k] = ins[k] ? 1 : x->dims[j++];
    return copy_out(r, orank, od);
}

tdm_status ocl_run_transpose(orun *r)
{
    const tdm_device_tensor *x = &r->in[0];
    const int64_t *perm = NULL;
    int np = gr_attr_ints(&r->o->gn, "perm", &perm);
    int64_t p[TDM_MAX_RANK], od[TDM_MAX_RANK], is[TDM_MAX_RANK], st_[TDM_MAX_RANK];
    unsigned char seen[TDM_MAX_RANK];
    memset(seen, 0, sizeof seen);
    if (np >= 0 && np != x->rank)
        return ocl_fail(r, TDM_E_RUNTIME, "attribute 'perm' has %d values for rank %d", np, x->rank);
    for (int k = 0; k < x->rank; k++) {
        p[k] = np >= 0 ? perm[k] : x->rank - 1 - k;
        if (p[k] < 0)
            p[k] += x->rank;
        if (p[k] < 0 || p[k] >= x->rank || seen[p[k]])
            return ocl_fail(r, TDM_E_RUNTIME, "attribute 'perm' is not a permutation");
        seen[p[k]] = 1;
    }
    shape_strides(x->rank, x->dims, st_);
    for (int k = 0; k < x->rank; k++) {
        od[k] = x->dims[p[k]];
        is[k] = st_[p[k]];
    }
    tdm_status st = ocl_out_new(r, 0, x->dtype, x->rank, od);
    if (st)
        return st;
    return ocl_copy_strided(r, MEM(x), MEM(&r->out[0]), tdm_dtype_size(x->dtype), x->rank, od, is, 0);
}

tdm_status ocl_run_expand(orun *r)
{
    const tdm_device_tensor *x = &r->in[0];
    int64_t *shape, ns;
    tdm_status st = ocl_in_ints(r, 1, &shape, &ns);
    if (st)
        return st;
    int64_t od[TDM_MAX_RANK], is[TDM_MAX_RANK];
    int orank;
    if (ns < 0 || ns > TDM_MAX_RANK || op_broadcast(x->rank, x->dims, (int)ns, shape, &orank, od)) {
        mem_free(shape);
        return ocl_fail(r, TDM_E_RUNTIME, "shape does not broadcast with the input");
    }
    mem_free(shape);
    op_bcast_strides(orank, od, x->rank, x->dims, is);
    if ((st = ocl_out_new(r, 0, x->dtype, orank, od)))
        return st;
    return ocl_copy_strided(r, MEM(x), MEM(&r->out[0]), tdm_dtype_size(x->dtype), orank, od, is, 0);
}

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

tdm_status ocl_run_slice(orun *r)
{
    const tdm_device_tensor *x = &r->in[0];
    int64_t *starts = NULL, *ends = NULL, *axes = NULL, *steps = NULL, ns = -1, ne = -1, na = -1, nst = -1;
    tdm_status st = TDM_OK;
    if (r->o->version >= 10) {
        if ((st = ocl_in_ints(r, 1, &starts, &ns)) || (st = ocl_in_ints(r, 2, &ends, &ne)) ||
            (st = ocl_in_ints(r, 3, &axes, &na)) || (st = ocl_in_ints(r, 4, &steps, &nst)))
            goto done;
    } else {
        const int64_t *a;
        const char *names[3] = {"starts", "ends", "axes"};
        int64_t **dst[3] = {&starts, &ends, &axes}, *cnt[3] = {&ns, &ne, &na};
        for (int i = 0; i < 3; i++) {
            int n = gr_attr_ints(&r->o->gn, names[i], &a);
            *cnt[i] = n;
            if (n > 0) {
                if (!(*dst[i] = mem_calloc((size_t)n, sizeof(int64_t)))) {
                    st = ocl_fail(r, TDM_E_NOMEM, "out of memory");
                    goto done;
                }
                memcpy(*dst[i], a, sizeof(int64_t) * (size_t)n);
            }
        }
    }
    if (ns < 0 || ne != ns || (na >= 0 && na != ns) || (nst >= 0 && nst != ns)) {
        st = ocl_fail(r, TDM_E_RUNTIME, "needs starts, ends (and axes, steps) of the same length");
        goto done;
    }
    int64_t start[TDM_MAX_RANK], step[TDM_MAX_RANK], od[TDM_MAX_RANK], strides[TDM_MAX_RANK], is[TDM_MAX_RANK];
    unsigned char seen[TDM_MAX_RANK];
    memset(seen, 0, sizeof seen);
    for (int k = 0; k < x->rank; k++) {
        start[k] = 0;
        step[k] = 1;
        od[k] = x->dims[k];
    }
    for (int64_t i = 0; i < ns; i++) {
        int64_t a = na >= 0 ? axes[i] : i;
        if (a < 0)
            a += x->rank;
        if (a < 0 || a >= x->rank || seen[a]) {
            st = ocl_fail(r, TDM_E_RUNTIME, "axis %lld is out of range or repeated", (long long)(na >= 0 ? axes[i] : i));
            goto done;
        }
        seen[a] = 1;
        int64_t dim = x->dims[a], s = starts[i], e = ends[i], p = nst >= 0 ? steps[i] : 1;
        if (p == 0) {
            st = ocl_fail(r, TDM_E_RUNTIME, "step must not be 0");
            goto done;
        }
        if (s < 0)
            s += dim;
        if (e < 0)
            e += dim;
        if (p > 0) {
            s = clamp64(s, 0, dim);
            e = clamp64(e, 0, dim);
            od[a] = e > s ? (e - s + p - 1) / p : 0;
        } else {
            s = clamp64(s, 0, dim - 1);
            e = clamp64(e, -1, dim - 1);
            od[a] = s > e ? (s - e + (-p) - 1) / (-p) : 0;
        }
        start[a] = s;
        step[a] = p;
    }
    if ((st = ocl_out_new(r, 0, x->dtype, x->rank, od)))
        goto done;
    shape_strides(x->rank, x->dims, strides);
    int64_t base = 0;
    for (int k = 0; k < x->rank; k++) {
        if (od[k] > 0)
            base += start[k] * strides[k];
        is[k] = step[k] * strides[k];
    }
    st = ocl_copy_strided(r, MEM(x), MEM(&r->out[0]), tdm_dtype_size(x->dtype), x->rank, od, is, base);
done:
    mem_free(starts);
    mem_free(ends);
    mem_free(axes);
    mem_free(steps);
    return st;
}

tdm_status ocl_run_concat(orun *r)
{
    const tdm_device_tensor *x0 = &r->in[0];
    int64_t axis = gr_attr_int(&r->o->gn, "axis", 0);
    if (axis < 0)
        axis += x0->rank;
    if (axis < 0 || axis >= x0->rank)
        return ocl_fail(r, TDM_E_RUNTIME, "attribute 'axis' is out of range for rank %d", x0->rank);
    int64_t od[TDM_MAX_RANK];
    memcpy(od, x0->dims, sizeof od[0] * (size_t)x0->rank);
    od[axis] = 0;
    for (int i = 0; i < r->n_in; i++) {
        const tdm_device_tensor *t = &r->in[i];
        if (!in_present(r, i) || t->rank != x0->rank || t->dtype != x0->dtype)
            return ocl_fail(r, TDM_E_RUNTIME, "input %d is missing or differs in rank or element type", i);
        for (int k = 0; k < t->rank; k++)
            if (k != axis && t->dims[k] != x0->dims[k])
                return ocl_fail(r, TDM_E_RUNTIME, "input %d differs in dimension %d", i, k);
        od[axis] += t->dims[axis];
    }
    tdm_status st = ocl_out_new(r, 0, x0->dtype, x0->rank, od);
    if (st)
        return st;
    size_t es = tdm_dtype_size(x0->dtype), outer = 1, inner = es;
    for (int k = 0; k < axis; k++)
        outer *= (size_t)od[k];
    for (int k = (int)axis + 1; k < x0->rank; k++)
        inner *= (size_t)od[k];
    size_t off = 0, pitch = (size_t)od[axis] * inner;
    for (int i = 0; i < r->n_in; i++) {
        size_t row = (size_t)r->in[i].dims[axis] * inner;
        if ((st = ocl_copy_rows(r->c, r->e, MEM(&r->in[i]), 0, row, MEM(&r->out[0]), off, pitch, row, outer)))
            return st;
        off += row;
    }
    return TDM_OK;
}

tdm_status ocl_run_split(orun *r)
{
    const tdm_device_tensor *x = &r->in[0];
    int64_t axis = gr_attr_int(&r->o->gn, "axis", 0);
    if (axis < 0)
        axis += x->rank;
    if (axis < 0 || axis >= x->rank)
        return ocl_fail(r, TDM_E_RUNTIME, "attribute 'axis' is out of range for rank %d", x->rank);
    int64_t *split = NULL, ns = -1;
    tdm_status st;
    if (r->o->version >= 13) {
        if ((st = ocl_in_ints(r, 1, &split, &ns)))
            return st;
    } else {
        const int64_t *a;
        int n = gr_attr_ints(&r->o->gn, "split", &a);
        if (n > 0) {
            if (!(split = mem_calloc((size_t)n, sizeof *split)))
                return ocl_fail(r, TDM_E_NOMEM, "out of memory");
            memcpy(split, a, sizeof *split * (size_t)n);
            ns = n;
        }
    }
    int nout = r->n_out;
    int64_t dim = x->dims[axis];
    if (ns >= 0 && ns != nout) {
        mem_free(split);
        return ocl_fail(r, TDM_E_RUNTIME, "'split' has %lld values for %d outputs", (long long)ns, nout);
    }
    if (ns < 0 && (nout < 1 || dim % nout)) {
        mem_free(split);
        return ocl_fail(r, TDM_E_RUNTIME, "cannot split %lld evenly into %d outputs", (long long)dim, nout);
    }
    int64_t sum = 0;
    for (int i = 0; i < nout; i++) {
        int64_t s = ns >= 0 ? split[i] : dim / nout;
        if (s < 0)
            sum = -1 - dim;
        sum += s;
    }
    if (sum != dim) {
        mem_free(split);
        return ocl_fail(r, TDM_E_RUNTIME, "'split' does not add up to dimension %lld (%lld)", (long long)axis,
                    (long long)dim);
    }
    size_t es = tdm_dtype_size(x->dtype), outer = 1, inner = es;
    for (int k = 0; k < axis; k++)
        outer *= (size_t)x->dims[k];
    for (int k = (int)axis + 1; k < x->rank; k++)
        inner *= (size_t)x->dims[k];
    size_t off = 0, pitch = (size_t)dim * inner;
    st = TDM_OK;
    for (int i = 0; i < nout && !st; i++) {
        int64_t s = ns >= 0 ? split[i] : dim / nout;
        size_t row = (size_t)s * inner;
        if (out_wanted(r, i)) {
            int64_t od[TDM_MAX_RANK];
            memcpy(od, x->dims, sizeof od[0] * (size_t)x->rank);
            od[axis] = s;
            if (!(st = ocl_out_new(r, i, x->dtype, x->rank, od)))
                st = ocl_copy_rows(r->c, r->e, MEM(x), off, pitch, MEM(&r->out[i]), 0, row, row, outer);
        }
        off += row;
    }
    mem_free(split);
    return st;
}

tdm_status ocl_run_gather(orun *r)
{
    const tdm_device_tensor *x = &r->in[0], *ix = &r->in[1];
    if (!in_present(r, 1))
        return ocl_fail(r, TDM_E_MODEL, "input 'indices' is missing");
    int64_t axis = gr_attr_int(&r->o->gn, "axis", 0);
    if (x->rank < 1)
        return ocl_fail(r, TDM_E_RUNTIME, "takes data of rank 1 or more");
    if (axis < 0)
        axis += x->rank;
    if (axis < 0 || axis >= x->rank || x->rank + ix->rank - 1 > TDM_MAX_RANK)
        return ocl_fail(r, TDM_E_RUNTIME, "attribute 'axis' is out of range for rank %d", x->rank);
    int64_t *idx, ni;
    tdm_status st = ocl_in_ints(r, 1, &idx, &ni);
    if (st)
        return st;
    int64_t n_ax = x->dims[axis];
    int *tab = mem_calloc((size_t)ni + 1, sizeof *tab);
    if (!tab) {
        mem_free(idx);
        return ocl_fail(r, TDM_E_NOMEM, "out of memory");
    }
    for (int64_t i = 0; i < ni; i++) {
        int64_t v = idx[i] < 0 ? idx[i] + n_ax : idx[i];
        if (v < 0 || v >= n_ax) {
            st = ocl_fail(r, TDM_E_RUNTIME, "index %lld is out of range for an axis of %lld", (long long)idx[i],
                      (long long)n_ax);
            break;
        }
        tab[i] = (int)v;
    }
    mem_free(idx);
    int64_t od[TDM_MAX_RANK];
    int orank = 0;
    size_t inner = 1;
    for (int k = 0; k < axis; k++)
        od[orank++] = x->dims[k];
    for (int k = 0; k < ix->rank; k++)
        od[orank++] = ix->dims[k];
    for (int k = (int)axis + 1; k < x->rank; k++) {
        od[orank++] = x->dims[k];
        inner *= (size_t)x->dims[k];
    }
    if (!st)
        st = ocl_out_new(r, 0, x->dtype, orank, od);
    cl_mem tm = NULL;
    if (!st)
        st = ocl_buf_from_host(r->c, r->e, tab, sizeof *tab * (size_t)ni, &tm);
    mem_free(tab);
    if (st)
        return st;
    size_t n = tcount(&r->out[0]);
    ocl_args a;
    if (!(st = ocl_kern(r, OCL_P32, by_size(K_GATHER_1, tdm_dtype_size(x->dtype)), &a))) {
        ocl_arg_mem(&a, MEM(x));
        ocl_arg_mem(&a, tm);
        ocl_arg_mem(&a, MEM(&r->out[0]));
        ocl_arg_int(&a, (int)n);
        ocl_arg_int(&a, (int)ni);
        ocl_arg_int(&a, (int)n_ax);
        ocl_arg_int(&a, (int)inner);
        st = ocl_launch1(r, &a, "gather", n);
    }
    clReleaseMemObject(tm);
    return st;
}

tdm_status ocl_run_shape(orun *r)
{
    const tdm_device_tensor *x = &r->in[0];
    int64_t start = 0, end = x->rank;
    if (r->o->version >= 15) {
        start = gr_attr_int(&r->o->gn, "start", 0);
        end = gr_attr_int(&r->o->gn, "end", x->rank);
        if (start < 0)
            start += x->rank;
        if (end < 0)
            end += x->rank;
        start = clamp64(start, 0, x->rank);
        end = clamp64(end, 0, x->rank);
    }
    int64_t n = end > start ? end - start : 0;
    tdm_status st = ocl_out_new(r, 0, TDM_INT64, 1, &n);
    if (st)
        return st;
    return ocl_write(r->c, r->e, MEM(&r->out[0]), x->dims + start, (size_t)n * sizeof(int64_t));
}

#else

typedef int ocl_move_unused;

#endif
