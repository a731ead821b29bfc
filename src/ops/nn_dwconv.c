/* Depthwise float32 convolution (one input channel per group, at most 4
 * outputs per group): one task per output plane, a direct kernel per plane
 * (dw_plane_avx2 for 2-D kernels up to 7x7, else conv_direct_plane). */
#include "ops/nn.h"
#include "core/mem.h"
#include "core/pool.h"

#include <math.h>
#include <string.h>

#define DW_MAX_TAPS 64

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
    int avx2;        /* the AVX2 row kernel is usable */
    size_t dw3;      /* depthwise by dw_plane_avx2: its scratch floats, else 0 */
} dw_job;

/* Depthwise (one input channel per group): one task per output plane. */
static void task_depthwise(void *arg, size_t t)
{
    const dw_job *j = arg;
    const conv_plan *p = j->p;
    size_t mg = (size_t)p->mg, kk = p->k_sz;
    size_t n = t / (size_t)p->m, oc = t % (size_t)p->m, gi = oc / mg;
    const float *xg = j->x + (n * (size_t)p->c + gi) * p->in_sz;
    float *ym = j->y + (n * (size_t)p->m + oc) * p->out_sz;
    float bv = j->bias ? j->bias[oc] : 0.0f;
    if (j->dw3) {
        const nn_geom *g = &p->g;
        float *pad = pool_scratch_get(j->dw3 * sizeof(float));
        if (pad) {
            int clamp = j->act.kind == OP_ACT_RELU || j->act.kind == OP_ACT_CLIP;
            float lo = j->act.kind == OP_ACT_CLIP ? j->act.a : 0.0f;
            float hi = j->act.kind == OP_ACT_CLIP ? j->act.b : INFINITY;
            dw_plane_avx2(xg, (size_t)g->in[1], (size_t)g->in[2], ym, (size_t)g->out[1], (size_t)g->out[2],
                          (int)g->k[1], (int)g->k[2], (int)g->s[1], (int)g->s[2], (size_t)g->pb[1],
                          (size_t)g->pb[2], j->w + oc * kk, bv, clamp, lo, hi, pad);
            pool_scratch_put(pad);
            if (!clamp)
                op_act_apply(&j->act, ym, p->out_sz);
            return;
        }
    }
    for (size_t i = 0; i < p->out_sz; i++)
        ym[i] = bv;
    conv_direct_plane(&p->g, xg, j->w + oc * kk, ym, j->avx2);
    op_act_apply(&j->act, ym, p->out_sz);
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
    size_t planes;
    if (mem_mul((size_t)p->n, (size_t)p->m, &planes))
        return op_fail(ctx, TDM_E_NOMEM, "the convolution is too large");
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
    pool_run(threads, planes, task_depthwise, &j);
    return TDM_OK;
}
