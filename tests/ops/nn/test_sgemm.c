/* op_sgemm against a naive double-precision product over shapes that hit
 * every edge of the blocking (partial micro-tiles, several KC/MC/NC blocks),
 * both transposes, alpha/beta and leading dimensions larger than the rows;
 * with "bench" as argument, times a 512x512x512 product and prints GFLOP/s. */
#include "ops/nn.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static unsigned long long rng = 88172645463325252ULL;

static float frand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 11) % 2001) / 1000.0f - 1.0f;
}

static int check(int ta, int tb, size_t m, size_t n, size_t k, float alpha, float beta)
{
    size_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 1, ldc = n + 2;
    size_t ra = ta ? k : m, rb = tb ? n : k;
    float *a = malloc(ra * lda * sizeof *a + 4), *b = malloc(rb * ldb * sizeof *b + 4);
    float *c = malloc(m * ldc * sizeof *c + 4), *c0 = malloc(m * ldc * sizeof *c + 4);
    for (size_t i = 0; i < ra * lda; i++)
        a[i] = frand();
    for (size_t i = 0; i < rb * ldb; i++)
        b[i] = frand();
    for (size_t i = 0; i < m * ldc; i++)
        c[i] = c0[i] = beta == 0.0f ? NAN : frand();
    int bad = 0;
    if (op_sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)) {
        printf("FAIL: op_sgemm returned an error\n");
        bad = 1;
    }
    for (size_t i = 0; i < m && !bad; i++)
        for (size_t j = 0; j < ldc && !bad; j++) {
            double want;
            if (j >= n) {
                want = c0[i * ldc + j]; /* untouched padding */
                if (!(c[i * ldc + j] == want || (isnan(want) && isnan(c[i * ldc + j])))) {
                    printf("FAIL: padding written at %zu,%zu\n", i, j);
                    bad = 1;
                }
                continue;
            }
            double s = 0, mag = 0;
            for (size_t p = 0; p < k; p++) {
                double x = ta ? a[p * lda + i] : a[i * lda + p];
                double y = tb ? b[j * ldb + p] : b[p * ldb + j];
                s += x * y;
                mag += fabs(x * y);
            }
            want = alpha * s + (beta == 0.0f ? 0.0 : beta * c0[i * ldc + j]);
            double tol = 1e-5 * (fabs(alpha) * mag + fabs(beta) + 1.0);
            if (!(fabs(c[i * ldc + j] - want) <= tol)) {
                printf("FAIL: ta=%d tb=%d m=%zu n=%zu k=%zu alpha=%g beta=%g: C[%zu,%zu] = %.7g, want %.7g\n", ta,
                       tb, m, n, k, alpha, beta, i, j, c[i * ldc + j], want);
                bad = 1;
            }
        }
    free(a);
    free(b);
    free(c);
    free(c0);
    return bad;
}

static int bench(void)
{
    size_t n = 512;
    float *a = malloc(n * n * sizeof *a), *b = malloc(n * n * sizeof *b), *c = malloc(n * n * sizeof *c);
    for (size_t i = 0; i < n * n; i++) {
        a[i] = frand();
        b[i] = frand();
    }
    double best = 1e30;
    for (int rep = 0; rep < 5; rep++) {
        struct timespec t0, t1;
        timespec_get(&t0, TIME_UTC);
        op_sgemm(0, 0, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        timespec_get(&t1, TIME_UTC);
        double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        if (s < best)
            best = s;
    }
    printf("sgemm 512x512x512: %.2f ms, %.1f GFLOP/s\n", best * 1e3, 2.0 * (double)(n * n * n) / best * 1e-9);
    free(a);
    free(b);
    free(c);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "bench") == 0)
        return bench();
    static const size_t sizes[][3] = {{1, 1, 1},     {1, 17, 5},    {7, 1, 3},      {6, 16, 8},   {5, 9, 300},
                                      {13, 33, 257}, {121, 19, 40}, {130, 70, 513}, {2, 2050, 3}, {64, 64, 64},
                                      {16, 700, 40}, {40, 301, 17},  {61, 290, 700}};
    int fails = 0, cases = 0;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                fails += check(ta, tb, sizes[s][0], sizes[s][1], sizes[s][2], 1.0f, 0.0f);
                fails += check(ta, tb, sizes[s][0], sizes[s][1], sizes[s][2], 0.5f, 2.0f);
                fails += check(ta, tb, sizes[s][0], sizes[s][1], sizes[s][2], -1.5f, 1.0f);
                cases += 3;
            }
    fails += check(0, 0, 4, 5, 0, 1.0f, 0.5f); /* k = 0: C = beta C */
    cases++;
    printf("%d of %d sgemm cases passed\n", cases - fails, cases);
    return fails ? 1 : 0;
}
