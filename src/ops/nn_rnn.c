/* Recurrent layers: RNN, GRU and LSTM (forward, reverse, bidirectional;
 * sequence_lens; initial states; peepholes; clip; linear_before_reset;
 * input_forget; layout). Computed in double, written in the input type. */
#include "ops/nn.h"
#include "core/mem.h"

#include <ctype.h>
#include <math.h>
#include <string.h>

enum { RK_RNN, RK_GRU, RK_LSTM };

typedef enum act_kind {
    ACT_RELU,
    ACT_TANH,
    ACT_SIGMOID,
    ACT_AFFINE,
    ACT_LEAKYRELU,
    ACT_THRESHOLDEDRELU,
    ACT_SCALEDTANH,
    ACT_HARDSIGMOID,
    ACT_ELU,
    ACT_SOFTSIGN,
    ACT_SOFTPLUS
} act_kind;

typedef struct act_fn {
    act_kind kind;
    double alpha, beta;
} act_fn;

static double act_apply(const act_fn *f, double x)
{
    switch (f->kind) {
    case ACT_RELU:
        return x > 0 ? x : 0;
    case ACT_TANH:
        return tanh(x);
    case ACT_SIGMOID:
        return 1.0 / (1.0 + exp(-x));
    case ACT_AFFINE:
        return f->alpha * x + f->beta;
    case ACT_LEAKYRELU:
        return x >= 0 ? x : f->alpha * x;
    case ACT_THRESHOLDEDRELU:
        return x > f->alpha ? x : 0;
    case ACT_SCALEDTANH:
        return f->alpha * tanh(f->beta * x);
    case ACT_HARDSIGMOID: {
        double v = f->alpha * x + f->beta;
        return v < 0 ? 0 : v > 1 ? 1 : v;
    }
    case ACT_ELU:
        return x >= 0 ? x : f->alpha * (exp(x) - 1);
    case ACT_SOFTSIGN:
        return x / (1 + fabs(x));
    case ACT_SOFTPLUS:
        return log1p(exp(x));
    }
    return x;
}

static int ieq(const char *a, const char *b)
{
    for (; *a && *b; a++, b++)
        if (tolower((unsigned char)*a) != tolower((unsigned char)*b))
            return 0;
    return *a == *b;
}

/* Parses the activations attribute (n per direction) into fns[]. */
static tdm_status parse_acts(op_ctx *ctx, int kind, int dirs, act_fn *fns)
{
    static const char *const defaults[3][3] = {{"Tanh", NULL, NULL}, {"Sigmoid", "Tanh", NULL},
                                               {"Sigmoid", "Tanh", "Tanh"}};
    int per = kind == RK_RNN ? 1 : kind == RK_GRU ? 2 : 3;
    const gr_attr *a = gr_attr_find(ctx->node, "activations");
    const float *alphas = NULL, *betas = NULL;
    int na = gr_attr_floats(ctx->node, "activation_alpha", &alphas);
    int nb = gr_attr_floats(ctx->node, "activation_beta", &betas);
    int ia = 0, ib = 0;
    if (a && a->type == GA_STRINGS && a->n != (size_t)(per * dirs) && !(a->n == (size_t)per && dirs == 2))
        return op_fail(ctx, TDM_E_MODEL, "attribute activations must list %d functions, not %zu", per * dirs, a->n);
    for (int i = 0; i < per * dirs; i++) {
        const char *name = a && a->type == GA_STRINGS ? a->strings[i % a->n] : defaults[kind][i % per];
        act_fn *f = &fns[i];
        double da = 0, db = 0;
        if (ieq(name, "Relu"))
            f->kind = ACT_RELU;
        else if (ieq(name, "Tanh"))
            f->kind = ACT_TANH;
        else if (ieq(name, "Sigmoid"))
            f->kind = ACT_SIGMOID;
        else if (ieq(name, "Affine"))
            f->kind = ACT_AFFINE, da = 1, db = 0;
        else if (ieq(name, "LeakyRelu"))
            f->kind = ACT_LEAKYRELU, da = 0.01;
        else if (ieq(name, "ThresholdedRelu"))
            f->kind = ACT_THRESHOLDEDRELU, da = 1;
        else if (ieq(name, "ScaledTanh"))
            f->kind = ACT_SCALEDTANH, da = 1, db = 1;
        else if (ieq(name, "HardSigmoid"))
            f->kind = ACT_HARDSIGMOID, da = 0.2, db = 0.5;
        else if (ieq(name, "Elu"))
            f->kind = ACT_ELU, da = 1;
        else if (ieq(name, "Softsign"))
            f->kind = ACT_SOFTSIGN;
        else if (ieq(name, "Softplus"))
            f->kind = ACT_SOFTPLUS;
        else
            return op_fail(ctx, TDM_E_UNSUPPORTED, "activation '%s' is not supported", name);
        int uses_a = f->kind == ACT_AFFINE || f->kind == ACT_LEAKYRELU || f->kind == ACT_THRESHOLDEDRELU ||
                     f->kind == ACT_SCALEDTANH || f->kind == ACT_HARDSIGMOID || f->kind == ACT_ELU;
        int uses_b = f->kind == ACT_AFFINE || f->kind == ACT_SCALEDTANH || f->kind == ACT_HARDSIGMOID;
        f->alpha = uses_a && ia < na ? alphas[ia++] : da;
        f->beta = uses_b && ib < nb ? betas[ib++] : db;
    }
    return TDM_OK;
}

/* A double copy of t (NULL tensor → NULL, *ok stays 1). */
static double *to_f64(const tdm_tensor *t, int *ok)
{
    if (!t)
        return NULL;
    double *o = mem_alloc(t->count * sizeof *o + 1);
    if (!o) {
        *ok = 0;
        return NULL;
    }
    if (t->dtype == TDM_DOUBLE)
        memcpy(o, t->data, t->count * sizeof *o);
    else if (t->dtype == TDM_FLOAT)
        for (size_t i = 0; i < t->count; i++)
            o[i] = ((const float *)t->data)[i];
    else
        for (size_t i = 0; i < t->count; i++)
            o[i] = tensor_get_f64(t, i);
    return o;
}

static double clipv(double v, double clip) { return clip > 0 ? (v < -clip ? -clip : v > clip ? clip : v) : v; }

static tdm_status run_rnn(op_ctx *ctx, int kind)
{
    const tdm_tensor *x = op_nn_in(ctx, 0), *w = op_nn_in(ctx, 1), *r = op_nn_in(ctx, 2), *bt = op_nn_in(ctx, 3);
    const tdm_tensor *sl = op_nn_in(ctx, 4), *h0t = op_nn_in(ctx, 5);
    const tdm_tensor *c0t = kind == RK_LSTM ? op_nn_in(ctx, 6) : NULL, *pt = kind == RK_LSTM ? op_nn_in(ctx, 7) : NULL;
    const int G = kind == RK_RNN ? 1 : kind == RK_GRU ? 3 : 4;
    if (!x || !w || !r)
        return op_fail(ctx, TDM_E_MODEL, "inputs X, W and R are required");
    if (!(DT_BIT(x->dtype) & DT_FLOATS) || w->dtype != x->dtype || r->dtype != x->dtype)
        return op_fail(ctx, TDM_E_RUNTIME, "X, W and R must have one floating-point type");
    if (x->rank != 3 || w->rank != 3 || r->rank != 3)
        return op_fail(ctx, TDM_E_RUNTIME, "X, W and R must have rank 3");
    const char *dir = gr_attr_str(ctx->node, "direction", "forward");
    int dirs = strcmp(dir, "bidirectional") == 0 ? 2 : 1, reverse = strcmp(dir, "reverse") == 0;
    if (dirs == 1 && !reverse && strcmp(dir, "forward"))
        return op_fail(ctx, TDM_E_MODEL, "attribute direction has the unknown value '%s'", dir);
    int layout = ctx->version >= 14 ? (int)gr_attr_int(ctx->node, "layout", 0) : 0;
    int64_t S = layout ? x->dims[1] : x->dims[0], B = layout ? x->dims[0] : x->dims[1], I = x->dims[2];
    int64_t H = gr_attr_int(ctx->node, "hidden_size", r->dims[2]);
    if (H < 1 || w->dims[0] != dirs || r->dims[0] != dirs || w->dims[1] != G * H || r->dims[1] != G * H ||
        w->dims[2] != I || r->dims[2] != H)
        return op_fail(ctx, TDM_E_RUNTIME, "W must be %dx%lldx%lld and R %dx%lldx%lld", dirs, (long long)(G * H),
                       (long long)I, dirs, (long long)(G * H), (long long)H);
    if (bt && (bt->count != (size_t)(dirs * 2 * G * H) || bt->dtype != x->dtype))
        return op_fail(ctx, TDM_E_RUNTIME, "B must hold %lld values", (long long)(dirs * 2 * G * H));
    if (h0t && (h0t->count != (size_t)(dirs * B * H) || h0t->dtype != x->dtype))
        return op_fail(ctx, TDM_E_RUNTIME, "initial_h must hold %lld values", (long long)(dirs * B * H));
    if (c0t && (c0t->count != (size_t)(dirs * B * H) || c0t->dtype != x->dtype))
        return op_fail(ctx, TDM_E_RUNTIME, "initial_c must hold %lld values", (long long)(dirs * B * H));
    if (pt && (pt->count != (size_t)(dirs * 3 * H) || pt->dtype != x->dtype))
        return op_fail(ctx, TDM_E_RUNTIME, "P must hold %lld values", (long long)(dirs * 3 * H));
    if (sl && (sl->count != (size_t)B || !dtype_is_int(sl->dtype)))
        return op_fail(ctx, TDM_E_RUNTIME, "sequence_lens must hold %lld integers", (long long)B);
    act_fn acts[6];
    tdm_status st = parse_acts(ctx, kind, dirs, acts);
    if (st)
        return st;
    const gr_attr *clip_a = gr_attr_find(ctx->node, "clip");
    double clip = clip_a ? clip_a->f : 0.0;
    int lbr = kind == RK_GRU && gr_attr_int(ctx->node, "linear_before_reset", 0) != 0;
    int input_forget = kind == RK_LSTM && gr_attr_int(ctx->node, "input_forget", 0) != 0;

    int64_t ydims[4], hdims[3];
    if (layout) {
        int64_t yd[4] = {B, S, dirs, H}, hd[3] = {B, dirs, H};
        memcpy(ydims, yd, sizeof yd);
        memcpy(hdims, hd, sizeof hd);
    } else {
        int64_t yd[4] = {S, dirs, B, H}, hd[3] = {dirs, B, H};
        memcpy(ydims, yd, sizeof yd);
        memcpy(hdims, hd, sizeof hd);
    }
    tdm_tensor *ty = NULL, *th = NULL, *tc = NULL;
    if (op_out_wanted(ctx, 0)) {
        if ((st = op_out(ctx, 0, x->dtype, 4, ydims)))
            return st;
        ty = ctx->out[0];
    }
    if (op_out_wanted(ctx, 1)) {
        if ((st = op_out(ctx, 1, x->dtype, 3, hdims)))
            return st;
        th = ctx->out[1];
    }
    if (kind == RK_LSTM && op_out_wanted(ctx, 2)) {
        if ((st = op_out(ctx, 2, x->dtype, 3, hdims)))
            return st;
        tc = ctx->out[2];
    }

    int ok = 1;
    double *X = to_f64(x, &ok), *W = to_f64(w, &ok), *R = to_f64(r, &ok), *Bv = to_f64(bt, &ok);
    double *H0 = to_f64(h0t, &ok), *C0 = to_f64(c0t, &ok), *P = to_f64(pt, &ok);
    double *h = mem_calloc((size_t)(B * H) + 1, sizeof *h), *c = mem_calloc((size_t)(B * H) + 1, sizeof *c);
    double *gates = mem_calloc((size_t)(G * H) + 1, sizeof *gates), *tmp = mem_calloc((size_t)H + 1, sizeof *tmp);
    int64_t *lens = mem_calloc((size_t)B + 1, sizeof *lens);
    if (!ok || !X || !W || !R || !h || !c || !gates || !tmp || !lens) {
        st = op_fail(ctx, TDM_E_NOMEM, "out of memory");
        goto done;
    }
    for (int64_t b = 0; b < B; b++) {
        lens[b] = sl ? tensor_get_i64(sl, (size_t)b) : S;
        if (lens[b] < 0 || lens[b] > S) {
            st = op_fail(ctx, TDM_E_RUNTIME, "sequence_lens[%lld] = %lld is outside 0..%lld", (long long)b,
                         (long long)lens[b], (long long)S);
            goto done;
        }
    }
    if (ty)
        for (size_t i = 0; i < ty->count; i++)
            tensor_set_f64(ty, i, 0.0);
    for (int d = 0; d < dirs; d++) {
        int rev = dirs == 2 ? d == 1 : reverse;
        const double *Wd = W + (size_t)(d * G * H * I), *Rd = R + (size_t)(d * G * H * H);
        const double *Wb = Bv ? Bv + (size_t)(d * 2 * G * H) : NULL, *Rb = Wb ? Wb + G * H : NULL;
        const double *Pd = P ? P + (size_t)(d * 3 * H) : NULL;
        const act_fn *f = &acts[d * (kind == RK_RNN ? 1 : kind == RK_GRU ? 2 : 3)];
        for (int64_t b = 0; b < B; b++)
            for (int64_t j = 0; j < H; j++) {
                size_t si = layout ? (size_t)((b * dirs + d) * H + j) : (size_t)((d * B + b) * H + j);
                h[b * H + j] = H0 ? H0[si] : 0.0;
                c[b * H + j] = C0 ? C0[si] : 0.0;
            }
        for (int64_t b = 0; b < B; b++) {
            double *hb = h + b * H, *cb = c + b * H;
            for (int64_t s = 0; s < lens[b]; s++) {
                int64_t t = rev ? lens[b] - 1 - s : s;
                const double *xt = X + (size_t)((layout ? b * S + t : t * B + b) * I);
                /* gates = W x + Wb (+ R h + Rb, except GRU's h gate) */
                for (int64_t gi = 0; gi < G * H; gi++) {
                    const double *wr = Wd + gi * I;
                    double v = Wb ? Wb[gi] : 0.0;
                    for (int64_t k = 0; k < I; k++)
                        v += wr[k] * xt[k];
                    if (!(kind == RK_GRU && gi >= 2 * H)) {
                        const double *rr = Rd + gi * H;
                        v += Rb ? Rb[gi] : 0.0;
                        for (int64_t k = 0; k < H; k++)
                            v += rr[k] * hb[k];
                    }
                    gates[gi] = v;
                }
                if (kind == RK_RNN) {
                    for (int64_t j = 0; j < H; j++)
                        hb[j] = act_apply(&f[0], clipv(gates[j], clip));
                } else if (kind == RK_GRU) {
                    double *z = gates, *rg = gates + H, *hh = gates + 2 * H;
                    for (int64_t j = 0; j < 2 * H; j++)
                        gates[j] = act_apply(&f[0], clipv(gates[j], clip));
                    for (int64_t j = 0; j < H; j++) {
                        const double *rr = Rd + (2 * H + j) * H;
                        double v = 0.0;
                        if (lbr) {
                            for (int64_t k = 0; k < H; k++)
                                v += rr[k] * hb[k];
                            v = rg[j] * (v + (Rb ? Rb[2 * H + j] : 0.0));
                        } else {
                            for (int64_t k = 0; k < H; k++)
                                v += rr[k] * (rg[k] * hb[k]);
                            v += Rb ? Rb[2 * H + j] : 0.0;
                        }
                        tmp[j] = act_apply(&f[1], clipv(hh[j] + v, clip));
                    }
                    for (int64_t j = 0; j < H; j++)
                        hb[j] = (1.0 - z[j]) * tmp[j] + z[j] * hb[j];
                } else {
                    double *ig = gates, *og = gates + H, *fg = gates + 2 * H, *cg = gates + 3 * H;
                    for (int64_t j = 0; j < H; j++) {
                        double iv = ig[j] + (Pd ? Pd[j] * cb[j] : 0.0);
                        double fv = fg[j] + (Pd ? Pd[2 * H + j] * cb[j] : 0.0);
                        double i_ = act_apply(&f[0], clipv(iv, clip));
                        double f_ = input_forget ? 1.0 - i_ : act_apply(&f[0], clipv(fv, clip));
                        double c_ = act_apply(&f[1], clipv(cg[j], clip));
                        cb[j] = f_ * cb[j] + i_ * c_;
                        double ov = og[j] + (Pd ? Pd[H + j] * cb[j] : 0.0);
                        double o_ = act_apply(&f[0], clipv(ov, clip));
                        tmp[j] = o_ * act_apply(&f[2], cb[j]);
                    }
                    memcpy(hb, tmp, (size_t)H * sizeof *tmp);
                }
                if (ty)
                    for (int64_t j = 0; j < H; j++) {
                        size_t yi = layout ? (size_t)(((b * S + t) * dirs + d) * H + j)
                                           : (size_t)(((t * dirs + d) * B + b) * H + j);
                        tensor_set_f64(ty, yi, hb[j]);
                    }
            }
        }
        for (int64_t b = 0; b < B; b++)
            for (int64_t j = 0; j < H; j++) {
                size_t si = layout ? (size_t)((b * dirs + d) * H + j) : (size_t)((d * B + b) * H + j);
                if (th)
                    tensor_set_f64(th, si, h[b * H + j]);
                if (tc)
                    tensor_set_f64(tc, si, c[b * H + j]);
            }
    }
done:
    mem_free(X);
    mem_free(W);
    mem_free(R);
    mem_free(Bv);
    mem_free(H0);
    mem_free(C0);
    mem_free(P);
    mem_free(h);
    mem_free(c);
    mem_free(gates);
    mem_free(tmp);
    mem_free(lens);
    return st;
}

tdm_status op_run_RNN(op_ctx *ctx) { return run_rnn(ctx, RK_RNN); }
tdm_status op_run_GRU(op_ctx *ctx) { return run_rnn(ctx, RK_GRU); }
tdm_status op_run_LSTM(op_ctx *ctx) { return run_rnn(ctx, RK_LSTM); }
