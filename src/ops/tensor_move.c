/* Data movement: Transpose, Concat, Split, Slice, Expand, Tile, Pad,
 * DepthToSpace, SpaceToDepth, Trilu, ReverseSequence, Compress. Transpose,
 * Slice and Split are strided views (op_tensor_strided_copy: merged,
 * tiled and threaded copies); most others reduce to op_tensor_gather_map
 * with per-dimension offset tables. */
#include "ops/tensor.h"
#include "core/mem.h"

#include <string.h>

tdm_status op_run_Transpose(op_ctx *ctx)
{
    const tdm_tensor *x;
    tdm_status st = op_tensor_in(ctx, 0, "data", &x);
    if (st)
        return st;
    int perm[TDM_MAX_RANK];
    const int64_t *p;
    int n = gr_attr_ints(ctx->node, "perm", &p);
    if (n < 0) {
        for (int d = 0; d < x->rank; d++)
            perm[d] = x->rank - 1 - d;
    } else {
        if (n != x->rank)
            return op_fail(ctx, TDM_E_RUNTIME, "attribute 'perm' has %d entries for an input of rank %d", n, x->rank);
        int seen[TDM_MAX_RANK] = {0};
        for (int d = 0; d < n; d++) {
            int64_t a = p[d] < 0 ? p[d] + n : p[d];
            if (a < 0 || a >= n || seen[a])
                return op_fail(ctx, TDM_E_MODEL, "attribute 'perm' is not a permutation of 0..%d", n - 1);
            seen[a] = 1;
            perm[d] = (int)a;
        }
    }
    return op_tensor_transpose(ctx, 0, x, perm);
}

tdm_status op_run_Concat(op_ctx *ctx)
{
    const tdm_tensor *x0;
    tdm_status st = op_tensor_in(ctx, 0, "inputs[0]", &x0);
    if (st)
        return st;
    int axis;
    const gr_attr *aa = gr_attr_find(ctx->node, "axis");
    if (!aa)
        return op_fail(ctx, TDM_E_MODEL, "attribute 'axis' is missing");
    if ((st = op_axis(ctx, aa->i, x0->rank, "attribute 'axis'", &axis)) != TDM_OK)
        return st;
    if (x0->rank == 0)
        return op_fail(ctx, TDM_E_RUNTIME, "cannot concatenate scalars");
    for (int i = 1; i < ctx->n_in; i++) {
        const tdm_tensor *x;
        if ((st = op_tensor_in(ctx, i, "inputs", &x)) != TDM_OK)
            return st;
    }
    return op_tensor_concat(ctx, ctx->in, (size_t)ctx->n_in, axis, ctx->out[0]);
}

tdm_status op_run_Split(op_ctx *ctx)
{
    const tdm_tensor *x;
    tdm_status st = op_tensor_in(ctx, 0, "input", &x);
    if (st)
        return st;
    int axis;
    if ((st = op_axis(ctx, gr_attr_int(ctx->node, "axis", 0), x->rank, "attribute 'axis'", &axis)) != TDM_OK)
        return st;
    if (x->rank == 0)
        return op_fail(ctx, TDM_E_RUNTIME, "cannot split a scalar");
    int64_t *split = NULL, ns = -1;
    if (ctx->version >= 13) {
        if ((st = op_tensor_opt_ints(ctx, 1, &split, &ns)) != TDM_OK)
            return st;
    } else {
        const int64_t *v;
        int k = gr_attr_ints(ctx->node, "split", &v);
        if (k >= 0) {
            if (!(split = mem_calloc((size_t)k + 1, sizeof *split)))
                return op_fail(ctx, TDM_E_NOMEM, "out of memory");
            memcpy(split, v, sizeof *split * (size_t)k);
            ns = k;
        }
    }
    int nout = ctx->n_out;
    int64_t len = x->dims[axis];
    int64_t *parts = mem_calloc((size_t)nout + 1, sizeof *parts);
    if (!parts) {
        mem_free(split);
        return op_fail(ctx, TDM_E_NOMEM, "out of memory");
    }
    if (ns >= 0) {
        int64_t sum = 0;
        if (ns != nout) {
            st = op_fail(ctx, TDM_E_RUNTIME, "'split' has %lld entries for %d outputs", (long long)ns, nout);
            goto done;
        }
        for (int i = 0; i < nout; i++) {
            if (split[i] < 0 || split[i] > len) {
                st = op_fail(ctx, TDM_E_RUNTIME, "'split' entry %d is %lld, outside 0..%lld", i, (long long)split[i],
                             (long long)len);
                goto done;
            }
            parts[i] = split[i];
            sum += split[i];
        }
        if (sum != len) {
            st = op_fail(ctx, TDM_E_RUNTIME, "'split' sums to %lld, but the axis has %lld", (long long)sum,
                         (long long)len);
            goto done;
        }
    } else if (ctx->version >= 18 && nout > 0) {
        /* num_outputs parts of ceil(len / n); the last ones take what is left */
        int64_t n_attr = gr_attr_int(ctx->node, "num_outputs", nout);
        if (n_attr != nout) {
            st = op_fail(ctx, TDM_E_RUNTIME, "'num_outputs' is %lld but the node has %d outputs", (long long)n_attr,
                         nout);
            goto done;
        }
        int64_t c = len / nout + (len % nout != 0), left = len;
        for (int i = 0; i < nout; i++) {
            parts[i] = left < c ? left : c;
            left -= parts[i];
        }
    } else {
        if (nout <= 0 || len % nout) {
            st = op_fail(ctx, TDM_E_RUNTIME, "axis of %lld cannot be split into %d equal parts", (long long)len, nout);
            goto done;
        }
        for (int i = 0; i < nout; i++)
            parts[i] = len / nout;
    }
    size_t outer = 1, inner = 1;
    for (int d = 0; d < axis; d++)
        outer *= (size_t)x->dims[d];
    for (int d = axis + 1; d < x->rank; d++)
        inner *= (size_t)x->dims[d];
    size_t irow = (size_t)len * inner, off = 0;
    for (int i = 0; i < nout; i++) {
        int64_t dims[TDM_MAX_RANK];
        memcpy(dims, x->dims, sizeof dims[0] * (size_t)x->rank);
        dims[axis] = parts[i];
        size_t row = (size_t)parts[i] * inner;
        if (op_out_wanted(ctx, i)) {
            if ((st = op_out(ctx, i, x->dtype, x->rank, dims)) != TDM_OK)
                goto done;
            tdm_tensor view = *ctx->out[i]; /* the output as [outer, row] */
            int64_t vd[2] = {(int64_t)outer, (int64_t)row}, vs[2] = {(int64_t)irow, 1};
            view.rank = 2;
            memcpy(view.dims, vd, sizeof vd);
            if (op_tensor_strided_copy(ctx, &view, x, (int64_t)off, vs) == 0) {
                off += row;
                continue;
            }
            for (size_t o = 0; o < outer && row; o++)
                if ((st = op_tensor_copy(ctx, ctx->out[i], o * row, x, o * irow + off, row)) != TDM_OK)
                    goto done;
        }
        off += row;
    }
done:
    mem_free(split);
    mem_free(parts);
    return st;
}

/* ---- Slice ---- */

tdm_status op_run_Slice(op_ctx *ctx)
{
    const tdm_tensor *x;
    tdm_status st = op_tensor_in(ctx, 0, "data", &x);
    if (st)
        return st;
    int64_t *starts = NULL, *ends = NULL, *axes = NULL, *steps = NULL;
    int64_t ns = -1, ne = -1, na = -1, nst = -1;
    int64_t **offs = NULL;
    if (ctx->version < 10) {
        const int64_t *v;
        int64_t *bufs[3] = {NULL, NULL, NULL};
        const char *names[3] = {"starts", "ends", "axes"};
        int64_t cnt[3];
        for (int k = 0; k < 3; k++) {
            int c = gr_attr_ints(ctx->node, names[k], &v);
            cnt[k] = c;
            if (c < 0)
                continue;
            if (!(bufs[k] = mem_calloc((size_t)c + 1, sizeof(int64_t)))) {
                st = op_fail(ctx, TDM_E_NOMEM, "out of memory");
                break;
            }
            memcpy(bufs[k], v, sizeof(int64_t) * (size_t)c);
        }
        starts = bufs[0], ends = bufs[1], axes = bufs[2];
        ns = cnt[0], ne = cnt[1], na = cnt[2];
        if (st)
            goto done;
    } else {
        if ((st = op_tensor_opt_ints(ctx, 1, &starts, &ns)) || (st = op_tensor_opt_ints(ctx, 2, &ends, &ne)) ||
            (st = op_tensor_opt_ints(ctx, 3, &axes, &na)) || (st = op_tensor_opt_ints(ctx, 4, &steps, &nst)))
            goto done;
    }
    if (ns < 0 || ne < 0) {
        st = op_fail(ctx, TDM_E_MODEL, "'starts' and 'ends' are required");
        goto done;
    }
    if (ns != ne || (na >= 0 && na != ns) || (nst >= 0 && nst != ns)) {
        st = op_fail(ctx, TDM_E_RUNTIME, "'starts', 'ends', 'axes' and 'steps' must have the same length");
        goto done;
    }
    int64_t start[TDM_MAX_RANK], step[TDM_MAX_RANK], dims[TDM_MAX_RANK];
    int seen[TDM_MAX_RANK] = {0};
    for (int d = 0; d < x->rank; d++) {
        start[d] = 0;
        step[d] = 1;
        dims[d] = x->dims[d];
    }
    for (int64_t k = 0; k < ns; k++) {
        int a;
        if ((st = op_axis(ctx, na >= 0 ? axes[k] : k, x->rank, "'axes' entry", &a)) != TDM_OK)
            goto done;
        if (seen[a]) {
            st = op_fail(ctx, TDM_E_RUNTIME, "'axes' names axis %d twice", a);
            goto done;
        }
        seen[a] = 1;
        int64_t s = starts[k], p = nst >= 0 ? steps[k] : 1;
        if (p == 0) {
            st = op_fail(ctx, TDM_E_RUNTIME, "'steps' entry %lld is zero", (long long)k);
            goto done;
        }
        dims[a] = op_tensor_slice(x->dims[a], &s, ends[k], &p);
        start[a] = s;
        step[a] = p;
    }
    if ((st = op_out(ctx, 0, x->dtype, x->rank, dims)) != TDM_OK)
        goto done;
    int64_t strides[TDM_MAX_RANK];
    shape_strides(x->rank, x->dims, strides);
    {
        int64_t vs[TDM_MAX_RANK], base = 0;
        for (int d = 0; d < x->rank; d++) {
            vs[d] = step[d] * strides[d];
            if (dims[d] > 0)
                base += start[d] * strides[d];
        }
        if (op_tensor_strided_copy(ctx, ctx->out[0], x, base, vs) == 0)
            goto done;
    }
    if (!(offs = op_tensor_offs_new(x->rank, dims))) {
        st = op_fail(ctx, TDM_E_NOMEM, "out of memory");
        goto done;
    }
    for (int d = 0; d < x->rank; d++)
        for (int64_t i = 0; i < dims[d]; i++)
            offs[d][i] = (start[d] + i * step[d]) * strides[d];
    st = op_tensor_gather_map(ctx, ctx->out[0], x, offs, NULL);
done:
    mem_free(offs);
    mem_free(starts);
    mem_free(ends);
    mem_free(axes);
    mem_free(steps);
    return st;
}

/* ---- Expand, Tile ---- */

tdm_status op_run_Expand(op_ctx *ctx)
{
    const tdm_tensor *x;
    tdm_status st = op_tensor_in(ctx, 0, "input", &x);
    if (st)
        return st;
    int64_t *shape;
    size_t n;
    if ((st = op_in_ints(ctx, 1, &shape, &n)) != TDM_OK)
        return st;
    int64_t dims[TDM_MAX_RANK];
    int r;
    if (n > TDM_MAX_RANK || op_broadcast(x->rank, x->dims, (int)n, shape, &r, dims)) {
        char a[128];
        mem_free(shape);
        return op_fail(ctx, TDM_E_RUNTIME, "input of shape %s cannot be expanded to input 'shape' (%zu entries)",
                       shape_str(x->rank, x->dims, a, sizeof a), n);
    }
    mem_free(shape);
    for (int d = 0; d < r; d++)
        if (dims[d] < 0)
            return op_fail(ctx, TDM_E_RUNTIME, "input 'shape' has a negative dimension");
    if ((st = op_out(ctx, 0, x->dtype, r, dims)) != TDM_OK)
        return st;
    int64_t **offs = op_tensor_offs_new(r, dims);
    if (!offs)
        return op_fail(ctx, TDM_E_NOMEM, "out of memory");
    int64_t strides[TDM_MAX_RANK];
    op_bcast_strides(r, dims, x->rank, x->dims, strides);
    for (int d = 0; d < r; d++)
        for (int64_t i = 0; i < dims[d]; i++)
            offs[d][i] = i * strides[d];
    st = op_tensor_gather_map(ctx, ctx->out[0], x, offs, NULL);
    mem_free(offs);
    return st;
}

tdm_status op_run_Tile(op_ctx *ctx)
{
    const tdm_tensor *x;
    tdm_status st = op_tensor_in(ctx, 0, "input", &x);
    if (st)
        return st;
    int64_t *rep;
    size_t n;
    if ((st = op_in_ints(ctx, 1, &rep, &n)) != TDM_OK)
        return st;
    if ((int)n != x->rank || n > TDM_MAX_RANK) {
        mem_free(rep);
        return op_fail(ctx, TDM_E_RUNTIME, "input 'repeats' has %zu entries for an input of rank %d", n, x->rank);
    }
    int64_t dims[TDM_MAX_RANK];
    for (int d = 0; d < x->rank; d++) {
        if (rep[d] < 0 || mem_mul_i64(x->dims[d], rep[d], &dims[d])) {
            long long v = (long long)rep[d];
            mem_free(rep);
            return op_fail(ctx, TDM_E_RUNTIME, "input 'repeats' entry %d (%lld) is invalid", d, v);
        }
    }
    mem_free(rep);
    if ((st = op_out(ctx, 0, x->dtype, x->rank, dims)) != TDM_OK)
        return st;
    int64_t **offs = op_tensor_offs_new(x->rank, dims);
    if (!offs)
        return op_fail(ctx, TDM_E_NOMEM, "out of memory");
    int64_t strides[TDM_MAX_RANK];
    shape_strides(x->rank, x->dims, strides);
    for (int d = 0; d < x->rank; d++)
        for (int64_t i = 0, j = 0; i < dims[d]; i++) {
            offs[d][i] = j * strides[d];
            if (++j == x->dims[d])
                j = 0;
        }
    st = op_tensor_gather_map(ctx, ctx->out[0], x, offs, NULL);
    mem_free(offs);
    return st;
}

/* ---- Pad ---- */

enum { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE, PAD_WRAP };

tdm_status op_run_Pad(op_ctx *ctx)
{
    const tdm_tensor *x;
    tdm_status st = op_tensor_in(ctx, 0, "data", &x);
    if (st)
        return st;
    int r = x->rank;
    const char *ms = gr_attr_str(ctx->node, "mode", "constant");
    int mode;
    if (!strcmp(ms, "constant"))
        mode = PAD_CONSTANT;
    else if (!strcmp(ms, "reflect"))
        mode = PAD_REFLECT;
    else if (!strcmp(ms, "edge"))
        mode = PAD_EDGE;
    else if (!strcmp(ms, "wrap") && ctx->version >= 19)
        mode = PAD_WRAP;
    else
        return op_fail(ctx, TDM_E_UNSUPPORTED, "attribute 'mode' '%s' is not constant, reflect, edge%s", ms,
                       ctx->version >= 19 ? " or wrap" : "");
    int64_t *pads = NULL, np = -1;
    int64_t **offs = NULL;
    tdm_tensor *fillt = NULL;
    unsigned char fill[16];
    const char *sfill = NULL;
    memset(fill, 0, sizeof fill);
    if (ctx->version < 11) {
        const int64_t *v;
        int k = gr_attr_ints(ctx->node, "pads", &v);
        if (k < 0)
            return op_fail(ctx, TDM_E_MODEL, "attribute 'pads' is missing");
        if (!(pads = mem_calloc((size_t)k + 1, sizeof *pads)))
            return op_fail(ctx, TDM_E_NOMEM, "out of memory");
        memcpy(pads, v, sizeof *pads * (size_t)k);
        np = k;
        if (x->dtype != TDM_STRING) {
            if ((st = tensor_new(ctx->err, x->dtype, 0, NULL, &fillt)) != TDM_OK)
                goto done;
            tensor_set_f64(fillt, 0, gr_attr_float(ctx->node, "value", 0.0f));
            memcpy(fill, fillt->data, tdm_dtype_size(x->dtype));
        }
    } else {
        if ((st = op_tensor_opt_ints(ctx, 1, &pads, &np)) != TDM_OK)
            return st;
        if (np < 0)
            return op_fail(ctx, TDM_E_MODEL, "input 'pads' is missing");
        const tdm_tensor *cv = op_tensor_opt(ctx, 2);
        if (cv && cv->count) {
            if (cv->dtype != x->dtype) {
                st = op_fail(ctx, TDM_E_RUNTIME, "input 'constant_value' is %s, data %s", tdm_dtype_name(cv->dtype),
                             tdm_dtype_name(x->dtype));
                goto done;
            }
            if (x->dtype == TDM_STRING)
                sfill = tensor_str(cv, 0);
            else
                memcpy(fill, cv->data, tdm_dtype_size(x->dtype));
        }
    }
    if (ctx->version >= 18 && op_tensor_opt(ctx, 3)) {
        /* 'axes' (18): pads names only these axes, the others get 0 */
        int64_t *axes = NULL, na = -1, *full = NULL;
        if ((st = op_tensor_opt_ints(ctx, 3, &axes, &na)) != TDM_OK)
            goto done;
        if (na < 0 || na > r || np != 2 * na || !(full = mem_calloc((size_t)(2 * r) + 1, sizeof *full))) {
            mem_free(axes);
            st = na >= 0 && na <= r && np == 2 * na
                     ? op_fail(ctx, TDM_E_NOMEM, "out of memory")
                     : op_fail(ctx, TDM_E_RUNTIME, "'pads' has %lld entries for %lld axes", (long long)np, (long long)na);
            goto done;
        }
        for (int64_t k = 0; k < na && !st; k++) {
            int a;
            if ((st = op_axis(ctx, axes[k], r, "input 'axes'", &a)) == TDM_OK) {
                full[a] = pads[k];
                full[a + r] = pads[k + na];
            }
        }
        mem_free(axes);
        mem_free(pads);
        pads = full;
        np = 2 * r;
        if (st)
            goto done;
    }
    if (np != 2 * r) {
        st = op_fail(ctx, TDM_E_RUNTIME, "'pads' has %lld entries for an input of rank %d", (long long)np, r);
        goto done;
    }
    int64_t dims[TDM_MAX_RANK];
    for (int d = 0; d < r; d++) {
        int64_t a = pads[d], b = pads[d + r];
        if (a < -x->dims[d] || b < -x->dims[d] || a > INT32_MAX || b > INT32_MAX ||
            x->dims[d] + a + b < 0) {
            st = op_fail(ctx, TDM_E_RUNTIME, "'pads' for axis %d (%lld, %lld) are out of range for size %lld", d,
                         (long long)a, (long long)b, (long long)x->dims[d]);
            goto done;
        }
        dims[d] = x->dims[d] + a + b;
        if (mode != PAD_CONSTANT && x->dims[d] == 0 && dims[d] > 0) {
            st = op_fail(ctx, TDM_E_RUNTIME, "cannot %s-pad axis %d of size 0", ms, d);
            goto done;
        }
    }
    if ((st = op_out(ctx, 0, x->dtype, r, dims)) != TDM_OK)
        goto done;
    if (r == 0) {
        st = op_tensor_copy(ctx, ctx->out[0], 0, x, 0, 1);
        goto done;
    }
    if (!(offs = op_tensor_offs_new(r, dims))) {
        st = op_fail(ctx, TDM_E_NOMEM, "out of memory");
        goto done;
    }
    int64_t strides[TDM_MAX_RANK];
    shape_strides(r, x->dims, strides);
    for (int d = 0; d < r; d++) {
        int64_t n = x->dims[d];
        for (int64_t o = 0; o < dims[d]; o++) {
            int64_t i = o - pads[d];
            if (i < 0 || i >= n) {
                if (mode == PAD_CONSTANT) {
                    offs[d][o] = -1;
                    continue;
                }
                if (mode == PAD_WRAP) {
                    i %= n;
                    if (i < 0)
                        i += n;
                } else if (mode == PAD_EDGE || n == 1) {
                    i = i < 0 ? 0 : n - 1;
                } else { /* reflect, period 2n-2 */
                    int64_t p = 2 * n - 2;
                    i = i % p;
                    if (i < 0)
                        i += p;
                    if (i >= n)
                        i = p - i;
                }
            }
            offs[d][o] = i * strides[d];
        }
    }
    st = op_tensor_gather_map(ctx, ctx->out[0], x, offs, x->dtype == TDM_STRING ? (const void *)&sfill : fill);
done:
    tdm_tensor_destroy(fillt);
    mem_free(offs);
    mem_free(pads);
    return st;
}

/* ---- CenterCropPad (18): each named axis cropped or zero-padded to its
 * new size around the centre (the odd element on the end side) ---- */

tdm_status op_run_CenterCropPad(op_ctx *ctx)
{
    const tdm_tensor *x;
    tdm_status st = op_tensor_in(ctx, 0, "input_data", &x);
    if (st)
        return st;
    int r = x->rank;
    int64_t *shape = NULL, ns = -1, **offs = NULL;
    if ((st = op_tensor_opt_ints(ctx, 1, &shape, &ns)) != TDM_OK)
        return st;
    int axes[TDM_MAX_RANK];
    const int64_t *av = NULL;
    int na = gr_attr_ints(ctx->node, "axes", &av), named = na >= 0;
    if (!named) {
        na = r;
        for (int d = 0; d < r; d++)
            axes[d] = d;
    }
    if (na > r || ns != na) {
        st = op_fail(ctx, TDM_E_RUNTIME, "input 'shape' has %lld entries for %d axes", (long long)ns, na);
        goto done;
    }
    int64_t dims[TDM_MAX_RANK], start[TDM_MAX_RANK] = {0};
    memcpy(dims, x->dims, sizeof dims[0] * (size_t)r);
    for (int k = 0; k < na; k++) {
        if (named && (st = op_axis(ctx, av[k], r, "attribute 'axes'", &axes[k])))
            goto done;
        if (shape[k] < 0 || shape[k] > INT32_MAX) {
            st = op_fail(ctx, TDM_E_RUNTIME, "input 'shape' entry %d (%lld) is out of range", k, (long long)shape[k]);
            goto done;
        }
        int64_t in = x->dims[axes[k]];
        dims[axes[k]] = shape[k];
        /* output index o reads input o + start: a crop starts inside, a pad before */
        start[axes[k]] = shape[k] <= in ? (in - shape[k]) / 2 : -((shape[k] - in) / 2);
    }
    if ((st = op_out(ctx, 0, x->dtype, r, dims)) != TDM_OK || r == 0) {
        if (!st)
            st = op_tensor_copy(ctx, ctx->out[0], 0, x, 0, 1);
        goto done;
    }
    if (!(offs = op_tensor_offs_new(r, dims))) {
        st = op_fail(ctx, TDM_E_NOMEM, "out of memory");
        goto done;
    }
    int64_t strides[TDM_MAX_RANK];
    shape_strides(r, x->dims, strides);
    for (int d = 0; d < r; d++)
        for (int64_t o = 0; o < dims[d]; o++) {
            int64_t i = o + start[d];
            offs[d][o] = i < 0 || i >= x->dims[d] ? -1 : i * strides[d];
        }
    st = op_tensor_gather_map(ctx, ctx->out[0], x, offs, NULL);
done:
    mem_free(offs);
    mem_free(shape);
    return st;
}

/* ---- DepthToSpace, SpaceToDepth: a reshape, a transpose, a reshape ---- */

static tdm_status reshape_transpose(op_ctx *ctx, const tdm_tensor *x, int r6, const int64_t *d6, const int *perm,
                                    int rout, const int64_t *dout)
{
    tdm_status st = op_out(ctx, 0, x->dtype, rout, dout);
    if (st)
        return st;
    int64_t strides[TDM_MAX_RANK], pd[TDM_MAX_RANK];
    shape_strides(r6, d6, strides);
    for (int d = 0; d < r6; d++)
        pd[d] = d6[perm[d]];
    int64_t **offs = op_tensor_offs_new(r6, pd);
    if (!offs)
        return op_fail(ctx, TDM_E_NOMEM, "out of memory");
    for (int d = 0; d < r6; d++)
        for (int64_t k = 0; k < pd[d]; k++)
            offs[d][k] = k * strides[perm[d]];
    /* Gather into a view of the output with the permuted 6-D shape. */
    tdm_tensor view = *ctx->out[0];
    view.rank = r6;
    memcpy(view.dims, pd, sizeof pd[0] * (size_t)r6);
    st = op_tensor_gather_map(ctx, &view, x, offs, NULL);
    mem_free(offs);
    return st;
}

tdm_status op_run_DepthToSpace(op_ctx *ctx)
{
    const tdm_tensor *x;
    tdm_status st = op_tensor_in(ctx, 0, "input", &x);
    if (st)
        return st;
    int64_t b = gr_attr_int(ctx->node, "blocksize", 0);
    if (x->rank != 4)
        return op_fail(ctx, TDM_E_RUNTIME, "input must be 4-D, not rank %d", x->rank);
    if (b <= 0 || b > 65536 || x->dims[1] % (b * b))
        return op_fail(ctx, TDM_E_RUNTIME, "attribute 'blocksize' %lld does not divide the %lld channels evenly",
                       (long long)b, (long long)x->dims[1]);
    int64_t n = x->dims[0], c = x->dims[1] / (b * b), h = x->dims[2], w = x->dims[3];
    int64_t dout[4] = {n, c, h * b, w * b};
    const char *mode = ctx->version >= 11 ? gr_attr_str(ctx->node, "mode", "DCR") : "DCR";
    if (!strcmp(mode, "DCR")) {
        int64_t d6[6] = {n, b, b, c, h, w};
        int perm[6] = {0, 3, 4, 1, 5, 2};
        return reshape_transpose(ctx, x, 6, d6, perm, 4, dout);
    }
    if (!strcmp(mode, "CRD")) {
        int64_t d6[6] = {n, c, b, b, h, w};
        int perm[6] = {0, 1, 4, 2, 5, 3};
        return reshape_transpose(ctx, x, 6, d6, perm, 4, dout);
    }
    return op_fail(ctx, TDM_E_MODEL, "attribute 'mode' '%s' is not DCR or CRD", mode);
}

tdm_status op_run_SpaceToDepth(op_ctx *ctx)
{
    const tdm_tensor *x;
    tdm_status st = op_tensor_in(ctx, 0, "input", &x);
    if (st)
        return st;
    int64_t b = gr_attr_int(ctx->node, "blocksize", 0);
    if (x->rank != 4)
        return op_fail(ctx, TDM_E_RUNTIME, "input must be 4-D, not rank %d", x->rank);
    if (b <= 0 || b > 65536 || x->dims[2] % b || x->dims[3] % b)
        return op_fail(ctx, TDM_E_RUNTIME, "attribute 'blocksize' %lld does not divide height and width", (long long)b);
    int64_t n = x->dims[0], c = x->dims[1], h = x->dims[2] / b, w = x->dims[3] / b;
    int64_t d6[6] = {n, c, h, b, w, b};
    int64_t dout[4] = {n, c * b * b, h, w};
    /* 'mode' (28): DCR puts the block offsets before the channel, CRD after */
    const char *mode = ctx->version >= 28 ? gr_attr_str(ctx->node, "mode", "DCR") : "DCR";
    if (!strcmp(mode, "DCR")) {
        int perm[6] = {0, 3, 5, 1, 2, 4};
        return reshape_transpose(ctx, x, 6, d6, perm, 4, dout);
    }
    if (!strcmp(mode, "CRD")) {
        int perm[6] = {0, 1, 3, 5, 2, 4};
        return reshape_transpose(ctx, x, 6, d6, perm, 4, dout);
    }
    return op_fail(ctx, TDM_E_MODEL, "attribute 'mode' '%s' is not DCR or CRD", mode);
}

/* ---- Trilu ---- */

tdm_status op_run_Trilu(op_ctx *ctx)
{
    const tdm_tensor *x;
    tdm_status st = op_tensor_in(ctx, 0, "input", &x);
    if (st)
        return st;
    if (x->rank < 2)
        return op_fail(ctx, TDM_E_RUNTIME, "input must have rank 2 or more, not %d", x->rank);
    int64_t k = 0;
    const tdm_tensor *kt = op_tensor_opt(ctx, 1);
    if (kt) {
        if (kt->count != 1 || !dtype_is_int(kt->dtype))
            return op_fail(ctx, TDM_E_RUNTIME, "input 'k' must be an integer scalar");
        k = tensor_get_i64(kt, 0);
    }
    /* Beyond ±(rows + cols) every k keeps all or nothing; clamp so i + k cannot overflow. */
    {
        int64_t lim = x->dims[x->rank - 2] + x->dims[x->rank - 1] + 1;
        k = k > lim ? lim : k < -lim ? -lim : k;
    }
    int upper = (int)gr_attr_int(ctx->node, "upper", 1);
    if ((st = op_out(ctx, 0, x->dtype, x->rank, x->dims)) != TDM_OK)
        return st;
    int64_t rows = x->dims[x->rank - 2], cols = x->dims[x->rank - 1];
    size_t mat = (size_t)(rows * cols), nmat = mat ? x->count / mat : 0;
    if (x->dtype != TDM_STRING)
        memset(ctx->out[0]->data, 0, ctx->out[0]->nbytes);
    for (size_t m = 0; m < nmat; m++)
        for (int64_t i = 0; i < rows; i++) {
            /* Kept columns: upper j >= i + k; lower j <= i + k. */
            int64_t lo = upper ? i + k : 0, hi = upper ? cols : i + k + 1;
            lo = lo < 0 ? 0 : lo > cols ? cols : lo;
            hi = hi < 0 ? 0 : hi > cols ? cols : hi;
            if (hi > lo) {
                size_t off = m * mat + (size_t)(i * cols + lo);
                if ((st = op_tensor_copy(ctx, ctx->out[0], off, x, off, (size_t)(hi - lo))) != TDM_OK)
                    return st;
            }
        }
    return TDM_OK;
}

/* ---- ReverseSequence ---- */

tdm_status op_run_ReverseSequence(op_ctx *ctx)
{
    const tdm_tensor *x, *lt;
    tdm_status st;
    if ((st = op_tensor_in(ctx, 0, "input", &x)) || (st = op_tensor_in(ctx, 1, "sequence_lens", &lt)))
        return st;
    int64_t ba = gr_attr_int(ctx->node, "batch_axis", 1), ta = gr_attr_int(ctx->node, "time_axis", 0);
    if (x->rank < 2 || !((ba == 0 && ta == 1) || (ba == 1 && ta == 0)))
        return op_fail(ctx, TDM_E_MODEL, "attributes 'batch_axis' and 'time_axis' must be 0 and 1 on a rank >= 2 input");
    int64_t nb = x->dims[ba], nt = x->dims[ta];
    if (lt->rank != 1 || lt->dims[0] != nb || !dtype_is_int(lt->dtype))
        return op_fail(ctx, TDM_E_RUNTIME, "input 'sequence_lens' must be an integer vector of the batch size %lld",
                       (long long)nb);
    if ((st = op_out(ctx, 0, x->dtype, x->rank, x->dims)) != TDM_OK)
        return st;
    size_t inner = 1;
    for (int d = 2; d < x->rank; d++)
        inner *= (size_t)x->dims[d];
    /* Element (t, b) block offset. */
    size_t st_t = ta == 0 ? (size_t)nb * inner : inner, st_b = ta == 0 ? inner : (size_t)nt * inner;
    for (int64_t b = 0; b < nb; b++) {
        int64_t len = tensor_get_i64(lt, (size_t)b);
        if (len < 0 || len > nt)
            return op_fail(ctx, TDM_E_RUNTIME, "input 'sequence_lens' entry %lld (%lld) is outside 0..%lld",
                           (long long)b, (long long)len, (long long)nt);
        for (int64_t t = 0; t < nt; t++) {
            int64_t src = t < len ? len - 1 - t : t;
            if ((st = op_tensor_copy(ctx, ctx->out[0], (size_t)b * st_b + (size_t)t * st_t, x,
                                     (size_t)b * st_b + (size_t)src * st_t, inner)) != TDM_OK)
                return st;
        }
    }
    return TDM_OK;
}

/* ---- Compress ---- */

tdm_status op_run_Compress(op_ctx *ctx)
{
    const tdm_tensor *x, *c;
    tdm_status st;
    if ((st = op_tensor_in(ctx, 0, "input", &x)) || (st = op_tensor_in(ctx, 1, "condition", &c)))
        return st;
    if (c->rank != 1)
        return op_fail(ctx, TDM_E_RUNTIME, "input 'condition' must be 1-D, not rank %d", c->rank);
    const gr_attr *aa = gr_attr_find(ctx->node, "axis");
    int axis = -1;
    if (aa && (st = op_axis(ctx, aa->i, x->rank, "attribute 'axis'", &axis)) != TDM_OK)
        return st;
    int64_t len = axis < 0 ? (int64_t)x->count : x->dims[axis];
    int64_t kept = 0;
    for (size_t i = 0; i < c->count; i++) {
        if (tensor_get_f64(c, i) == 0)
            continue;
        if ((int64_t)i >= len)
            return op_fail(ctx, TDM_E_RUNTIME, "input 'condition' selects index %zu beyond the size %lld", i,
                           (long long)len);
        kept++;
    }
    size_t outer = 1, inner = 1;
    int64_t dims[TDM_MAX_RANK];
    int r;
    if (axis < 0) {
        r = 1;
        dims[0] = kept;
    } else {
        r = x->rank;
        memcpy(dims, x->dims, sizeof dims[0] * (size_t)r);
        dims[axis] = kept;
        for (int d = 0; d < axis; d++)
            outer *= (size_t)x->dims[d];
        for (int d = axis + 1; d < r; d++)
            inner *= (size_t)x->dims[d];
    }
    if ((st = op_out(ctx, 0, x->dtype, r, dims)) != TDM_OK)
        return st;
    size_t off = 0;
    for (size_t o = 0; o < outer; o++)
        for (size_t i = 0; i < c->count && (int64_t)i < len; i++) {
            if (tensor_get_f64(c, i) == 0)
                continue;
            if ((st = op_tensor_copy(ctx, ctx->out[0], off, x, (o * (size_t)len + i) * inner, inner)) != TDM_OK)
                return st;
            off += inner;
        }
    return TDM_OK;
}
