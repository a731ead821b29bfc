/* Winograd convolution F(4x4, 3x3), and F(2x2, 3x3) for small planes,
 * for float32 2-D Conv with a 3x3 kernel, strides and dilations 1, one
 * group (any pads), used when the session runs fused (ctx->fast): it
 * rounds differently from the im2col path, which stays the reference
 * arithmetic.
 *
 * Each o x o output tile (o = 4 or 2) is computed from the a x a input
 * patch d around it (a = o + 2): Y = A^T [(G g G^T) .* (B^T d B)] A. The
 * a * a element-wise products summed over the input channels are a * a
 * GEMMs, U[xi] (M x C) times V[xi] (C x tiles). U, the transformed
 * weights, is computed once per weight tensor (in double precision) and
 * cached already packed for the GEMM micro-kernel (op_nn_packed_const).
 * The output tiles of each image are cut into rectangular blocks (whole
 * tile rows, or a piece of one); a pool task takes one block (and, when
 * there are too few blocks for the threads, a range of the output
 * channels): it copies the block's input rows zero-padded (one channel at
 * a time), transforms its patches straight into the GEMM's packed B
 * layout (V: a * a positions of C x Tpad), runs the GEMMs into a scratch M
 * (a * a x Mpad x Tpad) with the micro-kernel, then transforms M back
 * into the output tiles, adds the bias and applies the fused program
 * (ctx->fuse) to each output row of the block. When the output channels
 * are split, V is made once per block instead, in a first pool pass (the
 * input channels split among tasks) into a buffer the second pass (GEMMs
 * and outputs of each range of output channels) shares. Every output
 * element goes through the same sequence of operations whatever the block
 * size and the thread count. */
#include "ops/nn.h"
#include "core/mem.h"
#include "core/pool.h"

#include <stdatomic.h>
#include <string.h>

#define WINO_AMAX 6 /* largest input tile */
/* floats of V + M a block aims at (they stay in L2 with a slice of U) */
#define WINO_BLOCK_FLOATS ((size_t)72 << 10)
#define WINO_T_MAX 256

/* A variant F(o x o, 3x3): input tiles a x a (a = o + 2), a * a positions;
 * B^T (a x a), A^T (o x a), G (a x 3) and its AVX2 transforms. */
typedef struct wino_var {
    int a, o, id;
    const float *bt, *at;
    const double *g;
    void (*in)(const float *s, const int32_t *off, size_t ld, float *dst, size_t xs);
    void (*out)(const float *m, size_t xs, float bias, float *out);
} wino_var;

static const float wino_bt43[36] = {4, 0, -5, 0, 1, 0, 0, -4, -4, 1, 1, 0, 0, 4, -4, -1, 1, 0,
                                    0, -2, -1, 2, 1, 0, 0, 2, -1, -2, 1, 0, 0, 4, 0, -5, 0, 1};
static const float wino_at43[24] = {1, 1, 1, 1, 1, 0, 0, 1, -1, 2, -2, 0, 0, 1, 1, 4, 4, 0, 0, 1, -1, 8, -8, 1};
static const double wino_g43[18] = {1.0 / 4,  0,         0,        -1.0 / 6, -1.0 / 6, -1.0 / 6,
                                    -1.0 / 6, 1.0 / 6,   -1.0 / 6, 1.0 / 24, 1.0 / 12, 1.0 / 6,
                                    1.0 / 24, -1.0 / 12, 1.0 / 6,  0,        0,        1};
static const float wino_bt23[16] = {1, 0, -1, 0, 0, 1, 1, 0, 0, -1, 1, 0, 0, 1, 0, -1};
static const float wino_at23[8] = {1, 1, 1, 0, 0, 1, -1, -1};
static const double wino_g23[12] = {1, 0, 0, 0.5, 0.5, 0.5, 0.5, -0.5, 0.5, 0, 0, 1};

static const wino_var wino_f43 = {6, 4, 43, wino_bt43, wino_at43, wino_g43, wino_in43_avx2, wino_out43_avx2};
static const wino_var wino_f23 = {4, 2, 23, wino_bt23, wino_at23, wino_g23, wino_in23_avx2, wino_out23_avx2};

/* ---- portable transforms (the AVX2 ones are in conv_wino_avx2.c) ---- */

/* V = B^T d B of 8 patches (lane k at s + off[k], rows ld apart) into dst[xi * xs + k]. */
static void wino_in_c(const wino_var *w, const float *s, const int32_t *off, size_t ld, float *dst, size_t xs)
{
    const int a = w->a;
    float d[WINO_AMAX][WINO_AMAX][8], r[WINO_AMAX][WINO_AMAX][8];
    for (int i = 0; i < a; i++)
        for (int j = 0; j < a; j++)
            for (int k = 0; k < 8; k++)
                d[i][j][k] = s[(size_t)i * ld + (size_t)off[k] + (size_t)j];
    for (int q = 0; q < a; q++)
        for (int j = 0; j < a; j++)
            for (int k = 0; k < 8; k++) {
                float acc = 0.0f;
                for (int i = 0; i < a; i++)
                    acc += w->bt[q * a + i] * d[i][j][k];
                r[q][j][k] = acc;
            }
    for (int q = 0; q < a; q++)
        for (int l = 0; l < a; l++)
            for (int k = 0; k < 8; k++) {
                float acc = 0.0f;
                for (int j = 0; j < a; j++)
                    acc += r[q][j][k] * w->bt[l * a + j];
                dst[(size_t)(q * a + l) * xs + (size_t)k] = acc;
            }
}

/* A^T m A + bias of 8 tiles (position xi at m + xi * xs) into out[8][o * o]. */
static void wino_out_c(const wino_var *w, const float *m, size_t xs, float bias, float *out)
{
    const int a = w->a, o = w->o;
    float t[WINO_AMAX][WINO_AMAX][8];
    for (int p = 0; p < o; p++)
        for (int j = 0; j < a; j++)
            for (int k = 0; k < 8; k++) {
                float acc = 0.0f;
                for (int i = 0; i < a; i++)
                    acc += w->at[p * a + i] * m[(size_t)(i * a + j) * xs + (size_t)k];
                t[p][j][k] = acc;
            }
    for (int p = 0; p < o; p++)
        for (int q = 0; q < o; q++)
            for (int k = 0; k < 8; k++) {
                float acc = 0.0f;
                for (int j = 0; j < a; j++)
                    acc += t[p][j][k] * w->at[q * a + j];
                out[k * o * o + p * o + q] = acc + bias;
            }
}

/* ---- weights ---- */

typedef struct wino_wfill {
    const wino_var *v;
    const tdm_tensor *t; /* the weights' tensor (their pages go as they are read), or NULL */
    size_t m, c, mpad, apf;
    op_gemm_layout lay;
} wino_wfill;

/* U[xi] = G g G^T of every (m, c), packed as the GEMM's A (M x C) of
 * position xi at dst + xi * apf (an op_nn_packed_const fill). The weights
 * src are read as bytes (they may lie misaligned in the model's file), and
 * each output channel's pages in a file mapping go once read (issue 20
 * item 5: the original is not resident beside its form while it is made). */
static void wino_fill_u(const void *arg, const void *src, float *dst)
{
    const wino_wfill *f = arg;
    const unsigned char *w = src;
    const int a = f->v->a;
    const double *G = f->v->g;
    const size_t kc = f->lay.kc, mr = f->lay.mr;
    memset(dst, 0, (size_t)(a * a) * f->apf * sizeof *dst);
    for (size_t m = 0; m < f->m; m++) {
        for (size_t c = 0; c < f->c; c++) {
            float g[9];
            memcpy(g, w + (m * f->c + c) * sizeof g, sizeof g);
            double t[WINO_AMAX][3];
            for (int i = 0; i < a; i++)
                for (int b = 0; b < 3; b++)
                    t[i][b] = G[i * 3] * g[b] + G[i * 3 + 1] * g[3 + b] + G[i * 3 + 2] * g[6 + b];
            size_t p0 = c / kc * kc, kcb = f->c - p0 < kc ? f->c - p0 : kc;
            size_t off = p0 * f->mpad + m / mr * kcb * mr + (c - p0) * mr + m % mr;
            for (int i = 0; i < a; i++)
                for (int j = 0; j < a; j++)
                    dst[(size_t)(i * a + j) * f->apf + off] =
                        (float)(t[i][0] * G[j * 3] + t[i][1] * G[j * 3 + 1] + t[i][2] * G[j * 3 + 2]);
        }
        tensor_drop_span(f->t, w + m * f->c * 9 * sizeof(float), f->c * 9 * sizeof(float));
    }
}

/* ---- the driver ---- */

typedef struct wino_job {
    const wino_var *var;
    const conv_plan *p;
    const float *x, *u, *bias;
    float *y;
    const op_fuse *fuse;
    size_t c, m, mpad, apf, th, tw, tpad, nblk;
    size_t br, bc;    /* a block: br tile rows x bc tile columns */
    size_t nms;       /* parts of the output channels (row panels) per block */
    size_t ncs;       /* nms > 1: parts of the input channels per block making the shared V */
    float *vs;        /* nms > 1: V of every block, made once in a first pass */
    size_t ld, slice; /* the padded input patches of a block: row stride, floats */
    int64_t h, w, oh, ow, pt, pl;
    op_gemm_layout lay;
    int avx2;
    atomic_int fail;
} wino_job;

/* The products of row panels [mp0, mp1) of every position, for the
 * block's first cols columns (rounded up to 8; columns up to there hold
 * copies of its first tile in V). */
static void wino_gemm(wino_job *j, const float *v, float *mb, size_t mp0, size_t mp1, size_t cols)
{
    const size_t kc = j->lay.kc, mr = j->lay.mr, nr = j->lay.nr, c = j->c, tpad = j->tpad, mpad = j->mpad;
    const size_t vxs = c * tpad, mxs = mpad * tpad, np = (size_t)(j->var->a * j->var->a);
    if (j->avx2) {
        const size_t panels = (cols + nr - 1) / nr, last_cols = cols - (panels - 1) * nr;
        for (size_t xi = 0; xi < np; xi++) {
            const float *a = j->u + xi * j->apf, *b = v + xi * vxs;
            float *cm = mb + xi * mxs;
            for (size_t q = 0; q < panels; q++) {
                int half = q == panels - 1 && last_cols <= nr / 2;
                for (size_t mp = mp0; mp < mp1; mp++)
                    for (size_t p0 = 0; p0 < c; p0 += kc) {
                        size_t kcb = c - p0 < kc ? c - p0 : kc;
                        const float *ap = a + p0 * mpad + mp * kcb * mr, *bp = b + p0 * tpad + q * kcb * nr;
                        float *cp = cm + mp * mr * tpad + q * nr;
                        if (half)
                            gemm_ukr_avx2_6x8_bias(kcb, ap, bp, cp, tpad, p0 > 0, NULL);
                        else
                            gemm_ukr_avx2_bias(kcb, ap, bp, cp, tpad, p0 > 0, NULL);
                    }
            }
        }
        return;
    }
    for (size_t xi = 0; xi < np; xi++) {
        op_gemm g;
        memset(&g, 0, sizeof g);
        g.m = j->m;
        g.n = tpad;
        g.k = c;
        g.alpha = 1.0f;
        g.apack = j->u + xi * j->apf;
        g.bpack = v + xi * vxs;
        g.c = mb + xi * mxs;
        g.ldc = tpad;
        g.threads = 1;
        if (op_sgemm_run(&g)) {
            atomic_store(&j->fail, 1);
            return;
        }
    }
}

/* One block of the output tiles: tile rows [th0, th0 + brows), tile
 * columns [tc0, tc0 + bcols) of image n. */
typedef struct wino_blk {
    size_t n, th0, tc0, brows, bcols, cnt_t, tcols;
} wino_blk;

static wino_blk wino_block(const wino_job *j, size_t bt)
{
    wino_blk k;
    const size_t b = bt % j->nblk, nbc = (j->tw + j->bc - 1) / j->bc;
    k.n = bt / j->nblk;
    k.th0 = b / nbc * j->br;
    k.tc0 = b % nbc * j->bc;
    k.brows = j->th - k.th0 < j->br ? j->th - k.th0 : j->br;
    k.bcols = j->tw - k.tc0 < j->bc ? j->tw - k.tc0 : j->bc;
    k.cnt_t = k.brows * k.bcols;
    k.tcols = j->avx2 ? k.cnt_t : j->tpad; /* columns of V made (op_sgemm_run reads all of Tpad) */
    return k;
}

/* V of input channels [c0, c1) of block k (the channels' own rows of V,
 * whatever the range), through the patch buffer sl. */
static void wino_vfill(const wino_job *j, const wino_blk *k, float *v, float *sl, size_t c0, size_t c1)
{
    const wino_var *var = j->var;
    const size_t O = (size_t)var->o, tpad = j->tpad, n = k->n, th0 = k->th0, tc0 = k->tc0;
    const size_t brows = k->brows, bcols = k->bcols, cnt_t = k->cnt_t, tcols = k->tcols;
    /* The block's input patches, zero-padded, one channel at a time: rows
     * o th0 - pt .. (o brows + 2 of them), columns o tc0 - pl .. (ld). */
    const size_t srows = brows * O + 2, ld = j->ld;
    const int64_t row0 = (int64_t)(th0 * O) - j->pt, col0 = (int64_t)(tc0 * O) - j->pl;
    int64_t clo = col0 < 0 ? -col0 : 0, chi = j->w - col0; /* slice columns holding input: [clo, chi) */
    if (chi > (int64_t)ld)
        chi = (int64_t)ld;
    if (chi < clo)
        chi = clo;
    int32_t off[WINO_T_MAX + 16];
    for (size_t t = 0; t < tpad; t++) {
        size_t tl = t < cnt_t ? t : 0; /* past the block: a copy of its first tile */
        off[t] = (int32_t)(tl / bcols * O * ld + tl % bcols * O);
    }
    const size_t vxs = j->c * tpad;
    const size_t kc = j->lay.kc, nr = j->lay.nr;
    for (size_t c = c0; c < c1; c++) {
        const float *xc = j->x + (n * j->c + c) * j->p->in_sz;
        for (size_t r = 0; r < srows; r++) {
            float *d = sl + r * ld;
            int64_t ih = row0 + (int64_t)r;
            if (ih < 0 || ih >= j->h) {
                memset(d, 0, ld * sizeof *d);
                continue;
            }
            const float *src = xc + (size_t)ih * (size_t)j->w + col0;
            if (clo)
                memset(d, 0, (size_t)clo * sizeof *d);
            memcpy(d + clo, src + clo, (size_t)(chi - clo) * sizeof *d);
            if ((size_t)chi < ld)
                memset(d + chi, 0, (ld - (size_t)chi) * sizeof *d);
        }
        size_t p0 = c / kc * kc, kcb = j->c - p0 < kc ? j->c - p0 : kc;
        float *vc = v + p0 * tpad + (c - p0) * nr;
        for (size_t t0 = 0; t0 < tcols; t0 += 8) {
            float *dst = vc + t0 / nr * kcb * nr + t0 % nr;
            if (j->avx2)
                var->in(sl, off + t0, ld, dst, vxs);
            else
                wino_in_c(var, sl, off + t0, ld, dst, vxs);
        }
    }
}

/* The GEMMs of row panels [mp0, mp1) of block k from its V, through the
 * scratch mb, then the output transform, the bias and the fused program. */
static void wino_mout(wino_job *j, const wino_blk *bk, const float *v, float *mb, size_t mp0, size_t mp1)
{
    const wino_var *var = j->var;
    const size_t O = (size_t)var->o, tpad = j->tpad, n = bk->n, th0 = bk->th0, tc0 = bk->tc0;
    const size_t brows = bk->brows, bcols = bk->bcols, cnt_t = bk->cnt_t;
    wino_gemm(j, v, mb, mp0, mp1, bk->tcols);
    /* output transform, bias, fused program */
    const size_t oh = (size_t)j->oh, ow = (size_t)j->ow, osz = oh * ow;
    const size_t mxs = j->mpad * tpad, oo = O * O;
    const size_t y0 = th0 * O, x0 = tc0 * O;
    const size_t y1 = (th0 + brows) * O < oh ? (th0 + brows) * O : oh;
    const size_t x1 = (tc0 + bcols) * O < ow ? (tc0 + bcols) * O : ow;
    const size_t m1 = mp1 * j->lay.mr < j->m ? mp1 * j->lay.mr : j->m;
    float out[WINO_AMAX * WINO_AMAX * 8];
    for (size_t m = mp0 * j->lay.mr; m < m1; m++) {
        const float bias = j->bias ? j->bias[m] : 0.0f;
        const size_t yoff = (n * j->m + m) * osz;
        float *ym = j->y + yoff;
        for (size_t t0 = 0; t0 < cnt_t; t0 += 8) {
            const float *mp = mb + m * tpad + t0;
            if (j->avx2)
                var->out(mp, mxs, bias, out);
            else
                wino_out_c(var, mp, mxs, bias, out);
            size_t cnt = cnt_t - t0 < 8 ? cnt_t - t0 : 8;
            for (size_t k = 0; k < cnt; k++) {
                size_t tl = t0 + k, ty = y0 + tl / bcols * O, tx = x0 + tl % bcols * O;
                size_t rows = oh - ty < O ? oh - ty : O, cols = ow - tx < O ? ow - tx : O;
                const float *o = out + k * oo;
                float *yr = ym + ty * ow + tx;
                if (cols == 4 && O == 4) /* fixed sizes: inlined copies */
                    for (size_t a = 0; a < rows; a++)
                        memcpy(yr + a * ow, o + a * 4, 4 * sizeof *yr);
                else if (cols == 2 && O == 2)
                    for (size_t a = 0; a < rows; a++)
                        memcpy(yr + a * ow, o + a * 2, 2 * sizeof *yr);
                else
                    for (size_t a = 0; a < rows; a++)
                        for (size_t bb = 0; bb < cols; bb++)
                            yr[a * ow + bb] = o[a * O + bb];
            }
        }
        if (j->fuse) /* the block's output rectangle, row by row */
            for (size_t y = y0; y < y1; y++)
                op_fuse_apply(j->fuse, ym + y * ow + x0, yoff + y * ow + x0, x1 - x0);
    }
}

/* A task of one pass: block task / nms, row panels part task % nms; V
 * made here from all the input channels. */
static void wino_task(void *arg, size_t task)
{
    wino_job *j = arg;
    const size_t np = (size_t)(j->var->a * j->var->a), ms = task % j->nms, mpanels = j->mpad / j->lay.mr;
    const size_t vfl = np * j->c * j->tpad, mfl = np * j->mpad * j->tpad;
    const wino_blk bk = wino_block(j, task / j->nms);
    float *v = pool_scratch_get((vfl + mfl + j->slice) * sizeof(float));
    if (!v) {
        atomic_store(&j->fail, 1);
        return;
    }
    wino_vfill(j, &bk, v, v + vfl + mfl, 0, j->c);
    wino_mout(j, &bk, v, v + vfl, ms * mpanels / j->nms, (ms + 1) * mpanels / j->nms);
    pool_scratch_put(v);
}

/* The first of two passes (the output channels split): V of block
 * task / ncs, input channels part task % ncs, into the shared j->vs. */
static void wino_vtask(void *arg, size_t task)
{
    wino_job *j = arg;
    const size_t np = (size_t)(j->var->a * j->var->a), cs = task % j->ncs, bt = task / j->ncs;
    const wino_blk bk = wino_block(j, bt);
    float *sl = pool_scratch_get(j->slice * sizeof(float));
    if (!sl) {
        atomic_store(&j->fail, 1);
        return;
    }
    wino_vfill(j, &bk, j->vs + bt * np * j->c * j->tpad, sl, cs * j->c / j->ncs, (cs + 1) * j->c / j->ncs);
    pool_scratch_put(sl);
}

/* The second pass: block task / nms, row panels part task % nms, from the
 * shared V. */
static void wino_mtask(void *arg, size_t task)
{
    wino_job *j = arg;
    const size_t np = (size_t)(j->var->a * j->var->a), ms = task % j->nms, bt = task / j->nms;
    const size_t mpanels = j->mpad / j->lay.mr;
    const wino_blk bk = wino_block(j, bt);
    float *mb = pool_scratch_get(np * j->mpad * j->tpad * sizeof(float));
    if (!mb) {
        atomic_store(&j->fail, 1);
        return;
    }
    wino_mout(j, &bk, j->vs + bt * np * j->c * j->tpad, mb, ms * mpanels / j->nms, (ms + 1) * mpanels / j->nms);
    pool_scratch_put(mb);
}

/* The variant for p (op_conv_winograd_tile: its output tile), or NULL when
 * Winograd does not pay (measured on AVX2: F(4x4) from 16 channels in and
 * out and about 3x3 tiles of 4x4; F(2x2) below that for wide layers such
 * as 7x7 x 512). */
static const wino_var *wino_var_of(const conv_plan *p)
{
    const nn_geom *g = &p->g;
    if (p->group != 1 || g->nsp != 2 || g->k[1] != 3 || g->k[2] != 3 || g->s[1] != 1 || g->s[2] != 1 ||
        g->d[1] != 1 || g->d[2] != 1)
        return NULL;
    if (g->in[1] + g->pb[1] + g->pe[1] >= ((int64_t)1 << 15) || g->in[2] + g->pb[2] + g->pe[2] >= ((int64_t)1 << 15) ||
        p->in_sz >= ((size_t)1 << 30) || g->pb[1] > 8 || g->pb[2] > 8 || g->out[1] < 2 || g->out[2] < 2)
        return NULL;
    if (p->cg < 16 || p->mg < 16 || p->cg > 4096 || p->mg > 4096)
        return NULL;
    size_t tiles4 = (size_t)((g->out[1] + 3) / 4) * (size_t)((g->out[2] + 3) / 4);
    if (tiles4 >= 9)
        return &wino_f43;
    size_t tiles2 = (size_t)((g->out[1] + 1) / 2) * (size_t)((g->out[2] + 1) / 2);
    if (tiles2 >= 16 && p->cg >= 128 && p->mg >= 128)
        return &wino_f23;
    return NULL;
}

static const wino_var *wino_pick(const op_ctx *ctx, const conv_plan *p) { return ctx->fast ? wino_var_of(p) : NULL; }

int op_conv_winograd_tile(const conv_plan *p)
{
    const wino_var *v = wino_var_of(p);
    return v ? v->o : 0;
}

int op_conv_winograd_ok(const op_ctx *ctx, const conv_plan *p) { return wino_pick(ctx, p) != NULL; }

tdm_status op_conv_winograd_f32(op_ctx *ctx, const conv_plan *p, const float *x, const float *w, int w_in,
                                const float *bias, float *y)
{
    const nn_geom *g = &p->g;
    const int threads = ctx->threads > 0 ? ctx->threads : 1;
    const wino_var *var = wino_pick(ctx, p);
    if (!var)
        return op_fail(ctx, TDM_E_UNSUPPORTED, "Winograd does not take this convolution");
    const size_t O = (size_t)var->o, np = (size_t)(var->a * var->a);
    wino_job j;
    memset(&j, 0, sizeof j);
    j.var = var;
    j.p = p;
    j.x = x;
    j.bias = bias;
    j.y = y;
    j.fuse = ctx->fuse;
    j.c = (size_t)p->c;
    j.m = (size_t)p->m;
    j.h = g->in[1];
    j.w = g->in[2];
    j.oh = g->out[1];
    j.ow = g->out[2];
    j.pt = g->pb[1];
    j.pl = g->pb[2];
    j.tw = ((size_t)j.ow + O - 1) / O;
    j.th = ((size_t)j.oh + O - 1) / O;
    j.lay = op_sgemm_layout(j.c);
    j.avx2 = j.lay.mr == 6 && j.lay.nr == 16 && gemm_avx2_usable();
    j.mpad = (j.m + j.lay.mr - 1) / j.lay.mr * j.lay.mr;
    j.apf = j.mpad * j.c;
    atomic_init(&j.fail, 0);
    /* tiles per block: V and M of a block about WINO_BLOCK_FLOATS, at
     * least 16 (a GEMM panel); enough blocks for the threads. A block is
     * whole tile rows when a row holds fewer tiles, else a piece of one
     * tile row. */
    size_t t = WINO_BLOCK_FLOATS / (np * (j.c + j.mpad));
    if (t < 16)
        t = 16;
    if (t > WINO_T_MAX)
        t = WINO_T_MAX;
    const size_t n_img = (size_t)p->n, tiles = j.th * j.tw, want = threads > 1 ? (size_t)threads * 3 : 1;
    const size_t mpanels = j.mpad / j.lay.mr;
    j.nms = 1;
    if (j.avx2 && n_img * ((tiles + t - 1) / t) < want && mpanels >= 8) {
        /* few blocks: split the output channels (every block reads U once) */
        size_t blocks = n_img * ((tiles + t - 1) / t);
        j.nms = (want + blocks - 1) / blocks;
        if (j.nms > mpanels / 4)
            j.nms = mpanels / 4;
    }
    if (n_img * ((tiles + t - 1) / t) * j.nms < want) {
        size_t per_img = (want + n_img - 1) / n_img;
        size_t t2 = (tiles + per_img - 1) / per_img;
        if (t2 < t) /* not below a GEMM panel: narrower blocks waste columns and re-read U */
            t = t2 < 16 ? 16 : t2;
    }
    if (j.tw >= t) {
        j.br = 1;
        j.bc = t / 8 * 8; /* whole GEMM panels but maybe the last piece's (8 columns or 16) */
    } else {
        j.bc = j.tw;
        j.br = t / j.tw;
        if (j.br > j.th)
            j.br = j.th;
    }
    j.tpad = (j.br * j.bc + 15) / 16 * 16;
    j.nblk = (j.th + j.br - 1) / j.br * ((j.tw + j.bc - 1) / j.bc);
    /* patches: 4 bc + 2 columns (+ 2 read by the 4-wide loads of the
     * last patch), 4 br + 2 rows */
    j.ld = j.bc * O + 4;
    j.slice = (j.br * O + 2) * j.ld;
    /* the transformed weights, cached when W is an initializer */
    size_t ufl;
    if (mem_mul(j.apf, np, &ufl))
        return op_fail(ctx, TDM_E_NOMEM, "the convolution is too large");
    wino_wfill wf = {var, w_in >= 0 ? ctx->in[w_in] : NULL, j.m, j.c, j.mpad, j.apf, j.lay};
    float *own = NULL;
    if (w_in >= 0) {
        uint64_t kv[] = {0x57696e6fu /* "Wino" */, (uint64_t)var->id, j.lay.kc, j.lay.mr, j.lay.nr, j.m, j.c};
        j.u = op_nn_packed_const(ctx, w_in, op_nn_pack_key(kv, sizeof kv / sizeof kv[0]), ufl, wino_fill_u, &wf, 1);
    }
    if (!j.u) {
        own = pool_scratch_get(ufl * sizeof(float));
        if (!own || !(w = op_nn_loadable(ctx, w_in, w))) {
            pool_scratch_put(own);
            return op_fail(ctx, TDM_E_NOMEM, "out of memory");
        }
        wino_fill_u(&wf, w, own);
        j.u = own;
    }
    size_t tasks = n_img * j.nblk * j.nms;
    if (j.nms > 1) {
        /* V of each block once, shared by its nms tasks: a pass making it
         * (the input channels split), then the GEMMs and outputs */
        size_t vfl;
        if (mem_mul(np * j.c * j.tpad, n_img * j.nblk, &vfl) || !(j.vs = pool_scratch_get(vfl * sizeof(float)))) {
            pool_scratch_put(own);
            return op_fail(ctx, TDM_E_NOMEM, "out of memory");
        }
        size_t blocks = n_img * j.nblk;
        j.ncs = (want + blocks - 1) / blocks;
        if (j.ncs > j.c)
            j.ncs = j.c;
        pool_run(threads, blocks * j.ncs, wino_vtask, &j);
        if (!atomic_load(&j.fail))
            pool_run(threads, tasks, wino_mtask, &j);
        pool_scratch_put(j.vs);
    } else
        pool_run(tasks > 1 ? threads : 1, tasks, wino_task, &j);
    pool_scratch_put(own);
    if (atomic_load(&j.fail))
        return op_fail(ctx, TDM_E_NOMEM, "out of memory");
    return TDM_OK;
}
