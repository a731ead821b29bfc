/* The AVX2 loops of the fused programs (fuse.h): the same comparisons and
 * the same single float operations as the portable loops, 8 at a time
 * (no FMA: each product is rounded before its sum, as the standalone
 * kernels compute; a Sigmoid is op_ew_sigmoid8, the standalone AVX2
 * Sigmoid's own function, FMAs included). */
#include "ops/fuse_prog.h"
#include "ops/elementwise_avx2.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#include <string.h>

void fuse_relu_avx2(float *y, const float *x, size_t n)
{
    const __m256 z = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        _mm256_storeu_ps(y + i, _mm256_blendv_ps(v, z, _mm256_cmp_ps(v, z, _CMP_LT_OQ)));
    }
    for (; i < n; i++)
        y[i] = x[i] < 0 ? 0.0f : x[i];
}

void fuse_clip_avx2(float *y, const float *x, size_t n, float lo, float hi)
{
    const __m256 l = _mm256_set1_ps(lo), h = _mm256_set1_ps(hi);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        v = _mm256_blendv_ps(v, l, _mm256_cmp_ps(v, l, _CMP_LT_OQ));
        _mm256_storeu_ps(y + i, _mm256_blendv_ps(v, h, _mm256_cmp_ps(v, h, _CMP_GT_OQ)));
    }
    for (; i < n; i++) {
        float v = x[i];
        v = v < lo ? lo : v;
        y[i] = v > hi ? hi : v;
    }
}

/* The binary ops as the binary kernel computes them (Max is
 * (x != x || x > z) ? x : z), on two vectors (vv), a vector and a scalar
 * second (vs) or a scalar first (sv). */
#define FUSE_BIN(NAME, V, S)                                                                                  \
    static void NAME##_vv(float *y, const float *a, const float *b, size_t n)                                 \
    {                                                                                                         \
        size_t i = 0;                                                                                         \
        for (; i + 8 <= n; i += 8) {                                                                          \
            __m256 x = _mm256_loadu_ps(a + i), z = _mm256_loadu_ps(b + i);                                    \
            _mm256_storeu_ps(y + i, V);                                                                       \
        }                                                                                                     \
        for (; i < n; i++) {                                                                                  \
            float x = a[i], z = b[i];                                                                         \
            y[i] = S;                                                                                         \
        }                                                                                                     \
    }                                                                                                         \
    static void NAME##_vs(float *y, const float *a, float s, size_t n)                                        \
    {                                                                                                         \
        const __m256 zs = _mm256_set1_ps(s);                                                                  \
        size_t i = 0;                                                                                         \
        for (; i + 8 <= n; i += 8) {                                                                          \
            __m256 x = _mm256_loadu_ps(a + i), z = zs;                                                        \
            _mm256_storeu_ps(y + i, V);                                                                       \
        }                                                                                                     \
        for (; i < n; i++) {                                                                                  \
            float x = a[i], z = s;                                                                            \
            y[i] = S;                                                                                         \
        }                                                                                                     \
    }                                                                                                         \
    static void NAME##_sv(float *y, float s, const float *b, size_t n)                                        \
    {                                                                                                         \
        const __m256 xs = _mm256_set1_ps(s);                                                                  \
        size_t i = 0;                                                                                         \
        for (; i + 8 <= n; i += 8) {                                                                          \
            __m256 x = xs, z = _mm256_loadu_ps(b + i);                                                        \
            _mm256_storeu_ps(y + i, V);                                                                       \
        }                                                                                                     \
        for (; i < n; i++) {                                                                                  \
            float x = s, z = b[i];                                                                            \
            y[i] = S;                                                                                         \
        }                                                                                                     \
    }

FUSE_BIN(fadd, _mm256_add_ps(x, z), x + z)
FUSE_BIN(fsub, _mm256_sub_ps(x, z), x - z)
FUSE_BIN(fmul, _mm256_mul_ps(x, z), x * z)
FUSE_BIN(fdiv, _mm256_div_ps(x, z), x / z)
FUSE_BIN(fmax,
         _mm256_blendv_ps(z, x, _mm256_or_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q), _mm256_cmp_ps(x, z, _CMP_GT_OQ))),
         (x != x || x > z) ? x : z)
FUSE_BIN(fmin,
         _mm256_blendv_ps(z, x, _mm256_or_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q), _mm256_cmp_ps(x, z, _CMP_LT_OQ))),
         (x != x || x < z) ? x : z)

/* kind: 0 Add, 1 Sub, 2 Mul, 3 Div, 4 Max, 5 Min. */
void fuse_bin_avx2(int kind, float *y, const float *a, const float *b, size_t n)
{
    switch (kind) {
    case 0: fadd_vv(y, a, b, n); break;
    case 1: fsub_vv(y, a, b, n); break;
    case 2: fmul_vv(y, a, b, n); break;
    case 3: fdiv_vv(y, a, b, n); break;
    case 4: fmax_vv(y, a, b, n); break;
    default: fmin_vv(y, a, b, n); break;
    }
}

void fuse_bin_scalar_avx2(int kind, float *y, const float *a, float s, int s_first, size_t n)
{
    switch (kind * 2 + (s_first != 0)) {
    case 0: fadd_vs(y, a, s, n); break;
    case 1: fadd_sv(y, s, a, n); break;
    case 2: fsub_vs(y, a, s, n); break;
    case 3: fsub_sv(y, s, a, n); break;
    case 4: fmul_vs(y, a, s, n); break;
    case 5: fmul_sv(y, s, a, n); break;
    case 6: fdiv_vs(y, a, s, n); break;
    case 7: fdiv_sv(y, s, a, n); break;
    case 8: fmax_vs(y, a, s, n); break;
    case 9: fmax_sv(y, s, a, n); break;
    case 10: fmin_vs(y, a, s, n); break;
    default: fmin_sv(y, s, a, n); break;
    }
}

/* The vector loop of a one-pass program: 32 elements (4 registers) at a
 * time, every step on all 4 before the next step. */
#define LIN4(E)                                                                                               \
    do {                                                                                                      \
        __m256 x, z;                                                                                          \
        x = R ? k0 : c0, z = R ? c0 : k0, c0 = (E);                                                           \
        x = R ? k1 : c1, z = R ? c1 : k1, c1 = (E);                                                           \
        x = R ? k2 : c2, z = R ? c2 : k2, c2 = (E);                                                           \
        x = R ? k3 : c3, z = R ? c3 : k3, c3 = (E);                                                           \
    } while (0)
#define LIN_MAX_E _mm256_blendv_ps(z, x, _mm256_or_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q), _mm256_cmp_ps(x, z, _CMP_GT_OQ)))
#define LIN_MIN_E _mm256_blendv_ps(z, x, _mm256_or_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q), _mm256_cmp_ps(x, z, _CMP_LT_OQ)))

/* 32 elements of y in place; full-size operands at pv[s] + i. */
static inline void lin_block(const fuse_lin *prog, int n_prog, const float *sv, const float *const *pv, size_t i,
                             float *y)
{
    const __m256 zero = _mm256_setzero_ps();
    __m256 c0 = _mm256_loadu_ps(y), c1 = _mm256_loadu_ps(y + 8);
    __m256 c2 = _mm256_loadu_ps(y + 16), c3 = _mm256_loadu_ps(y + 24);
    __m256 s0 = zero, s1 = zero, s2 = zero, s3 = zero;
    for (int s = 0; s < n_prog; s++) {
        const fuse_lin *st = &prog[s];
        __m256 k0, k1, k2, k3;
        if (st->src == 0) {
            k0 = s0, k1 = s1, k2 = s2, k3 = s3;
        } else if (st->src == 1) {
            k0 = k1 = k2 = k3 = _mm256_set1_ps(sv[s]);
        } else {
            const float *p = pv[s] + i;
            k0 = _mm256_loadu_ps(p), k1 = _mm256_loadu_ps(p + 8);
            k2 = _mm256_loadu_ps(p + 16), k3 = _mm256_loadu_ps(p + 24);
        }
        switch (st->op) {
        case FL_SAVE:
            s0 = c0, s1 = c1, s2 = c2, s3 = c3;
            break;
        case FL_RELU:
            c0 = _mm256_blendv_ps(c0, zero, _mm256_cmp_ps(c0, zero, _CMP_LT_OQ));
            c1 = _mm256_blendv_ps(c1, zero, _mm256_cmp_ps(c1, zero, _CMP_LT_OQ));
            c2 = _mm256_blendv_ps(c2, zero, _mm256_cmp_ps(c2, zero, _CMP_LT_OQ));
            c3 = _mm256_blendv_ps(c3, zero, _mm256_cmp_ps(c3, zero, _CMP_LT_OQ));
            break;
        case FL_SIGMOID: /* the standalone AVX2 Sigmoid's function */
            c0 = op_ew_sigmoid8(c0), c1 = op_ew_sigmoid8(c1);
            c2 = op_ew_sigmoid8(c2), c3 = op_ew_sigmoid8(c3);
            break;
        case FL_CLIP: {
            const __m256 l = _mm256_set1_ps(st->p), h = _mm256_set1_ps(st->q);
            c0 = _mm256_blendv_ps(c0, l, _mm256_cmp_ps(c0, l, _CMP_LT_OQ));
            c1 = _mm256_blendv_ps(c1, l, _mm256_cmp_ps(c1, l, _CMP_LT_OQ));
            c2 = _mm256_blendv_ps(c2, l, _mm256_cmp_ps(c2, l, _CMP_LT_OQ));
            c3 = _mm256_blendv_ps(c3, l, _mm256_cmp_ps(c3, l, _CMP_LT_OQ));
            c0 = _mm256_blendv_ps(c0, h, _mm256_cmp_ps(c0, h, _CMP_GT_OQ));
            c1 = _mm256_blendv_ps(c1, h, _mm256_cmp_ps(c1, h, _CMP_GT_OQ));
            c2 = _mm256_blendv_ps(c2, h, _mm256_cmp_ps(c2, h, _CMP_GT_OQ));
            c3 = _mm256_blendv_ps(c3, h, _mm256_cmp_ps(c3, h, _CMP_GT_OQ));
            break;
        }
#define R 0
        case FL_ADD: LIN4(_mm256_add_ps(x, z)); break;
        case FL_SUB: LIN4(_mm256_sub_ps(x, z)); break;
        case FL_MUL: LIN4(_mm256_mul_ps(x, z)); break;
        case FL_DIV: LIN4(_mm256_div_ps(x, z)); break;
        case FL_MAX: LIN4(LIN_MAX_E); break;
        case FL_MIN: LIN4(LIN_MIN_E); break;
#undef R
#define R 1
        case FL_RADD: LIN4(_mm256_add_ps(x, z)); break;
        case FL_RSUB: LIN4(_mm256_sub_ps(x, z)); break;
        case FL_RMUL: LIN4(_mm256_mul_ps(x, z)); break;
        case FL_RDIV: LIN4(_mm256_div_ps(x, z)); break;
        case FL_RMAX: LIN4(LIN_MAX_E); break;
        default: LIN4(LIN_MIN_E); break;
#undef R
        }
    }
    _mm256_storeu_ps(y, c0), _mm256_storeu_ps(y + 8, c1);
    _mm256_storeu_ps(y + 16, c2), _mm256_storeu_ps(y + 24, c3);
}

/* The hardswish of an affine map, then an affine map (PaddlePaddle's
 * Conv -> scale -> hardswish -> scale): pre ? (x * m1 + a1) : x, then
 * v * Clip(v + a3, lo, hi) / d, then post ? (. * m2 + a2) : . (the
 * products commute exactly: m * x == x * m). Straight-line, no dispatch. */
static inline void lin_hswish(const float *k, float lo, float hi, int pre, int post, float *y, size_t n)
{
    const __m256 m1 = _mm256_set1_ps(k[0]), a1 = _mm256_set1_ps(k[1]), a3 = _mm256_set1_ps(k[2]);
    const __m256 d = _mm256_set1_ps(k[3]), m2 = _mm256_set1_ps(k[4]), a2 = _mm256_set1_ps(k[5]);
    const __m256 l = _mm256_set1_ps(lo), h = _mm256_set1_ps(hi);
    size_t i = 0;
#define HSW_V(v)                                                                                              \
    do {                                                                                                      \
        if (pre)                                                                                              \
            v = _mm256_add_ps(_mm256_mul_ps(v, m1), a1);                                                      \
        __m256 t_ = _mm256_add_ps(v, a3);                                                                     \
        t_ = _mm256_blendv_ps(t_, l, _mm256_cmp_ps(t_, l, _CMP_LT_OQ));                                       \
        t_ = _mm256_blendv_ps(t_, h, _mm256_cmp_ps(t_, h, _CMP_GT_OQ));                                       \
        v = _mm256_div_ps(_mm256_mul_ps(v, t_), d);                                                           \
        if (post)                                                                                             \
            v = _mm256_add_ps(_mm256_mul_ps(v, m2), a2);                                                      \
    } while (0)
    for (; i + 16 <= n; i += 16) {
        __m256 v0 = _mm256_loadu_ps(y + i), v1 = _mm256_loadu_ps(y + i + 8);
        HSW_V(v0);
        HSW_V(v1);
        _mm256_storeu_ps(y + i, v0);
        _mm256_storeu_ps(y + i + 8, v1);
    }
    for (; i < n; i++) {
        float v = y[i], t;
        if (pre) {
            v = v * k[0];
            v = v + k[1];
        }
        t = v + k[2];
        t = t < lo ? lo : t;
        t = t > hi ? hi : t;
        v = v * t;
        v = v / k[3];
        if (post) {
            v = v * k[4];
            v = v + k[5];
        }
        y[i] = v;
    }
#undef HSW_V
}

/* Matches prog against lin_hswish: 1 and k[] (when sv), pre, post, or 0. */
static int match_hswish(const fuse_lin *prog, int n_prog, const float *sv, float *k, int *pre, int *post)
{
    int s = 0;
#define IS(S, A, B) ((S) < n_prog && (prog[S].op == (A) || prog[S].op == (B)))
#define SCALAR(S) (prog[S].src == 1)
    *pre = *post = 0;
    k[0] = k[1] = k[2] = k[3] = k[4] = k[5] = 0.0f;
    if (IS(0, FL_MUL, FL_RMUL) && SCALAR(0) && IS(1, FL_ADD, FL_RADD) && SCALAR(1)) {
        if (sv)
            k[0] = sv[0], k[1] = sv[1];
        *pre = 1;
        s = 2;
    }
    if (!(IS(s, FL_SAVE, FL_SAVE) && IS(s + 1, FL_ADD, FL_RADD) && SCALAR(s + 1) && IS(s + 2, FL_CLIP, FL_CLIP) &&
          IS(s + 3, FL_MUL, FL_RMUL) && prog[s + 3].src == 0 && IS(s + 4, FL_DIV, FL_DIV) && SCALAR(s + 4)))
        return 0;
    if (sv)
        k[2] = sv[s + 1], k[3] = sv[s + 4];
    s += 5;
    if (IS(s, FL_MUL, FL_RMUL) && SCALAR(s) && IS(s + 1, FL_ADD, FL_RADD) && SCALAR(s + 1)) {
        if (sv)
            k[4] = sv[s], k[5] = sv[s + 1];
        *post = 1;
        s += 2;
    }
#undef IS
#undef SCALAR
    return s == n_prog;
}

/* Residual Add then Relu: y = Relu(y + r) (r + y: the sum commutes exactly). */
static void lin_add_relu(const float *r, float *y, size_t n)
{
    const __m256 z = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 v0 = _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_loadu_ps(r + i));
        __m256 v1 = _mm256_add_ps(_mm256_loadu_ps(y + i + 8), _mm256_loadu_ps(r + i + 8));
        _mm256_storeu_ps(y + i, _mm256_blendv_ps(v0, z, _mm256_cmp_ps(v0, z, _CMP_LT_OQ)));
        _mm256_storeu_ps(y + i + 8, _mm256_blendv_ps(v1, z, _mm256_cmp_ps(v1, z, _CMP_LT_OQ)));
    }
    for (; i < n; i++) {
        float v = y[i] + r[i];
        y[i] = v < 0 ? 0.0f : v;
    }
}

static int is_add_relu(const fuse_lin *prog, int n_prog)
{
    return n_prog == 2 && (prog[0].op == FL_ADD || prog[0].op == FL_RADD) && prog[0].src == 2 &&
           prog[1].op == FL_RELU;
}

/* SiLU: y = y * Sigmoid(y) (Sigmoid(y) * y: the product commutes exactly),
 * the Sigmoid by op_ew_sigmoid8 as the standalone op computes it; x loaded
 * once, one store. The tail is padded to a vector (lanes are independent). */
static void lin_silu(float *y, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256 v0 = _mm256_loadu_ps(y + i), v1 = _mm256_loadu_ps(y + i + 8);
        _mm256_storeu_ps(y + i, _mm256_mul_ps(v0, op_ew_sigmoid8(v0)));
        _mm256_storeu_ps(y + i + 8, _mm256_mul_ps(v1, op_ew_sigmoid8(v1)));
    }
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(y + i);
        _mm256_storeu_ps(y + i, _mm256_mul_ps(v, op_ew_sigmoid8(v)));
    }
    if (i < n) {
        float buf[8] = {0};
        memcpy(buf, y + i, (n - i) * sizeof *buf);
        const __m256 v = _mm256_loadu_ps(buf);
        _mm256_storeu_ps(buf, _mm256_mul_ps(v, op_ew_sigmoid8(v)));
        memcpy(y + i, buf, (n - i) * sizeof *buf);
    }
}

static int is_silu(const fuse_lin *prog, int n_prog)
{
    return n_prog == 3 && prog[0].op == FL_SAVE && prog[1].op == FL_SIGMOID &&
           (prog[2].op == FL_MUL || prog[2].op == FL_RMUL) && prog[2].src == 0;
}

int fuse_lin_special(const fuse_lin *prog, int n_prog)
{
    float k[6];
    int pre, post;
    return is_add_relu(prog, n_prog) || is_silu(prog, n_prog) || match_hswish(prog, n_prog, NULL, k, &pre, &post);
}

void fuse_lin_avx2(const fuse_lin *prog, int n_prog, const float *sv, const float *const *pv, float *y, size_t n)
{
    size_t i = 0;
    float k[6];
    int pre, post;
    if (is_add_relu(prog, n_prog)) {
        lin_add_relu(pv[0], y, n);
        return;
    }
    if (is_silu(prog, n_prog)) {
        lin_silu(y, n);
        return;
    }
    if (match_hswish(prog, n_prog, sv, k, &pre, &post)) {
        const fuse_lin *c = prog + (pre ? 4 : 2); /* the Clip */
        if (pre && post)
            lin_hswish(k, c->p, c->q, 1, 1, y, n);
        else if (pre)
            lin_hswish(k, c->p, c->q, 1, 0, y, n);
        else if (post)
            lin_hswish(k, c->p, c->q, 0, 1, y, n);
        else
            lin_hswish(k, c->p, c->q, 0, 0, y, n);
        return;
    }
    for (; i + 32 <= n; i += 32)
        lin_block(prog, n_prog, sv, pv, i, y + i);
    if (i == n)
        return;
    /* the tail: padded to a block (the full-size operands copied too) */
    float yb[32] = {0}, ob[FUSE_LIN_MAX][32];
    const float *pb[FUSE_LIN_MAX];
    size_t m = n - i;
    memcpy(yb, y + i, m * sizeof *yb);
    for (int s = 0; s < n_prog; s++) {
        pb[s] = NULL;
        if (prog[s].src == 2 && prog[s].op != FL_SAVE && prog[s].op != FL_RELU && prog[s].op != FL_CLIP &&
            prog[s].op != FL_SIGMOID) {
            memset(ob[s], 0, sizeof ob[s]);
            memcpy(ob[s], pv[s] + i, m * sizeof *yb);
            pb[s] = ob[s];
        }
    }
    lin_block(prog, n_prog, sv, pb, 0, yb);
    memcpy(y + i, yb, m * sizeof *yb);
}

#else /* not built for AVX2: never called (gemm_avx2_usable() is 0) */

/* One element of a one-pass program (fuse_lin): the same comparisons and
 * single operations as the vector loop (FL_SIGMOID never occurs: the
 * programs are compiled only when gemm_avx2_usable()). */
static float lin_elem(const fuse_lin *prog, int n_prog, const float *sv, const float *const *pv, size_t i, float y)
{
    float cur = y, saved = 0.0f;
    for (int s = 0; s < n_prog; s++) {
        const fuse_lin *st = &prog[s];
        float k = st->src == 0 ? saved : st->src == 1 ? sv[s] : pv[s][i], x, z;
        switch (st->op) {
        case FL_SAVE: saved = cur; continue;
        case FL_SIGMOID: continue;
        case FL_RELU: cur = cur < 0 ? 0.0f : cur; continue;
        case FL_CLIP:
            cur = cur < st->p ? st->p : cur;
            cur = cur > st->q ? st->q : cur;
            continue;
        default: break;
        }
        if (st->op >= FL_RADD) {
            x = k;
            z = cur;
        } else {
            x = cur;
            z = k;
        }
        switch (st->op) {
        case FL_ADD: case FL_RADD: cur = x + z; break;
        case FL_SUB: case FL_RSUB: cur = x - z; break;
        case FL_MUL: case FL_RMUL: cur = x * z; break;
        case FL_DIV: case FL_RDIV: cur = x / z; break;
        case FL_MAX: case FL_RMAX: cur = (x != x || x > z) ? x : z; break;
        default: cur = (x != x || x < z) ? x : z; break;
        }
    }
    return cur;
}


void fuse_relu_avx2(float *y, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = x[i] < 0 ? 0.0f : x[i];
}

void fuse_clip_avx2(float *y, const float *x, size_t n, float lo, float hi)
{
    for (size_t i = 0; i < n; i++) {
        float v = x[i];
        v = v < lo ? lo : v;
        y[i] = v > hi ? hi : v;
    }
}

void fuse_bin_avx2(int kind, float *y, const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float x = a[i], z = b[i];
        switch (kind) {
        case 0: y[i] = x + z; break;
        case 1: y[i] = x - z; break;
        case 2: y[i] = x * z; break;
        case 3: y[i] = x / z; break;
        case 4: y[i] = (x != x || x > z) ? x : z; break;
        default: y[i] = (x != x || x < z) ? x : z; break;
        }
    }
}
void fuse_bin_scalar_avx2(int kind, float *y, const float *a, float s, int s_first, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float x = s_first ? s : a[i], z = s_first ? a[i] : s;
        switch (kind) {
        case 0: y[i] = x + z; break;
        case 1: y[i] = x - z; break;
        case 2: y[i] = x * z; break;
        case 3: y[i] = x / z; break;
        case 4: y[i] = (x != x || x > z) ? x : z; break;
        default: y[i] = (x != x || x < z) ? x : z; break;
        }
    }
}
int fuse_lin_special(const fuse_lin *prog, int n_prog)
{
    (void)prog;
    (void)n_prog;
    return 0;
}

void fuse_lin_avx2(const fuse_lin *prog, int n_prog, const float *sv, const float *const *pv, float *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = lin_elem(prog, n_prog, sv, pv, i, y[i]);
}
#endif
