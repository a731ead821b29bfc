/* Convolutions: Conv (im2col + op_sgemm per group, a plain GEMM for 1x1,
 * a direct kernel for depthwise and one for few input channels (the first
 * layer of a CNN: nn_conv_direct.c), Winograd for 3x3 stride 1 when the
 * session runs fused: nn_winograd.c), ConvInteger and QLinearConv (integer accumulation). Spatial ranks 1 to 3
 * are handled as 3-D with leading extents of 1. */
#include "ops/nn.h"
#include "core/mem.h"
#include "core/pool.h"

#include <math.h>
#include <string.h>

void op_nn_conv_plan_sizes(conv_plan *p, int nsp)
{
    p->in_sz = (size_t)(p->g.in[0] * p->g.in[1] * p->g.in[2]);
    p->out_sz = (size_t)(p->g.out[0] * p->g.out[1] * p->g.out[2]);
    p->k_sz = (size_t)(p->g.k[0] * p->g.k[1] * p->g.k[2]);
    p->yrank = 2 + nsp;
    p->ydims[0] = p->n;
    p->ydims[1] = p->m;
    for (int i = 0; i < nsp; i++)
        p->ydims[2 + i] = p->g.out[NN_MAX_SP - nsp + i];
}

static tdm_status conv_prepare(op_ctx *ctx, const tdm_tensor *x, const tdm_tensor *w, conv_plan *p)
{
    memset(p, 0, sizeof *p);
    if (x->rank < 3 || x->rank > 2 + NN_MAX_SP)
        return op_fail(ctx, TDM_E_UNSUPPORTED, "input X has rank %d; 3 to %d are supported", x->rank, 2 + NN_MAX_SP);
    if (w->rank != x->rank)
        return op_fail(ctx, TDM_E_RUNTIME, "input W has rank %d but X has rank %d", w->rank, x->rank);
    int nsp = x->rank - 2;
    tdm_status st = op_nn_geom(ctx->err, ctx->node, nsp, x->dims + 2, w->dims + 2, 1, 0, &p->g);
    if (st)
        return st;
    for (int i = 0; i < nsp; i++)
        if (p->g.k[NN_MAX_SP - nsp + i] != w->dims[2 + i])
            return op_fail(ctx, TDM_E_RUNTIME, "attribute kernel_shape does not match the shape of W");
    p->n = x->dims[0];
    p->c = x->dims[1];
    p->m = w->dims[0];
    p->group = gr_attr_int(ctx->node, "group", 1);
    if (p->group < 1 || p->c % p->group || p->m % p->group)
        return op_fail(ctx, TDM_E_RUNTIME, "attribute group (%lld) must divide the %lld input and %lld output channels",
                       (long long)p->group, (long long)p->c, (long long)p->m);
    p->cg = p->c / p->group;
    p->mg = p->m / p->group;
    if (w->dims[1] != p->cg)
        return op_fail(ctx, TDM_E_RUNTIME, "input W has %lld channels per group, X has %lld", (long long)w->dims[1],
                       (long long)p->cg);
    op_nn_conv_plan_sizes(p, nsp);
    size_t tmp;
    if (shape_count(p->yrank, p->ydims, &tmp) || mem_mul(p->k_sz, (size_t)p->cg, &tmp) ||
        mem_mul(tmp, p->out_sz, &tmp))
        return op_fail(ctx, TDM_E_NOMEM, "the convolution is too large");
    return TDM_OK;
}

/* ---- float32 Conv: im2col straight into the GEMM's packed layout ---- */

/* What the GEMM's pack_b callback needs: the group's input planes. */
typedef struct conv_job {
    const conv_plan *p;
    const float *x;  /* the group's input planes */
    size_t kk;       /* rows: cg * k_sz */
    int s1;          /* the AVX2 stride-1 panels apply (gemm_im2col_s1_avx2) */
    op_im2col_s1 s1c;
    int gather;      /* else the AVX2 gathers apply (gemm_im2col_avx2) */
    op_im2col gc;
} conv_job;

/* One panel (nr output columns from j0 + q * nr) of the packed im2col (an
 * op_gemm_pack_fn). */
static void pack_im2col_panel(const void *arg, op_gemm_layout lay, size_t j0, size_t ncols, size_t npad, size_t q,
                              float *dst)
{
    const conv_job *j = arg;
    const nn_geom *g = &j->p->g;
    const size_t nr = lay.nr, kc = lay.kc, kk = j->kk;
    if (j->s1 && nr == 16) {
        op_im2col_s1 c = j->s1c;
        c.x = j->x;
        gemm_im2col_s1_avx2(&c, j0 + q * nr, ncols - q * nr < nr ? ncols - q * nr : nr, dst, kc, kk, npad, q);
        return;
    }
    if (j->gather && nr == 16) {
        op_im2col c = j->gc;
        c.x = j->x;
        gemm_im2col_avx2(&c, j0 + q * nr, ncols - q * nr < nr ? ncols - q * nr : nr, dst, kc, kk, npad, q);
        return;
    }
    const int64_t OH = g->out[1], OW = g->out[2];
    const int64_t D = g->in[0], H = g->in[1], W = g->in[2];
    const int64_t sw = g->s[2], dw = g->d[2];
    const size_t in_sz = j->p->in_sz;
    size_t c0 = q * nr, cols = ncols - c0 < nr ? ncols - c0 : nr;
    /* Segments of the panel's columns that share an output row: their
     * first input coordinates (before the tap offsets). */
    enum { SEG_MAX = 64 };
    int64_t seg_id[SEG_MAX], seg_ih[SEG_MAX], seg_iw[SEG_MAX];
    size_t seg_at[SEG_MAX], seg_len[SEG_MAX], nseg = 0;
    for (size_t c = 0; c < cols && nseg < SEG_MAX;) {
        int64_t o = (int64_t)(j0 + c0 + c);
        int64_t ow = o % OW, r = o / OW;
        size_t len = (size_t)(OW - ow);
        if (len > cols - c)
            len = cols - c;
        seg_id[nseg] = r / OH * g->s[0] - g->pb[0];
        seg_ih[nseg] = r % OH * g->s[1] - g->pb[1];
        seg_iw[nseg] = ow * sw - g->pb[2];
        seg_at[nseg] = c;
        seg_len[nseg] = len;
        nseg++;
        c += len;
    }
    const float *rows[SEG_MAX]; /* each segment's input row for the current (kd, kh), NULL outside */
    size_t kin = 0, p0 = 0, kcb = kk < kc ? kk : kc;
    float *d = dst + q * kcb * nr;
    for (size_t ch = 0; ch < (size_t)j->p->cg; ch++) {
        const float *xc = j->x + ch * in_sz;
        for (int64_t kd = 0; kd < g->k[0]; kd++)
            for (int64_t kh = 0; kh < g->k[1]; kh++) {
                for (size_t s = 0; s < nseg; s++) {
                    int64_t id = seg_id[s] + kd * g->d[0], ih = seg_ih[s] + kh * g->d[1];
                    rows[s] = id < 0 || id >= D || ih < 0 || ih >= H ? NULL : xc + (id * H + ih) * W;
                }
                for (int64_t kw = 0; kw < g->k[2]; kw++) {
                    const int64_t cw = kw * dw;
                    for (size_t s = 0; s < nseg; s++) {
                        float *ds = d + seg_at[s];
                        const size_t len = seg_len[s];
                        const float *src = rows[s];
                        if (!src) {
                            memset(ds, 0, len * sizeof *ds);
                            continue;
                        }
                        int64_t iw = seg_iw[s] + cw;
                        if (sw == 1) {
                            if (iw >= 0 && iw + (int64_t)len <= W) {
                                /* the common case: a run inside the row */
                                if (len == 16)
                                    memcpy(ds, src + iw, 16 * sizeof *ds);
                                else if (len == 8)
                                    memcpy(ds, src + iw, 8 * sizeof *ds);
                                else
                                    memcpy(ds, src + iw, len * sizeof *ds);
                                continue;
                            }
                            /* zeros left of the row, the row, zeros right of it */
                            size_t t = 0, lo = iw < 0 ? (size_t)(-iw) : 0, hi = len;
                            if (lo > len)
                                lo = len;
                            if (iw + (int64_t)len > W)
                                hi = W > iw ? (size_t)(W - iw) : 0;
                            if (hi < lo)
                                hi = lo;
                            for (; t < lo; t++)
                                ds[t] = 0.0f;
                            for (; t < hi; t++)
                                ds[t] = src[iw + (int64_t)t];
                            for (; t < len; t++)
                                ds[t] = 0.0f;
                        } else if (iw >= 0 && iw + ((int64_t)len - 1) * sw < W) {
                            const float *sp = src + iw;
                            for (size_t t = 0; t < len; t++)
                                ds[t] = sp[(int64_t)t * sw];
                        } else {
                            for (size_t t = 0; t < len; t++, iw += sw)
                                ds[t] = iw >= 0 && iw < W ? src[iw] : 0.0f;
                        }
                    }
                    for (size_t t = cols; t < nr; t++)
                        d[t] = 0.0f;
                    /* the next row of the packed layout */
                    d += nr;
                    if (++kin == kcb) {
                        p0 += kcb;
                        kin = 0;
                        kcb = kk - p0 < kc ? kk - p0 : kc;
                        d = dst + p0 * npad + q * kcb * nr;
                    }
                }
            }
    }
}

static int is_pointwise(const nn_geom *g)
{
    for (int i = 0; i < NN_MAX_SP; i++)
        if (g->k[i] != 1 || g->s[i] != 1 || g->pb[i] || g->pe[i])
            return 0;
    return 1;
}

/* Fills the packed weights of every group (an op_nn_packed_const fill). */
typedef struct conv_wpack {
    const conv_plan *p;
} conv_wpack;

static void conv_fill_a(const void *arg, const void *src, float *dst)
{
    const conv_wpack *c = arg;
    const float *w = src;
    const size_t mg = (size_t)c->p->mg, kk = (size_t)c->p->cg * c->p->k_sz;
    op_gemm gm = {.m = mg, .k = kk, .alpha = 1.0f, .lda = kk};
    size_t per = op_sgemm_pack_a_floats(&gm);
    for (int64_t gi = 0; gi < c->p->group; gi++) {
        gm.a = w + (size_t)gi * mg * kk;
        op_sgemm_pack_a(&gm, dst + (size_t)gi * per);
    }
}

/* The float32 convolution: y[n, m, out] = fuse(conv(x, w) + bias). w_in
 * is the node's input holding w (1), or -1 when w is a converted copy.
 * The node's w is where it lies (kernel_aligns): maybe misaligned in the
 * model's file, so that only its packed form is resident; it is aligned
 * (a copy kept with it) only on the paths that load its elements here:
 * depthwise, direct, and the GEMM or Winograd without a packed form. */
static tdm_status conv_f32(op_ctx *ctx, const conv_plan *p, const float *x, const float *w, int w_in,
                           const float *bias, float *y)
{
    const nn_geom *g = &p->g;
    const size_t cg = (size_t)p->cg, mg = (size_t)p->mg, kk = cg * p->k_sz;
    const int threads = ctx->threads > 0 ? ctx->threads : 1;
    const int dw = cg == 1 && mg <= 4 && p->group > 1, direct = !dw && op_conv_direct_ok(ctx, p);
    if ((dw || direct) && !(w = op_nn_loadable(ctx, w_in, w)))
        return op_fail(ctx, TDM_E_NOMEM, "out of memory");
    if (dw) {
        op_act none = {OP_ACT_NONE, 0.0f, 0.0f};
        return op_conv_depthwise_f32(ctx, p, x, w, bias, &none, y);
    }
    if (direct)
        return op_conv_direct_f32(ctx, p, x, w, w_in, bias, y);
    if (op_conv_winograd_ok(ctx, p))
        return op_conv_winograd_f32(ctx, p, x, w, w_in, bias, y);
    conv_job j;
    memset(&j, 0, sizeof j);
    j.p = p;
    j.kk = kk;
    op_gemm gm;
    memset(&gm, 0, sizeof gm);
    gm.m = mg;
    gm.k = kk;
    gm.alpha = 1.0f;
    gm.lda = kk;
    gm.ldc = p->out_sz;
    gm.n = p->out_sz;
    gm.threads = threads;
    gm.fuse = ctx->fuse;
    /* a lone Relu or Clip: clamped in the GEMM kernel's stores */
    float lo, hi;
    const int clamp = gm.fuse && op_fuse_clamp(gm.fuse, &lo, &hi);
    if (clamp) {
        gm.act = (op_act){OP_ACT_CLIP, lo, hi};
        gm.fuse = NULL;
    }
    /* The weights packed once for the GEMM when they are an initializer. */
    const size_t per_group = op_sgemm_pack_a_floats(&gm);
    const float *wpack = NULL;
    size_t total;
    if (w_in >= 0 && per_group && !mem_mul(per_group, (size_t)p->group, &total)) {
        op_gemm_layout lay = op_sgemm_layout(kk);
        uint64_t kv[] = {0x436f6e76u /* "Conv" */, lay.kc, lay.mr, lay.nr, mg, kk, (uint64_t)p->group};
        conv_wpack wp = {p};
        wpack = op_nn_packed_const(ctx, w_in, op_nn_pack_key(kv, sizeof kv / sizeof kv[0]), total, conv_fill_a, &wp, 0);
    }
    if (!wpack && !(w = op_nn_loadable(ctx, w_in, w)))
        return op_fail(ctx, TDM_E_NOMEM, "out of memory");
    int pointwise = is_pointwise(g);
    for (int64_t n = 0; n < p->n; n++)
        for (int64_t gi = 0; gi < p->group; gi++) {
            const float *xg = x + ((size_t)n * (size_t)p->c + (size_t)gi * cg) * p->in_sz;
            size_t yoff = ((size_t)n * (size_t)p->m + (size_t)gi * mg) * p->out_sz;
            gm.a = w + (size_t)gi * mg * kk;
            gm.apack = wpack ? wpack + (size_t)gi * per_group : NULL;
            gm.bias = bias ? bias + (size_t)gi * mg : NULL;
            gm.c = y + yoff;
            gm.fuse_at = yoff;
            if (pointwise) {
                gm.b = xg;
                gm.ldb = p->in_sz;
            } else {
                j.x = xg;
                gm.pack_b = pack_im2col_panel;
                j.s1 = g->s[1] == 1 && g->s[2] == 1 && g->in[0] == 1 && g->k[0] == 1 && g->out[0] == 1 &&
                       g->out[2] == g->in[2] && g->k[1] <= OP_IM2COL_MAX_K && g->k[2] <= OP_IM2COL_MAX_K &&
                       gemm_avx2_usable();
                j.s1c = (op_im2col_s1){NULL, p->in_sz, cg, g->k[1], g->k[2], g->d[1], g->d[2], g->pb[1], g->pb[2],
                                       g->in[1], g->in[2]};
                j.gather = !j.s1 && g->in[0] == 1 && g->k[0] == 1 && g->out[0] == 1 && p->in_sz < ((size_t)1 << 30) &&
                           g->k[1] * g->d[1] < ((int64_t)1 << 20) && g->k[2] * g->d[2] < ((int64_t)1 << 20) &&
                           g->s[1] < ((int64_t)1 << 20) && g->s[2] < ((int64_t)1 << 20) && gemm_avx2_usable();
                j.gc = (op_im2col){NULL, p->in_sz, cg, g->k[1], g->k[2], g->s[1], g->s[2], g->d[1], g->d[2],
                                   g->pb[1], g->pb[2], g->in[1], g->in[2], g->out[2]};
                gm.pack_b_arg = &j;
            }
            if (op_sgemm_run(&gm))
                return op_fail(ctx, TDM_E_NOMEM, "out of memory");
        }
    if (clamp)
        op_fuse_applied(ctx->fuse);
    return TDM_OK;
}

/* Double precision: a direct loop. */
static void conv_f64(const conv_plan *p, const double *x, const double *w, const double *bias, double *y)
{
    const nn_geom *g = &p->g;
    const int64_t D = g->in[0], H = g->in[1], W = g->in[2];
    size_t yi = 0;
    for (int64_t n = 0; n < p->n; n++)
        for (int64_t oc = 0; oc < p->m; oc++) {
            int64_t gi = oc / p->mg;
            const double *wk = w + (size_t)oc * (size_t)p->cg * p->k_sz;
            for (int64_t od = 0; od < g->out[0]; od++)
                for (int64_t oh = 0; oh < g->out[1]; oh++)
                    for (int64_t ow = 0; ow < g->out[2]; ow++) {
                        double s = bias ? bias[oc] : 0.0;
                        for (int64_t c = 0; c < p->cg; c++) {
                            const double *xc = x + ((size_t)n * (size_t)p->c + (size_t)(gi * p->cg + c)) * p->in_sz;
                            const double *wc = wk + (size_t)c * p->k_sz;
                            for (int64_t kd = 0; kd < g->k[0]; kd++) {
                                int64_t id = od * g->s[0] + kd * g->d[0] - g->pb[0];
                                if (id < 0 || id >= D)
                                    continue;
                                for (int64_t kh = 0; kh < g->k[1]; kh++) {
                                    int64_t ih = oh * g->s[1] + kh * g->d[1] - g->pb[1];
                                    if (ih < 0 || ih >= H)
                                        continue;
                                    for (int64_t kw = 0; kw < g->k[2]; kw++) {
                                        int64_t iw = ow * g->s[2] + kw * g->d[2] - g->pb[2];
                                        if (iw < 0 || iw >= W)
                                            continue;
                                        s += xc[(id * H + ih) * W + iw] * wc[(kd * g->k[1] + kh) * g->k[2] + kw];
                                    }
                                }
                            }
                        }
                        y[yi++] = s;
                    }
        }
}

tdm_status op_run_Conv(op_ctx *ctx)
{
    const tdm_tensor *x = op_nn_in(ctx, 0), *w = op_nn_in(ctx, 1), *b = op_nn_in(ctx, 2);
    if (!x || !w)
        return op_fail(ctx, TDM_E_MODEL, "inputs X and W are required");
    if (w->dtype != x->dtype || (b && b->dtype != x->dtype))
        return op_fail(ctx, TDM_E_RUNTIME, "X, W and B must have one element type");
    conv_plan p;
    tdm_status st = conv_prepare(ctx, x, w, &p);
    if (st)
        return st;
    if (b && (b->rank != 1 || b->dims[0] != p.m))
        return op_fail(ctx, TDM_E_RUNTIME, "input B must hold %lld values", (long long)p.m);
    st = op_out(ctx, 0, x->dtype, p.yrank, p.ydims);
    if (st)
        return st;
    tdm_tensor *y = ctx->out[0];
    if (!y->count)
        return TDM_OK;
    switch (x->dtype) {
    case TDM_FLOAT:
        return conv_f32(ctx, &p, x->data, w->data, 1, b ? b->data : NULL, y->data);
    case TDM_DOUBLE:
        conv_f64(&p, x->data, w->data, b ? b->data : NULL, y->data);
        return TDM_OK;
    case TDM_FLOAT16:
    case TDM_BFLOAT16:
        return op_nn_conv_via_f32(ctx, &p, x, w, b, y, conv_f32);
    default:
        return op_fail(ctx, TDM_E_UNSUPPORTED, "Conv does not take %s", tdm_dtype_name(x->dtype));
    }
}

/* ------------------------------------------------- integer convolutions */

/* The direct form of conv_int_acc, for when its column buffer cannot be had. */
static void conv_int_acc_direct(const conv_plan *p, const tdm_tensor *x, int32_t xz, const tdm_tensor *w,
                                const tdm_tensor *wzp, int32_t *acc)
{
    const nn_geom *g = &p->g;
    const int64_t D = g->in[0], H = g->in[1], W = g->in[2];
    size_t yi = 0;
    for (int64_t n = 0; n < p->n; n++)
        for (int64_t oc = 0; oc < p->m; oc++) {
            int32_t wz = wzp ? nn_ld8(wzp, wzp->count > 1 ? (size_t)oc : 0) : 0;
            int64_t gi = oc / p->mg;
            size_t wk = (size_t)oc * (size_t)p->cg * p->k_sz;
            for (int64_t od = 0; od < g->out[0]; od++)
                for (int64_t oh = 0; oh < g->out[1]; oh++)
                    for (int64_t ow = 0; ow < g->out[2]; ow++) {
                        int64_t s = 0;
                        for (int64_t c = 0; c < p->cg; c++) {
                            size_t xc = ((size_t)n * (size_t)p->c + (size_t)(gi * p->cg + c)) * p->in_sz;
                            size_t wc = wk + (size_t)c * p->k_sz;
                            for (int64_t kd = 0; kd < g->k[0]; kd++) {
                                int64_t id = od * g->s[0] + kd * g->d[0] - g->pb[0];
                                if (id < 0 || id >= D)
                                    continue;
                                for (int64_t kh = 0; kh < g->k[1]; kh++) {
                                    int64_t ih = oh * g->s[1] + kh * g->d[1] - g->pb[1];
                                    if (ih < 0 || ih >= H)
                                        continue;
                                    for (int64_t kw = 0; kw < g->k[2]; kw++) {
                                        int64_t iw = ow * g->s[2] + kw * g->d[2] - g->pb[2];
                                        if (iw < 0 || iw >= W)
                                            continue;
                                        int64_t xv = nn_ld8(x, xc + (size_t)((id * H + ih) * W + iw)) - xz;
                                        int64_t wv = nn_ld8(w, wc + (size_t)((kd * g->k[1] + kh) * g->k[2] + kw)) - wz;
                                        s += xv * wv;
                                    }
                                }
                            }
                        }
                        acc[yi++] = (int32_t)(uint32_t)(uint64_t)s; /* wraps like int32 hardware */
                    }
        }
}

/* col[k][o] = x - xz under tap k (channel c of group gi, kernel offset) at
 * output position o, 0 in the padding; k runs as w's layout (c, kd, kh, kw). */
static void conv_int_im2col(const conv_plan *p, const tdm_tensor *x, int32_t xz, int64_t n, int64_t gi,
                            uint32_t *col)
{
    const nn_geom *g = &p->g;
    const int64_t D = g->in[0], H = g->in[1], W = g->in[2];
    for (int64_t c = 0; c < p->cg; c++) {
        size_t xc = ((size_t)n * (size_t)p->c + (size_t)(gi * p->cg + c)) * p->in_sz;
        for (int64_t kd = 0; kd < g->k[0]; kd++)
            for (int64_t kh = 0; kh < g->k[1]; kh++)
                for (int64_t kw = 0; kw < g->k[2]; kw++)
                    for (int64_t od = 0; od < g->out[0]; od++) {
                        int64_t id = od * g->s[0] + kd * g->d[0] - g->pb[0];
                        for (int64_t oh = 0; oh < g->out[1]; oh++) {
                            int64_t ih = oh * g->s[1] + kh * g->d[1] - g->pb[1];
                            int row_in = id >= 0 && id < D && ih >= 0 && ih < H;
                            for (int64_t ow = 0; ow < g->out[2]; ow++) {
                                int64_t iw = ow * g->s[2] + kw * g->d[2] - g->pb[2];
                                *col++ = row_in && iw >= 0 && iw < W
                                             ? (uint32_t)(nn_ld8(x, xc + (size_t)((id * H + ih) * W + iw)) - xz)
                                             : 0u;
                            }
                        }
                    }
    }
}

/* acc[n, m, out] = sum (x - xzp)(w - wzp[m]); padding contributes 0. Sums in
 * uint32, which wraps as int32 hardware does (the products fit: |x - xzp|,
 * |w - wzp| <= 255), over a column buffer per image and group (an integer
 * im2col + GEMM), or directly when the buffer cannot be allocated. */
static tdm_status conv_int_acc(op_ctx *ctx, const conv_plan *p, const tdm_tensor *x, const tdm_tensor *xzp,
                               const tdm_tensor *w, const tdm_tensor *wzp, int32_t *acc)
{
    if (xzp && xzp->count != 1)
        return op_fail(ctx, TDM_E_RUNTIME, "the x zero point must be a scalar");
    if (wzp && wzp->count != 1 && wzp->count != (size_t)p->m)
        return op_fail(ctx, TDM_E_RUNTIME, "the w zero point must be a scalar or hold %lld values", (long long)p->m);
    int32_t xz = xzp ? nn_ld8(xzp, 0) : 0;
    size_t kk = (size_t)p->cg * p->k_sz, cells;
    uint32_t *col = NULL, *row = NULL;
    if (!mem_mul(kk, p->out_sz, &cells) && cells <= SIZE_MAX / sizeof *col - 1) {
        col = mem_alloc(cells * sizeof *col + 1);
        row = mem_alloc(p->out_sz * sizeof *row + 1);
    }
    if (!col || !row) {
        mem_free(col);
        mem_free(row);
        conv_int_acc_direct(p, x, xz, w, wzp, acc);
        return TDM_OK;
    }
    for (int64_t n = 0; n < p->n; n++)
        for (int64_t gi = 0; gi < p->group; gi++) {
            conv_int_im2col(p, x, xz, n, gi, col);
            for (int64_t oc = gi * p->mg; oc < (gi + 1) * p->mg; oc++) {
                int32_t wz = wzp ? nn_ld8(wzp, wzp->count > 1 ? (size_t)oc : 0) : 0;
                size_t wk = (size_t)oc * kk;
                memset(row, 0, p->out_sz * sizeof *row);
                for (size_t k = 0; k < kk; k++) {
                    uint32_t wv = (uint32_t)(nn_ld8(w, wk + k) - wz);
                    const uint32_t *ck = col + k * p->out_sz;
                    if (wv)
                        for (size_t o = 0; o < p->out_sz; o++)
                            row[o] += wv * ck[o];
                }
                int32_t *dst = acc + ((size_t)n * (size_t)p->m + (size_t)oc) * p->out_sz;
                for (size_t o = 0; o < p->out_sz; o++)
                    dst[o] = (int32_t)row[o];
            }
        }
    mem_free(col);
    mem_free(row);
    return TDM_OK;
}

static int is_q8(const tdm_tensor *t) { return t && (t->dtype == TDM_INT8 || t->dtype == TDM_UINT8); }

tdm_status op_run_ConvInteger(op_ctx *ctx)
{
    const tdm_tensor *x = op_nn_in(ctx, 0), *w = op_nn_in(ctx, 1);
    const tdm_tensor *xzp = op_nn_in(ctx, 2), *wzp = op_nn_in(ctx, 3);
    if (!x || !w)
        return op_fail(ctx, TDM_E_MODEL, "inputs x and w are required");
    if (!is_q8(x) || !is_q8(w) || (xzp && xzp->dtype != x->dtype) || (wzp && wzp->dtype != w->dtype))
        return op_fail(ctx, TDM_E_RUNTIME, "x, w and their zero points must be int8 or uint8 (zero points matching)");
    conv_plan p;
    tdm_status st = conv_prepare(ctx, x, w, &p);
    if (st)
        return st;
    st = op_out(ctx, 0, TDM_INT32, p.yrank, p.ydims);
    if (st)
        return st;
    return conv_int_acc(ctx, &p, x, xzp, w, wzp, ctx->out[0]->data);
}

tdm_status op_run_QLinearConv(op_ctx *ctx)
{
    const tdm_tensor *x = op_nn_in(ctx, 0), *xs = op_nn_in(ctx, 1), *xzp = op_nn_in(ctx, 2);
    const tdm_tensor *w = op_nn_in(ctx, 3), *ws = op_nn_in(ctx, 4), *wzp = op_nn_in(ctx, 5);
    const tdm_tensor *ys = op_nn_in(ctx, 6), *yzp = op_nn_in(ctx, 7), *b = op_nn_in(ctx, 8);
    if (!x || !xs || !w || !ws || !ys)
        return op_fail(ctx, TDM_E_MODEL, "inputs x, x_scale, w, w_scale and y_scale are required");
    if (!is_q8(x) || !is_q8(w) || (xzp && xzp->dtype != x->dtype) || (wzp && wzp->dtype != w->dtype) ||
        (yzp && !is_q8(yzp)))
        return op_fail(ctx, TDM_E_RUNTIME, "x, w, y and their zero points must be int8 or uint8");
    if (xs->dtype != TDM_FLOAT || ws->dtype != TDM_FLOAT || ys->dtype != TDM_FLOAT)
        return op_fail(ctx, TDM_E_RUNTIME, "the scales must be float tensors");
    if (xs->count != 1 || ys->count != 1 || (yzp && yzp->count != 1))
        return op_fail(ctx, TDM_E_RUNTIME, "x_scale, y_scale and y_zero_point must be scalars");
    if (b && (b->dtype != TDM_INT32))
        return op_fail(ctx, TDM_E_RUNTIME, "input B must be int32");
    conv_plan p;
    tdm_status st = conv_prepare(ctx, x, w, &p);
    if (st)
        return st;
    if (ws->count != 1 && ws->count != (size_t)p.m)
        return op_fail(ctx, TDM_E_RUNTIME, "w_scale must be a scalar or hold %lld values", (long long)p.m);
    if (b && b->count != (size_t)p.m)
        return op_fail(ctx, TDM_E_RUNTIME, "input B must hold %lld values", (long long)p.m);
    size_t cnt;
    if (shape_count(p.yrank, p.ydims, &cnt))
        return op_fail(ctx, TDM_E_NOMEM, "the output is too large");
    int32_t *acc = mem_alloc(cnt * sizeof *acc + 1);
    if (!acc)
        return op_fail(ctx, TDM_E_NOMEM, "out of memory");
    st = conv_int_acc(ctx, &p, x, xzp, w, wzp, acc);
    tdm_dtype ydt = yzp ? yzp->dtype : x->dtype;
    if (!st)
        st = op_out(ctx, 0, ydt, p.yrank, p.ydims);
    if (!st) {
        tdm_tensor *y = ctx->out[0];
        const float *pws = ws->data;
        float xsc = *(const float *)xs->data, ysc = *(const float *)ys->data;
        int32_t yz = yzp ? nn_ld8(yzp, 0) : 0;
        size_t i = 0;
        for (int64_t n = 0; n < p.n; n++)
            for (int64_t oc = 0; oc < p.m; oc++) {
                float sc = xsc * pws[ws->count > 1 ? (size_t)oc : 0] / ysc;
                int32_t bv = b ? ((const int32_t *)b->data)[oc] : 0;
                for (size_t k = 0; k < p.out_sz; k++, i++) {
                    double v = nearbyint((double)((float)((int64_t)acc[i] + bv) * sc)) + yz;
                    if (ydt == TDM_UINT8)
                        ((uint8_t *)y->data)[i] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
                    else
                        ((int8_t *)y->data)[i] = (int8_t)(v < -128 ? -128 : v > 127 ? 127 : v);
                }
            }
    }
    mem_free(acc);
    return st;
}

/* ------------------------------------------------------------ infer hooks */

/* Output type of a convolution from X (input ix) and W (input iw). */
static void infer_conv(op_infer_ctx *ctx, int ix, int iw, tdm_dtype dtype, int transpose)
{
    gr_type *o = &ctx->out[0];
    o->kind = TDM_KIND_TENSOR;
    o->dtype = dtype;
    const gr_type *x = ctx->n_in > ix ? ctx->in[ix] : NULL;
    const gr_type *w = ctx->n_in > iw ? ctx->in[iw] : NULL;
    if (!x || x->rank < 3 || x->rank > 2 + NN_MAX_SP)
        return;
    int nsp = x->rank - 2;
    o->rank = x->rank;
    o->dims[0] = x->dims[0];
    o->dims[1] = (gr_dim){-1, NULL};
    for (int i = 0; i < nsp; i++)
        o->dims[2 + i] = (gr_dim){-1, NULL};
    int64_t kern[NN_MAX_SP], in[NN_MAX_SP];
    int kern_known = w && w->rank == x->rank;
    for (int i = 0; i < nsp; i++) {
        in[i] = x->dims[2 + i].v;
        if (kern_known && w->dims[2 + i].v < 1)
            kern_known = 0;
        if (kern_known)
            kern[i] = w->dims[2 + i].v;
    }
    if (w && w->rank == x->rank) {
        if (!transpose) {
            o->dims[1] = w->dims[0];
        } else {
            int64_t gr = gr_attr_int(ctx->node, "group", 1);
            if (w->dims[1].v >= 0 && gr >= 1)
                o->dims[1] = (gr_dim){w->dims[1].v * gr, NULL};
        }
    }
    nn_geom g;
    tdm_status st = transpose ? op_nn_convt_geom(NULL, ctx->node, nsp, in, kern_known ? kern : NULL, &g)
                              : op_nn_geom(NULL, ctx->node, nsp, in, kern_known ? kern : NULL, 1, 0, &g);
    if (st)
        return;
    for (int i = 0; i < nsp; i++) {
        int64_t v = g.out[NN_MAX_SP - nsp + i];
        if (v >= 0)
            o->dims[2 + i] = (gr_dim){v, NULL};
    }
}

tdm_status op_infer_Conv(op_infer_ctx *ctx)
{
    infer_conv(ctx, 0, 1, ctx->n_in > 0 && ctx->in[0] ? ctx->in[0]->dtype : TDM_UNDEFINED, 0);
    return TDM_OK;
}

tdm_status op_infer_ConvTranspose(op_infer_ctx *ctx)
{
    infer_conv(ctx, 0, 1, ctx->n_in > 0 && ctx->in[0] ? ctx->in[0]->dtype : TDM_UNDEFINED, 1);
    return TDM_OK;
}

tdm_status op_infer_ConvInteger(op_infer_ctx *ctx)
{
    infer_conv(ctx, 0, 1, TDM_INT32, 0);
    return TDM_OK;
}

tdm_status op_infer_QLinearConv(op_infer_ctx *ctx)
{
    tdm_dtype dt = ctx->n_in > 7 && ctx->in[7] ? ctx->in[7]->dtype
                   : ctx->n_in > 0 && ctx->in[0] ? ctx->in[0]->dtype
                                                 : TDM_UNDEFINED;
    infer_conv(ctx, 0, 3, dt, 0);
    return TDM_OK;
}
