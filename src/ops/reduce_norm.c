/* Normalisations: BatchNormalization, InstanceNormalization,
 * LayerNormalization, LpNormalization, MeanVarianceNormalization, LRN.
 *
 * Statistics are always accumulated in double. float32 tensors are read and
 * written directly; the other float types go through a double copy and are
 * rounded once per output element. */
#include "ops/reduce.h"
#include "core/mem.h"
#include "core/pool.h"
#include "ops/elementwise.h"
#include "ops/nn.h"

#include <math.h>
#include <string.h>

/* Loads parameter input i (C or `alt` elements) as double. */
static tdm_status load_param(op_ctx *ctx, int i, const char *what, size_t c, size_t alt, double **out)
{
    *out = NULL;
    tdm_status st = op_red_check(ctx, i, DT_FLOATS);
    if (st)
        return st;
    const tdm_tensor *t = ctx->in[i];
    if (t->count != c && t->count != alt)
        return op_fail(ctx, TDM_E_RUNTIME, "input %d ('%s') has %zu elements where %zu are expected", i, what,
                       t->count, c);
    return op_red_load_f64(ctx, t, out);
}

/* Mean and population variance of n doubles or floats (two passes). */
static void stats_f32(const float *x, size_t n, double *mean, double *var)
{
    double s0 = 0, s1 = 0;
    size_t j = 0;
    for (; j + 2 <= n; j += 2) {
        s0 += x[j];
        s1 += x[j + 1];
    }
    if (j < n)
        s0 += x[j];
    double m = n ? (s0 + s1) / (double)n : 0;
    double q0 = 0, q1 = 0;
    for (j = 0; j + 2 <= n; j += 2) {
        double d0 = x[j] - m, d1 = x[j + 1] - m;
        q0 += d0 * d0;
        q1 += d1 * d1;
    }
    if (j < n)
        q0 += (x[j] - m) * (x[j] - m);
    *mean = m;
    *var = n ? (q0 + q1) / (double)n : 0;
}

static void stats_f64(const double *x, size_t n, double *mean, double *var)
{
    double s = 0, q = 0;
    for (size_t j = 0; j < n; j++)
        s += x[j];
    double m = n ? s / (double)n : 0;
    for (size_t j = 0; j < n; j++)
        q += (x[j] - m) * (x[j] - m);
    *mean = m;
    *var = n ? q / (double)n : 0;
}

/* ---- BatchNormalization ---- */

/* Inference BatchNormalization of float32 planes (y = x * a + b per
 * channel), split over the planes. */
typedef struct bn_job {
    const float *x;
    float *y;
    const double *a, *b;
    size_t c, inner, planes, per;
    int avx2;
    const op_fuse *fuse; /* applied per piece while it is in cache, or NULL */
} bn_job;

/* Elements of a plane computed before the fused program runs over them. */
#define BN_PIECE 2048

static void bn_task(void *arg, size_t t)
{
    const bn_job *j = arg;
    size_t p0 = t * j->per, p1 = p0 + j->per < j->planes ? p0 + j->per : j->planes;
    for (size_t p = p0; p < p1; p++) {
        size_t ch = p % j->c;
        float fa = (float)j->a[ch], fb = (float)j->b[ch];
        const size_t piece = j->fuse ? BN_PIECE : j->inner;
        for (size_t k0 = 0; k0 < j->inner; k0 += piece) {
            const size_t n = j->inner - k0 < piece ? j->inner - k0 : piece, at = p * j->inner + k0;
            const float *px = j->x + at;
            float *py = j->y + at;
            if (j->avx2) {
                op_ew_affine_avx2(px, py, n, fa, fb);
            } else {
                for (size_t k = 0; k < n; k++)
                    py[k] = px[k] * fa + fb;
            }
            if (j->fuse)
                op_fuse_apply(j->fuse, py, at, n);
        }
    }
}

tdm_status op_run_BatchNormalization(op_ctx *ctx)
{
    tdm_status st = op_red_check(ctx, 0, DT_FLOATS);
    if (st)
        return st;
    const tdm_tensor *x = ctx->in[0];
    if (x->rank < 1)
        return op_fail(ctx, TDM_E_RUNTIME, "input 0 ('X') must have rank 1 or more");
    size_t nb = (size_t)x->dims[0], c = x->rank > 1 ? (size_t)x->dims[1] : 1, inner, alt;
    if ((st = op_red_prod(ctx, x->dims, 2, x->rank, &inner)))
        return st;
    /* opset 7 with spatial = 0: parameters per element of X[0] */
    int per_elem = ctx->version < 9 && gr_attr_int(ctx->node, "spatial", 1) == 0;
    alt = per_elem ? c * inner : c;
    double eps = gr_attr_float(ctx->node, "epsilon", 1e-5f);
    int training = ctx->version >= 14 && gr_attr_int(ctx->node, "training_mode", 0) != 0;
    double *sc = NULL, *bi = NULL, *mn = NULL, *vr = NULL, *a = NULL, *b = NULL, *xb = NULL;
    if ((st = load_param(ctx, 1, "scale", c, alt, &sc)) || (st = load_param(ctx, 2, "B", c, alt, &bi)) ||
        (st = load_param(ctx, 3, "input_mean", c, alt, &mn)) || (st = load_param(ctx, 4, "input_var", c, alt, &vr)))
        goto done;
    size_t np = ctx->in[1]->count;
    if (ctx->in[2]->count != np || ctx->in[3]->count != np || ctx->in[4]->count != np) {
        st = op_fail(ctx, TDM_E_RUNTIME, "inputs 'scale', 'B', 'input_mean' and 'input_var' differ in size");
        goto done;
    }
    per_elem = np != c; /* load_param allowed c * inner only with spatial = 0 */
    if ((st = op_out(ctx, 0, x->dtype, x->rank, x->dims)))
        goto done;
    if ((st = op_red_alloc_f64(ctx, np, &a)) || (st = op_red_alloc_f64(ctx, np, &b)))
        goto done;
    if (x->dtype != TDM_FLOAT && (st = op_red_load_f64(ctx, x, &xb)))
        goto done;
    if (training) {
        /* batch statistics per channel, and the running averages */
        double mom = gr_attr_float(ctx->node, "momentum", 0.9f);
        size_t per = nb * inner;
        for (size_t ch = 0; ch < c; ch++) {
            double s = 0, q = 0;
            for (size_t n = 0; n < nb; n++) {
                size_t off = (n * c + ch) * inner;
                for (size_t j = 0; j < inner; j++)
                    s += xb ? xb[off + j] : ((const float *)x->data)[off + j];
            }
            double m = per ? s / (double)per : 0;
            for (size_t n = 0; n < nb; n++) {
                size_t off = (n * c + ch) * inner;
                for (size_t j = 0; j < inner; j++) {
                    double d = (xb ? xb[off + j] : ((const float *)x->data)[off + j]) - m;
                    q += d * d;
                }
            }
            double v = per ? q / (double)per : 0;
            a[ch] = m; /* batch mean and variance, kept in a and b for now */
            b[ch] = v;
        }
        for (int o = 1; o <= 2; o++) {
            if (!op_out_wanted(ctx, o))
                continue;
            const tdm_tensor *ref = ctx->in[o == 1 ? 3 : 4];
            if ((st = op_out(ctx, o, ref->dtype, ref->rank, ref->dims)))
                goto done;
            for (size_t ch = 0; ch < c; ch++) {
                double run = (o == 1 ? mn[ch] : vr[ch]) * mom + (o == 1 ? a[ch] : b[ch]) * (1.0 - mom);
                op_red_put_f64(ctx->out[o], ch, 1, &run);
            }
        }
        for (size_t ch = 0; ch < c; ch++) {
            mn[ch] = a[ch];
            vr[ch] = b[ch];
        }
    }
    for (size_t k = 0; k < np; k++) {
        a[k] = sc[k] / sqrt(vr[k] + eps);
        b[k] = bi[k] - mn[k] * a[k];
    }
    if (!xb && !per_elem && nb * c > 0) {
        bn_job j = {x->data, ctx->out[0]->data, a, b, c, inner, nb * c, 0, gemm_avx2_usable(), ctx->fuse};
        size_t tasks = pool_tasks(ctx->threads, x->count * sizeof(float) * 2, POOL_MIN_BYTES);
        j.per = (j.planes + tasks - 1) / tasks;
        pool_run(ctx->threads, (j.planes + j.per - 1) / j.per, bn_task, &j);
    } else if (!xb) {
        const float *px = x->data;
        float *py = ctx->out[0]->data;
        for (size_t n = 0; n < nb; n++) {
            for (size_t ch = 0; ch < c; ch++) {
                size_t off = (n * c + ch) * inner;
                if (per_elem) {
                    const double *ar = a + ch * inner, *br = b + ch * inner;
                    for (size_t j = 0; j < inner; j++)
                        py[off + j] = (float)(px[off + j] * ar[j] + br[j]);
                } else {
                    float fa = (float)a[ch], fb = (float)b[ch];
                    for (size_t j = 0; j < inner; j++)
                        py[off + j] = px[off + j] * fa + fb;
                }
            }
        }
    } else {
        for (size_t n = 0; n < nb; n++)
            for (size_t ch = 0; ch < c; ch++) {
                size_t off = (n * c + ch) * inner;
                for (size_t j = 0; j < inner; j++) {
                    size_t p = per_elem ? ch * inner + j : ch;
                    xb[off + j] = xb[off + j] * a[p] + b[p];
                }
            }
        op_red_put_f64(ctx->out[0], 0, x->count, xb);
    }
done:
    mem_free(sc);
    mem_free(bi);
    mem_free(mn);
    mem_free(vr);
    mem_free(a);
    mem_free(b);
    mem_free(xb);
    return st;
}

tdm_status op_infer_BatchNormalization(op_infer_ctx *ctx)
{
    op_infer_copy(ctx, 0, 0);
    if (ctx->version >= 14 && gr_attr_int(ctx->node, "training_mode", 0)) {
        op_infer_copy(ctx, 1, 3);
        op_infer_copy(ctx, 2, 4);
    }
    return TDM_OK;
}

/* ---- InstanceNormalization ---- */

tdm_status op_run_InstanceNormalization(op_ctx *ctx)
{
    tdm_status st = op_red_check(ctx, 0, DT_FLOATS);
    if (st)
        return st;
    const tdm_tensor *x = ctx->in[0];
    if (x->rank < 2)
        return op_fail(ctx, TDM_E_RUNTIME, "input 0 must have rank 2 or more");
    size_t nb = (size_t)x->dims[0], c = (size_t)x->dims[1], inner;
    if ((st = op_red_prod(ctx, x->dims, 2, x->rank, &inner)))
        return st;
    double eps = gr_attr_float(ctx->node, "epsilon", 1e-5f);
    double *sc = NULL, *bi = NULL, *xb = NULL;
    if ((st = load_param(ctx, 1, "scale", c, c, &sc)) || (st = load_param(ctx, 2, "B", c, c, &bi)))
        goto done;
    if ((st = op_out(ctx, 0, x->dtype, x->rank, x->dims)))
        goto done;
    if (x->dtype != TDM_FLOAT && (st = op_red_load_f64(ctx, x, &xb)))
        goto done;
    for (size_t n = 0; n < nb; n++) {
        for (size_t ch = 0; ch < c; ch++) {
            size_t off = (n * c + ch) * inner;
            double m, v;
            if (xb)
                stats_f64(xb + off, inner, &m, &v);
            else
                stats_f32((const float *)x->data + off, inner, &m, &v);
            double a = sc[ch] / sqrt(v + eps), b = bi[ch] - m * a;
            if (xb) {
                for (size_t j = 0; j < inner; j++)
                    xb[off + j] = xb[off + j] * a + b;
            } else {
                const float *px = (const float *)x->data + off;
                float *py = (float *)ctx->out[0]->data + off;
                float fa = (float)a, fb = (float)b;
                for (size_t j = 0; j < inner; j++)
                    py[j] = px[j] * fa + fb;
            }
        }
    }
    if (xb)
        op_red_put_f64(ctx->out[0], 0, x->count, xb);
done:
    mem_free(sc);
    mem_free(bi);
    mem_free(xb);
    return st;
}

/* ---- LayerNormalization ---- */

/* Expands parameter input i (broadcastable to dims[axis..rank)) to cols
 * doubles; NULL input gives `dflt` everywhere. */
static tdm_status ln_param(op_ctx *ctx, int i, const tdm_tensor *x, int axis, size_t cols, double dflt, double **out)
{
    tdm_status st = op_red_alloc_f64(ctx, cols, out);
    if (st)
        return st;
    const tdm_tensor *p = i < ctx->n_in ? ctx->in[i] : NULL;
    if (!p) {
        for (size_t k = 0; k < cols; k++)
            (*out)[k] = dflt;
        return TDM_OK;
    }
    if ((st = op_red_check(ctx, i, DT_FLOATS)))
        return st;
    if (p->count == cols) {
        op_red_row_f64(p, 0, cols, *out);
        return TDM_OK;
    }
    int r = x->rank - axis;
    const int64_t *nd = x->dims + axis;
    int64_t bdims[TDM_MAX_RANK];
    int rb;
    if (p->rank > r || op_broadcast(r, nd, p->rank, p->dims, &rb, bdims) || !shape_equal(rb, bdims, r, nd)) {
        char s1[128], s2[128];
        return op_fail(ctx, TDM_E_RUNTIME, "input %d has shape %s, which does not broadcast to %s", i,
                       shape_str(p->rank, p->dims, s1, sizeof s1), shape_str(r, nd, s2, sizeof s2));
    }
    int64_t strides[TDM_MAX_RANK];
    op_bcast_strides(r, nd, p->rank, p->dims, strides);
    for (size_t k = 0; k < cols; k++)
        op_red_row_f64(p, (size_t)op_bcast_offset(k, r, nd, strides), 1, *out + k);
    return TDM_OK;
}

static tdm_dtype ln_stash_dtype(const gr_node *n)
{
    int64_t t = gr_attr_int(n, "stash_type", TDM_FLOAT);
    return t == TDM_BFLOAT16 || t == TDM_DOUBLE || t == TDM_FLOAT16 ? (tdm_dtype)t : TDM_FLOAT;
}

/* float32 LayerNormalization split over rows. */
typedef struct ln_job {
    const float *x;
    float *y;
    const float *fs, *fbias;
    double *mean, *inv, eps;
    size_t cols, rows, per;
    int avx2;
} ln_job;

static void ln_task(void *arg, size_t t)
{
    const ln_job *j = arg;
    const size_t cols = j->cols;
    size_t r0 = t * j->per, r1 = r0 + j->per < j->rows ? r0 + j->per : j->rows;
    for (size_t r = r0; r < r1; r++) {
        const float *px = j->x + r * cols;
        float *py = j->y + r * cols;
        double m, v;
        if (j->avx2)
            op_ew_stats_avx2(px, cols, &m, &v);
        else
            stats_f32(px, cols, &m, &v);
        double iv = 1.0 / sqrt(v + j->eps);
        j->mean[r] = m;
        j->inv[r] = iv;
        float fm = (float)m, fi = (float)iv;
        if (j->avx2)
            op_ew_norm_row_avx2(px, py, cols, fm, fi, j->fs, j->fbias);
        else
            for (size_t k = 0; k < cols; k++)
                py[k] = (px[k] - fm) * fi * j->fs[k] + j->fbias[k];
    }
}

/* What LayerNormalization and RMSNormalization share: X (float, rank >= 1),
 * the axis, epsilon, and the rows before / columns from the axis. */
static tdm_status norm_prelude(op_ctx *ctx, const tdm_tensor **xp, int *axis, double *eps, size_t *rows,
                               size_t *cols)
{
    tdm_status st = op_red_check(ctx, 0, DT_FLOATS);
    if (st)
        return st;
    const tdm_tensor *x = *xp = ctx->in[0];
    if (x->rank < 1)
        return op_fail(ctx, TDM_E_RUNTIME, "input 0 ('X') must have rank 1 or more");
    if ((st = op_axis(ctx, gr_attr_int(ctx->node, "axis", -1), x->rank, "attribute 'axis'", axis)))
        return st;
    *eps = gr_attr_float(ctx->node, "epsilon", 1e-5f);
    if ((st = op_red_prod(ctx, x->dims, 0, *axis, rows)) || (st = op_red_prod(ctx, x->dims, *axis, x->rank, cols)))
        return st;
    return TDM_OK;
}

tdm_status op_run_LayerNormalization(op_ctx *ctx)
{
    const tdm_tensor *x;
    int axis;
    double eps;
    size_t rows, cols;
    tdm_status st = norm_prelude(ctx, &x, &axis, &eps, &rows, &cols);
    if (st)
        return st;
    double *sc = NULL, *bi = NULL, *xb = NULL, *mean = NULL, *inv = NULL;
    float *fs = NULL, *fbias = NULL;
    if (ctx->n_in < 2 || !ctx->in[1]) {
        st = op_fail(ctx, TDM_E_MODEL, "input 1 ('Scale') is missing");
        goto done;
    }
    if ((st = ln_param(ctx, 1, x, axis, cols, 1.0, &sc)) || (st = ln_param(ctx, 2, x, axis, cols, 0.0, &bi)))
        goto done;
    if ((st = op_out(ctx, 0, x->dtype, x->rank, x->dims)))
        goto done;
    int64_t sdims[TDM_MAX_RANK];
    for (int k = 0; k < x->rank; k++)
        sdims[k] = k < axis ? x->dims[k] : 1;
    tdm_dtype sdt = ln_stash_dtype(ctx->node);
    for (int o = 1; o <= 2; o++)
        if (op_out_wanted(ctx, o) && (st = op_out(ctx, o, sdt, x->rank, sdims)))
            goto done;
    if ((st = op_red_alloc_f64(ctx, rows, &mean)) || (st = op_red_alloc_f64(ctx, rows, &inv)))
        goto done;
    if (x->dtype == TDM_FLOAT) {
        fs = mem_calloc(cols + 1, sizeof *fs);
        fbias = mem_calloc(cols + 1, sizeof *fbias);
        if (!fs || !fbias) {
            st = op_fail(ctx, TDM_E_NOMEM, "out of memory");
            goto done;
        }
        for (size_t k = 0; k < cols; k++) {
            fs[k] = (float)sc[k];
            fbias[k] = (float)bi[k];
        }
        ln_job j = {x->data, ctx->out[0]->data, fs, fbias, mean, inv, eps, cols, rows, 0, gemm_avx2_usable()};
        size_t tasks = pool_tasks(ctx->threads, rows * cols * sizeof(float) * 2, POOL_MIN_BYTES);
        j.per = (rows + tasks - 1) / tasks;
        if (rows)
            pool_run(ctx->threads, (rows + j.per - 1) / j.per, ln_task, &j);
    } else {
        if ((st = op_red_load_f64(ctx, x, &xb)))
            goto done;
        for (size_t r = 0; r < rows; r++) {
            double *p = xb + r * cols, m, v;
            stats_f64(p, cols, &m, &v);
            double iv = 1.0 / sqrt(v + eps);
            mean[r] = m;
            inv[r] = iv;
            for (size_t k = 0; k < cols; k++)
                p[k] = (p[k] - m) * iv * sc[k] + bi[k];
        }
        op_red_put_f64(ctx->out[0], 0, x->count, xb);
    }
    if (op_out_wanted(ctx, 1))
        op_red_put_f64(ctx->out[1], 0, rows, mean);
    if (op_out_wanted(ctx, 2))
        op_red_put_f64(ctx->out[2], 0, rows, inv);
done:
    mem_free(sc);
    mem_free(bi);
    mem_free(xb);
    mem_free(mean);
    mem_free(inv);
    mem_free(fs);
    mem_free(fbias);
    return st;
}

/* ---- GroupNormalization (18: scale and bias per group; 21: per channel) ---- */

tdm_status op_run_GroupNormalization(op_ctx *ctx)
{
    tdm_status st;
    for (int i = 0; i < 3; i++)
        if ((st = op_red_check(ctx, i, DT_FLOATS)))
            return st;
    const tdm_tensor *x = ctx->in[0], *sc = ctx->in[1], *bi = ctx->in[2];
    int64_t g = gr_attr_int(ctx->node, "num_groups", 0);
    if (x->rank < 2 || g <= 0 || x->dims[1] % g)
        return op_fail(ctx, TDM_E_RUNTIME, "num_groups (%lld) must divide the channels of an input of rank 2 or more",
                       (long long)g);
    size_t C = (size_t)x->dims[1], per = ctx->version >= 21 ? C : (size_t)g;
    if (sc->count != per || bi->count != per)
        return op_fail(ctx, TDM_E_RUNTIME, "scale and bias must have %zu values (one per %s)", per,
                       ctx->version >= 21 ? "channel" : "group");
    double eps = gr_attr_float(ctx->node, "epsilon", 1e-5f);
    size_t N = (size_t)x->dims[0], sp = C ? x->count / N / C : 0, cg = C / (size_t)g, len = cg * sp;
    double *xb = NULL;
    if ((st = op_out(ctx, 0, x->dtype, x->rank, x->dims)) || (st = op_red_load_f64(ctx, x, &xb)))
        return st;
    for (size_t n = 0; n < N; n++)
        for (size_t k = 0; k < (size_t)g; k++) {
            double *p = xb + (n * C + k * cg) * sp, m, v;
            stats_f64(p, len, &m, &v);
            double iv = 1.0 / sqrt(v + eps);
            for (size_t c = 0; c < cg; c++) {
                size_t pi = per == C ? k * cg + c : k;
                double s = tensor_get_f64(sc, pi), b = tensor_get_f64(bi, pi);
                for (size_t q = 0; q < sp; q++)
                    p[c * sp + q] = (p[c * sp + q] - m) * iv * s + b;
            }
        }
    op_red_put_f64(ctx->out[0], 0, x->count, xb);
    mem_free(xb);
    return TDM_OK;
}

/* ---- RMSNormalization (23): X / sqrt(mean(X^2 over axis..) + epsilon) * scale ---- */

tdm_status op_run_RMSNormalization(op_ctx *ctx)
{
    const tdm_tensor *x;
    int axis;
    double eps;
    size_t rows, cols;
    tdm_status st = norm_prelude(ctx, &x, &axis, &eps, &rows, &cols);
    if (st)
        return st;
    double *sc = NULL, *xb = NULL;
    if (ctx->n_in < 2 || !ctx->in[1]) {
        st = op_fail(ctx, TDM_E_MODEL, "input 1 ('scale') is missing");
        goto done;
    }
    if ((st = ln_param(ctx, 1, x, axis, cols, 1.0, &sc)) || (st = op_out(ctx, 0, x->dtype, x->rank, x->dims)) ||
        (st = op_red_load_f64(ctx, x, &xb)))
        goto done;
    for (size_t r = 0; r < rows; r++) {
        double *p = xb + r * cols, ss = 0;
        for (size_t k = 0; k < cols; k++)
            ss += p[k] * p[k];
        double iv = 1.0 / sqrt(ss / (double)(cols ? cols : 1) + eps);
        for (size_t k = 0; k < cols; k++)
            p[k] = p[k] * iv * sc[k];
    }
    op_red_put_f64(ctx->out[0], 0, x->count, xb);
done:
    mem_free(sc);
    mem_free(xb);
    return st;
}

tdm_status op_infer_LayerNormalization(op_infer_ctx *ctx)
{
    op_infer_copy(ctx, 0, 0);
    const gr_type *t = ctx->n_in > 0 ? ctx->in[0] : NULL;
    if (!t)
        return TDM_OK;
    int64_t axis = gr_attr_int(ctx->node, "axis", -1);
    for (int o = 1; o <= 2 && o < ctx->n_out; o++) {
        gr_type *g = &ctx->out[o];
        g->kind = TDM_KIND_TENSOR;
        g->dtype = ln_stash_dtype(ctx->node);
        if (t->rank < 0)
            continue;
        int64_t a = axis < 0 ? axis + t->rank : axis;
        if (a < 0 || a >= t->rank)
            continue;
        g->rank = t->rank;
        for (int k = 0; k < t->rank; k++)
            g->dims[k] = k < a ? t->dims[k] : (gr_dim){1, NULL};
    }
    return TDM_OK;
}

/* ---- LpNormalization ---- */

tdm_status op_run_LpNormalization(op_ctx *ctx)
{
    tdm_status st = op_red_check(ctx, 0, DT_FLOATS);
    if (st)
        return st;
    const tdm_tensor *x = ctx->in[0];
    if (x->rank < 1)
        return op_fail(ctx, TDM_E_RUNTIME, "input 0 must have rank 1 or more");
    int axis;
    if ((st = op_axis(ctx, gr_attr_int(ctx->node, "axis", -1), x->rank, "attribute 'axis'", &axis)))
        return st;
    int64_t p = gr_attr_int(ctx->node, "p", 2);
    if (p != 1 && p != 2)
        return op_fail(ctx, TDM_E_MODEL, "attribute 'p' is %lld; only 1 and 2 are defined", (long long)p);
    size_t outer, n = (size_t)x->dims[axis], inner;
    if ((st = op_red_prod(ctx, x->dims, 0, axis, &outer)) || (st = op_red_prod(ctx, x->dims, axis + 1, x->rank, &inner)))
        return st;
    if ((st = op_out(ctx, 0, x->dtype, x->rank, x->dims)))
        return st;
    double *xb = NULL, *acc = NULL;
    if ((st = op_red_load_f64(ctx, x, &xb)) || (st = op_red_alloc_f64(ctx, inner, &acc)))
        goto done;
    for (size_t a = 0; a < outer; a++) {
        double *blk = xb + a * n * inner;
        memset(acc, 0, inner * sizeof *acc);
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < inner; j++) {
                double v = blk[i * inner + j];
                acc[j] += p == 1 ? fabs(v) : v * v;
            }
        if (p == 2)
            for (size_t j = 0; j < inner; j++)
                acc[j] = sqrt(acc[j]);
        /* a zero norm gives zeros (the ONNX reference since 1.16), not 0/0 */
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < inner; j++)
                blk[i * inner + j] = acc[j] == 0 ? 0.0 : blk[i * inner + j] / acc[j];
    }
    op_red_put_f64(ctx->out[0], 0, x->count, xb);
done:
    mem_free(xb);
    mem_free(acc);
    return st;
}

/* ---- MeanVarianceNormalization ---- */

tdm_status op_run_MeanVarianceNormalization(op_ctx *ctx)
{
    tdm_status st = op_red_check(ctx, 0, DT_FLOATS);
    if (st)
        return st;
    const tdm_tensor *x = ctx->in[0];
    unsigned char red[TDM_MAX_RANK];
    memset(red, 0, sizeof red);
    const int64_t *axes;
    static const int64_t dflt[3] = {0, 2, 3};
    int na = gr_attr_ints(ctx->node, "axes", &axes);
    if (na < 0) {
        axes = dflt;
        na = 3;
    }
    for (int k = 0; k < na; k++) {
        int64_t a = axes[k] < 0 ? axes[k] + x->rank : axes[k];
        if (a < 0 || a >= x->rank)
            return op_fail(ctx, TDM_E_RUNTIME, "axis %lld of 'axes' is out of range for rank %d", (long long)axes[k],
                           x->rank);
        red[a] = 1;
    }
    if ((st = op_out(ctx, 0, x->dtype, x->rank, x->dims)))
        return st;
    if (x->count == 0)
        return TDM_OK;
    size_t ocount = 1, rcount = 1; /* both divide x->count, which is not 0 */
    for (int k = 0; k < x->rank; k++) {
        if (red[k])
            rcount *= (size_t)x->dims[k];
        else
            ocount *= (size_t)x->dims[k];
    }
    double *xb = NULL, *m = NULL, *q = NULL;
    if ((st = op_red_load_f64(ctx, x, &xb)) || (st = op_red_alloc_f64(ctx, ocount, &m)) ||
        (st = op_red_alloc_f64(ctx, ocount, &q)))
        goto done;
    op_red_iter it;
    op_red_iter_init(&it, x->rank, x->dims, red);
    for (size_t r = 0; r < it.rows; r++, op_red_iter_next(&it)) {
        const double *row = xb + it.in_off;
        for (size_t j = 0; j < it.n; j++) {
            size_t o = it.out_off + (it.inner_red ? 0 : j);
            m[o] += row[j];
            q[o] += row[j] * row[j];
        }
    }
    for (size_t o = 0; o < ocount; o++) {
        m[o] /= (double)rcount;
        double v = q[o] / (double)rcount - m[o] * m[o];
        q[o] = 1.0 / (sqrt(v > 0 ? v : 0) + 1e-9);
    }
    op_red_iter_init(&it, x->rank, x->dims, red);
    for (size_t r = 0; r < it.rows; r++, op_red_iter_next(&it)) {
        double *row = xb + it.in_off;
        for (size_t j = 0; j < it.n; j++) {
            size_t o = it.out_off + (it.inner_red ? 0 : j);
            row[j] = (row[j] - m[o]) * q[o];
        }
    }
    op_red_put_f64(ctx->out[0], 0, x->count, xb);
done:
    mem_free(xb);
    mem_free(m);
    mem_free(q);
    return st;
}

/* ---- LRN ---- */

tdm_status op_run_LRN(op_ctx *ctx)
{
    tdm_status st = op_red_check(ctx, 0, DT_FLOATS);
    if (st)
        return st;
    const tdm_tensor *x = ctx->in[0];
    if (x->rank < 2)
        return op_fail(ctx, TDM_E_RUNTIME, "input 0 must have rank 2 or more");
    int64_t size = gr_attr_int(ctx->node, "size", 0);
    if (size < 1)
        return op_fail(ctx, TDM_E_MODEL, "attribute 'size' must be 1 or more, not %lld", (long long)size);
    double alpha = gr_attr_float(ctx->node, "alpha", 1e-4f), beta = gr_attr_float(ctx->node, "beta", 0.75f),
           bias = gr_attr_float(ctx->node, "bias", 1.0f);
    size_t nb = (size_t)x->dims[0], c = (size_t)x->dims[1], inner;
    if ((st = op_red_prod(ctx, x->dims, 2, x->rank, &inner)))
        return st;
    if ((st = op_out(ctx, 0, x->dtype, x->rank, x->dims)))
        return st;
    double *xb = NULL, *sq = NULL, *yb = NULL;
    if ((st = op_red_load_f64(ctx, x, &xb)) || (st = op_red_alloc_f64(ctx, c * inner, &sq)) ||
        (st = op_red_alloc_f64(ctx, x->count, &yb)))
        goto done;
    int64_t lo = (size - 1) / 2, hi = size / 2; /* floor and ceil of (size-1)/2 */
    for (size_t n = 0; n < nb; n++) {
        const double *px = xb + n * c * inner;
        double *py = yb + n * c * inner;
        for (size_t k = 0; k < c * inner; k++)
            sq[k] = px[k] * px[k];
        for (size_t ch = 0; ch < c; ch++) {
            size_t c0 = (int64_t)ch - lo < 0 ? 0 : ch - (size_t)lo;
            size_t c1 = ch + (size_t)hi >= c ? c - 1 : ch + (size_t)hi;
            double *yr = py + ch * inner;
            for (size_t j = 0; j < inner; j++)
                yr[j] = 0;
            for (size_t cc = c0; cc <= c1; cc++)
                for (size_t j = 0; j < inner; j++)
                    yr[j] += sq[cc * inner + j];
            for (size_t j = 0; j < inner; j++)
                yr[j] = px[ch * inner + j] / pow(bias + alpha / (double)size * yr[j], beta);
        }
    }
    op_red_put_f64(ctx->out[0], 0, x->count, yb);
done:
    mem_free(xb);
    mem_free(sq);
    mem_free(yb);
    return st;
}
