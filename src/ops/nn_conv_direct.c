/* A direct float32 convolution for few input channels (the first layer of
 * a CNN: 3 channels, kernel 3x3 to 7x7, stride 1 or 2), where im2col +
 * GEMM has too short a K to pay for its packing.
 *
 * Each task owns a band of output rows (over batch x rows). For an output
 * row it copies the C x KH input rows the row reads, zero padded and, for
 * stride 2, split into even and odd columns, so that the input of tap
 * (c, kh, kw) for 24 consecutive output pixels is 24 consecutive floats.
 * The AVX2 tile (conv_direct_avx2.c) then computes 4 output channels x 24
 * pixels, summing the taps in the order (c, kh, kw) from zero with FMAs
 * and adding the bias last, as the GEMM does with the im2col matrix: the
 * results are bit-identical to the im2col path's, whatever the thread
 * count. The output is stored in NCHW directly; a lone Relu/Clip is
 * clamped in registers, any other fused program runs on each output row
 * while it is in L1. (A SiLU computed in the tile's registers measured no
 * faster: efficientnet_b0's first Conv 0.559 vs 0.558 ms at 1 thread; its
 * cost is the Sigmoid's arithmetic, not the second pass.) */
#include "ops/nn.h"
#include "core/mem.h"
#include "core/pool.h"

#include <string.h>

#define CD_MB 4       /* output channels per tile */
#define CD_PIX 24     /* output pixels per tile */
#define CD_MAX_C 4
#define CD_MAX_K 7

int op_conv_direct_ok(const op_ctx *ctx, const conv_plan *p)
{
    const nn_geom *g = &p->g;
    (void)ctx;
    if (p->group != 1 || p->c < 1 || p->c > CD_MAX_C || p->m < 1)
        return 0;
    if (g->in[0] != 1 || g->k[0] != 1 || g->out[0] != 1)
        return 0;
    if (g->k[1] < 1 || g->k[1] > CD_MAX_K || g->k[2] < 1 || g->k[2] > CD_MAX_K)
        return 0;
    if (g->s[1] < 1 || g->s[1] > 2 || g->s[2] < 1 || g->s[2] > 2 || g->d[1] != 1 || g->d[2] != 1)
        return 0;
    if (g->pb[1] > CD_MAX_K || g->pb[2] > CD_MAX_K || g->in[2] > ((int64_t)1 << 24) || g->out[2] > ((int64_t)1 << 24))
        return 0;
    /* measured: pays for the first layers (3 channels, 3x3 to 7x7, 8+
     * output channels, rows of 16+ pixels); small ones stay on the GEMM */
    if (p->m < 8 || g->out[2] < 16 || p->c * g->k[1] * g->k[2] < 9)
        return 0;
    return gemm_avx2_usable();
}

typedef struct cd_job {
    const conv_plan *p;
    const float *x, *wp, *bp; /* input, packed weights [mb][tap][4], padded bias (or NULL) */
    float *y;
    const op_fuse *fuse;      /* a fused program to run per output row, or NULL */
    const float *clamp;       /* {lo, hi} or NULL */
    float *scratch;           /* per task: rows floats */
    size_t rows, lp, nmb, ntaps, tasks, total_rows;
} cd_job;

static void cd_task(void *arg, size_t task)
{
    const cd_job *j = arg;
    const conv_plan *p = j->p;
    const nn_geom *g = &p->g;
    const int64_t H = g->in[1], W = g->in[2], OH = g->out[1], OW = g->out[2];
    const int64_t KH = g->k[1], KW = g->k[2], sh = g->s[1], sw = g->s[2], pt = g->pb[1], pl = g->pb[2];
    const int64_t C = p->c, M = p->m;
    const size_t lp = j->lp;
    float *buf = j->scratch + task * j->rows;
    const float *src[CD_MAX_C * CD_MAX_K * CD_MAX_K];
    for (int64_t c = 0, t = 0; c < C; c++)
        for (int64_t kh = 0; kh < KH; kh++)
            for (int64_t kw = 0; kw < KW; kw++, t++)
                src[t] = buf + (size_t)((c * KH + kh) * sw + kw % sw) * lp + (size_t)(kw / sw);
    size_t r0 = j->total_rows * task / j->tasks, r1 = j->total_rows * (task + 1) / j->tasks;
    for (size_t r = r0; r < r1; r++) {
        const int64_t n = (int64_t)(r / (size_t)OH), oh = (int64_t)(r % (size_t)OH);
        const float *xn = j->x + (size_t)(n * C) * p->in_sz;
        /* the input rows of this output row, padded, split by column phase */
        for (int64_t c = 0; c < C; c++)
            for (int64_t kh = 0; kh < KH; kh++) {
                int64_t ih = oh * sh + kh - pt;
                const float *row = ih >= 0 && ih < H ? xn + (size_t)c * p->in_sz + (size_t)(ih * W) : NULL;
                if (row && sw == 2) {
                    /* the padded row, then its even and odd columns */
                    float *pr = buf + j->rows - 2 * lp, *d = buf + (size_t)((c * KH + kh) * 2) * lp;
                    size_t n2 = 2 * lp, a = (size_t)pl < n2 ? (size_t)pl : n2;
                    size_t len = (size_t)W < n2 - a ? (size_t)W : n2 - a;
                    memset(pr, 0, a * sizeof *pr);
                    memcpy(pr + a, row, len * sizeof *pr);
                    memset(pr + a + len, 0, (n2 - a - len) * sizeof *pr);
                    conv_direct_split_avx2(pr, lp, d, d + lp);
                    continue;
                }
                for (int64_t ph = 0; ph < sw; ph++) {
                    float *d = buf + (size_t)((c * KH + kh) * sw + ph) * lp;
                    if (!row) {
                        memset(d, 0, lp * sizeof *d);
                        continue;
                    }
                    /* d[i] = row[i * sw + ph - pl] inside the row, else 0 */
                    int64_t i0 = pl - ph > 0 ? (pl - ph + sw - 1) / sw : 0; /* first i with iw >= 0 */
                    int64_t i1 = W - 1 - ph + pl < 0 ? 0 : (W - 1 - ph + pl) / sw + 1; /* past the last iw < W */
                    if (i1 > (int64_t)lp)
                        i1 = (int64_t)lp;
                    if (i0 > i1)
                        i0 = i1;
                    for (int64_t i = 0; i < i0; i++)
                        d[i] = 0.0f;
                    if (sw == 1)
                        memcpy(d + i0, row + (i0 - pl), (size_t)(i1 - i0) * sizeof *d);
                    else
                        for (int64_t i = i0; i < i1; i++)
                            d[i] = row[i * 2 + ph - pl];
                    for (int64_t i = i1; i < (int64_t)lp; i++)
                        d[i] = 0.0f;
                }
            }
        for (size_t mb = 0; mb < j->nmb; mb++) {
            float *yrow[CD_MB], *yy[CD_MB];
            for (size_t i = 0; i < CD_MB; i++) {
                int64_t m = (int64_t)(mb * CD_MB + i);
                yrow[i] = m < M ? j->y + ((size_t)(n * M + m) * (size_t)OH + (size_t)oh) * (size_t)OW : NULL;
            }
            const float *wmb = j->wp + mb * j->ntaps * CD_MB;
            const float *bmb = j->bp ? j->bp + mb * CD_MB : NULL;
            for (int64_t o = 0; o < OW; o += CD_PIX) {
                for (size_t i = 0; i < CD_MB; i++)
                    yy[i] = yrow[i] ? yrow[i] + o : NULL;
                size_t nv = OW - o < CD_PIX ? (size_t)(OW - o) : CD_PIX;
                conv_direct_tile_avx2(j->ntaps, src, (size_t)o, wmb, yy, nv, bmb, j->clamp);
            }
            if (j->fuse)
                for (size_t i = 0; i < CD_MB; i++)
                    if (yrow[i])
                        op_fuse_apply(j->fuse, yrow[i], (size_t)(yrow[i] - j->y), (size_t)OW);
        }
    }
}

tdm_status op_conv_direct_f32(op_ctx *ctx, const conv_plan *p, const float *x, const float *w, int w_in,
                              const float *bias, float *y)
{
    (void)w_in;
    const nn_geom *g = &p->g;
    const int threads = ctx->threads > 0 ? ctx->threads : 1;
    const size_t C = (size_t)p->c, M = (size_t)p->m, KH = (size_t)g->k[1], KW = (size_t)g->k[2];
    const size_t sw = (size_t)g->s[2], OW = (size_t)g->out[2], OH = (size_t)g->out[1];
    const size_t ntaps = C * KH * KW, nmb = (M + CD_MB - 1) / CD_MB;
    const size_t owr = (OW + CD_PIX - 1) / CD_PIX * CD_PIX;
    size_t lp = owr + (KW - 1) / sw;
    lp = (lp + 7) / 8 * 8;
    const size_t rows = C * KH * sw * lp + 2 * lp; /* the phase rows, a padded row */
    cd_job j;
    memset(&j, 0, sizeof j);
    j.p = p;
    j.x = x;
    j.y = y;
    j.lp = lp;
    j.rows = rows;
    j.nmb = nmb;
    j.ntaps = ntaps;
    j.total_rows = (size_t)p->n * OH;
    size_t work = j.total_rows * OW * M * ntaps;
    size_t tasks = pool_tasks(threads, work, (size_t)1 << 18);
    if (tasks > j.total_rows)
        tasks = j.total_rows;
    if (tasks < 1)
        tasks = 1;
    j.tasks = tasks;
    /* scratch: packed weights, padded bias, the tasks' row buffers */
    size_t wfl = nmb * ntaps * CD_MB, bfl = nmb * CD_MB, total;
    if (mem_mul(rows, tasks, &total) || total > ((size_t)1 << 40))
        return op_fail(ctx, TDM_E_NOMEM, "the convolution is too large");
    total += wfl + bfl;
    float *s = pool_scratch_get(total * sizeof *s);
    if (!s)
        return op_fail(ctx, TDM_E_NOMEM, "out of memory");
    float *wp = s, *bp = s + wfl;
    for (size_t mb = 0; mb < nmb; mb++)
        for (size_t t = 0; t < ntaps; t++)
            for (size_t i = 0; i < CD_MB; i++) {
                size_t m = mb * CD_MB + i;
                wp[(mb * ntaps + t) * CD_MB + i] = m < M ? w[m * ntaps + t] : 0.0f;
            }
    for (size_t i = 0; i < bfl; i++)
        bp[i] = bias && i < M ? bias[i] : 0.0f;
    j.wp = wp;
    j.bp = bias ? bp : NULL;
    j.scratch = s + wfl + bfl;
    float lohi[2];
    int clamp = ctx->fuse && op_fuse_clamp(ctx->fuse, &lohi[0], &lohi[1]);
    j.clamp = clamp ? lohi : NULL;
    j.fuse = clamp ? NULL : ctx->fuse;
    pool_run(threads, tasks, cd_task, &j);
    pool_scratch_put(s);
    if (clamp)
        op_fuse_applied(ctx->fuse);
    return TDM_OK;
}
