/* Resize (opsets 10, 11, 13) and Upsample (7, 9): nearest by output rows for
 * 4-byte elements (a repeated source row is copied from the row before),
 * through the generic offset gather for the other element types and for
 * extrapolated coordinates, linear and cubic as separable passes
 * in double precision, one axis at a time. The coordinate arithmetic follows
 * the ONNX reference implementation the node tests are generated with. */
#include "ops/tensor.h"
#include "core/mem.h"
#include "core/pool.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

enum { RZ_NEAREST, RZ_LINEAR, RZ_CUBIC };
enum { CT_HALF_PIXEL, CT_PYTORCH_HALF_PIXEL, CT_ALIGN_CORNERS, CT_ASYMMETRIC, CT_TF_HALF_PIXEL_FOR_NN, CT_TF_CROP,
       CT_HALF_PIXEL_SYMMETRIC };
enum { NM_ROUND_PREFER_FLOOR, NM_ROUND_PREFER_CEIL, NM_FLOOR, NM_CEIL, NM_SIMPLE };

typedef struct rz_params {
    int mode, ctm, nearest, exclude_outside, antialias;
    double cubic_a, extrapolation;
} rz_params;

/* Taps of one axis: for each output index o, ntap (index, weight) pairs and
 * whether the coordinate falls outside the crop (tf_crop_and_resize). */
typedef struct rz_axis {
    int64_t in, out;
    int ntap;
    int identity;
    int64_t *idx;
    double *w;
    unsigned char *extra;
} rz_axis;

static int parse_str(const char *s, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(s, names[i]))
            return i;
    return -1;
}

/* Original coordinate of output index x along an axis; *out_of_range set
 * for tf_crop_and_resize outside [0, in - 1]. */
static double rz_coord(const rz_params *p, double x, double scale, int64_t in, int64_t out, double roi0,
                       double roi1, int *out_of_range)
{
    double out_w = scale * (double)in, x_ori;
    *out_of_range = 0;
    switch (p->ctm) {
    case CT_ALIGN_CORNERS: x_ori = out_w == 1 ? 0.0 : x * (double)(in - 1) / (out_w - 1); break;
    case CT_ASYMMETRIC: x_ori = x / scale; break;
    case CT_TF_HALF_PIXEL_FOR_NN: x_ori = (x + 0.5) / scale; break;
    case CT_TF_CROP:
        if (out_w == 1)
            x_ori = (roi1 - roi0) * (double)(in - 1) / 2;
        else
            x_ori = x * (roi1 - roi0) * (double)(in - 1) / (out_w - 1);
        x_ori += roi0 * (double)(in - 1);
        *out_of_range = x_ori < 0 || x_ori > (double)(in - 1);
        break;
    case CT_PYTORCH_HALF_PIXEL: x_ori = out_w == 1 ? -0.5 : (x + 0.5) / scale - 0.5; break;
    case CT_HALF_PIXEL_SYMMETRIC: /* (19) the input's centre on the output's */
        x_ori = (double)in / 2 * (1 - (double)out / out_w) + (x + 0.5) / scale - 0.5;
        break;
    default: x_ori = (x + 0.5) / scale - 0.5; break;
    }
    return x_ori;
}

static int64_t clampi(int64_t v, int64_t n) { return v < 0 ? 0 : v >= n ? n - 1 : v; }

/* The cubic kernel of coefficient A at distance x. */
static double rz_cubic(double A, double x)
{
    x = fabs(x);
    if (x <= 1)
        return ((A + 2) * x - (A + 3)) * x * x + 1;
    return x < 2 ? ((A * x - 5 * A) * x + 8 * A) * x - 4 * A : 0.0;
}

/* Resize 18's antialias when downscaling (scale < 1): the linear or cubic
 * kernel stretched by 1 / scale, over 2 - 2 start taps from tap 'start'
 * (relative to the left neighbour), weights normalised to sum 1, as the
 * reference's _linear_coeffs_antialias / _cubic_coeffs_antialias. */
static int rz_aa_start(const rz_params *p, double scale)
{
    double s = scale < 1.0 ? scale : 1.0;
    return (int)floor((p->mode == RZ_LINEAR ? -1.0 : -2.0) / s) + 1;
}

static void rz_aa_coeffs(const rz_params *p, double scale, double ratio, int start, int n, double *c)
{
    double s = scale < 1.0 ? scale : 1.0, sum = 0;
    for (int t = 0; t < n; t++) {
        double arg = ((double)(start + t) - ratio) * s;
        c[t] = p->mode == RZ_LINEAR ? fmin(fmax(1 - fabs(arg), 0.0), 1.0) : rz_cubic(p->cubic_a, arg);
        sum += c[t];
    }
    for (int t = 0; t < n; t++)
        c[t] /= sum;
}

static tdm_status rz_axis_build(op_ctx *ctx, const rz_params *p, rz_axis *a, double scale, double roi0, double roi1)
{
    int aa = p->antialias && p->mode != RZ_NEAREST, aa_start = aa ? rz_aa_start(p, scale) : 0;
    if (aa && (aa_start < -(1 << 20) || !(scale > 0)))
        return op_fail(ctx, TDM_E_RUNTIME, "antialias at scale %g needs too many taps", scale);
    a->ntap = aa ? 2 - 2 * aa_start : p->mode == RZ_NEAREST ? 1 : p->mode == RZ_LINEAR ? 2 : 4;
    double *c = mem_calloc((size_t)a->ntap + 1, sizeof *c);
    if (!c)
        return op_fail(ctx, TDM_E_NOMEM, "out of memory");
    size_t n = (size_t)a->out * (size_t)a->ntap + 1;
    a->idx = mem_calloc(n, sizeof *a->idx);
    a->w = mem_calloc(n, sizeof *a->w);
    a->extra = mem_calloc((size_t)a->out + 1, 1);
    if (!a->idx || !a->w || !a->extra) {
        mem_free(c);
        return op_fail(ctx, TDM_E_NOMEM, "out of memory");
    }
    a->identity = a->in == a->out;
    double A = p->cubic_a;
    for (int64_t o = 0; o < a->out; o++) {
        int oor;
        double x = rz_coord(p, (double)o, scale, a->in, a->out, roi0, roi1, &oor);
        a->extra[o] = (unsigned char)oor;
        if (!isfinite(x))
            x = 0;
        double fl = floor(x);
        int integral = x == fl;
        double ratio = integral ? 1.0 : x - fl;
        int64_t base = (int64_t)fl - (integral ? 1 : 0);
        int64_t *ix = a->idx + o * a->ntap;
        double *w = a->w + o * a->ntap;
        if (p->mode == RZ_NEAREST) {
            int64_t k;
            if (integral) {
                k = (int64_t)x;
            } else {
                switch (p->nearest) {
                case NM_ROUND_PREFER_CEIL: k = (int64_t)fl + (ratio >= 0.5); break;
                case NM_FLOOR: k = (int64_t)fl; break;
                case NM_CEIL: k = (int64_t)fl + 1; break;
                case NM_SIMPLE: k = scale < 1 ? (int64_t)ceil(x) : (int64_t)fl; break;
                default: k = (int64_t)fl + (ratio > 0.5); break;
                }
            }
            ix[0] = clampi(k, a->in);
            w[0] = 1;
        } else {
            int64_t first;
            if (aa) {
                rz_aa_coeffs(p, scale, ratio, aa_start, a->ntap, c);
                first = base + aa_start;
            } else if (p->mode == RZ_LINEAR) {
                c[0] = 1 - ratio;
                c[1] = ratio;
                first = base;
            } else {
                double t = ratio, s = 1 - ratio;
                c[0] = ((A * (t + 1) - 5 * A) * (t + 1) + 8 * A) * (t + 1) - 4 * A;
                c[1] = ((A + 2) * t - (A + 3)) * t * t + 1;
                c[2] = ((A + 2) * s - (A + 3)) * s * s + 1;
                c[3] = ((A * (s + 1) - 5 * A) * (s + 1) + 8 * A) * (s + 1) - 4 * A;
                first = base - 1;
            }
            double sum = 0;
            for (int t = 0; t < a->ntap; t++) {
                int64_t k = first + t;
                if (p->exclude_outside && (k < 0 || k >= a->in))
                    c[t] = 0;
                sum += c[t];
            }
            for (int t = 0; t < a->ntap; t++) {
                ix[t] = clampi(first + t, a->in);
                w[t] = p->exclude_outside && sum != 0 ? c[t] / sum : c[t];
            }
        }
        if (a->ntap != 1 || ix[0] != o || a->extra[o])
            a->identity = 0;
        if (a->ntap > 1) {
            /* Exactly one unit weight on o is the identity too. */
            int one = 0;
            for (int t = 0; t < a->ntap; t++)
                if (w[t] != 0)
                    one += (w[t] == 1 && ix[t] == o) ? 1 : 2;
            if (one != 1)
                a->identity = 0;
        }
    }
    mem_free(c);
    return TDM_OK;
}

/* Nearest of 4-byte elements with no extrapolated coordinate, by output
 * rows (all axes but the last): a row whose source row is the previous
 * row's is a copy of that row (still in cache), any other one a gather
 * through the last axis's index table (a pair copy for exact 2x). Tasks
 * over ranges of rows. */
typedef struct rz_rows_job {
    const char *x; /* elements of 4 bytes, moved with memcpy (any 4-byte type) */
    char *y;
    const rz_axis *ax;
    int64_t strides[TDM_MAX_RANK]; /* of x, in elements */
    int rank;
    size_t rows, per, iw, ow;
    int twice; /* ow == 2 iw and idx[o] == o / 2 */
    const op_fuse *fuse; /* float32: the fused program, per group of rows */
} rz_rows_job;

static void rz_rows_task(void *arg, size_t t)
{
    const rz_rows_job *j = arg;
    size_t r0 = t * j->per, r1 = r0 + j->per < j->rows ? r0 + j->per : j->rows;
    const int last = j->rank - 1;
    const int64_t *ix = j->ax[last].idx;
    size_t prev = SIZE_MAX, g0 = r0; /* rows [g0, r) are written, not yet fused */
    for (size_t r = r0; r < r1; r++) {
        /* the source row: output row r's index on every axis but the last */
        size_t rem = r, src = 0;
        for (int d = last - 1; d >= 0; d--) {
            size_t n = (size_t)j->ax[d].out, o = rem % n;
            rem /= n;
            src += (size_t)j->ax[d].idx[o] * (size_t)j->strides[d];
        }
        char *dr = j->y + r * j->ow * 4;
        if (src == prev) {
            memcpy(dr, dr - j->ow * 4, j->ow * 4);
            continue;
        }
        if (j->fuse && r > g0) /* the rows before are final: a group of copies of one row */
            op_fuse_apply(j->fuse, (float *)(void *)(j->y + g0 * j->ow * 4), g0 * j->ow, (r - g0) * j->ow);
        g0 = r;
        prev = src;
        const char *sr = j->x + src * 4;
        if (j->twice) {
            for (size_t i = 0; i < j->iw; i++) {
                memcpy(dr + 8 * i, sr + 4 * i, 4);
                memcpy(dr + 8 * i + 4, sr + 4 * i, 4);
            }
        } else {
            for (size_t o = 0; o < j->ow; o++)
                memcpy(dr + 4 * o, sr + 4 * (size_t)ix[o], 4);
        }
    }
    if (j->fuse && r1 > g0)
        op_fuse_apply(j->fuse, (float *)(void *)(j->y + g0 * j->ow * 4), g0 * j->ow, (r1 - g0) * j->ow);
}

static int rz_nearest_rows(op_ctx *ctx, const tdm_tensor *x, const rz_axis *ax)
{
    const int r = x->rank;
    if (r < 1 || tdm_dtype_size(x->dtype) != 4 || x->dtype == TDM_STRING || !x->count)
        return 0;
    for (int d = 0; d < r; d++)
        for (int64_t o = 0; o < ax[d].out; o++)
            if (ax[d].extra[o])
                return 0;
    rz_rows_job j;
    memset(&j, 0, sizeof j);
    j.x = x->data;
    j.y = ctx->out[0]->data;
    j.ax = ax;
    j.rank = r;
    shape_strides(r, x->dims, j.strides);
    j.ow = (size_t)ax[r - 1].out;
    j.iw = (size_t)ax[r - 1].in;
    if (!j.ow)
        return 1;
    j.rows = ctx->out[0]->count / j.ow;
    j.twice = j.ow == 2 * j.iw;
    j.fuse = x->dtype == TDM_FLOAT ? ctx->fuse : NULL;
    for (size_t o = 0; j.twice && o < j.ow; o++)
        j.twice = (size_t)ax[r - 1].idx[o] == o / 2;
    size_t tasks = pool_tasks(ctx->threads, ctx->out[0]->nbytes * 3 / 2, POOL_MIN_BYTES);
    if (tasks > j.rows)
        tasks = j.rows;
    j.per = (j.rows + tasks - 1) / tasks;
    pool_run(tasks > 1 ? ctx->threads : 1, (j.rows + j.per - 1) / j.per, rz_rows_task, &j);
    return 1;
}

static tdm_status rz_nearest(op_ctx *ctx, const tdm_tensor *x, rz_axis *ax, const rz_params *p)
{
    if (rz_nearest_rows(ctx, x, ax))
        return TDM_OK;
    int r = x->rank;
    int64_t dims[TDM_MAX_RANK], strides[TDM_MAX_RANK];
    for (int d = 0; d < r; d++)
        dims[d] = ax[d].out;
    shape_strides(r, x->dims, strides);
    int64_t **offs = op_tensor_offs_new(r, dims);
    if (!offs)
        return op_fail(ctx, TDM_E_NOMEM, "out of memory");
    for (int d = 0; d < r; d++)
        for (int64_t o = 0; o < dims[d]; o++)
            offs[d][o] = ax[d].extra[o] ? -1 : ax[d].idx[o] * strides[d];
    unsigned char fill[16];
    memset(fill, 0, sizeof fill);
    tdm_status st = TDM_OK;
    if (x->dtype != TDM_STRING) {
        tdm_tensor *ft;
        if ((st = tensor_new(ctx->err, x->dtype, 0, NULL, &ft)) != TDM_OK) {
            mem_free(offs);
            return st;
        }
        tensor_set_f64(ft, 0, p->extrapolation);
        memcpy(fill, ft->data, tdm_dtype_size(x->dtype));
        tdm_tensor_destroy(ft);
    }
    st = op_tensor_gather_map(ctx, ctx->out[0], x, offs, x->dtype == TDM_STRING ? NULL : fill);
    mem_free(offs);
    return st;
}

/* Stores the interpolated values v (one per output element) into the
 * output, converting to its element type. */
#define RZ_STORE(T)                                                                                          \
    do {                                                                                                     \
        if (o->dtype == TDM_FLOAT) {                                                                         \
            float *dst_ = o->data;                                                                           \
            for (size_t i_ = 0; i_ < o->count; i_++)                                                         \
                dst_[i_] = (float)a[i_];                                                                     \
        } else if (dtype_is_float(o->dtype)) {                                                               \
            for (size_t i_ = 0; i_ < o->count; i_++)                                                         \
                tensor_set_f64(o, i_, (double)a[i_]);                                                        \
        } else { /* integers: round to nearest, saturate */                                                  \
            int bits_ = (int)tdm_dtype_size(o->dtype) * 8;                                                   \
            double lo_ = dtype_is_signed(o->dtype) ? -ldexp(1.0, bits_ - 1) : 0;                             \
            double hi_ = dtype_is_signed(o->dtype) ? ldexp(1.0, bits_ - 1) - 1 : ldexp(1.0, bits_) - 1;      \
            for (size_t i_ = 0; i_ < o->count; i_++) {                                                       \
                double v_ = nearbyint((double)a[i_]);                                                        \
                v_ = v_ < lo_ ? lo_ : v_ > hi_ ? hi_ : v_;                                                   \
                tensor_set_i64(o, i_, (int64_t)v_);                                                          \
            }                                                                                                \
        }                                                                                                    \
    } while (0)

/* Separable interpolation with working buffers of type T (float for 16/32-bit
 * floats and small integers, double otherwise): one pass per axis that
 * changes, last axis first. */
#define RZ_INTERP(T, NAME)                                                                                   \
    static tdm_status NAME(op_ctx *ctx, const tdm_tensor *x, rz_axis *ax, const rz_params *p)                \
    {                                                                                                        \
        int r = x->rank;                                                                                     \
        tdm_tensor *o = ctx->out[0];                                                                         \
        int64_t cur[TDM_MAX_RANK];                                                                           \
        memcpy(cur, x->dims, sizeof cur[0] * (size_t)r);                                                     \
        T *a = mem_alloc((x->count + 1) * sizeof *a), *b = NULL;                                             \
        if (!a)                                                                                              \
            return op_fail(ctx, TDM_E_NOMEM, "out of memory");                                               \
        if (x->dtype == TDM_FLOAT) {                                                                         \
            const float *s_ = x->data;                                                                       \
            for (size_t i = 0; i < x->count; i++)                                                            \
                a[i] = (T)s_[i];                                                                             \
        } else {                                                                                             \
            for (size_t i = 0; i < x->count; i++)                                                            \
                a[i] = (T)tensor_get_f64(x, i);                                                              \
        }                                                                                                    \
        for (int d = r - 1; d >= 0; d--) {                                                                   \
            if (ax[d].identity)                                                                              \
                continue;                                                                                    \
            size_t outer = 1, inner = 1;                                                                     \
            for (int k = 0; k < d; k++)                                                                      \
                outer *= (size_t)cur[k];                                                                     \
            for (int k = d + 1; k < r; k++)                                                                  \
                inner *= (size_t)cur[k];                                                                     \
            size_t nin = (size_t)cur[d], nout = (size_t)ax[d].out, total;                                    \
            if (mem_mul(outer * nout, inner, &total) || !(b = mem_alloc((total + 1) * sizeof *b))) {         \
                mem_free(a);                                                                                 \
                return op_fail(ctx, TDM_E_NOMEM, "out of memory");                                           \
            }                                                                                                \
            size_t nt = (size_t)ax[d].ntap;                                                                  \
            const int64_t *ix = ax[d].idx;                                                                   \
            const double *wt = ax[d].w;                                                                      \
            for (size_t q = 0; q < outer; q++) {                                                             \
                const T *src = a + q * nin * inner;                                                          \
                T *dst = b + q * nout * inner;                                                               \
                if (inner == 1) {                                                                            \
                    for (size_t j = 0; j < nout; j++) {                                                      \
                        T acc = 0;                                                                           \
                        for (size_t t = 0; t < nt; t++)                                                      \
                            acc += (T)wt[j * nt + t] * src[ix[j * nt + t]];                                  \
                        dst[j] = acc;                                                                        \
                    }                                                                                        \
                    continue;                                                                                \
                }                                                                                            \
                for (size_t j = 0; j < nout; j++) {                                                          \
                    T *row = dst + j * inner;                                                                \
                    memset(row, 0, inner * sizeof *row);                                                     \
                    for (size_t t = 0; t < nt; t++) {                                                        \
                        T w = (T)wt[j * nt + t];                                                             \
                        if (w == 0)                                                                          \
                            continue;                                                                        \
                        const T *srow = src + (size_t)ix[j * nt + t] * inner;                                \
                        for (size_t i = 0; i < inner; i++)                                                   \
                            row[i] += w * srow[i];                                                           \
                    }                                                                                        \
                }                                                                                            \
            }                                                                                                \
            mem_free(a);                                                                                     \
            a = b;                                                                                           \
            b = NULL;                                                                                        \
            cur[d] = ax[d].out;                                                                              \
        }                                                                                                    \
        /* Extrapolated coordinates (tf_crop_and_resize) take the fill value. */                             \
        int any = 0;                                                                                         \
        for (int d = 0; d < r; d++)                                                                          \
            for (int64_t k = 0; k < ax[d].out; k++)                                                          \
                any |= ax[d].extra[k];                                                                       \
        if (any && o->count) {                                                                               \
            int64_t idx[TDM_MAX_RANK] = {0};                                                                 \
            for (size_t i = 0; i < o->count; i++) {                                                          \
                int e = 0;                                                                                   \
                for (int d = 0; d < r && !e; d++)                                                            \
                    e = ax[d].extra[idx[d]];                                                                 \
                if (e)                                                                                       \
                    a[i] = (T)p->extrapolation;                                                              \
                for (int d = r - 1; d >= 0 && ++idx[d] == o->dims[d]; d--)                                   \
                    idx[d] = 0;                                                                              \
            }                                                                                                \
        }                                                                                                    \
        RZ_STORE(T);                                                                                         \
        mem_free(a);                                                                                         \
        return TDM_OK;                                                                                       \
    }

RZ_INTERP(float, rz_interp_f32)
RZ_INTERP(double, rz_interp_f64)

static tdm_status rz_interp(op_ctx *ctx, const tdm_tensor *x, rz_axis *ax, const rz_params *p)
{
    switch (x->dtype) {
    case TDM_FLOAT: case TDM_FLOAT16: case TDM_BFLOAT16: case TDM_INT8: case TDM_UINT8: case TDM_INT16:
    case TDM_UINT16:
        return rz_interp_f32(ctx, x, ax, p);
    default:
        return rz_interp_f64(ctx, x, ax, p);
    }
}

/* Reads a float tensor (scales or roi) into doubles; *n = -1 when absent or
 * empty. */
static tdm_status read_floats(op_ctx *ctx, int i, const char *what, double **v, int64_t *n)
{
    *v = NULL;
    *n = -1;
    const tdm_tensor *t = op_tensor_opt(ctx, i);
    if (!t || t->count == 0)
        return TDM_OK;
    if (t->kind != TDM_KIND_TENSOR || !dtype_is_float(t->dtype))
        return op_fail(ctx, TDM_E_RUNTIME, "input '%s' must be a float tensor", what);
    if (!(*v = mem_calloc(t->count + 1, sizeof **v)))
        return op_fail(ctx, TDM_E_NOMEM, "out of memory");
    for (size_t k = 0; k < t->count; k++)
        (*v)[k] = tensor_get_f64(t, k);
    *n = (int64_t)t->count;
    return TDM_OK;
}

/* Shared driver. scales/sizes: exactly one given (length = rank). */
static tdm_status rz_run(op_ctx *ctx, const tdm_tensor *x, const rz_params *p, const double *scales,
                         const int64_t *sizes, const double *roi)
{
    int r = x->rank;
    rz_axis ax[TDM_MAX_RANK];
    memset(ax, 0, sizeof ax);
    tdm_status st = TDM_OK;
    int64_t dims[TDM_MAX_RANK] = {0};
    double sc[TDM_MAX_RANK];
    for (int d = 0; d < r; d++) {
        ax[d].in = x->dims[d];
        if (sizes) {
            if (sizes[d] < 0)
                return op_fail(ctx, TDM_E_RUNTIME, "input 'sizes' entry %d is negative", d);
            dims[d] = sizes[d];
            sc[d] = x->dims[d] ? (double)sizes[d] / (double)x->dims[d] : 1.0;
        } else {
            if (!(scales[d] > 0) || !(scales[d] * (double)x->dims[d] < 9e15))
                return op_fail(ctx, TDM_E_RUNTIME, "'scales' entry %d (%g) must be positive", d, scales[d]);
            sc[d] = scales[d];
            dims[d] = (int64_t)(scales[d] * (double)x->dims[d]);
        }
        ax[d].out = dims[d];
        if (dims[d] > 0 && x->dims[d] == 0)
            return op_fail(ctx, TDM_E_RUNTIME, "cannot resize the empty axis %d to %lld", d, (long long)dims[d]);
    }
    if ((st = op_out(ctx, 0, x->dtype, r, dims)) != TDM_OK)
        return st;
    for (int d = 0; d < r && !st; d++)
        st = rz_axis_build(ctx, p, &ax[d], sc[d], roi ? roi[d] : 0.0, roi ? roi[d + r] : 1.0);
    if (!st && ctx->out[0]->count) {
        if (p->mode == RZ_NEAREST)
            st = rz_nearest(ctx, x, ax, p);
        else if (x->dtype == TDM_STRING || x->dtype == TDM_BOOL)
            st = op_fail(ctx, TDM_E_UNSUPPORTED, "%s input cannot be interpolated", tdm_dtype_name(x->dtype));
        else
            st = rz_interp(ctx, x, ax, p);
    }
    for (int d = 0; d < r; d++) {
        mem_free(ax[d].idx);
        mem_free(ax[d].w);
        mem_free(ax[d].extra);
    }
    return st;
}

static const char *const mode_names[] = {"nearest", "linear", "cubic"};

/* Resize 18: 'axes' names the axes scales/sizes/roi cover (the others keep
 * their size; roi [0, 1]); keep_aspect_ratio_policy not_larger/not_smaller
 * resizes those axes by one scale, the smallest or largest of sizes / in,
 * to round_half_up(scale * in). Rewrites the
 * vectors to the input's full rank. */
static tdm_status rz_v18(op_ctx *ctx, const tdm_tensor *x, double **scales, int64_t *nsc, int64_t **sizes,
                         int64_t *nsz, double **roi, int64_t *nroi)
{
    int r = x->rank;
    const int64_t *av;
    int na = gr_attr_ints(ctx->node, "axes", &av);
    int axes[TDM_MAX_RANK];
    if (na < 0 || na > r) {
        na = r;
        for (int d = 0; d < r; d++)
            axes[d] = d;
    } else {
        for (int k = 0; k < na; k++) {
            tdm_status st = op_axis(ctx, av[k], r, "attribute 'axes'", &axes[k]);
            if (st)
                return st;
        }
    }
    if ((*nsc >= 0 && *nsc != na) || (*nsz >= 0 && *nsz != na) || (*nroi >= 0 && *nroi != 2 * na))
        return op_fail(ctx, TDM_E_RUNTIME, "scales, sizes and roi must have one entry per axis in 'axes' (%d)", na);
    double *fsc = NULL, *froi = mem_calloc((size_t)(2 * r) + 1, sizeof *froi);
    int64_t *fsz = NULL;
    if (!froi)
        return op_fail(ctx, TDM_E_NOMEM, "out of memory");
    for (int d = 0; d < r; d++)
        froi[d + r] = 1.0;
    if (*nroi >= 0)
        for (int k = 0; k < na; k++) {
            froi[axes[k]] = (*roi)[k];
            froi[axes[k] + r] = (*roi)[k + na];
        }
    const char *pol = gr_attr_str(ctx->node, "keep_aspect_ratio_policy", "stretch");
    int policy = !strcmp(pol, "stretch") ? 0 : !strcmp(pol, "not_larger") ? 1 : !strcmp(pol, "not_smaller") ? 2 : -1;
    if (policy < 0) {
        mem_free(froi);
        return op_fail(ctx, TDM_E_UNSUPPORTED, "attribute 'keep_aspect_ratio_policy' '%s' is not supported", pol);
    }
    if (*nsc >= 0) {
        if (!(fsc = mem_calloc((size_t)r + 1, sizeof *fsc))) {
            mem_free(froi);
            return op_fail(ctx, TDM_E_NOMEM, "out of memory");
        }
        for (int d = 0; d < r; d++)
            fsc[d] = 1.0;
        for (int k = 0; k < na; k++)
            fsc[axes[k]] = (*scales)[k];
    } else if (*nsz >= 0) {
        if (!(fsz = mem_calloc((size_t)r + 1, sizeof *fsz))) {
            mem_free(froi);
            return op_fail(ctx, TDM_E_NOMEM, "out of memory");
        }
        memcpy(fsz, x->dims, sizeof *fsz * (size_t)r);
        double one = 0;
        for (int k = 0; k < na; k++) {
            double s = x->dims[axes[k]] ? (double)(*sizes)[k] / (double)x->dims[axes[k]] : 1.0;
            one = k == 0 ? s : policy == 1 ? (s < one ? s : one) : (s > one ? s : one);
            fsz[axes[k]] = (*sizes)[k];
        }
        if (policy)
            for (int k = 0; k < na; k++) {
                double v = one * (double)x->dims[axes[k]] + 0.5;
                fsz[axes[k]] = v < 9e15 ? (int64_t)v : -1;
            }
    }
    mem_free(*scales);
    mem_free(*sizes);
    mem_free(*roi);
    *scales = fsc;
    *sizes = fsz;
    *roi = froi;
    *nsc = fsc ? r : -1;
    *nsz = fsz ? r : -1;
    *nroi = 2 * r;
    return TDM_OK;
}

tdm_status op_run_Resize(op_ctx *ctx)
{
    static const char *const ctm_names[] = {"half_pixel",           "pytorch_half_pixel", "align_corners",
                                            "asymmetric",           "tf_half_pixel_for_nn", "tf_crop_and_resize",
                                            "half_pixel_symmetric"};
    static const char *const nm_names[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
    const tdm_tensor *x;
    tdm_status st = op_tensor_in(ctx, 0, "X", &x);
    if (st)
        return st;
    rz_params p;
    const char *s = gr_attr_str(ctx->node, "mode", "nearest");
    if ((p.mode = parse_str(s, mode_names, ctx->version >= 11 ? 3 : 2)) < 0)
        return op_fail(ctx, TDM_E_UNSUPPORTED, "attribute 'mode' '%s' is not supported", s);
    p.cubic_a = gr_attr_float(ctx->node, "cubic_coeff_a", -0.75f);
    p.antialias = ctx->version >= 18 && gr_attr_int(ctx->node, "antialias", 0) != 0;
    if (p.antialias && p.mode == RZ_NEAREST)
        return op_fail(ctx, TDM_E_MODEL, "attribute 'antialias' applies to modes linear and cubic, not nearest");
    p.exclude_outside = (int)gr_attr_int(ctx->node, "exclude_outside", 0);
    p.extrapolation = gr_attr_float(ctx->node, "extrapolation_value", 0.0f);
    double *scales = NULL, *roi = NULL;
    int64_t *sizes = NULL, nsc = -1, nsz = -1, nroi = -1;
    if (ctx->version < 11) {
        p.ctm = CT_ASYMMETRIC;
        p.nearest = NM_SIMPLE;
        if ((st = read_floats(ctx, 1, "scales", &scales, &nsc)) != TDM_OK)
            return st;
    } else {
        s = gr_attr_str(ctx->node, "coordinate_transformation_mode", "half_pixel");
        if ((p.ctm = parse_str(s, ctm_names, ctx->version >= 19 ? 7 : 6)) < 0)
            return op_fail(ctx, TDM_E_UNSUPPORTED, "attribute 'coordinate_transformation_mode' '%s' is not supported", s);
        s = gr_attr_str(ctx->node, "nearest_mode", "round_prefer_floor");
        if ((p.nearest = parse_str(s, nm_names, 4)) < 0)
            return op_fail(ctx, TDM_E_UNSUPPORTED, "attribute 'nearest_mode' '%s' is not supported", s);
        if ((st = read_floats(ctx, 1, "roi", &roi, &nroi)) || (st = read_floats(ctx, 2, "scales", &scales, &nsc)) ||
            (st = op_tensor_opt_ints(ctx, 3, &sizes, &nsz)))
            goto done;
        if (nsz == 0)
            nsz = -1;
        if (ctx->version >= 18 && (st = rz_v18(ctx, x, &scales, &nsc, &sizes, &nsz, &roi, &nroi)))
            goto done;
    }
    if ((nsc >= 0) == (nsz >= 0)) {
        st = op_fail(ctx, TDM_E_RUNTIME, "exactly one of 'scales' and 'sizes' must be given");
        goto done;
    }
    if ((nsc >= 0 && nsc != x->rank) || (nsz >= 0 && nsz != x->rank)) {
        st = op_fail(ctx, TDM_E_RUNTIME, "'%s' has %lld entries for an input of rank %d", nsc >= 0 ? "scales" : "sizes",
                     (long long)(nsc >= 0 ? nsc : nsz), x->rank);
        goto done;
    }
    if (p.ctm == CT_TF_CROP && nroi != 2 * x->rank) {
        st = op_fail(ctx, TDM_E_RUNTIME, "input 'roi' must have %d entries for tf_crop_and_resize", 2 * x->rank);
        goto done;
    }
    st = rz_run(ctx, x, &p, scales, nsz >= 0 ? sizes : NULL, p.ctm == CT_TF_CROP ? roi : NULL);
done:
    mem_free(scales);
    mem_free(sizes);
    mem_free(roi);
    return st;
}

tdm_status op_run_Upsample(op_ctx *ctx)
{
    const tdm_tensor *x;
    tdm_status st = op_tensor_in(ctx, 0, "X", &x);
    if (st)
        return st;
    rz_params p = {RZ_NEAREST, CT_ASYMMETRIC, NM_SIMPLE, 0, 0, -0.75, 0.0};
    const char *s = gr_attr_str(ctx->node, "mode", "nearest");
    if (!strcmp(s, "bilinear"))
        s = "linear";
    if ((p.mode = parse_str(s, mode_names, 2)) < 0)
        return op_fail(ctx, TDM_E_UNSUPPORTED, "attribute 'mode' '%s' is not nearest or linear", s);
    double *scales = NULL;
    int64_t nsc = -1;
    if (ctx->version < 9) {
        const float *f;
        int k = gr_attr_floats(ctx->node, "scales", &f);
        if (k >= 0) {
            if (!(scales = mem_calloc((size_t)k + 1, sizeof *scales)))
                return op_fail(ctx, TDM_E_NOMEM, "out of memory");
            for (int i = 0; i < k; i++)
                scales[i] = f[i];
            nsc = k;
        }
    } else if ((st = read_floats(ctx, 1, "scales", &scales, &nsc)) != TDM_OK) {
        return st;
    }
    if (nsc != x->rank)
        st = op_fail(ctx, TDM_E_RUNTIME, "'scales' has %lld entries for an input of rank %d", (long long)nsc, x->rank);
    else
        st = rz_run(ctx, x, &p, scales, NULL, NULL);
    mem_free(scales);
    return st;
}
