/* The fast CPU kernels: op_sgemm_run against a double-precision reference
 * (every edge of the blocking, in-place and packed A, packed B, bias and
 * fused activations), bit-identical results at 1, 2 and 3 threads, and the
 * thread pool (every task runs once, nested and concurrent regions). */
#include "core/pool.h"
#include "ops/nn.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fails, checks;

#define CHECK(cond, ...)                                                                                         \
    do {                                                                                                         \
        checks++;                                                                                                \
        if (!(cond)) {                                                                                           \
            fails++;                                                                                             \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                                          \
            printf(__VA_ARGS__);                                                                                 \
            printf("\n");                                                                                        \
        }                                                                                                        \
    } while (0)

static unsigned long long rng = 0x2545F4914F6CDD1DULL;

static float frand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 11) % 2001) / 1000.0f - 1.0f;
}

static double act_ref(const op_act *a, double v)
{
    switch (a->kind) {
    case OP_ACT_RELU: return v < 0 ? 0 : v;
    case OP_ACT_CLIP: return v < a->a ? a->a : v > a->b ? a->b : v;
    case OP_ACT_LEAKY_RELU: return v < 0 ? a->a * v : v;
    case OP_ACT_HARD_SIGMOID: return fmax(0, fmin(1, a->a * v + a->b));
    case OP_ACT_HARD_SWISH: return v * fmax(0, fmin(1, a->a * v + a->b));
    default: return v;
    }
}

/* How check_gemm hands the operands over. */
#define P_BPACK 1    /* B prepacked through the documented layout */
#define P_APACK 2    /* A prepacked by op_sgemm_pack_a */
#define P_CALLBACK 4 /* B packed panel by panel by pack_b (as Conv's im2col) */
#define P_FUSE 8     /* a fused program: y -> 2 y + 1, every element once */

/* The fused program of the test: counts the calls per flat index (C[i][j]
 * is at FUSE_AT + i * ldc + j) and maps y to 2 y + 1. */
#define FUSE_AT 1000
static int fuse_token;
static atomic_int *fuse_hits;
static size_t fuse_span;
static atomic_int fuse_bad;

static void test_fuse(const op_fuse *f, float *y, size_t at, size_t n)
{
    if ((const void *)f != (const void *)&fuse_token || at < FUSE_AT || at + n > FUSE_AT + fuse_span) {
        atomic_fetch_add(&fuse_bad, 1);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        atomic_fetch_add(&fuse_hits[at - FUSE_AT + i], 1);
        y[i] = 2.0f * y[i] + 1.0f;
    }
}

typedef struct test_bsrc {
    const float *b;
    size_t ldb, k;
    int tb;
} test_bsrc;

/* An op_gemm_pack_fn writing the documented layout element by element. */
static void test_pack_b(const void *arg, op_gemm_layout lay, size_t j0, size_t ncols, size_t npad, size_t q,
                        float *dst)
{
    const test_bsrc *t = arg;
    for (size_t p = 0; p < t->k; p++)
        for (size_t j = q * lay.nr; j < (q + 1) * lay.nr; j++) {
            size_t p0 = p / lay.kc * lay.kc, kcb = t->k - p0 < lay.kc ? t->k - p0 : lay.kc;
            float v = 0.0f;
            if (j < ncols)
                v = t->tb ? t->b[(j0 + j) * t->ldb + p] : t->b[p * t->ldb + j0 + j];
            dst[p0 * npad + q * kcb * lay.nr + (p - p0) * lay.nr + (j - q * lay.nr)] = v;
        }
}

/* C = fuse(act(alpha op(A) op(B) + beta C + bias)) at 1, 2 and 3 threads,
 * operands handed over as `how` (P_* flags) says. */
static void check_gemm(int ta, int tb, size_t m, size_t n, size_t k, float alpha, float beta, int use_bias,
                       int act_kind, int how)
{
    int prepack = how & P_BPACK;
    size_t lda = (ta ? m : k) + 1, ldb = (tb ? k : n) + 2, ldc = n + 3;
    float *a = malloc(((ta ? k : m) * lda + 1) * sizeof *a), *b = malloc(((tb ? n : k) * ldb + 1) * sizeof *b);
    float *c0 = malloc((m * ldc + 1) * sizeof *c0), *bias = malloc((m + 1) * sizeof *bias);
    float *res[3];
    for (size_t i = 0; i < (ta ? k : m) * lda; i++)
        a[i] = frand();
    for (size_t i = 0; i < (tb ? n : k) * ldb; i++)
        b[i] = frand();
    for (size_t i = 0; i < m * ldc; i++)
        c0[i] = frand();
    for (size_t i = 0; i < m; i++)
        bias[i] = frand();
    op_act act = {act_kind, act_kind == OP_ACT_CLIP ? -0.5f : act_kind == OP_ACT_HARD_SWISH ? 1.0f / 6 : 0.1f,
                  act_kind == OP_ACT_CLIP ? 0.5f : 0.5f};
    op_gemm_layout lay = op_sgemm_layout(k);
    size_t npad = (n + lay.nr - 1) / lay.nr * lay.nr;
    float *packed = NULL;
    if (prepack) {
        packed = calloc(npad * k + 1, sizeof *packed);
        for (size_t p = 0; p < k; p++)
            for (size_t j = 0; j < n; j++) {
                size_t p0 = p / lay.kc * lay.kc, kcb = k - p0 < lay.kc ? k - p0 : lay.kc, q = j / lay.nr;
                packed[p0 * npad + q * kcb * lay.nr + (p - p0) * lay.nr + (j - q * lay.nr)] =
                    tb ? b[j * ldb + p] : b[p * ldb + j];
            }
    }
    float *apacked = NULL;
    if (how & P_APACK) {
        op_gemm pg = {.trans_a = ta, .m = m, .k = k, .alpha = alpha, .a = a, .lda = lda};
        apacked = malloc((op_sgemm_pack_a_floats(&pg) + 1) * sizeof *apacked);
        op_sgemm_pack_a(&pg, apacked);
    }
    test_bsrc bsrc = {b, ldb, k, tb};
    fuse_span = m * ldc;
    fuse_hits = malloc((fuse_span + 1) * sizeof *fuse_hits);
    for (int t = 0; t < 3; t++) {
        for (size_t i = 0; i < fuse_span; i++)
            atomic_init(&fuse_hits[i], 0);
        atomic_store(&fuse_bad, 0);
        res[t] = malloc((m * ldc + 1) * sizeof *res[t]);
        memcpy(res[t], c0, m * ldc * sizeof *c0);
        if (beta == 0.0f)
            for (size_t i = 0; i < m; i++)
                for (size_t j = 0; j < n; j++)
                    res[t][i * ldc + j] = NAN; /* must not be read */
        op_gemm g = {.trans_a = ta, .trans_b = tb, .m = m, .n = n, .k = k, .alpha = alpha, .a = a, .lda = lda,
                     .b = b, .ldb = ldb, .bpack = packed, .beta = beta, .c = res[t], .ldc = ldc,
                     .bias = use_bias ? bias : NULL, .act = act, .threads = t + 1};
        if (how & P_APACK)
            g.apack = apacked;
        if (how & P_CALLBACK) {
            g.pack_b = test_pack_b;
            g.pack_b_arg = &bsrc;
        }
        if (how & P_FUSE) {
            g.fuse = (const op_fuse *)(const void *)&fuse_token;
            g.fuse_at = FUSE_AT;
            g.fuse_fn = test_fuse;
        }
        CHECK(op_sgemm_run(&g) == 0, "op_sgemm_run failed");
        if (how & P_FUSE) {
            int wrong = atomic_load(&fuse_bad);
            for (size_t i = 0; i < m; i++)
                for (size_t j = 0; j < ldc; j++)
                    wrong += atomic_load(&fuse_hits[i * ldc + j]) != (j < n);
            CHECK(!wrong, "m=%zu n=%zu k=%zu threads=%d how=%d: the fused program missed or repeated %d elements",
                  m, n, k, t + 1, how, wrong);
        }
    }
    int bad = 0;
    for (size_t i = 0; i < m && !bad; i++)
        for (size_t j = 0; j < ldc && !bad; j++) {
            float got = res[0][i * ldc + j];
            if (memcmp(&got, &res[1][i * ldc + j], sizeof got) || memcmp(&got, &res[2][i * ldc + j], sizeof got)) {
                CHECK(0, "m=%zu n=%zu k=%zu: C[%zu,%zu] differs between 1, 2 and 3 threads", m, n, k, i, j);
                bad = 1;
                break;
            }
            if (j >= n) {
                CHECK(got == c0[i * ldc + j], "padding written at %zu,%zu", i, j);
                bad |= got != c0[i * ldc + j];
                continue;
            }
            double s = 0, mag = 0;
            for (size_t p = 0; p < k; p++) {
                double x = ta ? a[p * lda + i] : a[i * lda + p], y = tb ? b[j * ldb + p] : b[p * ldb + j];
                s += x * y;
                mag += fabs(x * y);
            }
            double want = alpha * s + (beta == 0.0f ? 0.0 : beta * c0[i * ldc + j]) + (use_bias ? bias[i] : 0.0);
            want = act_ref(&act, want);
            if (how & P_FUSE)
                want = 2.0 * want + 1.0;
            double tol = 1e-5 * (fabs(alpha) * mag + fabs(beta) + 2.0) * (how & P_FUSE ? 2.0 : 1.0);
            if (!(fabs(got - want) <= tol)) {
                CHECK(0, "ta=%d tb=%d m=%zu n=%zu k=%zu alpha=%g beta=%g bias=%d act=%d how=%d: C[%zu,%zu] = %.7g, "
                         "want %.7g",
                      ta, tb, m, n, k, alpha, beta, use_bias, act_kind, how, i, j, got, want);
                bad = 1;
            }
        }
    checks++;
    free(a);
    free(b);
    free(c0);
    free(bias);
    free(packed);
    free(apacked);
    free(fuse_hits);
    for (int t = 0; t < 3; t++)
        free(res[t]);
}

/* ---- pool ---- */

typedef struct count_job {
    atomic_int *hits;
    int nested;
} count_job;

static void count_task(void *arg, size_t i)
{
    count_job *j = arg;
    atomic_fetch_add(&j->hits[i], 1);
    if (j->nested) {
        atomic_int inner[5];
        for (int k = 0; k < 5; k++)
            atomic_init(&inner[k], 0);
        count_job ij = {inner, 0};
        pool_run(2, 5, count_task, &ij); /* runs inline: the pool is busy */
        for (int k = 0; k < 5; k++)
            if (atomic_load(&inner[k]) != 1)
                atomic_fetch_add(&j->hits[i], 100);
    }
}

static int run_counts(int threads, size_t n, int nested)
{
    atomic_int *hits = malloc((n + 1) * sizeof *hits);
    for (size_t i = 0; i < n; i++)
        atomic_init(&hits[i], 0);
    count_job j = {hits, nested};
    pool_run(threads, n, count_task, &j);
    int ok = 1;
    for (size_t i = 0; i < n; i++)
        ok &= atomic_load(&hits[i]) == 1;
    free(hits);
    return ok;
}

static void *concurrent(void *p)
{
    int *ok = p;
    for (int r = 0; r < 200; r++)
        *ok &= run_counts(3, 37, 0);
    return NULL;
}

/* The AVX-512 kernels against the AVX2 ones on the same packed operands:
 * the same FMA chains, so the same bits (every row count of a partial
 * panel, every column count of a last panel, pairs of row panels and a
 * lone one, bias, accumulate, clamp, B packed or in place). */
static void check_avx512_vs_avx2(void)
{
    enum { KC = 37, NP = 5, LDB = 23, LDC = 40 };
    float a[KC * 6 * NP], b[KC * LDB], bias[6 * NP], clamp[2] = {-0.3f, 0.4f};
    float c0[6 * NP * LDC], c1[6 * NP * LDC], c2[6 * NP * LDC];
    for (size_t i = 0; i < sizeof a / sizeof a[0]; i++)
        a[i] = frand();
    for (size_t i = 0; i < sizeof b / sizeof b[0]; i++)
        b[i] = frand();
    for (size_t i = 0; i < sizeof bias / sizeof bias[0]; i++)
        bias[i] = frand();
    for (size_t i = 0; i < sizeof c0 / sizeof c0[0]; i++)
        c0[i] = frand();
    int bad = 0;
#define SAME(what)                                                                                               \
    do {                                                                                                         \
        int diff_ = memcmp(c1, c2, sizeof c1) != 0;                                                              \
        CHECK(!diff_, "avx512 vs avx2: %s differs", what);                                                       \
        bad |= diff_;                                                                                            \
    } while (0)
    for (int add = 0; add < 2 && !bad; add++)
        for (int ub = 0; ub < 2 && !bad; ub++) {
            const float *bi = ub ? bias : NULL;
            for (size_t np = 1; np <= NP; np++) {
                memcpy(c1, c0, sizeof c0);
                memcpy(c2, c0, sizeof c0);
                gemm_ukr_avx2_strips(KC, a, np, b, 16, c1, LDC, add, bi, clamp);
                gemm_ukr_avx512_strips(KC, a, np, b, 16, c2, LDC, add, bi, clamp);
                SAME("strips (B packed)");
                gemm_ukr_avx2_strips(KC, a, np, b, LDB, c1, LDC, add, bi, NULL);
                gemm_ukr_avx512_strips(KC, a, np, b, LDB, c2, LDC, add, bi, NULL);
                SAME("strips (B in place)");
                for (size_t cols = 1; cols < 16; cols++)
                    for (size_t rows = 6 * np - 5; rows <= 6 * np; rows++) {
                        memcpy(c1, c0, sizeof c0);
                        memcpy(c2, c0, sizeof c0);
                        gemm_ukr_avx2_narrow(KC, a, np, b, cols, c1, LDC, rows, add, bi);
                        gemm_ukr_avx512_narrow(KC, a, np, b, cols, c2, LDC, rows, add, bi);
                        SAME("narrow");
                    }
            }
            for (size_t rows = 1; rows <= 6; rows++) {
                memcpy(c1, c0, sizeof c0);
                memcpy(c2, c0, sizeof c0);
                gemm_ukr_avx2_bs_rows(KC, a, b, LDB, c1, LDC, add, bi, clamp, rows);
                gemm_ukr_avx512_bs_rows(KC, a, b, LDB, c2, LDC, add, bi, clamp, rows);
                SAME("bs_rows");
            }
            memcpy(c1, c0, sizeof c0);
            memcpy(c2, c0, sizeof c0);
            gemm_ukr_avx2_bias(KC, a, b, c1, LDC, add, bi);
            gemm_ukr_avx512_bias(KC, a, b, c2, LDC, add, bi);
            gemm_ukr_avx2_bs(KC, a, b, LDB, c1 + 6 * LDC, LDC, add, bi, clamp);
            gemm_ukr_avx512_bs(KC, a, b, LDB, c2 + 6 * LDC, LDC, add, bi, clamp);
            gemm_ukr_avx2_rows_bias(KC, b, LDB, a, c1 + 12 * LDC, LDC, add, bi);
            gemm_ukr_avx512_rows_bias(KC, b, LDB, a, c2 + 12 * LDC, LDC, add, bi);
            gemm_ukr_avx2_rows_act(KC, b, LDB, a, c1 + 18 * LDC, LDC, add, bi, clamp);
            gemm_ukr_avx512_rows_act(KC, b, LDB, a, c2 + 18 * LDC, LDC, add, bi, clamp);
            SAME("bias, bs, rows_bias, rows_act");
        }
#undef SAME
}

/* TANDEM_ISA (ops/isa.c): the kernel it names, or 77 (skipped) when the
 * CPU lacks it; "bogus" must be refused with a sentence. */
static int check_isa(void)
{
    const char *want = getenv("TANDEM_ISA");
    const char *err = op_isa_error();
    if (want && strcmp(want, "bogus") == 0) {
        CHECK(err && strstr(err, "TANDEM_ISA=bogus: not an instruction set"), "TANDEM_ISA=bogus refused: %s",
              err ? err : "(no error)");
        return 0;
    }
    if (want && *want && err) {
        printf("SKIP: %s\n", err);
        return 77;
    }
    CHECK(!err, "no TANDEM_ISA error: %s", err ? err : "");
    if (want && strcmp(want, "portable") == 0)
        CHECK(!strcmp(op_sgemm_kernel_name(), "portable") && !gemm_avx2_usable() && !gemm_avx512_usable(),
              "TANDEM_ISA=portable: the portable kernels (%s)", op_sgemm_kernel_name());
    if (want && strcmp(want, "avx2") == 0)
        CHECK(!strcmp(op_sgemm_kernel_name(), "avx2-fma 6x16") && gemm_avx2_usable() && !gemm_avx512_usable(),
              "TANDEM_ISA=avx2: the AVX2 kernels (%s)", op_sgemm_kernel_name());
    if (want && strcmp(want, "avx512") == 0)
        CHECK(!strcmp(op_sgemm_kernel_name(), "avx512 12x16") && gemm_avx2_usable() && gemm_avx512_usable(),
              "TANDEM_ISA=avx512: the AVX-512 kernels (%s)", op_sgemm_kernel_name());
    /* the AVX-512 kernels keep the AVX2 layout: Winograd's AVX2 path
     * (mr 6, nr 16) and the packed weights stay as they are */
    op_gemm_layout lay = op_sgemm_layout(100);
    if (gemm_avx2_usable())
        CHECK(lay.mr == 6 && lay.nr == 16, "%s: layout %zu x %zu, want 6 x 16", op_sgemm_kernel_name(), lay.mr,
              lay.nr);
    if (!want || !*want)
        CHECK(strcmp(op_sgemm_kernel_name(), gemm_avx512_cpu() ? "avx512 12x16"
                                                : gemm_avx2_cpu() ? "avx2-fma 6x16"
                                                                  : "portable") == 0,
              "default: the best kernel (%s)", op_sgemm_kernel_name());
    return 0;
}

int main(void)
{
    printf("GEMM micro-kernel: %s\n", op_sgemm_kernel_name());
    int isa = check_isa();
    if (isa)
        return isa;
    if (gemm_avx512_cpu())
        check_avx512_vs_avx2();
    /* every remainder of M (mod 12, two row panels), N (mod 16) and K,
     * through the driver: bias or not, accumulated or not, clamped or not */
    for (size_t m = 1; m <= 25; m += 2)
        for (size_t n = 1; n <= 34; n++) {
            size_t k = 1 + (m * 7 + n) % 19;
            check_gemm(0, 0, m, n, k, 1.0f, 0.0f, (int)(n % 2), n % 3 ? OP_ACT_RELU : OP_ACT_NONE, P_APACK);
            check_gemm(0, 0, m + 1, n, k + 5, 1.0f, 1.0f, 1, OP_ACT_CLIP, P_APACK);
            check_gemm(0, 0, m, n, k, 1.0f, 0.5f, 0, OP_ACT_NONE, 0);
        }
    /* the pool */
    CHECK(run_counts(1, 10, 0), "1 thread: every task once");
    CHECK(run_counts(4, 1000, 0), "4 threads: every task once");
    CHECK(run_counts(3, 7, 1), "nested regions run inline, every task once");
    CHECK(run_counts(2, 0, 0), "no tasks");
    int ok1 = 1, ok2 = 1;
    pthread_t t1, t2;
    pthread_create(&t1, NULL, concurrent, &ok1);
    pthread_create(&t2, NULL, concurrent, &ok2);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    CHECK(ok1 && ok2, "two threads running regions at once: every task once");
    CHECK(pool_tasks(1, 100, 1) == 1 && pool_tasks(2, 100, 1) == 8 && pool_tasks(4, 3, 1) == 3,
          "pool_tasks splits");
    void *s1 = pool_scratch_get(1000), *s2 = pool_scratch_get(1 << 20);
    CHECK(s1 && s2 && s1 != s2 && ((size_t)s1 % 64) == 0, "scratch blocks");
    pool_scratch_put(s1);
    pool_scratch_put(s2);

    /* GEMM */
    static const size_t sizes[][3] = {{1, 1, 1},    {1, 300, 70},   {7, 1, 3},     {6, 16, 8},     {5, 9, 300},
                                      {13, 33, 257}, {121, 19, 40}, {130, 70, 513}, {2, 2050, 3},  {64, 260, 64},
                                      {250, 49, 600}, {37, 700, 20}, {64, 3136, 27},  {17, 40, 1000},
                                      {300, 100, 650}, {9, 5000, 5},
                                      {31, 34, 11},   {19, 51, 2},    {44, 36, 330}};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t m = sizes[s][0], n = sizes[s][1], k = sizes[s][2];
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                check_gemm(ta, tb, m, n, k, 1.0f, 0.0f, 0, OP_ACT_NONE, 0);
                check_gemm(ta, tb, m, n, k, 0.5f, 2.0f, 0, OP_ACT_NONE, 0);
            }
        check_gemm(0, 0, m, n, k, 1.0f, 0.0f, 1, OP_ACT_RELU, 0);
        check_gemm(0, 0, m, n, k, 1.0f, 1.0f, 1, OP_ACT_CLIP, 1);
        check_gemm(0, 1, m, n, k, 1.0f, 0.0f, 1, OP_ACT_HARD_SWISH, 1);
        check_gemm(1, 0, m, n, k, -1.5f, 0.0f, 1, OP_ACT_LEAKY_RELU, 0);
        check_gemm(0, 0, m, n, k, 1.0f, 0.0f, 0, OP_ACT_HARD_SIGMOID, 1);
        /* prepacked A, B packed by a callback, fused programs */
        check_gemm(0, 0, m, n, k, 1.0f, 0.0f, 1, OP_ACT_NONE, P_APACK | P_CALLBACK | P_FUSE);
        check_gemm(1, 1, m, n, k, 0.5f, 0.0f, 1, OP_ACT_RELU, P_APACK | P_BPACK | P_FUSE);
        check_gemm(0, 1, m, n, k, 1.0f, 1.0f, 1, OP_ACT_CLIP, P_CALLBACK | P_FUSE);
        check_gemm(0, 0, m, n, k, 1.0f, 0.0f, 1, OP_ACT_NONE, P_FUSE);
        check_gemm(1, 1, m, n, k, 1.0f, 0.5f, 0, OP_ACT_NONE, P_FUSE);
        check_gemm(0, 0, m, n, k, 1.0f, 0.0f, 0, OP_ACT_NONE, P_APACK);
    }
    /* Small M (B read in place, its last partial panel packed), Relu and
     * Clip done in the micro-kernel's stores: every K from 1 to 40, M and
     * N off the tiles, ldb > N (check_gemm), bias or not, C accumulated
     * into or not, the fused program after the clamp. */
    static const size_t small[][2] = {{16, 300}, {5, 257}, {24, 517}, {13, 273}, {64, 290}, {1, 400}, {7, 33}};
    for (size_t s = 0; s < sizeof small / sizeof small[0]; s++)
        for (size_t k = 1; k <= 40; k++) {
            size_t m = small[s][0], n = small[s][1];
            int act = k % 3 == 0 ? OP_ACT_NONE : k % 3 == 1 ? OP_ACT_RELU : OP_ACT_CLIP;
            check_gemm(0, 0, m, n, k, 1.0f, 0.0f, (int)(k % 2), act, P_APACK);
            check_gemm(0, 0, m, n, k, 1.0f, 0.0f, 1, OP_ACT_CLIP, P_APACK | P_FUSE);
            if (k % 4 == 0) {
                check_gemm(0, 0, m, n, k, 0.5f, 0.0f, 1, OP_ACT_RELU, 0);
                check_gemm(0, 0, m, n, k, 1.0f, 1.0f, 1, OP_ACT_CLIP, P_APACK);
                check_gemm(0, 0, m, n, k, 1.0f, 0.5f, 0, OP_ACT_RELU, P_APACK | P_FUSE);
            }
        }
    /* K up to GEMM_SUB_K (64) and more than two row panels: the row block
     * goes two row panels at a time across runs of column panels (partial
     * row and column panels, narrow last panels, A packed or not, B packed,
     * in place or by the callback, the fused program and the epilogue after
     * each run); K = 65 just past it. */
    static const size_t sub[][3] = {{97, 2500, 16}, {40, 1300, 32}, {150, 1100, 64}, {13, 2051, 3},
                                    {200, 700, 1},  {61, 1029, 65}, {126, 1026, 24}};
    for (size_t s = 0; s < sizeof sub / sizeof sub[0]; s++) {
        size_t m = sub[s][0], n = sub[s][1], k = sub[s][2];
        check_gemm(0, 0, m, n, k, 1.0f, 0.0f, 1, OP_ACT_CLIP, P_APACK);
        check_gemm(0, 0, m, n, k, 1.0f, 0.0f, 1, OP_ACT_NONE, P_APACK | P_FUSE);
        check_gemm(0, 0, m, n, k, 1.0f, 1.0f, 0, OP_ACT_RELU, 0);
        check_gemm(0, 1, m, n, k, 0.5f, 0.0f, 1, OP_ACT_NONE, P_CALLBACK | P_FUSE);
        check_gemm(1, 0, m, n, k, 1.0f, 0.0f, 1, OP_ACT_HARD_SWISH, P_BPACK);
    }
    /* several K blocks with the clamp in the last one's stores */
    check_gemm(0, 0, 20, 300, 700, 1.0f, 0.0f, 1, OP_ACT_CLIP, P_APACK);
    check_gemm(0, 0, 100, 300, 700, 1.0f, 0.0f, 1, OP_ACT_RELU, P_APACK);
    check_gemm(0, 0, 100, 200, 700, 1.0f, 1.0f, 1, OP_ACT_CLIP, 0);
    printf("%d of %d checks passed\n", checks - fails, checks);
    return fails ? 1 : 0;
}
