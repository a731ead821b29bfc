/* ConvTranspose (op_sgemm + col2im; when kernel == stride, a product per
 * block of input rows scattered straight into the output). Spatial ranks 1
 * to 3 are handled as 3-D with leading extents of 1. */
#include "ops/nn.h"
#include "core/mem.h"
#include "core/pool.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

/* The weights of every group packed for the GEMM (an op_nn_packed_const fill). */
typedef struct conv_wpack {
    const conv_plan *p;
    const float *w;
} conv_wpack;

/* ---------------------------------------------------------- ConvTranspose */

static int64_t floor_div2(int64_t v) { return v >= 0 ? v / 2 : -((-v + 1) / 2); }

tdm_status op_nn_convt_geom(tdm_err *e, const gr_node *node, int nsp, const int64_t *in, const int64_t *kernel,
                             nn_geom *g)
{
    const int64_t *ks = NULL, *st = NULL, *dl = NULL, *pd = NULL, *op = NULL, *os = NULL;
    int nk = gr_attr_ints(node, "kernel_shape", &ks), ns = gr_attr_ints(node, "strides", &st);
    int nd = gr_attr_ints(node, "dilations", &dl), np = gr_attr_ints(node, "pads", &pd);
    int nop = gr_attr_ints(node, "output_padding", &op), nos = gr_attr_ints(node, "output_shape", &os);
    memset(g, 0, sizeof *g);
    if (nsp < 1 || nsp > NN_MAX_SP)
        return err_set(e, TDM_E_UNSUPPORTED, "%d spatial dimensions are not supported (1 to %d)", nsp, NN_MAX_SP);
    if ((nk >= 0 && nk != nsp) || (ns >= 0 && ns != nsp) || (nd >= 0 && nd != nsp) || (np >= 0 && np != 2 * nsp) ||
        (nop >= 0 && nop != nsp) || (nos >= 0 && nos != nsp && nos != nsp + 2))
        return err_set(e, TDM_E_MODEL,
                       "attributes kernel_shape, strides, dilations, pads, output_padding or output_shape do not "
                       "match %d spatial dimensions",
                       nsp);
    if (nk < 0 && !kernel)
        return err_set(e, TDM_E_MODEL, "attribute kernel_shape is missing");
    const char *ap = gr_attr_str(node, "auto_pad", "NOTSET");
    int same = strcmp(ap, "SAME_UPPER") == 0 ? 1 : strcmp(ap, "SAME_LOWER") == 0 ? 2 : 0;
    if (!same && *ap && strcmp(ap, "NOTSET") && strcmp(ap, "VALID"))
        return err_set(e, TDM_E_MODEL, "attribute auto_pad has the unknown value '%s'", ap);
    g->nsp = nsp;
    for (int i = 0; i < NN_MAX_SP; i++) {
        g->in[i] = g->k[i] = g->s[i] = g->d[i] = g->out[i] = 1;
        g->pb[i] = g->pe[i] = 0;
    }
    int off = NN_MAX_SP - nsp;
    for (int i = 0; i < nsp; i++) {
        int j = off + i;
        g->in[j] = in[i];
        g->k[j] = nk >= 0 ? ks[i] : kernel[i];
        g->s[j] = ns >= 0 ? st[i] : 1;
        g->d[j] = nd >= 0 ? dl[i] : 1;
        int64_t opad = nop >= 0 ? op[i] : 0;
        if (g->k[j] < 1 || g->s[j] < 1 || g->d[j] < 1 || opad < 0 || g->k[j] > ((int64_t)1 << 31) ||
            g->s[j] > ((int64_t)1 << 31) || g->d[j] > ((int64_t)1 << 31) || opad > ((int64_t)1 << 31))
            return err_set(e, TDM_E_MODEL, "kernel_shape, strides, dilations or output_padding has an invalid value");
        int64_t ek = (g->k[j] - 1) * g->d[j] + 1;
        if (g->in[j] < 0) {
            g->out[j] = nos >= 0 ? os[nos - nsp + i] : -1;
            continue;
        }
        int64_t full = g->s[j] * (g->in[j] - 1) + opad + ek;
        if (nos >= 0 || same) {
            int64_t out = nos >= 0 ? os[nos - nsp + i] : g->in[j] * g->s[j];
            if (out < 0 || out > ((int64_t)1 << 40))
                return err_set(e, TDM_E_MODEL, "attribute output_shape has an invalid value");
            int64_t total = full - out;
            if (same == 1) {
                g->pb[j] = floor_div2(total);
                g->pe[j] = total - g->pb[j];
            } else {
                g->pe[j] = floor_div2(total);
                g->pb[j] = total - g->pe[j];
            }
            g->out[j] = out;
        } else {
            g->pb[j] = np >= 0 ? pd[i] : 0;
            g->pe[j] = np >= 0 ? pd[i + nsp] : 0;
            if (g->pb[j] < 0 || g->pe[j] < 0 || g->pb[j] > ((int64_t)1 << 31) || g->pe[j] > ((int64_t)1 << 31))
                return err_set(e, TDM_E_MODEL, "attribute pads has an invalid value");
            g->out[j] = full - g->pb[j] - g->pe[j];
            if (g->out[j] < 0)
                return err_set(e, TDM_E_RUNTIME, "the pads make spatial dimension %d of the output negative", i);
        }
    }
    return TDM_OK;
}

/* ConvTranspose uses conv_plan too: g.in is the input, g.out the output, and
 * pb/pe may be negative. */
static tdm_status convt_prepare(op_ctx *ctx, const tdm_tensor *x, const tdm_tensor *w, conv_plan *p)
{
    memset(p, 0, sizeof *p);
    if (x->rank < 3 || x->rank > 2 + NN_MAX_SP)
        return op_fail(ctx, TDM_E_UNSUPPORTED, "input X has rank %d; 3 to %d are supported", x->rank, 2 + NN_MAX_SP);
    if (w->rank != x->rank)
        return op_fail(ctx, TDM_E_RUNTIME, "input W has rank %d but X has rank %d", w->rank, x->rank);
    int nsp = x->rank - 2;
    tdm_status st = op_nn_convt_geom(ctx->err, ctx->node, nsp, x->dims + 2, w->dims + 2, &p->g);
    if (st)
        return st;
    for (int i = 0; i < nsp; i++)
        if (p->g.k[NN_MAX_SP - nsp + i] != w->dims[2 + i])
            return op_fail(ctx, TDM_E_RUNTIME, "attribute kernel_shape does not match the shape of W");
    p->n = x->dims[0];
    p->c = x->dims[1];
    p->group = gr_attr_int(ctx->node, "group", 1);
    if (p->group < 1 || p->c % p->group || w->dims[0] != p->c)
        return op_fail(ctx, TDM_E_RUNTIME, "W must have %lld input channels and group must divide them",
                       (long long)p->c);
    p->cg = p->c / p->group;
    p->mg = w->dims[1];
    if (mem_mul_i64(p->mg, p->group, &p->m))
        return op_fail(ctx, TDM_E_NOMEM, "the output is too large");
    op_nn_conv_plan_sizes(p, nsp);
    size_t tmp;
    if (shape_count(p->yrank, p->ydims, &tmp) || mem_mul(p->k_sz, (size_t)p->mg, &tmp) ||
        mem_mul(tmp, p->in_sz, &tmp))
        return op_fail(ctx, TDM_E_NOMEM, "the convolution is too large");
    return TDM_OK;
}

/* Adds col [k_sz, in_sz] (one output channel's rows) into its output
 * plane ym. */
static void col2im_plane(const nn_geom *g, const float *col, float *ym)
{
    const int64_t D = g->in[0], H = g->in[1], W = g->in[2];
    const int64_t OD = g->out[0], OH = g->out[1], OW = g->out[2];
    {
        for (int64_t kd = 0; kd < g->k[0]; kd++)
            for (int64_t kh = 0; kh < g->k[1]; kh++)
                for (int64_t kw = 0; kw < g->k[2]; kw++) {
                    const float *src = col;
                    col += D * H * W;
                    /* output o = i * s + k * d - pb: valid input range */
                    int64_t dlo, dhi, hlo, hhi, wlo, whi;
                    nn_index_range(D, OD, g->s[0], kd * g->d[0] - g->pb[0], &dlo, &dhi);
                    nn_index_range(H, OH, g->s[1], kh * g->d[1] - g->pb[1], &hlo, &hhi);
                    nn_index_range(W, OW, g->s[2], kw * g->d[2] - g->pb[2], &wlo, &whi);
                    for (int64_t id = dlo; id < dhi; id++) {
                        int64_t od = id * g->s[0] + kd * g->d[0] - g->pb[0];
                        for (int64_t ih = hlo; ih < hhi; ih++) {
                            int64_t oh = ih * g->s[1] + kh * g->d[1] - g->pb[1];
                            const float *sr = src + (id * H + ih) * W;
                            float *dr = ym + (od * OH + oh) * OW;
                            const int64_t cw = kw * g->d[2] - g->pb[2];
                            for (int64_t iw = wlo; iw < whi; iw++)
                                dr[iw * g->s[2] + cw] += sr[iw];
                        }
                    }
                }
    }
}

/* One batch and group of ConvTranspose after the product: per output
 * channel (a task each), the bias, col2im, the fused program. */
typedef struct convt_job {
    const conv_plan *p;
    const float *col, *bias; /* bias: the group's mg values, or NULL */
    float *y;                /* the group's first output plane */
    size_t at;               /* its flat index */
    const op_fuse *fuse;
} convt_job;

static void task_col2im(void *arg, size_t m)
{
    const convt_job *j = arg;
    const size_t out_sz = j->p->out_sz;
    float *ym = j->y + m * out_sz;
    float bv = j->bias ? j->bias[m] : 0.0f;
    for (size_t i = 0; i < out_sz; i++)
        ym[i] = bv;
    col2im_plane(&j->p->g, j->col + m * j->p->k_sz * j->p->in_sz, ym);
    if (j->fuse)
        op_fuse_apply(j->fuse, ym, j->at + m * out_sz, out_sz);
}

/* kernel == stride, dilation 1, no padding and output = input * stride:
 * the taps of different input positions never overlap, so every output
 * element is one product term (plus the bias). The col2im is then a
 * scatter, done per block of input rows right after the block's product,
 * while it is in cache, with no full column buffer and no pass that zeroes
 * or re-reads the output. */
static int convt_scatter_ok(const conv_plan *p)
{
    const nn_geom *g = &p->g;
    for (int i = 0; i < NN_MAX_SP; i++)
        if (g->k[i] != g->s[i] || (g->k[i] > 1 && g->d[i] != 1) || g->pb[i] != 0 || g->out[i] != g->in[i] * g->s[i])
            return 0;
    return 1;
}

/* Floats of a scatter block's product (its rows x columns) a task aims at:
 * in L2 with the packed block of the input. */
#define CONVT_BLOCK_FLOATS ((size_t)32 << 10)

/* One batch and group of the scatter path: tasks over ranges of input rows
 * (D x H rows of W values). */
typedef struct convt_sjob {
    const conv_plan *p;
    op_gemm gm;              /* a, apack, lda, m, k of the group; b, c, n, ldc per block */
    const float *x;          /* the group's first input plane */
    const float *bias;       /* the group's mg values, or NULL */
    float *y;                /* the group's first output plane */
    size_t at;               /* its flat index */
    const op_fuse *fuse;
    size_t rows, per, rb;    /* input rows, rows per task, rows per block */
    atomic_int failed;
} convt_sjob;

/* Writes output rows of input rows [r0, r0 + nr) from their product col
 * (k_sz rows per output channel, ldc = nr * W apart). */
static void convt_scatter_block(const convt_sjob *j, const float *col, size_t r0, size_t nr)
{
    const conv_plan *p = j->p;
    const nn_geom *g = &p->g;
    const size_t H = (size_t)g->in[1], W = (size_t)g->in[2];
    const size_t OH = (size_t)g->out[1], OW = (size_t)g->out[2];
    const size_t KD = (size_t)g->k[0], KH = (size_t)g->k[1], KW = (size_t)g->k[2];
    const size_t ldc = nr * W, mg = (size_t)p->mg;
    for (size_t m = 0; m < mg; m++) {
        const float bv = j->bias ? j->bias[m] : 0.0f;
        float *ym = j->y + m * p->out_sz;
        const float *cm = col + m * p->k_sz * ldc;
        for (size_t rr = 0; rr < nr; rr++) {
            const size_t r = r0 + rr, id = r / H, ih = r % H;
            for (size_t kd = 0; kd < KD; kd++)
                for (size_t kh = 0; kh < KH; kh++) {
                    const size_t orow = (id * KD + kd) * OH + ih * KH + kh;
                    float *dr = ym + orow * OW;
                    const float *s0 = cm + ((kd * KH + kh) * KW) * ldc + rr * W;
                    /* the generic path's (0 or bias) + term, bit for bit */
                    if (KW == 2) {
                        const float *s1 = s0 + ldc;
                        for (size_t iw = 0; iw < W; iw++) {
                            dr[2 * iw] = bv + s0[iw];
                            dr[2 * iw + 1] = bv + s1[iw];
                        }
                    } else {
                        for (size_t kw = 0; kw < KW; kw++) {
                            const float *sr = s0 + kw * ldc;
                            for (size_t iw = 0; iw < W; iw++)
                                dr[iw * KW + kw] = bv + sr[iw];
                        }
                    }
                    if (j->fuse)
                        op_fuse_apply(j->fuse, dr, j->at + m * p->out_sz + orow * OW, OW);
                }
        }
    }
}

static void task_scatter(void *arg, size_t t)
{
    convt_sjob *j = arg;
    const size_t W = (size_t)j->p->g.in[2];
    size_t r0 = t * j->per, r1 = r0 + j->per < j->rows ? r0 + j->per : j->rows;
    if (r0 >= r1)
        return;
    size_t nb = j->rb < r1 - r0 ? j->rb : r1 - r0;
    float *col = pool_scratch_get(j->gm.m * nb * W * sizeof *col);
    if (!col) {
        atomic_store(&j->failed, 1);
        return;
    }
    for (size_t r = r0; r < r1; r += nb) {
        size_t nr = r1 - r < nb ? r1 - r : nb;
        op_gemm gm = j->gm;
        gm.b = j->x + r * W;
        gm.n = nr * W;
        gm.c = col;
        gm.ldc = nr * W;
        gm.threads = 1;
        if (op_sgemm_run(&gm)) {
            atomic_store(&j->failed, 1);
            break;
        }
        convt_scatter_block(j, col, r, nr);
    }
    pool_scratch_put(col);
}

/* Fills W^T of every group packed for the GEMM (an op_nn_packed_const fill). */
static void convt_fill_a(const void *arg, const void *src, float *dst)
{
    const conv_wpack *c = arg;
    (void)src; /* c->w: op_run aligned the input */
    const size_t cg = (size_t)c->p->cg, rows = (size_t)c->p->mg * c->p->k_sz;
    op_gemm gm = {.trans_a = 1, .m = rows, .k = cg, .alpha = 1.0f, .lda = rows};
    size_t per = op_sgemm_pack_a_floats(&gm);
    for (int64_t gi = 0; gi < c->p->group; gi++) {
        gm.a = c->w + (size_t)gi * cg * rows;
        op_sgemm_pack_a(&gm, dst + (size_t)gi * per);
    }
}

/* w_in: the node's input holding w (1), or -1 when w is a converted copy. */
static tdm_status convt_f32(op_ctx *ctx, const conv_plan *p, const float *x, const float *w, int w_in,
                            const float *bias, float *y)
{
    const size_t cg = (size_t)p->cg, mg = (size_t)p->mg, rows = mg * p->k_sz;
    const int threads = ctx->threads > 0 ? ctx->threads : 1;
    op_gemm gm = {.trans_a = 1, .m = rows, .n = p->in_sz, .k = cg, .alpha = 1.0f, .lda = rows, .ldb = p->in_sz,
                  .ldc = p->in_sz, .threads = threads};
    const size_t per_group = op_sgemm_pack_a_floats(&gm);
    const float *wpack = NULL;
    size_t total;
    if (w_in >= 0 && per_group && !mem_mul(per_group, (size_t)p->group, &total)) {
        op_gemm_layout lay = op_sgemm_layout(cg);
        uint64_t kv[] = {0x436f6e54u /* "ConT" */, lay.kc, lay.mr, lay.nr, rows, cg, (uint64_t)p->group};
        conv_wpack wp = {p, w};
        wpack = op_nn_packed_const(ctx, w_in, op_nn_pack_key(kv, sizeof kv / sizeof kv[0]), total, convt_fill_a, &wp, 0);
    }
    if (convt_scatter_ok(p)) {
        const size_t W = (size_t)p->g.in[2], rows_in = p->in_sz / (W ? W : 1);
        const size_t rw = rows * W > 0 ? rows * W : 1, cw = cg * W > 0 ? cg * W : 1;
        size_t rb = CONVT_BLOCK_FLOATS / rw, rb2 = CONVT_BLOCK_FLOATS / cw;
        rb = rb < rb2 ? rb : rb2;
        rb = rb ? rb : 1;
        size_t work;
        if (mem_mul(p->out_sz, mg * sizeof(float) * 2, &work))
            work = SIZE_MAX;
        size_t tasks = pool_tasks(threads, work, POOL_MIN_BYTES);
        if (tasks > rows_in)
            tasks = rows_in;
        for (int64_t n = 0; n < p->n; n++)
            for (int64_t gi = 0; gi < p->group; gi++) {
                size_t yoff = ((size_t)n * (size_t)p->m + (size_t)gi * mg) * p->out_sz;
                convt_sjob sj;
                memset(&sj, 0, sizeof sj);
                sj.p = p;
                sj.gm = gm;
                sj.gm.a = w + (size_t)gi * cg * rows;
                sj.gm.apack = wpack ? wpack + (size_t)gi * per_group : NULL;
                sj.x = x + ((size_t)n * (size_t)p->c + (size_t)gi * cg) * p->in_sz;
                sj.bias = bias ? bias + (size_t)gi * mg : NULL;
                sj.y = y + yoff;
                sj.at = yoff;
                sj.fuse = ctx->fuse;
                sj.rows = rows_in;
                sj.per = (rows_in + tasks - 1) / tasks;
                sj.rb = rb;
                atomic_init(&sj.failed, 0);
                pool_run(tasks > 1 ? threads : 1, (rows_in + sj.per - 1) / sj.per, task_scatter, &sj);
                if (atomic_load(&sj.failed))
                    return op_fail(ctx, TDM_E_NOMEM, "out of memory");
            }
        return TDM_OK;
    }
    float *col = pool_scratch_get(rows * p->in_sz * sizeof *col + 1); /* kept between calls: not faulted in again */
    if (!col)
        return op_fail(ctx, TDM_E_NOMEM, "out of memory for the col2im buffer");
    gm.c = col;
    for (int64_t n = 0; n < p->n; n++)
        for (int64_t gi = 0; gi < p->group; gi++) {
            size_t yoff = ((size_t)n * (size_t)p->m + (size_t)gi * mg) * p->out_sz;
            gm.a = w + (size_t)gi * cg * rows;
            gm.apack = wpack ? wpack + (size_t)gi * per_group : NULL;
            gm.b = x + ((size_t)n * (size_t)p->c + (size_t)gi * cg) * p->in_sz;
            if (op_sgemm_run(&gm)) {
                pool_scratch_put(col);
                return op_fail(ctx, TDM_E_NOMEM, "out of memory");
            }
            convt_job cj = {p, col, bias ? bias + (size_t)gi * mg : NULL, y + yoff, yoff, ctx->fuse};
            size_t work;
            if (mem_mul(mg, p->out_sz + rows * p->in_sz / (mg ? mg : 1), &work))
                work = SIZE_MAX;
            pool_run(pool_tasks(threads, work, (size_t)1 << 14) > 1 ? threads : 1, mg, task_col2im, &cj);
        }
    pool_scratch_put(col);
    return TDM_OK;
}

tdm_status op_run_ConvTranspose(op_ctx *ctx)
{
    const tdm_tensor *x = op_nn_in(ctx, 0), *w = op_nn_in(ctx, 1), *b = op_nn_in(ctx, 2);
    if (!x || !w)
        return op_fail(ctx, TDM_E_MODEL, "inputs X and W are required");
    if (w->dtype != x->dtype || (b && b->dtype != x->dtype))
        return op_fail(ctx, TDM_E_RUNTIME, "X, W and B must have one element type");
    if (!(DT_BIT(x->dtype) & DT_FLOATS))
        return op_fail(ctx, TDM_E_UNSUPPORTED, "ConvTranspose does not take %s", tdm_dtype_name(x->dtype));
    conv_plan p;
    tdm_status st = convt_prepare(ctx, x, w, &p);
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
    if (x->dtype == TDM_FLOAT)
        return convt_f32(ctx, &p, x->data, w->data, 1, b ? b->data : NULL, y->data);
    /* double, float16, bfloat16: through float32 */
    return op_nn_conv_via_f32(ctx, &p, x, w, b, y, convt_f32);
}
