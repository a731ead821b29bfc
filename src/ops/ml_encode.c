/* ai.onnx.ml feature encoders: Binarizer, Imputer, ArrayFeatureExtractor,
 * LabelEncoder (1, 2 and 4), CategoryMapper and OneHotEncoder, as
 * onnxruntime computes them. */
#include "ops/ml.h"
#include "core/mem.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static tdm_status set_str(op_ctx *ctx, tdm_tensor *y, size_t i, const char *s)
{
    char *d = mem_strdup(s ? s : "");
    if (!d)
        return op_fail(ctx, TDM_E_NOMEM, "out of memory for a string");
    ((char **)y->data)[i] = d;
    return TDM_OK;
}

static tdm_status need(op_ctx *ctx, uint32_t types)
{
    const tdm_tensor *x = ctx->in[0];
    if (!x || x->kind != TDM_KIND_TENSOR || !(DT_BIT(x->dtype) & types))
        return op_fail(ctx, TDM_E_UNSUPPORTED, "input X of element type %s is not supported",
                       x ? tdm_dtype_name(x->dtype) : "absent");
    return TDM_OK;
}

/* ---------------------------------------------------------------- Binarizer */

tdm_status op_run_Binarizer(op_ctx *ctx)
{
    tdm_status st;
    if ((st = need(ctx, DT_ML_NUM)))
        return st;
    const tdm_tensor *x = ctx->in[0];
    double th = (double)gr_attr_float(ctx->node, "threshold", 0.0f);
    if ((st = op_out(ctx, 0, x->dtype, x->rank, x->dims)))
        return st;
    for (size_t i = 0; i < x->count; i++) {
        double v = tensor_get_f64(x, i);
        tensor_set_f64(ctx->out[0], i, isnan(v) ? v : v > th ? 1.0 : 0.0);
    }
    return TDM_OK;
}

/* ------------------------------------------------------------------ Imputer */

/* Replaces each X equal to the replaced value (NaN: each NaN) by the
 * imputed value of its column (or the one imputed value). */
tdm_status op_run_Imputer(op_ctx *ctx)
{
    tdm_status st;
    if ((st = need(ctx, DT_BIT(TDM_FLOAT) | DT_BIT(TDM_DOUBLE) | DT_BIT(TDM_INT64))))
        return st;
    const tdm_tensor *x = ctx->in[0];
    int is_int = x->dtype == TDM_INT64;
    const float *fv = NULL;
    const int64_t *iv = NULL;
    int nv = is_int ? gr_attr_ints(ctx->node, "imputed_value_int64s", &iv)
                    : gr_attr_floats(ctx->node, "imputed_value_floats", &fv);
    int64_t last = x->rank > 0 ? x->dims[x->rank - 1] : 1;
    if (nv <= 0 || (nv > 1 && nv != last))
        return op_fail(ctx, TDM_E_RUNTIME, "imputed_value_%s has %d values for %lld columns",
                       is_int ? "int64s" : "floats", nv < 0 ? 0 : nv, (long long)last);
    int64_t irep = gr_attr_int(ctx->node, "replaced_value_int64", 0);
    double rep = (double)gr_attr_float(ctx->node, "replaced_value_float", 0.0f);
    if ((st = op_out(ctx, 0, x->dtype, x->rank, x->dims)))
        return st;
    memcpy(ctx->out[0]->data, x->data, x->nbytes);
    for (size_t i = 0; i < x->count; i++) {
        size_t j = nv > 1 ? i % (size_t)last : 0;
        if (is_int) {
            int64_t *y = ctx->out[0]->data;
            if (y[i] == irep)
                y[i] = iv[j];
        } else {
            double v = tensor_get_f64(x, i);
            if (isnan(rep) ? isnan(v) : v == rep)
                tensor_set_f64(ctx->out[0], i, (double)fv[j]);
        }
    }
    return TDM_OK;
}

/* ---------------------------------------------------- ArrayFeatureExtractor */

/* Y = X[..., indices] along the last axis (a 1-D X gives one row). */
tdm_status op_run_ArrayFeatureExtractor(op_ctx *ctx)
{
    tdm_status st;
    if ((st = need(ctx, DT_ML_NUM | DT_BIT(TDM_STRING))))
        return st;
    const tdm_tensor *x = ctx->in[0];
    if (x->rank < 1)
        return op_fail(ctx, TDM_E_RUNTIME, "input X must have rank 1 or more");
    int64_t *idx = NULL;
    size_t k;
    if (ctx->n_in < 2 || !ctx->in[1])
        return op_fail(ctx, TDM_E_RUNTIME, "input Y (the indices) is missing");
    if ((st = op_in_ints(ctx, 1, &idx, &k)))
        return st;
    int64_t last = x->dims[x->rank - 1];
    for (size_t j = 0; j < k; j++)
        if (idx[j] < 0 || idx[j] >= last) {
            st = op_fail(ctx, TDM_E_RUNTIME, "index %lld is out of range for the last dimension (%lld)",
                         (long long)idx[j], (long long)last);
            mem_free(idx);
            return st;
        }
    int64_t dims[TDM_MAX_RANK];
    int rank = x->rank == 1 ? 2 : x->rank;
    if (x->rank == 1) {
        dims[0] = 1;
    } else {
        memcpy(dims, x->dims, sizeof(int64_t) * (size_t)x->rank);
    }
    dims[rank - 1] = (int64_t)k;
    if ((st = op_out(ctx, 0, x->dtype, rank, dims))) {
        mem_free(idx);
        return st;
    }
    size_t rows = last ? x->count / (size_t)last : 0, es = tdm_dtype_size(x->dtype);
    for (size_t r = 0; r < rows && !st; r++)
        for (size_t j = 0; j < k && !st; j++) {
            size_t from = r * (size_t)last + (size_t)idx[j], to = r * k + j;
            if (x->dtype == TDM_STRING)
                st = set_str(ctx, ctx->out[0], to, tensor_str(x, from));
            else
                memcpy((char *)ctx->out[0]->data + to * es, (const char *)x->data + from * es, es);
        }
    mem_free(idx);
    return st;
}

tdm_status op_infer_ArrayFeatureExtractor(op_infer_ctx *ctx)
{
    op_infer_copy(ctx, 0, 0);
    gr_type *o = &ctx->out[0];
    if (o->rank < 1)
        return TDM_OK;
    if (o->rank == 1) {
        o->rank = 2;
        o->dims[0] = (gr_dim){1, NULL};
    }
    o->dims[o->rank - 1] = (gr_dim){-1, NULL};
    const gr_type *y = ctx->n_in > 1 ? ctx->in[1] : NULL;
    if (y && y->rank >= 0) {
        int64_t k = 1;
        for (int d = 0; d < y->rank && k >= 0; d++)
            k = y->dims[d].v >= 0 ? k * y->dims[d].v : -1;
        o->dims[o->rank - 1].v = k;
    }
    return TDM_OK;
}

/* -------------------------------------------------------------- LabelEncoder */

/* A list of keys or values: strings, or numbers read as double. */
typedef struct mlist {
    tdm_dtype dt; /* TDM_UNDEFINED when absent */
    size_t n;
    char *const *s;
    const int64_t *i;
    const float *f;
    const tdm_tensor *t;
} mlist;

static mlist list_attr(const gr_node *node, const char *prefix)
{
    mlist l = {TDM_UNDEFINED, 0, NULL, NULL, NULL, NULL};
    char name[40];
    snprintf(name, sizeof name, "%s_tensor", prefix);
    const gr_attr *a = gr_attr_find(node, name);
    if (a && a->type == GA_TENSOR && a->t) {
        l.dt = a->t->dtype;
        l.n = a->t->count;
        l.t = a->t;
        return l;
    }
    int k;
    snprintf(name, sizeof name, "%s_strings", prefix);
    if ((k = ml_attr_strings(node, name, &l.s)) >= 0) {
        l.dt = TDM_STRING;
        l.n = (size_t)k;
        return l;
    }
    snprintf(name, sizeof name, "%s_int64s", prefix);
    if ((k = gr_attr_ints(node, name, &l.i)) >= 0) {
        l.dt = TDM_INT64;
        l.n = (size_t)k;
        return l;
    }
    snprintf(name, sizeof name, "%s_floats", prefix);
    if ((k = gr_attr_floats(node, name, &l.f)) >= 0) {
        l.dt = TDM_FLOAT;
        l.n = (size_t)k;
    }
    return l;
}

static const char *list_str(const mlist *l, size_t k) { return l->t ? tensor_str(l->t, k) : l->s[k]; }

static double list_num(const mlist *l, size_t k)
{
    if (l->t)
        return tensor_get_f64(l->t, k);
    return l->i ? (double)l->i[k] : (double)l->f[k];
}

/* The index of x's element i among keys, or -1. NaN matches NaN. */
static int64_t key_index(const mlist *keys, const tdm_tensor *x, size_t i)
{
    if (x->dtype == TDM_STRING) {
        const char *s = tensor_str(x, i);
        for (size_t k = 0; k < keys->n; k++)
            if (strcmp(list_str(keys, k), s) == 0)
                return (int64_t)k;
        return -1;
    }
    if (x->dtype == TDM_INT64) {
        int64_t v = ((const int64_t *)x->data)[i];
        for (size_t k = 0; k < keys->n; k++)
            if (keys->i ? keys->i[k] == v : list_num(keys, k) == (double)v)
                return (int64_t)k;
        return -1;
    }
    double v = tensor_get_f64(x, i);
    if (x->dtype == TDM_FLOAT)
        for (size_t k = 0; k < keys->n; k++) {
            float kv = (float)list_num(keys, k);
            if (kv == (float)v || (isnan(kv) && isnan(v)))
                return (int64_t)k;
        }
    else
        for (size_t k = 0; k < keys->n; k++) {
            double kv = list_num(keys, k);
            if (kv == v || (isnan(kv) && isnan(v)))
                return (int64_t)k;
        }
    return -1;
}

/* Writes value k of vals (k < 0: the default) into y[i]. */
static tdm_status put_value(op_ctx *ctx, tdm_tensor *y, size_t i, const mlist *vals, int64_t k)
{
    if (y->dtype == TDM_STRING) {
        if (k >= 0)
            return set_str(ctx, y, i, list_str(vals, (size_t)k));
        const gr_attr *d = gr_attr_find(ctx->node, "default_tensor");
        if (d && d->type == GA_TENSOR && d->t && d->t->dtype == TDM_STRING && d->t->count)
            return set_str(ctx, y, i, tensor_str(d->t, 0));
        return set_str(ctx, y, i, gr_attr_str(ctx->node, "default_string", "_Unused"));
    }
    if (k >= 0) {
        if (y->dtype == TDM_INT64 && vals->i)
            ((int64_t *)y->data)[i] = vals->i[k];
        else
            tensor_set_f64(y, i, list_num(vals, (size_t)k));
        return TDM_OK;
    }
    const gr_attr *d = gr_attr_find(ctx->node, "default_tensor");
    if (d && d->type == GA_TENSOR && d->t && d->t->dtype != TDM_STRING && d->t->count)
        tensor_set_f64(y, i, tensor_get_f64(d->t, 0));
    else if (y->dtype == TDM_INT64 || y->dtype == TDM_INT16)
        tensor_set_i64(y, i, gr_attr_int(ctx->node, "default_int64", -1));
    else
        tensor_set_f64(y, i, (double)gr_attr_float(ctx->node, "default_float", -0.0f));
    return TDM_OK;
}

/* Version 1: classes_strings maps strings to their index and back. */
static tdm_status label_encoder_v1(op_ctx *ctx, const tdm_tensor *x)
{
    char *const *cls = NULL;
    int n = ml_attr_strings(ctx->node, "classes_strings", &cls);
    mlist l = {TDM_STRING, n > 0 ? (size_t)n : 0, cls, NULL, NULL, NULL};
    tdm_status st = op_out(ctx, 0, x->dtype == TDM_STRING ? TDM_INT64 : TDM_STRING, x->rank, x->dims);
    for (size_t i = 0; i < x->count && !st; i++) {
        if (x->dtype == TDM_STRING) {
            int64_t k = key_index(&l, x, i);
            ((int64_t *)ctx->out[0]->data)[i] = k >= 0 ? k : gr_attr_int(ctx->node, "default_int64", -1);
        } else {
            int64_t v = ((const int64_t *)x->data)[i];
            st = set_str(ctx, ctx->out[0], i,
                         v >= 0 && v < (int64_t)l.n ? cls[v] : gr_attr_str(ctx->node, "default_string", "_Unused"));
        }
    }
    return st;
}

tdm_status op_run_LabelEncoder(op_ctx *ctx)
{
    tdm_status st;
    if ((st = need(ctx, DT_BIT(TDM_STRING) | DT_BIT(TDM_INT64) | DT_BIT(TDM_FLOAT) | DT_BIT(TDM_DOUBLE) |
                            DT_BIT(TDM_INT16))))
        return st;
    const tdm_tensor *x = ctx->in[0];
    if (ctx->version < 2) {
        if (x->dtype != TDM_STRING && x->dtype != TDM_INT64)
            return op_fail(ctx, TDM_E_UNSUPPORTED, "LabelEncoder 1 maps strings and int64, not %s",
                           tdm_dtype_name(x->dtype));
        return label_encoder_v1(ctx, x);
    }
    mlist keys = list_attr(ctx->node, "keys"), vals = list_attr(ctx->node, "values");
    if (keys.dt == TDM_UNDEFINED || vals.dt == TDM_UNDEFINED || keys.n != vals.n)
        return op_fail(ctx, TDM_E_MODEL, "LabelEncoder needs keys and values of one length (%zu keys, %zu values)",
                       keys.n, vals.n);
    if ((keys.dt == TDM_STRING) != (x->dtype == TDM_STRING))
        return op_fail(ctx, TDM_E_RUNTIME, "input of type %s for %s keys", tdm_dtype_name(x->dtype),
                       tdm_dtype_name(keys.dt));
    if ((st = op_out(ctx, 0, vals.dt, x->rank, x->dims)))
        return st;
    for (size_t i = 0; i < x->count && !st; i++)
        st = put_value(ctx, ctx->out[0], i, &vals, key_index(&keys, x, i));
    return st;
}

tdm_status op_infer_LabelEncoder(op_infer_ctx *ctx)
{
    op_infer_copy(ctx, 0, 0);
    tdm_dtype in = ctx->n_in > 0 && ctx->in[0] ? ctx->in[0]->dtype : TDM_UNDEFINED;
    tdm_dtype out = TDM_UNDEFINED;
    if (ctx->version < 2)
        out = in == TDM_STRING ? TDM_INT64 : in == TDM_INT64 ? TDM_STRING : TDM_UNDEFINED;
    else
        out = list_attr(ctx->node, "values").dt;
    ctx->out[0].kind = TDM_KIND_TENSOR;
    ctx->out[0].dtype = out;
    return TDM_OK;
}

/* ------------------------------------------------------------ CategoryMapper */

/* cats_strings[k] <-> cats_int64s[k], either way. */
tdm_status op_run_CategoryMapper(op_ctx *ctx)
{
    tdm_status st;
    if ((st = need(ctx, DT_BIT(TDM_STRING) | DT_BIT(TDM_INT64))))
        return st;
    const tdm_tensor *x = ctx->in[0];
    char *const *cs = NULL;
    const int64_t *ci = NULL;
    int ns = ml_attr_strings(ctx->node, "cats_strings", &cs);
    int ni = gr_attr_ints(ctx->node, "cats_int64s", &ci);
    if (ns < 0 || ni < 0 || ns != ni)
        return op_fail(ctx, TDM_E_MODEL, "cats_strings (%d) and cats_int64s (%d) must have one length",
                       ns < 0 ? 0 : ns, ni < 0 ? 0 : ni);
    mlist l = x->dtype == TDM_STRING ? (mlist){TDM_STRING, (size_t)ns, cs, NULL, NULL, NULL}
                                     : (mlist){TDM_INT64, (size_t)ni, NULL, ci, NULL, NULL};
    if ((st = op_out(ctx, 0, x->dtype == TDM_STRING ? TDM_INT64 : TDM_STRING, x->rank, x->dims)))
        return st;
    for (size_t i = 0; i < x->count && !st; i++) {
        int64_t k = key_index(&l, x, i);
        if (x->dtype == TDM_STRING)
            ((int64_t *)ctx->out[0]->data)[i] = k >= 0 ? ci[k] : gr_attr_int(ctx->node, "default_int64", -1);
        else
            st = set_str(ctx, ctx->out[0], i, k >= 0 ? cs[k] : gr_attr_str(ctx->node, "default_string", "_Unused"));
    }
    return st;
}

tdm_status op_infer_CategoryMapper(op_infer_ctx *ctx)
{
    op_infer_copy(ctx, 0, 0);
    tdm_dtype in = ctx->n_in > 0 && ctx->in[0] ? ctx->in[0]->dtype : TDM_UNDEFINED;
    ctx->out[0].kind = TDM_KIND_TENSOR;
    ctx->out[0].dtype = in == TDM_STRING ? TDM_INT64 : in == TDM_INT64 ? TDM_STRING : TDM_UNDEFINED;
    return TDM_OK;
}

/* ------------------------------------------------------------- OneHotEncoder */

/* Y[..., k] = 1 where X equals category k (numbers compared as int64);
 * zeros = 0 makes an unknown category an error. */
tdm_status op_run_OneHotEncoder(op_ctx *ctx)
{
    tdm_status st;
    if ((st = need(ctx, DT_ML_NUM | DT_BIT(TDM_STRING))))
        return st;
    const tdm_tensor *x = ctx->in[0];
    char *const *cs = NULL;
    const int64_t *ci = NULL;
    int ncat = x->dtype == TDM_STRING ? ml_attr_strings(ctx->node, "cats_strings", &cs)
                                      : gr_attr_ints(ctx->node, "cats_int64s", &ci);
    if (ncat <= 0)
        return op_fail(ctx, TDM_E_MODEL, "%s is missing or empty for input of type %s",
                       x->dtype == TDM_STRING ? "cats_strings" : "cats_int64s", tdm_dtype_name(x->dtype));
    if (x->rank >= TDM_MAX_RANK)
        return op_fail(ctx, TDM_E_RUNTIME, "input X has rank %d; the output would exceed %d", x->rank, TDM_MAX_RANK);
    int zeros = (int)gr_attr_int(ctx->node, "zeros", 1);
    int64_t dims[TDM_MAX_RANK];
    memcpy(dims, x->dims, sizeof(int64_t) * (size_t)x->rank);
    dims[x->rank] = ncat;
    if ((st = op_out(ctx, 0, TDM_FLOAT, x->rank + 1, dims)))
        return st;
    float *y = ctx->out[0]->data;
    memset(y, 0, ctx->out[0]->nbytes);
    for (size_t i = 0; i < x->count; i++) {
        int64_t k = -1;
        if (cs) {
            const char *s = tensor_str(x, i);
            for (int j = 0; j < ncat && k < 0; j++)
                if (strcmp(cs[j], s) == 0)
                    k = j;
        } else {
            /* a number matches a category when its integer part equals it */
            double d = tensor_get_f64(x, i);
            int in_range = x->dtype == TDM_INT64 || (d > -9.2e18 && d < 9.2e18);
            int64_t v = x->dtype == TDM_INT64 ? ((const int64_t *)x->data)[i] : in_range ? (int64_t)d : 0;
            for (int j = 0; j < ncat && k < 0 && in_range; j++)
                if (ci[j] == v)
                    k = j;
        }
        if (k >= 0)
            y[i * (size_t)ncat + (size_t)k] = 1.0f;
        else if (!zeros)
            return op_fail(ctx, TDM_E_RUNTIME, "element %zu of X is not one of the categories (zeros = 0)", i);
    }
    return TDM_OK;
}

tdm_status op_infer_OneHotEncoder(op_infer_ctx *ctx)
{
    op_infer_copy(ctx, 0, 0);
    gr_type *o = &ctx->out[0];
    o->kind = TDM_KIND_TENSOR;
    o->dtype = TDM_FLOAT;
    if (o->rank < 0 || o->rank >= TDM_MAX_RANK) {
        o->rank = -1;
        return TDM_OK;
    }
    const int64_t *ci;
    int n = gr_attr_ints(ctx->node, "cats_int64s", &ci);
    char *const *cs;
    if (n <= 0)
        n = ml_attr_strings(ctx->node, "cats_strings", &cs);
    o->dims[o->rank] = (gr_dim){n > 0 ? n : -1, NULL};
    o->rank++;
    return TDM_OK;
}
