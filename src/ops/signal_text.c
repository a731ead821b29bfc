/* StringNormalizer and TfIdfVectorizer. */
#include "ops/signal.h"
#include "core/mem.h"
#include "core/strmap.h"

#include <string.h>

/* ---- StringNormalizer ---- */

/* Case mapping of ASCII and of the Latin-1 letters in UTF-8 (C3 80..C3 9E
 * upper, C3 A0..C3 BE lower, except × and ÷). Other bytes are kept; the
 * length never changes. Returns a new string or NULL when out of memory. */
static char *map_case(const char *s, int upper)
{
    char *r = mem_strdup(s);
    if (!r)
        return NULL;
    unsigned char *p = (unsigned char *)r;
    for (; *p; p++) {
        if (upper && *p >= 'a' && *p <= 'z') {
            *p = (unsigned char)(*p - 32);
        } else if (!upper && *p >= 'A' && *p <= 'Z') {
            *p = (unsigned char)(*p + 32);
        } else if (*p == 0xC3 && p[1]) {
            unsigned char b = p[1];
            if (upper && b >= 0xA0 && b <= 0xBE && b != 0xB7)
                p[1] = (unsigned char)(b - 0x20);
            else if (!upper && b >= 0x80 && b <= 0x9E && b != 0x97)
                p[1] = (unsigned char)(b + 0x20);
            p++;
        }
    }
    return r;
}

tdm_status op_run_StringNormalizer(op_ctx *ctx)
{
    const tdm_tensor *x = ctx->in[0];
    if (!x || x->kind != TDM_KIND_TENSOR || x->dtype != TDM_STRING)
        return op_fail(ctx, TDM_E_RUNTIME, "input 0 must be a string tensor");
    if (!(x->rank == 1 || (x->rank == 2 && x->dims[0] == 1)))
        return op_fail(ctx, TDM_E_RUNTIME, "input 0 must have shape [C] or [1, C]");
    const char *action = gr_attr_str(ctx->node, "case_change_action", "NONE");
    int change; /* 0 none, 1 lower, 2 upper */
    if (strcmp(action, "NONE") == 0)
        change = 0;
    else if (strcmp(action, "LOWER") == 0)
        change = 1;
    else if (strcmp(action, "UPPER") == 0)
        change = 2;
    else
        return op_fail(ctx, TDM_E_MODEL, "attribute case_change_action '%s' is not LOWER, UPPER or NONE", action);
    int sensitive = gr_attr_int(ctx->node, "is_case_sensitive", 0) != 0;
    const gr_attr *sw = gr_attr_find(ctx->node, "stopwords");
    size_t nsw = sw && sw->type == GA_STRINGS ? sw->n : 0;

    tdm_status st = TDM_OK;
    strmap stop;
    strmap_init(&stop);
    char **lowered = mem_calloc(nsw + 1, sizeof(char *));
    char **kept = mem_calloc(x->count + 1, sizeof(char *));
    size_t nkept = 0;
    if (!lowered || !kept)
        goto nomem;
    for (size_t k = 0; k < nsw; k++) {
        const char *w = sw->strings[k] ? sw->strings[k] : "";
        if (!sensitive) {
            if (!(lowered[k] = map_case(w, 0)))
                goto nomem;
            w = lowered[k];
        }
        if (strmap_put(&stop, w, 1))
            goto nomem;
    }
    for (size_t i = 0; i < x->count; i++) {
        const char *s = tensor_str(x, i);
        int is_stop = 0;
        if (nsw) {
            if (sensitive) {
                is_stop = strmap_get(&stop, s) >= 0;
            } else {
                char *l = map_case(s, 0);
                if (!l)
                    goto nomem;
                is_stop = strmap_get(&stop, l) >= 0;
                mem_free(l);
            }
        }
        if (is_stop)
            continue;
        kept[nkept] = change ? map_case(s, change == 2) : mem_strdup(s);
        if (!kept[nkept])
            goto nomem;
        nkept++;
    }
    {
        /* An all-stopwords input gives one empty string, as ONNX specifies. */
        int64_t dims[2] = {1, nkept ? (int64_t)nkept : 1};
        st = x->rank == 1 ? op_out(ctx, 0, TDM_STRING, 1, dims + 1) : op_out(ctx, 0, TDM_STRING, 2, dims);
        if (st)
            goto done;
        char **o = ctx->out[0]->data;
        for (size_t i = 0; i < nkept; i++) {
            o[i] = kept[i];
            kept[i] = NULL;
        }
        if (!nkept && !(o[0] = mem_strdup("")))
            goto nomem;
    }
    goto done;
nomem:
    st = op_fail(ctx, TDM_E_NOMEM, "out of memory normalising %zu strings", x->count);
done:
    for (size_t i = 0; kept && i < nkept; i++)
        mem_free(kept[i]);
    for (size_t k = 0; lowered && k < nsw; k++)
        mem_free(lowered[k]);
    mem_free(kept);
    mem_free(lowered);
    strmap_free(&stop);
    return st;
}

tdm_status op_infer_StringNormalizer(op_infer_ctx *ctx)
{
    gr_type *o = &ctx->out[0];
    o->kind = TDM_KIND_TENSOR;
    o->dtype = TDM_STRING;
    const gr_type *t = ctx->in[0];
    if (t && (t->rank == 1 || t->rank == 2)) {
        o->rank = t->rank;
        o->dims[0] = (gr_dim){t->rank == 2 ? 1 : -1, NULL};
        o->dims[1] = (gr_dim){-1, NULL};
    }
    return TDM_OK;
}

/* ---- TfIdfVectorizer ---- */

/* The pool's n-grams as tuples of token keys (the integer itself, or for
 * strings the index of the pool string's first occurrence), in a hash table
 * keyed on (n, tuple). */
typedef struct tfidf {
    size_t n_grams;
    int64_t *keys;      /* pool tokens as keys, flattened */
    size_t *off;        /* per n-gram: offset in keys */
    int *len;           /* per n-gram: n */
    size_t cap;         /* table slots (a power of two) */
    int64_t *table;     /* n-gram id or -1 */
} tfidf;

static uint64_t gram_hash(const int64_t *k, int n, size_t stride)
{
    uint64_t h = 0xcbf29ce484222325ull ^ (uint64_t)n;
    for (int i = 0; i < n; i++) {
        h ^= (uint64_t)k[(size_t)i * stride];
        h *= 0x100000001b3ull;
        h ^= h >> 29;
    }
    return h;
}

static int gram_equal(const tfidf *t, int64_t id, const int64_t *k, int n, size_t stride)
{
    if (t->len[id] != n)
        return 0;
    const int64_t *a = t->keys + t->off[id];
    for (int i = 0; i < n; i++)
        if (a[i] != k[(size_t)i * stride])
            return 0;
    return 1;
}

/* The id of the n-gram whose tokens are k[0], k[stride], …, or -1. */
static int64_t gram_find(const tfidf *t, const int64_t *k, int n, size_t stride)
{
    size_t mask = t->cap - 1, s = (size_t)gram_hash(k, n, stride) & mask;
    for (; t->table[s] >= 0; s = (s + 1) & mask)
        if (gram_equal(t, t->table[s], k, n, stride))
            return t->table[s];
    return -1;
}

static void tfidf_free(tfidf *t)
{
    mem_free(t->keys);
    mem_free(t->off);
    mem_free(t->len);
    mem_free(t->table);
}

tdm_status op_run_TfIdfVectorizer(op_ctx *ctx)
{
    const gr_node *nd = ctx->node;
    const tdm_tensor *x = ctx->in[0];
    if (!x || x->kind != TDM_KIND_TENSOR ||
        !(x->dtype == TDM_STRING || x->dtype == TDM_INT32 || x->dtype == TDM_INT64))
        return op_fail(ctx, TDM_E_RUNTIME, "input 0 must be a string, int32 or int64 tensor");
    if (x->rank != 1 && x->rank != 2)
        return op_fail(ctx, TDM_E_RUNTIME, "input 0 must have rank 1 or 2, not %d", x->rank);
    int64_t minn = gr_attr_int(nd, "min_gram_length", 0), maxn = gr_attr_int(nd, "max_gram_length", 0);
    int64_t skip = gr_attr_int(nd, "max_skip_count", 0);
    const char *mode = gr_attr_str(nd, "mode", "");
    int md = strcmp(mode, "TF") == 0 ? 0 : strcmp(mode, "IDF") == 0 ? 1 : strcmp(mode, "TFIDF") == 0 ? 2 : -1;
    if (md < 0)
        return op_fail(ctx, TDM_E_MODEL, "attribute mode '%s' is not TF, IDF or TFIDF", mode);
    if (minn < 1 || maxn < minn || maxn > 64)
        return op_fail(ctx, TDM_E_MODEL,
                       "attributes min_gram_length %lld and max_gram_length %lld must satisfy 1 <= min <= max <= 64",
                       (long long)minn, (long long)maxn);
    if (skip < 0)
        return op_fail(ctx, TDM_E_MODEL, "attribute max_skip_count must not be negative");
    const int64_t *counts, *indexes;
    int ncounts = gr_attr_ints(nd, "ngram_counts", &counts);
    int nindexes = gr_attr_ints(nd, "ngram_indexes", &indexes);
    if (ncounts < 0 || nindexes < 0)
        return op_fail(ctx, TDM_E_MODEL, "attributes ngram_counts and ngram_indexes are required");
    if (ncounts < maxn)
        return op_fail(ctx, TDM_E_MODEL, "attribute ngram_counts has %d entries, fewer than max_gram_length %lld",
                       ncounts, (long long)maxn);
    int is_str = x->dtype == TDM_STRING;
    const gr_attr *ps = gr_attr_find(nd, "pool_strings");
    const int64_t *pint = NULL;
    int npint = gr_attr_ints(nd, "pool_int64s", &pint);
    if (is_str && !(ps && ps->type == GA_STRINGS))
        return op_fail(ctx, TDM_E_MODEL, "a string input needs attribute pool_strings");
    if (!is_str && npint < 0)
        return op_fail(ctx, TDM_E_MODEL, "an integer input needs attribute pool_int64s");
    size_t npool = is_str ? ps->n : (size_t)npint;
    const float *wts = NULL;
    int nw = gr_attr_floats(nd, "weights", &wts);

    /* Count the n-grams: ngram_counts[k] is where the (k+1)-grams start. */
    size_t total = 0;
    for (int k = 0; k < ncounts; k++) {
        size_t start = (size_t)counts[k], end = k + 1 < ncounts ? (size_t)counts[k + 1] : npool;
        if (counts[k] < 0 || (k + 1 < ncounts && counts[k + 1] < counts[k]) || end > npool || start > end ||
            (end - start) % (size_t)(k + 1))
            return op_fail(ctx, TDM_E_MODEL,
                           "attribute ngram_counts entry %d (%lld) does not split the pool of %zu tokens into "
                           "%d-grams",
                           k, (long long)counts[k], npool, k + 1);
        total += (end - start) / (size_t)(k + 1);
    }
    if ((size_t)nindexes != total)
        return op_fail(ctx, TDM_E_MODEL, "attribute ngram_indexes has %d entries for %zu n-grams in the pool",
                       nindexes, total);
    int64_t out_size = 0;
    for (int i = 0; i < nindexes; i++) {
        if (indexes[i] < 0 || indexes[i] >= (int64_t)1 << 40)
            return op_fail(ctx, TDM_E_MODEL, "attribute ngram_indexes entry %d (%lld) is out of range", i,
                           (long long)indexes[i]);
        if (indexes[i] + 1 > out_size)
            out_size = indexes[i] + 1;
    }
    if (md != 0 && nw > 0 && nw < out_size)
        return op_fail(ctx, TDM_E_MODEL, "attribute weights has %d entries for %lld outputs", nw,
                       (long long)out_size);

    int64_t rows = x->rank == 2 ? x->dims[0] : 1, cols = x->dims[x->rank - 1];
    int64_t dims[2] = {rows, out_size};
    tdm_status st = x->rank == 2 ? op_out(ctx, 0, TDM_FLOAT, 2, dims) : op_out(ctx, 0, TDM_FLOAT, 1, dims + 1);
    if (st)
        return st;
    float *y = ctx->out[0]->data;
    memset(y, 0, ctx->out[0]->nbytes);

    tfidf t = {0};
    strmap vocab;
    strmap_init(&vocab);
    int64_t *in_keys = NULL;
    t.n_grams = total;
    t.keys = mem_alloc(sizeof(int64_t) * (npool ? npool : 1));
    t.off = mem_alloc(sizeof(size_t) * (total ? total : 1));
    t.len = mem_alloc(sizeof(int) * (total ? total : 1));
    t.cap = 16;
    while (t.cap < 2 * total)
        t.cap <<= 1;
    t.table = mem_alloc(sizeof(int64_t) * t.cap);
    in_keys = mem_alloc(sizeof(int64_t) * (x->count ? x->count : 1));
    if (!t.keys || !t.off || !t.len || !t.table || !in_keys)
        goto nomem;
    for (size_t s = 0; s < t.cap; s++)
        t.table[s] = -1;
    for (size_t i = 0; i < npool; i++) {
        if (is_str) {
            const char *w = ps->strings[i] ? ps->strings[i] : "";
            int id = strmap_get(&vocab, w);
            if (id < 0) {
                id = (int)i;
                if (strmap_put(&vocab, w, id))
                    goto nomem;
            }
            t.keys[i] = id;
        } else {
            t.keys[i] = pint[i];
        }
    }
    {
        size_t g = 0;
        for (int k = 0; k < ncounts; k++) {
            size_t start = (size_t)counts[k], end = k + 1 < ncounts ? (size_t)counts[k + 1] : npool;
            for (size_t p = start; p < end; p += (size_t)(k + 1), g++) {
                t.off[g] = p;
                t.len[g] = k + 1;
                if (gram_find(&t, t.keys + p, k + 1, 1) >= 0)
                    continue; /* a duplicate in the pool: the first one counts */
                size_t mask = t.cap - 1, s = (size_t)gram_hash(t.keys + p, k + 1, 1) & mask;
                while (t.table[s] >= 0)
                    s = (s + 1) & mask;
                t.table[s] = (int64_t)g;
            }
        }
    }
    for (size_t i = 0; i < x->count; i++) {
        if (is_str) {
            in_keys[i] = strmap_get(&vocab, tensor_str(x, i)); /* -1: not in the pool, never matches */
        } else if (x->dtype == TDM_INT32) {
            in_keys[i] = ((const int32_t *)x->data)[i];
        } else {
            in_keys[i] = ((const int64_t *)x->data)[i];
        }
    }
    for (int64_t r = 0; r < rows; r++) {
        const int64_t *row = in_keys + (size_t)r * (size_t)cols;
        float *yr = y + (size_t)r * (size_t)out_size;
        for (int64_t s = 0; s < cols; s++) {
            for (int64_t n = minn; n <= maxn; n++) {
                for (int64_t k = 0; k <= (n == 1 ? 0 : skip); k++) {
                    /* the last token is at s + (n-1)(k+1): stop when past the row */
                    if ((n - 1) * (k + 1) >= cols - s)
                        break;
                    int64_t id = gram_find(&t, row + s, (int)n, (size_t)(k + 1));
                    if (id >= 0)
                        yr[indexes[id]] += 1.0f;
                }
            }
        }
        for (int64_t o = 0; o < out_size; o++) {
            float w = nw > 0 ? wts[o] : 1.0f;
            if (md == 1)
                yr[o] = yr[o] > 0 ? w : 0.0f;
            else if (md == 2)
                yr[o] *= w;
        }
    }
    goto done;
nomem:
    st = op_fail(ctx, TDM_E_NOMEM, "out of memory for a pool of %zu tokens", npool);
done:
    tfidf_free(&t);
    mem_free(in_keys);
    strmap_free(&vocab);
    return st;
}

tdm_status op_infer_TfIdfVectorizer(op_infer_ctx *ctx)
{
    gr_type *o = &ctx->out[0];
    o->kind = TDM_KIND_TENSOR;
    o->dtype = TDM_FLOAT;
    const gr_type *t = ctx->in[0];
    if (!t || (t->rank != 1 && t->rank != 2))
        return TDM_OK;
    const int64_t *idx;
    int n = gr_attr_ints(ctx->node, "ngram_indexes", &idx);
    int64_t size = 0;
    for (int i = 0; i < n; i++)
        if (idx[i] + 1 > size)
            size = idx[i] + 1;
    o->rank = t->rank;
    if (t->rank == 2)
        o->dims[0] = t->dims[0];
    o->dims[t->rank - 1] = (gr_dim){n >= 0 ? size : -1, NULL};
    return TDM_OK;
}

/* ---- StringConcat (20): elementwise a + b, numpy broadcasting ---- */

tdm_status op_run_StringConcat(op_ctx *ctx)
{
    const tdm_tensor *a = ctx->n_in > 0 ? ctx->in[0] : NULL, *b = ctx->n_in > 1 ? ctx->in[1] : NULL;
    if (!a || !b || a->kind != TDM_KIND_TENSOR || b->kind != TDM_KIND_TENSOR || a->dtype != TDM_STRING ||
        b->dtype != TDM_STRING)
        return op_fail(ctx, TDM_E_RUNTIME, "inputs X and Y must be string tensors");
    int r;
    int64_t dims[TDM_MAX_RANK], sa[TDM_MAX_RANK], sb[TDM_MAX_RANK];
    if (op_broadcast(a->rank, a->dims, b->rank, b->dims, &r, dims))
        return op_fail(ctx, TDM_E_RUNTIME, "inputs X and Y cannot be broadcast together");
    tdm_status st = op_out(ctx, 0, TDM_STRING, r, dims);
    if (st)
        return st;
    op_bcast_strides(r, dims, a->rank, a->dims, sa);
    op_bcast_strides(r, dims, b->rank, b->dims, sb);
    char **o = ctx->out[0]->data;
    for (size_t i = 0; i < ctx->out[0]->count; i++) {
        const char *x = ((char *const *)a->data)[op_bcast_offset(i, r, dims, sa)];
        const char *y = ((char *const *)b->data)[op_bcast_offset(i, r, dims, sb)];
        size_t lx = x ? strlen(x) : 0, ly = y ? strlen(y) : 0, n;
        if (mem_add(lx, ly, &n) || mem_add(n, 1, &n) || !(o[i] = mem_alloc(n)))
            return op_fail(ctx, TDM_E_NOMEM, "out of memory");
        if (lx)
            memcpy(o[i], x, lx);
        if (ly)
            memcpy(o[i] + lx, y, ly);
        o[i][lx + ly] = 0;
    }
    return TDM_OK;
}

/* ---- StringSplit (20): Python's str.split(delimiter, maxsplit) ---- */

/* Pieces of s (count only when out is NULL): split at every delimiter,
 * or at runs of whitespace (no empty pieces) when delim is empty; at most
 * maxsplit splits when maxsplit >= 0. */
static tdm_status split_one(op_ctx *ctx, const char *s, const char *delim, int64_t maxsplit, char **out,
                            int64_t *count)
{
    static const char ws[] = " \t\n\r\v\f";
    size_t dl = strlen(delim);
    int64_t n = 0, splits = 0;
    const char *p = s;
    if (!dl) {
        p += strspn(p, ws);
        while (*p) {
            /* the last piece keeps its trailing whitespace, as in Python */
            size_t len = (maxsplit >= 0 && splits >= maxsplit) ? strlen(p) : strcspn(p, ws);
            if (out && !(out[n] = mem_strndup(p, len)))
                return op_fail(ctx, TDM_E_NOMEM, "out of memory");
            n++;
            splits++;
            p += len;
            p += strspn(p, ws);
        }
    } else {
        for (;;) {
            const char *q = (maxsplit >= 0 && splits >= maxsplit) ? NULL : strstr(p, delim);
            size_t len = q ? (size_t)(q - p) : strlen(p);
            if (out && !(out[n] = mem_strndup(p, len)))
                return op_fail(ctx, TDM_E_NOMEM, "out of memory");
            n++;
            if (!q)
                break;
            splits++;
            p = q + dl;
        }
    }
    *count = n;
    return TDM_OK;
}

tdm_status op_run_StringSplit(op_ctx *ctx)
{
    const tdm_tensor *x = ctx->n_in > 0 ? ctx->in[0] : NULL;
    if (!x || x->kind != TDM_KIND_TENSOR || x->dtype != TDM_STRING)
        return op_fail(ctx, TDM_E_RUNTIME, "input X must be a string tensor");
    if (x->rank >= TDM_MAX_RANK)
        return op_fail(ctx, TDM_E_RUNTIME, "input X has rank %d; at most %d", x->rank, TDM_MAX_RANK - 1);
    const char *delim = gr_attr_str(ctx->node, "delimiter", "");
    int64_t maxsplit = gr_attr_int(ctx->node, "maxsplit", -1);
    int64_t widest = 0, c;
    char *const *xs = x->data;
    tdm_status st;
    for (size_t i = 0; i < x->count; i++) {
        if ((st = split_one(ctx, xs[i] ? xs[i] : "", delim, maxsplit, NULL, &c)))
            return st;
        widest = c > widest ? c : widest;
    }
    int64_t dims[TDM_MAX_RANK];
    memcpy(dims, x->dims, sizeof dims[0] * (size_t)x->rank);
    dims[x->rank] = widest;
    if ((st = op_out(ctx, 0, TDM_STRING, x->rank + 1, dims)) ||
        (op_out_wanted(ctx, 1) && (st = op_out(ctx, 1, TDM_INT64, x->rank, x->dims))))
        return st;
    char **o = ctx->out[0]->data;
    for (size_t i = 0; i < x->count; i++) {
        char **row = o + i * (size_t)widest;
        if ((st = split_one(ctx, xs[i] ? xs[i] : "", delim, maxsplit, row, &c)))
            return st;
        for (int64_t k = c; k < widest; k++)
            if (!(row[k] = mem_strdup("")))
                return op_fail(ctx, TDM_E_NOMEM, "out of memory");
        if (op_out_wanted(ctx, 1))
            ((int64_t *)ctx->out[1]->data)[i] = c;
    }
    return TDM_OK;
}

/* StringSplit: Y has X's shape and one more axis (its length, the most
 * pieces of a string, is known only at run time), Z X's shape in int64. */
tdm_status op_infer_StringSplit(op_infer_ctx *ctx)
{
    const gr_type *x = ctx->n_in > 0 ? ctx->in[0] : NULL;
    for (int o = 0; o < ctx->n_out && o < 2; o++) {
        ctx->out[o].kind = TDM_KIND_TENSOR;
        ctx->out[o].dtype = o == 0 ? TDM_STRING : TDM_INT64;
    }
    if (!x || x->rank < 0 || x->rank >= TDM_MAX_RANK)
        return TDM_OK;
    ctx->out[0].rank = x->rank + 1;
    memcpy(ctx->out[0].dims, x->dims, sizeof x->dims[0] * (size_t)x->rank);
    ctx->out[0].dims[x->rank] = (gr_dim){-1, NULL};
    if (ctx->n_out > 1) {
        ctx->out[1].rank = x->rank;
        memcpy(ctx->out[1].dims, x->dims, sizeof x->dims[0] * (size_t)x->rank);
    }
    return TDM_OK;
}
