/* The virtual NPU's rounding (devices/vnpu/vnpu_round.h): the vector loop
 * (AVX2/F16C, when this CPU has it) gives the scalar conversions' bits for
 * every input: every sign and exponent with edge mantissas (zeros,
 * subnormals, ties to even at both precisions, overflow to infinity,
 * infinities, quiet and signalling NaNs with payloads), every fp16 value and
 * the midpoints between neighbours, and a million random bit patterns; at
 * lengths that leave a scalar tail. The same inputs for vnpu_round_same,
 * which finds the first element rounding would change. Also checks a few values against their
 * known roundings, so a wrong scalar reference fails too. */
#include "devices/vnpu/vnpu_round.h"
#include "core/mem.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

static int fails;

static float f_of(uint32_t b)
{
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

static uint32_t b_of(float f)
{
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}

static void compare(const char *what, const float *src, size_t n, tdm_dtype prec)
{
    float *got = mem_alloc(n * sizeof *got + 1), *want = mem_alloc(n * sizeof *want + 1);
    vnpu_round_f32(got, src, n, prec);
    vnpu_round_f32_scalar(want, src, n, prec);
    for (size_t i = 0; i < n; i++)
        if (b_of(got[i]) != b_of(want[i])) {
            printf("FAIL %s %s: input 0x%08x gives 0x%08x, scalar 0x%08x\n", what,
                   prec == TDM_FLOAT16 ? "fp16" : "bf16", b_of(src[i]), b_of(got[i]), b_of(want[i]));
            fails++;
            break;
        }
    /* in place too */
    memcpy(got, src, n * sizeof *got);
    vnpu_round_f32(got, got, n, prec);
    if (n && memcmp(got, want, n * sizeof *got)) {
        printf("FAIL %s %s: in place differs\n", what, prec == TDM_FLOAT16 ? "fp16" : "bf16");
        fails++;
    }
    mem_free(got);
    mem_free(want);
}

/* vnpu_round_same (the check that lets a held input skip its copy): the
 * vector and scalar answers agree with each other and with a plain
 * element-by-element comparison, on src as given (most elements change)
 * and on src rounded (none does) with one element put back at each of the
 * first 40 positions and at a few far ones (it is found there). */
static void same(const char *what, const float *src, size_t n, tdm_dtype prec)
{
    const char *pn = prec == TDM_FLOAT16 ? "fp16" : "bf16";
    float *r = mem_alloc(n * sizeof *r + 1);
    vnpu_round_f32_scalar(r, src, n, prec);
    size_t want = n;
    for (size_t i = 0; i < n && want == n; i++)
        if (b_of(r[i]) != b_of(src[i]))
            want = i;
    size_t got = vnpu_round_same(src, n, prec), sc = vnpu_round_same_scalar(src, n, prec);
    if (got != want || sc != want) {
        printf("FAIL same %s %s: first changed element %zu, vector says %zu, scalar %zu\n", what, pn, want, got, sc);
        fails++;
    }
    if (vnpu_round_same(r, n, prec) != n || vnpu_round_same_scalar(r, n, prec) != n) {
        printf("FAIL same %s %s: a rounded array is not found unchanged\n", what, pn);
        fails++;
    }
    size_t at[44];
    size_t na = 0;
    for (size_t k = 0; k < 40 && k < n; k++)
        at[na++] = k;
    if (n > 100) {
        at[na++] = n / 2;
        at[na++] = n - 9;
        at[na++] = n - 8;
        at[na++] = n - 1;
    }
    for (size_t j = 0; j < na; j++) {
        size_t k = at[j];
        if (b_of(r[k]) == b_of(src[k]))
            continue; /* src[k] is held at prec already */
        float keep = r[k];
        r[k] = src[k];
        size_t v = vnpu_round_same(r, n, prec), s1 = vnpu_round_same_scalar(r, n, prec);
        if (v != k || s1 != k) {
            printf("FAIL same %s %s: input 0x%08x at %zu of %zu found at %zu (vector) / %zu (scalar)\n", what, pn,
                   b_of(src[k]), k, n, v, s1);
            fails++;
        }
        r[k] = keep;
    }
    mem_free(r);
}

static void known(uint32_t in, tdm_dtype prec, uint32_t want)
{
    float x = f_of(in), y;
    vnpu_round_f32(&y, &x, 1, prec);
    float v[9], w[9];
    for (int i = 0; i < 9; i++)
        v[i] = x;
    vnpu_round_f32(w, v, 9, prec); /* through the vector loop when there is one */
    if (b_of(y) != want || b_of(w[0]) != want || b_of(w[8]) != want) {
        printf("FAIL known %s: 0x%08x gives 0x%08x / 0x%08x, want 0x%08x\n", prec == TDM_FLOAT16 ? "fp16" : "bf16",
               in, b_of(y), b_of(w[0]), want);
        fails++;
    }
}

int main(void)
{
    static const uint32_t mans[] = {0,        1,        2,        0x0fff,   0x1000,   0x1001,   0x1fff,
                                    0x2000,   0x3000,   0x6000,   0x7fff,   0x8000,   0x8001,   0x10000,
                                    0x18000,  0x3fffff, 0x400000, 0x400001, 0x7fe000, 0x7ff000, 0x7fffff};
    size_t nm = sizeof mans / sizeof mans[0], n = 512 * nm;
    float *v = mem_alloc(n * sizeof *v);
    size_t k = 0;
    for (uint32_t se = 0; se < 512; se++)
        for (size_t m = 0; m < nm; m++)
            v[k++] = f_of(se << 23 | mans[m]);
    for (int p = 0; p < 2; p++) {
        tdm_dtype prec = p ? TDM_BFLOAT16 : TDM_FLOAT16;
        compare("edges", v, n, prec);
        compare("edges, odd length", v, n - 5, prec);
        same("edges", v, n, prec);
        same("edges, odd length", v + 3, n - 5, prec);
    }
    mem_free(v);

    /* every fp16 value, and the midpoint above each (a tie) and next to it */
    n = 65536 * 3;
    v = mem_alloc(n * sizeof *v);
    for (uint32_t h = 0; h < 65536; h++) {
        float f = fp16_to_f32((uint16_t)h);
        v[3 * h] = f;
        v[3 * h + 1] = f_of(b_of(f) + 0x1000);
        v[3 * h + 2] = f_of(b_of(f) + 0xfff);
    }
    compare("fp16 grid", v, n, TDM_FLOAT16);
    compare("fp16 grid", v, n, TDM_BFLOAT16);
    same("fp16 grid", v, n, TDM_FLOAT16);
    same("fp16 grid", v, n, TDM_BFLOAT16);
    mem_free(v);

    n = 1000003;
    v = mem_alloc(n * sizeof *v);
    uint64_t r = 0x9E3779B97F4A7C15ULL;
    for (size_t i = 0; i < n; i++) {
        r ^= r << 13;
        r ^= r >> 7;
        r ^= r << 17;
        v[i] = f_of((uint32_t)(r >> 20));
    }
    compare("random", v, n, TDM_FLOAT16);
    compare("random", v, n, TDM_BFLOAT16);
    same("random", v, n, TDM_FLOAT16);
    same("random", v, n, TDM_BFLOAT16);
    for (size_t len = 0; len < 20; len++) /* short lengths: only the scalar tail, or one vector step */
        same("random, short", v + 1, len, len % 2 ? TDM_FLOAT16 : TDM_BFLOAT16);
    mem_free(v);

    known(0x3f800000, TDM_FLOAT16, 0x3f800000); /* 1 */
    known(0x3f801000, TDM_FLOAT16, 0x3f800000); /* 1 + 2^-11: tie to even, down */
    known(0x3f803000, TDM_FLOAT16, 0x3f804000); /* 1 + 3 * 2^-11: tie to even, up */
    known(0x477ff000, TDM_FLOAT16, 0x7f800000); /* 65520: overflows to inf */
    known(0x477fe000, TDM_FLOAT16, 0x477fe000); /* 65504, the largest fp16 */
    known(0x33800000, TDM_FLOAT16, 0x33800000); /* 2^-24, the smallest subnormal */
    known(0x33000000, TDM_FLOAT16, 0x00000000); /* 2^-25: tie to even, to zero */
    known(0x33000001, TDM_FLOAT16, 0x33800000); /* just above: up */
    known(0xff800000, TDM_FLOAT16, 0xff800000); /* -inf */
    known(0x7f800001, TDM_FLOAT16, 0x7fc00000); /* signalling NaN: quieted */
    known(0x3f808000, TDM_BFLOAT16, 0x3f800000); /* tie to even, down */
    known(0x3f818000, TDM_BFLOAT16, 0x3f820000); /* tie to even, up */
    known(0x7f7fffff, TDM_BFLOAT16, 0x7f800000); /* FLT_MAX: overflows to inf */
    known(0x7f800001, TDM_BFLOAT16, 0x7fc00000); /* signalling NaN: quieted */
    known(0x00000001, TDM_BFLOAT16, 0x00000000); /* a float subnormal */

    printf("vector rounding: %s; %d failure(s)\n", vnpu_round_avx2_usable() ? "AVX2/F16C" : "scalar only", fails);
    return fails != 0;
}
