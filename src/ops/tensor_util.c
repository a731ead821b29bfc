/* Helpers shared by the tensor op files: input access, element copies and
 * the generic offset-table gather every data-movement op reduces to. */
#include "ops/tensor.h"
#include "core/mem.h"
#include "core/pool.h"

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

/* Concat split over threads by ranges of output bytes: each range is
 * copied span by span from the inputs it covers. */
typedef struct cc_job {
    const tdm_tensor *const *items;
    size_t n, orow, per, total; /* orow, per, total in bytes */
    size_t *rowb;                   /* bytes per outer row of each input */
    char *dst;
} cc_job;

static void cc_task(void *arg, size_t t)
{
    const cc_job *j = arg;
    size_t e = t * j->per, end = j->total - e < j->per ? j->total : e + j->per;
    while (e < end) {
        size_t o = e / j->orow, w = e % j->orow, k = 0;
        while (w >= j->rowb[k]) {
            w -= j->rowb[k];
            k++;
        }
        size_t len = j->rowb[k] - w < end - e ? j->rowb[k] - w : end - e;
        memcpy(j->dst + e, (const char *)j->items[k]->data + o * j->rowb[k] + w, len);
        e += len;
    }
}

static int concat_par(const op_ctx *ctx, const tdm_tensor *const *items, size_t n, int axis, size_t inner,
                      size_t orow, tdm_tensor *dst)
{
    int threads = ctx->threads > 1 ? ctx->threads : 1;
    size_t es = tdm_dtype_size(dst->dtype), total = dst->count * es;
    size_t tasks = pool_tasks(threads, total * 2, POOL_MIN_BYTES);
    if (tasks <= 1 || n > 64)
        return 0;
    size_t rowb[64];
    for (size_t k = 0; k < n; k++)
        rowb[k] = (size_t)items[k]->dims[axis] * inner * es;
    cc_job j = {items, n, orow * es, 0, total, rowb, dst->data};
    j.per = (total + tasks - 1) / tasks;
    j.per = (j.per + 63) / 64 * 64;
    pool_run(threads, (total + j.per - 1) / j.per, cc_task, &j);
    return 1;
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
    if (f->dtype != TDM_STRING && dst->count && concat_par(ctx, items, n, axis, inner, orow, dst))
        return TDM_OK;
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
    if (src->dtype != TDM_STRING && src->count) {
        tdm_tensor flat = *ctx->out[i]; /* both as one row: a (split) memcpy */
        int64_t one = 1;
        flat.rank = 1;
        flat.dims[0] = (int64_t)src->count;
        if (op_tensor_strided_copy(ctx, &flat, src, 0, &one) == 0)
            return TDM_OK;
    }
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

/* Rows [r0, r1) of op_tensor_gather_map for a non-string tensor. A row
 * whose source base equals the previous row's is a copy of that row (the
 * row offsets are the same): nearest upsampling, Expand and Tile copy
 * instead of gathering again. */
typedef struct gm_job {
    tdm_tensor *out;
    const tdm_tensor *src;
    int64_t *const *offs;
    const void *fill;
    size_t n, es, nrows, per;
    int dense;
} gm_job;

static void gm_rows(const gm_job *g, size_t r0, size_t r1)
{
    const tdm_tensor *src = g->src;
    const int r = g->out->rank;
    const size_t n = g->n, es = g->es;
    const int64_t *last = g->offs[r - 1];
    const void *fill = g->fill;
    const int dense = g->dense;
    int64_t idx[TDM_MAX_RANK] = {0};
    int64_t part[TDM_MAX_RANK + 1];
    part[0] = 0;
    size_t q = r0;
    for (int d = r - 2; d >= 0; d--) {
        idx[d] = (int64_t)(q % (size_t)g->out->dims[d]);
        q /= (size_t)g->out->dims[d];
    }
    int from = 0;
    int64_t prev = INT64_MIN;
    char *dst = (char *)g->out->data + r0 * n * es;
    for (size_t row = r0; row < r1; row++, dst += n * es) {
        for (int d = from; d < r - 1; d++) {
            int64_t t = g->offs[d][idx[d]];
            part[d + 1] = part[d] < 0 || t < 0 ? -1 : part[d] + t;
        }
        int64_t base = part[r - 1];
        if (row > r0 && base == prev) {
            memcpy(dst, dst - n * es, n * es);
        } else {
            prev = base;
            int bad = base < 0;
            if (bad)
                base = 0;
            switch (es) {
            case 1: GM_ROW(uint8_t); break;
            case 2: GM_ROW(uint16_t); break;
            case 4: GM_ROW(uint32_t); break;
            case 8: GM_ROW(uint64_t); break;
            default:
                for (size_t k = 0; k < n; k++) {
                    int64_t o = last[k];
                    char *dp = dst + k * es;
                    if (bad || o < 0) {
                        if (fill)
                            memcpy(dp, fill, es);
                        else
                            memset(dp, 0, es);
                    } else {
                        memcpy(dp, (const char *)src->data + (size_t)(base + o) * es, es);
                    }
                }
                break;
            }
        }
        int d = r - 2;
        while (d >= 0 && ++idx[d] == g->out->dims[d]) {
            idx[d] = 0;
            d--;
        }
        from = d < 0 ? 0 : d;
    }
}

static void gm_task(void *arg, size_t t)
{
    const gm_job *j = arg;
    size_t r0 = t * j->per, r1 = j->nrows - r0 < j->per ? j->nrows : r0 + j->per;
    gm_rows(j, r0, r1);
}

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
    if (src->dtype != TDM_STRING) {
        gm_job j = {out, src, offs, fill, n, es, nrows, 0, dense};
        int threads = ctx->threads > 1 ? ctx->threads : 1;
        size_t tasks = pool_tasks(threads, out->count * es * 2, POOL_MIN_BYTES);
        if (tasks > nrows)
            tasks = nrows;
        j.per = (nrows + tasks - 1) / tasks;
        pool_run(threads, (nrows + j.per - 1) / j.per, gm_task, &j);
        return TDM_OK;
    }
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
        /* strings: the other types returned above */
        char **d_ = (char **)dst;
        char *const *s_ = (char *const *)src->data + base;
        const char *f_ = fill ? *(const char *const *)fill : NULL;
        for (size_t j = 0; j < n; j++) {
            const char *v = bad || last[j] < 0 ? f_ : s_[last[j]];
            d_[j] = NULL;
            if (v && !(d_[j] = mem_strdup(v)))
                return op_fail(ctx, TDM_E_NOMEM, "out of memory copying strings");
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
    int64_t ps[TDM_MAX_RANK];
    for (int d = 0; d < r; d++)
        ps[d] = strides[perm[d]];
    if (op_tensor_strided_copy(ctx, ctx->out[i], src, 0, ps) == 0)
        return TDM_OK;
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

/* ---- strided copy (op_tensor_strided_copy) ----
 *
 * The view is first reduced: size-1 dims dropped, neighbours that stay
 * contiguous in the source merged. Then one of three plans:
 *   bytes  one contiguous run, split into byte ranges;
 *   rows   rows of the last dim (a memcpy when its source stride is 1, a
 *          strided loop otherwise), split into row ranges;
 *   tile   the last dim has a source stride > 1 while an outer dim k has
 *          stride 1 (a transpose that moves the fastest dim): 2-D blocks of
 *          SC_TILE x SC_TILE per (batch, block of k), so that both the
 *          reads and the writes of a block stay in the L1 cache. */

#define SC_TILE 16

typedef struct sc_job {
    int r, k, mode; /* merged rank; stride-1 dim of the tile plan; SC_* */
    int64_t d[TDM_MAX_RANK], s[TDM_MAX_RANK], os[TDM_MAX_RANK];
    size_t es, units, per, nib;
    const char *src; /* at the view's base */
    char *dst;
} sc_job;

enum { SC_BYTES, SC_ROWS, SC_TILED };

#define SC_COPY_ROW(T)                                                                                        \
    do {                                                                                                      \
        const T *s_ = (const T *)(const void *)sp;                                                            \
        T *d_ = (T *)(void *)dp;                                                                              \
        for (int64_t q_ = 0; q_ < L; q_++)                                                                    \
            d_[q_] = s_[q_ * sL];                                                                             \
    } while (0)

static void sc_rows(const sc_job *j, size_t u0, size_t u1)
{
    const int r = j->r;
    const int64_t L = j->d[r - 1], sL = j->s[r - 1];
    const size_t es = j->es;
    int64_t idx[TDM_MAX_RANK], off = 0;
    size_t q = u0;
    for (int x = r - 2; x >= 0; x--) {
        idx[x] = (int64_t)(q % (size_t)j->d[x]);
        q /= (size_t)j->d[x];
        off += idx[x] * j->s[x];
    }
    char *dp = j->dst + u0 * (size_t)L * es;
    for (size_t u = u0; u < u1; u++, dp += (size_t)L * es) {
        const char *sp = j->src + off * (int64_t)es;
        if (sL == 1) {
            memcpy(dp, sp, (size_t)L * es);
        } else {
            switch (es) {
            case 1: SC_COPY_ROW(uint8_t); break;
            case 2: SC_COPY_ROW(uint16_t); break;
            case 4: SC_COPY_ROW(uint32_t); break;
            case 8: SC_COPY_ROW(uint64_t); break;
            default:
                for (int64_t e = 0; e < L; e++)
                    memcpy(dp + (size_t)e * es, sp + e * sL * (int64_t)es, es);
                break;
            }
        }
        for (int x = r - 2; x >= 0; x--) {
            off += j->s[x];
            if (++idx[x] < j->d[x])
                break;
            off -= j->s[x] * j->d[x];
            idx[x] = 0;
        }
    }
}

#define SC_COPY_TILE(T)                                                                                       \
    do {                                                                                                      \
        const T *s_ = (const T *)(const void *)sb;                                                            \
        T *d_ = (T *)(void *)db;                                                                              \
        for (int64_t i = i0; i < i1; i++)                                                                     \
            for (int64_t jj = j0; jj < j1; jj++)                                                              \
                d_[i * ok + jj] = s_[i + jj * sL];                                                            \
    } while (0)

/* Unit u of the tile plan: batch u / nib, rows [i0, i1) of dim k. */
static void sc_tile(const sc_job *j, size_t u)
{
    const int r = j->r, k = j->k;
    const int64_t L = j->d[r - 1], sL = j->s[r - 1], ok = j->os[k];
    const size_t es = j->es;
    size_t b = u / j->nib;
    int64_t i0 = (int64_t)(u % j->nib) * SC_TILE, i1 = i0 + SC_TILE < j->d[k] ? i0 + SC_TILE : j->d[k];
    int64_t so = 0, doff = 0;
    for (int x = r - 2; x >= 0; x--) {
        if (x == k)
            continue;
        int64_t ix = (int64_t)(b % (size_t)j->d[x]);
        b /= (size_t)j->d[x];
        so += ix * j->s[x];
        doff += ix * j->os[x];
    }
    const char *sb = j->src + so * (int64_t)es;
    char *db = j->dst + doff * (int64_t)es;
    for (int64_t j0 = 0; j0 < L; j0 += SC_TILE) {
        int64_t j1 = j0 + SC_TILE < L ? j0 + SC_TILE : L;
        switch (es) {
        case 1: SC_COPY_TILE(uint8_t); break;
        case 2: SC_COPY_TILE(uint16_t); break;
        case 4: SC_COPY_TILE(uint32_t); break;
        case 8: SC_COPY_TILE(uint64_t); break;
        default:
            for (int64_t i = i0; i < i1; i++)
                for (int64_t jj = j0; jj < j1; jj++)
                    memcpy(db + (size_t)(i * ok + jj) * es, sb + (i + jj * sL) * (int64_t)es, es);
            break;
        }
    }
}

static void sc_task(void *arg, size_t t)
{
    const sc_job *j = arg;
    size_t u0 = t * j->per, u1 = j->units - u0 < j->per ? j->units : u0 + j->per;
    if (j->mode == SC_BYTES)
        memcpy(j->dst + u0, j->src + u0, u1 - u0);
    else if (j->mode == SC_ROWS)
        sc_rows(j, u0, u1);
    else
        for (size_t u = u0; u < u1; u++)
            sc_tile(j, u);
}

int op_tensor_strided_copy(const op_ctx *ctx, tdm_tensor *out, const tdm_tensor *src, int64_t base,
                           const int64_t *strides)
{
    if (src->dtype == TDM_STRING || out->dtype == TDM_STRING)
        return -1;
    sc_job j;
    size_t es = tdm_dtype_size(src->dtype), count = out->count;
    if (!count)
        return 0;
    j.es = es;
    j.src = (const char *)src->data + base * (int64_t)es;
    j.dst = out->data;
    int r = 0;
    for (int x = 0; x < out->rank; x++) {
        if (out->dims[x] == 1)
            continue;
        if (r > 0 && j.s[r - 1] == strides[x] * out->dims[x]) {
            j.d[r - 1] *= out->dims[x];
            j.s[r - 1] = strides[x];
        } else {
            j.d[r] = out->dims[x];
            j.s[r] = strides[x];
            r++;
        }
    }
    if (r == 0) {
        memcpy(j.dst, j.src, es);
        return 0;
    }
    j.r = r;
    j.os[r - 1] = 1;
    for (int x = r - 2; x >= 0; x--)
        j.os[x] = j.os[x + 1] * j.d[x + 1];
    j.k = -1;
    if (j.s[r - 1] != 1 && j.d[r - 1] >= 4)
        for (int x = 0; x < r - 1; x++)
            if (j.s[x] == 1 && j.d[x] >= 4)
                j.k = x;
    int threads = ctx && ctx->threads > 1 ? ctx->threads : 1;
    size_t tasks = pool_tasks(threads, count * es * 2, POOL_MIN_BYTES);
    if (r == 1 && j.s[0] == 1) {
        j.mode = SC_BYTES;
        j.units = count * es;
        j.per = (j.units + tasks - 1) / tasks;
        j.per = (j.per + 63) / 64 * 64;
    } else if (j.k >= 0) {
        j.mode = SC_TILED;
        j.nib = ((size_t)j.d[j.k] + SC_TILE - 1) / SC_TILE;
        j.units = count / (size_t)j.d[j.k] / (size_t)j.d[r - 1] * j.nib;
        j.per = (j.units + tasks - 1) / tasks;
    } else {
        j.mode = SC_ROWS;
        j.units = count / (size_t)j.d[r - 1];
        j.per = (j.units + tasks - 1) / tasks;
    }
    pool_run(threads, (j.units + j.per - 1) / j.per, sc_task, &j);
    return 0;
}
