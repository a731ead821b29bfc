/* ai.onnx.ml: LinearClassifier, LinearRegressor, Normalizer and Scaler,
 * and the helpers the ml kernels share (post transforms, class labels).
 * Arithmetic as onnxruntime's CPU kernels: X read as float (double too),
 * scores and outputs in float. */
#include "ops/ml.h"
#include "core/mem.h"

#include <math.h>
#include <string.h>

/* ------------------------------------------------------------ shared helpers */

int ml_attr_strings(const gr_node *n, const char *name, char *const **vals)
{
    const gr_attr *a = gr_attr_find(n, name);
    if (!a || a->type != GA_STRINGS)
        return -1;
    *vals = a->strings;
    return (int)a->n;
}

tdm_status ml_post_attr(op_ctx *ctx, ml_post *out)
{
    static const char *const names[] = {"NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT"};
    const gr_attr *a = gr_attr_find(ctx->node, "post_transform");
    *out = ML_POST_NONE;
    if (!a)
        return TDM_OK;
    if (a->type == GA_INT) {
        if (a->i < 0 || a->i > ML_POST_PROBIT)
            return op_fail(ctx, TDM_E_MODEL, "post_transform %lld is not one of 0 to 4", (long long)a->i);
        *out = (ml_post)a->i;
        return TDM_OK;
    }
    const char *s = a->type == GA_STRING && a->s ? a->s : "";
    for (int k = 0; k <= ML_POST_PROBIT; k++)
        if (strcmp(s, names[k]) == 0) {
            *out = (ml_post)k;
            return TDM_OK;
        }
    return op_fail(ctx, TDM_E_MODEL,
                   "post_transform '%.32s' is not NONE, SOFTMAX, LOGISTIC, SOFTMAX_ZERO or PROBIT", s);
}

float ml_logistic(float v)
{
    float e = 1.0f / (1.0f + expf(-fabsf(v)));
    return v < 0 ? 1.0f - e : e;
}

/* The inverse error function by the approximation onnxruntime uses
 * (Winitzki's, a = 0.147), so that PROBIT matches it. */
static float erf_inv(float x)
{
    float sgn = x < 0 ? -1.0f : 1.0f;
    x = (1.0f - x) * (1.0f + x);
    float lg = logf(x);
    float v = 2.0f / (3.14159f * 0.147f) + 0.5f * lg;
    float v2 = 1.0f / 0.147f * lg;
    float v3 = -v + sqrtf(v * v - v2);
    return sgn * sqrtf(v3);
}

float ml_probit(float v) { return 1.41421356f * erf_inv(2.0f * v - 1.0f); }

void ml_post_row(ml_post post, float *s, size_t n)
{
    switch (post) {
    case ML_POST_NONE:
        break;
    case ML_POST_LOGISTIC:
        for (size_t j = 0; j < n; j++)
            s[j] = ml_logistic(s[j]);
        break;
    case ML_POST_PROBIT:
        for (size_t j = 0; j < n; j++)
            s[j] = ml_probit(s[j]);
        break;
    case ML_POST_SOFTMAX: {
        float mx = -3.402823466e38f, sum = 0.0f;
        for (size_t j = 0; j < n; j++)
            mx = s[j] > mx ? s[j] : mx;
        for (size_t j = 0; j < n; j++) {
            s[j] = expf(s[j] - mx);
            sum += s[j];
        }
        for (size_t j = 0; j < n; j++)
            s[j] /= sum;
        break;
    }
    case ML_POST_SOFTMAX_ZERO: {
        /* as SOFTMAX, but a zero score stays zero */
        float mx = -3.402823466e38f, sum = 0.0f;
        for (size_t j = 0; j < n; j++)
            mx = s[j] > mx ? s[j] : mx;
        float e_neg_max = expf(-mx);
        for (size_t j = 0; j < n; j++) {
            if (s[j] > 0.0000001f || s[j] < -0.0000001f) {
                s[j] = expf(s[j] - mx);
                sum += s[j];
            } else {
                s[j] *= e_neg_max;
            }
        }
        for (size_t j = 0; j < n; j++)
            s[j] = sum == 0.0f ? 0.5f : s[j] / sum;
        break;
    }
    }
}

tdm_status ml_rows(op_ctx *ctx, const tdm_tensor *x, int64_t *n, int64_t *c)
{
    if (!x || x->kind != TDM_KIND_TENSOR)
        return op_fail(ctx, TDM_E_RUNTIME, "input X must be a tensor");
    if (x->rank < 1)
        return op_fail(ctx, TDM_E_RUNTIME, "input X must have rank 1 or more, not a scalar");
    if (x->rank == 1) {
        *n = 1;
        *c = x->dims[0];
        return TDM_OK;
    }
    *n = x->dims[0];
    *c = 1;
    for (int d = 1; d < x->rank; d++)
        *c *= x->dims[d];
    return TDM_OK;
}

void ml_labels(const gr_node *node, const char *ints_name, const int64_t **ints, char *const **strs, size_t *n)
{
    *ints = NULL;
    *strs = NULL;
    *n = 0;
    int k = gr_attr_ints(node, ints_name, ints);
    if (k > 0) {
        *n = (size_t)k;
        return;
    }
    *ints = NULL;
    k = ml_attr_strings(node, "classlabels_strings", strs);
    if (k > 0)
        *n = (size_t)k;
    else
        *strs = NULL;
}

tdm_status ml_put_label(op_ctx *ctx, tdm_tensor *y, size_t i, const int64_t *ints, char *const *strs, int64_t k)
{
    if (strs) {
        char *s = mem_strdup(strs[k]);
        if (!s)
            return op_fail(ctx, TDM_E_NOMEM, "out of memory for a label");
        ((char **)y->data)[i] = s;
    } else {
        ((int64_t *)y->data)[i] = ints ? ints[k] : k;
    }
    return TDM_OK;
}

/* X[i] as float, as the ml kernels read every numeric X. */
static float x_at(const tdm_tensor *x, size_t i)
{
    switch (x->dtype) {
    case TDM_FLOAT: return ((const float *)x->data)[i];
    case TDM_DOUBLE: return (float)((const double *)x->data)[i];
    default: return (float)tensor_get_f64(x, i);
    }
}

static tdm_status check_num(op_ctx *ctx, const tdm_tensor *x)
{
    if (!x || x->kind != TDM_KIND_TENSOR || !(DT_BIT(x->dtype) & DT_ML_NUM))
        return op_fail(ctx, TDM_E_UNSUPPORTED, "input X must be a float, double, int64 or int32 tensor, not %s",
                       x ? tdm_dtype_name(x->dtype) : "absent");
    return TDM_OK;
}

/* The inputs and attributes both linear models read. */
typedef struct lin {
    const tdm_tensor *x;
    int64_t n, c; /* rows, features */
    ml_post post;
    const float *coef, *icpt;
    int ncoef, nicpt; /* counts; -1 when absent */
} lin;

static tdm_status lin_read(op_ctx *ctx, lin *l)
{
    tdm_status st;
    memset(l, 0, sizeof *l);
    l->x = ctx->in[0];
    if ((st = check_num(ctx, l->x)) || (st = ml_rows(ctx, l->x, &l->n, &l->c)) || (st = ml_post_attr(ctx, &l->post)))
        return st;
    l->ncoef = gr_attr_floats(ctx->node, "coefficients", &l->coef);
    l->nicpt = gr_attr_floats(ctx->node, "intercepts", &l->icpt);
    return TDM_OK;
}

/* Row i's score for coefficient row j: intercept + x . coefficients, in
 * double, rounded to float. */
static float lin_score(const lin *l, int64_t i, int64_t j)
{
    double acc = l->nicpt > 0 ? l->icpt[j] : 0.0;
    for (int64_t f = 0; f < l->c; f++)
        acc += (double)x_at(l->x, (size_t)(i * l->c + f)) * l->coef[j * l->c + f];
    return (float)acc;
}

/* ------------------------------------------------------------- LinearClassifier */

/* Y[i] = the label of the best class; Z = X coefficients^T + intercepts,
 * post-transformed. With one row of coefficients and two labels, the
 * score s is the second class's and Z gets two columns. */
tdm_status op_run_LinearClassifier(op_ctx *ctx)
{
    lin l;
    tdm_status st;
    if ((st = lin_read(ctx, &l)))
        return st;
    int64_t n = l.n, c = l.c;
    ml_post post = l.post;
    int ncoef = l.ncoef, nicpt = l.nicpt;
    const int64_t *ints;
    char *const *strs;
    size_t nlab;
    ml_labels(ctx->node, "classlabels_ints", &ints, &strs, &nlab);
    if (ncoef <= 0 || !nlab)
        return op_fail(ctx, TDM_E_MODEL, "LinearClassifier needs coefficients and class labels");
    if (c <= 0 || ncoef % c)
        return op_fail(ctx, TDM_E_RUNTIME, "%d coefficients do not divide into rows of %lld features", ncoef,
                       (long long)c);
    int64_t k = ncoef / c; /* classes scored */
    if (nicpt > 0 && nicpt != k)
        return op_fail(ctx, TDM_E_MODEL, "%d intercepts for %lld classes", nicpt, (long long)k);
    if (k > 1 && (size_t)k != nlab)
        return op_fail(ctx, TDM_E_MODEL, "%lld classes scored for %zu class labels", (long long)k, nlab);
    int second = k == 1 && nlab == 2;
    int64_t zc = second ? 2 : k;
    int64_t ydims[1] = {n}, zdims[2] = {n, zc};
    if ((st = op_out(ctx, 0, strs ? TDM_STRING : TDM_INT64, 1, ydims)) || (st = op_out(ctx, 1, TDM_FLOAT, 2, zdims)))
        return st;
    float *z = ctx->out[1]->data;
    for (int64_t i = 0; i < n; i++) {
        float *row = z + i * zc;
        for (int64_t j = 0; j < k; j++)
            row[second ? 1 : j] = lin_score(&l, i, j);
        int64_t best = 0;
        if (k == 1) {
            best = row[second ? 1 : 0] > 0 ? 1 : 0;
            if (nlab != 2) { /* labels 1/0 */
                if (strs) {
                    if (!(((char **)ctx->out[0]->data)[i] = mem_strdup(best ? "1" : "0")))
                        return op_fail(ctx, TDM_E_NOMEM, "out of memory for a label");
                } else {
                    ((int64_t *)ctx->out[0]->data)[i] = best;
                }
            }
        } else {
            for (int64_t j = 1; j < k; j++)
                if (row[j] > row[best])
                    best = j;
        }
        if ((k > 1 || nlab == 2) && (st = ml_put_label(ctx, ctx->out[0], (size_t)i, ints, strs, best)))
            return st;
        if (second) { /* onnxruntime: t = the transformed score, then [1 - t, t] */
            float t = row[1];
            ml_post_row(post == ML_POST_LOGISTIC || post == ML_POST_PROBIT ? post : ML_POST_NONE, &t, 1);
            row[0] = 1.0f - t;
            row[1] = t;
        } else if (k > 1 || post == ML_POST_PROBIT) {
            ml_post_row(post, row, (size_t)k);
        }
    }
    return TDM_OK;
}

tdm_status op_infer_ml_classifier(op_infer_ctx *ctx)
{
    const gr_node *node = ctx->node;
    const int64_t *ints;
    char *const *strs;
    size_t nlab;
    ml_labels(node, strcmp(node->op_type, "LinearClassifier") == 0 ? "classlabels_ints" : "classlabels_int64s", &ints,
              &strs, &nlab);
    const gr_type *x = ctx->n_in > 0 ? ctx->in[0] : NULL;
    gr_dim nd = {-1, NULL};
    if (x && x->rank == 1)
        nd.v = 1;
    else if (x && x->rank >= 2)
        nd = x->dims[0];
    gr_type *y = &ctx->out[0];
    y->kind = TDM_KIND_TENSOR;
    y->dtype = strs ? TDM_STRING : TDM_INT64;
    y->rank = 1;
    y->dims[0] = nd;
    if (ctx->n_out > 1) {
        gr_type *z = &ctx->out[1];
        z->kind = TDM_KIND_TENSOR;
        z->dtype = TDM_FLOAT;
        z->rank = 2;
        z->dims[0] = nd;
        z->dims[1] = (gr_dim){-1, NULL};
        if (strcmp(node->op_type, "LinearClassifier") != 0) {
            z->dims[1].v = (int64_t)nlab;
        } else {
            const float *coef;
            int ncoef = gr_attr_floats(node, "coefficients", &coef);
            if (x && x->rank >= 1 && x->dims[x->rank - 1].v > 0 && x->rank <= 2 && ncoef > 0) {
                int64_t k = ncoef / x->dims[x->rank - 1].v;
                z->dims[1].v = k == 1 && nlab == 2 ? 2 : k;
            }
        }
    }
    return TDM_OK;
}

/* -------------------------------------------------------------- LinearRegressor */

/* Y = X coefficients^T + intercepts, targets columns, post-transformed
 * per row; a single target only by PROBIT (onnxruntime applies no other
 * transform to one score). */
tdm_status op_run_LinearRegressor(op_ctx *ctx)
{
    lin l;
    tdm_status st;
    if ((st = lin_read(ctx, &l)))
        return st;
    int64_t n = l.n, c = l.c, targets = gr_attr_int(ctx->node, "targets", 1);
    int ncoef = l.ncoef, nicpt = l.nicpt;
    if (targets < 1 || ncoef < 0 || ncoef != targets * c)
        return op_fail(ctx, TDM_E_RUNTIME, "%d coefficients for %lld targets of %lld features", ncoef < 0 ? 0 : ncoef,
                       (long long)targets, (long long)c);
    if (nicpt > 0 && nicpt != targets)
        return op_fail(ctx, TDM_E_MODEL, "%d intercepts for %lld targets", nicpt, (long long)targets);
    int64_t dims[2] = {n, targets};
    if ((st = op_out(ctx, 0, TDM_FLOAT, 2, dims)))
        return st;
    float *y = ctx->out[0]->data;
    for (int64_t i = 0; i < n; i++) {
        for (int64_t j = 0; j < targets; j++)
            y[i * targets + j] = lin_score(&l, i, j);
        if (targets > 1 || l.post == ML_POST_PROBIT)
            ml_post_row(l.post, y + i * targets, (size_t)targets);
    }
    return TDM_OK;
}

void ml_infer_rows(op_infer_ctx *ctx, gr_type *o, tdm_dtype dt, int64_t cols)
{
    const gr_type *x = ctx->n_in > 0 ? ctx->in[0] : NULL;
    o->kind = TDM_KIND_TENSOR;
    o->dtype = dt;
    o->rank = 2;
    o->dims[0] = (gr_dim){x && x->rank == 1 ? 1 : -1, NULL};
    if (x && x->rank >= 2)
        o->dims[0] = x->dims[0];
    o->dims[1] = (gr_dim){cols, NULL};
}

tdm_status op_infer_LinearRegressor(op_infer_ctx *ctx)
{
    ml_infer_rows(ctx, &ctx->out[0], TDM_FLOAT, gr_attr_int(ctx->node, "targets", 1));
    return TDM_OK;
}

/* ------------------------------------------------------------------- Normalizer */

/* Each row divided by its largest value (MAX), its L1 or its L2 norm; a
 * row whose divisor is 0 stays as it is. */
tdm_status op_run_Normalizer(op_ctx *ctx)
{
    const tdm_tensor *x = ctx->in[0];
    tdm_status st;
    int64_t n, c;
    if ((st = check_num(ctx, x)) || (st = ml_rows(ctx, x, &n, &c)))
        return st;
    const char *norm = gr_attr_str(ctx->node, "norm", "MAX");
    int kind = strcmp(norm, "MAX") == 0 ? 0 : strcmp(norm, "L1") == 0 ? 1 : strcmp(norm, "L2") == 0 ? 2 : -1;
    if (kind < 0)
        return op_fail(ctx, TDM_E_MODEL, "norm '%.32s' is not MAX, L1 or L2", norm);
    if (x->rank > 2)
        return op_fail(ctx, TDM_E_RUNTIME, "input X must have rank 1 or 2, not %d", x->rank);
    if ((st = op_out(ctx, 0, TDM_FLOAT, x->rank, x->dims)))
        return st;
    float *y = ctx->out[0]->data;
    for (int64_t i = 0; i < n; i++) {
        float *row = y + i * c;
        for (int64_t j = 0; j < c; j++)
            row[j] = x_at(x, (size_t)(i * c + j));
        float d = 0.0f;
        for (int64_t j = 0; j < c; j++) {
            if (kind == 0) /* the largest value, not the largest magnitude (onnxruntime) */
                d = row[j] > d || j == 0 ? row[j] : d;
            else if (kind == 1)
                d += fabsf(row[j]);
            else
                d += row[j] * row[j];
        }
        if (kind == 2)
            d = sqrtf(d);
        for (int64_t j = 0; j < c; j++)
            row[j] = d == 0.0f ? row[j] : row[j] / d;
    }
    return TDM_OK;
}

tdm_status op_infer_ml_float_same(op_infer_ctx *ctx)
{
    op_infer_copy(ctx, 0, 0);
    ctx->out[0].kind = TDM_KIND_TENSOR;
    ctx->out[0].dtype = TDM_FLOAT;
    return TDM_OK;
}

/* ----------------------------------------------------------------------- Scaler */

/* Y = (X - offset) * scale along the last dimension; an offset or scale of
 * one value applies to every column. */
tdm_status op_run_Scaler(op_ctx *ctx)
{
    const tdm_tensor *x = ctx->in[0];
    tdm_status st;
    int64_t n, c;
    if ((st = check_num(ctx, x)) || (st = ml_rows(ctx, x, &n, &c)))
        return st;
    const float *off = NULL, *sc = NULL;
    int noff = gr_attr_floats(ctx->node, "offset", &off);
    int nsc = gr_attr_floats(ctx->node, "scale", &sc);
    int64_t last = x->dims[x->rank - 1];
    if ((noff > 1 && noff != last) || (nsc > 1 && nsc != last))
        return op_fail(ctx, TDM_E_RUNTIME,
                       "offset (%d values) and scale (%d values) must have one value or one per column (%lld)",
                       noff < 0 ? 0 : noff, nsc < 0 ? 0 : nsc, (long long)last);
    if ((st = op_out(ctx, 0, TDM_FLOAT, x->rank, x->dims)))
        return st;
    float *y = ctx->out[0]->data;
    for (size_t i = 0; i < x->count; i++) {
        size_t j = last > 0 ? i % (size_t)last : 0;
        float o = noff > 1 ? off[j] : noff == 1 ? off[0] : 0.0f;
        float s = nsc > 1 ? sc[j] : nsc == 1 ? sc[0] : 1.0f;
        y[i] = (x_at(x, i) - o) * s;
    }
    return TDM_OK;
}
