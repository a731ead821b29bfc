/* Unit test of the conformance runner's comparison rules, on hand-made
 * tensors (public API only). */
#include "compare.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static int failures;
static int checks;

static void expect(int cond, const char *what, const char *msg)
{
    checks++;
    if (!cond) {
        failures++;
        printf("FAIL: %s (%s)\n", what, msg);
    }
}

static tdm_tensor *make_f32(int rank, const int64_t *dims, const float *v)
{
    tdm_tensor *t;
    if (tdm_tensor_create(TDM_FLOAT, rank, dims, &t))
        return NULL;
    if (v && tdm_tensor_nbytes(t))
        memcpy(tdm_tensor_data(t), v, tdm_tensor_nbytes(t));
    return t;
}

static tdm_tensor *make_raw(tdm_dtype dt, int rank, const int64_t *dims, const void *v)
{
    tdm_tensor *t;
    if (tdm_tensor_create(dt, rank, dims, &t))
        return NULL;
    memcpy(tdm_tensor_data(t), v, tdm_tensor_nbytes(t));
    return t;
}

/* Compares two one-element float tensors. */
static int same_f(float got, float want)
{
    int64_t d = 1;
    char msg[512];
    tdm_tensor *a = make_f32(1, &d, &got), *b = make_f32(1, &d, &want);
    int r = cmp_values(a, b, CMP_RTOL, CMP_ATOL, msg, sizeof msg, NULL);
    tdm_tensor_destroy(a);
    tdm_tensor_destroy(b);
    return r;
}

int main(void)
{
    char msg[512];
    cmp_report rep;
    const float inf = INFINITY, nan = NAN;

    /* Floats: tolerance |a - b| <= atol + rtol * |b|. */
    expect(same_f(1.0f, 1.0f), "equal floats", "");
    expect(same_f(1.0009f, 1.0f), "within rtol", "");
    expect(!same_f(1.0011f, 1.0f), "beyond rtol", "");
    expect(same_f(5e-8f, 0.0f), "within atol of zero", "");
    expect(!same_f(2e-7f, 0.0f), "beyond atol of zero", "");
    expect(same_f(-1000.9f, -1000.0f), "rtol scales with |expected|", "");
    expect(same_f(nan, nan), "NaN equals NaN", "");
    expect(!same_f(nan, 1.0f), "NaN is not 1", "");
    expect(!same_f(1.0f, nan), "1 is not NaN", "");
    expect(same_f(inf, inf), "+Inf equals +Inf", "");
    expect(same_f(-inf, -inf), "-Inf equals -Inf", "");
    expect(!same_f(inf, -inf), "+Inf is not -Inf", "");
    expect(!same_f(3.4e38f, inf), "large finite is not Inf", "");
    expect(!same_f(inf, 3.4e38f), "Inf is not large finite", "");

    /* Shape and dtype must match. */
    int64_t d23[2] = {2, 3}, d32[2] = {3, 2}, d6 = 6;
    float v6[6] = {1, 2, 3, 4, 5, 6}, w6[6] = {1, 2, 3, 4, 5.5f, 6};
    tdm_tensor *a = make_f32(2, d23, v6), *b = make_f32(2, d32, v6), *c = make_f32(1, &d6, v6);
    tdm_tensor *e = make_f32(2, d23, w6);
    expect(cmp_values(a, a, CMP_RTOL, CMP_ATOL, msg, sizeof msg, &rep), "tensor equals itself", msg);
    expect(!cmp_values(a, b, CMP_RTOL, CMP_ATOL, msg, sizeof msg, NULL) && strstr(msg, "shape"), "2x3 vs 3x2",
           msg);
    expect(!cmp_values(a, c, CMP_RTOL, CMP_ATOL, msg, sizeof msg, NULL) && strstr(msg, "shape"), "2x3 vs 6", msg);
    expect(!cmp_values(e, a, CMP_RTOL, CMP_ATOL, msg, sizeof msg, &rep) && strstr(msg, "[1, 1]") &&
               rep.mismatches == 1 && fabs(rep.max_abs - 0.5) < 1e-9 && strcmp(rep.where, "[1, 1]") == 0,
           "one element off is located at [1, 1]", msg);
    double dv[6] = {1, 2, 3, 4, 5, 6};
    tdm_tensor *dd = make_raw(TDM_DOUBLE, 2, d23, dv);
    expect(!cmp_values(dd, a, CMP_RTOL, CMP_ATOL, msg, sizeof msg, NULL) && strstr(msg, "element type"),
           "double vs float", msg);
    expect(cmp_values(dd, dd, CMP_RTOL, CMP_ATOL, msg, sizeof msg, NULL), "double equals itself", msg);

    /* Scalars (rank 0) and empty tensors. */
    float one = 1.0f;
    tdm_tensor *s0 = make_f32(0, NULL, &one), *s1 = make_f32(1, &(int64_t){1}, &one);
    expect(cmp_values(s0, s0, CMP_RTOL, CMP_ATOL, msg, sizeof msg, NULL), "scalar equals itself", msg);
    expect(!cmp_values(s0, s1, CMP_RTOL, CMP_ATOL, msg, sizeof msg, NULL), "scalar vs [1]", msg);
    int64_t d0[2] = {0, 3};
    tdm_tensor *z0 = make_f32(2, d0, NULL), *z1 = make_f32(2, d0, NULL);
    expect(cmp_values(z0, z1, CMP_RTOL, CMP_ATOL, msg, sizeof msg, NULL), "empty 0x3 tensors", msg);

    /* float16 / bfloat16 compared after widening. */
    int64_t d2 = 2;
    uint16_t h1[2] = {0x3C00, 0x7E00}, h2[2] = {0x3C02, 0x7E00}, h3[2] = {0x3C01, 0x7E00};
    tdm_tensor *ha = make_raw(TDM_FLOAT16, 1, &d2, h1), *hb = make_raw(TDM_FLOAT16, 1, &d2, h2);
    tdm_tensor *hc = make_raw(TDM_FLOAT16, 1, &d2, h3);
    /* 0x3C01 = 1 + 2^-10 = 1.000977: within 1e-3 * 1 + 1e-7; 0x3C02 = 1.00195: outside */
    expect(cmp_values(hc, ha, CMP_RTOL, CMP_ATOL, msg, sizeof msg, NULL), "fp16 one ulp above 1 (and NaN) inside",
           msg);
    expect(!cmp_values(hb, ha, CMP_RTOL, CMP_ATOL, msg, sizeof msg, NULL), "fp16 two ulps above 1 are outside",
           msg);
    uint16_t b1[2] = {0x3F80, 0xFF80}, b2[2] = {0x3F80, 0x7F80};
    tdm_tensor *ba = make_raw(TDM_BFLOAT16, 1, &d2, b1), *bb = make_raw(TDM_BFLOAT16, 1, &d2, b2);
    expect(cmp_values(ba, ba, CMP_RTOL, CMP_ATOL, msg, sizeof msg, NULL), "bf16 equal", msg);
    expect(!cmp_values(ba, bb, CMP_RTOL, CMP_ATOL, msg, sizeof msg, NULL), "bf16 -Inf vs +Inf", msg);

    /* Integers: exact (no tolerance even for large values). */
    int64_t i1[2] = {1000000, -5}, i2[2] = {1000001, -5};
    tdm_tensor *ia = make_raw(TDM_INT64, 1, &d2, i1), *ib = make_raw(TDM_INT64, 1, &d2, i2);
    expect(cmp_values(ia, ia, CMP_RTOL, CMP_ATOL, msg, sizeof msg, NULL), "int64 equal", msg);
    expect(!cmp_values(ib, ia, CMP_RTOL, CMP_ATOL, msg, sizeof msg, NULL) && strstr(msg, "1000001"),
           "int64 off by one", msg);
    uint8_t u1[2] = {255, 0}, u2[2] = {254, 0};
    tdm_tensor *ua = make_raw(TDM_UINT8, 1, &d2, u1), *ub = make_raw(TDM_UINT8, 1, &d2, u2);
    expect(!cmp_values(ub, ua, CMP_RTOL, CMP_ATOL, msg, sizeof msg, NULL) && strstr(msg, "254"),
           "uint8 off by one", msg);
    uint8_t bo1[2] = {1, 0}, bo2[2] = {0, 0};
    tdm_tensor *boa = make_raw(TDM_BOOL, 1, &d2, bo1), *bob = make_raw(TDM_BOOL, 1, &d2, bo2);
    expect(cmp_values(boa, boa, CMP_RTOL, CMP_ATOL, msg, sizeof msg, NULL), "bool equal", msg);
    expect(!cmp_values(bob, boa, CMP_RTOL, CMP_ATOL, msg, sizeof msg, NULL), "bool differs", msg);

    /* Complex: by magnitude of the difference. */
    float c1[4] = {1, 2, 3, 4}, c2[4] = {1, 2.0001f, 3, 4}, c3[4] = {1, 2.5f, 3, 4};
    tdm_tensor *ca = make_raw(TDM_COMPLEX64, 1, &d2, c1), *cb = make_raw(TDM_COMPLEX64, 1, &d2, c2);
    tdm_tensor *cc = make_raw(TDM_COMPLEX64, 1, &d2, c3);
    expect(cmp_values(cb, ca, CMP_RTOL, CMP_ATOL, msg, sizeof msg, NULL), "complex within tolerance", msg);
    expect(!cmp_values(cc, ca, CMP_RTOL, CMP_ATOL, msg, sizeof msg, NULL), "complex beyond tolerance", msg);

    /* Strings: exact. */
    tdm_tensor *sa, *sb;
    tdm_tensor_create(TDM_STRING, 1, &d2, &sa);
    tdm_tensor_create(TDM_STRING, 1, &d2, &sb);
    tdm_tensor_set_string(sa, 0, "héllo", strlen("héllo"));
    tdm_tensor_set_string(sb, 0, "héllo", strlen("héllo"));
    expect(cmp_values(sa, sb, CMP_RTOL, CMP_ATOL, msg, sizeof msg, NULL), "strings equal (one empty)", msg);
    tdm_tensor_set_string(sb, 1, "x", 1);
    expect(!cmp_values(sa, sb, CMP_RTOL, CMP_ATOL, msg, sizeof msg, NULL) && strstr(msg, "\"x\""),
           "strings differ", msg);

    /* Sequences item by item; absent optionals. */
    tdm_tensor *q1, *q2, *q3, *n1, *n2, *t;
    tdm_sequence_create(TDM_FLOAT, &q1);
    tdm_sequence_create(TDM_FLOAT, &q2);
    tdm_sequence_create(TDM_FLOAT, &q3);
    tdm_tensor_clone(a, &t);
    tdm_sequence_append(q1, t);
    tdm_tensor_clone(c, &t);
    tdm_sequence_append(q1, t);
    tdm_tensor_clone(a, &t);
    tdm_sequence_append(q2, t);
    tdm_tensor_clone(e, &t);
    tdm_sequence_append(q2, t);
    tdm_tensor_clone(a, &t);
    tdm_sequence_append(q3, t);
    expect(cmp_values(q1, q1, CMP_RTOL, CMP_ATOL, msg, sizeof msg, NULL), "sequence equals itself", msg);
    expect(!cmp_values(q2, q1, CMP_RTOL, CMP_ATOL, msg, sizeof msg, NULL) && strstr(msg, "item 1"),
           "sequence item 1 differs", msg);
    expect(!cmp_values(q3, q1, CMP_RTOL, CMP_ATOL, msg, sizeof msg, NULL) && strstr(msg, "items"),
           "sequence lengths differ", msg);
    tdm_none_create(&n1);
    tdm_none_create(&n2);
    expect(cmp_values(n1, n2, CMP_RTOL, CMP_ATOL, msg, sizeof msg, NULL), "absent equals absent", msg);
    expect(!cmp_values(a, n1, CMP_RTOL, CMP_ATOL, msg, sizeof msg, NULL), "tensor vs absent", msg);
    expect(!cmp_values(n1, a, CMP_RTOL, CMP_ATOL, msg, sizeof msg, NULL), "absent vs tensor", msg);
    expect(!cmp_values(q1, a, CMP_RTOL, CMP_ATOL, msg, sizeof msg, NULL), "sequence vs tensor", msg);
    expect(!cmp_values(NULL, a, CMP_RTOL, CMP_ATOL, msg, sizeof msg, NULL), "nothing vs tensor", msg);

    tdm_tensor *all[] = {a, b, c, e, dd, s0, s1, z0, z1, ha, hb, hc, ba, bb, ia, ib, ua, ub, boa, bob,
                         ca, cb, cc, sa, sb, q1, q2, q3, n1, n2};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tdm_tensor_destroy(all[i]);
    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
