/* Helpers shared by the tensor op files: input access, element copies and
 * the generic offset-table gather every data-movement op reduces to. */
#include "ops/tensor.h"
#include "core/mem.h"

#include <string.h>

size_t op_tensor_esize(tdm_dtype dt) { return dt == TDM_STRING ? sizeof(char *) : tdm_dtype_size(dt); }

const tdm_tensor *op_tensor_opt(const op_ctx *ctx, int i)
{
    if (i < 0 || i >= ctx->n_in || !ctx->in[i] || ctx->in[i]->kind == TDM_KIND_NONE)
        return NULL;
    return ctx->in[i];
}

tdm_status op_tensor_in(op_ctx *ctx, int i, const char *what, const tdm_tensor **out)
{
    const tdm_tensor *t = op_tensor_opt(ctx, i);
    *out = NULL;
    if (!t)
        return op_fail(ctx, TDM_E_MODEL, "input %d (%s) is missing", i, what);
    if (t->kind != TDM_KIND_TENSOR)
        return op_fail(ctx, TDM_E_RUNTIME, "input %d (%s) must be a tensor, not a sequence", i, what);
    *out = t;
    return TDM_OK;
}

tdm_status op_tensor_opt_ints(op_ctx *ctx, int i, int64_t **vals, int64_t *n)
{
    *vals = NULL;
    *n = -1;
    if (!op_tensor_opt(ctx, i))
        return TDM_OK;
    size_t cnt;
    tdm_status st = op_in_ints(ctx, i, vals, &cnt);
    if (st)
        return st;
    *n = (int64_t)cnt;
    return TDM_OK;
}

tdm_status op_tensor_copy(op_ctx *ctx, tdm_tensor *dst, size_t doff, const tdm_tensor *src, size_t soff,
                          size_t n)
{
    if (!n)
        return TDM_OK;
    if (src->dtype == TDM_STRING) {
        char **d = (char **)dst->data + doff;
        char *const *s = (char *const *)src->data + soff;
        for (size_t k = 0; k < n; k++) {
            if (!s[k]) {
                d[k] = NULL;
                continue;
            }
            if (!(d[k] = mem_strdup(s[k])))
                return op_fail(ctx, TDM_E_NOMEM, "out of memory copying strings");
        }
        return TDM_OK;
    }
    size_t es = tdm_dtype_size(src->dtype);
    memcpy((char *)dst->data + doff * es, (const char *)src->data + soff * es, n * es);
    return TDM_OK;
}

int64_t op_tensor_slice(int64_t dim, int64_t *start, int64_t end, int64_t *step)
{
    int64_t s = *start, e = end, p = *step, n;
    if (p < -INT64_MAX)
        p = -INT64_MAX; /* same slice, and -p stays representable */
    if (s < 0)
        s = s < -dim ? 0 : s + dim; /* INT64_MIN-safe: compare before adding */
    if (e < 0)
        e = e < -dim ? -1 : e + dim;
    if (p > 0) {
        s = s < 0 ? 0 : s > dim ? dim : s;
        e = e < 0 ? 0 : e > dim ? dim : e;
        n = e > s ? (e - s - 1) / p + 1 : 0;
    } else {
        s = s < 0 ? 0 : s > dim - 1 ? dim - 1 : s;
        e = e < -1 ? -1 : e > dim - 1 ? dim - 1 : e;
        n = s > e ? (s - e - 1) / (-p) + 1 : 0;
    }
    *start = s;
    *step = p;
    return n;
}

void op_tensor_shape_range(const gr_node *node, int version, int rank, int64_t *start, int64_t *end)
{
    int64_t s = 0, e = rank;
    if (version >= 15) {
        s = gr_attr_int(node, "start", 0);
        e = gr_attr_int(node, "end", rank);
        if (s < 0)
            s += rank;
        if (e < 0)
            e += rank;
        s = s < 0 ? 0 : s > rank ? rank : s;
        e = e < 0 ? 0 : e > rank ? rank : e;
    }
    *start = s;
    *end = e;
}

tdm_status op_tensor_clone_into(op_ctx *ctx, tdm_tensor *dst, const tdm_tensor *src)
{
    tdm_tensor *c;
    tdm_status st = tensor_clone(ctx->err, src, &c);
    if (st)
        return st;
    tensor_reset(dst);
    *dst = *c;
    memset(c, 0, sizeof *c);
    tdm_tensor_destroy(c);
    return TDM_OK;
}

tdm_status op_tensor_concat(op_ctx *ctx, const tdm_tensor *const *items, size_t n, int axis, tdm_tensor *dst)
{
    if (n == 0)
        return op_fail(ctx, TDM_E_RUNTIME, "nothing to concatenate");
    const tdm_tensor *f = items[0];
    if (axis < 0 || axis >= f->rank)
        return op_fail(ctx, TDM_E_RUNTIME, "axis %d is out of range for rank %d", axis, f->rank);
    int64_t dims[TDM_MAX_RANK];
    memcpy(dims, f->dims, sizeof dims[0] * (size_t)f->rank);
    dims[axis] = 0;
    for (size_t k = 0; k < n; k++) {
        const tdm_tensor *t = items[k];
        if (t->kind != TDM_KIND_TENSOR)
            return op_fail(ctx, TDM_E_RUNTIME, "input %zu must be a tensor, not a sequence", k);
        if (t->dtype != f->dtype)
            return op_fail(ctx, TDM_E_RUNTIME, "input %zu is %s, input 0 %s", k, tdm_dtype_name(t->dtype),
                           tdm_dtype_name(f->dtype));
        if (t->rank != f->rank)
            return op_fail(ctx, TDM_E_RUNTIME, "input %zu has rank %d, input 0 rank %d", k, t->rank, f->rank);
        for (int d = 0; d < t->rank; d++)
            if (d != axis && t->dims[d] != f->dims[d])
                return op_fail(ctx, TDM_E_RUNTIME, "input %zu has %lld along dimension %d, input 0 has %lld", k,
                               (long long)t->dims[d], d, (long long)f->dims[d]);
        dims[axis] += t->dims[axis]; /* bounded: all inputs exist in memory */
    }
    tdm_status st = tensor_alloc(ctx->err, dst, f->dtype, f->rank, dims);
    if (st)
        return st;
    size_t outer = 1, inner = 1;
    for (int d = 0; d < axis; d++)
        outer *= (size_t)dims[d];
    for (int d = axis + 1; d < f->rank; d++)
        inner *= (size_t)dims[d];
    size_t orow = (size_t)dims[axis] * inner, off = 0;
    for (size_t k = 0; k < n; k++) {
        size_t row = (size_t)items[k]->dims[axis] * inner;
        for (size_t o = 0; o < outer; o++)
            if ((st = op_tensor_copy(ctx, dst, o * orow + off, items[k], o * row, row)) != TDM_OK)
                return st;
        off += row;
    }
    return TDM_OK;
}

tdm_status op_tensor_reshaped(op_ctx *ctx, int i, const tdm_tensor *src, int rank, const int64_t *dims)
{
    size_t count;
    if (shape_count(rank, dims, &count) || count != src->count)
        return op_fail(ctx, TDM_E_INTERNAL, "reshape to a different element count");
    tdm_status st = op_out(ctx, i, src->dtype, rank, dims);
    if (st)
        return st;
    return op_tensor_copy(ctx, ctx->out[i], 0, src, 0, src->count);
}

int64_t **op_tensor_offs_new(int rank, const int64_t *dims)
{
    size_t total = 0, bytes;
    for (int d = 0; d < rank; d++) {
        if (dims[d] < 0 || mem_add(total, (size_t)dims[d], &total))
            return NULL;
    }
    if (mem_mul(total + 1, sizeof(int64_t), &bytes) ||
        mem_add(bytes, sizeof(int64_t *) * (size_t)(rank + 1), &bytes))
        return NULL;
    int64_t **p = mem_calloc(1, bytes);
    if (!p)
        return NULL;
    int64_t *v = (int64_t *)(void *)(p + rank + 1);
    for (int d = 0; d < rank; d++) {
        p[d] = v;
        v += dims[d];
    }
    return p;
}

/* One inner row: n elements, source base pointer s, per-element offsets. */
#define GM_ROW(T)                                                                                            \
    do {                                                                                                     \
        T *d_ = (T *)dst;                                                                                    \
        const T *s_ = (const T *)src->data + base;                                                           \
        T f_;                                                                                                \
        memset(&f_, 0, sizeof f_);                                                                           \
        if (fill)                                                                                            \
            memcpy(&f_, fill, sizeof f_);                                                                    \
        if (bad) {                                                                                           \
            for (size_t j = 0; j < n; j++)                                                                   \
                d_[j] = f_;                                                                                  \
        } else if (dense) {                                                                                  \
            memcpy(d_, s_ + last[0], n * sizeof(T));                                                         \
        } else {                                                                                             \
            for (size_t j = 0; j < n; j++) {                                                                 \
                int64_t k_ = last[j];                                                                        \
                d_[j] = k_ < 0 ? f_ : s_[k_];                                                                \
            }                                                                                                \
        }                                                                                                    \
    } while (0)

tdm_status op_tensor_gather_map(op_ctx *ctx, tdm_tensor *out, const tdm_tensor *src, int64_t *const *offs,
                                const void *fill)
{
    int r = out->rank;
    if (out->count == 0)
        return TDM_OK;
    if (r == 0) {
        if (src->count == 0)
            return op_fail(ctx, TDM_E_INTERNAL, "gather from an empty tensor");
        return op_tensor_copy(ctx, out, 0, src, 0, 1);
    }
    size_t es = op_tensor_esize(src->dtype);
    size_t n = (size_t)out->dims[r - 1];
    const int64_t *last = offs[r - 1];
    /* A row whose offsets are consecutive is one memcpy. */
    int dense = 1;
    for (size_t j = 0; j < n; j++)
        if (last[j] != last[0] + (int64_t)j || last[j] < 0)
            dense = 0;
    size_t nrows = out->count / n;
    int64_t idx[TDM_MAX_RANK] = {0};
    int64_t part[TDM_MAX_RANK + 1]; /* part[d]: sum of the terms of dims < d (or -1: fill) */
    part[0] = 0;
    int from = 0; /* lowest dim whose index changed */
    char *dst = out->data;
    for (size_t row = 0; row < nrows; row++, dst += n * es) {
        for (int d = from; d < r - 1; d++) {
            int64_t t = offs[d][idx[d]];
            part[d + 1] = part[d] < 0 || t < 0 ? -1 : part[d] + t;
        }
        int64_t base = part[r - 1];
        int bad = base < 0;
        if (bad)
            base = 0;
        if (src->dtype == TDM_STRING) {
            char **d_ = (char **)dst;
            char *const *s_ = (char *const *)src->data + base;
            const char *f_ = fill ? *(const char *const *)fill : NULL;
            for (size_t j = 0; j < n; j++) {
                const char *v = bad || last[j] < 0 ? f_ : s_[last[j]];
                d_[j] = NULL;
                if (v && !(d_[j] = mem_strdup(v)))
                    return op_fail(ctx, TDM_E_NOMEM, "out of memory copying strings");
            }
        } else {
            switch (es) {
            case 1: GM_ROW(uint8_t); break;
            case 2: GM_ROW(uint16_t); break;
            case 4: GM_ROW(uint32_t); break;
            case 8: GM_ROW(uint64_t); break;
            default:
                for (size_t j = 0; j < n; j++) {
                    int64_t k = last[j];
                    char *dp = dst + j * es;
                    if (bad || k < 0) {
                        if (fill)
                            memcpy(dp, fill, es);
                        else
                            memset(dp, 0, es);
                    } else {
                        memcpy(dp, (const char *)src->data + (size_t)(base + k) * es, es);
                    }
                }
                break;
            }
        }
        /* Advance the outer index. */
        int d = r - 2;
        while (d >= 0 && ++idx[d] == out->dims[d]) {
            idx[d] = 0;
            d--;
        }
        from = d < 0 ? 0 : d;
    }
    return TDM_OK;
}

tdm_status op_tensor_transpose(op_ctx *ctx, int i, const tdm_tensor *src, const int *perm)
{
    int r = src->rank;
    int64_t dims[TDM_MAX_RANK], strides[TDM_MAX_RANK];
    shape_strides(r, src->dims, strides);
    for (int d = 0; d < r; d++)
        dims[d] = src->dims[perm[d]];
    tdm_status st = op_out(ctx, i, src->dtype, r, dims);
    if (st)
        return st;
    int64_t **offs = op_tensor_offs_new(r, dims);
    if (!offs)
        return op_fail(ctx, TDM_E_NOMEM, "out of memory");
    for (int d = 0; d < r; d++)
        for (int64_t k = 0; k < dims[d]; k++)
            offs[d][k] = k * strides[perm[d]];
    st = op_tensor_gather_map(ctx, ctx->out[i], src, offs, NULL);
    mem_free(offs);
    return st;
}
