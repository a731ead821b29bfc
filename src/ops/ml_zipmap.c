/* ai.onnx.ml ZipMap: each row of class scores becomes a map from the class
 * labels to the scores, as onnxruntime computes it (scikit-learn
 * classifiers exported by skl2onnx end in one). */
#include "ops/ml.h"
#include "core/mem.h"

/* The labels: int64s (*ints) or strings (*strs), exactly one of the two. */
static tdm_status zipmap_labels(op_ctx *ctx, const int64_t **ints, char *const **strs, size_t *n)
{
    int ni = gr_attr_ints(ctx->node, "classlabels_int64s", ints);
    int ns = ml_attr_strings(ctx->node, "classlabels_strings", strs);
    if ((ni >= 0) == (ns >= 0))
        return op_fail(ctx, TDM_E_MODEL, "exactly one of classlabels_strings and classlabels_int64s must be given");
    if (ni >= 0)
        *strs = NULL;
    else
        *ints = NULL;
    *n = (size_t)(ni >= 0 ? ni : ns);
    return TDM_OK;
}

/* One map: the labels as keys, row as values. */
static tdm_status zipmap_one(op_ctx *ctx, const int64_t *ints, char *const *strs, size_t n, const float *row,
                             tdm_tensor **out)
{
    int64_t dim = (int64_t)n;
    tdm_tensor *keys, *vals;
    tdm_status st = tensor_new(ctx->err, strs ? TDM_STRING : TDM_INT64, 1, &dim, &keys);
    if (st)
        return st;
    if ((st = tensor_new(ctx->err, TDM_FLOAT, 1, &dim, &vals)) != TDM_OK) {
        tdm_tensor_destroy(keys);
        return st;
    }
    for (size_t k = 0; k < n; k++) {
        ((float *)vals->data)[k] = row[k];
        if (!strs) {
            ((int64_t *)keys->data)[k] = ints[k];
        } else if (!(((char **)keys->data)[k] = mem_strdup(strs[k]))) {
            tdm_tensor_destroy(keys);
            tdm_tensor_destroy(vals);
            return op_fail(ctx, TDM_E_NOMEM, "out of memory for a label");
        }
    }
    return tensor_map_new(ctx->err, keys, vals, out);
}

tdm_status op_run_ZipMap(op_ctx *ctx)
{
    const tdm_tensor *x = ctx->in[0];
    const int64_t *ints;
    char *const *strs;
    size_t n_labels = 0;
    int64_t rows, cols;
    tdm_status st = zipmap_labels(ctx, &ints, &strs, &n_labels);
    if (st || (st = ml_rows(ctx, x, &rows, &cols)) != TDM_OK)
        return st;
    if (x->dtype != TDM_FLOAT)
        return op_fail(ctx, TDM_E_UNSUPPORTED, "input X of element type %s is not supported (float only)",
                       tdm_dtype_name(x->dtype));
    if (x->rank > 2)
        return op_fail(ctx, TDM_E_RUNTIME, "input X must have rank 1 or 2, not %d", x->rank);
    if (cols != (int64_t)n_labels)
        return op_fail(ctx, TDM_E_RUNTIME, "input X has %lld columns for %zu class labels", (long long)cols,
                       n_labels);
    tdm_tensor *o = ctx->out[0];
    tensor_reset(o);
    o->kind = TDM_KIND_SEQUENCE;
    o->dtype = TDM_FLOAT;
    if (rows && mem_grow((void **)&o->items, &o->cap_items, (size_t)rows, sizeof *o->items))
        return op_fail(ctx, TDM_E_NOMEM, "out of memory for %lld maps", (long long)rows);
    const float *xd = x->data;
    for (int64_t r = 0; r < rows; r++) {
        tdm_tensor *m;
        if ((st = zipmap_one(ctx, ints, strs, n_labels, xd + r * cols, &m)) != TDM_OK)
            return st;
        o->items[o->n_items++] = m;
    }
    return TDM_OK;
}

tdm_status op_infer_ZipMap(op_infer_ctx *ctx)
{
    gr_type *o = &ctx->out[0];
    const int64_t *ints;
    o->kind = TDM_KIND_SEQUENCE;
    o->dtype = TDM_FLOAT;
    o->map_key = gr_attr_ints(ctx->node, "classlabels_int64s", &ints) >= 0 ? TDM_INT64 : TDM_STRING;
    return TDM_OK;
}
