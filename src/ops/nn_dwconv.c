/* Depthwise float32 convolution (one input channel per group, at most 4
 * outputs per group): tasks of whole output planes (several small planes
 * to a task), a direct kernel per plane (dw_plane_avx2 for 2-D kernels up
 * to 7x7 at strides 1 and 2, 8 small planes at once by dw_planes8_avx2
 * or, 3 x 3 on planes 12 or more wide, dw_flat8_avx2,
 * else conv_direct_plane), then the activation and the fused program
 * (ctx->fuse) on each block of rows (or 8 planes) just computed, while
 * it is in cache. A fused program that is one clamp (a Clip or a Relu,
 * op_fuse_clamp) dw_plane_avx2 and dw_planes8_avx2 apply in registers as
 * they store. */
#include "ops/nn.h"
#include "core/mem.h"
#include "core/pool.h"

#include <math.h>
#include <string.h>

#define DW_MAX_TAPS 64
/* Planes of at most this many outputs go 8 at a time (dw_planes8_avx2):
 * measured faster up to 14 x 14 (196), slower from 28 x 28 (784). */
#define DW8_MAX 256

/* Depthwise: one input plane x, one output plane y (bias-initialised),
 * kernel w[k_sz]. Output row by output row (the row stays in L1), taps in
 * (kd, kh, kw) order for every output element. */
static void conv_direct_plane(const nn_geom *g, const float *x, const float *w, float *y, int avx2)
{
    const int64_t OD = g->out[0], OH = g->out[1], OW = g->out[2];
    const int64_t D = g->in[0], H = g->in[1], W = g->in[2];
    const int64_t sw = g->s[2];
    int64_t lo[64], hi[64];
    const int kw_n = g->k[2] <= 64 ? (int)g->k[2] : 0;
    int64_t in_lo = 0, in_hi = OW; /* outputs every kw tap covers */
    for (int kw = 0; kw < kw_n; kw++) {
        nn_index_range(OW, W, sw, kw * g->d[2] - g->pb[2], &lo[kw], &hi[kw]);
        in_lo = lo[kw] > in_lo ? lo[kw] : in_lo;
        in_hi = hi[kw] < in_hi ? hi[kw] : in_hi;
    }
    const int vec = avx2 && kw_n && (sw == 1 || sw == 2) && in_lo < in_hi &&
                    g->k[0] * g->k[1] * g->k[2] <= DW_MAX_TAPS;
    for (int64_t od = 0; od < OD; od++)
        for (int64_t oh = 0; oh < OH; oh++) {
            float *restrict dst = y + (od * OH + oh) * OW;
            if (vec) {
                /* Interior by the AVX2 row kernel, borders below. */
                const float *srcs[DW_MAX_TAPS];
                float ws[DW_MAX_TAPS];
                int nt = 0;
                for (int64_t kd = 0; kd < g->k[0]; kd++) {
                    int64_t id = od * g->s[0] + kd * g->d[0] - g->pb[0];
                    if (id < 0 || id >= D)
                        continue;
                    for (int64_t kh = 0; kh < g->k[1]; kh++) {
                        int64_t ih = oh * g->s[1] + kh * g->d[1] - g->pb[1];
                        if (ih < 0 || ih >= H)
                            continue;
                        const float *row = x + (id * H + ih) * W;
                        for (int64_t kw = 0; kw < g->k[2]; kw++) {
                            srcs[nt] = row + in_lo * sw + kw * g->d[2] - g->pb[2];
                            ws[nt++] = w[(kd * g->k[1] + kh) * g->k[2] + kw];
                        }
                    }
                }
                dw_row_avx2(dst + in_lo, (size_t)(in_hi - in_lo), srcs, ws, nt, (int)sw);
            }
            for (int64_t kd = 0; kd < g->k[0]; kd++) {
                int64_t id = od * g->s[0] + kd * g->d[0] - g->pb[0];
                if (id < 0 || id >= D)
                    continue;
                for (int64_t kh = 0; kh < g->k[1]; kh++) {
                    int64_t ih = oh * g->s[1] + kh * g->d[1] - g->pb[1];
                    if (ih < 0 || ih >= H)
                        continue;
                    const float *restrict row = x + (id * H + ih) * W;
                    for (int64_t kw = 0; kw < g->k[2]; kw++) {
                        const float wv = w[(kd * g->k[1] + kh) * g->k[2] + kw];
                        int64_t cw = kw * g->d[2] - g->pb[2], l, h;
                        if (kw < kw_n) {
                            l = lo[kw];
                            h = hi[kw];
                        } else {
                            nn_index_range(OW, W, sw, cw, &l, &h);
                        }
                        if (vec) {
                            /* the borders only */
                            for (int64_t ow = l; ow < h && ow < in_lo; ow++)
                                dst[ow] += wv * row[ow * sw + cw];
                            for (int64_t ow = in_hi > l ? in_hi : l; ow < h; ow++)
                                dst[ow] += wv * row[ow * sw + cw];
                        } else if (sw == 1) {
                            const float *restrict src = row + cw;
                            for (int64_t ow = l; ow < h; ow++)
                                dst[ow] += wv * src[ow];
                        } else if (sw == 2) {
                            const float *restrict src = row + cw;
                            for (int64_t ow = l; ow < h; ow++)
                                dst[ow] += wv * src[2 * ow];
                        } else {
                            for (int64_t ow = l; ow < h; ow++)
                                dst[ow] += wv * row[ow * sw + cw];
                        }
                    }
                }
            }
        }
}

typedef struct dw_job {
    const conv_plan *p;
    const float *x, *w, *bias;
    float *y;
    op_act act;
    const op_fuse *fuse; /* ctx->fuse */
    /* 1: the fused program is one clamp to [flo, fhi] (op_fuse_clamp),
     * which dw_plane_avx2 and dw_planes8_avx2 apply as they store; the
     * portable path applies the program as usual (op_fuse_apply) */
    int fclamp;
    float flo, fhi;
    int avx2;            /* the AVX2 row kernel is usable */
    size_t dw3;          /* depthwise by dw_plane_avx2: its scratch floats, else 0 */
    size_t dw8;          /* small planes by dw_planes8_avx2 8 at a time: its scratch floats, else 0 */
    int flat8;           /* dw8 by dw_flat8_avx2 instead (its scratch is dw8) */
    size_t planes, ntasks;
    size_t units; /* planes, or groups of 8 planes (dw8) */
} dw_job;

/* The epilogue of n outputs at y (flat index at in y): the activation not
 * done by the kernel (clamped says Relu/Clip were), then the fused program. */
static void dw_epilogue(const dw_job *j, float *y, size_t at, size_t n, int clamped)
{
    if (!clamped)
        op_act_apply(&j->act, y, n);
    if (j->fuse)
        op_fuse_apply(j->fuse, y, at, n);
}

typedef struct dw_post_arg {
    const dw_job *j;
    size_t at; /* flat index of the plane's first output */
    int clamped;
} dw_post_arg;

static void dw_post(void *ctx, float *y, size_t off, size_t n)
{
    const dw_post_arg *a = ctx;
    dw_epilogue(a->j, y, a->at + off, n, a->clamped);
}

/* Output plane t (t = n * M + oc) of a depthwise Conv; pad is the scratch
 * of dw_plane_avx2 or NULL. */
static void dw_one_plane(const dw_job *j, size_t t, float *pad)
{
    const conv_plan *p = j->p;
    size_t mg = (size_t)p->mg, kk = p->k_sz;
    size_t n = t / (size_t)p->m, oc = t % (size_t)p->m, gi = oc / mg;
    const float *xg = j->x + (n * (size_t)p->c + gi) * p->in_sz;
    float *ym = j->y + t * p->out_sz;
    float bv = j->bias ? j->bias[oc] : 0.0f;
    if (pad) {
        const nn_geom *g = &p->g;
        int clamp = j->act.kind == OP_ACT_RELU || j->act.kind == OP_ACT_CLIP;
        float lo = j->act.kind == OP_ACT_CLIP ? j->act.a : 0.0f;
        float hi = j->act.kind == OP_ACT_CLIP ? j->act.b : INFINITY;
        int need = !clamp && j->act.kind != OP_ACT_NONE, fz = j->fuse != NULL;
        if (j->fclamp) { /* no activation: the fused clamp instead */
            clamp = 1;
            lo = j->flo;
            hi = j->fhi;
            fz = 0;
        }
        dw_post_arg pa;
        pa.j = j;
        pa.at = t * p->out_sz;
        pa.clamped = clamp;
        dw_plane_avx2(xg, (size_t)g->in[1], (size_t)g->in[2], ym, (size_t)g->out[1], (size_t)g->out[2],
                      (int)g->k[1], (int)g->k[2], (int)g->s[1], (int)g->s[2], (size_t)g->pb[1], (size_t)g->pb[2],
                      j->w + oc * kk, bv, clamp, lo, hi, pad, need || fz ? dw_post : NULL, &pa);
        return;
    }
    for (size_t i = 0; i < p->out_sz; i++)
        ym[i] = bv;
    conv_direct_plane(&p->g, xg, j->w + oc * kk, ym, j->avx2);
    dw_epilogue(j, ym, t * p->out_sz, p->out_sz, 0);
}

/* Output planes t0 .. t0 + 7 by dw_planes8_avx2. */
static void dw_eight(const dw_job *j, size_t t0, float *buf)
{
    const conv_plan *p = j->p;
    const nn_geom *g = &p->g;
    const float *xs[8], *ks[8];
    float bs[8];
    for (size_t ch = 0; ch < 8; ch++) {
        size_t t = t0 + ch, n = t / (size_t)p->m, oc = t % (size_t)p->m;
        xs[ch] = j->x + (n * (size_t)p->c + oc / (size_t)p->mg) * p->in_sz;
        ks[ch] = j->w + oc * p->k_sz;
        bs[ch] = j->bias ? j->bias[oc] : 0.0f;
    }
    float *ym = j->y + t0 * p->out_sz;
    int clamp = j->act.kind == OP_ACT_RELU || j->act.kind == OP_ACT_CLIP;
    float lo = j->act.kind == OP_ACT_CLIP ? j->act.a : 0.0f;
    float hi = j->act.kind == OP_ACT_CLIP ? j->act.b : INFINITY;
    if (j->fclamp) { /* no activation: the fused clamp instead */
        clamp = 1;
        lo = j->flo;
        hi = j->fhi;
    }
    (j->flat8 ? dw_flat8_avx2 : dw_planes8_avx2)(xs, (size_t)g->in[1], (size_t)g->in[2], ym, (size_t)g->out[1],
                                                 (size_t)g->out[2], (int)g->k[1], (int)g->k[2], (int)g->s[1],
                                                 (int)g->s[2], (size_t)g->pb[1], (size_t)g->pb[2], ks, bs, clamp, lo,
                                                 hi, buf);
    if (!j->fclamp)
        dw_epilogue(j, ym, t0 * p->out_sz, 8 * p->out_sz, clamp);
}

/* Task t: units [t * units / ntasks, (t + 1) * units / ntasks), a unit
 * being a plane or (dw8) 8 planes, the last group maybe fewer. */
static void task_depthwise(void *arg, size_t t)
{
    const dw_job *j = arg;
    size_t u0 = t * j->units / j->ntasks, u1 = (t + 1) * j->units / j->ntasks;
    float *pad = j->dw3 ? pool_scratch_get((j->dw3 + j->dw8) * sizeof(float)) : NULL;
    if (!j->dw8) {
        for (size_t q = u0; q < u1; q++)
            dw_one_plane(j, q, pad);
    } else {
        for (size_t u = u0; u < u1; u++) {
            size_t q0 = u * 8, q1 = q0 + 8 < j->planes ? q0 + 8 : j->planes;
            if (pad && q1 - q0 == 8) {
                dw_eight(j, q0, pad + j->dw3);
                continue;
            }
            for (size_t q = q0; q < q1; q++)
                dw_one_plane(j, q, pad);
        }
    }
    pool_scratch_put(pad);
}

tdm_status op_conv_depthwise_f32(op_ctx *ctx, const conv_plan *p, const float *x, const float *w, const float *bias,
                                 const op_act *act, float *y)
{
    const nn_geom *g = &p->g;
    const int threads = ctx->threads > 0 ? ctx->threads : 1;
    dw_job j;
    memset(&j, 0, sizeof j);
    j.p = p;
    j.act = *act;
    j.fuse = ctx->fuse;
    if (mem_mul((size_t)p->n, (size_t)p->m, &j.planes))
        return op_fail(ctx, TDM_E_NOMEM, "the convolution is too large");
    if (!j.planes)
        return TDM_OK;
    /* a fused lone Clip or Relu, and no activation of its own */
    j.fclamp = j.fuse && act->kind == OP_ACT_NONE && op_fuse_clamp(j.fuse, &j.flo, &j.fhi);
    j.x = x;
    j.w = w;
    j.bias = bias;
    j.y = y;
    j.avx2 = gemm_avx2_usable();
    if (j.avx2 && g->k[0] == 1 && g->k[1] >= 1 && g->k[1] <= 7 && g->k[2] >= 1 && g->k[2] <= 7 &&
        g->in[0] == 1 && g->out[0] == 1 && g->d[1] == 1 && g->d[2] == 1 && (g->s[1] == 1 || g->s[1] == 2) &&
        (g->s[2] == 1 || g->s[2] == 2) && g->pb[1] >= 0 && g->pb[2] >= 0)
        j.dw3 = dw_pad_floats((size_t)g->out[1], (size_t)g->out[2], (int)g->k[1], (int)g->k[2], (int)g->s[1],
                              (int)g->s[2]);
    /* small planes 8 at a time */
    if (j.dw3 && p->out_sz <= DW8_MAX && j.planes >= 8)
        j.dw8 = dw8_floats((size_t)g->out[1], (size_t)g->out[2], (int)g->k[1], (int)g->k[2], (int)g->s[1],
                           (int)g->s[2]);
    /* 3 x 3 at equal strides on planes 12 or more wide: flat (measured
     * 15-20% faster at 14 x 14; slower at 7 x 7 and for 5 x 5) */
    if (j.dw8 && g->k[1] == 3 && g->k[2] == 3 && g->s[1] == g->s[2] && g->out[2] >= 12) {
        size_t f = dw_flat8_floats((size_t)g->out[1], (size_t)g->out[2], 3, 3, (int)g->s[1], (int)g->s[2]);
        if (f) {
            j.flat8 = 1;
            j.dw8 = f > j.dw8 ? f : j.dw8;
        }
    }
    /* tasks of whole units, at least ~8k multiply-adds each */
    size_t work = p->out_sz * p->k_sz, min_planes = work ? 8192 / work + 1 : 1;
    j.units = j.dw8 ? (j.planes + 7) / 8 : j.planes;
    j.ntasks = pool_tasks(threads, j.units, j.dw8 ? min_planes / 8 + 1 : min_planes);
    pool_run(threads, j.ntasks, task_depthwise, &j);
    if (j.fclamp)
        op_fuse_applied(ctx->fuse);
    return TDM_OK;
}
