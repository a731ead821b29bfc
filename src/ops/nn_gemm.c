/* The float32 GEMM (op_sgemm_run, op_sgemm) and the matrix-product ops
 * built on it: MatMul, Gemm, MatMulInteger, QLinearMatMul. */
#include "ops/nn.h"
#include "core/mem.h"
#include "core/pool.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

/* ------------------------------------------------------------------ sgemm */

/* Goto-style blocking. K is cut into blocks of about equal size, at most
 * GEMM_KC_MAX (op_sgemm_layout). A is packed whole (all K blocks) into
 * MR-row panels (or arrives packed: constant weights are packed once, see
 * op_nn_packed_const), B chunk by chunk of columns into NR-column panels
 * (or arrives packed, or is packed panel by panel by the caller's pack_b:
 * Conv's im2col). A task owns a range of column panels: it packs them (so
 * no thread waits for panels another one packs, and they are still in
 * cache) and computes them for every row block; when there are too few
 * panels for the threads, B is packed first and tasks are (row block,
 * panel range) pairs. Every element of C is computed by the same sequence
 * of micro-kernel calls over the same K blocks whatever the thread count
 * and the task split, so the result does not depend on either. The bias,
 * the activation and the fused program run on each panel's tiles after its
 * last K block, while they are in cache. */
#define GEMM_KC_MAX 320               /* B micro-panel + A micro-panel fit L1 (32 KiB) */
#define GEMM_MC 120                   /* a multiple of every MR */
#define GEMM_B_BUDGET ((size_t)2 << 20) /* floats of packed B per column chunk */
#define GEMM_TASK_B ((size_t)48 << 10) /* floats of packed B a task aims at (in L2) */
#define GEMM_A_L2 ((size_t)96 << 10)   /* floats of packed A that stay in L2 */
#define GEMM_EPI ((size_t)16 << 10)    /* floats of C per epilogue run (in L2) */
#define GEMM_SMALL_B ((size_t)32 << 10) /* floats of packed B one thread packs faster than two */
#define GEMM_TILE_MAX 128             /* MR * NR of the widest kernel */
#define GEMM_MR_MAX 8
#define GEMM_NR_MAX 16
#define GEMM_IN_PLACE_MAX_N 256
#define GEMM_B_IN_PLACE_MAX_M 64
/* K up to which a row block is computed GEMM_SUB_PANELS row panels at a
 * time across a run of up to GEMM_SUB_RUN column panels (C tiles of the
 * run at most GEMM_SUB_C floats, for the epilogue), instead of every row
 * panel of the block for one column panel after the other: C is then
 * written as 12 rows of 1-4 KiB each rather than as one 64-byte line in
 * each of up to 120 rows far apart, and the run's B panels (one K block)
 * are read again from L1/L2. Measured in mobilenet_v2 at 1 thread (node
 * minimums, 6 alternating rounds): the 16 -> 96 channel 1x1 Conv at
 * 112 x 112 0.78 -> 0.54 ms, 32 -> 16 0.26 -> 0.22 ms; 1 or 3 row panels
 * at a time gained less. The sums, and so C, are unchanged. */
#define GEMM_SUB_K 64
#define GEMM_SUB_PANELS 2
#define GEMM_SUB_RUN 64
#define GEMM_SUB_C ((size_t)64 << 10)

/* bias: (optional) MR values added to the tile's rows when add == 0. */
typedef void (*gemm_ukr_fn)(size_t kc, const float *a, const float *b, float *c, size_t ldc, int add,
                            const float *bias);

typedef void (*gemm_ukr_rows_fn)(size_t kc, const float *a, size_t lda, const float *b, float *c, size_t ldc,
                                 int add, const float *bias);

typedef struct gemm_kernel {
    size_t mr, nr;
    gemm_ukr_fn fn;
    gemm_ukr_rows_fn rows; /* (optional) A read in place, unpacked */
    /* (optional) A packed, b-panel rows at stride ldb (nr: packed; else B
     * read in place), clamped to clamp[0 .. 1] when clamp is set */
    void (*bs)(size_t kc, const float *a, const float *b, size_t ldb, float *c, size_t ldc, int add, const float *bias,
               const float *clamp);
    /* (optional) bs on np full row panels of packed A */
    void (*strips)(size_t kc, const float *a, size_t np, const float *b, size_t ldb, float *c, size_t ldc, int add,
                   const float *bias, const float *clamp);
    /* (optional) bs storing only the first `rows` rows of the tile */
    void (*bs_rows)(size_t kc, const float *a, const float *b, size_t ldb, float *c, size_t ldc, int add,
                    const float *bias, const float *clamp, size_t rows);
    /* (optional) rows with the clamp */
    void (*rows_act)(size_t kc, const float *a, size_t lda, const float *b, float *c, size_t ldc, int add,
                     const float *bias, const float *clamp);
    gemm_ukr_fn half;      /* (optional) nr / 2 columns of a packed panel (A packed) */
    /* (optional) 1 to 4 columns of a packed panel (A packed), rows of the tile stored */
    void (*narrow)(size_t kc, const float *a, size_t np, const float *b, size_t cols, float *c, size_t ldc, size_t rows,
                   int add, const float *bias);
    size_t narrow_max; /* the most columns narrow takes */
    const char *name;
} gemm_kernel;

/* Portable kernel: 6 x (2 * GV) with accumulator arrays the compiler keeps
 * in vector registers. */
#if defined(__AVX__)
#define GV 8
#else
#define GV 4
#endif
#define G_MR 6
#define G_NR (2 * GV)

static void ukr_generic(size_t kc, const float *restrict a, const float *restrict b, float *restrict c, size_t ldc,
                        int add, const float *bias)
{
    float c0a[GV] = {0}, c1a[GV] = {0}, c2a[GV] = {0}, c3a[GV] = {0}, c4a[GV] = {0}, c5a[GV] = {0};
    float c0b[GV] = {0}, c1b[GV] = {0}, c2b[GV] = {0}, c3b[GV] = {0}, c4b[GV] = {0}, c5b[GV] = {0};
    for (size_t p = 0; p < kc; p++) {
        const float a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3], a4 = a[4], a5 = a[5];
        for (int j = 0; j < GV; j++) {
            const float bj = b[j], bk = b[j + GV];
            c0a[j] += a0 * bj;
            c0b[j] += a0 * bk;
            c1a[j] += a1 * bj;
            c1b[j] += a1 * bk;
            c2a[j] += a2 * bj;
            c2b[j] += a2 * bk;
            c3a[j] += a3 * bj;
            c3b[j] += a3 * bk;
            c4a[j] += a4 * bj;
            c4b[j] += a4 * bk;
            c5a[j] += a5 * bj;
            c5b[j] += a5 * bk;
        }
        a += G_MR;
        b += G_NR;
    }
    float *const rows[G_MR][2] = {{c0a, c0b}, {c1a, c1b}, {c2a, c2b}, {c3a, c3b}, {c4a, c4b}, {c5a, c5b}};
    for (int i = 0; i < G_MR; i++) {
        float *ci = c + (size_t)i * ldc;
        const float bv = bias ? bias[i] : 0.0f;
        for (int h = 0; h < 2; h++)
            for (int j = 0; j < GV; j++)
                ci[h * GV + j] = add ? ci[h * GV + j] + rows[i][h][j] : bias ? rows[i][h][j] + bv : rows[i][h][j];
    }
}

static atomic_int kernel_choice; /* 0 unknown, 1 portable, 2 AVX2, 3 AVX-512 */

/* The AVX-512 kernels keep the AVX2 layout (6 x 16: packed weights,
 * im2col panels and Winograd's products are the same); the 6 x 8 half
 * panel is not needed, narrow takes every last panel of 1 to 15 columns. */
static const gemm_kernel kern_avx512 = {6, 16, gemm_ukr_avx512_bias, gemm_ukr_avx512_rows_bias, gemm_ukr_avx512_bs,
                                        gemm_ukr_avx512_strips, gemm_ukr_avx512_bs_rows, gemm_ukr_avx512_rows_act,
                                        NULL, gemm_ukr_avx512_narrow, 15, "avx512 12x16"};
static const gemm_kernel kern_avx2 = {6, 16, gemm_ukr_avx2_bias, gemm_ukr_avx2_rows_bias, gemm_ukr_avx2_bs,
                                      gemm_ukr_avx2_strips, gemm_ukr_avx2_bs_rows, gemm_ukr_avx2_rows_act,
                                      gemm_ukr_avx2_6x8_bias, gemm_ukr_avx2_narrow, 4, "avx2-fma 6x16"};
static const gemm_kernel kern_portable = {G_MR, G_NR, ukr_generic, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, "portable"};

static gemm_kernel pick_kernel(void)
{
    int k = atomic_load(&kernel_choice);
    if (!k) {
        k = gemm_avx512_usable() ? 3 : gemm_avx2_usable() ? 2 : 1;
        atomic_store(&kernel_choice, k);
    }
    return k == 3 ? kern_avx512 : k == 2 ? kern_avx2 : kern_portable;
}

static size_t gemm_kc(size_t k)
{
    size_t nb = (k + GEMM_KC_MAX - 1) / GEMM_KC_MAX;
    if (nb < 1)
        nb = 1;
    size_t kc = (k + nb - 1) / nb;
    kc = (kc + 3) / 4 * 4;
    return kc < 4 ? 4 : kc > GEMM_KC_MAX ? GEMM_KC_MAX : kc;
}

op_gemm_layout op_sgemm_layout(size_t k)
{
    gemm_kernel kern = pick_kernel();
    return (op_gemm_layout){gemm_kc(k), kern.mr, kern.nr};
}

const char *op_sgemm_kernel_name(void) { return pick_kernel().name; }

/* ---- activations ---- */

void op_act_apply(const op_act *act, float *x, size_t n)
{
    const float a = act->a, b = act->b;
    switch (act->kind) {
    case OP_ACT_NONE:
        break;
    case OP_ACT_RELU:
        for (size_t i = 0; i < n; i++)
            x[i] = x[i] < 0 ? 0.0f : x[i];
        break;
    case OP_ACT_CLIP:
        for (size_t i = 0; i < n; i++) {
            float v = x[i];
            v = v < a ? a : v;
            x[i] = v > b ? b : v;
        }
        break;
    case OP_ACT_LEAKY_RELU:
        for (size_t i = 0; i < n; i++)
            x[i] = x[i] < 0 ? a * x[i] : x[i];
        break;
    case OP_ACT_HARD_SIGMOID:
        for (size_t i = 0; i < n; i++)
            x[i] = fmaxf(0.0f, fminf(1.0f, a * x[i] + b));
        break;
    case OP_ACT_HARD_SWISH:
        for (size_t i = 0; i < n; i++)
            x[i] = x[i] * fmaxf(0.0f, fminf(1.0f, a * x[i] + b));
        break;
    }
}

/* ---- packing ---- */

/* Rows [r0, r0 + rows) of op(A) (M x K), all K blocks, into panel pi of
 * the packed layout (mr rows per panel), times alpha. */
static void pack_a_panel(const op_gemm *g, size_t kc, size_t mr_w, size_t mpad, size_t pi, float *dst)
{
    size_t r0 = pi * mr_w, rows = g->m - r0 < mr_w ? g->m - r0 : mr_w;
    for (size_t p0 = 0; p0 < g->k; p0 += kc) {
        size_t kcb = g->k - p0 < kc ? g->k - p0 : kc;
        float *d = dst + p0 * mpad + pi * kcb * mr_w;
        for (size_t p = 0; p < kcb; p++) {
            size_t i = 0;
            if (!g->trans_a)
                for (; i < rows; i++)
                    d[p * mr_w + i] = g->alpha * g->a[(r0 + i) * g->lda + p0 + p];
            else
                for (; i < rows; i++)
                    d[p * mr_w + i] = g->alpha * g->a[(p0 + p) * g->lda + r0 + i];
            for (; i < mr_w; i++)
                d[p * mr_w + i] = 0.0f;
        }
    }
}

/* K block [p0, p0 + kc) of panel q of a chunk of op(B). */
static void pack_b_block(const op_gemm *g, op_gemm_layout lay, size_t j0, size_t ncols, size_t npad, size_t q,
                         size_t p0, float *dst)
{
    const size_t nr_w = lay.nr, kc = lay.kc;
    size_t c0 = q * nr_w, cols = ncols - c0 < nr_w ? ncols - c0 : nr_w;
    size_t kcb = g->k - p0 < kc ? g->k - p0 : kc;
    float *d = dst + p0 * npad + q * kcb * nr_w;
    if (!g->trans_b) {
        const float *src = g->b + p0 * g->ldb + j0 + c0;
        if (cols == nr_w && nr_w == 16) {
            /* a constant size: inline moves, not a libc call per row
             * (measured: 11% of a 96 x 196 x 576 product at 1 thread) */
            for (size_t p = 0; p < kcb; p++)
                memcpy(d + p * 16, src + p * g->ldb, 16 * sizeof *d);
            return;
        }
        if (cols == nr_w) {
            for (size_t p = 0; p < kcb; p++)
                memcpy(d + p * nr_w, src + p * g->ldb, nr_w * sizeof *d);
            return;
        }
        for (size_t p = 0; p < kcb; p++) {
            const float *sp = src + p * g->ldb;
            float *dp = d + p * nr_w;
            size_t j = 0;
            for (; j < cols; j++)
                dp[j] = sp[j];
            for (; j < nr_w; j++)
                dp[j] = 0.0f;
        }
    } else {
        const float *src = g->b + (j0 + c0) * g->ldb + p0;
        for (size_t j = 0; j < cols; j++)
            for (size_t p = 0; p < kcb; p++)
                d[p * nr_w + j] = src[j * g->ldb + p];
        for (size_t j = cols; j < nr_w; j++)
            for (size_t p = 0; p < kcb; p++)
                d[p * nr_w + j] = 0.0f;
    }
}

/* Panel q of a chunk of op(B) (an op_gemm_pack_fn; arg is the op_gemm). */
static void pack_b_plain(const void *arg, op_gemm_layout lay, size_t j0, size_t ncols, size_t npad, size_t q,
                         float *dst)
{
    const op_gemm *g = arg;
    for (size_t p0 = 0; p0 < g->k; p0 += lay.kc)
        pack_b_block(g, lay, j0, ncols, npad, q, p0, dst);
}

size_t op_sgemm_pack_a_floats(const op_gemm *g)
{
    gemm_kernel kern = pick_kernel();
    size_t mpad = (g->m + kern.mr - 1) / kern.mr * kern.mr, n;
    return mem_mul(mpad, g->k, &n) ? 0 : n;
}

void op_sgemm_pack_a(const op_gemm *g, float *dst)
{
    gemm_kernel kern = pick_kernel();
    size_t mpad = (g->m + kern.mr - 1) / kern.mr * kern.mr, kc = gemm_kc(g->k);
    for (size_t pi = 0; pi < mpad / kern.mr; pi++)
        pack_a_panel(g, kc, kern.mr, mpad, pi, dst);
}

size_t op_sgemm_pack_b_floats(const op_gemm *g)
{
    gemm_kernel kern = pick_kernel();
    size_t npad = (g->n + kern.nr - 1) / kern.nr * kern.nr, n;
    return mem_mul(npad, g->k, &n) ? 0 : n;
}

void op_sgemm_pack_b(const op_gemm *g, float *dst) { op_sgemm_pack_b_rows(g, dst, NULL, NULL); }

void op_sgemm_pack_b_rows(const op_gemm *g, float *dst, void (*done)(void *arg, const float *rows, size_t floats),
                          void *arg)
{
    op_gemm_layout lay = op_sgemm_layout(g->k);
    size_t npad = (g->n + lay.nr - 1) / lay.nr * lay.nr;
    for (size_t p0 = 0; p0 < g->k; p0 += lay.kc) {
        for (size_t q = 0; q < npad / lay.nr; q++)
            pack_b_block(g, lay, 0, g->n, npad, q, p0, dst);
        size_t kcb = g->k - p0 < lay.kc ? g->k - p0 : lay.kc;
        if (done && !g->trans_b) /* rows p0 .. p0 + kcb of B are packed */
            done(arg, g->b + p0 * g->ldb, kcb * g->ldb);
    }
}

/* ---- the parallel driver ---- */

typedef struct gemm_job {
    const op_gemm *g;
    gemm_kernel kern;
    op_gemm_layout lay;
    const float *apack;   /* NULL: A read in place (kern.rows) */
    float *apack_buf;     /* A packed here for this call */
    size_t mpad;
    float *bpack;         /* packed chunk */
    op_gemm_pack_fn pack; /* packs panels of the chunk; NULL when it is ready */
    int b_in_place;       /* B read where it is (kern.bs) but for a last partial panel */
    int kact;             /* the act (Relu / Clip) is applied as the last K block's tiles are stored */
    float clamp[2];       /* its bounds */
    const void *pack_arg;
    size_t j0, ncols, npad; /* the chunk's columns */
    int add_first;        /* C is accumulated into from the first K block */
    int grid;             /* tasks are (row block, split) pairs, else splits over all row blocks */
    size_t n_mblocks, n_splits; /* split s: panels [s * P / n_splits, (s + 1) * P / n_splits) of the P */
    size_t n_tasks;
} gemm_job;

static void task_pack_a(void *arg, size_t t)
{
    const gemm_job *j = arg;
    size_t panels = j->mpad / j->kern.mr, per = (panels + j->n_tasks - 1) / j->n_tasks;
    for (size_t pi = t * per; pi < panels && pi < (t + 1) * per; pi++)
        pack_a_panel(j->g, j->lay.kc, j->kern.mr, j->mpad, pi, j->apack_buf);
}

static void task_pack_b(void *arg, size_t t)
{
    const gemm_job *j = arg;
    size_t panels = j->npad / j->kern.nr, per = (panels + j->n_tasks - 1) / j->n_tasks;
    for (size_t q = t * per; q < panels && q < (t + 1) * per; q++)
        j->pack(j->pack_arg, j->lay, j->j0, j->ncols, j->npad, q, j->bpack);
}

/* Rows [i0, i1) x columns [c0, c1) of C after the product: the bias (when
 * with_bias), the activation, the fused program. */
static void epilogue(const op_gemm *g, int with_bias, int with_act, size_t i0, size_t i1, size_t c0, size_t c1)
{
    if (!(with_bias && g->bias) && (!with_act || g->act.kind == OP_ACT_NONE) && !g->fuse)
        return;
    void (*fuse)(const op_fuse *, float *, size_t, size_t) = g->fuse_fn ? g->fuse_fn : op_fuse_apply;
    /* whole rows of a dense C: one call of the fused program for them all */
    const int dense = c0 == 0 && c1 == g->n && g->ldc == g->n;
    for (size_t i = i0; i < i1; i++) {
        float *row = g->c + i * g->ldc + c0;
        if (with_bias && g->bias) {
            float bv = g->bias[i];
            for (size_t j = 0; j < c1 - c0; j++)
                row[j] += bv;
        }
        if (with_act)
            op_act_apply(&g->act, row, c1 - c0);
        if (g->fuse && !dense)
            fuse(g->fuse, row, g->fuse_at + i * g->ldc + c0, c1 - c0);
    }
    if (g->fuse && dense && i1 > i0)
        fuse(g->fuse, g->c + i0 * g->ldc, g->fuse_at + i0 * g->ldc, (i1 - i0) * g->n);
}

/* One K block of what compute_block computes. */
typedef struct gemm_kblock {
    size_t i0, i1, p0, kcb;
    int add, kbias;
    const float *ab, *bb; /* packed A (NULL: read in place) and B of the block */
    const float *aedge;   /* the partial row panel packed (A in place) */
    const float *clamp;   /* (lo, hi) of the act, done as the tiles are stored; NULL: by the epilogue */
    float *bedge;         /* B read in place: its last partial panel packed here */
    size_t bedge_q;       /* which panel bedge holds (SIZE_MAX: none yet) */
} gemm_kblock;

/* B read in place: the partial panel q (cols < nr columns) of K block kb
 * packed into kb->bedge with zero columns. */
static const float *edge_panel(const gemm_job *j, gemm_kblock *kb, size_t q, size_t cols)
{
    const op_gemm *g = j->g;
    const size_t nr = j->kern.nr;
    if (kb->bedge_q != q) {
        const float *src = g->b + kb->p0 * g->ldb + j->j0 + q * nr;
        for (size_t p = 0; p < kb->kcb; p++)
            for (size_t c = 0; c < nr; c++)
                kb->bedge[p * nr + c] = c < cols ? src[p * g->ldb + c] : 0.0f;
        kb->bedge_q = q;
    }
    return kb->bedge;
}

/* Panel q of the chunk for every row panel of the block, K block kb: the
 * full row panels in one kernel call, the partial one stored in place
 * when the panel is full, through tmp otherwise. */
static void compute_tiles(const gemm_job *j, gemm_kblock *kb, size_t q)
{
    const op_gemm *g = j->g;
    const size_t mr = j->kern.mr, nr = j->kern.nr, kcb = kb->kcb, p0 = kb->p0;
    const float *ab = kb->ab;
    const int add = kb->add;
    size_t i = kb->i0;
    float tmp[GEMM_TILE_MAX];
    float bedge[GEMM_MR_MAX];
    size_t col = j->j0 + q * nr, cols = j->ncols - q * nr < nr ? j->ncols - q * nr : nr;
    const int half = j->kern.half && cols <= nr / 2;
    /* the b-panel and its row stride: packed, or B in place (a partial
     * panel packed here) */
    const float *bp;
    size_t bs = nr;
    if (j->b_in_place && cols == nr) {
        bp = g->b + p0 * g->ldb + col;
        bs = g->ldb;
    } else {
        bp = j->b_in_place ? edge_panel(j, kb, q, cols) : kb->bb + q * kcb * nr;
    }
    /* Relu / Clip in the kernel's stores of the last K block */
    const float *clamp = kb->clamp;
    if (ab && cols == nr && j->kern.strips && (kb->i1 - i) / mr > 0) {
        /* the full row panels in one call */
        size_t np = (kb->i1 - i) / mr;
        j->kern.strips(kcb, ab + (i / mr) * kcb * mr, np, bp, bs, g->c + i * g->ldc + col, g->ldc, add,
                       kb->kbias && p0 == 0 ? g->bias + i : NULL, clamp);
        i += np * mr;
    }
    for (; i < kb->i1; i += mr) {
        size_t rows = kb->i1 - i < mr ? kb->i1 - i : mr;
        float *cp = g->c + i * g->ldc + col;
        const float *bias = NULL;
        if (kb->kbias && p0 == 0) {
            if (rows == mr) {
                bias = g->bias + i;
            } else {
                for (size_t r = 0; r < mr; r++)
                    bedge[r] = r < rows ? g->bias[i + r] : 0.0f;
                bias = bedge;
            }
        }
        int direct = rows == mr && cols == nr; /* the tile is stored into C itself */
        int clamped = direct;                  /* ... and clamped by the kernel */
        if (!ab && rows == mr) {
            const float *ar = g->a + i * g->lda + p0;
            if (j->kern.rows_act)
                j->kern.rows_act(kcb, ar, g->lda, bp, direct ? cp : tmp, direct ? g->ldc : nr, direct && add, bias,
                                 direct ? clamp : NULL);
            else if (direct)
                j->kern.rows(kcb, ar, g->lda, bp, cp, g->ldc, add, bias);
            else
                j->kern.rows(kcb, ar, g->lda, bp, tmp, nr, 0, bias);
        } else {
            const float *ap = ab ? ab + (i / mr) * kcb * mr : kb->aedge;
            if (direct && j->kern.bs) {
                j->kern.bs(kcb, ap, bp, bs, cp, g->ldc, add, bias, clamp);
            } else if (cols == nr && j->kern.bs_rows) {
                /* a partial row panel stored in place */
                j->kern.bs_rows(kcb, ap, bp, bs, cp, g->ldc, add, bias, clamp, rows);
                direct = clamped = 1;
            } else if (direct) {
                j->kern.fn(kcb, ap, bp, cp, g->ldc, add, bias);
            } else if (half && rows == mr && cols == nr / 2) {
                j->kern.half(kcb, ap, bp, cp, g->ldc, add, bias);
                direct = 1;
            } else if (half) {
                j->kern.half(kcb, ap, bp, tmp, nr, 0, bias);
            } else if (j->kern.bs) {
                j->kern.bs(kcb, ap, bp, bs, tmp, nr, 0, bias, NULL);
            } else {
                j->kern.fn(kcb, ap, bp, tmp, nr, 0, bias);
            }
        }
        if (!direct)
            for (size_t r = 0; r < rows; r++)
                for (size_t c = 0; c < cols; c++)
                    cp[r * g->ldc + c] = add ? cp[r * g->ldc + c] + tmp[r * nr + c] : tmp[r * nr + c];
        if (clamp && !clamped)
            for (size_t r = 0; r < rows; r++)
                op_act_apply(&g->act, cp + r * g->ldc, cols);
    }
}

/* Panel q needs the narrow kernel (a last panel of a few columns, A
 * packed): all the row panels at once. */
static int narrow_panel(const gemm_job *j, const gemm_kblock *kb, size_t q)
{
    size_t cols = j->ncols - q * j->kern.nr < j->kern.nr ? j->ncols - q * j->kern.nr : j->kern.nr;
    return kb->ab && j->kern.narrow && cols <= j->kern.narrow_max;
}

static void compute_narrow(const gemm_job *j, gemm_kblock *kb, size_t q)
{
    const op_gemm *g = j->g;
    const size_t mr = j->kern.mr, nr = j->kern.nr, kcb = kb->kcb;
    size_t col = j->j0 + q * nr, cols = j->ncols - q * nr;
    const float *bp = j->b_in_place ? edge_panel(j, kb, q, cols) : kb->bb + q * kcb * nr;
    j->kern.narrow(kcb, kb->ab + (kb->i0 / mr) * kcb * mr, (kb->i1 - kb->i0 + mr - 1) / mr, bp, cols,
                   g->c + kb->i0 * g->ldc + col, g->ldc, kb->i1 - kb->i0, kb->add,
                   kb->kbias && kb->p0 == 0 ? g->bias + kb->i0 : NULL);
    if (kb->clamp)
        for (size_t r = kb->i0; r < kb->i1; r++)
            op_act_apply(&g->act, g->c + r * g->ldc + col, cols);
}

/* Row block mb x panels [q0, q1) of the chunk, every K block, in runs of
 * panels of about GEMM_EPI floats of C: the epilogue runs on each run of
 * the last K block while its tiles are in cache. */
static void compute_block(const gemm_job *j, size_t mb, size_t q0, size_t q1)
{
    const op_gemm *g = j->g;
    const size_t mr = j->kern.mr, nr = j->kern.nr, kc = j->lay.kc;
    const size_t mpanels = j->mpad / mr;
    gemm_kblock kb;
    kb.i0 = mb * mpanels / j->n_mblocks * mr;
    kb.i1 = (mb + 1) * mpanels / j->n_mblocks * mr;
    if (kb.i1 > g->m)
        kb.i1 = g->m;
    const size_t i0 = kb.i0, i1 = kb.i1;
    float aedge[GEMM_MR_MAX * GEMM_KC_MAX];
    float bedge[GEMM_KC_MAX * GEMM_NR_MAX];
    kb.aedge = aedge;
    kb.bedge = bedge;
    /* The bias goes into the first K block's stores (C is not accumulated
     * into then), the rest of the epilogue after the last one. */
    kb.kbias = g->bias && !j->add_first;
    size_t run = GEMM_EPI / (nr * (i1 - i0));
    if (run < 1)
        run = 1;
    /* Rows of the block taken all at once for each panel, or, for a small
     * K, GEMM_SUB_PANELS row panels at a time across a longer run of
     * panels (see GEMM_SUB_K). */
    size_t sub = i1 - i0;
    if (g->k <= GEMM_SUB_K && i1 - i0 > GEMM_SUB_PANELS * mr) {
        sub = GEMM_SUB_PANELS * mr;
        size_t r = GEMM_SUB_C / (nr * (i1 - i0));
        run = r > GEMM_SUB_RUN ? GEMM_SUB_RUN : r > run ? r : run;
    }
    for (size_t p0 = 0; p0 < g->k; p0 += kc) {
        kb.p0 = p0;
        kb.kcb = g->k - p0 < kc ? g->k - p0 : kc;
        kb.add = p0 > 0 || j->add_first;
        const int last = p0 + kb.kcb >= g->k;
        kb.ab = j->apack ? j->apack + p0 * j->mpad : NULL;
        kb.bb = j->bpack ? j->bpack + p0 * j->npad : NULL;
        kb.bedge_q = SIZE_MAX;
        kb.clamp = last && j->kact ? j->clamp : NULL;
        size_t edge_row = j->apack ? SIZE_MAX : (i1 - i0) / mr * mr + i0; /* first row of a partial panel */
        if (edge_row < i1) {
            /* The last, partial panel of rows: packed here with zero rows. */
            size_t rows = i1 - edge_row;
            for (size_t p = 0; p < kb.kcb; p++)
                for (size_t r = 0; r < mr; r++)
                    aedge[p * mr + r] = r < rows ? g->a[(edge_row + r) * g->lda + p0 + p] : 0.0f;
        }
        for (size_t qs = q0; qs < q1; qs += run) {
            size_t qe = q1 - qs < run ? q1 : qs + run;
            for (size_t ib = i0; ib < i1; ib += sub) {
                kb.i0 = ib;
                kb.i1 = i1 - ib < sub ? i1 : ib + sub;
                for (size_t q = qs; q < qe; q++) {
                    if (narrow_panel(j, &kb, q))
                        compute_narrow(j, &kb, q);
                    else
                        compute_tiles(j, &kb, q);
                }
            }
            if (last) {
                size_t ce = j->j0 + qe * nr < j->j0 + j->ncols ? j->j0 + qe * nr : j->j0 + j->ncols;
                epilogue(g, !kb.kbias, !kb.clamp, i0, i1, j->j0 + qs * nr, ce);
            }
        }
    }
}

static void task_compute(void *arg, size_t t)
{
    const gemm_job *j = arg;
    size_t panels = j->npad / j->kern.nr;
    size_t sp = j->grid ? t % j->n_splits : t;
    size_t q0 = sp * panels / j->n_splits, q1 = (sp + 1) * panels / j->n_splits;
    if (q0 >= q1)
        return;
    if (j->grid) {
        compute_block(j, t / j->n_splits, q0, q1);
        return;
    }
    if (j->pack)
        for (size_t q = q0; q < q1; q++)
            j->pack(j->pack_arg, j->lay, j->j0, j->ncols, j->npad, q, j->bpack);
    for (size_t mb = 0; mb < j->n_mblocks; mb++)
        compute_block(j, mb, q0, q1);
}

static void scale_c(size_t m, size_t n, float beta, float *c, size_t ldc)
{
    for (size_t i = 0; i < m; i++) {
        float *row = c + i * ldc;
        if (beta == 0.0f)
            memset(row, 0, n * sizeof *row);
        else if (beta != 1.0f)
            for (size_t j = 0; j < n; j++)
                row[j] *= beta;
    }
}

/* One row of A (M == 1): y = alpha a op(B) + beta y without packing. Split
 * over columns; each column's sum runs over k in order. */
typedef struct gemv_job {
    const op_gemm *g;
    size_t per;
} gemv_job;

#define GEMV_W 256

static void task_gemv(void *arg, size_t t)
{
    const gemv_job *j = arg;
    const op_gemm *g = j->g;
    size_t c0 = t * j->per, c1 = c0 + j->per < g->n ? c0 + j->per : g->n;
    size_t sa = g->trans_a ? g->lda : 1;
    float acc[GEMV_W];
    for (size_t cb = c0; cb < c1; cb += GEMV_W) {
        size_t w = c1 - cb < GEMV_W ? c1 - cb : GEMV_W;
        if (g->trans_b) {
            for (size_t c = 0; c < w; c++) {
                const float *bc = g->b + (cb + c) * g->ldb;
                float s = 0.0f;
                for (size_t p = 0; p < g->k; p++)
                    s += g->a[p * sa] * bc[p];
                acc[c] = s;
            }
        } else {
            for (size_t c = 0; c < w; c++)
                acc[c] = 0.0f;
            for (size_t p = 0; p < g->k; p++) {
                const float ap = g->a[p * sa], *bp = g->b + p * g->ldb + cb;
                for (size_t c = 0; c < w; c++)
                    acc[c] += ap * bp[c];
            }
        }
        float *y = g->c + cb;
        if (g->beta == 0.0f)
            for (size_t c = 0; c < w; c++)
                y[c] = g->alpha * acc[c];
        else
            for (size_t c = 0; c < w; c++)
                y[c] = g->alpha * acc[c] + g->beta * y[c];
    }
    epilogue(g, 1, 1, 0, 1, c0, c1);
}

static int sgemm_gemv(const op_gemm *g)
{
    gemv_job j = {g, 0};
    size_t tasks = pool_tasks(g->threads, g->n * g->k, (size_t)1 << 15);
    j.per = (g->n + tasks - 1) / tasks;
    j.per = (j.per + 15) / 16 * 16;
    tasks = (g->n + j.per - 1) / j.per;
    pool_run(g->threads, tasks, task_gemv, &j);
    return 0;
}

/* Products with one output row (M == 1, op(B) stored transposed) or one
 * output column (N == 1, A not transposed): every output element is a dot
 * product of a contiguous row (of B, or of A) with the one vector v of the
 * other operand. Split over the outputs; each dot product runs in a fixed
 * order, whatever the split. */
typedef struct dot_job {
    const op_gemm *g;
    const float *u; /* row c of the rows at u + c * su */
    size_t su;
    const float *v; /* contiguous, k floats */
    float *y;       /* output c at y + c * sy */
    size_t sy, cnt, per;
    int avx2, by_rows; /* outputs are rows of C (N == 1), else columns */
} dot_job;

static float dot_portable(const float *a, const float *b, size_t k)
{
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    size_t p = 0;
    for (; p + 8 <= k; p += 8)
        for (size_t l = 0; l < 8; l++)
            acc[l] += a[p + l] * b[p + l];
    for (size_t l = 0; p < k; p++, l++)
        acc[l] += a[p] * b[p];
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

static void task_dot(void *arg, size_t t)
{
    const dot_job *j = arg;
    const op_gemm *g = j->g;
    size_t c0 = t * j->per, c1 = c0 + j->per < j->cnt ? c0 + j->per : j->cnt;
    for (size_t c = c0; c < c1; c++) {
        const float *u = j->u + c * j->su;
        float s = j->avx2 ? gemm_dot_avx2(u, j->v, g->k) : dot_portable(u, j->v, g->k);
        float *y = j->y + c * j->sy;
        *y = g->beta == 0.0f ? g->alpha * s : g->alpha * s + g->beta * *y;
    }
    if (j->by_rows)
        epilogue(g, 1, 1, c0, c1, 0, 1);
    else
        epilogue(g, 1, 1, 0, 1, c0, c1);
}

/* 1 when g was computed by dot products, 0 when it does not fit them, -1
 * when out of memory. */
static int sgemm_dots(const op_gemm *g)
{
    dot_job j;
    memset(&j, 0, sizeof j);
    j.g = g;
    const float *vsrc;
    size_t sv;
    if (g->m == 1 && g->trans_b) {
        j.u = g->b;
        j.su = g->ldb;
        vsrc = g->a;
        sv = g->trans_a ? g->lda : 1;
        j.y = g->c;
        j.sy = 1;
        j.cnt = g->n;
    } else if (g->n == 1 && !g->trans_a) {
        j.u = g->a;
        j.su = g->lda;
        vsrc = g->b;
        sv = g->trans_b ? 1 : g->ldb;
        j.y = g->c;
        j.sy = g->ldc;
        j.cnt = g->m;
        j.by_rows = 1;
    } else {
        return 0;
    }
    float *vbuf = NULL;
    if (sv != 1) {
        size_t bytes;
        if (mem_mul(g->k, sizeof(float), &bytes) || !(vbuf = pool_scratch_get(bytes)))
            return -1;
        for (size_t p = 0; p < g->k; p++)
            vbuf[p] = vsrc[p * sv];
        vsrc = vbuf;
    }
    j.v = vsrc;
    j.avx2 = gemm_avx2_usable(); /* with the AVX-512 GEMM kernels too */
    size_t work;
    if (mem_mul(j.cnt, g->k, &work))
        work = SIZE_MAX;
    size_t tasks = pool_tasks(g->threads, work, (size_t)1 << 15);
    j.per = (j.cnt + tasks - 1) / tasks;
    pool_run(g->threads, (j.cnt + j.per - 1) / j.per, task_dot, &j);
    pool_scratch_put(vbuf);
    return 1;
}

int op_sgemm_run(const op_gemm *g)
{
    if (!g->m || !g->n)
        return 0;
    if (!g->k || (g->alpha == 0.0f && !g->apack)) {
        scale_c(g->m, g->n, g->beta, g->c, g->ldc);
        epilogue(g, 1, 1, 0, g->m, 0, g->n);
        return 0;
    }
    int b_given = g->bpack || g->pack_b;
    if ((g->m == 1 || g->n == 1) && !b_given && !g->apack) {
        int r = sgemm_dots(g);
        if (r)
            return r < 0 ? -1 : 0;
    }
    if (g->m == 1 && !b_given && !g->apack)
        return sgemm_gemv(g);
    gemm_kernel kern = pick_kernel();
    gemm_job j;
    memset(&j, 0, sizeof j);
    j.g = g;
    j.kern = kern;
    j.lay = (op_gemm_layout){gemm_kc(g->k), kern.mr, kern.nr};
    if (g->beta != 0.0f && g->beta != 1.0f)
        scale_c(g->m, g->n, g->beta, g->c, g->ldc);
    j.add_first = g->beta != 0.0f;
    j.mpad = (g->m + kern.mr - 1) / kern.mr * kern.mr;
    size_t asz, npad_all = (g->n + kern.nr - 1) / kern.nr * kern.nr, chunk;
    if (mem_mul(j.mpad, g->k, &asz))
        return -1;
    if (g->bpack)
        chunk = npad_all;
    else {
        chunk = GEMM_B_BUDGET / g->k / kern.nr * kern.nr;
        if (chunk < kern.nr * 4)
            chunk = kern.nr * 4;
        if (chunk > npad_all)
            chunk = npad_all;
    }
    size_t bsz;
    if (mem_mul(chunk, g->k, &bsz))
        return -1;
    /* A read in place pays when it is used against few column panels
     * (packing costs M x K, amortised over N / NR uses); measured. */
    int in_place = !g->apack && kern.rows && !g->trans_a && g->alpha == 1.0f && g->n <= GEMM_IN_PLACE_MAX_N;
    /* B read in place rather than packed when each of its panels serves
     * few row panels (small M, as the 1x1 Convs of mobile networks): the
     * packing would cost about as much as the product. Measured. */
    j.b_in_place = !in_place && !g->trans_b && !g->bpack && !g->pack_b && kern.bs && g->m <= GEMM_B_IN_PLACE_MAX_M;
    if (j.b_in_place)
        chunk = npad_all;
    /* Relu / Clip in the kernels' stores (after the bias: not when the
     * epilogue adds it, C being accumulated into) */
    j.kact = kern.bs && kern.rows_act && (g->act.kind == OP_ACT_RELU || g->act.kind == OP_ACT_CLIP) &&
             !(g->bias && j.add_first);
    j.clamp[0] = g->act.kind == OP_ACT_CLIP ? g->act.a : 0.0f;
    j.clamp[1] = g->act.kind == OP_ACT_CLIP ? g->act.b : INFINITY;
    j.apack_buf = in_place || g->apack ? NULL : pool_scratch_get(asz * sizeof(float));
    j.apack = g->apack ? g->apack : j.apack_buf;
    float *bbuf = g->bpack || j.b_in_place ? NULL : pool_scratch_get(bsz * sizeof(float));
    if ((!in_place && !j.apack) || (!g->bpack && !j.b_in_place && !bbuf)) {
        pool_scratch_put(j.apack_buf);
        pool_scratch_put(bbuf);
        return -1;
    }
    if (j.apack_buf) {
        j.n_tasks = pool_tasks(g->threads, j.mpad / kern.mr, 4);
        pool_run(g->threads, j.n_tasks, task_pack_a, &j);
    }
    /* Row blocks of at most GEMM_MC rows, of equal sizes to a panel (so
     * that tasks over them are balanced): block b holds the row panels
     * [b * P / n, (b + 1) * P / n) of the P panels. */
    const size_t mpanels = j.mpad / kern.mr;
    j.n_mblocks = (mpanels * kern.mr + GEMM_MC - 1) / GEMM_MC;
    const size_t threads = g->threads > 1 ? (size_t)g->threads : 1;
    for (size_t j0 = 0; j0 < g->n; j0 += chunk) {
        j.j0 = j0;
        j.ncols = g->n - j0 < chunk ? g->n - j0 : chunk;
        j.npad = (j.ncols + kern.nr - 1) / kern.nr * kern.nr;
        size_t panels = j.npad / kern.nr;
        j.bpack = g->bpack ? (float *)g->bpack : bbuf;
        j.pack = g->bpack || j.b_in_place ? NULL : g->pack_b ? g->pack_b : pack_b_plain;
        j.pack_arg = g->pack_b ? g->pack_b_arg : (const void *)g;
        /* Column splits. Every split reads all of A: when A fits in L2, a
         * task packs about GEMM_TASK_B floats of B (still in cache when it
         * computes them), and there are about 3 tasks per thread; a larger
         * A is read by as few splits as the threads need. */
        size_t per = panels;
        const int a_fits = asz <= GEMM_A_L2;
        if (j.pack && a_fits) {
            per = GEMM_TASK_B / (g->k * kern.nr);
            if (per < 1)
                per = 1;
        }
        /* Splits of sizes within one panel of each other, about 3 per
         * thread (the tasks are claimed dynamically). */
        j.n_splits = (panels + per - 1) / per;
        if (threads > 1 && j.n_splits < threads * 3)
            j.n_splits = threads * 3 < panels ? threads * 3 : panels;
        else if (threads > 1 && j.n_splits % threads && j.n_splits + threads - j.n_splits % threads <= panels)
            j.n_splits += threads - j.n_splits % threads; /* equal tasks end together */
        j.grid = threads > 1 && (j.n_splits < 2 * threads || !a_fits) && j.n_mblocks > 1;
        if (j.grid) {
            /* Too few panels for the threads: pack B first, then split the
             * rows as well. */
            if (j.pack) {
                /* a small B on this thread: a parallel region costs more */
                j.n_tasks = g->k * j.npad <= GEMM_SMALL_B ? 1 : pool_tasks(g->threads, panels, 1);
                pool_run(j.n_tasks > 1 ? g->threads : 1, j.n_tasks, task_pack_b, &j);
                j.pack = NULL;
            }
            /* About 3 tasks per thread, as row blocks (of 4 panels or
             * more) rather than column splits: every split reads all of A. */
            size_t nmb = threads * 3 < mpanels / 4 ? threads * 3 : mpanels / 4;
            if (nmb > j.n_mblocks)
                j.n_mblocks = nmb;
            size_t splits = (threads * 3 + j.n_mblocks - 1) / j.n_mblocks;
            if (splits > panels)
                splits = panels;
            j.n_splits = splits;
            /* a multiple of the thread count, so that equal tasks end
             * together (11 row blocks on 2 threads: 6 then 5) */
            while (j.n_mblocks * j.n_splits % threads && j.n_mblocks < mpanels)
                j.n_mblocks++;
            pool_run(g->threads, j.n_mblocks * j.n_splits, task_compute, &j);
        } else {
            pool_run(g->threads, j.n_splits, task_compute, &j);
        }
    }
    pool_scratch_put(j.apack_buf);
    pool_scratch_put(bbuf);
    return 0;
}

int op_sgemm(int trans_a, int trans_b, size_t m, size_t n, size_t k, float alpha, const float *a, size_t lda,
             const float *b, size_t ldb, float beta, float *c, size_t ldc)
{
    op_gemm g;
    memset(&g, 0, sizeof g);
    g.trans_a = trans_a;
    g.trans_b = trans_b;
    g.m = m;
    g.n = n;
    g.k = k;
    g.alpha = alpha;
    g.a = a;
    g.lda = lda;
    g.b = b;
    g.ldb = ldb;
    g.beta = beta;
    g.c = c;
    g.ldc = ldc;
    g.threads = 1;
    return op_sgemm_run(&g);
}

/* ------------------------------------------------------- batched products */

/* The shape bookkeeping of a numpy matmul: batch broadcast and 1-D operands. */
typedef struct mm_shape {
    int rank;                     /* output rank */
    int64_t dims[TDM_MAX_RANK];   /* output dims */
    int nb;                       /* batch rank */
    int64_t bdims[TDM_MAX_RANK];  /* broadcast batch dims */
    int64_t sa[TDM_MAX_RANK], sb[TDM_MAX_RANK]; /* batch strides (in matrices) of A and B */
    size_t batches, m, n, k;
} mm_shape;

static tdm_status mm_plan(op_ctx *ctx, const tdm_tensor *a, const tdm_tensor *b, mm_shape *s)
{
    memset(s, 0, sizeof *s);
    if (a->rank < 1 || b->rank < 1)
        return op_fail(ctx, TDM_E_RUNTIME, "inputs must have rank 1 or more (A has %d, B has %d)", a->rank,
                       b->rank);
    int64_t ad[TDM_MAX_RANK + 1], bd[TDM_MAX_RANK + 1];
    int ra = a->rank, rb = b->rank;
    memcpy(ad, a->dims, sizeof(int64_t) * (size_t)ra);
    memcpy(bd, b->dims, sizeof(int64_t) * (size_t)rb);
    if (ra == 1) {
        ad[1] = ad[0];
        ad[0] = 1;
        ra = 2;
    }
    if (rb == 1) {
        bd[1] = 1;
        rb = 2;
    }
    if (ad[ra - 1] != bd[rb - 2])
        return op_fail(ctx, TDM_E_RUNTIME, "inner dimensions differ: A has %lld columns, B has %lld rows",
                       (long long)ad[ra - 1], (long long)bd[rb - 2]);
    s->m = (size_t)ad[ra - 2];
    s->k = (size_t)ad[ra - 1];
    s->n = (size_t)bd[rb - 1];
    if (op_broadcast(ra - 2, ad, rb - 2, bd, &s->nb, s->bdims))
        return op_fail(ctx, TDM_E_RUNTIME, "the batch dimensions of A and B cannot be broadcast");
    op_bcast_strides(s->nb, s->bdims, ra - 2, ad, s->sa);
    op_bcast_strides(s->nb, s->bdims, rb - 2, bd, s->sb);
    if (shape_count(s->nb, s->bdims, &s->batches))
        return op_fail(ctx, TDM_E_NOMEM, "the output is too large");
    s->rank = 0;
    for (int i = 0; i < s->nb; i++)
        s->dims[s->rank++] = s->bdims[i];
    if (a->rank > 1)
        s->dims[s->rank++] = (int64_t)s->m;
    if (b->rank > 1)
        s->dims[s->rank++] = (int64_t)s->n;
    return TDM_OK;
}

/* Offsets (in elements) of batch i's matrices in A and B. */
static void mm_offsets(const mm_shape *s, size_t i, size_t *oa, size_t *ob)
{
    *oa = (size_t)op_bcast_offset(i, s->nb, s->bdims, s->sa) * s->m * s->k;
    *ob = (size_t)op_bcast_offset(i, s->nb, s->bdims, s->sb) * s->k * s->n;
}

/* B and the tensor it is the data of. */
typedef struct fill_b_arg {
    const op_gemm *g;
    const tdm_tensor *t;
} fill_b_arg;

/* Rows of B packed: their pages in a file mapping go (issue 20 item 5:
 * the original is not resident beside its packed form, even while it is
 * being packed). */
static void rows_packed(void *arg, const float *rows, size_t floats)
{
    tensor_drop_span(((const fill_b_arg *)arg)->t, rows, floats * sizeof *rows);
}

static void fill_b(const void *arg, const void *src, float *dst)
{
    const fill_b_arg *f = arg;
    (void)src; /* f->g->b: op_run aligned the input */
    op_sgemm_pack_b_rows(f->g, dst, rows_packed, (void *)(uintptr_t)f);
}

/* g's B packed once when it is the node's constant input `input` and the
 * product packs it at all (M > 1); NULL otherwise. */
static const float *cached_b(const op_ctx *ctx, int input, const op_gemm *g)
{
    if (g->m < 2 || g->n < 2 || !g->k)
        return NULL;
    size_t floats = op_sgemm_pack_b_floats(g);
    if (!floats)
        return NULL;
    op_gemm_layout lay = op_sgemm_layout(g->k);
    uint64_t kv[] = {0x47656d6du /* "Gemm" */, lay.kc, lay.mr, lay.nr, (uint64_t)g->trans_b, g->k, g->n, g->ldb};
    fill_b_arg fa = {g, input < ctx->n_in ? ctx->in[input] : NULL};
    return op_nn_packed_const(ctx, input, op_nn_pack_key(kv, sizeof kv / sizeof kv[0]), floats, fill_b, &fa, 0);
}

/* C = fuse(A B) (row-major, contiguous) on `threads` threads; C starts at
 * flat index at of the output. b_in: the node's input that is B, or -1. */
static int mm_gemm(const op_ctx *ctx, int threads, size_t m, size_t n, size_t k, const float *a, const float *b,
                   int b_in, float *y, size_t at)
{
    op_gemm g = {.m = m, .n = n, .k = k, .alpha = 1.0f, .a = a, .lda = k, .b = b, .ldb = n, .c = y, .ldc = n,
                 .fuse = ctx->fuse, .fuse_at = at, .threads = threads};
    if (b_in >= 0)
        g.bpack = cached_b(ctx, b_in, &g);
    return op_sgemm_run(&g);
}

/* Multiply-adds below which a product of a batch is not worth splitting
 * over threads (the batches are split instead). */
#define GEMM_MM_SMALL ((size_t)1 << 21)

typedef struct mm_job {
    const op_ctx *ctx;
    const mm_shape *s;
    const float *a, *b;
    float *y;
    atomic_int failed;
} mm_job;

static void task_mm(void *arg, size_t i)
{
    mm_job *j = arg;
    const mm_shape *s = j->s;
    size_t oa, ob;
    mm_offsets(s, i, &oa, &ob);
    if (mm_gemm(j->ctx, 1, s->m, s->n, s->k, j->a + oa, j->b + ob, -1, j->y + i * s->m * s->n, i * s->m * s->n))
        atomic_store(&j->failed, 1);
}

/* A batched float product, folding A's batches into M when B is shared.
 * b_in: the node's input that is b (1), or -1 when b is a converted copy. */
static tdm_status mm_f32(op_ctx *ctx, const mm_shape *s, const float *a, const float *b, int b_in, float *y)
{
    int b_shared = 1;
    for (int i = 0; i < s->nb; i++)
        b_shared &= s->sb[i] == 0;
    int a_dense = 1; /* A's batches are all distinct and in order */
    for (int i = 0; i < s->nb; i++)
        a_dense &= s->sa[i] != 0 || s->bdims[i] == 1;
    const int threads = ctx->threads > 0 ? ctx->threads : 1;
    if (b_shared && a_dense) {
        if (mm_gemm(ctx, threads, s->batches * s->m, s->n, s->k, a, b, b_in, y, 0))
            return op_fail(ctx, TDM_E_NOMEM, "out of memory");
        return TDM_OK;
    }
    size_t work;
    if (mem_mul(s->m * s->n, s->k, &work))
        work = SIZE_MAX;
    if (threads > 1 && s->batches > 1 && work < GEMM_MM_SMALL) {
        /* Many small products (attention heads): a batch per task, each
         * on one thread. */
        mm_job j;
        j.ctx = ctx;
        j.s = s;
        j.a = a;
        j.b = b;
        j.y = y;
        atomic_init(&j.failed, 0);
        pool_run(threads, s->batches, task_mm, &j);
        return atomic_load(&j.failed) ? op_fail(ctx, TDM_E_NOMEM, "out of memory") : TDM_OK;
    }
    for (size_t i = 0; i < s->batches; i++) {
        size_t oa, ob;
        mm_offsets(s, i, &oa, &ob);
        if (mm_gemm(ctx, threads, s->m, s->n, s->k, a + oa, b + ob, -1, y + i * s->m * s->n, i * s->m * s->n))
            return op_fail(ctx, TDM_E_NOMEM, "out of memory");
    }
    return TDM_OK;
}

#define MM_LOOP(T, ACC)                                                                                          \
    do {                                                                                                         \
        const T *pa_ = a->data, *pb_ = b->data;                                                                 \
        T *py_ = y->data;                                                                                        \
        for (size_t bi = 0; bi < s.batches; bi++) {                                                              \
            size_t oa_, ob_;                                                                                     \
            mm_offsets(&s, bi, &oa_, &ob_);                                                                      \
            const T *A_ = pa_ + oa_, *B_ = pb_ + ob_;                                                            \
            T *Y_ = py_ + bi * s.m * s.n;                                                                        \
            for (size_t i = 0; i < s.m; i++)                                                                     \
                for (size_t j = 0; j < s.n; j++) {                                                               \
                    ACC sum_ = 0;                                                                                \
                    for (size_t p = 0; p < s.k; p++)                                                             \
                        sum_ += (ACC)A_[i * s.k + p] * (ACC)B_[p * s.n + j];                                     \
                    Y_[i * s.n + j] = (T)sum_;                                                                   \
                }                                                                                                \
        }                                                                                                        \
    } while (0)

tdm_status op_run_MatMul(op_ctx *ctx)
{
    const tdm_tensor *a = op_nn_in(ctx, 0), *b = op_nn_in(ctx, 1);
    if (!a || !b)
        return op_fail(ctx, TDM_E_MODEL, "inputs A and B are required");
    if (a->dtype != b->dtype)
        return op_fail(ctx, TDM_E_RUNTIME, "A is %s but B is %s", tdm_dtype_name(a->dtype),
                       tdm_dtype_name(b->dtype));
    mm_shape s;
    tdm_status st = mm_plan(ctx, a, b, &s);
    if (st)
        return st;
    st = op_out(ctx, 0, a->dtype, s.rank, s.dims);
    if (st)
        return st;
    tdm_tensor *y = ctx->out[0];
    if (!y->count)
        return TDM_OK;
    switch (a->dtype) {
    case TDM_FLOAT:
        return mm_f32(ctx, &s, a->data, b->data, 1, y->data);
    case TDM_FLOAT16:
    case TDM_BFLOAT16: {
        float *fa = op_nn_to_f32(a), *fb = op_nn_to_f32(b);
        float *fy = mem_alloc(y->count * sizeof *fy);
        if (!fa || !fb || !fy)
            st = op_fail(ctx, TDM_E_NOMEM, "out of memory");
        else
            st = mm_f32(ctx, &s, fa, fb, -1, fy);
        if (!st)
            op_nn_from_f32(y, fy);
        mem_free(fa);
        mem_free(fb);
        mem_free(fy);
        return st;
    }
    case TDM_DOUBLE:
        MM_LOOP(double, double);
        return TDM_OK;
    case TDM_INT32:
        MM_LOOP(int32_t, int64_t);
        return TDM_OK;
    case TDM_INT64:
        MM_LOOP(int64_t, uint64_t);
        return TDM_OK;
    case TDM_UINT32:
        MM_LOOP(uint32_t, uint64_t);
        return TDM_OK;
    case TDM_UINT64:
        MM_LOOP(uint64_t, uint64_t);
        return TDM_OK;
    default:
        return op_fail(ctx, TDM_E_UNSUPPORTED, "MatMul does not take %s", tdm_dtype_name(a->dtype));
    }
}

/* ------------------------------------------------------------------- Gemm */

tdm_status op_run_Gemm(op_ctx *ctx)
{
    const tdm_tensor *a = op_nn_in(ctx, 0), *b = op_nn_in(ctx, 1), *c = op_nn_in(ctx, 2);
    if (!a || !b)
        return op_fail(ctx, TDM_E_MODEL, "inputs A and B are required");
    if (a->rank != 2 || b->rank != 2)
        return op_fail(ctx, TDM_E_RUNTIME, "A and B must be matrices (ranks %d and %d)", a->rank, b->rank);
    if (a->dtype != b->dtype || (c && c->dtype != a->dtype))
        return op_fail(ctx, TDM_E_RUNTIME, "A, B and C must have one element type");
    int ta = gr_attr_int(ctx->node, "transA", 0) != 0, tb = gr_attr_int(ctx->node, "transB", 0) != 0;
    float alpha = gr_attr_float(ctx->node, "alpha", 1.0f), beta = gr_attr_float(ctx->node, "beta", 1.0f);
    size_t m = (size_t)(ta ? a->dims[1] : a->dims[0]), k = (size_t)(ta ? a->dims[0] : a->dims[1]);
    size_t kb = (size_t)(tb ? b->dims[1] : b->dims[0]), n = (size_t)(tb ? b->dims[0] : b->dims[1]);
    if (k != kb)
        return op_fail(ctx, TDM_E_RUNTIME, "inner dimensions differ: op(A) has %zu columns, op(B) has %zu rows", k,
                       kb);
    int64_t od[2] = {(int64_t)m, (int64_t)n};
    int64_t cs[2] = {0, 0};
    if (c) {
        int r;
        int64_t bd[TDM_MAX_RANK];
        if (c->rank > 2 || op_broadcast(2, od, c->rank, c->dims, &r, bd) || bd[0] != od[0] || bd[1] != od[1])
            return op_fail(ctx, TDM_E_RUNTIME, "C cannot be broadcast to %zux%zu", m, n);
        op_bcast_strides(2, od, c->rank, c->dims, cs);
    }
    tdm_status st = op_out(ctx, 0, a->dtype, 2, od);
    if (st)
        return st;
    tdm_tensor *y = ctx->out[0];
    if (!y->count)
        return TDM_OK;
    if (a->dtype == TDM_FLOAT || a->dtype == TDM_FLOAT16 || a->dtype == TDM_BFLOAT16) {
        float *fa = NULL, *fb = NULL, *fc = NULL, *fy;
        const float *pa = a->data, *pb = b->data, *pc = c ? c->data : NULL;
        if (a->dtype != TDM_FLOAT) {
            fa = op_nn_to_f32(a);
            fb = op_nn_to_f32(b);
            fc = c ? op_nn_to_f32(c) : NULL;
            fy = mem_alloc(y->count * sizeof *fy);
            if (!fa || !fb || (c && !fc) || !fy) {
                mem_free(fa);
                mem_free(fb);
                mem_free(fc);
                mem_free(fy);
                return op_fail(ctx, TDM_E_NOMEM, "out of memory");
            }
            pa = fa;
            pb = fb;
            pc = fc;
        } else {
            fy = y->data;
        }
        if (pc)
            for (size_t i = 0; i < m; i++)
                for (size_t j = 0; j < n; j++)
                    fy[i * n + j] = pc[(int64_t)i * cs[0] + (int64_t)j * cs[1]];
        op_gemm gm = {.trans_a = ta, .trans_b = tb, .m = m, .n = n, .k = k, .alpha = alpha, .a = pa,
                      .lda = (size_t)a->dims[1], .b = pb, .ldb = (size_t)b->dims[1], .beta = pc ? beta : 0.0f,
                      .c = fy, .ldc = n, .fuse = ctx->fuse, .threads = ctx->threads > 0 ? ctx->threads : 1};
        if (a->dtype == TDM_FLOAT)
            gm.bpack = cached_b(ctx, 1, &gm);
        int rc = op_sgemm_run(&gm);
        if (!rc && a->dtype != TDM_FLOAT)
            op_nn_from_f32(y, fy);
        if (a->dtype != TDM_FLOAT) {
            mem_free(fa);
            mem_free(fb);
            mem_free(fc);
            mem_free(fy);
        }
        return rc ? op_fail(ctx, TDM_E_NOMEM, "out of memory") : TDM_OK;
    }
    if (!(DT_BIT(a->dtype) & (DT_BIT(TDM_DOUBLE) | DT_BIT(TDM_INT32) | DT_BIT(TDM_INT64) | DT_BIT(TDM_UINT32) |
                              DT_BIT(TDM_UINT64))))
        return op_fail(ctx, TDM_E_UNSUPPORTED, "Gemm does not take %s", tdm_dtype_name(a->dtype));
    /* Other types: simple loops through double / int64 accessors. */
    int is_f = a->dtype == TDM_DOUBLE;
    size_t lda = (size_t)a->dims[1], ldb = (size_t)b->dims[1];
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++) {
            size_t cidx = c ? (size_t)((int64_t)i * cs[0] + (int64_t)j * cs[1]) : 0;
            if (is_f) {
                double sum = 0;
                for (size_t p = 0; p < k; p++)
                    sum += tensor_get_f64(a, ta ? p * lda + i : i * lda + p) *
                           tensor_get_f64(b, tb ? j * ldb + p : p * ldb + j);
                double v = alpha * sum + (c ? beta * tensor_get_f64(c, cidx) : 0.0);
                tensor_set_f64(y, i * n + j, v);
            } else {
                int64_t sum = 0;
                for (size_t p = 0; p < k; p++)
                    sum += tensor_get_i64(a, ta ? p * lda + i : i * lda + p) *
                           tensor_get_i64(b, tb ? j * ldb + p : p * ldb + j);
                double v = alpha * (double)sum + (c ? beta * (double)tensor_get_i64(c, cidx) : 0.0);
                tensor_set_i64(y, i * n + j, (int64_t)v);
            }
        }
    return TDM_OK;
}

/* ------------------------------------------------------ integer products */

static int is_int8(tdm_dtype dt) { return dt == TDM_INT8 || dt == TDM_UINT8; }

/* A zero point (or scale) that is a scalar or a 1-D tensor of len values:
 * checks it and returns its length (1 or len). */
static tdm_status per_axis_len(op_ctx *ctx, const tdm_tensor *t, size_t len, const char *what, size_t *out)
{
    *out = 1;
    if (!t)
        return TDM_OK;
    if (t->count == 1)
        return TDM_OK;
    if (t->rank == 1 && t->count == len) {
        *out = len;
        return TDM_OK;
    }
    return op_fail(ctx, TDM_E_RUNTIME, "%s must be a scalar or hold %zu values, not %zu", what, len, t->count);
}

/* int32 accumulations of (A - azp)(B - bzp) for every batch into acc. */
static tdm_status mm_int(op_ctx *ctx, const mm_shape *s, const tdm_tensor *a, const tdm_tensor *b,
                         const tdm_tensor *azp, const tdm_tensor *bzp, int32_t *acc)
{
    size_t na, nb;
    tdm_status st = per_axis_len(ctx, azp, s->m, "a_zero_point", &na);
    if (st)
        return st;
    st = per_axis_len(ctx, bzp, s->n, "b_zero_point", &nb);
    if (st)
        return st;
    int32_t *bcol = mem_alloc(s->k * sizeof *bcol + 1);
    if (!bcol)
        return op_fail(ctx, TDM_E_NOMEM, "out of memory");
    for (size_t bi = 0; bi < s->batches; bi++) {
        size_t oa, ob;
        mm_offsets(s, bi, &oa, &ob);
        int32_t *y = acc + bi * s->m * s->n;
        for (size_t j = 0; j < s->n; j++) {
            int32_t zb = bzp ? nn_ld8(bzp, nb > 1 ? j : 0) : 0;
            for (size_t p = 0; p < s->k; p++)
                bcol[p] = nn_ld8(b, ob + p * s->n + j) - zb;
            for (size_t i = 0; i < s->m; i++) {
                int32_t za = azp ? nn_ld8(azp, na > 1 ? i : 0) : 0;
                int64_t sum = 0;
                for (size_t p = 0; p < s->k; p++)
                    sum += (int64_t)(nn_ld8(a, oa + i * s->k + p) - za) * bcol[p];
                y[i * s->n + j] = (int32_t)(uint32_t)(uint64_t)sum; /* wraps like int32 hardware */
            }
        }
    }
    mem_free(bcol);
    return TDM_OK;
}

tdm_status op_run_MatMulInteger(op_ctx *ctx)
{
    const tdm_tensor *a = op_nn_in(ctx, 0), *b = op_nn_in(ctx, 1);
    const tdm_tensor *azp = op_nn_in(ctx, 2), *bzp = op_nn_in(ctx, 3);
    if (!a || !b)
        return op_fail(ctx, TDM_E_MODEL, "inputs A and B are required");
    if (!is_int8(a->dtype) || !is_int8(b->dtype) || (azp && azp->dtype != a->dtype) ||
        (bzp && bzp->dtype != b->dtype))
        return op_fail(ctx, TDM_E_RUNTIME, "A, B and their zero points must be int8 or uint8 (zero points matching)");
    mm_shape s;
    tdm_status st = mm_plan(ctx, a, b, &s);
    if (st)
        return st;
    st = op_out(ctx, 0, TDM_INT32, s.rank, s.dims);
    if (st)
        return st;
    return mm_int(ctx, &s, a, b, azp, bzp, ctx->out[0]->data);
}

/* Rounds half to even and saturates to the range of dt (int8 / uint8). */
static void store_q(tdm_tensor *y, size_t i, double v)
{
    v = nearbyint(v);
    if (y->dtype == TDM_UINT8) {
        v = v < 0 ? 0 : v > 255 ? 255 : v;
        ((uint8_t *)y->data)[i] = (uint8_t)v;
    } else {
        v = v < -128 ? -128 : v > 127 ? 127 : v;
        ((int8_t *)y->data)[i] = (int8_t)v;
    }
}

static double ldf(const tdm_tensor *t, size_t i) { return tensor_get_f64(t, i); }

tdm_status op_run_QLinearMatMul(op_ctx *ctx)
{
    const tdm_tensor *a = op_nn_in(ctx, 0), *as = op_nn_in(ctx, 1), *azp = op_nn_in(ctx, 2);
    const tdm_tensor *b = op_nn_in(ctx, 3), *bs = op_nn_in(ctx, 4), *bzp = op_nn_in(ctx, 5);
    const tdm_tensor *ys = op_nn_in(ctx, 6), *yzp = op_nn_in(ctx, 7);
    if (!a || !as || !azp || !b || !bs || !bzp || !ys || !yzp)
        return op_fail(ctx, TDM_E_MODEL, "QLinearMatMul needs all 8 inputs");
    if (!is_int8(a->dtype) || !is_int8(b->dtype) || !is_int8(yzp->dtype) || azp->dtype != a->dtype ||
        bzp->dtype != b->dtype)
        return op_fail(ctx, TDM_E_RUNTIME, "a, b, y and their zero points must be int8 or uint8");
    if (!dtype_is_float(as->dtype) || !dtype_is_float(bs->dtype) || !dtype_is_float(ys->dtype))
        return op_fail(ctx, TDM_E_RUNTIME, "the scales must be floating-point tensors");
    if (ys->count != 1 || yzp->count != 1)
        return op_fail(ctx, TDM_E_RUNTIME, "y_scale and y_zero_point must be scalars");
    mm_shape s;
    tdm_status st = mm_plan(ctx, a, b, &s);
    if (st)
        return st;
    size_t nas, nbs;
    if ((st = per_axis_len(ctx, as, s.m, "a_scale", &nas)) || (st = per_axis_len(ctx, bs, s.n, "b_scale", &nbs)))
        return st;
    size_t cnt;
    if (shape_count(s.rank, s.dims, &cnt))
        return op_fail(ctx, TDM_E_NOMEM, "the output is too large");
    int32_t *acc = mem_alloc(cnt * sizeof *acc + 1);
    if (!acc)
        return op_fail(ctx, TDM_E_NOMEM, "out of memory");
    st = mm_int(ctx, &s, a, b, azp, bzp, acc);
    if (!st)
        st = op_out(ctx, 0, yzp->dtype, s.rank, s.dims);
    if (!st) {
        tdm_tensor *y = ctx->out[0];
        double ysc = ldf(ys, 0), yz = ldf(yzp, 0);
        for (size_t bi = 0; bi < s.batches; bi++)
            for (size_t i = 0; i < s.m; i++)
                for (size_t j = 0; j < s.n; j++) {
                    size_t o = (bi * s.m + i) * s.n + j;
                    double sc = (double)(float)(ldf(as, nas > 1 ? i : 0) * ldf(bs, nbs > 1 ? j : 0) / ysc);
                    store_q(y, o, (double)acc[o] * sc + yz);
                }
    }
    mem_free(acc);
    return st;
}

/* ------------------------------------------------------------ infer hooks */

static void infer_matmul_as(op_infer_ctx *ctx, int ib, tdm_dtype dtype)
{
    const gr_type *a = ctx->n_in > 0 ? ctx->in[0] : NULL;
    const gr_type *b = ctx->n_in > ib ? ctx->in[ib] : NULL;
    gr_type *o = &ctx->out[0];
    o->kind = TDM_KIND_TENSOR;
    o->dtype = dtype;
    if (!a || !b || a->rank < 1 || b->rank < 1)
        return;
    gr_dim ad[TDM_MAX_RANK + 1], bd[TDM_MAX_RANK + 1];
    int ra = a->rank, rb = b->rank;
    memcpy(ad, a->dims, sizeof(gr_dim) * (size_t)ra);
    memcpy(bd, b->dims, sizeof(gr_dim) * (size_t)rb);
    if (ra == 1) {
        ad[1] = ad[0];
        ad[0] = (gr_dim){1, NULL};
        ra = 2;
    }
    if (rb == 1) {
        bd[1] = (gr_dim){1, NULL};
        rb = 2;
    }
    int nb = ra - 2 > rb - 2 ? ra - 2 : rb - 2;
    if (nb + 2 > TDM_MAX_RANK)
        return;
    int r = 0;
    for (int i = 0; i < nb; i++) {
        int xa = i - (nb - (ra - 2)), xb = i - (nb - (rb - 2));
        gr_dim da = xa >= 0 ? ad[xa] : (gr_dim){1, NULL};
        gr_dim db = xb >= 0 ? bd[xb] : (gr_dim){1, NULL};
        if (da.v == 1)
            o->dims[r++] = db;
        else if (db.v == 1)
            o->dims[r++] = da;
        else if (da.v >= 0)
            o->dims[r++] = da;
        else if (db.v >= 0)
            o->dims[r++] = db;
        else if (da.sym && db.sym && strcmp(da.sym, db.sym) == 0)
            o->dims[r++] = da;
        else
            o->dims[r++] = (gr_dim){-1, NULL};
    }
    if (a->rank > 1)
        o->dims[r++] = ad[ra - 2];
    if (b->rank > 1)
        o->dims[r++] = bd[rb - 1];
    o->rank = r;
}

tdm_status op_infer_MatMul(op_infer_ctx *ctx)
{
    infer_matmul_as(ctx, 1, ctx->n_in > 0 && ctx->in[0] ? ctx->in[0]->dtype : TDM_UNDEFINED);
    return TDM_OK;
}

tdm_status op_infer_MatMulInteger(op_infer_ctx *ctx)
{
    infer_matmul_as(ctx, 1, TDM_INT32);
    return TDM_OK;
}

tdm_status op_infer_QLinearMatMul(op_infer_ctx *ctx)
{
    infer_matmul_as(ctx, 3, ctx->n_in > 7 && ctx->in[7] ? ctx->in[7]->dtype : TDM_UNDEFINED);
    return TDM_OK;
}

tdm_status op_infer_Gemm(op_infer_ctx *ctx)
{
    const gr_type *a = ctx->n_in > 0 ? ctx->in[0] : NULL;
    const gr_type *b = ctx->n_in > 1 ? ctx->in[1] : NULL;
    gr_type *o = &ctx->out[0];
    o->kind = TDM_KIND_TENSOR;
    o->dtype = a ? a->dtype : TDM_UNDEFINED;
    if (!a || !b || a->rank != 2 || b->rank != 2)
        return TDM_OK;
    int ta = gr_attr_int(ctx->node, "transA", 0) != 0, tb = gr_attr_int(ctx->node, "transB", 0) != 0;
    o->rank = 2;
    o->dims[0] = a->dims[ta ? 1 : 0];
    o->dims[1] = b->dims[tb ? 0 : 1];
    return TDM_OK;
}
