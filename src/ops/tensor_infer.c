/* Static shape inference for the tensor ops. Constant inputs (ctx->value[])
 * make the shape-computing ops (Reshape, Expand, Tile, Slice, Pad,
 * ConstantOfShape, Range, Resize, …) exact; otherwise the affected dims are
 * left unknown. These hooks never fail: a contradiction is left for the run
 * hook to report with the actual values. */
#include "ops/tensor.h"
#include "core/mem.h"

#include <math.h>
#include <string.h>

static const gr_dim UNK = {-1, NULL};

static gr_dim known(int64_t v)
{
    gr_dim d = {v, NULL};
    return d;
}

/* Input i's type when it is a tensor of known rank, else NULL. */
static const gr_type *in_ranked(const op_infer_ctx *ctx, int i)
{
    if (i >= ctx->n_in || !ctx->in[i])
        return NULL;
    const gr_type *t = ctx->in[i];
    return t->kind == TDM_KIND_TENSOR && t->rank >= 0 ? t : NULL;
}

static tdm_dtype in_dtype(const op_infer_ctx *ctx, int i)
{
    return i < ctx->n_in && ctx->in[i] ? ctx->in[i]->dtype : TDM_UNDEFINED;
}

static const tdm_tensor *in_value(const op_infer_ctx *ctx, int i)
{
    if (i >= ctx->n_in || !ctx->value || !ctx->value[i] || ctx->value[i]->kind != TDM_KIND_TENSOR)
        return NULL;
    return ctx->value[i];
}

/* Sets output i to a tensor of dtype and rank (-1: unknown) with unknown dims. */
static gr_type *out_tensor(op_infer_ctx *ctx, int i, tdm_dtype dt, int rank)
{
    gr_type *o = &ctx->out[i];
    o->kind = TDM_KIND_TENSOR;
    o->dtype = dt;
    o->rank = rank > TDM_MAX_RANK ? -1 : rank;
    for (int d = 0; d < TDM_MAX_RANK; d++)
        o->dims[d] = UNK;
    return o;
}

/* Constant integer input i into buf (at most max entries): the count, or -1. */
static int const_ints(const op_infer_ctx *ctx, int i, int64_t *buf, int max)
{
    const tdm_tensor *v = in_value(ctx, i);
    if (!v || !dtype_is_int(v->dtype) || v->count > (size_t)max)
        return -1;
    for (size_t k = 0; k < v->count; k++)
        buf[k] = tensor_get_i64(v, k);
    return (int)v->count;
}

/* Length of a 1-D input whose values are unknown, or -1. */
static int vec_len(const op_infer_ctx *ctx, int i)
{
    const gr_type *t = in_ranked(ctx, i);
    return t && t->rank == 1 && t->dims[0].v >= 0 && t->dims[0].v <= TDM_MAX_RANK ? (int)t->dims[0].v : -1;
}

/* Integer list from the attribute (opset < since) or constant input i. */
static int attr_or_input_ints(const op_infer_ctx *ctx, int since, const char *attr, int i, int64_t *buf, int max)
{
    if (ctx->version < since) {
        const int64_t *v;
        int n = gr_attr_ints(ctx->node, attr, &v);
        if (n < 0 || n > max)
            return -1;
        memcpy(buf, v, sizeof *buf * (size_t)n);
        return n;
    }
    return const_ints(ctx, i, buf, max);
}

static int norm_axis(int64_t a, int rank)
{
    if (a < 0)
        a += rank;
    return a < 0 || a >= rank ? -1 : (int)a;
}

/* Product of dims [from, to), or -1 when one is unknown. */
static int64_t dims_product(const gr_type *t, int from, int to)
{
    int64_t p = 1;
    for (int d = from; d < to; d++) {
        if (t->dims[d].v < 0 || mem_mul_i64(p, t->dims[d].v, &p))
            return -1;
    }
    return p;
}

/* The -1 entry of a Reshape: the input's element count over the other
 * output dims, cancelling symbolic dims by name ([N,3,4] -> [N,-1] = 12). */
static gr_dim reshape_rest(const gr_type *x, const gr_type *o, int neg)
{
    const char *syms[TDM_MAX_RANK];
    int ns = 0;
    int64_t in_prod = 1, out_prod = 1;
    for (int d = 0; d < x->rank; d++) {
        if (x->dims[d].v >= 0) {
            if (mem_mul_i64(in_prod, x->dims[d].v, &in_prod))
                return UNK;
        } else if (x->dims[d].sym) {
            syms[ns++] = x->dims[d].sym;
        } else {
            return UNK;
        }
    }
    for (int d = 0; d < o->rank; d++) {
        if (d == neg)
            continue;
        if (o->dims[d].v >= 0) {
            if (mem_mul_i64(out_prod, o->dims[d].v, &out_prod))
                return UNK;
            continue;
        }
        int k = 0;
        while (k < ns && (!o->dims[d].sym || strcmp(syms[k], o->dims[d].sym) != 0))
            k++;
        if (k == ns)
            return UNK;
        syms[k] = syms[--ns];
    }
    if (ns || out_prod <= 0 || in_prod % out_prod)
        return UNK;
    return known(in_prod / out_prod);
}

tdm_status op_infer_Reshape(op_infer_ctx *ctx)
{
    const gr_type *x = in_ranked(ctx, 0);
    int64_t shape[TDM_MAX_RANK];
    int n = attr_or_input_ints(ctx, 5, "shape", 1, shape, TDM_MAX_RANK);
    if (n < 0) {
        out_tensor(ctx, 0, in_dtype(ctx, 0), ctx->version >= 5 ? vec_len(ctx, 1) : -1);
        return TDM_OK;
    }
    int allowzero = ctx->version >= 14 ? (int)gr_attr_int(ctx->node, "allowzero", 0) : 0;
    gr_type *o = out_tensor(ctx, 0, in_dtype(ctx, 0), n);
    int neg = -1;
    for (int i = 0; i < n; i++) {
        if (shape[i] == 0 && !allowzero)
            o->dims[i] = x && i < x->rank ? x->dims[i] : UNK;
        else if (shape[i] == -1)
            neg = i;
        else if (shape[i] >= 0)
            o->dims[i] = known(shape[i]);
    }
    if (neg >= 0 && x)
        o->dims[neg] = reshape_rest(x, o, neg);
    return TDM_OK;
}

tdm_status op_infer_Flatten(op_infer_ctx *ctx)
{
    const gr_type *x = in_ranked(ctx, 0);
    gr_type *o = out_tensor(ctx, 0, in_dtype(ctx, 0), 2);
    if (!x)
        return TDM_OK;
    int64_t axis = gr_attr_int(ctx->node, "axis", 1);
    if (axis < 0)
        axis += x->rank;
    if (axis < 0 || axis > x->rank)
        return TDM_OK;
    int a = (int)axis;
    /* A single symbolic dim on one side keeps its name. */
    if (a == 1)
        o->dims[0] = x->dims[0];
    else {
        int64_t p = dims_product(x, 0, a);
        o->dims[0] = p >= 0 ? known(p) : UNK;
    }
    if (a == x->rank - 1)
        o->dims[1] = x->dims[a];
    else {
        int64_t p = dims_product(x, a, x->rank);
        o->dims[1] = p >= 0 ? known(p) : UNK;
    }
    return TDM_OK;
}

tdm_status op_infer_Squeeze(op_infer_ctx *ctx)
{
    const gr_type *x = in_ranked(ctx, 0);
    int64_t axes[TDM_MAX_RANK];
    int n = attr_or_input_ints(ctx, 13, "axes", 1, axes, TDM_MAX_RANK);
    int axes_given = ctx->version >= 13 ? (ctx->n_in > 1 && ctx->in[1] != NULL) : gr_attr_find(ctx->node, "axes") != NULL;
    if (!x || (axes_given && n < 0)) {
        out_tensor(ctx, 0, in_dtype(ctx, 0), -1);
        return TDM_OK;
    }
    int drop[TDM_MAX_RANK] = {0};
    if (axes_given) {
        for (int k = 0; k < n; k++) {
            int a = norm_axis(axes[k], x->rank);
            if (a < 0) {
                out_tensor(ctx, 0, in_dtype(ctx, 0), -1);
                return TDM_OK;
            }
            drop[a] = 1;
        }
    } else {
        for (int d = 0; d < x->rank; d++) {
            if (x->dims[d].v < 0) {
                out_tensor(ctx, 0, in_dtype(ctx, 0), -1);
                return TDM_OK;
            }
            drop[d] = x->dims[d].v == 1;
        }
    }
    int r = 0;
    gr_type *o = out_tensor(ctx, 0, in_dtype(ctx, 0), 0);
    for (int d = 0; d < x->rank; d++)
        if (!drop[d])
            o->dims[r++] = x->dims[d];
    o->rank = r;
    return TDM_OK;
}

tdm_status op_infer_Unsqueeze(op_infer_ctx *ctx)
{
    const gr_type *x = in_ranked(ctx, 0);
    int64_t axes[TDM_MAX_RANK];
    int n = attr_or_input_ints(ctx, 13, "axes", 1, axes, TDM_MAX_RANK);
    if (!x || n < 0 || x->rank + n > TDM_MAX_RANK) {
        int len = ctx->version >= 13 ? vec_len(ctx, 1) : -1;
        out_tensor(ctx, 0, in_dtype(ctx, 0), x && len >= 0 ? x->rank + len : -1);
        return TDM_OK;
    }
    int r = x->rank + n, ins[TDM_MAX_RANK] = {0};
    for (int k = 0; k < n; k++) {
        int a = norm_axis(axes[k], r);
        if (a < 0) {
            out_tensor(ctx, 0, in_dtype(ctx, 0), -1);
            return TDM_OK;
        }
        ins[a] = 1;
    }
    gr_type *o = out_tensor(ctx, 0, in_dtype(ctx, 0), r);
    for (int d = 0, j = 0; d < r; d++)
        o->dims[d] = ins[d] ? known(1) : (j < x->rank ? x->dims[j++] : UNK);
    return TDM_OK;
}

tdm_status op_infer_Shape(op_infer_ctx *ctx)
{
    const gr_type *x = in_ranked(ctx, 0);
    gr_type *o = out_tensor(ctx, 0, TDM_INT64, 1);
    if (!x)
        return TDM_OK;
    int64_t start, end;
    op_tensor_shape_range(ctx->node, ctx->version, x->rank, &start, &end);
    o->dims[0] = known(end > start ? end - start : 0);
    return TDM_OK;
}

tdm_status op_infer_Size(op_infer_ctx *ctx)
{
    out_tensor(ctx, 0, TDM_INT64, 0);
    return TDM_OK;
}

tdm_status op_infer_ConstantOfShape(op_infer_ctx *ctx)
{
    const gr_attr *a = gr_attr_find(ctx->node, "value");
    tdm_dtype dt = a && a->t ? a->t->dtype : TDM_FLOAT;
    int64_t shape[TDM_MAX_RANK];
    int n = const_ints(ctx, 0, shape, TDM_MAX_RANK);
    if (n < 0) {
        out_tensor(ctx, 0, dt, vec_len(ctx, 0));
        return TDM_OK;
    }
    gr_type *o = out_tensor(ctx, 0, dt, n);
    for (int i = 0; i < n; i++)
        o->dims[i] = shape[i] >= 0 ? known(shape[i]) : UNK;
    return TDM_OK;
}

tdm_status op_infer_Constant(op_infer_ctx *ctx)
{
    const gr_node *nd = ctx->node;
    for (int k = 0; k < nd->n_attrs; k++) {
        const gr_attr *a = &nd->attrs[k];
        gr_type *o;
        if ((!strcmp(a->name, "value") || !strcmp(a->name, "sparse_value")) && a->t) {
            o = out_tensor(ctx, 0, a->t->dtype, a->t->rank);
            for (int d = 0; d < a->t->rank && d < TDM_MAX_RANK; d++)
                o->dims[d] = known(a->t->dims[d]);
        } else if (!strcmp(a->name, "value_float")) {
            out_tensor(ctx, 0, TDM_FLOAT, 0);
        } else if (!strcmp(a->name, "value_int")) {
            out_tensor(ctx, 0, TDM_INT64, 0);
        } else if (!strcmp(a->name, "value_string")) {
            out_tensor(ctx, 0, TDM_STRING, 0);
        } else if (!strcmp(a->name, "value_floats") || !strcmp(a->name, "value_ints") ||
                   !strcmp(a->name, "value_strings")) {
            tdm_dtype dt = a->name[6] == 'f' ? TDM_FLOAT : a->name[6] == 'i' ? TDM_INT64 : TDM_STRING;
            o = out_tensor(ctx, 0, dt, 1);
            o->dims[0] = known((int64_t)a->n);
        } else {
            continue;
        }
        return TDM_OK;
    }
    return TDM_OK;
}

tdm_status op_infer_Range(op_infer_ctx *ctx)
{
    gr_type *o = out_tensor(ctx, 0, in_dtype(ctx, 0), 1);
    const tdm_tensor *s = in_value(ctx, 0), *l = in_value(ctx, 1), *d = in_value(ctx, 2);
    if (!s || !l || !d || s->count != 1 || l->count != 1 || d->count != 1)
        return TDM_OK;
    double n;
    if (dtype_is_float(s->dtype)) {
        double dv = tensor_get_f64(d, 0);
        if (dv == 0)
            return TDM_OK;
        n = ceil((tensor_get_f64(l, 0) - tensor_get_f64(s, 0)) / dv);
    } else {
        int64_t dv = tensor_get_i64(d, 0);
        if (dv == 0)
            return TDM_OK;
        n = ceil(((double)tensor_get_i64(l, 0) - (double)tensor_get_i64(s, 0)) / (double)dv);
    }
    if (n < 9e15)
        o->dims[0] = known(n > 0 ? (int64_t)n : 0);
    return TDM_OK;
}

tdm_status op_infer_EyeLike(op_infer_ctx *ctx)
{
    const gr_type *x = in_ranked(ctx, 0);
    tdm_dtype dt = (tdm_dtype)gr_attr_int(ctx->node, "dtype", in_dtype(ctx, 0));
    gr_type *o = out_tensor(ctx, 0, dt, 2);
    if (x && x->rank == 2) {
        o->dims[0] = x->dims[0];
        o->dims[1] = x->dims[1];
    }
    return TDM_OK;
}

tdm_status op_infer_Transpose(op_infer_ctx *ctx)
{
    const gr_type *x = in_ranked(ctx, 0);
    if (!x) {
        out_tensor(ctx, 0, in_dtype(ctx, 0), -1);
        return TDM_OK;
    }
    gr_type *o = out_tensor(ctx, 0, x->dtype, x->rank);
    const int64_t *p;
    int n = gr_attr_ints(ctx->node, "perm", &p);
    for (int d = 0; d < x->rank; d++) {
        int src = x->rank - 1 - d;
        if (n == x->rank) {
            int a = norm_axis(p[d], x->rank);
            if (a < 0)
                return TDM_OK;
            src = a;
        }
        o->dims[d] = x->dims[src];
    }
    return TDM_OK;
}

tdm_status op_infer_Concat(op_infer_ctx *ctx)
{
    const gr_type *x0 = NULL;
    for (int i = 0; i < ctx->n_in && !x0; i++)
        x0 = in_ranked(ctx, i);
    if (!x0) {
        out_tensor(ctx, 0, in_dtype(ctx, 0), -1);
        return TDM_OK;
    }
    gr_type *o = out_tensor(ctx, 0, x0->dtype, x0->rank);
    int axis = norm_axis(gr_attr_int(ctx->node, "axis", 0), x0->rank);
    if (axis < 0)
        return TDM_OK;
    int64_t sum = 0;
    for (int d = 0; d < x0->rank; d++)
        o->dims[d] = x0->dims[d];
    for (int i = 0; i < ctx->n_in; i++) {
        const gr_type *t = in_ranked(ctx, i);
        if (!t || t->rank != x0->rank) {
            sum = -1;
            continue;
        }
        for (int d = 0; d < t->rank; d++)
            if (d != axis && o->dims[d].v < 0 && t->dims[d].v >= 0)
                o->dims[d] = t->dims[d]; /* a known size beats a symbol */
        if (sum >= 0 && t->dims[axis].v >= 0)
            sum += t->dims[axis].v;
        else
            sum = -1;
    }
    o->dims[axis] = sum >= 0 ? known(sum) : (ctx->n_in == 1 ? x0->dims[axis] : UNK);
    return TDM_OK;
}

tdm_status op_infer_Split(op_infer_ctx *ctx)
{
    const gr_type *x = in_ranked(ctx, 0);
    for (int i = 0; i < ctx->n_out; i++)
        out_tensor(ctx, i, in_dtype(ctx, 0), x ? x->rank : -1);
    if (!x)
        return TDM_OK;
    int axis = norm_axis(gr_attr_int(ctx->node, "axis", 0), x->rank);
    int64_t split[64];
    int n = ctx->n_out <= 64 ? attr_or_input_ints(ctx, 13, "split", 1, split, 64) : -1;
    int given = ctx->version >= 13 ? (ctx->n_in > 1 && ctx->in[1] != NULL) : gr_attr_find(ctx->node, "split") != NULL;
    for (int i = 0; i < ctx->n_out; i++) {
        gr_type *o = &ctx->out[i];
        for (int d = 0; d < x->rank; d++)
            o->dims[d] = x->dims[d];
        if (axis < 0)
            continue;
        if (given)
            o->dims[axis] = n == ctx->n_out && split[i] >= 0 ? known(split[i]) : UNK;
        else if (x->dims[axis].v >= 0 && ctx->n_out > 0 && x->dims[axis].v % ctx->n_out == 0)
            o->dims[axis] = known(x->dims[axis].v / ctx->n_out);
        else if (x->dims[axis].v >= 0 && ctx->n_out > 0 && ctx->version >= 18) {
            /* num_outputs: ceil(len / n) each, the rest to the last ones */
            int64_t len = x->dims[axis].v, c = len / ctx->n_out + 1, before = c * i;
            o->dims[axis] = known(before >= len ? 0 : len - before < c ? len - before : c);
        }
        else
            o->dims[axis] = ctx->n_out == 1 ? x->dims[axis] : UNK;
    }
    return TDM_OK;
}

tdm_status op_infer_Slice(op_infer_ctx *ctx)
{
    const gr_type *x = in_ranked(ctx, 0);
    if (!x) {
        out_tensor(ctx, 0, in_dtype(ctx, 0), -1);
        return TDM_OK;
    }
    gr_type *o = out_tensor(ctx, 0, x->dtype, x->rank);
    int64_t st[TDM_MAX_RANK], en[TDM_MAX_RANK], ax[TDM_MAX_RANK], sp[TDM_MAX_RANK];
    int ns, ne, na, nsp = -1;
    int axes_given, steps_given = 0;
    if (ctx->version < 10) {
        ns = attr_or_input_ints(ctx, 10, "starts", 1, st, TDM_MAX_RANK);
        ne = attr_or_input_ints(ctx, 10, "ends", 2, en, TDM_MAX_RANK);
        na = attr_or_input_ints(ctx, 10, "axes", 3, ax, TDM_MAX_RANK);
        axes_given = gr_attr_find(ctx->node, "axes") != NULL;
    } else {
        ns = const_ints(ctx, 1, st, TDM_MAX_RANK);
        ne = const_ints(ctx, 2, en, TDM_MAX_RANK);
        na = const_ints(ctx, 3, ax, TDM_MAX_RANK);
        nsp = const_ints(ctx, 4, sp, TDM_MAX_RANK);
        axes_given = ctx->n_in > 3 && ctx->in[3] != NULL;
        steps_given = ctx->n_in > 4 && ctx->in[4] != NULL;
    }
    int touched[TDM_MAX_RANK] = {0};
    int exact = ns >= 0 && ne == ns && (!axes_given || na == ns) && (!steps_given || nsp == ns);
    if (axes_given && na >= 0) {
        for (int k = 0; k < na; k++) {
            int a = norm_axis(ax[k], x->rank);
            if (a < 0)
                return TDM_OK;
            touched[a] = 1;
        }
    } else if (!axes_given && ns >= 0) {
        for (int k = 0; k < ns && k < x->rank; k++)
            touched[k] = 1;
    } else {
        for (int d = 0; d < x->rank; d++)
            touched[d] = 1;
    }
    for (int d = 0; d < x->rank; d++)
        o->dims[d] = touched[d] ? UNK : x->dims[d];
    if (!exact)
        return TDM_OK;
    for (int k = 0; k < ns; k++) {
        int a = axes_given ? norm_axis(ax[k], x->rank) : k;
        if (a < 0 || x->dims[a].v < 0)
            continue;
        int64_t dim = x->dims[a].v, s = st[k], p = steps_given ? sp[k] : 1;
        if (p == 0)
            continue;
        int64_t n = op_tensor_slice(dim, &s, en[k], &p);
        o->dims[a] = n == dim && p == 1 ? x->dims[a] : known(n);
    }
    return TDM_OK;
}

tdm_status op_infer_Expand(op_infer_ctx *ctx)
{
    const gr_type *x = in_ranked(ctx, 0);
    int64_t shape[TDM_MAX_RANK];
    int n = const_ints(ctx, 1, shape, TDM_MAX_RANK);
    if (!x || n < 0) {
        int len = vec_len(ctx, 1);
        out_tensor(ctx, 0, in_dtype(ctx, 0), x && len >= 0 ? (x->rank > len ? x->rank : len) : -1);
        return TDM_OK;
    }
    int r = x->rank > n ? x->rank : n;
    gr_type *o = out_tensor(ctx, 0, x->dtype, r);
    for (int d = 0; d < r; d++) {
        int di = d - (r - x->rank), si = d - (r - n);
        gr_dim a = di >= 0 ? x->dims[di] : known(1);
        int64_t b = si >= 0 ? shape[si] : 1;
        if (b == 1)
            o->dims[d] = a;
        else if (a.v == 1 || a.v == b)
            o->dims[d] = known(b);
        else if (a.v < 0)
            o->dims[d] = known(b); /* the input's must be 1 or b */
        else
            o->dims[d] = UNK;
    }
    return TDM_OK;
}

tdm_status op_infer_Tile(op_infer_ctx *ctx)
{
    const gr_type *x = in_ranked(ctx, 0);
    if (!x) {
        out_tensor(ctx, 0, in_dtype(ctx, 0), -1);
        return TDM_OK;
    }
    gr_type *o = out_tensor(ctx, 0, x->dtype, x->rank);
    int64_t rep[TDM_MAX_RANK];
    int n = const_ints(ctx, 1, rep, TDM_MAX_RANK);
    if (n != x->rank)
        return TDM_OK;
    for (int d = 0; d < x->rank; d++) {
        int64_t v;
        if (rep[d] == 1)
            o->dims[d] = x->dims[d];
        else if (x->dims[d].v >= 0 && rep[d] >= 0 && !mem_mul_i64(x->dims[d].v, rep[d], &v))
            o->dims[d] = known(v);
    }
    return TDM_OK;
}

tdm_status op_infer_Pad(op_infer_ctx *ctx)
{
    const gr_type *x = in_ranked(ctx, 0);
    if (!x) {
        out_tensor(ctx, 0, in_dtype(ctx, 0), -1);
        return TDM_OK;
    }
    gr_type *o = out_tensor(ctx, 0, x->dtype, x->rank);
    int64_t pads[2 * TDM_MAX_RANK];
    int n = attr_or_input_ints(ctx, 11, "pads", 1, pads, 2 * TDM_MAX_RANK);
    if (ctx->version >= 18 && ctx->n_in > 3 && ctx->in[3]) {
        /* 'axes' (18): pads names only these axes */
        int64_t axes[TDM_MAX_RANK], part[2 * TDM_MAX_RANK];
        int na = attr_or_input_ints(ctx, 18, "axes", 3, axes, TDM_MAX_RANK);
        if (na < 0 || n != 2 * na)
            return TDM_OK;
        memcpy(part, pads, sizeof(int64_t) * (size_t)n);
        memset(pads, 0, sizeof pads);
        for (int k = 0; k < na; k++) {
            int a = norm_axis(axes[k], x->rank);
            if (a < 0)
                return TDM_OK;
            pads[a] = part[k];
            pads[a + x->rank] = part[k + na];
        }
        n = 2 * x->rank;
    }
    if (n != 2 * x->rank)
        return TDM_OK;
    for (int d = 0; d < x->rank; d++) {
        int64_t a = pads[d], b = pads[d + x->rank];
        if (a == 0 && b == 0)
            o->dims[d] = x->dims[d];
        else if (x->dims[d].v >= 0 && a > -(INT64_C(1) << 40) && a < (INT64_C(1) << 40) &&
                 b > -(INT64_C(1) << 40) && b < (INT64_C(1) << 40) && x->dims[d].v + a + b >= 0)
            o->dims[d] = known(x->dims[d].v + a + b);
    }
    return TDM_OK;
}

static tdm_status infer_d2s(op_infer_ctx *ctx, int to_space)
{
    const gr_type *x = in_ranked(ctx, 0);
    gr_type *o = out_tensor(ctx, 0, in_dtype(ctx, 0), 4);
    int64_t b = gr_attr_int(ctx->node, "blocksize", 0);
    if (!x || x->rank != 4 || b <= 0 || b > 65536)
        return TDM_OK;
    o->dims[0] = x->dims[0];
    const gr_dim *c = &x->dims[1], *h = &x->dims[2], *w = &x->dims[3];
    if (to_space) {
        o->dims[1] = c->v >= 0 ? known(c->v / (b * b)) : UNK;
        o->dims[2] = h->v >= 0 ? known(h->v * b) : UNK;
        o->dims[3] = w->v >= 0 ? known(w->v * b) : UNK;
    } else {
        o->dims[1] = c->v >= 0 ? known(c->v * b * b) : UNK;
        o->dims[2] = h->v >= 0 ? known(h->v / b) : UNK;
        o->dims[3] = w->v >= 0 ? known(w->v / b) : UNK;
    }
    return TDM_OK;
}

tdm_status op_infer_DepthToSpace(op_infer_ctx *ctx) { return infer_d2s(ctx, 1); }
tdm_status op_infer_SpaceToDepth(op_infer_ctx *ctx) { return infer_d2s(ctx, 0); }

tdm_status op_infer_ReverseSequence(op_infer_ctx *ctx) { return op_infer_same(ctx); }

tdm_status op_infer_Compress(op_infer_ctx *ctx)
{
    const gr_type *x = in_ranked(ctx, 0);
    const gr_attr *aa = gr_attr_find(ctx->node, "axis");
    if (!aa) {
        out_tensor(ctx, 0, in_dtype(ctx, 0), 1);
        return TDM_OK;
    }
    gr_type *o = out_tensor(ctx, 0, in_dtype(ctx, 0), x ? x->rank : -1);
    if (!x)
        return TDM_OK;
    int axis = norm_axis(aa->i, x->rank);
    for (int d = 0; d < x->rank; d++)
        o->dims[d] = d == axis ? UNK : x->dims[d];
    return TDM_OK;
}

tdm_status op_infer_Gather(op_infer_ctx *ctx)
{
    const gr_type *x = in_ranked(ctx, 0), *ind = in_ranked(ctx, 1);
    if (!x || !ind || x->rank < 1 || x->rank - 1 + ind->rank > TDM_MAX_RANK) {
        out_tensor(ctx, 0, in_dtype(ctx, 0), -1);
        return TDM_OK;
    }
    int axis = norm_axis(gr_attr_int(ctx->node, "axis", 0), x->rank);
    gr_type *o = out_tensor(ctx, 0, x->dtype, x->rank - 1 + ind->rank);
    if (axis < 0)
        return TDM_OK;
    int k = 0;
    for (int d = 0; d < axis; d++)
        o->dims[k++] = x->dims[d];
    for (int d = 0; d < ind->rank; d++)
        o->dims[k++] = ind->dims[d];
    for (int d = axis + 1; d < x->rank; d++)
        o->dims[k++] = x->dims[d];
    return TDM_OK;
}

tdm_status op_infer_GatherElements(op_infer_ctx *ctx)
{
    op_infer_copy(ctx, 0, 1);
    ctx->out[0].dtype = in_dtype(ctx, 0);
    return TDM_OK;
}

tdm_status op_infer_GatherND(op_infer_ctx *ctx)
{
    const gr_type *x = in_ranked(ctx, 0), *ind = in_ranked(ctx, 1);
    int64_t b = ctx->version >= 12 ? gr_attr_int(ctx->node, "batch_dims", 0) : 0;
    if (!x || !ind || ind->rank < 1 || ind->dims[ind->rank - 1].v < 0 || b < 0) {
        out_tensor(ctx, 0, in_dtype(ctx, 0), -1);
        return TDM_OK;
    }
    int64_t k = ind->dims[ind->rank - 1].v;
    int64_t r = ind->rank - 1 + x->rank - k - b;
    if (r < 0 || r > TDM_MAX_RANK || b + k > x->rank) {
        out_tensor(ctx, 0, in_dtype(ctx, 0), -1);
        return TDM_OK;
    }
    gr_type *o = out_tensor(ctx, 0, x->dtype, (int)r);
    int j = 0;
    for (int d = 0; d < ind->rank - 1; d++)
        o->dims[j++] = ind->dims[d];
    for (int d = (int)(b + k); d < x->rank; d++)
        o->dims[j++] = x->dims[d];
    return TDM_OK;
}

tdm_status op_infer_NonZero(op_infer_ctx *ctx)
{
    const gr_type *x = in_ranked(ctx, 0);
    gr_type *o = out_tensor(ctx, 0, TDM_INT64, 2);
    if (x)
        o->dims[0] = known(x->rank ? x->rank : 1);
    return TDM_OK;
}

tdm_status op_infer_OneHot(op_infer_ctx *ctx)
{
    const gr_type *ind = in_ranked(ctx, 0);
    tdm_dtype dt = in_dtype(ctx, 2);
    if (!ind || ind->rank + 1 > TDM_MAX_RANK) {
        out_tensor(ctx, 0, dt, -1);
        return TDM_OK;
    }
    int r = ind->rank + 1;
    gr_type *o = out_tensor(ctx, 0, dt, r);
    int axis = norm_axis(gr_attr_int(ctx->node, "axis", -1), r);
    if (axis < 0)
        return TDM_OK;
    const tdm_tensor *dv = in_value(ctx, 1);
    for (int d = 0, j = 0; d < r; d++) {
        if (d != axis) {
            o->dims[d] = ind->dims[j++];
        } else if (dv && dv->count == 1 && dv->dtype != TDM_STRING) {
            double v = tensor_get_f64(dv, 0);
            if (v >= 1 && v < 1e12)
                o->dims[d] = known((int64_t)v);
        }
    }
    return TDM_OK;
}

tdm_status op_infer_Unique(op_infer_ctx *ctx)
{
    const gr_type *x = in_ranked(ctx, 0);
    const gr_attr *aa = gr_attr_find(ctx->node, "axis");
    gr_type *o = out_tensor(ctx, 0, in_dtype(ctx, 0), aa ? (x ? x->rank : -1) : 1);
    int axis = aa && x ? norm_axis(aa->i, x->rank) : -1;
    if (aa && x)
        for (int d = 0; d < x->rank; d++)
            o->dims[d] = d == axis ? UNK : x->dims[d];
    for (int i = 1; i < ctx->n_out && i < 4; i++)
        out_tensor(ctx, i, TDM_INT64, 1);
    if (ctx->n_out > 2 && x) {
        if (aa)
            ctx->out[2].dims[0] = axis >= 0 ? x->dims[axis] : UNK;
        else {
            int64_t p = dims_product(x, 0, x->rank);
            ctx->out[2].dims[0] = x->rank == 1 ? x->dims[0] : p >= 0 ? known(p) : UNK;
        }
    }
    return TDM_OK;
}

/* Resize / Upsample output dims from constant sizes or scales. */
static tdm_status infer_resize(op_infer_ctx *ctx, int scales_in, int sizes_in, const float *attr_scales, int n_attr)
{
    const gr_type *x = in_ranked(ctx, 0);
    if (!x) {
        out_tensor(ctx, 0, in_dtype(ctx, 0), -1);
        return TDM_OK;
    }
    gr_type *o = out_tensor(ctx, 0, x->dtype, x->rank);
    int64_t sizes[TDM_MAX_RANK];
    int n = sizes_in >= 0 ? const_ints(ctx, sizes_in, sizes, TDM_MAX_RANK) : -1;
    if (n == x->rank && n > 0) {
        for (int d = 0; d < n; d++)
            o->dims[d] = sizes[d] < 0 ? UNK : sizes[d] == x->dims[d].v ? x->dims[d] : known(sizes[d]);
        return TDM_OK;
    }
    double sc[TDM_MAX_RANK];
    int ns = -1;
    if (attr_scales) {
        ns = n_attr;
        for (int d = 0; d < ns && d < TDM_MAX_RANK; d++)
            sc[d] = attr_scales[d];
    } else if (scales_in >= 0) {
        const tdm_tensor *v = in_value(ctx, scales_in);
        if (v && dtype_is_float(v->dtype) && v->count <= TDM_MAX_RANK) {
            ns = (int)v->count;
            for (int d = 0; d < ns; d++)
                sc[d] = tensor_get_f64(v, (size_t)d);
        }
    }
    if (ns != x->rank)
        return TDM_OK;
    for (int d = 0; d < ns; d++) {
        if (sc[d] == 1.0)
            o->dims[d] = x->dims[d];
        else if (x->dims[d].v >= 0 && sc[d] > 0 && sc[d] * (double)x->dims[d].v < 9e15)
            o->dims[d] = known((int64_t)(sc[d] * (double)x->dims[d].v));
    }
    return TDM_OK;
}

tdm_status op_infer_Resize(op_infer_ctx *ctx)
{
    if (ctx->version < 11)
        return infer_resize(ctx, 1, -1, NULL, 0);
    const int64_t *axes;
    int na = ctx->version >= 18 ? gr_attr_ints(ctx->node, "axes", &axes) : -1;
    const char *pol = ctx->version >= 18 ? gr_attr_str(ctx->node, "keep_aspect_ratio_policy", "stretch") : "stretch";
    const gr_type *x = in_ranked(ctx, 0);
    if (x && (na >= 0 || strcmp(pol, "stretch") != 0)) {
        /* 18: scales/sizes name only some axes, or one scale keeps the
         * aspect ratio: the axes not named keep their size, the others
         * are left to the run */
        gr_type *o = out_tensor(ctx, 0, x->dtype, x->rank);
        for (int d = 0; d < x->rank; d++) {
            int named = na < 0;
            for (int k = 0; k < na; k++)
                named |= norm_axis(axes[k], x->rank) == d;
            o->dims[d] = named ? UNK : x->dims[d];
        }
        return TDM_OK;
    }
    return infer_resize(ctx, 2, 3, NULL, 0);
}

tdm_status op_infer_Upsample(op_infer_ctx *ctx)
{
    if (ctx->version < 9) {
        const float *f;
        int n = gr_attr_floats(ctx->node, "scales", &f);
        return infer_resize(ctx, -1, -1, n >= 0 ? f : NULL, n);
    }
    return infer_resize(ctx, 1, -1, NULL, 0);
}

/* CenterCropPad: the input's shape with the axes (attribute, default all)
 * set to the constant shape input's values. */
tdm_status op_infer_CenterCropPad(op_infer_ctx *ctx)
{
    const gr_type *x = in_ranked(ctx, 0);
    gr_type *o = out_tensor(ctx, 0, in_dtype(ctx, 0), x ? x->rank : -1);
    if (!x)
        return TDM_OK;
    memcpy(o->dims, x->dims, sizeof x->dims[0] * (size_t)x->rank);
    const int64_t *av = NULL;
    int na = gr_attr_ints(ctx->node, "axes", &av), r = x->rank;
    if (na < 0)
        na = r;
    if (na > r)
        return TDM_OK;
    int64_t shape[TDM_MAX_RANK];
    int ns = const_ints(ctx, 1, shape, TDM_MAX_RANK);
    for (int k = 0; k < na; k++) {
        int64_t a = av ? av[k] : k;
        if (a < -r || a >= r)
            return TDM_OK; /* the run hook reports it */
        a = a < 0 ? a + r : a;
        o->dims[a] = ns == na && shape[k] >= 0 ? known(shape[k]) : UNK;
    }
    return TDM_OK;
}
