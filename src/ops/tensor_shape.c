/* Shape bookkeeping and constant ops: Identity, Reshape, Flatten, Squeeze,
 * Unsqueeze, Shape, Size, ConstantOfShape, Constant, Range, EyeLike. */
#include "ops/tensor.h"
#include "core/mem.h"

#include <math.h>
#include <string.h>

tdm_status op_run_Identity(op_ctx *ctx)
{
    const tdm_tensor *x = op_tensor_opt(ctx, 0);
    if (!x) {
        /* An empty optional stays empty. */
        tensor_reset(ctx->out[0]);
        ctx->out[0]->kind = TDM_KIND_NONE;
        if (ctx->n_in > 0 && ctx->in[0])
            ctx->out[0]->dtype = ctx->in[0]->dtype;
        return TDM_OK;
    }
    return op_tensor_clone_into(ctx, ctx->out[0], x);
}

tdm_status op_run_Reshape(op_ctx *ctx)
{
    const tdm_tensor *x;
    tdm_status st = op_tensor_in(ctx, 0, "data", &x);
    if (st)
        return st;
    int64_t *shape = NULL;
    size_t n = 0;
    if (ctx->version < 5) {
        const int64_t *v;
        int k = gr_attr_ints(ctx->node, "shape", &v);
        if (k < 0)
            return op_fail(ctx, TDM_E_MODEL, "attribute 'shape' is missing");
        if (!(shape = mem_calloc((size_t)k + 1, sizeof *shape)))
            return op_fail(ctx, TDM_E_NOMEM, "out of memory");
        memcpy(shape, v, sizeof *shape * (size_t)k);
        n = (size_t)k;
    } else if ((st = op_in_ints(ctx, 1, &shape, &n)) != TDM_OK) {
        return st;
    }
    int allowzero = ctx->version >= 14 ? (int)gr_attr_int(ctx->node, "allowzero", 0) : 0;
    int64_t dims[TDM_MAX_RANK];
    int neg = -1;
    size_t known = 1;
    if (n > TDM_MAX_RANK) {
        mem_free(shape);
        return op_fail(ctx, TDM_E_UNSUPPORTED, "input 'shape' has %zu entries, more than the rank limit %d", n,
                       TDM_MAX_RANK);
    }
    for (size_t i = 0; i < n; i++) {
        int64_t v = shape[i];
        if (v == 0 && !allowzero) {
            if ((int)i >= x->rank) {
                mem_free(shape);
                return op_fail(ctx, TDM_E_RUNTIME, "input 'shape' has 0 at index %zu beyond the data's rank %d",
                               i, x->rank);
            }
            v = x->dims[i];
        }
        if (v == -1) {
            if (neg >= 0) {
                mem_free(shape);
                return op_fail(ctx, TDM_E_RUNTIME, "input 'shape' has more than one -1");
            }
            neg = (int)i;
            dims[i] = -1;
            continue;
        }
        if (v < 0) {
            mem_free(shape);
            return op_fail(ctx, TDM_E_RUNTIME, "input 'shape' has the invalid dimension %lld", (long long)v);
        }
        dims[i] = v;
        if (mem_mul(known, (size_t)v, &known)) {
            mem_free(shape);
            return op_fail(ctx, TDM_E_RUNTIME, "input 'shape' describes too many elements");
        }
    }
    mem_free(shape);
    if (neg >= 0) {
        if (known == 0 || x->count % known)
            return op_fail(ctx, TDM_E_RUNTIME, "cannot infer the -1 dimension: %zu elements into blocks of %zu",
                           x->count, known);
        dims[neg] = (int64_t)(x->count / known);
        known = x->count;
    }
    if (known != x->count) {
        char a[128], b[128];
        return op_fail(ctx, TDM_E_RUNTIME, "cannot reshape %s (%zu elements) to %s", shape_str(x->rank, x->dims, a, sizeof a),
                       x->count, shape_str((int)n, dims, b, sizeof b));
    }
    return op_tensor_reshaped(ctx, 0, x, (int)n, dims);
}

tdm_status op_run_Flatten(op_ctx *ctx)
{
    const tdm_tensor *x;
    tdm_status st = op_tensor_in(ctx, 0, "input", &x);
    if (st)
        return st;
    int64_t axis = gr_attr_int(ctx->node, "axis", 1);
    if (axis < 0)
        axis += x->rank;
    if (axis < 0 || axis > x->rank)
        return op_fail(ctx, TDM_E_MODEL, "attribute 'axis' %lld is out of range for rank %d",
                       (long long)gr_attr_int(ctx->node, "axis", 1), x->rank);
    int64_t dims[2] = {1, 1};
    for (int d = 0; d < x->rank; d++)
        dims[d < axis ? 0 : 1] *= x->dims[d]; /* bounded by count, which did not overflow */
    return op_tensor_reshaped(ctx, 0, x, 2, dims);
}

/* The axes of Squeeze/Unsqueeze: attribute before opset 13, input after.
 * *n = -1 when absent. */
static tdm_status axes_of(op_ctx *ctx, int64_t **axes, int64_t *n)
{
    if (ctx->version >= 13)
        return op_tensor_opt_ints(ctx, 1, axes, n);
    const int64_t *v;
    int k = gr_attr_ints(ctx->node, "axes", &v);
    *axes = NULL;
    *n = k;
    if (k < 0)
        return TDM_OK;
    if (!(*axes = mem_calloc((size_t)k + 1, sizeof **axes)))
        return op_fail(ctx, TDM_E_NOMEM, "out of memory");
    memcpy(*axes, v, sizeof **axes * (size_t)k);
    return TDM_OK;
}

tdm_status op_run_Squeeze(op_ctx *ctx)
{
    const tdm_tensor *x;
    tdm_status st = op_tensor_in(ctx, 0, "data", &x);
    if (st)
        return st;
    int64_t *axes;
    int64_t n;
    if ((st = axes_of(ctx, &axes, &n)) != TDM_OK)
        return st;
    int drop[TDM_MAX_RANK] = {0};
    for (int64_t k = 0; k < n; k++) {
        int a;
        if ((st = op_axis(ctx, axes[k], x->rank, "axes entry", &a)) != TDM_OK)
            goto done;
        if (x->dims[a] != 1) {
            st = op_fail(ctx, TDM_E_RUNTIME, "cannot squeeze axis %d of size %lld", a, (long long)x->dims[a]);
            goto done;
        }
        drop[a] = 1;
    }
    if (n < 0)
        for (int d = 0; d < x->rank; d++)
            drop[d] = x->dims[d] == 1;
    int64_t dims[TDM_MAX_RANK];
    int r = 0;
    for (int d = 0; d < x->rank; d++)
        if (!drop[d])
            dims[r++] = x->dims[d];
    st = op_tensor_reshaped(ctx, 0, x, r, dims);
done:
    mem_free(axes);
    return st;
}

tdm_status op_run_Unsqueeze(op_ctx *ctx)
{
    const tdm_tensor *x;
    tdm_status st = op_tensor_in(ctx, 0, "data", &x);
    if (st)
        return st;
    int64_t *axes;
    int64_t n;
    if ((st = axes_of(ctx, &axes, &n)) != TDM_OK)
        return st;
    if (n < 0) {
        return op_fail(ctx, TDM_E_MODEL, ctx->version >= 13 ? "input 'axes' is missing" : "attribute 'axes' is missing");
    }
    if (x->rank + n > TDM_MAX_RANK) {
        mem_free(axes);
        return op_fail(ctx, TDM_E_UNSUPPORTED, "the output rank %lld exceeds the limit %d", (long long)(x->rank + n),
                       TDM_MAX_RANK);
    }
    int r = x->rank + (int)n;
    int ins[TDM_MAX_RANK] = {0};
    for (int64_t k = 0; k < n; k++) {
        int a;
        if ((st = op_axis(ctx, axes[k], r, "axes entry", &a)) != TDM_OK)
            goto done;
        if (ins[a]) {
            st = op_fail(ctx, TDM_E_RUNTIME, "axes has axis %d twice", a);
            goto done;
        }
        ins[a] = 1;
    }
    int64_t dims[TDM_MAX_RANK];
    for (int d = 0, j = 0; d < r; d++)
        dims[d] = ins[d] ? 1 : x->dims[j++];
    st = op_tensor_reshaped(ctx, 0, x, r, dims);
done:
    mem_free(axes);
    return st;
}

tdm_status op_run_Shape(op_ctx *ctx)
{
    const tdm_tensor *x;
    tdm_status st = op_tensor_in(ctx, 0, "data", &x);
    if (st)
        return st;
    int64_t start, end;
    op_tensor_shape_range(ctx->node, ctx->version, x->rank, &start, &end);
    int64_t n = end > start ? end - start : 0;
    if ((st = op_out(ctx, 0, TDM_INT64, 1, &n)) != TDM_OK)
        return st;
    int64_t *o = ctx->out[0]->data;
    for (int64_t k = 0; k < n; k++)
        o[k] = x->dims[start + k];
    return TDM_OK;
}

tdm_status op_run_Size(op_ctx *ctx)
{
    const tdm_tensor *x;
    tdm_status st = op_tensor_in(ctx, 0, "data", &x);
    if (st)
        return st;
    if ((st = op_out(ctx, 0, TDM_INT64, 0, NULL)) != TDM_OK)
        return st;
    *(int64_t *)ctx->out[0]->data = (int64_t)x->count;
    return TDM_OK;
}

/* Fills all n elements of t (offset 0) with the single element of v. */
static tdm_status fill_with(op_ctx *ctx, tdm_tensor *t, const tdm_tensor *v)
{
    if (t->dtype == TDM_STRING) {
        for (size_t i = 0; i < t->count; i++) {
            tdm_status st = op_tensor_copy(ctx, t, i, v, 0, 1);
            if (st)
                return st;
        }
        return TDM_OK;
    }
    size_t es = tdm_dtype_size(t->dtype);
    char *d = t->data;
    if (es == 4) {
        uint32_t x;
        memcpy(&x, v->data, 4);
        for (size_t i = 0; i < t->count; i++)
            ((uint32_t *)(void *)d)[i] = x;
    } else {
        for (size_t i = 0; i < t->count; i++)
            memcpy(d + i * es, v->data, es);
    }
    return TDM_OK;
}

tdm_status op_run_ConstantOfShape(op_ctx *ctx)
{
    int64_t *shape;
    size_t n;
    tdm_status st = op_in_ints(ctx, 0, &shape, &n);
    if (st)
        return st;
    if (n > TDM_MAX_RANK) {
        mem_free(shape);
        return op_fail(ctx, TDM_E_UNSUPPORTED, "input 'input' asks for rank %zu, beyond the limit %d", n,
                       TDM_MAX_RANK);
    }
    for (size_t i = 0; i < n; i++) {
        if (shape[i] < 0) {
            long long v = (long long)shape[i];
            mem_free(shape);
            return op_fail(ctx, TDM_E_RUNTIME, "input 'input' has the negative dimension %lld", v);
        }
    }
    const gr_attr *a = gr_attr_find(ctx->node, "value");
    const tdm_tensor *v = a && a->t ? a->t : NULL;
    if (v && v->count != 1) {
        mem_free(shape);
        return op_fail(ctx, TDM_E_MODEL, "attribute 'value' must hold one element, not %zu", v->count);
    }
    st = op_out(ctx, 0, v ? v->dtype : TDM_FLOAT, (int)n, shape);
    mem_free(shape);
    if (st)
        return st;
    if (!v) {
        memset(ctx->out[0]->data, 0, ctx->out[0]->nbytes);
        return TDM_OK;
    }
    return fill_with(ctx, ctx->out[0], v);
}

tdm_status op_run_Constant(op_ctx *ctx)
{
    const gr_node *nd = ctx->node;
    for (int k = 0; k < nd->n_attrs; k++) {
        const gr_attr *a = &nd->attrs[k];
        tdm_status st;
        int64_t n = (int64_t)a->n;
        if (!strcmp(a->name, "value") || !strcmp(a->name, "sparse_value")) {
            if (!a->t)
                return op_fail(ctx, TDM_E_MODEL, "attribute '%s' holds no tensor", a->name);
            return op_tensor_clone_into(ctx, ctx->out[0], a->t);
        } else if (!strcmp(a->name, "value_float")) {
            if ((st = op_out(ctx, 0, TDM_FLOAT, 0, NULL)) != TDM_OK)
                return st;
            *(float *)ctx->out[0]->data = a->f;
            return TDM_OK;
        } else if (!strcmp(a->name, "value_floats")) {
            if ((st = op_out(ctx, 0, TDM_FLOAT, 1, &n)) != TDM_OK)
                return st;
            if (n)
                memcpy(ctx->out[0]->data, a->floats, a->n * sizeof(float));
            return TDM_OK;
        } else if (!strcmp(a->name, "value_int")) {
            if ((st = op_out(ctx, 0, TDM_INT64, 0, NULL)) != TDM_OK)
                return st;
            *(int64_t *)ctx->out[0]->data = a->i;
            return TDM_OK;
        } else if (!strcmp(a->name, "value_ints")) {
            if ((st = op_out(ctx, 0, TDM_INT64, 1, &n)) != TDM_OK)
                return st;
            if (n)
                memcpy(ctx->out[0]->data, a->ints, a->n * sizeof(int64_t));
            return TDM_OK;
        } else if (!strcmp(a->name, "value_string")) {
            if ((st = op_out(ctx, 0, TDM_STRING, 0, NULL)) != TDM_OK)
                return st;
            char **s = ctx->out[0]->data;
            if (!(s[0] = mem_strndup(a->s ? a->s : "", a->s ? a->s_len : 0)))
                return op_fail(ctx, TDM_E_NOMEM, "out of memory");
            return TDM_OK;
        } else if (!strcmp(a->name, "value_strings")) {
            if ((st = op_out(ctx, 0, TDM_STRING, 1, &n)) != TDM_OK)
                return st;
            char **s = ctx->out[0]->data;
            for (size_t i = 0; i < a->n; i++) {
                size_t len = a->string_lens ? a->string_lens[i] : strlen(a->strings[i]);
                if (!(s[i] = mem_strndup(a->strings[i], len)))
                    return op_fail(ctx, TDM_E_NOMEM, "out of memory");
            }
            return TDM_OK;
        }
    }
    return op_fail(ctx, TDM_E_MODEL, "no value attribute (value, value_float(s), value_int(s), value_string(s), sparse_value)");
}

/* Range: output[i] = start + i * delta, n = max(ceil((limit - start) / delta), 0). */
#define RANGE_LOOP(T)                                                                                        \
    do {                                                                                                     \
        T s_ = *(const T *)s->data, d_ = *(const T *)dl->data;                                               \
        T *o_ = ctx->out[0]->data;                                                                           \
        for (int64_t i = 0; i < n; i++)                                                                      \
            o_[i] = (T)(s_ + (T)i * d_);                                                                     \
    } while (0)

tdm_status op_run_Range(op_ctx *ctx)
{
    const tdm_tensor *s, *l, *dl;
    tdm_status st;
    if ((st = op_tensor_in(ctx, 0, "start", &s)) || (st = op_tensor_in(ctx, 1, "limit", &l)) ||
        (st = op_tensor_in(ctx, 2, "delta", &dl)))
        return st;
    if (s->count != 1 || l->count != 1 || dl->count != 1)
        return op_fail(ctx, TDM_E_RUNTIME, "inputs 'start', 'limit' and 'delta' must be scalars");
    if (s->dtype != l->dtype || s->dtype != dl->dtype)
        return op_fail(ctx, TDM_E_RUNTIME, "inputs 'start', 'limit' and 'delta' must have one element type");
    int64_t n;
    if (dtype_is_float(s->dtype)) {
        double a = tensor_get_f64(s, 0), b = tensor_get_f64(l, 0), d = tensor_get_f64(dl, 0);
        if (d == 0)
            return op_fail(ctx, TDM_E_RUNTIME, "input 'delta' is zero");
        double c = ceil((b - a) / d);
        if (!(c < 9e15))
            return op_fail(ctx, TDM_E_RUNTIME, "Range would produce too many elements");
        n = c > 0 ? (int64_t)c : 0;
    } else {
        int64_t a = tensor_get_i64(s, 0), b = tensor_get_i64(l, 0), d = tensor_get_i64(dl, 0);
        if (d == 0)
            return op_fail(ctx, TDM_E_RUNTIME, "input 'delta' is zero");
        double c = ceil(((double)b - (double)a) / (double)d);
        if (!(c < 9e15))
            return op_fail(ctx, TDM_E_RUNTIME, "Range would produce too many elements");
        n = c > 0 ? (int64_t)c : 0;
    }
    if ((st = op_out(ctx, 0, s->dtype, 1, &n)) != TDM_OK)
        return st;
    switch (s->dtype) {
    case TDM_FLOAT: RANGE_LOOP(float); break;
    case TDM_DOUBLE: RANGE_LOOP(double); break;
    case TDM_INT16: RANGE_LOOP(int16_t); break;
    case TDM_INT32: RANGE_LOOP(int32_t); break;
    case TDM_INT64: RANGE_LOOP(int64_t); break;
    default:
        for (int64_t i = 0; i < n; i++)
            tensor_set_f64(ctx->out[0], (size_t)i, tensor_get_f64(s, 0) + (double)i * tensor_get_f64(dl, 0));
        break;
    }
    return TDM_OK;
}

tdm_status op_run_EyeLike(op_ctx *ctx)
{
    const tdm_tensor *x;
    tdm_status st = op_tensor_in(ctx, 0, "input", &x);
    if (st)
        return st;
    if (x->rank != 2)
        return op_fail(ctx, TDM_E_RUNTIME, "input must be 2-D, not rank %d", x->rank);
    int64_t dt = gr_attr_int(ctx->node, "dtype", x->dtype);
    if (!dtype_valid((int)dt) || dt == TDM_STRING || dt == TDM_COMPLEX64 || dt == TDM_COMPLEX128 || dt > TDM_BFLOAT16)
        return op_fail(ctx, TDM_E_MODEL, "attribute 'dtype' %lld is not a supported element type", (long long)dt);
    int64_t k = gr_attr_int(ctx->node, "k", 0), lim = x->dims[0] + x->dims[1] + 1;
    k = k > lim ? lim : k < -lim ? -lim : k; /* so that i + k cannot overflow */
    if ((st = op_out(ctx, 0, (tdm_dtype)dt, 2, x->dims)) != TDM_OK)
        return st;
    tdm_tensor *o = ctx->out[0];
    memset(o->data, 0, o->nbytes);
    for (int64_t i = 0; i < x->dims[0]; i++) {
        int64_t j = i + k;
        if (j >= 0 && j < x->dims[1])
            tensor_set_f64(o, (size_t)(i * x->dims[1] + j), 1.0);
    }
    return TDM_OK;
}
