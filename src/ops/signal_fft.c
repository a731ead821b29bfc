/* DFT and STFT.
 *
 * Transforms run in double precision. A power-of-two length uses an
 * iterative radix-2 FFT (O(n log n)); any other length uses Bluestein's
 * chirp-z algorithm on top of a power-of-two FFT of length >= 2n-1, so every
 * length is O(n log n) too. Inverse transforms conjugate in and out and scale
 * by 1/n. */
#include "ops/signal.h"
#include "core/mem.h"

#include <math.h>
#include <string.h>

#define SIG_PI 3.14159265358979323846

typedef struct fft_plan {
    size_t n;      /* transform length */
    size_t m;      /* power-of-two length of the radix-2 FFT (n, or Bluestein's) */
    double *tw;    /* m/2 twiddles exp(-2πi j/m) as (re, im) pairs */
    double *chirp; /* Bluestein: n pairs exp(-πi k²/n); NULL when n == m */
    double *filt;  /* Bluestein: FFT of the conjugate chirp, m pairs */
    double *work;  /* m pairs */
} fft_plan;

static void fft_plan_free(fft_plan *p)
{
    mem_free(p->tw);
    mem_free(p->chirp);
    mem_free(p->filt);
    mem_free(p->work);
    memset(p, 0, sizeof *p);
}

/* In-place radix-2 FFT of m (a power of two) complex values, forward sign. */
static void fft_pow2(const fft_plan *p, double *a, size_t m)
{
    size_t j = 0;
    for (size_t i = 1; i < m; i++) { /* bit reversal */
        size_t bit = m >> 1;
        for (; j & bit; bit >>= 1)
            j ^= bit;
        j |= bit;
        if (i < j) {
            double tr = a[2 * i], ti = a[2 * i + 1];
            a[2 * i] = a[2 * j];
            a[2 * i + 1] = a[2 * j + 1];
            a[2 * j] = tr;
            a[2 * j + 1] = ti;
        }
    }
    for (size_t h = 1; h < m; h <<= 1) {
        size_t step = m / (2 * h);
        for (size_t s = 0; s < m; s += 2 * h) {
            const double *w = p->tw;
            double *x = a + 2 * s, *y = a + 2 * (s + h);
            for (size_t k = 0; k < h; k++, w += 2 * step) {
                double yr = y[2 * k] * w[0] - y[2 * k + 1] * w[1];
                double yi = y[2 * k] * w[1] + y[2 * k + 1] * w[0];
                y[2 * k] = x[2 * k] - yr;
                y[2 * k + 1] = x[2 * k + 1] - yi;
                x[2 * k] += yr;
                x[2 * k + 1] += yi;
            }
        }
    }
}

static tdm_status fft_plan_init(op_ctx *ctx, fft_plan *p, size_t n)
{
    memset(p, 0, sizeof *p);
    p->n = n;
    size_t m = 1, need = n;
    if (n & (n - 1)) {
        if (mem_mul(n, 2, &need))
            return op_fail(ctx, TDM_E_NOMEM, "transform length %zu is too large", n);
        need -= 1;
    }
    while (m < need) {
        if (m > ((size_t)-1) / 64)
            return op_fail(ctx, TDM_E_NOMEM, "transform length %zu is too large", n);
        m <<= 1;
    }
    p->m = m;
    size_t pairs;
    if (mem_mul(m, 2, &pairs))
        return op_fail(ctx, TDM_E_NOMEM, "transform length %zu is too large", n);
    p->tw = mem_alloc(sizeof(double) * (m > 1 ? m : 2));
    p->work = mem_alloc(sizeof(double) * pairs);
    if (!p->tw || !p->work)
        goto nomem;
    for (size_t j = 0; j < m / 2; j++) {
        double a = -2.0 * SIG_PI * (double)j / (double)m;
        p->tw[2 * j] = cos(a);
        p->tw[2 * j + 1] = sin(a);
    }
    if (m == n)
        return TDM_OK;
    /* Bluestein: chirp w_k = exp(-πi k²/n), with k² reduced mod 2n exactly. */
    p->chirp = mem_alloc(sizeof(double) * 2 * n);
    p->filt = mem_calloc(pairs, sizeof(double));
    if (!p->chirp || !p->filt)
        goto nomem;
    size_t sq = 0, n2 = 2 * n;
    for (size_t k = 0; k < n; k++) {
        double a = -SIG_PI * (double)sq / (double)n;
        p->chirp[2 * k] = cos(a);
        p->chirp[2 * k + 1] = sin(a);
        /* (k+1)² = k² + 2k + 1 (mod 2n) */
        sq = (sq + (2 * k + 1) % n2) % n2;
    }
    for (size_t k = 0; k < n; k++) {
        p->filt[2 * k] = p->chirp[2 * k];
        p->filt[2 * k + 1] = -p->chirp[2 * k + 1];
        if (k) {
            p->filt[2 * (m - k)] = p->chirp[2 * k];
            p->filt[2 * (m - k) + 1] = -p->chirp[2 * k + 1];
        }
    }
    fft_pow2(p, p->filt, m);
    return TDM_OK;
nomem:
    fft_plan_free(p);
    return op_fail(ctx, TDM_E_NOMEM, "out of memory for a transform of length %zu", n);
}

/* In-place DFT of p->n complex values (forward sign). */
static void fft_exec(fft_plan *p, double *a)
{
    size_t n = p->n, m = p->m;
    if (!p->chirp) {
        fft_pow2(p, a, n);
        return;
    }
    double *w = p->work;
    const double *c = p->chirp, *f = p->filt;
    for (size_t k = 0; k < n; k++) {
        w[2 * k] = a[2 * k] * c[2 * k] - a[2 * k + 1] * c[2 * k + 1];
        w[2 * k + 1] = a[2 * k] * c[2 * k + 1] + a[2 * k + 1] * c[2 * k];
    }
    memset(w + 2 * n, 0, sizeof(double) * 2 * (m - n));
    fft_pow2(p, w, m);
    /* multiply by the filter's spectrum, then inverse FFT via conjugation */
    for (size_t k = 0; k < m; k++) {
        double re = w[2 * k] * f[2 * k] - w[2 * k + 1] * f[2 * k + 1];
        double im = w[2 * k] * f[2 * k + 1] + w[2 * k + 1] * f[2 * k];
        w[2 * k] = re;
        w[2 * k + 1] = -im;
    }
    fft_pow2(p, w, m);
    double s = 1.0 / (double)m;
    for (size_t k = 0; k < n; k++) {
        double re = w[2 * k] * s, im = -w[2 * k + 1] * s;
        a[2 * k] = re * c[2 * k] - im * c[2 * k + 1];
        a[2 * k + 1] = re * c[2 * k + 1] + im * c[2 * k];
    }
}

/* Forward or inverse (scaled by 1/n) transform. */
static void fft_run(fft_plan *p, double *a, int inverse)
{
    size_t n = p->n;
    if (inverse)
        for (size_t k = 0; k < n; k++)
            a[2 * k + 1] = -a[2 * k + 1];
    fft_exec(p, a);
    if (inverse) {
        double s = 1.0 / (double)n;
        for (size_t k = 0; k < n; k++) {
            a[2 * k] *= s;
            a[2 * k + 1] = -a[2 * k + 1] * s;
        }
    }
}

/* Writes n complex values to a float tensor from element `at`, consecutive
 * values `stride` elements apart (each value is two adjacent elements). */
static void store_pairs(tdm_tensor *t, size_t at, size_t stride, size_t n, const double *src)
{
    size_t k;
    switch (t->dtype) {
    case TDM_FLOAT: {
        float *o = (float *)t->data + at;
        for (k = 0; k < n; k++, o += stride) {
            o[0] = (float)src[2 * k];
            o[1] = (float)src[2 * k + 1];
        }
        break;
    }
    case TDM_DOUBLE: {
        double *o = (double *)t->data + at;
        for (k = 0; k < n; k++, o += stride) {
            o[0] = src[2 * k];
            o[1] = src[2 * k + 1];
        }
        break;
    }
    case TDM_FLOAT16: {
        uint16_t *o = (uint16_t *)t->data + at;
        for (k = 0; k < n; k++, o += stride) {
            o[0] = f32_to_fp16((float)src[2 * k]);
            o[1] = f32_to_fp16((float)src[2 * k + 1]);
        }
        break;
    }
    default: {
        uint16_t *o = (uint16_t *)t->data + at;
        for (k = 0; k < n; k++, o += stride) {
            o[0] = f32_to_bf16((float)src[2 * k]);
            o[1] = f32_to_bf16((float)src[2 * k + 1]);
        }
        break;
    }
    }
}

/* Loads `cnt` (<= n) complex-or-real values into buf (n pairs, zero-padded).
 * c is 1 (real) or 2 (complex); tmp holds at least cnt doubles. */
static void load_line(const tdm_tensor *x, size_t at, size_t stride, size_t cnt, int c, size_t n, double *buf,
                      double *tmp)
{
    memset(buf, 0, sizeof(double) * 2 * n);
    sig_load_f64(x, at, stride, cnt, tmp);
    for (size_t k = 0; k < cnt; k++)
        buf[2 * k] = tmp[k];
    if (c == 2) {
        sig_load_f64(x, at + 1, stride, cnt, tmp);
        for (size_t k = 0; k < cnt; k++)
            buf[2 * k + 1] = tmp[k];
    }
}

tdm_status op_run_DFT(op_ctx *ctx)
{
    const tdm_tensor *x = ctx->in[0];
    if (!x || x->kind != TDM_KIND_TENSOR || !dtype_is_float(x->dtype))
        return op_fail(ctx, TDM_E_RUNTIME, "input 0 must be a float tensor");
    int r = x->rank;
    if (r < 2)
        return op_fail(ctx, TDM_E_RUNTIME, "input 0 must have rank 2 or more, not %d", r);
    int64_t c = x->dims[r - 1];
    if (c != 1 && c != 2)
        return op_fail(ctx, TDM_E_RUNTIME,
                       "the last dimension of input 0 must be 1 (real) or 2 (complex), not %lld", (long long)c);
    /* the axis: an attribute (default 1) until 20, then input 2 (default -2) */
    int64_t axis = ctx->version >= 20 ? -2 : gr_attr_int(ctx->node, "axis", 1), axis0;
    if (ctx->version >= 20 && ctx->n_in > 2 && ctx->in[2]) {
        tdm_status st = sig_scalar_int(ctx, 2, "axis", &axis);
        if (st)
            return st;
    }
    axis0 = axis;
    int inverse = gr_attr_int(ctx->node, "inverse", 0) != 0;
    int onesided = gr_attr_int(ctx->node, "onesided", 0) != 0;
    if (axis < 0)
        axis += r;
    if (axis < 0 || axis > r - 2)
        return op_fail(ctx, TDM_E_RUNTIME, "axis %lld is out of range for an input of rank %d", (long long)axis0, r);
    /* inverse and onesided (an inverse real FFT): the input holds the
     * n / 2 + 1 bins of a Hermitian spectrum, the output n real values */
    int irfft = inverse && onesided;
    int64_t n_in = x->dims[axis], n = irfft ? 2 * (n_in - 1) : n_in;
    if (irfft && n < 1 && !(ctx->n_in > 1 && ctx->in[1]))
        return op_fail(ctx, TDM_E_RUNTIME, "an inverse onesided DFT of %lld bins needs dft_length", (long long)n_in);
    if (ctx->n_in > 1 && ctx->in[1]) {
        tdm_status st = sig_scalar_int(ctx, 1, "dft_length", &n);
        if (st)
            return st;
        if (n < 1)
            return op_fail(ctx, TDM_E_RUNTIME, "input dft_length must be positive, not %lld", (long long)n);
    }
    int64_t n_out = onesided && !irfft ? n / 2 + 1 : n;
    int64_t dims[TDM_MAX_RANK];
    memcpy(dims, x->dims, sizeof(int64_t) * (size_t)r);
    dims[axis] = n_out;
    dims[r - 1] = irfft ? 1 : 2;
    tdm_status st = op_out(ctx, 0, x->dtype, r, dims);
    if (st)
        return st;
    tdm_tensor *y = ctx->out[0];
    if (!y->count)
        return TDM_OK;
    size_t outer = 1, inner = 1;
    for (int d = 0; d < axis; d++)
        outer *= (size_t)x->dims[d];
    for (int d = (int)axis + 1; d < r - 1; d++)
        inner *= (size_t)x->dims[d];
    size_t cnt = (size_t)(n_in < n ? n_in : n);
    if (irfft && cnt > (size_t)(n / 2 + 1))
        cnt = (size_t)(n / 2 + 1);
    fft_plan p;
    st = fft_plan_init(ctx, &p, (size_t)n);
    if (st)
        return st;
    double *buf = mem_alloc(sizeof(double) * 2 * (size_t)n);
    double *tmp = mem_alloc(sizeof(double) * (cnt ? cnt : 1));
    if (!buf || !tmp) {
        st = op_fail(ctx, TDM_E_NOMEM, "out of memory for a transform of length %lld", (long long)n);
        goto done;
    }
    for (size_t o = 0; o < outer; o++) {
        for (size_t i = 0; i < inner; i++) {
            size_t at_in = ((o * (size_t)n_in) * inner + i) * (size_t)c;
            size_t at_out = ((o * (size_t)n_out) * inner + i) * 2;
            load_line(x, at_in, inner * (size_t)c, cnt, (int)c, (size_t)n, buf, tmp);
            if (irfft) {
                /* numpy's irfft: the imaginary parts of bin 0 and (n even) bin n / 2 are dropped, the
                 * upper half is the conjugate mirror of the lower */
                size_t h = (size_t)n / 2;
                buf[1] = 0.0;
                if ((size_t)n % 2 == 0)
                    buf[2 * h + 1] = 0.0;
                for (size_t k = h + 1; k < (size_t)n; k++) {
                    buf[2 * k] = buf[2 * ((size_t)n - k)];
                    buf[2 * k + 1] = -buf[2 * ((size_t)n - k) + 1];
                }
                fft_run(&p, buf, 1);
                for (size_t k = 0; k < (size_t)n; k++)
                    tensor_set_f64(y, ((o * (size_t)n + k) * inner + i), buf[2 * k]);
                continue;
            }
            fft_run(&p, buf, inverse);
            store_pairs(y, at_out, inner * 2, (size_t)n_out, buf);
        }
    }
done:
    mem_free(buf);
    mem_free(tmp);
    fft_plan_free(&p);
    return st;
}

tdm_status op_infer_DFT(op_infer_ctx *ctx)
{
    const gr_type *t = ctx->in[0];
    if (!t)
        return TDM_OK;
    gr_type *o = &ctx->out[0];
    o->kind = TDM_KIND_TENSOR;
    o->dtype = t->dtype;
    if (t->rank < 2)
        return TDM_OK;
    int r = t->rank;
    int64_t axis = ctx->version >= 20 ? -2 : gr_attr_int(ctx->node, "axis", 1);
    if (ctx->version >= 20 && ctx->n_in > 2 && ctx->in[2]) {
        const tdm_tensor *a = ctx->value[2];
        if (!a || a->kind != TDM_KIND_TENSOR || a->count != 1 || !dtype_is_int(a->dtype))
            return TDM_OK; /* known at run time */
        axis = tensor_get_i64(a, 0);
    }
    if (axis < 0)
        axis += r;
    if (axis < 0 || axis > r - 2)
        return TDM_OK; /* the run hook reports it */
    o->rank = r;
    memcpy(o->dims, t->dims, sizeof(gr_dim) * (size_t)r);
    o->dims[r - 1] = (gr_dim){2, NULL};
    int64_t n = t->dims[axis].v;
    int known = n >= 0, given = ctx->n_in > 1 && ctx->in[1];
    if (given)
        known = sig_infer_scalar_int(ctx, 1, &n) && n > 0;
    if (gr_attr_int(ctx->node, "inverse", 0) && gr_attr_int(ctx->node, "onesided", 0)) {
        /* an inverse real FFT: n real values, by default 2 (bins - 1) */
        o->dims[r - 1] = (gr_dim){1, NULL};
        if (!given && known)
            n = 2 * (n - 1);
        o->dims[axis] = known && n > 0 ? (gr_dim){n, NULL} : (gr_dim){-1, NULL};
        return TDM_OK;
    }
    if (!known) {
        if (given || gr_attr_int(ctx->node, "onesided", 0))
            o->dims[axis] = (gr_dim){-1, NULL}; /* else: the input's (symbolic) dim */
    } else if (gr_attr_int(ctx->node, "onesided", 0)) {
        o->dims[axis] = (gr_dim){n / 2 + 1, NULL};
    } else if (n != t->dims[axis].v) {
        o->dims[axis] = (gr_dim){n, NULL};
    }
    return TDM_OK;
}

tdm_status op_run_STFT(op_ctx *ctx)
{
    const tdm_tensor *x = ctx->in[0];
    if (!x || x->kind != TDM_KIND_TENSOR || !dtype_is_float(x->dtype))
        return op_fail(ctx, TDM_E_RUNTIME, "input signal must be a float tensor");
    if (x->rank != 3 || (x->dims[2] != 1 && x->dims[2] != 2))
        return op_fail(ctx, TDM_E_RUNTIME, "input signal must have shape [batch, length, 1 or 2]");
    int64_t step, flen = -1;
    tdm_status st = sig_scalar_int(ctx, 1, "frame_step", &step);
    if (st)
        return st;
    if (step < 1)
        return op_fail(ctx, TDM_E_RUNTIME, "input frame_step must be positive, not %lld", (long long)step);
    const tdm_tensor *win = ctx->n_in > 2 ? ctx->in[2] : NULL;
    if (win) {
        if (win->kind != TDM_KIND_TENSOR || !dtype_is_float(win->dtype) || win->rank != 1)
            return op_fail(ctx, TDM_E_RUNTIME, "input window must be a rank-1 float tensor");
        flen = win->dims[0];
    }
    if (ctx->n_in > 3 && ctx->in[3]) {
        int64_t fl;
        st = sig_scalar_int(ctx, 3, "frame_length", &fl);
        if (st)
            return st;
        if (win && fl != flen)
            return op_fail(ctx, TDM_E_RUNTIME, "input frame_length %lld differs from the window's length %lld",
                           (long long)fl, (long long)flen);
        flen = fl;
    }
    if (flen < 0)
        return op_fail(ctx, TDM_E_RUNTIME, "either input window or input frame_length must be given");
    if (flen < 1)
        return op_fail(ctx, TDM_E_RUNTIME, "the frame length must be positive, not %lld", (long long)flen);
    int64_t len = x->dims[1], c = x->dims[2], batch = x->dims[0];
    if (len < flen)
        return op_fail(ctx, TDM_E_RUNTIME, "the signal (length %lld) is shorter than a frame (%lld)",
                       (long long)len, (long long)flen);
    int onesided = gr_attr_int(ctx->node, "onesided", 1) != 0;
    int64_t frames = (len - flen) / step + 1;
    int64_t bins = onesided ? flen / 2 + 1 : flen;
    int64_t dims[4] = {batch, frames, bins, 2};
    st = op_out(ctx, 0, x->dtype, 4, dims);
    if (st)
        return st;
    tdm_tensor *y = ctx->out[0];
    fft_plan p;
    st = fft_plan_init(ctx, &p, (size_t)flen);
    if (st)
        return st;
    double *buf = mem_alloc(sizeof(double) * 2 * (size_t)flen);
    double *tmp = mem_alloc(sizeof(double) * (size_t)flen);
    double *w = win ? mem_alloc(sizeof(double) * (size_t)flen) : NULL;
    if (!buf || !tmp || (win && !w)) {
        st = op_fail(ctx, TDM_E_NOMEM, "out of memory for frames of length %lld", (long long)flen);
        goto done;
    }
    if (w)
        sig_load_f64(win, 0, 1, (size_t)flen, w);
    for (int64_t b = 0; b < batch; b++) {
        for (int64_t f = 0; f < frames; f++) {
            size_t at = ((size_t)b * (size_t)len + (size_t)(f * step)) * (size_t)c;
            load_line(x, at, (size_t)c, (size_t)flen, (int)c, (size_t)flen, buf, tmp);
            if (w)
                for (int64_t k = 0; k < flen; k++) {
                    buf[2 * k] *= w[k];
                    buf[2 * k + 1] *= w[k];
                }
            fft_run(&p, buf, 0);
            store_pairs(y, ((size_t)b * (size_t)frames + (size_t)f) * (size_t)bins * 2, 2, (size_t)bins, buf);
        }
    }
done:
    mem_free(buf);
    mem_free(tmp);
    mem_free(w);
    fft_plan_free(&p);
    return st;
}

tdm_status op_infer_STFT(op_infer_ctx *ctx)
{
    const gr_type *t = ctx->in[0];
    if (!t)
        return TDM_OK;
    gr_type *o = &ctx->out[0];
    o->kind = TDM_KIND_TENSOR;
    o->dtype = t->dtype;
    o->rank = 4;
    for (int d = 0; d < 4; d++)
        o->dims[d] = (gr_dim){-1, NULL};
    o->dims[3].v = 2;
    if (t->rank == 3)
        o->dims[0] = t->dims[0];
    int64_t flen = -1, step = -1;
    const gr_type *w = ctx->n_in > 2 ? ctx->in[2] : NULL;
    if (w && w->rank == 1)
        flen = w->dims[0].v;
    if (ctx->n_in > 3 && ctx->in[3] && !sig_infer_scalar_int(ctx, 3, &flen))
        flen = -1;
    if (flen < 1)
        return TDM_OK;
    o->dims[2].v = gr_attr_int(ctx->node, "onesided", 1) ? flen / 2 + 1 : flen;
    if (t->rank == 3 && t->dims[1].v >= flen && sig_infer_scalar_int(ctx, 1, &step) && step > 0)
        o->dims[1].v = (t->dims[1].v - flen) / step + 1;
    return TDM_OK;
}
