/* Random generators: Bernoulli, RandomNormal(Like), RandomUniform(Like),
 * Multinomial.
 *
 * Draws come from splitmix64. Without a `seed` attribute a node advances the
 * session run's state (ctx->rng), so a run is reproducible but successive
 * nodes differ; with `seed` it uses its own state derived from the seed, so
 * the node gives the same values on every run. The streams are not numpy's:
 * results match other runtimes in distribution only. */
#include "ops/signal.h"
#include "core/mem.h"

#include <math.h>
#include <string.h>

#define SIG_PI 3.14159265358979323846
#define RNG_CHUNK 1024

typedef struct sig_rng {
    uint64_t *state;
    uint64_t own;
} sig_rng;

static uint64_t rng_next(sig_rng *r) { return op_splitmix64(r->state); }

/* Uniform in [0, 1) with 53 random bits. */
static double rng_uniform(sig_rng *r) { return (double)(rng_next(r) >> 11) * (1.0 / 9007199254740992.0); }

static void rng_init(op_ctx *ctx, sig_rng *r)
{
    const gr_attr *seed = gr_attr_find(ctx->node, "seed");
    if (seed && seed->type == GA_FLOAT) {
        double d = seed->f;
        uint64_t bits;
        memcpy(&bits, &d, sizeof bits);
        r->own = bits ^ 0x5851f42d4c957f2dull;
        r->state = &r->own;
        (void)rng_next(r); /* decorrelate nearby seeds */
    } else if (ctx->rng) {
        r->state = ctx->rng;
    } else {
        r->own = 0x853c49e6748fea9bull;
        r->state = &r->own;
    }
}

/* Standard normal pairs by Box–Muller. */
static void rng_normals(sig_rng *r, double *out, size_t n)
{
    for (size_t i = 0; i < n; i += 2) {
        double u1 = 1.0 - rng_uniform(r), u2 = rng_uniform(r); /* u1 in (0, 1] */
        double rad = sqrt(-2.0 * log(u1)), th = 2.0 * SIG_PI * u2;
        out[i] = rad * cos(th);
        if (i + 1 < n)
            out[i + 1] = rad * sin(th);
    }
}

/* The dtype attribute (a float type for RandomNormal/Uniform), or dflt. */
static tdm_status float_dtype_attr(op_ctx *ctx, tdm_dtype dflt, tdm_dtype *out)
{
    int64_t dt = gr_attr_int(ctx->node, "dtype", dflt);
    if (!(dt > 0 && dt < TDM_DTYPE_COUNT && dtype_is_float((tdm_dtype)dt)))
        return op_fail(ctx, TDM_E_MODEL, "attribute dtype %lld is not a floating-point element type", (long long)dt);
    *out = (tdm_dtype)dt;
    return TDM_OK;
}

/* Fills output 0 (already allocated) with uniform [low, high) or normal
 * (mean, scale) values. */
static tdm_status fill_random(op_ctx *ctx, int normal)
{
    sig_rng r;
    rng_init(ctx, &r);
    double a = normal ? gr_attr_float(ctx->node, "mean", 0.0f) : gr_attr_float(ctx->node, "low", 0.0f);
    double b = normal ? gr_attr_float(ctx->node, "scale", 1.0f) : gr_attr_float(ctx->node, "high", 1.0f);
    double buf[RNG_CHUNK];
    tdm_tensor *y = ctx->out[0];
    for (size_t at = 0; at < y->count; at += RNG_CHUNK) {
        size_t n = y->count - at < RNG_CHUNK ? y->count - at : RNG_CHUNK;
        if (normal) {
            rng_normals(&r, buf, n);
            for (size_t k = 0; k < n; k++)
                buf[k] = a + b * buf[k];
        } else {
            for (size_t k = 0; k < n; k++)
                buf[k] = a + (b - a) * rng_uniform(&r);
        }
        sig_store_f64(y, at, buf, n);
    }
    return TDM_OK;
}

static tdm_status run_random(op_ctx *ctx, int normal)
{
    tdm_dtype dt;
    tdm_status st = float_dtype_attr(ctx, TDM_FLOAT, &dt);
    if (st)
        return st;
    const int64_t *shape;
    int r = gr_attr_ints(ctx->node, "shape", &shape);
    if (r < 0)
        return op_fail(ctx, TDM_E_MODEL, "attribute shape is required");
    if (r > TDM_MAX_RANK)
        return op_fail(ctx, TDM_E_UNSUPPORTED, "attribute shape has rank %d, more than %d", r, TDM_MAX_RANK);
    for (int d = 0; d < r; d++)
        if (shape[d] < 0)
            return op_fail(ctx, TDM_E_MODEL, "attribute shape has a negative dimension %lld", (long long)shape[d]);
    if ((st = op_out(ctx, 0, dt, r, shape)))
        return st;
    return fill_random(ctx, normal);
}

static tdm_status run_random_like(op_ctx *ctx, int normal)
{
    const tdm_tensor *x = ctx->in[0];
    if (!x || x->kind != TDM_KIND_TENSOR)
        return op_fail(ctx, TDM_E_RUNTIME, "input 0 must be a tensor");
    tdm_dtype dt;
    tdm_status st;
    if (gr_attr_find(ctx->node, "dtype"))
        st = float_dtype_attr(ctx, TDM_FLOAT, &dt);
    else if (!dtype_is_float(x->dtype))
        st = op_fail(ctx, TDM_E_MODEL, "input 0 is %s: attribute dtype must name a floating-point output type",
                     tdm_dtype_name(x->dtype));
    else {
        st = TDM_OK;
        dt = x->dtype;
    }
    if (st)
        return st;
    if ((st = op_out(ctx, 0, dt, x->rank, x->dims)))
        return st;
    return fill_random(ctx, normal);
}

tdm_status op_run_RandomNormal(op_ctx *ctx) { return run_random(ctx, 1); }

tdm_status op_run_RandomUniform(op_ctx *ctx) { return run_random(ctx, 0); }

tdm_status op_run_RandomNormalLike(op_ctx *ctx) { return run_random_like(ctx, 1); }

tdm_status op_run_RandomUniformLike(op_ctx *ctx) { return run_random_like(ctx, 0); }

tdm_status op_run_Bernoulli(op_ctx *ctx)
{
    const tdm_tensor *x = ctx->in[0];
    if (!x || x->kind != TDM_KIND_TENSOR || !dtype_is_float(x->dtype))
        return op_fail(ctx, TDM_E_RUNTIME, "input 0 (probabilities) must be a float tensor");
    int64_t dt = gr_attr_int(ctx->node, "dtype", x->dtype);
    if (!(sig_numeric_dtype(dt) || dt == TDM_BOOL))
        return op_fail(ctx, TDM_E_MODEL, "attribute dtype %lld is not a numeric or bool element type", (long long)dt);
    tdm_status st = op_out(ctx, 0, (tdm_dtype)dt, x->rank, x->dims);
    if (st)
        return st;
    sig_rng r;
    rng_init(ctx, &r);
    double buf[RNG_CHUNK];
    tdm_tensor *y = ctx->out[0];
    for (size_t at = 0; at < x->count; at += RNG_CHUNK) {
        size_t n = x->count - at < RNG_CHUNK ? x->count - at : RNG_CHUNK;
        sig_load_f64(x, at, 1, n, buf);
        for (size_t k = 0; k < n; k++)
            buf[k] = rng_uniform(&r) < buf[k] ? 1.0 : 0.0;
        sig_store_f64(y, at, buf, n);
    }
    return TDM_OK;
}

tdm_status op_run_Multinomial(op_ctx *ctx)
{
    const tdm_tensor *x = ctx->in[0];
    if (!x || x->kind != TDM_KIND_TENSOR || !dtype_is_float(x->dtype) || x->rank != 2)
        return op_fail(ctx, TDM_E_RUNTIME, "input 0 must be a float tensor of shape [batch, classes]");
    int64_t dt = gr_attr_int(ctx->node, "dtype", TDM_INT32);
    if (dt != TDM_INT32 && dt != TDM_INT64)
        return op_fail(ctx, TDM_E_MODEL, "attribute dtype %lld must be int32 (6) or int64 (7)", (long long)dt);
    int64_t samples = gr_attr_int(ctx->node, "sample_size", 1);
    if (samples < 0)
        return op_fail(ctx, TDM_E_MODEL, "attribute sample_size must not be negative, not %lld", (long long)samples);
    int64_t batch = x->dims[0], classes = x->dims[1];
    if (classes < 1 && samples > 0 && batch > 0)
        return op_fail(ctx, TDM_E_RUNTIME, "input 0 has no classes to sample from");
    int64_t dims[2] = {batch, samples};
    tdm_status st = op_out(ctx, 0, (tdm_dtype)dt, 2, dims);
    if (st || !ctx->out[0]->count)
        return st;
    double *cdf = mem_alloc(sizeof(double) * (size_t)classes);
    if (!cdf)
        return op_fail(ctx, TDM_E_NOMEM, "out of memory for %lld classes", (long long)classes);
    sig_rng r;
    rng_init(ctx, &r);
    tdm_tensor *y = ctx->out[0];
    for (int64_t b = 0; b < batch; b++) {
        sig_load_f64(x, (size_t)b * (size_t)classes, 1, (size_t)classes, cdf);
        double mx = -INFINITY;
        for (int64_t c = 0; c < classes; c++)
            if (cdf[c] > mx)
                mx = cdf[c];
        double sum = 0;
        for (int64_t c = 0; c < classes; c++) {
            sum += cdf[c] == cdf[c] ? exp(cdf[c] - mx) : 0.0;
            cdf[c] = sum;
        }
        if (!(sum > 0) || !isfinite(sum)) {
            mem_free(cdf);
            return op_fail(ctx, TDM_E_RUNTIME, "row %lld of input 0 has no finite log-probability", (long long)b);
        }
        for (int64_t s = 0; s < samples; s++) {
            double u = rng_uniform(&r) * sum;
            size_t lo = 0, hi = (size_t)classes - 1; /* first c with cdf[c] > u */
            while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (cdf[mid] > u)
                    hi = mid;
                else
                    lo = mid + 1;
            }
            size_t o = (size_t)b * (size_t)samples + (size_t)s;
            if (dt == TDM_INT32)
                ((int32_t *)y->data)[o] = (int32_t)lo;
            else
                ((int64_t *)y->data)[o] = (int64_t)lo;
        }
    }
    mem_free(cdf);
    return TDM_OK;
}

/* ---- infer hooks ---- */

static tdm_dtype infer_dtype(const op_infer_ctx *ctx, tdm_dtype dflt)
{
    int64_t dt = gr_attr_int(ctx->node, "dtype", dflt);
    return dt > 0 && dt < TDM_DTYPE_COUNT ? (tdm_dtype)dt : TDM_UNDEFINED;
}

tdm_status op_infer_random(op_infer_ctx *ctx)
{
    gr_type *o = &ctx->out[0];
    o->kind = TDM_KIND_TENSOR;
    o->dtype = infer_dtype(ctx, TDM_FLOAT);
    const int64_t *shape;
    int r = gr_attr_ints(ctx->node, "shape", &shape);
    if (r < 0 || r > TDM_MAX_RANK)
        return TDM_OK;
    o->rank = r;
    for (int d = 0; d < r; d++)
        o->dims[d] = (gr_dim){shape[d] >= 0 ? shape[d] : -1, NULL};
    return TDM_OK;
}

tdm_status op_infer_random_like(op_infer_ctx *ctx)
{
    const gr_type *t = ctx->in[0];
    gr_type *o = &ctx->out[0];
    if (t)
        *o = *t;
    o->kind = TDM_KIND_TENSOR;
    o->optional = 0;
    o->dtype = infer_dtype(ctx, t ? t->dtype : TDM_UNDEFINED);
    return TDM_OK;
}

tdm_status op_infer_Bernoulli(op_infer_ctx *ctx) { return op_infer_random_like(ctx); }

tdm_status op_infer_Multinomial(op_infer_ctx *ctx)
{
    const gr_type *t = ctx->in[0];
    gr_type *o = &ctx->out[0];
    o->kind = TDM_KIND_TENSOR;
    o->dtype = infer_dtype(ctx, TDM_INT32);
    o->rank = 2;
    o->dims[0] = t && t->rank == 2 ? t->dims[0] : (gr_dim){-1, NULL};
    int64_t s = gr_attr_int(ctx->node, "sample_size", 1);
    o->dims[1] = (gr_dim){s >= 0 ? s : -1, NULL};
    return TDM_OK;
}
