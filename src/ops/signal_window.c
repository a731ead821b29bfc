/* HannWindow, HammingWindow, BlackmanWindow and MelWeightMatrix. */
#include "ops/signal.h"
#include "core/mem.h"

#include <math.h>

#define SIG_PI 3.14159265358979323846

/* Generalised cosine window a0 - a1 cos(2πn/N) + a2 cos(4πn/N), with N the
 * size (periodic) or the size - 1 (symmetric). */
static tdm_status run_window(op_ctx *ctx, double a0, double a1, double a2)
{
    int64_t size;
    tdm_status st = sig_scalar_int(ctx, 0, "size", &size);
    if (st)
        return st;
    if (size < 0)
        return op_fail(ctx, TDM_E_RUNTIME, "input size must not be negative, not %lld", (long long)size);
    int64_t dt = gr_attr_int(ctx->node, "output_datatype", TDM_FLOAT);
    if (!sig_numeric_dtype(dt))
        return op_fail(ctx, TDM_E_MODEL, "attribute output_datatype %lld is not a numeric element type",
                       (long long)dt);
    int periodic = gr_attr_int(ctx->node, "periodic", 1) != 0;
    st = op_out(ctx, 0, (tdm_dtype)dt, 1, &size);
    if (st)
        return st;
    double *w = mem_alloc(sizeof(double) * (size_t)(size ? size : 1));
    if (!w)
        return op_fail(ctx, TDM_E_NOMEM, "out of memory for a window of %lld values", (long long)size);
    int64_t den = periodic ? size : size - 1;
    for (int64_t k = 0; k < size; k++) {
        if (den <= 0) {
            w[k] = 1.0; /* a one-point symmetric window */
            continue;
        }
        double a = 2.0 * SIG_PI * (double)k / (double)den;
        w[k] = a0 - a1 * cos(a) + a2 * cos(2.0 * a);
    }
    sig_store_f64(ctx->out[0], 0, w, (size_t)size);
    mem_free(w);
    return TDM_OK;
}

tdm_status op_run_HannWindow(op_ctx *ctx) { return run_window(ctx, 0.5, 0.5, 0.0); }

tdm_status op_run_HammingWindow(op_ctx *ctx) { return run_window(ctx, 25.0 / 46.0, 21.0 / 46.0, 0.0); }

tdm_status op_run_BlackmanWindow(op_ctx *ctx) { return run_window(ctx, 0.42, 0.5, 0.08); }

static tdm_dtype infer_out_dtype(const op_infer_ctx *ctx)
{
    int64_t dt = gr_attr_int(ctx->node, "output_datatype", TDM_FLOAT);
    return sig_numeric_dtype(dt) ? (tdm_dtype)dt : TDM_UNDEFINED;
}

tdm_status op_infer_window(op_infer_ctx *ctx)
{
    gr_type *o = &ctx->out[0];
    o->kind = TDM_KIND_TENSOR;
    o->dtype = infer_out_dtype(ctx);
    o->rank = 1;
    int64_t size;
    o->dims[0] = (gr_dim){sig_infer_scalar_int(ctx, 0, &size) && size >= 0 ? size : -1, NULL};
    return TDM_OK;
}

static double hz_to_mel(double hz) { return 2595.0 * log10(1.0 + hz / 700.0); }

static double mel_to_hz(double mel) { return 700.0 * (pow(10.0, mel / 2595.0) - 1.0); }

/* The triangular filters of ONNX's definition: num_mel_bins + 2 points evenly
 * spaced on the mel scale (the step divides the range by num_mel_bins + 2, as
 * the ONNX reference does), each mapped to the DFT bin
 * floor((dft_length + 1) * hz / sample_rate). */
tdm_status op_run_MelWeightMatrix(op_ctx *ctx)
{
    int64_t nmel, dftlen, rate;
    double lo, hi;
    tdm_status st;
    if ((st = sig_scalar_int(ctx, 0, "num_mel_bins", &nmel)) || (st = sig_scalar_int(ctx, 1, "dft_length", &dftlen)) ||
        (st = sig_scalar_int(ctx, 2, "sample_rate", &rate)) ||
        (st = sig_scalar_f64(ctx, 3, "lower_edge_hertz", &lo)) ||
        (st = sig_scalar_f64(ctx, 4, "upper_edge_hertz", &hi)))
        return st;
    if (nmel < 1 || dftlen < 1 || rate < 1)
        return op_fail(ctx, TDM_E_RUNTIME,
                       "inputs num_mel_bins, dft_length and sample_rate must be positive (got %lld, %lld, %lld)",
                       (long long)nmel, (long long)dftlen, (long long)rate);
    if (!(lo >= 0) || !(hi >= lo))
        return op_fail(ctx, TDM_E_RUNTIME,
                       "inputs lower_edge_hertz (%g) and upper_edge_hertz (%g) must satisfy 0 <= lower <= upper", lo,
                       hi);
    int64_t dt = gr_attr_int(ctx->node, "output_datatype", TDM_FLOAT);
    if (!sig_numeric_dtype(dt))
        return op_fail(ctx, TDM_E_MODEL, "attribute output_datatype %lld is not a numeric element type",
                       (long long)dt);
    int64_t nspec = dftlen / 2 + 1;
    int64_t dims[2] = {nspec, nmel};
    st = op_out(ctx, 0, (tdm_dtype)dt, 2, dims);
    if (st)
        return st;
    size_t count = ctx->out[0]->count;
    double *m = mem_calloc(count ? count : 1, sizeof(double));
    int64_t *bin = mem_alloc(sizeof(int64_t) * ((size_t)nmel + 2));
    if (!m || !bin) {
        mem_free(m);
        mem_free(bin);
        return op_fail(ctx, TDM_E_NOMEM, "out of memory for a %lldx%lld mel matrix", (long long)nspec,
                       (long long)nmel);
    }
    double lmel = hz_to_mel(lo), hmel = hz_to_mel(hi);
    double step = (hmel - lmel) / (double)(nmel + 2);
    for (int64_t i = 0; i < nmel + 2; i++) {
        double hz = mel_to_hz((double)i * step + lmel);
        double b = floor((double)(dftlen + 1) * hz / (double)rate);
        bin[i] = b < 4e18 ? (int64_t)b : (int64_t)4e18; /* out of range: no effect, no overflow */
    }
#define MEL_SET(j, i, v)                                                                                               \
    do {                                                                                                               \
        if ((j) >= 0 && (j) < nspec)                                                                                   \
            m[(size_t)(j) * (size_t)nmel + (size_t)(i)] = (v);                                                         \
    } while (0)
    for (int64_t i = 0; i < nmel; i++) {
        int64_t left = bin[i], center = bin[i + 1], right = bin[i + 2];
        int64_t up = center - left, down = right - center;
        if (up == 0) {
            MEL_SET(center, i, 1.0);
        } else {
            for (int64_t j = left < 0 ? 0 : left; j <= center && j < nspec; j++)
                MEL_SET(j, i, (double)(j - left) / (double)up);
        }
        if (down > 0)
            for (int64_t j = center < 0 ? 0 : center; j < right && j < nspec; j++)
                MEL_SET(j, i, (double)(right - j) / (double)down);
    }
#undef MEL_SET
    sig_store_f64(ctx->out[0], 0, m, count);
    mem_free(m);
    mem_free(bin);
    return TDM_OK;
}

tdm_status op_infer_MelWeightMatrix(op_infer_ctx *ctx)
{
    gr_type *o = &ctx->out[0];
    o->kind = TDM_KIND_TENSOR;
    o->dtype = infer_out_dtype(ctx);
    o->rank = 2;
    int64_t nmel, dftlen;
    o->dims[0] = (gr_dim){sig_infer_scalar_int(ctx, 1, &dftlen) && dftlen > 0 ? dftlen / 2 + 1 : -1, NULL};
    o->dims[1] = (gr_dim){sig_infer_scalar_int(ctx, 0, &nmel) && nmel > 0 ? nmel : -1, NULL};
    return TDM_OK;
}
